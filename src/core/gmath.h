/* Golden arithmetic (docs/numerics.md): the one evaluation order that the
 * cpu backend and the CUDA/HIP kernels share, so golden results have the same
 * bits on every device.
 *
 * Rules every function here keeps:
 *  - built only from IEEE single-precision + - * /, sqrtf and fmaf (each one
 *    correctly rounded, round-to-nearest-even), integer/bit operations and
 *    comparisons; no libm transcendental, no long double, no float64;
 *  - every fused multiply-add is written as fmaf(); nothing else may be fused:
 *    host code is compiled with -ffp-contract=off, CUDA with --fmad=false
 *    (and IEEE division/sqrt: -prec-div=true -prec-sqrt=true, the defaults
 *    without --use_fast_math), hipcc with -ffp-contract=off;
 *  - denormals are honoured (no flush-to-zero: never build with -ftz=true or
 *    -ffast-math);
 *  - rounding to an integer adds and subtracts 2^23 (with v's sign), which
 *    is exact round-to-nearest-even for |v| < 2^23.
 * With those, gcc and clang at -O2/-O3 and nvcc produce the same bits.
 *
 * Accuracy (tests/test_gmath.c measures it against libm's float64):
 *   gexpf, glogf, gsinpif, gcospif: <= 2 ulp; gtanhf, gerff: <= 3 ulp;
 *   ggeluf: <= 4 ulp where |result| >= 2^-100 (it is x * sigmoid, below).
 * Polynomial coefficients come from scripts/gmath_coeffs.py (Chebyshev fits
 * with mpmath, rounded to float32); the literals below define the functions.
 */
#ifndef PLUMB_GMATH_H
#define PLUMB_GMATH_H
#include <stddef.h>
#include <stdint.h>
#include "core/dtype.h"
#include "core/hd.h"

#if !defined(__CUDACC__) && !defined(__HIPCC__)
#include <math.h> /* fmaf, sqrtf: correctly rounded IEEE operations */
#endif

/* ---------------------------------------------------------------- helpers */

PLUMB_HD float g_abs(float x) { return bits_f32(f32_bits(x) & 0x7fffffffu); }
PLUMB_HD float g_copysign(float mag, float sgn)
{
    return bits_f32((f32_bits(mag) & 0x7fffffffu) | (f32_bits(sgn) & 0x80000000u));
}
PLUMB_HD int g_isnan(float x) { return (f32_bits(x) & 0x7fffffffu) > 0x7f800000u; }
/* Round to nearest even integer (exact, no libm): for 0 <= v < 2^23,
 * v + 2^23 lies in [2^23, 2^24) where the float spacing is 1, so the add
 * rounds v to an integer (ties to even) and the subtraction is exact; the
 * mirror image for negative v. |v| >= 2^23 is already an integer. */
PLUMB_HD float g_rint_small(float v)
{
    const float two23 = 8388608.0f;
    if (!(g_abs(v) < two23)) return v;
    if (v >= 0.0f) {
        float t = v + two23;
        return t - two23;
    }
    float t = v - two23;
    return t + two23;
}
/* 2^n as a float for -126 <= n <= 127. */
PLUMB_HD float g_pow2i(int n) { return bits_f32((uint32_t)(n + 127) << 23); }

/* ---------------------------------------------------------------- exp */

/* exp(x): n = rint(x*log2(e)); r = x - n*ln2 by two fmaf steps (Cody-Waite
 * with ln2 = LN2_HI + LN2_LO); exp(r) = 1 + (r + r^2*P(r)) with P a degree-5
 * polynomial by fmaf Horner; the result is scaled by 2^n in two exact steps
 * (2^(n>>1) then 2^(n - (n>>1))) so overflow gives inf and small results round
 * once into the subnormal range. */
PLUMB_HD float gexpf(float x)
{
    if (g_isnan(x)) return x + x;
    if (x > 89.0f) return bits_f32(0x7f800000u);
    if (x < -104.0f) return 0.0f;
    const float log2e = 0x1.715476p+0f;
    const float ln2_hi = 0x1.62e43p-1f, ln2_lo = -0x1.05c61p-29f;
    float nf = g_rint_small(x * log2e);
    float r = fmaf(-nf, ln2_hi, x);
    r = fmaf(-nf, ln2_lo, r);
    float p = 0x1.a13ap-13f;
    p = fmaf(p, r, 0x1.6d5ad8p-10f);
    p = fmaf(p, r, 0x1.1110dap-7f);
    p = fmaf(p, r, 0x1.5554d8p-5f);
    p = fmaf(p, r, 0x1.555556p-3f);
    p = fmaf(p, r, 0x1p-1f);
    float q = fmaf(r * r, p, r);
    float y = 1.0f + q;
    int n = (int)nf;
    int n1 = n >> 1; /* arithmetic shift: floor(n/2) */
    return y * g_pow2i(n1) * g_pow2i(n - n1);
}

/* ---------------------------------------------------------------- log */

/* log(x): x = m * 2^e with m in [sqrt(1/2), sqrt(2)); f = m - 1 (exact);
 * log(1+f) = f - f^2/2 + f^3*Q(f) (Q degree 8); result = e*ln2 + log(1+f)
 * with ln2 split so e*LN2_HI is exact. Subnormal x is scaled by 2^23 first.
 * log(0) = -inf, log(x<0) = NaN, log(inf) = inf, log(NaN) = NaN. */
PLUMB_HD float glogf(float x)
{
    uint32_t u = f32_bits(x);
    if (g_isnan(x)) return x + x;
    if ((u & 0x7fffffffu) == 0) return bits_f32(0xff800000u);
    if (u & 0x80000000u) return bits_f32(0x7fc00000u);
    if (u == 0x7f800000u) return x;
    int e = 0;
    if (u < 0x00800000u) { /* subnormal */
        x = x * 8388608.0f; /* 2^23, exact */
        u = f32_bits(x);
        e = -23;
    }
    e += (int)(u >> 23) - 127;
    float m = bits_f32((u & 0x007fffffu) | 0x3f800000u); /* [1, 2) */
    if (f32_bits(m) > 0x3fb504f3u) { /* m > sqrt(2) */
        m = m * 0.5f;
        e += 1;
    }
    float f = m - 1.0f;
    float ef = (float)e;
    float q = 0x1.1dedf8p-4f;
    q = fmaf(q, f, -0x1.d6d10ep-4f);
    q = fmaf(q, f, 0x1.dec8ccp-4f);
    q = fmaf(q, f, -0x1.fce37ap-4f);
    q = fmaf(q, f, 0x1.23cf72p-3f);
    q = fmaf(q, f, -0x1.555b8ap-3f);
    q = fmaf(q, f, 0x1.999d6ep-3f);
    q = fmaf(q, f, -0x1.fffffcp-3f);
    q = fmaf(q, f, 0x1.555554p-2f);
    float z = f * f;
    float y = f * z * q;
    y = fmaf(ef, -2.12194440e-4f, y); /* ln2 - 0.693359375 */
    y = fmaf(-0.5f, z, y);
    float r = f + y;
    return fmaf(ef, 0.693359375f, r); /* 0x1.63p-1, 9 bits: e*LN2_HI exact */
}

/* ---------------------------------------------------------------- sinpi, cospi */

/* sin(pi*f), cos(pi*f) for |f| <= 1/4: f*S(f^2) and 1 + t*C(t), t = f^2. */
PLUMB_HD float g_sinpi_kernel(float f)
{
    float t = f * f;
    float s = 0x1.4bc85cp-4f;
    s = fmaf(s, t, -0x1.32ca9ep-1f);
    s = fmaf(s, t, 0x1.466bbap+1f);
    s = fmaf(s, t, -0x1.4abbcep+2f);
    s = fmaf(s, t, 0x1.921fb6p+1f);
    return f * s;
}
PLUMB_HD float g_cospi_kernel(float f)
{
    float t = f * f;
    float c = -0x1.a1e852p-6f;
    c = fmaf(c, t, 0x1.e1ec72p-3f);
    c = fmaf(c, t, -0x1.55d3c2p+0f);
    c = fmaf(c, t, 0x1.03c1fp+2f);
    c = fmaf(c, t, -0x1.3bd3ccp+2f);
    return fmaf(c, t, 1.0f);
}
/* Reduction: x = n/2 + f with n = rint(2x), |f| <= 1/4 (exact), quadrant
 * q = n mod 4. For |x| >= 2^22 every float is a multiple of 1/2 (f = 0).
 * *q_out gets q. NaN and inf give NaN. */
PLUMB_HD float g_pi_reduce(float x, int *q_out)
{
    float ax = g_abs(x);
    if (ax < 4194304.0f) { /* 2^22 */
        float nf = g_rint_small(x + x);
        *q_out = (int)nf & 3;
        return fmaf(-0.5f, nf, x); /* exact */
    }
    if (ax < 16777216.0f) { /* 2^24: 2x is an integer below 2^25 */
        *q_out = (int)(x + x) & 3;
        return 0.0f;
    }
    *q_out = 0; /* even integers */
    return 0.0f;
}
PLUMB_HD float gsinpif(float x)
{
    if (g_isnan(x) || g_abs(x) == bits_f32(0x7f800000u)) return bits_f32(0x7fc00000u);
    int q;
    float f = g_pi_reduce(x, &q);
    switch (q) {
    case 0: return g_sinpi_kernel(f);
    case 1: return g_cospi_kernel(f);
    case 2: return -g_sinpi_kernel(f);
    default: return -g_cospi_kernel(f);
    }
}
PLUMB_HD float gcospif(float x)
{
    if (g_isnan(x) || g_abs(x) == bits_f32(0x7f800000u)) return bits_f32(0x7fc00000u);
    int q;
    float f = g_pi_reduce(x, &q);
    switch (q) {
    case 0: return g_cospi_kernel(f);
    case 1: return -g_sinpi_kernel(f);
    case 2: return -g_cospi_kernel(f);
    default: return g_sinpi_kernel(f);
    }
}

/* ---------------------------------------------------------------- tanh */

/* |x| < 0.625: x + x*t*T(t), t = x^2 (T degree 6);
 * otherwise sign(x) * (1 - 2/(gexpf(2|x|) + 1)), which reaches exactly 1 for
 * large |x| (gexpf gives inf). tanh(-0) = -0. */
PLUMB_HD float gtanhf(float x)
{
    if (g_isnan(x)) return x + x;
    float a = g_abs(x);
    if (a < 0.625f) {
        float t = x * x;
        float p = -0x1.c40cc8p-11f;
        p = fmaf(p, t, 0x1.b15b42p-9f);
        p = fmaf(p, t, -0x1.20104ap-7f);
        p = fmaf(p, t, 0x1.66270cp-6f);
        p = fmaf(p, t, -0x1.ba1a58p-5f);
        p = fmaf(p, t, 0x1.11111p-3f);
        p = fmaf(p, t, -0x1.555556p-2f);
        return g_copysign(fmaf(x * t, p, x), x); /* keeps tanh(-0) = -0 */
    }
    float e = gexpf(a + a);
    float r = 1.0f - 2.0f / (e + 1.0f);
    return g_copysign(r, x);
}

/* ---------------------------------------------------------------- erf */

/* |x| < 1: x*E(x^2) (E degree 8).
 * 1 <= |x| < 4: 1 - exp(-x^2)*G(|x| - 2.5) (G degree 13), with x^2 = h + l
 * split exactly by fmaf so exp(-x^2) = gexpf(-h)*(1 - l) to first order.
 * |x| >= 4: erf rounds to +-1 in float32. */
PLUMB_HD float gerff(float x)
{
    if (g_isnan(x)) return x + x;
    float a = g_abs(x);
    if (a < 1.0f) {
        float t = x * x;
        float p = 0x1.1c41acp-20f;
        p = fmaf(p, t, -0x1.d2b852p-17f);
        p = fmaf(p, t, 0x1.f57e9cp-14f);
        p = fmaf(p, t, -0x1.bfe158p-11f);
        p = fmaf(p, t, 0x1.56588cp-8f);
        p = fmaf(p, t, -0x1.b82cbap-6f);
        p = fmaf(p, t, 0x1.ce2f2p-4f);
        p = fmaf(p, t, -0x1.812746p-2f);
        p = fmaf(p, t, 0x1.20dd76p+0f);
        return x * p;
    }
    if (a >= 4.0f) return g_copysign(1.0f, x);
    float u = a - 2.5f;
    float g = -0x1.b072dep-26f;
    g = fmaf(g, u, 0x1.c8ff0ap-24f);
    g = fmaf(g, u, -0x1.04c274p-22f);
    g = fmaf(g, u, 0x1.fff344p-21f);
    g = fmaf(g, u, -0x1.1e0838p-18f);
    g = fmaf(g, u, 0x1.0f50c2p-16f);
    g = fmaf(g, u, -0x1.ed817p-15f);
    g = fmaf(g, u, 0x1.ba2fcep-13f);
    g = fmaf(g, u, -0x1.809edep-11f);
    g = fmaf(g, u, 0x1.435e2cp-9f);
    g = fmaf(g, u, -0x1.063202p-7f);
    g = fmaf(g, u, 0x1.98958p-6f);
    g = fmaf(g, u, -0x1.3086d8p-4f);
    g = fmaf(g, u, 0x1.afbb4p-3f);
    float h = a * a;
    float l = fmaf(a, a, -h);
    float eh = gexpf(-h);
    float ex = fmaf(-eh, l, eh);
    float r = 1.0f - ex * g;
    return g_copysign(r, x);
}

/* ---------------------------------------------------------------- gelu (tanh form) */

/* GELU, tanh approximation: 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3))).
 * Evaluated through the identity 0.5*(1 + tanh(v)) = 1/(1 + exp(-2v)), which
 * avoids the cancellation of 1 + tanh for negative x:
 *   w = fmaf(0.044715*x^2, x, x);  z = -2*sqrt(2/pi) * w;
 *   gelu = x / (1 + gexpf(z)).
 * For x below about -44 exp overflows and the result is -0 (true value
 * below 2^-100 in magnitude). */
PLUMB_HD float ggeluf(float x)
{
    float x2 = x * x;
    float w = fmaf(0.044715f * x2, x, x);
    float z = -0x1.988454p+0f * w;
    return x / (1.0f + gexpf(z));
}
/* d gelu / dx with the same pieces: s = 1/(1 + gexpf(z)),
 * gelu' = s + x*s*(1-s) * 2*sqrt(2/pi) * (1 + 3*0.044715*x^2). */
PLUMB_HD float ggelu_gradf(float x)
{
    float x2 = x * x;
    float w = fmaf(0.044715f * x2, x, x);
    float z = -0x1.988454p+0f * w;
    float s = 1.0f / (1.0f + gexpf(z));
    float dw = fmaf(0.134145f, x2, 1.0f);
    float ds = (x * s) * (1.0f - s);
    return fmaf(ds, 0x1.988454p+0f * dw, s);
}

/* ---------------------------------------------------------------- pairwise sum */

/* The golden sum of n floats is the level-by-level pairwise tree:
 *   level 0 element i = x[i], i < n;
 *   level L has n_L = ceil(n / 2^L) elements; level L+1 element i =
 *     (level L element 2i) + (level L element 2i+1)  if 2i+1 < n_L,
 *     (level L element 2i), carried up unchanged      otherwise;
 *   the sum is the single element of the first level with n_L = 1
 *   (n = 0 gives +0).
 * Equivalently, level L element i is the sum of the aligned block
 * [i*2^L, (i+1)*2^L) clipped to n, computed as the sum of its two aligned
 * half-blocks (a half lying wholly past n is absent, the other half carried).
 * So a GPU block that reduces an aligned chunk of 2^B elements by adding
 * adjacent pairs level by level (s[2i] + s[2i+1], or in place
 * s[i*2^(L+1)] += s[i*2^(L+1) + 2^L]) produces level-B elements, and the same
 * rule applied to those chunk sums finishes the tree. Padding missing
 * elements with -0.0f instead of carrying gives the same bits (x + -0 = x for
 * every x, including -0), so a kernel may pad a partial chunk with -0.0f.
 * Float addition is commutative, so a+b and b+a are the same bits.
 *
 * gpairwise is the same tree built incrementally (a binary counter: after m
 * pushes the stack holds the sums of the aligned blocks of m's binary
 * digits); it needs O(log n) memory and any sequence of pushed values. */
struct gpairwise {
    uint64_t count;
    int top;
    float stack[64];
};
PLUMB_HD void gpw_init(struct gpairwise *p)
{
    p->count = 0;
    p->top = 0;
}
PLUMB_HD void gpw_push(struct gpairwise *p, float v)
{
    uint64_t c = p->count;
    while (c & 1u) {
        v = p->stack[--p->top] + v;
        c >>= 1;
    }
    p->stack[p->top++] = v;
    p->count++;
}
/* Incomplete blocks: the rightmost partial sums are carried up and added to
 * their left siblings, right to left. */
PLUMB_HD float gpw_result(const struct gpairwise *p)
{
    if (p->top == 0) return 0.0f;
    float acc = p->stack[p->top - 1];
    for (int j = p->top - 2; j >= 0; j--) acc = p->stack[j] + acc;
    return acc;
}
/* Golden sum of x[0], x[stride], ..., x[(n-1)*stride]. */
PLUMB_HD float gsum_strided(const float *x, size_t n, size_t stride)
{
    struct gpairwise p;
    gpw_init(&p);
    for (size_t i = 0; i < n; i++) gpw_push(&p, x[i * stride]);
    return gpw_result(&p);
}
PLUMB_HD float gsum(const float *x, size_t n) { return gsum_strided(x, n, 1); }

/* ---------------------------------------------------------------- gemm element */

/* Golden GEMM element: acc = +0; for p = 0..k-1 (in that order)
 * acc = fmaf(a[p], b[p], acc); then C = acc, or C = C + acc when
 * accumulating. a and b are one row of A and one column of B given as
 * (pointer, stride) in fp32 (bf16/fp16 inputs are widened exactly first). */
PLUMB_HD float ggemm_dot(const float *a, size_t sa, const float *b, size_t sb, int k)
{
    float acc = 0.0f;
    for (int p = 0; p < k; p++) acc = fmaf(a[(size_t)p * sa], b[(size_t)p * sb], acc);
    return acc;
}

/* ---------------------------------------------------------------- softmax row */

/* Golden softmax of one row x[0..n): m = max (a left-to-right scan with
 * `v > m`, starting from x[0]; NaN never wins the comparison);
 * e_i = gexpf(x_i - m); s = golden pairwise sum of e; y_i = e_i / s (IEEE
 * division). y may alias x. */
PLUMB_HD void gsoftmax_row(const float *x, float *y, int n)
{
    if (n <= 0) return;
    float m = x[0];
    for (int i = 1; i < n; i++)
        if (x[i] > m) m = x[i];
    struct gpairwise p;
    gpw_init(&p);
    for (int i = 0; i < n; i++) {
        float e = gexpf(x[i] - m);
        y[i] = e;
        gpw_push(&p, e);
    }
    float s = gpw_result(&p);
    for (int i = 0; i < n; i++) y[i] = y[i] / s;
}

/* ---------------------------------------------------------------- layernorm row */

/* Golden layernorm of one row x[0..n):
 *   mean = pairwise_sum(x) / n;  var = pairwise_sum((x_i - mean)^2) / n
 *   (d_i = x_i - mean; d_i*d_i rounded, then summed);
 *   rstd = 1 / sqrtf(var + eps);
 *   y_i = fmaf((x_i - mean) * rstd, w_i, b_i)   (w, b may be NULL: 1 and 0,
 *   then y_i = (x_i - mean) * rstd).
 * The division by n is an IEEE division by (float)n. y may alias x. */
PLUMB_HD void glayernorm_row(const float *x, const float *w, const float *b, float *y, int n,
                             float eps, float *mean_out, float *rstd_out)
{
    float mean = gsum(x, (size_t)n) / (float)n;
    struct gpairwise p;
    gpw_init(&p);
    for (int i = 0; i < n; i++) {
        float d = x[i] - mean;
        gpw_push(&p, d * d);
    }
    float var = gpw_result(&p) / (float)n;
    float rstd = 1.0f / sqrtf(var + eps);
    for (int i = 0; i < n; i++) {
        float h = (x[i] - mean) * rstd;
        y[i] = w ? fmaf(h, w[i], b ? b[i] : 0.0f) : (b ? h + b[i] : h);
    }
    if (mean_out) *mean_out = mean;
    if (rstd_out) *rstd_out = rstd;
}

#endif
