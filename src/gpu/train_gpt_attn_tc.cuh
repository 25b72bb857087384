/* Tensor-core flash attention for 16-bit training (rt bf16 or fp16) on
 * CUDA: the fast path of train_gpt_attn.cu when PLUMB_ATTN_TC is defined
 * (CUDA builds; HIP builds have no WMMA here and keep the scalar kernels of
 * gpu/train_gpt_kern.cuh).
 *
 * nvcuda::wmma 16x16x16 fragments of E (__nv_bfloat16 for bf16, __half for
 * fp16) with fp32 accumulators. The inputs hold rt values (dev/train_ops.h:
 * qkv and dout are stored rounded), so converting them to E when staging a
 * tile in shared memory is exact. What is rounded to E beyond the inputs:
 * the probabilities P before O += P V and dV += P^T dO, and dS before
 * dK += dS^T Q and dQ += dS K (as FlashAttention-2 does); every sum is fp32.
 *
 * Tiles: TB = 64 queries x 64 keys; a block is 4 warps (TNT = 128 threads),
 * each warp owning 16 rows of the tile (queries in the forward and dQ, keys
 * in dK/dV). The head width is padded with zero columns to HSM = 32, 64 or
 * 128 (zeros add nothing to a dot; padded output columns are not stored),
 * so any HS <= 128 runs here.
 *   k_tc_fwd (one block per (query tile, b*NH + h); the tiles with the most
 *     keys first): Q fragments in registers; per key tile up to the
 *     diagonal: S = Q K^T into fp32 shared, per row the online softmax by a
 *     lane pair (running max m, sum l of the fp32 p), P as E in shared, the
 *     output fragments rescaled by exp(m_old - m_new) (a fragment of row
 *     indices, loaded from a 16x16 matrix of them, says which row each
 *     accumulator element belongs to) and O += P V. out = O / l, rounded to
 *     rt; lse = m + log l.
 *   k_tc_bwd_dkv (one block per key tile, the tiles with the most queries
 *     first): per query tile at or after it, ascending: S^T = K Q^T,
 *     P^T = exp(S^T scale - lse) (fp32 in registers, E in shared),
 *     dP^T = V dO^T, dS^T = P^T (dP^T - D); dV += P^T dO, dK += dS^T Q in
 *     accumulator fragments. dK = scale dK, both rounded to rt.
 *   k_tc_bwd_dq (one block per query tile): per key tile ascending up to
 *     the diagonal: S, P, dP = dO V^T, dS as above; dQ += dS K; dQ = scale
 *     dQ, rounded.
 * D_t = dout_t . out_t comes from k_flash_bwd_pre. Each accumulator has one
 * owner (a warp's fragments) and a fixed order of tiles and of 16-wide
 * steps: the backward is deterministic, with no atomics. Causal: key tiles
 * past a query tile are never visited; inside the diagonal tile keys j > t
 * (and rows past T) are masked to p = 0, and 16-wide sub-tiles wholly past a
 * warp's rows are skipped (their products are exact zeros).
 * Shared memory (dynamic; sz<E, HSM>::FWD, DKV, DQ in bytes): HSM 64: forward 44.5
 * KiB, dK/dV 71.5 KiB, dQ 62.5 KiB; HSM 128: 60.5, 103.5, 94.5 KiB.
 * Registers (ptxas, sm_90, bf16): forward 128 (HSM 64) / 167 (128), dK/dV
 * 239 / 255 (8 bytes spilled at HSM 128), dQ 128 / 254; no other spills. */
#ifndef PLUMB_GPU_TRAIN_GPT_ATTN_TC_CUH
#define PLUMB_GPU_TRAIN_GPT_ATTN_TC_CUH
#if defined(PLUMB_CUDA) && !defined(PLUMB_HIP)
#define PLUMB_ATTN_TC 1
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
#include "dev/train_gpt_math.h"

namespace tcattn {
using namespace nvcuda;

constexpr int TB = 64;        /* queries and keys per tile */
constexpr int TNT = 128;      /* threads per block: 4 warps of 16 rows */
constexpr int LDF = TB + 4;   /* fp32 [row][TB] tiles (S, dP): floats per row */
constexpr int LDP = TB + 8;   /* E [row][TB] tiles (P, dS): elements per row */
template <int HSM> struct dims {
    static constexpr int LDE = HSM + 8;  /* E [row][HSM] tiles (Q, K, V, dO) */
    static constexpr int LDO = HSM + 4;  /* fp32 [row][HSM] output staging */
    static constexpr int NF = HSM / 16;  /* 16-wide steps along the head */
};

template <typename E> __device__ inline E to_e(float x);
template <> __device__ inline __nv_bfloat16 to_e<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ inline __half to_e<__half>(float x) { return __float2half_rn(x); }

typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> facc;
template <typename E> using fa_row = wmma::fragment<wmma::matrix_a, 16, 16, 16, E, wmma::row_major>;
template <typename E> using fb_row = wmma::fragment<wmma::matrix_b, 16, 16, 16, E, wmma::row_major>;
template <typename E> using fb_col = wmma::fragment<wmma::matrix_b, 16, 16, 16, E, wmma::col_major>;

/* byte sizes of the shared tiles (each a multiple of 128, so every tile
 * starts 128-byte aligned: WMMA wants 32) */
template <typename E, int HSM> struct sz {
    static constexpr size_t E_TILE = (size_t)TB * dims<HSM>::LDE * sizeof(E); /* Q, K, V or dO */
    static constexpr size_t F_TILE = (size_t)TB * LDF * sizeof(float);       /* S or dP */
    static constexpr size_t P_TILE = (size_t)TB * LDP * sizeof(E);           /* P or dS */
    static constexpr size_t ROWS = 2 * TB * sizeof(float);                   /* two per-row vectors */
    static constexpr size_t A = E_TILE > F_TILE ? E_TILE : F_TILE;           /* Q, then S (forward) */
    static constexpr size_t FWD = A + 2 * E_TILE + P_TILE + ROWS;
    static constexpr size_t DKV = 4 * E_TILE + F_TILE + 2 * P_TILE + ROWS;
    static constexpr size_t DQ = 4 * E_TILE + F_TILE + P_TILE + ROWS;
    static_assert(E_TILE % 128 == 0 && F_TILE % 128 == 0 && P_TILE % 128 == 0, "tile alignment");
    /* output staging over the E tiles: fp32 [TB][LDO] once (forward, over
     * K and V) or twice (dK and dV, over the four E tiles) */
    static_assert((size_t)TB * dims<HSM>::LDO * sizeof(float) <= 2 * E_TILE, "forward staging");
    static_assert((size_t)TB * dims<HSM>::LDO * sizeof(float) % 128 == 0, "staging alignment");
};

/* rows [r0, r0 + TB) of a row-major float tensor (row t at base + t*stride,
 * HS columns) into S [TB][LDE] as E; rows past T and columns past HS are 0 */
template <typename E, int HSM>
__device__ inline void stage(E *S, const float *base, size_t stride, int r0, int T, int HS)
{
    constexpr int LDE = dims<HSM>::LDE;
    for (int idx = threadIdx.x; idx < TB * HSM; idx += TNT) {
        const int rr = idx / HSM, i = idx % HSM, t = r0 + rr;
        S[rr * LDE + i] = to_e<E>(t < T && i < HS ? base[(size_t)t * stride + i] : 0.0f);
    }
}
/* TB per-row values of a [.., T] vector (lse or D) from r0; 0 past T */
__device__ inline void stage_rows(float *R, const float *v, int r0, int T)
{
    for (int rr = threadIdx.x; rr < TB; rr += TNT) R[rr] = r0 + rr < T ? v[r0 + rr] : 0.0f;
}

/* acc[n] (n = 0..3: 16 columns each) = A rows [16 x HSM] times B^T, B's
 * rows n*16.. of a [TB][LDE] tile read column-major, i.e. C = A B^T over the
 * head; the sub-tiles n with skip(n) are left alone */
template <typename E, int HSM, typename SKIP>
__device__ inline void rows_times_tiles_t(facc *acc, const E *A, const E *B, SKIP skip)
{
    constexpr int LDE = dims<HSM>::LDE;
#pragma unroll
    for (int n = 0; n < 4; n++) wmma::fill_fragment(acc[n], 0.0f);
#pragma unroll
    for (int f = 0; f < dims<HSM>::NF; f++) {
        fa_row<E> a;
        wmma::load_matrix_sync(a, A + 16 * f, LDE);
#pragma unroll
        for (int n = 0; n < 4; n++) {
            if (skip(n)) continue;
            fb_col<E> bt;
            wmma::load_matrix_sync(bt, B + (size_t)16 * n * LDE + 16 * f, LDE);
            wmma::mma_sync(acc[n], a, bt, acc[n]);
        }
    }
}

/* out[f] += A [16 x TB] (rows of a [.][LDP] tile) times B [TB x HSM] (a
 * [TB][LDE] tile, row-major), in the order of the 16-wide steps kk
 * ascending; steps with skip(kk) (A's columns there are all zero) left out */
template <typename E, int HSM, typename SKIP>
__device__ inline void rows_times_tile(facc *out, const E *A, const E *B, SKIP skip)
{
    constexpr int LDE = dims<HSM>::LDE;
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
        if (skip(kk)) continue;
        fa_row<E> a;
        wmma::load_matrix_sync(a, A + 16 * kk, LDP);
#pragma unroll
        for (int f = 0; f < dims<HSM>::NF; f++) {
            fb_row<E> bm;
            wmma::load_matrix_sync(bm, B + (size_t)16 * kk * LDE + 16 * f, LDE);
            wmma::mma_sync(out[f], a, bm, out[f]);
        }
    }
}

/* ------------------------------------------------------------ forward */

template <typename E, int HSM>
__global__ void __launch_bounds__(TNT) k_tc_fwd(const float *qkv, float *out, float *lse, int T, int NH, int HS,
                                                float scale, int rt)
{
    typedef dims<HSM> DM;
    typedef sz<E, HSM> SZ;
    constexpr int LDE = DM::LDE, LDO = DM::LDO, NF = DM::NF;
    extern __shared__ __align__(128) unsigned char smem[];
    E *Qs = (E *)smem;                            /* [TB][LDE], then S: */
    float *Ss = (float *)smem;                    /* [TB][LDF] */
    E *Ks = (E *)(smem + SZ::A), *Vs = (E *)(smem + SZ::A + SZ::E_TILE);
    E *Ps = (E *)(smem + SZ::A + 2 * SZ::E_TILE); /* [TB][LDP] */
    float *As = (float *)(smem + SZ::A + 2 * SZ::E_TILE + SZ::P_TILE), *Linv = As + TB;
    float *Os = (float *)(smem + SZ::A);          /* [TB][LDO] after the loop, over K and V */

    const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH, C = NH * HS;
    const size_t C3 = 3 * (size_t)C;
    const float *base = qkv + (size_t)b * T * C3 + (size_t)h * HS;
    const int q0 = (int)(gridDim.x - 1 - blockIdx.x) * TB; /* longest rows first */
    const int wr = 16 * w;                                 /* the warp's rows in the tile */
    const int wlast = q0 + wr + 15;                        /* its last query */
    stage<E, HSM>(Qs, base, C3, q0, T, HS);
    float *Ri = (float *)Ps; /* a 16 x 16 matrix of row indices, until the loop */
    for (int i = threadIdx.x; i < 256; i += TNT) Ri[i] = (float)(i / 16);
    __syncthreads();
    fa_row<E> qf[NF];
#pragma unroll
    for (int f = 0; f < NF; f++) wmma::load_matrix_sync(qf[f], Qs + (size_t)wr * LDE + 16 * f, LDE);
    facc of[NF], rowf;
    wmma::load_matrix_sync(rowf, Ri, 16, wmma::mem_row_major);
#pragma unroll
    for (int f = 0; f < NF; f++) wmma::fill_fragment(of[f], 0.0f);

    /* softmax lanes: a pair per row, columns 2i + half */
    const int rr = wr + lane / 2, half = lane & 1, t = q0 + rr;
    float m = -INFINITY, l = 0.0f;
    const int qlast = q0 + TB - 1 < T - 1 ? q0 + TB - 1 : T - 1;
    for (int k0 = 0; k0 <= qlast; k0 += TB) {
        __syncthreads(); /* Q fragments loaded (first tile); K, V, P of the previous tile read */
        stage<E, HSM>(Ks, base + C, C3, k0, T, HS);
        stage<E, HSM>(Vs, base + 2 * C, C3, k0, T, HS);
        __syncthreads();
        auto past = [&](int n) { return k0 + 16 * n > wlast; }; /* keys all after the warp's queries */
        {
            facc sf[4];
#pragma unroll
            for (int n = 0; n < 4; n++) wmma::fill_fragment(sf[n], 0.0f);
#pragma unroll
            for (int f = 0; f < NF; f++)
#pragma unroll
                for (int n = 0; n < 4; n++) {
                    if (past(n)) continue;
                    fb_col<E> kt;
                    wmma::load_matrix_sync(kt, Ks + (size_t)16 * n * LDE + 16 * f, LDE);
                    wmma::mma_sync(sf[n], qf[f], kt, sf[n]);
                }
#pragma unroll
            for (int n = 0; n < 4; n++)
                if (!past(n)) wmma::store_matrix_sync(Ss + (size_t)wr * LDF + 16 * n, sf[n], LDF, wmma::mem_row_major);
        }
        __syncwarp();
        const float *srow = Ss + (size_t)rr * LDF;
        float sv[TB / 2], mt = -INFINITY;
#pragma unroll
        for (int i = 0; i < TB / 2; i++) {
            const int c = 2 * i + half, j = k0 + c;
            const float s = t < T && j <= t ? srow[c] * scale : -INFINITY;
            sv[i] = s;
            mt = fmaxf(mt, s);
        }
        mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 1));
        const float mn = fmaxf(m, mt);
        const float alpha = m == -INFINITY ? 0.0f : expf(m - mn);
        float ps = 0.0f;
        E *prow = Ps + (size_t)rr * LDP;
#pragma unroll
        for (int i = 0; i < TB / 2; i++) {
            const float p = sv[i] == -INFINITY ? 0.0f : expf(sv[i] - mn);
            prow[2 * i + half] = to_e<E>(p);
            ps += p;
        }
        ps += __shfl_xor_sync(0xffffffffu, ps, 1);
        l = l * alpha + ps;
        m = mn;
        if (half == 0) As[rr] = alpha;
        __syncwarp(); /* the warp's P rows and alphas */
#pragma unroll
        for (int f = 0; f < NF; f++)
#pragma unroll
            for (int x = 0; x < of[f].num_elements; x++) of[f].x[x] *= As[wr + (int)rowf.x[x]];
        rows_times_tile<E, HSM>(of, Ps + (size_t)wr * LDP, Vs, past);
    }
    __syncthreads(); /* every warp done with K and V: Os over them */
#pragma unroll
    for (int f = 0; f < NF; f++) wmma::store_matrix_sync(Os + (size_t)wr * LDO + 16 * f, of[f], LDO, wmma::mem_row_major);
    if (half == 0) {
        Linv[rr] = 1.0f / l;
        if (t < T) lse[(size_t)bh * T + t] = m + logf(l);
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < TB * HS; idx += TNT) {
        const int r = idx / HS, i = idx - r * HS, tt = q0 + r;
        if (tt < T) out[((size_t)b * T + tt) * C + (size_t)h * HS + i] = gg_round(Os[r * LDO + i] * Linv[r], rt);
    }
}

/* ------------------------------------------------------------ backward */

/* dK, dV of one key tile over the query tiles at or after it, ascending */
template <typename E, int HSM>
__global__ void __launch_bounds__(TNT) k_tc_bwd_dkv(const float *qkv, const float *dout, const float *lse,
                                                    const float *D, float *dqkv, int T, int NH, int HS, float scale,
                                                    int rt)
{
    typedef dims<HSM> DM;
    typedef sz<E, HSM> SZ;
    constexpr int LDE = DM::LDE, LDO = DM::LDO, NF = DM::NF;
    extern __shared__ __align__(128) unsigned char smem[];
    E *Ks = (E *)smem, *Vs = (E *)(smem + SZ::E_TILE), *Qs = (E *)(smem + 2 * SZ::E_TILE),
      *dOs = (E *)(smem + 3 * SZ::E_TILE);
    float *F = (float *)(smem + 4 * SZ::E_TILE);                          /* S^T, then dP^T: [TB][LDF] */
    E *Pt = (E *)(smem + 4 * SZ::E_TILE + SZ::F_TILE), *dSt = (E *)((unsigned char *)Pt + SZ::P_TILE);
    float *Ls = (float *)((unsigned char *)dSt + SZ::P_TILE), *Ds = Ls + TB;
    float *Ok = (float *)smem, *Ov = Ok + TB * LDO;                       /* after the loop, over the E tiles */

    const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH, C = NH * HS;
    const size_t C3 = 3 * (size_t)C;
    const float *base = qkv + (size_t)b * T * C3 + (size_t)h * HS;
    const float *dob = dout + (size_t)b * T * C + (size_t)h * HS;
    const int k0 = (int)blockIdx.x * TB; /* tile 0 has the most queries: first */
    const int wr = 16 * w, wfirst = k0 + wr; /* the warp's key rows, its first key */
    stage<E, HSM>(Ks, base + C, C3, k0, T, HS);
    stage<E, HSM>(Vs, base + 2 * C, C3, k0, T, HS);
    facc dkf[NF], dvf[NF];
#pragma unroll
    for (int f = 0; f < NF; f++) {
        wmma::fill_fragment(dkf[f], 0.0f);
        wmma::fill_fragment(dvf[f], 0.0f);
    }
    for (int q0 = k0; q0 < T; q0 += TB) {
        __syncthreads(); /* the previous tile's Q, dO, P, dS read */
        stage<E, HSM>(Qs, base, C3, q0, T, HS);
        stage<E, HSM>(dOs, dob, (size_t)C, q0, T, HS);
        stage_rows(Ls, lse + (size_t)bh * T, q0, T);
        stage_rows(Ds, D + (size_t)bh * T, q0, T);
        __syncthreads();
        auto before = [&](int n) { return q0 + 16 * n + 15 < wfirst; }; /* queries all before the warp's keys */
        facc sf[4];
        rows_times_tiles_t<E, HSM>(sf, Ks + (size_t)wr * LDE, Qs, before);
#pragma unroll
        for (int n = 0; n < 4; n++)
            if (!before(n)) wmma::store_matrix_sync(F + (size_t)wr * LDF + 16 * n, sf[n], LDF, wmma::mem_row_major);
        __syncwarp();
        /* lanes: the warp's 16 key rows r, query columns lane and lane + 32 */
        float p[16][2];
        const float L0 = Ls[lane], L1 = Ls[lane + 32];
#pragma unroll
        for (int r = 0; r < 16; r++) {
            const int j = wfirst + r;
#pragma unroll
            for (int u = 0; u < 2; u++) {
                const int c = lane + 32 * u, t = q0 + c;
                const float pv = t < T && j <= t ? expf(F[(size_t)(wr + r) * LDF + c] * scale - (u ? L1 : L0)) : 0.0f;
                p[r][u] = pv;
                Pt[(size_t)(wr + r) * LDP + c] = to_e<E>(pv);
            }
        }
        __syncwarp(); /* S^T read: F takes dP^T */
        rows_times_tiles_t<E, HSM>(sf, Vs + (size_t)wr * LDE, dOs, before);
#pragma unroll
        for (int n = 0; n < 4; n++)
            if (!before(n)) wmma::store_matrix_sync(F + (size_t)wr * LDF + 16 * n, sf[n], LDF, wmma::mem_row_major);
        __syncwarp();
        const float D0 = Ds[lane], D1 = Ds[lane + 32];
#pragma unroll
        for (int r = 0; r < 16; r++) {
            const int j = wfirst + r;
#pragma unroll
            for (int u = 0; u < 2; u++) {
                const int c = lane + 32 * u, t = q0 + c;
                const float ds = t < T && j <= t ? p[r][u] * (F[(size_t)(wr + r) * LDF + c] - (u ? D1 : D0)) : 0.0f;
                dSt[(size_t)(wr + r) * LDP + c] = to_e<E>(ds);
            }
        }
        __syncwarp(); /* the warp's P^T and dS^T rows */
        rows_times_tile<E, HSM>(dvf, Pt + (size_t)wr * LDP, dOs, before);
        rows_times_tile<E, HSM>(dkf, dSt + (size_t)wr * LDP, Qs, before);
    }
    __syncthreads(); /* every warp done with the E tiles: Ok, Ov over them */
#pragma unroll
    for (int f = 0; f < NF; f++) {
        wmma::store_matrix_sync(Ok + (size_t)wr * LDO + 16 * f, dkf[f], LDO, wmma::mem_row_major);
        wmma::store_matrix_sync(Ov + (size_t)wr * LDO + 16 * f, dvf[f], LDO, wmma::mem_row_major);
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < TB * HS; idx += TNT) {
        const int r = idx / HS, i = idx - r * HS, j = k0 + r;
        if (j >= T) continue;
        float *dkr = dqkv + ((size_t)b * T + j) * C3 + C + (size_t)h * HS;
        dkr[i] = gg_round(Ok[r * LDO + i] * scale, rt);
        dkr[C + i] = gg_round(Ov[r * LDO + i], rt);
    }
}

/* dQ of one query tile over the key tiles up to the diagonal, ascending */
template <typename E, int HSM>
__global__ void __launch_bounds__(TNT) k_tc_bwd_dq(const float *qkv, const float *dout, const float *lse,
                                                   const float *D, float *dqkv, int T, int NH, int HS, float scale,
                                                   int rt)
{
    typedef dims<HSM> DM;
    typedef sz<E, HSM> SZ;
    constexpr int LDE = DM::LDE, LDO = DM::LDO, NF = DM::NF;
    extern __shared__ __align__(128) unsigned char smem[];
    E *Qs = (E *)smem, *dOs = (E *)(smem + SZ::E_TILE), *Ks = (E *)(smem + 2 * SZ::E_TILE),
      *Vs = (E *)(smem + 3 * SZ::E_TILE);
    float *F = (float *)(smem + 4 * SZ::E_TILE); /* S, then dP: [TB][LDF] */
    E *dSs = (E *)(smem + 4 * SZ::E_TILE + SZ::F_TILE);
    float *Ls = (float *)((unsigned char *)dSs + SZ::P_TILE), *Ds = Ls + TB;
    float *Oq = (float *)smem; /* after the loop, over the E tiles */

    const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH, C = NH * HS;
    const size_t C3 = 3 * (size_t)C;
    const float *base = qkv + (size_t)b * T * C3 + (size_t)h * HS;
    const int q0 = (int)(gridDim.x - 1 - blockIdx.x) * TB; /* longest rows first */
    const int wr = 16 * w, wlast = q0 + wr + 15;
    stage<E, HSM>(Qs, base, C3, q0, T, HS);
    stage<E, HSM>(dOs, dout + (size_t)b * T * C + (size_t)h * HS, (size_t)C, q0, T, HS);
    stage_rows(Ls, lse + (size_t)bh * T, q0, T);
    stage_rows(Ds, D + (size_t)bh * T, q0, T);
    facc dqf[NF];
#pragma unroll
    for (int f = 0; f < NF; f++) wmma::fill_fragment(dqf[f], 0.0f);
    const int qlast = q0 + TB - 1 < T - 1 ? q0 + TB - 1 : T - 1;
    for (int k0 = 0; k0 <= qlast; k0 += TB) {
        __syncthreads(); /* Q, dO staged (first tile); the previous K, V, dS read */
        stage<E, HSM>(Ks, base + C, C3, k0, T, HS);
        stage<E, HSM>(Vs, base + 2 * C, C3, k0, T, HS);
        __syncthreads();
        auto past = [&](int n) { return k0 + 16 * n > wlast; };
        facc sf[4];
        rows_times_tiles_t<E, HSM>(sf, Qs + (size_t)wr * LDE, Ks, past);
#pragma unroll
        for (int n = 0; n < 4; n++)
            if (!past(n)) wmma::store_matrix_sync(F + (size_t)wr * LDF + 16 * n, sf[n], LDF, wmma::mem_row_major);
        __syncwarp();
        /* lanes: the warp's 16 query rows r, key columns lane and lane + 32 */
        float p[16][2];
#pragma unroll
        for (int r = 0; r < 16; r++) {
            const int t = q0 + wr + r;
            const float L = Ls[wr + r];
#pragma unroll
            for (int u = 0; u < 2; u++) {
                const int c = lane + 32 * u, j = k0 + c;
                p[r][u] = t < T && j <= t ? expf(F[(size_t)(wr + r) * LDF + c] * scale - L) : 0.0f;
            }
        }
        __syncwarp(); /* S read: F takes dP */
        rows_times_tiles_t<E, HSM>(sf, dOs + (size_t)wr * LDE, Vs, past);
#pragma unroll
        for (int n = 0; n < 4; n++)
            if (!past(n)) wmma::store_matrix_sync(F + (size_t)wr * LDF + 16 * n, sf[n], LDF, wmma::mem_row_major);
        __syncwarp();
#pragma unroll
        for (int r = 0; r < 16; r++) {
            const int t = q0 + wr + r;
            const float Dr = Ds[wr + r];
#pragma unroll
            for (int u = 0; u < 2; u++) {
                const int c = lane + 32 * u, j = k0 + c;
                const float ds = t < T && j <= t ? p[r][u] * (F[(size_t)(wr + r) * LDF + c] - Dr) : 0.0f;
                dSs[(size_t)(wr + r) * LDP + c] = to_e<E>(ds);
            }
        }
        __syncwarp();
        rows_times_tile<E, HSM>(dqf, dSs + (size_t)wr * LDP, Ks, past);
    }
    __syncthreads(); /* every warp done with the E tiles: Oq over them */
#pragma unroll
    for (int f = 0; f < NF; f++) wmma::store_matrix_sync(Oq + (size_t)wr * LDO + 16 * f, dqf[f], LDO, wmma::mem_row_major);
    __syncthreads();
    for (int idx = threadIdx.x; idx < TB * HS; idx += TNT) {
        const int r = idx / HS, i = idx - r * HS, t = q0 + r;
        if (t < T) dqkv[((size_t)b * T + t) * C3 + (size_t)h * HS + i] = gg_round(Oq[r * LDO + i] * scale, rt);
    }
}

} /* namespace tcattn */
#endif /* PLUMB_CUDA */
#endif
