#!/usr/bin/env bash
# One device call of a round's GPU evidence, on the GPU host, in the folder
# scripts/gpu-prep.sh fills: the machine, the whole GPU suite unfiltered
# (scripts/gpu-suite.sh: a red suite stops here with a verdict), then each
# topic script named on the command line (scripts/gpu-TOPIC.sh), each under
# its own time limit so one that hangs cannot eat the call.
# Usage: bash scripts/gpu-round.sh TOPIC[:SECONDS] ...   e.g. engine:240 comm:60
# Writes $OUT/round.log, $OUT/gpu-suite.log and $OUT/TOPIC/.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
OUT=${OUT:-$here/round-out}
export OUT GPU_ROUND=1
mkdir -p "$OUT"
LOG=$OUT/round.log
: >"$LOG"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
log() { echo "$*" | tee -a "$LOG"; }
log "gpu-round $(cat COMMIT 2>/dev/null) on $(hostname) at $(date -u +%FT%TZ): $*"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.limit,persistence_mode,mig.mode.current \
  --format=csv 2>&1 | tee -a "$LOG"
# the host's CPU: PyTorch's eager and torch.compile peers launch kernels from
# Python, so their figures move with it (ctr's torch.compile at bf16/32768 was
# 9.5 M samples/s on one H100 host and 15.2 M on another, 2026-12-05)
log "cpu: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores online, load $(cut -d' ' -f1-3 /proc/loadavg)"
. "$here/scripts/gpu-libs.sh"
# jq: the host's, else the one gpu-prep.sh carried
command -v jq >/dev/null 2>&1 || export PATH=$here/bin:$PATH
log "jq: $(command -v jq) $(jq --version 2>&1)"
export PLUMB_BACKEND_PATH=$here/build
. "$here/scripts/gpu-suite.sh"
for spec in "$@"; do
  topic=${spec%%:*}
  limit=${spec#*:}; [ "$limit" = "$spec" ] && limit=300
  s=$here/scripts/gpu-$topic.sh
  if [ ! -f "$s" ]; then log "==== $topic: no $s"; continue; fi
  mkdir -p "$OUT/$topic"
  log ""; log "==== $topic (limit $limit s)"
  t0=$SECONDS
  timeout -k 5 "$limit" bash "$s" >"$OUT/$topic/run.log" 2>&1
  rc=$?
  tail -n 40 "$OUT/$topic/run.log" | tee -a "$LOG"
  log "==== $topic: exit $rc ($((SECONDS - t0)) s)"
done
log "gpu-round done at $(date -u +%FT%TZ)"
# everything in one archive too: the device tool brings back a limited number of files
(cd "$OUT" && tar czf "$OUT/round-all.tar.gz" --exclude=round-all.tar.gz --exclude='*.bin' --exclude='*.tsv' . 2>/dev/null)
exit 0
