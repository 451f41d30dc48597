"""A store's models: PUT, GET and DELETE of JSON values, and PATCH as JSON Merge Patch (RFC 7386)."""

import json

import pytest

from conftest import api, assert_json_error, curl, http_client_request, json_ok, store_snapshot, store_version
from test_stores import fresh_store, get_model, model_path, plain_snapshot, put_model


# ---- Models: PUT, GET, DELETE ------------------------------------------

def test_put_creates_then_replaces_model(server):
    store = fresh_store(server.port)
    first = {"title": "first", "style": {"color": "red"}, "tags": ["a", "b"]}
    assert put_model(server.port, store, "m1", first, 201) == 1
    assert get_model(server.port, store, "m1") == {"store": store, "id": "m1", "version": 1, "value": first}

    second = {"title": "second", "size": 3}
    assert put_model(server.port, store, "m1", second, 200) == 2
    # A PUT replaces the whole model: keys of the first value are gone.
    assert get_model(server.port, store, "m1")["value"] == second
    assert plain_snapshot(server.port, store) == {"store": store, "version": 2, "models": {"m1": second}}


RICH_VALUE = {
    "text": "snow \u2603, quote \" backslash \\ newline \n tab \t slash /",
    "numbers": [0, 1, -2, 3.5, -0.25, 1000, 123456789],
    "flags": [True, False, None],
    "nothing": None,
    "empty_object": {},
    "empty_list": [],
    "nested": {"a": {"b": {"c": [{"d": "e"}, [1, [2, [3]]]]}}},
}


@pytest.mark.parametrize("ascii_only", [True, False], ids=["escaped", "utf8"])
def test_json_values_round_trip(server, ascii_only):
    store = fresh_store(server.port)
    body = json.dumps(RICH_VALUE, ensure_ascii=ascii_only).encode("utf-8")
    resp = api(server.port, "PUT", model_path(store, "rich"), body=body)
    assert json_ok(resp, 201) == {"store": store, "id": "rich", "version": 1}
    assert get_model(server.port, store, "rich")["value"] == RICH_VALUE
    assert store_snapshot(server.port, store)["models"] == {"rich": RICH_VALUE}


def test_delete_model(server):
    store = fresh_store(server.port)
    put_model(server.port, store, "doomed", {"x": 1}, 201)
    put_model(server.port, store, "kept", {"y": 2}, 201)
    resp = api(server.port, "DELETE", model_path(store, "doomed"))
    assert json_ok(resp) == {"store": store, "id": "doomed", "version": 3}
    assert_json_error(api(server.port, "GET", model_path(store, "doomed")), 404, "not_found")
    assert plain_snapshot(server.port, store) == {"store": store, "version": 3, "models": {"kept": {"y": 2}}}

    assert_json_error(api(server.port, "DELETE", model_path(store, "doomed")), 404, "not_found")
    assert store_version(server.port, store) == 3, "a failed delete must not bump the version"
    # The id is free again.
    assert put_model(server.port, store, "doomed", {"x": 2}, 201) == 4


@pytest.mark.parametrize("body", [b"[1]", b'"x"', b"3", b"null", b"true", b'{"a":', b"", b"{} {}"],
                         ids=["array", "string", "number", "null", "bool", "truncated", "empty",
                              "two-values"])
def test_put_non_object_or_bad_json_is_400(server, body):
    store = fresh_store(server.port)
    put_model(server.port, store, "m", {"v": 1}, 201)
    assert_json_error(api(server.port, "PUT", model_path(store, "m"), body=body), 400, "bad_request")
    assert_json_error(api(server.port, "PUT", model_path(store, "new"), body=body), 400, "bad_request")
    assert plain_snapshot(server.port, store) == {"store": store, "version": 1, "models": {"m": {"v": 1}}}


def test_put_over_body_limit_is_413(start_server):
    server = start_server("--max-body-bytes", "200")
    store = fresh_store(server.port)
    put_model(server.port, store, "m", {"fits": "x" * 100}, 201)
    resp = api(server.port, "PUT", model_path(store, "m"), {"too_big": "x" * 400})
    assert_json_error(resp, 413, "payload_too_large")
    assert get_model(server.port, store, "m") == {
        "store": store, "id": "m", "version": 1, "value": {"fits": "x" * 100}}


# ---- Models: PATCH (JSON Merge Patch) ----------------------------------

def test_patch_with_curl_merges_nested_objects_and_deletes_nulls(server):
    store = fresh_store(server.port)
    original = {
        "title": "card",
        "style": {"color": "red", "border": {"width": 1, "style": "solid"}},
        "tags": ["x"],
        "obsolete": True,
    }
    version = put_model(server.port, store, "card", original, 201)
    patch = {
        "style": {"border": {"width": 3}, "color": None},
        "tags": ["y", "z"],
        "obsolete": None,
        "added": {"deep": None, "k": 1},
    }
    resp = curl(server.port, model_path(store, "card"), "-X", "PATCH",
                "-H", "Content-Type: application/json", "--data-binary", json.dumps(patch))
    assert json_ok(resp) == {"store": store, "id": "card", "version": version + 1}

    # Read back with a different client.
    resp = http_client_request(server.port, "GET", model_path(store, "card"))
    assert json_ok(resp) == {
        "store": store,
        "id": "card",
        "version": version + 1,
        "value": {
            "title": "card",
            "style": {"border": {"width": 3, "style": "solid"}},
            "tags": ["y", "z"],
            "added": {"k": 1},
        },
    }


# RFC 7386 appendix A, restricted to the cases where target and patch are objects.
@pytest.mark.parametrize("method, value", [
    ("PUT", {"a.b": 5}), ("PUT", {"x": {"": 1}}), ("PUT", {"x": [{"q": {"k.": 1}}]}),
    ("PATCH", {"a.b": 5}), ("PATCH", {"q": {"": 1}}), ("PATCH", {"": 7}),
    ("set", {"ok": {"a.b": 1}}),
], ids=["put-dot", "put-empty", "put-in-array", "patch-dot", "patch-nested-empty", "patch-empty", "set-dot"])
def test_a_member_name_a_key_path_cannot_name_is_400(server, method, value):
    """A change names what it changed by a dotted key path: a member named `a.b`, or ``, would
    reach subscribers as a path they apply elsewhere (`a` → `b`, or the whole model). Before, the
    write was taken and a subscriber applying `{"path":"a.b"}` nested it, and one applying
    `{"path":""}` replaced the whole model."""
    store = fresh_store(server.port)
    put_model(server.port, store, "m", {"x": 1}, 201)
    if method == "set":
        resp = api(server.port, "POST", f"/api/stores/{store}/changes",
                   {"changes": [{"op": "set", "model": "m", "path": "y", "value": value}]})
    else:
        resp = api(server.port, method, model_path(store, "m"), value)
    assert_json_error(resp, 400, "bad_request")
    assert "member name" in resp.json()["detail"], resp.body
    assert plain_snapshot(server.port, store) == {"store": store, "version": 1, "models": {"m": {"x": 1}}}


RFC7386_CASES = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ({"a": {"b": 1}}, {"a": 5}, {"a": 5}),
    ({"a": "s"}, {"a": {"x": None, "y": 2}}, {"a": {"y": 2}}),
]


@pytest.mark.parametrize("target, patch, expected", RFC7386_CASES, ids=[str(i) for i in range(len(RFC7386_CASES))])
def test_merge_patch_follows_rfc7386(server, target, patch, expected):
    store = fresh_store(server.port)
    put_model(server.port, store, "m", target, 201)
    assert json_ok(api(server.port, "PATCH", model_path(store, "m"), patch)) == {
        "store": store, "id": "m", "version": 2}
    assert get_model(server.port, store, "m") == {"store": store, "id": "m", "version": 2, "value": expected}


@pytest.mark.parametrize("body", [b"[1]", b'"x"', b"3", b"null", b"true", b'{"a":', b"", b"{x}"],
                         ids=["array", "string", "number", "null", "bool", "truncated", "empty",
                              "invalid"])
def test_patch_non_object_or_bad_json_is_400(server, body):
    store = fresh_store(server.port)
    put_model(server.port, store, "m", {"v": 1, "nested": {"k": "v"}}, 201)
    assert_json_error(api(server.port, "PATCH", model_path(store, "m"), body=body), 400, "bad_request")
    assert get_model(server.port, store, "m") == {
        "store": store, "id": "m", "version": 1, "value": {"v": 1, "nested": {"k": "v"}}}


def test_patch_of_missing_model_is_404_and_creates_nothing(server):
    store = fresh_store(server.port)
    assert_json_error(api(server.port, "PATCH", model_path(store, "ghost"), {"a": 1}), 404, "not_found")
    assert plain_snapshot(server.port, store) == {"store": store, "version": 0, "models": {}}


def test_a_string_written_another_way_is_a_change_every_subscriber_gets(server):
    """`é` as one code point and as `e` with a combining accent are two texts. A patch from one to
    the other is a change: stored, numbered and sent to a subscriber whose `paths` holds it.
    Before, the store took them for one value: the patch was answered and dropped, or the value
    changed with no frame to a `paths` subscriber, which kept the old text for good."""
    from wsclient import connect, recv_json, subscribe
    store = fresh_store(server.port)
    put_model(server.port, store, "m", {"x": {"k": "\u00e9"}, "y": 1}, 201)
    with connect(server.port) as ws:
        assert subscribe(ws, store=store, paths=["x.k"])["type"] == "snapshot"
        resp = api(server.port, "PATCH", model_path(store, "m"), body=b'{"x":{"k":"e\\u0301"}}')
        assert json_ok(resp)["version"] == 2, resp.body
        frame = recv_json(ws)
        assert frame["type"] == "changes" and frame["version"] == 2, frame
        assert frame["changes"][0]["value"] == "e\u0301", frame
    assert get_model(server.port, store, "m")["value"] == {"x": {"k": "e\u0301"}, "y": 1}


@pytest.mark.parametrize("model", [".", ".."])
def test_a_model_id_no_url_can_name_is_400(server, model):
    """`.` and `..` are path segments every client resolves: a model named `..` could never be
    read, and a client's `DELETE /api/stores/s/models/..` became `DELETE /api/stores/s`, the
    whole store. Refused when written, over HTTP and WebSocket alike; the store is untouched."""
    from wsclient import connect, recv_json, send_json
    store = fresh_store(server.port)
    put_model(server.port, store, "m", {"x": 1}, 201)
    resp = api(server.port, "POST", f"/api/stores/{store}/changes",
               {"changes": [{"op": "put", "model": model, "value": {"x": 2}}]})
    assert_json_error(resp, 400, "bad_request")
    assert "not a valid model id" in json.loads(resp.body)["detail"]
    with connect(server.port) as ws:
        send_json(ws, {"type": "commit", "store": store, "ref": "c1",
                       "changes": [{"op": "put", "model": model, "value": {"x": 2}}]})
        answer = recv_json(ws)
        assert (answer["type"], answer["code"], answer["ref"]) == ("error", "bad_message", "c1"), answer
    assert plain_snapshot(server.port, store) == {"store": store, "version": 1, "models": {"m": {"x": 1}}}
