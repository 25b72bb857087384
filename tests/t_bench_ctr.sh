# plumb bench ctr on the cpu and on the fake GPU plugin (tests/fake_gpu.c):
# every figure comes from the trainer's own step (train/trainer.h), the
# device-resident batches, the trainer's data path (the device feed on a
# GPU), the golden digest equal on the device and the cpu, the fast AUC
# through the trainer. No timing assertions: only that the figures exist.
. "$(dirname "$0")/lib.sh"
A="bench ctr --preset ctr-tiny --rows 1000 --precision fp32 --batch 256 --steps 4 --warmup 2 --leak-steps 4 --pool 8192
   --threads 1 --golden-steps 3 --golden-batch 128 --golden-rows 500 --auc-steps 30 --auc-batch 256 --auc-eval 2048"
check_json() { # NAME FILE
  python3 - "$2" <<'PY' >"$TMP/py" 2>&1
import json, math, sys
j = json.load(open(sys.argv[1]))
r = j["results"][0]
for k in ("samples_per_s", "step_ms", "loader_samples_per_s", "loader_step_ms", "forward_ms", "backward_ms",
          "optimizer_ms", "comm_ms"):
    assert isinstance(r[k], (int, float)) and math.isfinite(r[k]), (k, r[k])
# the split's parts are device times to a synchronisation, not enqueue times
# (a queued step's host time once made backward = enqueue - forward < 0)
assert r["forward_ms"] > 0 and r["backward_ms"] > 0, (r["forward_ms"], r["backward_ms"])
assert r["samples_per_s"] > 0 and r["loader_samples_per_s"] > 0 and r["peak_allocated_bytes"] > 0, r
assert r["leak_steps"] == 4 and r["leak"] is False, r
assert j["golden"]["equal"] is True and len(j["golden"]["digest_cpu"]) == 64, j["golden"]
a = j["auc"]
assert 0.5 < a["auc_device"] < 1 and a["auc_device"] == a["auc_cpu"], a
assert "trainer's step" in j["method"], j["method"]
print(r["samples_per_s"], a["auc_device"])
PY
  [ $? -eq 0 ] && ok "$1: figures from the trainer's step, golden equal, AUC ($(cat "$TMP/py"))" || fail "$1" "$(tail -3 "$TMP/py")"
}
"$PLUMB" $A --device cpu --json "$TMP/cpu.json" >"$TMP/cpu.out" 2>&1 && ok "bench ctr on the cpu exits 0" || fail "bench ctr cpu" "$(tail -5 "$TMP/cpu.out")"
check_json "cpu" "$TMP/cpu.json"
FAKE="$PLUMB_BUILD/tests/libfake_gpu.so"
if [ -f "$FAKE" ]; then
  mkdir -p "$TMP/plug"; ln -sf "$FAKE" "$TMP/plug/libplumb-hip.so"
  FAKE_GPU_COUNT=1 PLUMB_BACKEND_PATH="$TMP/plug" "$PLUMB" $A --device hip --json "$TMP/hip.json" >"$TMP/hip.out" 2>&1 \
    && ok "bench ctr on the (fake) hip device exits 0" || fail "bench ctr hip" "$(tail -5 "$TMP/hip.out")"
  check_json "hip (fake): device feed and device batches" "$TMP/hip.json"
else skip "bench ctr on the (fake) hip device" "$FAKE not built"; fi
# --workdir (the PyTorch side's batch files) is refused before any measuring: a --to-auc run
# measured plumb's half and then failed on "cannot write DIR/ctr_ta_init.bin"
touch "$TMP/plainfile"
run "--vs-pytorch --workdir under a regular file: exit 2 naming --workdir, nothing measured" 2 "^plumb bench ctr: --workdir .*plainfile/x" \
  "$PLUMB" bench ctr --device cpu --vs-pytorch --to-auc 0.7 --workdir "$TMP/plainfile/x"
grep -q "reached\|time to AUC" "$TMP/out" && fail "nothing measured before the --workdir error" || ok "nothing measured before the --workdir error"
finish
