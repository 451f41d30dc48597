#!/usr/bin/env bash
# WebSocket fan-out, side by side: Receptionist, nchan (nginx, one process) and socketify
# (uWebSockets) on the same workload in one run. One topic is published over HTTP at a fixed rate
# and pushed to every subscriber; latency runs from the publisher's `sentAt` in each body to the
# moment a subscriber reads the frame. Each server is pinned to CPU 0; subscribers and the
# publisher share CPU 1. Each scenario gets a fresh server, so CPU time and memory are its own.
#
# A process may hold at most 20,000 descriptors, so large runs spread subscribers over several
# client processes, each binding its sockets to its own loopback source addresses.
#
# Builds nothing: expects release builds of receptionist and receptionist-bench, nginx with nchan,
# and socketify in $SOCKETIFY_PYTHON's environment (make bench-ws provides all of them).
# Usage: bench/ws.sh [seconds] [rate with 1,000 subscribers] [rate with 10,000] [idle connections] [full rate] [ws large rate]
# The full-speed runs (full, wsfull) ask for [full rate] messages per second (default 100,000),
# more than any of the servers sustains: the publisher then goes as fast as its window (requests
# unanswered per connection) and the subscribers allow, never more than 32 messages in front of
# the average subscriber (each subscriber process counts its deliveries in a shared file the
# publisher reads every millisecond), so the latency is the server's and not a client backlog.
# BENCH_SERVERS="receptionist nchan socketify" chooses the servers, and
# BENCH_SCENARIOS="small large store full wsfull wslarge compression idle cluster storm" the scenarios (wsfull: full speed with each server's WebSocket publisher;
# wslarge: 10,000 subscribers and [ws large rate] (default 100) messages a second on a fixed schedule, published over each server's
# WebSocket (one connection, at most 32 unanswered), 1 million deliveries a second offered;
# compression: the same with a dashboard's ~1 KiB messages, subscribers offering permessage-deflate or not, paced as the full-speed runs are;
# presence: 10,000 subscribers following one topic's presence while 1,000 others leave and join each second) (store, cluster, presence and storm are
# Receptionist's alone). cluster runs 1,000 subscribers at 200 messages a second (half on each of
# two topics, each published at that rate) on one node, on one node through one redis-server, and
# on three nodes over two redis-servers (a topic on each), everything on one core.
# storm is a reconnect storm (bench/storm.sh): STORM_SUBSCRIBERS (10,000) store subscribers, with
# an `animate` job committing STORM_RATE change sets a second (a list: one storm per rate; "1 2 5")
# and --history STORM_HISTORY (30), are dropped at once, and as many new ones connect at once and
# resume, half from the last version they saw (STORM_BEHIND versions before it; 0) and half from
# too far back; it reports when every client had its first frame, the server's CPU over the storm,
# and any change set lost (STORM_PERF=FILE: a `perf record` of the server's core over the storm).
# BENCH_BASELINE=<path to another receptionist binary> adds the server `baseline`: that build run
# exactly as `receptionist` is, for a before-and-after comparison in one run
# (BENCH_SERVERS="receptionist baseline"); BASELINE_ARGS adds serve options to it alone (for one
# build with and without an option: BENCH_BASELINE=.build/release/receptionist BASELINE_ARGS="--write-delay 0").
# PUBLISH_CONNECTIONS (4) and PUBLISH_WINDOW (32 requests unanswered per connection; 1 is how most
# backends publish, request then response) shape the HTTP publisher.
# The gateways run with their per-address and publish-rate limits off: the load comes from a few
# loopback addresses and the publisher is meant to go as fast as it can.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-10}
rate_small=${2:-200}
rate_large=${3:-20}
idle=${4:-19000}
rate_full=${5:-100000}
rate_ws_large=${6:-100}
servers=${BENCH_SERVERS:-receptionist nchan socketify}
# The HTTP publisher: keep-alive connections, and requests unanswered on each (1 is request-response).
publish_connections=${PUBLISH_CONNECTIONS:-4}
publish_window=${PUBLISH_WINDOW:-32}
scenarios=${BENCH_SCENARIOS:-small large store full wsfull wslarge compression presence idle cluster storm}
storm_rates=${STORM_RATE:-1 2 5}
storm_subscribers=${STORM_SUBSCRIBERS:-10000}
socketify_python=${SOCKETIFY_PYTHON:-.venv-bench/bin/python}
receptionist=.build/release/receptionist
bench=.build/release/receptionist-bench

. bench/common.sh
require_bench_tools bench-ws
. bench/fanout.sh
. bench/storm.sh
. bench/cluster-fanout.sh

# Prints one table row from the client summaries, the publisher's summary and the CPU ticks.
row() {
  python3 - "$@" <<'PY'
import glob, json, sys
kind, tag, work, count, processes, ticks, clock = sys.argv[1:8]
lines = [json.loads(open(p).read().strip().splitlines()[-1]) for p in sorted(glob.glob(f"{work}/{tag}.[0-9]*.json"))]
publisher = json.load(open(f"{work}/{tag}.publish.json"))
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
expected = round(publisher["accepted"] * int(count))
cpu = int(ticks) / int(clock)
per_million = cpu / (delivered / 1e6) if delivered else float("nan")
print(f"| {kind} | {int(count):,} | {publisher['published_per_s']:.0f} | "
      f"{delivered / span if span > 0 else 0:,.0f} | {pct(0.5):.2f} | {pct(0.99):.2f} | {pct(0.999):.2f} | "
      f"{per_million:.2f} | {delivered:,} of {expected:,} |")
PY
}

fanout() {
  local kind=$1 count=$2 processes=$3 rate=$4 first_address=$5 tag="$1.$2.$4"
  start_server "$kind"
  start_clients "$tag" "$count" "$processes" "$first_address"
  set_pace "$tag"
  local before after
  before=$(server_ticks)
  taskset -c 1 timeout $((seconds + 30)) "$bench" publish --port "$port" --path "$publish_path" --rate "$rate" \
    --duration "$seconds" --connections "$publish_connections" --window "$publish_window" "${pace[@]}" > "$work/$tag.publish.json"
  sleep 1  # the last deliveries
  after=$(server_ticks)
  stop_clients
  stop_process "$server_pid"
  row "$kind" "$tag" "$work" "$count" "$processes" "$((after - before))" "$clock_ticks"
}

# The same fan-out with each server's WebSocket publishing path, its native fast path: one
# publisher connection, at most 32 messages unanswered, the same ~100-byte messages. Receptionist
# takes `{"type":"publish",…}` on /ws and answers `published`; socketify publishes what /publish
# is sent into uWebSockets' C++ `publish` and answers with one byte.
ws_fanout() {
  local kind=$1 count=$2 processes=$3 rate=$4 first_address=$5 tag="ws.$1.$2.$4" url format
  start_server "$kind"
  case "$kind" in
    receptionist|baseline) url="ws://127.0.0.1:$port/ws" format=receptionist-topic ;;
    socketify) url="ws://127.0.0.1:$port/publish" format=raw-topic ;;
    *) echo "no WebSocket publishing for $kind" >&2; stop_process "$server_pid"; return ;;
  esac
  start_clients "$tag" "$count" "$processes" "$first_address"
  set_pace "$tag"
  local before after
  before=$(server_ticks)
  taskset -c 1 timeout $((seconds + 30)) "$bench" publish-changes --url "$url" --format "$format" --store bench \
    --rate "$rate" --duration "$seconds" --connections 1 --window 32 "${pace[@]}" > "$work/$tag.publish.json"
  sleep 1  # the last deliveries
  after=$(server_ticks)
  stop_clients
  stop_process "$server_pid"
  row "$kind (WebSocket publisher)" "$tag" "$work" "$count" "$processes" "$((after - before))" "$clock_ticks"
}

# permessage-deflate at full speed: a dashboard's ~1 KiB JSON messages published over each server's
# WebSocket (one connection, at most 32 unanswered), to `count` subscribers that offer
# permessage-deflate (`deflate` 1, as every browser does) or not (0). socketify runs with
# uWebSockets' shared compressor and publishes asking for compression; Receptionist compresses each
# broadcast once. Wire bytes are what the subscribers read from their sockets, per delivered message.
compression_fanout() {
  local kind=$1 count=$2 deflate=$3 rate=$4 first_address=$5 tag="deflate.$1.$3" url format
  [ "$kind" = socketify ] && socketify_args=(compress)
  start_server "$kind"
  socketify_args=()
  case "$kind" in
    receptionist|baseline) url="ws://127.0.0.1:$port/ws" format=receptionist-dashboard ;;
    socketify) url="ws://127.0.0.1:$port/publish" format=raw-dashboard ;;
    *) stop_process "$server_pid"; return ;;
  esac
  # One subscriber in 50 inflates and times every message; the others count the compressed frames
  # and their bytes unread, so the clients' one core is not what limits the run.
  [ "$deflate" = 1 ] && client_args=(--deflate --inflate-every 50)
  start_clients "$tag" "$count" 1 "$first_address"
  client_args=()
  set_pace "$tag"
  local before after
  before=$(server_ticks)
  taskset -c 1 timeout $((seconds + 30)) "$bench" publish-changes --url "$url" --format "$format" --store bench \
    --rate "$rate" --duration "$seconds" --connections 1 --window 32 "${pace[@]}" > "$work/$tag.publish.json"
  sleep 1  # the last deliveries
  after=$(server_ticks)
  stop_clients
  stop_process "$server_pid"
  python3 - "$kind" "$deflate" "$work" "$tag" "$count" "$((after - before))" "$clock_ticks" <<'PY'
import glob, json, sys
kind, deflate, work, tag, count, ticks, clock = sys.argv[1:8]
lines = [json.loads(open(p).read().strip().splitlines()[-1]) for p in sorted(glob.glob(f"{work}/{tag}.[0-9]*.json"))]
publisher = json.load(open(f"{work}/{tag}.publish.json"))
delivered = sum(l["delivered"] for l in lines)
wire = sum(l["wire_bytes"] for l in lines)
span = (max(l["last_delivery_us"] for l in lines) - min(l["first_delivery_us"] for l in lines)) / 1e6 if delivered else 0
cpu = int(ticks) / int(clock)
per_million = cpu / (delivered / 1e6) if delivered else float("nan")
p99 = max((l["p99_ms"] for l in lines), default=0)
print(f"| {kind} | {'yes' if deflate == '1' else 'no'} | {int(count):,} | {publisher['published_per_s']:,.0f} | "
      f"{delivered / span if span > 0 else 0:,.0f} | {wire / delivered if delivered else 0:,.0f} | {per_million:.2f} | "
      f"{p99:.1f} | {delivered:,} of {publisher['accepted'] * int(count):,} |")
PY
}

# Presence at scale: `followers` subscribers of one topic follow its presence while, for `seconds`,
# rounds of `churn` more followers connect, subscribe, stay half a second and leave (a client
# process per round, so every round is new client ids): `followers` + `churn` subscribers with
# presence on, `churn` of them leaving and joining again about once a second. Every join and
# leave would be one event per follower uncoalesced; the gateway collects them for
# --presence-interval (1 s) and, past --presence-max-members (`cap`), sends counts only. Reports
# what each steady follower was sent, and the joins counted from what the rounds subscribed.
presence_churn() {
  local followers=$1 churn=$2 cap=$3 first_address=$4 tag="presence.$1.$2.$3"
  server_args=(--presence-max-members "$cap")
  start_server receptionist
  server_args=()
  client_args=(--presence)
  start_clients "$tag" "$followers" $(( (followers + 4999) / 5000 )) "$first_address"
  client_args=()
  local before after started ended rounds=0 churn_address=$((first_address + 40))
  # The lists and counts the followers were sent while they subscribed are not the churn's: wait
  # out one interval's frame, then start the followers' count afresh.
  sleep 1.5
  for pid in "${clients[@]}"; do kill -USR1 "$pid"; done
  before=$(server_ticks)
  started=$(date +%s.%N)
  local until=$((SECONDS + seconds))
  while [ "$SECONDS" -lt "$until" ]; do
    taskset -c 1 timeout 30 "$bench" ws --url "ws://127.0.0.1:$port/ws" --connections "$churn" --topic bench \
      --presence --source-hosts "127.0.0.$churn_address,127.0.0.$((churn_address + 1))" --duration 0.5 --grace 0 \
      --connect-timeout 10 > "$work/$tag.round.$rounds.out" 2>/dev/null || true
    rounds=$((rounds + 1))
  done
  ended=$(date +%s.%N)
  after=$(server_ticks)
  sleep 1.5  # the last interval's frame
  stop_clients
  stop_process "$server_pid"
  python3 - "$work" "$tag" "$followers" "$churn" "$cap" "$rounds" "$started" "$ended" "$((after - before))" "$clock_ticks" <<'PY'
import glob, json, sys
work, tag, followers, churn, cap, rounds, started, ended, ticks, clock = sys.argv[1:11]
lines = [json.loads(open(p).read().strip().splitlines()[-1]) for p in sorted(glob.glob(f"{work}/{tag}.[0-9]*.json"))]
followers, churn, rounds = int(followers), int(churn), int(rounds)
elapsed = float(ended) - float(started)
joined = 0
for path in glob.glob(f"{work}/{tag}.round.*.out"):
    text = open(path).read().strip()
    if text: joined += json.loads(text.splitlines()[-1])["subscribed"]
frames = sum(l["presence_frames"] for l in lines)
frame_bytes = sum(l["presence_bytes"] for l in lines)
per_s = joined / elapsed  # joins a second, and as many leaves
mode = "counts" if followers + churn > int(cap) else "lists"
print(f"| {followers:,} + {churn:,} | {per_s:,.0f} + {per_s:,.0f} | {int(cap):,} ({mode}) | {2 * per_s:,.0f} | "
      f"{frames / followers / elapsed:.2f} | {frame_bytes / followers / elapsed:,.0f} | {int(ticks) / int(clock) / elapsed:.2f} |")
PY
}

# Receptionist's own path end to end: an `animate` job commits to a store of 64 models on a job
# thread at `rate` change sets per second; a receptionist bounces each onto the loop, which fans it
# out. Latency runs from the commit (`committedAt`) to the subscriber's read.
store_fanout() {
  local count=$1 processes=$2 rate=$3 first_address=$4 tag="store.$1.$3"
  local api
  start_server receptionist
  api="http://127.0.0.1:$port/api"
  curl -fsS -o /dev/null -X POST "$api/stores" -d '{"name":"bench"}'
  python3 -c 'import json; print(json.dumps({"changes": [{"op": "put", "model": f"m{i}", "value": {"color": "#000000"}} for i in range(64)]}))' \
    | curl -fsS -o /dev/null -X POST "$api/stores/bench/changes" --data-binary @-
  client_args=(--store bench)
  start_clients "$tag" "$count" "$processes" "$first_address"
  client_args=()
  local before after job committed
  before=$(server_ticks)
  job=$(curl -fsS -X POST "$api/jobs" -d "{\"kind\":\"animate\",\"store\":\"bench\",\"rate\":$rate}" \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')
  sleep "$seconds"
  curl -fsS -o /dev/null -X DELETE "$api/jobs/$job"
  sleep 1  # the last deliveries
  after=$(server_ticks)
  committed=$(curl -fsS "$api/jobs/$job" | python3 -c 'import json, sys; print(json.load(sys.stdin)["changes"])')
  python3 -c "import json, sys; c = int(sys.argv[1]); print(json.dumps({'accepted': c, 'published_per_s': c / float(sys.argv[2])}))" \
    "$committed" "$seconds" > "$work/$tag.publish.json"
  stop_clients
  stop_process "$server_pid"
  row "receptionist (store, from commit)" "$tag" "$work" "$count" "$processes" "$((after - before))" "$clock_ticks"
}

idle_memory() {
  local kind=$1 count=$2 processes=$3 first_address=$4
  start_server "$kind"
  sleep 1
  local before after
  before=$(server_rss_kib)
  # A server that refuses some of them is measured on those it holds.
  start_clients "$kind.idle" "$count" "$processes" "$first_address" $((count * 9 / 10))
  sleep 2  # let the server settle after the burst of handshakes
  after=$(server_rss_kib)
  stop_clients
  stop_process "$server_pid"
  python3 -c "
import sys
count, before, after = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
print(f'| {sys.argv[4]} | {count:,} | {(after - before) * 1024 / count:,.0f} | {before / 1024:.0f} → {after / 1024:.0f} MiB |')
" "$subscribed_count" "$before" "$after" "$kind"
}

has() { case " $scenarios " in *" $1 "*) return 0 ;; esac; return 1; }

echo "WebSocket fan-out: each server pinned to CPU 0, subscribers and publisher on CPU 1; ${seconds} s of publishing per run"
echo
echo "| server | subscribers | published msg/s | delivered msg/s | p50 ms | p99 ms | p999 ms | server CPU-s per 1M delivered | delivered of expected |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
if has small; then for kind in $servers; do fanout "$kind" 1000 1 "$rate_small" 2; done; fi
if has large; then for kind in $servers; do fanout "$kind" 10000 2 "$rate_large" 10; done; fi
if has store; then
  case " $servers " in *" receptionist "*)
    store_fanout 1000 1 "$rate_small" 2
    store_fanout 10000 2 "$rate_large" 10 ;;
  esac
fi
# At full speed the publisher is also held to 32 messages in front of the average subscriber.
paced=1
if has full; then for kind in $servers; do fanout "$kind" 1000 1 "$rate_full" 2; done; fi
if has wsfull; then for kind in $servers; do [ "$kind" = nchan ] || ws_fanout "$kind" 1000 1 "$rate_full" 2; done; fi
paced=0
if has wslarge; then for kind in $servers; do [ "$kind" = nchan ] || ws_fanout "$kind" 10000 2 "$rate_ws_large" 10; done; fi
paced=1
if has compression; then
  echo
  echo "permessage-deflate: a dashboard's ~1 KiB JSON messages at full speed, each server publishing over its own WebSocket (1 connection, 32 unanswered, at most 32 messages ahead of the average subscriber)"
  echo
  echo "| server | subscribers offer deflate | subscribers | published msg/s | delivered msg/s | wire bytes per delivered message | server CPU-s per 1M delivered | p99 ms | delivered of expected |"
  echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
  for kind in $servers; do
    [ "$kind" = nchan ] && continue
    compression_fanout "$kind" 1000 0 "$rate_full" 2
    compression_fanout "$kind" 1000 1 "$rate_full" 2
  done
fi
paced=0
if has presence; then
  case " $servers " in *" receptionist "*)
    echo
    echo "Presence: followers of one topic's presence while other clients join and leave; --presence-interval 1 s"
    echo
    echo "| steady + churning followers | joins + leaves a second | --presence-max-members | events a follower would get uncoalesced, a second | presence frames per steady follower a second | presence bytes per steady follower a second | server CPU-s a second |"
    echo "|---:|---:|---|---:|---:|---:|---:|"
    presence_churn 9000 1000 1000 10
    presence_churn 900 100 5000 10 ;;
  esac
fi
if has cluster; then
  case " $servers " in *" receptionist "*)
    cluster_fanout 1000 "$rate_small" 2 memory 1 0
    cluster_fanout 1000 "$rate_small" 2 redis 1 1
    cluster_fanout 1000 "$rate_small" 2 redis 3 2 ;;
  esac
fi
if has storm; then
  case " $servers " in *" receptionist "*)
    echo
    echo "Reconnect storm: first frames counted from the moment the new clients start; CPU-s from then until the last first frame"
    echo
    echo "| server | reconnecting subscribers | change sets/s | history | first frame p50 ms | p99 ms | max ms | no first frame within ${storm_bound} s | server CPU-s over the storm | resumed, first change = since + 1 | reset snapshots | lost |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|"
    for rate in $storm_rates; do storm "$storm_subscribers" "$rate" 40; done ;;
  esac
fi
if has idle; then
  echo
  echo "| server | idle subscribed connections | server bytes of RSS per connection | RSS before → after |"
  echo "|---|---:|---:|---|"
  for kind in $servers; do idle_memory "$kind" "$idle" 4 20; done
fi
