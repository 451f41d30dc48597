"""Presence limits: the counts-only mode past `--presence-max-members`, the `presence` and `info`
token claims, and the HTTP answer's `?limit=` (docs/PROTOCOL.md, "Presence: who is watching").

Every wait is bounded and waits for a frame or a count; the gateways run with a short
`--presence-interval` so the tests stay fast.
"""

from __future__ import annotations

import json

import pytest
import websockets

from conftest import api, assert_json_error, room_for_descriptors, wait_for
from presence import (  # noqa: F401  (`tokened` and `open_gateway` are fixtures)
    Client,
    INTERVAL,
    WAIT,
    follow,
    http_presence,
    open_gateway,
    presence_path,
    token,
    tokened,
    watch,
)
from test_trust import sse_head
from wsclient import OP_TEXT, RawWebSocket, connect, new_store, unique


# ---- Counts only past the cap -------------------------------------------------

def test_past_the_members_cap_watchers_get_counts_only_then_the_whole_list(start_server):
    server = start_server("--presence-max-members", "3", "--presence-interval", str(INTERVAL))
    port, topic = server.port, unique("capped")
    with Client(port) as watcher, Client(port) as a, Client(port) as b, Client(port) as d, Client(port) as x:
        view, _, _ = watch(watcher, "topic", topic)
        (watcher_id,) = view.members
        for client in (a, b):
            assert client.subscribe(topic=topic)["type"] == "subscribed"
        follow(watcher, view, lambda f: len(view.members) == 3, WAIT, "two joins")
        three = dict(view.members)
        index = len(watcher.presence)

        # A fourth member: counts only.
        assert d.subscribe(topic=topic)["type"] == "subscribed"
        _, frame = follow(watcher, view, lambda f: f.get("countsOnly"), WAIT, "the counts-only frame")
        assert frame == {"type": "presence", "topic": topic, "clients": 4, "users": 0, "countsOnly": True}, frame

        # A presence subscriber arriving now gets the counts, no list.
        x.send({"type": "subscribe", "topic": topic, "presence": True})
        assert x.recv()["type"] == "subscribed"
        assert x.recv() == {"type": "presence", "topic": topic, "clients": 5, "users": 0, "countsOnly": True}
        _, frame = follow(watcher, view, lambda f: f.get("countsOnly") and f["clients"] == 5, WAIT, "the count of 5")
        assert frame == {"type": "presence", "topic": topic, "clients": 5, "users": 0, "countsOnly": True}, frame

        x.close()
        _, frame = follow(watcher, view, lambda f: f.get("countsOnly") and f["clients"] == 4, WAIT, "the count of 4")
        assert frame == {"type": "presence", "topic": topic, "clients": 4, "users": 0, "countsOnly": True}, frame

        # Back at the cap: the whole list.
        d.close()
        _, frame = follow(watcher, view, lambda f: "members" in f, WAIT, "the whole list at the cap")
        assert (frame["clients"], frame["users"]) == (3, 0), frame
        assert view.members == three, (frame, three)
        between = [f for _, f in watcher.presence[index:]]
        assert all(f.get("countsOnly") for f in between[:-1]), f"a list while past the cap: {between}"

        # And joins and leaves again after it.
        a.close()
        _, frame = follow(watcher, view, lambda f: "leaves" in f, WAIT, "a's leave")
        assert frame["joins"] == [] and len(frame["leaves"]) == 1 and (frame["clients"], frame["users"]) == (2, 0), frame
        assert frame["leaves"][0]["client"] in set(three) - {watcher_id}, frame
        assert len(view.members) == 2 and watcher_id in view.members


# ---- Tokens ------------------------------------------------------------------

def test_presence_needs_a_presence_claim_covering_the_target(tokened):
    port = tokened.port
    topic = unique("guarded")
    store = new_store(port, prefix="guarded")

    refusals = [
        token("nosy", topics=[topic]),                                         # no presence claim
        token("nosy", topics=[topic], presence=[topic + "x", "other", "zz*"]),  # claims that miss it
        token("nosy", presence=[topic]),                                       # cannot read the topic
    ]
    for tok in refusals:
        with Client(port, tok) as nosy:
            error = nosy.subscribe(topic=topic, presence=True)
            assert (error["type"], error.get("code")) == ("error", "forbidden"), error
            # Nothing was subscribed.
            assert http_presence(port, "topic", topic, "stats=true")["clients"] == 0
            nosy.send({"type": "unsubscribe", "topic": topic})
            error = nosy.recv()
            assert (error["type"], error.get("code")) == ("error", "not_subscribed"), error
    with Client(port, token("nosy", stores=[store], presence=["zz*"])) as nosy:
        error = nosy.subscribe(store=store, presence=True)
        assert (error["type"], error.get("code")) == ("error", "forbidden"), error
        assert http_presence(port, "store", store, "stats=true")["clients"] == 0
        assert nosy.subscribe(store=store)["type"] == "snapshot", "the plain subscription is allowed"
    status, _ = sse_head(port, f"/api/topics/{topic}/events?presence=true&token={refusals[0]}")
    assert " 403 " in status, status

    # By name and by prefix.
    with Client(port, token("named", topics=[topic], presence=[topic])) as named, \
            Client(port, token("prefixed", topics=["guarded-*"], presence=["guarded-*"])) as prefixed:
        view, _, listed = watch(named, "topic", topic)
        assert view.users() == ["named"] and (listed["clients"], listed["users"]) == (1, 1), listed
        view, _, listed = watch(prefixed, "topic", topic)
        assert view.users() == ["named", "prefixed"] and (listed["clients"], listed["users"]) == (2, 2), listed


def test_the_info_claim_must_be_an_object_of_at_most_1_kib(tokened):
    port, topic = tokened.port, unique("info")
    fits = {"note": "x" * 980}   # about 1,000 bytes as JSON
    for bad in ("a string", ["a", "list"], 42, {"note": "x" * 1200}):
        with Client(port) as client:
            client.send({"type": "auth", "token": token("bad", topics=[topic], info=bad)})
            error = client.recv()
            assert (error["type"], error.get("code")) == ("error", "token_invalid"), (bad, error)
        with pytest.raises(websockets.exceptions.InvalidStatus) as refused:
            connect(port, path=f"/ws?token={token('bad', topics=[topic], info=bad)}")
        assert refused.value.response.status_code == 401, bad
    with Client(port) as client:
        client.send({"type": "auth", "token": token("big", topics=[topic], presence=[topic], info=fits)})
        assert client.recv()["type"] == "authenticated"
        view, _, listed = watch(client, "topic", topic)
        assert view.by_user("big")["info"] == fits, listed


# ---- The HTTP answer's ?limit= -----------------------------------------------------

LIMIT_ERROR = "limit must be a whole number from 0 to 10000"


def test_the_http_limit_is_a_whole_number_from_0_to_10000(open_gateway):
    """`?limit=` takes 0 to 10,000 (PresenceAPI.maxLimit, docs/PROTOCOL.md): 10,000 lists every
    member and 0 none (truncated); 10,001, a negative, a fraction, an exponent, a word, a number
    past any integer and an empty value (`limit=` or a bare `limit`) are each a 400 with the JSON
    error. Without the bound, 10,001 would be answered
    with the list; with a smaller one, 10,000 would be refused."""
    port, topic = open_gateway.port, unique("limit")
    with Client(port) as one, Client(port) as two:
        for client in (one, two):
            assert client.subscribe(topic=topic)["type"] == "subscribed"
        listed = wait_for(lambda: (body := http_presence(port, "topic", topic, "limit=10000"))["clients"] == 2 and body,
                          WAIT, "the two members in the HTTP answer")
        assert len(listed["members"]) == 2 and "truncated" not in listed, listed
        none = http_presence(port, "topic", topic, "limit=0")
        assert none["members"] == [] and none["truncated"] is True and none["clients"] == 2, none
        for bad in ("10001", "-1", "1.5", "1e3", "many", "", "99999999999999999999"):
            for query in (f"limit={bad}", "limit") if bad == "" else (f"limit={bad}",):
                resp = api(port, "GET", presence_path("topic", topic, query))
                assert_json_error(resp, 400, "bad_request")
                assert resp.json()["detail"] == LIMIT_ERROR, (query, resp.json())
        # A store's answer is bounded the same way.
        store = new_store(port, prefix="limit")
        assert http_presence(port, "store", store, "limit=10000")["members"] == []
        assert_json_error(api(port, "GET", presence_path("store", store, "limit=10001")), 400, "bad_request")


def test_the_http_answer_lists_1000_members_unless_asked_for_more(start_server):
    """With 1,001 members the answer lists 1,000 by default, with `"truncated": true` and the
    counts of all; `?limit=1001` or `?limit=10000` lists all 1,001, not truncated. The members are
    raw WebSocket subscribers (one connection each: a topic's member is a subscription, and a
    connection subscribes to a topic once). Without the default every member would be listed;
    were 10,000 capped at the default, the asked-for answers would be cut at 1,000 too."""
    room_for_descriptors(4 * 1001)  # the crowd's sockets here, and the gateway's (which inherits the limit)
    port, topic = start_server().port, unique("crowd")
    crowd: list[RawWebSocket] = []
    try:
        for _ in range(1001):
            crowd.append(RawWebSocket(port).open())
            crowd[-1].send_json({"type": "subscribe", "topic": topic})
        for ws in crowd:
            opcode, payload = ws.read_message()
            assert (opcode, json.loads(payload)["type"]) == (OP_TEXT, "subscribed"), payload
        wait_for(lambda: http_presence(port, "topic", topic, "stats=true")["clients"] == 1001, WAIT, "1,001 members")

        default = http_presence(port, "topic", topic)
        counts = (len(default["members"]), default.get("truncated"), default["clients"], default["users"])
        assert counts == (1000, True, 1001, 0), counts
        for limit in (1001, 10000):
            whole = http_presence(port, "topic", topic, f"limit={limit}")
            assert len(whole["members"]) == 1001 and "truncated" not in whole, (limit, len(whole["members"]))
            assert {m["client"] for m in default["members"]} < {m["client"] for m in whole["members"]}
    finally:
        for ws in crowd:
            ws.sock.close()
