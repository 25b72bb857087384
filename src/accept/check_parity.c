/* The parity check: the workload's accept preset (accept/seed_runs.h)
 * trained in fast mode with K seeds on ctx->device, every seed's final
 * metrics and loss curve in checks/<name>[-<device>]/seeds.jsonl (name:
 * parity for ctr, parity-W for another workload W), the evidence
 * `plumb compare` tests (docs/COMPARE.md).
 *   - every seed must train and its deciding metric reach the descriptor's
 *     bound (ctr: AUC >= 0.75, the train-ctr check's floor; a
 *     lower-is-better metric must stay at or below its ceiling), else fail;
 *   - on a device that is not the cpu, when the cpu's parity seeds of the
 *     same workload are in the same run folder (plumb accept runs the cpu
 *     first), the device's seeds are tested against them (report/parity.h
 *     at the descriptor's margin, ctr 0.15%): different fails, undecided
 *     warns (with the seeds needed), equivalent passes. */
#include "accept/check_parity.h"
#include "accept/seed_runs.h"
#include "accept/workload_accept.h"
#include "core/file.h"
#include "core/jsonx.h"
#include "report/compare.h"
#include "report/seeds.h"
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

int parity_seeds_for_level(const char *level)
{
    if (level && !strcmp(level, "full")) return 10;
    return 5;
}

static void mean_sd(const json_t *recs, const char *key, double *m, double *sd)
{
    size_t n = 0, i;
    double s = 0, q = 0;
    json_t *r;
    json_array_foreach(recs, i, r) if (json_is_number(json_object_get(r, key))) s += jsonx_num(r, key), n++;
    *m = n ? s / (double)n : NAN;
    json_array_foreach(recs, i, r) if (json_is_number(json_object_get(r, key)))
    {
        double d = jsonx_num(r, key) - *m;
        q += d * d;
    }
    *sd = n > 1 ? sqrt(q / (double)(n - 1)) : NAN;
}

static void compare_with_cpu(const struct check_ctx *ctx, const struct workload *wl, const char *name,
                             struct check_result *r, const char *mine)
{
    const struct workload_accept *a = wl->accept;
    char cpu[PATH_MAX];
    snprintf(cpu, sizeof cpu, "%s/checks/%s/seeds.jsonl", ctx->run_dir, name);
    if (!file_exists(cpu)) return;
    struct seed_set sa, sb;
    plumb_err e = {0};
    if (seeds_read(cpu, &sa, &e)) {
        check_set_status(r, CHECK_WARN, "the cpu's parity seeds cannot be read: %s", e.msg);
        return;
    }
    if (seeds_read(mine, &sb, &e)) {
        seeds_free(&sa);
        check_set_status(r, CHECK_FAIL, "%s", e.msg);
        return;
    }
    struct compare_opts o;
    compare_opts_defaults(&o);
    o.metric = a->metric;
    json_t *g = NULL;
    if (compare_parity_group(&sa, &sb, &o, &g, &e)) {
        check_set_status(r, CHECK_WARN, "parity against the cpu not computed: %s", e.msg);
    } else {
        size_t i;
        json_t *m;
        json_array_foreach(json_object_get(g, "metrics"), i, m)
        {
            if (strcmp(jsonx_str(m, "metric"), a->metric)) continue;
            const char *v = jsonx_str(m, "verdict");
            char n1[80];
            snprintf(n1, sizeof n1, "%s_diff_vs_cpu", a->metric);
            check_metric(r, n1, jsonx_num(m, "diff"), "");
            snprintf(n1, sizeof n1, "%s_tost_p_vs_cpu", a->metric);
            check_metric(r, n1, jsonx_num(json_object_get(m, "tost"), "p"), "");
            snprintf(n1, sizeof n1, "%s_welch_p_vs_cpu", a->metric);
            check_metric(r, n1, jsonx_num(json_object_get(m, "welch"), "p"), "");
            const json_t *ci = json_object_get(m, "ci95");
            const char *txt = jsonx_str(m, "text");
            char what[320];
            snprintf(what, sizeof what, "%s vs the cpu: %s; B-A %+.5g, 95%% CI [%+.5g, %+.5g], TOST p %.3g (margin %s)",
                     a->label, txt, jsonx_num(m, "diff"), json_number_value(json_array_get(ci, 0)),
                     json_number_value(json_array_get(ci, 1)), jsonx_num(json_object_get(m, "tost"), "p"),
                     jsonx_str(json_object_get(m, "margin"), "text"));
            if (!strcmp(v, "different")) check_set_status(r, CHECK_FAIL, "%s", what);
            else if (!strcmp(v, "undecided")) check_set_status(r, CHECK_WARN, "%s", what);
            else json_object_set_new(r->obj, "reason", json_string(what));
        }
        json_object_del(g, "curves"); /* the seeds files hold them */
        check_detail(r, "parity_vs_cpu", g);
    }
    seeds_free(&sa);
    seeds_free(&sb);
}

int check_parity_run(const struct check_ctx *ctx, const struct parity_check_opts *po, struct check_result *r,
                     plumb_err *e)
{
    const char *device = ctx->device ? ctx->device : "cpu";
    struct seed_run_cfg c;
    seed_run_cfg_defaults(&c, device, ctx->threads);
    c.wl = po->wl;
    const struct workload *wl = seed_run_workload(&c);
    if (!wl || !wl->accept) return err_set(e, PLUMB_EINTERNAL, "parity: the workload has no accept descriptor");
    const struct workload_accept *a = wl->accept;
    char name[64];
    accept_check_name("parity", wl, name, sizeof name);
    int rc = check_begin(r, name, device);
    if (rc) return err_set(e, rc, "%s: cannot start the check", name);
    int k = po->seeds > 0 ? po->seeds : parity_seeds_for_level(ctx->level);
    /* the bound is for the workload's schedule: a run shortened by --seed-steps is not held to it */
    int bounded = po->steps <= 0 && a->bound != 0;
    char bname[64];
    accept_bound_name(a, bname, sizeof bname);
    if (bounded) check_threshold(r, bname, a->bound);
    check_threshold(r, "seeds", k);
    char dir[PATH_MAX] = "";
    if ((rc = check_artifact_dir(ctx, r, dir, sizeof dir, e))) {
        check_free(r);
        return rc;
    }
    c.steps = po->steps;
    plant_apply(po->plant, 0, &c);
    char desc[256], path[PATH_MAX + 32], scratch[PATH_MAX + 32], rel[PATH_MAX];
    seed_run_describe(&c, desc, sizeof desc);
    snprintf(path, sizeof path, "%s/seeds.jsonl", dir);
    snprintf(scratch, sizeof scratch, "%s/.run", dir);
    const char *p = strstr(dir, "/checks/");
    if (p) snprintf(rel, sizeof rel, "%s/seeds.jsonl", p + 1);
    else snprintf(rel, sizeof rel, "checks/%s/seeds.jsonl", name);
    check_artifact(r, rel);
    check_detail(r, "workload", json_string(wl->name));
    check_detail(r, "metric", json_pack("{s:s, s:s}", "name", a->metric, "better", a->higher_is_better ? "higher" : "lower"));
    check_detail(r, "setting", json_string(desc));
    check_detail(r, "seeds", json_pack("{s:I, s:i}", "first", (json_int_t)po->seed_base, "count", k));
    check_detail(r, "seed_changes", json_string("model initialisation and shuffling; the data seed is fixed"));
    if (po->plant && po->plant->active)
        check_detail(r, "planted", json_string(po->plant->text));
    json_t *recs = NULL;
    rc = seed_runs(&c, po->seed_base, k, path, scratch, ctx->tty ? stderr : NULL, &recs, e);
    if (rc) {
        check_set_status(r, CHECK_FAIL, "%s", e->msg);
        err_clear(e);
        json_decref(recs);
        return PLUMB_OK;
    }
    /* every metric's mean and std over the seeds, in the records' order */
    double primary_m = NAN;
    const char *key;
    json_t *v;
    json_object_foreach(json_array_get(recs, 0), key, v)
    {
        if (!strcmp(key, "seed") || !json_is_number(v)) continue;
        double m, sd;
        mean_sd(recs, key, &m, &sd);
        char n1[64], n2[64];
        snprintf(n1, sizeof n1, "%s_mean", key);
        snprintf(n2, sizeof n2, "%s_std", key);
        if (isfinite(m)) check_metric(r, n1, m, "");
        if (isfinite(sd)) check_metric(r, n2, sd, "");
        if (!strcmp(key, a->metric)) primary_m = m;
    }
    double tput = 0;
    size_t i, nt = 0;
    json_t *x;
    double worst = NAN;
    long long worst_seed = 0;
    json_array_foreach(recs, i, x)
    {
        double t = jsonx_num(json_object_get(x, "info"), "samples_per_s");
        if (isfinite(t)) tput += t, nt++;
        double val = jsonx_num(x, a->metric);
        if (isnan(worst) || (a->higher_is_better ? val < worst : val > worst))
            worst = val, worst_seed = (long long)jsonx_num(x, "seed");
    }
    if (nt) check_metric(r, "samples_per_s", tput / (double)nt, "samples/s");
    json_decref(recs);
    if (bounded && !accept_bound_ok(a, worst))
        check_set_status(r, CHECK_FAIL, "seed %lld reached %s %.4f, %s the %s %.4g", worst_seed, a->label, worst,
                         a->higher_is_better ? "below" : "above", a->higher_is_better ? "floor" : "ceiling", a->bound);
    else
        check_set_status(r, CHECK_PASS, "%d seeds trained (%s): %s %.5g mean", k, desc, a->label, primary_m);
    if (strncmp(device, "cpu", 3) && r->status != CHECK_FAIL) compare_with_cpu(ctx, wl, name, r, path);
    return PLUMB_OK;
}
