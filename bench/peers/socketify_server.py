"""The socketify (uWebSockets) peer for bench/ws.sh and bench/state.sh: every WebSocket on /ws
subscribes to the topic `bench`, and the fan-out runs inside uWebSockets' C++ core.

Two ways in for a publisher:
- POST /pub publishes its body (bench/ws.sh);
- a WebSocket on /publish publishes each message it sends, as it is, and is answered with a
  one-byte text frame per message, so that the publisher can keep a window (bench/state.sh, where
  the messages are a store's change sets in the gateway's JSON).

With `compress`, subscribers that offer permessage-deflate get it with uWebSockets' shared
compressor (no context takeover, each published message compressed once for every subscriber),
and every publish asks for compression.

Usage: python socketify_server.py PORT [compress]
"""
import sys

from socketify import App, CompressOptions, OpCode

port = int(sys.argv[1])
compress = len(sys.argv) > 2 and sys.argv[2] == "compress"
app = App()


def on_open(ws):
    ws.subscribe("bench")


def publish(res, req):
    parts = []

    def on_data(res, chunk, is_end):
        parts.append(chunk)
        if is_end:
            app.publish("bench", b"".join(parts), OpCode.TEXT, compress)
            res.end("ok")

    res.on_data(on_data)


def on_publisher_message(ws, message, opcode):
    app.publish("bench", message, OpCode.TEXT, compress)
    ws.send(b"1", OpCode.TEXT)


# The same outbound limit as the gateway's default --max-queued-bytes.
app.ws("/ws", {
    "open": on_open, "message": lambda ws, message, opcode: None, "max_backpressure": 1024 * 1024,
    "compression": CompressOptions.SHARED_COMPRESSOR if compress else CompressOptions.DISABLED,
})
app.ws("/publish", {"message": on_publisher_message, "max_backpressure": 1024 * 1024})
app.post("/pub", publish)
app.get("/", lambda res, req: res.end("ok"))
app.listen(port, lambda config: print("listening", port, flush=True))
app.run()
