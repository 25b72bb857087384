# Parameter digests of plumb train ctr, recorded on main before the engine
# became workload-neutral (main 346f1d0) and kept here so any change to the
# trainer that moves a bit shows up: golden fp32 and bf16 on 1, 2, 3 ranks for
# ctr-tiny and dlrm-kaggle (small tables, few steps), a golden checkpoint +
# resume on another rank count, and cpu fast-mode digests (OpenBLAS kernels
# pinned) of the host loader, the host and the device-collective gradient
# paths and the device feed.
# RECORD=1 tests/run.sh build t_engine_digests prints the table instead.
. "$(dirname "$0")/lib.sh"
MPI="mpirun --oversubscribe"
export OPENBLAS_CORETYPE=Haswell
COMMON="--train-samples 6000 --eval-samples 500 --quiet --param-digest --health-interval 0"
TINY="--preset ctr-tiny --rows 1000 --steps 12 --numerics golden $COMMON"
KAG="--preset dlrm-kaggle --rows 1000 --steps 3 --batch 512 --numerics golden $COMMON"
FAST="--preset ctr-tiny --rows 1000 --steps 20 --threads 1 $COMMON"
FASTX="--optimizer sgd --precision fp16 --inject nan@5,oom@9x4 --clip-grad-norm 0.05"
declare -A REC=(
  [tiny-fp32]=99d65ef591115810475e24b232e3c9c7bc92cafa11efa07d4527b21d5a019201
  [tiny-bf16]=adff76968642aed2ff44546fe5976411f470402003ed8f3bec3e303acc6ee308
  [kaggle-fp32]=c6b79515b76a1c1520ce8a93834e0a79914b94cfaed2df7a50b15bccc082eb8f
  [kaggle-bf16]=d85af1dcd7c7898248dc284b77ba9038f16eaa9a46842cc9c472ae413aa9f515
  [tiny-resume]=99d65ef591115810475e24b232e3c9c7bc92cafa11efa07d4527b21d5a019201
  [fast-1]=aa17d41b31b3c1f074796f7032708f16deb205b94e3273af7ca9e05c6f3e467c
  [fast-1x]=2c2acc62c7581f4d49ecbcaef340e954bfdf0d4bb749c2dd342e40a04fa08212
  [fast-2host]=fc302e97ed235301bb103db28f413e4df4283c306fba6cdfa8aa0097f2caeb04
  [fast-2dev]=fc302e97ed235301bb103db28f413e4df4283c306fba6cdfa8aa0097f2caeb04
  [fast-2feed-x]=b6013a103ffd4e45f32b4ee69645a3cbe1925326fd758daf153355a5f6e8f3d4
  [fast-bf16]=3a868ee3982dddcde969aefe7a40423afd88bf53114155c51a08a05163a7db0f
  [fast-queued]=b183ae1e39b167ba7cc739c9979e9fe67cbc8feefb70d33490bbd0ac72f1dc03
)
dg() { awk '/^param_digest/{print $2}' "$1"; }
check() { # NAME DIGEST
  if [ -n "${RECORD:-}" ]; then echo "  [$1]=$2"; return; fi
  [ -n "$2" ] && [ "$2" = "${REC[$1]}" ] && ok "$1: $2" || fail "$1" "got '${2}', recorded ${REC[$1]}"
}
run() { # OUTNAME NP ARGS...
  local o=$1 np=$2; shift 2
  $MPI -np "$np" "$PLUMB" train ctr "$@" --out "$TMP/$o" >"$TMP/$o.out" 2>&1 || echo "run $o failed: $(tail -3 "$TMP/$o.out")" >&2
}

for p in fp32 bf16; do
  for w in tiny kaggle; do
    A=$TINY; [ $w = kaggle ] && A=$KAG
    for np in 1 2 3; do run "$w-$p-$np" $np $A --precision $p; done
    a=$(dg "$TMP/$w-$p-1.out"); b=$(dg "$TMP/$w-$p-2.out"); c=$(dg "$TMP/$w-$p-3.out")
    [ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" = "$c" ] && ok "$w golden $p: 1 = 2 = 3 ranks" || fail "$w golden $p ranks" "$a $b $c"
    check "$w-$p" "$a"
  done
done
# golden checkpoint at step 6 on 3 ranks, resumed to step 12 on 2
run ck1 3 $TINY --steps 6 --checkpoint-dir "$TMP/ck"
run ck2 2 $TINY --checkpoint-dir "$TMP/ck" --resume
[ "$(jq -r .train.start_step "$TMP/ck2/results.json")" = 6 ] && ok "resume starts at step 6" || fail "resume" "$(tail -3 "$TMP/ck2.out")"
check tiny-resume "$(dg "$TMP/ck2.out")"
[ "$(dg "$TMP/ck2.out")" = "$(dg "$TMP/tiny-fp32-1.out")" ] && ok "resume on another rank count = uninterrupted run" || fail "resume digest"

# fast numerics on the cpu
run f1 1 $FAST
run f1x 1 $FAST $FASTX
run f2h 2 $FAST
$MPI -np 2 -x PLUMB_TRAIN_DEVICE_COMM=host -x PLUMB_NCCL_BUCKET_MB=0.0001 "$PLUMB" train ctr $FAST --out "$TMP/f2d" >"$TMP/f2d.out" 2>&1
$MPI -np 2 -x PLUMB_TRAIN_DEVFEED=1 -x PLUMB_TRAIN_DEVICE_COMM=host "$PLUMB" train ctr $FAST $FASTX --out "$TMP/f2x" >"$TMP/f2x.out" 2>&1
run fb 1 $FAST --precision bf16
check fast-1 "$(dg "$TMP/f1.out")"
check fast-1x "$(dg "$TMP/f1x.out")"
check fast-2host "$(dg "$TMP/f2h.out")"
check fast-2dev "$(dg "$TMP/f2d.out")"
check fast-2feed-x "$(dg "$TMP/f2x.out")"
check fast-bf16 "$(dg "$TMP/fb.out")"

# the queued step (1 rank, fast, plain SGD: outcomes read one step behind,
# the update gated on the device) against the synchronous step: the same
# digests and the same metrics lines, through the loader and the device
# feed, with non-finite steps skipped and a rollback they trigger
QS="$FAST --optimizer sgd"
QU="$QS --fuse-sparse-sgd no" # the list path (auto, the default, fuses)
steps() { jq -c 'select(.type != "health") | [.type, .step, .loss, .grad_norm, .skipped, .skipped_total, .auc]' "$1"/checks/train-*/metrics.jsonl; }
for v in 0 1; do
  PLUMB_TRAIN_QUEUE=$v "$PLUMB" train ctr $QU --out "$TMP/q$v" >"$TMP/q$v.out" 2>&1
  PLUMB_TRAIN_QUEUE=$v PLUMB_TRAIN_DEVFEED=1 "$PLUMB" train ctr $QU --precision bf16 --out "$TMP/qf$v" >"$TMP/qf$v.out" 2>&1
  PLUMB_TRAIN_QUEUE=$v "$PLUMB" train ctr $QU --inject nan@7,nan@8,nan@9 --max-bad-steps 2 --checkpoint-dir "$TMP/qck$v" \
    --checkpoint-every 4 --eval-every 5 --out "$TMP/qn$v" >"$TMP/qn$v.out" 2>&1
done
"$PLUMB" train ctr ${QS/--quiet/} --steps 2 --out "$TMP/qlog" 2>&1 | grep -q "step: queued" && ok "sgd on 1 rank: the step is queued" \
  || fail "queued step" "no 'step: queued' line"
check fast-queued "$(dg "$TMP/q1.out")"
for r in q qf qn; do
  a=$(dg "$TMP/${r}0.out"); b=$(dg "$TMP/${r}1.out")
  [ -n "$a" ] && [ "$a" = "$b" ] && ok "$r: queued = synchronous digest $a" || fail "$r queued digest" "sync '$a' queued '$b'"
  [ "$(steps "$TMP/${r}0")" = "$(steps "$TMP/${r}1")" ] && ok "$r: queued = synchronous metrics lines" \
    || fail "$r metrics" "$(diff <(steps "$TMP/${r}0") <(steps "$TMP/${r}1") | head -5)"
done
# real non-finite gradients (--lr 400 makes them from step 6 on, --inject only
# sets the flag): the queued step reads its found-inf flag off the norm
# (found_of_sumsq) where scale_check's pass would find nothing else; that,
# the pass kept (PLUMB_FOUND_OF_NORM=0) and the synchronous step skip the
# same steps and leave the same bits, in fp32 and bf16, list and fused
NF="$QS --steps 12 --lr 400 --max-bad-steps 100"
for o in "--fuse-sparse-sgd no" "--fuse-sparse-sgd no --precision bf16" "--fuse-sparse-sgd auto"; do
  rm -rf "$TMP/nfn" "$TMP/nfp" "$TMP/nfs"
  "$PLUMB" train ctr $NF $o --out "$TMP/nfn" >"$TMP/nfn.out" 2>&1
  PLUMB_FOUND_OF_NORM=0 "$PLUMB" train ctr $NF $o --out "$TMP/nfp" >"$TMP/nfp.out" 2>&1
  PLUMB_TRAIN_QUEUE=0 "$PLUMB" train ctr $NF $o --out "$TMP/nfs" >"$TMP/nfs.out" 2>&1
  a=$(dg "$TMP/nfn.out"); b=$(dg "$TMP/nfp.out"); c=$(dg "$TMP/nfs.out")
  k=$(jq -s '[.[] | select(.type == "step" and .skipped)] | length' "$TMP"/nfn/checks/train-*/metrics.jsonl)
  [ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" = "$c" ] && [ "${k:-0}" -ge 3 ] \
    && [ "$(steps "$TMP/nfn")" = "$(steps "$TMP/nfp")" ] && [ "$(steps "$TMP/nfn")" = "$(steps "$TMP/nfs")" ] \
    && ok "real non-finite gradients ($o): the flag off the norm = scale_check's = synchronous ($k steps skipped, $a)" \
    || fail "flag off the norm ($o)" "norm '$a' pass '$b' sync '$c', $k skipped; $(diff <(steps "$TMP/nfn") <(steps "$TMP/nfp") | head -3)"
done
# the queued outcome read back by two copies (PLUMB_TRAIN_STATUS=copy) instead of
# the device's one write (status_to_host): the same digest and metrics lines
PLUMB_TRAIN_STATUS=copy "$PLUMB" train ctr $QU --inject nan@7,nan@8,nan@9 --max-bad-steps 2 --checkpoint-dir "$TMP/qckc" \
  --checkpoint-every 4 --eval-every 5 --out "$TMP/qnc" >"$TMP/qnc.out" 2>&1
a=$(dg "$TMP/qn1.out"); b=$(dg "$TMP/qnc.out")
[ -n "$a" ] && [ "$a" = "$b" ] && [ "$(steps "$TMP/qn1")" = "$(steps "$TMP/qnc")" ] \
  && ok "queued outcome by one write = by two copies (digest, metrics lines)" || fail "status copy" "write '$a' copies '$b'"
# the sparse SGD fused into the embedding backward (--fuse-sparse-sgd auto):
# the same digests and metrics lines (the gradient norm over the list the
# fused backward keeps), queued and synchronous, also with non-finite steps
# (the touched rows put back) and the rollback they trigger
for v in 0 1; do
  PLUMB_TRAIN_QUEUE=$v "$PLUMB" train ctr $QS --fuse-sparse-sgd auto --out "$TMP/z$v" >"$TMP/z$v.out" 2>&1
  PLUMB_TRAIN_QUEUE=$v PLUMB_TRAIN_DEVFEED=1 "$PLUMB" train ctr $QS --fuse-sparse-sgd auto --precision bf16 \
    --out "$TMP/zf$v" >"$TMP/zf$v.out" 2>&1
  PLUMB_TRAIN_QUEUE=$v "$PLUMB" train ctr $QS --fuse-sparse-sgd auto --inject nan@7,nan@8,nan@9 --max-bad-steps 2 \
    --checkpoint-dir "$TMP/zck$v" --checkpoint-every 4 --eval-every 5 --out "$TMP/zn$v" >"$TMP/zn$v.out" 2>&1
  for r in q qf qn; do
    z=z${r#q}
    a=$(dg "$TMP/${r}$v.out"); b=$(dg "$TMP/${z}$v.out")
    [ -n "$a" ] && [ "$a" = "$b" ] && ok "$r (queue $v): fused sparse SGD = unfused digest $a" \
      || fail "$r fused digest (queue $v)" "unfused '$a' fused '$b'"
    [ "$(steps "$TMP/${r}$v")" = "$(steps "$TMP/${z}$v")" ] && ok "$r (queue $v): fused = unfused metrics lines" \
      || fail "$r fused metrics (queue $v)" "$(diff <(steps "$TMP/${r}$v") <(steps "$TMP/${z}$v") | head -5)"
  done
done
grep -q '"sparse_sgd": "fused"' "$TMP"/z1/results.json && ok "results.json records the fused sparse SGD" \
  || fail "fused recorded" "$(grep -o '"sparse_sgd[^,]*' "$TMP"/z1/results.json)"
grep -q '"sparse_sgd": "list"' "$TMP"/q1/results.json && ok "results.json records the list path (--fuse-sparse-sgd no)" \
  || fail "list recorded" "$(grep -o '"sparse_sgd[^,]*' "$TMP"/q1/results.json)"
grep -q "rolled back from step 10 to the checkpoint at step 8" "$TMP/qn1.out" && ok "queued: the rollback after 3 non-finite steps" \
  || fail "queued rollback" "$(grep -i roll "$TMP/qn1.out")"
[ "$(jq -s '[.[] | select(.type == "step" and .skipped)] | length' "$TMP"/qn1/checks/train-*/metrics.jsonl)" = 3 ] \
  && ok "queued: 3 skipped steps recorded" || fail "queued skips" "$(steps "$TMP/qn1" | grep true)"
finish
