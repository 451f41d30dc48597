"""A typed Python client for Receptionist, the real-time push gateway.

- :class:`Gateway` (blocking) and :class:`AsyncGateway` (asyncio): the HTTP API of stores and
  topics, with typed errors (:mod:`receptionist.errors`).
- :meth:`AsyncGateway.subscribe_store` and :meth:`AsyncGateway.subscribe_topic`: live streams
  over the WebSocket that reconnect and resume by themselves.
- :func:`mint_token`: subscription tokens for a gateway started with ``--token-secret``.
"""

from __future__ import annotations

from .async_client import AsyncGateway
from .errors import (
    BadRequest,
    Conflict,
    Forbidden,
    GatewayError,
    Gone,
    InsufficientStorage,
    NotFound,
    PreconditionFailed,
    TooManyRequests,
    Unauthorized,
    Unavailable,
)
from .state import apply_changes
from .stream import Backoff, StreamOptions
from .subscriptions import StoreEvent, StoreSubscription, TopicEvent, TopicSubscription
from .sync_client import Gateway
from .tokens import mint_token

__version__ = "0.1.0"

__all__ = [
    "AsyncGateway",
    "Backoff",
    "BadRequest",
    "Conflict",
    "Forbidden",
    "Gateway",
    "GatewayError",
    "Gone",
    "InsufficientStorage",
    "NotFound",
    "PreconditionFailed",
    "StoreEvent",
    "StoreSubscription",
    "StreamOptions",
    "TooManyRequests",
    "TopicEvent",
    "TopicSubscription",
    "Unauthorized",
    "Unavailable",
    "apply_changes",
    "mint_token",
    "__version__",
]
