"""Who may publish over WebSocket, and how often (docs/SECURITY.md; docs/PROTOCOL.md, "Publishing
over WebSocket").

- Without `--api-key` anyone publishes; with keys, a connection publishes after
  `{"type":"auth","apiKey":…}` or with a token whose `publish` claim covers the topic.
- `--publish-rate` counts WebSocket publishes in the same bucket as HTTP ones (per API key, per
  address without keys); publishes do not count against `--client-message-rate`, other messages do.

"Nothing published" is always checked with a real condition: the topic's seq in `GET /api/topics`,
and the next message a subscriber gets (a marker published afterwards must carry the next seq).
"""

from __future__ import annotations

import json
import time

from conftest import assert_json_error, json_ok
from publishing import (
    KEY,
    OTHER_KEY,
    SLOW_RATE,
    assert_error,
    assert_still_open,
    bearer,
    expect_message,
    http_publish,
    http_publish_from,
    publish_text,
    subscribed,
    topic_seq,
    ws_publish,
)
from test_trust import SECRET, make_token
from wsclient import connect, recv_json, send_json, subscribe, topics_listing, unique


# ---- Who may publish -----------------------------------------------------

def test_without_api_keys_every_connection_publishes_even_where_tokens_guard_subscriptions(start_server):
    server = start_server("--token-secret", SECRET)
    port, topic = server.port, unique("open")
    reader_token = make_token({"exp": int(time.time()) + 300, "topics": [topic]})
    with connect(port, path=f"/ws?token={reader_token}") as subscriber, connect(port) as publisher:
        subscribed(subscriber, topic)
        # The publisher presented nothing: subscribing needs a token, publishing does not.
        assert_error(subscribe(publisher, topic=topic), "unauthorized")
        assert ws_publish(publisher, topic, {"from": "anyone"}, "p1") == 1
        expect_message(subscriber, topic, 1, {"from": "anyone"})


def test_with_api_keys_a_connection_publishes_after_auth_with_a_valid_key(start_server):
    server = start_server("--api-key", KEY, "--api-key", OTHER_KEY)
    port, topic = server.port, unique("keyed")
    with connect(port) as subscriber, connect(port) as publisher, connect(port) as stranger:
        subscribed(subscriber, topic)
        publisher.send(publish_text(topic, '{"n":0}', "before-auth"))
        assert_error(recv_json(publisher), "unauthorized", "before-auth")
        # A wrong key is refused, and publishing stays refused.
        send_json(publisher, {"type": "auth", "apiKey": KEY + "x"})
        assert_error(recv_json(publisher), ("unauthorized", "forbidden"))
        publisher.send(publish_text(topic, '{"n":0}', "wrong-key"))
        assert_error(recv_json(publisher), ("unauthorized", "forbidden"), "wrong-key")
        assert topic_seq(port, topic) == 0
        send_json(publisher, {"type": "auth", "apiKey": KEY})
        assert recv_json(publisher) == {"type": "authenticated", "apiKey": True}
        assert ws_publish(publisher, topic, {"n": 1}, "after-auth") == 1
        # The key authorises that connection only.
        stranger.send(publish_text(topic, '{"n":0}', "stranger"))
        assert_error(recv_json(stranger), "unauthorized", "stranger")
        send_json(stranger, {"type": "auth", "apiKey": OTHER_KEY})
        assert recv_json(stranger) == {"type": "authenticated", "apiKey": True}
        assert ws_publish(stranger, topic, {"n": 2}) == 2
        expect_message(subscriber, topic, 1, {"n": 1})
        expect_message(subscriber, topic, 2, {"n": 2})
        assert topic_seq(port, topic) == 2


def test_a_token_publish_claim_lists_the_topics_it_may_publish_to(start_server):
    server = start_server("--token-secret", SECRET, "--api-key", KEY)
    port = server.port
    exp = int(time.time()) + 300
    allowed, also_allowed, refused, bare = "news.a", "news.b", unique("sport"), "news"
    publisher_token = make_token({"sub": "writer", "exp": exp, "topics": ["news.*"], "publish": ["news.*"]})
    reader_token = make_token({"sub": "reader", "exp": exp, "topics": ["*"]})
    with connect(port, path=f"/ws?token={reader_token}") as subscriber, connect(port) as writer:
        subscribed(subscriber, allowed)
        send_json(writer, {"type": "auth", "token": publisher_token})
        answer = recv_json(writer)
        assert answer.get("type") == "authenticated" and answer.get("expiresAt") == exp, answer
        assert ws_publish(writer, allowed, {"n": 1}, "w1") == 1
        for topic, ref in ((refused, "w2"), (bare, "w3")):
            writer.send(publish_text(topic, '{"n":2}', ref))
            assert_error(recv_json(writer), "forbidden", ref)
        expect_message(subscriber, allowed, 1, {"n": 1})
        # A token may also come on the upgrade.
        with connect(port, path=f"/ws?token={publisher_token}") as upgraded:
            assert ws_publish(upgraded, also_allowed, {"n": 3}, "u1") == 1
            upgraded.send(publish_text(refused, '{"n":4}', "u2"))
            assert_error(recv_json(upgraded), "forbidden", "u2")
        # A token that may read everything but names nothing to publish publishes nothing.
        with connect(port, path=f"/ws?token={reader_token}") as reader:
            reader.send(publish_text(allowed, '{"n":5}', "r1"))
            assert_error(recv_json(reader), "forbidden", "r1")
        listing = topics_listing(port)
        assert (listing[allowed], listing[also_allowed], listing.get(refused, 0), listing.get(bare, 0)) == (1, 1, 0, 0)
        # An API key publishes anywhere.
        with connect(port) as keyed:
            send_json(keyed, {"type": "auth", "apiKey": KEY})
            assert recv_json(keyed) == {"type": "authenticated", "apiKey": True}
            assert ws_publish(keyed, refused, {"n": 6}) == 1
            assert ws_publish(keyed, allowed, {"n": 7}) == 2
        expect_message(subscriber, allowed, 2, {"n": 7})


# ---- Rates ---------------------------------------------------------------

def test_publish_rate_counts_websocket_and_http_publishes_per_api_key(start_server):
    server = start_server("--publish-rate", SLOW_RATE, "--publish-burst", "3", "--api-key", KEY, "--api-key", OTHER_KEY)
    port, topic = server.port, unique("rate-key")
    with connect(port) as first, connect(port) as second:
        for ws, key in ((first, KEY), (second, OTHER_KEY)):
            send_json(ws, {"type": "auth", "apiKey": key})
            assert recv_json(ws) == {"type": "authenticated", "apiKey": True}
        assert [ws_publish(first, topic, {"n": n}) for n in (1, 2)] == [1, 2]
        assert json_ok(http_publish(port, topic, {"n": 3}, bearer(KEY)), 201)["seq"] == 3
        # The key's burst of 3 is spent, over WebSocket and HTTP alike.
        first.send(publish_text(topic, '{"n":4}', "over"))
        assert_error(recv_json(first), "rate_limited", "over")
        limited = http_publish(port, topic, {"n": 4}, bearer(KEY))
        assert_json_error(limited, 429, "too_many_requests")
        assert int(limited.header("Retry-After")) >= 1
        assert topic_seq(port, topic) == 3
        # The other key has its own bucket; the limited connection stays open.
        assert ws_publish(second, topic, {"n": 5}, "other") == 4
        assert json_ok(http_publish(port, topic, {"n": 6}, bearer(OTHER_KEY)), 201)["seq"] == 5
        assert_still_open(first)
        first.send(publish_text(topic, '{"n":7}', "still-over"))
        assert_error(recv_json(first), "rate_limited", "still-over")
        assert topic_seq(port, topic) == 5


def test_publish_rate_counts_websocket_and_http_publishes_per_address_without_keys(start_server):
    server = start_server("--publish-rate", SLOW_RATE, "--publish-burst", "3")
    port, topic = server.port, unique("rate-addr")
    with connect(port) as here, connect(port, source_address=("127.0.0.2", 0)) as elsewhere:
        assert [ws_publish(here, topic, {"n": n}) for n in (1, 2)] == [1, 2]
        assert json_ok(http_publish(port, topic, {"n": 3}), 201)["seq"] == 3
        here.send(publish_text(topic, '{"n":4}', "over"))
        assert_error(recv_json(here), "rate_limited", "over")
        assert_json_error(http_publish(port, topic, {"n": 4}), 429, "too_many_requests")
        with connect(port) as same_address:
            same_address.send(publish_text(topic, '{"n":4}', "same-address"))
            assert_error(recv_json(same_address), "rate_limited", "same-address")
        assert topic_seq(port, topic) == 3
        # Another address has its own bucket.
        assert ws_publish(elsewhere, topic, {"n": 5}) == 4
        assert json_ok(http_publish_from("127.0.0.2", port, topic, {"n": 6}), 201)["seq"] == 5
        assert topic_seq(port, topic) == 5


def test_refused_publishes_count_against_the_client_message_rate(start_server):
    """A publish the connection may not make costs what any message costs: a client without the
    API key cannot send refused publishes without limit."""
    server = start_server("--api-key", "k-refused", "--client-message-rate", SLOW_RATE, "--client-message-burst", "3")
    port, topic = server.port, unique("refused-rate")
    with connect(port) as ws:
        for n in range(3):
            ws.send(publish_text(topic, '{"n":%d}' % n, f"r{n}"))
            assert_error(recv_json(ws), "unauthorized", f"r{n}")
        ws.send(publish_text(topic, '{"n":3}', "r3"))
        assert_error(recv_json(ws), "rate_limited", "r3")  # named, so its sender knows which
    assert topic_seq(port, topic) == 0


def test_publishes_are_held_to_the_publish_rate_not_the_client_message_rate(start_server):
    server = start_server("--client-message-rate", SLOW_RATE, "--client-message-burst", "3", "--publish-rate", "0")
    port, topic = server.port, unique("msg-rate")
    with connect(port) as ws:
        # Far past the client message burst: every publish goes through.
        assert [ws_publish(ws, topic, {"n": n}, f"m{n}") for n in range(1, 11)] == list(range(1, 11))
        assert topic_seq(port, topic) == 10
        # Other messages still count: three subscribes pass, the fourth is dropped.
        for n in range(3):
            ws.send(json.dumps({"type": "subscribe", "topic": f"{topic}-{n}"}))
            assert recv_json(ws)["type"] == "subscribed"
        ws.send(json.dumps({"type": "subscribe", "topic": f"{topic}-3"}))
        assert_error(recv_json(ws), "rate_limited")
