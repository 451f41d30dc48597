#!/usr/bin/env bash
# The hooks' cost, side by side in one run (docs/HOOKS.md):
#  - a connect storm: `connections` WebSockets opened at once, each admitted through the connect
#    hook (served by bench/hooks_backend.py, a small asyncio backend), against the same storm
#    with tokens (?token=, no hook call); each subscribes to a topic, and is admitted when the
#    answer comes;
#  - publishing: one WebSocket publishing `messages` ~100-byte messages, at most 32 unanswered,
#    through the publish hook, against the same publisher whose token's claim lets it publish.
# The gateways are pinned to CPU 0; the clients and the backend to CPU 1. --publish-rate 0: the
# default limit would refuse most of one client's load (a knob a user would turn for this).
#
# Usage: bench/hooks.sh [connections] [messages]
set -euo pipefail
cd "$(dirname "$0")/.."

connections=${1:-10000}
messages=${2:-20000}
receptionist=.build/release/receptionist
python=.venv/bin/python
[ -x "$receptionist" ] || { echo "build first: swift build -c release --product receptionist" >&2; exit 1; }
[ -x "$python" ] || { echo "missing the test venv (make bench-hooks makes it)" >&2; exit 1; }
ulimit -n 20000

. bench/common.sh

secret=bench-secret-of-at-least-32-bytes-long
token=$("$python" -c "import jwt, time; print(jwt.encode({'sub': 'bench', 'exp': int(time.time()) + 3600, 'topics': ['*'], 'publish': ['*']}, '$secret', algorithm='HS256'))")

taskset -c 1 "$python" bench/hooks_backend.py > "$work/backend.port" &
pids+=($!)
for _ in $(seq 1 100); do [ -s "$work/backend.port" ] && break; sleep 0.05; done
backend="http://127.0.0.1:$(head -1 "$work/backend.port")"

start_gateway() {  # name, extra options...
  local name=$1 port
  shift
  port=$(free_port)
  taskset -c 0 "$receptionist" serve --port "$port" --token-secret "$secret" --publish-rate 0 --max-connections 20000 \
    --max-connections-per-address 20000 --log-level warning "$@" > "$work/$name.log" 2>&1 &
  pids+=($!)
  wait_ready "http://127.0.0.1:$port/healthz"
  echo "$port $!"
}

read -r hooked_port hooked_pid < <(start_gateway hooked --hook-connect "$backend/connect" --hook-publish "$backend/publish")
read -r plain_port plain_pid < <(start_gateway plain)

cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

run() {  # label, pid, client arguments...
  local label=$1 pid=$2 before after
  shift 2
  before=$(cpu "$pid")
  taskset -c 1 "$python" bench/hooks_client.py "$@" > "$work/result.json"
  after=$(cpu "$pid")
  "$python" - "$label" "$before" "$after" "$hz" "$work/result.json" <<'PY'
import json, sys
label, before, after, hz, path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
result = json.load(open(path))
count = result.get("admitted", result.get("published"))
cpu = (after - before) / hz
print(f"| {label} | {count:,} | {count / result['seconds']:,.0f}/s | {result['p50'] * 1000:.1f} ms | "
      f"{result['p99'] * 1000:.1f} ms | {cpu / count * 1e6:.0f} µs |")
PY
}

echo "connect storm: $connections WebSockets at once, each subscribing to a topic"
echo "| admitted by | admitted | rate | p50 to admitted | p99 | gateway CPU per admission |"
echo "|---|---:|---:|---:|---:|---:|"
run "the connect hook" "$hooked_pid" storm "ws://127.0.0.1:$hooked_port/ws" "$connections"
run "a token" "$plain_pid" storm "ws://127.0.0.1:$plain_port/ws" "$connections" "$token"
echo
echo "publishing: one WebSocket, $messages messages of ~100 bytes, at most 32 unanswered"
echo "| allowed by | published | rate | p50 send to ack | p99 | gateway CPU per publish |"
echo "|---|---:|---:|---:|---:|---:|"
run "the publish hook" "$hooked_pid" publish "ws://127.0.0.1:$hooked_port/ws" "$messages" 32 "$token"
run "the token's claim" "$plain_pid" publish "ws://127.0.0.1:$plain_port/ws" "$messages" 32 "$token"
