"""The `maxRate` store subscription option (docs/PROTOCOL.md, "Subscription options: models, paths,
rate"): frames bounded in number and staleness under an animate job, and a burst of change sets
folded into one frame.

Every subscriber keeps a local copy (`View`, in projection.py) that checks and applies each frame
by the protocol's rule for a projected copy.
"""

import json
import threading
import time

import pytest

from conftest import api, json_ok, stop_job, store_snapshot, wait_for
from projection import STREAM_TIMEOUT, View, by_place, change, commit, project, projected_store, set_at
from wsclient import FRAME_TIMEOUT, connect, new_store

JOB_RATE = 500            # change sets a second the animate job is asked for
RATE = 5                  # maxRate of the subscribers that watch the job
# Delivery allowance on top of 1 / maxRate: the loop's turn, the socket and the reader thread, on
# a debug build beside a job committing 500 change sets a second. Kept below 1 / RATE, so a frame
# held back for one interval too many still fails.
LATE_SLACK = 0.150
JOB_VERSIONS = 1000       # versions the job commits while those subscribers watch
JOB_TIMEOUT = 30.0        # the job commits them
RATE_MODELS = 48          # models of the animated store
BURST_RATE = 1            # maxRate of the tests that fold a burst into one frame
BURST_BUDGET = 0.8        # seconds a burst may take to commit and still fall in one interval
BURST_SPACING = 0.9       # least spacing of two frames at BURST_RATE, as arrival times show it


# ---- maxRate -----------------------------------------------------------

class Recorder(threading.Thread):
    """Reads one connection's frames on a thread of its own, noting each one's arrival time."""

    def __init__(self, ws):
        super().__init__(daemon=True)
        self.ws = ws
        self.arrivals: list[tuple[float, dict]] = []
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                try:
                    text = self.ws.recv(timeout=0.2)
                except TimeoutError:
                    continue
                self.arrivals.append((time.time(), json.loads(text)))
        except BaseException as exc:  # reported by the test thread
            self.error = exc

    def latest_version(self) -> int:
        if self.error is not None:
            raise AssertionError(f"the reader failed: {self.error!r}")
        return self.arrivals[-1][1].get("version", -1) if self.arrivals else -1

    def finish(self) -> list[tuple[float, dict]]:
        self.stopping.set()
        self.join(timeout=5)
        assert not self.is_alive() and self.error is None, self.error
        return self.arrivals


def check_rate_limited(view: View, arrivals, rate: float, exact_from: bool) -> None:
    """Arrivals at most `rate` a second (one more for jitter) in any one-second window, none later
    than 1 / rate (plus slack) after the first change it holds, each a valid frame in order."""
    times = [t for t, _ in arrivals]
    for i, start in enumerate(times):
        in_window = sum(1 for t in times[i:] if t - start < 1.0)
        assert in_window <= rate + 1, (
            f"{in_window} frames within one second from frame {i} at maxRate {rate}: "
            f"{[round(t - start, 3) for t in times[i:i + in_window]]}")
    for arrived, frame in arrivals:
        view.accept(frame, exact_from=exact_from)
        late = arrived - frame["firstCommittedAt"] / 1e6
        assert late <= 1 / rate + LATE_SLACK, (
            f"frame {frame['from']}..{frame['version']} arrived {late * 1000:.0f} ms after its first change")


@pytest.mark.timeout(120)
def test_max_rate_bounds_frames_and_staleness_under_an_animate_job(start_server):
    # One job thread: the test's own commit after the stop runs after the job's last one.
    server = start_server("--job-threads", "1")
    port = server.port
    store = new_store(port, {f"m{i}": {"color": "#000000", "label": f"L{i}"} for i in range(RATE_MODELS)},
                      prefix="rate")
    everything = View(store, {"maxRate": RATE})
    narrowed = View(store, {"models": ["m1*", "m2"], "paths": ["color"], "maxRate": RATE, "old": True})
    with connect(port) as ws_everything, connect(port) as ws_narrowed:
        everything.subscribe(ws_everything, port)
        narrowed.subscribe(ws_narrowed, port)
        base = everything.version
        recorders = [Recorder(ws_everything), Recorder(ws_narrowed)]
        for recorder in recorders:
            recorder.start()
        job = json_ok(api(port, "POST", "/api/jobs", {"kind": "animate", "store": store, "rate": JOB_RATE}), 201)
        try:
            wait_for(lambda: recorders[0].latest_version() >= base + JOB_VERSIONS, JOB_TIMEOUT,
                     f"the maxRate subscriber never saw version {base + JOB_VERSIONS}")
        finally:
            stop_job(port, job["id"])
        own = commit(port, store, [set_at("m1", "color", "#010203")])
        final = store_snapshot(port, store)
        assert final["version"] == own, "nothing but the job and the test writes this store"
        for recorder in recorders:
            wait_for(lambda: recorder.latest_version() >= own, STREAM_TIMEOUT,
                     f"no frame reached the final version {own}")
        arrivals = [recorder.finish() for recorder in recorders]

    assert own - base > JOB_VERSIONS
    for view, frames in zip((everything, narrowed), arrivals):
        # Every change set follows for `everything`: each frame starts where the last one ended.
        check_rate_limited(view, frames, RATE, exact_from=view is everything)
        assert view.version == own
        assert view.models == project(final["models"], view.options)
        assert len(view.frames) < (own - base) / 10, "the job's change sets were not coalesced"



def test_max_rate_keeps_member_order_when_a_member_is_removed_and_set_again(server):
    """A member removed and set again within one interval goes to the end of its object in the
    store; the folded frame removes it and sets it again, after the members added meanwhile, so
    the subscriber's copy holds the members in the store's order."""
    port = server.port
    store = new_store(port, {"m": {"a": 1, "b": 2, "c": {"x": 1, "y": 2}}}, prefix="order")
    view = View(store, {"maxRate": BURST_RATE})
    with connect(port) as ws:
        view.subscribe(ws, port)
        view.read_until(ws, commit(port, store, [set_at("m", "b", 20)]))
        first_arrival = time.time()
        burst = [commit(port, store, [set_at("m", "a", None)]),
                 commit(port, store, [set_at("m", "d", 4)]),
                 commit(port, store, [set_at("m", "a", 5)]),
                 commit(port, store, [set_at("m", "c", None)]),
                 commit(port, store, [set_at("m", "c.y", 3)])]
        assert time.time() - first_arrival < BURST_BUDGET, "the burst took too long to fall in one interval"
        frame = view.read(ws, timeout=1 / BURST_RATE + FRAME_TIMEOUT)
        assert frame["version"] == burst[-1], frame
        assert [(c["path"], c["kind"]) for c in frame["changes"]] == [
            ("d", "created"), ("a", "deleted"), ("a", "created"), ("c", "deleted"), ("c", "created")], frame
        current = store_snapshot(port, store)["models"]["m"]
        assert list(current) == ["b", "d", "a", "c"]
        assert json.dumps(view.models["m"]) == json.dumps(current)

def test_max_rate_folds_a_burst_into_one_frame(server):
    """The first change after a quiet spell goes at once; the next ones wait for the rate and
    arrive folded into one frame per (model, path), with the value before the first of them."""
    port = server.port
    store = new_store(port, {"m": {"color": "#000000", "label": "M"}, "n": {"color": "#0000ff", "label": "N"}},
                      prefix="burst")
    view = View(store, {"paths": ["color"], "maxRate": BURST_RATE, "old": True})
    with connect(port) as ws:
        view.subscribe(ws, port)
        start = view.version
        first = commit(port, store, [set_at("m", "color", "#111111")])
        frame = view.read(ws)
        first_arrival = time.time()
        assert (frame["from"], frame["version"]) == (start, first), frame
        assert frame["changes"] == [change("m", "color", "updated", "#111111", "#000000")]
        burst = [commit(port, store, [set_at("m", "color", "#222222")]),
                 commit(port, store, [set_at("m", "label", "unlisted")]),
                 commit(port, store, [set_at("n", "color", "#444444")]),
                 commit(port, store, [set_at("m", "color", "#333333")])]
        assert time.time() - first_arrival < BURST_BUDGET, "the burst took too long to fall in one interval"
        frame = view.read(ws, timeout=1 / BURST_RATE + FRAME_TIMEOUT)
        arrival = time.time()
        assert (frame["from"], frame["version"]) == (first, burst[-1]), frame
        assert by_place(frame["changes"]) == [change("m", "color", "updated", "#333333", "#111111"),
                                              change("n", "color", "updated", "#444444", "#0000ff")]
        assert arrival - first_arrival >= BURST_SPACING / BURST_RATE, "two frames within 1 / maxRate"
        assert arrival - frame["firstCommittedAt"] / 1e6 <= 1 / BURST_RATE + LATE_SLACK
        assert projected_store(port, store, view.options) == (view.version, view.models)
