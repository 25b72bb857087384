#!/usr/bin/env bash
# plumb comm on one GPU (docs/COMM.md), on the GPU host (scripts/gpu-round.sh
# comm:60, or alone), from the folder
# scripts/gpu-prep.sh filled (prebuilt build/ with libplumb-cuda.so, scripts/,
# fallback/). The unfiltered GPU suite runs before this script; it is not
# repeated here. At most about one GPU minute, every step under `timeout`:
#   topology  plumb comm --topology (hwloc + NVML: PCI bus, NUMA node, CPUs,
#             nearest NIC, NVLinks, the link matrix, binding advice), next to
#             nvidia-smi's own view (topo -m, bus id, NUMA affinity) so the
#             two can be compared line by line
#   nccl      plumb comm --device cuda --transport nccl, NCCL world size 1:
#             every collective x fp32/bf16/fp16/int64, 8 B..64 MiB, in and
#             out of place, every element checked (0 wrong expected); the
#             run folder's results.json is kept
# Writes logs and JSON under $OUT/comm/ and prints a short summary.
# NVLink multicast stays off; clocks, power and MIG are not touched.
# DEVICE (default cuda) lets the script be smoke-tested on a host with the
# fake GPU plugin (DEVICE=hip, PLUMB_BACKEND_PATH and PLUMB_NCCL_LIB set;
# COMM_MAX, default 64M, the largest size).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
OUT=${OUT:-$here/gpu-out}
O=$OUT/comm
mkdir -p "$O"
LOG=$O/gpu-comm.log
: >"$LOG"
DEVICE=${DEVICE:-cuda}
export NCCL_NVLS_ENABLE=0
log() { echo "$*" | tee -a "$LOG"; }
step() { # step NAME TIMEOUT_S CMD...  (stdout+stderr into $O/NAME.txt and the log)
  local name=$1 t=$2; shift 2
  log ""; log "==== $name: $*"
  local t0=$SECONDS
  timeout "$t" "$@" >"$O/$name.txt" 2>&1
  local rc=$?
  cat "$O/$name.txt" >>"$LOG"
  log "==== $name: exit $rc ($((SECONDS - t0)) s)"
  eval "rc_$name=$rc"
}
log "gpu-comm, $(cat COMMIT 2>/dev/null || git rev-parse --short HEAD 2>/dev/null) on $(hostname) at $(date -u +%FT%TZ)"
if command -v nvidia-smi >/dev/null; then
  timeout 10 nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version --format=csv 2>&1 | tee -a "$LOG"
fi
if [ "$DEVICE" = cuda ]; then
  . "$here/scripts/gpu-libs.sh"
  export PLUMB_BACKEND_PATH=${PLUMB_BACKEND_PATH:-$here/build}
  # NCCL: the host's, else the one the image's PyTorch brings in its pip package
  if [ -z "${PLUMB_NCCL_LIB:-}" ]; then
    nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
    [ -n "$nccl" ] && [ -e "$nccl" ] && export PLUMB_NCCL_LIB=$nccl
  fi
fi
log "PLUMB_NCCL_LIB=${PLUMB_NCCL_LIB:-unset, the loader search path}"

# 1. topology, plumb's and nvidia-smi's
step topology 15 build/plumb comm --topology
if command -v nvidia-smi >/dev/null; then
  step smi_topo 10 nvidia-smi topo -m
  step smi_nvlink 10 nvidia-smi nvlink --status
fi
# 2. the NCCL path, world size 1, every collective and dtype, checked
step nccl 40 build/plumb comm --device "$DEVICE" --transport nccl --ops all --dtype all -b 8 -e "${COMM_MAX:-64M}" -f 2 -w 2 -n 5 \
  --timeout 30 --out "$O/nccl-run"
for f in "$O"/nccl-run/results.json; do [ -f "$f" ] && cp "$f" "$O/nccl-results.json"; done

# summary: the topology block per GPU, the transport line, the 64 MiB rows and the verdict
{
  echo "---- gpu-comm summary ($(cat COMMIT 2>/dev/null)) ----"
  echo "topology (exit ${rc_topology:-?}):"
  sed -n '1,40p' "$O/topology.txt"
  [ -f "$O/smi_topo.txt" ] && { echo "nvidia-smi topo -m (exit ${rc_smi_topo:-?}):"; sed -n '1,20p' "$O/smi_topo.txt"; }
  echo "nccl sweep (exit ${rc_nccl:-?}):"
  grep -E "^# (transport|device|ranks)" "$O/nccl.txt"
  grep -E "^ +67108864 " "$O/nccl.txt"
  python3 - "$O/nccl-results.json" <<'PY' 2>/dev/null || echo "no results.json"
import json, sys
r = json.load(open(sys.argv[1]))
for c in r.get("checks", []):
    if c.get("name") != "comm":
        continue
    d = c.get("details", {})
    sw = d.get("sweeps", [])
    rows = [x for s in sw for x in s.get("rows", [])]
    wrong = sum(s.get("wrong") or 0 for s in sw)
    m = {x.get("name"): x.get("value") for x in c.get("metrics", [])}
    print("check comm on %s: %s%s; %d sweeps, %d rows, %s wrong (metric %s); implementation %s; %s" % (
        c.get("device"), c.get("status"), (" (" + c["reason"] + ")") if c.get("reason") else "",
        len(sw), len(rows), wrong, m.get("wrong"), d.get("implementation"), d.get("transport")))
PY
} | tee "$O/summary.txt"
