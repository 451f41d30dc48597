"""The backend's hooks (docs/HOOKS.md) against a real backend process (hook_backend.py):
connect by cookie over WebSocket and SSE, the publish hook's refusal and rewrite, RPC, a
client's commit over WebSocket allowed by a grant or by the write hook, and a hook's answer read
up to 1 MiB."""

from __future__ import annotations

import json
import re
import signal
import socket
import time

import pytest
from websockets.exceptions import ConnectionClosed

from conftest import api, assert_json_error, curl, json_ok
from hooks import API_KEY, Backend, cookie, elapsed
from wsclient import connect, recv_json, send_json, subscribe, unique

TIMEOUT = 0.5  # --hook-timeout of this module's gateway


@pytest.fixture(scope="module")
def backend(tmp_path_factory):
    process = Backend(tmp_path_factory.mktemp("backend"))
    yield process
    process.stop()


@pytest.fixture(scope="module")
def gateway(module_servers, backend):
    return module_servers("--api-key", API_KEY, "--hook-timeout", str(TIMEOUT), "--presence-interval", "0.05",
                          "--hook-forward-header", "X-Tenant", *backend.hook_args())


def keyed(port: int, method: str, path: str, payload) -> dict:
    from conftest import http_client_request
    resp = http_client_request(port, method, path, body=json.dumps(payload).encode(),
                               headers={"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"})
    return json_ok(resp, 201 if path == "/api/stores" else 200)


def test_a_cookie_admits_a_websocket_and_its_identity_shows_in_presence(gateway, backend):
    topic = unique("room")
    with connect(gateway.port, additional_headers={**cookie("alice"), "X-Tenant": "acme", "X-Other": "no"}) as ws:
        frame = subscribe(ws, topic=topic, presence=True)
        assert frame["type"] == "subscribed", frame
        presence = recv_json(ws)
        assert presence["type"] == "presence", presence
        assert [(m["user"], m.get("info")) for m in presence["members"]] == [("alice", {"name": "Alice"})]
    call = backend.stats()["last"]["connect"]
    # Cookie, Authorization and the headers --hook-forward-header names, and no others.
    assert call["transport"] == "websocket" and call["headers"] == {"cookie": "session=alice", "x-tenant": "acme"}, call
    assert set(call) == {"client", "transport", "remoteAddress", "headers"}, call


def test_a_refused_websocket_is_closed_with_1008_and_the_reason(gateway):
    with connect(gateway.port, additional_headers=cookie("mallory")) as ws:
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=5)
    assert closed.value.rcvd.code == 1008 and closed.value.rcvd.reason == "mallory is banned", closed.value


def test_nothing_a_websocket_sends_is_read_before_it_is_admitted(gateway):
    # The message is on the wire before the hook answers; it is answered only once admitted.
    with connect(gateway.port, additional_headers=cookie("bob")) as ws:
        send_json(ws, {"type": "subscribe", "topic": "chat"})
        assert recv_json(ws)["type"] == "subscribed"
        assert subscribe(ws, topic="secret")["code"] == "forbidden"  # bob's grant names chat only


def test_sse_is_admitted_by_cookie_and_refused_with_a_status(gateway):
    refused = curl(gateway.port, "/api/topics/chat/events", "-H", "Cookie: session=mallory", "--max-time", "5")
    assert refused.status == 403 and refused.json() == {"error": "forbidden", "detail": "mallory is banned"}
    anonymous = curl(gateway.port, "/api/topics/chat/events", "--max-time", "5")
    assert anonymous.status == 401 and anonymous.json()["error"] == "unauthorized"
    outside = curl(gateway.port, "/api/topics/secret/events", "-H", "Cookie: session=bob", "--max-time", "5")
    assert outside.status == 403, outside
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=5) as sock:
        sock.sendall(b"GET /api/topics/chat/events HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: session=bob\r\n\r\n")
        received = b""
        while b"event: subscribed" not in received:
            chunk = sock.recv(4096)
            assert chunk, received
            received += chunk
    assert received.startswith(b"HTTP/1.1 200 OK\r\n") and b"Content-Type: text/event-stream" in received, received


def test_the_publish_hook_refuses_and_rewrites_for_every_subscriber(gateway):
    with connect(gateway.port, additional_headers=cookie("alice")) as alice, \
         connect(gateway.port, additional_headers=cookie("bob")) as bob:
        assert subscribe(bob, topic="chat")["type"] == "subscribed"
        assert subscribe(alice, topic="chat")["type"] == "subscribed"
        send_json(alice, {"type": "publish", "topic": "chat", "data": {"text": "forbidden"}, "ref": "p1"})
        assert recv_json(alice) == {"type": "error", "code": "forbidden", "message": "that word is not allowed", "ref": "p1"}
        send_json(alice, {"type": "publish", "topic": "chat", "data": {"text": "rewrite"}, "ref": "p2"})
        frames = [recv_json(alice), recv_json(alice)]
        published = next(f for f in frames if f["type"] == "published")
        expected = {"text": "rewritten by the backend", "by": "alice"}
        assert [f["data"] for f in frames if f["type"] == "message"] == [expected]
        message = recv_json(bob)
        assert message["type"] == "message" and message["data"] == expected and message["seq"] == published["seq"]
        # What the hook allows as it is arrives exactly as sent.
        alice.send('{"type":"publish","topic":"chat","data":{"text":"fine","n":1.50},"ref":"p3"}')
        raw = bob.recv(timeout=5)
        assert raw.endswith(',"data":{"text":"fine","n":1.50}}'), raw


def test_the_publish_hook_judges_the_very_bytes_that_are_published(gateway, backend):
    """The hook is sent the data as the client wrote it, two members of one name and escapes
    included, so the backend judges the document subscribers get. Before, it got a copy parsed and
    written again (the last of two `text` members only, escapes decoded): a client slipped a word
    the backend refuses past it in a first `text` member."""
    data = '{"text":"forbidden","text":"fine","e":"\\u00e9"}'
    with connect(gateway.port, additional_headers=cookie("alice")) as alice, \
         connect(gateway.port, additional_headers=cookie("bob")) as bob:
        assert subscribe(bob, topic="chat")["type"] == "subscribed"
        alice.send('{"type":"publish","topic":"chat","data":' + data + ',"ref":"p9"}')
        raw = bob.recv(timeout=5)
    assert raw.endswith(',"data":' + data + '}'), raw
    sent = backend.stats()["raw"]["publish"]
    assert '"data":' + data in sent and '"topic":"chat"' in sent, sent


def test_a_connections_publishes_through_the_hook_are_numbered_in_the_order_sent(gateway):
    """The first publish is answered by the hook 0.3 s late, the second at once: both are
    numbered in the order sent, and subscribers get them so. Before, the second took the first's
    number."""
    topic = "chat"
    with connect(gateway.port, additional_headers=cookie("alice")) as alice, \
         connect(gateway.port, additional_headers=cookie("bob")) as bob:
        assert subscribe(bob, topic=topic)["type"] == "subscribed"
        send_json(alice, {"type": "publish", "topic": topic, "data": {"n": 1, "hookDelay": 0.3}, "ref": "slow"})
        send_json(alice, {"type": "publish", "topic": topic, "data": {"n": 2}, "ref": "fast"})
        acks = [recv_json(alice), recv_json(alice)]
        assert [a["type"] for a in acks] == ["published", "published"], acks
        seqs = {a["ref"]: a["seq"] for a in acks}
        assert seqs["fast"] == seqs["slow"] + 1, acks
        messages = [recv_json(bob), recv_json(bob)]
        assert [m["data"]["n"] for m in messages] == [1, 2], messages
        assert [m["seq"] for m in messages] == [seqs["slow"], seqs["fast"]], messages


@pytest.mark.parametrize("how", ["heartbeat", "drain"])
def test_an_event_stream_waiting_for_the_connect_hook_gets_its_status_first(start_server, tmp_path, how):
    """While the connect hook decides an event stream, nothing but the answer's status line may
    start the response. Before, a heartbeat (`--sse-heartbeat` shorter than the hook's wait) or a
    drain's `retry:` and `draining` event went out first, and no client could read the answer."""
    slow = Backend(tmp_path / "backend")
    slow.set_delay(2.0)
    try:
        gateway = start_server("--sse-heartbeat", "1", "--hook-timeout", "5", *slow.hook_args("connect"))
        with socket.create_connection(("127.0.0.1", gateway.port), timeout=8) as sock:
            sock.sendall(b"GET /api/topics/chat/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         b"Accept: text/event-stream\r\nCookie: session=alice\r\n\r\n")
            if how == "drain":
                time.sleep(0.5)
                gateway.proc.send_signal(signal.SIGTERM)
            received = b""
            while b"\r\n\r\n" not in received:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                received += chunk
        expected = b"HTTP/1.1 200 OK\r\n" if how == "heartbeat" else b"HTTP/1.1 503 "
        assert received.startswith(expected), received[:200]
    finally:
        slow.stop()


def test_rpc_round_trip_failure_and_time_out(gateway):
    with connect(gateway.port, additional_headers=cookie("alice")) as ws:
        send_json(ws, {"type": "rpc", "id": "r1", "method": "echo", "data": {"q": [1, 2]}})
        assert recv_json(ws) == {"type": "rpc_result", "id": "r1",
                                 "data": {"echo": {"q": [1, 2]}, "user": "alice", "info": {"name": "Alice"}}}
        send_json(ws, {"type": "rpc", "id": "r2", "method": "fail"})
        answer = recv_json(ws)
        assert answer["type"] == "rpc_error" and answer["id"] == "r2" and answer["code"] == "unavailable", answer
        start = time.monotonic()
        send_json(ws, {"type": "rpc", "id": "r3", "method": "slow"})
        answer = recv_json(ws, timeout=5)
        assert answer["type"] == "rpc_error" and answer["code"] == "unavailable", answer
        assert TIMEOUT * 0.8 <= elapsed(start) < TIMEOUT + 1.0, elapsed(start)
        # The connection stays usable.
        send_json(ws, {"type": "rpc", "id": "r4", "method": "echo", "data": None})
        assert recv_json(ws)["id"] == "r4"


def test_a_commit_needs_a_grant_or_the_write_hook_and_honours_if_version(gateway):
    paint = keyed(gateway.port, "POST", "/api/stores", {"name": "paint"})["name"]
    hooked = keyed(gateway.port, "POST", "/api/stores", {"name": "hooked"})["name"]
    change = [{"op": "put", "model": "tile", "value": {"color": "red"}}]
    with connect(gateway.port, additional_headers=cookie("alice")) as alice, \
         connect(gateway.port, additional_headers=cookie("bob")) as bob:
        # alice's grant names the store.
        send_json(alice, {"type": "commit", "store": paint, "changes": change, "ref": "c1"})
        assert recv_json(alice) == {"type": "committed", "store": paint, "version": 1, "ref": "c1"}
        send_json(alice, {"type": "commit", "store": paint, "changes": change, "ifVersion": 0, "ref": "c2"})
        stale = recv_json(alice)
        assert stale["type"] == "error" and stale["code"] == "precondition_failed", stale
        assert stale["version"] == 1 and stale["ref"] == "c2", stale
        # bob has no grant: the write hook decides.
        send_json(bob, {"type": "commit", "store": paint, "changes": change, "ref": "c3"})
        assert recv_json(bob) == {"type": "error", "code": "forbidden", "message": "bob may not write to paint", "ref": "c3"}
        send_json(bob, {"type": "commit", "store": hooked, "changes": change, "ref": "c4"})
        assert recv_json(bob) == {"type": "committed", "store": hooked, "version": 1, "ref": "c4"}
    assert json_ok(api(gateway.port, "GET", "/api/stores/paint"))["version"] == 1


def test_commits_through_the_write_hook_are_applied_in_the_order_sent(gateway):
    # The hook answers the first commit last; the second still waits for it, and takes the next
    # version.
    store = keyed(gateway.port, "POST", "/api/stores", {"name": unique("hooked")})["name"]
    slow = [{"op": "put", "model": "tile", "value": {"color": "red", "hookDelay": TIMEOUT / 2}}]
    fast = [{"op": "put", "model": "tile", "value": {"color": "blue"}}]
    with connect(gateway.port, additional_headers=cookie("bob")) as bob:
        send_json(bob, {"type": "commit", "store": store, "changes": slow, "ref": "slow"})
        send_json(bob, {"type": "commit", "store": store, "changes": fast, "ref": "fast"})
        assert recv_json(bob) == {"type": "committed", "store": store, "version": 1, "ref": "slow"}
        assert recv_json(bob) == {"type": "committed", "store": store, "version": 2, "ref": "fast"}
    assert json_ok(api(gateway.port, "GET", f"/api/stores/{store}"))["models"]["tile"] == {"color": "blue"}


def test_metrics_count_each_hooks_calls_failures_and_latency(gateway):
    def counts() -> dict[str, float]:
        text = api(gateway.port, "GET", "/metrics").body.decode()
        found = {}
        for name in ("hook_calls_total", "hook_failures_total", "hook_latency_seconds_count"):
            match = re.search(rf'receptionist_{name}\{{hook="rpc"\}} (\S+)', text)
            found[name] = float(match.group(1)) if match else 0.0
        return found

    before = counts()
    with connect(gateway.port, additional_headers=cookie("alice")) as ws:
        send_json(ws, {"type": "rpc", "id": "m1", "method": "echo"})
        assert recv_json(ws)["type"] == "rpc_result"
        send_json(ws, {"type": "rpc", "id": "m2", "method": "fail"})
        assert recv_json(ws)["type"] == "rpc_error"
    after = counts()
    assert after["hook_calls_total"] - before["hook_calls_total"] == 2, (before, after)
    assert after["hook_failures_total"] - before["hook_failures_total"] == 1, (before, after)
    assert after["hook_latency_seconds_count"] - before["hook_latency_seconds_count"] == 1, (before, after)


# ---- A hook's answer is read up to 1 MiB -----------------------------------------

ANSWER_LIMIT = 1 << 20  # HTTPClient.maxResponseBytes: docs/HOOKS.md, docs/DESIGN.md


def test_a_hook_answer_of_1_mib_is_read_and_one_byte_more_is_unavailable(start_server, backend):
    """A connect or publish hook's allow-answer of exactly 1 MiB admits and allows; the same
    answer one byte longer is not read, and the client gets the documented `unavailable`: an
    `unavailable` error then close 1013 for a WebSocket connect, 503 for an SSE connect, an
    `unavailable` error (the connection usable) for a publish. The gateway serves on after.
    Without the limit the longer answer would admit and allow too; with a smaller one the 1 MiB
    answer would be refused; a time-out instead would say "did not answer in time"."""
    gateway = start_server("--api-key", API_KEY, "--hook-timeout", "10", *backend.hook_args("connect", "publish"))
    over = ANSWER_LIMIT + 1

    # The connect hook: one byte over refuses a WebSocket (1013) and an SSE request (503).
    with connect(gateway.port, additional_headers=cookie(f"pad-{over}")) as ws:
        assert recv_json(ws, timeout=15) == {"type": "error", "code": "unavailable",
                                             "message": "the connect hook's answer is too large"}
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=15)
    assert closed.value.rcvd.code == 1013 and closed.value.rcvd.reason == "try again later", closed.value
    refused = curl(gateway.port, "/api/topics/chat/events", "-H", f"Cookie: session=pad-{over}", "--max-time", "15")
    assert_json_error(refused, 503, "service_unavailable")
    assert refused.json()["detail"] == "the connect hook's answer is too large", refused.json()

    # Exactly 1 MiB admits; on that connection, the publish hook's answer is bounded the same way.
    topic = unique("padded")
    with connect(gateway.port, additional_headers=cookie(f"pad-{ANSWER_LIMIT}")) as ws:
        assert subscribe(ws, topic=topic, timeout=15)["type"] == "subscribed"
        send_json(ws, {"type": "publish", "topic": topic, "data": {"answerBytes": over}, "ref": "over"})
        assert recv_json(ws, timeout=15) == {"type": "error", "code": "unavailable",
                                             "message": "the publish hook's answer is too large", "ref": "over"}
        send_json(ws, {"type": "publish", "topic": topic, "data": {"answerBytes": ANSWER_LIMIT}, "ref": "fits"})
        frames = [recv_json(ws, timeout=15), recv_json(ws, timeout=15)]
        assert {f["type"] for f in frames} == {"published", "message"}, frames
        assert next(f for f in frames if f["type"] == "message")["data"] == {"answerBytes": ANSWER_LIMIT}, frames

    # Others are served as before: a small answer admits, and a publish goes through.
    with connect(gateway.port, additional_headers=cookie("pad-200")) as ws:
        assert subscribe(ws, topic=topic)["type"] == "subscribed"
        send_json(ws, {"type": "publish", "topic": topic, "data": {"text": "after"}, "ref": "after"})
        frames = [recv_json(ws), recv_json(ws)]
        assert {f["type"] for f in frames} == {"published", "message"}, frames
    assert api(gateway.port, "GET", "/healthz").status == 200


def test_a_tokens_publish_over_http_goes_through_the_publish_hook(start_server, backend):
    """A client's publish over HTTP, by its token's `publish` grant, is asked about as one over its
    WebSocket is; the backend's own, with the API key, is not. Before, the same token published over
    HTTP what the hook refused over WebSocket."""
    from conftest import http_client_request
    from test_trust import SECRET, make_token
    server = start_server("--api-key", API_KEY, "--token-secret", SECRET, *backend.hook_args("publish"))
    topic = unique("chat")
    token = make_token({"sub": "erin", "exp": time.time() + 300, "topics": [topic], "publish": [topic]})

    def post(data, credential: str, key: str | None = None):
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {credential}"}
        if key:
            headers["Idempotency-Key"] = key
        return http_client_request(server.port, "POST", f"/api/topics/{topic}/messages", body=json.dumps(data).encode(),
                                   headers=headers)

    refused = post({"text": "forbidden"}, token)
    assert refused.status == 403, refused
    assert json.loads(refused.body) == {"error": "forbidden", "detail": "that word is not allowed"}
    assert json_ok(post({"text": "rewrite"}, token, key="k-1"), 201) == {"topic": topic, "seq": 1}
    # A retry under its key is answered from the first attempt: the hook is not asked again.
    asked = backend.stats()["calls"]["publish"]
    retried = post({"text": "rewrite"}, token, key="k-1")
    assert json_ok(retried, 201) == {"topic": topic, "seq": 1} and retried.header("Idempotent-Replayed") == "true"
    assert backend.stats()["calls"]["publish"] == asked
    assert json_ok(post({"text": "forbidden"}, API_KEY), 201) == {"topic": topic, "seq": 2}
    read = http_client_request(server.port, "GET", f"/api/topics/{topic}/messages?after=0",
                               headers={"Authorization": f"Bearer {API_KEY}"})
    assert [m["data"] for m in json_ok(read)["messages"]] == [
        {"text": "rewritten by the backend", "by": "erin"}, {"text": "forbidden"}]


def test_on_a_gateway_that_requires_tokens_a_connection_without_one_is_not_put_to_the_hooks(start_server, backend):
    """A WebSocket that sent no token has no identity: its publish and commit are refused
    `unauthorized`, as its subscribe is, without asking the publish or write hook. Before, the
    hooks were asked with `"user": null`, and a backend that judged only the content let an
    anonymous client publish where it could not even subscribe."""
    from test_trust import SECRET
    server = start_server("--api-key", API_KEY, "--token-secret", SECRET, *backend.hook_args("publish", "write"))
    store = keyed(server.port, "POST", "/api/stores", {"name": unique("hooked")})["name"]
    asked = backend.stats()["calls"]
    with connect(server.port) as ws:
        send_json(ws, {"type": "publish", "topic": unique("chat"), "data": {"text": "hi"}, "ref": "p1"})
        answer = recv_json(ws)
        assert (answer["type"], answer["code"], answer.get("ref")) == ("error", "unauthorized", "p1"), answer
        send_json(ws, {"type": "commit", "store": store, "ref": "c1",
                       "changes": [{"op": "put", "model": "m", "value": {"n": 1}}]})
        answer = recv_json(ws)
        assert (answer["type"], answer["code"], answer.get("ref")) == ("error", "unauthorized", "c1"), answer
    calls = backend.stats()["calls"]
    assert (calls.get("publish", 0), calls.get("write", 0)) == (asked.get("publish", 0), asked.get("write", 0))
