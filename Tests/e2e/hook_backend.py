"""A small application backend for the hook tests: a real HTTP server in its own process.

Run as `python hook_backend.py PORT_FILE`; it listens on a free loopback port, writes the port to
PORT_FILE, and answers the gateway's hooks by fixed rules (below); an allow-answer may be padded to
a size the client asks for (the session cookie `pad-<bytes>`, a published `{"answerBytes": n}`). `GET /stats` reports the calls
it has seen and the most that were in flight at once; `POST /control` sets a delay in seconds
added to every answer (`{"delay": 0.5}`), to play a slow backend.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

USERS = {
    # session cookie: the connect hook's answer
    "alice": {"user": "alice", "info": {"name": "Alice"}, "stores": ["*"], "topics": ["*"],
              "publish": ["chat"], "write": ["paint", "tiles"], "presence": ["*"]},
    "bob": {"user": "bob", "stores": ["public", "tiles"], "topics": ["chat"]},
}


class State:
    lock = threading.Lock()
    delay = 0.0
    in_flight = 0
    peak = 0
    calls: dict[str, int] = {}
    last: dict[str, dict] = {}
    # Each hook's last body as it came, byte for byte (as text).
    raw: dict[str, str] = {}


class Padded:
    """An answer made exactly `size` bytes long by a string member `pad`, which the gateway ignores."""

    def __init__(self, value: dict, size: int):
        self.value, self.size = value, size

    def encode(self) -> bytes:
        bare = len(json.dumps({**self.value, "pad": ""}).encode())
        body = json.dumps({**self.value, "pad": "x" * (self.size - bare)}).encode()
        assert len(body) == self.size, (len(body), self.size)
        return body


def cookie_session(headers: dict) -> str | None:
    for part in headers.get("cookie", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == "session":
            return value
    return None


def decide(hook: str, body: dict) -> tuple[int, object]:
    if hook == "connect":
        session = cookie_session(body.get("headers", {}))
        if session == "mallory":
            return 403, {"reason": "mallory is banned"}
        if session in ("carol", "dave"):  # short grants, for the refresh hook
            return 200, {"user": session, "topics": ["chat"], "expiresAt": time.time() + 5.5}
        if session in USERS:
            return 200, USERS[session]
        if session and session.startswith("pad-") and session[4:].isdigit():
            return 200, Padded({"user": session, "topics": ["*"], "publish": ["*"]}, int(session[4:]))
        return 401, {"reason": "no session"}
    if hook == "refresh":
        if body.get("user") == "carol":
            return 200, {"expiresAt": time.time() + 60}
        return 403, {"reason": f"{body.get('user')}'s session has ended"}
    if hook == "subscribe":
        name = body.get("store") or body.get("topic") or ""
        if name.startswith("narrow-"):
            return 200, {"allow": True, "paths": ["color"]}
        if name.startswith("nested-"):
            return 200, {"allow": True, "paths": ["style.color"]}
        if name.startswith("one-model-"):
            return 200, {"allow": True, "models": ["a"]}
        if name.startswith("deny-"):
            return 200, {"allow": False, "reason": f"{body.get('user')} may not see {name}"}
        return 403, {}
    if hook == "publish":
        data = body.get("data")
        text = data.get("text") if isinstance(data, dict) else None
        # A message carrying "hookDelay" is answered that many seconds late.
        if isinstance(data, dict) and isinstance(data.get("hookDelay"), (int, float)):
            time.sleep(data["hookDelay"])
        if text == "forbidden":
            return 200, {"allow": False, "reason": "that word is not allowed"}
        if text == "rewrite":
            return 200, {"allow": True, "data": {"text": "rewritten by the backend", "by": body.get("user")}}
        if isinstance(data, dict) and isinstance(data.get("answerBytes"), int):
            return 200, Padded({"allow": True}, data["answerBytes"])
        return 200, {"allow": True}
    if hook == "write":
        # A change whose value carries "hookDelay" is answered that many seconds late.
        changes = body.get("changes") or [{}]
        value = changes[0].get("value") if isinstance(changes[0], dict) else None
        if isinstance(value, dict) and isinstance(value.get("hookDelay"), (int, float)):
            time.sleep(value["hookDelay"])
        if body.get("store") == "hooked" or str(body.get("store")).startswith("hooked-"):
            return 200, {"allow": True}
        return 200, {"allow": False, "reason": f"{body.get('user')} may not write to {body.get('store')}"}
    if hook == "rpc":
        method = body.get("method")
        if method == "echo":
            return 200, {"echo": body.get("data"), "user": body.get("user"), "info": body.get("info")}
        if method == "fail":
            return 500, {"reason": "the backend failed"}
        if method == "slow":
            time.sleep(5)
            return 200, {"late": True}
        if method == "sleep":
            # Answered after `data` seconds, with them.
            time.sleep(float(body.get("data") or 0))
            return 200, {"slept": body.get("data")}
        return 404, {"reason": f"no method {method}"}
    return 404, {"reason": "no such hook"}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet
        pass

    def reply(self, status: int, value: object) -> None:
        body = value.encode() if isinstance(value, Padded) else json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the gateway stopped reading: past its limit on an answer's size, or timed out

    def do_GET(self) -> None:
        if self.path == "/stats":
            with State.lock:
                self.reply(200, {"calls": State.calls, "peak": State.peak, "inFlight": State.in_flight, "last": State.last,
                                 "raw": State.raw})
        else:
            self.reply(404, {})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        text = self.rfile.read(length)
        body = json.loads(text or b"{}")
        if self.path == "/control":
            State.delay = float(body.get("delay", 0))
            return self.reply(200, {"delay": State.delay})
        hook = self.path.strip("/")
        with State.lock:
            State.in_flight += 1
            State.peak = max(State.peak, State.in_flight)
            State.calls[hook] = State.calls.get(hook, 0) + 1
            State.last[hook] = body
            State.raw[hook] = text.decode("utf-8", "replace")
        try:
            if State.delay:
                time.sleep(State.delay)
            status, value = decide(hook, body)
            self.reply(status, value)
        finally:
            with State.lock:
                State.in_flight -= 1


class Server(ThreadingHTTPServer):
    # The listen backlog, set before the constructor listens: with the default 5, connections
    # arriving together are dropped and retried by the kernel a second or more later.
    request_queue_size = 1024
    daemon_threads = True


def main() -> None:
    server = Server(("127.0.0.1", 0), Handler)
    with open(sys.argv[1], "w") as out:
        out.write(str(server.server_address[1]))
    server.serve_forever()


if __name__ == "__main__":
    main()
