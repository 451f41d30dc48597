"""A token presented again replaces the old one for what is already followed too (docs/SECURITY.md,
"Tokens"): subscriptions the new token does not cover end (`unsubscribed`, reason `forbidden`), so
a narrower token cannot keep the old one's grants past its expiry; and a subscribe sent after the
token ran out is refused at once (`token_expired`, close 1008), not served until the sweep.
"""

from __future__ import annotations

import time

import pytest
import websockets

from conftest import json_ok
from test_trust import SECRET, make_token, request, token_for
from wsclient import connect, recv_json, send_json, subscribe, unique


@pytest.fixture
def stores(start_server):
    server = start_server("--token-secret", SECRET, "--ping-interval", "30")
    names = unique("open"), unique("secret")
    for name in names:
        json_ok(request(server.port, "POST", "/api/stores", {"name": name}), 201)
    return server.port, names


def put(port: int, store: str, n: int) -> None:
    json_ok(request(port, "PUT", f"/api/stores/{store}/models/m", {"n": n}), 201)


def test_a_new_token_ends_the_subscriptions_it_does_not_cover(stores):
    port, (open_store, secret) = stores
    first_expiry = time.time() + 3
    with connect(port, path=f"/ws?token={make_token({'exp': first_expiry, 'stores': [open_store, secret]})}") as ws:
        assert subscribe(ws, store=open_store)["type"] == "snapshot"
        assert subscribe(ws, store=secret)["type"] == "snapshot"
        send_json(ws, {"type": "auth", "token": token_for(3600, stores=[open_store])})
        assert recv_json(ws)["type"] == "authenticated"
        assert recv_json(ws) == {"type": "unsubscribed", "store": secret, "reason": "forbidden"}
        # Past the first token's expiry, the secret store's changes no longer come; the open one's do.
        time.sleep(max(0.0, first_expiry + 0.2 - time.time()))
        put(port, secret, 1)
        put(port, open_store, 1)
        frame = recv_json(ws)
        assert frame["type"] == "changes" and frame["store"] == open_store, frame
        # Subscribing again is checked against the new token.
        error = subscribe(ws, store=secret)
        assert (error["type"], error["code"]) == ("error", "forbidden"), error


def test_a_subscribe_after_the_token_ran_out_is_refused_at_once(stores):
    port, (open_store, _) = stores
    expires = time.time() + 1.5
    with connect(port, path=f"/ws?token={make_token({'exp': expires, 'stores': [open_store]})}") as ws:
        assert subscribe(ws, store=open_store)["type"] == "snapshot"
        send_json(ws, {"type": "unsubscribe", "store": open_store})
        assert recv_json(ws)["type"] == "unsubscribed"
        time.sleep(max(0.0, expires - time.time()) + 0.01)
        send_json(ws, {"type": "subscribe", "store": open_store})
        answer = recv_json(ws)
        assert (answer["type"], answer.get("code")) == ("error", "token_expired"), answer
        with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
            recv_json(ws)
        assert closed.value.rcvd.code == 1008


def test_what_the_subscribe_hook_allowed_stays_and_nothing_else_passes_for_it(start_server, tmp_path):
    """A subscription the subscribe hook allowed is not the token's to end; one the token allowed
    is, even made where an ended hook-allowed one was (it was then taken for that one, and kept)."""
    from hooks import Backend
    backend = Backend(tmp_path / "backend")
    try:
        port = start_server("--token-secret", SECRET, *backend.hook_args("subscribe")).port
        # Short names, kept inline in a subscription, so the two are alike in memory.
        hooked, covered = "narrow-a", "plain"
        with connect(port, path=f"/ws?token={token_for(300, topics=[covered])}") as ws:
            # A hook-allowed subscription ends, and a token-allowed one is made next (where it was).
            assert subscribe(ws, topic=hooked)["type"] == "subscribed"
            send_json(ws, {"type": "unsubscribe", "topic": hooked})
            assert recv_json(ws)["type"] == "unsubscribed"
            assert subscribe(ws, topic=covered)["type"] == "subscribed"
            send_json(ws, {"type": "auth", "token": token_for(300, topics=["other"])})
            assert recv_json(ws)["type"] == "authenticated"
            assert recv_json(ws) == {"type": "unsubscribed", "topic": covered, "reason": "forbidden"}
        with connect(port, path=f"/ws?token={token_for(300, topics=[covered])}") as ws:
            assert subscribe(ws, topic=hooked)["type"] == "subscribed"
            send_json(ws, {"type": "auth", "token": token_for(300, topics=[unique("other")])})
            assert recv_json(ws)["type"] == "authenticated"
            # The hook's grant stands: its topic's messages still come, and nothing ended.
            json_ok(request(port, "POST", f"/api/topics/{hooked}/messages", {"n": 1}), 201)
            frame = recv_json(ws)
            assert frame["type"] == "message" and frame["topic"] == hooked, frame
    finally:
        backend.stop()
