"""An HTTP connection's replies obey `--max-queued-bytes` (docs/DESIGN.md, invariant 7 and the
queue table): past it the gateway answers no more of a client's requests, read or not, until the
client takes the replies, so what it holds stays bounded, while the replies it does give are
whole and another client is served meanwhile; a client that takes them, however slowly, is not
idle, and is served to the end.
"""

from __future__ import annotations

import select
import socket
import time

import pytest

from conftest import HOST, Response, api, assert_standard_headers, http_client_request, http_request, json_ok, parse_head, wait_for
from procstat import rss_bytes
from test_metrics import scrape, value
from test_queue_limits import MODEL_BYTES, QUEUE_LIMIT, RSS_BOUND, TINY_RCVBUF, PeakRSS, big_store
from wsclient import kernel_buffer_budget, put_model

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


def take_reply(data: bytearray) -> Response | None:
    """The first whole reply in `data`, taken out of it (with its standard headers checked); None
    while it is not all there."""
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return None
    status, reason, headers = parse_head(bytes(data[:end]))
    length = int(dict((k.lower(), v) for k, v in headers)["content-length"])
    if len(data) < end + 4 + length:
        return None
    reply = Response(status, reason, headers, bytes(data[end + 4:end + 4 + length]))
    assert_standard_headers(reply)
    del data[:end + 4 + length]
    return reply


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
        while (reply := take_reply(data)) is not None:
            replies.append((reply.status, reply.body == expected))
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


# ---- A client that takes its replies slowly is served to the end -----------

HUGE_MODELS = 20             # ~4 MiB more in the store: one reply far past the kernel's buffers
IDLE_TIMEOUT = "1"           # seconds; each reply takes the slow client longer than that
SLOW_READ_BYTES = 64 * 1024
SLOW_READ_PAUSE = 0.002


def huge_store(port: int) -> tuple[str, Response]:
    """A store whose GET answer is over 3 MiB, and that answer."""
    store = big_store(port)
    for index in range(HUGE_MODELS):
        put_model(port, store, f"x{index}", {"blob": "c" * (MODEL_BYTES * 6)})
    reference = api(port, "GET", f"/api/stores/{store}")
    assert reference.status == 200 and len(reference.body) > 3 << 20, len(reference.body)
    return store, reference


@pytest.mark.timeout(90)
def test_a_client_taking_its_replies_slowly_is_not_idle(start_server):
    """Two pipelined GETs of a ~4 MiB store, read by a client with a tiny receive window, slowly:
    each reply takes it longer than the gateway's 1 s idle time-out, while the second request
    waits parked behind the first reply. Both replies arrive whole, and only then does the
    connection go idle. Were a parked connection idle while its client reads, it would be closed
    after the first reply (as it was before the sweep saw the queue shrink), and the second
    never answered."""
    server = start_server("--max-queued-bytes", str(QUEUE_LIMIT), "--idle-timeout", IDLE_TIMEOUT)
    port = server.port
    store, reference = huge_store(port)
    request = http_request("GET", f"/api/stores/{store}", {})

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, TINY_RCVBUF)
    with sock:
        sock.connect((HOST, port))
        sock.sendall(request * 2)
        started = time.monotonic()
        data = bytearray()
        sock.settimeout(10)
        while True:
            time.sleep(SLOW_READ_PAUSE)  # the client's pace, not synchronisation
            chunk = sock.recv(SLOW_READ_BYTES)
            if not chunk:
                break
            data += chunk
            assert time.monotonic() - started < 60, f"{len(data)} bytes in 60 s"
        took = time.monotonic() - started
    replies = []
    while (reply := take_reply(data)) is not None:
        replies.append((reply.status, reply.body == reference.body))
    print(f"slow client: {len(replies)} replies of {len(reference.body)} bytes in {took:.1f} s")
    assert took > 2 * float(IDLE_TIMEOUT), f"the client read everything in {took:.1f} s: not slower than the time-out"
    assert replies == [(200, True), (200, True)], replies
    assert not data, f"{len(data)} bytes of a reply cut short"


# ---- A request sent while a big reply is being taken -----------------------

SLOW_PACE = 0.008            # seconds between reads of at most 16 KiB: ~2 MB/s at most
NEXT_AFTER = 0.3             # seconds into the first reply the next request is sent


@pytest.mark.timeout(90)
@pytest.mark.parametrize("split", [False, True], ids=["whole", "head-in-two"])
def test_a_request_sent_while_a_big_reply_is_taken_slowly_is_answered(start_server, split):
    """A client GETs a ~4 MiB store and takes the reply slowly, longer than the 1 s idle and
    head time-outs; 0.3 s in, it sends its next request, whole or with its head in two pieces.
    The gateway, which stopped reading while the reply waits for the client, answers both, whole.
    Before, its idle time-out closed the connection in the middle of the first reply (the client
    took it from the kernel's buffers, not the gateway's queue, so it looked idle), and a head cut
    in two got a 408: a reset, and the reply cut short."""
    server = start_server("--max-queued-bytes", str(QUEUE_LIMIT), "--idle-timeout", IDLE_TIMEOUT,
                          "--head-timeout", IDLE_TIMEOUT)
    port = server.port
    store, reference = huge_store(port)
    second = http_request("GET", "/healthz", {})
    cut = second.index(b"Host") + 2
    pieces = [second[:cut], second[cut:]] if split else [second]

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, TINY_RCVBUF)
    with sock:
        sock.connect((HOST, port))
        sock.sendall(http_request("GET", f"/api/stores/{store}", {}))
        started = time.monotonic()
        data, replies = bytearray(), []
        sock.settimeout(10)
        while len(replies) < 2:
            if pieces and time.monotonic() - started > NEXT_AFTER + 0.1 * (len(pieces) == 1 and split):
                sock.sendall(pieces.pop(0))
            time.sleep(SLOW_PACE)  # the client's pace, not synchronisation
            try:
                chunk = sock.recv(16384)
            except ConnectionResetError:
                raise AssertionError(f"reset after {len(data)} bytes and {len(replies)} replies") from None
            assert chunk, f"closed after {len(data)} bytes and {len(replies)} replies"
            data += chunk
            while (reply := take_reply(data)) is not None:
                replies.append(reply)
            assert time.monotonic() - started < 60, f"{len(data)} bytes in 60 s"
        took = time.monotonic() - started
    print(f"slow client, next request {'split' if split else 'whole'}: 2 replies in {took:.1f} s")
    assert took > 1.5 * float(IDLE_TIMEOUT), f"the client took the reply in {took:.1f} s: not slower than the time-outs"
    assert (replies[0].status, replies[0].body == reference.body) == (200, True), replies[0].status
    assert (replies[1].status, replies[1].body) == (200, b'{"status":"ok"}'), (replies[1].status, replies[1].body[:100])
    assert not data


def test_readers_of_one_snapshot_that_do_not_read_share_its_bytes(start_server):
    """Each reader of a large snapshot had its answer built and queued for it alone: a hundred
    readers of a 20 MiB store that read nothing held some 4 GiB. Readers of the same version
    now share one buffer."""
    server = start_server()
    port, store = server.port, "shared-snapshot"
    json_ok(api(port, "POST", "/api/stores", {"name": store}), 201)
    for n in range(8):
        json_ok(api(port, "PUT", f"/api/stores/{store}/models/m{n}", {"text": "x" * 500_000}), 201)
    before = rss_bytes(server.proc.pid)
    readers = []
    try:
        for _ in range(40):
            sock = socket.create_connection((HOST, port), timeout=5)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, TINY_RCVBUF)
            sock.sendall(http_request("GET", f"/api/stores/{store}"))
            readers.append(sock)
        # Every answer is under way: the first bytes of each have reached its reader.
        for sock in readers:
            assert sock.recv(16).startswith(b"HTTP/1.1 200")
        grown = rss_bytes(server.proc.pid) - before
        assert grown < 64 << 20, f"{grown >> 20} MiB more for 40 readers of a 4 MiB snapshot"
    finally:
        for sock in readers:
            sock.close()
