"""Several Redis servers (`--redis-url` given more than once): the topics are shared between them,
and one server down stops only its own share until it is back. Real nodes on real redis-servers.
"""

import json

from cluster_redis import redis_call
from conftest import api, json_ok, wait_for
from test_cluster import RedisServer, readiness
from test_cluster_resume import received_after_resume
from wsclient import connect, recv_json, unique


# ---- Several Redis servers ------------------------------------------------

def redis_has(redis, key: str) -> bool:
    return redis_call(redis, "EXISTS", key) == 1


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
