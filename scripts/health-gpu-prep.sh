#!/usr/bin/env bash
# Prepares /work/main/.healthwork (ignored by git) for one device call of
# scripts/health-gpu-evidence.sh: the plumb binary, the script, and fallback/
# with the shared libraries plumb links (libmicrohttpd12 from its Debian
# package; the rest as this machine resolves them, glibc excepted).
# Device call: command "bash .healthwork/health-gpu-evidence.sh", carry [".healthwork"].
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:-/work/main/.healthwork}
make -j2 build/plumb >/dev/null
rm -rf "$DEST"; mkdir -p "$DEST/fallback"
cp build/plumb scripts/health-gpu-evidence.sh "$DEST/"
tmp=$(mktemp -d)
( cd "$tmp" && apt-get download libmicrohttpd12 >/dev/null 2>&1 && dpkg -x libmicrohttpd12_*.deb x )
cp -L "$tmp"/x/usr/lib/x86_64-linux-gnu/libmicrohttpd.so.12 "$DEST/fallback/"
rm -rf "$tmp"
ldd build/plumb | awk '/=>/{print $3}' | sort -u | while read -r lib; do
  case "$(basename "$lib")" in libc.so*|libm.so*|libpthread*|libdl.so*|librt.so*|ld-linux*|libmicrohttpd*) continue;; esac
  cp -L "$lib" "$DEST/fallback/"
done
du -sh "$DEST"
