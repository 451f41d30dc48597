"""Jobs' bounds (README, "Model stores and jobs"): at most 256 run at once, the newest 1,000 that
ended stay listed, and a job whose store is deleted fails instead of committing to a store nobody
can read.
"""

from __future__ import annotations

import http.client

import pytest

from conftest import api, assert_json_error, json_ok, wait_for
from procstat import rss_bytes
from test_jobs import animated_store, get_job, job_changes, start_job


@pytest.mark.parametrize("engine", ["memory", "disk"])
def test_a_job_on_a_deleted_store_fails_and_commits_no_more(start_server, tmp_path, engine):
    """In memory a job went on committing to a store it held after the store was deleted
    (14,006 change sets to a store nobody could read), listed `running` for good."""
    args = ("--data-dir", str(tmp_path / "data")) if engine == "disk" else ()
    port = start_server(*args, "--publish-rate", "0").port
    store = animated_store(port)
    job = start_job(port, store, 200)
    wait_for(lambda: job_changes(port, job["id"]) > 0, 10.0, "the job never committed")
    json_ok(api(port, "DELETE", f"/api/stores/{store}"))
    failed = wait_for(lambda: (j := get_job(port, job["id"]))["state"] == "failed" and j, 10.0, "the job kept running")
    assert failed["error"] == f"no store named '{store}'", failed
    assert get_job(port, job["id"]) == failed, "a failed job committed again"


def test_past_the_running_limit_a_new_job_is_503_until_one_stops(start_server):
    port = start_server().port
    store = animated_store(port, models=1)
    jobs = [start_job(port, store, 0.01) for _ in range(256)]
    assert_json_error(api(port, "POST", "/api/jobs", {"kind": "animate", "store": store, "rate": 0.01}), 503, "over_capacity")
    json_ok(api(port, "DELETE", f"/api/jobs/{jobs[0]['id']}"))
    wait_for(lambda: api(port, "POST", "/api/jobs", {"kind": "animate", "store": store, "rate": 0.01}).status == 201,
             10.0, "a stopped job made no room")


def test_a_finished_request_keeps_nothing_of_its_reply(start_server):
    """A job thread's finished work was kept until about 1,024 more had run: each read of a big
    snapshot held its reply, so one client reading a 4 MiB store again and again grew the gateway
    by some 4 MiB a read (2.1 GiB for a 20 MiB store read 100 times)."""
    server = start_server()
    port, store = server.port, "big-reads"
    json_ok(api(port, "POST", "/api/stores", {"name": store}), 201)
    for n in range(8):
        json_ok(api(port, "PUT", f"/api/stores/{store}/models/m{n}", {"text": "x" * 500_000}), 201)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)

    def read() -> None:
        connection.request("GET", f"/api/stores/{store}", headers={"Host": f"127.0.0.1:{port}"})
        response = connection.getresponse()
        assert response.status == 200 and len(response.read()) > 4_000_000

    for _ in range(5):
        read()
    before = rss_bytes(server.proc.pid)
    for _ in range(60):
        read()
    grown = rss_bytes(server.proc.pid) - before
    connection.close()
    assert grown < 64 << 20, f"{grown >> 20} MiB more after 60 reads of a 4 MiB store"
