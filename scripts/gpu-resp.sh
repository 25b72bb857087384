#!/usr/bin/env bash
# The resnet fast bf16 path's non-convolution kernels on the GPU host, from
# the folder scripts/gpu-prep.sh fills: the GPU resnet / vision / conv tests
# (the 16-bit mirror ops against the fp32 ops, the 4-wide and one-pass BN
# kernels against the cpu), then resnet18 CIFAR bf16 batch 512 under
# CUPTI's kernel table (bench/kprof.cc), printing images/s and the top
# kernels. Figures for BENCHMARKS.md's resnet section (images/s, profile
# table). At most RESP_BUDGET_S seconds (default 60); every step under
# `timeout`. Writes $OUT/resp/.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
OUT=${OUT:-$here/gpu-out}
D=$OUT/resp
mkdir -p "$D"
LOG=$D/gpu-resp.log
: >"$LOG"
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
BUDGET=${RESP_BUDGET_S:-60}
T0=$SECONDS
log() { echo "$*" | tee -a "$LOG"; }
left() { echo $((BUDGET - (SECONDS - T0))); }
. "$here/scripts/gpu-libs.sh"
export PLUMB_BACKEND_PATH=$here/build
run() { # run NAME TIMEOUT_S CMD...
  local name=$1 t=$2; shift 2
  local l; l=$(left)
  if [ "$l" -lt 5 ]; then log "==== $name: SKIPPED ($l s left)"; return 99; fi
  [ "$t" -gt "$l" ] && t=$l
  log "==== $name: $*"
  local t1=$SECONDS
  timeout "$t" "$@" >"$D/$name.log" 2>&1
  local rc=$?
  log "==== $name: exit $rc ($((SECONDS - t1)) s)"
  grep -E "^(FAIL|fail)|passed, .* failed" "$D/$name.log" | tail -n 12 | tee -a "$LOG"
  return $rc
}
run test_vision 20 env PLUMB_TEST_DEVICE=cuda build/plumb-tests vision
run test_resnet 14 env PLUMB_TEST_DEVICE=cuda build/plumb-tests resnet
l=$(left)
t=25
[ "$t" -gt "$l" ] && t=$l
if [ "$t" -ge 8 ]; then
  log "==== r18 bf16/512 under kprof"
  timeout "$t" env CUDA_INJECTION64_PATH="$here/build/libplumb-kprof.so" KPROF_OUT="$D/kprof.txt" KPROF_TOP=30 \
    KPROF_AFTER_S=3 build/plumb bench resnet --device cuda --preset resnet18 --batch 512 --precision bf16 \
    --steps 50 --warmup 3 --leak-steps 0 >"$D/r18_bench.log" 2>&1
  log "==== r18: exit $? ($(($(left))) s left)"
  grep -E "^(prec|bf16)" "$D/r18_bench.log" | tee -a "$LOG"
  awk '/^bf16/ {print "resnet18 CIFAR bf16/512: " $3 " img/s, " $4 " ms/step (fwd " $7 ", bwd " $8 ")"}' \
    "$D/r18_bench.log" | tee -a "$LOG"
  [ -f "$D/kprof.txt" ] && head -n 34 "$D/kprof.txt" | tee -a "$LOG"
else
  log "==== r18: SKIPPED ($l s left)"
fi
log "gpu-resp: $((SECONDS - T0)) s of $BUDGET"
