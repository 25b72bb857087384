# CLI behaviour: help, unknown commands and options exit 2 naming the input.
. "$(dirname "$0")/lib.sh"
expect_exit "help exits 0" 0 "$PLUMB" --help
expect_exit "no command exits 2" 2 "$PLUMB"
expect_exit "unknown command exits 2" 2 "$PLUMB" frobnicate
grep -q frobnicate "$TMP/err" && ok "unknown command is named" || fail "unknown command is named"
for c in $("$PLUMB" --help | awk '/^commands:/{f=1;next} f&&/^  [a-z]/{print $1}'); do
  expect_exit "$c --help exits 0" 0 "$PLUMB" "$c" --help
  expect_exit "$c rejects unknown option" 2 "$PLUMB" "$c" --no-such-option
  grep -q -- --no-such-option "$TMP/err" && ok "$c names the bad option" || fail "$c names the bad option" "$(cat "$TMP/err")"
done
# bad values and bad input files, per command (exit 2, the bad input named)
bad() { local name=$1 needle=$2; shift 2; expect_exit "$name exits 2" 2 "$@"
  grep -q -- "$needle" "$TMP/err" && ok "$name names '$needle'" || fail "$name names '$needle'" "$(cat "$TMP/err")"; }
bad "accept two levels" "--quick" "$PLUMB" accept --quick --full
bad "accept bad device" "gpu7" "$PLUMB" accept --quick --device gpu7
bad "accept missing backend" "--device hip" env PLUMB_BACKEND_PATH=/nonexistent "$PLUMB" accept --quick --device hip
bad "accept bad threads" "--threads" "$PLUMB" accept --threads many
bad "accept negative threads" "--threads" "$PLUMB" accept --threads -3
bad "accept unknown check" "bogus" "$PLUMB" accept --quick --checks doctor,bogus
bad "accept empty check list" "--checks" "$PLUMB" accept --quick --checks ,
bad "accept stray argument" "extra" "$PLUMB" accept extra
bad "accept --out is a file" "not a directory" "$PLUMB" accept --quick --out "$0"
bad "doctor stray argument" "extra" "$PLUMB" doctor extra
bad "doctor --json with a value" "--json" "$PLUMB" doctor --json=yes
bad "report no folder" "DIR" "$PLUMB" report
bad "report missing folder" "$TMP/nope" "$PLUMB" report "$TMP/nope"
mkdir -p "$TMP/r1"; echo '{"schema": "plumb.results/1", "checks": [' >"$TMP/r1/results.json"
bad "report invalid JSON" "invalid JSON" "$PLUMB" report "$TMP/r1"
echo '{"schema": "something/9", "checks": []}' >"$TMP/r1/results.json"
bad "report wrong schema" "something/9" "$PLUMB" report "$TMP/r1"
echo '{"schema": "plumb.results/1", "checks": [{"name": "x", "status": "maybe"}]}' >"$TMP/r1/results.json"
bad "report bad status" "maybe" "$PLUMB" report "$TMP/r1"
bad "version stray argument" "extra" "$PLUMB" version extra
finish
