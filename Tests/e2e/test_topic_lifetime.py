"""How many topics a gateway keeps, and for how long (README, "Configuration"; docs/PROTOCOL.md,
"Topics"): `--max-topics` refuses a publish that would make one more, and `--topic-ttl` forgets a
topic nobody published to or followed for that long, with its history. A subscriber that comes
back to a forgotten topic is told its number means nothing now (`reset`, a new epoch); in a
cluster, Redis keeps the log, and a node reads it again.

Every wait is for a real condition: the topic gone from `GET /api/topics`, or back in it.
"""

from __future__ import annotations

import pytest

from cluster_redis import redis, start_node  # noqa: F401  (`redis` is a fixture)
from conftest import api, assert_json_error, curl, json_ok, wait_for
from data_dir import start_on, stop_with
from publishing import assert_error, http_publish, publish_text, ws_publish
from wsclient import connect, publish, recv_json, send_json, subscribe, topics_listing, unique

TTL = "0.4"            # seconds; the sweep runs every 0.1 s
FORGET_TIMEOUT = 10.0  # a topic quiet for the TTL is gone (a loaded machine runs late)


def forgotten(port: int, *topics: str) -> None:
    wait_for(lambda: not set(topics) & set(topics_listing(port)), FORGET_TIMEOUT, f"{topics} still kept")


def metric(port: int, name: str) -> float:
    text = api(port, "GET", "/metrics").body.decode()
    values = [line.split()[-1] for line in text.splitlines() if line.startswith(name + " ")]
    assert len(values) == 1, f"{name} not in /metrics"
    return float(values[0])


def test_a_publish_that_would_make_a_topic_past_the_limit_is_503_until_one_is_forgotten(start_server):
    server = start_server("--max-topics", "3", "--topic-ttl", TTL)
    port = server.port
    kept, quiet = unique("kept"), [unique("quiet"), unique("quiet")]
    extra = unique("extra")
    with connect(port) as follower, connect(port) as publisher:
        assert subscribe(follower, topic=kept)["type"] == "subscribed"
        for topic in quiet:
            assert publish(port, topic, {"n": 1}) == 1
        assert_json_error(http_publish(port, extra, {"n": 1}), 503, "over_capacity")
        publisher.send(publish_text(extra, '{"n":1}', "r1"))
        assert_error(recv_json(publisher), "unavailable", "r1")
        # A topic kept takes messages at the limit.
        assert publish(port, quiet[0], {"n": 2}) == 2
        assert extra not in topics_listing(port)

        # The quiet ones go after the TTL; the followed one stays; the new name is taken now.
        forgotten(port, *quiet)
        assert kept in topics_listing(port)
        assert ws_publish(publisher, extra, {"n": 1}, "r2") == 1
        assert metric(port, "receptionist_topics_forgotten_total") >= 2


def test_a_subscriber_or_a_batch_cannot_make_topics_past_the_limit(start_server):
    """Subscribing makes a topic as publishing does, and a batch's new topics count together:
    before, subscribers made topics without bound, and a batch made any number past the limit."""
    port = start_server("--max-topics", "3").port
    kept = [unique("kept"), unique("kept")]
    for topic in kept:
        assert publish(port, topic, {"n": 1}) == 1
    with connect(port) as ws:
        first = unique("watched")
        assert subscribe(ws, topic=first)["type"] == "subscribed"  # the third topic
        assert_error(subscribe(ws, topic=unique("fourth")), "unavailable")
        assert subscribe(ws, topic=kept[0])["type"] == "subscribed"  # one kept is still open to all
        refused = curl(port, f"/api/topics/{unique('fourth')}/events", "--max-time", "5")
        assert refused.status == 503 and refused.json()["error"] == "over_capacity", refused
        # Two new topics would make five: none of the batch is published.
        batch = {"messages": [{"topic": kept[1], "data": 1}, {"topic": unique("new"), "data": 2},
                              {"topic": unique("new"), "data": 3}]}
        assert_json_error(api(port, "POST", "/api/publish", batch), 503, "over_capacity")
        assert set(topics_listing(port)) == {*kept, first}
        assert publish(port, kept[1], {"n": 2}) == 2


def test_a_subscriber_coming_back_to_a_forgotten_topic_gets_a_reset_in_a_new_epoch(start_server):
    port = start_server("--topic-ttl", TTL).port
    topic = unique("ttl")
    with connect(port) as ws:
        first = subscribe(ws, topic=topic)
        for n in range(1, 4):
            assert publish(port, topic, {"n": n}) == n
        assert [recv_json(ws)["seq"] for _ in range(3)] == [1, 2, 3]
        send_json(ws, {"type": "unsubscribe", "topic": topic})
        assert recv_json(ws)["type"] == "unsubscribed"
    forgotten(port, topic)
    assert publish(port, topic, {"n": "new"}) == 1
    with connect(port) as ws:
        send_json(ws, {"type": "subscribe", "topic": topic, "since": 3, "epoch": first["epoch"]})
        answer = recv_json(ws)
        assert answer["type"] == "subscribed" and answer.get("reset") is True, answer
        assert answer["seq"] == 1 and answer["epoch"] != first["epoch"], answer
        # Live from here: the new life's message 1 is not taken for one after 3.
        assert publish(port, topic, {"n": "next"}) == 2
        frame = recv_json(ws)
        assert frame["type"] == "message" and frame["seq"] == 2 and frame["data"] == {"n": "next"}, frame


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_a_forgotten_topic_leaves_the_data_directory_and_its_name_starts_over(start_server, tmp_path, how):
    """With `--fsync always` the new life's acknowledged message survives a kill too."""
    data = tmp_path / "data"
    server = start_on(start_server, data, "--topic-ttl", TTL)
    gone, reused = unique("gone"), unique("reused")
    for topic in (gone, reused):
        for n in range(1, 4):
            assert publish(server.port, topic, {"n": n}) == n
    forgotten(server.port, gone, reused)
    assert publish(server.port, reused, {"n": "again"}) == 1
    stop_with(server, how)

    # Kept for good from here: what the first gateway forgot is not brought back.
    server = start_on(start_server, data, "--topic-ttl", "0")
    listing = topics_listing(server.port)
    assert gone not in listing and listing.get(reused) == 1, listing
    messages = json_ok(api(server.port, "GET", f"/api/topics/{reused}/messages?after=0"))
    assert [m["data"] for m in messages["messages"]] == [{"n": "again"}], messages
    assert publish(server.port, reused, {"n": "more"}) == 2


def test_a_cluster_node_forgets_its_copy_and_reads_the_topic_from_redis_again(start_server, redis):
    a = start_node(start_server, redis, "--topic-ttl", TTL)
    b = start_node(start_server, redis, "--topic-ttl", TTL)
    topic = unique("clustered")
    for n in range(1, 4):
        assert publish(a.port, topic, {"n": n}) == n
    with connect(b.port) as ws:
        wait_for(lambda: topics_listing(b.port).get(topic) == 3, FORGET_TIMEOUT, "node b did not hear of message 3")
        first = subscribe(ws, topic=topic)
        assert first["seq"] == 3, first
    forgotten(a.port, topic)
    forgotten(b.port, topic)
    # Redis kept the log: a resume on either node is served from it, in the same epoch.
    for port in (a.port, b.port):
        with connect(port) as ws:
            send_json(ws, {"type": "subscribe", "topic": topic, "since": 1, "epoch": first["epoch"]})
            answer = recv_json(ws)
            assert answer["type"] == "subscribed" and answer["resumed"] is True, answer
            assert answer["epoch"] == first["epoch"] and not answer.get("reset"), answer
            assert [(f["seq"], f["data"]) for f in (recv_json(ws), recv_json(ws))] == [(2, {"n": 2}), (3, {"n": 3})]
    # Numbering goes on from Redis's, on a node that had forgotten the topic.
    assert publish(b.port, topic, {"n": 4}) == 4
