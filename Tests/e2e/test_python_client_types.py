"""The Python client is typed: mypy --strict finds nothing in it, and a caller's wrong use of
it is an error mypy reports (so the check cannot pass on a package typed as Any)."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "clients" / "python"


def mypy(*args: str, cwd=PACKAGE) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=300)


def test_the_package_passes_mypy_strict():
    result = mypy("receptionist")
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_caller_misusing_the_client_is_caught(tmp_path):
    caller = tmp_path / "caller.py"
    caller.write_text(
        "from receptionist import Gateway\n"
        "gateway = Gateway('http://127.0.0.1:8080')\n"
        "seq: str = gateway.publish('news', {'n': 1})\n"          # publish answers an int
        "gateway.commit('tiles', changes='not a list')\n")
    result = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(caller)],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env={"MYPYPATH": str(PACKAGE), "PATH": "/usr/bin:/bin"})
    assert result.returncode != 0
    assert "caller.py:3" in result.stdout and "caller.py:4" in result.stdout, result.stdout
