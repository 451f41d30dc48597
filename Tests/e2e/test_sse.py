"""Server-Sent Events (docs/PROTOCOL.md): store and topic streams over curl and http.client,
resume with Last-Event-ID and ?since=, reset snapshots, gaps, heartbeats, errors and drain."""

import http.client
import json
import os
import select
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field

import pytest

from conftest import HOST, Response, assert_json_error, http_client_request, parse_head, store_snapshot
from wsclient import (
    CLOSE_TIMEOUT,
    FRAME_TIMEOUT,
    apply_changes,
    assert_changes_frame,
    assert_recent_micros,
    commit,
    connect,
    new_store,
    patch_model,
    publish,
    recv_text,
    subscribe,
    unique,
)

EXIT_TIMEOUT = 15.0        # the stream ends and the process exits after a drain
HEARTBEAT = 0.2            # --sse-heartbeat for the heartbeat test
HEARTBEAT_WAIT = 5.0       # two heartbeats arrive within this
EVENT_STREAM = "text/event-stream"
CURL_MAX_TIME = 60         # curl's own limit; tests end their curl long before


# ---- Event stream clients ---------------------------------------------

@dataclass
class SSEEvent:
    event: str | None
    id: str | None
    data: list[str] = field(default_factory=list)

    def json(self) -> dict:
        assert len(self.data) == 1, f"data must be on one line: {self.data}"
        value = json.loads(self.data[0])
        assert isinstance(value, dict), value
        return value


class SSEReader:
    """Parses an event stream from `read_chunk(deadline) -> bytes` (b"" at the end)."""

    def __init__(self, read_chunk):
        self._read_chunk, self.buffer, self.ended = read_chunk, b"", False

    def _line(self, deadline: float) -> bytes | None:
        while b"\n" not in self.buffer:
            if self.ended:
                return None
            chunk = self._read_chunk(deadline)
            if not chunk:
                self.ended = True
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.rstrip(b"\r")

    def next_item(self, timeout: float = FRAME_TIMEOUT):
        """The next event, or the next comment (a str), or None when the stream has ended."""
        deadline = time.monotonic() + timeout
        event = SSEEvent(None, None)
        started = False
        while True:
            line = self._line(deadline)
            if line is None:
                assert not started, f"stream ended inside an event: {event}"
                return None
            text = line.decode("utf-8")
            if not text:
                if started:
                    return event
                continue
            if text.startswith(":"):
                if not started:
                    return text[1:].strip()
                continue
            name, _, value = text.partition(":")
            value = value[1:] if value.startswith(" ") else value
            started = True
            if name == "event":
                event.event = value
            elif name == "id":
                event.id = value
            elif name == "data":
                event.data.append(value)

    def next_event(self, timeout: float = FRAME_TIMEOUT) -> SSEEvent:
        deadline = time.monotonic() + timeout
        while True:
            item = self.next_item(max(0.0, deadline - time.monotonic()))
            assert item is not None, "the event stream ended"
            if isinstance(item, SSEEvent):
                return item

    def wait_end(self, timeout: float) -> None:
        """Read until the stream ends cleanly."""
        deadline = time.monotonic() + timeout
        while self.next_item(max(0.0, deadline - time.monotonic())) is not None:
            pass


class CurlEvents:
    """`curl -N -i` on an event stream, read with deadlines; `.response` holds the head.

    curl prints a head only together with the first bytes of the body, so a stream that has no
    event yet is opened with `wait_head=False` and its head read later with `read_head()`.
    """

    def __init__(self, port: int, path: str, *curl_args: str, wait_head: bool = True):
        argv = ["curl", "--silent", "--show-error", "--http1.1", "-N", "--include",
                "--max-time", str(CURL_MAX_TIME), *curl_args, f"http://{HOST}:{port}{path}"]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.reader = SSEReader(self._read_chunk)
        self.response = self.read_head() if wait_head else None

    def read_head(self, timeout: float = FRAME_TIMEOUT) -> Response:
        deadline = time.monotonic() + timeout
        while b"\r\n\r\n" not in self.reader.buffer:
            chunk = self._read_chunk(deadline)
            assert chunk, f"curl ended before the head: {self.reader.buffer!r} {self.proc.stderr.read()!r}"
            self.reader.buffer += chunk
        head, _, self.reader.buffer = self.reader.buffer.partition(b"\r\n\r\n")
        self.response = Response(*parse_head(head), b"")
        return self.response

    def _read_chunk(self, deadline: float) -> bytes:
        fd = self.proc.stdout.fileno()
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            raise AssertionError(f"curl printed nothing more in time; buffered {self.reader.buffer[:200]!r}")
        return os.read(fd, 1 << 16)

    def __enter__(self) -> "CurlEvents":
        return self

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(timeout=CLOSE_TIMEOUT)
        self.proc.stdout.close()
        self.proc.stderr.close()


class HttpEvents:
    """An event stream read with http.client; `.response` holds status and headers."""

    def __init__(self, port: int, path: str, headers: dict | None = None, timeout: float = FRAME_TIMEOUT):
        self.conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
        self.conn.request("GET", path, headers={"Accept": "text/event-stream", **(headers or {})})
        self.sock = self.conn.sock
        self.raw = self.conn.getresponse()
        self.response = Response(self.raw.status, self.raw.reason, self.raw.getheaders(), b"")
        self.reader = SSEReader(self._read_chunk)

    def _read_chunk(self, deadline: float) -> bytes:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError("no event data in time")
        self.sock.settimeout(remaining)
        try:
            return self.raw.read1(1 << 16)
        except (TimeoutError, socket.timeout):
            raise AssertionError(f"no event data in time; buffered {self.reader.buffer[:200]!r}") from None

    def __enter__(self) -> "HttpEvents":
        return self

    def __exit__(self, *exc) -> None:
        self.raw.close()
        self.conn.close()


# ---- Helpers -----------------------------------------------------------

def store_events(store: str, since: int | None = None) -> str:
    return f"/api/stores/{store}/events" + (f"?since={since}" if since is not None else "")


def topic_events(topic: str, since: int | None = None) -> str:
    return f"/api/topics/{topic}/events" + (f"?since={since}" if since is not None else "")


def assert_stream_head(resp) -> None:
    assert resp.status == 200, (resp.status, resp.headers)
    assert resp.media_type() == EVENT_STREAM, resp.header("Content-Type")


def first_event(reader, expected_subscribed: dict) -> SSEEvent:
    """The first event, after a `subscribed` event if the server sends one.

    PROTOCOL.md names snapshot, changes, message and gap events for SSE; it neither lists nor
    rules out `subscribed`, so one is accepted, and must then match `expected_subscribed`.
    """
    event = reader.next_event()
    if event.event == "subscribed":
        data = event.json()
        assert {k: v for k, v in data.items() if k in expected_subscribed} == expected_subscribed, data
        event = reader.next_event()
    return event


def assert_snapshot_event(event: SSEEvent, port: int, store: str, reset: bool = False) -> dict:
    assert event.event == "snapshot", event
    data = event.json()
    assert data == {"type": "snapshot", "reset": reset, **store_snapshot(port, store)}
    assert event.id == str(data["version"]), event
    return data


def assert_changes_event(event: SSEEvent, store: str, version: int) -> dict:
    assert (event.event, event.id) == ("changes", str(version)), event
    data = event.json()
    assert_changes_frame(data, store, version)
    return data


def assert_message_event(event: SSEEvent, topic: str, seq: int, value) -> None:
    assert (event.event, event.id) == ("message", str(seq)), event
    data = event.json()
    assert set(data) == {"type", "topic", "seq", "publishedAt", "data"}, data
    assert (data["type"], data["topic"], data["seq"], data["data"]) == ("message", topic, seq, value), data
    assert_recent_micros(data["publishedAt"])


# ---- Store streams -----------------------------------------------------

def test_curl_gets_snapshot_then_changes(server):
    port = server.port
    store = new_store(port, {"a": {"n": 1}, "b": {"name": "b"}})
    with CurlEvents(port, store_events(store)) as stream:
        assert_stream_head(stream.response)
        snapshot = assert_snapshot_event(stream.reader.next_event(), port, store)
        assert snapshot["version"] == 1
        first = patch_model(port, store, "a", {"n": 2})
        second = commit(port, store, [{"op": "set", "model": "a", "path": "x.y", "value": 3},
                                      {"op": "put", "model": "c", "value": {"c": True}},
                                      {"op": "delete", "model": "b"}])
        models = snapshot["models"]
        for version in (first, second):
            apply_changes(models, assert_changes_event(stream.reader.next_event(), store, version)["changes"])
        assert models == store_snapshot(port, store)["models"]


def test_http_client_gets_one_event_per_change_set(server):
    port = server.port
    store = new_store(port, {"a": {"n": 1}, "b": {"name": "b"}})
    with HttpEvents(port, store_events(store)) as stream:
        assert_stream_head(stream.response)
        models = assert_snapshot_event(stream.reader.next_event(), port, store)["models"]
        version = commit(port, store, [{"op": "set", "model": "a", "path": "n", "value": 2},
                                       {"op": "set", "model": "a", "path": "style.border.width", "value": 3},
                                       {"op": "delete", "model": "b"}])
        data = assert_changes_event(stream.reader.next_event(), store, version)
        assert [(c["model"], c["path"]) for c in data["changes"]] == [("a", "n"), ("a", "style"), ("b", "")]
        apply_changes(models, data["changes"])
        assert models == store_snapshot(port, store)["models"]


@pytest.mark.parametrize("how", ["last-event-id", "since-query"])
def test_resume_gives_exactly_the_missed_versions(server, how):
    port = server.port
    store = new_store(port, {"m": {"n": 0}})
    with HttpEvents(port, store_events(store)) as stream:
        snapshot = assert_snapshot_event(stream.reader.next_event(), port, store)
    last, models = snapshot["version"], snapshot["models"]
    missed = [patch_model(port, store, "m", {"n": n, f"k{n % 3}": n}) for n in range(1, 6)]
    assert missed == list(range(last + 1, last + 6))
    if how == "last-event-id":
        stream = CurlEvents(port, store_events(store), "-H", f"Last-Event-ID: {last}")
    else:
        stream = CurlEvents(port, store_events(store, since=last))
    with stream:
        assert_stream_head(stream.response)
        event = first_event(stream.reader, {"type": "subscribed", "store": store, "version": last})
        for index, version in enumerate(missed):
            event = stream.reader.next_event() if index else event
            apply_changes(models, assert_changes_event(event, store, version)["changes"])
        assert models == store_snapshot(port, store)["models"]
        live = patch_model(port, store, "m", {"live": True})
        assert_changes_event(stream.reader.next_event(), store, live)


def test_resume_older_than_history_gets_reset_snapshot(start_server):
    server = start_server("--history", "5")
    port = server.port
    store = new_store(port, {"m": {"n": 0}})
    last = store_snapshot(port, store)["version"]
    for n in range(1, 21):
        patch_model(port, store, "m", {"n": n})
    with HttpEvents(port, store_events(store), headers={"Last-Event-ID": str(last)}) as stream:
        assert_stream_head(stream.response)
        snapshot = assert_snapshot_event(stream.reader.next_event(), port, store, reset=True)
        assert snapshot["version"] == last + 20
        live = patch_model(port, store, "m", {"n": 21})
        assert_changes_event(stream.reader.next_event(), store, live)


def test_unknown_store_is_404(server):
    assert_json_error(http_client_request(server.port, "GET", store_events("no-such-store")), 404, "not_found")


def test_sse_and_websocket_carry_the_same_json(server):
    port = server.port
    store = new_store(port, {"m": {"n": 0}})
    topic = unique("same")
    with connect(port) as ws, HttpEvents(port, store_events(store)) as stream, \
            HttpEvents(port, topic_events(topic, since=0)) as topic_stream:
        subscribe(ws, store=store)
        assert subscribe(ws, topic=topic)["type"] == "subscribed"
        stream.reader.next_event()
        patch_model(port, store, "m", {"n": 1})
        publish(port, topic, {"same": "json"})
        frames = [recv_text(ws), recv_text(ws)]
        event = stream.reader.next_event()
        message = first_event(topic_stream.reader, {"type": "subscribed", "topic": topic})
        assert sorted(frames) == sorted([event.data[0], message.data[0]]), "one encoding for all subscribers"


# ---- Topic streams -----------------------------------------------------

VALUES = [{"headline": "hello"}, "text \u2603", 7, [1, {"two": 2}], None]


def test_curl_gets_topic_messages_with_seq_ids(server):
    port, topic = server.port, unique("sse")
    # From seq 0, so that every message arrives whether it is published before or after the
    # gateway has read curl's request.
    with CurlEvents(port, topic_events(topic, since=0), wait_head=False) as stream:
        seqs = [publish(port, topic, value) for value in VALUES]
        assert seqs == list(range(1, len(VALUES) + 1))
        assert_stream_head(stream.read_head())
        event = first_event(stream.reader, {"type": "subscribed", "topic": topic})
        for index, (seq, value) in enumerate(zip(seqs, VALUES)):
            event = stream.reader.next_event() if index else event
            assert_message_event(event, topic, seq, value)


def test_http_client_gets_live_topic_messages(server):
    port, topic = server.port, unique("sse-live")
    with HttpEvents(port, topic_events(topic)) as stream:
        assert_stream_head(stream.response)
        seqs = [publish(port, topic, value) for value in VALUES]
        event = first_event(stream.reader, {"type": "subscribed", "topic": topic, "seq": 0})
        for index, (seq, value) in enumerate(zip(seqs, VALUES)):
            event = stream.reader.next_event() if index else event
            assert_message_event(event, topic, seq, value)


def test_topic_resume_with_last_event_id(server):
    port, topic = server.port, unique("sse-resume")
    for n in range(1, 4):
        publish(port, topic, {"n": n})
    with HttpEvents(port, topic_events(topic), headers={"Last-Event-ID": "1"}) as stream:
        assert_stream_head(stream.response)
        assert_message_event(first_event(stream.reader, {"type": "subscribed", "topic": topic, "seq": 3}),
                             topic, 2, {"n": 2})
        assert_message_event(stream.reader.next_event(), topic, 3, {"n": 3})
        live = publish(port, topic, {"n": 4})
        assert_message_event(stream.reader.next_event(), topic, live, {"n": 4})


def test_topic_gap_event_then_kept_messages(start_server):
    server = start_server("--history", "5")
    port, topic = server.port, unique("sse-gap")
    for n in range(1, 21):
        publish(port, topic, {"n": n})
    with CurlEvents(port, topic_events(topic, since=2)) as stream:
        assert_stream_head(stream.response)
        gap = first_event(stream.reader, {"type": "subscribed", "topic": topic, "seq": 20})
        assert gap.event == "gap", gap
        assert gap.json() == {"type": "gap", "topic": topic, "from": 3, "to": 15}
        for seq in range(16, 21):
            assert_message_event(stream.reader.next_event(), topic, seq, {"n": seq})


def test_heartbeat_comments(start_server):
    server = start_server("--sse-heartbeat", str(HEARTBEAT))
    port, topic = server.port, unique("beat")
    with HttpEvents(port, topic_events(topic)) as stream:
        assert_stream_head(stream.response)
        deadline = time.monotonic() + HEARTBEAT_WAIT
        beats = 0
        while beats < 2:
            item = stream.reader.next_item(max(0.0, deadline - time.monotonic()))
            assert item is not None, "the stream ended"
            if isinstance(item, str):
                assert item == "heartbeat", item
                beats += 1
            else:
                assert item.event == "subscribed", item
        # Events still flow between heartbeats.
        seq = publish(port, topic, "after beats")
        assert_message_event(stream.reader.next_event(), topic, seq, "after beats")


# ---- Drain -------------------------------------------------------------

def test_drain_ends_streams_cleanly_and_exits_zero(start_server):
    server = start_server("--drain-timeout", "10")
    port = server.port
    store = new_store(port, {"m": {"n": 0}})
    with CurlEvents(port, store_events(store)) as curl_stream, HttpEvents(port, store_events(store)) as stream:
        assert_snapshot_event(curl_stream.reader.next_event(), port, store)
        assert_snapshot_event(stream.reader.next_event(), port, store)
        server.send_signal(signal.SIGTERM)
        # http.client raises IncompleteRead if a chunked stream is cut instead of ended.
        stream.reader.wait_end(EXIT_TIMEOUT)
        curl_stream.reader.wait_end(EXIT_TIMEOUT)
        assert curl_stream.proc.wait(timeout=EXIT_TIMEOUT) == 0, curl_stream.proc.stderr.read()
    assert server.wait_exit(EXIT_TIMEOUT) == 0
