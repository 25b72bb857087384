# report.html in a real browser: Debian's headless chromium (driven by
# playwright-core, tests/browser) opens reports written by `plumb accept`,
# by `plumb report` (with RNG histograms) and by `plumb doctor` with hostile
# environment values, and finds no console errors, no dialogs and no network
# requests. Screenshots are kept in $PLUMB_BUILD/test-output/report_browser/.
. "$(dirname "$0")/lib.sh"
OUTD=${PLUMB_BUILD:-$PLUMB_ROOT/build}/test-output/report_browser
rm -rf "$OUTD"; mkdir -p "$OUTD"
JS="$PLUMB_ROOT/tests/browser/check_report.js"
if [ ! -x /usr/bin/chromium ] && [ -z "${CHROMIUM:-}" ]; then
  fail "chromium present" "no /usr/bin/chromium: run scripts/deps.sh test"; finish; exit; fi
if [ ! -d "$PLUMB_ROOT/tests/browser/node_modules/playwright-core" ]; then
  fail "playwright-core installed" "tests/browser/node_modules missing: run scripts/deps.sh test (npm ci)"; finish; exit; fi
# The sanitizer runtime must not leak into node or chromium.
browse() { env -u LD_PRELOAD node "$JS" "$@"; }

# 1. what accept writes
"$PLUMB" accept --quick --device cpu --out "$OUTD/accept" >"$TMP/acc.out" 2>&1
rc=$?
[ $rc -le 1 ] && ok "accept wrote a run folder" || fail "accept wrote a run folder" "exit $rc: $(tail -5 "$TMP/acc.out")"
# at least the rng histograms (5 streams x 2 kinds) are drawn
if browse "$OUTD/accept/report.html" "$OUTD/accept.png" 10 >"$TMP/b1" 2>&1; then ok "accept report renders cleanly"
else fail "accept report renders cleanly" "$(cat "$TMP/b1")"; fi
[ -s "$OUTD/accept.png" ] && ok "accept screenshot kept" || fail "accept screenshot kept"

# 2. a hand-made run folder with RNG histograms, rendered by plumb report
R="$OUTD/hist"; mkdir -p "$R/checks/rng"
python3 - "$R" <<'PY'
import json, math, sys
d = sys.argv[1]
def normal_expected(n, lo, hi, total):
    cdf = lambda x: 0.5 * (1 + math.erf(x / math.sqrt(2)))
    w = (hi - lo) / n
    return [total * (cdf(lo + (i + 1) * w) - cdf(lo + i * w)) for i in range(n)]
ne = normal_expected(40, -4, 4, 100000)
streams = [
  {"name": "uniform init", "kind": "uniform", "lo": 0, "hi": 1, "counts": [2500 + (i * 37 % 61) - 30 for i in range(40)], "expected": [2500.0] * 40},
  {"name": "normal dropout", "kind": "normal", "lo": -4, "hi": 4, "counts": [round(x) for x in ne], "expected": ne},
]
json.dump({"streams": streams}, open(f"{d}/checks/rng/histograms.json", "w"))
import os
os.makedirs(f"{d}/checks/train-ctr", exist_ok=True)
with open(f"{d}/checks/train-ctr/metrics.jsonl", "w") as f:
    for s in range(1, 201):
        f.write(json.dumps({"kind": "train", "step": s, "loss": 0.7 * math.exp(-s / 60) + 0.45, "lr": 1e-3}) + "\n")
        if s % 50 == 0:
            f.write(json.dumps({"kind": "eval", "step": s, "loss": 0.7 * math.exp(-s / 60) + 0.47, "auc": 0.6 + 0.1 * s / 200}) + "\n")
doc = {"schema": "plumb.results/1", "command": "hand-made", "started": "2026-01-01T00:00:00Z",
       "finished": "2026-01-01T00:00:01Z", "verdict": "pass",
       "host": {"hostname": "test<host>"}, "versions": {"plumb": "test"}, "platform": {"devices": []},
       "checks": [{"name": "rng", "device": "cpu", "status": "pass", "reason": "ok", "duration_s": 1.0,
                   "metrics": [{"name": "ks_p_min", "value": 0.31, "unit": ""}], "thresholds": {"ks_p_min": 0.001},
                   "artifacts": ["checks/rng/histograms.json"], "details": {}},
                  {"name": "numerics", "device": "cpu", "status": "pass", "duration_s": 2.0, "metrics": [],
                   "thresholds": {}, "artifacts": [], "details": {"ops": [
                     {"op": "gemm", "dtype": "fp32", "shape": [127, 33, 65], "max_rel": 1e-6, "norm_rel": 2e-7,
                      "max_ulp": 3, "threshold": 1e-5, "digest": "ab" * 32, "deterministic": True}]}},
                  {"name": "train-ctr", "device": "cpu", "status": "pass", "duration_s": 3.0, "metrics": [],
                   "thresholds": {}, "artifacts": ["checks/train-ctr/metrics.jsonl"], "details": {}}]}
json.dump(doc, open(f"{d}/results.json", "w"))
PY
"$PLUMB" report "$R" >"$TMP/rep.out" 2>&1 && ok "plumb report re-renders" || fail "plumb report re-renders" "$(cat "$TMP/rep.out")"
if browse "$R/report.html" "$OUTD/histograms.png" 5 >"$TMP/b2" 2>&1; then ok "histograms and curves drawn as SVG, no errors"
else fail "histograms and curves drawn as SVG, no errors" "$(cat "$TMP/b2")"; fi
# 2 histograms + 3 curves (loss: train and eval series, lr, auc)
grep -q '"svgs":5' "$TMP/b2" && ok "five charts in the page" || fail "five charts in the page" "$(cat "$TMP/b2")"

# 3. hostile strings from the host: markup, a script, an external image
H='<script>alert(1)</script><img src="http://plumb-test.invalid/x.png" onerror="alert(2)"><b>bold'
NCCL_SOCKET_IFNAME="$H" OMP_PLACES="'\"><iframe src=//plumb-test.invalid>" "$PLUMB" doctor --out "$OUTD/hostile" >"$TMP/doc.out" 2>&1
[ -f "$OUTD/hostile/report.html" ] && ok "doctor wrote a hostile report" || fail "doctor wrote a hostile report" "$(cat "$TMP/doc.out")"
if browse "$OUTD/hostile/report.html" "$OUTD/hostile.png" >"$TMP/b3" 2>&1; then ok "hostile strings stay text (no script, no request)"
else fail "hostile strings stay text (no script, no request)" "$(cat "$TMP/b3")"; fi
grep -q '&lt;script&gt;alert(1)&lt;/script&gt;' "$OUTD/hostile/report.html" && ok "hostile value escaped in the file" \
  || fail "hostile value escaped in the file"

echo "screenshots: $OUTD"
finish
