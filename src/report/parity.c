#include "report/parity.h"
#include "core/philox.h"
#include "core/stats.h"
#include <gsl/gsl_cdf.h>
#include <gsl/gsl_errno.h>
#include <pthread.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *parity_verdict_name(enum parity_verdict v)
{
    static const char *n[] = {"equivalent", "different", "undecided"};
    return v <= PARITY_UNDECIDED ? n[v] : "?";
}

void parity_opts_defaults(struct parity_opts *o)
{
    memset(o, 0, sizeof *o);
    o->alpha = 0.05;
    o->power = 0.8;
    o->conf = 0.95;
    o->perm_max_exact = 200000;
    o->perm_reshuffles = 20000;
    o->perm_seed = 1;
}

/* GSL's default error handler aborts the process (an input at the edge of
 * a special function's domain once took `plumb compare --metrics` down
 * with SIGABRT, found by tests/fuzz/fuzz_seeds_jsonl.c): off, once, and
 * every result is checked instead. */
static void gsl_quiet_once(void) { (void)gsl_set_error_handler_off(); }
void parity_gsl_quiet(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    (void)pthread_once(&once, gsl_quiet_once);
}

static int check_sample(const double *v, size_t n, const char *side, plumb_err *e)
{
    if (n < 2) return err_set(e, PLUMB_EUSAGE, "side %s has %zu seed%s: a spread needs at least 2", side, n, n == 1 ? "" : "s");
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return err_set(e, PLUMB_EUSAGE, "side %s, seed %zu: value %g is not a finite number", side, i + 1, v[i]);
    return PLUMB_OK;
}

/* Mean and sample variance, two-pass (the values of a metric over seeds are
 * close together: the one-pass formula would cancel). */
static void mean_var(const double *v, size_t n, double *m, double *var)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += v[i];
    double mu = s / (double)n, q = 0;
    for (size_t i = 0; i < n; i++) q += (v[i] - mu) * (v[i] - mu);
    *m = mu;
    *var = n > 1 ? q / (double)(n - 1) : NAN;
}

int parity_welch(const double *x, size_t n1, const double *y, size_t n2, double conf, struct welch_result *r,
                 plumb_err *e)
{
    memset(r, 0, sizeof *r);
    parity_gsl_quiet();
    if (check_sample(x, n1, "B", e) || check_sample(y, n2, "A", e)) return e->code;
    if (!(conf > 0 && conf < 1)) return err_set(e, PLUMB_EUSAGE, "confidence level %g is not in (0, 1)", conf);
    double v1, v2;
    mean_var(x, n1, &r->m1, &v1);
    mean_var(y, n2, &r->m2, &v2);
    r->n1 = n1, r->n2 = n2, r->conf = conf;
    r->s1 = sqrt(v1), r->s2 = sqrt(v2);
    r->diff = r->m1 - r->m2;
    double a = v1 / (double)n1, b = v2 / (double)n2;
    r->se = sqrt(a + b);
    if (!isfinite(r->se) || !isfinite(r->diff))
        return err_set(e, PLUMB_EUSAGE, "the values' spread (sd %g on side B, %g on side A) or difference overflows a "
                       "double: not a metric the t test can compare", r->s1, r->s2);
    if (r->se > 0) {
        /* Welch-Satterthwaite in shares of the total (a*a overflows or
         * underflows where the values are huge or tiny); the result lies
         * between min(n1, n2) - 1 and n1 + n2 - 2, and is held there */
        const double ra = a / (a + b), rb = b / (a + b);
        r->df = 1.0 / (ra * ra / (double)(n1 - 1) + rb * rb / (double)(n2 - 1));
        const double dlo = (double)((n1 < n2 ? n1 : n2) - 1), dhi = (double)(n1 + n2 - 2);
        r->df = r->df < dlo ? dlo : r->df > dhi ? dhi : r->df;
        r->t = r->diff / r->se;
        r->p = 2 * gsl_cdf_tdist_Q(fabs(r->t), r->df);
        if (r->p > 1) r->p = 1;
        double tq = gsl_cdf_tdist_Pinv(0.5 + conf / 2, r->df);
        if (!isfinite(r->p) || !isfinite(tq))
            return err_set(e, PLUMB_EUSAGE, "the t distribution at t = %g, df = %g could not be evaluated", r->t, r->df);
        r->ci_lo = r->diff - tq * r->se;
        r->ci_hi = r->diff + tq * r->se;
    } else {
        /* every seed gave the same value on each side: the difference is known exactly */
        r->df = (double)(n1 + n2 - 2);
        r->t = r->diff == 0 ? 0 : r->diff > 0 ? INFINITY : -INFINITY;
        r->p = r->diff == 0 ? 1 : 0;
        r->ci_lo = r->ci_hi = r->diff;
    }
    return PLUMB_OK;
}

int parity_tost(const struct welch_result *w, double low, double upp, double alpha, struct tost_result *r,
                plumb_err *e)
{
    memset(r, 0, sizeof *r);
    if (!(low < upp)) return err_set(e, PLUMB_EUSAGE, "equivalence margin (%g, %g): low must be below upp", low, upp);
    if (!(alpha > 0 && alpha < 0.5)) return err_set(e, PLUMB_EUSAGE, "alpha %g is not in (0, 0.5)", alpha);
    r->low = low, r->upp = upp;
    if (w->se > 0) {
        r->t_lo = (w->diff - low) / w->se;
        r->t_hi = (w->diff - upp) / w->se;
        parity_gsl_quiet();
        r->p_lo = gsl_cdf_tdist_Q(r->t_lo, w->df);
        r->p_hi = gsl_cdf_tdist_P(r->t_hi, w->df);
        double tq = gsl_cdf_tdist_Pinv(1 - alpha, w->df);
        if (!isfinite(r->p_lo) || !isfinite(r->p_hi) || !isfinite(tq))
            return err_set(e, PLUMB_EUSAGE, "equivalence test: the t distribution at df = %g could not be evaluated "
                           "(t %g, %g)", w->df, r->t_lo, r->t_hi);
        r->ci_lo = w->diff - tq * w->se;
        r->ci_hi = w->diff + tq * w->se;
    } else {
        int inside_lo = w->diff > low, inside_hi = w->diff < upp;
        r->t_lo = inside_lo ? INFINITY : -INFINITY;
        r->t_hi = inside_hi ? -INFINITY : INFINITY;
        r->p_lo = inside_lo ? 0 : 1;
        r->p_hi = inside_hi ? 0 : 1;
        r->ci_lo = r->ci_hi = w->diff;
    }
    r->p = r->p_lo > r->p_hi ? r->p_lo : r->p_hi;
    r->equivalent = r->p < alpha;
    return PLUMB_OK;
}

double parity_binomial(unsigned n, unsigned k)
{
    if (k > n) return 0;
    if (k > n - k) k = n - k;
    double c = 1;
    for (unsigned i = 1; i <= k; i++) c = c * (double)(n - k + i) / (double)i;
    return round(c) < 9007199254740992.0 ? round(c) : c;
}

/* |mean of the n1 chosen - mean of the rest| */
static double split_stat(double sel_sum, double total, size_t n1, size_t n2)
{
    return fabs(sel_sum / (double)n1 - (total - sel_sum) / (double)n2);
}

/* Uniform integer in [0, range) from the stream (Lemire's multiply-shift with
 * rejection: unbiased). *idx advances past the words used. */
static uint32_t stream_below(uint64_t seed, uint64_t shuffle, uint64_t *idx, uint32_t range)
{
    uint32_t a = (uint32_t)shuffle, b = (uint32_t)(shuffle >> 32);
    uint64_t m = (uint64_t)philox_u32_at(seed, RNG_STATS, a, b, (*idx)++) * range;
    uint32_t l = (uint32_t)m;
    if (l < range) {
        uint32_t t = (uint32_t)(-range) % range;
        while (l < t) {
            m = (uint64_t)philox_u32_at(seed, RNG_STATS, a, b, (*idx)++) * range;
            l = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

int parity_permutation(const double *x, size_t n1, const double *y, size_t n2, uint64_t max_exact,
                       uint64_t reshuffles, uint64_t seed, struct perm_result *r, plumb_err *e)
{
    memset(r, 0, sizeof *r);
    if (!n1 || !n2) return err_set(e, PLUMB_EUSAGE, "permutation test: a side has no values (%zu and %zu)", n1, n2);
    size_t N = n1 + n2;
    if (N > 0xffffffffu) return err_set(e, PLUMB_EUSAGE, "permutation test: %zu values is too many", N);
    double *pool = malloc(N * sizeof *pool);
    if (!pool) return err_set(e, PLUMB_ENOMEM, "permutation test: out of memory for %zu values", N);
    memcpy(pool, x, n1 * sizeof *pool);
    memcpy(pool + n1, y, n2 * sizeof *pool);
    double total = 0, sx = 0;
    for (size_t i = 0; i < N; i++) total += pool[i];
    for (size_t i = 0; i < n1; i++) sx += pool[i];
    double obs = split_stat(sx, total, n1, n2);
    double mx = 0, my = 0;
    for (size_t i = 0; i < n1; i++) mx += x[i];
    for (size_t i = 0; i < n2; i++) my += y[i];
    r->diff = mx / (double)n1 - my / (double)n2;
    /* splits equal to the observed one in exact arithmetic (its mirror, when
     * n1 = n2) differ from it in the last bits of the sums, whose rounding
     * error scales with the values, not with their difference: closer than
     * 1e-13 of the largest |value| counts as a tie (SciPy's permutation_test
     * uses max(1e-14, 1e-14 |observed|)) */
    double maxabs = 0;
    for (size_t i = 0; i < N; i++)
        if (fabs(pool[i]) > maxabs) maxabs = fabs(pool[i]);
    double tie = 1e-13 * maxabs + 1e-14 * fabs(obs);
    double C = parity_binomial((unsigned)N, (unsigned)n1);
    if (C <= (double)max_exact) {
        /* every combination of n1 positions, in lexicographic order */
        size_t *ix = malloc(n1 * sizeof *ix);
        if (!ix) {
            free(pool);
            return err_set(e, PLUMB_ENOMEM, "permutation test: out of memory");
        }
        for (size_t i = 0; i < n1; i++) ix[i] = i;
        uint64_t count = 0, tot = 0;
        for (;;) {
            double s = 0;
            for (size_t i = 0; i < n1; i++) s += pool[ix[i]];
            if (split_stat(s, total, n1, n2) >= obs - tie) count++;
            tot++;
            size_t i = n1;
            while (i > 0 && ix[i - 1] == N - n1 + (i - 1)) i--;
            if (i == 0) break;
            ix[i - 1]++;
            for (size_t j = i; j < n1; j++) ix[j] = ix[j - 1] + 1;
        }
        free(ix);
        r->exact = 1;
        r->count = count;
        r->total = tot;
        r->p = (double)count / (double)tot;
    } else {
        if (!reshuffles) {
            free(pool);
            return err_set(e, PLUMB_EUSAGE, "permutation test: %.0f splits is above the exact limit %llu and no "
                           "reshuffles were asked for", C, (unsigned long long)max_exact);
        }
        double *w = malloc(N * sizeof *w);
        if (!w) {
            free(pool);
            return err_set(e, PLUMB_ENOMEM, "permutation test: out of memory");
        }
        uint64_t count = 0;
        for (uint64_t b = 0; b < reshuffles; b++) {
            /* a fresh partial Fisher-Yates of the pooled values: the first n1 are side B */
            memcpy(w, pool, N * sizeof *w);
            uint64_t idx = 0;
            double s = 0;
            for (size_t i = 0; i < n1; i++) {
                size_t j = i + stream_below(seed, b, &idx, (uint32_t)(N - i));
                double t = w[i];
                w[i] = w[j];
                w[j] = t;
                s += w[i];
            }
            if (split_stat(s, total, n1, n2) >= obs - tie) count++;
        }
        free(w);
        r->exact = 0;
        r->count = count;
        r->total = reshuffles;
        r->p = (double)(1 + count) / (double)(1 + reshuffles);
    }
    free(pool);
    return PLUMB_OK;
}

double parity_seeds_needed(double s, double margin, double diff, double alpha, double power)
{
    if (!isfinite(s) || !isfinite(diff) || !(margin > 0)) return NAN;
    double beta = 1 - power, s2 = 2 * s * s, ad = fabs(diff);
    if (ad < margin) {
        double za = gsl_cdf_ugaussian_Pinv(1 - alpha);
        double z0 = za + gsl_cdf_ugaussian_Pinv(1 - beta / 2);
        double z1 = za + gsl_cdf_ugaussian_Pinv(1 - beta);
        double n0 = z0 * z0 * s2 / (margin * margin);
        double n1 = z1 * z1 * s2 / ((margin - ad) * (margin - ad));
        return n0 > n1 ? n0 : n1;
    }
    double z = gsl_cdf_ugaussian_Pinv(1 - alpha / 2) + gsl_cdf_ugaussian_Pinv(1 - beta);
    return z * z * s2 / (diff * diff);
}

int parity_compare(const double *x, size_t n1, const double *y, size_t n2, const struct parity_opts *o,
                   struct parity_result *r, plumb_err *e)
{
    memset(r, 0, sizeof *r);
    if (!(o->margin > 0) || !isfinite(o->margin))
        return err_set(e, PLUMB_EUSAGE, "equivalence margin %g is not a positive number", o->margin);
    if (!(o->power > 0 && o->power < 1)) return err_set(e, PLUMB_EUSAGE, "power %g is not in (0, 1)", o->power);
    int rc;
    if ((rc = parity_welch(x, n1, y, n2, o->conf, &r->welch, e))) return rc;
    if ((rc = parity_tost(&r->welch, -o->margin, o->margin, o->alpha, &r->tost, e))) return rc;
    if ((rc = parity_permutation(x, n1, y, n2, o->perm_max_exact, o->perm_reshuffles, o->perm_seed, &r->perm, e)))
        return rc;
    struct ks_result ks;
    if (ks_two_sample(x, n1, y, n2, &ks, e) == PLUMB_OK) {
        r->ks_d = ks.d;
        r->ks_p = ks.p;
    } else {
        err_clear(e);
        r->ks_d = r->ks_p = NAN;
    }
    const struct welch_result *w = &r->welch;
    r->margin = o->margin;
    r->s_pooled = sqrt((w->s1 * w->s1 + w->s2 * w->s2) / 2);
    r->gap_sd = r->s_pooled > 0 ? w->diff / r->s_pooled : w->diff == 0 ? 0 : w->diff > 0 ? INFINITY : -INFINITY;
    r->rel_diff = w->m2 != 0 ? w->diff / fabs(w->m2) : NAN;
    r->seeds_needed = parity_seeds_needed(r->s_pooled, o->margin, w->diff, o->alpha, o->power);
    size_t nmin = n1 < n2 ? n1 : n2;
    if (r->tost.equivalent) {
        r->verdict = PARITY_EQUIVALENT;
        snprintf(r->text, sizeof r->text, "equivalent");
    } else if (w->p < o->alpha && r->perm.p < o->alpha) {
        r->verdict = PARITY_DIFFERENT;
        snprintf(r->text, sizeof r->text, "different");
    } else {
        r->verdict = PARITY_UNDECIDED;
        double more = isfinite(r->seeds_needed) ? ceil(r->seeds_needed) - (double)nmin : 1;
        if (more < 1) more = 1; /* the estimate is approximate: at least one more */
        if (more > 1e9) more = 1e9;
        r->more_per_side = (long)more;
        snprintf(r->text, sizeof r->text, "undecided: about %ld more seed%s per side needed", r->more_per_side,
                 r->more_per_side == 1 ? "" : "s");
    }
    return PLUMB_OK;
}

int parity_parse_margin(const char *s, double ref, double *abs_out, int *relative, double *value, plumb_err *e)
{
    if (!s || !*s) return err_set(e, PLUMB_EUSAGE, "--margin: empty (expected e.g. 0.15%% or 0.001)");
    char *end;
    double v = strtod(s, &end);
    int rel = 0;
    if (end != s && *end == '%' && end[1] == '\0') rel = 1;
    else if (end == s || *end) return err_set(e, PLUMB_EUSAGE, "--margin: '%s' is not a number or a percentage (e.g. 0.15%% or 0.001)", s);
    if (!(v > 0) || !isfinite(v)) return err_set(e, PLUMB_EUSAGE, "--margin: '%s' must be positive", s);
    if (relative) *relative = rel;
    if (value) *value = rel ? v / 100 : v;
    if (abs_out) *abs_out = rel ? v / 100 * fabs(ref) : v;
    if (rel && abs_out && !(*abs_out > 0))
        return err_set(e, PLUMB_EUSAGE, "--margin %s: relative to a reference mean of %g gives no margin", s, ref);
    return PLUMB_OK;
}
