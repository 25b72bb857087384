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
finish
