#!/usr/bin/env bash
# plumb comm on one GPU (docs/COMM.md), on the GPU host (scripts/gpu-round.sh
# comm:240, or alone), from the folder
# scripts/gpu-prep.sh filled (prebuilt build/ with libplumb-cuda.so, scripts/,
# fallback/, and osu/osu_allreduce when OSU_DIR was given there). The
# unfiltered GPU suite runs before this script; it is not repeated here.
# Every step under `timeout`: about 1.5 min in all expected (the NCCL sweep
# ~20 s of it, 90 s at most; the OSU side by side ~40 s, 150 s at most):
#   topology  plumb comm --topology (hwloc + NVML: PCI bus, NUMA node, CPUs,
#             nearest NIC, NVLinks, the link matrix, binding advice), next to
#             nvidia-smi's own view (topo -m, bus id, NUMA affinity) so the
#             two can be compared line by line
#   nccl      plumb comm --device cuda --transport nccl, NCCL world size 1:
#             every collective x fp32/bf16/fp16/int64, 8 B..64 MiB, in and
#             out of place, -w 2 -n 5, every element checked (0 wrong
#             expected), 90 s limit; the run folder's results.json is kept
#   osu       (CPU only, when osu/osu_allreduce was carried and mpirun is
#             here) bench/comm_vs_osu.sh: plumb comm's MPI all-reduce against
#             osu_allreduce, 2 ranks, 64 MiB fp32, 50 timed calls, 5 rounds
#             alternating which goes first, on a host nobody else loads
# Writes logs and JSON under $OUT/comm/ and prints a short summary: the
# topology, the NCCL sweep's rows, wrong count and 64 MiB algbw/busbw per
# collective and dtype, the OSU rounds with medians and their ratio.
# NVLink multicast stays off; clocks, power and MIG are not touched.
# DEVICE (default cuda) lets the script be smoke-tested on a host with the
# fake GPU plugin (DEVICE=hip, PLUMB_BACKEND_PATH and PLUMB_NCCL_LIB set;
# COMM_MAX, default 64M, the largest size; OSU_ITERS / OSU_ROUNDS, default
# 50 / 5, the side by side's calls and rounds).
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
  eval "rc_$name=$rc t_$name=$((SECONDS - t0))"
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
step nccl 90 build/plumb comm --device "$DEVICE" --transport nccl --ops all --dtype all -b 8 -e "${COMM_MAX:-64M}" -f 2 -w 2 -n 5 \
  --timeout 30 --out "$O/nccl-run"
for f in "$O"/nccl-run/results.json; do [ -f "$f" ] && cp "$f" "$O/nccl-results.json"; done

# 3. plumb comm against osu_allreduce on this host's MPI (CPU only)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
OSU=$here/osu/osu_allreduce
osu_why=""
if [ ! -x "$OSU" ]; then osu_why="no osu/osu_allreduce carried (scripts/gpu-prep.sh with OSU_DIR=...)"
elif ! command -v mpirun >/dev/null; then osu_why="no mpirun on this host"
else
  { echo "mpirun: $(mpirun --version 2>&1 | head -1)"; echo "ldd osu_allreduce:"; ldd "$OSU"; echo "ldd plumb:"; ldd build/plumb | grep -E "mpi|not found"; } >"$O/osu_env.txt" 2>&1
  cat "$O/osu_env.txt" >>"$LOG"
  if grep -q "not found" "$O/osu_env.txt"; then osu_why="a library does not resolve: $(grep 'not found' "$O/osu_env.txt" | tr -s ' \t' ' ' | head -3 | tr '\n' ';')"
  else
    # a 2-rank probe of both; a container that forbids CMA gets vader's copy-in/copy-out
    MPI_ARGS=""
    probe() { timeout 30 mpirun --oversubscribe $MPI_ARGS -np 2 "$OSU" -m 8:8 -i 1 -x 1 >"$O/osu_probe.txt" 2>&1 \
      && timeout 30 mpirun --oversubscribe $MPI_ARGS -np 2 build/plumb comm -b 8 -e 8 -w 0 -n 1 >>"$O/osu_probe.txt" 2>&1; }
    if ! probe; then
      MPI_ARGS="--mca btl_vader_single_copy_mechanism none"
      probe || osu_why="a 2-rank mpirun of osu_allreduce or plumb comm fails here: $(grep -iE 'error|abort|fail' "$O/osu_probe.txt" | head -2 | tr '\n' ';')"
    fi
    cat "$O/osu_probe.txt" >>"$LOG"
    export MPI_ARGS
    [ -z "$osu_why" ] && step osu 150 bash bench/comm_vs_osu.sh "$OSU" 2 67108864 "${OSU_ITERS:-50}" "${OSU_ROUNDS:-5}"
    log "osu: mpirun options '${MPI_ARGS}'"
  fi
fi
[ -n "$osu_why" ] && log "==== osu: skipped: $osu_why"

# summary: the topology block per GPU, the transport line, per sweep rows /
# wrong / 64 MiB figures, the verdict, the OSU rounds
{
  echo "---- gpu-comm summary ($(cat COMMIT 2>/dev/null)) ----"
  echo "topology (exit ${rc_topology:-?}):"
  sed -n '1,40p' "$O/topology.txt"
  [ -f "$O/smi_topo.txt" ] && { echo "nvidia-smi topo -m (exit ${rc_smi_topo:-?}):"; sed -n '1,20p' "$O/smi_topo.txt"; }
  echo "nccl sweep (exit ${rc_nccl:-?}, ${t_nccl:-?} s):"
  grep -E "^# (transport|device|ranks)" "$O/nccl.txt"
  python3 - "$O/nccl-results.json" <<'PY' 2>/dev/null || echo "no results.json"
import json, sys
r = json.load(open(sys.argv[1]))
for c in r.get("checks", []):
    if c.get("name") != "comm":
        continue
    d = c.get("details", {})
    sw = d.get("sweeps", [])
    nrows = sum(len(s.get("rows", [])) for s in sw)
    wrong = sum(s.get("wrong") or 0 for s in sw)
    print("  %-15s %-5s %4s %6s  %-34s %s" % ("collective", "dtype", "rows", "wrong", "largest: out algbw/busbw GB/s", "in algbw/busbw"))
    for s in sw:
        if s.get("skipped"):
            print("  %-15s %-5s skipped: %s" % (s["collective"], s["dtype"], s["skipped"]))
            continue
        L = s.get("largest") or {}
        def pl(k):
            p = L.get(k)
            return "%9.2f / %9.2f" % (p["algbw_GBps"], p["busbw_GBps"]) if isinstance(p, dict) else "%21s" % "-"
        print("  %-15s %-5s %4d %6s  %10s B %s   %s" % (s["collective"], s["dtype"], len(s.get("rows", [])),
              s.get("wrong"), L.get("bytes", "-"), pl("out"), pl("in")))
    print("check comm on %s: %s%s; %d sweeps, %d rows, %s wrong (metric %s); implementation %s; %s" % (
        c.get("device"), c.get("status"), (" (" + c["reason"] + ")") if c.get("reason") else "",
        len(sw), nrows, wrong, {x.get("name"): x.get("value") for x in c.get("metrics", [])}.get("wrong"),
        d.get("implementation"), d.get("transport")))
PY
  if [ -f "$O/osu.txt" ]; then
    echo "plumb comm vs osu_allreduce, 2 MPI ranks, 64 MiB fp32 (exit ${rc_osu:-?}, ${t_osu:-?} s; mpirun ${MPI_ARGS:-default}):"
    cat "$O/osu.txt"
    awk '$2 == "osu" || $2 == "plumb" { v[$2] = v[$2] " " $4 }
      function med(s,   a, n, i, j, t) { n = split(s, a, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
      END { if (v["osu"] != "" && v["plumb"] != "") { o = med(v["osu"]); p = med(v["plumb"]);
        printf "median algbw: osu %.4f GB/s, plumb %.4f GB/s, plumb/osu %.3f (%s 5%%)\n", o, p, p / o, (p / o >= 0.95 && p / o <= 1.05) ? "within" : "NOT within" } }' "$O/osu.txt"
  else
    echo "osu: ${osu_why:-not run (exit ${rc_osu:-?})}"
  fi
} | tee "$O/summary.txt"
