"""The compose test's clients: publish() through nginx (retried with an Idempotency-Key), the
Publisher and Stopper threads, and the WebSocket Client that subscribes, drains and resumes.

`published` and `publish_retries` live here: read them as compose_clients.published and
compose_clients.publish_retries, since publish() rebinds publish_retries.
"""

from __future__ import annotations

import json
import threading
import time

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from compose_stack import (FRAME_TIMEOUT, PUBLISH_TIMEOUT, STOP_TIMEOUT, SUBPROTOCOL, TOPIC, Failure, Silence,
                           api_key, compose, http, make_token, ports, token_secret, wait_until)


# ---- Publishing -----------------------------------------------------------

published: dict[int, int] = {}   # seq -> n, the message's number in the order published
publish_lock = threading.Lock()
publish_retries = 0


def publish(n: int) -> int:
    """Publishes {"n": n} through nginx; a publish that a stopping node cut off (no answer, 502,
    503, 504) is sent again with the same Idempotency-Key, so it is published once."""
    global publish_retries
    body = json.dumps({"n": n}).encode()
    headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json",
               "Idempotency-Key": f"{TOPIC}-{n}"}
    deadline = time.monotonic() + PUBLISH_TIMEOUT
    while True:
        status, answer = http("POST", ports["nginx"], f"/api/topics/{TOPIC}/messages", body, headers)
        if status == 201:
            seq = answer["seq"]
            with publish_lock:
                if seq in published and published[seq] != n:
                    raise Failure(f"seq {seq} answered for messages {published[seq]} and {n}")
                published[seq] = n
            return seq
        if status not in (None, 502, 503, 504):
            raise Failure(f"publish {n} answered {status} {answer}")
        if time.monotonic() > deadline:
            raise Failure(f"publish {n}: last answered {status} after {PUBLISH_TIMEOUT} s of retries")
        with publish_lock:
            publish_retries += 1
        time.sleep(0.1)


class Publisher(threading.Thread):
    """Publishes one message after another until stopped: across the node's stop."""

    def __init__(self, first: int):
        super().__init__(daemon=True)
        self.next = first
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self):
        try:
            while not self.stopping.is_set():
                publish(self.next)
                self.next += 1
                time.sleep(0.02)
        except BaseException as error:  # reported by the main thread
            self.error = error

    def wait_for(self, count: int):
        """Waits until count more messages have been published."""
        target = self.next + count
        wait_until(f"{count} more publishes", lambda: self.next >= target or self.error, PUBLISH_TIMEOUT)
        if self.error:
            raise Failure(f"publisher: {self.error}")

    def stop(self) -> int:
        """Stops, and returns the number of the next message to publish."""
        self.stopping.set()
        self.join(PUBLISH_TIMEOUT + 5)
        if self.is_alive():
            raise Failure("the publisher did not stop")
        if self.error:
            raise Failure(f"publisher: {self.error}")
        return self.next


class Stopper(threading.Thread):
    """`podman-compose stop SERVICE`, which returns when the node has drained and exited."""

    def __init__(self, service: str):
        super().__init__(daemon=True)
        self.service = service
        self.error: BaseException | None = None
        self.took = None

    def run(self):
        began = time.monotonic()
        try:
            compose("stop", self.service, timeout=STOP_TIMEOUT)
        except BaseException as error:  # reported by the main thread
            self.error = error
        self.took = time.monotonic() - began


# ---- Subscribers ----------------------------------------------------------

class Client:
    def __init__(self, name: str, via: str):
        self.name = name
        self.via = via            # "gateway-1", "gateway-2" or "nginx"
        self.ws = None
        self.first = None         # the seq the first subscription started after
        self.last = None          # the last seq received (or started after)
        self.seqs: list[int] = []
        self.data: dict[int, object] = {}
        self.close_code = None
        self.reconnect_after_ms = None

    def open(self, via: str, since: int | None = None):
        self.via = via
        url = f"ws://127.0.0.1:{ports[via]}/ws?token={token}"
        self.ws = connect(url, subprotocols=[SUBPROTOCOL], open_timeout=15, close_timeout=5, proxy=None,
                          compression=None, ping_interval=None, max_size=None, legacy=True)
        if self.ws.subprotocol != SUBPROTOCOL:
            raise Failure(f"{self.name}: subprotocol {self.ws.subprotocol}")
        subscribe = {"type": "subscribe", "topic": TOPIC}
        if since is not None:
            subscribe["since"] = since
        self.ws.send(json.dumps(subscribe))
        frame = self.receive(FRAME_TIMEOUT)
        if frame.get("type") != "subscribed" or frame.get("topic") != TOPIC:
            raise Failure(f"{self.name}: answered {frame}")
        if since is None:
            self.first = self.last = frame["seq"]
        elif frame.get("resumed") is not True:
            raise Failure(f"{self.name}: a resume after {since} answered {frame}")

    def receive(self, timeout: float) -> dict:
        try:
            text = self.ws.recv(timeout=timeout)
        except TimeoutError:
            raise Silence(f"{self.name} (via {self.via}): no frame within {timeout:.1f} s, last seq {self.last}") from None
        return json.loads(text)

    def take(self, frame: dict):
        """A message (a gap or anything else fails the test)."""
        if frame.get("type") != "message" or frame.get("topic") != TOPIC:
            raise Failure(f"{self.name}: unexpected frame {frame}")
        self.seqs.append(frame["seq"])
        self.data.setdefault(frame["seq"], frame.get("data"))
        self.last = frame["seq"]

    def read_until(self, seq: int):
        deadline = time.monotonic() + FRAME_TIMEOUT
        while self.last < seq:
            self.take(self.receive(max(0.1, deadline - time.monotonic())))

    def read_until_closed(self, timeout: float):
        """Takes the messages a draining node still sends, its `draining` frame, then its close."""
        deadline = time.monotonic() + timeout
        try:
            while True:
                frame = self.receive(max(0.1, deadline - time.monotonic()))
                if frame.get("type") == "draining" and self.reconnect_after_ms is None:
                    self.reconnect_after_ms = frame.get("reconnectAfterMs")
                    if not isinstance(self.reconnect_after_ms, int) or not 0 <= self.reconnect_after_ms <= 1000:
                        raise Failure(f"{self.name}: {frame}")
                else:
                    self.take(frame)
        except ConnectionClosed as closed:
            self.close_code = closed.rcvd.code if closed.rcvd else None
            self.ws = None

    def still_open(self) -> bool:
        """Whether the connection stays open, taking the messages due (once publishing stopped)."""
        try:
            while True:
                self.take(self.receive(0.5))
        except Silence:
            return True
        except ConnectionClosed as closed:
            self.close_code = closed.rcvd.code if closed.rcvd else None
            self.ws = None
            return False


token = make_token(token_secret, {"sub": "compose-test", "exp": int(time.time()) + 3600, "topics": [TOPIC]})
