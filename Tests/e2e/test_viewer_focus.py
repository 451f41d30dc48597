"""Keyboard focus in the viewer's grid, in headless Chromium: a tile that has focus keeps it while
tiles come and go around it, whether a model is created, the view is pinned to a past version,
or it returns live. Every wait polls a real condition with a deadline."""

from __future__ import annotations

from viewer import (  # noqa: F401 (fixtures are used by name)
    By, Keys, browser, chromium_installed, demo, focused_model, make_store, open_viewer, tile_ids, wait,
)
from conftest import api, json_ok
from test_viewer_history import history, range_bounds, scrub_to


def press_tab(driver) -> None:
    driver.switch_to.active_element.send_keys(Keys.TAB)


def test_a_focused_tile_keeps_focus_as_tiles_come_and_go(browser, demo):
    """Before, every new tile re-appended the whole grid: the focused tile lost focus to the
    page's body, and the next Tab went to the first tile."""
    port = demo.port
    store = "focus-kept"
    first = [f"m{n}" for n in range(1, 9)]
    version = make_store(port, store, {model: {"color": "#4096ff"} for model in first})
    open_viewer(browser, port, f"?store={store}")
    wait(browser, lambda d: tile_ids(d) == first, 5.0, "the eight tiles never showed")
    browser.execute_script("arguments[0].focus()", browser.find_element(By.CSS_SELECTOR, '[data-model="m2"]'))
    assert focused_model(browser) == "m2"

    # A model created after the focused tile, then one before it: each gets its place in id order,
    # and focus stays where it was.
    for model, ids in (("m9", first + ["m9"]), ("m0", ["m0"] + first + ["m9"])):
        json_ok(api(port, "PUT", f"/api/stores/{store}/models/{model}", {"color": "#73d13d"}), 201)
        wait(browser, lambda d: tile_ids(d) == ids, 5.0, f"the tile of {model} never took its place")
        assert focused_model(browser) == "m2", f"creating {model} took focus off m2"
    press_tab(browser)
    assert focused_model(browser) == "m3"

    # Pinned to the version before m9 and m0 (their tiles go), then live again (they come back).
    wait(browser, lambda d: range_bounds(d) == (0, version + 2, version + 2, False), 5.0,
         "the history range never spanned the store's versions")
    scrub_to(browser, version)
    wait(browser, lambda d: history(d)["shownVersion"] == version and tile_ids(d) == first, 5.0,
         "the tiles of that version never showed")
    assert focused_model(browser) == "m3", "pinning to a past version took focus off m3"
    # The range moved to its end, as a drag would, goes live.
    scrub_to(browser, version + 2)
    wait(browser, lambda d: history(d)["mode"] == "live" and tile_ids(d) == ["m0"] + first + ["m9"], 5.0,
         "going live did not bring the new tiles back")
    assert focused_model(browser) == "m3", "going live took focus off m3"
    # A deletion and a creation after the focused tile.
    json_ok(api(port, "DELETE", f"/api/stores/{store}/models/m9"))
    json_ok(api(port, "PUT", f"/api/stores/{store}/models/m10", {"color": "#9254de"}), 201)
    wait(browser, lambda d: tile_ids(d) == ["m0"] + first + ["m10"], 5.0, "m9 never gave way to m10")
    assert focused_model(browser) == "m3"
    press_tab(browser)
    assert focused_model(browser) == "m4"
