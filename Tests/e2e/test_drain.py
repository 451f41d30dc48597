"""Graceful drain on SIGTERM (docs/SECURITY.md): WebSocket clients are told to go with 1001 and a
reconnect hint, spread over the drain timeout; SSE streams end cleanly with a retry hint; every
publish acknowledged before the signal reaches the connected subscribers; the process exits 0."""

from __future__ import annotations

import signal
import threading
import time

import pytest
import websockets

from conftest import RawConnection, http_request
from wsclient import connect, new_store, publish, put_model, recv_json, send_json, subscribe, unique

DRAIN_SECONDS = 4.0
SUBSCRIBERS = 24
EXIT_TIMEOUT = 20.0


class Subscriber(threading.Thread):
    """Reads one topic until the gateway closes the connection, noting what came and when."""

    def __init__(self, port: int, topic: str):
        super().__init__(daemon=True)
        self.ws = connect(port)
        assert subscribe(self.ws, topic=topic)["type"] == "subscribed"
        self.messages: list[int] = []
        self.hint: dict | None = None
        self.close_code: int | None = None
        self.closed_at: float | None = None

    def run(self) -> None:
        try:
            while True:
                frame = recv_json(self.ws, timeout=EXIT_TIMEOUT)
                if frame["type"] == "message":
                    self.messages.append(frame["data"]["n"])
                elif frame["type"] == "draining":
                    self.hint = frame
        except websockets.exceptions.ConnectionClosed as closed:
            self.closed_at = time.monotonic()
            self.close_code = closed.rcvd.code if closed.rcvd else None
        except AssertionError:
            pass


def test_websockets_are_told_to_go_in_a_spread_and_nothing_acknowledged_is_lost(start_server):
    server = start_server("--drain-timeout", str(DRAIN_SECONDS))
    topic = unique("drain")
    subscribers = [Subscriber(server.port, topic) for _ in range(SUBSCRIBERS)]
    for subscriber in subscribers:
        subscriber.start()
    acknowledged = [publish(server.port, topic, {"n": n}) for n in range(20)]
    assert len(acknowledged) == 20
    signalled = time.monotonic()
    server.send_signal(signal.SIGTERM)
    for subscriber in subscribers:
        subscriber.join(EXIT_TIMEOUT)
    assert server.wait_exit(EXIT_TIMEOUT) == 0
    for subscriber in subscribers:
        assert subscriber.messages == list(range(20)), "an acknowledged publish was not delivered"
        assert subscriber.close_code == 1001
        assert subscriber.hint is not None and 0 <= subscriber.hint["reconnectAfterMs"] <= 1000
    closes = sorted(subscriber.closed_at - signalled for subscriber in subscribers)
    # Told over the first three quarters of the drain timeout: not all at once, and all in time.
    assert closes[-1] - closes[0] >= DRAIN_SECONDS * 0.75 * 0.5, closes
    assert closes[-1] <= DRAIN_SECONDS, closes
    first_half = sum(1 for at in closes if at < DRAIN_SECONDS * 0.75 / 2)
    assert SUBSCRIBERS * 0.2 <= first_half <= SUBSCRIBERS * 0.8, closes


def test_sse_streams_end_with_a_retry_hint(start_server):
    server = start_server("--drain-timeout", "2")
    topic = unique("drain-sse")
    publish(server.port, topic, {"n": 0})
    with RawConnection(server.port) as conn:
        conn.send(http_request("GET", f"/api/topics/{topic}/events?since=0"))
        received = b""
        deadline = time.monotonic() + 5
        while b"event: message" not in received:
            assert time.monotonic() < deadline, received
            received += conn._recv(deadline)
        server.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + EXIT_TIMEOUT
        while True:
            try:
                chunk = conn._recv(deadline)
            except Exception:  # the stream's end: EOF
                break
            if not chunk:
                break
            received += chunk
    text = received.decode()
    assert "retry: " in text and "event: draining" in text, text
    assert text.endswith("\n\n"), "the stream ended between events"
    assert server.wait_exit(EXIT_TIMEOUT) == 0


def test_store_subscriber_sees_whole_change_sets_until_the_jobs_stop(start_server):
    server = start_server("--drain-timeout", "2", "--demo", "--demo-rate", "200")
    with connect(server.port) as ws:
        snapshot = subscribe(ws, store="tiles")
        version = snapshot["version"]
        server.send_signal(signal.SIGTERM)
        hint = None
        with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
            while True:
                frame = recv_json(ws, timeout=EXIT_TIMEOUT)
                if frame["type"] == "changes":
                    assert frame["version"] == version + 1, "a change set was skipped"
                    assert frame["changes"], "an empty change set"
                    version = frame["version"]
                elif frame["type"] == "draining":
                    hint = frame
        assert closed.value.rcvd.code == 1001 and hint is not None
    assert server.wait_exit(EXIT_TIMEOUT) == 0


@pytest.mark.parametrize("pending", ["a subscription's next frame", "a presence's next flush"])
def test_work_delayed_past_the_drain_does_not_hold_the_exit(start_server, pending):
    """A rate's next frame (`maxRate: 0.01`: 100 s away) or a presence's next flush
    (`--presence-interval 60`) was a timer that kept the loop alive: the drained gateway exited
    only when it fired, 99 s and 59 s after SIGTERM (Kubernetes kills it at 30)."""
    server = start_server("--drain-timeout", "2", "--presence-interval", "60")
    store = new_store(server.port, {"m": {"n": 0}}, prefix="delayed")
    with connect(server.port) as ws:
        if pending == "a presence's next flush":
            # A follower sees a member join and leave; its next flush is 60 s away.
            room = unique("room")
            assert subscribe(ws, topic=room, presence=True)["type"] == "subscribed"
            with connect(server.port) as member:
                assert subscribe(member, topic=room)["type"] == "subscribed"
        else:
            send_json(ws, {"type": "subscribe", "store": store, "maxRate": 0.01})
            assert recv_json(ws)["type"] == "snapshot"
            for n in (1, 2):
                put_model(server.port, store, "m", {"n": n})
            assert recv_json(ws)["type"] == "changes"  # the first goes at once; the second waits 100 s
    signalled = time.monotonic()
    server.send_signal(signal.SIGTERM)
    assert server.wait_exit(EXIT_TIMEOUT) == 0, server.stderr_text()
    assert time.monotonic() - signalled < 2 + 3, "the exit waited for delayed work"
