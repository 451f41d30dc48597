"""The newcomer's page (docs/CONCEPTS.md) and the front of docs/DESIGN.md: their shape, and that
every file, folder and type the design's maps and "Where to add X" name exists in the tree.

Reads files only; no server is started.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
CONCEPTS = REPO_ROOT / "docs" / "CONCEPTS.md"
DESIGN = REPO_ROOT / "docs" / "DESIGN.md"

MAX_CONCEPTS_LINES = 200

# The six topics of CONCEPTS.md, in order: the words each one's heading holds (lower case).
CONCEPT_TOPICS = [
    ("stores", ("store", "version")),
    ("topics", ("topic", "epoch")),
    ("receptionists", ("receptionist", "option")),
    ("resume", ("resume", "gap", "reset")),
    ("engines", ("engine", "durab")),
    ("hooks", ("hook",)),
]

MERMAID_KINDS = ("flowchart", "graph", "sequenceDiagram", "stateDiagram", "classDiagram")

FENCE = re.compile(r"^```")


# ---- Markdown helpers ------------------------------------------------------------------------

def headings(text: str, level: str = "## ") -> list[tuple[int, str]]:
    """(line index, title) of every heading of `level`, outside fenced blocks."""
    found, fenced = [], False
    for number, line in enumerate(text.split("\n")):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and line.startswith(level):
            found.append((number, line[len(level):].strip()))
    return found


def sections(text: str) -> dict[str, str]:
    """Each `## ` section's title and its text, up to the next `## ` heading."""
    lines = text.split("\n")
    marks = headings(text)
    bounds = [index for index, _ in marks] + [len(lines)]
    return {title: "\n".join(lines[bounds[i]:bounds[i + 1]]) for i, (_, title) in enumerate(marks)}


def fenced_blocks(text: str, language: str | None = None) -> list[str]:
    """The bodies of the fenced blocks in `text` (of `language` only, when given)."""
    blocks, body, lang = [], None, None
    for line in text.split("\n"):
        if FENCE.match(line):
            if body is None:
                body, lang = [], line[3:].strip()
            else:
                if language is None or lang == language:
                    blocks.append("\n".join(body))
                body = None
        elif body is not None:
            body.append(line)
    assert body is None, "a fenced block is never closed"
    return blocks


def prose(text: str) -> str:
    """`text` without its fenced blocks."""
    kept, fenced = [], False
    for line in text.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            kept.append(line)
    return "\n".join(kept)


# ---- The tree: what a reference may name ---------------------------------------------------

SWIFT_DECLARATION = re.compile(r"\b(?:class|struct|enum|protocol|actor|typealias|extension)\s+([A-Za-z_]\w*)")
SWIFT_MEMBER = re.compile(r"\b(?:func|var|let|case|class|struct|enum|protocol|typealias)\s+`?([A-Za-z_]\w*)")
CODE_WORD = re.compile(r"\b[A-Za-z_]\w*\b")


@dataclass(repr=False)
class Tree:
    """What exists under a repository root: Swift files, the types and members they declare,
    module folders, and the words of the browser client."""

    root: Path
    swift_files: set[str] = field(default_factory=set)  # base names: "Router.swift"
    stems: set[str] = field(default_factory=set)  # "Gateway+Listener", "Gateway", "Listener"
    types: set[str] = field(default_factory=set)
    members: set[str] = field(default_factory=set)
    modules: set[str] = field(default_factory=set)  # folders directly under Sources, Tests, Fuzz
    words: set[str] = field(default_factory=set)  # every identifier in the Swift and Public/ code

    @classmethod
    def scan(cls, root: Path) -> "Tree":
        tree = cls(root)
        for top in ("Sources", "Tests", "Fuzz"):
            base = root / top
            if not base.is_dir():
                continue
            tree.modules.update(entry.name for entry in base.iterdir() if entry.is_dir())
            for folder, _, files in os.walk(base):
                for name in files:
                    if not name.endswith(".swift"):
                        continue
                    tree.swift_files.add(name)
                    stem = name[: -len(".swift")]
                    tree.stems.add(stem)
                    tree.stems.update(stem.split("+"))
                    source = (Path(folder) / name).read_text(encoding="utf-8", errors="replace")
                    tree.types.update(SWIFT_DECLARATION.findall(source))
                    tree.members.update(SWIFT_MEMBER.findall(source))
                    tree.words.update(CODE_WORD.findall(source))
        tree.swift_files.update(entry.name for entry in root.glob("*.swift"))  # Package.swift
        public = root / "Public"
        if public.is_dir():
            for script in public.rglob("*.js"):  # the entry scripts and their modules (client/, viewer/)
                tree.words.update(CODE_WORD.findall(script.read_text(encoding="utf-8", errors="replace")))
        return tree

    def __repr__(self) -> str:
        return f"Tree({self.root}: {len(self.swift_files)} Swift files, {len(self.types)} types)"

    def names_type(self, name: str) -> bool:
        return name in self.types or name in self.stems or name in self.modules


# Names in the maps that are not the project's own: libraries' types and plain words.
NOT_OURS = {"OrderedDictionary", "Hashable", "WebSocket"}

TOP_FOLDERS = ("Sources", "Tests", "Fuzz", "Public", "docs", "deploy", "scripts", "bench")
PATH = re.compile(r"(?<![\w/.-])((?:%s)/[A-Za-z0-9_./+-]*)" % "|".join(TOP_FOLDERS))
SWIFT_FILE = re.compile(r"(?<![\w/+-])([A-Za-z0-9_+-]+\.swift)\b")
TYPE_REFERENCE = re.compile(r"^([A-Z]\w*)(?:\.([A-Za-z_]\w*))?$")
CODE_NAME = re.compile(r"^(?:_?[a-z]+[A-Z]\w*|[A-Z][A-Z0-9]*_[A-Z0-9_]+)$")  # camelCase, SCREAMING_CASE
CAMEL_WORD = re.compile(r"(?<![\w.'-])([A-Z][A-Za-z0-9]*)\b")
EXTENSION = re.compile(r"\(\s?\+\s?([A-Za-z]\w*)|,\s\+([A-Za-z]\w*)")
FOLDER_ROOT = re.compile(r"^((?:Sources|Tests)/[A-Za-z0-9_-]+/)(?:\s|$)")
SUBFOLDER = re.compile(r"^  ([a-z][\w-]*)/\s")


def check_references(text: str, tree: Tree) -> tuple[int, list[str]]:
    """Every reference in `text` (a part of DESIGN.md) checked against `tree`: backticked paths,
    `.swift` names, types (`Type` or `Type.member`) and code names in the prose, and in its
    fenced blocks the paths, folders, `.swift` names, CamelCase names and `(+Extension)` parts.
    Returns how many references were checked and a line for each that names nothing."""
    checked, problems = 0, []

    def path_exists(path: str) -> bool:
        return (tree.root / path.rstrip("/")).exists()

    def check_path(path: str, where: str) -> None:
        nonlocal checked
        if "<" in path or "*" in path:
            return
        checked += 1
        if not path_exists(path.rstrip(".,;:)")):
            problems.append(f"{where}: the path {path!r} does not exist")

    def check_swift_file(name: str, where: str) -> None:
        nonlocal checked
        checked += 1
        if name not in tree.swift_files:
            problems.append(f"{where}: no file named {name!r} in Sources, Tests or Fuzz")

    def check_type(name: str, where: str) -> None:
        nonlocal checked
        checked += 1
        if name not in NOT_OURS and not tree.names_type(name):
            problems.append(f"{where}: no type, file or module named {name!r}")

    # Backticked spans in the prose.
    for span in re.findall(r"`([^`\n]+)`", prose(text)):
        span = span.strip()
        for path in PATH.findall(span):
            check_path(path, "backticked")
        for name in SWIFT_FILE.findall(span):
            check_swift_file(name, "backticked")
        if span.endswith(".swift"):
            continue
        if (match := TYPE_REFERENCE.match(span)) and re.search("[a-z]", match.group(1)):
            check_type(match.group(1), "backticked")
            if match.group(2):
                checked += 1
                if match.group(2) not in tree.members:
                    problems.append(f"backticked: {span!r}: nothing declares a member {match.group(2)!r}")
        elif CODE_NAME.match(span):
            checked += 1
            if span not in tree.words:
                problems.append(f"backticked: {span!r} appears in no Swift source or Public/ script")

    # The maps' fenced blocks.
    for block in fenced_blocks(text):
        root = None
        for line in block.split("\n"):
            where = f"map line {line.strip()[:60]!r}"
            if match := FOLDER_ROOT.match(line):
                root = match.group(1)
            elif (match := SUBFOLDER.match(line)) and root:
                check_path(root + match.group(1) + "/", where)
            elif line and not line.startswith(" "):
                root = None
            for path in PATH.findall(line):
                check_path(path, where)
            for name in SWIFT_FILE.findall(line):
                check_swift_file(name, where)
            for word in CAMEL_WORD.findall(line):
                # Ours are CamelCase with a lower-case letter: PushHub, JSONValue, CSQLite.
                if len(re.findall("[A-Z]", word)) >= 2 and re.search("[a-z]", word):
                    check_type(word, where)
            for first, later in EXTENSION.findall(line):
                part = first or later
                checked += 1
                known = (
                    part in tree.types
                    or part in tree.members
                    or any(stem.endswith("+" + part) or stem.endswith(part) for stem in tree.stems)
                )
                if not known:
                    problems.append(f"{where}: '+{part}' names no file, type or member")
    return checked, problems


# ---- CONCEPTS.md ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def concepts() -> str:
    assert CONCEPTS.is_file(), f"{CONCEPTS} is missing"
    return CONCEPTS.read_text(encoding="utf-8")


def concept_sections(text: str) -> list[tuple[str, str]]:
    """The section of each of the six topics, in the order found; fails naming a missing one."""
    found = sections(text)
    chosen = []
    for topic, words in CONCEPT_TOPICS:
        titles = [title for title in found if all(word in title.lower() for word in words)]
        assert titles, (
            f"CONCEPTS.md has no '## ' heading for {topic} (one whose title holds {', '.join(words)}); "
            f"headings: {list(found)}")
        chosen.append((titles[0], found[titles[0]]))
    return chosen


def test_concepts_is_short(concepts):
    lines = concepts.count("\n") + (0 if concepts.endswith("\n") else 1)
    assert lines < MAX_CONCEPTS_LINES, f"CONCEPTS.md has {lines} lines; keep it under {MAX_CONCEPTS_LINES}"


def test_concepts_has_the_six_topics_in_order(concepts):
    titles = [title for title, _ in concept_sections(concepts)]
    order = [title for _, title in headings(concepts)]
    positions = [order.index(title) for title in titles]
    assert positions == sorted(positions), f"the topics are out of order: {titles}"


def test_every_topic_has_a_mermaid_diagram(concepts):
    for title, body in concept_sections(concepts):
        diagrams = fenced_blocks(body, "mermaid")
        assert diagrams, f"the section {title!r} of CONCEPTS.md has no ```mermaid block"
        for diagram in diagrams:
            first = diagram.strip().split("\n")[0].strip()
            assert first.startswith(MERMAID_KINDS), f"{title!r}: a mermaid block starts with {first!r}"


def test_hooks_say_what_is_built_and_what_is_planned(concepts):
    title, body = concept_sections(concepts)[-1]
    for option in ("--hook-connect", "--hook-publish", "--hook-write", "--hook-rpc", "docs/HOOKS.md"):
        assert option in body, f"{title!r} must name {option}"
    assert re.search(r"namespaces \(`--config`\)", body), f"{title!r} must name the namespaces of the config file"


def test_concepts_names_no_machine_paths(concepts):
    for marker in ("/work/", "/home/", "/tmp/", "/root/", ".build/"):
        assert marker not in concepts, f"CONCEPTS.md mentions a machine path ({marker})"


# ---- DESIGN.md -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def design() -> str:
    assert DESIGN.is_file(), f"{DESIGN} is missing"
    return DESIGN.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def tree() -> Tree:
    return Tree.scan(REPO_ROOT)


def design_front(text: str) -> str:
    """DESIGN.md from its start up to the threading model: the maps and "Where to add X"."""
    marks = dict((title, index) for index, title in headings(text))
    assert "Threading model" in marks, "DESIGN.md has no '## Threading model'"
    return "\n".join(text.split("\n")[: marks["Threading model"]])


def test_design_opens_with_the_maps_then_where_to_add(design):
    titles = [title for _, title in headings(design)]
    assert titles[:2] == ["Module map", "Folder map"], f"DESIGN.md must open with the two maps, not {titles[:2]}"
    assert titles[2].startswith("Where to add"), f"the maps must be followed by 'Where to add', not {titles[2]!r}"


def test_where_to_add_comes_before_the_threading_model_and_the_invariants(design):
    titles = [title for _, title in headings(design)]
    where = next(i for i, title in enumerate(titles) if title.startswith("Where to add"))
    assert where < titles.index("Threading model") < titles.index("Invariants"), titles


def test_where_to_add_covers_hooks_endpoints_engines_and_options(design):
    body = next(text for title, text in sections(design).items() if title.startswith("Where to add"))
    for topic in ("**A hook.**", "**An HTTP endpoint.**", "**An engine.**", "**A subscription option.**"):
        assert topic in body, f"'Where to add X' has no paragraph {topic}"
    assert "`HookClient`" in body, "'Where to add X' must name the hook seam"


def test_invariants_keep_their_numbers(design):
    body = sections(design)["Invariants"]
    numbers = [int(n) for n in re.findall(r"^\s{0,3}(\d+)\. \*\*", body, re.MULTILINE)]
    assert numbers == list(range(1, len(numbers) + 1)), f"the invariants are not numbered 1, 2, 3 …: {numbers}"
    assert len(numbers) >= 54, f"only {len(numbers)} invariants: none may be dropped"


def test_every_name_in_the_maps_exists(design, tree):
    checked, problems = check_references(design_front(design), tree)
    assert checked >= 100, f"only {checked} references found in the maps: the checker is not reading them"
    assert not problems, "DESIGN.md's maps name what is not in the tree:\n  " + "\n  ".join(problems)


def test_the_maps_name_every_module_and_folder(design):
    """The other way round: a module or a folder added to the tree is added to the maps."""
    found = sections(design)
    module_map = "\n".join(fenced_blocks(found["Module map"]))
    folder_map = "\n".join(fenced_blocks(found["Folder map"]))
    missing = [
        f"module {entry.name} is not in the module map"
        for entry in sorted((REPO_ROOT / "Sources").iterdir())
        if entry.is_dir() and not re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(entry.name), module_map)
    ]
    for module in ("ReceptionistGateway", "ReceptionistPush"):
        missing += [
            f"folder Sources/{module}/{entry.name}/ is not in the folder map"
            for entry in sorted((REPO_ROOT / "Sources" / module).iterdir())
            if entry.is_dir() and not re.search(r"^  %s/\s" % re.escape(entry.name), folder_map, re.MULTILINE)
        ]
    assert not missing, "DESIGN.md's maps are behind the tree:\n  " + "\n  ".join(missing)


# A map that names what does not exist, in every form the checker reads.
BROKEN_SNIPPET = """\
## Module map

```
ReceptionistNowhere            a module that is not there: GhostHub, PushHub
Sources/ReceptionistGateway/
  ghosts/                      GhostClient (+Retry)
Fuzz/FuzzGhost/                Ghost.swift
```

See `Sources/ReceptionistGateway/ghosts/GhostClient.swift`, `NoSuchFile.swift`, `GhostRouter`,
`Router.noSuchMember`, `ghostHelper` and `Router.route`.
"""

BROKEN_NAMES = [
    "ReceptionistNowhere", "GhostHub", "ghosts/", "GhostClient", "+Retry", "Fuzz/FuzzGhost/", "Ghost.swift",
    "GhostClient.swift", "NoSuchFile.swift", "GhostRouter", "noSuchMember", "ghostHelper",
]


def test_the_checker_finds_every_broken_reference(tree):
    checked, problems = check_references(BROKEN_SNIPPET, tree)
    report = "\n".join(problems)
    for name in BROKEN_NAMES:
        assert name in report, f"the checker missed {name!r}; it reported:\n{report}"
    for real in ("PushHub", "Router.route", "'Sources/ReceptionistGateway/'"):
        assert real not in report, f"the checker refused {real!r}, which exists:\n{report}"
    assert checked > len(BROKEN_NAMES)


def test_the_checker_passes_real_references(tree):
    snippet = (
        "```\nSources/ReceptionistGateway/\n  http/    Router, RouteResult, HTTPSession(+State)\n```\n"
        "`Sources/ReceptionistWire/SubscriptionOptions.swift`, `GatewayEngine`, `TopicLog.older`, "
        "`validateStoreOptions`, `STORE_OPTION_KEYS`, `docs/PROTOCOL.md`\n")
    checked, problems = check_references(snippet, tree)
    assert not problems, problems
    assert checked >= 9, checked
