#!/usr/bin/env bash
# gpt on one H200 (docs/GPT.md; figures for BENCHMARKS.md's "gpt" section), on
# the GPU host, from the folder scripts/gpu-prep.sh fills (prebuilt build/,
# scripts/, bench/) plus llmc/ with llm.c's train_gpt2cu (scripts/llmc-build.sh
# builds it on the build machine; gpu-prep.sh copies .llmc/ there). Builds
# nothing; the unfiltered GPU suite runs before it (scripts/gpu-suite.sh).
# At most GPT_BUDGET_S seconds (default 285) of wall time in all: every step
# runs under `timeout` with what is left, and a step that cannot fit is
# skipped and says so; the steps run in the order of what they back:
#   golden   gpt-tiny, golden numerics, 20 steps, fp32 and bf16: the parameter
#            digest on cuda equals the cpu's;
#   bench    plumb bench gpt, gpt2-124m, B=16 T=1024 bf16, with PyTorch eager
#            and torch.compile in the same run (bench/gpt_pytorch.py): tokens/s,
#            MFU, step split, the ratios;
#   loss     GPT_LOSS_STEPS (default 100) steps of gpt2-124m bf16 (B=16,
#            T=1024, lr 6e-4 after 20 warmup steps, constant; AdamW (0.9,
#            0.95), wd 0.1, clip 1) on plumb data synth-tokens' chain
#            (vocabulary 50257): plumb (seeds 1, 2) against PyTorch eager
#            (seeds 1, 2, 3), interleaved; the validation loss over the same
#            64 windows of 1024 tokens; pass when each plumb seed lies within
#            max(PyTorch's seed spread, 0.02 nats) of PyTorch's mean;
#   llmc     llm.c's train_gpt2cu (random d12 init, no cuDNN, its defaults
#            otherwise) on the same tokens and schedule: its tokens/s (mean
#            step time after the first) and its validation loss beside them;
#   accept   plumb accept's train-gpt check on cuda, standard level (train-gpt runs from --standard up) (golden
#            digest = cpu's, fast validation loss within the cpu's seed spread);
#   golden124  gpt2-124m golden, 2 steps of 2 x 64, cuda vs cpu (the full
#            width and vocabulary through the golden kernels).
# GPT_TORCH_MODES: the bench's PyTorch modes (default eager,compile).
# GPT_SKIP=REGEX skips the steps whose names match (bash =~), e.g. '^bench$'
# when the headline (scripts/gpu-headline.sh) timed the bench in the same call.
# Output is line-buffered (stdbuf) so a step cut by its timeout keeps what it
# printed. Writes $OUT/gpt/ (gpu-gpt.log, bench.json, loss.json, summary.txt). NVLink
# multicast stays off; clocks, power and MIG are left alone.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
OUT=${OUT:-$here/gpu-out}
D=$OUT/gpt
mkdir -p "$D"
LOG=$D/gpu-gpt.log
: >"$LOG"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
BUDGET=${GPT_BUDGET_S:-285}
LOSS_STEPS=${GPT_LOSS_STEPS:-100}
T0=$SECONDS
SB=""; command -v stdbuf >/dev/null 2>&1 && SB="stdbuf -oL -eL"
log() { echo "$*" | tee -a "$LOG"; }
left() { echo $((BUDGET - (SECONDS - T0))); }
step() { # step NAME TIMEOUT_S NEED_S CMD...: runs when NEED_S seconds are left, under min(TIMEOUT_S, left)
  local name=$1 t=$2 need=$3; shift 3
  if [ -n "${GPT_SKIP:-}" ] && [[ $name =~ $GPT_SKIP ]]; then log "==== $name: SKIPPED (GPT_SKIP)"; return 98; fi
  local l; l=$(left)
  if [ "$l" -lt "$need" ]; then log "==== $name: SKIPPED ($l s of the budget left, needs $need)"; return 99; fi
  [ "$t" -gt "$l" ] && t=$l
  log ""; log "==== $name: $*"
  local t1=$SECONDS
  timeout "$t" $SB "$@" >>"$D/$name.log" 2>&1
  local rc=$?
  log "==== $name: exit $rc ($((SECONDS - t1)) s)"
  return $rc
}
log "gpu-gpt, $(cat COMMIT 2>/dev/null) on $(hostname) at $(date -u +%FT%TZ), budget $BUDGET s"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv 2>&1 | tee -a "$LOG"
. "$here/scripts/gpu-libs.sh"
export PLUMB_BACKEND_PATH=$here/build
P=build/plumb
W=/tmp/gpu-gpt; rm -rf $W; mkdir -p $W
dg() { awk '/^param_digest/{print $2}' "$1" 2>/dev/null; }
vl() { sed -nE 's/^eval: val_loss ([0-9.]+).*/\1/p' "$1" 2>/dev/null | tail -n 1; }
S=""  # summary lines

# ---- golden: gpt-tiny, cuda = cpu
G="train gpt --preset gpt-tiny --numerics golden --steps 20 --batch 16 --train-samples 2048 --eval-samples 32
   --param-digest --quiet --health-interval 0 --threads 8"
for prec in fp32 bf16; do
  step golden_cpu_$prec 60 20 $P $G --precision $prec --device cpu --out $W/g_cpu_$prec; ra=$?
  step golden_cuda_$prec 60 20 $P $G --precision $prec --device cuda --out $W/g_cuda_$prec; rb=$?
  a=$(dg "$D/golden_cpu_$prec.log"); b=$(dg "$D/golden_cuda_$prec.log")
  # 98 and 99: step skipped (GPT_SKIP, or too little budget left): nothing to judge
  if [ $ra -ge 98 ] || [ $rb -ge 98 ]; then S="$S\nVERDICT golden gpt-tiny $prec: NOT RUN (skipped: cpu exit $ra, cuda exit $rb)"
  elif [ $ra -eq 0 ] && [ $rb -eq 0 ] && [ -n "$a" ] && [ "$a" = "$b" ]; then S="$S\nVERDICT golden gpt-tiny $prec: PASS cuda = cpu ($a)"
  else S="$S\nVERDICT golden gpt-tiny $prec: FAIL cuda '$b' (exit $rb) cpu '$a' (exit $ra)"; fi
done

# ---- bench: plumb vs PyTorch eager and torch.compile, gpt2-124m B=16 T=1024 bf16
step bench 200 100 $P bench gpt --preset gpt2-124m --batch 16 --device cuda --precision bf16 --steps 30 --warmup 10 \
  --vs-pytorch --torch-modes "${GPT_TORCH_MODES:-eager,compile}" --json "$D/bench.json"
grep -E "^bf16|pytorch|FLOPs per token" "$D/bench.log" | tee -a "$LOG"

# ---- the synthetic tokens of the loss runs (the llm.c format, vocabulary 50257)
B=16; T=1024
NTRAIN=$(((LOSS_STEPS * B + 2) * T + 1)); NVAL=$((4 * B * T + 1))
step data 60 5 sh -c "$P data synth-tokens --tokens $NTRAIN --vocab 50257 --out $W/syn_train.bin &&
  $P data synth-tokens --tokens $NVAL --vocab 50257 --split val --out $W/syn_val.bin"

# ---- llm.c: tokens/s and the loss after the budget, on the same tokens (first:
# about 10 s, and the figure a budget cut must not lose)
LLMC=${LLMC:-$here/llmc/train_gpt2cu}
if [ -x "$LLMC" ]; then
  step llmc 60 20 "$LLMC" -e d12 -i $W/syn_train.bin -j $W/syn_val.bin -b $B -t $T -x $LOSS_STEPS -l 6e-4 -u 20 -q 1.0 \
    -c 0.1 -v $LOSS_STEPS -m 4 -s 0
  lt=$(sed -nE 's/^total average iteration time: ([0-9.]+) ms/\1/p' "$D/llmc.log")
  ltok=$(awk -v t="$lt" -v n=$((B * T)) 'BEGIN{if (t > 0) printf "%.0f", 1000 * n / t}')
  lv=$(sed -nE 's/^val loss ([0-9.]+)/\1/p' "$D/llmc.log" | tail -n 1)
  S="$S\nllm.c ($(cat "$(dirname "$LLMC")/LLMC_COMMIT" 2>/dev/null | cut -c1-10), no cuDNN): $(awk -v t="$lt" 'BEGIN{if (t > 0) printf "%.0f tokens/s (%.2f ms/step)", 16384000 / t, t; else print "no step time"}'), val loss $lv after $LOSS_STEPS steps"
else
  log "==== llmc: SKIPPED (no $LLMC: build it with scripts/llmc-build.sh and carry llmc/)"
  S="$S\nllm.c: not run (no $LLMC)"
fi

# ---- loss after the budget: plumb (seeds 1, 2) vs PyTorch eager (seeds 1, 2, 3); llm.c beside them
TR="train gpt --preset gpt2-124m --device cuda --precision bf16 --data tokens:$W/syn_train.bin --eval-data $W/syn_val.bin
    --steps $LOSS_STEPS --batch $B --lr 6e-4 --warmup 20 --schedule constant --eval-batch $B --quiet --health-interval 0"
torch_seed() { step loss_torch_s$1 60 20 python3 bench/gpt_pytorch.py --preset gpt2-124m --batch $B --seq $T --device cuda \
  --precision bf16 --mode eager --steps $LOSS_STEPS --warmup 0 --lr 6e-4 --lr-warmup 20 --seed $1 \
  --tokens $W/syn_train.bin --val-tokens $W/syn_val.bin --val-batches 4; }
# interleaved, so a budget cut still leaves plumb against two PyTorch seeds
step loss_plumb_s1 60 15 $P $TR --seed 1 --out $W/lp1
torch_seed 1
torch_seed 2
step loss_plumb_s2 60 15 $P $TR --seed 2 --out $W/lp2
torch_seed 3
python3 - "$D" "$LOSS_STEPS" "${lv:-}" <<'PY' 2>&1 | tee -a "$LOG" >"$D/loss.txt"
import json, re, statistics, sys, glob, os
d, steps, llmc = sys.argv[1], sys.argv[2], sys.argv[3]
pt, pl = {}, {}
for f in sorted(glob.glob(os.path.join(d, "loss_torch_s*.log"))):
    for line in open(f):
        if line.startswith("{"):
            j = json.loads(line)
            if j.get("val_loss") is not None: pt[j["seed"]] = (j["val_loss"], j["tokens_per_s"])
for f in sorted(glob.glob(os.path.join(d, "loss_plumb_s*.log"))):
    m = [re.match(r"eval: val_loss ([0-9.]+)", l) for l in open(f)]
    m = [x for x in m if x]
    if m: pl[int(re.search(r"_s(\d+)\.log$", f).group(1))] = float(m[-1].group(1))
out = {"steps": int(steps), "pytorch_eager": {str(k): v[0] for k, v in pt.items()}, "plumb": {str(k): v for k, v in pl.items()},
       "llmc": float(llmc) if llmc else None}
if len(pt) >= 2 and pl:
    xs = [v[0] for v in pt.values()]
    mean, spread = statistics.mean(xs), max(xs) - min(xs)
    tol = max(spread, 0.02)
    ok = all(abs(v - mean) <= tol for v in pl.values())
    out.update(pytorch_mean=mean, pytorch_spread=spread, tolerance=tol, verdict="pass" if ok else "fail")
    print("VERDICT loss after %s steps: %s plumb %s vs PyTorch eager %s (mean %.4f, spread %.4f, tolerance %.4f)%s" % (
        steps, "PASS" if ok else "FAIL", " ".join("s%d %.4f" % kv for kv in sorted(pl.items())),
        " ".join("s%d %.4f" % (k, v[0]) for k, v in sorted(pt.items())), mean, spread, tol,
        "; llm.c %s" % llmc if llmc else ""))
else:
    out["verdict"] = "not measured"
    print("VERDICT loss after %s steps: NOT MEASURED (plumb %s, PyTorch %s)" % (steps, pl, {k: v[0] for k, v in pt.items()}))
json.dump(out, open(os.path.join(d, "loss.json"), "w"), indent=1)
PY
S="$S\n$(cat "$D/loss.txt")"

# ---- accept: the gpt train check on cuda (the suite's gpu_gpt_tiny_trainer_matches_cpu covers its core)
step accept 90 40 $P accept --device cuda --checks train-gpt --out $W/acc
if [ -f $W/acc/results.json ]; then
  cp $W/acc/results.json "$D/accept.json"
  S="$S\n$(python3 - $W/acc/results.json <<'PY'
import json, sys
for c in json.load(open(sys.argv[1]))["checks"]:
    if not c["name"].startswith("train"): continue
    m = {x["name"]: x["value"] for x in c.get("metrics", [])}
    print("VERDICT accept %s %s: %s %s (val_loss %s)" % (c["name"], c.get("device"), c["status"].upper(), c.get("reason", ""), m.get("val_loss")))
PY
)"
fi

# ---- golden at full width, if time is left
G2="train gpt --preset gpt2-124m --numerics golden --steps 2 --batch 2 --seq-len 64 --train-samples 64 --eval-samples 2
    --eval-batch 2 --param-digest --quiet --health-interval 0"
if step golden124_cuda 40 40 $P $G2 --device cuda --out $W/g124_cuda && step golden124_cpu 60 40 $P $G2 --device cpu --threads 16 --out $W/g124_cpu; then
  a=$(dg "$D/golden124_cpu.log"); b=$(dg "$D/golden124_cuda.log")
  [ -n "$a" ] && [ "$a" = "$b" ] && S="$S\nVERDICT golden gpt2-124m (2 steps of 2 x 64): PASS cuda = cpu ($a)" \
    || S="$S\nVERDICT golden gpt2-124m: FAIL cuda '$b' cpu '$a'"
fi

# ---- summary
{
  echo "gpu-gpt summary ($((SECONDS - T0)) s of $BUDGET)"
  python3 - "$D/bench.json" "${ltok:-}" <<'PY' 2>/dev/null
import json, sys
j = json.load(open(sys.argv[1]))
ltok = float(sys.argv[2]) if sys.argv[2] else 0
for r in j["rows"]:
    print("plumb bench gpt %s B=%d T=%d %s: %.0f tokens/s, %.2f ms/step, %.1f TFLOP/s, MFU %s; split ms %s; peak %.0f MiB" % (
        j["preset"], j["batch"], j["seq_len"], r["precision"], r["tokens_per_s"], r["step_ms"], r["model_tflops"],
        "%.1f%%" % (100 * r["mfu"]) if r.get("mfu") else "n/a",
        {k: (round(v, 2) if v is not None else None) for k, v in r["split_ms"].items()}, r["peak_allocated_bytes"] / 2**20))
    for m, v in r.get("pytorch", {}).items():
        print("  pytorch %s: %s" % (m, "%.0f tokens/s, plumb / pytorch = %.3f" % (v["tokens_per_s"], v["ratio"]) if "ratio" in v else v.get("error")))
    if ltok and r["precision"] == "bf16":
        print("  llm.c train_gpt2cu (its own run, same B, T): %.0f tokens/s, plumb / llm.c = %.3f" % (ltok, r["tokens_per_s"] / ltok))
PY
  printf "%b\n" "$S" | sed '/^$/d'
} | tee "$D/summary.txt"
