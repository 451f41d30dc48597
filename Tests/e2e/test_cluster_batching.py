"""The redis engine batches: the publishes a node takes in one loop iteration go to Redis
pipelined, each server's in script calls of at most 32 messages (`PublishBatcher`: a full batch
leaves at once, the rest at the iteration's end), and still reach every subscriber on every node
exactly once and in each topic's order. Store commits are gathered the same way
(`CommitBatcher`), and each is still applied once, on every node.

Redis's own command statistics (`INFO commandstats`) count the publishes' script calls; its
`MONITOR` shows which stores each commit call carried.
"""

import json
import re
import signal
import socket
import threading
from typing import Callable

from conftest import RawConnection, api, http_request, json_ok, wait_for
from test_cluster import readiness, redis  # noqa: F401  (the fixture)
from wsclient import connect, recv_json, subscribe, unique

CONNECTIONS = 8
PER_CONNECTION = 25


def start_node(start_server, redis):  # noqa: F811
    node = start_server("--engine", "redis", "--redis-url", redis.url, "--publish-rate", "0")
    wait_for(lambda: readiness(node.port).get("redis") == "up", 10, "node never reached Redis")
    return node


def redis_command(redis, *words: str) -> bytes:  # noqa: F811
    """One command on a connection of its own; the whole reply, as bytes."""
    with RawConnection(redis.port) as conn:
        conn.send("".join(f"*{len(words)}\r\n" + "".join(f"${len(w)}\r\n{w}\r\n" for w in words)).encode())
        reply = b""
        while True:
            conn.sock.settimeout(5)
            reply += conn.sock.recv(65536)
            # A bulk string: its length line, then the text and its CRLF.
            head, _, rest = reply.partition(b"\r\n")
            if head.startswith(b"$") and len(rest) >= int(head[1:]) + 2:
                return rest[: int(head[1:])]
            if head.startswith(b"+") or head.startswith(b"-"):
                return head


def script_calls(redis) -> int:  # noqa: F811
    """EVAL and EVALSHA calls since the last `CONFIG RESETSTAT`."""
    calls = 0
    for line in redis_command(redis, "INFO", "commandstats").decode().splitlines():
        if line.startswith(("cmdstat_evalsha:", "cmdstat_eval:")):
            calls += int(line.split("calls=")[1].split(",")[0])
    return calls


def pipelined_publishes(port: int, connection: int, topics: list[str]) -> list[dict]:
    """`PER_CONNECTION` publishes sent in one write on one connection, alternating `topics`;
    returns the answers, in order."""
    requests = []
    for i in range(PER_CONNECTION):
        body = json.dumps({"c": connection, "i": i}).encode()
        requests.append(http_request("POST", f"/api/topics/{topics[i % len(topics)]}/messages",
                                     {"Content-Type": "application/json"}, body))
    with RawConnection(port, timeout=20) as conn:
        conn.send(b"".join(requests))
        return [json_ok(conn.read_response(), 201) for _ in requests]


def on_connections(work: Callable[[int], list[dict]]) -> dict[int, list[dict]]:
    """`work(connection)` for each of `CONNECTIONS`, all at once, each on a thread of its own;
    what each returned, by connection."""
    answers: dict[int, list[dict]] = {}
    errors: list[BaseException] = []

    def run(connection: int) -> None:
        try:
            answers[connection] = work(connection)
        except BaseException as error:  # noqa: BLE001  (reported by the test thread)
            errors.append(error)

    threads = [threading.Thread(target=run, args=(c,)) for c in range(CONNECTIONS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors, errors
    assert len(answers) == CONNECTIONS
    return answers


def test_a_burst_reaches_every_node_once_in_order_with_fewer_script_calls(start_server, redis):  # noqa: F811
    a, b = start_node(start_server, redis), start_node(start_server, redis)
    topics = [unique("batch"), unique("batch")]
    subscribers = []
    for node in (a, b):
        for topic in topics:
            ws = connect(node.port)
            assert subscribe(ws, topic=topic)["type"] == "subscribed"
            subscribers.append((node.port, topic, ws))
    # Counted from here: the burst's calls, and the few a node's first read of a topic or its
    # heartbeat may still add.
    assert redis_command(redis, "CONFIG", "RESETSTAT") == b"+OK"

    answers = on_connections(lambda connection: pipelined_publishes(a.port, connection, topics))
    calls = script_calls(redis)
    total = CONNECTIONS * PER_CONNECTION

    # Each answer names its topic and a number; the numbers of a topic are 1 … its count.
    by_topic: dict[str, list[int]] = {topic: [] for topic in topics}
    for connection, replies in answers.items():
        for i, reply in enumerate(replies):
            assert reply["topic"] == topics[i % len(topics)], reply
            by_topic[reply["topic"]].append(reply["seq"])
    for topic, seqs in by_topic.items():
        assert sorted(seqs) == list(range(1, len(seqs) + 1)), (topic, sorted(seqs))

    # Every subscriber, on both nodes, gets its topic's messages exactly once, in number order,
    # each connection's in the order it sent them.
    for port, topic, ws in subscribers:
        expected = len(by_topic[topic])
        got = []
        while len(got) < expected:
            frame = recv_json(ws, timeout=10)
            assert frame["type"] == "message" and frame["topic"] == topic, frame
            got.append(frame)
        assert [f["seq"] for f in got] == list(range(1, expected + 1)), (port, topic)
        for connection in range(CONNECTIONS):
            sent = [f["data"]["i"] for f in got if f["data"]["c"] == connection]
            assert sent == list(range(topics.index(topic), PER_CONNECTION, 2)), (port, topic, connection)
        ws.close()

    # Far fewer script calls than publishes: each pipelined write's publishes share a call.
    # (Heartbeats and presence are scripts too; they add a few.)
    assert calls < total // 4, f"{calls} script calls for {total} publishes"
    print(f"{calls} script calls for {total} publishes")


STORES = 32


class Monitor:
    """Redis's `MONITOR` on a connection of its own, read on a thread: every command Redis runs
    from now on, each as its list of words."""

    WORD = re.compile(rb'"((?:[^"\\]|\\.)*)"')

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.sock.sendall(b"MONITOR\r\n")
        self.buffer = b""
        while b"\r\n" not in self.buffer:
            self.buffer += self.sock.recv(65536)
        ok, _, self.buffer = self.buffer.partition(b"\r\n")
        assert ok == b"+OK", ok
        self.commands: list[list[bytes]] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._read)
        self.thread.start()

    def _read(self) -> None:
        self.sock.settimeout(0.2)
        while not self.stopping.is_set():
            try:
                chunk = self.sock.recv(1 << 20)
            except socket.timeout:
                continue
            if not chunk:
                return
            self.buffer += chunk
            *lines, self.buffer = self.buffer.split(b"\r\n")
            self.commands += [self.WORD.findall(line) for line in lines]

    def stop(self) -> list[list[bytes]]:
        self.stopping.set()
        self.thread.join(5)
        self.sock.close()
        return self.commands


def commit_calls(commands: list[list[bytes]]) -> list[list[str]]:
    """The commit script's calls (`EVALSHA <sha> <4n> <version, models, log and epoch keys of n
    stores> …`): for each, the stores it commits to, in order."""
    calls = []
    for words in commands:
        if len(words) < 3 or words[0].lower() not in (b"evalsha", b"eval") or not words[2].isdigit():
            continue
        keys = [key.decode() for key in words[3:3 + int(words[2])]]
        if not keys or len(keys) % 4 or not all(key.startswith("rcpt:s:{") for key in keys):
            continue
        if [key.rsplit(":", 1)[1] for key in keys] != ["version", "models", "log", "epoch"] * (len(keys) // 4):
            continue
        calls.append([key[len("rcpt:s:{"):key.index("}")] for key in keys[::4]])
    return calls


def pipelined_commits(port: int, stores: list[str]) -> list[dict]:
    """Two commits to each of `stores` (models `m1`, then `m2`), sent in one write on one
    connection; the answers, in order."""
    requests = []
    for round_ in (1, 2):
        for store in stores:
            body = json.dumps({"changes": [{"op": "put", "model": f"m{round_}", "value": {"store": store, "round": round_}}]})
            requests.append(http_request("POST", f"/api/stores/{store}/changes",
                                         {"Content-Type": "application/json"}, body.encode()))
    with RawConnection(port, timeout=20) as conn:
        conn.send(b"".join(requests))
        return [json_ok(conn.read_response()) for _ in requests]


def test_no_script_call_is_refused_so_none_runs_after_calls_made_later(start_server, redis):  # noqa: F811
    # A fresh Redis knows none of the scripts. Each goes whole the first time on a connection and
    # by digest after, and Redis runs a connection's commands in the order sent: no call is refused
    # NOSCRIPT, to be sent again whole after calls made later, so each connection's publishes are
    # numbered in the order it sent them.
    a = start_node(start_server, redis)
    topic, store = unique("scripts"), unique("scripts")
    json_ok(api(a.port, "POST", "/api/stores", {"name": store}), 201)
    json_ok(api(a.port, "POST", f"/api/stores/{store}/changes", {"changes": [{"op": "put", "model": "m", "value": {"n": 1}}]}))
    answers = on_connections(lambda connection: pipelined_publishes(a.port, connection, [topic]))
    for connection, replies in answers.items():
        seqs = [reply["seq"] for reply in replies]
        assert seqs == sorted(seqs), (connection, seqs)
    assert script_calls(redis) > 0
    errors = redis_command(redis, "INFO", "errorstats").decode()
    assert "NOSCRIPT" not in errors, errors


def test_scripts_redis_loses_while_connected_are_sent_whole_again(start_server, redis):  # noqa: F811
    # `SCRIPT FLUSH` empties Redis's script cache under a connected node: the next calls are
    # refused NOSCRIPT, sent again whole, and answered; nothing is lost or applied twice.
    a = start_node(start_server, redis)
    topic, store = unique("flush"), unique("flush")
    json_ok(api(a.port, "POST", "/api/stores", {"name": store}), 201)
    assert json_ok(api(a.port, "POST", f"/api/topics/{topic}/messages", {"n": 0}), 201)["seq"] == 1
    assert redis_command(redis, "SCRIPT", "FLUSH") == b"+OK"
    replies = pipelined_publishes(a.port, 0, [topic])
    assert [reply["seq"] for reply in replies] == list(range(2, PER_CONNECTION + 2)), replies
    change = {"changes": [{"op": "put", "model": "m", "value": {"n": 1}}]}
    assert json_ok(api(a.port, "POST", f"/api/stores/{store}/changes", change))["version"] == 1
    assert json_ok(api(a.port, "GET", f"/api/stores/{store}"))["models"] == {"m": {"n": 1}}
    errors = redis_command(redis, "INFO", "errorstats").decode()
    assert "errorstat_NOSCRIPT" in errors, f"no call was refused, so none was sent again: {errors}"


def test_a_burst_of_commits_goes_in_fewer_script_calls_each_applied_once(start_server, redis):  # noqa: F811
    a, b = start_node(start_server, redis), start_node(start_server, redis)
    stores = [unique("commits") for _ in range(STORES)]
    for store in stores:
        json_ok(api(a.port, "POST", "/api/stores", {"name": store}), 201)
    # The commit script is in Redis's cache before the burst, so each call is one EVALSHA.
    warm = unique("commits")
    json_ok(api(a.port, "POST", "/api/stores", {"name": warm}), 201)
    json_ok(api(a.port, "POST", f"/api/stores/{warm}/changes", {"changes": [{"op": "put", "model": "m", "value": {"n": 1}}]}))

    monitor = Monitor(redis.port)
    groups = [stores[i::CONNECTIONS] for i in range(CONNECTIONS)]
    answers = on_connections(lambda connection: pipelined_commits(a.port, groups[connection]))
    calls = commit_calls(monitor.stop())

    # A store's two commits are its versions 1 and 2, in the order sent.
    for connection, replies in answers.items():
        group = groups[connection]
        assert [r["store"] for r in replies] == group * 2
        assert [r["version"] for r in replies] == [1] * len(group) + [2] * len(group), replies

    # Both nodes hold both commits of every store.
    for store in stores:
        expected = {f"m{r}": {"store": store, "round": r} for r in (1, 2)}
        assert json_ok(api(a.port, "GET", f"/api/stores/{store}"))["models"] == expected
        wait_for(lambda store=store: json_ok(api(b.port, "GET", f"/api/stores/{store}"))["version"] == 2, 10,
                 f"node B never applied {store}'s commits")
        assert json_ok(api(b.port, "GET", f"/api/stores/{store}"))["models"] == expected

    # Each commit went to Redis once, and the commits one loop iteration took shared a call: a
    # store's second commit waits for its first's answer, so never shares its call.
    sent = [store for call in calls for store in call]
    assert sorted(sent) == sorted(stores * 2), calls
    assert all(len(call) == len(set(call)) for call in calls), calls
    assert len(calls) < len(sent), f"{len(calls)} script calls for {len(sent)} commits"
    print(f"{len(calls)} script calls for {len(sent)} commits: {sorted(len(call) for call in calls)}")

    # What was acknowledged is durable: Redis (syncing every write) killed and started again still
    # holds both versions of every store, as a node started now reads them.
    redis.proc.send_signal(signal.SIGKILL)
    redis.proc.wait(timeout=10)
    redis.start()
    c = start_node(start_server, redis)
    for store in stores:
        # It serves the store from when it hears of it, and has its log read soon after.
        wait_for(lambda store=store: api(c.port, "GET", f"/api/stores/{store}").status == 200
                 and api(c.port, "GET", f"/api/stores/{store}").json()["version"] == 2, 10,
                 f"a new node never read {store}'s commits")
        body = json_ok(api(c.port, "GET", f"/api/stores/{store}"))
        assert (body["version"], body["models"]) == (2, {f"m{r}": {"store": store, "round": r} for r in (1, 2)}), body


def test_a_script_call_redis_fails_is_answered_outcome_unknown(start_server, redis):  # noqa: F811
    """A script that fails part way keeps what it wrote before, so a batch's writes are answered
    "outcome unknown" when Redis fails its call, never "not applied"."""
    node = start_node(start_server, redis)
    store, topic = unique("commits"), unique("batch")
    json_ok(api(node.port, "POST", "/api/stores", {"name": store}), 201)
    # Over its memory limit, Redis fails every write, one inside a script included.
    assert redis_command(redis, "CONFIG", "SET", "maxmemory", "1") == b"+OK"
    try:
        for resp in (api(node.port, "POST", f"/api/stores/{store}/changes",
                         {"changes": [{"op": "put", "model": "m", "value": {"n": 1}}]}),
                     api(node.port, "POST", f"/api/topics/{topic}/messages", {"n": 1})):
            assert resp.status == 503, resp.body
            body = resp.json()
            assert body["error"] == "service_unavailable", body
            assert "OOM" in body["detail"] and "may or may not" in body["detail"], body
    finally:
        assert redis_command(redis, "CONFIG", "SET", "maxmemory", "0") == b"+OK"
    # Once Redis takes writes again, so does the node.
    assert json_ok(api(node.port, "POST", f"/api/topics/{topic}/messages", {"n": 2}), 201)["seq"] >= 1
