# The space-to-depth kernels of a stride-2 convolution over C <= 4 channels
# (src/gpu/conv_s2d.cuh, gpu/train_conv.cu's PLUMB_CONV_S2D) on the cpu
# (tests/tools/s2d_check.cc): the stride-1 convolution they set up gives the
# direct convolution's outputs and weight gradient, exactly, over six
# geometries. The GPU suite runs the same shapes through cuDNN
# (tests/test_resnet16_ops.c).
. "$(dirname "$0")/lib.sh"
command -v g++ >/dev/null || { skip "space-to-depth kernels" "g++ not installed"; finish; }
if ! g++ -std=c++17 -O2 -Wall -I"$PLUMB_ROOT/src" "$PLUMB_ROOT/tests/tools/s2d_check.cc" -o "$TMP/s2d" 2>"$TMP/err"; then
  fail "space-to-depth check builds" "$(head -c 400 "$TMP/err")"
  finish
fi
"$TMP/s2d" >"$TMP/out" 2>&1; rc=$?
n=$(grep -c '^ok' "$TMP/out")
[ $rc -eq 0 ] && [ "$n" -ge 6 ] && ok "space-to-depth: $n geometries, outputs and weight gradients exact" \
  || fail "space-to-depth kernels" "$(grep -v '^ok' "$TMP/out" | head -5)"
finish
