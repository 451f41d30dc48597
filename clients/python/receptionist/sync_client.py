"""The blocking client: :class:`Gateway`, over ``httpx.Client``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import httpx

from . import _ops
from ._common import DEFAULT_TIMEOUT, Settings, raise_for_error, transport_failure
from ._ops import JSON, ETag

T = TypeVar("T")


class Gateway:
    """A Receptionist gateway's HTTP API, blocking.

    >>> with Gateway("http://127.0.0.1:8080", api_key="…") as gateway:
    ...     seq = gateway.publish("news", {"headline": "hello"})

    ``api_key`` authorises writes (``Authorization: Bearer``); without one, ``token`` (a
    subscription token whose ``write`` or ``publish`` claim names the store or topic) does.
    Every error answer raises a :class:`~receptionist.errors.GatewayError` subclass; a call that
    gets no answer (no connection, a timeout, a connection lost) raises
    :class:`~receptionist.errors.Unavailable`, with httpx's exception as ``__cause__``.
    """

    def __init__(self, url: str, api_key: str | None = None, token: str | None = None, *,
                 timeout: float = DEFAULT_TIMEOUT, transport: httpx.BaseTransport | None = None,
                 trust_env: bool = True) -> None:
        self.settings = Settings(url, api_key, token)
        self._http = httpx.Client(base_url=self.settings.base_url, headers=self.settings.headers(),
                                  timeout=timeout, transport=transport, trust_env=trust_env)

    # ---- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        """Close the connections this client keeps open."""
        self._http.close()

    def __enter__(self) -> Gateway:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _run(self, call: _ops.Call[T]) -> T:
        try:
            response = self._http.request(call.method, call.path, params=tuple(call.params),
                                          headers=call.headers, content=call.content)
        except httpx.TransportError as exc:
            raise transport_failure(call.method, self.settings.base_url + call.path, exc) from exc
        raise_for_error(response)
        return call.parse(response)

    # ---- topics --------------------------------------------------------------------------

    def publish(self, topic: str, data: JSON, idempotency_key: str | None = None) -> int:
        """Publish one message; returns its sequence number."""
        return self._run(_ops.publish(topic, data, idempotency_key))

    def publish_batch(self, messages: Iterable[Mapping[str, JSON]],
                      idempotency_key: str | None = None) -> list[int]:
        """Publish ``[{"topic": …, "data": …}, …]`` in one request (all checked before any is
        published); returns the sequence numbers in the order sent."""
        return self._run(_ops.publish_batch(messages, idempotency_key))

    def messages(self, topic: str, after: int, limit: int | None = None) -> dict[str, Any]:
        """The messages after ``after`` still kept, a page: ``{"topic", "epoch", "messages": […], "through"}``."""
        return self._run(_ops.messages(topic, after, limit))

    def topics(self) -> list[dict[str, Any]]:
        """Every topic: ``[{"name", "seq", "subscribers"}, …]``."""
        return self._run(_ops.topics())

    # ---- stores --------------------------------------------------------------------------

    def stores(self) -> list[dict[str, Any]]:
        """Every store: ``[{"name", "version", "models"}, …]``."""
        return self._run(_ops.stores())

    def create_store(self, name: str) -> dict[str, Any]:
        """Create a store (``Conflict`` if it exists): ``{"name", "version"}``."""
        return self._run(_ops.create_store(name))

    def delete_store(self, name: str) -> dict[str, Any]:
        """Delete a store; its subscribers are told ``unsubscribed`` (``deleted``)."""
        return self._run(_ops.delete_store(name))

    def get_model(self, store: str, id: str) -> tuple[JSON, str]:
        """One model and its entity tag (``'"17"'``), to pass back as ``if_match``."""
        return self._run(_ops.get_model(store, id))

    def put_model(self, store: str, id: str, value: JSON,
                  if_match: ETag | Sequence[ETag] | None = None,
                  if_none_match: str | bool | None = None) -> int:
        """Create or replace a model; returns the store's new version (the model's new tag).

        ``if_match`` (a tag, a version, several, or ``"*"``) replaces only that version;
        ``if_none_match="*"`` (or ``True``) only creates. Otherwise ``PreconditionFailed``.
        """
        return self._run(_ops.put_model(store, id, value, if_match, if_none_match))

    def patch_model(self, store: str, id: str, patch: JSON,
                    if_match: ETag | Sequence[ETag] | None = None) -> int:
        """Apply a JSON Merge Patch (RFC 7386) to a model; returns the new version."""
        return self._run(_ops.patch_model(store, id, patch, if_match))

    def delete_model(self, store: str, id: str, if_match: ETag | Sequence[ETag] | None = None) -> int:
        """Delete a model; returns the new version."""
        return self._run(_ops.delete_model(store, id, if_match))

    def commit(self, store: str, changes: Sequence[Mapping[str, JSON]],
               if_version: int | None = None, if_match: Mapping[str, ETag] | None = None,
               idempotency_key: str | None = None) -> int:
        """Commit an atomic change set (``put``, ``patch``, ``set``, ``delete`` operations);
        returns its version. ``if_version`` and ``if_match`` (tags per model) make it
        conditional."""
        return self._run(_ops.commit(store, changes, if_version, if_match, idempotency_key))

    def snapshot(self, store: str, at: int | None = None) -> dict[str, Any]:
        """``{"store", "version", "epoch", "models"}``, now or as it was at version ``at``."""
        return self._run(_ops.snapshot(store, at))

    def changes(self, store: str, after: int, until: int | None = None, limit: int | None = None,
                models: Sequence[str] | None = None, paths: Sequence[str] | None = None,
                old: bool = False) -> dict[str, Any]:
        """The change sets after version ``after``: ``{"store", "epoch", "changes": […], "through"}``,
        each a ``changes`` frame, narrowed by ``models`` and ``paths`` as a subscription is."""
        return self._run(_ops.changes(store, after, until, limit, models, paths, old))
