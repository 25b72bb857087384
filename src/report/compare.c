/* plumb compare's document (report/compare.h): pairing checks, side by side,
 * throughput and numerics rows, the verdict. Parity groups are
 * compare_parity.c's, digest rows compare_digest.c's, the ladder
 * compare_ladder.c's. */
#include "report/compare.h"
#include "core/jsonx.h"
#include "report/sign.h"
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void compare_opts_defaults(struct compare_opts *o)
{
    memset(o, 0, sizeof *o);
    o->margin = NULL; /* the records' own, else 0.15% */
    o->alpha = 0.05;
    o->power = 0.8;
}

/* A JSON number, or null for NaN/inf (json_real refuses them). */
static json_t *jnum(double x) { return isfinite(x) ? json_real(x) : json_null(); }

static const char *str_or(const json_t *o, const char *k, const char *def)
{
    const char *s = jsonx_str(o, k);
    return s ? s : def;
}

/* ---------------------------------------------------------------- pairing */

struct side {
    const json_t *doc;
    const char *dir;
    const char *want_dev; /* --a / --b */
    char label[16];
};

static const char *check_mode(const json_t *c) { return jsonx_str(json_object_get(c, "details"), "numerics"); }

/* Does check c take part, given the device filter? */
static int in_side(const json_t *c, const char *want)
{
    const char *d = jsonx_str(c, "device");
    return !want || !d || !strcmp(d, want);
}

static int same_key(const json_t *x, const json_t *y)
{
    const char *mx = check_mode(x), *my = check_mode(y);
    return !strcmp(str_or(x, "name", ""), str_or(y, "name", "")) && ((!mx && !my) || (mx && my && !strcmp(mx, my)));
}

/* The devices a side's checks ran on (distinct, in order). */
static int side_devices(const struct side *s, const char **out, int max)
{
    int n = 0;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(s->doc, "checks"), i, c)
    {
        const char *d = jsonx_str(c, "device");
        if (!d || !in_side(c, s->want_dev)) continue;
        int seen = 0;
        for (int k = 0; k < n; k++) seen |= !strcmp(out[k], d);
        if (!seen && n < max) out[n++] = d;
    }
    return n;
}

static json_t *metrics_side_by_side(const json_t *ca, const json_t *cb)
{
    json_t *rows = json_array();
    const json_t *ma = json_object_get(ca, "metrics"), *mb = json_object_get(cb, "metrics");
    size_t i, j;
    json_t *m, *n;
    json_array_foreach(ma, i, m)
    {
        const char *name = jsonx_str(m, "name");
        if (!name) continue;
        double va = jsonx_num(m, "value"), vb = NAN;
        json_array_foreach(mb, j, n) if (!strcmp(str_or(n, "name", ""), name))
        {
            vb = jsonx_num(n, "value");
            break;
        }
        json_array_append_new(rows, json_pack("{s:s, s:s, s:o, s:o, s:o, s:o}", "name", name, "unit",
                                              str_or(m, "unit", ""), "a", jnum(va), "b", jnum(vb), "delta",
                                              jnum(vb - va), "ratio", jnum(va != 0 ? vb / va : NAN)));
    }
    json_array_foreach(mb, j, n)
    {
        const char *name = jsonx_str(n, "name");
        int found = 0;
        json_array_foreach(ma, i, m) found |= name && !strcmp(str_or(m, "name", ""), name);
        if (!name || found) continue;
        json_array_append_new(rows, json_pack("{s:s, s:s, s:n, s:o, s:n, s:n}", "name", name, "unit",
                                              str_or(n, "unit", ""), "a", "b", jnum(jsonx_num(n, "value")), "delta",
                                              "ratio"));
    }
    return rows;
}

static json_t *thresholds_side_by_side(const json_t *ca, const json_t *cb)
{
    json_t *rows = json_array();
    const json_t *ta = json_object_get(ca, "thresholds"), *tb = json_object_get(cb, "thresholds");
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)ta, k, v)
    {
        json_t *w = json_object_get(tb, k);
        json_array_append_new(rows, json_pack("{s:s, s:O, s:O}", "name", k, "a", v, "b", w ? w : json_null()));
    }
    json_object_foreach((json_t *)tb, k, v) if (!json_object_get(ta, k))
        json_array_append_new(rows, json_pack("{s:s, s:n, s:O}", "name", k, "a", "b", v));
    return rows;
}

static int unit_is_rate(const char *u) { return u && strstr(u, "/s") != NULL; }

static void add_throughput(json_t *rows, const json_t *pair)
{
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(pair, "metrics"), i, m)
    {
        if (!unit_is_rate(jsonx_str(m, "unit"))) continue;
        json_array_append_new(rows, json_pack("{s:s, s:s, s:s, s:O, s:O}", "check", str_or(pair, "name", ""), "name",
                                              str_or(m, "name", ""), "unit", str_or(m, "unit", ""), "a",
                                              json_object_get(m, "a"), "b", json_object_get(m, "b")));
    }
}

/* Numerics error per op, A vs B (details.ops of paired numerics checks). */
static void add_numerics(json_t *rows, const json_t *ca, const json_t *cb)
{
    const json_t *oa = json_object_get(json_object_get(ca, "details"), "ops");
    const json_t *ob = json_object_get(json_object_get(cb, "details"), "ops");
    if (!json_is_array(oa) || !json_is_array(ob)) return;
    const char *mode = check_mode(ca);
    size_t i, j;
    json_t *x, *y;
    json_array_foreach(oa, i, x)
    {
        const char *op = str_or(x, "op", ""), *dt = str_or(x, "dtype", ""), *sh = str_or(x, "shape", "");
        const char *crit = str_or(x, "criterion", "norm_rel");
        json_array_foreach(ob, j, y)
        {
            if (strcmp(op, str_or(y, "op", "")) || strcmp(dt, str_or(y, "dtype", "")) || strcmp(sh, str_or(y, "shape", "")))
                continue;
            json_array_append_new(rows, json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:o}", "mode", mode ? mode : "",
                                                  "op", op, "dtype", dt, "shape", sh, "criterion", crit, "a",
                                                  jnum(jsonx_num(x, crit)), "b", jnum(jsonx_num(y, crit)), "threshold",
                                                  jnum(jsonx_num(x, "threshold"))));
            break;
        }
    }
}

static json_t *side_json(const struct side *s)
{
    const json_t *host = json_object_get(s->doc, "host");
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "dir", s->dir, "host", str_or(host, "hostname", "?"),
                          "started", str_or(s->doc, "started", ""), "command", str_or(s->doc, "command", ""),
                          "verdict", str_or(s->doc, "verdict", ""), "plumb",
                          str_or(json_object_get(s->doc, "versions"), "plumb", ""));
    if (s->want_dev) json_object_set_new(o, "device", json_string(s->want_dev));
    /* a results.json without platform.devices gets a fresh [] that o owns alone */
    json_t *devs = json_object_get(json_object_get(s->doc, "platform"), "devices");
    json_object_set_new(o, "devices", devs ? json_incref(devs) : json_array());
    return o;
}

static void finish_verdict(json_t *doc)
{
    json_t *fault = json_object_get(doc, "digest_fault");
    const char *v = NULL;
    size_t i, n_metrics = 0;
    json_t *g;
    json_array_foreach(json_object_get(doc, "parity"), i, g)
    {
        v = compare_worse_verdict(v, str_or(g, "verdict", "undecided"));
        n_metrics += json_array_size(json_object_get(g, "metrics"));
    }
    /* a two-sided ladder: each fast rung's parity counts like a metric's */
    const json_t *lad = json_object_get(doc, "ladder");
    const char *lv = NULL;
    if (json_is_object(lad) && json_object_get(lad, "device_b")) {
        json_array_foreach(json_object_get(lad, "rungs"), i, g) if (json_object_get(g, "parity") && !json_object_get(g, "decided_by"))
            lv = compare_worse_verdict(lv, str_or(json_object_get(g, "parity"), "verdict", "undecided"));
    }
    char summary[1024];
    size_t nd = json_array_size(json_object_get(doc, "digests"));
    int code;
    const char *verdict;
    if (!json_is_object(fault) && lv && (!v || !strcmp(compare_worse_verdict(v, lv), lv)) && strcmp(compare_worse_verdict(v, lv), v ? v : "")) {
        /* the ladder decides: it is worse than (or all there is besides) the parity groups */
        verdict = compare_worse_verdict(v, lv);
        code = strcmp(verdict, "equivalent") ? 1 : 0;
        snprintf(summary, sizeof summary, "%s (ladder; %zu digest rows%s)", str_or(lad, "text", ""), nd,
                 nd ? ", all equal" : "");
    } else if (json_is_object(fault)) {
        verdict = "different";
        code = 1;
        snprintf(summary, sizeof summary, "digest mismatch: %s", str_or(fault, "message", ""));
    } else if (!v) {
        verdict = nd ? "digests equal" : "nothing to test";
        code = 0;
        snprintf(summary, sizeof summary,
                 "%zu digest rows, all equal; no per-seed results to test for training parity (plumb accept --seeds K "
                 "records them)", nd);
    } else {
        verdict = v;
        code = strcmp(v, "equivalent") ? 1 : 0;
        /* name the primary metric of the first group with the overall verdict */
        const json_t *worst = NULL;
        json_array_foreach(json_object_get(doc, "parity"), i, g)
        {
            size_t j;
            json_t *m;
            if (strcmp(str_or(g, "verdict", ""), v)) continue;
            json_array_foreach(json_object_get(g, "metrics"), j, m) if (!worst && json_is_true(json_object_get(m, "primary")))
                worst = m;
        }
        char gap[64] = "";
        const json_t *gs = json_object_get(worst, "gap_sd");
        if (json_is_number(gs)) snprintf(gap, sizeof gap, ", %.1f seed sd", json_number_value(gs));
        else if (json_is_string(gs)) snprintf(gap, sizeof gap, ", %s seed sd", json_string_value(gs));
        const json_t *ci = json_object_get(worst, "ci95");
        /* which side is ahead, when the records say which direction is better */
        char ahead[64] = "";
        const char *bva = jsonx_str(worst, "b_vs_a"), *better = jsonx_str(worst, "better");
        if (bva && better && strcmp(bva, "same"))
            snprintf(ahead, sizeof ahead, ", B %s: %s is better", bva, better);
        /* "undecided: ..." carries the seeds needed: the metric's own text when its verdict is the overall one */
        const char *lead = str_or(worst, "text", v);
        snprintf(summary, sizeof summary,
                 "%s: %s B-A = %+.4g (%+.3f%%%s%s), 95%% CI [%.4g, %.4g], TOST p %.3g at %s, Welch p %.3g, "
                 "permutation p %.3g (primary metric; %zu parity metrics; %zu digest rows%s)",
                 lead, str_or(worst, "metric", "?"), jsonx_num(worst, "diff"),
                 100 * jsonx_num(worst, "rel_diff"), gap, ahead, json_number_value(json_array_get(ci, 0)),
                 json_number_value(json_array_get(ci, 1)), jsonx_num(json_object_get(worst, "tost"), "p"),
                 str_or(json_object_get(worst, "margin"), "text", "?"), jsonx_num(json_object_get(worst, "welch"), "p"),
                 jsonx_num(json_object_get(worst, "permutation"), "p"), n_metrics, nd, nd ? ", all equal" : "");
    }
    /* the secondary metrics' own verdicts, after the primary's */
    int first = 1;
    json_array_foreach(json_object_get(doc, "parity"), i, g)
    {
        size_t j;
        json_t *m;
        json_array_foreach(json_object_get(g, "metrics"), j, m)
        {
            if (json_is_true(json_object_get(m, "primary"))) continue;
            size_t L = strlen(summary);
            if (L + 64 < sizeof summary)
                snprintf(summary + L, sizeof summary - L, "%s%s %s", first ? "; secondary: " : ", ", str_or(m, "metric", "?"),
                         str_or(m, "verdict", "?"));
            first = 0;
        }
    }
    json_object_set_new(doc, "verdict", json_string(verdict));
    json_object_set_new(doc, "summary", json_string(summary));
    json_object_set_new(doc, "exit_code", json_integer(code));
}

/* "train-gpt on cpu, doctor" of one side's unmatched checks, cut to fit n. */
static void unmatched_list(const json_t *unmatched, const char *side, char *out, size_t n)
{
    size_t i, L = 0;
    json_t *u;
    out[0] = '\0';
    json_array_foreach(unmatched, i, u)
    {
        if (strcmp(str_or(u, "side", ""), side)) continue;
        const char *mode = str_or(u, "mode", ""), *dev = str_or(u, "device", "");
        char one[160];
        snprintf(one, sizeof one, "%s%s%s%s%s", str_or(u, "name", ""), *mode ? " " : "", mode, *dev ? " on " : "", dev);
        if (L + strlen(one) + 8 >= n) {
            snprintf(out + L, n - L, "%s...", L ? ", " : "");
            return;
        }
        L += (size_t)snprintf(out + L, n - L, "%s%s", L ? ", " : "", one);
    }
    if (!L) snprintf(out, n, "no checks");
}

/* Each per-metric entry of --margin ("acu=0.001") names a metric some parity group tested: a
 * misspelt name was ignored, and that metric tested at the default 0.15% instead. */
static int check_margin_names(const json_t *doc, const struct compare_opts *o, plumb_err *e)
{
    if (!o->margin || !json_array_size(json_object_get(doc, "parity"))) return PLUMB_OK;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", o->margin);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq) continue;
        *eq = '\0';
        int found = 0;
        size_t i, j;
        json_t *g, *m;
        json_array_foreach(json_object_get(doc, "parity"), i, g) json_array_foreach(json_object_get(g, "metrics"), j, m)
            found |= !strcmp(str_or(m, "metric", ""), tok);
        if (!found) {
            const json_t *g0 = json_array_get(json_object_get(doc, "parity"), 0);
            char names[256] = "";
            size_t L = 0;
            json_array_foreach(json_object_get(g0, "metrics"), j, m) if (L + 40 < sizeof names)
                L += (size_t)snprintf(names + L, sizeof names - L, "%s%s", L ? ", " : "", str_or(m, "metric", ""));
            return err_set(e, PLUMB_EUSAGE, "--margin %s: '%s' is not a metric both sides recorded (they have: %s)",
                           o->margin, tok, names);
        }
    }
    return PLUMB_OK;
}

static json_t *options_json(const struct compare_opts *o)
{
    return json_pack("{s:s, s:f, s:f, s:s, s:s}", "margin", o->margin ? o->margin : "the records' (else 0.15%)", "alpha", o->alpha, "power",
                     o->power, "a", o->dev_a ? o->dev_a : "", "b", o->dev_b ? o->dev_b : "");
}

/* A ladder check: "ladder" (the default workload's) or "ladder-W". */
static int is_ladder(const json_t *c)
{
    const char *n = str_or(c, "name", "");
    return !strcmp(n, "ladder") || !strncmp(n, "ladder-", 7);
}

/* The side's first ladder check, or (want not NULL) its ladder of that name. */
static int find_ladder(const struct side *s, const char *want, const json_t **out)
{
    *out = NULL;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(s->doc, "checks"), i, c) if (is_ladder(c) && in_side(c, s->want_dev) &&
                                                                    (!want || !strcmp(str_or(c, "name", ""), want)))
    {
        *out = c;
        return 1;
    }
    return 0;
}

int compare_runs(const json_t *a, const char *dir_a, const json_t *b, const char *dir_b, const struct compare_opts *o,
                 json_t **out, plumb_err *e)
{
    *out = NULL;
    struct side sa = {a, dir_a, o->dev_a, "A"}, sb = {b, dir_b, o->dev_b, "B"};
    const char *da[64], *db[64];
    int nda = side_devices(&sa, da, 64), ndb = side_devices(&sb, db, 64);
    if (o->dev_a && !nda)
        return err_set(e, PLUMB_EUSAGE, "--a %s: no check in %s/results.json ran on %s", o->dev_a, dir_a, o->dev_a);
    if (o->dev_b && !ndb)
        return err_set(e, PLUMB_EUSAGE, "--b %s: no check in %s/results.json ran on %s", o->dev_b, dir_b, o->dev_b);
    /* pair by device unless each side has exactly one device (then the one on A pairs with the one on B) */
    int by_device = !(nda == 1 && ndb == 1);
    json_t *doc = json_object();
    json_object_set_new(doc, "schema", json_string(COMPARE_SCHEMA));
    json_object_set_new(doc, "mode", json_string("runs"));
    json_object_set_new(doc, "a", side_json(&sa));
    json_object_set_new(doc, "b", side_json(&sb));
    json_object_set_new(doc, "options", options_json(o));
    json_t *pairs = json_array(), *unmatched = json_array(), *digests = json_array(), *parity = json_array();
    json_t *thr = json_array(), *num = json_array();
    json_object_set_new(doc, "pairs", pairs);
    json_object_set_new(doc, "unmatched", unmatched);
    json_object_set_new(doc, "digests", digests);
    json_object_set_new(doc, "parity", parity);
    json_object_set_new(doc, "throughput", thr);
    json_object_set_new(doc, "numerics", num);
    const json_t *checks_a = json_object_get(a, "checks"), *checks_b = json_object_get(b, "checks");
    size_t nb = json_array_size(checks_b);
    char *used_b = calloc(nb + 1, 1);
    if (!used_b) {
        json_decref(doc);
        return err_set(e, PLUMB_ENOMEM, "out of memory");
    }
    int rc = PLUMB_OK;
    size_t i, j;
    json_t *ca, *cb;
    json_array_foreach(checks_a, i, ca)
    {
        if (!in_side(ca, sa.want_dev)) continue;
        const char *dva = jsonx_str(ca, "device");
        const json_t *match = NULL;
        json_array_foreach(checks_b, j, cb)
        {
            if (used_b[j] || !in_side(cb, sb.want_dev) || !same_key(ca, cb)) continue;
            const char *dvb = jsonx_str(cb, "device");
            if ((!dva) != (!dvb)) continue;
            if (dva && by_device && !o->dev_a && !o->dev_b && strcmp(dva, dvb)) continue;
            match = cb;
            used_b[j] = 1;
            break;
        }
        if (!match) {
            json_array_append_new(unmatched, json_pack("{s:s, s:s, s:s, s:s}", "side", "a", "name", str_or(ca, "name", ""),
                                                       "mode", check_mode(ca) ? check_mode(ca) : "", "device",
                                                       dva ? dva : ""));
            continue;
        }
        cb = (json_t *)match;
        json_t *p = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "name", str_or(ca, "name", ""), "mode",
                              check_mode(ca) ? check_mode(ca) : "", "device_a", dva ? dva : "", "device_b",
                              str_or(cb, "device", ""), "status_a", str_or(ca, "status", "?"), "status_b",
                              str_or(cb, "status", "?"), "reason_a", str_or(ca, "reason", ""), "reason_b",
                              str_or(cb, "reason", ""));
        json_object_set_new(p, "metrics", metrics_side_by_side(ca, cb));
        json_object_set_new(p, "thresholds", thresholds_side_by_side(ca, cb));
        json_array_append_new(pairs, p);
        add_throughput(thr, p);
        add_numerics(num, ca, cb);
        compare_digest_rows(ca, cb, digests);
        /* per-seed evidence: training parity */
        struct seed_set ssa, ssb;
        if ((rc = compare_check_seeds(ca, dir_a, &ssa, e))) break;
        if ((rc = compare_check_seeds(cb, dir_b, &ssb, e))) {
            seeds_free(&ssa);
            break;
        }
        if (ssa.n && ssb.n) {
            json_t *g;
            rc = compare_parity_group(&ssa, &ssb, o, &g, e);
            if (!rc) {
                json_object_set_new(g, "check", json_string(str_or(ca, "name", "")));
                json_object_set_new(g, "device_a", json_string(dva ? dva : ""));
                json_object_set_new(g, "device_b", json_string(str_or(cb, "device", "")));
                json_array_append_new(parity, g);
            }
        }
        seeds_free(&ssa);
        seeds_free(&ssb);
        if (rc) break;
    }
    if (!rc) {
        json_array_foreach(checks_b, j, cb) if (!used_b[j] && in_side(cb, sb.want_dev))
            json_array_append_new(unmatched, json_pack("{s:s, s:s, s:s, s:s}", "side", "b", "name", str_or(cb, "name", ""),
                                                       "mode", check_mode(cb) ? check_mode(cb) : "", "device",
                                                       str_or(cb, "device", "")));
        if (by_device && json_array_size(unmatched) && (nda > 1 || ndb > 1) && !o->dev_a)
            json_object_set_new(doc, "hint", json_string("checks were paired by device; to pair two different devices "
                                                         "give --a DEVICE --b DEVICE"));
    }
    free(used_b);
    if (!rc) {
        const json_t *la, *lb;
        int ha = find_ladder(&sa, NULL, &la), hb = 0;
        /* the same workload's ladder on B when it has one */
        if (ha) hb = find_ladder(&sb, str_or(la, "name", ""), &lb);
        if (!hb) hb = find_ladder(&sb, NULL, &lb);
        const char *wa = ha ? jsonx_str(json_object_get(la, "details"), "workload") : NULL;
        const char *wb = hb ? jsonx_str(json_object_get(lb, "details"), "workload") : NULL;
        if (o->attribute && (!ha || !hb))
            rc = err_set(e, PLUMB_EUSAGE, "--attribute: %s has no ladder check%s%s (run 'plumb attribute --out DIR' there)",
                         !ha ? dir_a : dir_b, (!ha ? o->dev_a : o->dev_b) ? " on " : "",
                         (!ha ? o->dev_a : o->dev_b) ? (!ha ? o->dev_a : o->dev_b) : "");
        else if (ha && hb && strcmp(str_or(la, "name", ""), str_or(lb, "name", "")))
            rc = err_set(e, PLUMB_EUSAGE, "the ladders train different workloads: %s on A (%s), %s on B (%s); run "
                         "'plumb attribute --workload W' with the same W on both", wa ? wa : "ctr",
                         str_or(la, "name", ""), wb ? wb : "ctr", str_or(lb, "name", ""));
        else if (ha || hb) {
            json_t *lad;
            rc = compare_ladder(ha ? la : lb, ha ? dir_a : dir_b, ha && hb ? lb : NULL, dir_b, o, &lad, e);
            if (!rc) {
                if (!(ha && hb)) json_object_set_new(lad, "side", json_string(ha ? "a" : "b"));
                json_object_set_new(doc, "ladder", lad);
                /* the golden rung's digests are digest rows */
                size_t k;
                json_t *row;
                json_array_foreach(json_object_get(lad, "digest_rows"), k, row) json_array_append(digests, row);
            }
        }
    }
    /* Folders with checks but none in common (a gpt run against a ctr run,
     * parity against parity-gpt, accept --quick against a train folder) have
     * nothing to compare: that was verdict "nothing to test", exit 0, a pass
     * that compared nothing. It is bad input, named with each side's checks
     * (after the ladders: two of different workloads say so themselves). */
    if (!rc && !json_array_size(pairs) && json_array_size(unmatched)) {
        char la[512], lb[512];
        unmatched_list(unmatched, "a", la, sizeof la);
        unmatched_list(unmatched, "b", lb, sizeof lb);
        rc = err_set(e, PLUMB_EUSAGE, "%s and %s have no check in common (A: %s; B: %s): nothing to compare; give "
                     "two folders of the same checks (the same workload's train-W or parity-W, or two accept runs)%s",
                     dir_a, dir_b, la, lb,
                     by_device && (nda > 1 || ndb > 1) && !o->dev_a ? "; checks pair by device: to pair two different "
                                                                      "devices give --a DEVICE --b DEVICE" : "");
    }
    if (!rc) {
        json_t *sig = json_object();
        json_object_set_new(sig, "a", sign_status_json(dir_a, o->pub_a));
        json_object_set_new(sig, "b", sign_status_json(dir_b, o->pub_b));
        json_object_set_new(doc, "signatures", sig);
    }
    if (rc) {
        json_decref(doc);
        return rc;
    }
    if (check_margin_names(doc, o, e)) {
        json_decref(doc);
        return PLUMB_EUSAGE;
    }
    json_t *fault = compare_digest_fault(digests);
    json_object_set_new(doc, "digest_fault", fault ? fault : json_null());
    finish_verdict(doc);
    *out = doc;
    return PLUMB_OK;
}

int compare_metric_files(const char *path_a, const char *path_b, const struct compare_opts *o, json_t **out, plumb_err *e)
{
    *out = NULL;
    struct seed_set a, b;
    if (seeds_read(path_a, &a, e)) return e->code;
    if (seeds_read(path_b, &b, e)) {
        seeds_free(&a);
        return e->code;
    }
    json_t *g;
    int rc = compare_parity_group(&a, &b, o, &g, e);
    seeds_free(&a);
    seeds_free(&b);
    if (rc) return rc;
    json_object_set_new(g, "check", json_string("metrics"));
    json_t *doc = json_object();
    json_object_set_new(doc, "schema", json_string(COMPARE_SCHEMA));
    json_object_set_new(doc, "mode", json_string("metrics"));
    json_object_set_new(doc, "a", json_pack("{s:s}", "file", path_a));
    json_object_set_new(doc, "b", json_pack("{s:s}", "file", path_b));
    json_object_set_new(doc, "options", options_json(o));
    json_object_set_new(doc, "pairs", json_array());
    json_object_set_new(doc, "unmatched", json_array());
    json_object_set_new(doc, "digests", json_array());
    json_object_set_new(doc, "digest_fault", json_null());
    json_object_set_new(doc, "parity", json_pack("[o]", g));
    json_object_set_new(doc, "throughput", json_array());
    json_object_set_new(doc, "numerics", json_array());
    if (check_margin_names(doc, o, e)) {
        json_decref(doc);
        return PLUMB_EUSAGE;
    }
    finish_verdict(doc);
    *out = doc;
    return PLUMB_OK;
}
