# Collectives on real MPI ranks (mpirun --oversubscribe): the comm interface
# (tests/test_comm.c: every collective, dtype and reduction, exact answers) on
# host buffers and on device comms: the host comm serving the cpu device, the
# host comm staged for a GPU without NCCL, and the nccl implementation over a
# fake NCCL (tests/fake_nccl.c, ranks meet in shared memory) on the fake GPU
# plugin (tests/fake_gpu.c: the cpu backend as "hip"). Then NCCL's failure
# paths (a rank that hangs, an async error, an abort that hangs, the process
# watchdog, an old or missing library) and plumb train over the fake NCCL.
. "$(dirname "$0")/lib.sh"
if ! command -v mpirun >/dev/null; then skip "mpi collectives" "mpirun not installed"; finish; exit; fi
MPI="mpirun --oversubscribe"
T="$PLUMB_BUILD/plumb-tests"
# every rank printed its summary line and the rank-0 tallies say "0 wrong"
ran_clean() { # LOG NP
  local n; n=$(grep -c "^[0-9]* passed, 0 failed" "$1"); [ "$n" -eq "$2" ] && ! grep -q "FAIL\|[1-9][0-9]* wrong" "$1"; }

for np in 2 3; do
  if $MPI -np $np "$T" mpi_collectives >"$TMP/o" 2>&1; then
    n=$(grep -c "collectives and exact eval ok" "$TMP/o")
    if [ "$n" -eq "$np" ] && ! grep -q "failed:" "$TMP/o"; then ok "mpi collectives -np $np"
    else fail "mpi collectives -np $np" "$(tail -5 "$TMP/o")"; fi
  else fail "mpi collectives -np $np" "$(tail -5 "$TMP/o")"; fi
  $MPI -np $np "$T" comm_ >"$TMP/c$np" 2>&1
  ran_clean "$TMP/c$np" $np && grep -q "mpi, $np ranks: 552 collective cases, 0 wrong" "$TMP/c$np" \
    && grep -q "host, $np ranks: 552 collective cases, 0 wrong" "$TMP/c$np" \
    && ok "-np $np: 6 collectives x 8 dtypes x ops, in and out of place, host memory and the cpu device: 0 wrong" \
    || fail "comm interface -np $np" "$(grep -v '^ok' "$TMP/c$np" | head -8)"
done

FAKE="$PLUMB_BUILD/tests/libfake_gpu.so" NCCL="$PLUMB_BUILD/tests/libfake_nccl.so"
if [ ! -f "$FAKE" ] || [ ! -f "$NCCL" ]; then skip "device comms" "fake GPU plugin or fake NCCL not built"; finish; exit; fi
mkdir -p "$TMP/plug" "$TMP/bin"; ln -sf "$FAKE" "$TMP/plug/libplumb-hip.so"
# copies of the binaries with no GPU plugin next to them, so PLUMB_BACKEND_PATH's fake is the one found
cp "$T" "$TMP/bin/plumb-tests"; cp "$PLUMB" "$TMP/bin/plumb"; T="$TMP/bin/plumb-tests"
G="-x FAKE_GPU_COUNT=4 -x PLUMB_BACKEND_PATH=$TMP/plug -x PLUMB_TEST_COMM_DEV=hip"
# a GPU without NCCL: the host comm, staged through pinned memory (1 rank: copies on the device)
for np in 1 2; do
  $MPI -np $np $G -x PLUMB_TEST_COMM_KIND=host "$T" comm_device_coll >"$TMP/s$np" 2>&1
  ran_clean "$TMP/s$np" $np && grep -q "staged through pinned host memory" "$TMP/s$np" && grep -q "host, $np ranks: 552 collective cases, 0 wrong" "$TMP/s$np" \
    && ok "-np $np GPU without NCCL: staged device comm, 0 wrong" || fail "staged device comm -np $np" "$(grep -v '^ok' "$TMP/s$np" | head -8)"
done
# the nccl implementation; 4 KiB per rank in the fake's segment, so 1000-element calls go in chunks
N="-x PLUMB_NCCL_LIB=$NCCL -x FAKE_NCCL_SLOT_BYTES=4096"
for np in 1 2 3; do
  $MPI -np $np $G $N -x PLUMB_TEST_COMM_KIND=nccl "$T" comm_device_coll >"$TMP/n$np" 2>&1
  ran_clean "$TMP/n$np" $np && grep -q "RCCL 2.21.5 (.*libfake_nccl.so), rank 0 of $np on hip:0, non-blocking" "$TMP/n$np" \
    && grep -q "nccl, $np ranks: 552 collective cases, 0 wrong" "$TMP/n$np" \
    && ok "-np $np nccl (fake): every collective, async buckets, golden int64 sum, barrier: 0 wrong" \
    || fail "nccl -np $np" "$(grep -v '^ok' "$TMP/n$np" | head -8)"
done
$MPI -np 2 $G $N -x PLUMB_TEST_COMM_KIND=auto "$T" comm_device_coll >"$TMP/a2" 2>&1
ran_clean "$TMP/a2" 2 && grep -q "nccl, 2 ranks" "$TMP/a2" && ok "auto picks nccl on a GPU when it loads on every rank" \
  || fail "auto device comm" "$(grep -v '^ok' "$TMP/a2" | head -5)"

# failure paths, on one rank (FAKE_NCCL_HANG=R:K: rank R's K-th collective never ends);
# `timeout --preserve-status` only guards against a real hang (it would give 143)
F="env FAKE_GPU_COUNT=1 PLUMB_BACKEND_PATH=$TMP/plug PLUMB_TEST_COMM_DEV=hip PLUMB_TEST_COMM_KIND=nccl PLUMB_NCCL_LIB=$NCCL"
$F FAKE_NCCL_HANG=0:30 PLUMB_TEST_COMM_TIMEOUT=2 timeout --preserve-status 120 "$T" comm_device_coll >"$TMP/f1" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q "ncclAllReduce still in progress after 2 s (a rank is missing or hung); communicator aborted" "$TMP/f1" \
  && grep -q "fake nccl: rank 0: ncclCommAbort" "$TMP/f1" \
  && ok "a collective that never completes: timeout error after 2 s, communicator aborted" || fail "nccl timeout" "rc $rc; $(grep -i "nccl" "$TMP/f1" | head -4)"
$F FAKE_NCCL_ERROR=0:10 timeout --preserve-status 120 "$T" comm_device_coll >"$TMP/f2" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q "nccl: ncclAllReduce failed: unhandled system error (2); communicator aborted" "$TMP/f2" \
  && ok "an async error: named, communicator aborted" || fail "nccl async error" "rc $rc; $(grep -i "nccl" "$TMP/f2" | head -4)"
$F FAKE_NCCL_HANG=0:5 FAKE_NCCL_ABORT_HANG=1 PLUMB_NCCL_ABORT_BOUND_S=1 PLUMB_TEST_COMM_TIMEOUT=1 timeout --preserve-status 120 "$T" comm_device_coll >"$TMP/f3" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q "ncclCommAbort did not return within 1 s; giving up on it" "$TMP/f3" \
  && ok "an ncclCommAbort that hangs is bounded (1 s) and the error still comes back" || fail "bounded abort" "rc $rc; $(grep -i "nccl" "$TMP/f3" | head -4)"
$F FAKE_NCCL_HANG=0:5 PLUMB_TEST_COMM_WATCHDOG=1 PLUMB_TEST_COMM_TIMEOUT=60 timeout --preserve-status 120 "$T" comm_device_coll >"$TMP/f4" 2>&1; rc=$?
[ $rc -eq 124 ] && grep -q "watchdog: timed out after .* waiting on 'allreduce'" "$TMP/f4" && grep -q "fake nccl: rank 0: ncclCommAbort" "$TMP/f4" \
  && ok "the process watchdog ends a hung collective (exit 124) after its abort hook aborted the communicator" \
  || fail "watchdog over nccl" "rc $rc; $(grep -i "watchdog\|nccl" "$TMP/f4" | head -4)"
# 2 ranks, rank 1 hangs: both end within the timeout, non-zero
$MPI -np 2 $G $N -x PLUMB_TEST_COMM_KIND=nccl -x FAKE_NCCL_HANG=1:40 -x PLUMB_TEST_COMM_TIMEOUT=2 timeout --preserve-status 120 "$T" comm_device_coll >"$TMP/f5" 2>&1; rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "fake nccl: rank 0: ncclCommAbort" "$TMP/f5" && grep -q "fake nccl: rank 1: ncclCommAbort" "$TMP/f5" \
  && grep -q "still in progress after 2 s" "$TMP/f5" && ok "-np 2, one rank hangs: every rank aborts its communicator and fails" \
  || fail "-np 2 hang" "rc $rc; $(grep -i "nccl" "$TMP/f5" | head -4)"
# loading: an NCCL older than 2.14 (no ncclCommInitRankConfig), a too-old version, no library
E="env FAKE_GPU_COUNT=1 PLUMB_BACKEND_PATH=$TMP/plug PLUMB_TEST_COMM_DEV=hip PLUMB_TEST_COMM_KIND=nccl"
$E PLUMB_NCCL_LIB="$PLUMB_BUILD/tests/libfake_nccl_old.so" "$T" comm_device_coll >"$TMP/l1" 2>&1
grep -q "RCCL (librccl.so.1) not loadable: RCCL: .*libfake_nccl_old.so has no symbol ncclCommInitRankConfig: .*undefined symbol: ncclCommInitRankConfig (too old a RCCL? plumb needs 2.14.3 or newer)" "$TMP/l1" \
  && ok "a library without ncclCommInitRankConfig: the message names library and symbol" || fail "old library" "$(grep -i nccl "$TMP/l1" | head -3)"
$E PLUMB_NCCL_LIB="$NCCL" FAKE_NCCL_VERSION=21300 "$T" comm_device_coll >"$TMP/l2" 2>&1
grep -q "libfake_nccl.so is version code 21300; plumb needs 21403 (2.14.3) or newer" "$TMP/l2" \
  && ok "a library older than 2.14.3 is refused by its version" || fail "old version" "$(grep -i nccl "$TMP/l2" | head -3)"
$E PLUMB_NCCL_LIB=/nonexistent/librccl.so.1 "$T" comm_device_coll >"$TMP/l3" 2>&1
grep -q "RCCL (librccl.so.1) not loadable: RCCL: cannot load /nonexistent/librccl.so.1: .*No such file.* (set PLUMB_NCCL_LIB" "$TMP/l3" \
  && ok "no library: the message names the path tried and the override" || fail "missing library" "$(grep -i nccl "$TMP/l3" | head -3)"

# plumb train over the fake NCCL: the gradient buckets, the sparse gather and
# the step's collectives through the nccl comm give the host path's bits (2
# ranks: a sum of two is the same in any order)
FB="--steps 40 --train-samples 20000 --eval-samples 1000 --quiet --param-digest --health-interval 0 --threads 1"
dg() { awk '/^param_digest/{print $2}' "$1"; }
export OPENBLAS_CORETYPE=Haswell
for np in 1 2; do
  $MPI -np $np "$PLUMB" train ctr $FB --out "$TMP/th$np" >"$TMP/th$np.out" 2>&1
  $MPI -np $np -x FAKE_GPU_COUNT=2 -x PLUMB_BACKEND_PATH="$TMP/plug" -x PLUMB_NCCL_LIB="$NCCL" -x PLUMB_NCCL_BUCKET_MB=0.0001 \
    "$TMP/bin/plumb" train ctr ${FB/--quiet/} --device hip --comm nccl --out "$TMP/tn$np" >"$TMP/tn$np.out" 2>&1
  a=$(dg "$TMP/th$np.out"); b=$(dg "$TMP/tn$np.out")
  [ -n "$a" ] && [ "$a" = "$b" ] && grep -q "gradients on the device over RCCL 2.21.5" "$TMP/tn$np.out" \
    && ok "train -np $np --comm nccl (fake) = the cpu's host path ($a)" || fail "train over nccl -np $np" "$a vs $b; $(grep -E "comm:|error" "$TMP/tn$np.out" | head -3)"
done
$MPI -np 2 -x FAKE_GPU_COUNT=2 -x PLUMB_BACKEND_PATH="$TMP/plug" -x PLUMB_NCCL_LIB="$NCCL" -x FAKE_NCCL_HANG=1:30 \
  timeout --preserve-status 300 "$TMP/bin/plumb" train ctr $FB --device hip --comm nccl --step-timeout 5 --out "$TMP/tnh" >"$TMP/tnh.out" 2>&1; rc=$?
{ [ $rc -eq 1 ] || [ $rc -eq 3 ] || [ $rc -eq 124 ]; } && grep -q "ncclCommAbort" "$TMP/tnh.out" \
  && ok "train over nccl, rank 1 hangs in a collective: the job fails (rc $rc), communicators aborted" || fail "train nccl hang" "rc $rc; $(tail -4 "$TMP/tnh.out")"
unset OPENBLAS_CORETYPE
finish
