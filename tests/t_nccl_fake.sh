# comm/comm_nccl.c without a GPU (tests/test_comm_nccl.c): the fake NCCL
# (tests/fake_nccl.c, collectives over real MPI ranks) through
# PLUMB_NCCL_LIB, hipStreamQuery from tests/fake_hipstream.c as
# libamdhip64.so.6 on LD_LIBRARY_PATH, and the fake hip device
# (tests/fake_gpu.c). One process, then 2 and 3 MPI ranks; a library older
# than 2.14.3 in a process of its own (the library is loaded once).
. "$(dirname "$0")/lib.sh"
B=$PLUMB_BUILD
for f in libfake_nccl.so libfake_hipstream.so libfake_gpu.so; do
  [ -f "$B/tests/$f" ] || { fail "fake $f" "not built (make)"; finish; exit; }
done
mkdir -p "$TMP/bin" "$TMP/plug" "$TMP/lib"
cp "$B/plumb-tests" "$TMP/bin/plumb-tests"
ln -sf "$B/tests/libfake_gpu.so" "$TMP/plug/libplumb-hip.so"
ln -sf "$B/tests/libfake_hipstream.so" "$TMP/lib/libamdhip64.so.6"
export PLUMB_BACKEND_PATH="$TMP/plug" PLUMB_NCCL_LIB="$B/tests/libfake_nccl.so"
export LD_LIBRARY_PATH="$TMP/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
T="$TMP/bin/plumb-tests"
summary() { grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -n 1; }
if "$T" nccl_fake >"$TMP/o1" 2>&1 && grep -q '^4 passed, 0 failed, 1 skipped' "$TMP/o1"; then ok "nccl over the fakes, one process: $(summary "$TMP/o1")"
else fail "nccl over the fakes, one process" "$(tail -8 "$TMP/o1")"; fi
if command -v mpirun >/dev/null; then
  for np in 2 3; do
    mpirun --oversubscribe -np $np -x PLUMB_BACKEND_PATH -x PLUMB_NCCL_LIB -x LD_LIBRARY_PATH "$T" nccl_fake >"$TMP/o$np" 2>&1; rc=$?
    n=$(grep -c "nccl collectives ok" "$TMP/o$np")
    if [ $rc -eq 0 ] && [ "$n" -eq $np ] && ! grep -q "failed:" "$TMP/o$np"; then ok "nccl over the fakes, mpirun -np $np"
    else fail "nccl over the fakes, mpirun -np $np" "exit $rc, $n ranks ok: $(grep -m3 'failed\|FAIL' "$TMP/o$np")"; fi
  done
else fail "nccl over the fakes on MPI ranks" "mpirun not installed (scripts/deps.sh build)"; fi
if FAKE_NCCL_VERSION=21302 "$T" nccl_fake_old_version >"$TMP/ov" 2>&1 && grep -q '^1 passed, 0 failed' "$TMP/ov"; then
  ok "a library older than 2.14.3 is refused, naming the version"
else fail "old library refused" "$(tail -5 "$TMP/ov")"; fi
finish
