"""Connection churn, against the real binary: ten thousand connections, plain and WebSocket, opened
and dropped from many source addresses, leave no descriptors or memory behind, and everyone else
is served meanwhile."""

from __future__ import annotations

import random
import socket
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import HOST, RawConnection, http_request, wait_for
from procstat import (
    connect_from,
    fd_count,
    reset_close,
    rss_bytes,
    source_addresses,
    steady_fd_count,
    wait_fd_count,
)
from test_faults import assert_no_error_lines, assert_served
from wsclient import OP_CLOSE, RawWebSocket, close_payload, publish, unique


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
