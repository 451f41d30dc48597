"""Helpers for the durability tests of the disk engine (test_durability*.py): gateways on a data
directory, stopped with SIGTERM or SIGKILL or refused at start, and all a gateway holds read back
page by page, as exact bytes where the bytes are the contract.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

from conftest import HOST, api, json_ok, server_binary

EXIT_TIMEOUT = 10.0        # a stopped gateway has exited
REFUSAL_TIMEOUT = 5.0      # a gateway that must not start has exited
STREAM_TIMEOUT = 15.0      # a run of frames that is already due
IO_TIMEOUT = 10.0          # one HTTP request under load
READ_PAGE = 1000           # the most change sets or messages one read answers


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
