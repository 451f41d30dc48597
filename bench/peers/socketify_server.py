"""The socketify (uWebSockets) peer for bench/ws.sh: every WebSocket on /ws subscribes to the topic
`bench`, and POST /pub publishes its body to it, so the fan-out runs inside uWebSockets' C++ core.

Usage: python socketify_server.py PORT
"""
import sys

from socketify import App, OpCode

port = int(sys.argv[1])
app = App()


def on_open(ws):
    ws.subscribe("bench")


def publish(res, req):
    parts = []

    def on_data(res, chunk, is_end):
        parts.append(chunk)
        if is_end:
            app.publish("bench", b"".join(parts), OpCode.TEXT)
            res.end("ok")

    res.on_data(on_data)


# The same outbound limit as the gateway's default --max-queued-bytes.
app.ws("/ws", {"open": on_open, "message": lambda ws, message, opcode: None, "max_backpressure": 1024 * 1024})
app.post("/pub", publish)
app.get("/", lambda res, req: res.end("ok"))
app.listen(port, lambda config: print("listening", port, flush=True))
app.run()
