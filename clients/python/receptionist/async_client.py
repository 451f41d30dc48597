"""The asyncio client: :class:`AsyncGateway`, over ``httpx.AsyncClient`` and ``websockets``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import httpx

from . import _ops
from ._common import DEFAULT_TIMEOUT, Settings, raise_for_error, transport_failure
from ._ops import JSON, ETag
from .stream import Stream, StreamOptions
from .subscriptions import StoreSubscription, TopicSubscription

T = TypeVar("T")


class AsyncGateway:
    """A Receptionist gateway's HTTP API and live streams, for asyncio.

    The HTTP methods are those of :class:`~receptionist.Gateway`, awaited. The streams:

    >>> async with AsyncGateway("http://127.0.0.1:8080", token=token) as gateway:
    ...     async with gateway.subscribe_store("tiles") as tiles:
    ...         async for event in tiles:
    ...             print(event.kind, tiles.version, len(tiles.state))

    ``stream_options`` (reconnect backoff, timeouts) apply to every subscription made here;
    closing the gateway closes them. A call that gets no answer (no connection, a timeout)
    raises :class:`~receptionist.errors.Unavailable`, as an error answer raises its class.
    """

    def __init__(self, url: str, api_key: str | None = None, token: str | None = None, *,
                 timeout: float = DEFAULT_TIMEOUT,
                 transport: httpx.AsyncBaseTransport | None = None, trust_env: bool = True,
                 stream_options: StreamOptions | None = None) -> None:
        self.settings = Settings(url, api_key, token)
        self._http = httpx.AsyncClient(base_url=self.settings.base_url,
                                       headers=self.settings.headers(), timeout=timeout,
                                       transport=transport, trust_env=trust_env)
        self._stream_options = stream_options or StreamOptions(trust_env=trust_env)
        self._streams: set[Stream[Any]] = set()

    # ---- lifecycle -----------------------------------------------------------------------

    async def close(self) -> None:
        """Close every subscription made here, all at once (each waits at most its
        ``close_timeout`` for the gateway), and the HTTP connections."""
        try:
            results = await asyncio.gather(*(stream.close() for stream in list(self._streams)),
                                           return_exceptions=True)
        finally:
            await self._http.aclose()
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def __aenter__(self) -> AsyncGateway:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def _run(self, call: _ops.Call[T]) -> T:
        try:
            response = await self._http.request(call.method, call.path, params=tuple(call.params),
                                                headers=call.headers, content=call.content)
        except httpx.TransportError as exc:
            raise transport_failure(call.method, self.settings.base_url + call.path, exc) from exc
        raise_for_error(response)
        return call.parse(response)

    # ---- streams -------------------------------------------------------------------------

    def subscribe_store(self, name: str, models: Sequence[str] | None = None,
                        paths: Sequence[str] | None = None, max_rate: float | None = None,
                        since: int | None = None, epoch: str | None = None, *,
                        state: Mapping[str, Any] | None = None, old: bool = False,
                        options: StreamOptions | None = None) -> StoreSubscription:
        """Follow a store over the WebSocket: iterate for ``StoreEvent``s; ``.state`` holds the
        models. ``models``/``paths`` narrow it, ``max_rate`` (0.01–1000) coalesces; ``since``
        with ``epoch`` (and the ``state`` held at ``since``) resumes. Bad options raise
        ``ValueError`` here; nothing is sent until the first iteration."""
        stream = StoreSubscription(self.settings, name, models=models, paths=paths,
                                   max_rate=max_rate, since=since, epoch=epoch, state=state,
                                   old=old, options=options or self._stream_options,
                                   on_close=self._streams.discard)
        self._streams.add(stream)
        return stream

    def subscribe_topic(self, name: str, since: int | None = None, epoch: str | None = None, *,
                        options: StreamOptions | None = None) -> TopicSubscription:
        """Follow a topic over the WebSocket: iterate for ``TopicEvent``s (messages, gaps,
        resets). ``since`` with ``epoch`` resumes after that number."""
        stream = TopicSubscription(self.settings, name, since=since, epoch=epoch,
                                   options=options or self._stream_options,
                                   on_close=self._streams.discard)
        self._streams.add(stream)
        return stream

    # ---- topics --------------------------------------------------------------------------

    async def publish(self, topic: str, data: JSON, idempotency_key: str | None = None) -> int:
        """Publish one message; returns its sequence number."""
        return await self._run(_ops.publish(topic, data, idempotency_key))

    async def publish_batch(self, messages: Iterable[Mapping[str, JSON]],
                            idempotency_key: str | None = None) -> list[int]:
        """Publish ``[{"topic": …, "data": …}, …]`` at once; the sequence numbers, in order."""
        return await self._run(_ops.publish_batch(messages, idempotency_key))

    async def messages(self, topic: str, after: int, limit: int | None = None) -> dict[str, Any]:
        """The messages after ``after`` still kept, a page: ``{"topic", "epoch", "messages": […], "through"}``."""
        return await self._run(_ops.messages(topic, after, limit))

    async def topics(self) -> list[dict[str, Any]]:
        """Every topic: ``[{"name", "seq", "subscribers"}, …]``."""
        return await self._run(_ops.topics())

    # ---- stores --------------------------------------------------------------------------

    async def stores(self) -> list[dict[str, Any]]:
        """Every store: ``[{"name", "version", "models"}, …]``."""
        return await self._run(_ops.stores())

    async def create_store(self, name: str) -> dict[str, Any]:
        """Create a store (``Conflict`` if it exists): ``{"name", "version"}``."""
        return await self._run(_ops.create_store(name))

    async def delete_store(self, name: str) -> dict[str, Any]:
        """Delete a store; its subscriptions end (``ended == "deleted"``)."""
        return await self._run(_ops.delete_store(name))

    async def get_model(self, store: str, id: str) -> tuple[JSON, str]:
        """One model and its entity tag (``'"17"'``), to pass back as ``if_match``."""
        return await self._run(_ops.get_model(store, id))

    async def put_model(self, store: str, id: str, value: JSON,
                        if_match: ETag | Sequence[ETag] | None = None,
                        if_none_match: str | bool | None = None) -> int:
        """Create or replace a model (conditionally); returns the new version."""
        return await self._run(_ops.put_model(store, id, value, if_match, if_none_match))

    async def patch_model(self, store: str, id: str, patch: JSON,
                          if_match: ETag | Sequence[ETag] | None = None) -> int:
        """Apply a JSON Merge Patch to a model; returns the new version."""
        return await self._run(_ops.patch_model(store, id, patch, if_match))

    async def delete_model(self, store: str, id: str,
                           if_match: ETag | Sequence[ETag] | None = None) -> int:
        """Delete a model; returns the new version."""
        return await self._run(_ops.delete_model(store, id, if_match))

    async def commit(self, store: str, changes: Sequence[Mapping[str, JSON]],
                     if_version: int | None = None, if_match: Mapping[str, ETag] | None = None,
                     idempotency_key: str | None = None) -> int:
        """Commit an atomic change set; returns its version."""
        return await self._run(_ops.commit(store, changes, if_version, if_match, idempotency_key))

    async def snapshot(self, store: str, at: int | None = None) -> dict[str, Any]:
        """``{"store", "version", "epoch", "models"}``, now or as it was at version ``at``."""
        return await self._run(_ops.snapshot(store, at))

    async def changes(self, store: str, after: int, until: int | None = None,
                      limit: int | None = None, models: Sequence[str] | None = None,
                      paths: Sequence[str] | None = None, old: bool = False) -> dict[str, Any]:
        """The change sets after version ``after``: ``{"store", "epoch", "changes": […], "through"}``
        (``through``: the last version read; the next page is read after it)."""
        return await self._run(_ops.changes(store, after, until, limit, models, paths, old))
