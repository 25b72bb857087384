/* Training parity statistics (docs/COMPARE.md): is a metric from two sets of
 * seeds the same, different, or not yet known?
 *
 * Samples are per-seed final metrics, x from side B and y from side A, so
 * every difference is B - A (mean(x) - mean(y), as scipy.stats.ttest_ind(x, y)
 * and statsmodels' ttost_ind(x, y, ...) orient it). Standard deviations are
 * sample ones (ddof = 1). The t and normal distributions come from GSL
 * (gsl_cdf_tdist_P/Q, gsl_cdf_tdist_Pinv, gsl_cdf_ugaussian_Pinv).
 *
 *   Welch:  se = sqrt(s1^2/n1 + s2^2/n2), t = (m1 - m2) / se,
 *           df = se^4 / ((s1^2/n1)^2/(n1-1) + (s2^2/n2)^2/(n2-1)) (Welch-Satterthwaite),
 *           p = 2 P(T > |t|), CI at level c: diff +- t_{(1+c)/2, df} se.
 *   TOST:   equivalence within (low, upp): t_lo = (diff - low)/se, t_hi = (diff - upp)/se,
 *           p = max(P(T > t_lo), P(T < t_hi)); equivalent when p < alpha, i.e. when the
 *           (1 - 2 alpha) CI of the difference lies inside the margin.
 *   Permutation: |mean(x*) - mean(y*)| over relabellings of the pooled sample;
 *           exact (all C(n1+n2, n1) splits, p = #{|d*| >= |d|} / C, the observed split
 *           counted) when C <= max_exact, else B reshuffles drawn from Philox
 *           (core/philox.h, purpose RNG_STATS), p = (1 + #{|d*| >= |d|}) / (1 + B).
 *   Seeds needed per side for a TOST at power 1 - beta, s the pooled std
 *           sqrt((s1^2 + s2^2)/2), d the margin, delta the observed difference:
 *             |delta| < d: max(2 (z_{1-a} + z_{1-b/2})^2 s^2 / d^2,
 *                              2 (z_{1-a} + z_{1-b})^2 s^2 / (d - |delta|)^2)
 *               (Chow, Shao & Wang, "Sample Size Calculations in Clinical Research",
 *               3.2: the first term is the true-difference-0 case, the second the
 *               case of a true difference delta; the larger is used);
 *             otherwise, to show the difference by a two-sided Welch test:
 *               2 (z_{1-a/2} + z_{1-b})^2 s^2 / delta^2.
 *   Verdict: equivalent when the TOST passes; different when it does not and both the
 *           Welch test and the permutation test reject equal means at alpha; otherwise
 *           undecided, with the seeds-needed estimate minus the seeds there are. */
#ifndef PLUMB_PARITY_H
#define PLUMB_PARITY_H
#include <stddef.h>
#include <stdint.h>
#include "core/err.h"

struct welch_result {
    size_t n1, n2;
    double m1, m2, s1, s2; /* means, sample standard deviations */
    double diff;           /* m1 - m2 */
    double se, t, df, p;   /* p two-sided */
    double conf, ci_lo, ci_hi;
};

/* GSL's abort-on-error handler off, once for the process (every GSL result
 * here is checked instead); called by the functions below, and by any other
 * GSL user. */
void parity_gsl_quiet(void);

/* Welch's t-test of x[0..n1) against y[0..n2); conf is the CI level (0.95).
 * n1, n2 >= 2 and finite values, else PLUMB_EUSAGE. Zero spread on both
 * sides: t = 0 (p = 1) when the means are equal, +-inf (p = 0) otherwise. */
int parity_welch(const double *x, size_t n1, const double *y, size_t n2, double conf,
                 struct welch_result *r, plumb_err *e);

struct tost_result {
    double low, upp;       /* the margin on the difference */
    double t_lo, t_hi, p_lo, p_hi, p;
    double ci_lo, ci_hi;   /* the (1 - 2 alpha) CI */
    int equivalent;        /* p < alpha */
};

/* TOST on a Welch result; low < upp. */
int parity_tost(const struct welch_result *w, double low, double upp, double alpha, struct tost_result *r,
                plumb_err *e);

struct perm_result {
    double diff;           /* mean(x) - mean(y) */
    double p;
    uint64_t count;        /* splits with |d*| >= |d| (exact: the observed one included) */
    uint64_t total;        /* splits enumerated, or reshuffles drawn */
    int exact;
};

/* Two-sided permutation test of the difference in means. max_exact: the most
 * splits enumerated (C(n1+n2, n1) above it: `reshuffles` random ones from
 * Philox stream seed). */
int parity_permutation(const double *x, size_t n1, const double *y, size_t n2, uint64_t max_exact,
                       uint64_t reshuffles, uint64_t seed, struct perm_result *r, plumb_err *e);

/* C(n, k) as a double (exact below 2^53). */
double parity_binomial(unsigned n, unsigned k);

/* Seeds needed per side (a real number; see above). margin > 0. NaN when s is. */
double parity_seeds_needed(double s_pooled, double margin, double diff, double alpha, double power);

enum parity_verdict { PARITY_EQUIVALENT = 0, PARITY_DIFFERENT = 1, PARITY_UNDECIDED = 2 };
const char *parity_verdict_name(enum parity_verdict v);

struct parity_opts {
    double alpha;          /* 0.05 */
    double power;          /* 0.8, for the seeds-needed estimate */
    double conf;           /* 0.95, the reported CI of the difference */
    double margin;         /* absolute half-width d of the equivalence margin (> 0) */
    uint64_t perm_max_exact;  /* 200000 */
    uint64_t perm_reshuffles; /* 20000 */
    uint64_t perm_seed;
};
void parity_opts_defaults(struct parity_opts *o); /* margin left 0: the caller sets it */

struct parity_result {
    struct welch_result welch;
    struct tost_result tost;
    struct perm_result perm;
    double ks_d, ks_p;     /* two-sample KS of the seed distributions (shown, not in the verdict) */
    double margin;
    double s_pooled;
    double gap_sd;         /* diff / s_pooled (inf when the spread is 0 and the means differ) */
    double rel_diff;       /* diff / |m2| (B relative to A) */
    double seeds_needed;   /* per side, from the observed spread */
    long more_per_side;    /* undecided: ceil(seeds_needed) - min(n1, n2), at least 1; else 0 */
    enum parity_verdict verdict;
    char text[160];        /* "equivalent", "different", "undecided: about N more seeds per side needed" */
};

/* The whole comparison of one metric: x from B, y from A. */
int parity_compare(const double *x, size_t n1, const double *y, size_t n2, const struct parity_opts *o,
                   struct parity_result *r, plumb_err *e);

/* A margin given as text: "0.15%" (relative to |ref|) or "0.001" (absolute).
 * *abs gets the half-width; PLUMB_EUSAGE naming the text on anything else. */
int parity_parse_margin(const char *s, double ref, double *abs, int *relative, double *value, plumb_err *e);

#endif
