"""A write's condition is honoured or refused, never skipped: only a model's PUT, PATCH and DELETE
read `If-Match` and `If-None-Match`, and no write reads `If-Unmodified-Since`. Before, a store was
deleted despite its `If-Match`, and a publish went out despite one."""

import json

import pytest

from conftest import assert_json_error, http_client_request, json_ok
from wsclient import unique

JSON = {"Content-Type": "application/json"}


def request(port: int, method: str, path: str, body=None, headers: dict | None = None):
    return http_client_request(port, method, path, headers={**JSON, **(headers or {})},
                               body=None if body is None else json.dumps(body).encode())


@pytest.mark.parametrize("header, value", [("If-Match", '"1"'), ("If-None-Match", "*"), ("If-Unmodified-Since",
                                                                                         "Sun, 06 Nov 1994 08:49:37 GMT")])
def test_a_condition_no_write_here_reads_is_400_and_nothing_is_done(server, header, value):
    port, store, topic = server.port, unique("cond-store"), unique("cond-topic")
    json_ok(request(port, "POST", "/api/stores", {"name": store}), 201)
    json_ok(request(port, "POST", f"/api/topics/{topic}/messages", {"n": 0}), 201)
    refused = [
        ("DELETE", f"/api/stores/{store}", None),
        ("POST", f"/api/topics/{topic}/messages", {"n": 1}),
        ("POST", "/api/publish", {"messages": [{"topic": topic, "data": {"n": 2}}]}),
        ("POST", "/api/stores", {"name": unique("cond-new")}),
    ]
    if header == "If-Unmodified-Since":
        refused.append(("PUT", f"/api/stores/{store}/models/m", {"n": 1}))
    for method, path, body in refused:
        resp = request(port, method, path, body, {header: value})
        assert_json_error(resp, 400, "bad_request")
        assert header in resp.json()["detail"], resp.body
    # Nothing was done: the store is there, empty, and the topic holds its first message only.
    assert json_ok(request(port, "GET", f"/api/stores/{store}"))["version"] == 0
    messages = json_ok(request(port, "GET", f"/api/topics/{topic}/messages?after=0"))["messages"]
    assert [m["data"] for m in messages] == [{"n": 0}], messages
    # Reads may carry them: a cache revalidates with If-None-Match.
    assert request(port, "GET", f"/api/stores/{store}", headers={header: value}).status in (200, 304)
