"""A redis-server for the cluster tests that need to reach into it (test_cluster_async.py,
test_cluster_resume.py, test_cluster_epochs.py, test_cluster_shards.py, test_cluster_trims.py,
test_redis_queue_limits.py): one that takes `DEBUG` commands from loopback, put to sleep for
real with `DEBUG SLEEP`; nodes started on it; raw commands sent to it, and its clock.
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
    """One command on a connection of its own; the whole reply, decoded (arrays as lists)."""
    with socket.create_connection((HOST, redis.port), timeout=5) as sock:
        sock.sendall(f"*{len(args)}\r\n".encode()
                     + b"".join(f"${len(a.encode())}\r\n{a}\r\n".encode() for a in args))
        with sock.makefile("rb") as reader:
            return _reply(reader)


def _reply(reader):
    line = reader.readline()
    assert line.endswith(b"\r\n"), f"Redis closed the connection mid-reply: {line!r}"
    kind, rest = line[:1], line[1:-2]
    if kind == b"-":
        raise AssertionError(f"Redis refused the command: {rest.decode()}")
    if kind == b"+":
        return rest.decode()
    if kind == b":":
        return int(rest)
    if kind == b"$":
        return None if int(rest) < 0 else reader.read(int(rest) + 2)[:-2].decode()
    if kind == b"*":
        return None if int(rest) < 0 else [_reply(reader) for _ in range(int(rest))]
    raise AssertionError(f"unexpected reply {line!r}")


def redis_milliseconds(redis) -> int:
    """Redis's clock, which its stream IDs (and so the age trimming) follow."""
    seconds, microseconds = redis_call(redis, "TIME")
    return int(seconds) * 1000 + int(microseconds) // 1000
