# Shared by the bench scripts: a scratch folder and process list cleaned up on exit, and ports.
# Source it after `set -euo pipefail`; it defines $work, the pids array, free_port and wait_ready.
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Waits, at most 5 s, for a URL to answer 2xx.
wait_ready() {
  for _ in $(seq 1 100); do
    curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "server at $1 did not come up" >&2
  return 1
}
