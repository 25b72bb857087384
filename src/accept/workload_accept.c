/* The workload accept descriptor's helpers (accept/workload_accept.h). */
#include "accept/workload_accept.h"
#include "models/workloads.h"
#include "report/parity.h"
#include "train/options.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

const struct workload *accept_workload_at(int i)
{
    for (int k = 0, seen = 0; workload_at(k); k++)
        if (workload_at(k)->accept && seen++ == i) return workload_at(k);
    return NULL;
}

void accept_workload_names(char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; accept_workload_at(i) && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? ", " : "", accept_workload_at(i)->name);
}

int accept_workload_find(const char *name, const char *opt, const struct workload **out, plumb_err *e)
{
    const struct workload *wl = workload_find(name);
    *out = NULL;
    if (wl && wl->accept) {
        *out = wl;
        return PLUMB_OK;
    }
    char names[256];
    accept_workload_names(names, sizeof names);
    return err_set(e, PLUMB_EUSAGE, "%s: '%s' is %s (expected one of: %s)", opt, name ? name : "",
                   wl ? "a workload without accept checks" : "not a workload", names);
}

int accept_workload_standard(const struct workload *wl, char *why, size_t n)
{
    const struct workload_accept *a = wl ? wl->accept : NULL;
    if (why && n) why[0] = 0;
    if (!a) {
        if (why) snprintf(why, n, "no accept descriptor");
        return 0;
    }
    if (a->not_standard) {
        if (why) snprintf(why, n, "%s", a->not_standard);
        return 0;
    }
    if (!(a->cpu_run_s <= ACCEPT_STANDARD_RUN_S)) {
        if (why) snprintf(why, n, "one run of %s takes ~%.0f s on 2 cpu cores, more than %.0f s", a->preset,
                          a->cpu_run_s, ACCEPT_STANDARD_RUN_S);
        return 0;
    }
    return 1;
}

void accept_standard_desc(char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = 0;
    int first = 1;
    for (int i = 0; accept_workload_at(i) && k < n; i++)
        if (accept_workload_standard(accept_workload_at(i), NULL, 0)) {
            k += (size_t)snprintf(buf + k, n - k, "%s%s", first ? "" : ",", accept_workload_at(i)->name);
            first = 0;
        }
    for (int i = 0; accept_workload_at(i) && k < n; i++) {
        char why[256];
        if (accept_workload_standard(accept_workload_at(i), why, sizeof why)) continue;
        k += (size_t)snprintf(buf + k, n - k, "; not %s: %s", accept_workload_at(i)->name, why);
    }
}

void accept_check_name(const char *base, const struct workload *wl, char *buf, size_t n)
{
    if (!wl || !strcmp(wl->name, ACCEPT_DEFAULT_WORKLOAD)) snprintf(buf, n, "%s", base);
    else snprintf(buf, n, "%s-%s", base, wl->name);
}

/* Is word in the comma list? */
static int in_list(const char *list, const char *word)
{
    size_t L = strlen(word);
    for (const char *p = list; p && *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == L && !strncmp(p, word, L)) return 1;
        if (!comma) break;
        p = comma + 1;
    }
    return 0;
}

int accept_metric_higher(const struct workload *wl, const char *metric)
{
    const struct workload_accept *a = wl->accept;
    if (!strcmp(metric, a->metric)) return a->higher_is_better != 0;
    return !in_list(a->lower_is_better, metric);
}

int accept_precision_ok(const struct workload *wl, dtype_t p)
{
    const char *list = wl->accept->precisions;
    return !list || in_list(list, dtype_name(p));
}

int accept_bound_ok(const struct workload_accept *a, double v)
{
    if (a->bound == 0) return 1;
    return a->higher_is_better ? v >= a->bound : v <= a->bound;
}

void accept_bound_name(const struct workload_accept *a, char *buf, size_t n)
{
    snprintf(buf, n, "%s_%s", a->metric, a->higher_is_better ? "floor" : "ceiling");
}

static int set_list(struct train_config *c, const struct preset_default *d, plumb_err *e)
{
    for (; d && d->opt; d++) {
        int rc = train_option_set(c, d->opt, d->value, e);
        if (rc) return rc;
    }
    return PLUMB_OK;
}

int accept_train_config(const struct workload *wl, int golden, const struct accept_opt *extra, int n,
                        struct train_config *c, plumb_err *e)
{
    const struct workload_accept *a = wl->accept;
    train_config_defaults(c, wl);
    int rc = train_option_set(c, "--preset", a->preset, e);
    if (!rc) rc = set_list(c, golden ? a->golden : a->fast, e);
    if (!rc && golden) rc = train_option_set(c, "--numerics", "golden", e);
    for (int i = 0; i < n && !rc; i++) rc = train_option_set(c, extra[i].opt, extra[i].value, e);
    if (!rc) rc = train_option_set(c, "--quiet", NULL, e);
    if (!rc) rc = train_config_finish(c, e);
    if (rc) return err_wrap(e, "%s accept run (%s, %s)", wl->name, a->preset, golden ? "golden" : "fast");
    c->progress = 0;
    return PLUMB_OK;
}

int workload_accept_validate(const struct workload *wl, plumb_err *e)
{
    const struct workload_accept *a = wl->accept;
    if (!a) return err_set(e, PLUMB_EUSAGE, "%s: no accept descriptor", wl->name);
    if (!a->preset || !a->metric || !*a->metric || !a->label || !a->margin)
        return err_set(e, PLUMB_EUSAGE, "%s accept: preset, metric, label and margin are required", wl->name);
    if (in_list(a->lower_is_better, a->metric))
        return err_set(e, PLUMB_EUSAGE, "%s accept: lower_is_better lists the deciding metric %s (its direction is "
                       "higher_is_better)", wl->name, a->metric);
    if (!(a->spread_floor > 0) || !isfinite(a->spread_floor))
        return err_set(e, PLUMB_EUSAGE, "%s accept: spread_floor %g is not > 0", wl->name, a->spread_floor);
    if (!isfinite(a->bound)) return err_set(e, PLUMB_EUSAGE, "%s accept: bound is not finite", wl->name);
    if (!(a->cpu_run_s > 0)) return err_set(e, PLUMB_EUSAGE, "%s accept: cpu_run_s %g is not > 0", wl->name, a->cpu_run_s);
    double abs_m;
    int rel;
    double v;
    if (parity_parse_margin(a->margin, 1.0, &abs_m, &rel, &v, e)) return err_wrap(e, "%s accept: margin", wl->name);
    if (a->precisions) {
        char buf[64];
        snprintf(buf, sizeof buf, "%s", a->precisions);
        for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
            if (strcmp(t, "fp32") && strcmp(t, "bf16") && strcmp(t, "fp16"))
                return err_set(e, PLUMB_EUSAGE, "%s accept: precision '%s' is not fp32, bf16 or fp16", wl->name, t);
        if (!in_list(a->precisions, "fp32"))
            return err_set(e, PLUMB_EUSAGE, "%s accept: precisions '%s' lack fp32 (the fast and golden runs)",
                           wl->name, a->precisions);
    }
    struct train_config c;
    for (int g = 0; g < 2; g++) {
        int rc = accept_train_config(wl, g, NULL, 0, &c, e);
        if (rc) return rc;
    }
    return PLUMB_OK;
}
