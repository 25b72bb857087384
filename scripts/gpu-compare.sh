#!/usr/bin/env bash
# plumb compare's GPU evidence (docs/COMPARE.md), on a host with one CUDA
# device, from a folder with a built build/plumb and build/libplumb-cuda.so:
#   1. accept rng, numerics, train-ctr and parity (K = 5) on cuda:0 and the cpu
#      into one folder, then `plumb compare DIR --a cuda:0 --b cpu`: every
#      digest row must be equal, and the parity verdict is printed;
#   2. the ladder's fast rungs on cuda:0 (strict fp32 against the vendor
#      defaults with TF32 allowed): the rung-to-rung shift at the TF32 rung
#      against the seed spread, as `plumb attribute` reports it;
#   3. the same planted difference as a two-folder comparison: fast-strict
#      seeds against fast-vendor (TF32) seeds, `plumb compare --metrics`.
# Writes everything under $OUT (default compare-gpu-out). NVLink multicast stays off.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
OUT=${OUT:-$here/compare-gpu-out}
# under scripts/gpu-round.sh: $OUT/compare
[ -n "${GPU_ROUND:-}" ] && OUT=$OUT/compare
SEEDS=${SEEDS:-5}
mkdir -p "$OUT"
LOG=$OUT/compare-gpu.log
: >"$LOG"
export NCCL_NVLS_ENABLE=0
log() { echo "$*" | tee -a "$LOG"; }
step() { # step NAME TIMEOUT_S CMD...
  local name=$1 t=$2; shift 2
  log ""; log "==== $name: $*"
  local t0=$SECONDS
  timeout "$t" "$@" >>"$LOG" 2>&1
  local rc=$?
  log "==== $name: exit $rc ($((SECONDS - t0)) s)"
}
log "compare-gpu on $(hostname) at $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,driver_version --format=csv 2>&1 | tee -a "$LOG"
# COMPARE_PARTS=ladder: only parts 2 and 3 (part 1 shown in an earlier call)
if [ "${COMPARE_PARTS:-all}" != ladder ]; then
  step accept ${ACCEPT_S:-240} build/plumb accept --checks rng,numerics,train-ctr,parity --device all --seeds "$SEEDS" --out "$OUT/acc"
  step compare 120 build/plumb compare "$OUT/acc" --a cuda:0 --b cpu --out "$OUT/cmp"
fi
step ladder ${LADDER_S:-150} build/plumb attribute --device cuda:0 --seeds "$SEEDS" --rungs fast-strict,fast-vendor --out "$OUT/lad"
L=$OUT/lad/checks/ladder-cuda-0
if [ -f "$L/rung2-fast-strict.seeds.jsonl" ] && [ -f "$L/rung3-fast-vendor.seeds.jsonl" ]; then
  step tf32 120 build/plumb compare --metrics "$L/rung2-fast-strict.seeds.jsonl" "$L/rung3-fast-vendor.seeds.jsonl" \
    --out "$OUT/tf32"
fi
grep -E "^(digests|verdict|ladder on)|different|equivalent|undecided" "$LOG" | tee "$OUT/summary.txt"
