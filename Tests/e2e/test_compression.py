"""permessage-deflate (RFC 7692, docs/PROTOCOL.md "Compression"): what the handshake agrees,
compressed broadcasts that decode to the plain JSON, the size threshold, one compressed frame for
every subscriber, compressed snapshots, and the /metrics counters. Compressed client messages and
their limits are in test_compression_client.py.

The `websockets` client (which offers permessage-deflate by default) shows that a real client
gets along with the gateway; `DeflateSocket` (permessage_deflate.py), a raw socket, shows the RSV1
bits and the bytes on the wire.
"""

from __future__ import annotations

import json
import zlib

import pytest

from conftest import store_snapshot
from permessage_deflate import (
    AGREED,
    BIG,
    DeflateSocket,
    EXTENSIONS,
    MIN_BYTES,
    OFFER,
    WINDOW_BLOCK,
    assert_message,
    deflate_client,
    inflate,
    subscribed,
)
from test_metrics import scrape, value
from wsclient import (
    apply_changes,
    commit,
    connect,
    new_store,
    publish,
    recv_json,
    recv_text,
    send_json,
    subscribe,
    unique,
)


# ---- Negotiation ------------------------------------------------------------------------

OFFERS = {
    "bare": ("permessage-deflate", AGREED),
    "client-bits": (OFFER, AGREED),
    "client-bits-10": ("permessage-deflate; client_max_window_bits=10", AGREED),
    "server-bits-10": ("permessage-deflate; server_max_window_bits=10", AGREED + "; server_max_window_bits=10"),
    "both-bits": ("permessage-deflate; server_max_window_bits=12; client_max_window_bits=9",
                  AGREED + "; server_max_window_bits=12"),
    "quoted-bits": ('permessage-deflate; server_max_window_bits="11"', AGREED + "; server_max_window_bits=11"),
    "no-takeover-asked": ("permessage-deflate; server_no_context_takeover; client_no_context_takeover", AGREED),
    "8-declined-then-next": ("permessage-deflate; server_max_window_bits=8, permessage-deflate; client_max_window_bits",
                             AGREED),
    "after-another-extension": ("x-webkit-deflate-frame, permessage-deflate", AGREED),
    "declined-8-bits": ("permessage-deflate; server_max_window_bits=8", None),
    "declined-16-bits": ("permessage-deflate; server_max_window_bits=16", None),
    "declined-leading-zero": ("permessage-deflate; server_max_window_bits=010", None),
    "declined-unknown-param": ("permessage-deflate; dictionary=1", None),
    "declined-repeated-param": ("permessage-deflate; client_max_window_bits; client_max_window_bits", None),
    "other-extension-only": ("x-webkit-deflate-frame", None),
    "no-offer": (None, None),
}


@pytest.mark.parametrize("offer, answer", list(OFFERS.values()), ids=list(OFFERS))
def test_handshake_answers_each_offer_and_frames_follow_it(server, offer, answer):
    topic = unique("nego")
    with DeflateSocket(server.port, offer, expect=answer) as ws:
        ws.subscribe_topic(topic)
        seq = publish(server.port, topic, BIG)
        message = ws.read_wire()
        # A big message is compressed exactly when the extension was agreed, in the agreed window.
        assert message.compressed == (answer is not None), (offer, message.frames[0])
        assert_message(message.json(), topic, seq, BIG)


def test_websockets_client_negotiates_and_decodes(server):
    topic = unique("lib")
    with connect(server.port, compression="deflate") as ws:
        assert ws.request.headers[EXTENSIONS] == OFFER
        assert ws.response.headers[EXTENSIONS] == AGREED
        [extension] = ws.protocol.extensions
        assert (extension.remote_no_context_takeover, extension.local_no_context_takeover) == (True, True)
        assert subscribe(ws, topic=topic) == subscribed(topic)
        seq = publish(server.port, topic, BIG)
        assert_message(recv_json(ws), topic, seq, BIG)


@pytest.mark.parametrize("factory, answer", [
    ({"client_max_window_bits": 10}, AGREED),
    ({"server_max_window_bits": 10}, AGREED + "; server_max_window_bits=10"),
    ({"server_max_window_bits": 9, "client_max_window_bits": 12}, AGREED + "; server_max_window_bits=9"),
], ids=["client-10", "server-10", "server-9-client-12"])
def test_websockets_client_with_window_bits(server, factory, answer):
    topic = unique("bits")
    with deflate_client(server.port, **factory) as ws:
        assert ws.response.headers[EXTENSIONS] == answer
        [extension] = ws.protocol.extensions
        assert extension.remote_max_window_bits == factory.get("server_max_window_bits", 15)
        assert subscribe(ws, topic=topic) == subscribed(topic)
        data = {"block": WINDOW_BLOCK * 2}
        seq = publish(server.port, topic, data)
        # websockets inflates with the window it asked for: a longer back-reference would fail it.
        assert_message(recv_json(ws), topic, seq, data)


def test_server_max_window_bits_15_is_echoed(server):
    # RFC 7692 section 7.1.2.1: an accepted server_max_window_bits is answered, 15 included;
    # websockets refuses a handshake that leaves it out.
    echoed = AGREED + "; server_max_window_bits=15"
    with deflate_client(server.port, server_max_window_bits=15) as ws:
        assert ws.response.headers[EXTENSIONS] == echoed
    with DeflateSocket(server.port, "permessage-deflate; server_max_window_bits=15", expect=echoed):
        pass


def test_client_offering_nothing_gets_no_extension(server):
    with connect(server.port) as ws:  # compression=None: no offer
        assert EXTENSIONS not in ws.request.headers
        assert EXTENSIONS not in ws.response.headers
        assert ws.protocol.extensions == []


def test_no_compression_server_declines_every_offer(start_server):
    plain = start_server("--no-compression")
    topic = unique("off")
    with connect(plain.port, compression="deflate") as ws, DeflateSocket(plain.port, expect=None) as raw:
        assert ws.request.headers[EXTENSIONS] == OFFER
        assert EXTENSIONS not in ws.response.headers and ws.protocol.extensions == []
        assert subscribe(ws, topic=topic) == subscribed(topic)
        raw.subscribe_topic(topic)
        seq = publish(plain.port, topic, BIG)
        message = raw.read_wire()
        assert not message.compressed
        assert message.text.decode() == recv_text(ws)
        assert_message(message.json(), topic, seq, BIG)


# ---- Server frames ----------------------------------------------------------------------

def test_compressed_and_plain_subscribers_get_the_same_json(server):
    port, topic = server.port, unique("same")
    with connect(port, compression="deflate") as zipped, connect(port) as plain, DeflateSocket(port) as raw:
        assert zipped.protocol.extensions and not plain.protocol.extensions
        assert subscribe(zipped, topic=topic) == subscribe(plain, topic=topic) == subscribed(topic)
        raw.subscribe_topic(topic)

        seq = publish(port, topic, BIG)
        text = recv_text(plain)
        assert len(text) > MIN_BYTES
        assert json.loads(recv_text(zipped)) == json.loads(text)
        assert_message(json.loads(text), topic, seq, BIG)
        wire = raw.read_wire()
        assert wire.compressed, wire.frames[0]
        assert len(wire.wire) < len(wire.text)
        assert wire.text == text.encode(), "the compressed frame inflates to the plain frame's JSON"

        small = {"n": 1, "word": "tiny"}
        seq = publish(port, topic, small)
        text = recv_text(plain)
        assert len(text.encode()) < MIN_BYTES
        assert recv_text(zipped) == text
        wire = raw.read_wire()
        assert not wire.compressed, "a frame under --compression-min-bytes goes plain, RSV1 clear"
        assert wire.wire == text.encode()
        assert_message(wire.json(), topic, seq, small)


# Sizes of a message frame's JSON and whether each is compressed, by --compression-min-bytes.
THRESHOLDS = {
    None: [(MIN_BYTES - 1, False), (MIN_BYTES, True)],
    1000: [(MIN_BYTES + 100, False), (999, False), (1000, True)],  # over the default, still plain
    1: [(200, True)],                                              # under the default, compressed
}


@pytest.mark.parametrize("threshold", list(THRESHOLDS), ids=["default-256", "1000", "1"])
def test_compression_min_bytes_is_the_threshold(start_server, threshold):
    """A frame whose JSON is `--compression-min-bytes` long or longer is compressed; a shorter one is not."""
    server = start_server(*(["--compression-min-bytes", str(threshold)] if threshold else []))
    topic = unique("edge")
    with DeflateSocket(server.port) as ws:
        ws.subscribe_topic(topic)
        # Every frame of this topic has the same JSON around `data` (one-digit seq, 16-digit
        # publishedAt): measure it once, then pad `data` to exact sizes.
        publish(server.port, topic, "")
        overhead = len(ws.read_wire().text)
        for size, compressed in THRESHOLDS[threshold]:
            assert size > overhead + 50, (size, overhead)
            data = "a" * (size - overhead)
            seq = publish(server.port, topic, data)
            message = ws.read_wire()
            assert len(message.text) == size, (len(message.text), size)
            assert message.compressed == compressed, (size, threshold, message.frames[0])
            assert_message(message.json(), topic, seq, data)


def test_every_deflate_subscriber_gets_byte_identical_frames(server):
    """No context takeover: a broadcast's frame does not depend on what the connection got before."""
    port, topic, other = server.port, unique("shared"), unique("other")
    with DeflateSocket(port) as first, DeflateSocket(port) as second:
        first.subscribe_topic(topic)
        second.subscribe_topic(topic)
        first.subscribe_topic(other)
        # Only the first subscriber gets this one: a compressor kept per connection would now differ.
        primer = {"primer": BIG["rows"][:20]}
        publish(port, other, primer)
        assert first.read_wire().compressed
        for n in range(3):
            data = {**BIG, "n": n}
            seq = publish(port, topic, data)
            a, b = first.read_wire(), second.read_wire()
            assert a.compressed and b.compressed
            assert a.frames == b.frames, "the two subscribers got different bytes for one broadcast"
            assert_message(a.json(), topic, seq, data)


@pytest.mark.parametrize("bits", [9, 10, 14])
def test_server_max_window_bits_limits_the_compressor_window(server, bits):
    port, topic = server.port, unique("window")
    offer = f"permessage-deflate; server_max_window_bits={bits}; client_max_window_bits"
    with DeflateSocket(port, offer, expect=f"{AGREED}; server_max_window_bits={bits}") as small, \
            DeflateSocket(port) as full:
        small.subscribe_topic(topic)
        full.subscribe_topic(topic)
        data = {"block": WINDOW_BLOCK * 2}
        seq = publish(port, topic, data)
        narrow, wide = small.read_wire(), full.read_wire()  # read_wire inflates with each one's window
        assert narrow.compressed and wide.compressed
        assert narrow.text == wide.text
        assert_message(narrow.json(), topic, seq, data)
        # The data does tell the windows apart: the 15-bit frame reaches further back.
        assert len(wide.wire) < len(narrow.wire)
        with pytest.raises(zlib.error):
            inflate(wide.wire, bits)


def test_store_snapshot_and_changes_arrive_compressed(server):
    port = server.port
    models = {f"m-{n}": {"color": f"#{n * 4099 % 0xFFFFFF:06x}", "label": f"Model {n}", "size": n} for n in range(50)}
    store = new_store(port, models)
    with DeflateSocket(port) as raw, connect(port) as plain:
        expected = {"type": "snapshot", "reset": False, **store_snapshot(port, store)}
        raw.send_json({"type": "subscribe", "store": store})
        snapshot = raw.read_wire()
        assert snapshot.compressed, snapshot.frames[0]
        assert snapshot.json() == expected
        assert len(snapshot.wire) * 2 < len(snapshot.text)
        send_json(plain, {"type": "subscribe", "store": store})
        assert recv_text(plain).encode() == snapshot.text

        version = commit(port, store, [{"op": "put", "model": f"m-{n}", "value": {"color": "#000000", "n": n}}
                                       for n in range(0, 50, 5)])
        changes = raw.read_wire()
        assert changes.compressed, changes.frames[0]
        frame = changes.json()
        assert (frame["type"], frame["version"]) == ("changes", version), frame
        state = snapshot.json()["models"]
        apply_changes(state, frame["changes"])
        assert state == store_snapshot(port, store)["models"]
        assert recv_text(plain).encode() == changes.text


# ---- Metrics ----------------------------------------------------------------------------

NEGOTIATED = "receptionist_compression_negotiated_total"
COMPRESSED_OUT = "receptionist_compressed_messages_out_total"


def counts(port: int) -> tuple[float, float]:
    samples = scrape(port)
    return value(samples, NEGOTIATED), value(samples, COMPRESSED_OUT, transport="websocket")


def test_metrics_count_negotiated_connections_and_compressed_messages(start_server):
    server = start_server()
    port, topic = server.port, unique("metrics")
    negotiated, compressed = counts(port)
    with connect(port, compression="deflate") as a, deflate_client(port, server_max_window_bits=10) as b, \
            DeflateSocket(port) as c, connect(port) as plain, \
            DeflateSocket(port, "permessage-deflate; server_max_window_bits=8", expect=None) as declined:
        assert counts(port) == (negotiated + 3, compressed), "three connections agreed on compression"
        for ws in (a, b, plain):
            assert subscribe(ws, topic=topic) == subscribed(topic)
        for raw in (c, declined):
            raw.subscribe_topic(topic)
        assert counts(port) == (negotiated + 3, compressed), "short replies go plain"

        seq = publish(port, topic, BIG)
        for ws in (a, b, plain):
            assert_message(recv_json(ws), topic, seq, BIG)
        assert c.read_wire().compressed
        assert not declined.read_wire().compressed
        assert counts(port) == (negotiated + 3, compressed + 3), "one compressed message per agreeing subscriber"

        seq = publish(port, topic, {"short": True})
        for ws in (a, b, plain):
            assert_message(recv_json(ws), topic, seq, {"short": True})
        assert not c.read_wire().compressed and not declined.read_wire().compressed
        assert counts(port) == (negotiated + 3, compressed + 3), "a short message is not counted"
