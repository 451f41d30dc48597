"""Merges the reconnect storm's client summaries (bench/storm.sh) into one markdown table row.

Each storm process prints one JSON line: `first_frame` (when each client got its first frame,
counted from the storm's start) and `resume` (what each resume was answered, checked against the
protocol). Files named `TAG.resume.N.json` resumed from inside the history, `TAG.reset.N.json`
from too far back.
"""
import argparse
import glob
import json


def summary(path):
    lines = [line for line in open(path).read().splitlines() if line.strip()]
    return json.loads(lines[-1]) if lines else None


def percentile(histogram, fraction):
    total = sum(histogram.values())
    if total == 0:
        return 0.0
    rank = max(1, -(-int(fraction * total * 1000) // 1000))
    seen = 0
    for value in sorted(histogram):
        seen += histogram[value]
        if seen >= rank:
            return value
    return 0.0


def main():
    parser = argparse.ArgumentParser()
    for name in ("work", "tag"):
        parser.add_argument(f"--{name}", required=True)
    for name in ("count", "rate", "history", "bound", "version", "behind", "drop-us", "storm-cpu", "storm-us", "steady-cpu", "clock-ticks"):
        parser.add_argument(f"--{name}", type=int, required=True)
    parser.add_argument("--steady-s", type=float, required=True)
    parser.add_argument("--client-core", nargs=4, type=int, required=True,
                        help="busy and total ticks of the clients' CPU before the storm, then after it")
    args = parser.parse_args()

    groups = {}
    missing = 0
    for kind in ("resume", "reset"):
        groups[kind] = []
        for path in sorted(glob.glob(f"{args.work}/{args.tag}.{kind}.*.json")):
            line = summary(path)
            if line is None:
                missing += 1
            else:
                groups[kind].append(line)
    lines = groups["resume"] + groups["reset"]

    histogram = {}
    for line in lines:
        for key, count in line["first_frame"]["histogram_us"].items():
            histogram[float(key)] = histogram.get(float(key), 0) + count
    on_time = sum(l["first_frame"]["count"] - l["first_frame"]["late"] for l in lines)
    failures = args.count - on_time
    max_ms = max((l["first_frame"]["max_us"] for l in lines), default=0) / 1000
    answers = {}
    for line in lines:
        for key, count in line["first_frame"]["answer_histogram_us"].items():
            answers[float(key)] = answers.get(float(key), 0) + count
    answer_max_ms = max((l["first_frame"]["answer_max_us"] for l in lines), default=0) / 1000

    # A histogram bucket's middle may lie past the largest value recorded in it.
    def ms(histogram, fraction, ceiling):
        return min(percentile(histogram, fraction) / 1000, ceiling)

    def total(kind, field):
        return sum(l["resume"][field] for l in groups[kind])

    resume_clients = sum(l["connections"] for l in groups["resume"])
    reset_clients = sum(l["connections"] for l in groups["reset"])
    resumed_exact = total("resume", "first_change_exact")
    resets = total("reset", "reset")
    # Change sets a client never saw: a resume whose first change did not follow `since`, a
    # resumed client that saw no change at all, a later frame that skipped versions, a snapshot
    # not marked reset, a `subscribed` at another version than asked.
    resumed_all = total("resume", "resumed") + total("reset", "resumed")
    no_change = resumed_all - sum(total(k, "first_change_exact") + total(k, "first_change_gap") for k in groups)
    lost = sum(total(k, f) for k in groups for f in ("first_change_gap", "gaps", "not_reset", "wrong_version")) + no_change
    # Answered, but not as the history allows: a resume from inside it that was reset, or the reverse.
    unexpected = total("resume", "reset") + total("reset", "resumed")

    storm_cpu = args.storm_cpu / args.clock_ticks
    steady = args.steady_cpu / args.clock_ticks / args.steady_s
    print(f"| receptionist | {args.count:,} ({resume_clients:,} resume, {reset_clients:,} reset) | {args.rate} | "
          f"{args.history:,} | {ms(histogram, 0.5, max_ms):.1f} | {ms(histogram, 0.99, max_ms):.1f} | "
          f"{max_ms:.1f} | {failures:,} | {storm_cpu:.2f} in {args.storm_us / 1e6:.2f} s ({steady:.2f}/s before the drop) | "
          f"{resumed_exact:,} of {resume_clients:,} | {resets:,} of {reset_clients:,} | {lost:,} |")
    met = failures == 0 and lost == 0 and unexpected == 0 and missing == 0 and max_ms <= 2000
    notes = []
    if unexpected:
        notes.append(f"{unexpected:,} answered against the history (resume reset, or reset resumed)")
    if missing:
        notes.append(f"{missing} client processes printed no summary")
    errors = {l.get("first_error") for l in lines if l.get("first_error")}
    if errors:
        notes.append("first client errors: " + "; ".join(sorted(errors)))
    print()
    busy_before, total_before, busy_after, total_after = args.client_core
    client_busy = (busy_after - busy_before) / max(1, total_after - total_before)
    print(f"From its subscribe to its first frame (the server's answer alone): p50 {ms(answers, 0.5, answer_max_ms):.1f} ms, "
          f"p99 {ms(answers, 0.99, answer_max_ms):.1f} ms, max {answer_max_ms:.1f} ms. "
          f"The clients' CPU was {client_busy:.0%} busy over the storm.")
    print(f"Aim: every client has its first frame within 2 s of the reconnect, nothing lost: "
          f"{'met' if met else 'not met'} (the drop at version {args.version:,}, the new clients started {args.drop_us / 1000:.0f} ms after it; "
          f"resumes from {args.version - args.behind:,})."
          + (" " + ". ".join(notes) + "." if notes else ""))


main()
