"""Resuming a store subscription while commits flow (docs/PROTOCOL.md: a resume "is exact, since the
replay goes through the same filter"). Writers commit to two models as fast as they are answered;
clients with a filter or a rate subscribe, read a little, drop the connection and resume with
`since` and `epoch`, again and again. Each must get every change set its shape covers, once and in
order (with `maxRate`: frames whose `from` never passes what it holds), and end where `GET` is.

Before, a shape's group was made by the resume itself, after the store's history was read for
the replay: a change set committed in between was in neither, and was lost without a gap."""

from __future__ import annotations

import json
import random
import threading
import time

import httpx

from conftest import HOST
from wsclient import connect, send_json, unique

WRITERS = 4
SECONDS = 12.0       # resuming while the writers commit
READ_FOR = 0.08      # each connection reads up to this long before it is dropped
KEYS = 8
CATCH_UP = 10.0      # the last resume reaches the store's version within this
FIRST_FRAME = 5.0    # the snapshot or `subscribed` comes within this


def writer(base: str, store: str, stop: threading.Event, seed: int, touched: dict[int, str], lock: threading.Lock):
    rng = random.Random(seed)
    with httpx.Client(timeout=10) as client:
        while not stop.is_set():
            model = rng.choice(("m1", "m2"))
            change = {"op": "set", "model": model, "path": f"k{rng.randrange(KEYS)}", "value": f"{seed}-{rng.random()}"}
            resp = client.post(f"{base}/api/stores/{store}/changes", json={"changes": [change]})
            assert resp.status_code == 200, resp.text
            with lock:
                touched[resp.json()["version"]] = model


def apply(models: dict, frame: dict) -> None:
    for change in frame["changes"]:
        if change["path"] == "":
            if change.get("value") is None:
                models.pop(change["model"], None)
            else:
                models[change["model"]] = change["value"]
        else:
            models.setdefault(change["model"], {})[change["path"]] = change["value"]


class Resumer:
    """Subscribes with `shape`, reads a little, drops the connection and resumes, until told."""

    def __init__(self, port: int, store: str, shape: dict, seed: int):
        self.port, self.store, self.shape = port, store, shape
        self.rng = random.Random(seed)
        self.version = self.epoch = self.start = None
        self.models: dict = {}
        self.versions: list[int] = []   # change sets received, in order
        self.problems: list[str] = []
        self.resumes = 0

    def session(self, until: float) -> None:
        # The client buffers whatever comes unread (`max_queue=None`): by default `websockets`
        # stops reading after 16 unread frames, so the gateway's answer to the close frame
        # would sit unread until the client's close time-out.
        with connect(self.port, max_queue=None) as ws:
            ask = {"type": "subscribe", "store": self.store, **self.shape}
            if self.version is not None:
                ask.update(since=self.version, epoch=self.epoch)
                self.resumes += 1
            send_json(ws, ask)
            # Whatever the window, the answer to the subscribe comes first: a client that kept
            # dropping the connection before it would fall behind for good.
            self.take(json.loads(ws.recv(timeout=FIRST_FRAME)))
            while time.monotonic() < until:
                try:
                    text = ws.recv(timeout=max(0.001, until - time.monotonic()))
                except TimeoutError:
                    break
                self.take(json.loads(text))

    def take(self, frame: dict) -> None:
        if frame["type"] == "snapshot":
            if self.version is not None:
                self.problems.append(f"a reset snapshot at {frame['version']} on a resume after {self.version}")
            self.models, self.version, self.epoch = frame["models"], frame["version"], frame["epoch"]
            self.start = frame["version"]
        elif frame["type"] == "subscribed":
            if frame["version"] != self.version:
                self.problems.append(f"subscribed at {frame['version']}, resumed after {self.version}")
        elif frame["type"] == "changes":
            if frame["version"] <= self.version:
                self.problems.append(f"{frame['version']} again, after {self.version}")
            if "from" in frame and frame["from"] > self.version:
                self.problems.append(f"a frame from {frame['from']} to {frame['version']}, held {self.version}")
            apply(self.models, frame)
            self.versions.append(frame["version"])
            self.version = frame["version"]
        else:
            self.problems.append(f"unexpected {frame}")

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.session(time.monotonic() + self.rng.random() * READ_FOR)


def test_resumes_while_commits_flow_lose_nothing(start_server):
    # A history long enough that no resume falls out of it: a reset is a failure here.
    server = start_server("--publish-rate", "0", "--client-message-rate", "0", "--history", "100000")
    base, store = f"http://{HOST}:{server.port}", unique("resumed")
    with httpx.Client(timeout=10) as client:
        assert client.post(f"{base}/api/stores", json={"name": store}).status_code == 201
        for model in ("m1", "m2"):
            assert client.put(f"{base}/api/stores/{store}/models/{model}", json={}).status_code == 201
    shapes = [{"models": ["m1"]}, {"paths": ["k1", "k2"]}, {"maxRate": 50}]
    resumers = [Resumer(server.port, store, shape, n) for n, shape in enumerate(shapes)]
    touched: dict[int, str] = {}
    lock, stop_writers, stop_resumers = threading.Lock(), threading.Event(), threading.Event()
    threads = [threading.Thread(target=writer, args=(base, store, stop_writers, n, touched, lock)) for n in range(WRITERS)]
    threads += [threading.Thread(target=r.run, args=(stop_resumers,)) for r in resumers]
    for thread in threads:
        thread.start()
    time.sleep(SECONDS)
    stop_resumers.set()
    stop_writers.set()
    for thread in threads:
        thread.join(timeout=30)
        assert not thread.is_alive(), "a writer or resumer did not stop"
    final = httpx.get(f"{base}/api/stores/{store}", timeout=10).json()
    for resumer in resumers:
        # One last resume, read until it reaches the store's version.
        deadline = time.monotonic() + CATCH_UP
        while resumer.version < final["version"] and time.monotonic() < deadline:
            resumer.session(min(deadline, time.monotonic() + 1.0))
        shape = resumer.shape
        assert resumer.resumes >= 20, (shape, resumer.resumes)
        assert resumer.problems == [], (shape, resumer.problems[:5])
        if "models" in shape:
            expected = sorted(v for v, model in touched.items() if model == "m1" and v > resumer.start)
            missing = sorted(set(expected) - set(resumer.versions))
            assert missing == [], (shape, f"{len(missing)} change sets of m1 never came, the first {missing[:5]}")
        assert project(resumer.models, shape) == project(final["models"], shape), (
            shape, json.dumps(resumer.models)[:300], json.dumps(final["models"])[:300])


def project(models: dict, shape: dict) -> dict:
    """`models` as `shape` shows them, models the projection leaves empty left out."""
    shown = {model: value for model, value in models.items() if model in shape.get("models", [model])}
    if "paths" in shape:
        shown = {model: {k: v for k, v in value.items() if k in shape["paths"]} for model, value in shown.items()}
    return {model: value for model, value in shown.items() if value}
