/* Golden element definitions of the vision ops (dev/train_ops.h, "vision
 * ops"), shared by the cpu backend, the GPU kernels and the tests
 * (PLUMB_HD). Each function computes ONE output element in the documented
 * order; a backend may vectorise across independent outputs, never inside a
 * chain. Built from fmaf, IEEE + - * / and sqrt, integer operations and
 * core/gmath.h (gexpf, glogf, the pairwise tree), under -ffp-contract=off /
 * --fmad=false, so every device gives the same bits.
 *
 * Layouts: x [N, H, W, C], w [K, R, S, C], y [N, P, Q, K] (NHWC, KRSC). */
#ifndef PLUMB_TRAIN_VISION_H
#define PLUMB_TRAIN_VISION_H
#include <stddef.h>
#include <stdint.h>
#include "core/dtype.h"
#include "core/gmath.h"
#include "core/hd.h"
#include "dev/train_ops.h"

/* x rounded to rt (DT_F32: unchanged), round to nearest even. */
PLUMB_HD float tv_round(float x, int rt)
{
    if (rt == DT_BF16) return bf16_to_f32(f32_to_bf16(x));
    if (rt == DT_F16) return f16_to_f32(f32_to_f16(x));
    return x;
}

/* ---------------------------------------------------------------- conv */

/* y[n,p,q,k] before rounding: fmaf chain over r, s (in the image), c. */
PLUMB_HD float tv_conv_fwd_elem(const struct train_conv *g, const float *x, const float *w, int n, int p,
                                int q, int k)
{
    float acc = 0.0f;
    for (int r = 0; r < g->R; r++) {
        int h = p * g->stride - g->pad + r;
        if (h < 0 || h >= g->H) continue;
        for (int s = 0; s < g->S; s++) {
            int ww = q * g->stride - g->pad + s;
            if (ww < 0 || ww >= g->W) continue;
            const float *xr = x + (((size_t)n * g->H + h) * g->W + ww) * g->C;
            const float *wr = w + (((size_t)k * g->R + r) * g->S + s) * g->C;
            for (int c = 0; c < g->C; c++) acc = fmaf(xr[c], wr[c], acc);
        }
    }
    return acc;
}

/* The output position (p or q) that window offset r of input position h
 * reads from, or -1 when there is none (h + pad - r not a multiple of the
 * stride, or outside [0, P)). */
PLUMB_HD int tv_conv_out_of(int h, int r, int stride, int pad, int P)
{
    int t = h + pad - r;
    if (t < 0 || t % stride) return -1;
    t /= stride;
    return t < P ? t : -1;
}

/* dx[n,h,w,c] before rounding: fmaf chain over r, s, k. */
PLUMB_HD float tv_conv_bwd_data_elem(const struct train_conv *g, const float *dy, const float *w, int n, int h,
                                     int ww, int c)
{
    float acc = 0.0f;
    for (int r = 0; r < g->R; r++) {
        int p = tv_conv_out_of(h, r, g->stride, g->pad, g->P);
        if (p < 0) continue;
        for (int s = 0; s < g->S; s++) {
            int q = tv_conv_out_of(ww, s, g->stride, g->pad, g->Q);
            if (q < 0) continue;
            const float *dr = dy + (((size_t)n * g->P + p) * g->Q + q) * g->K;
            const float *wc = w + ((size_t)r * g->S + s) * g->C + c; /* + k R S C */
            const size_t wk = (size_t)g->R * g->S * g->C;
            for (int k = 0; k < g->K; k++) acc = fmaf(dr[k], wc[k * wk], acc);
        }
    }
    return acc;
}

/* dw[k,r,s,c]: fmaf chain over n, p, q (input position in the image). */
PLUMB_HD float tv_conv_bwd_filter_elem(const struct train_conv *g, const float *x, const float *dy, int k, int r,
                                       int s, int c)
{
    float acc = 0.0f;
    for (int n = 0; n < g->N; n++)
        for (int p = 0; p < g->P; p++) {
            int h = p * g->stride - g->pad + r;
            if (h < 0 || h >= g->H) continue;
            for (int q = 0; q < g->Q; q++) {
                int ww = q * g->stride - g->pad + s;
                if (ww < 0 || ww >= g->W) continue;
                acc = fmaf(dy[(((size_t)n * g->P + p) * g->Q + q) * g->K + k],
                           x[(((size_t)n * g->H + h) * g->W + ww) * g->C + c], acc);
            }
        }
    return acc;
}

/* ---------------------------------------------------------------- BN fixed point */

/* q = rint(v * 2^SHIFT) as int64 (train_ops.h TRAIN_BN_FIX_SHIFT):
 * |v| < 2^23 gives |q| < 2^63; larger or infinite v saturate, NaN counts as
 * the positive bound. v * 2^SHIFT is exact in double; the rounding to an
 * integer adds and subtracts 2^52 with v's sign (exact round to nearest
 * even for |q| < 2^52; above that q is already an integer). */
PLUMB_HD int64_t tv_fix(float v)
{
    const int64_t big = (int64_t)0x7fffffffffffffffLL;
    if (v != v) return big;
    if (!(v < 8388608.0f)) return big;
    if (!(v > -8388608.0f)) return -big;
    double q = (double)v * (double)(1ULL << TRAIN_BN_FIX_SHIFT);
    const double two52 = 4503599627370496.0;
    if (q >= 0.0) {
        if (q < two52) {
            double t = q + two52;
            q = t - two52;
        }
    } else if (q > -two52) {
        double t = q - two52;
        q = t + two52;
    }
    return (int64_t)q;
}
/* q = hi * 2^32 + lo, lo in [0, 2^32) */
PLUMB_HD void tv_fix_split(int64_t q, int64_t *hi, int64_t *lo)
{
    int64_t l = (int64_t)((uint64_t)q & 0xffffffffULL);
    *lo = l;
    *hi = (q - l) / (int64_t)4294967296LL; /* exact: q - l is a multiple of 2^32 */
}
/* The value of a sum (sum_hi, sum_lo) in units of 2^-SHIFT, as a double. */
PLUMB_HD double tv_fix_value(int64_t sum_hi, int64_t sum_lo)
{
    double h = (double)sum_hi * 4294967296.0;
    double l = (double)sum_lo;
    return (h + l) * (1.0 / (double)(1ULL << TRAIN_BN_FIX_SHIFT));
}
/* bn_mean golden: value / count rounded once to fp32 */
PLUMB_HD float tv_fix_mean(int64_t sum_hi, int64_t sum_lo, int64_t count)
{
    return (float)(tv_fix_value(sum_hi, sum_lo) / (double)count);
}

/* ---------------------------------------------------------------- BN elements */

/* bn_apply: h = (x - mean) * rstd; v = fmaf(h, gamma, beta) (+ z) (relu) */
PLUMB_HD float tv_bn_apply(float x, float mean, float rstd, float gamma, float beta, const float *z, int relu)
{
    float h = (x - mean) * rstd;
    float v = fmaf(h, gamma, beta);
    if (z) v = v + *z;
    if (relu) v = v > 0.0f ? v : 0.0f;
    return v;
}
PLUMB_HD float tv_bn_xhat(float x, float mean, float rstd) { return (x - mean) * rstd; }
/* bn_bwd_data: t = dy - mdy0; t = fmaf(-xhat, mdy1, t); (gamma * rstd) * t */
PLUMB_HD float tv_bn_dx(float x, float dy, float mean, float rstd, float gamma, float mdy0, float mdy1)
{
    float xh = (x - mean) * rstd;
    float t = dy - mdy0;
    t = fmaf(-xh, mdy1, t);
    return (gamma * rstd) * t;
}
/* bn_var's running-statistics line: (1 - m) * run + m * v, fp32, no fma */
PLUMB_HD float tv_bn_running(float run, float v, float momentum)
{
    float a = (1.0f - momentum) * run;
    float b = momentum * v;
    return a + b;
}
/* the one-pass statistics' shift of channel c (dev/train_ops.h
 * bn_stats1p16o): shift[c], or 0 where shift is NULL or shift[c] is not
 * finite (a running mean poisoned by a non-finite step must not poison the
 * batch statistics of the steps after it) */
PLUMB_HD float tv_bn_shift(const float *shift, int c)
{
    const float s = shift ? shift[c] : 0.0f;
    return s - s == 0.0f ? s : 0.0f;
}
/* bn_meanvar (dev/train_ops.h) for channel c, the one-pass statistics: p
 * [2C] the global sums of d = x - shift and of d * d; shift (NULL: zeros)
 * may be run_mean (read first); mean, rstd must not alias it */
PLUMB_HD void tv_bn_meanvar(const float *p, int C, int c, long long count, float eps, float momentum,
                            const float *shift, float *mean, float *rstd, float *run_mean, float *run_var)
{
    const float sh = tv_bn_shift(shift, c);
    const float n = (float)count;
    const float m1 = p[c] / n;
    const float m1sq = m1 * m1;
    float var = p[C + c] / n;
    var = var - m1sq;
    if (var < 0.0f) var = 0.0f; /* cancellation; a NaN stays NaN */
    const float mu = sh + m1;
    mean[c] = mu;
    rstd[c] = 1.0f / sqrtf(var + eps);
    if (run_mean) {
        const float varu = var * (n / (float)(count - 1));
        run_mean[c] = tv_bn_running(run_mean[c], mu, momentum);
        run_var[c] = tv_bn_running(run_var[c], varu, momentum);
    }
}

/* ---------------------------------------------------------------- pooling */

/* max pool of output (n,p,q,c): the first maximum in (r, s) order; *arg =
 * r * S + s of it. */
PLUMB_HD float tv_maxpool_elem(const struct train_conv *g, const float *x, int n, int p, int q, int c, int32_t *arg)
{
    float m = 0.0f;
    int32_t a = -1;
    for (int r = 0; r < g->R; r++) {
        int h = p * g->stride - g->pad + r;
        if (h < 0 || h >= g->H) continue;
        for (int s = 0; s < g->S; s++) {
            int ww = q * g->stride - g->pad + s;
            if (ww < 0 || ww >= g->W) continue;
            float v = x[(((size_t)n * g->H + h) * g->W + ww) * g->C + c];
            if (a < 0 || v > m) {
                m = v;
                a = r * g->S + s;
            }
        }
    }
    *arg = a;
    return m;
}

/* max pool backward at input (n,h,w,c): dy of the windows (p, then q,
 * ascending) whose winner is (h, w), plain adds from +0. */
PLUMB_HD float tv_maxpool_bwd_elem(const struct train_conv *g, const float *dy, const int32_t *idx, int n, int h,
                                   int ww, int c)
{
    float acc = 0.0f;
    for (int r = g->R - 1; r >= 0; r--) { /* p = (h + pad - r) / stride ascends as r descends */
        int p = tv_conv_out_of(h, r, g->stride, g->pad, g->P);
        if (p < 0) continue;
        for (int s = g->S - 1; s >= 0; s--) {
            int q = tv_conv_out_of(ww, s, g->stride, g->pad, g->Q);
            if (q < 0) continue;
            size_t o = (((size_t)n * g->P + p) * g->Q + q) * g->C + c;
            if (idx[o] == r * g->S + s) acc = acc + dy[o];
        }
    }
    return acc;
}

/* global average pool of (n, c): pairwise tree over the HW positions / HW */
PLUMB_HD float tv_avgpool_elem(const float *x, int n, int HW, int C, int c)
{
    float s = gsum_strided(x + (size_t)n * HW * C + c, (size_t)HW, (size_t)C);
    return s / (float)HW;
}

/* ---------------------------------------------------------------- softmax cross-entropy */

/* One row of cls_xent, golden: returns the loss (label y; y < 0: none, loss
 * 0) and writes *pred; dz (may be NULL) = (e_i / S - [i == y]) * gs. */
PLUMB_HD float tv_xent_row(const float *z, int V, int y, float gs, float *dz, int32_t *pred)
{
    float m = z[0];
    int32_t am = 0;
    for (int i = 1; i < V; i++)
        if (z[i] > m) {
            m = z[i];
            am = i;
        }
    *pred = am;
    if (y < 0) return 0.0f;
    struct gpairwise pw;
    gpw_init(&pw);
    for (int i = 0; i < V; i++) gpw_push(&pw, gexpf(z[i] - m));
    float S = gpw_result(&pw);
    if (dz)
        for (int i = 0; i < V; i++) {
            float p = gexpf(z[i] - m) / S;
            dz[i] = (i == y ? p - 1.0f : p) * gs;
        }
    return glogf(S) - (z[y] - m);
}

#endif
