/* The cpu backend's gpt ops with 16-bit activations (dev/train_ops.h, "gpt
 * with 16-bit activations"): each one the fp32 op it is named after, between
 * casts. The 16-bit values are exactly the rt values the fp32 op reads and
 * stores (an rt value converts to fp32 and back without change), so the
 * results are that op's bits; the cpu gains nothing in speed from them. They
 * exist so that the model's 16-bit pipeline (models/gpt/gpt.c) runs, and is
 * tested, on every device: the GPU plugins implement the same entries with
 * kernels that read and write 16 bits. */
#include "core/dtype.h"
#include "dev/cpu_train_gpt.h"
#include "dev/dev.h"
#include <stdlib.h>

#define NEED16(op)                                                                                                 \
    do {                                                                                                           \
        if (rt != DT_BF16 && rt != DT_F16)                                                                         \
            return err_set(e, PLUMB_EUSAGE, "%s: 16-bit type %s (expected bf16 or fp16)", op, dtype_name(rt));    \
    } while (0)

/* n fp32 values of the 16-bit x (NULL x: NULL, no error); *bad set on a failed allocation */
static float *widen(const uint16_t *x, size_t n, dtype_t rt, int *bad)
{
    if (!x || *bad) return NULL;
    float *y = malloc((n ? n : 1) * sizeof *y);
    if (!y) {
        *bad = 1;
        return NULL;
    }
    for (size_t i = 0; i < n; i++) y[i] = rt == DT_F16 ? f16_to_f32(x[i]) : bf16_to_f32(x[i]);
    return y;
}

static void narrow(const float *x, uint16_t *y, size_t n, dtype_t rt)
{
    if (!x || !y) return;
    for (size_t i = 0; i < n; i++) y[i] = rt == DT_F16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
}

static float *scratch(size_t n, int want, int *bad)
{
    if (!want || *bad) return NULL;
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (!p) *bad = 1;
    return p;
}

static int oom(const char *op, plumb_err *e) { return err_set(e, PLUMB_ENOMEM, "%s: out of host memory", op); }

int cpu_layernorm_fwd16(struct dev *d, dev_stream *s, const float *x, const float *w, const float *b, uint16_t *y16,
                           float *mean, float *rstd, int R, int C, float eps, dtype_t rt, plumb_err *e)
{
    NEED16("layernorm_fwd16");
    int bad = 0;
    const size_t n = R > 0 && C > 0 ? (size_t)R * C : 0;
    float *y = scratch(n, y16 != NULL, &bad);
    int rc = bad ? oom("layernorm_fwd16", e) : cpu_layernorm_fwd(d, s, x, w, b, y, mean, rstd, R, C, eps, rt, e);
    if (!rc) narrow(y, y16, n, rt);
    free(y);
    return rc;
}

int cpu_layernorm_bwd16(struct dev *d, dev_stream *s, const float *x, const float *w, const float *mean,
                           const float *rstd, const uint16_t *dy16, const float *dres, float *dx, uint16_t *dx16,
                           float *dsum, float *dw, float *db, int R, int C, dtype_t rt, plumb_err *e)
{
    NEED16("layernorm_bwd16");
    if (dsum && !dx16) return err_set(e, PLUMB_EUSAGE, "layernorm_bwd16: dsum (the column sums of dx16) needs dx16");
    int bad = 0;
    const size_t n = R > 0 && C > 0 ? (size_t)R * C : 0;
    float *dy = widen(dy16, n, rt, &bad);
    int rc = bad ? oom("layernorm_bwd16", e)
                 : cpu_layernorm_bwd(d, s, x, w, mean, rstd, dy, dres, dx, dw, db, R, C, DT_F32, e);
    if (!rc) narrow(dx, dx16, n, rt);
    free(dy);
    if (!rc && dsum && n) {
        /* what cpu_matmul_bwd16 would sum as its dbias: dx16 widened, the
         * rows in order */
        float *v = widen(dx16, n, rt, &bad);
        if (bad) return oom("layernorm_bwd16", e);
        cpu_col_sums(d, v, dsum, R, C);
        free(v);
    }
    return rc;
}

int cpu_matmul_fwd16(struct dev *d, dev_stream *s, const uint16_t *x16, const uint16_t *w16, const uint16_t *bias16,
                        uint16_t *y16, uint16_t *pre16, int B, int K, int N, int gelu, dtype_t rt, plumb_err *e)
{
    NEED16("matmul_fwd16");
    int bad = 0;
    const int ok = B > 0 && K > 0 && N > 0;
    const size_t bk = ok ? (size_t)B * K : 0, nk = ok ? (size_t)N * K : 0, bn = ok ? (size_t)B * N : 0;
    float *x = widen(x16, bk, rt, &bad), *w = widen(w16, nk, rt, &bad), *bias = widen(bias16, ok ? N : 0, rt, &bad);
    float *y = scratch(bn, y16 != NULL, &bad), *pre = scratch(bn, gelu && pre16, &bad);
    int rc = bad ? oom("matmul_fwd16", e) : cpu_matmul_fwd(d, s, x, w, bias, y, pre, B, K, N, gelu, rt, e);
    if (!rc) {
        narrow(y, y16, bn, rt);
        narrow(pre, pre16, bn, rt);
    }
    free(x), free(w), free(bias), free(y), free(pre);
    return rc;
}

/* the fp32 classifier of the widened values (the padding rows are not
 * read), dx narrowed (exact: the classifier stores it rounded to rt) */
int cpu_classifier_fwd_bwd16(struct dev *d, dev_stream *s, const uint16_t *x16, const uint16_t *wte16, int rows16,
                             const int32_t *tgt, int R, int C, int V, float grad_scale, float *losses, double *sum_count,
                             uint16_t *dx16, float *dwte, dtype_t rt, plumb_err *e)
{
    NEED16("classifier_fwd_bwd16");
    if (!x16 || !wte16 || rows16 < V || R <= 0 || C <= 0 || V <= 0)
        return err_set(e, PLUMB_EUSAGE,
                       "classifier_fwd_bwd16: x16 %s, wte16 %s of %d rows for R=%d, C=%d, V=%d (expected rows >= V > 0)",
                       x16 ? "given" : "NULL", wte16 ? "given" : "NULL", rows16, R, C, V);
    int bad = 0;
    const size_t rc_n = (size_t)R * C;
    float *w = widen(wte16, (size_t)V * C, rt, &bad), *x = widen(x16, rc_n, rt, &bad);
    float *dx = scratch(rc_n, dx16 != NULL, &bad);
    int rc = bad ? oom("classifier_fwd_bwd16", e)
                 : cpu_classifier_fwd_bwd(d, s, x, w, tgt, R, C, V, grad_scale, losses, sum_count, dx, dwte, rt, e);
    if (!rc) narrow(dx, dx16, rc_n, rt);
    free(w), free(x), free(dx);
    return rc;
}

int cpu_matmul_bwd16(struct dev *d, dev_stream *s, const uint16_t *x16, const uint16_t *w16, const uint16_t *dy16,
                        const uint16_t *pre16_in, uint16_t *dx16, float *dw, float *dbias, int B, int K, int N,
                        dtype_t rt, plumb_err *e)
{
    NEED16("matmul_bwd16");
    int bad = 0;
    const int ok = B > 0 && K > 0 && N > 0;
    const size_t bk = ok ? (size_t)B * K : 0, nk = ok ? (size_t)N * K : 0, bn = ok ? (size_t)B * N : 0;
    float *x = widen(x16, bk, rt, &bad), *w = widen(w16, nk, rt, &bad), *dy = widen(dy16, bn, rt, &bad);
    float *pre = widen(pre16_in, bk, rt, &bad), *dx = scratch(bk, dx16 != NULL, &bad);
    int rc = bad ? oom("matmul_bwd16", e) : cpu_matmul_bwd(d, s, x, w, dy, pre, dx, dw, dbias, B, K, N, rt, e);
    if (!rc) narrow(dx, dx16, bk, rt);
    free(x), free(w), free(dy), free(pre), free(dx);
    return rc;
}

int cpu_attention_fwd16(struct dev *d, dev_stream *s, const uint16_t *qkv16, uint16_t *out16, float *lse, int B,
                           int T, int NH, int HS, dtype_t rt, plumb_err *e)
{
    NEED16("attention_fwd16");
    int bad = 0;
    const size_t rc3 = B > 0 && T > 0 && NH > 0 && HS > 0 ? (size_t)B * T * NH * HS : 0;
    float *qkv = widen(qkv16, 3 * rc3, rt, &bad), *out = scratch(rc3, out16 != NULL, &bad);
    int rc = bad ? oom("attention_fwd16", e) : cpu_attention_fwd(d, s, qkv, out, lse, B, T, NH, HS, rt, e);
    if (!rc) narrow(out, out16, rc3, rt);
    free(qkv), free(out);
    return rc;
}

int cpu_attention_bwd16(struct dev *d, dev_stream *s, const uint16_t *qkv16, const uint16_t *out16, const float *lse,
                           const uint16_t *dout16, uint16_t *dqkv16, int B, int T, int NH, int HS, dtype_t rt,
                           plumb_err *e)
{
    NEED16("attention_bwd16");
    int bad = 0;
    const size_t n = B > 0 && T > 0 && NH > 0 && HS > 0 ? (size_t)B * T * NH * HS : 0;
    float *qkv = widen(qkv16, 3 * n, rt, &bad), *out = widen(out16, n, rt, &bad), *dout = widen(dout16, n, rt, &bad);
    float *dqkv = scratch(3 * n, dqkv16 != NULL, &bad);
    int rc = bad ? oom("attention_bwd16", e)
                 : cpu_attention_bwd(d, s, qkv, out, lse, dout, dqkv, B, T, NH, HS, rt, e);
    if (!rc) narrow(dqkv, dqkv16, 3 * n, rt);
    free(qkv), free(out), free(dout), free(dqkv);
    return rc;
}

int cpu_residual_fwd16(struct dev *d, dev_stream *s, const float *a, const uint16_t *b16, float *y, size_t n,
                          dtype_t rt, plumb_err *e)
{
    NEED16("residual_fwd16");
    int bad = 0;
    float *b = widen(b16, n, rt, &bad);
    int rc = bad ? oom("residual_fwd16", e) : cpu_residual_fwd(d, s, a, b, y, n, DT_F32, e);
    free(b);
    return rc;
}

int cpu_residual_layernorm_fwd16(struct dev *d, dev_stream *s, const float *a, const uint16_t *b16, float *res,
                                 const float *w, const float *b, uint16_t *y16, float *mean, float *rstd, int R, int C,
                                 float eps, dtype_t rt, plumb_err *e)
{
    if (R <= 0 || C <= 0)
        return err_set(e, PLUMB_EUSAGE, "residual_layernorm_fwd16: bad shape R=%d C=%d (expected > 0)", R, C);
    int rc = cpu_residual_fwd16(d, s, a, b16, res, (size_t)R * C, rt, e);
    return rc ? rc : cpu_layernorm_fwd16(d, s, res, w, b, y16, mean, rstd, R, C, eps, rt, e);
}
