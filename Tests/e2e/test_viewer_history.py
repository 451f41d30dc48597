"""The viewer's history scrubber (Public/viewer-history.js), driven in headless Chromium.

The scrubber reads the store as it was at a past version (GET /api/stores/{s}?at=N), paints the
tiles from it and marks the tiles whose model differs from the live one, while the subscription
keeps applying live frames. Every wait polls a real condition with a deadline.
"""

from __future__ import annotations

from conftest import REPO_ROOT, api, http_client_request, json_ok, store_snapshot, store_version, wait_for
# The browser, the gateway fixtures and the helpers of the viewer's own tests.
from hooks import Backend as HookBackend
from test_trust import SECRET, bearer, request, token_for
from viewer import (PUBLIC, browser, chromium_installed, css_rgb, demo, make_store, new_browser,  # noqa: F401
                    open_viewer, painted_colors, patch_color, quiet, stop_animation, tile_ids, wait,
                    wait_colors_match_store)

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402

ARTIFACTS = REPO_ROOT / "artifacts"


# ---- Helpers -----------------------------------------------------------------------------

def history(driver) -> dict:
    return driver.execute_script("return window.receptionistViewer.history()")


def snapshot_at(port: int, version: int, store: str = "tiles") -> dict:
    return json_ok(api(port, "GET", f"/api/stores/{store}?at={version}"))


def colors_of(snapshot: dict) -> dict[str, tuple[int, int, int] | None]:
    return {model: css_rgb(value["color"]) for model, value in snapshot["models"].items()}


def oldest_readable(port: int, store: str = "tiles") -> int:
    """The oldest version the gateway still reads: 0 while it keeps everything, else the 410's."""
    resp = api(port, "GET", f"/api/stores/{store}?at=0")
    if resp.status == 200:
        return 0
    assert resp.status == 410, resp.body[:300]
    payload = resp.json()
    assert payload["error"] == "gone", payload
    return payload["oldest"]


def highlighted(driver) -> set[str]:
    """The ids of the tiles the page marks as changed since the version shown."""
    return set(driver.execute_script(
        "return [...document.querySelectorAll('#grid .tile--changed')].map(t => t.dataset.model)"))


def range_bounds(driver) -> tuple[int, int, int, bool]:
    """The range's (min, max, value, disabled) as the DOM has them."""
    return tuple(driver.execute_script("""
        const r = document.getElementById('history-range');
        return [Number(r.min), Number(r.max), Number(r.value), r.disabled];"""))


def scrub_to(driver, version: int) -> None:
    """Moves the range as a drag would: a new value, then input and change events."""
    driver.execute_script("""
        const range = document.getElementById('history-range');
        range.value = String(arguments[0]);
        range.dispatchEvent(new Event('input', {bubbles: true}));
        range.dispatchEvent(new Event('change', {bubbles: true}));""", version)


def wait_scrubber_ready(driver, port: int, timeout: float = 5.0) -> None:
    """Waits until the range spans the oldest readable version to the live one, and is usable."""
    def ready(d):
        low, high, value, disabled = range_bounds(d)
        return not disabled and (low, high, value) == (oldest_readable(port), store_version(port, "tiles"),
                                                       store_version(port, "tiles"))
    wait(driver, ready, timeout, "the history range never spanned the versions the gateway keeps")


def wait_shows_version(driver, port: int, version: int, timeout: float = 5.0) -> dict:
    """Waits until the tiles show the store at `version` exactly; returns its colors."""
    expected = colors_of(snapshot_at(port, version))

    def shows(d):
        h = history(d)
        return h["mode"] == "past" and h["shownVersion"] == version and not h["busy"] \
            and painted_colors(d) == expected

    wait(driver, shows, timeout, f"the tiles never showed version {version}")
    return expected


def changed_between(port: int, version: int) -> set[str]:
    """The models of the store at `version` whose value differs from the live one (or are gone)."""
    past = snapshot_at(port, version)["models"]
    live = store_snapshot(port, "tiles")["models"]
    return {model for model in set(past) | set(live) if past.get(model) != live.get(model)} & set(past)


def fresh_color(used: set, n: int) -> str:
    """A color none of `used` (rgb tuples) is, varied by `n`."""
    for k in range(256):
        color = f"#{(n * 37 + k) % 256:02x}{(n * 11) % 256:02x}{(200 - n * 5 - k) % 256:02x}"
        if css_rgb(color) not in used:
            return color
    raise AssertionError("no fresh color")


# ---- Serving -----------------------------------------------------------------------------

def test_history_script_is_served_and_loaded(demo):
    resp = http_client_request(demo.port, "GET", "/viewer-history.js")
    assert resp.status == 200 and resp.media_type() == "text/javascript"
    assert resp.body == (PUBLIC / "viewer-history.js").read_bytes()
    index = (PUBLIC / "index.html").read_text()
    assert 'href="viewer-history.js"' in index
    assert "from './viewer-history.js'" in (PUBLIC / "viewer.js").read_text()


# ---- Scrubbing ---------------------------------------------------------------------------

def test_scrubbing_back_shows_that_version_and_marks_what_changed_since(browser, quiet):
    port = quiet.port
    open_viewer(browser, port)
    before = wait_colors_match_store(browser, port)
    wait_scrubber_ready(browser, port)
    assert history(browser)["mode"] == "live"
    assert browser.find_element(By.ID, "history-live").is_enabled() is False
    base = store_version(port, "tiles")

    # Four known PATCHes, each to a color no tile has: tile-2 twice, tile-9 and tile-33 once.
    strokes = [("tile-2", 0), ("tile-9", 1), ("tile-33", 2), ("tile-2", 3)]
    used = set(before.values())
    colors = []
    for model, n in strokes:
        colors.append(fresh_color(used, n))
        used.add(css_rgb(colors[-1]))
        patch_color(port, model, colors[-1])
    live_version = store_version(port, "tiles")
    assert live_version == base + len(strokes)
    wait_colors_match_store(browser, port)
    wait(browser, lambda d: range_bounds(d)[1:3] == (live_version, live_version), 5.0,
         "the range's end did not follow the live version")

    # Back to before the second stroke: tile-9, tile-33 and tile-2 (again) have changed since.
    target = base + 1
    scrub_to(browser, target)
    shown = wait_shows_version(browser, port, target)
    assert shown["tile-2"] == css_rgb(colors[0])
    assert {m for m in shown if shown[m] != before[m]} == {"tile-2"}
    expected_marks = changed_between(port, target)
    assert expected_marks == {"tile-2", "tile-9", "tile-33"}
    wait(browser, lambda d: highlighted(d) == expected_marks, 5.0,
         f"the marked tiles never became {sorted(expected_marks)}")
    assert sorted(history(browser)["changed"]) == sorted(expected_marks)
    assert browser.find_element(By.ID, "history-label").text == f"version {target} of {live_version}"
    assert browser.find_element(By.ID, "history-live").is_enabled()
    tile = browser.find_element(By.CSS_SELECTOR, '[data-model="tile-9"]')
    assert tile.get_attribute("aria-label").endswith(f"at version {target}, changed since")

    # Further back: before any stroke, all three tiles differ from the live ones.
    scrub_to(browser, base)
    wait_shows_version(browser, port, base)
    assert painted_colors(browser) == before
    wait(browser, lambda d: highlighted(d) == changed_between(port, base) == {"tile-2", "tile-9", "tile-33"}, 5.0,
         "the marks did not follow the version shown")

    # While scrubbed back, live frames still reach the live models, but not the tiles; a tile
    # that changes live becomes marked.
    color = fresh_color(used, 9)
    patch_color(port, "tile-40", color)
    newest = store_version(port, "tiles")
    wait(browser, lambda d: d.execute_script("return window.receptionistViewer.version()") == newest, 5.0,
         "the live models stopped following the store while scrubbed back")
    assert browser.execute_script("return window.receptionistViewer.state()")["tile-40"]["color"] == color
    wait(browser, lambda d: highlighted(d) == {"tile-2", "tile-9", "tile-33", "tile-40"}, 5.0,
         "a tile changed live was not marked")
    assert painted_colors(browser) == before
    wait(browser, lambda d: d.find_element(By.ID, "history-label").text == f"version {base} of {newest}", 5.0,
         "the label did not follow the live version")

    # Live: the tiles are the current store again, nothing is marked, the range is at its end.
    browser.find_element(By.ID, "history-live").click()
    wait_colors_match_store(browser, port)
    wait(browser, lambda d: highlighted(d) == set() and history(d)["mode"] == "live"
         and range_bounds(d)[1:3] == (newest, newest), 5.0, "Live did not return to the live view")
    assert browser.find_element(By.ID, "history-label").text == f"Live · version {newest}"
    assert not browser.find_element(By.ID, "history-live").is_enabled()
    # Back live, the tiles follow the stream again.
    patch_color(port, "tile-41", fresh_color(used, 10))
    wait_colors_match_store(browser, port)


def test_rapid_drag_reads_one_version_at_a_time_and_the_last_position_wins(browser, quiet):
    port = quiet.port
    base = store_version(port, "tiles")
    for n in range(12):
        patch_color(port, f"tile-{n}", f"#{n * 20:02x}30{255 - n * 20:02x}")
    open_viewer(browser, port)
    wait_scrubber_ready(browser, port)
    browser.execute_script("""
        window.__reads = {now: 0, most: 0, total: 0};
        const realFetch = window.fetch;
        window.fetch = async (...args) => {
            const past = String(args[0]).includes('?at=') && !String(args[0]).endsWith('?at=0');
            if (past) { __reads.now += 1; __reads.total += 1; __reads.most = Math.max(__reads.most, __reads.now); }
            try { return await realFetch(...args); } finally { if (past) __reads.now -= 1; }
        };""")
    # A drag through every version, one input event each, much faster than reads complete.
    browser.execute_script("""
        const range = document.getElementById('history-range');
        for (let v = arguments[0] + 11; v >= arguments[0]; v -= 1) {
            range.value = String(v);
            range.dispatchEvent(new Event('input', {bubbles: true}));
        }
        range.dispatchEvent(new Event('change', {bubbles: true}));""", base)
    wait_shows_version(browser, port, base)
    reads = browser.execute_script("return window.__reads")
    assert reads["most"] == 1, reads
    assert 1 <= reads["total"] < 12, reads
    # Escape on the range returns to the live view as the Live button does.
    browser.find_element(By.ID, "history-range").send_keys(Keys.ESCAPE)
    wait(browser, lambda d: history(d)["mode"] == "live" and highlighted(d) == set(), 5.0, "Escape did not go live")
    wait_colors_match_store(browser, port)


def test_the_range_starts_at_the_oldest_version_the_gateway_keeps(browser, start_server):
    # The animate job's rate never commits during the test; only the PATCHes move the store.
    server = start_server("--demo", "--demo-rate", "0.001", "--job-threads", "1", "--history", "20",
                          public=PUBLIC)
    port = server.port
    stop_animation(port)
    for n in range(30):
        patch_color(port, f"tile-{n % 8}", f"#{n * 8:02x}{255 - n * 8:02x}80")
    oldest = oldest_readable(port)
    current = store_version(port, "tiles")
    assert 0 < oldest == current - 20
    open_viewer(browser, port)
    wait_scrubber_ready(browser, port)
    assert range_bounds(browser)[:2] == (oldest, current)
    assert history(browser)["oldest"] == oldest

    # More changes while the page is live: versions it thinks it can read fall out of the history.
    for n in range(10):
        patch_color(port, f"tile-{8 + n}", f"#80{n * 20:02x}{n * 10:02x}")
    now_oldest = oldest_readable(port)
    now_current = store_version(port, "tiles")
    assert now_oldest == oldest + 10
    wait(browser, lambda d: range_bounds(d)[1] == now_current, 5.0, "the range's end did not follow")
    # Asking for a version no longer kept brings the range's start to the oldest readable one,
    # and the tiles show that version.
    gone = oldest + 2
    assert api(port, "GET", f"/api/stores/tiles?at={gone}").status == 410
    scrub_to(browser, gone)
    wait_shows_version(browser, port, now_oldest)
    low, high, value, _ = range_bounds(browser)
    assert (low, value) == (now_oldest, now_oldest) and high == now_current
    assert history(browser)["label"] == f"version {now_oldest} of {now_current}"
    wait(browser, lambda d: highlighted(d) == changed_between(port, now_oldest), 5.0,
         "the marks at the oldest version were wrong")
    # The range cannot go under its start.
    scrub_to(browser, 0)
    wait_for(lambda: range_bounds(browser)[2] == now_oldest, 2.0, "the range went under its start")
    wait_shows_version(browser, port, now_oldest)
    browser.find_element(By.ID, "history-live").click()
    wait_colors_match_store(browser, port)


def test_models_created_or_deleted_since_count_as_changes(browser, demo):
    """Before, models created since the version shown were neither counted nor shown: scrubbed
    back before a, b and c were made, the page said "Nothing changed since" and "This store has
    no models yet." under a header saying "3 models · version 3"."""
    port = demo.port
    store = "grown"
    make_store(port, store, {model: {"color": "#36cfc9"} for model in ("a", "b", "c")})
    open_viewer(browser, port, f"?store={store}")
    wait(browser, lambda d: range_bounds(d) == (0, 3, 3, False) and tile_ids(d) == ["a", "b", "c"], 5.0,
         "the range never spanned versions 0 to 3")

    def shows(version: int, summary: str, tiles: list[str]) -> None:
        scrub_to(browser, version)
        wait(browser, lambda d: (h := history(d))["shownVersion"] == version and not h["busy"]
             and tile_ids(d) == tiles, 5.0, f"version {version} never showed")
        # The summary is written in the same task as the tiles it counts.
        assert browser.find_element(By.ID, "history-changed").text == summary

    empty = browser.find_element(By.ID, "empty")
    for version, summary in ((0, "3 models created since"), (1, "2 models created since"), (2, "1 model created since")):
        shows(version, summary, ["a", "b", "c"][:version])
        assert history(browser)["created"] == ["a", "b", "c"][version:]
        assert empty.is_displayed() is (version == 0)
        assert browser.find_element(By.ID, "board-meta").text == "3 models · version 3"
    shows(0, "3 models created since", [])
    assert empty.text == "This store had no models at version 0."

    # b deleted and c recolored live, while version 2 (a and b) is shown.
    shows(2, "1 model created since", ["a", "b"])
    json_ok(api(port, "DELETE", f"/api/stores/{store}/models/b"))
    patch_color(port, "c", "#ff7a59", store=store)
    wait(browser, lambda d: d.find_element(By.ID, "history-changed").text == "1 model created, 1 deleted since"
         and history(d)["changed"] == ["b"], 5.0, "the deletion of b was not counted")
    shows(3, "1 model changed, 1 deleted since", ["a", "b", "c"])
    assert history(browser)["changed"] == ["b", "c"] and history(browser)["created"] == []
    browser.find_element(By.ID, "history-live").click()
    wait(browser, lambda d: history(d)["mode"] == "live" and tile_ids(d) == ["a", "c"], 5.0, "Live did not go live")
    assert browser.find_element(By.ID, "history-changed").text == ""
    assert not empty.is_displayed() and empty.get_attribute("textContent") == "This store has no models yet."


# ---- Pages opened with a token -------------------------------------------------------------

# Answers the page's reads of the past with the gateway's 403 once `window.__refuseHistory` is set.
REFUSE_HISTORY = """
    const gatewayFetch = window.fetch;
    window.fetch = function (url, init) {
        if (window.__refuseHistory && String(url).includes('?at=')) {
            const body = {error: 'forbidden', detail: 'the token does not cover store tiles'};
            return Promise.resolve(new Response(JSON.stringify(body), {status: 403, headers: {'Content-Type': 'application/json'}}));
        }
        return gatewayFetch.apply(this, arguments);
    };"""


def test_a_page_with_a_token_reads_the_past_with_it_and_says_when_it_may_not(start_server, tmp_path):
    """Where a read needs an identity (tokens and a subscribe hook), the scrubber reads the past
    with the page's `?token=`, as the page's other calls do. Before, it read without it: every
    read was answered 401, and the range stayed disabled with nothing said. A read refused (401,
    403) is now said, once."""
    hooks = HookBackend(tmp_path / "hooks")
    driver = new_browser(REFUSE_HISTORY)
    try:
        # The animate job's rate never commits during the test; only the PATCHes move the store.
        server = start_server("--demo", "--demo-rate", "0.001", "--token-secret", SECRET,
                              *hooks.hook_args("subscribe"), public=PUBLIC)
        port = server.port
        token = token_for(stores=["tiles"])
        assert api(port, "GET", "/api/stores/tiles?at=0").status == 401
        for n in range(3):
            patch_color(port, f"tile-{n}", f"#{n * 60:02x}40a0")
        current = json_ok(request(port, "GET", "/api/stores/tiles", headers=bearer(token)))["version"]
        open_viewer(driver, port, f"?token={token}")
        wait(driver, lambda d: range_bounds(d)[:2] == (0, current) and not range_bounds(d)[3], 5.0,
             "the range never spanned the store's versions")
        scrub_to(driver, current - 2)
        wait(driver, lambda d: history(d)["shownVersion"] == current - 2, 5.0, "the past was never shown")
        assert history(driver)["refused"] is None and driver.find_element(By.ID, "toast").is_displayed() is False
        driver.find_element(By.ID, "history-live").click()
        wait(driver, lambda d: history(d)["mode"] == "live", 5.0, "Live did not go live")

        driver.execute_script("window.__refuseHistory = true")
        scrub_to(driver, current - 1)
        wait(driver, lambda d: history(d)["refused"] == "the token does not cover store tiles", 5.0,
             "the refusal was not kept")
        toast = driver.find_element(By.ID, "toast")
        assert toast.is_displayed() and "the token does not cover store tiles" in toast.text
        state = history(driver)
        assert state["mode"] == "live" and state["label"] == f"Live · version {current} · history not readable"
        assert range_bounds(driver)[3] is True
    finally:
        driver.quit()
        hooks.stop()


def test_scrubbed_back_screenshot(browser, quiet):
    """Saves artifacts/viewer-history.png: the viewer scrubbed back, the changed tiles marked.

    docs/viewer-history.png, shown in the README, is a copy of it."""
    port = quiet.port
    open_viewer(browser, port)
    wait_colors_match_store(browser, port)
    base = store_version(port, "tiles")
    palette = ["#ff7a59", "#ffc53d", "#73d13d", "#36cfc9", "#4096ff", "#9254de"]
    for n, model in enumerate(["tile-23", "tile-31", "tile-36", "tile-44", "tile-52", "tile-57"] * 2):
        patch_color(port, model, palette[(n + n // 6) % 6])
    wait_colors_match_store(browser, port)
    scrub_to(browser, base)
    wait_shows_version(browser, port, base)
    marks = changed_between(port, base)
    wait(browser, lambda d: highlighted(d) == marks and len(marks) > 0, 5.0, "no marked tiles to show")
    # The page scrolled to its end: the lower tiles, the marked ones among them, and the scrubber.
    browser.execute_script("""
        document.activeElement && document.activeElement.blur();
        window.scrollTo(0, document.documentElement.scrollHeight);""")
    wait(browser, lambda d: d.execute_script("return document.getAnimations().every(a => a.playState !== 'running' "
                                             "|| a.effect.getComputedTiming().iterations === Infinity)"),
         2.0, "tiles still animating")
    ARTIFACTS.mkdir(exist_ok=True)
    target = ARTIFACTS / "viewer-history.png"
    assert browser.save_screenshot(str(target))
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    browser.find_element(By.ID, "history-live").click()
    wait_colors_match_store(browser, port)
