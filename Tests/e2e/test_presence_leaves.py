"""Presence: every way a member leaves (closed, reaped by a missed ping, ended as a slow consumer)
and joins and leaves collected into one frame an interval (docs/PROTOCOL.md, "Presence: who is
watching").

Every wait is bounded and waits for a frame or a count; the gateways run with a short
`--presence-interval` so the tests stay fast.
"""

from __future__ import annotations

import time

from conftest import ConnectionClosed, wait_for
from presence import (  # noqa: F401  (`open_gateway` is a fixture)
    COALESCE_INTERVAL,
    Client,
    DUE,
    INTERVAL,
    MARGIN,
    WAIT,
    follow,
    frame_after,
    http_members,
    joins_of,
    leaves_of,
    open_gateway,
    token,
    watch,
)
from test_trust import SECRET
from wsclient import (
    CLOSE_TIMEOUT,
    FRAME_TIMEOUT,
    OP_PING,
    OP_TEXT,
    RawWebSocket,
    kernel_buffer_budget,
    publish,
    unique,
)


# ---- Every way a member leaves ----------------------------------------------

def test_a_closed_connection_leaves_within_one_interval(open_gateway):
    port, topic = open_gateway.port, unique("close")
    with Client(port) as watcher:
        view, _, _ = watch(watcher, "topic", topic)
        own = set(view.members)

        # Closed with a closing handshake.
        leaver = Client(port)
        assert leaver.subscribe(topic=topic)["type"] == "subscribed"
        follow(watcher, view, lambda f: len(view.members) == 2, WAIT, "the leaver's join")
        (leaver_id,) = set(view.members) - own
        assert leaver_id in http_members(port, "topic", topic)
        closed_at = time.monotonic()
        leaver.close()
        wait_for(lambda: leaver_id not in http_members(port, "topic", topic), DUE,
                 "the HTTP list still holds a client that closed")
        arrived, frame = follow(watcher, view, lambda f: leaves_of(f, leaver_id), WAIT, "the closed client's leave")
        assert arrived - closed_at <= DUE, f"the leave came {arrived - closed_at:.2f}s after the close"
        assert frame == {"type": "presence", "topic": topic, "clients": 1, "users": 0, "joins": [],
                         "leaves": [{"client": leaver_id, "user": ""}]}, frame

        # Gone without a close frame: the TCP connection just ends.
        raw = RawWebSocket(port).open()
        raw.send_json({"type": "subscribe", "topic": topic})
        assert raw.recv_json()["type"] == "subscribed"
        follow(watcher, view, lambda f: len(view.members) == 2, WAIT, "the raw client's join")
        (raw_id,) = set(view.members) - own
        closed_at = time.monotonic()
        raw.sock.close()
        wait_for(lambda: raw_id not in http_members(port, "topic", topic), DUE,
                 "the HTTP list still holds a client whose connection ended")
        arrived, frame = follow(watcher, view, lambda f: leaves_of(f, raw_id), WAIT, "the vanished client's leave")
        assert arrived - closed_at <= DUE, f"the leave came {arrived - closed_at:.2f}s after the connection ended"
        assert frame["leaves"] == [{"client": raw_id, "user": ""}] and frame["joins"] == [], frame
        assert set(view.members) == own and view.counts == (1, 0)


def test_a_half_open_connection_leaves_when_it_is_reaped_and_not_before(start_server):
    ping_interval, ping_timeout = 1.0, 1.0
    server = start_server("--presence-interval", str(INTERVAL), "--ping-interval", str(ping_interval),
                          "--ping-timeout", str(ping_timeout))
    port, topic = server.port, unique("half-open")
    with Client(port) as watcher:  # the websockets client answers pings by itself
        view, _, _ = watch(watcher, "topic", topic)
        own = set(view.members)
        with RawWebSocket(port) as silent:
            silent.open()
            silent.send_json({"type": "subscribe", "topic": topic})
            assert silent.recv_json()["type"] == "subscribed"
            follow(watcher, view, lambda f: len(view.members) == 2, WAIT, "the silent client's join")
            (silent_id,) = set(view.members) - own

            # From now on it never answers. The server pings it; until the ping times out it is a member.
            frame = silent.read_frame(timeout=2 * ping_interval + 3)
            pinged_at = time.monotonic()
            assert frame.opcode == OP_PING, frame
            assert silent_id in http_members(port, "topic", topic), "a member left before its ping timed out"
            assert not any(leaves_of(f, silent_id) for _, f in watcher.presence), "left before the ping timed out"

            arrived, frame = follow(watcher, view, lambda f: leaves_of(f, silent_id),
                                    ping_timeout + 2.0 + DUE + FRAME_TIMEOUT, "the reaped client's leave")
            assert arrived - pinged_at >= ping_timeout - 0.1, \
                f"the leave came {arrived - pinged_at:.2f}s after the ping, before the ping timeout"
            assert arrived - pinged_at <= ping_timeout + 2.0 + DUE, \
                f"the leave came {arrived - pinged_at:.2f}s after the ping"
            assert frame["leaves"] == [{"client": silent_id, "user": ""}] and frame["joins"] == [], frame
            assert silent_id not in http_members(port, "topic", topic)

            # It was reaped: pings, then the end of the connection, with no closing handshake.
            deadline = time.monotonic() + CLOSE_TIMEOUT
            opcodes = []
            while True:
                try:
                    opcodes.append(silent.read_frame(timeout=max(0.0, deadline - time.monotonic())).opcode)
                except ConnectionClosed:
                    break
            assert set(opcodes) <= {OP_PING}, opcodes
        assert watcher.ended is None, "the watcher, which answers pings, was closed too"
        assert set(view.members) == own


def test_a_slow_consumer_ended_by_the_gateway_leaves(start_server):
    queue_limit, pad_bytes = 65536, 32768
    server = start_server("--presence-interval", str(INTERVAL), "--max-queued-bytes", str(queue_limit),
                          "--ping-interval", "600", "--history", "10")
    port, topic = server.port, unique("slow")
    with Client(port) as watcher:
        view, _, _ = watch(watcher, "topic", topic)
        own = set(view.members)
        with RawWebSocket(port, rcvbuf=4096) as stalled:
            stalled.open()
            stalled.send_json({"type": "subscribe", "topic": topic})
            assert stalled.recv_json()["type"] == "subscribed"
            follow(watcher, view, lambda f: len(view.members) == 2, WAIT, "the stalled client's join")
            (stalled_id,) = set(view.members) - own

            # It reads nothing more while messages are published, until the gateway ends it.
            pad = "x" * pad_bytes
            most = kernel_buffer_budget() // pad_bytes + 64
            for i in range(most):
                publish(port, topic, {"i": i, "pad": pad})
                if any(leaves_of(f, stalled_id) for _, f in list(watcher.presence)):
                    break
            arrived, frame = follow(watcher, view, lambda f: leaves_of(f, stalled_id), WAIT,
                                    f"the slow consumer's leave (after {i + 1} messages)", allow=("message",))
            assert frame["leaves"] == [{"client": stalled_id, "user": ""}], frame
            assert stalled_id not in http_members(port, "topic", topic)

            frames, close = stalled.read_until_closed(10.0)
            if close is not None:
                assert (close.close_code(), close.close_reason()) == (1008, "slow consumer"), close
            assert all(f.opcode == OP_TEXT for f in frames), {f.opcode for f in frames}
        assert watcher.ended is None, "the watcher, which reads everything, was ended too"
        assert set(view.members) == own and view.counts == (1, 0)


# ---- Collected once an interval ----------------------------------------------

def test_joins_and_leaves_are_collected_into_one_frame_an_interval(start_server):
    server = start_server("--token-secret", SECRET, "--presence-interval", str(COALESCE_INTERVAL))
    port, topic = server.port, unique("coalesce")

    def member(sub: str, presence: bool = False) -> Client:
        return Client(port, token(sub, topics=[topic], presence=[topic] if presence else []))

    watcher, a, b, c, m, e, n = (member("w", True), member("a"), member("b"), member("c"),
                                 member("m"), member("e"), member("n"))
    try:
        # Three joins within one interval arrive as one frame, an interval after the first.
        started = time.monotonic()
        view, _, _ = watch(watcher, "topic", topic)
        for client in (a, b, c):
            assert client.subscribe(topic=topic)["type"] == "subscribed"
        done = time.monotonic()
        assert done - started < COALESCE_INTERVAL / 2, f"the subscribes took {done - started:.2f}s; cannot judge"
        first_at, first = follow(watcher, view, lambda f: joins_of(f, "a") or joins_of(f, "b") or joins_of(f, "c"),
                                 COALESCE_INTERVAL + WAIT, "the joins of a, b and c")
        assert {j["user"] for j in first["joins"]} - {"w"} == {"a", "b", "c"}, f"not one frame for the three joins: {first}"
        assert first["leaves"] == [] and (first["clients"], first["users"]) == (4, 4), first
        assert first_at - started >= COALESCE_INTERVAL - 0.05, \
            f"the joins went out {first_at - started:.2f}s after the first, not collected for an interval"
        assert first_at - done <= COALESCE_INTERVAL + MARGIN, f"the joins came {first_at - done:.2f}s late"
        a_before = joins_of(first, "a")[0]

        # Within the next interval: m joins; e joins and leaves; a leaves and joins again.
        started = time.monotonic()
        assert m.subscribe(topic=topic)["type"] == "subscribed"
        assert e.subscribe(topic=topic)["type"] == "subscribed"
        e.close()
        a.send({"type": "unsubscribe", "topic": topic})
        assert a.recv() == {"type": "unsubscribed", "topic": topic}
        assert a.subscribe(topic=topic)["type"] == "subscribed"
        done = time.monotonic()
        assert done - started < COALESCE_INTERVAL / 2, f"the changes took {done - started:.2f}s; cannot judge"
        second_at, second = follow(watcher, view, lambda f: joins_of(f, "m"), COALESCE_INTERVAL + WAIT, "m's join")
        assert frame_after(watcher, first) is second, \
            f"the interval's changes came in more than one frame: {[f for _, f in watcher.presence]}"
        assert sorted(j["user"] for j in second["joins"]) == ["a", "m"], \
            f"expected joins of a (left and joined again) and m only, e in neither list: {second}"
        assert second["leaves"] == [], f"e joined and left within the interval, a came back: {second}"
        a_again = joins_of(second, "a")[0]
        assert a_again["client"] == a_before["client"] and a_again["joinedAt"] > a_before["joinedAt"], (a_before, a_again)
        assert (second["clients"], second["users"]) == (5, 5), second
        assert second_at - first_at >= COALESCE_INTERVAL - 0.05, "two frames within one interval"

        # e's join and leave never show, in this frame or a later one.
        assert n.subscribe(topic=topic)["type"] == "subscribed"
        third_at, third = follow(watcher, view, lambda f: joins_of(f, "n"), COALESCE_INTERVAL + WAIT, "n's join")
        assert frame_after(watcher, second) is third, f"a frame between: {[f for _, f in watcher.presence]}"
        assert [j["user"] for j in third["joins"]] == ["n"] and third["leaves"] == [], third
        assert third_at - second_at >= COALESCE_INTERVAL - 0.05, "two frames within one interval"
        for _, frame in watcher.presence:
            assert not any(x["user"] == "e" for x in frame.get("joins", []) + frame.get("leaves", [])), frame
        assert view.users() == ["a", "b", "c", "m", "n", "w"] and view.counts == (6, 6)
    finally:
        for client in (watcher, a, b, c, m, e, n):
            client.close()
