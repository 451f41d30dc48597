"""Writes by a token's grant: a browser that holds a subscription token, not the API key, may
write the models of the stores its `write` claim names, and publish over HTTP to the topics its
`publish` claim names; nothing else (docs/SECURITY.md).
"""

from __future__ import annotations

import pytest

from conftest import assert_json_error, json_ok
from test_trust import KEY, SECRET, make_token, request, token_for


@pytest.fixture
def gateway(start_server):
    server = start_server("--api-key", KEY, "--token-secret", SECRET)
    for name in ("board", "private"):
        json_ok(request(server.port, "POST", "/api/stores", {"name": name}, {"Authorization": f"Bearer {KEY}"}), 201)
    json_ok(request(server.port, "PUT", "/api/stores/board/models/tile-1", {"color": "#000000"}, {"Authorization": f"Bearer {KEY}"}), 201)
    return server


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def test_a_write_grant_writes_the_stores_it_names_and_nothing_else(gateway):
    port = gateway.port
    token = token_for(stores=["board"], write=["boa*"])
    painted = request(port, "PATCH", "/api/stores/board/models/tile-1", {"color": "#123456"}, bearer(token))
    version = json_ok(painted)["version"]
    assert json_ok(request(port, "GET", "/api/stores/board/models/tile-1"))["value"]["color"] == "#123456"
    change = {"changes": [{"op": "put", "model": "note", "value": {"by": "token"}}]}
    assert json_ok(request(port, "POST", "/api/stores/board/changes", change, bearer(token)))["version"] == version + 1
    assert json_ok(request(port, "PUT", "/api/stores/board/models/n2", {"n": 2}, bearer(token)), 201)["version"] == version + 2
    assert json_ok(request(port, "DELETE", "/api/stores/board/models/n2", None, bearer(token)))["version"] == version + 3

    # Another store: the token is valid but does not grant it.
    assert_json_error(request(port, "PUT", "/api/stores/private/models/m", {"n": 1}, bearer(token)), 403, "forbidden")
    # Making or deleting a store, jobs and batches take the API key.
    assert_json_error(request(port, "POST", "/api/stores", {"name": "board2"}, bearer(token)), 401, "unauthorized")
    assert_json_error(request(port, "DELETE", "/api/stores/board", None, bearer(token)), 401, "unauthorized")
    assert_json_error(request(port, "POST", "/api/jobs", {"kind": "animate", "store": "board"}, bearer(token)),
                      401, "unauthorized")
    # A topic needs the `publish` claim, which this token lacks.
    assert_json_error(request(port, "POST", "/api/topics/news/messages", {"n": 1}, bearer(token)), 403, "forbidden")
    assert json_ok(request(port, "GET", "/api/stores/private"))["models"] == {}


def test_a_publish_grant_publishes_over_http_to_its_topics(gateway):
    port = gateway.port
    token = token_for(publish=["news"])
    assert json_ok(request(port, "POST", "/api/topics/news/messages", {"n": 1}, bearer(token)), 201)["seq"] == 1
    assert_json_error(request(port, "POST", "/api/topics/other/messages", {"n": 1}, bearer(token)), 403, "forbidden")
    assert_json_error(request(port, "PUT", "/api/stores/board/models/tile-1", {"n": 1}, bearer(token)), 403, "forbidden")


@pytest.mark.parametrize("token", [
    token_for(-5, write=["board"]),                                              # expired
    make_token({"sub": "x", "exp": 4102444800, "write": ["board"]}, secret="another secret, long enough"),
    "not.a.token",
], ids=["expired", "other-secret", "malformed"])
def test_an_invalid_token_writes_nothing(gateway, token):
    resp = request(gateway.port, "PATCH", "/api/stores/board/models/tile-1", {"color": "#000001"}, bearer(token))
    assert_json_error(resp, 401, "unauthorized")
    assert "token" in resp.json()["detail"]
    assert json_ok(request(gateway.port, "GET", "/api/stores/board/models/tile-1"))["value"]["color"] != "#000001"


def test_without_a_token_secret_a_token_is_no_credential(start_server):
    server = start_server("--api-key", KEY, "--demo")
    resp = request(server.port, "PATCH", "/api/stores/board/models/tile-1", {"color": "#000002"},
                   bearer(token_for(write=["tiles"])))
    assert_json_error(resp, 401, "unauthorized")


def test_the_viewer_paints_with_its_token(start_server):
    """The viewer opened with `?token=` subscribes with it and paints with it: a token whose
    `write` names the store paints; one without it is refused and the store does not move."""
    from selenium.webdriver.common.by import By

    from conftest import REPO_ROOT, wait_for
    from viewer import new_browser, set_brush, wait_live

    server = start_server("--api-key", KEY, "--token-secret", SECRET, public=REPO_ROOT / "Public")
    port = server.port
    key = {"Authorization": f"Bearer {KEY}"}
    json_ok(request(port, "POST", "/api/stores", {"name": "board"}, key), 201)
    for n in range(4):
        json_ok(request(port, "PUT", f"/api/stores/board/models/tile-{n}", {"color": "#000000", "label": f"T{n}"}, key), 201)

    def color() -> str:
        return json_ok(request(port, "GET", "/api/stores/board/models/tile-2"))["value"]["color"]

    driver = new_browser()
    try:
        for token, paints in ((token_for(stores=["board"]), False), (token_for(stores=["board"], write=["board"]), True)):
            driver.get(f"http://127.0.0.1:{port}/?store=board&token={token}")
            wait_live(driver)
            before = color()
            brush = "#12ab34" if paints else "#ab1234"
            set_brush(driver, brush)
            driver.find_element(By.CSS_SELECTOR, '[data-model="tile-2"]').click()
            if paints:
                wait_for(lambda: color() == brush, 5.0, "the viewer's paint did not reach the store")
            else:
                # Painted through `commit()` on the page's WebSocket, refused with `forbidden`.
                wait_for(lambda: "grant that covers it" in driver.find_element(By.ID, "toast").text, 5.0,
                         "a paint without the write claim was not refused on the page")
                assert color() == before
    finally:
        driver.quit()
