/* Training parity of two seed sets (report/compare.h): one entry per metric
 * both have (report/parity.h's statistics at the --margin), the loss curves'
 * seed bands, the primary metric's verdict; and reading the seeds files a
 * run folder's checks list. */
#include "core/jsonx.h"
#include "report/compare.h"
#include "core/file.h"
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *jnum(double x) { return isfinite(x) ? json_real(x) : json_null(); }

static const char *str_or(const json_t *o, const char *k, const char *def)
{
    const char *s = jsonx_str(o, k);
    return s ? s : def;
}

/* ---------------------------------------------------------------- margins */

int compare_margin_for(const char *spec, const char *metric, double ref, double *abs_m, char *text, size_t n,
                       plumb_err *e)
{
    /* "0.15%" | "0.001" | "auc=0.15%,logloss=0.002[,0.2%]" (an entry without '=' is the default) */
    char buf[512];
    snprintf(buf, sizeof buf, "%s", spec && *spec ? spec : "0.15%");
    const char *def = "0.15%", *pick = NULL;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq) {
            def = tok;
            continue;
        }
        *eq = '\0';
        if (!strcmp(tok, metric)) pick = eq + 1;
    }
    const char *use = pick ? pick : def;
    int rel;
    double v;
    if (parity_parse_margin(use, ref, abs_m, &rel, &v, e)) return err_wrap(e, "margin for %s", metric);
    if (rel) snprintf(text, n, "%s of A's mean (+-%.3g)", use, *abs_m);
    else snprintf(text, n, "+-%s absolute", use);
    return PLUMB_OK;
}

/* ---------------------------------------------------------------- parity */

static json_t *jarr(const double *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(a, jnum(v[i]));
    return a;
}

static json_t *seed_list(const struct seed_set *s, const char *metric)
{
    json_t *a = json_array();
    for (size_t i = 0; i < s->n; i++)
        if (json_is_number(json_object_get(s->rec[i], metric))) json_array_append_new(a, json_integer(s->seed[i]));
    return a;
}

/* The margin text for a pair of seed sets: --margin, else the records' own
 * (A's, else B's: plumb writes the workload's), else 0.15%. */
static const char *margin_spec(const struct seed_set *a, const struct seed_set *b, const struct compare_opts *o,
                               const char **source)
{
    if (o->margin) return *source = "--margin", o->margin;
    if (a->margin[0]) return *source = "A's records", a->margin;
    if (b->margin[0]) return *source = "B's records", b->margin;
    return *source = "the default", "0.15%";
}

/* The metric's direction: A's records, else B's (1 higher is better, -1 lower, 0 not stated). */
static int direction(const struct seed_set *a, const struct seed_set *b, const char *metric)
{
    int d = seeds_better(a, metric);
    return d ? d : seeds_better(b, metric);
}

static int parity_metric(const struct seed_set *a, const struct seed_set *b, const char *metric,
                         const struct compare_opts *o, json_t **out, plumb_err *e)
{
    double *va = malloc((a->n + b->n) * sizeof *va);
    if (!va) return err_set(e, PLUMB_ENOMEM, "out of memory");
    double *vb = va + a->n;
    size_t na = seeds_values(a, metric, va), nb = seeds_values(b, metric, vb);
    double ma = 0;
    for (size_t i = 0; i < na; i++) ma += va[i] / (double)na;
    struct parity_opts po;
    parity_opts_defaults(&po);
    po.alpha = o->alpha;
    po.power = o->power;
    char mtext[128];
    const char *msrc;
    const char *mspec = margin_spec(a, b, o, &msrc);
    int rc = compare_margin_for(mspec, metric, ma, &po.margin, mtext, sizeof mtext, e);
    if (rc && strcmp(msrc, "--margin")) err_wrap(e, "the margin \"%s\" of %s", mspec, msrc);
    struct parity_result r;
    if (!rc) rc = parity_compare(vb, nb, va, na, &po, &r, e);
    if (rc) {
        free(va);
        return err_wrap(e, "%s: metric %s (A %s, B %s)", metric, metric, a->path, b->path);
    }
    json_t *m = json_object();
    json_object_set_new(m, "metric", json_string(metric));
    json_object_set_new(m, "n_a", json_integer((json_int_t)na));
    json_object_set_new(m, "n_b", json_integer((json_int_t)nb));
    json_object_set_new(m, "seeds_a", seed_list(a, metric));
    json_object_set_new(m, "seeds_b", seed_list(b, metric));
    json_object_set_new(m, "values_a", jarr(va, na));
    json_object_set_new(m, "values_b", jarr(vb, nb));
    json_object_set_new(m, "mean_a", jnum(r.welch.m2));
    json_object_set_new(m, "mean_b", jnum(r.welch.m1));
    json_object_set_new(m, "std_a", jnum(r.welch.s2));
    json_object_set_new(m, "std_b", jnum(r.welch.s1));
    json_object_set_new(m, "diff", jnum(r.welch.diff));
    json_object_set_new(m, "rel_diff", jnum(r.rel_diff));
    json_object_set_new(m, "ci95", json_pack("[oo]", jnum(r.welch.ci_lo), jnum(r.welch.ci_hi)));
    json_object_set_new(m, "welch", json_pack("{s:o, s:o, s:o}", "t", jnum(r.welch.t), "df", jnum(r.welch.df), "p",
                                              jnum(r.welch.p)));
    json_object_set_new(m, "tost", json_pack("{s:o, s:o, s:o, s:[oo]}", "low", jnum(r.tost.low), "upp", jnum(r.tost.upp),
                                             "p", jnum(r.tost.p), "ci90", jnum(r.tost.ci_lo), jnum(r.tost.ci_hi)));
    json_object_set_new(m, "permutation", json_pack("{s:o, s:b, s:I}", "p", jnum(r.perm.p), "exact", r.perm.exact,
                                                    "splits", (json_int_t)r.perm.total));
    json_object_set_new(m, "ks", json_pack("{s:o, s:o}", "d", jnum(r.ks_d), "p", jnum(r.ks_p)));
    json_object_set_new(m, "gap_sd", isfinite(r.gap_sd) ? json_real(r.gap_sd)
                                      : r.gap_sd == 0 ? json_real(0) : json_string(r.gap_sd > 0 ? "inf" : "-inf"));
    json_object_set_new(m, "s_pooled", jnum(r.s_pooled));
    json_object_set_new(m, "margin", json_pack("{s:s, s:o, s:s}", "text", mtext, "abs", jnum(po.margin), "from", msrc));
    /* the direction: reports say which side is ahead; the verdict stays two-sided */
    int dir = direction(a, b, metric);
    json_object_set_new(m, "better", dir ? json_string(dir > 0 ? "higher" : "lower") : json_null());
    if (dir && isfinite(r.welch.diff))
        json_object_set_new(m, "b_vs_a", json_string(r.welch.diff == 0 ? "same" : (r.welch.diff > 0) == (dir > 0) ? "better"
                                                                                                                : "worse"));
    json_object_set_new(m, "alpha", json_real(po.alpha));
    json_object_set_new(m, "seeds_needed", jnum(r.seeds_needed));
    json_object_set_new(m, "more_per_side", json_integer(r.more_per_side));
    json_object_set_new(m, "verdict", json_string(parity_verdict_name(r.verdict)));
    json_object_set_new(m, "text", json_string(r.text));
    free(va);
    *out = m;
    return PLUMB_OK;
}

static json_t *curves_json(const struct seed_set *a, const struct seed_set *b, plumb_err *e)
{
    struct curve_band cb;
    if (seeds_curve_bands(a, b, &cb, e)) return NULL;
    json_t *c = json_object();
    json_object_set_new(c, "points", json_integer((json_int_t)cb.n));
    json_object_set_new(c, "seeds_a", json_integer((json_int_t)cb.seeds_a));
    json_object_set_new(c, "seeds_b", json_integer((json_int_t)cb.seeds_b));
    if (cb.n) {
        json_object_set_new(c, "step", jarr(cb.step, cb.n));
        json_object_set_new(c, "a", json_pack("{s:o, s:o, s:o}", "mean", jarr(cb.a_mean, cb.n), "lo", jarr(cb.a_lo, cb.n),
                                              "hi", jarr(cb.a_hi, cb.n)));
        json_object_set_new(c, "b", json_pack("{s:o, s:o, s:o}", "mean", jarr(cb.b_mean, cb.n), "lo", jarr(cb.b_lo, cb.n),
                                              "hi", jarr(cb.b_hi, cb.n)));
        json_object_set_new(c, "separated_points", json_integer((json_int_t)cb.separated_points));
    }
    json_object_set_new(c, "separate_at", cb.separate_at >= 0 ? json_integer(cb.separate_at) : json_null());
    char txt[256];
    if (!cb.n)
        snprintf(txt, sizeof txt, "%s", cb.seeds_a && cb.seeds_b ? "the curves share no step" : "no loss curves on one side");
    else if (cb.separate_at >= 0)
        snprintf(txt, sizeof txt, "the seed bands (min..max over seeds) separate from step %ld (%zu of %zu points apart)",
                 cb.separate_at, cb.separated_points, cb.n);
    else
        snprintf(txt, sizeof txt, "the seed bands overlap throughout (%zu of %zu points apart, never %s in a row)",
                 cb.separated_points, cb.n, "enough");
    json_object_set_new(c, "text", json_string(txt));
    curve_band_free(&cb);
    return c;
}

const char *compare_worse_verdict(const char *a, const char *b)
{
    /* different > undecided > equivalent */
    if (!a) return b;
    if (!strcmp(a, "different") || !strcmp(b, "different")) return "different";
    if (!strcmp(a, "undecided") || !strcmp(b, "undecided")) return "undecided";
    return "equivalent";
}

/* The group's verdict is its primary metric's (--metric; default: the
 * records' "primary" when both sides have that metric, A's before B's, else
 * auc when both have it, else the first metric they share), so that testing
 * several metrics does not raise the false-alarm rate several-fold: the
 * other metrics are secondary, shown with their own verdicts at alpha. */
static const json_t *find_metric(const json_t *ms, const char *name)
{
    size_t i;
    json_t *x;
    json_array_foreach(ms, i, x) if (!strcmp(str_or(x, "metric", ""), name)) return x;
    return NULL;
}

static const json_t *primary_of(const json_t *ms, const char *want, const struct seed_set *a,
                                const struct seed_set *b, const char **why)
{
    const json_t *x;
    if (want) return *why = "--metric", find_metric(ms, want);
    if (a->primary[0] && (x = find_metric(ms, a->primary))) return *why = "A's records", x;
    if (b->primary[0] && (x = find_metric(ms, b->primary))) return *why = "B's records", x;
    if ((x = find_metric(ms, "auc"))) return *why = "auc, the default", x;
    return *why = "the first shared metric", json_array_get(ms, 0);
}

int compare_parity_group(const struct seed_set *a, const struct seed_set *b, const struct compare_opts *o,
                         json_t **out, plumb_err *e)
{
    json_t *g = json_object(), *ms = json_array();
    json_object_set_new(g, "source_a", json_string(a->path));
    json_object_set_new(g, "source_b", json_string(b->path));
    json_t *only = json_array();
    for (size_t i = 0; i < a->nmetric; i++) {
        if (!seeds_has_metric(b, a->metric[i])) {
            json_array_append_new(only, json_pack("{s:s, s:s}", "side", "a", "metric", a->metric[i]));
            continue;
        }
        json_t *m;
        if (parity_metric(a, b, a->metric[i], o, &m, e)) {
            json_decref(g), json_decref(ms), json_decref(only);
            return e->code;
        }
        json_array_append_new(ms, m);
    }
    for (size_t i = 0; i < b->nmetric; i++)
        if (!seeds_has_metric(a, b->metric[i]))
            json_array_append_new(only, json_pack("{s:s, s:s}", "side", "b", "metric", b->metric[i]));
    if (!json_array_size(ms)) {
        json_decref(g), json_decref(ms), json_decref(only);
        return err_set(e, PLUMB_EUSAGE, "%s and %s have no metric in common (A: %s..., B: %s...)", a->path, b->path,
                       a->metric[0], b->metric[0]);
    }
    json_object_set_new(g, "metrics", ms);
    json_object_set_new(g, "metrics_one_side", only);
    json_t *c = curves_json(a, b, e);
    if (!c) {
        json_decref(g);
        return e->code;
    }
    json_object_set_new(g, "curves", c);
    const char *why;
    const json_t *pm = primary_of(ms, o->metric, a, b, &why);
    if (!pm) {
        json_decref(g);
        return err_set(e, PLUMB_EUSAGE, "--metric %s: not a metric both %s and %s have", o->metric, a->path, b->path);
    }
    size_t k;
    json_t *x;
    json_array_foreach(ms, k, x) json_object_set_new(x, "primary", json_boolean(x == pm));
    json_object_set_new(g, "primary", json_string(str_or(pm, "metric", "")));
    json_object_set_new(g, "primary_from", json_string(why));
    json_object_set_new(g, "verdict", json_string(str_or(pm, "verdict", "undecided")));
    double ta = seeds_info_mean(a, "samples_per_s"), tb = seeds_info_mean(b, "samples_per_s");
    if (isfinite(ta) || isfinite(tb))
        json_object_set_new(g, "samples_per_s", json_pack("{s:o, s:o}", "a", jnum(ta), "b", jnum(tb)));
    *out = g;
    return PLUMB_OK;
}

/* ---------------------------------------------------------------- seeds artifacts */

static int safe_rel(const char *p) { return p && *p && p[0] != '/' && !strstr(p, ".."); }

int compare_read_seeds_rel(const char *dir, const char *rel, struct seed_set *s, plumb_err *e)
{
    memset(s, 0, sizeof *s);
    if (!safe_rel(rel)) return err_set(e, PLUMB_EUSAGE, "%s: artifact path '%s' leaves the run folder", dir, rel ? rel : "");
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, rel) >= (int)sizeof path)
        return err_set(e, PLUMB_EUSAGE, "%s/%s: path too long", dir, rel);
    /* a regular file inside the folder of bounded size (never a FIFO, a
     * device or a link out of it) */
    if (file_check_inside(dir, rel, SEEDS_READ_CAP, e)) return e->code;
    return seeds_read(path, s, e);
}

int compare_check_seeds(const json_t *check, const char *dir, struct seed_set *s, plumb_err *e)
{
    memset(s, 0, sizeof *s);
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(check, "artifacts"), i, a)
    {
        const char *p = json_string_value(a);
        size_t L = p ? strlen(p) : 0;
        if (L >= 11 && !strcmp(p + L - 11, "seeds.jsonl") && strstr(p, "/rung") == NULL)
            return compare_read_seeds_rel(dir, p, s, e);
    }
    return PLUMB_OK;
}

