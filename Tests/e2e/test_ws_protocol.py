"""WebSocket handshake and framing over a raw socket (RFC 6455, docs/PROTOCOL.md): subprotocol
negotiation, pings, protocol errors and their close codes, message limits, the echo endpoint,
keepalive, and drain."""

import signal
import time

import pytest
import websockets

from conftest import ConnectionClosed, assert_json_error
from wsclient import (
    EPOCH,
    OP_BINARY,
    OP_CLOSE,
    OP_CONT,
    OP_PING,
    OP_PONG,
    OP_TEXT,
    SUBPROTOCOL,
    RawWebSocket,
    accept_key,
    close_payload,
    connect,
    encode_frame,
    new_key,
    recv_json,
    subscribe,
    unique,
)

EXIT_TIMEOUT = 15.0          # the process exits after a drain
KEEPALIVE_WAIT = 10.0        # the keepalive test's whole observation
PING_INTERVAL, PING_TIMEOUT = 0.2, 0.3
KEEPALIVE_SLACK = 3.0        # a silent peer is closed within PING_TIMEOUT plus this after a ping
ECHO_MAX = 200_000           # --max-message-bytes of the echo server
SMALL_MAX = 1024             # --max-message-bytes of the limit tests
SUBSCRIBE = b'{"type":"subscribe","topic":"raw"}'


@pytest.fixture(scope="module")
def echo_server(module_servers):
    return module_servers("--enable-echo", "--max-message-bytes", str(ECHO_MAX))


@pytest.fixture(scope="module")
def small_server(module_servers):
    return module_servers("--enable-echo", "--max-message-bytes", str(SMALL_MAX))


def expect_first_close(ws: RawWebSocket, code: int, reason_prefix: str) -> None:
    """The very next frame closes with `code`, and the server then closes the TCP connection.

    The close is answered, as a client would (the server may already have closed the socket).
    """
    frame = ws.read_frame()
    assert frame.opcode == OP_CLOSE and frame.fin, frame
    assert frame.close_code() == code, (frame.close_code(), frame.payload[2:])
    assert frame.close_reason().startswith(reason_prefix), frame.close_reason()
    try:
        ws.send_frame(OP_CLOSE, close_payload(code))
    except OSError:
        pass
    ws.expect_eof()


def assert_round_trip(ws: RawWebSocket) -> None:
    """The connection still serves: a subscribe is answered."""
    topic = unique("alive")
    ws.send_json({"type": "subscribe", "topic": topic})
    assert ws.recv_json() == {"type": "subscribed", "topic": topic, "seq": 0, "epoch": EPOCH, "resumed": False}


# ---- Handshake ---------------------------------------------------------

def test_handshake_answers_101_with_accept_and_subprotocol(server):
    assert accept_key("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="  # RFC 6455 1.3
    key = new_key()
    with RawWebSocket(server.port) as ws:
        resp = ws.handshake(key=key)
        assert resp.status == 101, (resp.status, resp.body)
        assert (resp.header("Upgrade") or "").lower() == "websocket", resp.headers
        assert "upgrade" in [t.strip().lower() for t in (resp.header("Connection") or "").split(",")]
        assert resp.header("Sec-WebSocket-Accept") == accept_key(key)
        assert resp.header("Sec-WebSocket-Protocol") == SUBPROTOCOL
        assert_round_trip(ws)


def test_handshake_picks_receptionist_among_offered_subprotocols(server):
    with RawWebSocket(server.port) as ws:
        resp = ws.handshake(subprotocols=("chat", SUBPROTOCOL, "superchat"))
        assert resp.status == 101 and resp.header("Sec-WebSocket-Protocol") == SUBPROTOCOL, resp.headers
        assert_round_trip(ws)


def test_client_offering_no_subprotocol_is_served(server):
    with RawWebSocket(server.port) as ws:
        resp = ws.handshake(subprotocols=())
        assert resp.status == 101, (resp.status, resp.body)
        assert resp.header("Sec-WebSocket-Protocol") is None, resp.headers
        assert_round_trip(ws)
    with connect(server.port, subprotocols=()) as ws:
        assert ws.subprotocol is None
        topic = unique("lib")
        assert subscribe(ws, topic=topic)["type"] == "subscribed"


def test_client_offering_only_other_subprotocols_is_400(server):
    with RawWebSocket(server.port) as ws:
        assert_json_error(ws.handshake(subprotocols=("chat", "superchat")), 400, "bad_request")


def test_unsupported_version_is_426_naming_version_13(server):
    with RawWebSocket(server.port) as ws:
        resp = ws.handshake(version="12")
    assert resp.status == 426, (resp.status, resp.body)
    assert [v.strip() for v in resp.header("Sec-WebSocket-Version", "").split(",")] == ["13"], resp.headers
    assert resp.media_type() == "application/json" and set(resp.json()) == {"error", "detail"}, resp.body


def test_missing_key_is_400(server):
    with RawWebSocket(server.port) as ws:
        assert_json_error(ws.handshake(omit=("Sec-WebSocket-Key",)), 400, "bad_request")


# ---- Control frames ----------------------------------------------------

@pytest.mark.parametrize("payload", [b"", b"hello", bytes(range(125))], ids=["empty", "text", "125-bytes"])
def test_ping_is_answered_with_pong_of_the_same_payload(server, payload):
    with RawWebSocket(server.port).open() as ws:
        ws.send_frame(OP_PING, payload)
        frame = ws.read_frame()
        assert (frame.opcode, frame.fin, frame.rsv, frame.payload) == (OP_PONG, True, 0, payload)
        assert_round_trip(ws)



def test_an_application_ping_is_answered_with_a_pong_echoing_its_ref(server):
    """PROTOCOL.md: a browser cannot see WebSocket pings, so it sends {"type":"ping"} and reads
    {"type":"pong"} back, its ref echoed; a bad ref is a bad_message, and the connection goes on."""
    with connect(server.port) as ws:
        ws.send('{"type":"ping","ref":"p-3"}')
        assert recv_json(ws) == {"type": "pong", "ref": "p-3"}
        ws.send('{"type":"ping"}')
        assert recv_json(ws) == {"type": "pong"}
        ws.send('{"type":"ping","ref":7}')
        error = recv_json(ws)
        assert error["type"] == "error" and error["code"] == "bad_message", error
        ws.send('{"type":"ping","ref":"' + "r" * 64 + '"}')
        assert recv_json(ws) == {"type": "pong", "ref": "r" * 64}

CLIENT_CLOSES = {
    # PROTOCOL.md: the client closed with 1000 and the server echoed it. Without a code, RFC 6455
    # lets the echo be empty or 1000; an application code may be echoed as it came or as 1000.
    "1000": (close_payload(1000), {1000}),
    "1000-with-reason": (close_payload(1000, b"bye"), {1000}),
    "no-code": (b"", {None, 1000}),
    "4000": (close_payload(4000, b"app"), {4000, 1000}),
}


@pytest.mark.parametrize("payload, codes", list(CLIENT_CLOSES.values()), ids=list(CLIENT_CLOSES))
def test_client_close_is_echoed(server, payload, codes):
    with RawWebSocket(server.port).open() as ws:
        ws.send_frame(OP_CLOSE, payload)
        frame = ws.read_frame()
        assert frame.opcode == OP_CLOSE and frame.close_code() in codes, frame
        ws.expect_eof()


# ---- Protocol errors ---------------------------------------------------

PROTOCOL_ERRORS = {
    "unmasked": encode_frame(OP_TEXT, SUBSCRIBE, mask=False),
    "rsv1": encode_frame(OP_TEXT, SUBSCRIBE, rsv=4),
    "rsv2": encode_frame(OP_TEXT, SUBSCRIBE, rsv=2),
    "rsv3": encode_frame(OP_TEXT, SUBSCRIBE, rsv=1),
    "opcode-3": encode_frame(0x3, b"x"),
    "opcode-11": encode_frame(0xB, b"x"),
    "fragmented-ping": encode_frame(OP_PING, b"x", fin=False) + encode_frame(OP_CONT, b"y"),
    "ping-126-bytes": encode_frame(OP_PING, b"x" * 126),
    "continuation-first": encode_frame(OP_CONT, SUBSCRIBE),
    "text-inside-fragmented": encode_frame(OP_TEXT, SUBSCRIBE[:5], fin=False) + encode_frame(OP_TEXT, SUBSCRIBE),
    "close-one-byte": encode_frame(OP_CLOSE, b"\x03"),
    "close-1005": encode_frame(OP_CLOSE, close_payload(1005)),
    "close-1006": encode_frame(OP_CLOSE, close_payload(1006)),
    "close-1015": encode_frame(OP_CLOSE, close_payload(1015)),
    "close-999": encode_frame(OP_CLOSE, close_payload(999)),
    "close-5000": encode_frame(OP_CLOSE, close_payload(5000)),
    "close-126-bytes": encode_frame(OP_CLOSE, close_payload(1000, b"r" * 124)),
}


@pytest.mark.parametrize("data", list(PROTOCOL_ERRORS.values()), ids=list(PROTOCOL_ERRORS))
def test_protocol_error_is_closed_with_1002(server, data):
    with RawWebSocket(server.port).open() as ws:
        ws.send(data)
        expect_first_close(ws, 1002, "protocol error")


INVALID_UTF8 = {
    "bytes-ff-fe": [b"\xff\xfe"],
    "overlong": [b'{"type":"\xc0\xaf"}'],
    "surrogate": [b'"\xed\xa0\x80"'],
    "above-10ffff": [b'"\xf4\x90\x80\x80"'],
    "truncated": [b'"caf\xc3'],
    "across-fragments": [b'{"type":"caf', b'\xc3\xc3"}'],
}


@pytest.mark.parametrize("fragments", list(INVALID_UTF8.values()), ids=list(INVALID_UTF8))
def test_invalid_utf8_text_is_closed_with_1007(server, fragments):
    with RawWebSocket(server.port).open() as ws:
        for index, fragment in enumerate(fragments):
            ws.send_frame(OP_TEXT if index == 0 else OP_CONT, fragment, fin=index == len(fragments) - 1)
        expect_first_close(ws, 1007, "invalid UTF-8")


def test_invalid_utf8_close_reason_is_closed_with_1007(server):
    with RawWebSocket(server.port).open() as ws:
        ws.send_frame(OP_CLOSE, close_payload(1000, b"bad \xff"))
        expect_first_close(ws, 1007, "invalid UTF-8")


def test_utf8_split_across_fragments_is_reassembled(server):
    with RawWebSocket(server.port).open() as ws:
        text = '{"type":"subscribe","topic":"caf\u00e9"}'.encode()
        cut = text.index(b"\xc3") + 1  # inside the two bytes of the e-acute
        ws.send_frame(OP_TEXT, text[:cut], fin=False)
        ws.send_frame(OP_CONT, text[cut:])
        # Valid UTF-8, so it is read as a message: a topic name outside the pattern.
        frame = ws.recv_json()
        assert (frame["type"], frame["code"]) == ("error", "invalid_topic"), frame
        assert_round_trip(ws)


# ---- Message size ------------------------------------------------------

def padded_subscribe(size: int) -> bytes:
    head, tail = b'{"type":"subscribe",', b'"topic":"padded"}'
    return head + b" " * (size - len(head) - len(tail)) + tail


def test_message_at_the_limit_is_read(small_server):
    with RawWebSocket(small_server.port).open() as ws:
        ws.send_frame(OP_TEXT, padded_subscribe(SMALL_MAX))
        assert ws.recv_json()["type"] == "subscribed"


OVERSIZED = {
    "one-frame": ("/ws", [padded_subscribe(SMALL_MAX + 1)]),
    "fragments": ("/ws", [b"[" + b" " * 399, b" " * 400, b" " * 400 + b"]"]),
    "echo-binary": ("/ws/echo", [b"\x00" * (SMALL_MAX + 1)]),
}


@pytest.mark.parametrize("path, fragments", list(OVERSIZED.values()), ids=list(OVERSIZED))
def test_message_over_the_limit_is_closed_with_1009(small_server, path, fragments):
    opcode = OP_BINARY if path.endswith("echo") else OP_TEXT
    with RawWebSocket(small_server.port).open(path=path, subprotocols=() if opcode == OP_BINARY else (SUBPROTOCOL,)) as ws:
        for index, fragment in enumerate(fragments):
            ws.send_frame(opcode if index == 0 else OP_CONT, fragment, fin=index == len(fragments) - 1)
        expect_first_close(ws, 1009, "message too big")


# ---- Echo endpoint -----------------------------------------------------

@pytest.mark.parametrize("size", [0, 1, 125, 126, 65535, 65536, 70000])
@pytest.mark.parametrize("opcode", [OP_TEXT, OP_BINARY], ids=["text", "binary"])
def test_echo_returns_text_and_binary_messages(echo_server, opcode, size):
    payload = bytes(0x20 + i % 95 for i in range(size)) if opcode == OP_TEXT else bytes(i * 7 & 0xFF for i in range(size))
    with RawWebSocket(echo_server.port).open(path="/ws/echo", subprotocols=()) as ws:
        ws.send_frame(opcode, payload)
        assert ws.read_message() == (opcode, payload)
        ws.send_frame(opcode, payload[::-1])
        assert ws.read_message() == (opcode, payload[::-1])


@pytest.mark.parametrize("opcode", [OP_TEXT, OP_BINARY], ids=["text", "binary"])
def test_echo_reassembles_fragments_around_a_ping(echo_server, opcode):
    with RawWebSocket(echo_server.port).open(path="/ws/echo", subprotocols=()) as ws:
        ws.send_frame(opcode, b"Hel", fin=False)
        ws.send_frame(OP_PING, b"between")
        ws.send_frame(OP_CONT, b"lo, ", fin=False)
        ws.send_frame(OP_CONT, b"", fin=False)
        ws.send_frame(OP_CONT, b"world")
        pong = ws.read_frame()
        assert (pong.opcode, pong.payload) == (OP_PONG, b"between"), pong
        assert ws.read_message(answer_pings=False) == (opcode, b"Hello, world")


def test_echo_is_absent_without_the_flag(server):
    with RawWebSocket(server.port) as ws:
        assert_json_error(ws.handshake(path="/ws/echo", subprotocols=()), 404, "not_found")


def test_echo_with_the_websockets_client(echo_server):
    with connect(echo_server.port, path="/ws/echo", subprotocols=()) as ws:
        ws.send("caf\u00e9 \u2603")
        assert ws.recv(timeout=5) == "caf\u00e9 \u2603"
        ws.send(b"\x00\x01\xff")
        assert ws.recv(timeout=5) == b"\x00\x01\xff"


# ---- Keepalive and drain -----------------------------------------------

def test_keepalive_closes_a_silent_peer_and_keeps_an_answering_one(start_server):
    server = start_server("--ping-interval", str(PING_INTERVAL), "--ping-timeout", str(PING_TIMEOUT))
    with RawWebSocket(server.port).open() as silent, RawWebSocket(server.port).open() as answering:
        first_ping, closed_at, answered = None, None, 0
        deadline = time.monotonic() + KEEPALIVE_WAIT
        while closed_at is None or answered < 5:
            assert time.monotonic() < deadline, (
                f"after {KEEPALIVE_WAIT}s: silent peer closed={closed_at is not None}, pings answered={answered}")
            if closed_at is None and silent.readable(0.01):
                try:
                    frame = silent.read_frame()
                    if frame.opcode == OP_PING and first_ping is None:
                        first_ping = time.monotonic()
                except ConnectionClosed:
                    closed_at = time.monotonic()
            if answering.readable(0.01):
                frame = answering.read_frame()  # raises if the answering peer is closed
                assert frame.opcode == OP_PING, frame
                answering.send_frame(OP_PONG, frame.payload)
                answered += 1
        assert first_ping is not None, "the silent peer was closed without being pinged"
        assert closed_at - first_ping <= PING_TIMEOUT + KEEPALIVE_SLACK, closed_at - first_ping
        answering.send_frame(OP_PING, b"still there?")
        while (frame := answering.read_frame()).opcode == OP_PING:
            answering.send_frame(OP_PONG, frame.payload)
        assert (frame.opcode, frame.payload) == (OP_PONG, b"still there?"), frame
        assert_round_trip(answering)


def test_drain_closes_websockets_with_1001_and_exits_zero(start_server):
    server = start_server("--drain-timeout", "10")
    with connect(server.port) as ws, RawWebSocket(server.port).open() as raw:
        topic = unique("drain")
        assert subscribe(ws, topic=topic)["type"] == "subscribed"
        assert_round_trip(raw)
        server.send_signal(signal.SIGTERM)
        # The hint first: reconnect, to any node, after a short random delay.
        hint = recv_json(ws, timeout=EXIT_TIMEOUT)
        assert hint["type"] == "draining" and 0 <= hint["reconnectAfterMs"] <= 1000, hint
        with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
            recv_json(ws, timeout=EXIT_TIMEOUT)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001, closed.value
        deadline = time.monotonic() + EXIT_TIMEOUT
        while (frame := raw.read_frame(max(0.0, deadline - time.monotonic()))).opcode != OP_CLOSE:
            pass
        assert (frame.close_code(), frame.close_reason()) == (1001, "going away: draining"), frame
        raw.send_frame(OP_CLOSE, close_payload(1001))
        raw.expect_eof()
    assert server.wait_exit(EXIT_TIMEOUT) == 0


def test_the_echo_sends_plain_what_compression_would_not_shrink(echo_server):
    """Over permessage-deflate, the echo of 4,096 random bytes comes back as they went, RSV1
    clear, as every frame compression would not shrink does (`docs/PROTOCOL.md`); a message that
    does shrink comes back compressed. Before, the echo compressed whatever was long enough, and
    the random bytes came back 6 bytes longer."""
    import random
    import zlib
    from permessage_deflate import AGREED, EXTENSIONS, OFFER, RSV1, deflate
    ws = RawWebSocket(echo_server.port)
    try:
        resp = ws.handshake(path="/ws/echo", subprotocols=(), extra=[(EXTENSIONS, OFFER)])
        assert resp.status == 101 and resp.header(EXTENSIONS) == AGREED, (resp.status, resp.headers)
        noise = random.Random(4096).randbytes(4096)
        ws.send_frame(OP_BINARY, deflate(noise), rsv=RSV1)
        frame = ws.read_frame()
        assert (frame.opcode, frame.rsv, frame.payload) == (OP_BINARY, 0, noise), (frame.opcode, frame.rsv, len(frame.payload))
        text = b"repeat " * 600
        ws.send_frame(OP_TEXT, deflate(text), rsv=RSV1)
        frame = ws.read_frame()
        assert frame.opcode == OP_TEXT and frame.rsv == RSV1 and len(frame.payload) < len(text), (frame.rsv, len(frame.payload))
        inflater = zlib.decompressobj(-15)
        assert inflater.decompress(frame.payload + b"\x00\x00\xff\xff") == text
    finally:
        ws.sock.close()
