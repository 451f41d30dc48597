#!/usr/bin/env bash
# Builds the libFuzzer targets in Fuzz/ with -sanitize=fuzzer,address and runs each for a set time.
# Usage: scripts/fuzz.sh SECONDS [TARGET...]    (0 seconds only builds; SWIFT may name the swift command)
#
# Any crash, failed invariant, leak, hang (one input running over 10 s) or memory over 2 GB fails
# the run, and libFuzzer saves the input in .build-fuzz/artifacts/. Inputs that reach new code go
# to .build-fuzz/corpus/<target>/, listed first so libFuzzer writes there: the committed seeds in
# Fuzz/Corpus/<target>/ are only read.
set -euo pipefail
seconds=${1:?usage: $0 SECONDS [TARGET...]}
shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(FuzzHTTPRequest FuzzWebSocketFrame FuzzClientMessage)
swift=${SWIFT:-swift}
scratch=.build-fuzz

started=$(date +%s)
for target in "${targets[@]}"; do
  # gold warns once for every ASan helper it cannot export; the warnings are harmless and bury the output.
  $swift build --scratch-path "$scratch" -c debug -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING \
    --product "$target" 2>&1 | { grep -v "Cannot export local symbol" || true; }
done
echo "built ${targets[*]} in $(( $(date +%s) - started )) s"
[ "$seconds" != 0 ] || exit 0

# Swift's own backtracer would run inside ASan's signal handling; libFuzzer reports the crash instead.
export SWIFT_BACKTRACE=enable=no
export ASAN_OPTIONS="detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
mkdir -p "$scratch/artifacts" "$scratch/logs"
failed=()
for target in "${targets[@]}"; do
  mkdir -p "$scratch/corpus/$target"
  log="$scratch/logs/$target.log"
  echo "fuzzing $target for $seconds s (log: $log)"
  if "$scratch/debug/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$scratch/artifacts/$target-" "$scratch/corpus/$target" "Fuzz/Corpus/$target" >"$log" 2>&1; then
    done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1 || true)
    echo "  ok: ${done_line#*DONE   }"
  else
    failed+=("$target")
    tail -n 60 "$log"
    echo "  FAILED: $target; the input is in $scratch/artifacts/"
  fi
done
[ ${#failed[@]} -eq 0 ] || { echo "fuzzing failed: ${failed[*]}" >&2; exit 1; }
