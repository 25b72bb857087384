# Sourced by scripts/gpu-check.sh and scripts/gputrain-check.sh on the GPU
# host: makes build/plumb, build/plumb-tests and build/libplumb-cuda.so find
# their shared libraries. Order: the host's CUDA libraries, then libraries
# carried in fallback/ (gpu-prep.sh copies there what the host lacks, e.g.
# libmicrohttpd.so.12), then, as a last resort, the CUDA libraries of the
# image's pip packages (PyTorch brings cuBLAS 13).
# Uses $here (the work folder) and log() from the sourcing script where they
# are set; else the folder above this script and a log() that echoes (a
# command line on the host that sources it alone: two device calls lost
# their figures to a plumb that found no libgsl, 2026-12-06).
[ -n "${here:-}" ] || here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
declare -F log >/dev/null || log() { echo "$*"; }
mkdir -p "$here/libs-active"
LDP=$here/libs-active
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do [ -d "$d" ] && LDP=$LDP:$d; done
pyl=$(python3 - 2>/dev/null <<'PY'
import os, importlib
out = []
for m in ("nvidia.cublas", "nvidia.cuda_runtime", "nvidia.cu13"):
    try:
        p = importlib.import_module(m)
        for base in list(getattr(p, "__path__", [])):
            for sub in ("lib", "lib64"):
                if os.path.isdir(os.path.join(base, sub)): out.append(os.path.join(base, sub))
    except Exception:
        pass
print(":".join(out))
PY
)
export LD_LIBRARY_PATH=$LDP${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for pass in 1 2 3; do
  missing=$(for f in build/plumb build/plumb-tests build/libplumb-cuda.so $(ls build/libplumb-kprof.so 2>/dev/null); do ldd "$f"; done 2>/dev/null | awk '/not found/{print $1}' | sort -u)
  [ -z "$missing" ] && break
  for m in $missing; do
    if [ -e "fallback/$m" ]; then ln -sf "$here/fallback/$m" "$here/libs-active/$m"; log "using carried $m"
    elif [ -n "$pyl" ] && [ "$pass" -ge 2 ]; then export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$pyl; log "adding pip CUDA libs for $m"
    fi
  done
done
