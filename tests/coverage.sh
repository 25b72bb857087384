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
python3 - "$info" "$root/" <<'PY' | tee "$B/coverage.txt"
import sys
info, root = sys.argv[1], sys.argv[2]
agg, d = {}, None
for line in open(info):
    line = line.strip()
    if line.startswith("SF:"):
        f = line[3:].replace(root, "", 1).split("/")
        d = "/".join(f[:2])
        agg.setdefault(d, [0, 0, 0, 0])
    for k, key in enumerate(("LF:", "LH:", "BRF:", "BRH:")):
        if line.startswith(key):
            agg[d][k] += int(line[len(key):])
pct = lambda h, f: 100.0 * h / f if f else 0.0
print("%-14s %8s %7s %10s %8s" % ("folder", "lines", "line%", "branches", "branch%"))
tot = [0, 0, 0, 0]
for d in sorted(agg):
    lf, lh, bf, bh = agg[d]
    tot = [a + b for a, b in zip(tot, agg[d])]
    print("%-14s %8d %6.1f%% %10d %7.1f%%" % (d, lf, pct(lh, lf), bf, pct(bh, bf)))
print("%-14s %8d %6.1f%% %10d %7.1f%%" % ("total", tot[0], pct(tot[1], tot[0]), tot[2], pct(tot[3], tot[2])))
PY
echo "coverage: per-file detail in $info (genhtml $info -o $B/html for pages)"
exit $suite
