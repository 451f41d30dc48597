"""The soak run's load: the actors that drive the gateway, each on a thread of its own, and the
rates and sizes they work at (`soak.py` runs them and watches the server)."""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from conftest import ConnectionClosed, api, json_ok  # noqa: E402
from procstat import reset_close  # noqa: E402
from wsclient import (  # noqa: E402
    OP_CLOSE,
    OP_TEXT,
    RawWebSocket,
    apply_changes,
    close_payload,
    connect,
    encode_frame,
    publish,
    recv_json,
    send_json,
)

HISTORY = 200                    # small, so the histories are full well within the warm-up
MAX_QUEUED = 256 * 1024          # small, so the slow readers reach it
STORES = ["soak-a", "soak-b"]
MODELS = 40
TOPICS = {"soak-news": 300, "soak-bulk": 16_000}   # topic → message size in bytes
PUBLISH_RATE = {"soak-news": 40, "soak-bulk": 15}  # messages per second
PATCH_RATE = 40                  # store PATCHes per second, over both stores
HTTP_RATE = 20                   # short HTTP connections per second
STORE_SUBSCRIBERS = 10
TOPIC_SUBSCRIBERS = 10
RESUMERS = 6
SLOW_READERS = 4
MALFORMED_RATE = 3               # connections per second that each send one malformed frame
MAX_MESSAGE = 16384              # --max-message-bytes, so an oversized message is cheap to send


class Tally:
    """Counters and problems shared by every actor."""

    def __init__(self):
        self.lock = threading.Lock()
        self.counts: dict[str, int] = {}
        self.problems: list[str] = []

    def add(self, name: str, amount: int = 1) -> None:
        with self.lock:
            self.counts[name] = self.counts.get(name, 0) + amount

    def problem(self, text: str) -> None:
        with self.lock:
            self.problems.append(text)
        print(f"PROBLEM: {text}", flush=True)


class Actor(threading.Thread):
    """A load thread that runs until `stop` is set; any exception is a problem."""

    def __init__(self, name: str, port: int, stop: threading.Event, tally: Tally):
        super().__init__(name=name, daemon=True)
        self.port, self.stop, self.tally = port, stop, tally
        self.rng = random.Random(name)

    def run(self) -> None:
        try:
            self.work()
        except Exception as error:  # noqa: BLE001 - every failure is reported
            if not self.stop.is_set():
                self.tally.problem(f"{self.name}: {type(error).__name__}: {error}")

    def pace(self, rate: float) -> bool:
        """Waits one period of `rate` per second; False once stopped."""
        return not self.stop.wait(1.0 / rate)


# ---- Writers -----------------------------------------------------------

class Publisher(Actor):
    def __init__(self, topic: str, *args):
        super().__init__(f"publish-{topic}", *args)
        self.topic = topic

    def work(self) -> None:
        pad = "p" * TOPICS[self.topic]
        while self.pace(PUBLISH_RATE[self.topic]):
            publish(self.port, self.topic, {"pad": pad})
            self.tally.add("published")


class Patcher(Actor):
    def work(self) -> None:
        while self.pace(PATCH_RATE):
            store = self.rng.choice(STORES)
            model = f"m{self.rng.randrange(MODELS)}"
            if self.rng.random() < 0.05:
                # A change set that deletes a model and puts it back.
                body = {"changes": [{"op": "delete", "model": model},
                                    {"op": "put", "model": model, "value": {"color": "#000000", "n": 0}}]}
                json_ok(api(self.port, "POST", f"/api/stores/{store}/changes", body))
            else:
                patch = {"color": f"#{self.rng.randrange(1 << 24):06x}", "n": self.rng.randrange(1000),
                         "style": {"width": self.rng.randrange(10)}}
                json_ok(api(self.port, "PATCH", f"/api/stores/{store}/models/{model}", patch))
            self.tally.add("patched")


class HTTPChurn(Actor):
    def work(self) -> None:
        while self.pace(HTTP_RATE):
            path = self.rng.choice(["/healthz", "/api/stores", f"/api/stores/{STORES[0]}", "/api/topics"])
            json_ok(api(self.port, "GET", path))
            self.tally.add("http")


# ---- Readers -----------------------------------------------------------

class StoreReplica:
    """A local copy of a store, checked frame by frame."""

    def __init__(self, store: str, snapshot: dict):
        self.store = store
        self.models = snapshot["models"]
        self.version = snapshot["version"]

    def apply(self, frame: dict) -> None:
        if frame.get("conflated"):
            assert frame["from"] == self.version, f"conflated from {frame['from']} at version {self.version}"
        else:
            assert frame["version"] == self.version + 1, f"version {frame['version']} after {self.version}"
        apply_changes(self.models, frame["changes"])
        self.version = frame["version"]


class StoreSubscriber(Actor):
    """Holds one subscription for the whole run; checks versions and the final state."""

    def __init__(self, index: int, *args):
        super().__init__(f"store-sub-{index}", *args)
        self.store = STORES[index % len(STORES)]
        self.replica: StoreReplica | None = None

    def work(self) -> None:
        with connect(self.port, ping_interval=None) as ws:
            send_json(ws, {"type": "subscribe", "store": self.store})
            self.replica = StoreReplica(self.store, recv_json(ws))
            while not self.stop.is_set():
                try:
                    frame = json.loads(ws.recv(timeout=0.5))
                except TimeoutError:
                    continue
                assert frame["type"] == "changes", frame
                self.replica.apply(frame)
                self.tally.add("store-frames")


class TopicSubscriber(Actor):
    """Holds one subscription for the whole run; checks that no sequence number is skipped."""

    def __init__(self, index: int, *args):
        super().__init__(f"topic-sub-{index}", *args)
        self.topic = list(TOPICS)[index % len(TOPICS)]

    def work(self) -> None:
        with connect(self.port, ping_interval=None, max_size=None) as ws:
            send_json(ws, {"type": "subscribe", "topic": self.topic})
            last = recv_json(ws)["seq"]
            while not self.stop.is_set():
                try:
                    frame = json.loads(ws.recv(timeout=0.5))
                except TimeoutError:
                    continue
                assert frame["type"] == "message" and frame["seq"] == last + 1, (last, frame.get("type"), frame.get("seq"))
                last = frame["seq"]
                self.tally.add("topic-frames")


class Resumer(Actor):
    """Subscribes to a store and a topic, leaves, and comes back with `since`: nothing may be lost."""

    def __init__(self, index: int, *args):
        super().__init__(f"resumer-{index}", *args)
        self.store = STORES[index % len(STORES)]
        self.topic = "soak-news"

    def work(self) -> None:
        seq, replica = None, None
        while not self.stop.is_set():
            with connect(self.port, ping_interval=None) as ws:
                topic_request = {"type": "subscribe", "topic": self.topic}
                store_request = {"type": "subscribe", "store": self.store}
                if seq is not None:
                    topic_request["since"] = seq
                    store_request["since"] = replica.version
                send_json(ws, topic_request)
                send_json(ws, store_request)
                stay_until = time.monotonic() + self.rng.uniform(1, 5)
                while time.monotonic() < stay_until and not self.stop.is_set():
                    try:
                        frame = json.loads(ws.recv(timeout=0.2))
                    except TimeoutError:
                        continue
                    kind = frame["type"]
                    if kind == "subscribed" and "topic" in frame:
                        assert frame["resumed"] == (seq is not None), frame
                        seq = frame["seq"] if seq is None else seq
                    elif kind == "subscribed":
                        assert frame["resumed"], frame
                    elif kind == "snapshot":
                        if replica is not None:
                            self.tally.add("lost")
                            self.tally.problem(f"{self.name}: a reset snapshot at {frame['version']} after {replica.version}")
                        replica = StoreReplica(self.store, frame)
                    elif kind == "gap":
                        self.tally.add("lost")
                        self.tally.problem(f"{self.name}: lost {frame['from']}..{frame['to']}")
                        seq = frame["to"]
                    elif kind == "message":
                        assert frame["seq"] == seq + 1, f"message {frame['seq']} after {seq}"
                        seq = frame["seq"]
                    elif kind == "changes":
                        replica.apply(frame)
                    else:
                        raise AssertionError(f"unexpected frame {frame}")
                if self.rng.random() < 0.3:
                    reset_close(ws.socket)
            self.tally.add("resumes")
            self.stop.wait(self.rng.uniform(0.1, 1.0))


class SlowReader(Actor):
    """Reads a little now and then: conflated on the store, closed with 1008 on the topic."""

    def __init__(self, index: int, *args):
        super().__init__(f"slow-{index}", *args)

    def work(self) -> None:
        seq = None
        while not self.stop.is_set():
            with RawWebSocket(self.port, rcvbuf=4096) as ws:
                ws.open()
                request = {"type": "subscribe", "topic": "soak-bulk"}
                if seq is not None:
                    request["since"] = seq
                ws.send_json(request)
                ws.send_json({"type": "subscribe", "store": STORES[0]})
                while not self.stop.is_set():
                    try:
                        opcode, payload = ws.read_message(timeout=10)
                    except (ConnectionClosed, OSError):
                        # Closed without a handshake: its pong sat behind the backlog past the
                        # ping timeout, which PROTOCOL.md allows.
                        self.tally.add("slow-aborted")
                        break
                    if opcode == OP_CLOSE:
                        code = int.from_bytes(payload[:2], "big")
                        assert code == 1008, payload
                        self.tally.add("slow-1008")
                        try:
                            ws.send_frame(OP_CLOSE, close_payload(1008))
                        except OSError:
                            pass
                        break
                    frame = json.loads(payload)
                    if frame["type"] == "message":
                        seq = frame["seq"]
                    elif frame["type"] == "subscribed" and "topic" in frame and seq is None:
                        seq = frame["seq"]
                    elif frame.get("conflated"):
                        self.tally.add("slow-conflated")
                    elif frame["type"] == "gap":
                        self.tally.add("slow-gap")
                        seq = frame["to"]
                    self.stop.wait(self.rng.uniform(0.1, 0.4))
            self.tally.add("slow-reconnects")


class MalformedFramer(Actor):
    """Opens a WebSocket, sends one malformed frame and checks the close code that answers it."""

    RESERVED_OPCODES = [3, 4, 5, 6, 7, 0xB, 0xC, 0xD, 0xE, 0xF]
    BAD_UTF8 = [b"\xff", b"\xfe", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc3"]

    def case(self) -> tuple[str, bytes, int]:
        """One malformed frame: (kind, bytes, the close code it must get)."""
        text = json.dumps({"type": "subscribe", "topic": "soak-news"}).encode()
        kind = self.rng.choice(["unmasked", "opcode", "utf8", "oversized", "oversized-declared"])
        if kind == "unmasked":
            return kind, encode_frame(OP_TEXT, text, mask=False), 1002
        if kind == "opcode":
            return kind, encode_frame(self.rng.choice(self.RESERVED_OPCODES), text), 1002
        if kind == "utf8":
            return kind, encode_frame(OP_TEXT, b'{"type":"' + self.rng.choice(self.BAD_UTF8) + b'"}'), 1007
        if kind == "oversized":
            return kind, encode_frame(OP_TEXT, b'"' + b"o" * MAX_MESSAGE + b'"'), 1009
        # Only the head of a frame declaring more than the limit (and its mask): refused unread.
        size = self.rng.choice([MAX_MESSAGE + 1, 1 << 20, 1 << 40])
        head = bytes([0x80 | OP_TEXT]) + (bytes([0x80 | 126]) + size.to_bytes(2, "big") if size < 65536
                                          else bytes([0x80 | 127]) + size.to_bytes(8, "big"))
        return "oversized-declared", head + os.urandom(4), 1009

    def work(self) -> None:
        while self.pace(MALFORMED_RATE):
            kind, data, expected = self.case()
            with RawWebSocket(self.port) as ws:
                ws.open()
                ws.send(data)
                try:
                    frame = ws.read_frame(timeout=10)
                    got = frame.close_code() if frame.opcode == OP_CLOSE else f"a frame of opcode {frame.opcode}"
                except (ConnectionClosed, OSError) as error:
                    got = f"no close frame ({type(error).__name__})"
                if got != expected:
                    self.tally.add("malformed-wrong")
                    self.tally.problem(f"{self.name}: {kind} {data[:40]!r} got {got}, not {expected}")
                    continue
                self.tally.add("malformed")
                self.tally.add(f"malformed-{expected}")
                try:
                    ws.send_frame(OP_CLOSE, close_payload(expected))
                except OSError:
                    pass  # the server may already have closed the socket after the protocol error
                ws.expect_eof()


# ---- The run -----------------------------------------------------------
