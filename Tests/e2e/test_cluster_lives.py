"""A Redis server started again without keeping every write (RDB snapshots, no AOF) may come back
with older data that no node read past: a node started after it cannot tell from the numbers. The
first node to connect to the new run names a new life (`RedisLife`), and every topic and store
moves to a new epoch at its next use, so no number is given out twice in one epoch and a client
coming back with the old epoch is reset. A server that keeps every write (AOF, appendfsync always)
keeps its epochs across a restart (test_cluster). Real nodes on one real redis-server.
"""

import signal

from cluster_redis import redis_call, start_node
from conftest import api, json_ok, wait_for
from test_cluster import RedisServer, readiness
from test_cluster_rollback import _resume
from wsclient import unique


def _publish(port: int, topic: str, data) -> int:
    return json_ok(api(port, "POST", f"/api/topics/{topic}/messages", data), 201)["seq"]


def _put(port: int, store: str, model: str) -> int:
    return json_ok(api(port, "PUT", f"/api/stores/{store}/models/{model}", {"name": model}), 201)["version"]


def test_a_node_started_after_redis_came_back_older_numbers_in_a_new_epoch(start_server, tmp_path):
    redis = RedisServer(tmp_path, ("--appendonly", "no"))
    try:
        a = start_node(start_server, redis)
        topic, store = unique("lives"), unique("lives")
        assert [_publish(a.port, topic, {"n": n}) for n in range(1, 6)] == [1, 2, 3, 4, 5]
        json_ok(api(a.port, "POST", "/api/stores", {"name": store}), 201)
        assert [_put(a.port, store, f"m{n}") for n in range(1, 4)] == [1, 2, 3]
        topic_epoch = json_ok(api(a.port, "GET", f"/api/topics/{topic}/messages?after=0"))["epoch"]
        store_epoch = json_ok(api(a.port, "GET", f"/api/stores/{store}"))["epoch"]
        assert redis_call(redis, "SAVE") == "OK"
        # Given out after the snapshot, and lost with the server: 6 to 8, and versions 4 and 5.
        assert [_publish(a.port, topic, {"n": n}) for n in range(6, 9)] == [6, 7, 8]
        assert [_put(a.port, store, f"m{n}") for n in range(4, 6)] == [4, 5]
        redis.proc.send_signal(signal.SIGKILL)
        redis.proc.wait(timeout=10)
        redis.start()

        # A node that never read the topic or the store numbers on from what Redis kept, in new epochs.
        c = start_node(start_server, redis)
        assert _publish(c.port, topic, {"n": "again 6"}) == 6
        page = json_ok(api(c.port, "GET", f"/api/topics/{topic}/messages?after=5"))
        assert page["epoch"] != topic_epoch, page
        assert [(m["seq"], m["data"]) for m in page["messages"]] == [(6, {"n": "again 6"})], page
        answer = _resume(c.port, {"type": "subscribe", "topic": topic, "since": 6, "epoch": topic_epoch})
        assert answer["type"] == "subscribed" and answer["reset"] is True and answer["epoch"] == page["epoch"], answer

        wait_for(lambda: api(c.port, "GET", f"/api/stores/{store}").status == 200, 10, "the new node never read the store")
        assert _put(c.port, store, "m4-again") == 4
        body = json_ok(api(c.port, "GET", f"/api/stores/{store}"))
        assert body["version"] == 4 and body["epoch"] != store_epoch, body
        answer = _resume(c.port, {"type": "subscribe", "store": store, "since": 5, "epoch": store_epoch})
        assert answer["type"] == "snapshot" and answer["reset"] is True and answer["epoch"] == body["epoch"], answer

        # The node that read past the loss meets the others in the new epochs.
        wait_for(lambda: json_ok(api(a.port, "GET", f"/api/topics/{topic}/messages?after=5"))["epoch"] == page["epoch"],
                 10, "the first node stayed in the old epoch")
        wait_for(lambda: json_ok(api(a.port, "GET", f"/api/stores/{store}"))["epoch"] == body["epoch"], 10,
                 "the first node's store stayed in the old epoch")
    finally:
        redis.stop()


def test_a_node_whose_life_check_redis_refused_asks_again_at_its_heartbeat(start_server, tmp_path):
    """A node's first script on a new connection learns Redis's life. Redis may refuse it for a
    while (`-LOADING` as it reads its data back after a restart, `-BUSY`, `-OOM`); here an ACL
    refuses scripts (`-NOPERM`), then allows them. Asked once only, the node stayed down, every
    write `503`, for as long as the connection lived."""
    redis = RedisServer(tmp_path)
    try:
        assert redis_call(redis, "ACL", "SETUSER", "default", "-eval", "-evalsha") == "OK"
        node = start_server("--engine", "redis", "--redis-url", redis.url)
        def refused() -> int:
            return sum(dict(zip(entry[::2], entry[1::2]))["count"] for entry in redis_call(redis, "ACL", "LOG"))

        wait_for(lambda: refused() >= 2, 10, "the node never asked Redis for its life again")
        assert readiness(node.port).get("redis") == "down"
        assert api(node.port, "POST", f"/api/topics/{unique('lives')}/messages", {"n": 1}).status == 503
        assert redis_call(redis, "ACL", "SETUSER", "default", "+@all") == "OK"
        wait_for(lambda: readiness(node.port).get("redis") == "up", 10, "the node stayed down once Redis took its scripts")
        assert _publish(node.port, unique("lives"), {"n": 1}) == 1
    finally:
        redis.stop()
