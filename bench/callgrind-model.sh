#!/usr/bin/env bash
# Instructions a committing thread spends per committed change, counted by callgrind, for one or
# more builds of receptionist-bench: repeatable figures for comparing two builds of the commit
# path (store, observer, coalescing receptionist), which the wall-clock model bench cannot tell
# apart on a noisy machine.
#
# Each build runs `receptionist-bench model` with one committing thread, a coalescing
# receptionist delivering to a real loop, CHANGES_PER_SET changes per change set to 64 models,
# for exactly CHANGE_SETS change sets. With SCOPE=commit (the default) only what runs inside
# `ModelStore.commit` is counted: apply, history, and the receptionist absorbing each change on
# the committing thread. With SCOPE=thread everything the committing thread runs is counted,
# the job building its operations and releasing them too.
#
# Under valgrind the threads take turns, so the loop takes deliveries less often than it would
# run beside the committing thread; the buffer's work per delivery (a model's first change since
# the last one) is under-counted in both scopes. Compare builds with it, and see the wall clock
# for the rate.
# Usage: bench/callgrind-model.sh BENCH_BINARY [BENCH_BINARY…]
#        (env: CHANGE_SETS=2000 CHANGES_PER_SET=256 SCOPE=commit|thread)
set -euo pipefail
cd "$(dirname "$0")/.."
change_sets=${CHANGE_SETS:-2000}
per_set=${CHANGES_PER_SET:-256}
command -v valgrind >/dev/null || { echo "missing valgrind (apt-get install valgrind)" >&2; exit 1; }
. bench/common.sh

scope=${SCOPE:-commit}
case "$scope" in
  commit) counted="instructions in commit" ;;
  thread) counted="instructions on the committing thread" ;;
  *) echo "SCOPE is commit or thread" >&2; exit 2 ;;
esac
echo "| build | change sets | changes | $counted | per committed change |"
echo "|---|---:|---:|---:|---:|"
for binary in "$@"; do
  # valgrind 3.19 cannot read the DWARF of a Swift 6 build; the symbols it needs stay.
  strip --strip-debug -o "$work/bench" "$binary"
  rm -f "$work"/out*
  if [ "$scope" = commit ]; then
    valgrind --tool=callgrind --callgrind-out-file="$work/out" \
      --toggle-collect='$s17ReceptionistModel0B5StoreC6commit_2ifAA9ChangeSet*' \
      "$work/bench" model --threads 1 --changes-per-set "$per_set" --policies coalesce \
      --change-sets "$change_sets" > "$work/run.log" 2>&1
    instructions=$(grep -o 'Collected : [0-9]*' "$work/run.log" | awk '{print $3}')
  else
    valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$work/out" \
      "$work/bench" model --threads 1 --changes-per-set "$per_set" --policies coalesce \
      --change-sets "$change_sets" > "$work/run.log" 2>&1
    # The committing thread is the one that ran `ModelStore.commit`.
    file=$(grep -l 'ReceptionistModel0B5StoreC6commit' "$work"/out-* | while read -r f; do
      printf '%s %s\n' "$(awk '/^summary:/{print $2}' "$f")" "$f"; done | sort -n | tail -1 | cut -d' ' -f2)
    instructions=$(awk '/^summary:/{print $2}' "$file")
  fi
  changes=$((change_sets * per_set))
  printf '| %s | %d | %d | %d | %d |\n' "$binary" "$change_sets" "$changes" "$instructions" $((instructions / changes))
done
