"""HTTP for the end-to-end tests: responses and the checks every answer must pass, a raw TCP client
with its own framing-aware parser, one request on a fresh http.client connection, and curl.

conftest.py re-exports every name here, so `from conftest import RawConnection` works as before.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import select
import socket
import subprocess
import time
from dataclasses import dataclass

from server_process import HOST, IO_TIMEOUT


# ---- Responses and assertions ------------------------------------------

@dataclass
class Response:
    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str, default: str | None = None) -> str | None:
        values = [v for k, v in self.headers if k.lower() == name.lower()]
        return values[-1] if values else default

    def json(self):
        return json.loads(self.body.decode("utf-8"))

    def media_type(self) -> str:
        return (self.header("Content-Type") or "").split(";")[0].strip().lower()

    def connection(self) -> str:
        return (self.header("Connection") or "").strip().lower()


def parse_head(head: bytes) -> tuple[int, str, list[tuple[str, str]]]:
    lines = head.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    status, _, reason = rest.partition(" ")
    assert version.startswith("HTTP/") and status.isdigit(), f"bad status line {lines[0]!r}"
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        assert sep and name.strip(), f"malformed response header line {line!r}"
        headers.append((name.strip(), value.strip()))
    return int(status), reason, headers


def assert_standard_headers(resp: Response) -> None:
    """Every response carries Date, Content-Length and Connection; a 204 and a 304 carry no
    Content-Length (RFC 9110, section 8.6)."""
    date = resp.header("Date")
    assert date, f"missing Date header in {resp.headers}"
    assert email.utils.parsedate_to_datetime(date) is not None
    length = resp.header("Content-Length")
    if resp.status in (204, 304):
        assert length is None, f"a {resp.status} with Content-Length in {resp.headers}"
    else:
        assert length is not None and length.isdigit(), f"bad Content-Length in {resp.headers}"
    assert resp.connection() in ("keep-alive", "close"), f"bad Connection in {resp.headers}"


def assert_json_error(resp: Response, status: int | dict[int, str], code: str | None = None) -> None:
    """Check an error response; `status` may map several acceptable statuses to codes."""
    expected = status if isinstance(status, dict) else {status: code}
    assert resp.status in expected, f"expected status in {sorted(expected)}, got {resp.status}: {resp.body[:300]!r}"
    assert_standard_headers(resp)
    assert resp.media_type() == "application/json", resp.header("Content-Type")
    assert int(resp.header("Content-Length")) == len(resp.body)
    payload = resp.json()
    assert isinstance(payload, dict) and set(payload) == {"error", "detail"}, payload
    assert payload["error"] == expected[resp.status], payload
    assert isinstance(payload["detail"], str), payload


# ---- Clients -----------------------------------------------------------

def http_request(method: str, path: str, headers=(), body: bytes = b"",
                 version: str = "HTTP/1.1") -> bytes:
    """Serialise a request; adds Host, and Content-Length for a body without framing headers."""
    header_list = list(headers.items() if isinstance(headers, dict) else headers)
    names = {name.lower() for name, _ in header_list}
    if "host" not in names:
        header_list.insert(0, ("Host", HOST))
    if body and not names & {"content-length", "transfer-encoding"}:
        header_list.append(("Content-Length", str(len(body))))
    lines = [f"{method} {path} {version}"] + [f"{k}: {v}" for k, v in header_list]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class ConnectionClosed(AssertionError):
    """The server closed the connection before a complete response arrived."""


class RawConnection:
    """A plain TCP client reading responses with its own framing-aware parser."""

    def __init__(self, port: int, timeout: float = IO_TIMEOUT):
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self.buffer = b""

    def __enter__(self) -> "RawConnection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def readable(self, timeout: float) -> bool:
        """True when data or EOF is waiting (already buffered bytes count)."""
        if self.buffer:
            return True
        ready, _, _ = select.select([self.sock], [], [], timeout)
        return bool(ready)

    def _recv(self, deadline: float) -> bytes:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        self.sock.settimeout(remaining)
        return self.sock.recv(65536)

    def _fill(self, deadline: float) -> None:
        try:
            chunk = self._recv(deadline)
        except (TimeoutError, socket.timeout):
            raise AssertionError(f"response incomplete at deadline; buffered {self.buffer[:300]!r}") from None
        if not chunk:
            raise ConnectionClosed(f"connection closed mid-response; buffered {self.buffer[:300]!r}")
        self.buffer += chunk

    def _take_line(self, deadline: float) -> bytes:
        while b"\r\n" not in self.buffer:
            self._fill(deadline)
        line, _, self.buffer = self.buffer.partition(b"\r\n")
        return line

    def _take(self, size: int, deadline: float) -> bytes:
        while len(self.buffer) < size:
            self._fill(deadline)
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    def read_response(self, method: str = "GET", timeout: float = IO_TIMEOUT) -> Response:
        deadline = time.monotonic() + timeout
        while b"\r\n\r\n" not in self.buffer:
            self._fill(deadline)
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        status, reason, headers = parse_head(head)
        resp = Response(status, reason, headers, b"")
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            return resp
        if "chunked" in (resp.header("Transfer-Encoding") or "").lower():
            body = b""
            while (size := int(self._take_line(deadline).split(b";")[0], 16)) > 0:
                body += self._take(size, deadline)
                assert self._take(2, deadline) == b"\r\n", "bad chunk terminator"
            while self._take_line(deadline):
                pass
            resp.body = body
        elif resp.header("Content-Length") is not None:
            resp.body = self._take(int(resp.header("Content-Length")), deadline)
        else:
            while True:
                try:
                    self._fill(deadline)
                except ConnectionClosed:
                    break
            resp.body, self.buffer = self.buffer, b""
        return resp

    def expect_closed(self, timeout: float = IO_TIMEOUT) -> None:
        """Assert the peer closes the connection (EOF or reset) without sending more bytes."""
        deadline = time.monotonic() + timeout
        try:
            while chunk := self._recv(deadline):
                self.buffer += chunk
        except ConnectionResetError:
            pass
        except (TimeoutError, socket.timeout):
            raise AssertionError(f"connection still open after {timeout}s") from None
        assert self.buffer == b"", f"unexpected bytes before close: {self.buffer[:300]!r}"


def http_client_request(port: int, method: str, path: str, headers: dict | None = None,
                        body=None, timeout: float = IO_TIMEOUT) -> Response:
    """One request on a fresh http.client connection."""
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        return read_http_client_response(conn)
    finally:
        conn.close()


def read_http_client_response(conn: http.client.HTTPConnection) -> Response:
    raw = conn.getresponse()
    body = raw.read()
    return Response(raw.status, raw.reason, raw.getheaders(), body)


def curl(port: int, path: str, *args: str) -> Response:
    """Fetch with the curl command-line client (HTTP/1.1, headers included)."""
    argv = ["curl", "--silent", "--show-error", "--http1.1", "--include", "--max-time", "10",
            *args, f"http://{HOST}:{port}{path}"]
    result = subprocess.run(argv, capture_output=True, timeout=20)
    assert result.returncode == 0, f"{argv} failed ({result.returncode}): {result.stderr!r}"
    head, sep, body = result.stdout.partition(b"\r\n\r\n")
    assert sep, f"curl printed no complete head: {result.stdout[:300]!r}"
    return Response(*parse_head(head), body)
