#!/usr/bin/env bash
# plumb accept's training checks for the gpt and resnet workloads on the GPU
# host (from the folder scripts/gpu-prep.sh fills; the suite runs before it):
# per workload, the golden digest on cuda against the cpu's and the fast
# metric within the cpu's seed spread. Writes $OUT/accept/.
set -u
. "$(dirname "$0")/gpu-topic.sh" accept
$P accept --standard --checks "${ACCEPT_CHECKS:-train-resnet,train-gpt}" --device cuda --out "$D/run" 2>&1 |
  tee "$D/accept.log" | tail -n 12
