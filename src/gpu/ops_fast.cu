/* Fast-mode kernels: still deterministic run to run (grids depend on the
 * shape only, reductions are fixed warp/block trees, no atomics), but free
 * to use the hardware's expf/tanhf/erff and fma. Error against float64 is
 * what `plumb numerics` measures; the golden kernels (ops_golden.cu) are the
 * ones held to the CPU's bits. */
#include "gpu/gpu.h"
#include "gpu/ops.h"
#include "core/dtype.h"

/* ---- sum: pass 1 per-block partials into the stream's scratch, pass 2 one
 * block over the partials. The partial count is a function of n only. ---- */
#define SUM_BLOCK 256
#define SUM_MAX_BLOCKS 1024

__global__ void k_sum_partial(const float *__restrict__ x, size_t n, float *__restrict__ part)
{
    __shared__ float sc[PLUMB_WARP];
    float acc = 0.0f;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) acc += x[i];
    acc = plumb_block_sum(acc, sc);
    if (threadIdx.x == 0) part[blockIdx.x] = acc;
}

__global__ void k_sum_final(const float *__restrict__ part, int np, float *__restrict__ out)
{
    __shared__ float sc[PLUMB_WARP];
    float acc = 0.0f;
    for (int i = threadIdx.x; i < np; i += blockDim.x) acc += part[i];
    acc = plumb_block_sum(acc, sc);
    if (threadIdx.x == 0) out[0] = acc;
}

int fast_sum(struct dev *d, struct dev_stream *st, const float *x, size_t n, float *out, plumb_err *e)
{
    size_t nb = (n + (size_t)SUM_BLOCK * 16 - 1) / ((size_t)SUM_BLOCK * 16);
    if (nb < 1) nb = 1;
    if (nb > SUM_MAX_BLOCKS) nb = SUM_MAX_BLOCKS;
    k_sum_partial<<<(unsigned)nb, SUM_BLOCK, 0, st->s>>>(x, n, st->scratch);
    GPU_CHECK_LAUNCH(d, "k_sum_partial", e);
    k_sum_final<<<1, SUM_BLOCK, 0, st->s>>>(st->scratch, (int)nb, out);
    GPU_CHECK_LAUNCH(d, "k_sum_final", e);
    return PLUMB_OK;
}

/* Threads per row-block: the row length rounded up to whole warps, at most 1024. */
static unsigned row_threads(int cols)
{
    unsigned t = (unsigned)(((cols + PLUMB_WARP - 1) / PLUMB_WARP) * PLUMB_WARP);
    if (t < PLUMB_WARP) t = PLUMB_WARP;
    if (t > 1024) t = 1024;
    return t;
}

/* ---- softmax: one block per row; x,y: [rows, cols] ---- */
__global__ void k_softmax_fast(const float *__restrict__ x, float *__restrict__ y, int cols)
{
    __shared__ float sc[PLUMB_WARP];
    const float *xr = x + (size_t)blockIdx.x * cols;
    float *yr = y + (size_t)blockIdx.x * cols;
    float m = -INFINITY;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, xr[j]);
    m = plumb_block_max(m, sc);
    float s = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) s += expf(xr[j] - m);
    s = plumb_block_sum(s, sc);
    float inv = 1.0f / s;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = expf(xr[j] - m) * inv;
}

int fast_softmax(struct dev *d, struct dev_stream *st, const float *x, float *y, int rows, int cols,
                 plumb_err *e)
{
    k_softmax_fast<<<(unsigned)rows, row_threads(cols), 0, st->s>>>(x, y, cols);
    GPU_CHECK_LAUNCH(d, "k_softmax_fast", e);
    return PLUMB_OK;
}

/* ---- layernorm: one block per row, two passes (mean, then centred variance) ---- */
__global__ void k_layernorm_fast(const float *__restrict__ x, const float *__restrict__ w,
                                 const float *__restrict__ b, float *__restrict__ y,
                                 float *__restrict__ mean, float *__restrict__ rstd, int cols, float eps)
{
    __shared__ float sc[PLUMB_WARP];
    const float *xr = x + (size_t)blockIdx.x * cols;
    float *yr = y + (size_t)blockIdx.x * cols;
    float s = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) s += xr[j];
    float mu = plumb_block_sum(s, sc) / (float)cols;
    float v = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        float dlt = xr[j] - mu;
        v = fmaf(dlt, dlt, v);
    }
    float var = plumb_block_sum(v, sc) / (float)cols;
    float rs = 1.0f / sqrtf(var + eps);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        float t = (xr[j] - mu) * rs;
        yr[j] = fmaf(t, w ? w[j] : 1.0f, b ? b[j] : 0.0f);
    }
    if (threadIdx.x == 0) {
        if (mean) mean[blockIdx.x] = mu;
        if (rstd) rstd[blockIdx.x] = rs;
    }
}

int fast_layernorm(struct dev *d, struct dev_stream *st, const float *x, const float *w, const float *b,
                   float *y, float *mean, float *rstd, int rows, int cols, float eps, plumb_err *e)
{
    k_layernorm_fast<<<(unsigned)rows, row_threads(cols), 0, st->s>>>(x, w, b, y, mean, rstd, cols, eps);
    GPU_CHECK_LAUNCH(d, "k_layernorm_fast", e);
    return PLUMB_OK;
}

/* ---- unary: the hardware's library functions; GELU is the tanh form ---- */
__global__ void k_unary_fast(int op, const float *__restrict__ x, float *__restrict__ y, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float v = x[i], r;
        switch (op) {
        case UNARY_EXP: r = expf(v); break;
        case UNARY_LOG: r = logf(v); break;
        case UNARY_TANH: r = tanhf(v); break;
        case UNARY_ERF: r = erff(v); break;
        default: { /* UNARY_GELU, tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
                    * as x / (1 + exp(-2 sqrt(2/pi) w)): no cancellation for x < 0 */
            float w = fmaf(0.044715f * v, v * v, v);
            r = v / (1.0f + expf(-1.5957691216057308f * w));
        }
        }
        y[i] = r;
    }
}

int fast_unary(struct dev *d, struct dev_stream *st, enum unary_op op, const float *x, float *y, size_t n,
               plumb_err *e)
{
    k_unary_fast<<<gpu_grid(n, 256), 256, 0, st->s>>>((int)op, x, y, n);
    GPU_CHECK_LAUNCH(d, "k_unary_fast", e);
    return PLUMB_OK;
}
