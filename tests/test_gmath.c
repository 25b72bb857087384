/* Golden functions of core/gmath.h against libm's float64, over the whole
 * float range (a stride through all bit patterns) and at the edge cases. */
#include "core/gmath.h"
#include "test.h"
#include <float.h>
#include <stdlib.h>

/* error of y in units of the float32 ulp at the float64 reference r */
static double ulp_err(float y, double r)
{
    if (isnan(r)) return isnan(y) ? 0 : 1e30;
    if (isinf(r)) return (isinf(y) && (y > 0) == (r > 0)) ? 0 : 1e30;
    if (isnan(y) || isinf(y)) {
        /* reference beyond FLT_MAX rounds to inf */
        if (isinf(y) && fabs(r) >= (double)FLT_MAX * (1 + 0x1p-25)) return 0;
        return 1e30;
    }
    double a = fabs(r);
    int ex;
    frexp(a, &ex); /* a = m * 2^ex, m in [0.5,1) -> ulp = 2^(ex-24) */
    double ulp = ldexp(1.0, (ex - 24) < -149 ? -149 : ex - 24);
    if (a == 0) ulp = 0x1p-149;
    return fabs((double)y - r) / ulp;
}

struct sweep { double max_ulp; float worst_x; };

static void sweep(float (*f)(float), double (*ref)(double), double lo, double hi, uint32_t step,
                  double floor_abs, struct sweep *s)
{
    s->max_ulp = 0;
    s->worst_x = 0;
    for (uint64_t u = 0; u <= 0xffffffffull; u += step) {
        float x = bits_f32((uint32_t)u);
        if (isnan(x) || x < lo || x > hi) continue;
        double r = ref((double)x);
        if (fabs(r) < floor_abs) continue;
        double e = ulp_err(f(x), r);
        if (e > s->max_ulp) {
            s->max_ulp = e;
            s->worst_x = x;
        }
    }
}

static double ref_sinpi(double x)
{
    double n = rint(2 * x), f = x - n / 2; /* exact in double */
    int q = (int)fmod(n, 4.0);
    if (q < 0) q += 4;
    double s = sin(M_PI * f), c = cos(M_PI * f);
    return q == 0 ? s : q == 1 ? c : q == 2 ? -s : -c;
}
static double ref_cospi(double x)
{
    double n = rint(2 * x), f = x - n / 2;
    int q = (int)fmod(n, 4.0);
    if (q < 0) q += 4;
    double s = sin(M_PI * f), c = cos(M_PI * f);
    return q == 0 ? c : q == 1 ? -s : q == 2 ? -c : s;
}
/* 0.5*x*(1 + tanh(v)) written as x / (1 + exp(-2v)): no cancellation */
static double ref_gelu(double x)
{
    return x / (1 + exp(-2 * sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

TEST(gmath_exp_accuracy)
{
    struct sweep s;
    sweep(gexpf, exp, -1e30, 1e30, 4099, 0, &s);
    printf("  gexpf max %.3f ulp at %a\n", s.max_ulp, s.worst_x);
    CHECK_MSG(s.max_ulp <= 2.0, "%.3f ulp at %a", s.max_ulp, s.worst_x);
    /* a dense sweep of the interesting range */
    sweep(gexpf, exp, -104, 89, 61, 0, &s);
    CHECK_MSG(s.max_ulp <= 2.0, "%.3f ulp at %a", s.max_ulp, s.worst_x);
    CHECK(gexpf(0.0f) == 1.0f && gexpf(-0.0f) == 1.0f);
    CHECK(isinf(gexpf(INFINITY)) && gexpf(-INFINITY) == 0.0f && isnan(gexpf(NAN)));
    CHECK(isinf(gexpf(88.8f)) && gexpf(88.7f) < INFINITY && gexpf(88.7f) > 3e38f);
    CHECK(gexpf(-103.9f) > 0.0f && gexpf(-103.9f) < 0x1p-148f && gexpf(-110.0f) == 0.0f);
    CHECK(gexpf(0x1p-149f) == 1.0f);
}

TEST(gmath_log_accuracy)
{
    struct sweep s;
    sweep(glogf, log, 0x1p-149, 1e39, 4099, 0, &s);
    printf("  glogf max %.3f ulp at %a\n", s.max_ulp, s.worst_x);
    CHECK_MSG(s.max_ulp <= 2.0, "%.3f ulp at %a", s.max_ulp, s.worst_x);
    sweep(glogf, log, 0.5, 2.0, 509, 0, &s);
    CHECK_MSG(s.max_ulp <= 2.0, "near 1: %.3f ulp at %a", s.max_ulp, s.worst_x);
    CHECK(glogf(1.0f) == 0.0f);
    CHECK(isinf(glogf(0.0f)) && glogf(0.0f) < 0 && isinf(glogf(-0.0f)) && glogf(-0.0f) < 0);
    CHECK(isnan(glogf(-1.0f)) && isnan(glogf(-INFINITY)) && isnan(glogf(NAN)));
    CHECK(isinf(glogf(INFINITY)) && glogf(INFINITY) > 0);
    CHECK_NEAR(glogf(0x1p-149f), log(0x1p-149), 1e-5);
}

TEST(gmath_sincospi_accuracy)
{
    struct sweep s;
    sweep(gsinpif, ref_sinpi, -1e30, 1e30, 4099, 0, &s);
    printf("  gsinpif max %.3f ulp at %a\n", s.max_ulp, s.worst_x);
    CHECK_MSG(s.max_ulp <= 2.0, "sinpi %.3f ulp at %a", s.max_ulp, s.worst_x);
    sweep(gcospif, ref_cospi, -1e30, 1e30, 4099, 0, &s);
    printf("  gcospif max %.3f ulp at %a\n", s.max_ulp, s.worst_x);
    CHECK_MSG(s.max_ulp <= 2.0, "cospi %.3f ulp at %a", s.max_ulp, s.worst_x);
    sweep(gcospif, ref_cospi, 0, 2, 509, 0, &s); /* the Box-Muller range */
    CHECK_MSG(s.max_ulp <= 2.0, "cospi [0,2) %.3f ulp at %a", s.max_ulp, s.worst_x);
    CHECK(gsinpif(1.0f) == 0.0f && gcospif(1.0f) == -1.0f && gcospif(0.5f) == 0.0f);
    CHECK(gsinpif(0.5f) == 1.0f && gcospif(0.0f) == 1.0f && fabs(gsinpif(0.25f) - sqrt(0.5)) < 1e-7);
    CHECK(isnan(gsinpif(INFINITY)) && isnan(gcospif(-INFINITY)) && isnan(gsinpif(NAN)));
    CHECK(gcospif(8388609.0f) == -1.0f && gcospif(16777216.0f) == 1.0f);
}

TEST(gmath_tanh_erf_gelu_accuracy)
{
    struct sweep s;
    sweep(gtanhf, tanh, -1e30, 1e30, 4099, 0, &s);
    printf("  gtanhf max %.3f ulp at %a\n", s.max_ulp, s.worst_x);
    CHECK_MSG(s.max_ulp <= 3.0, "tanh %.3f ulp at %a", s.max_ulp, s.worst_x);
    sweep(gtanhf, tanh, -2, 2, 509, 0, &s);
    CHECK_MSG(s.max_ulp <= 3.0, "tanh [-2,2] %.3f ulp at %a", s.max_ulp, s.worst_x);
    sweep(gerff, erf, -1e30, 1e30, 4099, 0, &s);
    printf("  gerff max %.3f ulp at %a\n", s.max_ulp, s.worst_x);
    CHECK_MSG(s.max_ulp <= 3.0, "erf %.3f ulp at %a", s.max_ulp, s.worst_x);
    sweep(gerff, erf, -5, 5, 509, 0, &s);
    CHECK_MSG(s.max_ulp <= 3.0, "erf [-5,5] %.3f ulp at %a", s.max_ulp, s.worst_x);
    /* gelu: the rounding of the inner argument w costs |z| * eps relative
     * (the function's own condition number in the negative tail), so the
     * bound is 4 ulp for x >= -1 and 4 + 3|z| ulp below */
    sweep(ggeluf, ref_gelu, -1, 1e30, 1021, 0x1p-100, &s);
    printf("  ggeluf [-1,inf) max %.3f ulp at %a\n", s.max_ulp, s.worst_x);
    CHECK_MSG(s.max_ulp <= 4.0, "gelu %.3f ulp at %a", s.max_ulp, s.worst_x);
    double worst = 0;
    for (float x = -40.0f; x < -1.0f; x += 0.00137f) {
        double r = ref_gelu(x), z = 1.5957691216 * fabs(x + 0.044715 * x * x * x);
        if (fabs(r) < 0x1p-100) continue;
        double e = ulp_err(ggeluf(x), r) / (4 + 3 * z);
        if (e > worst) worst = e;
    }
    CHECK_MSG(worst <= 1.0, "gelu tail: %.3f of the bound 4 + 3|z| ulp", worst);
    CHECK(gtanhf(-0.0f) == 0.0f && signbit(gtanhf(-0.0f)) && gtanhf(INFINITY) == 1.0f && gtanhf(-INFINITY) == -1.0f);
    CHECK(gerff(INFINITY) == 1.0f && gerff(-INFINITY) == -1.0f && isnan(gerff(NAN)) && isnan(gtanhf(NAN)));
    CHECK(ggeluf(0.0f) == 0.0f && ggeluf(INFINITY) == INFINITY && isnan(ggeluf(NAN)));
    CHECK(ggeluf(-60.0f) == 0.0f);
    CHECK(gerff(0x1p-140f) != 0.0f); /* denormals are kept */
    /* the gelu gradient matches a central finite difference in float64 */
    for (double x = -6; x <= 6; x += 0.37) {
        double h = 1e-5, fd = (ref_gelu(x + h) - ref_gelu(x - h)) / (2 * h);
        CHECK_NEAR(ggelu_gradf((float)x), fd, 2e-5);
    }
}

static double pairwise_ref_level(const float *x, size_t n)
{
    /* the level-by-level definition, literally: float adds, carried tails */
    float *buf = malloc(n * sizeof *buf);
    memcpy(buf, x, n * sizeof *buf);
    size_t len = n;
    while (len > 1) {
        size_t h = len / 2;
        for (size_t i = 0; i < h; i++) buf[i] = buf[2 * i] + buf[2 * i + 1];
        if (len & 1) buf[h] = buf[len - 1];
        len = (len + 1) / 2;
    }
    float r = n ? buf[0] : 0.0f;
    free(buf);
    return r;
}

TEST(gmath_pairwise_sum_definition)
{
    /* gsum equals the level-by-level tree for every n up to 300 and some big n,
     * and equals a chunked evaluation (aligned 2^B chunks, then the chunk sums)
     * and -0.0f padding to a power of two */
    size_t N = 70001;
    float *x = malloc(N * sizeof *x), *pad = malloc(131072 * sizeof *pad);
    uint32_t s = 12345;
    for (size_t i = 0; i < N; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = ((float)(s >> 8) * 0x1p-24f - 0.5f) * (float)(1 + (i % 7) * 1000);
    }
    int bad = 0;
    for (size_t n = 0; n < 300 && !bad; n++) {
        float a = gsum(x, n), b = (float)pairwise_ref_level(x, n);
        if (f32_bits(a) != f32_bits(b)) bad = 1, printf("  n=%zu %a vs %a\n", n, a, b);
    }
    CHECK(!bad);
    size_t big[] = {1024, 4097, 65536, 70001};
    for (int t = 0; t < 4; t++) {
        size_t n = big[t];
        float a = gsum(x, n), b = (float)pairwise_ref_level(x, n);
        CHECK_MSG(f32_bits(a) == f32_bits(b), "n=%zu", n);
        /* chunked: 256-element aligned chunks, then the tree of chunk sums */
        float cs[512];
        size_t nc = (n + 255) / 256;
        for (size_t c = 0; c < nc; c++) cs[c] = gsum(x + c * 256, (c + 1) * 256 <= n ? 256 : n - c * 256);
        CHECK(f32_bits(gsum(cs, nc)) == f32_bits(a));
        /* -0.0f padding */
        size_t p2 = 1;
        while (p2 < n) p2 *= 2;
        memcpy(pad, x, n * sizeof *x);
        for (size_t i = n; i < p2; i++) pad[i] = -0.0f;
        CHECK(f32_bits(gsum(pad, p2)) == f32_bits(a));
        double ref = 0;
        for (size_t i = 0; i < n; i++) ref += x[i];
        double mag = 0;
        for (size_t i = 0; i < n; i++) mag += fabs(x[i]);
        CHECK(fabs(a - ref) <= 20 * 0x1p-24 * mag); /* log2(n) * eps * sum|x| bound */
    }
    CHECK(gsum(x, 0) == 0.0f);
    free(x);
    free(pad);
}

TEST(gmath_softmax_layernorm_rows)
{
    float x[37], y[37], w[37], b[37];
    for (int i = 0; i < 37; i++) {
        x[i] = (float)sin(i * 1.3) * 20.0f;
        w[i] = 1.0f + 0.01f * (float)i;
        b[i] = 0.1f * (float)(i % 5);
    }
    gsoftmax_row(x, y, 37);
    /* the float difference x - max is part of the definition (its rounding
     * costs |x - max| * eps, the function's conditioning); compare with
     * float64 from there on */
    float m = x[0];
    for (int i = 1; i < 37; i++) m = x[i] > m ? x[i] : m;
    double s = 0;
    for (int i = 0; i < 37; i++) s += exp((double)(x[i] - m));
    for (int i = 0; i < 37; i++) {
        double r = exp((double)(x[i] - m)) / s;
        CHECK_NEAR(y[i], r, 5e-7 * r);
    }
    float mean, rstd;
    glayernorm_row(x, w, b, y, 37, 1e-5f, &mean, &rstd);
    double dm = 0, dv = 0;
    for (int i = 0; i < 37; i++) dm += x[i];
    dm /= 37;
    for (int i = 0; i < 37; i++) dv += (x[i] - dm) * (x[i] - dm);
    dv /= 37;
    double dr = 1 / sqrt(dv + 1e-5);
    CHECK_NEAR(mean, dm, 1e-6 * 20);
    CHECK_NEAR(rstd, dr, 1e-6 * dr);
    for (int i = 0; i < 37; i++) CHECK_NEAR(y[i], (x[i] - dm) * dr * w[i] + b[i], 2e-6 * (1 + fabs(y[i])));
    /* gemm element: fmaf in k order */
    float a[3] = {1e8f, 1.0f, -1e8f}, bb[3] = {1.0f, 1.0f, 1.0f};
    CHECK(ggemm_dot(a, 1, bb, 1, 3) == 0.0f); /* (1e8 + 1) rounds to 1e8, then - 1e8 */
    float a2[3] = {1e8f, -1e8f, 1.0f};
    CHECK(ggemm_dot(a2, 1, bb, 1, 3) == 1.0f);
}
