# plumb numerics / plumb rng from the command line: golden digests identical
# run to run and for 1 and 2 threads; rng digests identical run to run and
# written to the run folder with the histograms; bad arguments exit 2.
. "$(dirname "$0")/lib.sh"
digests() { awk '$NF=="pass"||$NF=="fail"{print $1, $2, $3, $(NF-1)}' "$1"; }
ASAN=${PLUMB_ASAN:-0}
if [ "$ASAN" = 1 ]; then
  # under the sanitizers one run per path is enough (they look for memory errors)
  "$PLUMB" numerics --numerics golden --out "$TMP/run" >"$TMP/g1" 2>&1 && ok "golden numerics passes" \
    || fail "golden numerics passes" "$(tail -n 3 "$TMP/g1")"
  skip "golden digests run to run and with 1 and 2 threads" "PLUMB_ASAN=1 runs each path once"
else
"$PLUMB" numerics --numerics golden >"$TMP/g1" 2>&1; r1=$?
"$PLUMB" numerics --numerics golden --out "$TMP/run" >"$TMP/g2" 2>&1; r2=$?
"$PLUMB" numerics --numerics golden --threads 1 >"$TMP/t1" 2>&1; r3=$?
"$PLUMB" numerics --numerics golden --threads 2 >"$TMP/t2" 2>&1; r4=$?
[ $r1 -eq 0 ] && [ $r2 -eq 0 ] && [ $r3 -eq 0 ] && [ $r4 -eq 0 ] && ok "golden numerics passes (4 runs)" \
  || fail "golden numerics passes" "exit $r1 $r2 $r3 $r4: $(tail -n 3 "$TMP/g1")"
n=$(digests "$TMP/g1" | wc -l)
[ "$n" -ge 25 ] && ok "golden digests printed ($n ops)" || fail "golden digests printed" "only $n rows"
cmp -s <(digests "$TMP/g1") <(digests "$TMP/g2") && ok "golden digests equal run to run" \
  || fail "golden digests equal run to run" "$(diff <(digests "$TMP/g1") <(digests "$TMP/g2") | head -5)"
cmp -s <(digests "$TMP/t1") <(digests "$TMP/t2") && cmp -s <(digests "$TMP/g1") <(digests "$TMP/t1") \
  && ok "golden digests equal with 1 and 2 threads" \
  || fail "golden digests equal with 1 and 2 threads" "$(diff <(digests "$TMP/t1") <(digests "$TMP/t2") | head -5)"
fi
# fast mode: passes its thresholds and is deterministic
expect_exit "fast numerics passes" 0 "$PLUMB" numerics --numerics fast --threads 2
grep -q "deterministic" "$TMP/out" && ok "fast numerics reports determinism" || fail "fast numerics reports determinism" "$(tail -n 2 "$TMP/out")"
# results.json through --out (the second golden run above)
grep -q '"schema": "plumb.results/1"' "$TMP/run/results.json" && grep -q '"name": "numerics"' "$TMP/run/results.json" \
  && grep -q '"digest"' "$TMP/run/results.json" && ok "results.json has the numerics check and digests" \
  || fail "results.json has the numerics check and digests"
# rng: digests stable, artifacts written
"$PLUMB" rng --count 50000 >"$TMP/r1" 2>&1; a=$?
"$PLUMB" rng --count 50000 --threads 1 --out "$TMP/run" >"$TMP/r2" 2>&1; b=$?
[ $a -eq 0 ] && [ $b -eq 0 ] && ok "rng passes" || fail "rng passes" "exit $a $b: $(tail -n 2 "$TMP/r1")"
rd() { grep -E ' (u32|uniform|normal) +[0-9a-f]{64}' "$1" | grep -oE '[0-9a-f]{64}'; }
[ "$(rd "$TMP/r1" | wc -l)" -eq 15 ] && cmp -s <(rd "$TMP/r1") <(rd "$TMP/r2") && ok "rng digests equal run to run and threads" \
  || fail "rng digests equal run to run and threads" "$(rd "$TMP/r1" | wc -l) digests"
grep -q "KAT zeros  6627e8d5 e169c58d bc57ac4c 9b00dbd8  ok" "$TMP/r1" && ok "rng prints the known answers" || fail "rng prints the known answers"
[ -s "$TMP/run/checks/rng/histograms.json" ] && grep -q '"kind": "normal"' "$TMP/run/checks/rng/histograms.json" \
  && ok "rng histograms.json written" || fail "rng histograms.json written"
grep -q '"name": "rng"' "$TMP/run/results.json" && grep -q '"name": "numerics"' "$TMP/run/results.json" \
  && ok "one run folder holds both checks" || fail "one run folder holds both checks"
"$PLUMB" rng --count 50000 --seed 0x5eed0000deadbeef >"$TMP/r3" 2>&1 && [ "$(rd "$TMP/r3" | sort -u | wc -l)" -eq 15 ] \
  && ! cmp -s <(rd "$TMP/r1") <(rd "$TMP/r3") && ok "rng --seed changes every stream" || fail "rng --seed changes every stream"
# A device that is not the cpu: the fake plugin (tests/fake_gpu.c) is the cpu
# backend registered as "hip", optionally with one wrong bit. A copy of plumb
# in its own folder, so no real plugin next to the executable is found first.
FAKE="$PLUMB_BUILD/tests/libfake_gpu.so"
if [ -f "$FAKE" ]; then
  mkdir -p "$TMP/bin" "$TMP/plug"; cp "$PLUMB" "$TMP/bin/plumb"; ln -sf "$FAKE" "$TMP/plug/libplumb-hip.so"
  P2="$TMP/bin/plumb"; export PLUMB_BACKEND_PATH="$TMP/plug"
  if [ "$ASAN" != 1 ]; then
  expect_exit "golden numerics on a (fake) hip device equals the cpu" 0 "$P2" numerics --device hip --numerics golden
  grep -q "golden equal to the cpu" "$TMP/out" && ok "numerics reports equality with the cpu" || fail "numerics reports equality with the cpu" "$(tail -n 2 "$TMP/out")"
  FAKE_GPU_CORRUPT=gemm expect_exit "one wrong GEMM bit fails golden numerics" 1 "$P2" numerics --device hip --numerics golden
  grep -q "golden hip:0 differs from the cpu: gemm fp32: element 5 differs" "$TMP/out" && ok "the op and element are named" \
    || fail "the op and element are named" "$(grep -m1 "^numerics:" "$TMP/out")"
  [ "$(grep -c "cpu_equal\|element 5 differs" "$TMP/out")" -ge 9 ] && ok "every corrupted GEMM row fails" || fail "every corrupted GEMM row fails" "$(grep -c "element 5 differs" "$TMP/out") rows"
  fi
  expect_exit "rng on a (fake) hip device equals the cpu" 0 "$P2" rng --device hip --count 20000
  grep -q "digests equal to the cpu's" "$TMP/out" && ok "rng reports digests equal to the cpu's" || fail "rng reports digests equal to the cpu's"
  FAKE_GPU_CORRUPT=normal expect_exit "one wrong normal bit fails rng" 1 "$P2" rng --device hip --count 20000
  grep -q "stream init-t0 normal differs from the cpu at element 7" "$TMP/out" && ok "the stream and element are named" \
    || fail "the stream and element are named" "$(grep -m1 "^rng:" "$TMP/out")"
  unset PLUMB_BACKEND_PATH
else
  skip "fake hip device" "$FAKE not built"
fi
# bad arguments
expect_exit "rng: --seed -1 exits 2" 2 "$PLUMB" rng --seed -1
grep -q -- "--seed" "$TMP/err" && ok "bad --seed is named" || fail "bad --seed is named"
expect_exit "numerics: bad --numerics exits 2" 2 "$PLUMB" numerics --numerics turbo
grep -q turbo "$TMP/err" && ok "bad --numerics is named" || fail "bad --numerics is named" "$(cat "$TMP/err")"
expect_exit "numerics: --threads -1 exits 2" 2 "$PLUMB" numerics --threads -1
expect_exit "numerics: --tf32 with golden exits 2" 2 "$PLUMB" numerics --numerics golden --tf32
expect_exit "numerics: unknown device exits 2" 2 "$PLUMB" numerics --device floppy
grep -q floppy "$TMP/err" && ok "unknown device is named" || fail "unknown device is named" "$(cat "$TMP/err")"
expect_exit "rng: --count 5 exits 2" 2 "$PLUMB" rng --count 5
expect_exit "rng: --count x exits 2" 2 "$PLUMB" rng --count x
grep -q -- "--count" "$TMP/err" && ok "bad --count is named" || fail "bad --count is named"
finish
