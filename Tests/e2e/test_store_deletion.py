"""Deleting a store: `DELETE /api/stores/{s}` answers `{"store":s,"deleted":true}`, its subscribers
are sent `{"type":"unsubscribed","store":s,"reason":"deleted"}`, and a store created again under
the name starts at version 0 in another epoch; a store deleted on one node is gone from every
node, and a connection whose store was deleted may subscribe again.

Every test runs on the memory, disk and redis engines.
"""

from __future__ import annotations

from conftest import api, assert_json_error, json_ok, store_snapshot, wait_for
from engines import Engine
from history import (  # noqa: F401  (`deleting_port` is a fixture)
    STREAM_TIMEOUT,
    at,
    commit,
    deleting_port,
    fresh_store,
    read_changes,
)
from test_cluster import redis  # noqa: F401  (a fixture)
from wsclient import assert_changes_frame, connect, recv_json, subscribe


# ---- Deleting a store ---------------------------------------------------------------

def test_a_store_deleted_on_one_node_is_gone_from_every_node(start_server, tmp_path, redis):
    """The deletion goes through Redis: another node's subscribers are told, its replica goes,
    and the store made again (on that other node) is a new one in a new epoch everywhere."""
    engine = Engine("redis", start_server, tmp_path, redis)
    a, b = engine.start().port, engine.start().port
    store = fresh_store(a)
    for n in range(1, 4):
        commit(a, store, [{"op": "put", "model": f"m{n}", "value": {"n": n}}])
    wait_for(lambda: api(b, "GET", f"/api/stores/{store}").status == 200
             and store_snapshot(b, store)["version"] == 3, 10, "node B never caught up")
    old = store_snapshot(b, store)
    with connect(b) as ws:
        assert subscribe(ws, store=store)["version"] == 3
        assert json_ok(api(a, "DELETE", f"/api/stores/{store}")) == {"store": store, "deleted": True}
        assert recv_json(ws, STREAM_TIMEOUT) == {"type": "unsubscribed", "store": store, "reason": "deleted"}
        for node in (a, b):
            assert_json_error(api(node, "GET", f"/api/stores/{store}"), 404, "not_found")
            assert_json_error(api(node, "DELETE", f"/api/stores/{store}"), 404, "not_found")
            assert store not in {s["name"] for s in json_ok(api(node, "GET", "/api/stores"))["stores"]}

        assert json_ok(api(b, "POST", "/api/stores", {"name": store}), 201) == {"name": store, "version": 0}
        commit(b, store, [{"op": "put", "model": "new", "value": {"n": 0}}])
        for node in (a, b):
            wait_for(lambda: api(node, "GET", f"/api/stores/{store}").status == 200
                     and store_snapshot(node, store)["version"] == 1, 10, "a node never saw the new store")
            fresh = store_snapshot(node, store)
            assert fresh["models"] == {"new": {"n": 0}} and fresh["epoch"] != old["epoch"], fresh
            assert [c["version"] for c in read_changes(node, store, "after=0&limit=10")["changes"]] == [1]
    with connect(a) as ws:
        frame = subscribe(ws, store=store, since=old["version"], epoch=old["epoch"])
        assert (frame["type"], frame["reset"], frame["version"]) == ("snapshot", True, 1), frame


def test_deleted_store_tells_its_subscribers_and_comes_back_in_a_new_epoch(deleting_port):
    port = deleting_port
    store, bystander = fresh_store(port), fresh_store(port)
    for n in range(1, 4):
        commit(port, store, [{"op": "put", "model": f"m{n}", "value": {"n": n}}])
    commit(port, bystander, [{"op": "put", "model": "b", "value": {"n": 0}}])
    old = store_snapshot(port, store)
    with connect(port) as ws, connect(port) as other:
        assert subscribe(ws, store=store)["version"] == 3
        assert subscribe(ws, store=bystander)["type"] == "snapshot"
        assert subscribe(other, store=bystander)["type"] == "snapshot"

        assert json_ok(api(port, "DELETE", f"/api/stores/{store}")) == {"store": store, "deleted": True}
        assert recv_json(ws) == {"type": "unsubscribed", "store": store, "reason": "deleted"}
        assert_json_error(api(port, "GET", f"/api/stores/{store}"), 404, "not_found")
        assert_json_error(api(port, "GET", f"/api/stores/{store}/changes?after=0"), 404, "not_found")
        assert_json_error(api(port, "DELETE", f"/api/stores/{store}"), 404, "not_found")
        assert store not in {s["name"] for s in json_ok(api(port, "GET", "/api/stores"))["stores"]}

        # The other store and its subscribers go on.
        version = commit(port, bystander, [{"op": "set", "model": "b", "path": "n", "value": 1}])
        assert_changes_frame(recv_json(ws), bystander, version)
        assert_changes_frame(recv_json(other), bystander, version)

        assert json_ok(api(port, "POST", "/api/stores", {"name": store}), 201) == {"name": store, "version": 0}
        fresh = store_snapshot(port, store)
        assert (fresh["version"], fresh["models"]) == (0, {})
        assert fresh["epoch"] != old["epoch"]
        assert read_changes(port, store, "after=0&limit=10")["changes"] == []
        assert_json_error(at(port, store, 3), 400, "bad_request")
        # Nothing of the new store reaches the subscription the deletion ended.
        commit(port, store, [{"op": "put", "model": "new", "value": {"n": 0}}])
        version = commit(port, bystander, [{"op": "set", "model": "b", "path": "n", "value": 2}])
        assert_changes_frame(recv_json(ws), bystander, version)

    for n in range(1, 5):
        commit(port, store, [{"op": "put", "model": "new", "value": {"n": n}}])
    current = store_snapshot(port, store)
    with connect(port) as ws:
        # A version of the old life, sent with its epoch, is answered with a reset snapshot.
        frame = subscribe(ws, store=store, since=old["version"], epoch=old["epoch"])
        assert frame == {"type": "snapshot", "store": store, "version": 5, "epoch": current["epoch"],
                         "reset": True, "models": {"new": {"n": 4}}}


def test_connection_whose_store_was_deleted_may_subscribe_again(deleting_port):
    port = deleting_port
    store = fresh_store(port)
    commit(port, store, [{"op": "put", "model": "m", "value": {"n": 1}}])
    with connect(port) as ws:
        assert subscribe(ws, store=store)["version"] == 1
        assert json_ok(api(port, "DELETE", f"/api/stores/{store}")) == {"store": store, "deleted": True}
        assert recv_json(ws) == {"type": "unsubscribed", "store": store, "reason": "deleted"}
        # Unsubscribed: the store is simply not there now, ...
        refused = subscribe(ws, store=store)
        assert (refused["type"], refused.get("code")) == ("error", "no_such_store"), refused
        # ... and once created again, the connection subscribes to it like any other.
        assert json_ok(api(port, "POST", "/api/stores", {"name": store}), 201)["version"] == 0
        epoch = store_snapshot(port, store)["epoch"]
        assert subscribe(ws, store=store) == {"type": "snapshot", "store": store, "version": 0,
                                              "epoch": epoch, "reset": False, "models": {}}
        version = commit(port, store, [{"op": "put", "model": "m", "value": {"n": 2}}])
        assert_changes_frame(recv_json(ws), store, version)
