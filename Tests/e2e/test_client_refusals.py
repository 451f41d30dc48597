"""The browser client library (docs/CLIENT.md, "Reconnection and resumption") when the gateway
refuses a subscription: the refusal is reported with `error`, and the same code, over WebSocket and
over Server-Sent Events, then retried with backoff (and taken once the cause is gone) or, when no
retry can cure it, the subscription is `failed`. An event stream's refusal is an HTTP status that
EventSource does not show; before, over SSE it looked like a network failure, retried for good
with no reason given.

The test page is client_page.py's. Every wait polls with a deadline; nothing sleeps and hopes.
"""

from __future__ import annotations

import pytest

from client_page import TRANSPORTS, call, open_page, page, public_dir, view, wait_status  # noqa: F401 (fixtures)
from conftest import api, json_ok
from test_trust import SECRET, token_for
from viewer import chromium_installed, wait  # noqa: F401 (a fixture)
from wsclient import unique

FAST = {"backoffBaseMs": 100, "backoffMaxMs": 400}


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_refused_subscription_is_reported_alike_over_both_transports(page, start_server, public_dir, transport):
    server = start_server("--demo", "--demo-rate", "0.001", "--token-secret", SECRET, public=public_dir)
    port = server.port
    missing, hidden = unique("later"), unique("hidden")
    json_ok(api(port, "POST", "/api/stores", {"name": hidden}), 201)
    token = token_for(stores=["tiles", missing], topics=["*"])
    open_page(page, port)
    call(page, "client", "one", {"transport": transport, "token": token, **FAST})
    call(page, "store", "one", "missing", missing, {})
    call(page, "store", "one", "hidden", hidden, {})
    call(page, "topic", "one", "bad-topic", "bad name", {})
    call(page, "client", "anonymous", {"transport": transport, **FAST})
    call(page, "store", "anonymous", "anonymous", "tiles", {})

    expected = {"missing": "no_such_store", "hidden": "forbidden", "bad-topic": "invalid_topic", "anonymous": "unauthorized"}
    wait(page, lambda d: all(view(d, sub)["log"]["errors"] for sub in expected), 10.0,
         f"not every refusal was reported: {[view(page, sub)['log']['errors'] for sub in expected]}")
    assert {sub: view(page, sub)["log"]["errors"][0] for sub in expected} == expected
    assert sorted(call(page, "clientLog", "one")["errors"][:3]) == sorted(["no_such_store", "forbidden", "invalid_topic"])
    assert call(page, "clientLog", "anonymous")["errors"][0] == "unauthorized"
    # No retry makes a bad topic name good; the others are retried, with the reason at hand.
    wait_status(page, ["bad-topic"], "failed", 5.0)
    wait(page, lambda d: len(view(d, "missing")["log"]["errors"]) >= 2, 10.0, "the refused store was not retried")
    assert set(view(page, "missing")["log"]["errors"]) == {"no_such_store"}

    json_ok(api(port, "POST", "/api/stores", {"name": missing}), 201)
    json_ok(api(port, "PUT", f"/api/stores/{missing}/models/m", {"n": 1}), 201)
    wait(page, lambda d: view(d, "missing")["status"] == "live" and view(d, "missing")["models"] == {"m": {"n": 1}},
         10.0, "the store made meanwhile was never followed")
    assert view(page, "hidden")["status"] in ("reconnecting", "connecting")
    assert view(page, "bad-topic")["status"] == "failed"
