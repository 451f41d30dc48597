"""Shared fixtures and client utilities for the Receptionist end-to-end tests.

The suite drives the real `receptionist` binary. Its location comes from the
RECEPTIONIST_BIN environment variable, defaulting to `.build/debug/receptionist`
under the repository root.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import os
import re
import select
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_BINARY = REPO_ROOT / ".build" / "debug" / "receptionist"
HOST = "127.0.0.1"
STARTUP_TIMEOUT = 15.0
IO_TIMEOUT = 5.0
LISTENING_LINE = re.compile(r"Receptionist listening on http://127\.0\.0\.1:(\d+)")
DEFAULT_INDEX = b"<!doctype html><title>Receptionist</title><h1>Receptionist</h1>\n"


# ---- Server process management -----------------------------------------

def server_binary() -> Path:
    """Locate the server binary, failing the test loudly when it is absent."""
    configured = os.environ.get("RECEPTIONIST_BIN")
    path = Path(configured).resolve() if configured else DEFAULT_BINARY
    if not path.is_file() or not os.access(path, os.X_OK):
        pytest.fail(
            f"receptionist binary not found or not executable at {path}. "
            "Build it with `swift build` or point RECEPTIONIST_BIN at it.",
            pytrace=False,
        )
    return path


class ServerProcess:
    """A running `receptionist serve` process."""

    def __init__(self, proc: subprocess.Popen, argv: list[str], stderr_path: Path,
                 announcement: str, port: int, stdout_rest: bytes):
        self.proc = proc
        self.argv = argv
        self.stderr_path = stderr_path
        self.announcement = announcement
        self.port = port
        self._stdout_rest = bytearray(stdout_rest)
        self._drainer = threading.Thread(target=self._drain_stdout, daemon=True)
        self._drainer.start()

    def _drain_stdout(self) -> None:
        try:
            while chunk := os.read(self.proc.stdout.fileno(), 4096):
                self._stdout_rest.extend(chunk)
        except (OSError, ValueError):
            pass

    def stderr_text(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def stdout_after_announcement(self, timeout: float = IO_TIMEOUT) -> bytes:
        """Everything the server wrote to stdout after its first line (call after exit)."""
        self._drainer.join(timeout)
        return bytes(self._stdout_rest)

    def send_signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def wait_exit(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"server still running {timeout}s after being asked to stop\n"
                f"stderr:\n{self.stderr_text()}"
            ) from None

    def stop(self) -> None:
        """Stop the server, escalating to SIGKILL; never leaves it running."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self._drainer.join(2)
        if self.proc.stdout:
            self.proc.stdout.close()


def _read_first_line(proc: subprocess.Popen, timeout: float) -> tuple[bytes | None, bytes, str]:
    """Read one stdout line with a deadline: (line, bytes after it, problem)."""
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + timeout
    buffer = b""
    while b"\n" not in buffer:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None, b"", f"no stdout line within {timeout}s (got {buffer!r})"
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            continue
        chunk = os.read(fd, 4096)
        if not chunk:
            proc.wait(timeout=5)
            return None, b"", f"stdout closed, exit code {proc.returncode} (got {buffer!r})"
        buffer += chunk
    line, _, rest = buffer.partition(b"\n")
    return line, rest, ""


def launch_server(workdir: Path, args=(), env: dict | None = None,
                  public: Path | None = None) -> ServerProcess:
    """Start `receptionist serve` on an ephemeral port and wait for its announcement.

    `--host`, `--port 0` and `--public` are supplied unless the matching
    RECEPTIONIST_* variable is given in `env`. Without `public`, a fresh public
    directory holding only an index.html is created.
    """
    binary = server_binary()
    workdir.mkdir(parents=True, exist_ok=True)
    overrides = dict(env or {})
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("RECEPTIONIST_")}
    child_env.update(overrides)

    argv = [str(binary), "serve"]
    if "RECEPTIONIST_HOST" not in overrides:
        argv += ["--host", HOST]
    if "RECEPTIONIST_PORT" not in overrides:
        argv += ["--port", "0"]
    if public is None and "RECEPTIONIST_PUBLIC" not in overrides:
        public = workdir / "public"
        public.mkdir(exist_ok=True)
        (public / "index.html").write_bytes(DEFAULT_INDEX)
    if public is not None:
        argv += ["--public", str(public)]
    argv += [str(a) for a in args]

    stderr_path = workdir / "stderr.log"
    with open(stderr_path, "wb") as stderr_file:
        proc = subprocess.Popen(argv, cwd=workdir, env=child_env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=stderr_file, bufsize=0)
    line, rest, problem = _read_first_line(proc, STARTUP_TIMEOUT)
    match = LISTENING_LINE.fullmatch(line.decode("utf-8", "replace")) if line is not None else None
    if match is None:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
        problem = problem or f"unexpected first stdout line {line!r}"
        pytest.fail(
            f"server failed to start: {problem}\ncommand: {' '.join(argv)}\n"
            f"stderr:\n{stderr_path.read_text(errors='replace')}",
            pytrace=False,
        )
    return ServerProcess(proc, argv, stderr_path, match.group(0), int(match.group(1)), rest)


class ServerFactory:
    """Starts servers on demand and stops every one of them at teardown."""

    def __init__(self, base: Path):
        self.base = base
        self.servers: list[ServerProcess] = []

    def __call__(self, *args, env: dict | None = None, public: Path | None = None) -> ServerProcess:
        workdir = self.base / f"server-{len(self.servers)}"
        server = launch_server(workdir, args, env=env, public=public)
        self.servers.append(server)
        return server

    def stop_all(self) -> None:
        for server in self.servers:
            server.stop()
            # Shown by pytest only when a test fails.
            tail = server.stderr_text().splitlines()[-40:]
            print(f"--- {' '.join(server.argv[1:])} (exit {server.proc.returncode}) stderr tail ---")
            print("\n".join(tail))


@pytest.fixture
def start_server(tmp_path):
    """Factory for servers private to one test."""
    factory = ServerFactory(tmp_path / "servers")
    yield factory
    factory.stop_all()


@pytest.fixture(scope="module")
def module_servers(tmp_path_factory):
    """Factory for servers shared by the tests of one module."""
    factory = ServerFactory(tmp_path_factory.mktemp("servers"))
    yield factory
    factory.stop_all()


@pytest.fixture(scope="module")
def server(module_servers) -> ServerProcess:
    """A server with default limits."""
    return module_servers()


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
    """Every response carries Date, Content-Length and Connection."""
    date = resp.header("Date")
    assert date, f"missing Date header in {resp.headers}"
    assert email.utils.parsedate_to_datetime(date) is not None
    length = resp.header("Content-Length")
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


# ---- Bounded waits -----------------------------------------------------

def wait_until_refused(port: int, timeout: float = 5.0, interval: float = 0.05) -> float:
    """Poll until a TCP connect to the port is refused; returns the time it took."""
    start = time.monotonic()
    while True:
        try:
            probe = socket.create_connection((HOST, port), timeout=1)
        except ConnectionRefusedError:
            return time.monotonic() - start
        except ConnectionResetError:
            # Queued on the listener as it closed: not yet refused; the next probe tells.
            probe = None
        if probe is not None:
            probe.close()
        if time.monotonic() - start > timeout:
            raise AssertionError(f"port {port} still accepting connections after {timeout}s")
        time.sleep(interval)


def wait_for(condition, timeout: float, message: str, interval: float = 0.05):
    """Poll `condition` until it returns a truthy value or the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"{message} (waited {timeout}s)")
        time.sleep(interval)


# ---- JSON API ----------------------------------------------------------

_NO_PAYLOAD = object()


def api(port: int, method: str, path: str, payload=_NO_PAYLOAD, body: bytes | None = None,
        timeout: float = IO_TIMEOUT) -> Response:
    """One API request; `payload` is sent JSON-encoded, `body` verbatim (for malformed JSON)."""
    headers = {}
    if payload is not _NO_PAYLOAD:
        body = json.dumps(payload).encode("utf-8")
    if body is not None:
        headers["Content-Type"] = "application/json"
    return http_client_request(port, method, path, headers=headers, body=body, timeout=timeout)


def json_ok(resp: Response, status: int = 200):
    """Check a successful JSON response and return its decoded body."""
    assert resp.status == status, f"expected {status}, got {resp.status}: {resp.body[:300]!r}"
    assert_standard_headers(resp)
    assert resp.media_type() == "application/json", resp.header("Content-Type")
    assert int(resp.header("Content-Length")) == len(resp.body)
    return resp.json()


def assert_allow(resp: Response, method: str, expected: set[str]) -> None:
    """A 405 answer whose Allow header lists `expected` but not the rejected method."""
    assert_json_error(resp, 405, "method_not_allowed")
    allowed = {m.strip().upper() for m in (resp.header("Allow") or "").split(",") if m.strip()}
    assert expected <= allowed, f"Allow {resp.header('Allow')!r} lacks {expected - allowed}"
    assert method not in allowed, f"Allow {resp.header('Allow')!r} lists the rejected {method}"


def store_snapshot(port: int, store: str) -> dict:
    """GET /api/stores/{store}: {"store", "version", "models"}."""
    return json_ok(api(port, "GET", f"/api/stores/{store}"))


def store_version(port: int, store: str) -> int:
    return store_snapshot(port, store)["version"]


def wait_version_above(port: int, store: str, floor: int, timeout: float = 10.0) -> int:
    """Poll until the store's version exceeds `floor`; returns the version seen."""
    return wait_for(lambda: (v := store_version(port, store)) > floor and v, timeout,
                    f"store {store!r} never moved past version {floor}")


def stop_job(port: int, job_id: str) -> dict:
    """DELETE /api/jobs/{id}; returns the job as the reply shows it, which must say "stopped".

    "stopped" means the job takes no new slice of work and a slice in flight commits at most the
    change set it is on; it does not say that slice has finished, so the store may still take one
    more change set per job thread. Store requests run on the job threads in arrival order, so on
    a gateway with one job thread any store request made after the stop runs after the job's last
    commit: the version it reads or writes is past everything the job will ever commit.
    """
    job = json_ok(api(port, "DELETE", f"/api/jobs/{job_id}"))
    assert (job["id"], job["state"]) == (job_id, "stopped"), job
    return job
