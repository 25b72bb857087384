# plumb train gpt through the one trainer, with real mpirun ranks:
#  - gpt-tiny learns a text file Debian ships (val loss well below ln 256);
#  - golden parameter digests and validation metrics equal on 1, 2 and 3 ranks;
#  - two ranks SIGKILLed after a checkpoint, resumed on 3 ranks (and on 1):
#    the digest of the uninterrupted run;
#  - a bad token file exits 2 naming the file and what was expected.
. "$(dirname "$0")/lib.sh"
MPI="mpirun --oversubscribe"
dg() { awk '/^param_digest/{print $2}' "$1"; }
J() { jq -r "$2" "$1" 2>/dev/null; }
TXT=/usr/share/common-licenses/GPL-3
if [ -r "$TXT" ]; then
  s0=$(date +%s.%N)
  "$PLUMB" train gpt --preset gpt-tiny --data "text:$TXT" --steps 80 --batch 8 --threads 1 --health-interval 0 --out "$TMP/text" >"$TMP/text.out" 2>&1
  s1=$(date +%s.%N)
  v=$(J "$TMP/text/results.json" '.checks[0].metrics.val_loss.value // .val_loss')
  [ -z "$v" ] || [ "$v" = null ] && v=$(sed -nE 's/^eval: val_loss ([0-9.]+).*/\1/p' "$TMP/text.out")
  awk -v v="$v" 'BEGIN{exit !(v != "" && v < 4.0)}' \
    && ok "gpt-tiny on $TXT: val loss $v after 80 steps of 8 x 64 tokens ($(awk -v a=$s0 -v b=$s1 'BEGIN{printf "%.1f", b-a}') s; ln 256 = 5.545)" \
    || fail "gpt-tiny learns text" "val loss '$v'; $(tail -3 "$TMP/text.out")"
else
  skip "gpt-tiny on text" "$TXT not readable"
fi
# golden on 1, 2, 3 ranks: the same bits and the same validation loss
G="--preset gpt-tiny --numerics golden --steps 8 --batch 12 --micro-shard 4 --train-samples 300 --eval-samples 24 --eval-batch 8 --quiet --param-digest --health-interval 0"
for np in 1 2 3; do
  $MPI -np $np "$PLUMB" train gpt $G --out "$TMP/g$np" >"$TMP/g$np.out" 2>&1 || fail "golden -np $np runs" "$(tail -3 "$TMP/g$np.out")"
done
a=$(dg "$TMP/g1.out"); b=$(dg "$TMP/g2.out"); c=$(dg "$TMP/g3.out")
[ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" = "$c" ] && ok "golden digest equal on -np 1, 2, 3 ($a)" || fail "golden digests" "$a / $b / $c"
m1=$(grep '^eval:' "$TMP/g1.out"); m3=$(grep '^eval:' "$TMP/g3.out")
[ -n "$m1" ] && [ "$m1" = "$m3" ] && ok "validation metrics equal on 1 and 3 ranks ($m1)" || fail "eval 1 vs 3" "$m1 vs $m3"
# SIGKILL both ranks of a 2-rank run after its checkpoint at step 8 (of 16), resume on 3 ranks and on 1
R="${G/--steps 8/--steps 16} --checkpoint-every 4"
"$PLUMB" train gpt ${R/ --checkpoint-every 4/} --out "$TMP/full" >"$TMP/full.out" 2>&1  # no --checkpoint-dir: no --checkpoint-every (exit 2)
want=$(dg "$TMP/full.out")
mkdir -p "$TMP/ck"
$MPI -np 2 sh -c 'echo $$ > "$0/pid.$OMPI_COMM_WORLD_RANK"; exec "$@"' "$TMP" "$PLUMB" train gpt ${R/--quiet/} --checkpoint-dir "$TMP/ck" --out "$TMP/k" >"$TMP/k.out" 2>&1 &
mp=$!
for i in $(seq 1 1200); do
  [ -f "$TMP/ck/ckpt-0000000008.plumb" ] && break
  sleep 0.1
done
for r in 0 1; do [ -f "$TMP/pid.$r" ] && kill -KILL "$(cat "$TMP/pid.$r")" 2>/dev/null; done
wait $mp; krc=$?
cp -r "$TMP/ck" "$TMP/ck1"
$MPI -np 3 "$PLUMB" train gpt $R --checkpoint-dir "$TMP/ck" --resume --out "$TMP/r3" >"$TMP/r3.out" 2>&1
"$PLUMB" train gpt $R --checkpoint-dir "$TMP/ck1" --resume --out "$TMP/r1" >"$TMP/r1.out" 2>&1
s3=$(J "$TMP/r3/results.json" .train.start_step); x=$(dg "$TMP/r3.out"); y=$(dg "$TMP/r1.out")
[ "$krc" -ne 0 ] && [ -n "$s3" ] && [ "$s3" != null ] && [ "$s3" -gt 0 ] && [ "$s3" -lt 16 ] && [ -n "$want" ] && [ "$x" = "$want" ] && [ "$y" = "$want" ] \
  && ok "2 ranks SIGKILLed, resumed from step $s3 on 3 ranks and on 1: the uninterrupted digest" \
  || fail "SIGKILL + resume" "mpirun rc $krc, start $s3; $x / $y vs $want; $(tail -2 "$TMP/r3.out")"
# bad token files: exit 2, the file and what was expected named
printf 'not a token file at all, just text padding it out past the header size...' >"$TMP/bad.bin"
head -c 2000 /dev/zero >>"$TMP/bad.bin"
expect_exit "a file without the llm.c magic: exit 2" 2 "$PLUMB" train gpt --preset gpt-tiny --data "tokens:$TMP/bad.bin" --steps 1 --health-interval 0 --out "$TMP/bad"
grep -q "bad.bin: magic .* (expected 20240520" "$TMP/err" && ok "the error names the file and the expected magic" || fail "bad magic message" "$(cat "$TMP/err")"
expect_exit "no files match: exit 2" 2 "$PLUMB" train gpt --preset gpt-tiny --data "tokens:$TMP/none_*.bin" --steps 1 --health-interval 0 --out "$TMP/none"
grep -q "no token files match" "$TMP/err" && ok "an empty glob is named" || fail "empty glob message" "$(cat "$TMP/err")"
# plumb data synth-tokens writes the stream --data synthetic reads: training on the
# file gives the synthetic run's golden digest and validation loss (the data seed also
# keys the per-epoch window shift, so both runs name it)
S="--preset gpt-tiny --numerics golden --steps 6 --batch 8 --data-seed 7 --quiet --param-digest --health-interval 0"
"$PLUMB" data synth-tokens --tokens $(((100 + 1) * 64)) --vocab 256 --data-seed 7 --out "$TMP/st_train.bin" >"$TMP/st.out" 2>&1 \
  && "$PLUMB" data synth-tokens --tokens $((8 * 64 + 1)) --vocab 256 --data-seed 7 --split val --out "$TMP/st_val.bin" >>"$TMP/st.out" 2>&1 \
  || fail "synth-tokens writes token files" "$(cat "$TMP/st.out")"
"$PLUMB" train gpt $S --data synthetic --train-samples 100 --eval-samples 8 --out "$TMP/sa" >"$TMP/sa.out" 2>&1
"$PLUMB" train gpt $S --data "tokens:$TMP/st_train.bin" --eval-data "$TMP/st_val.bin" --out "$TMP/sb" >"$TMP/sb.out" 2>&1
a=$(dg "$TMP/sa.out"); b=$(dg "$TMP/sb.out"); ea=$(grep '^eval:' "$TMP/sa.out"); eb=$(grep '^eval:' "$TMP/sb.out")
[ -n "$a" ] && [ "$a" = "$b" ] && [ -n "$ea" ] && [ "$ea" = "$eb" ] \
  && ok "synth-tokens files train as --data synthetic does (digest $a, $ea)" \
  || fail "synth-tokens = synthetic" "$a vs $b; $ea vs $eb; $(tail -2 "$TMP/sb.out")"
expect_exit "synth-tokens without --out: exit 2" 2 "$PLUMB" data synth-tokens --tokens 10
expect_exit "synth-tokens --vocab 70000: exit 2" 2 "$PLUMB" data synth-tokens --tokens 10 --vocab 70000 --out "$TMP/x.bin"
grep -q -- "--vocab" "$TMP/err" && ok "the bad option is named" || fail "synth-tokens --vocab message" "$(cat "$TMP/err")"
# the accept checks through gpt's descriptor (train/model.h struct workload_accept in
# src/models/gpt/workload.c): train-gpt on this host's cpu (the fast run, the
# thread-count comparison, golden vs 1 thread)
"$PLUMB" accept --checks train-gpt --device cpu --out "$TMP/acc" >"$TMP/acc.out" 2>&1
python3 - "$TMP/acc/results.json" >"$TMP/py" 2>&1 <<'PY'
import json, sys
c = [x for x in json.load(open(sys.argv[1]))["checks"] if x["name"] == "train-gpt"][0]
m = {x["name"]: x["value"] for x in c["metrics"]}
assert c["status"] == "pass", c.get("reason")
assert c["thresholds"] == {"val_loss_ceiling": 4.0, "val_loss_tolerance_floor": 0.02}, c["thresholds"]
assert 1.0 < m["val_loss"] <= 4.0 and m["golden_digest_match"] == 1.0, m
assert c["details"]["preset"] == "gpt-tiny" and c["details"]["metric"] == {"name": "val_loss", "better": "lower"}, c["details"]
print("val loss %.4f" % m["val_loss"])
PY
[ $? -eq 0 ] && ok "accept train-gpt passes on the cpu ($(cat "$TMP/py"))" || fail "accept train-gpt" "$(cat "$TMP/py"; grep train-gpt "$TMP/acc.out")"
# parity-gpt: seed records carry val_loss as the primary metric, lower is better, the 1% margin;
# plumb compare decides on them unchanged
for sb in 1 3; do
  "$PLUMB" accept --checks parity --workload gpt --seeds 2 --seed-base $sb --seed-steps 40 --device cpu --out "$TMP/par$sb" \
    >"$TMP/par$sb.out" 2>&1 || fail "accept parity --workload gpt (seeds from $sb)" "$(tail -3 "$TMP/par$sb.out")"
done
python3 - "$TMP/par1" >"$TMP/py" 2>&1 <<'PY'
import json, sys
c = json.load(open(sys.argv[1] + "/results.json"))["checks"][0]
assert c["name"] == "parity-gpt" and c["status"] == "pass", (c["name"], c.get("reason"))
recs = [json.loads(l) for l in open(sys.argv[1] + "/checks/parity-gpt/seeds.jsonl")]
assert [r["seed"] for r in recs] == [1, 2], recs
for r in recs:
    assert r["primary"] == "val_loss" and r["margin"] == "1%" and r["better"]["val_loss"] == "lower", r
    assert r["better"]["perplexity"] == "lower" and 1.0 < r["val_loss"] < 5.545 and len(r["curve"]) == 40, r
PY
[ $? -eq 0 ] && ok "parity-gpt: 2 seeds, records name val_loss (lower is better) and the 1% margin" || fail "parity-gpt records" "$(cat "$TMP/py")"
"$PLUMB" compare "$TMP/par1" "$TMP/par3" --out "$TMP/cmp" >"$TMP/cmp.out" 2>&1
grep -q "val_loss" "$TMP/cmp.out" && grep -qE "equivalent|different|undecided" "$TMP/cmp.out" \
  && ok "plumb compare decides on two gpt parity runs ($(grep -m1 -oE "(equivalent|different|undecided)[^|]*" "$TMP/cmp.out" | head -c 80))" \
  || fail "plumb compare on gpt runs" "$(tail -5 "$TMP/cmp.out")"
# the ladder for gpt: golden, fast-strict and bf16-amp rungs on gpt-tiny
"$PLUMB" attribute --workload gpt --seeds 2 --steps 10 --rungs golden,fast-strict,bf16-amp --device cpu --out "$TMP/lad" >"$TMP/lad.out" 2>&1
python3 - "$TMP/lad/results.json" >"$TMP/py" 2>&1 <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["checks"][0]
assert c["name"] == "ladder-gpt" and c["status"] == "pass", (c["name"], c.get("reason"))
assert c["details"]["workload"] == "gpt" and c["details"]["better"] == "lower", c["details"]
PY
[ $? -eq 0 ] && ok "plumb attribute --workload gpt: the ladder-gpt check ($(grep -m1 '^ladder on cpu:' "$TMP/lad.out" | head -c 100))" \
  || fail "ladder-gpt" "$(cat "$TMP/py"; tail -4 "$TMP/lad.out")"
finish
