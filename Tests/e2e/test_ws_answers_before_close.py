"""A WebSocket request the gateway took is answered before the connection closes (docs/PROTOCOL.md,
"Closing"; invariant 64): commits and publishes sent in one write ahead of a frame that breaks the
protocol (too big: 1009; unmasked: 1002), or of the client's own close, each get their answer, with
their `ref`, and only then the close frame. Before, the close went at once and the answers still on
their way (a commit on its job thread; a publish to the disk) were dropped: applied, never answered.
"""

from __future__ import annotations

import json
import signal
import time

import pytest

from conftest import api, http_client_request, json_ok, wait_for
from wsclient import (
    OP_CLOSE,
    OP_TEXT,
    SUBPROTOCOL,
    RawWebSocket,
    close_payload,
    encode_frame,
    new_store,
    unique,
)

MAX_MESSAGE = 1024
REQUESTS = 5  # of each kind

def until_close(ws: RawWebSocket, timeout: float = 15) -> tuple[list[dict], int]:
    """Every message up to the server's close frame, parsed, and the close's code."""
    frames = []
    while True:
        opcode, payload = ws.read_message(timeout=timeout)
        if opcode == OP_CLOSE:
            return frames, int.from_bytes(payload[:2], "big")
        frames.append(json.loads(payload))


ENDINGS = {
    "too-big": (encode_frame(OP_TEXT, b'"' + b"x" * MAX_MESSAGE + b'"'), 1009),
    "unmasked": (encode_frame(OP_TEXT, b"{}", mask=False), 1002),
    "client-close": (encode_frame(OP_CLOSE, close_payload(1000)), 1000),
}


@pytest.mark.parametrize("data_dir", [False, True], ids=["memory", "data-dir"])
@pytest.mark.parametrize("ending", list(ENDINGS))
def test_every_request_taken_is_answered_before_the_close(start_server, tmp_path, data_dir, ending):
    args = ["--max-message-bytes", str(MAX_MESSAGE)] + (["--data-dir", str(tmp_path / "data")] if data_dir else [])
    port = start_server(*args).port
    store, topic = new_store(port), unique("answered")
    requests = []
    for n in range(REQUESTS):
        requests.append({"type": "commit", "store": store, "ref": f"c{n}",
                         "changes": [{"op": "put", "model": f"m{n}", "value": {"n": n}}]})
        requests.append({"type": "publish", "topic": topic, "data": {"n": n}, "ref": f"p{n}"})
    tail, code = ENDINGS[ending]
    with RawWebSocket(port).open(subprotocols=(SUBPROTOCOL,)) as ws:
        ws.send(b"".join(encode_frame(OP_TEXT, json.dumps(r).encode()) for r in requests) + tail)
        frames, closed_with = until_close(ws)
        answers = {}
        for frame in frames:
            assert frame["type"] in ("committed", "published"), frame
            assert frame["ref"] not in answers, f"answered twice: {frame}"
            answers[frame["ref"]] = frame
        assert closed_with == code
    assert sorted(answers) == sorted(r["ref"] for r in requests)
    # Each in its own order: commits as applied, publishes as numbered.
    assert [answers[f"c{n}"]["version"] for n in range(REQUESTS)] == list(range(1, REQUESTS + 1))
    assert [answers[f"p{n}"]["seq"] for n in range(REQUESTS)] == list(range(1, REQUESTS + 1))
    assert json_ok(api(port, "GET", f"/api/stores/{store}"))["version"] == REQUESTS


@pytest.mark.parametrize("how", ["drain", "token-expired"])
def test_a_close_of_the_gateways_own_waits_for_the_answers_owed(start_server, tmp_path, how):
    """A drain (SIGTERM), or a token that runs out, closes the connection once the RPC it took is
    answered (here by the hook's time-out, 3 s): before, the close went first and the answer was lost."""
    from hooks import Backend
    from test_trust import SECRET, make_token
    backend = Backend(tmp_path / "backend")
    try:
        args = ["--hook-timeout", "3", "--drain-timeout", "20", *backend.hook_args("rpc")]
        if how == "token-expired":
            args += ["--token-secret", SECRET]
        server = start_server(*args)
        path = "/ws"
        if how == "token-expired":
            path += f"?token={make_token({'exp': time.time() + 0.5})}"
        with RawWebSocket(server.port).open(path=path, subprotocols=(SUBPROTOCOL,)) as ws:
            ws.send_json({"type": "rpc", "id": "r1", "method": "slow", "data": None})
            wait_for(lambda: backend.stats()["calls"].get("rpc") == 1, 10, "the RPC hook was not called")
            if how == "drain":
                server.send_signal(signal.SIGTERM)
            frames, closed_with = until_close(ws)
            answers = [f for f in frames if f.get("id") == "r1"]
            assert [a["type"] for a in answers] == ["rpc_error"] and answers[0]["code"] == "unavailable", frames
            assert closed_with == (1001 if how == "drain" else 1008)
    finally:
        backend.stop()


@pytest.mark.parametrize("how", ["drain", "token-expired"])
def test_a_publish_at_its_hook_is_answered_before_the_close_and_nothing_after_is_acted_on(start_server, tmp_path, how):
    """A publish waiting for the publish hook when the gateway decides to close is owed from the
    moment it was taken: published and answered before the close frame. What the client sends
    after it was told (`draining`, `token_expired`) is neither read nor acted on. Before, the close
    went first, the hook's publish was applied unanswered, and later messages were acted on."""
    from hooks import API_KEY, Backend
    from test_trust import SECRET, make_token
    backend = Backend(tmp_path / "backend")
    try:
        args = ["--api-key", API_KEY, "--token-secret", SECRET, "--hook-timeout", "10", "--drain-timeout", "20",
                *backend.hook_args("publish")]
        server = start_server(*args)
        topic = unique("hooked")
        expires = time.time() + (1.0 if how == "token-expired" else 300)
        token = make_token({"exp": expires, "topics": [topic]})
        with RawWebSocket(server.port).open(path=f"/ws?token={token}", subprotocols=(SUBPROTOCOL,)) as ws:
            ws.send_json({"type": "publish", "topic": topic, "data": {"n": 1, "hookDelay": 2.5}, "ref": "p1"})
            wait_for(lambda: backend.stats()["calls"].get("publish") == 1, 10, "the publish hook was not called")
            if how == "drain":
                server.send_signal(signal.SIGTERM)
            told = ws.recv_json(timeout=10)
            assert told["type"] == ("draining" if how == "drain" else "error"), told
            ws.send_json({"type": "publish", "topic": topic, "data": {"n": 2}, "ref": "p2"})
            frames, closed_with = until_close(ws)
            assert [(f["type"], f.get("ref")) for f in frames] == [("published", "p1")], frames
            assert closed_with == (1001 if how == "drain" else 1008)
        assert backend.stats()["calls"]["publish"] == 1, "a message sent after the close was decided was acted on"
        if how == "token-expired":
            history = json_ok(http_client_request(server.port, "GET", f"/api/topics/{topic}/messages?after=0",
                                                  headers={"Authorization": f"Bearer {API_KEY}"}))
            assert [m["data"] for m in history["messages"]] == [{"n": 1, "hookDelay": 2.5}], history
    finally:
        backend.stop()
