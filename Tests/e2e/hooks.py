"""The hook tests' shared parts: the backend process (hook_backend.py) and a gateway pointed at it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from conftest import wait_for

BACKEND = Path(__file__).with_name("hook_backend.py")
API_KEY = "hooks-key"


class Backend:
    """hook_backend.py in a process of its own."""

    def __init__(self, workdir: Path):
        workdir.mkdir(parents=True, exist_ok=True)
        port_file = workdir / "backend.port"
        self.proc = subprocess.Popen([sys.executable, str(BACKEND), str(port_file)],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.port = int(wait_for(lambda: port_file.exists() and port_file.read_text(), 10.0, "the backend did not start"))

    def url(self, hook: str) -> str:
        return f"http://127.0.0.1:{self.port}/{hook}"

    def hook_args(self, *hooks: str) -> list[str]:
        args: list[str] = []
        for hook in hooks or ("connect", "publish", "write", "rpc"):
            args += [f"--hook-{hook}", self.url(hook)]
        return args

    def _call(self, method: str, path: str, payload=None) -> dict:
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=5) as answer:
            return json.loads(answer.read())

    def stats(self) -> dict:
        return self._call("GET", "/stats")

    def set_delay(self, seconds: float) -> None:
        self._call("POST", "/control", {"delay": seconds})

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=5)


def cookie(session: str) -> dict:
    return {"Cookie": f"session={session}"}


def elapsed(start: float) -> float:
    return time.monotonic() - start
