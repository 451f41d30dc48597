"""Reads of the past over HTTP, and deleting a store.

- `GET /api/stores/{s}?at=N`: the store exactly as it was at version N; N past the current
  version is `400 bad_request`, N older than what is kept `410 {"error":"gone","oldest":M}`, M the
  oldest version that can still be read.
- `GET /api/stores/{s}/changes?after=A&limit=K[&until=B][&models=…][&paths=…]`: the change sets
  after A, each exactly the `changes` frame a WebSocket subscriber (with the same options) got.
- `GET /api/topics/{t}/messages?after=N&limit=K`: the messages after N, each exactly the `message`
  frame a subscriber got; `410` with `oldest` past the history (`--history`).
- `DELETE /api/stores/{s}`: `{"store":s,"deleted":true}`, its subscribers are sent
  `{"type":"unsubscribed","store":s,"reason":"deleted"}`, and a store created again under the
  name starts at version 0 in another epoch.

Every test runs on the memory engine and on the disk engine (`--data-dir`, where `--retain`
bounds the change sets kept as `--history` does in memory).
"""

from __future__ import annotations

import itertools
import json
import time

import pytest

from conftest import api, assert_json_error, json_ok, store_snapshot, wait_for
from test_cluster import redis  # noqa: F401  (a fixture)
# The `engine` (memory, disk and redis) and `port` fixtures are the conditional writes' own.
from test_conditional_writes import ENGINES, Engine, engine, port  # noqa: F401  (fixtures)
from wsclient import (
    EPOCH,
    assert_changes_frame,
    connect,
    recv_json,
    recv_text,
    subscribe,
)

# The engines whose node keeps all it can read (the redis engine reads further back from its
# log in Redis, tested apart).
LOCAL_ENGINES = ["memory", "disk"]
KEPT = 5                  # --history (and --retain) of the tests that read past what is kept
COMMITS_PAST_KEPT = 20
STREAM_TIMEOUT = 15.0     # a run of frames that is already due
_names = itertools.count()


@pytest.fixture(params=LOCAL_ENGINES)
def local_engine(request, start_server, tmp_path) -> Engine:
    return Engine(request.param, start_server, tmp_path)


@pytest.fixture(params=ENGINES)
def deleting_port(request, start_server, tmp_path) -> int:
    redis_server = request.getfixturevalue("redis") if request.param == "redis" else None
    return Engine(request.param, start_server, tmp_path, redis_server).start().port


def keeping(engine: Engine, count: int) -> tuple[str, ...]:
    """The options that keep `count` change sets per store and messages per topic."""
    if engine.name == "disk":
        return ("--history", str(count), "--retain", str(count))
    return ("--history", str(count))


# ---- Helpers ---------------------------------------------------------------------

def fresh_store(port: int) -> str:
    name = f"past-{next(_names)}"
    assert json_ok(api(port, "POST", "/api/stores", {"name": name}), 201) == {"name": name, "version": 0}
    return name


def fresh_topic() -> str:
    return f"past-{next(_names)}"


def ok(resp) -> int:
    assert resp.status in (200, 201), (resp.status, resp.body[:300])
    return resp.json()["version"]


def commit(port: int, store: str, changes: list[dict]) -> int:
    return ok(api(port, "POST", f"/api/stores/{store}/changes", {"changes": changes}))


def model_write(port: int, method: str, store: str, model: str, value=None) -> int:
    args = () if value is None else (value,)
    return ok(api(port, method, f"/api/stores/{store}/models/{model}", *args))


# Mutations of every kind, each one change set: put, patch, set creating objects on its way,
# delete of a model and of a key, change sets of several models.
STEPS = [
    ("PUT", "a", {"color": "#000001", "label": "A", "style": {"border": {"width": 1}}}),
    ("PUT", "b", {"color": "#000002", "tags": ["x"]}),
    ("CHANGES", [{"op": "set", "model": "a", "path": "style.border.width", "value": 2},
                 {"op": "put", "model": "c", "value": {"color": "#000003", "style": {"border": {"width": 0}}}}]),
    ("PATCH", "b", {"color": "#000004", "tags": None, "size": 4}),
    ("CHANGES", [{"op": "put", "model": "d", "value": {"n": 1}}]),
    ("PATCH", "a", {"style": {"border": None, "shadow": "soft"}}),
    ("DELETE", "c", None),
    ("CHANGES", [{"op": "delete", "model": "d"}, {"op": "set", "model": "b", "path": "color", "value": "#000005"},
                 {"op": "put", "model": "e", "value": {"color": "#000006", "text": "snow \u2603"}}]),
    ("PUT", "a", {"label": "A2"}),
    ("CHANGES", [{"op": "patch", "model": "e", "value": {"text": None}}]),
    ("PATCH", "e", {"color": "#000007"}),
    ("CHANGES", [{"op": "put", "model": "c", "value": {"color": "#000008", "deep": {"list": [1, 2.5, None]}}}]),
]


def run_steps(port: int, store: str) -> list[dict]:
    """Applies STEPS; returns the models after each version, index = version (0 = empty)."""
    states = [store_snapshot(port, store)["models"]]
    for step in STEPS:
        if step[0] == "CHANGES":
            version = commit(port, store, step[1])
        else:
            method, model, value = step
            version = model_write(port, method, store, model, value)
        assert version == len(states), (step, version)
        states.append(store_snapshot(port, store)["models"])
    return states


def at(port: int, store: str, version) -> object:
    return api(port, "GET", f"/api/stores/{store}?at={version}")


def read_changes(port: int, store: str, query: str) -> dict:
    body = json_ok(api(port, "GET", f"/api/stores/{store}/changes?{query}"))
    assert set(body) == {"store", "epoch", "changes"}, body
    assert body["store"] == store and body["epoch"] == EPOCH, body
    return body


def read_messages_raw(port: int, topic: str, query: str):
    return api(port, "GET", f"/api/topics/{topic}/messages?{query}")


def read_messages(port: int, topic: str, query: str) -> dict:
    body = json_ok(read_messages_raw(port, topic, query))
    assert set(body) == {"topic", "epoch", "messages"}, body
    assert body["topic"] == topic and body["epoch"] == EPOCH, body
    return body


def assert_gone(resp, oldest: int | None = None) -> int:
    """A 410 naming the oldest readable version (exactly `oldest`, when given); returns it."""
    assert resp.status == 410, f"expected 410, got {resp.status}: {resp.body[:300]!r}"
    assert resp.media_type() == "application/json", resp.header("Content-Type")
    body = resp.json()
    assert set(body) == {"error", "detail", "oldest"}, body
    assert body["error"] == "gone" and isinstance(body["detail"], str) and body["detail"], body
    assert isinstance(body["oldest"], int) and not isinstance(body["oldest"], bool), body
    if oldest is not None:
        assert body["oldest"] == oldest, body
    return body["oldest"]


def oldest_bound(engine: Engine, last: int) -> int | None:
    """The oldest readable number once `last` is committed with KEPT kept: exact in memory; on
    disk, at most that (keeping more than asked is allowed). A redis node reads from its replica's
    history, which keeps `--history` as memory does."""
    return last - KEPT if engine.name in ("memory", "redis") else None


def collect_changes(ws, store: str, through: int, timeout: float = STREAM_TIMEOUT) -> list[dict]:
    """Plain `changes` frames up to version `through`, each checked."""
    deadline = time.monotonic() + timeout
    frames = []
    while not frames or frames[-1]["version"] < through:
        frame = recv_json(ws, max(0.0, deadline - time.monotonic()))
        assert_changes_frame(frame, store)
        frames.append(frame)
    return frames


# ---- The store at a version --------------------------------------------------------

def test_at_each_version_is_the_store_as_it_was(port):
    store = fresh_store(port)
    states = run_steps(port, store)
    epoch = store_snapshot(port, store)["epoch"]
    for version, models in enumerate(states):
        body = json_ok(at(port, store, version))
        assert body == {"store": store, "version": version, "epoch": epoch, "models": models}, version
    # Reading the past changes nothing.
    now = store_snapshot(port, store)
    assert (now["version"], now["models"]) == (len(states) - 1, states[-1])


def test_at_past_the_current_version_or_not_a_number_is_400(port):
    store = fresh_store(port)
    commit(port, store, [{"op": "put", "model": "m", "value": {"n": 1}}])
    for bad in (2, 3, 1000, "x", "-1", "1.5", ""):
        assert_json_error(at(port, store, bad), 400, "bad_request")
    assert json_ok(at(port, store, 1))["models"] == {"m": {"n": 1}}
    assert_json_error(at(port, "no-such-store", 0), 404, "not_found")


def test_at_older_than_kept_is_410_naming_the_oldest_readable(local_engine):
    engine = local_engine
    port = engine.start(*keeping(engine, KEPT)).port
    store = fresh_store(port)
    states = [{}]
    for n in range(1, COMMITS_PAST_KEPT + 1):
        commit(port, store, [{"op": "put", "model": f"m{n % 3}", "value": {"n": n}}])
        states.append(store_snapshot(port, store)["models"])
    oldest = assert_gone(at(port, store, 0), oldest_bound(engine, COMMITS_PAST_KEPT))
    assert 1 <= oldest <= COMMITS_PAST_KEPT - KEPT, oldest
    assert_gone(at(port, store, oldest - 1), oldest)
    for version in range(oldest, COMMITS_PAST_KEPT + 1):
        assert json_ok(at(port, store, version))["models"] == states[version], version


# ---- Change sets after a version -----------------------------------------------------

def test_changes_after_are_the_frames_subscribers_received(port):
    store = fresh_store(port)
    with connect(port) as ws:
        snapshot = subscribe(ws, store=store)
        assert snapshot["version"] == 0
        run_steps(port, store)
        frames = collect_changes(ws, store, len(STEPS))
    assert [f["version"] for f in frames] == list(range(1, len(STEPS) + 1))
    whole = read_changes(port, store, "after=0&limit=1000")
    assert whole["epoch"] == snapshot["epoch"]
    assert whole["changes"] == frames
    for after, limit in ((0, 1), (3, 4), (5, 100), (len(STEPS) - 1, 5)):
        assert read_changes(port, store, f"after={after}&limit={limit}")["changes"] == frames[after:after + limit]
    for after, until in ((0, 3), (2, 9), (4, 4), (6, len(STEPS) + 10)):
        page = read_changes(port, store, f"after={after}&until={until}&limit=1000")["changes"]
        assert page == frames[after:until], (after, until)
    assert read_changes(port, store, f"after={len(STEPS)}&limit=10")["changes"] == []
    # Paging with a small limit walks every change set once, in order.
    paged, after = [], 0
    while after < len(STEPS):
        page = read_changes(port, store, f"after={after}&limit=5")["changes"]
        assert 1 <= len(page) <= 5, page
        paged += page
        after = page[-1]["version"]
    assert paged == frames


FILTERS = [
    ({"models": ["a", "b"]}, "models=a,b"),
    ({"paths": ["color"]}, "paths=color"),
    ({"models": ["a", "b"], "paths": ["color"]}, "models=a,b&paths=color"),
    ({"models": ["a", "b"], "paths": ["color"]}, "models=a&models=b&paths=color"),
    ({"models": ["c", "e"], "paths": ["style.border", "text"]}, "models=c,e&paths=style.border,text"),
]


@pytest.mark.parametrize("options, query", FILTERS, ids=[q for _, q in FILTERS])
def test_filtered_changes_match_a_filtered_subscription(port, options, query):
    store = fresh_store(port)
    with connect(port) as filtered, connect(port) as everything:
        assert subscribe(filtered, store=store, **options)["type"] == "snapshot"
        assert subscribe(everything, store=store)["type"] == "snapshot"
        run_steps(port, store)
        # A change every filter follows, so that its frame closes the run.
        sentinel = commit(port, store, [{"op": "put", "model": "a", "value": {"color": "#ffffff", "text": "t"}},
                                        {"op": "put", "model": "c", "value": {"color": "#ffffff", "text": "t"}}])
        frames = collect_changes(filtered, store, sentinel)
        collect_changes(everything, store, sentinel)
    versions = [f["version"] for f in frames]
    assert versions == sorted(set(versions)) and len(versions) < sentinel, "the filter dropped nothing"
    body = read_changes(port, store, f"after=0&limit=1000&{query}")
    assert body["changes"] == frames
    # A read starting part-way gives the same frames from there on.
    middle = versions[len(versions) // 2]
    assert read_changes(port, store, f"after={middle}&limit=1000&{query}")["changes"] == [
        f for f in frames if f["version"] > middle]


def test_changes_after_older_than_kept_is_410_naming_the_oldest(local_engine):
    engine = local_engine
    port = engine.start(*keeping(engine, KEPT)).port
    store = fresh_store(port)
    with connect(port) as ws:
        subscribe(ws, store=store)
        for n in range(1, COMMITS_PAST_KEPT + 1):
            commit(port, store, [{"op": "patch", "model": "m", "value": {f"k{n % 4}": n}} if n > 1 else
                                 {"op": "put", "model": "m", "value": {"k1": 1}}])
        frames = collect_changes(ws, store, COMMITS_PAST_KEPT)
    oldest = assert_gone(api(port, "GET", f"/api/stores/{store}/changes?after=0&limit=10"),
                         oldest_bound(engine, COMMITS_PAST_KEPT))
    assert 1 <= oldest <= COMMITS_PAST_KEPT - KEPT, oldest
    assert_gone(api(port, "GET", f"/api/stores/{store}/changes?after={oldest - 1}&limit=10"), oldest)
    assert read_changes(port, store, f"after={oldest}&limit=1000")["changes"] == frames[oldest:]


def test_changes_need_a_numeric_after(port):
    store = fresh_store(port)
    commit(port, store, [{"op": "put", "model": "m", "value": {"n": 1}}])
    for query in ("", "limit=5", "after=x", "after=-1", "after=0&limit=x"):
        assert_json_error(api(port, "GET", f"/api/stores/{store}/changes?{query}"), 400, "bad_request")
    assert_json_error(api(port, "GET", "/api/stores/no-such-store/changes?after=0"), 404, "not_found")


# ---- Topic messages after a number --------------------------------------------------

MESSAGE_BODIES = [
    b'{"headline":"hello","n":1}',
    b'{ "z" : 1.10 , "a" : [ 9007199254740993 , -0.0 , 1e400 ] }',
    b'"plain text with snow \\u2603 and \\"quotes\\""',
    b"42",
    b"null",
    b"[1,{\"two\":2},[3]]",
    b"{}",
    b"true",
]


def test_messages_after_are_the_frames_subscribers_received(port):
    topic = fresh_topic()
    with connect(port) as ws:
        subscribed = subscribe(ws, topic=topic)
        assert subscribed["type"] == "subscribed" and subscribed["seq"] == 0, subscribed
        for seq, body in enumerate(MESSAGE_BODIES, start=1):
            resp = api(port, "POST", f"/api/topics/{topic}/messages", body=body)
            assert json_ok(resp, resp.status) == {"topic": topic, "seq": seq}
        texts = [recv_text(ws, STREAM_TIMEOUT) for _ in MESSAGE_BODIES]
    frames = [json.loads(text) for text in texts]
    assert [f["seq"] for f in frames] == list(range(1, len(MESSAGE_BODIES) + 1))
    resp = read_messages_raw(port, topic, "after=0&limit=1000")
    body = read_messages(port, topic, "after=0&limit=1000")
    assert body["epoch"] == subscribed["epoch"]
    assert body["messages"] == frames
    # Exactly the frames: each subscriber's text is in the answer as sent, in order, so a
    # number's digits and a message's member order survive too.
    position = 0
    for text in texts:
        found = resp.body.find(text.encode(), position)
        assert found >= 0, f"frame {text!r} is not in {resp.body[:600]!r}"
        position = found + len(text)
    for after, limit in ((0, 1), (2, 3), (5, 100), (len(texts) - 1, 1)):
        assert read_messages(port, topic, f"after={after}&limit={limit}")["messages"] == frames[after:after + limit]
    assert read_messages(port, topic, f"after={len(texts)}&limit=10")["messages"] == []


def test_messages_after_older_than_history_is_410_naming_the_oldest(local_engine):
    engine = local_engine
    port = engine.start(*keeping(engine, KEPT)).port
    topic = fresh_topic()
    with connect(port) as ws:
        assert subscribe(ws, topic=topic)["seq"] == 0
        for n in range(1, COMMITS_PAST_KEPT + 1):
            resp = api(port, "POST", f"/api/topics/{topic}/messages", {"n": n})
            assert json_ok(resp, resp.status)["seq"] == n
        frames = [recv_json(ws, STREAM_TIMEOUT) for _ in range(COMMITS_PAST_KEPT)]
    resp = read_messages_raw(port, topic, "after=0&limit=10")
    oldest = assert_gone(resp, oldest_bound(engine, COMMITS_PAST_KEPT))
    assert 1 <= oldest <= COMMITS_PAST_KEPT - KEPT, oldest
    assert_gone(read_messages_raw(port, topic, f"after={oldest - 1}&limit=10"), oldest)
    assert read_messages(port, topic, f"after={oldest}&limit=1000")["messages"] == frames[oldest:]


def test_redis_reads_past_the_replica_history_from_the_log(start_server, tmp_path, redis):
    """A node keeps `--history` change sets and messages; what it no longer holds is read from
    the log in Redis (`--redis-history`), so every version and message reads as it was."""
    port = Engine("redis", start_server, tmp_path, redis).start("--history", str(KEPT)).port
    store, topic = fresh_store(port), fresh_topic()
    states = [{}]
    with connect(port) as ws, connect(port) as news:
        subscribe(ws, store=store)
        assert subscribe(news, topic=topic)["seq"] == 0
        for n in range(1, COMMITS_PAST_KEPT + 1):
            commit(port, store, [{"op": "put", "model": f"m{n % 3}", "value": {"n": n}}])
            states.append(store_snapshot(port, store)["models"])
            resp = api(port, "POST", f"/api/topics/{topic}/messages", {"n": n})
            assert json_ok(resp, resp.status)["seq"] == n
        frames = collect_changes(ws, store, COMMITS_PAST_KEPT)
        messages = [recv_json(news, STREAM_TIMEOUT) for _ in range(COMMITS_PAST_KEPT)]
    for version in range(0, COMMITS_PAST_KEPT + 1):
        assert json_ok(at(port, store, version))["models"] == states[version], version
    assert read_changes(port, store, "after=0&limit=1000")["changes"] == frames
    assert read_changes(port, store, "after=3&limit=4")["changes"] == frames[3:7]
    assert read_messages(port, topic, "after=0&limit=1000")["messages"] == messages
    assert read_messages(port, topic, "after=2&limit=3")["messages"] == messages[2:5]


# ---- Deleting a store ---------------------------------------------------------------

def test_a_store_deleted_on_one_node_is_gone_from_every_node(start_server, tmp_path, redis):
    """The deletion goes through Redis: another node's subscribers are told, its replica goes,
    and the store made again (on that other node) is a new one in a new epoch everywhere."""
    engine = Engine("redis", start_server, tmp_path, redis)
    a, b = engine.start().port, engine.start().port
    store = fresh_store(a)
    for n in range(1, 4):
        commit(a, store, [{"op": "put", "model": f"m{n}", "value": {"n": n}}])
    wait_for(lambda: api(b, "GET", f"/api/stores/{store}").status == 200
             and store_snapshot(b, store)["version"] == 3, 10, "node B never caught up")
    old = store_snapshot(b, store)
    with connect(b) as ws:
        assert subscribe(ws, store=store)["version"] == 3
        assert json_ok(api(a, "DELETE", f"/api/stores/{store}")) == {"store": store, "deleted": True}
        assert recv_json(ws, STREAM_TIMEOUT) == {"type": "unsubscribed", "store": store, "reason": "deleted"}
        for node in (a, b):
            assert_json_error(api(node, "GET", f"/api/stores/{store}"), 404, "not_found")
            assert_json_error(api(node, "DELETE", f"/api/stores/{store}"), 404, "not_found")
            assert store not in {s["name"] for s in json_ok(api(node, "GET", "/api/stores"))["stores"]}

        assert json_ok(api(b, "POST", "/api/stores", {"name": store}), 201) == {"name": store, "version": 0}
        commit(b, store, [{"op": "put", "model": "new", "value": {"n": 0}}])
        for node in (a, b):
            wait_for(lambda: api(node, "GET", f"/api/stores/{store}").status == 200
                     and store_snapshot(node, store)["version"] == 1, 10, "a node never saw the new store")
            fresh = store_snapshot(node, store)
            assert fresh["models"] == {"new": {"n": 0}} and fresh["epoch"] != old["epoch"], fresh
            assert [c["version"] for c in read_changes(node, store, "after=0&limit=10")["changes"]] == [1]
    with connect(a) as ws:
        frame = subscribe(ws, store=store, since=old["version"], epoch=old["epoch"])
        assert (frame["type"], frame["reset"], frame["version"]) == ("snapshot", True, 1), frame


def test_deleted_store_tells_its_subscribers_and_comes_back_in_a_new_epoch(deleting_port):
    port = deleting_port
    store, bystander = fresh_store(port), fresh_store(port)
    for n in range(1, 4):
        commit(port, store, [{"op": "put", "model": f"m{n}", "value": {"n": n}}])
    commit(port, bystander, [{"op": "put", "model": "b", "value": {"n": 0}}])
    old = store_snapshot(port, store)
    with connect(port) as ws, connect(port) as other:
        assert subscribe(ws, store=store)["version"] == 3
        assert subscribe(ws, store=bystander)["type"] == "snapshot"
        assert subscribe(other, store=bystander)["type"] == "snapshot"

        assert json_ok(api(port, "DELETE", f"/api/stores/{store}")) == {"store": store, "deleted": True}
        assert recv_json(ws) == {"type": "unsubscribed", "store": store, "reason": "deleted"}
        assert_json_error(api(port, "GET", f"/api/stores/{store}"), 404, "not_found")
        assert_json_error(api(port, "GET", f"/api/stores/{store}/changes?after=0"), 404, "not_found")
        assert_json_error(api(port, "DELETE", f"/api/stores/{store}"), 404, "not_found")
        assert store not in {s["name"] for s in json_ok(api(port, "GET", "/api/stores"))["stores"]}

        # The other store and its subscribers go on.
        version = commit(port, bystander, [{"op": "set", "model": "b", "path": "n", "value": 1}])
        assert_changes_frame(recv_json(ws), bystander, version)
        assert_changes_frame(recv_json(other), bystander, version)

        assert json_ok(api(port, "POST", "/api/stores", {"name": store}), 201) == {"name": store, "version": 0}
        fresh = store_snapshot(port, store)
        assert (fresh["version"], fresh["models"]) == (0, {})
        assert fresh["epoch"] != old["epoch"]
        assert read_changes(port, store, "after=0&limit=10")["changes"] == []
        assert_json_error(at(port, store, 3), 400, "bad_request")
        # Nothing of the new store reaches the subscription the deletion ended.
        commit(port, store, [{"op": "put", "model": "new", "value": {"n": 0}}])
        version = commit(port, bystander, [{"op": "set", "model": "b", "path": "n", "value": 2}])
        assert_changes_frame(recv_json(ws), bystander, version)

    for n in range(1, 5):
        commit(port, store, [{"op": "put", "model": "new", "value": {"n": n}}])
    current = store_snapshot(port, store)
    with connect(port) as ws:
        # A version of the old life, sent with its epoch, is answered with a reset snapshot.
        frame = subscribe(ws, store=store, since=old["version"], epoch=old["epoch"])
        assert frame == {"type": "snapshot", "store": store, "version": 5, "epoch": current["epoch"],
                         "reset": True, "models": {"new": {"n": 4}}}


def test_connection_whose_store_was_deleted_may_subscribe_again(deleting_port):
    port = deleting_port
    store = fresh_store(port)
    commit(port, store, [{"op": "put", "model": "m", "value": {"n": 1}}])
    with connect(port) as ws:
        assert subscribe(ws, store=store)["version"] == 1
        assert json_ok(api(port, "DELETE", f"/api/stores/{store}")) == {"store": store, "deleted": True}
        assert recv_json(ws) == {"type": "unsubscribed", "store": store, "reason": "deleted"}
        # Unsubscribed: the store is simply not there now, ...
        refused = subscribe(ws, store=store)
        assert (refused["type"], refused.get("code")) == ("error", "no_such_store"), refused
        # ... and once created again, the connection subscribes to it like any other.
        assert json_ok(api(port, "POST", "/api/stores", {"name": store}), 201)["version"] == 0
        epoch = store_snapshot(port, store)["epoch"]
        assert subscribe(ws, store=store) == {"type": "snapshot", "store": store, "version": 0,
                                              "epoch": epoch, "reset": False, "models": {}}
        version = commit(port, store, [{"op": "put", "model": "m", "value": {"n": 2}}])
        assert_changes_frame(recv_json(ws), store, version)
