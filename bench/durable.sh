#!/usr/bin/env bash
# Durable commits, side by side in one run: the disk engine (--data-dir, --fsync always) against
# the redis engine on a Redis that syncs its append-only file on every write (appendonly yes,
# appendfsync always). The same wrk load on both: `connections` HTTP writers, one request in
# flight each (wrk keeps one per connection), each a single-change change set
# (POST /api/stores/{store}/changes, ~100-byte body), to one store or spread over `stores`.
# The gateway is pinned to CPU 0; wrk and Redis to CPU 1. Both gateways run with --publish-rate 0:
# the default limit (per key, here per address) would refuse most of one client's load.
#
# Usage: [RECEPTIONIST=binary] bench/durable.sh [seconds] [connections] [stores]
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-10}
connections=${2:-64}
stores=${3:-1}
receptionist=${RECEPTIONIST:-.build/release/receptionist}
[ -x "$receptionist" ] || { echo "build first: swift build -c release --product receptionist" >&2; exit 1; }
for tool in wrk redis-server redis-cli taskset curl python3; do
  command -v "$tool" >/dev/null || { echo "missing $tool (make bench installs it)" >&2; exit 1; }
done

. bench/common.sh

cat > "$work/commit.lua" <<LUA
-- One single-change change set per request, to one of $stores stores, a counter as the value.
local counter = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  counter = counter + 1
  local store = "bench-" .. (counter % $stores)
  local body = '{"changes":[{"op":"set","model":"m' .. (counter % 64) .. '","path":"n","value":' .. counter .. '}]}'
  return wrk.format(nil, "/api/stores/" .. store .. "/changes", nil, body)
end
LUA

# Creates the stores and their 64 models.
prepare() {
  local port=$1 n m
  for ((n = 0; n < stores; n++)); do
    curl -fsS -o /dev/null -X POST "http://127.0.0.1:$port/api/stores" -d "{\"name\":\"bench-$n\"}"
    changes=""
    for ((m = 0; m < 64; m++)); do changes+="${changes:+,}{\"op\":\"put\",\"model\":\"m$m\",\"value\":{\"n\":0}}"; done
    curl -fsS -o /dev/null -X POST "http://127.0.0.1:$port/api/stores/bench-$n/changes" -d "{\"changes\":[$changes]}"
  done
}

metric() { curl -fsS "http://127.0.0.1:$1/metrics" | awk -v name="$2" '$1 == name { print $2 }'; }

# Runs wrk against the gateway on $1 and prints one table row named $2. With a Redis pid ($4), its
# syncs are counted by the kernel (`perf stat` on the fsync and fdatasync system calls; "-"
# without perf), and writes per sync are the change sets acknowledged per sync.
measure() {
  local port=$1 name=$2 pid=$3 redis_pid=${4:-} syncs0 writes0 syncs1 writes1 cpu0 cpu1 counter=""
  syncs0=$(metric "$port" receptionist_disk_syncs_total); writes0=$(metric "$port" receptionist_disk_writes_total)
  if [ -n "$redis_pid" ] && command -v perf >/dev/null; then
    perf stat -x, -o "$work/$name.syncs" -e syscalls:sys_enter_fdatasync,syscalls:sys_enter_fsync -p "$redis_pid" \
      -- sleep "$seconds" 2>/dev/null &
    counter=$!
  fi
  cpu0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  taskset -c 1 wrk -t2 -c"$connections" -d"${seconds}s" --latency -s "$work/commit.lua" "http://127.0.0.1:$port" \
    > "$work/$name.wrk"
  cpu1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  syncs1=$(metric "$port" receptionist_disk_syncs_total); writes1=$(metric "$port" receptionist_disk_writes_total)
  if [ -n "$counter" ] && wait "$counter"; then
    syncs0=0
    syncs1=$(awk -F, '/syscalls:sys_enter_f/ { s += $1 } END { print s + 0 }' "$work/$name.syncs")
  fi
  python3 - "$work/$name.wrk" "$name" "$seconds" "${syncs0:-}" "${syncs1:-}" "${writes0:-}" "${writes1:-}" "$cpu0" "$cpu1" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
name, seconds = sys.argv[2], float(sys.argv[3])
rate = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
def ms(p):
    m = re.search(rf"\s{p}%\s+([\d.]+)(us|ms|s)\b", text)
    value, unit = float(m.group(1)), m.group(2)
    return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value
errors = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
socket_errors = re.search(r"Socket errors: (.*)", text)
syncs = writes = "-"
if sys.argv[4] and sys.argv[5]:
    s = float(sys.argv[5]) - float(sys.argv[4])
    # Redis's row: change sets acknowledged per sync (its writes are not counted apart).
    w = float(sys.argv[7]) - float(sys.argv[6]) if sys.argv[6] and sys.argv[7] else rate * seconds
    syncs = f"{s / seconds:,.0f}"
    writes = f"{w / max(s, 1):.1f}"
cpu = (float(sys.argv[9]) - float(sys.argv[8])) / 100 / seconds
print(f"| {name} | {rate:,.0f} | {ms(50):.2f} | {ms(99):.2f} | {syncs} | {writes} | {cpu:.2f} | "
      f"{errors.group(1) if errors else 0}{' ' + socket_errors.group(1) if socket_errors else ''} |")
PY
}

echo "durable commits: $connections connections, one request in flight each, single-change change sets, $stores store(s), ${seconds} s"
echo
echo "| engine | acknowledged change sets/s | p50 ms | p99 ms | syncs/s | writes per sync | gateway CPU (cores) | errors |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"

# The disk engine.
port=$(free_port)
taskset -c 0 "$receptionist" serve --port "$port" --data-dir "$work/data" --fsync always --publish-rate 0 --log-level warning \
  > "$work/disk.log" 2>&1 &
disk=$!
pids+=("$disk")
wait_ready "http://127.0.0.1:$port/readyz"
prepare "$port"
measure "$port" "disk, --fsync always" "$disk"
kill "$disk"; wait "$disk" 2>/dev/null || true

# The redis engine on a Redis that syncs every write.
redis_port=$(free_port)
mkdir -p "$work/redis"
taskset -c 1 redis-server --port "$redis_port" --bind 127.0.0.1 --dir "$work/redis" --save "" \
  --appendonly yes --appendfsync always > "$work/redis.log" 2>&1 &
redis=$!
pids+=("$redis")
for _ in $(seq 1 100); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.05; done
port=$(free_port)
taskset -c 0 "$receptionist" serve --port "$port" --engine redis --redis-url "redis://127.0.0.1:$redis_port/0" --publish-rate 0 \
  --log-level warning > "$work/redis-gateway.log" 2>&1 &
gateway=$!
pids+=("$gateway")
wait_ready "http://127.0.0.1:$port/readyz"
prepare "$port"
measure "$port" "redis, appendfsync always" "$gateway" "$redis"
