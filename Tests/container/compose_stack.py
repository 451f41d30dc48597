"""The compose test's stack: podman-compose and podman invoked for the project, the ports, the API
key and token secret, and the HTTP helpers that poll the nodes (readiness, metrics, state, logs).

Importing it checks the environment run.sh sets and makes the scratch folder, as compose_test.py
did before it was split.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILES = ["deploy/compose.yaml", "Tests/container/compose.override.yaml"]
PROJECT = os.environ.get("RCPT_TEST_PROJECT") or f"receptionist-compose-{os.getpid()}"
TOPIC = f"compose-{secrets.token_hex(4)}"
SUBPROTOCOL = "receptionist.v1"

READY_TIMEOUT = 60      # every container up and /readyz answering, through nginx and on each node
FRAME_TIMEOUT = 15      # the messages a client is due, once published
STOP_TIMEOUT = 60       # podman-compose stop: the drain takes at most RECEPTIONIST_DRAIN_TIMEOUT (10 s)
PUBLISH_TIMEOUT = 30    # one publish, retried through a node's stop
# Plain HTTP and WebSocket, never a proxy the environment may name.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))

for variable in ("CONTAINERS_CONF", "RCPT_TEST_GATEWAY_IMAGE", "RCPT_TEST_REDIS_IMAGE", "RCPT_TEST_NGINX_IMAGE"):
    if not os.environ.get(variable):
        sys.exit(f"FAIL: {variable} is not set (run Tests/container/run.sh)")

started = time.monotonic()
scratch = Path(tempfile.mkdtemp(prefix="receptionist-compose-", dir=os.environ.get("RCPT_TEST_SCRATCH")))
compose_log = scratch / "compose.log"


class Failure(Exception):
    pass


class Silence(Failure):
    """No frame within the time a client waited."""


def step(text):
    print(f"== compose: {text} ({time.monotonic() - started:.0f} s)", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def make_token(secret: str, claims: dict) -> str:
    """An HS256 JWT, signed the way a backend signs subscription tokens (docs/SECURITY.md)."""
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = b64url(json.dumps(claims).encode())
    signature = hmac.new(secret.encode(), f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{b64url(signature)}"


# ---- The stack ------------------------------------------------------------

api_key = secrets.token_hex(32)
token_secret = secrets.token_hex(32)
ports = {"nginx": free_port(), "gateway-1": free_port(), "gateway-2": free_port()}
# The key file is bind-mounted into the nodes, which run as uid 10001: it must be readable by them.
api_key_file = scratch / "api-key"
api_key_file.write_text(api_key + "\n")
api_key_file.chmod(0o644)

ENV = dict(os.environ)
ENV.pop("COMPOSE_PROJECT_NAME", None)
ENV.update({
    # deploy/compose.yaml's own variables, as a user sets them.
    "RECEPTIONIST_TOKEN_SECRET": token_secret,
    "RECEPTIONIST_API_KEY_FILE": str(api_key_file),
    "RECEPTIONIST_HTTP_PORT": str(ports["nginx"]),
    # compose.override.yaml's.
    "RCPT_TEST_GATEWAY_1_PORT": str(ports["gateway-1"]),
    "RCPT_TEST_GATEWAY_2_PORT": str(ports["gateway-2"]),
})


def compose(*args, timeout=120):
    """podman-compose with both files; its output goes to compose.log, shown on a failure."""
    command = [sys.executable, "-m", "podman_compose", "-p", PROJECT]
    for path in COMPOSE_FILES:
        command += ["-f", path]
    command += list(args)
    with compose_log.open("a") as log:
        log.write(f"$ podman-compose {' '.join(args)}\n")
        log.flush()
        try:
            result = subprocess.run(command, cwd=ROOT, env=ENV, stdout=log, stderr=subprocess.STDOUT,
                                    timeout=timeout)
        except subprocess.TimeoutExpired:
            raise Failure(f"podman-compose {' '.join(args)} took more than {timeout} s") from None
    if result.returncode != 0:
        raise Failure(f"podman-compose {' '.join(args)} exited {result.returncode}")


def podman(*args, timeout=30) -> str:
    result = subprocess.run(["podman", *args], env=ENV, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise Failure(f"podman {' '.join(args)}: {result.stderr.strip()}")
    return result.stdout.strip()


def container(service: str) -> str:
    names = podman("ps", "--all", "--format", "{{.Names}}", "--filter", f"label=io.podman.compose.project={PROJECT}",
                   "--filter", f"label=io.podman.compose.service={service}").split()
    if len(names) != 1:
        raise Failure(f"service {service} has containers {names}, not one")
    return names[0]


def state(service: str) -> dict:
    return json.loads(podman("inspect", "--format", "{{json .State}}", container(service)))


def http(method: str, port: int, path: str, body: bytes | None = None, headers=None, timeout=10):
    """(status, parsed JSON body or None); None for the status when the connection failed."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method=method,
                                     headers=headers or {})
    try:
        with OPENER.open(request, timeout=timeout) as response:
            status, payload = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, payload = error.code, error.read()
    except (urllib.error.URLError, OSError):
        return None, None
    try:
        return status, json.loads(payload)
    except ValueError:
        return status, None


def wait_until(what: str, condition, timeout: float, services=()):
    """Polls condition() until it holds; fails at the deadline or as soon as a service has exited."""
    deadline = time.monotonic() + timeout
    while not condition():
        for service in services:
            if not state(service)["Running"]:
                raise Failure(f"{service} is not running while waiting for {what}")
        if time.monotonic() > deadline:
            raise Failure(f"{what}: not within {timeout} s")
        time.sleep(0.2)


def ready(port: int) -> bool:
    status, body = http("GET", port, "/readyz", timeout=3)
    return status == 200 and isinstance(body, dict) and body.get("redis") == "up"


def metric(port: int, line_prefix: str) -> float:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics")
    with OPENER.open(request, timeout=5) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(line_prefix + " "):
                return float(line.split()[-1])
    raise Failure(f"no {line_prefix} in /metrics on port {port}")


def websockets_on(service: str) -> float:
    return metric(ports[service], 'receptionist_connections{transport="websocket"}')


def show_logs():
    print("-- podman-compose output:", file=sys.stderr)
    lines = [line for line in compose_log.read_text().splitlines() if "systemd" not in line]
    print("\n".join(lines[-40:]), file=sys.stderr)
    for service in ("redis", "gateway-1", "gateway-2", "nginx"):
        try:
            name = container(service)
            logs = subprocess.run(["podman", "logs", "--tail", "20", name], env=ENV, capture_output=True,
                                  text=True, timeout=30)
            print(f"-- {service} log:\n{logs.stdout}{logs.stderr}", file=sys.stderr)
        except (Failure, subprocess.SubprocessError):
            pass
