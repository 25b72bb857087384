/* KS p-values against published values and exact closed forms. */
#include "core/stats.h"
#include "test.h"
#include <stdlib.h>

/* Birnbaum & Tingey (1951), Ann. Math. Stat. 22: exact one-sided
 * P(D+_n >= c) = c * sum_{j=0}^{floor(n(1-c))} C(n,j) (1-c-j/n)^(n-j) (c+j/n)^(j-1).
 * For c > 1/2, D+ >= c and D- >= c exclude each other, so two-sided P = 2 * that. */
static double birnbaum_tingey(int n, double c)
{
    double s = 0;
    for (int j = 0; j <= (int)floor(n * (1 - c)); j++) {
        double binom = 1;
        for (int t = 0; t < j; t++) binom = binom * (n - t) / (t + 1);
        s += binom * pow(1 - c - (double)j / n, n - j) * pow(c + (double)j / n, j - 1);
    }
    return c * s;
}

TEST(stats_kolmogorov_limit_published)
{
    /* Asymptotic critical values of sqrt(n) D_n (Smirnov 1948, Ann. Math.
     * Stat. 19; tabulated in Massey 1951, JASA 46, Table 1):
     * alpha 0.10: 1.22385, 0.05: 1.35810, 0.01: 1.62762, 0.001: 1.94947 */
    CHECK_NEAR(ks_kolmogorov_q(1.22385), 0.10, 2e-6);
    CHECK_NEAR(ks_kolmogorov_q(1.35810), 0.05, 2e-6);
    CHECK_NEAR(ks_kolmogorov_q(1.62762), 0.01, 2e-6);
    CHECK_NEAR(ks_kolmogorov_q(1.94947), 0.001, 2e-7);
    /* both series branches agree where they meet */
    CHECK_NEAR(ks_kolmogorov_q(1.1799999), ks_kolmogorov_q(1.1800001), 1e-6);
    CHECK(ks_kolmogorov_q(0.1) == 1.0 && ks_kolmogorov_q(10) < 1e-80);
}

TEST(stats_ks_one_sample_exact_published)
{
    /* Miller (1956), JASA 51, "Table of percentage points of Kolmogorov
     * statistics": two-sided critical values of D_n at alpha = 0.05 and 0.01.
     * The exact P(D_n >= c) must come out at alpha to the table's 5 digits. */
    struct { int n; double c, alpha; } t[] = {
        {1, 0.97500, 0.05}, {2, 0.84189, 0.05}, {3, 0.70760, 0.05}, {4, 0.62394, 0.05},
        {5, 0.56328, 0.05}, {10, 0.40925, 0.05}, {20, 0.29408, 0.05}, {30, 0.24170, 0.05},
        {40, 0.21012, 0.05}, {5, 0.66853, 0.01}, {10, 0.48893, 0.01}, {20, 0.35241, 0.01},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        int ex;
        double p = ks_one_sample_p(t[i].n, t[i].c, &ex);
        CHECK_MSG(fabs(p - t[i].alpha) < 1.5e-5 * (t[i].alpha / 0.01), "n=%d c=%g p=%.8f want %g", t[i].n, t[i].c, p, t[i].alpha);
        CHECK(ex == 1);
    }
    /* Birnbaum-Tingey for c > 1/2: exact to rounding */
    for (int n = 2; n <= 60; n += 7)
        for (double c = 0.52; c < 1.0 - 1.0 / n; c += 0.061) {
            double p = ks_one_sample_p(n, c, NULL), want = 2 * birnbaum_tingey(n, c);
            CHECK_MSG(fabs(p - want) <= 1e-12 + 1e-9 * want, "n=%d c=%g: %.15g vs %.15g", n, c, p, want);
        }
    /* Closed forms (Durbin 1973): P(D_n < d) = n! (2d - 1/n)^n on [1/(2n), 1/n],
     * P(D_n >= d) = 2 (1-d)^n on [1 - 1/n, 1] -- through the matrix method */
    CHECK_NEAR(ks_mtw_cdf(3, 0.25), 1.0 / 36.0, 1e-14);
    CHECK_NEAR(ks_mtw_cdf(4, 0.2), 24 * pow(0.4 - 0.25, 4), 1e-14);
    CHECK_NEAR(1 - ks_mtw_cdf(5, 0.9), 2e-5, 1e-13);
    CHECK(ks_one_sample_p(10, 0.04, NULL) == 1.0);
}

TEST(stats_ks_one_sample_asymptotic_matches_exact)
{
    /* at n = 4000 the exact method still runs where p ~ 0.05 and 0.01;
     * the corrected limit law agrees to 2e-4 */
    for (double lam = 1.0; lam <= 1.9; lam += 0.15) {
        long n = 4000;
        double d = lam / sqrt((double)n);
        int ex;
        double pe = ks_one_sample_p(n, d, &ex);
        CHECK(ex == 1);
        double sn = sqrt((double)n), x = sn * d;
        double pa = ks_kolmogorov_q(x + 1 / (6 * sn) + (x - 1) / (4.0 * n));
        CHECK_MSG(fabs(pe - pa) < 2e-4, "lambda %g: exact %.6f asymptotic %.6f", lam, pe, pa);
    }
    int ex;
    double p = ks_one_sample_p(1000000, 1.3581 / 1000.0, &ex);
    CHECK(ex == 0);
    CHECK_NEAR(p, 0.05, 1e-3);
}

/* Gnedenko & Korolyuk (1951): for n = m, P(D >= k/n) =
 * 2 sum_{j>=1} (-1)^(j+1) C(2n, n - j k) / C(2n, n). */
static double gnedenko_korolyuk(int n, int k)
{
    double s = 0;
    for (int j = 1; n - j * k >= 0; j++) {
        /* C(2n, n-jk)/C(2n, n) = prod_{t=0}^{jk-1} (n - t) / (n + 1 + t) */
        double r = 1;
        for (int t = 0; t < j * k; t++) r *= (double)(n - t) / (double)(n + 1 + t);
        s += (j % 2 ? 1 : -1) * r;
    }
    return 2 * s;
}

/* brute force: all C(n+m, n) orderings of two samples */
static double brute_two_sample(int n, int m, double d)
{
    long total = 0, hit = 0;
    for (unsigned long mask = 0; mask < (1ul << (n + m)); mask++) {
        if (__builtin_popcountl(mask) != n) continue;
        total++;
        int i = 0, j = 0;
        double dm = 0;
        for (int s = 0; s < n + m; s++) {
            if (mask >> s & 1) i++; else j++;
            double v = fabs((double)i / n - (double)j / m);
            if (v > dm) dm = v;
        }
        if (dm >= d - 1e-12) hit++;
    }
    return (double)hit / (double)total;
}

TEST(stats_ks_two_sample_exact)
{
    for (int n = 5; n <= 60; n += 11)
        for (int k = 1; k <= n; k += 3) {
            double p = ks_two_sample_p(n, n, (double)k / n, NULL), want = gnedenko_korolyuk(n, k);
            CHECK_MSG(fabs(p - want) < 1e-12, "n=m=%d k=%d: %.15g vs %.15g", n, k, p, want);
        }
    int sizes[][2] = {{3, 5}, {5, 7}, {4, 9}, {6, 6}, {2, 11}};
    for (int s = 0; s < 5; s++) {
        int n = sizes[s][0], m = sizes[s][1];
        for (int a = 1; a <= n * m; a += 2) {
            double d = (double)a / (n * m);
            double p = ks_two_sample_p(n, m, d, NULL), want = brute_two_sample(n, m, d);
            CHECK_MSG(fabs(p - want) < 1e-12, "n=%d m=%d d=%g: %.15g vs %.15g", n, m, d, p, want);
        }
    }
    /* disjoint samples of 3 and 3: D = 1 with probability 2/C(6,3) = 0.1 */
    double x[3] = {1, 2, 3}, y[3] = {4, 5, 6};
    struct ks_result r;
    plumb_err e = {0};
    REQUIRE(ks_two_sample(x, 3, y, 3, &r, &e) == 0);
    CHECK(r.d == 1.0);
    CHECK_NEAR(r.p, 0.1, 1e-14);
    REQUIRE(ks_two_sample(x, 3, x, 3, &r, &e) == 0);
    CHECK(r.d == 0.0 && r.p == 1.0);
    /* large samples use n_e = nm/(n+m) */
    int ex;
    double d2 = 1.3581 / sqrt(2000.0);
    double p = ks_two_sample_p(3000, 6000, d2, &ex);
    CHECK(ex == 0);
    CHECK(p == ks_one_sample_p(2000, d2, NULL));
    CHECK(p > 0.045 && p < 0.05); /* finite-n: a little below the limit's 0.05 */
}

TEST(stats_ks_samples_and_histograms)
{
    /* a grid sample x_i = (i + 1/2)/n has D = 1/(2n), p = 1 */
    double g[100];
    for (int i = 0; i < 100; i++) g[i] = (i + 0.5) / 100;
    struct ks_result r;
    plumb_err e = {0};
    REQUIRE(ks_one_sample(g, 100, stats_cdf_uniform01, NULL, &r, &e) == 0);
    CHECK_NEAR(r.d, 0.005, 1e-15);
    CHECK(r.p == 1.0);
    /* squashing the grid into [0, 0.5) gives D = 1 - 99.5/200 = 0.5025: reject */
    for (int i = 0; i < 100; i++) g[i] *= 0.5;
    REQUIRE(ks_one_sample(g, 100, stats_cdf_uniform01, NULL, &r, &e) == 0);
    CHECK_NEAR(r.d, 0.5025, 1e-12);
    CHECK(r.p < 1e-12);
    /* normal quantiles by bisection make a normal grid */
    for (int i = 0; i < 100; i++) {
        double lo = -10, hi = 10, target = (i + 0.5) / 100;
        for (int it = 0; it < 80; it++) {
            double mid = (lo + hi) / 2;
            if (stats_cdf_normal01(mid, NULL) < target) lo = mid; else hi = mid;
        }
        g[i] = (lo + hi) / 2;
    }
    REQUIRE(ks_one_sample(g, 100, stats_cdf_normal01, NULL, &r, &e) == 0);
    CHECK(r.d < 0.0051 && r.p == 1.0);
    CHECK(ks_one_sample(g, 0, stats_cdf_normal01, NULL, &r, &e) == PLUMB_EUSAGE);
    struct histogram h;
    REQUIRE(hist_init(&h, 0, 1, 10, &e) == 0);
    float v[] = {0.05f, 0.15f, 0.15f, 0.99f, 1.0f, -0.1f, NAN};
    hist_add_floats(&h, v, 7);
    CHECK(h.counts[0] == 1 && h.counts[1] == 2 && h.counts[9] == 1);
    CHECK(h.under == 1 && h.over == 2 && h.total == 7);
    double ex[10];
    hist_expected(&h, stats_cdf_uniform01, NULL, ex);
    CHECK_NEAR(ex[3], 0.7, 1e-12);
    hist_free(&h);
    CHECK(hist_init(&h, 1, 0, 10, &e) == PLUMB_EUSAGE);
}
