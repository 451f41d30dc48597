"""Exact payloads: a topic message's `data` reaches every subscriber (WebSocket and SSE, live and
replayed, on one node or across a redis cluster) as exactly the bytes the publisher sent, except
that whitespace outside strings may be dropped; store models keep their numbers' literals and their
members' order as written, through every read, frame, event, replay and change set.

Frames are checked as text: a message frame ends with `"data":<DATA>}`, and store values are parsed
with every number kept as its literal and every object as its ordered list of members, so that
`1.10` is not `1.1`, `-0.0` is not `0`, and `{"z":1,"a":2}` is not `{"a":2,"z":1}`.
"""

import json

import pytest

from conftest import api, assert_json_error, json_ok, store_snapshot, wait_for
from sse_client import HttpEvents, assert_stream_head, first_event, store_events, topic_events
from test_cluster import redis, start_node  # noqa: F401  (`redis` is a fixture)
from wsclient import (
    EPOCH,
    apply_changes,
    assert_changes_frame,
    assert_recent_micros,
    connect,
    new_store,
    recv_text,
    subscribe,
    topics_listing,
    unique,
)

WHITESPACE = " \t\n\r"


# ---- Exact comparisons -------------------------------------------------

def compact(text: str) -> str:
    """JSON text without the whitespace between tokens; string contents (escapes included) kept."""
    out, in_string, escaped = [], False, False
    for ch in text:
        if in_string:
            out.append(ch)
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch not in WHITESPACE:
            out.append(ch)
            in_string = ch == '"'
    assert not in_string, f"unterminated string in {text!r}"
    return "".join(out)


def _number(literal: str) -> tuple:
    return ("number", literal)


def literal(text):
    """Parse JSON keeping each number as its literal text; objects keep their members' order."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    return json.loads(text, parse_int=_number, parse_float=_number)


def shape(value):
    """A comparable form where objects are ordered member lists: order and literals both count."""
    if isinstance(value, dict):
        return ("object", [(k, shape(v)) for k, v in value.items()])
    if isinstance(value, list):
        return [shape(v) for v in value]
    return value


def exact(text):
    return shape(literal(text))


def assert_same_literals(actual, expected_text: str, where: str) -> None:
    assert shape(actual) == exact(expected_text), f"{where}: got {shape(actual)!r}, want {exact(expected_text)!r}"


def message_tail(body: str) -> str:
    return '"data":' + compact(body) + "}"


def assert_message_text(text: str, topic: str, seq: int, body: str) -> None:
    """A message frame (or SSE data line) whose data is the published bytes, whitespace aside."""
    frame = json.loads(text)
    assert isinstance(frame, dict) and list(frame)[-1] == "data", text
    assert set(frame) == {"type", "topic", "seq", "publishedAt", "data"}, text
    assert (frame["type"], frame["topic"], frame["seq"]) == ("message", topic, seq), text
    assert_recent_micros(frame["publishedAt"])
    assert compact(text).endswith(message_tail(body)), (
        f"message data changed on the way:\n  sent  {compact(body)}\n  frame {text}")


def test_compact_helper_drops_only_whitespace_outside_strings():
    assert compact(' { "a b" : [ 1 ,\n\t2 ] ,\r\n "c\\" d" : "e\\\\" } ') == '{"a b":[1,2],"c\\" d":"e\\\\"}'
    assert exact('{"z":1.10,"a":-0.0}') != exact('{"a":-0.0,"z":1.10}')
    assert exact('{"z":1.10}') != exact('{"z":1.1}')
    assert exact('{"z":"1"}') != exact('{"z":1}')


# ---- Topic messages ----------------------------------------------------

EXACT_BODY = (r'{"id":123456789012345678,"n":9007199254740993,"a":1,"Z":2,"f":1.10,"e":1E+2,'
              r'"big":1e400,"neg":-0.0,"s":"\u00e9\n\/x","arr":[1.0,-0,{"b":1,"a":2}]}')
SPACED_BODY = ('{\n  "title" : "two  spaces,\\ta tab: and } { [ ] \\" quotes" ,\n'
               '\t"list": [ 1 , 2.50 ,\r\n  {"z" : null , "y" : true , "x":false} ] ,\n'
               '  "tiny": 1.0e-7 , "esc": "\\\\ \\/ \\b\\f\\r\\u0041" \n}\n')
BODIES = {
    "numbers-order-escapes": EXACT_BODY,
    "whitespace-between-tokens": SPACED_BODY,
    "raw-utf8": '{"caf\u00e9":"snow \u2603 \U0001F600","\u00e9":"\\u00e9"}',
    "top-level-number": "9007199254740993",
    "top-level-float": " 12.500e+00 ",
    "top-level-string": '"\\u00e9 \\/ \u00e9"',
    "top-level-array": "[ 1e400 , -0.0 , 0.10 , {\"b\":1,\"a\":[]} ]",
}


def publish_text(port: int, topic: str, body: str) -> int:
    resp = api(port, "POST", f"/api/topics/{topic}/messages", body=body.encode("utf-8"))
    answer = json_ok(resp, 201)
    assert set(answer) == {"topic", "seq"} and answer["topic"] == topic, answer
    return answer["seq"]


@pytest.mark.parametrize("body", list(BODIES.values()), ids=list(BODIES))
def test_websocket_message_data_is_the_published_bytes_live_and_replayed(server, body):
    port, topic = server.port, unique("exact-ws")
    with connect(port) as ws:
        assert subscribe(ws, topic=topic)["type"] == "subscribed"
        seq = publish_text(port, topic, body)
        assert_message_text(recv_text(ws), topic, seq, body)
    with connect(port) as ws:
        assert subscribe(ws, topic=topic, since=seq - 1) == {
            "type": "subscribed", "topic": topic, "seq": seq, "epoch": EPOCH, "resumed": True}
        assert_message_text(recv_text(ws), topic, seq, body)


def test_sse_message_data_is_the_published_bytes_live_and_replayed(server):
    port, topic = server.port, unique("exact-sse")
    bodies = list(BODIES.values())
    with HttpEvents(port, topic_events(topic)) as stream:
        assert_stream_head(stream.response)
        seqs = [publish_text(port, topic, body) for body in bodies]
        assert seqs == list(range(1, len(bodies) + 1))
        event = first_event(stream.reader, {"type": "subscribed", "topic": topic, "seq": 0})
        for index, (seq, body) in enumerate(zip(seqs, bodies)):
            event = stream.reader.next_event() if index else event
            assert (event.event, event.number, len(event.data)) == ("message", str(seq), 1), event
            assert_message_text(event.data[0], topic, seq, body)
    with HttpEvents(port, topic_events(topic), headers={"Last-Event-ID": "0"}) as stream:
        assert_stream_head(stream.response)
        event = first_event(stream.reader, {"type": "subscribed", "topic": topic, "seq": len(bodies)})
        for index, (seq, body) in enumerate(zip(seqs, bodies)):
            event = stream.reader.next_event() if index else event
            assert (event.event, event.number, len(event.data)) == ("message", str(seq), 1), event
            assert_message_text(event.data[0], topic, seq, body)


BAD_JSON = [b'{"a":', b'{"a":1} x', b"[1,]", b'{"a":1,}', b"01", b"-", b".5", b"1.", b"+1", b"1e",
            b"NaN", b"Infinity", b'"\\x"', b'{"a" 1}', b'"\xff"', b"", b"   ", b'"tab\there"']
BAD_IDS = ["truncated", "trailing-garbage", "array-trailing-comma", "object-trailing-comma",
           "leading-zero", "lone-minus", "no-integer-part", "no-fraction-digits", "plus-sign",
           "no-exponent-digits", "nan", "infinity", "bad-escape", "missing-colon", "invalid-utf8",
           "empty", "only-whitespace", "raw-control-char"]


@pytest.mark.parametrize("body", BAD_JSON, ids=BAD_IDS)
def test_bad_json_is_still_refused_with_400_and_publishes_nothing(server, body):
    port = server.port
    topic, store = unique("bad-json"), new_store(server.port, prefix="bad-json")
    assert_json_error(api(port, "POST", f"/api/topics/{topic}/messages", body=body), 400, "bad_request")
    assert topic not in topics_listing(port)
    wrapped = b'{"x":' + body + b"}"
    assert_json_error(api(port, "PUT", f"/api/stores/{store}/models/m", body=wrapped), 400, "bad_request")
    assert store_snapshot(port, store)["version"] == 0


# ---- Store models ------------------------------------------------------

MODEL = '{"n":9007199254740993,"z":1,"a":2,"d":1.10,"big":1e400,"neg":-0.0}'
MODEL_SPACED = '{ "n" : 9007199254740993 ,\n "z":1, "a" :2 ,"d": 1.10 , "big":1e400,\t"neg" : -0.0 }'


def subscribe_text(ws, **target) -> str:
    """Subscribe and return the raw text of the first frame answering it."""
    ws.send(json.dumps({"type": "subscribe", **target}))
    return recv_text(ws)


def put_text(port: int, store: str, model: str, body: str) -> int:
    resp = api(port, "PUT", f"/api/stores/{store}/models/{model}", body=body.encode("utf-8"))
    assert resp.status in (200, 201), (resp.status, resp.body[:300])
    return json_ok(resp, resp.status)["version"]


def model_text_value(port: int, store: str, model: str):
    resp = api(port, "GET", f"/api/stores/{store}/models/{model}")
    json_ok(resp)
    return literal(resp.body)["value"]


def snapshot_models(port: int, store: str) -> dict:
    resp = api(port, "GET", f"/api/stores/{store}")
    json_ok(resp)
    return literal(resp.body)["models"]


@pytest.mark.parametrize("body", [MODEL, MODEL_SPACED], ids=["compact", "spaced"])
def test_put_model_keeps_number_literals_and_member_order_in_http_reads(server, body):
    port = server.port
    store = new_store(port, prefix="exact")
    assert put_text(port, store, "m", body) == 1
    assert put_text(port, store, "other", '{"b":0.50,"a":[2.0,1E3]}') == 2
    assert_same_literals(model_text_value(port, store, "m"), MODEL, "GET model")
    models = snapshot_models(port, store)
    assert_same_literals(models["m"], MODEL, "GET store snapshot")
    assert_same_literals(models["other"], '{"b":0.50,"a":[2.0,1E3]}', "GET store snapshot")


def test_model_literals_and_order_reach_websocket_snapshot_changes_and_resume(server):
    port = server.port
    store = new_store(port, prefix="exact-ws")
    with connect(port) as ws:
        assert subscribe(ws, store=store)["version"] == 0
        version = put_text(port, store, "m", MODEL)
        text = recv_text(ws)
        assert_changes_frame(json.loads(text), store, version)
        [change] = literal(text)["changes"]
        assert (change["model"], change["path"], change["kind"]) == ("m", "", "created"), change
        assert_same_literals(change["value"], MODEL, "live changes frame")
    with connect(port) as ws:
        snapshot = literal(subscribe_text(ws, store=store))
        assert (snapshot["type"], snapshot["version"]) == ("snapshot", _number(str(version))), snapshot
        assert_same_literals(snapshot["models"]["m"], MODEL, "snapshot frame")
    with connect(port) as ws:
        assert subscribe(ws, store=store, since=0)["resumed"] is True
        replayed = literal(recv_text(ws))
        assert (replayed["type"], replayed["version"]) == ("changes", _number(str(version))), replayed
        assert_same_literals(replayed["changes"][0]["value"], MODEL, "replayed changes frame")


def test_model_literals_and_order_reach_sse_snapshot_changes_and_resume(server):
    port = server.port
    store = new_store(port, prefix="exact-sse")
    with HttpEvents(port, store_events(store)) as stream:
        assert_stream_head(stream.response)
        assert stream.reader.next_event().event == "snapshot"
        version = put_text(port, store, "m", MODEL)
        event = stream.reader.next_event()
        assert (event.event, event.number, len(event.data)) == ("changes", str(version), 1), event
        assert_same_literals(literal(event.data[0])["changes"][0]["value"], MODEL, "SSE changes event")
    with HttpEvents(port, store_events(store)) as stream:
        event = stream.reader.next_event()
        assert (event.event, event.number) == ("snapshot", str(version)), event
        assert_same_literals(literal(event.data[0])["models"]["m"], MODEL, "SSE snapshot event")
    with HttpEvents(port, store_events(store), headers={"Last-Event-ID": "0"}) as stream:
        event = first_event(stream.reader, {"type": "subscribed", "store": store, "version": 0})
        assert (event.event, event.number) == ("changes", str(version)), event
        assert_same_literals(literal(event.data[0])["changes"][0]["value"], MODEL, "SSE replayed changes")


CHANGE_SET = ('{"changes":['
              '{"op":"put","model":"p","value":{"n":9007199254740993,"z":1,"a":2}},'
              '{"op":"set","model":"p","path":"d","value":1.10},'
              '{"op":"set","model":"p","path":"x.big","value":1e400},'
              '{"op":"patch","model":"p","value":{"z":-0.0,"e":1E+2}},'
              '{"op":"set","model":"q","path":"w","value":-0}]}')
AFTER_CHANGE_SET = {
    "p": '{"n":9007199254740993,"z":-0.0,"a":2,"d":1.10,"x":{"big":1e400},"e":1E+2}',
    "q": '{"w":-0}',
}


def test_change_set_values_keep_their_literals_and_order(server):
    port = server.port
    store = new_store(port, prefix="exact-changes")
    put_text(port, store, "q", '{"v":0.0}')
    with connect(port) as ws:
        snapshot = literal(subscribe_text(ws, store=store))
        resp = api(port, "POST", f"/api/stores/{store}/changes", body=CHANGE_SET.encode())
        assert json_ok(resp) == {"store": store, "version": 2, "changes": 6}  # the patch makes two
        frame = literal(recv_text(ws))
        assert (frame["type"], frame["version"]) == ("changes", _number(str(2))), frame
        models = snapshot["models"]
        apply_changes(models, frame["changes"])
    expected_q = '{"v":0.0,"w":-0}'
    for where, got in (("changes frame applied to the snapshot", models),
                       ("GET store snapshot", snapshot_models(port, store))):
        assert_same_literals(got["p"], AFTER_CHANGE_SET["p"], where)
        assert_same_literals(got["q"], expected_q, where)
    assert_same_literals(model_text_value(port, store, "p"), AFTER_CHANGE_SET["p"], "GET model")


PATCH_TARGET = '{"n":9007199254740993,"z":1,"a":2,"o":{"y":1,"x":2},"d":1.10}'
PATCH = '{"o":{"w":0.50,"y":null},"a":2.50,"new":-0.0,"z":null,"new2":1E+2}'
PATCHED = '{"n":9007199254740993,"a":2.50,"o":{"x":2,"w":0.50},"d":1.10,"new":-0.0,"new2":1E+2}'


def test_merge_patch_keeps_members_in_place_and_appends_new_ones(server):
    port = server.port
    store = new_store(port, prefix="exact-patch")
    put_text(port, store, "m", PATCH_TARGET)
    with connect(port) as ws:
        snapshot = literal(subscribe_text(ws, store=store))
        assert_same_literals(snapshot["models"]["m"], PATCH_TARGET, "snapshot before the patch")
        resp = api(port, "PATCH", f"/api/stores/{store}/models/m", body=PATCH.encode())
        version = json_ok(resp)["version"]
        frame = literal(recv_text(ws))
        assert (frame["type"], frame["version"]) == ("changes", _number(str(version))), frame
        models = snapshot["models"]
        apply_changes(models, frame["changes"])
    assert_same_literals(model_text_value(port, store, "m"), PATCHED, "GET model after the patch")
    assert_same_literals(snapshot_models(port, store)["m"], PATCHED, "GET store after the patch")
    assert_same_literals(models["m"], PATCHED, "changes frame applied to the snapshot")


# ---- Across a cluster --------------------------------------------------

def test_cluster_message_published_on_one_node_reaches_the_other_as_the_published_bytes(start_server, redis):
    a = start_node(start_server, redis)
    b = start_node(start_server, redis)
    topic = unique("exact-cluster")
    bodies = list(BODIES.values())
    with connect(b.port) as ws:
        assert subscribe(ws, topic=topic)["type"] == "subscribed"
        seqs = [publish_text(a.port, topic, body) for body in bodies]
        assert seqs == list(range(1, len(bodies) + 1))
        for seq, body in zip(seqs, bodies):
            assert_message_text(recv_text(ws, 10), topic, seq, body)
    # Replayed on B from Redis's history.
    with connect(b.port) as ws:
        assert subscribe(ws, topic=topic, since=0)["resumed"] is True
        for seq, body in zip(seqs, bodies):
            assert_message_text(recv_text(ws, 10), topic, seq, body)


def test_cluster_model_put_on_one_node_reads_the_same_literals_on_the_other(start_server, redis):
    a = start_node(start_server, redis)
    b = start_node(start_server, redis)
    store = unique("exact-cluster")
    assert json_ok(api(a.port, "POST", "/api/stores", {"name": store}), 201) == {"name": store, "version": 0}
    wait_for(lambda: api(b.port, "GET", f"/api/stores/{store}").status == 200, 5, "node B never learned of the store")
    with connect(b.port) as ws:
        assert subscribe(ws, store=store)["version"] == 0
        version = put_text(a.port, store, "m", MODEL)
        frame = literal(recv_text(ws, 10))
        assert (frame["type"], frame["version"]) == ("changes", _number(str(version))), frame
        assert_same_literals(frame["changes"][0]["value"], MODEL, "changes frame on node B")
    wait_for(lambda: store_snapshot(b.port, store)["version"] >= version, 10, f"node B never reached version {version}")
    assert_same_literals(snapshot_models(b.port, store)["m"], MODEL, "node B's snapshot")
    assert_same_literals(model_text_value(b.port, store, "m"), MODEL, "node B's GET model")
