"""The redis engine batches: the publishes a node takes in one loop iteration go to Redis
pipelined, each server's in script calls of at most 32 messages (`PublishBatcher`: a full batch
leaves at once, the rest at the iteration's end), and still reach every subscriber on every node
exactly once and in each topic's order.

Redis's own command statistics (`INFO commandstats`) count the script calls.
"""

import json
import threading

from conftest import RawConnection, http_request, json_ok, wait_for
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

    answers: dict[int, list[dict]] = {}
    errors: list[BaseException] = []

    def publisher(connection: int) -> None:
        try:
            answers[connection] = pipelined_publishes(a.port, connection, topics)
        except BaseException as error:  # noqa: BLE001  (reported by the test thread)
            errors.append(error)

    threads = [threading.Thread(target=publisher, args=(c,)) for c in range(CONNECTIONS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors, errors
    assert len(answers) == CONNECTIONS
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
