"""What the sync and async clients share: the gateway's address and credentials, and how an
answer or a failure to get one becomes an exception."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import httpx

from .errors import GatewayError, Unavailable, error_from_response

DEFAULT_TIMEOUT = 10.0
USER_AGENT = "receptionist-python/0.1"


@dataclass(frozen=True)
class Settings:
    """A gateway's base URL and the credentials a client presents to it.

    HTTP calls carry ``Authorization: Bearer <api_key>``, or ``Bearer <token>`` when there is no
    API key (a token's ``write`` and ``publish`` claims let it write). Streams present the token
    in an ``auth`` message.
    """

    url: str
    api_key: str | None = None
    token: str | None = None

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"the gateway URL must be http:// or https://, not {self.url!r}")

    @property
    def base_url(self) -> str:
        return self.url.rstrip("/")

    @property
    def ws_url(self) -> str:
        """The WebSocket endpoint: ``ws://HOST:PORT/ws`` (``wss://`` for https)."""
        parts = urlsplit(self.base_url)
        scheme = "wss" if parts.scheme == "https" else "ws"
        return urlunsplit((scheme, parts.netloc, parts.path + "/ws", "", ""))

    def headers(self) -> dict[str, str]:
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        credential = self.api_key if self.api_key is not None else self.token
        if credential is not None:
            headers["Authorization"] = f"Bearer {credential}"
        return headers


def raise_for_error(response: httpx.Response) -> None:
    """Raise the gateway's error, typed, for an answer of 400 or more."""
    if response.status_code >= 400:
        error: GatewayError = error_from_response(response.status_code, response.content,
                                                  dict(response.headers))
        raise error


def transport_failure(method: str, url: str, exc: httpx.TransportError) -> Unavailable:
    """The ``Unavailable`` for an HTTP call that got no answer: ``unreachable`` (no connection
    made), ``timeout`` (no answer in time) or ``connection_lost`` (the connection failed during
    the exchange). For a write the last two leave its outcome unknown."""
    if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.ProxyError,
                        httpx.UnsupportedProtocol)):
        code = "unreachable"
    elif isinstance(exc, httpx.TimeoutException):
        code = "timeout"
    else:
        code = "connection_lost"
    reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return Unavailable(code, None, f"{method} {url}: {reason}")
