/* Device code of the fast transformer kernels (flash attention, LayerNorm,
 * the classifier's rows, the GELU), included by gpu/train_gpt_*.cu and by
 * tests/tools/gpu_emu.cc, which runs these same kernels on the cpu (threads
 * as pthreads, __syncthreads as a barrier, warp shuffles through shared
 * memory) for PLUMB_WARP = 32 and 64 against the golden definitions.
 * Needs, from gpu/vendor.h or the emulation: PLUMB_WARP, plumb_shfl_xor,
 * plumb_warp_sum, plumb_block_max, plumb_block_sum, the CUDA thread
 * built-ins; and dev/train_gpt_math.h. */
#ifndef PLUMB_GPU_TRAIN_GPT_KERN_CUH
#define PLUMB_GPU_TRAIN_GPT_KERN_CUH
#include "dev/train_gpt_math.h"

#define NT 128 /* threads per flash block */

/* ---------------- GELU ---------------- */

__device__ static inline float fast_gelu(float x)
{
    const float k = 0.7978845608028654f;
    return 0.5f * x * (1.0f + tanhf(k * fmaf(0.044715f * x * x, x, x)));
}
__device__ static inline float fast_gelu_grad(float x)
{
    const float k = 0.7978845608028654f, x2 = x * x;
    const float th = tanhf(k * fmaf(0.044715f * x2, x, x));
    return fmaf(0.5f * x * (1.0f - th * th), k * fmaf(0.134145f, x2, 1.0f), 0.5f * (1.0f + th));
}

/* ---------------- 16-bit values (the 16-bit activation pipeline) ---------------- */

/* rt's 16-bit bits of x (round to nearest even: gg_round's value) */
__device__ static inline uint16_t to16_of(float x, int rt) { return rt == DT_F16 ? f32_to_f16(x) : f32_to_bf16(x); }
/* four values as rt's 16-bit values, packed for one 8-byte store (the first
 * in the low half of .x, as the values lie in memory) */
__device__ static inline uint2 to16x4_of(float v0, float v1, float v2, float v3, int rt)
{
    return make_uint2((uint32_t)to16_of(v0, rt) | (uint32_t)to16_of(v1, rt) << 16,
                      (uint32_t)to16_of(v2, rt) | (uint32_t)to16_of(v3, rt) << 16);
}
/* the value of rt's 16-bit bits h (exact) */
__device__ static inline float from16_of(uint16_t h, int rt) { return rt == DT_F16 ? f16_to_f32(h) : bf16_to_f32(h); }
/* the eight rt 16-bit values of one 16-byte load, as floats (element 2k in
 * the low half of word k) */
__device__ static inline void from16x8_of(uint4 a, float *v, int rt)
{
    const uint32_t w[4] = {a.x, a.y, a.z, a.w};
    for (int k = 0; k < 4; k++) {
        v[2 * k] = from16_of((uint16_t)(w[k] & 0xffffu), rt);
        v[2 * k + 1] = from16_of((uint16_t)(w[k] >> 16), rt);
    }
}
/* the token + position embedding (encoder_fwd): out [R, C] = round(wte[tok] + wpe[t]) */
static __global__ void k_enc_fwd(const float *wte, const float *wpe, const int32_t *tok, float *out, size_t R, int T, int C,
                          int rt)
{
    const size_t tot = R * (size_t)C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < tot; i += (size_t)gridDim.x * blockDim.x) {
        const size_t r = i / (size_t)C;
        const int c = (int)(i - r * (size_t)C), t = (int)(r % (size_t)T);
        out[i] = gg_round(wte[(size_t)tok[r] * C + c] + wpe[(size_t)t * C + c], rt);
    }
}

/* the same, four values of a row a thread (C % 4 == 0, 16-byte aligned
 * tables and output, R C / 4 < 2^31): float4 loads and store, 32-bit index
 * arithmetic (the one-value form's two 64-bit divisions a value took 80 us
 * for gpt2's 16384 x 768 on an H100, 2026-12-07: 2.4x its bytes' time).
 * Each value's expression is the one-value form's: the same bits. */
static __global__ void k_enc_fwd4(const float4 *wte, const float4 *wpe, const int32_t *tok, float4 *out, unsigned n4, int T,
                           unsigned C4, int rt)
{
    for (unsigned q = blockIdx.x * blockDim.x + threadIdx.x; q < n4; q += gridDim.x * blockDim.x) {
        const unsigned r = q / C4, c = q - r * C4, t = r % (unsigned)T;
        const float4 a = wte[(size_t)tok[r] * C4 + c], b = wpe[(size_t)t * C4 + c];
        out[q] = make_float4(gg_round(a.x + b.x, rt), gg_round(a.y + b.y, rt), gg_round(a.z + b.z, rt),
                             gg_round(a.w + b.w, rt));
    }
}

/* element i of a tensor given as fp32 (x16 NULL) or as t16's 16-bit values */
__device__ static inline float ld_any(const float *x, const uint16_t *x16, size_t i, int t16)
{
    return x16 ? from16_of(x16[i], t16) : x[i];
}

/* ---------------- column sums (the linear layers' dbias, fast) ---------------- */

#define CS_ROWS 64
/* part[c][n] = the sum of dy[b][n] over rows b in [64 c, 64 c + 64),
 * ascending (blockIdx.y = c); k_colsum_chunks then adds the chunks in
 * order. dy [B, N] given as fp32, or as rt's 16-bit values src16 (the 16-bit
 * activation pipeline); dy16 (not NULL): each dy element, read once here,
 * also stored as its 16-bit copy (exact: dy holds rt values), for the GEMMs
 * that follow. V = 8: a thread takes 8 adjacent columns (one 16-byte load of
 * src16, or two float4 of dy, a row; N % 8 == 0 and 16-byte aligned
 * pointers), each column's chain unchanged, so the bits of V = 1. One column
 * a thread, 2-byte loads, took 3.0 ms of gpt2-124m's step on an H100
 * (BENCHMARKS.md, 2026-12-05), several times its bytes' time. ldp: part's
 * row stride (0: N; the LayerNorm backward's dsum writes one part of three). */
/* SRC16C (0: dy, 1: src16), RTC (rt) and STORE (dy16 stored or not) >= 0:
 * compile-time constants (colsum_part_launch's LN dsum / dbias form:
 * src16, rt bf16 or fp16, no store), so the conversions' branches fold and
 * no store sits in the loop for the row loads to wait behind (the runtime
 * form's loads could not pass a possible dy16 store: uint16_t pointers may
 * alias; LN's dsum over 16384 x 768 took 36 us, 0.7 TB/s, CUPTI on an
 * H100 2026-12-07). The same adds in the same order: the runtime form's
 * bits (tests/tools/gpu_emu.cc). */
template <int V, int SRC16C = -1, int RTC = -1, int STORE = -1>
__global__ void k_colsum_part(const float *dy, const uint16_t *src16, int B, int N, float *part, uint16_t *dy16, int rt,
                              size_t ldp = 0)
{
    if (RTC >= 0) rt = RTC;
    if (STORE == 0) dy16 = nullptr;
    const bool use16 = SRC16C >= 0 ? SRC16C == 1 : src16 != nullptr;
    const bool store = STORE >= 0 ? STORE == 1 : dy16 != nullptr;
    if (!ldp) ldp = (size_t)N;
    const int c = blockIdx.y, b0 = c * CS_ROWS, b1 = b0 + CS_ROWS < B ? b0 + CS_ROWS : B;
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < N / V; j += gridDim.x * blockDim.x) {
        const int n = j * V;
        float s[V];
        for (int k = 0; k < V; k++) s[k] = 0.0f;
        /* 16 rows unrolled: their loads issue before the chain's adds need
         * them (the adds stay in row order). For N = 768 a chunk has only 96
         * busy threads, so the bytes in flight come from the unroll; at 4 the
         * part took 41 us a call (CUPTI, 2026-12-05), about 2.4x its bytes. */
#pragma unroll 16
        for (int b = b0; b < b1; b++) {
            const size_t i = (size_t)b * N + n;
            float v[V];
            if (V == 8 && use16) {
                from16x8_of(*(const uint4 *)(src16 + i), v, rt);
            } else if (V == 8) {
                const float4 a = *(const float4 *)(dy + i), a1 = *(const float4 *)(dy + i + 4);
                v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = a1.x, v[5] = a1.y, v[6] = a1.z, v[7] = a1.w;
            } else {
                for (int k = 0; k < V; k++) v[k] = use16 ? from16_of(src16[i + k], rt) : dy[i + k];
            }
            for (int k = 0; k < V; k++) s[k] = s[k] + v[k];
            if (store && V == 8) {
                const uint2 lo = to16x4_of(v[0], v[1], v[2], v[3], rt), hi = to16x4_of(v[4], v[5], v[6], v[7], rt);
                *(uint4 *)(dy16 + i) = make_uint4(lo.x, lo.y, hi.x, hi.y);
            } else if (store) {
                for (int k = 0; k < V; k++) dy16[i + k] = to16_of(v[k], rt);
            }
        }
        for (int k = 0; k < V; k++) part[(size_t)c * ldp + n + k] = s[k];
    }
}
/* db[n] = the chunks' sums part[c][n] added in chunk order */
static __global__ void k_colsum_chunks(const float *part, int nc, int N, float *db)
{
    for (int n = blockIdx.x * blockDim.x + threadIdx.x; n < N; n += gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (int c = 0; c < nc; c++) s = s + part[(size_t)c * N + n];
        db[n] = s;
    }
}

/* ---------------- LayerNorm ---------------- */

/* fast: one warp per row, two passes (mean, then the centred squares);
 * y16 (not NULL): the output stored as rt's 16-bit values instead of y.
 * rb16 (not NULL): the row is first formed as ra + rb16 (rt's 16-bit values,
 * residual_fwd16's sums), stored to rout (which may alias ra) and normalised
 * from there; x is not read. Each lane reads back only what it stored. */
static __global__ void k_ln_fwd_fast(const float *x, const float *w, const float *b, float *y, uint16_t *y16,
                                     float *mean, float *rstd, int R, int C, float eps, int rt,
                                     const float *ra = nullptr, const uint16_t *rb16 = nullptr, float *rout = nullptr)
{
    const int lane = threadIdx.x % PLUMB_WARP;
    const int r = blockIdx.x * (blockDim.x / PLUMB_WARP) + threadIdx.x / PLUMB_WARP;
    if (r >= R) return; /* the whole warp */
    const float *xr = (rb16 ? rout : x) + (size_t)r * C;
    float s = 0.0f;
    if (rb16) {
        const float *ar = ra + (size_t)r * C;
        const uint16_t *br = rb16 + (size_t)r * C;
        float *orow = rout + (size_t)r * C;
        for (int i = lane; i < C; i += PLUMB_WARP) {
            const float v = ar[i] + from16_of(br[i], rt);
            orow[i] = v;
            s += v;
        }
    } else {
        for (int i = lane; i < C; i += PLUMB_WARP) s += xr[i];
    }
    const float mu = plumb_warp_sum(s) / (float)C;
    float v = 0.0f;
    for (int i = lane; i < C; i += PLUMB_WARP) {
        const float dd = xr[i] - mu;
        v = fmaf(dd, dd, v);
    }
    const float rs = 1.0f / sqrtf(plumb_warp_sum(v) / (float)C + eps);
    if (y16) {
        uint16_t *yr = y16 + (size_t)r * C;
        for (int i = lane; i < C; i += PLUMB_WARP) yr[i] = to16_of(fmaf((xr[i] - mu) * rs, w[i], b[i]), rt);
    } else {
        float *yr = y + (size_t)r * C;
        for (int i = lane; i < C; i += PLUMB_WARP) yr[i] = gg_round(fmaf((xr[i] - mu) * rs, w[i], b[i]), rt);
    }
    if (lane == 0) {
        if (mean) mean[r] = mu;
        if (rstd) rstd[r] = rs;
    }
}

/* fast, the row in registers: for C = 4 NQ PLUMB_WARP (gpt2: 768 = 4 x 6 x
 * 32), 16-byte aligned rows, w and b. Lane l holds the float4 quads l, l +
 * warp, .. of its row (NQ of them), read from memory once: the mean's chain
 * runs over the lane's quads in order (x, y, z, w each), then the warp sum;
 * the centred squares the same way from the registers; the output from the
 * registers again. Same arguments and meaning as k_ln_fwd_fast (y or y16;
 * rb16: the row formed as ra + rb16 and stored to rout first, as
 * k_residual16 forms it). (k_ln_fwd_fast reads the row three times, one value
 * a lane at a time: 72 us a call for gpt2-124m's 16384 x 768 with the
 * residual fused, on an H100, 2026-12-06 08:24, for about 150 MB.) */
__device__ static inline float4 ln_ld4(const float *p, int q) { return ((const float4 *)p)[q]; }
template <int NQ>
static __global__ void k_ln_fwd_vec(const float *x, const float *w, const float *b, float *y, uint16_t *y16, float *mean,
                                    float *rstd, int R, int C, float eps, int rt, const float *ra = nullptr,
                                    const uint16_t *rb16 = nullptr, float *rout = nullptr)
{
    const int lane = threadIdx.x % PLUMB_WARP;
    const int r = blockIdx.x * (blockDim.x / PLUMB_WARP) + threadIdx.x / PLUMB_WARP;
    if (r >= R) return; /* the whole warp */
    const size_t o = (size_t)r * C;
    float4 v[NQ];
#pragma unroll
    for (int k = 0; k < NQ; k++) {
        const int q = lane + k * PLUMB_WARP;
        if (rb16) {
            const float4 a = ln_ld4(ra + o, q);
            const uint2 u = ((const uint2 *)(rb16 + o))[q];
            v[k] = make_float4(a.x + from16_of((uint16_t)(u.x & 0xffffu), rt), a.y + from16_of((uint16_t)(u.x >> 16), rt),
                               a.z + from16_of((uint16_t)(u.y & 0xffffu), rt), a.w + from16_of((uint16_t)(u.y >> 16), rt));
            ((float4 *)(rout + o))[q] = v[k];
        } else {
            v[k] = ln_ld4(x + o, q);
        }
    }
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < NQ; k++) s = (((s + v[k].x) + v[k].y) + v[k].z) + v[k].w;
    const float mu = plumb_warp_sum(s) / (float)C;
    float var = 0.0f;
#pragma unroll
    for (int k = 0; k < NQ; k++) {
        const float d0 = v[k].x - mu, d1 = v[k].y - mu, d2 = v[k].z - mu, d3 = v[k].w - mu;
        var = fmaf(d3, d3, fmaf(d2, d2, fmaf(d1, d1, fmaf(d0, d0, var))));
    }
    const float rs = 1.0f / sqrtf(plumb_warp_sum(var) / (float)C + eps);
#pragma unroll
    for (int k = 0; k < NQ; k++) {
        const int q = lane + k * PLUMB_WARP;
        const float4 wv = ln_ld4(w, q), bv = ln_ld4(b, q);
        const float o0 = fmaf((v[k].x - mu) * rs, wv.x, bv.x), o1 = fmaf((v[k].y - mu) * rs, wv.y, bv.y);
        const float o2 = fmaf((v[k].z - mu) * rs, wv.z, bv.z), o3 = fmaf((v[k].w - mu) * rs, wv.w, bv.w);
        if (y16)
            ((uint2 *)(y16 + o))[q] = to16x4_of(o0, o1, o2, o3, rt);
        else
            ((float4 *)(y + o))[q] = make_float4(gg_round(o0, rt), gg_round(o1, rt), gg_round(o2, rt), gg_round(o3, rt));
    }
    if (lane == 0) {
        if (mean) mean[r] = mu;
        if (rstd) rstd[r] = rs;
    }
}
/* quads a lane for k_ln_fwd_vec, or 0 where it does not apply (C not 4 NQ
 * warp for NQ 1..8, or a pointer not 16-byte aligned; y16 and rb16 8-byte) */
/* the quads of a row each lane holds in the register LayerNorm kernels:
 * C / (4 warp) where C is a multiple of 4 warp, up to 8 of them; else 0 */
__host__ __device__ static inline int ln_row_nq(int C)
{
    return C % (4 * PLUMB_WARP) || C / (4 * PLUMB_WARP) > 8 ? 0 : C / (4 * PLUMB_WARP);
}
__host__ __device__ static inline int ln_vec_nq(int C, const void *x, const void *w, const void *b, const void *y,
                                                const void *y16, const void *ra, const void *rb16, const void *rout)
{
    if (((uintptr_t)x | (uintptr_t)w | (uintptr_t)b | (uintptr_t)y | (uintptr_t)ra | (uintptr_t)rout) % 16) return 0;
    if (((uintptr_t)y16 | (uintptr_t)rb16) % 8) return 0;
    return ln_row_nq(C);
}

/* fast dx: one warp per row; dy16 (not NULL): dy given as t16's 16-bit
 * values. A lane takes the row's quads lane, lane + warp, .. (values 4q ..
 * 4q + 3 in order, fewer in a last partial quad): a = sum of g = dy w and c
 * = sum of g xhat (fmaf), then the warp sums; the second pass recomputes g
 * and xhat per quad. float4 (and, for dy16, 8-byte) loads and float4 stores
 * where C % 4 == 0 and every row is 16-byte aligned; the same order either
 * way. (A warp a row with one-value loads took 83 us a call for gpt2-124m's
 * 16384 x 768 on an H100, about 1.5x its bytes' time.) */
__device__ static inline void ln_quad(const float *p, size_t o, int n, bool vec, float *v)
{
    if (vec) {
        const float4 a = *(const float4 *)(p + o);
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
    } else {
        for (int k = 0; k < 4; k++) v[k] = k < n ? p[o + k] : 0.0f;
    }
}
__device__ static inline void ln_quad_dy(const float *dy, const uint16_t *dy16, int t16, size_t o, int n, bool vec,
                                        float *v)
{
    if (!dy16) {
        ln_quad(dy, o, n, vec, v);
    } else if (vec) {
        const uint2 u = *(const uint2 *)(dy16 + o);
        v[0] = from16_of((uint16_t)(u.x & 0xffffu), t16), v[1] = from16_of((uint16_t)(u.x >> 16), t16);
        v[2] = from16_of((uint16_t)(u.y & 0xffffu), t16), v[3] = from16_of((uint16_t)(u.y >> 16), t16);
    } else {
        for (int k = 0; k < 4; k++) v[k] = k < n ? from16_of(dy16[o + k], t16) : 0.0f;
    }
}
/* the backward's per-quad arithmetic, shared by k_ln_bwd_fast<0> and
 * k_ln_bwd_fast<NQ> so that they are the same expressions (the same bits):
 * the first pass's chains a = sum g, c = sum g xhat over the quad's n values;
 * the second pass's outputs of a whole quad, and their stores (float4 and
 * 8-byte 16-bit where vec, else the first n one by one) */
__device__ static inline void ln_bwd_acc(const float *gy, const float *wv, const float *xv, int n, float mu, float rs,
                                         float &a, float &c)
{
    for (int k = 0; k < n; k++) {
        const float g = gy[k] * wv[k];
        a += g;
        c = fmaf(g, (xv[k] - mu) * rs, c);
    }
}
__device__ static inline void ln_bwd_out(const float *gy, const float *wv, const float *xv, const float *rv, bool res,
                                         float mu, float rs, float a, float c, int rt, float *out)
{
    for (int k = 0; k < 4; k++) {
        const float g = gy[k] * wv[k], h = (xv[k] - mu) * rs;
        const float v = ((g - a) - h * c) * rs;
        out[k] = gg_round(res ? rv[k] + v : v, rt);
    }
}
__device__ static inline void ln_bwd_store(float *dx, uint16_t *dx16, size_t o, int n, bool vec, const float *out, int t16)
{
    if (vec) *(float4 *)(dx + o) = make_float4(out[0], out[1], out[2], out[3]);
    else
        for (int k = 0; k < n; k++) dx[o + k] = out[k];
    /* dx16: the same values as t16's 16-bit copy (the cast the next GEMMs read) */
    if (dx16 && vec)
        *(uint2 *)(dx16 + o) = to16x4_of(out[0], out[1], out[2], out[3], t16);
    else if (dx16)
        for (int k = 0; k < n; k++) dx16[o + k] = to16_of(out[k], t16);
}
/* a row held in registers (NQ quads a lane): the backward's a = mean of g
 * and c = mean of g xhat over the row, g = dy w (k_ln_bwd_fast<NQ> and
 * ln_bwd_chunk<NQ>: one expression, the same bits) */
template <int NQ>
__device__ static inline void ln_row_ac(const float (*gy)[4], const float (*xv)[4], const float *w, int lane, float mu,
                                        float rs, int C, float &a, float &c)
{
#pragma unroll
    for (int k = 0; k < NQ; k++) {
        float wv[4];
        ln_quad(w, 4 * (lane + k * PLUMB_WARP), 4, true, wv);
        ln_bwd_acc(gy[k], wv, xv[k], 4, mu, rs, a, c);
    }
    a = plumb_warp_sum(a) / (float)C;
    c = plumb_warp_sum(c) / (float)C;
}
/* whether the backward's pointers allow its float4 quads (8-byte ones for
 * the 16-bit dy16 and dx16; a NULL pointer is aligned) */
__host__ __device__ static inline bool ln_bwd_aligned(const float *x, const float *w, const float *dy, const uint16_t *dy16,
                                                      const float *dres, const float *dx, const uint16_t *dx16)
{
    return !(((uintptr_t)x | (uintptr_t)w | (uintptr_t)dx | (uintptr_t)dres) % 16) &&
           (dy16 ? !((uintptr_t)dy16 % 8) : !((uintptr_t)dy % 16)) && !((uintptr_t)dx16 % 8);
}
/* fast dx, a warp a row. NQ 0: any C and alignment, the row's quads read
 * from memory in each pass (float4 where vec). NQ > 0: C = 4 NQ PLUMB_WARP
 * with vec's alignment (ln_bwd_vec_nq), the row held in registers, so dy (or
 * dy16) and x are read once, not once a pass (NQ 0 took 81 us a call for
 * gpt2-124m's 16384 x 768 on an H100, 2026-12-06 08:35). Both take the same
 * quads a lane through the same helpers in the same order: the same bits. */
template <int NQ = 0>
static __global__ void k_ln_bwd_fast(const float *x, const float *w, const float *mean, const float *rstd, const float *dy,
                                     const uint16_t *dy16, int t16, const float *dres, float *dx, int R, int C, int rt,
                                     uint16_t *dx16 = nullptr)
{
    const int lane = threadIdx.x % PLUMB_WARP;
    const int r = blockIdx.x * (blockDim.x / PLUMB_WARP) + threadIdx.x / PLUMB_WARP;
    if (r >= R) return;
    const size_t o = (size_t)r * C;
    const float mu = mean[r], rs = rstd[r];
    float a = 0.0f, c = 0.0f;
    if constexpr (NQ == 0) {
        const bool vec = (C & 3) == 0 && ln_bwd_aligned(x, w, dy, dy16, dres, dx, dx16);
        const int nq = (C + 3) / 4;
        for (int q = lane; q < nq; q += PLUMB_WARP) {
            const int n = C - 4 * q < 4 ? C - 4 * q : 4;
            float gy[4], wv[4], xv[4];
            ln_quad_dy(dy, dy16, t16, o + 4 * q, n, vec, gy);
            ln_quad(w, 4 * q, n, vec, wv);
            ln_quad(x, o + 4 * q, n, vec, xv);
            ln_bwd_acc(gy, wv, xv, n, mu, rs, a, c);
        }
        a = plumb_warp_sum(a) / (float)C;
        c = plumb_warp_sum(c) / (float)C;
        for (int q = lane; q < nq; q += PLUMB_WARP) {
            const int n = C - 4 * q < 4 ? C - 4 * q : 4;
            float gy[4], wv[4], xv[4], rv[4] = {0.0f, 0.0f, 0.0f, 0.0f}, out[4];
            ln_quad_dy(dy, dy16, t16, o + 4 * q, n, vec, gy);
            ln_quad(w, 4 * q, n, vec, wv);
            ln_quad(x, o + 4 * q, n, vec, xv);
            if (dres) ln_quad(dres, o + 4 * q, n, vec, rv);
            ln_bwd_out(gy, wv, xv, rv, dres != nullptr, mu, rs, a, c, rt, out);
            ln_bwd_store(dx, dx16, o + 4 * q, n, vec, out, t16);
        }
    } else {
        float gy[NQ > 0 ? NQ : 1][4], xv[NQ > 0 ? NQ : 1][4];
#pragma unroll
        for (int k = 0; k < NQ; k++) {
            const int q = lane + k * PLUMB_WARP;
            ln_quad_dy(dy, dy16, t16, o + 4 * q, 4, true, gy[k]);
            ln_quad(x, o + 4 * q, 4, true, xv[k]);
        }
        ln_row_ac<NQ>(gy, xv, w, lane, mu, rs, C, a, c);
#pragma unroll
        for (int k = 0; k < NQ; k++) {
            const int q = lane + k * PLUMB_WARP;
            float wv[4], rv[4] = {0.0f, 0.0f, 0.0f, 0.0f}, out[4];
            ln_quad(w, 4 * q, 4, true, wv);
            if (dres) ln_quad(dres, o + 4 * q, 4, true, rv);
            ln_bwd_out(gy[k], wv, xv[k], rv, dres != nullptr, mu, rs, a, c, rt, out);
            ln_bwd_store(dx, dx16, o + 4 * q, 4, true, out, t16);
        }
    }
}
/* quads a lane for k_ln_bwd_fast<NQ>, or 0 (C not 4 NQ warp for NQ 1..8,
 * or the alignment of the float4 path not there) */
__host__ __device__ static inline int ln_bwd_vec_nq(int C, const float *x, const float *w, const float *dy,
                                                    const uint16_t *dy16, const float *dres, const float *dx,
                                                    const uint16_t *dx16)
{
    return ln_bwd_aligned(x, w, dy, dy16, dres, dx, dx16) ? ln_row_nq(C) : 0;
}

#define LN_ROWS 64
static_assert(LN_ROWS == CS_ROWS, "dsum's chunks are k_colsum_part's");
/* fast dw/db partial sums: part[k][i] over rows [64k, 64k+64) ascending
 * (parts: [nc, np C], w-part then b-part, then dsum's where np is 3).
 * V = 4 (ln_dwdb_vec: C % 4 == 0, x 16-byte and dy / dy16 16- / 8-byte
 * aligned): four columns a thread from one float4 of x and one 8-byte load
 * of dy16 (or a float4 of dy), 8 rows unrolled so their loads issue before
 * the chains need them; each column's chain is V = 1's, in row order: the
 * same bits. (V = 1, a column a thread with 2- and 4-byte loads, took 32 us
 * a call for gpt2-124m's 16384 x 768 on an H100, 75 MB: 2.3 TB/s.) */
template <int V = 1, int T16C = -1>
static __global__ void k_ln_dwdb_part(const float *x, const float *mean, const float *rstd, const float *dy,
                                      const uint16_t *dy16, int t16, float *part, int R, int C, int np = 2)
{
    /* T16C >= 0: dy's type as a compile-time constant (DT_F32: dy, else
     * dy16 of that type), the conversions' branches folded */
    if (T16C == DT_F32) dy16 = nullptr;
    if (T16C > 0) t16 = T16C;
    const bool use16 = T16C >= 0 ? T16C > 0 : dy16 != nullptr;
    const int k = blockIdx.y, r0 = k * LN_ROWS, r1 = r0 + LN_ROWS < R ? r0 + LN_ROWS : R;
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < C / V; j += gridDim.x * blockDim.x) {
        const int i = j * V;
        float aw[V], ab[V];
        for (int q = 0; q < V; q++) aw[q] = 0.0f, ab[q] = 0.0f;
#pragma unroll 8
        for (int r = r0; r < r1; r++) {
            const size_t o = (size_t)r * C + i;
            float g[V], xv[V];
            if constexpr (V == 4) {
                ln_quad(x, o, 4, true, xv);
                ln_quad_dy(dy, use16 ? dy16 : nullptr, t16, o, 4, true, g);
            } else {
                g[0] = use16 ? from16_of(dy16[o], t16) : dy[o];
                xv[0] = x[o];
            }
            const float mu = mean[r], rs = rstd[r];
            for (int q = 0; q < V; q++) {
                aw[q] = fmaf(g[q], (xv[q] - mu) * rs, aw[q]);
                ab[q] = ab[q] + g[q];
            }
        }
        for (int q = 0; q < V; q++) {
            part[(size_t)k * np * C + i + q] = aw[q];
            part[(size_t)k * np * C + C + i + q] = ab[q];
        }
    }
}
/* whether k_ln_dwdb_part<4> applies (its loads' alignment) */
__host__ __device__ static inline bool ln_dwdb_vec(int C, const float *x, const float *dy, const uint16_t *dy16)
{
    return C % 4 == 0 && !((uintptr_t)x % 16) && (dy16 ? !((uintptr_t)dy16 % 8) : !((uintptr_t)dy % 16));
}
/* the chunks' partials [nc, np C] (np 2: dw, db; 3: and dsum) added up:
 * LN_FRUNS interleaved runs (chunk k in run k % LN_FRUNS, ascending), then
 * the runs in order. Blocks of 32 columns x LN_FRUNS runs
 * (ln_dwdb_final_grid): one thread a column summing all nc chunks took 6.5
 * us a call at nc 256. */
#define LN_FRUNS 8
#define LN_FCOLS 32
static inline unsigned ln_dwdb_final_grid(int C, int np = 2)
{
    return (unsigned)((np * C + LN_FCOLS - 1) / LN_FCOLS);
}
static __global__ void __launch_bounds__(LN_FCOLS *LN_FRUNS)
    k_ln_dwdb_final(const float *part, int nc, int C, float *dw, float *db, float *dsum = nullptr)
{
    __shared__ float runs[LN_FRUNS][LN_FCOLS];
    const int np = dsum ? 3 : 2;
    const int t = threadIdx.x % LN_FCOLS, run = threadIdx.x / LN_FCOLS, i = blockIdx.x * LN_FCOLS + t;
    float s = 0.0f;
    if (i < np * C)
        for (int k = run; k < nc; k += LN_FRUNS) s = s + part[(size_t)k * np * C + i];
    runs[run][t] = s;
    __syncthreads();
    if (run || i >= np * C) return;
    for (int u = 1; u < LN_FRUNS; u++) s = s + runs[u][t];
    if (i < C) dw[i] = s;
    else if (i < 2 * C) db[i - C] = s;
    else dsum[i - 2 * C] = s;
}

/* The fused fast LayerNorm backward (PLUMB_GPT_LN_FUSED): one block a
 * 64-row chunk does what k_ln_bwd_fast<NQ>, k_ln_dwdb_part and (np 3)
 * k_colsum_part over dx16 do for it, reading x, dy (or dy16) and dres once
 * instead of two or three times (gpt2-124m's 16384 x 768: 76.6 + 33.3 + 18.0
 * us a call for the three on an H100, 200 + 75 + 25 MB).
 *   Rounds of LNF_TPB / PLUMB_WARP rows (a warp a row): each warp computes
 *   its row's dx with k_ln_bwd_fast<NQ>'s helpers (the same bits) and leaves
 *   the row's dw/db terms g = dy and h = (x - mean) rstd, and dx16, in shared
 *   memory; then thread t adds them for columns t, t + LNF_TPB, ... into its
 *   running chunk sums, rows in ascending order: the parts' chains, the same
 *   bits as k_ln_dwdb_part (aw = fma(g, h, aw), ab = ab + g) and as
 *   k_colsum_part over dx16 (from 0, ascending). The next round's dy and x
 *   are loaded before those adds, so the loads overlap them (dres is read
 *   at the start of the row's turn: held across the adds too, it took 149
 *   registers, one block an SM).
 * C = 4 NQ warp with ln_bwd_aligned's alignment (ln_bwd_vec_nq); dsum only
 * with dx16. Shared memory: lnf_smem_bytes(C) (dynamic; 60 KiB at C 768;
 * every row of each array starts 16-byte aligned, C being a multiple of 4).
 * part: [nc, np C] as k_ln_dwdb_part writes it. */
#define LNF_TPB 256
#define LNF_NW (LNF_TPB / PLUMB_WARP) /* rows a round */
__host__ __device__ static inline size_t lnf_smem_bytes(int C)
{
    return (size_t)LNF_NW * C * (2 * sizeof(float) + sizeof(uint16_t));
}
template <int NQ>
__device__ static void ln_bwd_chunk(const float *x, const float *w, const float *mean, const float *rstd,
                                    const float *dy, const uint16_t *dy16, int t16, const float *dres, float *dx,
                                    int R, int C, int rt, uint16_t *dx16, float *part, int np, float *smem)
{
    float *sg = smem, *sh = smem + (size_t)LNF_NW * C;
    uint16_t *sd = (uint16_t *)(smem + 2 * (size_t)LNF_NW * C);
    const int lane = threadIdx.x % PLUMB_WARP, wid = threadIdx.x / PLUMB_WARP;
    const int r0 = blockIdx.x * LN_ROWS, r1 = r0 + LN_ROWS < R ? r0 + LN_ROWS : R;
    const bool sum16 = np == 3 && dx16;
    /* the chunk sums of columns threadIdx.x + m LNF_TPB, m < CPT */
    constexpr int CPT = (4 * NQ * PLUMB_WARP + LNF_TPB - 1) / LNF_TPB;
    float aw[CPT], ab[CPT], as[CPT];
#pragma unroll
    for (int m = 0; m < CPT; m++) aw[m] = ab[m] = as[m] = 0.0f;
    float gy[NQ][4], xv[NQ][4];
    int r = r0 + wid;
    auto load = [&](int row) {
        const size_t o = (size_t)row * C;
#pragma unroll
        for (int k = 0; k < NQ; k++) {
            const size_t q = o + 4 * (size_t)(lane + k * PLUMB_WARP);
            ln_quad_dy(dy, dy16, t16, q, 4, true, gy[k]);
            ln_quad(x, q, 4, true, xv[k]);
        }
    };
    if (r < r1) load(r);
    for (int rb = r0; rb < r1; rb += LNF_NW) {
        const int nr = r1 - rb < LNF_NW ? r1 - rb : LNF_NW;
        if (r < r1) { /* warp-uniform */
            const size_t o = (size_t)r * C;
            const float mu = mean[r], rs = rstd[r];
            /* the row's dres, all of it before the first dx store: dx may
             * alias dres, so a load after a store would wait for it */
            float rv[NQ][4];
#pragma unroll
            for (int k = 0; k < NQ; k++) {
                if (dres) ln_quad(dres, o + 4 * (lane + k * PLUMB_WARP), 4, true, rv[k]);
                else rv[k][0] = rv[k][1] = rv[k][2] = rv[k][3] = 0.0f;
            }
            float a = 0.0f, c = 0.0f;
            ln_row_ac<NQ>(gy, xv, w, lane, mu, rs, C, a, c);
#pragma unroll
            for (int k = 0; k < NQ; k++) {
                const int col = 4 * (lane + k * PLUMB_WARP);
                float wv[4], out[4];
                ln_quad(w, col, 4, true, wv);
                ln_bwd_out(gy[k], wv, xv[k], rv[k], dres != nullptr, mu, rs, a, c, rt, out);
                ln_bwd_store(dx, dx16, o + col, 4, true, out, t16);
                /* one 16-byte store a lane (8 for dx16): a warp's 32 lanes
                 * write 512 consecutive bytes, no bank conflict; four
                 * scalar stores 16 bytes apart a lane were 4-way conflicts */
                const size_t s0 = (size_t)wid * C + col;
                *(float4 *)(sg + s0) = make_float4(gy[k][0], gy[k][1], gy[k][2], gy[k][3]);
                *(float4 *)(sh + s0) = make_float4((xv[k][0] - mu) * rs, (xv[k][1] - mu) * rs,
                                                   (xv[k][2] - mu) * rs, (xv[k][3] - mu) * rs);
                if (sum16) *(uint2 *)(sd + s0) = to16x4_of(out[0], out[1], out[2], out[3], t16);
            }
        }
        __syncthreads();
        r += LNF_NW;
        if (r < r1) load(r); /* in flight during the adds below */
#pragma unroll
        for (int m = 0; m < CPT; m++) { /* unrolled: the sums stay in registers */
            const int col = (int)threadIdx.x + m * LNF_TPB;
            if (col >= C) continue;
            for (int u = 0; u < nr; u++) {
                const float g = sg[(size_t)u * C + col];
                aw[m] = fmaf(g, sh[(size_t)u * C + col], aw[m]);
                ab[m] = ab[m] + g;
                if (sum16) as[m] = as[m] + from16_of(sd[(size_t)u * C + col], t16);
            }
        }
        __syncthreads();
    }
    float *pk = part + (size_t)blockIdx.x * np * C;
#pragma unroll
    for (int m = 0; m < CPT; m++) {
        const int col = (int)threadIdx.x + m * LNF_TPB;
        if (col >= C) continue;
        pk[col] = aw[m];
        pk[C + col] = ab[m];
        if (np == 3) pk[2 * C + col] = as[m];
    }
}
#if defined(__CUDACC__) || defined(__HIPCC__)
template <int NQ>
static __global__ void __launch_bounds__(LNF_TPB, 2) /* two chunks an SM: 16 rows in flight */
    k_ln_bwd_chunk(const float *x, const float *w, const float *mean, const float *rstd, const float *dy,
                   const uint16_t *dy16, int t16, const float *dres, float *dx, int R, int C, int rt, uint16_t *dx16,
                   float *part, int np)
{
    extern __shared__ float4 lnf_smem4[];
    ln_bwd_chunk<NQ>(x, w, mean, rstd, dy, dy16, t16, dres, dx, R, C, rt, dx16, part, np, (float *)lnf_smem4);
}
#endif

/* ---------------- the classifier's rows ---------------- */

/* fast rows: one block per row of z [V] (fp32 logits, read as rounded to rt;
 * or rt's 16-bit logits, the GEMM's rounded output). Two passes over the
 * row, eight logits (one 16-byte load of 16-bit logits, two float4 of fp32)
 * a step where ld % 8 == 0 (the classifier's rows: 16-byte aligned from the
 * 256-byte aligned chunk), the rest one by one:
 *   1. each thread keeps (m, s), m the largest z log2(e) it has seen and s
 *      the sum of 2^(z log2(e) - m); per step it takes the eight values'
 *      max first, so s is rescaled at most once a step (not once a value),
 *      then the threads' pairs meet against the block max;
 *   2. the gradient g = 2^(z log2(e) - mb) (gs / l), minus gs at the target
 *      (rounded once to rt: the 16-bit store rounds), stored in place (g16
 *      NULL) or as the 16-bit copy g16.
 * Loss = mb ln 2 + ln l - z[target]. Bytes per logit: 16-bit logits in place
 * 2 read + 2 read + 2 written; fp32 logits 4 + 4 read + 2 or 4 written.
 * (One value a step, with a rescale test per value and the natural-log
 * expf, took 638 us a 4096-row chunk of gpt2's 16-bit logits on an H100,
 * 2026-12-06 08:24, against about 370 for its bytes: the instructions, not
 * the loads, set its pace. A row held in registers, 1024 threads a row so
 * that it is read once, was slower: 43.40 against 41.96 ms a gpt2-124m step
 * on an H100, 2026-12-06 06:51; with one 100 KB row a SM at a time, its load
 * and its two block reductions do not overlap another row's.) Each thread
 * takes the same values in the same order whatever the storage, so fp32
 * logits rounded to rt and the same logits as 16-bit values give the same
 * bits. RT is rt (DT_F32, DT_BF16, DT_F16) as a constant. */
#define XENT_LOG2E 1.4426950408889634f
#define XENT_LN2 0.6931471805599453f
template <int RT> __device__ static inline void xent_ld8(const float *zr, int o, float *v)
{
    const float4 a = ((const float4 *)zr)[2 * o], b = ((const float4 *)zr)[2 * o + 1];
    v[0] = gg_round(a.x, RT), v[1] = gg_round(a.y, RT), v[2] = gg_round(a.z, RT), v[3] = gg_round(a.w, RT);
    v[4] = gg_round(b.x, RT), v[5] = gg_round(b.y, RT), v[6] = gg_round(b.z, RT), v[7] = gg_round(b.w, RT);
}
template <int RT> __device__ static inline void xent_ld8(const uint16_t *zr, int o, float *v)
{
    from16x8_of(((const uint4 *)zr)[o], v, RT);
}
template <int RT> __device__ static inline float xent_one(const float *zr, int v) { return gg_round(zr[v], RT); }
template <int RT> __device__ static inline float xent_one(const uint16_t *zr, int v) { return from16_of(zr[v], RT); }
/* this thread's running max m (log2 units) raised to mx where mx is larger,
 * its sum s rescaled to match (m = -inf at the start: s = 0 * 0) */
__device__ static inline void xent_rescale(float mx, float &m, float &s)
{
    if (mx > m) {
        s *= exp2f(m - mx);
        m = mx;
    }
}
/* this thread's (m, s) after value x (log2 units) */
__device__ static inline void xent_acc1(float x, float &m, float &s)
{
    xent_rescale(x, m, s);
    s += exp2f(x - m);
}
/* the eight gradient values of step o (target tg, live = tg >= 0) into g */
__device__ static inline void xent_g8(const float *v, int o, int tg, float mb, float c, float gs, float *g)
{
#pragma unroll
    for (int k = 0; k < 8; k++) g[k] = exp2f(fmaf(v[k], XENT_LOG2E, -mb)) * c;
    if ((unsigned)(tg - 8 * o) < 8u) /* the target's step: one thread, once */
#pragma unroll
        for (int k = 0; k < 8; k++)
            if (8 * o + k == tg) g[k] -= gs;
}
/* zs: where the row's logits are read (zr itself, or its copy staged in
 * shared memory by k_xent_rows_staged); zr: where an in-place fp32
 * gradient goes (gr NULL) */
template <typename ZT, int RT>
__device__ static inline void xent_row(const ZT *zs, ZT *zr, uint16_t *gr, int tg, int V, int ld, float gs, int grad,
                                       float *loss, float *red)
{
    const int V8 = (ld & 7) == 0 ? V >> 3 : 0; /* whole steps of eight, then V8 8 .. V - 1 one by one */
    float m = -INFINITY, s = 0.0f;
    for (int o = threadIdx.x; o < V8; o += blockDim.x) {
        float v[8];
        xent_ld8<RT>(zs, o, v);
        const float mx =
            fmaxf(fmaxf(fmaxf(v[0], v[1]), fmaxf(v[2], v[3])), fmaxf(fmaxf(v[4], v[5]), fmaxf(v[6], v[7]))) * XENT_LOG2E;
        xent_rescale(mx, m, s);
#pragma unroll
        for (int k = 0; k < 8; k++) s += exp2f(fmaf(v[k], XENT_LOG2E, -m));
    }
    for (int v = 8 * V8 + threadIdx.x; v < V; v += blockDim.x) xent_acc1(xent_one<RT>(zs, v) * XENT_LOG2E, m, s);
    const float mb = plumb_block_max(m, red);
    const float l = plumb_block_sum(m == -INFINITY ? 0.0f : s * exp2f(m - mb), red);
    if (threadIdx.x == 0) *loss = tg < 0 ? 0.0f : fmaf(mb, XENT_LN2, logf(l)) - xent_one<RT>(zs, tg);
    if (!grad) return;
    __syncthreads(); /* zs[tg] read before zr (zs itself unstaged) is overwritten */
    const float c = tg < 0 ? 0.0f : gs / l, gt = tg < 0 ? 0.0f : gs;
    for (int o = threadIdx.x; o < V8; o += blockDim.x) {
        float v[8], g[8];
        xent_ld8<RT>(zs, o, v);
        xent_g8(v, o, tg, mb, c, gt, g);
        if (tg < 0)
#pragma unroll
            for (int k = 0; k < 8; k++) g[k] = 0.0f; /* no target: 0, whatever the logits (NaN included) */
        if (gr) {
            const uint2 lo = to16x4_of(g[0], g[1], g[2], g[3], RT), hi = to16x4_of(g[4], g[5], g[6], g[7], RT);
            ((uint4 *)gr)[o] = make_uint4(lo.x, lo.y, hi.x, hi.y);
        } else {
            float4 *f = (float4 *)zr;
            f[2 * o] = make_float4(gg_round(g[0], RT), gg_round(g[1], RT), gg_round(g[2], RT), gg_round(g[3], RT));
            f[2 * o + 1] = make_float4(gg_round(g[4], RT), gg_round(g[5], RT), gg_round(g[6], RT), gg_round(g[7], RT));
        }
    }
    for (int v = 8 * V8 + threadIdx.x; v < V; v += blockDim.x) {
        float gv = exp2f(fmaf(xent_one<RT>(zs, v), XENT_LOG2E, -mb)) * c;
        if (v == tg) gv -= gt;
        if (tg < 0) gv = 0.0f;
        if (gr) gr[v] = to16_of(gv, RT);
        else ((float *)zr)[v] = gg_round(gv, RT);
    }
    /* the padding columns V..ld-1 of the gradient are 0: the dx GEMM that
     * follows contracts over all ld columns (train_gpt_gemm.cu: a multiple
     * of 8, so cuBLASLt can take its aligned kernels) */
    for (int v = V + threadIdx.x; v < ld; v += blockDim.x) {
        if (gr) gr[v] = 0;
        else ((float *)zr)[v] = 0.0f;
    }
}
/* ZT float: z fp32 logits, the gradient in place (g16 NULL) or into g16;
 * ZT uint16_t: z the 16-bit logits, g16 == z (the gradient overwrites them:
 * a thread writes only the steps and values it has just read). Any block
 * size that is a multiple of the warp, up to 1024. */
template <typename ZT>
static __global__ void k_xent_rows_fast(ZT *z, uint16_t *g16, const int32_t *tgt, int V, int ld, float gs, int grad,
                                        float *loss, int rt)
{
    /* z [rows, ld] (the first V columns of each row are the logits; ld >= V);
     * g16 the same layout */
    __shared__ float red[PLUMB_WARP];
    const int r = blockIdx.x;
    ZT *zr = z + (size_t)r * ld;
    uint16_t *gr = g16 ? g16 + (size_t)r * ld : NULL;
    if (rt == DT_BF16) xent_row<ZT, DT_BF16>(zr, zr, gr, tgt[r], V, ld, gs, grad, loss + r, red);
    else if (rt == DT_F16) xent_row<ZT, DT_F16>(zr, zr, gr, tgt[r], V, ld, gs, grad, loss + r, red);
    else xent_row<ZT, DT_F32>(zr, zr, gr, tgt[r], V, ld, gs, grad, loss + r, red);
}
/* A row of 16-bit logits [ld] copied whole into shared memory `st` (ld a
 * multiple of 8, zr 16-byte aligned), every thread past the copy when it
 * returns. On sm_90 one thread hands the copy to the bulk copy engine
 * (cp.async.bulk, completion counted in bytes on the mbarrier *bar), so a
 * SM's other row block keeps computing while this one's 100 KB arrive;
 * elsewhere (and in tests/tools/gpu_emu.cc) the threads copy 16 bytes each. */
__device__ static inline void xent_stage16(uint16_t *st, const uint16_t *zr, int ld, unsigned long long *bar)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(PLUMB_HIP)
    const unsigned b = (unsigned)__cvta_generic_to_shared(bar), dst = (unsigned)__cvta_generic_to_shared(st);
    const unsigned bytes = (unsigned)ld * 2u;
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(b) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(bytes) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
                     "l"(zr), "r"(bytes), "r"(b)
                     : "memory");
    }
    __syncthreads(); /* the barrier initialised before anyone waits on it */
    unsigned done = 0;
    while (!done)
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n selp.u32 %0, 1, 0, p;\n}"
                     : "=r"(done)
                     : "r"(b)
                     : "memory");
#else
    (void)bar;
    for (int i = threadIdx.x; i < ld / 8; i += blockDim.x) ((uint4 *)st)[i] = ((const uint4 *)zr)[i];
    __syncthreads();
#endif
}
/* k_xent_rows_fast's 16-bit in-place rows (z16 == g16), each row read from
 * memory once: staged whole in `st` (ld 16-bit values, shared memory), both
 * passes read there, the gradient written over the row in memory. The same
 * threads take the same values in the same order as k_xent_rows_fast: the
 * same bits. (k_xent_rows_fast reads a row twice, the second time mostly
 * from the L2: 356 us a 4096-row chunk of gpt2's logits on an H100,
 * 2026-12-06 17:43, for about 250 us of bytes.) */
__device__ static inline void xent_row_staged16(uint16_t *z, uint16_t *st, unsigned long long *bar, const int32_t *tgt,
                                                int V, int ld, float gs, int grad, float *loss, int rt, float *red)
{
    const int r = blockIdx.x;
    uint16_t *zr = z + (size_t)r * ld;
    xent_stage16(st, zr, ld, bar);
    if (rt == DT_BF16) xent_row<uint16_t, DT_BF16>(st, zr, zr, tgt[r], V, ld, gs, grad, loss + r, red);
    else xent_row<uint16_t, DT_F16>(st, zr, zr, tgt[r], V, ld, gs, grad, loss + r, red);
}
#if defined(__CUDACC__) || defined(__HIPCC__)
/* a block a row; dynamic shared memory ld * 2 bytes (xent_row_staged16) */
static __global__ void k_xent_rows_staged(uint16_t *z, const int32_t *tgt, int V, int ld, float gs, int grad,
                                          float *loss, int rt)
{
    extern __shared__ uint4 xent_stage_buf[];
    __shared__ float red[PLUMB_WARP];
    __shared__ unsigned long long bar;
    xent_row_staged16(z, (uint16_t *)xent_stage_buf, &bar, tgt, V, ld, gs, grad, loss, rt, red);
}
#endif
/* ---------------- the loss sum ---------------- */

/* sum_count = {the valid rows' losses added in double in ascending r from
 * +0.0, their count} (both modes; cpu: the same chain). The chain is serial,
 * but where no add of it rounds, every order of adds gives its bits: each
 * nonzero loss is an integer multiple of 2^lsb (lsb: the exponent of its
 * lowest set bit), so every partial sum of any subset is a multiple of 2^lsb
 * no larger than A = sum |loss|; when A < 2^(53 + lsb) each such sum is a
 * double, every add exact, and the threads' partial sums, combined in any
 * order, give the chain's bits. A is summed in double too (a lower bound
 * within n 2^-53 of it: the margin 2^-20 covers n up to 2^33). For gpt's
 * losses (about 2..11, full mantissas: lsb about -22) that holds up to
 * 2^31 / 11 rows; a loss far smaller than the rest (1e-6 beside 16384 losses
 * near 3), a NaN or an infinity takes the chain itself, thread 0 adding the
 * tiles the block stages in shared memory (one thread reading global memory
 * for each add took 1 ms for 16384 rows on the H200); the count is the
 * first pass's either way. One block of XSUM_TPB threads. */
#define XSUM_TILE 2048
#define XSUM_TPB 256
#define XSUM_NO_LSB 100000 /* no nonzero loss yet */
/* the exponent of v's lowest set bit (v finite, nonzero) */
__device__ static inline int xsum_lsb(float v)
{
    const uint32_t b = f32_bits(v), ex = (b >> 23) & 0xffu;
    uint32_t m = b & 0x7fffffu;
    if (ex) m |= 0x800000u;
    int z = 0;
    while (!(m & 1u)) m >>= 1, z++;
    return (ex ? (int)ex - 150 : -149) + z;
}
static __global__ void k_xent_sum(const float *loss, const int32_t *tgt, int R, double *sc)
{
    __shared__ float lb[2][XSUM_TILE];
    __shared__ int ok[2][XSUM_TILE];
    __shared__ double ps[XSUM_TPB], pa[XSUM_TPB];
    __shared__ long long pn[XSUM_TPB];
    __shared__ int pl[XSUM_TPB], pbad[XSUM_TPB], chain;
    const int t = threadIdx.x;
    double s = 0.0, a = 0.0;
    long long n = 0;
    int lsb = XSUM_NO_LSB, bad = 0;
    for (int i = t; i < R; i += blockDim.x) {
        if (tgt[i] < 0) continue;
        const float v = loss[i];
        n++;
        if (!(fabsf(v) <= 3.4028234663852886e38f)) { /* NaN or infinity */
            bad = 1;
            continue;
        }
        if (v == 0.0f) continue;
        s += (double)v;
        a += (double)fabsf(v);
        const int l = xsum_lsb(v);
        if (l < lsb) lsb = l;
    }
    ps[t] = s, pa[t] = a, pn[t] = n, pl[t] = lsb, pbad[t] = bad;
    __syncthreads();
    if (t == 0) {
        for (int j = 1; j < (int)blockDim.x; j++) {
            s += ps[j], a += pa[j], n += pn[j], bad |= pbad[j];
            if (pl[j] < lsb) lsb = pl[j];
        }
        chain = bad || (lsb != XSUM_NO_LSB && !(a * (1.0 + 9.5367431640625e-07) < ldexp(1.0, 53 + lsb)));
        if (!chain) {
            sc[0] = s;
            sc[1] = (double)n;
        }
    }
    __syncthreads();
    if (!chain) return;
    /* the chain: thread 0 adds in order while the block stages the next tile
     * (its n is already the block's count) */
    s = 0.0;
    const int nt = (R + XSUM_TILE - 1) / XSUM_TILE;
    for (int i = t; i < XSUM_TILE && i < R; i += blockDim.x) {
        lb[0][i] = loss[i];
        ok[0][i] = tgt[i] >= 0;
    }
    __syncthreads();
    for (int k = 0; k < nt; k++) {
        if (k + 1 < nt) { /* the other buffer, last read in round k - 1 */
            const int o = (k + 1) * XSUM_TILE, len = R - o < XSUM_TILE ? R - o : XSUM_TILE, b = (k + 1) & 1;
            for (int i = t; i < len; i += blockDim.x) {
                lb[b][i] = loss[o + i];
                ok[b][i] = tgt[o + i] >= 0;
            }
        }
        if (t == 0) {
            const int o = k * XSUM_TILE, len = R - o < XSUM_TILE ? R - o : XSUM_TILE, b = k & 1;
            for (int i = 0; i < len; i++)
                if (ok[b][i]) s += (double)lb[b][i];
        }
        __syncthreads();
    }
    if (t == 0) {
        sc[0] = s;
        sc[1] = (double)n;
    }
}
/* ---------------- flash attention ---------------- */

/* max / sum over the TPR lanes of a row group (consecutive, aligned lanes of one warp) */
template <int TPR> __device__ static inline float group_max(float v)
{
#pragma unroll
    for (int o = TPR / 2; o > 0; o >>= 1) v = fmaxf(v, plumb_shfl_xor(v, o));
    return v;
}
template <int TPR> __device__ static inline float group_sum(float v)
{
#pragma unroll
    for (int o = TPR / 2; o > 0; o >>= 1) v += plumb_shfl_xor(v, o);
    return v;
}

/* rows [r0, r0 + NR) of the q (part 0), k (1) or v (2) columns of head h into
 * S [NR][HSM + 1]; rows past T are 0 */
template <int NR, int HSM>
__device__ static inline void load_rows(float (*S)[HSM + 1], const float *base, int part, int r0, int T, int C, int HS)
{
    const size_t C3 = 3 * (size_t)C;
    for (int idx = threadIdx.x; idx < NR * HS; idx += NT) {
        const int rr = idx / HS, i = idx - rr * HS, t = r0 + rr;
        S[rr][i] = t < T ? base[(size_t)t * C3 + (size_t)part * C + i] : 0.0f;
    }
}
/* the same for a [B, T, C] tensor (dout, out) */
template <int NR, int HSM>
__device__ static inline void load_rows_c(float (*S)[HSM + 1], const float *base, int r0, int T, int C, int HS)
{
    for (int idx = threadIdx.x; idx < NR * HS; idx += NT) {
        const int rr = idx / HS, i = idx - rr * HS, t = r0 + rr;
        S[rr][i] = t < T ? base[(size_t)t * C + i] : 0.0f;
    }
}

template <int BR, int HSM>
__global__ void __launch_bounds__(NT) k_flash_fwd(const float *qkv, float *out, float *lse, int T, int NH, int HS,
                                                  float scale, int rt)
{
    constexpr int BC = BR, TPR = NT / BR, NS = BC / TPR, NO = HSM / TPR;
    __shared__ float Qs[BR][HSM + 1], Ks[BC][HSM + 1], Vs[BC][HSM + 1], Ps[BR][BC + 1];
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH, C = NH * HS;
    const float *base = qkv + (size_t)b * T * 3 * C + (size_t)h * HS;
    const int r = threadIdx.x / TPR, sub = threadIdx.x % TPR;
    const int q0 = blockIdx.x * BR, t = q0 + r;
    load_rows<BR, HSM>(Qs, base, 0, q0, T, C, HS);
    float m = -INFINITY, l = 0.0f, o[NO];
#pragma unroll
    for (int q = 0; q < NO; q++) o[q] = 0.0f;
    const int last = q0 + BR - 1 < T - 1 ? q0 + BR - 1 : T - 1; /* the tile's last query */
    for (int k0 = 0; k0 <= last; k0 += BC) {
        __syncthreads(); /* the previous tile's K, V, P are no longer read */
        load_rows<BC, HSM>(Ks, base, 1, k0, T, C, HS);
        load_rows<BC, HSM>(Vs, base, 2, k0, T, C, HS);
        __syncthreads();
        float s[NS], mt = -INFINITY;
#pragma unroll
        for (int q = 0; q < NS; q++) {
            const int jj = sub + TPR * q, j = k0 + jj;
            float a = -INFINITY;
            if (t < T && j <= t) {
                float acc = 0.0f;
                for (int i = 0; i < HS; i++) acc = fmaf(Qs[r][i], Ks[jj][i], acc);
                a = acc * scale;
            }
            s[q] = a;
            mt = fmaxf(mt, a);
        }
        mt = group_max<TPR>(mt);
        const float mn = fmaxf(m, mt);
        const float alpha = m == -INFINITY ? 0.0f : expf(m - mn);
        float ps = 0.0f;
#pragma unroll
        for (int q = 0; q < NS; q++) {
            const float p = s[q] == -INFINITY ? 0.0f : expf(s[q] - mn);
            Ps[r][sub + TPR * q] = p;
            ps += p;
        }
        ps = group_sum<TPR>(ps);
        l = l * alpha + ps;
        m = mn;
        __syncthreads(); /* the row's P from the other lanes of its group */
#pragma unroll
        for (int q = 0; q < NO; q++) {
            const int i = sub + TPR * q;
            float acc = 0.0f;
            if (i < HS)
                for (int jj = 0; jj < BC; jj++) acc = fmaf(Ps[r][jj], Vs[jj][i], acc);
            o[q] = fmaf(o[q], alpha, acc);
        }
    }
    if (t >= T) return;
    const float inv = 1.0f / l;
    float *orow = out + ((size_t)b * T + t) * C + (size_t)h * HS;
#pragma unroll
    for (int q = 0; q < NO; q++) {
        const int i = sub + TPR * q;
        if (i < HS) orow[i] = gg_round(o[q] * inv, rt);
    }
    if (sub == 0) lse[(size_t)bh * T + t] = m + logf(l);
}

/* D[bh, t] = dout_t . out_t over the head's HS columns: a warp per row
 * (grid-stride over rows, any grid), lane i taking columns i, i + W, ...,
 * then the warp's fixed butterfly (deterministic). One thread per row had
 * each warp's 32 loads fall in 32 rows C floats apart. */
/* The backward's row dots, D [B NH, T]: D[(b NH + h) T + t] = dout_t . out_t
 * over head h's HS values (out, dout [B, T, NH HS], fp32, or 16-bit t16
 * values where out16 / dout16 are given). Eight lanes a row: lane j of the
 * group takes the row's 8-value chunks j, j + 8, j + 16, .. (chunk c: values
 * 8c .. 8c + 7, fewer in a last partial one) in ascending order as one fmaf
 * chain, dout times out; the group's eight sums then add in a butterfly
 * (xor 4, 2, 1). One 16-byte load (or two float4) a chunk where vec (HS % 8
 * == 0 and the tensors 16-byte aligned); the same order either way. (One
 * warp a row with 2-byte loads took 69 us a layer for gpt2-124m on an H100,
 * the 16-bit tensors' bytes about 17.) */
#define ROWDOT_G 8 /* lanes a row */
static __global__ void k_flash_bwd_pre(const float *out, const float *dout, float *D, int B, int T, int NH, int HS,
                                       const uint16_t *out16 = NULL, const uint16_t *dout16 = NULL, int t16 = 0,
                                       int vec = 0)
{
    const size_t rows = (size_t)B * NH * T;
    const int j = threadIdx.x % ROWDOT_G;
    const size_t g0 = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / ROWDOT_G;
    const size_t ng = (size_t)gridDim.x * blockDim.x / ROWDOT_G;
    const size_t C = (size_t)NH * HS;
    /* every lane runs the same trips (the shuffles need the whole warp):
     * blockDim.x is a multiple of the warp, so rows past the end only skip
     * their loads and their store */
    const size_t trips = (rows + ng - 1) / ng;
    for (size_t k = 0; k < trips; k++) {
        const size_t q = g0 + k * ng;
        float acc = 0.0f;
        if (q < rows) {
            const int t = (int)(q % T), h = (int)(q / T % NH), b = (int)(q / ((size_t)T * NH));
            const size_t o = ((size_t)b * T + t) * C + (size_t)h * HS;
            for (int c0 = 8 * j; c0 < HS; c0 += 8 * ROWDOT_G) {
                float x[8], y[8];
                if (vec && out16) {
                    from16x8_of(*(const uint4 *)(dout16 + o + c0), x, t16);
                    from16x8_of(*(const uint4 *)(out16 + o + c0), y, t16);
                } else if (vec) {
                    const float4 a0 = *(const float4 *)(dout + o + c0), a1 = *(const float4 *)(dout + o + c0 + 4);
                    const float4 b0 = *(const float4 *)(out + o + c0), b1 = *(const float4 *)(out + o + c0 + 4);
                    x[0] = a0.x, x[1] = a0.y, x[2] = a0.z, x[3] = a0.w, x[4] = a1.x, x[5] = a1.y, x[6] = a1.z, x[7] = a1.w;
                    y[0] = b0.x, y[1] = b0.y, y[2] = b0.z, y[3] = b0.w, y[4] = b1.x, y[5] = b1.y, y[6] = b1.z, y[7] = b1.w;
                } else {
                    for (int i = 0; i < 8; i++) {
                        x[i] = c0 + i < HS ? ld_any(dout, dout16, o + c0 + i, t16) : 0.0f;
                        y[i] = c0 + i < HS ? ld_any(out, out16, o + c0 + i, t16) : 0.0f;
                    }
                }
                const int n = HS - c0 < 8 ? HS - c0 : 8;
                for (int i = 0; i < n; i++) acc = fmaf(x[i], y[i], acc);
            }
        }
        for (int off = ROWDOT_G / 2; off > 0; off >>= 1) acc += plumb_shfl_xor(acc, off);
        if (j == 0 && q < rows) D[q] = acc;
    }
}
/* vec for k_flash_bwd_pre: every chunk one aligned 16-byte (16-bit) or two
 * float4 loads */
static inline int rowdot_vec(const void *out, const void *dout, int HS)
{
    return HS % 8 == 0 && !((uintptr_t)out % 16) && !((uintptr_t)dout % 16);
}


/* P and dS of the [BR x BC] tile (queries q0.., keys k0..) into Ps, dSs:
 * each thread a strided set of elements */
template <int BR, int HSM>
__device__ static inline void tile_p_ds(float (*Qs)[HSM + 1], float (*dOs)[HSM + 1], float (*Ks)[HSM + 1],
                                        float (*Vs)[HSM + 1], const float *Ls, const float *Ds, float (*Ps)[BR + 1],
                                        float (*dSs)[BR + 1], int q0, int k0, int T, int HS, float scale)
{
    for (int el = threadIdx.x; el < BR * BR; el += NT) {
        const int rr = el / BR, cc = el - rr * BR, t = q0 + rr, j = k0 + cc;
        float p = 0.0f, ds = 0.0f;
        if (t < T && j <= t) {
            float a = 0.0f, dp = 0.0f;
            for (int i = 0; i < HS; i++) {
                a = fmaf(Qs[rr][i], Ks[cc][i], a);
                dp = fmaf(dOs[rr][i], Vs[cc][i], dp);
            }
            p = expf(a * scale - Ls[rr]);
            ds = p * (dp - Ds[rr]);
        }
        if (Ps) Ps[rr][cc] = p;
        dSs[rr][cc] = ds;
    }
}

template <int BR, int HSM>
__global__ void __launch_bounds__(NT) k_flash_bwd_dkv(const float *qkv, const float *dout, const float *lse,
                                                      const float *D, float *dqkv, int T, int NH, int HS, float scale,
                                                      int rt)
{
    constexpr int BC = BR, TPK = NT / BC, NO = HSM / TPK;
    __shared__ float Ks[BC][HSM + 1], Vs[BC][HSM + 1], Qs[BR][HSM + 1], dOs[BR][HSM + 1];
    __shared__ float Ps[BR][BC + 1], dSs[BR][BC + 1], Ls[BR], Ds[BR];
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH, C = NH * HS;
    const float *base = qkv + (size_t)b * T * 3 * C + (size_t)h * HS;
    const float *dob = dout + (size_t)b * T * C + (size_t)h * HS;
    const int c = threadIdx.x / TPK, sub = threadIdx.x % TPK;
    const int k0 = blockIdx.x * BC;
    load_rows<BC, HSM>(Ks, base, 1, k0, T, C, HS);
    load_rows<BC, HSM>(Vs, base, 2, k0, T, C, HS);
    float dk[NO], dv[NO];
#pragma unroll
    for (int q = 0; q < NO; q++) dk[q] = dv[q] = 0.0f;
    for (int q0 = k0 / BR * BR; q0 < T; q0 += BR) { /* the query tiles at or after the key tile, ascending */
        __syncthreads();
        load_rows<BR, HSM>(Qs, base, 0, q0, T, C, HS);
        load_rows_c<BR, HSM>(dOs, dob, q0, T, C, HS);
        for (int rr = threadIdx.x; rr < BR; rr += NT) {
            const int t = q0 + rr;
            Ls[rr] = t < T ? lse[(size_t)bh * T + t] : 0.0f;
            Ds[rr] = t < T ? D[(size_t)bh * T + t] : 0.0f;
        }
        __syncthreads();
        tile_p_ds<BR, HSM>(Qs, dOs, Ks, Vs, Ls, Ds, Ps, dSs, q0, k0, T, HS, scale);
        __syncthreads();
#pragma unroll
        for (int q = 0; q < NO; q++) {
            const int i = sub + TPK * q;
            if (i >= HS) continue;
            float a = dk[q], v = dv[q];
            for (int rr = 0; rr < BR; rr++) { /* queries ascending */
                v = fmaf(Ps[rr][c], dOs[rr][i], v);
                a = fmaf(dSs[rr][c], Qs[rr][i], a);
            }
            dk[q] = a;
            dv[q] = v;
        }
    }
    const int j = k0 + c;
    if (j >= T) return;
    float *dkr = dqkv + ((size_t)b * T + j) * 3 * C + C + (size_t)h * HS;
#pragma unroll
    for (int q = 0; q < NO; q++) {
        const int i = sub + TPK * q;
        if (i < HS) {
            dkr[i] = gg_round(dk[q] * scale, rt);
            dkr[C + i] = gg_round(dv[q], rt);
        }
    }
}

template <int BR, int HSM>
__global__ void __launch_bounds__(NT) k_flash_bwd_dq(const float *qkv, const float *dout, const float *lse,
                                                     const float *D, float *dqkv, int T, int NH, int HS, float scale,
                                                     int rt)
{
    constexpr int BC = BR, TPR = NT / BR, NO = HSM / TPR;
    __shared__ float Qs[BR][HSM + 1], dOs[BR][HSM + 1], Ks[BC][HSM + 1], Vs[BC][HSM + 1];
    __shared__ float dSs[BR][BC + 1], Ls[BR], Ds[BR];
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH, C = NH * HS;
    const float *base = qkv + (size_t)b * T * 3 * C + (size_t)h * HS;
    const int r = threadIdx.x / TPR, sub = threadIdx.x % TPR;
    const int q0 = blockIdx.x * BR, t = q0 + r;
    load_rows<BR, HSM>(Qs, base, 0, q0, T, C, HS);
    load_rows_c<BR, HSM>(dOs, dout + (size_t)b * T * C + (size_t)h * HS, q0, T, C, HS);
    for (int rr = threadIdx.x; rr < BR; rr += NT) {
        const int tt = q0 + rr;
        Ls[rr] = tt < T ? lse[(size_t)bh * T + tt] : 0.0f;
        Ds[rr] = tt < T ? D[(size_t)bh * T + tt] : 0.0f;
    }
    float dq[NO];
#pragma unroll
    for (int q = 0; q < NO; q++) dq[q] = 0.0f;
    const int last = q0 + BR - 1 < T - 1 ? q0 + BR - 1 : T - 1;
    for (int k0 = 0; k0 <= last; k0 += BC) { /* key tiles ascending, up to the diagonal */
        __syncthreads();
        load_rows<BC, HSM>(Ks, base, 1, k0, T, C, HS);
        load_rows<BC, HSM>(Vs, base, 2, k0, T, C, HS);
        __syncthreads();
        tile_p_ds<BR, HSM>(Qs, dOs, Ks, Vs, Ls, Ds, (float(*)[BR + 1])NULL, dSs, q0, k0, T, HS, scale);
        __syncthreads();
#pragma unroll
        for (int q = 0; q < NO; q++) {
            const int i = sub + TPR * q;
            if (i >= HS) continue;
            float a = dq[q];
            for (int cc = 0; cc < BC; cc++) a = fmaf(dSs[r][cc], Ks[cc][i], a);
            dq[q] = a;
        }
    }
    if (t >= T) return;
    float *dqr = dqkv + ((size_t)b * T + t) * 3 * C + (size_t)h * HS;
#pragma unroll
    for (int q = 0; q < NO; q++) {
        const int i = sub + TPR * q;
        if (i < HS) dqr[i] = gg_round(dq[q] * scale, rt);
    }
}


/* ---------------- the GELU over 16-bit storage (matmul_fwd16 / matmul_bwd16) ----------------
 * k_gelu16: y16 = round(gelu(pre16)); k_dgelu16: dx16 = round(dx *
 * gelu'(pre16)), dx fp32 (the unrounded product). V = 8: eight elements a
 * thread (a 16-byte load of pre16, two float4 of dx, a 16-byte store; the
 * host checks the pointers' alignment), the n % 8 tail one element a thread
 * of block 0; V = 1: one element a thread. The same per-element math either
 * way, so the same bits (tests/tools/gpu_emu.cc). One element a thread ran
 * at about half the memory rate of PyTorch's GELU kernels on an H100
 * (CUPTI, BENCHMARKS.md 2026-12-05: 0.141 and 0.176 ms against 0.066 and
 * 0.097 a gpt2-124m layer). */
/* one element of each: round(gelu(pre)), round(dx * gelu'(pre)) */
__device__ static inline uint16_t gelu16_elem(uint16_t pre, int rt) { return to16_of(fast_gelu(from16_of(pre, rt)), rt); }
__device__ static inline uint16_t dgelu16_elem(float dx, uint16_t pre, int rt)
{
    return to16_of(dx * fast_gelu_grad(from16_of(pre, rt)), rt);
}
template <int V> __global__ void k_gelu16(const uint16_t *pre16, uint16_t *y16, size_t n, int rt)
{
    const size_t nv = n / V;
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < nv; j += (size_t)gridDim.x * blockDim.x) {
        if (V == 8) {
            const uint4 a = *(const uint4 *)(pre16 + 8 * j);
            const uint32_t w[4] = {a.x, a.y, a.z, a.w};
            uint32_t o[4];
            for (int k = 0; k < 4; k++)
                o[k] = (uint32_t)gelu16_elem((uint16_t)(w[k] & 0xffffu), rt) |
                       (uint32_t)gelu16_elem((uint16_t)(w[k] >> 16), rt) << 16;
            *(uint4 *)(y16 + 8 * j) = make_uint4(o[0], o[1], o[2], o[3]);
        } else {
            y16[j] = gelu16_elem(pre16[j], rt);
        }
    }
    if (V > 1 && blockIdx.x == 0)
        for (size_t i = nv * V + threadIdx.x; i < n; i += blockDim.x) y16[i] = gelu16_elem(pre16[i], rt);
}
template <int V> __global__ void k_dgelu16(const float *dx, const uint16_t *pre16, uint16_t *dx16, size_t n, int rt)
{
    const size_t nv = n / V;
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < nv; j += (size_t)gridDim.x * blockDim.x) {
        if (V == 8) {
            const uint4 a = *(const uint4 *)(pre16 + 8 * j);
            const float4 d0 = *(const float4 *)(dx + 8 * j), d1 = *(const float4 *)(dx + 8 * j + 4);
            const uint32_t w[4] = {a.x, a.y, a.z, a.w};
            const float g[8] = {d0.x, d0.y, d0.z, d0.w, d1.x, d1.y, d1.z, d1.w};
            uint32_t o[4];
            for (int k = 0; k < 4; k++)
                o[k] = (uint32_t)dgelu16_elem(g[2 * k], (uint16_t)(w[k] & 0xffffu), rt) |
                       (uint32_t)dgelu16_elem(g[2 * k + 1], (uint16_t)(w[k] >> 16), rt) << 16;
            *(uint4 *)(dx16 + 8 * j) = make_uint4(o[0], o[1], o[2], o[3]);
        } else {
            dx16[j] = dgelu16_elem(dx[j], pre16[j], rt);
        }
    }
    if (V > 1 && blockIdx.x == 0)
        for (size_t i = nv * V + threadIdx.x; i < n; i += blockDim.x) dx16[i] = dgelu16_elem(dx[i], pre16[i], rt);
}

/* ---------------- the residual add over 16-bit b ---------------- */

/* y = a + b16's values; V = 8 (16-byte aligned pointers): two float4 of a, a
 * 16-byte load of b16, two float4 stores a thread, the tail past the last
 * whole eight in block 0; the same add, so the bits of V = 1 */
template <int V> __global__ void k_residual16(const float *a, const uint16_t *b16, float *y, size_t n, int rt)
{
    const size_t nv = n / V;
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < nv; j += (size_t)gridDim.x * blockDim.x) {
        if (V == 8) {
            const float4 a0 = *(const float4 *)(a + 8 * j), a1 = *(const float4 *)(a + 8 * j + 4);
            float b[8];
            from16x8_of(*(const uint4 *)(b16 + 8 * j), b, rt);
            *(float4 *)(y + 8 * j) = make_float4(a0.x + b[0], a0.y + b[1], a0.z + b[2], a0.w + b[3]);
            *(float4 *)(y + 8 * j + 4) = make_float4(a1.x + b[4], a1.y + b[5], a1.z + b[6], a1.w + b[7]);
        } else {
            y[j] = a[j] + from16_of(b16[j], rt);
        }
    }
    if (V > 1 && blockIdx.x == 0)
        for (size_t i = nv * V + threadIdx.x; i < n; i += blockDim.x) y[i] = a[i] + from16_of(b16[i], rt);
}

#endif
