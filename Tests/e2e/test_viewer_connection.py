"""The viewer's connections in headless Chromium: restarts, lost and offline connections, hidden
tabs, compression, and SSE, forced or as the fallback."""

from __future__ import annotations

import re

import pytest

from viewer import (  # noqa: F401 (fixtures are used by name)
    LIVE_SOCKETS, RECORDING_WEBSOCKET, live_sockets,
    By, PUBLIC, api, browser, chromium_installed, coalesced, css_rgb, demo, json_ok, metric_value, new_browser,
    open_viewer, painted_colors, patch_color, quiet, scrape, status, store_snapshot, wait, wait_coalesced_live,
    wait_coalesced_match_store, wait_colors_match_store, wait_live,
)


# ---- Connection --------------------------------------------------------------------------

def test_restart_on_the_same_port_reconnects_and_catches_up_without_reload(browser, start_server):
    # The animate job runs at a rate that never commits during the test, so each gateway's
    # version is known: the first is past the second's, and the resume is answered with a reset.
    first = start_server("--demo", "--demo-rate", "0.001", public=PUBLIC)
    port = first.port
    patch_color(port, "tile-7", "#123456")
    open_viewer(browser, port)
    wait(browser, lambda d: painted_colors(d)["tile-7"] == css_rgb("#123456"), 5.0, "tile-7 not painted")
    browser.execute_script("window.__marker = 1")
    version_before = browser.execute_script("return window.receptionistViewer.version()")

    first.stop()
    assert first.proc.returncode == 0
    wait(browser, lambda d: status(d) == "reconnecting" and re.fullmatch(
        r"in \d+ s", d.find_element(By.ID, "status-countdown").text), 10.0,
        "no reconnecting status with a countdown after the gateway stopped")

    second = start_server("--demo", "--demo-rate", "0.001", env={"RECEPTIONIST_PORT": str(port)}, public=PUBLIC)
    assert second.port == port
    assert store_snapshot(port, "tiles")["version"] < version_before
    wait_live(browser, timeout=20.0)
    expected = wait_colors_match_store(browser, port)
    assert expected["tile-7"] != css_rgb("#123456")
    patch_color(port, "tile-9", "#654321")
    wait(browser, lambda d: painted_colors(d)["tile-9"] == css_rgb("#654321"), 5.0,
         "a change after the restart never arrived")
    assert browser.execute_script("return window.__marker") == 1, "the page was reloaded"
    assert browser.execute_script("return performance.getEntriesByType('navigation').length") == 1


# Records what each of the page's sockets sends and receives, and lets the test drop them.
def test_lost_connection_resumes_from_the_last_version(quiet):
    port = quiet.port
    driver = new_browser(RECORDING_WEBSOCKET)
    try:
        open_viewer(driver, port)
        wait_colors_match_store(driver, port)
        version = driver.execute_script("return window.receptionistViewer.version()")
        assert [s["sent"] for s in live_sockets(driver)] == [[{"type": "subscribe", "store": "tiles"}]]
        # Drop the socket under the viewer, as a failing network would.
        driver.execute_script(f"{LIVE_SOCKETS}[0].close(4000)")
        wait(driver, lambda d: status(d) == "reconnecting", 5.0, "no reconnecting status after the drop")
        patch_color(port, "tile-40", "#010203")
        patch_color(port, "tile-41", "#040506")
        wait_live(driver)
        wait(driver, lambda d: painted_colors(d)["tile-41"] == css_rgb("#040506"), 5.0, "missed changes never arrived")
        assert painted_colors(driver)["tile-40"] == css_rgb("#010203")
        sockets = live_sockets(driver)
        assert len(sockets) == 2, sockets
        epoch = store_snapshot(port, "tiles")["epoch"]
        assert sockets[-1]["sent"] == [{"type": "subscribe", "store": "tiles", "since": version, "epoch": epoch}], sockets
        received = sockets[-1]["received"]
        assert received[:3] == ["subscribed", "changes", "changes"], received
        assert "snapshot" not in received
    finally:
        driver.quit()


def test_offline_browser_shows_offline_and_reconnects_when_online(quiet):
    port = quiet.port
    driver = new_browser(RECORDING_WEBSOCKET)
    try:
        open_viewer(driver, port)
        driver.execute_cdp_cmd("Network.enable", {})
        conditions = {"latency": 0, "downloadThroughput": -1, "uploadThroughput": -1}
        driver.execute_cdp_cmd("Network.emulateNetworkConditions", {**conditions, "offline": True})
        driver.execute_script(f"{LIVE_SOCKETS}[0].close(4000)")
        wait(driver, lambda d: status(d) == "offline", 5.0, "no offline status while the browser is offline")
        assert driver.find_element(By.ID, "status-text").text == "Offline"
        patch_color(port, "tile-60", "#0d0e0f")
        driver.execute_cdp_cmd("Network.emulateNetworkConditions", {**conditions, "offline": False})
        wait_live(driver)
        wait(driver, lambda d: painted_colors(d)["tile-60"] == css_rgb("#0d0e0f"), 5.0,
             "the change made while offline never arrived")
    finally:
        driver.quit()


def test_hidden_tab_paints_nothing_then_catches_up_when_shown(browser, quiet):
    port = quiet.port
    open_viewer(browser, port)
    before = wait_colors_match_store(browser, port)
    painted = browser.execute_script("""
        window.__visibility = 'hidden';
        Object.defineProperty(document, 'visibilityState', {configurable: true, get: () => window.__visibility});
        document.dispatchEvent(new Event('visibilitychange'));
        return window.receptionistViewer.paintedVersion();""")
    for model, color in (("tile-50", "#111111"), ("tile-50", "#222222"), ("tile-51", "#333333")):
        patch_color(port, model, color)
    target = store_snapshot(port, "tiles")["version"]
    wait(browser, lambda d: d.execute_script("return window.receptionistViewer.version()") == target, 5.0,
         "the hidden page stopped taking changes")
    # Let animation frames pass: a hidden page must not paint in any of them.
    browser.execute_async_script("""
        const done = arguments[arguments.length - 1];
        let frames = 0;
        const step = () => (++frames < 5 ? requestAnimationFrame(step) : done());
        requestAnimationFrame(step);""")
    assert browser.execute_script("return window.receptionistViewer.paintedVersion()") == painted
    assert painted_colors(browser) == before
    browser.execute_script("""
        window.__visibility = 'visible';
        document.dispatchEvent(new Event('visibilitychange'));""")
    after = wait_colors_match_store(browser, port)
    assert after["tile-50"] == css_rgb("#222222") and after["tile-51"] == css_rgb("#333333")
    browser.execute_script("delete document.visibilityState")


def compression_counts(port: int) -> tuple[float, float]:
    """(connections that agreed on permessage-deflate, messages sent compressed) from /metrics."""
    samples = scrape(port)
    return (metric_value(samples, "receptionist_compression_negotiated_total"),
            metric_value(samples, "receptionist_compressed_messages_out_total", transport="websocket"))


def test_chromium_takes_compressed_frames_and_paints_them(browser, quiet):
    """Chromium offers permessage-deflate: the 64-tile snapshot and a change set recoloring every
    tile (several KiB each, over --compression-min-bytes) arrive compressed and paint right."""
    port = quiet.port
    negotiated, compressed = compression_counts(port)
    open_viewer(browser, port)
    before = wait_colors_match_store(browser, port)
    assert len(before) == 64
    now_negotiated, now_compressed = compression_counts(port)
    assert now_negotiated > negotiated, "the viewer's WebSocket did not agree on permessage-deflate"
    assert now_compressed > compressed, "the snapshot was not sent compressed"

    colors = {}
    for n in range(64):
        color = f"#{n * 4 % 256:02x}{255 - n * 3:02x}{n * 7 % 256:02x}"
        colors[f"tile-{n}"] = color if css_rgb(color) != before[f"tile-{n}"] else "#808080"
    changes = [{"op": "set", "model": model, "path": "color", "value": color} for model, color in colors.items()]
    assert json_ok(api(port, "POST", "/api/stores/tiles/changes", {"changes": changes}))["changes"] == 64
    after = wait_colors_match_store(browser, port)
    assert after == {model: css_rgb(color) for model, color in colors.items()}
    assert compression_counts(port)[1] > now_compressed, "the change set was not sent compressed"

    # What Chromium itself says it agreed on, from a socket of the same page.
    extensions = browser.execute_async_script("""
        const done = arguments[arguments.length - 1];
        const socket = new WebSocket(`ws://${location.host}/ws`, 'receptionist.v1');
        socket.onopen = () => { done(socket.extensions); socket.close(); };
        socket.onerror = () => done('error');""")
    assert extensions == "permessage-deflate; server_no_context_takeover; client_no_context_takeover"


def test_forced_sse_transport(browser, quiet):
    open_viewer(browser, quiet.port, "?transport=sse")
    assert browser.execute_script("return window.receptionistViewer.transport()") == "sse"
    assert browser.find_element(By.ID, "stat-transport").text == "SSE"
    before = wait_colors_match_store(browser, quiet.port)
    color = "#fedcba" if before["tile-21"] != css_rgb("#fedcba") else "#abcdef"
    patch_color(quiet.port, "tile-21", color)
    wait(browser, lambda d: painted_colors(d)["tile-21"] == css_rgb(color), 2.0, "SSE never delivered the PATCH")
    after = painted_colors(browser)
    assert {m for m in after if after[m] != before[m]} == {"tile-21"}
    wait_coalesced_live(browser)
    assert coalesced(browser)["transport"] == "sse"
    wait_coalesced_match_store(browser, quiet.port)


# Init scripts that break WebSocket before the viewer runs: one sends it to a path that refuses
# the upgrade (a real network failure), the other removes it.
BROKEN_WEBSOCKET = {
    "refused": """
        const RealWebSocket = window.WebSocket;
        window.__wsAttempts = 0;
        window.WebSocket = function (url, protocols) {
            window.__wsAttempts += 1;
            return new RealWebSocket(url.replace(/\\/ws$/, '/no-websocket-here'), protocols);
        };""",
    "missing": "delete window.WebSocket; window.__wsAttempts = 0;",
}


@pytest.mark.parametrize("breakage", list(BROKEN_WEBSOCKET))
def test_falls_back_to_sse_when_websocket_fails(quiet, breakage):
    driver = new_browser(BROKEN_WEBSOCKET[breakage])
    try:
        open_viewer(driver, quiet.port)
        assert driver.execute_script("return window.receptionistViewer.transport()") == "sse"
        attempts = driver.execute_script("return window.__wsAttempts")
        assert attempts == (3 if breakage == "refused" else 0)
        wait_colors_match_store(driver, quiet.port)
        patch_color(quiet.port, "tile-30", "#0f0f0f")
        wait(driver, lambda d: painted_colors(d)["tile-30"] == css_rgb("#0f0f0f"), 2.0,
             "SSE fallback never delivered the PATCH")
        # The second view takes the transport the first one found, without trying WebSocket again.
        wait_coalesced_live(driver)
        assert coalesced(driver)["transport"] == "sse"
        wait_coalesced_match_store(driver, quiet.port)
        assert driver.execute_script("return window.__wsAttempts") == attempts
    finally:
        driver.quit()


# ---- Stores that are not there -----------------------------------------------------------

def status_text(driver) -> str:
    return driver.find_element(By.ID, "status-text").text


def tile_ids(driver) -> list[str]:
    return driver.execute_script("return [...document.querySelectorAll('#grid [data-model]')].map(t => t.dataset.model)")


@pytest.mark.parametrize("transport", ["ws", "sse"])
def test_a_store_that_does_not_exist_is_named_over_both_transports(browser, demo, transport):
    """Over SSE the gateway's 404 reaches the page as over WebSocket: before, an event stream's
    refusal looked like a network failure, and the page said "Reconnecting" for good."""
    store = f"nowhere-{transport}"
    browser.get(f"http://127.0.0.1:{demo.port}/?store={store}&transport={'sse' if transport == 'sse' else 'auto'}")
    wait(browser, lambda d: status_text(d) == f"No store named “{store}”", 10.0,
         f"the missing store was never named: {status_text(browser)!r}")
    assert browser.execute_script("return window.receptionistViewer.transport()") == transport
    assert browser.find_element(By.ID, "toast").text == f"The gateway says: no store named '{store}'"


def test_a_name_no_store_can_have_is_said_and_never_asked_for(demo):
    driver = new_browser(RECORDING_WEBSOCKET)
    try:
        for name, shown in (("bad%20name", "bad name"), ("x" * 65, "x" * 64 + "…"), ("%3Cb%3E", "<b>"), ("..", "..")):
            driver.get(f"http://127.0.0.1:{demo.port}/?store={name}")
            wait(driver, lambda d: status_text(d) == f"“{shown}” is not a store name (1 to 64 of A–Z a–z 0–9 . _ -)",
                 5.0, f"the name was not refused: {status_text(driver)!r}")
            assert status(driver) == "offline" and tile_ids(driver) == []
            assert driver.execute_script("return window.__sockets.length") == 0
            # Nor is a job started for it: the animate control stays off once the jobs are known.
            wait(driver, lambda d: d.find_element(By.ID, "animate-state").text == "Stopped", 5.0, "the jobs were never listed")
            assert not driver.find_element(By.ID, "animate-start").is_enabled()
    finally:
        driver.quit()


@pytest.mark.parametrize("transport", ["auto", "sse"])
def test_a_deleted_store_leaves_the_view_empty_until_made_again(browser, demo, transport):
    """Before, the tiles and the caption ("3 models · version 3") of a deleted store stayed on
    screen under "No store named"."""
    port = demo.port
    store = f"deleted-{transport}"
    json_ok(api(port, "POST", "/api/stores", {"name": store}), 201)
    for n in range(3):
        json_ok(api(port, "PUT", f"/api/stores/{store}/models/m{n}", {"color": "#336699"}), 201)
    open_viewer(browser, port, f"?store={store}&transport={transport}")
    wait(browser, lambda d: sorted(tile_ids(d)) == ["m0", "m1", "m2"], 5.0, "the store was never shown")
    assert browser.find_element(By.ID, "board-meta").text == "3 models · version 3"

    json_ok(api(port, "DELETE", f"/api/stores/{store}"))
    wait(browser, lambda d: status_text(d) == f"No store named “{store}”" and tile_ids(d) == []
         and d.find_element(By.ID, "board-meta").text == "Waiting for the first snapshot"
         and d.find_element(By.ID, "history-label").text == "Waiting for the first snapshot", 10.0,
         f"the deleted store stayed on screen: {status_text(browser)!r} {tile_ids(browser)} "
         f"{browser.find_element(By.ID, 'history-label').text!r}")

    json_ok(api(port, "POST", "/api/stores", {"name": store}), 201)
    json_ok(api(port, "PUT", f"/api/stores/{store}/models/again", {"color": "#996633"}), 201)
    wait(browser, lambda d: status(d) == "live" and tile_ids(d) == ["again"], 20.0,
         f"the store made again was never shown: {status_text(browser)!r} {tile_ids(browser)}")
    assert browser.find_element(By.ID, "board-meta").text == "1 model · version 1"
