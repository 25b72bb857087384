/* The parity check: ctr-tiny trained in fast mode with K seeds on
 * ctx->device (accept/seed_runs.h), every seed's final metrics and loss
 * curve in checks/parity[-<device>]/seeds.jsonl, the evidence
 * `plumb compare` tests (docs/COMPARE.md).
 *   - every seed must train and reach the AUC floor of the train-ctr check
 *     (0.75), else fail;
 *   - on a device that is not the cpu, when the cpu's parity seeds are in
 *     the same run folder (plumb accept runs the cpu first), the device's
 *     seeds are tested against them (report/parity.h at the default 0.15%
 *     margin): different fails, undecided warns (with the seeds needed),
 *     equivalent passes. */
#include "accept/check_parity.h"
#include "accept/seed_runs.h"
#include "core/file.h"
#include "core/jsonx.h"
#include "report/compare.h"
#include "report/seeds.h"
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define AUC_FLOOR 0.75

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

static void compare_with_cpu(const struct check_ctx *ctx, struct check_result *r, const char *mine)
{
    char cpu[PATH_MAX];
    snprintf(cpu, sizeof cpu, "%s/checks/parity/seeds.jsonl", ctx->run_dir);
    if (!file_exists(cpu)) return;
    struct seed_set a, b;
    plumb_err e = {0};
    if (seeds_read(cpu, &a, &e)) {
        check_set_status(r, CHECK_WARN, "the cpu's parity seeds cannot be read: %s", e.msg);
        return;
    }
    if (seeds_read(mine, &b, &e)) {
        seeds_free(&a);
        check_set_status(r, CHECK_FAIL, "%s", e.msg);
        return;
    }
    struct compare_opts o;
    compare_opts_defaults(&o);
    json_t *g = NULL;
    if (compare_parity_group(&a, &b, &o, &g, &e)) {
        check_set_status(r, CHECK_WARN, "parity against the cpu not computed: %s", e.msg);
    } else {
        size_t i;
        json_t *m;
        json_array_foreach(json_object_get(g, "metrics"), i, m)
        {
            if (strcmp(jsonx_str(m, "metric"), "auc")) continue;
            const char *v = jsonx_str(m, "verdict");
            check_metric(r, "auc_diff_vs_cpu", jsonx_num(m, "diff"), "");
            check_metric(r, "auc_tost_p_vs_cpu", jsonx_num(json_object_get(m, "tost"), "p"), "");
            check_metric(r, "auc_welch_p_vs_cpu", jsonx_num(json_object_get(m, "welch"), "p"), "");
            const json_t *ci = json_object_get(m, "ci95");
            const char *txt = jsonx_str(m, "text");
            char what[256];
            snprintf(what, sizeof what, "AUC vs the cpu: %s; B-A %+.5f, 95%% CI [%+.5f, %+.5f], TOST p %.3g (margin %s)",
                     txt, jsonx_num(m, "diff"), json_number_value(json_array_get(ci, 0)),
                     json_number_value(json_array_get(ci, 1)), jsonx_num(json_object_get(m, "tost"), "p"),
                     jsonx_str(json_object_get(m, "margin"), "text"));
            if (!strcmp(v, "different")) check_set_status(r, CHECK_FAIL, "%s", what);
            else if (!strcmp(v, "undecided")) check_set_status(r, CHECK_WARN, "%s", what);
            else json_object_set_new(r->obj, "reason", json_string(what));
        }
        json_object_del(g, "curves"); /* the seeds files hold them */
        check_detail(r, "parity_vs_cpu", g);
    }
    seeds_free(&a);
    seeds_free(&b);
}

int check_parity_run(const struct check_ctx *ctx, const struct parity_check_opts *po, struct check_result *r,
                     plumb_err *e)
{
    const char *device = ctx->device ? ctx->device : "cpu";
    int rc = check_begin(r, "parity", device);
    if (rc) return err_set(e, rc, "parity: cannot start the check");
    int k = po->seeds > 0 ? po->seeds : parity_seeds_for_level(ctx->level);
    /* the floor is for the workload's schedule: a run shortened by --seed-steps is not held to it */
    if (po->steps <= 0) check_threshold(r, "auc_floor", AUC_FLOOR);
    check_threshold(r, "seeds", k);
    char dir[PATH_MAX] = "";
    if ((rc = check_artifact_dir(ctx, r, dir, sizeof dir, e))) {
        check_free(r);
        return rc;
    }
    struct seed_run_cfg c;
    seed_run_cfg_defaults(&c, device, ctx->threads);
    c.steps = po->steps;
    plant_apply(po->plant, 0, &c);
    char desc[160], path[PATH_MAX + 32], scratch[PATH_MAX + 32], rel[PATH_MAX];
    seed_run_describe(&c, desc, sizeof desc);
    snprintf(path, sizeof path, "%s/seeds.jsonl", dir);
    snprintf(scratch, sizeof scratch, "%s/.run", dir);
    const char *p = strstr(dir, "/checks/");
    snprintf(rel, sizeof rel, "%s/seeds.jsonl", p ? p + 1 : "checks/parity");
    check_artifact(r, rel);
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
    static const char *keys[] = {"auc", "logloss", "accuracy"};
    double auc_m = NAN;
    for (int i = 0; i < 3; i++) {
        double m, sd;
        mean_sd(recs, keys[i], &m, &sd);
        char n1[64], n2[64];
        snprintf(n1, sizeof n1, "%s_mean", keys[i]);
        snprintf(n2, sizeof n2, "%s_std", keys[i]);
        if (isfinite(m)) check_metric(r, n1, m, "");
        if (isfinite(sd)) check_metric(r, n2, sd, "");
        if (!i) auc_m = m;
    }
    double tput = 0;
    size_t i, nt = 0;
    json_t *x;
    double lowest = INFINITY;
    long long low_seed = 0;
    json_array_foreach(recs, i, x)
    {
        double t = jsonx_num(json_object_get(x, "info"), "samples_per_s");
        if (isfinite(t)) tput += t, nt++;
        if (jsonx_num(x, "auc") < lowest) lowest = jsonx_num(x, "auc"), low_seed = (long long)jsonx_num(x, "seed");
    }
    if (nt) check_metric(r, "samples_per_s", tput / (double)nt, "samples/s");
    json_decref(recs);
    if (po->steps <= 0 && !(lowest >= AUC_FLOOR))
        check_set_status(r, CHECK_FAIL, "seed %lld reached AUC %.4f, below the floor %.2f", low_seed, lowest, AUC_FLOOR);
    else
        check_set_status(r, CHECK_PASS, "%d seeds trained (%s): AUC %.5f mean", k, desc, auc_m);
    if (strncmp(device, "cpu", 3) && r->status != CHECK_FAIL) compare_with_cpu(ctx, r, path);
    return PLUMB_OK;
}
