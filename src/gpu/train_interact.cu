/* The DLRM dot interaction on the GPU (train_ops.h interact_fwd /
 * interact_bwd, and the fused embedding gather + interaction forward).
 *
 * One warp per sample, lane i owning vector z_i in registers (F = T+1
 * vectors of D floats; F <= PLUMB_WARP, D in {4, 8, 16, 32}: the ctr
 * presets). The sample's vectors are staged in the warp's slice of shared
 * memory (rows padded to D+4 floats: 16-byte aligned, and consecutive rows
 * start in different banks), then
 *   forward:  for j = 0..F-2 every lane i > j reads z_j (one broadcast row)
 *             and forms dot(z_i, z_j) = fmaf chain over k ascending from 0;
 *             the dots are collected in shared memory and written as one
 *             coalesced row of W = D + F(F-1)/2 outputs;
 *   backward: lane i accumulates dz_i[0..D) over j = 0..F-1 ascending,
 *             j != i: acc = fmaf(dout[pair(i,j)], z_j[k], acc), starting at
 *             dout[0..D) for i = 0 and at 0 otherwise.
 * Those are the definitions' chains (train_ops.h), so both modes use these
 * kernels and the bits equal the cpu's. Other shapes use the block-per-sample
 * kernels (k_inter_*_any). The fused forward reads the vectors straight from
 * the embedding table (off[t] + idx[b,t]), rounds them to rt, writes them to
 * emb (the backward needs them) and goes on as the forward: the gathered
 * rows are not read back from memory. */
#include "gpu/train_gpu.h"

#define ITPB 256
#define ZPAD 4

/* ---------------- any shape: one block per sample ---------------- */

__device__ static void load_z_any(float *z, const float *bottom, const float *emb, int b, int T, int D)
{
    const int F = T + 1, S = D + 1;
    for (int i = threadIdx.x; i < F * D; i += blockDim.x) {
        int f = i / D, k = i % D;
        z[f * S + k] = f == 0 ? bottom[(size_t)b * D + k] : emb[((size_t)b * T + (f - 1)) * D + k];
    }
}

/* pair index p (0-based, i > j, lower triangle row by row) -> (i, j) */
__device__ static inline void pair_of(int p, int *pi, int *pj)
{
    int i = (int)((1.0f + sqrtf(1.0f + 8.0f * (float)p)) * 0.5f);
    while (i * (i - 1) / 2 > p) i--;
    while ((i + 1) * i / 2 <= p) i++;
    *pi = i;
    *pj = p - i * (i - 1) / 2;
}

__global__ void k_inter_fwd_any(const float *bottom, const float *emb, float *out, int B, int T, int D, int rt)
{
    extern __shared__ float z[];
    const int F = T + 1, S = D + 1, W = D + F * (F - 1) / 2;
    for (int b = blockIdx.x; b < B; b += gridDim.x) {
        __syncthreads();
        load_z_any(z, bottom, emb, b, T, D);
        __syncthreads();
        float *o = out + (size_t)b * W;
        for (int q = threadIdx.x; q < W; q += blockDim.x) {
            if (q < D) {
                o[q] = tr_round(z[q], rt);
                continue;
            }
            int i, j;
            pair_of(q - D, &i, &j);
            const float *zi = z + i * S, *zj = z + j * S;
            float acc = 0.0f;
            for (int k = 0; k < D; k++) acc = fmaf(zi[k], zj[k], acc);
            o[q] = tr_round(acc, rt);
        }
    }
}

__global__ void k_inter_bwd_any(const float *bottom, const float *emb, const float *dout, float *dbottom, float *demb,
                                int B, int T, int D, int rt)
{
    extern __shared__ float z[];
    const int F = T + 1, S = D + 1, W = D + F * (F - 1) / 2;
    float *g = z + F * S; /* [W] dout row */
    for (int b = blockIdx.x; b < B; b += gridDim.x) {
        __syncthreads();
        load_z_any(z, bottom, emb, b, T, D);
        for (int q = threadIdx.x; q < W; q += blockDim.x) g[q] = dout[(size_t)b * W + q];
        __syncthreads();
        for (int q = threadIdx.x; q < F * D; q += blockDim.x) {
            int i = q / D, k = q % D;
            float acc = i == 0 ? g[k] : 0.0f;
            for (int j = 0; j < F; j++) {
                if (j == i) continue;
                int p = i > j ? i * (i - 1) / 2 + j : j * (j - 1) / 2 + i;
                acc = fmaf(g[D + p], z[j * S + k], acc);
            }
            float v = tr_round(acc, rt);
            if (i == 0) dbottom[(size_t)b * D + k] = v;
            else demb[((size_t)b * T + (i - 1)) * D + k] = v;
        }
    }
}

/* ---------------- D in {4,8,16,32}, F <= warp: one warp per sample ---------------- */

/* floats of one warp's shared slice: F rows of D+ZPAD, then W (rounded up to 4) */
__host__ __device__ static inline int warp_slice(int F, int D)
{
    const int W = D + F * (F - 1) / 2;
    return F * (D + ZPAD) + (W + 3) / 4 * 4;
}

/* This warp's slice of the block's dynamic shared memory: its z rows,
 * then its row of outputs (forward) or of dout (backward). */
__device__ static inline float *warp_z(int F, int D)
{
    extern __shared__ float4 sm4[];
    return reinterpret_cast<float *>(sm4) + (size_t)(threadIdx.x / PLUMB_WARP) * warp_slice(F, D);
}

/* Stages sample b's vectors into z (rows of D+ZPAD): z_0 = bottom[b], z_f =
 * emb[b, f-1] or, gathering, round(table[off[f-1] + idx[b, f-1]]) (then also
 * written to emb). float4 throughout (D % 4 == 0, rows 16-byte aligned). */
template <int D, bool GATHER>
__device__ static inline void stage_z(float *z, const float *bottom, const float *emb_in, const float *table,
                                      const int64_t *off, const uint32_t *idx, float *emb_out, int b, int T, int rt,
                                      int lane)
{
    constexpr int Q = D / 4; /* float4 per row */
    const int F = T + 1;
    for (int q = lane; q < F * Q; q += PLUMB_WARP) {
        const int f = q / Q, c = q % Q;
        float4 v;
        if (f == 0) {
            v = reinterpret_cast<const float4 *>(bottom + (size_t)b * D)[c];
        } else if (GATHER) {
            const int64_t row = off[f - 1] + (int64_t)idx[(size_t)b * T + (f - 1)];
            v = reinterpret_cast<const float4 *>(table + (size_t)row * D)[c];
            v.x = tr_round(v.x, rt);
            v.y = tr_round(v.y, rt);
            v.z = tr_round(v.z, rt);
            v.w = tr_round(v.w, rt);
            reinterpret_cast<float4 *>(emb_out + ((size_t)b * T + (f - 1)) * D)[c] = v;
        } else {
            v = reinterpret_cast<const float4 *>(emb_in + ((size_t)b * T + (f - 1)) * D)[c];
        }
        reinterpret_cast<float4 *>(z + f * (D + ZPAD))[c] = v;
    }
}

template <int D>
__device__ static inline void row_load(const float *zr, float *r)
{
#pragma unroll
    for (int c = 0; c < D / 4; c++) {
        float4 v = reinterpret_cast<const float4 *>(zr)[c];
        r[4 * c] = v.x;
        r[4 * c + 1] = v.y;
        r[4 * c + 2] = v.z;
        r[4 * c + 3] = v.w;
    }
}

/* out [B, W] fp32 (may be NULL) and/or out16 [B, ld16] (ld16 even, >= W;
 * the 16-bit values of out, zeros after W: the padded mirror the next
 * GEMM reads; NULL: none). */
template <int D, bool GATHER>
__global__ void k_inter_fwd_warp(const float *bottom, const float *emb_in, const float *table, const int64_t *off,
                                 const uint32_t *idx, float *emb_out, float *out, uint16_t *out16, int ld16, int B,
                                 int T, int rt)
{
    const int F = T + 1, W = D + F * (F - 1) / 2, lane = threadIdx.x % PLUMB_WARP, wpb = blockDim.x / PLUMB_WARP;
    float *z = warp_z(F, D);
    float *o = z + F * (D + ZPAD);
    for (int b = blockIdx.x * wpb + (int)threadIdx.x / PLUMB_WARP; b < B; b += gridDim.x * wpb) {
        stage_z<D, GATHER>(z, bottom, emb_in, table, off, idx, emb_out, b, T, rt, lane);
        plumb_syncwarp();
        float zi[D];
        if (lane < F) row_load<D>(z + lane * (D + ZPAD), zi);
        if (lane < D) o[lane] = tr_round(z[lane], rt);
        const int base = D + lane * (lane - 1) / 2;
        for (int j = 0; j + 1 < F; j++) {
            float zj[D];
            row_load<D>(z + j * (D + ZPAD), zj); /* the same row for every lane: a broadcast */
            if (lane > j && lane < F) {
                float acc = 0.0f;
#pragma unroll
                for (int k = 0; k < D; k++) acc = fmaf(zi[k], zj[k], acc);
                o[base + j] = tr_round(acc, rt);
            }
        }
        plumb_syncwarp();
        if (out) {
            float *orow = out + (size_t)b * W;
            for (int q = lane; q < W; q += PLUMB_WARP) orow[q] = o[q];
        }
        if (out16) { /* o holds rt-rounded values: the 16-bit copies are exact */
            uint32_t *r2 = reinterpret_cast<uint32_t *>(out16 + (size_t)b * ld16);
            for (int q = lane; q < ld16 / 2; q += PLUMB_WARP) {
                const uint32_t lo = 2 * q < W ? to16_rt(o[2 * q], rt) : 0u;
                const uint32_t hi = 2 * q + 1 < W ? to16_rt(o[2 * q + 1], rt) : 0u; /* (as uint32: shifted below) */
                r2[q] = lo | (hi << 16);
            }
        }
        plumb_syncwarp(); /* z and o are rewritten for the next sample */
    }
}

/* dout [B, ldo] of element type G: fp32, or the 16-bit mirror (rt) */
template <int D, typename G>
__global__ void k_inter_bwd_warp(const float *bottom, const float *emb, const G *dout, int ldo, float *dbottom,
                                 float *demb, int B, int T, int rt)
{
    const int F = T + 1, W = D + F * (F - 1) / 2, lane = threadIdx.x % PLUMB_WARP, wpb = blockDim.x / PLUMB_WARP;
    float *z = warp_z(F, D);
    float *g = z + F * (D + ZPAD);
    for (int b = blockIdx.x * wpb + (int)threadIdx.x / PLUMB_WARP; b < B; b += gridDim.x * wpb) {
        stage_z<D, false>(z, bottom, emb, NULL, NULL, NULL, NULL, b, T, rt, lane);
        const G *grow = dout + (size_t)b * ldo;
        for (int q = lane; q < W; q += PLUMB_WARP) g[q] = ld_rt(grow, (size_t)q, rt);
        plumb_syncwarp();
        float acc[D];
#pragma unroll
        for (int k = 0; k < D; k++) acc[k] = lane == 0 ? g[k] : 0.0f;
        for (int j = 0; j < F; j++) {
            float zj[D];
            row_load<D>(z + j * (D + ZPAD), zj);
            if (lane < F && lane != j) {
                const int i = lane, p = i > j ? i * (i - 1) / 2 + j : j * (j - 1) / 2 + i;
                const float c = g[D + p];
#pragma unroll
                for (int k = 0; k < D; k++) acc[k] = fmaf(c, zj[k], acc[k]);
            }
        }
        if (lane < F) {
            float *dst = lane == 0 ? dbottom + (size_t)b * D : demb + ((size_t)b * T + (lane - 1)) * D;
#pragma unroll
            for (int c = 0; c < D / 4; c++)
                reinterpret_cast<float4 *>(dst)[c] = make_float4(tr_round(acc[4 * c], rt), tr_round(acc[4 * c + 1], rt),
                                                                 tr_round(acc[4 * c + 2], rt),
                                                                 tr_round(acc[4 * c + 3], rt));
        }
        plumb_syncwarp();
    }
}

/* ---------------- dispatch ---------------- */

static unsigned sample_grid(int B) { return (unsigned)(B < 65536 * 4 ? B : 65536 * 4); }

/* The warp kernels apply: a supported D, every vector a lane, aligned rows. */
static int warp_path(int T, int D, const void *a, const void *b2, const void *c)
{
    if (!(D == 4 || D == 8 || D == 16 || D == 32) || T + 1 > PLUMB_WARP) return 0;
    return !((uintptr_t)a % 16) && !((uintptr_t)b2 % 16) && !((uintptr_t)c % 16);
}

/* warps per block so that their shared slices fit in 32 KiB (at least one) */
static int warp_blocks(int T, int D, int B, unsigned *grid, size_t *smem)
{
    size_t per = (size_t)warp_slice(T + 1, D) * sizeof(float);
    int wpb = (int)((32 * 1024) / per);
    if (wpb > ITPB / PLUMB_WARP) wpb = ITPB / PLUMB_WARP;
    if (wpb < 1) wpb = 1;
    size_t blocks = ((size_t)B + wpb - 1) / wpb;
    *grid = (unsigned)(blocks < 65536 * 4 ? blocks : 65536 * 4);
    *smem = per * wpb;
    return wpb * PLUMB_WARP;
}

template <bool GATHER>
static int fwd_warp(struct dev *d, struct dev_stream *st, const float *bottom, const float *emb_in, const float *table,
                    const int64_t *off, const uint32_t *idx, float *emb_out, float *out, uint16_t *out16, int ld16,
                    int B, int T, int D, int rt, plumb_err *e)
{
    unsigned grid;
    size_t sm;
    int tpb = warp_blocks(T, D, B, &grid, &sm);
#define FWD_CASE(DD)                                                                                              \
    case DD:                                                                                                      \
        k_inter_fwd_warp<DD, GATHER><<<grid, tpb, sm, st->s>>>(bottom, emb_in, table, off, idx, emb_out, out, out16,  \
                                                               ld16, B, T, rt);                                       \
        break
    switch (D) {
        FWD_CASE(4);
        FWD_CASE(8);
        FWD_CASE(16);
        FWD_CASE(32);
    }
#undef FWD_CASE
    GPU_CHECK_LAUNCH(d, "k_inter_fwd_warp", e);
    return PLUMB_OK;
}

int tr_interact_fwd(struct dev *d, struct dev_stream *st, const float *bottom, const float *emb, float *out, int B,
                    int T, int D, dtype_t rt, plumb_err *e)
{
    if (warp_path(T, D, bottom, emb, NULL))
        return fwd_warp<false>(d, st, bottom, emb, NULL, NULL, NULL, NULL, out, NULL, 0, B, T, D, (int)rt, e);
    size_t sm = (size_t)(T + 1) * (D + 1) * sizeof(float);
    if (sm > 48 * 1024)
        return gpu_err(e, PLUMB_EUNSUPPORTED, "%s: interact_fwd: T=%d D=%d needs %zu bytes of shared memory (max 48 KiB)",
                       d->label, T, D, sm);
    k_inter_fwd_any<<<sample_grid(B), 128, sm, st->s>>>(bottom, emb, out, B, T, D, (int)rt);
    GPU_CHECK_LAUNCH(d, "k_inter_fwd_any", e);
    return PLUMB_OK;
}

int tr_embedding_interact_fwd(struct dev *d, struct dev_stream *st, const float *table, const int64_t *off,
                              const uint32_t *idx, const float *bottom, float *emb, float *out, int B, int T, int D,
                              dtype_t rt, plumb_err *e)
{
    if (warp_path(T, D, table, bottom, emb))
        return fwd_warp<true>(d, st, bottom, NULL, table, off, idx, emb, out, NULL, 0, B, T, D, (int)rt, e);
    int rc = tr_embedding_fwd(d, st, table, off, idx, emb, B, T, D, rt, e);
    return rc ? rc : tr_interact_fwd(d, st, bottom, emb, out, B, T, D, rt, e);
}

/* the warp backward for dout of element type G, row stride ldo */
template <typename G>
static int bwd_warp(struct dev *d, struct dev_stream *st, const float *bottom, const float *emb, const G *dout, int ldo,
                    float *dbottom, float *demb, int B, int T, int D, int rt, plumb_err *e)
{
    unsigned grid;
    size_t sm;
    int tpb = warp_blocks(T, D, B, &grid, &sm);
#define BWD_CASE(DD)                                                                                               \
    case DD:                                                                                                       \
        k_inter_bwd_warp<DD, G><<<grid, tpb, sm, st->s>>>(bottom, emb, dout, ldo, dbottom, demb, B, T, rt);       \
        break
    switch (D) {
        BWD_CASE(4);
        BWD_CASE(8);
        BWD_CASE(16);
        BWD_CASE(32);
    }
#undef BWD_CASE
    GPU_CHECK_LAUNCH(d, "k_inter_bwd_warp", e);
    return PLUMB_OK;
}

int tr_interact_bwd(struct dev *d, struct dev_stream *st, const float *bottom, const float *emb, const float *dout,
                    float *dbottom, float *demb, int B, int T, int D, dtype_t rt, plumb_err *e)
{
    int F = T + 1, W = D + F * (F - 1) / 2;
    if (warp_path(T, D, bottom, emb, demb) && !((uintptr_t)dbottom % 16))
        return bwd_warp<float>(d, st, bottom, emb, dout, W, dbottom, demb, B, T, D, (int)rt, e);
    size_t sm = ((size_t)F * (D + 1) + W) * sizeof(float);
    if (sm > 48 * 1024)
        return gpu_err(e, PLUMB_EUNSUPPORTED, "%s: interact_bwd: T=%d D=%d needs %zu bytes of shared memory (max 48 KiB)",
                       d->label, T, D, sm);
    k_inter_bwd_any<<<sample_grid(B), 128, sm, st->s>>>(bottom, emb, dout, dbottom, demb, B, T, D, (int)rt);
    GPU_CHECK_LAUNCH(d, "k_inter_bwd_any", e);
    return PLUMB_OK;
}

/* ---------------- 16-bit interaction output / gradient (mirror only) ---------------- */

/* The fused forward writing the output's padded 16-bit mirror out16 [B,
 * ld16] (zeros after W) and, when out is not NULL, the fp32 output too.
 * Off the warp path: the fp32 output (out, or a stand-in in workspace slot
 * 3) made by the parts, then its padded copy. */
int tr_embedding_interact_fwd16(struct dev *d, struct dev_stream *st, const float *table, const int64_t *off,
                                const uint32_t *idx, const float *bottom, float *emb, float *out, uint16_t *out16,
                                int ld16, int B, int T, int D, dtype_t rt, plumb_err *e)
{
    const int F = T + 1, W = D + F * (F - 1) / 2;
    if (warp_path(T, D, table, bottom, emb) && ld16 % 2 == 0 && !((uintptr_t)out16 % 4))
        return fwd_warp<true>(d, st, bottom, NULL, table, off, idx, emb, out, out16, ld16, B, T, D, (int)rt, e);
    float *o = out;
    int rc;
    if (!o) {
        void *ws;
        if ((rc = tws_get(d, 3, (size_t)B * W * sizeof(float), &ws, e))) return rc;
        o = (float *)ws;
    }
    if ((rc = tr_embedding_interact_fwd(d, st, table, off, idx, bottom, emb, o, B, T, D, rt, e))) return rc;
    return tr_pad16(d, st, o, (size_t)B, W, ld16, out16, (int)rt, e);
}

/* The backward from the gradient's 16-bit mirror dout16 [B, ldo] (columns
 * 0..W used); off the warp path widened into workspace slot 3 first. */
int tr_interact_bwd16(struct dev *d, struct dev_stream *st, const float *bottom, const float *emb,
                      const uint16_t *dout16, int ldo, float *dbottom, float *demb, int B, int T, int D, dtype_t rt,
                      plumb_err *e)
{
    const int F = T + 1, W = D + F * (F - 1) / 2;
    if (warp_path(T, D, bottom, emb, demb) && !((uintptr_t)dbottom % 16))
        return bwd_warp<uint16_t>(d, st, bottom, emb, dout16, ldo, dbottom, demb, B, T, D, (int)rt, e);
    void *ws;
    int rc = tws_get(d, 3, (size_t)B * W * sizeof(float), &ws, e);
    if (!rc) rc = tr_widen16(d, st, dout16, (size_t)B, W, ldo, (float *)ws, (int)rt, e);
    return rc ? rc : tr_interact_bwd(d, st, bottom, emb, (const float *)ws, dbottom, demb, B, T, D, rt, e);
}
