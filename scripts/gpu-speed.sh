#!/usr/bin/env bash
# plumb train at the speed of the benchmark, on the GPU host (one H200),
# from the folder scripts/gpu-prep.sh filled (prebuilt build/, scripts/,
# bench/, tests/, fallback/). The unfiltered GPU suite runs before this
# script (scripts/gpu-suite.sh); it is not repeated here. At most ~5 GPU
# minutes: every step under `timeout`, and the later steps are skipped once
# the budget is spent. Writes logs and JSON under $OUT/speed/, prints a
# summary. NVLink multicast stays off; clocks, power and MIG are untouched.
#
#   ops      the queued step's device-count and gated ops, GPU = cpu
#            (plumb-tests gpu_train_small_ops)
#   golden   golden digest, dlrm-kaggle --rows 1000, cuda = cpu (bench ctr --golden-steps)
#   train    plumb train ctr --preset dlrm-kaggle, bf16/32768 and fp32/2048, --graph on and
#            off, steady-state samples/s from metrics.jsonl (steps after the first 20%),
#            start-up (set-up) and eval apart; fast digests graph on = graph off
#            = the synchronous step (PLUMB_TRAIN_QUEUE=0) at fp32
#   log100   the same with --log-every 100 (step lines and the gradient norm every 100th
#            step, not every step): speed, and digest = the every-step run's
#   torch    plumb bench ctr --vs-pytorch in the same run: bf16/32768 against
#            torch.compile, fp32/2048 against eager (bench/ctr_pytorch_gpu.py)
#   auc      plumb bench ctr --to-auc 0.74 --vs-pytorch (the teacher of its data seed: AUC 0.779): time to AUC, plumb's trainer
#            against PyTorch's own loop (bench/ctr_to_auc_pytorch.py, DataLoader with
#            pinned memory), batch 2048, SGD lr 0.1, warm-up 100, eval every 250 steps
#   unfused  bf16/32768 with --fuse-sparse-sgd no (the default fuses): speed and digest
#   copies   bf16/32768 with PLUMB_TRAIN_STATUS=copy (the outcome by two D2H copies, not
#            status_to_host's one launch): speed and digest
#   loader   bench ctr bf16/32768 five times: the loader/device ratio of each
#   tsv      a 10 M-line Criteo TSV generated on the host (plumb data synth-criteo in 16
#            shards), trained from the file in page cache and from its binary cache
#            (plumb data cache) at bf16/32768, against the synthetic figure
# SPEED_SKIP=REGEX skips the steps whose names match (bash =~), e.g.
# '^train-(fp32-2048-sync|bf16-32768-(unfused|copies))$' for the side experiments.
# Figures belong in BENCHMARKS.md, "plumb train at the speed of the benchmark".
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
OUT=${OUT:-$here/gpu-out}
O=$OUT/speed
mkdir -p "$O"
LOG=$O/speed.log
: >"$LOG"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
BUDGET=${SPEED_BUDGET_S:-330}
T0=$SECONDS
log() { echo "$*" | tee -a "$LOG"; }
step() { # step NAME TIMEOUT_S CMD...: skipped once the budget is spent, or when NAME matches $SPEED_SKIP
  local name=$1 t=$2; shift 2
  if [ -n "${SPEED_SKIP:-}" ] && [[ $name =~ $SPEED_SKIP ]]; then log "==== $name: SKIPPED (SPEED_SKIP)"; return 98; fi
  local left=$((BUDGET - (SECONDS - T0)))
  if [ "$left" -lt 10 ]; then log "==== $name: SKIPPED (budget of ${BUDGET} s spent)"; return 99; fi
  [ "$t" -gt "$left" ] && t=$left
  log "==== $name (timeout $t s): $*"
  local s0=$SECONDS
  timeout "$t" "$@" >"$O/$name.out" 2>&1
  local rc=$?
  cat "$O/$name.out" >>"$LOG"
  log "==== $name: exit $rc ($((SECONDS - s0)) s)"
  return $rc
}
log "gpu-speed $(cat COMMIT 2>/dev/null) on $(hostname) at $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | tee -a "$LOG"
. "$here/scripts/gpu-libs.sh"
export PLUMB_BACKEND_PATH=$here/build
P=build/plumb
W=/tmp/gpu-speed; mkdir -p $W
TH=$(( $(nproc) - 2 )); [ $TH -gt 16 ] && TH=16
K="--preset dlrm-kaggle --device cuda --train-samples 4194304 --eval-samples 65536 --health-interval 0 --param-digest"

# steady-state samples/s of a run folder: the steps after the first 20% (capture, warm-up);
# metrics.jsonl is in the run's check folder, checks/train-ctr-cuda/ on a GPU.
# Samples over seconds: a line's samples are interval_steps (--log-every) times its own
# step's (samples_per_s * step_s: a partial last batch of an epoch counts what it holds),
# its seconds those samples over interval_samples_per_s. (Averaging the rates with equal
# weights, as this did before 2026-12-05, counted a 4,064-sample partial batch's 62 ms as
# a full batch's 0.5 s and put the TSV runs at 0.60 of synthetic instead of 0.93.)
steady() { jq -s '[.[] | select(.type == "step")] as $s | ($s | map(.step) | max) as $n |
  [$s[] | select(.step > ($n / 5 | floor)) |
   ((.interval_steps // 1) * .samples_per_s * .step_s) as $k |
   {k: $k, t: ($k / (.interval_samples_per_s // .samples_per_s))}] |
  ((map(.k) | add) / (map(.t) | add))' \
  "$1"/checks/train-ctr*/metrics.jsonl 2>/dev/null; }
dg() { awk '/^param_digest/{print $2}' "$1" 2>/dev/null; }
setup_s() { jq -r '.train.setup_s' "$1/results.json" 2>/dev/null; }
evals_s() { jq -r '.train.eval_s' "$1/results.json" 2>/dev/null; }

step ops 40 env PLUMB_TEST_DEVICE=cuda build/plumb-tests gpu_train_small_ops
step golden 60 $P bench ctr --device cuda --workdir $W --no-throughput --golden-steps 20 --golden-rows 1000 \
  --golden-batch 2048 --pool 65536 --json "$O/golden.json"

# plumb train, graph on and off (and the synchronous step at fp32)
declare -A SPS
for cfg in bf16:32768:800 fp32:2048:3000; do
  IFS=: read -r pr bs n <<<"$cfg"
  for g in on off; do
    step "train-$pr-$bs-graph-$g" 60 $P train ctr $K --precision $pr --batch $bs --steps $n --graph $g \
      --out "$O/train-$pr-$bs-$g"
    SPS[$pr-$bs-$g]=$(steady "$O/train-$pr-$bs-$g")
    log "  run folder: $(cd "$O/train-$pr-$bs-$g" 2>/dev/null && find . -type f | tr '\n' ' '); steady ${SPS[$pr-$bs-$g]:-none}"
  done
done
# step lines (and the gradient norm) every 100th step only (--log-every 100)
for cfg in bf16:32768:800 fp32:2048:3000; do
  IFS=: read -r pr bs n <<<"$cfg"
  step "train-$pr-$bs-log100" 60 $P train ctr $K --precision $pr --batch $bs --steps $n --log-every 100 \
    --out "$O/train-$pr-$bs-log100"
  SPS[$pr-$bs-log100]=$(steady "$O/train-$pr-$bs-log100")
done
# the sparse SGD from the row list (--fuse-sparse-sgd no) against the default fused backward
step train-bf16-32768-unfused 60 $P train ctr $K --precision bf16 --batch 32768 --steps 800 --fuse-sparse-sgd no \
  --out "$O/train-bf16-32768-unfused"
SPS[bf16-32768-unfused]=$(steady "$O/train-bf16-32768-unfused")
# the queued outcome by two copies against the one device write (the default)
step train-bf16-32768-copies 60 env PLUMB_TRAIN_STATUS=copy $P train ctr $K --precision bf16 --batch 32768 --steps 800 \
  --out "$O/train-bf16-32768-copies"
SPS[bf16-32768-copies]=$(steady "$O/train-bf16-32768-copies")
step train-fp32-2048-sync 60 env PLUMB_TRAIN_QUEUE=0 $P train ctr $K --precision fp32 --batch 2048 --steps 3000 \
  --out "$O/train-fp32-2048-sync"
SPS[fp32-2048-sync]=$(steady "$O/train-fp32-2048-sync")

# PyTorch in the same run (and bench ctr's own figures through the trainer's step)
step torch-bf16 150 $P bench ctr --device cuda --workdir $W --threads $TH --precision bf16 --batch 32768 --steps 100 \
  --warmup 20 --leak-steps 0 --vs-pytorch --torch-modes compile --json "$O/torch-bf16.json"
step torch-fp32 60 $P bench ctr --device cuda --workdir $W --threads $TH --precision fp32 --batch 2048 --steps 200 \
  --warmup 20 --leak-steps 0 --vs-pytorch --torch-modes eager --json "$O/torch-fp32.json"

# the loader column against the device column, five runs (goal: within 5% in each)
for i in 1 2 3 4 5; do
  step loader-$i 40 $P bench ctr --device cuda --workdir $W --threads $TH --precision bf16 --batch 32768 --steps 200 \
    --warmup 20 --leak-steps 0 --json "$O/loader-$i.json"
done

# time to AUC
step to-auc 90 $P bench ctr --device cuda --workdir $W --no-throughput --pool 4194304 --auc-eval 131072 \
  --to-auc 0.74 --to-auc-batch 2048 --to-auc-lr 0.1 --to-auc-warmup 100 --to-auc-every 250 --to-auc-max-steps 12000 \
  --vs-pytorch --to-auc-torch-modes eager --json "$O/to-auc.json"

# the file data plane: 10 M lines generated on the host in 16 shards, then the file and its cache
TSV=$W/day10m.tsv
gen() {
  local n=10000000 k=16 i
  for i in $(seq 0 $((k - 1))); do
    $P data synth-criteo --first $((i * n / k)) --rows $((n / k)) --out "$W/part$i.tsv" >/dev/null &
  done
  wait
  cat $(for i in $(seq 0 $((k - 1))); do echo "$W/part$i.tsv"; done) >"$TSV" && rm -f "$W"/part*.tsv
  wc -l "$TSV"
}
rm -f "$TSV" "$TSV.plumbcache"
step tsv-gen 90 bash -c "$(declare -f gen); P=$P W=$W TSV=$TSV; gen"
F="--preset dlrm-kaggle --device cuda --eval-fraction 0.01 --health-interval 0 --precision bf16 --batch 32768 --steps 800"
step tsv-file 60 $P train ctr $F --data "$TSV" --out "$O/tsv-file"
step tsv-cache-write 60 $P data cache "$TSV"
step tsv-cache 60 $P train ctr $F --data "$TSV" --out "$O/tsv-cache"
# the same with every kernel loaded at start-up: whether the first partial batch's
# one-time cost (45-62 ms on 2026-12-05) is CUDA's lazy module loading
step tsv-cache-eager 60 env CUDA_MODULE_LOADING=EAGER $P train ctr $F --data "$TSV" --out "$O/tsv-cache-eager"
SPS[tsv-file]=$(steady "$O/tsv-file")
SPS[tsv-cache]=$(steady "$O/tsv-cache")
SPS[tsv-cache-eager]=$(steady "$O/tsv-cache-eager")
# the partial batches' steps: "step:samples:step ms (data wait ms, compute ms)" for each step
# line with fewer samples than the batch
ms() { echo "(.$1 * 10000 | round / 10)"; }
partials() { jq -r -s '[.[] | select(.type == "step" and (.samples_per_s * .step_s) < 32000) |
  "\(.step):\(.samples_per_s * .step_s | round):\('"$(ms step_s)"')ms(wait \('"$(ms data_wait_s)"'), compute \('"$(ms compute_s)"'))"] | join(" ")' \
  "$1"/checks/train-ctr*/metrics.jsonl 2>/dev/null; }

# summary
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else printf "-" }'; }
tj() { jq -r "$2" "$O/$1.json" 2>/dev/null; }
{
echo ""
echo "== summary (gpu-speed, $(cat COMMIT 2>/dev/null)) =="
echo "ops test:        $(tail -1 "$O/ops.out" 2>/dev/null)"
echo "golden digest:   cuda = cpu: $(tj golden .golden.equal)"
for c in bf16-32768 fp32-2048; do
  on=${SPS[$c-on]:-}; off=${SPS[$c-off]:-}
  printf 'train %-11s graph on %12.0f  graph off %12.0f samples/s (steady)  on/off %s; set-up %s s, eval %s s (apart)\n' \
    "$c" "${on:-0}" "${off:-0}" "$(ratio "${on:-0}" "${off:-0}")" "$(setup_s "$O/train-$c-on")" "$(evals_s "$O/train-$c-on")"
done
printf 'train fp32-2048  synchronous step (PLUMB_TRAIN_QUEUE=0) %12.0f samples/s\n' "${SPS[fp32-2048-sync]:-0}"
a=$(dg "$O/train-fp32-2048-graph-on.out"); b=$(dg "$O/train-fp32-2048-graph-off.out"); c=$(dg "$O/train-fp32-2048-sync.out")
# same DIGEST_A DIGEST_B: yes, NO, or "not run" when B is missing (a step skipped)
same() { if [ -z "$2" ]; then echo "not run"; elif [ -n "$1" ] && [ "$1" = "$2" ]; then echo yes; else echo NO; fi; }
echo "fast digests fp32: graph on ${a:-?}; = off: $(same "$a" "$b"); = synchronous: $(same "$a" "$c")"
a=$(dg "$O/train-bf16-32768-graph-on.out"); b=$(dg "$O/train-bf16-32768-graph-off.out")
echo "fast digests bf16: graph on = off: $(same "$a" "$b")"
tc=$(tj torch-bf16 '.results[0].torch_compile_samples_per_s'); te=$(tj torch-fp32 '.results[0].torch_eager_samples_per_s')
echo "torch.compile bf16/32768: ${tc:-?} samples/s; plumb train graph on / compile = $(ratio "${SPS[bf16-32768-on]:-0}" "${tc:-0}") (goal 3)"
echo "torch eager fp32/2048:    ${te:-?} samples/s; plumb train graph on / eager = $(ratio "${SPS[fp32-2048-on]:-0}" "${te:-0}") (goal 4)"
for c in bf16-32768 fp32-2048; do
  a=$(dg "$O/train-$c-graph-on.out"); b=$(dg "$O/train-$c-log100.out")
  printf 'train %-11s --log-every 100 %12.0f samples/s (steady); /every step %s; / peer %s; digest = every step: %s\n' \
    "$c" "${SPS[$c-log100]:-0}" "$(ratio "${SPS[$c-log100]:-0}" "${SPS[$c-on]:-0}")" \
    "$(ratio "${SPS[$c-log100]:-0}" "$([ $c = bf16-32768 ] && echo "${tc:-0}" || echo "${te:-0}")")" \
    "$(same "$a" "$b")"
done
echo "bench ctr (the trainer's step on device batches): bf16/32768 $(tj torch-bf16 '.results[0].samples_per_s'), fp32/2048 $(tj torch-fp32 '.results[0].samples_per_s') samples/s; loader/device $(tj torch-bf16 '.results[0].loader_over_device')"
printf 'train bf16-32768 --fuse-sparse-sgd no (graph on) %12.0f samples/s; fused/unfused %s; digest = fused: %s\n' \
  "${SPS[bf16-32768-unfused]:-0}" "$(ratio "${SPS[bf16-32768-on]:-0}" "${SPS[bf16-32768-unfused]:-0}")" \
  "$(same "$(dg "$O/train-bf16-32768-graph-on.out")" "$(dg "$O/train-bf16-32768-unfused.out")")"
printf 'train bf16-32768 PLUMB_TRAIN_STATUS=copy (graph on) %12.0f samples/s; one write/copies %s; digest = one write: %s\n' \
  "${SPS[bf16-32768-copies]:-0}" "$(ratio "${SPS[bf16-32768-on]:-0}" "${SPS[bf16-32768-copies]:-0}")" \
  "$(same "$(dg "$O/train-bf16-32768-graph-on.out")" "$(dg "$O/train-bf16-32768-copies.out")")"
echo "fused steps (results.json): $(jq -r '.train.fused_steps' "$O/train-bf16-32768-on/results.json" 2>/dev/null) of $(jq -r '.train.steps' "$O/train-bf16-32768-on/results.json" 2>/dev/null); graphed $(jq -r '.train.graphed_steps' "$O/train-bf16-32768-on/results.json" 2>/dev/null)"
echo "loader/device, five runs of bench ctr bf16/32768: $(for i in 1 2 3 4 5; do tj loader-$i '.results[0].loader_over_device'; done | tr '\n' ' ')"
echo "to AUC $(tj to-auc .to_auc.target) (teacher $(tj to-auc .to_auc.teacher_auc)), batch $(tj to-auc .to_auc.batch), lr $(tj to-auc .to_auc.lr):"
echo "  plumb   reached $(tj to-auc .to_auc.plumb.reached) at step $(tj to-auc .to_auc.plumb.steps) in $(tj to-auc .to_auc.plumb.reached_s) s (evals $(tj to-auc .to_auc.plumb.eval_s) s)"
echo "  pytorch reached $(tj to-auc '.to_auc.pytorch[0].reached') at step $(tj to-auc '.to_auc.pytorch[0].steps') in $(tj to-auc '.to_auc.pytorch[0].reached_s') s; plumb $(tj to-auc '.to_auc.pytorch[0].plumb_speedup')x faster (goal 3)"
echo "tsv 10M lines: $(cat "$O/tsv-gen.out" 2>/dev/null | tail -1)"
echo "  from the file (page cache) ${SPS[tsv-file]:-?} samples/s (set-up $(setup_s "$O/tsv-file") s: the parse), from the cache ${SPS[tsv-cache]:-?} (set-up $(setup_s "$O/tsv-cache") s)"
echo "  synthetic bf16/32768 graph on ${SPS[bf16-32768-on]:-?}: file/synthetic $(ratio "${SPS[tsv-file]:-0}" "${SPS[bf16-32768-on]:-0}"), cache/synthetic $(ratio "${SPS[tsv-cache]:-0}" "${SPS[bf16-32768-on]:-0}") (goal >= 0.95)"
echo "  $(tail -1 "$O/tsv-cache-write.out" 2>/dev/null)"
echo "  partial batches (step:samples:time): file $(partials "$O/tsv-file"); cache $(partials "$O/tsv-cache")"
echo "  with CUDA_MODULE_LOADING=EAGER: ${SPS[tsv-cache-eager]:-?} samples/s (set-up $(setup_s "$O/tsv-cache-eager") s), cache/synthetic $(ratio "${SPS[tsv-cache-eager]:-0}" "${SPS[bf16-32768-on]:-0}"); partial batches $(partials "$O/tsv-cache-eager")"
echo "time used: $((SECONDS - T0)) s of the ${BUDGET} s budget"
} | tee -a "$LOG" "$O/summary.txt"
rm -f "$TSV" "$TSV.plumbcache"
