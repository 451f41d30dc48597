"""A connection's commits take effect in the order it sent them, though the job threads work side by
side: pipelined `POST /api/stores/{s}/changes` on one HTTP connection, and `commit` messages sent
back to back on one WebSocket, are the store's versions in the order sent, and each is answered
with its own version. Every test runs on the memory engine, the disk engine (`--data-dir`) and the
redis engine (engines.py), with more job threads than cores, so that jobs do overlap.
"""

from __future__ import annotations

import json
import socket

from conftest import RawConnection, api, http_request, json_ok
from engines import engine  # noqa: F401  (a fixture)
from test_cluster import redis  # noqa: F401  (a fixture `engine` asks for)
from wsclient import connect, recv_json, unique

COMMITS = 200
OPTIONS = ("--job-threads", "8", "--publish-rate", "0", "--client-message-rate", "0")


def new_store(port: int) -> str:
    store = unique("order")
    json_ok(api(port, "POST", "/api/stores", {"name": store}), 201)
    return store


def change(n: int) -> dict:
    # Each commit writes the model it is numbered for and moves `last`: applied out of order, a
    # version would carry another commit's number, and `last` would not end at the last one.
    return {"changes": [{"op": "put", "model": f"m{n}", "value": {"n": n}},
                        {"op": "put", "model": "last", "value": {"n": n}}]}


def assert_applied_in_order(port: int, store: str) -> None:
    snapshot = json_ok(api(port, "GET", f"/api/stores/{store}"))
    assert snapshot["version"] == COMMITS
    assert snapshot["models"]["last"] == {"n": COMMITS - 1}
    # Version v is the commit numbered v - 1 (the history is read a page at a time).
    numbers: list[int] = []
    while len(numbers) < COMMITS:
        page = json_ok(api(port, "GET", f"/api/stores/{store}/changes?after={len(numbers)}"))["changes"]
        assert page and [c["version"] for c in page] == list(range(len(numbers) + 1, len(numbers) + 1 + len(page)))
        numbers += [[c["value"]["n"] for c in change_set["changes"] if c["model"] == "last"][0] for change_set in page]
    assert numbers == list(range(COMMITS)), numbers


def test_pipelined_http_commits_are_applied_in_the_order_sent(engine):  # noqa: F811
    port = engine.start(*OPTIONS).port
    store = new_store(port)
    body = [json.dumps(change(n)).encode() for n in range(COMMITS)]
    requests = [http_request("POST", f"/api/stores/{store}/changes", {"Content-Type": "application/json"}, b)
                for b in body]
    with RawConnection(port, timeout=30) as conn:
        # Half in one write, half a request a write: requests come both read together with one
        # whose work runs, and read while it runs.
        conn.send(b"".join(requests[:COMMITS // 2]))
        for request in requests[COMMITS // 2:]:
            conn.send(request)
        versions = [json_ok(conn.read_response())["version"] for _ in requests]
    assert versions == list(range(1, COMMITS + 1)), versions
    assert_applied_in_order(port, store)


def test_websocket_commits_sent_back_to_back_are_applied_in_the_order_sent(engine):  # noqa: F811
    port = engine.start(*OPTIONS).port
    store = new_store(port)
    with connect(port) as ws:
        for n in range(COMMITS):
            ws.send(json.dumps({"type": "commit", "store": store, "ref": f"c{n}", **change(n)}))
        answers = [recv_json(ws, timeout=20) for _ in range(COMMITS)]
    assert [a["type"] for a in answers] == ["committed"] * COMMITS, answers
    assert {a["ref"]: a["version"] for a in answers} == {f"c{n}": n + 1 for n in range(COMMITS)}
    assert_applied_in_order(port, store)


def test_nothing_pipelined_after_a_commit_sent_with_connection_close_is_read(engine):  # noqa: F811
    # The commit holds back what follows it until it has its place; then, as for any request,
    # `Connection: close` ends the stream and the commit after it is never applied.
    port = engine.start(*OPTIONS).port
    store = new_store(port)
    headers = {"Content-Type": "application/json"}
    closing = http_request("POST", f"/api/stores/{store}/changes", {**headers, "Connection": "close"},
                           json.dumps(change(0)).encode())
    after = http_request("POST", f"/api/stores/{store}/changes", headers, json.dumps(change(1)).encode())
    with RawConnection(port, timeout=10) as conn:
        conn.send(closing + after)
        assert json_ok(conn.read_response())["version"] == 1
        assert conn.sock.recv(1) == b""
    assert json_ok(api(port, "GET", f"/api/stores/{store}"))["version"] == 1


def test_a_client_that_half_closes_after_pipelining_gets_every_answer(engine):  # noqa: F811
    # A client may shut its side down once it has sent its last request, and read on. Every
    # request it sent is still run and answered, in order: commits that hold back what follows
    # them, and publishes whose answers come later (from Redis, on that engine). Then the gateway
    # closes.
    port = engine.start(*OPTIONS).port
    store = new_store(port)
    headers = {"Content-Type": "application/json"}
    requests = []
    for n in range(COMMITS // 4):
        requests.append(http_request("POST", f"/api/stores/{store}/changes", headers, json.dumps(change(n)).encode()))
        requests.append(http_request("POST", f"/api/topics/{store}/messages", headers, json.dumps({"n": n}).encode()))
    with RawConnection(port, timeout=30) as conn:
        conn.send(b"".join(requests))
        conn.sock.shutdown(socket.SHUT_WR)
        # A commit is answered 200, a publish 201.
        answers = [json_ok(conn.read_response(), 201 if n % 2 else 200) for n in range(len(requests))]
        assert conn.sock.recv(1) == b"", "the gateway closes once every request is answered"
    assert [a["version"] for a in answers[0::2]] == list(range(1, COMMITS // 4 + 1)), answers
    assert [a["seq"] for a in answers[1::2]] == list(range(1, COMMITS // 4 + 1)), [a["seq"] for a in answers[1::2]]
