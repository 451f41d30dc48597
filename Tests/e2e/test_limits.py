"""One table of limits (docs/PROTOCOL.md, "Limits") for the gateway and the client library: the
document, the Swift constants and the library's `LIMITS` hold the same values, and at each
boundary the library refuses exactly what the gateway refuses."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from conftest import REPO_ROOT
from test_node_client import NODE
from wsclient import connect, new_store, subscribe

PROTOCOL = REPO_ROOT / "docs" / "PROTOCOL.md"
CLIENT = REPO_ROOT / "Public" / "receptionist-client.js"
CLIENT_LIMITS = REPO_ROOT / "Public" / "client" / "limits.js"  # where LIMITS is defined; CLIENT exports it
SWIFT = {
    "maxModels": ("Sources/ReceptionistWire/SubscriptionOptions.swift", "maxModels"),
    "maxPaths": ("Sources/ReceptionistWire/SubscriptionOptions.swift", "maxPaths"),
    "minRate": ("Sources/ReceptionistWire/SubscriptionOptions.swift", "minRate"),
    "maxRate": ("Sources/ReceptionistWire/SubscriptionOptions.swift", "maxRateLimit"),
    "maxEpochBytes": ("Sources/ReceptionistWire/ClientMessage.swift", "maxEpochBytes"),
    "maxSince": ("Sources/ReceptionistWire/ClientMessage.swift", "maxSince"),
    "maxRefBytes": ("Sources/ReceptionistWire/ClientMessage.swift", "maxRefBytes"),
}


def documented() -> dict[str, float]:
    section = PROTOCOL.read_text(encoding="utf-8").split("### Limits", 1)[1].split("\n### ", 1)[0]
    return {name: float(value) for name, value in re.findall(r"^\| `(\w+)` \| ([\d.]+) \|", section, re.MULTILINE)}


def in_swift(path: str, name: str) -> float:
    text = (REPO_ROOT / path).read_text(encoding="utf-8")
    match = re.search(rf"static let {name}(?:: \w+)? = ([\d_.]+)", text)
    assert match, f"{path} declares no {name}"
    return float(match.group(1).replace("_", ""))


def in_client() -> dict[str, float]:
    """The library's LIMITS, from the module that defines it (and the same object the library exports)."""
    script = (f"Promise.all([import('{CLIENT_LIMITS.as_uri()}'), import('{CLIENT.as_uri()}')]).then(([defined, library]) => "
              "{ if (defined.LIMITS !== library.LIMITS) throw new Error('two LIMITS'); console.log(JSON.stringify(defined.LIMITS)); })")
    result = subprocess.run([str(NODE), "--input-type=module", "-e", script], capture_output=True, timeout=30, text=True)
    assert result.returncode == 0, result.stderr
    return {name: float(value) for name, value in json.loads(result.stdout).items()}


def test_the_document_the_gateway_and_the_library_hold_one_table():
    table = documented()
    assert set(table) == set(SWIFT), table
    assert {name: in_swift(*where) for name, where in SWIFT.items()} == table
    assert in_client() == table


def client_refuses(options: dict) -> bool:
    """Whether the library's subscribeStore throws for `options`, under Node."""
    script = f"""
        const {{ ReceptionistClient }} = await import('{CLIENT.as_uri()}');
        const client = new ReceptionistClient({{ url: 'ws://127.0.0.1:9/', WebSocket: class {{ }} }});
        try {{ client.subscribeStore('s', {json.dumps(options)}); console.log('taken'); }}
        catch (error) {{ console.log(error instanceof TypeError ? 'refused' : 'error ' + error); }}
        client.close();"""
    result = subprocess.run([str(NODE), "--input-type=module", "-e", script], capture_output=True, timeout=30, text=True)
    assert result.returncode == 0 and result.stdout.strip() in ("taken", "refused"), (result.stdout, result.stderr)
    return result.stdout.strip() == "refused"


BOUNDARIES = [
    {"models": [f"m{n}" for n in range(1024)]}, {"models": [f"m{n}" for n in range(1025)]},
    {"paths": [f"p{n}" for n in range(64)]}, {"paths": [f"p{n}" for n in range(65)]},
    {"maxRate": 0.01}, {"maxRate": 0.0099}, {"maxRate": 1000}, {"maxRate": 1000.5},
    {"since": 0, "state": {}, "epoch": "e" * 64}, {"since": 0, "state": {}, "epoch": "e" * 65},
    {"since": 0, "state": {}, "epoch": "é" * 32}, {"since": 0, "state": {}, "epoch": "é" * 33},
]


@pytest.mark.parametrize("options", BOUNDARIES, ids=lambda o: ",".join(f"{k}={len(v) if isinstance(v, (list, str)) else v}" for k, v in o.items() if k != "state"))
def test_the_library_refuses_exactly_what_the_gateway_refuses(server, options):
    store = new_store(server.port, {"m0": {"p0": 1}})
    message = {key: value for key, value in options.items() if key != "state"}
    with connect(server.port) as ws:
        frame = subscribe(ws, store=store, **message)
    gateway_refuses = frame["type"] == "error"
    assert not gateway_refuses or frame["code"] == "bad_message", frame
    assert client_refuses(options) == gateway_refuses, (options, frame)
