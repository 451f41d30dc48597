"""docs/PERFORMANCE.md stays a short, current summary whose every table says how it was made.

Checked without a server:
1. the file has at most MAX_LINES lines;
2. every Markdown table (a run of lines starting with `|`) has, earlier in its section (the
   lines since the previous `#` heading), a line starting with `Command:` that holds a
   backticked command, and a date written `Measured 20YY-MM-DD`;
3. every `make X` in a `Command:` line's backticks names a target of the Makefile, and every
   `bench/….sh` named there is a file in the repository.

The checker is tested too, on broken copies, so that it cannot pass by finding nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DOC = REPO_ROOT / "docs" / "PERFORMANCE.md"
MAKEFILE = REPO_ROOT / "Makefile"
MAX_LINES = 250

COMMAND_LINE = re.compile(r"^Command:.*`[^`]+`")
MEASURED = re.compile(r"\bMeasured 20\d\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])\b")
CODE_SPAN = re.compile(r"`([^`]+)`")
MAKE_TARGET = re.compile(r"(?:^|[\s;&|(])make\s+((?:-\S+\s+)*)([A-Za-z0-9_.-]+)")
BENCH_SCRIPT = re.compile(r"(?<![\w/.-])(bench/[\w./-]+\.sh)\b")
MAKE_RULE = re.compile(r"^([A-Za-z0-9_.%/-][^:=#\t]*?)\s*:(?!=)")


@dataclass
class Table:
    line: int  # 1-based line of the table's first row
    section: str  # the heading the table sits under ("(top of file)" before any)
    preceding: list[str]  # the section's lines before the table


def make_targets(makefile_text: str) -> set[str]:
    """The targets a Makefile defines (rule lines, not recipes or variable assignments)."""
    targets: set[str] = set()
    for line in makefile_text.splitlines():
        if line.startswith("\t"):
            continue
        match = MAKE_RULE.match(line)
        if match:
            targets.update(match.group(1).split())
    return targets


def tables(text: str) -> list[Table]:
    """Every table outside fenced code, with its section's heading and the lines before it."""
    found: list[Table] = []
    section = "(top of file)"
    section_lines: list[str] = []
    in_fence = False
    in_table = False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.lstrip()
        if stripped.startswith("```") or stripped.startswith("~~~"):
            in_fence = not in_fence
            in_table = False
            section_lines.append(line)
            continue
        if not in_fence and line.startswith("#"):
            section = line.strip()
            section_lines = []
            in_table = False
            continue
        is_row = not in_fence and stripped.startswith("|")
        if is_row and not in_table:
            found.append(Table(line=number, section=section, preceding=list(section_lines)))
        in_table = is_row
        section_lines.append(line)
    return found


def commands(lines: list[str]) -> list[str]:
    """The backticked spans of the `Command:` lines among `lines`."""
    spans: list[str] = []
    for line in lines:
        if line.startswith("Command:"):
            spans.extend(CODE_SPAN.findall(line))
    return spans


def check(text: str, makefile_text: str, repo_root: Path, max_lines: int = MAX_LINES) -> list[str]:
    """Every way `text` breaks the rules above, one message each; empty when it keeps them."""
    problems: list[str] = []
    count = len(text.splitlines())
    if count > max_lines:
        problems.append(f"the file has {count} lines, more than {max_lines}")

    for table in tables(text):
        where = f"table at line {table.line} under {table.section!r}"
        if not any(COMMAND_LINE.match(line) for line in table.preceding):
            problems.append(
                f"{where}: no line starting with 'Command:' and a backticked command before it in its section")
        if not any(MEASURED.search(line) for line in table.preceding):
            problems.append(f"{where}: no 'Measured 20YY-MM-DD' date before it in its section")

    targets = make_targets(makefile_text)
    section = "(top of file)"
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("#"):
            section = line.strip()
        if not line.startswith("Command:"):
            continue
        where = f"'Command:' line {number} under {section!r}"
        for span in CODE_SPAN.findall(line):
            for match in MAKE_TARGET.finditer(span):
                target = match.group(2)
                if target not in targets:
                    problems.append(f"{where}: `make {target}` is not a target in the Makefile")
            for script in BENCH_SCRIPT.findall(span):
                if not (repo_root / script).is_file():
                    problems.append(f"{where}: {script} does not exist")
    return problems


def current_problems() -> list[str]:
    return check(DOC.read_text(encoding="utf-8"), MAKEFILE.read_text(encoding="utf-8"), REPO_ROOT)


def test_the_summary_is_at_most_250_lines():
    count = len(DOC.read_text(encoding="utf-8").splitlines())
    assert count <= MAX_LINES, f"docs/PERFORMANCE.md has {count} lines; the limit is {MAX_LINES}"


def test_every_table_names_its_command_and_date():
    text = DOC.read_text(encoding="utf-8")
    assert tables(text), "docs/PERFORMANCE.md has no tables: nothing would be checked"
    problems = [p for p in current_problems() if p.startswith("table at")]
    assert not problems, "docs/PERFORMANCE.md:\n" + "\n".join(problems)


def test_commands_name_real_make_targets_and_bench_scripts():
    text = DOC.read_text(encoding="utf-8")
    named = [span for span in commands(text.splitlines())]
    assert any(MAKE_TARGET.search(s) for s in named), "no `make` target named in any Command: line"
    assert any(BENCH_SCRIPT.search(s) for s in named), "no bench/*.sh named in any Command: line"
    problems = [p for p in current_problems() if p.startswith("'Command:' line")]
    assert not problems, "docs/PERFORMANCE.md:\n" + "\n".join(problems)


def test_the_checker_passes_a_good_document(tmp_path):
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "ws.sh").write_text("#!/bin/sh\n")
    makefile = "bench: bench-ws\n\nbench-ws: .venv/.installed\n\tbench/ws.sh\n"
    doc = (
        "# Performance\n\n"
        "## Fan-out\n\n"
        "Command: `make bench-ws` (runs `bench/ws.sh 10`). Measured 2026-11-26.\n\n"
        "| server | p99 ms |\n|---|---:|\n| receptionist | 37.9 |\n\n"
        "```sh\n# not a heading\n```\n"
    )
    assert check(doc, makefile, tmp_path) == []


def test_the_checker_catches_a_broken_document(tmp_path):
    # A deliberately broken copy of the real file: its first table's command and date removed,
    # a table with neither added, commands naming a target and a script that do not exist, and
    # more lines than the limit.
    real = DOC.read_text(encoding="utf-8").splitlines()
    first = tables("\n".join(real))[0]
    broken = [
        line for number, line in enumerate(real, start=1)
        if not (number < first.line and line in first.preceding
                and (line.startswith("Command:") or MEASURED.search(line)))
    ]
    broken += [
        "",
        "## A section with a bare table",
        "",
        "| a | b |",
        "|---|---|",
        "| 1 | 2 |",
        "",
        "## A section whose command does not exist",
        "",
        "Command: `make bench-nothing` and `bench/nothing.sh 10`. Measured 2026-11-27.",
        "",
        "| a | b |",
        "|---|---|",
        "| 1 | 2 |",
        "",
    ]
    broken += ["filler"] * MAX_LINES
    path = tmp_path / "PERFORMANCE.md"
    path.write_text("\n".join(broken) + "\n", encoding="utf-8")

    problems = check(path.read_text(encoding="utf-8"), MAKEFILE.read_text(encoding="utf-8"), REPO_ROOT)
    text = "\n".join(problems)

    assert any(p.startswith("the file has") and f"more than {MAX_LINES}" in p for p in problems), text
    assert any(first.section in p and "Command:" in p for p in problems), text
    assert any(first.section in p and "Measured" in p for p in problems), text
    assert any("'## A section with a bare table'" in p and "Command:" in p for p in problems), text
    assert any("'## A section with a bare table'" in p and "Measured" in p for p in problems), text
    assert any("`make bench-nothing` is not a target" in p for p in problems), text
    assert any("bench/nothing.sh does not exist" in p for p in problems), text
    # The section whose table has its command and date is not blamed for either.
    assert not any("'## A section whose command does not exist'" in p and p.startswith("table at")
                   for p in problems), text


def test_a_command_after_the_table_or_in_another_section_does_not_count(tmp_path):
    doc = (
        "## One\n\nCommand: `bench/ws.sh 10`. Measured 2026-11-26.\n\n"
        "## Two\n\n| a |\n|---|\n| 1 |\n\nCommand: `bench/ws.sh 10`. Measured 2026-11-26.\n"
    )
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "ws.sh").write_text("")
    problems = check(doc, "", tmp_path)
    assert any("'## Two'" in p and "Command:" in p for p in problems), problems
    assert any("'## Two'" in p and "Measured" in p for p in problems), problems
