"""What the redis engine keeps in Redis is bounded: the heartbeat set `rcpt:nodes` forgets nodes
not heard from within a hundred heartbeat time-outs (`ClusterScripts.heartbeat`), and at most
`--idempotency-keys` idempotency keys are kept, the oldest forgotten first
(`ClusterScripts.idempotencyClaim`). A real node on one real redis-server, whose keys are read
directly.
"""

from cluster_redis import redis, redis_call, redis_milliseconds, start_node  # noqa: F401  (`redis` is a fixture)
from conftest import wait_for
from test_idempotency import assert_replayed, published, send_message
from wsclient import topics_listing, unique

NODES = "rcpt:nodes"                  # ClusterKeys.nodes, in the URL's database (0)
HEARTBEAT_TIMEOUT_MS = 3000           # --heartbeat-timeout's default; a node beats every 1 s
FORGOTTEN_AFTER_MS = 100 * HEARTBEAT_TIMEOUT_MS
IDEMPOTENCY_ENTRIES = "rcpt:i"        # ClusterKeys.idempotencyEntries; each entry is rcpt:i:<scope>:<key>


# ---- Reading Redis -------------------------------------------------------

def heartbeats(redis) -> dict[str, int]:
    """Every node in the heartbeat set, with its last beat (Redis's clock, ms)."""
    flat = redis_call(redis, "ZRANGE", NODES, "0", "-1", "WITHSCORES")
    return {flat[i]: int(float(flat[i + 1])) for i in range(0, len(flat), 2)}


# ---- The heartbeat set ---------------------------------------------------

def test_heartbeat_set_forgets_nodes_silent_for_a_hundred_time_outs(start_server, redis):
    """A node's heartbeat removes from `rcpt:nodes` every node silent for more than a hundred
    time-outs (one a day silent, one just past the hundred) and keeps the rest (one silent for
    ninety time-outs, so taken for dead but not yet forgotten, and one just heard from). Without
    the bound every node ever started would stay in the set: the old entries would remain."""
    start_node(start_server, redis)
    own = wait_for(lambda: list(heartbeats(redis)), 10, "the node never beat its heart into rcpt:nodes")
    assert len(own) == 1, own
    own = own[0]
    # Scored by Redis's clock, as the script scores them; the margins (30 s either side of the
    # hundred time-outs) are far more than the test takes.
    now = redis_milliseconds(redis)
    fakes = {
        "fake-a-day-silent": now - 86_400_000,
        "fake-just-past-a-hundred": now - FORGOTTEN_AFTER_MS - 30_000,
        "fake-ninety-time-outs": now - 90 * HEARTBEAT_TIMEOUT_MS,
        "fake-just-heard": now,
    }
    for member, score in fakes.items():
        assert redis_call(redis, "ZADD", NODES, str(score), member) == 1
    # The node's next beat, which runs after the fakes went in: its own entry's score moves on.
    # (Nothing else rescores it here: no client is present on the node.)
    before = heartbeats(redis)
    assert set(before) == {own, *fakes}, before
    after = wait_for(lambda: (beats := heartbeats(redis)).get(own, 0) > before[own] and beats, 10,
                     "the node's heartbeat never came again")
    assert set(after) == {own, "fake-ninety-time-outs", "fake-just-heard"}, after
    assert (after["fake-ninety-time-outs"], after["fake-just-heard"]) == (
        fakes["fake-ninety-time-outs"], fakes["fake-just-heard"]), after
    assert redis_call(redis, "ZCARD", NODES) == 3


# ---- Idempotency keys ----------------------------------------------------

def idempotency_keys(redis) -> tuple[list[str], list[str]]:
    """The keys named by the bound's sorted set, oldest first, and the keys whose entries exist
    (sorted): the `<key>` ending of each `rcpt:i:<scope>:<key>`."""
    ranked = redis_call(redis, "ZRANGE", IDEMPOTENCY_ENTRIES, "0", "-1")
    stored = redis_call(redis, "KEYS", IDEMPOTENCY_ENTRIES + ":*")
    return [name.rsplit(":", 1)[1] for name in ranked], sorted(name.rsplit(":", 1)[1] for name in stored)


def test_redis_engine_forgets_the_oldest_key_first_beyond_the_key_limit(start_server, redis):
    """The single-node check of test_idempotency.py through the redis engine: with
    `--idempotency-keys 3`, the 4th key makes the claim script delete the oldest (k1), so Redis
    holds three entries and three ranks, k1's retry is published anew (seq 5) while k2 to k4 still
    replay; k1 is then remembered with its new answer and k2 forgotten in its place. Without the
    bound Redis would keep all four, and k1's retry would be replayed as seq 1."""
    node = start_node(start_server, redis, "--idempotency-keys", "3")
    port, topic = node.port, unique("capacity")
    firsts = {}
    for n in (1, 2, 3, 4):
        firsts[n] = send_message(port, topic, {"k": n}, key=f"k{n}")
        assert published(firsts[n], topic) == n
    assert idempotency_keys(redis) == (["k2", "k3", "k4"], ["k2", "k3", "k4"])
    # A replay changes nothing in Redis: no claim is added, so nothing is trimmed.
    for n in (4, 3, 2):
        assert_replayed(send_message(port, topic, {"k": n}, key=f"k{n}"), firsts[n])
    assert idempotency_keys(redis) == (["k2", "k3", "k4"], ["k2", "k3", "k4"])
    again = send_message(port, topic, {"k": 1}, key="k1")
    assert published(again, topic) == 5
    # k1 is remembered anew and k2, now the oldest, forgotten: k3, k4 and k1 are the three kept.
    assert idempotency_keys(redis) == (["k3", "k4", "k1"], ["k1", "k3", "k4"])
    assert_replayed(send_message(port, topic, {"k": 3}, key="k3"), firsts[3])
    assert_replayed(send_message(port, topic, {"k": 1}, key="k1"), again)
    assert topics_listing(port)[topic] == 5
    assert redis_call(redis, "ZCARD", IDEMPOTENCY_ENTRIES) == 3
