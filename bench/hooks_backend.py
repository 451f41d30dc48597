"""A small async backend for bench/hooks.sh: answers the connect and publish hooks at once.

A minimal HTTP/1.1 server on asyncio (keep-alive, Content-Length bodies), so that the backend
costs the run as little as it can. Prints its port on its first line.
"""

import asyncio
import json
import sys

CONNECT = json.dumps({"user": "bench", "topics": ["*"], "stores": ["*"], "publish": ["*"]}).encode()
ALLOW = b'{"allow":true}'


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            await reader.readexactly(length)
            body = CONNECT if head.startswith(b"POST /connect") else ALLOW
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
