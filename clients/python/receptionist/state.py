"""A local copy of a store, kept by applying ``changes`` frames as docs/PROTOCOL.md defines.

Applying the changes of every frame in order to the snapshot gives the store's (projected) state
at the frame's version. For a subscription with ``paths``, objects left empty above a listed path
after a removal are dropped: they exist in the projection only to lead to it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

Models = dict[str, Any]


def apply_change(models: Models, change: Mapping[str, Any],
                 listed_paths: Sequence[Sequence[str]] | None = None) -> None:
    """Fold one change (``model``, ``path``, ``kind``, ``value``) into ``models``."""
    model = change["model"]
    path = change.get("path") or ""
    removes = change.get("kind") == "deleted"
    value = copy.deepcopy(change.get("value"))
    if path == "":
        if removes:
            models.pop(model, None)
        else:
            models[model] = value
        return
    keys = path.split(".")
    if removes:
        node = models.get(model)
        if not isinstance(node, dict):
            return
        chain: list[dict[str, Any]] = [node]
        for key in keys[:-1]:
            child = node.get(key)
            if not isinstance(child, dict):
                return  # nothing there to remove
            chain.append(child)
            node = child
        node.pop(keys[-1], None)
        if listed_paths:
            _prune_above(chain, keys, listed_paths)
        return
    node = models.get(model)
    if not isinstance(node, dict):
        node = {}
        models[model] = node
    for key in keys[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = {}
            node[key] = child
        node = child
    node[keys[-1]] = value


def _prune_above(chain: list[dict[str, Any]], keys: list[str],
                 listed_paths: Sequence[Sequence[str]]) -> None:
    """Drop the objects strictly above the outermost listed path covering ``keys`` that the
    removal left empty, deepest first. The model itself stays: it still exists."""
    depth = 0
    for listed in listed_paths:
        if len(listed) <= len(keys) and list(listed) == keys[:len(listed)]:
            if depth == 0 or len(listed) < depth:
                depth = len(listed)
    for d in range(min(depth - 1, len(chain) - 1), 0, -1):
        if chain[d]:
            break
        del chain[d - 1][keys[d - 1]]


def apply_changes(models: Models, changes: Sequence[Mapping[str, Any]],
                  paths: Sequence[str] | None = None) -> None:
    """Fold a frame's changes into ``models``; ``paths`` are the subscription's, if any."""
    listed = [p.split(".") for p in paths] if paths else None
    for change in changes:
        apply_change(models, change, listed)
