"""`--config FILE` (YAML or JSON): options by their long names, the order of precedence (command
line, environment, file), bad files refused with the line and the key, and namespaces applied."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from conftest import api, http_client_request, server_binary
from wsclient import connect, recv_json, send_json, subscribe, unique

KEY = "config-key"


def keyed(port: int, method: str, path: str, payload=None, key: str = KEY):
    body = None if payload is None else json.dumps(payload).encode()
    return http_client_request(port, method, path, body=body,
                               headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"})


def refused_start(tmp_path, text: str, name: str = "bad.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    result = subprocess.run([str(server_binary()), "serve", "--port", "0", "--config", str(path)],
                            capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    assert result.returncode != 0, result
    return result.stderr.decode("utf-8", "replace")


@pytest.mark.parametrize("text, expected", [
    ("port: 0\nhistory: 100\nhistroy: 3\n", "line 3: 'histroy' is not an option of receptionist serve"),
    ("demo: maybe\n", "line 1: 'demo' must be true or false"),
    ("allowed-origin: [https://a.example, [2]]\n", "line 1: 'allowed-origin' must be a list of values"),
    ("history: [1, 2]\n", "line 1: 'history' takes one value, not a list"),
    ("port: 1\nport: 2\n", "line 2: 'port' is given twice"),
    ('{"port": 1, "port": 2}\n', "line 1: 'port' is given twice"),
    ("namespaces:\n  - pattern: a.*\n    history: 1\n    history: 2\n", "line 4: 'namespaces.history' is given twice"),
    # The YAML parser builds its tree by recursion: nested 10,000 deep, the process crashed.
    pytest.param("history: " + "[" * 10000 + "]" * 10000 + "\n", "line 1: the file nests collections more than 64 deep",
                 id="nested-10000"),
    # A value the option refuses is told with the file's line and key, as a bad key is.
    ("port: 0\nhistory: lots\n", "line 2: 'history' is refused: The value 'lots' is invalid for '--history"),
    ("port: 0\n\nhistory-bytes: 12\n", "line 3: 'history-bytes' is refused: --history-bytes must be at least"),
    ("namespaces:\n  - pattern: a.*\n    presense: false\n", "line 3: 'namespaces.presense' is not a namespace setting"),
    ("namespaces:\n  - presence: false\n", "'namespaces.pattern' is required"),
    ("namespaces:\n  - pattern: a.*\n    hooks: [connect]\n", "line 3: 'namespaces.hooks' names 'connect'"),
    ("namespaces:\n  - pattern: a.*\n    maxRate: 0\n", "line 3: 'namespaces.maxRate' must be a number"),
    ("namespaces:\n  - pattern: a.*\n    history: 5000\n", "keeps a history of 5000, more than --history (1000)"),
    # A pattern that matches no name, or one an earlier pattern covers, would leave its settings
    # unapplied in silence: `*.orders` let a token publish where `clientPublish: false` was meant.
    ("namespaces:\n  - pattern: '*.orders'\n    clientPublish: false\n", "line 2: 'namespaces.pattern' '*.orders' matches no name"),
    ("namespaces:\n  - pattern: a*b\n", "'a*b' matches no name"),
    ("namespaces:\n  - pattern: '**'\n", "'**' matches no name"),
    ("namespaces:\n  - pattern: bad name\n", "'bad name' matches no name"),
    ("namespaces:\n  - pattern: a.*\n  - pattern: a.b\n", "line 3: 'namespaces.pattern' 'a.b' never applies: the namespace 'a.*'"),
    ("namespaces:\n  - pattern: '*'\n  - pattern: b.*\n", "'b.*' never applies"),
    ("namespaces:\n  - pattern: c\n  - pattern: c\n", "'c' never applies"),
    ("port: [0\n", "is not YAML or JSON"),
    ("max-queued-work: 0\n", "line 1: 'max-queued-work' is refused: --max-queued-work must be positive"),
])
def test_a_bad_file_is_refused_at_start_with_the_line_and_the_key(tmp_path, text, expected):
    assert expected in refused_start(tmp_path, text)


def refused_command(args: list[str], env: dict[str, str] | None = None) -> str:
    result = subprocess.run([str(server_binary()), "serve", "--port", "0", *args], capture_output=True, timeout=30,
                            stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})})
    assert result.returncode not in (0, -4, 132), result  # refused with a message, not a trap
    return result.stderr.decode("utf-8", "replace")


@pytest.mark.parametrize("args, expected", [
    (["--idle-timeout", "inf"], "--idle-timeout must be 0.001 to 86400.0 seconds"),
    (["--head-timeout", "1e300"], "--head-timeout must be"),
    (["--drain-timeout", "inf"], "--drain-timeout must be 0.0 to 3600.0 seconds"),
    (["--demo-rate", "inf"], "--demo-rate must be"),
    (["--publish-rate", "1e300"], "--publish-rate must be"),
    (["--sse-heartbeat", "nan"], "--sse-heartbeat must be"),
    (["--idempotency-window", "inf"], "--idempotency-window must be"),
])
def test_a_time_or_rate_too_large_to_use_is_refused_at_start(args, expected):
    """Each passed a test of its sign, then trapped converting to milliseconds or a count: on the
    first connection, at SIGTERM (no client told), or in a job thread."""
    assert expected in refused_command(args)


@pytest.mark.parametrize("value", ["n", "disabled", "false ", "2"])
def test_a_flag_in_the_environment_must_say_yes_or_no(value):
    """`RECEPTIONIST_INSECURE_OPEN=n` turned the flag on: anything not on the list of noes was a
    yes, and the gateway listened on every interface with no key."""
    stderr = refused_command(["--host", "0.0.0.0"], {"RECEPTIONIST_INSECURE_OPEN": value})
    assert "RECEPTIONIST_INSECURE_OPEN must be 1, true, yes or on, or 0, false, no, off or empty" in stderr, stderr


@pytest.mark.parametrize("args", [
    ["--engine", "redis", "--redis-url", "redis://:S3CRETPW@127.0.0.1:99999/0"],
    ["--engine", "redis", "--redis-url", "redis://user:S3CRETPW@host:notaport/0"],
    ["--hook-connect", "ftp://user:S3CRETPW@backend/connect"],
])
def test_a_refused_url_is_told_without_its_credentials(args):
    """A start refused for a URL it cannot use wrote the URL back whole, password and all, to
    stderr and whatever collects it."""
    stderr = refused_command(args)
    assert "…@" in stderr and "S3CRETPW" not in stderr, stderr


@pytest.mark.parametrize("args, expected", [
    (["--max-head-bytes", "10"], "--max-head-bytes must be 256...65535"),
    (["--hook-forward-header", "bad header"], "--hook-forward-header must name a header"),
    (["--hook-forward-header", ""], "--hook-forward-header must name a header"),
])
def test_a_setting_that_would_refuse_every_request_or_forward_nothing_is_refused(args, expected):
    """`--max-head-bytes 10` started a gateway that answered every request, /healthz too, 431;
    a header name with a space was taken, and forwarded nothing."""
    assert expected in refused_command(args)


def test_settings_that_cannot_be_what_was_meant_are_warned_of_at_start(start_server):
    server = start_server("--token-secret", "short", "--redis-url", "redis://127.0.0.1:1/0",
                          env={"RECEPTIONIST_HISTROY": "5", "RECEPTIONIST_API_KEY": "REPLACE-ME-api-key"})
    log = server.stderr_text()
    assert "variable=RECEPTIONIST_HISTROY" in log and "names no option" in log, log
    assert "--redis-url is ignored without --engine redis" in log, log
    assert "the token secret is shorter than 32 bytes" in log, log
    assert "an API key is still the deployment example's placeholder" in log, log
    quiet = start_server("--token-secret", "k" * 32).stderr_text()
    assert "names no option" not in quiet and "shorter than 32 bytes" not in quiet, quiet


def test_a_start_that_fails_is_told_in_json_when_the_log_is_json(tmp_path):
    taken = tmp_path / "a-file"
    taken.write_text("")
    stderr = refused_command(["--log-format", "json", "--data-dir", str(taken)])
    lines = [json.loads(line) for line in stderr.splitlines() if line.strip()]
    assert any(line["level"] == "critical" and line["message"] == "cannot start" and "error" in line for line in lines), stderr


def test_json_is_read_too(tmp_path):
    assert "line 2: 'histroy' is not an option" in refused_start(tmp_path, '{"port": 0,\n "histroy": 3}\n', "bad.json")


def test_the_command_line_wins_over_the_environment_which_wins_over_the_file(start_server, tmp_path):
    config = tmp_path / "gateway.yaml"
    config.write_text("api-key: file-key\nmax-body-bytes: 2048\n")
    from_file = start_server("--config", str(config))
    assert keyed(from_file.port, "POST", "/api/topics/t/messages", {"n": 1}, key="file-key").status == 201
    assert keyed(from_file.port, "POST", "/api/topics/t/messages", {"n": "x" * 3000}, key="file-key").status == 413
    from_env = start_server(env={"RECEPTIONIST_CONFIG": str(config), "RECEPTIONIST_API_KEY": "env-key"})
    assert keyed(from_env.port, "POST", "/api/topics/t/messages", {"n": 1}, key="env-key").status == 201
    assert keyed(from_env.port, "POST", "/api/topics/t/messages", {"n": 1}, key="file-key").status == 401
    from_cli = start_server("--api-key", "cli-key", "--max-body-bytes", "4096",
                            env={"RECEPTIONIST_CONFIG": str(config), "RECEPTIONIST_API_KEY": "env-key"})
    assert keyed(from_cli.port, "POST", "/api/topics/t/messages", {"n": 1}, key="cli-key").status == 201
    assert keyed(from_cli.port, "POST", "/api/topics/t/messages", {"n": 1}, key="env-key").status == 401
    assert keyed(from_cli.port, "POST", "/api/topics/t/messages", {"n": "x" * 3000}, key="cli-key").status == 201


def test_a_flag_the_file_or_the_environment_sets_is_turned_off_on_the_command_line(start_server, tmp_path):
    """`--no-demo` wins over `demo: true` in the file and `RECEPTIONIST_DEMO=1`, as any option on
    the command line wins; the last of `--demo` and `--no-demo` given counts."""
    config = tmp_path / "gateway.yaml"
    config.write_text("demo: true\nenable-echo: true\n")

    def has_demo(server) -> bool:
        return api(server.port, "GET", "/api/stores/tiles").status == 200

    assert has_demo(start_server("--config", str(config)))
    off = start_server("--config", str(config), "--no-demo", "--no-enable-echo", env={"RECEPTIONIST_DEMO": "1"})
    assert not has_demo(off)
    assert api(off.port, "GET", "/ws/echo").status == 404
    assert has_demo(start_server("--no-demo", "--demo"))


@pytest.fixture(scope="module")
def namespaced(module_servers, tmp_path_factory):
    config = tmp_path_factory.mktemp("config") / "gateway.yaml"
    config.write_text(f"""\
api-key: [{KEY}]
history: 100
namespaces:
  - pattern: "quiet.*"
    presence: false
    clientPublish: false
  - pattern: "short.*"
    history: 2
  - pattern: "slow.*"
    maxRate: 2
""")
    return module_servers("--config", str(config))


def test_a_namespace_turns_presence_and_client_publishes_off(namespaced):
    with connect(namespaced.port) as ws:
        frame = subscribe(ws, topic="quiet.room", presence=True)
        assert frame["type"] == "error" and frame["code"] == "forbidden", frame
        assert subscribe(ws, topic="loud.room", presence=True)["type"] == "subscribed"
    assert http_client_request(namespaced.port, "GET", "/api/topics/quiet.room/presence",
                               headers={"Authorization": f"Bearer {KEY}"}).status == 403
    # A client without the key may not publish there; the backend, with it, may.
    with connect(namespaced.port) as ws:
        send_json(ws, {"type": "publish", "topic": "quiet.room", "data": 1, "ref": "p"})
        answer = recv_json(ws)
        assert answer["code"] in ("forbidden", "unauthorized") and answer["ref"] == "p", answer
    assert keyed(namespaced.port, "POST", "/api/topics/quiet.room/messages", {"n": 1}).status == 201


def test_a_namespace_keeps_its_own_history(namespaced):
    topic = unique("short.feed")
    for n in range(5):
        assert keyed(namespaced.port, "POST", f"/api/topics/{topic}/messages", {"n": n}).status == 201
    with connect(namespaced.port) as ws:
        send_json(ws, {"type": "subscribe", "topic": topic, "since": 0})
        frames = [recv_json(ws) for _ in range(4)]
    gap = next(f for f in frames if f["type"] == "gap")
    assert (gap["from"], gap["to"]) == (1, 3), gap
    assert [f["seq"] for f in frames if f["type"] == "message"] == [4, 5], frames


def test_a_namespace_caps_the_rate_of_store_subscriptions(namespaced):
    store = unique("slow.board")
    assert keyed(namespaced.port, "POST", "/api/stores", {"name": store}).status == 201
    with connect(namespaced.port) as ws:
        assert subscribe(ws, store=store)["type"] == "snapshot"
        start = time.monotonic()
        for n in range(20):
            assert keyed(namespaced.port, "PUT", f"/api/stores/{store}/models/m", {"n": n}).status in (200, 201)
        frames = []
        # Coalesced: the latest value arrives, in few frames.
        while not frames or frames[-1]["changes"][-1].get("value") != {"n": 19}:
            assert time.monotonic() - start < 5, frames
            frames.append(recv_json(ws, timeout=5))
        elapsed = time.monotonic() - start
    # 2 frames a second at most: the first at once, then one each half second.
    assert len(frames) <= 2 + 2 * elapsed, (len(frames), elapsed)
    assert all(f["type"] == "changes" for f in frames), frames


def test_the_example_file_in_deploy_starts_a_gateway(start_server, tmp_path):
    from conftest import REPO_ROOT
    example = REPO_ROOT / "deploy" / "receptionist.yaml"
    server = start_server("--config", str(example), "--port", "0", "--data-dir", str(tmp_path / "data"))
    assert http_client_request(server.port, "GET", "/healthz").status == 200


def test_a_namespace_keeps_its_own_retention_on_disk(start_server, tmp_path):
    import signal
    config = tmp_path / "gateway.yaml"
    config.write_text(f"api-key: {KEY}\nnamespaces:\n  - pattern: brief.*\n    retain: 3\n")
    data = tmp_path / "data"
    first = start_server("--config", str(config), "--data-dir", str(data))
    for store in ("brief.log", "full.log"):
        assert keyed(first.port, "POST", "/api/stores", {"name": store}).status == 201
        for n in range(10):
            assert keyed(first.port, "PUT", f"/api/stores/{store}/models/m", {"n": n}).status in (200, 201)
    first.send_signal(signal.SIGTERM)
    assert first.wait_exit(10) == 0
    second = start_server("--config", str(config), "--data-dir", str(data))
    # The brief store kept its last 3 change sets; the other all 10.
    gone = http_client_request(second.port, "GET", "/api/stores/brief.log/changes?after=0")
    assert gone.status == 410 and gone.json()["oldest"] == 7, gone
    kept = http_client_request(second.port, "GET", "/api/stores/full.log/changes?after=0")
    assert kept.status == 200 and len(kept.json()["changes"]) == 10, kept
