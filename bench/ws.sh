#!/usr/bin/env bash
# WebSocket fan-out: one topic published over HTTP at a fixed rate and pushed to every subscriber,
# measured from the gateway's `publishedAt` to the moment a subscriber reads the frame. The
# gateway is pinned to CPU 0; subscribers and the publisher share CPU 1. Each scenario gets a fresh
# gateway, so CPU time and memory are its own.
#
# A process may hold at most 20,000 descriptors, so large runs spread subscribers over several
# client processes, each binding its sockets to its own loopback source addresses.
#
# Builds nothing: expects release builds of receptionist and receptionist-bench.
# Usage: bench/ws.sh [seconds] [rate with 1,000 subscribers] [rate with 10,000] [idle connections]
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-10}
rate_small=${2:-200}
rate_large=${3:-20}
idle=${4:-19000}
server=.build/release/receptionist
bench=.build/release/receptionist-bench
for binary in "$server" "$bench"; do
  [ -x "$binary" ] || { echo "build first: swift build -c release --product $(basename "$binary")" >&2; exit 1; }
done
for tool in taskset curl python3 getconf; do
  command -v "$tool" >/dev/null || { echo "missing $tool (make bench-ws installs it)" >&2; exit 1; }
done

. bench/common.sh

clock_ticks=$(getconf CLK_TCK)

# Stops a process we started: SIGTERM, then at most 20 s before SIGKILL.
stop_process() {
  local pid=$1
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 200); do
    kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
    sleep 0.1
  done
  echo "process $pid ignored SIGTERM; killing it" >&2
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

start_server() {
  port=$(free_port)
  taskset -c 0 "$server" serve --host 127.0.0.1 --port "$port" --log-level warning --max-connections 19800 \
    > "$work/server.$port.out" 2>&1 &
  server_pid=$!
  pids+=("$server_pid")
  for _ in $(seq 1 100); do
    curl -fsS -o /dev/null "http://127.0.0.1:$port/healthz" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "the gateway did not come up; its output:" >&2
  cat "$work/server.$port.out" >&2
  exit 1
}

# utime + stime of the gateway, in clock ticks (fields 14 and 15; its name has no spaces).
server_ticks() { awk '{print $14 + $15}' "/proc/$server_pid/stat"; }
server_rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$server_pid/status"; }

subscribers() {
  curl -fsS "http://127.0.0.1:$port/api/topics" | python3 -c '
import json, sys
topics = [t for t in json.load(sys.stdin)["topics"] if t["name"] == sys.argv[1]]
print(topics[0].get("subscribers", 0) if topics else 0)' "$1"
}

# Starts `count` subscribers to `topic` over `processes` client processes, each binding to two
# source addresses of its own from 127.0.0.`first_address` on, and waits (at most 120 s) until
# the gateway counts them all.
clients=()
start_clients() {
  local topic=$1 count=$2 processes=$3 first_address=$4
  clients=()
  local per=$(( (count + processes - 1) / processes )) left=$count
  for i in $(seq 0 $((processes - 1))); do
    local n=$(( left < per ? left : per ))
    left=$((left - n))
    local a=$((first_address + 2 * i))
    taskset -c 1 "$bench" ws --url "ws://127.0.0.1:$port/ws" --connections "$n" \
      --source-hosts "127.0.0.$a,127.0.0.$((a + 1))" --topic "$topic" --duration 0 --connect-timeout 100 \
      > "$work/$topic.$i.json" 2> "$work/$topic.$i.err" &
    clients+=($!)
    pids+=($!)
  done
  for _ in $(seq 1 1200); do
    [ "$(subscribers "$topic")" -ge "$count" ] && return 0
    sleep 0.1
  done
  echo "only $(subscribers "$topic") of $count subscribed to $topic; client output:" >&2
  cat "$work/$topic".*.err >&2
  exit 1
}

stop_clients() {
  for pid in "${clients[@]}"; do stop_process "$pid"; done
}

stop_server() { stop_process "$server_pid"; }

# Prints one table row from the client summaries, the publisher's summary and the CPU ticks.
row() {
  python3 - "$@" <<'PY'
import glob, json, sys
scenario, topic, work, count, processes, ticks, clock = sys.argv[1:8]
lines = [json.loads(open(p).read().strip().splitlines()[-1]) for p in sorted(glob.glob(f"{work}/{topic}.[0-9]*.json"))]
publisher = json.load(open(f"{work}/{topic}.publish.json"))
delivered = sum(l["delivered"] for l in lines)
first = min((l["first_delivery_us"] for l in lines if l["delivered"]), default=0)
last = max((l["last_delivery_us"] for l in lines if l["delivered"]), default=0)
span = (last - first) / 1e6
merged = {}
for l in lines:
    for k, v in l["histogram_us"].items():
        merged[float(k)] = merged.get(float(k), 0) + v
def pct(f):
    total = sum(merged.values()); rank = max(1, -(-int(f * total * 1000) // 1000)); seen = 0
    for k in sorted(merged):
        seen += merged[k]
        if seen >= rank: return k / 1000
    return 0.0
expected = publisher["created"] * int(count)
cpu = int(ticks) / int(clock)
per_million = cpu / (delivered / 1e6) if delivered else float("nan")
lost = expected - delivered
print(f"| {scenario} | {int(count):,} | {processes} | {publisher['published_per_s']:.0f} | "
      f"{delivered / span if span > 0 else 0:,.0f} | {pct(0.5):.2f} | {pct(0.99):.2f} | {pct(0.999):.2f} | "
      f"{per_million:.2f} | – | {delivered:,} of {expected:,} |")
PY
}

fanout() {
  local scenario=$1 topic=$2 count=$3 processes=$4 rate=$5 first_address=$6
  start_server
  start_clients "$topic" "$count" "$processes" "$first_address"
  local before after
  before=$(server_ticks)
  taskset -c 1 timeout $((seconds + 30)) "$bench" publish --port "$port" --topic "$topic" --rate "$rate" \
    --duration "$seconds" > "$work/$topic.publish.json"
  sleep 1  # the last deliveries
  after=$(server_ticks)
  stop_clients
  stop_server
  row "$scenario" "$topic" "$work" "$count" "$processes" "$((after - before))" "$clock_ticks"
}

idle_memory() {
  local count=$1 processes=$2 first_address=$3
  start_server
  sleep 1
  local before after
  before=$(server_rss_kib)
  start_clients idle "$count" "$processes" "$first_address"
  sleep 2  # let the gateway settle after the burst of handshakes
  after=$(server_rss_kib)
  stop_clients
  stop_server
  python3 -c "
import sys
count, before, after = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
print(f'| idle, subscribed | {count:,} | {sys.argv[4]} | – | – | – | – | – | – | {(after - before) * 1024 / count / 1024:.2f} ({before / 1024:.0f} → {after / 1024:.0f} MiB) | – |')
" "$count" "$before" "$after" "$processes"
}

echo "WebSocket fan-out: gateway pinned to CPU 0, subscribers and publisher on CPU 1; ${seconds} s of publishing per run"
echo
echo "| scenario | subscribers | client processes | published msg/s | delivered msg/s | p50 ms | p99 ms | p999 ms | gateway CPU-s per 1M delivered | gateway KiB per idle connection (RSS) | delivered of expected |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
fanout "fan-out" small 1000 1 "$rate_small" 2
fanout "fan-out" large 10000 2 "$rate_large" 10
idle_memory "$idle" 4 20
