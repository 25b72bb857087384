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
