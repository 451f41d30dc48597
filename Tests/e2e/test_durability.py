"""Durability of the disk engine (`--data-dir`) across a restart.

A gateway stopped (SIGTERM) or killed (SIGKILL, with `--fsync always`) and started again on the
same directory serves every store with the same models, version, epoch and change sets, and every
topic with the same seq, epoch and history; a subscriber that resumes with `since` and `epoch` gets
exactly what it missed, with no reset; the history kept is what `retain` and `history` allow.

`kill -9` under load is in test_durability_kill.py; a directory in use, a data file that is not
ours and a full disk in test_durability_refusals.py.
"""

from __future__ import annotations

import json
import time

import pytest

from conftest import api, json_ok, store_snapshot
from data_dir import STREAM_TIMEOUT, changes_between, everything, messages_between, start_on, stop_with
from history import run_steps
from test_history_reads import MESSAGE_BODIES
from wsclient import assert_changes_frame, connect, recv_json, subscribe


# ---- Restart -----------------------------------------------------------------------------

RAW_VALUES = {
    "numbers": b'{"big":9007199254740993,"f":1.10,"z":-0.0,"e":1e400}',
    # Escapes are decoded when stored (docs/PROTOCOL.md), so the text is written unescaped.
    "order": '{"zeta":1,"alpha":{"y":2,"b":[3,{"k":null}]},"mid":"caf\u00e9 \u2603"}'.encode(),
}


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_restart_keeps_every_store_and_topic(start_server, tmp_path, how):
    data = tmp_path / "data"
    first = start_on(start_server, data)
    port = first.port
    for name in ("steps", "raw", "empty", "gone", "again"):
        assert json_ok(api(port, "POST", "/api/stores", {"name": name}), 201)["version"] == 0
    run_steps(port, "steps")
    for model, body in RAW_VALUES.items():
        resp = api(port, "PUT", f"/api/stores/raw/models/{model}", body=body)
        assert resp.status == 201, resp.body
    for store in ("gone", "again"):
        json_ok(api(port, "PUT", f"/api/stores/{store}/models/m", {"n": 1}), 201)
        assert json_ok(api(port, "DELETE", f"/api/stores/{store}"))["deleted"] is True
    assert json_ok(api(port, "POST", "/api/stores", {"name": "again"}), 201)["version"] == 0
    json_ok(api(port, "PUT", "/api/stores/again/models/m", {"n": 2}), 201)
    for body in MESSAGE_BODIES:
        assert api(port, "POST", "/api/topics/news/messages", body=body).status in (200, 201)
    assert api(port, "POST", "/api/topics/one/messages", {"only": True}).status in (200, 201)
    before = everything(port)
    assert {s["name"] for s in before["stores"]} == {"steps", "raw", "empty", "again"}
    assert before["topics"] == {"news": len(MESSAGE_BODIES), "one": 1}

    stop_with(first, how)
    second = start_on(start_server, data)
    after = everything(second.port)
    assert after["stores"] == before["stores"]
    assert after["topics"] == before["topics"]
    for name, held in before["store"].items():
        assert after["store"][name]["snapshot"] == held["snapshot"], name
        assert after["store"][name]["models"] == held["models"], name
        assert after["store"][name]["changes"] == held["changes"], name
        assert after["store"][name]["past"] == held["past"], name
    assert after["topic"] == before["topic"]
    for model, body in RAW_VALUES.items():
        assert body in api(second.port, "GET", f"/api/stores/raw/models/{model}").body, model

    # Both go on from where they were.
    version = json.loads(before["store"]["steps"]["snapshot"])["version"]
    resp = api(second.port, "PATCH", "/api/stores/steps/models/a", {"after": "restart"})
    assert json_ok(resp)["version"] == version + 1 and resp.header("ETag") == f'"{version + 1}"'
    published = json_ok(api(second.port, "POST", "/api/topics/news/messages", {"n": "next"}), 201)
    assert published["seq"] == len(MESSAGE_BODIES) + 1
    assert api(second.port, "GET", "/api/stores/gone").status == 404


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_subscriber_resumes_across_a_restart_with_exactly_what_it_missed(start_server, tmp_path, how):
    data = tmp_path / "data"
    first = start_on(start_server, data)
    port = first.port
    assert json_ok(api(port, "POST", "/api/stores", {"name": "s"}), 201)["version"] == 0

    def write(p: int, n: int) -> int:
        model = f"m{n % 3}"
        resp = api(p, "POST", "/api/stores/s/changes", {"changes": [
            {"op": "put", "model": model, "value": {"n": n}}, {"op": "set", "model": model, "path": "k", "value": n}]})
        return json_ok(resp)["version"]

    def publish(p: int, n: int) -> int:
        return json_ok(api(p, "POST", "/api/topics/t/messages", {"n": n}), 201)["seq"]

    with connect(port) as ws:
        snapshot = subscribe(ws, store="s")
        topic = subscribe(ws, topic="t")
        assert (snapshot["version"], topic["seq"]) == (0, 0)
        for n in range(1, 4):
            write(port, n)
            publish(port, n)
        seen = []
        while len(seen) < 6:
            seen.append(recv_json(ws, STREAM_TIMEOUT))
    last_version = max(f["version"] for f in seen if f["type"] == "changes")
    last_seq = max(f["seq"] for f in seen if f["type"] == "message")
    assert (last_version, last_seq) == (3, 3)
    store_epoch, topic_epoch = snapshot["epoch"], topic["epoch"]
    # Missed before the restart, and after it.
    for n in range(4, 9):
        write(port, n)
        publish(port, n)
    stop_with(first, how)
    second = start_on(start_server, data)
    for n in range(9, 12):
        write(second.port, n)
        publish(second.port, n)
    stored_changes = changes_between(second.port, "s", last_version, 11)
    stored_messages = messages_between(second.port, "t", last_seq, 11)

    with connect(second.port) as ws:
        assert subscribe(ws, store="s", since=last_version, epoch=store_epoch) == {
            "type": "subscribed", "store": "s", "version": last_version, "epoch": store_epoch, "resumed": True}
        replay = [recv_json(ws, STREAM_TIMEOUT) for _ in range(11 - last_version)]
        for version, frame in enumerate(replay, start=last_version + 1):
            assert_changes_frame(frame, "s", version)
        assert replay == stored_changes
        assert subscribe(ws, topic="t", since=last_seq, epoch=topic_epoch) == {
            "type": "subscribed", "topic": "t", "seq": 11, "epoch": topic_epoch, "resumed": True}
        messages = [recv_json(ws, STREAM_TIMEOUT) for _ in range(11 - last_seq)]
        assert messages == stored_messages
        assert [m["data"] for m in messages] == [{"n": n} for n in range(last_seq + 1, 12)]
        # Then the live streams, with nothing repeated.
        live = write(second.port, 12)
        assert_changes_frame(recv_json(ws, STREAM_TIMEOUT), "s", live)
        assert publish(second.port, 12) == 12
        assert recv_json(ws, STREAM_TIMEOUT)["seq"] == 12


KEPT = 5
PAST_KEPT = 20


def test_history_kept_across_a_restart_is_what_retain_and_history_allow(start_server, tmp_path):
    data = tmp_path / "data"
    limits = ("--retain", str(KEPT), "--history", str(KEPT))
    first = start_on(start_server, data, *limits)
    port = first.port
    json_ok(api(port, "POST", "/api/stores", {"name": "s"}), 201)
    states = [{}]
    for n in range(1, PAST_KEPT + 1):
        json_ok(api(port, "PUT", f"/api/stores/s/models/m{n % 3}", {"n": n}), 201 if n <= 3 else 200)
        states.append(store_snapshot(port, "s")["models"])
        json_ok(api(port, "POST", "/api/topics/t/messages", {"n": n}), 201)
    tail_changes = changes_between(port, "s", PAST_KEPT - KEPT, PAST_KEPT)
    tail_messages = messages_between(port, "t", PAST_KEPT - KEPT, PAST_KEPT)
    epoch = store_snapshot(port, "s")["epoch"]
    stop_with(first, "SIGTERM")

    second = start_on(start_server, data, *limits)
    port = second.port
    gone = api(port, "GET", "/api/stores/s?at=0")
    assert gone.status == 410 and gone.json()["error"] == "gone", (gone.status, gone.body)
    oldest = gone.json()["oldest"]
    assert 1 <= oldest <= PAST_KEPT - KEPT, gone.json()
    for version in range(oldest, PAST_KEPT + 1):
        assert json_ok(api(port, "GET", f"/api/stores/s?at={version}"))["models"] == states[version], version
    assert changes_between(port, "s", PAST_KEPT - KEPT, PAST_KEPT) == tail_changes
    gone = api(port, "GET", "/api/topics/t/messages?after=0&limit=10")
    assert gone.status == 410 and gone.json()["error"] == "gone", (gone.status, gone.body)
    assert 1 <= gone.json()["oldest"] <= PAST_KEPT - KEPT, gone.json()
    assert messages_between(port, "t", PAST_KEPT - KEPT, PAST_KEPT) == tail_messages

    with connect(port) as ws:
        # A resume from before what is kept starts over from a snapshot, in the same epoch.
        assert subscribe(ws, store="s", since=2, epoch=epoch) == {
            "type": "snapshot", "store": "s", "version": PAST_KEPT, "epoch": epoch, "reset": True,
            "models": states[PAST_KEPT]}
        # A topic's lost messages are named as a gap, never skipped silently.
        answer = subscribe(ws, topic="t", since=2)
        assert answer["type"] == "subscribed" and answer["seq"] == PAST_KEPT and not answer.get("reset"), answer
        gap = recv_json(ws, STREAM_TIMEOUT)
        assert gap["type"] == "gap" and gap["topic"] == "t" and gap["from"] == 3, gap
        following = [recv_json(ws, STREAM_TIMEOUT) for _ in range(PAST_KEPT - gap["to"])]
        assert [m["seq"] for m in following] == list(range(gap["to"] + 1, PAST_KEPT + 1)), following
        assert following[-KEPT:] == tail_messages


# ---- A delete after the stored snapshot, then a crash ---------------------------------------

SNAPSHOT_WAIT = 1.5          # seconds: past the writer's one-second snapshot of changed models


def test_a_model_deleted_after_the_snapshot_stays_deleted_past_a_crash_and_the_next_snapshot(start_server, tmp_path):
    """`x` is put and stored in a snapshot; `y` is put, `x` deleted (acknowledged), and the
    gateway killed before the next snapshot. The restart replays the delete; the gateway takes a
    snapshot after one more write and stops; the start after that still has no `x`. Before, that
    snapshot kept `x`'s row, as the writer did not know of the replayed delete, and `x` came back."""
    data = tmp_path / "data"
    server = start_on(start_server, data)
    port = server.port
    assert json_ok(api(port, "POST", "/api/stores", {"name": "s"}), 201)["version"] == 0
    assert api(port, "PUT", "/api/stores/s/models/x", {"v": "x"}).status in (200, 201)
    time.sleep(SNAPSHOT_WAIT)  # the writer's snapshot timer, not synchronisation: x is in it
    assert api(port, "PUT", "/api/stores/s/models/y", {"v": "y"}).status in (200, 201)
    assert api(port, "DELETE", "/api/stores/s/models/x").status in (200, 204)
    stop_with(server, "SIGKILL")

    server = start_on(start_server, data)
    assert store_snapshot(server.port, "s")["models"] == {"y": {"v": "y"}}
    time.sleep(SNAPSHOT_WAIT)
    assert api(server.port, "PUT", "/api/stores/s/models/z", {"v": "z"}).status in (200, 201)
    stop_with(server, "SIGTERM")

    server = start_on(start_server, data)
    snapshot = store_snapshot(server.port, "s")
    assert snapshot["models"] == {"y": {"v": "y"}, "z": {"v": "z"}}, snapshot
    assert snapshot["version"] == 4


def _nested(levels: int):
    """`levels` objects, one inside the next, around a number: a value `levels + 1` deep."""
    value: object = 1
    for _ in range(levels):
        value = {"k": value}
    return value


def test_a_model_as_deep_as_a_write_may_make_it_is_read_back_at_the_next_start(start_server, tmp_path):
    """The deepest model a write may make (256 levels, a `set`'s key path counted) is stored and
    read back at the next start, and one level more is refused `400`. Before, a `PUT` of 252
    levels was taken, then stored wrapped in a log entry past the parser's limit, and every later
    start failed ("damaged"): one write stopped the gateway for good; a `set` with a long key path
    made a model of any depth."""
    data = tmp_path / "data"
    server = start_on(start_server, data)
    port = server.port
    json_ok(api(port, "POST", "/api/stores", {"name": "s"}), 201)
    assert api(port, "PUT", "/api/stores/s/models/deep", _nested(255)).status == 201
    assert api(port, "PUT", "/api/stores/s/models/long", {"n": 0}).status == 201
    path = ".".join(["k"] * 100)

    def set_at_path(levels: int):
        return api(port, "POST", "/api/stores/s/changes",
                   {"changes": [{"op": "set", "model": "long", "path": path, "value": _nested(levels)}]})

    refused = set_at_path(156)  # 100 + 157 levels
    assert refused.status == 400 and refused.json()["error"] == "bad_request", refused.body
    assert "256" in refused.json()["detail"], refused.body
    assert set_at_path(155).status == 200
    before = store_snapshot(port, "s")
    stop_with(server, "SIGKILL")

    server = start_on(start_server, data)
    assert store_snapshot(server.port, "s") == before
