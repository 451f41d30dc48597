"""Presence limits: the counts-only mode past `--presence-max-members`, and the `presence` and `info`
token claims (docs/PROTOCOL.md, "Presence: who is watching").

Every wait is bounded and waits for a frame or a count; the gateways run with a short
`--presence-interval` so the tests stay fast.
"""

from __future__ import annotations

import pytest
import websockets

from presence import (  # noqa: F401  (`tokened` is a fixture)
    Client,
    INTERVAL,
    WAIT,
    follow,
    http_presence,
    token,
    tokened,
    watch,
)
from test_trust import sse_head
from wsclient import connect, new_store, unique


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
