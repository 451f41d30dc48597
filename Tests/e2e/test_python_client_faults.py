"""The Python client (clients/python, import `receptionist`) when things go wrong: a store resumed on
a restarted gateway that has not made it again yet, refusals retried up to `max_attempts`, tokens
at the gateway's size limit, errors crossing a process boundary (pickled), closing against a gateway
that stopped answering, error answers from a proxy in front of the gateway, and HTTP calls that get
no answer. Real gateways where the gateway is what is tested; small servers in the test play a hung
gateway, a proxy and a dead address. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import hashlib
import pickle
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import jwt
import pytest

from python_client_support import FAST, SECRET, run, step, unique, until, url

from receptionist import (  # noqa: E402
    AsyncGateway, Backoff, Gateway, GatewayError, NotFound, PreconditionFailed, StreamOptions,
    TooManyRequests, Unauthorized, Unavailable, mint_token,
)

from conftest import HOST  # noqa: E402

DRAIN = ("--drain-timeout", "1")


# ---- store subscriptions and refusals --------------------------------------------------------

def test_a_store_resumed_on_a_restarted_gateway_is_retried_until_the_store_exists_again(start_server):
    """A memory gateway restarted on the same port: the store subscription's resume is refused
    with `no_such_store` until the backend makes the store again, and is retried with backoff
    (not ended with `NotFound`), then comes back with a reset snapshot. A resume whose store never
    comes back gives up after `max_attempts`, naming the refusal; a first subscription to a store
    that does not exist still fails at once."""
    first = start_server(*DRAIN)
    port = first.port
    store, gone = unique("py-back"), unique("py-gone")

    async def scenario() -> None:
        async with AsyncGateway(url(first), stream_options=FAST) as gateway:
            await gateway.create_store(store)
            await gateway.create_store(gone)
            await gateway.put_model(store, "card", {"n": 1})
            tiles = gateway.subscribe_store(store)
            assert (await step(tiles)).kind == "snapshot"
            bounded = gateway.subscribe_store(gone, options=StreamOptions(
                backoff=Backoff(initial=0.05, maximum=0.2), max_attempts=3))
            assert (await step(bounded)).kind == "snapshot"
            old_epoch = tiles.epoch

            await asyncio.to_thread(first.stop)
            second = await asyncio.to_thread(start_server, *DRAIN, env={"RECEPTIONIST_PORT": str(port)})
            pending = asyncio.ensure_future(step(tiles, 30.0))
            # Two refusals on the new gateway at least, the subscription still going.
            # Waited for by the refusals themselves: a connection attempt may also fall in the gap
            # between the two gateways, which is no refusal.
            await until(lambda: pending.done() or tiles.failed_attempts >= 2,
                        "the subscription never tried again on the new gateway")
            if pending.done():
                pending.result()  # raises what ended it
            assert not pending.done() and tiles.failed_attempts >= 2

            async with AsyncGateway(url(second)) as writer:
                await writer.create_store(store)
                await writer.put_model(store, "card", {"n": 2})
                event = await pending
                assert (event.kind, event.version) == ("reset", 1), event
                assert tiles.state == {"card": {"n": 2}} and tiles.epoch != old_epoch

            with pytest.raises(Unavailable) as gave_up:
                await step(bounded, 20.0)
            assert isinstance(gave_up.value.__cause__, NotFound), gave_up.value.__cause__
            assert "no_such_store" in str(gave_up.value), gave_up.value
            assert (bounded.connections, bounded.failed_attempts) == (4, 3)

            never = gateway.subscribe_store(unique("py-never"))
            with pytest.raises(NotFound):
                await step(never)
            assert (never.connections, never.failed_attempts) == (1, 0)

    run(scenario, timeout=60)


def test_a_retried_refusal_counts_once_toward_max_attempts_and_keeps_its_reason(start_server):
    """`unavailable` (the gateway's `--max-topics` reached) is retried; each refused attempt
    counts once, so `max_attempts=3` makes three connections, and the final error names the
    gateway's refusal (also its `__cause__`)."""
    gateway_process = start_server("--max-topics", "1")

    async def scenario() -> None:
        async with AsyncGateway(url(gateway_process)) as gateway:
            await gateway.publish(unique("py-full"), 1)
            other = gateway.subscribe_topic(unique("py-other"), options=StreamOptions(
                backoff=Backoff(initial=0.05, maximum=0.1), max_attempts=3))
            with pytest.raises(Unavailable) as gave_up:
                await step(other, 20.0)
            assert (other.connections, other.failed_attempts) == (3, 3)
            cause = gave_up.value.__cause__
            assert isinstance(cause, Unavailable) and cause.code == "unavailable", cause
            assert cause.detail and cause.detail in str(gave_up.value), gave_up.value
            assert "None" not in str(gave_up.value)

    run(scenario)


# ---- tokens ----------------------------------------------------------------------------------

def test_mint_token_makes_only_tokens_the_gateway_takes(start_server):
    """An `info` within its 1 KiB of UTF-8 makes a token within the gateway's 4 KiB, whatever its
    characters; a token past 4 KiB raises `ValueError` rather than being refused by the gateway,
    and the longest one returned is taken."""
    gateway_process = start_server("--token-secret", SECRET)
    topic = unique("py-chat")

    async def accepted(token: str) -> bool:
        async with AsyncGateway(url(gateway_process), token=token) as gateway:
            try:
                return (await step(gateway.subscribe_topic(topic, since=0))).seq == 1
            except Unauthorized:
                return False

    async def scenario() -> None:
        async with AsyncGateway(url(gateway_process)) as publisher:
            await publisher.publish(topic, "hello")
        for info in ({"name": "é" * 505}, {"name": "😀" * 250}, {"name": "名" * 337}):
            token = mint_token(SECRET, "ann", topics=[topic], presence=[topic], info=info)
            assert len(token) <= 4096, len(token)
            assert jwt.decode(token, SECRET, algorithms=["HS256"])["info"] == info
            assert await accepted(token), info

        with pytest.raises(ValueError, match="4096"):
            mint_token(SECRET, "ann", topics=[topic, *(f"room-{i}" for i in range(400))])
        # The longest `sub` mint_token takes makes a token the gateway takes; one byte more
        # (signed without the check) is refused by the gateway.
        low, high = 1, 4096
        while low < high:
            middle = (low + high + 1) // 2
            try:
                mint_token(SECRET, "a" * middle, topics=[topic])
                low = middle
            except ValueError:
                high = middle - 1
        longest = mint_token(SECRET, "a" * low, topics=[topic])
        assert len(longest) in (4095, 4096) and await accepted(longest)
        claims = jwt.decode(longest, SECRET, algorithms=["HS256"])
        over = jwt.encode({**claims, "sub": "a" * (low + 1)}, SECRET, algorithm="HS256")
        assert len(over) > 4096 and not await accepted(over)

    run(scenario)


# ---- errors across processes -----------------------------------------------------------------

def test_gateway_errors_pickle_with_all_their_fields(server):
    """Errors cross process boundaries (`multiprocessing`, `ProcessPoolExecutor` results)."""
    errors: list[GatewayError] = []
    with Gateway(url(server)) as gateway:
        store = unique("py-pickle")
        gateway.create_store(store)
        gateway.put_model(store, "a", {"n": 1})
        for call in (lambda: gateway.get_model(store, "missing"),
                     lambda: gateway.put_model(store, "a", {"n": 2}, if_match=7)):
            try:
                call()
            except GatewayError as error:
                errors.append(error)
    errors.append(TooManyRequests("too_many_requests", 429, "slow down", {"error": "x"}, retry_after=3.0))
    errors.append(Unavailable("timeout", None, "no answer in time"))
    assert [type(e) for e in errors[:2]] == [NotFound, PreconditionFailed]
    for error in errors:
        for again in (pickle.loads(pickle.dumps(error)), copy.deepcopy(error)):
            assert type(again) is type(error) and str(again) == str(error) and again.args == error.args
            assert vars(again) == vars(error), (vars(again), vars(error))
    assert pickle.loads(pickle.dumps(errors[1])).version == errors[1].version == 1
    assert pickle.loads(pickle.dumps(errors[2])).retry_after == 3.0


# ---- closing against a hung gateway ------------------------------------------------------------

class HungGateway:
    """Accepts WebSocket upgrades (101 with `receptionist.v1`), then reads and never answers."""

    def __init__(self) -> None:
        self.opened = 0
        self.ended = 0

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, HOST, 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def upgrade(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Reads the upgrade request and answers 101, counted as opened."""
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        key = next(line.split(":", 1)[1].strip() for line in head.split("\r\n")
                   if line.lower().startswith("sec-websocket-key:"))
        accept = base64.b64encode(hashlib.sha1(
            (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
        writer.write(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                      f"Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n"
                      "Sec-WebSocket-Protocol: receptionist.v1\r\n\r\n").encode())
        await writer.drain()
        self.opened += 1

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self.upgrade(reader, writer)
            while await reader.read(65536):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self.ended += 1
            writer.close()


def test_closing_an_async_gateway_closes_its_subscriptions_at_once_within_close_timeout():
    """Against a gateway that stopped answering, `AsyncGateway.close()` closes every subscription
    at the same time, each dropping its connection after `close_timeout` (2 s by default), instead
    of waiting for each closing handshake in turn."""
    async def scenario() -> None:
        hung = HungGateway()
        port = await hung.start()
        try:
            gateway = AsyncGateway(f"http://{HOST}:{port}")
            subscriptions = [gateway.subscribe_topic(unique("py-hung")) for _ in range(4)]
            readers = [asyncio.ensure_future(anext(s)) for s in subscriptions]
            await until(lambda: hung.opened == 4 and all(s.connections == 1 for s in subscriptions),
                        "the subscriptions never connected")
            started = time.monotonic()
            await asyncio.wait_for(gateway.close(), 8.0)
            took = time.monotonic() - started
            assert 1.5 <= took < 4.0, took
            await until(lambda: hung.ended == 4, "the connections were not dropped", timeout=3.0)
            for reader in readers:
                with pytest.raises(StopAsyncIteration):
                    await asyncio.wait_for(reader, 3.0)
        finally:
            hung.server.close()

    run(scenario, timeout=30)
    assert StreamOptions().close_timeout == 2.0
    with pytest.raises(ValueError):
        StreamOptions(close_timeout=0)


# ---- answers that are not the gateway's --------------------------------------------------------

class _Proxy(BaseHTTPRequestHandler):
    ANSWERS = {
        "/503": (503, "text/html", b"<html>503 Service Temporarily Unavailable</html>", {"Retry-After": "7"}),
        "/429": (429, "text/html", b"<html>Too Many Requests</html>", {"Retry-After": "4"}),
        "/401": (401, "text/plain", b"Unauthorized", {}),
        "/404": (404, "text/html", b"<html>not here</html>", {}),
        "/502": (502, "text/html", b"<html>Bad Gateway</html>", {}),
        "/json503": (503, "application/json", b'{"message":"upstream down"}', {}),
    }

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        status, kind, body, extra = self.ANSWERS["/" + self.path.split("/")[1]]
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for name, value in extra.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_error_answers_that_are_not_the_gateways_take_the_class_of_their_status():
    """A proxy in front of the gateway answers HTML or other JSON: the error is the class of its
    status (`code` `http_<status>`), with `Retry-After` kept; a status no class has stays a
    plain `GatewayError`."""
    expected = {"/503": (Unavailable, 7.0), "/429": (TooManyRequests, 4.0), "/401": (Unauthorized, None),
                "/404": (NotFound, None), "/502": (GatewayError, None), "/json503": (Unavailable, None)}
    proxy = ThreadingHTTPServer((HOST, 0), _Proxy)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    base = f"http://{HOST}:{proxy.server_port}"

    def check(error: GatewayError, prefix: str) -> None:
        cls, retry_after = expected[prefix]
        assert type(error) is cls, (prefix, type(error))
        assert error.code == f"http_{prefix[-3:]}" and error.status == int(prefix[-3:])
        assert getattr(error, "retry_after", None) == retry_after, prefix

    async def check_async() -> None:
        for prefix in expected:
            async with AsyncGateway(base + prefix, timeout=5) as gateway:
                with pytest.raises(GatewayError) as caught:
                    await gateway.publish("news", 1)
                check(caught.value, prefix)

    try:
        for prefix in expected:
            with Gateway(base + prefix, timeout=5) as gateway:
                with pytest.raises(GatewayError) as caught:
                    gateway.publish("news", 1)
                check(caught.value, prefix)
        asyncio.run(asyncio.wait_for(check_async(), 20))
    finally:
        proxy.shutdown()
        proxy.server_close()


# ---- calls that get no answer -----------------------------------------------------------------

def test_http_calls_that_get_no_answer_raise_unavailable():
    """No connection (a port that refuses), no answer in time (a listener that never answers)
    and a connection closed before the answer raise `Unavailable` (`unreachable`, `timeout`,
    `connection_lost`), with httpx's exception as `__cause__`, from both clients."""
    refusing = socket.socket()
    refusing.bind((HOST, 0))            # bound, not listening: connections are refused
    # The kernel accepts on `silent`, where nobody answers; `closing` closes each connection.
    silent, closing = socket.create_server((HOST, 0)), socket.create_server((HOST, 0))

    def close_each() -> None:
        while True:
            try:
                connection, _ = closing.accept()
            except OSError:
                return
            connection.recv(65536)
            connection.close()

    threading.Thread(target=close_each, daemon=True).start()
    cases = [(refusing, "unreachable", httpx.ConnectError), (silent, "timeout", httpx.TimeoutException),
             (closing, "connection_lost", (httpx.ReadError, httpx.RemoteProtocolError))]

    def check(error: Unavailable, code: str, cause: Any) -> None:
        assert (error.code, error.status) == (code, None), error
        assert isinstance(error.__cause__, cause), repr(error.__cause__)

    async def check_async() -> None:
        for sock, code, cause in cases:
            async with AsyncGateway(f"http://{HOST}:{sock.getsockname()[1]}", timeout=0.5) as gateway:
                with pytest.raises(Unavailable) as caught:
                    await gateway.publish("news", 1)
                check(caught.value, code, cause)

    try:
        for sock, code, cause in cases:
            with Gateway(f"http://{HOST}:{sock.getsockname()[1]}", timeout=0.5) as gateway:
                started = time.monotonic()
                with pytest.raises(Unavailable) as caught:
                    gateway.publish("news", 1)
                assert time.monotonic() - started < 5
                check(caught.value, code, cause)
        asyncio.run(asyncio.wait_for(check_async(), 20))
    finally:
        for sock in (refusing, silent, closing):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)   # wakes the accepting thread
            sock.close()
