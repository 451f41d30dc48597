"""What an operator configures is what runs (README.md, "Serving" and "Configuration"): a flag the
`--config` file sets is turned off by its variable saying no; a bad `--api-key-file`, `--data-dir`,
`--host` or value is refused at start with a message naming it, whatever else is given; list
variables take several values; SIGHUP drains like SIGTERM; a static file too large to serve is
named at start; and `help` works with RECEPTIONIST_* variables set, as the container image sets them.

A refusal is checked by starting the real process: it must exit non-zero before it announces that
it listens. A gateway that starts instead is caught by its announcement and stopped at once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import websockets

from conftest import (
    DEFAULT_INDEX,
    HOST,
    LISTENING_LINE,
    STARTUP_TIMEOUT,
    _read_first_line,
    api,
    http_client_request,
    json_ok,
    server_binary,
    wait_for,
)
from wsclient import RawWebSocket, connect, recv_json, subscribe, unique

KEY = "operations-key"
EXIT_TIMEOUT = 10.0          # a refused start, or a help command, is over well within this


# ---- Starting a process that should be refused ----------------------------------

@dataclass
class Attempt:
    """How a `receptionist serve` start ended: refused (exit code and stderr) or listening."""
    returncode: int | None
    stderr: str
    listening: bool


def attempt_start(tmp_path: Path, args: list[str], env: dict[str, str] | None = None,
                  cwd: Path | None = None) -> Attempt:
    """Run `receptionist serve ARGS` until it exits or announces that it listens.

    A process that listens is killed at once (it must not run on); the caller asserts on the
    result. No RECEPTIONIST_* variable of the test's own environment reaches the process.
    """
    public = tmp_path / "public"
    public.mkdir(exist_ok=True)
    (public / "index.html").write_bytes(DEFAULT_INDEX)
    argv = [str(server_binary()), "serve", "--port", "0", "--public", str(public), *args]
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("RECEPTIONIST_")}
    child_env.update(env or {})
    stderr_path = tmp_path / f"attempt-{len(list(tmp_path.glob('attempt-*')))}.stderr"
    with open(stderr_path, "wb") as stderr_file:
        proc = subprocess.Popen(argv, cwd=cwd or tmp_path, env=child_env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=stderr_file, bufsize=0)
    try:
        line, _, _ = _read_first_line(proc, STARTUP_TIMEOUT)
        listening = line is not None and LISTENING_LINE.search(line.decode("utf-8", "replace")) is not None
        if proc.poll() is None:
            if not listening:
                # Neither exited nor listening: give it the exit bound, then stop it.
                try:
                    proc.wait(timeout=EXIT_TIMEOUT)
                except subprocess.TimeoutExpired:
                    pass
            if proc.poll() is None:
                proc.kill()
        returncode = proc.wait(timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
        proc.stdout.close()
    return Attempt(returncode if not listening else None,
                   stderr_path.read_text(encoding="utf-8", errors="replace"), listening)


def assert_refused(attempt: Attempt, *expected: str) -> None:
    """The process exited non-zero without listening, and its stderr says each of `expected`."""
    assert not attempt.listening, f"the gateway started and listened; stderr:\n{attempt.stderr}"
    assert attempt.returncode not in (0, None, -4, -5, 132, 133), \
        f"exit {attempt.returncode} (expected a refusal, not a success or a trap); stderr:\n{attempt.stderr}"
    for text in expected:
        assert text in attempt.stderr, f"{text!r} not in stderr:\n{attempt.stderr}"


def upgrade(port: int, path: str = "/ws", origin: str | None = None) -> int:
    """The status answering a WebSocket upgrade request (101 when it is taken)."""
    extra = [("Origin", origin)] if origin else []
    subprotocols = () if path == "/ws/echo" else ("receptionist.v1",)
    with RawWebSocket(port) as ws:
        return ws.handshake(path=path, subprotocols=subprotocols, extra=extra).status


# ---- Flags: the environment turns off what the file turns on ---------------------

@pytest.mark.parametrize("flag, variable, no", [
    ("demo", "RECEPTIONIST_DEMO", "0"),
    ("enable-echo", "RECEPTIONIST_ENABLE_ECHO", "false"),
])
def test_a_flag_the_file_turns_on_is_turned_off_by_its_variable_saying_no(start_server, tmp_path, flag, variable, no):
    """The file says `demo: true` (or `enable-echo: true`), the deployment's environment says
    RECEPTIONIST_DEMO=0: the environment wins over the file, so the demo store is not created (the
    echo endpoint not served). Before the fix a flag's variable could only turn it on: the file's
    `true` stood, and the `tiles` store was animated (`/ws/echo` served) in production."""
    config = tmp_path / "gateway.yaml"
    config.write_text(f"{flag}: true\n")

    def enabled(port: int) -> bool:
        if flag == "demo":
            names = [store["name"] for store in json_ok(api(port, "GET", "/api/stores"))["stores"]]
            return "tiles" in names
        return upgrade(port, "/ws/echo") == 101

    control = start_server("--config", str(config))
    assert enabled(control.port), f"the file's `{flag}: true` did not apply without {variable}"
    turned_off = start_server("--config", str(config), env={variable: no})
    assert not enabled(turned_off.port), f"{variable}={no} did not turn off the file's `{flag}: true`"


# ---- Refused at start ------------------------------------------------------------

@pytest.mark.parametrize("content, expected", [
    ("", "holds no key"),
    ("# keys go here\n\n", "holds no key"),
    (None, "cannot read"),
], ids=["empty", "comments-only", "directory"])
def test_an_api_key_file_without_a_key_is_refused(tmp_path, content, expected):
    """`--api-key-file` naming an empty file, one of comments only, or a directory: the start stops
    with a message that the file holds no key or cannot be read, and nothing listens. Before the fix
    the gateway started with no key at all: anyone reaching the port could publish and mutate."""
    keys = tmp_path / "keys"
    if content is None:
        keys.mkdir()
    else:
        keys.write_text(content)
    assert_refused(attempt_start(tmp_path, ["--api-key-file", str(keys)]), expected, str(keys))


ROOT_FILES = [Path("/lock"), Path("/receptionist.sqlite3"), Path("/receptionist.sqlite3-wal"),
              Path("/receptionist.sqlite3-shm"), Path("/receptionist.sqlite3-journal")]


def test_an_empty_data_dir_is_refused(tmp_path):
    """`--data-dir "$DATA_DIR"` with the variable unset: the start stops naming --data-dir. Before
    the fix the disk engine took "" for the filesystem root and put its lock and database there
    (/lock, /receptionist.sqlite3). Should a gateway start, it is stopped at once and what it made
    at the root is removed."""
    existing = {path for path in ROOT_FILES if path.exists()}
    try:
        attempt = attempt_start(tmp_path, ["--data-dir", ""], cwd=tmp_path)
    finally:
        created = [path for path in ROOT_FILES if path.exists() and path not in existing]
        for path in created:
            path.unlink()
    assert not created, f"the gateway created {[str(path) for path in created]} at the filesystem root (removed)"
    assert_refused(attempt, "--data-dir")


@pytest.mark.parametrize("host", ["999.1.1.1", "not-an-ip", ""])
def test_a_host_that_is_not_an_address_is_refused_without_a_key_too(tmp_path, host):
    """`--host 999.1.1.1` (a typo), `not-an-ip` or "" is refused with a message naming --host. Before
    the fix it was refused only with an API key: without one the gateway quietly listened on
    127.0.0.1 and exited 0 on SIGTERM, so the typo was never reported."""
    assert_refused(attempt_start(tmp_path, ["--host", host]), "--host")


def test_host_localhost_listens_on_loopback(tmp_path):
    """`--host localhost` starts and serves on 127.0.0.1. Before the fix it was taken for loopback
    by the key check but could not be bound: `Error: parse address localhost:0`, exit 1."""
    public = tmp_path / "public"
    public.mkdir()
    (public / "index.html").write_bytes(DEFAULT_INDEX)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECEPTIONIST_")}
    stderr_path = tmp_path / "stderr.log"
    with open(stderr_path, "wb") as stderr_file:
        proc = subprocess.Popen([str(server_binary()), "serve", "--host", "localhost", "--port", "0",
                                 "--public", str(public)], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=stderr_file, bufsize=0)
    try:
        line, _, problem = _read_first_line(proc, STARTUP_TIMEOUT)
        match = LISTENING_LINE.fullmatch(line.decode("utf-8", "replace")) if line is not None else None
        assert match, f"no announcement on 127.0.0.1 ({problem or line!r}); stderr:\n{stderr_path.read_text()}"
        port = int(match.group(1))
        assert http_client_request(port, "GET", "/healthz").status == 200
        assert http_client_request(port, "GET", "/").body == DEFAULT_INDEX
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=EXIT_TIMEOUT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
        proc.stdout.close()


@pytest.mark.parametrize("args, expected", [
    (["--fsync", "sometimes"], "--fsync"),
    (["--fsync-interval", "nan"], "--fsync-interval"),
    (["--api-key", ""], "--api-key"),
    (["--allowed-origin", "app.example.com"], "--allowed-origin"),
], ids=["fsync-without-data-dir", "fsync-interval-nan", "empty-api-key", "origin-without-scheme"])
def test_a_bad_value_is_refused_whatever_else_is_given(tmp_path, args, expected):
    """A value is checked even when the option it serves is not in use: `--fsync sometimes` without
    --data-dir, `--fsync-interval nan`, an empty `--api-key`, an origin with no scheme. Before the fix
    each started: the mistake surfaced only when --data-dir was added later (or never: an empty key
    was a key anyone could send as `Bearer `, and `app.example.com` matched no browser's Origin)."""
    assert_refused(attempt_start(tmp_path, args), expected)


# ---- Lists in the environment ----------------------------------------------------

def test_the_allowed_origin_variable_lists_several_origins(start_server):
    """RECEPTIONIST_ALLOWED_ORIGIN="https://a.example,https://b.example" allows both origins. Before
    the fix the list was taken as one origin that matched no browser: both were refused 403."""
    server = start_server(env={"RECEPTIONIST_API_KEY": KEY,
                               "RECEPTIONIST_ALLOWED_ORIGIN": "https://a.example,https://b.example"})
    for origin in ("https://a.example", "https://b.example"):
        assert upgrade(server.port, origin=origin) == 101, f"Origin {origin} refused"
        resp = http_client_request(server.port, "GET", "/api/topics", headers={"Origin": origin})
        assert resp.status == 200 and resp.header("Access-Control-Allow-Origin") == origin, resp.headers
    assert upgrade(server.port, origin="https://evil.example") == 403


def test_an_origin_given_with_its_default_port_matches_the_browsers(start_server):
    """`--allowed-origin https://c.example:443`: a browser sends `Origin: https://c.example`, and it is
    allowed. Before the fix the two were compared as text and the browser was refused 403."""
    server = start_server("--api-key", KEY, "--allowed-origin", "https://c.example:443")
    assert upgrade(server.port, origin="https://c.example") == 101
    assert upgrade(server.port, origin="https://c.example:8443") == 403


# ---- Signals ------------------------------------------------------------------------

def test_sighup_drains_like_sigterm(start_server):
    """SIGHUP (a closed terminal, a supervisor's reload) drains: a WebSocket client is told
    `draining` and closed with 1001, and the process exits 0 within the drain timeout. Before the
    fix SIGHUP killed the process at once: no hint, the client saw 1006, the exit was by signal."""
    drain = 2.0
    server = start_server("--drain-timeout", str(drain))
    with connect(server.port) as ws:
        assert subscribe(ws, topic=unique("hup"))["type"] == "subscribed"
        signalled = time.monotonic()
        server.send_signal(signal.SIGHUP)
        hint = None
        with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
            while True:
                frame = recv_json(ws, timeout=drain + 3)
                if frame["type"] == "draining":
                    hint = frame
    assert hint is not None, "no draining message before the close"
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001, closed.value
    assert server.wait_exit(drain + 3) == 0
    assert time.monotonic() - signalled < drain + 3


# ---- Static files -------------------------------------------------------------------

def test_a_static_file_too_large_to_serve_is_named_at_start(start_server, tmp_path):
    """A file over 16 MiB in --public is not served (404), and a warning at start names it, so the
    operator learns why the page's video is missing. Before the fix it was left out silently: 404,
    and nothing logged at any level."""
    public = tmp_path / "site"
    public.mkdir()
    (public / "index.html").write_bytes(DEFAULT_INDEX)
    with open(public / "big-video.bin", "wb") as big:
        big.truncate(16 * 1024 * 1024 + 1)
    server = start_server(public=public)
    assert http_client_request(server.port, "GET", "/big-video.bin").status == 404
    assert http_client_request(server.port, "GET", "/").body == DEFAULT_INDEX

    def warned():
        return any("static file not served" in line and "big-video.bin" in line
                   for line in server.stderr_text().splitlines())
    wait_for(warned, 5, f"no warning naming big-video.bin; stderr:\n{server.stderr_text()}")


# ---- Help -----------------------------------------------------------------------------

def test_help_works_with_receptionist_variables_set(tmp_path):
    """In the container image RECEPTIONIST_HOST, _PORT and _PUBLIC are set; `receptionist help serve`
    and `receptionist serve --help` must print the help and exit 0. Before the fix the variables were
    added as serve options to every command line: `help serve` failed with `Unknown option '--host'`
    (exit 64)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECEPTIONIST_")}
    env.update({"RECEPTIONIST_HOST": HOST, "RECEPTIONIST_PORT": "8080",
                "RECEPTIONIST_PUBLIC": str(tmp_path), "RECEPTIONIST_DEMO": "1"})
    for command in (["help", "serve"], ["serve", "--help"]):
        result = subprocess.run([str(server_binary()), *command], capture_output=True, env=env, cwd=tmp_path,
                                timeout=EXIT_TIMEOUT, stdin=subprocess.DEVNULL)
        out = result.stdout.decode("utf-8", "replace")
        assert result.returncode == 0, f"{command}: exit {result.returncode}; stderr:\n{result.stderr.decode()}"
        assert "USAGE: receptionist serve" in out and "--port" in out and "--api-key-file" in out, out[:500]
