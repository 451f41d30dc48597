"""Atomic change sets on a store: several models in one version, operations that create what they
need, and an invalid or malformed change set that applies nothing."""

import json

import pytest

from conftest import api, assert_json_error, curl, json_ok, store_snapshot, store_version
from test_stores import fresh_store, get_model, model_path, plain_snapshot, post_changes, put_model
from wsclient import connect, recv_json


# ---- Change sets -------------------------------------------------------

def test_change_set_across_models_is_one_version(server):
    store = fresh_store(server.port)
    put_model(server.port, store, "a", {"n": 1}, 201)
    put_model(server.port, store, "b", {"name": "b"}, 201)
    put_model(server.port, store, "c", {"gone": True}, 201)
    # Each op changes exactly one thing.
    changes = [
        {"op": "put", "model": "d", "value": {"n": 4}},
        {"op": "patch", "model": "a", "value": {"n": 2}},
        {"op": "set", "model": "b", "path": "style.border.width", "value": 3},
        {"op": "delete", "model": "c"},
    ]
    assert json_ok(post_changes(server.port, store, changes)) == {"store": store, "version": 4, "changes": 4}
    assert plain_snapshot(server.port, store) == {
        "store": store,
        "version": 4,
        "models": {
            "a": {"n": 2},
            "b": {"name": "b", "style": {"border": {"width": 3}}},
            "d": {"n": 4},
        },
    }
    assert get_model(server.port, store, "b")["version"] == 4


def test_change_set_with_curl_across_three_new_models(server):
    store = fresh_store(server.port)
    changes = [{"op": "put", "model": f"m{i}", "value": {"i": i}} for i in range(3)]
    resp = curl(server.port, f"/api/stores/{store}/changes", "-X", "POST",
                "-H", "Content-Type: application/json", "--data-binary", json.dumps({"changes": changes}))
    assert json_ok(resp) == {"store": store, "version": 1, "changes": 3}
    assert plain_snapshot(server.port, store) == {
        "store": store, "version": 1, "models": {"m0": {"i": 0}, "m1": {"i": 1}, "m2": {"i": 2}}}


MISSING_MODEL = {400: "bad_request", 404: "not_found"}
BAD = {400: "bad_request"}
INVALID_OPS = {
    "unknown-op": ({"op": "frobnicate", "model": "a", "value": {"x": 1}}, BAD),
    "patch-missing-model": ({"op": "patch", "model": "ghost", "value": {"x": 1}}, MISSING_MODEL),
    "set-missing-model": ({"op": "set", "model": "ghost", "path": "x", "value": 1}, MISSING_MODEL),
    "delete-missing-model": ({"op": "delete", "model": "ghost"}, MISSING_MODEL),
    "put-array": ({"op": "put", "model": "z", "value": [1]}, BAD),
    "put-string": ({"op": "put", "model": "z", "value": "x"}, BAD),
    "patch-number": ({"op": "patch", "model": "a", "value": 3}, BAD),
    "patch-array": ({"op": "patch", "model": "a", "value": [1]}, BAD),
    "put-without-value": ({"op": "put", "model": "z"}, BAD),
    "put-without-model": ({"op": "put", "value": {"x": 1}}, BAD),
    "without-op": ({"model": "a", "value": {"x": 1}}, BAD),
    "set-without-path": ({"op": "set", "model": "a", "value": 1}, BAD),
    "set-without-value": ({"op": "set", "model": "a", "path": "x"}, BAD),
    "op-not-an-object": ("put", BAD),
    # A member an operation does not take is refused, never ignored: the delete would take the
    # whole model, and the condition would not hold the change set back.
    "delete-with-path": ({"op": "delete", "model": "a", "path": "n"}, BAD),
    "delete-with-if-match": ({"op": "delete", "model": "a", "ifMatch": '"999"'}, BAD),
    "put-with-path": ({"op": "put", "model": "a", "path": "n", "value": {"x": 1}}, BAD),
    "set-with-unknown": ({"op": "set", "model": "a", "path": "n", "value": 2, "bogus": True}, BAD),
    "patch-with-if-version": ({"op": "patch", "model": "a", "value": {"n": 2}, "ifVersion": 0}, BAD),
}


@pytest.mark.parametrize("invalid, expected", list(INVALID_OPS.values()), ids=list(INVALID_OPS))
def test_invalid_change_set_applies_nothing(server, invalid, expected):
    store = fresh_store(server.port)
    put_model(server.port, store, "a", {"n": 1}, 201)
    put_model(server.port, store, "b", {"name": "b"}, 201)
    before = store_snapshot(server.port, store)
    changes = [
        {"op": "put", "model": "fresh", "value": {"k": 1}},
        {"op": "patch", "model": "a", "value": {"n": 99}},
        invalid,
        {"op": "set", "model": "b", "path": "p.q", "value": 1},
        {"op": "delete", "model": "b"},
    ]
    assert_json_error(post_changes(server.port, store, changes), expected)
    assert store_snapshot(server.port, store) == before
    assert_json_error(api(server.port, "GET", model_path(store, "fresh")), 404, "not_found")
    # The store still takes a valid change set afterwards, at the next version.
    assert json_ok(post_changes(server.port, store, changes[:2]))["version"] == before["version"] + 1


@pytest.mark.parametrize("body", [
    b'{"changes":[]}', b"{}", b'{"changes":{}}', b'{"changes":"put"}', b'{"changes":null}',
    b'{"changes":[', b"[]", b"",
], ids=["empty-list", "no-changes", "object", "string", "null", "truncated", "array", "empty-body"])
def test_malformed_change_set_is_400(server, body):
    store = fresh_store(server.port)
    put_model(server.port, store, "a", {"n": 1}, 201)
    resp = api(server.port, "POST", f"/api/stores/{store}/changes", body=body)
    assert_json_error(resp, 400, "bad_request")
    assert plain_snapshot(server.port, store) == {"store": store, "version": 1, "models": {"a": {"n": 1}}}


def test_set_creates_intermediate_objects(server):
    store = fresh_store(server.port)
    put_model(server.port, store, "m", {"name": "x"}, 201)

    def set_path(path, value, version):
        resp = post_changes(server.port, store, [{"op": "set", "model": "m", "path": path, "value": value}])
        assert json_ok(resp) == {"store": store, "version": version, "changes": 1}
        return get_model(server.port, store, "m")["value"]

    assert set_path("style.border.width", 3, 2) == {"name": "x", "style": {"border": {"width": 3}}}
    assert set_path("style.border.color", "red", 3) == {
        "name": "x", "style": {"border": {"width": 3, "color": "red"}}}
    assert set_path("style.border.width", 5, 4) == {
        "name": "x", "style": {"border": {"width": 5, "color": "red"}}}
    assert set_path("name", {"first": "a"}, 5) == {
        "name": {"first": "a"}, "style": {"border": {"width": 5, "color": "red"}}}
    assert store_version(server.port, store) == 5


def test_a_commit_whose_operation_has_a_member_it_does_not_take_is_a_bad_message(server):
    """Over WebSocket too: the `commit` is answered `bad_message`, naming the member, and nothing
    is applied."""
    store = fresh_store(server.port)
    put_model(server.port, store, "a", {"n": 1}, 201)
    before = store_snapshot(server.port, store)
    with connect(server.port) as ws:
        ws.send(json.dumps({"type": "commit", "store": store, "ref": "c1",
                            "changes": [{"op": "delete", "model": "a", "path": "n"}]}))
        answer = recv_json(ws)
    assert (answer["type"], answer["code"], answer["ref"]) == ("error", "bad_message", "c1"), answer
    assert "'path'" in answer["message"], answer
    assert store_snapshot(server.port, store) == before
