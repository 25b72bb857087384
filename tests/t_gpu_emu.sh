# The GPU plugins' fast transformer kernels (src/gpu/train_gpt_kern.cuh: flash
# attention, LayerNorm, the classifier's rows, the GELU) and the vision kernels
# over fp32 or 16-bit storage (src/gpu/train_vision_kern.cuh) run on the cpu under
# tests/tools/gpu_emu.cc's emulation of threads, barriers and warp shuffles,
# for warp width 32 (NVIDIA) and 64 (CDNA), against the golden definitions.
# Checks the kernel source itself on a host without a GPU; it does not check
# the compilers, the vendor libraries or the hardware (the GPU suite does).
# Then the CUDA-only tensor-core attention, the WMMA kernels, the mma.sync
# ones and the pipelined mma.sync ones (tests/tools/gpu_emu_tc.cc: mma.sync
# emulated from the PTX fragment layout, ldmatrix from its row-to-lane
# distribution, cp.async as copies done at their wait).
. "$(dirname "$0")/lib.sh"
src="$PLUMB_ROOT/tests/tools/gpu_emu.cc"
command -v g++ >/dev/null || { skip "gpu kernel emulation" "g++ not installed"; finish; }
# the three emulations (warp 32, warp 64, tensor cores) build and run side by
# side, one background job each (each is one compiler and one thread: on 2
# cores the part took 276 s one after another); then their outputs are judged
# in order. A job leaves TMP/build_X.rc (the compiler's) and TMP/rc_X (the run's).
emu_job() { # emu_job NAME SRC FLAGS...
  local name=$1 file=$2; shift 2
  if ! g++ "$@" -I"$PLUMB_ROOT/src" "$file" -o "$TMP/emu$name" -lpthread 2>"$TMP/err$name"; then
    echo 1 >"$TMP/build_$name.rc"; return
  fi
  echo 0 >"$TMP/build_$name.rc"
  "$TMP/emu$name" >"$TMP/out$name" 2>&1
  echo $? >"$TMP/rc_$name"
}
for w in 32 64; do
  emu_job $w "$src" -std=c++17 -O1 -Wall -Wno-unknown-pragmas -DPLUMB_WARP=$w &
done
emu_job tc "$PLUMB_ROOT/tests/tools/gpu_emu_tc.cc" -std=c++17 -O2 -Wall -Wno-unknown-pragmas -DPLUMB_CUDA \
  -I"$PLUMB_ROOT/tests/tools/emu_tc" &
wait
for w in 32 64; do
  if [ "$(cat "$TMP/build_$w.rc" 2>/dev/null)" != 0 ]; then
    fail "emulation builds (warp $w)" "$(head -c 400 "$TMP/err$w")"; continue
  fi
  rc=$(cat "$TMP/rc_$w" 2>/dev/null || echo 99)
  n=$(grep -c '^ok' "$TMP/out$w")
  # the vision kernels over 16-bit storage (gpu/train_vision_kern.cuh, resnet's 16-bit activations):
  # 5 shapes x 10 checks, and max-pools x 3 checks: 2 shapes x 4 kernel choices, 1 shape x 2
  nv=$(grep -cE '^ok .*(16o|bn sums|bn backward)' "$TMP/out$w")
  # sumsq (gpu/train_sumsq.cuh): 5 block-sum windows, both orders of 4 lengths, 2 that tell them apart
  ns=$(grep -c '^ok   sumsq' "$TMP/out$w")
  # the GELU over 16-bit storage (gpu/train_gpt_kern.cuh): 3 lengths x 2 kernels x (y, dx)
  ng=$(grep -cE '^ok   d?gelu16' "$TMP/out$w")
  # the fast column sums (gpu/train_gpt_kern.cuh): 3 shapes, 15 checks (sums from fp32 and 16-bit, the copies)
  nc=$(grep -cE '^ok .*colsum' "$TMP/out$w")
  # the residual add over 16-bit b: 2 lengths x 2 widths
  nr=$(grep -cE '^ok .*residual16' "$TMP/out$w")
  # the BN backward's own ReLU mask recomputed from x16: 5 shapes x (sums, data)
  no=$(grep -cE '^ok .*own ReLU mask recomputed' "$TMP/out$w")
  # attention's row dots D (k_flash_bwd_pre) against their stated order: 4 attention shapes and HS 36
  nd=$(grep -cE '^ok .*row dots D' "$TMP/out$w")
  # the classifier's rows over 16-bit logits in place: 3 shapes (bf16)
  nx=$(grep -cE '^ok .*from 16-bit logits in place' "$TMP/out$w")
  # the same rows staged in shared memory first (k_xent_rows_staged): the two-read rows' bits, 5 shapes
  nxs=$(grep -cE '^ok .*staged in shared memory: the two-read rows' "$TMP/out$w")
  # BN's one-pass statistics (bn_stats1p16o's sums, k_bn_meanvar): 3 shapes x 3 shifts x (sums, meanvar)
  n1=$(grep -cE '^ok .*bn one-pass' "$TMP/out$w")
  # the LayerNorm backward storing dx16, and the residual add fused in front of the forward: 3 shapes x 6
  nf=$(grep -cE '^ok .*(residual\+layernorm16|dx16 \(the cast of dx\)|dx with dx16 stored)' "$TMP/out$w")
  # the residual add's sum masked by the block input's ReLU (add16o's ymask16): 5 shapes
  ny=$(grep -cE '^ok .*add16o masked, the sum masked by ymask' "$TMP/out$w")
  # a projection block's two BNs in one pass (k_bn_apply2): 5 shapes
  n2=$(grep -cE '^ok .*bn_apply2_16o' "$TMP/out$w")
  # the BN sums' rows loaded ahead against one at a time: every bn_sums call (39)
  nu=$(grep -cE '^ok .*rows ahead = one at a time' "$TMP/out$w")
  # the 3x3/s2/p1 pool backward a 2x2 pixel block an item: 3 shapes x its kernel choices (10)
  nb=$(grep -cE '^ok .*maxpool_bwd16o 2x2 blocks' "$TMP/out$w")
  # the LayerNorm's dw/db parts four columns a thread: the one-column parts' bits, 2 shapes x (fp32, 16-bit dy)
  n4=$(grep -cE '^ok .*ln dw/db parts, 4 columns a thread' "$TMP/out$w")
  # the forms with the 16-bit type a compile-time constant: LN parts 4 shapes x 2 widths, colsum 2
  nk=$(grep -cE '^ok .*(type a constant|compile-time form)' "$TMP/out$w")
  # the token embedding, one value a thread (3 shapes) and four (2)
  ne=$(grep -cE '^ok .*encoder B' "$TMP/out$w")
  # the fused LayerNorm backward chunks (k_ln_bwd_chunk): 2 ways x 7 row shapes
  nlc=$(grep -cE '^ok .*layernorm fused chunks' "$TMP/out$w")
  if [ $rc -eq 0 ] && [ "$n" -ge 30 ] && [ "$nv" -ge 80 ] && [ "$ns" -ge 18 ] && [ "$ng" -ge 12 ] && [ "$nc" -ge 15 ] && [ "$nr" -ge 4 ] && [ "$no" -ge 10 ] && [ "$nd" -ge 5 ] && [ "$nx" -ge 3 ] && [ "$nxs" -ge 5 ] && [ "$n1" -ge 18 ] && [ "$nf" -ge 18 ] && [ "$ny" -ge 5 ] && [ "$n2" -ge 5 ] && [ "$nu" -ge 39 ] && [ "$nb" -ge 10 ] && [ "$n4" -ge 4 ] && [ "$nk" -ge 10 ] && [ "$ne" -ge 5 ] && [ "$nlc" -ge 14 ]; then
    ok "warp $w: $(tail -n 1 "$TMP/out$w") ($(grep -m1 'flash attention B2 T100 NH2 HS64 dqkv' "$TMP/out$w" | sed -E 's/.*(worst relative error [^ ]+).*/dqkv \1/'); vision 16-bit: $nv)"
  else
    fail "warp $w kernels against golden ($ns sumsq checks passed, 18 expected; $ng gelu16, 12; $nc colsum, 15; $nr residual16, 4; $no own-ReLU masks, 10; $nd row dots, 5; $nx 16-bit logits, 3; $nxs staged rows, 5; $n1 BN one-pass, 18; $nf fused LayerNorm, 18; $ny masked adds, 5; $n2 two-BN applies, 5; $nu rows-ahead sums, 39; $nb 2x2-block pools, 10; $n4 four-column LN parts, 4; $nk compile-time forms, 10; $ne encoder, 5; $nlc fused LN chunks, 14)" "$(grep -v '^ok' "$TMP/out$w" | head -5)"
  fi
done
# the tensor-core attention kernels (gpu/train_gpt_attn_tc.cuh) under the
# WMMA stand-in of tests/tools/emu_tc/ (warp 32 only: they are CUDA-only)
if [ "$(cat "$TMP/build_tc.rc" 2>/dev/null)" != 0 ]; then
  fail "tensor-core emulation builds" "$(head -c 400 "$TMP/errtc")"
else
  rc=$(cat "$TMP/rc_tc" 2>/dev/null || echo 99)
  n=$(grep -c '^ok' "$TMP/outtc")
  nm=$(grep -c '^ok   mma attention' "$TMP/outtc")
  # mma2: 12 shapes x (out, lse, dq, dk, dv, the mma kernels' bits) and the
  # repeat with cp.async done at issue for the 6 with T > 128, and 16-bit storage
  nm2=$(grep -c '^ok   mma2 attention' "$TMP/outtc")
  # the mma kernels on 16-bit storage (the gpt 16-bit pipeline): the fp32 storage's bits, 8 shapes
  n16=$(grep -c "^ok   mma attention.*16-bit storage: the fp32 storage's bits" "$TMP/outtc")
  # mma2 on 16-bit storage (the default kernels of the gpt 16-bit pipeline): the fp32 storage's bits, 12 shapes
  n216=$(grep -c "^ok   mma2 attention.*16-bit storage: the fp32 storage's bits" "$TMP/outtc")
  # mma2 reading the 16-bit qkv and dout in place (T a multiple of 128, HS 64): 2 shapes
  nin=$(grep -c "^ok   mma2 attention.*16-bit storage read in place" "$TMP/outtc")
  if [ $rc -eq 0 ] && [ "$n" -ge 30 ] && [ "$nm" -ge 48 ] && [ "$nm2" -ge 90 ] && [ "$n16" -ge 8 ] && [ "$n216" -ge 12 ] && [ "$nin" -ge 2 ]; then
    ok "tensor-core attention (WMMA and mma.sync, $nm mma ($n16 on 16-bit storage), $nm2 mma2 ($n216 on 16-bit storage, $nin read in place) checks): $(tail -n 1 "$TMP/outtc") ($(grep -m1 'B2 T100 NH2 HS64 (HSM 64) bf16 dq' "$TMP/outtc" | sed -E 's/.*(norm-wise [^,]+).*/dq \1/'))"
  else
    fail "tensor-core attention kernels against the float64 reference ($nm mma checks passed, 48 expected; $n16 on 16-bit storage, 8; $nm2 mma2, 90 expected; $n216 mma2 on 16-bit storage, 12; $nin read in place, 2)" "$(grep -v '^ok' "$TMP/outtc" | head -5)"
  fi
fi
finish
