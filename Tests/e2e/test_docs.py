"""Every runnable block of README.md and docs/GETTING-STARTED.md runs, in order, against a real gateway.

The rules for blocks and markers are in docs_blocks.py (and, for readers of the documents, at the
top of docs/GETTING-STARTED.md). How a document is run:

- One working directory per document, a fresh temporary one. It holds a link `Public` to the
  repository's Public/, so `--public Public` means what it means in the repository, and a
  `receptionist` on PATH (the binary under test, RECEPTIONIST_BIN); `.build/release/receptionist`
  and `.build/debug/receptionist` in a block are that binary too. Files a block writes there
  (and `save` markers) are there for the blocks after it; shell variables are not (each block is
  a bash of its own).
- A gateway is started on a free port before the first block that runs: as a `server` block
  says, or else as `make run` starts it (`serve --public Public --demo --data-dir .data`). A
  `server` block stops the gateway before it and starts the next, in the same directory, so a
  `--data-dir` keeps what the earlier blocks wrote, as it does for a reader.
- `127.0.0.1:8080` and `localhost:8080` in a block become the gateway's address; `127.0.0.1:8000`
  and `localhost:8000` the address of the second origin, a small HTTP server serving the
  working directory (where `html` blocks are put as pages). In a `server` command, `--port` and
  `--host` become the test's.
- `sh` blocks run as `bash -euo pipefail` with the venv's bin first on PATH. Their `curl` fails
  on an HTTP error status (it runs as `curl --fail-with-body` unless the block gives `-f`,
  `--fail` or `--fail-with-body` itself), and a streaming curl (`-N`) that stops at its own
  `--max-time` counts as a success. Any curl that fails fails its block, even one whose status
  the shell drops (run in the background, or under `|| true`). `python` blocks run with this
  Python. Each block has
  BLOCK_TIMEOUT seconds; whatever it leaves running (unless it is a `background` block) is ended
  with it.
- A block that fails stops the document: the failure names the document, the block's line, the
  block as run and its output.
"""

from __future__ import annotations

import pytest

from docs_blocks import DocumentError, parse
from docs_runner import run_document, run_file

pytestmark = pytest.mark.timeout(600)


# ---- The documents ---------------------------------------------------------------------------

def test_getting_started_blocks_run(tmp_path, start_server):
    run = run_file("getting-started", tmp_path, start_server)
    kinds = {entry.split()[1] for entry in run.ran}
    # The guide's promises: curl, Python, a page with live data, and gateways started as it says.
    assert {"sh", "python", "html", "server"} <= kinds, run.ran


def test_readme_blocks_run(tmp_path, start_server):
    run_file("readme", tmp_path, start_server)


# ---- The rules themselves, on small documents ------------------------------------------------

SAMPLE = """# Sample

<!-- doc-test: server --demo -->
```sh
make run
```

```sh
curl -s http://127.0.0.1:8080/healthz
```

<!-- doc-test: skip (needs root) -->

```sh
podman run receptionist
```

<!-- doc-test: save hello.py -->
```python
print("hi")
```

```console
$ not run
```

````text
```sh
echo "inside a text block: shown only"
```
````

```
no info string
```

<!-- doc-test: save page.html -->
<!-- doc-test: live tiles tile-0 label -->
```html
<p>page</p>
```

<!-- doc-test: background -->
```sh
curl -N http://127.0.0.1:8080/api/stores/tiles/events
```

<!-- doc-test: server -->
```sh
.build/release/receptionist serve --public Public \\
  --allowed-origin http://127.0.0.1:8000
```

<!-- doc-test: save mint.mjs -->
```js
console.log("shown, and saved for a later block");
```
"""


def test_block_rules_on_a_sample():
    blocks = parse(SAMPLE, "sample.md")
    assert [(b.line, b.lang, b.kind) for b in blocks] == [
        (4, "sh", "server"), (8, "sh", "sh"), (14, "sh", "skip"), (19, "python", "python"),
        (23, "console", "shown"), (27, "text", "shown"), (33, "", "shown"), (39, "html", "html"),
        (44, "sh", "sh"), (49, "sh", "server"), (55, "js", "shown"),
    ]
    by_line = {b.line: b for b in blocks}
    assert by_line[4].server == "--demo" and by_line[49].server == ""
    assert by_line[14].skip == "needs root"
    assert by_line[19].save == "hello.py" and by_line[19].text == 'print("hi")\n'
    assert by_line[27].text.startswith("```sh\n")  # a fence inside a longer fence is text
    assert by_line[39].live == ("tiles", "tile-0", "label") and by_line[39].save == "page.html"
    assert by_line[44].background and not by_line[8].background
    assert by_line[55].save == "mint.mjs" and not by_line[55].runs


@pytest.mark.parametrize("markdown, problem", [
    ("```text\nonly shown\n```\n", "no block runs"),
    ("# nothing at all\n", "no block runs"),
    ("<!-- doc-test: skip (reason) -->\n```sh\nmake test\n```\n", "no block runs"),
    ("<!-- doc-test: skip -->\n```sh\nmake test\n```\n```sh\ntrue\n```\n", "needs a reason"),
    ("<!-- doc-test: skip ( ) -->\n```sh\nmake test\n```\n```sh\ntrue\n```\n", "needs a reason"),
    ("<!-- doc-test: skip because -->\n```sh\nmake test\n```\n```sh\ntrue\n```\n", "needs a reason"),
    ("<!-- doc-test: skp (typo) -->\n```sh\ntrue\n```\n", "unknown doc-test marker"),
    ("<!-- doctest: skip (x) -->\n```sh\ntrue\n```\n", "malformed doc-test marker"),
    ("<!-- doc-test: skip (x) -->\nSome text.\n```sh\ntrue\n```\n", "must be followed by a fenced block"),
    ("```sh\ntrue\n```\n<!-- doc-test: background -->\n", "at the end"),
    ("```bash\ntrue\n```\n```sh\ntrue\n```\n", "info string `bash`"),
    ("```html\n<p></p>\n```\n", "needs <!-- doc-test: live"),
    ("<!-- doc-test: live s m f -->\n```sh\ntrue\n```\n", "`live` is for `html` blocks"),
    ("<!-- doc-test: background -->\n```python\npass\n```\n", "`background` is for `sh` blocks"),
    ("<!-- doc-test: server -->\n```sh\nmake run\n```\n```sh\ntrue\n```\n", "one `receptionist serve"),
    ("<!-- doc-test: save ../escape.py -->\n```python\npass\n```\n", "one relative path"),
    ("```sh\ntrue\n", "never closed"),
])
def test_broken_documents_are_refused(markdown, problem):
    with pytest.raises(DocumentError) as refused:
        parse(markdown, "broken.md")
    assert problem in str(refused.value)
    assert "broken.md:" in str(refused.value)


def test_a_failing_block_is_reported_with_document_line_and_output(tmp_path, start_server):
    """The runner runs blocks against a gateway it started, rewrites the address, carries files from
    block to block, and stops at the first failure with the document, the line and the output."""
    markdown = """# Probe

```sh
curl -s http://127.0.0.1:8080/healthz > health.json
```

```python
import json
print("status is", json.load(open("health.json"))["status"])
```

```sh
echo "about to fail"
curl -s http://127.0.0.1:8080/api/stores/no-such-store
echo "not reached"
```

```sh
echo "never run"
```
"""
    with pytest.raises(pytest.fail.Exception) as failed:
        run_document("probe.md", markdown, tmp_path / "work", start_server)
    message = str(failed.value)
    assert message.startswith("probe.md:12: sh block exited 22"), message
    assert "about to fail" in message and '"error":"not_found"' in message
    assert "not reached" not in message.split("--- output ---")[1]
    assert (tmp_path / "work" / "health.json").read_text() == '{"status":"ok"}'
    assert not (tmp_path / "work" / ".doc-test" / "block-18.out").exists()


def test_streams_and_background_blocks(tmp_path, start_server):
    """A bounded curl stream passes; a background block runs beside the blocks after it; a curl whose
    failure the shell drops (in the background, then `wait`) still fails its block."""
    markdown = """# Streams

<!-- doc-test: server --demo --demo-rate 50 -->
```sh
make run
```

```sh
curl -sN --max-time 1 http://127.0.0.1:8080/api/stores/tiles/events > stream.txt
grep -q '^event: snapshot' stream.txt
```

<!-- doc-test: background -->
```sh
curl -sN http://127.0.0.1:8080/api/topics/news/events > news.txt
```

```sh
sleep 0.5
curl -s -X POST http://127.0.0.1:8080/api/topics/news/messages -d '{"headline":"hello"}'
for _ in $(seq 50); do grep -q hello news.txt && exit 0; sleep 0.1; done
exit 1
```

```sh
curl -sN --max-time 2 http://127.0.0.1:8080/api/stores/no-such-store/events &
sleep 0.2
wait
```
"""
    with pytest.raises(pytest.fail.Exception) as failed:
        run_document("streams.md", markdown, tmp_path / "work", start_server)
    message = str(failed.value)
    assert message.startswith("streams.md:25: a curl in the block failed, though the block exited 0"), message
    assert "no-such-store/events: exit 22" in message
    assert "event: snapshot" in (tmp_path / "work" / "stream.txt").read_text()
