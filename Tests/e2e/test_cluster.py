"""The redis engine: two gateway nodes and one real redis-server, all on loopback.

A topic message or a change set committed on one node reaches subscribers on the other, in
order; a client of a node killed mid-commit resumes on the other with nothing missing or doubled;
a Redis restart is survived by both nodes; a commit while Redis is down is answered 503.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import threading

import pytest

from conftest import HOST, api, json_ok, wait_for
from wsclient import EPOCH, commit, connect, publish, recv_json, send_json, subscribe, unique

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


@pytest.fixture(autouse=True, scope="module")
def redis_installed():
    # A missing server fails these tests rather than skipping them: they must run in `make test`.
    assert os.access(REDIS_SERVER, os.X_OK), "needs redis-server (scripts/install-deps.sh test)"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


class RedisServer:
    """A redis-server on a free loopback port, persisting every write (AOF, fsync always), so a
    restart keeps the data as a production deployment would."""

    def __init__(self, directory, extra_args: tuple[str, ...] = ()):
        self.directory = directory
        self.extra_args = list(extra_args)
        self.port = free_port()
        self.proc = None
        self.start()

    def start(self) -> None:
        argv = [REDIS_SERVER, "--port", str(self.port), "--bind", HOST, "--dir", str(self.directory),
                "--appendonly", "yes", "--appendfsync", "always", "--save", "", "--daemonize", "no",
                "--logfile", str(self.directory / "redis.log"), "--loglevel", "verbose", *self.extra_args]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(self.ping, 10, "redis-server did not start")

    def ping(self) -> bool:
        try:
            with socket.create_connection((HOST, self.port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        # Captured, so shown only beside a failure: why Redis closed a connection, if it did.
        log = self.directory / "redis.log"
        if log.exists():
            print(f"--- redis-server on port {self.port}, log tail ---")
            print("\n".join(log.read_text(errors="replace").splitlines()[-40:]))

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}/0"


@pytest.fixture
def redis(tmp_path):
    directory = tmp_path / "redis"
    directory.mkdir()
    server = RedisServer(directory)
    yield server
    server.stop()


def readiness(port: int) -> dict:
    return json_ok(api(port, "GET", "/readyz"))


def redis_up_metric(port: int) -> float:
    """The node's `receptionist_redis_up` gauge, read from /metrics."""
    for line in api(port, "GET", "/metrics").body.decode().splitlines():
        if line.startswith("receptionist_redis_up "):
            return float(line.split()[1])
    raise AssertionError("no receptionist_redis_up in /metrics")


def start_node(start_server, redis, *args):
    node = start_server("--engine", "redis", "--redis-url", redis.url, "--job-threads", "2", *args)
    wait_for(lambda: readiness(node.port).get("redis") == "up", 10, "node never reached Redis")
    return node


class Collector:
    """Reads every frame of one WebSocket on a thread, until told to stop or the socket closes."""

    def __init__(self, ws):
        self.ws = ws
        self.frames: list[dict] = []
        self.closed = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while True:
                self.frames.append(json.loads(self.ws.recv(timeout=30)))
        except Exception:
            self.closed = True

    def versions(self, store: str) -> list[int]:
        return [f["version"] for f in self.frames if f.get("store") == store and f["type"] in ("snapshot", "changes")]


def assert_contiguous(versions: list[int]) -> None:
    assert versions, "no versions"
    assert versions == list(range(versions[0], versions[0] + len(versions))), versions


# ---- Across nodes --------------------------------------------------------

def test_topic_message_and_change_set_reach_the_other_node_in_order(start_server, redis):
    a = start_node(start_server, redis)
    b = start_node(start_server, redis)
    store = unique("cluster")
    assert json_ok(api(a.port, "POST", "/api/stores", {"name": store}), 201) == {"name": store, "version": 0}
    wait_for(lambda: api(b.port, "GET", f"/api/stores/{store}").status == 200, 5, "node B never learned of the store")
    topic = unique("news")
    with connect(b.port) as ws:
        assert subscribe(ws, topic=topic) == {"type": "subscribed", "topic": topic, "seq": 0, "epoch": EPOCH, "resumed": False}
        snapshot = subscribe(ws, store=store)
        assert (snapshot["type"], snapshot["version"], snapshot["models"]) == ("snapshot", 0, {})
        frames = []
        for i in range(1, 6):
            assert publish(a.port, topic, {"n": i}) == i
            assert commit(a.port, store, [{"op": "put", "model": f"m{i}", "value": {"n": i}}]) == i
        while len(frames) < 10:
            frames.append(recv_json(ws, 10))
    messages = [f for f in frames if f["type"] == "message"]
    changes = [f for f in frames if f["type"] == "changes"]
    assert [m["seq"] for m in messages] == [1, 2, 3, 4, 5]
    assert [m["data"] for m in messages] == [{"n": i} for i in range(1, 6)]
    assert [c["version"] for c in changes] == [1, 2, 3, 4, 5]
    assert [c["changes"][0]["model"] for c in changes] == [f"m{i}" for i in range(1, 6)]
    # Each message was published before the change set of the same round was committed.
    for i in range(5):
        assert frames.index(messages[i]) < frames.index(changes[i]), frames
    # Either node serves the same snapshot, and resumes a topic from Redis's history.
    assert json_ok(api(b.port, "GET", f"/api/stores/{store}")) == json_ok(api(a.port, "GET", f"/api/stores/{store}"))
    with connect(a.port) as ws:
        assert subscribe(ws, topic=topic, since=2)["resumed"] is True
        assert [recv_json(ws)["seq"] for _ in range(3)] == [3, 4, 5]


def test_killed_node_clients_resume_on_the_other_with_nothing_missing_or_doubled(start_server, redis):
    a = start_node(start_server, redis)
    b = start_node(start_server, redis)
    store = unique("kill")
    json_ok(api(a.port, "POST", "/api/stores", {"name": store}), 201)
    commit(a.port, store, [{"op": "put", "model": f"tile-{i}", "value": {"color": "#000000"}} for i in range(8)])
    wait_for(lambda: api(b.port, "GET", f"/api/stores/{store}").status == 200, 5, "node B never learned of the store")
    on_a = connect(a.port)
    on_b = connect(b.port)
    assert subscribe(on_a, store=store)["type"] == "snapshot"
    assert subscribe(on_b, store=store)["type"] == "snapshot"
    first = Collector(on_a)
    watcher = Collector(on_b)
    json_ok(api(a.port, "POST", "/api/jobs", {"kind": "animate", "store": store, "rate": 200}), 201)
    wait_for(lambda: len(first.versions(store)) > 50, 10, "the job on A committed too little")
    epoch = api(a.port, "GET", f"/api/stores/{store}").json()["epoch"]
    a.proc.send_signal(signal.SIGKILL)
    a.proc.wait(timeout=5)
    wait_for(lambda: first.closed, 10, "the client of the killed node saw no close")
    seen = first.versions(store)
    with connect(b.port) as resumed:
        # Both nodes name the store's epoch alike, so the version read on A resumes on B.
        answer = subscribe(resumed, store=store, since=seen[-1], epoch=epoch)
        assert answer == {"type": "subscribed", "store": store, "version": seen[-1], "epoch": epoch,
                          "resumed": True}, answer
        # With A gone, nothing commits but this test: a change set committed through B is the
        # log's last, acknowledged once B's replica has applied every version before it.
        final = commit(b.port, store, [{"op": "put", "model": "after-kill", "value": {"n": 1}}])
        assert final > seen[-1]
        rest = []
        while (rest[-1]["version"] if rest else seen[-1]) < final:
            rest.append(recv_json(resumed, 10))
    everything = seen + [f["version"] for f in rest]
    assert_contiguous(everything)
    assert everything[-1] == final
    assert [c["model"] for c in rest[-1]["changes"]] == ["after-kill"], rest[-1]
    wait_for(lambda: watcher.versions(store) and watcher.versions(store)[-1] == final, 10, "B's own client fell behind")
    assert_contiguous(watcher.versions(store))
    on_b.close()


def test_redis_restart_is_survived_and_commits_meanwhile_get_503(start_server, redis):
    a = start_node(start_server, redis)
    b = start_node(start_server, redis)
    store = unique("restart")
    topic = unique("restart")
    json_ok(api(a.port, "POST", "/api/stores", {"name": store}), 201)
    assert commit(a.port, store, [{"op": "put", "model": "m", "value": {"n": 0}}]) == 1
    assert publish(a.port, topic, {"n": 0}) == 1
    wait_for(lambda: api(b.port, "GET", f"/api/stores/{store}").status == 200, 5, "node B never learned of the store")
    clients = []
    for node in (a, b):
        ws = connect(node.port)
        assert subscribe(ws, store=store)["type"] == "snapshot"
        assert subscribe(ws, topic=topic, since=0)["type"] == "subscribed"
        clients.append(Collector(ws))

    redis.stop()
    for node in (a, b):
        wait_for(lambda: readiness(node.port).get("redis") == "down", 10, "node did not notice Redis went away")
    resp = api(a.port, "POST", f"/api/stores/{store}/changes", {"changes": [{"op": "put", "model": "m", "value": {"n": 1}}]})
    assert resp.status == 503, resp.body
    body = resp.json()
    assert set(body) == {"error", "detail"} and "Redis" in body["detail"], body
    assert api(b.port, "POST", f"/api/topics/{topic}/messages", {"n": 1}).status == 503
    # Reads and streams go on from the replicas.
    assert json_ok(api(b.port, "GET", f"/api/stores/{store}"))["version"] == 1
    assert redis_up_metric(a.port) == 0

    redis.start()
    for node in (a, b):
        wait_for(lambda: readiness(node.port).get("redis") == "up", 15, "node did not reconnect to Redis")
    assert redis_up_metric(a.port) == 1
    assert commit(b.port, store, [{"op": "put", "model": "m", "value": {"n": 2}}]) == 2
    assert publish(b.port, topic, {"n": 2}) == 2
    for client in clients:
        wait_for(lambda: client.versions(store)[-1:] == [2], 10, "a client missed the commit after the restart")
        wait_for(lambda: any(f.get("seq") == 2 for f in client.frames if f["type"] == "message"), 10,
                 "a client missed the message after the restart")
        assert_contiguous(client.versions(store))
        seqs = [f["seq"] for f in client.frames if f["type"] == "message"]
        gaps = [f for f in client.frames if f["type"] == "gap"]
        assert seqs == [1, 2] or gaps, client.frames
        client.ws.close()


def test_a_node_reaches_redis_by_its_host_name(start_server, redis):
    """`--redis-url` may name Redis's host, as the container deployment does (`redis://redis`): it
    is looked up off the loop (hiredis's own lookup held every client while the resolver
    answered), IPv4 first, and the node comes up and publishes."""
    node = start_server("--engine", "redis", "--redis-url", f"redis://localhost:{redis.port}/0")
    wait_for(lambda: readiness(node.port).get("redis") == "up", 10, "node never reached Redis by name")
    assert json_ok(api(node.port, "POST", "/api/topics/by-name/messages", {"n": 1}), 201)["seq"] == 1
