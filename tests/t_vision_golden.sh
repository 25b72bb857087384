# The golden vision definitions (dev/train_vision.h: convolution chains,
# BatchNorm fixed point, pooling, softmax cross-entropy) give the same bits
# whatever the compiler and flags: gcc and clang, -O0, -O2 and -O3
# -march=native, all with -ffp-contract=off (nvcc builds them with
# --fmad=false; tests/test_gpu_vision.c compares a GPU with the cpu).
. "$(dirname "$0")/lib.sh"
src="$PLUMB_ROOT/tests/tools/vision_digest.c"
ref=""
for cc in gcc clang; do
  command -v $cc >/dev/null || { skip "$cc digest" "$cc not installed"; continue; }
  for opt in "-O2" "-O3 -march=native" "-O0"; do
    name="$cc $opt"
    if ! $cc -std=c11 $opt -ffp-contract=off -I"$PLUMB_ROOT/src" "$src" -o "$TMP/d" -lm 2>"$TMP/err"; then
      fail "$name builds" "$(head -c 300 "$TMP/err")"; continue
    fi
    d=$("$TMP/d")
    echo "  $name: $d"
    if [ -z "$ref" ]; then ref=$d; ok "$name digest";
    elif [ "$d" = "$ref" ]; then ok "$name digest equals the first build's"
    else fail "$name digest" "$d != $ref"; fi
  done
done
finish
