"""Idempotent publishes: `Idempotency-Key` on `POST /api/topics/{topic}/messages` and
`POST /api/stores/{store}/changes`.

A retry with the same key, target and body within `--idempotency-window` seconds (default 300) is
answered with the first attempt's status and body plus `Idempotent-Replayed: true`, and publishes or
commits nothing; the same key with another body or target is 409. Keys are 1 to 255 visible ASCII
characters, at most `--idempotency-keys` of them are remembered (oldest forgotten first), they are
scoped per API key, and every node of a redis cluster shares them.

"Nothing published" is checked with a real condition: a message or change set sent afterwards
without a key gets the next seq or version, and a subscriber sees every seq or version exactly once.
"""

import json
import time

import pytest

from conftest import (
    RawConnection,
    assert_json_error,
    http_client_request,
    http_request,
    json_ok,
    store_snapshot,
    wait_for,
)
from test_cluster import redis, start_node  # noqa: F401  (`redis` is a fixture)
from wsclient import (
    EPOCH,
    assert_changes_frame,
    assert_recent_micros,
    connect,
    new_store,
    recv_json,
    subscribe,
    topics_listing,
    unique,
)

REPLAYED = "Idempotent-Replayed"
WINDOW_POLL = 0.2        # between retries while waiting for a 1 s window to pass
WINDOW_WAIT = 6.0        # the 1 s window has certainly passed by then
API_KEY_A, API_KEY_B = "key-a", "key-b"


# ---- Requests ----------------------------------------------------------

def post(port: int, path: str, body: bytes, key: str | None = None, api_key: str | None = None):
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Idempotency-Key"] = key
    if api_key is not None:
        headers["Authorization"] = f"Bearer {api_key}"
    return http_client_request(port, "POST", path, headers=headers, body=body)


def message_path(topic: str) -> str:
    return f"/api/topics/{topic}/messages"


def changes_path(store: str) -> str:
    return f"/api/stores/{store}/changes"


def send_message(port: int, topic: str, data, key: str | None = None, api_key: str | None = None):
    return post(port, message_path(topic), json.dumps(data).encode(), key, api_key)


def send_changes(port: int, store: str, changes: list, key: str | None = None, api_key: str | None = None):
    return post(port, changes_path(store), json.dumps({"changes": changes}).encode(), key, api_key)


def first_attempt(resp, status: int) -> dict:
    """A request answered as new: the usual answer, not marked as replayed."""
    body = json_ok(resp, status)
    assert resp.header(REPLAYED) is None, f"a first attempt was marked replayed: {resp.headers}"
    return body


def published(resp, topic: str) -> int:
    body = first_attempt(resp, 201)
    assert set(body) == {"topic", "seq"} and body["topic"] == topic, body
    return body["seq"]


def committed(resp, store: str, count: int) -> int:
    body = first_attempt(resp, 200)
    assert set(body) == {"store", "version", "changes"}, body
    assert (body["store"], body["changes"]) == (store, count), body
    return body["version"]


def assert_replayed(retry, first) -> None:
    """The retry got the first attempt's status and body, marked as replayed."""
    assert retry.header(REPLAYED) == "true", (
        f"retry not marked replayed: {retry.status} {retry.headers} {retry.body[:300]!r}")
    assert retry.status == first.status, (retry.status, retry.body[:300], first.status)
    assert retry.body == first.body, (retry.body, first.body)
    json_ok(retry, first.status)


def expect_messages(ws, topic: str, expected: list[tuple[int, object]], timeout: float = 10.0) -> None:
    """The next frames are exactly these (seq, data) messages, in order."""
    for seq, data in expected:
        frame = recv_json(ws, timeout)
        assert (frame.get("type"), frame.get("topic"), frame.get("seq"), frame.get("data")) == (
            "message", topic, seq, data), f"expected message {seq} {data!r}, got {frame}"
        assert_recent_micros(frame["publishedAt"])


def expect_versions(ws, store: str, versions: list[int], timeout: float = 10.0) -> None:
    for version in versions:
        assert_changes_frame(recv_json(ws, timeout), store, version)


def subscribed_topic(ws, topic: str) -> None:
    assert subscribe(ws, topic=topic) == {"type": "subscribed", "topic": topic, "seq": 0, "epoch": EPOCH, "resumed": False}


# ---- Topics ------------------------------------------------------------

def test_topic_retry_with_the_same_key_replays_the_first_answer_and_publishes_once(server):
    port, topic = server.port, unique("idem")
    with connect(port) as ws:
        subscribed_topic(ws, topic)
        first = send_message(port, topic, {"order": 1}, key="order-1")
        assert published(first, topic) == 1
        # The topic moves on; the retries still get the first answer, seq 1.
        assert published(send_message(port, topic, "between"), topic) == 2
        for _ in range(3):
            assert_replayed(send_message(port, topic, {"order": 1}, key="order-1"), first)
        assert topics_listing(port)[topic] == 2
        assert published(send_message(port, topic, "after"), topic) == 3
        expect_messages(ws, topic, [(1, {"order": 1}), (2, "between"), (3, "after")])


def test_topic_key_with_a_different_body_or_topic_is_409_and_publishes_nothing(server):
    port, topic, other = server.port, unique("idem-conflict"), unique("idem-other")
    store = new_store(port, prefix="idem-conflict")
    with connect(port) as ws:
        subscribed_topic(ws, topic)
        subscribed_topic(ws, other)
        assert published(send_message(port, topic, {"v": 1}, key="conflict-key"), topic) == 1
        assert_json_error(send_message(port, topic, {"v": 2}, key="conflict-key"), 409, "conflict")
        assert_json_error(send_message(port, other, {"v": 1}, key="conflict-key"), 409, "conflict")
        # The same key on a store's change set is another target too.
        assert_json_error(send_changes(port, store, [{"op": "put", "model": "m", "value": {"v": 1}}],
                                       key="conflict-key"), 409, "conflict")
        listing = topics_listing(port)
        assert (listing[topic], listing[other]) == (1, 0), listing
        assert store_snapshot(port, store)["version"] == 0
        assert published(send_message(port, topic, "after"), topic) == 2
        assert published(send_message(port, other, "after"), other) == 1
        expect_messages(ws, topic, [(1, {"v": 1}), (2, "after")])
        expect_messages(ws, other, [(1, "after")])


def test_requests_without_the_header_publish_and_commit_every_time(server):
    port, topic = server.port, unique("no-key")
    store = new_store(port, prefix="no-key")
    changes = [{"op": "put", "model": "m", "value": {"same": True}}]
    with connect(port) as ws:
        subscribed_topic(ws, topic)
        assert subscribe(ws, store=store)["version"] == 0
        for n in (1, 2, 3):
            assert published(send_message(port, topic, {"same": True}), topic) == n
        expect_messages(ws, topic, [(n, {"same": True}) for n in (1, 2, 3)])
        # Each is applied, none replayed: the same value again changes nothing and makes no
        # version, and its answer says so (a replay would be marked, and carry the first's count).
        for n in (1, 2, 3):
            body = first_attempt(send_changes(port, store, changes), 200)
            assert (body["store"], body["version"], body["changes"]) == (store, 1, 1 if n == 1 else 0), body
        expect_versions(ws, store, [1])


# ---- Change sets -------------------------------------------------------

def test_change_set_retry_with_the_same_key_replays_the_first_answer_and_commits_once(server):
    port = server.port
    store = new_store(port, prefix="idem")
    changes = [{"op": "put", "model": "order", "value": {"n": 1}},
               {"op": "put", "model": "counter", "value": {"hits": 1}}]
    with connect(port) as ws:
        assert subscribe(ws, store=store)["version"] == 0
        first = send_changes(port, store, changes, key="commit-1")
        assert committed(first, store, 2) == 1
        assert committed(send_changes(port, store, [{"op": "put", "model": "between", "value": {}}]), store, 1) == 2
        for _ in range(3):
            assert_replayed(send_changes(port, store, changes, key="commit-1"), first)
        assert store_snapshot(port, store)["version"] == 2
        assert committed(send_changes(port, store, [{"op": "put", "model": "after", "value": {}}]), store, 1) == 3
        expect_versions(ws, store, [1, 2, 3])


def test_change_set_key_with_a_different_body_or_store_is_409_and_commits_nothing(server):
    port = server.port
    store, other = new_store(port, prefix="idem-conflict"), new_store(port, prefix="idem-other")
    changes = [{"op": "put", "model": "m", "value": {"v": 1}}]
    with connect(port) as ws:
        assert subscribe(ws, store=store)["version"] == 0
        assert committed(send_changes(port, store, changes, key="cs-conflict"), store, 1) == 1
        changed = [{"op": "put", "model": "m", "value": {"v": 2}}]
        assert_json_error(send_changes(port, store, changed, key="cs-conflict"), 409, "conflict")
        assert_json_error(send_changes(port, other, changes, key="cs-conflict"), 409, "conflict")
        assert (store_snapshot(port, store)["version"], store_snapshot(port, other)["version"]) == (1, 0)
        assert store_snapshot(port, store)["models"] == {"m": {"v": 1}}
        assert committed(send_changes(port, store, [{"op": "delete", "model": "m"}]), store, 1) == 2
        expect_versions(ws, store, [1, 2])


# ---- Key syntax --------------------------------------------------------

VISIBLE = "".join(chr(c) for c in range(0x21, 0x7F))
INVALID_KEYS = {
    "empty": "",
    "256-chars": "k" * 256,
    "inner-space": "a b",
    "inner-tab": "a\tb",
    "non-ascii": "caf\u00e9",
    "delete-char": "a\x7fb",
}


def raw_post(port: int, path: str, body: bytes, key: str):
    """POST with the Idempotency-Key bytes exactly as given (latin-1)."""
    with RawConnection(port) as conn:
        conn.send(http_request("POST", path, [("Content-Type", "application/json"),
                                              ("Idempotency-Key", key), ("Connection", "close")], body))
        return conn.read_response("POST")


@pytest.mark.parametrize("key", list(INVALID_KEYS.values()), ids=list(INVALID_KEYS))
def test_invalid_idempotency_key_is_400_and_publishes_nothing(server, key):
    port, topic = server.port, unique("bad-key")
    store = new_store(port, prefix="bad-key")
    assert_json_error(raw_post(port, message_path(topic), b'{"n":1}', key), 400, "bad_request")
    body = json.dumps({"changes": [{"op": "put", "model": "m", "value": {}}]}).encode()
    assert_json_error(raw_post(port, changes_path(store), body, key), 400, "bad_request")
    assert topic not in topics_listing(port)
    assert store_snapshot(port, store)["version"] == 0


@pytest.mark.parametrize("key", [VISIBLE, (VISIBLE * 3)[:255], "k"], ids=["every-visible-char", "255-chars", "one-char"])
def test_idempotency_keys_of_1_to_255_visible_characters_are_honoured(server, key):
    port, topic = server.port, unique("good-key")
    first = raw_post(port, message_path(topic), b'{"n":1}', key)
    assert published(first, topic) == 1
    assert_replayed(raw_post(port, message_path(topic), b'{"n":1}', key), first)
    assert topics_listing(port)[topic] == 1


# ---- Window and capacity -----------------------------------------------

def test_key_is_forgotten_after_the_idempotency_window(start_server):
    server = start_server("--idempotency-window", "1")
    port, topic = server.port, unique("window")
    with connect(port) as ws:
        subscribed_topic(ws, topic)
        started = time.monotonic()
        first = send_message(port, topic, {"once": "per window"}, key="windowed")
        assert published(first, topic) == 1
        assert_replayed(send_message(port, topic, {"once": "per window"}, key="windowed"), first)
        # Retried until the key is forgotten; each retry before that is a replay of seq 1.
        deadline = started + WINDOW_WAIT
        while True:
            retry = send_message(port, topic, {"once": "per window"}, key="windowed")
            if retry.header(REPLAYED) is None:
                break
            assert_replayed(retry, first)
            assert time.monotonic() < deadline, f"key still remembered {WINDOW_WAIT}s after a 1 s window"
            time.sleep(WINDOW_POLL)
        elapsed = time.monotonic() - started
        assert published(retry, topic) == 2
        assert elapsed >= 0.95, f"the key was forgotten after {elapsed:.2f}s, inside the 1 s window"
        # Remembered again, now with the new answer.
        assert_replayed(send_message(port, topic, {"once": "per window"}, key="windowed"), retry)
        assert published(send_message(port, topic, "after"), topic) == 3
        expect_messages(ws, topic, [(1, {"once": "per window"}), (2, {"once": "per window"}), (3, "after")])


def test_oldest_key_is_forgotten_first_beyond_the_key_limit(start_server):
    server = start_server("--idempotency-keys", "3")
    port, topic = server.port, unique("capacity")
    firsts = {}
    for n in (1, 2, 3, 4):
        firsts[n] = send_message(port, topic, {"k": n}, key=f"k{n}")
        assert published(firsts[n], topic) == n
    # k1, the oldest, was forgotten when k4 came; k4 is remembered.
    assert_replayed(send_message(port, topic, {"k": 4}, key="k4"), firsts[4])
    again = send_message(port, topic, {"k": 1}, key="k1")
    assert published(again, topic) == 5
    # k1 is remembered anew and k2 forgotten: k3, k4 and k1 are the three kept.
    assert_replayed(send_message(port, topic, {"k": 3}, key="k3"), firsts[3])
    assert_replayed(send_message(port, topic, {"k": 1}, key="k1"), again)
    assert topics_listing(port)[topic] == 5


# ---- Scope -------------------------------------------------------------

def test_idempotency_keys_are_scoped_per_api_key(start_server):
    server = start_server("--api-key", API_KEY_A, "--api-key", API_KEY_B)
    port, topic = server.port, unique("scoped")
    store = new_store_with_key(port, API_KEY_A)
    changes = [{"op": "put", "model": "m", "value": {"n": 1}}]
    with connect(port) as ws:
        subscribed_topic(ws, topic)
        under_a = send_message(port, topic, {"n": 1}, key="shared", api_key=API_KEY_A)
        under_b = send_message(port, topic, {"n": 1}, key="shared", api_key=API_KEY_B)
        assert (published(under_a, topic), published(under_b, topic)) == (1, 2)
        assert_replayed(send_message(port, topic, {"n": 1}, key="shared", api_key=API_KEY_A), under_a)
        assert_replayed(send_message(port, topic, {"n": 1}, key="shared", api_key=API_KEY_B), under_b)
        assert topics_listing(port)[topic] == 2
        expect_messages(ws, topic, [(1, {"n": 1}), (2, {"n": 1})])

        # Another body under the same key name: a conflict if keys were not scoped, applied here.
        other = [{"op": "put", "model": "m", "value": {"n": 2}}]
        commit_a = send_changes(port, store, changes, key="shared-cs", api_key=API_KEY_A)
        commit_b = send_changes(port, store, other, key="shared-cs", api_key=API_KEY_B)
        assert (committed(commit_a, store, 1), committed(commit_b, store, 1)) == (1, 2)
        assert_replayed(send_changes(port, store, other, key="shared-cs", api_key=API_KEY_B), commit_b)
        assert store_snapshot(port, store)["version"] == 2


def new_store_with_key(port: int, api_key: str) -> str:
    name = unique("scoped")
    resp = http_client_request(port, "POST", "/api/stores", body=json.dumps({"name": name}).encode(),
                               headers={"Content-Type": "application/json", "Authorization": f"Bearer {api_key}"})
    assert json_ok(resp, 201) == {"name": name, "version": 0}
    return name


def test_without_api_keys_every_client_shares_one_key_scope(server):
    port, topic = server.port, unique("one-scope")
    first = send_message(port, topic, {"n": 1}, key="everyone")
    assert published(first, topic) == 1
    # Another connection, presenting a bearer token the gateway does not use.
    assert_replayed(send_message(port, topic, {"n": 1}, key="everyone", api_key="someone-else"), first)
    assert_replayed(send_message(port, topic, {"n": 1}, key="everyone"), first)
    assert topics_listing(port)[topic] == 1


# ---- Across a cluster --------------------------------------------------

def test_cluster_retry_on_another_node_is_answered_from_the_first_attempt(start_server, redis):
    a = start_node(start_server, redis)
    b = start_node(start_server, redis)
    topic = unique("idem-cluster")
    store = unique("idem-cluster")
    assert json_ok(http_client_request(a.port, "POST", "/api/stores", body=json.dumps({"name": store}).encode(),
                                       headers={"Content-Type": "application/json"}), 201)["version"] == 0
    wait_for(lambda: http_client_request(b.port, "GET", f"/api/stores/{store}").status == 200, 5,
             "node B never learned of the store")
    changes = [{"op": "put", "model": "m", "value": {"n": 1}}]
    with connect(b.port) as ws:
        subscribed_topic(ws, topic)
        assert subscribe(ws, store=store)["version"] == 0

        first = send_message(a.port, topic, {"n": 1}, key="across")
        assert published(first, topic) == 1
        assert_replayed(send_message(b.port, topic, {"n": 1}, key="across"), first)
        assert_json_error(send_message(b.port, topic, {"n": 2}, key="across"), 409, "conflict")
        assert published(send_message(b.port, topic, "after"), topic) == 2
        expect_messages(ws, topic, [(1, {"n": 1}), (2, "after")])

        first_commit = send_changes(a.port, store, changes, key="across-cs")
        assert committed(first_commit, store, 1) == 1
        assert_replayed(send_changes(b.port, store, changes, key="across-cs"), first_commit)
        assert committed(send_changes(b.port, store, [{"op": "delete", "model": "m"}]), store, 1) == 2
        expect_versions(ws, store, [1, 2])
