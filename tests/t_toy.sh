# The toy workload (src/models/toy: an MLP regressor, and one with
# synchronised BatchNorm) through the same trainer as ctr: golden digests
# and eval metrics equal on 1 and 3 MPI ranks (toy-bn: the whole-batch
# path, exact statistics across ranks inside forward and backward, each
# shard folded into the fixed-point sums), checkpoint + resume on another
# rank count, and it learns. Real mpirun ranks.
. "$(dirname "$0")/lib.sh"
MPI="mpirun --oversubscribe"
G="--numerics golden --steps 60 --train-samples 4000 --eval-samples 600 --eval-batch 256 --micro-shard 16 --quiet --param-digest --health-interval 0"
dg() { awk '/^param_digest/{print $2}' "$1"; }
J() { jq -r "$2" "$1" 2>/dev/null; }
for p in toy-mlp toy-bn; do
  for np in 1 3; do
    $MPI -np $np "$PLUMB" train toy --preset $p $G --out "$TMP/$p-$np" >"$TMP/$p-$np.out" 2>&1 || fail "$p -np $np runs" "$(tail -3 "$TMP/$p-$np.out")"
  done
  a=$(dg "$TMP/$p-1.out"); b=$(dg "$TMP/$p-3.out")
  [ -n "$a" ] && [ "$a" = "$b" ] && ok "$p golden: 1 rank = 3 ranks ($a)" || fail "$p golden 1 vs 3" "$a vs $b"
  m1=$(J "$TMP/$p-1/results.json" '[.mse,.rmse]|tostring'); m3=$(J "$TMP/$p-3/results.json" '[.mse,.rmse]|tostring')
  [ -n "$m1" ] && [ "$m1" != "[null,null]" ] && [ "$m1" = "$m3" ] && ok "$p eval mse/rmse: 1 rank = 3 ranks $m1" || fail "$p eval 1 vs 3" "$m1 vs $m3"
  [ "$(J "$TMP/$p-3/results.json" '.checks[0].name')" = train-toy ] && [ "$(J "$TMP/$p-3/results.json" .train.workload)" = toy ] \
    && ok "$p: results.json names the workload (check train-toy)" || fail "$p results names" "$(J "$TMP/$p-3/results.json" '.checks[0].name')"
done
[ "$(dg "$TMP/toy-mlp-1.out")" != "$(dg "$TMP/toy-bn-1.out")" ] && ok "toy-mlp and toy-bn train different models" || fail "mlp vs bn digests"
# the BatchNorm model ran the whole-batch path and checkpoints its buffers
"$PLUMB" train toy --preset toy-bn ${G/--quiet/} --steps 2 --checkpoint-dir "$TMP/bnck" --out "$TMP/bnl" >"$TMP/bnl.out" 2>&1
ck=$(ls "$TMP/bnck"/*.plumb 2>/dev/null | tail -1)
[ -n "$ck" ] && grep -aq "b:bn.running_mean" "$ck" && grep -aq "u:fc1.weight" "$ck" && grep -aq "p:bn.weight" "$ck" \
  && ok "toy-bn checkpoint: parameter, buffer and momentum sections from the tensor list" || fail "toy-bn checkpoint sections" "$ck"
# checkpoint at step 30 on 3 ranks, resume to 60 on 1 rank and on 2: the uninterrupted digest
for p in toy-mlp toy-bn; do
  $MPI -np 3 "$PLUMB" train toy --preset $p ${G/--steps 60/--steps 30} --checkpoint-dir "$TMP/ck-$p" --out "$TMP/c-$p" >"$TMP/c-$p.out" 2>&1
  cp -r "$TMP/ck-$p" "$TMP/ck2-$p"
  "$PLUMB" train toy --preset $p $G --checkpoint-dir "$TMP/ck-$p" --resume --out "$TMP/r1-$p" >"$TMP/r1-$p.out" 2>&1
  $MPI -np 2 "$PLUMB" train toy --preset $p $G --checkpoint-dir "$TMP/ck2-$p" --resume --out "$TMP/r2-$p" >"$TMP/r2-$p.out" 2>&1
  a=$(dg "$TMP/r1-$p.out"); b=$(dg "$TMP/r2-$p.out"); want=$(dg "$TMP/$p-1.out")
  [ "$(J "$TMP/r1-$p/results.json" .train.start_step)" = 30 ] && [ -n "$a" ] && [ "$a" = "$want" ] && [ "$b" = "$want" ] \
    && ok "$p: checkpoint on 3 ranks at step 30, resumed on 1 and on 2 ranks: the uninterrupted digest" \
    || fail "$p resume" "start $(J "$TMP/r1-$p/results.json" .train.start_step); $a / $b vs $want; $(tail -2 "$TMP/r1-$p.out")"
done
# an injected OOM on one rank of a whole-batch model: every rank still runs the model (its
# statistics all-reduces match), the step is retried, the bits are the uninterrupted run's
$MPI -np 3 "$PLUMB" train toy --preset toy-bn $G --inject oom@7:1x2 --out "$TMP/oom" >"$TMP/oom.out" 2>&1
[ "$(dg "$TMP/oom.out")" = "$(dg "$TMP/toy-bn-1.out")" ] && ok "toy-bn: OOM injected twice on rank 1 of 3: retried, the same digest" \
  || fail "toy-bn OOM retry" "$(dg "$TMP/oom.out"); $(tail -3 "$TMP/oom.out")"
# fast numerics, 2 ranks, a model without a sparse region: the host gradient path = the device-collective path
F="--preset toy-bn --steps 40 --quiet --param-digest --health-interval 0"
$MPI -np 2 "$PLUMB" train toy $F --out "$TMP/fh" >"$TMP/fh.out" 2>&1
$MPI -np 2 -x PLUMB_TRAIN_DEVICE_COMM=host "$PLUMB" train toy $F --out "$TMP/fd" >"$TMP/fd.out" 2>&1
[ -n "$(dg "$TMP/fh.out")" ] && [ "$(dg "$TMP/fh.out")" = "$(dg "$TMP/fd.out")" ] && ok "toy-bn fast -np 2: host path = device-collective path" \
  || fail "toy fast paths" "$(dg "$TMP/fh.out") vs $(dg "$TMP/fd.out"); $(tail -2 "$TMP/fd.out")"
# it learns: the eval mse falls, far below the target's variance (fast, 2 ranks, eval every 100 steps)
$MPI -np 2 "$PLUMB" train toy --preset toy-bn --steps 600 --eval-every 100 --quiet --health-interval 0 --out "$TMP/learn" >"$TMP/learn.out" 2>&1 \
  || fail "toy-bn fast -np 2" "$(tail -3 "$TMP/learn.out")"
read -r first last < <(jq -s -r '[.[] | select(.type=="eval") | .mse] | "\(.[0]) \(.[-1])"' "$TMP/learn/checks/train-toy/metrics.jsonl")
awk -v a="$first" -v b="$last" 'BEGIN{exit !(b < 0.8 * a && b < 0.2)}' && ok "toy-bn learns: eval mse $first -> $last (the target's variance is ~0.7)" \
  || fail "toy-bn learns" "mse $first -> $last"
# --eval-data names a file toy never reads: refused, named (it was ignored silently)
"$PLUMB" train toy --steps 2 --eval-data /etc/hostname --out "$TMP/toy-evd" >"$TMP/evd.out" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q -- "--eval-data /etc/hostname" "$TMP/evd.out" && ok "toy --eval-data FILE: exit 2 naming it" \
  || fail "toy --eval-data FILE" "exit $rc: $(tail -2 "$TMP/evd.out")"
finish
