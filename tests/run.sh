#!/usr/bin/env bash
# Runs the whole suite: the C unit/integration tests (build/plumb-tests) and
# every tests/t_*.sh script (CLI, MPI, browser, promtool tests). Each script
# prints its own "N passed, N failed" line; this adds them up and prints the
# total last. Usage: tests/run.sh [BUILD_DIR] [FILTER]
set -u
B=${1:-build}
FILTER=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
export PLUMB=$root/$B/plumb PLUMB_BUILD=$root/$B PLUMB_ROOT=$root
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
total_p=0; total_f=0; total_s=0
tally() { # reads a log, adds its last "N passed, N failed[, N skipped]" line
  local line; line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -n 1)
  if [ -z "$line" ]; then echo "  (no summary line: counted as 1 failure)"; total_f=$((total_f+1)); return; fi
  local p f s; p=$(echo "$line" | sed -E 's/^([0-9]+) passed.*/\1/'); f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
  s=$(echo "$line" | sed -nE 's/.* ([0-9]+) skipped.*/\1/p'); s=${s:-0}
  total_p=$((total_p+p)); total_f=$((total_f+f)); total_s=$((total_s+s))
}
logdir=$(mktemp -d); trap 'rm -rf "$logdir"' EXIT
# each part's seconds, so the suite's cost is visible (CI's budget: docs/HACKING.md)
times=""
t0=$SECONDS
echo "== $B/plumb-tests $FILTER"
"$root/$B/plumb-tests" $FILTER 2>&1 | tee "$logdir/unit.log"
tally "$logdir/unit.log"
times="plumb-tests $((SECONDS - t0))"
for t in "$here"/t_*.sh; do
  [ -e "$t" ] || continue
  [ -n "$FILTER" ] && [[ "$(basename "$t")" != *"$FILTER"* ]] && continue
  echo "== $(basename "$t")"
  t0=$SECONDS
  bash "$t" 2>&1 | tee "$logdir/$(basename "$t").log"
  tally "$logdir/$(basename "$t").log"
  times="$times, $(basename "$t" .sh) $((SECONDS - t0))"
done
echo "seconds: $times"
echo "$total_p passed, $total_f failed, $total_s skipped"
[ "$total_f" -eq 0 ]
