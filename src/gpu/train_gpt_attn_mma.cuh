/* Register-resident tensor-core flash attention (FlashAttention-2 style) for
 * 16-bit training on CUDA, head widths up to 64: the fast path of
 * train_gpt_attn.cu with PLUMB_GPT_ATTN=mma (docs/GPT.md). The WMMA kernels of
 * gpu/train_gpt_attn_tc.cuh keep S, P, dP and dS in shared memory between
 * their products, since a WMMA fragment's layout is opaque; these use
 * mma.sync.m16n8k16 directly, whose fragment layout the PTX ISA fixes, so the
 * scores, probabilities and their gradients stay in the registers they were
 * accumulated in, and an accumulator of S becomes the A operand of P V with
 * no trip through memory.
 *
 * The fragment layout (PTX ISA, "Matrix Fragments for mma.m16n8k16" with
 * 16-bit inputs): lane = 4 g + q (g = 0..7, q = 0..3);
 *   A (16 x 16, row-major), 4 registers of two 16-bit values (low half the
 *     lower column): a0 = A[g][2q, 2q+1], a1 = A[g+8][2q, 2q+1],
 *     a2 = A[g][2q+8, 2q+9], a3 = A[g+8][2q+8, 2q+9];
 *   B (16 x 8, k x n, "col"): b0 = B[2q, 2q+1][g], b1 = B[2q+8, 2q+9][g];
 *   C, D (16 x 8 fp32): c0, c1 = C[g][2q, 2q+1], c2, c3 = C[g+8][2q, 2q+1].
 * So the C fragments of two neighbouring 8-column tiles of a 16 x 16 block,
 * rounded to 16 bits pairwise, are exactly that block's A fragment.
 * tests/tools/gpu_emu_tc.cc emulates the instruction from this layout (a
 * warp exchanges its registers and each lane computes its four outputs) and
 * runs these kernels on the cpu against a float64 reference.
 *
 * Numerics are those of the WMMA kernels (dev/train_ops.h, docs/GPT.md): the
 * inputs hold rt values, so staging them in 16 bits is exact; P and dS are
 * rounded to 16 bits before their products; every sum is fp32; the row sum
 * l adds the unrounded p; each accumulator has one owner (a lane's
 * registers) and a fixed order of tiles and 16-wide steps, so the results
 * repeat bit for bit, with no atomics. The bits differ from the WMMA
 * kernels' (another order of the 16-wide steps' partial sums).
 *
 * Tiles: TB = 64 queries x 64 keys, 4 warps of 16 rows each (queries in the
 * forward and dQ, keys in dK/dV). Shared memory holds 16-bit tiles only:
 * row-major [64][HSM + 8] (Q, K, V, dO: a row of HSM + 8 elements is 4 words
 * past a multiple of 32 banks, so the 32 lanes' fragment words fall in 32
 * banks) and transposed [HSM][64 + 8] (V^T, K^T, Q^T, dO^T: B operands whose
 * k index runs along the tile's rows). HSM = 32 or 64 (the head width
 * rounded up; padded columns are zero and add nothing).
 *   k_mma_fwd (a block per (query tile, b*NH + h), longest rows first):
 *     Q fragments in registers; per key tile up to the diagonal: S = Q K^T
 *     (8 accumulators of 16 x 8), masked and scaled; the online softmax per
 *     row over the 4 lanes of a quad (running max m, per-lane partial sum
 *     l, summed over the quad at the end); O = O exp(m_old - m_new) + P V.
 *   k_mma_bwd_dkv (a block per key tile): K and V staged once;
 *     per query tile at or after it, ascending: S^T = K Q^T,
 *     P^T = exp(S^T scale - lse), dV += P^T dO, dP^T = V dO^T,
 *     dS^T = P^T (dP^T - D), dK += dS^T Q.
 *   k_mma_bwd_dq (a block per query tile): Q and dO staged once;
 *     per key tile up to the diagonal: S, P, dP = dO V^T, dS, dQ += dS K.
 * D_t = dout_t . out_t comes from k_flash_bwd_pre, as for the other kernels.
 * Shared memory (bytes, HSM 64): forward 27,648; dK/dV 55,808; dQ 46,080.
 * Registers (ptxas, sm_90, HSM 64): forward 128, dK/dV 214, dQ 163; no spills. */
#ifndef PLUMB_GPU_TRAIN_GPT_ATTN_MMA_CUH
#define PLUMB_GPU_TRAIN_GPT_ATTN_MMA_CUH
#if defined(PLUMB_CUDA) && !defined(PLUMB_HIP)
#define PLUMB_ATTN_MMA 1
#include <stdint.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include "dev/train_gpt_math.h"

namespace tcattn {

constexpr int MB = 64;   /* queries and keys per tile */
constexpr int MNT = 128; /* threads per block: 4 warps of 16 rows */
constexpr int LDT = MB + 8; /* transposed tiles [HSM][LDT] */
template <int HSM> struct mdims {
    static_assert(HSM == 32 || HSM == 64, "mma attention: head widths up to 64");
    static constexpr int LDE = HSM + 8; /* row-major tiles [MB][LDE] */
    static constexpr int KS = HSM / 16; /* 16-wide steps along the head */
    static constexpr int NO = HSM / 8;  /* 8-wide output tiles along the head */
    static constexpr size_t ROW_TILE = (size_t)MB * LDE * 2;
    static constexpr size_t T_TILE = (size_t)HSM * LDT * 2;
    static constexpr size_t FWD = 2 * ROW_TILE + T_TILE;
    static constexpr size_t DKV = 4 * ROW_TILE + 2 * T_TILE + 2 * MB * sizeof(float);
    static constexpr size_t DQ = 4 * ROW_TILE + T_TILE;
    static_assert(ROW_TILE % 16 == 0 && T_TILE % 16 == 0, "tile alignment");
};

#if !defined(PLUMB_MMA_EMU)
/* d = a b + d, one m16n8k16 product of the warp (layout above) */
template <typename E> __device__ inline void mma16816(float *d, const uint32_t *a, const uint32_t *b);
template <> __device__ inline void mma16816<__nv_bfloat16>(float *d, const uint32_t *a, const uint32_t *b)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
template <> __device__ inline void mma16816<__half>(float *d, const uint32_t *a, const uint32_t *b)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
/* two values rounded to E (nearest even), lo in the low half */
template <typename E> __device__ inline uint32_t mm_pack2(float lo, float hi);
template <> __device__ inline uint32_t mm_pack2<__nv_bfloat16>(float lo, float hi)
{
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t *>(&v);
}
template <> __device__ inline uint32_t mm_pack2<__half>(float lo, float hi)
{
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t *>(&v);
}
#endif

/* A fragment of the 16 x 16 block at A (16-bit, row-major, LD a row) */
template <int LD> __device__ inline void mm_frag_a(uint32_t *a, const uint16_t *A, int g, int q)
{
    const uint32_t *r0 = (const uint32_t *)(A + g * LD + 2 * q), *r1 = (const uint32_t *)(A + (g + 8) * LD + 2 * q);
    a[0] = r0[0];
    a[1] = r1[0];
    a[2] = r0[4];
    a[3] = r1[4];
}
/* B fragment (16 x 8, k x n) of a tile stored n-major: Bn[n][k], LD a row */
template <int LD> __device__ inline void mm_frag_b(uint32_t *b, const uint16_t *Bn, int g, int q)
{
    const uint32_t *r = (const uint32_t *)(Bn + g * LD + 2 * q);
    b[0] = r[0];
    b[1] = r[4];
}
/* A fragment of a 16 x 16 block from the C fragments of its two 8-column halves */
template <typename E> __device__ inline void mm_c_to_a(uint32_t *a, const float *c0, const float *c1)
{
    a[0] = mm_pack2<E>(c0[0], c0[1]);
    a[1] = mm_pack2<E>(c0[2], c0[3]);
    a[2] = mm_pack2<E>(c1[0], c1[1]);
    a[3] = mm_pack2<E>(c1[2], c1[3]);
}

/* acc[nt] (8 tiles of 8 columns) = the 16 rows at A (row-major, LD a row)
 * times rows 8 nt .. 8 nt + 7 of Bn (row-major, LD) transposed, over KS
 * 16-wide steps of the head: a 16 x 64 block of A Bn^T, each accumulator
 * summed over the steps in ascending order; tiles with skip(nt) stay 0 */
template <typename E, int LD, typename SKIP>
__device__ inline void mm_step_bt(float (&acc)[8][4], const uint32_t *a, const uint16_t *Bn, int g, int q, SKIP skip)
{
#pragma unroll
    for (int nt = 0; nt < 8; nt++) {
        if (skip(nt)) continue;
        uint32_t b[2];
        mm_frag_b<LD>(b, Bn + 8 * nt * LD, g, q);
        mma16816<E>(acc[nt], a, b);
    }
}
template <typename E, int KS, int LD, typename SKIP>
__device__ inline void mm_rows_bt(float (&acc)[8][4], const uint16_t *A, const uint16_t *Bn, int g, int q, SKIP skip)
{
#pragma unroll
    for (int nt = 0; nt < 8; nt++) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < KS; ks++) {
        uint32_t a[4];
        mm_frag_a<LD>(a, A + 16 * ks, g, q);
        mm_step_bt<E, LD>(acc, a, Bn + 16 * ks, g, q, skip);
    }
}
/* the same with A's fragments already in registers (the forward's Q) */
template <typename E, int KS, int LD, typename SKIP>
__device__ inline void mm_frags_bt(float (&acc)[8][4], const uint32_t (&a)[KS][4], const uint16_t *Bn, int g, int q,
                                   SKIP skip)
{
#pragma unroll
    for (int nt = 0; nt < 8; nt++) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < KS; ks++) mm_step_bt<E, LD>(acc, a[ks], Bn + 16 * ks, g, q, skip);
}
/* out[n] += the 16 x 64 block whose C fragments are c (rounded to E) times
 * the 64 x (8 NO) tile stored transposed in Bt [8 NO][LDT], in the order of
 * the 16-wide steps kk ascending; steps with skip(kk) (their c all zero) left
 * out */
template <typename E, int NO, typename SKIP>
__device__ inline void mm_c_bt(float (&out)[NO][4], const float (&c)[8][4], const uint16_t *Bt, int g, int q, SKIP skip)
{
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
        if (skip(kk)) continue;
        uint32_t a[4];
        mm_c_to_a<E>(a, c[2 * kk], c[2 * kk + 1]);
#pragma unroll
        for (int n = 0; n < NO; n++) {
            uint32_t b[2];
            mm_frag_b<LDT>(b, Bt + 8 * n * LDT + 16 * kk, g, q);
            mma16816<E>(out[n], a, b);
        }
    }
}

/* v rounded to rt into either storage: fp32 holding the rt value, or rt's
 * 16 bits (the gpt 16-bit activation pipeline) */
__device__ inline void mm_put(float *p, float v, int rt) { *p = gg_round(v, rt); }
__device__ inline void mm_put(uint16_t *p, float v, int rt) { *p = rt == DT_F16 ? f32_to_f16(v) : f32_to_bf16(v); }

/* this lane's accumulator rows (C fragments of NO 8-column tiles: the
 * warp's rows g and g + 8) times s0 and s1, rounded to rt, into rows r0 and
 * r1 of a tensor (fp32 or 16-bit storage), head columns below HS; a row only
 * where it exists (v0, v1) */
template <int NO, typename S>
__device__ inline void mm_store_rows(S *r0, S *r1, const float (&acc)[NO][4], float s0, float s1, bool v0, bool v1,
                                     int q, int HS, int rt)
{
#pragma unroll
    for (int n = 0; n < NO; n++)
#pragma unroll
        for (int u = 0; u < 2; u++) {
            const int d = 8 * n + 2 * q + u;
            if (d >= HS) continue;
            if (v0) mm_put(r0 + d, acc[n][u] * s0, rt);
            if (v1) mm_put(r1 + d, acc[n][2 + u] * s1, rt);
        }
}

/* A tensor's element as fp32, from either storage: fp32 (rt values), or the
 * 16-bit values of E themselves (the gpt 16-bit activation pipeline,
 * train_ops.h): exact either way, so the tiles below hold the same bits. */
template <typename E> __device__ inline float mm_ld(const float *p) { return *p; }
template <typename E> __device__ inline float mm_ld(const uint16_t *p);
template <> __device__ inline float mm_ld<__nv_bfloat16>(const uint16_t *p) { return bf16_to_f32(*p); }
template <> __device__ inline float mm_ld<__half>(const uint16_t *p) { return f16_to_f32(*p); }

/* rows [r0, r0 + MB) of a row-major tensor (row t at base + t stride, HS
 * columns; fp32 or E's 16 bits) into S [MB][LD] as E, two columns a thread;
 * 0 past T and HS */
template <typename E, int HSM, int LD, typename SRC>
__device__ inline void mm_stage(uint16_t *S, const SRC *base, size_t stride, int r0, int T, int HS)
{
    for (int idx = threadIdx.x; idx < MB * HSM / 2; idx += MNT) {
        const int rr = idx / (HSM / 2), i = 2 * (idx % (HSM / 2)), t = r0 + rr;
        const SRC *p = base + (size_t)t * stride + i;
        const float lo = t < T && i < HS ? mm_ld<E>(p) : 0.0f, hi = t < T && i + 1 < HS ? mm_ld<E>(p + 1) : 0.0f;
        *(uint32_t *)(S + rr * LD + i) = mm_pack2<E>(lo, hi);
    }
}
/* the same rows transposed: St [HSM][LDT], St[i][rr]; a thread takes two
 * consecutive rows of one column (consecutive threads read consecutive
 * columns of global memory) and stores them as one word */
template <typename E, int HSM, typename SRC>
__device__ inline void mm_stage_t(uint16_t *St, const SRC *base, size_t stride, int r0, int T, int HS)
{
    for (int idx = threadIdx.x; idx < MB / 2 * HSM; idx += MNT) {
        const int i = idx % HSM, rr = 2 * (idx / HSM), t = r0 + rr;
        const float lo = t < T && i < HS ? mm_ld<E>(base + (size_t)t * stride + i) : 0.0f;
        const float hi = t + 1 < T && i < HS ? mm_ld<E>(base + (size_t)(t + 1) * stride + i) : 0.0f;
        *(uint32_t *)(St + i * LDT + rr) = mm_pack2<E>(lo, hi);
    }
}

/* The softmax runs in base 2: x = s scale log2(e), p = 2^(x - m) with the
 * running max m and lse kept as m + log2 l, stored as (m + log2 l) ln 2
 * (exp2f is one SFU instruction where expf adds a range reduction; the
 * plugin is built with --fmad=false for the golden kernels, so the scaling
 * of a score is an explicit fmaf where it can be). Each
 * tile either may hold masked elements for a warp (MASK: key j > query t, or
 * t >= T: p = 0) or holds none (every key at or before the warp's first row,
 * every row < T: most tiles of a long sequence), which skips the compares. */
constexpr float LOG2E = 1.4426950408889634f, LN2 = 0.6931471805599453f;

/* forward: the scores s of a tile (C fragments of 8 key tiles: this lane's
 * rows t0, t1, keys k0 + 8 nt + 2 q + u) become p; m, l updated; a0, a1 the
 * factors 2^(m_old - m_new) that rescale the output rows */
template <bool MASK>
__device__ inline void mm_softmax_rows(float (&s)[8][4], int k0, int q, int t0, int t1, int T, float sl2, float &m0,
                                       float &m1, float &l0, float &l1, float &a0, float &a1)
{
    float x0 = -INFINITY, x1 = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < 8; nt++)
#pragma unroll
        for (int u = 0; u < 2; u++) {
            float v0 = s[nt][u] * sl2, v1 = s[nt][2 + u] * sl2;
            if (MASK) {
                const int j = k0 + 8 * nt + 2 * q + u;
                if (!(t0 < T && j <= t0)) v0 = -INFINITY;
                if (!(t1 < T && j <= t1)) v1 = -INFINITY;
            }
            s[nt][u] = v0;
            s[nt][2 + u] = v1;
            x0 = fmaxf(x0, v0);
            x1 = fmaxf(x1, v1);
        }
    x0 = fmaxf(x0, __shfl_xor_sync(0xffffffffu, x0, 1));
    x0 = fmaxf(x0, __shfl_xor_sync(0xffffffffu, x0, 2));
    x1 = fmaxf(x1, __shfl_xor_sync(0xffffffffu, x1, 1));
    x1 = fmaxf(x1, __shfl_xor_sync(0xffffffffu, x1, 2));
    const float n0 = fmaxf(m0, x0), n1 = fmaxf(m1, x1);
    a0 = m0 == -INFINITY ? 0.0f : exp2f(m0 - n0);
    a1 = m1 == -INFINITY ? 0.0f : exp2f(m1 - n1);
    float p0 = 0.0f, p1 = 0.0f;
#pragma unroll
    for (int nt = 0; nt < 8; nt++)
#pragma unroll
        for (int u = 0; u < 2; u++) {
            const float e0 = MASK && s[nt][u] == -INFINITY ? 0.0f : exp2f(s[nt][u] - n0);
            const float e1 = MASK && s[nt][2 + u] == -INFINITY ? 0.0f : exp2f(s[nt][2 + u] - n1);
            s[nt][u] = e0;
            s[nt][2 + u] = e1;
            p0 += e0;
            p1 += e1;
        }
    l0 = l0 * a0 + p0;
    l1 = l1 * a1 + p1;
    m0 = n0;
    m1 = n1;
}

/* dK/dV: P^T = 2^(S^T scale log2(e) - lse log2(e)) for this lane's keys j0,
 * j1 and the queries q0 + c (Ls holds lse log2(e) per query); N tiles of 8
 * queries (8 here, 4 in gpu/train_gpt_attn_mma2.cuh's 32-query halves) */
template <bool MASK, int N>
__device__ inline void mm_p_t(float (&st)[N][4], const float *Ls, int q0, int q, int j0, int j1, int T, float sl2)
{
#pragma unroll
    for (int nt = 0; nt < N; nt++)
#pragma unroll
        for (int u = 0; u < 2; u++) {
            const int c = 8 * nt + 2 * q + u, t = q0 + c;
            const float L = Ls[c];
            st[nt][u] = !MASK || (t < T && j0 <= t) ? exp2f(fmaf(st[nt][u], sl2, -L)) : 0.0f;
            st[nt][2 + u] = !MASK || (t < T && j1 <= t) ? exp2f(fmaf(st[nt][2 + u], sl2, -L)) : 0.0f;
        }
}
/* dK/dV: dS^T = P^T (dP^T - D) in place of dP^T (Ds holds D per query); N as mm_p_t */
template <bool MASK, int N>
__device__ inline void mm_ds_t(float (&dp)[N][4], const float (&st)[N][4], const float *Ds, int q0, int q, int j0, int j1,
                               int T)
{
#pragma unroll
    for (int nt = 0; nt < N; nt++)
#pragma unroll
        for (int u = 0; u < 2; u++) {
            const int c = 8 * nt + 2 * q + u, t = q0 + c;
            const float Dc = Ds[c];
            dp[nt][u] = !MASK || (t < T && j0 <= t) ? st[nt][u] * (dp[nt][u] - Dc) : 0.0f;
            dp[nt][2 + u] = !MASK || (t < T && j1 <= t) ? st[nt][2 + u] * (dp[nt][2 + u] - Dc) : 0.0f;
        }
}
/* dQ: dS = P (dP - D) in place of dP, P = 2^(S scale log2(e) - L) for this
 * lane's rows t0, t1 (L0, L1: lse log2(e)) and keys k0 + 8 nt + 2 q + u; N
 * tiles of 8 keys (8 here, 4 in gpu/train_gpt_attn_mma2.cuh) */
template <bool MASK, int N>
__device__ inline void mm_ds_rows(float (&dp)[N][4], const float (&s)[N][4], int k0, int q, int t0, int t1, int T,
                                  float sl2, float L0, float L1, float D0, float D1)
{
#pragma unroll
    for (int nt = 0; nt < N; nt++)
#pragma unroll
        for (int u = 0; u < 2; u++) {
            const int j = k0 + 8 * nt + 2 * q + u;
            const int v0 = !MASK || (t0 < T && j <= t0), v1 = !MASK || (t1 < T && j <= t1);
            dp[nt][u] = v0 ? exp2f(fmaf(s[nt][u], sl2, -L0)) * (dp[nt][u] - D0) : 0.0f;
            dp[nt][2 + u] = v1 ? exp2f(fmaf(s[nt][2 + u], sl2, -L1)) * (dp[nt][2 + u] - D1) : 0.0f;
        }
}

/* ------------------------------------------------------------ forward */

/* the forward's accumulators rescaled by the online softmax's factors a0
 * (row g) and a1 (row g + 8) after a new running maximum */
template <int NO> __device__ inline void mm_rescale(float (&o)[NO][4], float a0, float a1)
{
#pragma unroll
    for (int n = 0; n < NO; n++) {
        o[n][0] *= a0;
        o[n][1] *= a0;
        o[n][2] *= a1;
        o[n][3] *= a1;
    }
}

/* The forward's end for this lane's rows t0 and t1 = t0 + 8 of head h of
 * sequence b: the row sums l0, l1 over the quad (the same bits in each of
 * its lanes), O / l stored into out [B, T, C] (fp32 or 16-bit storage), and
 * lse = (m + log2 l) ln 2 into lse [B NH, T] by the quad's lane 0 */
template <int NO, typename S>
__device__ inline void mm_fwd_store(const float (&o)[NO][4], float m0, float m1, float l0, float l1, S *out, float *lse,
                                    int b, int bh, int h, int t0, int t1, int T, int C, int q, int HS, int rt)
{
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    const float i0 = 1.0f / l0, i1 = 1.0f / l1;
    S *r0 = out + ((size_t)b * T + t0) * C + (size_t)h * HS;
    mm_store_rows<NO>(r0, r0 + (size_t)8 * C, o, i0, i1, t0 < T, t1 < T, q, HS, rt);
    if (q == 0) {
        if (t0 < T) lse[(size_t)bh * T + t0] = (m0 + log2f(l0)) * LN2;
        if (t1 < T) lse[(size_t)bh * T + t1] = (m1 + log2f(l1)) * LN2;
    }
}

template <typename E, int HSM, typename S = float>
__global__ void __launch_bounds__(MNT) k_mma_fwd(const S *qkv, S *out, float *lse, int T, int NH, int HS, float scale,
                                                 int rt)
{
    typedef mdims<HSM> DM;
    constexpr int LDE = DM::LDE, KS = DM::KS, NO = DM::NO;
    extern __shared__ __align__(128) unsigned char smem[];
    uint16_t *Qs = (uint16_t *)smem, *Ks = (uint16_t *)(smem + DM::ROW_TILE),
             *Vt = (uint16_t *)(smem + 2 * DM::ROW_TILE);

    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, q = lane & 3;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH, C = NH * HS;
    const size_t C3 = 3 * (size_t)C;
    const S *base = qkv + (size_t)b * T * C3 + (size_t)h * HS;
    const int q0 = (int)(gridDim.x - 1 - blockIdx.x) * MB; /* longest rows first */
    const int wr = 16 * w, wlast = q0 + wr + 15;           /* the warp's rows, its last query */
    const int t0 = q0 + wr + g, t1 = t0 + 8;               /* this lane's two rows */
    mm_stage<E, HSM, LDE>(Qs, base, C3, q0, T, HS);
    __syncthreads();
    uint32_t qa[KS][4]; /* held in registers: reloading them per tile spilled 12 bytes (ptxas, sm_90) */
#pragma unroll
    for (int ks = 0; ks < KS; ks++) mm_frag_a<LDE>(qa[ks], Qs + wr * LDE + 16 * ks, g, q);
    float o[NO][4];
#pragma unroll
    for (int n = 0; n < NO; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f; /* m in log2 units */
    const float sl2 = scale * LOG2E;
    const int qlast = q0 + MB - 1 < T - 1 ? q0 + MB - 1 : T - 1;
    for (int k0 = 0; k0 <= qlast; k0 += MB) {
        __syncthreads(); /* the previous K, V^T read by every warp (Q's fragments loaded: first tile) */
        mm_stage<E, HSM, LDE>(Ks, base + C, C3, k0, T, HS);
        mm_stage_t<E, HSM>(Vt, base + 2 * C, C3, k0, T, HS);
        __syncthreads();
        /* S = Q K^T: 8 tiles of 8 keys; tiles wholly past the warp's rows stay 0 (masked below) */
        float s[8][4];
        mm_frags_bt<E, KS, LDE>(s, qa, Ks, g, q, [&](int nt) { return k0 + 8 * nt > wlast; });
        float a0, a1;
        if (k0 + MB - 1 <= q0 + wr && q0 + wr + 15 < T)
            mm_softmax_rows<false>(s, k0, q, t0, t1, T, sl2, m0, m1, l0, l1, a0, a1);
        else
            mm_softmax_rows<true>(s, k0, q, t0, t1, T, sl2, m0, m1, l0, l1, a0, a1);
        mm_rescale<NO>(o, a0, a1);
        /* O += P V over the 16-key steps that hold a key at or before the warp's last row */
        mm_c_bt<E, NO>(o, s, Vt, g, q, [&](int kk) { return k0 + 16 * kk > wlast; });
    }
    mm_fwd_store<NO>(o, m0, m1, l0, l1, out, lse, b, bh, h, t0, t1, T, C, q, HS, rt);
}

/* ------------------------------------------------------------ backward */

/* dK, dV of one key tile over the query tiles at or after it, ascending */
template <typename E, int HSM, typename S = float>
__global__ void __launch_bounds__(MNT) k_mma_bwd_dkv(const S *qkv, const S *dout, const float *lse, const float *D,
                                                     S *dqkv, int T, int NH, int HS, float scale, int rt)
{
    typedef mdims<HSM> DM;
    constexpr int LDE = DM::LDE, KS = DM::KS, NO = DM::NO;
    extern __shared__ __align__(128) unsigned char smem[];
    uint16_t *Ks = (uint16_t *)smem, *Vs = (uint16_t *)(smem + DM::ROW_TILE),
             *Qs = (uint16_t *)(smem + 2 * DM::ROW_TILE), *dOs = (uint16_t *)(smem + 3 * DM::ROW_TILE),
             *Qt = (uint16_t *)(smem + 4 * DM::ROW_TILE), *dOt = (uint16_t *)(smem + 4 * DM::ROW_TILE + DM::T_TILE);
    float *Ls = (float *)(smem + 4 * DM::ROW_TILE + 2 * DM::T_TILE), *Ds = Ls + MB;

    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, q = lane & 3;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH, C = NH * HS;
    const size_t C3 = 3 * (size_t)C;
    const S *base = qkv + (size_t)b * T * C3 + (size_t)h * HS;
    const S *dob = dout + (size_t)b * T * C + (size_t)h * HS;
    const int k0 = (int)blockIdx.x * MB;           /* tile 0 has the most queries: first */
    const int wr = 16 * w, wfirst = k0 + wr;       /* the warp's keys, its first */
    const int j0 = wfirst + g, j1 = j0 + 8;        /* this lane's two keys */
    const float sl2 = scale * LOG2E;
    /* K and V stay in shared memory (their fragments are read per tile, not
     * held: 32 registers fewer, which keeps this kernel off the spill line) */
    mm_stage<E, HSM, LDE>(Ks, base + C, C3, k0, T, HS);
    mm_stage<E, HSM, LDE>(Vs, base + 2 * C, C3, k0, T, HS);
    float dk[NO][4], dv[NO][4];
#pragma unroll
    for (int n = 0; n < NO; n++) dk[n][0] = dk[n][1] = dk[n][2] = dk[n][3] = dv[n][0] = dv[n][1] = dv[n][2] = dv[n][3] = 0.0f;
    for (int q0 = k0; q0 < T; q0 += MB) {
        __syncthreads(); /* the previous tile's Q, dO (both layouts), lse, D read */
        mm_stage<E, HSM, LDE>(Qs, base, C3, q0, T, HS);
        mm_stage<E, HSM, LDE>(dOs, dob, (size_t)C, q0, T, HS);
        mm_stage_t<E, HSM>(Qt, base, C3, q0, T, HS);
        mm_stage_t<E, HSM>(dOt, dob, (size_t)C, q0, T, HS);
        for (int r = threadIdx.x; r < MB; r += MNT) {
            Ls[r] = q0 + r < T ? lse[(size_t)bh * T + q0 + r] * LOG2E : 0.0f;
            Ds[r] = q0 + r < T ? D[(size_t)bh * T + q0 + r] : 0.0f;
        }
        __syncthreads();
        /* S^T = K Q^T: 8 tiles of 8 queries; tiles wholly before the warp's keys stay 0 */
        auto before = [&](int nt) { return q0 + 8 * nt + 7 < wfirst; };
        auto before16 = [&](int kk) { return q0 + 16 * kk + 15 < wfirst; };
        float st[8][4];
        mm_rows_bt<E, KS, LDE>(st, Ks + wr * LDE, Qs, g, q, before);
        /* P^T where key j <= query t < T, else 0; a tile of queries all at or
         * after the warp's last key, all < T, needs no mask */
        const bool full = q0 >= wfirst + 15 && q0 + MB - 1 < T;
        if (full) mm_p_t<false>(st, Ls, q0, q, j0, j1, T, sl2);
        else mm_p_t<true>(st, Ls, q0, q, j0, j1, T, sl2);
        /* dV += P^T dO over the 16-query steps that reach the warp's keys */
        mm_c_bt<E, NO>(dv, st, dOt, g, q, before16);
        /* dP^T = V dO^T, then dS^T = P^T (dP^T - D) in place */
        float dp[8][4];
        mm_rows_bt<E, KS, LDE>(dp, Vs + wr * LDE, dOs, g, q, before);
        if (full) mm_ds_t<false>(dp, st, Ds, q0, q, j0, j1, T);
        else mm_ds_t<true>(dp, st, Ds, q0, q, j0, j1, T);
        /* dK += dS^T Q */
        mm_c_bt<E, NO>(dk, dp, Qt, g, q, before16);
    }
    S *r0 = dqkv + ((size_t)b * T + j0) * C3 + C + (size_t)h * HS, *r1 = r0 + 8 * C3;
    mm_store_rows<NO>(r0, r1, dk, scale, scale, j0 < T, j1 < T, q, HS, rt);
    mm_store_rows<NO>(r0 + C, r1 + C, dv, 1.0f, 1.0f, j0 < T, j1 < T, q, HS, rt);
}

/* dQ of one query tile over the key tiles up to the diagonal, ascending */
template <typename E, int HSM, typename S = float>
__global__ void __launch_bounds__(MNT) k_mma_bwd_dq(const S *qkv, const S *dout, const float *lse, const float *D,
                                                    S *dqkv, int T, int NH, int HS, float scale, int rt)
{
    typedef mdims<HSM> DM;
    constexpr int LDE = DM::LDE, KS = DM::KS, NO = DM::NO;
    extern __shared__ __align__(128) unsigned char smem[];
    uint16_t *Qs = (uint16_t *)smem, *dOs = (uint16_t *)(smem + DM::ROW_TILE),
             *Ks = (uint16_t *)(smem + 2 * DM::ROW_TILE), *Vs = (uint16_t *)(smem + 3 * DM::ROW_TILE),
             *Kt = (uint16_t *)(smem + 4 * DM::ROW_TILE);

    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, q = lane & 3;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH, C = NH * HS;
    const size_t C3 = 3 * (size_t)C;
    const S *base = qkv + (size_t)b * T * C3 + (size_t)h * HS;
    const int q0 = (int)(gridDim.x - 1 - blockIdx.x) * MB; /* longest rows first */
    const int wr = 16 * w, wlast = q0 + wr + 15;
    const int t0 = q0 + wr + g, t1 = t0 + 8;
    mm_stage<E, HSM, LDE>(Qs, base, C3, q0, T, HS);
    mm_stage<E, HSM, LDE>(dOs, dout + (size_t)b * T * C + (size_t)h * HS, (size_t)C, q0, T, HS);
    const float sl2 = scale * LOG2E; /* lse in log2 units below */
    const float L0 = t0 < T ? lse[(size_t)bh * T + t0] * LOG2E : 0.0f, L1 = t1 < T ? lse[(size_t)bh * T + t1] * LOG2E : 0.0f;
    const float D0 = t0 < T ? D[(size_t)bh * T + t0] : 0.0f, D1 = t1 < T ? D[(size_t)bh * T + t1] : 0.0f;
    float dq[NO][4];
#pragma unroll
    for (int n = 0; n < NO; n++) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;
    const int qlast = q0 + MB - 1 < T - 1 ? q0 + MB - 1 : T - 1;
    for (int k0 = 0; k0 <= qlast; k0 += MB) {
        __syncthreads(); /* the previous K, V, K^T read by every warp (Q, dO staged: first tile) */
        mm_stage<E, HSM, LDE>(Ks, base + C, C3, k0, T, HS);
        mm_stage<E, HSM, LDE>(Vs, base + 2 * C, C3, k0, T, HS);
        mm_stage_t<E, HSM>(Kt, base + C, C3, k0, T, HS);
        __syncthreads();
        /* S = Q K^T and dP = dO V^T: 8 tiles of 8 keys; tiles wholly past the warp's rows stay 0 */
        auto past = [&](int nt) { return k0 + 8 * nt > wlast; };
        float s[8][4], dp[8][4];
        mm_rows_bt<E, KS, LDE>(s, Qs + wr * LDE, Ks, g, q, past);
        mm_rows_bt<E, KS, LDE>(dp, dOs + wr * LDE, Vs, g, q, past);
        /* P and dS = P (dP - D) where key j <= query t < T, else 0 */
        if (k0 + MB - 1 <= q0 + wr && q0 + wr + 15 < T) mm_ds_rows<false>(dp, s, k0, q, t0, t1, T, sl2, L0, L1, D0, D1);
        else mm_ds_rows<true>(dp, s, k0, q, t0, t1, T, sl2, L0, L1, D0, D1);
        /* dQ += dS K */
        mm_c_bt<E, NO>(dq, dp, Kt, g, q, [&](int kk) { return k0 + 16 * kk > wlast; });
    }
    S *r0 = dqkv + ((size_t)b * T + t0) * C3 + (size_t)h * HS;
    mm_store_rows<NO>(r0, r0 + 8 * C3, dq, scale, scale, t0 < T, t1 < T, q, HS, rt);
}

} /* namespace tcattn */
#endif /* PLUMB_CUDA */
#endif
