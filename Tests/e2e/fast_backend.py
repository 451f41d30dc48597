"""A fast backend for the connection storm test: asyncio, keep-alive, every connect admitted
after DELAY seconds (the backend's answer time). `GET /stats` reports the calls and the most
that were under way at once, as the backend saw them. Prints its port on its first line.

Usage: python fast_backend.py DELAY
"""

import asyncio
import json
import sys

DELAY = float(sys.argv[1])
ADMIT = json.dumps({"user": "storm", "topics": ["*"], "stores": ["*"]}).encode()
stats = {"calls": 0, "peak": 0, "inFlight": 0}


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            await reader.readexactly(length)
            if head.startswith(b"GET /stats"):
                body = json.dumps(stats).encode()
            else:
                stats["calls"] += 1
                stats["inFlight"] += 1
                stats["peak"] = max(stats["peak"], stats["inFlight"])
                await asyncio.sleep(DELAY)
                stats["inFlight"] -= 1
                body = ADMIT
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
