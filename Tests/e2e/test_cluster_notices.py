"""Who is told of a publish on the redis engine (`ClusterScripts.publish`): each other node, once a
script call and topic, on the channel of its own it subscribes to, with the messages themselves
when its channel is marked for them; never the publishing node, which has its messages from
Redis's answer; and, while a node of an earlier version listens on the cluster's channel alone,
that channel too.

Redis's command statistics (`INFO commandstats`) count the notices published.
"""

import socket

from conftest import HOST, api, json_ok, wait_for
from redis_relay import RedisRelay
from test_cluster import readiness, redis  # noqa: F401  (the fixture)
from test_cluster_batching import redis_command
from wsclient import connect, publish, recv_json, subscribe, unique

CHANNEL = "rcpt:events:0"


def start_node(start_server, redis, *args):  # noqa: F811
    node = start_server("--engine", "redis", "--redis-url", redis.url, "--publish-rate", "0", *args)
    wait_for(lambda: readiness(node.port).get("redis") == "up", 10, "node never reached Redis")
    return node


def command_calls(redis, command: str) -> int:  # noqa: F811
    """Calls of `command` (from scripts too) since the last `CONFIG RESETSTAT`."""
    for line in redis_command(redis, "INFO", "commandstats").decode().splitlines():
        if line.startswith(f"cmdstat_{command}:"):
            return int(line.split("calls=")[1].split(",")[0])
    return 0


# A node checks its notice connection at every heartbeat with a PUBLISH of its own (an echo to
# its channel), which Redis counts with the notices: the tests that count notices beat once in
# 100 s, after their count begins and ends.
QUIET = ("--heartbeat-timeout", "300")


def notices_published(redis) -> int:  # noqa: F811
    return command_calls(redis, "publish")


def listeners(redis, channel: str) -> int:  # noqa: F811
    """`PUBSUB NUMSUB channel`: how many connections listen on it."""
    with socket.create_connection((HOST, redis.port), timeout=5) as sock:
        sock.sendall(f"PUBSUB NUMSUB {channel}\r\n".encode())
        reply = b""
        while reply.count(b"\r\n") < 4:
            chunk = sock.recv(4096)
            assert chunk, "Redis closed the connection"
            reply += chunk
        return int(reply.split(b"\r\n")[3][1:])


def received(ws, topic: str, count: int) -> list[int]:
    seqs = []
    while len(seqs) < count:
        frame = recv_json(ws, timeout=10)
        assert frame["type"] == "message" and frame["topic"] == topic, frame
        seqs.append(frame["seq"])
    return seqs


def test_a_node_alone_is_told_nothing_of_its_own_publishes(start_server, redis):  # noqa: F811
    node = start_node(start_server, redis, *QUIET)
    topic = unique("own")
    ws = connect(node.port)
    assert subscribe(ws, topic=topic)["type"] == "subscribed"
    assert redis_command(redis, "CONFIG", "RESETSTAT") == b"+OK"
    assert [publish(node.port, topic, {"n": n}) for n in range(20)] == list(range(1, 21))
    assert received(ws, topic, 20) == list(range(1, 21))
    assert notices_published(redis) == 0
    # Nor does it list the channels to find none: no more listen on the cluster's than on its own.
    assert command_calls(redis, "pubsub|channels") == 0
    assert command_calls(redis, "pubsub|numsub") == 20
    ws.close()


def test_each_other_node_is_told_once_a_publish_and_the_publisher_not_at_all(start_server, redis):  # noqa: F811
    a, b, c = (start_node(start_server, redis, *QUIET) for _ in range(3))
    topic = unique("others")
    subscribers = []
    for node in (a, b, c):
        ws = connect(node.port)
        assert subscribe(ws, topic=topic)["type"] == "subscribed"
        subscribers.append(ws)
    assert redis_command(redis, "CONFIG", "RESETSTAT") == b"+OK"
    # One at a time: each publish is its own script call.
    assert [publish(a.port, topic, {"n": n}) for n in range(10)] == list(range(1, 11))
    for ws in subscribers:
        assert received(ws, topic, 10) == list(range(1, 11))
    # b and c, once each; not a, and not the cluster's channel, where no earlier node listens.
    assert notices_published(redis) == 20
    assert command_calls(redis, "pubsub|channels") == 10, "other nodes listen: each call lists them"
    for ws in subscribers:
        ws.close()


def test_a_node_of_an_earlier_version_is_told_on_the_clusters_channel(start_server, redis):  # noqa: F811
    node = start_node(start_server, redis, *QUIET)
    topic = unique("earlier")
    # What a node of 0.8.0 subscribes to: the cluster's channel, and no channel of its own.
    earlier = socket.create_connection((HOST, redis.port), timeout=10)
    try:
        earlier.sendall(f"SUBSCRIBE {CHANNEL}\r\n".encode())
        wait_for(lambda: listeners(redis, CHANNEL) == 2, 5, "the earlier node's subscription never took")
        assert [publish(node.port, topic, {"n": n}) for n in range(3)] == [1, 2, 3]
        heard = b""
        while heard.count(f"t:{topic}:".encode()) < 3:
            chunk = earlier.recv(65536)
            assert chunk, "Redis closed the earlier node's connection"
            heard += chunk
        for seq in (1, 2, 3):
            assert f"t:{topic}:{seq}:".encode() in heard, heard
    finally:
        earlier.close()
    # Once it has gone, nobody is told.
    wait_for(lambda: listeners(redis, CHANNEL) == 1, 5, "the earlier node's subscription never ended")
    assert redis_command(redis, "CONFIG", "RESETSTAT") == b"+OK"
    assert publish(node.port, topic, {"n": 3}) == 4
    assert notices_published(redis) == 0


def test_a_notice_carries_its_messages_so_the_other_node_reads_nothing(start_server, redis):  # noqa: F811
    # Each notice to a node's own channel carries the call's messages, numbered: a node that has
    # every message before them delivers them from the notice, and reads the log for none. A node
    # of an earlier version (its channel unmarked) is sent the bare notice, and reads the log.
    a, b = start_node(start_server, redis), start_node(start_server, redis)
    topic = unique("carried")
    ws = connect(b.port)
    assert subscribe(ws, topic=topic)["type"] == "subscribed"
    assert publish(a.port, topic, {"n": 0}) == 1
    assert received(ws, topic, 1) == [1]
    earlier_channel = f"{CHANNEL}:00earlier"
    earlier = socket.create_connection((HOST, redis.port), timeout=10)
    try:
        earlier.sendall(f"SUBSCRIBE {earlier_channel}\r\n".encode())
        wait_for(lambda: listeners(redis, earlier_channel) == 1, 5, "the earlier node's subscription never took")
        assert redis_command(redis, "CONFIG", "RESETSTAT") == b"+OK"
        bodies = [{"n": n, "text": f"a:b:{n}", "pad": "x" * (n * 7)} for n in range(1, 101)]
        assert [publish(a.port, topic, body) for body in bodies] == list(range(2, 102))
        frames = []
        while len(frames) < 100:
            frame = recv_json(ws, timeout=10)
            assert frame["type"] == "message" and frame["topic"] == topic, frame
            frames.append(frame)
        assert [f["seq"] for f in frames] == list(range(2, 102))
        assert [f["data"] for f in frames] == bodies, "a message changed on its way through the notice"
        # A read the subscription's catch-up left owed may land after the reset; none is made for
        # the messages themselves (a node that reads for each notice makes about 100).
        assert command_calls(redis, "xread") <= 2, "the node read the log for messages its notices carried"
        heard = b""
        while heard.count(f"t:{topic}:".encode()) < 100:
            chunk = earlier.recv(65536)
            assert chunk, "Redis closed the earlier node's connection"
            heard += chunk
        assert b"m:" + topic.encode() not in heard, "an unmarked channel was sent a notice it cannot read"
    finally:
        earlier.close()
    ws.close()


def test_a_notice_carries_at_most_64_kib_of_messages(start_server, redis):  # noqa: F811
    # Past 64 KiB of data a notice goes bare, even to a marked channel, and the other node reads
    # the message from the log instead; it arrives all the same, unaltered.
    a, b = start_node(start_server, redis), start_node(start_server, redis)
    topic = unique("big")
    ws = connect(b.port)
    assert subscribe(ws, topic=topic)["type"] == "subscribed"
    marked = f"{CHANNEL}:m:00listener"
    listener = socket.create_connection((HOST, redis.port), timeout=10)
    try:
        listener.sendall(f"SUBSCRIBE {marked}\r\n".encode())
        wait_for(lambda: listeners(redis, marked) == 1, 5, "the listener's subscription never took")
        small, big = {"n": "x" * 100}, {"n": "y" * (64 * 1024 + 1)}
        assert [publish(a.port, topic, body) for body in (small, big)] == [1, 2]
        frames = [recv_json(ws, timeout=10) for _ in range(2)]
        assert [(f["seq"], f["data"]) for f in frames] == [(1, small), (2, big)]
        heard = b""
        while heard.count(f":{topic}:".encode()) < 2:
            chunk = listener.recv(1 << 20)
            assert chunk, "Redis closed the listener's connection"
            heard += chunk
        assert f"m:{topic}:1:".encode() in heard, "the small message was not carried"
        assert f"t:{topic}:2:".encode() in heard, "the big message was carried past the limit"
        assert f"m:{topic}:2:".encode() not in heard
    finally:
        listener.close()
    ws.close()


def test_a_notice_connection_that_carries_nothing_is_made_again(start_server, redis):  # noqa: F811
    """Nothing is written on a node's notice connection, so a flow the network dropped without a
    reset (a NAT's time-out, a host gone) went unnoticed: the node heard no more of other nodes'
    publishes and stayed ready. A relay here holds back everything Redis sends on node A's
    notice connection. A publishes an echo to its own channel at each heartbeat; the echo does
    not come back, so A drops that connection, makes it again, and reads what it missed: its
    subscriber gets node B's messages, in order."""
    relay = RedisRelay(redis.port)
    try:
        a = start_node(start_server, relay)
        b = start_node(start_server, redis)
        topic = unique("echo")
        with connect(a.port) as ws:
            assert subscribe(ws, topic=topic)["type"] == "subscribed"
            assert relay.hold_replies(b"SUBSCRIBE") == 1
            for n in range(1, 4):
                assert json_ok(api(b.port, "POST", f"/api/topics/{topic}/messages", {"n": n}), 201)["seq"] == n
            frames = [recv_json(ws, 15) for _ in range(3)]
            assert [(f["type"], f["seq"], f["data"]) for f in frames] == [("message", n, {"n": n}) for n in range(1, 4)], frames
    finally:
        relay.close()


def test_reads_a_reconnection_had_no_room_for_are_made_at_the_next_heartbeats(start_server, redis):  # noqa: F811
    """Back from an outage, a node reads again every stream it follows, all at once. Past
    `--redis-max-pending` the reads were refused and dropped: those topics heard nothing of what
    was published while the node was away until their next publish, maybe never. Now each is
    read again at the next heartbeats, as room allows. Node A (at most 40 commands waiting)
    follows 150 topics; node B publishes to each while A cannot reach Redis."""
    relay = RedisRelay(redis.port)
    try:
        a = start_server("--engine", "redis", "--redis-url", relay.url, "--redis-max-pending", "40",
                         "--client-message-rate", "0")
        wait_for(lambda: readiness(a.port).get("redis") == "up", 10, "node A never reached Redis")
        b = start_node(start_server, redis)
        topics = [unique("room") for _ in range(150)]
        sockets = [connect(a.port) for _ in range(3)]  # 50 subscriptions each, within 64
        try:
            for n, topic in enumerate(topics):
                answer = subscribe(sockets[n % 3], topic=topic)
                assert answer["type"] == "subscribed", answer
            relay.refusing = True
            relay.cut()
            wait_for(lambda: readiness(a.port).get("redis") == "down", 10, "node A never saw Redis go")
            for topic in topics:
                assert json_ok(api(b.port, "POST", f"/api/topics/{topic}/messages", {"t": topic}), 201)["seq"] == 1
            relay.refusing = False
            heard = {}
            for ws in sockets:
                for _ in range(50):
                    frame = recv_json(ws, 15)
                    assert frame["type"] == "message" and frame["seq"] == 1, frame
                    heard[frame["topic"]] = frame["data"]
            assert heard == {topic: {"t": topic} for topic in topics}
        finally:
            for ws in sockets:
                ws.close()
    finally:
        relay.close()
