"""A store read whole again while the node's replica is behind it in the same epoch: a creation's
notice, or a read held back behind another, that Redis answers after a commit the replica has not
applied yet. The node reads on from the log when the log still holds the next version, so its
subscribers get changes; only when it does not are they reset.

The commit is written into Redis by the test as a node would write it, with no notice, and the
read whole is asked for with the store's creation notice: real node, real redis-server.
"""

import json

from cluster_redis import redis, redis_call, start_node  # noqa: F401  (`redis` is a fixture)
from conftest import api, json_ok, wait_for
from wsclient import assert_changes_frame, connect, recv_json, subscribe, unique

CHANNEL = "rcpt:events:0"


def store_at_version_1(start_server, redis):  # noqa: F811
    node = start_node(start_server, redis)
    store = unique("behind")
    json_ok(api(node.port, "POST", "/api/stores", {"name": store}), 201)
    json_ok(api(node.port, "PUT", f"/api/stores/{store}/models/m", {"n": 1}), 201)
    return node, store


def commit_unannounced(redis, store: str) -> None:  # noqa: F811
    """Version 2 (`m` = {"n": 2}) written as the commit script writes it, but with no notice: the
    node's replica stays at version 1."""
    log = f"rcpt:s:{{{store}}}:log"
    [[_, fields]] = redis_call(redis, "XRANGE", log, "-", "+")
    entry = dict(zip(fields[::2], fields[1::2]))
    assert entry["v"] == "1" and '{"n":1}' in entry["c"], entry
    args = ["v", "2"] + (["e", entry["e"]] if "e" in entry else []) + ["c", entry["c"].replace('{"n":1}', '{"n":2}')]
    redis_call(redis, "XADD", log, "*", *args)
    redis_call(redis, "HSET", f"rcpt:s:{{{store}}}:models", "m", '{"n":2}')
    assert redis_call(redis, "SET", f"rcpt:s:{{{store}}}:version", "2") == "OK"


def reread(redis, store: str) -> None:  # noqa: F811
    """The store's creation notice: every node reads it whole."""
    assert redis_call(redis, "PUBLISH", CHANNEL, f"n:{store}") >= 1


def test_a_replica_behind_in_its_epoch_reads_on_from_the_log(start_server, redis):  # noqa: F811
    """The subscriber at version 1 gets version 2 as changes, in the same epoch: no reset. Before,
    the read whole reset the replica to version 2 and every subscriber with it (seen as a store
    made again and written at once giving its subscribers two reset snapshots)."""
    node, store = store_at_version_1(start_server, redis)
    with connect(node.port) as ws:
        first = subscribe(ws, store=store)
        assert first["type"] == "snapshot" and first["version"] == 1, first
        commit_unannounced(redis, store)
        reread(redis, store)
        frame = recv_json(ws, 10)
    assert frame["type"] == "changes", f"a reset where the log held the next version: {frame}"
    assert_changes_frame(frame, store, 2)
    assert [(c["model"], c["value"]) for c in frame["changes"]] == [("m", {"n": 2})], frame
    on_node = json_ok(api(node.port, "GET", f"/api/stores/{store}"))
    assert (on_node["version"], on_node["epoch"], on_node["models"]) == (2, first["epoch"], {"m": {"n": 2}}), on_node


def test_a_replica_behind_whose_next_version_was_trimmed_is_reset(start_server, redis):  # noqa: F811
    """With version 2 trimmed from the log, the replica cannot read on: its subscriber is reset to
    the store whole at version 2, announced, never left behind or given a hole."""
    node, store = store_at_version_1(start_server, redis)
    with connect(node.port) as ws:
        first = subscribe(ws, store=store)
        commit_unannounced(redis, store)
        assert redis_call(redis, "XTRIM", f"rcpt:s:{{{store}}}:log", "MAXLEN", "0") == 2
        reread(redis, store)
        frame = recv_json(ws, 10)
    assert frame["type"] == "snapshot" and frame["reset"] is True, frame
    assert (frame["version"], frame["epoch"], frame["models"]) == (2, first["epoch"], {"m": {"n": 2}}), frame
    wait_for(lambda: json_ok(api(node.port, "GET", f"/api/stores/{store}"))["version"] == 2, 5,
             "the node never reached version 2")


def test_a_store_made_again_and_written_at_once_resets_its_subscriber_once_per_epoch(start_server, redis):  # noqa: F811
    """Redis loses the store; it is made again and written at once, twenty times over. The
    subscriber gets one reset into the new store's epoch each time and the writes as changes
    (or the store whole once, if the read raced): never a second reset in one epoch."""
    node = start_node(start_server, redis)
    store = unique("again")
    json_ok(api(node.port, "POST", "/api/stores", {"name": store}), 201)
    with connect(node.port) as ws:
        subscribe(ws, store=store)
        for n in range(20):
            redis_call(redis, "FLUSHALL")
            json_ok(api(node.port, "POST", "/api/stores", {"name": store}), 201)
            json_ok(api(node.port, "PUT", f"/api/stores/{store}/models/m", {"n": n}), 201)
            epoch = json_ok(api(node.port, "GET", f"/api/stores/{store}"))["epoch"]
            frames = []
            wait_for(lambda: frames.append(recv_json(ws, 10)) or (
                frames[-1]["version"] == 1 and frames[-1].get("epoch", epoch) == epoch), 15,
                f"round {n}: the subscriber never got the new store's version 1")
            resets = [f for f in frames if f["type"] == "snapshot" and f["epoch"] == epoch]
            assert len(resets) == 1, f"round {n}: {len(resets)} resets in one epoch: {frames}"
            assert json.dumps(frames[-1]).count('"n": %d}' % n) == 1, frames[-1]
