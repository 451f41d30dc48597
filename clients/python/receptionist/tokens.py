"""Subscription tokens: HS256 JWTs a backend signs for its clients (docs/SECURITY.md).

Needs PyJWT (``pip install "receptionist[tokens]"``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["mint_token"]

MAX_INFO_BYTES = 1024
#: The longest token the gateway reads (docs/SECURITY.md): a longer one is refused unread.
MAX_TOKEN_BYTES = 4096


class _Utf8Encoder(json.JSONEncoder):
    """Claims as UTF-8 JSON text, as the gateway measures ``info``: not ``\\u`` escapes, which
    take up to three times the bytes in the token."""

    def __init__(self, **options: Any) -> None:
        options["ensure_ascii"] = False
        super().__init__(**options)


def _names(claim: str, names: Iterable[str]) -> list[str]:
    if isinstance(names, (str, bytes)):
        raise ValueError(f"{claim} takes a list of names, not the string {names!r}")
    listed = list(names)
    for name in listed:
        if not isinstance(name, str) or not name:
            raise ValueError(f"{claim} holds an empty or non-string name: {name!r}")
    return listed


def mint_token(secret: str | bytes, sub: str, stores: Iterable[str] = (),
               topics: Iterable[str] = (), publish: Iterable[str] = (),
               write: Iterable[str] = (), presence: Iterable[str] = (),
               expires_in: float = 3600, info: Mapping[str, Any] | None = None) -> str:
    """Sign a token for a gateway started with ``--token-secret SECRET``.

    ``stores`` and ``topics`` it may read, ``publish`` the topics it may publish to, ``write``
    the stores whose models it may write over HTTP, ``presence`` whose members it may follow:
    names, ``prefix*`` patterns or ``"*"``. It expires ``expires_in`` seconds from now. ``sub``
    and ``info`` (a JSON object of at most 1 KiB) are what presence shows of its holder.

    The payload is written as UTF-8 JSON. A token longer than the gateway takes (4 KiB: long
    lists of names, say) raises ``ValueError`` instead of being returned.
    """
    import jwt  # PyJWT: an optional dependency, needed only here

    if not isinstance(sub, str):
        raise ValueError(f"sub must be a string, not {sub!r}")
    if expires_in <= 0:
        raise ValueError("expires_in must be positive")
    now = int(time.time())
    claims: dict[str, Any] = {"sub": sub, "iat": now, "exp": now + max(1, int(expires_in))}
    for claim, names in (("stores", stores), ("topics", topics), ("publish", publish),
                         ("write", write), ("presence", presence)):
        listed = _names(claim, names)
        if listed:
            claims[claim] = listed
    if info is not None:
        encoded = json.dumps(dict(info), separators=(",", ":"), ensure_ascii=False)
        if len(encoded.encode("utf-8")) > MAX_INFO_BYTES:
            raise ValueError(f"info must encode to at most {MAX_INFO_BYTES} bytes")
        claims["info"] = dict(info)
    key = secret if isinstance(secret, bytes) else secret.encode("utf-8")
    token = jwt.encode(claims, key, algorithm="HS256", json_encoder=_Utf8Encoder)
    if len(token.encode("utf-8")) > MAX_TOKEN_BYTES:
        raise ValueError(f"the token would be {len(token)} bytes, and the gateway refuses tokens "
                         f"over {MAX_TOKEN_BYTES}: name fewer stores, topics or patterns, or "
                         "make info or sub shorter")
    return token
