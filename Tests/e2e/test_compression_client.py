"""Compressed client messages (RFC 7692, docs/PROTOCOL.md "Compression"): messages the `websockets`
client compresses and raw deflated ones, whole and fragmented, are accepted; the message size
limit applies to the inflated message; invalid deflate data, deflated invalid UTF-8 and a
misplaced or unagreed RSV1 bit close the connection with their codes.

`DeflateSocket` (permessage_deflate.py), a raw socket, sends the frames no library would.
"""

from __future__ import annotations

import json
import zlib

import pytest

from permessage_deflate import (
    BIG,
    DeflateSocket,
    OFFER,
    RSV1,
    SMALL_LIMIT,
    TAIL,
    assert_message,
    deflate,
    subscribed,
)
from test_ws_protocol import expect_first_close
from wsclient import (
    OP_CLOSE,
    OP_CONT,
    OP_PING,
    OP_PONG,
    OP_TEXT,
    close_payload,
    connect,
    recv_json,
    send_json,
    subscribe,
    unique,
)


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
SUBSCRIBE = b'{"type":"subscribe","topic":"' + b"truncated-" * 20 + b'"}'
# A final block (BFINAL) and then bytes that are no deflate: they were dropped in silence.
FINAL_BLOCK = zlib.compressobj(6, zlib.DEFLATED, -15)
FINAL_THEN_GARBAGE = FINAL_BLOCK.compress(SUBSCRIBE) + FINAL_BLOCK.flush(zlib.Z_FINISH) + b"GARBAGE-NOT-DEFLATE"


@pytest.mark.parametrize("payload", [
    b"\xff" * 16,                                         # block type 3 is reserved
    b"\x00\x05\x00\x00\x00hello",                         # stored block whose length check fails
    DICTIONARY_DEFLATE,                                   # refers back into a dictionary it never sent
    # Cut inside a block: the appended tail was read as the block's data, and a message the
    # client never sent (its first half and a stray byte) reached the gateway's parser.
    deflate(SUBSCRIBE)[:len(deflate(SUBSCRIBE)) // 2],
    FINAL_THEN_GARBAGE,
], ids=["reserved-block-type", "bad-stored-length", "preset-dictionary", "cut-inside-a-block", "bytes-after-the-final-block"])
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
