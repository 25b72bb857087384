#!/usr/bin/env bash
# Where the gpt and resnet steps' GPU time goes, on the GPU host, from the
# folder scripts/gpu-prep.sh fills: CUPTI kernel times per kernel name
# (bench/kprof.cc through CUDA_INJECTION64_PATH; no synchronisation added)
# for plumb's step and for PyTorch eager on the same shapes, so each of
# plumb's kernels can be set against the peer's. Figures for BENCHMARKS.md's
# gpt and resnet sections (profile tables). At most PROFILE_BUDGET_S seconds
# (default 150); every step under `timeout`. Writes $OUT/profile/.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
OUT=${OUT:-$here/gpu-out}
D=$OUT/profile
mkdir -p "$D"
LOG=$D/gpu-profile.log
: >"$LOG"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
BUDGET=${PROFILE_BUDGET_S:-150}
T0=$SECONDS
log() { echo "$*" | tee -a "$LOG"; }
step() { # step NAME TIMEOUT_S AFTER_S CMD...: CMD under kprof (AFTER_S: KPROF_AFTER_S, drops warm-up activity)
  local name=$1${PROFILE_TAG:-} t=$2 ka=$3; shift 3
  local l=$((BUDGET - (SECONDS - T0)))
  if [ "$l" -lt 10 ]; then log "==== $name: SKIPPED ($l s left)"; return 99; fi
  [ "$t" -gt "$l" ] && t=$l
  log "==== $name: $*"
  local t1=$SECONDS
  timeout "$t" env CUDA_INJECTION64_PATH="$here/build/libplumb-kprof.so" KPROF_TOP=40 KPROF_AFTER_S="$ka" \
    KPROF_SEQ="${KPROF_SEQ:-0}" KPROF_OUT="$D/$name.kprof.txt" "$@" >"$D/$name.log" 2>&1
  local rc=$?
  log "==== $name: exit $rc ($((SECONDS - t1)) s)"
  [ -f "$D/$name.kprof.txt" ] && head -n 32 "$D/$name.kprof.txt" | tee -a "$LOG"
  return $rc
}
. "$here/scripts/gpu-libs.sh"
# PROFILE_BACKEND=DIR: the GPU plugin from DIR (gpu-prep.sh's build-NAME
# variants); PROFILE_TAG: a suffix for the step names, so a variant's tables
# sit beside the default build's
export PLUMB_BACKEND_PATH=${PROFILE_BACKEND:-$here/build}
log "plugin: $PLUMB_BACKEND_PATH"
P=build/plumb
# PROFILE_PARTS: which of gpt r18 r50 r152 ctr to run (default: gpt r18 r50)
PARTS=" ${PROFILE_PARTS:-gpt r18 r50} "
part() { case "$PARTS" in *" $1 "*) return 0;; esac; return 1; }
# PROFILE_TORCH=0: plumb's steps only (the PyTorch eager profiles change only with the host)
torch() { [ "${PROFILE_TORCH:-1}" != 0 ]; }
if part ctr; then
  # the ctr step: plumb train (metrics.jsonl every step, with the norm) against plumb bench ctr
  # (the same queued step, no metrics) at bf16/32768; kprof's total GPU time over the steps
  # against the wall time says whether the device or the host sets the pace
  step ctr_train 40 6 $P train ctr --preset dlrm-kaggle --device cuda --train-samples 4194304 --eval-samples 65536 \
    --health-interval 0 --precision bf16 --batch 32768 --steps 6000 --out "$D/ctr-train"
  step ctr_bench 40 6 $P bench ctr --device cuda --workdir /tmp/gpu-prof --precision bf16 --batch 32768 --steps 6000 \
    --warmup 20 --leak-steps 0
fi
if part gpt; then
step gpt_plumb 40 0 $P bench gpt --preset gpt2-124m --batch 16 --device cuda --precision bf16 --steps 20 --warmup 3
torch && step gpt_torch 50 0 python3 bench/gpt_pytorch.py --preset gpt2-124m --batch 16 --device cuda --precision bf16 \
  --mode eager --steps 40 --warmup 3
fi
if part r18; then
step r18_plumb 30 3 $P bench resnet --device cuda --preset resnet18 --batch 512 --precision bf16 --steps 150 \
  --warmup 3 --leak-steps 0
torch && step r18_torch 40 3 python3 bench/resnet_torch.py --model resnet18 --batch 512 --precision bf16 --modes eager \
  --steps 150 --warmup 3
fi
if part r50; then
# the last 1500 kernels: the last training steps' timeline, each BN call's time by its place in the step
export KPROF_SEQ=${R50_SEQ:-1500}
step r50_plumb 30 3 $P bench resnet --device cuda --preset resnet50 --batch 256 --precision bf16 --steps 40 \
  --warmup 2 --leak-steps 0
torch && step r50_torch 50 3 python3 bench/resnet_torch.py --model resnet50 --batch 256 --precision bf16 --modes eager \
  --steps 40 --warmup 3
export KPROF_SEQ=0
fi
if part r152; then
# resnet152 at 224, bf16/64 (issue 19's table shape), with each cuDNN plan's algorithm logged
step r152_plumb 60 8 env PLUMB_CONV_LOG=1 $P bench resnet --device cuda --preset resnet152 --batch 64 --precision bf16 \
  --steps 30 --warmup 5 --leak-steps 0
fi
log "gpu-profile: $((SECONDS - T0)) s of $BUDGET"
