"""Store subscription options (docs/PROTOCOL.md, "Subscription options: models, paths, rate"):
model and path filters with projected snapshots, ancestor changes cut down to the listed paths,
old values, change sets that leave nothing, maxRate coalescing under an animate job, filtered
resumes, one encoding for the subscribers that share options, the same options over SSE, and the
errors for bad values.

Every subscriber keeps a local copy (`View`): the projected snapshot, then each frame checked and
applied by the protocol's rule for a projected copy, so that its models can be compared with the
store's own state, projected here the same way.
"""

import copy
import json
import threading
import time
from urllib.parse import quote

import pytest

from conftest import api, assert_json_error, http_client_request, json_ok, stop_job, store_snapshot, wait_for
from test_sse import CurlEvents, HttpEvents, assert_stream_head
from wsclient import (
    EPOCH,
    FRAME_TIMEOUT,
    assert_recent_micros,
    connect,
    new_store,
    recv_json,
    recv_text,
    send_json,
    unique,
)

STREAM_TIMEOUT = 15.0     # a run of frames that is already due
JOB_RATE = 500            # change sets a second the animate job is asked for
RATE = 5                  # maxRate of the subscribers that watch the job
# Delivery allowance on top of 1 / maxRate: the loop's turn, the socket and the reader thread, on
# a debug build beside a job committing 500 change sets a second. Kept below 1 / RATE, so a frame
# held back for one interval too many still fails.
LATE_SLACK = 0.150
JOB_VERSIONS = 1000       # versions the job commits while those subscribers watch
JOB_TIMEOUT = 30.0        # the job commits them
RATE_MODELS = 48          # models of the animated store
BURST_RATE = 1            # maxRate of the tests that fold a burst into one frame
BURST_BUDGET = 0.8        # seconds a burst may take to commit and still fall in one interval
BURST_SPACING = 0.9       # least spacing of two frames at BURST_RATE, as arrival times show it

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

    # -- opening
    def take_snapshot(self, frame: dict, port: int, reset: bool = False) -> None:
        """`frame` must be the store's current snapshot, projected."""
        current = store_snapshot(port, self.store)
        assert frame == {"type": "snapshot", "store": self.store, "version": current["version"],
                         "epoch": current["epoch"], "reset": reset,
                         "models": project(current["models"], self.options)}, (frame, current)
        self.models, self.version, self.epoch = copy.deepcopy(frame["models"]), frame["version"], frame["epoch"]

    def subscribe(self, ws, port: int) -> dict:
        send_json(ws, self.message())
        frame = recv_json(ws)
        self.take_snapshot(frame, port)
        return frame

    def resume(self, ws) -> None:
        """Resume after the last version this copy reached, with its epoch."""
        send_json(ws, self.message(since=self.version, epoch=self.epoch))
        assert recv_json(ws) == {"type": "subscribed", "store": self.store, "version": self.version,
                                 "epoch": self.epoch, "resumed": True}

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


# ---- Models and paths --------------------------------------------------

def test_models_filter_follows_listed_ids_and_prefixes(server):
    port = server.port
    ids = ["solo", "solo2", "tile-1", "tile-12", "tile-1-b", "tile-2", "xtile-1"]
    store = new_store(port, {m: {"n": 0, "name": m} for m in ids}, prefix="models")
    view = View(store, {"models": ["solo", "tile-1*"]})
    with connect(port) as ws:
        view.subscribe(ws, port)
        assert set(view.models) == {"solo", "tile-1", "tile-12", "tile-1-b"}
        run_steps(port, store, ws, view, [
            ([set_at("solo2", "n", 1), set_at("tile-2", "n", 1), set_at("xtile-1", "n", 1)], None),
            ([set_at("tile-12", "n", 2), set_at("tile-2", "n", 2)], [change("tile-12", "n", "updated", 2)]),
            ([put("tile-3", {"n": 3})], None),
            ([put("tile-1new", {"n": 3})], [change("tile-1new", "", "created", {"n": 3})]),
            ([delete("solo"), delete("solo2")], [change("solo", "", "deleted", None)]),
            ([patch("tile-1", {"name": None, "extra": {"k": 1}})],
             [change("tile-1", "name", "deleted", None), change("tile-1", "extra", "created", {"k": 1})]),
            ([put("tile-1-b", {"n": 9})], [change("tile-1-b", "", "updated", {"n": 9})]),
            ([put("solo", {"back": True})], [change("solo", "", "created", {"back": True})]),
        ])


def test_paths_filter_cuts_ancestor_changes_down_to_the_listed_paths(server):
    port = server.port
    store = new_store(port, {"a": shaped("#aa0000"), "b": shaped("#bb0000"), "c": shaped("#cc0000")},
                      prefix="paths")
    view = View(store, {"models": ["a", "b", "d"], "paths": ["color", "style.border"]})
    border = {"width": 1, "color": "#000000"}
    with connect(port) as ws:
        view.subscribe(ws, port)
        assert view.models == {"a": {"color": "#aa0000", "style": {"border": border}},
                               "b": {"color": "#bb0000", "style": {"border": border}}}
        run_steps(port, store, ws, view, [
            # Unlisted paths of a followed model, and a listed path of an unfollowed one.
            ([set_at("a", "label", "x"), set_at("a", "style.shadow", "s"), set_at("c", "color", "#c1")], None),
            ([set_at("a", "color", "#a1")], [change("a", "color", "updated", "#a1")]),
            ([set_at("a", "style.border.width", 2)], [change("a", "style.border.width", "updated", 2)]),
            # A merge patch touching listed and unlisted paths: only the listed one comes.
            ([patch("a", {"label": "y", "style": {"border": {"width": 3}, "shadow": "t"}})],
             [change("a", "style.border.width", "updated", 3)]),
            # The whole model put: cut down to each listed path, the unchanged border not sent.
            ([put("a", {"color": "#a2", "label": "z", "style": {"border": {"width": 3, "color": "#000000"},
                                                                "shadow": "u"}})],
             [change("a", "color", "updated", "#a2")]),
            # A merge patch replacing the parent object of a listed path with a number.
            ([patch("a", {"style": 5})], [change("a", "style.border", "deleted", None)]),
            # ... and that number replaced by an object again.
            ([patch("a", {"style": {"border": {"width": 4}}})],
             [change("a", "style.border", "created", {"width": 4})]),
            # The parent replaced with the listed part unchanged: nothing to send.
            ([set_at("a", "style", {"border": {"width": 4}, "shadow": "v"})], None),
            # A put that takes both listed paths away leaves the model, empty.
            ([put("b", {"label": "only"})],
             [change("b", "color", "deleted", None), change("b", "style.border", "deleted", None)]),
            ([put("d", shaped("#dd0000", label="D", shadow="deep"))],
             [change("d", "", "created", {"color": "#dd0000", "style": {"border": border}})]),
            ([delete("d")], [change("d", "", "deleted", None)]),
            ([put("d", {"label": "bare"})], [change("d", "", "created", {})]),
            ([put("e", {"color": "#ee0000"})], None),
            # A set that creates the objects on its way is reported where it creates them (here
            # `style`), and cut down from there to the listed path.
            ([set_at("b", "style.border.width", 7)], [change("b", "style.border", "created", {"width": 7})]),
        ])
        assert view.models == {"a": {"color": "#a2", "style": {"border": {"width": 4}}},
                               "b": {"style": {"border": {"width": 7}}}, "d": {}}


def test_change_set_following_nothing_sends_no_frame(server):
    port = server.port
    store = new_store(port, {"m": shaped("#000001"), "other": shaped("#000002")}, prefix="quiet")
    view = View(store, {"models": ["m"], "paths": ["color"]})
    with connect(port) as ws:
        view.subscribe(ws, port)
        quiet = [
            commit(port, store, [set_at("other", "color", "#0000f1")]),            # another model
            commit(port, store, [set_at("m", "label", "unlisted")]),               # another path
            commit(port, store, [patch("m", {"style": None})]),                    # an unlisted removal
            commit(port, store, [put("m", {"color": "#000001", "label": "new"})]),  # listed part unchanged
            commit(port, store, [put("fresh", {"color": "#0000f2"})]),             # an unfollowed model created
        ]
        followed = commit(port, store, [set_at("m", "color", "#0000f3")])
        assert quiet == list(range(view.version + 1, followed))
        frame = view.read(ws)
        assert frame["version"] == followed, f"versions {quiet} follow nothing, yet got {frame}"
        assert frame["changes"] == [change("m", "color", "updated", "#0000f3")]
        assert projected_store(port, store, view.options) == (view.version, view.models)


def test_old_carries_the_previous_projected_values(server):
    port = server.port
    store = new_store(port, {"a": shaped("#aa0000"), "x": shaped("#ff0000")}, prefix="old")
    view = View(store, {"models": ["a", "d"], "paths": ["color", "style.border"], "old": True})
    with connect(port) as ws:
        view.subscribe(ws, port)
        run_steps(port, store, ws, view, [
            ([set_at("x", "color", "#ff0001")], None),
            ([set_at("a", "color", "#a1")], [change("a", "color", "updated", "#a1", "#aa0000")]),
            ([set_at("a", "style.border.style", "dashed")],
             [change("a", "style.border.style", "created", "dashed", None)]),
            ([patch("a", {"style": {"border": {"width": None}}})],
             [change("a", "style.border.width", "deleted", None, 1)]),
            ([put("a", {"color": "#a2", "label": "p", "style": {"border": {"color": "#000000", "style": "dashed"}}})],
             [change("a", "color", "updated", "#a2", "#a1")]),
            ([put("d", shaped("#dd0000", label="D"))],
             [change("d", "", "created", {"color": "#dd0000", "style": {"border": {"width": 1, "color": "#000000"}}},
                     None)]),
            # The old value of a deleted model is projected too: nothing unlisted is sent.
            ([delete("d")],
             [change("d", "", "deleted", None,
                     {"color": "#dd0000", "style": {"border": {"width": 1, "color": "#000000"}}})]),
            ([patch("a", {"style": 5})],
             [change("a", "style.border", "deleted", None, {"color": "#000000", "style": "dashed"})]),
        ])


def test_reset_snapshot_is_projected(start_server):
    server = start_server("--history", "5")
    port = server.port
    store = new_store(port, {"a": shaped("#aa0000"), "b": shaped("#bb0000")}, prefix="reset")
    view = View(store, {"models": ["a"], "paths": ["style.border"]})
    with connect(port) as ws:
        view.subscribe(ws, port)
    last = view.version
    for n in range(10):
        commit(port, store, [set_at("a", "style.border.width", n), set_at("b", "color", f"#b{n}")])
    commit(port, store, [put("a", {"style": {"border": {"width": 99}, "shadow": "x"}, "label": "new"})])
    with connect(port) as ws:
        send_json(ws, view.message(since=last, epoch=view.epoch))
        frame = recv_json(ws)
        view.take_snapshot(frame, port, reset=True)
        assert frame["version"] == last + 11 and frame["models"] == {"a": {"style": {"border": {"width": 99}}}}
        followed = commit(port, store, [set_at("a", "style.border.width", 100)])
        assert view.read(ws)["version"] == followed
        assert projected_store(port, store, view.options) == (view.version, view.models)


# ---- Bad values --------------------------------------------------------

BAD_OPTIONS = {
    "models-empty-list": ({"models": [], "paths": ["color"]}, "models"),
    "models-empty-id": ({"models": ["m", ""], "paths": ["color"]}, "models"),
    "models-not-a-list": ({"models": "m", "paths": ["color"]}, "models"),
    "paths-empty-list": ({"models": ["m"], "paths": []}, "paths"),
    "paths-empty-segment": ({"models": ["m"], "paths": ["a..b"]}, "paths"),
    "paths-trailing-dot": ({"models": ["m"], "paths": ["color", "style."]}, "paths"),
    "maxRate-zero": ({"models": ["m"], "paths": ["color"], "maxRate": 0}, "maxRate"),
    "maxRate-negative": ({"models": ["m"], "paths": ["color"], "maxRate": -1}, "maxRate"),
    "maxRate-string": ({"models": ["m"], "paths": ["color"], "maxRate": "5"}, "maxRate"),
    "maxRate-bool": ({"models": ["m"], "paths": ["color"], "maxRate": True}, "maxRate"),
    "maxRate-over-1000": ({"models": ["m"], "paths": ["color"], "maxRate": 1001}, "maxRate"),
}


@pytest.mark.parametrize("options, field", list(BAD_OPTIONS.values()), ids=list(BAD_OPTIONS))
def test_bad_option_is_bad_message_naming_the_field(server, options, field):
    port = server.port
    store = new_store(port, {"m": {"color": "#000000", "label": "M"}}, prefix="bad")
    with connect(port) as ws:
        send_json(ws, {"type": "subscribe", "store": store, **options})
        assert_error(recv_json(ws), "bad_message", field)
        # Nothing was subscribed, and the connection still serves.
        view = View(store, {"models": ["m"], "paths": ["color"]})
        view.subscribe(ws, port)
        followed = commit(port, store, [set_at("m", "color", "#000001")])
        assert view.read(ws)["version"] == followed


TOPIC_OPTIONS = {
    "models": {"models": ["m"]},
    "paths": {"paths": ["color"]},
    "maxRate": {"maxRate": 5},
    "old": {"old": True},
}


@pytest.mark.parametrize("field", list(TOPIC_OPTIONS))
def test_options_on_a_topic_subscription_are_refused(server, field):
    topic = unique("opts")
    with connect(server.port) as ws:
        send_json(ws, {"type": "subscribe", "topic": topic, **TOPIC_OPTIONS[field]})
        assert_error(recv_json(ws), "bad_message", field)
        send_json(ws, {"type": "subscribe", "topic": topic})
        assert recv_json(ws) == {"type": "subscribed", "topic": topic, "seq": 0, "epoch": EPOCH, "resumed": False}


# ---- maxRate -----------------------------------------------------------

class Recorder(threading.Thread):
    """Reads one connection's frames on a thread of its own, noting each one's arrival time."""

    def __init__(self, ws):
        super().__init__(daemon=True)
        self.ws = ws
        self.arrivals: list[tuple[float, dict]] = []
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                try:
                    text = self.ws.recv(timeout=0.2)
                except TimeoutError:
                    continue
                self.arrivals.append((time.time(), json.loads(text)))
        except BaseException as exc:  # reported by the test thread
            self.error = exc

    def latest_version(self) -> int:
        if self.error is not None:
            raise AssertionError(f"the reader failed: {self.error!r}")
        return self.arrivals[-1][1].get("version", -1) if self.arrivals else -1

    def finish(self) -> list[tuple[float, dict]]:
        self.stopping.set()
        self.join(timeout=5)
        assert not self.is_alive() and self.error is None, self.error
        return self.arrivals


def check_rate_limited(view: View, arrivals, rate: float, exact_from: bool) -> None:
    """Arrivals at most `rate` a second (one more for jitter) in any one-second window, none later
    than 1 / rate (plus slack) after the first change it holds, each a valid frame in order."""
    times = [t for t, _ in arrivals]
    for i, start in enumerate(times):
        in_window = sum(1 for t in times[i:] if t - start < 1.0)
        assert in_window <= rate + 1, (
            f"{in_window} frames within one second from frame {i} at maxRate {rate}: "
            f"{[round(t - start, 3) for t in times[i:i + in_window]]}")
    for arrived, frame in arrivals:
        view.accept(frame, exact_from=exact_from)
        late = arrived - frame["firstCommittedAt"] / 1e6
        assert late <= 1 / rate + LATE_SLACK, (
            f"frame {frame['from']}..{frame['version']} arrived {late * 1000:.0f} ms after its first change")


@pytest.mark.timeout(120)
def test_max_rate_bounds_frames_and_staleness_under_an_animate_job(start_server):
    # One job thread: the test's own commit after the stop runs after the job's last one.
    server = start_server("--job-threads", "1")
    port = server.port
    store = new_store(port, {f"m{i}": {"color": "#000000", "label": f"L{i}"} for i in range(RATE_MODELS)},
                      prefix="rate")
    everything = View(store, {"maxRate": RATE})
    narrowed = View(store, {"models": ["m1*", "m2"], "paths": ["color"], "maxRate": RATE, "old": True})
    with connect(port) as ws_everything, connect(port) as ws_narrowed:
        everything.subscribe(ws_everything, port)
        narrowed.subscribe(ws_narrowed, port)
        base = everything.version
        recorders = [Recorder(ws_everything), Recorder(ws_narrowed)]
        for recorder in recorders:
            recorder.start()
        job = json_ok(api(port, "POST", "/api/jobs", {"kind": "animate", "store": store, "rate": JOB_RATE}), 201)
        try:
            wait_for(lambda: recorders[0].latest_version() >= base + JOB_VERSIONS, JOB_TIMEOUT,
                     f"the maxRate subscriber never saw version {base + JOB_VERSIONS}")
        finally:
            stop_job(port, job["id"])
        own = commit(port, store, [set_at("m1", "color", "#010203")])
        final = store_snapshot(port, store)
        assert final["version"] == own, "nothing but the job and the test writes this store"
        for recorder in recorders:
            wait_for(lambda: recorder.latest_version() >= own, STREAM_TIMEOUT,
                     f"no frame reached the final version {own}")
        arrivals = [recorder.finish() for recorder in recorders]

    assert own - base > JOB_VERSIONS
    for view, frames in zip((everything, narrowed), arrivals):
        # Every change set follows for `everything`: each frame starts where the last one ended.
        check_rate_limited(view, frames, RATE, exact_from=view is everything)
        assert view.version == own
        assert view.models == project(final["models"], view.options)
        assert len(view.frames) < (own - base) / 10, "the job's change sets were not coalesced"


def test_max_rate_folds_a_burst_into_one_frame(server):
    """The first change after a quiet spell goes at once; the next ones wait for the rate and
    arrive folded into one frame per (model, path), with the value before the first of them."""
    port = server.port
    store = new_store(port, {"m": {"color": "#000000", "label": "M"}, "n": {"color": "#0000ff", "label": "N"}},
                      prefix="burst")
    view = View(store, {"paths": ["color"], "maxRate": BURST_RATE, "old": True})
    with connect(port) as ws:
        view.subscribe(ws, port)
        start = view.version
        first = commit(port, store, [set_at("m", "color", "#111111")])
        frame = view.read(ws)
        first_arrival = time.time()
        assert (frame["from"], frame["version"]) == (start, first), frame
        assert frame["changes"] == [change("m", "color", "updated", "#111111", "#000000")]
        burst = [commit(port, store, [set_at("m", "color", "#222222")]),
                 commit(port, store, [set_at("m", "label", "unlisted")]),
                 commit(port, store, [set_at("n", "color", "#444444")]),
                 commit(port, store, [set_at("m", "color", "#333333")])]
        assert time.time() - first_arrival < BURST_BUDGET, "the burst took too long to fall in one interval"
        frame = view.read(ws, timeout=1 / BURST_RATE + FRAME_TIMEOUT)
        arrival = time.time()
        assert (frame["from"], frame["version"]) == (first, burst[-1]), frame
        assert by_place(frame["changes"]) == [change("m", "color", "updated", "#333333", "#111111"),
                                              change("n", "color", "updated", "#444444", "#0000ff")]
        assert arrival - first_arrival >= BURST_SPACING / BURST_RATE, "two frames within 1 / maxRate"
        assert arrival - frame["firstCommittedAt"] / 1e6 <= 1 / BURST_RATE + LATE_SLACK
        assert projected_store(port, store, view.options) == (view.version, view.models)


# ---- Resume ------------------------------------------------------------

@pytest.mark.parametrize("max_rate", [None, 20], ids=["each-change-set", "max-rate"])
def test_filtered_subscriber_resumes_exactly(server, max_rate):
    port = server.port
    store = new_store(port, {m: shaped(f"#{m}00") for m in ("a1", "a2", "b1")}, prefix="resume")
    options = {"models": ["a*"], "paths": ["color", "style.border"]}
    if max_rate:
        options["maxRate"] = max_rate
    view = View(store, options)
    with connect(port) as ws:
        view.subscribe(ws, port)
        view.read_until(ws, commit(port, store, [set_at("a1", "color", "#a10001")]))
    last = view.version
    # Committed while the subscriber is away; True where the change set follows something.
    missed = [
        ([set_at("b1", "color", "#b10001")], False),
        ([set_at("a1", "color", "#a10002")], True),
        ([set_at("a2", "label", "unlisted")], False),
        ([set_at("a2", "style.border.width", 5)], True),
        ([put("a3", shaped("#a30000"))], True),
        ([patch("a1", {"style": 7})], True),
        ([delete("a2")], True),
        ([put("a2", {"label": "back"})], True),
        ([set_at("b1", "label", "unlisted")], False),
    ]
    versions = [(commit(port, store, operations), follows) for operations, follows in missed]
    followed = [v for v, follows in versions if follows]
    current, expected = projected_store(port, store, options)
    assert current == versions[-1][0]
    with connect(port) as ws:
        view.resume(ws)
        if max_rate is None:
            frames = view.read_until(ws, followed[-1])
            assert [f["version"] for f in frames] == followed, "one frame per followed change set"
        else:
            frame = view.read(ws)  # the whole replay, coalesced
            assert frame["from"] == last and frame["version"] in (followed[-1], current), frame
        assert view.models == expected
        assert view.models == {"a1": {"color": "#a10002"}, "a2": {},
                               "a3": {"color": "#a30000", "style": {"border": {"width": 1, "color": "#000000"}}}}
        live = commit(port, store, [set_at("a3", "style.border.width", 2)])
        assert view.read(ws)["version"] == live
        assert projected_store(port, store, options) == (view.version, view.models)


# ---- One encoding for the same options ---------------------------------

@pytest.mark.parametrize("max_rate", [None, 10], ids=["each-change-set", "max-rate"])
def test_same_options_get_byte_identical_frames(server, max_rate):
    port = server.port
    store = new_store(port, {m: shaped(f"#{m}00") for m in ("m1", "m2", "x1")}, prefix="same")
    options = {"models": ["m*"], "paths": ["color", "style.border"], "old": True}
    if max_rate:
        options["maxRate"] = max_rate
    view = View(store, options)
    with connect(port) as first, connect(port) as second:
        snapshot = view.subscribe(first, port)
        # The same options with the members in another order.
        send_json(second, {**{k: options[k] for k in reversed(list(options))}, "store": store, "type": "subscribe"})
        assert recv_json(second) == snapshot
        for n in range(12):
            model = ("m1", "x1", "m2")[n % 3]
            commit(port, store, [set_at(model, "color", f"#{n:06x}")] if n % 4 else
                   [set_at(model, "style.border.width", n), set_at(model, "label", f"L{n}")])
        last = commit(port, store, [set_at("m1", "color", "#ffffff")])
        texts = []
        for ws in (first, second):
            received, version, deadline = [], view.version, time.monotonic() + STREAM_TIMEOUT
            while version < last:
                received.append(recv_text(ws, max(0.0, deadline - time.monotonic())))
                version = json.loads(received[-1])["version"]
            texts.append(received)
        assert texts[0] == texts[1], "subscribers with the same options get the same encoded frames"
        for text in texts[0]:
            view.accept(json.loads(text), exact_from=False)
        assert view.version == last
        assert projected_store(port, store, options) == (view.version, view.models)


# ---- SSE ---------------------------------------------------------------

def events_path(store: str, options: dict, repeat: bool = False) -> str:
    """The store's event stream with `options` as query parameters: lists comma-separated, or with
    `repeat` the parameter given once per item."""
    params = []
    for key in ("models", "paths"):
        if key in options:
            items = options[key]
            params += [(key, item) for item in items] if repeat else [(key, ",".join(items))]
    if "maxRate" in options:
        params.append(("maxRate", str(options["maxRate"])))
    if options.get("old"):
        params.append(("old", "true"))
    return f"/api/stores/{store}/events?" + "&".join(f"{k}={quote(v, safe='*,')}" for k, v in params)


def test_sse_options_give_a_projected_snapshot_and_filtered_changes(server):
    port = server.port
    store = new_store(port, {"a1": shaped("#a10000"), "a2": shaped("#a20000"), "solo": shaped("#500000"),
                             "b1": shaped("#b10000")}, prefix="sse")
    options = {"models": ["a*", "solo"], "paths": ["color", "style.border"], "old": True}
    sse_view, ws_view = View(store, options), View(store, options)
    with CurlEvents(port, events_path(store, options)) as stream, connect(port) as ws:
        assert_stream_head(stream.response)
        event = stream.reader.next_event()
        assert event.event == "snapshot", event
        sse_view.take_snapshot(event.json(), port)
        assert event.id == str(sse_view.version)
        assert set(sse_view.models) == {"a1", "a2", "solo"}
        ws_view.subscribe(ws, port)
        steps = [
            ([set_at("b1", "color", "#b10001"), set_at("a1", "label", "unlisted")], None),
            ([set_at("a1", "color", "#a10001")], [change("a1", "color", "updated", "#a10001", "#a10000")]),
            ([put("solo", {"color": "#500001", "label": "S"})],
             [change("solo", "style.border", "deleted", None, {"width": 1, "color": "#000000"}),
              change("solo", "color", "updated", "#500001", "#500000")]),
            ([put("a3", shaped("#a30000")), put("b2", shaped("#b20000"))],
             [change("a3", "", "created", {"color": "#a30000", "style": {"border": {"width": 1, "color": "#000000"}}},
                     None)]),
            ([delete("a2")],
             [change("a2", "", "deleted", None,
                     {"color": "#a20000", "style": {"border": {"width": 1, "color": "#000000"}}})]),
        ]
        for operations, expected in steps:
            version = commit(port, store, operations)
            if expected is None:
                continue
            event = stream.reader.next_event()
            assert (event.event, event.id) == ("changes", str(version)), f"expected version {version}: {event}"
            data = sse_view.accept(event.json())
            assert by_place(data["changes"]) == by_place(expected), data
            assert recv_text(ws) == event.data[0], "SSE and WebSocket carry the same JSON"
            assert projected_store(port, store, options) == (sse_view.version, sse_view.models)


def test_sse_max_rate_with_repeated_parameters_folds_a_burst(server):
    port = server.port
    store = new_store(port, {"a1": shaped("#a10000"), "a2": shaped("#a20000"), "b": shaped("#b00000")},
                      prefix="sse-rate")
    options = {"models": ["a1", "a2"], "paths": ["color"], "maxRate": BURST_RATE}
    view = View(store, options)
    with HttpEvents(port, events_path(store, options, repeat=True)) as stream:
        assert_stream_head(stream.response)
        event = stream.reader.next_event()
        assert event.event == "snapshot", event
        view.take_snapshot(event.json(), port)
        start = view.version
        first = commit(port, store, [set_at("a1", "color", "#a10001")])
        event = stream.reader.next_event()
        first_arrival = time.time()
        assert (event.event, event.id) == ("changes", str(first)), event
        data = view.accept(event.json())
        assert (data["from"], data["changes"]) == (start, [change("a1", "color", "updated", "#a10001")]), data
        burst = [commit(port, store, [set_at("a1", "color", "#a10002")]),
                 commit(port, store, [set_at("b", "color", "#b00001")]),
                 commit(port, store, [set_at("a2", "color", "#a20001"), set_at("a2", "label", "x")]),
                 commit(port, store, [set_at("a1", "color", "#a10003")])]
        assert time.time() - first_arrival < BURST_BUDGET, "the burst took too long to fall in one interval"
        event = stream.reader.next_event(1 / BURST_RATE + FRAME_TIMEOUT)
        arrival = time.time()
        assert (event.event, event.id) == ("changes", str(burst[-1])), event
        data = view.accept(event.json(), exact_from=True)
        assert by_place(data["changes"]) == [change("a1", "color", "updated", "#a10003"),
                                             change("a2", "color", "updated", "#a20001")], data
        assert arrival - first_arrival >= BURST_SPACING / BURST_RATE, "two events within 1 / maxRate"
        assert arrival - data["firstCommittedAt"] / 1e6 <= 1 / BURST_RATE + LATE_SLACK
        assert projected_store(port, store, options) == (view.version, view.models)


SSE_BAD_OPTIONS = {
    "models-empty": ("models=&paths=color", "models"),
    "models-empty-id": ("models=a,,b&paths=color", "models"),
    "paths-empty": ("models=a&paths=", "paths"),
    "paths-empty-segment": ("models=a&paths=a..b", "paths"),
    "maxRate-zero": ("models=a&paths=color&maxRate=0", "maxRate"),
    "maxRate-negative": ("models=a&paths=color&maxRate=-1", "maxRate"),
    "maxRate-word": ("models=a&paths=color&maxRate=fast", "maxRate"),
    "maxRate-over-1000": ("models=a&paths=color&maxRate=1001", "maxRate"),
}


@pytest.mark.parametrize("query, field", list(SSE_BAD_OPTIONS.values()), ids=list(SSE_BAD_OPTIONS))
def test_sse_bad_option_is_400_naming_the_field(server, query, field):
    port = server.port
    store = new_store(port, {"a": {"color": "#000000"}}, prefix="sse-bad")
    resp = http_client_request(port, "GET", f"/api/stores/{store}/events?{query}",
                               headers={"Accept": "text/event-stream"})
    assert_json_error(resp, 400, "bad_request")
    assert field in resp.json()["detail"], f"the detail does not name {field!r}: {resp.json()}"
