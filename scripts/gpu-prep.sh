#!/usr/bin/env bash
# Prepares one device call (run HERE, on the build machine): builds plumb,
# the test binary and libplumb-cuda.so, and copies what scripts/gpu-check.sh
# needs into DEST (default /work/main/.gpuwork, ignored by git): build/,
# scripts/, bench/, osu/ (when OSU_DIR names a built osu_allreduce), and fallback/ with the shared libraries plumb links that
# the GPU host may lack (libmicrohttpd12 and its chain, from Debian packages
# or this machine; glibc and libraries over 6 MB stay behind). gpu-check.sh
# uses a fallback library only when ldd says the host has none.
# Usage: scripts/gpu-prep.sh [DEST]; then run on the device:
#   cd .gpuwork && bash scripts/gpu-check.sh            (carry: [".gpuwork"])
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:-/work/main/.gpuwork}
make -j2 all cuda kprof >/dev/null
rm -rf "$DEST"; mkdir -p "$DEST/build" "$DEST/fallback"
cp build/plumb build/plumb-tests build/libplumb-cuda.so build/libplumb-kprof.so "$DEST/build/"
# without their debug sections: the device tool carries at most 64 MiB
strip --strip-debug "$DEST"/build/plumb "$DEST"/build/plumb-tests "$DEST"/build/*.so
# CUPTI for kprof (the host's PyTorch has one too, but this one matches the build)
cp -L "$(dirname "$(command -v nvcc)")"/../lib/libcupti.so.13 "$DEST/fallback/" 2>/dev/null || true
# the test binary's fake vendor libraries (health, fake GPU plugin tests)
mkdir -p "$DEST/build/tests" && cp build/tests/libfake_*.so "$DEST/build/tests/" 2>/dev/null || true
cp -r scripts bench "$DEST/"
# PREP_SWCVT=1: a second libplumb-cuda.so whose kernels convert to and from
# bf16 / fp16 in software (-DPLUMB_NO_HW_CVT, core/dtype.h), in build-sw/, for
# an A/B in one call (HEADLINE_BACKEND=build-sw scripts/gpu-headline.sh)
if [ "${PREP_SWCVT:-0}" = 1 ]; then
  make -j2 cuda BUILD=build-sw NVCC_EXTRA=-DPLUMB_NO_HW_CVT >/dev/null
  mkdir -p "$DEST/build-sw" && cp build-sw/libplumb-cuda.so "$DEST/build-sw/" && strip --strip-debug "$DEST/build-sw/libplumb-cuda.so"
fi
# PREP_VARIANT="NAME:FLAGS": a second libplumb-cuda.so in build-NAME/ whose
# objects named in PREP_VARIANT_OBJS (default train_vision) are built with the
# extra nvcc FLAGS, the rest copied from build/cuda (so it takes one object's
# compile, not the plugin's): an A/B of compile-time choices in one call
# (HEADLINE_BACKEND=build-NAME, or PLUMB_BACKEND_PATH for a profile)
if [ -n "${PREP_VARIANT:-}" ]; then
  vname=${PREP_VARIANT%%:*} vflags=${PREP_VARIANT#*:}
  rm -rf "build-$vname" && mkdir -p "build-$vname/cuda" && cp build/cuda/*.o "build-$vname/cuda/"
  for o in ${PREP_VARIANT_OBJS:-train_vision}; do rm -f "build-$vname/cuda/$o.o"; done
  make -j2 cuda BUILD="build-$vname" NVCC_EXTRA="$vflags" >/dev/null
  mkdir -p "$DEST/build-$vname" && cp "build-$vname/libplumb-cuda.so" "$DEST/build-$vname/"
  strip --strip-debug "$DEST/build-$vname/libplumb-cuda.so"
  echo "$vflags" >"$DEST/build-$vname/FLAGS"
fi
# llm.c's train_gpt2cu for scripts/gpu-gpt.sh, when built (scripts/llmc-build.sh; never committed)
LLMC_DIR=${LLMC_DIR:-.llmc}
if [ -x "$LLMC_DIR/train_gpt2cu" ]; then cp -r "$LLMC_DIR" "$DEST/llmc"; fi
# osu_allreduce for scripts/gpu-comm.sh's side by side with plumb comm
# (bench/comm_vs_osu.sh; OSU built from its source against this machine's
# Open MPI, never committed): OSU_DIR=the folder holding the binary
if [ -n "${OSU_DIR:-}" ]; then
  if [ -x "$OSU_DIR/osu_allreduce" ]; then mkdir -p "$DEST/osu" && cp "$OSU_DIR/osu_allreduce" "$DEST/osu/"
  else echo "gpu-prep: OSU_DIR=$OSU_DIR has no executable osu_allreduce; not carried" >&2; fi
fi
# tests/: the shell tests and the fixtures the test binary reads (topology XML, browser pages...)
[ -d tests ] && mkdir -p "$DEST/tests" && cp -r tests/*.sh tests/*.xml tests/*.py tests/*.supp "$DEST/tests/" 2>/dev/null || true
# libmicrohttpd12 as a Debian package (not installed here by default for every build)
tmp=$(mktemp -d)
( cd "$tmp" && apt-get download libmicrohttpd12 >/dev/null 2>&1 && dpkg -x libmicrohttpd12_*.deb x ) || true
cp -L "$tmp"/x/usr/lib/x86_64-linux-gnu/libmicrohttpd.so.12* "$DEST/fallback/" 2>/dev/null || true
rm -rf "$tmp"
# everything ldd resolves here, except glibc and the big ones
for f in build/plumb build/plumb-tests build/libplumb-cuda.so; do ldd "$f"; done | awk '/=>/{print $3}' | sort -u |
while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libpthread*|libdl.so*|librt.so*|ld-linux*|libstdc++*|libgcc_s*) continue;;
    libcuda*|libcublas*|libcudart*|libnvidia*) continue;;  # the host's own CUDA stack
  esac
  sz=$(stat -Lc %s "$lib")
  [ "$sz" -gt 6000000 ] && continue
  cp -L "$lib" "$DEST/fallback/"
done
git rev-parse --short HEAD > "$DEST/COMMIT"
# jq for the GPU scripts (the host may have none): bin/jq runs the carried one with its libraries
mkdir -p "$DEST/bin/lib"
cp -L /usr/bin/jq "$DEST/bin/jq.real"
for l in $(ldd /usr/bin/jq | awk '/=>/{print $3}'); do
  case "$(basename "$l")" in libc.so*|libm.so*|ld-linux*) ;; *) cp -L "$l" "$DEST/bin/lib/";; esac
done
printf '#!/bin/sh\nd=$(dirname "$0")\nLD_LIBRARY_PATH=$d/lib exec "$d/jq.real" "$@"\n' > "$DEST/bin/jq"
chmod +x "$DEST/bin/jq"
# OLD_BUILD=DIR: a build of an earlier commit (its plumb and libplumb-cuda.so) for a
# same-call comparison (scripts/gpu-engine.sh); DIR/../ is its work tree
if [ -n "${OLD_BUILD:-}" ]; then
  mkdir -p "$DEST/old"
  cp "$OLD_BUILD/plumb" "$OLD_BUILD/libplumb-cuda.so" "$DEST/old/"
  git -C "$OLD_BUILD/.." rev-parse --short HEAD > "$DEST/old/COMMIT"
fi
du -sh "$DEST"
