"""Conditional writes under races: writers racing read-modify-write loops on one counter, guarded by
`If-Match` or `ifVersion`, lose no update and the losers get 412; a write that changes nothing
makes no version (an empty one on the redis engine) and keeps the tag.

Every test runs on the memory engine, the disk engine (`--data-dir`) and the redis engine
(engines.py).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import json_ok, store_snapshot
from engines import engine, port  # noqa: F401  (`engine`, `port` are fixtures)
from test_cluster import redis  # noqa: F401  (a fixture `engine` asks for)
from test_conditional_writes import (
    changes_path,
    fresh_store,
    get_model,
    model_path,
    post_changes,
    send,
    tag,
    write_ok,
)
from wsclient import assert_changes_frame, connect, recv_json, subscribe

OPTIMISTIC_WRITERS = 8    # threads racing on one model with read-modify-write loops
OPTIMISTIC_INCREMENTS = 10
OPTIMISTIC_ATTEMPTS = 400  # per writer; far more than the races can cost


# ---- Races ------------------------------------------------------------------------

@pytest.mark.parametrize("via", ["if-match", "if-version"])
def test_optimistic_increments_lose_no_update(port, via):
    """Writers race read-modify-write loops on one counter; with the condition checked and applied
    atomically every successful increment counts once, and the losers get 412."""
    store = fresh_store(port, {"counter": {"n": 0}})
    refused = [0] * OPTIMISTIC_WRITERS
    lock = threading.Lock()

    def writer(index: int) -> list[int]:
        versions = []
        for _ in range(OPTIMISTIC_ATTEMPTS):
            if len(versions) == OPTIMISTIC_INCREMENTS:
                break
            if via == "if-match":
                body, etag = get_model(port, store, "counter")
                resp = send(port, "PUT", model_path(store, "counter"),
                            {"n": body["value"]["n"] + 1, "by": index}, {"If-Match": etag})
            else:
                snapshot = store_snapshot(port, store)
                value = snapshot["models"]["counter"]
                resp = post_changes(port, store, [{"op": "put", "model": "counter",
                                                   "value": {"n": value["n"] + 1, "by": index}}],
                                    ifVersion=snapshot["version"])
            if resp.status == 412:
                body = resp.json()
                assert body["error"] == "precondition_failed", body
                with lock:
                    refused[index] += 1
                continue
            assert resp.status == 200, (resp.status, resp.body)
            versions.append(resp.json()["version"])
        return versions

    with ThreadPoolExecutor(OPTIMISTIC_WRITERS) as pool:
        results = list(pool.map(writer, range(OPTIMISTIC_WRITERS)))
    total = OPTIMISTIC_WRITERS * OPTIMISTIC_INCREMENTS
    assert all(len(v) == OPTIMISTIC_INCREMENTS for v in results), [len(v) for v in results]
    assert sorted(v for versions in results for v in versions) == list(range(2, total + 2))
    final = store_snapshot(port, store)
    assert final["version"] == total + 1
    assert final["models"]["counter"]["n"] == total, (final["models"], sum(refused))


def test_a_write_that_changes_nothing_makes_no_version_and_keeps_the_tag(engine):
    port = engine.start().port
    store = fresh_store(port, {"m": {"a": 1}})
    # The redis engine appends even a write that changes nothing: the log's append is what
    # confirms the replica it was computed against is current. It makes a version, empty.
    made = 1 if engine.name == "redis" else 0
    with connect(port) as ws:
        subscribe(ws, store=store)
        same = send(port, "PATCH", model_path(store, "m"), {"a": 1})
        assert json_ok(same) == {"store": store, "id": "m", "version": 1 + made} and same.header("ETag") == tag(1), same
        removed = send(port, "POST", changes_path(store), {"changes": [{"op": "set", "model": "m", "path": "z", "value": None}]})
        assert json_ok(removed) == {"store": store, "version": 1 + 2 * made, "changes": 0}, removed
        # The tag it answered still holds.
        after = send(port, "PATCH", model_path(store, "m"), {"b": 2}, headers={"If-Match": tag(1)})
        write_ok(after, 200, store, "m", 2 + 2 * made)
        frames = [recv_json(ws) for _ in range(1 + 2 * made)]
        assert [f["changes"] for f in frames[:-1]] == [[]] * (2 * made), frames
        assert_changes_frame(frames[-1], store, 2 + 2 * made)
