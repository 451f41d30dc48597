"""permessage-deflate (RFC 7692, docs/PROTOCOL.md "Compression"): what the handshake agrees,
compressed broadcasts that decode to the plain JSON, the size threshold, one compressed frame for
every subscriber, compressed snapshots, compressed client messages and their limits, and the
/metrics counters.

The `websockets` client (which offers permessage-deflate by default) shows that a real client
gets along with the gateway; `DeflateSocket`, a raw socket, shows the RSV1 bits and the bytes on
the wire, and sends the frames no library would.
"""

from __future__ import annotations

import json
import random
import re
import time
import zlib
from dataclasses import dataclass

import pytest
from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory

from conftest import store_snapshot
from test_metrics import scrape, value
from test_ws_protocol import expect_first_close
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
    apply_changes,
    assert_recent_micros,
    close_payload,
    commit,
    connect,
    new_store,
    publish,
    recv_json,
    recv_text,
    send_json,
    subscribe,
    unique,
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


# ---- Negotiation ------------------------------------------------------------------------

OFFERS = {
    "bare": ("permessage-deflate", AGREED),
    "client-bits": (OFFER, AGREED),
    "client-bits-10": ("permessage-deflate; client_max_window_bits=10", AGREED),
    "server-bits-10": ("permessage-deflate; server_max_window_bits=10", AGREED + "; server_max_window_bits=10"),
    "both-bits": ("permessage-deflate; server_max_window_bits=12; client_max_window_bits=9",
                  AGREED + "; server_max_window_bits=12"),
    "quoted-bits": ('permessage-deflate; server_max_window_bits="11"', AGREED + "; server_max_window_bits=11"),
    "no-takeover-asked": ("permessage-deflate; server_no_context_takeover; client_no_context_takeover", AGREED),
    "8-declined-then-next": ("permessage-deflate; server_max_window_bits=8, permessage-deflate; client_max_window_bits",
                             AGREED),
    "after-another-extension": ("x-webkit-deflate-frame, permessage-deflate", AGREED),
    "declined-8-bits": ("permessage-deflate; server_max_window_bits=8", None),
    "declined-16-bits": ("permessage-deflate; server_max_window_bits=16", None),
    "declined-leading-zero": ("permessage-deflate; server_max_window_bits=010", None),
    "declined-unknown-param": ("permessage-deflate; dictionary=1", None),
    "declined-repeated-param": ("permessage-deflate; client_max_window_bits; client_max_window_bits", None),
    "other-extension-only": ("x-webkit-deflate-frame", None),
    "no-offer": (None, None),
}


@pytest.mark.parametrize("offer, answer", list(OFFERS.values()), ids=list(OFFERS))
def test_handshake_answers_each_offer_and_frames_follow_it(server, offer, answer):
    topic = unique("nego")
    with DeflateSocket(server.port, offer, expect=answer) as ws:
        ws.subscribe_topic(topic)
        seq = publish(server.port, topic, BIG)
        message = ws.read_wire()
        # A big message is compressed exactly when the extension was agreed, in the agreed window.
        assert message.compressed == (answer is not None), (offer, message.frames[0])
        assert_message(message.json(), topic, seq, BIG)


def test_websockets_client_negotiates_and_decodes(server):
    topic = unique("lib")
    with connect(server.port, compression="deflate") as ws:
        assert ws.request.headers[EXTENSIONS] == OFFER
        assert ws.response.headers[EXTENSIONS] == AGREED
        [extension] = ws.protocol.extensions
        assert (extension.remote_no_context_takeover, extension.local_no_context_takeover) == (True, True)
        assert subscribe(ws, topic=topic) == subscribed(topic)
        seq = publish(server.port, topic, BIG)
        assert_message(recv_json(ws), topic, seq, BIG)


@pytest.mark.parametrize("factory, answer", [
    ({"client_max_window_bits": 10}, AGREED),
    ({"server_max_window_bits": 10}, AGREED + "; server_max_window_bits=10"),
    ({"server_max_window_bits": 9, "client_max_window_bits": 12}, AGREED + "; server_max_window_bits=9"),
], ids=["client-10", "server-10", "server-9-client-12"])
def test_websockets_client_with_window_bits(server, factory, answer):
    topic = unique("bits")
    with deflate_client(server.port, **factory) as ws:
        assert ws.response.headers[EXTENSIONS] == answer
        [extension] = ws.protocol.extensions
        assert extension.remote_max_window_bits == factory.get("server_max_window_bits", 15)
        assert subscribe(ws, topic=topic) == subscribed(topic)
        data = {"block": WINDOW_BLOCK * 2}
        seq = publish(server.port, topic, data)
        # websockets inflates with the window it asked for: a longer back-reference would fail it.
        assert_message(recv_json(ws), topic, seq, data)


def test_server_max_window_bits_15_is_echoed(server):
    # RFC 7692 section 7.1.2.1: an accepted server_max_window_bits is answered, 15 included;
    # websockets refuses a handshake that leaves it out.
    echoed = AGREED + "; server_max_window_bits=15"
    with deflate_client(server.port, server_max_window_bits=15) as ws:
        assert ws.response.headers[EXTENSIONS] == echoed
    with DeflateSocket(server.port, "permessage-deflate; server_max_window_bits=15", expect=echoed):
        pass


def test_client_offering_nothing_gets_no_extension(server):
    with connect(server.port) as ws:  # compression=None: no offer
        assert EXTENSIONS not in ws.request.headers
        assert EXTENSIONS not in ws.response.headers
        assert ws.protocol.extensions == []


def test_no_compression_server_declines_every_offer(start_server):
    plain = start_server("--no-compression")
    topic = unique("off")
    with connect(plain.port, compression="deflate") as ws, DeflateSocket(plain.port, expect=None) as raw:
        assert ws.request.headers[EXTENSIONS] == OFFER
        assert EXTENSIONS not in ws.response.headers and ws.protocol.extensions == []
        assert subscribe(ws, topic=topic) == subscribed(topic)
        raw.subscribe_topic(topic)
        seq = publish(plain.port, topic, BIG)
        message = raw.read_wire()
        assert not message.compressed
        assert message.text.decode() == recv_text(ws)
        assert_message(message.json(), topic, seq, BIG)


# ---- Server frames ----------------------------------------------------------------------

def test_compressed_and_plain_subscribers_get_the_same_json(server):
    port, topic = server.port, unique("same")
    with connect(port, compression="deflate") as zipped, connect(port) as plain, DeflateSocket(port) as raw:
        assert zipped.protocol.extensions and not plain.protocol.extensions
        assert subscribe(zipped, topic=topic) == subscribe(plain, topic=topic) == subscribed(topic)
        raw.subscribe_topic(topic)

        seq = publish(port, topic, BIG)
        text = recv_text(plain)
        assert len(text) > MIN_BYTES
        assert json.loads(recv_text(zipped)) == json.loads(text)
        assert_message(json.loads(text), topic, seq, BIG)
        wire = raw.read_wire()
        assert wire.compressed, wire.frames[0]
        assert len(wire.wire) < len(wire.text)
        assert wire.text == text.encode(), "the compressed frame inflates to the plain frame's JSON"

        small = {"n": 1, "word": "tiny"}
        seq = publish(port, topic, small)
        text = recv_text(plain)
        assert len(text.encode()) < MIN_BYTES
        assert recv_text(zipped) == text
        wire = raw.read_wire()
        assert not wire.compressed, "a frame under --compression-min-bytes goes plain, RSV1 clear"
        assert wire.wire == text.encode()
        assert_message(wire.json(), topic, seq, small)


# Sizes of a message frame's JSON and whether each is compressed, by --compression-min-bytes.
THRESHOLDS = {
    None: [(MIN_BYTES - 1, False), (MIN_BYTES, True)],
    1000: [(MIN_BYTES + 100, False), (999, False), (1000, True)],  # over the default, still plain
    1: [(200, True)],                                              # under the default, compressed
}


@pytest.mark.parametrize("threshold", list(THRESHOLDS), ids=["default-256", "1000", "1"])
def test_compression_min_bytes_is_the_threshold(start_server, threshold):
    """A frame whose JSON is `--compression-min-bytes` long or longer is compressed; a shorter one is not."""
    server = start_server(*(["--compression-min-bytes", str(threshold)] if threshold else []))
    topic = unique("edge")
    with DeflateSocket(server.port) as ws:
        ws.subscribe_topic(topic)
        # Every frame of this topic has the same JSON around `data` (one-digit seq, 16-digit
        # publishedAt): measure it once, then pad `data` to exact sizes.
        publish(server.port, topic, "")
        overhead = len(ws.read_wire().text)
        for size, compressed in THRESHOLDS[threshold]:
            assert size > overhead + 50, (size, overhead)
            data = "a" * (size - overhead)
            seq = publish(server.port, topic, data)
            message = ws.read_wire()
            assert len(message.text) == size, (len(message.text), size)
            assert message.compressed == compressed, (size, threshold, message.frames[0])
            assert_message(message.json(), topic, seq, data)


def test_every_deflate_subscriber_gets_byte_identical_frames(server):
    """No context takeover: a broadcast's frame does not depend on what the connection got before."""
    port, topic, other = server.port, unique("shared"), unique("other")
    with DeflateSocket(port) as first, DeflateSocket(port) as second:
        first.subscribe_topic(topic)
        second.subscribe_topic(topic)
        first.subscribe_topic(other)
        # Only the first subscriber gets this one: a compressor kept per connection would now differ.
        primer = {"primer": BIG["rows"][:20]}
        publish(port, other, primer)
        assert first.read_wire().compressed
        for n in range(3):
            data = {**BIG, "n": n}
            seq = publish(port, topic, data)
            a, b = first.read_wire(), second.read_wire()
            assert a.compressed and b.compressed
            assert a.frames == b.frames, "the two subscribers got different bytes for one broadcast"
            assert_message(a.json(), topic, seq, data)


@pytest.mark.parametrize("bits", [9, 10, 14])
def test_server_max_window_bits_limits_the_compressor_window(server, bits):
    port, topic = server.port, unique("window")
    offer = f"permessage-deflate; server_max_window_bits={bits}; client_max_window_bits"
    with DeflateSocket(port, offer, expect=f"{AGREED}; server_max_window_bits={bits}") as small, \
            DeflateSocket(port) as full:
        small.subscribe_topic(topic)
        full.subscribe_topic(topic)
        data = {"block": WINDOW_BLOCK * 2}
        seq = publish(port, topic, data)
        narrow, wide = small.read_wire(), full.read_wire()  # read_wire inflates with each one's window
        assert narrow.compressed and wide.compressed
        assert narrow.text == wide.text
        assert_message(narrow.json(), topic, seq, data)
        # The data does tell the windows apart: the 15-bit frame reaches further back.
        assert len(wide.wire) < len(narrow.wire)
        with pytest.raises(zlib.error):
            inflate(wide.wire, bits)


def test_store_snapshot_and_changes_arrive_compressed(server):
    port = server.port
    models = {f"m-{n}": {"color": f"#{n * 4099 % 0xFFFFFF:06x}", "label": f"Model {n}", "size": n} for n in range(50)}
    store = new_store(port, models)
    with DeflateSocket(port) as raw, connect(port) as plain:
        expected = {"type": "snapshot", "reset": False, **store_snapshot(port, store)}
        raw.send_json({"type": "subscribe", "store": store})
        snapshot = raw.read_wire()
        assert snapshot.compressed, snapshot.frames[0]
        assert snapshot.json() == expected
        assert len(snapshot.wire) * 2 < len(snapshot.text)
        send_json(plain, {"type": "subscribe", "store": store})
        assert recv_text(plain).encode() == snapshot.text

        version = commit(port, store, [{"op": "put", "model": f"m-{n}", "value": {"color": "#000000", "n": n}}
                                       for n in range(0, 50, 5)])
        changes = raw.read_wire()
        assert changes.compressed, changes.frames[0]
        frame = changes.json()
        assert (frame["type"], frame["version"]) == ("changes", version), frame
        state = snapshot.json()["models"]
        apply_changes(state, frame["changes"])
        assert state == store_snapshot(port, store)["models"]
        assert recv_text(plain).encode() == changes.text


# ---- Client messages --------------------------------------------------------------------

def test_compressed_publish_and_subscribe_from_websockets_are_accepted(server):
    """websockets compresses every message it sends once permessage-deflate is agreed."""
    port, topic, own = server.port, unique("up"), unique("own")
    data = {**BIG, "blob": "x" * 20_000}
    with connect(port) as reader, connect(port, compression="deflate") as writer:
        assert writer.protocol.extensions
        assert subscribe(reader, topic=topic) == subscribed(topic)
        assert subscribe(writer, topic=own) == subscribed(own)
        send_json(writer, {"type": "publish", "topic": topic, "data": data, "ref": "big"})
        assert recv_json(writer) == {"type": "published", "topic": topic, "seq": 1, "ref": "big"}
        assert_message(recv_json(reader), topic, 1, data)


def test_raw_deflated_messages_are_accepted_whole_and_fragmented(server):
    port, topic, own = server.port, unique("rawup"), unique("own")
    data = {"blob": "y" * 5000}
    with DeflateSocket(port) as ws, connect(port) as reader:
        assert subscribe(reader, topic=topic) == subscribed(topic)
        ws.send_deflated({"type": "subscribe", "topic": own})
        assert ws.recv() == subscribed(own)
        # One deflated message in three frames: RSV1 on the first only.
        payload = deflate(json.dumps({"type": "publish", "topic": topic, "data": data, "ref": "r1"}).encode())
        third = len(payload) // 3
        ws.send_frame(OP_TEXT, payload[:third], fin=False, rsv=RSV1)
        ws.send_frame(OP_CONT, payload[third:2 * third], fin=False)
        ws.send_frame(OP_CONT, payload[2 * third:])
        assert ws.recv() == {"type": "published", "topic": topic, "seq": 1, "ref": "r1"}
        assert_message(recv_json(reader), topic, 1, data)
        # Compressed and plain messages mix on one connection.
        ws.send_json({"type": "publish", "topic": topic, "data": 2, "ref": "r2"})
        assert ws.recv() == {"type": "published", "topic": topic, "seq": 2, "ref": "r2"}
        ws.send_deflated({"type": "publish", "topic": topic, "data": 3, "ref": "r3"})
        assert ws.recv() == {"type": "published", "topic": topic, "seq": 3, "ref": "r3"}
        assert [recv_json(reader)["data"] for _ in range(2)] == [2, 3]


@pytest.fixture(scope="module")
def small_server(module_servers):
    return module_servers("--max-message-bytes", str(SMALL_LIMIT))


def publish_of_size(topic: str, size: int) -> bytes:
    head, tail = f'{{"type":"publish","topic":"{topic}","ref":"edge","data":"'.encode(), b'"}'
    return head + b"a" * (size - len(head) - len(tail)) + tail


def test_inflated_message_at_the_limit_is_accepted(small_server):
    topic = unique("limit")
    message = publish_of_size(topic, SMALL_LIMIT)
    assert len(message) == SMALL_LIMIT
    with DeflateSocket(small_server.port) as ws:
        ws.send_deflated(message)
        assert ws.recv() == {"type": "published", "topic": topic, "seq": 1, "ref": "edge"}


@pytest.mark.parametrize("message", [
    publish_of_size("over", SMALL_LIMIT + 1),
    b"\x00" * (1 << 20),
], ids=["one-byte-over", "1-MiB-of-zeros"])
def test_message_inflating_past_the_limit_closes_1009(small_server, message):
    assert len(deflate(message)) < 2048, "the compressed frame itself is far under the limit"
    with DeflateSocket(small_server.port) as ws:
        ws.send_deflated(message)
        expect_first_close(ws, 1009, "message too big")


def dictionary_deflate() -> bytes:
    compressor = zlib.compressobj(6, zlib.DEFLATED, -15, zdict=b'{"type":"subscribe","topic":"dictionary"}')
    out = compressor.compress(b'{"type":"subscribe","topic":"dictionary"}') + compressor.flush(zlib.Z_SYNC_FLUSH)
    return out[:-len(TAIL)]


DICTIONARY_DEFLATE = dictionary_deflate()


@pytest.mark.parametrize("payload", [
    b"\xff" * 16,                                         # block type 3 is reserved
    b"\x00\x05\x00\x00\x00hello",                         # stored block whose length check fails
    DICTIONARY_DEFLATE,                                   # refers back into a dictionary it never sent
], ids=["reserved-block-type", "bad-stored-length", "preset-dictionary"])
def test_invalid_deflate_data_closes_1007(server, payload):
    with DeflateSocket(server.port) as ws:
        ws.send_frame(OP_TEXT, payload, rsv=RSV1)
        expect_first_close(ws, 1007, "invalid UTF-8")


def test_deflated_invalid_utf8_closes_1007(server):
    with DeflateSocket(server.port) as ws:
        ws.send_frame(OP_TEXT, deflate(b'{"type":"caf\xc3\xc3"}'), rsv=RSV1)
        expect_first_close(ws, 1007, "invalid UTF-8")


RSV1_MISPLACED = {
    "continuation-of-compressed": lambda: [
        (OP_TEXT, deflate(b'{"type":"subscribe","topic":"t"}')[:4], False, RSV1),
        (OP_CONT, deflate(b'{"type":"subscribe","topic":"t"}')[4:], True, RSV1)],
    "continuation-of-plain": lambda: [
        (OP_TEXT, b'{"type":"subscribe",', False, 0),
        (OP_CONT, b'"topic":"t"}', True, RSV1)],
    "ping": lambda: [(OP_PING, b"hi", True, RSV1)],
    "pong": lambda: [(OP_PONG, b"hi", True, RSV1)],
    "close": lambda: [(OP_CLOSE, close_payload(1000), True, RSV1)],
}


@pytest.mark.parametrize("frames", list(RSV1_MISPLACED.values()), ids=list(RSV1_MISPLACED))
def test_rsv1_off_the_first_data_frame_closes_1002(server, frames):
    with DeflateSocket(server.port) as ws:
        for opcode, payload, fin, rsv in frames():
            ws.send_frame(opcode, payload, fin=fin, rsv=rsv)
        expect_first_close(ws, 1002, "protocol error")


@pytest.mark.parametrize("setup", ["no-offer", "declined-offer", "no-compression-server"])
def test_rsv1_without_agreed_compression_closes_1002(server, start_server, setup):
    offer = {"no-offer": None, "declined-offer": "permessage-deflate; server_max_window_bits=8",
             "no-compression-server": OFFER}[setup]
    port = start_server("--no-compression").port if setup == "no-compression-server" else server.port
    with DeflateSocket(port, offer, expect=None) as ws:
        ws.send_frame(OP_TEXT, deflate(b'{"type":"subscribe","topic":"t"}'), rsv=RSV1)
        expect_first_close(ws, 1002, "protocol error")


# ---- Metrics ----------------------------------------------------------------------------

NEGOTIATED = "receptionist_compression_negotiated_total"
COMPRESSED_OUT = "receptionist_compressed_messages_out_total"


def counts(port: int) -> tuple[float, float]:
    samples = scrape(port)
    return value(samples, NEGOTIATED), value(samples, COMPRESSED_OUT, transport="websocket")


def test_metrics_count_negotiated_connections_and_compressed_messages(start_server):
    server = start_server()
    port, topic = server.port, unique("metrics")
    negotiated, compressed = counts(port)
    with connect(port, compression="deflate") as a, deflate_client(port, server_max_window_bits=10) as b, \
            DeflateSocket(port) as c, connect(port) as plain, \
            DeflateSocket(port, "permessage-deflate; server_max_window_bits=8", expect=None) as declined:
        assert counts(port) == (negotiated + 3, compressed), "three connections agreed on compression"
        for ws in (a, b, plain):
            assert subscribe(ws, topic=topic) == subscribed(topic)
        for raw in (c, declined):
            raw.subscribe_topic(topic)
        assert counts(port) == (negotiated + 3, compressed), "short replies go plain"

        seq = publish(port, topic, BIG)
        for ws in (a, b, plain):
            assert_message(recv_json(ws), topic, seq, BIG)
        assert c.read_wire().compressed
        assert not declined.read_wire().compressed
        assert counts(port) == (negotiated + 3, compressed + 3), "one compressed message per agreeing subscriber"

        seq = publish(port, topic, {"short": True})
        for ws in (a, b, plain):
            assert_message(recv_json(ws), topic, seq, {"short": True})
        assert not c.read_wire().compressed and not declined.read_wire().compressed
        assert counts(port) == (negotiated + 3, compressed + 3), "a short message is not counted"
