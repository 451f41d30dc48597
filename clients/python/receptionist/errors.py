"""Typed exceptions for the gateway's errors.

Every HTTP error the gateway answers is JSON, ``{"error": "<code>", "detail": "<text>"}``, some
with more members (``version`` on a 412, ``oldest`` on a 410). :func:`error_from_response` turns
such an answer into the exception class registered for its code; a code this client does not
know becomes a plain :class:`GatewayError`. An answer that is not the gateway's JSON (a proxy's
HTML 503, say) takes the class registered for its status, with the code ``http_<status>``. Errors a
stream reports (``{"type": "error"}`` frames) are mapped by :func:`error_from_frame` onto the same
classes, with ``status`` ``None``. Every one pickles with all its fields (for ``multiprocessing``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = [
    "GatewayError",
    "BadRequest",
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "Conflict",
    "Gone",
    "PreconditionFailed",
    "TooManyRequests",
    "Unavailable",
    "InsufficientStorage",
    "error_from_response",
    "error_from_frame",
]


class GatewayError(Exception):
    """An error answered by the gateway.

    ``code`` is the gateway's error code (``"precondition_failed"``, ``"forbidden"`` …),
    ``status`` the HTTP status (``None`` for an error a stream reported), ``detail`` its
    explanation and ``body`` the whole decoded error object.
    """

    def __init__(self, code: str, status: int | None, detail: str,
                 body: Mapping[str, Any] | None = None) -> None:
        super().__init__(f"{code} ({status}): {detail}" if status is not None else f"{code}: {detail}")
        self.code = code
        self.status = status
        self.detail = detail
        self.body: dict[str, Any] = dict(body or {})

    def __reduce__(self) -> tuple[Any, ...]:
        # Exception's own reduction passes the message as the only argument, which these
        # classes' constructors do not take; the fields are passed instead, the rest as state.
        fields = ("code", "status", "detail", "body")
        state = {k: v for k, v in self.__dict__.items() if k not in fields}
        return type(self), (self.code, self.status, self.detail, self.body), state


class BadRequest(GatewayError):
    """400 ``bad_request``, or a stream's ``bad_message``, ``invalid_topic``, ``unknown_type``."""


class Unauthorized(GatewayError):
    """401 ``unauthorized``: no API key or token, or an invalid or expired one."""


class Forbidden(GatewayError):
    """403 ``forbidden``: an origin not allowed, or a token that does not cover the target."""


class NotFound(GatewayError):
    """404 ``not_found``: no such store, model or topic (a stream's ``no_such_store``)."""


class Conflict(GatewayError):
    """409 ``conflict``: the store exists already, or an ``Idempotency-Key`` was reused."""


class Gone(GatewayError):
    """410 ``gone``: a read of the past older than the history kept."""

    @property
    def oldest(self) -> int | None:
        """The oldest version or sequence number that can still be read."""
        return _int_member(self.body, "oldest")


class PreconditionFailed(GatewayError):
    """412 ``precondition_failed``: a conditional write whose condition does not hold."""

    @property
    def version(self) -> int | None:
        """The store's current version; nothing was applied."""
        return _int_member(self.body, "version")


class TooManyRequests(GatewayError):
    """429 ``too_many_requests`` (a stream's ``rate_limited`` or ``too_many_subscriptions``)."""

    def __init__(self, code: str, status: int | None, detail: str,
                 body: Mapping[str, Any] | None = None, retry_after: float | None = None) -> None:
        super().__init__(code, status, detail, body)
        self.retry_after = retry_after
        """Seconds to wait, from the ``Retry-After`` header, when the gateway sent one."""


class Unavailable(GatewayError):
    """503 ``service_unavailable`` or ``over_capacity`` (a stream's ``unavailable``); also a
    subscription that gave up (``unreachable``, ``connection_lost``) and an HTTP call that could
    not reach the gateway or had no answer in time (``unreachable``, ``timeout``,
    ``connection_lost``, with ``status`` ``None`` and the transport's exception as
    ``__cause__``)."""

    def __init__(self, code: str, status: int | None, detail: str,
                 body: Mapping[str, Any] | None = None, retry_after: float | None = None) -> None:
        super().__init__(code, status, detail, body)
        self.retry_after = retry_after
        """Seconds to wait, from a 503's ``Retry-After`` header, when one was sent."""


class InsufficientStorage(GatewayError):
    """507 ``insufficient_storage``: the disk refused the write; nothing was applied."""


_BY_CODE: dict[str, type[GatewayError]] = {
    "bad_request": BadRequest,
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "not_found": NotFound,
    "conflict": Conflict,
    "gone": Gone,
    "precondition_failed": PreconditionFailed,
    "too_many_requests": TooManyRequests,
    "service_unavailable": Unavailable,
    "over_capacity": Unavailable,
    "insufficient_storage": InsufficientStorage,
}

# For answers that are not the gateway's JSON: the class of their status.
_BY_STATUS: dict[int, type[GatewayError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    412: PreconditionFailed,
    429: TooManyRequests,
    503: Unavailable,
    507: InsufficientStorage,
}

# The codes of `{"type":"error"}` frames (docs/PROTOCOL.md, "Errors").
_BY_FRAME_CODE: dict[str, type[GatewayError]] = {
    "bad_message": BadRequest,
    "unknown_type": BadRequest,
    "invalid_topic": BadRequest,
    "no_such_store": NotFound,
    "already_subscribed": Conflict,
    "not_subscribed": BadRequest,
    "unauthorized": Unauthorized,
    "token_invalid": Unauthorized,
    "token_expired": Unauthorized,
    "forbidden": Forbidden,
    "too_many_subscriptions": TooManyRequests,
    "rate_limited": TooManyRequests,
    "unavailable": Unavailable,
}


def _int_member(body: Mapping[str, Any], name: str) -> int | None:
    value = body.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None  # an HTTP date; the gateway sends seconds
    return seconds if seconds >= 0 else None


def error_from_response(status: int, content: bytes,
                        headers: Mapping[str, str] | None = None) -> GatewayError:
    """The exception for an HTTP error answer (status, body bytes, headers)."""
    body: dict[str, Any] = {}
    try:
        decoded = json.loads(content.decode("utf-8")) if content else None
    except (UnicodeDecodeError, ValueError):
        decoded = None
    if isinstance(decoded, dict) and isinstance(decoded.get("error"), str):
        body = decoded
        code: str = decoded["error"]
        detail = decoded.get("detail")
        text = detail if isinstance(detail, str) else ""
        cls = _BY_CODE.get(code, GatewayError)
    else:
        # Not the gateway's JSON (a proxy in front of it, say): the class of its status.
        code = f"http_{status}"
        text = content[:200].decode("utf-8", "replace")
        cls = _BY_STATUS.get(status, GatewayError)
    if cls is TooManyRequests or cls is Unavailable:
        header = None
        if headers is not None:
            header = next((v for k, v in headers.items() if k.lower() == "retry-after"), None)
        retry_after = _retry_after(header)
        if cls is TooManyRequests:
            return TooManyRequests(code, status, text, body, retry_after=retry_after)
        return Unavailable(code, status, text, body, retry_after=retry_after)
    return cls(code, status, text, body)


def error_from_frame(frame: Mapping[str, Any]) -> GatewayError:
    """The exception for a stream's ``{"type":"error","code":…,"message":…}`` frame."""
    code = frame.get("code")
    code = code if isinstance(code, str) else "unknown"
    message = frame.get("message")
    text = message if isinstance(message, str) else ""
    cls = _BY_FRAME_CODE.get(code, GatewayError)
    return cls(code, None, text, frame)
