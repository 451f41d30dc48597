"""The browser client resumes a store kept across a page reload: `saved()` gives `{since, epoch,
state}`, plain JSON for localStorage, and `subscribeStore(name, {...saved})` on the next page
gets only the change sets committed meanwhile, with no snapshot; a saved copy of another epoch
is reset (docs/CLIENT.md).
"""

from __future__ import annotations

import json

from client_page import (  # noqa: F401  (fixtures)
    call, gateway, open_page, page, public_dir, view, wait_status)
from conftest import store_snapshot
from viewer import chromium_installed, wait  # noqa: F401  (a fixture)
from wsclient import commit, new_store

TIMEOUT = 10.0


def test_a_saved_store_resumes_after_a_reload_with_only_what_it_missed(page, gateway):
    port = gateway.port
    store = new_store(port, {"a": {"n": 1}, "b": {"n": 2}}, prefix="resume")
    commit(port, store, [{"op": "set", "model": "a", "path": "n", "value": 3}])
    open_page(page, port)
    call(page, "client", "one", {})
    call(page, "store", "one", "before", store, {})
    wait_status(page, ["before"], "live")
    wait(page, lambda d: view(d, "before")["version"] == 2, TIMEOUT, "the first page never reached version 2")
    # Kept as a page would keep it: through JSON.
    saved = json.loads(json.dumps(call(page, "saved", "before")))
    assert saved["since"] == 2 and saved["state"] == {"a": {"n": 3}, "b": {"n": 2}} and saved["epoch"]

    # Committed while no page is open.
    commit(port, store, [{"op": "put", "model": "c", "value": {"n": 4}}])
    commit(port, store, [{"op": "delete", "model": "b"}])
    open_page(page, port)  # a reload
    call(page, "client", "two", {})
    call(page, "store", "two", "after", store, saved)
    expected = store_snapshot(port, store)

    def caught_up(d):
        state = view(d, "after")
        return state["version"] == expected["version"] and state["models"] == expected["models"]
    wait(page, caught_up, TIMEOUT, "the reloaded page never caught up")
    state = view(page, "after")
    assert state["log"]["snapshots"] == [], "resumed with a snapshot: the saved copy was not used"
    kinds = [frame["type"] for frame in state["log"]["frames"]]
    assert kinds == ["subscribed", "changes", "changes"], kinds
    assert [c["model"] for c in state["log"]["changes"]] == ["c", "b"]


def test_a_saved_copy_of_another_epoch_is_reset(page, gateway):
    port = gateway.port
    store = new_store(port, {"a": {"n": 1}}, prefix="resume")
    open_page(page, port)
    call(page, "client", "one", {})
    stale = {"since": 1, "epoch": "0000000000000000", "state": {"gone": {"n": 0}}}
    call(page, "store", "one", "s", store, stale)
    wait(page, lambda d: view(d, "s")["models"] == {"a": {"n": 1}}, TIMEOUT, "the stale copy was never reset")
    snapshots = view(page, "s")["log"]["snapshots"]
    assert len(snapshots) == 1 and snapshots[0]["reset"] is True, snapshots
    assert snapshots[0]["epoch"] == store_snapshot(port, store)["epoch"]


def test_resume_options_are_checked_before_anything_is_sent(page, gateway):
    open_page(page, gateway.port)
    call(page, "client", "one", {})
    refusals = page.execute_script("""
        const attempt = (work) => { try { work(); return null; } catch (error) { return `${error.name}: ${error.message}`; } };
        return [
            attempt(() => harness.store('one', 'a', 's1', {since: 3})),
            attempt(() => harness.store('one', 'b', 's2', {since: -1, state: {}})),
            attempt(() => harness.store('one', 'c', 's3', {since: 1.5, state: {}})),
            attempt(() => harness.store('one', 'd', 's4', {epoch: 'x'})),
            attempt(() => harness.store('one', 'e', 's5', {state: {}})),
            attempt(() => harness.store('one', 'f', 's6', {since: 1, state: {}, epoch: ''})),
        ];""")
    for refusal, field in zip(refusals, ["state", "since", "since", "since", "since", "epoch"]):
        assert refusal is not None and refusal.startswith("TypeError: ") and field in refusal, refusals


# ---- Publishing ----------------------------------------------------------------------------

def test_publish_answers_the_seq_and_the_message_arrives_as_sent(page, gateway):
    port = gateway.port
    open_page(page, port)
    call(page, "client", "one", {})
    topic = f"pub-{new_store(port, prefix='t')}"
    call(page, "topic", "one", "news", topic, {})
    wait_status(page, ["news"], "live")
    data = {"headline": "héllo", "n": [1, 2.50, None], "deep": {"ok": True}}
    assert call(page, "publish", "one", topic, data) == {"seq": 1}
    assert call(page, "publish", "one", topic, "second", {"idempotencyKey": "k-1"}) == {"seq": 2}
    assert call(page, "publish", "one", topic, "second", {"idempotencyKey": "k-1"}) == {"seq": 2}, "a retry was applied twice"
    wait(page, lambda d: len(view(d, "news")["log"]["messages"]) == 2, TIMEOUT, "the messages never arrived")
    messages = view(page, "news")["log"]["messages"]
    assert [(m["seq"], m["data"]) for m in messages] == [(1, data), (2, "second")]
    # A value JSON cannot hold is refused before anything is sent.
    refused = page.execute_script("return await window.harness.publish('one', 'x', undefined)")
    assert refused == {"name": "TypeError", "code": None, "status": None}, refused


def test_publish_with_a_token_needs_its_publish_claim(page, start_server, public_dir):
    from test_trust import KEY, SECRET, token_for

    server = start_server("--api-key", KEY, "--token-secret", SECRET, public=public_dir)
    open_page(page, server.port)
    call(page, "client", "granted", {"token": token_for(publish=["news"])})
    call(page, "client", "anonymous", {})
    assert call(page, "publish", "granted", "news", {"n": 1}) == {"seq": 1}
    assert call(page, "publish", "granted", "other", {"n": 1}) == {"name": "Error", "code": "forbidden", "status": 403}
    assert call(page, "publish", "anonymous", "news", {"n": 2}) == {"name": "Error", "code": "unauthorized", "status": 401}


# ---- Token renewal ---------------------------------------------------------------------------

def test_a_token_source_is_asked_again_before_expiry_and_the_connection_stays(start_server, public_dir):
    """Tokens of a few seconds each: the client presents the next one on the open connection
    before the last runs out, so one socket carries the subscription past both expiries."""
    import time

    from client_page import RECORDING, sockets
    from test_trust import SECRET, make_token
    from viewer import new_browser

    server = start_server("--token-secret", SECRET, public=public_dir)
    port = server.port
    store = new_store(port, {"a": {"n": 0}}, prefix="renew")
    now = int(time.time())
    tokens = [make_token({"sub": "r", "exp": now + seconds, "stores": ["*"]}) for seconds in (3, 6, 600)]
    driver = new_browser(RECORDING)
    try:
        open_page(driver, port)
        call(driver, "clientWithTokens", "one", tokens)
        call(driver, "store", "one", "s", store, {})
        wait_status(driver, ["s"], "live")
        wait(driver, lambda d: len(call(d, "clientLog", "one")["authenticated"]) == 3, 12.0,
             "the client did not present the next tokens before the last ran out")
        expiries = call(driver, "clientLog", "one")["authenticated"]
        assert expiries == sorted(expiries) and expiries[-1] == now + 600, expiries
        wait(driver, lambda d: time.time() > now + 7, 10.0, "")  # past the second token's expiry
        version = commit(port, store, [{"op": "set", "model": "a", "path": "n", "value": 1}])
        wait(driver, lambda d: view(d, "s")["version"] == version, TIMEOUT, "the change after the expiries never came")
        log = call(driver, "clientLog", "one")
        assert len(sockets(driver)) == 1 and log["closes"] == [] and "token_expired" not in log["errors"], log
        assert [m["type"] for m in sockets(driver)[0]["sent"]].count("auth") == 3
    finally:
        driver.quit()
