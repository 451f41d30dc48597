#!/usr/bin/env bash
# Instructions per delivered message on the topic fan-out path, counted by callgrind, for one or
# more gateway builds: repeatable figures on a noisy machine, for comparing two builds of a hot
# path (wall-clock benches swing by more than the difference).
#
# Each build serves SUBSCRIBERS WebSocket subscribers of one topic while the publisher POSTs
# RATE messages a second for SECONDS over 4 keep-alive connections, one request in flight each
# (~100-byte JSON bodies); the server runs under valgrind --tool=callgrind and is stopped with
# SIGTERM. Prints the server's total instructions, the messages delivered and their ratio.
# PUBLISHER=ws publishes over one WebSocket instead (`{"type":"publish",…}`, at most 32
# unanswered, as bench/ws.sh's wsfull does): under valgrind the server is the slower side, so the
# window is always full and each read brings up to 32 messages.
# PUBLISH_CONNECTIONS and PUBLISH_WINDOW (requests in flight on each) shape the HTTP publisher:
# PUBLISH_CONNECTIONS=1 PUBLISH_WINDOW=32 is the WebSocket publisher's shape, to compare the two.
# ENGINE=redis serves through a redis-server of its own (not counted: only the node's instructions
# are), to compare what a publish costs the node on each engine.
# CALLGRIND_KEEP=dir keeps each build's profiles (dir/<n>.<engine>/out.<pid>, n the build's place in
# the arguments, so two builds both named receptionist stay apart) for
# callgrind_annotate, which names the functions from the symbol table.
# FOLLOWER=1 (with ENGINE=redis) publishes to a second node of the same build, not counted, so the
# counted node only reads each message back from Redis and delivers it: a following node's cost.
# Usage: bench/callgrind.sh BINARY [BINARY…]
#   (env: SUBSCRIBERS=100 RATE=100 PUBLISH_SECONDS=10 PUBLISHER=http|ws PUBLISH_CONNECTIONS=4 PUBLISH_WINDOW=1
#    ENGINE=memory|redis FOLLOWER=1 CALLGRIND_KEEP=dir)
set -euo pipefail
cd "$(dirname "$0")/.."
subscribers=${SUBSCRIBERS:-100}
rate=${RATE:-100}
seconds=${PUBLISH_SECONDS:-10}
publisher=${PUBLISHER:-http}
publish_connections=${PUBLISH_CONNECTIONS:-4}
publish_window=${PUBLISH_WINDOW:-1}
engine=${ENGINE:-memory}
bench=.build/release/receptionist-bench
[ -x "$bench" ] || { echo "build first: swift build -c release --product receptionist-bench" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "missing valgrind (apt-get install valgrind)" >&2; exit 1; }
[ "$engine" = memory ] || command -v redis-server >/dev/null || { echo "missing redis-server" >&2; exit 1; }
. bench/common.sh

echo "| build | subscribers | published | delivered | server instructions | instructions per delivered message |"
echo "|---|---:|---:|---:|---:|---:|"
build_number=0
for binary in "$@"; do
  build_number=$((build_number + 1))
  port=$(free_port)
  engine_args=()
  if [ "$engine" = redis ]; then
    start_redis
    engine_args=(--engine redis --redis-url "redis://127.0.0.1:$redis_port/0")
  fi
  # valgrind 3.19 cannot read the DWARF of a Swift 6 build; the symbol table it reads names the functions.
  strip --strip-debug -o "$work/server" "$binary"
  valgrind --tool=callgrind --callgrind-out-file="$work/out.%p" "$work/server" serve --host 127.0.0.1 --port "$port" \
    --log-level warning --max-connections-per-address 20000 --publish-rate 0 "${engine_args[@]}" > "$work/server.log" 2>&1 &
  server=$!
  pids+=("$server")
  publish_port=$port
  if [ -n "${FOLLOWER:-}" ]; then
    [ "$engine" = redis ] || { echo "FOLLOWER=1 needs ENGINE=redis" >&2; exit 1; }
    publish_port=$(free_port)
    "$binary" serve --host 127.0.0.1 --port "$publish_port" --log-level warning --publish-rate 0 "${engine_args[@]}" \
      > "$work/publisher-node.log" 2>&1 &
    publisher_node=$!
    pids+=("$publisher_node")
    for _ in $(seq 1 600); do curl -sf -o /dev/null "http://127.0.0.1:$publish_port/readyz" && break; sleep 0.1; done
  fi
  # Ready: listening, and (with Redis) connected to it.
  for _ in $(seq 1 600); do curl -sf -o /dev/null "http://127.0.0.1:$port/readyz" && break; sleep 0.1; done
  "$bench" ws --url "ws://127.0.0.1:$port/ws" --connections "$subscribers" --topic bench --duration 0 \
    --connect-timeout 100 > "$work/ws.json" 2> "$work/ws.err" &
  client=$!
  pids+=("$client")
  for _ in $(seq 1 600); do grep -q holding "$work/ws.err" 2>/dev/null && break; sleep 0.1; done
  if [ "$publisher" = ws ]; then
    timeout $((seconds + 60)) "$bench" publish-changes --url "ws://127.0.0.1:$port/ws" --format receptionist-topic \
      --store bench --rate "$rate" --duration "$seconds" --connections 1 --window 32 > "$work/publish.json"
  else
    "$bench" publish --port "$publish_port" --rate "$rate" --duration "$seconds" --connections "$publish_connections" \
      --window "$publish_window" > "$work/publish.json"
  fi
  sleep 2  # the last deliveries, at valgrind's pace
  kill -TERM "$client"; wait "$client" 2>/dev/null || true
  kill -TERM "$server"; wait "$server" 2>/dev/null || true
  if [ -n "${FOLLOWER:-}" ]; then kill -TERM "$publisher_node"; wait "$publisher_node" 2>/dev/null || true; fi
  if [ "$engine" = redis ]; then kill "$redis_pid"; wait "$redis_pid" 2>/dev/null || true; fi
  if [ -n "${CALLGRIND_KEEP:-}" ]; then
    keep="$CALLGRIND_KEEP/$build_number.$engine"
    mkdir -p "$keep"
    cp "$work"/out.* "$keep/"
  fi
  python3 - "$binary" "$subscribers" "$work" <<'PY'
import glob, json, sys
binary, subscribers, work = sys.argv[1], int(sys.argv[2]), sys.argv[3]
published = json.load(open(f"{work}/publish.json"))["accepted"]
line = open(f"{work}/ws.json").read().strip().splitlines()[-1]
delivered = json.loads(line)["delivered"]
total = 0
for path in glob.glob(f"{work}/out.*"):
    for text in open(path):
        if text.startswith("summary:") or text.startswith("totals:"):
            total = max(total, int(text.split()[1]))
print(f"| {binary} | {subscribers} | {published} | {delivered} | {total:,} | {total / max(delivered, 1):,.0f} |")
PY
  rm -f "$work"/out.*
done
