# plumb health end to end: the table and JSON on this host, fake NVML/ROCm SMI
# libraries for GPU values, thresholds and exit codes, --jsonl, the exporter
# checked by promtool, and the exporter robustness drill (loopback only).
. "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
FN=$PLUMB_BUILD/tests/libfake_nvml.so
FR=$PLUMB_BUILD/tests/libfake_rsmi.so

expect_exit "health on this host exits 0" 0 "$PLUMB" health
grep -q '^cpu ' "$TMP/out" && ok "table has the cpu row" || fail "table has the cpu row" "$(cat "$TMP/out")"

"$PLUMB" health --json >"$TMP/h.json" 2>"$TMP/err"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert any(x["device"]=="cpu" for x in d["devices"]); assert "thresholds" in d' "$TMP/h.json" \
  && ok "--json is JSON with the cpu device" || fail "--json" "$(head -c 300 "$TMP/h.json")"

# fake GPUs: values from the fake libraries, units converted
PLUMB_NVML_LIB=$FN PLUMB_RSMI_LIB=$FR "$PLUMB" health --json --providers nvml,rocm-smi >"$TMP/g.json" 2>"$TMP/err"
python3 - "$TMP/g.json" <<'PY' && ok "--json carries the fake GPUs' values" || fail "--json fake values" "$(head -c 400 "$TMP/g.json")"
import json, sys
d = {x["device"]: x for x in json.load(open(sys.argv[1]))["devices"]}
n, a = d["nvidia0"], d["amd1"]
assert n["temp_c"] == 40 and n["power_w"] == 123.456 and n["mem_used_mib"] == 1234 and n["mem_total_mib"] == 143771
assert n["clk_sm_mhz"] == 1980 and n["ecc_uncorr_vol"] == 0 and "retired_pages" in n["unsupported"]
assert a["temp_c"] == 45 and a["power_w"] == 312.5 and a["mem_total_mib"] == 65536 and a["ecc_corr_agg"] == 7
PY

# thresholds: crossing exits 1 with an ALERT line; a bad file exits 2 naming it
printf 'gpu_temp_c = 41\n' >"$TMP/thr.conf"
PLUMB_NVML_LIB=$FN expect_exit "a crossed threshold exits 1" 1 "$PLUMB" health --providers nvml --thresholds "$TMP/thr.conf"
grep -q 'ALERT nvidia1 temp_c = 41 (limit 41)' "$TMP/out" && ok "alert fires at exactly the limit (nvidia1 41 C)" || fail "alert line" "$(cat "$TMP/out")"
grep -q 'ALERT nvidia0' "$TMP/out" && fail "nvidia0 at 40 C must not alert" || ok "nvidia0 below the limit raises nothing"
printf 'gpu_temp_c = warm\n' >"$TMP/bad.conf"
expect_exit "bad thresholds file exits 2" 2 "$PLUMB" health --thresholds "$TMP/bad.conf"
grep -q 'bad.conf:1' "$TMP/err" && ok "bad thresholds file is named with its line" || fail "bad file named" "$(cat "$TMP/err")"
expect_exit "--watch negative exits 2" 2 "$PLUMB" health --watch -1
expect_exit "--serve without a port exits 2" 2 "$PLUMB" health --serve 127.0.0.1
expect_exit "--providers unknown exits 2" 2 "$PLUMB" health --providers dcgm

# a bad --out is said before the first sample: a --watch of 30 s (2 rounds) ran to its end
# and only then found the folder could not be made; timeout 20 stands for "before"
touch "$TMP/plainfile"
run "--out under a regular file: exit 2 before any sampling" 2 "plumb health: --out .*plainfile/x: cannot create" \
  timeout 20 "$PLUMB" health --providers linux --watch 30 --count 2 --out "$TMP/plainfile/x"
grep -q '^cpu ' "$TMP/out" && fail "no table before the --out error" "$(head -3 "$TMP/out")" || ok "no table before the --out error"
# --out: the alerts go to the run's results
PLUMB_NVML_LIB=$FN "$PLUMB" health --providers nvml --thresholds "$TMP/thr.conf" --out "$TMP/run" >/dev/null 2>&1
python3 - "$TMP/run/results.json" <<'PY' && ok "--out records a failing health check with its alert" || fail "--out results" "$(head -c 400 "$TMP/run/results.json")"
import json, sys
d = json.load(open(sys.argv[1]))
c = [c for c in d["checks"] if c["name"] == "health"][0]
assert c["status"] == "fail" and d["verdict"] == "fail", c["status"]
a = c["details"]["alerts"]
assert len(a) == 1 and a[0]["device"] == "nvidia1" and a[0]["quantity"] == "temp_c" and a[0]["value"] == 41 and a[0]["limit"] == 41, a
assert "checks/health/samples.jsonl" in c["artifacts"]
# what the artifact holds: the samples the check counted, each with both fake GPUs
lines = [json.loads(l) for l in open(sys.argv[1].rsplit("/", 1)[0] + "/checks/health/samples.jsonl")]
m = {x["name"]: x["value"] for x in c["metrics"]}
assert len(lines) >= 1 and len(lines) == m["samples"], (len(lines), m)
for l in lines:
    dv = {x["device"]: x for x in l["devices"]}
    assert l["type"] == "health" and dv["nvidia0"]["temp_c"] == 40 and dv["nvidia1"]["temp_c"] == 41, l
PY

# --jsonl with --watch/--count
PLUMB_NVML_LIB=$FN "$PLUMB" health --providers nvml,linux --watch 0.05 --count 3 --jsonl "$TMP/h.jsonl" >/dev/null 2>&1
[ "$(wc -l <"$TMP/h.jsonl")" -eq 3 ] && python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$TMP/h.jsonl" \
  && ok "--jsonl writes one JSON line per round" || fail "--jsonl" "$(wc -l <"$TMP/h.jsonl") lines"

# inside training: a critical temperature checkpoints and stops (--on-overheat stop), or only warns
TR="--steps 40 --train-samples 20000 --eval-samples 2000 --health-interval 0.2 --quiet"
FAKE_NVML_TEMP=95 PLUMB_NVML_LIB=$FN "$PLUMB" train ctr $TR --checkpoint-dir "$TMP/oh/ck" --out "$TMP/oh/run" >"$TMP/oh.out" 2>&1
python3 - "$TMP/oh/run" <<'PY' && ok "overheat: checkpoint, clean stop, health check fails with the critical alert" || fail "overheat stop" "$(tail -5 "$TMP/oh.out")"
import json, sys, os
d = sys.argv[1]
r = json.load(open(d + "/results.json"))
c = {x["name"]: x for x in r["checks"]}
assert r["train"]["interrupted"] and r["train"]["steps"] < 40, r["train"]
assert c["health"]["status"] == "fail"
assert any(a["quantity"] == "temp_critical" and a["critical"] and a["value"] == 95 for a in c["health"]["details"]["alerts"])
lines = [json.loads(l) for l in open(d + "/checks/train-ctr/metrics.jsonl")]
assert any(l.get("type") == "health" and l["devices"][0]["temp_c"] == 95 for l in lines)
PY
ls "$TMP/oh/ck"/ckpt-*.plumb >/dev/null 2>&1 && ok "overheat: checkpoint written" || fail "overheat checkpoint" "$(ls "$TMP/oh/ck" 2>&1)"
FAKE_NVML_TEMP=95 PLUMB_NVML_LIB=$FN "$PLUMB" train ctr $TR --on-overheat warn --out "$TMP/ow" >"$TMP/ow.out" 2>&1
python3 - "$TMP/ow" <<'PY' && ok "--on-overheat warn: the run completes, alerts recorded" || fail "overheat warn" "$(tail -5 "$TMP/ow.out")"
import json, sys
r = json.load(open(sys.argv[1] + "/results.json"))
c = {x["name"]: x for x in r["checks"]}
assert not r["train"]["interrupted"] and r["train"]["steps"] == 40, r["train"]
assert c["train-ctr"]["status"] == "pass" and c["health"]["status"] == "fail"
PY
PLUMB_NVML_LIB=$FN "$PLUMB" train ctr $TR --out "$TMP/ok" >"$TMP/okr.out" 2>&1
python3 -c 'import json,sys; r=json.load(open(sys.argv[1]+"/results.json")); c={x["name"]:x for x in r["checks"]}; assert c["health"]["status"]=="pass", c["health"]' "$TMP/ok" \
  && ok "cool GPUs: the run's health check passes" || fail "health pass in train" "$(tail -5 "$TMP/okr.out")"

# exporter: start on an ephemeral loopback port, wait for the port file
serve() { # serve NAME [env...] -- starts plumb health --serve in the background
  rm -f "$TMP/port"
  env "$@" "$PLUMB" health --serve 127.0.0.1:0 --port-file "$TMP/port" --watch 0.5 --request-timeout 3 >"$TMP/serve.out" 2>"$TMP/serve.err" &
  SPID=$!
  for _ in $(seq 100); do [ -s "$TMP/port" ] && break; sleep 0.1; done
  PORT=$(cat "$TMP/port" 2>/dev/null)
}
stop_serve() { kill -TERM "$SPID" 2>/dev/null; wait "$SPID"; SRC=$?; }

serve PLUMB_NVML_LIB=/nonexistent
if [ -n "$PORT" ] && curl -sf "http://127.0.0.1:$PORT/metrics" >"$TMP/cpu.prom"; then
  promtool check metrics <"$TMP/cpu.prom" >"$TMP/pt" 2>&1 && ok "promtool accepts /metrics on this host (CPU)" || fail "promtool cpu" "$(cat "$TMP/pt")"
  grep -q '^plumb_health_alerts{device="cpu"' "$TMP/cpu.prom" && ok "alerts gauge present" || fail "alerts gauge" "$(head -c 300 "$TMP/cpu.prom")"
else fail "exporter (cpu) serves /metrics" "$(cat "$TMP/serve.err")"; fi
stop_serve; [ "$SRC" -eq 0 ] && ok "exporter stops cleanly on SIGTERM" || fail "exporter exit" "rc $SRC: $(tail -5 "$TMP/serve.err")"

serve PLUMB_NVML_LIB="$FN" PLUMB_RSMI_LIB="$FR"
if [ -n "$PORT" ] && curl -sf "http://127.0.0.1:$PORT/metrics" >"$TMP/gpu.prom"; then
  promtool check metrics <"$TMP/gpu.prom" >"$TMP/pt" 2>&1 && ok "promtool accepts /metrics with fake NVIDIA and AMD GPUs" || fail "promtool gpu" "$(cat "$TMP/pt")"
  grep -q '^DCGM_FI_DEV_GPU_TEMP{device="nvidia0",uuid="GPU-fake-00",vendor="nvidia",gpu="0"} 40$' "$TMP/gpu.prom" && \
  grep -q '^GPU_JUNCTION_TEMPERATURE{device="amd0",uuid="0xabc0000000000000",vendor="amd",gpu="0"} 52.5$' "$TMP/gpu.prom" && \
  grep -q '^# TYPE DCGM_FI_DEV_POWER_USAGE gauge$' "$TMP/gpu.prom" \
    && ok "dcgm / AMD exporter names with device, uuid, vendor labels" || fail "metric names" "$(head -c 600 "$TMP/gpu.prom")"
  grep -q 'DCGM_FI_DEV_RETIRED_PAGES{device="nvidia0"' "$TMP/gpu.prom" && fail "unsupported retired pages exported" || ok "unsupported quantities are not exported"
  cp "$TMP/gpu.prom" "${PLUMB_KEEP_PROM:-/dev/null}" 2>/dev/null
  python3 "$here/exporter_stress.py" "$PORT" 3 >"$TMP/stress" 2>&1; src=$?
  cat "$TMP/stress"
  [ $src -eq 0 ] && ok "exporter robustness drill" || fail "exporter robustness drill" "see above"
  kill -0 "$SPID" 2>/dev/null && ok "exporter still running after the drill" || fail "exporter died" "$(tail -20 "$TMP/serve.err")"
else fail "exporter (fake gpus) serves /metrics" "$(cat "$TMP/serve.err")"; fi
stop_serve; [ "$SRC" -eq 0 ] && ok "exporter exits 0 after the drill (no crash, no sanitizer report)" || fail "exporter exit after drill" "rc $SRC: $(tail -20 "$TMP/serve.err")"
grep -q 'ERROR: AddressSanitizer\|runtime error:' "$TMP/serve.err" && fail "sanitizer report" "$(grep -m3 'Sanitizer\|runtime error' "$TMP/serve.err")"
finish
