"""The client side of bench/hooks.sh.

  storm URL N [TOKEN]: opens N WebSockets at once; each subscribes to a topic, and is admitted
      when the `subscribed` answer comes. Prints {"admitted", "seconds", "p50", "p99"}.
  publish URL N WINDOW [TOKEN]: one WebSocket publishes N ~100-byte messages, at most WINDOW
      unanswered. Prints {"published", "seconds", "p50", "p99"} (send to `published`).
"""

import asyncio
import json
import sys
import time

from websockets.asyncio.client import connect


def percentile(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))] if values else 0.0


async def storm(url: str, count: int) -> dict:
    started = time.monotonic()

    async def one(index: int):
        begin = time.monotonic()
        ws = await connect(url, subprotocols=["receptionist.v1"], open_timeout=120, proxy=None, ping_interval=None,
                           compression=None)
        await ws.send('{"type":"subscribe","topic":"storm"}')
        frame = json.loads(await asyncio.wait_for(ws.recv(), 120))
        return ws, frame["type"] == "subscribed", time.monotonic() - begin

    results = await asyncio.gather(*(one(i) for i in range(count)))
    seconds = time.monotonic() - started
    for ws, _, _ in results:
        await ws.close()
    waits = [wait for _, ok, wait in results if ok]
    return {"admitted": len(waits), "seconds": seconds, "p50": percentile(waits, 0.5), "p99": percentile(waits, 0.99)}


async def publish(url: str, count: int, window: int) -> dict:
    sent: dict[str, float] = {}
    latencies: list[float] = []
    async with connect(url, subprotocols=["receptionist.v1"], proxy=None, ping_interval=None, compression=None,
                       max_queue=None) as ws:
        room = asyncio.Semaphore(window)
        done = asyncio.Event()

        async def reader():
            async for text in ws:
                frame = json.loads(text)
                if frame.get("type") in ("published", "error") and frame.get("ref") in sent:
                    latencies.append(time.monotonic() - sent.pop(frame["ref"]))
                    room.release()
                    if len(latencies) == count:
                        done.set()
                        return

        task = asyncio.create_task(reader())
        started = time.monotonic()
        padding = "x" * 60
        for n in range(count):
            await room.acquire()
            ref = f"p{n}"
            sent[ref] = time.monotonic()
            await ws.send(json.dumps({"type": "publish", "topic": "bench", "ref": ref, "data": {"n": n, "pad": padding}}))
        await asyncio.wait_for(done.wait(), 120)
        seconds = time.monotonic() - started
        task.cancel()
    return {"published": len(latencies), "seconds": seconds, "p50": percentile(latencies, 0.5), "p99": percentile(latencies, 0.99)}


def main() -> None:
    kind, url = sys.argv[1], sys.argv[2]
    token = sys.argv[-1] if len(sys.argv) > (4 if kind == "storm" else 5) else None
    if token:
        url += "?token=" + token
    if kind == "storm":
        print(json.dumps(asyncio.run(storm(url, int(sys.argv[3])))))
    else:
        print(json.dumps(asyncio.run(publish(url, int(sys.argv[3]), int(sys.argv[4])))))


main()
