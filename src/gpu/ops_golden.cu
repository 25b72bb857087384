/* Golden kernels: the evaluation orders of core/gmath.h, one per op, so the
 * bits equal the cpu backend's for any shape and launch configuration. */
#include "gpu/gpu.h"
#include "gpu/ops.h"

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

int golden_sum(struct dev *d, struct dev_stream *st, const float *x, size_t n, float *out, plumb_err *e)
{
    (void)st; (void)x; (void)n; (void)out;
    return gpu_err(e, PLUMB_EUNSUPPORTED, "%s: golden sum not built yet", d->label);
}
int golden_softmax(struct dev *d, struct dev_stream *st, const float *x, float *y, int rows, int cols,
                   plumb_err *e)
{
    (void)st; (void)x; (void)y; (void)rows; (void)cols;
    return gpu_err(e, PLUMB_EUNSUPPORTED, "%s: golden softmax not built yet", d->label);
}
int golden_layernorm(struct dev *d, struct dev_stream *st, const float *x, const float *w, const float *b,
                     float *y, float *mean, float *rstd, int rows, int cols, float eps, plumb_err *e)
{
    (void)st; (void)x; (void)w; (void)b; (void)y; (void)mean; (void)rstd; (void)rows; (void)cols; (void)eps;
    return gpu_err(e, PLUMB_EUNSUPPORTED, "%s: golden layernorm not built yet", d->label);
}
int golden_unary(struct dev *d, struct dev_stream *st, enum unary_op op, const float *x, float *y, size_t n,
                 plumb_err *e)
{
    (void)st; (void)op; (void)x; (void)y; (void)n;
    return gpu_err(e, PLUMB_EUNSUPPORTED, "%s: golden unary not built yet", d->label);
}
