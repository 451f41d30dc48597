"""Trust (docs/SECURITY.md): API keys on mutating calls, loopback-only without a key, HS256
subscription tokens over WebSocket and SSE, the Origin allow-list and CORS, and the limits on
connections, subscriptions, publishes and client messages."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import socket
import subprocess
import time

import pytest
import websockets

from conftest import (
    HOST,
    REPO_ROOT,
    RawConnection,
    assert_json_error,
    http_client_request,
    http_request,
    json_ok,
    server_binary,
    wait_for,
)
from wsclient import connect, recv_json, send_json, subscribe, unique

SECRET = "a test secret that is long enough"
KEY = "key-one"
FILE_KEY = "key-from-file"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def make_token(claims: dict, secret: str = SECRET, alg: str = "HS256") -> str:
    """A JWT signed the way any backend would sign one, independent of the gateway's code."""
    header = b64url(json.dumps({"alg": alg, "typ": "JWT"}).encode())
    payload = b64url(json.dumps(claims).encode())
    signing_input = f"{header}.{payload}".encode()
    signature = hmac.new(secret.encode(), signing_input, hashlib.sha256).digest()
    return f"{header}.{payload}.{b64url(signature)}"


def token_for(seconds: float = 300, **scopes) -> str:
    return make_token({"sub": "test", "exp": int(time.time() + seconds), **scopes})


def request(port, method, path, payload=None, headers=None):
    headers = dict(headers or {})
    body = None
    if payload is not None:
        body = json.dumps(payload).encode()
        headers["Content-Type"] = "application/json"
    return http_client_request(port, method, path, headers=headers, body=body)


def bearer(key):
    return {"Authorization": f"Bearer {key}"}


# ---- API keys ------------------------------------------------------------

@pytest.fixture
def keyed(start_server, tmp_path):
    key_file = tmp_path / "keys"
    key_file.write_text(f"# one key a line\n\n{FILE_KEY}\n")
    return start_server("--api-key", KEY, "--api-key-file", str(key_file))


def test_every_mutating_call_needs_a_configured_key(keyed):
    store = unique("keyed")
    calls = [
        ("POST", "/api/stores", {"name": store}),
        ("PUT", f"/api/stores/{store}/models/m", {"color": "#112233"}),
        ("PATCH", f"/api/stores/{store}/models/m", {"color": "#445566"}),
        ("POST", "/api/topics/news/messages", {"n": 1}),
        ("POST", "/api/jobs", {"kind": "animate", "store": store, "rate": 1}),
        ("DELETE", f"/api/stores/{store}/models/m", None),
    ]
    for method, path, payload in calls:
        for headers in ({}, bearer("wrong"), {"Authorization": f"Basic {KEY}"}, bearer(KEY + "x")):
            resp = request(keyed.port, method, path, payload, headers)
            assert_json_error(resp, 401, "unauthorized")
            assert resp.header("WWW-Authenticate") == "Bearer", (method, path)
        ok = request(keyed.port, method, path, payload, bearer(KEY if method != "PATCH" else FILE_KEY))
        assert 200 <= ok.status < 300, (method, path, ok.status, ok.body)
    # Reads stay open.
    assert json_ok(request(keyed.port, "GET", f"/api/stores/{store}"))["store"] == store
    assert request(keyed.port, "GET", "/api/topics").status == 200


def launch_raw(args, env=None, timeout=15.0):
    """Starts the server with arguments the shared harness does not allow (another host)."""
    proc = subprocess.Popen([str(server_binary()), "serve", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            env=env)
    line = proc.stdout.readline().decode()
    return proc, line


def stop_raw(proc):
    proc.terminate()
    try:
        _, stderr = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, stderr = proc.communicate(timeout=5)
    return stderr.decode()


def test_without_a_key_it_listens_on_loopback_only_and_says_so():
    proc, line = launch_raw(["--host", "0.0.0.0"])
    stderr = stop_raw(proc)
    assert re.fullmatch(r"Receptionist listening on http://127\.0\.0\.1:\d+\n", line), (line, stderr)
    assert "listening on loopback only" in stderr and "--insecure-open" in stderr, stderr


@pytest.mark.parametrize("args", [["--insecure-open"], ["--api-key", KEY]], ids=["insecure-open", "api-key"])
def test_all_interfaces_with_a_key_or_when_told_insecure_open(args):
    proc, line = launch_raw(["--host", "0.0.0.0", *args])
    try:
        match = re.fullmatch(r"Receptionist listening on http://0\.0\.0\.0:(\d+)\n", line)
        assert match, line
        # Reachable on loopback, as on any interface.
        assert http_client_request(int(match.group(1)), "GET", "/healthz").status == 200
    finally:
        stderr = stop_raw(proc)
    if args == ["--insecure-open"]:
        assert "no API key configured" in stderr, stderr


# ---- Subscription tokens -------------------------------------------------

@pytest.fixture
def tokened(start_server):
    server = start_server("--token-secret", SECRET, "--ping-interval", "30")
    json_ok(request(server.port, "POST", "/api/stores", {"name": "tiles"}), 201)
    json_ok(request(server.port, "POST", "/api/stores", {"name": "secret"}), 201)
    return server


def test_subscriptions_need_a_token(tokened):
    with connect(tokened.port) as ws:
        error = subscribe(ws, store="tiles")
        assert error == {"type": "error", "code": "unauthorized", "message": error["message"]}, error
        # A bad token is an error message; the connection stays usable.
        send_json(ws, {"type": "auth", "token": token_for(stores=["*"])[:-3] + "AAA"})
        assert recv_json(ws)["code"] == "token_invalid"
        send_json(ws, {"type": "auth", "token": make_token({"exp": int(time.time()) + 60}, secret="other")})
        assert recv_json(ws)["code"] == "token_invalid"
        send_json(ws, {"type": "auth", "token": token_for(stores=["tiles"], topics=["news.*"])})
        authenticated = recv_json(ws)
        assert authenticated["type"] == "authenticated" and authenticated["expiresAt"] > time.time()
        assert subscribe(ws, store="tiles")["type"] == "snapshot"
        assert subscribe(ws, topic="news.sport")["type"] == "subscribed"
        for target in ({"store": "secret"}, {"topic": "news"}, {"topic": "weather"}):
            error = subscribe(ws, **target)
            assert (error["type"], error["code"]) == ("error", "forbidden"), (target, error)


def test_token_in_the_query_and_refused_at_the_upgrade(tokened):
    with connect(tokened.port, path=f"/ws?token={token_for(stores=['tiles'])}") as ws:
        assert subscribe(ws, store="tiles")["type"] == "snapshot"
    for bad in ["not-a-token", make_token({"exp": int(time.time()) - 5, "stores": ["*"]}),
                make_token({"exp": int(time.time()) + 60, "stores": ["*"]}, alg="none")]:
        with pytest.raises(websockets.exceptions.InvalidStatus) as refused:
            connect(tokened.port, path=f"/ws?token={bad}")
        assert refused.value.response.status_code == 401, bad
        body = json.loads(refused.value.response.body)
        assert body["error"] == "unauthorized" and body["detail"], body


def test_expired_token_closes_with_1008(tokened):
    with connect(tokened.port) as ws:
        send_json(ws, {"type": "auth", "token": make_token({"exp": int(time.time()) - 1, "stores": ["*"]})})
        assert recv_json(ws)["code"] == "token_expired"
        with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
            recv_json(ws)
        assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1008, "token expired")


def test_token_that_runs_out_mid_stream_closes_with_1008(tokened):
    expires = time.time() + 2
    token = make_token({"exp": expires, "stores": ["tiles"]})
    with connect(tokened.port, path=f"/ws?token={token}") as ws:
        assert subscribe(ws, store="tiles")["type"] == "snapshot"
        assert recv_json(ws, timeout=10)["code"] == "token_expired"
        with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
            recv_json(ws)
        assert closed.value.rcvd.code == 1008
        assert time.time() >= expires - 0.05, "closed before the token ran out"


def sse_head(port, path, headers=()):
    with RawConnection(port) as conn:
        conn.send(http_request("GET", path, headers=list(headers)))
        deadline = time.monotonic() + 5
        data = b""
        while b"\r\n\r\n" not in data and time.monotonic() < deadline:
            data += conn._recv(deadline)
        return data.split(b"\r\n", 1)[0].decode(), data


def test_sse_needs_a_covering_token(tokened):
    status, _ = sse_head(tokened.port, "/api/stores/tiles/events")
    assert " 401 " in status, status
    status, _ = sse_head(tokened.port, f"/api/stores/secret/events?token={token_for(stores=['tiles'])}")
    assert " 403 " in status, status
    status, data = sse_head(tokened.port, f"/api/stores/tiles/events?token={token_for(stores=['tiles'])}")
    assert " 200 " in status and b"text/event-stream" in data, data
    status, _ = sse_head(tokened.port, "/api/topics/t/events", [("Authorization", f"Bearer {token_for(topics=['t'])}")])
    assert " 200 " in status, status


# ---- Origins and CORS ------------------------------------------------------

def upgrade_status(port, origin=None, host=None):
    headers = [("Host", host or f"{HOST}:{port}"), ("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Version", "13"),
               ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="), ("Sec-WebSocket-Protocol", "receptionist.v1")]
    if origin:
        headers.append(("Origin", origin))
    with RawConnection(port) as conn:
        conn.send(http_request("GET", "/ws", headers=headers))
        data = b""
        deadline = time.monotonic() + 5
        while b"\r\n\r\n" not in data and time.monotonic() < deadline:
            data += conn._recv(deadline)
        return int(data.split(b" ", 2)[1]), data


def test_websocket_upgrades_are_same_origin_by_default(start_server):
    server = start_server()
    own = f"http://{HOST}:{server.port}"
    assert upgrade_status(server.port)[0] == 101, "no Origin: not a browser"
    assert upgrade_status(server.port, own)[0] == 101
    status, data = upgrade_status(server.port, "http://evil.example")
    assert status == 403 and b'"error":"forbidden"' in data, data
    assert upgrade_status(server.port, f"http://{HOST}:{server.port + 1}")[0] == 403


def test_on_loopback_a_page_that_points_its_name_at_the_gateway_is_not_its_own_origin(start_server):
    """DNS rebinding: a page of evil.example points its name at 127.0.0.1, and its requests carry
    `Host: evil.example:P` and `Origin: http://evil.example:P`, which agree. Before, that passed for
    the gateway's own origin, and any site could publish, write and read through a visitor's browser."""
    server = start_server()
    port, rebound = server.port, f"evil.example:{server.port}"
    status, data = upgrade_status(port, f"http://{rebound}", host=rebound)
    assert status == 403 and b'"error":"forbidden"' in data, data
    refused = request(port, "POST", "/api/topics/news/messages", {"n": 1}, headers={"Host": rebound, "Origin": f"http://{rebound}"})
    assert_json_error(refused, 403, "forbidden")
    assert_json_error(request(port, "GET", "/api/topics", headers={"Host": rebound, "Origin": f"http://{rebound}"}), 403, "forbidden")
    # A page's reads of its own origin carry no Origin (fetch GET, EventSource): the Host tells.
    assert_json_error(request(port, "GET", "/api/topics", headers={"Host": rebound}), 403, "forbidden")
    assert_json_error(request(port, "GET", "/api/topics/news/events", headers={"Host": rebound}), 403, "forbidden")
    for own in (f"{HOST}:{port}", f"localhost:{port}"):
        assert upgrade_status(port, f"http://{own}", host=own)[0] == 101, own
        published = request(port, "POST", "/api/topics/news/messages", {"n": 2}, headers={"Host": own, "Origin": f"http://{own}"})
        assert published.status == 201, (own, published.body)


def test_allowed_origins_for_websockets_and_cors(start_server):
    app = "https://app.example"
    server = start_server("--allowed-origin", app, public=REPO_ROOT / "Public")
    assert upgrade_status(server.port, app)[0] == 101
    assert upgrade_status(server.port, "https://evil.example")[0] == 403
    resp = request(server.port, "GET", "/api/topics", headers={"Origin": app})
    assert resp.status == 200
    assert resp.header("Access-Control-Allow-Origin") == app and resp.header("Vary") == "Origin"
    preflight = request(server.port, "OPTIONS", "/api/topics/news/messages",
                        headers={"Origin": app, "Access-Control-Request-Method": "POST",
                                 "Access-Control-Request-Headers": "authorization, content-type"})
    assert preflight.status == 204 and preflight.header("Content-Length") is None, preflight.headers
    assert "POST" in preflight.header("Access-Control-Allow-Methods")
    allowed = [h.strip() for h in preflight.header("Access-Control-Allow-Headers").split(",")]
    # Every request header the API reads, the client library's Idempotency-Key included.
    for header in ("Authorization", "Content-Type", "Last-Event-ID", "Idempotency-Key", "If-Match", "If-None-Match"):
        assert header in allowed, (header, allowed)
    published = request(server.port, "POST", "/api/topics/news/messages", {"n": 1}, headers={"Origin": app})
    assert published.status == 201 and published.header("Access-Control-Allow-Origin") == app
    exposed = [h.strip() for h in published.header("Access-Control-Expose-Headers").split(",")]
    assert {"ETag", "Idempotent-Replayed", "Retry-After"} <= set(exposed), exposed
    refused = request(server.port, "POST", "/api/topics/news/messages", {"n": 2}, headers={"Origin": "https://evil.example"})
    assert_json_error(refused, 403, "forbidden")
    assert refused.header("Access-Control-Allow-Origin") is None
    # A page on an allowed origin may import the client library (a module script is fetched
    # with CORS); one on another origin is served the file without the header, so its browser
    # refuses to run it.
    library = request(server.port, "GET", "/receptionist-client.js", headers={"Origin": app})
    assert library.status == 200 and library.header("Access-Control-Allow-Origin") == app
    assert library.header("Vary") == "Origin"
    other = request(server.port, "GET", "/receptionist-client.js", headers={"Origin": "https://evil.example"})
    assert other.status == 200 and other.header("Access-Control-Allow-Origin") is None
    assert request(server.port, "GET", "/receptionist-client.js").header("Access-Control-Allow-Origin") is None
    # The modules it imports (Public/client/) are fetched the same way.
    part = request(server.port, "GET", "/client/receptionist-client.js", headers={"Origin": app})
    assert part.status == 200 and part.header("Access-Control-Allow-Origin") == app


# ---- Limits ------------------------------------------------------------------

def test_connections_per_address(start_server):
    server = start_server("--max-connections-per-address", "3")
    held = [RawConnection(server.port) for _ in range(3)]
    try:
        for conn in held:
            conn.send(http_request("GET", "/healthz"))
            assert conn.read_response().status == 200
        with RawConnection(server.port) as extra:
            extra.send(http_request("GET", "/healthz"))
            resp = extra.read_response()
            assert_json_error(resp, 429, "too_many_requests")
            extra.expect_closed()
        # Another address is counted apart.
        other = socket.create_connection((HOST, server.port), timeout=5, source_address=("127.0.0.2", 0))
        try:
            other.sendall(http_request("GET", "/healthz"))
            assert b" 200 " in other.recv(4096).split(b"\r\n", 1)[0]
        finally:
            other.close()
        held.pop().close()

        def served_again():
            with RawConnection(server.port) as probe:
                probe.send(http_request("GET", "/healthz"))
                return probe.read_response().status == 200
        wait_for(served_again, 5.0, "a freed per-address slot was never reused")
    finally:
        for conn in held:
            conn.close()


def test_subscriptions_per_connection(start_server):
    server = start_server("--max-subscriptions", "2")
    with connect(server.port) as ws:
        assert subscribe(ws, topic="a")["type"] == "subscribed"
        assert subscribe(ws, topic="b")["type"] == "subscribed"
        error = subscribe(ws, topic="c")
        assert (error["type"], error["code"]) == ("error", "too_many_subscriptions"), error
        send_json(ws, {"type": "unsubscribe", "topic": "a"})
        assert recv_json(ws)["type"] == "unsubscribed"
        assert subscribe(ws, topic="c")["type"] == "subscribed"


def test_publish_rate_per_key(start_server):
    server = start_server("--publish-rate", "1", "--publish-burst", "3", "--api-key", KEY, "--api-key", "key-two")
    for _ in range(3):
        assert request(server.port, "POST", "/api/topics/t/messages", {}, bearer(KEY)).status == 201
    limited = request(server.port, "POST", "/api/topics/t/messages", {}, bearer(KEY))
    assert_json_error(limited, 429, "too_many_requests")
    assert int(limited.header("Retry-After")) >= 1
    # Each key has its own bucket.
    assert request(server.port, "POST", "/api/topics/t/messages", {}, bearer("key-two")).status == 201


def test_client_message_rate(start_server):
    server = start_server("--client-message-rate", "0.5", "--client-message-burst", "3")
    with connect(server.port) as ws:
        for name in ("a", "b", "c"):
            assert subscribe(ws, topic=name)["type"] == "subscribed"
        error = subscribe(ws, topic="d")
        assert (error["type"], error["code"]) == ("error", "rate_limited"), error
        # The dropped message had no effect, and the connection stays open.
        send_json(ws, {"type": "unsubscribe", "topic": "d"})
        assert recv_json(ws)["code"] == "rate_limited"
        # A dropped commit or RPC is named, so a client waiting on it is told which one.
        send_json(ws, {"type": "commit", "store": "s", "changes": [{"op": "delete", "model": "m"}], "ref": "c7"})
        assert recv_json(ws) == {"type": "error", "code": "rate_limited", "message": "too many messages; this one was dropped",
                                 "ref": "c7"}
        send_json(ws, {"type": "rpc", "id": "r9", "method": "m"})
        answer = recv_json(ws)
        assert (answer["type"], answer["id"], answer["code"]) == ("rpc_error", "r9", "rate_limited"), answer


def test_tokens_in_urls_stay_out_of_the_logs(start_server):
    import signal

    server = start_server("--token-secret", SECRET, "--log-level", "debug")
    # Refused requests, and streams that start, are logged with their target, the token hidden.
    token = token_for(topics=["other"])
    status, _ = sse_head(server.port, f"/api/topics/t/events?since=0&token={token}")
    assert " 403 " in status
    with pytest.raises(websockets.exceptions.InvalidStatus):
        connect(server.port, path=f"/ws?token={token}x")
    accepted = token_for(topics=["t"])
    status, _ = sse_head(server.port, f"/api/topics/t/events?since=0&token={accepted}")
    assert " 200 " in status
    with connect(server.port, path=f"/ws?token={accepted}"):
        pass
    server.send_signal(signal.SIGTERM)
    assert server.wait_exit(15) == 0
    log = server.stderr_text()
    assert "GET /api/topics/t/events?since=0&token=… 200" in log, log
    assert "GET /ws?token=… 101" in log, log
    for secret in (token, accepted):
        assert secret not in log and secret.split(".")[2] not in log, "a token reached the log"
