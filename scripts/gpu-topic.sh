# Sourced by a topic script of scripts/gpu-round.sh on the GPU host, with the
# topic's name as $1: the work folder ($here, also the working directory),
# the topic's output folder ($D = $OUT/TOPIC), NVLink multicast off, the
# shared libraries (scripts/gpu-libs.sh), the plugins' path, $P, and KP: the
# env prefix that runs a command under bench/kprof.cc's CUPTI kernel table
# when build/libplumb-kprof.so exists ("${KP[@]}" KPROF_OUT=FILE CMD...).
# With a budget in seconds as $2: $LOG ($D/gpu-TOPIC.log, emptied) that log()
# also writes, left() (seconds of the budget left) and step NAME TIMEOUT_S
# CMD... (under min(TIMEOUT_S, what is left), skipped below 5 s; its output in
# $D/NAME.log; returns the command's exit code, 99 when skipped).
# Helpers: bench_tok FILE (a bench --json's tokens/s, ms/step and graphed
# steps, one line) and torch_cudnn (the host PyTorch wheel's libcudnn.so.9,
# or nothing).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
OUT=${OUT:-$here/gpu-out}
D=$OUT/$1
mkdir -p "$D"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
if [ -n "${2:-}" ]; then
  BUDGET=$2
  T0=$SECONDS
  LOG=$D/gpu-$1.log
  : >"$LOG"
  log() { echo "$*" | tee -a "$LOG"; }
  left() { echo $((BUDGET - (SECONDS - T0))); }
  step() {
    local name=$1 t=$2; shift 2
    local l; l=$(left)
    if [ "$l" -lt 5 ]; then log "==== $name: SKIPPED ($l s of the budget left)"; return 99; fi
    [ "$t" -gt "$l" ] && t=$l
    log "==== $name: $*"
    local t1=$SECONDS
    timeout "$t" "$@" >"$D/$name.log" 2>&1
    local rc=$?
    log "==== $name: exit $rc ($((SECONDS - t1)) s)"
    return $rc
  }
  log "gpu-$1, $(cat COMMIT 2>/dev/null) on $(hostname) at $(date -u +%FT%TZ), budget $BUDGET s"
fi
declare -F log >/dev/null || log() { echo "$*"; }
. "$here/scripts/gpu-libs.sh"
export PLUMB_BACKEND_PATH=$here/build
P=build/plumb
KP=(env)
[ -f build/libplumb-kprof.so ] && KP=(env CUDA_INJECTION64_PATH="$here/build/libplumb-kprof.so" KPROF_TOP=30)
bench_tok() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["rows"][0]; print("%.0f tokens/s, %.2f ms/step, %s graphed steps" % (r["tokens_per_s"], r["step_ms"], r.get("graphed_steps", "?")))' "$1" 2>/dev/null || echo "no result"; }
torch_cudnn() {
  local f
  f=$(python3 -c 'import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], "lib", "libcudnn.so.9"))' 2>/dev/null)
  [ -n "$f" ] && [ -e "$f" ] && echo "$f"
  return 0
}
