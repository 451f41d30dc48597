#!/usr/bin/env bash
# Instructions per store commit, counted by callgrind, for one or more gateway builds: the path
# of `POST /api/stores/{store}/changes` from one keep-alive HTTP connection, one request in
# flight (or PIPELINE of them sent in one write), each a single-change change set (~90-byte
# body) to one store. The server runs under valgrind --tool=callgrind, twice per build, for
# FEWER then MORE commits; the difference over the extra commits leaves start-up out.
# Usage: bench/callgrind-commit.sh BINARY [BINARY…]   (env: FEWER=200 MORE=1200 PIPELINE=1
#   ENGINE=memory|disk)
set -euo pipefail
cd "$(dirname "$0")/.."
fewer=${FEWER:-200}
more=${MORE:-1200}
pipeline=${PIPELINE:-1}
engine=${ENGINE:-memory}
command -v valgrind >/dev/null || { echo "missing valgrind (apt-get install valgrind)" >&2; exit 1; }
. bench/common.sh

# The server's instructions for `$2` commits, run as built at `$1`.
count() {
  local port engine_args=()
  port=$(free_port)
  [ "$engine" = disk ] && engine_args=(--data-dir "$work/data.$port")
  valgrind --tool=callgrind --callgrind-out-file="$work/out.$port" "$work/server" serve --host 127.0.0.1 \
    --port "$port" --log-level warning --publish-rate 0 "${engine_args[@]}" > "$work/server.log" 2>&1 &
  local server=$!
  pids+=("$server")
  for _ in $(seq 1 600); do curl -sf -o /dev/null "http://127.0.0.1:$port/readyz" && break; sleep 0.1; done
  python3 - "$port" "$2" "$pipeline" <<'PY'
import json, socket, sys
port, commits, window = (int(a) for a in sys.argv[1:])
def request(path, body):
    data = json.dumps(body).encode()
    return (f"POST {path} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n").encode() + data
with socket.create_connection(("127.0.0.1", port)) as sock:
    reader = sock.makefile("rb")
    def answers(count):
        for _ in range(count):
            length = 0
            while (line := reader.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            reader.read(length)
    sock.sendall(request("/api/stores", {"name": "bench"}))
    answers(1)
    for start in range(0, commits, window):
        batch = range(start, min(commits, start + window))
        sock.sendall(b"".join(request("/api/stores/bench/changes",
                                      {"changes": [{"op": "put", "model": "m", "value": {"n": n}}]}) for n in batch))
        answers(len(batch))
PY
  kill -TERM "$server"; wait "$server" 2>/dev/null || true
  awk '/^summary:/ { print $2 }' "$work/out.$port"
}

echo "| build | instructions, $fewer commits | $more commits | instructions per commit |"
echo "|---|---:|---:|---:|"
for binary in "$@"; do
  # valgrind 3.19 cannot read the DWARF of a Swift 6 build; the symbol table it reads names the functions.
  strip --strip-debug -o "$work/server" "$binary"
  low=$(count "$binary" "$fewer")
  high=$(count "$binary" "$more")
  echo "| $binary | $low | $high | $(( (high - low) / (more - fewer) )) |"
done
