"""Helpers for the publish tests (test_publish*.py): publish messages written as text, the exact
answers and errors they get, batch bodies for `POST /api/publish`, HTTP publishes from a chosen
loopback address, and a server whose client-message rate is off.
"""

from __future__ import annotations

import http.client
import json
import time

import pytest

from conftest import HOST, IO_TIMEOUT, Response, http_client_request, json_ok
from test_exact_payloads import BODIES
from test_ws_topics import assert_message
from wsclient import EPOCH, recv_json, recv_text, subscribe, topics_listing, unique

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
