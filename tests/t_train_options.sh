# plumb train's options, bound once (train/options.c): out-of-range and
# negative values are usage errors (exit 2) naming the option, a missing
# value is not taken from the next option, preset defaults come from the
# workload's table, and a config turns back into the same command line.
. "$(dirname "$0")/lib.sh"
Q="--steps 1 --train-samples 500 --eval-samples 100 --quiet --health-interval 0"
bad() { # NAME OPTION ARGS...: exit 2 and stderr names OPTION
  local name=$1 opt=$2; shift 2
  "$PLUMB" "$@" --out "$TMP/run" >"$TMP/out" 2>"$TMP/err"; local rc=$?
  if [ $rc -eq 2 ] && grep -q -- "$opt" "$TMP/err"; then ok "$name: exit 2 naming $opt"
  else fail "$name" "exit $rc: $(head -c 300 "$TMP/err")"; fi
}
bad "--steps -1" --steps train ctr $Q --steps -1
bad "--lr -0.5" --lr train ctr $Q --lr -0.5
bad "--lr 0" --lr train ctr $Q --lr 0
bad "--warmup -2" --warmup train ctr $Q --warmup -2
bad "--max-rows -2" --max-rows train ctr $Q --max-rows -2
bad "--eval-every -3" --eval-every train ctr $Q --eval-every -3
bad "--checkpoint-every -5" --checkpoint-every train ctr $Q --checkpoint-every -5
bad "--batch 0" --batch train ctr $Q --batch 0
bad "--seed -1" --seed train ctr $Q --seed -1
bad "--eval-fraction 1" --eval-fraction train ctr $Q --eval-fraction 1
bad "--momentum 1" --momentum train ctr $Q --momentum 1
bad "--weight-decay -0.1" --weight-decay train ctr $Q --weight-decay -0.1
bad "--clip-grad-norm -1" --clip-grad-norm train ctr $Q --clip-grad-norm -1
bad "--loss-scale-backoff 1" --loss-scale-backoff train ctr $Q --loss-scale-backoff 1
bad "--watchdog-timeout -1" --watchdog-timeout train ctr $Q --watchdog-timeout -1
bad "--rows -1 (a ctr option)" --rows train ctr $Q --rows -1
bad "--hidden 0 (a toy option)" --hidden train toy $Q --hidden 0
bad "--rows is not a toy option" --rows train toy $Q --rows 10
bad "--steps x" --steps train ctr $Q --steps x
bad "--preset --out X: no value taken from the next option" --preset train ctr $Q --preset --out "$TMP/x"
bad "--preset unknown" --preset train ctr $Q --preset nope
bad "--schedule step without --lr-step-every" --lr-step-every train ctr $Q --schedule step
bad "unknown workload" workload train nope $Q
# the table's defaults, per preset, in --help
"$PLUMB" train ctr --help >"$TMP/help" 2>&1
grep -q -- "--steps N .*(default: ctr-tiny 1500, dlrm-kaggle 1000)" "$TMP/help" \
  && grep -q -- "--lr X .*(default: ctr-tiny adamw 0.004, ctr-tiny sgd 0.2, dlrm-kaggle sgd 0.1, dlrm-kaggle adamw 0.001)" "$TMP/help" \
  && ok "--help shows the preset defaults from the workload's table" || fail "--help defaults" "$(grep -E -- '--steps|--lr ' "$TMP/help")"
"$PLUMB" train toy --help >"$TMP/thelp" 2>&1
grep -q -- "--hidden N" "$TMP/thelp" && ! grep -q -- "--rows" "$TMP/thelp" && ok "toy --help lists its own options, not ctr's" \
  || fail "toy --help" "$(head -5 "$TMP/thelp")"
# --data's help is the workload's own: what each one reads
"$PLUMB" train resnet --help >"$TMP/rhelp" 2>&1; "$PLUMB" train gpt --help >"$TMP/ghelp" 2>&1
grep -q -- "--data SRC .*cifar:DIR" "$TMP/rhelp" && grep -q -- "--data SRC .*text:FILE" "$TMP/ghelp" \
  && grep -q -- "--data SRC .*Criteo TSV" "$TMP/help" && ok "--data's help names each workload's own sources" \
  || fail "--data help" "$(grep -h -- '--data SRC' "$TMP/rhelp" "$TMP/ghelp" "$TMP/help")"
# the preset default of an unset option is used; a given one wins; a value with = starting with -- is allowed
"$PLUMB" train ctr --preset dlrm-kaggle --rows 50 --steps 1 --batch 64 --train-samples 500 --eval-samples 100 --quiet \
  --health-interval 0 --out "$TMP/k" >"$TMP/k.out" 2>&1
[ "$(jq -r .train.steps "$TMP/k/results.json")" = 1 ] && [ "$(jq -r '.checks[0].name' "$TMP/k/results.json")" = train-ctr ] \
  && ok "dlrm-kaggle with --steps 1: the given value wins; the check is train-ctr" || fail "dlrm-kaggle run" "$(tail -3 "$TMP/k.out")"
# learning-rate schedules (the lr column of metrics.jsonl): linear warmup then cosine to --lr-min, or step decay
S="--preset toy-mlp --steps 30 --warmup 5 --lr 0.1 --quiet --health-interval 0"
"$PLUMB" train toy $S --schedule cosine --lr-min 0.01 --out "$TMP/cos" >"$TMP/cos.out" 2>&1
"$PLUMB" train toy $S --schedule step --lr-step-every 10 --lr-step-gamma 0.5 --out "$TMP/stp" >"$TMP/stp.out" 2>&1
python3 - "$TMP/cos/checks/train-toy/metrics.jsonl" "$TMP/stp/checks/train-toy/metrics.jsonl" >"$TMP/lr" 2>&1 <<'PY'
import json, math, sys
def lrs(p): return [json.loads(l)["lr"] for l in open(p) if '"type":"step"' in l]
W, N, lr, lo = 5, 30, 0.1, 0.01
def cos(s):
    if s < W: return lr * (s + 1) / W
    f = min(1.0, (s - W) / (N - W - 1))
    return lo + 0.5 * (lr - lo) * (1 + math.cos(math.pi * f))
def step(s): return lr * (s + 1) / W if s < W else lr * 0.5 ** ((s - W) // 10)
a, b = lrs(sys.argv[1]), lrs(sys.argv[2])
assert len(a) == N and len(b) == N, (len(a), len(b))
assert all(abs(x - cos(s)) < 1e-9 for s, x in enumerate(a)), a
assert all(abs(x - step(s)) < 1e-9 for s, x in enumerate(b)), b
assert abs(a[-1] - lo) < 1e-9 and abs(b[-1] - 0.025) < 1e-9
print(a[W], a[-1], b[-1])
PY
[ $? -eq 0 ] && ok "--schedule cosine and step: the lr of every step ($(cat "$TMP/lr"))" || fail "lr schedules" "$(tail -3 "$TMP/lr")"
# --steps 0 evaluates the initial parameters: said as such, not "loss nan -> nan"
"$PLUMB" train ctr --steps 0 --train-samples 500 --eval-samples 100 --quiet --health-interval 0 --out "$TMP/s0" >"$TMP/s0.out" 2>&1; rc=$?
# (the run folder's line names a mktemp path, whose random letters may spell
# "nan": a fresh-debian run failed so, 2026-12-06; only whole words count)
[ $rc -eq 0 ] && grep -q "^trained ctr ctr-tiny: 0 steps (evaluation only)" "$TMP/s0.out" \
  && ! grep -v "^run folder: " "$TMP/s0.out" | grep -qiw "nan" \
  && ok "--steps 0: evaluation only, no nan loss" || fail "--steps 0" "rc $rc: $(head -3 "$TMP/s0.out")"
# seeds are unsigned 64-bit: the top of the range trains (strtoll called it "not an integer"),
# one past it and a negative one are refused; a trailing comma in --skip-batches is refused
"$PLUMB" train toy --steps 2 --seed 18446744073709551615 --quiet --health-interval 0 --out "$TMP/smax" >"$TMP/smax.out" 2>&1 \
  && ok "--seed 2^64-1 trains" || fail "--seed 2^64-1" "$(head -c 300 "$TMP/smax.out")"
bad "--seed 2^64" --seed train toy $Q --seed 18446744073709551616
bad "--seed -1" --seed train toy $Q --seed -1
bad "--skip-batches 1, (trailing comma)" --skip-batches train toy $Q --skip-batches 1,
"$PLUMB_BUILD/plumb-tests" train_options >"$TMP/unit" 2>&1 && ok "option table unit tests" || fail "option table unit tests" "$(tail -5 "$TMP/unit")"
finish
