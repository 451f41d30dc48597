"""permessage-deflate (RFC 7692) for the compression tests (test_compression*.py): what the gateway
agrees to, raw deflate and inflate as the extension frames them, `DeflateSocket` (a raw socket that
shows the RSV1 bits and the bytes on the wire, and sends the frames no library would), and the
`websockets` client with compression on.
"""

from __future__ import annotations

import json
import random
import re
import time
import zlib
from dataclasses import dataclass

from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory

from wsclient import (
    EPOCH,
    FRAME_TIMEOUT,
    OP_CLOSE,
    OP_CONT,
    OP_PING,
    OP_PONG,
    OP_TEXT,
    Frame,
    RawWebSocket,
    assert_recent_micros,
    connect,
)

EXTENSIONS = "Sec-WebSocket-Extensions"
# What the gateway answers to every offer it accepts (docs/PROTOCOL.md).
AGREED = "permessage-deflate; server_no_context_takeover; client_no_context_takeover"
# What Python's websockets and Chromium offer.
OFFER = "permessage-deflate; client_max_window_bits"
TAIL = b"\x00\x00\xff\xff"   # the empty stored block a sync flush ends with (RFC 7692 section 7.2.1)
RSV1 = 4                     # `Frame.rsv` holds RSV1 RSV2 RSV3 as bits 2 1 0
MIN_BYTES = 256              # default --compression-min-bytes
SMALL_LIMIT = 65536          # --max-message-bytes of the client-message limit tests

# A message well over the threshold that compresses well, as dashboards' JSON does.
BIG = {"headline": "quarterly figures", "rows": [
    {"id": n, "name": f"item {n}", "price": n * 1.25, "tags": ["a", "b"], "ok": n % 2 == 0, "note": None}
    for n in range(40)]}

# Random hex: sent twice in one message, the second copy is, with a 15-bit window, one
# back-reference 20,000 bytes back, beyond any window of 14 bits or fewer (16 KiB).
WINDOW_BLOCK = random.Random(7692).randbytes(10_000).hex()


def subscribed(topic: str, seq: int = 0) -> dict:
    return {"type": "subscribed", "topic": topic, "seq": seq, "epoch": EPOCH, "resumed": False}


# ---- Raw deflate ------------------------------------------------------------------------

def deflate(data: bytes, window_bits: int = 15) -> bytes:
    """One message's payload as permessage-deflate sends it: raw deflate, the sync-flush tail cut."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, -window_bits)
    out = compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH)
    assert out.endswith(TAIL), out[-8:]
    return out[:-len(TAIL)]


def inflate(payload: bytes, window_bits: int = 15) -> bytes:
    """Inverse of `deflate`; raises zlib.error on data a `window_bits` inflater cannot take."""
    inflater = zlib.decompressobj(-window_bits)
    out = inflater.decompress(payload + TAIL)
    assert not inflater.unused_data, inflater.unused_data[:50]
    return out


def window_bits(extension: str | None) -> int:
    match = re.search(r"server_max_window_bits=(\d+)", extension or "")
    return int(match.group(1)) if match else 15


@dataclass
class WireMessage:
    """One server data message as it came: its frames, and its payload inflated if RSV1 was set."""
    frames: list[Frame]
    compressed: bool
    wire: bytes
    text: bytes

    def json(self):
        return json.loads(self.text.decode("utf-8"))


class DeflateSocket(RawWebSocket):
    """A raw WebSocket that offers `offer` (None: no extension header) and sees every bit."""

    def __init__(self, port: int, offer: str | None = OFFER, expect: str | None = AGREED):
        super().__init__(port)
        try:
            resp = self.handshake(extra=[(EXTENSIONS, offer)] if offer is not None else [])
            assert resp.status == 101, (resp.status, resp.headers, resp.body)
            self.extension = resp.header(EXTENSIONS)
            assert self.extension == expect, (offer, self.extension)
        except BaseException:
            self.sock.close()
            raise
        self.window_bits = window_bits(self.extension)

    def read_wire(self, timeout: float = FRAME_TIMEOUT) -> WireMessage:
        """The next data message, inflated if compressed; pings are answered, a close frame fails."""
        deadline = time.monotonic() + timeout
        frames: list[Frame] = []
        while True:
            frame = self.read_frame(max(0.0, deadline - time.monotonic()))
            if frame.opcode == OP_PING:
                self.send_frame(OP_PONG, frame.payload)
                continue
            assert frame.opcode != OP_CLOSE, f"closed: {frame.close_code()} {frame.payload[2:]!r}"
            if not frames:
                assert frame.opcode == OP_TEXT, frame
                assert frame.rsv in (0, RSV1), frame
                assert self.extension is not None or frame.rsv == 0, "RSV1 on a connection that agreed no extension"
            else:
                assert (frame.opcode, frame.rsv) == (OP_CONT, 0), frame
            frames.append(frame)
            if frame.fin:
                break
        compressed = frames[0].rsv == RSV1
        wire = b"".join(f.payload for f in frames)
        text = inflate(wire, self.window_bits) if compressed else wire
        return WireMessage(frames, compressed, wire, text)

    def recv(self, timeout: float = FRAME_TIMEOUT) -> dict:
        return self.read_wire(timeout).json()

    def send_deflated(self, message, rsv: int = RSV1) -> None:
        data = message if isinstance(message, bytes) else json.dumps(message).encode()
        self.send_frame(OP_TEXT, deflate(data), rsv=rsv)

    def subscribe_topic(self, topic: str) -> None:
        self.send_json({"type": "subscribe", "topic": topic})
        reply = self.read_wire()
        assert reply.json() == subscribed(topic), reply


def assert_message(frame: dict, topic: str, seq: int, data) -> None:
    assert set(frame) == {"type", "topic", "seq", "publishedAt", "data"}, frame
    assert (frame["type"], frame["topic"], frame["seq"], frame["data"]) == ("message", topic, seq, data), frame
    assert_recent_micros(frame["publishedAt"])


def deflate_client(port: int, **factory):
    """The websockets client with compression on; `factory` tunes its permessage-deflate offer."""
    return connect(port, compression=None, extensions=[ClientPerMessageDeflateFactory(**factory)])
