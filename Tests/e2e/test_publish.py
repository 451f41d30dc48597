"""Publishing over WebSocket and in batches (docs/PROTOCOL.md, "HTTP publish" and "Publishing over
WebSocket"; docs/SECURITY.md for who may publish and the publish rate).

- `{"type":"publish","topic":…,"data":…,"ref":…}` is answered `{"type":"published","topic","seq","ref"}`
  once the message is sequenced and in the history; `data` reaches WebSocket and SSE subscribers
  as the bytes written (whitespace outside strings aside); publishes sent back to back are
  answered in the order sent; a publish that may not happen is an `error` echoing a valid `ref`,
  and the connection stays open.
- Without `--api-key` anyone publishes; with keys, a connection publishes after
  `{"type":"auth","apiKey":…}` or with a token whose `publish` claim covers the topic.
- `--publish-rate` counts WebSocket publishes in the same bucket as HTTP ones (per API key, per
  address without keys); publishes do not count against `--client-message-rate`, other messages do.
- `POST /api/publish` checks every message before publishing any: one bad message makes the whole
  request 400 and publishes nothing; at most 1,000 messages; API keys, the publish rate (each
  message counts) and `Idempotency-Key` apply as for one message.
- With `--engine redis` the sequence numbers are global across nodes, and while Redis is down a
  publish is refused (`unavailable` over WebSocket, 503 over HTTP) with nothing published.

"Nothing published" is always checked with a real condition: the topic's seq in `GET /api/topics`,
and the next message a subscriber gets (a marker published afterwards must carry the next seq).
"""

from __future__ import annotations

import http.client
import json
import time
from dataclasses import dataclass

import pytest

from conftest import HOST, IO_TIMEOUT, Response, assert_json_error, http_client_request, json_ok, wait_for
from test_cluster import Collector, readiness, redis, start_node  # noqa: F401  (`redis` is a fixture)
from test_exact_payloads import BODIES, assert_message_text
from test_sse import HttpEvents, assert_stream_head, first_event, topic_events
from test_trust import SECRET, make_token
from test_ws_topics import assert_message
from wsclient import (
    EPOCH,
    OP_TEXT,
    RawWebSocket,
    connect,
    encode_frame,
    publish,
    recv_json,
    recv_text,
    send_json,
    subscribe,
    topics_listing,
    unique,
)

KEY, OTHER_KEY = "publisher-key", "other-publisher-key"
ABSENT = object()            # a member left out of a message
STREAM_TIMEOUT = 20.0        # a whole run of frames that is already due
CLUSTER_TIMEOUT = 10.0       # one frame crossing Redis to the other node
REDIS_DOWN_ANSWER = 10.0     # a publish refused while Redis is down
BURST = 200                  # publishes sent back to back in one write
SLOW_RATE = "0.01"           # a rate that refills one token every 100 s: no refill during a test

# More bodies than test_exact_payloads' BODIES: every kind of top-level JSON value is a message.
WS_BODIES = {
    **BODIES,
    "null": "null",
    "false": "false",
    "zero": "0",
    "empty-string": '""',
    "empty-object": "{ }",
    "empty-array": "[ ]",
}


# ---- Publish messages as text ------------------------------------------

def publish_text(topic=ABSENT, data=ABSENT, ref=ABSENT, spaced: bool = False, **members) -> str:
    """A publish message as JSON text. `data` is JSON text put in verbatim, before the topic, so
    that the server cannot rely on it being last; strings are written as raw UTF-8."""
    parts = ['"type":"publish"']
    if data is not ABSENT:
        parts.append('"data":' + data)
    if topic is not ABSENT:
        parts.append('"topic":' + json.dumps(topic, ensure_ascii=False))
    if ref is not ABSENT:
        parts.append('"ref":' + json.dumps(ref, ensure_ascii=False))
    parts += [json.dumps(k) + ":" + json.dumps(v, ensure_ascii=False) for k, v in members.items()]
    if spaced:
        return "{\n  " + " ,\n\t".join(p.replace(":", " : ", 1) for p in parts) + " \n}"
    return "{" + ",".join(parts) + "}"


def published(topic: str, seq: int, ref=ABSENT) -> dict:
    """The answer to a publish, exactly: no `ref` member when the publish had none."""
    answer = {"type": "published", "topic": topic, "seq": seq}
    if ref is not ABSENT:
        answer["ref"] = ref
    return answer


def assert_error(frame: dict, codes, ref=ABSENT, ref_optional: bool = False) -> None:
    """An `error` frame with one of `codes`, echoing `ref` (and having no `ref` when it is ABSENT)."""
    codes = {codes} if isinstance(codes, str) else set(codes)
    assert frame.get("type") == "error" and frame.get("code") in codes, f"expected error {sorted(codes)}, got {frame}"
    assert isinstance(frame.get("message"), str), frame
    extra = set(frame) - {"type", "code", "message"}
    if ref is ABSENT:
        assert not extra, f"an error echoed a ref that was not valid, or sent more: {frame}"
    elif ref_optional:
        assert extra <= {"ref"} and frame.get("ref", ref) == ref, frame
    else:
        assert extra == {"ref"} and frame["ref"] == ref, f"the error does not echo ref {ref!r}: {frame}"


def ws_publish(ws, topic: str, data, ref=ABSENT) -> int:
    """Publish `data` (a Python value) on a WebSocket; returns the seq of the answer."""
    ws.send(publish_text(topic, json.dumps(data), ref))
    answer = recv_json(ws)
    assert answer.get("type") == "published", f"publish to {topic!r} refused: {answer}"
    seq = answer.get("seq")
    assert isinstance(seq, int) and not isinstance(seq, bool) and seq >= 1, answer
    assert answer == published(topic, seq, ref), answer
    return seq


def topic_seq(port: int, topic: str) -> int:
    """The topic's last seq; 0 for a topic that does not exist."""
    return topics_listing(port).get(topic, 0)


def expect_message(ws, topic: str, seq: int, data, timeout: float = IO_TIMEOUT) -> None:
    assert_message(recv_json(ws, timeout), topic, seq, data)


def subscribed(ws, topic: str, seq: int = 0) -> None:
    assert subscribe(ws, topic=topic) == {"type": "subscribed", "topic": topic, "seq": seq, "epoch": EPOCH, "resumed": False}


def assert_still_open(ws) -> None:
    """The connection still serves: a subscribe is answered."""
    topic = unique("alive")
    subscribed(ws, topic)


# ---- HTTP ----------------------------------------------------------------

def bearer(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


def batch_body(messages) -> bytes:
    """`{"messages":[…]}` from (topic, data as JSON text) pairs, the data put in verbatim."""
    items = ['{"topic":%s,"data":%s}' % (json.dumps(topic), data) for topic, data in messages]
    return ('{"messages":[' + ",".join(items) + "]}").encode("utf-8")


def post_batch(port: int, body: bytes, headers: dict | None = None) -> Response:
    return http_client_request(port, "POST", "/api/publish", body=body,
                               headers={"Content-Type": "application/json", **(headers or {})})


def assert_batch_answer(resp: Response, expected) -> dict:
    """201 listing every (topic, seq) in the order sent, and nothing else."""
    body = json_ok(resp, 201)
    assert body == {"messages": [{"topic": t, "seq": s} for t, s in expected]}, body
    return body


def http_publish_from(source: str, port: int, topic: str, data, headers: dict | None = None) -> Response:
    """POST one message over a connection from the loopback address `source`."""
    conn = http.client.HTTPConnection(HOST, port, timeout=IO_TIMEOUT, source_address=(source, 0))
    try:
        conn.request("POST", f"/api/topics/{topic}/messages", body=json.dumps(data).encode(),
                     headers={"Content-Type": "application/json", **(headers or {})})
        raw = conn.getresponse()
        return Response(raw.status, raw.reason, raw.getheaders(), raw.read())
    finally:
        conn.close()


def http_publish(port: int, topic: str, data, headers: dict | None = None) -> Response:
    return http_publish_from(HOST, port, topic, data, headers)


def receive_by_topic(ws, count: int, timeout: float = STREAM_TIMEOUT) -> dict[str, list[str]]:
    """The next `count` frames, which must all be messages, as raw texts grouped by topic in arrival order."""
    deadline = time.monotonic() + timeout
    texts: dict[str, list[str]] = {}
    for _ in range(count):
        text = recv_text(ws, max(0.0, deadline - time.monotonic()))
        frame = json.loads(text)
        assert frame.get("type") == "message", frame
        texts.setdefault(frame["topic"], []).append(text)
    return texts


@pytest.fixture(scope="module")
def unthrottled(module_servers):
    """A server whose client-message rate is off, for bursts of hundreds of publishes."""
    return module_servers("--client-message-rate", "0")


# ---- Publishing over WebSocket -------------------------------------------

def test_publish_is_answered_with_seq_and_ref_once_in_the_history(server):
    port, topic = server.port, unique("wspub")
    with connect(port) as subscriber, connect(port) as publisher:
        subscribed(subscriber, topic)
        send_json(publisher, {"type": "publish", "topic": topic, "data": {"headline": "hello"}, "ref": "m-17"})
        assert recv_json(publisher) == published(topic, 1, "m-17")
        # Answered once sequenced and in the history: listed, and replayed to a resume.
        assert topic_seq(port, topic) == 1
        with connect(port) as late:
            assert subscribe(late, topic=topic, since=0) == {
                "type": "subscribed", "topic": topic, "seq": 1, "epoch": EPOCH, "resumed": True}
            expect_message(late, topic, 1, {"headline": "hello"})
        expect_message(subscriber, topic, 1, {"headline": "hello"})
        # HTTP and WebSocket publishes share the topic's sequence.
        assert publish(port, topic, "over http") == 2
        # Without a ref, the answer has none.
        send_json(publisher, {"type": "publish", "topic": topic, "data": [3]})
        assert recv_json(publisher) == published(topic, 3)
        expect_message(subscriber, topic, 2, "over http")
        expect_message(subscriber, topic, 3, [3])
        assert topic_seq(port, topic) == 3


@pytest.mark.parametrize("ref", ["", "m", "x" * 64, "\u00e9" * 32, "\U0001F600" * 16, "a b \"c\" \\ /"],
                         ids=["empty", "one-char", "64-ascii-bytes", "64-bytes-of-2-byte-chars",
                              "64-bytes-of-4-byte-chars", "quotes-and-escapes"])
def test_a_ref_of_at_most_64_bytes_is_echoed(server, ref):
    topic = unique("ref")
    with connect(server.port) as ws:
        ws.send(publish_text(topic, '{"n":1}', ref))
        assert recv_json(ws) == published(topic, 1, ref)


@pytest.mark.parametrize("body", list(WS_BODIES.values()), ids=list(WS_BODIES))
def test_data_reaches_websocket_and_sse_subscribers_as_written_live_and_replayed(server, body):
    port, topic = server.port, unique("wsexact")
    with connect(port) as subscriber, connect(port) as publisher, \
            HttpEvents(port, topic_events(topic)) as stream:
        assert_stream_head(stream.response)
        subscribed(subscriber, topic)
        publisher.send(publish_text(topic, body, "exact", spaced=True))
        assert recv_json(publisher) == published(topic, 1, "exact")
        assert_message_text(recv_text(subscriber), topic, 1, body)
        event = first_event(stream.reader, {"type": "subscribed", "topic": topic, "seq": 0})
        assert (event.event, event.id, len(event.data)) == ("message", "1", 1), event
        assert_message_text(event.data[0], topic, 1, body)
    with connect(port) as replay:
        assert subscribe(replay, topic=topic, since=0)["resumed"] is True
        assert_message_text(recv_text(replay), topic, 1, body)


def test_publishes_sent_back_to_back_are_answered_in_order_and_delivered_in_order(unthrottled):
    port = unthrottled.port
    first, second = unique("burst-a"), unique("burst-b")
    # Every third publish goes to the second topic; each has its own ref and distinct literals.
    plan = [(second if i % 3 == 2 else first, f"r{i}", '{"i":%d,"f":1.10,"s":"\\u00e9","big":1e400}' % i)
            for i in range(BURST)]
    with RawWebSocket(port) as publisher, connect(port, max_queue=None) as subscriber, \
            HttpEvents(port, topic_events(first)) as stream:
        publisher.open()
        assert_stream_head(stream.response)
        subscribed(subscriber, first)
        subscribed(subscriber, second)
        # One write holding every frame, so the server takes many of them in one read.
        publisher.send(b"".join(encode_frame(OP_TEXT, publish_text(t, d, r).encode()) for t, r, d in plan))
        next_seq = {first: 1, second: 1}
        expected = []      # (topic, seq, data) in the order sent
        deadline = time.monotonic() + STREAM_TIMEOUT
        for topic, ref, data in plan:
            answer = publisher.recv_json(max(0.0, deadline - time.monotonic()))
            assert answer == published(topic, next_seq[topic], ref), (
                f"answer for {ref} (publish {len(expected) + 1} of {BURST}) out of order or wrong: {answer}")
            expected.append((topic, next_seq[topic], data))
            next_seq[topic] += 1
        texts = receive_by_topic(subscriber, BURST)
        for topic in (first, second):
            mine = [(seq, data) for t, seq, data in expected if t == topic]
            assert len(texts.get(topic, [])) == len(mine), (topic, len(texts.get(topic, [])), len(mine))
            for text, (seq, data) in zip(texts[topic], mine):
                assert_message_text(text, topic, seq, data)
        mine = [(seq, data) for t, seq, data in expected if t == first]
        event = first_event(stream.reader, {"type": "subscribed", "topic": first, "seq": 0})
        for index, (seq, data) in enumerate(mine):
            event = stream.reader.next_event() if index else event
            assert (event.event, event.id) == ("message", str(seq)), event
            assert_message_text(event.data[0], first, seq, data)
        listing = topics_listing(port)
        assert (listing[first], listing[second]) == (next_seq[first] - 1, next_seq[second] - 1)


def test_a_refused_publish_in_a_burst_is_answered_in_its_place(unthrottled):
    """PROTOCOL.md: the answers "come in the order the publishes were sent on that connection",
    refusals (which echo `ref`) included."""
    port, topic = unthrottled.port, unique("inplace")
    plan = []
    for i in range(30):
        if i == 10:
            plan.append(("bad-topic", publish_text("has space", "1", "r10")))
        elif i == 20:
            plan.append(("no-data", publish_text(topic, ABSENT, "r20")))
        else:
            plan.append(("ok", publish_text(topic, '{"i":%d}' % i, f"r{i}")))
    with RawWebSocket(port) as publisher, connect(port) as subscriber:
        publisher.open()
        subscribed(subscriber, topic)
        publisher.send(b"".join(encode_frame(OP_TEXT, text.encode()) for _, text in plan))
        seq = 0
        for i, (kind, _) in enumerate(plan):
            answer = publisher.recv_json(STREAM_TIMEOUT)
            if kind == "bad-topic":
                assert_error(answer, "invalid_topic", ref=f"r{i}")
            elif kind == "no-data":
                assert_error(answer, "bad_message", ref=f"r{i}")
            else:
                seq += 1
                assert answer == published(topic, seq, f"r{i}"), (i, answer)
        for expected_seq, i in enumerate([i for i, (kind, _) in enumerate(plan) if kind == "ok"], start=1):
            expect_message(subscriber, topic, expected_seq, {"i": i})
        assert topic_seq(port, topic) == 28


@dataclass(frozen=True)
class MAYBE:
    """A ref the error may echo or leave out."""
    ref: str


# A publish that is refused: (message text for a valid topic, codes, the ref the error echoes).
BAD_PUBLISHES = {
    "ref-65-ascii-bytes": (lambda t: publish_text(t, "1", "x" * 65), "bad_message", ABSENT),
    "ref-66-bytes-of-2-byte-chars": (lambda t: publish_text(t, "1", "\u00e9" * 33), "bad_message", ABSENT),
    "ref-68-bytes-of-4-byte-chars": (lambda t: publish_text(t, "1", "\U0001F600" * 17), "bad_message", ABSENT),
    "ref-not-a-string": (lambda t: publish_text(t, "1", 17), "bad_message", ABSENT),
    "ref-an-object": (lambda t: publish_text(t, "1", {"id": "m-1"}), "bad_message", ABSENT),
    "missing-topic": (lambda t: publish_text(ABSENT, "1", "r-1"), "bad_message", "r-1"),
    "missing-data": (lambda t: publish_text(t, ABSENT, "r-2"), "bad_message", "r-2"),
    "missing-data-and-ref": (lambda t: publish_text(t, ABSENT), "bad_message", ABSENT),
    "topic-with-space": (lambda t: publish_text("has space", "1", "r-3"), "invalid_topic", "r-3"),
    "empty-topic": (lambda t: publish_text("", "1", "r-4"), "invalid_topic", "r-4"),
    "65-char-topic": (lambda t: publish_text("x" * 65, "1", "r-5"), "invalid_topic", "r-5"),
    "non-ascii-topic": (lambda t: publish_text("caf\u00e9", "1", "r-6"), "invalid_topic", "r-6"),
    "slash-topic": (lambda t: publish_text("a/b", "1", "r-7"), "invalid_topic", "r-7"),
    "topic-not-a-string": (lambda t: publish_text(7, "1", "r-8"), ("bad_message", "invalid_topic"), "r-8"),
    # Not JSON at all: PROTOCOL.md does not say whether a ref is read from such a message.
    "not-json": (lambda t: '{"type":"publish","topic":"%s","data":{"a":},"ref":"r-9"}' % t, "bad_message", MAYBE("r-9")),
    "bad-number-in-data": (lambda t: publish_text(t, "01", "r-10"), "bad_message", MAYBE("r-10")),
}


@pytest.mark.parametrize("make, codes, ref", list(BAD_PUBLISHES.values()), ids=list(BAD_PUBLISHES))
def test_a_bad_publish_is_an_error_echoing_a_valid_ref_and_publishes_nothing(server, make, codes, ref):
    port, topic = server.port, unique("badpub")
    with connect(port) as subscriber, connect(port) as publisher:
        subscribed(subscriber, topic)
        publisher.send(make(topic))
        if isinstance(ref, MAYBE):
            assert_error(recv_json(publisher), codes, ref.ref, ref_optional=True)
        else:
            assert_error(recv_json(publisher), codes, ref)
        assert topic_seq(port, topic) == 0
        # The connection stays open and publishes; the topic's first message is this one.
        assert ws_publish(publisher, topic, {"after": True}, "after") == 1
        expect_message(subscriber, topic, 1, {"after": True})


def test_data_null_is_a_message_and_missing_data_is_not(server):
    port, topic = server.port, unique("nulldata")
    with connect(port) as ws:
        ws.send('{"type":"publish","topic":"%s","ref":"no-data"}' % topic)
        assert_error(recv_json(ws), "bad_message", "no-data")
        ws.send('{"type":"publish","topic":"%s","data":null,"ref":"null-data"}' % topic)
        assert recv_json(ws) == published(topic, 1, "null-data")
    with connect(port) as replay:
        assert subscribe(replay, topic=topic, since=0)["seq"] == 1
        expect_message(replay, topic, 1, None)


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
        assert_error(recv_json(ws), "rate_limited")
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


# ---- Batch: POST /api/publish ---------------------------------------------

def test_batch_publishes_every_message_in_order_and_answers_every_seq(server):
    port = server.port
    a, b, c = unique("batch-a"), unique("batch-b"), unique("batch-c")
    assert publish(port, a, "before") == 1
    bodies = list(BODIES.values())
    order = [a, b, a, c, b, a, c]
    messages = list(zip(order, bodies))
    with connect(port) as subscriber, HttpEvents(port, topic_events(a)) as stream:
        assert_stream_head(stream.response)
        for topic, seq in ((a, 1), (b, 0), (c, 0)):
            subscribed(subscriber, topic, seq)
        resp = post_batch(port, batch_body(messages))
        expected_seqs = {a: [2, 3, 4], b: [1, 2], c: [1, 2]}
        counters = {topic: iter(seqs) for topic, seqs in expected_seqs.items()}
        expected = [(topic, next(counters[topic])) for topic in order]
        assert_batch_answer(resp, expected)
        listing = topics_listing(port)
        assert (listing[a], listing[b], listing[c]) == (4, 2, 2)
        texts = receive_by_topic(subscriber, len(messages))
        for topic in (a, b, c):
            sent = [(seq, body) for (t, seq), (_, body) in zip(expected, messages) if t == topic]
            assert len(texts[topic]) == len(sent), (topic, texts[topic])
            for text, (seq, body) in zip(texts[topic], sent):
                assert_message_text(text, topic, seq, body)
        event = first_event(stream.reader, {"type": "subscribed", "topic": a, "seq": 1})
        for index, ((t, seq), (_, body)) in enumerate(x for x in zip(expected, messages) if x[0][0] == a):
            event = stream.reader.next_event() if index else event
            assert (event.event, event.id) == ("message", str(seq)), event
            assert_message_text(event.data[0], a, seq, body)


def test_batch_members_in_any_order_and_with_whitespace(server):
    port, topic = server.port, unique("batch-order")
    body = ('{ "messages" : [ { "data" : { "z" : 1.10 , "a" : "\\u00e9" } , "topic" : "%s" } ,\n'
            '\t{"topic":"%s","data":[ 1e400 ]} ] }' % (topic, topic)).encode()
    with connect(port) as subscriber:
        subscribed(subscriber, topic)
        assert_batch_answer(post_batch(port, body), [(topic, 1), (topic, 2)])
        assert_message_text(recv_text(subscriber), topic, 1, '{"z":1.10,"a":"\\u00e9"}')
        assert_message_text(recv_text(subscriber), topic, 2, "[1e400]")


def good(topic: str, n: int) -> str:
    return '{"topic":%s,"data":{"n":%d}}' % (json.dumps(topic), n)


# Each builds a request body from two topics: `first` (already at seq 1) and `fresh` (never
# published). Where a list of messages can be written, valid messages come before the bad one.
BAD_BATCHES = {
    "not-json": lambda first, fresh: '{"messages":[%s,%s' % (good(first, 1), good(fresh, 2)),
    "trailing-garbage": lambda first, fresh: '{"messages":[%s,%s]} x' % (good(first, 1), good(fresh, 2)),
    "body-a-list": lambda first, fresh: "[%s,%s]" % (good(first, 1), good(fresh, 2)),
    "no-messages-member": lambda first, fresh: '{"message":[%s,%s]}' % (good(first, 1), good(fresh, 2)),
    "messages-an-object": lambda first, fresh: '{"messages":%s}' % good(first, 1),
    "messages-null": lambda first, fresh: '{"messages":null}',
    "messages-a-string": lambda first, fresh: '{"messages":"%s"}' % first,
    "empty-list": lambda first, fresh: '{"messages":[]}',
    "message-a-number": lambda first, fresh: '{"messages":[%s,%s,5]}' % (good(first, 1), good(fresh, 2)),
    "message-a-list": lambda first, fresh: '{"messages":[%s,%s,["%s",1]]}' % (good(first, 1), good(fresh, 2), first),
    "message-null": lambda first, fresh: '{"messages":[%s,%s,null]}' % (good(first, 1), good(fresh, 2)),
    "missing-topic": lambda first, fresh: '{"messages":[%s,%s,{"data":1}]}' % (good(first, 1), good(fresh, 2)),
    "missing-data": lambda first, fresh: '{"messages":[%s,%s,{"topic":"%s"}]}' % (good(first, 1), good(fresh, 2), first),
    "topic-with-space": lambda first, fresh: '{"messages":[%s,%s,{"topic":"has space","data":1}]}' % (good(first, 1), good(fresh, 2)),
    "empty-topic": lambda first, fresh: '{"messages":[%s,%s,{"topic":"","data":1}]}' % (good(first, 1), good(fresh, 2)),
    "65-char-topic": lambda first, fresh: '{"messages":[%s,%s,{"topic":"%s","data":1}]}' % (good(first, 1), good(fresh, 2), "x" * 65),
    "non-ascii-topic": lambda first, fresh: '{"messages":[%s,%s,{"topic":"caf\u00e9","data":1}]}' % (good(first, 1), good(fresh, 2)),
    "topic-not-a-string": lambda first, fresh: '{"messages":[%s,%s,{"topic":7,"data":1}]}' % (good(first, 1), good(fresh, 2)),
    "bad-first-message": lambda first, fresh: '{"messages":[{"topic":"a/b","data":1},%s,%s]}' % (good(first, 1), good(fresh, 2)),
    "1001-messages": lambda first, fresh: '{"messages":[%s]}' % ",".join(good(first if i % 2 else fresh, i) for i in range(1001)),
}


@pytest.mark.parametrize("make", list(BAD_BATCHES.values()), ids=list(BAD_BATCHES))
def test_a_bad_batch_is_400_and_publishes_nothing(server, make):
    port = server.port
    first, fresh = unique("badbatch"), unique("badbatch-fresh")
    assert publish(port, first, "existing") == 1
    with connect(port) as subscriber:
        subscribed(subscriber, first, 1)
        subscribed(subscriber, fresh, 0)
        resp = post_batch(port, make(first, fresh).encode("utf-8"))
        assert_json_error(resp, 400, "bad_request")
        assert resp.json()["detail"], "the detail names what is wrong"
        listing = topics_listing(port)
        assert (listing[first], listing[fresh]) == (1, 0), listing
        # The next message on each topic is the one published now.
        assert publish(port, first, "marker") == 2
        assert publish(port, fresh, "marker") == 1
        expect_message(subscriber, first, 2, "marker")
        expect_message(subscriber, fresh, 1, "marker")


def test_a_batch_of_1000_messages_is_published_whole(start_server):
    server = start_server("--publish-rate", "0")
    port, first, second = server.port, unique("thousand-a"), unique("thousand-b")
    messages = [(first if i % 4 else second, '{"i":%d}' % i) for i in range(1000)]
    with connect(port, max_queue=None) as subscriber:
        subscribed(subscriber, first)
        subscribed(subscriber, second)
        counts = {first: 0, second: 0}
        expected = []
        for topic, _ in messages:
            counts[topic] += 1
            expected.append((topic, counts[topic]))
        assert_batch_answer(post_batch(port, batch_body(messages)), expected)
        texts = receive_by_topic(subscriber, len(messages))
        for topic in (first, second):
            sent = [(seq, data) for (t, seq), (_, data) in zip(expected, messages) if t == topic]
            assert len(texts[topic]) == len(sent) == counts[topic]
            for text, (seq, data) in zip(texts[topic], sent):
                assert_message_text(text, topic, seq, data)


def test_a_batch_needs_an_api_key_when_keys_are_configured(start_server):
    server = start_server("--api-key", KEY)
    port, topic = server.port, unique("batch-key")
    body = batch_body([(topic, '{"n":1}'), (topic, '{"n":2}')])
    for headers in ({}, bearer(KEY + "x"), {"Authorization": f"Basic {KEY}"}):
        resp = post_batch(port, body, headers)
        assert_json_error(resp, 401, "unauthorized")
        assert resp.header("WWW-Authenticate") == "Bearer", resp.headers
    assert topic_seq(port, topic) == 0
    with connect(port) as subscriber:
        subscribed(subscriber, topic)
        assert_batch_answer(post_batch(port, body, bearer(KEY)), [(topic, 1), (topic, 2)])
        expect_message(subscriber, topic, 1, {"n": 1})
        expect_message(subscriber, topic, 2, {"n": 2})


def test_batch_publish_rate_counts_every_message(start_server):
    server = start_server("--publish-rate", SLOW_RATE, "--publish-burst", "3", "--api-key", KEY, "--api-key", OTHER_KEY)
    port, topic = server.port, unique("batch-rate")
    # Three messages spend the burst of 3: one more, even alone in a request, is over the rate.
    assert_batch_answer(post_batch(port, batch_body([(topic, str(n)) for n in (1, 2, 3)]), bearer(KEY)),
                        [(topic, 1), (topic, 2), (topic, 3)])
    limited = post_batch(port, batch_body([(topic, "4")]), bearer(KEY))
    assert_json_error(limited, 429, "too_many_requests")
    assert int(limited.header("Retry-After")) >= 1
    # Four messages are over a burst of 3 in one request: refused whole.
    assert_json_error(post_batch(port, batch_body([(topic, str(n)) for n in (5, 6, 7, 8)]), bearer(OTHER_KEY)),
                      429, "too_many_requests")
    assert topic_seq(port, topic) == 3


def test_batch_idempotency_key_replays_the_first_answer_and_publishes_nothing_again(server):
    port = server.port
    a, b = unique("idem-batch-a"), unique("idem-batch-b")
    body = batch_body([(a, '{"n":1}'), (b, '{"n":2}'), (a, '{"n":3}')])
    key = {"Idempotency-Key": unique("batch-key")}
    with connect(port) as subscriber:
        subscribed(subscriber, a)
        subscribed(subscriber, b)
        first = post_batch(port, body, key)
        assert_batch_answer(first, [(a, 1), (b, 1), (a, 2)])
        assert first.header("Idempotent-Replayed") is None
        assert publish(port, a, "between") == 3
        for _ in range(2):
            retry = post_batch(port, body, key)
            assert retry.header("Idempotent-Replayed") == "true", (retry.status, retry.headers, retry.body)
            assert (retry.status, retry.body) == (first.status, first.body)
        listing = topics_listing(port)
        assert (listing[a], listing[b]) == (3, 1)
        # The same key on another request is a conflict, and publishes nothing.
        assert_json_error(post_batch(port, batch_body([(a, '{"n":9}')]), key), 409, "conflict")
        conflict = http_client_request(port, "POST", f"/api/topics/{a}/messages", body=b'{"n":1}',
                                       headers={"Content-Type": "application/json", **key})
        assert_json_error(conflict, 409, "conflict")
        assert publish(port, a, "after") == 4
        assert publish(port, b, "after") == 2
        frames = receive_by_topic(subscriber, 6)
        assert [json.loads(t)["data"] for t in frames[a]] == [{"n": 1}, {"n": 3}, "between", "after"]
        assert [json.loads(t)["seq"] for t in frames[a]] == [1, 2, 3, 4]
        assert [json.loads(t)["data"] for t in frames[b]] == [{"n": 2}, "after"]


# ---- A cluster -------------------------------------------------------------

def test_cluster_websocket_and_batch_publishes_cross_nodes_with_global_seqs(start_server, redis):
    a = start_node(start_server, redis)
    b = start_node(start_server, redis)
    topic, other = unique("cl-pub"), unique("cl-batch")
    bodies = list(BODIES.values())
    with connect(a.port) as on_a, connect(b.port) as on_b, connect(a.port) as publisher_a:
        for ws in (on_a, on_b):
            subscribed(ws, topic)
            subscribed(ws, other)
        # WebSocket publishes on A, back to back, reach B.
        for i, body in enumerate(bodies[:3]):
            publisher_a.send(publish_text(topic, body, f"a{i}"))
        for i in range(3):
            assert recv_json(publisher_a, CLUSTER_TIMEOUT) == published(topic, i + 1, f"a{i}")
        for ws in (on_b, on_a):
            for i, body in enumerate(bodies[:3]):
                assert_message_text(recv_text(ws, CLUSTER_TIMEOUT), topic, i + 1, body)
        # A batch on B reaches A; the topic's seqs go on from A's publishes.
        batch = [(topic, bodies[3]), (other, bodies[4]), (topic, bodies[5])]
        assert_batch_answer(post_batch(b.port, batch_body(batch)), [(topic, 4), (other, 1), (topic, 5)])
        for ws in (on_a, on_b):
            texts = receive_by_topic(ws, 3, CLUSTER_TIMEOUT)
            assert len(texts[topic]) == 2 and len(texts[other]) == 1, texts
            assert_message_text(texts[topic][0], topic, 4, bodies[3])
            assert_message_text(texts[topic][1], topic, 5, bodies[5])
            assert_message_text(texts[other][0], other, 1, bodies[4])
        # And a WebSocket publish on B follows them.
        with connect(b.port) as publisher_b:
            publisher_b.send(publish_text(topic, bodies[6], "b0"))
            assert recv_json(publisher_b, CLUSTER_TIMEOUT) == published(topic, 6, "b0")
        for ws in (on_a, on_b):
            assert_message_text(recv_text(ws, CLUSTER_TIMEOUT), topic, 6, bodies[6])
    for node in (a, b):
        wait_for(lambda: topic_seq(node.port, topic) == 6 and topic_seq(node.port, other) == 1,
                 CLUSTER_TIMEOUT, f"node {node.port} never listed the global seqs")


def test_cluster_publishes_while_redis_is_down_are_refused_and_publish_nothing(start_server, redis):
    a = start_node(start_server, redis)
    b = start_node(start_server, redis)
    topic, other = unique("cl-down"), unique("cl-down-b")
    with connect(a.port) as publisher, connect(a.port) as ws_a, connect(b.port) as ws_b:
        for ws in (ws_a, ws_b):
            subscribed(ws, topic)
        assert ws_publish(publisher, topic, {"n": 1}, "before") == 1
        for ws in (ws_a, ws_b):
            expect_message(ws, topic, 1, {"n": 1}, CLUSTER_TIMEOUT)
        collectors = [Collector(ws_a), Collector(ws_b)]

        redis.stop()
        for node in (a, b):
            wait_for(lambda: readiness(node.port).get("redis") == "down", 10, "a node did not notice Redis went away")
        publisher.send(publish_text(topic, '{"n":"down"}', "while-down"))
        assert_error(recv_json(publisher, REDIS_DOWN_ANSWER), "unavailable", "while-down")
        publisher.send(publish_text(other, '{"n":"down"}'))
        assert_error(recv_json(publisher, REDIS_DOWN_ANSWER), "unavailable")
        refused = post_batch(b.port, batch_body([(topic, '{"n":"down"}'), (other, '{"n":"down"}')]))
        assert refused.status == 503, (refused.status, refused.body)
        assert "Redis" in refused.json()["detail"], refused.body

        redis.start()
        for node in (a, b):
            wait_for(lambda: readiness(node.port).get("redis") == "up", 15, "a node did not reconnect to Redis")
        # Nothing was published while Redis was down: the seqs go on from where they were.
        assert ws_publish(publisher, topic, {"n": 2}, "after") == 2
        assert_batch_answer(post_batch(b.port, batch_body([(other, '{"n":3}')])), [(other, 1)])
        for collector in collectors:
            wait_for(lambda: any(f.get("seq") == 2 or f.get("type") == "gap" for f in collector.frames),
                     CLUSTER_TIMEOUT, "a subscriber missed the publish after Redis came back")
            messages = [(f["seq"], f["data"]) for f in collector.frames if f.get("type") == "message"]
            assert all(data != {"n": "down"} for _, data in messages), collector.frames
            assert messages in ([(2, {"n": 2})], []), collector.frames
    # Redis's history holds exactly the two messages, as either node replays them.
    for node in (a, b):
        with connect(node.port) as replay:
            assert subscribe(replay, topic=topic, since=0) == {
                "type": "subscribed", "topic": topic, "seq": 2, "epoch": EPOCH, "resumed": True}
            expect_message(replay, topic, 1, {"n": 1}, CLUSTER_TIMEOUT)
            expect_message(replay, topic, 2, {"n": 2}, CLUSTER_TIMEOUT)
    # The refusal's body, as PROTOCOL.md ("Clusters") gives it; checked last so that a wrong code
    # does not hide the checks above.
    assert_json_error(refused, 503, "service_unavailable")


def test_cluster_publishes_sent_back_to_back_are_all_answered_and_each_topic_keeps_its_order(start_server, redis):
    """PROTOCOL.md: in a cluster, publishes to different topics may be answered out of order
    (match them by `ref`); each topic's messages keep the order they were sent in."""
    a = start_node(start_server, redis)
    b = start_node(start_server, redis)
    first, second = unique("cl-burst-a"), unique("cl-burst-b")
    plan = [(second if i % 2 else first, f"r{i}", '{"i":%d,"f":1.10}' % i) for i in range(60)]
    with RawWebSocket(a.port) as publisher, connect(b.port, max_queue=None) as subscriber:
        publisher.open()
        subscribed(subscriber, first)
        subscribed(subscriber, second)
        publisher.send(b"".join(encode_frame(OP_TEXT, publish_text(t, d, r).encode()) for t, r, d in plan))
        answers = {}
        deadline = time.monotonic() + STREAM_TIMEOUT
        order = {first: [], second: []}     # refs in the order their answers arrived, per topic
        for _ in plan:
            answer = publisher.recv_json(max(0.0, deadline - time.monotonic()))
            assert answer.get("type") == "published" and answer.get("ref") not in answers, answer
            answers[answer["ref"]] = answer
            order[answer["topic"]].append(answer["ref"])
        assert set(answers) == {r for _, r, _ in plan}
        texts = receive_by_topic(subscriber, len(plan), STREAM_TIMEOUT)
        for topic in (first, second):
            sent = [(r, d) for t, r, d in plan if t == topic]
            assert order[topic] == [r for r, _ in sent], f"answers for {topic} out of order: {order[topic]}"
            assert [answers[r] for r, _ in sent] == [published(topic, seq, r) for seq, (r, _) in
                                                     enumerate(sent, start=1)]
            assert len(texts[topic]) == len(sent), (topic, len(texts[topic]))
            for seq, (text, (_, data)) in enumerate(zip(texts[topic], sent), start=1):
                assert_message_text(text, topic, seq, data)
