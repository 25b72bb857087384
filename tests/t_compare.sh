# plumb compare, attribute and signed reports end to end (docs/COMPARE.md):
#  - two real parity runs (accept --seeds, short runs) and a one-folder
#    comparison of two devices (the fake hip plugin: the cpu backend under
#    another name, so golden digests are equal by construction);
#  - hand-made run folders and metric files for each verdict and exit code
#    (0 equivalent, 1 different or a digest mismatch, 2 bad input naming the
#    file), and --metrics from "any framework";
#  - compare.html and report.html in headless chromium (no console errors,
#    no network, the verdict first, the charts there); screenshots kept in
#    $PLUMB_BUILD/test-output/compare_browser/;
#  - report keygen/sign/verify: a one-byte edit of any artifact fails verify,
#    so do an added or removed file and another key; OpenSSL verifies the
#    signature on its own.
. "$(dirname "$0")/lib.sh"
OUTD=${PLUMB_BUILD:-$PLUMB_ROOT/build}/test-output/compare_browser
rm -rf "$OUTD"; mkdir -p "$OUTD"
FAKE="$PLUMB_BUILD/tests/libfake_gpu.so"
browse() { env -u LD_PRELOAD node "$PLUMB_ROOT/tests/browser/check_compare.js" "$@"; }
have_browser=1
{ [ -x /usr/bin/chromium ] || [ -n "${CHROMIUM:-}" ]; } && [ -d "$PLUMB_ROOT/tests/browser/node_modules/playwright-core" ] || have_browser=0

# ---- 1. real short parity runs: seeds 1-3 and 4-6, 40 steps each (the AUC floor is for full runs only)
"$PLUMB" accept --checks parity --device cpu --seeds 3 --seed-steps 20 --out "$TMP/pa" >"$TMP/pa.out" 2>&1 &
P1=$!
"$PLUMB" accept --checks parity --device cpu --seeds 3 --seed-base 4 --seed-steps 20 --out "$TMP/pb" >"$TMP/pb.out" 2>&1
rc_b=$?; wait $P1; rc_a=$?
[ $rc_a -eq 0 ] && [ $rc_b -eq 0 ] && ok "accept --seeds 3 trains and passes" \
  || fail "accept --seeds 3 trains and passes" "exit $rc_a/$rc_b: $(tail -3 "$TMP/pa.out") $(tail -3 "$TMP/pb.out")"
python3 - "$TMP/pa" "$TMP/pb" >"$TMP/py" 2>&1 <<'PY'
import json, sys
for d, first in ((sys.argv[1], 1), (sys.argv[2], 4)):
    c = [x for x in json.load(open(d + "/results.json"))["checks"] if x["name"] == "parity"][0]
    assert c["status"] == "pass", c.get("reason")
    assert c["artifacts"] == ["checks/parity/seeds.jsonl"], c["artifacts"]
    recs = [json.loads(l) for l in open(d + "/checks/parity/seeds.jsonl")]
    assert [r["seed"] for r in recs] == [first, first + 1, first + 2], recs
    for r in recs:
        assert 0 < r["auc"] < 1 and r["logloss"] > 0 and 0 < r["accuracy"] < 1, r   # 20 steps: still in warmup
        steps = [p[0] for p in r["curve"]]
        assert steps == list(range(1, 21)), steps   # 20 steps, fewer than 300 points: every step
        assert len(r["info"]["param_digest"]) == 64 and r["info"]["steps"] == 20, r["info"]
    assert len({r["info"]["param_digest"] for r in recs}) == 3, "seeds gave identical parameters"
m = {x["name"]: x["value"] for x in c["metrics"]}
assert "auc_mean" in m and "auc_std" in m and m["samples_per_s"] > 0, m
PY
[ $? -eq 0 ] && ok "seeds.jsonl: one record per seed with metrics, curve and digest" || fail "seeds.jsonl records" "$(cat "$TMP/py")"
"$PLUMB" compare "$TMP/pa" "$TMP/pb" --out "$TMP/cab" >"$TMP/cab.out" 2>&1
rc=$?
{ [ $rc -eq 0 ] || [ $rc -eq 1 ]; } && grep -q "training parity: parity cpu vs cpu" "$TMP/cab.out" && grep -q "permutation p" "$TMP/cab.out" \
  && ok "compare of two parity runs tests every metric (exit $rc)" || fail "compare two parity runs" "exit $rc: $(cat "$TMP/cab.out")"
! grep -q "^verdict: different" "$TMP/cab.out" && ok "seeds 1-3 vs 4-6 of one setting are not called different" \
  || fail "same setting not different" "$(grep -A1 '^verdict' "$TMP/cab.out")"

# ---- 2. two devices in one folder: cpu and the fake hip plugin
if [ -f "$FAKE" ]; then
  mkdir -p "$TMP/bin" "$TMP/plug"; cp "$PLUMB" "$TMP/bin/plumb"; ln -sf "$FAKE" "$TMP/plug/libplumb-hip.so"
  OMP_NUM_THREADS=1 PLUMB_BACKEND_PATH="$TMP/plug" "$TMP/bin/plumb" accept --checks numerics,parity --device all \
    --seeds 2 --seed-steps 30 --threads 1 --out "$TMP/two" >"$TMP/two.out" 2>&1
  rc=$?
  [ $rc -le 1 ] && grep -q "hip:0" "$TMP/two.out" && ok "accept on cpu and fake hip:0 wrote one folder" \
    || fail "accept on two devices" "exit $rc: $(tail -5 "$TMP/two.out")"
  PLUMB_BACKEND_PATH="$TMP/plug" "$TMP/bin/plumb" compare "$TMP/two" --a hip:0 --b cpu --out "$TMP/ctwo" >"$TMP/ctwo.out" 2>&1
  rc=$?
  grep -q "^digests: \([0-9]*\) of \1 rows equal" "$TMP/ctwo.out" && ok "--a hip:0 --b cpu: every digest row equal" \
    || fail "one-folder digests" "exit $rc: $(cat "$TMP/ctwo.out")"
  python3 - "$TMP/ctwo/compare.json" "$TMP/two/results.json" >"$TMP/py" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
pairs = {(p["name"], p["mode"]): p for p in d["pairs"]}
for key in (("numerics", "golden"), ("numerics", "fast"), ("parity", "")):
    assert key in pairs and pairs[key]["device_a"] == "hip:0" and pairs[key]["device_b"] == "cpu", (key, list(pairs))
kinds = {r["kind"] for r in d["digests"]}
assert kinds == {"numerics-golden"}, kinds
assert all(r["equal"] for r in d["digests"])
g = d["parity"][0]
assert g["device_a"] == "hip:0" and g["device_b"] == "cpu"
# the fake device is the cpu backend: the same bits, so B - A is exactly 0 for every seed
for m in g["metrics"]:
    assert m["values_a"] == m["values_b"] and m["diff"] == 0, m
# the parity check on hip:0 tested itself against the cpu's seeds in the same run
c = [x for x in json.load(open(sys.argv[2]))["checks"] if x["name"] == "parity" and x["device"] == "hip:0"][0]
assert "parity_vs_cpu" in c["details"] and c["status"] in ("pass", "warn"), c
assert "AUC vs the cpu" in c["reason"], c["reason"]
PY
  [ $? -eq 0 ] && ok "one folder, two devices: paired by name, parity against the cpu" || fail "one-folder pairing" "$(cat "$TMP/py")"
else
  skip "two devices in one folder" "no $FAKE"
fi

# ---- 2c. two plain `plumb train` golden folders: a train-golden digest row when the
# configuration hash and the step are the same (1 rank and 2 MPI ranks), none otherwise,
# and a digest mismatch (exit 1) when a side's parameters differ
G="train toy --steps 6 --numerics golden --param-digest --quiet --health-interval 0"
"$PLUMB" $G --out "$TMP/ga" >"$TMP/ga.out" 2>&1; rc_a=$?
if command -v mpirun >/dev/null 2>&1; then
  mpirun -np 2 "$PLUMB" $G --comm mpi --out "$TMP/gb" >"$TMP/gb.out" 2>&1; rc_b=$?; gb_ranks=2
else
  "$PLUMB" $G --threads 1 --out "$TMP/gb" >"$TMP/gb.out" 2>&1; rc_b=$?; gb_ranks=1
fi
"$PLUMB" $G --steps 5 --out "$TMP/gc" >"$TMP/gc.out" 2>&1; rc_c=$?
"$PLUMB" $G --seed 9 --out "$TMP/gd" >"$TMP/gd.out" 2>&1; rc_d=$?
if [ $rc_a -eq 0 ] && [ $rc_b -eq 0 ] && [ $rc_c -eq 0 ] && [ $rc_d -eq 0 ]; then
  "$PLUMB" compare "$TMP/ga" "$TMP/gb" --json >"$TMP/gab.json" 2>"$TMP/gab.err"; rc_ab=$?
  "$PLUMB" compare "$TMP/ga" "$TMP/gc" --json >"$TMP/gac.json" 2>"$TMP/gac.err"; rc_ac=$?
  "$PLUMB" compare "$TMP/ga" "$TMP/gd" --json >"$TMP/gad.json" 2>"$TMP/gad.err"; rc_ad=$?
  # B's parameters changed by hand: the same configuration and step, another digest
  cp -r "$TMP/gb" "$TMP/ge"
  python3 - "$TMP/ge/results.json" <<'PY'
import json, sys
p = sys.argv[1]; d = json.load(open(p))
for c in d["checks"]:
    if c["name"] == "train-toy":
        c["details"]["param_digest"] = "0" * 64
json.dump(d, open(p, "w"))
PY
  "$PLUMB" compare "$TMP/ga" "$TMP/ge" >"$TMP/gae.out" 2>&1; rc_ae=$?
  python3 - "$TMP/gab.json" "$TMP/gac.json" "$TMP/gad.json" >"$TMP/py" 2>&1 <<'PY'
import json, sys
ab, ac, ad = (json.load(open(f)) for f in sys.argv[1:4])
rows = [r for r in ab["digests"] if r["kind"] == "train-golden"]
assert len(rows) == 1 and rows[0]["equal"] is True and "6 steps" in rows[0]["item"], ab["digests"]
assert ab["verdict"] == "digests equal", ab["verdict"]
for d, why in ((ac, "--steps 5"), (ad, "--seed 9")):
    assert [r for r in d["digests"] if r["kind"] == "train-golden"] == [], (why, d["digests"])
PY
  [ $? -eq 0 ] && [ $rc_ab -eq 0 ] && [ $rc_ac -eq 0 ] && [ $rc_ad -eq 0 ] \
    && ok "plain golden train folders: one equal train-golden row (1 rank against $gb_ranks), none for another step or seed" \
    || fail "plain golden train folders" "exit $rc_ab/$rc_ac/$rc_ad: $(cat "$TMP/py") $(cat "$TMP/gab.err")"
  [ $rc_ae -eq 1 ] && grep -q "digest mismatch" "$TMP/gae.out" && grep -q "train-golden" "$TMP/gae.out" \
    && ok "a plain golden train folder with other parameters: digest mismatch, exit 1" \
    || fail "plain golden train digest mismatch" "exit $rc_ae: $(tail -5 "$TMP/gae.out")"
else
  fail "golden toy runs for compare" "exit $rc_a/$rc_b/$rc_c/$rc_d: $(tail -2 "$TMP/gb.out")"
fi

# ---- 2b. the ladder through the CLI: two short ladders on the cpu (2 and 1 threads, B planted from rung 3 on)
"$PLUMB" attribute --seeds 2 --steps 20 --rungs golden,fast-strict,fast-vendor --out "$TMP/la" >"$TMP/la.out" 2>&1 &
P1=$!
OMP_NUM_THREADS=1 "$PLUMB" attribute --seeds 2 --steps 20 --threads 1 --rungs golden,fast-strict,fast-vendor --plant lr=3@3 \
  --out "$TMP/lb" >"$TMP/lb.out" 2>&1
rc_b=$?; wait $P1; rc_a=$?
[ $rc_a -eq 0 ] && [ $rc_b -eq 0 ] && ok "attribute ran two ladders" || fail "attribute" "exit $rc_a/$rc_b: $(tail -3 "$TMP/la.out") $(tail -3 "$TMP/lb.out")"
"$PLUMB" compare "$TMP/la" "$TMP/lb" --attribute --out "$TMP/cl" >"$TMP/cl.out" 2>&1
python3 - "$TMP/cl/compare.json" "$TMP/la/results.json" >"$TMP/py" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
lad = d["ladder"]
r = {x["name"]: x for x in lad["rungs"]}
assert list(r) == ["golden", "fast-strict", "fast-vendor"], list(r)
# golden: the same bits with 2 threads and with 1, seed for seed
assert r["golden"]["golden_equal"] is True, r["golden"]
rows = [x for x in d["digests"] if x["kind"] == "ladder-golden"]
assert len(rows) == 2 and all(x["equal"] for x in rows), rows
# on the cpu rung 3 is rung 2 on A (said so); B's plant makes its rung 3 a run of its own
assert r["fast-vendor"]["same_as_a"] == 2 and "same setting" in r["fast-vendor"]["note_a"], r["fast-vendor"]
assert "same_as_b" not in r["fast-vendor"], r["fast-vendor"]
assert r["fast-vendor"]["shift_a"]["diff"] == 0.0
c = [x for x in json.load(open(sys.argv[2]))["checks"] if x["name"] == "ladder"][0]
assert [x["rung"] for x in c["details"]["rungs"]] == [1, 2, 3] and "seeds" not in c["details"]["rungs"][2]
PY
[ $? -eq 0 ] && grep -q "attribution ladder" "$TMP/cl.out" && ok "compare --attribute: golden bit-equal across thread counts, the cpu's rung 3 is rung 2" \
  || fail "compare --attribute" "$(cat "$TMP/py") $(tail -12 "$TMP/cl.out")"

# ---- 3. hand-made folders: each verdict and exit code
python3 - "$TMP" >"$TMP/py" 2>&1 <<'PY'
import json, math, os, random, sys
t = sys.argv[1]
def seeds(path, first, mean, sd, rnd, loss_shift=0.0, from_step=10**9):
    with open(path, "w") as f:
        for s in range(first, first + 5):
            curve = [[st, 0.47 + 0.25 * math.exp(-st / 200) + rnd.gauss(0, 0.002) + (loss_shift if st >= from_step else 0)]
                     for st in range(5, 1501, 5)]
            f.write(json.dumps({"seed": s, "auc": rnd.gauss(mean, sd), "logloss": rnd.gauss(0.474, 0.0002),
                                "curve": curve, "info": {"samples_per_s": 18000}}) + "\n")
def run(d, device, golden_digest, seeds_args):
    os.makedirs(d + "/checks/parity", exist_ok=True)
    seeds(d + "/checks/parity/seeds.jsonl", *seeds_args)
    ops = [{"op": "gemm", "dtype": "fp32", "shape": s, "digest": g, "norm_rel": 1e-7, "criterion": "norm_rel",
            "threshold": 1e-5, "status": "pass"} for s, g in (("1x1x1", "aa" * 32), ("17x33x65", golden_digest))]
    doc = {"schema": "plumb.results/1", "command": "hand-made", "started": "2026-01-01T00:00:00Z", "verdict": "pass",
           "host": {"hostname": "host-" + device}, "versions": {"plumb": "test"}, "platform": {"devices": []},
           "checks": [
               {"name": "numerics", "device": device, "status": "pass", "metrics": [], "thresholds": {}, "artifacts": [],
                "details": {"numerics": "golden", "ops": ops}},
               {"name": "parity", "device": device, "status": "pass", "thresholds": {"auc_floor": 0.75},
                "metrics": [{"name": "samples_per_s", "value": 18000 if device == "cpu" else 95000, "unit": "samples/s"}],
                "artifacts": ["checks/parity/seeds.jsonl"], "details": {}}]}
    json.dump(doc, open(d + "/results.json", "w"))
rnd = random.Random(5)
run(t + "/hA", "cuda:0", "bb" * 32, (1, 0.7600, 0.0002, rnd))
run(t + "/hB", "cpu", "bb" * 32, (6, 0.7600, 0.0002, rnd))                    # the same: equivalent
run(t + "/hC", "cpu", "bb" * 32, (6, 0.7572, 0.0002, rnd, 0.01, 700))         # 0.37% lower, curves apart from 700
run(t + "/hD", "cpu", "cd" * 32, (6, 0.7600, 0.0002, rnd))                    # one golden op differs
os.makedirs(t + "/hBad", exist_ok=True)
json.dump({"schema": "plumb.results/0", "checks": []}, open(t + "/hBad/results.json", "w"))
run(t + "/hE", "cpu", "bb" * 32, (6, 0.7600, 0.0002, rnd))
with open(t + "/hE/checks/parity/seeds.jsonl", "a") as f:
    f.write('{"seed": 7, "auc": 0.76}\n')                                        # seed 7 twice
PY
[ $? -eq 0 ] || fail "hand-made folders" "$(cat "$TMP/py")"
expect_exit "compare: equivalent exits 0" 0 "$PLUMB" compare "$TMP/hA" "$TMP/hB" --out "$OUTD/equivalent"
grep -q "^verdict: equivalent" "$TMP/out" && ok "verdict line says equivalent" || fail "equivalent verdict line" "$(tail -3 "$TMP/out")"
expect_exit "compare: 0.37% lower exits 1" 1 "$PLUMB" compare "$TMP/hA" "$TMP/hC" --out "$OUTD/different"
grep -q "^verdict: different" "$TMP/out" && grep -q "seed bands (min..max over seeds) separate from step 700" "$TMP/out" \
  && ok "different, and the loss bands part at step 700" || fail "different verdict" "$(cat "$TMP/out")"
expect_exit "compare: a golden digest mismatch exits 1" 1 "$PLUMB" compare "$TMP/hA" "$TMP/hD" --out "$OUTD/fault"
grep -q "golden numerics first differs at gemm fp32 17x33x65" "$TMP/out" && grep -q "hardware or driver fault" "$TMP/out" \
  && ok "the first golden op that differs is named as a fault" || fail "golden mismatch named" "$(cat "$TMP/out")"
expect_exit "compare: a missing folder exits 2" 2 "$PLUMB" compare "$TMP/hA" "$TMP/nowhere"
grep -q "nowhere" "$TMP/err" && ok "the message names the missing folder" || fail "missing folder named" "$(cat "$TMP/err")"
expect_exit "compare: a wrong schema exits 2" 2 "$PLUMB" compare "$TMP/hA" "$TMP/hBad"
grep -q "hBad/results.json: schema is 'plumb.results/0'" "$TMP/err" && ok "the message names the file and the schema" \
  || fail "schema named" "$(cat "$TMP/err")"
expect_exit "compare: a bad seeds file exits 2" 2 "$PLUMB" compare "$TMP/hA" "$TMP/hE"
grep -q "hE/checks/parity/seeds.jsonl:6: seed 7 appears twice" "$TMP/err" && ok "the message names the file and line" \
  || fail "bad seeds line named" "$(cat "$TMP/err")"
expect_exit "compare: a bad --margin exits 2" 2 "$PLUMB" compare "$TMP/hA" "$TMP/hB" --margin lots
grep -q "margin" "$TMP/err" && ok "the message names --margin" || fail "--margin named" "$(cat "$TMP/err")"
expect_exit "compare: --attribute without ladders exits 2" 2 "$PLUMB" compare "$TMP/hA" "$TMP/hB" --attribute
# an absolute margin too tight for this spread: undecided, with the seeds it needs, exit 1
expect_exit "compare: a tight margin is undecided" 1 "$PLUMB" compare "$TMP/hA" "$TMP/hB" --margin auc=0.0001,0.15%
grep -Eq "undecided: about [0-9]+ more seeds per side needed" "$TMP/out" && ok "undecided says how many more seeds" \
  || fail "undecided seeds" "$(cat "$TMP/out")"

# ---- 4. --metrics: per-seed results from any framework
sed -n 1,5p "$TMP/hA/checks/parity/seeds.jsonl" | python3 -c "
import json, sys
for l in sys.stdin:
    r = json.loads(l); print(json.dumps({'seed': r['seed'], 'auc': r['auc'], 'val_loss': r['logloss'], 'framework': 'torch'}))" >"$TMP/ma.jsonl"
sed -n 1,5p "$TMP/hC/checks/parity/seeds.jsonl" | python3 -c "
import json, sys
for l in sys.stdin:
    r = json.loads(l); print(json.dumps({'seed': r['seed'], 'auc': r['auc'], 'val_loss': r['logloss'], 'framework': 'torch'}))" >"$TMP/mc.jsonl"
expect_exit "compare --metrics: different exits 1" 1 "$PLUMB" compare --metrics "$TMP/ma.jsonl" "$TMP/mc.jsonl" --json
python3 -c "
import json, sys
d = json.load(open('$TMP/out'))
assert d['mode'] == 'metrics' and d['verdict'] == 'different', d['verdict']
ms = {m['metric']: m for m in d['parity'][0]['metrics']}
assert set(ms) == {'auc', 'val_loss'}, set(ms)
assert ms['auc']['verdict'] == 'different' and ms['auc']['permutation']['exact'] and ms['auc']['permutation']['splits'] == 252
" >"$TMP/py" 2>&1 && ok "--metrics tests every numeric field (string fields ignored)" || fail "--metrics fields" "$(cat "$TMP/py")"
expect_exit "compare --metrics: the same file is equivalent" 0 "$PLUMB" compare --metrics "$TMP/ma.jsonl" "$TMP/ma.jsonl"
echo '{"seed": 1, "auc": "high"}' >"$TMP/mbad.jsonl"
expect_exit "compare --metrics: no numeric metric exits 2" 2 "$PLUMB" compare --metrics "$TMP/ma.jsonl" "$TMP/mbad.jsonl"
grep -q "mbad.jsonl: no numeric metric" "$TMP/err" && ok "the message names the metrics file" || fail "metrics file named" "$(cat "$TMP/err")"

# ---- 5. report.html of a single run: per-seed strip plots, the loss band, throughput bars; then the browser
"$PLUMB" report "$TMP/pa" >/dev/null 2>&1
grep -q 'id="throughput"' "$TMP/pa/report.html" && grep -q 'auc over 3 seeds' "$TMP/pa/report.html" \
  && grep -q 'training loss over 3 seeds' "$TMP/pa/report.html" && ok "report.html of a parity run: seeds, loss band, throughput" \
  || fail "report.html seeds" "$(grep -c svg "$TMP/pa/report.html") svg"
if [ $have_browser = 1 ]; then
  if browse "$OUTD/different/compare.html" "$OUTD/compare_different.png" 5 '#parity' '.margin-band' '.separate' '#throughput' \
       '#side-by-side' '#digests' '#numerics' >"$TMP/b1" 2>&1; then ok "compare.html (different) renders: strip plots, margin band, curves, bars, errors"
  else fail "compare.html different" "$(cat "$TMP/b1")"; fi
  if browse "$OUTD/fault/compare.html" "$OUTD/compare_fault.png" 3 '#digests tr.bad' >"$TMP/b2" 2>&1; then ok "compare.html (digest fault) renders the bad row"
  else fail "compare.html fault" "$(cat "$TMP/b2")"; fi
  grep -q '"verdict":"different"' "$TMP/b1" && ok "the verdict badge comes first and says different" || fail "verdict badge" "$(cat "$TMP/b1")"
  if [ -f "$TMP/ctwo/compare.html" ] && browse "$TMP/ctwo/compare.html" "$OUTD/compare_devices.png" 3 '#parity' >"$TMP/b3" 2>&1; then
    ok "compare.html of two real devices renders"
  elif [ -f "$TMP/ctwo/compare.html" ]; then fail "compare.html two devices" "$(cat "$TMP/b3")"; fi
  if env -u LD_PRELOAD node "$PLUMB_ROOT/tests/browser/check_report.js" "$TMP/pa/report.html" "$OUTD/report_seeds.png" 5 >"$TMP/b4" 2>&1; then
    ok "report.html of a parity run renders its charts"
  else fail "report.html seeds in the browser" "$(cat "$TMP/b4")"; fi
else
  skip "compare.html in the browser" "no chromium or playwright-core (scripts/deps.sh test)"
fi

# ---- 6. signed reports
K="$TMP/keys"; mkdir -p "$K"
expect_exit "report keygen" 0 "$PLUMB" report keygen --key "$K/key.pem" --pub "$K/pub.pem"
expect_exit "report keygen refuses to overwrite" 2 "$PLUMB" report keygen --key "$K/key.pem" --pub "$K/pub2.pem"
openssl genpkey -algorithm ed25519 -out "$K/other.pem" 2>/dev/null && openssl pkey -in "$K/other.pem" -pubout -out "$K/other.pub" 2>/dev/null
S="$TMP/pa"
expect_exit "report sign" 0 "$PLUMB" report sign "$S" --key "$K/key.pem"
expect_exit "report verify with the right key" 0 "$PLUMB" report verify "$S" --pub "$K/pub.pem"
grep -q "^verified: 2 files" "$TMP/out" && ok "verify covers results.json and the seeds file" || fail "verify count" "$(cat "$TMP/out")"
expect_exit "report verify with another key exits 1" 1 "$PLUMB" report verify "$S" --pub "$K/other.pub"
base64 -d "$S/manifest.sig" >"$TMP/sig.bin" 2>/dev/null
openssl pkeyutl -verify -pubin -inkey "$K/pub.pem" -rawin -in "$S/manifest.json" -sigfile "$TMP/sig.bin" >"$TMP/ossl" 2>&1 \
  && ok "OpenSSL verifies the signature on its own" || fail "openssl pkeyutl -verify" "$(cat "$TMP/ossl")"
# a one-byte edit of each covered file, then put back
for f in results.json checks/parity/seeds.jsonl; do
  cp "$S/$f" "$TMP/saved"
  python3 -c "
import sys; p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[len(b) // 2] ^= 0x20; open(p, 'wb').write(bytes(b))" "$S/$f"
  expect_exit "one byte of $f edited: verify exits 1" 1 "$PLUMB" report verify "$S" --pub "$K/pub.pem"
  grep -q "FAIL $f: changed since signing" "$TMP/out" && ok "verify names $f" || fail "verify names $f" "$(cat "$TMP/out")"
  cp "$TMP/saved" "$S/$f"
done
expect_exit "restored: verify exits 0 again" 0 "$PLUMB" report verify "$S" --pub "$K/pub.pem"
echo extra >"$S/checks/parity/notes.txt"
expect_exit "a file added: verify exits 1" 1 "$PLUMB" report verify "$S" --pub "$K/pub.pem"
grep -q "checks/parity/notes.txt: not in the manifest" "$TMP/out" && ok "verify names the added file" || fail "added file" "$(cat "$TMP/out")"
rm -f "$S/checks/parity/notes.txt"
mv "$S/checks/parity/seeds.jsonl" "$TMP/seeds.bak"
expect_exit "a file removed: verify exits 1" 1 "$PLUMB" report verify "$S" --pub "$K/pub.pem"
mv "$TMP/seeds.bak" "$S/checks/parity/seeds.jsonl"
expect_exit "an unsigned folder: verify exits 2" 2 "$PLUMB" report verify "$TMP/pb" --pub "$K/pub.pem"
# both reports show the signature
"$PLUMB" report "$S" --pub "$K/pub.pem" >/dev/null 2>&1
grep -q 'id="signature"' "$S/report.html" && grep -q 'badge pass">verified' "$S/report.html" \
  && ok "report.html shows the verified signature" || fail "report.html signature" "$(grep -o 'id="signature".\{0,200\}' "$S/report.html")"
"$PLUMB" compare "$S" "$TMP/pb" --pub "$K/pub.pem" --out "$TMP/csig" >"$TMP/csig.out" 2>&1
grep -q "signatures: A verified" "$TMP/csig.out" && grep -q 'id="signatures"' "$TMP/csig/compare.html" \
  && ok "compare shows A's verified signature and B unsigned" || fail "compare signatures" "$(grep signatures "$TMP/csig.out")"
echo "screenshots: $OUTD"
finish
