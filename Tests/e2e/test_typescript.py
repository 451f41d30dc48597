"""The TypeScript declarations of the browser client, Public/receptionist-client.d.ts (which
re-exports the declarations in Public/client/, each beside the module it describes).

Tests/typescript/example.ts is a page script that uses the client as docs/CLIENT.md does; it must
type-check under `tsc -p Tests/typescript/tsconfig.json` (strict, no emit). Its lines marked
`// @ts-expect-error` must NOT type-check (tsc reports an unused directive otherwise), and to be
sure the declarations are strict rather than `any`, a copy with the directives removed must fail
on exactly those lines. Last, the declarations are held against the real module: the names it
exports, the members of its classes, the events it emits, its status strings and the option
names it reads.

Needs TypeScript (`/usr/bin/tsc`, Debian's `node-typescript`) and Node.js; both are installed by
`scripts/install-deps.sh test`. No gateway runs here.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO_ROOT

TSC = Path("/usr/bin/tsc")
DECLARATIONS = REPO_ROOT / "Public" / "receptionist-client.d.ts"
MODULE = REPO_ROOT / "Public" / "receptionist-client.js"
CLIENT_DIR = REPO_ROOT / "Public" / "client"  # the modules (and declarations) MODULE re-exports
PROJECT = REPO_ROOT / "Tests" / "typescript"
EXAMPLE = PROJECT / "example.ts"
CONFIG = PROJECT / "tsconfig.json"
TSC_TIMEOUT = 120  # seconds for one tsc run (about 3 s here)
DIRECTIVE = "// @ts-expect-error"
# tsc --pretty false: `path(line,col): error TS1234: message`
DIAGNOSTIC = re.compile(r"^(?P<file>[^\n(]+)\((?P<line>\d+),(?P<col>\d+)\): error (?P<code>TS\d+): ", re.M)

pytestmark = pytest.mark.timeout(2 * TSC_TIMEOUT + 30)


def tsc_binary() -> Path:
    """`/usr/bin/tsc`, failing (not skipping) the test when TypeScript is not installed."""
    if not TSC.exists():
        pytest.fail(
            f"{TSC} not found: TypeScript is missing. `scripts/install-deps.sh test` installs "
            "Debian's `node-typescript`, which provides it (or: apt-get install node-typescript).",
            pytrace=False,
        )
    return TSC


def node_binary() -> str:
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.fail("Node.js not found: `scripts/install-deps.sh test` installs `nodejs`.", pytrace=False)
    return node


def run_tsc(config: Path) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            [str(tsc_binary()), "-p", str(config), "--pretty", "false"],
            cwd=config.parent, capture_output=True, text=True, timeout=TSC_TIMEOUT,
        )
    except subprocess.TimeoutExpired as error:
        pytest.fail(f"tsc -p {config} ran longer than {TSC_TIMEOUT} s: {error.stdout!r}", pytrace=False)


def errors_by_line(result: subprocess.CompletedProcess, file_name: str) -> dict[int, list[str]]:
    """The lines of `file_name` that tsc reported errors on, each with its error codes."""
    lines: dict[int, list[str]] = {}
    for match in DIAGNOSTIC.finditer(result.stdout + result.stderr):
        if Path(match["file"]).name == file_name:
            lines.setdefault(int(match["line"]), []).append(match["code"])
    return lines


def directive_lines(text: str) -> list[int]:
    """The 1-based numbers of the lines that are a `// @ts-expect-error` directive."""
    return [number for number, line in enumerate(text.splitlines(), 1) if line.strip().startswith(DIRECTIVE)]


def project_copy(root: Path, example_text: str) -> Path:
    """The project laid out under `root` as in the repository, with `example_text` as example.ts."""
    (root / "Public").mkdir()
    shutil.copy(DECLARATIONS, root / "Public" / DECLARATIONS.name)
    (root / "Public" / CLIENT_DIR.name).mkdir()
    for declarations in CLIENT_DIR.glob("*.d.ts"):
        shutil.copy(declarations, root / "Public" / CLIENT_DIR.name / declarations.name)
    project = root / "Tests" / "typescript"
    project.mkdir(parents=True)
    shutil.copy(CONFIG, project / CONFIG.name)
    (project / EXAMPLE.name).write_text(example_text)
    return project / CONFIG.name


def without_lines(text: str, numbers: set[int]) -> str:
    return "".join(line for number, line in enumerate(text.splitlines(keepends=True), 1) if number not in numbers)


def test_example_type_checks():
    result = run_tsc(CONFIG)
    output = (result.stdout + result.stderr).strip()
    assert result.returncode == 0, f"tsc -p {CONFIG.relative_to(REPO_ROOT)} failed:\n{output}"
    assert output == "", output


def test_example_has_lines_that_must_fail():
    """The strictness checks are there: a wrong transport, maxRate as a string, an unknown event, saved() misused."""
    text = EXAMPLE.read_text()
    lines = text.splitlines()
    checked = [lines[number] for number in directive_lines(text)]  # the line after each directive
    assert len(checked) >= 4, checked
    for needle in ["transport: 'polling'", "maxRate: '10'", "tiles.on('changes'", "tiles.saved().since"]:
        assert any(needle in line for line in checked), f"no @ts-expect-error line with {needle!r}"


def test_removing_one_directive_makes_tsc_fail_on_that_line(tmp_path):
    """Without its `@ts-expect-error`, the wrong transport is a real error, on that line and no other."""
    text = EXAMPLE.read_text()
    lines = text.splitlines()
    [directive] = [n for n in directive_lines(text) if "transport: 'polling'" in lines[n]]
    config = project_copy(tmp_path, without_lines(text, {directive}))
    result = run_tsc(config)
    output = result.stdout + result.stderr
    assert result.returncode != 0, f"tsc accepted `{lines[directive].strip()}`:\n{output}"
    # The statement that followed the directive is now at the directive's own line number.
    errors = errors_by_line(result, EXAMPLE.name)
    assert list(errors) == [directive], f"expected an error on line {directive} only:\n{output}"
    assert f"{EXAMPLE.name}({directive}," in output
    assert "'\"polling\"' is not assignable" in output, output


def test_every_directive_marks_a_real_error(tmp_path):
    """With every directive removed, tsc fails on exactly the lines they marked."""
    text = EXAMPLE.read_text()
    directives = directive_lines(text)
    config = project_copy(tmp_path, without_lines(text, set(directives)))
    result = run_tsc(config)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    # The statement after the i-th directive (0-based) moves up by i + 1 lines.
    expected = [number - index for index, number in enumerate(directives)]
    assert sorted(errors_by_line(result, EXAMPLE.name)) == expected, output


# ---- The declarations against the real module -------------------------------------------------

INSPECT = r"""
// argv: the typescript package's directory, the .d.ts, the .js
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
const [tsDir, dtsPath, jsPath] = process.argv.slice(2);
const ts = createRequire(import.meta.url)(tsDir);

const program = ts.createProgram([dtsPath], {
  strict: true, noEmit: true, types: [], lib: ['lib.es2022.d.ts', 'lib.dom.d.ts'],
  target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ES2022, moduleResolution: ts.ModuleResolutionKind.NodeJs,
});
const checker = program.getTypeChecker();
const moduleSymbol = checker.getSymbolAtLocation(program.getSourceFile(dtsPath));
const names = (type) => checker.getPropertiesOfType(type).map((p) => p.getName()).sort();
const literals = (type) => (type.isUnion() ? type.types : [type]).filter((t) => t.isStringLiteral()).map((t) => t.value).sort();
const declared = { values: [], members: {}, types: {}, literals: {} };
for (const symbol of checker.getExportsOfModule(moduleSymbol)) {
  let target = symbol;
  if (symbol.flags & ts.SymbolFlags.Alias) {
    const decl = symbol.declarations[0];
    if (ts.isExportSpecifier(decl) && (decl.isTypeOnly || decl.parent.parent.isTypeOnly)) continue;
    target = checker.getAliasedSymbol(symbol);
  }
  const type = checker.getDeclaredTypeOfSymbol(target);
  if (target.flags & ts.SymbolFlags.Value) {
    declared.values.push(symbol.getName());
    if (target.flags & ts.SymbolFlags.Class) declared.members[symbol.getName()] = names(type);
  } else if (target.flags & ts.SymbolFlags.TypeAlias) {
    declared.literals[symbol.getName()] = literals(type);
    if (!type.isUnion()) declared.types[symbol.getName()] = names(type);
  } else {
    declared.types[symbol.getName()] = names(type);
  }
}
declared.values.sort();

const mod = await import(pathToFileURL(jsPath).href);
class FakeSocket { send() {} close() {} }
class FakeSource { addEventListener() {} close() {} }
const client = new mod.ReceptionistClient({ url: 'http://127.0.0.1:9', WebSocket: FakeSocket, EventSource: FakeSource });
const instances = {
  ReceptionistClient: client,
  StoreSubscription: client.subscribeStore('store'),
  TopicSubscription: client.subscribeTopic('topic'),
};
const publicNames = (object) => {
  const found = new Set();
  for (let o = object; o && o !== Object.prototype; o = Object.getPrototypeOf(o)) {
    for (const name of Object.getOwnPropertyNames(o)) if (!name.startsWith('_') && name !== 'constructor') found.add(name);
  }
  return [...found].sort();
};
const runtime = { values: Object.keys(mod).sort(), members: {} };
for (const [name, instance] of Object.entries(instances)) runtime.members[name] = publicNames(instance);
runtime.members.default = runtime.members.ReceptionistClient;
client.close();
const diagnostics = ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, ' '));
console.log(JSON.stringify({ declared, runtime, diagnostics }));
"""


@pytest.fixture(scope="module")
def inspected(tmp_path_factory):
    """What the .d.ts declares (read with the TypeScript compiler API) and what the module has."""
    typescript = tsc_binary().resolve().parents[1]  # /usr/share/nodejs/typescript/bin/tsc
    script = tmp_path_factory.mktemp("inspect") / "inspect.mjs"
    script.write_text(INSPECT)
    try:
        result = subprocess.run(
            [node_binary(), str(script), str(typescript), str(DECLARATIONS), str(MODULE)],
            capture_output=True, text=True, timeout=TSC_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"inspecting the declarations ran longer than {TSC_TIMEOUT} s", pytrace=False)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["diagnostics"] == [], found["diagnostics"]
    return found


# The modules under Public/client/ by part: what the classes use (options.js last: the option
# check is read from its start to the end of the part), the subscriptions' base, the two kinds,
# and the client with its WebSocket half (connection.js, its base class).
MODULE_PARTS = {
    "top": ["defaults.js", "limits.js", "errors.js", "helpers.js", "emitter.js", "changes.js", "options.js"],
    "base": ["subscription.js", "sse-heartbeat.js"],
    "store": ["store-subscription.js"],
    "topic": ["topic-subscription.js"],
    "client": ["receptionist-client.js", "connection.js", "heartbeat.js"],
}


def module_parts() -> dict[str, str]:
    """The module's source by part: the top, the subscriptions' base, the two kinds, the client."""
    listed = sorted(name for names in MODULE_PARTS.values() for name in names)
    assert listed == sorted(path.name for path in CLIENT_DIR.glob("*.js")), "each module in Public/client/ in one part"
    return {part: "".join((CLIENT_DIR / name).read_text() for name in names) for part, names in MODULE_PARTS.items()}


def emitted(source: str) -> set[str]:
    return set(re.findall(r"(?<![\w.])this\._emit\('(\w+)'", source))


def test_exports_and_members_match_the_module(inspected):
    declared, runtime = inspected["declared"], inspected["runtime"]
    assert declared["values"] == runtime["values"]
    assert declared["members"] == runtime["members"]


def test_events_match_what_the_module_emits(inspected):
    parts = module_parts()
    client = emitted(parts["client"]) | set(re.findall(r"this\._client\._emit\('(\w+)'", "".join(parts.values())))
    types = inspected["declared"]["types"]
    assert set(types["ClientEventMap"]) == client
    assert set(types["StoreEventMap"]) == emitted(parts["base"]) | emitted(parts["store"])
    assert set(types["TopicEventMap"]) == emitted(parts["base"]) | emitted(parts["topic"])


def test_status_and_option_strings_match_the_module(inspected):
    parts = module_parts()
    literals, types = inspected["declared"]["literals"], inspected["declared"]["types"]
    client_statuses = set(re.findall(r"(?<![\w.])this\._setStatus\('(\w+)'", parts["client"]))
    client_statuses |= set(re.findall(r"this\._status = '(\w+)'", parts["client"]))
    assert set(literals["ClientStatus"]) == client_statuses
    sub_code = parts["base"] + parts["store"] + parts["topic"]
    sub_statuses = set(re.findall(r"(?<![\w.])this\._setStatus\('(\w+)'", sub_code))
    sub_statuses |= set(re.findall(r"this\._status = '(\w+)'", sub_code))
    sub_statuses |= set(re.findall(r"sub\._setStatus\('(\w+)'", parts["client"]))
    assert set(literals["SubscriptionStatus"]) == sub_statuses
    assert set(literals["TransportOption"]) == set(re.findall(r"'(\w+)'", re.search(r"\[([^\]]*)\]\.includes\(transport\)", parts["client"])[1]))
    assert set(literals["TokenIn"]) == set(re.findall(r"'(\w+)'", re.search(r"\[([^\]]*)\]\.includes\(tokenIn\)", parts["client"])[1]))

    # Option names: what the constructor, subscribeStore's check, subscribeTopic and publish read.
    constructor = re.search(r"const \{([^}]*)\} = options;", parts["client"])[1]
    read = {name.split("=")[0].strip() for name in constructor.split(",")} - {""}
    client_constructor = parts["client"][parts["client"].index("constructor(options"):parts["client"].index("get transport()")]
    read |= set(re.findall(r"options\.(\w+)", client_constructor))
    assert set(types["ReceptionistClientOptions"]) == read
    validate = parts["top"][parts["top"].index("function validateStoreOptions"):]
    assert set(types["StoreOptions"]) == set(re.findall(r"options\.(\w+)", validate))
    topic = parts["client"][parts["client"].index("subscribeTopic(name"):parts["client"].index("close() {")]
    store_only = set(re.findall(r"'(\w+)'", re.search(r"STORE_OPTION_KEYS = \[([^\]]*)\]", parts["top"])[1]))
    assert set(types["TopicOptions"]) == set(re.findall(r"options\.(\w+)", topic)) | store_only
    assert set(types["PublishOptions"]) == set(re.findall(r"\{ (\w+) \} = \{\}", parts["client"]))
