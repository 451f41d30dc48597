"""Store subscription options over SSE (docs/PROTOCOL.md, "Subscription options: models, paths,
rate"): query parameters give a projected snapshot and filtered changes, maxRate with repeated
parameters folds a burst, and a bad option is a 400 naming the field.

Every stream keeps a local copy (`View`, in projection.py) that checks and applies each event by
the protocol's rule for a projected copy.
"""

from urllib.parse import quote
import contextlib
import time

import pytest

from conftest import assert_json_error, http_client_request
from projection import View, by_place, change, commit, delete, projected_store, put, set_at, shaped
from sse_client import CurlEvents, HttpEvents, assert_stream_head
from test_subscription_max_rate import BURST_BUDGET, BURST_RATE, BURST_SPACING, LATE_SLACK
from wsclient import FRAME_TIMEOUT, connect, new_store, recv_text


# ---- SSE ---------------------------------------------------------------

def events_path(store: str, options: dict, repeat: bool = False) -> str:
    """The store's event stream with `options` as query parameters: lists comma-separated, or with
    `repeat` the parameter given once per item."""
    params = []
    for key in ("models", "paths"):
        if key in options:
            items = options[key]
            params += [(key, item) for item in items] if repeat else [(key, ",".join(items))]
    if "maxRate" in options:
        params.append(("maxRate", str(options["maxRate"])))
    if options.get("old"):
        params.append(("old", "true"))
    return f"/api/stores/{store}/events?" + "&".join(f"{k}={quote(v, safe='*,')}" for k, v in params)


def test_sse_options_give_a_projected_snapshot_and_filtered_changes(server):
    port = server.port
    store = new_store(port, {"a1": shaped("#a10000"), "a2": shaped("#a20000"), "solo": shaped("#500000"),
                             "b1": shaped("#b10000")}, prefix="sse")
    options = {"models": ["a*", "solo"], "paths": ["color", "style.border"], "old": True}
    sse_view, ws_view = View(store, options), View(store, options)
    with CurlEvents(port, events_path(store, options)) as stream, connect(port) as ws:
        assert_stream_head(stream.response)
        event = stream.reader.next_event()
        assert event.event == "snapshot", event
        sse_view.take_snapshot(event.json(), port)
        assert event.number == str(sse_view.version)
        assert set(sse_view.models) == {"a1", "a2", "solo"}
        ws_view.subscribe(ws, port)
        steps = [
            ([set_at("b1", "color", "#b10001"), set_at("a1", "label", "unlisted")], None),
            ([set_at("a1", "color", "#a10001")], [change("a1", "color", "updated", "#a10001", "#a10000")]),
            ([put("solo", {"color": "#500001", "label": "S"})],
             [change("solo", "style.border", "deleted", None, {"width": 1, "color": "#000000"}),
              change("solo", "color", "updated", "#500001", "#500000")]),
            ([put("a3", shaped("#a30000")), put("b2", shaped("#b20000"))],
             [change("a3", "", "created", {"color": "#a30000", "style": {"border": {"width": 1, "color": "#000000"}}},
                     None)]),
            ([delete("a2")],
             [change("a2", "", "deleted", None,
                     {"color": "#a20000", "style": {"border": {"width": 1, "color": "#000000"}}})]),
        ]
        for operations, expected in steps:
            version = commit(port, store, operations)
            if expected is None:
                continue
            event = stream.reader.next_event()
            assert (event.event, event.number) == ("changes", str(version)), f"expected version {version}: {event}"
            data = sse_view.accept(event.json())
            assert by_place(data["changes"]) == by_place(expected), data
            assert recv_text(ws) == event.data[0], "SSE and WebSocket carry the same JSON"
            assert projected_store(port, store, options) == (sse_view.version, sse_view.models)


def test_sse_max_rate_with_repeated_parameters_folds_a_burst(server):
    port = server.port
    store = new_store(port, {"a1": shaped("#a10000"), "a2": shaped("#a20000"), "b": shaped("#b00000")},
                      prefix="sse-rate")
    options = {"models": ["a1", "a2"], "paths": ["color"], "maxRate": BURST_RATE}
    view = View(store, options)
    with HttpEvents(port, events_path(store, options, repeat=True)) as stream:
        assert_stream_head(stream.response)
        event = stream.reader.next_event()
        assert event.event == "snapshot", event
        view.take_snapshot(event.json(), port)
        start = view.version
        first = commit(port, store, [set_at("a1", "color", "#a10001")])
        event = stream.reader.next_event()
        first_arrival = time.time()
        assert (event.event, event.number) == ("changes", str(first)), event
        data = view.accept(event.json())
        assert (data["from"], data["changes"]) == (start, [change("a1", "color", "updated", "#a10001")]), data
        burst = [commit(port, store, [set_at("a1", "color", "#a10002")]),
                 commit(port, store, [set_at("b", "color", "#b00001")]),
                 commit(port, store, [set_at("a2", "color", "#a20001"), set_at("a2", "label", "x")]),
                 commit(port, store, [set_at("a1", "color", "#a10003")])]
        assert time.time() - first_arrival < BURST_BUDGET, "the burst took too long to fall in one interval"
        event = stream.reader.next_event(1 / BURST_RATE + FRAME_TIMEOUT)
        arrival = time.time()
        assert (event.event, event.number) == ("changes", str(burst[-1])), event
        data = view.accept(event.json(), exact_from=True)
        assert by_place(data["changes"]) == [change("a1", "color", "updated", "#a10003"),
                                             change("a2", "color", "updated", "#a20001")], data
        assert arrival - first_arrival >= BURST_SPACING / BURST_RATE, "two events within 1 / maxRate"
        assert arrival - data["firstCommittedAt"] / 1e6 <= 1 / BURST_RATE + LATE_SLACK
        assert projected_store(port, store, options) == (view.version, view.models)


SSE_BAD_OPTIONS = {
    "models-empty": ("models=&paths=color", "models"),
    "models-empty-id": ("models=a,,b&paths=color", "models"),
    "paths-empty": ("models=a&paths=", "paths"),
    "paths-empty-segment": ("models=a&paths=a..b", "paths"),
    "maxRate-zero": ("models=a&paths=color&maxRate=0", "maxRate"),
    "maxRate-negative": ("models=a&paths=color&maxRate=-1", "maxRate"),
    "maxRate-word": ("models=a&paths=color&maxRate=fast", "maxRate"),
    "maxRate-over-1000": ("models=a&paths=color&maxRate=1001", "maxRate"),
}


@pytest.mark.parametrize("query, field", list(SSE_BAD_OPTIONS.values()), ids=list(SSE_BAD_OPTIONS))
def test_sse_bad_option_is_400_naming_the_field(server, query, field):
    port = server.port
    store = new_store(port, {"a": {"color": "#000000"}}, prefix="sse-bad")
    resp = http_client_request(port, "GET", f"/api/stores/{store}/events?{query}",
                               headers={"Accept": "text/event-stream"})
    assert_json_error(resp, 400, "bad_request")
    assert field in resp.json()["detail"], f"the detail does not name {field!r}: {resp.json()}"


def test_a_stream_whose_options_the_store_cannot_serve_is_answered_429(start_server):
    """A store serves at most 256 distinct sets of subscription options. With 256 in use, an
    event stream asking for another is answered `429` before its head, as a WebSocket subscribe
    is `too_many_subscriptions`. Before, it got `200` and an empty stream, which an EventSource
    reopens for good."""
    port = start_server().port
    store = new_store(port, {"m": {"n": 1}})
    with contextlib.ExitStack() as stack:
        # The unfiltered group is always there: 255 more fill the store.
        for rate in range(1, 257):
            ws = stack.enter_context(connect(port))
            ws.send(f'{{"type":"subscribe","store":"{store}","maxRate":{rate}}}')
            frame = recv_text(ws)
            expected = '"snapshot"' if rate < 256 else '"too_many_subscriptions"'
            assert expected in frame, (rate, frame)
        resp = http_client_request(port, "GET", events_path(store, {"maxRate": 998}), {"Accept": "text/event-stream"})
        assert_json_error(resp, 429, "too_many_requests")
        assert b"256 distinct sets" in resp.body
