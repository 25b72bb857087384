#!/usr/bin/env bash
# resnet's GPU evidence (docs/RESNET.md), on the GPU host, from the folder
# scripts/gpu-prep.sh fills (prebuilt build/ with libplumb-cuda.so, scripts/,
# bench/). The unfiltered GPU suite (scripts/gpu-suite.sh, which holds
# gpu_vision: every vision op cuda = cpu golden bits) runs before this and is
# not repeated here. Steps, each under `timeout`, all within RESNET_BUDGET_S
# (default 280 s, so the summary prints inside gpu-round.sh's resnet:300;
# a step gets at most what is left):
#   cifar18  plumb bench resnet --preset resnet18 (CIFAR stem) batch 512 bf16
#            --vs-pytorch compile, and --golden-steps 10: resnet-tiny's golden
#            digest on cuda = the cpu's (the trainer, batch 64, same seed)
#   r50      resnet50 at 224x224, batch 256, bf16 against torch.compile (16-bit
#            activations, models/resnet/resnet16.c, the default)
#   r50mir   the same with PLUMB_RESNET_ACT16=0 (fp32 activations + 16-bit
#            mirrors: the path before issue 19's pipeline), plumb only
#   r152     resnet152 at 224x224, batch 128, fp32 (strict: no TF32), bf16 and
#            fp16: the source documents' single-GPU table shape (plumb only)
#   accept   plumb accept --checks train-resnet --device cuda, if budget is left
# Every measurement is a few warm-up steps (the cuDNN Find happens there)
# and 20 timed steps through the trainer's own step. Figures go to
# BENCHMARKS.md (a resnet section). Run it as `bash scripts/gpu-round.sh
# resnet:300` or alone. Writes logs and JSON under
# $OUT/resnet/ and prints a summary. NVLink multicast stays off; clocks,
# power and MIG are left alone.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
OUT=${OUT:-$here/gpu-out}/resnet
mkdir -p "$OUT"
LOG=$OUT/gpu-resnet.log
: >"$LOG"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
BUDGET=${RESNET_BUDGET_S:-280}
T_START=$SECONDS
log() { echo "$*" | tee -a "$LOG"; }
step() { # step NAME TIMEOUT_S CMD...: the timeout shrinks to the budget left
  local name=$1 t=$2; shift 2
  local left=$((BUDGET - (SECONDS - T_START)))
  if [ "$left" -lt 20 ]; then log "==== $name: not run (${left} s of the ${BUDGET} s budget left)"; return; fi
  [ "$t" -gt "$left" ] && t=$left
  log ""; log "==== $name (timeout ${t} s): $*"
  local t0=$SECONDS
  timeout "$t" "$@" >>"$LOG" 2>&1
  local rc=$?
  log "==== $name: exit $rc ($((SECONDS - t0)) s)"
}
log "gpu-resnet, $(cat COMMIT 2>/dev/null) on $(hostname) at $(date -u +%FT%TZ), budget ${BUDGET} s"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | tee -a "$LOG"
. "$here/scripts/gpu-libs.sh"
export PLUMB_BACKEND_PATH=$here/build
# cuDNN: the image's PyTorch wheel brings libcudnn.so.9 (conv_lib.cu also looks
# there by itself; naming it here puts the path in the log)
cudnn=$(python3 -c 'import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], "lib", "libcudnn.so.9"))' 2>/dev/null)
[ -n "$cudnn" ] && [ -e "$cudnn" ] && export PLUMB_CUDNN_LIB=$cudnn
log "PLUMB_CUDNN_LIB=${PLUMB_CUDNN_LIB:-unset (soname search)}; torch $(python3 -c 'import torch;print(torch.__version__)' 2>/dev/null)"

B="build/plumb bench resnet --device cuda --warmup 3 --steps 20 --leak-steps 5 --threads 12"
# torch.compile's first call compiles (tens of seconds): --torch-timeout caps it so
# a slow compile costs the PyTorch figure, never plumb's
step cifar18 95 $B --preset resnet18 --batch 512 --precision bf16 --vs-pytorch --torch-modes compile \
  --torch-timeout 70 --golden-steps 10 --golden-batch 64 --json "$OUT/cifar18.json"
step r50 120 $B --preset resnet50 --batch 256 --precision bf16 --vs-pytorch --torch-modes compile \
  --torch-timeout 90 --pool 1024 --json "$OUT/r50.json"
step r50mir 50 env PLUMB_RESNET_ACT16=0 $B --preset resnet50 --batch 256 --precision bf16 --pool 1024 \
  --json "$OUT/r50mir.json"
step r152 65 $B --preset resnet152 --batch 128 --precision fp32,bf16,fp16 --pool 512 --json "$OUT/r152.json"
# plumb accept's train-resnet on cuda (golden digest = cpu's, fast top-1 within the cpu's
# seed spread): only with the budget the measurements left
step accept 90 build/plumb accept --checks train-resnet --device cuda --out "$OUT/accept"

# summary from the JSON (python3: jq is not on every GPU image)
python3 - "$OUT" <<'PY' 2>&1 | tee "$OUT/summary.txt" | tee -a "$LOG"
import json, os, sys
d = sys.argv[1]
def load(n):
    try:
        return json.load(open(os.path.join(d, n + ".json")))
    except Exception as ex:
        print(f"{n}: no figures ({ex.__class__.__name__})")
        return None
j = load("cifar18")
if j and "golden" in j:
    g = j["golden"]
    print(f"golden {g['preset']} batch {g['batch']} x {g['steps']} steps: cuda {g['digest_device'][:16]} cpu "
          f"{g['digest_cpu'][:16]} -> {'EQUAL' if g['equal'] else 'DIFFERENT'}")
for n in ("cifar18", "r50", "r50mir", "r152"):
    j = load(n) if n != "cifar18" else j
    if not j:
        continue
    for r in j.get("results", []):
        s = (f"{j.get('preset', n):10s} {r['precision']:5s} batch {r['batch']:4d}: {r['images_per_s']:9.1f} img/s, "
             f"step {r['step_ms']:.2f} ms, peak {r['peak_allocated_bytes'] / 2**30:.2f} GiB, leak {r['leak']}, "
             f"{r.get('activations', '?')} activations")
        if r.get("torch_compile_images_per_s"):
            s += f" | torch.compile {r['torch_compile_images_per_s']:.1f} img/s, ratio {r['ratio_vs_compile']:.2f}x"
        elif r.get("torch_compile_error"):
            s += f" | torch.compile: {r['torch_compile_error']}"
        print(s)
try:
    for c in json.load(open(os.path.join(d, "accept", "results.json")))["checks"]:
        m = {x["name"]: x["value"] for x in c.get("metrics", [])}
        print(f"accept {c['name']} {c['device']}: {c['status'].upper()} top1 {m.get('top1')} cpu {m.get('top1_cpu')} "
              f"golden match {m.get('golden_digest_match')} {c.get('reason', '')}")
except Exception as ex:
    print(f"accept: no results ({ex.__class__.__name__})")
PY
log "gpu-resnet: $((SECONDS - T_START)) s of the ${BUDGET} s budget"
