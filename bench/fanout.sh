# Shared by bench/ws.sh and bench/state.sh: the servers under test and the subscriber processes.
# Source it after bench/common.sh, with $receptionist, $bench and $socketify_python set. Each
# server starts pinned to CPU 0 and the subscriber processes run on CPU 1; $server_args and
# $client_args add arguments to the next server and the next subscriber processes.

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

# Starts server `kind` pinned to CPU 0 and sets port, server_pid (to stop), measured_pid (for CPU
# and memory), publish_path and dialect.
start_server() {
  local kind=$1 out
  port=$(free_port)
  out="$work/$kind.$port.out"
  case "$kind" in
    receptionist|baseline)
      local binary=$receptionist
      local extra=()
      if [ "$kind" = baseline ]; then
        binary=${BENCH_BASELINE:?set BENCH_BASELINE to the binary to compare with}
        read -r -a extra <<< "${BASELINE_ARGS:-}"
      fi
      taskset -c 0 "$binary" serve --host 127.0.0.1 --port "$port" --log-level warning \
        --max-connections 19800 --max-connections-per-address 20000 --publish-rate 0 "${server_args[@]}" "${extra[@]}" > "$out" 2>&1 &
      publish_path="/api/topics/bench/messages" dialect=receptionist ;;
    nchan)
      local dir="$work/nchan.$port"
      mkdir -p "$dir"
      sed -e "s|@PORT@|$port|g" -e "s|@DIR@|$dir|g" -e "s|@UPSTREAM@||" -e "s|@STORE@||g" bench/peers/nchan.conf > "$dir/nginx.conf"
      taskset -c 0 "$(command -v nginx || echo /usr/sbin/nginx)" -c "$dir/nginx.conf" -p "$dir" > "$out" 2>&1 &
      publish_path="/pub" dialect=raw ;;
    socketify)
      taskset -c 0 "$socketify_python" bench/peers/socketify_server.py "$port" "${socketify_args[@]}" > "$out" 2>&1 &
      publish_path="/pub" dialect=raw ;;
    *) echo "unknown server $kind" >&2; exit 2 ;;
  esac
  server_pid=$!
  pids+=("$server_pid")
  # Any HTTP answer, even a 404, means the server is up.
  local up=0
  for _ in $(seq 1 200); do
    curl -s -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null && { up=1; break; }
    sleep 0.05
  done
  if [ "$up" -ne 1 ]; then
    echo "$kind did not come up; its output:" >&2
    cat "$out" >&2
    exit 1
  fi
  # nginx's master only supervises: CPU and memory are measured on its one worker, which is
  # stopped with the master.
  if [ "$kind" = nchan ]; then
    measured_pid=$(pgrep -P "$server_pid" | head -n 1)
  else
    measured_pid=$server_pid
  fi
}

# utime + stime of the server, in clock ticks (fields 14 and 15 of stat, counted from the end of
# its command name, which may hold spaces).
server_ticks() { sed 's/.*) //' "/proc/$measured_pid/stat" | awk '{print $12 + $13}'; }
server_rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$measured_pid/status"; }

# Starts `count` subscribers over `processes` client processes, each binding to two source
# addresses of its own from 127.0.0.`first_address` on, and waits (at most 120 s) until each
# process says it has tried all of its connections. Sets subscribed_count; fails the run if fewer
# than `required` subscribed.
clients=()
client_args=()
server_args=()
socketify_args=()
start_clients() {
  local tag=$1 count=$2 processes=$3 first_address=$4 required=${5:-$2} offset=${6:-0}
  [ "$offset" -gt 0 ] || clients=()
  local per=$(( (count + processes - 1) / processes )) left=$count
  for i in $(seq "$offset" $((offset + processes - 1))); do
    local n=$(( left < per ? left : per ))
    left=$((left - n))
    local a=$((first_address + 2 * i))
    taskset -c 1 "$bench" ws --url "ws://127.0.0.1:$port/ws" --connections "$n" --dialect "$dialect" "${client_args[@]}" \
      --source-hosts "127.0.0.$a,127.0.0.$((a + 1))" --topic "${client_topic:-bench}" --duration 0 --connect-timeout 100 \
      --progress-file "$work/$tag.$i.progress" \
      > "$work/$tag.$i.json" 2> "$work/$tag.$i.err" &
    clients+=($!)
    pids+=($!)
  done
  for _ in $(seq 1 1200); do
    local holding=0
    for i in $(seq "$offset" $((offset + processes - 1))); do
      grep -q "holding" "$work/$tag.$i.err" 2>/dev/null && holding=$((holding + 1))
    done
    [ "$holding" -eq "$processes" ] && break
    sleep 0.1
  done
  subscribed_count=$(cat "$work/$tag".*.err | sed -n 's/.*subscribed \([0-9]*\) of.*/\1/p' | awk '{s += $1} END {print s + 0}')
  if [ "$subscribed_count" -lt "$required" ]; then
    echo "only $subscribed_count of $count subscribed ($tag); client output:" >&2
    cat "$work/$tag".*.err >&2
    exit 1
  fi
}

# The publisher's pacing arguments for the subscribers of `tag` (started by start_clients): at most
# 32 messages in front of the average subscriber, as a backend that watches its consumers would.
# Sets the array `pace`; empty unless `paced` is 1.
pace=()
set_pace() {
  local tag=$1
  pace=()
  [ "${paced:-0}" = 1 ] || return 0
  pace=(--pace-files "$(ls "$work/$tag".[0-9]*.progress | paste -sd, -)" --pace-subscribers "$subscribed_count" --ahead 32)
}

stop_clients() {
  for pid in "${clients[@]}"; do stop_process "$pid"; done
}
