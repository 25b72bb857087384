#!/usr/bin/env bash
# GPU evidence for plumb health, run ON the GPU host from a folder prepared by
# scripts/health-gpu-prep.sh (plumb + fallback/ libraries). Writes to $OUT:
#   health.jsonl  three rounds of `plumb health --json` (nvml + linux)
#   smi.csv       nvidia-smi --query-gpu right after each round
#   metrics.txt   the /metrics text of `plumb health --serve 127.0.0.1:0`
#   doctor.txt    plumb doctor's rows (the health rows among them)
#   env.txt       nvidia-smi -L, driver, ldd
# promtool is not on the GPU host: run `promtool check metrics < metrics.txt` where it is.
set -u
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
P=./plumb
if ldd "$P" | grep -q 'not found'; then export LD_LIBRARY_PATH=$PWD/fallback${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}; fi
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version,name,persistence_mode,ecc.mode.current --format=csv; ldd "$P";
  nvidia-smi -q -d PERFORMANCE,ECC,TEMPERATURE,POWER | head -150; } >"$OUT/env.txt" 2>&1
# the issue's fields first (one invalid field would void a whole query), then more
q=index,temperature.gpu,power.draw,memory.used,memory.total,clocks.sm,ecc.errors.uncorrected.volatile.total
q2=index,uuid,temperature.memory,power.limit,clocks.mem,ecc.errors.corrected.volatile.total,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,utilization.gpu,persistence_mode,clocks_event_reasons.active
: >"$OUT/health.jsonl"; : >"$OUT/smi.csv"
for r in 1 2 3; do
  "$P" health --json --providers nvml,linux | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)))' >>"$OUT/health.jsonl" 2>>"$OUT/env.txt"
  echo "round $r" >>"$OUT/smi.csv"
  nvidia-smi --query-gpu=$q --format=csv >>"$OUT/smi.csv" 2>&1
  nvidia-smi --query-gpu=$q2 --format=csv >>"$OUT/smi.csv" 2>&1
  sleep 1
done
rm -f port
"$P" health --serve 127.0.0.1:0 --port-file port --watch 1 --duration 8 >/dev/null 2>>"$OUT/env.txt" &
spid=$!
for _ in $(seq 50); do [ -s port ] && break; sleep 0.1; done
sleep 1.5
port=$(cat port)
python3 - "$port" >"$OUT/metrics.txt" 2>>"$OUT/env.txt" <<'PY'
import sys, urllib.request
print(urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5).read().decode(), end="")
PY
kill -TERM $spid; wait $spid; echo "exporter exit $?" >>"$OUT/env.txt"
"$P" doctor >"$OUT/doctor.txt" 2>&1
echo "doctor exit $?" >>"$OUT/env.txt"
ls -la "$OUT"
