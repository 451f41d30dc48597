"""The viewer, as a user of deploy/compose.yaml opens it: in headless Chromium, through nginx, at
the address `scripts/viewer-url.py` prints (a token whose `write` claim names the demo store). A
click paints a tile through the HTTP API; the store keeps the color when the node serving it is
stopped and started again, because the store lives in Redis.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from compose_stack import FRAME_TIMEOUT, READY_TIMEOUT, ROOT, STOP_TIMEOUT, Failure, compose, http, ports, ready, step, \
    token_secret, wait_until

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
MODEL = "tile-7"


def viewer_url() -> str:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "viewer-url.py"), "--base", f"http://127.0.0.1:{ports['nginx']}"],
        env={**os.environ, "RECEPTIONIST_TOKEN_SECRET": token_secret}, capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        raise Failure(f"scripts/viewer-url.py: {result.stderr.strip()}")
    return result.stdout.strip()


def browser():
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        raise Failure("needs Debian's chromium and chromium-driver (scripts/install-deps.sh container)")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)


def stored_color(port: int) -> str | None:
    status, body = http("GET", port, f"/api/stores/tiles/models/{MODEL}", timeout=3)
    return body["value"].get("color") if status == 200 and isinstance(body, dict) else None


def paint_and_restart(node: str) -> str:
    """Paints MODEL from the viewer through nginx (with `node` the one serving), then stops and
    starts `node` and reads the color back from it. Returns the color painted."""
    step(f"viewer: paint {MODEL} from headless Chromium through nginx, then restart {node}")
    color = f"#{secrets.token_hex(3)}"
    driver = browser()
    try:
        driver.get(viewer_url())
        wait_until("the viewer live on the demo store", lambda: driver.execute_script(
            "return document.getElementById('status').dataset.status === 'live'"
            f" && document.querySelector('[data-model=\"{MODEL}\"]') !== null"), FRAME_TIMEOUT)
        driver.execute_script("""
            const brush = document.getElementById('brush');
            brush.value = arguments[0];
            brush.dispatchEvent(new Event('input', {bubbles: true}));""", color)
        driver.find_element(By.CSS_SELECTOR, f'[data-model="{MODEL}"]').click()
        try:
            wait_until(f"{MODEL} painted {color} in the store", lambda: stored_color(ports["nginx"]) == color, FRAME_TIMEOUT)
        except Failure as failure:
            shown = driver.execute_script(
                "return [document.getElementById('status').dataset.status, document.getElementById('toast').textContent]")
            raise Failure(f"{failure} (the page: status {shown[0]!r}, toast {shown[1]!r})") from None
        wait_until(f"{MODEL} shown {color} on the page", lambda: driver.execute_script(
            f"return document.querySelector('[data-model=\"{MODEL}\"]').getAttribute('aria-label')")
            .endswith(f"color {color}"), FRAME_TIMEOUT)
    finally:
        driver.quit()
    compose("stop", node, timeout=STOP_TIMEOUT)
    compose("start", node, timeout=120)
    wait_until(f"{node} /readyz with Redis up after its restart", lambda: ready(ports[node]), READY_TIMEOUT)
    kept = stored_color(ports[node])
    if kept != color:
        raise Failure(f"after {node} restarted, {MODEL} is {kept}, not the {color} painted before")
    return color
