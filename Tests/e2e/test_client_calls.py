"""The browser client library's commit() and rpc() (docs/CLIENT.md, "Committing"), in headless
Chromium against the real gateway: every call settles. One cut off by the end of its WebSocket
rejects with `unavailable` and gives its place among the 1,000 waiting back; one the gateway could
not read is refused at once with `bad_message`, nothing sent, and its refusal is never taken for
another request's answer.

The test page is client_page.py's. Every wait polls with a deadline; nothing sleeps and hopes.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from client_page import call, open_page, page, public_dir, view, wait_status  # noqa: F401 (fixtures)
from hooks import Backend as HookBackend
from test_node_client import NODE
from test_trust import KEY, request
from viewer import chromium_installed, wait  # noqa: F401 (a fixture)
from wsclient import new_store, unique

SETTLE_S = 5.0  # well within it, a call whose socket ended has settled


def outcome(driver, call_id: str):
    return call(driver, "outcome", call_id)


def wait_settled(driver, call_ids: list[str], timeout: float = SETTLE_S) -> list[dict]:
    wait(driver, lambda d: all(outcome(d, c) is not None for c in call_ids), timeout,
         f"{call_ids} never all settled: {[outcome(driver, c) for c in call_ids]}")
    return [outcome(driver, c) for c in call_ids]


def start_commit(driver, client: str, call_id: str, store: str, changes_js: str) -> None:
    """Starts a commit whose changes are the JavaScript expression `changes_js`."""
    driver.execute_script(
        f"harness.settle(arguments[0], harness.clientOf(arguments[1]).commit(arguments[2], {changes_js}))",
        call_id, client, store)


def calls_sent(driver) -> list[str]:
    """The refs and ids of the commits and RPCs the page's sockets sent."""
    return driver.execute_script(
        "return window.__sockets.flatMap((s) => s.__sent.filter((m) => m.type === 'commit' || m.type === 'rpc'))"
        ".map((m) => m.ref ?? m.id)")


# ---- A call cut off by the end of its WebSocket -------------------------------------------

def test_a_commit_and_an_rpc_waiting_on_their_hooks_reject_unavailable_when_the_gateway_dies(page, start_server, public_dir, tmp_path):
    """The gateway is killed while the backend's RPC and write hooks hold an RPC and a commit:
    both reject with `unavailable` (the outcome is unknown) instead of waiting for good."""
    hooks = HookBackend(tmp_path / "hooks")
    try:
        server = start_server("--api-key", KEY, *hooks.hook_args("write", "rpc"), "--hook-timeout", "30",
                              public=public_dir)
        store = unique("hooked")
        assert request(server.port, "POST", "/api/stores", {"name": store}, {"Authorization": f"Bearer {KEY}"}).status == 201
        open_page(page, server.port)
        call(page, "client", "one", {"transport": "websocket"})
        call(page, "store", "one", "s", store, {})
        wait_status(page, ["s"], "live")
        page.execute_script("harness.settle('rpc', harness.clientOf('one').rpc('slow', 1))")
        start_commit(page, "one", "commit", store, "[{op: 'put', model: 'm', value: {hookDelay: 20}}]")
        wait(page, lambda d: hooks.stats()["inFlight"] == 2, 10.0, "the hooks never held both calls")
        assert outcome(page, "commit") is None and outcome(page, "rpc") is None

        server.proc.kill()
        server.proc.wait(timeout=5)
        settled = wait_settled(page, ["commit", "rpc"])
        assert [o["code"] for o in settled] == ["unavailable", "unavailable"], settled
        assert all("outcome is unknown" in o["message"] for o in settled), settled
    finally:
        hooks.stop()


def test_a_thousand_commits_cut_off_by_a_close_free_their_places_for_the_next(page, start_server, public_dir):
    """A commit over `--max-message-bytes` makes the gateway close the connection (1009) with a
    thousand commits waiting, the most the client lets wait: each rejects with `unavailable`, and
    on the new connection a commit goes through rather than being refused `rate_limited` for
    good."""
    server = start_server("--max-message-bytes", "4096", public=public_dir)
    store = new_store(server.port, {"a": {"n": 1}}, prefix="calls")
    open_page(page, server.port)
    call(page, "client", "one", {"transport": "websocket", "backoffBaseMs": 50, "backoffMaxMs": 200})
    call(page, "store", "one", "s", store, {})
    wait_status(page, ["s"], "live")
    page.execute_script("""
        const client = harness.clientOf('one');
        const changes = [{op: 'put', model: 'big', value: {text: 'x'.repeat(5000)}}];
        for (let n = 0; n < 1000; n += 1) harness.settle(`cut-${n}`, client.commit(arguments[0], changes));""", store)
    wait(page, lambda d: 1009 in call(d, "clientLog", "one")["closes"], SETTLE_S, "the gateway never closed with 1009")
    wait(page, lambda d: None not in call(d, "outcomes", "cut-"), SETTLE_S, "the commits cut off never all settled")
    assert {o["code"] for o in call(page, "outcomes", "cut-")} == {"unavailable"}

    wait(page, lambda d: call(d, "clientLog", "one")["status"] == "open" and view(d, "s")["status"] == "live",
         10.0, "the client never reconnected")
    start_commit(page, "one", "after", store, "[{op: 'put', model: 'b', value: {n: 2}}]")
    assert wait_settled(page, ["after"])[0] == {"value": 2}


# ---- A call the gateway could not read ----------------------------------------------------

def test_a_call_the_gateway_could_not_read_is_refused_at_once_and_sent_never(page, start_server, public_dir):
    """A lone surrogate (no Unicode text: the gateway refuses it without the `ref` that ties the
    refusal to the commit), nesting past the gateway's 256 levels, or a value JSON cannot hold:
    each is refused at once with `bad_message` and nothing is sent. Before, the surrogate's commit
    waited for good and its refusal was taken for the answer to the subscribe sent next, which
    failed a store that exists."""
    server = start_server(public=public_dir)
    port = server.port
    store, other = new_store(port, {"a": {"n": 1}}, prefix="calls"), new_store(port, {"o": {"n": 1}}, prefix="calls")
    open_page(page, port)
    call(page, "client", "one", {"transport": "websocket"})
    call(page, "store", "one", "s", store, {})
    wait_status(page, ["s"], "live")
    start_commit(page, "one", "surrogate", store, "[{op: 'put', model: 'rt', value: {v: 'x\\ud800y'}}]")
    call(page, "store", "one", "other", other, {})
    start_commit(page, "one", "low-half", store, "[{op: 'put', model: '\\udc00', value: {}}]")
    page.execute_script("harness.settle('rpc', harness.clientOf('one').rpc('m', ['\\ud83d']))")
    start_commit(page, "one", "deep", store,
                 "[{op: 'put', model: 'd', value: JSON.parse('['.repeat(254) + ']'.repeat(254))}]")
    start_commit(page, "one", "bigint", store, "[{op: 'put', model: 'n', value: {v: 1n}}]")
    start_commit(page, "one", "cycle", store, "(() => { const v = {}; v.self = v; return [{op: 'put', model: 'c', value: v}]; })()")
    page.execute_script("harness.settle('rpc-bigint', harness.clientOf('one').rpc('m', {n: 10n}))")
    page.execute_script("harness.settle('rpc-cycle', harness.clientOf('one').rpc('m', (() => { const v = {}; v.self = v; return v; })()))")
    refused = ["surrogate", "low-half", "rpc", "deep", "bigint", "cycle", "rpc-bigint", "rpc-cycle"]
    settled = wait_settled(page, refused, 1.0)
    assert [o["code"] for o in settled] == ["bad_message"] * len(refused), settled
    assert all("nothing was sent" in o["message"] for o in settled), settled
    assert calls_sent(page) == []

    wait_status(page, ["other"], "live")
    assert view(page, "other")["models"] == {"o": {"n": 1}} and view(page, "other")["log"]["errors"] == []
    # At the boundary: a pair is text, and the deepest nesting the gateway reads is sent.
    start_commit(page, "one", "pair", store, "[{op: 'put', model: 'rt', value: {v: 'x\\ud83d\\ude00y'}}]")
    start_commit(page, "one", "deepest", store,
                 "[{op: 'put', model: 'd', value: JSON.parse('['.repeat(253) + ']'.repeat(253))}]")
    pair, deepest = wait_settled(page, ["pair", "deepest"])
    assert pair == {"value": 2}, pair
    assert deepest["code"] == "bad_message" and "nothing was sent" not in deepest["message"], deepest
    assert len(calls_sent(page)) == 2
    assert view(page, "s")["status"] == "live" and call(page, "clientLog", "one")["errors"] == []


def test_an_error_with_a_ref_is_never_taken_for_a_subscriptions_answer():
    """Only the answers to subscribe, unsubscribe and auth carry neither `ref` nor `id`: an error
    with one whose call no longer waits is reported, and the subscribe waiting keeps its place.
    The order is met every time: the client runs on a fake socket that hands it the frames."""
    script = Path(__file__).parent / "node_client_stray_ref.mjs"
    result = subprocess.run([str(NODE), str(script)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome == {"status": "live", "models": {"n": {"v": 1}}, "subErrors": [],
                       "clientErrors": ["bad_message", "unavailable"], "sockets": 1}, outcome


def test_a_replay_that_skips_the_same_version_again_is_asked_for_after_the_backoff():
    """A gateway whose replay skips the same version every time: the client resumes at once,
    then again only after its backoff (500 ms doubling). Before, it resubscribed thousands of
    times a second, and the gateway counted every resume."""
    script = Path(__file__).parent / "node_client_resync_backoff.mjs"
    result = subprocess.run([str(NODE), str(script)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    # The first subscribe, the resync at once, and at most two after the backoff within a second.
    assert 3 <= outcome["subscribes"] <= 4 and outcome["version"] == 1 and outcome["sockets"] == 1, outcome


def test_a_subscription_the_gateway_narrowed_takes_its_filter_from_the_snapshot():
    """The subscribe hook may narrow a subscription asked for with no options; the snapshot names
    the filter, and the client does not take the versions it leaves out for lost ones. Before, it
    resynced from the same version for good and applied nothing more."""
    script = Path(__file__).parent / "node_client_narrowed.mjs"
    result = subprocess.run([str(NODE), str(script)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome == {"version": 12, "models": {"a": {"color": "blue"}}, "subscribes": 1}, outcome

