/* Device code of the fast vision kernels that read fp32 or 16-bit storage
 * (BatchNorm's reductions, apply and backward data, the add, the 16-bit
 * max-pool), included by gpu/train_vision.cu and by tests/tools/gpu_emu.cc,
 * which runs these same kernels on the cpu (threads as pthreads,
 * __syncthreads as a barrier) against the fp32 instantiations and float64
 * sums. Needs, from gpu/train_gpu.h or the emulation: to16_rt, from16_rt,
 * float4 / uint4 / ushort4 and their make_ functions, the CUDA thread
 * built-ins; and dev/train_vision.h. */
#ifndef PLUMB_GPU_TRAIN_VISION_KERN_CUH
#define PLUMB_GPU_TRAIN_VISION_KERN_CUH
#include "dev/train_vision.h"
#include "gpu/rt_dispatch.h"

/* ---------------- vector loads and stores ----------------
 * V consecutive elements of an fp32 tensor (V = 4: one float4, 16-byte
 * aligned) or of a 16-bit tensor (V = 8: one 16-byte uint4 of eight bf16 /
 * fp16 values, element i in the low half of word i / 2; V = 4: a ushort4),
 * as floats; V = 1 a scalar. The same kernel source serves both storages
 * (the 16-bit activation ops of dev/train_ops.h read and write 16 bits). */
template <int V> __device__ static inline void ldv(const float *p, size_t i, float *o, int)
{
    if (V == 4) {
        float4 t = *(const float4 *)(p + i);
        o[0] = t.x, o[1] = t.y, o[2] = t.z, o[3] = t.w;
    } else {
        for (int v = 0; v < V; v++) o[v] = p[i + v];
    }
}
/* eight 16-bit values of one 16-byte word, widened */
__device__ static inline void unpack8(uint4 t, float *o, int rt)
{
    const uint32_t w[4] = {t.x, t.y, t.z, t.w};
    for (int k = 0; k < 4; k++) {
        o[2 * k] = from16_rt((uint16_t)(w[k] & 0xffffu), rt);
        o[2 * k + 1] = from16_rt((uint16_t)(w[k] >> 16), rt);
    }
}
template <int V> __device__ static inline void ldv(const uint16_t *p, size_t i, float *o, int rt)
{
    if (V == 8) {
        unpack8(*(const uint4 *)(p + i), o, rt);
    } else {
        for (int v = 0; v < V; v++) o[v] = from16_rt(p[i + v], rt);
    }
}
/* A row's V values as loaded, widened only when used: the kernels below load
 * U rows before they use the first, so a thread has U loads in flight, not
 * one (resnet50's BN passes ran at 1.1 to 2.6 TB/s of the H100's 3.35 with
 * one row in flight: BENCHMARKS.md, 2026-12-06). The 16-bit word stays four
 * registers instead of eight floats. */
template <typename S, int V> struct vraw {
    float f[V];
};
template <> struct vraw<uint16_t, 8> {
    uint4 w;
};
template <typename S, int V> __device__ static inline void ldraw(const S *p, size_t i, vraw<S, V> &r, int rt)
{
    ldv<V>(p, i, r.f, rt);
}
template <> __device__ inline void ldraw<uint16_t, 8>(const uint16_t *p, size_t i, vraw<uint16_t, 8> &r, int)
{
    r.w = *(const uint4 *)(p + i);
}
template <typename S, int V> __device__ static inline void unraw(const vraw<S, V> &r, float *o, int)
{
    for (int v = 0; v < V; v++) o[v] = r.f[v];
}
template <> __device__ inline void unraw<uint16_t, 8>(const vraw<uint16_t, 8> &r, float *o, int rt)
{
    unpack8(r.w, o, rt);
}
template <int V> __device__ static inline void stv(float *p, size_t i, const float *o)
{
    if (V == 4) *(float4 *)(p + i) = make_float4(o[0], o[1], o[2], o[3]);
    else
        for (int v = 0; v < V; v++) p[i + v] = o[v];
}
/* o: rt-rounded values (exact in 16 bits) */
template <int V> __device__ static inline void st16v(uint16_t *p, size_t i, const float *o, int rt)
{
    if (V == 8) {
        uint32_t w[4];
        for (int k = 0; k < 4; k++) w[k] = (uint32_t)to16_rt(o[2 * k], rt) | (uint32_t)to16_rt(o[2 * k + 1], rt) << 16;
        *(uint4 *)(p + i) = make_uint4(w[0], w[1], w[2], w[3]);
    } else if (V == 4) {
        ushort4 h;
        h.x = to16_rt(o[0], rt), h.y = to16_rt(o[1], rt), h.z = to16_rt(o[2], rt), h.w = to16_rt(o[3], rt);
        *(ushort4 *)(p + i) = h;
    } else {
        for (int v = 0; v < V; v++) p[i + v] = to16_rt(o[v], rt);
    }
}
/* relu_bwd's mask on the fly: g[v] = 0 where the ReLU output mask (16-bit)
 * is not > 0 */
template <int V> __device__ static inline void maskf(const float *mk, float *g)
{
    for (int v = 0; v < V; v++) g[v] = mk[v] > 0.0f ? g[v] : 0.0f;
}
template <int V> __device__ static inline void maskv(const uint16_t *mask, size_t i, float *g, int rt)
{
    if (!mask) return;
    float mk[V];
    ldv<V>(mask, i, mk, rt);
    maskf<V>(mk, g);
}
/* the same from a mask row loaded ahead (ldraw) */
template <int V> __device__ static inline void maskrv(const vraw<uint16_t, V> &mr, float *g, int rt)
{
    float mk[V];
    unraw<uint16_t, V>(mr, mk, rt);
    maskf<V>(mk, g);
}

/* The rows a thread walks, U at a time: rows first, first + step, ... below
 * end; load(u, i) for each of U rows (i: the row's element of the thread's
 * first channel), then use(u, i) for each in row order. The BN kernels' row
 * loops, so a thread has U rows' loads in flight. */
template <int U, typename L, typename F>
__device__ static inline void rows_ahead(size_t first, size_t step, size_t end, int C, int c0, L &&load, F &&use)
{
    for (size_t mr0 = first; mr0 < end; mr0 += (size_t)U * step) {
#pragma unroll
        for (int u = 0; u < U; u++) {
            const size_t m = mr0 + (size_t)u * step;
            if (m >= end) break;
            load(u, m * (size_t)C + c0);
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            const size_t m = mr0 + (size_t)u * step;
            if (m >= end) break;
            use(u, m * (size_t)C + c0);
        }
    }
}

/* the same mask recomputed from x (train_ops.h, mbeta): g[v] = 0 where this
 * BN's own ReLU output, the value k_bn_apply stored, is not > 0; mu, rs,
 * ga, be: the V channels' mean, rstd, gamma and beta */
template <int V>
__device__ static inline void maskxv(const float *xv, const float *mu, const float *rs, const float *ga, const float *be,
                                     float *g, int rt)
{
    for (int v = 0; v < V; v++)
        g[v] = tv_round(tv_bn_apply(xv[v], mu[v], rs[v], ga[v], be[v], NULL, 1), rt) > 0.0f ? g[v] : 0.0f;
}

enum { BV_X = 0, BV_SQ = 1, BV_DY = 2, BV_DYXH = 3, BV_SH = 4 };

/* rows a thread loads before it adds the first (k_bn_red_part), and before it
 * computes and stores the first (the elementwise BN kernels); the results do
 * not depend on them */
#ifndef BN_RED_U
#define BN_RED_U 3 /* the backward's sums: two tensors and a mask a row */
#endif
#ifndef BN_RED_U1
#define BN_RED_U1 8 /* the statistics: one tensor a row */
#endif
#ifndef BN_EW_U
#define BN_EW_U 2
#endif

/* fast: NS sums per channel in one pass (bn_stats: NS = 1, kind BV_X or
 * BV_SQ; the backward: NS = 2, BV_DY then BV_DYXH from one read of x and
 * dy; bn_stats1p16o: NS = 2, kind BV_SH, the sums of d = x - shift (mean
 * holds the shift) and of d * d from one read of x). Threads own V consecutive channels (fp32: V = 4, float4 loads;
 * 16-bit: V = 8, one 16-byte load of eight values; V = 1 when C is not a
 * multiple of V or a pointer is not 16-byte aligned); a block is QX channel
 * groups x RY row lanes (QX RY = 256), rows [blockIdx.y rpb, +rpb). Each
 * lane sums its rows in order, the block adds its lanes in lane order
 * into part[blockIdx.y, s, c]; k_bn_red_final adds the row blocks in block
 * order. The geometry depends on (M, C, V) only, so the sums repeat. */
struct bn_geom {
    int V, QX, RY;
    unsigned ncb, nby;
    size_t rpb;
};
static inline int bn_vec_ok(const void *a, const void *b, int C, int V)
{
    return C % V == 0 && !((uintptr_t)a & 15) && !((uintptr_t)b & 15);
}
static inline struct bn_geom bn_geom_of(size_t M, int C, int V)
{
    struct bn_geom g;
    g.V = V;
    const int nq = C / V;
    int qx = 1;
    while (qx < nq && qx < 32) qx *= 2;
    g.QX = qx;
    g.RY = 256 / qx;
    g.ncb = (unsigned)((nq + qx - 1) / qx);
    /* about 1024 blocks in all, each lane at least 4 rows */
    size_t nby = (1024 + g.ncb - 1) / g.ncb, cap = (M + (size_t)g.RY * 4 - 1) / ((size_t)g.RY * 4);
    if (nby > cap) nby = cap;
    if (nby > 512) nby = 512;
    if (nby < 1) nby = 1;
    g.rpb = (M + nby - 1) / nby;
    g.nby = (unsigned)((M + g.rpb - 1) / g.rpb);
    return g;
}

template <typename S, int V, int NS, int RT, int KIND, int U>
__device__ static inline void bn_red_rows(const S *x, const S *dy, const uint16_t *mask, const float *mgamma,
                                          const float *mbeta, const float *mean, const float *rstd, size_t M, int C,
                                          size_t rpb, int QX, int RY, float *part, float (*sh)[256 * V], int rt_)
{
    const int rt = RT >= 0 ? RT : rt_;
    const int tx = threadIdx.x % QX, ty = threadIdx.x / QX;
    const int q = blockIdx.x * QX + tx, c0 = q * V;
    const size_t m0 = (size_t)blockIdx.y * rpb;
    const size_t m1 = m0 + rpb < M ? m0 + rpb : M;
    float a[NS][V];
    for (int s = 0; s < NS; s++)
        for (int v = 0; v < V; v++) a[s][v] = 0.0f;
    if (c0 < C) {
        float mu[V], rs[V], mg[V], mb[V];
        for (int v = 0; v < V; v++) {
            mu[v] = KIND == BV_SH ? tv_bn_shift(mean, c0 + v) : mean && KIND != BV_X ? mean[c0 + v] : 0.0f;
            rs[v] = rstd && KIND == BV_DY ? rstd[c0 + v] : 0.0f;
            mg[v] = mbeta && KIND == BV_DY ? mgamma[c0 + v] : 0.0f;
            mb[v] = mbeta && KIND == BV_DY ? mbeta[c0 + v] : 0.0f;
        }
        /* U rows loaded, then added in row order: the sums of U = 1 */
        const int own = mbeta && NS == 2, rdmask = KIND == BV_DY && !own && mask;
        vraw<S, V> xr[U], gr[U];
        vraw<uint16_t, V> kr[U] = {};
        rows_ahead<U>(
            m0 + ty, (size_t)RY, m1, C, c0,
            [&](int u, size_t i) {
                if (KIND != BV_DY || NS == 2) ldraw<S, V>(x, i, xr[u], rt);
                if (KIND == BV_DY) ldraw<S, V>(dy, i, gr[u], rt);
                if (rdmask) ldraw<uint16_t, V>(mask, i, kr[u], rt);
            },
            [&](int u, size_t) {
                float xv[V], gv[V];
                if (KIND != BV_DY || NS == 2) unraw<S, V>(xr[u], xv, rt);
                if (KIND == BV_DY) {
                    unraw<S, V>(gr[u], gv, rt);
                    if (own) maskxv<V>(xv, mu, rs, mg, mb, gv, rt);
                    else if (rdmask) maskrv<V>(kr[u], gv, rt);
                }
                for (int v = 0; v < V; v++) {
                    if (KIND == BV_X) {
                        a[0][v] += xv[v];
                    } else if (KIND == BV_SQ) {
                        float dd = xv[v] - mu[v];
                        a[0][v] += dd * dd;
                    } else if (KIND == BV_SH) {
                        float dd = xv[v] - mu[v];
                        a[0][v] += dd;
                        a[NS - 1][v] += dd * dd;
                    } else {
                        a[0][v] += gv[v];
                        if (NS == 2) a[NS - 1][v] += gv[v] * tv_bn_xhat(xv[v], mu[v], rs[v]);
                    }
                }
            });
    }
    for (int s = 0; s < NS; s++)
        for (int v = 0; v < V; v++) sh[s][(ty * QX + tx) * V + v] = a[s][v];
    __syncthreads();
    if (ty == 0 && c0 < C) {
        for (int y = 1; y < RY; y++)
            for (int s = 0; s < NS; s++)
                for (int v = 0; v < V; v++) a[s][v] += sh[s][(y * QX + tx) * V + v];
        for (int s = 0; s < NS; s++)
            for (int v = 0; v < V && c0 + v < C; v++) part[((size_t)blockIdx.y * NS + s) * C + c0 + v] = a[s][v];
    }
}
/* the shared block sums declared here, once, for whichever rt copy runs.
 * KIND is a constant of the kernel, not an argument: one kernel for all four
 * kinds held the registers of the backward's two tensors and masks for the
 * forward's one-tensor pass too, and ran it at 1.1 to 1.8 TB/s
 * (BENCHMARKS.md, 2026-12-06). BV_DY or BV_SH with NS = 2, BV_X or BV_SQ
 * with NS = 1. */
template <typename S, int V, int NS, int KIND, int U>
__global__ void __launch_bounds__(256, 2)
    k_bn_red_part(const S *x, const S *dy, const uint16_t *mask, const float *mgamma, const float *mbeta,
                  const float *mean, const float *rstd, size_t M, int C, size_t rpb, int QX, int RY, float *part,
                  int rt)
{
    __shared__ float sh[NS][256 * V];
#define BN_RED_CALL(RTV) \
    bn_red_rows<S, V, NS, RTV, KIND, U>(x, dy, mask, mgamma, mbeta, mean, rstd, M, C, rpb, QX, RY, part, sh, rt)
    RT_DISPATCH(rt, BN_RED_CALL);
#undef BN_RED_CALL
}
template <typename S>
using bn_red_part_fn = void (*)(const S *, const S *, const uint16_t *, const float *, const float *, const float *,
                                const float *, size_t, int, size_t, int, int, float *, int);
/* k_bn_red_part for (NS, kind), launched through the pointer; U rows
 * loaded ahead, 0: BN_RED_U for the backward's sums, BN_RED_U1 otherwise */
template <typename S, int V, int U = 0> static inline bn_red_part_fn<S> bn_red_part_of(int NS, int kind)
{
    constexpr int UD = U ? U : BN_RED_U, U1 = U ? U : BN_RED_U1;
    if (NS == 2) return kind == BV_SH ? k_bn_red_part<S, V, 2, BV_SH, U1> : k_bn_red_part<S, V, 2, BV_DY, UD>;
    return kind == BV_X ? k_bn_red_part<S, V, 1, BV_X, U1> : k_bn_red_part<S, V, 1, BV_SQ, U1>;
}
/* out[j] (j < K = NS C) = the nb block partials part[b, j] added in block
 * order (8 lanes take every 8th block, then the lanes in lane order);
 * copy0 / copy1 (may be NULL) also receive out[0, C) / out[C, 2C). */
__global__ void k_bn_red_final(const float *part, int nb, int K, int C, float *out, float *copy0, float *copy1)
{
    __shared__ float sh[8][32];
    const int j = blockIdx.x * 32 + threadIdx.x;
    float a = 0.0f;
    /* eight blocks' partials loaded, then added in block order: the lane's
     * adds wait on the L2 once every eight, not each time (4 to 8 us a call
     * for resnet50's 512 row blocks one by one: BENCHMARKS.md, 2026-12-06) */
    if (j < K)
        for (int b0 = threadIdx.y; b0 < nb; b0 += 64) {
            float v[8];
#pragma unroll
            for (int k = 0; k < 8; k++) v[k] = b0 + 8 * k < nb ? part[(size_t)(b0 + 8 * k) * K + j] : 0.0f;
#pragma unroll
            for (int k = 0; k < 8; k++)
                if (b0 + 8 * k < nb) a += v[k];
        }
    sh[threadIdx.y][threadIdx.x] = a;
    __syncthreads();
    if (threadIdx.y || j >= K) return;
    for (int y = 1; y < 8; y++) a += sh[y][threadIdx.x];
    out[j] = a;
    if (j < C && copy0) copy0[j] = a;
    if (j >= C && copy1) copy1[j - C] = a;
}

/* bn_meanvar (dev/train_ops.h): one thread a channel, dev/train_vision.h's
 * arithmetic (the cpu's bits); the channel's shift is read before its
 * running mean is written, so shift may be run_mean */
__global__ void k_bn_meanvar(const float *part, int C, long long count, float eps, float momentum, const float *shift,
                             float *mean, float *rstd, float *run_mean, float *run_var)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < C) tv_bn_meanvar(part, C, c, count, eps, momentum, shift, mean, rstd, run_mean, run_var);
}

/* The elementwise BatchNorm kernels over [M, C] (C % V == 0): a thread owns
 * channel group q = blockIdx.x QX + threadIdx.x % QX (channels V q .. V q +
 * V - 1) and rows m = blockIdx.y RY + threadIdx.x / QX, then every
 * (gridDim.y RY)-th (RY = blockDim.x / QX), so it loads its channels'
 * parameters once, into registers, and needs no division. A warp covers 32
 * groups of one row or 32 / QX whole rows: contiguous memory. The element
 * math is dev/train_vision.h's, so the bits do not depend on the geometry.
 * (One thread a vector, its channel as i % C in 64-bit arithmetic and the
 * parameters loaded again for every vector, took 0.195 ms a resnet50 BN
 * apply on an H100 against PyTorch's 0.102: BENCHMARKS.md, 2026-12-05.) */
struct bn_ew {
    int QX;
    unsigned gx, gy;
};
static inline struct bn_ew bn_ew_of(size_t M, int C, int V, int threads, size_t max_blocks)
{
    struct bn_ew g;
    const int nq = C / V;
    int qx = 1;
    while (qx < nq && qx < 32) qx *= 2;
    g.QX = qx;
    g.gx = (unsigned)((nq + qx - 1) / qx);
    /* at most max_blocks in all (the host passes one wave: the blocks the
     * device holds resident at once), each thread then walking several rows,
     * its parameter loads paid once, and no partly filled last wave */
    const size_t ry = (size_t)(threads / qx);
    size_t gy = (M + ry - 1) / ry, cap = max_blocks / g.gx;
    if (cap < 1) cap = 1;
    if (gy > cap) gy = cap;
    if (gy > 65535) gy = 65535;
    g.gy = (unsigned)gy;
    return g;
}

/* y (may be NULL) and y16 (may be NULL) = bn_apply of x (+ z), in the
 * geometry of bn_ew_of; storage S of x and z: fp32 or 16-bit */
template <typename S, int V, int RT, int U>
__device__ static inline void bn_apply_rows(const S *x, const float *mean, const float *rstd, const float *gamma,
                                            const float *beta, const S *z, float *y, uint16_t *y16, size_t M, int C,
                                            int QX, int relu, int rt_)
{
    const int rt = RT >= 0 ? RT : rt_;
    const int RY = (int)blockDim.x / QX, c0 = ((int)blockIdx.x * QX + (int)threadIdx.x % QX) * V;
    if (c0 >= C) return;
    float mu[V], rs[V], ga[V], be[V];
    for (int v = 0; v < V; v++) mu[v] = mean[c0 + v], rs[v] = rstd[c0 + v], ga[v] = gamma[c0 + v], be[v] = beta[c0 + v];
    vraw<S, V> xr[U], zr[U];
    rows_ahead<U>(
        (size_t)blockIdx.y * RY + threadIdx.x / QX, (size_t)gridDim.y * RY, M, C, c0,
        [&](int u, size_t i) {
            ldraw<S, V>(x, i, xr[u], rt);
            if (z) ldraw<S, V>(z, i, zr[u], rt);
        },
        [&](int u, size_t i) {
            float xa[V], za[V], o[V];
            unraw<S, V>(xr[u], xa, rt);
            if (z) unraw<S, V>(zr[u], za, rt);
            for (int v = 0; v < V; v++)
                o[v] = tv_round(tv_bn_apply(xa[v], mu[v], rs[v], ga[v], be[v], z ? &za[v] : NULL, relu), rt);
            if (y) stv<V>(y, i, o);
            if (y16) st16v<V>(y16, i, o, rt);
        });
}
template <typename S, int V, int U = BN_EW_U>
__global__ void __launch_bounds__(256, 2)
    k_bn_apply(const S *x, const float *mean, const float *rstd, const float *gamma, const float *beta, const S *z,
               float *y, uint16_t *y16, size_t M, int C, int QX, int relu, int rt)
{
#define BN_APPLY_CALL(RTV) bn_apply_rows<S, V, RTV, U>(x, mean, rstd, gamma, beta, z, y, y16, M, C, QX, relu, rt)
    RT_DISPATCH(rt, BN_APPLY_CALL);
#undef BN_APPLY_CALL
}

/* y16 = bn_apply of x16 with z = the rt-rounded bn_apply of zx16 (its own
 * parameters zp: mean, rstd, gamma, beta; no z, no ReLU): a projection
 * block's two BNs (train_ops.h bn_apply2_16o), the element math of the two
 * k_bn_apply calls it stands for, so their bits; geometry of bn_ew_of */
template <int V, int RT, int U>
__device__ static inline void bn_apply2_rows(const uint16_t *x, const float *mean, const float *rstd,
                                             const float *gamma, const float *beta, const uint16_t *zx,
                                             const float *zmean, const float *zrstd, const float *zgamma,
                                             const float *zbeta, uint16_t *y16, size_t M, int C, int QX, int relu,
                                             int rt_)
{
    const int rt = RT >= 0 ? RT : rt_;
    const int RY = (int)blockDim.x / QX, c0 = ((int)blockIdx.x * QX + (int)threadIdx.x % QX) * V;
    if (c0 >= C) return;
    float mu[V], rs[V], ga[V], be[V], zmu[V], zrs[V], zga[V], zbe[V];
    for (int v = 0; v < V; v++) {
        mu[v] = mean[c0 + v], rs[v] = rstd[c0 + v], ga[v] = gamma[c0 + v], be[v] = beta[c0 + v];
        zmu[v] = zmean[c0 + v], zrs[v] = zrstd[c0 + v], zga[v] = zgamma[c0 + v], zbe[v] = zbeta[c0 + v];
    }
    vraw<uint16_t, V> xr[U], zr[U];
    rows_ahead<U>(
        (size_t)blockIdx.y * RY + threadIdx.x / QX, (size_t)gridDim.y * RY, M, C, c0,
        [&](int u, size_t i) {
            ldraw<uint16_t, V>(x, i, xr[u], rt);
            ldraw<uint16_t, V>(zx, i, zr[u], rt);
        },
        [&](int u, size_t i) {
            float xa[V], za[V], o[V];
            unraw<uint16_t, V>(xr[u], xa, rt);
            unraw<uint16_t, V>(zr[u], za, rt);
            for (int v = 0; v < V; v++) {
                const float z = tv_round(tv_bn_apply(za[v], zmu[v], zrs[v], zga[v], zbe[v], NULL, 0), rt);
                o[v] = tv_round(tv_bn_apply(xa[v], mu[v], rs[v], ga[v], be[v], &z, relu), rt);
            }
            st16v<V>(y16, i, o, rt);
        });
}
template <int V, int U = BN_EW_U>
__global__ void __launch_bounds__(256, 2)
    k_bn_apply2(const uint16_t *x, const float *mean, const float *rstd, const float *gamma, const float *beta,
                const uint16_t *zx, const float *zmean, const float *zrstd, const float *zgamma, const float *zbeta,
                uint16_t *y16, size_t M, int C, int QX, int relu, int rt)
{
#define BN_APPLY2_CALL(RTV)                                                                                        \
    bn_apply2_rows<V, RTV, U>(x, mean, rstd, gamma, beta, zx, zmean, zrstd, zgamma, zbeta, y16, M, C, QX, relu, rt)
    RT_DISPATCH(rt, BN_APPLY2_CALL);
#undef BN_APPLY2_CALL
}

/* dx (may be NULL) and dx16 (may be NULL) = bn_bwd_data of x and dy (dy
 * masked by mask, a 16-bit ReLU output, when given), in the geometry of
 * bn_ew_of; in place (dx16 == dy) each thread loads before it stores */
template <typename S, int V, int RT, int U>
__device__ static inline void bn_bwd_data_rows(const S *x, const S *dy, const uint16_t *mask, const float *mbeta,
                                               const float *mean, const float *rstd, const float *gamma,
                                               const float *mdy, float *dx, uint16_t *dx16, size_t M, int C, int QX,
                                               int rt_)
{
    const int rt = RT >= 0 ? RT : rt_;
    const int RY = (int)blockDim.x / QX, c0 = ((int)blockIdx.x * QX + (int)threadIdx.x % QX) * V;
    if (c0 >= C) return;
    float mu[V], rs[V], gm[V], m0[V], m1[V], mb[V];
    for (int v = 0; v < V; v++) {
        mu[v] = mean[c0 + v], rs[v] = rstd[c0 + v], gm[v] = gamma[c0 + v], m0[v] = mdy[c0 + v], m1[v] = mdy[C + c0 + v];
        mb[v] = mbeta ? mbeta[c0 + v] : 0.0f;
    }
    const int rdmask = !mbeta && mask;
    vraw<S, V> xr[U], gr[U];
    vraw<uint16_t, V> kr[U] = {};
    /* in place (dx16 == dy): a row's use comes after its own and the batch's loads */
    rows_ahead<U>(
        (size_t)blockIdx.y * RY + threadIdx.x / QX, (size_t)gridDim.y * RY, M, C, c0,
        [&](int u, size_t i) {
            ldraw<S, V>(x, i, xr[u], rt);
            ldraw<S, V>(dy, i, gr[u], rt);
            if (rdmask) ldraw<uint16_t, V>(mask, i, kr[u], rt);
        },
        [&](int u, size_t i) {
            float xa[V], dya[V], o[V];
            unraw<S, V>(xr[u], xa, rt);
            unraw<S, V>(gr[u], dya, rt);
            if (mbeta) maskxv<V>(xa, mu, rs, gm, mb, dya, rt);
            else if (rdmask) maskrv<V>(kr[u], dya, rt);
            for (int v = 0; v < V; v++) o[v] = tv_round(tv_bn_dx(xa[v], dya[v], mu[v], rs[v], gm[v], m0[v], m1[v]), rt);
            if (dx) stv<V>(dx, i, o);
            if (dx16) st16v<V>(dx16, i, o, rt);
        });
}
template <typename S, int V, int U = BN_EW_U>
__global__ void __launch_bounds__(256, 2)
    k_bn_bwd_data(const S *x, const S *dy, const uint16_t *mask, const float *mbeta, const float *mean,
                  const float *rstd, const float *gamma, const float *mdy, float *dx, uint16_t *dx16, size_t M, int C,
                  int QX, int rt)
{
#define BN_BWD_CALL(RTV) \
    bn_bwd_data_rows<S, V, RTV, U>(x, dy, mask, mbeta, mean, rstd, gamma, mdy, dx, dx16, M, C, QX, rt)
    RT_DISPATCH(rt, BN_BWD_CALL);
#undef BN_BWD_CALL
}

/* y (fp32, may be NULL) and y16 (may be NULL) = a + b (b masked by mask, a
 * 16-bit ReLU output, when given), then the ReLU, rounded, then masked by
 * ymask (a 16-bit ReLU output, when given: train_ops.h add16o); V elements
 * a thread (n % V == 0, aligned) */
template <typename S, int V, int RT>
__device__ static inline void add_vecs(const S *a, const S *b, const uint16_t *mask, const uint16_t *ymask, float *y,
                                       uint16_t *y16, size_t nv, int relu, int rt_)
{
    const int rt = RT >= 0 ? RT : rt_;
    for (size_t iv = blockIdx.x * (size_t)blockDim.x + threadIdx.x; iv < nv; iv += (size_t)gridDim.x * blockDim.x) {
        const size_t i = iv * V;
        float av[V], bv[V], o[V];
        ldv<V>(a, i, av, rt);
        ldv<V>(b, i, bv, rt);
        maskv<V>(mask, i, bv, rt);
        for (int v = 0; v < V; v++) {
            o[v] = av[v] + bv[v];
            if (relu) o[v] = o[v] > 0.0f ? o[v] : 0.0f;
            o[v] = tv_round(o[v], rt);
        }
        maskv<V>(ymask, i, o, rt);
        if (y) stv<V>(y, i, o);
        if (y16) st16v<V>(y16, i, o, rt);
    }
}
template <typename S, int V>
__global__ void k_add(const S *a, const S *b, const uint16_t *mask, const uint16_t *ymask, float *y, uint16_t *y16,
                      size_t nv, int relu, int rt)
{
#define ADD_CALL(RTV) add_vecs<S, V, RTV>(a, b, mask, ymask, y, y16, nv, relu, rt)
    RT_DISPATCH(rt, ADD_CALL);
#undef ADD_CALL
}

/* max pooling over 16-bit values: dev/train_vision.h's tv_maxpool_elem and
 * tv_maxpool_bwd_elem with the loads widened (a comparison of widened
 * values is the comparison of the fp32 values the fp32 op reads; the
 * backward's adds are the same fp32 adds, in the same window order).
 * An item is a pixel and V consecutive channels (V = 8: 16-byte loads of
 * x / dy and of idx as two uint4; V = 1 otherwise), so a pixel's window
 * arithmetic is done once for V channels. I: the index type, 32-bit where
 * every element offset fits (the host's choice): one thread an element with
 * 64-bit divisions took 4.2 ms for resnet50's stem pool backward (256 x 112
 * x 112 x 64) on an H100, integer-bound (BENCHMARKS.md, 2026-12-05). */
template <int V> __device__ static inline void ldidx(const int32_t *p, size_t i, int32_t *o)
{
    if (V == 8) {
        const uint4 a = *(const uint4 *)(p + i), b = *(const uint4 *)(p + i + 4);
        const uint32_t w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
        for (int v = 0; v < 8; v++) o[v] = (int32_t)w[v];
    } else {
        for (int v = 0; v < V; v++) o[v] = p[i + v];
    }
}
template <int V> __device__ static inline void stidx(int32_t *p, size_t i, const int32_t *o)
{
    if (V == 8) {
        *(uint4 *)(p + i) = make_uint4((uint32_t)o[0], (uint32_t)o[1], (uint32_t)o[2], (uint32_t)o[3]);
        *(uint4 *)(p + i + 4) = make_uint4((uint32_t)o[4], (uint32_t)o[5], (uint32_t)o[6], (uint32_t)o[7]);
    } else {
        for (int v = 0; v < V; v++) p[i + v] = o[v];
    }
}

/* item j of an [N, rows, cols, C] tensor taken V channels at a time: its
 * pixel (n, row, col) and first channel c0 */
template <int V, typename I>
__device__ static inline void pool_item(I j, int C, int cols, int rows, I *pix, int *c0, int *col, int *row, I *n)
{
    const I CG = (I)(C / V);
    *pix = j / CG;
    *c0 = (int)(j % CG) * V;
    *col = (int)(*pix % (I)cols);
    const I t = *pix / (I)cols;
    *row = (int)(t % (I)rows);
    *n = t / (I)rows;
}

/* y, idx [N, P, Q, C] from x [N, H, W, C]; n_items = N P Q C / V */
template <int V, typename I>
__global__ void k_maxpool_fwd16(struct train_conv g, const uint16_t *x, uint16_t *y, int32_t *idx, I n_items, int rt)
{
    for (I j = (I)(blockIdx.x * blockDim.x + threadIdx.x); j < n_items; j += (I)(gridDim.x * blockDim.x)) {
        int q, p, c0;
        I pix, nn;
        pool_item<V>(j, g.C, g.Q, g.P, &pix, &c0, &q, &p, &nn);
        float m[V], v8[V];
        int32_t a[V];
        for (int v = 0; v < V; v++) m[v] = 0.0f, a[v] = -1;
        for (int r = 0; r < g.R; r++) {
            const int h = p * g.stride - g.pad + r;
            if (h < 0 || h >= g.H) continue;
            for (int s = 0; s < g.S; s++) {
                const int ww = q * g.stride - g.pad + s;
                if (ww < 0 || ww >= g.W) continue;
                ldv<V>(x, (size_t)(((nn * (I)g.H + (I)h) * (I)g.W + (I)ww) * (I)g.C + (I)c0), v8, rt);
                for (int v = 0; v < V; v++)
                    if (a[v] < 0 || v8[v] > m[v]) {
                        m[v] = v8[v];
                        a[v] = r * g.S + s;
                    }
            }
        }
        const size_t o = (size_t)(pix * (I)g.C + (I)c0);
        stidx<V>(idx, o, a);
        st16v<V>(y, o, m, rt); /* m holds 16-bit values: the stores are exact */
    }
}
/* dx [N, H, W, C] from dy, idx [N, P, Q, C]; n_items = N H W C / V */
template <int V, typename I>
__global__ void k_maxpool_bwd16(struct train_conv g, const uint16_t *dy, const int32_t *idx, uint16_t *dx, I n_items,
                                int rt)
{
    for (I j = (I)(blockIdx.x * blockDim.x + threadIdx.x); j < n_items; j += (I)(gridDim.x * blockDim.x)) {
        int ww, h, c0;
        I pix, nn;
        pool_item<V>(j, g.C, g.W, g.H, &pix, &c0, &ww, &h, &nn);
        float acc[V], d8[V];
        int32_t id[V];
        for (int v = 0; v < V; v++) acc[v] = 0.0f;
        for (int r = g.R - 1; r >= 0; r--) { /* tv_maxpool_bwd_elem's order */
            const int p = tv_conv_out_of(h, r, g.stride, g.pad, g.P);
            if (p < 0) continue;
            for (int s = g.S - 1; s >= 0; s--) {
                const int q = tv_conv_out_of(ww, s, g.stride, g.pad, g.Q);
                if (q < 0) continue;
                const size_t o = (size_t)(((nn * (I)g.P + (I)p) * (I)g.Q + (I)q) * (I)g.C + (I)c0);
                ldidx<V>(idx, o, id);
                ldv<V>(dy, o, d8, rt);
                const int32_t win = r * g.S + s;
                for (int v = 0; v < V; v++)
                    if (id[v] == win) acc[v] = acc[v] + d8[v];
            }
        }
        for (int v = 0; v < V; v++) acc[v] = tv_round(acc[v], rt);
        st16v<V>(dx, (size_t)(pix * (I)g.C + (I)c0), acc, rt);
    }
}

/* the backward of the 3x3, stride-2, pad-1 pool (resnet's stem): an item is
 * a 2x2 block of input pixels (rows 2a, 2a + 1; columns 2b, 2b + 1) and V
 * channels. Its pixels' windows are (a, b), (a, b + 1), (a + 1, b) and
 * (a + 1, b + 1), each window's idx and dy loaded once for the four pixels:
 * k_maxpool_bwd16 reads each window once for each pixel it covers, nine
 * times through the cache, and took 731 us of a resnet50 step (256 x 112 x
 * 112 x 64; BENCHMARKS.md, 2026-12-06). For a pixel, the windows in (p, q)
 * ascending order are k_maxpool_bwd16's r, s descending order: the same adds
 * in the same order, so its bits. n_items = N ceil(H/2) ceil(W/2) C / V. */
template <int V, typename I>
__global__ void k_maxpool_bwd16_s2(struct train_conv g, const uint16_t *dy, const int32_t *idx, uint16_t *dx,
                                   I n_items, int rt)
{
    const int H2 = (g.H + 1) / 2, W2 = (g.W + 1) / 2;
    for (I j = (I)(blockIdx.x * blockDim.x + threadIdx.x); j < n_items; j += (I)(gridDim.x * blockDim.x)) {
        int b, a, c0;
        I blk, nn;
        pool_item<V>(j, g.C, W2, H2, &blk, &c0, &b, &a, &nn);
        float acc[2][2][V];
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < 2; k++)
                for (int v = 0; v < V; v++) acc[i][k][v] = 0.0f;
        for (int dp = 0; dp < 2; dp++) {
            const int p = a + dp;
            if (p >= g.P) continue;
            for (int dq = 0; dq < 2; dq++) {
                const int q = b + dq;
                if (q >= g.Q) continue;
                const size_t o = (size_t)(((nn * (I)g.P + (I)p) * (I)g.Q + (I)q) * (I)g.C + (I)c0);
                int32_t id[V];
                float d8[V];
                ldidx<V>(idx, o, id);
                ldv<V>(dy, o, d8, rt);
                /* pixel (2a + i, 2b + k) is this window's element r = i + 1 - 2 dp, s = k + 1 - 2 dq */
                for (int i = 0; i < 2; i++)
                    for (int k = 0; k < 2; k++) {
                        const int r = i + 1 - 2 * dp, s = k + 1 - 2 * dq;
                        if (r < 0 || s < 0) continue;
                        const int32_t win = r * 3 + s;
                        for (int v = 0; v < V; v++)
                            if (id[v] == win) acc[i][k][v] = acc[i][k][v] + d8[v];
                    }
            }
        }
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < 2; k++) {
                const int h = 2 * a + i, w = 2 * b + k;
                if (h >= g.H || w >= g.W) continue;
                for (int v = 0; v < V; v++) acc[i][k][v] = tv_round(acc[i][k][v], rt);
                st16v<V>(dx, (size_t)(((nn * (I)g.H + (I)h) * (I)g.W + (I)w) * (I)g.C + (I)c0), acc[i][k], rt);
            }
    }
}
/* k_maxpool_bwd16_s2's geometry */
static inline int maxpool_bwd_s2(const struct train_conv *g)
{
    return g->R == 3 && g->S == 3 && g->stride == 2 && g->pad == 1;
}

#endif
