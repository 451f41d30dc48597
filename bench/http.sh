#!/usr/bin/env bash
# HTTP throughput, side by side: Receptionist and nginx (one worker) on the same loopback, the
# same files and the same wrk load, in one run. Each server is pinned to CPU 0 and wrk to CPU 1,
# so the ratio compares one core against one core.
#
# Usage: bench/http.sh [seconds] [connections]
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-10}
connections=${2:-64}
binary=.build/release/receptionist
[ -x "$binary" ] || { echo "build first: swift build -c release" >&2; exit 1; }
for tool in wrk nginx taskset curl; do
  command -v "$tool" >/dev/null || [ -x "/usr/sbin/$tool" ] || { echo "missing $tool (make bench installs it)" >&2; exit 1; }
done
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)

. bench/common.sh

# The same public directory for both servers: the viewer plus a 4 KiB file.
mkdir -p "$work/public"
cp -r Public/. "$work/public/"
head -c 4096 /dev/urandom > "$work/public/4k.bin"



rport=$(free_port)
taskset -c 0 "$binary" serve --host 127.0.0.1 --port "$rport" --public "$work/public" --log-level warning \
  > "$work/receptionist.out" 2>&1 &
pids+=($!)

nport=$(free_port)
mkdir -p "$work/nginx"
cat > "$work/nginx/nginx.conf" <<CONF
worker_processes 1;
master_process off;
daemon off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 100000000;
  keepalive_timeout 60s;
  types { application/octet-stream bin; text/html html; }
  client_body_temp_path $work/nginx/body;
  proxy_temp_path $work/nginx/proxy;
  fastcgi_temp_path $work/nginx/fastcgi;
  uwsgi_temp_path $work/nginx/uwsgi;
  scgi_temp_path $work/nginx/scgi;
  server {
    listen 127.0.0.1:$nport;
    root $work/public;
    etag on;
    location = /healthz { default_type application/json; return 200 '{"status":"ok"}'; }
  }
}
CONF
taskset -c 0 "$nginx_bin" -c "$work/nginx/nginx.conf" -p "$work/nginx" > "$work/nginx.out" 2>&1 &
pids+=($!)

wait_ready "http://127.0.0.1:$rport/healthz"
wait_ready "http://127.0.0.1:$nport/healthz"

# Runs wrk and prints "requests_per_second p50_ms p99_ms".
measure() {
  local out
  out=$(taskset -c 1 wrk -t1 -c"$connections" -d"${seconds}s" --latency "$1")
  local rps p50 p99
  rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
  p50=$(awk '$1=="50%" {print $2}' <<<"$out")
  p99=$(awk '$1=="99%" {print $2}' <<<"$out")
  echo "$rps $(to_ms "$p50") $(to_ms "$p99")"
}
to_ms() {
  python3 -c 'import sys,re
v=sys.argv[1]; m=re.match(r"([\d.]+)(us|ms|s)$", v)
n,u=float(m.group(1)),m.group(2)
print(round(n/1000 if u=="us" else n*1000 if u=="s" else n, 3))' "$1"
}

echo "HTTP benchmark: wrk -t1 -c$connections -d${seconds}s, servers pinned to CPU 0, wrk to CPU 1"
echo
printf '| %-16s | %-12s | %14s | %8s | %8s | %14s |\n' endpoint server "requests/s" "p50 ms" "p99 ms" "vs nginx"
printf '|%s|%s|%s|%s|%s|%s|\n' ------------------ -------------- ---------------- ---------- ---------- ----------------
for path in /healthz /4k.bin; do
  # Warm both up briefly so neither pays for first-touch costs in the measurement.
  taskset -c 1 wrk -t1 -c"$connections" -d1s "http://127.0.0.1:$rport$path" >/dev/null
  taskset -c 1 wrk -t1 -c"$connections" -d1s "http://127.0.0.1:$nport$path" >/dev/null
  read -r r_rps r_p50 r_p99 < <(measure "http://127.0.0.1:$rport$path")
  read -r n_rps n_p50 n_p99 < <(measure "http://127.0.0.1:$nport$path")
  ratio=$(python3 -c "print(f'{$r_rps/$n_rps:.2f}x')")
  printf '| %-16s | %-12s | %14s | %8s | %8s | %14s |\n' "GET $path" receptionist "$r_rps" "$r_p50" "$r_p99" "$ratio"
  printf '| %-16s | %-12s | %14s | %8s | %8s | %14s |\n' "GET $path" nginx "$n_rps" "$n_p50" "$n_p99" "1.00x"
done
