#!/usr/bin/env bash
# The GPU machine's one script (issue 3). Runs on the GPU host from the
# folder scripts/gpu-prep.sh filled (build/ made on the build machine: the
# GPU host has no -dev headers), builds nothing, and:
#   1. records the machine (nvidia-smi, driver, ldd of every binary; carried
#      fallback libraries are used only for what the host lacks);
#   2. runs the whole test binary with PLUMB_TEST_DEVICE=cuda first, unfiltered, and stops
#      with a verdict when anything fails (scripts/gpu-suite.sh; the GPU tests run,
#      the rest run as on the CPU);
#   3. plumb accept --quick (cuda is included when the plugin loads);
#   4. rng and golden-numerics digests on cuda vs cpu (plumb rng / numerics);
#   5. plumb bench ceilings on cuda and bench/torch_ceilings.py side by side;
# and writes results.json plus logs under $OUT (or ./gpu-check-out).
# Never changes clocks, power, MIG or persistence; NCCL multicast stays off.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
OUT=${OUT:-$here/gpu-check-out}
mkdir -p "$OUT"
LOG=$OUT/gpu-check.log
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
: >"$LOG"
declare -A STATUS
log() { echo "$*" | tee -a "$LOG"; }
step() { # step NAME TIMEOUT_S CMD...: runs, logs, records the exit code
  local name=$1 t=$2; shift 2
  log ""; log "==== $name: $*"
  local t0=$SECONDS
  timeout "$t" "$@" >"$OUT/$name.out" 2>&1
  local rc=$?
  cat "$OUT/$name.out" >>"$LOG"
  STATUS[$name]=$rc
  log "==== $name: exit $rc ($((SECONDS - t0)) s)"
  tail -n 40 "$OUT/$name.out"
  return 0
}

# ---- 1. the machine and its libraries ----
log "gpu-check $(cat COMMIT 2>/dev/null) on $(hostname) at $(date -u +%FT%TZ)"
nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.limit,persistence_mode,mig.mode.current --format=csv >>"$OUT/nvidia-smi.txt" 2>&1
cat "$OUT/nvidia-smi.txt" | tee -a "$LOG"
. "$here/scripts/gpu-libs.sh"
log ""; log "==== ldd"
for f in build/plumb build/plumb-tests build/libplumb-cuda.so; do echo "-- $f"; ldd "$f"; done 2>&1 | tee -a "$LOG" >"$OUT/ldd.txt"
if grep -q "not found" "$OUT/ldd.txt"; then log "WARNING: unresolved libraries:"; grep "not found" "$OUT/ldd.txt" | tee -a "$LOG"; fi
export PLUMB_BACKEND_PATH=$here/build
# the whole GPU suite first, unfiltered: a red suite stops the script with a verdict
. "$here/scripts/gpu-suite.sh"

# ---- 2. tests on the cuda device ----
# (the unfiltered suite ran first: scripts/gpu-suite.sh)
step doctor 60 build/plumb doctor

# ---- 3. accept --quick (cuda included when the plugin loads) ----
if build/plumb accept --help >/dev/null 2>&1; then
  step accept 420 build/plumb accept --quick --out "$here/run-accept"
  (cd "$here" && tar czf "$OUT/accept-run.tar.gz" run-accept 2>/dev/null)
else
  log "accept: not in this build"; STATUS[accept]=skip
fi

# ---- 4. rng and golden numerics: cuda digests vs cpu ----
if build/plumb rng --help >/dev/null 2>&1; then
  step rng 240 build/plumb rng --device cuda
else
  log "rng: not in this build"; STATUS[rng]=skip
fi
if build/plumb numerics --help >/dev/null 2>&1; then
  step numerics_golden 300 build/plumb numerics --device cuda --numerics golden
  step numerics_fast 300 build/plumb numerics --device cuda --numerics fast
else
  log "numerics: not in this build"; STATUS[numerics_golden]=skip
fi

# ---- 5. ceilings, then PyTorch on the same device in the same run ----
step ceilings 300 build/plumb bench ceilings --device cuda --json "$OUT/ceilings.json"
step torch 300 python3 bench/torch_ceilings.py --plumb "$OUT/ceilings.json" --json "$OUT/torch_ceilings.json"
# the same with split-K reductions forbidden (PLUMB_GEMM_REDUCTION=none):
# bits reproducible across runs and streams (the gemm tests), and its speed
step tests_noreduce 120 env PLUMB_TEST_DEVICE=cuda PLUMB_GEMM_REDUCTION=none build/plumb-tests gpu_fast_gemm
step ceilings_noreduce 120 env PLUMB_GEMM_REDUCTION=none build/plumb bench ceilings --device cuda --copy-mib 0 \
  --shapes 8192x8192x8192,32768x512x367,2048x1024x1024 --json "$OUT/ceilings_noreduce.json"
step torch_noreduce 60 python3 bench/torch_ceilings.py --reuse "$OUT/torch_ceilings.json" --plumb "$OUT/ceilings_noreduce.json"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >>"$LOG" 2>&1

# ---- results.json ----
st=""
for k in "${!STATUS[@]}"; do st="$st\"$k\": \"${STATUS[$k]}\", "; done
python3 - "$OUT" "{${st%, }}" <<'PY'
import json, os, sys, subprocess
out, st = sys.argv[1], json.loads(sys.argv[2])
def load(p):
    try:
        with open(os.path.join(out, p)) as f: return json.load(f)
    except Exception as e: return {"error": str(e)}
try:
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
except OSError as e:
    smi = f"nvidia-smi unavailable: {e}"
res = {"schema": "plumb.gpu_check/1", "gpu": smi, "ceilings_noreduce": load("ceilings_noreduce.json"), "commit": open("COMMIT").read().strip() if os.path.exists("COMMIT") else "",
       "steps": st, "ceilings": load("ceilings.json"), "torch": load("torch_ceilings.json")}
ok = all(v in ("0", "skip") for v in st.values())
res["verdict"] = "pass" if ok else "fail"
with open(os.path.join(out, "results.json"), "w") as f: json.dump(res, f, indent=1)
print("steps:", ", ".join(f"{k}={v}" for k, v in sorted(st.items())), "->", res["verdict"])
PY
# keep $OUT within the device tool's 8 returned files
rm -f "$OUT"/ldd.txt "$OUT"/nvidia-smi.txt  # both are in gpu-check.log
for f in "$OUT"/*.out; do [ -e "$f" ] || continue; done
(cd "$OUT" && ls *.out >/dev/null 2>&1 && tar czf step-outputs.tar.gz *.out && rm -f *.out)
ls -la "$OUT"
