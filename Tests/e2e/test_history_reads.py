"""Reads of the past over HTTP.

- `GET /api/stores/{s}?at=N`: the store exactly as it was at version N; N past the current
  version is `400 bad_request`, N older than what is kept `410 {"error":"gone","oldest":M}`, M the
  oldest version that can still be read.
- `GET /api/stores/{s}/changes?after=A&limit=K[&until=B][&models=…][&paths=…]`: the change sets
  after A, each exactly the `changes` frame a WebSocket subscriber (with the same options) got.
- `GET /api/topics/{t}/messages?after=N&limit=K`: the messages after N, each exactly the `message`
  frame a subscriber got; `410` with `oldest` past the history (`--history`).

Deleting a store is in test_store_deletion.py. Every test runs on the memory engine and on the
disk engine (`--data-dir`, where `--retain` bounds the change sets kept as `--history` does in
memory).
"""

from __future__ import annotations

import json

import pytest

from conftest import api, assert_json_error, json_ok, store_snapshot
# The `engine` (memory, disk and redis) and `port` fixtures, shared with the conditional writes.
from engines import Engine, engine, port  # noqa: F401  (fixtures)
from history import (  # noqa: F401  (`local_engine` is a fixture)
    COMMITS_PAST_KEPT,
    KEPT,
    STEPS,
    STREAM_TIMEOUT,
    assert_gone,
    at,
    collect_changes,
    commit,
    fresh_store,
    fresh_topic,
    keeping,
    local_engine,
    oldest_bound,
    read_changes,
    read_messages,
    read_messages_raw,
    run_steps,
)
from test_cluster import redis  # noqa: F401  (a fixture)
from wsclient import connect, recv_json, recv_text, subscribe


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


def test_query_numbers_are_percent_decoded_as_every_query_value_is(port):
    """`at`, `after` and `limit` are read percent-decoded, as `since` is: `%31` is 1. Before, they
    were read as written, and `at=%31` was 400 where `since=%31` was 1."""
    store = fresh_store(port)
    commit(port, store, [{"op": "put", "model": "m", "value": {"n": 1}}])
    commit(port, store, [{"op": "put", "model": "m", "value": {"n": 2}}])
    assert json_ok(api(port, "GET", f"/api/stores/{store}?at=%31"))["models"] == {"m": {"n": 1}}
    changes = json_ok(api(port, "GET", f"/api/stores/{store}/changes?after=%31&limit=%31"))
    assert [c["version"] for c in changes["changes"]] == [2], changes


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


def test_a_filtered_read_pages_through_every_change_set_by_its_through(port):
    """Model `m1` changed at version 1 and at 152, another model 150 times between: a client
    reading `models=m1` 100 change sets a page, each page after the last one's `through`, gets
    versions 1 and 152, and knows it is done when `through` stops moving. Before, the second page
    (versions 2 to 101, none of `m1`) was empty and said nothing of how far it had read: a
    client took it for the end and never saw 152."""
    store = fresh_store(port)
    commit(port, store, [{"op": "put", "model": "m1", "value": {"n": 1}}])
    for n in range(150):
        commit(port, store, [{"op": "put", "model": "m2", "value": {"n": n}}])
    commit(port, store, [{"op": "put", "model": "m1", "value": {"n": 2}}])
    seen, after, pages = [], 0, 0
    while True:
        page = read_changes(port, store, f"after={after}&limit=100&models=m1")
        pages += 1
        assert pages <= 5, "the pages never ended"
        seen += [frame["version"] for frame in page["changes"]]
        if page["through"] == after:
            break
        after = page["through"]
    assert seen == [1, 152], seen
    assert pages == 3 and after == 152, (pages, after)


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
