"""A soak run: the release binary under mixed load for SOAK_SECONDS, watched from /proc.

The load: WebSocket subscribers to stores and topics that check every frame, HTTP publishes and
store PATCHes, clients that disconnect (politely or with a reset) and resume with `since`,
deliberately slow readers that get conflated or closed with 1008 and come back, short HTTP
connections, and clients that send one malformed frame each (unmasked, a reserved opcode, invalid
UTF-8, an oversized message) and must be closed with 1002, 1007 or 1009. Every SAMPLE_SECONDS the server's resident memory and descriptor count are printed.

It exits non-zero unless, at the end:
- resident memory is within RSS_SLACK of the baseline taken after the warm-up (the allocator's
  arenas, the topics' and stores' histories and the connections' buffers have all reached their
  working size by then, so growth beyond it is a leak);
- the descriptor count is back to what it was before any client connected, once they have left;
- the resuming clients lost nothing (no gap, no reset snapshot) and every live subscriber saw
  every sequence number and version, in order, once, and ends with the server's state;
- every malformed frame was answered with its close code (and some were sent);
- the server is alive and logged nothing at error level.

Usage: SOAK_SECONDS=600 RECEPTIONIST_BIN=.build/release/receptionist .venv/bin/python Tests/soak/soak.py
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from actors import (  # noqa: E402
    HISTORY,
    MAX_MESSAGE,
    MAX_QUEUED,
    MODELS,
    RESUMERS,
    SLOW_READERS,
    STORE_SUBSCRIBERS,
    STORES,
    TOPIC_SUBSCRIBERS,
    TOPICS,
    HTTPChurn,
    MalformedFramer,
    Patcher,
    Publisher,
    Resumer,
    SlowReader,
    StoreSubscriber,
    Tally,
    TopicSubscriber,
)
from conftest import api, json_ok, launch_server, wait_for  # noqa: E402
from procstat import error_lines, fd_count, rss_bytes, steady_fd_count  # noqa: E402

SECONDS = float(os.environ.get("SOAK_SECONDS", "600"))
WARM_UP = max(20.0, SECONDS * 0.15)
SAMPLE_SECONDS = 5.0
RSS_SLACK = 0.10


def set_up(port: int) -> None:
    for store in STORES:
        json_ok(api(port, "POST", "/api/stores", {"name": store}), 201)
        changes = [{"op": "put", "model": f"m{i}", "value": {"color": "#ffffff", "n": i}} for i in range(MODELS)]
        json_ok(api(port, "POST", f"/api/stores/{store}/changes", {"changes": changes}))


def sample(pid: int, started: float) -> tuple[float, int, int]:
    elapsed, rss, fds = time.monotonic() - started, rss_bytes(pid), fd_count(pid)
    print(f"t={elapsed:6.0f}s  rss={rss / 1048576:7.1f} MiB  fds={fds:4d}", flush=True)
    return elapsed, rss, fds


def main() -> int:
    workdir = Path(tempfile.mkdtemp(prefix="receptionist-soak-"))
    server = launch_server(workdir, ["--history", HISTORY, "--max-queued-bytes", MAX_QUEUED,
                                     "--max-message-bytes", MAX_MESSAGE,
                                     "--ping-interval", 20, "--ping-timeout", 10, "--idle-timeout", 10])
    pid, port = server.proc.pid, server.port
    print(f"soak: {SECONDS:.0f}s against pid {pid} on port {port} (warm-up {WARM_UP:.0f}s)", flush=True)
    failures: list[str] = []
    try:
        set_up(port)
        fds_before = steady_fd_count(pid)
        stop, tally = threading.Event(), Tally()
        context = (port, stop, tally)
        readers = ([StoreSubscriber(i, *context) for i in range(STORE_SUBSCRIBERS)]
                   + [TopicSubscriber(i, *context) for i in range(TOPIC_SUBSCRIBERS)])
        actors = readers + [Resumer(i, *context) for i in range(RESUMERS)] \
            + [SlowReader(i, *context) for i in range(SLOW_READERS)] \
            + [Publisher(topic, *context) for topic in TOPICS] \
            + [Patcher("patcher", *context), HTTPChurn("http", *context), MalformedFramer("malformed", *context)]
        for actor in actors:
            actor.start()

        started = time.monotonic()
        samples, baseline_rss = [], None
        while time.monotonic() - started < SECONDS:
            time.sleep(SAMPLE_SECONDS)  # the sampling period; nothing waits on it
            samples.append(sample(pid, started))
            if baseline_rss is None and samples[-1][0] >= WARM_UP:
                baseline_rss = samples[-1][1]
                print(f"baseline after warm-up: rss={baseline_rss / 1048576:.1f} MiB", flush=True)
            if server.proc.poll() is not None:
                failures.append(f"the server exited with {server.proc.returncode}")
                break
        stop.set()
        for actor in actors:
            actor.join(15)
            if actor.is_alive():
                failures.append(f"{actor.name} did not stop")

        # The live store subscribers end with the server's state.
        for reader in readers:
            if isinstance(reader, StoreSubscriber) and reader.replica is not None:
                snapshot = json_ok(api(port, "GET", f"/api/stores/{reader.store}"))
                if snapshot["version"] == reader.replica.version and snapshot["models"] != reader.replica.models:
                    failures.append(f"{reader.name}: its copy differs from the store at {snapshot['version']}")

        try:
            fds_after = wait_for(lambda: (n := fd_count(pid)) <= fds_before and n, 15,
                                 f"descriptors did not return to {fds_before}")
        except AssertionError as error:
            fds_after = fd_count(pid)
            failures.append(str(error))
        final_rss = rss_bytes(pid)
        steady = [rss for elapsed, rss, _ in samples if elapsed >= WARM_UP]
        print(f"\nsoak: {SECONDS:.0f}s, {len(actors)} actors; counts {json.dumps(tally.counts, sort_keys=True)}")
        if baseline_rss is not None:
            print(f"rss: baseline {baseline_rss / 1048576:.1f} MiB, after warm-up min {min(steady) / 1048576:.1f} "
                  f"max {max(steady) / 1048576:.1f}, final {final_rss / 1048576:.1f} MiB "
                  f"({(final_rss / baseline_rss - 1) * 100:+.1f}%)")
            if final_rss > baseline_rss * (1 + RSS_SLACK):
                failures.append(f"final rss {final_rss} is more than {RSS_SLACK:.0%} over the baseline {baseline_rss}")
        else:
            failures.append("the run ended before the warm-up did")
        print(f"fds: before clients {fds_before}, peak {max(f for _, _, f in samples)}, after clients left {fds_after}")
        print(f"lost by resuming clients: {tally.counts.get('lost', 0)}")
        malformed = tally.counts.get("malformed", 0)
        print(f"malformed frames: {malformed} closed with the right code "
              f"(1002: {tally.counts.get('malformed-1002', 0)}, 1007: {tally.counts.get('malformed-1007', 0)}, "
              f"1009: {tally.counts.get('malformed-1009', 0)}), {tally.counts.get('malformed-wrong', 0)} wrong")
        if malformed == 0:
            failures.append("no malformed frame was answered with its close code")
        failures += tally.problems
        errors = error_lines(server.stderr_text())
        if errors:
            failures.append(f"{len(errors)} error-level log lines, first: {errors[0]}")
        if server.proc.poll() is not None:
            failures.append(f"the server exited with {server.proc.returncode}")
    finally:
        server.stop()
    for failure in failures:
        print(f"FAIL: {failure}")
    print("soak: " + ("FAILED" if failures else "passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
