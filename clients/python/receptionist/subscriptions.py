"""Store and topic subscriptions: what their frames mean, and the events they yield.

A :class:`StoreSubscription` keeps a local copy of the store's models (``.state``) at
``.version`` in ``.epoch``; a :class:`TopicSubscription` follows ``.seq`` in ``.epoch``. Both
resume from there after a reconnect (see ``stream.py``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ._common import Settings
from .options import check_epoch, check_list, check_name, check_rate, check_since, check_topic
from .state import apply_changes
from .stream import Stream, StreamOptions

__all__ = ["StoreEvent", "TopicEvent", "StoreSubscription", "TopicSubscription"]


@dataclass(frozen=True)
class StoreEvent:
    """What a store subscription saw.

    ``kind`` is ``"snapshot"`` (the first state), ``"changes"`` (one change set, or a coalesced
    frame covering ``from_version`` to ``version``) or ``"reset"`` (a fresh snapshot replacing
    the local copy: the gateway could not replay what was missed). ``changes`` lists the changes
    applied (``model``, ``path``, ``kind``, ``value``); ``frame`` is the frame as received.
    """

    kind: Literal["snapshot", "changes", "reset"]
    store: str
    version: int
    epoch: str | None
    changes: list[dict[str, Any]] = field(default_factory=list)
    from_version: int | None = None
    conflated: bool = False
    committed_at: int | None = None
    frame: dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class TopicEvent:
    """What a topic subscription saw.

    ``kind`` is ``"message"`` (``seq``, ``data``, ``published_at``), ``"gap"`` (messages
    ``gap_from`` to ``gap_to`` left the history and are lost; ``seq`` is ``gap_to``) or
    ``"reset"`` (the topic's numbering started over in a new ``epoch``; ``previous`` is the
    number held before). A reset found on subscribing, at ``seq`` above 0, is followed by the new
    epoch's messages from its start (those its history still holds; a ``"gap"`` for the rest), as
    the subscription takes them again from 0; one while subscribed by the messages after ``seq``.
    """

    kind: Literal["message", "gap", "reset"]
    topic: str
    seq: int
    epoch: str | None
    data: Any = None
    published_at: int | None = None
    gap_from: int | None = None
    gap_to: int | None = None
    previous: int | None = None
    frame: dict[str, Any] = field(default_factory=dict, repr=False)


def _int(frame: Mapping[str, Any], name: str) -> int | None:
    value = frame.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class StoreSubscription(Stream[StoreEvent]):
    """``async for event in subscription``: a snapshot, then every change set, kept applied to
    ``.state`` (model id → model). Resumes after a drop with ``since`` and ``epoch``."""

    def __init__(self, settings: Settings, store: str, *, models: Sequence[str] | None = None,
                 paths: Sequence[str] | None = None, max_rate: float | None = None,
                 since: int | None = None, epoch: str | None = None,
                 state: Mapping[str, Any] | None = None, old: bool = False,
                 options: StreamOptions | None = None,
                 on_close: Callable[[Stream[Any]], None] | None = None) -> None:
        super().__init__(settings, options, on_close)
        self.store = check_name("store", store)
        self.models = check_list("models", models) if models is not None else None
        self.paths = check_list("paths", paths) if paths is not None else None
        self.max_rate = check_rate(max_rate) if max_rate is not None else None
        self.old = bool(old)
        #: The version of the last frame applied (``None`` before the snapshot).
        self.version: int | None = check_since(since) if since is not None else None
        #: The store's epoch: the life of the store that ``version`` counts in.
        self.epoch: str | None = check_epoch(epoch) if epoch is not None else None
        if self.epoch is not None and self.version is None:
            raise ValueError("epoch is given together with since")
        self._state: dict[str, Any] = copy.deepcopy(dict(state)) if state is not None else {}
        #: The paths the gateway filters by: those asked for, or those its subscribe hook allowed.
        self._listed = self.paths
        #: Resumes the gateway answered with the missed change sets; reset snapshots taken.
        self.resumes = 0
        self.resets = 0

    @property
    def state(self) -> dict[str, Any]:
        """The local copy of the (projected) models at ``version``. Do not change it."""
        return self._state

    def _subscribe_frame(self) -> dict[str, Any]:
        frame: dict[str, Any] = {"type": "subscribe", "store": self.store}
        if self.models is not None:
            frame["models"] = self.models
        if self.paths is not None:
            frame["paths"] = self.paths
        if self.max_rate is not None:
            frame["maxRate"] = self.max_rate
        if self.old:
            frame["old"] = True
        if self.version is not None:
            frame["since"] = self.version
            if self.epoch is not None:
                frame["epoch"] = self.epoch
        return frame

    def _on_frame(self, frame: dict[str, Any]) -> list[StoreEvent]:
        if frame.get("store") != self.store:
            return []
        kind = frame.get("type")
        version = _int(frame, "version")
        self._take_filter(frame)
        if kind == "snapshot" and version is not None:
            models = frame.get("models")
            # A copy: the event's frame stays as received while the state moves on.
            self._state = copy.deepcopy(models) if isinstance(models, dict) else {}
            self.version = version
            if isinstance(frame.get("epoch"), str):
                self.epoch = frame["epoch"]
            self._confirmed()
            reset = bool(frame.get("reset"))
            self.resets += reset
            return [StoreEvent("reset" if reset else "snapshot", self.store, version, self.epoch,
                               frame=frame)]
        if kind == "subscribed":
            if isinstance(frame.get("epoch"), str):
                self.epoch = frame["epoch"]
            self.resumes += bool(frame.get("resumed"))
            self._confirmed()
            return []
        if kind == "changes" and version is not None:
            if self.version is not None and version <= self.version:
                return []  # already applied
            changes = [c for c in frame.get("changes") or [] if isinstance(c, dict)]
            apply_changes(self._state, changes, self._listed)
            self.version = version
            return [StoreEvent("changes", self.store, version, self.epoch, changes,
                               from_version=_int(frame, "from"), conflated=bool(frame.get("conflated")),
                               committed_at=_int(frame, "committedAt"), frame=frame)]
        if kind == "unsubscribed":
            reason = frame.get("reason")
            self._end(reason if isinstance(reason, str) else "unsubscribed")
        return []


    def _take_filter(self, frame: dict[str, Any]) -> None:
        """A snapshot's or resume's ``filter`` names the paths the gateway keeps, which a
        subscribe hook may have narrowed: objects left empty above them go, as the gateway's
        projection drops them."""
        found = frame.get("filter")
        if isinstance(found, dict) and isinstance(found.get("paths"), list):
            self._listed = [p for p in found["paths"] if isinstance(p, str)]


class TopicSubscription(Stream[TopicEvent]):
    """``async for event in subscription``: every message published after it began (or after
    ``since``), gaps and resets included. Resumes after a drop from ``.seq`` in ``.epoch``."""

    def __init__(self, settings: Settings, topic: str, *, since: int | None = None,
                 epoch: str | None = None, options: StreamOptions | None = None,
                 on_close: Callable[[Stream[Any]], None] | None = None) -> None:
        super().__init__(settings, options, on_close)
        self.topic = check_topic(topic)
        #: The number of the last message received (or the topic's, when subscribed).
        self.seq: int | None = check_since(since) if since is not None else None
        self.epoch: str | None = check_epoch(epoch) if epoch is not None else None
        if self.epoch is not None and self.seq is None:
            raise ValueError("epoch is given together with since")
        self.resumes = 0
        self.resets = 0
        # Subscribing again from 0 in a new epoch: the old connection's frames are not taken.
        self._resyncing = False

    def _subscribe_frame(self) -> dict[str, Any]:
        frame: dict[str, Any] = {"type": "subscribe", "topic": self.topic}
        if self.seq is not None:
            frame["since"] = self.seq
            if self.epoch is not None:
                frame["epoch"] = self.epoch
        return frame

    def _on_frame(self, frame: dict[str, Any]) -> list[TopicEvent]:
        if frame.get("topic") != self.topic:
            return []
        kind = frame.get("type")
        seq = _int(frame, "seq")
        epoch = frame.get("epoch") if isinstance(frame.get("epoch"), str) else None
        if self._resyncing and kind != "subscribed":
            return []
        if kind == "subscribed" and seq is not None:
            self._confirmed()
            self._resyncing = False
            self.resumes += bool(frame.get("resumed"))
            if frame.get("reset"):
                event = self._reset(seq, epoch, frame)
                if seq > 0 and self._resubscribe_now():
                    # The new epoch's messages up to `seq` are in its history: taken from its
                    # start, on a new connection, as the gateway's answer says to.
                    self.seq = 0
                    self._resyncing = True
                return [event]
            self.epoch = epoch or self.epoch
            if self.seq is None:
                self.seq = seq
            return []
        if kind == "reset" and seq is not None:
            return [self._reset(seq, epoch, frame)]
        if kind == "message" and seq is not None:
            if self.seq is not None and seq <= self.seq:
                return []  # already received
            self.seq = seq
            return [TopicEvent("message", self.topic, seq, self.epoch, frame.get("data"),
                               published_at=_int(frame, "publishedAt"), frame=frame)]
        if kind == "gap":
            start, end = _int(frame, "from"), _int(frame, "to")
            if start is None or end is None:
                return []
            self.seq = max(self.seq or 0, end)
            return [TopicEvent("gap", self.topic, end, self.epoch, gap_from=start, gap_to=end,
                               frame=frame)]
        if kind == "unsubscribed":
            self._end("unsubscribed")
        return []

    def _reset(self, seq: int, epoch: str | None, frame: dict[str, Any]) -> TopicEvent:
        previous, self.seq = self.seq, seq
        self.epoch = epoch or self.epoch
        self.resets += 1
        return TopicEvent("reset", self.topic, seq, self.epoch, previous=previous, frame=frame)
