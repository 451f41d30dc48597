"""The compose test: deploy/compose.yaml (Redis, two gateway nodes, nginx round-robin in front of
them, no sticky sessions) started for real with podman-compose, with compose.override.yaml for
the images built here and each node's port on the loopback.

WebSocket clients subscribe to one topic on each node directly and through nginx; messages are
published through nginx (with the API key, and an Idempotency-Key so a publish cut off by the
node's stop is retried without doubling anything) before, during and after gateway-1 is stopped
with `podman-compose stop`. Its drain sends each of its clients `draining` and closes it (1001);
each reconnects through nginx after the `reconnectAfterMs` it was given, with `since` set to the
last sequence number it got, and lands on gateway-2, the node left. In the end every client must
have had every message exactly once, in order, and nothing else.

Usage: python compose_test.py   (run.sh runs it, with CONTAINERS_CONF and the RCPT_TEST_*_IMAGE
variables set; RCPT_TEST_PROJECT names the compose project and RCPT_TEST_SCRATCH a folder for its
files, so that run.sh can clean up after it too)
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.request
from pathlib import Path

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

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


# ---- Publishing -----------------------------------------------------------

published: dict[int, int] = {}   # seq -> n, the message's number in the order published
publish_lock = threading.Lock()
publish_retries = 0


def publish(n: int) -> int:
    """Publishes {"n": n} through nginx; a publish that a stopping node cut off (no answer, 502,
    503, 504) is sent again with the same Idempotency-Key, so it is published once."""
    global publish_retries
    body = json.dumps({"n": n}).encode()
    headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json",
               "Idempotency-Key": f"{TOPIC}-{n}"}
    deadline = time.monotonic() + PUBLISH_TIMEOUT
    while True:
        status, answer = http("POST", ports["nginx"], f"/api/topics/{TOPIC}/messages", body, headers)
        if status == 201:
            seq = answer["seq"]
            with publish_lock:
                if seq in published and published[seq] != n:
                    raise Failure(f"seq {seq} answered for messages {published[seq]} and {n}")
                published[seq] = n
            return seq
        if status not in (None, 502, 503, 504):
            raise Failure(f"publish {n} answered {status} {answer}")
        if time.monotonic() > deadline:
            raise Failure(f"publish {n}: last answered {status} after {PUBLISH_TIMEOUT} s of retries")
        with publish_lock:
            publish_retries += 1
        time.sleep(0.1)


class Publisher(threading.Thread):
    """Publishes one message after another until stopped: across the node's stop."""

    def __init__(self, first: int):
        super().__init__(daemon=True)
        self.next = first
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self):
        try:
            while not self.stopping.is_set():
                publish(self.next)
                self.next += 1
                time.sleep(0.02)
        except BaseException as error:  # reported by the main thread
            self.error = error

    def wait_for(self, count: int):
        """Waits until count more messages have been published."""
        target = self.next + count
        wait_until(f"{count} more publishes", lambda: self.next >= target or self.error, PUBLISH_TIMEOUT)
        if self.error:
            raise Failure(f"publisher: {self.error}")

    def stop(self) -> int:
        """Stops, and returns the number of the next message to publish."""
        self.stopping.set()
        self.join(PUBLISH_TIMEOUT + 5)
        if self.is_alive():
            raise Failure("the publisher did not stop")
        if self.error:
            raise Failure(f"publisher: {self.error}")
        return self.next


class Stopper(threading.Thread):
    """`podman-compose stop SERVICE`, which returns when the node has drained and exited."""

    def __init__(self, service: str):
        super().__init__(daemon=True)
        self.service = service
        self.error: BaseException | None = None
        self.took = None

    def run(self):
        began = time.monotonic()
        try:
            compose("stop", self.service, timeout=STOP_TIMEOUT)
        except BaseException as error:  # reported by the main thread
            self.error = error
        self.took = time.monotonic() - began


# ---- Subscribers ----------------------------------------------------------

class Client:
    def __init__(self, name: str, via: str):
        self.name = name
        self.via = via            # "gateway-1", "gateway-2" or "nginx"
        self.ws = None
        self.first = None         # the seq the first subscription started after
        self.last = None          # the last seq received (or started after)
        self.seqs: list[int] = []
        self.data: dict[int, object] = {}
        self.close_code = None
        self.reconnect_after_ms = None

    def open(self, via: str, since: int | None = None):
        self.via = via
        url = f"ws://127.0.0.1:{ports[via]}/ws?token={token}"
        self.ws = connect(url, subprotocols=[SUBPROTOCOL], open_timeout=15, close_timeout=5, proxy=None,
                          compression=None, ping_interval=None, max_size=None, legacy=True)
        if self.ws.subprotocol != SUBPROTOCOL:
            raise Failure(f"{self.name}: subprotocol {self.ws.subprotocol}")
        subscribe = {"type": "subscribe", "topic": TOPIC}
        if since is not None:
            subscribe["since"] = since
        self.ws.send(json.dumps(subscribe))
        frame = self.receive(FRAME_TIMEOUT)
        if frame.get("type") != "subscribed" or frame.get("topic") != TOPIC:
            raise Failure(f"{self.name}: answered {frame}")
        if since is None:
            self.first = self.last = frame["seq"]
        elif frame.get("resumed") is not True:
            raise Failure(f"{self.name}: a resume after {since} answered {frame}")

    def receive(self, timeout: float) -> dict:
        try:
            text = self.ws.recv(timeout=timeout)
        except TimeoutError:
            raise Silence(f"{self.name} (via {self.via}): no frame within {timeout:.1f} s, last seq {self.last}") from None
        return json.loads(text)

    def take(self, frame: dict):
        """A message (a gap or anything else fails the test)."""
        if frame.get("type") != "message" or frame.get("topic") != TOPIC:
            raise Failure(f"{self.name}: unexpected frame {frame}")
        self.seqs.append(frame["seq"])
        self.data.setdefault(frame["seq"], frame.get("data"))
        self.last = frame["seq"]

    def read_until(self, seq: int):
        deadline = time.monotonic() + FRAME_TIMEOUT
        while self.last < seq:
            self.take(self.receive(max(0.1, deadline - time.monotonic())))

    def read_until_closed(self, timeout: float):
        """Takes the messages a draining node still sends, its `draining` frame, then its close."""
        deadline = time.monotonic() + timeout
        try:
            while True:
                frame = self.receive(max(0.1, deadline - time.monotonic()))
                if frame.get("type") == "draining" and self.reconnect_after_ms is None:
                    self.reconnect_after_ms = frame.get("reconnectAfterMs")
                    if not isinstance(self.reconnect_after_ms, int) or not 0 <= self.reconnect_after_ms <= 1000:
                        raise Failure(f"{self.name}: {frame}")
                else:
                    self.take(frame)
        except ConnectionClosed as closed:
            self.close_code = closed.rcvd.code if closed.rcvd else None
            self.ws = None

    def still_open(self) -> bool:
        """Whether the connection stays open, taking the messages due (once publishing stopped)."""
        try:
            while True:
                self.take(self.receive(0.5))
        except Silence:
            return True
        except ConnectionClosed as closed:
            self.close_code = closed.rcvd.code if closed.rcvd else None
            self.ws = None
            return False


token = make_token(token_secret, {"sub": "compose-test", "exp": int(time.time()) + 3600, "topics": [TOPIC]})


# ---- The test -------------------------------------------------------------

def run():
    step(f"up: project {PROJECT}, nginx on 127.0.0.1:{ports['nginx']}, "
         f"gateway-1 on :{ports['gateway-1']}, gateway-2 on :{ports['gateway-2']}")
    compose("up", "--detach", "--no-build", timeout=180)
    services = ("redis", "gateway-1", "gateway-2", "nginx")
    # podman 4.3 cannot wait for `condition: service_healthy` (podman-compose says so and starts
    # the nodes at once): a node that starts before Redis answers reports "redis":"down" in
    # /readyz and connects when Redis does, so the test waits for "up" on each node.
    for name in ("gateway-1", "gateway-2"):
        wait_until(f"{name} /readyz with Redis up", lambda name=name: ready(ports[name]), READY_TIMEOUT, services)
    wait_until("/readyz through nginx", lambda: http("GET", ports["nginx"], "/readyz", timeout=3)[0] == 200,
               READY_TIMEOUT, services)
    # The health checks of compose.yaml (redis) and of the image (HEALTHCHECK), which podman
    # cannot time without systemd, run once by hand.
    for name in ("redis", "gateway-1", "gateway-2"):
        podman("healthcheck", "run", container(name))

    status, _ = http("POST", ports["nginx"], f"/api/topics/{TOPIC}/messages", b"{}",
                     {"Content-Type": "application/json"})
    if status != 401:
        raise Failure(f"a publish without the API key answered {status}, not 401")

    step("subscribe: 2 clients on each node directly, and one through nginx on each")
    clients = [Client("g1-a", "gateway-1"), Client("g1-b", "gateway-1"),
               Client("g2-a", "gateway-2"), Client("g2-b", "gateway-2")]
    for client in clients:
        client.open(client.via)
    # nginx picks the node, round-robin in each of its workers: open connections through it until
    # one has landed on each node, telling where by the nodes' WebSocket connection counts.
    node_of = {}
    extra = []
    for attempt in range(12):
        counts = {name: websockets_on(name) for name in ("gateway-1", "gateway-2")}
        client = Client(f"lb-{attempt}", "nginx")
        client.open("nginx")
        landed = [name for name in counts if websockets_on(name) == counts[name] + 1]
        if len(landed) != 1:
            raise Failure(f"a WebSocket through nginx: connection counts went from {counts} to "
                          f"{ {name: websockets_on(name) for name in counts} }")
        if landed[0] in node_of.values():
            extra.append(client)
            continue
        node_of[client.name] = landed[0]
        clients.append(client)
        if len(node_of) == 2:
            break
    else:
        raise Failure(f"12 WebSockets through nginx all landed on {set(node_of.values())}")
    for client in extra:
        client.ws.close()
    for client in clients:
        if client.first != 0:
            raise Failure(f"{client.name}: the new topic {TOPIC} is at seq {client.first}")
    wait_until("the extra connections closed", lambda: (websockets_on("gateway-1"), websockets_on("gateway-2")) == (3, 3),
               FRAME_TIMEOUT)

    step("publish 30 through nginx")
    for n in range(1, 31):
        publish(n)
    for client in clients:
        client.read_until(30)

    step("stop gateway-1 while publishing; its clients resume through nginx as it drains")
    resumes_before = metric(ports["gateway-2"], 'receptionist_resumes_total{kind="topic"}')
    publisher = Publisher(31)
    publisher.start()
    publisher.wait_for(10)
    stopper = Stopper("gateway-1")
    stopper.start()
    # gateway-1's clients, direct and through nginx: the drain tells each `draining`, closes it with
    # 1001 "going away", and the client comes back through nginx after reconnectAfterMs with
    # `since`, while gateway-1 is still draining (its listener closed, so nginx tries gateway-2).
    closed = [client for client in clients if node_of.get(client.name, client.via) == "gateway-1"]
    away = 0
    for client in closed:
        client.read_until_closed(STOP_TIMEOUT)
        if client.close_code != 1001 or client.reconnect_after_ms is None:
            raise Failure(f"{client.name} via {client.via}: closed with {client.close_code}, "
                          f"reconnectAfterMs {client.reconnect_after_ms}")
        closed_at = publisher.next
        time.sleep(client.reconnect_after_ms / 1000)   # as the frame asks: spreads the reconnects
        # Messages published while it is away come back to it from the history.
        publisher.wait_for(3)
        client.open("nginx", since=client.last)
        away += publisher.next - closed_at
    stopper.join(STOP_TIMEOUT + 5)
    if stopper.is_alive() or stopper.error:
        raise Failure(f"podman-compose stop gateway-1: {stopper.error or 'still running'}")
    gateway_1 = state("gateway-1")
    if gateway_1["Running"] or gateway_1["ExitCode"] != 0:
        raise Failure(f"gateway-1 after the stop: running {gateway_1['Running']}, exit code {gateway_1['ExitCode']}")
    if stopper.took >= 25:
        raise Failure(f"the stop took {stopper.took:.0f} s: the drain did not end it")
    stop_took = stopper.took
    resumes = metric(ports["gateway-2"], 'receptionist_resumes_total{kind="topic"}') - resumes_before
    if resumes != len(closed):
        raise Failure(f"gateway-2 counted {resumes:g} topic resumes, not {len(closed)}")
    if websockets_on("gateway-2") != len(clients):
        raise Failure(f"gateway-2 has {websockets_on('gateway-2'):g} WebSocket connections, not {len(clients)}")
    publisher.wait_for(10)
    after = publisher.stop()
    for n in range(after, after + 10):
        publish(n)
    total = after + 9

    step(f"check: {total} messages, every client every seq once, in order")
    if sorted(published) != list(range(1, total + 1)) or sorted(published.values()) != list(range(1, total + 1)):
        raise Failure(f"the publishes were answered seqs {sorted(published)}")
    for client in clients:
        client.read_until(total)
        if not client.still_open():
            raise Failure(f"{client.name}: closed ({client.close_code}) after the resume")
        if client.seqs != list(range(1, total + 1)):
            missing = sorted(set(range(1, total + 1)) - set(client.seqs))
            doubled = sorted({seq for seq in client.seqs if client.seqs.count(seq) > 1})
            raise Failure(f"{client.name}: {len(client.seqs)} messages, missing {missing[:20]}, "
                          f"doubled {doubled[:20]}, in order: {client.seqs == sorted(client.seqs)}")
        wrong = [seq for seq, data in client.data.items() if data != {"n": published[seq]}]
        if wrong:
            raise Failure(f"{client.name}: seqs {wrong[:10]} carry other messages than published")
        client.ws.close()
    if http("GET", ports["nginx"], "/readyz", timeout=5)[0] != 200:
        raise Failure("/readyz through nginx with one node left")
    print(f"compose: {len(clients)} clients, {total} messages, {len(closed)} resumed on gateway-2 while "
          f"gateway-1 drained (stop {stop_took:.1f} s, exit 0; {away} messages published while they were away), "
          f"{publish_retries} publish retries", flush=True)


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


def main():
    # timeout(1) stops the test with SIGTERM (sent twice: to the process and to its group): tear
    # the stack down all the same, and let no second SIGTERM cut the teardown short.
    def stopped(*_):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        sys.exit(143)

    signal.signal(signal.SIGTERM, stopped)
    passed = False
    try:
        run()
        passed = True
    except Failure as failure:
        print(f"FAIL: compose: {failure}", file=sys.stderr)
        show_logs()
    except Exception:
        traceback.print_exc()
        print("FAIL: compose: an unexpected error", file=sys.stderr)
        show_logs()
    finally:
        step("down")
        try:
            compose("down", "--timeout", "10", timeout=120)
            left = podman("ps", "--all", "--quiet", "--filter", f"label=io.podman.compose.project={PROJECT}")
            if left:
                raise Failure(f"containers left after down: {left.split()}")
            networks = podman("network", "ls", "--quiet", "--filter", f"label=io.podman.compose.project={PROJECT}")
            if networks:
                raise Failure(f"networks left after down: {networks.split()}")
        except Failure as failure:
            print(f"FAIL: compose: {failure}", file=sys.stderr)
            passed = False
        shutil.rmtree(scratch, ignore_errors=True)
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    main()
