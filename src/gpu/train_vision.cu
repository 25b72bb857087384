/* The GPU vision ops other than convolution (dev/train_ops.h "vision
 * ops"): BatchNorm, pooling, add, softmax cross-entropy.
 *
 * Golden: each kernel evaluates dev/train_vision.h's element functions, so
 * the bits are the cpu backend's. BatchNorm's golden statistics are
 * integer (fixed-point) sums: exact in any order, so blocks combine them
 * with 64-bit integer atomics (two's complement adds, associative); the
 * golden parameter gradients are core/gmath.h's pairwise tree, as aligned
 * chunks of TV_TREE_CHUNK rows per thread and then the tree over the chunk
 * sums (the cpu backend's split of the same tree).
 * Fast: fp32 per-block partial sums in a fixed grid, summed in block order
 * by a second kernel (never float atomics), vendor expf/logf. */
#include "gpu/train_gpu.h"
#include "dev/train_vision.h"
#include "gpu/train_vision_kern.cuh"

#define NEED(cond, ...)                                                                  \
    do {                                                                                 \
        if (!(cond)) return gpu_err(e, PLUMB_EUSAGE, __VA_ARGS__);                       \
    } while (0)
#define RT_OK(op)                                                                        \
    NEED(rt == DT_F32 || rt == DT_BF16 || rt == DT_F16, "%s: %s: rounding type %d is not fp32, bf16 or fp16", \
         d->label, op, (int)rt)
#define ENTER()                                                                          \
    do {                                                                                 \
        int rc_ = gpu_enter(d, e);                                                       \
        if (rc_) return rc_;                                                             \
    } while (0)
#define TPB 256
/* rows per chunk of the golden pairwise sums (aligned blocks of the tree) */
#define TV_TREE_CHUNK 1024
/* BN reductions: blocks of 32 channels x 8 row lanes; each block covers
 * rpb rows, 2048 or more so that the grid's y extent stays <= 65535 (the
 * grid, and so the fast sums, depend on the shape only) */
#define BN_CX 32
#define BN_RY 8
#define BN_ROWS_PER_BLOCK 2048
static size_t bn_rows_per_block(size_t M)
{
    size_t nb = (M + BN_ROWS_PER_BLOCK - 1) / BN_ROWS_PER_BLOCK, k = (nb + 65534) / 65535;
    return BN_ROWS_PER_BLOCK * (k ? k : 1);
}

static inline int is_golden(struct dev *d) { return d->numerics == NUMERICS_GOLDEN; }

/* ---------------- BN statistics ---------------- */

__device__ static inline float bn_value(int kind, const float *x, const float *dy, const float *mean,
                                        const float *rstd, size_t m, int C, int c)
{
    const size_t i = m * (size_t)C + c;
    if (kind == BV_X) return x[i];
    if (kind == BV_SQ) {
        float dd = x[i] - mean[c];
        return dd * dd;
    }
    if (kind == BV_DY) return dy[i];
    return dy[i] * tv_bn_xhat(x[i], mean[c], rstd[c]);
}

/* golden: fixed-point sums of rows [blockIdx.y * RPB, ...), channel block
 * blockIdx.x; hi[c] / lo[c] (int64, zeroed by the caller) get the block's
 * sums by integer atomics */
__global__ void k_bn_fix(int kind, const float *x, const float *dy, const float *mean, const float *rstd, size_t M,
                         int C, size_t rpb, long long *hi, long long *lo)
{
    __shared__ long long sh[2][BN_RY][BN_CX];
    const int c = blockIdx.x * BN_CX + threadIdx.x;
    const size_t m0 = (size_t)blockIdx.y * rpb;
    const size_t m1 = m0 + rpb < M ? m0 + rpb : M;
    long long h = 0, l = 0;
    if (c < C)
        for (size_t m = m0 + threadIdx.y; m < m1; m += BN_RY) {
            int64_t qh, ql;
            tv_fix_split(tv_fix(bn_value(kind, x, dy, mean, rstd, m, C, c)), &qh, &ql);
            h += (long long)qh;
            l += (long long)ql;
        }
    sh[0][threadIdx.y][threadIdx.x] = h;
    sh[1][threadIdx.y][threadIdx.x] = l;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        for (int y = 1; y < BN_RY; y++) {
            h += sh[0][y][threadIdx.x];
            l += sh[1][y][threadIdx.x];
        }
        atomicAdd((unsigned long long *)&hi[c], (unsigned long long)h);
        atomicAdd((unsigned long long *)&lo[c], (unsigned long long)l);
    }
}

/* golden: the fixed-point sums of kind into hi/lo */
static int bn_sums_fix(struct dev *d, struct dev_stream *st, int kind, const float *x, const float *dy,
                       const float *mean, const float *rstd, size_t M, int C, void *hi, void *lo, plumb_err *e)
{
    const size_t rpb = bn_rows_per_block(M);
    const unsigned nby = (unsigned)((M + rpb - 1) / rpb);
    dim3 grid((unsigned)((C + BN_CX - 1) / BN_CX), nby), block(BN_CX, BN_RY);
    GPU_CHECK(d, cudaMemsetAsync(hi, 0, (size_t)C * sizeof(long long), st->s), e);
    GPU_CHECK(d, cudaMemsetAsync(lo, 0, (size_t)C * sizeof(long long), st->s), e);
    k_bn_fix<<<grid, block, 0, st->s>>>(kind, x, dy, mean, rstd, M, C, rpb, (long long *)hi, (long long *)lo);
    GPU_CHECK_LAUNCH(d, "k_bn_fix", e);
    return PLUMB_OK;
}

/* fast: kind BV_X / BV_SQ (NS 1) or the backward pair (kind BV_DY, NS 2)
 * over x/dy [M, C] (fp32 or 16-bit storage S; dy masked by mask, a 16-bit
 * ReLU output, when given) into out [NS C]; copy0 / copy1 as
 * k_bn_red_final */
template <typename S, int VW>
static int bn_sums_fast_t(struct dev *d, struct dev_stream *st, int kind, int NS, const S *x, const S *dy,
                          const uint16_t *mask, const float *mgamma, const float *mbeta, const float *mean,
                          const float *rstd, size_t M, int C, float *out, float *copy0, float *copy1, int rt,
                          plumb_err *e)
{
    const int V = bn_vec_ok(x, kind == BV_DY ? (const void *)dy : (const void *)x, C, VW) &&
                          (!mask || !((uintptr_t)mask & 15))
                      ? VW
                      : 1;
    const struct bn_geom g = bn_geom_of(M, C, V);
    void *ws;
    int rc = tvws_get(d, TVWS_RED, (size_t)g.nby * NS * C * sizeof(float), &ws, e);
    if (rc) return rc;
    dim3 grid(g.ncb, g.nby);
    float *part = (float *)ws;
    const bn_red_part_fn<S> f = V == VW ? bn_red_part_of<S, VW>(NS, kind) : bn_red_part_of<S, 1>(NS, kind);
    f<<<grid, 256, 0, st->s>>>(x, dy, mask, mgamma, mbeta, mean, rstd, M, C, g.rpb, g.QX, g.RY, part, rt);
    GPU_CHECK_LAUNCH(d, "k_bn_red_part", e);
    const int K = NS * C;
    k_bn_red_final<<<(K + 31) / 32, dim3(32, 8), 0, st->s>>>(part, (int)g.nby, K, C, out, copy0, copy1);
    GPU_CHECK_LAUNCH(d, "k_bn_red_final", e);
    return PLUMB_OK;
}
static int bn_sums_fast(struct dev *d, struct dev_stream *st, int kind, int NS, const float *x, const float *dy,
                        const float *mean, const float *rstd, size_t M, int C, float *out, float *copy0,
                        float *copy1, plumb_err *e)
{
    return bn_sums_fast_t<float, 4>(d, st, kind, NS, x, dy, NULL, NULL, NULL, mean, rstd, M, C, out, copy0, copy1, 0,
                                    e);
}

int g_bn_stats(struct dev *d, dev_stream *s, const float *x, size_t M, int C, const float *mean, void *part,
               plumb_err *e)
{
    NEED(x && part, "%s: bn_stats: NULL x or part", d->label);
    NEED(M > 0 && C > 0 && M < ((size_t)1 << 31), "%s: bn_stats: bad shape M=%zu C=%d", d->label, M, C);
    ENTER();
    struct dev_stream *st = gpu_stream(d, s);
    int kind = mean ? BV_SQ : BV_X;
    if (is_golden(d)) return bn_sums_fix(d, st, kind, x, NULL, mean, NULL, M, C, part, (int64_t *)part + C, e);
    return bn_sums_fast(d, st, kind, 1, x, NULL, mean, NULL, M, C, (float *)part, NULL, NULL, e);
}

/* golden: part [2, 2C] (hi: dy, dy xhat; lo: dy, dy xhat) */
static int bn_bwd_fix(struct dev *d, struct dev_stream *st, const float *x, const float *dy, const float *mean,
                      const float *rstd, size_t M, int C, void *part, plumb_err *e)
{
    int64_t *p = (int64_t *)part;
    int rc = bn_sums_fix(d, st, BV_DY, x, dy, mean, rstd, M, C, p, p + 2 * C, e);
    if (!rc) rc = bn_sums_fix(d, st, BV_DYXH, x, dy, mean, rstd, M, C, p + C, p + 3 * C, e);
    return rc;
}
static int bn_tree_params(struct dev *d, struct dev_stream *st, const float *x, const float *dy, const float *mean,
                          const float *rstd, size_t M, int C, float *dgamma, float *dbeta, plumb_err *e);

int g_bn_bwd_stats(struct dev *d, dev_stream *s, const float *x, const float *dy, const float *mean,
                   const float *rstd, size_t M, int C, void *part, plumb_err *e)
{
    NEED(x && dy && mean && rstd && part, "%s: bn_bwd_stats: NULL argument", d->label);
    NEED(M > 0 && C > 0 && M < ((size_t)1 << 31), "%s: bn_bwd_stats: bad shape M=%zu C=%d", d->label, M, C);
    ENTER();
    struct dev_stream *st = gpu_stream(d, s);
    if (is_golden(d)) return bn_bwd_fix(d, st, x, dy, mean, rstd, M, C, part, e);
    return bn_sums_fast(d, st, BV_DY, 2, x, dy, mean, rstd, M, C, (float *)part, NULL, NULL, e);
}

int g_bn_bwd_reduce(struct dev *d, dev_stream *s, const float *x, const float *dy, const float *mean,
                    const float *rstd, size_t M, int C, void *part, float *dgamma, float *dbeta, plumb_err *e)
{
    NEED(x && dy && mean && rstd && part && dgamma && dbeta, "%s: bn_bwd_reduce: NULL argument", d->label);
    NEED(M > 0 && C > 0 && M < ((size_t)1 << 31), "%s: bn_bwd_reduce: bad shape M=%zu C=%d", d->label, M, C);
    ENTER();
    struct dev_stream *st = gpu_stream(d, s);
    if (is_golden(d)) {
        int rc = bn_bwd_fix(d, st, x, dy, mean, rstd, M, C, part, e);
        if (!rc) rc = bn_tree_params(d, st, x, dy, mean, rstd, M, C, dgamma, dbeta, e);
        return rc;
    }
    /* bn_bwd_params' fast sums are bn_bwd_stats' (below): one pass */
    return bn_sums_fast(d, st, BV_DY, 2, x, dy, mean, rstd, M, C, (float *)part, dbeta, dgamma, e);
}

__global__ void k_bn_mean(const void *part, int K, long long count, float *out, int golden)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= K) return;
    if (golden) {
        const int64_t *p = (const int64_t *)part;
        out[i] = tv_fix_mean(p[i], p[K + i], (int64_t)count);
    } else {
        out[i] = ((const float *)part)[i] / (float)count;
    }
}

int g_bn_mean(struct dev *d, dev_stream *s, const void *part, int K, int64_t count, float *out, plumb_err *e)
{
    NEED(part && out, "%s: bn_mean: NULL part or out", d->label);
    NEED(K > 0 && count > 0, "%s: bn_mean: K=%d count=%lld (expected > 0)", d->label, K, (long long)count);
    ENTER();
    k_bn_mean<<<(K + TPB - 1) / TPB, TPB, 0, gpu_stream(d, s)->s>>>(part, K, (long long)count, out, is_golden(d));
    GPU_CHECK_LAUNCH(d, "k_bn_mean", e);
    return PLUMB_OK;
}

__global__ void k_bn_var(const void *part, int C, long long count, float eps, float momentum, const float *mean,
                         float *rstd, float *run_mean, float *run_var, int golden)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float var, varu;
    if (golden) {
        const int64_t *p = (const int64_t *)part;
        double v = tv_fix_value(p[c], p[C + c]);
        var = (float)(v / (double)count);
        varu = (float)(v / (double)(count - 1));
    } else {
        const float *p = (const float *)part;
        var = p[c] / (float)count;
        varu = p[c] / (float)(count - 1);
    }
    rstd[c] = 1.0f / sqrtf(var + eps);
    if (run_mean) {
        run_mean[c] = tv_bn_running(run_mean[c], mean[c], momentum);
        run_var[c] = tv_bn_running(run_var[c], varu, momentum);
    }
}

int g_bn_var(struct dev *d, dev_stream *s, const void *part, int C, int64_t count, float eps, float momentum,
             const float *mean, float *rstd, float *run_mean, float *run_var, plumb_err *e)
{
    NEED(part && rstd, "%s: bn_var: NULL part or rstd", d->label);
    NEED((!run_mean && !run_var) || (run_mean && run_var && mean),
         "%s: bn_var: running statistics need run_mean, run_var and mean", d->label);
    NEED(C > 0 && count >= 2, "%s: bn_var: C=%d count=%lld (expected C > 0, count >= 2)", d->label, C,
         (long long)count);
    ENTER();
    k_bn_var<<<(C + TPB - 1) / TPB, TPB, 0, gpu_stream(d, s)->s>>>(part, C, (long long)count, eps, momentum, mean,
                                                                    rstd, run_mean, run_var, is_golden(d));
    GPU_CHECK_LAUNCH(d, "k_bn_var", e);
    return PLUMB_OK;
}

__global__ void k_bn_rstd(const float *var, int C, float eps, float *rstd)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < C) rstd[c] = 1.0f / sqrtf(var[c] + eps);
}

int g_bn_rstd(struct dev *d, dev_stream *s, const float *var, int C, float eps, float *rstd, plumb_err *e)
{
    NEED(var && rstd && C > 0, "%s: bn_rstd: NULL argument or C=%d", d->label, C);
    ENTER();
    k_bn_rstd<<<(C + TPB - 1) / TPB, TPB, 0, gpu_stream(d, s)->s>>>(var, C, eps, rstd);
    GPU_CHECK_LAUNCH(d, "k_bn_rstd", e);
    return PLUMB_OK;
}

/* elementwise over [M, C]. The 4-wide kernels (C % 4 == 0, 16-byte aligned
 * fp32 tensors, 8-byte aligned mirrors) take a row's channels c .. c + 3 at
 * once, through the same element functions: the same bits. */
static inline int al16(const void *p) { return !((uintptr_t)p & 15); }
static inline int al8(const void *p) { return !((uintptr_t)p & 7); }

/* the elementwise BN kernels in bn_ew_of's geometry, one wave: the blocks of
 * kernel f resident at once on the device (f's occupancy, asked once) */
template <typename K> static size_t wave_blocks(struct dev *d, K f, int *per_sm)
{
    if (!*per_sm) {
        int nb = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, f, TPB, 0) != cudaSuccess || nb < 1) {
            (void)cudaGetLastError(); /* not sticky: fall back to one block an SM */
            nb = 1;
        }
        *per_sm = nb;
    }
    return (size_t)*per_sm * (size_t)(gpu_of(d)->sm_count > 0 ? gpu_of(d)->sm_count : 1);
}
template <typename S, int V>
static int bn_apply_launch(struct dev *d, cudaStream_t cs, const S *x, const float *mean, const float *rstd,
                           const float *gamma, const float *beta, const S *z, float *y, uint16_t *y16, size_t M, int C,
                           int relu, int rt, plumb_err *e)
{
    static int per_sm;
    const struct bn_ew g = bn_ew_of(M, C, V, TPB, wave_blocks(d, k_bn_apply<S, V>, &per_sm));
    k_bn_apply<S, V><<<dim3(g.gx, g.gy), TPB, 0, cs>>>(x, mean, rstd, gamma, beta, z, y, y16, M, C, g.QX, relu, rt);
    GPU_CHECK_LAUNCH(d, "k_bn_apply", e);
    return PLUMB_OK;
}
template <typename S, int V>
static int bn_bwd_data_launch(struct dev *d, cudaStream_t cs, const S *x, const S *dy, const uint16_t *mask,
                              const float *mbeta, const float *mean, const float *rstd, const float *gamma,
                              const float *mdy, float *dx, uint16_t *dx16, size_t M, int C, int rt, plumb_err *e)
{
    static int per_sm;
    const struct bn_ew g = bn_ew_of(M, C, V, TPB, wave_blocks(d, k_bn_bwd_data<S, V>, &per_sm));
    k_bn_bwd_data<S, V><<<dim3(g.gx, g.gy), TPB, 0, cs>>>(x, dy, mask, mbeta, mean, rstd, gamma, mdy, dx, dx16, M, C, g.QX,
                                                          rt);
    GPU_CHECK_LAUNCH(d, "k_bn_bwd_data", e);
    return PLUMB_OK;
}

static int bn_apply_any(struct dev *d, dev_stream *s, const float *x, const float *mean, const float *rstd,
                        const float *gamma, const float *beta, const float *z, float *y, uint16_t *y16, size_t M,
                        int C, int relu, dtype_t rt, plumb_err *e)
{
    ENTER();
    cudaStream_t cs = gpu_stream(d, s)->s;
    if (C % 4 == 0 && al16(x) && al16(y) && (!z || al16(z)) && (!y16 || al8(y16)))
        return bn_apply_launch<float, 4>(d, cs, x, mean, rstd, gamma, beta, z, y, y16, M, C, relu, (int)rt, e);
    return bn_apply_launch<float, 1>(d, cs, x, mean, rstd, gamma, beta, z, y, y16, M, C, relu, (int)rt, e);
}

int g_bn_apply(struct dev *d, dev_stream *s, const float *x, const float *mean, const float *rstd, const float *gamma,
               const float *beta, const float *z, float *y, size_t M, int C, int relu, dtype_t rt, plumb_err *e)
{
    NEED(x && mean && rstd && gamma && beta && y, "%s: bn_apply: NULL argument", d->label);
    NEED(M > 0 && C > 0, "%s: bn_apply: bad shape M=%zu C=%d", d->label, M, C);
    RT_OK("bn_apply");
    return bn_apply_any(d, s, x, mean, rstd, gamma, beta, z, y, NULL, M, C, relu, rt, e);
}

int g_bn_apply16(struct dev *d, dev_stream *s, const float *x, const float *mean, const float *rstd,
                 const float *gamma, const float *beta, const float *z, float *y, uint16_t *y16, size_t M, int C,
                 int relu, dtype_t rt, plumb_err *e)
{
    NEED(x && mean && rstd && gamma && beta && y, "%s: bn_apply16: NULL argument", d->label);
    NEED(M > 0 && C > 0, "%s: bn_apply16: bad shape M=%zu C=%d", d->label, M, C);
    NEED(rt == DT_BF16 || rt == DT_F16, "%s: bn_apply16: rounding type %d is not bf16 or fp16", d->label, (int)rt);
    return bn_apply_any(d, s, x, mean, rstd, gamma, beta, z, y, y16, M, C, relu, rt, e);
}

static int bn_bwd_data_any(struct dev *d, dev_stream *s, const float *x, const float *dy, const float *mean,
                           const float *rstd, const float *gamma, const float *mdy, float *dx, uint16_t *dx16,
                           size_t M, int C, dtype_t rt, plumb_err *e)
{
    ENTER();
    cudaStream_t cs = gpu_stream(d, s)->s;
    if (C % 4 == 0 && al16(x) && al16(dy) && al16(dx) && (!dx16 || al8(dx16)))
        return bn_bwd_data_launch<float, 4>(d, cs, x, dy, NULL, NULL, mean, rstd, gamma, mdy, dx, dx16, M, C, (int)rt,
                                            e);
    return bn_bwd_data_launch<float, 1>(d, cs, x, dy, NULL, NULL, mean, rstd, gamma, mdy, dx, dx16, M, C, (int)rt, e);
}

int g_bn_bwd_data(struct dev *d, dev_stream *s, const float *x, const float *dy, const float *mean, const float *rstd,
                  const float *gamma, const float *mdy, float *dx, size_t M, int C, dtype_t rt, plumb_err *e)
{
    NEED(x && dy && mean && rstd && gamma && mdy && dx, "%s: bn_bwd_data: NULL argument", d->label);
    NEED(M > 0 && C > 0, "%s: bn_bwd_data: bad shape M=%zu C=%d", d->label, M, C);
    RT_OK("bn_bwd_data");
    return bn_bwd_data_any(d, s, x, dy, mean, rstd, gamma, mdy, dx, NULL, M, C, rt, e);
}

int g_bn_bwd_data16(struct dev *d, dev_stream *s, const float *x, const float *dy, const float *mean,
                    const float *rstd, const float *gamma, const float *mdy, float *dx, uint16_t *dx16, size_t M,
                    int C, dtype_t rt, plumb_err *e)
{
    NEED(x && dy && mean && rstd && gamma && mdy && dx, "%s: bn_bwd_data16: NULL argument", d->label);
    NEED(M > 0 && C > 0, "%s: bn_bwd_data16: bad shape M=%zu C=%d", d->label, M, C);
    NEED(rt == DT_BF16 || rt == DT_F16, "%s: bn_bwd_data16: rounding type %d is not bf16 or fp16", d->label,
         (int)rt);
    return bn_bwd_data_any(d, s, x, dy, mean, rstd, gamma, mdy, dx, dx16, M, C, rt, e);
}

/* golden: chunk j of TV_TREE_CHUNK rows, channel c -> the pairwise tree of
 * dy and of dy * xhat over the chunk: cs[j, 0/1, c] */
__global__ void k_bn_tree_chunks(const float *x, const float *dy, const float *mean, const float *rstd, size_t M,
                                 int C, size_t nch, float *cs)
{
    size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (t >= nch * (size_t)C) return;
    size_t j = t / (size_t)C;
    int c = (int)(t % (size_t)C);
    size_t m0 = j * TV_TREE_CHUNK, m1 = m0 + TV_TREE_CHUNK < M ? m0 + TV_TREE_CHUNK : M;
    struct gpairwise pb, pg;
    gpw_init(&pb);
    gpw_init(&pg);
    const float mu = mean[c], rs = rstd[c];
    for (size_t m = m0; m < m1; m++) {
        float g = dy[m * C + c];
        gpw_push(&pb, g);
        gpw_push(&pg, g * tv_bn_xhat(x[m * C + c], mu, rs));
    }
    cs[(j * 2) * C + c] = gpw_result(&pb);
    cs[(j * 2 + 1) * C + c] = gpw_result(&pg);
}
/* the same tree over the chunk sums, one thread per channel */
__global__ void k_bn_tree_final(const float *cs, size_t nch, int C, float *dgamma, float *dbeta)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    struct gpairwise pb, pg;
    gpw_init(&pb);
    gpw_init(&pg);
    for (size_t j = 0; j < nch; j++) {
        gpw_push(&pb, cs[(j * 2) * C + c]);
        gpw_push(&pg, cs[(j * 2 + 1) * C + c]);
    }
    dbeta[c] = gpw_result(&pb);
    dgamma[c] = gpw_result(&pg);
}

int g_bn_bwd_params(struct dev *d, dev_stream *s, const float *x, const float *dy, const float *mean,
                    const float *rstd, size_t M, int C, float *dgamma, float *dbeta, plumb_err *e)
{
    NEED(x && dy && mean && rstd && dgamma && dbeta, "%s: bn_bwd_params: NULL argument", d->label);
    NEED(M > 0 && C > 0 && M < ((size_t)1 << 31), "%s: bn_bwd_params: bad shape M=%zu C=%d", d->label, M, C);
    ENTER();
    struct dev_stream *st = gpu_stream(d, s);
    if (!is_golden(d)) { /* the sums of bn_bwd_stats, in its order */
        void *ws;
        int rc = tvws_get(d, TVWS_PART, 2 * (size_t)C * sizeof(float), &ws, e);
        if (!rc) rc = bn_sums_fast(d, st, BV_DY, 2, x, dy, mean, rstd, M, C, (float *)ws, dbeta, dgamma, e);
        return rc;
    }
    return bn_tree_params(d, st, x, dy, mean, rstd, M, C, dgamma, dbeta, e);
}

static int bn_tree_params(struct dev *d, struct dev_stream *st, const float *x, const float *dy, const float *mean,
                          const float *rstd, size_t M, int C, float *dgamma, float *dbeta, plumb_err *e)
{
    size_t nch = (M + TV_TREE_CHUNK - 1) / TV_TREE_CHUNK;
    void *ws;
    int rc = tvws_get(d, TVWS_RED, nch * 2 * (size_t)C * sizeof(float), &ws, e);
    if (rc) return rc;
    size_t nt = nch * (size_t)C;
    k_bn_tree_chunks<<<(unsigned)((nt + 127) / 128), 128, 0, st->s>>>(x, dy, mean, rstd, M, C, nch, (float *)ws);
    GPU_CHECK_LAUNCH(d, "k_bn_tree_chunks", e);
    k_bn_tree_final<<<(C + 127) / 128, 128, 0, st->s>>>((const float *)ws, nch, C, dgamma, dbeta);
    GPU_CHECK_LAUNCH(d, "k_bn_tree_final", e);
    return PLUMB_OK;
}

/* ---------------- pooling, add ---------------- */

__global__ void k_maxpool_fwd(struct train_conv g, const float *x, float *y, int32_t *idx, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        int c = (int)(i % g.C);
        size_t pix = i / g.C;
        int q = (int)(pix % g.Q), p = (int)(pix / g.Q % g.P), nn = (int)(pix / ((size_t)g.P * g.Q));
        y[i] = tv_maxpool_elem(&g, x, nn, p, q, c, &idx[i]);
    }
}
__global__ void k_maxpool_bwd(struct train_conv g, const float *dy, const int32_t *idx, float *dx, size_t n, int rt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        int c = (int)(i % g.C);
        size_t pix = i / g.C;
        int w = (int)(pix % g.W), h = (int)(pix / g.W % g.H), nn = (int)(pix / ((size_t)g.H * g.W));
        dx[i] = tv_round(tv_maxpool_bwd_elem(&g, dy, idx, nn, h, w, c), rt);
    }
}

int g_maxpool_fwd(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x, float *y, int32_t *idx,
                  plumb_err *e)
{
    NEED(x && y && idx, "%s: maxpool_fwd: NULL x, y or idx", d->label);
    NEED(!train_conv_valid(g) && g->K == g->C && g->pad < g->R && g->pad < g->S,
         "%s: maxpool_fwd: bad geometry (expected train_conv_set's, K == C, pad < window)", d->label);
    ENTER();
    size_t n = (size_t)g->N * g->P * g->Q * g->C;
    k_maxpool_fwd<<<gpu_grid(n, TPB), TPB, 0, gpu_stream(d, s)->s>>>(*g, x, y, idx, n);
    GPU_CHECK_LAUNCH(d, "k_maxpool_fwd", e);
    return PLUMB_OK;
}

int g_maxpool_bwd(struct dev *d, dev_stream *s, const struct train_conv *g, const float *dy, const int32_t *idx,
                  float *dx, dtype_t rt, plumb_err *e)
{
    NEED(dy && idx && dx, "%s: maxpool_bwd: NULL dy, idx or dx", d->label);
    NEED(!train_conv_valid(g) && g->K == g->C, "%s: maxpool_bwd: bad geometry (expected train_conv_set's, K == C)",
         d->label);
    RT_OK("maxpool_bwd");
    ENTER();
    size_t n = (size_t)g->N * g->H * g->W * g->C;
    k_maxpool_bwd<<<gpu_grid(n, TPB), TPB, 0, gpu_stream(d, s)->s>>>(*g, dy, idx, dx, n, (int)rt);
    GPU_CHECK_LAUNCH(d, "k_maxpool_bwd", e);
    return PLUMB_OK;
}

__global__ void k_avgpool_fwd(const float *x, float *y, int N, int HW, int C, int rt)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= (size_t)N * C) return;
    int n = (int)(i / C), c = (int)(i % C);
    y[i] = tv_round(tv_avgpool_elem(x, n, HW, C, c), rt);
}
__global__ void k_avgpool_bwd(const float *dy, float *dx, int HW, int C, size_t n, int rt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        size_t nn = i / ((size_t)HW * C);
        int c = (int)(i % C);
        dx[i] = tv_round(dy[nn * C + c] / (float)HW, rt);
    }
}

int g_avgpool_fwd(struct dev *d, dev_stream *s, const float *x, float *y, int N, int HW, int C, dtype_t rt,
                  plumb_err *e)
{
    NEED(x && y, "%s: avgpool_fwd: NULL x or y", d->label);
    NEED(N > 0 && HW > 0 && C > 0, "%s: avgpool_fwd: bad shape N=%d HW=%d C=%d", d->label, N, HW, C);
    RT_OK("avgpool_fwd");
    ENTER();
    size_t n = (size_t)N * C;
    k_avgpool_fwd<<<(unsigned)((n + 127) / 128), 128, 0, gpu_stream(d, s)->s>>>(x, y, N, HW, C, (int)rt);
    GPU_CHECK_LAUNCH(d, "k_avgpool_fwd", e);
    return PLUMB_OK;
}

int g_avgpool_bwd(struct dev *d, dev_stream *s, const float *dy, float *dx, int N, int HW, int C, dtype_t rt,
                  plumb_err *e)
{
    NEED(dy && dx, "%s: avgpool_bwd: NULL dy or dx", d->label);
    NEED(N > 0 && HW > 0 && C > 0, "%s: avgpool_bwd: bad shape N=%d HW=%d C=%d", d->label, N, HW, C);
    RT_OK("avgpool_bwd");
    ENTER();
    size_t n = (size_t)N * HW * C;
    k_avgpool_bwd<<<gpu_grid(n, TPB), TPB, 0, gpu_stream(d, s)->s>>>(dy, dx, HW, C, n, (int)rt);
    GPU_CHECK_LAUNCH(d, "k_avgpool_bwd", e);
    return PLUMB_OK;
}

int g_add(struct dev *d, dev_stream *s, const float *a, const float *b, float *y, size_t n, int relu, dtype_t rt,
          plumb_err *e)
{
    NEED((a && b && y) || n == 0, "%s: add: NULL a, b or y", d->label);
    RT_OK("add");
    if (!n) return PLUMB_OK;
    ENTER();
    if (n % 4 == 0 && al16(a) && al16(b) && al16(y)) {
        k_add<float, 4><<<gpu_grid(n / 4, TPB), TPB, 0, gpu_stream(d, s)->s>>>(a, b, NULL, NULL, y, NULL, n / 4, relu,
                                                                               (int)rt);
        GPU_CHECK_LAUNCH(d, "k_add<4>", e);
        return PLUMB_OK;
    }
    k_add<float, 1><<<gpu_grid(n, TPB), TPB, 0, gpu_stream(d, s)->s>>>(a, b, NULL, NULL, y, NULL, n, relu, (int)rt);
    GPU_CHECK_LAUNCH(d, "k_add", e);
    return PLUMB_OK;
}

/* ---------------- softmax cross-entropy ---------------- */

/* golden, one thread per row (tv_xent_row's order): loss into lb[b] (0 when
 * masked) */
__global__ void k_cls_xent(const float *z, const int32_t *labels, int B, int V, int n_valid, float gs, float *loss_ps,
                           int32_t *pred, float *dz, float *lb)
{
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B) return;
    int y = b < n_valid && labels ? labels[b] : -1;
    int32_t pr;
    float *dzr = dz ? dz + (size_t)b * V : NULL;
    float l = tv_xent_row(z + (size_t)b * V, V, y, gs, dzr, &pr);
    if (y < 0 && dzr)
        for (int i = 0; i < V; i++) dzr[i] = 0.0f;
    lb[b] = l;
    if (pred) pred[b] = pr;
    if (loss_ps) loss_ps[b] = l;
}
/* fast rows, a warp a row: each lane scans the logits i = lane, lane + W, ...
 * (W = PLUMB_WARP) for its first maximum, then a butterfly keeps the largest,
 * the lowest index among equals: the first maximum of the row, the serial
 * scan's pred. The exponentials' sum is the lanes' sums added by the
 * butterfly (fixed: every run the same bits). One thread a row took 251 us of
 * a resnet50 step for 256 rows of 1000 (BENCHMARKS.md, 2026-12-06). */
__global__ void k_cls_xent_warp(const float *z, const int32_t *labels, int B, int V, int n_valid, float gs,
                                float *loss_ps, int32_t *pred, float *dz, float *lb)
{
    const int b = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) / PLUMB_WARP), lane = threadIdx.x % PLUMB_WARP;
    if (b >= B) return;
    const float *zr = z + (size_t)b * V;
    float *dzr = dz ? dz + (size_t)b * V : NULL;
    float m = lane < V ? zr[lane] : -INFINITY;
    int am = lane < V ? lane : V;
    for (int i = lane + PLUMB_WARP; i < V; i += PLUMB_WARP)
        if (zr[i] > m) m = zr[i], am = i;
#pragma unroll
    for (int off = PLUMB_WARP / 2; off > 0; off >>= 1) {
        const float om = plumb_shfl_xor(m, off);
        const int oa = plumb_shfl_xor(am, off);
        if (om > m || (om == m && oa < am)) m = om, am = oa;
    }
    const int y = b < n_valid && labels ? labels[b] : -1;
    float l = 0.0f;
    if (y >= 0) {
        float S = 0.0f;
        for (int i = lane; i < V; i += PLUMB_WARP) S += expf(zr[i] - m);
        S = plumb_warp_sum(S);
        if (dzr)
            for (int i = lane; i < V; i += PLUMB_WARP) {
                const float p = expf(zr[i] - m) / S;
                dzr[i] = (i == y ? p - 1.0f : p) * gs;
            }
        l = logf(S) - (zr[y] - m);
    } else if (dzr) {
        for (int i = lane; i < V; i += PLUMB_WARP) dzr[i] = 0.0f;
    }
    if (lane) return;
    lb[b] = l;
    if (pred) pred[b] = am;
    if (loss_ps) loss_ps[b] = l;
}
/* the contract's sum: double adds in ascending b from 0 (both modes here:
 * B rows are few) */
__global__ void k_xent_sum(const float *lb, int n_valid, double *sc)
{
    double s = 0.0;
    for (int b = 0; b < n_valid; b++) s += (double)lb[b];
    sc[0] = s;
    sc[1] = (double)n_valid;
}

int g_cls_xent(struct dev *d, dev_stream *s, const float *z, const int32_t *labels, int B, int V, int n_valid,
               float grad_scale, float *loss_ps, double *sum_count, int32_t *pred, float *dz, plumb_err *e)
{
    NEED(z, "%s: cls_xent: NULL logits", d->label);
    NEED(labels || (!loss_ps && !sum_count && !dz) || n_valid == 0, "%s: cls_xent: NULL labels", d->label);
    NEED(B > 0 && V > 0 && n_valid >= 0 && n_valid <= B, "%s: cls_xent: bad B=%d V=%d n_valid=%d", d->label, B, V,
         n_valid);
    ENTER();
    struct dev_stream *st = gpu_stream(d, s);
    void *ws;
    int rc = tvws_get(d, TVWS_RED, (size_t)B * sizeof(float), &ws, e);
    if (rc) return rc;
    if (is_golden(d)) {
        k_cls_xent<<<(B + 127) / 128, 128, 0, st->s>>>(z, labels, B, V, n_valid, grad_scale, loss_ps, pred, dz,
                                                       (float *)ws);
        GPU_CHECK_LAUNCH(d, "k_cls_xent", e);
    } else {
        const unsigned rows = 256 / PLUMB_WARP;
        k_cls_xent_warp<<<(unsigned)((B + rows - 1) / rows), 256, 0, st->s>>>(z, labels, B, V, n_valid, grad_scale,
                                                                             loss_ps, pred, dz, (float *)ws);
        GPU_CHECK_LAUNCH(d, "k_cls_xent_warp", e);
    }
    if (sum_count) {
        k_xent_sum<<<1, 1, 0, st->s>>>((const float *)ws, n_valid, sum_count);
        GPU_CHECK_LAUNCH(d, "k_xent_sum", e);
    }
    return PLUMB_OK;
}

/* ---------------- resnet with 16-bit activations ----------------
 * (dev/train_ops.h): the kernels above over 16-bit storage, eight values
 * (16 bytes) a load or store where C (or n) is a multiple of 8 and the
 * tensors are 16-byte aligned (every resnet layer's: channels are multiples
 * of 8, buffers from the caching allocator), one at a time otherwise. BN's
 * statistics and the backward's two sums are one pass each over the 16-bit
 * tensors (the fp32 kernels' grid over (M, C, V = 8), so the lane order
 * differs from the fp32 ops' V = 4: fp32 sums that may differ by reordering);
 * the ReLU mask of the backward is read from the 16-bit output, never
 * stored. Fast numerics only: golden runs the fp32 ops. */
static inline int v8ok(const void *p) { return p == NULL || !((uintptr_t)p & 15); }

int g_bn_stats16o(struct dev *d, dev_stream *s, const uint16_t *x16, size_t M, int C, const float *mean, void *part,
                  dtype_t rt, plumb_err *e)
{
    NEED(x16 && part, "%s: bn_stats16o: NULL x16 or part", d->label);
    NEED(M > 0 && C > 0 && M < ((size_t)1 << 31), "%s: bn_stats16o: bad shape M=%zu C=%d", d->label, M, C);
    FAST16("bn_stats16o");
    ENTER();
    return bn_sums_fast_t<uint16_t, 8>(d, gpu_stream(d, s), mean ? BV_SQ : BV_X, 1, x16, NULL, NULL, NULL, NULL, mean,
                                       NULL, M, C, (float *)part, NULL, NULL, (int)rt, e);
}

/* the forward's statistics in one pass: the sums of d = x - shift and of
 * d * d (kind BV_SH, NS 2: the backward's grid and combine) into part [2C] */
int g_bn_stats1p16o(struct dev *d, dev_stream *s, const uint16_t *x16, size_t M, int C, const float *shift,
                    void *part, dtype_t rt, plumb_err *e)
{
    NEED(x16 && part, "%s: bn_stats1p16o: NULL x16 or part", d->label);
    NEED(M > 0 && C > 0 && M < ((size_t)1 << 31), "%s: bn_stats1p16o: bad shape M=%zu C=%d", d->label, M, C);
    FAST16("bn_stats1p16o");
    ENTER();
    return bn_sums_fast_t<uint16_t, 8>(d, gpu_stream(d, s), BV_SH, 2, x16, NULL, NULL, NULL, NULL, shift, NULL, M, C,
                                       (float *)part, NULL, NULL, (int)rt, e);
}

int g_bn_meanvar(struct dev *d, dev_stream *s, const void *part, int C, int64_t count, float eps, float momentum,
                 const float *shift, float *mean, float *rstd, float *run_mean, float *run_var, plumb_err *e)
{
    NEED(part && mean && rstd, "%s: bn_meanvar: NULL part, mean or rstd", d->label);
    NEED((!run_mean) == (!run_var), "%s: bn_meanvar: running statistics need both run_mean and run_var", d->label);
    NEED(C > 0 && count >= 2, "%s: bn_meanvar: C=%d count=%lld (expected C > 0, count >= 2)", d->label, C,
         (long long)count);
    NEED(!is_golden(d), "%s: bn_meanvar: fast numerics only (golden statistics are bn_var's)", d->label);
    NEED(mean != shift && rstd != shift, "%s: bn_meanvar: mean or rstd aliases the shift", d->label);
    ENTER();
    k_bn_meanvar<<<(C + TPB - 1) / TPB, TPB, 0, gpu_stream(d, s)->s>>>((const float *)part, C, (long long)count, eps,
                                                                        momentum, shift, mean, rstd, run_mean, run_var);
    GPU_CHECK_LAUNCH(d, "k_bn_meanvar", e);
    return PLUMB_OK;
}

int g_bn_apply16o(struct dev *d, dev_stream *s, const uint16_t *x16, const float *mean, const float *rstd,
                  const float *gamma, const float *beta, const uint16_t *z16, uint16_t *y16, size_t M, int C, int relu,
                  dtype_t rt, plumb_err *e)
{
    NEED(x16 && mean && rstd && gamma && beta && y16, "%s: bn_apply16o: NULL argument", d->label);
    NEED(M > 0 && C > 0, "%s: bn_apply16o: bad shape M=%zu C=%d", d->label, M, C);
    FAST16("bn_apply16o");
    ENTER();
    cudaStream_t cs = gpu_stream(d, s)->s;
    if (C % 8 == 0 && v8ok(x16) && v8ok(z16) && v8ok(y16))
        return bn_apply_launch<uint16_t, 8>(d, cs, x16, mean, rstd, gamma, beta, z16, NULL, y16, M, C, relu, (int)rt, e);
    return bn_apply_launch<uint16_t, 1>(d, cs, x16, mean, rstd, gamma, beta, z16, NULL, y16, M, C, relu, (int)rt, e);
}

int g_bn_apply2_16o(struct dev *d, dev_stream *s, const uint16_t *x16, const float *mean, const float *rstd,
                    const float *gamma, const float *beta, const uint16_t *zx16, const float *zmean,
                    const float *zrstd, const float *zgamma, const float *zbeta, uint16_t *y16, size_t M, int C,
                    int relu, dtype_t rt, plumb_err *e)
{
    NEED(x16 && mean && rstd && gamma && beta && zx16 && zmean && zrstd && zgamma && zbeta && y16,
         "%s: bn_apply2_16o: NULL argument", d->label);
    NEED(M > 0 && C > 0, "%s: bn_apply2_16o: bad shape M=%zu C=%d", d->label, M, C);
    FAST16("bn_apply2_16o");
    ENTER();
    cudaStream_t cs = gpu_stream(d, s)->s;
    if (C % 8 == 0 && v8ok(x16) && v8ok(zx16) && v8ok(y16)) {
        static int per_sm;
        const struct bn_ew g = bn_ew_of(M, C, 8, TPB, wave_blocks(d, k_bn_apply2<8>, &per_sm));
        k_bn_apply2<8><<<dim3(g.gx, g.gy), TPB, 0, cs>>>(x16, mean, rstd, gamma, beta, zx16, zmean, zrstd, zgamma,
                                                         zbeta, y16, M, C, g.QX, relu, (int)rt);
    } else {
        static int per_sm1;
        const struct bn_ew g = bn_ew_of(M, C, 1, TPB, wave_blocks(d, k_bn_apply2<1>, &per_sm1));
        k_bn_apply2<1><<<dim3(g.gx, g.gy), TPB, 0, cs>>>(x16, mean, rstd, gamma, beta, zx16, zmean, zrstd, zgamma,
                                                         zbeta, y16, M, C, g.QX, relu, (int)rt);
    }
    GPU_CHECK_LAUNCH(d, "k_bn_apply2", e);
    return PLUMB_OK;
}

int g_bn_bwd_reduce16o(struct dev *d, dev_stream *s, const uint16_t *x16, const uint16_t *dy16,
                       const uint16_t *mask16, const float *mgamma, const float *mbeta, const float *mean,
                       const float *rstd, size_t M, int C, void *part, float *dgamma, float *dbeta, dtype_t rt,
                       plumb_err *e)
{
    NEED(x16 && dy16 && mean && rstd && part && dgamma && dbeta, "%s: bn_bwd_reduce16o: NULL argument", d->label);
    NEED(!(mask16 && mbeta), "%s: bn_bwd_reduce16o: both a mask16 and a mask from x (mbeta)", d->label);
    NEED(!mbeta || mgamma, "%s: bn_bwd_reduce16o: a mask from x needs mgamma", d->label);
    NEED(M > 0 && C > 0 && M < ((size_t)1 << 31), "%s: bn_bwd_reduce16o: bad shape M=%zu C=%d", d->label, M, C);
    FAST16("bn_bwd_reduce16o");
    ENTER();
    /* the sums of dy and dy xhat, the part and the parameter gradients at once */
    return bn_sums_fast_t<uint16_t, 8>(d, gpu_stream(d, s), BV_DY, 2, x16, dy16, mask16, mgamma, mbeta, mean, rstd,
                                       M, C, (float *)part, dbeta, dgamma, (int)rt, e);
}

int g_bn_bwd_data16o(struct dev *d, dev_stream *s, const uint16_t *x16, const uint16_t *dy16, const uint16_t *mask16,
                     const float *mbeta, const float *mean, const float *rstd, const float *gamma, const float *mdy,
                     uint16_t *dx16, size_t M, int C, dtype_t rt, plumb_err *e)
{
    NEED(x16 && dy16 && mean && rstd && gamma && mdy && dx16, "%s: bn_bwd_data16o: NULL argument", d->label);
    NEED(!(mask16 && mbeta), "%s: bn_bwd_data16o: both a mask16 and a mask from x (mbeta)", d->label);
    NEED(M > 0 && C > 0, "%s: bn_bwd_data16o: bad shape M=%zu C=%d", d->label, M, C);
    FAST16("bn_bwd_data16o");
    ENTER();
    cudaStream_t cs = gpu_stream(d, s)->s;
    if (C % 8 == 0 && v8ok(x16) && v8ok(dy16) && v8ok(mask16) && v8ok(dx16))
        return bn_bwd_data_launch<uint16_t, 8>(d, cs, x16, dy16, mask16, mbeta, mean, rstd, gamma, mdy, NULL, dx16,
                                               M, C, (int)rt, e);
    return bn_bwd_data_launch<uint16_t, 1>(d, cs, x16, dy16, mask16, mbeta, mean, rstd, gamma, mdy, NULL, dx16, M, C,
                                           (int)rt, e);
}

int g_add16o(struct dev *d, dev_stream *s, const uint16_t *a16, const uint16_t *b16, const uint16_t *mask16,
             const uint16_t *ymask16, uint16_t *y16, size_t n, dtype_t rt, plumb_err *e)
{
    NEED((a16 && b16 && y16) || n == 0, "%s: add16o: NULL a16, b16 or y16", d->label);
    FAST16("add16o");
    if (!n) return PLUMB_OK;
    ENTER();
    cudaStream_t cs = gpu_stream(d, s)->s;
    if (n % 8 == 0 && v8ok(a16) && v8ok(b16) && v8ok(mask16) && v8ok(ymask16) && v8ok(y16)) {
        k_add<uint16_t, 8><<<gpu_grid(n / 8, TPB), TPB, 0, cs>>>(a16, b16, mask16, ymask16, NULL, y16, n / 8, 0,
                                                                 (int)rt);
        GPU_CHECK_LAUNCH(d, "k_add<16-bit, 8>", e);
        return PLUMB_OK;
    }
    k_add<uint16_t, 1><<<gpu_grid(n, TPB), TPB, 0, cs>>>(a16, b16, mask16, ymask16, NULL, y16, n, 0, (int)rt);
    GPU_CHECK_LAUNCH(d, "k_add<16-bit>", e);
    return PLUMB_OK;
}

/* the 16-bit max-pool kernels' choices (gpu/train_vision_kern.cuh): eight
 * channels an item where C allows and the tensors are 16-byte aligned, and
 * 32-bit index arithmetic where every element offset of both tensors fits
 * below 2^31 (so that the grid-stride step cannot wrap either) */
static int pool_vec8(int C, const void *a, const void *b, const int32_t *idx)
{
    return bn_vec_ok(a, b, C, 8) && al16(idx);
}
static int pool_i32(size_t n_in, size_t n_out) { return n_in < ((size_t)1 << 31) && n_out < ((size_t)1 << 31); }

int g_maxpool_fwd16o(struct dev *d, dev_stream *s, const struct train_conv *g, const uint16_t *x16, uint16_t *y16,
                     int32_t *idx, dtype_t rt, plumb_err *e)
{
    NEED(x16 && y16 && idx, "%s: maxpool_fwd16o: NULL x16, y16 or idx", d->label);
    NEED(g && !train_conv_valid(g) && g->K == g->C && g->pad < g->R && g->pad < g->S,
         "%s: maxpool_fwd16o: bad geometry (expected train_conv_set's, K == C, pad < window)", d->label);
    FAST16("maxpool_fwd16o");
    ENTER();
    const cudaStream_t cs = gpu_stream(d, s)->s;
    const size_t nx = (size_t)g->N * g->H * g->W * g->C, n = (size_t)g->N * g->P * g->Q * g->C;
    if (pool_vec8(g->C, x16, y16, idx)) {
        if (pool_i32(nx, n))
            k_maxpool_fwd16<8, uint32_t><<<gpu_grid(n / 8, TPB), TPB, 0, cs>>>(*g, x16, y16, idx, (uint32_t)(n / 8), (int)rt);
        else
            k_maxpool_fwd16<8, size_t><<<gpu_grid(n / 8, TPB), TPB, 0, cs>>>(*g, x16, y16, idx, n / 8, (int)rt);
    } else if (pool_i32(nx, n)) {
        k_maxpool_fwd16<1, uint32_t><<<gpu_grid(n, TPB), TPB, 0, cs>>>(*g, x16, y16, idx, (uint32_t)n, (int)rt);
    } else {
        k_maxpool_fwd16<1, size_t><<<gpu_grid(n, TPB), TPB, 0, cs>>>(*g, x16, y16, idx, n, (int)rt);
    }
    GPU_CHECK_LAUNCH(d, "k_maxpool_fwd16", e);
    return PLUMB_OK;
}

int g_maxpool_bwd16o(struct dev *d, dev_stream *s, const struct train_conv *g, const uint16_t *dy16,
                     const int32_t *idx, uint16_t *dx16, dtype_t rt, plumb_err *e)
{
    NEED(dy16 && idx && dx16, "%s: maxpool_bwd16o: NULL dy16, idx or dx16", d->label);
    NEED(g && !train_conv_valid(g) && g->K == g->C,
         "%s: maxpool_bwd16o: bad geometry (expected train_conv_set's, K == C)", d->label);
    FAST16("maxpool_bwd16o");
    ENTER();
    const cudaStream_t cs = gpu_stream(d, s)->s;
    const size_t n = (size_t)g->N * g->H * g->W * g->C, ny = (size_t)g->N * g->P * g->Q * g->C;
    /* kernel K over `items` items of V channels: eight where the channels and
     * pointers allow, 32-bit index arithmetic where every offset fits */
#define POOL_BWD16_LAUNCH(K, items)                                                                                \
    do {                                                                                                           \
        if (pool_vec8(g->C, dy16, dx16, idx)) {                                                                    \
            if (pool_i32(n, ny))                                                                                   \
                K<8, uint32_t><<<gpu_grid((items) / 8, TPB), TPB, 0, cs>>>(*g, dy16, idx, dx16,                    \
                                                                        (uint32_t)((items) / 8), (int)rt);        \
            else                                                                                                   \
                K<8, size_t><<<gpu_grid((items) / 8, TPB), TPB, 0, cs>>>(*g, dy16, idx, dx16, (items) / 8, (int)rt); \
        } else if (pool_i32(n, ny)) {                                                                              \
            K<1, uint32_t><<<gpu_grid(items, TPB), TPB, 0, cs>>>(*g, dy16, idx, dx16, (uint32_t)(items), (int)rt);   \
        } else {                                                                                                   \
            K<1, size_t><<<gpu_grid(items, TPB), TPB, 0, cs>>>(*g, dy16, idx, dx16, items, (int)rt);                 \
        }                                                                                                          \
        GPU_CHECK_LAUNCH(d, #K, e);                                                                                \
    } while (0)
    if (maxpool_bwd_s2(g)) /* a 2x2 block of input pixels an item */
        POOL_BWD16_LAUNCH(k_maxpool_bwd16_s2, (size_t)g->N * ((g->H + 1) / 2) * ((g->W + 1) / 2) * g->C);
    else
        POOL_BWD16_LAUNCH(k_maxpool_bwd16, n);
#undef POOL_BWD16_LAUNCH
    return PLUMB_OK;
}
