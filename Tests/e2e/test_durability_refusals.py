"""What the disk engine (`--data-dir`) refuses, and a full disk.

- A second process on a directory in use exits at once saying it is locked; a killed process
  leaves the directory usable; a data file that is garbage or another application's database is
  refused with a message naming it, never served.
- A full disk answers writes `507` (or `503`), keeps everything acknowledged, and writes succeed
  again once there is room.
"""

from __future__ import annotations

import contextlib
import random
import sqlite3
import subprocess

import pytest

from conftest import api, json_ok, store_snapshot, wait_for
from data_dir import REFUSAL_TIMEOUT, assert_refused, run_refused, start_on, stop_with, topic_seqs
from test_metrics import scrape, value as metric

DATA_FILE = "receptionist.sqlite3"
FILL_VALUE_BYTES = 16384   # each write that fills the small disk
FILL_ATTEMPTS = 400        # 400 * 16 KiB is far past 1 MiB
TMPFS_SMALL, TMPFS_LARGE = "1m", "16m"
ROOM_TIMEOUT = 10.0        # once there is room again, a write succeeds within this


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


@pytest.mark.parametrize("how", ["emptied after a stop", "emptied after a kill", "removed after a kill"])
def test_a_data_file_emptied_or_removed_is_refused_not_started_afresh(start_server, tmp_path, how):
    """A store written, the gateway stopped (or killed, its log still beside the file), then the
    data file truncated to nothing or removed: the gateway refuses to start, saying so, and leaves
    the log alone. Before, it started on a new empty database (SQLite takes an empty file for
    one, and threw the log away): every store and topic gone, in silence."""
    data = tmp_path / "data"
    first = start_on(start_server, data)
    json_ok(api(first.port, "POST", "/api/stores", {"name": "kept"}), 201)
    json_ok(api(first.port, "PUT", "/api/stores/kept/models/m", {"n": 1}), 201)
    stop_with(first, "SIGTERM" if how == "emptied after a stop" else "SIGKILL")
    path = data / DATA_FILE
    log = data / (DATA_FILE + "-wal")
    logged = log.read_bytes() if log.exists() else None
    if how.startswith("emptied"):
        path.write_bytes(b"")
    else:
        path.unlink()
    result, _ = run_refused(tmp_path, data, "refused")
    stderr = assert_refused(result, DATA_FILE)
    assert "the data directory held a database" in stderr, stderr
    assert (path.read_bytes() == b"") if how.startswith("emptied") else not path.exists()
    if logged is not None:
        assert log.read_bytes() == logged, "the log beside the file was changed"


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


@contextlib.contextmanager
def small_disk(start_server, tmp_path):
    """A tmpfs of TMPFS_SMALL at tmp_path/small; every server stopped and the tmpfs unmounted after."""
    data = tmp_path / "small"
    mount_tmpfs(data, TMPFS_SMALL)
    try:
        yield data
    finally:
        for server in start_server.servers:
            server.stop()
        subprocess.run(["umount", str(data)], capture_output=True, timeout=30)


def assert_storage_refusal(resp) -> None:
    assert resp.status in (503, 507), (resp.status, resp.body[:300])
    assert resp.media_type() == "application/json", resp.header("Content-Type")
    body = resp.json()
    assert isinstance(body.get("error"), str) and isinstance(body.get("detail"), str), body
    if resp.status == 507:
        assert body["error"] == "insufficient_storage", body


def test_full_disk_refuses_writes_keeps_what_was_acknowledged_and_recovers(start_server, tmp_path):
    with small_disk(start_server, tmp_path) as data:
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
        # The log says so, once, however many writes are refused (it said nothing before).
        wait_for(lambda: "writes to the data directory fail" in server.stderr_text(), ROOM_TIMEOUT, "the full disk was not logged")
        assert "the disk is full" in server.stderr_text()

        # Everything acknowledged is still there; the refused write is not.
        snapshot = store_snapshot(port, "fill")
        assert snapshot["version"] == len(acked)
        assert snapshot["models"] == acked
        # More writes while full are refused the same way, and change nothing; /metrics counts
        # them as failed writes, never as syncs (it counted every failed transaction as one).
        before = scrape(port)
        assert_storage_refusal(api(port, "PUT", "/api/stores/fill/models/more", {"pad": "y" * FILL_VALUE_BYTES}))
        assert store_snapshot(port, "fill")["version"] == len(acked)
        after = scrape(port)
        assert metric(after, "receptionist_disk_failed_writes_total") > metric(before, "receptionist_disk_failed_writes_total")
        assert metric(after, "receptionist_disk_syncs_total") == metric(before, "receptionist_disk_syncs_total")

        subprocess.run(["mount", "-o", f"remount,size={TMPFS_LARGE}", str(data)], check=True, timeout=10)

        def write_fits():
            resp = api(port, "PUT", "/api/stores/fill/models/after", {"n": "after"})
            if resp.status in (503, 507):
                return False
            assert resp.status == 201, (resp.status, resp.body)
            return resp

        resp = wait_for(write_fits, ROOM_TIMEOUT, "writes still refused once there was room")
        # Once each way, not once a write: a few, however many writes were refused.
        log = server.stderr_text()
        assert 1 <= log.count("writes to the data directory fail") <= 3, log
        assert log.rfind("writes to the data directory are stored again") > log.rfind("writes to the data directory fail"), log
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


def test_a_start_that_fails_on_a_full_disk_leaves_the_next_in_the_same_epochs(start_server, tmp_path):
    """A start that fails part way (the disk still full) may leave its run in the data file but not
    in the directory's lock file. Before, the next start took the data file for a copy put back:
    every store and topic in a new epoch, and the topics' history gone."""
    with small_disk(start_server, tmp_path) as data:
        server = start_on(start_server, data)
        port = server.port
        json_ok(api(port, "POST", "/api/stores", {"name": "kept"}), 201)
        json_ok(api(port, "PUT", "/api/stores/kept/models/m", {"n": 1}), 201)
        seqs = []
        for n in range(FILL_ATTEMPTS):
            resp = api(port, "POST", "/api/topics/filled/messages", {"n": n, "pad": "x" * FILL_VALUE_BYTES})
            if resp.status != 201:
                assert_storage_refusal(resp)
                break
            seqs.append(resp.json()["seq"])
        assert seqs and len(seqs) < FILL_ATTEMPTS, f"{len(seqs)} publishes of {FILL_VALUE_BYTES} bytes"
        before = store_snapshot(port, "kept")
        history = json_ok(api(port, "GET", "/api/topics/filled/messages?after=0&limit=1000"))
        stop_with(server, "SIGTERM")
        result, _ = run_refused(tmp_path, data, "still-full")
        assert_refused(result, "full")
        subprocess.run(["mount", "-o", f"remount,size={TMPFS_LARGE}", str(data)], check=True, timeout=10)
        again = start_on(start_server, data)
        after = store_snapshot(again.port, "kept")
        assert (after["epoch"], after["version"], after["models"]) == (before["epoch"], before["version"], before["models"])
        assert json_ok(api(again.port, "GET", "/api/topics/filled/messages?after=0&limit=1000")) == history
        assert "put back from a copy" not in again.stderr_text()
