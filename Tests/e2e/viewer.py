"""What the viewer's browser tests share: headless Chromium, the viewer's state read from the page,
and a demo gateway. Needs Debian's `chromium` and `chromium-driver` (scripts/install-deps.sh test)
and Selenium from requirements.txt. Every wait polls with a deadline; nothing sleeps and hopes.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
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
# Chromium leaves a directory in its temporary folder for every browser it starts: the browsers
# get one of their own, removed when the tests end.
BROWSER_TEMP = tempfile.mkdtemp(prefix="receptionist-chromium-")
atexit.register(shutil.rmtree, BROWSER_TEMP, ignore_errors=True)



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
    service = Service(str(CHROMEDRIVER), env={**os.environ, "TMPDIR": BROWSER_TEMP})
    driver = webdriver.Chrome(service=service, options=options)
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


def set_brush(driver, color: str) -> None:
    driver.execute_script("""
        const brush = document.getElementById('brush');
        brush.value = arguments[0];
        brush.dispatchEvent(new Event('input', {bubbles: true}));""", color)


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


# Counts what the page's alert says: every change of its text is said anew by a screen reader,
# the same text set again too.
RECORDING_ALERTS = """
    window.__alerts = [];
    document.addEventListener('DOMContentLoaded', () => {
        const toast = document.getElementById('toast');
        new MutationObserver(() => window.__alerts.push(toast.textContent))
            .observe(toast, {childList: true, characterData: true, subtree: true});
    });"""


def alerts(driver) -> list[str]:
    """What the page's alert has said, oldest first (needs RECORDING_ALERTS)."""
    return driver.execute_script("return window.__alerts")


def tile_ids(driver) -> list[str]:
    """The ids of the live view's tiles, in the order the grid has them."""
    return driver.execute_script("return [...document.querySelectorAll('#grid [data-model]')].map(t => t.dataset.model)")


def focused_model(driver) -> str | None:
    """The id of the tile that has keyboard focus, or None when focus is elsewhere."""
    return driver.execute_script("const el = document.activeElement; return el && el.dataset ? el.dataset.model || null : null")


def make_store(port: int, store: str, models: dict[str, dict]) -> int:
    """Makes `store` with `models`, one PUT each, and returns its version."""
    json_ok(api(port, "POST", "/api/stores", {"name": store}), 201)
    for model, value in models.items():
        json_ok(api(port, "PUT", f"/api/stores/{store}/models/{model}", value), 201)
    return store_version(port, store)
