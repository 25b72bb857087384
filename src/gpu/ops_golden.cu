/* Golden kernels: the evaluation orders of core/gmath.h, one per op, so the
 * bits equal the cpu backend's for any shape and launch configuration. */
#include "gpu/gpu.h"
#include "gpu/ops.h"
#include "core/gmath.h"
#include <limits.h>

/* C[m,n] (+)= A[m,k] B[k,n]: one thread per output, acc = fmaf(a, b, acc) in
 * ascending k from 0 (the order is independent of the thread layout). */
__device__ static inline float ld_ab(const void *p, int t, size_t i)
{
    if (t == DT_F32) return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return t == DT_BF16 ? bf16_to_f32(h) : f16_to_f32(h);
}

__global__ void k_gemm_golden(int m, int n, int k, int ta, int tb, int abt, const void *a, int lda,
                              const void *b, int ldb, float *c, int ldc, int accumulate)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= m || j >= n) return;
    float acc = 0.0f;
    for (int kk = 0; kk < k; kk++) {
        float av = ld_ab(a, abt, ta ? (size_t)kk * lda + i : (size_t)i * lda + kk);
        float bv = ld_ab(b, abt, tb ? (size_t)j * ldb + kk : (size_t)kk * ldb + j);
        acc = fmaf(av, bv, acc);
    }
    float *cp = c + (size_t)i * ldc + j;
    *cp = accumulate ? *cp + acc : acc;
}

int golden_gemm(struct dev *d, struct dev_stream *st, const struct gemm_desc *g, plumb_err *e)
{
    dim3 blk(32, 8), grd((unsigned)((g->n + 31) / 32), (unsigned)((g->m + 7) / 8));
    if (grd.y > 65535)
        return gpu_err(e, PLUMB_EUNSUPPORTED, "%s: golden gemm m=%d exceeds %d rows", d->label, g->m, 65535 * 8);
    k_gemm_golden<<<grd, blk, 0, st->s>>>(g->m, g->n, g->k, g->trans_a, g->trans_b, (int)g->ab_type, g->a, g->lda,
                                          g->b, g->ldb, g->c, g->ldc, g->accumulate);
    GPU_CHECK_LAUNCH(d, "k_gemm_golden", e);
    return PLUMB_OK;
}

/* ---- the pairwise tree (gmath.h): an aligned chunk of 2^B elements reduced
 * level by level in shared memory (pairs s[i*2^(L+1)] + s[i*2^(L+1) + 2^L],
 * a partial chunk padded with -0.0f, which gives the same bits as carrying)
 * yields a level-B element; the level-B elements are then reduced by the same
 * rule, by another pass (gsum) or pushed in order into a gpairwise (rows). */

#define GOLD_THREADS 256
#define GOLD_CHUNK (2 * GOLD_THREADS) /* elements per chunk: 2^9 */

/* sh[0..GOLD_CHUNK) holds one chunk; afterwards sh[0] is its tree sum. */
__device__ static void chunk_tree(float *sh)
{
    __syncthreads();
    for (int s = 1; s < GOLD_CHUNK; s <<= 1) {
        int npairs = GOLD_CHUNK / (2 * s);
        for (int i = threadIdx.x; i < npairs; i += blockDim.x) sh[i * 2 * s] = sh[i * 2 * s] + sh[i * 2 * s + s];
        __syncthreads();
    }
}

/* Golden pairwise sum of f(0..n) by one block (all threads call it; all get
 * the result). Chunks of GOLD_CHUNK are tree-reduced in shared memory and
 * their sums pushed in order into a gpairwise by thread 0. */
template <class F> __device__ static float block_gsum(int n, F f, float *sh)
{
    struct gpairwise p;
    gpw_init(&p);
    for (int base = 0; base < n; base += GOLD_CHUNK) {
        for (int j = threadIdx.x; j < GOLD_CHUNK; j += blockDim.x) sh[j] = base + j < n ? f(base + j) : -0.0f;
        chunk_tree(sh);
        if (threadIdx.x == 0) gpw_push(&p, sh[0]);
        __syncthreads();
    }
    if (threadIdx.x == 0) sh[0] = gpw_result(&p);
    __syncthreads();
    float r = sh[0];
    __syncthreads();
    return r;
}

struct f_load {
    const float *x;
    __device__ float operator()(int i) const { return x[i]; }
};

/* One pass of the golden sum: out[c] = tree sum of the aligned slice
 * x[c*span, (c+1)*span) clipped to n; span = GOLD_CHUNK * 2^j, so each out[c]
 * is an element of the tree's level 9 + j, and the next pass applies the
 * same rule to them. */
__global__ void k_gsum_pass(const float *__restrict__ x, size_t n, size_t span, float *__restrict__ out)
{
    __shared__ float sh[GOLD_CHUNK];
    size_t base = (size_t)blockIdx.x * span;
    size_t len = n - base < span ? n - base : span;
    f_load f = {x + base};
    float r = block_gsum((int)len, f, sh);
    if (threadIdx.x == 0) out[blockIdx.x] = r;
}

int golden_sum(struct dev *d, struct dev_stream *st, const float *x, size_t n, float *out, plumb_err *e)
{
    const size_t half = GPU_SCRATCH_FLOATS / 2;
    if (n == 0) {
        GPU_CHECK(d, cudaMemsetAsync(out, 0, sizeof(float), st->s), e); /* +0 */
        return PLUMB_OK;
    }
    const float *in = x;
    float *bufs[2] = {st->scratch, st->scratch + half};
    int which = 0;
    size_t len = n;
    for (;;) {
        size_t span = GOLD_CHUNK;
        while ((len + span - 1) / span > half || ((len + span - 1) / span > 4096 && span < ((size_t)1 << 16)))
            span *= 2;
        if (span > ((size_t)1 << 30))
            return gpu_err(e, PLUMB_EUNSUPPORTED, "%s: golden sum of %zu elements is too long", d->label, n);
        size_t cnt = (len + span - 1) / span;
        float *dst = cnt == 1 ? out : bufs[which];
        k_gsum_pass<<<(unsigned)cnt, GOLD_THREADS, 0, st->s>>>(in, len, span, dst);
        GPU_CHECK_LAUNCH(d, "k_gsum_pass", e);
        if (cnt == 1) break;
        in = dst;
        len = cnt;
        which ^= 1;
    }
    return PLUMB_OK;
}

/* The max of gsoftmax_row: a left-to-right scan with `v > m` from x[0], i.e.
 * NaN if x[0] is NaN, else the earliest element holding the largest non-NaN
 * value (earliest matters for -0 vs +0). Reduced as (value, index) pairs. */
__device__ static float block_scan_max(const float *x, int n, float *shv, int *shi)
{
    float best = -INFINITY;
    int bi = INT_MAX;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        float v = x[j];
        if (v > best) {
            best = v;
            bi = j;
        }
    }
    shv[threadIdx.x] = best;
    shi[threadIdx.x] = bi;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) {
            float a = shv[threadIdx.x], b = shv[threadIdx.x + s];
            int ia = shi[threadIdx.x], ib = shi[threadIdx.x + s];
            if (b > a || (!(a > b) && ib < ia)) {
                shv[threadIdx.x] = b;
                shi[threadIdx.x] = ib;
            }
        }
        __syncthreads();
    }
    float m = g_isnan(x[0]) ? x[0] : (shi[0] == INT_MAX ? x[0] : shv[0]);
    __syncthreads();
    return m;
}

struct f_exp_minus {
    const float *x;
    float m;
    __device__ float operator()(int i) const { return gexpf(x[i] - m); }
};

__global__ void k_softmax_golden(const float *__restrict__ x, float *__restrict__ y, int cols)
{
    __shared__ float sh[GOLD_CHUNK];
    __shared__ float shv[GOLD_THREADS];
    __shared__ int shi[GOLD_THREADS];
    const float *xr = x + (size_t)blockIdx.x * cols;
    float *yr = y + (size_t)blockIdx.x * cols;
    float m = block_scan_max(xr, cols, shv, shi);
    f_exp_minus f = {xr, m};
    float s = block_gsum(cols, f, sh);
    /* y may alias x: every read of x is done (block_gsum ends in a barrier) */
    for (int j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = gexpf(xr[j] - m) / s;
}

int golden_softmax(struct dev *d, struct dev_stream *st, const float *x, float *y, int rows, int cols, plumb_err *e)
{
    k_softmax_golden<<<(unsigned)rows, GOLD_THREADS, 0, st->s>>>(x, y, cols);
    GPU_CHECK_LAUNCH(d, "k_softmax_golden", e);
    return PLUMB_OK;
}

struct f_sqdev {
    const float *x;
    float mean;
    __device__ float operator()(int i) const
    {
        float dd = x[i] - mean;
        return dd * dd;
    }
};

__global__ void k_layernorm_golden(const float *__restrict__ x, const float *__restrict__ w,
                                   const float *__restrict__ b, float *__restrict__ y, float *__restrict__ mean_out,
                                   float *__restrict__ rstd_out, int cols, float eps)
{
    __shared__ float sh[GOLD_CHUNK];
    const float *xr = x + (size_t)blockIdx.x * cols;
    float *yr = y + (size_t)blockIdx.x * cols;
    f_load fl = {xr};
    float mean = block_gsum(cols, fl, sh) / (float)cols;
    f_sqdev fs = {xr, mean};
    float var = block_gsum(cols, fs, sh) / (float)cols;
    float rstd = 1.0f / sqrtf(var + eps);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        float h = (xr[j] - mean) * rstd;
        yr[j] = w ? fmaf(h, w[j], b ? b[j] : 0.0f) : (b ? h + b[j] : h);
    }
    if (threadIdx.x == 0) {
        if (mean_out) mean_out[blockIdx.x] = mean;
        if (rstd_out) rstd_out[blockIdx.x] = rstd;
    }
}

int golden_layernorm(struct dev *d, struct dev_stream *st, const float *x, const float *w, const float *b, float *y,
                     float *mean, float *rstd, int rows, int cols, float eps, plumb_err *e)
{
    k_layernorm_golden<<<(unsigned)rows, GOLD_THREADS, 0, st->s>>>(x, w, b, y, mean, rstd, cols, eps);
    GPU_CHECK_LAUNCH(d, "k_layernorm_golden", e);
    return PLUMB_OK;
}

__global__ void k_unary_golden(int op, const float *__restrict__ x, float *__restrict__ y, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float v = x[i], r;
        switch (op) {
        case UNARY_EXP: r = gexpf(v); break;
        case UNARY_LOG: r = glogf(v); break;
        case UNARY_TANH: r = gtanhf(v); break;
        case UNARY_ERF: r = gerff(v); break;
        default: r = ggeluf(v);
        }
        y[i] = r;
    }
}

int golden_unary(struct dev *d, struct dev_stream *st, enum unary_op op, const float *x, float *y, size_t n,
                 plumb_err *e)
{
    k_unary_golden<<<gpu_grid(n, 256), 256, 0, st->s>>>((int)op, x, y, n);
    GPU_CHECK_LAUNCH(d, "k_unary_golden", e);
    return PLUMB_OK;
}
