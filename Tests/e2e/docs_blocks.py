"""The fenced blocks of a Markdown document and the doc-test markers before them.

The rules (docs/GETTING-STARTED.md states them at its top, for every document the test runs):

- A block whose info string starts with `sh` is run with bash, `python` with the test's Python
  (the venv's), and `html` is loaded in headless Chromium from a second origin and must show live
  data. Any other info string (`console`, `text`, `json`, `yaml`, `js`, `mermaid`, none) is shown
  only. `bash`, `shell`, `py` and `python3` are refused, so that a block meant to run is never
  shown only by a slip of the info string.
- Marker lines, each `<!-- doc-test: … -->` on a line of its own, go right before a block (blank
  lines between are allowed, nothing else):
  - `skip (reason)`: the block is not run; the reason is required.
  - `background`: an `sh` block is started and left running while the blocks after it run; it is
    stopped when the gateway is restarted or the document ends, and fails the document if it had
    exited non-zero by then.
  - `server` or `server ARGS`: the block starts the gateway. Without ARGS the block is one
    `receptionist serve …` command and the test runs it (its own port and address in place of the
    block's); with ARGS the block is not run (say `make run`) and the test starts
    `receptionist serve ARGS` in its place. Later blocks run against that gateway.
  - `save NAME`: the block's text is also written to NAME (a relative path) in the working
    directory, for a later block to use; any block may be saved, a shown-only one included.
  - `live STORE MODEL FIELD`: required on an `html` block. With the page loaded, the test sets
    the model's FIELD to a fresh string through the gateway (creating the model if it is missing)
    and waits for the page's text to show it, then sets a second one, which only a live page can
    show; then it puts the field back as it was.
- A document must have at least one block that runs.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import PurePosixPath

RUN_KINDS = {"sh": "sh", "python": "python", "html": "html"}
AMBIGUOUS = {"bash": "sh", "shell": "sh", "zsh": "sh", "py": "python", "python3": "python"}
DIRECTIVES = ("skip", "background", "server", "save", "live")

MARKER = re.compile(r"^\s{0,3}<!--\s*doc-test:\s*(.*?)\s*-->\s*$")
# Something that looks meant as a marker but is not one: refused rather than ignored.
NEAR_MARKER = re.compile(r"<!--\s*doc[-_ ]?test", re.IGNORECASE)
FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
SERVE = re.compile(r"(^|[\s/])receptionist\s+serve(\s|$)")


class DocumentError(AssertionError):
    """The document breaks the doc-test rules; the message lists every problem with its line."""


@dataclass
class Block:
    doc: str
    line: int  # the opening fence's line, 1-based
    info: str
    text: str
    skip: str | None = None  # the reason
    background: bool = False
    server: str | None = None  # None: not a server block; "": from the block; else the ARGS
    save: str | None = None
    live: tuple[str, str, str] | None = None
    marker_lines: list[int] = field(default_factory=list)

    @property
    def lang(self) -> str:
        return self.info.split()[0].lower() if self.info.split() else ""

    @property
    def kind(self) -> str:
        """'sh', 'python' or 'html' for a block that runs; 'server'; 'skip'; 'shown'."""
        if self.skip is not None:
            return "skip"
        if self.server is not None:
            return "server"
        return RUN_KINDS.get(self.lang, "shown")

    @property
    def runs(self) -> bool:
        return self.kind in RUN_KINDS

    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def _apply_marker(pending: dict, body: str, line: int, problems: list[str], doc: str) -> None:
    directive, _, rest = body.partition(" ")
    rest = rest.strip()
    if directive not in DIRECTIVES:
        problems.append(f"{doc}:{line}: unknown doc-test marker {body!r} (known: {', '.join(DIRECTIVES)})")
        return
    if directive in pending:
        problems.append(f"{doc}:{line}: a second `{directive}` marker for the same block")
        return
    if directive == "skip":
        match = re.fullmatch(r"\((.*)\)", rest, flags=re.S)
        if match is None or not match.group(1).strip():
            problems.append(f"{doc}:{line}: `skip` needs a reason: <!-- doc-test: skip (why it is not run) -->")
            return
        pending["skip"] = match.group(1).strip()
    elif directive == "background":
        if rest:
            problems.append(f"{doc}:{line}: `background` takes nothing after it")
            return
        pending["background"] = True
    elif directive == "server":
        pending["server"] = rest
    elif directive == "save":
        path = PurePosixPath(rest) if rest else None
        if (path is None or len(rest.split()) != 1 or path.is_absolute() or ".." in path.parts
                or rest.startswith("~")):
            problems.append(f"{doc}:{line}: `save` needs one relative path inside the working directory")
            return
        pending["save"] = rest
    elif directive == "live":
        parts = rest.split()
        if len(parts) != 3:
            problems.append(f"{doc}:{line}: `live` needs STORE MODEL FIELD")
            return
        pending["live"] = tuple(parts)


def _check_block(block: Block, problems: list[str]) -> None:
    where = block.where()
    if block.lang in AMBIGUOUS and block.skip is None:
        problems.append(f"{where}: info string `{block.lang}`: write `{AMBIGUOUS[block.lang]}` to run the block, "
                        "or `console`/`text` to show it only")
    if block.skip is not None and (block.background or block.server is not None or block.save or block.live):
        problems.append(f"{where}: a skipped block takes no other marker")
    if block.server is not None:
        if block.background or block.live:
            problems.append(f"{where}: a `server` block takes no `background` or `live` marker")
        if block.server == "":
            commands = logical_lines(block.text)
            if len(commands) != 1 or not SERVE.search(commands[0]):
                problems.append(f"{where}: a `server` block without ARGS must be one `receptionist serve …` "
                                "command; give the ARGS in the marker for anything else")
        else:
            try:
                shlex.split(block.server)
            except ValueError as error:
                problems.append(f"{where}: `server` ARGS do not parse: {error}")
    if block.background and block.kind != "sh":
        problems.append(f"{where}: `background` is for `sh` blocks")
    if block.kind == "html" and block.live is None:
        problems.append(f"{where}: an `html` block needs <!-- doc-test: live STORE MODEL FIELD --> "
                        "(or a skip with its reason)")
    if block.live is not None and block.kind != "html":
        problems.append(f"{where}: `live` is for `html` blocks")


def logical_lines(script: str) -> list[str]:
    """The commands of a shell text: continuation lines joined, blank lines and comments left out."""
    joined = re.sub(r"\\\n", " ", script)
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")]


def parse(markdown: str, doc: str) -> list[Block]:
    """Every fenced block with its markers; raises DocumentError listing every broken rule."""
    lines = markdown.split("\n")
    blocks: list[Block] = []
    problems: list[str] = []
    pending: dict = {}
    pending_lines: list[int] = []
    index = 0
    while index < len(lines):
        number = index + 1
        line = lines[index]
        marker = MARKER.match(line)
        fence = FENCE.match(line)
        if marker:
            _apply_marker(pending, marker.group(1), number, problems, doc)
            pending_lines.append(number)
            index += 1
            continue
        if NEAR_MARKER.search(line):
            problems.append(f"{doc}:{number}: malformed doc-test marker {line.strip()!r}; "
                            "write <!-- doc-test: DIRECTIVE … --> on a line of its own")
        if fence and not (fence.group("fence")[0] == "`" and "`" in fence.group("info")):
            indent = len(fence.group("indent"))
            opener = fence.group("fence")
            body: list[str] = []
            index += 1
            closed = False
            while index < len(lines):
                close = re.match(r"^ {0,3}(`{3,}|~{3,})\s*$", lines[index])
                if close and close.group(1)[0] == opener[0] and len(close.group(1)) >= len(opener):
                    closed = True
                    break
                text = lines[index]
                body.append(text[min(indent, len(text) - len(text.lstrip(" "))):])
                index += 1
            if not closed:
                problems.append(f"{doc}:{number}: the block opened here is never closed")
            block = Block(doc=doc, line=number, info=fence.group("info").strip(),
                          text="\n".join(body) + ("\n" if body else ""), marker_lines=pending_lines)
            for key, value in pending.items():
                setattr(block, key, value)
            _check_block(block, problems)
            blocks.append(block)
            pending, pending_lines = {}, []
            index += 1
            continue
        if line.strip() and pending_lines:
            problems.append(f"{doc}:{pending_lines[0]}: a doc-test marker must be followed by a fenced block, "
                            f"not by line {number}")
            pending, pending_lines = {}, []
        index += 1
    if pending_lines:
        problems.append(f"{doc}:{pending_lines[0]}: a doc-test marker at the end, with no block after it")
    if not problems and not any(block.runs for block in blocks):
        problems.append(f"{doc}: no block runs ({len(blocks)} blocks, none `sh`, `python` or `html` "
                        "without a skip): the test would pass without checking anything")
    if problems:
        raise DocumentError("\n".join(problems))
    return blocks
