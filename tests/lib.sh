# Shared helpers for tests/t_*.sh: source it, call `ok NAME` / `fail NAME why`
# / `skip NAME why`, and `finish` at the end (prints "N passed, N failed, N skipped").
set -u
: "${PLUMB:?run through tests/run.sh}"
T_P=0; T_F=0; T_S=0
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
ok()   { T_P=$((T_P+1)); echo "ok   $1"; }
fail() { T_F=$((T_F+1)); echo "FAIL $1: ${2:-}"; }
skip() { T_S=$((T_S+1)); echo "skip $1: ${2:-}"; }
# expect_exit NAME CODE CMD...: runs CMD, passes when its exit status is CODE
expect_exit() { local name=$1 want=$2; shift 2; "$@" >"$TMP/out" 2>"$TMP/err"; local rc=$?
  if [ "$rc" -eq "$want" ]; then ok "$name"; else fail "$name" "exit $rc, want $want; stderr: $(head -c 300 "$TMP/err")"; fi; }
# run NAME WANT_RC GREP CMD...: exit WANT_RC and stderr+stdout matching GREP (an ERE; "" = anything)
run() {
  local name=$1 want=$2 pat=$3; shift 3
  "$@" >"$TMP/out" 2>"$TMP/err"; local rc=$?
  if [ "$rc" -eq "$want" ] && { [ -z "$pat" ] || cat "$TMP/out" "$TMP/err" | grep -Eq -- "$pat"; }; then ok "$name"
  else fail "$name" "exit $rc (want $want): $(cat "$TMP/err" "$TMP/out" | head -c 400)"; fi
}
# a memory bound (ulimit -v, KiB) for tests of unbounded reads; AddressSanitizer reserves
# terabytes of shadow address space, so under PLUMB_ASAN=1 the bound is left out (the
# tests still show exit 2 and no read past the cap)
VMEM=4000000; [ "${PLUMB_ASAN:-0}" = 1 ] && VMEM=unlimited
finish() { echo "$T_P passed, $T_F failed, $T_S skipped"; [ "$T_F" -eq 0 ]; }
