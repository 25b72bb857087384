/* compare.html: the comparison document (report/compare.h) as one
 * self-contained page, inline CSS and SVG, no script, no network (the same
 * Content-Security-Policy as report.html). Order: the verdict, training
 * parity (strip plots with the margin band, loss curves with seed bands),
 * the ladder, the side-by-side table, digest rows, throughput, numerics
 * error per op, the two sides. */
#include "core/file.h"
#include "core/jsonx.h"
#include "report/compare.h"
#include "report/html.h"
#include "report/svg.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *s_or(const json_t *o, const char *k, const char *d)
{
    const char *s = jsonx_str(o, k);
    return s ? s : d;
}

static void put_num(struct sbuf *b, double v)
{
    char t[48];
    if (!isfinite(v)) snprintf(t, sizeof t, "-");
    else if (v != 0 && (fabs(v) < 1e-3 || fabs(v) >= 1e7)) snprintf(t, sizeof t, "%.3g", v);
    else snprintf(t, sizeof t, "%.5g", v);
    sb_puts(b, t);
}

static void put_jnum(struct sbuf *b, const json_t *v)
{
    if (json_is_number(v)) put_num(b, json_number_value(v));
    else if (json_is_string(v)) sb_escape(b, json_string_value(v));
    else sb_puts(b, "-");
}

static const char *verdict_class(const char *v)
{
    if (!v) return "fail";
    if (!strcmp(v, "equivalent") || !strcmp(v, "digests equal") || !strcmp(v, "pass") || !strcmp(v, "verified") ||
        !strcmp(v, "valid"))
        return "pass";
    if (!strcmp(v, "undecided") || !strcmp(v, "warn") || !strcmp(v, "nothing to test")) return "warn";
    if (!strcmp(v, "skip") || !strcmp(v, "unsigned")) return "skip";
    return "fail";
}

static void badge(struct sbuf *b, const char *v, const char *extra)
{
    sb_printf(b, "<span class=\"badge %s%s%s\">", verdict_class(v), extra ? " " : "", extra ? extra : "");
    sb_escape(b, v ? v : "?");
    sb_puts(b, "</span>");
}

static const char *CSS =
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}"
    "main{max-width:1100px;margin:0 auto;padding:20px 24px 60px}"
    "h1{font-size:22px;margin:8px 0 4px}h2{font-size:18px;margin:0 0 8px}h3{font-size:15px;margin:14px 0 6px}"
    "section{background:#fff;border:1px solid #dde1e7;border-radius:6px;padding:14px 18px;margin:16px 0}"
    "table{border-collapse:collapse;width:100%;margin:4px 0 8px;font-size:13px}"
    "th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #e6e9ee;vertical-align:top}"
    "th{background:#f0f2f5;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}"
    "code{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}"
    ".badge{display:inline-block;padding:1px 8px;border-radius:10px;font-weight:600;font-size:12px;text-transform:uppercase}"
    ".pass{background:#dcf5e3;color:#135c2c}.warn{background:#fff1cc;color:#7a5200}"
    ".fail{background:#fde0e0;color:#8f1919}.skip{background:#e8eaee;color:#4a5160}"
    ".verdict{font-size:20px;padding:4px 16px}.summary{font-size:15px;margin:8px 0}"
    "tr.bad td{background:#fff5f5}.muted{color:#687083}"
    ".hists{display:flex;flex-wrap:wrap;gap:12px}.hist{border:1px solid #e6e9ee;border-radius:4px;padding:6px;background:#fff;margin:0}"
    ".hist figcaption{font-size:12px;margin-bottom:2px}details summary{cursor:pointer;color:#1f5fbf}"
    ".wide{overflow-x:auto}footer{color:#687083;font-size:12px;margin-top:24px}";

/* ---------------------------------------------------------------- verdict */

static void put_verdict(struct sbuf *b, const json_t *doc)
{
    const char *v = jsonx_str(doc, "verdict");
    sb_puts(b, "<section id=\"verdict\"><h2>Verdict ");
    badge(b, v, "verdict");
    sb_puts(b, "</h2>\n<p class=\"summary\">");
    sb_escape(b, s_or(doc, "summary", ""));
    sb_puts(b, "</p>\n");
    const json_t *fault = json_object_get(doc, "digest_fault");
    if (json_is_object(fault)) {
        sb_puts(b, "<p class=\"fail\" style=\"padding:6px 10px\"><b>Digest mismatch:</b> ");
        sb_escape(b, s_or(fault, "message", ""));
        sb_puts(b, "</p>\n");
    }
    const json_t *lad = json_object_get(doc, "ladder");
    if (json_is_object(lad)) {
        sb_puts(b, "<p><b>Attribution:</b> ");
        sb_escape(b, s_or(lad, "text", ""));
        sb_puts(b, "</p>\n");
    }
    /* one line per parity metric */
    size_t i, j;
    json_t *g, *m;
    int any = 0;
    json_array_foreach(json_object_get(doc, "parity"), i, g) json_array_foreach(json_object_get(g, "metrics"), j, m)
    {
        if (!any++) sb_puts(b, "<table><tr><th>check</th><th>metric</th><th>verdict</th><th>B &minus; A</th>"
                               "<th>95% CI</th><th>gap in seed sd</th></tr>\n");
        const char *mv = s_or(m, "verdict", "?");
        sb_printf(b, "<tr%s><td>", !strcmp(mv, "different") ? " class=\"bad\"" : "");
        sb_escape(b, s_or(g, "check", ""));
        sb_puts(b, "</td><td>");
        sb_escape(b, s_or(m, "metric", ""));
        if (json_is_true(json_object_get(m, "primary"))) sb_puts(b, " <b>(primary)</b>");
        if (jsonx_str(m, "better")) sb_printf(b, " <small>(%s is better)</small>", jsonx_str(m, "better"));
        sb_puts(b, "</td><td>");
        badge(b, mv, NULL);
        sb_puts(b, " ");
        if (!strcmp(mv, "undecided")) sb_escape(b, s_or(m, "text", "") + strlen("undecided: "));
        if (jsonx_str(m, "b_vs_a") && strcmp(jsonx_str(m, "b_vs_a"), "same"))
            sb_printf(b, " <small class=\"dir\">B %s</small>", !strcmp(jsonx_str(m, "b_vs_a"), "better") ? "better" : "worse");
        sb_puts(b, "</td><td class=\"num\">");
        put_num(b, jsonx_num(m, "diff"));
        sb_printf(b, " (%+.3f%%)</td><td class=\"num\">[", 100 * jsonx_num(m, "rel_diff"));
        put_num(b, json_number_value(json_array_get(json_object_get(m, "ci95"), 0)));
        sb_puts(b, ", ");
        put_num(b, json_number_value(json_array_get(json_object_get(m, "ci95"), 1)));
        sb_puts(b, "]</td><td class=\"num\">");
        put_jnum(b, json_object_get(m, "gap_sd"));
        sb_puts(b, "</td></tr>\n");
    }
    if (any) sb_puts(b, "</table>\n");
    const json_t *sig = json_object_get(doc, "signatures");
    if (json_is_object(sig)) {
        sb_puts(b, "<p id=\"signatures\">Signatures: ");
        for (int s = 0; s < 2; s++) {
            const json_t *x = json_object_get(sig, s ? "b" : "a");
            sb_puts(b, s ? " &middot; B " : "A ");
            badge(b, s_or(x, "status", "unsigned"), NULL);
            if (jsonx_str(x, "message")) {
                sb_puts(b, " <span class=\"muted\">");
                sb_escape(b, jsonx_str(x, "message"));
                sb_puts(b, "</span>");
            }
        }
        sb_puts(b, "</p>\n");
    }
    sb_puts(b, "</section>\n");
}

/* ---------------------------------------------------------------- parity */

static size_t jvals(const json_t *arr, double *out, size_t max)
{
    size_t n = 0, i;
    json_t *v;
    json_array_foreach(arr, i, v) if (n < max) out[n++] = json_is_number(v) ? json_number_value(v) : NAN;
    return n;
}

static void put_parity_table(struct sbuf *b, const json_t *g)
{
    sb_puts(b, "<div class=\"wide\"><table><tr><th>metric</th><th>A mean &plusmn; sd (n)</th><th>B mean &plusmn; sd (n)</th>"
               "<th>B &minus; A</th><th>95% CI</th><th>margin</th><th>TOST p</th><th>Welch p (t, df)</th>"
               "<th>permutation p</th><th>KS p</th><th>seeds needed</th><th>verdict</th></tr>\n");
    size_t j;
    json_t *m;
    json_array_foreach(json_object_get(g, "metrics"), j, m)
    {
        const char *mv = s_or(m, "verdict", "?");
        sb_printf(b, "<tr%s><td>", !strcmp(mv, "different") ? " class=\"bad\"" : "");
        sb_escape(b, s_or(m, "metric", ""));
        if (json_is_true(json_object_get(m, "primary"))) sb_puts(b, " <b>(primary)</b>");
        sb_puts(b, "</td><td class=\"num\">");
        put_num(b, jsonx_num(m, "mean_a"));
        sb_puts(b, " &plusmn; ");
        put_num(b, jsonx_num(m, "std_a"));
        sb_printf(b, " (%d)</td><td class=\"num\">", (int)jsonx_num(m, "n_a"));
        put_num(b, jsonx_num(m, "mean_b"));
        sb_puts(b, " &plusmn; ");
        put_num(b, jsonx_num(m, "std_b"));
        sb_printf(b, " (%d)</td><td class=\"num\">", (int)jsonx_num(m, "n_b"));
        put_num(b, jsonx_num(m, "diff"));
        sb_puts(b, "</td><td class=\"num\">[");
        put_num(b, json_number_value(json_array_get(json_object_get(m, "ci95"), 0)));
        sb_puts(b, ", ");
        put_num(b, json_number_value(json_array_get(json_object_get(m, "ci95"), 1)));
        sb_puts(b, "]</td><td>");
        sb_escape(b, s_or(json_object_get(m, "margin"), "text", ""));
        sb_puts(b, "</td><td class=\"num\">");
        put_num(b, jsonx_num(json_object_get(m, "tost"), "p"));
        sb_puts(b, "</td><td class=\"num\">");
        const json_t *w = json_object_get(m, "welch");
        put_num(b, jsonx_num(w, "p"));
        sb_printf(b, " (%.2f, %.1f)</td><td class=\"num\">", jsonx_num(w, "t"), jsonx_num(w, "df"));
        const json_t *p = json_object_get(m, "permutation");
        put_num(b, jsonx_num(p, "p"));
        sb_printf(b, " <span class=\"muted\">%s</span></td><td class=\"num\">",
                  json_is_true(json_object_get(p, "exact")) ? "exact" : "reshuffled");
        put_num(b, jsonx_num(json_object_get(m, "ks"), "p"));
        sb_puts(b, "</td><td class=\"num\">");
        put_num(b, jsonx_num(m, "seeds_needed"));
        sb_puts(b, "</td><td>");
        badge(b, mv, NULL);
        if (!strcmp(mv, "undecided")) {
            sb_puts(b, " <span class=\"muted\">");
            sb_escape(b, s_or(m, "text", "") + strlen("undecided: "));
            sb_puts(b, "</span>");
        }
        sb_puts(b, "</td></tr>\n");
    }
    sb_puts(b, "</table></div>\n");
}

static void put_curves(struct sbuf *b, const json_t *c, const char *title)
{
    size_t n = (size_t)jsonx_num(c, "points");
    if (!json_is_number(json_object_get(c, "points")) || !n) return;
    double *mem = malloc(7 * n * sizeof *mem);
    if (!mem) return;
    double *st = mem, *am = mem + n, *al = mem + 2 * n, *ah = mem + 3 * n, *bm = mem + 4 * n, *bl = mem + 5 * n,
           *bh = mem + 6 * n;
    const json_t *a = json_object_get(c, "a"), *bb = json_object_get(c, "b");
    jvals(json_object_get(c, "step"), st, n);
    jvals(json_object_get(a, "mean"), am, n);
    jvals(json_object_get(a, "lo"), al, n);
    jvals(json_object_get(a, "hi"), ah, n);
    jvals(json_object_get(bb, "mean"), bm, n);
    jvals(json_object_get(bb, "lo"), bl, n);
    jvals(json_object_get(bb, "hi"), bh, n);
    const json_t *sep = json_object_get(c, "separate_at");
    svg_band_chart(b, title, st, n, am, al, ah, bm, bl, bh, json_is_number(sep) ? json_number_value(sep) : -1);
    free(mem);
}

static void put_parity(struct sbuf *b, const json_t *doc)
{
    const json_t *par = json_object_get(doc, "parity");
    if (!json_array_size(par)) return;
    sb_puts(b, "<section id=\"parity\"><h2>Training parity</h2>\n<p class=\"muted\">Per-seed final metrics, B &minus; A. "
               "Equivalent: the TOST (two one-sided Welch t-tests) shows the difference inside the margin. Different: it "
               "does not, and both the Welch test and the permutation test reject equal means. Otherwise undecided, with "
               "the seeds per side that the observed spread needs. The primary metric's verdict is the group's; the "
               "others are secondary.</p>\n");
    size_t i, j;
    json_t *g, *m;
    json_array_foreach(par, i, g)
    {
        sb_puts(b, "<h3>");
        sb_escape(b, s_or(g, "check", ""));
        if (*s_or(g, "device_a", "")) {
            sb_puts(b, " <span class=\"muted\">");
            sb_escape(b, s_or(g, "device_a", ""));
            sb_puts(b, " vs ");
            sb_escape(b, s_or(g, "device_b", ""));
            sb_puts(b, "</span>");
        }
        sb_puts(b, " ");
        badge(b, s_or(g, "verdict", "?"), NULL);
        sb_puts(b, "</h3>\n<p class=\"muted\">A: <code>");
        sb_escape(b, s_or(g, "source_a", ""));
        sb_puts(b, "</code> &middot; B: <code>");
        sb_escape(b, s_or(g, "source_b", ""));
        sb_puts(b, "</code></p>\n");
        put_parity_table(b, g);
        sb_puts(b, "<div class=\"hists\">\n");
        json_array_foreach(json_object_get(g, "metrics"), j, m)
        {
            double va[1024], vb[1024];
            size_t na = jvals(json_object_get(m, "values_a"), va, 1024), nb = jvals(json_object_get(m, "values_b"), vb, 1024);
            char title[128];
            snprintf(title, sizeof title, "%s per seed%s%s%s", s_or(m, "metric", ""), jsonx_str(m, "better") ? " (" : "",
                     jsonx_str(m, "better") ? jsonx_str(m, "better") : "", jsonx_str(m, "better") ? " is better)" : "");
            svg_strip(b, title, va, na, vb, nb, jsonx_num(m, "mean_a"), jsonx_num(json_object_get(m, "margin"), "abs"));
        }
        const json_t *c = json_object_get(g, "curves");
        put_curves(b, c, "training loss, mean and seed band (min..max)");
        sb_puts(b, "</div>\n");
        if (c) {
            sb_puts(b, "<p>Loss curves: ");
            sb_escape(b, s_or(c, "text", ""));
            sb_puts(b, "</p>\n");
        }
    }
    sb_puts(b, "</section>\n");
}

/* ---------------------------------------------------------------- ladder */

static void put_ladder(struct sbuf *b, const json_t *doc)
{
    const json_t *l = json_object_get(doc, "ladder");
    if (!json_is_object(l)) return;
    const json_t *rungs = json_object_get(l, "rungs");
    size_t n = json_array_size(rungs);
    if (!n || n > 16) return;
    int two = json_object_get(l, "device_b") != NULL;
    sb_puts(b, "<section id=\"ladder\"><h2>Attribution ladder</h2>\n<p>");
    sb_escape(b, s_or(l, "text", ""));
    sb_puts(b, "</p>\n");
    const char *names[16];
    double am[16], al[16], ah[16], bm[16], bl[16], bh[16];
    size_t i;
    json_t *r;
    json_array_foreach(rungs, i, r)
    {
        names[i] = s_or(r, "name", "?");
        const json_t *a = json_object_get(r, "a"), *bb = json_object_get(r, "b");
        am[i] = jsonx_num(a, "mean");
        al[i] = json_number_value(json_array_get(json_object_get(a, "ci95"), 0));
        ah[i] = json_number_value(json_array_get(json_object_get(a, "ci95"), 1));
        bm[i] = jsonx_num(bb, "mean");
        bl[i] = json_number_value(json_array_get(json_object_get(bb, "ci95"), 0));
        bh[i] = json_number_value(json_array_get(json_object_get(bb, "ci95"), 1));
        if (!json_is_number(json_array_get(json_object_get(a, "ci95"), 0))) al[i] = ah[i] = NAN;
        if (!json_is_number(json_array_get(json_object_get(bb, "ci95"), 0))) bl[i] = bh[i] = NAN;
    }
    const json_t *pa = json_object_get(l, "parts_at");
    char title[96];
    snprintf(title, sizeof title, "%s per rung%s%s%s", s_or(l, "metric", "metric"), jsonx_str(l, "better") ? " (" : "",
             jsonx_str(l, "better") ? jsonx_str(l, "better") : "", jsonx_str(l, "better") ? " is better)" : "");
    sb_puts(b, "<div class=\"hists\">\n");
    svg_ladder(b, title, names, am, al, ah, two ? bm : NULL, bl, bh, n, json_is_integer(pa) ? (int)json_integer_value(pa) : 0);
    sb_puts(b, "</div>\n<div class=\"wide\"><table><tr><th>rung</th><th>turns on</th><th>A mean [95% CI]</th><th>A shift (seed sd)</th>");
    if (two) sb_puts(b, "<th>B mean [95% CI]</th><th>B shift (seed sd)</th><th>A vs B</th>");
    sb_puts(b, "</tr>\n");
    json_array_foreach(rungs, i, r)
    {
        int bad = json_is_integer(pa) && (size_t)json_integer_value(pa) == i + 1;
        sb_printf(b, "<tr%s><td>%d ", bad ? " class=\"bad\"" : "", (int)jsonx_num(r, "rung"));
        sb_escape(b, s_or(r, "name", ""));
        sb_puts(b, "</td><td style=\"min-width:200px\">");
        sb_escape(b, s_or(r, "turns_on", ""));
        sb_puts(b, "</td>");
        for (int s = 0; s < (two ? 2 : 1); s++) {
            const json_t *x = json_object_get(r, s ? "b" : "a"), *sh = json_object_get(r, s ? "shift_b" : "shift_a");
            sb_puts(b, "<td class=\"num\">");
            put_num(b, jsonx_num(x, "mean"));
            sb_puts(b, " [");
            put_jnum(b, json_array_get(json_object_get(x, "ci95"), 0));
            sb_puts(b, ", ");
            put_jnum(b, json_array_get(json_object_get(x, "ci95"), 1));
            sb_puts(b, "]</td><td class=\"num\">");
            if (json_is_object(sh) && json_is_number(json_object_get(sh, "sd_units"))) {
                put_num(b, jsonx_num(sh, "diff"));
                sb_printf(b, " (%+.1f%s)", jsonx_num(sh, "sd_units"),
                          json_is_true(json_object_get(sh, "significant")) ? ", p&lt;0.05" : "");
            } else if (json_is_object(sh)) {
                sb_escape(b, s_or(sh, "note", ""));
            } else {
                sb_puts(b, "-");
            }
            sb_puts(b, "</td>");
        }
        if (two) {
            sb_puts(b, "<td>");
            const json_t *ge = json_object_get(r, "golden_equal");
            if (ge) {
                badge(b, json_is_true(ge) ? "pass" : "fail", NULL);
                sb_puts(b, json_is_true(ge) ? " bit-equal " : " digests differ ");
            }
            const json_t *p = json_object_get(r, "parity");
            if (json_object_get(r, "decided_by")) {
                sb_puts(b, "<span class=\"muted\">");
                sb_escape(b, s_or(r, "decided_by", ""));
                sb_puts(b, "</span>");
            } else if (p) {
                badge(b, s_or(p, "verdict", "?"), NULL);
                sb_puts(b, " <span class=\"muted\">TOST p ");
                put_num(b, jsonx_num(json_object_get(p, "tost"), "p"));
                sb_puts(b, ", Welch p ");
                put_num(b, jsonx_num(json_object_get(p, "welch"), "p"));
                sb_puts(b, "</span>");
            }
            sb_puts(b, "</td>");
        }
        sb_puts(b, "</tr>\n");
        /* notes (the cpu's rung 3, no TF32) on a row of their own; once when both sides say the same */
        const char *na = jsonx_str(r, "note_a"), *nb = jsonx_str(r, "note_b");
        for (int s = 0; s < 2; s++) {
            const char *n = s ? nb : na;
            if (!n || (s && na && !strcmp(na, nb))) continue;
            sb_printf(b, "<tr><td></td><td colspan=\"%d\" class=\"muted\">%s", two ? 6 : 3,
                      na && nb && !strcmp(na, nb) ? "A and B: " : s ? "B: " : "A: ");
            sb_escape(b, n);
            sb_puts(b, "</td></tr>\n");
        }
    }
    /* rungs the workload could not run (a precision it lacks) */
    json_array_foreach(json_object_get(l, "skipped"), i, r)
    {
        sb_printf(b, "<tr><td>%d ", (int)jsonx_num(r, "rung"));
        sb_escape(b, s_or(r, "name", "?"));
        sb_printf(b, "</td><td colspan=\"%d\" class=\"muted\">", two ? 6 : 3);
        sb_escape(b, s_or(r, "why", ""));
        sb_puts(b, "</td></tr>\n");
    }
    sb_puts(b, "</table></div></section>\n");
}

/* ---------------------------------------------------------------- side by side */

static void put_pairs(struct sbuf *b, const json_t *doc)
{
    const json_t *pairs = json_object_get(doc, "pairs");
    const json_t *um = json_object_get(doc, "unmatched");
    if (!json_array_size(pairs) && !json_array_size(um)) return;
    sb_puts(b, "<section id=\"side-by-side\"><h2>Side by side</h2>\n<table><tr><th>check</th><th>device A</th>"
               "<th>device B</th><th>status A</th><th>status B</th><th>reason A</th><th>reason B</th></tr>\n");
    size_t i;
    json_t *p;
    json_array_foreach(pairs, i, p)
    {
        const char *sa = s_or(p, "status_a", "?"), *sbs = s_or(p, "status_b", "?");
        sb_printf(b, "<tr%s><td><a href=\"#pair-%zu\">", strcmp(sa, sbs) ? " class=\"bad\"" : "", i);
        sb_escape(b, s_or(p, "name", ""));
        if (*s_or(p, "mode", "")) {
            sb_puts(b, " ");
            sb_escape(b, s_or(p, "mode", ""));
        }
        sb_puts(b, "</a></td><td>");
        sb_escape(b, *s_or(p, "device_a", "") ? s_or(p, "device_a", "") : "-");
        sb_puts(b, "</td><td>");
        sb_escape(b, *s_or(p, "device_b", "") ? s_or(p, "device_b", "") : "-");
        sb_puts(b, "</td><td>");
        badge(b, sa, NULL);
        sb_puts(b, "</td><td>");
        badge(b, sbs, NULL);
        sb_puts(b, "</td><td>");
        sb_escape(b, s_or(p, "reason_a", ""));
        sb_puts(b, "</td><td>");
        sb_escape(b, s_or(p, "reason_b", ""));
        sb_puts(b, "</td></tr>\n");
    }
    json_t *u;
    json_array_foreach(um, i, u)
    {
        sb_puts(b, "<tr><td>");
        sb_escape(b, s_or(u, "name", ""));
        sb_puts(b, " ");
        sb_escape(b, s_or(u, "mode", ""));
        sb_printf(b, "</td><td colspan=\"6\" class=\"muted\">only in %s", !strcmp(s_or(u, "side", ""), "a") ? "A" : "B");
        if (*s_or(u, "device", "")) {
            sb_puts(b, " (on ");
            sb_escape(b, s_or(u, "device", ""));
            sb_puts(b, ")");
        }
        sb_puts(b, "</td></tr>\n");
    }
    sb_puts(b, "</table>\n");
    if (jsonx_str(doc, "hint")) {
        sb_puts(b, "<p class=\"muted\">");
        sb_escape(b, jsonx_str(doc, "hint"));
        sb_puts(b, "</p>\n");
    }
    json_array_foreach(pairs, i, p)
    {
        if (!json_array_size(json_object_get(p, "metrics")) && !json_array_size(json_object_get(p, "thresholds"))) {
            sb_printf(b, "<p id=\"pair-%zu\" class=\"muted\">", i);
            sb_escape(b, s_or(p, "name", ""));
            sb_puts(b, " ");
            sb_escape(b, s_or(p, "mode", ""));
            sb_puts(b, ": no metrics or thresholds (its rows are in the sections above and below)</p>\n");
            continue;
        }
        sb_printf(b, "<h3 id=\"pair-%zu\">", i);
        sb_escape(b, s_or(p, "name", ""));
        sb_puts(b, " ");
        sb_escape(b, s_or(p, "mode", ""));
        sb_puts(b, "</h3>\n<table><tr><th>metric</th><th>A</th><th>B</th><th>B &minus; A</th><th>B / A</th><th>unit</th></tr>\n");
        size_t j;
        json_t *m;
        json_array_foreach(json_object_get(p, "metrics"), j, m)
        {
            sb_puts(b, "<tr><td>");
            sb_escape(b, s_or(m, "name", ""));
            sb_puts(b, "</td><td class=\"num\">");
            put_jnum(b, json_object_get(m, "a"));
            sb_puts(b, "</td><td class=\"num\">");
            put_jnum(b, json_object_get(m, "b"));
            sb_puts(b, "</td><td class=\"num\">");
            put_jnum(b, json_object_get(m, "delta"));
            sb_puts(b, "</td><td class=\"num\">");
            put_jnum(b, json_object_get(m, "ratio"));
            sb_puts(b, "</td><td>");
            sb_escape(b, s_or(m, "unit", ""));
            sb_puts(b, "</td></tr>\n");
        }
        json_array_foreach(json_object_get(p, "thresholds"), j, m)
        {
            sb_puts(b, "<tr><td class=\"muted\">threshold ");
            sb_escape(b, s_or(m, "name", ""));
            sb_puts(b, "</td><td class=\"num\">");
            put_jnum(b, json_object_get(m, "a"));
            sb_puts(b, "</td><td class=\"num\">");
            put_jnum(b, json_object_get(m, "b"));
            sb_puts(b, "</td><td></td><td></td><td></td></tr>\n");
        }
        sb_puts(b, "</table>\n");
    }
    sb_puts(b, "</section>\n");
}

static void put_digests(struct sbuf *b, const json_t *doc)
{
    const json_t *rows = json_object_get(doc, "digests");
    size_t n = json_array_size(rows);
    if (!n) return;
    size_t eq = 0, i;
    json_t *r;
    json_array_foreach(rows, i, r) eq += json_is_true(json_object_get(r, "equal"));
    sb_printf(b, "<section id=\"digests\"><h2>Digest rows <span class=\"badge %s\">%zu of %zu equal</span></h2>\n"
                 "<p class=\"muted\">Numbers that are the same bits on every platform by construction (Philox streams, "
                 "golden kernels, golden training): equal is pass, a difference is a fault.</p>\n",
              eq == n ? "pass" : "fail", eq, n);
    /* the unequal rows first, then all of them folded */
    if (eq < n) {
        sb_puts(b, "<table><tr><th>kind</th><th>item</th><th>A</th><th>B</th></tr>\n");
        json_array_foreach(rows, i, r) if (!json_is_true(json_object_get(r, "equal")))
        {
            sb_puts(b, "<tr class=\"bad\"><td>");
            sb_escape(b, s_or(r, "kind", ""));
            sb_puts(b, "</td><td>");
            sb_escape(b, s_or(r, "item", ""));
            sb_puts(b, "</td><td><code>");
            sb_escape(b, s_or(r, "a", ""));
            sb_puts(b, "</code></td><td><code>");
            sb_escape(b, s_or(r, "b", ""));
            sb_puts(b, "</code></td></tr>\n");
        }
        sb_puts(b, "</table>\n");
    }
    sb_printf(b, "<details><summary>all %zu rows</summary>\n<table><tr><th>kind</th><th>item</th><th>digest A</th>"
                 "<th>equal</th></tr>\n", n);
    json_array_foreach(rows, i, r)
    {
        int e = json_is_true(json_object_get(r, "equal"));
        sb_printf(b, "<tr%s><td>", e ? "" : " class=\"bad\"");
        sb_escape(b, s_or(r, "kind", ""));
        sb_puts(b, "</td><td>");
        sb_escape(b, s_or(r, "item", ""));
        sb_puts(b, "</td><td><code>");
        char shortd[20];
        snprintf(shortd, sizeof shortd, "%.16s", s_or(r, "a", ""));
        sb_escape(b, shortd);
        sb_puts(b, "</code></td><td>");
        badge(b, e ? "pass" : "fail", NULL);
        sb_puts(b, "</td></tr>\n");
    }
    sb_puts(b, "</table></details></section>\n");
}

static void put_throughput(struct sbuf *b, const json_t *doc)
{
    const json_t *t = json_object_get(doc, "throughput");
    size_t n = json_array_size(t);
    /* per-seed training throughput of the parity groups as well */
    const json_t *par = json_object_get(doc, "parity");
    size_t np = 0, i;
    json_t *g;
    json_array_foreach(par, i, g) np += json_object_get(g, "samples_per_s") != NULL;
    if (!n && !np) return;
    size_t cap = n + np;
    const char **labels = calloc(cap, sizeof *labels);
    char (*lab)[96] = calloc(cap, sizeof *lab);
    double *va = calloc(cap, sizeof *va), *vb = calloc(cap, sizeof *vb);
    if (!labels || !lab || !va || !vb) goto done;
    sb_puts(b, "<section id=\"throughput\"><h2>Throughput</h2>\n<div class=\"hists\">\n");
    /* one chart per unit: bars on one scale must share it */
    for (size_t k = 0; k < n; k++) {
        const char *unit = s_or(json_array_get(t, k), "unit", "");
        int first = 1;
        for (size_t q = 0; q < k; q++) first &= strcmp(unit, s_or(json_array_get(t, q), "unit", "")) != 0;
        if (!first) continue;
        size_t m = 0;
        json_t *x;
        json_array_foreach(t, i, x) if (!strcmp(s_or(x, "unit", ""), unit))
        {
            snprintf(lab[m], sizeof lab[m], "%s %s", s_or(x, "check", ""), s_or(x, "name", ""));
            labels[m] = lab[m];
            va[m] = jsonx_num(x, "a"), vb[m] = jsonx_num(x, "b");
            m++;
        }
        char title[96];
        snprintf(title, sizeof title, "A vs B, %s", unit);
        svg_bars(b, title, labels, va, vb, m, unit);
    }
    if (np) {
        size_t m = 0;
        json_array_foreach(par, i, g)
        {
            const json_t *s = json_object_get(g, "samples_per_s");
            if (!s) continue;
            snprintf(lab[m], sizeof lab[m], "%s (mean over seeds)", s_or(g, "check", ""));
            labels[m] = lab[m];
            va[m] = jsonx_num(s, "a"), vb[m] = jsonx_num(s, "b");
            m++;
        }
        svg_bars(b, "training throughput per seed run", labels, va, vb, m, "samples/s");
    }
    sb_puts(b, "</div></section>\n");
done:
    free(labels), free(lab), free(va), free(vb);
}

static void put_numerics(struct sbuf *b, const json_t *doc)
{
    const json_t *rows = json_object_get(doc, "numerics");
    size_t n = json_array_size(rows);
    if (!n) return;
    sb_puts(b, "<section id=\"numerics\"><h2>Numerics error per op</h2>\n<p class=\"muted\">Each op's error against "
               "the float64 reference on A and on B (the op's criterion: norm-wise or element-wise relative error, or ULP), "
               "with its threshold.</p>\n<div class=\"hists\">\n");
    const char **labels = calloc(n, sizeof *labels);
    char (*lab)[120] = calloc(n, sizeof *lab);
    double *va = calloc(n, sizeof *va), *vb = calloc(n, sizeof *vb), *th = calloc(n, sizeof *th);
    if (labels && lab && va && vb && th) {
        static const char *modes[] = {"fast", "golden", ""};
        for (int mi = 0; mi < 3; mi++) {
            size_t m = 0, i;
            json_t *r;
            json_array_foreach(rows, i, r)
            {
                if (strcmp(s_or(r, "mode", ""), modes[mi])) continue;
                snprintf(lab[m], sizeof lab[m], "%s %s %s (%s)", s_or(r, "op", ""), s_or(r, "dtype", ""),
                         s_or(r, "shape", ""), s_or(r, "criterion", ""));
                labels[m] = lab[m];
                va[m] = jsonx_num(r, "a"), vb[m] = jsonx_num(r, "b"), th[m] = jsonx_num(r, "threshold");
                m++;
            }
            if (!m) continue;
            char title[64];
            snprintf(title, sizeof title, "numerics %s", *modes[mi] ? modes[mi] : "");
            svg_error_per_op(b, title, labels, va, vb, th, m);
        }
    }
    free(labels), free(lab), free(va), free(vb), free(th);
    sb_puts(b, "</div></section>\n");
}

static void put_sides(struct sbuf *b, const json_t *doc)
{
    sb_puts(b, "<section id=\"sides\"><h2>The two sides</h2>\n<table><tr><th></th><th>A</th><th>B</th></tr>\n");
    static const char *keys[] = {"dir", "file", "host", "device", "started", "command", "verdict", "plumb"};
    const json_t *a = json_object_get(doc, "a"), *bb = json_object_get(doc, "b");
    for (int k = 0; k < 8; k++) {
        if (!jsonx_str(a, keys[k]) && !jsonx_str(bb, keys[k])) continue;
        sb_puts(b, "<tr><th>");
        sb_escape(b, keys[k]);
        sb_puts(b, "</th><td><code>");
        sb_escape(b, s_or(a, keys[k], ""));
        sb_puts(b, "</code></td><td><code>");
        sb_escape(b, s_or(bb, keys[k], ""));
        sb_puts(b, "</code></td></tr>\n");
    }
    for (int s = 0; s < 2; s++) {
        const json_t *devs = json_object_get(s ? bb : a, "devices");
        size_t i;
        json_t *d;
        json_array_foreach(devs, i, d)
        {
            sb_printf(b, "<tr><th>device</th>%s<td>", s ? "<td></td>" : "");
            sb_escape(b, s_or(d, "label", ""));
            sb_puts(b, ": ");
            sb_escape(b, s_or(d, "name", ""));
            sb_puts(b, " ");
            sb_escape(b, s_or(d, "arch", ""));
            sb_puts(b, " <span class=\"muted\">");
            sb_escape(b, s_or(d, "driver", ""));
            sb_puts(b, " ");
            sb_escape(b, s_or(d, "libs", ""));
            sb_printf(b, "</span></td>%s</tr>\n", s ? "" : "<td></td>");
        }
    }
    sb_puts(b, "</table></section>\n");
}

char *compare_html_render(const json_t *doc)
{
    struct sbuf b = {0};
    const json_t *a = json_object_get(doc, "a"), *bb = json_object_get(doc, "b");
    const char *la = jsonx_str(a, "host") ? jsonx_str(a, "host") : s_or(a, "file", "A");
    const char *lb = jsonx_str(bb, "host") ? jsonx_str(bb, "host") : s_or(bb, "file", "B");
    sb_puts(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
                "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n"
                "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n<title>plumb compare: ");
    sb_escape(&b, s_or(doc, "verdict", "?"));
    sb_puts(&b, "</title>\n<style>");
    sb_puts(&b, CSS);
    sb_puts(&b, "</style></head>\n<body><main>\n<header><h1>plumb compare: A ");
    sb_escape(&b, la);
    if (jsonx_str(a, "device")) {
        sb_puts(&b, " (");
        sb_escape(&b, jsonx_str(a, "device"));
        sb_puts(&b, ")");
    }
    sb_puts(&b, " vs B ");
    sb_escape(&b, lb);
    if (jsonx_str(bb, "device")) {
        sb_puts(&b, " (");
        sb_escape(&b, jsonx_str(bb, "device"));
        sb_puts(&b, ")");
    }
    sb_puts(&b, "</h1><p class=\"muted\">schema ");
    sb_escape(&b, s_or(doc, "schema", ""));
    const json_t *opt = json_object_get(doc, "options");
    sb_puts(&b, " &middot; margin ");
    sb_escape(&b, s_or(opt, "margin", ""));
    sb_printf(&b, " &middot; alpha %g &middot; power %g</p></header>\n", jsonx_num(opt, "alpha"), jsonx_num(opt, "power"));
    put_verdict(&b, doc);
    put_parity(&b, doc);
    put_ladder(&b, doc);
    put_pairs(&b, doc);
    put_digests(&b, doc);
    put_throughput(&b, doc);
    put_numerics(&b, doc);
    put_sides(&b, doc);
    sb_puts(&b, "<footer>Rendered by plumb compare from compare.json (differences are B &minus; A).</footer>\n"
                "</main></body></html>\n");
    if (b.oom) {
        sb_free(&b);
        return NULL;
    }
    return b.p;
}

int compare_html_write(const json_t *doc, const char *path, plumb_err *e)
{
    char *s = compare_html_render(doc);
    if (!s) return err_set(e, PLUMB_ENOMEM, "out of memory rendering %s", path);
    int rc = file_write_atomic(path, s, strlen(s), e);
    free(s);
    return rc;
}
