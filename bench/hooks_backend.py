"""A small async backend: admits every connect and allows every publish, after DELAY seconds.

A minimal HTTP/1.1 server on asyncio (keep-alive, Content-Length bodies), so that the backend
costs a run as little as it can: bench/hooks.sh measures the hooks with it, and the connection
storm test (Tests/e2e/test_hooks_load.py) runs against it. `GET /stats` reports the calls and the
most that were under way at once, as the backend saw them. Prints its port on its first line.

Usage: python bench/hooks_backend.py [DELAY=0]
"""

import asyncio
import json
import sys

DELAY = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0
CONNECT = json.dumps({"user": "bench", "topics": ["*"], "stores": ["*"], "publish": ["*"]}).encode()
ALLOW = b'{"allow":true}'
stats = {"calls": 0, "peak": 0, "inFlight": 0}


async def answer(head: bytes) -> bytes:
    if head.startswith(b"GET /stats"):
        return json.dumps(stats).encode()
    stats["calls"] += 1
    stats["inFlight"] += 1
    stats["peak"] = max(stats["peak"], stats["inFlight"])
    if DELAY:
        await asyncio.sleep(DELAY)
    stats["inFlight"] -= 1
    return CONNECT if head.startswith(b"POST /connect") else ALLOW


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            await reader.readexactly(length)
            body = await answer(head)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main() -> None:
    server = await asyncio.start_server(serve, "127.0.0.1", 0, backlog=4096)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


asyncio.run(main())
