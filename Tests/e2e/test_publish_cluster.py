"""Publishing with `--engine redis` (docs/PROTOCOL.md, "Publishing over WebSocket" and "HTTP publish").

The sequence numbers are global across nodes; publishes sent back to back are all answered and
each topic keeps its order; while Redis is down a publish is refused (`unavailable` over
WebSocket, 503 over HTTP) with nothing published. Real nodes on one real redis-server.
"""

from __future__ import annotations

import time

from conftest import assert_json_error, wait_for
from publishing import (
    CLUSTER_TIMEOUT,
    REDIS_DOWN_ANSWER,
    STREAM_TIMEOUT,
    assert_batch_answer,
    assert_error,
    batch_body,
    expect_message,
    post_batch,
    publish_text,
    published,
    receive_by_topic,
    subscribed,
    topic_seq,
    ws_publish,
)
from test_cluster import Collector, readiness, redis, start_node  # noqa: F401  (`redis` is a fixture)
from test_exact_payloads import BODIES, assert_message_text
from wsclient import (
    EPOCH,
    OP_TEXT,
    RawWebSocket,
    connect,
    encode_frame,
    recv_json,
    recv_text,
    subscribe,
    unique,
)


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
