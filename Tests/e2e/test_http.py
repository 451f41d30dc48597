"""Routing, connection reuse, request framing, protocol errors and size limits."""

import http.client

import pytest

from conftest import (
    HOST,
    RawConnection,
    assert_json_error,
    assert_standard_headers,
    curl,
    http_client_request,
    http_request,
    read_http_client_response,
)


@pytest.fixture(scope="module")
def limited_server(module_servers):
    return module_servers("--max-head-bytes", "1024", "--max-body-bytes", "100")


def assert_health_body(resp, expected):
    assert resp.status == 200, resp.body
    assert resp.media_type() == "application/json", resp.header("Content-Type")
    assert resp.json() == expected
    assert int(resp.header("Content-Length")) == len(resp.body)
    assert_standard_headers(resp)


# ---- Health endpoints --------------------------------------------------

@pytest.mark.parametrize("path, expected", [
    ("/healthz", {"status": "ok"}),
    ("/readyz", {"status": "ready"}),
])
def test_health_endpoints_via_http_client(server, path, expected):
    assert_health_body(http_client_request(server.port, "GET", path), expected)


@pytest.mark.parametrize("path, expected", [
    ("/healthz", {"status": "ok"}),
    ("/readyz", {"status": "ready"}),
])
def test_health_endpoints_via_curl(server, path, expected):
    assert_health_body(curl(server.port, path), expected)


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_head_has_get_headers_and_no_body(server, path):
    with RawConnection(server.port) as conn:
        conn.send(http_request("GET", path))
        get = conn.read_response()
        conn.send(http_request("HEAD", path))
        head = conn.read_response("HEAD")
        # A body sent after the HEAD response would corrupt this next response.
        conn.send(http_request("GET", path))
        again = conn.read_response()
    assert head.status == get.status == again.status == 200
    assert_standard_headers(head)
    assert head.header("Content-Length") == get.header("Content-Length") == str(len(get.body))
    assert head.media_type() == get.media_type() == "application/json"
    assert again.body == get.body


def test_head_via_curl(server):
    get = curl(server.port, "/healthz")
    head = curl(server.port, "/healthz", "--head")
    assert head.status == 200
    assert head.body == b""
    assert head.header("Content-Length") == get.header("Content-Length")


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_health_endpoints_reject_other_methods(server, method, path):
    with RawConnection(server.port) as conn:
        conn.send(http_request(method, path))
        resp = conn.read_response()
        assert_json_error(resp, 405, "method_not_allowed")
        allowed = {m.strip().upper() for m in (resp.header("Allow") or "").split(",")}
        assert {"GET", "HEAD"} <= allowed, resp.header("Allow")
        assert method not in allowed
        conn.send(http_request("GET", path))
        assert conn.read_response().status == 200


def test_unknown_path_is_json_404_and_connection_stays_usable(server):
    with RawConnection(server.port) as conn:
        conn.send(http_request("GET", "/definitely/not/here"))
        assert_json_error(conn.read_response(), 404, "not_found")
        conn.send(http_request("GET", "/healthz"))
        assert conn.read_response().json() == {"status": "ok"}


# ---- Keep-alive and pipelining -----------------------------------------

def test_keep_alive_reuses_one_socket(server):
    conn = http.client.HTTPConnection(HOST, server.port, timeout=5)
    try:
        conn.connect()
        first_sock = conn.sock
        first_fd = first_sock.fileno()
        local_address = first_sock.getsockname()
        conn.auto_open = 0  # any reconnect attempt now raises NotConnected
        for path in ["/healthz", "/readyz", "/healthz", "/", "/healthz", "/readyz"]:
            conn.request("GET", path)
            resp = read_http_client_response(conn)
            assert resp.status == 200, (path, resp.body)
            assert resp.connection() == "keep-alive"
            assert conn.sock is first_sock, f"connection was reopened before {path}"
            assert conn.sock.fileno() == first_fd
            assert conn.sock.getsockname() == local_address
    finally:
        conn.close()


def test_http10_closes_by_default(server):
    with RawConnection(server.port) as conn:
        conn.send(b"GET /healthz HTTP/1.0\r\n\r\n")
        resp = conn.read_response()
        assert resp.status == 200
        assert resp.connection() == "close"
        conn.expect_closed()


def test_http10_keep_alive_on_request(server):
    with RawConnection(server.port) as conn:
        for _ in range(2):
            conn.send(b"GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            resp = conn.read_response()
            assert resp.status == 200
            assert resp.connection() == "keep-alive"


def test_connection_close_request_is_honoured(server):
    with RawConnection(server.port) as conn:
        conn.send(http_request("GET", "/healthz", {"Connection": "close"}))
        resp = conn.read_response()
        assert resp.status == 200
        assert resp.connection() == "close"
        conn.expect_closed()


def test_pipelined_requests_are_answered_in_order(server):
    batch = [("GET", "/healthz"), ("GET", "/readyz"), ("HEAD", "/healthz"),
             ("GET", "/missing"), ("DELETE", "/healthz"), ("GET", "/readyz")]
    with RawConnection(server.port) as conn:
        conn.send(b"".join(http_request(m, p) for m, p in batch))
        responses = [conn.read_response(m) for m, _ in batch]
    assert [r.status for r in responses] == [200, 200, 200, 404, 405, 200]
    assert responses[0].json() == {"status": "ok"}
    assert responses[1].json() == {"status": "ready"}
    assert responses[2].body == b""
    assert responses[3].json()["error"] == "not_found"
    assert responses[4].json()["error"] == "method_not_allowed"
    assert responses[5].json() == {"status": "ready"}


def test_long_pipeline_ending_with_close(server):
    paths = ["/healthz", "/readyz"] * 15
    requests = [http_request("GET", p) for p in paths[:-1]]
    requests.append(http_request("GET", paths[-1], {"Connection": "close"}))
    with RawConnection(server.port) as conn:
        conn.send(b"".join(requests))
        bodies = [conn.read_response().json() for _ in paths]
        conn.expect_closed()
    assert bodies == [{"status": "ok"}, {"status": "ready"}] * 15


# ---- Request bodies ----------------------------------------------------

def test_content_length_body_is_consumed(server):
    conn = http.client.HTTPConnection(HOST, server.port, timeout=5)
    try:
        conn.request("POST", "/healthz", body=b"x" * 500)
        first_sock = conn.sock
        assert_json_error(read_http_client_response(conn), 405, "method_not_allowed")
        conn.request("GET", "/healthz")
        assert conn.sock is first_sock
        assert read_http_client_response(conn).json() == {"status": "ok"}
    finally:
        conn.close()


def test_chunked_body_is_consumed(server):
    conn = http.client.HTTPConnection(HOST, server.port, timeout=5)
    try:
        conn.request("POST", "/healthz", body=iter([b"hello", b" ", b"chunked world"]))
        first_sock = conn.sock
        assert_json_error(read_http_client_response(conn), 405, "method_not_allowed")
        conn.request("GET", "/readyz")
        assert conn.sock is first_sock
        assert read_http_client_response(conn).json() == {"status": "ready"}
    finally:
        conn.close()


def test_pipelined_bodies_are_framed_correctly(server):
    # The bodies themselves look like requests; mis-framing would surface them.
    fake = http_request("GET", "/missing")
    chunked = (b"%x\r\n" % len(fake)) + fake + b"\r\n3;ext=1\r\nabc\r\n0\r\nX-Trailer: t\r\n\r\n"
    batch = (
        http_request("POST", "/healthz", body=fake)
        + http_request("POST", "/readyz", {"Transfer-Encoding": "chunked"}) + chunked
        + http_request("GET", "/healthz")
    )
    with RawConnection(server.port) as conn:
        conn.send(batch)
        statuses = [conn.read_response().status for _ in range(3)]
        assert not conn.readable(0.2), "unexpected extra response"
    assert statuses == [405, 405, 200]


def test_trickled_chunked_body_is_consumed(server):
    pieces = [http_request("POST", "/healthz", {"Transfer-Encoding": "chunked"}),
              b"5\r", b"\nhel", b"lo\r\n", b"1", b"0\r\n0123456789", b"abcdef\r\n0\r", b"\n\r\n"]
    with RawConnection(server.port) as conn:
        for piece in pieces[:-1]:
            conn.send(piece)
            assert not conn.readable(0.05), "answered before the body was complete"
        conn.send(pieces[-1])
        assert_json_error(conn.read_response(), 405, "method_not_allowed")
        conn.send(http_request("GET", "/healthz"))
        assert conn.read_response().status == 200


# ---- Protocol errors: JSON error body, then the connection is closed ---

BAD_REQUEST = {400: "bad_request"}

PROTOCOL_ERRORS = {
    "content-length-and-chunked": (
        http_request("POST", "/healthz", {"Content-Length": "5", "Transfer-Encoding": "chunked"}),
        BAD_REQUEST),
    "conflicting-content-lengths": (
        http_request("POST", "/healthz", [("Content-Length", "5"), ("Content-Length", "6")]),
        BAD_REQUEST),
    "bad-chunk-size": (
        http_request("POST", "/healthz", {"Transfer-Encoding": "chunked"}) + b"zz\r\nhello\r\n",
        BAD_REQUEST),
    "unknown-method": (
        http_request("BREW", "/healthz"),
        BAD_REQUEST),
    "http-2.0": (http_request("GET", "/healthz", version="HTTP/2.0"), {505: "version_not_supported"}),
    "http-3.0": (http_request("GET", "/healthz", version="HTTP/3.0"), {505: "version_not_supported"}),
    "single-token-request-line": (b"HELLO\r\n\r\n", BAD_REQUEST),
    "request-line-without-target": (b"GET HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", BAD_REQUEST),
    "header-without-colon": (b"GET /healthz HTTP/1.1\r\nHost 127.0.0.1\r\n\r\n", BAD_REQUEST),
    # RFC 9112 3.2: an HTTP/1.1 request without Host, any with two, or with an invalid one.
    "no-host": (b"GET /healthz HTTP/1.1\r\n\r\n", BAD_REQUEST),
    "two-hosts": (http_request("GET", "/healthz", [("Host", HOST), ("host", HOST)]), BAD_REQUEST),
    "two-hosts-http10": (http_request("GET", "/healthz", [("Host", HOST), ("Host", "b")], version="HTTP/1.0"),
                         BAD_REQUEST),
    "invalid-host": (http_request("GET", "/healthz", {"Host": "a b"}), BAD_REQUEST),
    "invalid-host-port": (http_request("GET", "/healthz", {"Host": f"{HOST}:80x"}), BAD_REQUEST),
    "invalid-host-slash": (http_request("GET", "/healthz", {"Host": "a/b"}), BAD_REQUEST),
    # RFC 9110 4.2.1: an http URI with an empty host is invalid, and its recipient rejects it.
    "empty-host": (b"GET /healthz HTTP/1.1\r\nHost:\r\n\r\n", BAD_REQUEST),
    "empty-host-with-port": (http_request("GET", "/healthz", {"Host": ":8080"}), BAD_REQUEST),
    "host-port-past-65535": (http_request("GET", "/healthz", {"Host": f"{HOST}:65536"}), BAD_REQUEST),
}


@pytest.mark.parametrize("raw, expected", list(PROTOCOL_ERRORS.values()), ids=list(PROTOCOL_ERRORS))
def test_protocol_errors_answer_json_and_close(server, raw, expected):
    with RawConnection(server.port) as conn:
        conn.send(raw)
        resp = conn.read_response()
        assert_json_error(resp, expected)
        assert resp.connection() == "close"
        conn.expect_closed()


def test_a_missing_host_is_named_and_hosts_any_client_may_send_are_taken(server):
    with RawConnection(server.port) as conn:
        conn.send(b"GET /healthz HTTP/1.1\r\n\r\n")
        resp = conn.read_response()
        assert_json_error(resp, BAD_REQUEST)
        assert resp.json()["detail"] == "an HTTP/1.1 request needs a Host header"
    for host in (f"{HOST}:{server.port}", HOST, "[::1]:8080", "gateway.example", f"{HOST}:"):
        with RawConnection(server.port) as conn:
            conn.send(http_request("GET", "/healthz", {"Host": host}))
            assert conn.read_response().status == 200, host
    with RawConnection(server.port) as conn:
        conn.send(b"GET /healthz HTTP/1.0\r\n\r\n")  # HTTP/1.0 may leave Host out
        assert conn.read_response().status == 200


def test_protocol_error_does_not_affect_other_connections(server):
    with RawConnection(server.port) as good, RawConnection(server.port) as bad:
        good.send(http_request("GET", "/healthz"))
        assert good.read_response().status == 200
        bad.send(b"HELLO\r\n\r\n")
        assert bad.read_response().status == 400
        good.send(http_request("GET", "/readyz"))
        assert good.read_response().json() == {"status": "ready"}


# ---- Size limits (--max-head-bytes 1024, --max-body-bytes 100) ---------

def test_head_under_limit_is_served(limited_server):
    request = http_request("GET", "/healthz", {"X-Padding": "p" * 800})
    assert len(request) < 1024
    with RawConnection(limited_server.port) as conn:
        conn.send(request)
        resp = conn.read_response()
        assert resp.status == 200
        assert resp.connection() == "keep-alive"


def test_oversized_head_is_431_and_closes(limited_server):
    with RawConnection(limited_server.port) as conn:
        conn.send(http_request("GET", "/healthz", {"X-Padding": "p" * 1500}))
        resp = conn.read_response()
        assert_json_error(resp, 431, "header_too_large")
        assert resp.connection() == "close"
        conn.expect_closed()


def test_oversized_head_split_over_many_headers_is_431(limited_server):
    headers = [(f"X-Field-{i}", "v" * 40) for i in range(40)]
    with RawConnection(limited_server.port) as conn:
        conn.send(http_request("GET", "/healthz", headers))
        assert_json_error(conn.read_response(), 431, "header_too_large")
        conn.expect_closed()


def test_body_at_limit_is_accepted(limited_server):
    with RawConnection(limited_server.port) as conn:
        conn.send(http_request("POST", "/healthz", body=b"b" * 100))
        resp = conn.read_response()
        assert_json_error(resp, 405, "method_not_allowed")
        conn.send(http_request("GET", "/healthz"))
        assert conn.read_response().status == 200


def test_declared_body_over_limit_is_413_and_closes(limited_server):
    with RawConnection(limited_server.port) as conn:
        # Only the head is sent: the declared length alone must be rejected.
        conn.send(http_request("POST", "/healthz", {"Content-Length": "101"}))
        resp = conn.read_response()
        assert_json_error(resp, 413, "payload_too_large")
        assert resp.connection() == "close"
        conn.expect_closed()


def test_chunked_body_over_limit_is_413_and_closes(limited_server):
    body = b"3c\r\n" + b"c" * 60 + b"\r\n" + b"3c\r\n" + b"c" * 60 + b"\r\n"
    with RawConnection(limited_server.port) as conn:
        conn.send(http_request("POST", "/healthz", {"Transfer-Encoding": "chunked"}) + body)
        resp = conn.read_response()
        assert_json_error(resp, 413, "payload_too_large")
        assert resp.connection() == "close"
        conn.expect_closed()


def test_chunked_body_at_limit_is_accepted(limited_server):
    body = b"32\r\n" + b"c" * 50 + b"\r\n" + b"32\r\n" + b"c" * 50 + b"\r\n0\r\n\r\n"
    with RawConnection(limited_server.port) as conn:
        conn.send(http_request("POST", "/healthz", {"Transfer-Encoding": "chunked"}) + body)
        assert_json_error(conn.read_response(), 405, "method_not_allowed")
        conn.send(http_request("GET", "/healthz"))
        assert conn.read_response().status == 200
