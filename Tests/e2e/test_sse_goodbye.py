"""An SSE stream that said goodbye (its token ran out, a drain, its store deleted) closes once its
client has read what was queued before it, and is closed anyway a linger (2 s) after the goodbye
if the client reads nothing. Before, such a stream stayed open for as long as its client held the
socket: its subscription, its place among the topic's subscribers and the stream itself outlived
the token that allowed them."""

from __future__ import annotations

import socket
import time

import httpx

from conftest import HOST, wait_for
from http_client import http_request
from test_trust import SECRET, token_for
from wsclient import kernel_buffer_budget, unique

TINY_RCVBUF = 4096       # SO_RCVBUF of the client that never reads, set before connecting
MESSAGE = 60_000         # bytes of data per publish, under --max-message-bytes (64 KiB)
LINGER = 2.0             # the gateway's linger after a goodbye
TOKEN_SECONDS = 4


def subscribers(client: httpx.Client, base: str, topic: str) -> int:
    topics = client.get(f"{base}/api/topics").json()["topics"]
    return next((t["subscribers"] for t in topics if t["name"] == topic), 0)


def test_a_stream_whose_token_ran_out_is_closed_a_linger_later_though_its_client_reads_nothing(start_server):
    # A queue limit the backlog stays under: the stream is never closed as a slow consumer.
    server = start_server("--token-secret", SECRET, "--max-queued-bytes", str(64 << 20), "--publish-rate", "0")
    base, topic = f"http://{HOST}:{server.port}", unique("goodbye")
    token = token_for(seconds=TOKEN_SECONDS, topics=[topic])
    expires = time.time() + TOKEN_SECONDS
    stalled = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, TINY_RCVBUF)
    with stalled, httpx.Client(timeout=10) as client:
        stalled.connect((HOST, server.port))
        stalled.sendall(http_request("GET", f"/api/topics/{topic}/events?token={token}"))
        wait_for(lambda: subscribers(client, base, topic) == 1, 5, "the stream did not subscribe")
        # More than the kernel's buffers on both sides hold: the rest waits in the gateway.
        body = {"data": "x" * MESSAGE}
        for _ in range(kernel_buffer_budget() // MESSAGE + 8):
            assert client.post(f"{base}/api/topics/{topic}/messages", json=body).status_code == 201
        assert time.time() < expires, "publishing took longer than the token lasts; nothing was tested"
        assert subscribers(client, base, topic) == 1
        # The token runs out: the stream says goodbye, which its client never reads.
        wait_for(lambda: subscribers(client, base, topic) == 0, TOKEN_SECONDS + LINGER + 5,
                 "the stream outlived its token and the linger")
        assert time.time() >= expires - 0.05, "closed before the token ran out"
        # The socket is closed too: reading what was queued ends at the gateway's close.
        stalled.settimeout(10)
        try:
            while stalled.recv(1 << 20):
                pass
        except ConnectionResetError:
            pass
