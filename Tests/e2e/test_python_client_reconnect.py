"""The Python client's reconnections against a gateway that closes: a subscription closed while
it waits to reconnect connects no more."""

from __future__ import annotations

import asyncio
import contextlib

from python_client_support import run, unique, until

from receptionist import AsyncGateway, Backoff, StreamOptions  # noqa: E402

from conftest import HOST  # noqa: E402
from test_python_client_faults import HungGateway  # noqa: E402


class ClosingGateway(HungGateway):
    """Accepts the upgrade, reads the subscribe, and closes with 1011 (try again)."""

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self.upgrade(reader, writer)
            await reader.read(65536)  # the subscribe
            writer.write(b"\x88\x02\x03\xf3")  # close 1011
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self.ended += 1
            writer.close()


def test_a_subscription_closed_while_it_waits_to_reconnect_does_not_connect_again():
    """`close()` during the backoff before a reconnection: no new connection is made. Before,
    the sleep ended in a connection and a subscribe (the backend's hooks asked, presence joined),
    closed only after."""
    async def scenario() -> None:
        closing = ClosingGateway()
        port = await closing.start()
        try:
            options = StreamOptions(backoff=Backoff(initial=0.5, maximum=0.5))
            gateway = AsyncGateway(f"http://{HOST}:{port}", stream_options=options)
            subscription = gateway.subscribe_topic(unique("py-closed"))
            reader = asyncio.ensure_future(anext(subscription))
            await until(lambda: closing.ended == 1, "the first connection never ended")
            await asyncio.wait_for(gateway.close(), 3.0)
            await asyncio.sleep(1.0)  # past the backoff
            assert closing.opened == 1, closing.opened
            with contextlib.suppress(StopAsyncIteration, Exception):
                await asyncio.wait_for(reader, 3.0)
        finally:
            closing.server.close()

    run(scenario, timeout=30)
