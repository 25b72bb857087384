# Hardening of plumb train, plumb launch and plumb data (the sweep after
# tests/t_harden.sh): inputs and cases no other test named. One block per
# defect; each test failed on the build before its fix.
. "$(dirname "$0")/lib.sh"
Q="--quiet --health-interval 0"
# run NAME WANT_RC GREP CMD...: exit WANT_RC and stderr+stdout matching GREP (an ERE; "" = anything)
run() {
  local name=$1 want=$2 pat=$3; shift 3
  "$@" >"$TMP/out" 2>"$TMP/err"; local rc=$?
  if [ "$rc" -eq "$want" ] && { [ -z "$pat" ] || cat "$TMP/out" "$TMP/err" | grep -Eq -- "$pat"; }; then ok "$name"
  else fail "$name" "exit $rc (want $want): $(cat "$TMP/err" "$TMP/out" | head -c 400)"; fi
}

# ---- 1. plumb --help: each command's line names what the command does (train said
# "(ctr)" though it trains gpt, resnet and toy; data named synth-criteo only; bench
# named the device ceilings only)
"$PLUMB" --help >"$TMP/top" 2>&1
line() { grep -E "^  $1 " "$TMP/top"; }
for w in $("$PLUMB" train --help | awk '/^  [a-z]/{print $1}'); do
  line train | grep -qw "$w" && ok "plumb --help: the train line names $w" || fail "plumb --help train line lacks $w" "$(line train)"
done
for s in $("$PLUMB" data --help | awk '/^subcommands:/{f=1;next} f&&/^  [a-z]/{print $1}'); do
  line data | grep -qw -- "$s" && ok "plumb --help: the data line names $s" || fail "plumb --help data line lacks $s" "$(line data)"
done
for w in $("$PLUMB" bench --help | awk '/^workloads:/{f=1;next} f&&/^  [a-z]/{print $1}'); do
  line bench | grep -qw -- "$w" && ok "plumb --help: the bench line names $w" || fail "plumb --help bench line lacks $w" "$(line bench)"
done

finish
