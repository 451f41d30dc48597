"""The backend's hooks when something about them goes wrong (docs/HOOKS.md): an https hook that
never completes its handshake stalls no one, a subscribe hook with no way to know who asks refuses
to start the gateway, a connection with no identity is refused before the subscribe hook is asked,
a short sliding session is refreshed halfway rather than at every sweep, a client's close answer
behind a data frame ends the connection at once, a header sent on several lines reaches the
connect hook whole, and one client's RPCs cannot take every hook call from the others."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
import pytest
from websockets.exceptions import ConnectionClosed as WebSocketClosed

from conftest import HOST, LISTENING_LINE, api, http_client_request, http_request, json_ok, server_binary, wait_for
from hooks import API_KEY, Backend, elapsed
from wsclient import (OP_CLOSE, OP_TEXT, RawWebSocket, close_payload, connect, encode_frame, recv_json, send_json,
                      subscribe, unique)

SECRET = "hooks-faults-secret-of-at-least-32-bytes"


def token(**claims) -> str:
    return jwt.encode({"sub": "tester", "exp": int(time.time()) + 300, **claims}, SECRET, algorithm="HS256")


def keyed(port: int, method: str, path: str, payload) -> dict:
    resp = http_client_request(port, method, path, body=json.dumps(payload).encode(),
                               headers={"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"})
    return json_ok(resp, 201 if path == "/api/stores" or path.endswith("/messages") or method == "PUT" else 200)


@pytest.fixture
def backend(tmp_path):
    process = Backend(tmp_path / "backend")
    yield process
    process.stop()


class HookServer:
    """A backend on a thread of this process: `answer(path, body)` gives the (status, JSON) to send.
    Every call is kept in `calls` as (path, body)."""

    def __init__(self, answer):
        calls = self.calls = []

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"null")
                calls.append((self.path, body))
                status, value = answer(self.path, body)
                data = json.dumps(value).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except OSError:
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def count(self, path: str) -> int:
        return sum(1 for called, _ in list(self.calls) if called == path)

    def __enter__(self) -> "HookServer":
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


class SilentListener:
    """A TCP listener that accepts every connection and never sends a byte: a TLS handshake with
    it hangs until the client gives up."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1024)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, socket.timeout):
                continue
            except OSError:
                return
            self.held.append(conn)

    def __enter__(self) -> "SilentListener":
        return self

    def __exit__(self, *exc) -> None:
        self.stopped.set()
        self.thread.join(5)
        self.sock.close()
        for conn in self.held:
            conn.close()


# ---- https: nothing done on the event loop per connection -------------------------

HTTPS_TIMEOUT = 1.5  # --hook-timeout of the https test's gateway
RPCS, CLIENTS = 200, 20  # 10 RPCs a client: all under way at once (a connection may have 16)


def test_rpcs_to_an_https_hook_that_never_handshakes_stall_nothing_else(start_server):
    """200 RPCs at once (20 clients, 10 each) to an https RPC hook whose server accepts and never
    answers the TLS handshake: `/healthz`, polled all along, stays fast, and every RPC is answered
    `unavailable` at its `--hook-timeout`. Before, every new TLS connection loaded the CA bundle on
    the event loop: the gateway stopped answering anyone for over a second (worst `/healthz` about
    1.6 s here) and the calls ended well past their time-out."""
    with SilentListener() as listener:
        gateway = start_server("--token-secret", SECRET, "--hook-rpc", f"https://127.0.0.1:{listener.port}/rpc",
                               "--hook-timeout", str(HTTPS_TIMEOUT), "--client-message-rate", "0")
        latencies: list[float] = []
        probing = threading.Event()
        probing.set()

        def probe() -> None:
            while probing.is_set():
                start = time.monotonic()
                ok = api(gateway.port, "GET", "/healthz", timeout=10).status == 200
                latencies.append(elapsed(start) if ok else float("inf"))
                time.sleep(0.01)

        prober = threading.Thread(target=probe, daemon=True)
        prober.start()
        clients = [connect(gateway.port, path=f"/ws?token={token()}") for _ in range(CLIENTS)]
        try:
            wait_for(lambda: len(latencies) >= 5, 5.0, "/healthz was not answered before the RPCs")
            per_client = RPCS // CLIENTS
            start = time.monotonic()
            for ws in clients:
                for i in range(per_client):
                    send_json(ws, {"type": "rpc", "id": f"r{i}", "method": "anything"})
            answers = [recv_json(ws, timeout=20) for ws in clients for _ in range(per_client)]
            took = elapsed(start)
            time.sleep(0.2)  # /healthz once more after the last answer
        finally:
            probing.clear()
            prober.join(15)
            for ws in clients:
                ws.close()
    worst = max(latencies)
    assert worst < 0.5, f"/healthz took up to {worst * 1000:.0f} ms while the RPCs' TLS handshakes were pending"
    odd = [a for a in answers if (a["type"], a.get("code")) != ("rpc_error", "unavailable")]
    assert len(answers) == RPCS and not odd, odd[:3]
    assert took < HTTPS_TIMEOUT + 1.0, f"the {RPCS} RPCs were answered {took:.2f} s after they were sent"


# ---- subscribe: only for a connection with an identity ---------------------------

def test_a_subscribe_hook_with_no_way_to_know_who_asks_refuses_to_start(tmp_path, start_server):
    """`--hook-subscribe` with neither `--token-secret` nor `--hook-connect`: the gateway exits at
    once, non-zero, and says what is missing; with a token secret it starts. Before, it started,
    and every WebSocket and SSE subscription was admitted without asking the hook."""
    public = tmp_path / "public"
    public.mkdir()
    stdout, stderr = tmp_path / "stdout.log", tmp_path / "stderr.log"
    argv = [str(server_binary()), "serve", "--host", HOST, "--port", "0", "--public", str(public),
            "--hook-subscribe", "http://127.0.0.1:9/subscribe"]
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        proc = subprocess.Popen(argv, cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
    try:
        wait_for(lambda: proc.poll() is not None or LISTENING_LINE.search(stdout.read_text(errors="replace")),
                 10.0, "the gateway neither exited nor announced itself")
        assert proc.poll() is not None, f"the gateway started: {stdout.read_text(errors='replace').strip()!r}"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=5)
    message = stderr.read_text(errors="replace")
    assert proc.returncode != 0, (proc.returncode, message)
    assert "--hook-subscribe" in message and "--token-secret or --hook-connect" in message, message
    # Given a way to know who asks, the same command starts.
    gateway = start_server("--token-secret", SECRET, "--hook-subscribe", "http://127.0.0.1:9/subscribe")
    assert api(gateway.port, "GET", "/healthz").status == 200


def test_a_websocket_without_a_token_is_refused_before_the_subscribe_hook_is_asked(start_server, backend):
    """With `--token-secret` and `--hook-subscribe`, a WebSocket that sent no token and subscribes
    to a store gets `unauthorized`, and the hook is not called; a token that does not cover the
    store is still decided by the hook. Before, the hook was asked about `"user": null`, and its
    allow let the anonymous client read the store."""
    gateway = start_server("--api-key", API_KEY, "--token-secret", SECRET, *backend.hook_args("subscribe"))
    store = unique("narrow-board")
    keyed(gateway.port, "POST", "/api/stores", {"name": store})
    keyed(gateway.port, "PUT", f"/api/stores/{store}/models/a", {"color": "red", "secret": 1})
    with connect(gateway.port) as anonymous:
        refused = subscribe(anonymous, store=store)
    assert refused["type"] == "error" and refused["code"] == "unauthorized", f"a client with no token got {refused}"
    assert backend.stats()["calls"].get("subscribe", 0) == 0, backend.stats()["last"].get("subscribe")
    # A connection with a token the store's grant does not cover: the hook decides (narrows).
    with connect(gateway.port, path=f"/ws?token={token(stores=['other'])}") as identified:
        snapshot = subscribe(identified, store=store)
    assert snapshot["type"] == "snapshot" and snapshot["models"] == {"a": {"color": "red"}}, snapshot
    assert backend.stats()["calls"].get("subscribe") == 1


# ---- refresh: a short sliding session ----------------------------------------------

SLIDE = 3.0     # seconds each grant and each extension lasts
WATCH = 6.0     # seconds the connection is watched


def test_a_short_sliding_session_is_refreshed_halfway_not_at_every_sweep(start_server):
    """The connect hook's grant and every refresh last 3 s: over 6 s the refresh hook is asked a
    few times (halfway to each end, every 1.5 s), and the connection stays open and served
    throughout. Before, each sweep found the grant within its 5 s lead and asked again: 25 or more
    calls in 5 s for one connection, for as long as it lived."""
    def answer(path: str, body) -> tuple[int, dict]:
        if path == "/connect":
            return 200, {"user": "ann", "topics": ["*"], "expiresAt": time.time() + SLIDE}
        return 200, {"expiresAt": time.time() + SLIDE}

    with HookServer(answer) as hooks:
        gateway = start_server("--api-key", API_KEY, "--hook-connect", hooks.url("/connect"),
                               "--hook-refresh", hooks.url("/refresh"))
        topic = unique("slide")
        with connect(gateway.port) as ws:
            assert subscribe(ws, topic=topic)["type"] == "subscribed"
            start = time.monotonic()
            unexpected = []
            while (left := WATCH - elapsed(start)) > 0:
                try:
                    unexpected.append(ws.recv(timeout=left))
                except TimeoutError:
                    break
                except WebSocketClosed as closed:
                    raise AssertionError(f"closed {elapsed(start):.1f} s in: {closed.rcvd}; "
                                         f"{hooks.count('/refresh')} refresh calls; frames {unexpected}") from None
            refreshes = hooks.count("/refresh")
            assert not unexpected, unexpected
            # Still served, past two of its original ends.
            keyed(gateway.port, "POST", f"/api/topics/{topic}/messages", {"n": 1})
            message = recv_json(ws)
            assert message["type"] == "message" and message["data"] == {"n": 1}, message
    assert 2 <= refreshes <= 8, f"{refreshes} refresh calls in {WATCH:.0f} s for one connection"
    assert all(body["user"] == "ann" for path, body in hooks.calls if path == "/refresh"), hooks.calls


# ---- WebSocket close handshake ---------------------------------------------------

def test_a_close_answer_behind_a_data_frame_ends_the_connection_at_once(start_server):
    """The connect hook fails (500), so the gateway sends its close frame (1013); the client answers
    with a text frame and its close frame in one write. The server closes the TCP connection at
    once. Before, the close answer behind the data frame went unnoticed, and the connection
    lingered until the close time-out, about 2 s."""
    with HookServer(lambda path, body: (500, {"reason": "down"})) as hooks:
        gateway = start_server("--api-key", API_KEY, "--hook-connect", hooks.url("/connect"))
        with RawWebSocket(gateway.port) as ws:
            ws.open()
            close = None
            while close is None:
                opcode, payload = ws.read_message()
                if opcode == OP_CLOSE:
                    close = payload
            assert close[:2] == close_payload(1013), close
            burst = encode_frame(OP_TEXT, json.dumps({"type": "subscribe", "topic": "chat"}).encode())
            burst += encode_frame(OP_CLOSE, close_payload(1013))
            start = time.monotonic()
            ws.send(burst)  # one write: the server reads both frames at once
            ws.expect_eof(timeout=5.0)
            took = elapsed(start)
    assert took < 0.5, f"the server closed the TCP connection {took:.2f} s after the client's close answer"


# ---- headers sent on several lines ---------------------------------------------------

REPEATED = [("Cookie", "theme=dark"), ("Cookie", "session=alice"),
            ("X-Forwarded-For", "203.0.113.7"), ("X-Forwarded-For", "10.0.0.2")]


@pytest.mark.parametrize("transport", ["websocket", "sse"])
def test_a_header_sent_on_several_lines_reaches_the_connect_hook_whole(start_server, backend, transport):
    """Two `Cookie` lines reach the connect hook as one value joined by "; ", and two lines of a
    forwarded header (`X-Forwarded-For`) as one joined by ", "; the session in the second cookie
    line admits the connection. Before, only each header's first line reached the hook."""
    gateway = start_server("--api-key", API_KEY, "--hook-forward-header", "X-Forwarded-For",
                           *backend.hook_args("connect"))
    if transport == "websocket":
        with RawWebSocket(gateway.port) as ws:
            ws.open(extra=REPEATED)
            wait_for(lambda: backend.stats()["calls"].get("connect"), 5.0, "the connect hook was not called")
            call = backend.stats()["last"]["connect"]
            assert call["headers"] == {"cookie": "theme=dark; session=alice",
                                       "x-forwarded-for": "203.0.113.7, 10.0.0.2"}, call
            ws.send_json({"type": "subscribe", "topic": "chat"})
            admitted = ws.recv_json()
            assert admitted["type"] == "subscribed", admitted
    else:
        with socket.create_connection((HOST, gateway.port), timeout=5) as sock:
            sock.sendall(http_request("GET", "/api/topics/chat/events", [("Accept", "text/event-stream"), *REPEATED]))
            received = b""
            while b"\r\n\r\n" not in received:
                chunk = sock.recv(4096)
                assert chunk, received
                received += chunk
        call = backend.stats()["last"]["connect"]
        assert call["headers"] == {"cookie": "theme=dark; session=alice",
                                   "x-forwarded-for": "203.0.113.7, 10.0.0.2"}, call
        assert received.startswith(b"HTTP/1.1 200 OK\r\n"), received[:200]


def test_one_clients_rpcs_leave_room_for_other_clients_hook_calls(start_server, backend):
    """A client sends 32 RPCs that each take the backend 3 s, on a gateway that makes 20 hook calls
    at once: it has 16 under way and the rest wait, so another client's connect is answered at once
    instead of behind them (it waited 3 s when one client could take all 20). Every RPC is still
    answered, once, in two rounds of the backend's time."""
    rpcs, seconds = 32, 3.0
    gateway = start_server("--api-key", API_KEY, "--hook-max-inflight", "20", "--hook-timeout", "10",
                           *backend.hook_args("connect", "rpc"))
    with connect(gateway.port, additional_headers={"Cookie": "session=alice"}) as busy:
        started = time.monotonic()
        for index in range(rpcs):
            send_json(busy, {"type": "rpc", "id": f"r{index}", "method": "sleep", "data": seconds})
        # The backend has this client's first 16 under way, and no more.
        wait_for(lambda: backend.stats()["inFlight"] == 16, 5.0, "16 RPCs under way")
        before = time.monotonic()
        with connect(gateway.port, additional_headers={"Cookie": "session=bob"}) as other:
            send_json(other, {"type": "subscribe", "topic": "chat"})
            assert recv_json(other, timeout=5)["type"] == "subscribed"
        admitted = time.monotonic() - before
        assert admitted < 1.5, f"another client's connect waited {admitted:.2f} s behind one client's RPCs"
        assert backend.stats()["peak"] <= 17, backend.stats()
        answers = [recv_json(busy, timeout=2 * seconds + 5) for _ in range(rpcs)]
        took = time.monotonic() - started
    assert sorted(answer["id"] for answer in answers) == sorted(f"r{index}" for index in range(rpcs))
    assert all(answer == {"type": "rpc_result", "id": answer["id"], "data": {"slept": seconds}} for answer in answers), answers
    assert 2 * seconds <= took < 2 * seconds + 5, took


def test_a_hook_that_stops_answering_is_warned_of_once_not_for_every_call(start_server, tmp_path):
    """Before, a backend down was logged at debug level only: at the default level nothing said
    why every client was answered unavailable. Now its first failure is a warning, and the
    failures after it (one per client) are not."""
    backend = Backend(tmp_path / "backend")
    gateway = start_server(*backend.hook_args("connect"))
    backend.stop()
    for _ in range(3):
        resp = http_client_request(gateway.port, "GET", "/api/topics/t/events", headers={"Cookie": "session=ann"})
        assert resp.status == 503, resp.body
    log = gateway.stderr_text()
    assert log.count("hook calls fail") == 1 and "hook=connect" in log, log


def test_one_clients_rpcs_over_many_connections_leave_room_for_others_to_connect(start_server, backend):
    """RPCs take at most three quarters of the hook queue, and the connect hook's calls wait
    ahead of them: one user opening connections and sending RPCs to a slow backend cannot shut
    every other user out. Before, the queue filled and the next browser was closed with 1013."""
    from hooks import cookie
    server = start_server("--hook-max-inflight", "4", "--hook-max-queued", "8", "--hook-timeout", "5",
                          "--client-message-rate", "0", *backend.hook_args("connect", "rpc"))
    heavy = [connect(server.port, additional_headers=cookie("alice")) for _ in range(2)]
    try:
        for ws in heavy:
            for n in range(8):
                send_json(ws, {"type": "rpc", "id": f"r{n}", "method": "sleep", "data": 1.5})
        wait_for(lambda: backend.stats()["inFlight"] >= 4, 5, "the RPCs never reached the backend")
        # The queue holds what RPCs may take; the others were refused at once.
        with connect(server.port, additional_headers=cookie("bob")) as other:
            send_json(other, {"type": "ping", "ref": "p"})
            assert recv_json(other, timeout=5)["type"] == "pong"
    finally:
        for ws in heavy:
            ws.close()
