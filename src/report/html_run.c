/* report.html's parts for training evidence, throughput and signatures
 * (report/html.h): per-seed results of a check (checks/<name>/seeds.jsonl:
 * a strip plot per metric and the loss curves' seed band), the ladder's
 * rungs, throughput bars over every check's rate metrics, and the run
 * folder's signature status (report/sign.h). */
#include "core/jsonx.h"
#include "report/compare.h"
#include "report/html.h"
#include "report/seeds.h"
#include "report/sign.h"
#include "report/svg.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *g_trusted_pub;

void html_set_trusted_key(const char *pub_path) { g_trusted_pub = pub_path; }

static const char *s_or(const json_t *o, const char *k, const char *d)
{
    const char *s = jsonx_str(o, k);
    return s ? s : d;
}

void html_put_signature(struct sbuf *b, const char *run_dir)
{
    if (!run_dir) return;
    json_t *st = sign_status_json(run_dir, g_trusted_pub);
    const char *s = s_or(st, "status", "unsigned");
    if (strcmp(s, "unsigned")) {
        const char *cls = !strcmp(s, "invalid") ? "fail" : "pass";
        sb_printf(b, "<section id=\"signature\"><h2>Signature <span class=\"badge %s\">", cls);
        sb_escape(b, s);
        sb_puts(b, "</span></h2>\n<p>");
        sb_escape(b, s_or(st, "message", ""));
        sb_puts(b, "</p>\n<p class=\"muted\">signed at ");
        sb_escape(b, s_or(st, "signed_at", "?"));
        sb_puts(b, ", key <code>");
        sb_escape(b, s_or(st, "fingerprint", "?"));
        sb_puts(b, "</code></p>\n");
        size_t i;
        json_t *p;
        if (json_array_size(json_object_get(st, "problems"))) {
            sb_puts(b, "<ul>\n");
            json_array_foreach(json_object_get(st, "problems"), i, p)
            {
                sb_puts(b, "<li>");
                sb_escape(b, json_string_value(p));
                sb_puts(b, "</li>\n");
            }
            sb_puts(b, "</ul>\n");
        }
        sb_puts(b, "</section>\n");
    }
    json_decref(st);
}

/* One seed set: a strip plot per metric and the loss band. */
static void put_seed_set(struct sbuf *b, const struct seed_set *s, const char *label)
{
    double *v = malloc((s->n ? s->n : 1) * sizeof *v);
    if (!v) return;
    sb_puts(b, "<div class=\"hists\">\n");
    for (size_t m = 0; m < s->nmetric; m++) {
        size_t n = seeds_values(s, s->metric[m], v);
        double mean = 0;
        for (size_t i = 0; i < n; i++) mean += v[i] / (double)n;
        char title[160];
        snprintf(title, sizeof title, "%s%s%s over %zu seeds", label, *label ? ": " : "", s->metric[m], n);
        svg_strip(b, title, v, n, NULL, 0, mean, 0);
    }
    free(v);
    struct curve_band cb;
    plumb_err e = {0};
    if (seeds_curve_bands(s, s, &cb, &e) == PLUMB_OK && cb.n) {
        char title[160];
        snprintf(title, sizeof title, "%s%straining loss over %zu seeds (mean, min..max)", label, *label ? ": " : "",
                 cb.seeds_a);
        svg_band_chart(b, title, cb.step, cb.n, cb.a_mean, cb.a_lo, cb.a_hi, NULL, NULL, NULL, -1);
    }
    curve_band_free(&cb);
    sb_puts(b, "</div>\n");
}

static void put_ladder(struct sbuf *b, const json_t *c, const char *run_dir)
{
    struct compare_opts o;
    compare_opts_defaults(&o);
    json_t *lad = NULL;
    plumb_err e = {0};
    sb_puts(b, "<h3>Ladder</h3>\n");
    if (compare_ladder(c, run_dir, NULL, NULL, &o, &lad, &e)) {
        sb_puts(b, "<p class=\"muted\">ladder unavailable: ");
        sb_escape(b, e.msg);
        sb_puts(b, "</p>\n");
        return;
    }
    const json_t *rungs = json_object_get(lad, "rungs");
    size_t n = json_array_size(rungs);
    if (n && n <= 16) {
        const char *names[16];
        double m[16], lo[16], hi[16];
        size_t i;
        json_t *r;
        json_array_foreach(rungs, i, r)
        {
            names[i] = s_or(r, "name", "?");
            const json_t *a = json_object_get(r, "a");
            m[i] = jsonx_num(a, "mean");
            const json_t *ci = json_object_get(a, "ci95");
            lo[i] = json_is_number(json_array_get(ci, 0)) ? json_number_value(json_array_get(ci, 0)) : NAN;
            hi[i] = json_is_number(json_array_get(ci, 1)) ? json_number_value(json_array_get(ci, 1)) : NAN;
        }
        char title[96];
        snprintf(title, sizeof title, "%s per rung", s_or(lad, "metric", "metric"));
        sb_puts(b, "<div class=\"hists\">\n");
        svg_ladder(b, title, names, m, lo, hi, NULL, NULL, NULL, n, 0);
        sb_puts(b, "</div>\n<table><tr><th>rung</th><th>turns on</th><th>mean [95% CI]</th><th>shift from the rung below</th></tr>\n");
        json_array_foreach(rungs, i, r)
        {
            const json_t *a = json_object_get(r, "a"), *sh = json_object_get(r, "shift_a");
            sb_printf(b, "<tr><td>%d ", (int)jsonx_num(r, "rung"));
            sb_escape(b, names[i]);
            sb_puts(b, "</td><td>");
            sb_escape(b, s_or(r, "turns_on", ""));
            if (jsonx_str(r, "note_a")) {
                sb_puts(b, "<br><span class=\"muted\">");
                sb_escape(b, jsonx_str(r, "note_a"));
                sb_puts(b, "</span>");
            }
            sb_printf(b, "</td><td class=\"num\">%.5f [%.5f, %.5f]</td><td class=\"num\">", m[i], lo[i], hi[i]);
            (void)a;
            if (json_is_number(json_object_get(sh, "sd_units")))
                sb_printf(b, "%+.5f (%+.1f seed sd%s)", jsonx_num(sh, "diff"), jsonx_num(sh, "sd_units"),
                          json_is_true(json_object_get(sh, "significant")) ? ", p&lt;0.05" : "");
            else if (json_is_object(sh)) sb_escape(b, s_or(sh, "note", ""));
            else sb_puts(b, "-");
            sb_puts(b, "</td></tr>\n");
        }
        json_array_foreach(json_object_get(lad, "skipped"), i, r)
        {
            sb_printf(b, "<tr><td>%d ", (int)jsonx_num(r, "rung"));
            sb_escape(b, s_or(r, "name", "?"));
            sb_puts(b, "</td><td colspan=\"3\" class=\"muted\">");
            sb_escape(b, s_or(r, "why", ""));
            sb_puts(b, "</td></tr>\n");
        }
        sb_puts(b, "</table>\n<p>");
        sb_escape(b, s_or(lad, "text", ""));
        sb_puts(b, "</p>\n");
    }
    json_decref(lad);
}

void html_put_training(struct sbuf *b, const json_t *c, const char *run_dir)
{
    if (!run_dir) return;
    const char *cname = s_or(c, "name", "");
    if (!strcmp(cname, "ladder") || !strncmp(cname, "ladder-", 7)) { /* ladder-W: another workload's */
        put_ladder(b, c, run_dir);
        return;
    }
    struct seed_set s;
    plumb_err e = {0};
    if (compare_check_seeds(c, run_dir, &s, &e)) {
        sb_puts(b, "<p class=\"muted\">per-seed results unavailable: ");
        sb_escape(b, e.msg);
        sb_puts(b, "</p>\n");
        return;
    }
    if (!s.n) return;
    sb_printf(b, "<h3>Seeds</h3>\n<p class=\"muted\">%zu seeds (", s.n);
    for (size_t i = 0; i < s.n && i < 40; i++) sb_printf(b, "%s%lld", i ? ", " : "", s.seed[i]);
    sb_puts(b, s.n > 40 ? ", ...)" : ")");
    sb_puts(b, ": each seed changes the initialisation and the shuffling, never the data</p>\n");
    put_seed_set(b, &s, "");
    seeds_free(&s);
}

void html_put_throughput(struct sbuf *b, const json_t *root)
{
    const json_t *checks = json_object_get(root, "checks");
    size_t n = 0, i, j;
    json_t *c, *m;
    json_array_foreach(checks, i, c) json_array_foreach(json_object_get(c, "metrics"), j, m)
        n += jsonx_str(m, "unit") && strstr(jsonx_str(m, "unit"), "/s") != NULL;
    if (!n) return;
    const char **labels = calloc(n, sizeof *labels), **units = calloc(n, sizeof *units);
    char (*lab)[128] = calloc(n, sizeof *lab);
    double *v = calloc(n, sizeof *v);
    if (labels && units && lab && v) {
        size_t k = 0;
        json_array_foreach(checks, i, c) json_array_foreach(json_object_get(c, "metrics"), j, m)
        {
            const char *u = jsonx_str(m, "unit");
            if (!u || !strstr(u, "/s")) continue;
            snprintf(lab[k], sizeof lab[k], "%s %s%s%s", s_or(c, "name", ""), s_or(m, "name", ""),
                     jsonx_str(c, "device") ? " on " : "", s_or(c, "device", ""));
            units[k] = u;
            v[k++] = jsonx_num(m, "value");
        }
        sb_puts(b, "<section id=\"throughput\"><h2>Throughput</h2>\n<div class=\"hists\">\n");
        /* one chart per unit */
        for (size_t q = 0; q < k; q++) {
            int first = 1;
            for (size_t p = 0; p < q; p++) first &= strcmp(units[p], units[q]) != 0;
            if (!first) continue;
            const char *sl[64];
            double sv[64];
            size_t sn = 0;
            for (size_t p = q; p < k && sn < 64; p++)
                if (!strcmp(units[p], units[q])) sl[sn] = lab[p], sv[sn++] = v[p];
            char title[96];
            snprintf(title, sizeof title, "throughput, %s", units[q]);
            svg_bars(b, title, sl, sv, NULL, sn, units[q]);
        }
        sb_puts(b, "</div></section>\n");
    }
    free(labels), free(units), free(lab), free(v);
}
