"""Resuming from the Redis log on any node: a topic or a store resumed on a node that joined later
is filled from Redis beyond the node's own history, and only what Redis no longer holds is a gap.
Real nodes on one real redis-server.
"""

import json

from cluster_redis import redis, redis_milliseconds, start_node  # noqa: F401  (`redis` is a fixture)
from conftest import api, json_ok, wait_for
from redis_relay import RedisRelay
from wsclient import connect, recv_json, subscribe, unique


# ---- Resume from Redis ----------------------------------------------------

def received_after_resume(ws, count: int) -> list[dict]:
    first = recv_json(ws)
    assert first["type"] == "subscribed" and first["resumed"] is True, first
    return [recv_json(ws) for _ in range(count)]


def test_a_node_that_joined_later_resumes_from_the_redis_log_beyond_its_own_history(start_server, redis):
    a = start_node(start_server, redis, "--history", "5")
    topic = unique("resume")
    for n in range(1, 31):
        assert json_ok(api(a.port, "POST", f"/api/topics/{topic}/messages", {"n": n}), 201)["seq"] == n
    # Node B starts after all 30 and keeps 5 of its own; Redis keeps them all.
    b = start_node(start_server, redis, "--history", "5")
    for port in (a.port, b.port):
        ws = connect(port)
        ws.send(json.dumps({"type": "subscribe", "topic": topic, "since": 3}))
        frames = received_after_resume(ws, 27)
        assert [f["type"] for f in frames] == ["message"] * 27, frames[:3]
        assert [f["seq"] for f in frames] == list(range(4, 31))
        assert [f["data"]["n"] for f in frames] == list(range(4, 31))
        # Then live, with nothing doubled.
        assert json_ok(api(a.port, "POST", f"/api/topics/{topic}/messages", {"n": 31 + port % 2}), 201)
        live = recv_json(ws)
        assert live["type"] == "message" and live["seq"] > 30, live
        ws.close()



def test_a_node_that_does_not_follow_a_topic_reads_its_messages_from_redis(start_server, redis):
    """`GET /api/topics/{t}/messages` on a node that never followed the topic reads it from Redis
    first, as a resume there does: the same page as on the node that published, with the same
    epoch; a topic nothing was published to is 404 on both. Before, the fresh node answered 404,
    as if nothing had been published."""
    a = start_node(start_server, redis, "--history", "5")
    topic = unique("httpread")
    for n in range(1, 9):
        assert json_ok(api(a.port, "POST", f"/api/topics/{topic}/messages", {"n": n}), 201)["seq"] == n
    b = start_node(start_server, redis, "--history", "5")
    pages = [json_ok(api(port, "GET", f"/api/topics/{topic}/messages?after=1&limit=100")) for port in (b.port, a.port)]
    assert pages[0] == pages[1], pages
    assert [m["data"]["n"] for m in pages[0]["messages"]] == list(range(2, 9))
    for port in (a.port, b.port):
        never = api(port, "GET", f"/api/topics/{unique('never')}/messages?after=0")
        assert never.status == 404 and json.loads(never.body)["error"] == "not_found", (port, never.status, never.body)

def test_a_store_resumes_on_a_node_that_joined_later_from_the_redis_log(start_server, redis):
    a = start_node(start_server, redis, "--history", "5")
    store = unique("storelog")
    json_ok(api(a.port, "POST", "/api/stores", {"name": store}), 201)
    # Versions 1 to 30: m1 to m30 created, then m1 updated (31) and m2 deleted (32).
    for n in range(1, 31):
        assert json_ok(api(a.port, "PUT", f"/api/stores/{store}/models/m{n}", {"n": n}), 201)["version"] == n
    assert json_ok(api(a.port, "PUT", f"/api/stores/{store}/models/m1", {"n": 100}))["version"] == 31
    assert json_ok(api(a.port, "DELETE", f"/api/stores/{store}/models/m2"))["version"] == 32
    epoch = json_ok(api(a.port, "GET", f"/api/stores/{store}"))["epoch"]
    # Node B starts after all of them: its replica begins at version 32 with no history at all.
    b = start_node(start_server, redis, "--history", "5")
    wait_for(lambda: json_ok(api(b.port, "GET", f"/api/stores/{store}"))["version"] == 32, 10, "B never read the store")
    for options in ({}, {"old": True}):
        ws = connect(b.port)
        current = json_ok(api(b.port, "GET", f"/api/stores/{store}"))["version"]
        answer = subscribe(ws, store=store, since=2, epoch=epoch, **options)
        assert answer["type"] == "subscribed" and answer["version"] == 2 and answer["epoch"] == epoch, answer
        # Everything after version 2 (the first round's live commit too, in the second round).
        frames = [recv_json(ws) for _ in range(current - 2)]
        assert [f["type"] for f in frames] == ["changes"] * (current - 2), frames[:2]
        assert [f["version"] for f in frames] == list(range(3, current + 1))
        frames = frames[:30]
        # Each change set exactly as it was committed, kinds (and old values, when asked) included.
        changes = [f["changes"][0] for f in frames]
        assert [c["model"] for c in changes] == [f"m{n}" for n in range(3, 31)] + ["m1", "m2"]
        assert [c["kind"] for c in changes] == ["created"] * 28 + ["updated", "deleted"]
        assert changes[-2]["value"] == {"n": 100} and changes[-1]["value"] is None
        if options:
            assert changes[0]["old"] is None and changes[-2]["old"] == {"n": 1} and changes[-1]["old"] == {"n": 2}
        else:
            assert "old" not in changes[0]
        # Then live, with nothing doubled.
        live_model = "live-old" if options else "live"
        version = json_ok(api(a.port, "PUT", f"/api/stores/{store}/models/{live_model}", {"n": 0}), 201)["version"]
        live = recv_json(ws)
        assert live["type"] == "changes" and live["version"] == version, live
        ws.close()


def test_only_what_redis_no_longer_holds_is_a_gap(start_server, redis):
    a = start_node(start_server, redis, "--history", "2", "--redis-history-ttl", "1")
    topic = unique("aged")
    for n in range(1, 11):
        json_ok(api(a.port, "POST", f"/api/topics/{topic}/messages", {"n": n}), 201)
    published = redis_milliseconds(redis)
    # Once Redis's clock is past the age limit, the next publish trims all ten.
    wait_for(lambda: redis_milliseconds(redis) > published + 1100, 5, "Redis's clock did not move")
    json_ok(api(a.port, "POST", f"/api/topics/{topic}/messages", {"n": 11}), 201)
    for n in range(12, 16):
        json_ok(api(a.port, "POST", f"/api/topics/{topic}/messages", {"n": n}), 201)
    b = start_node(start_server, redis, "--history", "2")
    ws = connect(b.port)
    ws.send(json.dumps({"type": "subscribe", "topic": topic, "since": 3}))
    frames = received_after_resume(ws, 6)
    assert frames[0] == {"type": "gap", "topic": topic, "from": 4, "to": 10}, frames[0]
    assert [f["seq"] for f in frames[1:]] == list(range(11, 16))
    ws.close()


def test_a_read_back_from_redis_starts_at_the_last_entry_this_node_read(start_server, redis):
    """A node reads back past its own history from the topic's log in Redis. Redis may hold
    newer entries than the node has read (other nodes' publishes whose notices are on their
    way): reading back from Redis's newest, the node got too few old ones, and answered a page
    `410` and a resume with a `gap` for messages Redis still held. Node A's notices are held
    back by a relay while node B publishes."""
    relay = RedisRelay(redis.port)
    try:
        # A heartbeat time-out long enough that A does not find its held notice connection dead.
        a = start_node(start_server, relay, "--history", "5", "--heartbeat-timeout", "60")
        b = start_node(start_server, redis, "--history", "5")
        topic = unique("readback")
        with connect(a.port) as follower:
            assert subscribe(follower, topic=topic)["type"] == "subscribed"
            for n in range(1, 21):
                assert json_ok(api(a.port, "POST", f"/api/topics/{topic}/messages", {"n": n}), 201)["seq"] == n
            relay.hold_replies(b"SUBSCRIBE")
            for n in range(21, 24):
                assert json_ok(api(b.port, "POST", f"/api/topics/{topic}/messages", {"n": n}), 201)["seq"] == n
            page = json_ok(api(a.port, "GET", f"/api/topics/{topic}/messages?after=10&limit=100"))
            assert [m["seq"] for m in page["messages"]] == list(range(11, 21)), page
            with connect(a.port) as ws:
                ws.send(json.dumps({"type": "subscribe", "topic": topic, "since": 10}))
                frames = received_after_resume(ws, 10)
                assert [(f["type"], f.get("seq")) for f in frames] == [("message", n) for n in range(11, 21)], frames
    finally:
        relay.close()


def test_an_unfiltered_subscriber_is_told_of_every_version_even_one_that_changed_nothing(start_server, redis):
    """With the redis engine a commit that changes nothing still takes a version (the shared log
    confirms the state it was computed against), and goes live as an empty `changes` frame. A
    resume past the node's history left those versions out, and a `maxRate` frame's `from`
    skipped them: a client took each for a lost version and resubscribed, for ever."""
    a = start_node(start_server, redis, "--history", "5")
    store = unique("empty")
    json_ok(api(a.port, "POST", "/api/stores", {"name": store}), 201)
    assert json_ok(api(a.port, "PUT", f"/api/stores/{store}/models/m", {"a": 0}), 201)["version"] == 1
    epoch = json_ok(api(a.port, "GET", f"/api/stores/{store}"))["epoch"]

    def commit(changes) -> int:
        return json_ok(api(a.port, "POST", f"/api/stores/{store}/changes", {"changes": changes}))["version"]

    nothing = [{"op": "set", "model": "m", "path": "nothing", "value": None}]
    for n in range(1, 6):  # versions 2 to 11, every odd one empty
        assert (commit([{"op": "set", "model": "m", "path": "a", "value": n}]), commit(nothing)) == (2 * n, 2 * n + 1)
    with connect(a.port) as ws, connect(a.port) as coalesced:
        assert subscribe(ws, store=store, since=1, epoch=epoch)["resumed"] is True
        frames = [recv_json(ws) for _ in range(10)]
        assert [(f["type"], f["version"], len(f["changes"])) for f in frames] == [
            ("changes", v, 1 - (v % 2)) for v in range(2, 12)], frames
        assert subscribe(coalesced, store=store, since=1, epoch=epoch, maxRate=10)["resumed"] is True
        caught_up = recv_json(coalesced)
        assert (caught_up["version"], caught_up["from"]) == (11, 1), caught_up
        # Live: an empty version, then a change; each frame starts where the last one ended.
        assert (commit(nothing), commit([{"op": "set", "model": "m", "path": "a", "value": 99}])) == (12, 13)
        held = 11
        while held < 13:
            frame = recv_json(coalesced)
            assert frame["from"] == held and frame["version"] > held, (held, frame)
            held = frame["version"]
