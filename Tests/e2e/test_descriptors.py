"""Out of file descriptors (docs/SECURITY.md): the gateway raises its soft open-file limit to the
hard one, warns when --max-connections is beyond it, and past it answers new connections 503
(`over_capacity`) before closing them, counting them as refused (`descriptors`) and saying so in
its log, instead of resetting them in silence. Once connections go, it serves again."""

from __future__ import annotations

import re
import resource
import socket

from conftest import HOST, wait_for
from http_client import http_client_request, http_request

LIMIT = 100         # the open-file limit the gateway runs under
HELD = 150          # idle connections held: more than the limit lets it accept
TIMEOUT = 10.0      # each answer comes within this


def limited(soft: int, hard: int):
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def open_files_limit(pid: int) -> tuple[int, int]:
    with open(f"/proc/{pid}/limits") as limits:
        line = next(line for line in limits if line.startswith("Max open files"))
    soft, hard = re.findall(r"\d+", line)[:2]
    return int(soft), int(hard)


def read_until_closed(sock: socket.socket) -> bytes:
    sock.settimeout(TIMEOUT)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def refusals(port: int) -> int:
    text = http_client_request(port, "GET", "/metrics").body.decode()
    match = re.search(r'^receptionist_refusals_total\{reason="descriptors"\} (\d+)', text, re.M)
    assert match, "no descriptors refusal series"
    return int(match.group(1))


def test_past_the_open_file_limit_connections_are_answered_503_and_counted(start_server):
    server = start_server(preexec=limited(LIMIT, LIMIT))
    assert open_files_limit(server.proc.pid) == (LIMIT, LIMIT)
    assert "--max-connections is beyond the open-file limit" in server.stderr_text()
    held = [socket.create_connection((HOST, server.port), timeout=TIMEOUT) for _ in range(HELD)]
    try:
        with socket.create_connection((HOST, server.port), timeout=TIMEOUT) as extra:
            extra.sendall(http_request("GET", "/healthz"))
            answer = read_until_closed(extra)
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503 "), answer
        assert b"\r\nRetry-After: 1" in head and b"\r\nConnection: close" in head, head
        assert body.startswith(b'{"error":"over_capacity"'), body
    finally:
        for sock in held:
            sock.close()
    # Once the connections are gone, it serves again, and told of what it refused.
    wait_for(lambda: http_client_request(server.port, "GET", "/healthz").status == 200, TIMEOUT, "the gateway did not serve again")
    assert refusals(server.port) >= 1
    wait_for(lambda: "out of file descriptors" in server.stderr_text(), TIMEOUT, "the refusals were not logged")


def test_the_soft_open_file_limit_is_raised_to_the_hard_one(start_server):
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    soft = min(LIMIT, hard)
    server = start_server("--max-connections", "10", preexec=limited(soft, hard))
    assert open_files_limit(server.proc.pid)[0] == hard
    assert "beyond the open-file limit" not in server.stderr_text()
