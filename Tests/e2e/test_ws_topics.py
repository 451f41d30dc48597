"""Topics (docs/PROTOCOL.md): publish over HTTP, receive over WebSocket, listing, resume from the
history, gaps, errors, and a stalled subscriber closed with 1008 while the others keep up."""

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import api, assert_json_error
from wsclient import (
    EPOCH,
    OP_TEXT,
    RawWebSocket,
    assert_recent_micros,
    connect,
    kernel_buffer_budget,
    publish,
    recv_json,
    recv_text,
    send_json,
    subscribe,
    topics_listing,
    unique,
)

STREAM_TIMEOUT = 15.0      # a whole run of messages that is already due
CATCH_UP_TIMEOUT = 60.0    # the reading subscriber gets every message of the slow-client test
CLOSE_WAIT = 30.0          # the stalled subscriber's socket is read out and found closed
SLOW_TEST_TIMEOUT = 180    # pytest-timeout for the slow-client test
QUEUE_LIMIT = 65536        # --max-queued-bytes for the slow-client test
TINY_RCVBUF = 4096         # SO_RCVBUF of the stalled subscriber
PAD_BYTES = 16384          # size of each message in the slow-client test
RSS_GROWTH_LIMIT_MIB = 200


def process_memory_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak RSS) of a process, in KiB."""
    with open(f"/proc/{pid}/status") as status:
        fields = dict(line.split(":", 1) for line in status if ":" in line)
    return {k: int(fields[k].split()[0]) for k in ("VmRSS", "VmHWM")}


def subscribed(topic: str, seq: int, resumed: bool = False) -> dict:
    return {"type": "subscribed", "topic": topic, "seq": seq, "epoch": EPOCH, "resumed": resumed}


def same_json(a, b) -> bool:
    """Equal as JSON: numbers by value, but true/false/null never equal to numbers."""
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def assert_message(frame: dict, topic: str, seq: int, data=None, check_data: bool = True) -> None:
    assert set(frame) == {"type", "topic", "seq", "publishedAt", "data"}, frame
    assert (frame["type"], frame["topic"], frame["seq"]) == ("message", topic, seq), frame
    assert_recent_micros(frame["publishedAt"])
    if check_data:
        assert same_json(frame["data"], data), (frame["data"], data)


def receive_messages(ws, topic: str, seqs, timeout: float = STREAM_TIMEOUT) -> list[dict]:
    deadline = time.monotonic() + timeout
    frames = []
    for seq in seqs:
        frame = recv_json(ws, max(0.0, deadline - time.monotonic()))
        assert_message(frame, topic, seq, check_data=False)
        frames.append(frame)
    return frames


# ---- Publishing and listing --------------------------------------------

def test_publish_returns_consecutive_seqs_and_lists_the_topic(server):
    topic = unique("pub")
    assert [publish(server.port, topic, {"n": n}) for n in range(3)] == [1, 2, 3]
    assert topics_listing(server.port)[topic] == 3
    other = unique("pub")
    assert publish(server.port, other, "first") == 1, "each topic counts on its own"
    listing = topics_listing(server.port)
    assert (listing[topic], listing[other]) == (3, 1)


def test_a_subscribed_topic_exists_with_seq_zero(server):
    topic = unique("sub")
    assert topic not in topics_listing(server.port)
    with connect(server.port) as ws:
        assert subscribe(ws, topic=topic) == subscribed(topic, 0)
        assert topics_listing(server.port)[topic] == 0


def test_invalid_json_is_not_published(server):
    topic = unique("bad")
    resp = api(server.port, "POST", f"/api/topics/{topic}/messages", body=b'{"headline":')
    assert_json_error(resp, 400, "bad_request")
    assert publish(server.port, topic, {"ok": True}) == 1


# ---- Receiving ---------------------------------------------------------

VALUES = [
    {"headline": "hello", "nested": {"list": [1, {"deep": None}], "flag": False}},
    "plain text with snow \u2603 and \"quotes\"\n",
    42,
    -3.5,
    [1, "two", {"three": 3}, [4]],
    None,
    True,
    {},
    [],
]


def test_subscriber_receives_each_message_with_its_exact_data(server):
    topic = unique("data")
    with connect(server.port) as ws:
        assert subscribe(ws, topic=topic) == subscribed(topic, 0)
        seqs = [publish(server.port, topic, value) for value in VALUES]
        assert seqs == list(range(1, len(VALUES) + 1))
        for seq, value in zip(seqs, VALUES):
            assert_message(recv_json(ws), topic, seq, value)


def test_concurrent_publishers_reach_two_subscribers_in_seq_order(server):
    port, topic = server.port, unique("fan")
    writers, writes = 4, 20
    with connect(port) as first, connect(port) as second:
        assert subscribe(first, topic=topic) == subscribe(second, topic=topic) == subscribed(topic, 0)

        def write(writer):
            return {publish(port, topic, {"writer": writer, "i": i}): {"writer": writer, "i": i}
                    for i in range(writes)}

        sent = {}
        with ThreadPoolExecutor(writers) as pool:
            for batch in pool.map(write, range(writers)):
                sent.update(batch)
        total = writers * writes
        assert sorted(sent) == list(range(1, total + 1))
        texts = [[recv_text(ws, STREAM_TIMEOUT) for _ in range(total)] for ws in (first, second)]
        assert texts[0] == texts[1], "every subscriber gets the same encoded frame"
        for seq, text in enumerate(texts[0], start=1):
            assert_message(json.loads(text), topic, seq, sent[seq])


def test_unsubscribe_stops_only_that_topic(server):
    port = server.port
    quiet, loud = unique("quiet"), unique("loud")
    with connect(port) as ws:
        assert subscribe(ws, topic=quiet) == subscribed(quiet, 0)
        assert subscribe(ws, topic=loud) == subscribed(loud, 0)
        send_json(ws, {"type": "unsubscribe", "topic": quiet})
        assert recv_json(ws) == {"type": "unsubscribed", "topic": quiet}
        for n in (1, 2):
            publish(port, quiet, {"n": n})
            # Published after the quiet topic's message, so it would arrive after it.
            seq = publish(port, loud, {"n": n})
            assert_message(recv_json(ws), loud, seq, {"n": n})
        send_json(ws, {"type": "unsubscribe", "topic": quiet})
        assert recv_json(ws)["code"] == "not_subscribed"
        assert subscribe(ws, topic=quiet) == subscribed(quiet, 2)


# ---- Resume and gaps ---------------------------------------------------

def test_resume_with_since_replays_the_missed_messages(server):
    port, topic = server.port, unique("resume")
    with connect(port) as ws:
        assert subscribe(ws, topic=topic) == subscribed(topic, 0)
        for n in range(1, 4):
            publish(port, topic, {"n": n})
        last = receive_messages(ws, topic, [1, 2, 3])[-1]["seq"]
    for n in range(4, 8):
        publish(port, topic, {"n": n})
    with connect(port) as ws:
        assert subscribe(ws, topic=topic, since=last) == subscribed(topic, 7, resumed=True)
        for seq in range(4, 8):
            assert_message(recv_json(ws), topic, seq, {"n": seq})
        live = publish(port, topic, {"n": 8})
        assert_message(recv_json(ws), topic, live, {"n": 8})


def test_resume_from_zero_replays_the_whole_history(server):
    port, topic = server.port, unique("zero")
    values = ["a", {"b": 2}, [3]]
    for value in values:
        publish(port, topic, value)
    with connect(port) as ws:
        assert subscribe(ws, topic=topic, since=0) == subscribed(topic, 3, resumed=True)
        for seq, value in enumerate(values, start=1):
            assert_message(recv_json(ws), topic, seq, value)


def test_messages_lost_from_history_are_reported_as_a_gap(start_server):
    server = start_server("--history", "5")
    port, topic = server.port, unique("gap")
    for n in range(1, 21):
        assert publish(port, topic, {"n": n}) == n
    with connect(port) as ws:
        first = subscribe(ws, topic=topic, since=2)
        # PROTOCOL.md does not say whether a resume with a gap counts as `resumed`.
        assert {k: v for k, v in first.items() if k != "resumed"} == {"type": "subscribed", "topic": topic, "seq": 20, "epoch": EPOCH}
        assert recv_json(ws) == {"type": "gap", "topic": topic, "from": 3, "to": 15}
        for seq in range(16, 21):
            assert_message(recv_json(ws), topic, seq, {"n": seq})
        live = publish(port, topic, {"n": 21})
        assert_message(recv_json(ws), topic, live, {"n": 21})


# ---- Errors ------------------------------------------------------------

@pytest.mark.parametrize("name", ["", "x" * 65, "has space", "slash/name", "caf\u00e9", "semi;colon", "star*", ".", ".."],
                         ids=["empty", "65-chars", "space", "slash", "non-ascii", "semicolon", "star", "dot", "dot-dot"])
def test_invalid_topic_name_is_an_error(server, name):
    with connect(server.port) as ws:
        frame = subscribe(ws, topic=name)
        assert set(frame) == {"type", "code", "message"} and frame["type"] == "error", frame
        assert frame["code"] == "invalid_topic", frame
        topic = unique("after")
        assert subscribe(ws, topic=topic) == subscribed(topic, 0)


@pytest.mark.parametrize("name", ["x" * 64, "Az09_.-", "-", "a.b"])
def test_topic_names_within_the_pattern_are_accepted(server, name):
    with connect(server.port) as ws:
        first = subscribe(ws, topic=name)
        assert first["type"] == "subscribed" and first["topic"] == name, first
        seq = publish(server.port, name, {"name": name})
        assert_message(recv_json(ws), name, seq, {"name": name})


def test_duplicate_topic_subscribe_is_already_subscribed(server):
    topic = unique("dup")
    with connect(server.port) as ws:
        assert subscribe(ws, topic=topic) == subscribed(topic, 0)
        frame = subscribe(ws, topic=topic, since=0)
        assert frame["type"] == "error" and frame["code"] == "already_subscribed", frame
        seq = publish(server.port, topic, "once")
        assert_message(recv_json(ws), topic, seq, "once")
        seq = publish(server.port, topic, "twice")
        assert_message(recv_json(ws), topic, seq, "twice")


# ---- Slow clients ------------------------------------------------------

@pytest.mark.timeout(SLOW_TEST_TIMEOUT)
def test_stalled_topic_subscriber_is_closed_while_others_get_every_message(start_server):
    count = kernel_buffer_budget() // PAD_BYTES + 1
    # The history keeps every message, so the stalled subscriber can resume without a gap.
    server = start_server("--max-queued-bytes", str(QUEUE_LIMIT), "--ping-interval", "600",
                          "--history", str(max(1000, count)))
    port, topic = server.port, unique("slow")
    pad = "x" * PAD_BYTES
    received, failures = [], []

    with RawWebSocket(port, rcvbuf=TINY_RCVBUF) as stalled, connect(port, max_queue=None) as reader:
        stalled.open()
        stalled.send_json({"type": "subscribe", "topic": topic})
        assert stalled.recv_json() == subscribed(topic, 0)
        assert subscribe(reader, topic=topic) == subscribed(topic, 0)

        def read_all():
            deadline = time.monotonic() + CATCH_UP_TIMEOUT
            try:
                while len(received) < count:
                    frame = recv_json(reader, max(0.0, deadline - time.monotonic()))
                    received.append((frame["type"], frame["seq"], frame["data"]["i"]))
            except BaseException as exc:  # reported by the main thread
                failures.append(exc)

        thread = threading.Thread(target=read_all, daemon=True)
        thread.start()
        rss_before = process_memory_kib(server.proc.pid)["VmRSS"]
        # The stalled subscriber never reads while a few MB are published.
        for i in range(count):
            assert publish(port, topic, {"i": i, "pad": pad}) == i + 1
        thread.join(CATCH_UP_TIMEOUT)
        assert not thread.is_alive(), f"the reading subscriber got only {len(received)} of {count}"
        assert not failures, failures
        assert received == [("message", i + 1, i) for i in range(count)]
        growth_mib = (process_memory_kib(server.proc.pid)["VmHWM"] - rss_before) / 1024
        assert growth_mib < RSS_GROWTH_LIMIT_MIB, f"server RSS grew by {growth_mib:.0f} MiB"

        try:
            frames, close = stalled.read_until_closed(CLOSE_WAIT)
        except AssertionError as exc:
            raise AssertionError(f"the stalled subscriber was never closed: {exc}") from None
        if close is not None:
            assert close.close_code() == 1008, close
            assert close.close_reason() == "slow consumer", close
        assert all(f.opcode == OP_TEXT and f.fin for f in frames), [f.opcode for f in frames][:20]
        seqs = [json.loads(f.payload)["seq"] for f in frames]
        assert seqs == list(range(1, len(seqs) + 1)), "what the stalled subscriber got is in order"
        assert len(seqs) < count, "the stalled subscriber was not cut off"

    # It resumes from the history where it was cut off.
    with connect(port, max_queue=None) as again:
        assert subscribe(again, topic=topic, since=len(seqs)) == subscribed(topic, count, resumed=True)
        for frame in receive_messages(again, topic, range(len(seqs) + 1, count + 1), CATCH_UP_TIMEOUT):
            assert frame["data"]["i"] == frame["seq"] - 1
