#!/usr/bin/env bash
# Line and branch coverage of src/ per folder (gcov + lcov, Debian's lcov):
# `make coverage` builds an instrumented tree in build-cov (--coverage), then
# this script clears old counters, runs the suite on it (tests/run.sh) and
# prints one row per src/ folder and a total. The suite's own tally is printed
# too; coverage is reported even when a test fails (the exit status is the
# suite's). Usage: tests/coverage.sh [BUILD_DIR] [FILTER]
set -u
B=${1:-build-cov}
FILTER=${2:-}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
command -v lcov >/dev/null || { echo "coverage: lcov not installed (scripts/deps.sh test)" >&2; exit 2; }
find "$B" -name '*.gcda' -delete
tests/run.sh "$B" $FILTER > "$B/coverage-suite.log" 2>&1
suite=$?
tail -n 1 "$B/coverage-suite.log"
info="$B/coverage.info"
lcov -q --rc lcov_branch_coverage=1 --capture --directory "$B" --base-directory "$root" \
     --output-file "$B/all.info" 2>"$B/lcov.err" || { cat "$B/lcov.err" >&2; exit 3; }
lcov -q --rc lcov_branch_coverage=1 --extract "$B/all.info" "$root/src/*" --output-file "$info" 2>>"$B/lcov.err" \
  || { cat "$B/lcov.err" >&2; exit 3; }
# per folder: LF/LH (lines found/hit), BRF/BRH (branches found/hit) summed over its files
awk -v root="$root/" '
  /^SF:/ { f = substr($0, 4); sub(root, "", f); n = split(f, p, "/"); dir = p[1] "/" p[2]; dirs[dir] = 1 }
  /^LF:/ { lf[dir] += substr($0, 4) } /^LH:/ { lh[dir] += substr($0, 4) }
  /^BRF:/ { bf[dir] += substr($0, 5) } /^BRH:/ { bh[dir] += substr($0, 5) }
  END {
    printf "%-14s %8s %7s %10s %7s\n", "folder", "lines", "line%", "branches", "branch%"
    n = asorti(dirs, ds)
    for (i = 1; i <= n; i++) { d = ds[i]
      printf "%-14s %8d %6.1f%% %10d %6.1f%%\n", d, lf[d], lf[d] ? 100 * lh[d] / lf[d] : 0, bf[d], bf[d] ? 100 * bh[d] / bf[d] : 0
      LF += lf[d]; LH += lh[d]; BF += bf[d]; BH += bh[d] }
    printf "%-14s %8d %6.1f%% %10d %6.1f%%\n", "total", LF, LF ? 100 * LH / LF : 0, BF, BF ? 100 * BH / BF : 0
  }' "$info" | tee "$B/coverage.txt"
echo "coverage: per-file detail in $info (genhtml $info -o $B/html for pages)"
exit $suite
