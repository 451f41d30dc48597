"""Conditional writes: entity tags on models, `If-Match` / `If-None-Match` on model writes, and
`ifVersion` / `ifMatch` on atomic change sets.

- `GET /api/stores/{s}/models/{id}` answers `ETag: "N"`, N the store version of the model's last
  change; a successful PUT or PATCH answers the new tag.
- PUT, PATCH and DELETE honour `If-Match` (quoted tags, comma separated, or `*`: the model must
  exist); PUT honours `If-None-Match: *` (create only).
- `POST /api/stores/{s}/changes` takes `"ifVersion": N` (the store must be at N) and
  `"ifMatch": {"<model>": <tag>}` (each model's tag, given as `"\\"17\\""`, `"17"` or `17`).
- A condition that does not hold is `412 {"error":"precondition_failed","detail":…,"version":V}`,
  V the store's current version, and changes nothing: the snapshot and version stay as they
  were, no subscriber hears of it, and the next commit takes the next version.

Races of read-modify-write loops are in test_conditional_races.py. Every test runs on the memory
engine, the disk engine (`--data-dir`) and the redis engine (engines.py).
"""

from __future__ import annotations

import itertools
import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import assert_json_error, assert_standard_headers, http_client_request, json_ok, store_snapshot
from engines import engine, port  # noqa: F401  (`engine`, `port` are fixtures)
from test_cluster import redis  # noqa: F401  (a fixture `engine` asks for)
from wsclient import assert_changes_frame, connect, recv_json, subscribe

_names = itertools.count()


# ---- Requests --------------------------------------------------------------

def send(port: int, method: str, path: str, payload=None, headers: dict | None = None):
    """One request, `payload` JSON-encoded when given, with extra `headers`."""
    all_headers = dict(headers or {})
    body = None
    if payload is not None:
        body = json.dumps(payload).encode()
        all_headers["Content-Type"] = "application/json"
    return http_client_request(port, method, path, headers=all_headers, body=body)


def fresh_store(port: int, models: dict | None = None) -> str:
    """A new store; `models` are written one PUT each, so model k of n is tagged k."""
    name = f"cond-{next(_names)}"
    assert json_ok(send(port, "POST", "/api/stores", {"name": name}), 201) == {"name": name, "version": 0}
    for model, value in (models or {}).items():
        resp = send(port, "PUT", model_path(name, model), value)
        assert resp.status == 201, (resp.status, resp.body)
    return name


def model_path(store: str, model: str) -> str:
    return f"/api/stores/{store}/models/{model}"


def changes_path(store: str) -> str:
    return f"/api/stores/{store}/changes"


def tag(version: int) -> str:
    return f'"{version}"'


def get_model(port: int, store: str, model: str) -> tuple[dict, str]:
    """The model's answer and its ETag header."""
    resp = send(port, "GET", model_path(store, model))
    body = json_ok(resp)
    assert set(body) == {"store", "id", "version", "value"}, body
    assert (body["store"], body["id"]) == (store, model), body
    etag = resp.header("ETag")
    assert etag is not None, f"no ETag on GET of a model: {resp.headers}"
    return body, etag


def etag_of(port: int, store: str, model: str) -> str:
    return get_model(port, store, model)[1]


def write_ok(resp, status: int, store: str, model: str, version: int, etag: bool = True) -> None:
    """A successful model write at `version`; PUT and PATCH answer the new ETag."""
    assert json_ok(resp, status) == {"store": store, "id": model, "version": version}
    if etag:
        assert resp.header("ETag") == tag(version), resp.headers


def assert_precondition_failed(resp, version: int) -> dict:
    """A 412 naming the store's current version; returns the body."""
    assert resp.status == 412, f"expected 412, got {resp.status}: {resp.body[:300]!r}"
    assert_standard_headers(resp)
    assert resp.media_type() == "application/json", resp.header("Content-Type")
    body = resp.json()
    assert set(body) == {"error", "detail", "version"}, body
    assert body["error"] == "precondition_failed", body
    assert isinstance(body["detail"], str) and body["detail"], body
    assert body["version"] == version, body
    return body


def plain(snapshot: dict) -> dict:
    return {k: snapshot[k] for k in ("store", "version", "epoch", "models")}


def assert_unchanged(port: int, store: str, before: dict) -> None:
    """The store is exactly as it was, and the next commit takes the next version."""
    assert plain(store_snapshot(port, store)) == plain(before)
    probe = send(port, "POST", changes_path(store), {"changes": [{"op": "put", "model": "probe", "value": {"p": 1}}]})
    assert json_ok(probe)["version"] == before["version"] + 1, "a refused write must not take a version"


def assert_next_frame_is_the_probe(ws, store: str, version: int) -> None:
    """The subscriber's next frame is the probe `assert_unchanged` committed: nothing of the
    refused writes came before it."""
    frame = recv_json(ws)
    assert_changes_frame(frame, store, version)
    assert [c["model"] for c in frame["changes"]] == ["probe"], frame


# ---- Entity tags -------------------------------------------------------------

def test_get_model_answers_the_version_of_its_last_change_as_etag(port):
    store = fresh_store(port, {"a": {"n": 1}, "b": {"n": 2}})                     # a: 1, b: 2
    json_ok(send(port, "PATCH", model_path(store, "a"), {"n": 3}))                # a: 3
    json_ok(send(port, "POST", changes_path(store), {"changes": [
        {"op": "set", "model": "b", "path": "style.width", "value": 4}]}))         # b: 4
    json_ok(send(port, "PUT", model_path(store, "c"), {"n": 5}), 201)             # c: 5
    expected = {"a": (3, {"n": 3}), "b": (4, {"n": 2, "style": {"width": 4}}), "c": (5, {"n": 5})}
    for model, (last, value) in expected.items():
        body, etag = get_model(port, store, model)
        assert etag == tag(last), (model, etag)
        # The body's version is the store's, as before entity tags.
        assert body == {"store": store, "id": model, "version": 5, "value": value}
    # A change set touching several models tags each of them with its version.
    json_ok(send(port, "POST", changes_path(store), {"changes": [
        {"op": "patch", "model": "a", "value": {"m": 1}}, {"op": "delete", "model": "c"}]}))
    assert etag_of(port, store, "a") == tag(6)
    assert etag_of(port, store, "b") == tag(4)
    assert send(port, "GET", model_path(store, "c")).status == 404


def test_put_and_patch_answer_the_new_etag(port):
    store = fresh_store(port, {"other": {"n": 0}})
    resp = send(port, "PUT", model_path(store, "m"), {"n": 1})
    write_ok(resp, 201, store, "m", 2)
    resp = send(port, "PATCH", model_path(store, "m"), {"k": True})
    write_ok(resp, 200, store, "m", 3)
    resp = send(port, "PUT", model_path(store, "m"), {"n": 2})
    write_ok(resp, 200, store, "m", 4)
    assert etag_of(port, store, "m") == tag(4)


def test_etag_round_trip_guards_a_read_modify_write_sequence(port):
    store = fresh_store(port)
    created = send(port, "PUT", model_path(store, "doc"), {"title": "draft"}, {"If-None-Match": "*"})
    write_ok(created, 201, store, "doc", 1)
    patched = send(port, "PATCH", model_path(store, "doc"), {"title": "final"}, {"If-Match": created.header("ETag")})
    write_ok(patched, 200, store, "doc", 2)
    replaced = send(port, "PUT", model_path(store, "doc"), {"title": "v3"}, {"If-Match": patched.header("ETag")})
    write_ok(replaced, 200, store, "doc", 3)
    # The tag of two writes ago no longer matches.
    stale = send(port, "DELETE", model_path(store, "doc"), headers={"If-Match": patched.header("ETag")})
    assert_precondition_failed(stale, 3)
    deleted = send(port, "DELETE", model_path(store, "doc"), headers={"If-Match": replaced.header("ETag")})
    write_ok(deleted, 200, store, "doc", 4, etag=False)
    assert send(port, "GET", model_path(store, "doc")).status == 404


# ---- If-Match on model writes --------------------------------------------------

MODEL_WRITES = {
    "PUT": {"replaced": True},
    "PATCH": {"patched": True},
    "DELETE": None,
}


@pytest.mark.parametrize("method", list(MODEL_WRITES))
def test_current_if_match_applies_the_write(port, method):
    store = fresh_store(port, {"m": {"n": 1}, "other": {"n": 2}})
    resp = send(port, method, model_path(store, "m"), MODEL_WRITES[method], {"If-Match": tag(1)})
    write_ok(resp, 200, store, "m", 3, etag=method != "DELETE")
    expected = {"other": {"n": 2}}
    if method == "PUT":
        expected["m"] = {"replaced": True}
    elif method == "PATCH":
        expected["m"] = {"n": 1, "patched": True}
    assert store_snapshot(port, store)["models"] == expected


@pytest.mark.parametrize("method", list(MODEL_WRITES))
def test_stale_if_match_is_412_and_changes_nothing(port, method):
    store = fresh_store(port, {"m": {"n": 1}, "other": {"n": 2}})
    json_ok(send(port, "PATCH", model_path(store, "m"), {"n": 3}))      # m is tagged 3 now
    before = store_snapshot(port, store)
    with connect(port) as ws:
        subscribe(ws, store=store)
        for stale in (tag(1), tag(2), tag(4), tag(1000)):
            resp = send(port, method, model_path(store, "m"), MODEL_WRITES[method], {"If-Match": stale})
            assert_precondition_failed(resp, 3)
            assert resp.header("ETag") is None, resp.headers
        assert_unchanged(port, store, before)
        assert_next_frame_is_the_probe(ws, store, 4)
    assert etag_of(port, store, "m") == tag(3)


@pytest.mark.parametrize("method", list(MODEL_WRITES))
def test_if_match_list_applies_when_any_tag_is_current(port, method):
    store = fresh_store(port, {"a": {"n": 1}, "m": {"n": 2}})
    resp = send(port, method, model_path(store, "m"), MODEL_WRITES[method], {"If-Match": '"7", "1",  "2"'})
    write_ok(resp, 200, store, "m", 3, etag=method != "DELETE")
    before = store_snapshot(port, store)
    resp = send(port, method, model_path(store, "a"), MODEL_WRITES[method], {"If-Match": '"2","3", "99"'})
    assert_precondition_failed(resp, 3)
    assert_unchanged(port, store, before)


def test_weak_tags_never_match_if_match(port):
    """If-Match compares strongly (RFC 9110, 13.1.1): W/"1" is not the current tag "1"."""
    store = fresh_store(port, {"m": {"n": 1}})
    before = store_snapshot(port, store)
    assert_precondition_failed(send(port, "PUT", model_path(store, "m"), {"n": 2}, {"If-Match": 'W/"1"'}), 1)
    assert_unchanged(port, store, before)


@pytest.mark.parametrize("method", list(MODEL_WRITES))
def test_if_match_star_needs_the_model_to_exist(port, method):
    store = fresh_store(port, {"m": {"n": 1}})
    before = store_snapshot(port, store)
    resp = send(port, method, model_path(store, "ghost"), MODEL_WRITES[method], {"If-Match": "*"})
    assert_precondition_failed(resp, 1)
    assert_unchanged(port, store, before)
    resp = send(port, method, model_path(store, "m"), MODEL_WRITES[method], {"If-Match": "*"})
    write_ok(resp, 200, store, "m", 3, etag=method != "DELETE")


@pytest.mark.parametrize("method", list(MODEL_WRITES))
def test_tag_of_a_deleted_model_matches_nothing(port, method):
    store = fresh_store(port, {"m": {"n": 1}})
    json_ok(send(port, "DELETE", model_path(store, "m")))
    before = store_snapshot(port, store)
    resp = send(port, method, model_path(store, "m"), MODEL_WRITES[method], {"If-Match": tag(1)})
    assert_precondition_failed(resp, 2)
    assert_unchanged(port, store, before)


# ---- If-None-Match on PUT -------------------------------------------------------

def test_if_none_match_star_creates_only(port):
    store = fresh_store(port, {"other": {"n": 0}})
    created = send(port, "PUT", model_path(store, "m"), {"n": 1}, {"If-None-Match": "*"})
    write_ok(created, 201, store, "m", 2)
    before = store_snapshot(port, store)
    with connect(port) as ws:
        subscribe(ws, store=store)
        resp = send(port, "PUT", model_path(store, "m"), {"n": 2}, {"If-None-Match": "*"})
        body = assert_precondition_failed(resp, 2)
        assert "m" in body["detail"], body
        assert_unchanged(port, store, before)
        assert_next_frame_is_the_probe(ws, store, 3)
    assert get_model(port, store, "m")[0]["value"] == {"n": 1}
    # Once deleted, the id may be created again.
    json_ok(send(port, "DELETE", model_path(store, "m")))
    again = send(port, "PUT", model_path(store, "m"), {"n": 3}, {"If-None-Match": "*"})
    write_ok(again, 201, store, "m", 5)


def test_if_match_with_if_none_match_star_is_refused_as_never_met(port):
    """No model is both there and absent: the pair is refused, where the second header replaced
    the first and the PUT created the model on half its condition."""
    store = fresh_store(port, {"other": {"n": 0}})
    before = store_snapshot(port, store)
    for tag in ('"5"', "*"):
        resp = send(port, "PUT", model_path(store, "new"), {"n": 1}, {"If-Match": tag, "If-None-Match": "*"})
        assert_json_error(resp, 400, "bad_request")
    assert_unchanged(port, store, before)


def test_concurrent_creates_with_if_none_match_have_one_winner(port):
    store = fresh_store(port)
    contenders = 16

    def create(index: int):
        return send(port, "PUT", model_path(store, "lock"), {"owner": index}, {"If-None-Match": "*"})

    with ThreadPoolExecutor(contenders) as pool:
        answers = list(pool.map(create, range(contenders)))
    winners = [i for i, resp in enumerate(answers) if resp.status == 201]
    assert len(winners) == 1, [(r.status, r.body[:100]) for r in answers]
    for resp in answers:
        if resp.status != 201:
            assert_precondition_failed(resp, 1)
    snapshot = store_snapshot(port, store)
    assert (snapshot["version"], snapshot["models"]) == (1, {"lock": {"owner": winners[0]}})


# ---- ifVersion and ifMatch on change sets ---------------------------------------

def post_changes(port: int, store: str, changes: list, **conditions):
    return send(port, "POST", changes_path(store), {"changes": changes, **conditions})


def test_if_version_applies_only_at_that_version(port):
    store = fresh_store(port)
    assert json_ok(post_changes(port, store, [{"op": "put", "model": "a", "value": {"n": 1}}], ifVersion=0)) == {
        "store": store, "version": 1, "changes": 1}
    before = store_snapshot(port, store)
    with connect(port) as ws:
        subscribe(ws, store=store)
        for wrong in (0, 2, 17):
            resp = post_changes(port, store, [{"op": "put", "model": "a", "value": {"n": 2}},
                                              {"op": "put", "model": "b", "value": {"n": 2}}], ifVersion=wrong)
            assert_precondition_failed(resp, 1)
        assert plain(store_snapshot(port, store)) == plain(before)
        resp = post_changes(port, store, [{"op": "patch", "model": "a", "value": {"m": 2}}], ifVersion=1)
        assert json_ok(resp) == {"store": store, "version": 2, "changes": 1}
        frame = recv_json(ws)
        assert_changes_frame(frame, store, 2)
        assert frame["changes"] == [{"model": "a", "path": "m", "kind": "created", "value": 2}]
    assert store_snapshot(port, store)["models"] == {"a": {"n": 1, "m": 2}}


@pytest.mark.parametrize("how", ["misspelt-body", "if-match-header", "if-none-match-header", "ws-misspelt"])
def test_a_condition_a_change_set_would_not_read_is_refused_not_ignored(port, how):
    """A change set's conditions are `ifVersion` and `ifMatch` in its body. A misspelt one, or
    `If-Match`/`If-None-Match` headers (read on one model's writes only), is refused with 400 or
    `bad_message`, and nothing is applied: ignored, the change set went through unconditionally,
    a lost update."""
    store = fresh_store(port, {"a": {"n": 1}})
    before = store_snapshot(port, store)
    change = [{"op": "put", "model": "a", "value": {"n": 2}}]
    if how == "ws-misspelt":
        with connect(port) as ws:
            ws.send(json.dumps({"type": "commit", "store": store, "changes": change, "ifversion": 0, "ref": "c1"}))
            answer = recv_json(ws)
            assert (answer["type"], answer["code"], answer["ref"]) == ("error", "bad_message", "c1"), answer
            assert "ifversion" in answer["message"]
    else:
        headers = {"misspelt-body": None, "if-match-header": {"If-Match": tag(17)},
                   "if-none-match-header": {"If-None-Match": "*"}}[how]
        payload = {"changes": change, **({"ifversion": 0} if how == "misspelt-body" else {})}
        resp = send(port, "POST", changes_path(store), payload, headers=headers)
        assert resp.status == 400, (resp.status, resp.body)
        assert json.loads(resp.body)["error"] == "bad_request"
    assert_unchanged(port, store, before)


@pytest.mark.parametrize("form", ["quoted", "bare", "number"])
def test_if_match_accepts_each_form_of_tag(port, form):
    store = fresh_store(port, {"a": {"n": 1}, "b": {"n": 2}})

    def spelled(version: int):
        return {"quoted": tag(version), "bare": str(version), "number": version}[form]

    before = store_snapshot(port, store)
    resp = post_changes(port, store, [{"op": "set", "model": "a", "path": "n", "value": 10}],
                        ifMatch={"a": spelled(2)})
    assert_precondition_failed(resp, 2)
    assert plain(store_snapshot(port, store)) == plain(before)
    resp = post_changes(port, store, [{"op": "set", "model": "a", "path": "n", "value": 10}],
                        ifMatch={"a": spelled(1), "b": spelled(2)})
    assert json_ok(resp) == {"store": store, "version": 3, "changes": 1}
    assert store_snapshot(port, store)["models"] == {"a": {"n": 10}, "b": {"n": 2}}


def test_one_stale_tag_refuses_the_whole_change_set(port):
    store = fresh_store(port, {"a": {"n": 1}, "b": {"n": 2}, "c": {"n": 3}})
    before = store_snapshot(port, store)
    changes = [{"op": "set", "model": "a", "path": "n", "value": 10},
               {"op": "delete", "model": "b"},
               {"op": "put", "model": "d", "value": {"n": 4}}]
    with connect(port) as ws:
        subscribe(ws, store=store)
        # a and b match, c does not.
        resp = post_changes(port, store, changes, ifMatch={"a": tag(1), "b": tag(2), "c": tag(2)})
        assert_precondition_failed(resp, 3)
        # A model that must exist but does not.
        resp = post_changes(port, store, changes, ifMatch={"a": tag(1), "zzz": "*"})
        assert_precondition_failed(resp, 3)
        # ifVersion and ifMatch together: both must hold.
        resp = post_changes(port, store, changes, ifVersion=2, ifMatch={"a": tag(1)})
        assert_precondition_failed(resp, 3)
        resp = post_changes(port, store, changes, ifVersion=3, ifMatch={"a": tag(2)})
        assert_precondition_failed(resp, 3)
        assert plain(store_snapshot(port, store)) == plain(before)
        resp = post_changes(port, store, changes, ifVersion=3, ifMatch={"a": tag(1), "b": "2", "c": 3})
        assert json_ok(resp) == {"store": store, "version": 4, "changes": 3}
        frame = recv_json(ws)
        assert_changes_frame(frame, store, 4)
        assert [c["model"] for c in frame["changes"]] == ["a", "b", "d"]
    assert store_snapshot(port, store)["models"] == {"a": {"n": 10}, "c": {"n": 3}, "d": {"n": 4}}
    for model, last in (("a", 4), ("c", 3), ("d", 4)):
        assert etag_of(port, store, model) == tag(last)
