"""Redis faults under a cluster whose answers must not mislead a client: an `Idempotency-Key`
whose claim Redis took too late, a store Redis lost (`FLUSHALL`) that keeps being written to, and
a store creation Redis answered too late.

A slow Redis is made for real with `CLIENT PAUSE <ms> WRITE`: Redis holds every command that may
write (scripts included) for that long and answers reads meanwhile, so a node started with
`--redis-timeout 1` gives up on a write before Redis runs it, and Redis runs it when the pause
ends. Real nodes on one real redis-server.
"""

import json
import threading

from cluster_redis import redis, redis_call, start_node  # noqa: F401  (`redis` is a fixture)
from conftest import HOST, api, assert_json_error, json_ok, wait_for
from redis_relay import RedisRelay
from test_cluster import readiness
from test_idempotency import REPLAYED, assert_replayed, send_changes, send_message
from wsclient import assert_changes_frame, connect, recv_json, subscribe, unique

REDIS_TIMEOUT = "1"      # --redis-timeout, seconds
PAUSE_MS = "2000"        # how long Redis holds writes: past the time-out, so the node gives up first
RETRY_WAIT = 5.0         # a retry is answered within this long of Redis taking writes again
CREATED_WAIT = 5.0       # every node knows of a store Redis created late within this long
REFUSED_COMMITS = 20     # commits to a store Redis lost, each refused 404


def slow_nodes(start_server, redis):
    """Two nodes that give up on Redis after `REDIS_TIMEOUT` seconds."""
    return (start_node(start_server, redis, "--redis-timeout", REDIS_TIMEOUT),
            start_node(start_server, redis, "--redis-timeout", REDIS_TIMEOUT))


def pause_writes(redis) -> None:
    """Redis holds every write for `PAUSE_MS` from now; reads are answered meanwhile."""
    assert redis_call(redis, "CLIENT", "PAUSE", PAUSE_MS, "WRITE") == "OK"


def wait_writes_resume(redis) -> None:
    """Returns once Redis takes writes again: a write sent now is held until the pause ends, after
    the writes the nodes sent during it."""
    assert redis_call(redis, "SET", "fault-test-probe", "1") == "OK"


def assert_timed_out_having_done_nothing(resp) -> None:
    """A 503 for a request Redis did not answer in time, whose detail does not say its outcome is
    unknown: nothing was done under it, so it may be retried (docs/PROTOCOL.md)."""
    assert_json_error(resp, 503, "service_unavailable")
    detail = resp.json()["detail"]
    assert "in time" in detail and "may or may not" not in detail, detail


def retry_until_answered(send, what: str):
    """Sends the retry until it is answered other than 409 "still being answered" (the first
    attempt's claim not yet given back), at most `RETRY_WAIT` seconds; returns that answer."""
    answers = []

    def answered():
        resp = send()
        answers.append(resp)
        if resp.status != 409:
            return resp
        assert_json_error(resp, 409, "conflict")
        assert "still being answered" in resp.json()["detail"], resp.json()
        return None

    try:
        return wait_for(answered, RETRY_WAIT, f"{what}: every retry was 409", interval=0.1)
    except AssertionError as failure:
        last = answers[-1]
        raise AssertionError(f"{failure}; {len(answers)} retries since Redis took writes again, the last "
                             f"{last.status} {last.body[:200]!r}") from None


# ---- An idempotency key whose claim timed out ------------------------------------------------

def test_a_publish_whose_idempotency_claim_timed_out_is_published_once_on_retry(start_server, redis):
    """A publish with `Idempotency-Key` while Redis holds writes is answered 503 when the claim
    of its key times out: nothing was published. Redis takes the claim when the pause ends and
    the node gives it back, so a retry with the same key and body, on either node, is answered
    201 within seconds, and the topic holds the message once. Before, the late claim stayed in
    Redis as "pending": every retry was 409 "still being answered" for the whole
    `--idempotency-window` (5 minutes), though nothing had been published."""
    a, b = slow_nodes(start_server, redis)
    topic = unique("claim")
    data = {"order": 1}
    with connect(b.port) as ws:
        assert subscribe(ws, topic=topic, since=0)["type"] == "subscribed"
        pause_writes(redis)
        assert_timed_out_having_done_nothing(send_message(a.port, topic, data, key="order-1"))
        wait_writes_resume(redis)

        retry = retry_until_answered(lambda: send_message(b.port, topic, data, key="order-1"),
                                     "the retry of a publish whose claim timed out")
        assert json_ok(retry, 201) == {"topic": topic, "seq": 1}
        assert retry.header(REPLAYED) is None, retry.headers
        # The key now holds the retry's answer, on every node.
        assert_replayed(send_message(a.port, topic, data, key="order-1"), retry)
        after = json_ok(send_message(a.port, topic, "after"), 201)
        assert after == {"topic": topic, "seq": 2}, after
        # The subscriber gets the message once, then the next one.
        for seq, expected in ((1, data), (2, "after")):
            frame = recv_json(ws, 10)
            assert (frame["type"], frame["topic"], frame["seq"], frame["data"]) == ("message", topic, seq, expected), frame
    log = json_ok(api(a.port, "GET", f"/api/topics/{topic}/messages?after=0"))["messages"]
    assert [(m["seq"], m["data"]) for m in log] == [(1, data), (2, "after")], log


def test_a_commit_whose_idempotency_claim_timed_out_is_committed_once_on_retry(start_server, redis):
    """A change set with `Idempotency-Key` while Redis holds writes is answered 503 when the claim
    of its key times out: nothing was committed. Redis takes the claim when the pause ends and the
    node gives it back, so a retry with the same key and body, on the other node, is answered 200
    with version 1 within seconds, and the store holds the change set once. Before, every retry
    was 409 "still being answered" for the whole `--idempotency-window` (5 minutes)."""
    a, b = slow_nodes(start_server, redis)
    store = unique("claim")
    json_ok(api(a.port, "POST", "/api/stores", {"name": store}), 201)
    wait_for(lambda: api(b.port, "GET", f"/api/stores/{store}").status == 200, 5, "node B never learned of the store")
    changes = [{"op": "put", "model": "order", "value": {"n": 1}}]
    with connect(a.port) as ws:
        assert subscribe(ws, store=store)["version"] == 0
        pause_writes(redis)
        assert_timed_out_having_done_nothing(send_changes(a.port, store, changes, key="commit-1"))
        wait_writes_resume(redis)

        retry = retry_until_answered(lambda: send_changes(b.port, store, changes, key="commit-1"),
                                     "the retry of a commit whose claim timed out")
        assert json_ok(retry) == {"store": store, "version": 1, "changes": 1}
        assert retry.header(REPLAYED) is None, retry.headers
        assert_replayed(send_changes(a.port, store, changes, key="commit-1"), retry)
        after = json_ok(send_changes(a.port, store, [{"op": "put", "model": "after", "value": {}}]))
        assert after["version"] == 2, after
        # The subscriber gets version 1 once, the retry's change set, then version 2.
        first = recv_json(ws, 10)
        assert_changes_frame(first, store, 1)
        assert [(c["model"], c["value"]) for c in first["changes"]] == [("order", {"n": 1})], first
        assert_changes_frame(recv_json(ws, 10), store, 2)
    assert json_ok(api(b.port, "GET", f"/api/stores/{store}"))["models"]["order"] == {"n": 1}


# ---- A store Redis lost ---------------------------------------------------------------------

def lost_store(start_server, redis):
    """Two nodes following store `s` at version 3, then `FLUSHALL`: Redis holds no store."""
    a = start_node(start_server, redis)
    b = start_node(start_server, redis)
    store = unique("lost")
    json_ok(api(a.port, "POST", "/api/stores", {"name": store}), 201)
    for n in range(1, 4):
        json_ok(api(a.port, "PUT", f"/api/stores/{store}/models/m{n}", {"n": n}), 201)
    wait_for(lambda: api(b.port, "GET", f"/api/stores/{store}").status == 200
             and api(b.port, "GET", f"/api/stores/{store}").json()["version"] == 3, 5, "node B never reached version 3")
    return a, b, store


def refused_commit(port: int, store: str, n: int) -> None:
    """A commit to the store Redis lost is answered 404: the store is gone."""
    assert_json_error(api(port, "PUT", f"/api/stores/{store}/models/x", {"n": n}), 404, "not_found")


def test_commits_refused_for_a_store_redis_lost_reset_its_subscribers_once(start_server, redis):
    """A subscriber follows store `s` on node A; Redis loses it (`FLUSHALL`) and 20 commits on A
    are each refused 404. The subscriber is told once: one reset snapshot, empty at version 0, in
    a new epoch. When the store is made again and committed to, the next frames are the new
    store's. Before, every refused commit read the store again and made up yet another epoch,
    each pushed to every subscriber as one more reset snapshot: 20 resets for 20 refused commits."""
    a, b, store = lost_store(start_server, redis)
    with connect(a.port) as ws:
        first = subscribe(ws, store=store)
        assert first["type"] == "snapshot" and first["version"] == 3, first
        old_epoch = first["epoch"]

        redis_call(redis, "FLUSHALL")
        for n in range(REFUSED_COMMITS):
            refused_commit(a.port, store, n)
        # The store made again and written: what follows on the WebSocket is the new store.
        json_ok(api(a.port, "POST", "/api/stores", {"name": store}), 201)
        json_ok(api(a.port, "PUT", f"/api/stores/{store}/models/new", {"n": 1}), 201)
        new_epoch = json_ok(api(a.port, "GET", f"/api/stores/{store}"))["epoch"]
        assert new_epoch != old_epoch

        frames = []
        wait_for(lambda: frames.append(recv_json(ws, 10)) or frames[-1]["version"] == 1, 15,
                 "the subscriber never got the new store's version 1")
    snapshots = [f for f in frames if f["type"] == "snapshot"]
    assert snapshots, frames
    lost = snapshots[0]
    assert lost["reset"] is True and lost["version"] == 0 and lost["models"] == {}, lost
    assert lost["epoch"] not in (old_epoch, new_epoch), (lost, old_epoch, new_epoch)
    # Between that reset and the new store, nothing: A may read the new store whole (a reset
    # snapshot in its epoch, at version 0 or 1), but the refused commits reset no one again.
    others = [f for f in snapshots[1:] if f["epoch"] != new_epoch]
    assert not others, (f"{len(others)} more reset snapshots for the lost store after the first "
                        f"({len(set(f['epoch'] for f in others))} epochs more): {others[:3]}")
    assert len(snapshots) <= 2 and all(f["reset"] is True for f in snapshots), snapshots
    last = frames[-1]
    if last["type"] == "changes":
        assert_changes_frame(last, store, 1)
        assert [(c["model"], c["value"]) for c in last["changes"]] == [("new", {"n": 1})], last
    else:
        assert last["epoch"] == new_epoch and last["models"] == {"new": {"n": 1}}, last


def test_every_node_names_the_same_epoch_for_a_store_redis_lost(start_server, redis):
    """Redis loses store `s` (`FLUSHALL`); a commit on each node is refused 404, and each node
    empties its copy into a new epoch. Both name the same one: a client moving between nodes is
    not reset for nothing, and an epoch means one store everywhere. Before, each node made up an
    epoch of its own."""
    a, b, store = lost_store(start_server, redis)
    old_epoch = json_ok(api(a.port, "GET", f"/api/stores/{store}"))["epoch"]
    assert json_ok(api(b.port, "GET", f"/api/stores/{store}"))["epoch"] == old_epoch

    redis_call(redis, "FLUSHALL")
    refused_commit(a.port, store, 1)
    refused_commit(b.port, store, 2)
    on_a = json_ok(api(a.port, "GET", f"/api/stores/{store}"))
    on_b = json_ok(api(b.port, "GET", f"/api/stores/{store}"))
    assert on_a["epoch"] != old_epoch, on_a
    assert (on_a["version"], on_a["models"]) == (0, {}), on_a
    assert on_b == on_a, f"node A names epoch {on_a['epoch']}, node B {on_b['epoch']}: {on_a} {on_b}"


# ---- A store creation Redis answered late -------------------------------------------------------

def test_a_store_creation_redis_answered_late_says_its_outcome_is_unknown(start_server, redis):
    """`POST /api/stores` while Redis holds writes is answered 503 when the time-out passes, with
    a detail saying the store may or may not be created; Redis creates it when the pause ends, so
    every node then has it and a retry is 409 (it exists). Before, the detail read "the cluster's
    store is unavailable: Redis did not answer in time", as if nothing had been done."""
    a, b = slow_nodes(start_server, redis)
    store = unique("late")
    pause_writes(redis)
    resp = api(a.port, "POST", "/api/stores", {"name": store})
    assert_json_error(resp, 503, "service_unavailable")
    assert "may or may not" in resp.json()["detail"], resp.json()
    wait_writes_resume(redis)

    for node in (a, b):
        wait_for(lambda: api(node.port, "GET", f"/api/stores/{store}").status == 200, CREATED_WAIT,
                 "the store Redis created late never showed")
        assert json_ok(api(node.port, "GET", f"/api/stores/{store}"))["version"] == 0
    assert_json_error(api(a.port, "POST", "/api/stores", {"name": store}), 409, "conflict")


# ---- An idempotency key whose claim's answer the lost connection took ----------------------------

def test_a_publish_whose_claim_answer_was_lost_with_the_connection_is_published_once_on_retry(start_server, redis):
    """Redis takes a publish's idempotency claim, and the connection drops before the node reads
    the answer: the publish is answered 503, having done nothing. The node gives the claim back
    once it is connected again, so a retry with the same key and body is answered 201 within
    seconds, and the topic holds the message once. Before, the claim stayed pending and every
    retry was 409 "still being answered" for the whole `--idempotency-window` (5 minutes)."""
    proxy = RedisRelay(redis.port)
    try:
        node = start_server("--engine", "redis", "--redis-url", proxy.url)
        wait_for(lambda: readiness(node.port).get("redis") == "up", 10, "node never reached Redis")
        topic, data = unique("lost-claim"), {"order": 2}
        proxy.hold_replies()
        answer: list = []
        sender = threading.Thread(target=lambda: answer.append(send_message(node.port, topic, data, key="order-2")))
        sender.start()
        wait_for(lambda: redis_call(redis, "KEYS", "rcpt:i:*order-2"), 10, "Redis never took the claim")
        proxy.cut()
        sender.join(15)
        assert_json_error(answer[0], 503, "service_unavailable")
        assert "lost the connection" in answer[0].json()["detail"], answer[0].json()

        wait_for(lambda: readiness(node.port).get("redis") == "up", 10, "the node never reconnected")
        retry = retry_until_answered(lambda: send_message(node.port, topic, data, key="order-2"),
                                     "the retry of a publish whose claim's answer was lost")
        assert json_ok(retry, 201) == {"topic": topic, "seq": 1}
        log = json_ok(api(node.port, "GET", f"/api/topics/{topic}/messages?after=0"))["messages"]
        assert [(m["seq"], m["data"]) for m in log] == [(1, data)], log
    finally:
        proxy.close()
