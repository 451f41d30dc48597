"""Every queue has a limit (docs/DESIGN.md, invariant 28):

- What a subscriber is owed (a snapshot, `subscribed`, `gap`) and the replies of our own (an
  error, `unsubscribed`) are not queued past `--max-queued-bytes` of what the kernel refused on
  the connection: a client that asks and asks but never reads is closed with 1008 "slow
  consumer" and counted in `receptionist_refusals_total{reason="slow_consumer"}`.
- An HTTP connection's replies obey the same limit: past it the gateway answers no more of a
  client's requests, read or not, until the client takes the replies, so what it holds stays
  bounded, while the replies it does give are whole and another client is served meanwhile.

The queues toward Redis are in test_redis_queue_limits.py.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time

import pytest

from conftest import (
    HOST,
    Response,
    api,
    assert_standard_headers,
    http_client_request,
    http_request,
    parse_head,
    wait_for,
)
from procstat import rss_bytes
from test_metrics import scrape, value
from wsclient import (
    OP_TEXT,
    RawWebSocket,
    assert_changes_frame,
    connect,
    encode_frame,
    kernel_buffer_budget,
    new_store,
    patch_model,
    put_model,
    recv_json,
    subscribe,
)

QUEUE_LIMIT = 65536          # --max-queued-bytes
TINY_RCVBUF = 4096           # SO_RCVBUF of the client that never reads, set before connecting
MODELS = 8
MODEL_BYTES = 32 * 1024      # so a snapshot is about 256 KiB
PAIRS = 300                  # subscribe/unsubscribe pairs: 300 snapshots are about 75 MiB
RSS_BOUND = 20 << 20         # far below what 300 snapshots take
SETTLE_TIMEOUT = 20.0        # the gateway reads and answers (or refuses) everything it was sent
CLOSE_TIMEOUT = 10.0


def slow_consumer_refusals(port: int) -> float:
    return value(scrape(port), "receptionist_refusals_total", reason="slow_consumer")


def websocket_messages_in(samples) -> float:
    return value(samples, "receptionist_messages_in_total", transport="websocket")


class PeakRSS:
    """Samples the server's resident memory on a thread; `peak` is the most seen."""

    def __init__(self, pid: int):
        self.pid = pid
        self.peak = rss_bytes(pid)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.01):
            try:
                self.peak = max(self.peak, rss_bytes(self.pid))
            except (FileNotFoundError, ProcessLookupError):
                return

    def finish(self) -> int:
        self.stop.set()
        self.thread.join(5)
        self.peak = max(self.peak, rss_bytes(self.pid))
        return self.peak


def big_store(port: int) -> str:
    store = new_store(port, prefix="owed")
    for index in range(MODELS):
        put_model(port, store, f"m{index}", {"blob": "b" * MODEL_BYTES})
    return store


def never_reading_client(port: int) -> RawWebSocket:
    """An upgraded raw WebSocket with a tiny receive window that the test does not read from."""
    ws = RawWebSocket(port, rcvbuf=TINY_RCVBUF)
    ws.open()
    ws.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return ws


def masked(message: dict) -> bytes:
    """One masked text frame; the same bytes may be sent again and again."""
    return encode_frame(OP_TEXT, json.dumps(message).encode())


def expect_slow_consumer_close(ws: RawWebSocket) -> list:
    """Reads out what was queued before the close frame: the close must be 1008 "slow consumer"."""
    frames, close = ws.read_until_closed(CLOSE_TIMEOUT)
    assert close is not None, f"the connection ended without a close frame after {len(frames)} frames"
    assert (close.close_code(), close.close_reason()) == (1008, "slow consumer"), close
    assert all(frame.opcode == OP_TEXT for frame in frames), {frame.opcode for frame in frames}
    return frames


def assert_still_served(port: int, ws, store: str, version: int) -> None:
    """A well-behaved subscriber beside the refused client still gets the next change set."""
    committed = patch_model(port, store, "m0", {"after": "refusal"})
    assert committed > version
    frame = recv_json(ws, timeout=10)
    assert_changes_frame(frame, store, committed)
    assert frame["changes"] == [{"model": "m0", "path": "after", "kind": "created", "value": "refusal"}], frame


# ---- Owed messages and replies obey the outbound limit --------------------

@pytest.mark.timeout(60)
def test_snapshots_asked_for_in_a_burst_close_a_client_that_never_reads(start_server):
    """300 subscribe/unsubscribe pairs sent at once, in one write, by a client that never reads.
    Without the limit on owed messages, the gateway queues every snapshot: about 300 x 256 KiB
    = 75 MiB of RSS, and the slow_consumer counter stays 0, so both the counter and the RSS
    assertions fail."""
    server = start_server("--max-queued-bytes", str(QUEUE_LIMIT), "--client-message-rate", "0")
    port, pid = server.port, server.proc.pid
    store = big_store(port)
    with connect(port) as good:
        snapshot = subscribe(good, store=store)
        assert snapshot["type"] == "snapshot" and len(snapshot["models"]) == MODELS
        before = scrape(port)
        refusals_before = value(before, "receptionist_refusals_total", reason="slow_consumer")
        messages_before = websocket_messages_in(before)
        baseline_rss = rss_bytes(pid)
        peak = PeakRSS(pid)

        pair = masked({"type": "subscribe", "store": store}) + masked({"type": "unsubscribe", "store": store})
        burst = pair * PAIRS
        # One write of ~40 KiB: what a hostile client would do. Sent pair by pair the requests
        # arrive in one read or several depending on timing; in one write they reliably arrive
        # in one read (the gateway reads 64 KiB at a time), so no flush happens between them.
        assert len(burst) < 60 * 1024, len(burst)
        with never_reading_client(port) as rude:
            rude.send(burst)
            sent = PAIRS
            # Settled: either the client was refused, or the gateway has read every message it
            # was sent (so whatever it was going to queue is queued).
            wait_for(lambda: (s := scrape(port)) and (
                value(s, "receptionist_refusals_total", reason="slow_consumer") > refusals_before
                or websocket_messages_in(s) - messages_before >= 2 * sent), SETTLE_TIMEOUT,
                "the gateway neither refused the client nor read what it sent")
            after = scrape(port)
            grown = peak.finish() - baseline_rss
            refused = value(after, "receptionist_refusals_total", reason="slow_consumer") - refusals_before
            read = websocket_messages_in(after) - messages_before
            print(f"burst: sent {sent} pairs, gateway read {read:.0f} messages, refusals +{refused:.0f}, "
                  f"peak RSS +{grown / 1048576:.1f} MiB")
            assert refused == 1, (
                f"slow_consumer refusals rose by {refused:.0f}, not 1: the gateway read {read:.0f} messages "
                f"and its RSS grew by {grown / 1048576:.1f} MiB")
            assert grown < RSS_BOUND, f"RSS grew by {grown / 1048576:.1f} MiB for a client that never reads"
            assert_still_served(port, good, store, snapshot["version"])
            expect_slow_consumer_close(rude)


@pytest.mark.timeout(60)
def test_snapshots_asked_for_one_read_at_a_time_close_a_client_that_never_reads(start_server):
    """The same client, but each pair is sent only once the gateway has read the previous one,
    so every request arrives in its own read, after the previous snapshot was offered to the
    kernel. Without the limit the counter stays 0 through all 300 pairs and 75 MiB is queued."""
    server = start_server("--max-queued-bytes", str(QUEUE_LIMIT), "--client-message-rate", "0")
    port, pid = server.port, server.proc.pid
    store = big_store(port)
    with connect(port) as good:
        snapshot = subscribe(good, store=store)
        before = scrape(port)
        refusals_before = value(before, "receptionist_refusals_total", reason="slow_consumer")
        messages_before = websocket_messages_in(before)
        baseline_rss = rss_bytes(pid)
        peak = PeakRSS(pid)

        pair = masked({"type": "subscribe", "store": store}) + masked({"type": "unsubscribe", "store": store})
        with never_reading_client(port) as rude:
            refused, pairs = 0, 0
            while pairs < PAIRS and not refused:
                try:
                    rude.send(pair)
                except OSError:
                    break
                pairs += 1
                # Read (both messages counted) or refused.
                def settled():
                    samples = scrape(port)
                    rose = value(samples, "receptionist_refusals_total", reason="slow_consumer") - refusals_before
                    read = websocket_messages_in(samples) - messages_before
                    return (rose > 0 or read >= 2 * pairs) and (rose,)

                refused = wait_for(settled, 10, f"pair {pairs} was neither read nor refused", interval=0.005)[0]
            grown = peak.finish() - baseline_rss
            print(f"paced: refused after {pairs} pairs, peak RSS +{grown / 1048576:.1f} MiB")
            assert refused == 1, f"{pairs} snapshots asked for one at a time and no slow_consumer refusal"
            assert grown < RSS_BOUND, f"RSS grew by {grown / 1048576:.1f} MiB"
            assert slow_consumer_refusals(port) - refusals_before == 1
            assert_still_served(port, good, store, snapshot["version"])
            expect_slow_consumer_close(rude)


ERROR_NAME_BYTES = 4000      # an unknown store's name is echoed in the error: ~4 KiB per reply
ERROR_MESSAGES = 3000        # ~12 MiB of error replies, past the kernel's 4 MiB and the limit


@pytest.mark.timeout(60)
def test_error_replies_to_a_client_that_never_reads_close_it(start_server):
    """Replies of our own: `unsubscribe` of a store the client does not hold is answered with a
    `not_subscribed` error that echoes the store's name. 3000 of them are ~12 MiB, more than
    the kernel's send buffer (tcp_wmem at most 4 MiB) plus the limit. Without the limit on
    replies every error is queued and the slow_consumer counter stays 0."""
    with open("/proc/sys/net/ipv4/tcp_wmem") as wmem:
        kernel_max = int(wmem.read().split()[2])
    assert ERROR_MESSAGES * ERROR_NAME_BYTES > kernel_max + QUEUE_LIMIT + (4 << 20)
    server = start_server("--max-queued-bytes", str(QUEUE_LIMIT), "--client-message-rate", "0")
    port = server.port
    store = new_store(port, {"m0": {"n": 0}}, prefix="replies")
    with connect(port) as good:
        snapshot = subscribe(good, store=store)
        before = scrape(port)
        refusals_before = value(before, "receptionist_refusals_total", reason="slow_consumer")
        messages_before = websocket_messages_in(before)
        bad = masked({"type": "unsubscribe", "store": "s" * ERROR_NAME_BYTES})
        with never_reading_client(port) as rude:
            sent = 0
            try:
                for _ in range(ERROR_MESSAGES):
                    rude.send(bad)
                    sent += 1
            except OSError:
                pass  # closed by the gateway
            wait_for(lambda: (s := scrape(port)) and (
                value(s, "receptionist_refusals_total", reason="slow_consumer") > refusals_before
                or websocket_messages_in(s) - messages_before >= sent), SETTLE_TIMEOUT,
                "the gateway neither refused the client nor read what it sent")
            after = scrape(port)
            refused = value(after, "receptionist_refusals_total", reason="slow_consumer") - refusals_before
            read = websocket_messages_in(after) - messages_before
            print(f"errors: sent {sent}, gateway read {read:.0f}, refusals +{refused:.0f}")
            assert refused == 1, f"{read:.0f} error replies to a client that never reads and no refusal"
            assert_still_served(port, good, store, snapshot["version"])
            frames = expect_slow_consumer_close(rude)
            # What was queued before the close is bounded: the kernel's buffers and the limit,
            # not all 12 MiB of replies.
            assert len(frames) * ERROR_NAME_BYTES < kernel_max + QUEUE_LIMIT + (1 << 20), len(frames)


# ---- Replies to an HTTP client obey the same limit -------------------------

PIPELINED = 240              # keep-alive GETs of the big store: ~60 MiB of replies, in one read
PUSH_SECONDS = 1.0
QUIET_SECONDS = 0.5          # the count of requests read has not moved for this long
HEALTH_PROMPT = 0.5
READ_BACK_TIMEOUT = 30.0


class RequestsAnswered:
    """Requests the gateway has answered since this was made: `receptionist_http_requests_total`
    less the test's own scrapes and probes (each scrape counts itself)."""

    def __init__(self, port: int):
        self.port, self.own = port, 0
        self.base = self._total()

    def _total(self) -> float:
        return value(scrape(self.port), "receptionist_http_requests_total")

    def __call__(self) -> int:
        self.own += 1
        return int(self._total() - self.base - self.own)


def read_replies(sock: socket.socket, count: int, tail: bytes, expected: bytes) -> list[tuple[int, bool]]:
    """Reads `count` replies, sending `tail` (the rest of the last request) as the gateway takes
    it; returns each reply's status and whether its body is `expected`."""
    sock.setblocking(False)
    data, replies, deadline = bytearray(), [], time.monotonic() + READ_BACK_TIMEOUT
    while len(replies) < count:
        assert time.monotonic() < deadline, f"{len(replies)} of {count} replies in {READ_BACK_TIMEOUT}s"
        readable, writable, _ = select.select([sock], [sock] if tail else [], [], 0.5)
        if writable:
            tail = tail[sock.send(tail):]
        if readable:
            chunk = sock.recv(1 << 20)
            assert chunk, f"the gateway closed the connection after {len(replies)} of {count} replies"
            data += chunk
        while (end := data.find(b"\r\n\r\n")) >= 0:
            status, reason, headers = parse_head(bytes(data[:end]))
            length = int(dict((k.lower(), v) for k, v in headers)["content-length"])
            if len(data) < end + 4 + length:
                break
            reply = Response(status, reason, headers, bytes(data[end + 4:end + 4 + length]))
            assert_standard_headers(reply)
            replies.append((reply.status, reply.body == expected))
            del data[:end + 4 + length]
    assert not data, f"{len(data)} bytes after the {count} replies"
    return replies


@pytest.mark.timeout(90)
def test_an_http_client_that_never_reads_its_replies_is_not_read_on(start_server):
    """240 keep-alive GETs of a ~256 KiB store (~17 KiB of requests, so one read brings them
    all), pipelined by a client with a tiny receive window that reads nothing until the end. Past
    `--max-queued-bytes` the gateway answers no more of them, read or not: it answers what the
    kernel's buffers take and the one reply that passed the limit, and its RSS barely moves; the
    rest are answered, in order, as the client reads. Without the limit (or with it checked only
    between reads) it answers all 240 and queues ~60 MiB of replies, so the count and RSS
    assertions fail."""
    server = start_server("--max-queued-bytes", str(QUEUE_LIMIT))
    port, pid = server.port, server.proc.pid
    store = big_store(port)
    reference = api(port, "GET", f"/api/stores/{store}")
    assert reference.status == 200 and len(reference.body) > 8 * MODEL_BYTES, reference.status
    request = http_request("GET", f"/api/stores/{store}", {})
    # Replies the kernel's buffers and the limit take, and the one that passed it, are answered.
    bound = (kernel_buffer_budget() + QUEUE_LIMIT) // len(reference.body) + 2
    assert bound < PIPELINED // 2, bound

    answered = RequestsAnswered(port)
    baseline_rss = rss_bytes(pid)
    peak = PeakRSS(pid)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, TINY_RCVBUF)
    with sock:
        sock.connect((HOST, port))
        sock.setblocking(False)
        batch = request * PIPELINED
        pushed, deadline = 0, time.monotonic() + PUSH_SECONDS
        while pushed < len(batch) and time.monotonic() < deadline:
            try:
                pushed += sock.send(batch[pushed:])
            except BlockingIOError:
                select.select([], [sock], [], 0.05)
        sent = -(-pushed // len(request))
        assert sent >= PIPELINED // 2, f"the kernel took only {sent} requests"

        # Settled: answering stopped (the count has not moved for QUIET_SECONDS), or all were answered.
        moved = {"count": -1, "at": 0.0}

        def settled():
            count = answered()
            if count != moved["count"]:
                moved.update(count=count, at=time.monotonic())
            return count >= sent or (count > 0 and time.monotonic() - moved["at"] >= QUIET_SECONDS)

        wait_for(settled, 20, "the gateway kept answering requests", interval=0.02)
        read = moved["count"]
        assert read < bound, f"the gateway answered {read} of {sent} requests whose replies were not read"

        # Another client is served promptly meanwhile, and the held connection stays unread.
        started = time.monotonic()
        health = http_client_request(port, "GET", "/healthz", timeout=5)
        took = time.monotonic() - started
        answered.own += 1  # the probe is counted too
        assert health.status == 200 and took < HEALTH_PROMPT, (health.status, took)
        later = answered()
        grown = peak.finish() - baseline_rss
        print(f"http: sent {sent} of {PIPELINED} GETs ({pushed} bytes), gateway answered {read} then {later}, "
              f"bound {bound}, /healthz {took:.3f}s, peak RSS +{grown / 1048576:.1f} MiB")
        assert later < bound, f"the gateway answered on to {later} requests while its replies waited"
        assert grown < RSS_BOUND, f"RSS grew by {grown / 1048576:.1f} MiB for a client that never reads"

        # The replies, read at last, are whole and unaltered: one 200 with the store per request.
        replies = read_replies(sock, sent, batch[pushed:sent * len(request)], reference.body)
        assert replies == [(200, True)] * sent, [r for r in replies if r != (200, True)][:5]
