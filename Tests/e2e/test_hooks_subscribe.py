"""The subscribe and refresh hooks (docs/HOOKS.md): a subscription no grant covers is allowed, narrowed to the
key paths the backend allows (in the snapshot, the changes and a resume alike), or refused; and
answers keep the order the client asked in."""

from __future__ import annotations

import json
import socket
import time

import jwt
import pytest
from websockets.exceptions import ConnectionClosed

from conftest import http_client_request, json_ok
from hooks import API_KEY, Backend, cookie
from wsclient import connect, recv_json, send_json, subscribe, unique


@pytest.fixture(scope="module")
def gateway(module_servers, tmp_path_factory):
    backend = Backend(tmp_path_factory.mktemp("backend"))
    server = module_servers("--api-key", API_KEY, *backend.hook_args("connect", "subscribe"))
    yield server
    backend.stop()


def keyed(port: int, method: str, path: str, payload) -> dict:
    resp = http_client_request(port, method, path, body=json.dumps(payload).encode(),
                               headers={"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"})
    return json_ok(resp, 201 if path == "/api/stores" or path.endswith("/messages") or method == "PUT" else 200)


def narrow_store(port: int) -> str:
    name = unique("narrow-board")
    keyed(port, "POST", "/api/stores", {"name": name})
    keyed(port, "POST", f"/api/stores/{name}/changes", {"changes": [
        {"op": "put", "model": "a", "value": {"color": "red", "label": "A", "secret": 1}},
        {"op": "put", "model": "b", "value": {"color": "blue", "label": "B"}}]})
    return name


def test_a_narrowed_subscription_sees_only_the_allowed_paths_in_snapshot_changes_and_resume(gateway):
    store = narrow_store(gateway.port)
    with connect(gateway.port, additional_headers=cookie("bob")) as ws:
        snapshot = subscribe(ws, store=store)
        assert snapshot["type"] == "snapshot", snapshot
        assert snapshot["models"] == {"a": {"color": "red"}, "b": {"color": "blue"}}, snapshot
        # Asked for with no options: the filter the hook set is named, so that the client knows
        # a version it is not sent is filtered out, not lost.
        assert snapshot["filter"] == {"paths": ["color"]}, snapshot
        keyed(gateway.port, "POST", f"/api/stores/{store}/changes", {"changes": [
            {"op": "set", "model": "a", "path": "label", "value": "AA"},
            {"op": "set", "model": "a", "path": "color", "value": "green"}]})
        frame = recv_json(ws)
        assert frame["type"] == "changes" and frame["version"] == 2, frame
        assert [(c["model"], c["path"], c.get("value")) for c in frame["changes"]] == [("a", "color", "green")], frame
        since, epoch = frame["version"], snapshot["epoch"]
    # Missed while away: only what the hook allows is replayed.
    keyed(gateway.port, "POST", f"/api/stores/{store}/changes", {"changes": [
        {"op": "set", "model": "b", "path": "label", "value": "BB"},
        {"op": "set", "model": "b", "path": "color", "value": "black"}]})
    with connect(gateway.port, additional_headers=cookie("bob")) as ws:
        resumed = subscribe(ws, store=store, since=since, epoch=epoch)
        assert resumed["type"] == "subscribed" and resumed["resumed"] is True, resumed
        assert resumed["filter"] == {"paths": ["color"]}, resumed
        replay = recv_json(ws)
        assert replay["type"] == "changes" and replay["version"] == 3, replay
        assert [(c["model"], c["path"], c.get("value")) for c in replay["changes"]] == [("b", "color", "black")], replay


def test_answers_keep_the_order_they_were_asked_in(gateway):
    store = narrow_store(gateway.port)
    with connect(gateway.port, additional_headers=cookie("bob")) as ws:
        # The first waits for the backend; the second is granted at once, and answered after it.
        send_json(ws, {"type": "subscribe", "store": store})
        send_json(ws, {"type": "subscribe", "topic": "chat"})
        send_json(ws, {"type": "subscribe", "store": "deny-this"})
        assert recv_json(ws)["type"] == "snapshot"
        assert recv_json(ws)["type"] == "subscribed"
        refused = recv_json(ws)
        assert refused == {"type": "error", "code": "forbidden", "message": "bob may not see deny-this"}, refused


def test_sse_is_narrowed_or_refused_with_a_status(gateway):
    store = narrow_store(gateway.port)
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=5) as sock:
        sock.sendall(f"GET /api/stores/{store}/events HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: session=bob\r\n\r\n".encode())
        received = b""
        while b"\n\n" not in received.partition(b"event: snapshot")[2]:
            chunk = sock.recv(4096)
            assert chunk, received
            received += chunk
    assert received.startswith(b"HTTP/1.1 200 OK\r\n"), received
    data = received.partition(b"event: snapshot")[2].split(b"data: ", 1)[1].split(b"\n", 1)[0]
    assert json.loads(data)["models"] == {"a": {"color": "red"}, "b": {"color": "blue"}}, data
    denied = unique("deny-board")
    keyed(gateway.port, "POST", "/api/stores", {"name": denied})
    resp = http_client_request(gateway.port, "GET", f"/api/stores/{denied}/events", headers=cookie("bob"))
    assert resp.status == 403 and resp.json() == {"error": "forbidden", "detail": f"bob may not see {denied}"}, resp


def test_the_refresh_hook_extends_a_grant_or_ends_the_connection(start_server, tmp_path):
    backend = Backend(tmp_path / "backend")
    gateway = start_server("--api-key", API_KEY, *backend.hook_args("connect", "refresh"))
    started = time.monotonic()
    try:
        with connect(gateway.port, additional_headers=cookie("carol")) as carol, \
             connect(gateway.port, additional_headers=cookie("dave")) as dave:
            assert subscribe(carol, topic="chat")["type"] == "subscribed"
            assert subscribe(dave, topic="chat")["type"] == "subscribed"
            # dave's grant ends 5.5 s after it was given; the backend will not extend it.
            refused = recv_json(dave, timeout=3)
            assert refused == {"type": "error", "code": "token_expired", "message": "dave's session has ended"}, refused
            with pytest.raises(ConnectionClosed) as closed:
                dave.recv(timeout=3)
            assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1008, "expired"), closed.value
            # carol's was extended: past its first end, she still gets what is published.
            time.sleep(max(0.0, 6.0 - (time.monotonic() - started)))
            keyed(gateway.port, "POST", "/api/topics/chat/messages", {"n": 1})
            message = recv_json(carol)
            assert message["type"] == "message" and message["data"] == {"n": 1}, message
        assert backend.stats()["calls"]["refresh"] == 2
    finally:
        backend.stop()


def test_a_token_presented_after_the_connect_hooks_grant_runs_out_at_its_own_exp(start_server, tmp_path):
    """The refresh hook extends the connect hook's grant only: once the client presents a token
    (`auth`), the token's `exp` holds. Before, the refresh hook was asked about the token and its
    answer kept the connection open long past `exp`."""
    secret = "refresh-secret-of-thirty-two-bytes"
    backend = Backend(tmp_path / "backend")
    gateway = start_server("--api-key", API_KEY, "--token-secret", secret, *backend.hook_args("connect", "refresh"))
    try:
        with connect(gateway.port, additional_headers=cookie("carol")) as carol:
            assert subscribe(carol, topic="chat")["type"] == "subscribed"
            exp = int(time.time()) + 3
            token = jwt.encode({"sub": "carol", "exp": exp, "topics": ["chat"]}, secret, algorithm="HS256")
            send_json(carol, {"type": "auth", "token": token})
            assert recv_json(carol)["type"] == "authenticated"
            frames = []
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    frames.append(recv_json(carol, timeout=8))
            assert time.time() < exp + 2, f"open {time.time() - exp:.1f} s past the token's exp"
            assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1008, "token expired"), closed.value
            assert frames and frames[-1]["code"] == "token_expired", frames
    finally:
        backend.stop()


def test_a_namespace_that_asks_no_subscribe_hook_refuses_reads_the_grant_does_not_cover(start_server, tmp_path):
    """A namespace whose `hooks` leave out the subscribe hook is decided by the grant alone, for a
    read over HTTP as for a subscription. Before, the read asked the hook anyway, and a hook that
    allows what it is asked (relying on the namespace) let the store out whole."""
    backend = Backend(tmp_path / "backend")
    config = tmp_path / "namespaces.json"
    config.write_text(json.dumps({"namespaces": [{"pattern": "narrow-private*", "hooks": []}]}))
    gateway = start_server("--api-key", API_KEY, "--config", str(config), *backend.hook_args("connect", "subscribe"))
    try:
        private, board = unique("narrow-private"), unique("narrow-board")
        for store in (private, board):
            keyed(gateway.port, "POST", "/api/stores", {"name": store})
            keyed(gateway.port, "PUT", f"/api/stores/{store}/models/a", {"color": "red", "secret": 1})
        with connect(gateway.port, additional_headers=cookie("bob")) as bob:
            refused = subscribe(bob, store=private)
            assert refused["type"] == "error" and refused["code"] == "forbidden", refused
        resp = http_client_request(gateway.port, "GET", f"/api/stores/{private}", headers=cookie("bob"))
        assert resp.status == 403 and resp.json()["error"] == "forbidden", resp.body
        resp = http_client_request(gateway.port, "GET", f"/api/stores/{private}/models/a", headers=cookie("bob"))
        assert resp.status == 403, resp.body
        # Outside the namespace the hook decides, as before: narrowed to what it allows.
        assert json_ok(http_client_request(gateway.port, "GET", f"/api/stores/{board}", headers=cookie("bob")))["models"] == {
            "a": {"color": "red"}}
        assert backend.stats()["calls"].get("subscribe") == 1
    finally:
        backend.stop()


def test_http_reads_are_narrowed_as_subscriptions_are(gateway):
    store = narrow_store(gateway.port)
    bob = cookie("bob")

    def read(path: str, headers: dict):
        return http_client_request(gateway.port, "GET", path, headers=headers)

    snapshot = json_ok(read(f"/api/stores/{store}", bob))
    assert snapshot["models"] == {"a": {"color": "red"}, "b": {"color": "blue"}}, snapshot
    changes = json_ok(read(f"/api/stores/{store}/changes?after=0", bob))["changes"]
    assert [[(c["model"], c["path"]) for c in frame["changes"]] for frame in changes] == [[("a", ""), ("b", "")]], changes
    assert [c["value"] for c in changes[0]["changes"]] == [{"color": "red"}, {"color": "blue"}], changes
    assert json_ok(read(f"/api/stores/{store}/models/a", bob))["value"] == {"color": "red"}
    # Asking for what the hook does not allow gets nothing of it.
    assert read(f"/api/stores/{store}/changes?after=0&paths=label", bob).status == 403
    # The backend, with its key, reads everything; a reader with no session is refused.
    full = json_ok(read(f"/api/stores/{store}", {"Authorization": f"Bearer {API_KEY}"}))
    assert full["models"]["a"] == {"color": "red", "label": "A", "secret": 1}, full
    assert read(f"/api/stores/{store}", {}).status == 401
    denied = unique("deny-board")
    keyed(gateway.port, "POST", "/api/stores", {"name": denied})
    assert read(f"/api/stores/{denied}", bob).status == 403


def test_a_model_outside_the_hooks_models_is_refused_alike_whether_it_exists_or_not(gateway):
    """Before, a hidden model answered 403 and a missing one 404: any reader could list which
    model ids exist beyond what the hook lets it see."""
    store = unique("one-model-board")
    keyed(gateway.port, "POST", "/api/stores", {"name": store})
    keyed(gateway.port, "PUT", f"/api/stores/{store}/models/a", {"n": 1})
    keyed(gateway.port, "PUT", f"/api/stores/{store}/models/hidden", {"n": 2})
    for method in ("GET", "HEAD"):
        seen = http_client_request(gateway.port, method, f"/api/stores/{store}/models/a", headers=cookie("bob"))
        assert seen.status == 200, seen.body
        answers = [http_client_request(gateway.port, method, f"/api/stores/{store}/models/{model}", headers=cookie("bob"))
                   for model in ("hidden", "missing")]
        assert [resp.status for resp in answers] == [403, 403], [resp.body for resp in answers]
    assert http_client_request(gateway.port, "GET", f"/api/stores/{store}/models/missing",
                               headers={"Authorization": f"Bearer {API_KEY}"}).status == 404


def test_http_reads_of_a_topic_are_decided_as_subscriptions_are(gateway):
    allowed, denied = unique("narrow-news"), unique("deny-news")
    for topic in (allowed, denied, "chat"):
        keyed(gateway.port, "POST", f"/api/topics/{topic}/messages", {"text": topic})
    bob = cookie("bob")

    def read(topic: str, headers: dict):
        return http_client_request(gateway.port, "GET", f"/api/topics/{topic}/messages?after=0", headers=headers)

    # Allowed by the hook, or covered by bob's grant (`chat`): the messages as kept.
    for topic in (allowed, "chat"):
        messages = json_ok(read(topic, bob))["messages"]
        assert messages and messages[-1]["data"] == {"text": topic}, messages
    # Refused by the hook: nothing of the topic, a 403 with the hook's reason.
    refused = read(denied, bob)
    assert refused.status == 403 and "may not see" in refused.json()["detail"], refused.body
    # No session: 401; the backend's key reads without asking.
    assert read(denied, {}).status == 401
    assert json_ok(read(denied, {"Authorization": f"Bearer {API_KEY}"}))["messages"][-1]["data"] == {"text": denied}


def test_a_name_none_can_have_is_refused_before_the_hook_and_a_missing_store_after_it(gateway):
    """Before, the hook was asked about an impossible name over WebSocket (a retryable `forbidden`
    where the client must learn `invalid_topic`), and an SSE stream told a missing store from a
    hidden one (404 before the hook; 403 after it)."""
    bob = cookie("bob")
    with connect(gateway.port, additional_headers=bob) as ws:
        send_json(ws, {"type": "subscribe", "topic": "deny-bad!"})
        assert recv_json(ws)["code"] == "invalid_topic"
        send_json(ws, {"type": "subscribe", "store": "deny bad"})
        assert recv_json(ws)["code"] == "bad_message"
    hidden, missing = unique("deny-missing"), unique("narrow-missing")
    resp = http_client_request(gateway.port, "GET", f"/api/stores/{hidden}/events", headers=bob)
    assert resp.status == 403 and resp.json() == {"error": "forbidden", "detail": f"bob may not see {hidden}"}, resp.body
    resp = http_client_request(gateway.port, "GET", f"/api/stores/{missing}/events", headers=bob)
    assert resp.status == 404 and resp.json()["error"] == "not_found", resp.body
