# The cluster fan-out, bench/ws.sh's `cluster` scenario; source it after bench/fanout.sh: the same
# fan-out through the redis engine, on one node or several over one or two Redis servers.

# The cluster against one node, on the same workload: `count` subscribers, half following each of
# two topics (named so that they land on different Redis servers when there are two), each topic
# published at `rate` messages a second by a publisher of its own (request-response HTTP, one
# connection, one request in flight), so every subscriber gets `rate` messages a second as in the
# small workload. With `nodes` nodes the subscribers are spread evenly over them and topic A is
# published through the first node, topic B through the last. Everything is pinned to CPU 0, as
# one server is, and CPU is the nodes' and the Redis servers' together.
cluster_fanout() {
  local count=$1 rate=$2 first_address=$3 engine=$4 nodes=$5 shards=$6 tag="cluster.$4.$5.$6"
  local node_ports=() node_pids=() redis_pids=() urls=() before after group=0 per topics
  read -r -a topics <<< "$(python3 - "$shards" <<'PY'
import sys
def fnv(name):
    h = 0xCBF29CE484222325
    for b in name.encode():
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h
def jump(key, buckets):
    b, j = -1, 0
    while j < buckets:
        b = j
        key = (key * 2862933555777941757 + 1) & 0xFFFFFFFFFFFFFFFF
        j = int((b + 1) * ((1 << 31) / ((key >> 33) + 1)))
    return b
shards = int(sys.argv[1])
names = [f"bench-{i}" for i in range(100)]
a = names[0]
b = next(n for n in names[1:] if shards < 2 or jump(fnv(n), shards) != jump(fnv(a), shards))
print(a, b)
PY
)"
  if [ "$engine" = redis ]; then
    for _ in $(seq 1 "$shards"); do
      local redis_port redis_pid
      start_redis taskset -c 0
      redis_pids+=("$redis_pid")
      urls+=(--redis-url "redis://127.0.0.1:$redis_port/0")
    done
    server_args=(--engine redis "${urls[@]}")
  fi
  for _ in $(seq 1 "$nodes"); do
    start_server receptionist
    node_ports+=("$port")
    node_pids+=("$server_pid")
  done
  server_args=()
  per=$(( (count + 2 * nodes - 1) / (2 * nodes) ))
  for node_port in "${node_ports[@]}"; do
    for topic in "${topics[@]}"; do
      port=$node_port client_topic=$topic
      start_clients "$tag" "$per" 1 "$first_address" "$per" "$group"
      group=$((group + 1))
    done
  done
  client_topic=bench
  ticks() { for pid in "${node_pids[@]}" "${redis_pids[@]}"; do sed 's/.*) //' "/proc/$pid/stat"; done | awk '{s += $12 + $13} END {print s}'; }
  before=$(ticks)
  taskset -c 1 timeout $((seconds + 30)) "$bench" publish --port "${node_ports[0]}" --path "/api/topics/${topics[0]}/messages" \
    --rate "$rate" --duration "$seconds" --connections 1 --window 1 > "$work/$tag.a.publish" &
  local publisher_a=$!
  taskset -c 1 timeout $((seconds + 30)) "$bench" publish --port "${node_ports[-1]}" --path "/api/topics/${topics[1]}/messages" \
    --rate "$rate" --duration "$seconds" --connections 1 --window 1 > "$work/$tag.b.publish"
  wait "$publisher_a"
  sleep 1  # the last deliveries
  after=$(ticks)
  stop_clients
  for pid in "${node_pids[@]}" "${redis_pids[@]}"; do stop_process "$pid"; done
  # Each subscriber expects what its topic's publisher had accepted: the two publishers' average.
  python3 - "$work/$tag.a.publish" "$work/$tag.b.publish" > "$work/$tag.publish.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
print(json.dumps({"accepted": (a["accepted"] + b["accepted"]) / 2, "published_per_s": a["published_per_s"] + b["published_per_s"]}))
PY
  row "receptionist, $engine, $nodes node(s), $shards Redis" "$tag" "$work" "$((per * 2 * nodes))" $((2 * nodes)) "$((after - before))" "$clock_ticks"
}

