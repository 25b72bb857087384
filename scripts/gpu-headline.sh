#!/usr/bin/env bash
# The gpt and resnet headline figures on the GPU host in one short pass
# (from the folder scripts/gpu-prep.sh fills; the suite runs before it):
#   gpt     plumb bench gpt, gpt2-124m B=16 T=1024 bf16, with torch.compile
#           (bench/gpt_pytorch.py) in the same run;
#   r18     plumb bench resnet, resnet18 CIFAR bf16/512, with torch.compile;
#   r18mir  the same with PLUMB_RESNET_ACT16=0 (the mirror path), no PyTorch;
#   gptnoepi  gpt with PLUMB_GPT_DGELU_EPI=0 PLUMB_GPT_BGRAD_EPI=0 (gelu' and
#           dbias as passes, not cuBLASLt epilogues), no PyTorch; gptnodgelu
#           the same with PLUMB_GPT_DGELU_EPI=0 alone; gptnopad with
#           PLUMB_GPT_DWTE_PAD=0; gptnogelu PLUMB_GPT_GELU_EPI=0; gptx256
#           and gptx512 with PLUMB_GPT_XENT_TPB=256 and 512; gptdw64,
#           gptdw256 and gptdw512 with PLUMB_GPT_DW_SLICES=tiles:64, 256 and
#           512 (the dw slice rule's tile target; 128 is the default);
#           gptnobgrad with PLUMB_GPT_BGRAD_EPI=0 (dbias in our column
#           sums, not cuBLASLt's BGRADB kernels);
#           gptnostage with PLUMB_GPT_XENT_STAGE=0 (the classifier's rows
#           read twice, not staged in shared memory);
#           gptch2 and gptch1 with the classifier in 2 and 1 row chunks
#           (PLUMB_GPT_XENT_CHUNK_BYTES; 1 by default, 4 until 2026-12-06);
#   r50s2d  resnet50 with PLUMB_CONV_S2D=0 (the stem padded to 8 channels, not
#           space-to-depth), no PyTorch;
#   r50     plumb bench resnet, resnet50 at 224, bf16/256, with torch.compile,
#           and (PLUMB_CONV_LOG) each cuDNN plan's deterministic algorithm
#           against the fastest of any kind, summed per direction;
#   r152    plumb bench resnet, resnet152 at 224, fp32 and bf16, batch 64
#           (the source documents' single-GPU table shape), with PLUMB_CONV_LOG
#           (which algorithm each plan pinned, and its retimed time).
# r50 and r152 run with PLUMB_CONV_CACHE=off: cuDNN's Find and the retiming in
# every run, so the logged Find times exist (a picks file would skip them).
# Figures for BENCHMARKS.md's gpt and resnet sections. At most
# HEADLINE_BUDGET_S seconds (default 200), every step under `timeout`.
# HEADLINE_ONLY=REGEX runs only the steps whose names match (bash =~), and
# HEADLINE_TORCH=0 leaves PyTorch out (plumb's figures alone, for a short call).
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
  if [ -n "${HEADLINE_ONLY:-}" ] && ! [[ $name =~ $HEADLINE_ONLY ]]; then log "==== $name: SKIPPED (HEADLINE_ONLY)"; return 98; fi
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
# HEADLINE_BACKEND=DIR: the GPU plugin from DIR instead of build/ (an A/B of
# two builds of libplumb-cuda.so in one call, such as gpu-prep.sh's build-sw)
export PLUMB_BACKEND_PATH=${HEADLINE_BACKEND:-$here/build}
log "plugin: $PLUMB_BACKEND_PATH"
P=build/plumb
# the PyTorch peer's flags for step STEP, which needs NEED seconds with it: none
# with HEADLINE_TORCH=0, and none (said in the log) where less than NEED is
# left of the budget, so that plumb's own figure still comes back (2026-12-06:
# resnet50 with the peer was killed at the budget and neither figure came)
vs() { # vs STEP NEED [FLAGS...]
  local name=$1 need=$2; shift 2
  [ "${HEADLINE_TORCH:-1}" = 0 ] && return
  if [ -n "${HEADLINE_ONLY:-}" ] && ! [[ $name =~ $HEADLINE_ONLY ]]; then return; fi
  local l=$((BUDGET - (SECONDS - T0)))
  if [ "$l" -lt "$need" ]; then
    echo "gpu-headline: PyTorch left out of the next step: $l s left, it needs about $need" >>"$LOG"
    return
  fi
  echo "--vs-pytorch --torch-modes compile $*"
}
# gpt's configuration: PLUMB_GPT_ATTN / PLUMB_GPT_ACT16 as the caller set them,
# else the fastest whole configuration timed earlier in this call: the 16-bit
# activation pipeline with the default attention (scripts/gpu-act16.sh's
# on.json), or with mma2 or cudnn named (scripts/gpu-attn.sh; its cudnn-nd,
# not reproducible run to run, is never picked)
if [ -z "${PLUMB_GPT_ATTN:-}" ] && [ -z "${PLUMB_GPT_ACT16:-}" ]; then
  pick=$(python3 - "$OUT" <<'PY' 2>/dev/null
import json, os, sys
out = sys.argv[1]
cands = [("act16/on.json", "PLUMB_GPT_ACT16=1"), ("attn/mma2.json", "PLUMB_GPT_ATTN=mma2"),
         ("attn/cudnn.json", "PLUMB_GPT_ATTN=cudnn")]
best = None
for f, env in cands:
    try:
        t = json.load(open(os.path.join(out, f)))["rows"][0]["tokens_per_s"]
    except Exception:
        continue
    if best is None or t > best[0]:
        best = (t, env)
print(best[1] if best else "")
PY
)
  for kv in $pick; do export "$kv"; done
  log "gpt configuration: ${pick:-the defaults (nothing timed earlier in this call)}"
fi
log "PLUMB_GPT_ATTN=${PLUMB_GPT_ATTN:-unset (auto: cuDNN where it serves, else mma2)} PLUMB_GPT_ACT16=${PLUMB_GPT_ACT16:-unset (1)}"
step gpt 110 $P bench gpt --preset gpt2-124m --batch 16 --device cuda --precision bf16 --steps 30 --warmup 10 \
  $(vs gpt 100) --json "$D/gpt.json"
# gpt with the dx GEMM's gelu' and the dw GEMM's dbias as passes of their own
# (train_gpt_gemm.cu), plumb alone: its step against gpt's
step gptnoepi 45 env PLUMB_GPT_DGELU_EPI=0 PLUMB_GPT_BGRAD_EPI=0 $P bench gpt --preset gpt2-124m --batch 16 \
  --device cuda --precision bf16 --steps 30 --warmup 10 --json "$D/gptnoepi.json"
# the same with only the gelu' pass (the dbias epilogue kept)
step gptnodgelu 45 env PLUMB_GPT_DGELU_EPI=0 $P bench gpt --preset gpt2-124m --batch 16 \
  --device cuda --precision bf16 --steps 30 --warmup 10 --json "$D/gptnodgelu.json"
# the same with dwte's GEMM over V rows (not padded to 8)
step gptnopad 45 env PLUMB_GPT_DWTE_PAD=0 $P bench gpt --preset gpt2-124m --batch 16 \
  --device cuda --precision bf16 --steps 30 --warmup 10 --json "$D/gptnopad.json"
# the MLP's GELU after its GEMM (not in the GELU_AUX_BIAS epilogue)
step gptnogelu 45 env PLUMB_GPT_GELU_EPI=0 $P bench gpt --preset gpt2-124m --batch 16 \
  --device cuda --precision bf16 --steps 30 --warmup 10 --json "$D/gptnogelu.json"
# the dw slice rule's tile target (PLUMB_GPT_DW_SLICES=tiles:N; the default
# 128), plumb alone
step gptdw64 45 env PLUMB_GPT_DW_SLICES=tiles:64 $P bench gpt --preset gpt2-124m --batch 16 \
  --device cuda --precision bf16 --steps 30 --warmup 10 --json "$D/gptdw64.json"
step gptdw256 45 env PLUMB_GPT_DW_SLICES=tiles:256 $P bench gpt --preset gpt2-124m --batch 16 \
  --device cuda --precision bf16 --steps 30 --warmup 10 --json "$D/gptdw256.json"
step gptdw512 45 env PLUMB_GPT_DW_SLICES=tiles:512 $P bench gpt --preset gpt2-124m --batch 16 \
  --device cuda --precision bf16 --steps 30 --warmup 10 --json "$D/gptdw512.json"
# the classifier rows' block size (PLUMB_GPT_XENT_TPB; the default 1024): 256
# (8 rows a SM in flight) and 512 (4 a SM), plumb alone
step gptx256 45 env PLUMB_GPT_XENT_TPB=256 $P bench gpt --preset gpt2-124m --batch 16 \
  --device cuda --precision bf16 --steps 30 --warmup 10 --json "$D/gptx256.json"
step gptx512 45 env PLUMB_GPT_XENT_TPB=512 $P bench gpt --preset gpt2-124m --batch 16 \
  --device cuda --precision bf16 --steps 30 --warmup 10 --json "$D/gptx512.json"
# dbias in our column sums, and the classifier's rows read twice, plumb alone
step gptnobgrad 45 env PLUMB_GPT_BGRAD_EPI=0 $P bench gpt --preset gpt2-124m --batch 16 \
  --device cuda --precision bf16 --steps 30 --warmup 10 --json "$D/gptnobgrad.json"
step gptnostage 45 env PLUMB_GPT_XENT_STAGE=0 $P bench gpt --preset gpt2-124m --batch 16 \
  --device cuda --precision bf16 --steps 30 --warmup 10 --json "$D/gptnostage.json"
# the classifier's row chunk (the hook PLUMB_GPT_XENT_CHUNK_BYTES caps a
# chunk's logits counted as fp32; the default is one chunk of 16384 rows):
# 2 GiB gives 2 of 8192, 4 GiB one (the default's rows), plumb alone
step gptch2 45 env PLUMB_GPT_XENT_CHUNK_BYTES=2147483648 $P bench gpt --preset gpt2-124m --batch 16 \
  --device cuda --precision bf16 --steps 30 --warmup 10 --json "$D/gptch2.json"
step gptch1 45 env PLUMB_GPT_XENT_CHUNK_BYTES=4294967296 $P bench gpt --preset gpt2-124m --batch 16 \
  --device cuda --precision bf16 --steps 30 --warmup 10 --json "$D/gptch1.json"
# resnet18's torch.compile took over 80 s to compile on an H100 host (BENCHMARKS.md 2026-12-05 18:08)
step r18 130 $P bench resnet --device cuda --preset resnet18 --batch 512 --precision bf16 --steps 30 --warmup 5 \
  --leak-steps 0 $(vs r18 120 --torch-timeout 110) --json "$D/r18.json"
# resnet18 with the mirror path (fp32 activations and 16-bit mirrors), against the default 16-bit activations
step r18mir 40 env PLUMB_RESNET_ACT16=0 $P bench resnet --device cuda --preset resnet18 --batch 512 --precision bf16 \
  --steps 30 --warmup 5 --leak-steps 0 --json "$D/r18mir.json"
step r50 170 env PLUMB_CONV_LOG=1 PLUMB_CONV_CACHE=off $P bench resnet --device cuda --preset resnet50 --batch 256 --precision bf16 --steps 20 \
  --warmup 3 --leak-steps 0 $(vs r50 165 --torch-timeout 150) --json "$D/r50.json"
# what determinism costs resnet50's convolutions: cuDNN's Find times of the
# algorithm taken (deterministic) against the fastest of any kind, summed
# per direction over the plans (src/gpu/conv_lib.cu, PLUMB_CONV_LOG)
[ -f "$D/r50.log" ] && python3 - "$D/r50.log" <<'PY' 2>&1 | tee -a "$LOG"
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
# resnet50 with the stem padded to 8 channels instead of space-to-depth
# (PLUMB_CONV_S2D=0; docs/RESNET.md), plumb alone, the picks file on: its
# step against r50's
step r50s2d 45 env PLUMB_CONV_S2D=0 PLUMB_CONV_LOG=1 $P bench resnet --device cuda --preset resnet50 --batch 256 \
  --precision bf16 --steps 20 --warmup 3 --leak-steps 0 --json "$D/r50s2d.json"
[ -f "$D/r50s2d.log" ] && grep -E "cudnn (fwd|wgrad) .*C8 -> K64 R7xS7" "$D/r50s2d.log" | tee -a "$LOG"
step r152 90 env PLUMB_CONV_LOG=1 PLUMB_CONV_CACHE=off $P bench resnet --device cuda --preset resnet152 --batch 64 --precision fp32,bf16 --steps 30 --warmup 5 \
  --leak-steps 0 --json "$D/r152.json"
log "gpu-headline: $((SECONDS - T0)) s of $BUDGET"
