"""Server-Sent Events (docs/PROTOCOL.md): store and topic streams over curl and http.client,
resume with Last-Event-ID and ?since=, reset snapshots, gaps, heartbeats, errors and drain. The
clients are in sse_client.py."""

import json
import signal
import time

import pytest

from conftest import assert_json_error, http_client_request, store_snapshot
from sse_client import (
    CurlEvents,
    HttpEvents,
    SSEEvent,
    assert_changes_event,
    assert_message_event,
    assert_snapshot_event,
    assert_stream_head,
    first_event,
    store_events,
    topic_events,
)
from wsclient import (
    apply_changes,
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


def test_an_escaped_comma_stays_in_its_model_id_and_member_name(server):
    """Lists in the query are split on commas, then each item is percent-decoded: `a%2Cb` is the
    model `a,b` (as the client library writes it), not `a` and `b`. Before, the stream sent the
    models and members the client had not asked for, and left out the one it had."""
    port = server.port
    store = new_store(port, {"a,b": {"k,1": 1, "k": 2}, "a": {"k,1": 3}, "b": {"k": 4}})
    with CurlEvents(port, store_events(store) + "?models=a%2Cb&paths=k%2C1") as stream:
        assert_stream_head(stream.response)
        assert stream.reader.next_event().json()["models"] == {"a,b": {"k,1": 1}}
    # A read of the change sets takes the same lists the same way.
    read = http_client_request(port, "GET", f"/api/stores/{store}/changes?after=0&models=a%2Cb,b&paths=k%2C1,k")
    changes = read.json()["changes"][0]["changes"]
    assert read.status == 200 and {c["model"] for c in changes} == {"a,b", "b"}, read.body


def test_a_store_stream_ends_when_its_store_is_deleted(server):
    """The stream hears `unsubscribed` (`deleted`), then ends: nothing more can come on it.
    Before, it stayed open with heartbeats until the client gave up."""
    port = server.port
    store = new_store(port, {"a": {"n": 1}})
    with CurlEvents(port, store_events(store)) as stream:
        assert_snapshot_event(stream.reader.next_event(), port, store)
        assert http_client_request(port, "DELETE", f"/api/stores/{store}").status == 200
        event = stream.reader.next_event()
        assert (event.event, event.json()) == ("unsubscribed", {"type": "unsubscribed", "store": store, "reason": "deleted"})
        stream.reader.wait_end(HEARTBEAT_WAIT)


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


def test_an_event_sources_own_reconnection_resumes_only_in_the_epoch_its_ids_name(server):
    """A raw `EventSource` cannot send `?epoch=`; its reconnection sends back the last `id:`. The
    ids are `<number>@<epoch>`, so a store deleted and made again (a new epoch) answers the
    reconnection with a reset snapshot. Before, `Last-Event-ID: 2` resumed in the new store as if
    it were the old, and the client kept the old models under the new store's changes."""
    port = server.port
    store = new_store(port, {"m": {"n": 1}})
    patch_model(port, store, "m", {"n": 2})
    with HttpEvents(port, store_events(store)) as stream:
        snapshot = stream.reader.next_event()
    assert snapshot.number == "2", snapshot
    assert http_client_request(port, "DELETE", f"/api/stores/{store}").status == 200
    assert http_client_request(port, "POST", "/api/stores", body=json.dumps({"name": store}).encode(),
                               headers={"Content-Type": "application/json"}).status == 201
    commit(port, store, [{"op": "put", "model": "x", "value": {"n": 1}}])
    patch_model(port, store, "x", {"n": 2})
    patch_model(port, store, "x", {"n": 3})
    with HttpEvents(port, store_events(store), headers={"Last-Event-ID": snapshot.id}) as stream:
        event = stream.reader.next_event()
        assert event.event == "snapshot" and event.json()["reset"] is True, event
        assert event.json()["models"] == {"x": {"n": 3}} and event.epoch != snapshot.epoch, event
    # In the same epoch the id resumes exactly, as a number alone does.
    with HttpEvents(port, store_events(store), headers={"Last-Event-ID": f"{event.number}@{event.epoch}"}) as stream:
        live = patch_model(port, store, "x", {"n": 4})
        assert_changes_event(first_event(stream.reader, {"type": "subscribed", "store": store, "version": 3}), store, live)


def test_a_topic_streams_subscribed_event_is_numbered_so_a_reconnection_misses_nothing(server):
    """Before any message, a reconnecting `EventSource` had no id to send back, and what was
    published while it was away never reached it."""
    port, topic = server.port, unique("sse-first")
    publish(port, topic, {"n": 1})
    with HttpEvents(port, topic_events(topic)) as stream:
        subscribed = stream.reader.next_event()
    assert subscribed.event == "subscribed" and subscribed.number == "1", subscribed
    publish(port, topic, {"n": 2})
    with HttpEvents(port, topic_events(topic), headers={"Last-Event-ID": subscribed.id}) as stream:
        assert_message_event(first_event(stream.reader, {"type": "subscribed", "topic": topic, "seq": 2}),
                             topic, 2, {"n": 2})


def test_a_resumed_topic_streams_ids_never_pass_what_it_has_not_sent(start_server):
    """A resume's `subscribed` is numbered where the resume began, and a `gap` by its last lost
    message, so an `EventSource` that reconnects after either (with its last `id:`) is sent what it
    still lacks. Before, `subscribed` carried the topic's newest number: a reconnection right after
    it skipped the messages in between, with no `gap`."""
    server = start_server("--history", "5")
    port, topic = server.port, unique("sse-ids")
    for n in range(1, 11):
        publish(port, topic, {"n": n})
    with HttpEvents(port, topic_events(topic), headers={"Last-Event-ID": "7"}) as stream:
        subscribed = stream.reader.next_event()
    assert subscribed.event == "subscribed" and subscribed.json()["seq"] == 10 and subscribed.number == "7", subscribed
    with HttpEvents(port, topic_events(topic), headers={"Last-Event-ID": subscribed.id}) as stream:
        assert_message_event(first_event(stream.reader, {"type": "subscribed", "topic": topic, "seq": 10}), topic, 8, {"n": 8})
    with HttpEvents(port, topic_events(topic), headers={"Last-Event-ID": "2"}) as stream:
        gap = first_event(stream.reader, {"type": "subscribed", "topic": topic, "seq": 10})
    assert gap.event == "gap" and gap.json()["to"] == 5 and gap.number == "5", gap
    with HttpEvents(port, topic_events(topic), headers={"Last-Event-ID": gap.id}) as stream:
        assert_message_event(first_event(stream.reader, {"type": "subscribed", "topic": topic, "seq": 10}), topic, 6, {"n": 6})


@pytest.mark.parametrize("last", ["9007199254740992", "1@", "x@e", "+3", "-0", "3@" + "e" * 65, "@e", " @e"])
def test_a_resume_point_out_of_range_is_400(server, last):
    """The same bound as over WebSocket (`maxSince`, 2^53 - 1); digits only, no sign; an id's epoch
    must not be empty, nor over 64 bytes; an epoch needs its number (`@e` was a fresh stream)."""
    store = new_store(server.port, {"m": {"n": 1}})
    resp = http_client_request(server.port, "GET", store_events(store), headers={"Last-Event-ID": last})
    assert_json_error(resp, 400, "bad_request")


def test_the_query_form_of_a_resume_point_is_percent_decoded_and_its_epoch_bounded(server):
    """`?since=%32` is 2, as any query value is decoded; `?epoch=` is held to 64 bytes, as the epoch
    of `Last-Event-ID` is."""
    port, topic = server.port, unique("sse-query")
    for n in range(1, 4):
        publish(port, topic, {"n": n})
    with HttpEvents(port, topic_events(topic) + "?since=%32") as stream:
        assert_message_event(first_event(stream.reader, {"type": "subscribed", "topic": topic, "seq": 3}), topic, 3, {"n": 3})
    for query in ("?since=1&epoch=" + "e" * 65, "?since=1&epoch=", "?since="):  # empty: as over WebSocket
        assert_json_error(http_client_request(port, "GET", topic_events(topic) + query), 400, "bad_request")


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
        # A heartbeat event may come first, if the publish took longer than the interval.
        event = stream.reader.next_event()
        while event.event == "heartbeat":
            event = stream.reader.next_event()
        assert_message_event(event, topic, seq, "after beats")


def test_heartbeat_events_are_heard_from_the_start(start_server):
    """`?heartbeat=event`: a `heartbeat` event a page's EventSource hears (it hides comments), first
    as soon as the stream opens, naming the interval, then after every quiet interval; no comment."""
    server = start_server("--sse-heartbeat", str(HEARTBEAT))
    port, topic = server.port, unique("beat")
    beat = {"type": "heartbeat", "intervalMs": int(HEARTBEAT * 1000)}
    with HttpEvents(port, topic_events(topic) + "?heartbeat=event") as stream:
        assert_stream_head(stream.response)
        first = stream.reader.next_item()
        assert isinstance(first, SSEEvent) and (first.event, first.id, first.json()) == ("heartbeat", None, beat), first
        deadline = time.monotonic() + HEARTBEAT_WAIT
        names = []
        while names.count("heartbeat") < 2:
            item = stream.reader.next_item(max(0.0, deadline - time.monotonic()))
            assert isinstance(item, SSEEvent), f"a comment or the end, not an event: {item!r}"
            names.append(item.event)
            if item.event == "heartbeat":
                assert item.id is None and item.json() == beat, item
        assert names[0] == "subscribed" and set(names[1:]) == {"heartbeat"}, names
        seq = publish(port, topic, "after beats")
        # A heartbeat event may come first, if the publish took longer than the interval.
        event = stream.reader.next_event()
        while event.event == "heartbeat":
            event = stream.reader.next_event()
        assert_message_event(event, topic, seq, "after beats")
    store = new_store(port, {"m": {"n": 0}})
    with HttpEvents(port, store_events(store) + "?heartbeat=event&paths=n") as stream:
        assert stream.reader.next_event().event == "heartbeat"
        assert_snapshot_event(stream.reader.next_event(), port, store, filter={"paths": ["n"]})
    for value in ("events", "1", ""):
        resp = http_client_request(port, "GET", topic_events(topic) + f"?heartbeat={value}")
        assert_json_error(resp, 400, "bad_request")
        assert "heartbeat must be comment or event" in resp.json()["detail"]


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


def test_a_stream_refused_after_its_checks_still_tells_an_allowed_origin_why(start_server, tmp_path):
    """A refusal the stream decides itself (past `--max-topics`; the connect hook's answer) names
    the allowed origin, as every other error does, so a cross-origin page can read it. Before, it
    had no `Access-Control-Allow-Origin`, and the page saw only a failed request."""
    from hooks import Backend
    origin = "http://app.example"
    backend = Backend(tmp_path / "backend")
    try:
        server = start_server("--max-topics", "1", "--allowed-origin", origin, *backend.hook_args("connect"))
        headers = {"Origin": origin, "Cookie": "session=alice"}
        publish(server.port, "first", {"n": 1})
        full = http_client_request(server.port, "GET", topic_events("second"), headers=headers)
        assert_json_error(full, 503, "over_capacity")
        refused = http_client_request(server.port, "GET", topic_events("first"), headers={**headers, "Cookie": "session=mallory"})
        assert_json_error(refused, 403, "forbidden")
        for resp in (full, refused):
            assert resp.header("Access-Control-Allow-Origin") == origin and resp.header("Vary") == "Origin", resp.headers
    finally:
        backend.stop()
