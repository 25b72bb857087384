#!/usr/bin/env bash
# plumb accept's training checks for the gpt and resnet workloads on the GPU
# host (from the folder scripts/gpu-prep.sh fills; the suite runs before it):
# per workload, the golden digest on cuda against the cpu's and the fast
# metric within the cpu's seed spread. Writes $OUT/accept/.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
OUT=${OUT:-$here/gpu-out}
D=$OUT/accept
mkdir -p "$D"
export NCCL_NVLS_ENABLE=0
. "$here/scripts/gpu-libs.sh"
export PLUMB_BACKEND_PATH=$here/build
build/plumb accept --standard --checks "${ACCEPT_CHECKS:-train-resnet,train-gpt}" --device cuda --out "$D/run" 2>&1 |
  tee "$D/accept.log" | tail -n 12
