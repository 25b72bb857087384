/* The train-gpt check: gpt-tiny trained on ctx->device, the shape of
 * train-ctr (accept/check_train_ctr.c) with the validation loss as the
 * metric (lower is better):
 *   1. fast, fp32, GPT_STEPS steps on the synthetic tokens (periodic blocks
 *      a model learns by copying): pass when the validation loss falls below
 *      LOSS_CEIL (ln 256 = 5.545 is a uniform guess);
 *   2. the fast loss compared with the cpu's: on a GPU, |loss_dev(s0) -
 *      loss_cpu(s0)| <= max(the spread of the cpu's losses over K seeds
 *      s0..s0+K-1, SPREAD_FLOOR) (K as train-ctr's: 2 quick, 3 standard,
 *      5 full); on the cpu itself, the same run at another thread count
 *      (equal digests reported as such);
 *   3. golden, GOLDEN_STEPS steps, on the device and on the cpu: the
 *      parameter digests must be equal (on a cpu-only host the second run
 *      uses one thread: thread-count independence). */
#include "accept/checks.h"
#include "comm/comm.h"
#include "core/log.h"
#include "models/workloads.h"
#include "train/options.h"
#include "train/trainer.h"
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define GPT_STEPS 150
#define GOLDEN_STEPS 8
#define LOSS_CEIL 4.0
#define SPREAD_FLOOR 0.02 /* nats: the least tolerance however close the cpu seeds land */
#define MAX_SEEDS 8

static int seeds_for_level(const char *level)
{
    if (level && !strcmp(level, "full")) return 5;
    if (level && !strcmp(level, "quick")) return 2;
    return 3;
}

static json_t *jnum(double x) { return isfinite(x) ? json_real(x) : json_null(); }

static void tiny_config(struct train_config *c, const char *device, int threads, int golden)
{
    char th[32], st[32];
    plumb_err e = {0};
    train_config_defaults(c, workload_find("gpt"));
    snprintf(th, sizeof th, "%d", threads > 0 ? threads : 0);
    snprintf(st, sizeof st, "%d", golden ? GOLDEN_STEPS : GPT_STEPS);
    int rc = train_option_set(c, "--preset", "gpt-tiny", &e);
    if (!rc) rc = train_option_set(c, "--device", device, &e);
    if (!rc) rc = train_option_set(c, "--threads", th, &e);
    if (!rc) rc = train_option_set(c, "--quiet", NULL, &e);
    if (!rc) rc = train_option_set(c, "--steps", st, &e);
    if (!rc && golden) rc = train_option_set(c, "--numerics", "golden", &e);
    if (!rc && golden) rc = train_option_set(c, "--batch", "8", &e);
    if (!rc && golden) rc = train_option_set(c, "--eval-samples", "16", &e);
    if (!rc) rc = train_config_finish(c, &e);
    if (rc) log_warn("train-gpt: config: %s", e.msg);
    c->progress = 0;
}

static double loss_of(const struct train_result *tr) { return eval_metric(&tr->eval, "val_loss"); }

static struct {
    int valid, threads, k;
    double loss[MAX_SEEDS];
    char digest[MAX_SEEDS][65];
    double wall_s;
} g_cpu_ref;

static void compare_cpu_seeds(const struct check_ctx *ctx, struct check_result *r, struct comm *c, const char *device,
                              const struct train_result *dev_tr, plumb_err *e)
{
    const int k = seeds_for_level(ctx->level);
    struct train_config cfg;
    tiny_config(&cfg, "cpu", ctx->threads, 0);
    const uint64_t s0 = cfg.seed;
    const int reused = g_cpu_ref.valid && g_cpu_ref.threads == ctx->threads && g_cpu_ref.k == k;
    if (!reused) {
        g_cpu_ref.valid = 0;
        g_cpu_ref.wall_s = 0;
        for (int i = 0; i < k; i++) {
            struct train_result tr;
            tiny_config(&cfg, "cpu", ctx->threads, 0);
            cfg.seed = s0 + (uint64_t)i;
            if (trainer_run(&cfg, c, &tr, e)) {
                check_set_status(r, CHECK_FAIL, "cpu reference training (seed %llu) failed: %s",
                                 (unsigned long long)cfg.seed, e->msg);
                err_clear(e);
                return;
            }
            g_cpu_ref.loss[i] = loss_of(&tr);
            snprintf(g_cpu_ref.digest[i], sizeof g_cpu_ref.digest[i], "%s", tr.param_digest);
            g_cpu_ref.wall_s += tr.wall_s;
        }
        g_cpu_ref.threads = ctx->threads;
        g_cpu_ref.k = k;
        g_cpu_ref.valid = 1;
    }
    double spread, tol;
    /* the verdict is train-ctr's: |metric_dev - metric_cpu[0]| within max(spread, floor) */
    const int pass = train_ctr_spread_verdict(loss_of(dev_tr), g_cpu_ref.loss, k, SPREAD_FLOOR, &spread, &tol);
    const double diff = fabs(loss_of(dev_tr) - g_cpu_ref.loss[0]);
    json_t *d = json_object(), *seeds = json_array(), *losses = json_array();
    for (int i = 0; i < k; i++) {
        json_array_append_new(seeds, json_integer((json_int_t)(s0 + (uint64_t)i)));
        json_array_append_new(losses, jnum(g_cpu_ref.loss[i]));
    }
    json_object_set_new(d, "compared_with", json_string("cpu, seed-to-seed spread"));
    json_object_set_new(d, "seeds", seeds);
    json_object_set_new(d, "val_loss_device", jnum(loss_of(dev_tr)));
    json_object_set_new(d, "val_loss_cpu", losses);
    json_object_set_new(d, "spread", jnum(spread));
    json_object_set_new(d, "tolerance_floor", json_real(SPREAD_FLOOR));
    json_object_set_new(d, "tolerance", jnum(tol));
    json_object_set_new(d, "diff", jnum(diff));
    json_object_set_new(d, "pass", json_boolean(pass));
    json_object_set_new(d, "cpu_runs", json_string(reused ? "reused from an earlier device of this run" : "trained"));
    check_detail(r, "fast_loss_vs_cpu", d);
    check_metric(r, "cpu_reference_train_s", g_cpu_ref.wall_s, "s");
    if (isfinite(diff)) check_metric(r, "val_loss_diff_vs_cpu", diff, "nats");
    if (!pass)
        check_set_status(r, CHECK_FAIL,
                         "fast validation loss %.4f on %s differs from the cpu's %.4f (seed %llu) by %.4f, more than "
                         "the tolerance %.4f = max(cpu seed spread %.4f, %.2f)",
                         loss_of(dev_tr), device, g_cpu_ref.loss[0], (unsigned long long)s0, diff, tol, spread,
                         SPREAD_FLOOR);
}

static void compare_cpu_threads(const struct check_ctx *ctx, struct check_result *r, struct comm *c,
                                const struct train_result *dev_tr, plumb_err *e)
{
    int n = ctx->threads > 0 ? ctx->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    const int alt = n > 1 ? 1 : 2;
    struct train_config cfg;
    tiny_config(&cfg, "cpu", alt, 0);
    struct train_result tr;
    if (trainer_run(&cfg, c, &tr, e)) {
        check_set_status(r, CHECK_FAIL, "fast training on the cpu with %d threads failed: %s", alt, e->msg);
        err_clear(e);
        return;
    }
    const int same = !strcmp(dev_tr->param_digest, tr.param_digest);
    const double diff = fabs(loss_of(dev_tr) - loss_of(&tr));
    const int pass = same || (isfinite(diff) && diff <= SPREAD_FLOOR);
    json_t *d = json_object();
    json_object_set_new(d, "compared_with", json_string("cpu, another thread count (no seed spread on the cpu itself)"));
    json_object_set_new(d, "threads", json_pack("[ii]", n, alt));
    json_object_set_new(d, "val_loss", json_pack("[oo]", jnum(loss_of(dev_tr)), jnum(loss_of(&tr))));
    json_object_set_new(d, "param_digest_equal", json_boolean(same));
    json_object_set_new(d, "diff", jnum(diff));
    json_object_set_new(d, "pass", json_boolean(pass));
    check_detail(r, "fast_loss_vs_cpu", d);
    check_metric(r, "fast_threads_digest_match", same ? 1.0 : 0.0, "");
    if (!pass)
        check_set_status(r, CHECK_FAIL, "fast validation loss %.4f with %d threads vs %.4f with %d: differs by %.4f > %.2f",
                         loss_of(dev_tr), n, loss_of(&tr), alt, diff, SPREAD_FLOOR);
}

int check_train_gpt_run(const struct check_ctx *ctx, struct check_result *r, plumb_err *e)
{
    const char *device = ctx->device ? ctx->device : "cpu";
    int rc = check_begin(r, "train-gpt", device);
    if (rc) return err_set(e, rc, "train-gpt: cannot start the check");
    check_threshold(r, "val_loss_ceiling", LOSS_CEIL);
    check_threshold(r, "val_loss_tolerance_floor", SPREAD_FLOOR);
    char dir[4096] = "";
    if (ctx->run_dir && (rc = check_artifact_dir(ctx, r, dir, sizeof dir, e))) {
        check_free(r);
        return rc;
    }
    struct comm *c;
    if ((rc = comm_init("self", &c, e))) {
        check_free(r);
        return rc;
    }
    /* 1. fast training, the loss ceiling */
    struct train_config cfg;
    tiny_config(&cfg, device, ctx->threads, 0);
    cfg.out_dir = dir[0] ? dir : NULL;
    struct train_result tr;
    rc = trainer_run(&cfg, c, &tr, e);
    if (rc) {
        comm_finalize(c);
        if (rc == PLUMB_EDEVICE || rc == PLUMB_EUNSUPPORTED || rc == PLUMB_ENOMEM) {
            check_set_status(r, CHECK_FAIL, "training on %s failed: %s", device, e->msg);
            return PLUMB_OK;
        }
        check_free(r);
        return err_wrap(e, "train-gpt on %s", device);
    }
    for (int i = 0; i < tr.eval.n; i++) check_metric(r, tr.eval.name[i], tr.eval.value[i], "");
    check_metric(r, "samples_per_s", tr.samples_per_s, "sequences/s");
    check_metric(r, "train_wall_s", tr.wall_s, "s");
    check_detail(r, "model", json_string(tr.model_desc));
    check_detail(r, "fast_param_digest", json_string(tr.param_digest));
    if (dir[0]) {
        char rel[256];
        const char *p = strstr(dir, "/checks/");
        snprintf(rel, sizeof rel, "%s/metrics.jsonl", p ? p + 1 : "checks/train-gpt");
        check_artifact(r, rel);
    }
    if (!(loss_of(&tr) < LOSS_CEIL))
        check_set_status(r, CHECK_FAIL, "validation loss %.4f after %d steps, not below %.2f (ln 256 = 5.545)",
                         loss_of(&tr), GPT_STEPS, LOSS_CEIL);
    /* 2. the fast loss vs the cpu's */
    const int on_cpu = !strncmp(device, "cpu", 3);
    if (on_cpu) compare_cpu_threads(ctx, r, c, &tr, e);
    else compare_cpu_seeds(ctx, r, c, device, &tr, e);
    /* 3. golden digests: device vs cpu */
    struct train_result g1, g2;
    tiny_config(&cfg, device, ctx->threads, 1);
    rc = trainer_run(&cfg, c, &g1, e);
    if (!rc) {
        tiny_config(&cfg, "cpu", on_cpu ? 1 : ctx->threads, 1);
        rc = trainer_run(&cfg, c, &g2, e);
    }
    comm_finalize(c);
    if (rc) {
        check_set_status(r, CHECK_FAIL, "golden training failed: %s", e->msg);
        err_clear(e);
        return PLUMB_OK;
    }
    check_detail(r, "golden_param_digest", json_string(g1.param_digest));
    check_detail(r, "golden_param_digest_cpu", json_string(g2.param_digest));
    check_detail(r, "golden_compared_with", json_string(on_cpu ? "cpu, 1 thread" : "cpu"));
    const int same = !strcmp(g1.param_digest, g2.param_digest);
    check_metric(r, "golden_digest_match", same ? 1.0 : 0.0, "");
    if (!same)
        check_set_status(r, CHECK_FAIL, "golden parameters after %d steps differ: %s %.12s... vs %s %.12s...",
                         GOLDEN_STEPS, device, g1.param_digest, on_cpu ? "cpu (1 thread)" : "cpu", g2.param_digest);
    return PLUMB_OK;
}
