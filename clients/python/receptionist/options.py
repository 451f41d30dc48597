"""Checks of names and subscription options, with the gateway's own bounds (docs/PROTOCOL.md).

A bad value raises ``ValueError`` here, before anything is sent, instead of coming back from the
gateway as ``bad_message`` or ``400``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

MIN_RATE = 0.01
MAX_RATE = 1000.0
MAX_SINCE = 2**53 - 1
_TOPIC = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


def check_topic(name: object) -> str:
    """A topic name: 1 to 64 of ``A-Z a-z 0-9 _ . -``, but not ``.`` or ``..`` (a URL path cannot name them)."""
    if not isinstance(name, str) or not _TOPIC.fullmatch(name) or name in (".", ".."):
        raise ValueError(f"a topic name is 1 to 64 of A-Z a-z 0-9 _ . -, not . or .., not {name!r}")
    return name


def check_name(kind: str, name: object) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"a {kind} name must be a non-empty string, not {name!r}")
    if name in (".", ".."):
        # A path segment every HTTP client resolves: `/models/..` would name the store itself.
        raise ValueError(f"a {kind} name cannot be {name!r}")
    return name


def check_list(field: str, values: Sequence[str]) -> list[str]:
    """``models`` or ``paths``: a non-empty list of non-empty strings (paths: no empty segment)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise ValueError(f"{field} must be a list of strings, not {values!r}")
    listed = list(values)
    if not listed:
        raise ValueError(f"{field} must list at least one entry")
    for value in listed:
        if not isinstance(value, str) or not value:
            raise ValueError(f"{field} holds an empty or non-string entry: {value!r}")
        if field == "paths" and any(segment == "" for segment in value.split(".")):
            raise ValueError(f"the path {value!r} has an empty segment")
    return listed


def check_rate(max_rate: float) -> float:
    """``maxRate``: a number from 0.01 to 1000 frames a second."""
    if isinstance(max_rate, bool) or not isinstance(max_rate, (int, float)):
        raise ValueError(f"max_rate must be a number, not {max_rate!r}")
    if not math.isfinite(max_rate) or not MIN_RATE <= max_rate <= MAX_RATE:
        raise ValueError(f"max_rate must be from {MIN_RATE} to {MAX_RATE:g}, not {max_rate!r}")
    return max_rate


def check_since(since: int) -> int:
    """``since``: a whole number from 0 to 2^53 - 1."""
    if isinstance(since, bool) or not isinstance(since, int) or not 0 <= since <= MAX_SINCE:
        raise ValueError(f"since must be a whole number from 0 to 2^53 - 1, not {since!r}")
    return since


def check_epoch(epoch: object) -> str:
    if not isinstance(epoch, str) or not epoch:
        raise ValueError(f"epoch must be a non-empty string, not {epoch!r}")
    return epoch
