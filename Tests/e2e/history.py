"""Helpers for the reads of the past (test_history_reads.py, test_store_deletion.py,
test_durability.py): gateways that keep a few change sets and messages, fresh stores and topics,
a run of mutations of every kind (`STEPS`) with the models after each version, and checked reads
of a store at a version, of its change sets and of a topic's messages.
"""

from __future__ import annotations

import itertools
import time

import pytest

from conftest import api, json_ok, store_snapshot
from engines import ENGINES, Engine
from wsclient import EPOCH, assert_changes_frame, recv_json


# The engines whose node keeps all it can read (the redis engine reads further back from its
# log in Redis, tested apart).
LOCAL_ENGINES = ["memory", "disk"]
KEPT = 5                  # --history (and --retain) of the tests that read past what is kept
COMMITS_PAST_KEPT = 20
STREAM_TIMEOUT = 15.0     # a run of frames that is already due
_names = itertools.count()


@pytest.fixture(params=LOCAL_ENGINES)
def local_engine(request, start_server, tmp_path) -> Engine:
    return Engine(request.param, start_server, tmp_path)


@pytest.fixture(params=ENGINES)
def deleting_port(request, start_server, tmp_path) -> int:
    redis_server = request.getfixturevalue("redis") if request.param == "redis" else None
    return Engine(request.param, start_server, tmp_path, redis_server).start().port


def keeping(engine: Engine, count: int) -> tuple[str, ...]:
    """The options that keep `count` change sets per store and messages per topic."""
    if engine.name == "disk":
        return ("--history", str(count), "--retain", str(count))
    return ("--history", str(count))


# ---- Helpers ---------------------------------------------------------------------

def fresh_store(port: int) -> str:
    name = f"past-{next(_names)}"
    assert json_ok(api(port, "POST", "/api/stores", {"name": name}), 201) == {"name": name, "version": 0}
    return name


def fresh_topic() -> str:
    return f"past-{next(_names)}"


def ok(resp) -> int:
    assert resp.status in (200, 201), (resp.status, resp.body[:300])
    return resp.json()["version"]


def commit(port: int, store: str, changes: list[dict]) -> int:
    return ok(api(port, "POST", f"/api/stores/{store}/changes", {"changes": changes}))


def model_write(port: int, method: str, store: str, model: str, value=None) -> int:
    args = () if value is None else (value,)
    return ok(api(port, method, f"/api/stores/{store}/models/{model}", *args))


# Mutations of every kind, each one change set: put, patch, set creating objects on its way,
# delete of a model and of a key, change sets of several models.
STEPS = [
    ("PUT", "a", {"color": "#000001", "label": "A", "style": {"border": {"width": 1}}}),
    ("PUT", "b", {"color": "#000002", "tags": ["x"]}),
    ("CHANGES", [{"op": "set", "model": "a", "path": "style.border.width", "value": 2},
                 {"op": "put", "model": "c", "value": {"color": "#000003", "style": {"border": {"width": 0}}}}]),
    ("PATCH", "b", {"color": "#000004", "tags": None, "size": 4}),
    ("CHANGES", [{"op": "put", "model": "d", "value": {"n": 1}}]),
    ("PATCH", "a", {"style": {"border": None, "shadow": "soft"}}),
    ("DELETE", "c", None),
    ("CHANGES", [{"op": "delete", "model": "d"}, {"op": "set", "model": "b", "path": "color", "value": "#000005"},
                 {"op": "put", "model": "e", "value": {"color": "#000006", "text": "snow \u2603"}}]),
    ("PUT", "a", {"label": "A2"}),
    ("CHANGES", [{"op": "patch", "model": "e", "value": {"text": None}}]),
    ("PATCH", "e", {"color": "#000007"}),
    ("CHANGES", [{"op": "put", "model": "c", "value": {"color": "#000008", "deep": {"list": [1, 2.5, None]}}}]),
]


def run_steps(port: int, store: str) -> list[dict]:
    """Applies STEPS; returns the models after each version, index = version (0 = empty)."""
    states = [store_snapshot(port, store)["models"]]
    for step in STEPS:
        if step[0] == "CHANGES":
            version = commit(port, store, step[1])
        else:
            method, model, value = step
            version = model_write(port, method, store, model, value)
        assert version == len(states), (step, version)
        states.append(store_snapshot(port, store)["models"])
    return states


def at(port: int, store: str, version) -> object:
    return api(port, "GET", f"/api/stores/{store}?at={version}")


def read_changes(port: int, store: str, query: str) -> dict:
    body = json_ok(api(port, "GET", f"/api/stores/{store}/changes?{query}"))
    assert set(body) == {"store", "epoch", "changes", "through"}, body
    assert body["store"] == store and body["epoch"] == EPOCH, body
    # `through`, the last version read, is at or past the last change set given.
    assert isinstance(body["through"], int) and all(c["version"] <= body["through"] for c in body["changes"]), body
    return body


def read_messages_raw(port: int, topic: str, query: str):
    return api(port, "GET", f"/api/topics/{topic}/messages?{query}")


def read_messages(port: int, topic: str, query: str) -> dict:
    body = json_ok(read_messages_raw(port, topic, query))
    assert set(body) == {"topic", "epoch", "messages", "through"}, body
    assert body["topic"] == topic and body["epoch"] == EPOCH, body
    assert body["through"] == (body["messages"][-1]["seq"] if body["messages"] else int(dict(
        pair.split("=", 1) for pair in query.split("&") if "=" in pair).get("after", 0))), body
    return body


def assert_gone(resp, oldest: int | None = None) -> int:
    """A 410 naming the oldest readable version (exactly `oldest`, when given); returns it."""
    assert resp.status == 410, f"expected 410, got {resp.status}: {resp.body[:300]!r}"
    assert resp.media_type() == "application/json", resp.header("Content-Type")
    body = resp.json()
    assert set(body) == {"error", "detail", "oldest"}, body
    assert body["error"] == "gone" and isinstance(body["detail"], str) and body["detail"], body
    assert isinstance(body["oldest"], int) and not isinstance(body["oldest"], bool), body
    if oldest is not None:
        assert body["oldest"] == oldest, body
    return body["oldest"]


def oldest_bound(engine: Engine, last: int) -> int | None:
    """The oldest readable number once `last` is committed with KEPT kept: exact in memory; on
    disk, at most that (keeping more than asked is allowed). A redis node reads from its replica's
    history, which keeps `--history` as memory does."""
    return last - KEPT if engine.name in ("memory", "redis") else None


def collect_changes(ws, store: str, through: int, timeout: float = STREAM_TIMEOUT) -> list[dict]:
    """Plain `changes` frames up to version `through`, each checked."""
    deadline = time.monotonic() + timeout
    frames = []
    while not frames or frames[-1]["version"] < through:
        frame = recv_json(ws, max(0.0, deadline - time.monotonic()))
        assert_changes_frame(frame, store)
        frames.append(frame)
    return frames
