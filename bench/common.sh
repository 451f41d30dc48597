# Shared by the bench scripts: a scratch folder and process list cleaned up on exit, and ports.
# Source it after `set -euo pipefail`; it defines $work, the pids array, free_port and wait_ready.
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  # BENCH_KEEP=DIR keeps the run's scratch (every client's JSON summary and log) there.
  if [ -n "${BENCH_KEEP:-}" ]; then rm -rf "$BENCH_KEEP"; cp -r "$work" "$BENCH_KEEP"; fi
  rm -rf "$work"
}
trap cleanup EXIT

# A port that no socket holds on any address, below the kernel's ephemeral range: socketify listens
# on every address, so a port the clients' closed connections still hold in TIME_WAIT (on their
# 127.0.0.x source addresses) would refuse it, while a bind to 127.0.0.1 alone would not see them.
free_port() {
  python3 -c '
import random, socket
for _ in range(1000):
    port = random.randint(20000, 32000)
    probe = socket.socket()
    try:
        probe.bind(("0.0.0.0", port))
    except OSError:
        continue
    finally:
        probe.close()
    print(port)
    break
'
}

# Waits, at most 5 s, for a URL to answer 2xx.
wait_ready() {
  for _ in $(seq 1 100); do
    curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "server at $1 did not come up" >&2
  return 1
}

# Starts a redis-server of its own, without persistence, its command prefixed by the arguments
# (`taskset -c 1`, `valgrind …`), and waits, at most 30 s, until it answers; sets redis_port and
# redis_pid.
start_redis() {
  redis_port=$(free_port)
  "$@" redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no > "$work/redis.$redis_port.out" 2>&1 &
  redis_pid=$!
  pids+=("$redis_pid")
  for _ in $(seq 1 600); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && return 0; sleep 0.05; done
  echo "redis-server did not start" >&2
  return 1
}

# Stops the run unless Receptionist's release builds ($receptionist, $bench) and the tools the
# side-by-side benches use are there; $1 is the make target that provides them.
require_bench_tools() {
  local binary tool
  for binary in "$receptionist" "$bench"; do
    [ -x "$binary" ] || { echo "build first: swift build -c release --product $(basename "$binary")" >&2; exit 1; }
  done
  for tool in taskset curl python3 getconf; do
    command -v "$tool" >/dev/null || { echo "missing $tool (make $1 installs it)" >&2; exit 1; }
  done
}
