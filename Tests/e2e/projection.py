"""A store subscriber's projected copy, for the subscription-option tests (test_subscription_*.py,
test_client_library.py): the projection of models and paths as docs/PROTOCOL.md ("Subscription
options: models, paths, rate") defines it, the local copy (`View`) that checks and applies each
frame by the protocol's rule for a projected copy, and change sets with the changes they should
bring.
"""

import copy
import time

from conftest import api, json_ok, store_snapshot
from wsclient import FRAME_TIMEOUT, assert_recent_micros, recv_json, send_json

STREAM_TIMEOUT = 15.0     # a run of frames that is already due

KINDS = ("created", "updated", "deleted")
ABSENT = object()


# ---- Projection --------------------------------------------------------

def keys_of(path: str) -> list[str]:
    return path.split(".") if path else []


def lookup(value, keys):
    """The value at `keys` inside `value`, or ABSENT."""
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            return ABSENT
        value = value[key]
    return value


def place(target: dict, keys: list[str], value) -> None:
    """Set `value` at `keys` (non-empty), creating the objects on the way."""
    for key in keys[:-1]:
        if not isinstance(target.get(key), dict):
            target[key] = {}
        target = target[key]
    target[keys[-1]] = value


def follows_model(model: str, patterns) -> bool:
    return patterns is None or any(
        model.startswith(p[:-1]) if p.endswith("*") else model == p for p in patterns)


def project_value(value, paths):
    """A model's value cut down to the listed paths, with the objects that lead to them."""
    if paths is None:
        return copy.deepcopy(value)
    out = {}
    for path in paths:
        found = lookup(value, keys_of(path))
        if found is not ABSENT:
            place(out, keys_of(path), copy.deepcopy(found))
    return out


def project(models: dict, options: dict) -> dict:
    return {model: project_value(value, options.get("paths"))
            for model, value in models.items() if follows_model(model, options.get("models"))}


def projected_store(port: int, store: str, options: dict) -> tuple[int, dict]:
    current = store_snapshot(port, store)
    return current["version"], project(current["models"], options)


def apply_projected(models: dict, change: dict, paths) -> None:
    """PROTOCOL.md's rule for a projected copy: set the value at the path (creating the model and
    the objects on the way) or remove it, then drop the objects a removal left empty above the
    listed path it lies under."""
    model, keys = change["model"], keys_of(change["path"])
    value = copy.deepcopy(change["value"])
    if not keys:
        if change["kind"] == "deleted":
            models.pop(model, None)
        else:
            models[model] = value
        return
    if change["kind"] != "deleted":
        place(models.setdefault(model, {}), keys, value)
        return
    root = models.get(model)
    parent = lookup(root, keys[:-1])
    if isinstance(parent, dict):
        parent.pop(keys[-1], None)
    listed = [keys_of(p) for p in paths or () if keys[:len(keys_of(p))] == keys_of(p)]
    if not listed:
        return
    shortest = min(listed, key=len)
    for depth in range(len(shortest) - 1, 0, -1):
        node = lookup(root, shortest[:depth])
        if node == {}:
            lookup(root, shortest[:depth - 1]).pop(shortest[depth - 1])
        elif node is not ABSENT:
            break


# ---- A subscriber's local copy ----------------------------------------

class View:
    """One store subscription with `options`: its projected copy and the frames it was sent.

    `accept` checks a frame before folding it in: only followed models and paths, a value at ""
    holding nothing unlisted, `old` exactly when asked for and equal to what the copy held, the
    version moving on (and with maxRate, the coalesced frame's fields and its `from`).
    """

    def __init__(self, store: str, options: dict):
        self.store, self.options = store, dict(options)
        self.models: dict = {}
        self.version = -1
        self.epoch = None
        self.frames: list[dict] = []

    @property
    def paths(self):
        return self.options.get("paths")

    def message(self, **extra) -> dict:
        return {"type": "subscribe", "store": self.store, **self.options, **extra}

    @property
    def filter(self) -> dict:
        """The `filter` member the gateway names in a snapshot or a resume's `subscribed`: the
        options' `models` and `paths`, without repeats, in the order of their bytes."""
        return {key: sorted(set(self.options[key])) for key in ("models", "paths") if self.options.get(key) is not None}

    def with_filter(self, frame: dict) -> dict:
        return {**frame, "filter": self.filter} if self.filter else frame

    # -- opening
    def take_snapshot(self, frame: dict, port: int, reset: bool = False) -> None:
        """`frame` must be the store's current snapshot, projected."""
        current = store_snapshot(port, self.store)
        assert frame == self.with_filter({"type": "snapshot", "store": self.store, "version": current["version"],
                                          "epoch": current["epoch"], "reset": reset,
                                          "models": project(current["models"], self.options)}), (frame, current)
        self.models, self.version, self.epoch = copy.deepcopy(frame["models"]), frame["version"], frame["epoch"]

    def subscribe(self, ws, port: int) -> dict:
        send_json(ws, self.message())
        frame = recv_json(ws)
        self.take_snapshot(frame, port)
        return frame

    def resume(self, ws) -> None:
        """Resume after the last version this copy reached, with its epoch."""
        send_json(ws, self.message(since=self.version, epoch=self.epoch))
        assert recv_json(ws) == self.with_filter({"type": "subscribed", "store": self.store, "version": self.version,
                                                  "epoch": self.epoch, "resumed": True})

    # -- frames
    def accept(self, frame: dict, exact_from: bool = False) -> dict:
        options = self.options
        assert frame.get("type") == "changes" and frame.get("store") == self.store, frame
        assert isinstance(frame.get("version"), int) and frame["version"] > self.version, (self.version, frame)
        assert_recent_micros(frame.get("committedAt"))
        rated = "maxRate" in options
        if rated:
            assert frame.get("conflated") is True, frame
            start = frame.get("from")
            assert isinstance(start, int) and not isinstance(start, bool), frame
            # It holds every followed change after `from`: nothing after our version is skipped.
            assert start <= self.version, f"frame from {start} skips past version {self.version}: {frame}"
            if exact_from:
                assert start == self.version, f"frame from {start}, the client had {self.version}: {frame}"
            assert_recent_micros(frame.get("firstCommittedAt"))
            assert frame["firstCommittedAt"] <= frame["committedAt"], frame
        else:
            assert not frame.get("conflated", False), frame
        changes = frame.get("changes")
        assert isinstance(changes, list) and changes, f"a frame that follows nothing: {frame}"
        fields = {"model", "path", "kind", "value"} | ({"old"} if options.get("old") else set())
        for change in changes:
            assert set(change) == fields, change
            model, path, kind = change["model"], change["path"], change["kind"]
            assert kind in KINDS and (kind == "deleted") == (change["value"] is None), change
            assert isinstance(model, str) and follows_model(model, options.get("models")), \
                f"{model!r} is not a followed model: {change}"
            assert isinstance(path, str), change
            if self.paths is not None:
                if path == "":
                    # A whole-model update is cut down to the listed paths; only a coalesced frame
                    # may fold a deletion and a creation into one update at "".
                    assert rated or kind in ("created", "deleted"), f"an update at \"\" must be cut down: {change}"
                    if change["value"] is not None:
                        assert change["value"] == project_value(change["value"], self.paths), \
                            f"unlisted paths sent: {change}"
                else:
                    keys = keys_of(path)
                    assert any(keys[:len(keys_of(p))] == keys_of(p) for p in self.paths), \
                        f"{path!r} is neither a listed path nor under one: {change}"
            held = lookup(self.models[model], keys_of(path)) if model in self.models else ABSENT
            if options.get("old"):
                assert change["old"] == (None if held is ABSENT else held), \
                    f"old {change['old']!r}, but the copy held {held!r}: {change}"
            if not rated:
                assert (kind == "created") == (held is ABSENT), f"kind {kind}, the copy held {held!r}: {change}"
            apply_projected(self.models, change, self.paths)
        self.version = frame["version"]
        self.frames.append(frame)
        return frame

    def read(self, ws, timeout: float = FRAME_TIMEOUT) -> dict:
        return self.accept(recv_json(ws, timeout))

    def read_until(self, ws, version: int, timeout: float = STREAM_TIMEOUT) -> list[dict]:
        """Frames up to exactly `version`."""
        deadline = time.monotonic() + timeout
        frames = []
        while self.version < version:
            frames.append(self.read(ws, max(0.0, deadline - time.monotonic())))
        assert self.version == version, f"went past version {version}: {frames[-1]}"
        return frames


# ---- Change sets and expected changes ---------------------------------

def commit(port: int, store: str, operations: list[dict]) -> int:
    """POST one atomic change set; returns its version. (A merge patch may change several
    places, so the count of changes is not the count of operations.)"""
    body = json_ok(api(port, "POST", f"/api/stores/{store}/changes", {"changes": operations}))
    assert body["store"] == store and isinstance(body["version"], int), body
    return body["version"]


def put(model, value):
    return {"op": "put", "model": model, "value": value}


def patch(model, value):
    return {"op": "patch", "model": model, "value": value}


def set_at(model, path, value):
    return {"op": "set", "model": model, "path": path, "value": value}


def delete(model):
    return {"op": "delete", "model": model}


def change(model, path, kind, value, *old):
    """An expected change; a fifth argument is its `old`."""
    return {"model": model, "path": path, "kind": kind, "value": value, **({"old": old[0]} if old else {})}


def by_place(changes):
    return sorted(changes, key=lambda c: (c["model"], c["path"]))


def shaped(color: str, label: str = "L", width: int = 1, shadow: str = "none") -> dict:
    return {"color": color, "label": label,
            "style": {"border": {"width": width, "color": "#000000"}, "shadow": shadow}}


def run_steps(port: int, store: str, ws, view: View, steps) -> None:
    """Commit each step's operations as one change set. A step that expects changes is answered by
    a frame at its own version holding exactly them, so the steps before it that expect none
    (None) sent nothing; the copy then equals the projected store."""
    quiet = []
    for operations, expected in steps:
        version = commit(port, store, operations)
        if expected is None:
            quiet.append(version)
            continue
        frame = view.read(ws)
        assert frame["version"] == version, (
            f"expected the frame of version {version}; versions {quiet} follow nothing, got {frame}")
        assert by_place(frame["changes"]) == by_place(expected), frame
        assert projected_store(port, store, view.options) == (view.version, view.models)
        quiet = []
    assert not quiet, "a run of steps must end with one that is followed"


def assert_error(frame: dict, code: str, field: str) -> None:
    assert set(frame) == {"type", "code", "message"}, frame
    assert frame["type"] == "error" and frame["code"] == code, frame
    assert isinstance(frame["message"], str) and field in frame["message"], \
        f"the message does not name {field!r}: {frame}"
