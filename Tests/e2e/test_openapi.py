"""docs/openapi.yaml against the gateway: the spec is valid OpenAPI 3.1, it describes every route
the router serves and nothing more, and schemathesis finds no 5xx and no answer that breaks it.

The route words come from the Swift sources, so a route added to the router without the spec
fails `test_served_routes_are_described`, naming it.
"""

from __future__ import annotations

import http.client
import itertools
import json
import re
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jsonschema
import pytest
import yaml
from openapi_spec_validator import OpenAPIV31SpecValidator, validate

from conftest import HOST, IO_TIMEOUT, REPO_ROOT, api, json_ok

SPEC_PATH = REPO_ROOT / "docs" / "openapi.yaml"
GATEWAY_SOURCES = REPO_ROOT / "Sources" / "ReceptionistGateway"
PROBE_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
# What the gateway answers for a path it has no route for: the router's 404 under /api, the
# store, topic and job routers' 404 below their prefix, and the static files' 404 outside /api.
NOT_A_ROUTE = {"no such API resource", "no such resource", "no such file"}
# A made-up name for each kind of path parameter, for "described => served" on missing targets.
MADE_UP = "no-such-name"
API_KEY = "openapi-test-key"

ST_MAX_EXAMPLES = 25  # test cases per operation
ST_SEED = 20261127
ST_TIMEOUT = 60  # seconds one schemathesis run may take, all phases together (it takes 5 to 15)
# Every check schemathesis 4 has runs, except these, each for its reason.
ST_EXCLUDED_CHECKS = {
    # It sends the method QUERY and wants 405; the gateway answers a method it does not know with
    # 400 bad_request, as README.md documents. 405 and Allow for the methods it knows are checked
    # by allow_header_conformance and by test_served_routes_are_described.
    "unsupported_method",
    # DELETE /api/jobs/{job} stops a job and keeps it: GET answers it, "stopped", as documented.
    "use_after_free",
    # A schema-valid request may still be refused for the gateway's state (`after` ahead of the
    # topic is 400; /ws without the upgrade headers is 400): the spec lists those 400s.
    "positive_data_acceptance",
}
# How the gateway refuses a schema-violating request: any documented 4xx. A PATCH whose body is
# not an object but whose If-Match fails is 412 (preconditions are evaluated before the content,
# RFC 9110 section 13.2.1); a read of the past is 410.
ST_CONFIG = """\
[checks.negative_data_rejection]
expected-statuses = ["400", "401", "403", "404", "405", "409", "410", "412", "413", "429", "431"]
"""
# Operations left out of schemathesis runs, each for its reason.
# An event stream never ends, so no request to one completes. test_spec_routes_are_served opens
# both; test_sse.py and test_subscription_options_sse.py check what they send.
ST_STREAMS = ("streamStoreEvents", "streamTopicEvents")
# Jobs started at rates up to 10,000,000 a second (the spec allows it, as the gateway does) keep
# running, and on the demo's 64 models would keep both cores busy for the rest of the run: these
# two run on their own in test_schemathesis_jobs, where the only store has no models. (A store
# request still waits only milliseconds behind such a job: test_jobs checks it.)
ST_JOB_WRITES = ("startJob", "retuneJob")


def load_spec() -> dict:
    return yaml.safe_load(SPEC_PATH.read_text(encoding="utf-8"))


def spec_operations(spec: dict) -> set[tuple[str, str]]:
    """Every (METHOD, path template) the spec describes."""
    return {(method.upper(), path) for path, item in spec["paths"].items()
            for method in item if method in ("get", "put", "post", "delete", "patch", "head", "options")}


def template_matches(template: str, path: str) -> bool:
    """Whether a concrete path fits a template; `{x}` stands for one segment."""
    wanted, got = template.strip("/").split("/"), path.strip("/").split("/")
    return len(wanted) == len(got) and all(w == g or w.startswith("{") for w, g in zip(wanted, got))


def described(spec_ops: set[tuple[str, str]], method: str, path: str) -> bool:
    return any(m == method and template_matches(t, path) for m, t in spec_ops)


# ---- Probing ------------------------------------------------------------

class Prober:
    """Sends bodiless requests on one keep-alive connection per thread; streams are cut at the head."""

    def __init__(self, port: int):
        self.port = port
        self.local = threading.local()

    def __call__(self, method: str, path: str) -> tuple[int, str]:
        """(status, the JSON error's detail or "")."""
        conn = getattr(self.local, "conn", None) or http.client.HTTPConnection(HOST, self.port, timeout=IO_TIMEOUT)
        self.local.conn = conn
        try:
            conn.request(method, path)
            resp = conn.getresponse()
        except (ConnectionError, http.client.HTTPException):
            conn.close()  # closed after the previous answer: once more, on a fresh connection
            conn.request(method, path)
            resp = conn.getresponse()
        if resp.getheader("Content-Length") is None and method != "HEAD":
            conn.close()  # an event stream: the head is the answer
            self.local.conn = None
            return resp.status, ""
        body = resp.read()
        if resp.will_close:
            conn.close()
            self.local.conn = None
        detail = ""
        if (resp.getheader("Content-Type") or "").startswith("application/json") and body.startswith(b"{"):
            detail = str(json.loads(body).get("detail", ""))
        return resp.status, detail

    def many(self, requests: list[tuple[str, str]]) -> list[tuple[int, str]]:
        with ThreadPoolExecutor(4) as pool:
            return list(pool.map(lambda r: self(*r), requests, chunksize=64))


def is_route(status: int, detail: str, name: str | None = None) -> bool:
    """Whether an answer came from a route, not from the lack of one. With `name`, the real name
    of the probes, a 404 counts only when it is about that name (a store, model or job deleted by
    an earlier probe): a 404 about a route word means the word stood where a name goes, and a
    missing target may be answered before the method is (`/api/jobs/{job}` does so)."""
    if status == 405 or status == 404 and detail in NOT_A_ROUTE:
        return False
    return status != 404 or name is None or f"'{name}'" in detail


def source_route_words() -> tuple[list[str], list[str]]:
    """The literals the router compares path segments with, and the absolute paths it matches.

    Segment words: `segments[i] == "w"` / `path[i] == "w"` in Router.swift and api/*.swift, and
    `case "w"` in Router.swift (its switch over the first segment; the `case`s of api/*.swift
    compare body and query values). Absolute paths: `case "/p"` in Router.swift and
    OperationsEndpoints.swift.
    """
    router = (GATEWAY_SOURCES / "http" / "Router.swift").read_text(encoding="utf-8")
    apis = "".join(p.read_text(encoding="utf-8") for p in sorted((GATEWAY_SOURCES / "api").glob("*.swift")))
    operations = (GATEWAY_SOURCES / "operations" / "OperationsEndpoints.swift").read_text(encoding="utf-8")
    words = set(re.findall(r'(?:segments|path)\[\d+\] == "([\w.-]+)"', router + apis))
    words |= set(re.findall(r'case "(\w[\w.-]*)"', router))
    absolute = set(re.findall(r'case "(/[\w/.-]*)"', router + operations))
    return sorted(words), sorted(absolute)


@pytest.fixture(scope="module")
def probed(module_servers):
    """A gateway (no publish rate, so no 429 blurs a probe) and one name that is at once a store,
    a topic, a model in that store and a job: the id of the job started on it."""
    server = module_servers("--publish-rate", "0")
    port = server.port
    json_ok(api(port, "POST", "/api/stores", {"name": "holder"}), 201)
    job = json_ok(api(port, "POST", "/api/jobs", {"kind": "animate", "store": "holder", "rate": 1}), 201)["id"]
    json_ok(api(port, "POST", "/api/stores", {"name": job}), 201)
    json_ok(api(port, "PUT", f"/api/stores/{job}/models/{job}", {"n": 1}), 201)
    json_ok(api(port, "POST", f"/api/topics/{job}/messages", {"n": 1}), 201)
    return port, job


# ---- 1. The spec is OpenAPI 3.1 -----------------------------------------

def test_spec_is_valid_openapi_3_1():
    spec = load_spec()
    assert spec["openapi"].startswith("3.1."), spec["openapi"]
    validate(spec, cls=OpenAPIV31SpecValidator)


# ---- 2. Route coverage --------------------------------------------------

@pytest.mark.timeout(60)
def test_spec_routes_are_served(probed):
    """Described => served: every operation, on a real target and a made-up one, reaches a route;
    HEAD reaches one wherever GET does, except on the event streams and /ws."""
    port, name = probed
    prober = Prober(port)
    unserved = []
    for method, template in sorted(spec_operations(load_spec())):
        for fill in (name, MADE_UP):
            path = re.sub(r"\{[^}]+\}", fill, template)
            status, detail = prober(method, path)
            if not is_route(status, detail):
                unserved.append(f"{method} {template} as {path}: {status} {detail!r}")
            if method == "GET":
                head_status, head_detail = prober("HEAD", path)
                stream = template.endswith("/events") or template == "/ws"
                if (head_status == 405) != stream or head_status == 404 and head_detail in NOT_A_ROUTE:
                    unserved.append(f"HEAD {template} as {path}: {head_status} (stream: {stream})")
    assert not unserved, "the spec describes what the gateway does not serve:\n" + "\n".join(unserved)


@pytest.mark.timeout(90)
def test_served_routes_are_described(probed):
    """Served => described: every /api path of 1 to 4 segments made of the router's words and the
    real name, and every absolute path the router matches, under GET, POST, PUT, PATCH and DELETE;
    whatever reaches a route must be an operation of the spec."""
    port, name = probed
    words, absolute = source_route_words()
    # A guard that the extraction still finds the router's words (a refactor could hide them).
    assert {"stores", "topics", "jobs", "publish", "models", "changes", "messages", "events", "presence"} <= set(words), words
    assert {"/healthz", "/readyz", "/metrics", "/ws"} <= set(absolute), absolute
    paths = ["/api", "/"] + absolute + [
        "/api/" + "/".join(combo) for size in range(1, 5) for combo in itertools.product(words + [name], repeat=size)]
    requests = [(method, path) for path in paths for method in PROBE_METHODS]
    answers = Prober(port).many(requests)
    spec_ops = spec_operations(load_spec())
    undescribed = sorted({f"{method} {path}: {status} {detail!r}"
                          for (method, path), (status, detail) in zip(requests, answers)
                          if is_route(status, detail, name) and not described(spec_ops, method, path)})
    assert not undescribed, (
        f"{len(undescribed)} requests reach a route docs/openapi.yaml does not describe "
        f"({name!r} is a store, topic, model and job):\n" + "\n".join(undescribed[:60]))


# ---- 3. schemathesis ----------------------------------------------------

def run_schemathesis(tmp_path: Path, port: int, *options: str) -> None:
    """`st run` from the spec against the gateway, bounded; fails with its report's tail."""
    config = tmp_path / "schemathesis.toml"
    config.write_text(ST_CONFIG, encoding="utf-8")
    st = Path(sys.executable).with_name("st")
    argv = [str(st), "--config-file", str(config), "--no-color", "run", str(SPEC_PATH),
            "--url", f"http://{HOST}:{port}", "--checks", "all",
            "--exclude-checks", ",".join(sorted(ST_EXCLUDED_CHECKS)),
            "--max-examples", str(ST_MAX_EXAMPLES), "--seed", str(ST_SEED), "--workers", "1",
            "--request-timeout", "5", "--generation-database", "none", "--output-truncate", "true",
            *options]
    try:
        result = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=ST_TIMEOUT)
    except subprocess.TimeoutExpired as expired:
        out = expired.stdout.decode("utf-8", "replace") if isinstance(expired.stdout, bytes) else expired.stdout or ""
        pytest.fail(f"schemathesis still running after {ST_TIMEOUT}s:\n{out[-4000:]}", pytrace=False)
    report = "\n".join(line[:400] for line in result.stdout.splitlines()[-160:])
    assert result.returncode == 0, f"schemathesis failed ({result.returncode}):\n{report}\n{result.stderr[-2000:]}"
    assert re.search(r"\d+ generated, (\d+) passed", result.stdout), report


def excluding(*operation_ids: str) -> list[str]:
    return ["--exclude-operation-id-regex", "^(" + "|".join(operation_ids) + ")$"]


@pytest.mark.timeout(ST_TIMEOUT + 30)
def test_schemathesis_without_api_key(start_server, tmp_path):
    """The demo store `tiles` and its job `job-1` are what the spec's examples name."""
    server = start_server("--demo")
    run_schemathesis(tmp_path, server.port, *excluding(*ST_STREAMS, *ST_JOB_WRITES))


@pytest.mark.timeout(ST_TIMEOUT + 30)
def test_schemathesis_with_api_key(start_server, tmp_path):
    """With --api-key and the key supplied; then every operation whose security names the key
    answers the spec's 401 without it, and every other one does not ask for it."""
    server = start_server("--demo", "--api-key", API_KEY)
    run_schemathesis(tmp_path, server.port, *excluding(*ST_STREAMS, *ST_JOB_WRITES),
                     "--header", f"Authorization: Bearer {API_KEY}")
    spec = load_spec()
    problems = []
    for method, template in sorted(spec_operations(spec)):
        operation = spec["paths"][template][method.lower()]
        keyed = any("apiKey" in alternative for alternative in operation.get("security", []))
        path = re.sub(r"\{[^}]+\}", "tiles", template)
        if template.endswith("/events") or template == "/ws":
            continue  # streams take tokens, not keys; a request to one would not end
        resp = api(server.port, method, path, body=b"{}" if method in ("POST", "PUT", "PATCH") else None)
        if not keyed:
            if resp.status == 401:
                problems.append(f"{method} {template} asks for a key the spec does not name")
            continue
        documented = resolve(spec, operation["responses"].get("401", {})).get("content", {})
        if resp.status != 401 or resp.header("WWW-Authenticate") != "Bearer":
            problems.append(f"{method} {template} without the key: {resp.status} {resp.body[:120]!r}")
        elif "application/json" not in documented:
            problems.append(f"{method} {template}: the spec has no JSON 401")
        elif errors := schema_errors(spec, documented["application/json"]["schema"], resp.json()):
            problems.append(f"{method} {template}: 401 body {resp.body!r} breaks the spec: {errors}")
    assert not problems, "\n".join(problems)


@pytest.mark.timeout(ST_TIMEOUT + 30)
def test_schemathesis_jobs(start_server, tmp_path):
    """The job operations, against a gateway whose only store, `tiles`, has no models, so a job at
    any rate the spec allows commits nothing (one job thread, to keep it cheap)."""
    server = start_server("--job-threads", "1")
    json_ok(api(server.port, "POST", "/api/stores", {"name": "tiles"}), 201)
    run_schemathesis(tmp_path, server.port, "--include-tag", "jobs")


def resolve(spec: dict, node: dict) -> dict:
    """Follows a local `$ref` chain."""
    while "$ref" in node:
        target = spec
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def schema_errors(spec: dict, schema: dict, value) -> list[str]:
    """Where `value` breaks a schema of the spec (whose `$ref`s point into the spec)."""
    validator = jsonschema.Draft202012Validator({**schema, "components": spec["components"]})
    return [error.message for error in validator.iter_errors(value)]
