"""Server-Sent Events clients for the end-to-end tests (test_sse.py and the tests of what else
streams over SSE): an event parser, streams read with curl and with http.client, the stream paths,
and checks of the stream's head and of snapshot, changes and message events.
"""

import http.client
import json
import os
import select
import socket
import subprocess
import time
from dataclasses import dataclass, field

from conftest import HOST, Response, parse_head, store_snapshot
from wsclient import CLOSE_TIMEOUT, FRAME_TIMEOUT, assert_changes_frame, assert_recent_micros

EVENT_STREAM = "text/event-stream"
CURL_MAX_TIME = 60         # curl's own limit; tests end their curl long before


# ---- Event stream clients ---------------------------------------------

@dataclass
class SSEEvent:
    event: str | None
    id: str | None
    data: list[str] = field(default_factory=list)

    @property
    def number(self) -> str | None:
        """The version or sequence number of the `id:` (`<number>@<epoch>`)."""
        if self.id is None:
            return None
        number, at, epoch = self.id.partition("@")
        assert at and epoch, f"an id without its epoch: {self.id!r}"
        return number

    @property
    def epoch(self) -> str | None:
        return None if self.id is None else self.id.partition("@")[2]

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


def assert_snapshot_event(event: SSEEvent, port: int, store: str, reset: bool = False, filter: dict | None = None) -> dict:
    """`filter`: the `models` and `paths` a filtered subscription's snapshot names."""
    assert event.event == "snapshot", event
    data = event.json()
    assert data == {"type": "snapshot", "reset": reset, **store_snapshot(port, store), **({"filter": filter} if filter else {})}
    assert event.number == str(data["version"]) and event.epoch == data["epoch"], event
    return data


def assert_changes_event(event: SSEEvent, store: str, version: int) -> dict:
    assert (event.event, event.number) == ("changes", str(version)), event
    data = event.json()
    assert_changes_frame(data, store, version)
    return data


def assert_message_event(event: SSEEvent, topic: str, seq: int, value) -> None:
    assert (event.event, event.number) == ("message", str(seq)), event
    data = event.json()
    assert set(data) == {"type", "topic", "seq", "publishedAt", "data"}, data
    assert (data["type"], data["topic"], data["seq"], data["data"]) == ("message", topic, seq, value), data
    assert_recent_micros(data["publishedAt"])
