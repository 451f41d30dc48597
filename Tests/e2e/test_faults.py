"""Faults, against the real binary: a slowloris head, a half-open WebSocket, resets in the middle
of large writes, running out of descriptors, connection churn, and thousands of malformed
requests and frames. Each test also checks that everyone else is served meanwhile."""

from __future__ import annotations

import json
import random
import resource
import socket
import struct
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import (
    HOST,
    RawConnection,
    assert_json_error,
    http_client_request,
    http_request,
    parse_head,
    wait_for,
)
from procstat import (
    connect_from,
    cpu_share,
    error_lines,
    fd_count,
    reset_close,
    rss_bytes,
    source_addresses,
    steady_fd_count,
    wait_fd_count,
)
from wsclient import (
    EPOCH,
    OP_BINARY,
    OP_CLOSE,
    OP_CONT,
    OP_PING,
    OP_PONG,
    OP_TEXT,
    RawWebSocket,
    close_payload,
    connect,
    encode_frame,
    new_store,
    publish,
    put_model,
    recv_json,
    subscribe,
    unique,
    upgrade_request,
)

PROMPT = 1.0              # seconds a normal request may take while another client misbehaves
SWEEP_SLACK = 2.0         # beyond a timeout, the sweep and a loaded machine may take this long to act


def assert_served(port: int, timeout: float = PROMPT) -> float:
    """A fresh connection is answered within `timeout`; returns how long it took."""
    started = time.monotonic()
    resp = http_client_request(port, "GET", "/healthz", timeout=timeout + 2)
    elapsed = time.monotonic() - started
    assert resp.status == 200 and resp.json() == {"status": "ok"}, resp
    assert elapsed < timeout, f"a normal request took {elapsed:.2f}s"
    return elapsed


def assert_no_error_lines(server) -> None:
    errors = error_lines(server.stderr_text())
    assert not errors, "error-level log lines:\n" + "\n".join(errors[:20])


# ---- Slowloris ---------------------------------------------------------

def test_slowloris_is_cut_off_at_the_head_timeout_while_others_are_served(start_server):
    head_timeout = 1.0
    server = start_server("--head-timeout", "1", "--idle-timeout", "30")
    trickle = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"s" * 1000
    served = []
    with RawConnection(server.port) as slow:
        started = time.monotonic()
        for byte in trickle:
            try:
                slow.send(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                break
            # Between bytes, others are served promptly; this also paces the trickle.
            served.append(assert_served(server.port))
            if slow.readable(0.05):
                break
            assert time.monotonic() - started < head_timeout + SWEEP_SLACK, "the trickled head was never cut off"
        resp = slow.read_response()
        cut_after = time.monotonic() - started
        assert_json_error(resp, 408, "request_timeout")
        assert resp.connection() == "close"
        slow.expect_closed()
    assert head_timeout * 0.9 <= cut_after <= head_timeout + SWEEP_SLACK, cut_after
    assert len(served) >= 3, f"only {len(served)} requests were served during the trickle"
    assert_served(server.port)


# ---- Half-open WebSocket -----------------------------------------------

def test_half_open_websocket_is_reaped_after_ping_interval_and_timeout(start_server):
    interval, timeout = 0.5, 0.5
    server = start_server("--ping-interval", str(interval), "--ping-timeout", str(timeout))
    pid = server.proc.pid
    baseline = steady_fd_count(pid)
    with connect(server.port) as answering:  # the websockets client answers pings by itself
        topic = unique("alive")
        assert subscribe(answering, topic=topic)["type"] == "subscribed"
        wait_fd_count(pid, lambda n: n == baseline + 1, 5, "the answering client's socket")

        # Completes the upgrade, then never reads or writes again: a peer that vanished.
        silent = socket.create_connection((HOST, server.port), timeout=5)
        silent.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        silent.sendall(upgrade_request())
        head = b""
        while b"\r\n\r\n" not in head:
            head += silent.recv(1)  # byte by byte: nothing after the head is consumed
        upgraded = time.monotonic()
        assert parse_head(head[:-4])[0] == 101, head
        wait_fd_count(pid, lambda n: n == baseline + 2, 5, "the silent client's socket")

        # Its server-side socket goes after one interval of silence, a ping, and the timeout.
        wait_fd_count(pid, lambda n: n == baseline + 1, interval + timeout + SWEEP_SLACK + 3,
                      "the half-open client's socket")
        reaped_after = time.monotonic() - upgraded
        assert interval + timeout - 0.1 <= reaped_after <= interval + timeout + SWEEP_SLACK, reaped_after

        # The client finds pings and then the end of the stream, with no closing handshake.
        received = b""
        deadline = time.monotonic() + 5
        try:
            while chunk := silent.recv(65536):
                received += chunk
                assert time.monotonic() < deadline, "the server never closed the half-open socket"
        except ConnectionResetError:
            pass
        finally:
            silent.close()
        opcodes = []
        while received:
            size = received[1] & 0x7F
            assert size < 126, received[:20]
            opcodes.append(received[0] & 0x0F)
            received = received[2 + size:]
        assert opcodes and set(opcodes) == {OP_PING}, opcodes

        # The client that answers is still served, and the process still holds exactly its socket.
        seq = publish(server.port, topic, {"after": "reap"})
        frame = recv_json(answering)
        assert (frame["type"], frame["seq"]) == ("message", seq), frame
    wait_fd_count(pid, lambda n: n == baseline, 5, "descriptors after every client left")


# ---- Reset in the middle of a large write ------------------------------

BIG_MODEL_BYTES = 400_000
BIG_MODELS = 6               # a 2.4 MB snapshot
BIG_MESSAGE_BYTES = 600_000
MESSAGES_PER_ROUND = 6       # 3.6 MB queued to each topic subscriber per round
ROUNDS = 5


def rude_subscriber(port: int, target: dict) -> socket.socket:
    """A raw WebSocket subscriber with a tiny receive window that has read only its first bytes."""
    ws = RawWebSocket(port, rcvbuf=4096)
    ws.open()
    ws.send_json({"type": "subscribe", **target})
    # The snapshot's first bytes, or the whole small `subscribed` frame: either way the
    # subscription is in place.
    assert ws.sock.recv(4096)
    return ws.sock


def test_reset_in_the_middle_of_large_writes_harms_no_one(start_server):
    # The outbound limit is high so that the rude clients are still queued to when they reset.
    server = start_server("--max-queued-bytes", str(64 << 20))
    pid = server.proc.pid
    store = new_store(server.port, prefix="big")
    for index in range(BIG_MODELS):
        put_model(server.port, store, f"m{index}", {"blob": "b" * BIG_MODEL_BYTES})
    topic = unique("big")
    baseline = steady_fd_count(pid)

    with connect(server.port, max_size=None) as good:
        snapshot = subscribe(good, store=store)
        assert snapshot["type"] == "snapshot" and len(snapshot["models"]) == BIG_MODELS
        version = snapshot["version"]
        assert subscribe(good, topic=topic) == {"type": "subscribed", "topic": topic, "seq": 0, "epoch": EPOCH, "resumed": False}
        seq = 0
        for round_index in range(ROUNDS):
            rude = [rude_subscriber(server.port, {"store": store}),
                    rude_subscriber(server.port, {"topic": topic}),
                    rude_subscriber(server.port, {"topic": topic})]
            for _ in range(MESSAGES_PER_ROUND):
                seq = publish(server.port, topic, {"round": round_index, "pad": "p" * BIG_MESSAGE_BYTES})
            version = put_model(server.port, store, "small", {"round": round_index})
            # Each rude client takes a little more of what is queued to it, then resets.
            for sock in rude:
                sock.recv(16384)
                reset_close(sock)
            for expected in range(seq - MESSAGES_PER_ROUND + 1, seq + 1):
                frame = recv_json(good, timeout=10)
                assert (frame["type"], frame["seq"], frame["data"]["round"]) == ("message", expected, round_index), \
                    {k: v for k, v in frame.items() if k != "data"}
            frame = recv_json(good, timeout=10)
            assert (frame["type"], frame["version"]) == ("changes", version), frame
            assert_served(server.port, timeout=2)
        # Nothing else arrived for the good subscriber: no frame was doubled.
        with pytest.raises(TimeoutError):
            good.recv(timeout=0.2)

    wait_fd_count(pid, lambda n: n == baseline, 5, "descriptors after the resets")
    assert server.proc.poll() is None, "the server exited"
    assert_served(server.port)
    assert_no_error_lines(server)


# ---- Out of descriptors ------------------------------------------------

FD_LIMIT = 160
SPIN_WINDOW = 2.0
MAX_CPU_AT_LIMIT = 0.2


def hog(port: int) -> socket.socket | None:
    """A keep-alive connection the server has answered once; None if the server shed it."""
    sock = socket.create_connection((HOST, port), timeout=5)
    try:
        sock.sendall(http_request("GET", "/healthz"))
        answer = sock.recv(4096)
    except (ConnectionResetError, BrokenPipeError):
        answer = b""
    if answer.startswith(b"HTTP/1.1 200"):
        return sock
    sock.close()
    return None


def test_running_out_of_descriptors_does_not_spin_and_serving_resumes(start_server):
    server = start_server("--idle-timeout", "60")
    pid = server.proc.pid
    # Lowering the limit of the running process is what `prlimit --pid` does: libuv's reserve
    # descriptor and the loop's own are already open below it.
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))
    assert steady_fd_count(pid) < FD_LIMIT - 20

    hogs, shed = [], 0
    try:
        while shed < 3:
            assert len(hogs) < FD_LIMIT, "the server kept accepting past its descriptor limit"
            sock = hog(server.port)
            if sock is None:
                shed += 1
            else:
                hogs.append(sock)
        assert fd_count(pid) >= FD_LIMIT - 2, fd_count(pid)

        # At the limit, with connections still arriving, the loop must wait rather than spin.
        probes = {"tried": 0, "served": 0}
        stop = threading.Event()

        def keep_knocking():
            while not stop.wait(0.05):
                probes["tried"] += 1
                sock = hog(server.port)
                if sock is not None:
                    probes["served"] += 1
                    sock.close()

        knocker = threading.Thread(target=keep_knocking, daemon=True)
        knocker.start()
        try:
            share = cpu_share(pid, SPIN_WINDOW)
        finally:
            stop.set()
            knocker.join(10)
        print(f"at the descriptor limit: {len(hogs)} hogs, {fd_count(pid)} descriptors, "
              f"{share:.1%} of a core over {SPIN_WINDOW}s, probes {probes}")
        assert share < MAX_CPU_AT_LIMIT, f"the server used {share:.0%} of a core while out of descriptors"
        assert probes["tried"] >= 10 and probes["served"] == 0, probes
        assert server.proc.poll() is None, "the server exited"

        # The hogs still hold working connections.
        hogs[0].sendall(http_request("GET", "/readyz"))
        assert hogs[0].recv(4096).startswith(b"HTTP/1.1 200")
    finally:
        for sock in hogs:
            sock.close()

    # With descriptors free again, new connections are served.
    wait_for(lambda: (sock := hog(server.port)) and sock.close() is None, 5,
             "serving never resumed after descriptors were freed")
    assert_served(server.port)


# ---- Connection churn --------------------------------------------------

CHURN = 10_000
WARM_UP = 2_000
CHURN_THREADS = 16
CHURN_SOURCES = 8
RSS_SLACK = 0.10


class SourcedConnection(RawConnection):
    """A RawConnection over a socket that is already connected."""

    def __init__(self, sock: socket.socket):
        self.sock, self.buffer = sock, b""


class SourcedWebSocket(RawWebSocket):
    """A RawWebSocket over a socket that is already connected."""

    def __init__(self, sock: socket.socket):
        self.sock, self.buffer = sock, b""


def churn_one(port: int, source: str, rng: random.Random, topic: str) -> str:
    """One connection that opens, does a little, and closes in one of several ways; returns which."""
    kind = rng.random()
    sock = connect_from(source, HOST, port, timeout=5)
    try:
        if kind < 0.6:  # plain requests on one keep-alive connection
            conn = SourcedConnection(sock)
            for _ in range(rng.randint(1, 3)):
                conn.send(http_request("GET", rng.choice(["/healthz", "/readyz", "/", "/missing"])))
                assert conn.read_response().status in (200, 404)
            return "http"
        elif kind < 0.7:  # closing with the server's answer
            conn = SourcedConnection(sock)
            conn.send(http_request("GET", "/healthz", {"Connection": "close"}))
            assert conn.read_response().status == 200
            conn.expect_closed()
            return "http-close"
        elif kind < 0.8:  # gone in the middle of a head, sometimes with a reset
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: ")
            if rng.random() < 0.5:
                reset_close(sock)
            return "abandoned-head"
        else:  # a WebSocket subscriber that leaves politely or not
            ws = SourcedWebSocket(sock)
            ws.open()
            ws.send_json({"type": "subscribe", "topic": topic})
            assert ws.recv_json()["type"] == "subscribed"
            if rng.random() < 0.5:
                ws.send_frame(OP_CLOSE, close_payload(1000))
                frame = ws.read_frame()
                assert frame.opcode == OP_CLOSE and frame.close_code() == 1000, frame
                ws.expect_eof()
            elif rng.random() < 0.5:
                reset_close(sock)
            return "websocket"
    finally:
        sock.close()


def churn(port: int, pid: int, total: int, seed: int, topic: str) -> tuple[Counter, int]:
    """Opens and closes `total` connections from several threads and source addresses.

    Returns how many of each kind were made, and the most descriptors the server held meanwhile.
    """
    sources = source_addresses(CHURN_SOURCES)
    done = threading.Event()
    peak = [fd_count(pid)]

    def worker(index: int) -> Counter:
        rng = random.Random(seed * 1000 + index)
        return Counter(churn_one(port, sources[index % len(sources)], rng, topic)
                       for _ in range(index, total, CHURN_THREADS))

    def sample() -> None:
        while not done.wait(0.02):
            peak[0] = max(peak[0], fd_count(pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    kinds = Counter()
    try:
        with ThreadPoolExecutor(CHURN_THREADS) as pool:
            for future in [pool.submit(worker, i) for i in range(CHURN_THREADS)]:
                kinds += future.result()
    finally:
        done.set()
        sampler.join(5)
    assert sum(kinds.values()) == total and len(kinds) == 4, kinds
    return kinds, peak[0]


@pytest.mark.timeout(180)
def test_ten_thousand_connections_leave_no_descriptors_or_memory_behind(start_server):
    server = start_server("--idle-timeout", "30")
    pid = server.proc.pid
    topic = unique("churn")
    publish(server.port, topic, {"warm": True})

    # The allocator keeps the arenas it grew on first use, so the baseline is taken after a
    # warm-up round of the same mix at the same concurrency; leaks show as growth beyond it.
    churn(server.port, pid, WARM_UP, seed=1, topic=topic)
    baseline_fds = steady_fd_count(pid)
    baseline_rss = rss_bytes(pid)

    started = time.monotonic()
    kinds, peak_fds = churn(server.port, pid, CHURN, seed=2, topic=topic)
    elapsed = time.monotonic() - started
    wait_fd_count(pid, lambda n: n <= baseline_fds, 10, f"descriptors (baseline {baseline_fds})")
    wait_for(lambda: rss_bytes(pid) <= baseline_rss * (1 + RSS_SLACK), 5,
             f"resident memory {rss_bytes(pid)} stayed over {baseline_rss} + {RSS_SLACK:.0%}")
    print(f"churn: {dict(kinds)} in {elapsed:.1f}s; fds baseline {baseline_fds} peak {peak_fds} after {fd_count(pid)}; "
          f"rss baseline {baseline_rss >> 10} KiB after {rss_bytes(pid) >> 10} KiB")
    assert_served(server.port)
    assert_no_error_lines(server)


# ---- Malformed input ---------------------------------------------------

MAX_HEAD = 2048
MAX_BODY = 4096
MAX_MESSAGE = 4096
HTTP_CASES = 1500
WS_CASES = 1500
FUZZ_THREADS = 8
NON_TOKEN = b'()<>@,;\\"/[]?={} \x01\x7f\x80\xff'
BAD_CLOSE_CODES = [0, 1, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535]

BAD_REQUEST = (400, "bad_request")
NOT_IMPLEMENTED = (501, "not_implemented")


def http_case(rng: random.Random) -> tuple[str, bytes, tuple[int, str]]:
    """One malformed request and the error it must get: (kind, bytes, (status, code))."""
    path = rng.choice(["/healthz", "/", "/api/stores", "/api/topics/t/messages"])
    host = b"Host: 127.0.0.1\r\n"
    junk = bytes(rng.choice(NON_TOKEN) for _ in range(rng.randint(1, 3)))
    kind = rng.choice([
        "request-line", "method", "target", "version", "header-name", "folding", "header-value",
        "cl-and-te", "two-cl", "bad-cl", "te-unknown", "te-twice", "oversized", "chunk-size",
        "chunk-end", "body-too-large", "traversal", "unknown-method"])
    body_head = lambda headers: (f"POST {path} HTTP/1.1\r\n".encode() + host + headers + b"\r\n")
    if kind == "request-line":
        line = rng.choice([b"GET  %s HTTP/1.1", b"GET %s HTTP/1.1 extra", b"GET %s", b"GET%s HTTP/1.1",
                           b"{" + bytes(rng.randrange(33, 127) for _ in range(20)) + b"%s"])
        return kind, line.replace(b"%s", path.encode()) + b"\r\n" + host + b"\r\n", BAD_REQUEST
    if kind == "method":
        method = b"GE" + junk + b"T"
        return kind, method + f" {path} HTTP/1.1\r\n".encode() + host + b"\r\n", BAD_REQUEST
    if kind == "target":
        bad = bytes([rng.choice([0, 1, 9, 0x7F, 0x80, 0xFF])])
        return kind, f"GET {path}".encode() + bad + b"x HTTP/1.1\r\n" + host + b"\r\n", BAD_REQUEST
    if kind == "version":
        version = rng.choice([b"HTTQ/1.1", b"http/1.1", b"HTTP/1", b"HTTP/11", b"HTTP/1.1.1", b"HTTP/x.1"])
        return kind, f"GET {path} ".encode() + version + b"\r\n" + host + b"\r\n", BAD_REQUEST
    if kind == "header-name":
        name = rng.choice([b"X-Bad", b"Host", b"Content-Type"])
        cut = rng.randint(0, len(name))
        name = name[:cut] + junk + name[cut:]
        line = rng.choice([name + b": v", b"NoColonHere", b": empty-name"])
        return kind, f"GET {path} HTTP/1.1\r\n".encode() + host + line + b"\r\n\r\n", BAD_REQUEST
    if kind == "folding":
        return kind, f"GET {path} HTTP/1.1\r\n".encode() + host + b"X-A: a\r\n" + \
            rng.choice([b" ", b"\t"]) + b"folded\r\n\r\n", BAD_REQUEST
    if kind == "header-value":
        bad = bytes([rng.choice([0, 1, 8, 0x0B, 0x1F, 0x7F])])
        return kind, f"GET {path} HTTP/1.1\r\n".encode() + host + b"X-A: a" + bad + b"b\r\n\r\n", BAD_REQUEST
    if kind == "cl-and-te":
        pair = [b"Content-Length: 5\r\n", rng.choice([b"Transfer-Encoding: chunked\r\n", b"transfer-encoding: CHUNKED\r\n"])]
        rng.shuffle(pair)
        return kind, body_head(b"".join(pair)) + b"5\r\nhello\r\n0\r\n\r\n", BAD_REQUEST
    if kind == "two-cl":
        first = rng.randint(0, 50)
        second = first + rng.randint(1, 50)
        return kind, body_head(b"Content-Length: %d\r\nContent-Length: %d\r\n" % (first, second)) + b"x" * second, BAD_REQUEST
    if kind == "bad-cl":
        value = rng.choice([b"+5", b"-1", b"5, 5", b"0x5", b"5 5", b"five", b"99999999999999999999999"])
        return kind, body_head(b"Content-Length: " + value + b"\r\n") + b"hello", BAD_REQUEST
    if kind == "te-unknown":
        coding = rng.choice([b"gzip", b"xchunked", b"chunked, gzip", b"gzip, chunked", b"compress"])
        return kind, body_head(b"Transfer-Encoding: " + coding + b"\r\n") + b"0\r\n\r\n", NOT_IMPLEMENTED
    if kind == "te-twice":
        return kind, body_head(b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n") + b"0\r\n\r\n", BAD_REQUEST
    if kind == "oversized":
        size = rng.randint(MAX_HEAD + 1, 4 * MAX_HEAD)
        shape = rng.choice(["one-header", "many-headers", "target"])
        if shape == "one-header":
            head = f"GET {path} HTTP/1.1\r\n".encode() + host + b"X-Pad: " + b"p" * size + b"\r\n\r\n"
        elif shape == "many-headers":
            head = f"GET {path} HTTP/1.1\r\n".encode() + host + b"".join(
                b"X-Pad-%d: %s\r\n" % (i, b"p" * 60) for i in range(size // 70 + 1)) + b"\r\n"
        else:
            head = b"GET /" + b"t" * size + b" HTTP/1.1\r\n" + host + b"\r\n"
        return kind, head, (431, "header_too_large")
    if kind == "chunk-size":
        size = rng.choice([b"zz", b"-1", b"0x5", b"g", b";ext", b"fffffffffffffffffffff"])
        return kind, body_head(b"Transfer-Encoding: chunked\r\n") + size + b"\r\nhello\r\n0\r\n\r\n", BAD_REQUEST
    if kind == "chunk-end":
        return kind, body_head(b"Transfer-Encoding: chunked\r\n") + b"5\r\nhello" + \
            rng.choice([b"XX", b"\n\n", b"!!"]) + b"0\r\n\r\n", BAD_REQUEST
    if kind == "body-too-large":
        size = rng.randint(MAX_BODY + 1, 3 * MAX_BODY)
        if rng.random() < 0.5:
            return kind, body_head(b"Content-Length: %d\r\n" % size) + b"b" * size, (413, "payload_too_large")
        return kind, body_head(b"Transfer-Encoding: chunked\r\n") + b"%x\r\n" % size + b"b" * size + b"\r\n0\r\n\r\n", \
            (413, "payload_too_large")
    if kind == "traversal":
        bad = rng.choice(["/a/../b", "/%2e%2e/etc/passwd", "/a%00b", "/a%2fb", "/..", "/x/%2E%2E/y"])
        return kind, http_request("GET", bad), BAD_REQUEST
    method = "".join(rng.choice("BCDFHJKLMNQRSVWXYZ") for _ in range(rng.randint(3, 8)))
    return "unknown-method", http_request(method, path), BAD_REQUEST


def run_http_case(port: int, kind: str, data: bytes, expected: tuple[int, str]) -> str | None:
    """Send one malformed request; returns what went wrong, or None."""
    try:
        with RawConnection(port) as conn:
            conn.send(data)
            resp = conn.read_response()
            assert_json_error(resp, *expected)
            assert resp.connection() == "close", resp.headers
            conn.expect_closed()
    except (AssertionError, OSError) as error:
        return f"{kind}: {data[:80]!r}: {error}"
    return None


def fragments(rng: random.Random, payload: bytes) -> list[bytes]:
    """Splits a payload into one to four fragments at random places."""
    cuts = sorted(rng.sample(range(1, len(payload)), min(len(payload) - 1, rng.randint(0, 3)))) if len(payload) > 1 else []
    edges = [0, *cuts, len(payload)]
    return [payload[a:b] for a, b in zip(edges, edges[1:])]


def message_frames(rng: random.Random, opcode: int, payload: bytes) -> bytes:
    parts = fragments(rng, payload)
    return b"".join(encode_frame(opcode if i == 0 else OP_CONT, part, fin=i == len(parts) - 1)
                    for i, part in enumerate(parts))


def ws_case(rng: random.Random) -> tuple[str, bytes, object]:
    """One bad frame sequence and its answer: a close code (int) or an error message code (str)."""
    text = json.dumps({"type": "subscribe", "topic": "fuzz"}).encode()
    kind = rng.choice(["unmasked", "reserved-bits", "opcode", "fragmented-control", "long-control",
                       "continuation-first", "data-inside-fragmented", "utf8", "utf8-close-reason",
                       "oversized", "oversized-declared", "close-code", "close-one-byte", "garbage-json"])
    if kind == "unmasked":
        return kind, encode_frame(rng.choice([OP_TEXT, OP_PING, OP_CLOSE]), text[:rng.randint(0, len(text))], mask=False), 1002
    if kind == "reserved-bits":
        return kind, encode_frame(rng.choice([OP_TEXT, OP_PING]), text, rsv=rng.randint(1, 7)), 1002
    if kind == "opcode":
        return kind, encode_frame(rng.choice([3, 4, 5, 6, 7, 0xB, 0xC, 0xD, 0xE, 0xF]), text), 1002
    if kind == "fragmented-control":
        opcode = rng.choice([OP_PING, OP_PONG, OP_CLOSE])
        return kind, encode_frame(opcode, b"ab", fin=False) + encode_frame(OP_CONT, b"cd"), 1002
    if kind == "long-control":
        return kind, encode_frame(rng.choice([OP_PING, OP_PONG]), b"x" * rng.randint(126, 1000)), 1002
    if kind == "continuation-first":
        return kind, encode_frame(OP_CONT, text, fin=rng.random() < 0.5), 1002
    if kind == "data-inside-fragmented":
        return kind, encode_frame(OP_TEXT, text[:5], fin=False) + encode_frame(rng.choice([OP_TEXT, OP_BINARY]), text), 1002
    if kind == "utf8":
        bad = rng.choice([b"\xff", b"\xfe", b"\xc0\xaf", b"\xe0\x80\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
                          b"\xc3", b"\x80", b"\xf8\x88\x80\x80\x80"])
        payload = b'{"type":"' + bytes(rng.randrange(0x20, 0x7F) for _ in range(rng.randint(0, 30))).replace(b'"', b"_") + bad
        return kind, message_frames(rng, OP_TEXT, payload), 1007
    if kind == "utf8-close-reason":
        return kind, encode_frame(OP_CLOSE, close_payload(1000, b"bye " + rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80"]))), 1007
    if kind == "oversized":
        payload = b'"' + b"o" * rng.randint(MAX_MESSAGE - 1, 3 * MAX_MESSAGE) + b'"'
        return kind, message_frames(rng, rng.choice([OP_TEXT, OP_BINARY]), payload), 1009
    if kind == "oversized-declared":
        # Only the head of a frame declaring more than the limit: refused before any payload.
        size = rng.choice([MAX_MESSAGE + 1, 1 << 20, 1 << 40])
        head = bytes([0x80 | OP_TEXT]) + (bytes([0x80 | 126]) + struct.pack(">H", size) if size < 65536
                                          else bytes([0x80 | 127]) + struct.pack(">Q", size))
        return kind, head + b"\x00\x00\x00\x00", 1009
    if kind == "close-code":
        return kind, encode_frame(OP_CLOSE, close_payload(rng.choice(BAD_CLOSE_CODES))), 1002
    if kind == "close-one-byte":
        return kind, encode_frame(OP_CLOSE, bytes([rng.randrange(256)])), 1002
    message, code = rng.choice([
        (b"{", "bad_message"), (b"nul", "bad_message"), (b"[1,2]", "bad_message"), (b"42", "bad_message"),
        (b'"subscribe"', "bad_message"), (b"{}", "bad_message"), (b'{"type":7}', "bad_message"),
        (b'{"type":"subscribe"}', "bad_message"),
        (b'{"type":"subscribe","store":"a","topic":"b"}', "bad_message"),
        (b'{"type":"subscribe","topic":"t","since":-1}', "bad_message"),
        (b'{"type":"subscribe","topic":"t","since":"x"}', "bad_message"),
        (b'{"type":"publish","topic":"t"}', "bad_message"),
        (b'{"type":"shout","topic":"t"}', "unknown_type"),
        (b'{"type":"subscribe","topic":"no spaces"}', "invalid_topic"),
        (b'{"type":"subscribe","store":"no-such-store-anywhere"}', "no_such_store"),
        (b'{"type":"unsubscribe","topic":"never"}', "not_subscribed"),
    ])
    junk = bytes(rng.randrange(0x20, 0x7F) for _ in range(rng.randint(0, 20)))
    if message == b"{":
        message += junk
    return kind, message_frames(rng, OP_TEXT, message), code


def run_ws_case(port: int, kind: str, data: bytes, expected) -> str | None:
    """Send one bad frame sequence on a fresh WebSocket; returns what went wrong, or None."""
    try:
        with RawWebSocket(port).open() as ws:
            ws.send(data)
            if isinstance(expected, str):
                # The protocol error is answered and the connection keeps serving.
                frame = ws.recv_json()
                assert (frame["type"], frame.get("code")) == ("error", expected), frame
                topic = unique("after")
                ws.send_json({"type": "subscribe", "topic": topic})
                assert ws.recv_json() == {"type": "subscribed", "topic": topic, "seq": 0, "epoch": EPOCH, "resumed": False}
                ws.send_frame(OP_CLOSE, close_payload(1000))
                frame = ws.read_frame()
                assert frame.opcode == OP_CLOSE and frame.close_code() == 1000, frame
                ws.expect_eof()
                return None
            frame = ws.read_frame()
            assert frame.opcode == OP_CLOSE, frame
            assert frame.close_code() == expected, (frame.close_code(), frame.payload[2:])
            try:
                ws.send_frame(OP_CLOSE, close_payload(expected))
            except OSError:
                pass  # the server may already have closed the socket after a protocol error
            ws.expect_eof()
    except (AssertionError, OSError) as error:
        return f"{kind}: {data[:60]!r}: {error}"
    return None


class BackgroundSubscriber:
    """A valid subscriber and a publisher, both busy for as long as the fuzzing lasts."""

    def __init__(self, port: int):
        self.port = port
        self.topic = unique("steady")
        self.ws = connect(port)
        assert subscribe(self.ws, topic=self.topic)["type"] == "subscribed"
        self.published: list[int] = []
        self.publish_errors: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._publish, daemon=True)
        self.thread.start()

    def _publish(self) -> None:
        while not self.stop.wait(0.01):
            try:
                self.published.append(publish(self.port, self.topic, {"n": len(self.published)}))
            except (AssertionError, OSError) as error:
                self.publish_errors.append(str(error))

    def finish(self) -> None:
        """Stops publishing and checks every message arrived, in order, exactly once."""
        wait_for(lambda: len(self.published) >= 20 or self.publish_errors, 10, "the publisher stalled")
        self.stop.set()
        self.thread.join(10)
        assert not self.publish_errors, self.publish_errors[:5]
        assert self.published == list(range(1, len(self.published) + 1)), self.published[:20]
        for index, seq in enumerate(self.published):
            frame = recv_json(self.ws)
            assert (frame["type"], frame["seq"], frame["data"]) == ("message", seq, {"n": index}), frame
        with pytest.raises(TimeoutError):
            self.ws.recv(timeout=0.2)
        self.ws.close()


@pytest.fixture(scope="module")
def fuzz_server(module_servers):
    return module_servers("--max-head-bytes", str(MAX_HEAD), "--max-body-bytes", str(MAX_BODY),
                          "--max-message-bytes", str(MAX_MESSAGE))


def run_cases(port: int, cases, runner) -> list[str]:
    with ThreadPoolExecutor(FUZZ_THREADS) as pool:
        results = pool.map(lambda case: runner(port, *case), cases)
        return [problem for problem in results if problem]


def check_malformed(server, cases, kinds: int, runner) -> None:
    """Runs every generated case while a valid subscriber listens, then checks nothing else broke."""
    assert len({kind for kind, _, _ in cases}) == kinds, "the generator should cover every kind"
    background = BackgroundSubscriber(server.port)
    problems = run_cases(server.port, cases, runner)
    background.finish()
    assert not problems, f"{len(problems)} of {len(cases)} cases failed:\n" + "\n".join(problems[:15])
    assert_served(server.port)
    assert_no_error_lines(server)


@pytest.mark.timeout(120)
def test_malformed_requests_each_get_their_error_while_valid_clients_are_served(fuzz_server):
    rng = random.Random(20_240_601)
    check_malformed(fuzz_server, [http_case(rng) for _ in range(HTTP_CASES)], 18, run_http_case)


@pytest.mark.timeout(120)
def test_malformed_frames_each_get_their_close_code_while_valid_clients_are_served(fuzz_server):
    rng = random.Random(20_240_602)
    check_malformed(fuzz_server, [ws_case(rng) for _ in range(WS_CASES)], 14, run_ws_case)
