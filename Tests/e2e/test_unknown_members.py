"""A request body's member the gateway does not know is refused with 400, never ignored: ignored,
a misspelt one (`Rate`) would do something other than what its sender meant, and it could not
tell. Nothing is done."""

import json

from conftest import assert_json_error, http_client_request, json_ok
from wsclient import unique

JSON = {"Content-Type": "application/json"}


def post(port: int, method: str, path: str, body: dict):
    return http_client_request(port, method, path, headers=JSON, body=json.dumps(body).encode())


def assert_unknown(resp, member: str) -> None:
    assert_json_error(resp, 400, "bad_request")
    assert f"unknown member '{member}'" in resp.json()["detail"], resp.body


def test_a_store_job_or_batch_with_an_unknown_member_is_400_and_nothing_is_done(server):
    port, store, topic = server.port, unique("members"), unique("members-topic")
    assert_unknown(post(port, "POST", "/api/stores", {"name": store, "replicas": 3}), "replicas")
    assert_json_error(http_client_request(port, "GET", f"/api/stores/{store}"), 404, "not_found")
    json_ok(post(port, "POST", "/api/stores", {"name": store}), 201)

    jobs_before = json_ok(http_client_request(port, "GET", "/api/jobs"))["jobs"]
    assert_unknown(post(port, "POST", "/api/jobs", {"kind": "animate", "store": store, "Rate": 1}), "Rate")
    assert json_ok(http_client_request(port, "GET", "/api/jobs"))["jobs"] == jobs_before
    job = json_ok(post(port, "POST", "/api/jobs", {"kind": "animate", "store": store, "rate": 1}), 201)
    try:
        assert_unknown(post(port, "PATCH", f"/api/jobs/{job['id']}", {"rate": 2, "burst": 9}), "burst")
        assert json_ok(http_client_request(port, "GET", f"/api/jobs/{job['id']}"))["rate"] == 1
    finally:
        json_ok(http_client_request(port, "DELETE", f"/api/jobs/{job['id']}"))

    for body, member in (({"messages": [{"topic": topic, "data": 1}], "idempotencyKey": "k"}, None),
                         ({"messages": [{"topic": topic, "data": 1}, {"topic": topic, "data": 2, "ttl": 5}]}, "ttl")):
        resp = post(port, "POST", "/api/publish", body)
        if member:
            assert_unknown(resp, member)
        else:
            assert_json_error(resp, 400, "bad_request")
    assert_json_error(http_client_request(port, "GET", f"/api/topics/{topic}/messages?after=0"), 404, "not_found")


def test_a_parameter_that_takes_one_value_given_twice_is_400_and_a_list_may_repeat(server):
    """`?old=true&old=false` was read as its last value, `?presence=true&presence=false` as its
    first: one reading or another settled it silently."""
    port, store, topic = server.port, unique("params"), unique("params-topic")
    json_ok(post(port, "POST", "/api/stores", {"name": store}), 201)
    json_ok(post(port, "POST", f"/api/topics/{topic}/messages", {"n": 1}), 201)
    for path in (f"/api/topics/{topic}/events?since=1&since=0", f"/api/stores/{store}/events?old=true&old=false",
                 f"/api/topics/{topic}/messages?after=0&limit=5&after=1", f"/api/topics/{topic}/presence?stats=1&stats=0"):
        resp = http_client_request(port, "GET", path)
        assert_json_error(resp, 400, "bad_request")
        assert "more than once" in resp.json()["detail"], (path, resp.body)
    changes = json_ok(http_client_request(port, "GET", f"/api/stores/{store}/changes?after=0&models=a&models=b"))
    assert changes["changes"] == [] and changes["through"] == 0
