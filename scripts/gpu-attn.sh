#!/usr/bin/env bash
# The tensor-core flash attention (gpu/train_gpt_attn_tc.cuh,
# gpu/train_gpt_attn_mma.cuh and gpu/train_gpt_attn_mma2.cuh) on the GPU host,
# from the folder scripts/gpu-prep.sh fills (prebuilt build/); builds
# nothing. Figures for BENCHMARKS.md's "gpt" section (attention kernels):
#   tests    PLUMB_TEST_DEVICE=cuda build/plumb-tests gpu_gpt: the attention
#            cases against the float64 reference (tensor-core and scalar,
#            bit-repeatable), the GPT block against the cpu, gpt-tiny's trainer;
#   tc       plumb bench gpt, gpt2-124m B=16 T=1024 bf16, 20 steps (default:
#            the tensor-core kernels);
#   mma      the same with PLUMB_GPT_ATTN=mma (gpu/train_gpt_attn_mma.cuh:
#            mma.sync with S, P, dP, dS in registers);
#   mma2     the same with PLUMB_GPT_ATTN=mma2 (gpu/train_gpt_attn_mma2.cuh:
#            the mma kernels' products from 16-bit copies by cp.async into
#            double buffers, ldmatrix fragments, 128-query forward and dQ tiles);
#   mma-dw1  mma with PLUMB_GPT_DW_SLICES=1 (matmul_bwd's dw as one GEMM, not
#            in row slices: the A/B of train_gpt_gemm.cu's dw_slices);
#   scalar   the same with PLUMB_GPT_ATTN=scalar (the scalar flash kernels).
# The bench runs under bench/kprof.cc's CUPTI kernel table when
# build/libplumb-kprof.so exists ($OUT/attn/{tc,mma,mma2,scalar}.kprof.txt, top 30).
# At most ATTN_BUDGET_S seconds (default 120) in all; every step under
# `timeout` with what is left. Writes $OUT/attn/ (gpu-attn.log, *.log,
# *.json, summary.txt). NVLink multicast stays off; clocks, power and MIG are
# left alone.
set -u
. "$(dirname "$0")/gpu-topic.sh" attn "${ATTN_BUDGET_S:-120}"

step tests 34 env PLUMB_TEST_DEVICE=cuda PLUMB_TEST_VERBOSE=1 build/plumb-tests gpu_gpt
tests_rc=$?
grep -E "CHECK|passed|norm-wise" "$D/tests.log" | tail -n 60 | tee -a "$LOG"

# fp32-stored activations (PLUMB_GPT_ACT16=0): every kind reads its inputs the same
# way (with 16-bit activations only mma reads them in place, the others widen
# them first; scripts/gpu-act16.sh times that pipeline)
export PLUMB_GPT_ACT16=0
B="bench gpt --preset gpt2-124m --batch 16 --device cuda --precision bf16 --steps 20 --warmup 3"
# shellcheck disable=SC2086
step tc 16 "${KP[@]}" KPROF_OUT="$D/tc.kprof.txt" env PLUMB_GPT_ATTN=tc $P $B --json "$D/tc.json"
# shellcheck disable=SC2086
step mma 16 "${KP[@]}" KPROF_OUT="$D/mma.kprof.txt" env PLUMB_GPT_ATTN=mma $P $B --json "$D/mma.json"
# shellcheck disable=SC2086
step mma2 16 "${KP[@]}" KPROF_OUT="$D/mma2.kprof.txt" env PLUMB_GPT_ATTN=mma2 $P $B --json "$D/mma2.json"
# shellcheck disable=SC2086
step mma-dw1 16 env PLUMB_GPT_ATTN=mma PLUMB_GPT_DW_SLICES=1 $P $B --json "$D/mma-dw1.json"
# shellcheck disable=SC2086
step scalar 16 "${KP[@]}" KPROF_OUT="$D/scalar.kprof.txt" env PLUMB_GPT_ATTN=scalar $P $B --json "$D/scalar.json"

tok() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["rows"][0]; print("%.0f tokens/s, %.2f ms/step" % (r["tokens_per_s"], r["step_ms"]))' "$1" 2>/dev/null || echo "no result"; }
{
  echo "gpu-attn summary ($((SECONDS - T0)) s of $BUDGET)"
  echo "tests (gpu_gpt): exit $tests_rc, $(grep -E '^[0-9]+ passed' "$D/tests.log" | tail -n 1)"
  echo "bench gpt2-124m B=16 T=1024 bf16, tensor-core attention: $(tok "$D/tc.json")"
  echo "bench gpt2-124m B=16 T=1024 bf16, PLUMB_GPT_ATTN=mma:     $(tok "$D/mma.json")"
  echo "bench gpt2-124m B=16 T=1024 bf16, PLUMB_GPT_ATTN=mma2:    $(tok "$D/mma2.json")"
  echo "bench gpt2-124m B=16 T=1024 bf16, mma, dw one GEMM:      $(tok "$D/mma-dw1.json")"
  echo "bench gpt2-124m B=16 T=1024 bf16, PLUMB_GPT_ATTN=scalar:  $(tok "$D/scalar.json")"
  for k in tc mma mma2 scalar; do
    [ -f "$D/$k.kprof.txt" ] || continue
    echo "-- $k: attention kernels (kprof)"
    grep -E "k_tc_|k_mma_|k_mma2_|k_flash_" "$D/$k.kprof.txt" | head -n 8
  done
} | tee "$D/summary.txt" | tee -a "$LOG"
