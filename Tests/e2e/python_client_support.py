"""What the Python client's tests share: the package imported from the source tree (it is not
installed into the tests' venv), names no other test uses, and bounded waits on its streams."""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

CLIENT_DIR = Path(__file__).resolve().parents[2] / "clients" / "python"
if str(CLIENT_DIR) not in sys.path:
    sys.path.insert(0, str(CLIENT_DIR))

from receptionist import Backoff, StreamOptions  # noqa: E402

from conftest import HOST  # noqa: E402

SECRET = "python-client-secret-of-thirty-two-bytes-or-more"
STEP = 10.0          # one event that is due now
FAST = StreamOptions(backoff=Backoff(initial=0.05, maximum=0.5))
_names = itertools.count()


def unique(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{next(_names)}"


def url(server) -> str:
    return f"http://{HOST}:{server.port}"


def run(scenario: Callable[[], Awaitable[None]], timeout: float = 45.0) -> None:
    asyncio.run(asyncio.wait_for(scenario(), timeout))


async def step(iterator: Any, timeout: float = STEP) -> Any:
    """The next event, within `timeout` seconds."""
    return await asyncio.wait_for(anext(iterator), timeout)


async def events(iterator: Any, count: int) -> list[Any]:
    return [await step(iterator) for _ in range(count)]


async def until(condition: Callable[[], bool], message: str, timeout: float = STEP) -> None:
    """Poll a condition the stream's own task makes true, within a deadline."""
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.01)
    try:
        await asyncio.wait_for(poll(), timeout)
    except TimeoutError:
        raise AssertionError(f"{message} (waited {timeout}s)") from None
