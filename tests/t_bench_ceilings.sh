# plumb bench ceilings (src/cli/bench_ceilings.c) on the cpu and on the fake
# GPU plugin (tests/fake_gpu.c): one copy row and one GEMM row per (shape,
# precision), in the order asked, each figure the stated formula of its own
# measured time (copy: 2 bytes / s, read + written; GEMM: 2 M N K / s), the
# options' bad values refused naming the option before any device work. No
# timing assertions: only that the figures exist and agree with each other.
. "$(dirname "$0")/lib.sh"
A="bench ceilings --shapes 64x48x40,17x9x33 --dtypes bf16,fp16,fp32,tf32 --repeats 3 --target-ms 1"
check_json() { # NAME FILE DEVICE COPY_MIB
  python3 - "$2" "$3" "$4" <<'PY' >"$TMP/py" 2>&1
import json, math, sys
j = json.load(open(sys.argv[1]))
dev, mib = sys.argv[2], int(sys.argv[3])
assert j["schema"] == "plumb.ceilings/1" and j["device"] == dev, (j["schema"], j["device"])
assert "median" in j["method"] and j["determinism"].startswith("mode=fast"), (j["method"], j["determinism"])
rows = j["results"]
if mib:
    c = rows.pop(0)
    assert c["kind"] == "copy" and c["bytes_each_way"] == mib << 20 and c["batch"] >= 1, c
    assert math.isfinite(c["ms"]) and c["ms"] > 0, c
    assert math.isclose(c["gbps"], 2 * c["bytes_each_way"] / (c["ms"] * 1e-3) / 1e9, rel_tol=1e-12), c
want = [(m, n, k, t) for (m, n, k) in ((64, 48, 40), (17, 9, 33)) for t in ("bf16", "fp16", "fp32", "tf32")]
got = [(r["m"], r["n"], r["k"], r["dtype"]) for r in rows]
assert all(r["kind"] == "gemm" for r in rows) and got == want, got
for r in rows:
    assert math.isfinite(r["ms"]) and r["ms"] > 0 and r["batch"] >= 1, r
    assert math.isclose(r["tflops"], 2.0 * r["m"] * r["n"] * r["k"] / (r["ms"] * 1e-3) / 1e12, rel_tol=1e-12), r
    assert r["peak_tflops"] >= 0, r
print("%d gemm rows" % len(rows))
PY
  [ $? -eq 0 ] && ok "$1: copy and GEMM rows as asked, figures from their times ($(cat "$TMP/py"))" \
    || fail "$1" "$(tail -3 "$TMP/py")"
}
"$PLUMB" $A --device cpu --copy-mib 1 --json "$TMP/cpu.json" >"$TMP/cpu.out" 2>&1 \
  && ok "bench ceilings on the cpu exits 0" || fail "bench ceilings cpu" "$(tail -5 "$TMP/cpu.out")"
check_json "cpu" "$TMP/cpu.json" cpu 1
n=$(grep -cE '^(bf16|fp16|fp32|tf32) +(64x48x40|17x9x33) .* TFLOP/s' "$TMP/cpu.out")
[ "$n" = 8 ] && ok "the table has the 8 GEMM rows" || fail "table rows" "$n GEMM rows in: $(head -c 600 "$TMP/cpu.out")"
"$PLUMB" $A --device cpu --copy-mib 0 --json "$TMP/nocopy.json" >"$TMP/nocopy.out" 2>&1 \
  && check_json "--copy-mib 0: no copy row" "$TMP/nocopy.json" cpu 0 || fail "copy-mib 0" "$(tail -5 "$TMP/nocopy.out")"
# a named GPU that does not open: the cpu is measured, and the warning says so
PLUMB_BACKEND_PATH="$TMP/none" "$PLUMB" $A --device cuda --copy-mib 0 --json "$TMP/fb.json" >"$TMP/fb.out" 2>"$TMP/fb.err"
rc=$?
if [ $rc -eq 0 ] && grep -q 'falling back to the cpu' "$TMP/fb.err"; then check_json "cuda absent: the cpu, with a warning" "$TMP/fb.json" cpu 0
else fail "cuda absent" "exit $rc; stderr: $(head -c 300 "$TMP/fb.err")"; fi
FAKE="$PLUMB_BUILD/tests/libfake_gpu.so"
if [ -f "$FAKE" ]; then
  mkdir -p "$TMP/plug"; ln -sf "$FAKE" "$TMP/plug/libplumb-hip.so"
  FAKE_GPU_COUNT=1 PLUMB_BACKEND_PATH="$TMP/plug" "$PLUMB" $A --device auto --copy-mib 2 --json "$TMP/hip.json" \
    >"$TMP/hip.out" 2>&1 && ok "bench ceilings --device auto opens the (fake) hip device" || fail "bench ceilings hip" "$(tail -5 "$TMP/hip.out")"
  dev=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["device"])' "$TMP/hip.json" 2>/dev/null)
  case "$dev" in hip*) check_json "hip (fake) through the plugin's ops" "$TMP/hip.json" "$dev" 2 ;;
                 *) fail "auto picks the GPU" "device '$dev', want hip" ;; esac
else skip "bench ceilings on the (fake) hip device" "$FAKE not built"; fi
# bad values: exit 2, the option named, before any device is opened
bad() { # NAME ARGS... : exit 2 and stderr names the option (the first word of NAME)
  local name=$1; shift
  "$PLUMB" bench ceilings --device cpu --copy-mib 0 "$@" >"$TMP/out" 2>"$TMP/err"; local rc=$?
  if [ $rc -eq 2 ] && grep -q -- "${name%% *}" "$TMP/err" && ! grep -q 'TFLOP/s' "$TMP/out"; then ok "$name refused (exit 2)"
  else fail "$name" "exit $rc; stderr: $(head -c 300 "$TMP/err")"; fi
}
bad "--shapes 64x48 (two dimensions)" --shapes 64x48
bad "--shapes 0x4x4 (a zero dimension)" --shapes 0x4x4
bad "--shapes 4x4x4y (trailing text)" --shapes 4x4x4y
bad "--dtypes fp8" --dtypes fp32,fp8
bad "--target-ms 0" --target-ms 0
bad "--repeats 0" --repeats 0
bad "--copy-mib -1" --copy-mib -1
finish
