#!/usr/bin/env python3
"""Writes the git commit of the work tree into a built receptionist binary, in place of the
placeholder `Sources/CBuildStamp` links in, so `receptionist --version` names the commit it was
built from. A tree with uncommitted changes is stamped with its HEAD all the same (the version
line says so only through the commit; build from a clean tree to ship). Outside a git work tree
the binary is left unstamped and says `unknown`.

Usage: scripts/stamp-commit.py BINARY [COMMIT]
"""
import os
import subprocess
import sys

MARKER = b"RECEPTIONIST-BUILD-COMMIT:"
PLACEHOLDER_LENGTH = 40


def head_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return out if len(out) == PLACEHOLDER_LENGTH else None


def stamp(path: str, commit: str) -> None:
    data = bytearray(open(path, "rb").read())
    at = data.find(MARKER)
    if at < 0 or data.find(MARKER, at + 1) >= 0:
        sys.exit(f"{path}: expected exactly one build-commit marker")
    start = at + len(MARKER)
    data[start:start + PLACEHOLDER_LENGTH] = commit.encode("ascii")
    # A new file renamed over the old one: a running gateway keeps its own (writing into a
    # binary being run fails with ETXTBSY).
    fresh = f"{path}.stamping"
    with open(fresh, "wb") as binary:
        binary.write(data)
    os.chmod(fresh, os.stat(path).st_mode)
    os.replace(fresh, path)


def main() -> None:
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    commit = sys.argv[2] if len(sys.argv) == 3 else head_commit()
    if commit is None:
        print("not a git work tree: the binary stays unstamped", file=sys.stderr)
        return
    if len(commit) != PLACEHOLDER_LENGTH or any(c not in "0123456789abcdef" for c in commit):
        sys.exit(f"not a full commit id: {commit!r}")
    stamp(sys.argv[1], commit)


if __name__ == "__main__":
    main()
