# plumb train ctr end to end: convergence on the synthetic teacher, golden
# bit-identity across rank counts and across a SIGKILL + resume on another
# rank count, exact fast eval on 1 vs 3 ranks, loss scaling with injected
# infs, OOM retry, SIGTERM checkpoint, Criteo files. Real mpirun ranks.
. "$(dirname "$0")/lib.sh"
J() { jq -r "$2" "$1" 2>/dev/null; }
MPI="mpirun --oversubscribe"
GOLD="--numerics golden --steps 200 --train-samples 100000 --eval-samples 2000 --quiet --param-digest"

# 1. ctr-tiny learns the teacher (the defaults; wall time printed, not asserted)
t0=$(date +%s.%N)
if "$PLUMB" train ctr --preset ctr-tiny --data synthetic --quiet --out "$TMP/conv" >"$TMP/conv.out" 2>&1; then
  t1=$(date +%s.%N)
  auc=$(J "$TMP/conv/results.json" .auc); tea=$(J "$TMP/conv/results.json" .teacher_auc)
  echo "     ctr-tiny: auc $auc, teacher $tea, $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b - a}') s wall"
  awk -v a="$auc" -v t="$tea" 'BEGIN{exit !(a >= 0.75 && t - a <= 0.05)}' && ok "ctr-tiny auc >= 0.75 and within 0.05 of the teacher" \
    || fail "ctr-tiny auc" "auc $auc teacher $tea"
  # loss falls: mean of the first 100 steps vs the last 100
  jq -s '[.[] | select(.type=="step") | .loss] | [(.[0:100] | add / length), (.[-100:] | add / length)]' \
    "$TMP/conv/checks/train-ctr/metrics.jsonl" >"$TMP/lf" && read -r a b < <(jq -r '"\(.[0]) \(.[1])"' "$TMP/lf")
  awk -v a="$a" -v b="$b" 'BEGIN{exit !(b < a - 0.03)}' && ok "loss falls ($a -> $b)" || fail "loss falls" "$a -> $b"
  for k in param_digest auc logloss accuracy; do
    [ "$(J "$TMP/conv/results.json" ".$k | type")" != "null" ] || fail "results.json has $k"
  done
  n=$(jq -s '[.[] | select(.type=="step" and .grad_norm != null and .loss_scale != null and .samples_per_s > 0 and .mem_peak > 0)] | length' "$TMP/conv/checks/train-ctr/metrics.jsonl")
  [ "$n" -eq 1500 ] && ok "metrics.jsonl: 1500 step rows with grad norm, scale, samples/s, memory" || fail "metrics rows" "$n"
else fail "ctr-tiny trains" "$(tail -5 "$TMP/conv.out")"; fi

# 2. golden digests on 1, 2, 3, 4 ranks
for np in 1 2 3 4; do
  $MPI -np $np "$PLUMB" train ctr $GOLD --out "$TMP/g$np" >"$TMP/g$np.out" 2>&1 || fail "golden -np $np runs" "$(tail -3 "$TMP/g$np.out")"
  d[$np]=$(awk '/^param_digest/{print $2}' "$TMP/g$np.out")
done
echo "     golden digest: ${d[1]}"
if [ -n "${d[1]}" ] && [ "${d[1]}" = "${d[2]}" ] && [ "${d[1]}" = "${d[3]}" ] && [ "${d[1]}" = "${d[4]}" ]; then
  ok "golden parameter digest identical on -np 1, 2, 3, 4"
else fail "golden digests" "1:${d[1]} 2:${d[2]} 3:${d[3]} 4:${d[4]}"; fi
[ "$(J "$TMP/g3/results.json" .param_digest)" = "${d[1]}" ] && ok "results.json param_digest" || fail "results.json param_digest"
# eval metrics identical across rank counts (golden model, exact aggregation)
[ "$(J "$TMP/g1/results.json" '[.auc,.logloss,.accuracy]|tostring')" = "$(J "$TMP/g4/results.json" '[.auc,.logloss,.accuracy]|tostring')" ] \
  && ok "eval metrics on 4 ranks equal 1 rank" || fail "eval metrics 1 vs 4"

# 3. SIGKILL at step >= 120 on 2 ranks, resume on 3: same digest
setsid $MPI -np 2 "$PLUMB" train ctr $GOLD --checkpoint-dir "$TMP/ck" --checkpoint-every 20 --out "$TMP/k1" >"$TMP/k1.out" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  n=$(grep -c '"type":"step"' "$TMP/k1/checks/train-ctr/metrics.jsonl" 2>/dev/null || true)
  [ "${n:-0}" -ge 121 ] && break; sleep 0.1
done
# SIGKILL the ranks (mpirun gives each its own process group) and mpirun itself
kids=$(pgrep -P "$pid" 2>/dev/null); kill -9 $kids "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
for _ in $(seq 1 50); do alive=0; for k in $kids; do kill -0 "$k" 2>/dev/null && alive=1; done; [ $alive -eq 0 ] && break; sleep 0.1; done
# the newest whole checkpoint once every rank is dead: the ranks may have written
# one more between the step count above and the kill, so that one is the resume point
last=$(ls "$TMP/ck" | grep -E '^ckpt-[0-9]{10}\.plumb$' | tail -1)
lastst=$(echo "$last" | sed -E 's/^ckpt-0*([0-9]+)\.plumb$/\1/')
echo "     killed after step ${n:-?}; newest checkpoint $last"
$MPI -np 3 "$PLUMB" train ctr $GOLD --checkpoint-dir "$TMP/ck" --checkpoint-every 20 --resume --out "$TMP/k2" >"$TMP/k2.out" 2>&1 \
  || fail "resume after SIGKILL runs" "$(tail -3 "$TMP/k2.out")"
dk=$(awk '/^param_digest/{print $2}' "$TMP/k2.out"); st=$(J "$TMP/k2/results.json" .train.start_step)
[ "${st:-0}" -ge 120 ] && [ "$st" -lt 200 ] && [ "$st" = "${lastst:-x}" ] && ok "resumed at step $st (the newest checkpoint)" \
  || fail "resume step" "start $st, newest checkpoint ${last:-none}"
[ -n "$dk" ] && [ "$dk" = "${d[1]}" ] && ok "SIGKILL on 2 ranks + resume on 3: digest identical" || fail "kill/resume digest" "$dk vs ${d[1]}"

# 4. fast eval on 1 and 3 ranks from the same checkpoint
F="--steps 30 --train-samples 50000 --eval-samples 9000 --eval-batch 1000 --quiet --checkpoint-dir $TMP/fk"
"$PLUMB" train ctr $F --out "$TMP/f0" >"$TMP/f0.out" 2>&1 || fail "fast run" "$(tail -3 "$TMP/f0.out")"
"$PLUMB" train ctr $F --resume --predictions "$TMP/pred.csv" --out "$TMP/f1" >/dev/null 2>&1
$MPI -np 3 "$PLUMB" train ctr $F --resume --out "$TMP/f3" >"$TMP/f3.out" 2>&1 || fail "fast eval -np 3" "$(tail -3 "$TMP/f3.out")"
m1=$(J "$TMP/f1/results.json" '[.auc,.logloss,.accuracy]|tostring'); m3=$(J "$TMP/f3/results.json" '[.auc,.logloss,.accuracy]|tostring')
[ -n "$m1" ] && [ "$m1" != "null" ] && [ "$m1" = "$m3" ] && ok "fast eval from one checkpoint: 1 rank = 3 ranks $m1" || fail "fast eval 1 vs 3" "$m1 vs $m3"
[ "$m1" = "$(J "$TMP/f0/results.json" '[.auc,.logloss,.accuracy]|tostring')" ] && ok "eval after resume = eval at the end of training" || fail "eval after resume"
# --predictions: one label,score line per eval sample; the AUC recomputed from it matches
python3 - "$TMP/pred.csv" "$(J "$TMP/f1/results.json" .auc)" >"$TMP/py" 2>&1 <<'PY'
import sys
rows = [l.split(",") for l in open(sys.argv[1]).read().split("\n")[1:] if l]
y = [int(a) for a, _ in rows]; s = [float(b) for _, b in rows]
order = sorted(range(len(s)), key=lambda i: s[i]); ranks = [0.0] * len(s); i = 0
while i < len(order):
    j = i
    while j + 1 < len(order) and s[order[j + 1]] == s[order[i]]: j += 1
    for k in range(i, j + 1): ranks[order[k]] = (i + j) / 2 + 1
    i = j + 1
P = sum(y); N = len(y) - P
auc = (sum(r for r, l in zip(ranks, y) if l) - P * (P + 1) / 2) / (P * N)
print(len(y), auc)
sys.exit(0 if len(y) == 9000 and abs(auc - float(sys.argv[2])) < 1e-4 else 1)
PY
[ $? -eq 0 ] && ok "--predictions: 9000 label,score lines, AUC recomputed $(cat "$TMP/py")" || fail "--predictions" "$(cat "$TMP/py")"

# 5. loss scaler: infs injected at steps 5 and 9 (0-based) skip exactly those, halve the scale; growth every 4
"$PLUMB" train ctr --precision fp16 --steps 15 --train-samples 20000 --eval-samples 1000 --quiet \
  --loss-scale-init 1024 --loss-scale-interval 4 --inject nan@5,nan@9 --out "$TMP/ls" >"$TMP/ls.out" 2>&1 || fail "fp16 run" "$(tail -3 "$TMP/ls.out")"
sk=$(jq -s -c '[.[] | select(.type=="step" and .skipped) | .step]' "$TMP/ls/checks/train-ctr/metrics.jsonl")
sc=$(jq -s -c '[.[] | select(.type=="step") | .loss_scale]' "$TMP/ls/checks/train-ctr/metrics.jsonl")
[ "$sk" = "[6,10]" ] && ok "injected infs skip exactly steps 6 and 10 (1-based)" || fail "skipped steps" "$sk"
[ "$sc" = "[1024,1024,1024,1024,2048,2048,1024,1024,1024,1024,512,512,512,512,1024]" ] \
  && ok "loss scale halves on inf, doubles after 4 clean steps" || fail "scale sequence" "$sc"
[ "$(J "$TMP/ls/results.json" .train.skipped_steps)" = 2 ] && ok "skipped steps in results.json" || fail "skipped steps in results"

# 6. OOM injected twice at step 3: retried, same golden result as no fault
"$PLUMB" train ctr --numerics golden --steps 8 --train-samples 20000 --eval-samples 1000 --quiet --param-digest --out "$TMP/o0" >"$TMP/o0.out" 2>&1
"$PLUMB" train ctr --numerics golden --steps 8 --train-samples 20000 --eval-samples 1000 --quiet --param-digest --inject oom@3x2 --out "$TMP/o1" >"$TMP/o1.out" 2>&1
grep -q "retrying (2/3)" "$TMP/o1.out" && [ "$(awk '/^param_digest/{print $2}' "$TMP/o0.out")" = "$(awk '/^param_digest/{print $2}' "$TMP/o1.out")" ] \
  && ok "OOM at step 3 retried twice, result unchanged" || fail "oom retry" "$(tail -3 "$TMP/o1.out")"

# 7. SIGTERM: checkpoint, clean exit, resume to the uninterrupted digest
"$PLUMB" train ctr --numerics golden --steps 400 --train-samples 100000 --eval-samples 1000 --quiet --checkpoint-dir "$TMP/tk" \
  --out "$TMP/t1" >"$TMP/t1.out" 2>&1 &
pid=$!
for _ in $(seq 1 600); do n=$(grep -c '"type":"step"' "$TMP/t1/checks/train-ctr/metrics.jsonl" 2>/dev/null || true); [ "${n:-0}" -ge 30 ] && break; sleep 0.1; done
kill -TERM $pid; wait $pid; rc=$?
ck=$(ls "$TMP/tk" 2>/dev/null | tail -1)
[ $rc -eq 0 ] && grep -q "interrupted at step" "$TMP/t1.out" && [ -n "$ck" ] && ok "SIGTERM: checkpoint $ck and exit 0" || fail "SIGTERM" "rc $rc; $(tail -3 "$TMP/t1.out")"
"$PLUMB" train ctr --numerics golden --steps 400 --train-samples 100000 --eval-samples 1000 --quiet --checkpoint-dir "$TMP/tk" \
  --resume --param-digest --out "$TMP/t2" >"$TMP/t2.out" 2>&1
"$PLUMB" train ctr --numerics golden --steps 400 --train-samples 100000 --eval-samples 1000 --quiet --param-digest --out "$TMP/t3" >"$TMP/t3.out" 2>&1
a=$(awk '/^param_digest/{print $2}' "$TMP/t2.out"); b=$(awk '/^param_digest/{print $2}' "$TMP/t3.out")
[ -n "$a" ] && [ "$a" = "$b" ] && ok "resume after SIGTERM = uninterrupted run" || fail "SIGTERM resume digest" "$a vs $b"

# 7b. a corrupted newest checkpoint is detected; resume falls back to the previous one
C="--numerics golden --train-samples 20000 --eval-samples 1000 --quiet --param-digest --checkpoint-dir $TMP/cc --checkpoint-every 10"
"$PLUMB" train ctr $C --steps 30 --inject corrupt-checkpoint@30 --out "$TMP/c1" >"$TMP/c1.out" 2>&1
"$PLUMB" train ctr $C --steps 40 --resume --out "$TMP/c2" >"$TMP/c2.out" 2>&1
"$PLUMB" train ctr --numerics golden --train-samples 20000 --eval-samples 1000 --quiet --param-digest --steps 40 --out "$TMP/c3" >"$TMP/c3.out" 2>&1
a=$(awk '/^param_digest/{print $2}' "$TMP/c2.out"); b=$(awk '/^param_digest/{print $2}' "$TMP/c3.out")
grep -q "ckpt-0000000030.plumb unusable" "$TMP/c2.out" && [ "$(J "$TMP/c2/results.json" .train.start_step)" = 20 ] && [ -n "$a" ] && [ "$a" = "$b" ] \
  && ok "corrupt newest checkpoint skipped, resumed from step 20, same result" || fail "corrupt checkpoint fallback" "$(tail -3 "$TMP/c2.out") $a $b"

# 8. Criteo files: synth-criteo, train on the TSV (gzip), a bad line names line and field
"$PLUMB" data synth-criteo --rows 6000 --out "$TMP/d.tsv.gz" >"$TMP/d.out" 2>&1 && grep -q "teacher auc 0\.[6-9]" "$TMP/d.out" \
  && ok "synth-criteo writes and reports the teacher auc" || fail "synth-criteo" "$(cat "$TMP/d.out")"
"$PLUMB" train ctr --data "$TMP/d.tsv.gz" --steps 20 --quiet --out "$TMP/df" >"$TMP/df.out" 2>&1 && grep -q "5400 train, 600 eval" "$TMP/df/results.json" \
  && ok "trains on a gzip'ed Criteo file (last 10% held out)" || fail "train on file" "$(tail -3 "$TMP/df.out")"
"$PLUMB" train ctr --data "$TMP/d.tsv.gz" --steps 2 --out "$TMP/dn" >"$TMP/dn.out" 2>&1 && grep -q "ctr ctr-tiny" "$TMP/dn.out" \
  && ! grep -qi "teacher" "$TMP/dn.out" && ! grep -rq "teacher" "$TMP/dn/results.json" "$TMP/dn/checks/train-ctr/metrics.jsonl" \
  && ok "file data (no teacher): no teacher AUC in the log, results.json or metrics.jsonl" || fail "teacher AUC on file data" "$(grep -i teacher "$TMP/dn.out" "$TMP/dn/results.json" | head -3)"
zcat "$TMP/d.tsv.gz" | head -100 >"$TMP/bad.tsv"; printf '1\t1\tzz\n' >>"$TMP/bad.tsv"; zcat "$TMP/d.tsv.gz" | sed -n 101,200p >>"$TMP/bad.tsv"
expect_exit "malformed line: exit 2" 2 "$PLUMB" train ctr --data "$TMP/bad.tsv" --steps 2 --quiet --out "$TMP/db"
grep -q "bad.tsv: line 101: I2 (column 3): 'zz' is not an integer" "$TMP/err" && ok "error names file, line and field" || fail "bad line message" "$(cat "$TMP/err")"
"$PLUMB" train ctr --data "$TMP/bad.tsv" --bad-lines skip --steps 2 --out "$TMP/ds" >"$TMP/ds.out" 2>&1 && grep -q "1 malformed lines skipped" "$TMP/ds.out" \
  && [ "$(J "$TMP/ds/results.json" .train.bad_lines_skipped)" = 1 ] \
  && ok "--bad-lines skip counts and reports" || fail "--bad-lines skip" "$(tail -3 "$TMP/ds.out")"
# config mismatch on resume is refused with both configurations shown
expect_exit "resume with another batch: exit 2" 2 "$PLUMB" train ctr $F --batch 128 --resume --out "$TMP/f9"
grep -q "another configuration" "$TMP/err" && ok "config hash mismatch is named" || fail "config mismatch message" "$(head -c 300 "$TMP/err")"

# 9. the fast gradient path (docs/TRAINING.md): 1 rank keeps the gradients on the device; the
# device-collective path (buckets from the grad-ready hook, padded sparse gather, coalesce on the
# device) runs on the cpu device with the host comm standing in for NCCL (PLUMB_TRAIN_DEVICE_COMM=host)
FB="--steps 40 --train-samples 20000 --eval-samples 1000 --quiet --param-digest --health-interval 0 --threads 1"
FX="--optimizer sgd --precision fp16 --inject nan@5,oom@9x4 --clip-grad-norm 0.05"
dg() { awk '/^param_digest/{print $2}' "$1"; }
# fast digests recorded before the device-resident step (commit 2907319), REC_A again after the
# fast sparse sum chunk became 128 (train_ops.h TRAIN_SPARSE_CHUNK); OpenBLAS kernels pinned
REC_A=cbfa531ec7b19273c34978d3df0acd79c1f4139c8b68b4591da7d41824f38f93
REC_X=aaccceb2cee3633fffedbe4c70b6a5922290fae727424e0fc980d2446faac0d7
export OPENBLAS_CORETYPE=Haswell
for i in 1 2; do
  "$PLUMB" train ctr $FB --out "$TMP/w1a$i" >"$TMP/w1a$i.out" 2>&1
  "$PLUMB" train ctr $FB $FX --out "$TMP/w1x$i" >"$TMP/w1x$i.out" 2>&1
done
[ "$(dg "$TMP/w1a1.out")" = $REC_A ] && [ "$(dg "$TMP/w1a2.out")" = $REC_A ] \
  && ok "1 rank fast (adamw fp32), twice: digest = main's before the change" || fail "1 rank fast digest" "$(dg "$TMP/w1a1.out") $(dg "$TMP/w1a2.out")"
[ "$(dg "$TMP/w1x1.out")" = $REC_X ] && [ "$(dg "$TMP/w1x2.out")" = $REC_X ] \
  && ok "1 rank fast (sgd fp16, inf skip, OOM split, clipping), twice: digest = main's" || fail "1 rank fast digest (fp16/split/clip)" "$(dg "$TMP/w1x1.out") $(dg "$TMP/w1x2.out")"
"$PLUMB" train ctr ${FB/--quiet/} --steps 1 --out "$TMP/w1l" 2>&1 | grep -q "1 rank: gradients stay on the device" \
  && ok "log names the path (1 rank: no exchange)" || fail "log line for the local path"
DC="env PLUMB_TRAIN_DEVICE_COMM=host PLUMB_NCCL_BUCKET_MB=0.0001"
$DC "$PLUMB" train ctr $FB --out "$TMP/w1d" >"$TMP/w1d.out" 2>&1
$DC "$PLUMB" train ctr $FB $FX --out "$TMP/w1dx" >"$TMP/w1dx.out" 2>&1
$DC "$PLUMB" train ctr ${FB/--quiet/} --steps 1 --out "$TMP/w1dl" 2>&1 | grep -q "standing in for NCCL, 4 buckets" \
  && ok "device-collective path: 4 gradient buckets from the hook" || fail "device path log" "$($DC "$PLUMB" train ctr ${FB/--quiet/} --steps 1 --out "$TMP/w1dl" 2>&1 | grep comm:)"
[ "$(dg "$TMP/w1d.out")" = $REC_A ] && [ "$(dg "$TMP/w1dx.out")" = $REC_X ] \
  && ok "1 rank, device-collective path (4 buckets = layers, gather, coalesce): the same digests" || fail "device path 1 rank" "$(dg "$TMP/w1d.out") $(dg "$TMP/w1dx.out")"
# 2 ranks: host path = device-collective path (fp32 and fp16 with power-of-two scale: the same sums)
for cfg in a x; do
  X=""; [ $cfg = x ] && X=$FX
  $MPI -np 2 "$PLUMB" train ctr $FB $X --out "$TMP/h2$cfg" >"$TMP/h2$cfg.out" 2>&1
  $MPI -np 2 -x PLUMB_TRAIN_DEVICE_COMM=host -x PLUMB_NCCL_BUCKET_MB=0.0001 "$PLUMB" train ctr $FB $X --out "$TMP/d2$cfg" >"$TMP/d2$cfg.out" 2>&1
  a=$(dg "$TMP/h2$cfg.out"); b=$(dg "$TMP/d2$cfg.out")
  [ -n "$a" ] && [ "$a" = "$b" ] && ok "-np 2 [${X:-adamw fp32}]: host path = device-collective path ($a)" || fail "-np 2 host vs device [$X]" "$a vs $b; $(tail -2 "$TMP/d2$cfg.out")"
done
# 3 ranks, device-collective path: converges and is deterministic run to run
R3="--steps 300 --train-samples 50000 --eval-samples 4000 --quiet --param-digest --health-interval 0"
for i in 1 2; do
  $MPI -np 3 -x PLUMB_TRAIN_DEVICE_COMM=host -x PLUMB_NCCL_BUCKET_MB=0.0001 "$PLUMB" train ctr $R3 --out "$TMP/d3$i" >"$TMP/d3$i.out" 2>&1 \
    || fail "-np 3 device path runs" "$(tail -3 "$TMP/d3$i.out")"
done
a=$(dg "$TMP/d31.out"); b=$(dg "$TMP/d32.out"); auc=$(J "$TMP/d31/results.json" .auc)
[ -n "$a" ] && [ "$a" = "$b" ] && ok "-np 3 device-collective path: same digest twice" || fail "-np 3 device determinism" "$a vs $b"
jq -s '[.[] | select(.type=="step") | .loss] | [(.[0:50] | add / length), (.[-50:] | add / length)]' "$TMP/d31/checks/train-ctr/metrics.jsonl" >"$TMP/lf3" \
  && read -r l0 l1 < <(jq -r '"\(.[0]) \(.[1])"' "$TMP/lf3")
awk -v a="$auc" -v x="$l0" -v y="$l1" 'BEGIN{exit !(a >= 0.7 && y < x - 0.02)}' && ok "-np 3 device path learns: auc $auc, loss $l0 -> $l1" \
  || fail "-np 3 device path learns" "auc $auc loss $l0 -> $l1"
n=$(jq -s '[.[] | select(.type=="step" and .comm_s >= 0 and .compute_s > 0 and .opt_s >= 0 and .grad_norm != null)] | length' "$TMP/d31/checks/train-ctr/metrics.jsonl")
[ "$n" -eq 300 ] && ok "metrics: compute/comm/opt timings and the grad norm on every step" || fail "metrics timings" "$n rows"
# -np 3 host path twice (the other fast multi-rank path)
for i in 1 2; do $MPI -np 3 "$PLUMB" train ctr $FB $FX --out "$TMP/h3$i" >"$TMP/h3$i.out" 2>&1; done
a=$(dg "$TMP/h31.out"); b=$(dg "$TMP/h32.out")
[ -n "$a" ] && [ "$a" = "$b" ] && ok "-np 3 host path (fp16, inf skip, OOM split): same digest twice" || fail "-np 3 host determinism" "$a vs $b"
# the device feed (the GPU data path: pinned buffers, build threads, copy stream) on the cpu device:
# the same batches, so the same digests; with the OOM split, the device path, and a rollback
FD="env PLUMB_TRAIN_DEVFEED=1"
$FD "$PLUMB" train ctr $FB --out "$TMP/fd1" >"$TMP/fd1.out" 2>&1
$FD "$PLUMB" train ctr $FB $FX --out "$TMP/fd2" >"$TMP/fd2.out" 2>&1
[ "$(dg "$TMP/fd1.out")" = $REC_A ] && [ "$(dg "$TMP/fd2.out")" = $REC_X ] \
  && ok "device feed, 1 rank: the same digests (incl. inf skip, OOM split on device slices)" || fail "device feed 1 rank" "$(dg "$TMP/fd1.out") $(dg "$TMP/fd2.out"); $(tail -2 "$TMP/fd2.out")"
$MPI -np 2 -x PLUMB_TRAIN_DEVFEED=1 -x PLUMB_TRAIN_DEVICE_COMM=host -x PLUMB_NCCL_BUCKET_MB=0.0001 "$PLUMB" train ctr $FB $FX --out "$TMP/fd3" >"$TMP/fd3.out" 2>&1
[ -n "$(dg "$TMP/fd3.out")" ] && [ "$(dg "$TMP/fd3.out")" = "$(dg "$TMP/h2x.out")" ] \
  && ok "-np 2 device feed + device-collective path = host loader + host path" || fail "-np 2 feed + device path" "$(dg "$TMP/fd3.out") vs $(dg "$TMP/h2x.out")"
RB="--inject nan@15,nan@16,nan@17,nan@18 --max-bad-steps 3 --checkpoint-every 10"
"$PLUMB" train ctr $FB $RB --checkpoint-dir "$TMP/rb0" --out "$TMP/rb0" >"$TMP/rb0.out" 2>&1
$FD "$PLUMB" train ctr ${FB/--quiet/} $RB --checkpoint-dir "$TMP/rb1" --out "$TMP/rb1" >"$TMP/rb1.out" 2>&1
grep -q "rolled back from step 19 to the checkpoint at step 10" "$TMP/rb1.out" && [ "$(dg "$TMP/rb0.out")" = $REC_A ] && [ "$(dg "$TMP/rb1.out")" = $REC_A ] \
  && ok "device feed restarts after a rollback (4 infs, back to step 10): the clean run's digest, as the host loader" || fail "feed rollback" "$(dg "$TMP/rb0.out") vs $(dg "$TMP/rb1.out"); $(grep -i "roll\|error" "$TMP/rb1.out" | head -3)"
# a device that is not the cpu (the fake hip plugin, tests/fake_gpu.c: the cpu backend as "hip"):
# one GPU per local rank, the device feed, auto falls back to MPI when RCCL does not load (and says so),
# --comm nccl fails naming the library; the bits equal the cpu's with the feed
FAKE="$PLUMB_BUILD/tests/libfake_gpu.so"
if [ -f "$FAKE" ]; then
  mkdir -p "$TMP/fbin" "$TMP/fplug"; cp "$PLUMB" "$TMP/fbin/plumb"; ln -sf "$FAKE" "$TMP/fplug/libplumb-hip.so"
  $MPI -np 2 -x FAKE_GPU_COUNT=1 -x PLUMB_BACKEND_PATH="$TMP/fplug" "$TMP/fbin/plumb" train ctr $FB --device hip --out "$TMP/fk1" >"$TMP/fk1.out" 2>&1
  grep -q "2 ranks on this host but 1 visible hip device (ROCR_VISIBLE_DEVICES=(unset)): one rank per GPU" "$TMP/fk1.out" \
    && ok "2 ranks, 1 visible GPU: the error names the visibility variable" || fail "rank-to-GPU error" "$(grep "plumb train" "$TMP/fk1.out" | head -2)"
  $MPI -np 2 -x FAKE_GPU_COUNT=2 -x PLUMB_BACKEND_PATH="$TMP/fplug" "$TMP/fbin/plumb" train ctr ${FB/--quiet/} --device hip --out "$TMP/fk2" >"$TMP/fk2.out" 2>&1
  grep -q "data: device feed" "$TMP/fk2.out" && grep -q "comm: mpi, gradients staged through host memory \[auto: RCCL (librccl.so.1) not loadable" "$TMP/fk2.out" \
    && ok "GPU, 2 ranks, no RCCL: device feed, auto falls back to MPI and says why" || fail "fake GPU paths" "$(grep -E "comm:|data:|error" "$TMP/fk2.out" | head -3)"
  $MPI -np 2 -x PLUMB_TRAIN_DEVFEED=1 "$PLUMB" train ctr $FB --out "$TMP/fk3" >"$TMP/fk3.out" 2>&1
  [ -n "$(dg "$TMP/fk2.out")" ] && [ "$(dg "$TMP/fk2.out")" = "$(dg "$TMP/fk3.out")" ] && [ "$(dg "$TMP/fk2.out")" = "$(dg "$TMP/h2a.out")" ] \
    && ok "-np 2 on hip:0/hip:1 (fake) = the cpu with the feed = the cpu's loader" || fail "fake GPU digest" "$(dg "$TMP/fk2.out") vs $(dg "$TMP/fk3.out") vs $(dg "$TMP/h2a.out")"
  FAKE_GPU_COUNT=1 PLUMB_BACKEND_PATH="$TMP/fplug" expect_exit "--comm nccl without RCCL: exit 3" 3 "$TMP/fbin/plumb" train ctr $FB --device hip --comm nccl --out "$TMP/fk4"
  grep -q "comm nccl: RCCL (librccl.so.1) not loadable" "$TMP/err" && ok "--comm nccl names the missing library" || fail "--comm nccl message" "$(cat "$TMP/err")"
fi
# synthetic data generated into memory at open (a run over a whole epoch, or
# a GPU) gives the samples generated per access: the same digest
SM="--preset ctr-tiny --steps 50 --train-samples 10000 --eval-samples 2000 --param-digest --health-interval 0 --threads 1"
"$PLUMB" train ctr $SM --out "$TMP/sm1" >"$TMP/sm1.out" 2>&1
PLUMB_SYNTH_MEM_MB=0 "$PLUMB" train ctr $SM --out "$TMP/sm2" >"$TMP/sm2.out" 2>&1
grep -q "generated into memory" "$TMP/sm1.out" && grep -q "generated per access" "$TMP/sm2.out" \
  && [ -n "$(dg "$TMP/sm1.out")" ] && [ "$(dg "$TMP/sm1.out")" = "$(dg "$TMP/sm2.out")" ] \
  && ok "synthetic data in memory = per access (digest $(dg "$TMP/sm1.out" | cut -c1-16))" \
  || fail "synthetic in memory" "$(grep -h "synthetic\|param_digest" "$TMP/sm1.out" "$TMP/sm2.out")"
unset OPENBLAS_CORETYPE
expect_exit "--comm nccl on the cpu device: exit 2" 2 "$PLUMB" train ctr --comm nccl --steps 2 --quiet --out "$TMP/nc"
grep -q "comm nccl: device cpu is not a cuda or hip GPU" "$TMP/err" && ok "--comm nccl on cpu names the device" || fail "--comm nccl message" "$(cat "$TMP/err")"
finish
