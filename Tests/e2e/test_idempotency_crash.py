"""Idempotency keys with the disk engine (`--data-dir`) across `kill -9` (docs/PROTOCOL.md,
"Idempotent publishes"): the keys are kept in the data directory, so a retry sent after a crash
is answered from the first attempt and nothing is published or committed twice.

The load test retries every request it sent, answered or not, after the crash: each is applied
exactly once or, when its outcome was unknown at the crash, refused 409 and applied at most once.
"""

from __future__ import annotations

import http.client
import json
import random
import threading
import time

from conftest import HOST, api, json_ok
from data_dir import EXIT_TIMEOUT, IO_TIMEOUT, messages_between, start_on, stop_with
from wsclient import unique

REPLAYED = "Idempotent-Replayed"
WRITERS = 16


def post(port: int, path: str, payload, key: str) -> tuple[int, dict, str | None]:
    conn = http.client.HTTPConnection(HOST, port, timeout=IO_TIMEOUT)
    try:
        conn.request("POST", path, body=json.dumps(payload), headers={"Content-Type": "application/json", "Idempotency-Key": key})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"null"), resp.getheader(REPLAYED)
    finally:
        conn.close()


def test_keys_answered_before_a_kill_are_replayed_after_it(start_server, tmp_path):
    data_dir = tmp_path / "data"
    server = start_on(start_server, data_dir)
    topic, store = unique("orders"), unique("carts")
    json_ok(api(server.port, "POST", "/api/stores", {"name": store}), 201)
    message = post(server.port, f"/api/topics/{topic}/messages", {"id": 1017}, "order-1017")
    change = post(server.port, f"/api/stores/{store}/changes",
                  {"changes": [{"op": "put", "model": "c1", "value": {"items": 3}}]}, "cart-c1")
    assert message[:2] == (201, {"topic": topic, "seq": 1}) and message[2] is None, message
    assert change[0] == 200 and change[1]["version"] == 1 and change[2] is None, change
    stop_with(server, "SIGKILL")

    server = start_on(start_server, data_dir)
    assert post(server.port, f"/api/topics/{topic}/messages", {"id": 1017}, "order-1017") == (201, message[1], "true")
    assert post(server.port, f"/api/stores/{store}/changes",
                {"changes": [{"op": "put", "model": "c1", "value": {"items": 3}}]}, "cart-c1") == (200, change[1], "true")
    # The same key on another request is still refused.
    status, body, _ = post(server.port, f"/api/topics/{topic}/messages", {"id": 1018}, "order-1017")
    assert status == 409 and body["error"] == "conflict", body
    # Nothing was published or committed again: the next ones follow on.
    assert post(server.port, f"/api/topics/{topic}/messages", {"id": 2}, unique("next"))[1]["seq"] == 2
    assert json_ok(api(server.port, "GET", f"/api/stores/{store}"))["version"] == 1


class KeyedWriter(threading.Thread):
    """Publishes one message after another, each under a key of its own, until killed."""

    def __init__(self, port: int, topic: str, name: str, stop: threading.Event):
        super().__init__(daemon=True)
        self.port, self.topic, self.name, self.stop = port, topic, name, stop
        self.sent: list[tuple[str, dict]] = []
        self.answered: dict[str, int] = {}

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            key, payload = f"{self.name}-{n}", {"writer": self.name, "n": n}
            self.sent.append((key, payload))
            try:
                status, body, _ = post(self.port, f"/api/topics/{self.topic}/messages", payload, key)
            except (OSError, http.client.HTTPException):
                return  # killed
            if status != 201:
                return
            self.answered[key] = body["seq"]
            n += 1


def test_every_request_retried_after_a_kill_under_load_is_applied_once(start_server, tmp_path):
    """16 writers publish under keys of their own; the gateway is killed at a random moment and
    started again; every request sent is retried. An answered one is replayed with its number; an
    unanswered one is replayed, published now, or refused 409 (its outcome was unknown at the
    crash). Then the topic holds each request's message at most once, every answered or replayed
    one exactly once, at the number it was given."""
    data_dir = tmp_path / "data"
    # Every message is read back at the end: the history keeps them all.
    history = ("--history", "100000")
    server = start_on(start_server, data_dir, *history)
    topic = unique("keyed")
    stop = threading.Event()
    writers = [KeyedWriter(server.port, topic, f"w{index}", stop) for index in range(WRITERS)]
    for writer in writers:
        writer.start()
    deadline = time.monotonic() + 10
    while sum(len(writer.answered) for writer in writers) < 200:
        assert time.monotonic() < deadline, "the load was not answered"
        time.sleep(0.01)
    time.sleep(random.uniform(0.1, 0.5))
    stop_with(server, "SIGKILL")
    stop.set()
    for writer in writers:
        writer.join(EXIT_TIMEOUT)

    server = start_on(start_server, data_dir, *history)
    given: dict[str, int] = {}
    unknown: set[str] = set()
    for writer in writers:
        for key, payload in writer.sent:
            status, body, replayed = post(server.port, f"/api/topics/{topic}/messages", payload, key)
            if key in writer.answered:
                assert (status, body.get("seq"), replayed) == (201, writer.answered[key], "true"), (key, status, body)
            if status == 201:
                given[key] = body["seq"]
            else:
                assert status == 409 and body["error"] == "conflict", (key, status, body)
                unknown.add(key)
    last = max(given.values())
    messages = messages_between(server.port, topic, 0, last)
    by_key = {}
    for message in messages:
        key = f"{message['data']['writer']}-{message['data']['n']}"
        assert key not in by_key, f"{key} was published twice: {by_key.get(key)} and {message['seq']}"
        by_key[key] = message["seq"]
    for key, seq in given.items():
        assert by_key.get(key) == seq, (key, seq, by_key.get(key))
    assert set(by_key) <= set(given) | unknown, set(by_key) - set(given) - unknown
    print(f"{sum(len(w.answered) for w in writers)} answered before the kill, {len(given)} kept after it, "
          f"{len(unknown)} refused as unknown")
