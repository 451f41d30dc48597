"""The redis engine without parked threads: a publish through Redis waits on the loop, not on a
job thread, so a slow Redis delays only the replies that need it.

Redis is slowed for real with `DEBUG SLEEP`, which blocks the server for that many seconds.
"""

import socket
import threading

import pytest

from conftest import HOST, api, json_ok, wait_for
from test_cluster import RedisServer, readiness
from test_metrics import scrape, value
from wsclient import connect, recv_json, subscribe, unique


@pytest.fixture
def redis(tmp_path):
    """A redis-server that takes `DEBUG` commands from loopback (off by default since Redis 7)."""
    directory = tmp_path / "redis"
    directory.mkdir()
    server = RedisServer(directory, ("--enable-debug-command", "local"))
    yield server
    server.stop()


def redis_sleep(redis, seconds: float) -> socket.socket:
    """Sends `DEBUG SLEEP` on a connection of its own and returns once Redis is asleep: a PING
    on another connection goes unanswered. Close the returned socket when done."""
    sleeper = socket.create_connection((HOST, redis.port), timeout=30)
    sleeper.sendall(f"DEBUG SLEEP {seconds}\r\n".encode())

    def asleep() -> bool:
        with socket.create_connection((HOST, redis.port), timeout=1) as probe:
            probe.sendall(b"PING\r\n")
            probe.settimeout(0.2)
            try:
                return not probe.recv(64).startswith(b"+PONG")
            except socket.timeout:
                return True

    wait_for(asleep, 5, "Redis did not go to sleep")
    return sleeper


def start_node(start_server, redis, *args):
    node = start_server("--engine", "redis", "--redis-url", redis.url, *args)
    wait_for(lambda: readiness(node.port).get("redis") == "up", 10, "node never reached Redis")
    return node


class Publishes:
    """HTTP publishes, each on a connection of its own and a thread of its own, recorded in the
    order their answers arrive."""

    def __init__(self, port: int, topic: str, count: int):
        self.answers: list[tuple[int, dict]] = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._one, args=(port, topic, n), daemon=True) for n in range(count)]
        for thread in self.threads:
            thread.start()

    def _one(self, port: int, topic: str, n: int) -> None:
        resp = api(port, "POST", f"/api/topics/{topic}/messages", {"n": n}, timeout=30)
        with self.lock:
            self.answers.append((resp.status, resp.json()))

    def count(self) -> int:
        with self.lock:
            return len(self.answers)


def requests_seen(port: int) -> int:
    """HTTP requests the node has begun to answer, this scrape included."""
    return int(value(scrape(port), "receptionist_http_requests_total"))


def test_slow_redis_delays_only_its_replies_and_parks_no_job_thread(start_server, redis):
    # One job thread: were a publish to wait on it, the store read below would wait behind it.
    node = start_node(start_server, redis, "--job-threads", "1")
    store = unique("async")
    topic = unique("async")
    json_ok(api(node.port, "POST", "/api/stores", {"name": store}), 201)
    ws = connect(node.port)
    assert subscribe(ws, topic=topic, since=0)["type"] == "subscribed"

    before = requests_seen(node.port)
    sleeper = redis_sleep(redis, 3)
    try:
        publishes = Publishes(node.port, topic, 8)
        # All eight are being answered (the scrapes count themselves): each is waiting on Redis.
        scrapes = [0]

        def all_routed() -> bool:
            scrapes[0] += 1
            return requests_seen(node.port) >= before + 8 + scrapes[0]

        wait_for(all_routed, 10, "the publishes never reached the node")
        # A read that needs the one job thread is answered while Redis still sleeps: no publish
        # holds the thread, and none has been answered yet.
        snapshot = json_ok(api(node.port, "GET", f"/api/stores/{store}", timeout=10))
        assert snapshot["version"] == 0
        assert publishes.count() == 0, publishes.answers
        assert api(node.port, "GET", "/healthz").status == 200
        assert publishes.count() == 0, "Redis woke before the checks ended; the test proves nothing"
    finally:
        sleeper.close()

    # Redis wakes: every reply completes, each with its own number, and the subscriber has all.
    wait_for(lambda: publishes.count() == 8, 15, "the publishes were never answered")
    assert all(status == 201 for status, _ in publishes.answers), publishes.answers
    assert sorted(body["seq"] for _, body in publishes.answers) == list(range(1, 9))
    seqs = [recv_json(ws)["seq"] for _ in range(8)]
    assert seqs == list(range(1, 9))
    ws.close()


def test_a_publish_redis_does_not_answer_in_time_is_503_and_not_lost(start_server, redis):
    node = start_node(start_server, redis, "--redis-timeout", "0.5")
    topic = unique("timeout")
    ws = connect(node.port)
    assert subscribe(ws, topic=topic, since=0)["type"] == "subscribed"
    sleeper = redis_sleep(redis, 3)
    try:
        resp = api(node.port, "POST", f"/api/topics/{topic}/messages", {"late": True}, timeout=10)
        assert resp.status == 503, resp.body
        body = resp.json()
        assert set(body) == {"error", "detail"} and "in time" in body["detail"], body
        # Answered by the deadline, not by Redis: Redis is still asleep.
        assert api(node.port, "GET", "/healthz").status == 200
    finally:
        sleeper.close()
    # The outcome was unknown, not a failure: Redis ran the publish when it woke, and the
    # subscriber gets it.
    message = recv_json(ws, timeout=10)
    assert message["type"] == "message" and message["seq"] == 1 and message["data"] == {"late": True}, message
    ws.close()


def test_a_cluster_batch_goes_to_redis_in_order_and_answers_every_number(start_server, redis):
    node = start_node(start_server, redis)
    topics = [unique("batch"), unique("batch")]
    clients = []
    for topic in topics:
        ws = connect(node.port)
        assert subscribe(ws, topic=topic, since=0)["type"] == "subscribed"
        clients.append(ws)
    messages = [{"topic": topics[n % 2], "data": {"n": n}} for n in range(200)]
    body = json_ok(api(node.port, "POST", "/api/publish", {"messages": messages}), 201)
    answered = body["messages"]
    assert [m["topic"] for m in answered] == [m["topic"] for m in messages]
    for index, topic in enumerate(topics):
        assert [m["seq"] for m in answered if m["topic"] == topic] == list(range(1, 101))
        received = [recv_json(clients[index]) for _ in range(100)]
        assert [m["seq"] for m in received] == list(range(1, 101))
        assert [m["data"]["n"] for m in received] == list(range(index, 200, 2))
        clients[index].close()
