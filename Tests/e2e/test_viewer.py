"""The web viewer in Public/, driven in headless Chromium against the real gateway.

Needs Debian's `chromium` and `chromium-driver` packages (scripts/install-deps.sh test) and
Selenium from requirements.txt. Every wait polls with a deadline; nothing sleeps and hopes.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from conftest import (REPO_ROOT, api, http_client_request, json_ok, stop_job, store_snapshot, store_version, wait_for,
                      wait_version_above)
from test_metrics import scrape, value as metric_value

from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import NoAlertPresentException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.select import Select  # noqa: E402
from selenium.webdriver.support.wait import WebDriverWait  # noqa: E402

PUBLIC = REPO_ROOT / "Public"
ARTIFACTS = REPO_ROOT / "artifacts"
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
WINDOW = (1280, 800)
POLL = 0.05
HOSTILE_LABEL = "<img src=x onerror=alert(1)>"



@pytest.fixture(autouse=True, scope="module")
def chromium_installed():
    # A missing browser fails the suite rather than skipping it: these tests must run in `make test`.
    assert CHROMIUM.exists() and CHROMEDRIVER.exists(), \
        "needs Debian's chromium and chromium-driver (scripts/install-deps.sh test)"


# ---- Browser -----------------------------------------------------------------------------

def new_browser(init_script: str | None = None):
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     f"--window-size={WINDOW[0]},{WINDOW[1]}", "--hide-scrollbars"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    # The viewport itself, not the window around it, is what a screenshot shows.
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": WINDOW[0], "height": WINDOW[1], "deviceScaleFactor": 1, "mobile": False})
    driver.set_script_timeout(5)
    if init_script:
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": init_script})
    return driver


@pytest.fixture(scope="module")
def browser():
    driver = new_browser()
    yield driver
    driver.quit()


@pytest.fixture
def second_browser():
    driver = new_browser()
    yield driver
    driver.quit()


def wait(driver, condition, timeout: float, message: str):
    return WebDriverWait(driver, timeout, poll_frequency=POLL).until(lambda d: condition(d), message)


def open_viewer(driver, port: int, query: str = "") -> None:
    driver.get(f"http://127.0.0.1:{port}/{query}")
    wait_live(driver)


def status(driver) -> str:
    return driver.find_element(By.ID, "status").get_attribute("data-status")


def wait_live(driver, timeout: float = 10.0) -> None:
    wait(driver, lambda d: status(d) == "live" and d.execute_script(
        "return window.receptionistViewer.paintedVersion() !== null"), timeout, "viewer never went live")


def painted_colors(driver) -> dict[str, tuple[int, int, int] | None]:
    """Every tile's computed background color, by model id."""
    raw = driver.execute_script("""
        const out = {};
        for (const tile of document.querySelectorAll('#grid [data-model]'))
            out[tile.dataset.model] = getComputedStyle(tile).backgroundColor;
        return out;""")
    return {model: css_rgb(value) for model, value in raw.items()}


def css_rgb(value: str) -> tuple[int, int, int] | None:
    """`#rrggbb`, `#rgb` or `rgb(r, g, b)` as a tuple."""
    value = value.strip().lower()
    if match := re.fullmatch(r"#([0-9a-f]{6})", value):
        return tuple(int(match.group(1)[i:i + 2], 16) for i in (0, 2, 4))
    if match := re.fullmatch(r"#([0-9a-f]{3})", value):
        return tuple(int(c * 2, 16) for c in match.group(1))
    if match := re.fullmatch(r"rgba?\((\d+),\s*(\d+),\s*(\d+)(?:,\s*([\d.]+))?\)", value):
        return tuple(int(match.group(i)) for i in (1, 2, 3))
    return None


def coalesced_colors(driver) -> dict[str, tuple[int, int, int] | None]:
    """Every tile of the second view (the client with options), by model id."""
    raw = driver.execute_script("""
        const out = {};
        for (const tile of document.querySelectorAll('#coalesced-grid [data-model]'))
            out[tile.dataset.model] = getComputedStyle(tile).backgroundColor;
        return out;""")
    return {model: css_rgb(value) for model, value in raw.items()}


def snapshot_colors(port: int, store: str) -> tuple[int, dict[str, tuple[int, int, int]]]:
    snapshot = store_snapshot(port, store)
    return snapshot["version"], {model: css_rgb(value["color"]) for model, value in snapshot["models"].items()}


def wait_colors_match_store(driver, port: int, store: str = "tiles", timeout: float = 5.0) -> dict:
    """Polls until the page paints exactly the store's snapshot (which must be settled)."""
    version, expected = snapshot_colors(port, store)

    def matches(d):
        return d.execute_script("return window.receptionistViewer.paintedVersion()") == version \
            and painted_colors(d) == expected

    wait(driver, matches, timeout, f"page never painted the snapshot at version {version}")
    return expected


def coalesced(driver) -> dict:
    return driver.execute_script("return window.receptionistViewer.coalesced()")


def wait_coalesced_live(driver, timeout: float = 10.0) -> None:
    wait(driver, lambda d: coalesced(d)["status"] == "live", timeout, "the second view never went live")


def wait_coalesced_match_store(driver, port: int, prefix: str = "", store: str = "tiles",
                               timeout: float = 5.0) -> dict:
    """Polls until the second view paints exactly the store's colors (of the ids with `prefix`)."""
    _, colors = snapshot_colors(port, store)
    expected = {model: color for model, color in colors.items() if model.startswith(prefix)}
    wait(driver, lambda d: coalesced_colors(d) == expected, timeout,
         f"the second view never painted the store's colors for {prefix or 'every id'}*")
    return expected


# ---- Gateway -----------------------------------------------------------------------------

def running_jobs(port: int, store: str = "tiles") -> list[dict]:
    jobs = json_ok(api(port, "GET", "/api/jobs"))["jobs"]
    return [job for job in jobs if job["store"] == store and job["state"] == "running"]


def stop_animation(port: int, store: str = "tiles") -> int:
    """Stops every animate job on the store; returns its version, which no job moves any more.

    The demo gateway has one job thread, so the version is read after the jobs' last commits
    (see `stop_job`).
    """
    for job in running_jobs(port, store):
        stop_job(port, job["id"])
    return store_version(port, store)


def patch_color(port: int, model: str, color: str, store: str = "tiles") -> dict:
    return json_ok(api(port, "PATCH", f"/api/stores/{store}/models/{model}", {"color": color}))


@pytest.fixture(scope="module")
def demo(module_servers):
    """A gateway serving the real viewer, with the demo store.

    One job thread makes a stopped job's last commit observable (see `stop_animation`).
    """
    return module_servers("--demo", "--job-threads", "1", public=PUBLIC)


@pytest.fixture
def quiet(demo):
    """The demo gateway with no animate job running on `tiles`, so colors hold still."""
    stop_animation(demo.port)
    return demo


# ---- Serving -----------------------------------------------------------------------------

@pytest.mark.parametrize("path, media_type", [
    ("/", "text/html"), ("/viewer.js", "text/javascript"), ("/viewer.css", "text/css"),
    ("/receptionist-client.js", "text/javascript")])
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


def set_brush(driver, color: str) -> None:
    driver.execute_script("""
        const brush = document.getElementById('brush');
        brush.value = arguments[0];
        brush.dispatchEvent(new Event('input', {bubbles: true}));""", color)


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
RECORDING_WEBSOCKET = """
    window.__sockets = [];
    window.WebSocket = class extends window.WebSocket {
        constructor(...args) {
            super(...args);
            this.__sent = []; this.__received = [];
            window.__sockets.push(this);
            this.addEventListener('message', (event) => this.__received.push(JSON.parse(event.data).type));
        }
        send(data) { this.__sent.push(JSON.parse(data)); super.send(data); }
    };"""

# The live view's sockets: its subscriptions carry no options. (The second view has a connection
# of its own, since a connection holds one subscription per store, and always asks for `paths`.)
LIVE_SOCKETS = "window.__sockets.filter(s => s.__sent.some(m => m.type === 'subscribe' && !('paths' in m)))"


def live_sockets(driver) -> list[dict]:
    """What each socket of the live view sent and received, oldest first."""
    return driver.execute_script(f"return {LIVE_SOCKETS}.map(s => ({{sent: s.__sent, received: s.__received}}))")


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
