"""Where a request head and body begin and end, and what the gateway does with one it cannot frame:
`--head-timeout` runs from the start of each head (blank lines before a request line included), an
HTTP/1.0 message with Transfer-Encoding and a chunked body with a malformed line are refused `400`
and the connection closed, `Connection: close` ends an HTTP/1.0 keep-alive connection, a HEAD
refused while its head is read gets no body, the authority of a target in absolute form is checked
as Host is, and a method the gateway does not know is `400` (RFC 9110 and 9112)."""

from __future__ import annotations

import time

import pytest

from conftest import (
    HOST,
    RawConnection,
    api,
    assert_allow,
    assert_json_error,
    assert_standard_headers,
    http_request,
)
from wsclient import unique

HEAD_TIMEOUT = 1.0            # seconds; --head-timeout of the `limits_server`
MAX_HEAD = 512                # bytes; --max-head-bytes of the `limits_server`
SWEEP_SLACK = 3.0             # seconds past a timeout by which its 408 must have come


@pytest.fixture(scope="module")
def limits_server(module_servers):
    """A server with a short head timeout and a small head limit (and a long idle timeout)."""
    return module_servers("--head-timeout", str(HEAD_TIMEOUT), "--max-head-bytes", str(MAX_HEAD),
                          "--idle-timeout", "30")


def publish_request(topic: str, body: bytes = b'{"n":1}') -> bytes:
    return http_request("POST", f"/api/topics/{topic}/messages", {"Content-Type": "application/json"}, body)


def assert_nothing_published(port: int, topic: str) -> None:
    """The topic's log is empty: unknown (404), or known with no message kept."""
    resp = api(port, "GET", f"/api/topics/{topic}/messages?after=0")
    if resp.status == 404:
        assert_json_error(resp, 404, "not_found")
        return
    assert resp.status == 200 and resp.json()["messages"] == [], \
        f"messages were published to {topic!r}: {resp.status} {resp.body[:300]!r}"


def assert_refused_and_closed(conn: RawConnection, status: int, code: str) -> None:
    """The next response is the JSON error `status` with `Connection: close`, and nothing follows
    it before the end of the stream."""
    resp = conn.read_response()
    assert_json_error(resp, status, code)
    assert resp.connection() == "close", resp.headers
    conn.expect_closed()


# ---- --head-timeout counts from the start of each head -----------------------

def test_pipelined_heads_each_sent_in_time_are_all_served_past_the_head_timeout(start_server):
    """With `--head-timeout 2`, a client writes every 0.8 s the end of one GET's head and the start
    of the next: each head is sent within 0.8 s of its first byte, five of them over 4 s. Every
    one is answered 200. Before, the head timer started with the first head and was never reset,
    because no read ended on a head boundary: the third request was answered 408 and the
    connection closed 2 s after the first byte."""
    head_timeout, pace, heads, split = 2.0, 0.8, 5, 10
    server = start_server("--head-timeout", str(head_timeout), "--idle-timeout", "30")
    request = http_request("GET", "/healthz")
    writes = [request[:split]] + [request[split:] + request[:split]] * (heads - 1) + [request[split:]]
    with RawConnection(server.port) as conn:
        started = time.monotonic()
        for index, data in enumerate(writes):
            # Paces the writes; an answer arriving meanwhile (the 408) ends the wait at once.
            while (wait := started + index * pace - time.monotonic()) > 0:
                if conn.readable(wait):
                    resp = conn.read_response()
                    raise AssertionError(
                        f"answered {resp.status} {resp.body!r} while head {index} of {heads} was being "
                        f"sent, {time.monotonic() - started:.1f}s after the first head began "
                        f"(each head is sent within {pace}s of its first byte; --head-timeout {head_timeout:g})")
            conn.send(data)
            if index == 0:
                continue
            resp = conn.read_response()
            assert resp.status == 200 and resp.json() == {"status": "ok"}, (
                f"head {index} of {heads} answered {resp.status} {resp.body!r} "
                f"{time.monotonic() - started:.1f}s after the first head began")
            assert resp.connection() == "keep-alive", resp.headers
        assert time.monotonic() - started >= heads * pace * 0.99
        assert not conn.readable(0), f"unexpected bytes after the last answer: {conn.buffer!r}"


def test_blank_lines_before_a_request_line_count_against_the_head_timeout(limits_server):
    """A client sends only CRLF, one every 0.4 s (RFC 9112, section 2.2 lets a server ignore blank
    lines before a request line; they are part of the head being read). With `--head-timeout 1` it
    is answered 408 and the connection closed about a second after the first. Before, the blank
    lines neither started the head timer nor let the idle timer run: the connection was held,
    unanswered, for as long as the client kept trickling."""
    pace, bound = 0.4, 4.0
    with RawConnection(limits_server.port) as conn:
        started = time.monotonic()
        sent = 0
        while True:
            elapsed = time.monotonic() - started
            assert elapsed < bound, (
                f"no answer to {sent} blank lines sent every {pace}s over {elapsed:.1f}s "
                f"(--head-timeout {HEAD_TIMEOUT:g}, --idle-timeout 30)")
            try:
                conn.send(b"\r\n")
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += 1
            if conn.readable(pace):  # paces the trickle; returns at once when the answer comes
                break
        cut_after = time.monotonic() - started
        assert_refused_and_closed(conn, 408, "request_timeout")
    assert HEAD_TIMEOUT * 0.9 <= cut_after <= HEAD_TIMEOUT + SWEEP_SLACK, cut_after


# ---- Transfer-Encoding in HTTP/1.0 -------------------------------------------

def test_an_http10_request_with_transfer_encoding_is_refused_and_the_connection_closed(server):
    """An HTTP/1.0 publish with `Connection: keep-alive` and `Transfer-Encoding: chunked`, and a
    second publish pipelined after it: RFC 9112, section 6.1 says the framing of an HTTP/1.0
    message with Transfer-Encoding is faulty. The client gets 400 and the end of the stream;
    nothing is published. Before, the body was read as chunked, published (201, keep-alive), and
    the pipelined publish was read and published too: a request smuggled past a front proxy that
    frames HTTP/1.0 by its Content-Length."""
    topic = unique("http10-te")
    first = (f"POST /api/topics/{topic}/messages HTTP/1.0\r\nConnection: keep-alive\r\n"
             "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n").encode()
    with RawConnection(server.port) as conn:
        conn.send(first + publish_request(topic, b'"smuggled"'))
        assert_refused_and_closed(conn, 400, "bad_request")
    assert_nothing_published(server.port, topic)


# ---- Strict chunked framing ---------------------------------------------------

@pytest.mark.parametrize("body", [
    b"2\rX{}\r\n0\r\n\r\n",
    b"2;a\rX{}\r\n0\r\n\r\n",
    b"2\r\n{}\r\n0\rX\r\n",
    b"2\r\n{}\r\n0\r\n\rX",
    b"2 \r\n{}\r\n0\r\n\r\n",
    b"2;\x01\r\n{}\r\n0\r\n\r\n",
], ids=["size-line-CR-X", "ext-line-CR-X", "last-chunk-CR-X", "final-line-CR-X",
        "space-after-size", "control-byte-in-ext"])
def test_a_malformed_chunk_line_is_refused_and_nothing_after_it_is_served(server, body):
    """A chunked publish whose body has a malformed line (a CR followed by a byte other than LF, a
    space after the size with no extension, a control byte in an extension), and a publish
    pipelined after it: the client gets 400 and the end of the stream, and neither is published.
    Before, the byte after the CR was taken for its LF and the others let through: the publish
    was answered 201 and the pipelined one 201, on a connection kept open."""
    topic = unique("chunk-line")
    head = http_request("POST", f"/api/topics/{topic}/messages",
                        {"Content-Type": "application/json", "Transfer-Encoding": "chunked"})
    with RawConnection(server.port) as conn:
        conn.send(head + body + publish_request(topic))
        assert_refused_and_closed(conn, 400, "bad_request")
    assert_nothing_published(server.port, topic)


@pytest.mark.parametrize("body", [
    b"2;name=value\r\n{}\r\n0\r\n\r\n",
    b"2\r\n{}\r\n0\r\nX-Checksum: abc\r\n\r\n",
], ids=["extension", "trailer"])
def test_a_valid_chunked_body_with_an_extension_or_trailer_is_published(server, body):
    """Control: a chunk extension with a value, or a trailer field, is valid framing (RFC 9112,
    sections 7.1.1 and 7.1.2): the publish is answered 201 and the connection serves the next
    request."""
    topic = unique("chunk-ok")
    head = http_request("POST", f"/api/topics/{topic}/messages",
                        {"Content-Type": "application/json", "Transfer-Encoding": "chunked"})
    with RawConnection(server.port) as conn:
        conn.send(head + body)
        resp = conn.read_response()
        assert resp.status == 201, (resp.status, resp.body)
        assert resp.json() == {"topic": topic, "seq": 1}
        assert resp.connection() == "keep-alive", resp.headers
        conn.send(http_request("GET", "/healthz"))
        assert conn.read_response().json() == {"status": "ok"}


# ---- Connection: close in HTTP/1.0 --------------------------------------------

@pytest.mark.parametrize("fields", [
    b"Connection: keep-alive\r\nConnection: close\r\n",
    b"Connection: keep-alive, close\r\n",
], ids=["two-lines", "one-line"])
def test_an_http10_request_asking_to_close_closes_despite_keep_alive(server, fields):
    """An HTTP/1.0 GET with both `keep-alive` and `close` connection options, and a second GET
    pipelined after it: the client gets one 200 with `Connection: close` and then the end of the
    stream (RFC 9112, section 9.6: a recipient of `close` must close after the response). Before,
    `keep-alive` won: the answer said `Connection: keep-alive` and the second GET was answered."""
    with RawConnection(server.port) as conn:
        conn.send(b"GET /healthz HTTP/1.0\r\n" + fields + b"\r\nGET /healthz HTTP/1.0\r\n\r\n")
        resp = conn.read_response()
        assert resp.status == 200 and resp.json() == {"status": "ok"}, (resp.status, resp.body)
        assert_standard_headers(resp)
        assert resp.connection() == "close", f"answered with Connection: {resp.connection()}"
        conn.expect_closed()


# ---- A HEAD refused while its head is read -------------------------------------

@pytest.mark.parametrize("status, code, request_bytes", [
    (431, "header_too_large",
     b"HEAD /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * (MAX_HEAD + 100) + b"\r\n\r\n"),
    (400, "bad_request", b"HEAD /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Name: y\r\n\r\n"),
    (408, "request_timeout", b"HEAD /healthz HTTP/1.1\r\nHo"),
], ids=["431-head-too-large", "400-bad-header-name", "408-head-timeout"])
def test_a_head_request_refused_while_its_head_is_read_gets_no_body(limits_server, status, code, request_bytes):
    """A HEAD refused before its head is complete (over `--max-head-bytes`, a space in a header
    name, or the rest of the head never sent within `--head-timeout`): the client gets the status
    and headers, then the end of the stream with no body (RFC 9110, section 9.3.2). Before, the
    error's JSON body followed the head, to be read by the client as the start of the next
    response."""
    with RawConnection(limits_server.port) as conn:
        conn.send(request_bytes)
        resp = conn.read_response("HEAD", timeout=HEAD_TIMEOUT + SWEEP_SLACK)
        assert resp.status == status, (resp.status, resp.headers)
        assert_standard_headers(resp)
        assert resp.media_type() == "application/json", resp.headers
        assert int(resp.header("Content-Length")) > 0, resp.headers
        assert resp.connection() == "close", resp.headers
        conn.expect_closed()


# ---- Authority of a target in absolute form ------------------------------------

@pytest.mark.parametrize("target", [
    "http:///healthz",
    "http://[::1/healthz",
    "http://x:99999/healthz",
    "http://a@b/healthz",
], ids=["empty-host", "unclosed-ipv6", "port-out-of-range", "userinfo"])
def test_a_target_in_absolute_form_with_a_bad_authority_is_refused(server, target):
    """A GET whose target is in absolute form with an authority that `Host` would be refused for
    (no host, an unterminated IPv6 literal, a port over 65535, userinfo), and a valid Host: the
    client gets 400 and the end of the stream (RFC 9112, section 3.2.2: the target's authority
    takes the place of Host; RFC 9110, sections 4.2.1 and 4.2.4). Before, the authority was dropped
    unchecked and the path served: 200."""
    with RawConnection(server.port) as conn:
        conn.send(f"GET {target} HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
        assert_refused_and_closed(conn, 400, "bad_request")


def test_a_target_in_absolute_form_with_a_valid_authority_is_served(server):
    """Control: a valid authority in the target is served as its path, whatever Host says."""
    with RawConnection(server.port) as conn:
        conn.send(f"GET http://{HOST}:{server.port}/healthz HTTP/1.1\r\nHost: other.example\r\n\r\n".encode())
        resp = conn.read_response()
        assert resp.status == 200 and resp.json() == {"status": "ok"}, (resp.status, resp.body)
        assert resp.connection() == "keep-alive", resp.headers


# ---- Methods the gateway does not know ------------------------------------------

@pytest.mark.parametrize("method", ["QUERY", "BREW", "FOO"])
def test_an_unknown_method_is_400_and_the_connection_closed(server, method):
    """A request with a method the gateway does not know at all: `400 bad_request` and the end of
    the stream, as `docs/openapi.yaml` says (the parser refuses it at its first byte no known
    method has, before the line is whole, so it cannot be told from a malformed line; a 501 would
    read as the gateway's own failure). The document had promised a 405 with `Allow`."""
    with RawConnection(server.port) as conn:
        conn.send(http_request(method, "/healthz"))
        assert_refused_and_closed(conn, 400, "bad_request")


def test_a_known_method_not_allowed_on_the_path_is_still_405(server):
    """Control: PROPFIND is a method the gateway knows; on /healthz it is 405 with `Allow`."""
    with RawConnection(server.port) as conn:
        conn.send(http_request("PROPFIND", "/healthz"))
        assert_allow(conn.read_response(), "PROPFIND", {"GET", "HEAD"})
