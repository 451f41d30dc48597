"""The tables of bench/state.sh, from the result lines its runs left (one JSON object each).

Usage: python3 state_report.py RESULTS SECONDS RATE MODELS MAXRATE
"""
import json
import sys

path, seconds, rate, models, max_rate = sys.argv[1:6]
runs = [json.loads(line) for line in open(path) if line.strip()]


def merged(groups):
    total = {"subscribed": 0, "timed": 0, "untimed": 0, "uninflated": 0, "bytes": 0, "histogram_us": {}}
    for g in groups:
        for key in ("subscribed", "timed", "untimed", "uninflated", "bytes"):
            total[key] += g[key]
        for k, v in g["histogram_us"].items():
            total["histogram_us"][k] = total["histogram_us"].get(k, 0) + v
    return total


def percentile(histogram, fraction):
    """Milliseconds; None when nothing was timed."""
    counts = sorted((float(k), v) for k, v in histogram.items())
    total = sum(v for _, v in counts)
    if total == 0:
        return None
    rank, seen = max(1, -(-int(fraction * total * 1000) // 1000)), 0
    for value, count in counts:
        seen += count
        if seen >= rank:
            return value / 1000
    return counts[-1][0] / 1000


def ms(value):
    return "—" if value is None else f"{value:.2f}"


def per_subscriber(group, key, span):
    frames = group["timed"] + group["untimed"] + group.get("uninflated", 0) if key == "frames" else group[key]
    return frames / group["subscribed"] / span if group["subscribed"] and span > 0 else 0.0


def subscription(run):
    if run["server"] == "socketify":
        return f"{run['committed_per_s']:,.0f} change sets/s, each relayed through `publish`"
    options = run["options"]
    if options == [""]:
        return "every change set"
    if len(options) == 1:
        return "`{" + options[0] + "}`"
    return f"`maxRate: {max_rate}`, {len(options)} filter groups"


print(f"State sync: a store of {int(models):,} models, an `animate` job committing {int(rate):,} single-change "
      f"change sets a second; {seconds} s measured per run after 1 s of warm-up. Server on CPU 0, clients on CPU 1.")
print()
print("| scenario | server | subscribers | subscription | change sets/s | frames/s per subscriber | "
      "bytes/s per subscriber | server CPU-s/s | staleness p50 ms | p99 ms | p999 ms | frames of expected |")
print("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
figures = {}
for run in runs:
    total = merged(run["groups"])
    span = run["span_s"]
    frames = total["timed"] + total["untimed"] + total["uninflated"]
    coalesced = any("maxRate" in o for o in run["options"])
    if coalesced:
        expected = "— (coalesced)"
    else:
        expected = f"{frames:,} of {run['committed'] * total['subscribed']:,}"
        if total["untimed"]:
            expected += f" ({total['untimed']:,} conflated)"
    if run["dropped"]:
        expected += f", {run['dropped']:,} connections lost"
    p50, p99, p999 = (percentile(total["histogram_us"], f) for f in (0.5, 0.99, 0.999))
    frames_per_s = frames / span if span > 0 else 0.0
    figures[(run["scenario"], run["server"])] = {
        "cpu": run["cpu_per_s"], "p99": p99, "frame_us": run["cpu_per_s"] / frames_per_s * 1e6 if frames_per_s else None,
        "rate": per_subscriber(total, "frames", span)}
    print(f"| {run['scenario']} | {run['server']} | {total['subscribed']:,} | {subscription(run)} | "
          f"{run['committed_per_s']:,.0f} | {per_subscriber(total, 'frames', span):,.1f} | "
          f"{per_subscriber(total, 'bytes', span):,.0f} | {run['cpu_per_s']:.3f} | "
          f"{ms(p50)} | {ms(p99)} | {ms(p999)} | {expected} |")

print()
print("Staleness runs from a frame's oldest commit (`firstCommittedAt` when coalesced, else `committedAt`) to its "
      "arrival; its percentiles are histogram bucket middles (buckets ~6% wide, 4.1 ms around 125 ms). Bytes are "
      "WebSocket payload and header. CPU is the server's utime + stime per second of the measured window.")
for run in runs:
    if run["server"] == "socketify":
        total = merged(run["groups"])
        frames = total["timed"] + total["untimed"] + total["uninflated"]
        size = total["bytes"] / frames if frames else 0
        print(f"{run['scenario']}: socketify's publisher: 1 WebSocket connection to /publish, at most 32 messages unacknowledged, "
              f"{size:.0f} bytes a frame on the wire (the same JSON as Receptionist's frame, stamped when sent).")
        print("socketify's event loop polls libuv without sleeping while it has work (socketify's loop.py), so under "
              "steady load its CPU reads close to a full core whatever uWebSockets itself spends: compare its "
              "deliveries and staleness, not its CPU.")

for run in runs:
    if len(run["groups"]) < 2:
        continue
    span = run["span_s"]
    print()
    print(f"{run['scenario']} by group (each with `\"maxRate\":{max_rate}`; connections take the groups round-robin):")
    print()
    print("| group | options | subscribers | frames/s per subscriber | bytes/s per subscriber | "
          "staleness p50 ms | p99 ms | p999 ms |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for index, (group, options) in enumerate(zip(run["groups"], run["options"]), start=1):
        shown = options.replace(f',"maxRate":{max_rate}', "")
        p50, p99, p999 = (percentile(group["histogram_us"], f) for f in (0.5, 0.99, 0.999))
        print(f"| {index} | `{{{shown}}}` | {group['subscribed']:,} | {per_subscriber(group, 'frames', span):,.1f} | "
              f"{per_subscriber(group, 'bytes', span):,.0f} | {ms(p50)} | {ms(p99)} | {ms(p999)} |")


def verdict(ok):
    return "met" if ok else "**not met**"


lines = []
s1, s1s = figures.get(("S1", "receptionist")), figures.get(("S1", "socketify"))
s2, s2s, s3 = figures.get(("S2", "receptionist")), figures.get(("S2", "socketify")), figures.get(("S3", "receptionist"))
if s1 and s1s and s1s["cpu"] > 0:
    lines.append(f"- S1 server CPU, Receptionist / socketify: {s1['cpu'] / s1s['cpu']:.2f}")
if s1 and s2 and s1["cpu"] > 0 and s2["cpu"] > 0:
    lines.append(f"- S2 server CPU / S1's: {s2['cpu'] / s1['cpu']:.3f} (1/{s1['cpu'] / s2['cpu']:.1f})")
if s2 and s2s and s2["frame_us"] and s2s["frame_us"]:
    ratio = s2["frame_us"] / s2s["frame_us"]
    lines.append(f"- S2 server CPU per delivered frame: {s2['frame_us']:.1f} µs; socketify's per delivered message at "
                 f"{max_rate} messages a second to each subscriber: {s2s['frame_us']:.1f} µs; {ratio:.2f}×, "
                 f"aim at most 1.0×: {verdict(ratio <= 1.0)}")
if s3:
    lines.append(f"- S3 server CPU: {s3['cpu']:.3f} CPU-s/s")
bound = 1000 / float(max_rate) + 25
for name, f in (("S2", s2), ("S3", s3)):
    if f and f["p99"] is not None:
        lines.append(f"- {name} staleness p99: {f['p99']:.2f} ms; aim at most 1/maxRate + 25 ms = {bound:.0f} ms: "
                     f"{verdict(f['p99'] <= bound)}")
s3s = figures.get(("S3", "socketify"))
if s3s and s3s["p99"] is not None:
    # A relay adds no coalescing wait: its share of the bound is what is left past 1/maxRate.
    lines.append(f"- S3's frames through socketify ({max_rate} messages a second to each subscriber, each as big as an "
                 f"S3 frame): {s3s['rate']:.1f} a second delivered to each, {s3s['cpu']:.3f} CPU-s/s, send-to-arrival "
                 f"p99 {s3s['p99']:.2f} ms; a relay's share of the bound, 25 ms: {verdict(s3s['p99'] <= 25)}")
if lines:
    print()
    print("\n".join(lines))
