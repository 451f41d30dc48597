"""Every queue has a limit (docs/DESIGN.md, invariant 28):

- What a subscriber is owed (a snapshot, `subscribed`, `gap`) and the replies of our own (an
  error, `unsubscribed`) are not queued past `--max-queued-bytes` of what the kernel refused on
  the connection: a client that asks and asks but never reads is closed with 1008 "slow
  consumer" and counted in `receptionist_refusals_total{reason="slow_consumer"}`, after the
  answers to every request the gateway took (a publish it took is answered, never left unknown).
- A subscriber on a slow link closed as a slow consumer reads what was queued before the close
  frame whole, however long past the close timeout that takes while it keeps reading.

An HTTP connection's replies are in test_http_backpressure.py; the queues toward Redis in
test_redis_queue_limits.py.
"""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from conftest import api, json_ok, wait_for
from procstat import rss_bytes
from test_metrics import scrape, value
from wsclient import (
    OP_CLOSE,
    OP_TEXT,
    RawWebSocket,
    assert_changes_frame,
    connect,
    encode_frame,
    new_store,
    patch_model,
    put_model,
    recv_json,
    subscribe,
    unique,
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



PUBLISHES = 40_000           # about 4 MB of answers, past the kernel's buffers and the limit


@pytest.mark.timeout(60)
def test_a_publisher_that_never_reads_is_answered_for_every_publish_taken_then_closed(start_server):
    """A client pipelines publishes and reads nothing: past the limit it is closed with 1008,
    after an answer to every publish the gateway took (invariant 64), and nothing after the last
    answer is published. Before, the publish whose answer found the limit was published and
    never answered, so its client could not tell it from one that was not."""
    server = start_server("--max-queued-bytes", str(QUEUE_LIMIT), "--publish-rate", "0", "--client-message-rate", "0")
    port = server.port
    topic = unique("unread")
    refusals_before = slow_consumer_refusals(port)
    with never_reading_client(port) as rude:
        rude.sock.settimeout(1.0)
        try:
            for index in range(PUBLISHES):
                rude.send(masked({"type": "publish", "topic": topic, "data": {"i": index}, "ref": f"r{index:060d}"}))
        except OSError:
            pass  # the gateway stopped reading
        wait_for(lambda: slow_consumer_refusals(port) > refusals_before, SETTLE_TIMEOUT, "the publisher was never refused")
        frames = expect_slow_consumer_close(rude)
    answers = [json.loads(frame.payload) for frame in frames]
    assert answers and all(answer["type"] == "published" for answer in answers), answers[-3:]
    seqs = [answer["seq"] for answer in answers]
    assert seqs == list(range(1, len(seqs) + 1)), "answers missing or out of order"
    assert [answer["ref"] for answer in answers[-2:]] == [f"r{seq - 1:060d}" for seq in seqs[-2:]]
    after = json_ok(api(port, "GET", f"/api/topics/{topic}/messages?after={seqs[-1]}"))
    assert after["messages"] == [], f"published past the last answer ({seqs[-1]}): {after['messages'][:1]}"
    assert slow_consumer_refusals(port) == refusals_before + 1


SLOW_LINK_RATE = 400_000     # bytes a second the slow subscriber reads
SLOW_MESSAGES, SLOW_PAD = 200, 60_000


class ThrottledSocket:
    """A socket whose reads bring at most SLOW_LINK_RATE bytes a second: a slow link."""

    def __init__(self, sock: socket.socket):
        self._sock = sock

    def recv(self, size: int) -> bytes:
        chunk = self._sock.recv(min(size, 4096))
        time.sleep(len(chunk) / SLOW_LINK_RATE)
        return chunk

    def __getattr__(self, name):
        return getattr(self._sock, name)


@pytest.mark.timeout(90)
def test_a_subscriber_on_a_slow_link_reads_whole_frames_then_the_slow_consumer_close(start_server):
    """A topic subscriber reading at 400 kB/s while 12 MB are published falls past the limit and
    is closed with 1008. What was queued before the close frame takes it longer than the close
    timeout (--linger, 2 s) to read; it keeps reading, so it gets all of it, whole, and then the
    close frame. Before, the close timed out with a frame still queued, and the connection was
    cut in the middle of it, with no close code."""
    server = start_server("--max-queued-bytes", str(QUEUE_LIMIT), "--publish-rate", "0", "--client-message-rate", "0")
    port = server.port
    topic = unique("slowlink")
    with RawWebSocket(port, rcvbuf=8192) as slow:
        slow.open()
        slow.send_json({"type": "subscribe", "topic": topic})
        assert json.loads(slow.read_frame().payload)["type"] == "subscribed"
        slow.sock = ThrottledSocket(slow.sock)
        with connect(port) as publisher:
            for index in range(SLOW_MESSAGES):
                publisher.send(json.dumps({"type": "publish", "topic": topic, "data": {"i": index, "pad": "x" * SLOW_PAD}}))
            for _ in range(SLOW_MESSAGES):
                assert recv_json(publisher)["type"] == "published"
        start = time.monotonic()
        frames, close = slow.read_until_closed(60)
        took = time.monotonic() - start
    print(f"slow link: {len(frames)} messages then the close, read in {took:.1f} s")
    assert close is not None, f"cut after {len(frames)} messages with no close frame, {took:.1f} s"
    assert (close.close_code(), close.close_reason()) == (1008, "slow consumer"), close
    seqs = [json.loads(frame.payload)["seq"] for frame in frames]
    assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) < SLOW_MESSAGES
    assert took > 2.5, "what was queued took less than the close timeout to read: nothing was shown"

# ---- Catch-ups of several stores after one drain ----------------------------------------

SMALL_LIMIT = 16384          # --max-queued-bytes: four catch-ups of 40 KB are past 4 times it
CATCH_UP_BYTES = 40_000
BEHIND_STORES = 4


def test_store_subscriptions_that_fell_behind_each_get_their_catch_up_never_a_close(start_server):
    """One connection follows five stores with a tiny receive window and stops reading; the
    first store's changes fill its socket, and one 40 KB change to each of the others is
    conflated while it is behind. When it reads again, every store's catch-up arrives and each
    store's view is the store's; the connection is not closed. Before, the socket's drain sent
    every catch-up at once, and their sum past four times `--max-queued-bytes` closed the
    connection 1008 `slow consumer`, which store subscribers never are (they conflate)."""
    port = start_server("--max-queued-bytes", str(SMALL_LIMIT)).port
    filler = new_store(port, {})
    behind = [new_store(port, {}) for _ in range(BEHIND_STORES)]
    with RawWebSocket(port, rcvbuf=TINY_RCVBUF) as ws:
        ws.open()
        for store in [filler, *behind]:
            ws.send_json({"type": "subscribe", "store": store})
            assert ws.recv_json()["type"] == "snapshot"
        for n in range(20):
            put_model(port, filler, "big", {"v": "z" * 200_000, "n": n})
        for store in behind:
            put_model(port, store, "m", {"v": "y" * CATCH_UP_BYTES})
        versions = {store: 0 for store in behind}
        deadline = time.monotonic() + 20
        while any(version < 1 for version in versions.values()):
            assert time.monotonic() < deadline, f"catch-ups missing: {versions}"
            opcode, payload = ws.read_message(max(0.1, deadline - time.monotonic()))
            assert opcode != OP_CLOSE, f"closed {payload[:2].hex()} {payload[2:]!r} with catch-ups owed: {versions}"
            frame = json.loads(payload)
            if frame.get("store") in versions and frame["type"] == "changes":
                assert frame["changes"] == [{"model": "m", "path": "", "kind": "created", "value": {"v": "y" * CATCH_UP_BYTES}}]
                versions[frame["store"]] = frame["version"]
        assert versions == {store: 1 for store in behind}
