#!/usr/bin/env bash
# Restart time of a durable gateway: a store of `models` models (~60-byte JSON each) with
# `changes` retained single-change change sets, kept by the disk engine; the gateway is stopped
# (SIGTERM) and started again on the same --data-dir, and the time from its start to the first
# `/readyz` 200 is measured, `runs` times.
#
# Usage: bench/restart.sh [models] [changes] [runs]
set -euo pipefail
cd "$(dirname "$0")/.."

models=${1:-1000000}
changes=${2:-100000}
runs=${3:-3}
receptionist=.build/release/receptionist
[ -x "$receptionist" ] || { echo "build first: swift build -c release --product receptionist" >&2; exit 1; }
for tool in wrk curl python3; do command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 1; }; done

. bench/common.sh

port=$(free_port)
start() {
  "$receptionist" serve --port "$port" --data-dir "$work/data" --fsync interval --retain "$changes" --publish-rate 0 \
    --log-level warning > "$work/gateway.log" 2>&1 &
  gateway=$!
  pids+=("$gateway")
}

start
wait_ready "http://127.0.0.1:$port/readyz"
curl -fsS -o /dev/null -X POST "http://127.0.0.1:$port/api/stores" -d '{"name":"big"}'
# The models, 5,000 a change set.
python3 - "$port" "$models" <<'PY'
import http.client, json, sys
port, models = int(sys.argv[1]), int(sys.argv[2])
conn = http.client.HTTPConnection("127.0.0.1", port)
for start in range(0, models, 5000):
    ops = [{"op": "put", "model": f"model-{n:07d}", "value": {"color": "#1f77b4", "label": f"Model {n}", "n": n}}
           for n in range(start, min(models, start + 5000))]
    conn.request("POST", "/api/stores/big/changes", json.dumps({"changes": ops}))
    response = conn.getresponse(); response.read()
    assert response.status == 200, response.status
PY
# The retained change sets: single sets, 16 writers, until the store has made `changes` more.
cat > "$work/set.lua" <<LUA
local counter = 0
wrk.method = "POST"
request = function()
  counter = counter + 1
  local body = '{"changes":[{"op":"set","model":"model-' .. string.format("%07d", counter % $models) .. '","path":"n","value":' .. counter .. '}]}'
  return wrk.format(nil, "/api/stores/big/changes", nil, body)
end
LUA
target=$(( $(curl -fsS "http://127.0.0.1:$port/api/stores/big" -o /dev/null -w '' ; python3 -c "
import json, urllib.request
print(json.load(urllib.request.urlopen('http://127.0.0.1:$port/api/stores'))['stores'][0]['version'])") + changes ))
while :; do
  version=$(python3 -c "
import json, urllib.request
print(json.load(urllib.request.urlopen('http://127.0.0.1:$port/api/stores'))['stores'][0]['version'])")
  [ "$version" -ge "$target" ] && break
  wrk -t1 -c16 -d2s -s "$work/set.lua" "http://127.0.0.1:$port" > /dev/null
done
# wrk's last requests may still be committing after it exits: stop once the version holds still.
while :; do
  sleep 0.5
  settled=$(python3 -c "
import json, urllib.request
print(json.load(urllib.request.urlopen('http://127.0.0.1:$port/api/stores'))['stores'][0]['version'])")
  [ "$settled" = "$version" ] && break
  version=$settled
done
kill -TERM "$gateway"; wait "$gateway" 2>/dev/null || true
size=$(du -sm "$work/data" | cut -f1)
echo "store: $models models, version $version, $changes change sets retained; data directory ${size} MB"
echo
echo "| run | start to /readyz 200 (s) |"
echo "|---:|---:|"
for run in $(seq 1 "$runs"); do
  began=$(date +%s.%N)
  start
  until curl -fsS -o /dev/null "http://127.0.0.1:$port/readyz" 2>/dev/null; do sleep 0.01; done
  ended=$(date +%s.%N)
  got=$(python3 -c "
import json, urllib.request
print(json.load(urllib.request.urlopen('http://127.0.0.1:$port/api/stores'))['stores'][0]['version'])")
  [ "$got" = "$version" ] || { echo "restarted at version $got, not $version" >&2; exit 1; }
  python3 -c "print(f'| $run | {$ended - $began:.2f} |')"
  kill -TERM "$gateway"; wait "$gateway" 2>/dev/null || true
done
