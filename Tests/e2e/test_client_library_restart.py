"""The browser client library, Public/receptionist-client.js (docs/CLIENT.md), in headless Chromium
against a gateway that restarts: one restarted on the same port is followed into its new store
without reloading the page, and a durable one is resumed with nothing missed and no reset.

The test page is client_page.py's. Every wait polls with a deadline; nothing sleeps and hopes.
"""

from __future__ import annotations

import pytest

from client_page import (  # noqa: F401  (`page`, `public_dir` are fixtures)
    DRAIN,
    TRANSPORTS,
    call,
    open_page,
    page,
    public_dir,
    set_offline,
    sockets,
    source_urls,
    view,
    wait_converged,
    wait_status,
)
from conftest import api, json_ok, store_snapshot, store_version
from viewer import chromium_installed, wait  # noqa: F401 (a fixture)
from wsclient import publish


# ---- A restarted gateway -----------------------------------------------------------------

@pytest.mark.parametrize("transport", TRANSPORTS)
def test_restarted_gateway_is_followed_into_its_new_store_without_reload(page, start_server, public_dir, transport):
    first = start_server("--demo", "--demo-rate", "0.001", *DRAIN, public=public_dir)
    port = first.port
    topic = "restart-news"
    for n in range(1, 4):
        publish(port, topic, {"n": n})
    colored = {"paths": ["color"], "models": ["tile-1*"]}
    open_page(page, port)
    call(page, "client", "one", {"transport": transport})
    call(page, "store", "one", "tiles", "tiles", {})
    call(page, "topic", "one", "news", topic, {})
    call(page, "client", "two", {"transport": transport})
    call(page, "store", "two", "colored", "tiles", colored)
    wait_status(page, ["tiles", "news", "colored"], "live")
    for model, color in (("tile-7", "#123456"), ("tile-12", "#abcdef"), ("tile-13", "#fedcba")):
        json_ok(api(port, "PATCH", f"/api/stores/tiles/models/{model}", {"color": color}))
    before = wait_converged(page, port, "tiles", {"tiles": {}, "colored": colored})
    page.execute_script("window.__marker = 1")

    first.stop()
    assert first.proc.returncode == 0
    # The gateway drained: each client was told so (WebSocket: `draining`, then 1001; SSE: a
    # `draining` event, then the end of the stream) and goes on trying.
    wait(page, lambda d: all(call(d, "clientLog", c)["draining"] for c in ("one", "two")), 5.0,
         "no draining notice reached the page")
    if transport == "websocket":
        assert 1001 in call(page, "clientLog", "one")["closes"]
    wait(page, lambda d: all(view(d, s)["status"] in ("reconnecting", "connecting") for s in ("tiles", "news", "colored")),
         5.0, "the subscriptions never noticed the gateway had gone")
    # Hold the page off the network while the new gateway's store moves past the version the
    # page holds: only the epoch can then tell the page's version from the new store's.
    set_offline(page, True)
    wait(page, lambda d: all(view(d, s)["status"] == "offline" for s in ("tiles", "news", "colored")), 10.0,
         "the subscriptions never showed the browser offline")

    second = start_server("--demo", "--demo-rate", "0.001", *DRAIN, env={"RECEPTIONIST_PORT": str(port)},
                          public=public_dir)
    assert second.port == port
    fresh = store_snapshot(port, "tiles")
    assert fresh["epoch"] != before["epoch"]
    for n in range(before["version"] - fresh["version"] + 2):
        json_ok(api(port, "PATCH", "/api/stores/tiles/models/tile-20", {"color": f"#0000{n % 256:02x}"}))
    assert store_version(port, "tiles") > before["version"]
    assert publish(port, topic, {"n": "after"}) == 1

    set_offline(page, False)
    after = wait_converged(page, port, "tiles", {"tiles": {}, "colored": colored}, timeout=20.0)
    assert after["models"]["tile-7"]["color"] != "#123456"
    tiles = view(page, "tiles")
    assert tiles["epoch"] == after["epoch"]
    assert tiles["log"]["snapshots"][-1] == {"version": after["version"], "epoch": after["epoch"], "reset": True}
    assert view(page, "colored")["log"]["snapshots"][-1]["reset"] is True
    # The topic started a new life: the client says so, and takes its messages from its start.
    wait(page, lambda d: [m["seq"] for m in view(d, "news")["log"]["messages"]][-1:] == [1], 10.0,
         "the new gateway's message never arrived")
    news = view(page, "news")
    assert news["log"]["resets"] == [{"seq": 1, "previous": 3}]
    assert news["log"]["messages"][-1]["data"] == {"n": "after"}
    # The resume named the version and the life of the store it came from.
    if transport == "websocket":
        resumes = [m for s in sockets(page) for m in s["sent"] if m.get("since") is not None and m.get("store")]
        assert {"type": "subscribe", "store": "tiles", "since": before["version"], "epoch": before["epoch"]} in resumes, resumes
    else:
        urls = source_urls(page)
        assert f"http://127.0.0.1:{port}/api/stores/tiles/events?since={before['version']}&epoch={before['epoch']}&heartbeat=event" in urls, urls
    assert page.execute_script("return window.__marker") == 1, "the page was reloaded"
    assert page.execute_script("return performance.getEntriesByType('navigation').length") == 1


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
def test_durable_gateway_restarted_is_resumed_with_nothing_missed_and_no_reset(
        page, start_server, public_dir, transport, kill, tmp_path):
    """With --data-dir the store and topic come back as they were, in the same epoch: the page's
    subscriptions resume with `since` and `epoch` and get exactly what they missed, no reset."""
    data = str(tmp_path / "data")
    first = start_server("--demo", "--demo-rate", "0.001", "--data-dir", data, *DRAIN, public=public_dir)
    port = first.port
    topic = "durable-news"
    for n in range(1, 4):
        publish(port, topic, {"n": n})
    open_page(page, port)
    call(page, "client", "one", {"transport": transport})
    call(page, "store", "one", "tiles", "tiles", {})
    call(page, "topic", "one", "news", topic, {})
    wait_status(page, ["tiles", "news"], "live")
    json_ok(api(port, "PATCH", "/api/stores/tiles/models/tile-7", {"color": "#123456"}))
    before = wait_converged(page, port, "tiles", {"tiles": {}})
    wait(page, lambda d: view(d, "news")["seq"] == 3, 10.0, "the topic's number never reached the page")
    page.execute_script("window.__marker = 1")
    snapshots_before = len(view(page, "tiles")["log"]["snapshots"])

    if kill:
        first.proc.kill()
        first.proc.wait(timeout=10)
    else:
        first.stop()
        assert first.proc.returncode == 0
    wait(page, lambda d: all(view(d, s)["status"] in ("reconnecting", "connecting") for s in ("tiles", "news")),
         10.0, "the subscriptions never noticed the gateway had gone")
    set_offline(page, True)
    wait(page, lambda d: all(view(d, s)["status"] == "offline" for s in ("tiles", "news")), 10.0,
         "the subscriptions never showed the browser offline")

    second = start_server("--demo", "--demo-rate", "0.001", "--data-dir", data, *DRAIN,
                          env={"RECEPTIONIST_PORT": str(port)}, public=public_dir)
    assert second.port == port
    restored = store_snapshot(port, "tiles")
    assert (restored["epoch"], restored["version"]) == (before["epoch"], before["version"])
    assert restored["models"]["tile-7"]["color"] == "#123456"
    # Missed while the page was away: two change sets and two messages.
    json_ok(api(port, "PATCH", "/api/stores/tiles/models/tile-8", {"color": "#0000aa"}))
    json_ok(api(port, "PATCH", "/api/stores/tiles/models/tile-9", {"color": "#0000bb"}))
    assert publish(port, topic, {"n": 4}) == 4
    assert publish(port, topic, {"n": 5}) == 5

    set_offline(page, False)
    after = wait_converged(page, port, "tiles", {"tiles": {}}, timeout=20.0)
    assert after["version"] == before["version"] + 2
    tiles = view(page, "tiles")
    assert tiles["epoch"] == before["epoch"]
    # No new snapshot: the resume carried only the two change sets missed.
    assert len(tiles["log"]["snapshots"]) == snapshots_before
    assert not any(s["reset"] for s in tiles["log"]["snapshots"])
    wait(page, lambda d: [m["seq"] for m in view(d, "news")["log"]["messages"]][-2:] == [4, 5], 10.0,
         "the messages published while the page was away never arrived")
    news = view(page, "news")
    assert news["log"]["resets"] == []
    assert [m["seq"] for m in news["log"]["messages"]] == [4, 5]
    assert news["log"]["gaps"] == []
    assert page.execute_script("return window.__marker") == 1, "the page was reloaded"
