# plumb comm on real MPI ranks (mpirun --oversubscribe): every collective and
# dtype at small sizes on 2, 3 and 4 ranks with 0 wrong; a rank that corrupts
# what it received is caught and named; a rank that never arrives is named
# and the job fails within the timeout; thresholds; usage errors; the NCCL
# path over the fake NCCL and the fake GPU plugin (docs/COMM.md).
. "$(dirname "$0")/lib.sh"
if ! command -v mpirun >/dev/null; then skip "plumb comm" "mpirun not installed"; finish; exit; fi
MPI="mpirun --oversubscribe"
SMALL="--ops all --dtype all -b 8 -e 256K -f 8 -w 1 -n 2"
js() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); c=[c for c in d['checks'] if c['name']=='comm'][-1]; $2" "$1/results.json"; }

for np in 2 3 4; do
  $MPI -np $np "$PLUMB" comm $SMALL --out "$TMP/s$np" >"$TMP/s$np.out" 2>&1; rc=$?
  n=$(grep -c "out of bounds values: 0 OK" "$TMP/s$np.out")
  [ $rc -eq 0 ] && [ "$n" -eq 24 ] && ! grep -q "FAILED\|WRONG" "$TMP/s$np.out" \
    && js "$TMP/s$np" "assert c['status']=='pass', c; det=c['details']; assert det['ranks']==$np; assert len(det['sweeps'])==24; \
assert all(r['out']['wrong']==0 and (r['in'] is None or r['in']['wrong']==0) for s in det['sweeps'] for r in s['rows']); \
assert sum(len(s['rows']) for s in det['sweeps'])>=24*5" \
    && ok "-np $np: 6 collectives x fp32/bf16/fp16/int64, 8 B..256 KiB, in and out of place: 0 wrong (table and results.json)" \
    || fail "-np $np sweep" "rc $rc, $n of 24 sweeps OK; $(grep -v '^ ' "$TMP/s$np.out" | tail -5)"
done
# the table has nccl-tests' columns, busbw = algbw x 2(n-1)/n for allreduce on 4 ranks
python3 - "$TMP/s4.out" <<'EOF' && ok "columns: size count type redop root time algbw busbw #wrong x2; allreduce busbw = 1.5 algbw on 4 ranks" || fail "columns" "$(grep -A3 'allreduce fp32' "$TMP/s4.out" | head -5)"
import sys
lines = open(sys.argv[1]).read().split('\n')
i = lines.index('# allreduce fp32 sum')
hdr = lines[i + 2].split()
assert hdr[1:] == ['size', 'count', 'type', 'redop', 'root', 'time', 'algbw', 'busbw', '#wrong', 'time', 'algbw', 'busbw', '#wrong'], hdr
for ln in lines[i + 4:]:
    if ln.startswith('#'): break
    f = ln.split()
    assert f[2] == 'fp32' and f[3] == 'sum' and f[4] == '-1', f
    assert int(f[0]) == 4 * int(f[1]), f
    for a, b in ((6, 7), (10, 11)):
        alg, bus = float(f[a]), float(f[b])
        assert abs(bus - 1.5 * alg) <= 0.011, f
EOF

# a rank that corrupts what it received: caught, named by rank, offset, expected and got
$MPI -np 3 "$PLUMB" comm --ops allreduce,allgather,reduce-scatter --dtype fp32,int64 -b 64 -e 4K -f 8 -w 0 -n 1 \
  --inject corrupt@1 --out "$TMP/c" >"$TMP/c.out" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q "# WRONG: rank 1: allreduce fp32 64 B out-of-place: 1 wrong element, first at offset 8: expected " "$TMP/c.out" \
  && js "$TMP/c" "assert c['status']=='fail'; w=c['details']['wrong_elements']; assert len(w)==3*2*3*2, len(w); \
assert all(x['rank']==1 and x['wrong']==1 and x['expected']!=x['got'] for x in w); assert 'rank 1' in c['reason'], c['reason']" \
  && ok "corrupt@1 on 3 ranks: exit 1, every row's wrong element named on rank 1 (offset, expected, got)" \
  || fail "corrupt@1" "rc $rc; $(grep -E 'WRONG|comm:' "$TMP/c.out" | head -4)"

# a rank that never arrives: the others name it within the timeout; exit 1 (or 124)
for spec in "3 1" "2 0"; do
  set -- $spec; np=$1; h=$2
  timeout --preserve-status 120 $MPI -np $np "$PLUMB" comm -b 8 -e 1K --inject hang@$h --timeout 3 --out "$TMP/h$h" >"$TMP/h$h.out" 2>&1; rc=$?
  { [ $rc -eq 1 ] || [ $rc -eq 124 ]; } && grep -q "rank $h did not arrive within 3.0 s (arrived: " "$TMP/h$h.out" \
    && grep -q "inject hang@$h: rank $h stops before 'allreduce fp32 8 B out-of-place'" "$TMP/h$h.out" \
    && ok "hang@$h on $np ranks: rc $rc, 'rank $h did not arrive within 3.0 s'" || fail "hang@$h" "rc $rc; $(grep -iE 'arrive|error' "$TMP/h$h.out" | head -4)"
done
js "$TMP/h1" "assert c['status']=='fail' and c['details']['missing_ranks']==[1], c" && ok "results.json records the missing rank" \
  || fail "missing rank in results.json" "$(cat "$TMP/h1/results.json" 2>/dev/null | head -c 300)"

# thresholds: --min-busbw, a site file with a section for this SKU, errors naming the line
expect_exit "--min-busbw 1e6 fails (exit 1)" 1 $MPI -np 2 "$PLUMB" comm -b 1K -e 4K -w 0 -n 1 --min-busbw 1e6
grep -q "is below --min-busbw = 1e+06 GB/s" "$TMP/out" && ok "the reason names the size, the placement and the limit" || fail "min-busbw reason" "$(grep 'comm:' "$TMP/out")"
printf 'min_world = 2\nat_bytes = 4K\n[Test Box]\nmin_busbw.allreduce = 1e6\n[Other Box]\nmin_busbw = 0.000001\n' >"$TMP/thr.conf"
expect_exit "a thresholds file section matched by --sku fails" 1 $MPI -np 2 "$PLUMB" comm -b 1K -e 4K -w 0 -n 1 --thresholds "$TMP/thr.conf" --sku "test box 7"
grep -q "is below min_busbw.allreduce of \[Test Box\] (built-in + $TMP/thr.conf)" "$TMP/out" && ok "named: the section and the file" || fail "section reason" "$(grep 'comm:' "$TMP/out")"
expect_exit "the same file, another SKU: pass" 0 $MPI -np 2 "$PLUMB" comm -b 1K -e 4K -w 0 -n 1 --thresholds "$TMP/thr.conf" --sku "no such box"
expect_exit "at_bytes above the largest size: not applied" 0 $MPI -np 2 "$PLUMB" comm -b 1K -e 2K -w 0 -n 1 --thresholds "$TMP/thr.conf" --sku "test box"
printf '[Test Box]\nmin_busbw.gather = 3\n' >"$TMP/bad.conf"
expect_exit "a bad thresholds file: exit 2" 2 "$PLUMB" comm -e 1K --thresholds "$TMP/bad.conf"
grep -q "bad.conf:2: 'min_busbw.gather': unknown collective 'gather'" "$TMP/err" && ok "the message names file:line" || fail "bad file message" "$(cat "$TMP/err")"

# usage errors name the option
expect_exit "-b 1Q: exit 2" 2 "$PLUMB" comm -b 1Q
grep -q "\-b: '1Q' is not a size" "$TMP/err" && ok "-b message" || fail "-b message" "$(cat "$TMP/err")"
expect_exit "-e below -b: exit 2" 2 "$PLUMB" comm -b 1M -e 1K
expect_exit "--ops gather: exit 2" 2 "$PLUMB" comm --ops gather
expect_exit "--dtype int8: exit 2" 2 "$PLUMB" comm --dtype int8
expect_exit "--inject hang@0 on one rank: exit 2" 2 "$PLUMB" comm --inject hang@0
grep -q "needs at least 2 ranks" "$TMP/err" && ok "hang on one rank: says why" || fail "hang 1 rank" "$(cat "$TMP/err")"
expect_exit "--inject corrupt@5 on one rank: exit 2" 2 "$PLUMB" comm --inject corrupt@5
expect_exit "--min-busbw -1: exit 2" 2 "$PLUMB" comm -b 8 -e 8 --min-busbw -1
grep -q "\-\-min-busbw -1: expected GB/s >= 0" "$TMP/err" && ok "names --min-busbw and what it takes" || fail "--min-busbw message" "$(cat "$TMP/err")"
# a largest size beyond this host's memory: a usage error saying what it needs, before any allocation
expect_exit "-e 90T: exit 2 (not an allocation failure, exit 3)" 2 "$PLUMB" comm -b 8 -e 90000000000000
grep -Eq "\-e 90000000000000 needs 630000\.00 GB of host memory per rank \(7 buffers" "$TMP/err" \
  && ok "says how much -e needs and what the host has" || fail "-e too large message" "$(cat "$TMP/err")"
expect_exit "--help: exit 0" 0 "$PLUMB" comm --help
grep -q "\-b SIZE .*(default: 8)" "$TMP/out" && grep -q "\-e SIZE .*(default: 64M)" "$TMP/out" && grep -q "\-\-timeout S .*(default: 60)" "$TMP/out" \
  && ok "--help lists -b, -e, --timeout with defaults" || fail "help" "$(head -20 "$TMP/out")"

# plumb accept's comm check: 2 MPI ranks on the cpu (one rank: a skip)
PLUMB_ACCEPT_COMM_RANKS=1 "$PLUMB" accept --checks comm --device cpu --out "$TMP/a1" >"$TMP/a1.out" 2>&1; rc=$?
[ $rc -eq 0 ] && js "$TMP/a1" "assert c['status']=='skip' and 'one rank on the cpu and no GPU' in c['reason'], c" \
  && ok "accept on one cpu rank: comm is a skip, saying why" || fail "accept comm skip" "rc $rc; $(tail -3 "$TMP/a1.out")"
"$PLUMB" accept --checks comm --device cpu --out "$TMP/a2" >"$TMP/a2.out" 2>&1; rc=$?
[ $rc -eq 0 ] && js "$TMP/a2" "assert c['status']=='pass', c['reason']; d=c['details']; assert d['ranks']==2 and len(d['sweeps'])==27, d['ranks']; \
assert 'correctness: 6 collectives x 4 dtypes, 16 B..1 MiB on 2 ranks (mpi): 0 wrong' in c['reason'], c['reason']; \
assert 'bandwidth: 3 collectives x 1 dtype, 64 MiB..64 MiB on 2 ranks (mpi): 0 wrong' in c['reason'], c['reason']; \
m={x['name']:x['value'] for x in c['metrics']}; assert m['wrong']==0 and m['allreduce_fp32_busbw_GBps']>0, m; \
assert all(a.startswith('checks/comm') for a in c['artifacts']) and len(c['artifacts'])==3, c['artifacts']" \
  && ok "accept --checks comm on the cpu: 2 MPI ranks, every collective and dtype 0 wrong, busbw at 64 MiB recorded" \
  || fail "accept comm cpu" "rc $rc; $(tail -4 "$TMP/a2.out")"

# the NCCL path: device buffers over the fake NCCL (tests/fake_nccl.c) on the fake GPU plugin
FAKE="$PLUMB_BUILD/tests/libfake_gpu.so" NCCL="$PLUMB_BUILD/tests/libfake_nccl.so"
if [ ! -f "$FAKE" ] || [ ! -f "$NCCL" ]; then skip "plumb comm over nccl" "fake GPU plugin or fake NCCL not built"; finish; exit; fi
mkdir -p "$TMP/plug" "$TMP/bin"; ln -sf "$FAKE" "$TMP/plug/libplumb-hip.so"; cp "$PLUMB" "$TMP/bin/plumb"
G="-x FAKE_GPU_COUNT=4 -x PLUMB_BACKEND_PATH=$TMP/plug -x PLUMB_NCCL_LIB=$NCCL -x FAKE_NCCL_SLOT_BYTES=65536"
for np in 1 2; do
  $MPI -np $np $G "$TMP/bin/plumb" comm --device hip --transport nccl $SMALL -e 64K --out "$TMP/n$np" >"$TMP/n$np.out" 2>&1; rc=$?
  [ $rc -eq 0 ] && grep -q "# transport: RCCL 2.21.5 (.*libfake_nccl.so), rank 0 of $np on hip:0, non-blocking" "$TMP/n$np.out" \
    && [ "$(grep -c 'out of bounds values: 0 OK' "$TMP/n$np.out")" -eq 24 ] \
    && js "$TMP/n$np" "assert c['status']=='pass' and c['device']=='hip:0' and c['details']['implementation']=='nccl', c['reason']" \
    && ok "-np $np --device hip over the fake RCCL: every collective and dtype, 0 wrong" \
    || fail "nccl -np $np" "rc $rc; $(grep -v '^ ' "$TMP/n$np.out" | tail -5)"
done
$MPI -np 2 $G -x FAKE_NCCL_HANG=1:3 timeout --preserve-status 120 "$TMP/bin/plumb" comm --device hip --transport nccl -b 8 -e 1K --timeout 3 \
  --out "$TMP/nh" >"$TMP/nh.out" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q "still in progress after [0-9.]* s (a rank is missing or hung); communicator aborted" "$TMP/nh.out" \
  && js "$TMP/nh" "assert c['status']=='fail' and 'communicator aborted' in c['reason'], c['reason']" \
  && ok "a collective that hangs inside NCCL: the sweep fails (rc 1), communicator aborted, reason recorded" \
  || fail "nccl hang" "rc $rc; $(grep -iE 'nccl|comm:' "$TMP/nh.out" | head -4)"
# accept on one (fake) GPU: NCCL world size 1, no mpirun
env FAKE_GPU_COUNT=1 PLUMB_BACKEND_PATH="$TMP/plug" PLUMB_NCCL_LIB="$NCCL" PLUMB="$TMP/bin/plumb" "$TMP/bin/plumb" accept --checks comm \
  --device hip --out "$TMP/ag" >"$TMP/ag.out" 2>&1; rc=$?
[ $rc -eq 0 ] && js "$TMP/ag" "assert c['status']=='pass' and c['device']=='hip', c['reason']; d=c['details']; assert d['ranks']==1; \
assert 'RCCL' in d['runs']['bandwidth']['transport'] and 'mpirun' not in d['commands'][0], d; assert '0 wrong' in c['reason']" \
  && ok "accept --checks comm on one GPU: NCCL world size 1 without mpirun, 0 wrong" || fail "accept comm hip" "rc $rc; $(tail -4 "$TMP/ag.out")"
finish
