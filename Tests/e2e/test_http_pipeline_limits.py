"""Pipelined HTTP requests behind one whose answer comes later (a publish with `--data-dir`, the
answer after the disk's write): what follows a closing request is never taken, and replies
waiting behind the late one count against `--max-queued-bytes` (docs/DESIGN.md, invariants 7
and 10).

Before, a reply that closed the connection (a refused path) stopped nothing while an earlier
answer was owed, so the requests after it were acted on and answered after the close; and replies made behind an answer still owed were counted against no limit, so
one read of small requests built a large reply for each and held them all."""

from __future__ import annotations

import json
import socket
import time

from conftest import HOST, api, json_ok, wait_for
from http_client import http_request, parse_head
from test_http_backpressure import RequestsAnswered
from test_queue_limits import TINY_RCVBUF

QUEUE_LIMIT = 65536
BIG = 600_000          # bytes of one message; each page of it is a reply of about this size
PIPELINED = 300


def publish(data: dict, *headers) -> bytes:
    return http_request("POST", "/api/topics/t/messages", headers=[("Content-Type", "application/json"), *headers],
                        body=json.dumps({"data": data}).encode())


def replies_until_closed(sock: socket.socket, seconds: float = 10) -> list[tuple[int, list]]:
    """Every reply the gateway sends (each with a Content-Length), until it closes."""
    data, deadline = b"", time.monotonic() + seconds
    sock.settimeout(seconds)
    while time.monotonic() < deadline:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    else:
        raise AssertionError(f"still open after {seconds}s: {data[:300]!r}")
    replies = []
    while data:
        head, _, data = data.partition(b"\r\n\r\n")
        status, _, headers = parse_head(head)
        length = int(dict((k.lower(), v) for k, v in headers)["content-length"])
        data = data[length:]
        replies.append((status, headers))
    return replies


def seq(port: int, topic: str) -> int:
    topics = json_ok(api(port, "GET", "/api/topics"))["topics"]
    return next((t["seq"] for t in topics if t["name"] == topic), 0)


def test_nothing_after_a_closing_request_is_taken_while_an_earlier_answer_is_owed(start_server, tmp_path):
    server = start_server("--data-dir", str(tmp_path / "data"), "--publish-rate", "0")
    # A refused path closes the connection: the publish after it is never acted on.
    with socket.create_connection((HOST, server.port), timeout=10) as sock:
        sock.sendall(publish({"n": 1}) + http_request("GET", "/api/%2e%2e/x") + publish({"n": 2}))
        replies = replies_until_closed(sock)
    assert [status for status, _ in replies] == [201, 400], replies
    assert ("Connection", "close") in replies[1][1], replies
    assert seq(server.port, "t") == 1


def test_replies_waiting_behind_a_late_answer_count_against_the_limit(start_server, tmp_path):
    server = start_server("--data-dir", str(tmp_path / "data"), "--publish-rate", "0",
                          "--max-queued-bytes", str(QUEUE_LIMIT), "--max-message-bytes", str(1 << 20))
    port = server.port
    assert api(port, "POST", "/api/topics/big/messages", {"data": "x" * BIG}).status == 201
    page = http_request("GET", "/api/topics/big/messages?after=0&limit=1")
    answered = RequestsAnswered(port)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, TINY_RCVBUF)
    with sock:
        sock.connect((HOST, port))
        # The publish's answer waits for the disk; each page's reply is made behind it.
        sock.sendall(publish({"n": 1}) + page * PIPELINED)
        moved = {"count": -1, "at": time.monotonic()}

        def settled():
            count = answered()
            if count != moved["count"]:
                moved.update(count=count, at=time.monotonic())
            return count > 0 and time.monotonic() - moved["at"] >= 0.5

        wait_for(settled, 20, "the gateway kept answering")
        # The publish, the pages the limit and the kernel's buffers took, and the one past them.
        bound = (4 << 20) // BIG + 4
        assert moved["count"] <= bound, f"{moved['count']} of {PIPELINED + 1} answered for a client that reads nothing"
