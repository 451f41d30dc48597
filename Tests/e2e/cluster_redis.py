"""A redis-server for the cluster tests that need to reach into it (test_cluster_async.py,
test_cluster_resume.py, test_cluster_epochs.py, test_cluster_shards.py): one that takes `DEBUG`
commands from loopback, put to sleep for real with `DEBUG SLEEP`; nodes started on it; raw
commands sent to it, and its clock.
"""

import socket

import pytest

from conftest import HOST, wait_for
from test_cluster import RedisServer, readiness


@pytest.fixture
def redis(tmp_path):
    """A redis-server that takes `DEBUG` commands from loopback (off by default since Redis 7)."""
    directory = tmp_path / "redis"
    directory.mkdir()
    server = RedisServer(directory, ("--enable-debug-command", "local"))
    yield server
    server.stop()


def redis_sleep(redis, seconds: float) -> socket.socket:
    """Sends `DEBUG SLEEP` on a connection of its own and returns once Redis is asleep: a PING
    on another connection goes unanswered. Close the returned socket when done."""
    sleeper = socket.create_connection((HOST, redis.port), timeout=30)
    sleeper.sendall(f"DEBUG SLEEP {seconds}\r\n".encode())

    def asleep() -> bool:
        try:
            probe = socket.create_connection((HOST, redis.port), timeout=1)
        except TimeoutError:
            return True  # the backlog is full: nobody is accepting, so Redis sleeps
        with probe:
            probe.sendall(b"PING\r\n")
            probe.settimeout(0.2)
            try:
                return not probe.recv(64).startswith(b"+PONG")
            except socket.timeout:
                return True

    wait_for(asleep, 5, "Redis did not go to sleep")
    return sleeper


def start_node(start_server, redis, *args):
    node = start_server("--engine", "redis", "--redis-url", redis.url, *args)
    wait_for(lambda: readiness(node.port).get("redis") == "up", 10, "node never reached Redis")
    return node


def redis_call(redis, *args: str):
    """One command on a fresh connection; the reply's first line (enough for TIME's first
    element too, read whole below)."""
    with socket.create_connection((HOST, redis.port), timeout=5) as sock:
        parts = [f"*{len(args)}\r\n".encode()] + [f"${len(a.encode())}\r\n{a}\r\n".encode() for a in args]
        sock.sendall(b"".join(parts))
        data = b""
        while not data.endswith(b"\r\n") or data.count(b"\r\n") < (5 if args[0] == "TIME" else 1):
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
        return data


def redis_milliseconds(redis) -> int:
    """Redis's clock, which its stream IDs (and so the age trimming) follow."""
    lines = redis_call(redis, "TIME").split(b"\r\n")
    return int(lines[2]) * 1000 + int(lines[4]) // 1000
