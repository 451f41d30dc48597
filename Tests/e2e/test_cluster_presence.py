"""Presence across the cluster: every node's members in every node's presence, and a node that
dies taken out within `--presence-interval` plus `--heartbeat-timeout` (invariant 44). Real
nodes on one real redis-server; clients are Python `websockets` and curl-like HTTP."""

import signal
import time

from conftest import api, json_ok, wait_for
from presence import Client, View
from test_cluster import redis, redis_installed, start_node  # noqa: F401  (fixtures)
from wsclient import unique

INTERVAL = 0.2
HEARTBEAT_TIMEOUT = 1.0
ARGS = ("--presence-interval", str(INTERVAL), "--heartbeat-timeout", str(HEARTBEAT_TIMEOUT))


def follow_until(watcher: Client, view: View, done, timeout: float, what: str) -> float:
    """Applies the watcher's presence frames until `done(view)`; returns when that frame arrived."""
    deadline = time.monotonic() + timeout
    while not done(view):
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"no {what} within {timeout:.1f}s: members {sorted(view.members)}, counts {view.counts}"
        arrived, frame = watcher.next(remaining, what)
        if frame["type"] == "presence":
            view.apply(frame)
    return arrived


def http_members(port: int, topic: str) -> tuple[int, set[str]]:
    body = json_ok(api(port, "GET", f"/api/topics/{topic}/presence"))
    return body["clients"], {m["client"] for m in body["members"]}


def test_presence_spans_the_nodes_and_a_dead_node_leaves_it(start_server, redis):  # noqa: F811
    a = start_node(start_server, redis, *ARGS)
    b = start_node(start_server, redis, *ARGS)
    topic = unique("room")
    on_a = [Client(a.port) for _ in range(2)]
    for client in on_a:
        assert client.subscribe(topic=topic)["type"] == "subscribed"
    watcher = Client(b.port)
    assert watcher.subscribe(topic=topic, presence=True)["type"] == "subscribed"
    view = View("topic", topic)

    # The watcher's own node lists it at once; node A's two members follow as joins.
    follow_until(watcher, view, lambda v: len(v.members) == 3, 5, "node A's members")
    assert view.counts == (3, 0)
    # Either node answers over HTTP with every node's members.
    for port in (a.port, b.port):
        clients, members = http_members(port, topic)
        assert clients == 3 and members == set(view.members), (port, members, view.members)

    # A member on A leaves as it would on one node.
    on_a[0].close()
    follow_until(watcher, view, lambda v: len(v.members) == 2, 5, "the leave from node A")

    # Node A dies without a word: its member leaves within the interval and the heartbeat time-out.
    killed = time.monotonic()
    a.proc.send_signal(signal.SIGKILL)
    a.proc.wait(5)
    left = follow_until(watcher, view, lambda v: len(v.members) == 1, 10, "the dead node's leave")
    took = left - killed
    # Heartbeats come every third of the time-out, so the dead node is named within 4/3 of it, and
    # its leave goes out within one interval after that; the slack is the notice and one read.
    assert took < HEARTBEAT_TIMEOUT * 4 / 3 + INTERVAL + 1.0, f"the dead node left presence after {took:.2f}s"
    assert took > HEARTBEAT_TIMEOUT * 0.5, f"the node was taken for dead after {took:.2f}s, before its time-out"
    assert view.counts == (1, 0)
    clients, members = http_members(b.port, topic)
    assert clients == 1 and members == set(view.members)
    watcher.close()
    on_a[1].close()


def test_a_node_joining_later_sees_and_is_seen(start_server, redis):  # noqa: F811
    a = start_node(start_server, redis, *ARGS)
    topic = unique("late")
    watcher_a = Client(a.port)
    assert watcher_a.subscribe(topic=topic, presence=True)["type"] == "subscribed"
    view_a = View("topic", topic)
    follow_until(watcher_a, view_a, lambda v: len(v.members) == 1, 5, "the watcher itself")
    b = start_node(start_server, redis, *ARGS)
    watcher_b = Client(b.port)
    assert watcher_b.subscribe(topic=topic, presence=True)["type"] == "subscribed"
    view_b = View("topic", topic)
    # Each sees both: B reads A's entry when its first follower comes, A hears of B's.
    follow_until(watcher_b, view_b, lambda v: len(v.members) == 2, 5, "node A's member on B")
    follow_until(watcher_a, view_a, lambda v: len(v.members) == 2, 5, "node B's member on A")
    assert set(view_a.members) == set(view_b.members)
    # B's member leaves: B shares its emptied entry and A hears of it, with no time-out.
    watcher_b.close()
    follow_until(watcher_a, view_a, lambda v: len(v.members) == 1, 5, "node B's leave")
    watcher_a.close()


def test_a_node_that_shuts_down_leaves_presence_at_once(start_server, redis):  # noqa: F811
    # A heartbeat time-out far longer than the test waits: only the node's own goodbye explains
    # the leave.
    args = ("--presence-interval", str(INTERVAL), "--heartbeat-timeout", "60", "--drain-timeout", "5")
    a = start_node(start_server, redis, *args)
    b = start_node(start_server, redis, *args)
    topic = unique("bye")
    on_a = Client(a.port)
    assert on_a.subscribe(topic=topic)["type"] == "subscribed"
    watcher = Client(b.port)
    assert watcher.subscribe(topic=topic, presence=True)["type"] == "subscribed"
    view = View("topic", topic)
    follow_until(watcher, view, lambda v: len(v.members) == 2, 5, "node A's member")
    a.proc.send_signal(signal.SIGTERM)
    follow_until(watcher, view, lambda v: len(v.members) == 1, 10, "the leave of the node that shut down")
    assert a.proc.wait(10) == 0
    watcher.close()
    on_a.close()
