# Sourced by a topic script of scripts/gpu-round.sh on the GPU host, with the
# topic's name as $1: the work folder ($here, also the working directory),
# the topic's output folder ($D = $OUT/TOPIC), NVLink multicast off, the
# shared libraries (scripts/gpu-libs.sh), the plugins' path, and $P.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
OUT=${OUT:-$here/gpu-out}
D=$OUT/$1
mkdir -p "$D"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
declare -F log >/dev/null || log() { echo "$*"; }
. "$here/scripts/gpu-libs.sh"
export PLUMB_BACKEND_PATH=$here/build
P=build/plumb
