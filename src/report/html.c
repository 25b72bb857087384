#include "report/html.h"
#include "core/file.h"
#include "core/jsonx.h"
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- buffer */

static void sb_reserve(struct sbuf *b, size_t extra)
{
    if (b->oom) return;
    if (b->len + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return;
    }
    b->p = p;
    b->cap = cap;
}

static void sb_putn(struct sbuf *b, const char *s, size_t n)
{
    sb_reserve(b, n);
    if (b->oom) return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void sb_puts(struct sbuf *b, const char *s) { sb_putn(b, s, strlen(s)); }

void sb_printf(struct sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    sb_reserve(b, (size_t)n);
    if (b->oom) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when invalid. */
static int utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    int n;
    unsigned min;
    if (c < 0x80) return 1;
    if ((c & 0xE0) == 0xC0) n = 2, min = 0x80, c &= 0x1F;
    else if ((c & 0xF0) == 0xE0) n = 3, min = 0x800, c &= 0x0F;
    else if ((c & 0xF8) == 0xF0) n = 4, min = 0x10000, c &= 0x07;
    else return 0;
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        c = (c << 6) | (s[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    return n;
}

void sb_escape(struct sbuf *b, const char *s)
{
    if (!s) return;
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        switch (*p) {
        case '&': sb_puts(b, "&amp;"); p++; continue;
        case '<': sb_puts(b, "&lt;"); p++; continue;
        case '>': sb_puts(b, "&gt;"); p++; continue;
        case '"': sb_puts(b, "&quot;"); p++; continue;
        case '\'': sb_puts(b, "&#39;"); p++; continue;
        default: break;
        }
        if (*p < 0x20 && *p != '\t' && *p != '\n') {
            p++;
            continue;
        }
        if (*p == 0x7F) {
            p++;
            continue;
        }
        int n = utf8_len(p);
        if (!n) {
            sb_puts(b, "\xEF\xBF\xBD");
            p++;
            continue;
        }
        sb_putn(b, (const char *)p, (size_t)n);
        p += n;
    }
}

void sb_free(struct sbuf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* ---------------------------------------------------------------- helpers */

static const char *CSS =
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}"
    "main{max-width:1100px;margin:0 auto;padding:20px 24px 60px}"
    "h1{font-size:22px;margin:8px 0 4px}h2{font-size:18px;margin:0 0 8px}h3{font-size:15px;margin:14px 0 6px}"
    "section{background:#fff;border:1px solid #dde1e7;border-radius:6px;padding:14px 18px;margin:16px 0}"
    "table{border-collapse:collapse;width:100%;margin:4px 0 8px;font-size:13px}"
    "th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #e6e9ee;vertical-align:top}"
    "th{background:#f0f2f5;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}"
    "code,pre{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}"
    "pre{background:#f6f7f9;border:1px solid #e6e9ee;padding:8px;overflow:auto;max-height:360px;white-space:pre-wrap;word-break:break-all}"
    ".badge{display:inline-block;padding:1px 8px;border-radius:10px;font-weight:600;font-size:12px;text-transform:uppercase}"
    ".pass{background:#dcf5e3;color:#135c2c}.warn{background:#fff1cc;color:#7a5200}"
    ".fail{background:#fde0e0;color:#8f1919}.skip{background:#e8eaee;color:#4a5160}"
    ".verdict{font-size:18px;padding:3px 14px}"
    "tr.bad td{background:#fff5f5}.muted{color:#687083}"
    ".hists{display:flex;flex-wrap:wrap;gap:12px}.hist{border:1px solid #e6e9ee;border-radius:4px;padding:6px;background:#fff}"
    ".hist{margin:0}table.kv th{width:230px}.hist figcaption{font-size:12px;margin-bottom:2px}"
    "a{color:#1f5fbf;text-decoration:none}a:hover{text-decoration:underline}"
    "footer{color:#687083;font-size:12px;margin-top:24px}";

static void fmt_num(char *buf, size_t n, double v)
{
    if (isnan(v)) snprintf(buf, n, "-");
    else if (isinf(v)) snprintf(buf, n, v > 0 ? "inf" : "-inf");
    else if (v == floor(v) && fabs(v) < 1e15) snprintf(buf, n, "%.0f", v);
    else if (fabs(v) >= 1e-3 && fabs(v) < 1e6) snprintf(buf, n, "%.6g", v);
    else snprintf(buf, n, "%.3e", v);
}

static void put_num(struct sbuf *b, double v)
{
    char t[64];
    fmt_num(t, sizeof t, v);
    sb_puts(b, t);
}

/* A JSON scalar as text (escaped); objects/arrays compact, truncated. */
static void put_json_value(struct sbuf *b, const json_t *v)
{
    if (!v || json_is_null(v)) {
        sb_puts(b, "-");
    } else if (json_is_string(v)) {
        sb_escape(b, json_string_value(v));
    } else if (json_is_number(v)) {
        put_num(b, json_number_value(v));
    } else if (json_is_true(v)) {
        sb_puts(b, "true");
    } else if (json_is_false(v)) {
        sb_puts(b, "false");
    } else {
        char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(8));
        if (s) {
            if (strlen(s) > 400) strcpy(s + 397, "...");
            sb_puts(b, "<code>");
            sb_escape(b, s);
            sb_puts(b, "</code>");
            free(s);
        }
    }
}

static const char *status_class(const char *s)
{
    if (!s) return "fail";
    if (!strcmp(s, "pass") || !strcmp(s, "warn") || !strcmp(s, "fail") || !strcmp(s, "skip")) return s;
    return "fail";
}

static void put_badge(struct sbuf *b, const char *status, const char *extra_class)
{
    sb_printf(b, "<span class=\"badge %s%s%s\">", status_class(status), extra_class ? " " : "",
              extra_class ? extra_class : "");
    sb_escape(b, status ? status : "unknown");
    sb_puts(b, "</span>");
}

static void put_kv_row(struct sbuf *b, const char *k, const json_t *v)
{
    sb_puts(b, "<tr><th>");
    sb_escape(b, k);
    sb_puts(b, "</th><td>");
    put_json_value(b, v);
    sb_puts(b, "</td></tr>\n");
}

static int cmp_key(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* An object's keys in sorted order, so a report rendered from memory and one
 * rendered from the file read back (written with sorted keys) are identical.
 * Returns a malloc'ed array (NULL when empty); *n gets the count. */
static const char **sorted_keys(const json_t *o, size_t *n)
{
    *n = json_object_size(o);
    if (!*n) return NULL;
    const char **keys = malloc(*n * sizeof *keys);
    if (!keys) {
        *n = 0;
        return NULL;
    }
    size_t i = 0;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)o, k, v) keys[i++] = k;
    qsort(keys, *n, sizeof *keys, cmp_key);
    return keys;
}

static void put_object_table(struct sbuf *b, const json_t *o)
{
    if (!json_is_object(o) || !json_object_size(o)) return;
    sb_puts(b, "<table class=\"kv\">\n");
    size_t n;
    const char **keys = sorted_keys(o, &n);
    for (size_t i = 0; i < n; i++) put_kv_row(b, keys[i], json_object_get(o, keys[i]));
    free(keys);
    sb_puts(b, "</table>\n");
}

/* ---------------------------------------------------------------- sections */

/* "numerics" run in golden and in fast mode are two entries of one name:
 * show the mode (details.numerics) beside it. */
static void put_check_name(struct sbuf *b, const json_t *c)
{
    sb_escape(b, jsonx_str(c, "name"));
    const char *mode = jsonx_str(json_object_get(c, "details"), "numerics");
    if (mode) {
        sb_puts(b, " ");
        sb_escape(b, mode);
    }
}

static void put_header(struct sbuf *b, const json_t *root)
{
    const json_t *host = json_object_get(root, "host");
    const char *verdict = jsonx_str(root, "verdict");
    sb_puts(b, "<header><h1>plumb report: ");
    sb_escape(b, jsonx_str(host, "hostname") ? jsonx_str(host, "hostname") : "unknown host");
    sb_puts(b, " ");
    put_badge(b, verdict ? verdict : "fail", "verdict");
    sb_puts(b, "</h1>\n<p class=\"muted\">");
    sb_escape(b, jsonx_str(root, "started") ? jsonx_str(root, "started") : "?");
    sb_puts(b, " &rarr; ");
    sb_escape(b, jsonx_str(root, "finished") ? jsonx_str(root, "finished") : "?");
    sb_puts(b, " &middot; <code>");
    sb_escape(b, jsonx_str(root, "command") ? jsonx_str(root, "command") : "");
    sb_puts(b, "</code> &middot; schema ");
    sb_escape(b, jsonx_str(root, "schema"));
    sb_puts(b, "</p></header>\n");
}

static void put_verdict_table(struct sbuf *b, const json_t *checks)
{
    sb_puts(b, "<section id=\"verdict\"><h2>Verdict</h2>\n<table><tr><th>check</th><th>device</th>"
               "<th>status</th><th>duration</th><th>reason</th></tr>\n");
    size_t i;
    json_t *c;
    int counts[4] = {0, 0, 0, 0};
    json_array_foreach(checks, i, c)
    {
        const char *st = jsonx_str(c, "status");
        for (int s = 0; s < 4; s++)
            if (st && !strcmp(st, status_class(st)) && !strcmp(st, (const char *[]){"pass", "warn", "fail", "skip"}[s]))
                counts[s]++;
        sb_printf(b, "<tr%s><td><a href=\"#check-%zu\">", st && !strcmp(st, "fail") ? " class=\"bad\"" : "", i);
        put_check_name(b, c);
        sb_puts(b, "</a></td><td>");
        sb_escape(b, jsonx_str(c, "device") ? jsonx_str(c, "device") : "-");
        sb_puts(b, "</td><td>");
        put_badge(b, st, NULL);
        sb_puts(b, "</td><td class=\"num\">");
        double d = jsonx_num(c, "duration_s");
        if (!isnan(d)) sb_printf(b, "%.2f s", d);
        else sb_puts(b, "-");
        sb_puts(b, "</td><td>");
        sb_escape(b, jsonx_str(c, "reason") ? jsonx_str(c, "reason") : "");
        sb_puts(b, "</td></tr>\n");
    }
    sb_puts(b, "</table>\n");
    sb_printf(b, "<p class=\"muted\">%zu checks: %d pass, %d warn, %d fail, %d skip</p></section>\n",
              json_array_size(checks), counts[0], counts[1], counts[2], counts[3]);
}

static void put_host(struct sbuf *b, const json_t *root)
{
    sb_puts(b, "<section id=\"host\"><h2>Host and versions</h2>\n<h3>Host</h3>\n");
    put_object_table(b, json_object_get(root, "host"));
    sb_puts(b, "<h3>Versions</h3>\n");
    put_object_table(b, json_object_get(root, "versions"));
    const json_t *devs = json_object_get(json_object_get(root, "platform"), "devices");
    if (json_array_size(devs)) {
        sb_puts(b, "<h3>Devices used</h3>\n<table><tr><th>label</th><th>name</th><th>arch</th><th>driver</th>"
                   "<th>libraries</th><th>memory</th><th>units</th></tr>\n");
        size_t i;
        json_t *d;
        json_array_foreach(devs, i, d)
        {
            static const char *keys[] = {"label", "name", "arch", "driver", "libs"};
            sb_puts(b, "<tr>");
            for (int k = 0; k < 5; k++) {
                sb_puts(b, "<td>");
                sb_escape(b, jsonx_str(d, keys[k]) ? jsonx_str(d, keys[k]) : "");
                sb_puts(b, "</td>");
            }
            double mem = jsonx_num(d, "mem_total_bytes");
            sb_puts(b, "<td class=\"num\">");
            if (!isnan(mem)) sb_printf(b, "%.1f GiB", mem / (1024.0 * 1024 * 1024));
            sb_puts(b, "</td><td class=\"num\">");
            put_num(b, jsonx_num(d, "compute_units"));
            sb_puts(b, "</td></tr>\n");
        }
        sb_puts(b, "</table>\n");
    }
    sb_puts(b, "</section>\n");
}

static void put_metrics(struct sbuf *b, const json_t *metrics)
{
    if (!json_array_size(metrics)) return;
    sb_puts(b, "<h3>Metrics</h3>\n<table><tr><th>metric</th><th>value</th><th>unit</th></tr>\n");
    size_t i;
    json_t *m;
    json_array_foreach(metrics, i, m)
    {
        sb_puts(b, "<tr><td>");
        sb_escape(b, jsonx_str(m, "name"));
        sb_puts(b, "</td><td class=\"num\">");
        put_json_value(b, json_object_get(m, "value"));
        sb_puts(b, "</td><td>");
        sb_escape(b, jsonx_str(m, "unit") ? jsonx_str(m, "unit") : "");
        sb_puts(b, "</td></tr>\n");
    }
    sb_puts(b, "</table>\n");
}

/* details.rows (doctor): [{"item","value","status","reason"}] */
static void put_rows(struct sbuf *b, const json_t *rows)
{
    sb_puts(b, "<table><tr><th>item</th><th>value</th><th>status</th><th>reason</th></tr>\n");
    size_t i;
    json_t *r;
    json_array_foreach(rows, i, r)
    {
        const char *st = jsonx_str(r, "status");
        sb_printf(b, "<tr%s><td>", st && !strcmp(st, "fail") ? " class=\"bad\"" : "");
        sb_escape(b, jsonx_str(r, "item"));
        sb_puts(b, "</td><td><code>");
        sb_escape(b, jsonx_str(r, "value") ? jsonx_str(r, "value") : "");
        sb_puts(b, "</code></td><td>");
        put_badge(b, st, NULL);
        sb_puts(b, "</td><td>");
        sb_escape(b, jsonx_str(r, "reason") ? jsonx_str(r, "reason") : "");
        sb_puts(b, "</td></tr>\n");
    }
    sb_puts(b, "</table>\n");
}

/* details.ops (numerics): the error table against the float64 reference. */
static void put_ops(struct sbuf *b, const json_t *ops)
{
    sb_puts(b, "<h3>Error against float64</h3>\n<table><tr><th>op</th><th>dtype</th><th>shape</th>"
               "<th>max rel</th><th>norm rel</th><th>max ULP</th><th>threshold</th><th>deterministic</th>"
               "<th>digest</th></tr>\n");
    size_t i;
    json_t *o;
    json_array_foreach(ops, i, o)
    {
        double mr = jsonx_num(o, "max_rel"), nr = jsonx_num(o, "norm_rel"), th = jsonx_num(o, "threshold");
        const json_t *det = json_object_get(o, "deterministic");
        const char *st = jsonx_str(o, "status");
        /* An op's own status wins; otherwise the norm-wise error against its threshold. */
        int bad = st ? !strcmp(st, "fail")
                     : ((!isnan(th) && !isnan(nr) && nr > th) || json_is_false(det) || (isnan(nr) && json_object_get(o, "norm_rel")));
        sb_printf(b, "<tr%s><td>", bad ? " class=\"bad\"" : "");
        sb_escape(b, jsonx_str(o, "op"));
        sb_puts(b, "</td><td>");
        sb_escape(b, jsonx_str(o, "dtype") ? jsonx_str(o, "dtype") : "");
        sb_puts(b, "</td><td>");
        put_json_value(b, json_object_get(o, "shape"));
        sb_puts(b, "</td><td class=\"num\">");
        put_num(b, mr);
        sb_puts(b, "</td><td class=\"num\">");
        put_num(b, nr);
        sb_puts(b, "</td><td class=\"num\">");
        put_num(b, jsonx_num(o, "max_ulp"));
        sb_puts(b, "</td><td class=\"num\">");
        put_num(b, th);
        sb_puts(b, "</td><td>");
        put_json_value(b, det);
        sb_puts(b, "</td><td><code>");
        const char *dg = jsonx_str(o, "digest");
        if (dg) {
            char shortd[17];
            snprintf(shortd, sizeof shortd, "%s", dg);
            sb_puts(b, "<span title=\"");
            sb_escape(b, dg);
            sb_puts(b, "\">");
            sb_escape(b, shortd);
            sb_puts(b, "</span>");
        }
        sb_puts(b, "</code></td></tr>\n");
    }
    sb_puts(b, "</table>\n");
}

/* One histogram as inline SVG: bars are observed counts, the line the
 * expected counts, both on one linear scale; x spans [lo, hi]. */
static void put_hist_svg(struct sbuf *b, const json_t *s)
{
    const json_t *counts = json_object_get(s, "counts"), *expected = json_object_get(s, "expected");
    size_t nb = json_array_size(counts);
    if (!nb) return;
    const int W = 330, H = 170, L = 44, R = 8, T = 8, B = 24;
    double pw = W - L - R, ph = H - T - B, ymax = 0;
    for (size_t i = 0; i < nb; i++) {
        double c = json_number_value(json_array_get(counts, i));
        if (c > ymax) ymax = c;
        if (i < json_array_size(expected)) {
            double x = json_number_value(json_array_get(expected, i));
            if (x > ymax) ymax = x;
        }
    }
    if (!(ymax > 0)) ymax = 1;
    double lo = jsonx_num(s, "lo"), hi = jsonx_num(s, "hi");
    sb_puts(b, "<figure class=\"hist\"><figcaption><b>");
    sb_escape(b, jsonx_str(s, "name"));
    sb_puts(b, "</b> <span class=\"muted\">");
    sb_escape(b, jsonx_str(s, "kind") ? jsonx_str(s, "kind") : "");
    sb_printf(b, ", %zu bins</span></figcaption>\n", nb);
    sb_printf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\">",
              W, H, W, H);
    sb_puts(b, "<title>");
    sb_escape(b, jsonx_str(s, "name"));
    sb_puts(b, ": observed counts (bars) and expected counts (line)</title>");
    sb_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" fill=\"#fafbfc\" stroke=\"#c9ced6\"/>", L, T, pw, ph);
    double bw = pw / (double)nb;
    for (size_t i = 0; i < nb; i++) {
        double c = json_number_value(json_array_get(counts, i));
        if (!(c > 0)) continue;
        double h = ph * c / ymax;
        sb_printf(b, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"#6f9fd8\"/>", L + bw * (double)i,
                  T + ph - h, bw > 1.5 ? bw - 0.5 : bw, h);
    }
    if (json_array_size(expected) == nb) {
        sb_puts(b, "<polyline fill=\"none\" stroke=\"#c2410c\" stroke-width=\"1.5\" points=\"");
        for (size_t i = 0; i < nb; i++) {
            double x = json_number_value(json_array_get(expected, i));
            sb_printf(b, "%.2f,%.2f ", L + bw * ((double)i + 0.5), T + ph - ph * x / ymax);
        }
        sb_puts(b, "\"/>");
    }
    char t1[32], t2[32], t3[32];
    fmt_num(t1, sizeof t1, ymax);
    fmt_num(t2, sizeof t2, lo);
    fmt_num(t3, sizeof t3, hi);
    sb_printf(b, "<text x=\"%d\" y=\"%d\" font-size=\"10\" text-anchor=\"end\" fill=\"#4a5160\">%s</text>", L - 3,
              T + 9, t1);
    sb_printf(b, "<text x=\"%d\" y=\"%d\" font-size=\"10\" text-anchor=\"end\" fill=\"#4a5160\">0</text>", L - 3,
              T + (int)ph);
    sb_printf(b, "<text x=\"%d\" y=\"%d\" font-size=\"10\" fill=\"#4a5160\">%s</text>", L, H - 8, t2);
    sb_printf(b, "<text x=\"%d\" y=\"%d\" font-size=\"10\" text-anchor=\"end\" fill=\"#4a5160\">%s</text>", W - R,
              H - 8, t3);
    sb_puts(b, "</svg></figure>\n");
}

/* An artifact path is used only when it stays inside the run folder. */
static int safe_rel(const char *p)
{
    return p && *p && p[0] != '/' && !strstr(p, "..");
}

static void put_histograms(struct sbuf *b, const json_t *c, const char *run_dir)
{
    if (!run_dir) return;
    const char *rel = NULL;
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(c, "artifacts"), i, a)
    {
        const char *s = json_string_value(a);
        size_t L = s ? strlen(s) : 0;
        if (L >= 15 && !strcmp(s + L - 15, "histograms.json") && safe_rel(s)) rel = s;
    }
    if (!rel) return;
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", run_dir, rel) >= (int)sizeof path) return;
    json_t *h = NULL;
    plumb_err e = {0};
    sb_puts(b, "<h3>Histograms</h3>\n");
    if (jsonx_read_file(path, &h, &e)) {
        sb_puts(b, "<p class=\"muted\">histograms unavailable: ");
        sb_escape(b, e.msg);
        sb_puts(b, "</p>\n");
        return;
    }
    const json_t *streams = json_object_get(h, "streams");
    sb_puts(b, "<div class=\"hists\">\n");
    json_t *s;
    json_array_foreach(streams, i, s) put_hist_svg(b, s);
    sb_puts(b, "</div>\n");
    if (!json_array_size(streams)) sb_puts(b, "<p class=\"muted\">no streams in histograms.json</p>\n");
    json_decref(h);
}

/* ---- line charts from metrics.jsonl artifacts (one JSON object per line,
 * as trainers and monitors write them) ----
 * x is "step" when present, else the line number. Every other numeric field
 * becomes a chart (at most MAX_CHARTS, in first-seen order); lines carrying a
 * string "kind"/"split"/"phase" field (train, eval, ...) form separate series. */
#define MAX_CHARTS 6
#define MAX_SERIES 10
#define MAX_POINTS 100000

struct series {
    char name[32];
    double *x, *y;
    size_t n, cap;
};
struct chart {
    char key[64];
    struct series s[MAX_SERIES];
    int ns;
};

static void series_add(struct series *s, double x, double y)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        double *nx = realloc(s->x, cap * sizeof *nx);
        if (!nx) return;
        s->x = nx;
        double *ny = realloc(s->y, cap * sizeof *ny);
        if (!ny) return;
        s->y = ny;
        s->cap = cap;
    }
    s->x[s->n] = x;
    s->y[s->n] = y;
    s->n++;
}

static int skip_key(const char *k)
{
    static const char *skip[] = {"step", "epoch", "time", "t", "wall", "timestamp", "rank", "world", "ordinal", NULL};
    for (int i = 0; skip[i]; i++)
        if (!strcmp(k, skip[i])) return 1;
    return 0;
}

static void put_chart_svg(struct sbuf *b, const struct chart *ch)
{
    static const char *colors[MAX_SERIES] = {"#1f5fbf", "#c2410c", "#15803d", "#7e22ce", "#0e7490",
                                             "#a16207", "#be185d", "#4d7c0f", "#6d28d9", "#475569"};
    const int W = 330, H = 170, L = 52, R = 8, T = 8, B = 24;
    double pw = W - L - R, ph = H - T - B;
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    size_t total = 0;
    for (int si = 0; si < ch->ns; si++)
        for (size_t i = 0; i < ch->s[si].n; i++) {
            double x = ch->s[si].x[i], y = ch->s[si].y[i];
            if (!isfinite(x) || !isfinite(y)) continue;
            x0 = fmin(x0, x), x1 = fmax(x1, x), y0 = fmin(y0, y), y1 = fmax(y1, y);
            total++;
        }
    if (!total) return;
    if (x1 == x0) x1 = x0 + 1;
    if (y1 == y0) { /* a constant: draw it across the middle */
        double d = y0 == 0 ? 1 : fabs(y0) * 0.01;
        y0 -= d, y1 += d;
    }
    sb_puts(b, "<figure class=\"hist\"><figcaption><b>");
    sb_escape(b, ch->key);
    sb_puts(b, "</b>");
    for (int si = 0; si < ch->ns; si++) {
        if (!ch->s[si].name[0]) continue;
        sb_printf(b, " <span style=\"color:%s\">&#9632; ", colors[si]);
        sb_escape(b, ch->s[si].name);
        sb_puts(b, "</span>");
    }
    sb_puts(b, "</figcaption>\n");
    sb_printf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\"><title>", W,
              H, W, H);
    sb_escape(b, ch->key);
    sb_puts(b, "</title>");
    sb_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" fill=\"#fafbfc\" stroke=\"#c9ced6\"/>", L, T, pw, ph);
    for (int si = 0; si < ch->ns; si++) {
        const struct series *s = &ch->s[si];
        if (!s->n) continue;
        /* at most ~600 points per series: every k-th point, always the last */
        size_t k = s->n > 600 ? (s->n + 599) / 600 : 1;
        sb_printf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.3\" points=\"", colors[si]);
        for (size_t i = 0; i < s->n; i++) {
            if (i % k && i != s->n - 1) continue;
            if (!isfinite(s->x[i]) || !isfinite(s->y[i])) continue;
            sb_printf(b, "%.1f,%.1f ", L + pw * (s->x[i] - x0) / (x1 - x0), T + ph - ph * (s->y[i] - y0) / (y1 - y0));
        }
        sb_puts(b, "\"/>");
    }
    char a[32], c2[32], d[32], e[32];
    fmt_num(a, sizeof a, y1);
    fmt_num(c2, sizeof c2, y0);
    fmt_num(d, sizeof d, x0);
    fmt_num(e, sizeof e, x1);
    sb_printf(b, "<text x=\"%d\" y=\"%d\" font-size=\"10\" text-anchor=\"end\" fill=\"#4a5160\">%s</text>", L - 3, T + 9, a);
    sb_printf(b, "<text x=\"%d\" y=\"%d\" font-size=\"10\" text-anchor=\"end\" fill=\"#4a5160\">%s</text>", L - 3, T + (int)ph, c2);
    sb_printf(b, "<text x=\"%d\" y=\"%d\" font-size=\"10\" fill=\"#4a5160\">%s</text>", L, H - 8, d);
    sb_printf(b, "<text x=\"%d\" y=\"%d\" font-size=\"10\" text-anchor=\"end\" fill=\"#4a5160\">%s</text>", W - R, H - 8, e);
    sb_puts(b, "</svg></figure>\n");
}

/* Adds the numeric fields of one object to the charts, as series `sname`. */
static void add_fields(struct chart *charts, int *nc, const json_t *o, const char *sname, double x)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)o, k, v)
    {
        if (!json_is_number(v) || skip_key(k)) continue;
        int ci = 0;
        while (ci < *nc && strcmp(charts[ci].key, k)) ci++;
        if (ci == *nc) {
            if (*nc == MAX_CHARTS) continue;
            snprintf(charts[(*nc)++].key, sizeof charts[0].key, "%s", k);
        }
        struct chart *ch = &charts[ci];
        int si = 0;
        while (si < ch->ns && strcmp(ch->s[si].name, sname)) si++;
        if (si == ch->ns) {
            if (ch->ns == MAX_SERIES) continue;
            snprintf(ch->s[ch->ns++].name, sizeof ch->s[0].name, "%s", sname);
        }
        series_add(&ch->s[si], x, json_number_value(v));
    }
}

static void put_jsonl_charts(struct sbuf *b, const char *run_dir, const char *rel)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", run_dir, rel) >= (int)sizeof path) return;
    FILE *f = fopen(path, "r");
    if (!f) return;
    struct chart *charts = calloc(MAX_CHARTS, sizeof *charts);
    if (!charts) {
        fclose(f);
        return;
    }
    int nc = 0;
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0, bad = 0;
    double t0 = NAN;
    while (getline(&line, &cap, f) > 0 && lineno < MAX_POINTS) {
        json_error_t je;
        json_t *o = json_loads(line, 0, &je);
        lineno++;
        if (!json_is_object(o)) {
            bad++;
            json_decref(o);
            continue;
        }
        double x = jsonx_num(o, "step");
        if (isnan(x)) {
            /* no step: seconds since the first line when lines carry a time */
            double t = jsonx_num(o, "time");
            if (!isnan(t) && isnan(t0)) t0 = t;
            x = !isnan(t) ? t - t0 : (double)lineno;
        }
        const char *kind = jsonx_str(o, "kind");
        if (!kind) kind = jsonx_str(o, "split");
        if (!kind) kind = jsonx_str(o, "phase");
        if (!kind) kind = "";
        add_fields(charts, &nc, o, kind, x);
        /* monitors write {"time", "devices": [{"device": "nvidia0", ...}, ...]}: a series per device */
        const json_t *devs = json_object_get(o, "devices");
        size_t di;
        json_t *dv;
        json_array_foreach(devs, di, dv) if (json_is_object(dv) && jsonx_str(dv, "device"))
            add_fields(charts, &nc, dv, jsonx_str(dv, "device"), x);
        json_decref(o);
    }
    free(line);
    fclose(f);
    if (nc) {
        sb_puts(b, "<h3>");
        sb_escape(b, rel);
        sb_printf(b, "</h3>\n<p class=\"muted\">%ld lines%s</p>\n<div class=\"hists\">\n", lineno,
                  bad ? ", some not JSON objects (skipped)" : "");
        for (int ci = 0; ci < nc; ci++) put_chart_svg(b, &charts[ci]);
        sb_puts(b, "</div>\n");
    }
    for (int ci = 0; ci < nc; ci++)
        for (int si = 0; si < charts[ci].ns; si++) {
            free(charts[ci].s[si].x);
            free(charts[ci].s[si].y);
        }
    free(charts);
}

static void put_line_charts(struct sbuf *b, const json_t *c, const char *run_dir)
{
    if (!run_dir) return;
    size_t i;
    json_t *a;
    int shown = 0;
    json_array_foreach(json_object_get(c, "artifacts"), i, a)
    {
        const char *s = json_string_value(a);
        size_t L = s ? strlen(s) : 0;
        /* per-seed results (seeds.jsonl) are drawn by html_put_training, not as lines */
        int seeds_file = L >= 11 && !strcmp(s + L - 11, "seeds.jsonl");
        if (L >= 6 && !strcmp(s + L - 6, ".jsonl") && safe_rel(s) && shown < 4 && !seeds_file) {
            put_jsonl_charts(b, run_dir, s);
            shown++;
        }
    }
}

static void put_check(struct sbuf *b, const json_t *c, size_t idx, const char *run_dir)
{
    const char *st = jsonx_str(c, "status");
    sb_printf(b, "<section id=\"check-%zu\"><h2>", idx);
    put_check_name(b, c);
    if (jsonx_str(c, "device")) {
        sb_puts(b, " <span class=\"muted\">on ");
        sb_escape(b, jsonx_str(c, "device"));
        sb_puts(b, "</span>");
    }
    sb_puts(b, " ");
    put_badge(b, st, NULL);
    sb_puts(b, "</h2>\n");
    if (jsonx_str(c, "reason")) {
        sb_puts(b, "<p>");
        sb_escape(b, jsonx_str(c, "reason"));
        sb_puts(b, "</p>\n");
    }
    double d = jsonx_num(c, "duration_s");
    if (!isnan(d)) sb_printf(b, "<p class=\"muted\">ran %.2f s</p>\n", d);
    put_metrics(b, json_object_get(c, "metrics"));
    const json_t *th = json_object_get(c, "thresholds");
    if (json_object_size(th)) {
        sb_puts(b, "<h3>Thresholds</h3>\n");
        put_object_table(b, th);
    }
    const json_t *details = json_object_get(c, "details");
    const json_t *rows = json_object_get(details, "rows"), *ops = json_object_get(details, "ops");
    if (json_is_array(rows)) {
        sb_puts(b, "<h3>Findings</h3>\n");
        put_rows(b, rows);
    }
    if (json_is_array(ops)) put_ops(b, ops);
    put_histograms(b, c, run_dir);
    put_line_charts(b, c, run_dir);
    html_put_training(b, c, run_dir);
    /* everything else in details, as data */
    int opened = 0;
    size_t nk;
    const char **keys = sorted_keys(details, &nk);
    for (size_t ki = 0; ki < nk; ki++) {
        const char *k = keys[ki];
        const json_t *v = json_object_get(details, k);
        if ((!strcmp(k, "rows") && json_is_array(v)) || (!strcmp(k, "ops") && json_is_array(v))) continue;
        if (!opened) {
            sb_puts(b, "<h3>Details</h3>\n<table>\n");
            opened = 1;
        }
        sb_puts(b, "<tr><th>");
        sb_escape(b, k);
        sb_puts(b, "</th><td>");
        if (json_is_object(v) || json_is_array(v)) {
            char *s = json_dumps(v, JSON_INDENT(1) | JSON_SORT_KEYS | JSON_REAL_PRECISION(10));
            if (s) {
                if (strlen(s) > 16384) strcpy(s + 16370, "\n... (cut)");
                sb_puts(b, "<pre>");
                sb_escape(b, s);
                sb_puts(b, "</pre>");
                free(s);
            }
        } else {
            put_json_value(b, v);
        }
        sb_puts(b, "</td></tr>\n");
    }
    free(keys);
    if (opened) sb_puts(b, "</table>\n");
    const json_t *arts = json_object_get(c, "artifacts");
    if (json_array_size(arts)) {
        sb_puts(b, "<h3>Artifacts</h3>\n<ul>\n");
        size_t i;
        json_t *a;
        json_array_foreach(arts, i, a)
        {
            const char *s = json_string_value(a);
            sb_puts(b, "<li>");
            if (safe_rel(s)) {
                sb_puts(b, "<a href=\"");
                sb_escape(b, s);
                sb_puts(b, "\">");
                sb_escape(b, s);
                sb_puts(b, "</a>");
            } else {
                sb_puts(b, "<code>");
                sb_escape(b, s ? s : "?");
                sb_puts(b, "</code>");
            }
            sb_puts(b, "</li>\n");
        }
        sb_puts(b, "</ul>\n");
    }
    sb_puts(b, "</section>\n");
}

char *html_render(const json_t *root, const char *run_dir)
{
    struct sbuf b = {0};
    const json_t *checks = json_object_get(root, "checks");
    const json_t *host = json_object_get(root, "host");
    /* CSP: nothing may be fetched; inline styles only, no scripts at all. */
    sb_puts(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
                "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n"
                "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n<title>plumb report: ");
    sb_escape(&b, jsonx_str(host, "hostname") ? jsonx_str(host, "hostname") : "unknown host");
    sb_puts(&b, " (");
    sb_escape(&b, jsonx_str(root, "verdict") ? jsonx_str(root, "verdict") : "?");
    sb_puts(&b, ")</title>\n<style>");
    sb_puts(&b, CSS);
    sb_puts(&b, "</style></head>\n<body><main>\n");
    put_header(&b, root);
    put_verdict_table(&b, checks);
    html_put_signature(&b, run_dir);
    size_t i;
    json_t *c;
    json_array_foreach(checks, i, c) put_check(&b, c, i, run_dir);
    html_put_throughput(&b, root);
    put_host(&b, root);
    sb_puts(&b, "<footer>Rendered by plumb ");
    sb_escape(&b, jsonx_str(json_object_get(root, "versions"), "plumb"));
    sb_puts(&b, " from results.json (re-render with <code>plumb report DIR</code>).</footer>\n</main></body></html>\n");
    if (b.oom) {
        sb_free(&b);
        return NULL;
    }
    return b.p;
}

int html_render_file(const json_t *results, const char *run_dir, const char *path, plumb_err *e)
{
    char *s = html_render(results, run_dir);
    if (!s) return err_set(e, PLUMB_ENOMEM, "out of memory rendering %s", path);
    int rc = file_write_atomic(path, s, strlen(s), e);
    free(s);
    return rc;
}
