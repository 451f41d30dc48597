#!/usr/bin/env bash
# Redis's instructions per publish, counted by callgrind: what each target's way of keeping a
# message costs Redis, repeatable where bench/cluster.sh's CPU times swing. For each target, a
# fresh redis-server runs under valgrind --tool=callgrind while the publisher POSTs RATE messages
# a second for SECONDS over PUBLISH_CONNECTIONS keep-alive connections, PUBLISH_WINDOW requests in
# flight on each (~100-byte JSON bodies). A target is a gateway binary (one node on the redis
# engine, no subscriber) or `floor` (bench/floor/relay.c in its log mode: INCRBY and an XADD a
# message, one script call a loop iteration). Redis's start-up and idle instructions, counted in a
# run that publishes nothing, are taken off. Prints the publishes, the script calls Redis ran (and
# so the messages a call carried) and the instructions per publish and per call.
# Usage: bench/callgrind-redis.sh TARGET [TARGET…]
#   (env: RATE=2000 PUBLISH_SECONDS=10 PUBLISH_CONNECTIONS=4 PUBLISH_WINDOW=32)
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${RATE:-2000}
seconds=${PUBLISH_SECONDS:-10}
publish_connections=${PUBLISH_CONNECTIONS:-4}
publish_window=${PUBLISH_WINDOW:-32}
bench=.build/release/receptionist-bench
[ -x "$bench" ] || { echo "build first: swift build -c release --product receptionist-bench" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "missing valgrind (apt-get install valgrind)" >&2; exit 1; }
command -v redis-server >/dev/null || { echo "missing redis-server" >&2; exit 1; }
. bench/common.sh
gcc -O2 -D_GNU_SOURCE -o "$work/relay" bench/floor/relay.c -luv -lhiredis

# Stops Redis and prints its instructions, from callgrind's summary.
redis_instructions() {
  redis-cli -p "$redis_port" shutdown nosave >/dev/null 2>&1 || true
  wait "$redis_pid" 2>/dev/null || true
  awk '/^(summary|totals):/ {if ($2 > n) n = $2} END {print n}' "$work/redis.out"
}

# The idle run: start-up, one connection's setup and a PING a second for SECONDS.
start_redis valgrind --tool=callgrind --callgrind-out-file="$work/redis.out"
for _ in $(seq 1 "$seconds"); do redis-cli -p "$redis_port" ping >/dev/null; sleep 1; done
idle=$(redis_instructions)

echo "| target | publishes | script calls | messages a call | Redis instructions per publish | per call |"
echo "|---|---:|---:|---:|---:|---:|"
for target in "$@"; do
  start_redis valgrind --tool=callgrind --callgrind-out-file="$work/redis.out"
  port=$(free_port)
  if [ "$target" = floor ]; then
    "$work/relay" "$port" "$redis_port" log &
  else
    "$target" serve --host 127.0.0.1 --port "$port" --log-level warning --publish-rate 0 \
      --engine redis --redis-url "redis://127.0.0.1:$redis_port/0" > "$work/node.log" 2>&1 &
  fi
  node=$!
  pids+=("$node")
  for _ in $(seq 1 600); do
    if [ "$target" = floor ]; then (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    else curl -fsS "http://127.0.0.1:$port/readyz" 2>/dev/null | grep -qv '"redis":"down"' && break; fi
    sleep 0.1
  done
  "$bench" publish --port "$port" --rate "$rate" --duration "$seconds" --connections "$publish_connections" \
    --window "$publish_window" > "$work/publish.json"
  calls=$(redis-cli -p "$redis_port" info commandstats | awk -F'[=,]' '/^cmdstat_evalsha:/ {print $2}')
  kill -TERM "$node"; wait "$node" 2>/dev/null || true
  total=$(redis_instructions)
  python3 - "$target" "$work/publish.json" "$total" "$idle" "${calls:-0}" <<'PY'
import json, sys
target, path, total, idle, calls = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
published = max(json.load(open(path))["accepted"], 1)
spent = total - idle
print(f"| {target} | {published:,} | {calls:,} | {published / max(calls, 1):.1f} | {spent / published:,.0f} | {spent / max(calls, 1):,.0f} |")
PY
done
