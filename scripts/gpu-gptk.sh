#!/usr/bin/env bash
# The gpt step's non-attention kernels after the classifier / conversion /
# reduction rework, on the GPU host, from the folder scripts/gpu-prep.sh
# fills: the gpt and train_ops C tests on the GPU (golden bits = cpu, fast
# within bounds and repeatable), then plumb bench gpt gpt2-124m B=16 bf16
# under CUPTI (bench/kprof.cc through CUDA_INJECTION64_PATH) for the kernel
# table. Figures for BENCHMARKS.md's gpt section (tokens/s, profile table).
# At most GPTK_BUDGET_S seconds (default 50); every step under `timeout`.
# Writes $OUT/gptk/.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
OUT=${OUT:-$here/gpu-out}
D=$OUT/gptk
mkdir -p "$D"
LOG=$D/gpu-gptk.log
: >"$LOG"
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
BUDGET=${GPTK_BUDGET_S:-50}
T0=$SECONDS
log() { echo "$*" | tee -a "$LOG"; }
left() { echo $((BUDGET - (SECONDS - T0))); }
run() { # run NAME TIMEOUT_S CMD...
  local name=$1 t=$2; shift 2
  local l; l=$(left)
  if [ "$l" -lt 5 ]; then log "==== $name: SKIPPED ($l s left)"; return 99; fi
  [ "$t" -gt "$l" ] && t=$l
  log "==== $name: $*"
  local t1=$SECONDS
  timeout "$t" "$@" >"$D/$name.log" 2>&1
  local rc=$?
  log "==== $name: exit $rc ($((SECONDS - t1)) s): $(grep -E '[0-9]+ passed, [0-9]+ failed' "$D/$name.log" | tail -n 1)"
  grep -E 'FAIL|not ok' "$D/$name.log" | head -n 8 | tee -a "$LOG"
  return $rc
}
. "$here/scripts/gpu-libs.sh"
export PLUMB_BACKEND_PATH=$here/build
run tests_gpt 16 env PLUMB_TEST_DEVICE=cuda build/plumb-tests gpt
run tests_train_ops 8 env PLUMB_TEST_DEVICE=cuda build/plumb-tests train_ops
run bench 24 env CUDA_INJECTION64_PATH="$here/build/libplumb-kprof.so" KPROF_TOP=40 KPROF_AFTER_S=0 \
  KPROF_OUT="$D/kprof.txt" build/plumb bench gpt --preset gpt2-124m --batch 16 --device cuda --precision bf16 \
  --steps 20 --warmup 3
grep -A3 -E '^prec ' "$D/bench.log" | tee -a "$LOG"
[ -f "$D/kprof.txt" ] && head -n 30 "$D/kprof.txt" | tee -a "$LOG"
log "gpu-gptk: $((SECONDS - T0)) s of $BUDGET"
