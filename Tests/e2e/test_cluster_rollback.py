"""Redis coming back with older data (`SAVE`, more writes, then `DEBUG RELOAD NOSAVE`: the state of
a restart from a lagging RDB or AOF, or a failover to a lagging replica) under two nodes that have
read past it. The keys are still there, epoch included, so nothing but the numbers says the data
went back. A topic and a store must each move to a new epoch that every subscriber is told of, and
never hand out a number twice in one epoch. Real nodes on one real redis-server.
"""

import json

from cluster_redis import redis, redis_call, redis_milliseconds, start_node  # noqa: F401  (`redis` is a fixture)
from conftest import api, json_ok, wait_for
from test_cluster import readiness
from test_cluster_epochs import Frames
from wsclient import connect, recv_json, unique


def _messages(frames: list[dict]) -> list[dict]:
    return [f for f in frames if f["type"] == "message"]


def _resume(port: int, message: dict) -> dict:
    ws = connect(port)
    try:
        ws.send(json.dumps(message))
        return recv_json(ws)
    finally:
        ws.close()


def test_a_topic_redis_rolled_back_moves_to_a_new_epoch_every_subscriber_is_told(start_server, redis):
    a = start_node(start_server, redis)
    b = start_node(start_server, redis)
    topic = unique("rolled")
    readers = []
    for node in (a, b):
        ws = connect(node.port)
        ws.send(json.dumps({"type": "subscribe", "topic": topic, "since": 0}))
        readers.append(Frames(ws))

    def publish(node, n: int) -> dict:
        return json_ok(api(node.port, "POST", f"/api/topics/{topic}/messages", {"n": n}), 201)

    for n in range(1, 11):
        assert publish(a, n)["seq"] == n
    redis_call(redis, "SAVE")
    for n in range(11, 21):
        assert publish(a, n)["seq"] == n
    for reader in readers:
        wait_for(lambda: len(_messages(reader.snapshot())) == 20, 10, "a subscriber never got the first 20")
    old_epoch = reader.snapshot()[0]["epoch"]

    redis_call(redis, "DEBUG", "RELOAD", "NOSAVE")  # Redis is back at message 10
    after = [publish((a, b)[n % 2], n) for n in range(21, 31)]
    # Numbered after what Redis kept, in a new epoch: never 11..20 again in the old one.
    assert [m["seq"] for m in after] == list(range(11, 21)), after

    for reader in readers:
        wait_for(lambda: any(m["data"] == {"n": 30} for m in _messages(reader.snapshot())), 10,
                 "a subscriber never got the messages published after the rollback")
        frames = reader.snapshot()
        resets = [i for i, f in enumerate(frames) if f["type"] == "reset"]
        assert len(resets) == 1, [f for f in frames if f["type"] != "message"]
        reset = frames[resets[0]]
        assert reset["seq"] == 10 and reset["epoch"] != old_epoch, reset
        before = _messages(frames[:resets[0]])
        assert [m["data"]["n"] for m in before] == list(range(1, 21)), before
        # Every acknowledged publish arrives, once, in order, in the new epoch.
        later = _messages(frames[resets[0] + 1:])
        assert [(m["seq"], m["data"]["n"]) for m in later] == [(n - 10, n) for n in range(21, 31)], later
        assert not [f for f in frames if f["type"] == "gap"], frames
        reader.ws.close()
    # A client coming back with the old epoch is reset, not served the new 11..20 as its own.
    answer = _resume(b.port, {"type": "subscribe", "topic": topic, "since": 15, "epoch": old_epoch})
    assert answer["type"] == "subscribed" and answer["reset"] is True and answer["epoch"] == reset["epoch"], answer


def test_a_store_redis_rolled_back_moves_to_a_new_epoch_every_subscriber_is_reset_to(start_server, redis):
    a = start_node(start_server, redis)
    b = start_node(start_server, redis)
    store = unique("rolled")
    json_ok(api(a.port, "POST", "/api/stores", {"name": store}), 201)

    def put(node, n: int) -> dict:
        resp = api(node.port, "PUT", f"/api/stores/{store}/models/m", {"n": n})
        assert resp.status in (200, 201), resp
        return resp.json()

    for n in range(1, 4):
        assert put(a, n)["version"] == n
    redis_call(redis, "SAVE")
    for n in range(4, 7):
        assert put(a, n)["version"] == n
    wait_for(lambda: json_ok(api(b.port, "GET", f"/api/stores/{store}"))["version"] == 6, 10, "B never reached version 6")
    ws = connect(b.port)
    ws.send(json.dumps({"type": "subscribe", "store": store}))
    first = recv_json(ws)
    assert first["type"] == "snapshot" and first["version"] == 6 and first["models"] == {"m": {"n": 6}}, first
    old_epoch = first["epoch"]

    redis_call(redis, "DEBUG", "RELOAD", "NOSAVE")  # Redis is back at version 3
    # A node's first write after it is refused `503` (its replica is ahead of Redis, and is
    # re-read); a retry lands, on version 3.
    for node, n in ((a, 7), (b, 8)):
        wait_for(lambda: api(node.port, "PUT", f"/api/stores/{store}/models/m", {"n": n}).status in (200, 201), 10,
                 "a write never landed after the rollback")
    # Both nodes end in one new epoch, at what Redis holds with the two writes on it.
    expected = json_ok(api(a.port, "GET", f"/api/stores/{store}"))
    assert expected["epoch"] != old_epoch and expected["models"] == {"m": {"n": 8}}, expected
    wait_for(lambda: json_ok(api(b.port, "GET", f"/api/stores/{store}")) == expected, 10,
             f"B and A differ: {json_ok(api(b.port, 'GET', f'/api/stores/{store}'))} {expected}")
    # B's subscriber was reset into the new epoch before any version of it, and the versions of
    # the new epoch follow on from that snapshot, one by one.
    frames = []
    wait_for(lambda: frames.append(recv_json(ws)) or frames[-1].get("version") == expected["version"], 10,
             f"the subscriber never reached version {expected['version']}: {frames}")
    first = frames[0]
    assert first["type"] == "snapshot" and first["reset"] is True and first["epoch"] == expected["epoch"], frames
    assert first["version"] <= expected["version"], frames
    assert all(f["type"] == "changes" for f in frames[1:]), frames
    assert [f["version"] for f in frames[1:]] == list(range(first["version"] + 1, expected["version"] + 1)), frames
    ws.close()
    # A client coming back with the old epoch is reset.
    answer = _resume(a.port, {"type": "subscribe", "store": store, "since": 5, "epoch": old_epoch})
    assert answer["type"] == "snapshot" and answer["reset"] is True and answer["epoch"] == expected["epoch"], answer


def test_a_topic_first_followed_while_redis_is_down_takes_its_epoch_with_a_reset(start_server, redis):
    """A subscriber to a topic the node first hears of while Redis is down gets an epoch of the
    node's own; when Redis is back the topic takes the epoch Redis keeps, and the subscriber is
    told with a `reset` before the first message, not switched silently (a resume with the first
    epoch would then be refused)."""
    a = start_node(start_server, redis)
    topic = unique("downfirst")
    redis.stop()
    wait_for(lambda: readiness(a.port).get("redis") == "down", 10, "the node did not notice Redis went away")
    ws = connect(a.port)
    ws.send(json.dumps({"type": "subscribe", "topic": topic, "since": 0}))
    first = recv_json(ws)
    assert first["type"] == "subscribed" and first["seq"] == 0, first
    frames = Frames(ws)
    redis.start()
    wait_for(lambda: readiness(a.port).get("redis") == "up", 15, "the node did not reconnect to Redis")
    wait_for(lambda: api(a.port, "POST", f"/api/topics/{topic}/messages", {"n": 1}).status == 201, 10,
             "no publish landed after Redis came back")
    wait_for(lambda: _messages(frames.snapshot()), 10, "the subscriber never got the message")
    seen = frames.snapshot()
    resets = [f for f in seen if f["type"] == "reset"]
    epoch = json_ok(api(a.port, "GET", f"/api/topics/{topic}/messages?after=0"))["epoch"]
    assert epoch != first["epoch"]  # the node's own, made while Redis was away
    assert [f["type"] for f in seen] == ["reset", "message"], seen
    assert resets[0]["epoch"] == epoch and resets[0]["seq"] == 0, seen
    assert _messages(seen)[0]["seq"] == 1, seen
    ws.close()


def test_a_node_started_after_the_rollback_cannot_hand_out_numbers_another_node_read(start_server, redis):
    """Node B starts after Redis went back, so it has nothing to compare: its publishes are
    numbered 11 to 15 again in the old epoch. Node A, which read the first 11 to 15, sees entries
    newer than its last under numbers it has (its notices carry entry IDs, and its own answers the
    entry before them), renews the epoch in Redis and tells every node; both end in the new
    epoch, and a client holding A's 15 is reset on B. Before, A took the notices for messages it
    had, never read them, and mirrored its next publish (16) onto its old 15: A and B served
    different messages under the same numbers in one epoch, for good."""
    a = start_node(start_server, redis)
    topic = unique("restarted")
    ws = connect(a.port)
    ws.send(json.dumps({"type": "subscribe", "topic": topic, "since": 0}))
    frames = Frames(ws)
    for n in range(1, 11):
        assert json_ok(api(a.port, "POST", f"/api/topics/{topic}/messages", {"n": n}), 201)["seq"] == n
    redis_call(redis, "SAVE")
    for n in range(11, 16):
        assert json_ok(api(a.port, "POST", f"/api/topics/{topic}/messages", {"n": n}), 201)["seq"] == n
    wait_for(lambda: len(_messages(frames.snapshot())) == 15, 10, "the subscriber never got the first 15")
    old_epoch = frames.snapshot()[0]["epoch"]

    redis_call(redis, "DEBUG", "RELOAD", "NOSAVE")  # Redis is back at message 10
    b = start_node(start_server, redis)
    acked = {}
    for n in range(111, 116):
        acked[n] = json_ok(api(b.port, "POST", f"/api/topics/{topic}/messages", {"n": n}), 201)["seq"]

    def epoch_on(node) -> str:
        return _resume(node.port, {"type": "subscribe", "topic": topic})["epoch"]

    wait_for(lambda: epoch_on(a) != old_epoch and epoch_on(a) == epoch_on(b), 10,
             f"the nodes did not meet in a new epoch: A {epoch_on(a)}, B {epoch_on(b)}, old {old_epoch}")
    new_epoch = epoch_on(a)
    resets = [f for f in frames.snapshot() if f["type"] == "reset"]
    assert len(resets) == 1 and resets[0]["epoch"] == new_epoch, frames.snapshot()[15:]
    # What comes next is numbered on in the new epoch and reaches A's subscriber after the reset.
    published = json_ok(api(a.port, "POST", f"/api/topics/{topic}/messages", {"n": 16}), 201)
    wait_for(lambda: _messages(frames.snapshot())[-1]["data"] == {"n": 16}, 10, "A's subscriber never got 16")
    # After the reset: one message after another from its number on. B's publishes numbered past
    # it (made once A had renewed the epoch) are among them; those up to it are what the reset
    # announces lost.
    after = _messages(frames.snapshot()[frames.snapshot().index(resets[0]) + 1:])
    assert [m["seq"] for m in after] == list(range(resets[0]["seq"] + 1, published["seq"] + 1)), after
    delivered = {m["data"]["n"]: m["seq"] for m in after}
    assert {n: seq for n, seq in acked.items() if seq > resets[0]["seq"]} == {n: s for n, s in delivered.items() if n != 16}, (
        acked, after)
    answer = _resume(b.port, {"type": "subscribe", "topic": topic, "since": 15, "epoch": old_epoch})
    assert answer["reset"] is True and answer["epoch"] == new_epoch, answer
    ws.close()


def test_redis_going_back_twice_to_one_snapshot_never_brings_an_old_epoch_back(start_server, redis):
    """After a first rollback moved the topic to a new epoch, the same snapshot is loaded again:
    Redis names the first epoch once more. A node that left that epoch takes it for Redis going
    back, and moves on to a third; a client holding the first epoch's numbers is reset. Before,
    the node went back into the first epoch, and its numbers 11 to 15 meant new messages."""
    a = start_node(start_server, redis)
    topic = unique("twice")
    ws = connect(a.port)
    ws.send(json.dumps({"type": "subscribe", "topic": topic, "since": 0}))
    frames = Frames(ws)

    def publish(n: int):
        return api(a.port, "POST", f"/api/topics/{topic}/messages", {"n": n})

    for n in range(1, 11):
        assert publish(n).status == 201
    redis_call(redis, "SAVE")
    for n in range(11, 16):
        assert publish(n).status == 201
    wait_for(lambda: len(_messages(frames.snapshot())) == 15, 10, "the subscriber never got the first 15")
    first_epoch = frames.snapshot()[0]["epoch"]
    redis_call(redis, "DEBUG", "RELOAD", "NOSAVE")
    assert publish(21).status == 201  # renews the epoch in the script: numbered 11 in a second
    wait_for(lambda: len([f for f in frames.snapshot() if f["type"] == "reset"]) == 1, 10, "no first reset")
    second_epoch = [f for f in frames.snapshot() if f["type"] == "reset"][0]["epoch"]

    # A new epoch's first entry is given an ID a millisecond ahead (so that it sorts after what a
    # node read): the next entries are read after it once Redis's clock is past it, as it is
    # after any real restart or failover.
    newest = redis_call(redis, "XREVRANGE", f"rcpt:t:{{{topic}}}:log", "+", "-", "COUNT", "1")[0][0]
    wait_for(lambda: redis_milliseconds(redis) > int(newest.split("-")[0]), 5, "Redis's clock stood still")
    redis_call(redis, "DEBUG", "RELOAD", "NOSAVE")  # the first epoch, at 10, again
    # The first publish after it lands in the epoch Redis names, which A left: A sees it and
    # renews (its outcome is then unknown, a 503); the next are numbered in the third epoch.
    wait_for(lambda: publish(22).status == 201, 10, "publishes never worked again")
    wait_for(lambda: len([f for f in frames.snapshot() if f["type"] == "reset"]) == 2, 10, "no second reset")
    third_epoch = [f for f in frames.snapshot() if f["type"] == "reset"][1]["epoch"]
    assert third_epoch not in (first_epoch, second_epoch), (first_epoch, second_epoch, third_epoch)
    answer = _resume(a.port, {"type": "subscribe", "topic": topic, "since": 15, "epoch": first_epoch})
    assert answer["reset"] is True and answer["epoch"] == third_epoch, answer
    ws.close()


def test_a_store_renewed_by_one_node_is_renewed_on_every_node(start_server, redis):
    """Node B starts after Redis went back to version 3 and commits version 4 in the old epoch.
    Node A, at version 6, reads version 4 after its 6, renews the epoch in Redis and tells every
    node, as of a store made anew: both end in the new epoch with Redis's models, and a client
    holding A's version 4 of the old epoch is reset on B. Before, B stayed in the old epoch,
    serving its version 4 as the one A's clients had seen."""
    a = start_node(start_server, redis)
    store = unique("renewed")
    json_ok(api(a.port, "POST", "/api/stores", {"name": store}), 201)
    for n in range(1, 4):
        assert api(a.port, "PUT", f"/api/stores/{store}/models/m", {"n": n}).status in (200, 201)
    redis_call(redis, "SAVE")
    for n in range(4, 7):
        assert api(a.port, "PUT", f"/api/stores/{store}/models/m", {"n": n}).status == 200
    old_epoch = json_ok(api(a.port, "GET", f"/api/stores/{store}"))["epoch"]

    redis_call(redis, "DEBUG", "RELOAD", "NOSAVE")  # Redis is back at version 3
    b = start_node(start_server, redis)
    wait_for(lambda: api(b.port, "GET", f"/api/stores/{store}").status == 200, 10, "B never learned of the store")
    assert json_ok(api(b.port, "PUT", f"/api/stores/{store}/models/m", {"n": 104}))["version"] == 4

    def state(node) -> dict:
        return json_ok(api(node.port, "GET", f"/api/stores/{store}"))

    wait_for(lambda: state(a)["epoch"] != old_epoch and state(a) == state(b), 10,
             f"the nodes did not meet in a new epoch: A {state(a)}, B {state(b)}")
    assert state(a)["models"] == {"m": {"n": 104}}, state(a)
    answer = _resume(b.port, {"type": "subscribe", "store": store, "since": 4, "epoch": old_epoch})
    assert answer["type"] == "snapshot" and answer["reset"] is True and answer["epoch"] == state(a)["epoch"], answer
