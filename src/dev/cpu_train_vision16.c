/* The cpu backend's vision ops with 16-bit mirrors (dev/train_ops.h
 * "vision ops with 16-bit mirrors"): the fp32 op, then the mirror written
 * from the rt-rounded fp32 result. The cpu's convolutions read their fp32
 * operands (the mirrors hold the same values), so the results are those of
 * the fp32 ops by construction. */
#include "dev/cpu_train_vision.h"
#include "core/dtype.h"
#include "dev/dev.h"

#define NEED(cond, ...)                                                                  \
    do {                                                                                 \
        if (!(cond)) return err_set(e, PLUMB_EUSAGE, __VA_ARGS__);                       \
    } while (0)
#define RT16_OK(op) NEED(rt == DT_BF16 || rt == DT_F16, "%s: rounding type %d is not bf16 or fp16", op, (int)rt)

/* y16[i] = the rt bits of y[i] (y is rt-rounded, so exact) */
static void mirror16(const float *y, uint16_t *y16, size_t n, dtype_t rt)
{
    if (rt == DT_F16)
        for (size_t i = 0; i < n; i++) y16[i] = f32_to_f16(y[i]);
    else
        for (size_t i = 0; i < n; i++) y16[i] = f32_to_bf16(y[i]);
}

int cpu_conv2d_fwd16(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x, const uint16_t *x16,
                     const float *w, const uint16_t *w16, float *y, dtype_t rt, plumb_err *e)
{
    (void)x16, (void)w16;
    RT16_OK("conv2d_fwd16");
    return cpu_conv2d_fwd(d, s, g, x, w, y, rt, e);
}

int cpu_conv2d_bwd_data16(struct dev *d, dev_stream *s, const struct train_conv *g, const float *dy,
                          const uint16_t *dy16, const float *w, const uint16_t *w16, float *dx, dtype_t rt,
                          plumb_err *e)
{
    (void)dy16, (void)w16;
    RT16_OK("conv2d_bwd_data16");
    return cpu_conv2d_bwd_data(d, s, g, dy, w, dx, rt, e);
}

int cpu_conv2d_bwd_filter16(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x,
                            const uint16_t *x16, const float *dy, const uint16_t *dy16, float *dw, dtype_t rt,
                            plumb_err *e)
{
    (void)x16, (void)dy16;
    RT16_OK("conv2d_bwd_filter16");
    return cpu_conv2d_bwd_filter(d, s, g, x, dy, dw, rt, e);
}

int cpu_bn_apply16(struct dev *d, dev_stream *s, const float *x, const float *mean, const float *rstd,
                   const float *gamma, const float *beta, const float *z, float *y, uint16_t *y16, size_t M, int C,
                   int relu, dtype_t rt, plumb_err *e)
{
    RT16_OK("bn_apply16");
    int rc = cpu_bn_apply(d, s, x, mean, rstd, gamma, beta, z, y, M, C, relu, rt, e);
    if (!rc && y16) mirror16(y, y16, M * (size_t)C, rt);
    return rc;
}

int cpu_bn_bwd_data16(struct dev *d, dev_stream *s, const float *x, const float *dy, const float *mean,
                      const float *rstd, const float *gamma, const float *mdy, float *dx, uint16_t *dx16, size_t M,
                      int C, dtype_t rt, plumb_err *e)
{
    RT16_OK("bn_bwd_data16");
    int rc = cpu_bn_bwd_data(d, s, x, dy, mean, rstd, gamma, mdy, dx, M, C, rt, e);
    if (!rc && dx16) mirror16(dx, dx16, M * (size_t)C, rt);
    return rc;
}

int cpu_bn_bwd_reduce(struct dev *d, dev_stream *s, const float *x, const float *dy, const float *mean,
                      const float *rstd, size_t M, int C, void *part, float *dgamma, float *dbeta, plumb_err *e)
{
    int rc = cpu_bn_bwd_stats(d, s, x, dy, mean, rstd, M, C, part, e);
    if (!rc) rc = cpu_bn_bwd_params(d, s, x, dy, mean, rstd, M, C, dgamma, dbeta, e);
    return rc;
}

/* ---------------- resnet with 16-bit activations ----------------
 * (dev/train_ops.h "resnet with 16-bit activations"): each op is the fp32
 * op it is named after between casts. A 16-bit value widens to the fp32
 * value the fp32 path stores (it stores rt-rounded values), and every
 * result is rt-rounded before it is narrowed, so nothing is lost either
 * way: the results are the fp32 ops' bits, and the model's 16-bit pipeline
 * (models/resnet/resnet16.c) gives the mirror path's parameters on the cpu. */

#include <stdlib.h>

/* the value of rt's 16-bit bits h */
static float from16(uint16_t h, dtype_t rt) { return rt == DT_F16 ? f16_to_f32(h) : bf16_to_f32(h); }
/* relu_bwd's test: the gradient passes where the ReLU output (mask) is > 0 */
static int relu_passes(uint16_t mask, dtype_t rt) { return from16(mask, rt) > 0.0f; }

/* n fp32 values of x16 (masked: 0 where mask16 is not > 0), or NULL on a
 * failed allocation; x16 NULL gives NULL with *ok untouched */
static float *widen16(const uint16_t *x16, const uint16_t *mask16, size_t n, dtype_t rt, int *ok)
{
    if (!x16 || !*ok) return NULL;
    float *y = malloc((n ? n : 1) * sizeof *y);
    if (!y) {
        *ok = 0;
        return NULL;
    }
    for (size_t i = 0; i < n; i++) y[i] = !mask16 || relu_passes(mask16[i], rt) ? from16(x16[i], rt) : 0.0f;
    return y;
}
static float *scratch32(size_t n, int *ok)
{
    if (!*ok) return NULL;
    float *y = malloc((n ? n : 1) * sizeof *y);
    if (!y) *ok = 0;
    return y;
}
static int oom16(const char *op, plumb_err *e) { return err_set(e, PLUMB_ENOMEM, "%s: out of host memory", op); }

static size_t conv_nx(const struct train_conv *g) { return (size_t)g->N * g->H * g->W * g->C; }
static size_t conv_ny(const struct train_conv *g) { return (size_t)g->N * g->P * g->Q * g->K; }
static size_t conv_nw(const struct train_conv *g) { return (size_t)g->K * g->R * g->S * g->C; }
/* sizes are taken from g before the fp32 op checks it: refuse a bad one here */
#define GEOM_OK(op)                                                                                               \
    NEED(g && !train_conv_valid(g),                                                                               \
         "%s: bad geometry (expected train_conv_set's: sizes >= 1, the window inside the padded image)", op)

int cpu_conv2d_fwd16o(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x, const uint16_t *x16,
                      const uint16_t *w16, uint16_t *y16, dtype_t rt, plumb_err *e)
{
    RT16_OK("conv2d_fwd16o");
    NEED((x || x16) && w16 && y16, "conv2d_fwd16o: NULL x (and x16), w16 or y16");
    GEOM_OK("conv2d_fwd16o");
    int ok = 1;
    float *xw = widen16(x16, NULL, conv_nx(g), rt, &ok), *w = widen16(w16, NULL, conv_nw(g), rt, &ok);
    float *y = scratch32(conv_ny(g), &ok);
    int rc = !ok ? oom16("conv2d_fwd16o", e) : cpu_conv2d_fwd(d, s, g, x16 ? xw : x, w, y, rt, e);
    if (!rc) mirror16(y, y16, conv_ny(g), rt);
    free(xw), free(w), free(y);
    return rc;
}

int cpu_conv2d_bwd_data16o(struct dev *d, dev_stream *s, const struct train_conv *g, const uint16_t *dy16,
                           const uint16_t *w16, uint16_t *dx16, dtype_t rt, plumb_err *e)
{
    RT16_OK("conv2d_bwd_data16o");
    NEED(dy16 && w16 && dx16, "conv2d_bwd_data16o: NULL dy16, w16 or dx16");
    GEOM_OK("conv2d_bwd_data16o");
    int ok = 1;
    float *dy = widen16(dy16, NULL, conv_ny(g), rt, &ok), *w = widen16(w16, NULL, conv_nw(g), rt, &ok);
    float *dx = scratch32(conv_nx(g), &ok);
    int rc = !ok ? oom16("conv2d_bwd_data16o", e) : cpu_conv2d_bwd_data(d, s, g, dy, w, dx, rt, e);
    if (!rc) mirror16(dx, dx16, conv_nx(g), rt);
    free(dy), free(w), free(dx);
    return rc;
}

int cpu_conv2d_bwd_filter16o(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x,
                             const uint16_t *x16, const uint16_t *dy16, float *dw, dtype_t rt, plumb_err *e)
{
    RT16_OK("conv2d_bwd_filter16o");
    NEED((x || x16) && dy16 && dw, "conv2d_bwd_filter16o: NULL x (and x16), dy16 or dw");
    GEOM_OK("conv2d_bwd_filter16o");
    int ok = 1;
    float *xw = widen16(x16, NULL, conv_nx(g), rt, &ok), *dy = widen16(dy16, NULL, conv_ny(g), rt, &ok);
    int rc = !ok ? oom16("conv2d_bwd_filter16o", e) : cpu_conv2d_bwd_filter(d, s, g, x16 ? xw : x, dy, dw, rt, e);
    free(xw), free(dy);
    return rc;
}

int cpu_bn_stats16o(struct dev *d, dev_stream *s, const uint16_t *x16, size_t M, int C, const float *mean, void *part,
                    dtype_t rt, plumb_err *e)
{
    RT16_OK("bn_stats16o");
    NEED(x16 && part, "bn_stats16o: NULL x16 or part");
    int ok = 1;
    float *x = widen16(x16, NULL, M * (size_t)C, rt, &ok);
    int rc = !ok ? oom16("bn_stats16o", e) : cpu_bn_stats(d, s, x, M, C, mean, part, e);
    free(x);
    return rc;
}

int cpu_bn_stats1p16o(struct dev *d, dev_stream *s, const uint16_t *x16, size_t M, int C, const float *shift,
                      void *part, dtype_t rt, plumb_err *e)
{
    (void)s;
    RT16_OK("bn_stats1p16o");
    NEED(x16 && part, "bn_stats1p16o: NULL x16 or part");
    int ok = 1;
    float *x = widen16(x16, NULL, M * (size_t)C, rt, &ok);
    int rc = !ok ? oom16("bn_stats1p16o", e) : cpu_bn_stats1p(d, x, M, C, shift, part, e);
    free(x);
    return rc;
}

int cpu_bn_apply16o(struct dev *d, dev_stream *s, const uint16_t *x16, const float *mean, const float *rstd,
                    const float *gamma, const float *beta, const uint16_t *z16, uint16_t *y16, size_t M, int C,
                    int relu, dtype_t rt, plumb_err *e)
{
    RT16_OK("bn_apply16o");
    NEED(x16 && y16, "bn_apply16o: NULL x16 or y16");
    const size_t n = M * (size_t)C;
    int ok = 1;
    float *x = widen16(x16, NULL, n, rt, &ok), *z = widen16(z16, NULL, n, rt, &ok);
    int rc = !ok ? oom16("bn_apply16o", e) : cpu_bn_apply(d, s, x, mean, rstd, gamma, beta, z, x, M, C, relu, rt, e);
    if (!rc) mirror16(x, y16, n, rt);
    free(x), free(z);
    return rc;
}

int cpu_bn_apply2_16o(struct dev *d, dev_stream *s, const uint16_t *x16, const float *mean, const float *rstd,
                      const float *gamma, const float *beta, const uint16_t *zx16, const float *zmean,
                      const float *zrstd, const float *zgamma, const float *zbeta, uint16_t *y16, size_t M, int C,
                      int relu, dtype_t rt, plumb_err *e)
{
    RT16_OK("bn_apply2_16o");
    NEED(x16 && zx16 && y16, "bn_apply2_16o: NULL x16, zx16 or y16");
    const size_t n = M * (size_t)C;
    uint16_t *z16 = malloc((n ? n : 1) * sizeof *z16);
    if (!z16) return oom16("bn_apply2_16o", e);
    /* the two calls it stands for: z as bn_apply16o stores it, then y */
    int rc = cpu_bn_apply16o(d, s, zx16, zmean, zrstd, zgamma, zbeta, NULL, z16, M, C, 0, rt, e);
    if (!rc) rc = cpu_bn_apply16o(d, s, x16, mean, rstd, gamma, beta, z16, y16, M, C, relu, rt, e);
    free(z16);
    return rc;
}

/* dy [n] zeroed where this BN's own ReLU output, bn_apply of x with the
 * ReLU (rounded to rt, as bn_apply16o stored it), is not > 0: the mask
 * recomputed from x (train_ops.h, mbeta) */
static int mask_from_x(struct dev *d, dev_stream *s, const float *x, const float *mean, const float *rstd,
                       const float *gamma, const float *beta, float *dy, size_t M, int C, dtype_t rt, plumb_err *e)
{
    const size_t n = M * (size_t)C;
    float *y = malloc(n ? n * sizeof *y : 1);
    if (!y) return oom16("the BN backward's recomputed ReLU mask", e);
    int rc = cpu_bn_apply(d, s, x, mean, rstd, gamma, beta, NULL, y, M, C, 1, rt, e);
    for (size_t i = 0; i < n && !rc; i++)
        if (!(y[i] > 0.0f)) dy[i] = 0.0f;
    free(y);
    return rc;
}

int cpu_bn_bwd_reduce16o(struct dev *d, dev_stream *s, const uint16_t *x16, const uint16_t *dy16,
                         const uint16_t *mask16, const float *mgamma, const float *mbeta, const float *mean,
                         const float *rstd, size_t M, int C, void *part, float *dgamma, float *dbeta, dtype_t rt,
                         plumb_err *e)
{
    RT16_OK("bn_bwd_reduce16o");
    NEED(x16 && dy16, "bn_bwd_reduce16o: NULL x16 or dy16");
    NEED(!(mask16 && mbeta), "bn_bwd_reduce16o: both a mask16 and a mask from x (mbeta)");
    NEED(!mbeta || (mgamma && mean && rstd), "bn_bwd_reduce16o: a mask from x needs mgamma, mean and rstd");
    const size_t n = M * (size_t)C;
    int ok = 1;
    float *x = widen16(x16, NULL, n, rt, &ok), *dy = widen16(dy16, mask16, n, rt, &ok);
    int rc = !ok ? oom16("bn_bwd_reduce16o", e) : PLUMB_OK;
    if (!rc && mbeta) rc = mask_from_x(d, s, x, mean, rstd, mgamma, mbeta, dy, M, C, rt, e);
    if (!rc) rc = cpu_bn_bwd_reduce(d, s, x, dy, mean, rstd, M, C, part, dgamma, dbeta, e);
    free(x), free(dy);
    return rc;
}

int cpu_bn_bwd_data16o(struct dev *d, dev_stream *s, const uint16_t *x16, const uint16_t *dy16,
                       const uint16_t *mask16, const float *mbeta, const float *mean, const float *rstd,
                       const float *gamma, const float *mdy, uint16_t *dx16, size_t M, int C, dtype_t rt,
                       plumb_err *e)
{
    RT16_OK("bn_bwd_data16o");
    NEED(x16 && dy16 && dx16, "bn_bwd_data16o: NULL x16, dy16 or dx16");
    NEED(!(mask16 && mbeta), "bn_bwd_data16o: both a mask16 and a mask from x (mbeta)");
    const size_t n = M * (size_t)C;
    int ok = 1;
    float *x = widen16(x16, NULL, n, rt, &ok), *dy = widen16(dy16, mask16, n, rt, &ok);
    int rc = !ok ? oom16("bn_bwd_data16o", e) : PLUMB_OK;
    if (!rc && mbeta) rc = mask_from_x(d, s, x, mean, rstd, gamma, mbeta, dy, M, C, rt, e);
    if (!rc) rc = cpu_bn_bwd_data(d, s, x, dy, mean, rstd, gamma, mdy, dy, M, C, rt, e);
    if (!rc) mirror16(dy, dx16, n, rt);
    free(x), free(dy);
    return rc;
}

int cpu_add16o(struct dev *d, dev_stream *s, const uint16_t *a16, const uint16_t *b16, const uint16_t *mask16,
               const uint16_t *ymask16, uint16_t *y16, size_t n, dtype_t rt, plumb_err *e)
{
    RT16_OK("add16o");
    NEED((a16 && b16 && y16) || n == 0, "add16o: NULL a16, b16 or y16");
    int ok = 1;
    float *a = widen16(a16, NULL, n, rt, &ok), *b = widen16(b16, mask16, n, rt, &ok);
    int rc = !ok ? oom16("add16o", e) : cpu_add(d, s, a, b, a, n, 0, rt, e);
    /* the rounded sum masked as relu_bwd would mask it */
    for (size_t i = 0; !rc && ymask16 && i < n; i++)
        if (!relu_passes(ymask16[i], rt)) a[i] = 0.0f;
    if (!rc && n) mirror16(a, y16, n, rt);
    free(a), free(b);
    return rc;
}

int cpu_maxpool_fwd16o(struct dev *d, dev_stream *s, const struct train_conv *g, const uint16_t *x16, uint16_t *y16,
                       int32_t *idx, dtype_t rt, plumb_err *e)
{
    RT16_OK("maxpool_fwd16o");
    NEED(x16 && y16 && idx, "maxpool_fwd16o: NULL x16, y16 or idx");
    GEOM_OK("maxpool_fwd16o");
    int ok = 1;
    float *x = widen16(x16, NULL, conv_nx(g), rt, &ok), *y = scratch32(conv_ny(g), &ok);
    int rc = !ok ? oom16("maxpool_fwd16o", e) : cpu_maxpool_fwd(d, s, g, x, y, idx, e);
    if (!rc) mirror16(y, y16, conv_ny(g), rt);
    free(x), free(y);
    return rc;
}

int cpu_maxpool_bwd16o(struct dev *d, dev_stream *s, const struct train_conv *g, const uint16_t *dy16,
                       const int32_t *idx, uint16_t *dx16, dtype_t rt, plumb_err *e)
{
    RT16_OK("maxpool_bwd16o");
    NEED(dy16 && idx && dx16, "maxpool_bwd16o: NULL dy16, idx or dx16");
    GEOM_OK("maxpool_bwd16o");
    int ok = 1;
    float *dy = widen16(dy16, NULL, conv_ny(g), rt, &ok), *dx = scratch32(conv_nx(g), &ok);
    int rc = !ok ? oom16("maxpool_bwd16o", e) : cpu_maxpool_bwd(d, s, g, dy, idx, dx, rt, e);
    if (!rc) mirror16(dx, dx16, conv_nx(g), rt);
    free(dy), free(dx);
    return rc;
}
