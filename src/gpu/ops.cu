/* The GPU op table (dev.h struct dev_ops): argument checks, then fast or
 * golden by d->numerics. The op signatures carry no plumb_err, so a failing
 * op prints its message (naming the op, the device and the bad value) on
 * stderr and returns the status. */
#include "gpu/gpu.h"
#include "gpu/ops.h"
#include "gpu/train_gpu.h"

static int op_fail(struct dev *d, const char *op, int rc, const plumb_err *e)
{
    fprintf(stderr, "plumb: %s: %s: %s\n", d->label, op, e->msg[0] ? e->msg : "failed");
    return rc;
}
#define OP_TRY(d, op, expr)                                                          \
    do {                                                                             \
        int rc__ = (expr);                                                           \
        if (rc__) return op_fail((d), (op), rc__, &e__);                             \
    } while (0)

static int g_rng_u32(struct dev *d, dev_stream *s, const struct rng_stream *st, uint64_t first,
                     uint32_t *out, size_t n)
{
    plumb_err e__ = {0, ""};
    if (!n) return PLUMB_OK;
    OP_TRY(d, "rng_u32", gpu_enter(d, &e__));
    OP_TRY(d, "rng_u32", rng_u32_launch(d, gpu_stream(d, s), st, first, out, n, &e__));
    return PLUMB_OK;
}

static int g_rng_uniform(struct dev *d, dev_stream *s, const struct rng_stream *st, uint64_t first,
                         float *out, size_t n)
{
    plumb_err e__ = {0, ""};
    if (!n) return PLUMB_OK;
    OP_TRY(d, "rng_uniform", gpu_enter(d, &e__));
    OP_TRY(d, "rng_uniform", rng_uniform_launch(d, gpu_stream(d, s), st, first, out, n, &e__));
    return PLUMB_OK;
}

static int g_rng_normal(struct dev *d, dev_stream *s, const struct rng_stream *st, uint64_t first,
                        float *out, size_t n)
{
    plumb_err e__ = {0, ""};
    if (!n) return PLUMB_OK;
    OP_TRY(d, "rng_normal", gpu_enter(d, &e__));
    OP_TRY(d, "rng_normal", rng_normal_launch(d, gpu_stream(d, s), st, first, out, n, &e__));
    return PLUMB_OK;
}

static int check_gemm(struct dev *d, const struct gemm_desc *g, plumb_err *e)
{
    if (g->m < 0 || g->n < 0 || g->k < 0)
        return gpu_err(e, PLUMB_EUSAGE, "%s: gemm shape m=%d n=%d k=%d has a negative size", d->label, g->m,
                       g->n, g->k);
    if (g->ab_type != DT_F32 && g->ab_type != DT_BF16 && g->ab_type != DT_F16)
        return gpu_err(e, PLUMB_EUSAGE, "%s: gemm input type %s (expected fp32, bf16 or fp16)", d->label,
                       dtype_name(g->ab_type));
    /* a row stride covers its row; an empty row (0 columns) takes any stride */
    int acols = g->trans_a ? g->m : g->k, bcols = g->trans_b ? g->k : g->n;
    if (g->lda < acols || g->ldb < bcols || g->ldc < g->n || g->lda < 0 || g->ldb < 0 || g->ldc < 0)
        return gpu_err(e, PLUMB_EUSAGE,
                       "%s: gemm strides lda=%d ldb=%d ldc=%d smaller than the rows they stride (%d, %d, %d)",
                       d->label, g->lda, g->ldb, g->ldc, acols, bcols, g->n);
    return PLUMB_OK;
}

static int g_gemm(struct dev *d, dev_stream *s, const struct gemm_desc *g)
{
    plumb_err e__ = {0, ""};
    OP_TRY(d, "gemm", check_gemm(d, g, &e__));
    if (g->m == 0 || g->n == 0) return PLUMB_OK;
    OP_TRY(d, "gemm", gpu_enter(d, &e__));
    struct dev_stream *st = gpu_stream(d, s);
    if (d->numerics == NUMERICS_GOLDEN || g->k == 0) OP_TRY(d, "gemm", golden_gemm(d, st, g, &e__));
    else OP_TRY(d, "gemm", blas_gemm(d, st, g, &e__));
    return PLUMB_OK;
}

static int g_sum(struct dev *d, dev_stream *s, const float *x, size_t n, float *out)
{
    plumb_err e__ = {0, ""};
    OP_TRY(d, "sum", gpu_enter(d, &e__));
    struct dev_stream *st = gpu_stream(d, s);
    if (d->numerics == NUMERICS_GOLDEN) OP_TRY(d, "sum", golden_sum(d, st, x, n, out, &e__));
    else OP_TRY(d, "sum", fast_sum(d, st, x, n, out, &e__));
    return PLUMB_OK;
}

static int check_rows(struct dev *d, const char *op, int rows, int cols, plumb_err *e)
{
    if (rows < 0 || cols <= 0)
        return gpu_err(e, PLUMB_EUSAGE, "%s: %s shape [%d, %d] (expected rows >= 0, cols > 0)", d->label, op,
                       rows, cols);
    if (rows > 0x7fffffff)
        return gpu_err(e, PLUMB_EUSAGE, "%s: %s: %d rows exceed the grid limit", d->label, op, rows);
    return PLUMB_OK;
}

static int g_softmax(struct dev *d, dev_stream *s, const float *x, float *y, int rows, int cols)
{
    plumb_err e__ = {0, ""};
    OP_TRY(d, "softmax", check_rows(d, "softmax", rows, cols, &e__));
    if (!rows) return PLUMB_OK;
    OP_TRY(d, "softmax", gpu_enter(d, &e__));
    struct dev_stream *st = gpu_stream(d, s);
    if (d->numerics == NUMERICS_GOLDEN) OP_TRY(d, "softmax", golden_softmax(d, st, x, y, rows, cols, &e__));
    else OP_TRY(d, "softmax", fast_softmax(d, st, x, y, rows, cols, &e__));
    return PLUMB_OK;
}

static int g_layernorm(struct dev *d, dev_stream *s, const float *x, const float *w, const float *b, float *y,
                       float *mean, float *rstd, int rows, int cols, float eps)
{
    plumb_err e__ = {0, ""};
    OP_TRY(d, "layernorm", check_rows(d, "layernorm", rows, cols, &e__));
    if (!rows) return PLUMB_OK;
    OP_TRY(d, "layernorm", gpu_enter(d, &e__));
    struct dev_stream *st = gpu_stream(d, s);
    if (d->numerics == NUMERICS_GOLDEN)
        OP_TRY(d, "layernorm", golden_layernorm(d, st, x, w, b, y, mean, rstd, rows, cols, eps, &e__));
    else OP_TRY(d, "layernorm", fast_layernorm(d, st, x, w, b, y, mean, rstd, rows, cols, eps, &e__));
    return PLUMB_OK;
}

static int g_unary(struct dev *d, dev_stream *s, enum unary_op op, const float *x, float *y, size_t n)
{
    plumb_err e__ = {0, ""};
    if ((int)op < 0 || op >= UNARY_COUNT) {
        gpu_err(&e__, PLUMB_EUSAGE, "unary op %d unknown (expected 0..%d)", (int)op, UNARY_COUNT - 1);
        return op_fail(d, "unary", PLUMB_EUSAGE, &e__);
    }
    if (!n) return PLUMB_OK;
    OP_TRY(d, "unary", gpu_enter(d, &e__));
    struct dev_stream *st = gpu_stream(d, s);
    if (d->numerics == NUMERICS_GOLDEN) OP_TRY(d, "unary", golden_unary(d, st, op, x, y, n, &e__));
    else OP_TRY(d, "unary", fast_unary(d, st, op, x, y, n, &e__));
    return PLUMB_OK;
}

static int g_cast(struct dev *d, dev_stream *s, const void *x, dtype_t xt, void *y, dtype_t yt, size_t n)
{
    plumb_err e__ = {0, ""};
    if (!n) return PLUMB_OK;
    OP_TRY(d, "cast", gpu_enter(d, &e__));
    OP_TRY(d, "cast", gpu_cast(d, gpu_stream(d, s), x, xt, y, yt, n, &e__));
    return PLUMB_OK;
}

/* Host-only table: hipcc's device pass would otherwise treat this const
 * global as device constant data referring to host functions. */
#if !defined(__HIP_DEVICE_COMPILE__)
const struct dev_ops gpu_ops = {
    g_rng_u32, g_rng_uniform, g_rng_normal, g_gemm, g_sum, g_softmax, g_layernorm, g_unary, g_cast,
    &gpu_train_ops, /* train: gpu/train_ops.cu */
};
#endif
