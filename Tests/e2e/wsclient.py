"""Clients shared by the WebSocket and SSE end-to-end tests (see docs/PROTOCOL.md).

- `connect`, `recv_json`, `send_json`: the `websockets` sync client, for the stream tests.
- `RawWebSocket`: a client over a plain socket that controls every byte it sends (masking,
  reserved bits, opcodes, fragmentation, close payloads) and checks every frame it reads.
- Store and topic helpers over the HTTP API, and `apply_changes`, which folds change frames
  into a local copy of a store.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import itertools
import json
import os
import re
import select
import socket
import struct
import time
from dataclasses import dataclass

from websockets.sync.client import connect as ws_connect

from conftest import HOST, ConnectionClosed, Response, api, http_request, json_ok, parse_head

SUBPROTOCOL = "receptionist.v1"
FRAME_TIMEOUT = 5.0      # one frame or event that is due now
OPEN_TIMEOUT = 5.0       # WebSocket opening handshake
CLOSE_TIMEOUT = 5.0      # closing handshake / the peer closing the TCP connection
WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
NOW_SLACK_US = 300 * 1_000_000  # committedAt / publishedAt lie within 5 minutes of the test clock

OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
_names = itertools.count()


# ---- websockets client -------------------------------------------------

class _AnyEpoch:
    """Equal to any epoch the gateway gives (16 hex digits; in a cluster after `<life>.`)."""

    def __eq__(self, other) -> bool:
        return isinstance(other, str) and re.fullmatch(r"([0-9a-f]{8}\.)?[0-9a-f]{16}", other) is not None

    def __repr__(self) -> str: return "<epoch>"


EPOCH = _AnyEpoch()


def ws_uri(port: int, path: str = "/ws") -> str:
    return f"ws://{HOST}:{port}{path}"


def connect(port: int, path: str = "/ws", subprotocols=(SUBPROTOCOL,), **kwargs):
    """Open a WebSocket with the `websockets` sync client (no proxy, no compression, no pings)."""
    options = dict(subprotocols=list(subprotocols) or None, open_timeout=OPEN_TIMEOUT,
                   close_timeout=CLOSE_TIMEOUT, proxy=None, compression=None,
                   ping_interval=None, max_size=None, legacy=True)
    options.update(kwargs)
    ws = ws_connect(ws_uri(port, path), **options)
    if subprotocols:
        assert ws.subprotocol == SUBPROTOCOL, ws.subprotocol
    return ws


def send_json(ws, message) -> None:
    ws.send(json.dumps(message))


def recv_text(ws, timeout: float = FRAME_TIMEOUT) -> str:
    try:
        message = ws.recv(timeout=timeout)
    except TimeoutError:
        raise AssertionError(f"no frame within {timeout}s") from None
    assert isinstance(message, str), f"expected a text frame, got binary {message[:100]!r}"
    return message


def recv_json(ws, timeout: float = FRAME_TIMEOUT) -> dict:
    """The next frame, which must be a text frame holding one JSON object with a `type`."""
    frame = json.loads(recv_text(ws, timeout))
    assert isinstance(frame, dict) and isinstance(frame.get("type"), str), frame
    return frame


def subscribe(ws, timeout: float = FRAME_TIMEOUT, **target) -> dict:
    """Send a subscribe message and return the first frame answering it."""
    send_json(ws, {"type": "subscribe", **target})
    return recv_json(ws, timeout)


# ---- Frame checks and local state --------------------------------------

def assert_recent_micros(value) -> None:
    assert isinstance(value, int) and not isinstance(value, bool), value
    assert abs(value - time.time() * 1_000_000) < NOW_SLACK_US, f"{value} is not microseconds since the epoch"


def assert_changes_frame(frame: dict, store: str, version: int | None = None) -> None:
    """A plain (not conflated) `changes` frame, optionally at an exact version."""
    assert frame.get("type") == "changes" and frame.get("store") == store, frame
    assert {"type", "store", "version", "committedAt", "changes"} <= set(frame), frame
    assert not frame.get("conflated", False), frame
    if version is not None:
        assert frame["version"] == version, frame
    assert_recent_micros(frame["committedAt"])
    assert_change_list(frame["changes"])


def assert_change_list(changes) -> None:
    assert isinstance(changes, list) and changes, changes
    for change in changes:
        assert set(change) == {"model", "path", "kind", "value"}, change
        assert change["kind"] in ("created", "updated", "deleted"), change
        assert (change["kind"] == "deleted") == (change["value"] is None), change


def apply_changes(models: dict, changes: list[dict]) -> None:
    """Fold changes into `models` the way PROTOCOL.md defines (dotted paths, "" = the model)."""
    for change in changes:
        model, path, value = change["model"], change["path"], copy.deepcopy(change["value"])
        deleted = change["kind"] == "deleted"
        if path == "":
            if deleted:
                models.pop(model, None)
            else:
                models[model] = value
            continue
        *parents, last = path.split(".")
        node = models.setdefault(model, {})
        for key in parents:
            if not isinstance(node.get(key), dict):
                if deleted:
                    break
                node[key] = {}
            node = node[key]
        else:
            if deleted:
                node.pop(last, None)
            else:
                node[last] = value


# ---- HTTP helpers for stores and topics --------------------------------

def unique(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{next(_names)}"


def new_store(port: int, models: dict | None = None, prefix: str = "ws") -> str:
    """Create a store; `models` are written in one change set (version 1), if any."""
    name = unique(prefix)
    assert json_ok(api(port, "POST", "/api/stores", {"name": name}), 201) == {"name": name, "version": 0}
    if models:
        commit(port, name, [{"op": "put", "model": k, "value": v} for k, v in models.items()])
    return name


def commit(port: int, store: str, changes: list[dict]) -> int:
    """POST an atomic change set; returns its version."""
    body = json_ok(api(port, "POST", f"/api/stores/{store}/changes", {"changes": changes}))
    assert body["changes"] == len(changes), body
    return body["version"]


def put_model(port: int, store: str, model: str, value: dict) -> int:
    resp = api(port, "PUT", f"/api/stores/{store}/models/{model}", value)
    assert resp.status in (200, 201), (resp.status, resp.body[:300])
    return json_ok(resp, resp.status)["version"]


def patch_model(port: int, store: str, model: str, patch: dict) -> int:
    return json_ok(api(port, "PATCH", f"/api/stores/{store}/models/{model}", patch))["version"]


def publish(port: int, topic: str, data) -> int:
    """POST one message; returns its sequence number."""
    resp = api(port, "POST", f"/api/topics/{topic}/messages", body=json.dumps(data).encode())
    assert resp.status in (200, 201), (resp.status, resp.body[:300])  # PROTOCOL.md names no status
    body = json_ok(resp, resp.status)
    assert set(body) == {"topic", "seq"} and body["topic"] == topic, body
    return body["seq"]


def topics_listing(port: int) -> dict[str, int]:
    body = json_ok(api(port, "GET", "/api/topics"))
    assert set(body) == {"topics"}, body
    return {entry["name"]: entry["seq"] for entry in body["topics"]}


def kernel_buffer_budget() -> int:
    """Bytes that certainly overflow the kernel's socket buffers on one loopback connection."""
    with open("/proc/sys/net/ipv4/tcp_wmem") as wmem:
        largest = int(wmem.read().split()[2])
    return 2 * largest + (1 << 20)


# ---- Raw WebSocket -----------------------------------------------------

def accept_key(key: str) -> str:
    return base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()


def new_key() -> str:
    return base64.b64encode(os.urandom(16)).decode()


def upgrade_request(path: str = "/ws", key: str | None = None, version: str = "13",
                    subprotocols=(SUBPROTOCOL,), omit=(), extra=()) -> bytes:
    headers = [("Upgrade", "websocket"), ("Connection", "Upgrade"),
               ("Sec-WebSocket-Key", key or new_key()), ("Sec-WebSocket-Version", version)]
    if subprotocols:
        headers.append(("Sec-WebSocket-Protocol", ", ".join(subprotocols)))
    headers = [(k, v) for k, v in headers if k not in omit] + list(extra)
    return http_request("GET", path, headers)


def encode_frame(opcode: int, payload: bytes = b"", fin: bool = True, rsv: int = 0,
                 mask: bool = True) -> bytes:
    """A frame as a client would send it; `rsv` is the three reserved bits (0-7)."""
    head = bytes([(0x80 if fin else 0) | (rsv & 7) << 4 | opcode])
    mask_bit = 0x80 if mask else 0
    size = len(payload)
    if size < 126:
        head += bytes([mask_bit | size])
    elif size < 65536:
        head += bytes([mask_bit | 126]) + struct.pack(">H", size)
    else:
        head += bytes([mask_bit | 127]) + struct.pack(">Q", size)
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def close_payload(code: int, reason: bytes = b"") -> bytes:
    return struct.pack(">H", code) + reason


@dataclass
class Frame:
    fin: bool
    rsv: int
    opcode: int
    payload: bytes

    def close_code(self) -> int | None:
        assert self.opcode == OP_CLOSE, self
        return struct.unpack(">H", self.payload[:2])[0] if len(self.payload) >= 2 else None

    def close_reason(self) -> str:
        return self.payload[2:].decode("utf-8")


class RawWebSocket:
    """A WebSocket client over a plain socket; `rcvbuf` shrinks SO_RCVBUF before connecting."""

    def __init__(self, port: int, rcvbuf: int | None = None, timeout: float = FRAME_TIMEOUT):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect((HOST, port))
        self.buffer = b""

    def __enter__(self) -> "RawWebSocket":
        return self

    def __exit__(self, *exc) -> None:
        self.sock.close()

    # -- bytes
    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"nothing more arrived in time; buffered {self.buffer[:200]!r}")
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(1 << 16)
        except (TimeoutError, socket.timeout):
            raise AssertionError(f"nothing more arrived in time; buffered {self.buffer[:200]!r}") from None
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            raise ConnectionClosed(f"connection closed; buffered {self.buffer[:200]!r}")
        self.buffer += chunk

    def _take(self, size: int, deadline: float) -> bytes:
        while len(self.buffer) < size:
            self._fill(deadline)
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    def readable(self, timeout: float) -> bool:
        return bool(self.buffer) or bool(select.select([self.sock], [], [], timeout)[0])

    # -- handshake
    def handshake(self, timeout: float = FRAME_TIMEOUT, **request) -> Response:
        """Send an upgrade request (see `upgrade_request`) and read the answer's head and body."""
        self.send(upgrade_request(**request))
        deadline = time.monotonic() + timeout
        while b"\r\n\r\n" not in self.buffer:
            self._fill(deadline)
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        resp = Response(*parse_head(head), b"")
        if resp.status != 101 and resp.header("Content-Length") is not None:
            resp.body = self._take(int(resp.header("Content-Length")), deadline)
        return resp

    def open(self, **request) -> "RawWebSocket":
        resp = self.handshake(**request)
        assert resp.status == 101, (resp.status, resp.headers, resp.body)
        return self

    # -- frames
    def send_frame(self, opcode: int, payload: bytes = b"", **options) -> None:
        self.send(encode_frame(opcode, payload, **options))

    def send_json(self, message) -> None:
        self.send_frame(OP_TEXT, json.dumps(message).encode())

    def read_frame(self, timeout: float = FRAME_TIMEOUT) -> Frame:
        """One frame; raises ConnectionClosed at EOF. Server frames must never be masked."""
        deadline = time.monotonic() + timeout
        first, second = self._take(2, deadline)
        assert not second & 0x80, "the server masked a frame"
        size = second & 0x7F
        if size == 126:
            size = struct.unpack(">H", self._take(2, deadline))[0]
        elif size == 127:
            size = struct.unpack(">Q", self._take(8, deadline))[0]
        return Frame(bool(first & 0x80), first >> 4 & 7, first & 0x0F, self._take(size, deadline))

    def read_message(self, timeout: float = FRAME_TIMEOUT, answer_pings: bool = True) -> tuple[int, bytes]:
        """The next data message (fragments joined) or close frame, as (opcode, payload)."""
        deadline = time.monotonic() + timeout
        opcode, parts = None, []
        while True:
            frame = self.read_frame(max(0.0, deadline - time.monotonic()))
            assert frame.rsv == 0, frame
            if frame.opcode in (OP_PING, OP_PONG):
                assert frame.fin and len(frame.payload) <= 125, frame
                if frame.opcode == OP_PING and answer_pings:
                    self.send_frame(OP_PONG, frame.payload)
                continue
            if frame.opcode == OP_CLOSE:
                return OP_CLOSE, frame.payload
            if opcode is None:
                assert frame.opcode in (OP_TEXT, OP_BINARY), frame
                opcode = frame.opcode
            else:
                assert frame.opcode == OP_CONT, frame
            parts.append(frame.payload)
            if frame.fin:
                return opcode, b"".join(parts)

    def recv_json(self, timeout: float = FRAME_TIMEOUT) -> dict:
        opcode, payload = self.read_message(timeout)
        assert opcode == OP_TEXT, (opcode, payload[:200])
        frame = json.loads(payload.decode("utf-8"))
        assert isinstance(frame, dict) and isinstance(frame.get("type"), str), frame
        return frame

    def expect_eof(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """The server closes the TCP connection without sending anything more."""
        deadline = time.monotonic() + timeout
        try:
            self._fill(deadline)
        except ConnectionClosed:
            assert not self.buffer, f"unexpected bytes before the close: {self.buffer[:200]!r}"
            return
        raise AssertionError(f"unexpected bytes after the close frame: {self.buffer[:200]!r}")

    def read_until_closed(self, timeout: float) -> tuple[list[Frame], Frame | None]:
        """Read everything until the connection ends: (frames before any close frame, close frame).

        A close frame is answered, as a client would; a frame cut short by the close is dropped.
        """
        deadline = time.monotonic() + timeout
        frames, close = [], None
        while True:
            try:
                frame = self.read_frame(max(0.0, deadline - time.monotonic()))
            except ConnectionClosed:
                return frames, close
            if frame.opcode == OP_CLOSE and close is None:
                close = frame
                try:
                    self.send_frame(OP_CLOSE, frame.payload[:2])
                except OSError:
                    pass
            elif close is None:
                frames.append(frame)
