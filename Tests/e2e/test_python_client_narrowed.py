"""A store subscription the subscribe hook narrowed to a nested path, asked for with no options:
the Python client takes the filter from the snapshot, and prunes what the gateway's projection
drops. Before, it kept the empty objects above the path, and its copy differed from every fresh
snapshot of the same subscription."""

from __future__ import annotations

import json

from python_client_support import FAST, SECRET, run, step, unique, url

from receptionist import AsyncGateway, mint_token  # noqa: E402

from conftest import http_client_request, json_ok  # noqa: E402
from hooks import API_KEY, Backend  # noqa: E402


def keyed(port: int, method: str, path: str, payload) -> None:
    resp = http_client_request(port, method, path, body=json.dumps(payload).encode(),
                               headers={"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"})
    json_ok(resp, 201 if path == "/api/stores" or method == "PUT" else 200)


def test_a_hook_narrowed_subscription_is_pruned_as_the_gateway_projects_it(start_server, tmp_path):
    backend = Backend(tmp_path / "backend")
    try:
        server = start_server("--api-key", API_KEY, "--token-secret", SECRET, *backend.hook_args("subscribe"))
        store = unique("nested-board")
        keyed(server.port, "POST", "/api/stores", {"name": store})
        keyed(server.port, "PUT", f"/api/stores/{store}/models/a", {"style": {"color": "red", "width": 1}, "label": "A"})
        # The token covers no store: the hook decides, and narrows to `style.color`.
        token = mint_token(SECRET, "py", stores=[])

        async def scenario() -> None:
            gateway = AsyncGateway(url(server), token=token, stream_options=FAST)
            try:
                subscription = gateway.subscribe_store(store)
                first = await step(subscription)
                assert first.kind == "snapshot" and subscription.state == {"a": {"style": {"color": "red"}}}, subscription.state
                keyed(server.port, "POST", f"/api/stores/{store}/changes",
                      {"changes": [{"op": "set", "model": "a", "path": "style.color", "value": None}]})
                assert (await step(subscription)).kind == "changes"
                fresh = gateway.subscribe_store(store)
                await step(fresh)
                assert fresh.state == {"a": {}}, fresh.state
                assert subscription.state == fresh.state, subscription.state
            finally:
                await gateway.close()

        run(scenario)
    finally:
        backend.stop()
