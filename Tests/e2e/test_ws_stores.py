"""Store subscriptions over WebSocket (docs/PROTOCOL.md): snapshot, change sets, resume, errors,
and a stalled subscriber that catches up with a conflated frame."""

import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import api, json_ok, stop_job, store_snapshot
from wsclient import (
    RawWebSocket,
    apply_changes,
    assert_change_list,
    assert_changes_frame,
    commit,
    connect,
    kernel_buffer_budget,
    new_store,
    patch_model,
    put_model,
    recv_json,
    recv_text,
    send_json,
    subscribe,
)

STREAM_TIMEOUT = 15.0     # a whole run of frames that is already due
CATCH_UP_TIMEOUT = 60.0   # a stalled subscriber reads out its backlog
SLOW_TEST_TIMEOUT = 180   # pytest-timeout for the stalled-subscriber test
QUEUE_LIMIT = 65536       # --max-queued-bytes for the stalled-subscriber test
TINY_RCVBUF = 4096        # SO_RCVBUF of the stalled subscriber
PAD_BYTES = 16384         # size of each value the stalled subscriber falls behind on
CONFLATE_MODELS = 8


def expected_snapshot(port: int, store: str, reset: bool = False) -> dict:
    return {"type": "snapshot", "reset": reset, **store_snapshot(port, store)}


def follow(ws, store: str, models: dict, version: int, target: int,
           timeout: float = STREAM_TIMEOUT) -> list[dict]:
    """Read plain changes frames up to `target`, each one version above the last, folding them in."""
    deadline = time.monotonic() + timeout
    frames = []
    while version < target:
        frame = recv_json(ws, max(0.0, deadline - time.monotonic()))
        assert_changes_frame(frame, store, version + 1)
        apply_changes(models, frame["changes"])
        version = frame["version"]
        frames.append(frame)
    return frames


# ---- Snapshot and live changes -----------------------------------------

def test_snapshot_equals_http_snapshot_at_its_version(server):
    port = server.port
    store = new_store(port, {"a": {"color": "#112233", "style": {"border": {"width": 1}}},
                             "b": {"text": "snow \u2603", "list": [1, 2.5, None, True], "e": {}}})
    put_model(port, store, "c", {"n": 3})
    empty = new_store(port)
    with connect(port) as ws:
        frame = subscribe(ws, store=store)
        assert frame == expected_snapshot(port, store)
        assert frame["version"] == 2
        assert subscribe(ws, store=empty) == {
            "type": "snapshot", "store": empty, "version": 0, "epoch": store_snapshot(port, empty)["epoch"],
            "reset": False, "models": {}}


MUTATIONS = {
    "patch-one-key": ("PATCH", "m", {"color": "#a1b2c3"},
                      [{"model": "m", "path": "color", "kind": "updated", "value": "#a1b2c3"}]),
    "patch-remove-key": ("PATCH", "m", {"label": None},
                         [{"model": "m", "path": "label", "kind": "deleted", "value": None}]),
    "patch-add-key": ("PATCH", "m", {"size": 4},
                      [{"model": "m", "path": "size", "kind": "created", "value": 4}]),
    "patch-nested": ("PATCH", "m", {"style": {"border": {"width": 3}, "shadow": None}}, None),
    "put-new": ("PUT", "n", {"x": [1, 2]}, [{"model": "n", "path": "", "kind": "created", "value": {"x": [1, 2]}}]),
    "put-replace": ("PUT", "m", {"only": True},
                    [{"model": "m", "path": "", "kind": "updated", "value": {"only": True}}]),
    "delete": ("DELETE", "m", None, [{"model": "m", "path": "", "kind": "deleted", "value": None}]),
}


@pytest.mark.parametrize("method, model, body, expected", list(MUTATIONS.values()), ids=list(MUTATIONS))
def test_http_mutation_arrives_as_changes_frame_at_its_version(server, method, model, body, expected):
    port = server.port
    store = new_store(port, {"m": {"color": "#000000", "label": "M",
                                   "style": {"border": {"width": 1}, "shadow": "none"}}})
    with connect(port) as ws:
        snapshot = subscribe(ws, store=store)
        assert snapshot == expected_snapshot(port, store)
        resp = api(port, method, f"/api/stores/{store}/models/{model}",
                   *([body] if body is not None else []))
        assert resp.status in (200, 201), resp.body
        version = resp.json()["version"]
        assert version == snapshot["version"] + 1
        frame = recv_json(ws)
        assert_changes_frame(frame, store, version)
        if expected is not None:
            assert frame["changes"] == expected
        models = snapshot["models"]
        apply_changes(models, frame["changes"])
        assert models == store_snapshot(port, store)["models"]


def test_atomic_change_set_is_one_frame_with_every_change(server):
    port = server.port
    store = new_store(port, {"a": {"n": 1}, "b": {"name": "b"}})
    with connect(port) as ws:
        snapshot = subscribe(ws, store=store)
        version = commit(port, store, [
            {"op": "set", "model": "a", "path": "n", "value": 2},
            {"op": "set", "model": "a", "path": "style.border.width", "value": 3},
            {"op": "delete", "model": "b"},
        ])
        frame = recv_json(ws)
        assert_changes_frame(frame, store, version)
        assert frame["changes"] == [
            {"model": "a", "path": "n", "kind": "updated", "value": 2},
            # `style` did not exist: the set created it, and is reported there.
            {"model": "a", "path": "style", "kind": "created", "value": {"border": {"width": 3}}},
            {"model": "b", "path": "", "kind": "deleted", "value": None},
        ]
        # Nothing of that change set comes later: the next frame is the next version.
        later = put_model(port, store, "c", {"c": 1})
        assert_changes_frame(recv_json(ws), store, later)
        models = snapshot["models"]
        apply_changes(models, frame["changes"])
        assert models == {"a": {"n": 2, "style": {"border": {"width": 3}}}}


def test_versions_are_consecutive_over_many_concurrent_commits(server):
    port = server.port
    store = new_store(port, {f"w{w}": {"i": -1} for w in range(4)})
    writes = 25
    with connect(port) as ws:
        snapshot = subscribe(ws, store=store)

        def write(writer):
            return [patch_model(port, store, f"w{writer}", {"i": i, f"k{i % 3}": i}) for i in range(writes)]

        with ThreadPoolExecutor(4) as pool:
            versions = sorted(v for batch in pool.map(write, range(4)) for v in batch)
        start = snapshot["version"]
        assert versions == list(range(start + 1, start + 4 * writes + 1))
        models = snapshot["models"]
        frames = follow(ws, store, models, start, versions[-1])
        assert [f["version"] for f in frames] == versions
        assert models == store_snapshot(port, store)["models"]


def test_two_clients_receive_identical_frames(server):
    port = server.port
    store = new_store(port, {"m": {"n": 0}})
    with connect(port) as first, connect(port) as second:
        assert subscribe(first, store=store) == subscribe(second, store=store)
        versions = [patch_model(port, store, "m", {"n": n}) for n in range(1, 6)]
        texts = [[recv_text(ws) for _ in versions] for ws in (first, second)]
        assert texts[0] == texts[1], "every subscriber gets the same encoded frame"
        assert [json.loads(t)["version"] for t in texts[0]] == versions


def test_unsubscribe_stops_only_that_store(server):
    port = server.port
    quiet, loud = new_store(port, {"q": {"n": 0}}), new_store(port, {"l": {"n": 0}})
    with connect(port) as ws:
        subscribe(ws, store=quiet)
        subscribe(ws, store=loud)
        send_json(ws, {"type": "unsubscribe", "store": quiet})
        assert recv_json(ws) == {"type": "unsubscribed", "store": quiet}
        for n in (1, 2):
            patch_model(port, quiet, "q", {"n": n})
            # Committed after the quiet store's change set, so it would arrive after its frame.
            version = patch_model(port, loud, "l", {"n": n})
            assert_changes_frame(recv_json(ws), loud, version)
        # The subscription is gone: subscribing again is allowed and starts with a snapshot.
        assert subscribe(ws, store=quiet) == expected_snapshot(port, quiet)


# ---- Resume ------------------------------------------------------------

def test_resume_replays_exactly_the_missed_versions(server):
    port = server.port
    store = new_store(port, {"m": {"n": 0}})
    with connect(port) as ws:
        snapshot = subscribe(ws, store=store)
        models, last = snapshot["models"], snapshot["version"]
        target = max(patch_model(port, store, "m", {"n": n}) for n in range(1, 4))
        follow(ws, store, models, last, target)
        last = target
    missed = [patch_model(port, store, "m", {"n": n, f"k{n}": n}) for n in range(10)]
    missed.append(put_model(port, store, "extra", {"x": 1}))
    with connect(port) as ws:
        assert subscribe(ws, store=store, since=last, epoch=snapshot["epoch"]) == {
            "type": "subscribed", "store": store, "version": last, "epoch": snapshot["epoch"], "resumed": True}
        frames = follow(ws, store, models, last, missed[-1])
        assert [f["version"] for f in frames] == missed == list(range(last + 1, last + 12))
        assert models == store_snapshot(port, store)["models"]
        # The live stream follows with no change set repeated.
        live = patch_model(port, store, "m", {"live": True})
        assert_changes_frame(recv_json(ws), store, live)


def test_resume_at_the_current_version_continues_live(server):
    port = server.port
    store = new_store(port, {"m": {"n": 0}})
    current, epoch = store_snapshot(port, store)["version"], store_snapshot(port, store)["epoch"]
    with connect(port) as ws:
        assert subscribe(ws, store=store, since=current) == {
            "type": "subscribed", "store": store, "version": current, "epoch": epoch, "resumed": True}
        version = patch_model(port, store, "m", {"n": 1})
        assert_changes_frame(recv_json(ws), store, version)


def test_resume_older_than_history_gets_reset_snapshot(start_server):
    server = start_server("--history", "5")
    port = server.port
    store = new_store(port, {"m": {"n": 0}})
    with connect(port) as ws:
        last = subscribe(ws, store=store)["version"]
    for n in range(1, 21):
        patch_model(port, store, "m", {"n": n, f"k{n % 4}": n})
    with connect(port) as ws:
        frame = subscribe(ws, store=store, since=last)
        assert frame == expected_snapshot(port, store, reset=True)
        assert frame["version"] == last + 20
        version = patch_model(port, store, "m", {"n": 21})
        assert_changes_frame(recv_json(ws), store, version)


def test_resume_from_another_epoch_of_the_store_gets_reset_snapshot(start_server):
    """A store created anew (here: on a restarted gateway) counts versions from zero again, so a
    version only resumes together with the epoch it was read in."""
    first = start_server()
    store = new_store(first.port, {"m": {"n": 0}})
    with connect(first.port) as ws:
        snapshot = subscribe(ws, store=store)
    epoch, last = snapshot["epoch"], snapshot["version"]
    assert isinstance(epoch, str) and epoch
    first.stop()

    second = start_server()
    assert json_ok(api(second.port, "POST", "/api/stores", {"name": store}), 201)
    for n in range(1, 6):
        put_model(second.port, store, "m", {"n": n})
    current = store_snapshot(second.port, store)
    assert current["version"] > last and current["epoch"] != epoch
    with connect(second.port) as ws:
        # Without the epoch, the version alone looks resumable: the old protocol's blind spot.
        blind = subscribe(ws, store=store, since=last)
        assert blind["type"] == "subscribed"
    with connect(second.port) as ws:
        frame = subscribe(ws, store=store, since=last, epoch=epoch)
        assert frame == expected_snapshot(second.port, store, reset=True)
    with connect(second.port) as ws:
        frame = subscribe(ws, store=store, since=last, epoch=current["epoch"])
        assert frame["type"] == "subscribed" and frame["epoch"] == current["epoch"]


def test_demo_tiles_converge_while_animated(start_server):
    server = start_server("--demo")
    port = server.port
    with connect(port) as ws:
        snapshot = subscribe(ws, store="tiles")
        assert snapshot["type"] == "snapshot" and snapshot["reset"] is False
        assert set(snapshot["models"]) == {f"tile-{i}" for i in range(64)}
        models = snapshot["models"]
        follow(ws, "tiles", models, snapshot["version"], snapshot["version"] + 10)
        stop_job(port, "job-1")
        # A change of the test's own, then a snapshot: its version is at least ours, and the
        # subscriber's folded changes up to exactly that version must be the snapshot's models.
        own = patch_model(port, "tiles", "tile-0", {"color": "#010203"})
        final = store_snapshot(port, "tiles")
        assert final["version"] >= own > snapshot["version"] + 10
        follow(ws, "tiles", models, snapshot["version"] + 10, final["version"])
        assert models == final["models"]


# ---- Errors ------------------------------------------------------------

ERRORS = {
    "unknown-store": ('{"type":"subscribe","store":"no-such-store"}', "no_such_store"),
    "not-json": ('{"type":"subscribe",', "bad_message"),
    "json-array": ('["subscribe","STORE"]', "bad_message"),
    "json-string": ('"subscribe"', "bad_message"),
    "missing-type": ('{"store":"STORE"}', "bad_message"),
    "unknown-type": ('{"type":"watch","store":"STORE"}', "unknown_type"),
    "store-and-topic": ('{"type":"subscribe","store":"STORE","topic":"news"}', "bad_message"),
    "neither-store-nor-topic": ('{"type":"subscribe"}', "bad_message"),
    "unsubscribe-neither": ('{"type":"unsubscribe"}', "bad_message"),
    "since-negative": ('{"type":"subscribe","store":"STORE","since":-1}', "bad_message"),
    "since-string": ('{"type":"subscribe","store":"STORE","since":"3"}', "bad_message"),
    "since-fraction": ('{"type":"subscribe","store":"STORE","since":1.5}', "bad_message"),
    # A misspelt option, ignored, would send every path: it is refused.
    "unknown-member": ('{"type":"subscribe","store":"STORE","pathz":["n"]}', "bad_message"),
}


def assert_error(frame: dict, code: str) -> None:
    assert set(frame) == {"type", "code", "message"}, frame
    assert frame["type"] == "error" and frame["code"] == code, frame
    assert isinstance(frame["message"], str) and frame["message"], frame


@pytest.mark.parametrize("text, code", list(ERRORS.values()), ids=list(ERRORS))
def test_bad_message_is_answered_with_error_and_connection_stays_usable(server, text, code):
    port = server.port
    store = new_store(port, {"m": {"n": 0}})
    with connect(port) as ws:
        ws.send(text.replace("STORE", store))
        assert_error(recv_json(ws), code)
        # Nothing was subscribed, and the connection still serves.
        assert subscribe(ws, store=store) == expected_snapshot(port, store)
        version = patch_model(port, store, "m", {"n": 1})
        assert_changes_frame(recv_json(ws), store, version)


def test_duplicate_subscribe_is_already_subscribed(server):
    port = server.port
    store = new_store(port, {"m": {"n": 0}})
    with connect(port) as ws:
        subscribe(ws, store=store)
        assert_error(subscribe(ws, store=store), "already_subscribed")
        assert_error(subscribe(ws, store=store, since=0), "already_subscribed")
        # The first subscription still delivers each change set once.
        first, second = (patch_model(port, store, "m", {"n": n}) for n in (1, 2))
        assert_changes_frame(recv_json(ws), store, first)
        assert_changes_frame(recv_json(ws), store, second)


def test_unsubscribe_when_not_subscribed_is_not_subscribed(server):
    port = server.port
    store = new_store(port, {"m": {"n": 0}})
    with connect(port) as ws:
        send_json(ws, {"type": "unsubscribe", "store": store})
        assert_error(recv_json(ws), "not_subscribed")
        subscribe(ws, store=store)
        send_json(ws, {"type": "unsubscribe", "store": store})
        assert recv_json(ws) == {"type": "unsubscribed", "store": store}
        send_json(ws, {"type": "unsubscribe", "store": store})
        assert_error(recv_json(ws), "not_subscribed")
        assert subscribe(ws, store=store) == expected_snapshot(port, store)


# ---- Slow clients ------------------------------------------------------

@pytest.mark.timeout(SLOW_TEST_TIMEOUT)
def test_stalled_store_subscriber_catches_up_with_a_conflated_frame(start_server):
    server = start_server("--max-queued-bytes", str(QUEUE_LIMIT), "--ping-interval", "600")
    port = server.port
    store = new_store(port, {f"m{i}": {"i": i, "k": -1, "pad": ""} for i in range(CONFLATE_MODELS)})
    pad = "x" * PAD_BYTES
    commits = kernel_buffer_budget() // PAD_BYTES + 1
    with RawWebSocket(port, rcvbuf=TINY_RCVBUF) as stalled:
        stalled.open()
        stalled.send_json({"type": "subscribe", "store": store})
        snapshot = stalled.recv_json()
        assert snapshot == expected_snapshot(port, store)
        # The subscriber stops reading while far more than its limit is committed.
        for k in range(commits):
            model = f"m{k % CONFLATE_MODELS}"
            commit(port, store, [{"op": "set", "model": model, "path": "pad", "value": f"{k}:{pad}"},
                                 {"op": "set", "model": model, "path": "k", "value": k}])
        final = store_snapshot(port, store)
        assert final["version"] == snapshot["version"] + commits

        models, version, conflated = snapshot["models"], snapshot["version"], []
        deadline = time.monotonic() + CATCH_UP_TIMEOUT
        while version < final["version"]:
            frame = stalled.recv_json(max(0.0, deadline - time.monotonic()))
            if frame.get("conflated"):
                assert frame["conflated"] is True and frame["type"] == "changes", frame
                assert frame["store"] == store and frame["from"] == version < frame["version"], frame
                assert_change_list(frame["changes"])
                # The latest value per (model, path): at most two paths of each model.
                assert len(frame["changes"]) <= 2 * CONFLATE_MODELS, len(frame["changes"])
                conflated.append(frame["version"])
            else:
                assert_changes_frame(frame, store, version + 1)
            apply_changes(models, frame["changes"])
            version = frame["version"]
        assert conflated, "the stalled subscriber never got a conflated frame"
        assert version == final["version"]
        assert models == final["models"]


def test_a_set_to_null_removes_the_member(server):
    port = server.port
    store = new_store(port, {"m": {"color": "#000000", "label": "M"}})
    with connect(port) as ws:
        subscribe(ws, store=store)
        # Removing what is not there is no change; the set is one change, not two.
        assert json_ok(api(port, "POST", f"/api/stores/{store}/changes", {"changes": [
            {"op": "set", "model": "m", "path": "label", "value": None},
            {"op": "set", "model": "m", "path": "absent", "value": None}]}))["changes"] == 1
        frame = recv_json(ws)
        assert frame["changes"] == [{"model": "m", "path": "label", "kind": "deleted", "value": None}], frame
    assert store_snapshot(port, store)["models"]["m"] == {"color": "#000000"}
