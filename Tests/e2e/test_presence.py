"""Presence (docs/PROTOCOL.md, "Presence: who is watching"): the members of a topic or a store,
their joins and a leave, the first list, the HTTP list and counts, SSE, presence on a store, and
bad input. How members leave and how their changes are collected is in
test_presence_leaves.py; the counts-only mode and the token claims in test_presence_limits.py.

Every wait is bounded and waits for a frame, an event or a count; the gateways run with a short
`--presence-interval` so the tests stay fast.
"""

from __future__ import annotations

import copy
import json
import time

from conftest import api, assert_json_error, http_client_request, json_ok, store_snapshot
from presence import (  # noqa: F401  (`open_gateway`, `tokened` are fixtures)
    API_KEY,
    Client,
    DUE,
    INTERVAL,
    View,
    WAIT,
    assert_joined_within,
    follow,
    http_members,
    http_presence,
    joins_of,
    leaves_of,
    open_gateway,
    presence_path,
    timed_subscribe,
    token,
    tokened,
    watch,
)
from sse_client import HttpEvents, assert_stream_head, first_event
from wsclient import (
    EPOCH,
    FRAME_TIMEOUT,
    apply_changes,
    assert_changes_frame,
    commit,
    new_store,
    patch_model,
    publish,
    unique,
)


# ---- Joins, leaves and the first list --------------------------------------

def test_a_watcher_sees_a_join_and_later_the_leave(tokened):
    port, topic = tokened.port, unique("chat")
    with Client(port, token("watcher", topics=[topic], presence=[topic])) as watcher, \
            Client(port, token("quinn", topics=[topic], info={"role": "guest"})) as quinn:
        view, _, listed = watch(watcher, "topic", topic)
        assert (listed["clients"], listed["users"]) == (1, 1) and view.users() == ["watcher"], listed
        own = view.by_user("watcher")["client"]

        answer, window = timed_subscribe(quinn, topic=topic)
        joined_at = time.monotonic()
        assert answer == {"type": "subscribed", "topic": topic, "seq": 0, "epoch": EPOCH, "resumed": False}, answer
        arrived, frame = follow(watcher, view, lambda f: joins_of(f, "quinn"), WAIT, "quinn's join")
        assert arrived - joined_at <= DUE, f"the join came {arrived - joined_at:.2f}s after the subscribe"
        # The watcher's own join may ride along; nothing else may.
        others = [j for j in frame["joins"] if j["client"] != own]
        assert len(others) == 1, frame
        join = others[0]
        assert join == {"client": join["client"], "user": "quinn", "info": {"role": "guest"},
                        "joinedAt": join["joinedAt"]}, join
        assert_joined_within(join, window)
        assert frame["leaves"] == [] and (frame["clients"], frame["users"]) == (2, 2), frame
        quinn_id = join["client"]

        # Unsubscribing leaves.
        quinn.send({"type": "unsubscribe", "topic": topic})
        assert quinn.recv() == {"type": "unsubscribed", "topic": topic}
        left_at = time.monotonic()
        arrived, frame = follow(watcher, view, lambda f: leaves_of(f, quinn_id), WAIT, "quinn's leave")
        assert arrived - left_at <= DUE, f"the leave came {arrived - left_at:.2f}s after the unsubscribe"
        assert frame == {"type": "presence", "topic": topic, "clients": 1, "users": 1, "joins": [],
                         "leaves": [{"client": quinn_id, "user": "quinn"}]}, frame

        # The same connection joins again under the same client id, with a new joinedAt.
        answer, window = timed_subscribe(quinn, topic=topic)
        assert answer["type"] == "subscribed", answer
        _, frame = follow(watcher, view, lambda f: joins_of(f, "quinn"), WAIT, "quinn's second join")
        again = joins_of(frame, "quinn")[0]
        assert again["client"] == quinn_id, "one client id per connection"
        assert again["joinedAt"] > join["joinedAt"], (again, join)
        assert_joined_within(again, window)
        assert (frame["clients"], frame["users"]) == (2, 2), frame

        # Closing leaves too.
        quinn.close()
        _, frame = follow(watcher, view, lambda f: leaves_of(f, quinn_id), WAIT, "quinn's leave after close")
        assert frame["leaves"] == [{"client": quinn_id, "user": "quinn"}] and frame["joins"] == [], frame
        assert view.users() == ["watcher"] and view.counts == (1, 1)


def test_the_first_frame_lists_everyone_already_there_and_the_asker(tokened):
    port, topic, elsewhere = tokened.port, unique("room"), unique("room")
    info = {"name": "Zoë \"Z\" Ann", "snow": "\u2603", "age": 7, "tags": ["a", "b"],
            "prefs": {"theme": "dark", "beta": True, "none": None}, "count": -12}
    with Client(port, token("ann", topics=[topic, elsewhere], info=info)) as ann, \
            Client(port, token("bob", topics=[topic])) as bob1, \
            Client(port, token("bob", topics=[topic])) as bob2, \
            Client(port, token("cy", topics=[topic], presence=[topic])) as cy:
        windows = {}
        for name, client in (("ann", ann), ("bob1", bob1), ("bob2", bob2)):
            answer, windows[name] = timed_subscribe(client, topic=topic)
            assert answer["type"] == "subscribed", answer
        assert ann.subscribe(topic=elsewhere)["type"] == "subscribed"
        before = time.time()
        view, _, listed = watch(cy, "topic", topic)
        windows["cy"] = (before, time.time())

        # Everyone subscribed before, and the asker itself; bob's two connections are one user.
        assert (listed["clients"], listed["users"]) == (4, 3), listed
        assert view.users() == ["ann", "bob", "bob", "cy"], listed
        members = sorted(listed["members"], key=lambda m: m["joinedAt"])
        assert [m["user"] for m in members] == ["ann", "bob", "bob", "cy"], listed
        for member, name in zip(members, ("ann", "bob1", "bob2", "cy")):
            assert_joined_within(member, windows[name])
        # info exactly as in the token (values and key order); absent without one.
        assert "info" in members[0] and json.dumps(members[0]["info"]) == json.dumps(info), members[0]
        assert all("info" not in m for m in members[1:]), listed

        # One client id per connection, for all its subscriptions.
        there = list(http_members(port, "topic", elsewhere).values())
        assert len(there) == 1 and there[0]["client"] == members[0]["client"], (there, members[0])
        assert there[0]["user"] == "ann" and json.dumps(there[0]["info"]) == json.dumps(info), there
        assert there[0]["joinedAt"] > members[0]["joinedAt"], "joinedAt is per subscription"

        # The HTTP list agrees with what the asker holds.
        assert http_members(port, "topic", topic) == view.members


def test_http_lists_the_members_and_counts_them(open_gateway):
    port, topic = open_gateway.port, unique("http")
    unused = unique("unused")
    assert http_presence(port, "topic", unused) == {"topic": unused, "clients": 0, "users": 0, "members": []}
    # Yes or no as every flag is read: true, 1 or bare; false or 0; anything else 400.
    for flag in ("stats=true", "stats=1", "stats"):
        assert json_ok(api(port, "GET", presence_path("topic", unused, flag))) == {"topic": unused, "clients": 0, "users": 0}
    assert "members" in http_presence(port, "topic", unused, "stats=0")
    assert_json_error(api(port, "GET", presence_path("topic", unused, "stats=yes")), 400, "bad_request")

    with Client(port) as watcher, Client(port) as one, Client(port) as two:
        view, _, _ = watch(watcher, "topic", topic)
        for client in (one, two):
            assert client.subscribe(topic=topic)["type"] == "subscribed"
        follow(watcher, view, lambda f: len(view.members) == 3, WAIT, "both joins")

        listed = http_presence(port, "topic", topic)
        assert (listed["clients"], listed["users"]) == (3, 0) and not listed.get("truncated"), listed
        assert {m["client"]: m for m in listed["members"]} == view.members
        assert all(m["user"] == "" and "info" not in m for m in listed["members"]), "no token: user \"\", no info"
        assert http_presence(port, "topic", topic, "stats=true") == {"topic": topic, "clients": 3, "users": 0}
        for limit in (1, 2):
            cut = http_presence(port, "topic", topic, f"limit={limit}")
            assert len(cut["members"]) == limit and cut["truncated"] is True, cut
            assert (cut["clients"], cut["users"]) == (3, 0), cut
            assert all(view.members.get(m["client"]) == m for m in cut["members"]), cut
        whole = http_presence(port, "topic", topic, "limit=3")
        assert len(whole["members"]) == 3 and not whole.get("truncated"), whole

    store = new_store(port, {"m": {"v": 1}}, prefix="http-presence")
    assert http_presence(port, "store", store) == {"store": store, "clients": 0, "users": 0, "members": []}
    with Client(port) as one, Client(port) as two:
        for client in (one, two):
            assert client.subscribe(store=store)["type"] == "snapshot"
        listed = http_presence(port, "store", store)
        assert (listed["clients"], listed["users"], len(listed["members"])) == (2, 0, 2), listed
        assert http_presence(port, "store", store, "stats=true") == {"store": store, "clients": 2, "users": 0}
        cut = http_presence(port, "store", store, "limit=1")
        assert len(cut["members"]) == 1 and cut["truncated"] is True and cut["clients"] == 2, cut

    missing = unique("missing")
    assert_json_error(api(port, "GET", presence_path("store", missing)), 404, "not_found")
    assert_json_error(api(port, "GET", presence_path("store", missing, "stats=true")), 404, "not_found")


def test_http_presence_needs_the_api_key_when_one_is_configured(start_server):
    server = start_server("--api-key", API_KEY, "--presence-interval", str(INTERVAL))
    port, topic = server.port, unique("keyed")
    bearer = {"Authorization": f"Bearer {API_KEY}"}
    created = http_client_request(port, "POST", "/api/stores", headers={**bearer, "Content-Type": "application/json"},
                                  body=json.dumps({"name": unique("keyed")}).encode())
    store = json_ok(created, 201)["name"]
    with Client(port) as member:
        assert member.subscribe(topic=topic)["type"] == "subscribed"
        for kind, name in (("topic", topic), ("store", store)):
            for query in ("", "stats=true"):
                for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": API_KEY}):
                    resp = http_client_request(port, "GET", presence_path(kind, name, query), headers=headers)
                    assert_json_error(resp, 401, "unauthorized")
                    assert resp.header("WWW-Authenticate") == "Bearer", resp.headers
                body = json_ok(http_client_request(port, "GET", presence_path(kind, name, query), headers=bearer))
                assert body[kind] == name and body["clients"] == (1 if kind == "topic" else 0), body


# ---- SSE -------------------------------------------------------------------

def test_sse_streams_get_presence_events_the_list_first(tokened):
    port, topic = tokened.port, unique("sse")
    with Client(port, token("ann", topics=[topic])) as ann, \
            Client(port, token("watch", topics=[topic], presence=[topic])) as watcher:
        assert ann.subscribe(topic=topic)["type"] == "subscribed"
        wview, _, _ = watch(watcher, "topic", topic)
        path = f"/api/topics/{topic}/events?presence=true&token={token('sse', topics=[topic], presence=[topic])}"
        with HttpEvents(port, path) as stream:
            assert_stream_head(stream.response)
            event = first_event(stream.reader, {"topic": topic})
            assert event.event == "presence", f"the list must come first: {event}"
            sview = View("topic", topic)
            assert sview.apply(event.json()) == "members", event
            assert sview.users() == ["ann", "sse", "watch"], event
            sse_id = sview.by_user("sse")["client"]
            follow(watcher, wview, lambda f: sse_id in wview.members, WAIT, "the SSE client's join")

            def until(predicate, what):
                deadline = time.monotonic() + WAIT
                while True:
                    event = stream.reader.next_event(max(0.0, deadline - time.monotonic()))
                    if event.event == "presence":
                        sview.apply(event.json())
                    if predicate(event):
                        return event

            with Client(port, token("bob", topics=[topic])) as bob:
                assert bob.subscribe(topic=topic)["type"] == "subscribed"
                until(lambda ev: ev.event == "presence" and sview.by_user("bob"), "bob's join")
                bob_id = sview.by_user("bob")["client"]
                seq = publish(port, topic, {"n": 1})
                event = until(lambda ev: ev.event != "presence", "the message")
                assert event.event == "message" and event.number == str(seq), event
                assert event.json()["data"] == {"n": 1}, event
            event = until(lambda ev: ev.event == "presence" and leaves_of(ev.json(), bob_id), "bob's leave")
            assert event.json()["leaves"] == [{"client": bob_id, "user": "bob"}], event
            assert sview.users() == ["ann", "sse", "watch"]
        # The stream's end is a leave too.
        follow(watcher, wview, lambda f: leaves_of(f, sse_id), WAIT, "the SSE client's leave", allow=("message",))

    store = new_store(port, {"m": {"v": 1}}, prefix="sse-presence")
    path = f"/api/stores/{store}/events?presence=true&token={token('sse', stores=[store], presence=[store])}"
    with HttpEvents(port, path) as stream:
        assert_stream_head(stream.response)
        first, second = stream.reader.next_event(), stream.reader.next_event()
        snapshot, listed = (first, second) if first.event == "snapshot" else (second, first)
        assert (snapshot.event, listed.event) == ("snapshot", "presence"), (first, second)
        assert snapshot.json()["version"] == 1 and snapshot.json()["models"] == {"m": {"v": 1}}, snapshot
        sview = View("store", store)
        assert sview.apply(listed.json()) == "members" and sview.users() == ["sse"], listed
        version = patch_model(port, store, "m", {"v": 2})
        event = stream.reader.next_event()
        assert (event.event, event.number) == ("changes", str(version)), event


# ---- Stores ------------------------------------------------------------------

def test_presence_on_a_store_leaves_its_snapshot_and_changes_intact(tokened):
    port = tokened.port
    store = new_store(port, {"tile-0": {"color": "red"}}, prefix="presence")
    with Client(port, token("ann", stores=[store])) as ann, \
            Client(port, token("watch", stores=[store], presence=[store])) as watcher:
        assert ann.subscribe(store=store)["type"] == "snapshot"
        view, snapshot, listed = watch(watcher, "store", store)
        assert snapshot == {"type": "snapshot", "reset": False, **store_snapshot(port, store)}, snapshot
        assert view.users() == ["ann", "watch"] and listed["users"] == 2, listed
        models = copy.deepcopy(snapshot["models"])

        versions = [patch_model(port, store, "tile-0", {"color": "blue"})]
        bob = Client(port, token("bob", stores=[store]))
        assert bob.subscribe(store=store)["type"] == "snapshot"
        versions.append(commit(port, store, [{"op": "put", "model": "tile-1", "value": {"color": "green"}}]))
        versions.append(patch_model(port, store, "tile-1", {"label": "one"}))
        follow(watcher, view, lambda f: view.by_user("bob"), WAIT, "bob's join", allow=("changes",))
        bob_id = view.by_user("bob")["client"]
        bob.close()
        versions.append(commit(port, store, [{"op": "delete", "model": "tile-1"}]))
        follow(watcher, view, lambda f: leaves_of(f, bob_id), WAIT, "bob's leave", allow=("changes",))
        watcher.find(lambda f: f["type"] == "changes" and f["version"] == versions[-1], FRAME_TIMEOUT,
                     "the last change set")

        # Every change set once, in order, none skipped; presence frames name the store.
        frames = [f for _, f in watcher.frames]
        assert [f["type"] for f in frames].count("snapshot") == 1, frames
        assert {f["type"] for f in frames} <= {"snapshot", "presence", "changes"}, frames
        changes = [f for f in frames if f["type"] == "changes"]
        assert [f["version"] for f in changes] == list(range(snapshot["version"] + 1, versions[-1] + 1)), changes
        for frame in changes:
            assert_changes_frame(frame, store, frame["version"])
            apply_changes(models, frame["changes"])
        assert models == store_snapshot(port, store)["models"]
        assert all("topic" not in f for _, f in watcher.presence)
        assert view.users() == ["ann", "watch"]
        assert http_presence(port, "store", store, "stats=true") == {"store": store, "clients": 2, "users": 2}

        # The subscriber that did not ask for presence got no presence frame.
        last = patch_model(port, store, "tile-0", {"color": "black"})
        ann.find(lambda f: f.get("version") == last, FRAME_TIMEOUT, "the last change set")
        assert [f["type"] for _, f in ann.frames] == ["snapshot"] + ["changes"] * (len(versions) + 1), ann.frames


# ---- Bad input -----------------------------------------------------------------

def test_presence_must_be_a_boolean(open_gateway):
    port, topic = open_gateway.port, unique("bad")
    store = new_store(port, prefix="bad-presence")
    with Client(port) as client:
        for target in ({"topic": topic}, {"store": store}):
            for value in ("yes", 1, "true", [True], {}):
                error = client.subscribe(**target, presence=value)
                assert (error["type"], error.get("code")) == ("error", "bad_message"), (value, error)
                assert "presence" in error["message"], f"the error must name the field: {error}"
        # Nothing was subscribed; `false` is a plain subscription with no presence frames.
        assert client.subscribe(topic=topic, presence=False) == {
            "type": "subscribed", "topic": topic, "seq": 0, "epoch": EPOCH, "resumed": False}
        seq = publish(port, topic, {"n": 1})
        frame = client.recv()
        assert (frame["type"], frame["seq"]) == ("message", seq), f"expected only the message: {frame}"
        assert client.subscribe(store=store)["type"] == "snapshot"

        with Client(port) as watcher, Client(port) as other:
            view, _, _ = watch(watcher, "topic", topic)
            assert other.subscribe(topic=topic)["type"] == "subscribed"
            follow(watcher, view, lambda f: len(view.members) == 3, WAIT, "the other client's join")
            seq = publish(port, topic, {"n": 2})
            watcher.find(lambda f: f.get("seq") == seq, FRAME_TIMEOUT, "the second message")
            frame = client.recv()
            assert (frame["type"], frame["seq"]) == ("message", seq), f"a presence frame without asking: {frame}"
