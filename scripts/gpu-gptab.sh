#!/usr/bin/env bash
# gpt2-124m's step settings side by side, then the headline under the best
# of them, on the GPU host, from the folder scripts/gpu-prep.sh fills. For a
# call that may be the session's only one: it measures each setting against
# the defaults and still ends with a same-run figure against torch.compile.
#   plain     plumb bench gpt, gpt2-124m B=16 T=1024 bf16, the defaults
#   VARIANT   the same with one setting changed (GPTAB_VARIANTS, default all):
#             nostage  PLUMB_GPT_XENT_STAGE=0 (classifier rows read twice)
#             nobgrad  PLUMB_GPT_BGRAD_EPI=0 (dbias in our column sums)
#             nodirect PLUMB_GPT_DWTE_DIRECT=0 (dwte's last chunk into dwp,
#                      then dwp copied to dwte)
#             ch2, ch4 the classifier in 2 or 4 row chunks, not the
#                      default's 1 (PLUMB_GPT_XENT_CHUNK_BYTES; 4 was the
#                      rule until 2026-12-06)
#             vp       PLUMB_ATTN_VP_CACHE=1 (cuDNN variant packs kept)
#             dw64     PLUMB_GPT_DW_SLICES=tiles:64 (fewer dw slices)
#             cudnn919 PLUMB_CUDNN_LIB = the host PyTorch wheel's cuDNN
#             nofon    PLUMB_FOUND_OF_NORM=0 (scale_check's pass over the
#                      gradients kept, not the flag read off the norm)
#             nocls16  PLUMB_GPT_CLS16=0 (the classifier casts the fp32
#                      working wte to 16 bits itself, a step)
#             lnvec    PLUMB_GPT_LN_PART_VEC=1 (the LayerNorm backward's
#                      dw/db parts four columns a thread)
#             ws0      PLUMB_LT_WS_MB=0 (cuBLASLt algorithms that need no
#                      workspace, so none to zero before a GEMM)
#             lnfused  PLUMB_GPT_LN_FUSED=1 (the LayerNorm backward's dx,
#                      dw/db parts and dsum in one kernel a 64-row chunk;
#                      the default since bbc819c)
#             nolnfused PLUMB_GPT_LN_FUSED=0 (the three passes again)
#             bgrad    PLUMB_GPT_BGRAD_EPI=1 (dbias in cuBLASLt's BGRADB
#                      epilogue; off by default since bbc819c, so nobgrad
#                      is the defaults there)
#   graph     (GPTAB_GRAPH=1, the default) a few steps with PLUMB_GRAPH_DUMP:
#             the step graph's nodes ($D/graph.txt) and each memset with the
#             kernels either side of it, counted ($D/graph-memsets.txt)
#   pick      from each group ({nostage}, {nobgrad, bgrad}, {nodirect}, {ch2, ch4}, {vp}, {dw64},
#             {cudnn919}, {nofon}, {nocls16}, {lnvec}, {ws0}, {lnfused, nolnfused}) the setting faster than plain by more than
#             GPTAB_MIN_GAIN (default 0.003, 0.3%), if any; the picks together
#   best      plumb bench gpt under the picks with --vs-pytorch (torch.compile
#             in the same run): the ratio that counts
#   kprof     the same picks under bench/kprof.cc's CUPTI kernel table, plumb
#             alone ($D/best.kprof.txt)
# At most GPTAB_BUDGET_S seconds (default 240). Writes $OUT/gptab/ (*.log,
# *.json, summary.txt). NVLink multicast stays off; clocks, power and MIG are
# left alone.
set -u
. "$(dirname "$0")/gpu-topic.sh" gptab "${GPTAB_BUDGET_S:-240}"

B="bench gpt --preset gpt2-124m --batch 16 --device cuda --precision bf16"
ST="--steps 30 --warmup 10"
TCUDNN=$(torch_cudnn)
log "PyTorch's cuDNN: ${TCUDNN:-none found}"
envof() { # the environment of a variant, as NAME=VALUE words
  case $1 in
    plain) echo "" ;;
    nostage) echo "PLUMB_GPT_XENT_STAGE=0" ;;
    nobgrad) echo "PLUMB_GPT_BGRAD_EPI=0" ;;
    nodirect) echo "PLUMB_GPT_DWTE_DIRECT=0" ;;
    ch2) echo "PLUMB_GPT_XENT_CHUNK_BYTES=2147483648" ;;
    ch4) echo "PLUMB_GPT_XENT_CHUNK_BYTES=1073741824" ;;
    vp) echo "PLUMB_ATTN_VP_CACHE=1" ;;
    dw64) echo "PLUMB_GPT_DW_SLICES=tiles:64" ;;
    cudnn919) [ -n "$TCUDNN" ] && echo "PLUMB_CUDNN_LIB=$TCUDNN" ;;
    nofon) echo "PLUMB_FOUND_OF_NORM=0" ;;
    nocls16) echo "PLUMB_GPT_CLS16=0" ;;
    lnvec) echo "PLUMB_GPT_LN_PART_VEC=1" ;;
    ws0) echo "PLUMB_LT_WS_MB=0" ;;
    lnfused) echo "PLUMB_GPT_LN_FUSED=1" ;;
    nolnfused) echo "PLUMB_GPT_LN_FUSED=0" ;;
    bgrad) echo "PLUMB_GPT_BGRAD_EPI=1" ;;
    *) echo "BAD" ;;
  esac
}
VARS=${GPTAB_VARIANTS:-nolnfused bgrad cudnn919 ws0 nofon nocls16 lnvec nostage nodirect vp dw64 ch2 ch4}
if [ "${GPTAB_GRAPH:-1}" = 1 ]; then
  rm -f "$D/graph.txt"
  step graph 30 env PLUMB_GRAPH_DUMP="$D/graph.txt" $P $B --steps 3 --warmup 1 --json "$D/graph.json"
  # per graph: its totals, then each memset as "kernel before | bytes | kernel after", counted
  awk 'function flush(k) { for (k in c) printf "  %6d  %s\n", c[k], k; delete c }
       /^# graph/ { flush(); print } /^# totals/ { print "  " $0 }
       $1 == "K" { if (pend != "") c[pend " | " $3]++; pend = ""; last = $3 }
       $1 == "M" { if (pend != "") c[pend " | (memset)"]++; pend = last " | " $4 }
       END { flush() }' "$D/graph.txt" 2>/dev/null | head -n 60 \
    > "$D/graph-memsets.txt"
  tee -a "$LOG" <"$D/graph-memsets.txt"
fi
for v in plain $VARS; do
  ev=$(envof "$v")
  if [ "$ev" = BAD ]; then log "==== $v: unknown variant"; continue; fi
  if [ "$v" = cudnn919 ] && [ -z "$ev" ]; then log "==== $v: no PyTorch cuDNN; skipped"; continue; fi
  # leave room for the best run with PyTorch (about 50 s) and kprof (about 25 s)
  if [ "$(left)" -lt 100 ]; then log "==== $v: skipped ($(left) s left, kept for the best run)"; continue; fi
  # shellcheck disable=SC2086
  step "$v" 40 env PLUMB_ATTN_LOG=1 $ev $P $B $ST --json "$D/$v.json"
done
pick=$(python3 - "$D" "${GPTAB_MIN_GAIN:-0.003}" "$VARS" <<'PY'
import json, os, sys
d, gain, names = sys.argv[1], float(sys.argv[2]), sys.argv[3].split()
def tok(n):
    try: return json.load(open(os.path.join(d, n + ".json")))["rows"][0]["tokens_per_s"]
    except Exception: return None
base = tok("plain")
groups = [["nostage"], ["nobgrad", "bgrad"], ["nodirect"], ["ch2", "ch4"], ["vp"], ["dw64"], ["cudnn919"], ["nofon"], ["nocls16"], ["lnvec"], ["ws0"], ["lnfused", "nolnfused"]]
picks = []
for g in groups:
    best = None
    for n in g:
        t = tok(n)
        if n in names and base and t and t > base * (1 + gain) and (best is None or t > best[1]):
            best = (n, t)
    if best: picks.append(best[0])
print(" ".join(picks))
PY
)
penv=""
for v in $pick; do penv="$penv $(envof "$v")"; done
log "picked: ${pick:-none (the defaults)}; environment:${penv:- none}"
# shellcheck disable=SC2086
step best 130 env $penv $P $B $ST --vs-pytorch --torch-modes compile --json "$D/best.json"
grep -E "^(bf16|fp32|fp16) |pytorch|FLOPs per token" "$D/best.log" | tee -a "$LOG"
# shellcheck disable=SC2086
step kprof 40 "${KP[@]}" KPROF_OUT="$D/best.kprof.txt" env $penv $P $B --steps 30 --warmup 5 --json "$D/kprof.json"
{
  echo "gpu-gptab summary ($(( SECONDS - T0 )) s of $BUDGET)"
  for v in plain $VARS; do echo "$v [$(envof "$v")]: $(bench_tok "$D/$v.json")"; done
  for v in best kprof; do echo "$v [${penv# }]: $(bench_tok "$D/$v.json")"; done
  echo "picked: ${pick:-none}"
  python3 - "$D/best.json" <<'PY' 2>/dev/null
import json, sys
r = json.load(open(sys.argv[1]))["rows"][0]
c = r.get("pytorch", {}).get("compile", {})
print("best: plumb %.0f tokens/s (%.2f ms/step, %s graphed steps, split %s), torch.compile %s tokens/s in the same run: %s x"
      % (r["tokens_per_s"], r["step_ms"], r.get("graphed_steps"), json.dumps(r.get("split_ms")),
         "%.0f" % c["tokens_per_s"] if "tokens_per_s" in c else "none", "%.4f" % c["ratio"] if "ratio" in c else "none"))
PY
  [ -f "$D/best.kprof.txt" ] && { echo "-- kprof of the picks:"; head -n 45 "$D/best.kprof.txt"; }
} | tee "$D/summary.txt" | tee -a "$LOG"
