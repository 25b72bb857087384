#!/usr/bin/env bash
# Installs the Debian packages plumb needs to build and test, and nothing else.
# As root it runs apt-get; otherwise it prints the exact command and exits 1.
# Usage: scripts/deps.sh [build|test|gpu|bench|all]   (default: test)
#   build: compile and run plumb itself (`make accept`)
#   test:  build + everything `make test` drives: the browser, promtool, clang
#          (gcc and clang must give the same golden bits), and Debian's
#          rocm_smi.h, against which the fake ROCm SMI checks our declarations,
#          and lcov (`make coverage`); `make fuzz` (CI) needs clang's libFuzzer
#          and sanitizer runtimes (libclang-rt-dev) and its OpenMP (libomp-dev)
#   gpu:   hipcc and the HIP headers for `make hip`
#   bench: PyTorch for the reference side of bench/ctr_cpu, bench/gpt_reference.py
#          (which wrote bench/gpt_tiny_reference.bin) and bench/gpt_pytorch.py (large: not in test)
set -euo pipefail
want=${1:-test}
build_pkgs="build-essential pkg-config libopenblas-dev libgsl-dev libopenmpi-dev openmpi-bin libjansson-dev libmicrohttpd-dev libhwloc-dev zlib1g-dev libssl-dev"
test_pkgs="chromium prometheus python3 curl nodejs jq clang libclang-rt-dev libomp-dev librocm-smi-dev lcov"
gpu_pkgs="hipcc libamdhip64-dev librocm-smi-dev"
bench_pkgs="python3-torch"
case "$want" in
  build) pkgs="$build_pkgs" ;;
  test)  pkgs="$build_pkgs $test_pkgs" ;;
  gpu)   pkgs="$gpu_pkgs" ;;
  bench) pkgs="$build_pkgs $bench_pkgs" ;;
  all)   pkgs="$build_pkgs $test_pkgs $gpu_pkgs $bench_pkgs" ;;
  *) echo "deps.sh: unknown set '$want' (expected build, test, gpu, bench or all)" >&2; exit 2 ;;
esac
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# Debian splits npm from nodejs; NodeSource's nodejs bundles it (and conflicts with Debian's npm).
case "$want" in test|all) command -v npm >/dev/null 2>&1 || missing="$missing npm" ;; esac
# The browser test's node packages (tests/browser: playwright-core, pinned by package-lock.json to
# 1.60.0, the newest that runs on Debian 12's Node.js 18: later ones refuse to start there).
browser_deps() {
  case "$want" in test|all) ;; *) return 0 ;; esac
  local d; d="$(cd "$(dirname "$0")/.." && pwd)/tests/browser"
  if [ ! -d "$d/node_modules/playwright-core" ] || [ "$d/package-lock.json" -nt "$d/node_modules/.package-lock.json" ]; then
    echo "deps.sh: npm ci in tests/browser" >&2
    (cd "$d" && npm ci --no-audit --no-fund --loglevel=error >&2)
  fi
}
if [ -z "$missing" ]; then browser_deps; exit 0; fi
cmd="apt-get install -y --no-install-recommends$missing"
if [ "$(id -u)" -ne 0 ]; then
  echo "deps.sh: missing Debian packages:$missing" >&2
  echo "deps.sh: run as root:  apt-get update && $cmd" >&2
  exit 1
fi
echo "deps.sh: installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
# A stale or empty package list makes apt-get fail to find packages: refresh once.
stamp=/var/lib/apt/periodic/update-success-stamp
if [ ! -d /var/lib/apt/lists ] || [ -z "$(ls /var/lib/apt/lists 2>/dev/null | grep -v lock)" ] || \
   [ -n "$(find /var/lib/apt/lists -maxdepth 0 -mmin +720 2>/dev/null)" ]; then
  apt-get update -q >&2
fi
apt-get install -y -q --no-install-recommends$missing >&2 || { apt-get update -q >&2; apt-get install -y -q --no-install-recommends$missing >&2; }
browser_deps
