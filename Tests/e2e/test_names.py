"""A name that can never be a store's or a topic's is a bad request on every route and transport,
answered before any lookup: never a 404, which would say it merely does not exist yet."""

import json

import pytest

from conftest import assert_json_error, http_client_request
from wsclient import connect, recv_json

JSON = {"Content-Type": "application/json"}

# (method, path with NAME, body): every route that names a store.
STORE_ROUTES = [
    ("GET", "/api/stores/NAME", None),
    ("DELETE", "/api/stores/NAME", None),
    ("GET", "/api/stores/NAME/models/m", None),
    ("PUT", "/api/stores/NAME/models/m", b'{"a":1}'),
    ("PATCH", "/api/stores/NAME/models/m", b'{"a":1}'),
    ("DELETE", "/api/stores/NAME/models/m", None),
    ("POST", "/api/stores/NAME/changes", b'{"changes":[{"op":"delete","model":"m"}]}'),
    ("GET", "/api/stores/NAME/events", None),
    ("GET", "/api/stores/NAME/presence", None),
]
TOPIC_ROUTES = [
    ("GET", "/api/topics/NAME/messages", None),
    ("POST", "/api/topics/NAME/messages", b'{"a":1}'),
    ("GET", "/api/topics/NAME/events", None),
    ("GET", "/api/topics/NAME/presence", None),
]
INVALID = ["bad%20name", "x" * 65, "caf%C3%A9", "a%2Cb"]


@pytest.mark.parametrize("method, path, body", STORE_ROUTES + TOPIC_ROUTES)
def test_an_invalid_name_is_400_on_every_route(server, method, path, body):
    kind = "store" if "/stores/" in path else "topic"
    for name in INVALID:
        resp = http_client_request(server.port, method, path.replace("NAME", name), headers=JSON, body=body)
        assert_json_error(resp, 400, "bad_request")
        assert f"not a valid {kind} name" in resp.json()["detail"], resp.body


@pytest.mark.parametrize("method, path, body", STORE_ROUTES)
def test_a_valid_name_of_no_store_is_still_404(server, method, path, body):
    resp = http_client_request(server.port, method, path.replace("NAME", "no-such-store-named"), headers=JSON, body=body)
    assert_json_error(resp, 404, "not_found")


def test_an_invalid_store_name_over_websocket_is_a_bad_message(server):
    with connect(server.port) as ws:
        for message in ({"type": "subscribe", "store": "bad name"},
                        {"type": "commit", "store": "bad name", "changes": [{"op": "delete", "model": "m"}], "ref": "c1"}):
            ws.send(json.dumps(message))
            frame = recv_json(ws)
            assert frame["type"] == "error" and frame["code"] == "bad_message", frame
            assert "not a valid store name" in frame["message"], frame
        ws.send(json.dumps({"type": "subscribe", "store": "no-such-store-named"}))
        assert recv_json(ws)["code"] == "no_such_store"


def test_a_model_id_none_can_have_is_400_for_reads_writes_and_conditions(server):
    """Before, a read of one answered 404 where a write answered 400, and a change set's `ifMatch`
    naming one answered 412."""
    store = "names-models"
    assert http_client_request(server.port, "POST", "/api/stores", headers=JSON,
                               body=json.dumps({"name": store}).encode()).status == 201
    for model in ("a%01b", "x" * 129):
        for method, body in (("GET", None), ("HEAD", None), ("PUT", b'{"a":1}'), ("PATCH", b'{"a":1}'), ("DELETE", None)):
            resp = http_client_request(server.port, method, f"/api/stores/{store}/models/{model}", headers=JSON, body=body)
            assert resp.status == 400, (method, model, resp.status)
            if method != "HEAD":
                assert_json_error(resp, 400, "bad_request")
    body = {"changes": [{"op": "put", "model": "m", "value": {}}], "ifMatch": {"bad\u0001id": "1"}}
    resp = http_client_request(server.port, "POST", f"/api/stores/{store}/changes", headers=JSON, body=json.dumps(body).encode())
    assert_json_error(resp, 400, "bad_request")
    assert "not a valid model id" in resp.json()["detail"], resp.body
