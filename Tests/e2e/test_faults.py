"""Faults, against the real binary: a slowloris head, a half-open WebSocket, resets in the middle
of large writes, and running out of descriptors. Connection churn is in test_faults_churn.py,
thousands of malformed requests and frames in test_faults_malformed.py. Each test also checks
that everyone else is served meanwhile."""

from __future__ import annotations

import resource
import socket
import threading
import time

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
from procstat import cpu_share, error_lines, fd_count, reset_close, steady_fd_count, wait_fd_count
from wsclient import (
    EPOCH,
    OP_PING,
    RawWebSocket,
    connect,
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


def test_a_trickled_body_is_cut_off_at_the_idle_timeout_of_its_head(start_server):
    """A body sent a byte every 0.3 s never stalls for the idle time-out (2 s), but has that long
    from its head to arrive whole: 408, and the connection closed. Before, it held the connection
    for as long as it trickled."""
    idle = 2.0
    server = start_server("--head-timeout", "1", "--idle-timeout", str(idle))
    head = b"POST /api/topics/trickle/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    with RawConnection(server.port) as slow:
        slow.send(head + b"Content-Length: 1000\r\n\r\n")
        started = time.monotonic()
        while not slow.readable(0.3):
            try:
                slow.send(b" ")
            except (BrokenPipeError, ConnectionResetError):
                break
            assert time.monotonic() - started < idle + SWEEP_SLACK, "the trickled body was never cut off"
        resp = slow.read_response()
        cut_after = time.monotonic() - started
        assert_json_error(resp, 408, "request_timeout")
        slow.expect_closed()
    assert idle * 0.9 <= cut_after <= idle + SWEEP_SLACK, cut_after
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
