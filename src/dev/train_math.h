/* Golden scalar functions of the training ops (exp, log1p, sigmoid, the BCE
 * term), shared by the cpu backend and the GPU kernels (PLUMB_HD). exp is
 * gmath.h's gexpf; log1p (which gmath.h lacks, and which BCE needs accurate
 * for tiny arguments) is built here from IEEE double + - * / and fma in a
 * fixed order and rounded once to fp32, so every device returns the same bits. */
#ifndef PLUMB_TRAIN_MATH_H
#define PLUMB_TRAIN_MATH_H
#include <math.h>
#include "core/gmath.h"
#include "core/hd.h"

/* exp: the golden exp of core/gmath.h (shared with the numerics ops). */
PLUMB_HD float tm_expf(float x) { return gexpf(x); }

/* 2*atanh(s) = log((1+s)/(1-s)) for |s| <= 0.1716: odd series to s^23. */
PLUMB_HD double tm_atanh2(double s)
{
    double s2 = s * s;
    double p = 1.0 / 23.0;
    p = fma(p, s2, 1.0 / 21.0);
    p = fma(p, s2, 1.0 / 19.0);
    p = fma(p, s2, 1.0 / 17.0);
    p = fma(p, s2, 1.0 / 15.0);
    p = fma(p, s2, 1.0 / 13.0);
    p = fma(p, s2, 1.0 / 11.0);
    p = fma(p, s2, 1.0 / 9.0);
    p = fma(p, s2, 1.0 / 7.0);
    p = fma(p, s2, 1.0 / 5.0);
    p = fma(p, s2, 1.0 / 3.0);
    p = fma(p, s2, 1.0);
    return 2.0 * (s * p);
}

/* log1p(x) for fp32 x > -1: direct atanh form near 0 (no 1+x rounding),
 * else frexp(1+x) = m 2^e with m in [sqrt(1/2), sqrt(2)). */
PLUMB_HD float tm_log1pf(float xf)
{
    if (xf != xf) return xf;
    if (xf == -1.0f) return -INFINITY;
    if (xf < -1.0f) return NAN;
    if (xf == INFINITY) return INFINITY;
    double x = (double)xf;
    if (x > -0.29 && x < 0.414) return (float)tm_atanh2(x / (2.0 + x));
    int ex;
    double m = frexp(1.0 + x, &ex); /* 1+x exact in double for these x */
    if (m < 0.70710678118654752) {
        m *= 2.0;
        ex -= 1;
    }
    double l = fma((double)ex, 6.93147180559945309417e-01, tm_atanh2((m - 1.0) / (m + 1.0)));
    return (float)l;
}

/* sigmoid(z): 1/(1+exp(-z)) for z >= 0, exp(z)/(1+exp(z)) otherwise. */
PLUMB_HD float tm_sigmoidf(float z)
{
    if (z >= 0.0f) return 1.0f / (1.0f + tm_expf(-z));
    float ez = tm_expf(z);
    return ez / (1.0f + ez);
}

/* BCE on a logit: max(z,0) - z*y + log1p(exp(-|z|)), fp32, left to right. */
PLUMB_HD float tm_bce_logit(float z, float y)
{
    float a = z > 0.0f ? z : 0.0f;
    float b = a - z * y;
    return b + tm_log1pf(tm_expf(-fabsf(z)));
}

#endif
