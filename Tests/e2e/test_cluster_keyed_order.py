"""A connection's publishes to a topic are numbered in the order sent, on every engine
(docs/PROTOCOL.md), an `Idempotency-Key` or not. In a cluster a keyed publish goes out only once
Redis has answered its key's claim: before, a publish pipelined after it went to Redis first and
took the lower number."""

import json
import socket

from conftest import http_request, json_ok, api
from test_cluster import redis  # noqa: F401  (the fixture)
from test_cluster_batching import start_node
from test_http_pipeline_limits import replies_until_closed
from wsclient import unique


def post(topic: str, data, *headers) -> bytes:
    return http_request("POST", f"/api/topics/{topic}/messages",
                        headers=[("Content-Type", "application/json"), *headers], body=json.dumps(data).encode())


def test_a_keyed_publish_is_numbered_before_the_publishes_sent_after_it(start_server, redis):  # noqa: F811
    node = start_node(start_server, redis)
    topic = unique("keyed")
    batch = http_request("POST", "/api/publish", headers=[("Content-Type", "application/json"), ("Idempotency-Key", unique("b"))],
                         body=json.dumps({"messages": [{"topic": topic, "data": 3}]}).encode())
    with socket.create_connection(("127.0.0.1", node.port), timeout=10) as sock:
        sock.sendall(post(topic, 1, ("Idempotency-Key", unique("k"))) + post(topic, 2) + batch
                     + post(topic, 4, ("Connection", "close")))
        replies = replies_until_closed(sock)
    assert [status for status, _ in replies] == [201, 201, 201, 201], replies
    messages = json_ok(api(node.port, "GET", f"/api/topics/{topic}/messages?after=0"))["messages"]
    assert [m["data"] for m in messages] == [1, 2, 3, 4], messages
