"""Publishing over WebSocket (docs/PROTOCOL.md, "Publishing over WebSocket").

- `{"type":"publish","topic":…,"data":…,"ref":…}` is answered `{"type":"published","topic","seq","ref"}`
  once the message is sequenced and in the history; `data` reaches WebSocket and SSE subscribers
  as the bytes written (whitespace outside strings aside); publishes sent back to back are
  answered in the order sent; a publish that may not happen is an `error` echoing a valid `ref`,
  and the connection stays open.

Who may publish and the publish rate are in test_publish_limits.py, `POST /api/publish` in
test_publish_batch.py, publishing through Redis in test_publish_cluster.py.

"Nothing published" is always checked with a real condition: the topic's seq in `GET /api/topics`,
and the next message a subscriber gets (a marker published afterwards must carry the next seq).
"""

from __future__ import annotations

from dataclasses import dataclass
import time

import pytest

from publishing import (  # noqa: F401  (`unthrottled` is a fixture)
    ABSENT,
    BURST,
    STREAM_TIMEOUT,
    WS_BODIES,
    assert_error,
    expect_message,
    publish_text,
    published,
    receive_by_topic,
    subscribed,
    topic_seq,
    unthrottled,
    ws_publish,
)
from sse_client import HttpEvents, assert_stream_head, first_event, topic_events
from test_exact_payloads import assert_message_text
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
        assert (event.event, event.number, len(event.data)) == ("message", "1", 1), event
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
            assert (event.event, event.number) == ("message", str(seq)), event
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
