#!/usr/bin/env bash
# Runs the libFuzzer targets that `make fuzz-build` built (docs/HACKING.md,
# "Fuzzing"): each one SECONDS seconds from its committed seed corpus
# tests/fuzz/corpus/<target>/ plus a working corpus under BUILD/corpus/<target>/
# (new inputs go there and are kept between runs; the committed seeds are
# only read). Prints per target the executions, exec/s, corpus size and
# crash / no crash; exits 1 when any target crashed (the reproducer is
# saved under BUILD/crashes/<target>/ and named in the output).
#
# Usage: scripts/fuzz.sh BUILD SECONDS [TARGET...]   (TARGET: criteo_line, args, ...)
# Environment: FUZZ_LOG_DIR (default BUILD/fuzz-logs): one <target>.log each;
#   FUZZ_PARALLEL=1: all targets at once (long runs), else one after another.
set -uo pipefail
build=${1:?usage: scripts/fuzz.sh BUILD SECONDS [TARGET...]}
secs=${2:?usage: scripts/fuzz.sh BUILD SECONDS [TARGET...]}
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
case "$secs" in ''|*[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number, got '$secs'" >&2; exit 2 ;; esac
logs=${FUZZ_LOG_DIR:-$build/fuzz-logs}
mkdir -p "$logs"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in "$root"/tests/fuzz/fuzz_*.c; do t=$(basename "$f" .c); targets+=("${t#fuzz_}"); done
fi

# Inputs larger than libFuzzer's default (4096 bytes, or the largest seed)
# where the format needs it: CIFAR records are 3073 bytes; run folders hold
# a results.json and an artifact.
max_len() {
  case "$1" in
    cifar) echo 9220 ;;
    results_json) echo 32768 ;;
    gzip_reader) echo 16384 ;;
    *) echo 4096 ;;
  esac
}

run_one() {
  local t=$1 bin="$build/fuzz_$1" log="$logs/$1.log"
  local work="$build/corpus/$1" crashes="$build/crashes/$1" seeds="$root/tests/fuzz/corpus/$1"
  mkdir -p "$work" "$crashes"
  if [ ! -x "$bin" ]; then echo "fuzz.sh: $bin is not built (make fuzz-build)" >"$log"; return 1; fi
  if [ ! -d "$seeds" ]; then echo "fuzz.sh: no seed corpus $seeds" >"$log"; return 1; fi
  # detect_leaks: a leak is a finding too; UBSan aborts (built with -fno-sanitize-recover)
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$bin" -max_total_time="$secs" -max_len="$(max_len "$t")" -timeout=30 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$crashes/" "$work" "$seeds" >"$log" 2>&1
}

summary() {
  local t=$1 rc=$2 log="$logs/$1.log"
  local execs eps corp crash
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  corp=$(grep -o 'corp: [0-9]*/[0-9]*[a-zA-Z]*' "$log" | tail -1 | sed 's/corp: //')
  crash=$(grep -o "Test unit written to [^ ]*" "$log" | head -1 | sed 's/Test unit written to //')
  if [ "$rc" -eq 0 ] && [ -z "$crash" ]; then
    printf '%-14s %4ss  %10s execs  %7s exec/s  corpus %-12s no crash\n' "$t" "$secs" "${execs:-?}" "${eps:-?}" "${corp:-?}"
    return 0
  fi
  printf '%-14s %4ss  %10s execs  %7s exec/s  corpus %-12s CRASH (exit %s) %s\n' "$t" "$secs" "${execs:-?}" "${eps:-?}" \
    "${corp:-?}" "$rc" "${crash:-see $log}"
  grep -m3 -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error)' "$log" | sed 's/^/    /'
  return 1
}

fail=0
declare -A rcs
if [ "${FUZZ_PARALLEL:-0}" = 1 ]; then
  declare -A pids
  for t in "${targets[@]}"; do run_one "$t" & pids[$t]=$!; done
  for t in "${targets[@]}"; do wait "${pids[$t]}"; rcs[$t]=$?; done
else
  for t in "${targets[@]}"; do run_one "$t"; rcs[$t]=$?; done
fi
echo "fuzz: ${#targets[@]} targets, ${secs}s each (logs in $logs)"
for t in "${targets[@]}"; do summary "$t" "${rcs[$t]}" || fail=1; done
[ "$fail" -eq 0 ] && echo "fuzz: no crash" || echo "fuzz: CRASH (reproduce: $build/fuzz_TARGET FILE)"
exit "$fail"
