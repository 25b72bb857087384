#!/usr/bin/env bash
# The ctr data plane against the device-only step, on the GPU host (one H200),
# from the folder scripts/gpu-prep.sh filled (prebuilt build/, scripts/,
# bench/, tests/). The unfiltered GPU suite runs before this script
# (scripts/gpu-suite.sh); it is not repeated here. Under 60 s: every step
# under `timeout`, later steps skipped once FEED_BUDGET_S (58) is spent.
# Writes logs and JSON under $OUT/feed/, prints a summary. NVLink multicast
# stays off; clocks, power and MIG are untouched.
#
#   ratio5   plumb bench ctr bf16/32768 --threads 14, five configurations in one
#            process (--batch 32768 x5): device samples/s, loader samples/s and
#            loader/device for each, so "within 5% in five runs" can be judged
#   fp32     the same at fp32/2048 (two configurations)
#   unfused  bench ctr --fuse-sgd no at bf16/32768 and fp32/2048: the device step
#            without the fused sparse SGD, which is what plumb train runs while it
#            writes a grad_norm per step into metrics.jsonl (the trainer's
#            want_norm turns the fusion off): the part of the train/bench gap
#            that is the GPU's, not the host's
#   train    plumb train ctr --preset dlrm-kaggle --graph on, bf16/32768 (800 steps)
#            and fp32/2048 (3000 steps): steady samples/s as scripts/gpu-speed.sh's
#            steady() computes it (steps after the first 20%), mean data wait,
#            and the largest single data wait (an epoch boundary used to stall
#            the feed 30-45 ms: the sampler's permutation)
# Figures belong in BENCHMARKS.md, "plumb train at the speed of the benchmark"
# (the loader ratio and the data plane rows).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
OUT=${OUT:-$here/gpu-out}
O=$OUT/feed
mkdir -p "$O"
LOG=$O/feed.log
: >"$LOG"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
BUDGET=${FEED_BUDGET_S:-58}
T0=$SECONDS
log() { echo "$*" | tee -a "$LOG"; }
step() { # step NAME TIMEOUT_S CMD...: skipped once the budget is spent
  local name=$1 t=$2; shift 2
  local left=$((BUDGET - (SECONDS - T0)))
  if [ "$left" -lt 5 ]; then log "==== $name: SKIPPED (budget of ${BUDGET} s spent)"; return 99; fi
  [ "$t" -gt "$left" ] && t=$left
  log "==== $name (timeout $t s): $*"
  local s0=$SECONDS
  timeout "$t" "$@" >"$O/$name.out" 2>&1
  local rc=$?
  cat "$O/$name.out" >>"$LOG"
  log "==== $name: exit $rc ($((SECONDS - s0)) s)"
  return $rc
}
log "gpu-feed $(cat COMMIT 2>/dev/null) on $(hostname) at $(date -u +%FT%TZ)"
. "$here/scripts/gpu-libs.sh"
export PLUMB_BACKEND_PATH=$here/build
P=build/plumb
W=/tmp/gpu-feed; mkdir -p $W
B="bench ctr --device cuda --workdir $W --threads 14 --leak-steps 0 --warmup 20"
K="--preset dlrm-kaggle --device cuda --train-samples 4194304 --eval-samples 65536 --health-interval 0 --graph on"

steady() { jq -s '[.[] | select(.type == "step")] as $s | ($s | length) as $n |
  [$s[] | select(.step > ($n / 5 | floor))] | ((map(.samples_per_s * .step_s) | add) / (map(.step_s) | add))' \
  "$1"/checks/train-ctr*/metrics.jsonl 2>/dev/null; }
# mean and largest data wait (ms) of the steady steps
waits() { jq -rs '[.[] | select(.type == "step")] as $s | ($s | length) as $n |
  [$s[] | select(.step > ($n / 5 | floor)) | .data_wait_s] | "\((add / length * 1e6 | round) / 1e3) ms mean, \((max * 1e6 | round) / 1e3) ms max"' \
  "$1"/checks/train-ctr*/metrics.jsonl 2>/dev/null; }
# "device loader ratio" per configuration of a bench JSON
rows() { jq -r '.results[] | "\(.precision) \(.batch) device \(.samples_per_s | round) loader \(.loader_samples_per_s | round) ratio \(.loader_over_device * 1000 | round / 1000) build \(.loader_build_ms_per_batch * 1000 | round / 1000) ms"' "$1" 2>/dev/null; }

step ratio5 24 $P $B --precision bf16 --batch 32768,32768,32768,32768,32768 --steps 200 --json "$O/ratio5.json"
step fp32 10 $P $B --precision fp32 --batch 2048,2048 --steps 400 --json "$O/fp32.json"
step train-bf16 12 $P train ctr $K --precision bf16 --batch 32768 --steps 800 --out "$O/train-bf16"
step train-fp32 12 $P train ctr $K --precision fp32 --batch 2048 --steps 3000 --out "$O/train-fp32"
step unfused 12 $P $B --fuse-sgd no --precision bf16,fp32 --batch 32768,2048 --steps 200 --json "$O/unfused.json"
{
  echo "== summary (gpu-feed, $(cat COMMIT 2>/dev/null)) =="
  echo "bench ctr, the trainer's step on device batches vs through the device feed (--threads 14):"
  rows "$O/ratio5.json" | sed 's/^/  /'
  jq -r '[.results[].loader_over_device] | "  bf16/32768 loader/device over \(length) runs: min \(min * 1000 | round / 1000), max \(max * 1000 | round / 1000); within 5% in all: \(all(. <= 1.05))"' "$O/ratio5.json" 2>/dev/null
  rows "$O/fp32.json" | sed 's/^/  /'
  echo "bench ctr --fuse-sgd no (the unfused sparse SGD plumb train runs while it records grad_norm):"
  rows "$O/unfused.json" | sed 's/^/  /'
  for r in bf16 fp32; do
    printf '  train %s graph on: steady %s samples/s; data wait %s\n' "$r" "$(steady "$O/train-$r")" "$(waits "$O/train-$r")"
  done
  echo "goals: train bf16/32768 >= 22.4 M (3x torch.compile 7.48 M), fp32/2048 >= 2.81 M (4x eager 0.70 M); loader/device <= 1.05"
  echo "time used: $((SECONDS - T0)) s of the ${BUDGET} s budget"
} | tee "$O/summary.txt"
