"""Redis losing its data (`FLUSHALL` under two nodes): a topic is a new epoch that every subscriber
is told with a `reset`, and a store comes back in a new epoch with every subscriber reset; a resume
with the old epoch is reset. Real nodes on one real redis-server.
"""

import contextlib
import json
import os
import signal
import threading
import time

from cluster_redis import redis, redis_call, start_node  # noqa: F401  (`redis` is a fixture)
from conftest import api, json_ok, wait_for
from wsclient import connect, recv_json, unique


# ---- Redis losing its data ------------------------------------------------

class Frames:
    """Every frame of one WebSocket, read on a thread."""

    def __init__(self, ws):
        self.ws = ws
        self.frames: list[dict] = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while True:
                frame = json.loads(self.ws.recv(timeout=60))
                with self.lock:
                    self.frames.append(frame)
        except Exception:
            pass

    def snapshot(self) -> list[dict]:
        with self.lock:
            return list(self.frames)


def test_redis_losing_its_data_is_a_new_epoch_that_every_subscriber_is_told(start_server, redis):
    a = start_node(start_server, redis)
    b = start_node(start_server, redis)
    topic = unique("lost")
    readers = []
    for node in (a, b):
        ws = connect(node.port)
        ws.send(json.dumps({"type": "subscribe", "topic": topic, "since": 0}))
        readers.append(Frames(ws))
    # A publisher that keeps going through the loss, alternating between the nodes.
    answers: list[tuple[int, dict]] = []
    stop = threading.Event()

    def publisher() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            resp = api((a, b)[n % 2].port, "POST", f"/api/topics/{topic}/messages", {"n": n})
            answers.append((resp.status, resp.json()))

    thread = threading.Thread(target=publisher, daemon=True)
    thread.start()
    try:
        wait_for(lambda: sum(1 for s, _ in answers if s == 201) >= 20, 10, "the publisher never got going")
        redis_call(redis, "FLUSHALL")
        # The numbering starts again: wait for twenty more numbered after the loss.

        def restarted() -> list[int]:
            seqs = [body["seq"] for status, body in list(answers) if status == 201]
            drop = next((i for i in range(1, len(seqs)) if seqs[i] < seqs[i - 1]), None)
            return seqs[drop:] if drop is not None else []

        wait_for(lambda: len(restarted()) >= 20, 15, "no publish was numbered after the loss")
    finally:
        stop.set()
        thread.join(timeout=15)
    last = max(restarted())
    for reader in readers:
        wait_for(lambda: _has_new_epoch_message(reader.snapshot(), last), 15,
                 "a subscriber never got the messages after the loss")
        frames = reader.snapshot()
        assert frames[0]["type"] == "subscribed", frames[0]
        first_epoch = frames[0]["epoch"]
        resets = [i for i, f in enumerate(frames) if f["type"] == "reset"]
        assert len(resets) == 1, [f for f in frames if f["type"] != "message"]
        reset = frames[resets[0]]
        assert reset["topic"] == topic and reset["seq"] == 0 and reset["epoch"] != first_epoch, reset
        # Within each epoch the numbers only rise, one by one: never moved back without the reset.
        for part in (frames[1:resets[0]], frames[resets[0] + 1:]):
            seqs = [f["seq"] for f in part if f["type"] == "message"]
            gaps = [f for f in part if f["type"] == "gap"]
            assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), seqs
            assert gaps or seqs == list(range(seqs[0], seqs[0] + len(seqs))), (seqs, gaps)
        assert [f["seq"] for f in frames[resets[0] + 1:] if f["type"] == "message"][0] == 1
        reader.ws.close()
    # A client coming back with the old epoch is told its number means nothing now.
    ws = connect(b.port)
    ws.send(json.dumps({"type": "subscribe", "topic": topic, "since": 5, "epoch": first_epoch}))
    answer = recv_json(ws)
    assert answer["type"] == "subscribed" and answer["reset"] is True and answer["epoch"] == reset["epoch"], answer
    ws.close()


def _has_new_epoch_message(frames: list[dict], last: int) -> bool:
    after_reset = False
    for frame in frames:
        if frame["type"] == "reset":
            after_reset = True
        elif after_reset and frame["type"] == "message" and frame["seq"] >= last:
            return True
    return False


def test_a_store_redis_lost_comes_back_in_a_new_epoch_with_every_subscriber_reset(start_server, redis):
    a = start_node(start_server, redis)
    b = start_node(start_server, redis)
    store = unique("lost")
    json_ok(api(a.port, "POST", "/api/stores", {"name": store}), 201)
    for n in range(1, 4):
        change = {"changes": [{"op": "put", "model": "m", "value": {"n": n}}]}
        assert json_ok(api(a.port, "POST", f"/api/stores/{store}/changes", change))["version"] == n
    wait_for(lambda: api(b.port, "GET", f"/api/stores/{store}").status == 200
             and api(b.port, "GET", f"/api/stores/{store}").json()["version"] == 3, 5, "node B never caught up")
    ws = connect(b.port)
    ws.send(json.dumps({"type": "subscribe", "store": store}))
    first = recv_json(ws)
    assert first["type"] == "snapshot" and first["version"] == 3, first
    old_epoch = first["epoch"]

    redis_call(redis, "FLUSHALL")
    # The store is gone from Redis: a commit says so (and makes the node re-read it), and a
    # backend creates it again; no commit is answered with a version the store never had.
    change = {"changes": [{"op": "put", "model": "m", "value": {"n": 4}}]}
    assert api(a.port, "POST", f"/api/stores/{store}/changes", change).status == 404
    json_ok(api(a.port, "POST", "/api/stores", {"name": store}), 201)
    wait_for(lambda: api(a.port, "POST", f"/api/stores/{store}/changes", change).status == 200, 10,
             "commits never worked again after the store was made anew")
    # The subscriber is told: a reset snapshot in the new epoch, then the new store's changes.
    # Node B reads the new store whole when told it was made; A's commit may reach Redis before
    # that read, and then the reset snapshot holds version 1 itself.
    frames = []
    wait_for(lambda: frames.append(recv_json(ws)) or frames[-1]["version"] == 1, 10,
             "the subscriber never got the new store's version 1")
    resets = [f for f in frames if f["type"] == "snapshot"]
    assert resets and all(f["reset"] is True for f in resets), frames
    assert resets[-1]["epoch"] != old_epoch, resets
    if frames[-1]["type"] == "changes":
        assert resets[-1]["version"] == 0 and resets[-1]["models"] == {}, resets
        assert frames[-1]["changes"][0]["value"] == {"n": 4}, frames[-1]
    else:
        assert frames[-1] is resets[-1] and frames[-1]["models"] == {"m": {"n": 4}}, frames[-1]
    ws.close()
    # A client coming back with the old epoch and a version the new store has not reached is
    # reset, not left waiting for a version that will mean something else.
    again = connect(a.port)
    again.send(json.dumps({"type": "subscribe", "store": store, "since": 3, "epoch": old_epoch}))
    answer = recv_json(again)
    assert answer["type"] == "snapshot" and answer["reset"] is True and answer["epoch"] == resets[-1]["epoch"], answer
    again.close()


# ---- A node away while a store is deleted and made again ---------------------------------

AWAY_TTL = "1"               # --redis-history-ttl: the new store's first versions are trimmed
TRIM_WAIT = 1.5              # seconds past the TTL


def local_ports_to(pid: int, remote_port: int) -> set[int]:
    """The local ports of process `pid`'s TCP connections to `remote_port` on IPv4."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    ports = set()
    with open("/proc/net/tcp") as table:
        for line in table.readlines()[1:]:
            fields = line.split()
            if fields[9] in inodes and int(fields[2].split(":")[1], 16) == remote_port:
                ports.add(int(fields[1].split(":")[1], 16))
    return ports


@contextlib.contextmanager
def made_again_while_away(a, b, redis, store: str):  # noqa: F811
    """Node B stopped (`SIGSTOP`) and cut from Redis while node A deletes `store` and makes it
    again; the body runs before B comes back."""
    b.proc.send_signal(signal.SIGSTOP)
    try:
        ports = local_ports_to(b.proc.pid, redis.port)
        assert len(ports) >= 2, ports  # its commands and its events
        for port in ports:
            redis_call(redis, "CLIENT", "KILL", "ADDR", f"127.0.0.1:{port}")
        json_ok(api(a.port, "DELETE", f"/api/stores/{store}"), 200)
        json_ok(api(a.port, "POST", "/api/stores", {"name": store}), 201)
        yield
    finally:
        b.proc.send_signal(signal.SIGCONT)


def test_a_node_away_while_a_store_was_made_again_reads_the_new_store_whole(start_server, redis):  # noqa: F811
    """Node B follows store `s` at version 3. B is stopped and its Redis connections closed; node
    A deletes `s`, makes it again, commits three versions, waits past the log's age limit and
    commits a fourth: the log holds only version 4. B comes back: each log entry names its
    store's epoch, so B sees version 4 is another store's and reads the store whole, in the new
    epoch. Before, entries named no epoch: B took version 4 as the next after its 3 and applied
    it onto the deleted store's models, for good (and its commits then spread them)."""
    a = start_node(start_server, redis, "--redis-history-ttl", AWAY_TTL)
    b = start_node(start_server, redis, "--redis-history-ttl", AWAY_TTL)
    store = unique("away")
    json_ok(api(a.port, "POST", "/api/stores", {"name": store}), 201)
    for n in range(3):
        json_ok(api(a.port, "PUT", f"/api/stores/{store}/models/old{n}", {"n": n}), 201)
    wait_for(lambda: json_ok(api(b.port, "GET", f"/api/stores/{store}"))["version"] == 3, 10, "B never reached version 3")
    old_epoch = json_ok(api(b.port, "GET", f"/api/stores/{store}"))["epoch"]

    with made_again_while_away(a, b, redis, store):
        for n in range(3):
            json_ok(api(a.port, "PUT", f"/api/stores/{store}/models/new{n}", {"n": n}), 201)
        time.sleep(TRIM_WAIT)  # the log's age limit, not synchronisation
        json_ok(api(a.port, "PUT", f"/api/stores/{store}/models/last", {"n": 4}), 201)
    expected = json_ok(api(a.port, "GET", f"/api/stores/{store}"))
    assert expected["version"] == 4 and expected["epoch"] != old_epoch
    wait_for(lambda: json_ok(api(b.port, "GET", f"/api/stores/{store}"))["epoch"] == expected["epoch"], 15,
             f"B kept the deleted store: {json_ok(api(b.port, 'GET', f'/api/stores/{store}'))}")
    assert json_ok(api(b.port, "GET", f"/api/stores/{store}")) == expected


def test_a_node_away_while_a_store_was_made_again_and_left_unwritten_reads_it_whole(start_server, redis):  # noqa: F811
    """As above, but the new store is not written: its log is empty, so no entry names its epoch.
    B comes back and finds the store listed in Redis in another epoch than its replica's: it
    reads it whole, and its subscriber is reset to the new, empty store. Before, B read on from
    its old cursor, found nothing, and served the deleted store's models for good."""
    a = start_node(start_server, redis)
    b = start_node(start_server, redis)
    store = unique("unwritten")
    json_ok(api(a.port, "POST", "/api/stores", {"name": store}), 201)
    for n in range(3):
        json_ok(api(a.port, "PUT", f"/api/stores/{store}/models/old{n}", {"n": n}), 201)
    wait_for(lambda: json_ok(api(b.port, "GET", f"/api/stores/{store}"))["version"] == 3, 10, "B never reached version 3")
    with connect(b.port) as ws:
        ws.send(json.dumps({"type": "subscribe", "store": store}))
        first = recv_json(ws, 10)
        assert first["type"] == "snapshot" and first["version"] == 3, first
        with made_again_while_away(a, b, redis, store):
            pass
        expected = json_ok(api(a.port, "GET", f"/api/stores/{store}"))
        assert (expected["version"], expected["models"]) == (0, {}) and expected["epoch"] != first["epoch"], expected
        wait_for(lambda: json_ok(api(b.port, "GET", f"/api/stores/{store}"))["epoch"] == expected["epoch"], 15,
                 f"B kept the deleted store: {json_ok(api(b.port, 'GET', f'/api/stores/{store}'))}")
        assert json_ok(api(b.port, "GET", f"/api/stores/{store}")) == expected
        reset = recv_json(ws, 10)
    assert reset["type"] == "snapshot" and reset["reset"] is True, reset
    assert (reset["epoch"], reset["version"], reset["models"]) == (expected["epoch"], 0, {}), reset
