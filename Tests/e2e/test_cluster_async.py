"""The redis engine without parked threads: a publish or a store commit through Redis waits on
the loop, not on a job thread, so a slow Redis delays only the replies that need it.

Redis is slowed for real with `DEBUG SLEEP`, which blocks the server for that many seconds.
"""

import json
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
        scrapes = [0]

        def all_routed() -> bool:
            scrapes[0] += 1
            return requests_seen(node.port) >= before + 8 + scrapes[0]

        wait_for(all_routed, 10, "the publishes never reached the node")
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
        scrapes = [0]

        def all_routed() -> bool:
            scrapes[0] += 1
            return requests_seen(node.port) >= before + 8 + scrapes[0]

        wait_for(all_routed, 10, "the commits never reached the node")
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


# ---- Resume from Redis ----------------------------------------------------

def redis_call(redis, *args: str):
    """One command on a fresh connection; the reply's first line (enough for TIME's first
    element too, read whole below)."""
    with socket.create_connection((HOST, redis.port), timeout=5) as sock:
        parts = [f"*{len(args)}\r\n".encode()] + [f"${len(a.encode())}\r\n{a}\r\n".encode() for a in args]
        sock.sendall(b"".join(parts))
        data = b""
        while not data.endswith(b"\r\n") or data.count(b"\r\n") < (5 if args[0] == "TIME" else 1):
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
        return data


def redis_milliseconds(redis) -> int:
    """Redis's clock, which its stream IDs (and so the age trimming) follow."""
    lines = redis_call(redis, "TIME").split(b"\r\n")
    return int(lines[2]) * 1000 + int(lines[4]) // 1000


def received_after_resume(ws, count: int) -> list[dict]:
    first = recv_json(ws)
    assert first["type"] == "subscribed" and first["resumed"] is True, first
    return [recv_json(ws) for _ in range(count)]


def test_a_node_that_joined_later_resumes_from_the_redis_log_beyond_its_own_history(start_server, redis):
    a = start_node(start_server, redis, "--history", "5")
    topic = unique("resume")
    for n in range(1, 31):
        assert json_ok(api(a.port, "POST", f"/api/topics/{topic}/messages", {"n": n}), 201)["seq"] == n
    # Node B starts after all 30 and keeps 5 of its own; Redis keeps them all.
    b = start_node(start_server, redis, "--history", "5")
    for port in (a.port, b.port):
        ws = connect(port)
        ws.send(json.dumps({"type": "subscribe", "topic": topic, "since": 3}))
        frames = received_after_resume(ws, 27)
        assert [f["type"] for f in frames] == ["message"] * 27, frames[:3]
        assert [f["seq"] for f in frames] == list(range(4, 31))
        assert [f["data"]["n"] for f in frames] == list(range(4, 31))
        # Then live, with nothing doubled.
        assert json_ok(api(a.port, "POST", f"/api/topics/{topic}/messages", {"n": 31 + port % 2}), 201)
        live = recv_json(ws)
        assert live["type"] == "message" and live["seq"] > 30, live
        ws.close()


def test_a_store_resumes_on_a_node_that_joined_later_from_the_redis_log(start_server, redis):
    a = start_node(start_server, redis, "--history", "5")
    store = unique("storelog")
    json_ok(api(a.port, "POST", "/api/stores", {"name": store}), 201)
    # Versions 1 to 30: m1 to m30 created, then m1 updated (31) and m2 deleted (32).
    for n in range(1, 31):
        assert json_ok(api(a.port, "PUT", f"/api/stores/{store}/models/m{n}", {"n": n}), 201)["version"] == n
    assert json_ok(api(a.port, "PUT", f"/api/stores/{store}/models/m1", {"n": 100}))["version"] == 31
    assert json_ok(api(a.port, "DELETE", f"/api/stores/{store}/models/m2"))["version"] == 32
    epoch = json_ok(api(a.port, "GET", f"/api/stores/{store}"))["epoch"]
    # Node B starts after all of them: its replica begins at version 32 with no history at all.
    b = start_node(start_server, redis, "--history", "5")
    wait_for(lambda: json_ok(api(b.port, "GET", f"/api/stores/{store}"))["version"] == 32, 10, "B never read the store")
    for options in ({}, {"old": True}):
        ws = connect(b.port)
        current = json_ok(api(b.port, "GET", f"/api/stores/{store}"))["version"]
        answer = subscribe(ws, store=store, since=2, epoch=epoch, **options)
        assert answer["type"] == "subscribed" and answer["version"] == 2 and answer["epoch"] == epoch, answer
        # Everything after version 2 (the first round's live commit too, in the second round).
        frames = [recv_json(ws) for _ in range(current - 2)]
        assert [f["type"] for f in frames] == ["changes"] * (current - 2), frames[:2]
        assert [f["version"] for f in frames] == list(range(3, current + 1))
        frames = frames[:30]
        # Each change set exactly as it was committed, kinds (and old values, when asked) included.
        changes = [f["changes"][0] for f in frames]
        assert [c["model"] for c in changes] == [f"m{n}" for n in range(3, 31)] + ["m1", "m2"]
        assert [c["kind"] for c in changes] == ["created"] * 28 + ["updated", "deleted"]
        assert changes[-2]["value"] == {"n": 100} and changes[-1]["value"] is None
        if options:
            assert changes[0]["old"] is None and changes[-2]["old"] == {"n": 1} and changes[-1]["old"] == {"n": 2}
        else:
            assert "old" not in changes[0]
        # Then live, with nothing doubled.
        live_model = "live-old" if options else "live"
        version = json_ok(api(a.port, "PUT", f"/api/stores/{store}/models/{live_model}", {"n": 0}), 201)["version"]
        live = recv_json(ws)
        assert live["type"] == "changes" and live["version"] == version, live
        ws.close()


def test_only_what_redis_no_longer_holds_is_a_gap(start_server, redis):
    a = start_node(start_server, redis, "--history", "2", "--redis-history-ttl", "1")
    topic = unique("aged")
    for n in range(1, 11):
        json_ok(api(a.port, "POST", f"/api/topics/{topic}/messages", {"n": n}), 201)
    published = redis_milliseconds(redis)
    # Once Redis's clock is past the age limit, the next publish trims all ten.
    wait_for(lambda: redis_milliseconds(redis) > published + 1100, 5, "Redis's clock did not move")
    json_ok(api(a.port, "POST", f"/api/topics/{topic}/messages", {"n": 11}), 201)
    for n in range(12, 16):
        json_ok(api(a.port, "POST", f"/api/topics/{topic}/messages", {"n": n}), 201)
    b = start_node(start_server, redis, "--history", "2")
    ws = connect(b.port)
    ws.send(json.dumps({"type": "subscribe", "topic": topic, "since": 3}))
    frames = received_after_resume(ws, 6)
    assert frames[0] == {"type": "gap", "topic": topic, "from": 4, "to": 10}, frames[0]
    assert [f["seq"] for f in frames[1:]] == list(range(11, 16))
    ws.close()


# ---- Redis losing its data ------------------------------------------------

class Frames:
    """Every frame of one WebSocket, read on a thread."""

    def __init__(self, ws):
        self.ws = ws
        self.frames: list[dict] = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while True:
                frame = json.loads(self.ws.recv(timeout=60))
                with self.lock:
                    self.frames.append(frame)
        except Exception:
            pass

    def snapshot(self) -> list[dict]:
        with self.lock:
            return list(self.frames)


def test_redis_losing_its_data_is_a_new_epoch_that_every_subscriber_is_told(start_server, redis):
    a = start_node(start_server, redis)
    b = start_node(start_server, redis)
    topic = unique("lost")
    readers = []
    for node in (a, b):
        ws = connect(node.port)
        ws.send(json.dumps({"type": "subscribe", "topic": topic, "since": 0}))
        readers.append(Frames(ws))
    # A publisher that keeps going through the loss, alternating between the nodes.
    answers: list[tuple[int, dict]] = []
    stop = threading.Event()

    def publisher() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            resp = api((a, b)[n % 2].port, "POST", f"/api/topics/{topic}/messages", {"n": n})
            answers.append((resp.status, resp.json()))

    thread = threading.Thread(target=publisher, daemon=True)
    thread.start()
    try:
        wait_for(lambda: sum(1 for s, _ in answers if s == 201) >= 20, 10, "the publisher never got going")
        redis_call(redis, "FLUSHALL")
        # The numbering starts again: wait for twenty more numbered after the loss.

        def restarted() -> list[int]:
            seqs = [body["seq"] for status, body in list(answers) if status == 201]
            drop = next((i for i in range(1, len(seqs)) if seqs[i] < seqs[i - 1]), None)
            return seqs[drop:] if drop is not None else []

        wait_for(lambda: len(restarted()) >= 20, 15, "no publish was numbered after the loss")
    finally:
        stop.set()
        thread.join(timeout=15)
    last = max(restarted())
    for reader in readers:
        wait_for(lambda: _has_new_epoch_message(reader.snapshot(), last), 15,
                 "a subscriber never got the messages after the loss")
        frames = reader.snapshot()
        assert frames[0]["type"] == "subscribed", frames[0]
        first_epoch = frames[0]["epoch"]
        resets = [i for i, f in enumerate(frames) if f["type"] == "reset"]
        assert len(resets) == 1, [f for f in frames if f["type"] != "message"]
        reset = frames[resets[0]]
        assert reset["topic"] == topic and reset["seq"] == 0 and reset["epoch"] != first_epoch, reset
        # Within each epoch the numbers only rise, one by one: never moved back without the reset.
        for part in (frames[1:resets[0]], frames[resets[0] + 1:]):
            seqs = [f["seq"] for f in part if f["type"] == "message"]
            gaps = [f for f in part if f["type"] == "gap"]
            assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), seqs
            assert gaps or seqs == list(range(seqs[0], seqs[0] + len(seqs))), (seqs, gaps)
        assert [f["seq"] for f in frames[resets[0] + 1:] if f["type"] == "message"][0] == 1
        reader.ws.close()
    # A client coming back with the old epoch is told its number means nothing now.
    ws = connect(b.port)
    ws.send(json.dumps({"type": "subscribe", "topic": topic, "since": 5, "epoch": first_epoch}))
    answer = recv_json(ws)
    assert answer["type"] == "subscribed" and answer["reset"] is True and answer["epoch"] == reset["epoch"], answer
    ws.close()


def _has_new_epoch_message(frames: list[dict], last: int) -> bool:
    after_reset = False
    for frame in frames:
        if frame["type"] == "reset":
            after_reset = True
        elif after_reset and frame["type"] == "message" and frame["seq"] >= last:
            return True
    return False


# ---- Several Redis servers ------------------------------------------------

def redis_has(redis, key: str) -> bool:
    return redis_call(redis, "EXISTS", key).startswith(b":1")


def test_two_redis_shards_share_the_topics_and_one_down_stops_only_its_own(start_server, tmp_path):
    shards = []
    for n in range(2):
        directory = tmp_path / f"shard-{n}"
        directory.mkdir()
        shards.append(RedisServer(directory))
    try:
        urls = [arg for shard in shards for arg in ("--redis-url", shard.url)]
        a = start_server("--engine", "redis", *urls)
        b = start_server("--engine", "redis", *urls)
        for node in (a, b):
            wait_for(lambda: readiness(node.port).get("redis") == "up", 10, "a node never reached both servers")
        topics = [unique("shard") for _ in range(16)]
        for topic in topics:
            assert json_ok(api(a.port, "POST", f"/api/topics/{topic}/messages", {"n": 1}), 201)["seq"] == 1
        # Each topic lives on exactly one server, and both servers hold some.
        home = {}
        for topic in topics:
            holders = [i for i, shard in enumerate(shards) if redis_has(shard, f"rcpt:t:{{{topic}}}:seq")]
            assert len(holders) == 1, (topic, holders)
            home[topic] = holders[0]
        assert set(home.values()) == {0, 1}, home
        # Subscribers on the other node, one per topic.
        clients = {}
        for topic in topics:
            ws = connect(b.port)
            ws.send(json.dumps({"type": "subscribe", "topic": topic, "since": 0}))
            frames = received_after_resume(ws, 1)
            assert frames[0]["seq"] == 1, frames
            clients[topic] = ws

        shards[1].stop()
        wait_for(lambda: readiness(a.port).get("redis") == "down", 10, "the node did not notice a server went away")
        assert shards[1].url.split("//")[1].split("/")[0] in readiness(a.port)["detail"], readiness(a.port)
        for topic in topics:
            resp = api(a.port, "POST", f"/api/topics/{topic}/messages", {"n": 2})
            if home[topic] == 1:
                assert resp.status == 503, resp.body
                assert "Redis" in resp.json()["detail"], resp.body
            else:
                assert resp.status == 201 and resp.json()["seq"] == 2, resp.body
                assert recv_json(clients[topic])["seq"] == 2

        shards[1].start()
        for node in (a, b):
            wait_for(lambda: readiness(node.port).get("redis") == "up", 15, "a node did not reconnect to the server")
        for topic in topics:
            expected = 2 if home[topic] == 1 else 3
            assert json_ok(api(a.port, "POST", f"/api/topics/{topic}/messages", {"n": 3}), 201)["seq"] == expected
            message = recv_json(clients[topic])
            assert message["type"] == "message" and message["seq"] == expected and message["data"] == {"n": 3}, message
            clients[topic].close()
    finally:
        for shard in shards:
            shard.stop()


def test_a_store_redis_lost_comes_back_in_a_new_epoch_with_every_subscriber_reset(start_server, redis):
    a = start_node(start_server, redis)
    b = start_node(start_server, redis)
    store = unique("lost")
    json_ok(api(a.port, "POST", "/api/stores", {"name": store}), 201)
    for n in range(1, 4):
        change = {"changes": [{"op": "put", "model": "m", "value": {"n": n}}]}
        assert json_ok(api(a.port, "POST", f"/api/stores/{store}/changes", change))["version"] == n
    wait_for(lambda: api(b.port, "GET", f"/api/stores/{store}").status == 200
             and api(b.port, "GET", f"/api/stores/{store}").json()["version"] == 3, 5, "node B never caught up")
    ws = connect(b.port)
    ws.send(json.dumps({"type": "subscribe", "store": store}))
    first = recv_json(ws)
    assert first["type"] == "snapshot" and first["version"] == 3, first
    old_epoch = first["epoch"]

    redis_call(redis, "FLUSHALL")
    # The store is gone from Redis: a commit says so (and makes the node re-read it), and a
    # backend creates it again; no commit is answered with a version the store never had.
    change = {"changes": [{"op": "put", "model": "m", "value": {"n": 4}}]}
    assert api(a.port, "POST", f"/api/stores/{store}/changes", change).status == 404
    json_ok(api(a.port, "POST", "/api/stores", {"name": store}), 201)
    wait_for(lambda: api(a.port, "POST", f"/api/stores/{store}/changes", change).status == 200, 10,
             "commits never worked again after the store was made anew")
    # The subscriber is told: a reset snapshot in a new epoch, then the new store's changes.
    frames = []
    wait_for(lambda: frames.append(recv_json(ws)) or frames[-1]["type"] == "changes", 10,
             "the subscriber never got the new store's changes")
    resets = [f for f in frames if f["type"] == "snapshot"]
    assert resets and all(f["reset"] is True for f in resets), frames
    assert resets[-1]["epoch"] != old_epoch and resets[-1]["version"] == 0, resets
    assert frames[-1]["version"] == 1 and frames[-1]["changes"][0]["value"] == {"n": 4}, frames[-1]
    ws.close()
    # A client coming back with the old epoch and a version the new store has not reached is
    # reset, not left waiting for a version that will mean something else.
    again = connect(a.port)
    again.send(json.dumps({"type": "subscribe", "store": store, "since": 3, "epoch": old_epoch}))
    answer = recv_json(again)
    assert answer["type"] == "snapshot" and answer["reset"] is True and answer["epoch"] == resets[-1]["epoch"], answer
    again.close()
