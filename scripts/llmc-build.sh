#!/usr/bin/env bash
# Builds llm.c's train_gpt2cu (bf16, no cuDNN, no MPI/NCCL) from a git
# checkout of github.com/karpathy/llm.c, HERE on the build machine, for the
# side-by-side of scripts/gpu-gpt.sh; the binary is never committed.
#   scripts/llmc-build.sh LLMC_GIT_DIR [DEST]     (DEST default: .llmc)
# LLMC_GIT_DIR is a clone or a bare mirror; its HEAD is exported to a
# temporary tree. CUDA 13 changed cudaMemAdvise's location argument from a
# device number to a cudaMemLocation: llmc/cuda_utils.cuh's one call (the
# managed-memory fallback after an OOM, never taken at B=16 on an H200) is
# rewritten for CUDA >= 13 before compiling. DEST gets train_gpt2cu,
# LLMC_COMMIT and BUILD (the nvcc command and version). train_gpt2cu needs
# no downloaded files: `-e d12` initialises GPT-2 124M at random (llm.c's
# descriptor form), the gpt2 tokenizer file is optional (sampling output only,
# disabled with -s 0), and the data are llm.c token files (plumb data
# synth-tokens writes them). It links libcublas/libcublasLt 13 and the
# static CUDA runtime; scripts/gpu-libs.sh finds cuBLAS on the GPU host.
set -euo pipefail
SRC=${1:?usage: scripts/llmc-build.sh LLMC_GIT_DIR [DEST]}
DEST=${2:-$(cd "$(dirname "$0")/.." && pwd)/.llmc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git --git-dir="$( [ -d "$SRC/.git" ] && echo "$SRC/.git" || echo "$SRC")" archive HEAD | tar -x -C "$tmp"
commit=$(git --git-dir="$( [ -d "$SRC/.git" ] && echo "$SRC/.git" || echo "$SRC")" rev-parse HEAD)
cuda_major=$(nvcc --version | sed -nE 's/.*release ([0-9]+)\..*/\1/p')
if [ "${cuda_major:-0}" -ge 13 ]; then
  sed -i 's/cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId)/cudaMemAdviseSetPreferredLocation, cudaMemLocation{cudaMemLocationTypeHost, 0})/' \
    "$tmp/llmc/cuda_utils.cuh"
  grep -q cudaMemLocationTypeHost "$tmp/llmc/cuda_utils.cuh" || { echo "llmc-build: the CUDA 13 rewrite did not apply" >&2; exit 1; }
fi
cmd="nvcc --threads=0 -t=0 --use_fast_math -std=c++17 -O3 -arch=sm_90 -DENABLE_BF16 train_gpt2.cu -lcublas -lcublasLt -o train_gpt2cu"
( cd "$tmp" && nice $cmd )
mkdir -p "$DEST"
cp "$tmp/train_gpt2cu" "$DEST/"
echo "$commit" >"$DEST/LLMC_COMMIT"
{ echo "$cmd"; nvcc --version | tail -n 2; [ "${cuda_major:-0}" -ge 13 ] && echo "patched: llmc/cuda_utils.cuh cudaMemAdvise location (CUDA 13)"; } >"$DEST/BUILD"
ls -la "$DEST"
