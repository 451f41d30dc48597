"""The browser client library's test page, for the tests that drive Public/receptionist-client.js
in headless Chromium (test_client_library*.py, test_client_resume.py): a harness page that records
what each client and subscription reports, a script that records the page's sockets and event
streams, the gateway and page fixtures, and the calls and waits the tests make on the page.
"""

from __future__ import annotations

import json
import re
import shutil
import time

import pytest

from conftest import REPO_ROOT, api, json_ok, store_snapshot
from projection import project
from viewer import PUBLIC, new_browser, wait

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
  const calls = new Map();
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
    // Commits and RPCs: a test starts them on `clientOf(id)` and hands each promise to `settle`;
    // `outcome` is null until it settles.
    clientOf(id) { return clients.get(id).client; },
    settle(id, promise) {
      calls.set(id, null);
      promise.then((value) => calls.set(id, { value }),
        (error) => calls.set(id, { name: error.name, code: error.code ?? null, message: String(error.message) }));
    },
    outcome(id) { return calls.get(id) ?? null; },
    outcomes(prefix) { return [...calls].filter(([id]) => id.startsWith(prefix)).map(([, outcome]) => outcome); },
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
