/* The train-<workload> check: the workload's accept preset (train/model.h,
 * struct workload_accept; accept/workload_accept.h) trained on
 * ctx->device, judged on the descriptor's deciding metric M (ctr: AUC):
 *   1. fast, fp32, the preset's schedule with the descriptor's fast options:
 *      pass when M reaches the descriptor's bound (ctr: AUC >= 0.75; the
 *      teacher's own AUC is ~0.80 and ctr-tiny reaches ~0.76 on the cpu; a
 *      lower-is-better M must stay at or below it);
 *   2. the fast M compared with the cpu's (README.md, the train-ctr check:
 *      fast-mode metric within the cpu's seed-to-seed spread):
 *      - device not the cpu: the same fast run on the cpu with K seeds
 *        s0..s0+K-1 (s0 the device run's; the seed drives the model init
 *        and the shuffling, the data seed stays fixed so every run sees the
 *        same train and eval sets); pass when |M_dev(s0) - M_cpu(s0)| <=
 *        max(max - min of the K cpu values, spread_floor). K = 3 (5 at
 *        --full, 2 at --quick). The cpu runs are sequential: trainer_run
 *        installs process-wide signal handlers and the watchdog is one
 *        global thread. The comparison is two-sided, whichever direction is
 *        better;
 *      - device the cpu (a cpu-only host): the same fast run at another
 *        thread count. Equal parameter digests are reported as such (the
 *        metrics are then the same number: no spread is measured); different
 *        bits are compared with spread_floor alone;
 *   3. golden, with the descriptor's golden options, on the device and on
 *      the cpu: the parameter digests must be equal (on a cpu-only host the
 *      second run uses one thread, so it checks thread-count independence
 *      instead).
 * One process, the self comm. Names derive from M: thresholds M_floor (or
 * M_ceiling) and M_tolerance_floor, details.fast_M_vs_cpu, metrics M_cpu,
 * M_diff_vs_cpu, ... (ctr: auc_floor, fast_auc_vs_cpu, auc_cpu). */
#include "accept/checks.h"
#include "accept/workload_accept.h"
#include "comm/comm.h"
#include "core/log.h"
#include "train/options.h"
#include "train/trainer.h"
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define MAX_SEEDS 8

int train_spread_verdict(double dev_value, const double *cpu_values, int k, double floor, double *spread,
                         double *tol)
{
    double lo = INFINITY, hi = -INFINITY;
    int finite = k >= 1 && isfinite(dev_value) && isfinite(floor);
    for (int i = 0; i < k; i++) {
        if (!isfinite(cpu_values[i])) finite = 0;
        if (cpu_values[i] < lo) lo = cpu_values[i];
        if (cpu_values[i] > hi) hi = cpu_values[i];
    }
    if (!finite) {
        if (spread) *spread = NAN;
        if (tol) *tol = NAN;
        return 0;
    }
    double sp = hi - lo, t = sp > floor ? sp : floor;
    if (spread) *spread = sp;
    if (tol) *tol = t;
    return fabs(dev_value - cpu_values[0]) <= t;
}

/* K cpu seeds per level (ctx->level). */
static int seeds_for_level(const char *level)
{
    if (level && !strcmp(level, "full")) return 5;
    if (level && !strcmp(level, "quick")) return 2;
    return 3;
}

/* A JSON number, or null for NaN/inf (json_real refuses them). */
static json_t *jnum(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

static void metric_if_finite(struct check_result *r, const char *name, double v)
{
    if (isfinite(v)) check_metric(r, name, v, "");
}

/* "<metric><suffix>" */
static const char *mname(const struct workload_accept *a, const char *suffix, char *buf, size_t n)
{
    snprintf(buf, n, "%s%s", a->metric, suffix);
    return buf;
}

/* The accept preset on device (accept/workload_accept.h); golden: the
 * descriptor's golden options. A seed of 0 keeps the preset's. */
static int run_cfg(const struct workload *wl, const char *device, int threads, int golden, uint64_t seed,
                   struct train_config *c, plumb_err *e)
{
    char th[32], sd[32];
    snprintf(th, sizeof th, "%d", threads > 0 ? threads : 0);
    snprintf(sd, sizeof sd, "%llu", (unsigned long long)seed);
    struct accept_opt x[3] = {{"--device", device}, {"--threads", th}, {"--seed", sd}};
    return accept_train_config(wl, golden, x, seed ? 3 : 2, c, e);
}

/* The run's value of the deciding metric: NaN when absent or undefined. */
static double value_of(const struct workload *wl, const struct train_result *tr)
{
    return eval_metric(&tr->eval, wl->accept->metric);
}

/* The cpu reference runs depend only on (workload, threads, K): an accept
 * over several GPUs (the check runs once per device, one after another, in
 * one process) trains them once and reuses them. */
static struct {
    int valid, threads, k;
    const struct workload *wl;
    double value[MAX_SEEDS];
    char digest[MAX_SEEDS][65];
    double wall_s;
} g_cpu_ref;

/* Device not the cpu: the same fast run on the cpu with K seeds from the
 * device run's; the device's value must lie within the cpu's seed spread of
 * the cpu's value at the same seed. A cpu run that cannot train fails the
 * check (the reference is missing). */
static void compare_cpu_seeds(const struct check_ctx *ctx, const struct workload *wl, struct check_result *r,
                              struct comm *c, const char *device, const struct train_result *dev_tr, plumb_err *e)
{
    const struct workload_accept *a = wl->accept;
    int k = seeds_for_level(ctx->level);
    struct train_config cfg;
    if (run_cfg(wl, "cpu", ctx->threads, 0, 0, &cfg, e)) {
        check_set_status(r, CHECK_FAIL, "cpu reference config: %s", e->msg);
        err_clear(e);
        return;
    }
    const uint64_t s0 = cfg.seed;
    int reused = g_cpu_ref.valid && g_cpu_ref.wl == wl && g_cpu_ref.threads == ctx->threads && g_cpu_ref.k == k;
    if (!reused) {
        g_cpu_ref.valid = 0;
        g_cpu_ref.wall_s = 0;
        for (int i = 0; i < k; i++) {
            struct train_result tr;
            int rc = run_cfg(wl, "cpu", ctx->threads, 0, s0 + (uint64_t)i, &cfg, e);
            if (!rc) rc = trainer_run(&cfg, c, &tr, e);
            if (rc) {
                check_set_status(r, CHECK_FAIL, "cpu reference training (seed %llu) failed: %s",
                                 (unsigned long long)(s0 + (uint64_t)i), e->msg);
                err_clear(e);
                return;
            }
            g_cpu_ref.value[i] = value_of(wl, &tr);
            snprintf(g_cpu_ref.digest[i], sizeof g_cpu_ref.digest[i], "%s", tr.param_digest);
            g_cpu_ref.wall_s += tr.wall_s;
        }
        g_cpu_ref.wl = wl;
        g_cpu_ref.threads = ctx->threads;
        g_cpu_ref.k = k;
        g_cpu_ref.valid = 1;
    }
    const double *ref = g_cpu_ref.value, mine = value_of(wl, dev_tr);
    json_t *seeds = json_array(), *vals = json_array(), *digests = json_array();
    for (int i = 0; i < k; i++) {
        json_array_append_new(seeds, json_integer((json_int_t)(s0 + (uint64_t)i)));
        json_array_append_new(vals, jnum(ref[i]));
        json_array_append_new(digests, json_string(g_cpu_ref.digest[i]));
    }
    double spread, tol, diff = fabs(mine - ref[0]);
    int pass = train_spread_verdict(mine, ref, k, a->spread_floor, &spread, &tol);
    char n1[64];
    json_t *d = json_object();
    json_object_set_new(d, "compared_with", json_string("cpu, seed-to-seed spread"));
    json_object_set_new(d, "metric", json_string(a->metric));
    json_object_set_new(d, "seeds", seeds);
    json_object_set_new(d, mname(a, "_device", n1, sizeof n1), jnum(mine));
    json_object_set_new(d, mname(a, "_cpu", n1, sizeof n1), vals);
    json_object_set_new(d, "param_digest_cpu", digests);
    json_object_set_new(d, "spread", jnum(spread));
    json_object_set_new(d, "tolerance_floor", json_real(a->spread_floor));
    json_object_set_new(d, "tolerance", jnum(tol));
    json_object_set_new(d, "diff", jnum(diff));
    json_object_set_new(d, "pass", json_boolean(pass));
    json_object_set_new(d, "cpu_runs", json_string(reused ? "reused from an earlier device of this run" : "trained"));
    char key[80];
    snprintf(key, sizeof key, "fast_%s_vs_cpu", a->metric);
    check_detail(r, key, d);
    check_metric(r, "cpu_reference_train_s", g_cpu_ref.wall_s, "s");
    metric_if_finite(r, mname(a, "_cpu", n1, sizeof n1), ref[0]);
    metric_if_finite(r, mname(a, "_cpu_seed_spread", n1, sizeof n1), spread);
    metric_if_finite(r, mname(a, "_tolerance", n1, sizeof n1), tol);
    metric_if_finite(r, mname(a, "_diff_vs_cpu", n1, sizeof n1), diff);
    if (!pass) {
        char list[MAX_SEEDS * 16] = "";
        for (int i = 0; i < k; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%.4f", i ? ", " : "", ref[i]);
        check_set_status(r, CHECK_FAIL,
                         "fast %s %.4f on %s differs from the cpu's %.4f (seed %llu) by %.4f, more than the "
                         "tolerance %.4f = max(cpu seed spread %.4f, %.4g); cpu %s over seeds %llu..%llu: %s",
                         a->label, mine, device, ref[0], (unsigned long long)s0, diff, tol, spread, a->spread_floor,
                         a->label, (unsigned long long)s0, (unsigned long long)(s0 + (uint64_t)k - 1), list);
    }
}

/* The device is the cpu: the fast run again at another thread count. */
static void compare_cpu_threads(const struct check_ctx *ctx, const struct workload *wl, struct check_result *r,
                                struct comm *c, const struct train_result *dev_tr, plumb_err *e)
{
    const struct workload_accept *a = wl->accept;
    /* the trainer's own default: every online core */
    int n = ctx->threads > 0 ? ctx->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    int alt = n > 1 ? 1 : 2;
    struct train_config cfg;
    struct train_result tr;
    int rc = run_cfg(wl, "cpu", alt, 0, 0, &cfg, e);
    if (!rc) rc = trainer_run(&cfg, c, &tr, e);
    if (rc) {
        check_set_status(r, CHECK_FAIL, "fast training on the cpu with %d threads failed: %s", alt, e->msg);
        err_clear(e);
        return;
    }
    double v0 = value_of(wl, dev_tr), v1 = value_of(wl, &tr);
    int same = !strcmp(dev_tr->param_digest, tr.param_digest);
    double diff = fabs(v0 - v1);
    int pass = same || (isfinite(diff) && diff <= a->spread_floor);
    json_t *d = json_object();
    json_object_set_new(d, "compared_with", json_string("cpu, another thread count (no seed spread on the cpu itself)"));
    json_object_set_new(d, "metric", json_string(a->metric));
    json_object_set_new(d, "threads", json_pack("[ii]", n, alt));
    json_object_set_new(d, a->metric, json_pack("[oo]", jnum(v0), jnum(v1)));
    json_object_set_new(d, "param_digest_equal", json_boolean(same));
    json_object_set_new(d, "diff", jnum(diff));
    char note[256];
    if (same) {
        snprintf(note, sizeof note, "fast parameters bit-identical at both thread counts: the %s values are the same "
                 "number, no spread comparison was made", a->label);
        json_object_set_new(d, "note", json_string(note));
    } else {
        snprintf(note, sizeof note, "fast bits depend on the thread count: %s difference compared with the tolerance "
                 "floor (no seed spread measured)", a->label);
        json_object_set_new(d, "tolerance", json_real(a->spread_floor));
        json_object_set_new(d, "note", json_string(note));
    }
    json_object_set_new(d, "pass", json_boolean(pass));
    char key[80], n1[64];
    snprintf(key, sizeof key, "fast_%s_vs_cpu", a->metric);
    check_detail(r, key, d);
    check_metric(r, "fast_threads_digest_match", same ? 1.0 : 0.0, "");
    metric_if_finite(r, mname(a, "_diff_vs_cpu", n1, sizeof n1), diff);
    if (!pass)
        check_set_status(r, CHECK_FAIL, "fast %s %.4f with %d threads vs %.4f with %d: differs by %.4f > %.4g",
                         a->label, v0, n, v1, alt, diff, a->spread_floor);
}

/* "auc, logloss, accuracy" */
static void metric_list(const struct eval_metrics *m, char *buf, size_t n)
{
    buf[0] = 0;
    for (int i = 0; i < m->n; i++)
        snprintf(buf + strlen(buf), n - strlen(buf), "%s%s", i ? ", " : "", m->name[i]);
}

int check_train_run(const struct check_ctx *ctx, const struct workload *wl, struct check_result *r, plumb_err *e)
{
    const char *device = ctx->device ? ctx->device : "cpu";
    const struct workload_accept *a = wl ? wl->accept : NULL;
    if (!a) return err_set(e, PLUMB_EUSAGE, "train check: workload %s has no accept descriptor", wl ? wl->name : "?");
    char name[64], bname[64];
    snprintf(name, sizeof name, "train-%s", wl->name);
    int rc = check_begin(r, name, device);
    if (rc) return err_set(e, rc, "%s: cannot start the check", name);
    accept_bound_name(a, bname, sizeof bname);
    if (a->bound != 0) check_threshold(r, bname, a->bound);
    char dir[4096] = "";
    /* on an error return the check owns no result: free it */
    if (ctx->run_dir && (rc = check_artifact_dir(ctx, r, dir, sizeof dir, e))) {
        check_free(r);
        return rc;
    }
    struct comm *c;
    if ((rc = comm_init("self", &c, e))) {
        check_free(r);
        return rc;
    }

    /* 1. fast training, the bound */
    struct train_config cfg;
    struct train_result tr;
    rc = run_cfg(wl, device, ctx->threads, 0, 0, &cfg, e);
    if (rc) {
        comm_finalize(c);
        check_free(r);
        return rc;
    }
    cfg.out_dir = dir[0] ? dir : NULL;
    rc = trainer_run(&cfg, c, &tr, e);
    if (rc) {
        comm_finalize(c);
        if (rc == PLUMB_EDEVICE || rc == PLUMB_EUNSUPPORTED || rc == PLUMB_ENOMEM) {
            check_set_status(r, CHECK_FAIL, "training on %s failed: %s", device, e->msg);
            return PLUMB_OK;
        }
        check_free(r);
        return err_wrap(e, "%s on %s", name, device);
    }
    for (int i = 0; i < tr.eval.n; i++) check_metric(r, tr.eval.name[i], tr.eval.value[i], "");
    for (int i = 0; i < tr.reference.n; i++) check_metric(r, tr.reference.name[i], tr.reference.value[i], "");
    check_metric(r, "samples_per_s", tr.samples_per_s, "samples/s");
    check_metric(r, "train_wall_s", tr.wall_s, "s");
    check_detail(r, "model", json_string(tr.model_desc));
    check_detail(r, "preset", json_string(a->preset));
    check_detail(r, "metric", json_pack("{s:s, s:s}", "name", a->metric, "better", a->higher_is_better ? "higher" : "lower"));
    check_detail(r, "fast_param_digest", json_string(tr.param_digest));
    if (dir[0]) {
        char rel[256];
        const char *p = strstr(dir, "/checks/");
        if (p) snprintf(rel, sizeof rel, "%s/metrics.jsonl", p + 1);
        else snprintf(rel, sizeof rel, "checks/%s/metrics.jsonl", name);
        check_artifact(r, rel);
    }
    const double v = value_of(wl, &tr);
    int present = 0;
    for (int i = 0; i < tr.eval.n; i++) present |= !strcmp(tr.eval.name[i], a->metric);
    if (!present) {
        char list[256];
        metric_list(&tr.eval, list, sizeof list);
        comm_finalize(c);
        check_set_status(r, CHECK_FAIL, "the %s eval reports no metric '%s' (it reports: %s): the accept descriptor "
                         "names another", wl->name, a->metric, list);
        return PLUMB_OK;
    }
    if (!accept_bound_ok(a, v)) {
        char teacher[64], tk[64] = "";
        snprintf(tk, sizeof tk, "teacher_%s", a->metric);
        double tv = eval_metric(&tr.reference, tk);
        if (isfinite(tv)) snprintf(teacher, sizeof teacher, " (teacher %.4f)", tv);
        else teacher[0] = 0;
        check_set_status(r, CHECK_FAIL, "eval %s %.4f %s the %s %.4g%s", a->label, v,
                         a->higher_is_better ? "below" : "above", a->higher_is_better ? "floor" : "ceiling", a->bound,
                         teacher);
    }

    /* 2. the fast metric vs the cpu's */
    int on_cpu = !strncmp(device, "cpu", 3);
    char tname[64];
    snprintf(tname, sizeof tname, "%s_tolerance_floor", a->metric);
    check_threshold(r, tname, a->spread_floor);
    if (on_cpu)
        compare_cpu_threads(ctx, wl, r, c, &tr, e);
    else
        compare_cpu_seeds(ctx, wl, r, c, device, &tr, e);

    /* 3. golden digests: device vs cpu */
    struct train_result g1, g2;
    rc = run_cfg(wl, device, ctx->threads, 1, 0, &cfg, e);
    if (!rc) rc = trainer_run(&cfg, c, &g1, e);
    const long gsteps = cfg.steps;
    if (!rc) rc = run_cfg(wl, "cpu", on_cpu ? 1 : ctx->threads, 1, 0, &cfg, e);
    if (!rc) rc = trainer_run(&cfg, c, &g2, e);
    comm_finalize(c);
    if (rc) {
        check_set_status(r, CHECK_FAIL, "golden training failed: %s", e->msg);
        err_clear(e);
        return PLUMB_OK;
    }
    check_detail(r, "golden_param_digest", json_string(g1.param_digest));
    check_detail(r, "golden_param_digest_cpu", json_string(g2.param_digest));
    check_detail(r, "golden_compared_with", json_string(on_cpu ? "cpu, 1 thread" : "cpu"));
    check_detail(r, "golden_steps", json_integer(gsteps));
    int same = !strcmp(g1.param_digest, g2.param_digest);
    check_metric(r, "golden_digest_match", same ? 1.0 : 0.0, "");
    if (!same)
        check_set_status(r, CHECK_FAIL, "golden parameters after %ld steps differ: %s %.12s... vs %s %.12s...", gsteps,
                         device, g1.param_digest, on_cpu ? "cpu (1 thread)" : "cpu", g2.param_digest);
    if (r->status == CHECK_PASS) {
        char why[320];
        char key[80];
        snprintf(key, sizeof key, "fast_%s_vs_cpu", a->metric);
        const json_t *d = json_object_get(json_object_get(r->obj, "details"), key);
        char bnum[32];
        snprintf(bnum, sizeof bnum, " %.4g", a->bound);
        snprintf(why, sizeof why, "%s %s %.4f%s%s; fast vs cpu: %s; golden digest after %ld steps equal to the %s", a->preset,
                 a->label, v, a->bound != 0 ? (a->higher_is_better ? " >= floor" : " <= ceiling") : "", a->bound != 0 ? bnum : "",
                 json_is_true(json_object_get(d, "param_digest_equal")) ? "bit-identical at another thread count"
                                                                         : "within the tolerance",
                 gsteps, on_cpu ? "cpu's at 1 thread" : "cpu's");
        json_object_set_new(r->obj, "reason", json_string(why));
    }
    return PLUMB_OK;
}
