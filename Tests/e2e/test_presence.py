"""Presence (docs/PROTOCOL.md, "Presence: who is watching"): the members of a topic or a store,
their joins and leaves collected into one frame an interval, the counts-only mode past
`--presence-max-members`, the `presence` and `info` token claims, the HTTP list and counts, SSE,
and every way a member leaves: unsubscribed, closed, reaped by a missed ping, ended as a slow
consumer.

Every wait is bounded and waits for a frame, an event or a count; the gateways run with a short
`--presence-interval` so the tests stay fast.
"""

from __future__ import annotations

import copy
import json
import re
import threading
import time

import pytest
import websockets

from conftest import ConnectionClosed, api, assert_json_error, http_client_request, json_ok, store_snapshot, wait_for
from test_sse import HttpEvents, assert_stream_head, first_event
from test_trust import SECRET, make_token, sse_head
from wsclient import (
    EPOCH,
    CLOSE_TIMEOUT,
    FRAME_TIMEOUT,
    OP_PING,
    OP_TEXT,
    RawWebSocket,
    apply_changes,
    assert_changes_frame,
    assert_recent_micros,
    commit,
    connect,
    kernel_buffer_budget,
    new_store,
    patch_model,
    publish,
    unique,
)

INTERVAL = 0.2            # --presence-interval of most gateways here
MARGIN = 0.5              # beyond an interval, a loaded machine may take this long to deliver
DUE = INTERVAL + MARGIN   # a join or leave reaches the watchers within this
WAIT = DUE + FRAME_TIMEOUT  # the deadline of a wait whose timing is checked apart
COALESCE_INTERVAL = 1.0   # --presence-interval of the coalescing test
API_KEY = "presence-key"
CLIENT_ID = re.compile(r"[0-9a-fA-F]{16}")
MEMBER_KEYS = {"client", "user", "joinedAt"}
JOINED_SLACK_US = 100_000  # joinedAt against the test's own clock, read before and after


# ---- Tokens --------------------------------------------------------------

def token(sub: str, *, topics=(), stores=(), presence=(), info=None, **claims) -> str:
    payload = {"sub": sub, "exp": int(time.time()) + 300, "topics": list(topics),
               "stores": list(stores), "presence": list(presence), **claims}
    if info is not None:
        payload["info"] = info
    return make_token(payload)


# ---- A WebSocket client whose frames are timestamped as they arrive ------

class Client:
    """The `websockets` client, read on a thread: every frame is kept with its arrival time.

    `next` reads the frames in order; `find` searches all of them without moving that cursor.
    """

    def __init__(self, port: int, tok: str | None = None):
        self.ws = connect(port, path=f"/ws?token={tok}" if tok else "/ws", max_queue=None)
        self.frames: list[tuple[float, dict]] = []
        self.presence: list[tuple[float, dict]] = []
        self.ended: BaseException | None = None
        self.pos = 0
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            while True:
                text = self.ws.recv()
                arrived = time.monotonic()
                frame = json.loads(text)
                assert isinstance(frame, dict) and isinstance(frame.get("type"), str), frame
                with self._cond:
                    self.frames.append((arrived, frame))
                    if frame["type"] == "presence":
                        self.presence.append((arrived, frame))
                    self._cond.notify_all()
        except BaseException as exc:  # the end of the connection, or a frame that is not JSON
            with self._cond:
                self.ended = exc
                self._cond.notify_all()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.ws.close()
        self._thread.join(CLOSE_TIMEOUT)

    def send(self, message: dict) -> None:
        self.ws.send(json.dumps(message))

    def _recent(self) -> str:
        return json.dumps([f for _, f in self.frames[-6:]])[:1500]

    def next(self, timeout: float = FRAME_TIMEOUT, what: str = "a frame") -> tuple[float, dict]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.pos >= len(self.frames):
                if self.ended is not None:
                    raise AssertionError(f"the connection ended ({self.ended!r}) before {what}; last frames {self._recent()}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"no {what} within {timeout:.1f}s; last frames {self._recent()}")
                self._cond.wait(remaining)
            item = self.frames[self.pos]
            self.pos += 1
            return item

    def recv(self, timeout: float = FRAME_TIMEOUT) -> dict:
        return self.next(timeout)[1]

    def find(self, predicate, timeout: float, what: str) -> tuple[float, dict]:
        deadline = time.monotonic() + timeout
        with self._cond:
            index = 0
            while True:
                while index < len(self.frames):
                    if predicate(self.frames[index][1]):
                        return self.frames[index]
                    index += 1
                if self.ended is not None:
                    raise AssertionError(f"the connection ended ({self.ended!r}) before {what}; last frames {self._recent()}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"no {what} within {timeout:.1f}s; last frames {self._recent()}")
                self._cond.wait(remaining)

    def subscribe(self, **target) -> dict:
        self.send({"type": "subscribe", **target})
        return self.recv()


# ---- Presence frames and a local copy of the members ---------------------

def check_member(member) -> None:
    assert isinstance(member, dict) and MEMBER_KEYS <= set(member) <= MEMBER_KEYS | {"info"}, member
    assert isinstance(member["client"], str) and CLIENT_ID.fullmatch(member["client"]), member
    assert isinstance(member["user"], str), member
    if "info" in member:
        assert isinstance(member["info"], dict), member
    assert_recent_micros(member["joinedAt"])


def check_leave(leave) -> None:
    assert isinstance(leave, dict) and set(leave) == {"client", "user"}, leave
    assert isinstance(leave["client"], str) and CLIENT_ID.fullmatch(leave["client"]), leave
    assert isinstance(leave["user"], str), leave


def counts_of(members) -> tuple[int, int]:
    """(clients, users): members, and distinct non-empty users."""
    return len(members), len({m["user"] for m in members if m["user"]})


def check_counts(frame: dict) -> None:
    for key in ("clients", "users"):
        assert isinstance(frame[key], int) and not isinstance(frame[key], bool) and frame[key] >= 0, frame
    assert frame["users"] <= frame["clients"], frame


def check_members_list(members, frame) -> None:
    assert isinstance(members, list), frame
    for member in members:
        check_member(member)
    clients = [m["client"] for m in members]
    assert len(set(clients)) == len(clients), f"a client listed twice: {frame}"


def check_presence_frame(frame: dict, kind: str, name: str) -> str:
    """A presence frame of `kind` ("topic" or "store") `name`; returns its form."""
    assert frame.get("type") == "presence" and frame.get(kind) == name, frame
    check_counts(frame)
    body = set(frame) - {"type", kind, "clients", "users"}
    if body == {"members"}:
        check_members_list(frame["members"], frame)
        assert counts_of(frame["members"]) == (frame["clients"], frame["users"]), f"counts disagree with the list: {frame}"
        return "members"
    if body == {"joins", "leaves"}:
        check_members_list(frame["joins"], frame)
        assert isinstance(frame["leaves"], list), frame
        for leave in frame["leaves"]:
            check_leave(leave)
        left = [leave["client"] for leave in frame["leaves"]]
        assert len(set(left)) == len(left), f"a client leaves twice: {frame}"
        assert not set(left) & {j["client"] for j in frame["joins"]}, f"a client both joins and leaves: {frame}"
        assert frame["joins"] or frame["leaves"], f"a change frame that changes nothing: {frame}"
        return "changes"
    assert body == {"countsOnly"} and frame["countsOnly"] is True, f"not one of members, joins+leaves, countsOnly: {frame}"
    return "counts"


class View:
    """The members as a presence subscriber keeps them, applying every frame as PROTOCOL.md says."""

    def __init__(self, kind: str, name: str):
        self.kind, self.name = kind, name
        self.members: dict[str, dict] = {}
        self.counts: tuple[int, int] | None = None
        self.counts_only = False

    def apply(self, frame: dict) -> str:
        form = check_presence_frame(frame, self.kind, self.name)
        if form == "members":
            self.members = {m["client"]: m for m in frame["members"]}
            self.counts_only = False
        elif form == "changes":
            assert not self.counts_only, f"joins and leaves after countsOnly, with no whole list first: {frame}"
            for join in frame["joins"]:
                self.members[join["client"]] = join
            for leave in frame["leaves"]:
                self.members.pop(leave["client"], None)
            assert counts_of(list(self.members.values())) == (frame["clients"], frame["users"]), \
                f"the counts disagree with the members after applying {frame}: {sorted(self.members.values(), key=str)}"
        else:
            self.counts_only = True
        self.counts = (frame["clients"], frame["users"])
        return form

    def by_user(self, user: str) -> dict | None:
        found = [m for m in self.members.values() if m["user"] == user]
        assert len(found) <= 1, found
        return found[0] if found else None

    def users(self) -> list[str]:
        return sorted(m["user"] for m in self.members.values())


def watch(client: Client, kind: str, name: str, **extra) -> tuple[View, dict, dict]:
    """Subscribes with presence: (view, the answer to the subscribe, the first presence frame)."""
    client.send({"type": "subscribe", kind: name, "presence": True, **extra})
    view = View(kind, name)
    if kind == "topic":
        # As in PROTOCOL.md's example: `subscribed`, then the members.
        answer = client.recv()
        assert answer.get("type") == "subscribed" and answer.get("topic") == name, answer
        assert set(answer) == {"type", "topic", "seq", "epoch", "resumed"} and answer["resumed"] is False, answer
        listed = client.recv()
    else:
        # The snapshot answers a store subscription; the members come next to it.
        first, second = client.recv(), client.recv()
        answer, listed = (first, second) if first.get("type") == "snapshot" else (second, first)
        assert answer.get("type") == "snapshot" and answer.get("store") == name, (first, second)
    assert listed.get("type") == "presence", f"expected the members list, got {listed}"
    assert view.apply(listed) == "members", f"the first presence frame must hold the whole list: {listed}"
    return view, answer, listed


def follow(client: Client, view: View, until, timeout: float, what: str, allow=()) -> tuple[float, dict]:
    """Applies the client's presence frames in order until `until(frame)`; other frame types
    must be in `allow`. Returns the arrival time and the frame."""
    deadline = time.monotonic() + timeout
    while True:
        arrived, frame = client.next(max(0.0, deadline - time.monotonic()), what)
        if frame["type"] != "presence":
            assert frame["type"] in allow, f"unexpected frame while waiting for {what}: {frame}"
            continue
        view.apply(frame)
        if until(frame):
            return arrived, frame


def joins_of(frame: dict, user: str | None = None, client: str | None = None) -> list[dict]:
    return [j for j in frame.get("joins", []) if (user is None or j["user"] == user)
            and (client is None or j["client"] == client)]


def leaves_of(frame: dict, client: str) -> list[dict]:
    return [leave for leave in frame.get("leaves", []) if leave["client"] == client]


def frame_after(client: Client, frame: dict) -> dict | None:
    """The presence frame the client got right after `frame`."""
    frames = [f for _, f in client.presence]
    index = next(i for i, f in enumerate(frames) if f is frame)
    return frames[index + 1] if index + 1 < len(frames) else None


def assert_joined_within(member: dict, window: tuple[float, float]) -> None:
    before, after = window
    assert before * 1e6 - JOINED_SLACK_US <= member["joinedAt"] <= after * 1e6 + JOINED_SLACK_US, \
        f"joinedAt {member['joinedAt']} is not the subscription's start ({before:.3f}-{after:.3f} s)"


def timed_subscribe(client: Client, **target) -> tuple[dict, tuple[float, float]]:
    before = time.time()
    answer = client.subscribe(**target)
    return answer, (before, time.time())


# ---- HTTP ----------------------------------------------------------------

def presence_path(kind: str, name: str, query: str = "") -> str:
    return f"/api/{kind}s/{name}/presence" + (f"?{query}" if query else "")


def http_presence(port: int, kind: str, name: str, query: str = "") -> dict:
    """GET …/presence, checked: the counts, and unless `stats`, the members (perhaps truncated)."""
    body = json_ok(api(port, "GET", presence_path(kind, name, query)))
    assert isinstance(body, dict) and body.get(kind) == name, body
    check_counts(body)
    if "stats=true" in query:
        assert set(body) == {kind, "clients", "users"}, body
        return body
    assert {kind, "clients", "users", "members"} <= set(body) <= {kind, "clients", "users", "members", "truncated"}, body
    check_members_list(body["members"], body)
    truncated = body.get("truncated", False)
    assert isinstance(truncated, bool), body
    assert truncated == (len(body["members"]) < body["clients"]), f"truncated must say whether members are missing: {body}"
    if not truncated:
        assert counts_of(body["members"]) == (body["clients"], body["users"]), body
    return body


def http_members(port: int, kind: str, name: str) -> dict[str, dict]:
    return {m["client"]: m for m in http_presence(port, kind, name)["members"]}


# ---- Gateways ------------------------------------------------------------

@pytest.fixture(scope="module")
def tokened(module_servers):
    """Tokens required, so every member has a user; presence frames every INTERVAL."""
    return module_servers("--token-secret", SECRET, "--presence-interval", str(INTERVAL))


@pytest.fixture(scope="module")
def open_gateway(module_servers):
    """No tokens: every member's user is ""."""
    return module_servers("--presence-interval", str(INTERVAL))


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
    assert http_presence(port, "topic", unused, "stats=true") == {"topic": unused, "clients": 0, "users": 0}

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
                assert event.event == "message" and event.id == str(seq), event
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
        assert (event.event, event.id) == ("changes", str(version)), event


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
