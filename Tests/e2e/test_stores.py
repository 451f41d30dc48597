"""Stores: creation and listing, versions, errors on routes, demo data. Models (CRUD and JSON Merge
Patch) are in test_store_models.py, atomic change sets in test_store_change_sets.py."""

import itertools
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import (
    api,
    assert_allow,
    assert_json_error,
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
    {"name": "."}, {"name": ".."},
], ids=["empty", "65-chars", "space", "slash", "non-ascii", "semicolon", "number", "null", "list",
        "missing", "dot", "dot-dot"])
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
