"""Malformed input, against the real binary: thousands of malformed requests and WebSocket frames
each get their error or close code, while valid clients are served meanwhile."""

from __future__ import annotations

import json
import random
import struct
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import RawConnection, assert_json_error, http_request, wait_for
from test_faults import assert_no_error_lines, assert_served
from wsclient import (
    EPOCH,
    OP_BINARY,
    OP_CLOSE,
    OP_CONT,
    OP_PING,
    OP_PONG,
    OP_TEXT,
    RawWebSocket,
    close_payload,
    connect,
    encode_frame,
    publish,
    recv_json,
    subscribe,
    unique,
)


# ---- Malformed input ---------------------------------------------------

MAX_HEAD = 2048
MAX_BODY = 4096
MAX_MESSAGE = 4096
HTTP_CASES = 1500
WS_CASES = 1500
FUZZ_THREADS = 8
NON_TOKEN = b'()<>@,;\\"/[]?={} \x01\x7f\x80\xff'
BAD_CLOSE_CODES = [0, 1, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535]

BAD_REQUEST = (400, "bad_request")
NOT_IMPLEMENTED = (501, "not_implemented")


def http_case(rng: random.Random) -> tuple[str, bytes, tuple[int, str]]:
    """One malformed request and the error it must get: (kind, bytes, (status, code))."""
    path = rng.choice(["/healthz", "/", "/api/stores", "/api/topics/t/messages"])
    host = b"Host: 127.0.0.1\r\n"
    junk = bytes(rng.choice(NON_TOKEN) for _ in range(rng.randint(1, 3)))
    kind = rng.choice([
        "request-line", "method", "target", "version", "header-name", "folding", "header-value",
        "cl-and-te", "two-cl", "bad-cl", "te-unknown", "te-twice", "oversized", "chunk-size",
        "chunk-end", "body-too-large", "traversal", "unknown-method"])
    body_head = lambda headers: (f"POST {path} HTTP/1.1\r\n".encode() + host + headers + b"\r\n")
    if kind == "request-line":
        line = rng.choice([b"GET  %s HTTP/1.1", b"GET %s HTTP/1.1 extra", b"GET %s", b"GET%s HTTP/1.1",
                           b"{" + bytes(rng.randrange(33, 127) for _ in range(20)) + b"%s"])
        return kind, line.replace(b"%s", path.encode()) + b"\r\n" + host + b"\r\n", BAD_REQUEST
    if kind == "method":
        method = b"GE" + junk + b"T"
        return kind, method + f" {path} HTTP/1.1\r\n".encode() + host + b"\r\n", BAD_REQUEST
    if kind == "target":
        bad = bytes([rng.choice([0, 1, 9, 0x7F, 0x80, 0xFF])])
        return kind, f"GET {path}".encode() + bad + b"x HTTP/1.1\r\n" + host + b"\r\n", BAD_REQUEST
    if kind == "version":
        version = rng.choice([b"HTTQ/1.1", b"http/1.1", b"HTTP/1", b"HTTP/11", b"HTTP/1.1.1", b"HTTP/x.1"])
        return kind, f"GET {path} ".encode() + version + b"\r\n" + host + b"\r\n", BAD_REQUEST
    if kind == "header-name":
        name = rng.choice([b"X-Bad", b"Host", b"Content-Type"])
        cut = rng.randint(0, len(name))
        name = name[:cut] + junk + name[cut:]
        line = rng.choice([name + b": v", b"NoColonHere", b": empty-name"])
        return kind, f"GET {path} HTTP/1.1\r\n".encode() + host + line + b"\r\n\r\n", BAD_REQUEST
    if kind == "folding":
        return kind, f"GET {path} HTTP/1.1\r\n".encode() + host + b"X-A: a\r\n" + \
            rng.choice([b" ", b"\t"]) + b"folded\r\n\r\n", BAD_REQUEST
    if kind == "header-value":
        bad = bytes([rng.choice([0, 1, 8, 0x0B, 0x1F, 0x7F])])
        return kind, f"GET {path} HTTP/1.1\r\n".encode() + host + b"X-A: a" + bad + b"b\r\n\r\n", BAD_REQUEST
    if kind == "cl-and-te":
        pair = [b"Content-Length: 5\r\n", rng.choice([b"Transfer-Encoding: chunked\r\n", b"transfer-encoding: CHUNKED\r\n"])]
        rng.shuffle(pair)
        return kind, body_head(b"".join(pair)) + b"5\r\nhello\r\n0\r\n\r\n", BAD_REQUEST
    if kind == "two-cl":
        first = rng.randint(0, 50)
        second = first + rng.randint(1, 50)
        return kind, body_head(b"Content-Length: %d\r\nContent-Length: %d\r\n" % (first, second)) + b"x" * second, BAD_REQUEST
    if kind == "bad-cl":
        value = rng.choice([b"+5", b"-1", b"5, 5", b"0x5", b"5 5", b"five", b"99999999999999999999999"])
        return kind, body_head(b"Content-Length: " + value + b"\r\n") + b"hello", BAD_REQUEST
    if kind == "te-unknown":
        coding = rng.choice([b"gzip", b"xchunked", b"chunked, gzip", b"gzip, chunked", b"compress"])
        return kind, body_head(b"Transfer-Encoding: " + coding + b"\r\n") + b"0\r\n\r\n", NOT_IMPLEMENTED
    if kind == "te-twice":
        return kind, body_head(b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n") + b"0\r\n\r\n", BAD_REQUEST
    if kind == "oversized":
        size = rng.randint(MAX_HEAD + 1, 4 * MAX_HEAD)
        shape = rng.choice(["one-header", "many-headers", "target"])
        if shape == "one-header":
            head = f"GET {path} HTTP/1.1\r\n".encode() + host + b"X-Pad: " + b"p" * size + b"\r\n\r\n"
        elif shape == "many-headers":
            head = f"GET {path} HTTP/1.1\r\n".encode() + host + b"".join(
                b"X-Pad-%d: %s\r\n" % (i, b"p" * 60) for i in range(size // 70 + 1)) + b"\r\n"
        else:
            head = b"GET /" + b"t" * size + b" HTTP/1.1\r\n" + host + b"\r\n"
        return kind, head, (431, "header_too_large")
    if kind == "chunk-size":
        size = rng.choice([b"zz", b"-1", b"0x5", b"g", b";ext", b"fffffffffffffffffffff"])
        # A size past --max-body-bytes is refused as it is read, before it could overflow: 413.
        expected = (413, "payload_too_large") if size.startswith(b"fff") else BAD_REQUEST
        return kind, body_head(b"Transfer-Encoding: chunked\r\n") + size + b"\r\nhello\r\n0\r\n\r\n", expected
    if kind == "chunk-end":
        return kind, body_head(b"Transfer-Encoding: chunked\r\n") + b"5\r\nhello" + \
            rng.choice([b"XX", b"\n\n", b"!!"]) + b"0\r\n\r\n", BAD_REQUEST
    if kind == "body-too-large":
        size = rng.randint(MAX_BODY + 1, 3 * MAX_BODY)
        if rng.random() < 0.5:
            return kind, body_head(b"Content-Length: %d\r\n" % size) + b"b" * size, (413, "payload_too_large")
        return kind, body_head(b"Transfer-Encoding: chunked\r\n") + b"%x\r\n" % size + b"b" * size + b"\r\n0\r\n\r\n", \
            (413, "payload_too_large")
    if kind == "traversal":
        bad = rng.choice(["/a/../b", "/%2e%2e/etc/passwd", "/a%00b", "/a%2fb", "/..", "/x/%2E%2E/y"])
        return kind, http_request("GET", bad), BAD_REQUEST
    method = "".join(rng.choice("BCDFHJKLMNQRSVWXYZ") for _ in range(rng.randint(3, 8)))
    return "unknown-method", http_request(method, path), BAD_REQUEST


def run_http_case(port: int, kind: str, data: bytes, expected: tuple[int, str]) -> str | None:
    """Send one malformed request; returns what went wrong, or None."""
    try:
        with RawConnection(port) as conn:
            conn.send(data)
            resp = conn.read_response()
            assert_json_error(resp, *expected)
            assert resp.connection() == "close", resp.headers
            conn.expect_closed()
    except (AssertionError, OSError) as error:
        return f"{kind}: {data[:80]!r}: {error}"
    return None


def fragments(rng: random.Random, payload: bytes) -> list[bytes]:
    """Splits a payload into one to four fragments at random places."""
    cuts = sorted(rng.sample(range(1, len(payload)), min(len(payload) - 1, rng.randint(0, 3)))) if len(payload) > 1 else []
    edges = [0, *cuts, len(payload)]
    return [payload[a:b] for a, b in zip(edges, edges[1:])]


def message_frames(rng: random.Random, opcode: int, payload: bytes) -> bytes:
    parts = fragments(rng, payload)
    return b"".join(encode_frame(opcode if i == 0 else OP_CONT, part, fin=i == len(parts) - 1)
                    for i, part in enumerate(parts))


def ws_case(rng: random.Random) -> tuple[str, bytes, object]:
    """One bad frame sequence and its answer: a close code (int) or an error message code (str)."""
    text = json.dumps({"type": "subscribe", "topic": "fuzz"}).encode()
    kind = rng.choice(["unmasked", "reserved-bits", "opcode", "fragmented-control", "long-control",
                       "continuation-first", "data-inside-fragmented", "utf8", "utf8-close-reason",
                       "oversized", "oversized-declared", "close-code", "close-one-byte", "garbage-json"])
    if kind == "unmasked":
        return kind, encode_frame(rng.choice([OP_TEXT, OP_PING, OP_CLOSE]), text[:rng.randint(0, len(text))], mask=False), 1002
    if kind == "reserved-bits":
        return kind, encode_frame(rng.choice([OP_TEXT, OP_PING]), text, rsv=rng.randint(1, 7)), 1002
    if kind == "opcode":
        return kind, encode_frame(rng.choice([3, 4, 5, 6, 7, 0xB, 0xC, 0xD, 0xE, 0xF]), text), 1002
    if kind == "fragmented-control":
        opcode = rng.choice([OP_PING, OP_PONG, OP_CLOSE])
        return kind, encode_frame(opcode, b"ab", fin=False) + encode_frame(OP_CONT, b"cd"), 1002
    if kind == "long-control":
        return kind, encode_frame(rng.choice([OP_PING, OP_PONG]), b"x" * rng.randint(126, 1000)), 1002
    if kind == "continuation-first":
        return kind, encode_frame(OP_CONT, text, fin=rng.random() < 0.5), 1002
    if kind == "data-inside-fragmented":
        return kind, encode_frame(OP_TEXT, text[:5], fin=False) + encode_frame(rng.choice([OP_TEXT, OP_BINARY]), text), 1002
    if kind == "utf8":
        bad = rng.choice([b"\xff", b"\xfe", b"\xc0\xaf", b"\xe0\x80\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
                          b"\xc3", b"\x80", b"\xf8\x88\x80\x80\x80"])
        payload = b'{"type":"' + bytes(rng.randrange(0x20, 0x7F) for _ in range(rng.randint(0, 30))).replace(b'"', b"_") + bad
        return kind, message_frames(rng, OP_TEXT, payload), 1007
    if kind == "utf8-close-reason":
        return kind, encode_frame(OP_CLOSE, close_payload(1000, b"bye " + rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80"]))), 1007
    if kind == "oversized":
        payload = b'"' + b"o" * rng.randint(MAX_MESSAGE - 1, 3 * MAX_MESSAGE) + b'"'
        return kind, message_frames(rng, rng.choice([OP_TEXT, OP_BINARY]), payload), 1009
    if kind == "oversized-declared":
        # Only the head of a frame declaring more than the limit: refused before any payload.
        size = rng.choice([MAX_MESSAGE + 1, 1 << 20, 1 << 40])
        head = bytes([0x80 | OP_TEXT]) + (bytes([0x80 | 126]) + struct.pack(">H", size) if size < 65536
                                          else bytes([0x80 | 127]) + struct.pack(">Q", size))
        return kind, head + b"\x00\x00\x00\x00", 1009
    if kind == "close-code":
        return kind, encode_frame(OP_CLOSE, close_payload(rng.choice(BAD_CLOSE_CODES))), 1002
    if kind == "close-one-byte":
        return kind, encode_frame(OP_CLOSE, bytes([rng.randrange(256)])), 1002
    message, code = rng.choice([
        (b"{", "bad_message"), (b"nul", "bad_message"), (b"[1,2]", "bad_message"), (b"42", "bad_message"),
        (b'"subscribe"', "bad_message"), (b"{}", "bad_message"), (b'{"type":7}', "bad_message"),
        (b'{"type":"subscribe"}', "bad_message"),
        (b'{"type":"subscribe","store":"a","topic":"b"}', "bad_message"),
        (b'{"type":"subscribe","topic":"t","since":-1}', "bad_message"),
        (b'{"type":"subscribe","topic":"t","since":"x"}', "bad_message"),
        (b'{"type":"publish","topic":"t"}', "bad_message"),
        (b'{"type":"shout","topic":"t"}', "unknown_type"),
        (b'{"type":"subscribe","topic":"no spaces"}', "invalid_topic"),
        (b'{"type":"subscribe","store":"no-such-store-anywhere"}', "no_such_store"),
        (b'{"type":"unsubscribe","topic":"never"}', "not_subscribed"),
    ])
    junk = bytes(rng.randrange(0x20, 0x7F) for _ in range(rng.randint(0, 20)))
    if message == b"{":
        message += junk
    return kind, message_frames(rng, OP_TEXT, message), code


def run_ws_case(port: int, kind: str, data: bytes, expected) -> str | None:
    """Send one bad frame sequence on a fresh WebSocket; returns what went wrong, or None."""
    try:
        with RawWebSocket(port).open() as ws:
            ws.send(data)
            if isinstance(expected, str):
                # The protocol error is answered and the connection keeps serving.
                frame = ws.recv_json()
                assert (frame["type"], frame.get("code")) == ("error", expected), frame
                topic = unique("after")
                ws.send_json({"type": "subscribe", "topic": topic})
                assert ws.recv_json() == {"type": "subscribed", "topic": topic, "seq": 0, "epoch": EPOCH, "resumed": False}
                ws.send_frame(OP_CLOSE, close_payload(1000))
                frame = ws.read_frame()
                assert frame.opcode == OP_CLOSE and frame.close_code() == 1000, frame
                ws.expect_eof()
                return None
            frame = ws.read_frame()
            assert frame.opcode == OP_CLOSE, frame
            assert frame.close_code() == expected, (frame.close_code(), frame.payload[2:])
            try:
                ws.send_frame(OP_CLOSE, close_payload(expected))
            except OSError:
                pass  # the server may already have closed the socket after a protocol error
            ws.expect_eof()
    except (AssertionError, OSError) as error:
        return f"{kind}: {data[:60]!r}: {error}"
    return None


class BackgroundSubscriber:
    """A valid subscriber and a publisher, both busy for as long as the fuzzing lasts."""

    def __init__(self, port: int):
        self.port = port
        self.topic = unique("steady")
        self.ws = connect(port)
        assert subscribe(self.ws, topic=self.topic)["type"] == "subscribed"
        self.published: list[int] = []
        self.publish_errors: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._publish, daemon=True)
        self.thread.start()

    def _publish(self) -> None:
        while not self.stop.wait(0.01):
            try:
                self.published.append(publish(self.port, self.topic, {"n": len(self.published)}))
            except (AssertionError, OSError) as error:
                self.publish_errors.append(str(error))

    def finish(self) -> None:
        """Stops publishing and checks every message arrived, in order, exactly once."""
        wait_for(lambda: len(self.published) >= 20 or self.publish_errors, 10, "the publisher stalled")
        self.stop.set()
        self.thread.join(10)
        assert not self.publish_errors, self.publish_errors[:5]
        assert self.published == list(range(1, len(self.published) + 1)), self.published[:20]
        for index, seq in enumerate(self.published):
            frame = recv_json(self.ws)
            assert (frame["type"], frame["seq"], frame["data"]) == ("message", seq, {"n": index}), frame
        with pytest.raises(TimeoutError):
            self.ws.recv(timeout=0.2)
        self.ws.close()


@pytest.fixture(scope="module")
def fuzz_server(module_servers):
    return module_servers("--max-head-bytes", str(MAX_HEAD), "--max-body-bytes", str(MAX_BODY),
                          "--max-message-bytes", str(MAX_MESSAGE))


def run_cases(port: int, cases, runner) -> list[str]:
    with ThreadPoolExecutor(FUZZ_THREADS) as pool:
        results = pool.map(lambda case: runner(port, *case), cases)
        return [problem for problem in results if problem]


def check_malformed(server, cases, kinds: int, runner) -> None:
    """Runs every generated case while a valid subscriber listens, then checks nothing else broke."""
    assert len({kind for kind, _, _ in cases}) == kinds, "the generator should cover every kind"
    background = BackgroundSubscriber(server.port)
    problems = run_cases(server.port, cases, runner)
    background.finish()
    assert not problems, f"{len(problems)} of {len(cases)} cases failed:\n" + "\n".join(problems[:15])
    assert_served(server.port)
    assert_no_error_lines(server)


@pytest.mark.timeout(120)
def test_malformed_requests_each_get_their_error_while_valid_clients_are_served(fuzz_server):
    rng = random.Random(20_240_601)
    check_malformed(fuzz_server, [http_case(rng) for _ in range(HTTP_CASES)], 18, run_http_case)


@pytest.mark.timeout(120)
def test_malformed_frames_each_get_their_close_code_while_valid_clients_are_served(fuzz_server):
    rng = random.Random(20_240_602)
    check_malformed(fuzz_server, [ws_case(rng) for _ in range(WS_CASES)], 14, run_ws_case)
