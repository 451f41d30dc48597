"""What RFC 9110 and 9112 ask of a server beyond the common case: a response after a closing one is
never sent, `Expect: 100-continue` is answered before the body is sent, a target in absolute form
is served as its path, a 204 or 304 carries no Content-Length, and a list field sent as several
lines is one list."""

import subprocess
import time

import pytest

from conftest import RawConnection, api, assert_standard_headers, http_request, json_ok

CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
PROMPT = 0.5                 # seconds; curl waits 1 s for a 100 before it sends the body anyway


# ---- Nothing after a closing response ------------------------------------

@pytest.mark.parametrize("after", [b"XYZ\r\n\r\n", b"GET /healthz HTTP/1.1\r\n\r\n"], ids=["garbage", "no-host"])
def test_nothing_is_answered_after_a_response_that_closes_the_connection(server, after):
    """A request with `Connection: close`, and in the same write bytes that would get a 400 of
    their own: the client gets the one response, then the end of the stream (RFC 9112, section
    9.6). Before, the 400 followed the response that had said `Connection: close`."""
    with RawConnection(server.port) as conn:
        conn.send(http_request("GET", "/healthz", {"Connection": "close"}) + after)
        resp = conn.read_response()
        assert resp.status == 200 and resp.json() == {"status": "ok"}
        assert resp.connection() == "close"
        conn.expect_closed()


# ---- Expect: 100-continue -------------------------------------------------

def test_a_request_expecting_100_continue_gets_it_before_sending_its_body(server):
    """The head of a publish with `Expect: 100-continue` and its body withheld: `100 Continue`
    comes at once (RFC 9110, section 10.1.1), and the body sent after it is published. Before,
    nothing came, and clients waited (curl: a second) before sending the body anyway."""
    body = b'{"n":1}'
    head = http_request("POST", "/api/topics/expects/messages",
                        {"Content-Type": "application/json", "Expect": "100-continue"}, body)
    head = head[:len(head) - len(body)]
    with RawConnection(server.port) as conn:
        conn.send(head)
        deadline = time.monotonic() + PROMPT
        while len(conn.buffer) < len(CONTINUE) and conn.readable(max(0.0, deadline - time.monotonic())):
            chunk = conn.sock.recv(4096)
            assert chunk, "closed before 100 Continue"
            conn.buffer += chunk
        assert conn.buffer == CONTINUE, conn.buffer
        conn.buffer = b""
        conn.send(body)
        resp = conn.read_response()
        assert resp.status == 201, resp.body
        assert_standard_headers(resp)
        # The next request on the connection is answered as usual.
        conn.send(http_request("GET", "/healthz"))
        assert conn.read_response().json() == {"status": "ok"}


def test_curl_with_expect_100_continue_is_not_held_back(server):
    """curl sends `Expect: 100-continue` and waits up to a second for the 100 before the body."""
    started = time.monotonic()
    out = subprocess.run(
        ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Expect: 100-continue",
         "-H", "Content-Type: application/json", "--data-binary", '{"n":2}',
         f"http://127.0.0.1:{server.port}/api/topics/expects/messages"],
        capture_output=True, text=True, timeout=30, check=True)
    took = time.monotonic() - started
    assert out.stdout == "201", out.stdout
    assert took < PROMPT, f"curl took {took:.2f} s"


def test_a_request_expecting_100_continue_whose_body_came_already_gets_only_its_answer(server):
    """A client that sent the body with the head gets no 100, only the final answer."""
    body = b'{"n":3}'
    with RawConnection(server.port) as conn:
        conn.send(http_request("POST", "/api/topics/expects/messages",
                               {"Content-Type": "application/json", "Expect": "100-continue"}, body))
        resp = conn.read_response()
        assert resp.status == 201, (resp.status, resp.body)


# ---- Absolute form --------------------------------------------------------

@pytest.mark.parametrize("target, expected", [
    ("http://{host}/healthz", {"status": "ok"}),
    ("HTTP://{host}/readyz?probe=1", {"status": "ready"}),
    ("https://example.test/healthz", {"status": "ok"}),
])
def test_a_target_in_absolute_form_is_served_as_its_path(server, target, expected):
    """RFC 9112, section 3.2.2: a server must accept the absolute form, and serves its path and
    query. Before, it was refused: `400 the path is not allowed`."""
    with RawConnection(server.port) as conn:
        line = target.format(host=f"127.0.0.1:{server.port}")
        conn.send(f"GET {line} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        resp = conn.read_response()
        assert resp.status == 200, (resp.status, resp.body)
        assert resp.json() == expected


# ---- An error answering a HEAD ---------------------------------------------

def test_a_head_request_refused_for_its_head_gets_no_body(server):
    """A `HEAD` without `Host` is refused `400`: the answer has a Content-Length and no body, as
    every answer to a HEAD (RFC 9110, section 9.3.2), and the connection closes after it. Before,
    the error's JSON body followed."""
    with RawConnection(server.port) as conn:
        conn.send(b"HEAD /healthz HTTP/1.1\r\n\r\n")
        resp = conn.read_response("HEAD")
        assert resp.status == 400 and int(resp.header("Content-Length")) > 0, resp.headers
        conn.expect_closed()


# ---- A list field over several lines ---------------------------------------

@pytest.mark.parametrize("order", ["stale-first", "current-first"])
def test_if_match_over_two_lines_is_one_list(server, order):
    """`If-Match` sent as two field lines is the list of both (RFC 9110, section 5.3): the write
    applies when either tag is the model's, whichever line comes first. Before, only the first line
    was read. A tag is compared as text: `"0N"` is not `"N"`."""
    store = f"lists-{order}"
    json_ok(api(server.port, "POST", "/api/stores", {"name": store}), 201)
    tag = api(server.port, "PUT", f"/api/stores/{store}/models/m", {"n": 1}).header("ETag")
    lines = [("If-Match", '"99999999"'), ("If-Match", tag)]
    if order == "current-first":
        lines.reverse()
    body = b'{"n":2}'
    with RawConnection(server.port) as conn:
        conn.send(http_request("PUT", f"/api/stores/{store}/models/m", [("Content-Type", "application/json"), *lines], body))
        written = conn.read_response()
        assert written.status == 200
        padded = '"0' + written.header("ETag").strip('"') + '"'
        conn.send(http_request("PUT", f"/api/stores/{store}/models/m", [("Content-Type", "application/json"), ("If-Match", padded)], body))
        assert conn.read_response().status == 412


@pytest.mark.parametrize("header, values", [
    ("Authorization", ["Bearer bad", "Bearer good"]),
    ("Origin", ["http://127.0.0.1", "https://evil.example"]),
    ("Idempotency-Key", ["a", "b"]),
])
def test_a_credential_origin_or_key_sent_twice_is_400(server, header, values):
    """Which of two `Authorization`, `Origin` or `Idempotency-Key` lines a proxy on the way read is
    not known: the request is refused with 400, not taken by its first line. Before, the first
    decided, and the order of two credentials chose the outcome."""
    lines = [(header, value) for value in values]
    with RawConnection(server.port) as conn:
        conn.send(http_request("POST", "/api/topics/twice/messages", [("Content-Type", "application/json"), *lines], b'{"n":1}'))
        resp = conn.read_response()
    assert resp.status == 400 and resp.json() == {"error": "bad_request", "detail": f"{header} is sent more than once; send it once"}
    assert all(topic["name"] != "twice" for topic in json_ok(api(server.port, "GET", "/api/topics"))["topics"])
