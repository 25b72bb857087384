/* plumb compare's terminal report, from the document of report/compare.h. */
#include "core/jsonx.h"
#include "report/compare.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *s_or(const json_t *o, const char *k, const char *d)
{
    const char *s = jsonx_str(o, k);
    return s ? s : d;
}

static void num(FILE *f, const json_t *v, int width)
{
    if (json_is_number(v)) {
        double x = json_number_value(v);
        if (x != 0 && (fabs(x) < 1e-3 || fabs(x) >= 1e7)) fprintf(f, "%*.4g", width, x);
        else fprintf(f, "%*.6g", width, x);
    } else if (json_is_string(v)) {
        fprintf(f, "%*s", width, json_string_value(v));
    } else {
        fprintf(f, "%*s", width, "-");
    }
}

static void side_line(FILE *f, const char *label, const json_t *s)
{
    if (jsonx_str(s, "file")) {
        fprintf(f, "%s: %s\n", label, jsonx_str(s, "file"));
        return;
    }
    fprintf(f, "%s: %s  (host %s, %s%s%s, verdict %s)\n", label, s_or(s, "dir", "?"), s_or(s, "host", "?"),
            s_or(s, "started", "?"), jsonx_str(s, "device") ? ", device " : "", s_or(s, "device", ""),
            s_or(s, "verdict", "?"));
}

static void print_parity_metric(FILE *f, const json_t *m)
{
    const json_t *ci = json_object_get(m, "ci95");
    char name[48];
    snprintf(name, sizeof name, "%s%s", s_or(m, "metric", "?"), json_is_true(json_object_get(m, "primary")) ? "*" : "");
    fprintf(f, "  %-12s A %.6g +- %.2g (n %d)   B %.6g +- %.2g (n %d)\n", name, jsonx_num(m, "mean_a"),
            jsonx_num(m, "std_a"), (int)jsonx_num(m, "n_a"), jsonx_num(m, "mean_b"), jsonx_num(m, "std_b"),
            (int)jsonx_num(m, "n_b"));
    const json_t *gs = json_object_get(m, "gap_sd");
    char gap[48];
    if (json_is_number(gs)) snprintf(gap, sizeof gap, "%+.2f", json_number_value(gs));
    else snprintf(gap, sizeof gap, "%s", json_is_string(gs) ? json_string_value(gs) : "-");
    fprintf(f, "  %-12s B-A %+.4g (%+.3f%%), 95%% CI [%+.4g, %+.4g], %s seed sd\n", "", jsonx_num(m, "diff"),
            100 * jsonx_num(m, "rel_diff"), json_number_value(json_array_get(ci, 0)),
            json_number_value(json_array_get(ci, 1)), gap);
    const json_t *t = json_object_get(m, "tost"), *w = json_object_get(m, "welch"), *p = json_object_get(m, "permutation");
    fprintf(f, "  %-12s TOST p %.3g (margin %s); Welch t %.3f df %.1f p %.3g; permutation p %.3g (%s, %d splits); KS p %.3g\n",
            "", jsonx_num(t, "p"), s_or(json_object_get(m, "margin"), "text", "?"), jsonx_num(w, "t"), jsonx_num(w, "df"),
            jsonx_num(w, "p"), jsonx_num(p, "p"), json_is_true(json_object_get(p, "exact")) ? "exact" : "reshuffled",
            (int)jsonx_num(p, "splits"), jsonx_num(json_object_get(m, "ks"), "p"));
    char ahead[80] = "";
    const char *bva = jsonx_str(m, "b_vs_a"), *better = jsonx_str(m, "better");
    if (bva && better) snprintf(ahead, sizeof ahead, "; B %s (%s is better)", strcmp(bva, "same") ? bva : "the same", better);
    fprintf(f, "  %-12s -> %s (seeds needed per side for a decision at this spread: %.1f)%s\n", "", s_or(m, "text", "?"),
            jsonx_num(m, "seeds_needed"), ahead);
}

static void print_ladder(FILE *f, const json_t *l)
{
    int two = json_object_get(l, "device_b") != NULL;
    fprintf(f, "\nattribution ladder (%s%s%s%s%s; A %s%s%s):\n", jsonx_str(l, "workload") ? jsonx_str(l, "workload") : "",
            jsonx_str(l, "workload") ? " " : "", s_or(l, "metric", "?"), jsonx_str(l, "better") ? ", " : "",
            jsonx_str(l, "better") ? (!strcmp(jsonx_str(l, "better"), "higher") ? "higher is better" : "lower is better") : "",
            s_or(l, "device_a", "?"), two ? ", B " : "", two ? s_or(l, "device_b", "") : "");
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(l, "rungs"), i, r)
    {
        const json_t *a = json_object_get(r, "a"), *b = json_object_get(r, "b");
        fprintf(f, "  %d %-12s A %.5f [%.5f, %.5f]", (int)jsonx_num(r, "rung"), s_or(r, "name", "?"), jsonx_num(a, "mean"),
                json_number_value(json_array_get(json_object_get(a, "ci95"), 0)),
                json_number_value(json_array_get(json_object_get(a, "ci95"), 1)));
        const json_t *sa = json_object_get(r, "shift_a");
        if (json_is_object(sa) && json_is_number(json_object_get(sa, "sd_units")))
            fprintf(f, " shift %+.5f (%+.1f sd%s)", jsonx_num(sa, "diff"), jsonx_num(sa, "sd_units"),
                    json_is_true(json_object_get(sa, "significant")) ? ", p<0.05" : "");
        if (b) {
            fprintf(f, " | B %.5f [%.5f, %.5f]", jsonx_num(b, "mean"),
                    json_number_value(json_array_get(json_object_get(b, "ci95"), 0)),
                    json_number_value(json_array_get(json_object_get(b, "ci95"), 1)));
            const json_t *p = json_object_get(r, "parity");
            const json_t *sb = json_object_get(r, "shift_b");
            if (json_is_object(sb) && json_is_number(json_object_get(sb, "sd_units")))
                fprintf(f, " shift %+.5f (%+.1f sd%s)", jsonx_num(sb, "diff"), jsonx_num(sb, "sd_units"),
                        json_is_true(json_object_get(sb, "significant")) ? ", p<0.05" : "");
            if (p && !json_object_get(r, "decided_by"))
                fprintf(f, " | TOST p %.3g, Welch p %.3g, perm p %.3g", jsonx_num(json_object_get(p, "tost"), "p"),
                        jsonx_num(json_object_get(p, "welch"), "p"), jsonx_num(json_object_get(p, "permutation"), "p"));
            if (json_object_get(r, "golden_equal"))
                fprintf(f, " golden %s", json_is_true(json_object_get(r, "golden_equal")) ? "bit-equal" : "DIFFERS");
            if (json_object_get(r, "decided_by")) fprintf(f, " -> %s", s_or(r, "decided_by", ""));
            else fprintf(f, " -> %s", p ? s_or(p, "text", "?") : "-");
        }
        fprintf(f, "\n");
        const char *na = jsonx_str(r, "note_a"), *nb = jsonx_str(r, "note_b");
        if (na && nb && !strcmp(na, nb)) fprintf(f, "      note (A and B): %s\n", na);
        else {
            if (na) fprintf(f, "      note (A): %s\n", na);
            if (nb) fprintf(f, "      note (B): %s\n", nb);
        }
    }
    json_array_foreach(json_object_get(l, "skipped"), i, r)
        fprintf(f, "  %d %-12s %s\n", (int)jsonx_num(r, "rung"), s_or(r, "name", "?"), s_or(r, "why", ""));
    fprintf(f, "  %s\n", s_or(l, "text", ""));
}

void compare_print(FILE *f, const json_t *doc)
{
    side_line(f, "A", json_object_get(doc, "a"));
    side_line(f, "B", json_object_get(doc, "b"));
    const json_t *pairs = json_object_get(doc, "pairs");
    if (json_array_size(pairs)) {
        fprintf(f, "\n%-22s %-10s %-10s %-5s %-5s\n", "CHECK", "DEVICE A", "DEVICE B", "A", "B");
        size_t i;
        json_t *p;
        json_array_foreach(pairs, i, p)
        {
            char name[64];
            snprintf(name, sizeof name, "%s%s%s", s_or(p, "name", "?"), *s_or(p, "mode", "") ? " " : "", s_or(p, "mode", ""));
            fprintf(f, "%-22s %-10s %-10s %-5s %-5s\n", name, *s_or(p, "device_a", "") ? s_or(p, "device_a", "") : "-",
                    *s_or(p, "device_b", "") ? s_or(p, "device_b", "") : "-", s_or(p, "status_a", "?"),
                    s_or(p, "status_b", "?"));
        }
    }
    size_t i;
    json_t *u;
    json_array_foreach(json_object_get(doc, "unmatched"), i, u)
        fprintf(f, "  only in %s: %s%s%s%s%s\n", !strcmp(s_or(u, "side", ""), "a") ? "A" : "B", s_or(u, "name", "?"),
                *s_or(u, "mode", "") ? " " : "", s_or(u, "mode", ""), *s_or(u, "device", "") ? " on " : "",
                s_or(u, "device", ""));
    if (jsonx_str(doc, "hint")) fprintf(f, "  (%s)\n", jsonx_str(doc, "hint"));
    const json_t *dig = json_object_get(doc, "digests");
    if (json_array_size(dig)) {
        size_t eq = 0, n = json_array_size(dig);
        json_t *r;
        json_array_foreach(dig, i, r) eq += json_is_true(json_object_get(r, "equal"));
        fprintf(f, "\ndigests: %zu of %zu rows equal\n", eq, n);
        json_array_foreach(dig, i, r) if (!json_is_true(json_object_get(r, "equal")))
            fprintf(f, "  DIFFERS %-16s %s\n", s_or(r, "kind", ""), s_or(r, "item", ""));
        const json_t *fault = json_object_get(doc, "digest_fault");
        if (json_is_object(fault)) fprintf(f, "  %s\n", s_or(fault, "message", ""));
    }
    const json_t *thr = json_object_get(doc, "throughput");
    if (json_array_size(thr)) {
        fprintf(f, "\nthroughput:\n");
        json_t *t;
        json_array_foreach(thr, i, t)
        {
            double a = jsonx_num(t, "a"), b = jsonx_num(t, "b");
            fprintf(f, "  %-12s %-22s A ", s_or(t, "check", ""), s_or(t, "name", ""));
            num(f, json_object_get(t, "a"), 10);
            fprintf(f, "  B ");
            num(f, json_object_get(t, "b"), 10);
            fprintf(f, " %s", s_or(t, "unit", ""));
            if (a > 0 && isfinite(b)) fprintf(f, "  (B/A %.3f)", b / a);
            fprintf(f, "\n");
        }
    }
    json_t *g;
    json_array_foreach(json_object_get(doc, "parity"), i, g)
    {
        fprintf(f, "\ntraining parity: %s%s%s%s%s (A %s, B %s)\n", s_or(g, "check", "?"), *s_or(g, "device_a", "") ? " " : "",
                s_or(g, "device_a", ""), *s_or(g, "device_b", "") ? " vs " : "", s_or(g, "device_b", ""),
                s_or(g, "source_a", "?"), s_or(g, "source_b", "?"));
        size_t j;
        json_t *m;
        json_array_foreach(json_object_get(g, "metrics"), j, m) print_parity_metric(f, m);
        const json_t *c = json_object_get(g, "curves");
        if (c) fprintf(f, "  loss curves: %s\n", s_or(c, "text", ""));
        fprintf(f, "  (* the primary metric: its verdict is the group's)\n");
    }
    const json_t *lad = json_object_get(doc, "ladder");
    if (json_is_object(lad)) print_ladder(f, lad);
    const json_t *sig = json_object_get(doc, "signatures");
    if (json_is_object(sig)) {
        const json_t *sa = json_object_get(sig, "a"), *sb = json_object_get(sig, "b");
        if (strcmp(s_or(sa, "status", "unsigned"), "unsigned") || strcmp(s_or(sb, "status", "unsigned"), "unsigned"))
            fprintf(f, "\nsignatures: A %s%s%s; B %s%s%s\n", s_or(sa, "status", "?"), jsonx_str(sa, "message") ? ": " : "",
                    s_or(sa, "message", ""), s_or(sb, "status", "?"), jsonx_str(sb, "message") ? ": " : "",
                    s_or(sb, "message", ""));
    }
    fprintf(f, "\nverdict: %s\n%s\n", s_or(doc, "verdict", "?"), s_or(doc, "summary", ""));
}
