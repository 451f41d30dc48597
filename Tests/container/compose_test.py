"""The compose test: deploy/compose.yaml (Redis, two gateway nodes, nginx round-robin in front of
them, no sticky sessions) started for real with podman-compose, with compose.override.yaml for
the images built here and each node's port on the loopback.

WebSocket clients subscribe to one topic on each node directly and through nginx; messages are
published through nginx (with the API key, and an Idempotency-Key so a publish cut off by the
node's stop is retried without doubling anything) before, during and after gateway-1 is stopped
with `podman-compose stop`. Its drain sends each of its clients `draining` and closes it (1001);
each reconnects through nginx after the `reconnectAfterMs` it was given, with `since` set to the
last sequence number it got, and lands on gateway-2, the node left. In the end every client must
have had every message exactly once, in order, and nothing else. Then the viewer, opened in
headless Chromium through nginx with the address `scripts/viewer-url.py` prints, paints a tile
of the demo store (compose_paint.py), and the store keeps it across gateway-2's restart.

Usage: python compose_test.py   (run.sh runs it, with CONTAINERS_CONF and the RCPT_TEST_*_IMAGE
variables set; RCPT_TEST_PROJECT names the compose project and RCPT_TEST_SCRATCH a folder for its
files, so that run.sh can clean up after it too)
"""

from __future__ import annotations

import shutil
import signal
import sys
import time
import traceback

import compose_clients
from compose_clients import Client, Publisher, Stopper, publish
from compose_paint import paint_and_restart
from compose_stack import (FRAME_TIMEOUT, PROJECT, READY_TIMEOUT, STOP_TIMEOUT, TOPIC, Failure, compose, container,
                           http, metric, podman, ports, ready, scratch, show_logs, state, step, wait_until,
                           websockets_on)


# ---- The test -------------------------------------------------------------

def run():
    step(f"up: project {PROJECT}, nginx on 127.0.0.1:{ports['nginx']}, "
         f"gateway-1 on :{ports['gateway-1']}, gateway-2 on :{ports['gateway-2']}")
    compose("up", "--detach", "--no-build", timeout=180)
    services = ("redis", "gateway-1", "gateway-2", "nginx")
    # podman 4.3 cannot wait for `condition: service_healthy` (podman-compose says so and starts
    # the nodes at once): a node that starts before Redis answers reports "redis":"down" in
    # /readyz and connects when Redis does, so the test waits for "up" on each node.
    for name in ("gateway-1", "gateway-2"):
        wait_until(f"{name} /readyz with Redis up", lambda name=name: ready(ports[name]), READY_TIMEOUT, services)
    wait_until("/readyz through nginx", lambda: http("GET", ports["nginx"], "/readyz", timeout=3)[0] == 200,
               READY_TIMEOUT, services)
    # The health checks of compose.yaml (redis) and of the image (HEALTHCHECK), which podman
    # cannot time without systemd, run once by hand.
    for name in ("redis", "gateway-1", "gateway-2"):
        podman("healthcheck", "run", container(name))

    status, _ = http("POST", ports["nginx"], f"/api/topics/{TOPIC}/messages", b"{}",
                     {"Content-Type": "application/json"})
    if status != 401:
        raise Failure(f"a publish without the API key answered {status}, not 401")

    step("subscribe: 2 clients on each node directly, and one through nginx on each")
    clients = [Client("g1-a", "gateway-1"), Client("g1-b", "gateway-1"),
               Client("g2-a", "gateway-2"), Client("g2-b", "gateway-2")]
    for client in clients:
        client.open(client.via)
    # nginx picks the node, round-robin in each of its workers: open connections through it until
    # one has landed on each node, telling where by the nodes' WebSocket connection counts.
    node_of = {}
    extra = []
    for attempt in range(12):
        counts = {name: websockets_on(name) for name in ("gateway-1", "gateway-2")}
        client = Client(f"lb-{attempt}", "nginx")
        client.open("nginx")
        landed = [name for name in counts if websockets_on(name) == counts[name] + 1]
        if len(landed) != 1:
            raise Failure(f"a WebSocket through nginx: connection counts went from {counts} to "
                          f"{ {name: websockets_on(name) for name in counts} }")
        if landed[0] in node_of.values():
            extra.append(client)
            continue
        node_of[client.name] = landed[0]
        clients.append(client)
        if len(node_of) == 2:
            break
    else:
        raise Failure(f"12 WebSockets through nginx all landed on {set(node_of.values())}")
    for client in extra:
        client.ws.close()
    for client in clients:
        if client.first != 0:
            raise Failure(f"{client.name}: the new topic {TOPIC} is at seq {client.first}")
    wait_until("the extra connections closed", lambda: (websockets_on("gateway-1"), websockets_on("gateway-2")) == (3, 3),
               FRAME_TIMEOUT)

    step("publish 30 through nginx")
    for n in range(1, 31):
        publish(n)
    for client in clients:
        client.read_until(30)

    step("stop gateway-1 while publishing; its clients resume through nginx as it drains")
    resumes_before = metric(ports["gateway-2"], 'receptionist_resumes_total{kind="topic"}')
    publisher = Publisher(31)
    publisher.start()
    publisher.wait_for(10)
    stopper = Stopper("gateway-1")
    stopper.start()
    # gateway-1's clients, direct and through nginx: the drain tells each `draining`, closes it with
    # 1001 "going away", and the client comes back through nginx after reconnectAfterMs with
    # `since`, while gateway-1 is still draining (its listener closed, so nginx tries gateway-2).
    closed = [client for client in clients if node_of.get(client.name, client.via) == "gateway-1"]
    away = 0
    for client in closed:
        client.read_until_closed(STOP_TIMEOUT)
        if client.close_code != 1001 or client.reconnect_after_ms is None:
            raise Failure(f"{client.name} via {client.via}: closed with {client.close_code}, "
                          f"reconnectAfterMs {client.reconnect_after_ms}")
        closed_at = publisher.next
        time.sleep(client.reconnect_after_ms / 1000)   # as the frame asks: spreads the reconnects
        # Messages published while it is away come back to it from the history.
        publisher.wait_for(3)
        client.open("nginx", since=client.last)
        away += publisher.next - closed_at
    stopper.join(STOP_TIMEOUT + 5)
    if stopper.is_alive() or stopper.error:
        raise Failure(f"podman-compose stop gateway-1: {stopper.error or 'still running'}")
    gateway_1 = state("gateway-1")
    if gateway_1["Running"] or gateway_1["ExitCode"] != 0:
        raise Failure(f"gateway-1 after the stop: running {gateway_1['Running']}, exit code {gateway_1['ExitCode']}")
    if stopper.took >= 25:
        raise Failure(f"the stop took {stopper.took:.0f} s: the drain did not end it")
    stop_took = stopper.took
    resumes = metric(ports["gateway-2"], 'receptionist_resumes_total{kind="topic"}') - resumes_before
    if resumes != len(closed):
        raise Failure(f"gateway-2 counted {resumes:g} topic resumes, not {len(closed)}")
    if websockets_on("gateway-2") != len(clients):
        raise Failure(f"gateway-2 has {websockets_on('gateway-2'):g} WebSocket connections, not {len(clients)}")
    publisher.wait_for(10)
    after = publisher.stop()
    for n in range(after, after + 10):
        publish(n)
    total = after + 9

    step(f"check: {total} messages, every client every seq once, in order")
    published = compose_clients.published   # a dict filled in place by publish()
    if sorted(published) != list(range(1, total + 1)) or sorted(published.values()) != list(range(1, total + 1)):
        raise Failure(f"the publishes were answered seqs {sorted(published)}")
    for client in clients:
        client.read_until(total)
        if not client.still_open():
            raise Failure(f"{client.name}: closed ({client.close_code}) after the resume")
        if client.seqs != list(range(1, total + 1)):
            missing = sorted(set(range(1, total + 1)) - set(client.seqs))
            doubled = sorted({seq for seq in client.seqs if client.seqs.count(seq) > 1})
            raise Failure(f"{client.name}: {len(client.seqs)} messages, missing {missing[:20]}, "
                          f"doubled {doubled[:20]}, in order: {client.seqs == sorted(client.seqs)}")
        wrong = [seq for seq, data in client.data.items() if data != {"n": published[seq]}]
        if wrong:
            raise Failure(f"{client.name}: seqs {wrong[:10]} carry other messages than published")
        client.ws.close()
    if http("GET", ports["nginx"], "/readyz", timeout=5)[0] != 200:
        raise Failure("/readyz through nginx with one node left")
    painted = paint_and_restart("gateway-2")
    print(f"compose: {len(clients)} clients, {total} messages, {len(closed)} resumed on gateway-2 while "
          f"gateway-1 drained (stop {stop_took:.1f} s, exit 0; {away} messages published while they were away), "
          f"{compose_clients.publish_retries} publish retries; the viewer painted {painted} through nginx "
          f"and gateway-2 kept it across its restart", flush=True)


def main():
    # timeout(1) stops the test with SIGTERM (sent twice: to the process and to its group): tear
    # the stack down all the same, and let no second SIGTERM cut the teardown short.
    def stopped(*_):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        sys.exit(143)

    signal.signal(signal.SIGTERM, stopped)
    passed = False
    try:
        run()
        passed = True
    except Failure as failure:
        print(f"FAIL: compose: {failure}", file=sys.stderr)
        show_logs()
    except Exception:
        traceback.print_exc()
        print("FAIL: compose: an unexpected error", file=sys.stderr)
        show_logs()
    finally:
        step("down")
        try:
            compose("down", "--timeout", "10", timeout=120)
            left = podman("ps", "--all", "--quiet", "--filter", f"label=io.podman.compose.project={PROJECT}")
            if left:
                raise Failure(f"containers left after down: {left.split()}")
            networks = podman("network", "ls", "--quiet", "--filter", f"label=io.podman.compose.project={PROJECT}")
            if networks:
                raise Failure(f"networks left after down: {networks.split()}")
        except Failure as failure:
            print(f"FAIL: compose: {failure}", file=sys.stderr)
            passed = False
        shutil.rmtree(scratch, ignore_errors=True)
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    main()
