"""Redis coming back with older data (`SAVE`, more writes, then `DEBUG RELOAD NOSAVE`: the state of
a restart from a lagging RDB or AOF, or a failover to a lagging replica) under two nodes that have
read past it. The keys are still there, epoch included, so nothing but the numbers says the data
went back. A topic and a store must each move to a new epoch that every subscriber is told of, and
never hand out a number twice in one epoch. Real nodes on one real redis-server.
"""

import json

from cluster_redis import redis, redis_call, start_node  # noqa: F401  (`redis` is a fixture)
from conftest import api, json_ok, wait_for
from test_cluster import readiness
from test_cluster_epochs import Frames
from wsclient import connect, recv_json, unique


def _messages(frames: list[dict]) -> list[dict]:
    return [f for f in frames if f["type"] == "message"]


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
    ws = connect(b.port)
    ws.send(json.dumps({"type": "subscribe", "topic": topic, "since": 15, "epoch": old_epoch}))
    answer = recv_json(ws)
    assert answer["type"] == "subscribed" and answer["reset"] is True and answer["epoch"] == reset["epoch"], answer
    ws.close()


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
    again = connect(a.port)
    again.send(json.dumps({"type": "subscribe", "store": store, "since": 5, "epoch": old_epoch}))
    answer = recv_json(again)
    assert answer["type"] == "snapshot" and answer["reset"] is True and answer["epoch"] == expected["epoch"], answer
    again.close()


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
