"""Start-up, configuration, connection timeouts and caps, graceful drain, logging."""

import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import (
    HOST,
    RawConnection,
    assert_json_error,
    http_client_request,
    http_request,
    server_binary,
    wait_for,
    wait_until_refused,
)

EXIT_TIMEOUT = 15.0


# ---- Start-up and configuration ----------------------------------------

def test_startup_announces_real_port_on_stdout(start_server):
    server = start_server()
    assert server.port > 0
    assert server.announcement == f"Receptionist listening on http://{HOST}:{server.port}"
    assert http_client_request(server.port, "GET", "/healthz").status == 200
    server.send_signal(signal.SIGTERM)
    assert server.wait_exit(EXIT_TIMEOUT) == 0
    assert server.stdout_after_announcement() == b"", "stdout must hold exactly one line"


REPOSITORY = pathlib.Path(__file__).resolve().parents[2]
VERSION_LINE = re.compile(r"^(\d+\.\d+\.\d+) \(commit ([0-9a-f]{40}|unknown), (debug|release)\)$")


def version_of(binary) -> str:
    result = subprocess.run([str(binary), "--version"], capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    return result.stdout.decode().strip()


def test_version_names_the_release_and_the_commit_it_was_built_from(tmp_path):
    """`--version` prints the version and the commit `scripts/stamp-commit.py` wrote in; a copy
    stamped with another commit says that one, so the line is read from the binary, not made up."""
    line = version_of(server_binary())
    match = VERSION_LINE.match(line)
    assert match, line
    changelog = (REPOSITORY / "CHANGELOG.md").read_text()
    assert f"## [{match[1]}]" in changelog, f"{match[1]} has no entry in CHANGELOG.md"
    copy = tmp_path / "receptionist"
    shutil.copy2(server_binary(), copy)
    commit = "0123456789abcdef0123456789abcdef01234567"
    subprocess.run([sys.executable, str(REPOSITORY / "scripts/stamp-commit.py"), str(copy), commit], check=True, timeout=60)
    assert version_of(copy) == f"{match[1]} (commit {commit}, {match[3]})"
    refused = subprocess.run([sys.executable, str(REPOSITORY / "scripts/stamp-commit.py"), str(copy), "not-a-commit"],
                             capture_output=True, timeout=60)
    assert refused.returncode != 0 and version_of(copy) == f"{match[1]} (commit {commit}, {match[3]})"


def test_a_binary_built_by_make_names_the_commit_checked_out(start_server):
    """`make` stamps every gateway it builds; `/metrics` carries the same commit."""
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPOSITORY, capture_output=True, text=True, timeout=30)
    if head.returncode != 0:
        pytest.skip("not a git work tree")
    commit = VERSION_LINE.match(version_of(server_binary()))[2]
    assert commit == head.stdout.strip(), "build with `make` (it stamps the binary), or the binary is stale"
    server = start_server()
    metrics = http_client_request(server.port, "GET", "/metrics").body.decode()
    assert f'commit="{commit}"' in metrics


def test_serve_help_documents_options_and_defaults():
    result = subprocess.run([str(server_binary()), "serve", "--help"],
                            capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    text = (result.stdout + result.stderr).decode("utf-8", "replace")
    for option in ["--host", "--port", "--public", "--max-head-bytes", "--max-body-bytes",
                   "--idle-timeout", "--head-timeout", "--max-connections",
                   "--drain-timeout", "--log-level"]:
        assert option in text, f"{option} missing from help:\n{text}"
    for default in ["127.0.0.1", "8080", "Public", "16384", "1048576", "10000"]:
        assert default in text, f"default {default} missing from help:\n{text}"


@pytest.mark.parametrize("option", ["--max-queued-bytes", "--max-message-bytes"])
def test_a_limit_past_two_gib_is_refused_at_start(option):
    # A connection keeps these in half words; a larger value is an error, never silently cut.
    result = subprocess.run([str(server_binary()), "serve", "--port", "0", option, "2147483648"],
                            capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    assert result.returncode != 0
    assert f"{option} must be at most 2147483647" in result.stderr.decode("utf-8", "replace")


@pytest.mark.parametrize("option", ["--ping-interval", "--ping-timeout"])
def test_a_keepalive_span_past_a_day_is_refused_at_start(option):
    # A connection keeps its instants in half words, which measure spans of up to 6 days.
    result = subprocess.run([str(server_binary()), "serve", "--port", "0", option, "86401"],
                            capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    assert result.returncode != 0
    assert "--ping-interval and --ping-timeout are at most 86400 seconds" in result.stderr.decode("utf-8", "replace")


def test_env_var_sets_max_body_bytes(start_server):
    server = start_server(env={"RECEPTIONIST_MAX_BODY_BYTES": "100"})
    with RawConnection(server.port) as conn:
        conn.send(http_request("POST", "/healthz", body=b"a" * 100))
        assert_json_error(conn.read_response(), 405, "method_not_allowed")
        conn.send(http_request("POST", "/healthz", body=b"a" * 200))
        resp = conn.read_response()
        assert_json_error(resp, 413, "payload_too_large")
        assert resp.connection() == "close"
        conn.expect_closed()


def test_env_vars_set_port_and_public_dir(start_server, tmp_path):
    public = tmp_path / "from-env"
    public.mkdir()
    (public / "index.html").write_bytes(b"<p>configured through the environment</p>")
    server = start_server(env={"RECEPTIONIST_PORT": "0", "RECEPTIONIST_PUBLIC": str(public)})
    assert "--port" not in server.argv and "--public" not in server.argv
    resp = http_client_request(server.port, "GET", "/")
    assert resp.status == 200
    assert resp.body == b"<p>configured through the environment</p>"


# ---- Timeouts and connection cap ---------------------------------------

def test_head_timeout_stops_slowloris_while_others_are_served(start_server):
    head_timeout = 1.0
    server = start_server("--head-timeout", "1", "--idle-timeout", "30")
    trickle = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"z" * 500
    started = time.monotonic()
    with RawConnection(server.port) as slow:
        for index, byte in enumerate(trickle):
            try:
                slow.send(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                break
            if index == 2:
                other = http_client_request(server.port, "GET", "/healthz", timeout=2)
                assert other.status == 200
                assert not slow.readable(0), "slow client was cut off before others were served"
            if slow.readable(0.2):  # also paces the trickle at one byte per 0.2 s
                break
            assert time.monotonic() - started < head_timeout + 3, "slow head never timed out"
        resp = slow.read_response()
        elapsed = time.monotonic() - started
        assert_json_error(resp, 408, "request_timeout")
        assert resp.connection() == "close"
        slow.expect_closed()
    assert head_timeout * 0.5 <= elapsed <= head_timeout + 3, elapsed
    assert http_client_request(server.port, "GET", "/healthz").status == 200


def test_idle_keep_alive_connection_is_closed(start_server):
    idle_timeout = 0.5
    server = start_server("--idle-timeout", str(idle_timeout))
    with RawConnection(server.port) as conn:
        conn.send(http_request("GET", "/healthz"))
        resp = conn.read_response()
        assert resp.status == 200 and resp.connection() == "keep-alive"
        idle_since = time.monotonic()
        conn.expect_closed(timeout=idle_timeout + 3)
        elapsed = time.monotonic() - idle_since
    assert elapsed >= idle_timeout * 0.5, f"closed after {elapsed:.2f}s, before the idle timeout"
    assert http_client_request(server.port, "GET", "/healthz").status == 200


def test_activity_keeps_connection_past_idle_timeout(start_server):
    server = start_server("--idle-timeout", "1")
    started = time.monotonic()
    with RawConnection(server.port) as conn:
        while time.monotonic() - started < 2.5:
            conn.send(http_request("GET", "/readyz"))
            assert conn.read_response().status == 200
            # Paces the requests; an early close here means activity did not reset the idle timer.
            assert not conn.readable(0.2), "active connection closed by the idle timeout"


OPERATIONS_HEADROOM_PER_ADDRESS = 4  # connections over --max-connections read for the operations endpoints


def test_connection_cap_rejects_extra_connection(start_server):
    server = start_server("--max-connections", "2")
    first, second = RawConnection(server.port), RawConnection(server.port)
    try:
        for conn in (first, second):
            conn.send(http_request("GET", "/healthz"))
            assert conn.read_response().status == 200
        with RawConnection(server.port) as extra:
            extra.send(http_request("GET", "/api/topics"))
            resp = extra.read_response()
            assert_json_error(resp, 503, "over_capacity")
            assert resp.connection() == "close"
            extra.expect_closed()
        # A full gateway still answers its probes and scrapes, once per connection. Before, they
        # were 503 too, and a liveness probe restarted a gateway for being full.
        for path in ("/healthz", "/readyz", "/metrics"):
            with RawConnection(server.port) as probe:
                probe.send(http_request("GET", path))
                resp = probe.read_response()
                assert resp.status == 200 and resp.connection() == "close", (path, resp.status)
                probe.expect_closed()
        # Those waiting to be read over the limit are bounded, per address too: past them, 503
        # before any request; one client holding its share leaves probes from elsewhere theirs.
        waiting = [RawConnection(server.port) for _ in range(OPERATIONS_HEADROOM_PER_ADDRESS)]
        try:
            with RawConnection(server.port) as extra:
                resp = extra.read_response()
                assert_json_error(resp, 503, "over_capacity")
            elsewhere = socket.create_connection((HOST, server.port), timeout=5, source_address=("127.0.0.2", 0))
            try:
                elsewhere.sendall(http_request("GET", "/healthz"))
                assert elsewhere.recv(4096).startswith(b"HTTP/1.1 200 "), "a probe from another address was refused"
            finally:
                elsewhere.close()
        finally:
            for conn in waiting:
                conn.close()
        second.send(http_request("GET", "/readyz"))
        assert second.read_response().status == 200, "existing connections keep working"
        first.close()

        def served_after_slot_freed():
            # Not /healthz: a connection over the limit gets that answered too.
            try:
                with RawConnection(server.port) as probe:
                    probe.send(http_request("GET", "/api/topics"))
                    return probe.read_response().status == 200
            except (AssertionError, OSError):  # turned away while the slot is still held
                return False

        wait_for(served_after_slot_freed, 5.0, "a freed connection slot was never reused")
    finally:
        first.close()
        second.close()


# ---- Graceful drain ----------------------------------------------------

IN_FLIGHT = {
    # request split into the bytes sent before the signal and the bytes sent after it
    "partial-request-line": (b"GET /rea", b"dyz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),
    "partial-head": (b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n", b"\r\n"),
}


def finish_during_drain(server, conn, partial: bytes, rest: bytes):
    """Sends `partial` before SIGTERM and `rest` once the drain has begun; returns the answer."""
    # The complete request in front proves the server has read this segment,
    # so the partial request is known to have started before the signal.
    conn.send(http_request("GET", "/healthz") + partial)
    assert conn.read_response().status == 200
    server.send_signal(signal.SIGTERM)
    wait_until_refused(server.port, timeout=5.0)
    assert server.proc.poll() is None, "exited without finishing the in-flight request"
    conn.send(rest)
    return conn.read_response()


@pytest.mark.parametrize("partial, rest", list(IN_FLIGHT.values()), ids=list(IN_FLIGHT))
def test_sigterm_completes_in_flight_request(start_server, partial, rest):
    server = start_server("--drain-timeout", "10")
    with RawConnection(server.port) as conn:
        resp = finish_during_drain(server, conn, partial, rest)
        assert resp.status == 503, resp.body
        assert resp.media_type() == "application/json"
        assert resp.json() == {"status": "draining"}
        assert resp.connection() == "close"
        conn.expect_closed()
    assert server.wait_exit(EXIT_TIMEOUT) == 0


STREAM_IN_FLIGHT = {
    # a new stream's head, split around the signal as above: its end arrives during the drain
    "sse": b"GET /api/topics/t/events HTTP/1.1\r\nHost: 127.0.0.1\r\n",
    "websocket": (b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"),
}


@pytest.mark.parametrize("partial", list(STREAM_IN_FLIGHT.values()), ids=list(STREAM_IN_FLIGHT))
def test_a_stream_asked_for_during_a_drain_gets_the_standard_503(start_server, partial):
    # A draining gateway takes no new stream; the client is told so in the error vocabulary
    # (`/readyz`'s `{"status":"draining"}` is the probe's own answer, not an error).
    server = start_server("--drain-timeout", "10")
    with RawConnection(server.port) as conn:
        resp = finish_during_drain(server, conn, partial, b"\r\n")
        assert_json_error(resp, 503, "service_unavailable")
        assert "draining" in resp.json()["detail"], resp.json()
        assert resp.connection() == "close"
        conn.expect_closed()
    assert server.wait_exit(EXIT_TIMEOUT) == 0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_drain_closes_idle_keep_alive_connection(start_server, sig):
    server = start_server("--drain-timeout", "10")
    with RawConnection(server.port) as conn:
        conn.send(http_request("GET", "/readyz"))
        resp = conn.read_response()
        assert resp.json() == {"status": "ready"} and resp.connection() == "keep-alive"
        server.send_signal(sig)
        conn.expect_closed(timeout=5.0)
    wait_until_refused(server.port, timeout=5.0)
    assert server.wait_exit(EXIT_TIMEOUT) == 0


def test_sigterm_without_connections_exits_promptly(start_server):
    server = start_server()
    server.send_signal(signal.SIGTERM)
    assert server.wait_exit(5.0) == 0
    wait_until_refused(server.port, timeout=1.0)


# ---- Logging -----------------------------------------------------------

def test_debug_log_level_logs_each_request_to_stderr(start_server):
    server = start_server("--log-level", "debug")
    counts = {"/healthz": 2, "/log-probe-alpha": 3, "/log-probe-beta": 1}

    def lines_mentioning(path):
        return sum(path in line for line in server.stderr_text().splitlines())

    baseline = {path: lines_mentioning(path) for path in counts}
    for path, times in counts.items():
        for _ in range(times):
            assert http_client_request(server.port, "GET", path).status in (200, 404)
    for path, times in counts.items():
        wait_for(lambda: lines_mentioning(path) - baseline[path] >= times, 5.0,
                 f"expected {times} stderr log lines mentioning {path}:\n{server.stderr_text()}")
    server.send_signal(signal.SIGTERM)
    assert server.wait_exit(EXIT_TIMEOUT) == 0
    assert server.stdout_after_announcement() == b"", "logs must not go to stdout"
