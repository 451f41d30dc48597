"""The browser client library, Public/receptionist-client.js (docs/CLIENT.md), in headless Chromium
against the real gateway, over WebSocket and over Server-Sent Events.

A test page (client_page.py, written next to a copy of Public/) imports the library and records
what each client and subscription reports. The tests drive it: options are checked before anything
is sent, the example page in the docs shows the store, stores followed whole and through options
converge to the store's (projected) state, topics deliver in sequence order and report gaps, and
presence is kept live. A restarted gateway is in test_client_library_restart.py. Every wait polls
with a deadline; nothing sleeps and hopes.
"""

from __future__ import annotations

import re

import pytest

from client_page import (  # noqa: F401  (`gateway`, `page`, `public_dir` are fixtures)
    DRAIN,
    EXAMPLE,
    TRANSPORTS,
    assert_recent,
    call,
    gateway,
    open_page,
    page,
    public_dir,
    publish_utf8,
    sockets,
    source_urls,
    start_animation,
    view,
    wait_converged,
    wait_status,
)
from conftest import api, json_ok, stop_job, store_snapshot, wait_version_above
from selenium.webdriver.common.by import By
from viewer import chromium_installed, css_rgb, patch_color, wait  # noqa: F401 (a fixture)
from wsclient import commit, new_store, publish, unique


# ---- Options are checked before anything is sent -----------------------------------------

def test_bad_options_and_a_second_subscription_to_a_store_throw(page, gateway):
    open_page(page, gateway.port)
    call(page, "client", "one", {})
    call(page, "store", "one", "tiles", "tiles", {})
    refusals = page.execute_script("""
        const attempt = (work) => { try { work(); return null; } catch (error) { return `${error.name}: ${error.message}`; } };
        return [
            attempt(() => harness.store('one', 'again', 'tiles', {})),
            attempt(() => harness.store('one', 'x', 'other', {models: []})),
            attempt(() => harness.store('one', 'x', 'other', {models: ['']})),
            attempt(() => harness.store('one', 'x', 'other', {paths: ['style..border']})),
            attempt(() => harness.store('one', 'x', 'other', {maxRate: 0})),
            attempt(() => harness.store('one', 'x', 'other', {maxRate: 1001})),
            attempt(() => harness.store('one', 'x', 'other', {maxRate: 0.005})),
            attempt(() => harness.store('one', 'x', 'other', {old: 'yes'})),
            attempt(() => harness.topic('one', 'x', 'news', {maxRate: 4})),
            attempt(() => harness.topic('one', 'x', 'news', {since: -1})),
        ];""")
    assert refusals[0].startswith("Error: ") and "already subscribes to store 'tiles'" in refusals[0], refusals
    for refusal, field in zip(refusals[1:], ["models", "model id", "path", "maxRate", "maxRate", "maxRate", "old", "maxRate", "since"]):
        assert refusal is not None and refusal.startswith("TypeError: ") and field in refusal, refusals
    wait_status(page, ["tiles"], "live")
    # Nothing refused reached the gateway: one subscribe, on one socket.
    assert [s["sent"] for s in sockets(page)] == [[{"type": "subscribe", "store": "tiles"}]]


# ---- The documented example ----------------------------------------------------------------

def test_the_example_page_in_the_docs_shows_the_store(page, gateway):
    port = gateway.port
    page.get(f"http://127.0.0.1:{port}/{EXAMPLE}")

    def squares(d):
        raw = d.execute_script("""
            const out = {};
            for (const cell of document.querySelectorAll('#grid [data-model]'))
                out[cell.dataset.model] = getComputedStyle(cell).backgroundColor;
            return out;""")
        return {model: css_rgb(color) for model, color in raw.items()}

    def shows_store(d):
        snapshot = store_snapshot(port, "tiles")
        return squares(d) == {m: css_rgb(v["color"]) for m, v in snapshot["models"].items()} and \
            d.find_element(By.ID, "version").text == str(snapshot["version"])

    wait(page, shows_store, 10.0, "the example page never showed the store")
    assert page.find_element(By.ID, "status").text == "live"
    order = page.execute_script("return [...document.querySelectorAll('#grid [data-model]')].map(c => c.dataset.model)")
    assert order == [f"tile-{n}" for n in range(64)]
    patch_color(port, "tile-3", "#0a1b2c")
    wait(page, lambda d: squares(d)["tile-3"] == css_rgb("#0a1b2c"), 5.0, "the example page missed a change")
    assert re.fullmatch(r"\d+ ms old", page.find_element(By.ID, "staleness").text)
    wait(page, shows_store, 5.0, "the example page does not match the store")


# ---- Stores ------------------------------------------------------------------------------

def shaped(color: str, label: str, width: int) -> dict:
    return {"color": color, "label": label, "style": {"border": {"width": width, "color": "#000000"}, "shadow": "none"}}


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_stores_followed_whole_and_through_options_converge(page, gateway, transport):
    port = gateway.port
    shapes = new_store(port, {"a": shaped("#111111", "A", 1), "ab": shaped("#222222", "AB", 2),
                              "b": shaped("#333333", "B", 3)}, prefix="shapes")
    coalesced = {"paths": ["color"], "maxRate": 4, "models": ["tile-1*"]}
    projected = {"models": ["a*"], "paths": ["style.border", "color"], "old": True}
    open_page(page, port)
    # One client follows two stores whole over one connection; another follows them through options.
    call(page, "client", "whole", {"transport": transport})
    call(page, "store", "whole", "tiles", "tiles", {})
    call(page, "store", "whole", "shapes", shapes, {})
    call(page, "client", "options", {"transport": transport})
    call(page, "store", "options", "tiles-coalesced", "tiles", coalesced)
    call(page, "store", "options", "shapes-projected", shapes, projected)
    everything = {"tiles": {}, "tiles-coalesced": coalesced}
    wait_status(page, ["tiles", "shapes", "tiles-coalesced", "shapes-projected"], "live")
    start = view(page, "tiles")["version"]
    wait_converged(page, port, "tiles", everything)
    wait_converged(page, port, shapes, {"shapes": {}, "shapes-projected": projected})
    assert view(page, "shapes-projected")["models"] == {
        "a": {"color": "#111111", "style": {"border": {"width": 1, "color": "#000000"}}},
        "ab": {"color": "#222222", "style": {"border": {"width": 2, "color": "#000000"}}}}

    job = start_animation(port, "tiles", 120)
    try:
        # Changes inside and above the listed paths, deletions that leave objects empty, models
        # created and deleted, and a change set that the projection filters out entirely.
        commit(port, shapes, [{"op": "set", "model": "a", "path": "style.border.width", "value": 5}])
        commit(port, shapes, [{"op": "patch", "model": "ab", "value": {"style": {"border": None}}}])
        commit(port, shapes, [{"op": "set", "model": "a", "path": "label", "value": "not followed"}])
        commit(port, shapes, [{"op": "delete", "model": "b"},
                              {"op": "put", "model": "a2", "value": shaped("#444444", "A2", 4)}])
        commit(port, shapes, [{"op": "put", "model": "ab", "value": {"color": "#555555", "style": {"shadow": "x"}}}])
        wait_converged(page, port, shapes, {"shapes": {}, "shapes-projected": projected})
        wait_version_above(port, "tiles", start + 120, timeout=10.0)
    finally:
        stop_job(port, job)
    final = wait_converged(page, port, "tiles", everything)

    # The projected copy dropped the objects a removal left empty above a listed path.
    assert view(page, "shapes-projected")["models"] == {
        "a": {"color": "#111111", "style": {"border": {"width": 5, "color": "#000000"}}},
        "ab": {"color": "#555555"},
        "a2": {"color": "#444444", "style": {"border": {"width": 4, "color": "#000000"}}}}
    # With `old`, each change carried the value it replaced; a model outside `models` never came.
    changes = view(page, "shapes-projected")["log"]["changes"]
    assert {"model": "a", "path": "style.border.width", "kind": "updated", "value": 5, "old": 1} in changes, changes
    assert all(change["model"] != "b" for change in changes), changes

    # Whole: one frame per change set, in order, none skipped (no resync was needed).
    tiles = view(page, "tiles")
    frames = [f for f in tiles["log"]["frames"] if f["type"] == "changes"]
    first = tiles["log"]["snapshots"][0]["version"]
    assert [f["version"] for f in frames] == list(range(first + 1, final["version"] + 1))
    assert all(not f["conflated"] and f["committedAt"] == f["firstCommittedAt"] for f in frames)
    assert tiles["bytes"] == sum(f["bytes"] for f in tiles["log"]["frames"]) and tiles["bytes"] > 0
    # Coalesced: at most maxRate frames a second, each naming what it covers.
    coalesced_frames = [f for f in view(page, "tiles-coalesced")["log"]["frames"] if f["type"] == "changes"]
    assert coalesced_frames and all(f["conflated"] for f in coalesced_frames), coalesced_frames
    for frame in coalesced_frames:
        assert_recent(frame["committedAt"])
        assert frame["firstCommittedAt"] <= frame["committedAt"] and frame["from"] < frame["version"], frame
    span = (coalesced_frames[-1]["receivedAt"] - coalesced_frames[0]["receivedAt"]) / 1000
    assert len(coalesced_frames) <= 4 * span + 2, (len(coalesced_frames), span)
    assert len(coalesced_frames) < len(frames) / 3, (len(coalesced_frames), len(frames))

    # Unsubscribing stops one subscription and leaves the other on the same store alone.
    call(page, "unsubscribe", "shapes")
    wait_status(page, ["shapes"], "closed")
    before = view(page, "shapes")["version"]
    commit(port, shapes, [{"op": "set", "model": "a", "path": "color", "value": "#666666"}])
    wait_converged(page, port, shapes, {"shapes-projected": projected})
    assert view(page, "shapes")["version"] == before

    if transport == "websocket":
        # One connection per client, on the subprotocol, each subscribe as asked (and nothing else).
        opened = sockets(page)
        assert len(opened) == 2 and all(s["protocol"] == "receptionist.v1" for s in opened), opened
        assert opened[0]["sent"] == [{"type": "subscribe", "store": "tiles"}, {"type": "subscribe", "store": shapes},
                                     {"type": "unsubscribe", "store": shapes}]
        assert opened[1]["sent"] == [{"type": "subscribe", "store": "tiles", **coalesced},
                                     {"type": "subscribe", "store": shapes, **projected}]
        assert source_urls(page) == []
    else:
        # One event stream per subscription, its options in the query.
        base = f"http://127.0.0.1:{port}/api/stores"
        assert source_urls(page) == [f"{base}/tiles/events?heartbeat=event", f"{base}/{shapes}/events?heartbeat=event",
                                     f"{base}/tiles/events?models=tile-1*&paths=color&maxRate=4&heartbeat=event",
                                     f"{base}/{shapes}/events?models=a*&paths=style.border,color&old=true&heartbeat=event"]
        assert sockets(page) == []


# ---- Topics ------------------------------------------------------------------------------

@pytest.mark.parametrize("transport", TRANSPORTS)
def test_topic_messages_arrive_in_order_with_their_seq_and_gaps_are_reported(page, start_server, public_dir, transport):
    server = start_server("--history", "5", *DRAIN, public=public_dir)
    port = server.port
    topic = unique("news")
    for n in range(1, 9):
        assert publish(port, topic, {"n": n}) == n
    open_page(page, port)
    call(page, "client", "one", {"transport": transport})
    call(page, "topic", "one", "current", topic, {})
    wait_status(page, ["current"], "live")
    assert view(page, "current")["seq"] == 8
    for n in range(9, 21):
        publish_utf8(port, topic, {"n": n, "text": "é ✓"})
    # From the start of the topic: the history keeps the last five, so 1 to 15 are reported lost.
    call(page, "client", "two", {"transport": transport})
    call(page, "topic", "two", "history", topic, {"since": 0})
    wait_status(page, ["history"], "live")
    publish_utf8(port, topic, {"n": 21, "text": "é ✓"})
    wait(page, lambda d: view(d, "current")["seq"] == 21 and view(d, "history")["seq"] == 21, 10.0,
         "the messages never all arrived")
    live, history = view(page, "current"), view(page, "history")
    assert [(m["seq"], m["data"]["n"]) for m in live["log"]["messages"]] == [(n, n) for n in range(9, 22)]
    assert live["log"]["messages"][-1]["data"] == {"n": 21, "text": "é ✓"}
    for message in live["log"]["messages"]:
        assert_recent(message["publishedAt"])
    assert live["log"]["gaps"] == []
    assert history["log"]["gaps"] == [{"from": 1, "to": 15}]
    assert [m["seq"] for m in history["log"]["messages"]] == list(range(16, 22))
    # A frame's bytes are the UTF-8 length of its JSON ("é" and "✓" take 2 and 3 bytes).
    frame = live["log"]["frames"][-1]
    text = ('{"type":"message","topic":"%s","seq":21,"publishedAt":%d,"data":{"n":21,"text":"é ✓"}}'
            % (topic, frame["publishedAt"]))
    assert frame["bytes"] == len(text.encode("utf-8")), frame


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_store_deleted_while_followed_is_reported_and_comes_back_reset(page, gateway, transport):
    """The gateway ends a deleted store's subscription: the client leaves `live` with a
    `no_such_store` error over either transport, retries, and takes the store made again as a
    reset snapshot. (Over SSE the stream's `unsubscribed` event was ignored: the subscription
    showed `reconnecting` with no error while its retries were refused `404`.)"""
    port = gateway.port
    store = new_store(port, {"a": {"v": 1}}, prefix="deleted")
    open_page(page, port)
    call(page, "client", "one", {"transport": transport})
    call(page, "store", "one", "followed", store, {})
    wait_status(page, ["followed"], "live")
    json_ok(api(port, "DELETE", f"/api/stores/{store}"))
    wait(page, lambda d: "no_such_store" in view(d, "followed")["log"]["errors"], 10.0, "the deletion was never reported")
    assert view(page, "followed")["status"] == "reconnecting"
    json_ok(api(port, "POST", "/api/stores", {"name": store}), 201)
    commit(port, store, [{"op": "put", "model": "b", "value": {"v": 2}}])
    wait(page, lambda d: view(d, "followed")["models"] == {"b": {"v": 2}}, 20.0, "the store made again never came")
    followed = view(page, "followed")
    assert followed["status"] == "live" and followed["log"]["snapshots"][-1]["reset"] is True, followed["log"]


# ---- Presence ------------------------------------------------------------------------------

@pytest.mark.parametrize("transport", TRANSPORTS)
def test_presence_is_kept_live_as_clients_join_and_leave(page, gateway, transport):
    """A topic followed with `presence: true` keeps the gateway's member list: the page's own
    connection first, then others as they join, and without them once they leave."""
    from wsclient import connect, send_json, recv_json

    topic = unique("presence")
    open_page(page, gateway.port)
    call(page, "client", "one", {"transport": transport})
    call(page, "topic", "one", "room", topic, {"presence": True})
    wait_status(page, ["room"], "live")

    def gateway_members():
        listing = json_ok(api(gateway.port, "GET", f"/api/topics/{topic}/presence"), 200)
        return sorted(member["client"] for member in listing["members"]), listing

    def wait_same(count: int, why: str):
        def same(d):
            members, listing = gateway_members()
            seen = call(d, "presence", "room")
            return len(members) == count and seen["members"] == members and seen["clients"] == listing["clients"]
        wait(page, same, 10.0, f"{why}: the page holds {call(page, 'presence', 'room')}, the gateway {gateway_members()[1]}")

    wait_same(1, "the page's own subscription")
    others = [connect(gateway.port) for _ in range(2)]
    try:
        for ws in others:
            send_json(ws, {"type": "subscribe", "topic": topic})
            assert recv_json(ws)["type"] == "subscribed"
        wait_same(3, "two clients joined")
        others.pop().close()
        wait_same(2, "one client left")
    finally:
        for ws in others:
            ws.close()
    wait_same(1, "the other left too")
    log = view(page, "room")["log"]["presence"]
    assert log[0]["whole"] and log[0]["clients"] == 1, log
    assert sum(entry["joins"] for entry in log) >= 2 and sum(entry["leaves"] for entry in log) >= 2, log
    assert call(page, "presence", "room")["countsOnly"] is False
