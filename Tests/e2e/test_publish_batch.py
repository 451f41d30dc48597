"""Publishing in batches (docs/PROTOCOL.md, "HTTP publish").

`POST /api/publish` checks every message before publishing any: one bad message makes the whole
request 400 and publishes nothing; at most 1,000 messages; API keys, the publish rate (each
message counts) and `Idempotency-Key` apply as for one message.

"Nothing published" is always checked with a real condition: the topic's seq in `GET /api/topics`,
and the next message a subscriber gets.
"""

from __future__ import annotations

import json

import pytest

from conftest import assert_json_error, http_client_request
from publishing import (
    KEY,
    OTHER_KEY,
    SLOW_RATE,
    assert_batch_answer,
    batch_body,
    bearer,
    expect_message,
    post_batch,
    receive_by_topic,
    subscribed,
    topic_seq,
)
from sse_client import HttpEvents, assert_stream_head, first_event, topic_events
from test_exact_payloads import BODIES, assert_message_text
from wsclient import connect, publish, recv_text, topics_listing, unique


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
            assert (event.event, event.number) == ("message", str(seq)), event
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
    # Over the burst with the bucket empty too: told no wait helps, never when to retry.
    beyond_empty = post_batch(port, batch_body([(topic, str(n)) for n in (5, 6, 7, 8)]), bearer(KEY))
    assert_json_error(beyond_empty, 429, "too_many_requests")
    assert beyond_empty.header("Retry-After") is None, beyond_empty
    # Four messages are over a burst of 3 in one request: refused whole, and told no wait helps
    # (no Retry-After: it said 1 s, however long the client waited).
    beyond = post_batch(port, batch_body([(topic, str(n)) for n in (5, 6, 7, 8)]), bearer(OTHER_KEY))
    assert_json_error(beyond, 429, "too_many_requests")
    assert beyond.header("Retry-After") is None and "more than the publish burst" in beyond.json()["detail"], beyond
    assert topic_seq(port, topic) == 3
    # A refused batch spends nothing: the bucket's tokens take a batch of two.
    # Before, it spent what it took until it was refused, and the bucket was empty.
    assert_batch_answer(post_batch(port, batch_body([(topic, str(n)) for n in (9, 10)]), bearer(OTHER_KEY)),
                        [(topic, 4), (topic, 5)])


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
