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
# the convolution picks kept across processes (src/gpu/conv_picks.h): two
# processes training resnet50 (cuDNN plans) fast with one picks file must end
# with the same parameters; the second reads every pick (no Find); the file's
# lines are kept with the logs
if [ -z "${GRAPHS_ONLY:-}" ] || [[ picks =~ $GRAPHS_ONLY ]]; then
  rm -f "$D/picks.txt"
  for k in 1 2; do
    t1=$SECONDS
    PLUMB_CONV_CACHE=$D/picks.txt timeout 120 $P train resnet --preset resnet50 --device cuda --numerics fast \
      --precision bf16 --batch 32 --steps 6 --param-digest --out "$D/picks-run$k" >"$D/picks-$k.log" 2>&1
    log "==== picks run $k: exit $? ($((SECONDS - t1)) s), $(grep -o 'param_digest [0-9a-f]*' "$D/picks-$k.log" | head -1), $(wc -l <"$D/picks.txt" 2>/dev/null || echo 0) lines in the file"
  done
  d1=$(grep -o 'param_digest [0-9a-f]*' "$D/picks-1.log" | head -1); d2=$(grep -o 'param_digest [0-9a-f]*' "$D/picks-2.log" | head -1)
  if [ -n "$d1" ] && [ "$d1" = "$d2" ]; then log "picks: two processes, the same digest"; else log "picks: DIGESTS DIFFER ($d1 / $d2)"; fi
fi
log "gpu-graphs: $((SECONDS - T0)) s of $BUDGET"
