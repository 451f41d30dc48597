"""Helpers for the presence tests (test_presence*.py, test_cluster_presence.py): tokens with a
`presence` claim, a WebSocket client whose frames are timestamped as they arrive, checks of
presence frames and a local copy of the members, the HTTP presence list, and the module's gateways.
"""

from __future__ import annotations

import json
import re
import threading
import time

import pytest

from conftest import api, json_ok
from test_trust import SECRET, make_token
from wsclient import CLOSE_TIMEOUT, FRAME_TIMEOUT, assert_recent_micros, connect

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
                self._wait_for_more(deadline, timeout, what)
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
                self._wait_for_more(deadline, timeout, what)

    def _wait_for_more(self, deadline: float, timeout: float, what: str) -> None:
        """With the condition held: waits for another frame, or fails once the connection has
        ended or `deadline` has passed."""
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
