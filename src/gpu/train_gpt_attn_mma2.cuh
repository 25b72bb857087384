/* Pipelined mma.sync flash attention for 16-bit training on CUDA, head widths
 * up to 64: train_gpt_attn.cu with PLUMB_GPT_ATTN=mma2 (docs/GPT.md). The
 * same algorithm, numerics and fragment layout as gpu/train_gpt_attn_mma.cuh
 * (read its header first; its mma16816, mm_pack2, mm_c_to_a, the softmax,
 * P and dS helpers and mm_store_rows are used here unchanged); what differs
 * is how the operands reach the tensor cores:
 *
 * 1. 16-bit head-major copies. q, k, v of qkv [B, T, 3C] (and dout [B, T, C]
 *    in the backward) are fp32 buffers of rt values; k_mma2_to16 converts
 *    them in one pass (exact: they are rt values) into E rows
 *    [B * NH][Tp][HSM] per part, Tp = T rounded up to 128 and columns past
 *    HS zero, in workspace slot 1. Every tile row is then HSM 16-bit values,
 *    16-byte aligned and zero past T and HS, so the kernels load tiles with
 *    cp.async.cg 16-byte copies and no predicates. The pass reads 4 and
 *    writes 2 bytes per value once (gpt2-124m B 16 T 1024: 151 MB read,
 *    75 MB written per forward, 201 and 100 per backward, about 0.06 and
 *    0.08 ms at the H200's bandwidth), where the mma kernels read fp32 and
 *    convert in every block's staging loop, once per tile that uses it.
 *    With 16-bit activations the copy is only a re-layout: where T is a
 *    multiple of 128, HS = HSM and the rows are 16-byte aligned, the
 *    kernels read qkv and dout in place instead (struct m2rows says where
 *    a part's rows are; train_gpt_attn.cu's mma2_fits): the same
 *    values, so the same bits, and no copy pass (gpt2-124m: the copies
 *    took 1.65 ms of a 49 ms step on an H100, 2026-12-05).
 * 2. cp.async double buffering. The streamed tiles (K and V in the forward
 *    and dQ, Q, dO, lse and D in dK/dV) have two buffers; at each tile the
 *    block waits for its own copies (cp.async.wait_group 0), meets at one
 *    barrier (the tile is visible to every warp and every warp is done with
 *    the other buffer), issues the next tile's copies into the other buffer
 *    and computes: the next tile's loads overlap this tile's products, with
 *    one barrier per tile.
 * 3. ldmatrix. Every tile is stored once, row-major [rows][HSM + 8] (a row
 *    is 9 or 5 16-byte units, odd, so the 8 row addresses of each 8x8
 *    matrix fall in 8 distinct 16-byte bank groups: conflict-free); the
 *    fragments come from ldmatrix.x4 (four 8x8 matrices: an A fragment, or
 *    the B fragments of two 8-column tiles) and ldmatrix.x4.trans where the
 *    product's k index runs along the tile's rows (V in P V, dO in P^T dO,
 *    Q in dS^T Q, K in dS K). No transposed tiles, no element-wise
 *    transposition. A lane's ldmatrix row address: lane l gives row l % 16,
 *    columns 8 (l / 16) of a 16 x 16 block, so matrix i = l / 8 is
 *    (rows 8 (i % 2).., columns 8 (i / 2)..), which is the A fragment's
 *    register order a0..a3; as B of a tile stored n-major (K for Q K^T) the
 *    registers are (b0, b1) = (r0, r2) for the first 8 rows (n) and
 *    (r1, r3) for the next; transposed (V for P V, k along the rows) they
 *    are (r0, r1) for the first 8 columns (n) and (r2, r3) for the next.
 * 4. 128-query tiles of 8 warps in the forward and dQ (K and V loaded once
 *    per 128 queries, not 64); dK/dV keeps 64-key tiles of 4 warps (its dK
 *    and dV accumulators hold it above 128 registers a thread, the cap for
 *    16 warps a SM).
 * 5. dK/dV and dQ take each 64-row tile in two halves of 32 (S^T, dP^T or
 *    S, dP of 16 x 32 a warp: 64 fewer registers live than 16 x 64), so
 *    dK/dV fits 3 blocks a SM (162 registers, against 2 at 194) and dQ 8
 *    warps at 128 or fewer. An accumulator still takes the tile's 16-wide
 *    steps in ascending order. The forward cannot split its tiles so: the
 *    online softmax's running max would see other tile boundaries.
 *
 * Numerics: those of gpu/train_gpt_attn_mma.cuh (P and dS rounded to 16 bits
 * before their products, every sum fp32, each accumulator one owner with a
 * fixed order of tiles and 16-wide steps, no atomics: bit for bit
 * repeatable), and its bits: every accumulator sums the same products in
 * the same order (S over the head's 16-wide steps, O, dV, dK, dQ over
 * 64-key or 64-query tiles ascending and their 16-wide steps ascending, the
 * same steps skipped; the 16-bit copies hold the values mm_stage
 * converts). Where this kernel skips a warp's whole tile or a 16-key pair
 * of S tiles that mma computes, every element is masked: the same -inf,
 * p = 0, rescale factor 1. tests/tools/gpu_emu_tc.cc and
 * tests/test_gpu_attn.c check the bits against the mma kernels'.
 *
 * Kernels (HSM = 32 or 64, the head width rounded up; E bf16 or fp16):
 *   k_mma2_fwd<E, HSM, 8> (a block per (128 queries, b NH + h), longest rows
 *     first): Q tile once, its fragments held; per 64-key tile up to the
 *     diagonal: S = Q K^T, the online softmax, O = O a + P V. A warp whose
 *     16 rows are all before the tile's first key, or all >= T, skips the
 *     tile's products (it still meets the barrier and issues its copies).
 *   k_mma2_bwd_dkv<E, HSM> (a block per 64 keys, 4 warps of 16 keys): K, V
 *     once; per 64-query tile at or after it, ascending, per half of 32
 *     queries: S^T = K Q^T, P^T, dV += P^T dO, dP^T = V dO^T, dS^T,
 *     dK += dS^T Q.
 *   k_mma2_bwd_dq<E, HSM, 8> (a block per 128 queries, longest rows
 *     first): Q, dO once; per 64-key tile up to the diagonal, per half of 32
 *     keys: S, dP = dO V^T, dS, dQ += dS K.
 * Shared memory (bytes; LDE = HSM + 8; a 64-row tile 64 LDE 2 = 9,216 at
 * HSM 64, 5,120 at 32): forward Q of 128 rows + 2 x (K, V) = 55,296 (30,720
 * at HSM 32); dK/dV K, V + 2 x (Q, dO) + 2 x (lse, D) = 56,320 (31,744);
 * dQ Q, dO of 128 rows + 2 x (K, V) = 73,728 (40,960): past 48 KiB at
 * HSM 64, so tile_launch raises the kernel's limit.
 * Registers (ptxas -v, sm_90, CUDA 13, the Makefile's NVCC_FLAGS), no
 * spills, bf16 and fp16 alike: HSM 64: forward 127, dK/dV 162, dQ 120
 * (their launch bounds ask for 2, 3 and 2 blocks a SM: 16, 12 and 16
 * warps); HSM 32: forward 100, dK/dV 112, dQ 88; k_mma2_to16 28. (The mma
 * kernels at HSM 64: 128, 214, 163: 4, 2 and 3 blocks of 4 warps.) dQ with
 * M2QW = 4 (64-query tiles, 4 blocks a SM) takes 128 registers.
 *
 * tests/tools/gpu_emu_tc.cc runs these kernels on the cpu: cp.async as a
 * copy deferred to the wait that covers its group (a read before the wait
 * sees the NaN poison), ldmatrix from the PTX ISA's distribution of rows to
 * lanes, mma.sync from the fragment layout. */
#ifndef PLUMB_GPU_TRAIN_GPT_ATTN_MMA2_CUH
#define PLUMB_GPU_TRAIN_GPT_ATTN_MMA2_CUH
#if defined(PLUMB_CUDA) && !defined(PLUMB_HIP)
#include "gpu/train_gpt_attn_mma.cuh"
#define PLUMB_ATTN_MMA2 1

namespace tcattn {

constexpr int M2T = 64;   /* keys per K/V tile; queries per Q/dO tile (dK/dV); keys per dK/dV block */
/* the forward's and dQ's warps a block, settable at build time for an A/B
 * (scripts/gpu-prep.sh PREP_VARIANT; 4 or 8: the launch bounds keep 16 warps
 * a SM); a query row's arithmetic does not depend on them */
#ifndef PLUMB_M2FW
#define PLUMB_M2FW 8
#endif
#ifndef PLUMB_M2QW
#define PLUMB_M2QW 8
#endif
constexpr int M2FW = PLUMB_M2FW; /* forward: warps a block, 16 query rows each (128-query tiles) */
constexpr int M2QW = PLUMB_M2QW; /* dQ: warps a block, 16 query rows each (128-query tiles) */
static_assert((M2FW == 4 || M2FW == 8) && (M2QW == 4 || M2QW == 8), "mma2 attention: 4 or 8 warps a block");
constexpr int M2KW = 4;   /* dK/dV: warps a block, 16 keys each */
constexpr int M2TP = 128; /* the 16-bit copies' rows padded to a multiple of the largest tile */
template <int HSM> struct m2dims {
    static_assert(HSM == 32 || HSM == 64, "mma2 attention: head widths up to 64");
    static constexpr int LDE = HSM + 8; /* tiles [rows][LDE] */
    static constexpr int KS = HSM / 16; /* 16-wide steps along the head */
    static constexpr int NO = HSM / 8;  /* 8-wide output tiles along the head */
    static constexpr size_t TILE = (size_t)M2T * LDE * 2; /* a 64-row tile */
    static constexpr size_t FWD = (size_t)16 * M2FW * LDE * 2 + 4 * TILE;
    static constexpr size_t DKV = 6 * TILE + 4 * M2T * sizeof(float);
    static constexpr size_t DQ = 2 * (size_t)16 * M2QW * LDE * 2 + 4 * TILE;
    static_assert(TILE % 16 == 0 && (16 * LDE * 2) % 16 == 0, "16-byte cp.async destinations");
};

#if !defined(PLUMB_MMA_EMU)
__device__ inline uint32_t m2_saddr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
/* 16 bytes global -> shared, cached in L2 only (a block reads each tile once, into shared memory) */
__device__ inline void cp_async16(void *s, const void *g)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(m2_saddr(s)), "l"(__cvta_generic_to_global(g))
                 : "memory");
}
/* 4 bytes (lse, D: one value a thread) */
__device__ inline void cp_async4(void *s, const void *g)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(m2_saddr(s)), "l"(__cvta_generic_to_global(g))
                 : "memory");
}
__device__ inline void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
/* this thread's copies, all but the N most recent groups, complete and visible to it */
template <int N> __device__ inline void cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
/* four 8x8 matrices of 16-bit values; lane l gives the address of row l % 8 of matrix l / 8 */
__device__ inline void ldsm4(uint32_t (&r)[4], const uint16_t *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(m2_saddr(p))
                 : "memory");
}
/* the same, each matrix transposed: lane 4g + q holds rows 2q, 2q + 1 of column g */
__device__ inline void ldsm4t(uint32_t (&r)[4], const uint16_t *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(m2_saddr(p))
                 : "memory");
}
#endif

/* Where a part's 16-bit rows are (q, k, v of qkv, or dout): row t of head
 * h of image b at p + b bs + h hs + t ld, HSM values from there, 16-byte
 * aligned. k_mma2_to16's copies: ld HSM, hs Tp HSM, bs NH Tp HSM. The 16-bit
 * activations themselves (direct, no copy; train_gpt_attn.cu's
 * mma2_fits says when): ld 3C (qkv) or C (dout), hs HS, bs T ld */
struct m2rows {
    const uint16_t *p;
    size_t ld, bs, hs;
};
__host__ __device__ inline const uint16_t *m2_head(const m2rows &r, int b, int h)
{
    return r.p + (size_t)b * r.bs + (size_t)h * r.hs;
}

/* R rows of a part (row r at g + r ld) into S [R][HSM + 8] by 16-byte
 * cp.async, NTH threads (the caller commits) */
template <int R, int HSM, int NTH> __device__ inline void m2_load(uint16_t *S, const uint16_t *g, size_t ld)
{
    constexpr int CH = HSM / 8, LDE = HSM + 8;
    static_assert(R * CH % NTH == 0, "whole copies a thread");
#pragma unroll
    for (int k = 0; k < R * CH / NTH; k++) {
        const int idx = (int)threadIdx.x + k * NTH, r = idx / CH, c = idx % CH;
        cp_async16(S + r * LDE + 8 * c, g + (size_t)r * ld + 8 * c);
    }
}

/* acc[nt] (N tiles of 8 columns, N = 8 or 4) = A (16 x 16 KS, its fragments
 * a[ks]) times rows 8 nt .. 8 nt + 7 of Bn ([8 N][LDE], row-major)
 * transposed: a 16 x 8N block of A Bn^T, each accumulator summed over the
 * 16-wide steps ks in ascending order; tile pairs (2p, 2p + 1: Bn rows
 * 16 p .. 16 p + 15) with skip(p) stay 0. lo: the lane's ldmatrix offset,
 * (l % 16) LDE + 8 (l / 16) */
template <typename E, int KS, int LDE, int N, typename SKIP>
__device__ inline void m2_frags_bt(float (&acc)[N][4], const uint32_t (&a)[KS][4], const uint16_t *Bn, int lo, SKIP skip)
{
#pragma unroll
    for (int nt = 0; nt < N; nt++) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < KS; ks++)
#pragma unroll
        for (int p = 0; p < N / 2; p++) {
            if (skip(p)) continue;
            uint32_t r[4];
            ldsm4(r, Bn + 16 * p * LDE + 16 * ks + lo);
            const uint32_t b0[2] = {r[0], r[2]}, b1[2] = {r[1], r[3]};
            mma16816<E>(acc[2 * p], a[ks], b0);
            mma16816<E>(acc[2 * p + 1], a[ks], b1);
        }
}
/* the same with A the 16 rows at A ([16][LDE] of a tile) */
template <typename E, int KS, int LDE, int N, typename SKIP>
__device__ inline void m2_rows_bt(float (&acc)[N][4], const uint16_t *A, const uint16_t *Bn, int lo, SKIP skip)
{
    uint32_t a[KS][4];
#pragma unroll
    for (int ks = 0; ks < KS; ks++) ldsm4(a[ks], A + 16 * ks + lo);
    m2_frags_bt<E, KS, LDE>(acc, a, Bn, lo, skip);
}
/* out[n] += the 16 x 8N block whose C fragments are c (rounded to E: P or
 * dS) times the 8N x (8 NO) tile B ([8 N][LDE], row-major: the product's k
 * along its rows, so its B fragments come transposed), in the order of the
 * 16-wide steps kk ascending; steps with skip(kk) (their c all zero) left out */
template <typename E, int NO, int LDE, int N, typename SKIP>
__device__ inline void m2_c_b(float (&out)[NO][4], const float (&c)[N][4], const uint16_t *B, int lo, SKIP skip)
{
#pragma unroll
    for (int kk = 0; kk < N / 2; kk++) {
        if (skip(kk)) continue;
        uint32_t a[4];
        mm_c_to_a<E>(a, c[2 * kk], c[2 * kk + 1]);
#pragma unroll
        for (int p = 0; p < NO / 2; p++) {
            uint32_t r[4];
            ldsm4t(r, B + 16 * kk * LDE + 16 * p + lo);
            const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
            mma16816<E>(out[2 * p], a, b0);
            mma16816<E>(out[2 * p + 1], a, b1);
        }
    }
}

/* dK/dV on 32 queries and dQ on 32 keys: mm_p_t, mm_ds_t and mm_ds_rows of
 * gpu/train_gpt_attn_mma.cuh over N = 4 tiles of 8 (the same expressions
 * per element) */

/* ------------------------------------------------------------ 16-bit copies */

/* The parts of a fp32 tensor of rt values ([B, T, ld]; head h of part p at
 * columns p C + h HS, C = NH HS) as E rows dst [P][B NH][Tp][HSM]: row t of
 * (p, b NH + h) is the head's HS values, then zeros to HSM; rows T .. Tp - 1
 * zero. q, k, v of qkv: P 3, ld 3C; dout: P 1, ld C. A thread per 8 values
 * (one 16-byte store at dst + 8 i); float4 loads where vec (HS % 4 == 0 and
 * src 16-byte aligned, so a float4 is wholly inside or past the head).
 * ST = uint16_t: src holds E's bits (the gpt 16-bit activation pipeline),
 * copied as they are (the fp32 storage's rt values pack to the same bits);
 * one 16-byte load where vec (HS % 8 == 0, ld % 8 == 0, src 16-byte aligned) */
template <typename E, int HSM, typename ST>
__global__ void k_mma2_to16(const ST *src, uint16_t *dst, int P, size_t ld, int B, int T, int Tp, int NH, int HS,
                            int vec)
{
    constexpr int CH = HSM / 8;
    const size_t BNH = (size_t)B * NH, n = (size_t)P * BNH * Tp * CH;
    const size_t C = (size_t)NH * HS;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const int c = (int)(i % CH), t = (int)(i / CH % (size_t)Tp);
        const size_t r = i / CH / (size_t)Tp, bh = r % BNH, p = r / BNH;
        const int d0 = 8 * c;
        if (sizeof(ST) == 2) { /* 16-bit storage holds E's bits already: copied, the fp32 path's bits */
            const uint16_t *s = (const uint16_t *)src + ((bh / NH) * T + t) * ld + p * C + (bh % NH) * HS + d0;
            uint4 o;
            o.x = o.y = o.z = o.w = 0;
            if (t < T && vec && d0 + 8 <= HS) o = *(const uint4 *)s;
            else if (t < T) {
                uint16_t u[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                for (int k = 0; k < 8; k++)
                    if (d0 + k < HS) u[k] = s[k];
                o.x = u[0] | (uint32_t)u[1] << 16, o.y = u[2] | (uint32_t)u[3] << 16;
                o.z = u[4] | (uint32_t)u[5] << 16, o.w = u[6] | (uint32_t)u[7] << 16;
            }
            *(uint4 *)(dst + 8 * i) = o;
            continue;
        }
        float v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        if (t < T) {
            const float *s = (const float *)src + ((bh / NH) * T + t) * ld + p * C + (bh % NH) * HS + d0;
            if (vec) {
#pragma unroll
                for (int k = 0; k < 2; k++)
                    if (d0 + 4 * k < HS) {
                        const float4 f = *(const float4 *)(s + 4 * k);
                        v[4 * k] = f.x, v[4 * k + 1] = f.y, v[4 * k + 2] = f.z, v[4 * k + 3] = f.w;
                    }
            } else {
#pragma unroll
                for (int u = 0; u < 8; u++)
                    if (d0 + u < HS) v[u] = s[u];
            }
        }
        uint4 o;
        o.x = mm_pack2<E>(v[0], v[1]);
        o.y = mm_pack2<E>(v[2], v[3]);
        o.z = mm_pack2<E>(v[4], v[5]);
        o.w = mm_pack2<E>(v[6], v[7]);
        *(uint4 *)(dst + 8 * i) = o;
    }
}

/* ------------------------------------------------------------ forward */

/* qr, kr, vr: the rows of q, k, v (k_mma2_to16's copies, or qkv's 16-bit
 * values themselves), readable up to T rounded up to 128; out [B, T, C]
 * and lse [B NH, T] as the other kernels write them. NW warps: 16 NW
 * queries a block */
template <typename E, int HSM, int NW, typename ST>
__global__ void __launch_bounds__(32 * NW, 16 / NW)
    k_mma2_fwd(m2rows qr, m2rows kr, m2rows vr, ST *out, float *lse, int T, int NH, int HS, float scale, int rt)
{
    typedef m2dims<HSM> DM;
    constexpr int LDE = DM::LDE, KS = DM::KS, NO = DM::NO, QR = 16 * NW, NTH = 32 * NW;
    constexpr int KV = 2 * M2T * LDE; /* one buffer: K [64][LDE] then V [64][LDE] */
    extern __shared__ __align__(128) unsigned char smem[];
    uint16_t *Qs = (uint16_t *)smem, *KV0 = Qs + QR * LDE;

    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, q = lane & 3;
    const int lo = (lane & 15) * LDE + 8 * (lane >> 4);
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH, C = NH * HS;
    const int q0 = (int)(gridDim.x - 1 - blockIdx.x) * QR; /* longest rows first */
    const int wfirst = q0 + 16 * w, wlast = wfirst + 15;    /* the warp's rows */
    const int t0 = wfirst + (lane >> 2), t1 = t0 + 8;       /* this lane's two rows */
    const uint16_t *Kg = m2_head(kr, b, h), *Vg = m2_head(vr, b, h);
    const size_t kld = kr.ld, vld = vr.ld;
    const int qlast = q0 + QR - 1 < T - 1 ? q0 + QR - 1 : T - 1;
    const int nk = qlast / M2T + 1; /* key tiles up to the diagonal */
    m2_load<QR, HSM, NTH>(Qs, m2_head(qr, b, h) + (size_t)q0 * qr.ld, qr.ld);
    m2_load<M2T, HSM, NTH>(KV0, Kg, kld);
    m2_load<M2T, HSM, NTH>(KV0 + M2T * LDE, Vg, vld);
    cp_commit();
    uint32_t qa[KS][4]; /* Q's fragments, held */
    float o[NO][4];
#pragma unroll
    for (int n = 0; n < NO; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f; /* m in log2 units */
    const float sl2 = scale * LOG2E;
    const bool rows = wfirst < T; /* the warp has a row to compute */
    for (int i = 0; i < nk; i++) {
        const int k0 = i * M2T;
        const uint16_t *Ks = KV0 + (i & 1) * KV, *Vs = Ks + M2T * LDE;
        cp_wait<0>();
        __syncthreads(); /* tile i (and Q) visible; every warp done with tile i - 1's buffer */
        if (i + 1 < nk) {
            uint16_t *nx = KV0 + ((i + 1) & 1) * KV;
            m2_load<M2T, HSM, NTH>(nx, Kg + (size_t)(k0 + M2T) * kld, kld);
            m2_load<M2T, HSM, NTH>(nx + M2T * LDE, Vg + (size_t)(k0 + M2T) * vld, vld);
            cp_commit();
        }
        if (i == 0)
#pragma unroll
            for (int ks = 0; ks < KS; ks++) ldsm4(qa[ks], Qs + 16 * w * LDE + 16 * ks + lo);
        if (!rows || k0 > wlast) continue; /* every key of the tile past the warp's rows */
        /* S = Q K^T: 16-key pairs of tiles wholly past the warp's rows stay 0 (masked below) */
        float s[8][4];
        m2_frags_bt<E, KS, LDE>(s, qa, Ks, lo, [&](int p) { return k0 + 16 * p > wlast; });
        float a0, a1;
        if (k0 + M2T - 1 <= wfirst && wlast < T)
            mm_softmax_rows<false>(s, k0, q, t0, t1, T, sl2, m0, m1, l0, l1, a0, a1);
        else
            mm_softmax_rows<true>(s, k0, q, t0, t1, T, sl2, m0, m1, l0, l1, a0, a1);
        mm_rescale<NO>(o, a0, a1);
        /* O += P V over the 16-key steps that hold a key at or before the warp's last row */
        m2_c_b<E, NO, LDE>(o, s, Vs, lo, [&](int kk) { return k0 + 16 * kk > wlast; });
    }
    if (!rows) return;
    mm_fwd_store<NO>(o, m0, m1, l0, l1, out, lse, b, bh, h, t0, t1, T, C, q, HS, rt);
}

/* ------------------------------------------------------------ backward */

/* dK, dV of one 64-key tile over the 64-query tiles at or after it,
 * ascending. qr, kr, vr, dor: the rows of q, k, v and dout (as
 * k_mma2_fwd's); lse, D [B NH, T]; dqkv [B, T, 3C] (its k and v parts
 * written) */
template <typename E, int HSM, typename ST>
__global__ void __launch_bounds__(32 * M2KW, 3) /* 3 blocks a SM: at most 168 registers */
    k_mma2_bwd_dkv(m2rows qr, m2rows kr, m2rows vr, m2rows dor, const float *lse, const float *D, ST *dqkv, int T,
                   int NH, int HS, float scale, int rt)
{
    typedef m2dims<HSM> DM;
    constexpr int LDE = DM::LDE, KS = DM::KS, NO = DM::NO, NTH = 32 * M2KW;
    constexpr int QD = 2 * M2T * LDE; /* one buffer: Q [64][LDE] then dO [64][LDE] */
    static_assert(NTH == 2 * M2T, "a thread per lse or D value of a tile");
    extern __shared__ __align__(128) unsigned char smem[];
    uint16_t *Ks = (uint16_t *)smem, *Vs = Ks + M2T * LDE, *QD0 = Vs + M2T * LDE;
    float *LD0 = (float *)(QD0 + 2 * QD); /* [2][2][64]: buffer, (lse log2(e), D), query */

    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, q = lane & 3;
    const int lo = (lane & 15) * LDE + 8 * (lane >> 4);
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH, C = NH * HS;
    const size_t C3 = 3 * (size_t)C;
    const int k0 = (int)blockIdx.x * M2T;          /* tile 0 has the most queries: first */
    const int wr = 16 * w, wfirst = k0 + wr;       /* the warp's keys, its first */
    const int j0 = wfirst + (lane >> 2), j1 = j0 + 8; /* this lane's two keys */
    const uint16_t *Qg = m2_head(qr, b, h), *dOg = m2_head(dor, b, h);
    const size_t qld = qr.ld, dld = dor.ld;
    const float *Lg = threadIdx.x < M2T ? lse + (size_t)bh * T : D + (size_t)bh * T; /* this thread's copy */
    const int lr = threadIdx.x % M2T;
    const float sl2 = scale * LOG2E;
    const int nq = (T - 1 - k0) / M2T + 1; /* query tiles k0 .. T - 1 */
    /* tile i's Q, dO, lse, D into buffer i & 1 (lse and D clamped to row T - 1: past T they are masked) */
    auto load = [&](int i) {
        const int q0 = k0 + i * M2T, t = q0 + lr < T ? q0 + lr : T - 1;
        uint16_t *S = QD0 + (i & 1) * QD;
        m2_load<M2T, HSM, NTH>(S, Qg + (size_t)q0 * qld, qld);
        m2_load<M2T, HSM, NTH>(S + M2T * LDE, dOg + (size_t)q0 * dld, dld);
        cp_async4(LD0 + (i & 1) * 2 * M2T + threadIdx.x, Lg + t);
        cp_commit();
    };
    m2_load<M2T, HSM, NTH>(Ks, m2_head(kr, b, h) + (size_t)k0 * kr.ld, kr.ld);
    m2_load<M2T, HSM, NTH>(Vs, m2_head(vr, b, h) + (size_t)k0 * vr.ld, vr.ld);
    load(0); /* one group with K and V */
    float dk[NO][4], dv[NO][4];
#pragma unroll
    for (int n = 0; n < NO; n++)
        dk[n][0] = dk[n][1] = dk[n][2] = dk[n][3] = dv[n][0] = dv[n][1] = dv[n][2] = dv[n][3] = 0.0f;
    const bool keys = wfirst < T; /* the warp has a key to compute */
    for (int i = 0; i < nq; i++) {
        const int q0 = k0 + i * M2T;
        const uint16_t *Qs = QD0 + (i & 1) * QD, *dOs = Qs + M2T * LDE;
        float *Ls = LD0 + (i & 1) * 2 * M2T, *Ds = Ls + M2T;
        cp_wait<0>();
        if (threadIdx.x < M2T) Ls[threadIdx.x] *= LOG2E; /* this thread's own copy, complete */
        __syncthreads(); /* tile i visible; every warp done with tile i - 1's buffer */
        if (i + 1 < nq) load(i + 1);
        if (!keys) continue;
        /* the tile in two halves of 32 queries (S^T and dP^T of 16 x 32:
         * 64 registers fewer live than 16 x 64); each accumulator still
         * takes the tile's 16-query steps in ascending order */
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            const int h0 = q0 + 32 * hh; /* the half's first query */
            if (h0 + 31 < wfirst) continue; /* every query before the warp's keys: P^T = 0 */
            const uint16_t *Qh = Qs + 32 * hh * LDE, *dOh = dOs + 32 * hh * LDE;
            /* S^T = K Q^T: 16-query pairs wholly before the warp's keys stay 0 */
            auto before = [&](int p) { return h0 + 16 * p + 15 < wfirst; };
            float st[4][4];
            m2_rows_bt<E, KS, LDE>(st, Ks + wr * LDE, Qh, lo, before);
            /* P^T where key j <= query t < T, else 0; queries all at or after
             * the warp's last key, all < T, need no mask */
            const bool full = h0 >= wfirst + 15 && h0 + 31 < T;
            if (full) mm_p_t<false>(st, Ls + 32 * hh, h0, q, j0, j1, T, sl2);
            else mm_p_t<true>(st, Ls + 32 * hh, h0, q, j0, j1, T, sl2);
            /* dV += P^T dO over the 16-query steps that reach the warp's keys */
            m2_c_b<E, NO, LDE>(dv, st, dOh, lo, before);
            /* dP^T = V dO^T, then dS^T = P^T (dP^T - D) in place */
            float dp[4][4];
            m2_rows_bt<E, KS, LDE>(dp, Vs + wr * LDE, dOh, lo, before);
            if (full) mm_ds_t<false>(dp, st, Ds + 32 * hh, h0, q, j0, j1, T);
            else mm_ds_t<true>(dp, st, Ds + 32 * hh, h0, q, j0, j1, T);
            /* dK += dS^T Q */
            m2_c_b<E, NO, LDE>(dk, dp, Qh, lo, before);
        }
    }
    if (!keys) return;
    ST *r0 = dqkv + ((size_t)b * T + j0) * C3 + C + (size_t)h * HS, *r1 = r0 + 8 * C3;
    mm_store_rows<NO>(r0, r1, dk, scale, scale, j0 < T, j1 < T, q, HS, rt);
    mm_store_rows<NO>(r0 + C, r1 + C, dv, 1.0f, 1.0f, j0 < T, j1 < T, q, HS, rt);
}

/* dQ of one tile of 16 NW queries over the key tiles up to the diagonal,
 * ascending (dqkv's q part written) */
template <typename E, int HSM, int NW, typename ST>
__global__ void __launch_bounds__(32 * NW, 16 / NW)
    k_mma2_bwd_dq(m2rows qr, m2rows kr, m2rows vr, m2rows dor, const float *lse, const float *D, ST *dqkv, int T,
                  int NH, int HS, float scale, int rt)
{
    typedef m2dims<HSM> DM;
    constexpr int LDE = DM::LDE, KS = DM::KS, NO = DM::NO, QR = 16 * NW, NTH = 32 * NW;
    constexpr int KV = 2 * M2T * LDE; /* one buffer: K [64][LDE] then V [64][LDE] */
    extern __shared__ __align__(128) unsigned char smem[];
    uint16_t *Qs = (uint16_t *)smem, *dOs = Qs + QR * LDE, *KV0 = dOs + QR * LDE;

    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, q = lane & 3;
    const int lo = (lane & 15) * LDE + 8 * (lane >> 4);
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH, C = NH * HS;
    const size_t C3 = 3 * (size_t)C;
    const int q0 = (int)(gridDim.x - 1 - blockIdx.x) * QR; /* longest rows first */
    const int wr = 16 * w, wfirst = q0 + wr, wlast = wfirst + 15;
    const int t0 = wfirst + (lane >> 2), t1 = t0 + 8;
    const uint16_t *Kg = m2_head(kr, b, h), *Vg = m2_head(vr, b, h);
    const size_t kld = kr.ld, vld = vr.ld;
    const int qlast = q0 + QR - 1 < T - 1 ? q0 + QR - 1 : T - 1;
    const int nk = qlast / M2T + 1;
    m2_load<QR, HSM, NTH>(Qs, m2_head(qr, b, h) + (size_t)q0 * qr.ld, qr.ld);
    m2_load<QR, HSM, NTH>(dOs, m2_head(dor, b, h) + (size_t)q0 * dor.ld, dor.ld);
    m2_load<M2T, HSM, NTH>(KV0, Kg, kld);
    m2_load<M2T, HSM, NTH>(KV0 + M2T * LDE, Vg, vld);
    cp_commit();
    const float sl2 = scale * LOG2E; /* lse in log2 units below */
    const float L0 = t0 < T ? lse[(size_t)bh * T + t0] * LOG2E : 0.0f, L1 = t1 < T ? lse[(size_t)bh * T + t1] * LOG2E : 0.0f;
    const float D0 = t0 < T ? D[(size_t)bh * T + t0] : 0.0f, D1 = t1 < T ? D[(size_t)bh * T + t1] : 0.0f;
    float dq[NO][4];
#pragma unroll
    for (int n = 0; n < NO; n++) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;
    const bool rows = wfirst < T;
    for (int i = 0; i < nk; i++) {
        const int k0 = i * M2T;
        const uint16_t *Ks = KV0 + (i & 1) * KV, *Vs = Ks + M2T * LDE;
        cp_wait<0>();
        __syncthreads(); /* tile i (and Q, dO) visible; every warp done with tile i - 1's buffer */
        if (i + 1 < nk) {
            uint16_t *nx = KV0 + ((i + 1) & 1) * KV;
            m2_load<M2T, HSM, NTH>(nx, Kg + (size_t)(k0 + M2T) * kld, kld);
            m2_load<M2T, HSM, NTH>(nx + M2T * LDE, Vg + (size_t)(k0 + M2T) * vld, vld);
            cp_commit();
        }
        if (!rows || k0 > wlast) continue;
        /* the tile in two halves of 32 keys (S and dP of 16 x 32: 64
         * registers fewer live than 16 x 64); dQ still takes the tile's
         * 16-key steps in ascending order */
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            const int h0 = k0 + 32 * hh; /* the half's first key */
            if (h0 > wlast) continue;    /* every key past the warp's rows: P = 0 */
            const uint16_t *Kh = Ks + 32 * hh * LDE, *Vh = Vs + 32 * hh * LDE;
            /* S = Q K^T and dP = dO V^T: 16-key pairs wholly past the warp's rows stay 0 */
            auto past = [&](int p) { return h0 + 16 * p > wlast; };
            float s[4][4], dp[4][4];
            m2_rows_bt<E, KS, LDE>(s, Qs + wr * LDE, Kh, lo, past);
            m2_rows_bt<E, KS, LDE>(dp, dOs + wr * LDE, Vh, lo, past);
            /* P and dS = P (dP - D) where key j <= query t < T, else 0 */
            if (h0 + 31 <= wfirst && wlast < T) mm_ds_rows<false>(dp, s, h0, q, t0, t1, T, sl2, L0, L1, D0, D1);
            else mm_ds_rows<true>(dp, s, h0, q, t0, t1, T, sl2, L0, L1, D0, D1);
            /* dQ += dS K */
            m2_c_b<E, NO, LDE>(dq, dp, Kh, lo, past);
        }
    }
    if (!rows) return;
    ST *r0 = dqkv + ((size_t)b * T + t0) * C3 + (size_t)h * HS;
    mm_store_rows<NO>(r0, r0 + 8 * C3, dq, scale, scale, t0 < T, t1 < T, q, HS, rt);
}

} /* namespace tcattn */
#endif /* PLUMB_CUDA */
#endif
