#!/usr/bin/env python3
"""Writes the seed corpora under Fuzz/Corpus/<target>/, one small file per seed.

The HTTP and WebSocket targets read two control bytes before the stream: how to split it
(low two bits: byte at a time, fixed pieces, random pieces, two halves; the rest a parameter)
and which limits to use (see the targets). The ClientMessage target reads the text as is.
Run it again after changing a seed; the files are committed.
"""
import os
import shutil
import struct
import zlib

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "Corpus")

BYTEWISE, PAIRS, RANDOM, HALVES = 0x00, 0x05, 0x1A, 0x83
# HTTP limits byte: low two bits pick the head limit (48, 256, 1024, 16384 bytes), the next two
# the body limit (0, 7, 256, 1 MiB).
HTTP_DEFAULT, HTTP_TIGHT = 0x0F, 0x05
# WebSocket config byte: bit 0 is the role (0 server, 1 client), bits 1-3 the message limit
# (0, 1, 125, 126, 1000, 4096, 65535, 65536 bytes), bit 4 permessage-deflate.
WS_SERVER, WS_CLIENT, WS_SERVER_SMALL = 0x0E, 0x0F, 0x04


def write(target, name, data):
    folder = os.path.join(ROOT, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def http_seeds():
    crlf = b"\r\n"
    requests = {
        "get": b"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
        "get-query": b"GET /healthz?verbose=1&x=%20 HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\n",
        "get-http10": b"GET /index.html HTTP/1.0\r\n\r\n",
        "get-keepalive10": b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        "head": b"HEAD /index.html HTTP/1.1\r\nHost: a\r\nIf-None-Match: \"abc\"\r\n\r\n",
        "post-body": b"POST /api/stores HTTP/1.1\r\nHost: a\r\nContent-Length: 16\r\n"
        b"Content-Type: application/json\r\n\r\n{\"name\":\"shape\"}",
        "put-model": b"PUT /api/stores/s/models/a HTTP/1.1\r\nHost: a\r\nContent-Length: 17\r\n\r\n{\"color\":\"#f00\"}",
        "patch": b"PATCH /api/jobs/job-1 HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n{\"rate\":10}",
        "delete": b"DELETE /api/jobs/job-2 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        "options": b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
        "chunked": b"POST /api/topics/news/messages HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer: t\r\n\r\n",
        "chunked-upper": b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\nA\r\n0123456789\r\n0\r\n\r\n",
        "pipelined": b"GET /a HTTP/1.1\r\nHost: a\r\n\r\nGET /b HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nxy"
                     b"GET /c HTTP/1.1\r\nHost: a\r\n\r\n",
        "upgrade": b"GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
        b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        b"Sec-WebSocket-Protocol: receptionist.v1\r\n\r\n\x81\x85\x37\xfa\x21\x3d\x7f\x9f\x4d\x51\x58",
        "sse": b"GET /api/stores/tiles/events HTTP/1.1\r\nHost: a\r\nAccept: text/event-stream\r\nLast-Event-ID: 1200\r\n\r\n",
        "bare-lf": b"GET / HTTP/1.1\nHost: a\n\n",
        "leading-crlf": b"\r\n\r\nGET / HTTP/1.1\r\n\r\n",
        # Malformed: each must be refused the same way however it is split.
        "bad-double-space": b"GET  / HTTP/1.1\r\n\r\n",
        "bad-version": b"GET / HTTP/2.0\r\n\r\n",
        "bad-protocol": b"GET / HTPT/1.1\r\n\r\n",
        "bad-method": b"BREW /pot HTTP/1.1\r\n\r\n",
        "bad-header-space": b"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n",
        "bad-no-colon": b"GET / HTTP/1.1\r\nNoColon\r\n\r\n",
        "bad-folding": b"GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n",
        "bad-control": b"GET / HTTP/1.1\r\nA: \x01\r\n\r\n",
        "bad-cr": b"GET / HTTP/1.1\rA: b\r\n\r\n",
        "smuggle-cl-te": b"POST / HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "smuggle-two-cl": b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
        "smuggle-cl-spaces": b"POST / HTTP/1.1\r\nContent-Length: 1 2\r\n\r\nab",
        "bad-te-gzip": b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
        "bad-te-twice": b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n",
        "bad-chunk-size": b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "bad-found-g1": b"G1\x00\x00\x00\x00\x00\x00\x00\x1d: a\r\n\r\n",
        "found-trailers": b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nContent-Length: 4\r\nX: y\r\n\r\n",
        "bad-found-version": b"POST / HTTP/q.1\rd\r\n\r\nzz\r\n",
        # RFC 9112 3.2: 400 for an HTTP/1.1 request without Host, with two, or with an invalid one
        # (an empty host, a port past 65535).
        "host-missing": b"GET / HTTP/1.1\r\n\r\n",
        "host-twice": b"GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n",
        "host-invalid": b"GET / HTTP/1.1\r\nHost: a b:8x\r\n\r\n",
        "host-ipv6-port": b"GET / HTTP/1.1\r\nHost: [2001:db8::1]:8080\r\n\r\n",
        "host-empty": b"GET / HTTP/1.1\r\nHost:\r\n\r\n",
        "host-port-range": b"GET / HTTP/1.1\r\nHost: a:65536\r\n\r\n",
        # RFC 9112 3.2.2: a target in absolute form is read as its path; RFC 9110 10.1.1: a body
        # that waits for 100 Continue.
        "absolute-form": b"GET http://a:8080/api/topics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n",
        "expect-continue": b"POST /api/topics/t/messages HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n"
                           b"Content-Length: 7\r\n\r\n{\"n\":1}",
        # RFC 9112 7.1: chunk lines read strictly (http-parser as packaged takes any byte after a
        # CR as its LF); 6.1: Transfer-Encoding in HTTP/1.0 is faulty; 9.6: close anywhere closes;
        # 3.2.2: an absolute target's authority is a Host; 2.2: empty lines before a request.
        "chunk-size-cr": b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2\rX{}\r\n0\r\n\r\n",
        "chunk-last-cr": b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\rX\r\n",
        "chunk-end-cr": b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\rXGET / HTTP/1.1\r\n\r\n",
        "chunk-size-space": b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2 \r\n{}\r\n0\r\n\r\n",
        "chunk-ext-control": b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2;\x01\r\n{}\r\n0\r\n\r\n",
        "chunk-ext-trailer": b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2;n=v\r\n{}\r\n0\r\nX: y\r\n\r\n"
                             b"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
        "te-http10": b"POST / HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
        "close-http10": b"GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\nGET / HTTP/1.0\r\n\r\n",
        "absolute-empty-host": b"GET http:///healthz HTTP/1.1\r\nHost: a\r\n\r\n",
        "method-unknown": b"QUERY / HTTP/1.1\r\nHost: a\r\n\r\n",
        "blank-lines": b"\r\n\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
    }
    splits = [BYTEWISE, PAIRS, RANDOM, HALVES]
    for index, (name, stream) in enumerate(requests.items()):
        write("FuzzHTTPRequest", name, bytes([splits[index % 4], HTTP_DEFAULT]) + stream)
    # The limits themselves: a head over 48 bytes, a body over 7.
    write("FuzzHTTPRequest", "limit-head", bytes([RANDOM, HTTP_TIGHT & ~3]) + requests["upgrade"])
    write("FuzzHTTPRequest", "limit-body", bytes([HALVES, HTTP_TIGHT]) + requests["post-body"])
    write("FuzzHTTPRequest", "limit-body-chunked", bytes([BYTEWISE, HTTP_TIGHT]) + requests["chunked"])


def frame(opcode, payload, fin=True, mask=0x37FA213D, rsv=0, length_form=None):
    out = bytes([(0x80 if fin else 0) | (rsv << 4) | opcode])
    bit = 0x80 if mask is not None else 0
    n = len(payload)
    form = length_form or ("short" if n <= 125 else "16" if n <= 0xFFFF else "64")
    if form == "short":
        out += bytes([bit | n])
    elif form == "16":
        out += bytes([bit | 126]) + struct.pack(">H", n)
    else:
        out += bytes([bit | 127]) + struct.pack(">Q", n)
    if mask is None:
        return out + payload
    key = struct.pack(">I", mask)
    return out + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def close(code, reason=b"", mask=0x37FA213D):
    return frame(0x8, struct.pack(">H", code) + reason, mask=mask)


def ws_seeds():
    TEXT, BINARY, CONT, CLOSE, PING, PONG = 0x1, 0x2, 0x0, 0x8, 0x9, 0xA
    streams = {
        "text-hello": frame(TEXT, b"Hello"),
        "text-subscribe": frame(TEXT, b'{"type":"subscribe","store":"tiles"}'),
        "text-utf8": frame(TEXT, "κόσμε €𝄞".encode()),
        "binary": frame(BINARY, bytes(range(40))),
        "binary-16bit-length": frame(BINARY, bytes(200)),
        "binary-long-form": frame(BINARY, b"abc", length_form="64"),
        "empty-text": frame(TEXT, b""),
        "fragmented": frame(TEXT, b"Hel", fin=False) + frame(CONT, b"lo, ", fin=False) + frame(CONT, b"world"),
        "fragmented-ping-between": frame(TEXT, b"ab", fin=False) + frame(PING, b"p") + frame(CONT, b"cd"),
        "fragmented-utf8-split": frame(TEXT, "€".encode()[:2], fin=False) + frame(CONT, "€".encode()[2:]),
        "ping": frame(PING, b"Hello"),
        "ping-125": frame(PING, bytes(125)),
        "pong": frame(PONG, b""),
        "close-empty": frame(CLOSE, b""),
        "close-1000": close(1000),
        "close-1001-reason": close(1001, b"going away"),
        "close-4000": close(4000, "ok ✓".encode()),
        "close-then-data": close(1000) + frame(TEXT, b"ignored"),
        "messages-then-close": frame(TEXT, b"a") + frame(BINARY, b"b") + frame(PING, b"") + close(1000, b"bye"),
        # Violations.
        "bad-unmasked": frame(TEXT, b"Hello", mask=None),
        "bad-rsv": frame(TEXT, b"x", rsv=4),
        "bad-opcode": frame(0x3, b"x"),
        "bad-fragmented-ping": frame(PING, b"x", fin=False),
        "bad-ping-126": frame(PING, bytes(126)),
        "bad-continuation-first": frame(CONT, b"x"),
        "bad-new-message-inside": frame(TEXT, b"a", fin=False) + frame(TEXT, b"b"),
        "bad-utf8": frame(TEXT, b"\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xed\xa0\x80"),
        "bad-utf8-truncated": frame(TEXT, "€".encode()[:2]),
        "bad-close-1-byte": frame(CLOSE, b"\x03"),
        "bad-close-1005": close(1005),
        "bad-close-999": close(999),
        "bad-close-reason-utf8": close(1000, b"\xff"),
        "bad-64bit-top-bit": bytes([0x82, 0xFF]) + b"\x80" + bytes(7) + bytes(4),
    }
    splits = [BYTEWISE, PAIRS, RANDOM, HALVES]
    for index, (name, stream) in enumerate(streams.items()):
        write("FuzzWebSocketFrame", name, bytes([splits[index % 4], WS_SERVER]) + stream)
    # Frames from a server (unmasked), decoded in the client role.
    write("FuzzWebSocketFrame", "client-text", bytes([RANDOM, WS_CLIENT]) + frame(TEXT, b"snapshot", mask=None))
    write("FuzzWebSocketFrame", "client-close", bytes([BYTEWISE, WS_CLIENT]) + close(1008, b"slow", mask=None))
    write("FuzzWebSocketFrame", "client-bad-masked", bytes([PAIRS, WS_CLIENT]) + frame(TEXT, b"x"))
    # The message limit (125 bytes here): at it, over it in one frame, over it across fragments.
    write("FuzzWebSocketFrame", "limit-at", bytes([HALVES, WS_SERVER_SMALL]) + frame(BINARY, bytes(125)))
    write("FuzzWebSocketFrame", "limit-over", bytes([RANDOM, WS_SERVER_SMALL]) + frame(BINARY, bytes(126)))
    write("FuzzWebSocketFrame", "limit-over-fragments",
          bytes([PAIRS, WS_SERVER_SMALL]) + frame(TEXT, bytes(100), fin=False) + frame(CONT, bytes(26)))
    # permessage-deflate on (bit 4 of the config byte): RSV1 messages are raw deflate without
    # the sync flush's tail, inflated within the limit.
    deflated = deflate(b'{"type":"subscribe","store":"tiles","paths":["color"],"maxRate":4}' * 4)
    compressed = {
        "deflate-text": frame(TEXT, deflated, rsv=4),
        "deflate-fragmented": frame(TEXT, deflated[:5], rsv=4, fin=False) + frame(PING, b"p") + frame(CONT, deflated[5:]),
        "deflate-then-plain": frame(TEXT, deflated, rsv=4) + frame(TEXT, b"plain"),
        "deflate-bomb": frame(BINARY, deflate(bytes(1_000_000)), rsv=4),
        "deflate-bad-data": frame(TEXT, b"\xff\xff\xff\xff", rsv=4),
        "deflate-bad-rsv1-continuation": frame(TEXT, deflated[:5], rsv=4, fin=False) + frame(CONT, deflated[5:], rsv=4),
        "deflate-bad-rsv1-ping": frame(PING, b"p", rsv=4),
    }
    for index, (name, stream) in enumerate(compressed.items()):
        write("FuzzWebSocketFrame", name, bytes([[BYTEWISE, PAIRS, RANDOM, HALVES][index % 4], WS_SERVER | 0x10]) + stream)


def deflate(data):
    """Raw deflate ended by a sync flush whose four-byte tail is left off, as RFC 7692 sends it."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
    out = compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH)
    assert out.endswith(b"\x00\x00\xff\xff")
    return out[:-4]


def client_message_seeds():
    messages = {
        "subscribe-store": b'{"type":"subscribe","store":"tiles"}',
        "subscribe-store-since": b'{"type":"subscribe","store":"tiles","since":1200}',
        "subscribe-topic-since": b'{"type":"subscribe","topic":"news","since":0}',
        "subscribe-since-null": b'{"type":"subscribe","topic":"news","since":null}',
        "subscribe-since-max": b'{"type":"subscribe","store":"s","since":9007199254740991}',
        "subscribe-since-exp": b'{"type":"subscribe","store":"s","since":1e3}',
        "unsubscribe-store": b'{"type":"unsubscribe","store":"tiles"}',
        "unsubscribe-topic": b'{ "topic" : "news" , "type" : "unsubscribe" }\n',
        "escaped-name": b'{"type":"subscribe","store":"t\\u00e9l\\u00E9 \\ud83d\\ude00\\n\\"x\\""}',
        "extra-members": b'{"type":"subscribe","store":"a","extra":[1,2.5,-3e-2,true,false,null,{"x":{}}]}',
        "ping": b'{"type":"ping"}',
        "ping-ref": b'{"type":"ping","ref":"p-3"}',
        "bad-ping-ref": b'{"type":"ping","ref":7}',
        "bad-not-json": b"subscribe tiles",
        "bad-array": b'[{"type":"subscribe","store":"tiles"}]',
        "bad-no-type": b'{"store":"tiles"}',
        "bad-type-number": b'{"type":1,"store":"tiles"}',
        "bad-unknown-type": b'{"type":"publish","topic":"news"}',
        "bad-both-targets": b'{"type":"subscribe","store":"a","topic":"b"}',
        "bad-no-target": b'{"type":"subscribe"}',
        "bad-store-number": b'{"type":"subscribe","store":7}',
        "bad-since-negative": b'{"type":"subscribe","store":"a","since":-1}',
        "bad-since-fraction": b'{"type":"subscribe","store":"a","since":1.5}',
        "bad-since-too-big": b'{"type":"subscribe","store":"a","since":9007199254740992}',
        "bad-since-string": b'{"type":"subscribe","store":"a","since":"5"}',
        "bad-trailing": b'{"type":"subscribe","store":"a"} x',
        "bad-trailing-comma": b'{"type":"subscribe","store":"a",}',
        "bad-unpaired-surrogate": b'{"type":"subscribe","store":"\\ud800"}',
        "bad-control-in-string": b'{"type":"subscribe","store":"a\x01"}',
        "bad-invalid-utf8": b'{"type":"subscribe","store":"\xc3\x28"}',
        "bad-leading-zero": b'{"type":"subscribe","store":"a","since":01}',
        "bad-huge-number": b'{"type":"subscribe","store":"a","since":1e400}',
        "bad-deep": b"[" * 300 + b"]" * 300,
        "deep-ok": b'{"a":' * 200 + b"1" + b"}" * 200,
        "bad-empty": b"",
    }
    for name, text in messages.items():
        write("FuzzClientMessage", name, text)


if __name__ == "__main__":
    for target in ("FuzzHTTPRequest", "FuzzWebSocketFrame", "FuzzClientMessage"):
        shutil.rmtree(os.path.join(ROOT, target), ignore_errors=True)
    http_seeds()
    ws_seeds()
    client_message_seeds()
