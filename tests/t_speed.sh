# Time to quality: plumb train --stop-at X (the first eval whose deciding
# metric reaches X ends the run; results.json says when), and plumb bench
# ctr --to-auc X on the cpu (the PyTorch loop needs torch: checked for
# syntax here, run by scripts/gpu-speed.sh on a GPU host).
. "$(dirname "$0")/lib.sh"
export OPENBLAS_CORETYPE=Haswell
A="train ctr --preset ctr-tiny --rows 1000 --threads 1 --health-interval 0 --eval-samples 4000"
"$PLUMB" $A --steps 1500 --eval-every 50 --stop-at 0.7 --out "$TMP/s" >"$TMP/s.out" 2>&1
st=$(jq .train.reached_step "$TMP/s/results.json")
[ "$(jq .train.reached "$TMP/s/results.json")" = true ] && [ "$st" -lt 1500 ] && [ $((st % 50)) = 0 ] \
  && ok "--stop-at 0.7: reached at step $st ($(jq .train.reached_s "$TMP/s/results.json") s)" || fail "--stop-at" "$(tail -3 "$TMP/s.out")"
[ "$(jq -s '[.[] | select(.type == "step")] | length' "$TMP/s/metrics.jsonl")" = "$st" ] && ok "the run stopped there ($st step lines)" \
  || fail "stop step" "$(jq -s '[.[] | select(.type == "step")] | length' "$TMP/s/metrics.jsonl") step lines"
a=$(jq -s "[.[] | select(.type == \"eval\" and .step == $st)][0].auc" "$TMP/s/metrics.jsonl")
b=$(jq -s "[.[] | select(.type == \"eval\" and .step < $st) | .auc] | max" "$TMP/s/metrics.jsonl")
awk -v a="$a" -v b="$b" 'BEGIN { exit !(a >= 0.7 && b != "null" && b < 0.7) }' && ok "the first eval at or above the target: auc $a (before: max $b)" \
  || fail "first eval" "at $st: $a, before: $b"
grep -q "^reached auc 0.7 at step $st" "$TMP/s.out" && ok "plumb train prints it" || fail "print" "$(tail -4 "$TMP/s.out")"
out=$("$PLUMB" $A --steps 10 --stop-at 0.7 --out "$TMP/x" 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "stop-at needs --eval-every" && ok "--stop-at without --eval-every: exit 2" || fail "no eval-every" "rc $rc $out"
out=$("$PLUMB" $A --steps 10 --eval-every 5 --stop-at high --out "$TMP/x" 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "\-\-stop-at: 'high'" && ok "--stop-at high: exit 2 naming it" || fail "bad stop-at" "rc $rc $out"
"$PLUMB" bench ctr --device cpu --preset ctr-tiny --rows 1000 --no-throughput --pool 20000 --auc-eval 4096 --to-auc 0.6 \
  --to-auc-batch 256 --to-auc-every 50 --to-auc-max-steps 600 --to-auc-lr 0.2 --json "$TMP/b.json" >"$TMP/b.out" 2>&1
[ "$(jq .to_auc.plumb.reached "$TMP/b.json")" = true ] && [ "$(jq .to_auc.batch "$TMP/b.json")" = 256 ] && \
  [ "$(jq '.to_auc.plumb.samples == .to_auc.plumb.steps * 256' "$TMP/b.json")" = true ] \
  && ok "bench ctr --to-auc 0.6: $(grep -m1 reached "$TMP/b.out" | sed 's/^ *//')" || fail "bench to-auc" "$(tail -3 "$TMP/b.out")"
if command -v python3 >/dev/null; then
  python3 -m py_compile "$(dirname "$0")/../bench/ctr_to_auc_pytorch.py" 2>"$TMP/py.err" && ok "bench/ctr_to_auc_pytorch.py compiles" || fail "py" "$(cat "$TMP/py.err")"
  python3 -c "import torch" 2>/dev/null || skip "pytorch to-auc loop" "no torch here (scripts/gpu-speed.sh runs it on the GPU host)"
else
  skip "pytorch to-auc loop" "no python3"
fi
finish
