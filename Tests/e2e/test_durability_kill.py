"""Durability of the disk engine (`--data-dir`) under `kill -9`.

Under load (64 HTTP writers, a publisher, subscribers) `kill -9` at a random moment loses nothing
acknowledged: versions and seqs stay contiguous from 1, every acknowledged change set and message
reads back as written, what subscribers were sent before the kill was stored, and a resume misses
nothing. With `--fsync interval` either the same holds, or the epoch changed and the resuming
subscriber is told to reset.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import threading
import time

import pytest
from websockets.exceptions import ConnectionClosed

from conftest import HOST, api, json_ok, store_snapshot, wait_for
from data_dir import (
    EXIT_TIMEOUT,
    IO_TIMEOUT,
    STREAM_TIMEOUT,
    changes_between,
    messages_between,
    start_on,
    topic_seqs,
)
from wsclient import connect, recv_json, subscribe

ROUNDS = 20                # kill -9 rounds per fsync mode
WRITERS = 64
LOAD_SECONDS = (0.3, 1.0)  # how long the load runs before the kill, drawn per round
FIRST_ACKS_TIMEOUT = 10.0  # the load has been acknowledged at least once
LOAD_TEST_TIMEOUT = 170    # pytest-timeout for one fsync mode's rounds


# ---- kill -9 under load ------------------------------------------------------------------

class AckedLoad(threading.Thread):
    """Sends one request after another on one keep-alive connection, one in flight, noting each
    acknowledged number with what it sent, until stopped or killed; a refusal ends it."""

    def __init__(self, port: int, path: str, key: str, stop: threading.Event):
        super().__init__(daemon=True)
        self.port, self.path, self.key, self.stop = port, path, key, stop
        self.acks: list[tuple[int, dict]] = []
        self.refused: list[str] = []

    def body(self, n: int) -> tuple[dict, dict]:
        """The n-th request's body and the value it carries."""
        raise NotImplementedError

    def run(self) -> None:
        conn = http.client.HTTPConnection(HOST, self.port, timeout=IO_TIMEOUT)
        n = 0
        try:
            while not self.stop.is_set():
                body, value = self.body(n)
                conn.request("POST", self.path, body=json.dumps(body), headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                answer = resp.read()
                if resp.status not in (200, 201):
                    self.refused.append(f"{resp.status}: {answer[:200]!r}")
                    return
                self.acks.append((json.loads(answer)[self.key], value))
                n += 1
        except (OSError, http.client.HTTPException):
            pass  # the kill
        finally:
            conn.close()


class Writer(AckedLoad):
    """Commits single-change change sets to its own model, noting each acknowledged version with
    the value it wrote."""

    def __init__(self, port: int, store: str, index: int, round_: int, stop: threading.Event):
        super().__init__(port, f"/api/stores/{store}/changes", "version", stop)
        self.index, self.round, self.model = index, round_, f"w{index}"

    def body(self, n: int) -> tuple[dict, dict]:
        value = {"r": self.round, "w": self.index, "n": n}
        return {"changes": [{"op": "put", "model": self.model, "value": value}]}, value


class Publisher(AckedLoad):
    """Publishes to one topic, noting each acknowledged seq and its data."""

    def __init__(self, port: int, topic: str, round_: int, stop: threading.Event):
        super().__init__(port, f"/api/topics/{topic}/messages", "seq", stop)
        self.round = round_

    def body(self, n: int) -> tuple[dict, dict]:
        data = {"r": self.round, "n": n}
        return data, data


class Follower(threading.Thread):
    """A WebSocket subscriber resuming from where the last round's check left off, reading every
    frame until the connection ends."""

    def __init__(self, port: int, **target):
        super().__init__(daemon=True)
        self.ws = connect(port)
        self.answer = subscribe(self.ws, **target)
        self.frames: list[dict] = []
        self.problem: str | None = None
        self.start()

    def run(self) -> None:
        try:
            while True:
                self.frames.append(json.loads(self.ws.recv(timeout=STREAM_TIMEOUT)))
        except ConnectionClosed:
            pass  # the kill
        except TimeoutError:
            self.problem = f"nothing for {STREAM_TIMEOUT}s"
        except Exception as error:  # noqa: BLE001 - reported by the test
            self.problem = f"{type(error).__name__}: {error}"
        finally:
            self.ws.close()


class LoadRun:
    """The rounds of one fsync mode, on one data directory: the store and topic carry on from
    round to round, each round's restart serving the next."""

    def __init__(self, start_server, data_dir, fsync: str, rng: random.Random):
        self.start_server, self.data_dir, self.fsync, self.rng = start_server, data_dir, fsync, rng
        self.server = self.start()
        port = self.server.port
        json_ok(api(port, "POST", "/api/stores", {"name": "load"}), 201)
        self.store, self.topic = "load", "load"
        json_ok(api(port, "POST", f"/api/topics/{self.topic}/messages", {"r": -1, "n": 0}), 201)
        self.version, self.seq = 0, 1
        self.store_epoch = store_snapshot(port, self.store)["epoch"]
        self.topic_epoch = json_ok(api(port, "GET", f"/api/topics/{self.topic}/messages?after=1"))["epoch"]
        self.resets = 0

    def start(self):
        # Every change set and message of the run stays readable, by number and by bytes, for
        # the check that reads them all back.
        return start_on(self.start_server, self.data_dir, "--fsync", self.fsync, "--history", "100000",
                        "--history-bytes", str(1 << 30))

    def round(self, number: int) -> None:
        port = self.server.port
        store_follower = Follower(port, store=self.store, since=self.version, epoch=self.store_epoch)
        assert store_follower.answer == {"type": "subscribed", "store": self.store, "version": self.version,
                                         "epoch": self.store_epoch, "resumed": True}, store_follower.answer
        topic_follower = Follower(port, topic=self.topic, since=self.seq, epoch=self.topic_epoch)
        assert topic_follower.answer == {"type": "subscribed", "topic": self.topic, "seq": self.seq,
                                         "epoch": self.topic_epoch, "resumed": True}, topic_follower.answer
        stop = threading.Event()
        writers = [Writer(port, self.store, i, number, stop) for i in range(WRITERS)]
        publisher = Publisher(port, self.topic, number, stop)
        for thread in (*writers, publisher):
            thread.start()
        wait_for(lambda: publisher.acks and sum(len(w.acks) for w in writers) >= WRITERS, FIRST_ACKS_TIMEOUT,
                 "the load was not acknowledged")
        load = self.rng.uniform(*LOAD_SECONDS)
        time.sleep(load)  # the load's duration: the kill comes at a random moment of it
        self.server.proc.kill()
        self.server.proc.wait(timeout=EXIT_TIMEOUT)
        stop.set()
        for thread in (*writers, publisher, store_follower, topic_follower):
            thread.join(IO_TIMEOUT + 5)
        assert not any(t.is_alive() for t in (*writers, publisher, store_follower, topic_follower))
        refused = [r for t in (*writers, publisher) for r in t.refused]
        assert not refused, f"round {number}: writes refused before the kill: {refused[:5]}"
        problems = [f.problem for f in (store_follower, topic_follower) if f.problem]
        assert not problems, problems

        self.server = self.start()
        port = self.server.port
        snapshot = store_snapshot(port, self.store)
        version, seq = snapshot["version"], topic_seqs(port)[self.topic]
        topic_epoch = json_ok(api(port, "GET", f"/api/topics/{self.topic}/messages?after={seq}"))["epoch"]
        acks = sorted(a for w in writers for a in w.acks)
        line = (f"round {number}: load {load:.2f}s, {len(acks)} change sets and {len(publisher.acks)} messages "
                f"acknowledged; stored {self.version}->{version}, seq {self.seq}->{seq}")
        print(line)
        if snapshot["epoch"] != self.store_epoch or topic_epoch != self.topic_epoch:
            assert self.fsync == "interval", f"round {number}: the epoch changed with --fsync always"
            self.expect_reset(snapshot, store_follower, topic_follower, topic_epoch)
            return

        # Every acknowledged change set is stored, with what was written; versions stay contiguous.
        assert not acks or acks[-1][0] <= version, f"round {number}: acknowledged {acks[-1][0]}, stored {version}"
        stored = changes_between(port, self.store, self.version, version)
        assert [f["version"] for f in stored] == list(range(self.version + 1, version + 1))
        by_version = {}
        for frame in stored:
            assert len(frame["changes"]) == 1, frame
            change = frame["changes"][0]
            assert change["path"] == "" and change["kind"] in ("created", "updated"), change
            assert change["value"]["r"] == number and change["model"] == f"w{change['value']['w']}", change
            by_version[frame["version"]] = change["value"]
        for acked_version, value in acks:
            assert by_version[acked_version] == value, (acked_version, value, by_version.get(acked_version))
        for writer in writers:
            # One request in flight: the writer's change sets are its first n writes, in order,
            # every acknowledged one and at most the one in flight at the kill besides.
            written = [v["n"] for _, v in sorted(by_version.items()) if v["w"] == writer.index]
            assert written == list(range(len(written))), (writer.index, written[:20])
            assert len(writer.acks) <= len(written) <= len(writer.acks) + 1, (writer.index, len(writer.acks), written)
            if written:
                assert snapshot["models"][writer.model] == {"r": number, "w": writer.index, "n": written[-1]}

        # The same for the topic's messages.
        assert not publisher.acks or publisher.acks[-1][0] <= seq, (publisher.acks[-1], seq)
        messages = messages_between(port, self.topic, self.seq, seq)
        assert [m["seq"] for m in messages] == list(range(self.seq + 1, seq + 1))
        data = {m["seq"]: m["data"] for m in messages}
        for acked_seq, sent in publisher.acks:
            assert data[acked_seq] == sent, (acked_seq, sent, data.get(acked_seq))
        assert [d["n"] for d in data.values()] == list(range(len(data))), list(data.values())[:20]
        assert len(publisher.acks) <= len(data) <= len(publisher.acks) + 1

        # What the subscribers were sent before the kill was stored, as sent.
        by_frame = {f["version"]: f for f in stored}
        store_last = self.version
        for frame in store_follower.frames:
            assert frame["type"] == "changes" and frame["version"] <= version, frame
            if frame.get("conflated"):
                assert frame["from"] == store_last, frame
            else:
                assert frame["version"] == store_last + 1, (frame["version"], store_last)
                assert frame == by_frame[frame["version"]], frame
            store_last = frame["version"]
        by_seq = {m["seq"]: m for m in messages}
        topic_last = self.seq
        for frame in topic_follower.frames:
            assert frame["type"] == "message" and frame["seq"] == topic_last + 1 <= seq, (frame, topic_last)
            assert frame == by_seq[frame["seq"]], frame
            topic_last = frame["seq"]

        # Resuming where they were cut off, they get exactly the rest: no reset, nothing missing.
        with connect(port) as ws:
            assert subscribe(ws, store=self.store, since=store_last, epoch=self.store_epoch) == {
                "type": "subscribed", "store": self.store, "version": store_last, "epoch": self.store_epoch,
                "resumed": True}
            assert_same_as_stored(read_until(ws, "version", version, store_last), by_frame, "version")
        with connect(port) as ws:
            assert subscribe(ws, topic=self.topic, since=topic_last, epoch=self.topic_epoch) == {
                "type": "subscribed", "topic": self.topic, "seq": seq, "epoch": self.topic_epoch, "resumed": True}
            assert_same_as_stored(read_until(ws, "seq", seq, topic_last), by_seq, "seq")
        self.version, self.seq = version, seq

    def expect_reset(self, snapshot: dict, store_follower: Follower, topic_follower: Follower,
                     topic_epoch: str) -> None:
        """A new epoch: a subscriber resuming in the old one is told to start over."""
        port = self.server.port
        store_last = max([self.version] + [f["version"] for f in store_follower.frames])
        topic_last = max([self.seq] + [f["seq"] for f in topic_follower.frames])
        with connect(port) as ws:
            frame = subscribe(ws, store=self.store, since=store_last, epoch=self.store_epoch)
            assert frame == {"type": "snapshot", "store": self.store, "version": snapshot["version"],
                             "epoch": snapshot["epoch"], "reset": True, "models": snapshot["models"]}, frame
            frame = subscribe(ws, topic=self.topic, since=topic_last, epoch=self.topic_epoch)
            assert frame.get("reset") is True and frame["epoch"] == topic_epoch, frame
        self.resets += 1
        self.version, self.seq = snapshot["version"], topic_seqs(port)[self.topic]
        self.store_epoch, self.topic_epoch = snapshot["epoch"], topic_epoch


def read_until(ws, key: str, last: int, start: int) -> list[dict]:
    """Frames numbered start+1 … last by `key`, each following the one before, and nothing else.

    A store subscriber that falls behind may be sent a conflated frame, which must start where the
    last frame ended; every other frame is the next number.
    """
    deadline = time.monotonic() + STREAM_TIMEOUT
    frames, at = [], start
    while at < last:
        frame = recv_json(ws, max(0.0, deadline - time.monotonic()))
        if frame.get("conflated"):
            assert key == "version" and frame["from"] == at < frame["version"] <= last, (frame, at)
        else:
            assert frame.get(key) == at + 1, (frame, at)
        frames.append(frame)
        at = frame[key]
    return frames


def assert_same_as_stored(frames: list[dict], stored: dict[int, dict], key: str) -> None:
    """Every plain frame is exactly the stored one of its number."""
    for frame in frames:
        if not frame.get("conflated"):
            assert frame == stored[frame[key]], (frame, stored.get(frame[key]))


@pytest.mark.timeout(LOAD_TEST_TIMEOUT)
@pytest.mark.parametrize("fsync", ["always", "interval"])
def test_kill_9_under_load_loses_nothing_acknowledged(start_server, tmp_path, fsync):
    seed = int(os.environ.get("RECEPTIONIST_TEST_SEED", time.time_ns() % 1_000_000))
    print(f"seed {seed} (RECEPTIONIST_TEST_SEED repeats it)")
    run = LoadRun(start_server, tmp_path / "data", fsync, random.Random(seed))
    for number in range(ROUNDS):
        run.round(number)
    print(f"{run.resets} epoch changes in {ROUNDS} rounds")
    if run.resets == 0:
        # Contiguous from 1: each round checked its stretch from where the last one ended.
        first = json_ok(api(run.server.port, "GET", "/api/stores/load/changes?after=0&limit=1"))["changes"]
        assert first[0]["version"] == 1, first
