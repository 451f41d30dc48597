"""A request waiting for the backend is answered before its connection closes (docs/DESIGN.md,
invariant 64), whatever closes it: here a drain. Before, a subscribe waiting for the subscribe
hook, and an RPC waiting for room behind the connection's 16 RPCs under way, were not counted as
owed: the close frame went out at once, and neither was ever answered."""

from __future__ import annotations

import signal
import time

from websockets.exceptions import ConnectionClosed

from conftest import wait_for
from hooks import Backend, cookie
from wsclient import connect, recv_json, send_json, unique

RPC_WINDOW = 16    # RPCs under way per connection


def frames_until_closed(ws, seconds: float) -> tuple[list[dict], int | None]:
    frames, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            frames.append(recv_json(ws, timeout=max(0.01, deadline - time.monotonic())))
        except ConnectionClosed as closed:
            return frames, closed.rcvd.code if closed.rcvd else None
    raise AssertionError(f"still open after {seconds}s: {frames}")


def test_a_subscribe_waiting_for_its_hook_is_answered_before_a_drain_closes(start_server, tmp_path):
    backend = Backend(tmp_path / "backend")
    try:
        gateway = start_server("--hook-timeout", "5", *backend.hook_args("connect", "subscribe"))
        # bob's grant does not cover this topic: the subscribe hook decides.
        with connect(gateway.port, additional_headers=cookie("bob")) as ws:
            backend.set_delay(1.0)
            send_json(ws, {"type": "subscribe", "topic": unique("deny-room")})
            wait_for(lambda: backend.stats()["inFlight"] == 1, 5, "the subscribe hook was never asked")
            gateway.proc.send_signal(signal.SIGTERM)
            frames, code = frames_until_closed(ws, 10)
        assert code == 1001, (code, frames)
        errors = [f for f in frames if f["type"] == "error"]
        assert [e["code"] for e in errors] == ["unavailable"], frames
        assert not [f for f in frames if f["type"] == "subscribed"], "no stream starts on a closing connection"
    finally:
        backend.stop()


def test_an_rpc_waiting_for_room_is_answered_before_a_drain_closes(start_server, tmp_path):
    backend = Backend(tmp_path / "backend")
    try:
        gateway = start_server("--hook-timeout", "5", *backend.hook_args("connect", "rpc"))
        with connect(gateway.port, additional_headers=cookie("alice")) as ws:
            for n in range(RPC_WINDOW):
                send_json(ws, {"type": "rpc", "id": f"slow{n}", "method": "sleep", "data": 1.0})
            send_json(ws, {"type": "rpc", "id": "waiting", "method": "echo", "data": 1})
            wait_for(lambda: backend.stats()["inFlight"] == RPC_WINDOW, 5, "the RPCs never reached the backend")
            gateway.proc.send_signal(signal.SIGTERM)
            frames, code = frames_until_closed(ws, 10)
        assert code == 1001, (code, frames)
        answers = {f["id"]: f for f in frames if f["type"] in ("rpc_result", "rpc_error")}
        assert {f"slow{n}" for n in range(RPC_WINDOW)} <= set(answers), frames
        assert all(answers[f"slow{n}"]["type"] == "rpc_result" for n in range(RPC_WINDOW)), frames
        assert "waiting" in answers, f"the RPC waiting for room was never answered: {frames}"
        assert (answers["waiting"]["type"], answers["waiting"]["code"]) == ("rpc_error", "unavailable"), answers["waiting"]
    finally:
        backend.stop()
