"""The redis engine without parked threads: a publish or a store commit through Redis waits on
the loop, not on a job thread, so a slow Redis delays only the replies that need it.

Redis is slowed for real with `DEBUG SLEEP`, which blocks the server for that many seconds.
"""

import json
import re
import signal
import socket
import threading
import time

from cluster_redis import redis, redis_sleep, start_node  # noqa: F401  (`redis` is a fixture)
from conftest import HOST, api, json_ok, wait_for
from test_cluster import readiness
from test_metrics import scrape, value
from wsclient import connect, recv_json, subscribe, unique


class Requests:
    """HTTP requests sent at once, each on a connection and a thread of its own, recorded in the
    order their answers arrive. `requests` are (method, path, body)."""

    def __init__(self, port: int, requests):
        self.answers: list[tuple[int, dict]] = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._one, args=(port, *request), daemon=True) for request in requests]
        for thread in self.threads:
            thread.start()

    def _one(self, port: int, method: str, path: str, body) -> None:
        resp = api(port, method, path, body, timeout=30)
        with self.lock:
            self.answers.append((resp.status, resp.json()))

    def count(self) -> int:
        with self.lock:
            return len(self.answers)


def publishes(port: int, topic: str, count: int) -> Requests:
    return Requests(port, [("POST", f"/api/topics/{topic}/messages", {"n": n}) for n in range(count)])


def commits(port: int, store: str, numbers, prefix: str = "m") -> Requests:
    """`PUT /api/stores/{store}/models/{prefix}{n}` with `{"n": n}` for each number."""
    return Requests(port, [("PUT", f"/api/stores/{store}/models/{prefix}{n}", {"n": n}) for n in numbers])


def requests_seen(port: int) -> int:
    """HTTP requests the node has begun to answer, this scrape included."""
    return int(value(scrape(port), "receptionist_http_requests_total"))


def wait_until_routed(port: int, before: int, count: int, what: str) -> None:
    """Waits until the node has begun to answer `count` requests since `before` (the scrapes
    count themselves)."""
    scrapes = [0]

    def all_routed() -> bool:
        scrapes[0] += 1
        return requests_seen(port) >= before + count + scrapes[0]

    wait_for(all_routed, 10, f"the {what} never reached the node")


def answered_503_while_redis_sleeps(node, redis, method: str, path: str, body) -> None:
    """The write is answered 503 by `--redis-timeout` (0.5 s here) while Redis sleeps, saying its
    outcome is unknown, and the node serves other requests meanwhile."""
    sleeper = redis_sleep(redis, 3)
    try:
        resp = api(node.port, method, path, body, timeout=10)
        assert resp.status == 503, resp.body
        answer = resp.json()
        assert set(answer) == {"error", "detail"} and "in time" in answer["detail"], answer
        # Answered by the deadline, not by Redis: Redis is still asleep.
        assert api(node.port, "GET", "/healthz").status == 200
    finally:
        sleeper.close()


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
        sent = publishes(node.port, topic, 8)
        # All eight are being answered (the scrapes count themselves): each is waiting on Redis.
        wait_until_routed(node.port, before, 8, "publishes")
        # A read that needs the one job thread is answered while Redis still sleeps: no publish
        # holds the thread, and none has been answered yet.
        snapshot = json_ok(api(node.port, "GET", f"/api/stores/{store}", timeout=10))
        assert snapshot["version"] == 0
        assert sent.count() == 0, sent.answers
        assert api(node.port, "GET", "/healthz").status == 200
        assert sent.count() == 0, "Redis woke before the checks ended; the test proves nothing"
    finally:
        sleeper.close()

    # Redis wakes: every reply completes, each with its own number, and the subscriber has all.
    wait_for(lambda: sent.count() == 8, 15, "the publishes were never answered")
    assert all(status == 201 for status, _ in sent.answers), sent.answers
    assert sorted(body["seq"] for _, body in sent.answers) == list(range(1, 9))
    seqs = [recv_json(ws)["seq"] for _ in range(8)]
    assert seqs == list(range(1, 9))
    ws.close()


def test_slow_redis_delays_only_its_commits_and_parks_no_job_thread(start_server, redis):
    # One job thread: were a commit to wait on it for Redis, the read below would wait behind it.
    node = start_node(start_server, redis, "--job-threads", "1")
    store = unique("async")
    json_ok(api(node.port, "POST", "/api/stores", {"name": store}), 201)
    ws = connect(node.port)
    assert subscribe(ws, store=store)["version"] == 0

    before = requests_seen(node.port)
    sleeper = redis_sleep(redis, 3)
    try:
        sent = commits(node.port, store, range(8))
        wait_until_routed(node.port, before, 8, "commits")
        # Each commit was computed on the one job thread and handed to Redis; the thread is free:
        # a read that needs it is answered while Redis still sleeps, and no commit is answered.
        snapshot = json_ok(api(node.port, "GET", f"/api/stores/{store}", timeout=10))
        assert snapshot["version"] == 0 and snapshot["models"] == {}
        assert sent.count() == 0, sent.answers
        assert sent.count() == 0, "Redis woke before the checks ended; the test proves nothing"
    finally:
        sleeper.close()

    # Redis wakes: every commit is answered with a version of its own, 1 to 8, and the subscriber
    # gets every change set in order.
    wait_for(lambda: sent.count() == 8, 15, "the commits were never answered")
    assert all(status == 201 for status, _ in sent.answers), sent.answers
    assert sorted(body["version"] for _, body in sent.answers) == list(range(1, 9))
    frames = [recv_json(ws) for _ in range(8)]
    assert [frame["version"] for frame in frames] == list(range(1, 9))
    by_version = {body["version"]: body["id"] for _, body in sent.answers}
    assert [frame["changes"][0]["model"] for frame in frames] == [by_version[v] for v in range(1, 9)]
    ws.close()


def test_a_commit_redis_does_not_answer_in_time_is_503_and_not_lost(start_server, redis):
    node = start_node(start_server, redis, "--redis-timeout", "0.5")
    store = unique("timeout")
    json_ok(api(node.port, "POST", "/api/stores", {"name": store}), 201)
    ws = connect(node.port)
    assert subscribe(ws, store=store)["version"] == 0
    answered_503_while_redis_sleeps(node, redis, "PUT", f"/api/stores/{store}/models/late", {"late": True})
    # Redis ran the commit when it woke: the outcome was unknown, not a failure.
    frame = recv_json(ws, timeout=10)
    assert frame["type"] == "changes" and frame["version"] == 1, frame
    assert frame["changes"][0]["model"] == "late" and frame["changes"][0]["value"] == {"late": True}, frame
    ws.close()


def test_two_nodes_committing_at_once_get_every_version_exactly_once(start_server, redis):
    a = start_node(start_server, redis)
    b = start_node(start_server, redis)
    store = unique("race")
    json_ok(api(a.port, "POST", "/api/stores", {"name": store}), 201)
    wait_for(lambda: api(b.port, "GET", f"/api/stores/{store}").status == 200, 5, "node B never learned of the store")
    ws = connect(b.port)
    assert subscribe(ws, store=store)["version"] == 0
    # Both nodes take commits to one store at once: they conflict in Redis, and each node computes
    # its commit again once its replica has caught up, with no thread waiting meanwhile.
    on_a = commits(a.port, store, range(20), prefix="a")
    on_b = commits(b.port, store, range(20), prefix="b")
    wait_for(lambda: on_a.count() == 20 and on_b.count() == 20, 30, "the commits were never answered")
    answers = on_a.answers + on_b.answers
    assert all(status == 201 for status, _ in answers), [a for a in answers if a[0] != 201]
    assert sorted(body["version"] for _, body in answers) == list(range(1, 41))
    frames = [recv_json(ws, 10) for _ in range(40)]
    assert [frame["version"] for frame in frames] == list(range(1, 41))
    by_version = {body["version"]: body["id"] for _, body in answers}
    assert [frame["changes"][0]["model"] for frame in frames] == [by_version[v] for v in range(1, 41)]
    snapshot_a = json_ok(api(a.port, "GET", f"/api/stores/{store}"))
    wait_for(lambda: json_ok(api(b.port, "GET", f"/api/stores/{store}")) == snapshot_a, 5, "the replicas differ")
    assert snapshot_a["version"] == 40 and len(snapshot_a["models"]) == 40
    ws.close()


def test_a_publish_redis_does_not_answer_in_time_is_503_and_not_lost(start_server, redis):
    node = start_node(start_server, redis, "--redis-timeout", "0.5")
    topic = unique("timeout")
    ws = connect(node.port)
    assert subscribe(ws, topic=topic, since=0)["type"] == "subscribed"
    answered_503_while_redis_sleeps(node, redis, "POST", f"/api/topics/{topic}/messages", {"late": True})
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


def test_slow_redis_creating_or_deleting_a_store_parks_no_job_thread(start_server, redis):
    # One job thread: were a store's creation or deletion to wait on it for Redis, the read
    # below would wait behind it (before, both did, for up to `--redis-timeout`).
    node = start_node(start_server, redis, "--job-threads", "1")
    kept, doomed, made = unique("async"), unique("async"), unique("async")
    for name in (kept, doomed):
        json_ok(api(node.port, "POST", "/api/stores", {"name": name}), 201)

    before = requests_seen(node.port)
    sleeper = redis_sleep(redis, 3)
    try:
        sent = Requests(node.port, [("POST", "/api/stores", {"name": made}), ("DELETE", f"/api/stores/{doomed}", None)])
        wait_until_routed(node.port, before, 2, "requests")
        snapshot = json_ok(api(node.port, "GET", f"/api/stores/{kept}", timeout=10))
        assert snapshot["version"] == 0
        assert sent.count() == 0, sent.answers
        assert sent.count() == 0, "Redis woke before the checks ended; the test proves nothing"
    finally:
        sleeper.close()

    wait_for(lambda: sent.count() == 2, 15, "the creation and deletion were never answered")
    assert sorted(status for status, _ in sent.answers) == [200, 201], sent.answers
    assert api(node.port, "GET", f"/api/stores/{made}").status == 200
    assert api(node.port, "GET", f"/api/stores/{doomed}").status == 404


def test_a_store_created_and_written_in_one_pipelined_write_takes_the_write(start_server, redis):
    """The next request on a connection waits for the store's creation to be answered, though no
    job thread waits for Redis: a write pipelined after it finds the store."""
    node = start_node(start_server, redis)
    store = unique("pipelined")
    create = json.dumps({"name": store}).encode()
    put = b'{"n":1}'
    wire = (f"POST /api/stores HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(create)}\r\n\r\n").encode() + create
    wire += (f"PUT /api/stores/{store}/models/m HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
             f"Content-Length: {len(put)}\r\n\r\n").encode() + put
    wire += (f"DELETE /api/stores/{store} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
             f"GET /api/stores/{store} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").encode()
    with socket.create_connection((HOST, node.port), timeout=10) as sock:
        sock.sendall(wire)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    statuses = [int(status) for status in re.findall(rb"HTTP/1\.1 (\d{3}) ", received)]
    assert statuses == [201, 201, 200, 404], received


def test_a_redis_that_stops_answering_is_reported_down_and_up_again(start_server, redis):
    """A frozen Redis keeps its connections open: `/readyz` said `up` (and `redis_up` 1) for as
    long as it slept, while every write waited out `--redis-timeout`. A heartbeat unanswered for
    `--heartbeat-timeout` now takes the link down (writes are refused at once, saying why), and
    the next answer brings it back."""
    node = start_node(start_server, redis, "--heartbeat-timeout", "0.6")
    sleeper = redis_sleep(redis, 4)
    try:
        down = wait_for(lambda: (r := readiness(node.port)).get("redis") != "up" and r, 3.0, "a frozen Redis stayed up")
        assert down["redis"] == "down" and "has not answered" in down["detail"], down
        resp = api(node.port, "POST", f"/api/topics/{unique('frozen')}/messages", {"n": 1}, timeout=10)
        assert resp.status == 503 and "has not answered" in resp.json()["detail"], resp.body
    finally:
        sleeper.close()
    wait_for(lambda: readiness(node.port).get("redis") == "up", 10.0, "the link never came back up")
    assert api(node.port, "POST", f"/api/topics/{unique('thawed')}/messages", {"n": 1}).status == 201
    # Logged once each way, as a lost connection is (the first "redis up" is the start's).
    log = node.stderr_text()
    assert log.count("redis down") == 1 and "has not answered" in log and log.count("redis up") == 2, log


def test_a_node_whose_redis_stopped_answering_still_exits_when_drained(start_server, redis):
    """The node's last writes at shutdown (its presence entries) wait for replies a frozen Redis
    never sends: the drained node waited for Redis to wake (90 s in the review) before it exited.
    It now waits at most two seconds (`RedisConnection.closeTimeoutMilliseconds`)."""
    node = start_node(start_server, redis, "--drain-timeout", "1")
    with connect(node.port) as ws:
        assert subscribe(ws, topic=unique("room"), presence=True)["type"] == "subscribed"
    sleeper = redis_sleep(redis, 15)
    try:
        signalled = time.monotonic()
        node.send_signal(signal.SIGTERM)
        assert node.wait_exit(12) == 0, node.stderr_text()
        assert time.monotonic() - signalled < 1 + 2 + 3, "the exit waited for Redis"
    finally:
        sleeper.close()
