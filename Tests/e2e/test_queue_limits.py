"""Every queue has a limit (docs/DESIGN.md, invariant 28 and the Redis command queue):

- What a subscriber is owed (a snapshot, `subscribed`, `gap`) and the replies of our own (an
  error, `unsubscribed`) are not queued past `--max-queued-bytes` of what the kernel refused on
  the connection: a client that asks and asks but never reads is closed with 1008 "slow
  consumer" and counted in `receptionist_refusals_total{reason="slow_consumer"}`.
- The redis engine's commands waiting for Redis's replies are bounded by `--redis-max-pending`:
  past it a publish is answered 503 at once instead of queueing, and the loop stays responsive.
- What a client sends behind a request whose job-thread work has not returned waits in the
  kernel: the gateway keeps one read of it (invariant 58).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import socket
import subprocess
import threading
import time
from collections import Counter

import pytest

from conftest import HOST, api, assert_json_error, http_client_request, http_request, json_ok, wait_for
from procstat import rss_bytes
from test_cluster import RedisServer
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


# ---- Redis commands waiting are bounded ----------------------------------

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
MAX_PENDING = 20
PUBLISHES = 100
# A publish through the cluster holds a job thread while it waits for Redis (TopicAPI:
# `publishThroughCluster` runs as job-thread work). With fewer job threads than
# --redis-max-pending, no more than that many commands could ever wait and the limit would not
# be exercised; the rest would wait in the job threads' queue instead.
JOB_THREADS = 40
STALL_SECONDS = 2
ANSWER_TIMEOUT = 15.0
HEALTH_PROMPT = 0.5


class StallableRedis(RedisServer):
    """A redis-server that accepts DEBUG SLEEP from loopback (off by default since Redis 7)."""

    def __init__(self, directory):
        assert os.access(REDIS_SERVER, os.X_OK), "needs redis-server (scripts/install-deps.sh test)"
        super().__init__(directory, ("--enable-debug-command", "local"))

    def command(self, line: bytes, timeout: float) -> bytes | None:
        try:
            with socket.create_connection((HOST, self.port), timeout=timeout) as sock:
                sock.sendall(line + b"\r\n")
                return sock.recv(64)
        except OSError:
            return None


@pytest.fixture
def stallable_redis(tmp_path):
    directory = tmp_path / "redis"
    directory.mkdir()
    redis = StallableRedis(directory)
    yield redis
    redis.stop()


def pending_commands(port: int) -> float:
    return value(scrape(port), "receptionist_redis_pending_commands")


@pytest.mark.timeout(60)
def test_redis_commands_waiting_are_bounded_and_the_loop_stays_responsive(start_server, stallable_redis):
    """Redis sleeps for 2 s while 100 publishes arrive at once. Without --redis-max-pending all
    100 EVALs would wait for Redis (none answered 503) and the pending gauge would reach ~100, so
    the "some are 503" and "never above 20" assertions fail."""
    redis = stallable_redis
    node = start_server("--engine", "redis", "--redis-url", redis.url, "--redis-max-pending", str(MAX_PENDING),
                        "--job-threads", str(JOB_THREADS), "--publish-rate", "0")
    port = node.port
    wait_for(lambda: json_ok(api(port, "GET", "/readyz")).get("redis") == "up", 10, "the node never reached Redis")
    topic = unique("stall")
    first = json_ok(api(port, "POST", f"/api/topics/{topic}/messages", {"n": -1}), 201)
    assert first == {"topic": topic, "seq": 1}, first
    idle_pending = pending_commands(port)
    assert idle_pending < MAX_PENDING, idle_pending

    # Stall Redis, and see that it is stalled: a PING sent after DEBUG SLEEP goes unanswered.
    # (At the end, the PING's answer must come only when the sleep is over.)
    sleeper = socket.create_connection((HOST, redis.port), timeout=STALL_SECONDS + 10)
    sleeper.sendall(b"DEBUG SLEEP %d\r\n" % STALL_SECONDS)
    stall_sent = time.monotonic()
    probe = socket.create_connection((HOST, redis.port), timeout=STALL_SECONDS + 10)
    probe.sendall(b"PING\r\n")
    assert not select.select([probe], [], [], 0.2)[0], "Redis answered a PING: it is not asleep"

    results: list[tuple] = [()] * PUBLISHES
    samples: list[tuple[float, float]] = []
    health: list[tuple[float, int]] = []
    done = threading.Event()

    def publish(index: int) -> None:
        started = time.monotonic()
        try:
            resp = api(port, "POST", f"/api/topics/{topic}/messages", {"n": index}, timeout=ANSWER_TIMEOUT)
            results[index] = (resp, started, time.monotonic())
        except OSError as error:
            results[index] = (error, started, time.monotonic())

    def watch() -> None:
        while not done.wait(0.005):  # pacing of the samples, not synchronisation
            started = time.monotonic()
            resp = http_client_request(port, "GET", "/healthz", timeout=5)
            health.append((time.monotonic() - started, resp.status))
            samples.append((time.monotonic() - stall_sent, pending_commands(port)))

    publishers = [threading.Thread(target=publish, args=(i,), daemon=True) for i in range(PUBLISHES)]
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    for thread in publishers:
        thread.start()
    for thread in publishers:
        thread.join(ANSWER_TIMEOUT + 5)
    # Redis wakes: the sleep is answered.
    assert sleeper.recv(64) == b"+OK\r\n"
    woke = time.monotonic()
    sleeper.close()
    assert probe.recv(64) == b"+PONG\r\n"
    ponged = time.monotonic()
    probe.close()
    assert ponged - stall_sent >= STALL_SECONDS - 0.2, f"Redis slept only {ponged - stall_sent:.2f}s"
    done.set()
    watcher.join(10)

    hung = [i for i, result in enumerate(results) if not result]
    assert not hung, f"{len(hung)} publishes got no answer within {ANSWER_TIMEOUT}s"
    errors = [(i, r[0]) for i, r in enumerate(results) if not hasattr(r[0], "status")]
    assert not errors, errors[:5]
    statuses = Counter(r[0].status for r in results)
    print(f"statuses {dict(statuses)}; {len(samples)} pending samples, max {max(p for _, p in samples)}; "
          f"healthz max {max(t for t, _ in health):.3f}s; stalled {woke - stall_sent:.2f}s")
    assert set(statuses) <= {201, 503}, statuses
    assert statuses[503] > 0, f"no publish was refused while Redis slept: {dict(statuses)}"
    assert statuses[201] > 0, f"no publish succeeded once Redis woke: {dict(statuses)}"
    for resp, started, answered in (r for r in results if r[0].status == 503):
        assert_json_error(resp, 503, "service_unavailable")
        detail = resp.json()["detail"]
        assert "--redis-max-pending" in detail or "not keeping up" in detail, detail
    for resp, started, answered in (r for r in results if r[0].status == 201):
        # Each waited for Redis: answered after the probe found it asleep, well into the sleep.
        assert answered - stall_sent > STALL_SECONDS / 2, answered - stall_sent
    seqs = sorted(json_ok(r[0], 201)["seq"] for r in results if r[0].status == 201)
    assert seqs == list(range(2, 2 + statuses[201])), seqs
    # A refused publish was not published: the topic has exactly the accepted ones.
    listing = {t["name"]: t["seq"] for t in json_ok(api(port, "GET", "/api/topics"))["topics"]}
    assert listing[topic] == 1 + statuses[201], listing[topic]

    pending = [p for _, p in samples]
    assert samples and max(pending) <= MAX_PENDING, f"pending commands {max(pending)} > {MAX_PENDING}"
    assert MAX_PENDING in pending, f"the stall never showed in the gauge: {pending}"
    assert {status for _, status in health} == {200}, health
    slowest = max(t for t, _ in health)
    assert slowest < HEALTH_PROMPT, f"/healthz took {slowest:.2f}s while Redis slept"

    # Afterwards the queue empties and publishing works again.
    wait_for(lambda: pending_commands(port) <= idle_pending, 10, "pending commands never went back down")
    after = json_ok(api(port, "POST", f"/api/topics/{topic}/messages", {"n": "after"}), 201)
    assert after["seq"] == 2 + statuses[201], after


@pytest.mark.timeout(60)
def test_a_connection_held_behind_a_commit_stops_reading(start_server, stallable_redis):
    """A commit whose Idempotency-Key is being claimed in a sleeping Redis holds its connection
    (invariant 58): what the client sends after it waits in the kernel, and the gateway keeps at
    most one read of it. Were the held connection read on, the client could push all 64 MiB."""
    redis = stallable_redis
    node = start_server("--engine", "redis", "--redis-url", redis.url, "--publish-rate", "0")
    port = node.port
    wait_for(lambda: json_ok(api(port, "GET", "/readyz")).get("redis") == "up", 10, "the node never reached Redis")
    store = unique("held")
    json_ok(api(port, "POST", "/api/stores", {"name": store}), 201)

    sleeper = socket.create_connection((HOST, redis.port), timeout=STALL_SECONDS + 10)
    sleeper.sendall(b"DEBUG SLEEP %d\r\n" % STALL_SECONDS)
    probe = socket.create_connection((HOST, redis.port), timeout=STALL_SECONDS + 10)
    probe.sendall(b"PING\r\n")
    assert not select.select([probe], [], [], 0.2)[0], "Redis answered a PING: it is not asleep"

    body = json.dumps({"changes": [{"op": "put", "model": "m", "value": {"n": 1}}]}).encode()
    held = http_request("POST", f"/api/stores/{store}/changes",
                        {"Content-Type": "application/json", "Idempotency-Key": unique("key")}, body)
    after = http_request("GET", f"/api/stores/{store}", {}, b"") * 4096
    requests = value(scrape(port), "receptionist_http_requests_total")
    with socket.create_connection((HOST, port), timeout=10) as client:
        client.sendall(held)
        # The commit is read alone, and held; what follows arrives while it is.
        wait_for(lambda: value(scrape(port), "receptionist_http_requests_total") >= requests + 2, 5,
                 "the commit was never read")
        client.setblocking(False)
        pushed, deadline = 0, time.monotonic() + 1.0
        while pushed < (64 << 20) and time.monotonic() < deadline:
            try:
                pushed += client.send(after)
            except BlockingIOError:
                select.select([], [client], [], 0.05)
        assert pushed < kernel_buffer_budget() + (64 << 10), f"{pushed} bytes taken while held"
    sleeper.recv(64)
    probe.recv(64)
    assert json_ok(api(port, "GET", f"/api/stores/{store}"))["version"] <= 1
