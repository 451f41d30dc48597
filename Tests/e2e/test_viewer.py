"""The web viewer in Public/, driven in headless Chromium against the real gateway: serving, the
live views, painting, the controls and the second view (test_viewer_connection: its connections)."""

from __future__ import annotations

import os
import re
import time

import pytest

from viewer import (  # noqa: F401 (fixtures are used by name)
    LIVE_SOCKETS, RECORDING_ALERTS, RECORDING_WEBSOCKET, alerts, make_store,
    ARTIFACTS, By, HOSTILE_LABEL, Keys, NoAlertPresentException, PUBLIC, Select, api, browser, chromium_installed,
    coalesced, coalesced_colors, css_rgb, demo, http_client_request, json_ok, new_browser, open_viewer,
    painted_colors, patch_color, quiet, running_jobs, second_browser, set_brush, status, stop_animation,
    store_snapshot, store_version, wait, wait_coalesced_live, wait_coalesced_match_store, wait_colors_match_store,
    wait_for, wait_version_above,
)


# ---- Serving -----------------------------------------------------------------------------

def test_every_module_the_viewer_imports_is_preloaded():
    """index.html names each module of viewer.js's import graph as a modulepreload, so a browser
    fetches them all at once instead of one import level at a time; a new module must be added."""
    pattern = re.compile(r"""(?:import|export)\s[^;'"]*?from\s*['"](\.[^'"]+)['"]|import\s*['"](\.[^'"]+)['"]""")
    reachable, todo = set(), ["viewer.js"]
    while todo:
        path = todo.pop()
        if path in reachable:
            continue
        reachable.add(path)
        source = (PUBLIC / path).read_text()
        for match in pattern.finditer(source):
            target = match.group(1) or match.group(2)
            todo.append(os.path.normpath(os.path.join(os.path.dirname(path), target)))
    preloaded = set(re.findall(r'<link rel="modulepreload" href="([^"]+)">', (PUBLIC / "index.html").read_text()))
    assert len(reachable) > 20
    assert reachable - {"viewer.js"} == preloaded


@pytest.mark.parametrize("path, media_type", [
    ("/", "text/html"), ("/viewer.js", "text/javascript"), ("/viewer.css", "text/css"),
    ("/viewer-tiles.css", "text/css"), ("/viewer-controls.css", "text/css"),
    ("/receptionist-client.js", "text/javascript"), ("/client/receptionist-client.js", "text/javascript"),
    ("/viewer/tile-view.js", "text/javascript")])
def test_viewer_files_are_served_with_their_types(demo, path, media_type):
    resp = http_client_request(demo.port, "GET", path)
    assert resp.status == 200
    assert resp.media_type() == media_type
    name = "index.html" if path == "/" else path[1:]
    assert resp.body == (PUBLIC / name).read_bytes()


# ---- Live views --------------------------------------------------------------------------

def test_tiles_show_the_snapshot_colors(browser, quiet):
    open_viewer(browser, quiet.port)
    expected = wait_colors_match_store(browser, quiet.port)
    assert len(expected) == 64
    tile = browser.find_element(By.CSS_SELECTOR, '[data-model="tile-3"]')
    model = store_snapshot(quiet.port, "tiles")["models"]["tile-3"]
    assert tile.tag_name == "button"
    assert tile.get_attribute("aria-label") == f"Tile 3, color {model['color']}"
    assert tile.find_element(By.CLASS_NAME, "tile-label").text == "Tile 3"
    assert browser.find_element(By.ID, "status").get_attribute("aria-live") == "polite"
    assert browser.execute_script("return window.receptionistViewer.store()") == "tiles"


def test_http_patch_recolors_exactly_that_tile_within_a_second(browser, quiet):
    open_viewer(browser, quiet.port)
    before = wait_colors_match_store(browser, quiet.port)
    color = "#0a0b0c" if before["tile-5"] != css_rgb("#0a0b0c") else "#0c0b0a"
    patch_color(quiet.port, "tile-5", color)
    patched = time.monotonic()
    wait(browser, lambda d: painted_colors(d)["tile-5"] == css_rgb(color), 1.0,
         "tile-5 was not recolored within one second of the PATCH")
    elapsed = time.monotonic() - patched
    after = painted_colors(browser)
    assert {m for m in after if after[m] != before[m]} == {"tile-5"}, f"recolored after {elapsed:.3f}s"
    label = browser.find_element(By.CSS_SELECTOR, '[data-model="tile-5"]').get_attribute("aria-label")
    assert label == f"Tile 5, color {color}"


def test_two_tabs_stay_in_sync_and_tiles_paint_by_click_and_keyboard(browser, second_browser, quiet):
    port = quiet.port
    open_viewer(browser, port)
    open_viewer(second_browser, port)
    base = store_version(port, "tiles")
    # A click, Enter and Space each paint through the HTTP API; both tabs see the result.
    strokes = [("tile-12", "#00aa55", None), ("tile-13", "#aa0055", Keys.ENTER), ("tile-14", "#5500aa", Keys.SPACE)]
    for model, color, key in strokes:
        set_brush(browser, color)
        tile = browser.find_element(By.CSS_SELECTOR, f'[data-model="{model}"]')
        if key is None:
            tile.click()
        else:
            browser.execute_script("arguments[0].focus()", tile)
            tile.send_keys(key)
        wait_for(lambda: store_snapshot(port, "tiles")["models"][model]["color"] == color, 5.0,
                 f"{model} was not painted {color} on the server")
    # Each stroke is one PATCH, and nothing else writes: the store ends exactly three versions on.
    version = wait_version_above(port, "tiles", base + len(strokes) - 1, timeout=5.0)
    assert version == base + len(strokes), f"{len(strokes)} strokes took the store from {base} to {version}"
    first = wait_colors_match_store(browser, port)
    second = wait_colors_match_store(second_browser, port)
    assert first == second
    for model, color, _ in strokes:
        assert second[model] == css_rgb(color)
    assert browser.execute_script("return window.receptionistViewer.state()") == \
        second_browser.execute_script("return window.receptionistViewer.state()")


def test_hostile_labels_and_colors_are_data(browser, demo):
    port = demo.port
    store = "hostile"
    if all(entry["name"] != store for entry in json_ok(api(port, "GET", "/api/stores"))["stores"]):
        json_ok(api(port, "POST", "/api/stores", {"name": store}), 201)
    models = {
        "img": {"label": HOSTILE_LABEL, "color": "#123456"},
        "script": {"label": "<script>window.__pwned = 1</script>", "color": "rebeccapurple"},
        "css": {"label": "css", "color": "red; background-image: url(javascript:alert(1))"},
        "url": {"label": "url", "color": "url(x)"},
    }
    for model, value in models.items():
        assert api(port, "PUT", f"/api/stores/{store}/models/{model}", value).status in (200, 201)
    open_viewer(browser, port, f"?store={store}")
    wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#grid [data-model]")) == 4, 5.0,
         "the four models never showed")
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018 - reading it is the check
    grid = browser.find_element(By.ID, "grid")
    assert grid.find_elements(By.TAG_NAME, "img") == []
    assert grid.find_elements(By.TAG_NAME, "script") == []
    assert browser.execute_script("return window.__pwned") is None
    tile = grid.find_element(By.CSS_SELECTOR, '[data-model="img"]')
    assert tile.find_element(By.CLASS_NAME, "tile-label").get_attribute("textContent") == HOSTILE_LABEL
    assert tile.get_attribute("aria-label") == f"{HOSTILE_LABEL}, color #123456"
    colors = painted_colors(browser)
    assert colors["img"] == css_rgb("#123456")
    assert colors["script"] == (102, 51, 153)  # rebeccapurple: a named color is accepted
    for model in ("css", "url"):
        element = grid.find_element(By.CSS_SELECTOR, f'[data-model="{model}"]')
        assert element.get_attribute("style") in (None, ""), f"{model}: an invalid color reached the style"
        assert element.get_attribute("aria-label") == f"{model}, no color"
    select = browser.find_element(By.ID, "store")
    assert select.get_attribute("value") == store
    wait(browser, lambda d: {"tiles", store} <= set(d.execute_script(
        "return [...document.getElementById('store').options].map(o => o.value)")), 5.0,
        "the store picker never listed the gateway's stores")
    # The second view shows the same store's colors; an invalid one never reaches a style.
    wait(browser, lambda d: set(coalesced_colors(d)) == set(models), 5.0, "the second view never showed the four models")
    mini = browser.find_element(By.ID, "coalesced-grid")
    assert mini.find_elements(By.TAG_NAME, "img") == [] and mini.find_elements(By.TAG_NAME, "script") == []
    second = coalesced_colors(browser)
    assert (second["img"], second["script"]) == (css_rgb("#123456"), (102, 51, 153))
    for model in ("css", "url"):
        element = mini.find_element(By.CSS_SELECTOR, f'[data-model="{model}"]')
        assert element.get_attribute("style") in (None, ""), f"{model}: an invalid color reached the second view's style"
        assert element.get_attribute("aria-label") == f"{model}, no color"
    # Picking another store swaps both grids without reloading the page.
    browser.execute_script("window.__marker = 1")
    Select(select).select_by_value("tiles")
    wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#grid [data-model]")) == 64, 5.0,
         "choosing tiles in the picker did not show its 64 models")
    wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#coalesced-grid [data-model]")) == 64, 5.0,
         "the second view did not follow the picker to tiles")
    assert browser.find_elements(By.CSS_SELECTOR, '[data-model="img"]') == []
    assert browser.execute_script("return [window.__marker, location.search]") == [1, "?store=tiles"]


def test_a_refusal_is_alerted_once_while_the_retries_are_refused_alike(demo):
    """Before, each retry's refusal set the alert again: "no store named" was said every 15 s."""
    driver = new_browser(RECORDING_WEBSOCKET + RECORDING_ALERTS)
    try:
        driver.get(f"http://127.0.0.1:{demo.port}/?store=absent")
        refusals = f"return {LIVE_SOCKETS}.flatMap(s => s.__received).filter(t => t === 'error').length"
        wait(driver, lambda d: d.execute_script(refusals) >= 4, 15.0, "the subscription was not retried")
        said = "The gateway says: no store named 'absent'"
        assert alerts(driver) == [said]
        assert driver.find_element(By.ID, "status-text").text == "No store named “absent”"
        # Once the store exists the subscription recovers; the same refusal later is said again.
        make_store(demo.port, "absent", {"m": {"color": "#336699"}})
        wait(driver, lambda d: status(d) == "live", 20.0, "the store made was never shown")
        json_ok(api(demo.port, "DELETE", "/api/stores/absent"))
        wait(driver, lambda d: alerts(d)[-1:] == [said], 10.0, "the refusal was not said again")
    finally:
        driver.quit()


# ---- Controls ----------------------------------------------------------------------------

def set_rate(driver, rate: int) -> None:
    driver.execute_script("""
        const input = document.getElementById('animate-rate');
        input.value = String(arguments[0]);
        input.dispatchEvent(new Event('input', {bubbles: true}));""", rate)


def job_state(driver) -> str:
    return driver.find_element(By.ID, "animate-state").get_attribute("data-state")


def test_animate_controls_start_retune_and_stop_the_job(browser, quiet):
    port = quiet.port
    open_viewer(browser, port)
    wait(browser, lambda d: job_state(d) == "stopped", 5.0, "the page never showed the job stopped")
    try:
        set_rate(browser, 45)
        browser.find_element(By.ID, "animate-start").click()
        jobs = wait_for(lambda: running_jobs(port), 5.0, "Start did not start a job")
        assert len(jobs) == 1 and jobs[0]["kind"] == "animate" and jobs[0]["rate"] == 45, jobs
        job_id = jobs[0]["id"]
        wait(browser, lambda d: job_state(d) == "running", 5.0, "the page never showed the job running")
        version = browser.execute_script("return window.receptionistViewer.version()")
        wait(browser, lambda d: d.execute_script("return window.receptionistViewer.paintedVersion()") > version,
             5.0, "the running job's changes never reached the page")

        set_rate(browser, 90)
        wait_for(lambda: json_ok(api(port, "GET", f"/api/jobs/{job_id}"))["rate"] == 90, 5.0,
                 "moving the rate slider did not retune the job")

        wait(browser, lambda d: d.find_element(By.ID, "animate-stop").is_enabled(), 5.0, "Stop stayed disabled")
        browser.find_element(By.ID, "animate-stop").click()
        wait_for(lambda: json_ok(api(port, "GET", f"/api/jobs/{job_id}"))["state"] == "stopped", 5.0,
                 "Stop did not stop the job")
        wait(browser, lambda d: job_state(d) == "stopped", 5.0, "the page never showed the job stopped")
    finally:
        stop_animation(port)


def test_live_page_screenshot(browser, demo):
    """Saves a screenshot of the animated page under artifacts/."""
    port = demo.port
    if not running_jobs(port):
        json_ok(api(port, "POST", "/api/jobs", {"kind": "animate", "store": "tiles", "rate": 30}), 201)
    try:
        open_viewer(browser, port)
        version = browser.execute_script("return window.receptionistViewer.paintedVersion()")
        wait(browser, lambda d: d.execute_script("return window.receptionistViewer.paintedVersion()") > version + 30,
             10.0, "the animation never painted")
        ARTIFACTS.mkdir(exist_ok=True)
        target = ARTIFACTS / "viewer-live.png"
        assert browser.save_screenshot(str(target))
        assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        stop_animation(port)


# ---- The second view: a client with maxRate, paths and models -----------------------------

def set_coalesced_rate(driver, rate: int) -> None:
    driver.execute_script("""
        const input = document.getElementById('coalesced-rate');
        input.value = String(arguments[0]);
        input.dispatchEvent(new Event('input', {bubbles: true}));""", rate)


def set_prefix(driver, prefix: str) -> None:
    driver.execute_script("""
        const input = document.getElementById('follow-prefix');
        input.value = arguments[0];
        input.dispatchEvent(new Event('input', {bubbles: true}));""", prefix)


def wait_coalesced_options(driver, **expected) -> None:
    """Waits until the second view is live on a subscription with exactly these options."""
    wanted = {"paths": ["color"], **expected}
    wait(driver, lambda d: (c := coalesced(d))["options"] == wanted and c["status"] == "live", 5.0,
         f"the second view never resubscribed with {wanted}")


def traffic(driver) -> dict:
    return driver.execute_script("return {...window.receptionistViewer.traffic(), at: performance.now()}")


def measure(driver, live_frames: int, timeout: float = 10.0) -> tuple[int, int, float]:
    """Counts each view's frames until the live view has received `live_frames` more:
    (live frames, second view's frames, seconds)."""
    start = traffic(driver)
    wait(driver, lambda d: traffic(d)["live"]["frames"] - start["live"]["frames"] >= live_frames, timeout,
         f"the live view never received {live_frames} frames")
    end = traffic(driver)
    return (end["live"]["frames"] - start["live"]["frames"],
            end["coalesced"]["frames"] - start["coalesced"]["frames"], (end["at"] - start["at"]) / 1000)


def meter(driver, element_id: str) -> float:
    return float(driver.find_element(By.ID, element_id).text)


def test_coalesced_view_keeps_up_with_a_fraction_of_the_frames(browser, quiet):
    port = quiet.port
    open_viewer(browser, port)
    wait_coalesced_live(browser)
    wait_coalesced_match_store(browser, port)
    set_coalesced_rate(browser, 4)
    wait_coalesced_options(browser, maxRate=4)
    assert browser.find_element(By.ID, "coalesced-options").text == '{"paths":["color"],"maxRate":4}'
    json_ok(api(port, "POST", "/api/jobs", {"kind": "animate", "store": "tiles", "rate": 60}), 201)
    try:
        live, second, seconds = measure(browser, 90)
        assert 0 < second <= 4 * seconds + 2, (live, second, seconds)
        assert second * 3 < live, (live, second, seconds)
        # The meters say so too: the live view's frames a second against the second view's.
        wait(browser, lambda d: meter(d, "live-fps") >= 30 and 0 < meter(d, "coalesced-fps") <= 5, 5.0,
             "the meters never showed the live view's rate above the second view's")
        assert re.fullmatch(r"\d+ ms", browser.find_element(By.ID, "coalesced-staleness").text)
        assert re.fullmatch(r"[\d.]+ % of the live frames · [\d.]+ % of the bytes",
                            browser.find_element(By.ID, "coalesced-share").text)
    finally:
        stop_animation(port)
    # Once the job has stopped, both views paint exactly the store.
    expected = wait_colors_match_store(browser, port)
    assert wait_coalesced_match_store(browser, port) == expected


def test_coalesced_rate_slider_resubscribes_at_that_rate(quiet):
    port = quiet.port
    driver = new_browser(RECORDING_WEBSOCKET)
    try:
        open_viewer(driver, port)
        wait_coalesced_live(driver)
        json_ok(api(port, "POST", "/api/jobs", {"kind": "animate", "store": "tiles", "rate": 100}), 201)
        try:
            set_coalesced_rate(driver, 2)
            wait_coalesced_options(driver, maxRate=2)
            assert driver.find_element(By.ID, "coalesced-rate-value").text == "2 / s"
            _, slow, slow_seconds = measure(driver, 150)
            assert slow <= 2 * slow_seconds + 2, (slow, slow_seconds)
            set_coalesced_rate(driver, 40)
            wait_coalesced_options(driver, maxRate=40)
            assert driver.find_element(By.ID, "coalesced-rate-value").text == "40 / s"
            _, fast, fast_seconds = measure(driver, 150)
            assert fast >= 10 * fast_seconds, (fast, fast_seconds)
            assert fast / fast_seconds > 3 * (slow / slow_seconds), (slow, slow_seconds, fast, fast_seconds)
        finally:
            stop_animation(port)
        wait_coalesced_match_store(driver, port)
        # Each move of the slider replaced the subscription on the second view's own connection.
        second = driver.execute_script(
            "return window.__sockets.filter(s => s.__sent.some(m => 'paths' in m)).map(s => s.__sent)")
        assert second == [[
            {"type": "subscribe", "store": "tiles", "paths": ["color"], "maxRate": 5},
            {"type": "unsubscribe", "store": "tiles"},
            {"type": "subscribe", "store": "tiles", "paths": ["color"], "maxRate": 2},
            {"type": "unsubscribe", "store": "tiles"},
            {"type": "subscribe", "store": "tiles", "paths": ["color"], "maxRate": 40},
        ]], second
    finally:
        driver.quit()


def test_follow_prefix_shows_only_the_matching_tiles(browser, quiet):
    port = quiet.port
    open_viewer(browser, port)
    wait_coalesced_live(browser)
    assert len(wait_coalesced_match_store(browser, port)) == 64
    set_prefix(browser, "tile-1")
    wait_coalesced_options(browser, maxRate=5, models=["tile-1*"])
    shown = wait_coalesced_match_store(browser, port, prefix="tile-1")
    assert sorted(shown) == sorted(["tile-1"] + [f"tile-1{n}" for n in range(10)])
    # A followed tile is repainted; one outside the prefix never appears.
    patch_color(port, "tile-15", "#0b0c0d")
    patch_color(port, "tile-25", "#0d0c0b")
    wait(browser, lambda d: coalesced_colors(d).get("tile-15") == css_rgb("#0b0c0d"), 5.0,
         "the followed tile-15 was not repainted")
    wait_colors_match_store(browser, port)
    assert set(coalesced_colors(browser)) == set(shown)
    set_prefix(browser, "")
    wait_coalesced_options(browser, maxRate=5)
    assert len(wait_coalesced_match_store(browser, port)) == 64


# ---- Tokens ------------------------------------------------------------------------------

def test_the_page_passes_its_token_on_when_the_gateway_requires_one(browser, start_server):
    from test_trust import SECRET, token_for

    server = start_server("--demo", "--demo-rate", "0.001", "--token-secret", SECRET, public=PUBLIC)
    open_viewer(browser, server.port, f"?store=tiles&token={token_for(stores=['tiles'])}")
    wait_colors_match_store(browser, server.port)
    open_viewer(browser, server.port, f"?store=tiles&transport=sse&token={token_for(stores=['tiles'])}")
    wait_colors_match_store(browser, server.port)
    assert browser.execute_script("return window.receptionistViewer.transport()") == "sse"
    # Without a token the gateway refuses the subscription, and the page never goes live.
    browser.get(f"http://127.0.0.1:{server.port}/?store=tiles")
    wait(browser, lambda d: "token" in d.find_element(By.TAG_NAME, "body").text.lower(), 5.0,
         "the refusal was not shown")
    assert browser.execute_script("return window.receptionistViewer.paintedVersion()") is None
