#!/usr/bin/env bash
# gpt's 16-bit activation pipeline (models/gpt/gpt16.c) on the GPU host, from
# the folder scripts/gpu-prep.sh fills (prebuilt build/); builds nothing.
# The unfiltered GPU suite runs before it (scripts/gpu-round.sh). Figures for
# BENCHMARKS.md's gpt section:
#   tests    PLUMB_TEST_DEVICE=cuda build/plumb-tests gpt16: each 16-bit op
#            against its fp32 op on the GPU (LayerNorm, attention, residual the
#            same bits; GEMMs within an rt ulp), gpt-tiny trained both ways;
#   on       plumb bench gpt, gpt2-124m B=16 T=1024 bf16, 20 steps, the
#            pipeline on (the default), under bench/kprof.cc's CUPTI kernel
#            table when build/libplumb-kprof.so exists (on.kprof.txt, top 30);
#   off      the same with PLUMB_GPT_ACT16=0 (fp32-stored activations).
# The pipeline is fast numerics only: the golden digests (scripts/gpu-gpt.sh)
# do not move with it.
# At most ACT16_BUDGET_S seconds (default 100); each step under `timeout`
# with what is left. Writes $OUT/act16/. NVLink multicast stays off;
# clocks, power and MIG are left alone.
set -u
. "$(dirname "$0")/gpu-topic.sh" act16 "${ACT16_BUDGET_S:-100}"

step tests 40 env PLUMB_TEST_DEVICE=cuda PLUMB_TEST_VERBOSE=1 build/plumb-tests gpt16
tests_rc=$?
grep -E "CHECK|passed|pipeline" "$D/tests.log" | tail -n 30 | tee -a "$LOG"

B="bench gpt --preset gpt2-124m --batch 16 --device cuda --precision bf16 --steps 20 --warmup 3"
# shellcheck disable=SC2086
step on 25 "${KP[@]}" KPROF_OUT="$D/on.kprof.txt" $P $B --json "$D/on.json"
# shellcheck disable=SC2086
step off 25 env PLUMB_GPT_ACT16=0 $P $B --json "$D/off.json"

tok() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["rows"][0]; print("%.0f tokens/s, %.2f ms/step, activations %s" % (r["tokens_per_s"], r["step_ms"], r.get("activations")))' "$1" 2>/dev/null || echo "no result"; }
{
  echo "gpu-act16 summary ($((SECONDS - T0)) s of $BUDGET)"
  echo "tests (gpt16): exit $tests_rc, $(grep -E '^[0-9]+ passed' "$D/tests.log" | tail -n 1)"
  echo "bench gpt2-124m B=16 T=1024 bf16, 16-bit activations:   $(tok "$D/on.json")"
  echo "bench gpt2-124m B=16 T=1024 bf16, PLUMB_GPT_ACT16=0:     $(tok "$D/off.json")"
  if [ -f "$D/on.kprof.txt" ]; then
    echo "-- 16-bit pipeline: top kernels (kprof)"
    head -n 25 "$D/on.kprof.txt"
  fi
} | tee -a "$LOG" "$D/summary.txt"
