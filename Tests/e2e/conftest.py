"""Shared fixtures and client utilities for the Receptionist end-to-end tests.

The suite drives the real `receptionist` binary. Its location comes from the
RECEPTIONIST_BIN environment variable, defaulting to `.build/debug/receptionist`
under the repository root.

The server process is managed in server_process.py and the HTTP clients are in http_client.py;
their names are re-exported here, so `from conftest import X` works for all of them.
"""

from __future__ import annotations

import json
import socket
import time

import pytest

from http_client import (  # noqa: F401  (re-exported: the tests import these from conftest)
    ConnectionClosed,
    RawConnection,
    Response,
    assert_json_error,
    assert_standard_headers,
    curl,
    http_client_request,
    http_request,
    parse_head,
    read_http_client_response,
)
from server_process import (  # noqa: F401  (re-exported: the tests import these from conftest)
    DEFAULT_BINARY,
    DEFAULT_INDEX,
    HOST,
    IO_TIMEOUT,
    LISTENING_LINE,
    REPO_ROOT,
    STARTUP_TIMEOUT,
    ServerFactory,
    ServerProcess,
    _read_first_line,
    launch_server,
    room_for_descriptors,
    server_binary,
)


# ---- Servers -----------------------------------------------------------

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
        except TimeoutError:
            # No answer within the probe's second (seen on a loaded machine as the listener
            # closed): neither accepted nor refused yet; the next probe tells.
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
