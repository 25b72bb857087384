#!/usr/bin/env bash
# ctr on the GPU (issue 5), on the GPU host, from the folder
# scripts/gpu-prep.sh filled (prebuilt build/, scripts/, bench/, fallback/):
#   tests    PLUMB_TEST_DEVICE=cuda plumb-tests gpu_train|ctr_dev_batch|nccl
#   golden   dlrm-kaggle --rows 1000, 50 golden steps: digest on cuda == cpu
#   bench    plumb bench ctr --vs-pytorch (the STAGE's configurations)
#   auc      fast-mode AUC on cuda, cpu and PyTorch after a fixed budget
#   nccl     the step with the NCCL all-reduce, world size 1
# Usage: bash scripts/gputrain-check.sh [STAGE] where STAGE is 1 (the two
# headline configurations), 2 (compact: dw GEMMs), 3 (compact: the
# fast-mode sparse sums, tests + both headline ratios in one run), 4 (the
# kernel rework: tests, golden, profile, both ratios), final (the issue 5
# evidence in one call, AUC in fp32 and bf16), train (plumb train's
# device-resident fast step: --comm self vs nccl on 1 rank and under mpirun
# -np 1 give one digest; -np 2 nccl = mpi when 2 GPUs are visible; samples/s
# of train next to bench ctr's), or prof (kernel times of plumb and PyTorch
# through build/libplumb-kprof.so), or accept (plumb accept's train-ctr check
# on cuda: golden digest = cpu's, fast AUC within the cpu's seed spread).
# Writes logs and JSON under $OUT. NVLink multicast stays off.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
STAGE=${1:-1}
OUT=${OUT:-$here/gputrain-out}
mkdir -p "$OUT"
LOG=$OUT/gputrain.log
: >"$LOG"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
log() { echo "$*" | tee -a "$LOG"; }
step() { # step NAME TIMEOUT_S CMD...
  local name=$1 t=$2; shift 2
  log ""; log "==== $name: $*"
  local t0=$SECONDS
  timeout "$t" "$@" >>"$LOG" 2>&1
  local rc=$?
  log "==== $name: exit $rc ($((SECONDS - t0)) s)"
}
log "gputrain-check stage $STAGE, $(cat COMMIT 2>/dev/null) on $(hostname) at $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv 2>&1 | tee -a "$LOG"
# libraries: the host's, then carried fallbacks for what it lacks (as gpu-check.sh)
. "$here/scripts/gpu-libs.sh"
for f in build/plumb build/plumb-tests build/libplumb-cuda.so; do ldd "$f" | grep "not found"; done | tee -a "$LOG"
export PLUMB_BACKEND_PATH=$here/build
# the whole GPU suite first, unfiltered: a red suite stops the script with a verdict
. "$here/scripts/gpu-suite.sh"
# NCCL: the image's PyTorch brings libnccl.so.2 in its pip package
nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
[ -n "$nccl" ] && [ -e "$nccl" ] && export PLUMB_NCCL_LIB=$nccl
log "PLUMB_NCCL_LIB=${PLUMB_NCCL_LIB:-unset}; torch $(python3 -c 'import torch;print(torch.__version__)' 2>/dev/null)"
W=/tmp/gputrain; mkdir -p $W
B="build/plumb bench ctr --device cuda --workdir $W --threads 12"

if [ "$STAGE" = 1 ]; then
  step tests 150 env PLUMB_TEST_DEVICE=cuda build/plumb-tests gpu_train
  step tests_feed 60 env PLUMB_TEST_DEVICE=cuda build/plumb-tests ctr_dev_batch
  step tests_nccl 60 env PLUMB_TEST_DEVICE=cuda build/plumb-tests nccl
  step golden 150 $B --no-throughput --golden-steps 50 --golden-rows 1000 --golden-batch 2048 --pool 65536 \
    --json "$OUT/golden.json"
  step bench_bf16 200 $B --precision bf16 --batch 32768 --vs-pytorch --torch-modes compile --json "$OUT/bench_bf16.json"
  step bench_fp32 120 $B --precision fp32 --batch 2048 --vs-pytorch --torch-modes eager --json "$OUT/bench_fp32.json"
  step auc 150 $B --no-throughput --auc-steps 400 --auc-batch 2048 --auc-eval 131072 --vs-pytorch --torch-modes eager \
    --json "$OUT/auc.json"
  step nccl 60 $B --comm nccl --precision fp32 --batch 2048 --steps 100 --leak-steps 0 --json "$OUT/nccl.json"
elif [ "$STAGE" = train ]; then
  # plumb train ctr on the GPU, fast fp32 (loss scale 1): the local path and the
  # NCCL path (0.5 MiB buckets: 3 for dlrm-kaggle's 1.9 MB of dense gradients,
  # enqueued from the grad-ready hook during backward) on 1 rank and under
  # mpirun -np 1 must give one parameter digest
  TR="build/plumb train ctr --preset dlrm-kaggle --rows 100000 --device cuda --precision fp32 --batch 2048 --steps 300
      --train-samples 2000000 --eval-samples 65536 --param-digest --health-interval 0"
  XS=""; for v in PLUMB_NCCL_LIB PLUMB_BACKEND_PATH LD_LIBRARY_PATH; do [ -n "${!v:-}" ] && XS="$XS -x $v"; done
  step train_self 120 $TR --comm self --out $W/tr_self
  step train_nccl 120 env PLUMB_NCCL_BUCKET_MB=0.5 $TR --comm nccl --out $W/tr_nccl
  step train_mpi1 120 env PLUMB_NCCL_BUCKET_MB=0.5 mpirun -np 1 $XS -x PLUMB_NCCL_BUCKET_MB $TR --comm nccl --out $W/tr_mpi1
  step train_auto_bf16 120 $TR --precision bf16 --batch 32768 --steps 100 --out $W/tr_bf16
  ngpu=$(nvidia-smi -L 2>/dev/null | grep -c GPU)
  if [ "${ngpu:-0}" -ge 2 ]; then
    step train_np2_nccl 150 mpirun -np 2 $XS $TR --comm nccl --out $W/tr_np2n
    step train_np2_mpi 150 mpirun -np 2 $XS $TR --comm mpi --out $W/tr_np2m
  fi
  step bench_ref 90 $B --precision fp32 --batch 2048 --steps 200 --leak-steps 0 --json "$OUT/bench_fp32.json"
  # results.json fields without jq (not on every GPU image)
  jf() { python3 -c 'import json,sys
try:
    d = json.load(open(sys.argv[1]))
    for k in sys.argv[2].split("."): d = d[k]
    print(d)
except Exception: print("")' "$W/$1/results.json" "$2"; }
  for r in tr_self tr_nccl tr_mpi1 tr_bf16 tr_np2n tr_np2m; do
    [ -f "$W/$r/results.json" ] && log "$r: digest $(jf $r param_digest) auc $(jf $r auc) samples/s $(jf $r train.samples_per_s) data wait $(jf $r train.data_wait_frac)"
  done
  a=$(jf tr_self param_digest); b=$(jf tr_nccl param_digest); c=$(jf tr_mpi1 param_digest)
  [ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" = "$c" ] && log "VERDICT train: PASS self = nccl = mpirun -np 1 nccl ($a)" \
    || log "VERDICT train: FAIL digests self $a nccl $b mpi1 $c"
  if [ "${ngpu:-0}" -ge 2 ]; then
    a=$(jf tr_np2n param_digest); b=$(jf tr_np2m param_digest)
    [ -n "$a" ] && [ "$a" = "$b" ] && log "VERDICT train np2: PASS nccl = mpi ($a)" || log "VERDICT train np2: FAIL nccl $a mpi $b"
  fi
  grep -h "comm:" "$LOG" | sort -u | tee -a "$OUT/comm-lines.txt"
elif [ "$STAGE" = accept ]; then
  # issue 5 item 4: ctr-tiny fast on cuda (seed 1) and on the cpu (seeds 1..3);
  # pass when |AUC_cuda - AUC_cpu(seed 1)| <= max(cpu spread, 0.002), the AUC
  # clears 0.75 and the 60-step golden digests are equal
  step accept_train 300 build/plumb accept --device cuda --checks train-ctr --out $W/acc_train
  cp "$W/acc_train/results.json" "$OUT/accept_train.json" 2>/dev/null
  python3 - "$W/acc_train/results.json" <<'PY' 2>&1 | tee -a "$LOG"
import json, sys
for c in json.load(open(sys.argv[1]))["checks"]:
    if c["name"] != "train-ctr": continue
    m = {x["name"]: x["value"] for x in c["metrics"]}
    d = c["details"].get("fast_auc_vs_cpu", {})
    print(f"VERDICT accept train-ctr {c['device']}: {c['status'].upper()} {c.get('reason', '')}")
    print(f"  auc {m.get('auc')} cpu {d.get('auc_cpu')} (seeds {d.get('seeds')}) spread {d.get('spread')} "
          f"tolerance {d.get('tolerance')} diff {d.get('diff')}; golden match {m.get('golden_digest_match')}; "
          f"cuda {m.get('samples_per_s')} samples/s, cpu reference {m.get('cpu_reference_train_s')} s")
PY
elif [ "$STAGE" = 3 ]; then
  # stage 3: the chunked fast-mode sparse sums (hot rows); one short call
  P="--pool 262144"
  step tests 45 env PLUMB_TEST_DEVICE=cuda build/plumb-tests gpu_train
  step tests_order 20 env PLUMB_TEST_DEVICE=cuda build/plumb-tests train_ops_sparse
  step prof 30 env PLUMB_TRAIN_PROF=1 $B $P --precision bf16 --batch 32768 --steps 10 --warmup 3 --leak-steps 0
  step bench_bf16 130 $B $P --precision bf16 --batch 32768 --steps 100 --warmup 20 --leak-steps 0 --vs-pytorch \
    --torch-modes compile --json "$OUT/bench_bf16.json"
  step bench_fp32 45 $B $P --precision fp32 --batch 2048 --steps 200 --leak-steps 0 --vs-pytorch \
    --torch-modes eager --json "$OUT/bench_fp32.json"
elif [ "$STAGE" = 4 ]; then
  # stage 4: warp interaction, CUB sort, group segment sums, fused sparse SGD,
  # padded K: bit checks first, kernel profile, then both headline ratios
  P="--pool 262144"
  K="env CUDA_INJECTION64_PATH=$here/build/libplumb-kprof.so KPROF_TOP=50"
  step tests 90 env PLUMB_TEST_DEVICE=cuda build/plumb-tests gpu_train
  step tests_order 30 env PLUMB_TEST_DEVICE=cuda build/plumb-tests train_ops_sparse
  step golden 120 $B --no-throughput --golden-steps 50 --golden-rows 1000 --golden-batch 2048 --pool 65536 \
    --json "$OUT/golden.json"
  step kprof_bf16 60 $K KPROF_OUT=$OUT/kprof_bf16.txt $B $P --precision bf16 --batch 32768 --steps 100 --warmup 10 \
    --leak-steps 0
  step bench_bf16 150 $B $P --precision bf16 --batch 32768 --steps 100 --warmup 20 --leak-steps 0 --vs-pytorch \
    --torch-modes compile --json "$OUT/bench_bf16.json"
  step bench_fp32 60 $B $P --precision fp32 --batch 2048 --steps 200 --leak-steps 0 --vs-pytorch \
    --torch-modes eager --json "$OUT/bench_fp32.json"
elif [ "$STAGE" = final ]; then
  # the issue 5 evidence in one call: bit checks, golden, both headline ratios
  # (500 steps, the leak check over 1000 steps), the 16-bit mirrors on/off,
  # fast-mode AUC (cuda, cpu, PyTorch from one init), NCCL with world 1
  P="--pool 262144"
  step tests 60 env PLUMB_TEST_DEVICE=cuda build/plumb-tests gpu_train
  step tests_order 20 env PLUMB_TEST_DEVICE=cuda build/plumb-tests train_ops_sparse
  step golden 60 $B --no-throughput --golden-steps 50 --golden-rows 1000 --golden-batch 2048 --pool 65536 \
    --json "$OUT/golden.json"
  step bench_bf16 150 $B $P --precision bf16 --batch 32768 --steps 500 --warmup 50 --leak-steps 1000 --vs-pytorch \
    --torch-modes compile --json "$OUT/bench_bf16.json"
  step bench_bf16_nomirror 30 env PLUMB_TRAIN_MIRRORS=0 $B $P --precision bf16 --batch 32768 --steps 500 --warmup 50 \
    --leak-steps 0 --json "$OUT/bench_bf16_nomirror.json"
  step bench_fp32 60 $B $P --precision fp32 --batch 2048 --steps 500 --leak-steps 1000 --vs-pytorch \
    --torch-modes eager --json "$OUT/bench_fp32.json"
  step auc 120 $B --rows 100000 --no-throughput --auc-steps 300 --auc-batch 2048 --auc-eval 65536 --vs-pytorch \
    --torch-modes eager --json "$OUT/auc.json"
  # the 16-bit path converges too: bf16 on cuda and on the cpu (which rounds as a bf16 GPU stores), PyTorch autocast
  step auc_bf16 120 $B --rows 100000 --no-throughput --auc-steps 300 --auc-batch 2048 --auc-eval 65536 \
    --auc-precision bf16 --vs-pytorch --torch-modes eager --json "$OUT/auc_bf16.json"
  step nccl 40 $B --comm nccl --precision fp32 --batch 2048 --steps 100 --leak-steps 0 --json "$OUT/nccl.json"
elif [ "$STAGE" = variants ]; then
  # the bf16 step under alternatives (one short run each, device batches and loader)
  P="--pool 262144 --precision bf16 --batch 32768 --steps 100 --warmup 20 --leak-steps 0"
  step v_default 40 $B $P --json "$OUT/v_default.json"
  step v_convert 40 env PLUMB_TRAIN_BF16=convert $B $P --json "$OUT/v_convert.json"
  step v_passive 40 env OMP_WAIT_POLICY=passive $B $P --json "$OUT/v_passive.json"
  step v_threads8 40 $B $P --threads 8 --json "$OUT/v_threads8.json"
  step v_unfused 40 $B $P --fuse-sgd no --json "$OUT/v_unfused.json"
  step v_long 60 $B --pool 262144 --precision bf16 --batch 32768 --steps 500 --warmup 50 --leak-steps 0 --json "$OUT/v_long.json"
  for v in default convert passive threads8 unfused long; do
    [ -f "$OUT/v_$v.json" ] && log "v_$v: $(jq -c '.results[0] | {samples_per_s, step_ms, host_enqueue_ms, host_queue_fwd_bwd_ms, forward_ms, backward_ms, loader_over_device}' "$OUT/v_$v.json")"
  done
elif [ "$STAGE" = prof ]; then
  # where the step's GPU time goes: CUPTI kernel times (bench/kprof.cc, no
  # synchronisation added) for plumb and for the PyTorch peer on the same batches
  P="--pool 262144"
  K="env CUDA_INJECTION64_PATH=$here/build/libplumb-kprof.so KPROF_TOP=45"
  step kprof_bf16 120 $K KPROF_OUT=$OUT/kprof_bf16_%p.txt KPROF_AFTER_S=3 $B $P --precision bf16 --batch 32768 \
    --steps 200 --warmup 20 --leak-steps 0 --vs-pytorch --torch-modes compile --json "$OUT/bench_bf16.json"
  step kprof_fp32 90 $K KPROF_OUT=$OUT/kprof_fp32_%p.txt KPROF_AFTER_S=3 $B $P --precision fp32 --batch 2048 \
    --steps 300 --leak-steps 0 --vs-pytorch --torch-modes eager --json "$OUT/bench_fp32.json"
  step tests 45 env PLUMB_TEST_DEVICE=cuda build/plumb-tests gpu_train
else
  # stage 2: the batch-sliced dw GEMMs; compact (the device minutes are few)
  P="--pool 262144"
  step tests 60 env PLUMB_TEST_DEVICE=cuda build/plumb-tests gpu_train
  step prof 40 env PLUMB_TRAIN_PROF=1 $B $P --precision bf16 --batch 32768 --steps 10 --warmup 3 --leak-steps 0
  step bench_bf16 60 $B $P --precision bf16 --batch 32768 --steps 100 --warmup 20 --leak-steps 1000 \
    --json "$OUT/bench_bf16.json"
  step bench_fp32 60 $B $P --precision fp32 --batch 2048 --steps 200 --leak-steps 0 --vs-pytorch \
    --torch-modes eager --json "$OUT/bench_fp32.json"
  step auc 90 $B --rows 100000 --no-throughput --auc-steps 300 --auc-batch 2048 --auc-eval 65536 --vs-pytorch \
    --json "$OUT/auc.json"
fi
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv >>"$LOG" 2>&1
log "done at $(date -u +%FT%TZ)"
