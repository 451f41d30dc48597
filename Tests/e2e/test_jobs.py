"""Jobs: the demo animation, starting, retuning and stopping animate jobs, bad job requests."""

import contextlib
import itertools
import json
import re
import subprocess
import time

import pytest

from conftest import (
    api,
    assert_allow,
    assert_json_error,
    json_ok,
    server_binary,
    stop_job,
    store_snapshot,
    store_version,
    wait_for,
    wait_version_above,
)

COLOR = re.compile(r"#[0-9a-fA-F]{6}")
JOB_FIELDS = {"id", "kind", "store", "rate", "state", "changes"}
START_COLOR = "#000000"
_sequence = itertools.count()


@pytest.fixture(scope="module")
def demo_server(module_servers):
    return module_servers("--demo")


@pytest.fixture(scope="module")
def serial_demo_server(module_servers):
    """A demo server with one job thread, where a stopped job's last commit is observable.

    Store requests run on the job threads in arrival order, so with a single thread a store
    request made after a job's stop runs only once the slice the job had in flight has finished.
    """
    return module_servers("--demo", "--job-threads", "1")


def list_jobs(port: int) -> list[dict]:
    body = json_ok(api(port, "GET", "/api/jobs"))
    assert set(body) == {"jobs"}, body
    for job in body["jobs"]:
        assert_job_shape(job)
    return body["jobs"]


def find_job(port: int, job_id: str) -> dict | None:
    matches = [job for job in list_jobs(port) if job["id"] == job_id]
    assert len(matches) <= 1, matches
    return matches[0] if matches else None


def assert_job_shape(job: dict) -> None:
    assert JOB_FIELDS <= set(job), job
    assert isinstance(job["id"], str) and job["id"], job
    assert isinstance(job["rate"], (int, float)) and not isinstance(job["rate"], bool), job
    assert isinstance(job["changes"], int) and job["changes"] >= 0, job
    assert job["state"] in ("running", "stopped", "failed"), job


def get_job(port: int, job_id: str) -> dict:
    """GET /api/jobs/{id}, checked for shape."""
    job = json_ok(api(port, "GET", f"/api/jobs/{job_id}"))
    assert_job_shape(job)
    assert job["id"] == job_id, job
    return job


def job_changes(port: int, job_id: str) -> int:
    job = find_job(port, job_id)
    assert job is not None, f"job {job_id} vanished while running"
    return job["changes"]


def animated_store(port: int, models: int = 4) -> str:
    """A new store holding `models` models, all colored START_COLOR."""
    name = f"anim-{next(_sequence)}"
    json_ok(api(port, "POST", "/api/stores", {"name": name}), 201)
    for i in range(models):
        value = {"color": START_COLOR, "label": f"L{i}", "meta": {"i": i}}
        json_ok(api(port, "PUT", f"/api/stores/{name}/models/m{i}", value), 201)
    return name


def start_job(port: int, store: str, rate) -> dict:
    job = json_ok(api(port, "POST", "/api/jobs", {"kind": "animate", "store": store, "rate": rate}), 201)
    assert_job_shape(job)
    assert (job["kind"], job["store"], job["rate"], job["state"]) == ("animate", store, rate, "running"), job
    return job


@contextlib.contextmanager
def running_job(port: int, store: str, rate):
    """Start an animate job and make sure it is stopped when the block ends."""
    job = start_job(port, store, rate)
    try:
        yield job
    finally:
        resp = api(port, "DELETE", f"/api/jobs/{job['id']}")
        assert resp.status in (200, 404), resp.body


def assert_stopped_for_good(port: int, store: str, base: int, job_ids) -> int:
    """After the jobs `job_ids` were stopped on `serial_demo_server`: every version `store` gained
    since `base` is a change set they report committing, and the store takes no more of them.

    Nothing but the jobs may have written `store` since `base`. The test's own commit runs after
    the jobs' last slices, so its version is exactly one past theirs. Then the demo job commits
    a few change sets on the same job thread, while a job still running would have committed
    many, and the store must not have moved. Returns the version the jobs left the store at.
    """
    # m0 as `animated_store` wrote it, in a color a job gives it once in 2^24 picks: a write of
    # the value already there would make no version.
    value = {"color": "#0a0b0c", "label": "L0", "meta": {"i": 0}}
    own = json_ok(api(port, "PUT", f"/api/stores/{store}/models/m0", value))["version"]
    jobs = [get_job(port, job_id) for job_id in job_ids]
    assert all(job["state"] == "stopped" for job in jobs), jobs
    changes = sum(job["changes"] for job in jobs)
    assert own == base + changes + 1, (
        f"our commit got version {own}, but the jobs report {changes} change sets since version {base}")
    tiles = store_version(port, "tiles")
    wait_version_above(port, "tiles", tiles + 4)
    assert store_version(port, store) == own, "the store moved after its jobs were stopped"
    assert [get_job(port, job_id) for job_id in job_ids] == jobs, "a stopped job went on committing"
    return own - 1


def assert_animated_shape(models: dict, count: int) -> None:
    """Animation changes colors only: labels and other keys stay as written."""
    assert set(models) == {f"m{i}" for i in range(count)}, models
    for i in range(count):
        value = models[f"m{i}"]
        assert set(value) == {"color", "label", "meta"}, value
        assert COLOR.fullmatch(value["color"]), value
        assert value["label"] == f"L{i}" and value["meta"] == {"i": i}, value


# ---- Without jobs ------------------------------------------------------

def test_no_jobs_without_demo(start_server):
    server = start_server()
    assert list_jobs(server.port) == []


def test_help_documents_job_options():
    result = subprocess.run([str(server_binary()), "serve", "--help"],
                            capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    text = (result.stdout + result.stderr).decode("utf-8", "replace")
    for option in ["--demo", "--demo-rate", "--job-threads", "--max-queued-work"]:
        assert option in text, f"{option} missing from help:\n{text}"


# ---- The demo job ------------------------------------------------------

def test_demo_job_is_listed_running(demo_server):
    jobs = list_jobs(demo_server.port)
    demo = [job for job in jobs if job["store"] == "tiles"]
    assert len(demo) == 1, jobs
    job = demo[0]
    assert (job["kind"], job["rate"], job["state"]) == ("animate", 30, "running"), job
    first = job["changes"]
    wait_for(lambda: job_changes(demo_server.port, job["id"]) > first, 10.0,
             "the demo job's change counter never rose")


def test_demo_tiles_version_moves_and_tiles_are_recolored(demo_server):
    port = demo_server.port
    before = store_snapshot(port, "tiles")
    wait_version_above(port, "tiles", before["version"] + 3)

    def recolored():
        models = store_snapshot(port, "tiles")["models"]
        changed = [k for k in before["models"] if models[k]["color"] != before["models"][k]["color"]]
        return (models, changed) if changed else None

    models, _ = wait_for(recolored, 10.0, "no tile changed color")
    for tile_id, value in models.items():
        assert COLOR.fullmatch(value["color"]), (tile_id, value)
        assert value["label"] == before["models"][tile_id]["label"], (tile_id, value)
    assert len(models) == 64


def test_demo_rate_option_sets_and_bounds_the_rate(start_server):
    rate = 7
    server = start_server("--demo", "--demo-rate", str(rate))
    [job] = list_jobs(server.port)
    assert (job["kind"], job["store"], job["rate"], job["state"]) == ("animate", "tiles", rate, "running")
    # Upper bound only: a slow machine may lag behind the rate but never run ahead of it.
    started = time.monotonic()
    first = job_changes(server.port, job["id"])
    wanted = first + 14
    changes = wait_for(lambda: (c := job_changes(server.port, job["id"])) >= wanted and c, 15.0,
                       f"demo job at {rate}/s never reached {wanted} changes")
    elapsed = time.monotonic() - started
    assert changes - first <= rate * elapsed * 1.25 + 3, (
        f"{changes - first} changes in {elapsed:.2f}s at a rate of {rate}/s")


def test_demo_rate_from_environment(start_server):
    server = start_server(env={"RECEPTIONIST_DEMO": "1", "RECEPTIONIST_DEMO_RATE": "12"})
    [job] = list_jobs(server.port)
    assert (job["store"], job["rate"], job["state"]) == ("tiles", 12, "running")


# ---- Starting, retuning and stopping a job -----------------------------

def test_animate_job_lifecycle(serial_demo_server):
    port = serial_demo_server.port
    store = animated_store(port)
    created_at = store_version(port, store)
    demo_ids = {job["id"] for job in list_jobs(port)}

    job = start_job(port, store, 20)
    job_path = f"/api/jobs/{job['id']}"
    try:
        assert job["id"] not in demo_ids
        listed = find_job(port, job["id"])
        assert listed is not None and listed["state"] == "running" and listed["rate"] == 20, listed
        assert demo_ids <= {j["id"] for j in list_jobs(port)}, "the demo job must keep running"

        # It recolors the store: the version moves and colors change, nothing else does.
        wait_version_above(port, store, created_at)

        def recolored():
            models = store_snapshot(port, store)["models"]
            return models if any(v["color"] != START_COLOR for v in models.values()) else None

        assert_animated_shape(wait_for(recolored, 10.0, "no model was recolored"), 4)
        wait_for(lambda: job_changes(port, job["id"]) > 0, 10.0, "the job's change counter stayed at 0")

        # Raise the rate: 150 more changes within 5 s are out of reach at 20/s.
        patched = json_ok(api(port, "PATCH", job_path, {"rate": 500}))
        assert_job_shape(patched)
        assert (patched["id"], patched["kind"], patched["store"], patched["rate"], patched["state"]) == (
            job["id"], "animate", store, 500, "running"), patched
        assert find_job(port, job["id"])["rate"] == 500
        base = job_changes(port, job["id"])
        wait_for(lambda: job_changes(port, job["id"]) >= base + 150, 5.0,
                 "the job did not speed up after its rate was raised")
    finally:
        resp = api(port, "DELETE", job_path)

    stopped = json_ok(resp)
    assert_job_shape(stopped)
    assert (stopped["id"], stopped["kind"], stopped["store"], stopped["state"]) == (
        job["id"], "animate", store, "stopped"), stopped
    assert stopped["changes"] >= base + 150
    # An ended job is not retuned: 409, and its rate stays what it ran at.
    again = api(port, "PATCH", job_path, {"rate": 7})
    assert again.status == 409 and json.loads(again.body)["error"] == "conflict", (again.status, again.body)
    assert json_ok(api(port, "GET", job_path))["rate"] == 500

    # The store's version stops moving, and stays put.
    settled = assert_stopped_for_good(port, store, created_at, [job["id"]])
    assert settled > created_at
    final_changes = settled - created_at
    assert final_changes >= stopped["changes"]
    after = find_job(port, job["id"])
    assert after is None or (after["state"] == "stopped" and after["changes"] == final_changes), after
    assert_animated_shape(store_snapshot(port, store)["models"], 4)

    # Other jobs are unaffected.
    tiles = store_version(port, "tiles")
    wait_version_above(port, "tiles", tiles)


def test_two_jobs_on_one_store_have_distinct_ids(serial_demo_server):
    port = serial_demo_server.port
    store = animated_store(port, models=2)
    base = store_version(port, store)
    with running_job(port, store, 10) as first, running_job(port, store, 15) as second:
        assert first["id"] != second["id"]
        listed = {job["id"]: job for job in list_jobs(port)}
        assert listed[first["id"]]["rate"] == 10 and listed[second["id"]]["rate"] == 15
        assert listed[first["id"]]["store"] == listed[second["id"]]["store"] == store
        for job_id in (first["id"], second["id"]):
            assert json_ok(api(port, "DELETE", f"/api/jobs/{job_id}"))["state"] == "stopped"
    assert_stopped_for_good(port, store, base, [first["id"], second["id"]])


@pytest.mark.parametrize("rate", [0.5, 10000000])
def test_rate_bounds_are_accepted(serial_demo_server, rate):
    port = serial_demo_server.port
    store = animated_store(port, models=1)
    base = store_version(port, store)
    job = start_job(port, store, rate)
    stopped = stop_job(port, job["id"])
    assert (stopped["id"], stopped["rate"], stopped["state"]) == (job["id"], rate, "stopped"), stopped
    assert_stopped_for_good(port, store, base, [job["id"]])


def test_jobs_share_a_single_job_thread(start_server):
    server = start_server("--demo", "--job-threads", "1")
    port = server.port
    store = animated_store(port)
    before = store_version(port, store)
    with running_job(port, store, 50):
        tiles = store_version(port, "tiles")
        wait_version_above(port, store, before)
        wait_version_above(port, "tiles", tiles)
        wait_version_above(port, store, store_version(port, store))


# ---- Bad job requests --------------------------------------------------

@pytest.fixture(scope="module")
def idle_store(demo_server):
    return animated_store(demo_server.port, models=1)


BAD = {400: "bad_request"}
IDLE = object()  # stands for the module's idle store
BAD_JOBS = {
    "unknown-kind": ({"kind": "explode", "store": IDLE, "rate": 10}, BAD),
    "missing-kind": ({"store": IDLE, "rate": 10}, BAD),
    "rate-zero": ({"kind": "animate", "store": IDLE, "rate": 0}, BAD),
    "rate-negative": ({"kind": "animate", "store": IDLE, "rate": -1}, BAD),
    "rate-too-high": ({"kind": "animate", "store": IDLE, "rate": 10000001}, BAD),
    "rate-string": ({"kind": "animate", "store": IDLE, "rate": "fast"}, BAD),
    "rate-null": ({"kind": "animate", "store": IDLE, "rate": None}, BAD),
    "rate-bool": ({"kind": "animate", "store": IDLE, "rate": True}, BAD),
    "rate-list": ({"kind": "animate", "store": IDLE, "rate": [10]}, BAD),
    "unknown-store": ({"kind": "animate", "store": "no-such-store", "rate": 10}, {404: "not_found"}),
    "missing-store": ({"kind": "animate", "rate": 10}, {400: "bad_request", 404: "not_found"}),
}


@pytest.mark.parametrize("payload, expected", list(BAD_JOBS.values()), ids=list(BAD_JOBS))
def test_bad_job_request_is_rejected(demo_server, idle_store, payload, expected):
    port = demo_server.port
    payload = {key: idle_store if value is IDLE else value for key, value in payload.items()}
    before = list_jobs(port)
    assert_json_error(api(port, "POST", "/api/jobs", payload), expected)
    assert {j["id"] for j in list_jobs(port)} == {j["id"] for j in before}, "a rejected job was created"


@pytest.mark.parametrize("body", [b'{"kind":', b"[]", b"", b'"animate"'],
                         ids=["truncated", "array", "empty", "string"])
def test_malformed_job_body_is_400(demo_server, body):
    before = {j["id"] for j in list_jobs(demo_server.port)}
    assert_json_error(api(demo_server.port, "POST", "/api/jobs", body=body), 400, "bad_request")
    assert {j["id"] for j in list_jobs(demo_server.port)} == before


@pytest.mark.parametrize("payload", [{"rate": 0}, {"rate": -5}, {"rate": 10000001}, {"rate": "x"},
                                     {"rate": None}, [60]],
                         ids=["zero", "negative", "too-high", "string", "null", "array"])
def test_bad_rate_patch_is_400_and_keeps_the_rate(demo_server, idle_store, payload):
    port = demo_server.port
    with running_job(port, idle_store, 5) as job:
        assert_json_error(api(port, "PATCH", f"/api/jobs/{job['id']}", payload), 400, "bad_request")
        listed = find_job(port, job["id"])
        assert listed["rate"] == 5 and listed["state"] == "running", listed


@pytest.mark.parametrize("method, payload", [("PATCH", {"rate": 5}), ("DELETE", None)])
@pytest.mark.parametrize("job_id", ["job-999999", "nonsense"])
def test_unknown_job_is_404(demo_server, method, payload, job_id):
    port = demo_server.port
    before = list_jobs(port)
    resp = api(port, method, f"/api/jobs/{job_id}", *([payload] if payload is not None else []))
    assert_json_error(resp, 404, "not_found")
    assert {j["id"] for j in list_jobs(port)} == {j["id"] for j in before}


def test_jobs_wrong_method_is_405_with_allow(demo_server):
    port = demo_server.port
    [demo] = [job for job in list_jobs(port) if job["store"] == "tiles"]
    assert_allow(api(port, "PUT", "/api/jobs", body=b"{}"), "PUT", {"GET", "POST"})
    assert_allow(api(port, "DELETE", "/api/jobs"), "DELETE", {"GET", "POST"})
    assert_allow(api(port, "POST", f"/api/jobs/{demo['id']}", body=b"{}"), "POST", {"PATCH", "DELETE"})
    assert_allow(api(port, "PUT", "/api/jobs/job-99999", body=b"{}"), "PUT", {"PATCH", "DELETE"})  # no such job: 405 too
    assert (after := find_job(port, demo["id"]))["state"] == "running" and after["rate"] == 30, after


def test_a_job_at_the_highest_rate_does_not_starve_store_requests(start_server):
    # Store requests share the job threads with the job's slices: a slice is kept short, so a
    # request waits for at most a few of them, however fast the job is asked to go.
    port = start_server("--demo", "--job-threads", "2").port
    store = animated_store(port, models=8)
    job = start_job(port, store, 10000000)
    try:
        for _ in range(20):
            start = time.monotonic()
            assert api(port, "GET", f"/api/stores/{store}", timeout=10).status == 200
            created = api(port, "POST", "/api/stores", {"name": f"starve-{next(_sequence)}"}, timeout=10)
            assert created.status == 201, created
            assert time.monotonic() - start < 0.5, time.monotonic() - start
    finally:
        stop_job(port, job["id"])

