#!/usr/bin/env bash
# Publish throughput through the cluster path against one node, with the same publisher: a
# backend with 4 keep-alive HTTP connections and one request in flight on each (request-response,
# no pipelining), then 32 (pipelined), publishing ~100-byte messages as fast as they are answered.
# One subscriber follows the topic, so every message is delivered too. Each row is compared with
# one node on the memory engine at the same requests in flight.
#
# Rows, each on a fresh server (and a fresh redis-server): one node with the memory engine; one
# node with the redis engine; two nodes on one redis-server, the publisher on the first and the
# subscriber on the second. With BENCH_BASELINE=<binary>, the redis rows again for that build.
# The nodes are pinned to CPU 0, as the single node is; Redis, a server of its own (on another
# machine in production), shares CPU 1 with the publisher and the subscriber. CPU is counted for
# the nodes and for Redis apart.
#
# Usage: bench/cluster.sh [seconds]
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-10}
receptionist=.build/release/receptionist
bench=.build/release/receptionist-bench
. bench/common.sh
require_bench_tools bench-cluster
command -v redis-server >/dev/null || { echo "missing redis-server (make bench-cluster installs it)" >&2; exit 1; }
clock_ticks=$(getconf CLK_TCK)

ticks() { for pid in "$@"; do sed 's/.*) //' "/proc/$pid/stat"; done | awk '{s += $12 + $13} END {print s}'; }
# Busy and total ticks of CPU 0 and CPU 1, from /proc/stat: "busy0 total0 busy1 total1".
cpu_ticks() {
  awk '$1 == "cpu0" || $1 == "cpu1" {t = 0; for (i = 2; i <= NF; i++) t += $i; printf "%d %d ", t - $5 - $6, t}' /proc/stat
}

# Starts a node of `binary` with `args`; sets node_port and node_pid.
start_node() {
  local binary=$1
  shift
  node_port=$(free_port)
  # The publish-rate limit is off: the publisher is meant to go as fast as it is answered.
  taskset -c 0 "$binary" serve --host 127.0.0.1 --port "$node_port" --log-level warning --publish-rate 0 "$@" \
    > "$work/node.$node_port.out" 2>&1 &
  node_pid=$!
  pids+=("$node_pid")
  for _ in $(seq 1 100); do
    curl -fsS "http://127.0.0.1:$node_port/readyz" 2>/dev/null | grep -qv '"redis":"down"' && return 0
    sleep 0.05
  done
  echo "node on $node_port did not come up" >&2
  return 1
}

# Starts the floor (bench/floor/relay.c) on CPU 0: answering only (memory), after one INCR (redis)
# or after logging each message in one script call per loop iteration (log), through the Redis on
# redis_port; sets node_port and node_pid.
start_floor() {
  node_port=$(free_port)
  case $1 in
    memory) taskset -c 0 "$work/relay" "$node_port" & ;;
    redis) taskset -c 0 "$work/relay" "$node_port" "$redis_port" & ;;
    log) taskset -c 0 "$work/relay" "$node_port" "$redis_port" log & ;;
  esac
  node_pid=$!
  pids+=("$node_pid")
  wait_ready_tcp "$node_port"
}

wait_ready_tcp() {
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "nothing listens on $1" >&2
  return 1
}

stop() { for pid in "$@"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done; }

row_index=0

# run BUILD BINARY ENGINE NODES [WINDOW]: one row; WINDOW requests in flight on each connection
# (pipelined; 1 by default). BUILD floor runs the floor, with no subscriber, in place of a node
# (ENGINE log: the floor that logs each message in Redis).
run() {
  local build=$1 binary=$2 engine=$3 nodes=$4 window=${5:-1}
  row_index=$((row_index + 1))
  local label="row$row_index"
  local nodes_pids=() redis_pids=() publish_port subscribe_port args=() sub_pids=()
  local node_before node_after redis_before=0 redis_after=0
  if [ "$engine" != memory ]; then
    start_redis taskset -c 1
    redis_pids+=("$redis_pid")
    args=(--engine redis --redis-url "redis://127.0.0.1:$redis_port/0")
  fi
  if [ "$build" = floor ]; then start_floor "$engine"; else start_node "$binary" "${args[@]}"; fi
  publish_port=$node_port subscribe_port=$node_port
  nodes_pids+=("$node_pid")
  if [ "$nodes" = 2 ]; then
    start_node "$binary" "${args[@]}"
    subscribe_port=$node_port
    nodes_pids+=("$node_pid")
  fi
  # One subscriber, so that every message is delivered too (the floor delivers nothing).
  if [ "$build" != floor ]; then
    taskset -c 1 "$bench" ws --url "ws://127.0.0.1:$subscribe_port/ws" --topic bench --connections 1 --duration $((seconds + 5)) \
      > "$work/$label.sub.json" 2>"$work/$label.sub.err" &
    sub_pids+=("$!")
  fi
  sleep 1
  node_before=$(ticks "${nodes_pids[@]}")
  [ "$engine" != memory ] && redis_before=$(ticks "${redis_pids[@]}")
  local cpus_before cpus_after
  cpus_before=$(cpu_ticks)
  taskset -c 1 "$bench" publish --port "$publish_port" --rate 1000000 --duration "$seconds" --connections 4 --window "$window" \
    > "$work/$label.publish.json"
  node_after=$(ticks "${nodes_pids[@]}")
  [ "$engine" != memory ] && redis_after=$(ticks "${redis_pids[@]}")
  cpus_after=$(cpu_ticks)
  stop "${sub_pids[@]}"
  stop "${nodes_pids[@]}" "${redis_pids[@]}"
  python3 - "$build" "$engine" "$nodes" "$work/$label.publish.json" "$((node_after - node_before))" "$((redis_after - redis_before))" \
    "$clock_ticks" "$(cat "$work/one.$window" 2>/dev/null || true)" "$window" "$cpus_before" "$cpus_after" <<'PY'
import json, sys
label, engine, nodes, path, node_ticks, redis_ticks, hz, one, window, before, after = sys.argv[1:12]
spent = [int(a) - int(b) for a, b in zip(after.split(), before.split())]
busy = [100 * spent[i] / max(spent[i + 1], 1) for i in (0, 2)]
result = json.load(open(path))
rate = result["published_per_s"]
accepted = max(result["accepted"], 1)
node = int(node_ticks) / int(hz) / accepted * 1e6
redis = f"{int(redis_ticks) / int(hz) / accepted * 1e6:.0f}" if engine != "memory" else "—"
ratio = f"{rate / float(one):.2f}×" if one else "1.00×"
print(f"| {label} | {engine} | {nodes} | {window} | {rate:,.0f} | {ratio} | {node:.0f} | {redis} | {busy[0]:.0f}% | {busy[1]:.0f}% | {result['errors']} |")
PY
  # One node on the memory engine, at this window: what the other rows at the window are compared with.
  if [ "$engine" = memory ] && [ "$build" != floor ]; then
    python3 -c "import json; print(json.load(open('$work/$label.publish.json'))['published_per_s'])" > "$work/one.$window"
  fi
}

echo "Publishing through the cluster path: 4 HTTP connections, 1 (then 32) requests in flight each, ~100-byte messages, ${seconds} s a row"
echo
echo "| build | engine | nodes | in flight per connection | published msg/s | against one node | nodes' CPU µs per publish | Redis CPU µs per publish | CPU 0 busy (nodes) | CPU 1 busy (Redis, clients) | errors |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
run this "$receptionist" memory 1
run this "$receptionist" redis 1
run this "$receptionist" redis 2
# The same publisher 32 requests ahead on each connection, pipelined.
run this "$receptionist" memory 1 32
run this "$receptionist" redis 1 32
run this "$receptionist" redis 2 32
# The floor: what an endpoint that does nothing but answer (then: count each publish in Redis
# first; then: number and log each message in Redis, one script call a loop iteration) reaches on
# this machine, at each window.
gcc -O2 -D_GNU_SOURCE -o "$work/relay" bench/floor/relay.c -luv -lhiredis
run floor - memory 1
run floor - redis 1
run floor - log 1
run floor - memory 1 32
run floor - redis 1 32
run floor - log 1 32
if [ -n "${BENCH_BASELINE:-}" ]; then
  run baseline "$BENCH_BASELINE" redis 1
  run baseline "$BENCH_BASELINE" redis 2
  run baseline "$BENCH_BASELINE" redis 1 32
  run baseline "$BENCH_BASELINE" redis 2 32
fi
