# The GPU training tests (tests/test_gpu_train.c: every train op of a device
# against the cpu backend, the ctr model trained on both) on the fake plugin
# (tests/fake_gpu.c: the cpu backend registered as "hip"), so they run on
# every machine and a plugin-side break fails here: the fake's ops and the
# model code behind the optional ops (16-bit mirrors, the fused backward) are
# the ones a GPU host runs. A copy of plumb-tests in a folder of its own, so a
# real plugin next to build/ is not found first. GPU_FAKE_FILTER narrows the
# C tests (default gpu_train_; tests/test_gpu.c checks a real GPU's streams
# and kernels, which the fake does not have).
. "$(dirname "$0")/lib.sh"
FAKE="$PLUMB_BUILD/tests/libfake_gpu.so"
if [ ! -f "$FAKE" ]; then fail "fake hip plugin" "$FAKE not built (make)"; finish; exit; fi
mkdir -p "$TMP/bin" "$TMP/plug"
cp "$PLUMB_BUILD/plumb-tests" "$TMP/bin/plumb-tests"
ln -sf "$FAKE" "$TMP/plug/libplumb-hip.so"
filter=${GPU_FAKE_FILTER:-gpu_train_}
PLUMB_BACKEND_PATH="$TMP/plug" PLUMB_TEST_DEVICE=hip "$TMP/bin/plumb-tests" "$filter" >"$TMP/o" 2>&1; rc=$?
cat "$TMP/o"
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$TMP/o" | tail -n 1)
np=$(echo "$line" | sed -nE 's/^([0-9]+) passed.*/\1/p'); nf=$(echo "$line" | sed -nE 's/.* ([0-9]+) failed.*/\1/p')
ns=$(echo "$line" | sed -nE 's/.* ([0-9]+) skipped.*/\1/p')
if [ -z "$line" ]; then fail "plumb-tests $filter on the fake hip device" "no summary line (exit $rc)"
elif [ "$rc" -ne 0 ] || [ "${nf:-1}" -ne 0 ]; then fail "plumb-tests $filter on the fake hip device" "$line"
elif [ "${np:-0}" -lt 1 ]; then fail "plumb-tests $filter on the fake hip device" "no test ran: $line"
else ok "plumb-tests $filter on the fake hip device: $line"; fi
# the fake implements every optional op, so nothing may be skipped for a missing one
if grep -E '^skip ' "$TMP/o" >"$TMP/skips"; then fail "no GPU test skipped on the fake" "$(head -3 "$TMP/skips")"
else ok "no GPU test skipped on the fake (${ns:-0} skipped)"; fi
finish
