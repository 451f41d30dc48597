"""Queues toward Redis have limits (docs/DESIGN.md, the queue table):

- The redis engine's commands waiting for Redis's replies are bounded by `--redis-max-pending`:
  past it a publish is answered 503 at once instead of queueing, and the loop stays responsive.
- What a client sends behind a request whose job-thread work has not returned waits in the
  kernel: the gateway keeps one read of it (invariant 58).
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections import Counter

import pytest

from cluster_redis import redis  # noqa: F401  (a fixture: a redis-server that takes DEBUG SLEEP)
from conftest import HOST, api, assert_json_error, http_client_request, http_request, json_ok, wait_for
from test_cluster import readiness
from test_metrics import scrape, value
from wsclient import kernel_buffer_budget, unique

MAX_PENDING = 20
PUBLISHES = 100
STALL_SECONDS = 2
ANSWER_TIMEOUT = 15.0
HEALTH_PROMPT = 0.5


def pending_commands(port: int) -> float:
    return value(scrape(port), "receptionist_redis_pending_commands")


@pytest.mark.timeout(60)
def test_redis_commands_waiting_are_bounded_and_the_loop_stays_responsive(start_server, redis):
    """Redis sleeps for 2 s while 100 publishes arrive at once. Without --redis-max-pending all
    100 EVALs would wait for Redis (none answered 503) and the pending gauge would reach ~100, so
    the "some are 503" and "never above 20" assertions fail."""
    node = start_server("--engine", "redis", "--redis-url", redis.url, "--redis-max-pending", str(MAX_PENDING),
                        "--publish-rate", "0")
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
def test_a_connection_held_behind_a_commit_stops_reading(start_server, redis):
    """A commit whose Idempotency-Key is being claimed in a sleeping Redis holds its connection
    (invariant 58): what the client sends after it waits in the kernel, and the gateway keeps at
    most one read of it. Were the held connection read on, the client could push all 64 MiB."""
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


def test_stores_a_node_had_no_room_to_read_at_start_are_read_at_the_next_heartbeats(start_server, redis):  # noqa: F811
    """A node starting on a cluster reads every store Redis lists, all at once. Past
    `--redis-max-pending` the reads were refused and dropped: those stores were missing on the
    node (`404`) until their next commit, maybe never. Now each is read again at the next
    heartbeats, as room allows. Node A makes 120 stores with one model each; node B starts with
    at most 20 commands waiting."""
    a = start_server("--engine", "redis", "--redis-url", redis.url)
    wait_for(lambda: readiness(a.port).get("redis") == "up", 10, "node A never reached Redis")
    stores = [unique("early") for _ in range(120)]
    for store in stores:
        json_ok(api(a.port, "POST", "/api/stores", {"name": store}), 201)
        json_ok(api(a.port, "PUT", f"/api/stores/{store}/models/m", {"s": store}), 201)
    b = start_server("--engine", "redis", "--redis-url", redis.url, "--redis-max-pending", str(MAX_PENDING))
    missing = list(stores)

    def all_read() -> bool:
        missing[:] = [s for s in missing if api(b.port, "GET", f"/api/stores/{s}").status != 200]
        return not missing

    wait_for(all_read, 30, "some stores were never read on node B")
    for store in stores:
        assert json_ok(api(b.port, "GET", f"/api/stores/{store}"))["models"] == {"m": {"s": store}}, store
