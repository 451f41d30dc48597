#!/usr/bin/env bash
# Publish throughput through the cluster path against one node, with the same publisher: a
# backend with 4 keep-alive HTTP connections and one request in flight on each (request-response,
# no pipelining), then 32 (pipelined), publishing ~100-byte messages as fast as they are answered.
# One subscriber follows the topic, so every message is delivered too. Each row is compared with
# one node on the memory engine at the same requests in flight.
#
# Rows, each on a fresh server (and a fresh redis-server): one node with the memory engine; one
# node with the redis engine; two nodes on one redis-server, the publisher on the first and the
# subscriber on the second. Then the floor (bench/floor/relay.c), and the peer: nchan on its memory
# store and on its Redis store, each compared with itself on memory. With BENCH_BASELINE=<binary>,
# that build's one node through Redis runs right after this build's in every round (the machine's
# speed drifts between rounds, so builds are compared round by round), and so do its two nodes.
# The nodes are pinned to CPU 0, as the single node is; Redis, a server of its own (on another
# machine in production), shares CPU 1 with the publisher and the subscriber. CPU is counted for
# the nodes and for Redis apart.
#
# Usage: [ROUNDS=n] bench/cluster.sh [seconds]
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-10}
receptionist=.build/release/receptionist
bench=.build/release/receptionist-bench
. bench/common.sh
require_bench_tools bench-cluster
command -v redis-server >/dev/null || { echo "missing redis-server (make bench-cluster installs it)" >&2; exit 1; }
[ -e /usr/lib/nginx/modules/ngx_nchan_module.so ] || { echo "missing nginx's nchan module (make bench-cluster installs it)" >&2; exit 1; }
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

# Starts nchan (bench/peers/nchan.conf: nginx, one worker) on CPU 0 with its memory store, or its
# Redis store on the Redis at redis_port; sets node_port, node_pid (the worker, which is measured)
# and nchan_master (which is stopped).
start_nchan() {
  node_port=$(free_port)
  local dir="$work/nchan.$node_port" upstream="" store=""
  mkdir -p "$dir"
  if [ "$1" = redis ]; then
    upstream="upstream redis_store { nchan_redis_server redis://127.0.0.1:$redis_port; }"
    store="nchan_redis_pass redis_store;"
  fi
  sed -e "s|@PORT@|$node_port|g" -e "s|@DIR@|$dir|g" -e "s|@UPSTREAM@|$upstream|" -e "s|@STORE@|$store|g" bench/peers/nchan.conf \
    > "$dir/nginx.conf"
  taskset -c 0 "$(command -v nginx || echo /usr/sbin/nginx)" -c "$dir/nginx.conf" -p "$dir" > "$dir/out" 2>&1 &
  nchan_master=$!
  pids+=("$nchan_master")
  wait_ready_tcp "$node_port"
  for _ in $(seq 1 100); do
    node_pid=$(pgrep -P "$nchan_master" | head -n 1) && return 0
    sleep 0.05
  done
  echo "nchan started no worker" >&2
  return 1
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
# (ENGINE log: the floor that logs each message in Redis); BUILD nchan runs the peer, with its
# memory or Redis store, compared with itself on memory.
run() {
  local build=$1 binary=$2 engine=$3 nodes=$4 window=${5:-1}
  row_index=$((row_index + 1))
  local label="row$row_index"
  local nodes_pids=() redis_pids=() publish_port subscribe_port args=() sub_pids=() stop_pids=()
  # The peer is compared with itself on memory, the others with this build's node on memory.
  local peer=""
  [ "$build" = nchan ] && peer=nchan.
  local node_before node_after redis_before=0 redis_after=0 path=/api/topics/bench/messages dialect=receptionist
  if [ "$engine" != memory ]; then
    start_redis taskset -c 1
    redis_pids+=("$redis_pid")
    args=(--engine redis --redis-url "redis://127.0.0.1:$redis_port/0")
  fi
  case $build in
    floor) start_floor "$engine" ;;
    nchan)
      start_nchan "$engine"
      stop_pids+=("$nchan_master")
      path=/pub dialect=raw ;;
    *) start_node "$binary" "${args[@]}" ;;
  esac
  publish_port=$node_port subscribe_port=$node_port
  nodes_pids+=("$node_pid")
  if [ "$nodes" = 2 ]; then
    start_node "$binary" "${args[@]}"
    subscribe_port=$node_port
    nodes_pids+=("$node_pid")
  fi
  # One subscriber, so that every message is delivered too (the floor delivers nothing).
  if [ "$build" != floor ]; then
    taskset -c 1 "$bench" ws --url "ws://127.0.0.1:$subscribe_port/ws" --dialect "$dialect" --topic bench --connections 1 --duration $((seconds + 5)) \
      > "$work/$label.sub.json" 2>"$work/$label.sub.err" &
    sub_pids+=("$!")
  fi
  sleep 1
  node_before=$(ticks "${nodes_pids[@]}")
  [ "$engine" != memory ] && redis_before=$(ticks "${redis_pids[@]}")
  local cpus_before cpus_after
  cpus_before=$(cpu_ticks)
  taskset -c 1 "$bench" publish --port "$publish_port" --path "$path" --rate 1000000 --duration "$seconds" --connections 4 --window "$window" \
    > "$work/$label.publish.json"
  node_after=$(ticks "${nodes_pids[@]}")
  [ "$engine" != memory ] && redis_after=$(ticks "${redis_pids[@]}")
  cpus_after=$(cpu_ticks)
  stop "${sub_pids[@]}"
  # nginx's master, not its worker, is stopped: it would start another worker.
  if [ "$build" = nchan ]; then stop "${stop_pids[@]}"; else stop "${nodes_pids[@]}"; fi
  stop "${redis_pids[@]}"
  # What this row is compared with: none for a node on memory, which is what the others are compared with.
  local one=""
  if [ "$engine" != memory ] || [ "$build" = floor ]; then one=$(cat "$work/one.$peer$window" 2>/dev/null || true); fi
  python3 - "$build" "$engine" "$nodes" "$work/$label.publish.json" "$((node_after - node_before))" "$((redis_after - redis_before))" \
    "$clock_ticks" "$one" "$window" "$cpus_before" "$cpus_after" \
    "$work/ratios.$build.$engine.$nodes.$window" <<'PY'
import json, sys
label, engine, nodes, path, node_ticks, redis_ticks, hz, one, window, before, after, ratios = sys.argv[1:13]
spent = [int(a) - int(b) for a, b in zip(after.split(), before.split())]
busy = [100 * spent[i] / max(spent[i + 1], 1) for i in (0, 2)]
result = json.load(open(path))
rate = result["published_per_s"]
accepted = max(result["accepted"], 1)
node = int(node_ticks) / int(hz) / accepted * 1e6
redis = f"{int(redis_ticks) / int(hz) / accepted * 1e6:.0f}" if engine != "memory" else "—"
ratio = f"{rate / float(one):.2f}×" if one else "1.00×"
if one:
    with open(ratios, "a") as kept:
        print(rate / float(one), file=kept)
print(f"| {label} | {engine} | {nodes} | {window} | {rate:,.0f} | {ratio} | {node:.0f} | {redis} | {busy[0]:.0f}% | {busy[1]:.0f}% | {result['errors']} |")
PY
  # One node on the memory engine, at this window: what the other rows at the window are compared with.
  if [ "$engine" = memory ] && [ "$build" != floor ]; then
    python3 -c "import json; print(json.load(open('$work/$label.publish.json'))['published_per_s'])" > "$work/one.$peer$window"
  fi
}

echo "Publishing through the cluster path: 4 HTTP connections, 1 (then 32) requests in flight each, ~100-byte messages, ${seconds} s a row"
echo
echo "| build | engine | nodes | in flight per connection | published msg/s | against one node | nodes' CPU µs per publish | Redis CPU µs per publish | CPU 0 busy (nodes) | CPU 1 busy (Redis, clients) | errors |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
# One node through Redis; with BENCH_BASELINE, that build's node right after it, in the same round.
run_redis() {
  run this "$receptionist" redis 1 "$1"
  if [ -n "${BENCH_BASELINE:-}" ]; then run baseline "$BENCH_BASELINE" redis 1 "$1"; fi
}
# Two nodes: this build's, then the baseline's right after (paired, as the machine's speed drifts).
run_two() {
  run this "$receptionist" redis 2 "$1"
  if [ -n "${BENCH_BASELINE:-}" ]; then run baseline "$BENCH_BASELINE" redis 2 "$1"; fi
}
run this "$receptionist" memory 1
run_redis 1
run_two 1
# The same publisher 32 requests ahead on each connection, pipelined.
run this "$receptionist" memory 1 32
run_redis 32
run_two 32
# ROUNDS=n (5 unless set): n - 1 more rounds of one node on memory, then through Redis, at each window, each pair
# on fresh servers; the summary below gives each ratio's median over the rounds.
rounds=${ROUNDS:-5}
for _ in $(seq 2 "$rounds"); do
  for window in 1 32; do
    run this "$receptionist" memory 1 "$window"
    run_redis "$window"
  done
done
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
# The peer that keeps its channels in Redis too: nchan (one nginx worker), on its memory store and
# on its Redis store, each against itself on memory, with the same publisher on its /pub.
run nchan - memory 1
run nchan - redis 1
run nchan - memory 1 32
run nchan - redis 1 32
if [ "$rounds" -gt 1 ]; then
  echo
  for window in 1 32; do
    python3 - "$window" "$work/ratios.this.redis.1.$window" "$work/ratios.baseline.redis.1.$window" <<'PY'
import os, statistics, sys
window, path, baseline = sys.argv[1:4]
def spread(values):
    values = sorted(values)
    return f"median {statistics.median(values):.2f}× over {len(values)} rounds ({values[0]:.2f}–{values[-1]:.2f}×)"
ratios = [float(line) for line in open(path)]
print(f"One node through Redis against one node on memory, {window} in flight: {spread(ratios)}")
if os.path.exists(baseline):
    before = [float(line) for line in open(baseline)]
    print(f"  the baseline's node: {spread(before)}; this build against it, round by round: "
          f"{spread([a / b for a, b in zip(ratios, before)])}")
PY
  done
fi
