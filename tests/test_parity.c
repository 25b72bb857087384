/* report/parity.c against SciPy and statsmodels (tests/parity_fixtures.h,
 * written by tests/tools/parity_fixtures.py), and the verdict's behaviour. */
#include "core/philox.h"
#include "parity_fixtures.h"
#include "report/parity.h"
#include "test.h"
#include <stdlib.h>

#define NFIX (sizeof parity_fixtures / sizeof *parity_fixtures)

/* |a - b| <= rel * |b| + abs */
static int close_to(double a, double b, double rel, double abs_tol)
{
    if (isinf(a) || isinf(b)) return a == b;
    return fabs(a - b) <= rel * fabs(b) + abs_tol;
}

#define CHECK_CLOSE(what, got, want, rel, abs_tol)                                                       \
    CHECK_MSG(close_to((got), (want), (rel), (abs_tol)), "%s %s: got %.17g, SciPy/statsmodels %.17g", f->name, \
              what, (double)(got), (double)(want))

TEST(parity_welch_matches_scipy)
{
    for (size_t i = 0; i < NFIX; i++) {
        const struct parity_fixture *f = &parity_fixtures[i];
        struct welch_result w;
        plumb_err e = {0};
        REQUIRE(parity_welch(f->x, (size_t)f->n1, f->y, (size_t)f->n2, 0.95, &w, &e) == PLUMB_OK);
        CHECK_CLOSE("diff", w.diff, f->diff, 1e-9, 1e-15);
        CHECK_CLOSE("se", w.se, f->se, 1e-9, 0);
        CHECK_CLOSE("t", w.t, f->t, 1e-8, 1e-12);
        CHECK_CLOSE("df", w.df, f->df, 1e-9, 0);
        CHECK_CLOSE("p", w.p, f->p, 1e-7, 1e-300);
        CHECK_CLOSE("ci_lo", w.ci_lo, f->ci_lo, 1e-8, 1e-15);
        CHECK_CLOSE("ci_hi", w.ci_hi, f->ci_hi, 1e-8, 1e-15);
    }
}

/* Values at the edge of double precision: the Welch degrees of freedom
 * stay within [min(n1, n2) - 1, n1 + n2 - 2] (a*a of the variances once
 * overflowed, and GSL's default handler aborted the process inside
 * gsl_cdf_tdist_Q: found by fuzz_seeds_jsonl), and a spread that itself
 * overflows is refused with a message, never an abort. */
TEST(parity_welch_extreme_values_never_abort)
{
    const double x[] = {18000, 1.1e113}, y[] = {0.7598, 0.7601};
    struct welch_result w;
    plumb_err e = {0};
    REQUIRE(parity_welch(x, 2, y, 2, 0.95, &w, &e) == PLUMB_OK);
    CHECK_MSG(w.df >= 1 && w.df <= 2 && isfinite(w.p) && w.p >= 0 && w.p <= 1, "df %g p %g", w.df, w.p);
    struct tost_result t;
    REQUIRE(parity_tost(&w, -0.01, 0.01, 0.05, &t, &e) == PLUMB_OK);
    CHECK(!t.equivalent);
    const double tiny[] = {1e-300, 3e-300, 2e-300}, tiny2[] = {5e-301, 1e-300, 2e-300};
    REQUIRE(parity_welch(tiny, 3, tiny2, 3, 0.95, &w, &e) == PLUMB_OK); /* a*a underflows to 0 */
    CHECK_MSG(w.df >= 2 && w.df <= 4 && isfinite(w.p), "tiny: df %g p %g", w.df, w.p);
    const double huge[] = {1e300, -1e300};
    CHECK(parity_welch(huge, 2, y, 2, 0.95, &w, &e) == PLUMB_EUSAGE && strstr(e.msg, "overflows"));
}

TEST(parity_tost_matches_statsmodels)
{
    for (size_t i = 0; i < NFIX; i++) {
        const struct parity_fixture *f = &parity_fixtures[i];
        struct welch_result w;
        struct tost_result t;
        plumb_err e = {0};
        REQUIRE(parity_welch(f->x, (size_t)f->n1, f->y, (size_t)f->n2, 0.95, &w, &e) == PLUMB_OK);
        REQUIRE(parity_tost(&w, -f->margin, f->margin, PARITY_FIXTURE_ALPHA, &t, &e) == PLUMB_OK);
        CHECK_CLOSE("tost t_lo", t.t_lo, f->tost_t_lo, 1e-8, 1e-12);
        CHECK_CLOSE("tost t_hi", t.t_hi, f->tost_t_hi, 1e-8, 1e-12);
        CHECK_CLOSE("tost p_lo", t.p_lo, f->tost_p_lo, 1e-7, 1e-300);
        CHECK_CLOSE("tost p_hi", t.p_hi, f->tost_p_hi, 1e-7, 1e-300);
        CHECK_CLOSE("tost p", t.p, f->tost_p, 1e-7, 1e-300);
        CHECK_CLOSE("tost ci_lo", t.ci_lo, f->tost_ci_lo, 1e-8, 1e-15);
        CHECK_CLOSE("tost ci_hi", t.ci_hi, f->tost_ci_hi, 1e-8, 1e-15);
        /* the two readings of the rule agree: p < alpha iff the 90% CI lies inside the margin */
        int inside = t.ci_lo > -f->margin && t.ci_hi < f->margin;
        CHECK_MSG(t.equivalent == inside, "%s: TOST p %.3g but 90%% CI [%.6g, %.6g] vs margin %.6g", f->name, t.p,
                  t.ci_lo, t.ci_hi, f->margin);
    }
}

TEST(parity_permutation_exact_matches_scipy)
{
    for (size_t i = 0; i < NFIX; i++) {
        const struct parity_fixture *f = &parity_fixtures[i];
        double C = parity_binomial((unsigned)(f->n1 + f->n2), (unsigned)f->n1);
        if (C > 200000) continue;
        struct perm_result p;
        plumb_err e = {0};
        REQUIRE(parity_permutation(f->x, (size_t)f->n1, f->y, (size_t)f->n2, 200000, 0, 1, &p, &e) == PLUMB_OK);
        CHECK(p.exact);
        CHECK_MSG(p.total == (uint64_t)C, "%s: %llu splits, expected C = %.0f", f->name, (unsigned long long)p.total, C);
        /* exact: the same count of splits, so the same p to rounding */
        CHECK_CLOSE("permutation p", p.p, f->perm_p, 1e-12, 0);
        /* the difference it reports: mean(x) - mean(y) */
        double mx = 0, my = 0;
        for (int k = 0; k < f->n1; k++) mx += f->x[k];
        for (int k = 0; k < f->n2; k++) my += f->y[k];
        CHECK_CLOSE("permutation diff", p.diff, mx / f->n1 - my / f->n2, 1e-12, 1e-15);
    }
}

TEST(parity_permutation_reshuffled_near_exact)
{
    /* above the exact limit: B reshuffles from Philox; p within 4.5 binomial
     * standard errors of SciPy's exact p (all C(22, 11) = 705432 splits) */
    for (size_t i = 0; i < NFIX; i++) {
        const struct parity_fixture *f = &parity_fixtures[i];
        if (parity_binomial((unsigned)(f->n1 + f->n2), (unsigned)f->n1) <= 200000 && strcmp(f->name, "exact_9v9"))
            continue;
        const uint64_t B = 20000;
        struct perm_result p, q;
        plumb_err e = {0};
        /* exact_9v9 forced through the random path by a low exact limit */
        REQUIRE(parity_permutation(f->x, (size_t)f->n1, f->y, (size_t)f->n2, 1000, B, 7, &p, &e) == PLUMB_OK);
        CHECK(!p.exact && p.total == B);
        double sd = sqrt(f->perm_p * (1 - f->perm_p) / (double)B);
        CHECK_MSG(fabs(p.p - f->perm_p) <= 4.5 * sd + 1.0 / B, "%s: reshuffled p %.5f, exact %.5f (sd %.5f)", f->name,
                  p.p, f->perm_p, sd);
        /* a pure function of the seed */
        REQUIRE(parity_permutation(f->x, (size_t)f->n1, f->y, (size_t)f->n2, 1000, B, 7, &q, &e) == PLUMB_OK);
        CHECK(q.count == p.count);
    }
}

TEST(parity_ks_and_seeds_needed_match_scipy)
{
    for (size_t i = 0; i < NFIX; i++) {
        const struct parity_fixture *f = &parity_fixtures[i];
        struct parity_opts o;
        parity_opts_defaults(&o);
        o.margin = f->margin;
        struct parity_result r;
        plumb_err e = {0};
        REQUIRE(parity_compare(f->x, (size_t)f->n1, f->y, (size_t)f->n2, &o, &r, &e) == PLUMB_OK);
        CHECK_CLOSE("ks d", r.ks_d, f->ks_d, 1e-12, 1e-15);
        CHECK_CLOSE("ks p", r.ks_p, f->ks_p, 1e-6, 1e-12);
        CHECK_CLOSE("s_pooled", r.s_pooled, f->s_pooled, 1e-9, 0);
        CHECK_CLOSE("seeds needed", r.seeds_needed, f->needed, 1e-9, 0);
        CHECK_CLOSE("gap_sd", r.gap_sd, f->diff / f->s_pooled, 1e-9, 1e-12);
    }
}

static const struct parity_fixture *fixture(const char *name)
{
    for (size_t i = 0; i < NFIX; i++)
        if (!strcmp(parity_fixtures[i].name, name)) return &parity_fixtures[i];
    return NULL;
}

static enum parity_verdict verdict_of(const char *name, struct parity_result *r)
{
    const struct parity_fixture *f = fixture(name);
    struct parity_opts o;
    parity_opts_defaults(&o);
    o.margin = f->margin;
    plumb_err e = {0};
    if (parity_compare(f->x, (size_t)f->n1, f->y, (size_t)f->n2, &o, r, &e)) return (enum parity_verdict)-1;
    return r->verdict;
}

TEST(parity_verdicts)
{
    struct parity_result r;
    /* NVIDIA's DLRM AMP vs TF32 spreads: equivalent within 0.15% */
    CHECK(verdict_of("dlrm_amp_vs_tf32", &r) == PARITY_EQUIVALENT);
    CHECK(!strcmp(r.text, "equivalent"));
    /* 0.37% lower: different, some 40 seed standard deviations */
    CHECK(verdict_of("gap_0p37pct", &r) == PARITY_DIFFERENT);
    CHECK_MSG(r.gap_sd < -30 && r.gap_sd > -60, "gap %.1f sd", r.gap_sd);
    CHECK_NEAR(r.rel_diff, -0.0037, 0.0003);
    /* a 4-sd gap with 5 seeds a side: both tests reject */
    CHECK(verdict_of("gap_5v5", &r) == PARITY_DIFFERENT);
    CHECK(r.perm.exact && r.perm.total == 252);
    /* the same distribution, 5 seeds: not shown equivalent, not different */
    CHECK(verdict_of("same_5v5", &r) == PARITY_UNDECIDED);
    CHECK_MSG(r.more_per_side == (long)ceil(r.seeds_needed) - 5, "more %ld, needed %.2f", r.more_per_side,
              r.seeds_needed);
    char want[160];
    snprintf(want, sizeof want, "undecided: about %ld more seeds per side needed", r.more_per_side);
    CHECK_MSG(!strcmp(r.text, want), "text '%s'", r.text);
    /* 2 seeds a side: the permutation test cannot reject (p >= 1/3) */
    CHECK(verdict_of("tiny_2v2", &r) == PARITY_UNDECIDED);
    CHECK(r.perm.p >= 1.0 / 3);
}

TEST(parity_zero_spread_and_bad_input)
{
    double a[3] = {0.5, 0.5, 0.5}, b[3] = {0.5, 0.5, 0.5}, c[3] = {0.6, 0.6, 0.6};
    struct parity_opts o;
    parity_opts_defaults(&o);
    o.margin = 0.01;
    struct parity_result r;
    plumb_err e = {0};
    REQUIRE(parity_compare(a, 3, b, 3, &o, &r, &e) == PLUMB_OK);
    CHECK(r.verdict == PARITY_EQUIVALENT && r.welch.p == 1);
    REQUIRE(parity_compare(c, 3, b, 3, &o, &r, &e) == PLUMB_OK);
    CHECK(r.welch.p == 0 && r.tost.p == 1 && isinf(r.gap_sd));
    /* C(6,3) = 20 splits, 2 as extreme as the observed: p = 0.1 > alpha */
    CHECK_NEAR(r.perm.p, 0.1, 1e-12);
    CHECK(r.verdict == PARITY_UNDECIDED);
    double one[1] = {0.5}, nan3[3] = {0.5, NAN, 0.5};
    CHECK(parity_compare(one, 1, b, 3, &o, &r, &e) == PLUMB_EUSAGE && strstr(e.msg, "at least 2"));
    CHECK(parity_compare(nan3, 3, b, 3, &o, &r, &e) == PLUMB_EUSAGE && strstr(e.msg, "seed 2"));
    o.margin = 0;
    CHECK(parity_compare(a, 3, b, 3, &o, &r, &e) == PLUMB_EUSAGE && strstr(e.msg, "margin"));
}

TEST(parity_margin_parse)
{
    double abs_m, v;
    int rel;
    plumb_err e = {0};
    CHECK(parity_parse_margin("0.15%", 0.8, &abs_m, &rel, &v, &e) == PLUMB_OK && rel && fabs(abs_m - 0.0012) < 1e-15);
    CHECK(parity_parse_margin("0.002", 0.8, &abs_m, &rel, &v, &e) == PLUMB_OK && !rel && abs_m == 0.002);
    CHECK(parity_parse_margin("-1%", 0.8, &abs_m, &rel, &v, &e) == PLUMB_EUSAGE);
    CHECK(parity_parse_margin("abc", 0.8, &abs_m, &rel, &v, &e) == PLUMB_EUSAGE && strstr(e.msg, "'abc'"));
    CHECK(parity_parse_margin("1%x", 0.8, &abs_m, &rel, &v, &e) == PLUMB_EUSAGE);
}

/* Under the null (both sides from one distribution), `different` must come
 * out at most about alpha of the time: 2000 draws of 5 vs 5 normals. */
TEST(parity_false_alarm_rate_under_null)
{
    struct parity_opts o;
    parity_opts_defaults(&o);
    o.margin = 0.5; /* in units of the spread: 5 seeds cannot show equivalence at 0.5 sd */
    int different = 0, equivalent = 0;
    const int draws = 2000;
    for (int d = 0; d < draws; d++) {
        double x[5], y[5];
        for (int i = 0; i < 5; i++) {
            x[i] = philox_normal_at(99, RNG_STATS, (uint32_t)d, 1, (uint64_t)i);
            y[i] = philox_normal_at(99, RNG_STATS, (uint32_t)d, 2, (uint64_t)i);
        }
        struct parity_result r;
        plumb_err e = {0};
        REQUIRE(parity_compare(x, 5, y, 5, &o, &r, &e) == PLUMB_OK);
        different += r.verdict == PARITY_DIFFERENT;
        equivalent += r.verdict == PARITY_EQUIVALENT;
    }
    double rate = (double)different / draws;
    fprintf(stderr, "  null 5 vs 5: different %d/%d = %.3f, equivalent %d\n", different, draws, rate, equivalent);
    CHECK_MSG(rate <= 0.06, "false-alarm rate %.3f above alpha", rate);
    CHECK_MSG(rate >= 0.02, "false-alarm rate %.3f: the tests reject far less than alpha (too conservative?)", rate);
}
