# plumb bench gpt on the cpu: the figures through the trainer's step, the
# FLOP formula stated, the JSON written; --vs-pytorch reports PyTorch's
# figure and the ratio (or why it could not be measured). No timing is
# asserted: only that each figure was measured.
. "$(dirname "$0")/lib.sh"
PLUMB_GPT_DW_SLICES=1 "$PLUMB" bench gpt --preset gpt-tiny --batch 4 --steps 3 --warmup 1 --threads 1 --precision fp32,bf16 --peak-tflops 1 --json "$TMP/b.json" >"$TMP/b.out" 2>&1 \
  && ok "bench gpt runs (fp32, bf16)" || fail "bench gpt runs" "$(tail -3 "$TMP/b.out")"
# the PLUMB_* settings that choose kernels are printed and kept in the JSON (src/cli/bench_env.c)
grep -q "^settings from the environment: .*PLUMB_GPT_DW_SLICES=1" "$TMP/b.out" && jq -e '.env.PLUMB_GPT_DW_SLICES == "1" and (.env | has("PLUMB_BACKEND_PATH") | not)' "$TMP/b.json" >/dev/null \
  && ok "the PLUMB_* settings are printed and in the JSON" || fail "bench env" "$(grep settings "$TMP/b.out"); $(jq -c .env "$TMP/b.json" 2>&1)"
grep -q "6N + 12 L T C (PaLM appendix B; N = 100096 parameters outside the embeddings" "$TMP/b.out" \
  && ok "the FLOP formula and N are printed" || fail "flop formula line" "$(head -3 "$TMP/b.out")"
jq -e '.rows | length == 2 and all(.[]; .tokens_per_s > 0 and .step_ms > 0 and .mfu > 0 and .split_ms.forward > 0 and .split_ms.backward > 0 and .peak_allocated_bytes > 0)' "$TMP/b.json" >/dev/null \
  && ok "JSON: tokens/s, ms/step, MFU, the split and peak memory per precision" || fail "bench gpt JSON" "$(head -c 400 "$TMP/b.json")"
# the split from the trainer's marks (src/cli/bench_split.c), inside the compute phase
jq -e 'all(.rows[]; .split_from == "device marks" and .split_ms.forward + .split_ms.backward <= .split_ms.forward_backward * 1.001 + 0.001)' "$TMP/b.json" >/dev/null \
  && ok "the split comes from the device marks, within the compute phase" || fail "split from marks" "$(jq -c '[.rows[] | {split_from, split_ms}]' "$TMP/b.json" 2>&1)"
expect_exit "a sequence longer than the context: exit 2" 2 "$PLUMB" bench gpt --preset gpt-tiny --seq-len 65
grep -q -- "--seq-len: 65" "$TMP/err" && ok "the option is named" || fail "seq-len message" "$(cat "$TMP/err")"
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  "$PLUMB" bench gpt --preset gpt-tiny --batch 2 --seq-len 32 --steps 2 --warmup 1 --threads 1 --vs-pytorch --python /usr/bin/python3 \
    --pytorch-script "$PLUMB_ROOT/bench/gpt_pytorch.py" --json "$TMP/p.json" >"$TMP/p.out" 2>&1
  jq -e '.rows[0].pytorch.eager.ratio > 0 and (.rows[0].pytorch.compile.ratio > 0 or (.rows[0].pytorch.compile.error | length > 0))' "$TMP/p.json" >/dev/null \
    && ok "--vs-pytorch: eager measured with a ratio; compile measured or why not ($(grep -m1 'pytorch compile' "$TMP/p.out" | sed 's/^ *//' | cut -c1-80))" \
    || fail "--vs-pytorch" "$(tail -4 "$TMP/p.out")"
else
  skip "bench gpt --vs-pytorch" "no python3 torch (the bench set: scripts/deps.sh bench)"
fi
finish
