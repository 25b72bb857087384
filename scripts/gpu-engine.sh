#!/usr/bin/env bash
# The engine's speed against the build before it, in one GPU call (docs/ARCHITECTURE.md:
# the trainer over the model interface must not cost speed). Runs on the GPU host in the
# folder scripts/gpu-prep.sh fills, after scripts/gpu-suite.sh, with the build before
# the engine in old/ (plumb + libplumb-cuda.so, made by OLD_BUILD=DIR scripts/gpu-prep.sh).
# Alternates old and new twice for each figure so drift between them shows:
#   bench ctr  bf16/32768 and fp32/2048 (samples/s)
#   train ctr  --preset dlrm-kaggle bf16/32768 and fp32/2048 (results.json samples_per_s)
# Writes $OUT/engine/*.json and summary.txt. Budget: about 4 GPU minutes.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
O=${OUT:-$here/out}/engine
mkdir -p "$O"
export NCCL_NVLS_ENABLE=0
W=$(mktemp -d)
run_bench() { # run_bench TAG DIR PREC BATCH STEPS
  local tag=$1 dir=$2 prec=$3 batch=$4 steps=$5
  PLUMB_BACKEND_PATH=$here/$dir timeout 120 "$here/$dir/plumb" bench ctr --device cuda --workdir "$W" --threads 12 \
    --precision "$prec" --batch "$batch" --steps "$steps" --warmup 20 --leak-steps 0 --json "$O/bench-$tag.json" \
    >"$O/bench-$tag.out" 2>&1
  local sps
  sps=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(int(d['results'][0]['samples_per_s']))" \
        "$O/bench-$tag.json" 2>/dev/null || grep -E "^$prec +$batch" "$O/bench-$tag.out" | awk '{print $4}')
  echo "bench $tag $prec/$batch: ${sps:-?} samples/s" | tee -a "$O/summary.txt"
}
run_train() { # run_train TAG DIR PREC BATCH STEPS
  local tag=$1 dir=$2 prec=$3 batch=$4 steps=$5
  PLUMB_BACKEND_PATH=$here/$dir timeout 150 "$here/$dir/plumb" train ctr --preset dlrm-kaggle --device cuda \
    --precision "$prec" --batch "$batch" --steps "$steps" --eval-samples 65536 --health-interval 0 \
    --out "$W/train-$tag" >"$O/train-$tag.out" 2>&1
  local rc=$?
  cp "$W/train-$tag/results.json" "$O/train-$tag.results.json" 2>/dev/null
  local sps
  sps=$(python3 -c "
import json,sys
d=json.load(open(sys.argv[1]))
def find(o):
    if isinstance(o,dict):
        for k,v in o.items():
            if k=='samples_per_s' and isinstance(v,(int,float)): return v
            if isinstance(v,dict) and v.get('name')=='samples_per_s': return v.get('value')
            r=find(v)
            if r is not None: return r
    if isinstance(o,list):
        for v in o:
            r=find(v)
            if r is not None: return r
print(int(find(d)))" "$O/train-$tag.results.json" 2>/dev/null)
  echo "train $tag $prec/$batch: ${sps:-?} samples/s (exit $rc)" | tee -a "$O/summary.txt"
}
: >"$O/summary.txt"
echo "engine speed: new $(cat COMMIT 2>/dev/null) vs old $(cat old/COMMIT 2>/dev/null)" | tee -a "$O/summary.txt"
for rep in $(seq 1 "${ENGINE_REPS:-2}"); do
  for b in old build; do
    run_bench "$b-bf16-$rep" "$b" bf16 32768 100
    run_bench "$b-fp32-$rep" "$b" fp32 2048 200
  done
done
for rep in $(seq 1 "${ENGINE_REPS:-2}"); do
  for b in old build; do
    run_train "$b-bf16-$rep" "$b" bf16 32768 400
    run_train "$b-fp32-$rep" "$b" fp32 2048 1500
  done
done
rm -rf "$W"
