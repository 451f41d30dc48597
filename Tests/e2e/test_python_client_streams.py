"""The Python client's live streams (clients/python, `AsyncGateway.subscribe_store` and
`subscribe_topic`) against the real gateway: snapshots and change sets kept applied to a local
copy, options checked before sending, resumes after a dropped connection and after a durable
gateway restarted on the same port (no reset, exactly the missed change sets), topic gaps and
resets, and tokens. Every wait is bounded by asyncio.wait_for; nothing sleeps to synchronise.
"""

from __future__ import annotations

import asyncio
from typing import TypeVar

import pytest

from python_client_support import FAST, SECRET, events, run, step, unique, until, url

from receptionist import (  # noqa: E402
    AsyncGateway, Backoff, Forbidden, NotFound, StoreEvent, StreamOptions, TopicEvent, Unauthorized, Unavailable,
    mint_token,
)


API_KEY = "python-client-key"
DRAIN = ("--drain-timeout", "2")
T = TypeVar("T")


def test_subscribe_store_yields_the_snapshot_and_changes_and_keeps_the_state(server):
    async def scenario() -> None:
        store = unique("py-live")
        async with AsyncGateway(url(server), stream_options=FAST) as gateway:
            await gateway.create_store(store)
            await gateway.commit(store, [{"op": "put", "model": "a", "value": {"color": "#111111", "style": {"w": 1}}},
                                         {"op": "put", "model": "b", "value": {"color": "#222222"}}])
            whole = gateway.subscribe_store(store)
            narrow = gateway.subscribe_store(store, models=["a"], paths=["style"])
            first = await step(whole)
            assert isinstance(first, StoreEvent)
            assert (first.kind, first.store, first.version) == ("snapshot", store, 1)
            assert first.epoch == whole.epoch == (await gateway.snapshot(store))["epoch"]
            assert whole.state == {"a": {"color": "#111111", "style": {"w": 1}}, "b": {"color": "#222222"}}
            assert (await step(narrow)).kind == "snapshot"
            assert narrow.state == {"a": {"style": {"w": 1}}}

            await gateway.patch_model(store, "a", {"style": {"w": 2}, "label": "A"})
            await gateway.commit(store, [{"op": "set", "model": "b", "path": "style.border.width", "value": 3},
                                         {"op": "put", "model": "c", "value": {"n": 1}}])
            await gateway.delete_model(store, "b")
            await gateway.patch_model(store, "a", {"style": None})  # a merge patch's null removes
            seen = await events(whole, 4)
            assert [(e.kind, e.version) for e in seen] == [("changes", v) for v in (2, 3, 4, 5)]
            assert seen[2].changes == [{"model": "b", "path": "", "kind": "deleted", "value": None}]
            assert whole.version == 5
            assert whole.state == (await gateway.snapshot(store))["models"]
            # The narrowed copy heard only of model a's style: set, then removed.
            assert [(e.kind, e.version) for e in await events(narrow, 2)] == [("changes", 2), ("changes", 5)]
            assert narrow.state == {"a": {}}
            await narrow.close()

            await gateway.delete_store(store)
            with pytest.raises(StopAsyncIteration):
                await step(whole)
            assert whole.ended == "deleted"

    run(scenario)


def test_subscription_options_are_checked_before_anything_is_sent(server):
    async def scenario() -> None:
        async with AsyncGateway(url(server)) as gateway:
            for bad in (0, 0.001, 1000.5, float("nan"), True, "4"):
                with pytest.raises(ValueError):
                    gateway.subscribe_store("tiles", max_rate=bad)  # type: ignore[arg-type]
            for options in ({"models": []}, {"paths": []}, {"models": "tile-1"}, {"models": [""]},
                            {"paths": ["style..border"]}, {"since": -1}, {"epoch": "e"}):
                with pytest.raises(ValueError):
                    gateway.subscribe_store("tiles", **options)
            for topic in ("", "has space", "x" * 65):
                with pytest.raises(ValueError):
                    gateway.subscribe_topic(topic)
            assert gateway.subscribe_store("tiles", models=["tile-1*"], paths=["color"], max_rate=0.01).max_rate == 0.01
            assert gateway.subscribe_store("tiles", max_rate=1000).max_rate == 1000
            with pytest.raises(NotFound):
                await step(gateway.subscribe_store(unique("py-absent")))

    run(scenario)


def test_store_resumes_after_a_dropped_connection(server):
    async def scenario() -> None:
        store = unique("py-drop")
        async with AsyncGateway(url(server), stream_options=FAST) as gateway:
            await gateway.create_store(store)
            await gateway.put_model(store, "a", {"color": "#000000", "n": 0})
            await gateway.put_model(store, "z", {"color": "#ffffff"})
            async with gateway.subscribe_store(store, models=["a"], paths=["color"]) as tiles:
                assert (await step(tiles)).kind == "snapshot"
                epoch = tiles.epoch
                tiles._drop_for_test()
                await gateway.patch_model(store, "a", {"color": "#aa0000", "n": 1})
                await gateway.patch_model(store, "z", {"color": "#000001"})  # filtered out
                await gateway.patch_model(store, "a", {"color": "#bb0000"})
                missed = await events(tiles, 2)
                assert [(e.kind, e.version) for e in missed] == [("changes", 3), ("changes", 5)]
                assert (tiles.reconnects, tiles.resumes, tiles.resets, tiles.epoch) == (1, 1, 0, epoch)
                assert tiles.state == {"a": {"color": "#bb0000"}}

    run(scenario)


def test_store_resumes_across_a_durable_gateway_restart_on_the_same_port(start_server, tmp_path):
    data = str(tmp_path / "data")
    first = start_server("--data-dir", data, *DRAIN)
    port = first.port
    store = unique("py-durable")

    async def scenario() -> None:
        async with AsyncGateway(url(first), stream_options=FAST) as gateway:
            await gateway.create_store(store)
            await gateway.put_model(store, "a", {"n": 1})
            tiles = gateway.subscribe_store(store)
            snapshot = await step(tiles)
            assert (snapshot.kind, snapshot.version) == ("snapshot", 1)
            await gateway.put_model(store, "b", {"n": 2})
            assert [(e.kind, e.version) for e in await events(tiles, 1)] == [("changes", 2)]
            before = (tiles.epoch, tiles.version)

            # The gateway drains and stops while the subscription is not reading; a new one comes
            # up on the same port from the same data directory, and takes two change sets.
            await asyncio.to_thread(first.stop)
            assert first.proc.returncode == 0
            second = await asyncio.to_thread(start_server, "--data-dir", data, *DRAIN,
                                             env={"RECEPTIONIST_PORT": str(port)})
            assert second.port == port
            async with AsyncGateway(url(second)) as writer:
                restored = await writer.snapshot(store)
                assert (restored["epoch"], restored["version"]) == before
                await writer.patch_model(store, "a", {"n": 10})
                await writer.commit(store, [{"op": "delete", "model": "b"}, {"op": "put", "model": "c", "value": {}}])
                missed = await events(tiles, 2)
                assert [(e.kind, e.version, e.epoch) for e in missed] == [
                    ("changes", 3, before[0]), ("changes", 4, before[0])]
                assert (tiles.reconnects, tiles.resumes, tiles.resets) == (1, 1, 0)
                assert tiles.state == (await writer.snapshot(store))["models"] == {"a": {"n": 10}, "c": {}}
                await writer.put_model(store, "d", {"live": True})
                assert (await step(tiles)).version == 5
                await tiles.close()

    run(scenario, timeout=60)


def test_subscribe_topic_delivers_and_resumes(server):
    async def scenario() -> None:
        topic = unique("py-topic")
        async with AsyncGateway(url(server), stream_options=FAST) as gateway:
            assert await gateway.publish(topic, "before") == 1
            news = gateway.subscribe_topic(topic)
            pending = asyncio.ensure_future(step(news))
            await until(lambda: news.seq is not None, "the topic subscription was never answered")
            assert (news.seq, news.epoch is not None) == (1, True)
            await gateway.publish(topic, {"n": 2})
            message = await pending
            assert isinstance(message, TopicEvent)
            assert (message.kind, message.seq, message.data, message.epoch) == ("message", 2, {"n": 2}, news.epoch)
            assert isinstance(message.published_at, int)

            news._drop_for_test()
            await gateway.publish_batch([{"topic": topic, "data": 3}, {"topic": topic, "data": 4}])
            assert [(e.kind, e.seq, e.data) for e in await events(news, 2)] == [("message", 3, 3), ("message", 4, 4)]
            assert (news.reconnects, news.resumes, news.resets) == (1, 1, 0)
            await gateway.publish(topic, 5)
            assert (await step(news)).seq == 5
            await news.close()

            # Resuming from an earlier number replays what is kept, in order.
            again = gateway.subscribe_topic(topic, since=3, epoch=news.epoch)
            assert [e.seq for e in await events(again, 2)] == [4, 5]

    run(scenario)


def test_topic_gap_and_reset(start_server):
    gateway_process = start_server("--history", "3")

    async def scenario() -> None:
        topic = unique("py-gappy")
        async with AsyncGateway(url(gateway_process), stream_options=FAST) as gateway:
            for n in range(1, 7):
                await gateway.publish(topic, n)
            epoch = (await gateway.messages(topic, after=3))["epoch"]
            behind = gateway.subscribe_topic(topic, since=1, epoch=epoch)
            gap, *kept = await events(behind, 4)
            assert (gap.kind, gap.gap_from, gap.gap_to) == ("gap", 2, 3)
            assert [(e.kind, e.seq, e.data) for e in kept] == [("message", s, s) for s in (4, 5, 6)]
            # A resume into another epoch: a reset, then the new epoch from its start (what its
            # history of 3 holds, a gap for the rest), not only what comes after the reset.
            elsewhere = gateway.subscribe_topic(topic, since=2, epoch="0123456789abcdef")
            reset = await step(elsewhere)
            assert (reset.kind, reset.seq, reset.previous, reset.epoch) == ("reset", 6, 2, epoch)
            gap, *kept = await events(elsewhere, 4)
            assert (gap.kind, gap.gap_from, gap.gap_to) == ("gap", 1, 3)
            assert [(e.kind, e.seq, e.data) for e in kept] == [("message", s, s) for s in (4, 5, 6)]
            await gateway.publish(topic, 7)
            assert (await step(elsewhere)).seq == 7
            assert (elsewhere.resets, elsewhere.epoch) == (1, epoch)

    run(scenario)


def test_tokens_minted_here_open_the_streams_they_name(start_server):
    gateway_process = start_server("--api-key", API_KEY, "--token-secret", SECRET)
    store, topic = unique("py-tok"), unique("py-tok")

    async def scenario() -> None:
        async with AsyncGateway(url(gateway_process), api_key=API_KEY) as admin:
            await admin.create_store(store)
            await admin.put_model(store, "a", {"n": 1})
        token = mint_token(SECRET, "alice", stores=[store], topics=[topic], expires_in=300)
        async with AsyncGateway(url(gateway_process), token=token, stream_options=FAST) as gateway:
            tiles = gateway.subscribe_store(store)
            assert (await step(tiles)).kind == "snapshot" and tiles.state == {"a": {"n": 1}}
            news = gateway.subscribe_topic(topic)
            pending = asyncio.ensure_future(step(news))
            await until(lambda: news.seq is not None, "the token's topic subscription was never answered")
            async with AsyncGateway(url(gateway_process), api_key=API_KEY) as admin:
                await admin.publish(topic, "hello")
                await admin.put_model(store, "a", {"n": 2})
            assert (await pending).data == "hello"
            assert (await step(tiles)).version == 2
            with pytest.raises(Forbidden) as scope:
                await step(gateway.subscribe_topic(unique("py-other")))
            assert scope.value.code == "forbidden"
        refused = {
            "no token": None,
            "another secret": mint_token("another-secret-of-thirty-two-bytes-at-least", "eve", stores=["*"]),
        }
        for why, bad in refused.items():
            async with AsyncGateway(url(gateway_process), token=bad) as gateway:
                with pytest.raises(Unauthorized, match="unauthorized|token_invalid"):
                    await step(gateway.subscribe_store(store))
        async with AsyncGateway(url(gateway_process), token=mint_token(SECRET, "bob", topics=[topic])) as gateway:
            with pytest.raises(Forbidden):
                await step(gateway.subscribe_store(store))

    run(scenario)


def test_a_new_gateway_on_the_same_port_is_retried_for_and_resets_the_subscriptions(start_server):
    """A memory gateway restarted: the topic subscription retries (with backoff) while nothing
    listens, then resumes into the new epoch with a reset; the store's comes back as a reset
    snapshot once the store exists again."""
    first = start_server(*DRAIN)
    port = first.port
    store, topic = unique("py-again"), unique("py-again")

    async def scenario() -> None:
        async with AsyncGateway(url(first), stream_options=FAST) as gateway:
            await gateway.create_store(store)
            await gateway.put_model(store, "old", {"n": 1})
            await gateway.publish_batch([{"topic": topic, "data": 1}, {"topic": topic, "data": 2}])
            tiles = gateway.subscribe_store(store)
            assert (await step(tiles)).kind == "snapshot"
            news = gateway.subscribe_topic(topic, since=0)
            assert [e.seq for e in await events(news, 2)] == [1, 2]
            old_epochs = (tiles.epoch, news.epoch)

            await asyncio.to_thread(first.stop)
            pending = asyncio.ensure_future(step(news))
            await until(lambda: news.failed_attempts >= 2, "the subscription never retried while the gateway was down")
            second = await asyncio.to_thread(start_server, *DRAIN, env={"RECEPTIONIST_PORT": str(port)})
            reset = await pending
            assert (reset.kind, reset.seq, reset.previous) == ("reset", 0, 2)
            assert reset.epoch == news.epoch != old_epochs[1]
            async with AsyncGateway(url(second)) as writer:
                await writer.publish(topic, "new life")
                assert [(e.kind, e.seq, e.data) for e in await events(news, 1)] == [("message", 1, "new life")]
                await writer.create_store(store)
                await writer.commit(store, [{"op": "put", "model": "new", "value": {"n": 2}}])
                await writer.put_model(store, "newer", {"n": 3})
                event = await step(tiles)
                assert (event.kind, event.version) == ("reset", 2)
                assert tiles.epoch != old_epochs[0] and tiles.resets == 1
                assert tiles.state == (await writer.snapshot(store))["models"] == {"new": {"n": 2}, "newer": {"n": 3}}

    run(scenario, timeout=60)


def test_without_reconnect_a_drop_ends_the_subscription(server):
    async def scenario() -> None:
        topic = unique("py-once")
        async with AsyncGateway(url(server)) as gateway:
            await gateway.publish(topic, 1)
            once = gateway.subscribe_topic(topic, since=0, options=StreamOptions(reconnect=False))
            assert (await step(once)).seq == 1
            once._drop_for_test()
            with pytest.raises(Unavailable) as lost:
                await step(once)
            assert lost.value.code == "connection_lost"
            with pytest.raises(StopAsyncIteration):
                await step(once)
        policy = Backoff(initial=0.1, maximum=5.0, jitter=0.0)
        assert [policy.delay(n) for n in range(8)] == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]
        assert all(0.08 <= Backoff().delay(0) <= 0.1 for _ in range(50))

    run(scenario)


def test_a_connection_refused_before_the_subscription_is_answered_raises_forbidden(start_server, tmp_path):
    """The connect hook refuses the connection (close 1008 with its reason) before the gateway
    answers the subscription: the stream raises `Forbidden` after one connection. Before, the
    client took it for a lost connection and reconnected about seven times a second, for good,
    with `max_attempts` never counting."""
    from hooks import Backend
    backend = Backend(tmp_path / "backend")
    try:
        gateway_process = start_server(*backend.hook_args("connect"))

        async def scenario() -> None:
            async with AsyncGateway(url(gateway_process), stream_options=FAST) as gateway:
                tiles = gateway.subscribe_store(unique("py-refused"))
                with pytest.raises(Forbidden) as refused:
                    await step(tiles)
                assert "no session" in refused.value.detail, refused.value
                assert tiles.connections == 1, tiles.connections

        run(scenario)
        assert backend.stats()["calls"]["connect"] == 1
    finally:
        backend.stop()


def test_a_snapshot_events_frame_stays_as_received_while_the_state_moves_on(server):
    store = unique("py-frame")

    async def scenario() -> None:
        async with AsyncGateway(url(server)) as gateway:
            await gateway.create_store(store)
            await gateway.put_model(store, "a", {"v": 1})
            tiles = gateway.subscribe_store(store)
            snapshot = await step(tiles)
            await gateway.put_model(store, "a", {"v": 99})
            assert (await step(tiles)).version == 2 and tiles.state == {"a": {"v": 99}}
            assert snapshot.frame["models"] == {"a": {"v": 1}}, snapshot.frame

    run(scenario)
