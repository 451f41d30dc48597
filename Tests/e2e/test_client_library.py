"""The browser client library, Public/receptionist-client.js (docs/CLIENT.md), in headless Chromium
against the real gateway, over WebSocket and over Server-Sent Events.

A test page (written next to a copy of Public/) imports the library and records what each client
and subscription reports. The tests drive it: stores followed whole and through options converge
to the store's (projected) state, topics deliver in sequence order and report gaps, and a gateway
restarted on the same port is followed into its new store without reloading the page. Every wait
polls with a deadline; nothing sleeps and hopes.
"""

from __future__ import annotations

import json
import re
import shutil
import time

import pytest

from conftest import REPO_ROOT, api, json_ok, stop_job, store_snapshot, store_version, wait_version_above
from test_subscription_options import project
from selenium.webdriver.common.by import By
from viewer import PUBLIC, chromium_installed, css_rgb, new_browser, patch_color, wait  # noqa: F401 (a fixture)
from wsclient import commit, new_store, publish, unique

PAGE = "client-test.html"
EXAMPLE = "client-example.html"  # the complete page in docs/CLIENT.md
TRANSPORTS = ["websocket", "sse"]
NOW_SLACK_US = 60_000_000
# Gateways drain within two seconds: they tell their clients to go over the first three quarters.
DRAIN = ("--drain-timeout", "2")

# The test page: the library, and a harness that records every event (up to a bound).
HARNESS = """<!doctype html>
<html lang="en">
<meta charset="utf-8">
<title>Receptionist client library test page</title>
<script type="module">
  import { ReceptionistClient } from '/receptionist-client.js';

  const LIMIT = 5000;
  const clients = new Map();
  const subs = new Map();
  const push = (list, value) => { if (list.length < LIMIT) list.push(value); };

  function track(id, sub) {
    const log = { statuses: [], snapshots: [], frames: [], changes: [], messages: [], gaps: [], resets: [], errors: [], presence: [] };
    sub.on('status', (e) => push(log.statuses, e.status));
    sub.on('snapshot', (e) => push(log.snapshots, { version: e.version, epoch: e.epoch, reset: e.reset }));
    sub.on('frame', (e) => push(log.frames, e));
    sub.on('change', (e) => push(log.changes, e));
    sub.on('message', (e) => push(log.messages, e));
    sub.on('gap', (e) => push(log.gaps, e));
    sub.on('reset', (e) => push(log.resets, e));
    sub.on('error', (e) => push(log.errors, e.code));
    sub.on('presence', (e) => push(log.presence, { clients: e.clients, whole: e.whole, joins: e.joins.length, leaves: e.leaves.length }));
    subs.set(id, { sub, log });
  }

  window.harness = {
    client(id, options) {
      const client = new ReceptionistClient(options);
      const log = { statuses: [], draining: [], closes: [], errors: [], transports: [], authenticated: [] };
      client.on('status', (e) => push(log.statuses, e.status));
      client.on('draining', (e) => push(log.draining, e.reconnectAfterMs));
      client.on('close', (e) => push(log.closes, e.code));
      client.on('error', (e) => push(log.errors, e.code));
      client.on('transport', (e) => push(log.transports, e.transport));
      client.on('authenticated', (e) => push(log.authenticated, e.expiresAt));
      clients.set(id, { client, log });
    },
    store(client, id, name, options) { track(id, clients.get(client).client.subscribeStore(name, options)); },
    topic(client, id, name, options) { track(id, clients.get(client).client.subscribeTopic(name, options)); },
    unsubscribe(id) { subs.get(id).sub.unsubscribe(); },
    saved(id) { return subs.get(id).sub.saved(); },
    // A token source as a backend endpoint would be: the next token each time it is asked.
    clientWithTokens(id, tokens) {
      const queue = [...tokens];
      this.client(id, { token: () => (queue.length > 1 ? queue.shift() : queue[0]) });
    },
    async publish(client, topic, data, options) {
      try { return { seq: await clients.get(client).client.publish(topic, data, options) }; }
      catch (error) { return { name: error.name, code: error.code ?? null, status: error.status ?? null }; }
    },
    view(id) {
      const { sub, log } = subs.get(id);
      return JSON.parse(JSON.stringify({
        status: sub.status, version: sub.version ?? null, epoch: sub.epoch ?? null, seq: sub.seq ?? null,
        models: sub.kind === 'store' ? sub : null, frames: sub.frames, bytes: sub.bytes, log,
      }));
    },
    presence(id) {
      const state = subs.get(id).sub.presence;
      return { members: [...state.members.keys()].sort(), clients: state.clients, users: state.users, countsOnly: state.countsOnly };
    },
    clientLog(id) {
      const { client, log } = clients.get(id);
      return { transport: client.transport, status: client.status, ...log };
    },
  };
</script>
</html>
"""

# Records the page's sockets (what each sent) and event streams (their URLs).
RECORDING = """
    window.__sockets = []; window.__sources = [];
    window.WebSocket = class extends window.WebSocket {
        constructor(...args) { super(...args); this.__sent = []; window.__sockets.push(this); }
        send(data) { this.__sent.push(JSON.parse(data)); super.send(data); }
    };
    window.EventSource = class extends window.EventSource {
        constructor(...args) { super(...args); window.__sources.push(this); }
    };"""


# ---- Page and gateway --------------------------------------------------------------------

@pytest.fixture(scope="module")
def public_dir(tmp_path_factory):
    """A copy of Public/ with the test page: the gateway reads its files once, at start-up."""
    target = tmp_path_factory.mktemp("public")
    shutil.copytree(PUBLIC, target, dirs_exist_ok=True)
    (target / PAGE).write_text(HARNESS, encoding="utf-8")
    doc = (REPO_ROOT / "docs" / "CLIENT.md").read_text(encoding="utf-8")
    pages = re.findall(r"```html\n(.*?)```", doc, flags=re.S)
    assert len(pages) == 1, "docs/CLIENT.md should hold exactly one complete page"
    (target / EXAMPLE).write_text(pages[0], encoding="utf-8")
    return target


@pytest.fixture(scope="module")
def gateway(module_servers, public_dir):
    """The demo store `tiles`, held still (its job commits once in 1,000 s) until a test animates it.

    One job thread makes a stopped job's last commit observable (see `stop_job`)."""
    return module_servers("--demo", "--demo-rate", "0.001", "--job-threads", "1", *DRAIN, public=public_dir)


@pytest.fixture
def page():
    driver = new_browser(RECORDING)
    yield driver
    driver.quit()


def open_page(driver, port: int) -> None:
    driver.get(f"http://127.0.0.1:{port}/{PAGE}")
    wait(driver, lambda d: d.execute_script("return window.harness !== undefined"), 5.0,
         "the test page never loaded the library")


def call(driver, method: str, *args):
    return driver.execute_script(f"return window.harness.{method}(...arguments)", *args)


def view(driver, sub: str) -> dict:
    return call(driver, "view", sub)


def wait_status(driver, subs, expected: str, timeout: float = 10.0) -> None:
    wait(driver, lambda d: all(view(d, sub)["status"] == expected for sub in subs), timeout,
         f"{subs} never all reached status {expected!r}")


def wait_converged(driver, port: int, store: str, subs: dict[str, dict], timeout: float = 10.0) -> dict:
    """Polls until every subscription (id → its options) holds the store's state, projected by its
    options; an unfiltered one must also be at the store's version. Returns the store snapshot."""
    snapshot = store_snapshot(port, store)

    def converged(d):
        for sub, options in subs.items():
            seen = view(d, sub)
            if seen["models"] != project(snapshot["models"], options):
                return False
            if not options and seen["version"] != snapshot["version"]:
                return False
        return True

    try:
        wait(driver, converged, timeout, "")
    except Exception:
        seen = {sub: {k: view(driver, sub)[k] for k in ("status", "version", "epoch")} for sub in subs}
        raise AssertionError(f"never converged to {store} at version {snapshot['version']}: {seen}") from None
    return snapshot


def sockets(driver) -> list[dict]:
    return driver.execute_script(
        "return window.__sockets.map(s => ({url: s.url, protocol: s.protocol, sent: s.__sent}))")


def source_urls(driver) -> list[str]:
    return driver.execute_script("return window.__sources.map(s => s.url)")


def set_offline(driver, offline: bool) -> None:
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.emulateNetworkConditions", {
        "offline": offline, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})


def start_animation(port: int, store: str, rate: int) -> str:
    job = json_ok(api(port, "POST", "/api/jobs", {"kind": "animate", "store": store, "rate": rate}), 201)
    return job["id"]


def publish_utf8(port: int, topic: str, data) -> int:
    """Publishes `data` as compact JSON in UTF-8 (not ASCII escapes): the gateway forwards those bytes."""
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return json_ok(api(port, "POST", f"/api/topics/{topic}/messages", body=body), 201)["seq"]


def assert_recent(micros) -> None:
    assert isinstance(micros, int) and abs(micros - time.time() * 1_000_000) < NOW_SLACK_US, micros


# ---- Options are checked before anything is sent -----------------------------------------

def test_bad_options_and_a_second_subscription_to_a_store_throw(page, gateway):
    open_page(page, gateway.port)
    call(page, "client", "one", {})
    call(page, "store", "one", "tiles", "tiles", {})
    refusals = page.execute_script("""
        const attempt = (work) => { try { work(); return null; } catch (error) { return `${error.name}: ${error.message}`; } };
        return [
            attempt(() => harness.store('one', 'again', 'tiles', {})),
            attempt(() => harness.store('one', 'x', 'other', {models: []})),
            attempt(() => harness.store('one', 'x', 'other', {models: ['']})),
            attempt(() => harness.store('one', 'x', 'other', {paths: ['style..border']})),
            attempt(() => harness.store('one', 'x', 'other', {maxRate: 0})),
            attempt(() => harness.store('one', 'x', 'other', {maxRate: 1001})),
            attempt(() => harness.store('one', 'x', 'other', {maxRate: 0.005})),
            attempt(() => harness.store('one', 'x', 'other', {old: 'yes'})),
            attempt(() => harness.topic('one', 'x', 'news', {maxRate: 4})),
            attempt(() => harness.topic('one', 'x', 'news', {since: -1})),
        ];""")
    assert refusals[0].startswith("Error: ") and "already subscribes to store 'tiles'" in refusals[0], refusals
    for refusal, field in zip(refusals[1:], ["models", "model id", "path", "maxRate", "maxRate", "maxRate", "old", "maxRate", "since"]):
        assert refusal is not None and refusal.startswith("TypeError: ") and field in refusal, refusals
    wait_status(page, ["tiles"], "live")
    # Nothing refused reached the gateway: one subscribe, on one socket.
    assert [s["sent"] for s in sockets(page)] == [[{"type": "subscribe", "store": "tiles"}]]


# ---- The documented example ----------------------------------------------------------------

def test_the_example_page_in_the_docs_shows_the_store(page, gateway):
    port = gateway.port
    page.get(f"http://127.0.0.1:{port}/{EXAMPLE}")

    def squares(d):
        raw = d.execute_script("""
            const out = {};
            for (const cell of document.querySelectorAll('#grid [data-model]'))
                out[cell.dataset.model] = getComputedStyle(cell).backgroundColor;
            return out;""")
        return {model: css_rgb(color) for model, color in raw.items()}

    def shows_store(d):
        snapshot = store_snapshot(port, "tiles")
        return squares(d) == {m: css_rgb(v["color"]) for m, v in snapshot["models"].items()} and \
            d.find_element(By.ID, "version").text == str(snapshot["version"])

    wait(page, shows_store, 10.0, "the example page never showed the store")
    assert page.find_element(By.ID, "status").text == "live"
    order = page.execute_script("return [...document.querySelectorAll('#grid [data-model]')].map(c => c.dataset.model)")
    assert order == [f"tile-{n}" for n in range(64)]
    patch_color(port, "tile-3", "#0a1b2c")
    wait(page, lambda d: squares(d)["tile-3"] == css_rgb("#0a1b2c"), 5.0, "the example page missed a change")
    assert re.fullmatch(r"\d+ ms old", page.find_element(By.ID, "staleness").text)
    wait(page, shows_store, 5.0, "the example page does not match the store")


# ---- Stores ------------------------------------------------------------------------------

def shaped(color: str, label: str, width: int) -> dict:
    return {"color": color, "label": label, "style": {"border": {"width": width, "color": "#000000"}, "shadow": "none"}}


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_stores_followed_whole_and_through_options_converge(page, gateway, transport):
    port = gateway.port
    shapes = new_store(port, {"a": shaped("#111111", "A", 1), "ab": shaped("#222222", "AB", 2),
                              "b": shaped("#333333", "B", 3)}, prefix="shapes")
    coalesced = {"paths": ["color"], "maxRate": 4, "models": ["tile-1*"]}
    projected = {"models": ["a*"], "paths": ["style.border", "color"], "old": True}
    open_page(page, port)
    # One client follows two stores whole over one connection; another follows them through options.
    call(page, "client", "whole", {"transport": transport})
    call(page, "store", "whole", "tiles", "tiles", {})
    call(page, "store", "whole", "shapes", shapes, {})
    call(page, "client", "options", {"transport": transport})
    call(page, "store", "options", "tiles-coalesced", "tiles", coalesced)
    call(page, "store", "options", "shapes-projected", shapes, projected)
    everything = {"tiles": {}, "tiles-coalesced": coalesced}
    wait_status(page, ["tiles", "shapes", "tiles-coalesced", "shapes-projected"], "live")
    start = view(page, "tiles")["version"]
    wait_converged(page, port, "tiles", everything)
    wait_converged(page, port, shapes, {"shapes": {}, "shapes-projected": projected})
    assert view(page, "shapes-projected")["models"] == {
        "a": {"color": "#111111", "style": {"border": {"width": 1, "color": "#000000"}}},
        "ab": {"color": "#222222", "style": {"border": {"width": 2, "color": "#000000"}}}}

    job = start_animation(port, "tiles", 120)
    try:
        # Changes inside and above the listed paths, deletions that leave objects empty, models
        # created and deleted, and a change set that the projection filters out entirely.
        commit(port, shapes, [{"op": "set", "model": "a", "path": "style.border.width", "value": 5}])
        commit(port, shapes, [{"op": "patch", "model": "ab", "value": {"style": {"border": None}}}])
        commit(port, shapes, [{"op": "set", "model": "a", "path": "label", "value": "not followed"}])
        commit(port, shapes, [{"op": "delete", "model": "b"},
                              {"op": "put", "model": "a2", "value": shaped("#444444", "A2", 4)}])
        commit(port, shapes, [{"op": "put", "model": "ab", "value": {"color": "#555555", "style": {"shadow": "x"}}}])
        wait_converged(page, port, shapes, {"shapes": {}, "shapes-projected": projected})
        wait_version_above(port, "tiles", start + 120, timeout=10.0)
    finally:
        stop_job(port, job)
    final = wait_converged(page, port, "tiles", everything)

    # The projected copy dropped the objects a removal left empty above a listed path.
    assert view(page, "shapes-projected")["models"] == {
        "a": {"color": "#111111", "style": {"border": {"width": 5, "color": "#000000"}}},
        "ab": {"color": "#555555"},
        "a2": {"color": "#444444", "style": {"border": {"width": 4, "color": "#000000"}}}}
    # With `old`, each change carried the value it replaced; a model outside `models` never came.
    changes = view(page, "shapes-projected")["log"]["changes"]
    assert {"model": "a", "path": "style.border.width", "kind": "updated", "value": 5, "old": 1} in changes, changes
    assert all(change["model"] != "b" for change in changes), changes

    # Whole: one frame per change set, in order, none skipped (no resync was needed).
    tiles = view(page, "tiles")
    frames = [f for f in tiles["log"]["frames"] if f["type"] == "changes"]
    first = tiles["log"]["snapshots"][0]["version"]
    assert [f["version"] for f in frames] == list(range(first + 1, final["version"] + 1))
    assert all(not f["conflated"] and f["committedAt"] == f["firstCommittedAt"] for f in frames)
    assert tiles["bytes"] == sum(f["bytes"] for f in tiles["log"]["frames"]) and tiles["bytes"] > 0
    # Coalesced: at most maxRate frames a second, each naming what it covers.
    coalesced_frames = [f for f in view(page, "tiles-coalesced")["log"]["frames"] if f["type"] == "changes"]
    assert coalesced_frames and all(f["conflated"] for f in coalesced_frames), coalesced_frames
    for frame in coalesced_frames:
        assert_recent(frame["committedAt"])
        assert frame["firstCommittedAt"] <= frame["committedAt"] and frame["from"] < frame["version"], frame
    span = (coalesced_frames[-1]["receivedAt"] - coalesced_frames[0]["receivedAt"]) / 1000
    assert len(coalesced_frames) <= 4 * span + 2, (len(coalesced_frames), span)
    assert len(coalesced_frames) < len(frames) / 3, (len(coalesced_frames), len(frames))

    # Unsubscribing stops one subscription and leaves the other on the same store alone.
    call(page, "unsubscribe", "shapes")
    wait_status(page, ["shapes"], "closed")
    before = view(page, "shapes")["version"]
    commit(port, shapes, [{"op": "set", "model": "a", "path": "color", "value": "#666666"}])
    wait_converged(page, port, shapes, {"shapes-projected": projected})
    assert view(page, "shapes")["version"] == before

    if transport == "websocket":
        # One connection per client, on the subprotocol, each subscribe as asked (and nothing else).
        opened = sockets(page)
        assert len(opened) == 2 and all(s["protocol"] == "receptionist.v1" for s in opened), opened
        assert opened[0]["sent"] == [{"type": "subscribe", "store": "tiles"}, {"type": "subscribe", "store": shapes},
                                     {"type": "unsubscribe", "store": shapes}]
        assert opened[1]["sent"] == [{"type": "subscribe", "store": "tiles", **coalesced},
                                     {"type": "subscribe", "store": shapes, **projected}]
        assert source_urls(page) == []
    else:
        # One event stream per subscription, its options in the query.
        base = f"http://127.0.0.1:{port}/api/stores"
        assert source_urls(page) == [f"{base}/tiles/events", f"{base}/{shapes}/events",
                                     f"{base}/tiles/events?models=tile-1*&paths=color&maxRate=4",
                                     f"{base}/{shapes}/events?models=a*&paths=style.border,color&old=true"]
        assert sockets(page) == []


# ---- Topics ------------------------------------------------------------------------------

@pytest.mark.parametrize("transport", TRANSPORTS)
def test_topic_messages_arrive_in_order_with_their_seq_and_gaps_are_reported(page, start_server, public_dir, transport):
    server = start_server("--history", "5", *DRAIN, public=public_dir)
    port = server.port
    topic = unique("news")
    for n in range(1, 9):
        assert publish(port, topic, {"n": n}) == n
    open_page(page, port)
    call(page, "client", "one", {"transport": transport})
    call(page, "topic", "one", "current", topic, {})
    wait_status(page, ["current"], "live")
    assert view(page, "current")["seq"] == 8
    for n in range(9, 21):
        publish_utf8(port, topic, {"n": n, "text": "é ✓"})
    # From the start of the topic: the history keeps the last five, so 1 to 15 are reported lost.
    call(page, "client", "two", {"transport": transport})
    call(page, "topic", "two", "history", topic, {"since": 0})
    wait_status(page, ["history"], "live")
    publish_utf8(port, topic, {"n": 21, "text": "é ✓"})
    wait(page, lambda d: view(d, "current")["seq"] == 21 and view(d, "history")["seq"] == 21, 10.0,
         "the messages never all arrived")
    live, history = view(page, "current"), view(page, "history")
    assert [(m["seq"], m["data"]["n"]) for m in live["log"]["messages"]] == [(n, n) for n in range(9, 22)]
    assert live["log"]["messages"][-1]["data"] == {"n": 21, "text": "é ✓"}
    for message in live["log"]["messages"]:
        assert_recent(message["publishedAt"])
    assert live["log"]["gaps"] == []
    assert history["log"]["gaps"] == [{"from": 1, "to": 15}]
    assert [m["seq"] for m in history["log"]["messages"]] == list(range(16, 22))
    # A frame's bytes are the UTF-8 length of its JSON ("é" and "✓" take 2 and 3 bytes).
    frame = live["log"]["frames"][-1]
    text = ('{"type":"message","topic":"%s","seq":21,"publishedAt":%d,"data":{"n":21,"text":"é ✓"}}'
            % (topic, frame["publishedAt"]))
    assert frame["bytes"] == len(text.encode("utf-8")), frame


# ---- A restarted gateway -----------------------------------------------------------------

@pytest.mark.parametrize("transport", TRANSPORTS)
def test_restarted_gateway_is_followed_into_its_new_store_without_reload(page, start_server, public_dir, transport):
    first = start_server("--demo", "--demo-rate", "0.001", *DRAIN, public=public_dir)
    port = first.port
    topic = "restart-news"
    for n in range(1, 4):
        publish(port, topic, {"n": n})
    colored = {"paths": ["color"], "models": ["tile-1*"]}
    open_page(page, port)
    call(page, "client", "one", {"transport": transport})
    call(page, "store", "one", "tiles", "tiles", {})
    call(page, "topic", "one", "news", topic, {})
    call(page, "client", "two", {"transport": transport})
    call(page, "store", "two", "colored", "tiles", colored)
    wait_status(page, ["tiles", "news", "colored"], "live")
    for model, color in (("tile-7", "#123456"), ("tile-12", "#abcdef"), ("tile-13", "#fedcba")):
        json_ok(api(port, "PATCH", f"/api/stores/tiles/models/{model}", {"color": color}))
    before = wait_converged(page, port, "tiles", {"tiles": {}, "colored": colored})
    page.execute_script("window.__marker = 1")

    first.stop()
    assert first.proc.returncode == 0
    # The gateway drained: each client was told so (WebSocket: `draining`, then 1001; SSE: a
    # `draining` event, then the end of the stream) and goes on trying.
    wait(page, lambda d: all(call(d, "clientLog", c)["draining"] for c in ("one", "two")), 5.0,
         "no draining notice reached the page")
    if transport == "websocket":
        assert 1001 in call(page, "clientLog", "one")["closes"]
    wait(page, lambda d: all(view(d, s)["status"] in ("reconnecting", "connecting") for s in ("tiles", "news", "colored")),
         5.0, "the subscriptions never noticed the gateway had gone")
    # Hold the page off the network while the new gateway's store moves past the version the
    # page holds: only the epoch can then tell the page's version from the new store's.
    set_offline(page, True)
    wait(page, lambda d: all(view(d, s)["status"] == "offline" for s in ("tiles", "news", "colored")), 10.0,
         "the subscriptions never showed the browser offline")

    second = start_server("--demo", "--demo-rate", "0.001", *DRAIN, env={"RECEPTIONIST_PORT": str(port)},
                          public=public_dir)
    assert second.port == port
    fresh = store_snapshot(port, "tiles")
    assert fresh["epoch"] != before["epoch"]
    for n in range(before["version"] - fresh["version"] + 2):
        json_ok(api(port, "PATCH", "/api/stores/tiles/models/tile-20", {"color": f"#0000{n % 256:02x}"}))
    assert store_version(port, "tiles") > before["version"]
    assert publish(port, topic, {"n": "after"}) == 1

    set_offline(page, False)
    after = wait_converged(page, port, "tiles", {"tiles": {}, "colored": colored}, timeout=20.0)
    assert after["models"]["tile-7"]["color"] != "#123456"
    tiles = view(page, "tiles")
    assert tiles["epoch"] == after["epoch"]
    assert tiles["log"]["snapshots"][-1] == {"version": after["version"], "epoch": after["epoch"], "reset": True}
    assert view(page, "colored")["log"]["snapshots"][-1]["reset"] is True
    # The topic started a new life: the client says so, and takes its messages from its start.
    wait(page, lambda d: [m["seq"] for m in view(d, "news")["log"]["messages"]][-1:] == [1], 10.0,
         "the new gateway's message never arrived")
    news = view(page, "news")
    assert news["log"]["resets"] == [{"seq": 1, "previous": 3}]
    assert news["log"]["messages"][-1]["data"] == {"n": "after"}
    # The resume named the version and the life of the store it came from.
    if transport == "websocket":
        resumes = [m for s in sockets(page) for m in s["sent"] if m.get("since") is not None and m.get("store")]
        assert {"type": "subscribe", "store": "tiles", "since": before["version"], "epoch": before["epoch"]} in resumes, resumes
    else:
        urls = source_urls(page)
        assert f"http://127.0.0.1:{port}/api/stores/tiles/events?since={before['version']}&epoch={before['epoch']}" in urls, urls
    assert page.execute_script("return window.__marker") == 1, "the page was reloaded"
    assert page.execute_script("return performance.getEntriesByType('navigation').length") == 1


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
def test_durable_gateway_restarted_is_resumed_with_nothing_missed_and_no_reset(
        page, start_server, public_dir, transport, kill, tmp_path):
    """With --data-dir the store and topic come back as they were, in the same epoch: the page's
    subscriptions resume with `since` and `epoch` and get exactly what they missed, no reset."""
    data = str(tmp_path / "data")
    first = start_server("--demo", "--demo-rate", "0.001", "--data-dir", data, *DRAIN, public=public_dir)
    port = first.port
    topic = "durable-news"
    for n in range(1, 4):
        publish(port, topic, {"n": n})
    open_page(page, port)
    call(page, "client", "one", {"transport": transport})
    call(page, "store", "one", "tiles", "tiles", {})
    call(page, "topic", "one", "news", topic, {})
    wait_status(page, ["tiles", "news"], "live")
    json_ok(api(port, "PATCH", "/api/stores/tiles/models/tile-7", {"color": "#123456"}))
    before = wait_converged(page, port, "tiles", {"tiles": {}})
    wait(page, lambda d: view(d, "news")["seq"] == 3, 10.0, "the topic's number never reached the page")
    page.execute_script("window.__marker = 1")
    snapshots_before = len(view(page, "tiles")["log"]["snapshots"])

    if kill:
        first.proc.kill()
        first.proc.wait(timeout=10)
    else:
        first.stop()
        assert first.proc.returncode == 0
    wait(page, lambda d: all(view(d, s)["status"] in ("reconnecting", "connecting") for s in ("tiles", "news")),
         10.0, "the subscriptions never noticed the gateway had gone")
    set_offline(page, True)
    wait(page, lambda d: all(view(d, s)["status"] == "offline" for s in ("tiles", "news")), 10.0,
         "the subscriptions never showed the browser offline")

    second = start_server("--demo", "--demo-rate", "0.001", "--data-dir", data, *DRAIN,
                          env={"RECEPTIONIST_PORT": str(port)}, public=public_dir)
    assert second.port == port
    restored = store_snapshot(port, "tiles")
    assert (restored["epoch"], restored["version"]) == (before["epoch"], before["version"])
    assert restored["models"]["tile-7"]["color"] == "#123456"
    # Missed while the page was away: two change sets and two messages.
    json_ok(api(port, "PATCH", "/api/stores/tiles/models/tile-8", {"color": "#0000aa"}))
    json_ok(api(port, "PATCH", "/api/stores/tiles/models/tile-9", {"color": "#0000bb"}))
    assert publish(port, topic, {"n": 4}) == 4
    assert publish(port, topic, {"n": 5}) == 5

    set_offline(page, False)
    after = wait_converged(page, port, "tiles", {"tiles": {}}, timeout=20.0)
    assert after["version"] == before["version"] + 2
    tiles = view(page, "tiles")
    assert tiles["epoch"] == before["epoch"]
    # No new snapshot: the resume carried only the two change sets missed.
    assert len(tiles["log"]["snapshots"]) == snapshots_before
    assert not any(s["reset"] for s in tiles["log"]["snapshots"])
    wait(page, lambda d: [m["seq"] for m in view(d, "news")["log"]["messages"]][-2:] == [4, 5], 10.0,
         "the messages published while the page was away never arrived")
    news = view(page, "news")
    assert news["log"]["resets"] == []
    assert [m["seq"] for m in news["log"]["messages"]] == [4, 5]
    assert news["log"]["gaps"] == []
    assert page.execute_script("return window.__marker") == 1, "the page was reloaded"


# ---- Presence ------------------------------------------------------------------------------

@pytest.mark.parametrize("transport", TRANSPORTS)
def test_presence_is_kept_live_as_clients_join_and_leave(page, gateway, transport):
    """A topic followed with `presence: true` keeps the gateway's member list: the page's own
    connection first, then others as they join, and without them once they leave."""
    from wsclient import connect, send_json, recv_json

    topic = unique("presence")
    open_page(page, gateway.port)
    call(page, "client", "one", {"transport": transport})
    call(page, "topic", "one", "room", topic, {"presence": True})
    wait_status(page, ["room"], "live")

    def gateway_members():
        listing = json_ok(api(gateway.port, "GET", f"/api/topics/{topic}/presence"), 200)
        return sorted(member["client"] for member in listing["members"]), listing

    def wait_same(count: int, why: str):
        def same(d):
            members, listing = gateway_members()
            seen = call(d, "presence", "room")
            return len(members) == count and seen["members"] == members and seen["clients"] == listing["clients"]
        wait(page, same, 10.0, f"{why}: the page holds {call(page, 'presence', 'room')}, the gateway {gateway_members()[1]}")

    wait_same(1, "the page's own subscription")
    others = [connect(gateway.port) for _ in range(2)]
    try:
        for ws in others:
            send_json(ws, {"type": "subscribe", "topic": topic})
            assert recv_json(ws)["type"] == "subscribed"
        wait_same(3, "two clients joined")
        others.pop().close()
        wait_same(2, "one client left")
    finally:
        for ws in others:
            ws.close()
    wait_same(1, "the other left too")
    log = view(page, "room")["log"]["presence"]
    assert log[0]["whole"] and log[0]["clients"] == 1, log
    assert sum(entry["joins"] for entry in log) >= 2 and sum(entry["leaves"] for entry in log) >= 2, log
    assert call(page, "presence", "room")["countsOnly"] is False
