#!/usr/bin/env bash
# State sync, side by side: a store of 1,000 models (`{"color":"#rrggbb","label":"Model N"}`)
# with an `animate` job committing 2,000 single-change change sets a second (one model's color
# each), pushed to WebSocket subscribers in three ways.
#
#   S1  1,000 subscribers taking every change set (no options); beside it, socketify
#       (uWebSockets) relaying the same stream as a user would have to build it: one publisher
#       WebSocket sends each change set, in our JSON and stamped with its send time as
#       `committedAt`, into uWebSockets' `publish` on /publish, fanned out to 1,000 subscribers.
#       The publisher (`receptionist-bench publish-changes`) keeps at most 32 messages
#       unacknowledged on its one connection; a message is ~160 bytes, the size of our frame.
#   S2  the same 1,000 subscribers with `maxRate: 10`; beside it, socketify relaying 10 change
#       sets a second the same way: the same frames to each subscriber, so CPU per delivered
#       frame compares.
#   S3  10,000 subscribers with `maxRate: 10`, in ten groups of model and path filters (below),
#       the groups given to the connections round-robin; beside it, socketify relaying `maxRate`
#       messages a second to each of the same 10,000 subscribers, each message the size of an S3
#       frame (S3_CHANGES_PER_FRAME changes, default 22: ~1.7 KB), to see what any server on this
#       core pays for S3's frames.
#
# Reported for each: frames and wire bytes (payload and WebSocket header) per subscriber per
# second, the server's CPU-seconds per second (utime + stime from /proc over the middle `seconds`
# of the run, after one second of warm-up), and staleness from commit to arrival: a coalesced
# frame from its `firstCommittedAt` (the oldest change it holds), any other from its `committedAt`.
# Staleness percentiles are histogram buckets, about 6% wide.
#
# Each scenario gets a fresh server pinned to CPU 0; subscribers and the publisher run on CPU 1.
# A process may hold at most 20,000 descriptors, so S3's subscribers are spread over two client
# processes, each binding to its own 127.0.0.x source addresses.
#
# Builds nothing: expects release builds of receptionist and receptionist-bench, and socketify in
# $SOCKETIFY_PYTHON's environment (make bench-state provides all of them).
# Usage: bench/state.sh [seconds] [change sets per second] [models] [maxRate] [subscribers] [S3 subscribers]
# (defaults 10 2000 1000 10 1000 10000; smaller counts make a quick smoke run).
# BENCH_SCENARIOS="s1 s2 s3" chooses the scenarios; BENCH_SERVERS="receptionist socketify" the
# servers of S1, S2 and S3. STATE_DEFLATE=1 has Receptionist's
# subscribers offer permessage-deflate, as browsers do (one in STATE_INFLATE_EVERY, default 10,
# inflates and times its frames; the others count the compressed bytes unread).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-10}
rate=${2:-2000}
models=${3:-1000}
max_rate=${4:-10}
subscribers=${5:-1000}
s3_subscribers=${6:-10000}
s3_changes_per_frame=${S3_CHANGES_PER_FRAME:-22}
scenarios=${BENCH_SCENARIOS:-s1 s2 s3}
servers=${BENCH_SERVERS:-receptionist socketify}
deflate=${STATE_DEFLATE:-0}
deflate_args=()
[ "$deflate" = 1 ] && deflate_args=(--deflate --inflate-every "${STATE_INFLATE_EVERY:-10}")
socketify_python=${SOCKETIFY_PYTHON:-.venv-bench/bin/python}
receptionist=.build/release/receptionist
bench=.build/release/receptionist-bench

. bench/common.sh
require_bench_tools bench-state
. bench/fanout.sh

# S3's groups: model and path filters, each with `maxRate` added. The animate job only ever
# changes `color`, so the `label` group is sent nothing after its snapshot.
s3_groups=(
  '"models":["m1*"]'
  '"models":["m2*"],"paths":["color"]'
  '"models":["m3*"],"old":true'
  '"models":["m4*"],"paths":["label"]'
  '"models":["m5*"],"paths":["color","label"]'
  '"models":["m6*","m7*"]'
  '"models":["m8*"],"paths":["color"],"old":true'
  '"models":["m9*"]'
  '"models":["m1","m2","m3","m4","m5","m6","m7","m8","m9","m10"]'
  '"models":["m1*","m2*","m3*"],"paths":["color"]'
)

# Each run leaves one line of JSON here; the tables are printed from them at the end.
results="$work/results.jsonl"
: > "$results"
progress() { echo "state: $*" >&2; }
ticks_now() { echo "$(server_ticks) $(date +%s.%N)"; }
api() { curl -fsS --max-time 30 "$@"; }

# The store `bench` with `models` models, created in one change set over HTTP.
create_store() {
  local base="http://127.0.0.1:$port/api"
  api -o /dev/null -X POST "$base/stores" -d '{"name":"bench"}'
  python3 - "$models" <<'PY' | api -o /dev/null -X POST "$base/stores/bench/changes" --data-binary @-
import json, random, sys
rng = random.Random(7)
print(json.dumps({"changes": [
    {"op": "put", "model": f"m{i}", "value": {"color": f"#{rng.randrange(1 << 24):06x}", "label": f"Model {i}"}}
    for i in range(int(sys.argv[1]))]}))
PY
}

# Appends one result line: the client summaries of `tag`, the CPU window and the commits.
record() {
  local scenario=$1 server=$2 tag=$3 options=$4 cpu_window=$5 committed=$6 publish_seconds=$7
  python3 - "$scenario" "$server" "$tag" "$options" "$cpu_window" "$committed" "$publish_seconds" "$work" "$clock_ticks" \
    >> "$results" <<'PY'
import glob, json, sys
scenario, server, tag, options, window, committed, publish_seconds, work, clock = sys.argv[1:10]
t0, w0, t1, w1 = (float(x) for x in window.split())
lines = [json.loads(open(p).read().strip().splitlines()[-1]) for p in sorted(glob.glob(f"{work}/{tag}.[0-9]*.json"))]
groups = []
for line in lines:
    for i, g in enumerate(line["groups"]):
        if i == len(groups):
            groups.append({"subscribed": 0, "timed": 0, "untimed": 0, "uninflated": 0, "bytes": 0, "histogram_us": {}})
        merged = groups[i]
        for key in ("subscribed", "timed", "untimed", "uninflated", "bytes"):
            merged[key] += g[key]
        for k, v in g["histogram_us"].items():
            merged["histogram_us"][k] = merged["histogram_us"].get(k, 0) + v
firsts = [l["first_delivery_us"] for l in lines if l["first_delivery_us"]]
lasts = [l["last_delivery_us"] for l in lines if l["last_delivery_us"]]
print(json.dumps({
    "scenario": scenario, "server": server, "options": json.loads(options),
    "span_s": (max(lasts) - min(firsts)) / 1e6 if firsts else 0.0,
    "cpu_per_s": (t1 - t0) / float(clock) / (w1 - w0),
    "committed": int(committed),
    "committed_per_s": int(committed) / float(publish_seconds) if float(publish_seconds) > 0 else 0.0,
    "dropped": sum(l["dropped"] for l in lines), "groups": groups}))
PY
}

# Receptionist: the store, the subscribers, then the job for 1 + `seconds` seconds.
receptionist_run() {
  local scenario=$1 tag=$2 count=$3 processes=$4 first_address=$5 options=$6
  local base job window started stopped committed
  progress "$scenario receptionist: $count subscribers"
  start_server receptionist
  base="http://127.0.0.1:$port/api"
  create_store
  start_clients "$tag" "$count" "$processes" "$first_address"
  client_args=()
  started=$(date +%s.%N)
  job=$(api -X POST "$base/jobs" -d "{\"kind\":\"animate\",\"store\":\"bench\",\"rate\":$rate}" \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')
  sleep 1  # warm-up
  window=$(ticks_now)
  sleep "$seconds"
  window="$window $(ticks_now)"
  api -o /dev/null -X DELETE "$base/jobs/$job"
  stopped=$(date +%s.%N)
  committed=$(api "$base/jobs/$job" | python3 -c 'import json, sys; print(json.load(sys.stdin)["changes"])')
  sleep 1  # the last deliveries
  stop_clients
  stop_process "$server_pid"
  record "$scenario" receptionist "$tag" "$options" "$window" "$committed" \
    "$(python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$started" "$stopped")"
}

# socketify: the subscribers on /ws, then the publisher on /publish for 1 + `seconds` seconds,
# `messages` a second of `changes` changes each.
socketify_run() {
  local scenario=$1 tag=$2 count=$3 processes=$4 first_address=$5 messages=${6:-$rate} changes=${7:-1}
  local publisher window
  progress "$scenario socketify: $count subscribers"
  start_server socketify
  start_clients "$tag" "$count" "$processes" "$first_address"
  taskset -c 1 timeout $((seconds + 30)) "$bench" publish-changes --url "ws://127.0.0.1:$port/publish" \
    --rate "$messages" --models "$models" --duration $((seconds + 1)) --connections 1 --window 32 \
    --changes-per-frame "$changes" \
    > "$work/$tag.publish.out" 2> "$work/$tag.publish.err" &
  publisher=$!
  pids+=("$publisher")
  sleep 1  # warm-up
  window=$(ticks_now)
  sleep "$seconds"
  window="$window $(ticks_now)"
  wait "$publisher" || { echo "the publisher failed:" >&2; cat "$work/$tag.publish.err" >&2; exit 1; }
  sleep 1  # the last deliveries
  stop_clients
  stop_process "$server_pid"
  record "$scenario" socketify "$tag" '[""]' "$window" \
    "$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["accepted"])' "$work/$tag.publish.out")" \
    "$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["seconds"])' "$work/$tag.publish.out")"
}

has() { case " $scenarios " in *" $1 "*) return 0 ;; esac; return 1; }

echo "State sync: $models models, $rate single-change change sets/s for 1 + $seconds s per run; server on CPU 0, clients on CPU 1" >&2
if has s1; then
  for kind in $servers; do
    case "$kind" in
      receptionist) client_args=(--store bench "${deflate_args[@]}"); receptionist_run S1 s1r "$subscribers" 1 2 '[""]' ;;
      socketify) client_args=(); socketify_run S1 s1s "$subscribers" 1 2 ;;
      *) echo "unknown server $kind" >&2; exit 2 ;;
    esac
  done
fi
if has s2; then
  option="\"maxRate\":$max_rate"
  client_args=(--store bench "${deflate_args[@]}" --subscribe-options "$option")
  receptionist_run S2 s2r "$subscribers" 1 2 "$(python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$option")"
  # socketify at the frames S2 delivers: `maxRate` messages a second to each subscriber.
  case " $servers " in *" socketify "*) client_args=(); socketify_run S2 s2s "$subscribers" 1 2 "$max_rate" ;; esac
fi
if has s3; then
  client_args=(--store bench "${deflate_args[@]}")
  options=()
  for group in "${s3_groups[@]}"; do
    options+=("$group,\"maxRate\":$max_rate")
    client_args+=(--subscribe-options "$group,\"maxRate\":$max_rate")
  done
  receptionist_run S3 s3r "$s3_subscribers" 2 10 "$(python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "${options[@]}")"
  # socketify at the frames S3 asks for: `maxRate` messages a second, each as big as an S3 frame.
  case " $servers " in
    *" socketify "*) client_args=(); socketify_run S3 s3s "$s3_subscribers" 2 10 "$max_rate" "$s3_changes_per_frame" ;;
  esac
fi

python3 bench/state_report.py "$results" "$seconds" "$rate" "$models" "$max_rate"
