#!/usr/bin/env bash
# ctr on the GPU (issue 5), on the GPU host, from the folder
# scripts/gpu-prep.sh filled (prebuilt build/, scripts/, bench/, fallback/):
#   tests    PLUMB_TEST_DEVICE=cuda plumb-tests gpu_train|ctr_dev_batch|nccl
#   golden   dlrm-kaggle --rows 1000, 50 golden steps: digest on cuda == cpu
#   bench    plumb bench ctr --vs-pytorch (the STAGE's configurations)
#   auc      fast-mode AUC on cuda, cpu and PyTorch after a fixed budget
#   nccl     the step with the NCCL all-reduce, world size 1
# Usage: bash scripts/gputrain-check.sh [STAGE] where STAGE is 1 (the two
# headline configurations), 2 (compact: dw GEMMs) or 3 (compact: the
# fast-mode sparse sums, tests + both headline ratios in one run).
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
