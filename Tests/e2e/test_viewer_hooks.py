"""The viewer on a gateway with an API key: a browser with a session cookie is admitted by the
connect hook and paints through `commit()` over its WebSocket, with no key and no token; one
whose grant does not cover the store is refused by the write hook and told so."""

from __future__ import annotations

import json

import pytest
from selenium.webdriver.common.by import By

from conftest import http_client_request, json_ok, store_snapshot, wait_for
from hooks import API_KEY, Backend
from viewer import PUBLIC, new_browser, set_brush, wait_live


def keyed(port: int, method: str, path: str) -> dict:
    return json_ok(http_client_request(port, method, path, headers={"Authorization": f"Bearer {API_KEY}"}))


@pytest.fixture(scope="module")
def gateway(module_servers, tmp_path_factory):
    backend = Backend(tmp_path_factory.mktemp("backend"))
    server = module_servers("--demo", "--job-threads", "1", "--api-key", API_KEY,
                            *backend.hook_args("connect", "write"), public=PUBLIC)
    for job in json_ok(http_client_request(server.port, "GET", "/api/jobs"))["jobs"]:
        if job["state"] == "running":
            keyed(server.port, "DELETE", f"/api/jobs/{job['id']}")
    yield server
    backend.stop()


def viewer_as(port: int, session: str):
    driver = new_browser()
    # The cookie belongs to the gateway's origin: set it on a page of that origin first.
    driver.get(f"http://127.0.0.1:{port}/healthz")
    driver.add_cookie({"name": "session", "value": session, "path": "/"})
    driver.get(f"http://127.0.0.1:{port}/")
    wait_live(driver)
    return driver


def click(driver, model: str, color: str) -> None:
    set_brush(driver, color)
    driver.find_element(By.CSS_SELECTOR, f'[data-model="{model}"]').click()


def test_a_cookie_session_paints_through_commit_on_a_keyed_gateway(gateway):
    driver = viewer_as(gateway.port, "alice")
    try:
        click(driver, "tile-7", "#12ab34")
        wait_for(lambda: store_snapshot(gateway.port, "tiles")["models"]["tile-7"]["color"] == "#12ab34", 5.0,
                 "tile-7 was not painted through the WebSocket")
        # The page holds no key: without the WebSocket, an HTTP write from it is refused.
        answer = driver.execute_async_script("""
            const done = arguments[arguments.length - 1];
            fetch('/api/stores/tiles/models/tile-7', {method: 'PATCH', headers: {'Content-Type': 'application/json'},
                  body: JSON.stringify({color: '#000000'})}).then((r) => done(r.status));""")
        assert answer == 401, answer
    finally:
        driver.quit()


def test_a_session_without_a_write_grant_is_refused_and_told(gateway):
    before = store_snapshot(gateway.port, "tiles")["models"]["tile-8"]
    driver = viewer_as(gateway.port, "bob")
    try:
        click(driver, "tile-8", "#ff00ff")
        toast = wait_for(lambda: driver.find_element(By.ID, "toast").text, 5.0, "no toast for the refused paint")
        assert "Could not paint tile-8" in toast and "bob may not write to tiles" in toast, toast
        assert store_snapshot(gateway.port, "tiles")["models"]["tile-8"] == before
    finally:
        driver.quit()
