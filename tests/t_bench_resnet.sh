# plumb bench resnet on the cpu and on the fake GPU plugin (tests/fake_gpu.c):
# the figures come from the trainer's own step (train/trainer.h) on device
# batches and from its data path, the golden digest of a short resnet-tiny
# run on the device equals the cpu's, --vs-pytorch runs bench/resnet_torch.py
# on the same device (where a python with torch is found) and the ratios are
# written. No timing assertions: only that the figures exist.
. "$(dirname "$0")/lib.sh"
A="bench resnet --preset resnet-tiny --batch 16 --steps 2 --warmup 1 --leak-steps 2 --threads 1 --golden-steps 2 --golden-batch 16"
check_json() { # NAME FILE TORCH(0|1)
  python3 - "$2" "$3" <<'PY' >"$TMP/py" 2>&1
import json, math, sys
j = json.load(open(sys.argv[1]))
assert j["schema"] == "plumb.bench.resnet/1" and "trainer's step" in j["method"], j["method"]
assert j["golden"]["equal"] is True and len(j["golden"]["digest_cpu"]) == 64, j["golden"]
for r in j["results"]:
    for k in ("images_per_s", "step_ms", "forward_ms", "backward_ms", "comm_ms", "optimizer_ms", "loader_images_per_s"):
        assert isinstance(r[k], (int, float)) and math.isfinite(r[k]), (k, r[k])
    assert r["images_per_s"] > 0 and r["peak_allocated_bytes"] > 0 and r["leak"] is False, r
    # the split from the trainer's marks (src/cli/bench_split.c): inside the compute phase
    assert r["split_from"] == "device marks", r["split_from"]
    assert r["forward_ms"] > 0 and r["backward_ms"] > 0, r
    assert r["forward_ms"] + r["backward_ms"] <= r["forward_backward_ms"] * 1.001 + 1e-3, r
    # the 16-bit activation pipeline (models/resnet/resnet16.c) runs for bf16/fp16 by default
    assert r["activations"] == ("fp32" if r["precision"] == "fp32" else "16-bit"), r
    if sys.argv[2] == "1":
        assert r["torch_eager_images_per_s"] > 0 and r["ratio_vs_eager"] > 0, r
print(" ".join("%s %.1f img/s (%s)" % (r["precision"], r["images_per_s"], r["activations"]) for r in j["results"]))
PY
  [ $? -eq 0 ] && ok "$1: figures from the trainer's step, golden equal ($(cat "$TMP/py"))" || fail "$1" "$(tail -3 "$TMP/py")"
}
"$PLUMB" $A --precision fp32,bf16 --device cpu --json "$TMP/cpu.json" >"$TMP/cpu.out" 2>&1 && ok "bench resnet on the cpu exits 0" \
  || fail "bench resnet cpu" "$(tail -5 "$TMP/cpu.out")"
check_json "cpu fp32+bf16" "$TMP/cpu.json" 0
grep -q "images/s" "$TMP/cpu.out" && grep -q "golden resnet-tiny" "$TMP/cpu.out" && ok "prints the table and the golden line" || fail "table" "$(head -12 "$TMP/cpu.out")"
FAKE="$PLUMB_BUILD/tests/libfake_gpu.so"
if [ -f "$FAKE" ]; then
  mkdir -p "$TMP/plug"; ln -sf "$FAKE" "$TMP/plug/libplumb-hip.so"
  FAKE_GPU_COUNT=1 PLUMB_BACKEND_PATH="$TMP/plug" "$PLUMB" $A --precision fp32 --device hip --json "$TMP/hip.json" >"$TMP/hip.out" 2>&1 \
    && ok "bench resnet on hip (fake plugin) exits 0" || fail "bench resnet fake hip" "$(tail -5 "$TMP/hip.out")"
  check_json "hip (fake)" "$TMP/hip.json" 0
else
  skip "fake hip plugin" "$FAKE not built"
fi
# the PyTorch reference on the same device (python3-torch: scripts/deps.sh's bench set)
PY=""
for p in python3 /usr/bin/python3; do "$p" -c "import torch" 2>/dev/null && { PY=$p; break; }; done
if [ -n "$PY" ]; then
  "$PLUMB" $A --precision fp32 --device cpu --vs-pytorch --torch-modes eager,compile --python "$PY" \
    --pytorch-script "$PLUMB_ROOT/bench/resnet_torch.py" --json "$TMP/vs.json" >"$TMP/vs.out" 2>&1 \
    && ok "--vs-pytorch on the cpu exits 0" || fail "--vs-pytorch" "$(tail -5 "$TMP/vs.out")"
  check_json "--vs-pytorch: eager images/s and the ratio" "$TMP/vs.json" 1
  c=$(jq -r '.results[0] | if .torch_compile_images_per_s then "ran" else .torch_compile_error end' "$TMP/vs.json")
  [ -n "$c" ] && [ "$c" != null ] && ok "torch.compile: $c" || fail "torch.compile figure or reason" "$c"
else
  skip "--vs-pytorch" "no python3 with torch (apt-get install python3-torch)"
fi
# --torch-timeout: a PyTorch run that outlasts it costs its figure only (needs no torch)
printf 'import time\ntime.sleep(30)\n' >"$TMP/slow.py"
"$PLUMB" bench resnet --preset resnet-tiny --batch 16 --steps 2 --warmup 1 --leak-steps 0 --threads 1 --precision fp32 \
  --vs-pytorch --torch-modes eager --python python3 --pytorch-script "$TMP/slow.py" --torch-timeout 1 \
  --json "$TMP/slow.json" >"$TMP/slow.out" 2>&1 && ok "--torch-timeout 1 on a 30 s script: exit 0" \
  || fail "--torch-timeout" "$(tail -5 "$TMP/slow.out")"
r=$(jq -r '.results[0] | "\(.images_per_s > 0) \(.torch_eager_images_per_s) \(.torch_eager_error)"' "$TMP/slow.json" 2>&1)
[ "$r" = "true null stopped by --torch-timeout after 1 s" ] && ok "--torch-timeout: plumb's figure kept, PyTorch's null with the reason" \
  || fail "--torch-timeout JSON" "$r"
expect_exit "--torch-timeout -1: exit 2" 2 "$PLUMB" bench resnet --torch-timeout -1
expect_exit "--batch 1: exit 2 (BatchNorm needs 2)" 2 "$PLUMB" bench resnet --batch 1
expect_exit "--preset resnet34: exit 2" 2 "$PLUMB" bench resnet --preset resnet34
grep -q "resnet34" "$TMP/err" && ok "names the preset" || fail "preset message" "$(cat "$TMP/err")"
finish
