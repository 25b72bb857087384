#!/usr/bin/env bash
# plumb comm's all-reduce against the OSU micro-benchmarks' osu_allreduce on
# this machine's MPI, side by side (BENCHMARKS.md, "plumb comm against
# osu_allreduce"). OSU is not part of plumb: build it from its source
# elsewhere (e.g. under /tmp: ./configure CC=mpicc CXX=mpicxx && make -C
# mpi/collective osu_allreduce) and pass the binary.
#
# Both sides time the same thing: MPI_Allreduce of fp32 sum, out of place,
# every call timed on its own with a barrier between calls (OSU's method;
# plumb comm --timing each), the mean over ranks of each rank's mean call
# time; algbw = size / time (1e9 B/s). The two run alternately, REPEATS
# rounds, each first in every other round, so drift in the machine's load
# hits both alike.
# Usage: bench/comm_vs_osu.sh OSU_ALLREDUCE [NP] [BYTES] [ITERS] [REPEATS]
set -eu
OSU=${1:?usage: bench/comm_vs_osu.sh OSU_ALLREDUCE [NP] [BYTES] [ITERS] [REPEATS]}
NP=${2:-2}
BYTES=${3:-67108864}
ITERS=${4:-50}
REPEATS=${5:-5}
WARM=${WARM:-10}
PLUMB=${PLUMB:-build/plumb}
# MPI_ARGS: more mpirun options, the same for both (e.g. --mca
# btl_vader_single_copy_mechanism none where a container forbids CMA)
MPI="mpirun --oversubscribe ${MPI_ARGS:-} -np $NP"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
printf '%-6s %-8s %12s %10s\n' round tool time_us algbw_GBps
osu() { # one osu_allreduce run: "size  avg-latency(us)" rows
  local t
  t=$($MPI "$OSU" -m "$BYTES:$BYTES" -i "$ITERS" -x "$WARM" | awk -v b="$BYTES" '$1 == b {print $2}')
  [ -n "$t" ] || { echo "osu_allreduce printed no row for $BYTES B" >&2; exit 1; }
  awk -v r="$1" -v t="$t" -v b="$BYTES" 'BEGIN {printf "%-6s %-8s %12.1f %10.4f\n", r, "osu", t, b / (t * 1e3)}'
}
plumb() { # one plumb comm run: the out-of-place time column of the row of BYTES
  local t
  t=$($MPI "$PLUMB" comm --ops allreduce --dtype fp32 -b "$BYTES" -e "$BYTES" -w "$WARM" -n "$ITERS" -c 0 \
      --timing each --timeout 600 | awk -v b="$BYTES" '$1 == b {print $6}')
  [ -n "$t" ] || { echo "plumb comm printed no row for $BYTES B" >&2; exit 1; }
  awk -v r="$1" -v t="$t" -v b="$BYTES" 'BEGIN {printf "%-6s %-8s %12.1f %10.4f\n", r, "plumb", t, b / (t * 1e3)}'
}
# odd rounds OSU first, even rounds plumb first
rows=$(mktemp); trap 'rm -f "$rows"' EXIT
for r in $(seq 1 "$REPEATS"); do
  if [ $((r % 2)) = 1 ]; then osu "$r"; plumb "$r"; else plumb "$r"; osu "$r"; fi
done | tee "$rows"
# the medians of the rounds, and their ratio (algbw plumb / osu)
median() { awk -v t="$1" '$2 == t {print $3}' "$rows" | sort -g |
  awk '{v[NR] = $1} END {if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}'; }
mo=$(median osu); mp=$(median plumb)
awk -v o="$mo" -v p="$mp" -v b="$BYTES" -v n="$REPEATS" 'BEGIN {
  r = o / p
  printf "medians of %d rounds: osu %.1f us (%.4f GB/s), plumb %.1f us (%.4f GB/s); plumb/osu algbw %.3f: %s\n",
    n, o, b / (o * 1e3), p, b / (p * 1e3), r, (r >= 0.95 && r <= 1.05) ? "within 5%" : "NOT within 5%" }'
# the paired figure: each round's osu/plumb time ratio (the two ran back to
# back), their geometric mean and its 95% confidence interval (Student t on
# the log ratios); the runs' spread is per process, so only many rounds
# narrow it
awk '$2 == "osu" {o[$1] = $3} $2 == "plumb" {p[$1] = $3}
  END {
    n = 0
    for (r in o) if (r in p) { x[++n] = log(o[r] / p[r]) }
    if (n < 2) { print "paired: fewer than 2 rounds"; exit }
    for (i = 1; i <= n; i++) m += x[i]; m /= n
    for (i = 1; i <= n; i++) v += (x[i] - m) ^ 2; sd = sqrt(v / (n - 1))
    split("12.71 4.303 3.182 2.776 2.571 2.447 2.365 2.306 2.262 2.228 2.201 2.179 2.160 2.145 2.131 2.120 2.110 2.101 2.093 2.086 2.080 2.074 2.069 2.064 2.060 2.056 2.052 2.048 2.045 2.042", tq, " ")
    df = n - 1; t = df <= 30 ? tq[df] : (df <= 60 ? 2.00 : 1.98)
    h = t * sd / sqrt(n)
    lo = exp(m - h); hi = exp(m + h)
    printf "paired over %d rounds: plumb/osu algbw %.3f, 95%% CI [%.3f, %.3f]: %s\n", n, exp(m), lo, hi,
      (lo >= 0.95 && hi <= 1.05) ? "within 5%" : (hi < 0.95 || lo > 1.05) ? "NOT within 5%" : "undecided at this many rounds"
  }' "$rows"
