"""How test_docs.py runs a document's blocks against a real gateway; the rules for blocks and
markers are in docs_blocks.py. See test_docs.py for what a run promises.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from conftest import (LISTENING_LINE, REPO_ROOT, STARTUP_TIMEOUT, ServerProcess, _read_first_line,
                      http_client_request, wait_for)
from docs_blocks import Block, DocumentError, parse

DOCUMENTS = {"readme": REPO_ROOT / "README.md", "getting-started": REPO_ROOT / "docs" / "GETTING-STARTED.md"}
BLOCK_TIMEOUT = 60.0
LIVE_TIMEOUT = 15.0
BINARY_WAIT = 60.0  # the binary may be replaced by a rebuild for a few seconds
OUTPUT_TAIL = 6000
DEFAULT_SERVER = "receptionist serve --public Public --demo --data-dir .data"
GATEWAY_ADDRESS = re.compile(r"\b(?:127\.0\.0\.1|localhost):8080(?!\d)")
PAGE_ADDRESS = re.compile(r"\b(?:127\.0\.0\.1|localhost):8000(?!\d)")
BINARY_PATH = re.compile(r"(?<![\w.-])(?:[\w./-]*/)?\.build/(?:release|debug)/receptionist(?![\w.-])")

# Before every sh block. curl: fail on an HTTP error status (showing the body), and take a stream
# (-N) that ran until its own --max-time as a success. Every curl that fails is also written down,
# so that one whose status the shell drops (in the background, before `wait`) still fails the block.
SH_PRELUDE = r"""set -euo pipefail
curl() {
  local arg fail=0 stream=0 bounded=0 status=0
  for arg in "$@"; do
    case "$arg" in
      --fail|--fail-with-body) fail=1 ;;
      --no-buffer) stream=1 ;;
      --max-time|--max-time=*) bounded=1 ;;
      --*) ;;
      -?*) [[ "$arg" == *f* ]] && fail=1
           [[ "$arg" == *N* ]] && stream=1
           [[ "$arg" == *m* ]] && bounded=1 ;;
    esac
  done
  if (( fail )); then command curl "$@" || status=$?; else command curl --fail-with-body "$@" || status=$?; fi
  if (( status == 28 && stream && bounded )); then return 0; fi
  if (( status != 0 )); then
    (( status == 22 )) && printf '\n[doc-test] curl: HTTP error status (exit 22)\n' >&2
    printf 'curl %s: exit %d\n' "$*" "$status" >> "$DOC_TEST_CURL_FAILURES"
  fi
  return $status
}
"""



class BlockFailed(AssertionError):
    pass


def wait_for_binary() -> Path:
    configured = os.environ.get("RECEPTIONIST_BIN")
    path = (Path(configured) if configured else REPO_ROOT / ".build" / "debug" / "receptionist").resolve()
    try:
        wait_for(lambda: path.is_file() and os.access(path, os.X_OK), BINARY_WAIT, "")
    except AssertionError:
        pytest.fail(f"receptionist binary not found at {path} (build it, or set RECEPTIONIST_BIN)", pytrace=False)
    return path


def tail(text: str) -> str:
    return text if len(text) <= OUTPUT_TAIL else "…" + text[-OUTPUT_TAIL:]


class PageServer:
    """The second origin: a plain HTTP server over the working directory, on a free loopback port."""

    def __init__(self, directory: Path):
        handler = functools.partial(Quiet, directory=str(directory))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


class DocumentRun:
    """Runs one document's blocks in order (see the module's docstring)."""

    def __init__(self, name: str, blocks: list[Block], workdir: Path, servers):
        self.name = name
        self.blocks = blocks
        self.workdir = workdir
        self.scratch = workdir / ".doc-test"
        self.servers = servers  # conftest's ServerFactory: stops what is left and shows its log
        self.gateway: ServerProcess | None = None
        self.api_key: str | None = None  # the gateway's first --api-key, for the live checks' writes
        self.background: list[tuple[Block, subprocess.Popen, Path]] = []
        self.browser = None
        self.page_server: PageServer | None = None
        self.ran: list[str] = []  # "line kind" of every block run, for the report

    # ---- setup ---------------------------------------------------------------------------

    def prepare(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.scratch / "bin").mkdir(parents=True, exist_ok=True)
        (self.workdir / "Public").symlink_to(REPO_ROOT / "Public")
        self.binary = wait_for_binary()
        (self.scratch / "bin" / "receptionist").symlink_to(self.binary)
        self.page_server = PageServer(self.workdir)

    def env(self) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RECEPTIONIST_")}
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), str(self.scratch / "bin"), env.get("PATH", "")])
        env.pop("PYTHONPATH", None)
        return env

    def rewrite(self, text: str) -> str:
        if self.gateway is not None:
            text = GATEWAY_ADDRESS.sub(f"127.0.0.1:{self.gateway.port}", text)
        text = PAGE_ADDRESS.sub(f"127.0.0.1:{self.page_server.port}", text)
        return BINARY_PATH.sub(str(self.binary), text)

    # ---- the run -------------------------------------------------------------------------

    def run(self) -> None:
        self.prepare()
        try:
            for block in self.blocks:
                self.step(block)
            self.stop_background()
        finally:
            self.close()

    def step(self, block: Block) -> None:
        if block.save:
            target = self.workdir / block.save
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(self.rewrite(block.text), encoding="utf-8")
        kind = block.kind
        if kind == "server":
            command = block.text if block.server == "" else f"receptionist serve {block.server}"
            self.start_gateway(block, command)
        elif kind in ("sh", "python", "html"):
            if self.gateway is None:
                self.start_gateway(None, DEFAULT_SERVER)
            {"sh": self.run_sh, "python": self.run_python, "html": self.run_html}[kind](block)
        else:
            return
        self.ran.append(f"{block.line} {kind}")

    def fail(self, block: Block | None, what: str, script: str = "", output: str = "") -> None:
        where = block.where() if block else f"{self.name} (the default gateway)"
        message = f"{where}: {what}"
        if script:
            message += f"\n--- block as run ---\n{script.rstrip()}"
        if output:
            message += f"\n--- output ---\n{tail(output).rstrip()}"
        raise BlockFailed(message)

    # ---- the gateway ---------------------------------------------------------------------

    def start_gateway(self, block: Block | None, command: str) -> None:
        self.stop_background()
        self.stop_gateway()
        command = " ".join(line for line in re.sub(r"\\\n", " ", command).splitlines()
                           if line.strip() and not line.strip().startswith("#"))
        command = self.rewrite(command)
        command = re.sub(r"--port(?:=|\s+)\S+", "--port 0", command)
        command = re.sub(r"--host(?:=|\s+)\S+", "--host 127.0.0.1", command)
        env = self.env() | {"RECEPTIONIST_HOST": "127.0.0.1", "RECEPTIONIST_PORT": "0"}
        self.binary = wait_for_binary()
        stderr_path = self.scratch / f"gateway-{len(self.servers.servers)}.log"
        with open(stderr_path, "wb") as stderr_file:
            proc = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=self.workdir, env=env,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr_file, bufsize=0)
        line, rest, problem = _read_first_line(proc, STARTUP_TIMEOUT)
        match = LISTENING_LINE.fullmatch(line.decode("utf-8", "replace")) if line is not None else None
        if match is None:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=5)
            self.fail(block, f"the gateway did not start: {problem or f'first line {line!r}'}", command,
                      stderr_path.read_text(errors="replace"))
        self.gateway = ServerProcess(proc, ["bash", command], stderr_path, match.group(0), int(match.group(1)), rest)
        keys = re.findall(r"--api-key(?:=|\s+)(\S+)", command)
        self.api_key = shlex.split(keys[0])[0] if keys else None
        self.servers.servers.append(self.gateway)

    def stop_gateway(self) -> None:
        if self.browser is not None:
            self.browser.get("about:blank")  # its connections would hold up the drain
        if self.gateway is not None:
            self.gateway.stop()
            self.gateway = None

    # ---- processes -----------------------------------------------------------------------

    def spawn(self, argv: list[str], output: Path, curl_failures: Path) -> subprocess.Popen:
        env = self.env() | {"DOC_TEST_CURL_FAILURES": str(curl_failures)}
        with open(output, "wb") as out:
            return subprocess.Popen(argv, cwd=self.workdir, env=env, stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    @staticmethod
    def curl_failures(block: Block, scratch: Path) -> str:
        path = scratch / f"block-{block.line}.curl-failures"
        return path.read_text(errors="replace") if path.exists() else ""

    @staticmethod
    def end_group(proc: subprocess.Popen) -> None:
        """Ends the block's process group: the shell and whatever it started."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                proc.wait(timeout=5)
                if sig == signal.SIGTERM:
                    time.sleep(0.05)  # children of a finished shell
            except subprocess.TimeoutExpired:
                continue

    def run_process(self, block: Block, argv: list[str], script: str) -> None:
        output = self.scratch / f"block-{block.line}.out"
        proc = self.spawn(argv, output, self.scratch / f"block-{block.line}.curl-failures")
        if block.background:
            self.background.append((block, proc, output))
            return
        try:
            code = proc.wait(timeout=BLOCK_TIMEOUT)
        except subprocess.TimeoutExpired:
            code = None
        self.end_group(proc)
        text = output.read_text(errors="replace")
        if code is None:
            self.fail(block, f"{block.kind} block still running after {BLOCK_TIMEOUT:.0f}s (stopped)", script, text)
        if code != 0:
            self.fail(block, f"{block.kind} block exited {code}", script, text)
        if failures := self.curl_failures(block, self.scratch):
            self.fail(block, f"a curl in the block failed, though the block exited 0:\n{failures.rstrip()}",
                      script, text)

    def stop_background(self) -> None:
        failed = [(b, p, o) for b, p, o in self.background
                  if p.poll() not in (None, 0) or self.curl_failures(b, self.scratch)]
        for _, proc, _ in self.background:
            self.end_group(proc)
        self.background = []
        if failed:
            block, proc, output = failed[0]
            self.fail(block, f"background sh block failed before it was stopped (exit {proc.returncode}) "
                             f"{self.curl_failures(block, self.scratch).rstrip()}",
                      block.text, output.read_text(errors="replace"))

    # ---- the kinds -----------------------------------------------------------------------

    def run_sh(self, block: Block) -> None:
        script = self.rewrite(block.text)
        path = self.scratch / f"block-{block.line}.sh"
        path.write_text(SH_PRELUDE + script, encoding="utf-8")
        self.run_process(block, ["bash", str(path)], script)

    def run_python(self, block: Block) -> None:
        script = self.rewrite(block.text)
        path = self.workdir / block.save if block.save else self.scratch / f"block-{block.line}.py"
        path.write_text(script, encoding="utf-8")
        self.run_process(block, [sys.executable, str(path)], script)

    def run_html(self, block: Block) -> None:
        page = self.rewrite(block.text)
        name = block.save or f"doc-test-block-{block.line}.html"
        (self.workdir / name).write_text(page, encoding="utf-8")
        url = f"http://127.0.0.1:{self.page_server.port}/{name}"
        store, model, field = block.live
        path = f"/api/stores/{store}/models/{model}"

        def write(method: str, payload=None) -> None:
            headers = {"Content-Type": "application/json"}
            if self.api_key:
                headers["Authorization"] = f"Bearer {self.api_key}"
            body = json.dumps(payload).encode() if payload is not None else None
            resp = http_client_request(self.gateway.port, method, path, headers=headers, body=body)
            if resp.status not in (200, 201, 204):
                self.fail(block, f"live: the test's {method} {path} answered {resp.status}: {resp.body[:300]!r}")

        resp = http_client_request(self.gateway.port, "GET", path)
        existed = resp.status == 200
        original = resp.json()["value"].get(field) if existed else None
        if self.browser is None:
            from viewer import new_browser  # Chromium only for documents with pages
            self.browser = new_browser()
        self.browser.get(url)
        first, second = (f"doc-test {uuid.uuid4().hex[:12]}" for _ in range(2))
        # The first value may reach the page in its snapshot; once the page shows it, it is
        # subscribed, so the second can only come live.
        write("PATCH" if existed else "PUT", {field: first})
        self.wait_page(block, url, first, f"the page at {url} never showed {store}/{model}'s {field} {first!r}")
        write("PATCH", {field: second})
        self.wait_page(block, url, second, f"the page at {url} showed {store}/{model}'s {field} once, "
                                           f"but never its next value {second!r} (not live)")
        # Back as the document left it, for the blocks after this one.
        if existed:
            write("PATCH", {field: original})
        else:
            write("DELETE")
        self.browser.get("about:blank")

    def wait_page(self, block: Block, url: str, text: str, message: str) -> None:
        deadline = time.monotonic() + LIVE_TIMEOUT
        shown = ""
        while time.monotonic() < deadline:
            shown = self.browser.execute_script("return document.body ? document.body.innerText : ''") or ""
            if text in shown:
                return
            time.sleep(0.05)
        console = "\n".join(f"{e.get('level')}: {e.get('message')}" for e in self.browser.get_log("browser"))
        self.fail(block, f"{message} within {LIVE_TIMEOUT:.0f}s", "",
                  f"page text:\n{shown}\n--- browser console ---\n{console}")

    def close(self) -> None:
        for _, proc, _ in self.background:
            self.end_group(proc)
        self.background = []
        if self.browser is not None:
            try:
                self.browser.quit()
            finally:
                self.browser = None
        self.stop_gateway()
        if self.page_server is not None:
            self.page_server.close()


def run_document(name: str, markdown: str, workdir: Path, servers) -> DocumentRun:
    """Parses and runs a document; fails the test with a readable message on the first problem."""
    try:
        blocks = parse(markdown, name)
    except DocumentError as error:
        pytest.fail(f"{name} breaks the doc-test rules:\n{error}", pytrace=False)
    run = DocumentRun(name, blocks, workdir, servers)
    try:
        run.run()
    except BlockFailed as error:
        hint = ""
        if "ModuleNotFoundError" in str(error):
            hint = "\n(a Python block needs a package the venv lacks: add it to Tests/e2e/requirements.txt)"
        elif "command not found" in str(error):
            hint = "\n(a block needs a program this machine lacks: add its package to scripts/install-deps.sh test)"
        pytest.fail(f"{error}{hint}", pytrace=False)
    return run


def run_file(key: str, tmp_path: Path, servers) -> DocumentRun:
    path = DOCUMENTS[key]
    assert path.is_file(), f"{path} is missing"
    run = run_document(str(path.relative_to(REPO_ROOT)), path.read_text(encoding="utf-8"), tmp_path / "work", servers)
    print(f"{path.name}: ran blocks at lines {', '.join(run.ran)}")
    return run
