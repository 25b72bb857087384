/* Statistics for the acceptance checks: Kolmogorov-Smirnov tests with
 * accurate p-values, and histograms.
 *
 * One-sample KS: D_n = sup |F_n(x) - F(x)|. P(D_n >= d) is computed
 *   exactly by the Marsaglia-Tsang-Wang (2003) matrix method (J. Stat.
 *   Software 8(18)) when n <= 100000 and the matrix order 2*ceil(n d)-1 is
 *   at most KS_MTW_MAX_ORDER; otherwise from Kolmogorov's limit law with the
 *   finite-n correction lambda = sqrt(n) d + 1/(6 sqrt(n)) + (sqrt(n) d - 1)/(4n)
 *   (Vrbik 2018), accurate to about 1e-4 absolute there.
 * Two-sample KS: D = sup |F_n(x) - G_m(x)|. P(D >= d) exactly by counting
 *   lattice paths (Hodges 1957) when n*m <= KS2_EXACT_MAX; otherwise the
 *   one-sample distribution at the effective n_e = round(n m / (n + m)).
 * All p-values are P(D >= d_observed) under the null hypothesis. */
#ifndef PLUMB_STATS_H
#define PLUMB_STATS_H
#include <stddef.h>
#include <stdint.h>
#include "core/err.h"

#define KS_MTW_MAX_ORDER 301
#define KS2_EXACT_MAX 4000000.0

struct ks_result {
    double d;      /* the statistic */
    double p;      /* P(D >= d) under H0 */
    size_t n, m;   /* sample sizes (m = 0 for one-sample) */
    int exact;     /* 1 when p came from an exact method */
};

/* Kolmogorov's limit: Q(lambda) = P(sqrt(n) D_n >= lambda) as n -> inf
 *   = 2 sum_{k>=1} (-1)^(k-1) exp(-2 k^2 lambda^2). */
double ks_kolmogorov_q(double lambda);
/* P(D_n < d), exact (Marsaglia-Tsang-Wang); n >= 1. */
double ks_mtw_cdf(long n, double d);
/* P(D_n >= d): exact where affordable (see above), else asymptotic.
 * *exact (may be NULL) says which. */
double ks_one_sample_p(long n, double d, int *exact);
/* P(D >= d) for samples of sizes n and m. */
double ks_two_sample_p(long n, long m, double d, int *exact);

typedef double (*stats_cdf_fn)(double x, const void *arg);
double stats_cdf_uniform01(double x, const void *arg); /* U(0,1) */
double stats_cdf_normal01(double x, const void *arg);  /* N(0,1) */

/* One-sample KS of x[0..n) against cdf; x is not modified. */
int ks_one_sample(const double *x, size_t n, stats_cdf_fn cdf, const void *arg,
                  struct ks_result *r, plumb_err *e);
/* Two-sample KS of x[0..n) and y[0..m). */
int ks_two_sample(const double *x, size_t n, const double *y, size_t m, struct ks_result *r,
                  plumb_err *e);

/* Histogram with `bins` equal bins on [lo, hi); values outside (and NaN)
 * are counted in *under / *over (NaN counts as over). */
struct histogram {
    double lo, hi;
    int bins;
    uint64_t *counts;
    uint64_t under, over, total;
};
int hist_init(struct histogram *h, double lo, double hi, int bins, plumb_err *e);
void hist_add(struct histogram *h, double v);
void hist_add_floats(struct histogram *h, const float *v, size_t n);
/* expected[i] = total * (cdf(edge_{i+1}) - cdf(edge_i)) */
void hist_expected(const struct histogram *h, stats_cdf_fn cdf, const void *arg, double *expected);
/* Pearson chi-square of counts vs expected over the bins (bins with
 * expected < 5 pooled into the neighbour); *dof gets the degrees of freedom. */
double hist_chi2(const struct histogram *h, const double *expected, int *dof);
void hist_free(struct histogram *h);

#endif
