/* The attribution ladder in plumb compare (report/compare.h; the runs are
 * accept/check_ladder.c's). A ladder check's details:
 *   {"metric": "auc", "seeds_per_rung": K,
 *    "rungs": [{"rung": 1, "name": "golden", "turns_on": "...", "setting": "...",
 *               "seeds": "checks/ladder/rung1-golden.seeds.jsonl", "same_as": 0, "note": ""}, ...]}
 * same_as = j > 0: this rung is the same setting as rung j on this device
 * (the cpu has no TF32 and no split-K choice: rung 3 is rung 2), its runs
 * are rung j's.
 *
 * Per rung and side: the metric's mean, sample std and 95% CI (t, n - 1 df);
 * the shift from the rung below (Welch: difference, 95% CI, p, and the shift
 * in units of the pooled seed std). With two sides: the rung's parity (the
 * same TOST/permutation verdict as plumb compare's), golden digests per seed
 * (bit-equal or a fault), the first rung where A and B part and what that
 * rung turned on. */
#include "core/jsonx.h"
#include "report/compare.h"
#include "report/parity.h"
#include <gsl/gsl_cdf.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *jnum(double x) { return isfinite(x) ? json_real(x) : json_null(); }

static const char *s_or(const json_t *o, const char *k, const char *d)
{
    const char *s = jsonx_str(o, k);
    return s ? s : d;
}

#define MAX_RUNGS 16

struct rung_side {
    const json_t *r;       /* the rung entry */
    struct seed_set s;     /* its seeds (or those of same_as) */
    double mean, sd, lo, hi;
    size_t n;
};

static int load_side(const json_t *check, const char *dir, const char *label, struct rung_side *rs, int *nr,
                     plumb_err *e)
{
    const json_t *rungs = json_object_get(json_object_get(check, "details"), "rungs");
    if (!json_is_array(rungs) || !json_array_size(rungs))
        return err_set(e, PLUMB_EUSAGE, "%s: ladder check has no details.rungs", dir);
    *nr = 0;
    size_t i;
    json_t *r;
    json_array_foreach(rungs, i, r)
    {
        if (*nr == MAX_RUNGS) break;
        if (jsonx_str(r, "skipped")) continue; /* not run (a precision the workload lacks): no row */
        /* rung numbers increase (rung_seeds finds same_as by number among the entries before): a repeated or
         * out-of-order number paired rungs by position with nonsense, and a same_as naming no earlier rung
         * with seeds left an empty seed set whose message printed a NULL path and metric */
        const json_t *rn = json_object_get(r, "rung");
        long num = json_is_integer(rn) ? (long)json_integer_value(rn) : 0;
        long prev = *nr ? (long)jsonx_num(rs[*nr - 1].r, "rung") : 0;
        if (num < 1 || num > MAX_RUNGS || num <= prev)
            return err_set(e, PLUMB_EUSAGE, "%s: ladder rung entry %zu on side %s: \"rung\" is %s%ld, expected a rung "
                           "number in %ld..%d (above the entry before)", dir, i + 1, label, json_is_integer(rn) ? "" :
                           "not an integer: ", num, prev + 1, MAX_RUNGS);
        struct rung_side *x = &rs[(*nr)++];
        memset(x, 0, sizeof *x);
        x->r = r;
        const char *rel = jsonx_str(r, "seeds");
        long same = (long)jsonx_num(r, "same_as");
        if (same > 0 && !rel) {
            /* the same runs as rung `same`, an earlier entry that has its own seeds */
            int found = 0;
            for (int j = 0; j < *nr - 1; j++)
                found |= (long)jsonx_num(rs[j].r, "rung") == same && rs[j].s.n > 0;
            if (!found)
                return err_set(e, PLUMB_EUSAGE, "%s: ladder rung %ld (%s) on side %s: same_as %ld names no earlier rung "
                               "with a seeds file", dir, num, s_or(r, "name", "?"), label, same);
            continue;
        }
        if (!rel) return err_set(e, PLUMB_EUSAGE, "%s: ladder rung %zu (%s) on side %s names no seeds file", dir, i + 1,
                                 s_or(r, "name", "?"), label);
        if (compare_read_seeds_rel(dir, rel, &x->s, e)) return err_wrap(e, "ladder rung %zu on side %s", i + 1, label);
    }
    return PLUMB_OK;
}

/* The seeds of entry k, or of the entry its same_as names (by rung number:
 * with --rungs some rungs are absent, so numbers are not indices). */
static const struct seed_set *rung_seeds(const struct rung_side *rs, int k)
{
    long same = (long)jsonx_num(rs[k].r, "same_as");
    if (!rs[k].s.n && same > 0)
        for (int j = 0; j < k; j++)
            if ((long)jsonx_num(rs[j].r, "rung") == same) return &rs[j].s;
    return &rs[k].s;
}

/* Is entry k the same runs as the entry below it? */
static int same_as_below(const struct rung_side *rs, int k)
{
    long same = (long)jsonx_num(rs[k].r, "same_as");
    return k > 0 && same > 0 && (long)jsonx_num(rs[k - 1].r, "rung") == same;
}

static void stats_of(const struct seed_set *s, const char *metric, struct rung_side *x)
{
    double *v = malloc((s->n ? s->n : 1) * sizeof *v);
    x->n = v ? seeds_values(s, metric, v) : 0;
    x->mean = x->sd = x->lo = x->hi = NAN;
    if (x->n) {
        double m = 0, q = 0;
        for (size_t i = 0; i < x->n; i++) m += v[i];
        m /= (double)x->n;
        for (size_t i = 0; i < x->n; i++) q += (v[i] - m) * (v[i] - m);
        x->mean = m;
        if (x->n > 1) {
            x->sd = sqrt(q / (double)(x->n - 1));
            parity_gsl_quiet();
            double h = gsl_cdf_tdist_Pinv(0.975, (double)(x->n - 1)) * x->sd / sqrt((double)x->n);
            x->lo = m - h, x->hi = m + h;
        }
    }
    free(v);
}

static json_t *side_stats_json(const struct rung_side *x)
{
    return json_pack("{s:I, s:o, s:o, s:[oo]}", "n", (json_int_t)x->n, "mean", jnum(x->mean), "std", jnum(x->sd), "ci95",
                     jnum(x->lo), jnum(x->hi));
}

/* The shift from rung k-1 to rung k on one side. */
static json_t *shift_json(const struct rung_side *rs, int k, const char *metric, int same_runs)
{
    if (k == 0) return json_null();
    if (same_runs)
        return json_pack("{s:f, s:s}", "diff", 0.0, "note", "0: the same runs as the rung below");
    const struct seed_set *a = rung_seeds(rs, k - 1), *b = rung_seeds(rs, k);
    double *va = malloc((a->n + b->n + 1) * sizeof *va);
    if (!va) return json_null();
    double *vb = va + a->n;
    size_t na = seeds_values(a, metric, va), nb = seeds_values(b, metric, vb);
    struct welch_result w;
    plumb_err e = {0};
    json_t *o;
    if (parity_welch(vb, nb, va, na, 0.95, &w, &e)) {
        o = json_pack("{s:s}", "note", e.msg);
    } else {
        double sp = sqrt((w.s1 * w.s1 + w.s2 * w.s2) / 2);
        o = json_pack("{s:o, s:[oo], s:o, s:o, s:b}", "diff", jnum(w.diff), "ci95", jnum(w.ci_lo), jnum(w.ci_hi), "p",
                      jnum(w.p), "sd_units", jnum(sp > 0 ? w.diff / sp : NAN), "significant", w.p < 0.05);
    }
    free(va);
    return o;
}

static void free_side(struct rung_side *rs, int n)
{
    for (int i = 0; i < n; i++) seeds_free(&rs[i].s);
}

int compare_ladder(const json_t *ca, const char *dir_a, const json_t *cb, const char *dir_b,
                   const struct compare_opts *o, json_t **out, plumb_err *e)
{
    *out = NULL;
    static struct rung_side ra[MAX_RUNGS], rb[MAX_RUNGS];
    int na = 0, nb = 0;
    memset(ra, 0, sizeof ra);
    memset(rb, 0, sizeof rb);
    int rc = load_side(ca, dir_a, "A", ra, &na, e);
    if (!rc && cb) rc = load_side(cb, dir_b, "B", rb, &nb, e);
    if (rc) {
        free_side(ra, na), free_side(rb, nb);
        return rc;
    }
    const json_t *det = json_object_get(ca, "details");
    const char *metric = s_or(det, "metric", "auc");
    /* the direction (details.better, else the seeds' records): which way a shift goes is worse */
    const char *better = jsonx_str(det, "better");
    if (!better && na && rung_seeds(ra, 0)->n) {
        int d = seeds_better(rung_seeds(ra, 0), metric);
        better = d > 0 ? "higher" : d < 0 ? "lower" : NULL;
    }
    json_t *lad = json_object(), *rows = json_array(), *digest_rows = json_array(), *skipped = json_array();
    json_object_set_new(lad, "metric", json_string(metric));
    json_object_set_new(lad, "better", better ? json_string(better) : json_null());
    if (jsonx_str(det, "workload")) json_object_set_new(lad, "workload", json_string(jsonx_str(det, "workload")));
    {
        size_t i;
        json_t *r;
        json_array_foreach(json_object_get(det, "rungs"), i, r) if (jsonx_str(r, "skipped"))
            json_array_append_new(skipped, json_pack("{s:O, s:s, s:s}", "rung", json_object_get(r, "rung"), "name",
                                                     s_or(r, "name", "?"), "why", jsonx_str(r, "skipped")));
    }
    json_object_set_new(lad, "skipped", skipped);
    json_object_set_new(lad, "device_a", json_string(s_or(ca, "device", "")));
    if (cb) json_object_set_new(lad, "device_b", json_string(s_or(cb, "device", "")));
    int n = cb ? (na < nb ? na : nb) : na;
    long parts_at = 0, first_undecided = 0, largest_k = 0;
    double largest = 0;
    char attributed[512] = "";
    for (int k = 0; k < n && !rc; k++) {
        const json_t *r = ra[k].r;
        json_t *row = json_object();
        json_object_set_new(row, "rung", json_integer((json_int_t)jsonx_num(r, "rung")));
        json_object_set_new(row, "name", json_string(s_or(r, "name", "?")));
        json_object_set_new(row, "turns_on", json_string(s_or(r, "turns_on", "")));
        json_object_set_new(row, "setting_a", json_string(s_or(r, "setting", "")));
        if (cb) {
            json_object_set_new(row, "setting_b", json_string(s_or(rb[k].r, "setting", "")));
            if (strcmp(s_or(r, "name", ""), s_or(rb[k].r, "name", "")))
                json_object_set_new(row, "warning", json_string("the two sides' rungs have different names"));
        }
        long same_a = (long)jsonx_num(r, "same_as");
        if (same_a > 0) json_object_set_new(row, "same_as_a", json_integer(same_a));
        if (jsonx_str(r, "note")) json_object_set_new(row, "note_a", json_string(jsonx_str(r, "note")));
        stats_of(rung_seeds(ra, k), metric, &ra[k]);
        json_object_set_new(row, "a", side_stats_json(&ra[k]));
        json_object_set_new(row, "shift_a", shift_json(ra, k, metric, same_as_below(ra, k)));
        const json_t *sh = json_object_get(row, "shift_a");
        if (json_is_true(json_object_get(sh, "significant")) && fabs(jsonx_num(sh, "sd_units")) > fabs(largest))
            largest = jsonx_num(sh, "sd_units"), largest_k = k + 1;
        if (cb) {
            long same_b = (long)jsonx_num(rb[k].r, "same_as");
            if (same_b > 0) json_object_set_new(row, "same_as_b", json_integer(same_b));
            if (jsonx_str(rb[k].r, "note")) json_object_set_new(row, "note_b", json_string(jsonx_str(rb[k].r, "note")));
            stats_of(rung_seeds(rb, k), metric, &rb[k]);
            json_object_set_new(row, "b", side_stats_json(&rb[k]));
            json_object_set_new(row, "shift_b", shift_json(rb, k, metric, same_as_below(rb, k)));
            const struct seed_set *sa = rung_seeds(ra, k), *sb = rung_seeds(rb, k);
            /* golden: per seed bit-equal parameters */
            int golden = !strcmp(s_or(r, "name", ""), "golden");
            int golden_bad = 0;
            if (golden) {
                for (size_t i = 0; i < sa->n; i++) {
                    const char *da = jsonx_str(json_object_get(sa->rec[i], "info"), "param_digest");
                    const char *db = NULL;
                    for (size_t j = 0; j < sb->n; j++)
                        if (sb->seed[j] == sa->seed[i]) db = jsonx_str(json_object_get(sb->rec[j], "info"), "param_digest");
                    if (!da && !db) continue;
                    char item[96];
                    snprintf(item, sizeof item, "ladder golden rung, seed %lld parameters", sa->seed[i]);
                    int eq = da && db && !strcmp(da, db);
                    golden_bad |= !eq;
                    json_array_append_new(digest_rows, json_pack("{s:s, s:s, s:s, s:s, s:b}", "kind", "ladder-golden",
                                                                 "item", item, "a", da ? da : "", "b", db ? db : "",
                                                                 "equal", eq));
                }
                json_object_set_new(row, "golden_equal", json_boolean(!golden_bad));
            }
            json_t *g;
            struct compare_opts po = *o;
            if ((rc = compare_parity_group(sa, sb, &po, &g, e))) {
                json_decref(row);
                break;
            }
            json_t *pm = NULL;
            size_t j;
            json_t *m;
            json_array_foreach(json_object_get(g, "metrics"), j, m) if (!strcmp(s_or(m, "metric", ""), metric)) pm = m;
            const char *v = pm ? s_or(pm, "verdict", "undecided") : "undecided";
            if (pm) json_object_set(row, "parity", pm);
            json_decref(g);
            /* golden is decided by its digests, not by a test: bit-equal seeds are the same numbers */
            int by_digest = golden && json_is_true(json_object_get(row, "golden_equal")) && sa->n;
            if (by_digest) {
                v = "equivalent";
                json_object_set_new(row, "decided_by", json_string("digests: bit-equal seed for seed"));
            }
            int rno = (int)jsonx_num(r, "rung");
            if (golden_bad && !parts_at) {
                parts_at = k + 1;
                snprintf(attributed, sizeof attributed,
                         "A and B part at rung %d (golden): golden parameters differ bit for bit, a hardware or driver "
                         "fault (golden arithmetic is the same on every device), not a numerics setting", rno);
            } else if (!strcmp(v, "different") && !parts_at) {
                parts_at = k + 1;
                if (k > 0)
                    snprintf(attributed, sizeof attributed,
                             "A and B agree through rung %d and part at rung %d (%s): the divergence is attributed to "
                             "what rung %d turns on: %s%s", (int)jsonx_num(ra[k - 1].r, "rung"), rno,
                             s_or(r, "name", "?"), rno, s_or(r, "turns_on", "?"),
                             first_undecided ? " (an earlier rung was undecided: it may start there)" : "");
                else
                    snprintf(attributed, sizeof attributed, "A and B part already at rung %d (%s), the first rung run",
                             rno, s_or(r, "name", "?"));
                const json_t *pp = json_object_get(row, "parity");
                const char *bva = jsonx_str(pp, "b_vs_a");
                size_t L = strlen(attributed);
                if (bva && better && strcmp(bva, "same") && L + 64 < sizeof attributed)
                    snprintf(attributed + L, sizeof attributed - L, "; there B is %s (%s %s is better)", bva, metric,
                             better);
            } else if (!strcmp(v, "undecided") && !first_undecided && !parts_at) {
                first_undecided = k + 1;
            }
        }
        json_array_append_new(rows, row);
    }
    free_side(ra, na), free_side(rb, nb);
    if (rc) {
        json_decref(lad), json_decref(rows), json_decref(digest_rows);
        return rc;
    }
    json_object_set_new(lad, "rungs", rows);
    json_object_set_new(lad, "digest_rows", digest_rows);
    /* parts_at: the position in rungs[] (1-based), parts_at_rung: that rung's number */
    json_object_set_new(lad, "parts_at", parts_at ? json_integer(parts_at) : json_null());
    json_object_set_new(lad, "parts_at_rung", parts_at ? json_integer((json_int_t)jsonx_num(json_array_get(rows, (size_t)parts_at - 1), "rung")) : json_null());
    /* a shift is worse when it moves the metric against its better direction */
    const char *shift_dir = !better || largest == 0 ? NULL : (largest > 0) == !strcmp(better, "higher") ? "better" : "worse";
    json_object_set_new(lad, "largest_shift_a", largest_k ? json_pack("{s:I, s:f, s:o}", "rung", (json_int_t)jsonx_num(json_array_get(rows, (size_t)largest_k - 1), "rung"),
                                                                      "sd_units", largest, "effect",
                                                                      shift_dir ? json_string(shift_dir) : json_null())
                                                          : json_null());
    char text[768];
    if (cb) {
        if (parts_at) snprintf(text, sizeof text, "%s", attributed);
        else if (first_undecided)
            snprintf(text, sizeof text, "A and B are not shown to part at any rung; rung %d is undecided (more seeds "
                     "per rung would settle it)", (int)jsonx_num(json_array_get(rows, (size_t)first_undecided - 1), "rung"));
        else
            snprintf(text, sizeof text, "A and B agree at every rung (golden bit-equal, each fast rung equivalent)");
    } else if (largest_k) {
        const json_t *r = json_array_get(rows, (size_t)largest_k - 1);
        char eff[64] = "";
        if (shift_dir) snprintf(eff, sizeof eff, " (%s: %s is better)", shift_dir, better);
        snprintf(text, sizeof text,
                 "on %s the largest significant rung-to-rung shift of %s is at rung %d (%s, turns on %s): %+.1f seed sd%s",
                 s_or(ca, "device", "this device"), metric, (int)jsonx_num(r, "rung"), s_or(r, "name", "?"),
                 s_or(r, "turns_on", "?"), largest, eff);
    } else {
        snprintf(text, sizeof text, "on %s no rung moves %s by more than the seed spread (no shift significant at 0.05)",
                 s_or(ca, "device", "this device"), metric);
    }
    json_object_set_new(lad, "text", json_string(text));
    *out = lad;
    return PLUMB_OK;
}
