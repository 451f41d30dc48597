"""Store subscription options (docs/PROTOCOL.md, "Subscription options: models, paths, rate"):
model and path filters with projected snapshots, ancestor changes cut down to the listed paths,
old values, change sets that leave nothing, filtered resumes, one encoding for the subscribers
that share options, and the errors for bad values. maxRate is in test_subscription_max_rate.py,
the same options over SSE in test_subscription_options_sse.py.

Every subscriber keeps a local copy (`View`, in projection.py): the projected snapshot, then each
frame checked and applied by the protocol's rule for a projected copy, so that its models can be
compared with the store's own state, projected here the same way.
"""

import json
import time

import pytest

from projection import (
    STREAM_TIMEOUT,
    View,
    assert_error,
    change,
    commit,
    delete,
    patch,
    projected_store,
    put,
    run_steps,
    set_at,
    shaped,
)
from wsclient import EPOCH, connect, new_store, recv_json, recv_text, send_json, unique


# ---- Models and paths --------------------------------------------------

def test_models_filter_follows_listed_ids_and_prefixes(server):
    port = server.port
    ids = ["solo", "solo2", "tile-1", "tile-12", "tile-1-b", "tile-2", "xtile-1"]
    store = new_store(port, {m: {"n": 0, "name": m} for m in ids}, prefix="models")
    view = View(store, {"models": ["solo", "tile-1*"]})
    with connect(port) as ws:
        view.subscribe(ws, port)
        assert set(view.models) == {"solo", "tile-1", "tile-12", "tile-1-b"}
        run_steps(port, store, ws, view, [
            ([set_at("solo2", "n", 1), set_at("tile-2", "n", 1), set_at("xtile-1", "n", 1)], None),
            ([set_at("tile-12", "n", 2), set_at("tile-2", "n", 2)], [change("tile-12", "n", "updated", 2)]),
            ([put("tile-3", {"n": 3})], None),
            ([put("tile-1new", {"n": 3})], [change("tile-1new", "", "created", {"n": 3})]),
            ([delete("solo"), delete("solo2")], [change("solo", "", "deleted", None)]),
            ([patch("tile-1", {"name": None, "extra": {"k": 1}})],
             [change("tile-1", "name", "deleted", None), change("tile-1", "extra", "created", {"k": 1})]),
            ([put("tile-1-b", {"n": 9})], [change("tile-1-b", "", "updated", {"n": 9})]),
            ([put("solo", {"back": True})], [change("solo", "", "created", {"back": True})]),
        ])


def test_paths_filter_cuts_ancestor_changes_down_to_the_listed_paths(server):
    port = server.port
    store = new_store(port, {"a": shaped("#aa0000"), "b": shaped("#bb0000"), "c": shaped("#cc0000")},
                      prefix="paths")
    view = View(store, {"models": ["a", "b", "d"], "paths": ["color", "style.border"]})
    border = {"width": 1, "color": "#000000"}
    with connect(port) as ws:
        view.subscribe(ws, port)
        assert view.models == {"a": {"color": "#aa0000", "style": {"border": border}},
                               "b": {"color": "#bb0000", "style": {"border": border}}}
        run_steps(port, store, ws, view, [
            # Unlisted paths of a followed model, and a listed path of an unfollowed one.
            ([set_at("a", "label", "x"), set_at("a", "style.shadow", "s"), set_at("c", "color", "#c1")], None),
            ([set_at("a", "color", "#a1")], [change("a", "color", "updated", "#a1")]),
            ([set_at("a", "style.border.width", 2)], [change("a", "style.border.width", "updated", 2)]),
            # A merge patch touching listed and unlisted paths: only the listed one comes.
            ([patch("a", {"label": "y", "style": {"border": {"width": 3}, "shadow": "t"}})],
             [change("a", "style.border.width", "updated", 3)]),
            # The whole model put: cut down to each listed path, the unchanged border not sent.
            ([put("a", {"color": "#a2", "label": "z", "style": {"border": {"width": 3, "color": "#000000"},
                                                                "shadow": "u"}})],
             [change("a", "color", "updated", "#a2")]),
            # A merge patch replacing the parent object of a listed path with a number.
            ([patch("a", {"style": 5})], [change("a", "style.border", "deleted", None)]),
            # ... and that number replaced by an object again.
            ([patch("a", {"style": {"border": {"width": 4}}})],
             [change("a", "style.border", "created", {"width": 4})]),
            # The parent replaced with the listed part unchanged: nothing to send.
            ([set_at("a", "style", {"border": {"width": 4}, "shadow": "v"})], None),
            # A put that takes both listed paths away leaves the model, empty.
            ([put("b", {"label": "only"})],
             [change("b", "color", "deleted", None), change("b", "style.border", "deleted", None)]),
            ([put("d", shaped("#dd0000", label="D", shadow="deep"))],
             [change("d", "", "created", {"color": "#dd0000", "style": {"border": border}})]),
            ([delete("d")], [change("d", "", "deleted", None)]),
            ([put("d", {"label": "bare"})], [change("d", "", "created", {})]),
            ([put("e", {"color": "#ee0000"})], None),
            # A set that creates the objects on its way is reported where it creates them (here
            # `style`), and cut down from there to the listed path.
            ([set_at("b", "style.border.width", 7)], [change("b", "style.border", "created", {"width": 7})]),
        ])
        assert view.models == {"a": {"color": "#a2", "style": {"border": {"width": 4}}},
                               "b": {"style": {"border": {"width": 7}}}, "d": {}}


def test_change_set_following_nothing_sends_no_frame(server):
    port = server.port
    store = new_store(port, {"m": shaped("#000001"), "other": shaped("#000002")}, prefix="quiet")
    view = View(store, {"models": ["m"], "paths": ["color"]})
    with connect(port) as ws:
        view.subscribe(ws, port)
        quiet = [
            commit(port, store, [set_at("other", "color", "#0000f1")]),            # another model
            commit(port, store, [set_at("m", "label", "unlisted")]),               # another path
            commit(port, store, [patch("m", {"style": None})]),                    # an unlisted removal
            commit(port, store, [put("m", {"color": "#000001", "label": "new"})]),  # listed part unchanged
            commit(port, store, [put("fresh", {"color": "#0000f2"})]),             # an unfollowed model created
        ]
        followed = commit(port, store, [set_at("m", "color", "#0000f3")])
        assert quiet == list(range(view.version + 1, followed))
        frame = view.read(ws)
        assert frame["version"] == followed, f"versions {quiet} follow nothing, yet got {frame}"
        assert frame["changes"] == [change("m", "color", "updated", "#0000f3")]
        assert projected_store(port, store, view.options) == (view.version, view.models)


def test_old_carries_the_previous_projected_values(server):
    port = server.port
    store = new_store(port, {"a": shaped("#aa0000"), "x": shaped("#ff0000")}, prefix="old")
    view = View(store, {"models": ["a", "d"], "paths": ["color", "style.border"], "old": True})
    with connect(port) as ws:
        view.subscribe(ws, port)
        run_steps(port, store, ws, view, [
            ([set_at("x", "color", "#ff0001")], None),
            ([set_at("a", "color", "#a1")], [change("a", "color", "updated", "#a1", "#aa0000")]),
            ([set_at("a", "style.border.style", "dashed")],
             [change("a", "style.border.style", "created", "dashed", None)]),
            ([patch("a", {"style": {"border": {"width": None}}})],
             [change("a", "style.border.width", "deleted", None, 1)]),
            ([put("a", {"color": "#a2", "label": "p", "style": {"border": {"color": "#000000", "style": "dashed"}}})],
             [change("a", "color", "updated", "#a2", "#a1")]),
            ([put("d", shaped("#dd0000", label="D"))],
             [change("d", "", "created", {"color": "#dd0000", "style": {"border": {"width": 1, "color": "#000000"}}},
                     None)]),
            # The old value of a deleted model is projected too: nothing unlisted is sent.
            ([delete("d")],
             [change("d", "", "deleted", None,
                     {"color": "#dd0000", "style": {"border": {"width": 1, "color": "#000000"}}})]),
            ([patch("a", {"style": 5})],
             [change("a", "style.border", "deleted", None, {"color": "#000000", "style": "dashed"})]),
        ])


def test_reset_snapshot_is_projected(start_server):
    server = start_server("--history", "5")
    port = server.port
    store = new_store(port, {"a": shaped("#aa0000"), "b": shaped("#bb0000")}, prefix="reset")
    view = View(store, {"models": ["a"], "paths": ["style.border"]})
    with connect(port) as ws:
        view.subscribe(ws, port)
    last = view.version
    for n in range(10):
        commit(port, store, [set_at("a", "style.border.width", n), set_at("b", "color", f"#b{n}")])
    commit(port, store, [put("a", {"style": {"border": {"width": 99}, "shadow": "x"}, "label": "new"})])
    with connect(port) as ws:
        send_json(ws, view.message(since=last, epoch=view.epoch))
        frame = recv_json(ws)
        view.take_snapshot(frame, port, reset=True)
        assert frame["version"] == last + 11 and frame["models"] == {"a": {"style": {"border": {"width": 99}}}}
        followed = commit(port, store, [set_at("a", "style.border.width", 100)])
        assert view.read(ws)["version"] == followed
        assert projected_store(port, store, view.options) == (view.version, view.models)


# ---- Bad values --------------------------------------------------------

BAD_OPTIONS = {
    "models-empty-list": ({"models": [], "paths": ["color"]}, "models"),
    "models-empty-id": ({"models": ["m", ""], "paths": ["color"]}, "models"),
    "models-not-a-list": ({"models": "m", "paths": ["color"]}, "models"),
    "paths-empty-list": ({"models": ["m"], "paths": []}, "paths"),
    "paths-empty-segment": ({"models": ["m"], "paths": ["a..b"]}, "paths"),
    "paths-trailing-dot": ({"models": ["m"], "paths": ["color", "style."]}, "paths"),
    "maxRate-zero": ({"models": ["m"], "paths": ["color"], "maxRate": 0}, "maxRate"),
    "maxRate-negative": ({"models": ["m"], "paths": ["color"], "maxRate": -1}, "maxRate"),
    "maxRate-string": ({"models": ["m"], "paths": ["color"], "maxRate": "5"}, "maxRate"),
    "maxRate-bool": ({"models": ["m"], "paths": ["color"], "maxRate": True}, "maxRate"),
    "maxRate-over-1000": ({"models": ["m"], "paths": ["color"], "maxRate": 1001}, "maxRate"),
}


@pytest.mark.parametrize("options, field", list(BAD_OPTIONS.values()), ids=list(BAD_OPTIONS))
def test_bad_option_is_bad_message_naming_the_field(server, options, field):
    port = server.port
    store = new_store(port, {"m": {"color": "#000000", "label": "M"}}, prefix="bad")
    with connect(port) as ws:
        send_json(ws, {"type": "subscribe", "store": store, **options})
        assert_error(recv_json(ws), "bad_message", field)
        # Nothing was subscribed, and the connection still serves.
        view = View(store, {"models": ["m"], "paths": ["color"]})
        view.subscribe(ws, port)
        followed = commit(port, store, [set_at("m", "color", "#000001")])
        assert view.read(ws)["version"] == followed


TOPIC_OPTIONS = {
    "models": {"models": ["m"]},
    "paths": {"paths": ["color"]},
    "maxRate": {"maxRate": 5},
    "old": {"old": True},
}


@pytest.mark.parametrize("field", list(TOPIC_OPTIONS))
def test_options_on_a_topic_subscription_are_refused(server, field):
    topic = unique("opts")
    with connect(server.port) as ws:
        send_json(ws, {"type": "subscribe", "topic": topic, **TOPIC_OPTIONS[field]})
        assert_error(recv_json(ws), "bad_message", field)
        send_json(ws, {"type": "subscribe", "topic": topic})
        assert recv_json(ws) == {"type": "subscribed", "topic": topic, "seq": 0, "epoch": EPOCH, "resumed": False}


# ---- Resume ------------------------------------------------------------

@pytest.mark.parametrize("max_rate", [None, 20], ids=["each-change-set", "max-rate"])
def test_filtered_subscriber_resumes_exactly(server, max_rate):
    port = server.port
    store = new_store(port, {m: shaped(f"#{m}00") for m in ("a1", "a2", "b1")}, prefix="resume")
    options = {"models": ["a*"], "paths": ["color", "style.border"]}
    if max_rate:
        options["maxRate"] = max_rate
    view = View(store, options)
    with connect(port) as ws:
        view.subscribe(ws, port)
        view.read_until(ws, commit(port, store, [set_at("a1", "color", "#a10001")]))
    last = view.version
    # Committed while the subscriber is away; True where the change set follows something.
    missed = [
        ([set_at("b1", "color", "#b10001")], False),
        ([set_at("a1", "color", "#a10002")], True),
        ([set_at("a2", "label", "unlisted")], False),
        ([set_at("a2", "style.border.width", 5)], True),
        ([put("a3", shaped("#a30000"))], True),
        ([patch("a1", {"style": 7})], True),
        ([delete("a2")], True),
        ([put("a2", {"label": "back"})], True),
        ([set_at("b1", "label", "unlisted")], False),
    ]
    versions = [(commit(port, store, operations), follows) for operations, follows in missed]
    followed = [v for v, follows in versions if follows]
    current, expected = projected_store(port, store, options)
    assert current == versions[-1][0]
    with connect(port) as ws:
        view.resume(ws)
        if max_rate is None:
            frames = view.read_until(ws, followed[-1])
            assert [f["version"] for f in frames] == followed, "one frame per followed change set"
        else:
            frame = view.read(ws)  # the whole replay, coalesced
            assert frame["from"] == last and frame["version"] in (followed[-1], current), frame
        assert view.models == expected
        assert view.models == {"a1": {"color": "#a10002"}, "a2": {},
                               "a3": {"color": "#a30000", "style": {"border": {"width": 1, "color": "#000000"}}}}
        live = commit(port, store, [set_at("a3", "style.border.width", 2)])
        assert view.read(ws)["version"] == live
        assert projected_store(port, store, options) == (view.version, view.models)


# ---- One encoding for the same options ---------------------------------

@pytest.mark.parametrize("max_rate", [None, 10], ids=["each-change-set", "max-rate"])
def test_same_options_get_byte_identical_frames(server, max_rate):
    port = server.port
    store = new_store(port, {m: shaped(f"#{m}00") for m in ("m1", "m2", "x1")}, prefix="same")
    options = {"models": ["m*"], "paths": ["color", "style.border"], "old": True}
    if max_rate:
        options["maxRate"] = max_rate
    view = View(store, options)
    with connect(port) as first, connect(port) as second:
        snapshot = view.subscribe(first, port)
        # The same options with the members in another order.
        send_json(second, {**{k: options[k] for k in reversed(list(options))}, "store": store, "type": "subscribe"})
        assert recv_json(second) == snapshot
        for n in range(12):
            model = ("m1", "x1", "m2")[n % 3]
            commit(port, store, [set_at(model, "color", f"#{n:06x}")] if n % 4 else
                   [set_at(model, "style.border.width", n), set_at(model, "label", f"L{n}")])
        last = commit(port, store, [set_at("m1", "color", "#ffffff")])
        texts = []
        for ws in (first, second):
            received, version, deadline = [], view.version, time.monotonic() + STREAM_TIMEOUT
            while version < last:
                received.append(recv_text(ws, max(0.0, deadline - time.monotonic())))
                version = json.loads(received[-1])["version"]
            texts.append(received)
        assert texts[0] == texts[1], "subscribers with the same options get the same encoded frames"
        for text in texts[0]:
            view.accept(json.loads(text), exact_from=False)
        assert view.version == last
        assert projected_store(port, store, options) == (view.version, view.models)
