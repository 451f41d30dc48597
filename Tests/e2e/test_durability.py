"""Durability of the disk engine (`--data-dir`).

- A gateway stopped (SIGTERM) or killed (SIGKILL, with `--fsync always`) and started again on the
  same directory serves every store with the same models, version, epoch and change sets, and
  every topic with the same seq, epoch and history; a subscriber that resumes with `since` and
  `epoch` gets exactly what it missed, with no reset.
- Under load (64 HTTP writers, a publisher, subscribers) `kill -9` at a random moment loses
  nothing acknowledged: versions and seqs stay contiguous from 1, every acknowledged change set
  and message reads back as written, what subscribers were sent before the kill was stored, and
  a resume misses nothing. With `--fsync interval` either the same holds, or the epoch changed
  and the resuming subscriber is told to reset.
- A second process on a directory in use exits at once saying it is locked; a data file that is
  garbage or another application's database is refused with a message naming it, never served.
- A full disk answers writes `507` (or `503`), keeps everything acknowledged, and writes succeed
  again once there is room.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import signal
import sqlite3
import subprocess
import threading
import time

import pytest
from websockets.exceptions import ConnectionClosed

from conftest import HOST, api, json_ok, server_binary, store_snapshot, wait_for
from test_history_reads import MESSAGE_BODIES, run_steps
from wsclient import assert_changes_frame, connect, recv_json, subscribe

DATA_FILE = "receptionist.sqlite3"
EXIT_TIMEOUT = 10.0        # a stopped gateway has exited
REFUSAL_TIMEOUT = 5.0      # a gateway that must not start has exited
STREAM_TIMEOUT = 15.0      # a run of frames that is already due
IO_TIMEOUT = 10.0          # one HTTP request under load
ROUNDS = 20                # kill -9 rounds per fsync mode
WRITERS = 64
LOAD_SECONDS = (0.3, 1.0)  # how long the load runs before the kill, drawn per round
FIRST_ACKS_TIMEOUT = 10.0  # the load has been acknowledged at least once
LOAD_TEST_TIMEOUT = 170    # pytest-timeout for one fsync mode's rounds
READ_PAGE = 1000           # the most change sets or messages one read answers
FILL_VALUE_BYTES = 16384   # each write that fills the small disk
FILL_ATTEMPTS = 400        # 400 * 16 KiB is far past 1 MiB
TMPFS_SMALL, TMPFS_LARGE = "1m", "16m"
ROOM_TIMEOUT = 10.0        # once there is room again, a write succeeds within this


# ---- Servers on a data directory ------------------------------------------------------

def start_on(start_server, data_dir, *args):
    """A gateway on `data_dir`, without the per-address publish rate (the load is one address)."""
    return start_server("--data-dir", data_dir, "--publish-rate", "0", *args)


def stop_with(server, how: str) -> None:
    """SIGTERM (a clean exit 0) or SIGKILL."""
    if how == "SIGKILL":
        server.proc.kill()
        server.proc.wait(timeout=EXIT_TIMEOUT)
    else:
        server.send_signal(signal.SIGTERM)
        assert server.wait_exit(EXIT_TIMEOUT) == 0, server.stderr_text()


def run_refused(tmp_path, data_dir, name: str) -> tuple[subprocess.CompletedProcess, float]:
    """Runs a gateway that must refuse to start; returns its result and how long it ran."""
    workdir = tmp_path / name
    workdir.mkdir()
    argv = [str(server_binary()), "serve", "--host", HOST, "--port", "0", "--public", str(workdir),
            "--data-dir", str(data_dir)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECEPTIONIST_")}
    started = time.monotonic()
    try:
        result = subprocess.run(argv, cwd=workdir, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                                timeout=REFUSAL_TIMEOUT)
    except subprocess.TimeoutExpired as expired:
        raise AssertionError(f"still running {REFUSAL_TIMEOUT}s after start; stdout {expired.stdout!r}") from None
    return result, time.monotonic() - started


def assert_refused(result: subprocess.CompletedProcess, *mentions: str) -> str:
    stderr = result.stderr.decode("utf-8", "replace")
    assert result.returncode != 0, f"exit code 0; stderr:\n{stderr}"
    assert b"listening" not in result.stdout, result.stdout
    for mention in mentions:
        assert mention in stderr, f"stderr does not mention {mention!r}:\n{stderr}"
    return stderr


# ---- Reading everything back ----------------------------------------------------------

def read_pages(port: int, path: str, field: str, number: str, after: int, through: int) -> list[dict]:
    """Every frame of `path` (a store's change sets or a topic's messages) after `after` up to
    `through`, read page by page; `number` is the frame's version or seq."""
    frames = []
    while after < through:
        body = json_ok(api(port, "GET", f"{path}?after={after}&limit={READ_PAGE}", timeout=IO_TIMEOUT))
        page = body[field]
        assert page, f"no {field} after {after} though {path} is at {through}"
        frames += page
        after = page[-1][number]
    return frames


def changes_between(port: int, store: str, after: int, through: int) -> list[dict]:
    return read_pages(port, f"/api/stores/{store}/changes", "changes", "version", after, through)


def messages_between(port: int, topic: str, after: int, through: int) -> list[dict]:
    return read_pages(port, f"/api/topics/{topic}/messages", "messages", "seq", after, through)


def topic_seqs(port: int) -> dict[str, int]:
    return {t["name"]: t["seq"] for t in json_ok(api(port, "GET", "/api/topics"))["topics"]}


def everything(port: int) -> dict:
    """All a gateway holds, as exact bytes where the bytes are the contract."""
    stores = json_ok(api(port, "GET", "/api/stores"))["stores"]
    state = {"stores": stores, "topics": topic_seqs(port), "store": {}, "topic": {}}
    for entry in stores:
        name = entry["name"]
        snapshot = api(port, "GET", f"/api/stores/{name}")
        models = {}
        for model in json.loads(snapshot.body)["models"]:
            resp = api(port, "GET", f"/api/stores/{name}/models/{model}")
            models[model] = (resp.status, resp.header("ETag"), resp.body)
        version = entry["version"]
        state["store"][name] = {
            "snapshot": snapshot.body,
            "models": models,
            "changes": changes_between(port, name, 0, version),
            "past": [api(port, "GET", f"/api/stores/{name}?at={v}").body for v in range(version + 1)],
        }
    for name, seq in state["topics"].items():
        state["topic"][name] = api(port, "GET", f"/api/topics/{name}/messages?after=0&limit={READ_PAGE}").body
    return state


# ---- Restart -----------------------------------------------------------------------------

RAW_VALUES = {
    "numbers": b'{"big":9007199254740993,"f":1.10,"z":-0.0,"e":1e400}',
    # Escapes are decoded when stored (docs/PROTOCOL.md), so the text is written unescaped.
    "order": '{"zeta":1,"alpha":{"y":2,"b":[3,{"k":null}]},"mid":"caf\u00e9 \u2603"}'.encode(),
}


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_restart_keeps_every_store_and_topic(start_server, tmp_path, how):
    data = tmp_path / "data"
    first = start_on(start_server, data)
    port = first.port
    for name in ("steps", "raw", "empty", "gone", "again"):
        assert json_ok(api(port, "POST", "/api/stores", {"name": name}), 201)["version"] == 0
    run_steps(port, "steps")
    for model, body in RAW_VALUES.items():
        resp = api(port, "PUT", f"/api/stores/raw/models/{model}", body=body)
        assert resp.status == 201, resp.body
    for store in ("gone", "again"):
        json_ok(api(port, "PUT", f"/api/stores/{store}/models/m", {"n": 1}), 201)
        assert json_ok(api(port, "DELETE", f"/api/stores/{store}"))["deleted"] is True
    assert json_ok(api(port, "POST", "/api/stores", {"name": "again"}), 201)["version"] == 0
    json_ok(api(port, "PUT", "/api/stores/again/models/m", {"n": 2}), 201)
    for body in MESSAGE_BODIES:
        assert api(port, "POST", "/api/topics/news/messages", body=body).status in (200, 201)
    assert api(port, "POST", "/api/topics/one/messages", {"only": True}).status in (200, 201)
    before = everything(port)
    assert {s["name"] for s in before["stores"]} == {"steps", "raw", "empty", "again"}
    assert before["topics"] == {"news": len(MESSAGE_BODIES), "one": 1}

    stop_with(first, how)
    second = start_on(start_server, data)
    after = everything(second.port)
    assert after["stores"] == before["stores"]
    assert after["topics"] == before["topics"]
    for name, held in before["store"].items():
        assert after["store"][name]["snapshot"] == held["snapshot"], name
        assert after["store"][name]["models"] == held["models"], name
        assert after["store"][name]["changes"] == held["changes"], name
        assert after["store"][name]["past"] == held["past"], name
    assert after["topic"] == before["topic"]
    for model, body in RAW_VALUES.items():
        assert body in api(second.port, "GET", f"/api/stores/raw/models/{model}").body, model

    # Both go on from where they were.
    version = json.loads(before["store"]["steps"]["snapshot"])["version"]
    resp = api(second.port, "PATCH", "/api/stores/steps/models/a", {"after": "restart"})
    assert json_ok(resp)["version"] == version + 1 and resp.header("ETag") == f'"{version + 1}"'
    published = json_ok(api(second.port, "POST", "/api/topics/news/messages", {"n": "next"}), 201)
    assert published["seq"] == len(MESSAGE_BODIES) + 1
    assert api(second.port, "GET", "/api/stores/gone").status == 404


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_subscriber_resumes_across_a_restart_with_exactly_what_it_missed(start_server, tmp_path, how):
    data = tmp_path / "data"
    first = start_on(start_server, data)
    port = first.port
    assert json_ok(api(port, "POST", "/api/stores", {"name": "s"}), 201)["version"] == 0

    def write(p: int, n: int) -> int:
        model = f"m{n % 3}"
        resp = api(p, "POST", "/api/stores/s/changes", {"changes": [
            {"op": "put", "model": model, "value": {"n": n}}, {"op": "set", "model": model, "path": "k", "value": n}]})
        return json_ok(resp)["version"]

    def publish(p: int, n: int) -> int:
        return json_ok(api(p, "POST", "/api/topics/t/messages", {"n": n}), 201)["seq"]

    with connect(port) as ws:
        snapshot = subscribe(ws, store="s")
        topic = subscribe(ws, topic="t")
        assert (snapshot["version"], topic["seq"]) == (0, 0)
        for n in range(1, 4):
            write(port, n)
            publish(port, n)
        seen = []
        while len(seen) < 6:
            seen.append(recv_json(ws, STREAM_TIMEOUT))
    last_version = max(f["version"] for f in seen if f["type"] == "changes")
    last_seq = max(f["seq"] for f in seen if f["type"] == "message")
    assert (last_version, last_seq) == (3, 3)
    store_epoch, topic_epoch = snapshot["epoch"], topic["epoch"]
    # Missed before the restart, and after it.
    for n in range(4, 9):
        write(port, n)
        publish(port, n)
    stop_with(first, how)
    second = start_on(start_server, data)
    for n in range(9, 12):
        write(second.port, n)
        publish(second.port, n)
    stored_changes = changes_between(second.port, "s", last_version, 11)
    stored_messages = messages_between(second.port, "t", last_seq, 11)

    with connect(second.port) as ws:
        assert subscribe(ws, store="s", since=last_version, epoch=store_epoch) == {
            "type": "subscribed", "store": "s", "version": last_version, "epoch": store_epoch, "resumed": True}
        replay = [recv_json(ws, STREAM_TIMEOUT) for _ in range(11 - last_version)]
        for version, frame in enumerate(replay, start=last_version + 1):
            assert_changes_frame(frame, "s", version)
        assert replay == stored_changes
        assert subscribe(ws, topic="t", since=last_seq, epoch=topic_epoch) == {
            "type": "subscribed", "topic": "t", "seq": 11, "epoch": topic_epoch, "resumed": True}
        messages = [recv_json(ws, STREAM_TIMEOUT) for _ in range(11 - last_seq)]
        assert messages == stored_messages
        assert [m["data"] for m in messages] == [{"n": n} for n in range(last_seq + 1, 12)]
        # Then the live streams, with nothing repeated.
        live = write(second.port, 12)
        assert_changes_frame(recv_json(ws, STREAM_TIMEOUT), "s", live)
        assert publish(second.port, 12) == 12
        assert recv_json(ws, STREAM_TIMEOUT)["seq"] == 12


KEPT = 5
PAST_KEPT = 20


def test_history_kept_across_a_restart_is_what_retain_and_history_allow(start_server, tmp_path):
    data = tmp_path / "data"
    limits = ("--retain", str(KEPT), "--history", str(KEPT))
    first = start_on(start_server, data, *limits)
    port = first.port
    json_ok(api(port, "POST", "/api/stores", {"name": "s"}), 201)
    states = [{}]
    for n in range(1, PAST_KEPT + 1):
        json_ok(api(port, "PUT", f"/api/stores/s/models/m{n % 3}", {"n": n}), 201 if n <= 3 else 200)
        states.append(store_snapshot(port, "s")["models"])
        json_ok(api(port, "POST", "/api/topics/t/messages", {"n": n}), 201)
    tail_changes = changes_between(port, "s", PAST_KEPT - KEPT, PAST_KEPT)
    tail_messages = messages_between(port, "t", PAST_KEPT - KEPT, PAST_KEPT)
    epoch = store_snapshot(port, "s")["epoch"]
    stop_with(first, "SIGTERM")

    second = start_on(start_server, data, *limits)
    port = second.port
    gone = api(port, "GET", "/api/stores/s?at=0")
    assert gone.status == 410 and gone.json()["error"] == "gone", (gone.status, gone.body)
    oldest = gone.json()["oldest"]
    assert 1 <= oldest <= PAST_KEPT - KEPT, gone.json()
    for version in range(oldest, PAST_KEPT + 1):
        assert json_ok(api(port, "GET", f"/api/stores/s?at={version}"))["models"] == states[version], version
    assert changes_between(port, "s", PAST_KEPT - KEPT, PAST_KEPT) == tail_changes
    gone = api(port, "GET", "/api/topics/t/messages?after=0&limit=10")
    assert gone.status == 410 and gone.json()["error"] == "gone", (gone.status, gone.body)
    assert 1 <= gone.json()["oldest"] <= PAST_KEPT - KEPT, gone.json()
    assert messages_between(port, "t", PAST_KEPT - KEPT, PAST_KEPT) == tail_messages

    with connect(port) as ws:
        # A resume from before what is kept starts over from a snapshot, in the same epoch.
        assert subscribe(ws, store="s", since=2, epoch=epoch) == {
            "type": "snapshot", "store": "s", "version": PAST_KEPT, "epoch": epoch, "reset": True,
            "models": states[PAST_KEPT]}
        # A topic's lost messages are named as a gap, never skipped silently.
        answer = subscribe(ws, topic="t", since=2)
        assert answer["type"] == "subscribed" and answer["seq"] == PAST_KEPT and not answer.get("reset"), answer
        gap = recv_json(ws, STREAM_TIMEOUT)
        assert gap["type"] == "gap" and gap["topic"] == "t" and gap["from"] == 3, gap
        following = [recv_json(ws, STREAM_TIMEOUT) for _ in range(PAST_KEPT - gap["to"])]
        assert [m["seq"] for m in following] == list(range(gap["to"] + 1, PAST_KEPT + 1)), following
        assert following[-KEPT:] == tail_messages


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
        return start_on(self.start_server, self.data_dir, "--fsync", self.fsync, "--history", "100000")

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


# ---- Refusing a directory ------------------------------------------------------------------

def test_second_process_on_a_directory_in_use_exits_at_once(start_server, tmp_path):
    data = tmp_path / "data"
    first = start_on(start_server, data)
    json_ok(api(first.port, "POST", "/api/stores", {"name": "kept"}), 201)
    json_ok(api(first.port, "PUT", "/api/stores/kept/models/m", {"n": 1}), 201)
    result, took = run_refused(tmp_path, data, "second")
    stderr = assert_refused(result)
    assert "locked" in stderr.lower(), stderr
    assert took < REFUSAL_TIMEOUT
    # The first goes on untouched.
    assert json_ok(api(first.port, "PATCH", "/api/stores/kept/models/m", {"k": 2}))["version"] == 2
    assert store_snapshot(first.port, "kept")["models"] == {"m": {"n": 1, "k": 2}}
    # Once it has exited, the directory is free again, with everything in it.
    epoch = store_snapshot(first.port, "kept")["epoch"]
    stop_with(first, "SIGTERM")
    again = start_on(start_server, data)
    snapshot = store_snapshot(again.port, "kept")
    assert (snapshot["version"], snapshot["epoch"], snapshot["models"]) == (2, epoch, {"m": {"n": 1, "k": 2}})


def test_killed_process_leaves_the_directory_usable(start_server, tmp_path):
    data = tmp_path / "data"
    first = start_on(start_server, data)
    json_ok(api(first.port, "POST", "/api/stores", {"name": "kept"}), 201)
    stop_with(first, "SIGKILL")
    again = start_on(start_server, data)
    assert store_snapshot(again.port, "kept")["version"] == 0


def write_garbage(path) -> bytes:
    garbage = b"this is not a database\n" * 200 + random.Random(7).randbytes(65536)
    path.write_bytes(garbage)
    return garbage


def write_other_application(path) -> bytes:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
    db.executemany("INSERT INTO users(name) VALUES (?)", [("ann",), ("bob",)])
    db.commit()
    db.close()
    return path.read_bytes()


@pytest.mark.parametrize("make", [write_garbage, write_other_application], ids=["garbage", "other-application"])
def test_a_data_file_that_is_not_ours_is_refused_never_served(tmp_path, make):
    data = tmp_path / "data"
    data.mkdir()
    path = data / DATA_FILE
    contents = make(path)
    result, _ = run_refused(tmp_path, data, "refused")
    assert_refused(result, DATA_FILE)
    # Left as it was: the file is someone else's.
    if make is write_garbage:
        assert path.read_bytes() == contents
    else:
        db = sqlite3.connect(path)
        try:
            assert db.execute("SELECT name FROM users ORDER BY id").fetchall() == [("ann",), ("bob",)]
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
            assert tables == {"users"}, tables
            assert db.execute("PRAGMA application_id").fetchone() == (0,)
        finally:
            db.close()


# ---- A full disk ---------------------------------------------------------------------------

def mount_tmpfs(directory, size: str) -> None:
    directory.mkdir()
    try:
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)],
                                capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as error:
        pytest.skip(f"cannot mount a tmpfs: {error}")
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {result.stderr.decode(errors='replace').strip()}")


def assert_storage_refusal(resp) -> None:
    assert resp.status in (503, 507), (resp.status, resp.body[:300])
    assert resp.media_type() == "application/json", resp.header("Content-Type")
    body = resp.json()
    assert isinstance(body.get("error"), str) and isinstance(body.get("detail"), str), body
    if resp.status == 507:
        assert body["error"] == "insufficient_storage", body


def test_full_disk_refuses_writes_keeps_what_was_acknowledged_and_recovers(start_server, tmp_path):
    data = tmp_path / "small"
    mount_tmpfs(data, TMPFS_SMALL)
    try:
        server = start_on(start_server, data)
        port = server.port
        json_ok(api(port, "POST", "/api/stores", {"name": "fill"}), 201)
        acked: dict[str, dict] = {}
        refusal = None
        for n in range(FILL_ATTEMPTS):
            value = {"n": n, "pad": f"{n:06d}" + "x" * FILL_VALUE_BYTES}
            resp = api(port, "PUT", f"/api/stores/fill/models/m{n}", value)
            if resp.status not in (200, 201):
                refusal = resp
                break
            assert json_ok(resp, 201)["version"] == len(acked) + 1
            acked[f"m{n}"] = value
        assert refusal is not None, f"{FILL_ATTEMPTS} writes of {FILL_VALUE_BYTES} bytes fit in {TMPFS_SMALL}"
        print(f"refused after {len(acked)} writes: {refusal.status} {refusal.body[:200]!r}")
        assert_storage_refusal(refusal)
        assert acked, "not one write fitted"
        assert server.proc.poll() is None, "the gateway died of a full disk"

        # Everything acknowledged is still there; the refused write is not.
        snapshot = store_snapshot(port, "fill")
        assert snapshot["version"] == len(acked)
        assert snapshot["models"] == acked
        # More writes while full are refused the same way, and change nothing.
        assert_storage_refusal(api(port, "PUT", "/api/stores/fill/models/more", {"pad": "y" * FILL_VALUE_BYTES}))
        assert store_snapshot(port, "fill")["version"] == len(acked)

        subprocess.run(["mount", "-o", f"remount,size={TMPFS_LARGE}", str(data)], check=True, timeout=10)

        def write_fits():
            resp = api(port, "PUT", "/api/stores/fill/models/after", {"n": "after"})
            if resp.status in (503, 507):
                return False
            assert resp.status == 201, (resp.status, resp.body)
            return resp

        resp = wait_for(write_fits, ROOM_TIMEOUT, "writes still refused once there was room")
        acked["after"] = {"n": "after"}
        assert resp.json()["version"] == len(acked)
        for n in range(10):
            resp = api(port, "PUT", f"/api/stores/fill/models/late{n}", {"n": n, "pad": "z" * FILL_VALUE_BYTES})
            assert resp.status == 201, (resp.status, resp.body[:200])
            acked[f"late{n}"] = {"n": n, "pad": "z" * FILL_VALUE_BYTES}
        assert json_ok(api(port, "POST", "/api/topics/after/messages", {"ok": True}), 201)["seq"] == 1
        snapshot = store_snapshot(port, "fill")
        assert (snapshot["version"], snapshot["models"]) == (len(acked), acked)

        # And it is all on disk.
        stop_with(server, "SIGTERM")
        again = start_on(start_server, data)
        restored = store_snapshot(again.port, "fill")
        assert (restored["version"], restored["epoch"], restored["models"]) == (len(acked), snapshot["epoch"], acked)
        assert topic_seqs(again.port)["after"] == 1
    finally:
        for server in start_server.servers:
            server.stop()
        subprocess.run(["umount", str(data)], capture_output=True, timeout=30)
