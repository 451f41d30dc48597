"""The Python client package (clients/python, import `receptionist`) against the real gateway: the
HTTP API of topics and stores, conditional writes, reads of the past, typed errors, API keys and
tokens, and that the package builds and installs offline. The streams are in
test_python_client_streams.py.

The package is imported from the source tree (it is not installed into the tests' venv).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import jwt
import pytest

CLIENT_DIR = Path(__file__).resolve().parents[2] / "clients" / "python"
if str(CLIENT_DIR) not in sys.path:
    sys.path.insert(0, str(CLIENT_DIR))

import receptionist  # noqa: E402
from receptionist import (  # noqa: E402
    AsyncGateway, BadRequest, Conflict, Forbidden, Gateway, GatewayError, Gone,
    InsufficientStorage, NotFound, PreconditionFailed, TooManyRequests, Unauthorized, Unavailable,
    mint_token,
)

from conftest import HOST  # noqa: E402

API_KEY = "python-client-key"
SECRET = "python-client-secret-of-thirty-two-bytes-or-more"
_names = itertools.count()


def unique(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{next(_names)}"


def url(server) -> str:
    return f"http://{HOST}:{server.port}"


def test_publish_and_read_messages(server):
    topic = unique("py-news")
    with Gateway(url(server)) as gateway:
        assert gateway.publish(topic, {"headline": "first", "n": 9007199254740993}) == 1
        assert gateway.publish(topic, [1, 2, 3]) == 2
        assert gateway.publish(topic, "third", idempotency_key="py-key-1") == 3
        assert gateway.publish(topic, "third", idempotency_key="py-key-1") == 3  # a retry
        with pytest.raises(Conflict) as conflict:
            gateway.publish(topic, "another body", idempotency_key="py-key-1")
        assert (conflict.value.status, conflict.value.code) == (409, "conflict")

        page = gateway.messages(topic, after=0)
        assert page["topic"] == topic and isinstance(page["epoch"], str)
        assert [(m["seq"], m["data"]) for m in page["messages"]] == [
            (1, {"headline": "first", "n": 9007199254740993}), (2, [1, 2, 3]), (3, "third")]
        assert all(m["type"] == "message" for m in page["messages"])
        assert [m["seq"] for m in gateway.messages(topic, after=1, limit=1)["messages"]] == [2]
        assert {"name": topic, "seq": 3} in [{k: t[k] for k in ("name", "seq")} for t in gateway.topics()]
        with pytest.raises(BadRequest) as ahead:
            gateway.messages(topic, after=99)
        assert ahead.value.status == 400 and "ahead" in ahead.value.detail
        with pytest.raises(NotFound):
            gateway.messages(unique("py-never"), after=0)
        with pytest.raises(ValueError):
            gateway.publish("not a topic name", 1)


def test_publish_batch(server):
    news, sport = unique("py-news"), unique("py-sport")
    with Gateway(url(server)) as gateway:
        assert gateway.publish(news, "a") == 1
        seqs = gateway.publish_batch([{"topic": news, "data": {"h": "b"}}, {"topic": sport, "data": [1]},
                                      {"topic": news, "data": None}])
        assert seqs == [2, 1, 3]
        assert [m["data"] for m in gateway.messages(news, 0)["messages"]] == ["a", {"h": "b"}, None]
        assert [m["data"] for m in gateway.messages(sport, 0)["messages"]] == [[1]]
        with pytest.raises(ValueError):
            gateway.publish_batch([])
        with pytest.raises(ValueError):
            gateway.publish_batch([{"topic": news}])
        for name in (".", ".."):  # a URL path cannot name them: refused before anything is sent
            with pytest.raises(ValueError):
                gateway.publish(name, "a")


def test_every_store_method_with_conditions(server):
    store = unique("py-store")
    with Gateway(url(server)) as gateway:
        assert gateway.create_store(store) == {"name": store, "version": 0}
        with pytest.raises(Conflict):
            gateway.create_store(store)
        assert gateway.put_model(store, "a", {"color": "#ff0000", "style": {"width": 1}}) == 1
        value, tag = gateway.get_model(store, "a")
        assert (value, tag) == ({"color": "#ff0000", "style": {"width": 1}}, '"1"')

        # If-Match: a stale tag is refused with the store's version, and nothing is applied.
        with pytest.raises(PreconditionFailed) as stale:
            gateway.put_model(store, "a", {"color": "#000000"}, if_match='"7"')
        assert (stale.value.status, stale.value.code, stale.value.version) == (412, "precondition_failed", 1)
        assert gateway.put_model(store, "a", {"color": "#00ff00", "style": {"width": 1}}, if_match=tag) == 2
        assert gateway.put_model(store, "a", {"color": "#00ff00", "style": {"width": 2}}, if_match=[5, 2]) == 3
        # If-None-Match: * only creates.
        with pytest.raises(PreconditionFailed) as exists:
            gateway.put_model(store, "a", {}, if_none_match="*")
        assert exists.value.version == 3
        assert gateway.put_model(store, "b", {"n": 1}, if_none_match=True) == 4
        # PATCH (a merge patch) and DELETE honour If-Match too.
        with pytest.raises(PreconditionFailed):
            gateway.patch_model(store, "a", {"label": "A"}, if_match=1)
        assert gateway.patch_model(store, "a", {"label": "A", "style": {"width": 3}}, if_match=3) == 5
        assert gateway.get_model(store, "a") == ({"color": "#00ff00", "style": {"width": 3}, "label": "A"}, '"5"')
        with pytest.raises(PreconditionFailed):
            gateway.delete_model(store, "b", if_match=3)
        assert gateway.delete_model(store, "b", if_match="*") == 6
        with pytest.raises(NotFound) as missing:
            gateway.get_model(store, "b")
        assert (missing.value.status, missing.value.code) == (404, "not_found")

        # A change set: ifVersion and ifMatch make it conditional.
        changes = [{"op": "set", "model": "a", "path": "style.width", "value": 4},
                   {"op": "put", "model": "c", "value": {"n": 3}}]
        with pytest.raises(PreconditionFailed) as behind:
            gateway.commit(store, changes, if_version=5)
        assert behind.value.version == 6
        with pytest.raises(PreconditionFailed):
            gateway.commit(store, changes, if_match={"a": 4})
        assert gateway.commit(store, changes, if_version=6, if_match={"a": '"5"'}) == 7
        assert gateway.commit(store, [{"op": "delete", "model": "c"}], idempotency_key="py-c1") == 8
        assert gateway.commit(store, [{"op": "delete", "model": "c"}], idempotency_key="py-c1") == 8

        now = gateway.snapshot(store)
        assert (now["store"], now["version"]) == (store, 8) and isinstance(now["epoch"], str)
        assert now["models"] == {"a": {"color": "#00ff00", "style": {"width": 4}, "label": "A"}}
        then = gateway.snapshot(store, at=4)
        assert then["version"] == 4 and then["epoch"] == now["epoch"]
        assert then["models"] == {"a": {"color": "#00ff00", "style": {"width": 2}}, "b": {"n": 1}}

        log = gateway.changes(store, after=5)
        assert (log["store"], log["epoch"]) == (store, now["epoch"])
        assert [frame["version"] for frame in log["changes"]] == [6, 7, 8]
        assert log["changes"][0]["changes"] == [{"model": "b", "path": "", "kind": "deleted", "value": None}]
        assert [f["version"] for f in gateway.changes(store, after=0, until=3, limit=2)["changes"]] == [1, 2]
        narrowed = gateway.changes(store, after=0, models=["a"], paths=["style"])
        assert {c["model"] for f in narrowed["changes"] for c in f["changes"]} == {"a"}
        assert [f["version"] for f in narrowed["changes"]] == [1, 3, 5, 7]  # v2 left the style as it was
        assert {s["name"]: s["version"] for s in gateway.stores()}[store] == 8
        with pytest.raises(ValueError):
            gateway.changes(store, after=0, paths=[])

        assert gateway.delete_store(store) == {"store": store, "deleted": True}
        with pytest.raises(NotFound):
            gateway.snapshot(store)


@pytest.mark.parametrize("model", [".", ".."])
def test_a_dot_segment_model_id_is_refused_before_any_request(server, model):
    """`..` in a URL path names the parent: `delete_model(store, "..")` sent `DELETE
    /api/stores/{store}`, and the whole store went. Refused in the client, for every call that
    names a model, and the store is untouched."""
    store = unique("py-dots")
    with Gateway(url(server)) as gateway:
        gateway.create_store(store)
        gateway.put_model(store, "a", {"n": 1})
        for call in (lambda: gateway.delete_model(store, model), lambda: gateway.get_model(store, model),
                     lambda: gateway.put_model(store, model, {"n": 2}), lambda: gateway.patch_model(store, model, {"n": 2})):
            with pytest.raises(ValueError, match="cannot be"):
                call()
        assert gateway.get_model(store, "a") == ({"n": 1}, '"1"')


def test_async_gateway_does_the_same(server):
    async def scenario() -> None:
        store, topic = unique("py-astore"), unique("py-atopic")
        async with AsyncGateway(url(server)) as gateway:
            await gateway.create_store(store)
            assert await gateway.put_model(store, "a", {"n": 1}, if_none_match="*") == 1
            assert await gateway.get_model(store, "a") == ({"n": 1}, '"1"')
            with pytest.raises(PreconditionFailed) as stale:
                await gateway.patch_model(store, "a", {"n": 2}, if_match=0)
            assert stale.value.version == 1
            assert await gateway.commit(store, [{"op": "patch", "model": "a", "value": {"m": 2}}], if_version=1) == 2
            assert (await gateway.snapshot(store, at=1))["models"] == {"a": {"n": 1}}
            assert [f["version"] for f in (await gateway.changes(store, after=0))["changes"]] == [1, 2]
            assert await gateway.delete_model(store, "a") == 3
            assert await gateway.publish(topic, {"x": 1}) == 1
            assert await gateway.publish_batch([{"topic": topic, "data": 2}]) == [2]
            assert [m["data"] for m in (await gateway.messages(topic, 0))["messages"]] == [{"x": 1}, 2]
            await gateway.delete_store(store)

    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_reads_older_than_the_history_are_gone_with_the_oldest(start_server):
    gateway_process = start_server("--history", "3")
    store, topic = unique("py-short"), unique("py-short")
    with Gateway(url(gateway_process)) as gateway:
        gateway.create_store(store)
        for n in range(6):
            gateway.put_model(store, "m", {"n": n})
            gateway.publish(topic, n)
        with pytest.raises(Gone) as at:
            gateway.snapshot(store, at=1)
        assert (at.value.status, at.value.code) == (410, "gone")
        oldest = at.value.oldest
        assert isinstance(oldest, int) and 1 < oldest <= 6
        assert gateway.snapshot(store, at=oldest)["models"] == {"m": {"n": oldest - 1}}
        with pytest.raises(Gone) as after:
            gateway.changes(store, after=0)
        assert after.value.oldest == oldest
        assert [f["version"] for f in gateway.changes(store, after=oldest)["changes"]] == list(range(oldest + 1, 7))
        with pytest.raises(Gone) as messages:
            gateway.messages(topic, after=0)
        kept = messages.value.oldest
        assert isinstance(kept, int) and kept > 0
        assert [m["data"] for m in gateway.messages(topic, after=kept)["messages"]] == list(range(kept, 6))


def test_api_keys_and_tokens(start_server):
    gateway_process = start_server("--api-key", API_KEY, "--token-secret", SECRET)
    base = url(gateway_process)
    store, other, topic = unique("py-keyed"), unique("py-keyed"), unique("py-keyed")
    with Gateway(base, api_key=API_KEY) as admin:
        admin.create_store(store)
        admin.create_store(other)
        assert admin.publish(topic, "by key") == 1
    with Gateway(base) as anonymous:
        with pytest.raises(Unauthorized) as missing:
            anonymous.publish(topic, "no key")
        assert (missing.value.status, missing.value.code) == (401, "unauthorized")
        with pytest.raises(Unauthorized):
            anonymous.put_model(store, "a", {})
        assert anonymous.snapshot(store)["version"] == 0  # reads need no key
    with Gateway(base, api_key="not-the-key") as wrong, pytest.raises(Unauthorized):
        wrong.create_store(unique("py-keyed"))

    # A token's `write` claim lets it write those stores, and `publish` those topics.
    token = mint_token(SECRET, "alice", stores=[store], write=[store], publish=[topic])
    with Gateway(base, token=token) as writer:
        assert writer.put_model(store, "a", {"by": "alice"}) == 1
        assert writer.commit(store, [{"op": "set", "model": "a", "path": "n", "value": 1}]) == 2
        assert writer.publish(topic, "by token") == 2
        with pytest.raises(Forbidden) as scope:
            writer.put_model(other, "a", {})
        assert (scope.value.status, scope.value.code) == (403, "forbidden")
        assert "write" in scope.value.detail
        with pytest.raises(Forbidden):
            writer.publish(unique("py-elsewhere"), 1)
        with pytest.raises(Unauthorized):
            writer.create_store(unique("py-keyed"))  # making stores takes the API key
    reader = mint_token(SECRET, "bob", stores=[store])
    with Gateway(base, token=reader) as gateway, pytest.raises(Forbidden):
        gateway.put_model(store, "a", {})
    forged = mint_token("another-secret-of-thirty-two-bytes-at-least", "eve", write=[store])
    expired = jwt.encode({"sub": "old", "exp": int(time.time()) - 60, "write": [store]}, SECRET, algorithm="HS256")
    for bad in (forged, expired):
        with Gateway(base, token=bad) as gateway, pytest.raises(Unauthorized):
            gateway.put_model(store, "a", {})


def test_publish_rate_is_too_many_requests_with_retry_after(start_server):
    gateway_process = start_server("--publish-rate", "0.01", "--publish-burst", "1")
    topic = unique("py-rate")
    with Gateway(url(gateway_process)) as gateway:
        assert gateway.publish(topic, 1) == 1
        with pytest.raises(TooManyRequests) as limited:
            gateway.publish(topic, 2)
    assert (limited.value.status, limited.value.code) == (429, "too_many_requests")
    assert limited.value.retry_after is not None and limited.value.retry_after > 0


ANSWERS = {
    (400, "bad_request"): BadRequest, (401, "unauthorized"): Unauthorized,
    (403, "forbidden"): Forbidden, (404, "not_found"): NotFound, (409, "conflict"): Conflict,
    (410, "gone"): Gone, (412, "precondition_failed"): PreconditionFailed,
    (429, "too_many_requests"): TooManyRequests, (503, "service_unavailable"): Unavailable,
    (503, "over_capacity"): Unavailable, (507, "insufficient_storage"): InsufficientStorage,
    (405, "method_not_allowed"): GatewayError, (418, "teapot_of_the_future"): GatewayError,
}


def _answer(request: httpx.Request) -> httpx.Response:
    status, code = request.url.params["status"], request.url.params["code"]
    body = {"error": code, "detail": f"detail of {code}", "oldest": 57, "version": 42}
    if code == "not_json":
        return httpx.Response(int(status), content=b"<html>bad gateway</html>")
    return httpx.Response(int(status), json=body, headers={"Retry-After": "3"})


def test_every_error_code_maps_to_its_exception():
    def check(error: GatewayError, status: int, code: str, cls: type) -> None:
        assert type(error) is cls, (code, type(error))
        assert (error.status, error.code, error.detail) == (status, code, f"detail of {code}")
        assert error.body["error"] == code

    with Gateway("http://gateway.invalid", transport=httpx.MockTransport(_answer)) as gateway:
        for (status, code), cls in ANSWERS.items():
            with pytest.raises(GatewayError) as caught:
                gateway._run(receptionist._ops.Call("GET", "/x", lambda r: None,
                                                    params=[("status", str(status)), ("code", code)]))
            check(caught.value, status, code, cls)
            if cls is Gone:
                assert caught.value.oldest == 57
            if cls is PreconditionFailed:
                assert caught.value.version == 42
            if cls is TooManyRequests:
                assert caught.value.retry_after == 3.0
        with pytest.raises(GatewayError) as proxy:
            gateway._run(receptionist._ops.Call("GET", "/x", lambda r: None,
                                                params=[("status", "502"), ("code", "not_json")]))
        assert type(proxy.value) is GatewayError and (proxy.value.status, proxy.value.code) == (502, "http_502")

    async def check_async() -> None:
        async with AsyncGateway("http://gateway.invalid", transport=httpx.MockTransport(_answer)) as gateway:
            for (status, code), cls in ANSWERS.items():
                with pytest.raises(GatewayError) as caught:
                    await gateway._run(receptionist._ops.Call("GET", "/x", lambda r: None,
                                                              params=[("status", str(status)), ("code", code)]))
                check(caught.value, status, code, cls)

    asyncio.run(asyncio.wait_for(check_async(), 10))


def test_mint_token_signs_the_claims():
    token = mint_token(SECRET, "carol", stores=["tiles", "board-*"], topics=["news.*"], publish=["chat"],
                       write=["tiles"], presence=["chat"], expires_in=120, info={"name": "Carol"})
    claims = jwt.decode(token, SECRET, algorithms=["HS256"])
    assert jwt.get_unverified_header(token)["alg"] == "HS256"
    assert {k: claims[k] for k in ("sub", "stores", "topics", "publish", "write", "presence", "info")} == {
        "sub": "carol", "stores": ["tiles", "board-*"], "topics": ["news.*"], "publish": ["chat"],
        "write": ["tiles"], "presence": ["chat"], "info": {"name": "Carol"}}
    assert abs(claims["exp"] - (time.time() + 120)) < 10
    assert "write" not in jwt.decode(mint_token(SECRET, "dan"), SECRET, algorithms=["HS256"])
    with pytest.raises(ValueError):
        mint_token(SECRET, "dan", stores="tiles")
    with pytest.raises(ValueError):
        mint_token(SECRET, "dan", info={"blob": "x" * 2000})


def test_the_package_builds_and_installs_offline(tmp_path):
    """`pip install ./clients/python`, offline, from a copy (so the build leaves nothing in the tree)."""
    source = tmp_path / "source"
    shutil.copytree(CLIENT_DIR, source, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__"))
    target = tmp_path / "site"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {"PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
         "--target", str(target), str(source)],
        capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path)
    assert result.returncode == 0, f"pip install failed:\n{result.stdout}\n{result.stderr}"
    assert (target / "receptionist" / "py.typed").is_file()
    metadata = next(target.glob("receptionist-*.dist-info")) / "METADATA"
    requires = [line for line in metadata.read_text().splitlines() if line.startswith("Requires-Dist:")]
    assert any("httpx" in r for r in requires) and any("websockets" in r for r in requires), requires
    probe = ("import receptionist, receptionist.errors, receptionist.stream; "
             "print(receptionist.__file__, receptionist.__version__, receptionist.Gateway.__name__)")
    imported = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                              cwd=tmp_path, env=os.environ | {"PYTHONPATH": str(target)})
    assert imported.returncode == 0, imported.stderr
    where, version, name = imported.stdout.split()
    assert Path(where).is_relative_to(target) and version == receptionist.__version__ and name == "Gateway"


def test_the_readme_example_runs(start_server, tmp_path):
    """clients/python/README.md's complete example, against a gateway with its key and secret."""
    readme = (CLIENT_DIR / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```", readme, flags=re.M | re.S)
    assert len(blocks) == 1, "the README has one complete Python example"
    example = blocks[0]
    key = re.search(r'^API_KEY = "([^"]+)"', example, flags=re.M).group(1)
    secret = re.search(r'^SECRET = "([^"]+)"', example, flags=re.M).group(1)
    gateway_process = start_server("--api-key", key, "--token-secret", secret)
    script = tmp_path / "example.py"
    script.write_text(example.replace("http://127.0.0.1:8080", url(gateway_process)), encoding="utf-8")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                            cwd=tmp_path, env=os.environ | {"PYTHONPATH": str(CLIENT_DIR)})
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
    assert "someone else wrote it; the store is at 2" in result.stdout
    assert "'card-2': {'title': 'Ship it', 'done': True}" in result.stdout.splitlines()[-1]
