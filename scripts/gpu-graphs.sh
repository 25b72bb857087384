#!/usr/bin/env bash
# The deferred synchronous step and its graph (train/trainer.c, docs/TRAINING.md)
# on the GPU host, in the folder scripts/gpu-prep.sh fills (the suite runs
# before it, through scripts/gpu-round.sh): gpt2-124m bf16 B16, resnet50 bf16/256
# and resnet152 bf16/64, each three ways in the one call, no PyTorch:
#   graph   the defaults: forward/backward deferred, captured and replayed;
#   nograph --graph off: deferred, op by op;
#   sync    PLUMB_TRAIN_DEFER=0: the models read their loss back as before.
# GRAPHS_ONLY=REGEX keeps the models whose name (gpt, r50, r152) matches;
# GRAPHS_BUDGET_S (default 280) bounds the whole, every run under `timeout`.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
OUT=${OUT:-$here/gpu-out}
D=$OUT/graphs
mkdir -p "$D"
LOG=$D/graphs.log
: >"$LOG"
export NCCL_NVLS_ENABLE=0
BUDGET=${GRAPHS_BUDGET_S:-280}
T0=$SECONDS
log() { echo "$*" | tee -a "$LOG"; }
. "$here/scripts/gpu-libs.sh"
export PLUMB_BACKEND_PATH=$here/build
P=build/plumb
run() { # run NAME WAY TIMEOUT CMD...
  local name=$1 way=$2 t=$3; shift 3
  if [ -n "${GRAPHS_ONLY:-}" ] && ! [[ $name =~ $GRAPHS_ONLY ]]; then return 0; fi
  local l=$((BUDGET - (SECONDS - T0)))
  if [ "$l" -lt 20 ]; then log "==== $name $way: SKIPPED ($l s left)"; return 0; fi
  [ "$t" -gt "$l" ] && t=$l
  local extra=() env=()
  case $way in
    nograph) extra=(--graph off) ;;
    sync) env=(PLUMB_TRAIN_DEFER=0) ;;
  esac
  log "==== $name $way: ${env[*]} $* ${extra[*]}"
  local t1=$SECONDS
  timeout "$t" env "${env[@]}" "$@" "${extra[@]}" --json "$D/$name-$way.json" >"$D/$name-$way.log" 2>&1
  log "==== $name $way: exit $? ($((SECONDS - t1)) s)"
  grep -E "^(bf16|fp32|fp16) " "$D/$name-$way.log" | tee -a "$LOG"
  [ -f "$D/$name-$way.json" ] && jq -c '[(.rows // .results)[] | {graphed_steps}]' "$D/$name-$way.json" 2>/dev/null | tee -a "$LOG"
}
for way in graph nograph sync; do
  run gpt $way 90 $P bench gpt --preset gpt2-124m --batch 16 --device cuda --precision bf16 --steps 20 --warmup 8
done
for way in graph nograph sync; do
  run r50 $way 90 $P bench resnet --device cuda --preset resnet50 --batch 256 --precision bf16 --steps 15 --warmup 8 \
    --leak-steps 0
done
for way in graph nograph sync; do
  run r152 $way 90 $P bench resnet --device cuda --preset resnet152 --batch 64 --precision bf16 --steps 20 --warmup 8 \
    --leak-steps 0
done
log "gpu-graphs: $((SECONDS - T0)) s of $BUDGET"
