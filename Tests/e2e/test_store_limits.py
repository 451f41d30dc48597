"""`--max-stores`: a creation past it is refused with 503 until one is deleted. Before, nothing
bounded the stores: 19,736 made by one client took 100 MiB, and `GET /api/stores` listed all."""

from __future__ import annotations

from conftest import api, assert_json_error, json_ok


def test_a_store_past_the_limit_is_503_until_one_is_deleted(start_server):
    port = start_server("--max-stores", "3").port
    for name in ("a", "b", "c"):
        json_ok(api(port, "POST", "/api/stores", {"name": name}), 201)
    assert_json_error(api(port, "POST", "/api/stores", {"name": "d"}), 503, "over_capacity")
    assert [s["name"] for s in json_ok(api(port, "GET", "/api/stores"))["stores"]] == ["a", "b", "c"]
    json_ok(api(port, "DELETE", "/api/stores/b"))
    json_ok(api(port, "POST", "/api/stores", {"name": "d"}), 201)
    assert_json_error(api(port, "POST", "/api/stores", {"name": "e"}), 503, "over_capacity")


def test_at_the_limit_a_store_that_exists_is_still_409(start_server):
    """A creation of a name already taken is a conflict, limit or not: a client (and the demo
    store's own start) takes `409` as "already there"."""
    port = start_server("--max-stores", "1").port
    json_ok(api(port, "POST", "/api/stores", {"name": "only"}), 201)
    assert_json_error(api(port, "POST", "/api/stores", {"name": "only"}), 409, "conflict")
