"""The `receptionist serve` process for the end-to-end tests: where the binary is, starting it on an
ephemeral port and waiting for its announcement, and stopping it, never leaving it running.

conftest.py re-exports every name here, so `from conftest import launch_server` works as before.
"""

from __future__ import annotations

import os
import re
import resource
import select
import signal
import subprocess
import threading
import time
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

def room_for_descriptors(count: int) -> None:
    """Raises this process's soft limit on open files to hold `count` (within the hard limit, at
    most 20,000): a test's many sockets, and a gateway it starts afterwards, which inherits it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < count:
        resource.setrlimit(resource.RLIMIT_NOFILE, (20000 if hard == resource.RLIM_INFINITY else min(hard, 20000), hard))


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
                  public: Path | None = None, preexec=None) -> ServerProcess:
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
                                stdout=subprocess.PIPE, stderr=stderr_file, bufsize=0, preexec_fn=preexec)
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

    def __call__(self, *args, env: dict | None = None, public: Path | None = None, preexec=None) -> ServerProcess:
        """`preexec` runs in the child before the gateway does (to set its resource limits)."""
        workdir = self.base / f"server-{len(self.servers)}"
        server = launch_server(workdir, args, env=env, public=public, preexec=preexec)
        self.servers.append(server)
        return server

    def stop_all(self) -> None:
        for server in self.servers:
            server.stop()
            # Shown by pytest only when a test fails.
            tail = server.stderr_text().splitlines()[-40:]
            print(f"--- {' '.join(server.argv[1:])} (exit {server.proc.returncode}) stderr tail ---")
            print("\n".join(tail))
