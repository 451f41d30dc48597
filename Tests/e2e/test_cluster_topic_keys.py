"""How long a topic's keys stay in Redis (README, "Configuration", `--redis-topic-ttl`): a topic
nobody publishes to, and no node follows, for that long is deleted from Redis, its log, number,
epoch and last entry's ID together, and starts again in a new epoch; a topic a subscriber follows
keeps its keys while nobody publishes to it, renewed by the node it is on; a name only subscribed
to holds no key for good. Redis's memory then grows with the topics in use, not with every name
ever published to.

Every wait is for a real condition: a key gone from Redis, a renewal seen, or the time past the
keys' lifetime.
"""

from __future__ import annotations

import time

from cluster_redis import redis, redis_call, start_node  # noqa: F401  (`redis` is a fixture)
from conftest import wait_for
from wsclient import connect, publish, recv_json, send_json, subscribe, unique

TTL = "1"            # --redis-topic-ttl, seconds: renewed every 0.25 s, for topics due by 0.5 s
TTL_MS = 1000
GONE_TIMEOUT = 10.0  # Redis deletes an expired key within its expiry cycle (a loaded machine runs late)


def topic_keys(topic: str) -> list[str]:
    return [f"rcpt:t:{{{topic}}}:{part}" for part in ("seq", "log", "epoch", "last")]


def lifetimes(redis, topic: str) -> list[int]:
    """Each key's remaining life in ms (-1: for good, -2: not there)."""
    return [redis_call(redis, "PTTL", key) for key in topic_keys(topic)]


def gone(redis, topic: str) -> None:
    wait_for(lambda: all(life == -2 for life in lifetimes(redis, topic)), GONE_TIMEOUT, f"{topic}'s keys are still in Redis")


def test_a_topic_nobody_publishes_to_or_follows_leaves_redis_and_starts_over_in_a_new_epoch(start_server, redis):
    node = start_node(start_server, redis, "--redis-topic-ttl", TTL)
    topic = unique("expiring")
    with connect(node.port) as ws:
        first = subscribe(ws, topic=topic)
    for n in range(1, 4):
        assert publish(node.port, topic, {"n": n}) == n
    assert all(0 < life <= TTL_MS for life in lifetimes(redis, topic)), lifetimes(redis, topic)
    gone(redis, topic)
    # The topic starts again: message 1 of a new epoch, and a subscriber of the old life is reset.
    assert publish(node.port, topic, {"n": "new"}) == 1
    with connect(node.port) as ws:
        send_json(ws, {"type": "subscribe", "topic": topic, "since": 3, "epoch": first["epoch"]})
        answer = recv_json(ws)
        assert answer["type"] == "subscribed" and answer.get("reset") is True, answer
        assert answer["seq"] == 1 and answer["epoch"] != first["epoch"], answer


def test_a_topic_published_to_keeps_its_keys_and_its_numbers_past_their_lifetime(start_server, redis):
    node = start_node(start_server, redis, "--redis-topic-ttl", TTL)
    topic = unique("busy")
    started = time.monotonic()
    n = 0
    # Three lifetimes of a publish every 0.1 s: each renewal (at most every eighth of the lifetime)
    # comes with a publish, and numbering goes on without a new epoch.
    while time.monotonic() - started < 3 * TTL_MS / 1000:
        n += 1
        assert publish(node.port, topic, {"n": n}) == n
        assert all(0 < life <= TTL_MS for life in lifetimes(redis, topic)), lifetimes(redis, topic)
        time.sleep(0.1)
    assert n >= 10
    gone(redis, topic)


def test_a_followed_topic_keeps_its_keys_while_nobody_publishes_and_loses_them_once_left(start_server, redis):
    publisher = start_node(start_server, redis, "--redis-topic-ttl", TTL)
    follower = start_node(start_server, redis, "--redis-topic-ttl", TTL)
    topic = unique("followed")
    for n in range(1, 3):
        assert publish(publisher.port, topic, {"n": n}) == n
    with connect(follower.port) as ws:
        first = subscribe(ws, topic=topic)
        assert first["seq"] == 2, first
        # Three lifetimes with no publish: the follower's node renews the keys, which never end.
        quiet_since = time.monotonic()

        def three_lifetimes_passed() -> bool:
            assert all(life > 0 for life in lifetimes(redis, topic)), f"a key ended: {lifetimes(redis, topic)}"
            return time.monotonic() - quiet_since > 3 * TTL_MS / 1000

        wait_for(three_lifetimes_passed, 3 * TTL_MS / 1000 + 10, "the time did not pass")
        # Numbering goes on in the same epoch: nothing started over under the subscriber.
        assert publish(publisher.port, topic, {"n": 3}) == 3
        frame = recv_json(ws)
        assert frame["type"] == "message" and frame["seq"] == 3 and frame["data"] == {"n": 3}, frame
    gone(redis, topic)


def test_a_name_only_subscribed_to_holds_no_key_for_good(start_server, redis):
    node = start_node(start_server, redis, "--redis-topic-ttl", TTL)
    topic = unique("watched")
    with connect(node.port) as ws:
        subscribe(ws, topic=topic)
        epoch_key = topic_keys(topic)[2]
        assert redis_call(redis, "PTTL", epoch_key) > 0, "the epoch made for a subscriber lives for good"
    gone(redis, topic)
    assert redis_call(redis, "KEYS", f"rcpt:t:{{{topic}}}*") == []


def test_without_a_lifetime_a_topic_keeps_its_keys_for_good(start_server, redis):
    node = start_node(start_server, redis, "--redis-topic-ttl", "0")
    topic = unique("kept")
    assert publish(node.port, topic, {"n": 1}) == 1
    assert lifetimes(redis, topic) == [-1, -1, -1, -1]


def test_a_node_without_a_lifetime_takes_away_the_one_another_gave(start_server, redis):
    """A node told to keep topics for good keeps them so, whether it publishes to one or follows
    it, though a node with a lifetime made it: before, the keys still ended under it."""
    timed = start_node(start_server, redis, "--redis-topic-ttl", "30")
    published, followed = unique("published"), unique("followed")
    for topic in (published, followed):
        assert publish(timed.port, topic, {"n": 1}) == 1
        assert all(life > 0 for life in lifetimes(redis, topic)), lifetimes(redis, topic)
    forever = start_node(start_server, redis, "--redis-topic-ttl", "0")
    assert publish(forever.port, published, {"n": 2}) == 2
    assert lifetimes(redis, published) == [-1, -1, -1, -1]
    with connect(forever.port) as ws:
        assert subscribe(ws, topic=followed)["seq"] == 1
        assert lifetimes(redis, followed) == [-1, -1, -1, -1]
