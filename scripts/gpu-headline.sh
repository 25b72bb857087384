#!/usr/bin/env bash
# The gpt and resnet headline figures on the GPU host in one short pass
# (from the folder scripts/gpu-prep.sh fills; the suite runs before it):
#   gpt     plumb bench gpt, gpt2-124m B=16 T=1024 bf16, with torch.compile
#           (bench/gpt_pytorch.py) in the same run;
#   r18     plumb bench resnet, resnet18 CIFAR bf16/512, with torch.compile;
#   r50     plumb bench resnet, resnet50 at 224, bf16/256, with torch.compile,
#           and (PLUMB_CONV_LOG) each cuDNN plan's deterministic algorithm
#           against the fastest of any kind, summed per direction;
#   r152    plumb bench resnet, resnet152 at 224, fp32 and bf16, batch 64
#           (the source documents' single-GPU table shape).
# Figures for BENCHMARKS.md's gpt and resnet sections. At most
# HEADLINE_BUDGET_S seconds (default 200), every step under `timeout`.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
OUT=${OUT:-$here/gpu-out}
D=$OUT/headline
mkdir -p "$D"
LOG=$D/headline.log
: >"$LOG"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
BUDGET=${HEADLINE_BUDGET_S:-200}
T0=$SECONDS
log() { echo "$*" | tee -a "$LOG"; }
step() { # step NAME TIMEOUT_S CMD...
  local name=$1 t=$2; shift 2
  local l=$((BUDGET - (SECONDS - T0)))
  if [ "$l" -lt 15 ]; then log "==== $name: SKIPPED ($l s left)"; return 99; fi
  [ "$t" -gt "$l" ] && t=$l
  log "==== $name: $*"
  local t1=$SECONDS
  timeout "$t" "$@" >"$D/$name.log" 2>&1
  local rc=$?
  log "==== $name: exit $rc ($((SECONDS - t1)) s)"
  grep -E "^(bf16|fp32|fp16) |pytorch|FLOPs per token" "$D/$name.log" | tee -a "$LOG"
  return $rc
}
. "$here/scripts/gpu-libs.sh"
export PLUMB_BACKEND_PATH=$here/build
P=build/plumb
# the attention kernels: PLUMB_GPT_ATTN as the caller set it, else the faster of
# tc and mma where scripts/gpu-attn.sh timed both earlier in this call
if [ -z "${PLUMB_GPT_ATTN:-}" ] && [ -f "$OUT/attn/tc.json" ] && [ -f "$OUT/attn/mma.json" ]; then
  pick=$(python3 -c 'import json,sys; t=[json.load(open(f))["rows"][0]["tokens_per_s"] for f in sys.argv[1:]]; print("mma" if t[1] > t[0] else "tc")' \
    "$OUT/attn/tc.json" "$OUT/attn/mma.json" 2>/dev/null)
  [ "$pick" = mma ] && export PLUMB_GPT_ATTN=mma
  log "attention for gpt: ${pick:-tc (no comparison)} (gpu-attn.sh's tc and mma in this call)"
fi
log "PLUMB_GPT_ATTN=${PLUMB_GPT_ATTN:-unset (tc)}"
step gpt 110 $P bench gpt --preset gpt2-124m --batch 16 --device cuda --precision bf16 --steps 30 --warmup 10 \
  --vs-pytorch --torch-modes compile --json "$D/gpt.json"
step r18 100 $P bench resnet --device cuda --preset resnet18 --batch 512 --precision bf16 --steps 30 --warmup 5 \
  --leak-steps 0 --vs-pytorch --torch-modes compile --torch-timeout 80 --json "$D/r18.json"
step r50 170 env PLUMB_CONV_LOG=1 $P bench resnet --device cuda --preset resnet50 --batch 256 --precision bf16 --steps 10 \
  --warmup 3 --leak-steps 0 --vs-pytorch --torch-modes compile --torch-timeout 150 --json "$D/r50.json"
# what determinism costs resnet50's convolutions: cuDNN's Find times of the
# algorithm taken (deterministic) against the fastest of any kind, summed
# per direction over the plans (src/gpu/conv_lib.cu, PLUMB_CONV_LOG)
python3 - "$D/r50.log" <<'PY' 2>&1 | tee -a "$LOG"
import re, sys
tot = {}
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"cudnn (\w+) .*: algo (-?\d+) ([-0-9.]+) ms.*; fastest algo (-?\d+) ([-0-9.]+) ms", line)
    if not m: continue
    d, taken, fast = m.group(1), float(m.group(3)), float(m.group(5))
    t = tot.setdefault(d, [0, 0.0, 0.0])
    t[0] += 1; t[1] += max(taken, 0.0); t[2] += max(fast, 0.0)
for d, (n, a, b) in sorted(tot.items()):
    print("resnet50 cudnn %s: %d plans, deterministic algorithms %.3f ms, fastest of any kind %.3f ms (Find times, one call each)" % (d, n, a, b))
if not tot: print("resnet50 cudnn: no PLUMB_CONV_LOG lines")
PY
step r152 60 $P bench resnet --device cuda --preset resnet152 --batch 64 --precision fp32,bf16 --steps 10 --warmup 3 \
  --leak-steps 0 --json "$D/r152.json"
log "gpu-headline: $((SECONDS - T0)) s of $BUDGET"
