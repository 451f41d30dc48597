"""One reconnecting WebSocket subscription (``/ws``, subprotocol ``receptionist.v1``).

A subscription is an async iterator of events. It connects when first iterated, sends
``auth`` (with a token) and ``subscribe``, and reads frames as they are asked for. When the
connection drops it reconnects, after the delay a ``draining`` message asked for or with backoff
(``Backoff``: 0.1 s doubling up to 5 s), and subscribes again with ``since`` and ``epoch``, so the
gateway sends what was missed (or a reset). A refusal a new attempt may cure is retried the same
way: ``rate_limited`` and ``unavailable`` always, ``no_such_store`` once the subscription has had
its store (the store of a restarted gateway, not yet made again). ``max_attempts`` bounds the
attempts in a row, each failed connection or refusal counting once. Closing waits at most
``close_timeout`` for the closing handshake, then drops the connection. The store and topic
subscriptions in ``subscriptions.py`` say what the frames mean.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI
from websockets.typing import Subprotocol

from ._common import USER_AGENT, Settings
from .errors import Forbidden, GatewayError, Unavailable, error_from_frame, error_from_response

__all__ = ["Backoff", "StreamOptions", "Stream", "SUBPROTOCOL"]

SUBPROTOCOL = "receptionist.v1"
log = logging.getLogger("receptionist")

E = TypeVar("E")

# Stream errors after which a new connection may well succeed: the rest are final.
_RETRYABLE_FRAME_CODES = frozenset({"rate_limited", "unavailable"})
# Retried too once the subscription has had its target (a gateway restarted without it, whose
# backend has not made it again yet); on a first subscription they are final.
_RESUMABLE_FRAME_CODES = frozenset({"no_such_store"})
# Upgrade answers worth another try later (busy, draining, timed out); others are final.
_RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class Backoff:
    """Reconnect delays: ``initial`` seconds, doubling after each failed attempt, at most
    ``maximum``; each shortened by up to ``jitter`` (a fraction) so clients spread out."""

    initial: float = 0.1
    maximum: float = 5.0
    jitter: float = 0.2

    def __post_init__(self) -> None:
        if not 0 < self.initial <= self.maximum:
            raise ValueError("backoff needs 0 < initial <= maximum")
        if not 0 <= self.jitter < 1:
            raise ValueError("backoff jitter is a fraction from 0 to 1")

    def delay(self, failures: int) -> float:
        base = min(self.maximum, self.initial * 2.0 ** min(failures, 32))
        return base * (1 - self.jitter * random.random())


@dataclass(frozen=True)
class StreamOptions:
    """How a subscription connects: backoff, ``max_attempts`` in a row before it gives up
    (``None``: never), ``reconnect`` (``False``: a drop ends it with ``Unavailable``), and the
    WebSocket's timeouts and keepalive pings. ``close_timeout`` bounds the wait for the closing
    handshake when the subscription is closed; past it the connection is dropped."""

    backoff: Backoff = Backoff()
    max_attempts: int | None = None
    reconnect: bool = True
    open_timeout: float = 10.0
    ping_interval: float | None = 20.0
    ping_timeout: float | None = 20.0
    trust_env: bool = True
    close_timeout: float = 2.0

    def __post_init__(self) -> None:
        if not self.close_timeout > 0:
            raise ValueError("close_timeout must be positive")


class Stream(ABC, Generic[E]):
    """The connection, reconnection and frame loop shared by store and topic subscriptions."""

    def __init__(self, settings: Settings, options: StreamOptions | None,
                 on_close: Callable[[Stream[Any]], None] | None) -> None:
        self._settings = settings
        self._options = options or StreamOptions()
        self._on_close = on_close
        self._ws: ClientConnection | None = None
        self._pending: deque[E] = deque()
        self._failures = 0            # attempts failed in a row (connect or subscribe)
        self._last_error: BaseException | None = None   # why the last attempt failed
        self._refusal: GatewayError | None = None       # a refusal this connection is dropped for
        self._had_target = False      # the gateway answered a subscription of this one before
        self._drain_delay: float | None = None
        self._lost = False            # a connection was opened before: the next one waits
        self._answered = False        # the gateway answered this connection's subscription
        self._busy = False
        self._closed = False
        #: Why the subscription ended by itself (``"deleted"``, ``"unsubscribed"``), if it did.
        self.ended: str | None = None
        #: Connections opened, reconnections among them, and attempts that failed.
        self.connections = 0
        self.reconnects = 0
        self.failed_attempts = 0

    # ---- what a subclass says -------------------------------------------------------------

    @abstractmethod
    def _subscribe_frame(self) -> dict[str, Any]:
        """The ``subscribe`` message to send now (with ``since`` once there is one)."""

    @abstractmethod
    def _on_frame(self, frame: dict[str, Any]) -> list[E]:
        """Take one frame; return the events it makes. Call :meth:`_confirmed` once the
        gateway has answered the subscription, :meth:`_end` when it is over."""

    def _confirmed(self) -> None:
        self._failures = 0
        self._last_error = None
        self._answered = True
        self._had_target = True

    def _end(self, reason: str) -> None:
        self.ended = reason

    # ---- iteration ------------------------------------------------------------------------

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> E:
        if self._busy:
            raise RuntimeError("a subscription is iterated by one task at a time")
        self._busy = True
        try:
            return await self._next()
        except (GatewayError, StopAsyncIteration):
            await self.close()  # final: the gateway refused, or the subscription is over
            raise
        finally:
            self._busy = False

    async def _next(self) -> E:
        while True:
            if self._pending:
                return self._pending.popleft()
            if self._closed or self.ended is not None:
                raise StopAsyncIteration
            if self._ws is None:
                await self._open()
                continue
            try:
                raw = await self._ws.recv()
            except ConnectionClosed as closed:
                await self._connection_lost(closed)
                continue
            frame = _decode(raw)
            if frame is not None:
                self._pending.extend(self._take(frame))

    def _take(self, frame: dict[str, Any]) -> list[E]:
        kind = frame.get("type")
        if kind == "draining":
            delay = frame.get("reconnectAfterMs")
            if isinstance(delay, (int, float)) and not isinstance(delay, bool):
                self._drain_delay = min(max(float(delay) / 1000.0, 0.0), 5.0)
            else:
                self._drain_delay = 0.0
            return []
        if kind == "authenticated":
            return []
        if kind == "error":
            error = error_from_frame(frame)
            if error.code in _RETRYABLE_FRAME_CODES or \
                    (error.code in _RESUMABLE_FRAME_CODES and self._had_target):
                log.debug("receptionist: %s refused (%s); trying again", self._settings.ws_url, error)
                self._failed(error)   # counted here, not again when the connection is found lost
                self._refusal = error
                self._drop()
                return []
            self._closed = True
            raise error
        return self._on_frame(frame)

    # ---- connecting -----------------------------------------------------------------------

    async def _open(self) -> None:
        """Connect (waiting first if a connection was lost or an attempt failed) and subscribe."""
        while not self._closed:
            if self._lost or self._failures:
                self._give_up_after()
                delay = self._drain_delay if self._drain_delay is not None else \
                    self._options.backoff.delay(max(self._failures - 1, 0))
                self._drain_delay = None
                await asyncio.sleep(delay)
                if self._closed:  # closed while it waited: no connection, no subscribe
                    break
            try:
                ws = await self._connect()
            except (OSError, asyncio.TimeoutError, InvalidHandshake, ConnectionClosed) as exc:
                self._failed(exc)
                log.debug("receptionist: connecting to %s failed (%r)", self._settings.ws_url, exc)
                continue
            if self._closed:  # closed while it connected: the socket goes before it subscribes
                ws.transport.abort()
                break
            try:
                if self._settings.token is not None:
                    await ws.send(json.dumps({"type": "auth", "token": self._settings.token}))
                await ws.send(json.dumps(self._subscribe_frame(), separators=(",", ":")))
            except ConnectionClosed as exc:
                self._failed(exc)
                continue
            except BaseException:
                ws.transport.abort()  # cancelled half-way: never keep a socket not subscribed
                raise
            self.reconnects += self._lost
            self.connections += 1
            self._lost = True
            self._answered = False
            self._ws = ws
            return
        raise StopAsyncIteration

    def _failed(self, reason: BaseException) -> None:
        self._failures += 1
        self.failed_attempts += 1
        self._last_error = reason

    def _give_up_after(self) -> None:
        if not self._failures:
            return
        limit = self._options.max_attempts if self._options.reconnect else 1
        if limit is not None and self._failures >= limit:
            self._closed = True
            last = self._last_error
            reason = str(last) if isinstance(last, GatewayError) else repr(last)
            raise Unavailable("unreachable", None, f"no subscription at {self._settings.ws_url} "
                              f"after {self._failures} attempts in a row; the last: {reason}") from last

    async def _connect(self) -> ClientConnection:
        try:
            return await connect(
                self._settings.ws_url,
                subprotocols=[Subprotocol(SUBPROTOCOL)],
                open_timeout=self._options.open_timeout,
                ping_interval=self._options.ping_interval,
                ping_timeout=self._options.ping_timeout,
                close_timeout=self._options.close_timeout,
                max_size=None,
                user_agent_header=USER_AGENT,
                proxy=True if self._options.trust_env else None,
            )
        except InvalidStatus as exc:
            status = exc.response.status_code
            if status in _RETRYABLE_STATUSES:
                raise
            raise error_from_response(status, bytes(exc.response.body or b""),
                                      dict(exc.response.headers.raw_items())) from exc
        except InvalidURI as exc:
            raise ValueError(f"not a WebSocket URL: {self._settings.ws_url}") from exc

    async def _connection_lost(self, closed: ConnectionClosed) -> None:
        self._ws = None
        refusal, self._refusal = self._refusal, None
        if self._closed or self.ended is not None:
            return
        log.debug("receptionist: connection lost (%s); resuming", closed)
        if refusal is not None:
            # Dropped for a refusal worth another try, counted when it came.
            if not self._options.reconnect:
                self._closed = True
                raise refusal
            return
        if not self._answered:
            # Closed before the subscription was answered: a refusal (1008, the connect hook's
            # or the token's, with its reason), or an attempt that failed, which backs off and
            # counts toward `max_attempts`, as a failed connect does.
            received = closed.rcvd
            if received is not None and received.code == 1008:
                self._closed = True
                raise Forbidden("forbidden", None, received.reason or "the gateway refused the connection") from closed
            self._failed(closed)
        if not self._options.reconnect:
            self._closed = True
            raise Unavailable("connection_lost", None, f"the connection ended: {closed}") from closed

    def _drop(self) -> None:
        """End the connection now (the next read finds it closed, and reconnects)."""
        if self._ws is not None:
            self._ws.transport.abort()

    def _resubscribe_now(self) -> bool:
        """Subscribe again at once (no backoff) on a new connection, with what
        ``_subscribe_frame`` says then; False when a drop would end the subscription instead."""
        if not self._options.reconnect:
            return False
        self._drain_delay = 0.0
        self._drop()
        return True

    def _drop_for_test(self) -> None:
        """Cut the connection as a network failure would, forcing a reconnect and resume."""
        self._drop()

    # ---- closing --------------------------------------------------------------------------

    async def close(self) -> None:
        """Unsubscribe by closing the connection; iteration then stops. Waits at most
        ``close_timeout`` for the gateway to answer the close, then drops the connection."""
        self._closed = True
        await self._close_socket()
        if self._on_close is not None:
            self._on_close(self)
            self._on_close = None

    async def _close_socket(self) -> None:
        ws, self._ws = self._ws, None
        if ws is None:
            return
        try:
            # The handshake is bounded by the connection's close_timeout too; this also bounds
            # a send of the close frame that a gateway no longer reading would hold up.
            async with asyncio.timeout(self._options.close_timeout):
                await ws.close()
        except TimeoutError:
            ws.transport.abort()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()


def _decode(raw: str | bytes) -> dict[str, Any] | None:
    try:
        frame = json.loads(raw)
    except ValueError:
        log.warning("receptionist: ignoring a frame that is not JSON")
        return None
    return frame if isinstance(frame, dict) else None
