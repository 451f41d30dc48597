"""The HTTP API's calls, described once for the sync and the async client.

Each function returns a :class:`Call`: the request to make and how to read its answer. The
clients only send it (``httpx.Client`` or ``httpx.AsyncClient``), turn an error status into a
:class:`~receptionist.errors.GatewayError`, and hand the answer to ``Call.parse``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

from .options import check_list, check_name, check_topic

T = TypeVar("T")

#: Any JSON value: a message's data, a model, a merge patch.
JSON = Any

#: A model's entity tag: an int version (``17``), or the header's text (``'"17"'``, ``"*"``).
ETag = int | str


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and the reading of its (successful) answer."""

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    params: list[tuple[str, str]] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    content: bytes | None = None


def _seg(name: str, kind: str = "store") -> str:
    return quote(check_name(kind, name), safe="")


def _dumps(value: JSON) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _json_headers(idempotency_key: str | None = None) -> dict[str, str]:
    headers = {"Content-Type": "application/json"}
    if idempotency_key is not None:
        headers["Idempotency-Key"] = idempotency_key
    return headers


def _body(response: httpx.Response) -> dict[str, Any]:
    decoded = response.json()
    if not isinstance(decoded, dict):
        raise ValueError(f"expected a JSON object from the gateway, got {decoded!r}")
    return decoded


def _version(response: httpx.Response) -> int:
    return int(_body(response)["version"])


def _count(name: str, value: int, minimum: int = 0) -> str:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer of at least {minimum}, not {value!r}")
    return str(value)


def etag(tag: ETag) -> str:
    """An entity tag as the ``If-Match`` header takes it: ``17`` → ``'"17"'``; ``"*"`` stays."""
    if isinstance(tag, bool):
        raise ValueError(f"not an entity tag: {tag!r}")
    if isinstance(tag, int):
        return f'"{tag}"'
    if tag == "*" or tag.startswith('"') or tag.startswith("W/"):
        return tag
    return f'"{tag}"'


# ---- Topics --------------------------------------------------------------------------------

def publish(topic: str, data: JSON, idempotency_key: str | None = None) -> Call[int]:
    check_topic(topic)
    return Call("POST", f"/api/topics/{_seg(topic, 'topic')}/messages", lambda r: int(_body(r)["seq"]),
                headers=_json_headers(idempotency_key), content=_dumps(data))


def publish_batch(messages: Iterable[Mapping[str, JSON]],
                  idempotency_key: str | None = None) -> Call[list[int]]:
    items = []
    for message in messages:
        if "topic" not in message or "data" not in message:
            raise ValueError(f"each message needs a 'topic' and 'data': {message!r}")
        check_topic(message["topic"])
        items.append({"topic": message["topic"], "data": message["data"]})
    if not items:
        raise ValueError("publish_batch needs at least one message")

    def parse(response: httpx.Response) -> list[int]:
        return [int(m["seq"]) for m in _body(response)["messages"]]

    return Call("POST", "/api/publish", parse, headers=_json_headers(idempotency_key),
                content=_dumps({"messages": items}))


def messages(topic: str, after: int, limit: int | None = None) -> Call[dict[str, Any]]:
    check_topic(topic)
    params = [("after", _count("after", after))]
    if limit is not None:
        params.append(("limit", _count("limit", limit, 1)))
    return Call("GET", f"/api/topics/{_seg(topic, 'topic')}/messages", _body, params=params)


def topics() -> Call[list[dict[str, Any]]]:
    return Call("GET", "/api/topics", lambda r: list(_body(r)["topics"]))


# ---- Stores --------------------------------------------------------------------------------

def stores() -> Call[list[dict[str, Any]]]:
    return Call("GET", "/api/stores", lambda r: list(_body(r)["stores"]))


def create_store(name: str) -> Call[dict[str, Any]]:
    _seg(name)
    return Call("POST", "/api/stores", _body, headers=_json_headers(), content=_dumps({"name": name}))


def delete_store(name: str) -> Call[dict[str, Any]]:
    return Call("DELETE", f"/api/stores/{_seg(name)}", _body)


def _model_path(store: str, model: str) -> str:
    return f"/api/stores/{_seg(store)}/models/{_seg(model, 'model')}"


def get_model(store: str, model: str) -> Call[tuple[JSON, str]]:
    def parse(response: httpx.Response) -> tuple[JSON, str]:
        tag = response.headers.get("ETag") or f'"{_body(response)["version"]}"'
        return _body(response)["value"], tag

    return Call("GET", _model_path(store, model), parse)


def put_model(store: str, model: str, value: JSON, if_match: ETag | Sequence[ETag] | None = None,
              if_none_match: str | bool | None = None) -> Call[int]:
    headers = _json_headers()
    if if_match is not None:
        headers["If-Match"] = _match(if_match)
    if if_none_match is not None and if_none_match is not False:
        headers["If-None-Match"] = "*" if if_none_match is True else str(if_none_match)
    return Call("PUT", _model_path(store, model), _version, headers=headers, content=_dumps(value))


def patch_model(store: str, model: str, patch: JSON,
                if_match: ETag | Sequence[ETag] | None = None) -> Call[int]:
    headers = _json_headers()
    if if_match is not None:
        headers["If-Match"] = _match(if_match)
    return Call("PATCH", _model_path(store, model), _version, headers=headers, content=_dumps(patch))


def delete_model(store: str, model: str, if_match: ETag | Sequence[ETag] | None = None) -> Call[int]:
    headers = {} if if_match is None else {"If-Match": _match(if_match)}
    return Call("DELETE", _model_path(store, model), _version, headers=headers)


def _match(tags: ETag | Sequence[ETag]) -> str:
    if isinstance(tags, (int, str)):
        return etag(tags)
    listed = [etag(t) for t in tags]
    if not listed:
        raise ValueError("if_match needs at least one entity tag")
    return ", ".join(listed)


def commit(store: str, changes: Sequence[Mapping[str, JSON]], if_version: int | None = None,
           if_match: Mapping[str, ETag] | None = None,
           idempotency_key: str | None = None) -> Call[int]:
    if not changes:
        raise ValueError("a change set needs at least one change")
    body: dict[str, JSON] = {"changes": [dict(c) for c in changes]}
    if if_version is not None:
        body["ifVersion"] = int(_count("if_version", if_version))
    if if_match is not None:
        body["ifMatch"] = {model: etag(tag) for model, tag in if_match.items()}
    return Call("POST", f"/api/stores/{_seg(store)}/changes", _version,
                headers=_json_headers(idempotency_key), content=_dumps(body))


def snapshot(store: str, at: int | None = None) -> Call[dict[str, Any]]:
    params = [] if at is None else [("at", _count("at", at))]
    return Call("GET", f"/api/stores/{_seg(store)}", _body, params=params)


def changes(store: str, after: int, until: int | None = None, limit: int | None = None,
            models: Sequence[str] | None = None, paths: Sequence[str] | None = None,
            old: bool = False) -> Call[dict[str, Any]]:
    params = [("after", _count("after", after))]
    if until is not None:
        params.append(("until", _count("until", until)))
    if limit is not None:
        params.append(("limit", _count("limit", limit, 1)))
    if models is not None:
        params.extend(("models", m) for m in check_list("models", models))
    if paths is not None:
        params.extend(("paths", p) for p in check_list("paths", paths))
    if old:
        params.append(("old", "true"))
    return Call("GET", f"/api/stores/{_seg(store)}/changes", _body, params=params)
