# Every accept check runs any workload with an accept descriptor
# (train/model.h, struct workload_accept), shown on toy (src/models/toy: a
# non-ctr workload whose deciding metric, mse, is lower-is-better and which
# trains in fp32 only), so gpt and resnet run unchanged when they add theirs:
#  - train-toy on the cpu and on two (fake) hip devices (tests/fake_gpu.c:
#    the cpu backend under another name): the check's names derive from the
#    metric (mse_ceiling, fast_mse_vs_cpu, ...), the cpu's seed runs are
#    trained once and reused;
#  - accept --workloads / --workload / --checks train-W and their errors;
#  - parity --workload toy: records carry mse/rmse, the primary metric, the
#    directions and the margin; compare picks mse and its margin from them,
#    a planted lower learning rate is "different" with B named the worse side;
#  - the ladder --workload toy: the AMP rungs toy lacks are recorded as not
#    run, a plant from rung 3 on is found at rung 3;
#  - toy and ctr checks never pair (parity vs parity-toy), two ladders of
#    different workloads are bad input.
. "$(dirname "$0")/lib.sh"
FAKE="$PLUMB_BUILD/tests/libfake_gpu.so"
J() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@" 2>/dev/null; }

# ---- 1. train-toy on the cpu
expect_exit "accept --checks train-toy on the cpu exits 0" 0 "$PLUMB" accept --checks train-toy --device cpu --out "$TMP/t1"
grep -q "^train-toy .*cpu .*pass .*toy-bn mse 0\.[0-9]* <= ceiling 0.3" "$TMP/out" && ok "the verdict table names train-toy, its preset and the ceiling" \
  || fail "train-toy verdict line" "$(cat "$TMP/out")"
python3 - "$TMP/t1/results.json" >"$TMP/py" 2>&1 <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
cs = r["checks"]
assert [c["name"] for c in cs] == ["train-toy"], [c["name"] for c in cs]
assert r["workloads"] == "toy", r.get("workloads")
c = cs[0]
m = {x["name"]: x["value"] for x in c["metrics"]}
assert c["status"] == "pass", c.get("reason")
assert c["thresholds"] == {"mse_ceiling": 0.3, "mse_tolerance_floor": 0.005}, c["thresholds"]
assert 0 < m["mse"] <= 0.3 and abs(m["rmse"] - m["mse"] ** 0.5) < 1e-9, m
d = c["details"]
assert d["preset"] == "toy-bn" and d["metric"] == {"name": "mse", "better": "lower"}, d
f = d["fast_mse_vs_cpu"]
assert f["metric"] == "mse" and f["mse"][0] == m["mse"] and len(f["threads"]) == 2, f
# toy's arithmetic runs on the host: bit-identical at any thread count, said so
assert f["param_digest_equal"] is True and f["diff"] == 0 and "no spread comparison" in f["note"], f
assert m["golden_digest_match"] == 1.0 and d["golden_steps"] == 60, (m, d)
assert c["artifacts"] == ["checks/train-toy/metrics.jsonl"], c["artifacts"]
PY
[ $? -eq 0 ] && ok "train-toy: thresholds, details and metrics named after mse" || fail "train-toy results.json" "$(cat "$TMP/py")"

# ---- 2. train-toy on two fake hip devices: the cpu's seed spread, trained once
if [ -f "$FAKE" ]; then
  mkdir -p "$TMP/bin" "$TMP/plug"; cp "$PLUMB" "$TMP/bin/plumb"; ln -sf "$FAKE" "$TMP/plug/libplumb-hip.so"
  FAKE_GPU_COUNT=2 PLUMB_BACKEND_PATH="$TMP/plug" "$TMP/bin/plumb" accept --checks train --workloads toy --device hip \
    --threads 1 --out "$TMP/hip" >"$TMP/hip.out" 2>&1
  rc=$?
  [ $rc -eq 0 ] && ok "train-toy on two (fake) hip devices exits 0" || fail "train-toy on fake hip" "exit $rc: $(tail -5 "$TMP/hip.out")"
  python3 - "$TMP/hip/results.json" >"$TMP/py" 2>&1 <<'PY'
import json, sys
cs = [x for x in json.load(open(sys.argv[1]))["checks"]]
assert [(x["name"], x["device"]) for x in cs] == [("train-toy", "hip:0"), ("train-toy", "hip:1")], cs
d0, d1 = cs[0]["details"]["fast_mse_vs_cpu"], cs[1]["details"]["fast_mse_vs_cpu"]
assert d0["cpu_runs"] == "trained" and d1["cpu_runs"].startswith("reused") and d0["mse_cpu"] == d1["mse_cpu"], (d0, d1)
assert d0["seeds"] == [1, 2, 3] and len(set(d0["mse_cpu"])) == 3, d0
assert d0["spread"] == max(d0["mse_cpu"]) - min(d0["mse_cpu"]), d0
assert d0["tolerance_floor"] == 0.005 and d0["tolerance"] == max(d0["spread"], 0.005), d0
assert d0["mse_device"] == d0["mse_cpu"][0] and d0["diff"] == 0 and d0["pass"] is True, d0
m = {x["name"]: x["value"] for x in cs[0]["metrics"]}
assert m["mse_cpu"] == d0["mse_cpu"][0] and m["mse_cpu_seed_spread"] == d0["spread"] and m["mse_diff_vs_cpu"] == 0, m
PY
  [ $? -eq 0 ] && ok "hip: the cpu's mse over 3 seeds, spread and tolerance, reused for the second device" \
    || fail "train-toy hip figures" "$(cat "$TMP/py")"
else
  skip "train-toy on (fake) hip devices" "$FAKE not built"
fi

# ---- 3. choosing workloads, and the errors
"$PLUMB" accept --help >"$TMP/help" 2>&1
grep -q -- "--workloads LIST .*a comma list of ctr, gpt, toy, resnet (default: ctr,gpt,resnet; not toy: its arithmetic runs on the host" "$TMP/help" \
  && ok "--help: --workloads lists the workloads with a descriptor and says why the default set leaves toy out" \
  || fail "--workloads help" "$(grep -- --workloads "$TMP/help")"
expect_exit "--workloads gpt2 exits 2" 2 "$PLUMB" accept --checks train --workloads toy,gpt2 --device cpu --out "$TMP/x1"
grep -q "\-\-workloads: 'gpt2' is not a workload (expected one of: ctr, gpt, toy, resnet)" "$TMP/err" && ok "the message names the workload and lists the good ones" \
  || fail "--workloads message" "$(cat "$TMP/err")"
expect_exit "--workload nope exits 2" 2 "$PLUMB" accept --checks parity --workload nope --device cpu --out "$TMP/x2"
grep -q -- "--workload: 'nope'" "$TMP/err" && ok "--workload names the bad value" || fail "--workload message" "$(cat "$TMP/err")"
expect_exit "--checks train-nope exits 2" 2 "$PLUMB" accept --checks train-nope --device cpu --out "$TMP/x3"
grep -q "unknown check 'train-nope' (expected some of: .*train (train-ctr, train-gpt, train-toy, train-resnet)" "$TMP/err" \
  && ok "an unknown train-W check lists train-ctr, train-gpt, train-toy and train-resnet" || fail "train-nope message" "$(cat "$TMP/err")"
expect_exit "attribute --workload nope exits 2" 2 "$PLUMB" attribute --workload nope --out "$TMP/x4"
grep -q -- "--workload: 'nope'" "$TMP/err" && ok "attribute names the bad workload" || fail "attribute --workload message" "$(cat "$TMP/err")"

# ---- 4. parity for toy: records, and compare picks the primary metric and margin from them
for sb in 1 5; do
  "$PLUMB" accept --checks parity --workload toy --seeds 4 --seed-base $sb --device cpu --out "$TMP/p$sb" >"$TMP/p$sb.out" 2>&1 \
    || fail "parity --workload toy (seeds $sb..)" "$(tail -3 "$TMP/p$sb.out")"
done
"$PLUMB" accept --checks parity --workload toy --seeds 4 --plant lr=0.2 --device cpu --out "$TMP/pl" >"$TMP/pl.out" 2>&1 \
  || fail "parity --workload toy --plant lr=0.2" "$(tail -3 "$TMP/pl.out")"
python3 - "$TMP/p1" >"$TMP/py" 2>&1 <<'PY'
import json, sys
d = sys.argv[1]
c = json.load(open(d + "/results.json"))["checks"][0]
assert c["name"] == "parity-toy" and c["status"] == "pass", (c["name"], c.get("reason"))
assert c["artifacts"] == ["checks/parity-toy/seeds.jsonl"] and c["details"]["workload"] == "toy", c
assert c["thresholds"] == {"mse_ceiling": 0.3, "seeds": 4}, c["thresholds"]
m = {x["name"]: x["value"] for x in c["metrics"]}
assert {"mse_mean", "mse_std", "rmse_mean", "rmse_std"} <= set(m), m
recs = [json.loads(l) for l in open(d + "/checks/parity-toy/seeds.jsonl")]
assert [r["seed"] for r in recs] == [1, 2, 3, 4]
for r in recs:
    assert r["primary"] == "mse" and r["better"] == {"mse": "lower", "rmse": "lower"} and r["margin"] == "10%", r
    assert 0 < r["mse"] <= 0.3 and "auc" not in r and r["info"]["workload"] == "toy" and r["info"]["preset"] == "toy-bn", r
    assert [p[0] for p in r["curve"]] == list(range(1, 301)), r["curve"][:3]
assert len({r["info"]["param_digest"] for r in recs}) == 4
PY
[ $? -eq 0 ] && ok "parity-toy: seeds.jsonl records carry mse, rmse, the primary metric, the directions and the margin" \
  || fail "parity-toy records" "$(cat "$TMP/py")"
"$PLUMB" compare "$TMP/p1" "$TMP/p5" --json >"$TMP/c15.json" 2>"$TMP/c15.err"; rc=$?
python3 - "$TMP/c15.json" >"$TMP/py" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
g = d["parity"][0]
assert g["check"] == "parity-toy" and g["primary"] == "mse" and g["primary_from"] == "A's records", g
m = {x["metric"]: x for x in g["metrics"]}
assert m["mse"]["primary"] and m["mse"]["better"] == "lower", m["mse"]
assert m["mse"]["margin"]["from"] == "A's records" and m["mse"]["margin"]["text"].startswith("10% of A's mean"), m["mse"]["margin"]
assert abs(m["mse"]["margin"]["abs"] - 0.1 * m["mse"]["mean_a"]) < 1e-12
assert d["verdict"] != "different", d["summary"]
PY
[ $? -eq 0 ] && ok "compare of two toy parity runs decides on mse at the records' 10% margin, not different (exit $rc)" \
  || fail "compare toy parity" "$(cat "$TMP/py") $(cat "$TMP/c15.err")"
expect_exit "a planted 5x lower learning rate: compare exits 1" 1 "$PLUMB" compare "$TMP/p1" "$TMP/pl"
grep -q "^verdict: different" "$TMP/out" && grep -q "mse B-A = +.*B worse: lower is better" "$TMP/out" \
  && ok "the planted change is different, and B (higher mse) is named the worse side" || fail "planted toy compare" "$(tail -4 "$TMP/out")"
expect_exit "--metric rmse decides instead" 1 "$PLUMB" compare "$TMP/p1" "$TMP/pl" --json --metric rmse
[ "$(J "$TMP/out" 'd["parity"][0]["primary"]')" = rmse ] && ok "--metric wins over the records' primary" \
  || fail "--metric rmse" "$(head -c 300 "$TMP/out")"
expect_exit "parity --workload toy --plant precision=bf16 fails (exit 1)" 1 "$PLUMB" accept --checks parity --workload toy \
  --seeds 2 --plant precision=bf16 --device cpu --out "$TMP/pb"
grep -q "toy trains in fp32 only, not bf16" "$TMP/out" && ok "a precision toy lacks is named, not trained" || fail "toy bf16" "$(tail -4 "$TMP/out")"

# ---- 5. the ladder for toy: B at one thread, 5x lower learning rate from rung 3 on
"$PLUMB" attribute --workload toy --seeds 4 --out "$TMP/la" >"$TMP/la.out" 2>&1 || fail "attribute --workload toy (A)" "$(tail -3 "$TMP/la.out")"
OMP_NUM_THREADS=1 "$PLUMB" attribute --workload toy --seeds 4 --threads 1 --plant lr=0.2@3 --out "$TMP/lb" >"$TMP/lb.out" 2>&1 \
  || fail "attribute --workload toy (B)" "$(tail -3 "$TMP/lb.out")"
"$PLUMB" compare "$TMP/la" "$TMP/lb" --attribute --out "$TMP/cl" >"$TMP/cl.out" 2>&1
rc=$?
python3 - "$TMP/cl/compare.json" "$TMP/la/results.json" >"$TMP/py" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
lad = d["ladder"]
assert lad["workload"] == "toy" and lad["metric"] == "mse" and lad["better"] == "lower", lad
assert [x["name"] for x in lad["rungs"]] == ["golden", "fast-strict", "fast-vendor"], [x["name"] for x in lad["rungs"]]
assert [(x["rung"], x["why"]) for x in lad["skipped"]] == [(4, "not run: toy trains in fp32 only"), (5, "not run: toy trains in fp32 only")], lad["skipped"]
r = {x["name"]: x for x in lad["rungs"]}
assert r["golden"]["golden_equal"] is True
assert lad["parts_at_rung"] == 3, lad["text"]
assert "part at rung 3 (fast-vendor)" in lad["text"] and "there B is worse (mse lower is better)" in lad["text"], lad["text"]
c = json.load(open(sys.argv[2]))["checks"][0]
assert c["name"] == "ladder-toy" and c["details"]["workload"] == "toy" and c["details"]["metric"] == "mse", c["details"]
m = {x["name"] for x in c["metrics"]}
assert "rung1_golden_mse_mean" in m and "rung2_fast-strict_mse_std" in m, m
assert [x.get("skipped") for x in c["details"]["rungs"]][3:] == ["not run: toy trains in fp32 only"] * 2
PY
[ $? -eq 0 ] && [ $rc -eq 1 ] && grep -q "4 bf16-amp     not run: toy trains in fp32 only" "$TMP/cl.out" \
  && ok "the toy ladder: golden bit-equal, AMP rungs not run (said so), the plant found at rung 3, B the worse side" \
  || fail "toy ladder" "exit $rc: $(cat "$TMP/py") $(sed -n '/attribution/,$p' "$TMP/cl.out")"

# ---- 6. ctr and toy never pair
"$PLUMB" accept --checks parity --seeds 2 --seed-steps 5 --device cpu --out "$TMP/pc" >"$TMP/pc.out" 2>&1 \
  || fail "parity ctr (short)" "$(tail -3 "$TMP/pc.out")"
# nothing in common is bad input (exit 2 naming both sides' checks), not a pass that compared nothing
expect_exit "a ctr parity run and a toy one do not pair: exit 2" 2 "$PLUMB" compare "$TMP/pc" "$TMP/p1" --json
grep -q "have no check in common (A: parity on cpu; B: parity-toy on cpu)" "$TMP/err" \
  && ok "... the message names parity and parity-toy" || fail "ctr vs toy pairing" "$(cat "$TMP/err")"
"$PLUMB" attribute --seeds 2 --steps 5 --rungs golden --out "$TMP/lc" >"$TMP/lc.out" 2>&1 || fail "attribute ctr (short)" "$(tail -3 "$TMP/lc.out")"
expect_exit "compare --attribute of a ctr and a toy ladder exits 2" 2 "$PLUMB" compare "$TMP/lc" "$TMP/la" --attribute
grep -q "the ladders train different workloads: ctr on A (ladder), toy on B (ladder-toy)" "$TMP/err" \
  && ok "the message names both workloads" || fail "different-workload ladders" "$(cat "$TMP/err")"
finish
