#!/usr/bin/env bash
# gpt's attention kinds side by side on the GPU host, from the folder
# scripts/gpu-prep.sh fills (prebuilt build/); builds nothing. Figures for
# BENCHMARKS.md's "gpt" section:
#   tests    PLUMB_TEST_DEVICE=cuda build/plumb-tests gpu_gpt_attn: every kind
#            against the float64 reference, bit-repeatable where it must be
#            (PLUMB_ATTN_LOG=1: each cuDNN plan's engine and workspace);
#   (ATTN_KINDS: which of mma2 and cudnn run; both by default)
#   mma2     plumb bench gpt, gpt2-124m B=16 T=1024 bf16 with 16-bit
#            activations (the headline's configuration), PLUMB_GPT_ATTN=mma2
#            (gpu/train_gpt_attn_mma2.cuh, our kernels);
#   cudnn    the same with PLUMB_GPT_ATTN=cudnn (gpu/attn_cudnn.cu: cuDNN's
#            fused flash attention, the deterministic backward);
#   cudnnvp  cudnn with PLUMB_ATTN_VP_CACHE=1 (each plan's variant packs
#            kept by their pointers, not made a call: its GPU-busy share in
#            the kprof table against cudnn's);
#   cudnntorch cudnn with the cuDNN of the host's PyTorch wheel
#            (PLUMB_CUDNN_LIB), against the one the loader finds first.
# Each bench runs under bench/kprof.cc's CUPTI kernel table when
# build/libplumb-kprof.so exists ($OUT/attn/KIND.kprof.txt). At most
# ATTN_BUDGET_S seconds (default 150) in all; every step under `timeout` with
# what is left. Writes $OUT/attn/ (gpu-attn.log, *.log, *.json,
# summary.txt). NVLink multicast stays off; clocks, power and MIG are left
# alone.
set -u
. "$(dirname "$0")/gpu-topic.sh" attn "${ATTN_BUDGET_S:-150}"

# cuDNN's warnings (why an engine refused a graph) into cudnn-warn.log
step tests 40 env PLUMB_TEST_DEVICE=cuda PLUMB_TEST_VERBOSE=1 PLUMB_ATTN_LOG=1 CUDNN_LOGLEVEL_DBG=2 \
  CUDNN_LOGDEST_DBG="$D/cudnn-warn.log" build/plumb-tests gpu_gpt_attn
tests_rc=$?
grep -E "CHECK|passed|failed|skip|cuDNN|plumb:" "$D/tests.log" | tail -n 60 | tee -a "$LOG"

B="bench gpt --preset gpt2-124m --batch 16 --device cuda --precision bf16 --steps 30 --warmup 5"
for k in ${ATTN_KINDS:-mma2 cudnn}; do
  n=${k//-/}
  # shellcheck disable=SC2086
  step "$n" 40 "${KP[@]}" KPROF_OUT="$D/$n.kprof.txt" env PLUMB_GPT_ATTN=$k PLUMB_ATTN_LOG=1 $P $B --json "$D/$n.json"
done
# shellcheck disable=SC2086
step cudnnvp 40 "${KP[@]}" KPROF_OUT="$D/cudnnvp.kprof.txt" env PLUMB_GPT_ATTN=cudnn PLUMB_ATTN_VP_CACHE=1 \
  PLUMB_ATTN_LOG=1 $P $B --json "$D/cudnnvp.json"

# cudnntorch: cudnn with the cuDNN of the host's PyTorch wheel (PLUMB_CUDNN_LIB),
# where the loader's own search may find an older one first
TCUDNN=$(torch_cudnn)
if [ -n "$TCUDNN" ]; then
  log "PyTorch's cuDNN: $TCUDNN"
  # shellcheck disable=SC2086
  step cudnntorch 40 "${KP[@]}" KPROF_OUT="$D/cudnntorch.kprof.txt" env PLUMB_GPT_ATTN=cudnn PLUMB_CUDNN_LIB="$TCUDNN" \
    PLUMB_ATTN_LOG=1 $P $B --json "$D/cudnntorch.json"
else
  log "cudnntorch: no PyTorch cuDNN found; skipped"
fi
{
  echo "gpu-attn summary ($((SECONDS - T0)) s of $BUDGET)"
  echo "tests (gpu_gpt_attn): exit $tests_rc, $(grep -E '^[0-9]+ passed' "$D/tests.log" | tail -n 1)"
  for k in mma2 cudnn cudnnvp cudnntorch; do
    echo "bench gpt2-124m B=16 T=1024 bf16, PLUMB_GPT_ATTN=$k: $(bench_tok "$D/$k.json")"
    grep -h -E "cuDNN attention|graph" "$D/$k.log" 2>/dev/null | sort -u | head -n 6
  done
  for k in mma2 cudnn cudnnvp cudnntorch; do
    [ -f "$D/$k.kprof.txt" ] || continue
    echo "-- $k: attention kernels (kprof; $(grep -o 'GPU busy.*' "$D/$k.kprof.txt" | head -n 1))"
    grep -i -E "k_mma2_|k_flash_|cudnn|fmha|sdpa|flash|attn" "$D/$k.kprof.txt" | head -n 8
  done
} | tee "$D/summary.txt" | tee -a "$LOG"
