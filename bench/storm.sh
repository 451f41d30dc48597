# The reconnect storm, bench/ws.sh's `storm` scenario; source it after bench/fanout.sh.
#
# `count` subscribers hold a store of 64 models that an `animate` job commits to at `rate` change
# sets a second, on a gateway keeping `--history $storm_history`. Every subscriber process is
# killed at once; the job keeps committing, and `count` new subscribers connect straight away and
# resume with `since` and `epoch`: half from the version at the drop minus $storm_behind (in the
# history: `subscribed`, then the change sets committed since), half from version 1 (too old: a
# reset snapshot).
# Each storm process counts its clients' first frames from the same start and checks every resume
# (bench/storm_report.py merges them into one row). A client without a first frame within
# $storm_bound seconds is a failure.

# Short enough that version 1 leaves it within a minute at one change set a second.
storm_history=${STORM_HISTORY:-30}
storm_bound=${STORM_BOUND:-10}
# How far before the drop the resuming half resumes. 0 is what a client that was connected until
# the drop does: it resumes from the last version it saw. More stands for clients that were
# already behind, and each gets that many change sets replayed (on the one client core too).
storm_behind=${STORM_BEHIND:-0}
# Seconds the storm's clients keep reading after all have their first frame: the replays and the
# live change sets that follow them are checked for gaps meanwhile.
storm_tail=${STORM_TAIL:-3}
# STORM_PERF=FILE records the server's core with `perf record -g` from the storm's start to the
# last first frame, for `perf report -i FILE`; STORM_PERF_CPUS=1 records the clients' core instead.
storm_perf=${STORM_PERF:-}

storm_api() { curl -fsS --max-time 30 "$@"; }
# Busy and total clock ticks of CPU 1, where the clients run: whether they, not the server, set the pace.
client_core_ticks() { awk '$1 == "cpu1" {print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8}' /proc/stat; }

# One storm process: `n` subscribers resuming after `since`, from two source addresses of its own.
storm_clients() {
  local file=$1 n=$2 since=$3 epoch=$4 origin=$5 address=$6
  taskset -c 1 timeout $((storm_bound + storm_tail + 30)) "$bench" ws --url "ws://127.0.0.1:$port/ws" \
    --connections "$n" --store bench --since "$since" --epoch "$epoch" --origin-us "$origin" \
    --source-hosts "127.0.0.$address,127.0.0.$((address + 1))" --connect-timeout "$storm_bound" \
    --duration "$storm_tail" --grace 0.5 > "$file.json" 2> "$file.err" &
  clients+=($!)
  pids+=($!)
}

storm() {
  local count=$1 rate=$2 first_address=$3 tag="storm.$1.$2"
  local api job version epoch origin steady_before steady_after before after ended processes=4
  if [ "$storm_behind" -ge "$storm_history" ]; then
    echo "STORM_BEHIND ($storm_behind) must be less than STORM_HISTORY ($storm_history): that half resumes from inside the history" >&2
    exit 2
  fi
  server_args=(--history "$storm_history")
  start_server receptionist
  server_args=()
  api="http://127.0.0.1:$port/api"
  storm_api -o /dev/null -X POST "$api/stores" -d '{"name":"bench"}'
  python3 -c 'import json; print(json.dumps({"changes": [{"op": "put", "model": f"m{i}", "value": {"color": "#000000"}} for i in range(64)]}))' \
    | storm_api -o /dev/null -X POST "$api/stores/bench/changes" --data-binary @-
  job=$(storm_api -X POST "$api/jobs" -d "{\"kind\":\"animate\",\"store\":\"bench\",\"rate\":$rate}" \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')

  # The subscribers to drop, two processes as ws.sh's large runs have them; then the steady state.
  client_args=(--store bench)
  start_clients "$tag.held" "$count" 2 "$first_address"
  client_args=()
  # Past the history, so that version 1 is too old to resume from.
  for _ in $(seq 1 600); do
    version=$(storm_api "$api/stores/bench" | python3 -c 'import json, sys; print(json.load(sys.stdin)["version"])')
    [ "$version" -gt $((storm_history + rate)) ] && break
    sleep 0.1
  done
  sleep 1
  steady_before=$(server_ticks)
  sleep 2
  steady_after=$(server_ticks)

  # The drop: every subscriber process killed at once, so the kernel closes all their sockets.
  local dropped
  dropped=$(date +%s%6N)
  kill -KILL "${clients[@]}" 2>/dev/null || true
  for pid in "${clients[@]}"; do wait "$pid" 2>/dev/null || true; done
  clients=()
  read -r version epoch < <(storm_api "$api/stores/bench" \
    | python3 -c 'import json, sys; s = json.load(sys.stdin); print(s["version"], s["epoch"])')
  # One process may hold 20,000 descriptors here: give the server at most a second to close the
  # dropped connections, so that the new ones are not refused for want of descriptors alone.
  for _ in $(seq 1 50); do
    [ "$(ls "/proc/$measured_pid/fd" | wc -l)" -le $((19800 - count)) ] && break
    sleep 0.02
  done

  # The storm: half resume from inside the history, half from too far back.
  local perf_pid=""
  if [ -n "$storm_perf" ]; then
    perf record -q -g -C "${STORM_PERF_CPUS:-0}" -o "$storm_perf" 2>/dev/null &
    perf_pid=$!
  fi
  origin=$(date +%s%6N)
  before=$(server_ticks)
  local core_before core_after
  core_before=$(client_core_ticks)
  local per=$((count / processes)) address=$((first_address + 4))
  for i in $(seq 0 $((processes - 1))); do
    local n=$per
    [ "$i" -lt $((processes - 1)) ] || n=$((count - per * (processes - 1)))
    if [ "$i" -lt $((processes / 2)) ]; then
      storm_clients "$work/$tag.resume.$i" "$n" $((version - storm_behind)) "$epoch" "$origin" $((address + 2 * i))
    else
      storm_clients "$work/$tag.reset.$i" "$n" 1 "$epoch" "$origin" $((address + 2 * i))
    fi
  done
  # Over when every process has its clients' first frames, or its bound ran out.
  for _ in $(seq 1 $((storm_bound * 20 + 200))); do
    [ "$(cat "$work/$tag".re*.err 2>/dev/null | grep -c 'subscribed [0-9]* of')" -ge "$processes" ] && break
    sleep 0.05
  done
  after=$(server_ticks)
  core_after=$(client_core_ticks)
  ended=$(date +%s%6N)
  if [ -n "$perf_pid" ]; then kill -INT "$perf_pid"; wait "$perf_pid" || true; fi
  for pid in "${clients[@]}"; do wait "$pid" 2>/dev/null || true; done
  clients=()
  storm_api -o /dev/null -X DELETE "$api/jobs/$job"
  stop_process "$server_pid"
  python3 bench/storm_report.py --work "$work" --tag "$tag" --count "$count" --rate "$rate" \
    --history "$storm_history" --bound "$storm_bound" --version "$version" --behind "$storm_behind" \
    --drop-us "$(( origin - dropped ))" --storm-cpu "$(( after - before ))" --storm-us "$(( ended - origin ))" \
    --client-core $core_before $core_after --steady-cpu "$(( steady_after - steady_before ))" --steady-s 2 --clock-ticks "$clock_ticks"
}
