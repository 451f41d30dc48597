"""Stores and models: creation, CRUD, JSON Merge Patch, atomic change sets, versions, demo data."""

import itertools
import json
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import (
    api,
    assert_allow,
    assert_json_error,
    curl,
    http_client_request,
    json_ok,
    store_snapshot,
    store_version,
    wait_version_above,
)

COLOR = re.compile(r"#[0-9a-fA-F]{6}")
TILE_IDS = {f"tile-{i}" for i in range(64)}
_sequence = itertools.count()



def plain_snapshot(port: int, store: str) -> dict:
    """The snapshot without its epoch, which is random; checked for shape here."""
    snapshot = store_snapshot(port, store)
    assert re.fullmatch(r"[0-9a-f]{16}", snapshot.pop("epoch")), "every store has an epoch"
    return snapshot

def fresh_store(port: int, prefix: str = "s") -> str:
    """Create a store with a name unused on this server and check the answer."""
    name = f"{prefix}-{next(_sequence)}"
    assert json_ok(api(port, "POST", "/api/stores", {"name": name}), 201) == {"name": name, "version": 0}
    return name


def model_path(store: str, model: str) -> str:
    return f"/api/stores/{store}/models/{model}"


def put_model(port: int, store: str, model: str, value: dict, status: int | None = None) -> int:
    """PUT a model; returns the version the response reports."""
    resp = api(port, "PUT", model_path(store, model), value)
    body = json_ok(resp, status if status is not None else resp.status)
    assert resp.status in (200, 201), resp.body
    assert set(body) == {"store", "id", "version"}, body
    assert body["store"] == store and body["id"] == model, body
    return body["version"]


def get_model(port: int, store: str, model: str) -> dict:
    body = json_ok(api(port, "GET", model_path(store, model)))
    assert set(body) == {"store", "id", "version", "value"}, body
    assert body["store"] == store and body["id"] == model, body
    return body


def post_changes(port: int, store: str, changes):
    return api(port, "POST", f"/api/stores/{store}/changes", {"changes": changes})


def stores_listing(port: int) -> list[dict]:
    body = json_ok(api(port, "GET", "/api/stores"))
    assert set(body) == {"stores"}, body
    return body["stores"]


def assert_tile_shape(models: dict) -> None:
    assert set(models) == TILE_IDS, sorted(set(models) ^ TILE_IDS)[:10]
    for model_id, value in models.items():
        assert set(value) == {"color", "label"}, (model_id, value)
        assert COLOR.fullmatch(value["color"]), (model_id, value)
        assert value["label"] == f"Tile {model_id.removeprefix('tile-')}", (model_id, value)


@pytest.fixture(scope="module")
def demo_server(module_servers):
    return module_servers("--demo")


# ---- Stores ------------------------------------------------------------

def test_no_stores_exist_without_demo(start_server):
    server = start_server()
    assert stores_listing(server.port) == []
    assert_json_error(api(server.port, "GET", "/api/stores/tiles"), 404, "not_found")


def test_created_store_is_listed_and_readable(server):
    name = fresh_store(server.port)
    assert {"name": name, "version": 0, "models": 0} in stores_listing(server.port)
    assert plain_snapshot(server.port, name) == {"store": name, "version": 0, "models": {}}


def test_store_listing_is_sorted_and_counts_models(start_server):
    server = start_server()
    names = ["zeta", "alpha", "mid_1", "beta.2", "beta-10"]
    for name in names:
        assert json_ok(api(server.port, "POST", "/api/stores", {"name": name}), 201)["version"] == 0
    put_model(server.port, "alpha", "one", {"n": 1}, 201)
    put_model(server.port, "alpha", "two", {"n": 2}, 201)
    listing = stores_listing(server.port)
    assert [s["name"] for s in listing] == sorted(names)
    by_name = {s["name"]: s for s in listing}
    assert by_name["alpha"] == {"name": "alpha", "version": 2, "models": 2}
    assert by_name["zeta"] == {"name": "zeta", "version": 0, "models": 0}


@pytest.mark.parametrize("name", ["A", "x" * 64, "Az09_.-", "-", "..."])
def test_store_names_within_the_pattern_are_accepted(server, name):
    assert json_ok(api(server.port, "POST", "/api/stores", {"name": name}), 201) == {"name": name, "version": 0}
    assert store_snapshot(server.port, name)["store"] == name


@pytest.mark.parametrize("payload", [
    {"name": ""}, {"name": "x" * 65}, {"name": "has space"}, {"name": "slash/name"},
    {"name": "caf\u00e9"}, {"name": "semi;colon"}, {"name": 5}, {"name": None}, {"name": ["a"]}, {},
], ids=["empty", "65-chars", "space", "slash", "non-ascii", "semicolon", "number", "null", "list",
        "missing"])
def test_bad_store_name_is_400(server, payload):
    before = stores_listing(server.port)
    assert_json_error(api(server.port, "POST", "/api/stores", payload), 400, "bad_request")
    assert stores_listing(server.port) == before


@pytest.mark.parametrize("body", [b'{"name":', b"not json", b"", b"[]", b'"s1"', b'{"name":"a"} x'],
                         ids=["truncated", "garbage", "empty", "array", "string", "trailing-garbage"])
def test_malformed_store_creation_body_is_400(server, body):
    before = stores_listing(server.port)
    assert_json_error(api(server.port, "POST", "/api/stores", body=body), 400, "bad_request")
    assert stores_listing(server.port) == before


def test_duplicate_store_is_409_and_leaves_it_intact(server):
    name = fresh_store(server.port)
    put_model(server.port, name, "keep", {"kept": True}, 201)
    assert_json_error(api(server.port, "POST", "/api/stores", {"name": name}), 409, "conflict")
    assert plain_snapshot(server.port, name) == {"store": name, "version": 1, "models": {"keep": {"kept": True}}}
    assert [s for s in stores_listing(server.port) if s["name"] == name] == [
        {"name": name, "version": 1, "models": 1}]


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


# ---- Versions ----------------------------------------------------------

def test_versions_rise_by_exactly_one_per_mutation(server):
    store = fresh_store(server.port)
    steps = [
        lambda: api(server.port, "PUT", model_path(store, "a"), {"n": 1}),
        lambda: api(server.port, "PUT", model_path(store, "b"), {"n": 2}),
        lambda: api(server.port, "PUT", model_path(store, "a"), {"n": 3}),
        lambda: api(server.port, "PATCH", model_path(store, "b"), {"m": 4}),
        lambda: post_changes(server.port, store, [{"op": "set", "model": "a", "path": "x.y", "value": 5}]),
        lambda: api(server.port, "DELETE", model_path(store, "b")),
        lambda: post_changes(server.port, store, [{"op": "put", "model": "c", "value": {"n": 6}},
                                                  {"op": "delete", "model": "a"}]),
    ]
    expected = 0
    for step in steps:
        resp = step()
        assert resp.status in (200, 201), resp.body
        expected += 1
        assert resp.json()["version"] == expected, resp.body
        assert store_version(server.port, store) == expected
    assert store_snapshot(server.port, store)["models"] == {"c": {"n": 6}}


def test_concurrent_mutations_get_distinct_consecutive_versions(server):
    store = fresh_store(server.port)
    writers, writes = 4, 15

    def write(writer):
        versions = []
        for i in range(writes):
            resp = api(server.port, "PUT", model_path(store, f"w{writer}-{i % 5}"), {"writer": writer, "i": i})
            assert resp.status in (200, 201), resp.body
            versions.append(resp.json()["version"])
        return versions

    with ThreadPoolExecutor(writers) as pool:
        results = list(pool.map(write, range(writers)))
    for versions in results:
        assert versions == sorted(versions), "one client's commits must be ordered"
    assert sorted(v for versions in results for v in versions) == list(range(1, writers * writes + 1))
    snapshot = store_snapshot(server.port, store)
    assert snapshot["version"] == writers * writes
    assert snapshot["models"] == {f"w{w}-{k}": {"writer": w, "i": 10 + k} for w in range(writers) for k in range(5)}


# ---- Errors on routes --------------------------------------------------

UNKNOWN_STORE_ROUTES = [
    ("GET", "/api/stores/nope", None),
    ("GET", "/api/stores/nope/models/m", None),
    ("PUT", "/api/stores/nope/models/m", {"a": 1}),
    ("PATCH", "/api/stores/nope/models/m", {"a": 1}),
    ("DELETE", "/api/stores/nope/models/m", None),
    ("POST", "/api/stores/nope/changes", {"changes": [{"op": "put", "model": "m", "value": {}}]}),
]


@pytest.mark.parametrize("method, path, payload", UNKNOWN_STORE_ROUTES,
                         ids=[f"{m}-{p.rsplit('/', 1)[-1]}" for m, p, _ in UNKNOWN_STORE_ROUTES])
def test_unknown_store_is_404(server, method, path, payload):
    resp = api(server.port, method, path, payload) if payload is not None else api(server.port, method, path)
    assert_json_error(resp, 404, "not_found")
    assert "nope" not in {s["name"] for s in stores_listing(server.port)}


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_unknown_model_is_404(server, method):
    store = fresh_store(server.port)
    put_model(server.port, store, "real", {"r": 1}, 201)
    assert_json_error(api(server.port, method, model_path(store, "ghost")), 404, "not_found")
    assert plain_snapshot(server.port, store) == {"store": store, "version": 1, "models": {"real": {"r": 1}}}


WRONG_METHODS = [
    ("PUT", "/api/stores", {"GET", "POST"}),
    ("DELETE", "/api/stores", {"GET", "POST"}),
    ("PATCH", "/api/stores/{store}", {"GET", "DELETE"}),
    ("POST", "/api/stores/{store}/models/m", {"GET", "PUT", "PATCH", "DELETE"}),
    ("PUT", "/api/stores/{store}/changes", {"GET", "POST"}),
]


@pytest.mark.parametrize("method, path, allowed", WRONG_METHODS,
                         ids=[f"{m}-{p.rsplit('/', 1)[-1]}" for m, p, _ in WRONG_METHODS])
def test_wrong_method_is_405_with_allow(server, method, path, allowed):
    store = fresh_store(server.port)
    put_model(server.port, store, "m", {"v": 1}, 201)
    resp = api(server.port, method, path.format(store=store), body=b"{}")
    assert_allow(resp, method, allowed)
    assert plain_snapshot(server.port, store) == {"store": store, "version": 1, "models": {"m": {"v": 1}}}


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


# ---- Demo data ---------------------------------------------------------

def test_demo_creates_64_tiles(demo_server):
    listing = stores_listing(demo_server.port)
    assert [s["name"] for s in listing] == ["tiles"]
    assert listing[0]["models"] == 64
    assert isinstance(listing[0]["version"], int) and listing[0]["version"] >= 0
    snapshot = store_snapshot(demo_server.port, "tiles")
    assert snapshot["store"] == "tiles" and snapshot["version"] >= listing[0]["version"]
    assert_tile_shape(snapshot["models"])
    tile = get_model(demo_server.port, "tiles", "tile-63")
    assert tile["value"]["label"] == "Tile 63" and COLOR.fullmatch(tile["value"]["color"])


def test_demo_from_environment(start_server):
    server = start_server(env={"RECEPTIONIST_DEMO": "1"})
    assert "--demo" not in server.argv
    assert [s["name"] for s in stores_listing(server.port)] == ["tiles"]
    assert_tile_shape(store_snapshot(server.port, "tiles")["models"])


def test_client_writes_commit_alongside_the_demo_job(demo_server):
    port = demo_server.port
    resp = api(port, "PATCH", model_path("tiles", "tile-5"), {"label": "Picked", "pinned": True})
    written = json_ok(resp)["version"]
    assert set(json_ok(resp)) == {"store", "id", "version"}
    tile = get_model(port, "tiles", "tile-5")
    assert tile["version"] >= written
    assert tile["value"]["label"] == "Picked" and tile["value"]["pinned"] is True
    assert COLOR.fullmatch(tile["value"]["color"])

    # While the job keeps recoloring, the client's keys survive.
    wait_version_above(port, "tiles", written + 5)
    value = get_model(port, "tiles", "tile-5")["value"]
    assert value["label"] == "Picked" and value["pinned"] is True, value
    resp = api(port, "PUT", model_path("tiles", "tile-5"), {"color": "#123456", "label": "Tile 5"})
    assert json_ok(resp, 200)["version"] > written
    # Restored to the demo shape for the other tests on this server.
    assert_tile_shape(store_snapshot(port, "tiles")["models"])
