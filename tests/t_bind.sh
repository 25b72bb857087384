# plumb train --bind numa (train/bind.h): every rank pins its threads and
# memory to its GPU's NUMA node (a cpu rank: local rank mod nodes) and
# results.json records each rank's binding; the GPU is located through the
# fake GPU plugin's PCI bus ids in an hwloc XML topology (tests/topology-4gpu.xml).
. "$(dirname "$0")/lib.sh"
FB="--steps 5 --train-samples 2000 --eval-samples 500 --quiet --health-interval 0 --threads 1"
node0_cpus=$(python3 -c "
import glob,re
n=sorted(glob.glob('/sys/devices/system/node/node[0-9]*'), key=lambda p:int(re.findall(r'\d+$',p)[0]))
print(open(n[0]+'/cpulist').read().strip() if n else '')")
bj() { python3 -c "import json,sys; b=json.load(open(sys.argv[1]+'/results.json'))['binding']; $2" "$1"; }
if command -v mpirun >/dev/null; then
  mpirun --oversubscribe -np 2 "$PLUMB" train ctr $FB --bind numa --out "$TMP/c2" >"$TMP/c2.out" 2>&1; rc=$?
  [ $rc -eq 0 ] && bj "$TMP/c2" "assert [x['rank'] for x in b]==[0,1]; assert all(x['policy']=='numa' and x['numa_node'] is not None and x['mem_policy']=='bind' for x in b), b; \
assert [x['local_rank'] for x in b]==[0,1]; assert all(x['cpus']=='$node0_cpus' for x in b) or len(set(x['numa_node'] for x in b))==2, b" \
    && ok "mpirun -np 2 train --bind numa: both ranks bound, results.json records each (node, CPUs, memory policy)" \
    || fail "-np 2 --bind numa" "rc $rc; $(tail -3 "$TMP/c2.out")"
else
  skip "-np 2 --bind numa" "mpirun not installed"
fi
"$PLUMB" train ctr $FB --out "$TMP/none" >/dev/null 2>&1
bj "$TMP/none" "assert b[0]['policy']=='none' and b[0]['numa_node'] is None and b[0]['cpus'], b" \
  && ok "--bind none (the default): the launcher's binding is recorded as it is" || fail "--bind none" "$(head -c 300 "$TMP/none/results.json")"
expect_exit "--bind socket: exit 2" 2 "$PLUMB" train ctr --bind socket
grep -q "\-\-bind: 'socket' is not one of none|numa" "$TMP/err" && ok "names the option" || fail "--bind message" "$(cat "$TMP/err")"

FAKE="$PLUMB_BUILD/tests/libfake_gpu.so"
if [ ! -f "$FAKE" ]; then skip "--bind numa on a GPU" "fake GPU plugin not built"; finish; exit; fi
mkdir -p "$TMP/plug" "$TMP/bin"; ln -sf "$FAKE" "$TMP/plug/libplumb-hip.so"; cp "$PLUMB" "$TMP/bin/plumb"
X="$PLUMB_ROOT/tests/topology-4gpu.xml"
# GPU 0 of the fake is at 0000:12:00.0, on node 0 of the fixture (this machine has a node 0)
env FAKE_GPU_COUNT=2 PLUMB_BACKEND_PATH="$TMP/plug" FAKE_GPU_PCI=0000:12:00.0,0000:31:00.0 PLUMB_BIND_TOPOLOGY="$X" \
  "$TMP/bin/plumb" train ctr $FB --device hip --bind numa --out "$TMP/g" >"$TMP/g.out" 2>&1; rc=$?
[ $rc -eq 0 ] && bj "$TMP/g" "assert b[0]['gpu_pci_bus']=='0000:12:00.0' and b[0]['numa_node']==0 and 'nearest GPU 0000:12:00.0' in b[0]['why'], b" \
  && ok "a GPU rank binds to the node nearest its GPU's PCI bus (0000:12:00.0 -> node 0)" || fail "GPU bind" "rc $rc; $(tail -3 "$TMP/g.out")"
# a GPU whose node this machine does not have: exit 2, named
env FAKE_GPU_COUNT=1 PLUMB_BACKEND_PATH="$TMP/plug" FAKE_GPU_PCI=0000:31:00.0 PLUMB_BIND_TOPOLOGY="$X" \
  "$TMP/bin/plumb" train ctr $FB --device hip --bind numa --out "$TMP/g1" >"$TMP/g1.out" 2>&1; rc=$?
if [ "$(ls -d /sys/devices/system/node/node1 2>/dev/null)" ]; then skip "missing node" "this machine has a node 1"
else [ $rc -eq 2 ] && grep -q "bind numa: hostinfo: no NUMA node 1 on this machine" "$TMP/g1.out" && ok "GPU on node 1 of a host with one node: exit 2, named" \
  || fail "missing node" "rc $rc; $(tail -2 "$TMP/g1.out")"; fi
env FAKE_GPU_COUNT=1 PLUMB_BACKEND_PATH="$TMP/plug" FAKE_GPU_PCI=0000:77:00.0 PLUMB_BIND_TOPOLOGY="$X" \
  "$TMP/bin/plumb" train ctr $FB --device hip --bind numa >"$TMP/g2.out" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "GPU 0000:77:00.0 is not in the PCI tree of" "$TMP/g2.out" && ok "a GPU the topology does not know: exit 2, named" \
  || fail "unknown GPU" "rc $rc; $(tail -2 "$TMP/g2.out")"
finish
