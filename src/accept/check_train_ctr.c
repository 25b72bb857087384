/* The train-ctr check: ctr-tiny trained on ctx->device.
 *   1. fast, fp32, the preset's schedule on the synthetic teacher: pass when
 *      the eval AUC clears AUC_FLOOR (the teacher's own AUC is ~0.80 and
 *      ctr-tiny reaches ~0.76 on the cpu);
 *   2. golden, GOLDEN_STEPS steps, on the device and on the cpu: the
 *      parameter digests must be equal (on a cpu-only host the second run
 *      uses one thread, so it checks thread-count independence instead).
 * One process, the self comm. */
#include "accept/checks.h"
#include "comm/comm.h"
#include "core/log.h"
#include "train/trainer.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

#define AUC_FLOOR 0.75
#define GOLDEN_STEPS 60

static void tiny_config(struct train_config *c, const char *device, int threads)
{
    train_config_defaults(c);
    c->preset = "ctr-tiny";
    c->device = device;
    c->threads = threads;
    c->optimizer = "adamw";
    c->lr = 0.004;
    c->warmup = 50;
    c->batch = 256;
    c->steps = 1500;
    c->eval_samples = 50000;
    c->quiet = 1;
    c->progress = 0;
}

int check_train_ctr_run(const struct check_ctx *ctx, struct check_result *r, plumb_err *e)
{
    const char *device = ctx->device ? ctx->device : "cpu";
    int rc = check_begin(r, "train-ctr", device);
    if (rc) return err_set(e, rc, "train-ctr: cannot start the check");
    check_threshold(r, "auc_floor", AUC_FLOOR);
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

    /* 1. fast training, AUC floor */
    struct train_config cfg;
    tiny_config(&cfg, device, ctx->threads);
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
        return err_wrap(e, "train-ctr on %s", device);
    }
    check_metric(r, "auc", tr.eval.auc, "");
    check_metric(r, "teacher_auc", tr.teacher_auc, "");
    check_metric(r, "logloss", tr.eval.logloss, "");
    check_metric(r, "accuracy", tr.eval.accuracy, "");
    check_metric(r, "samples_per_s", tr.samples_per_s, "samples/s");
    check_metric(r, "train_wall_s", tr.wall_s, "s");
    check_detail(r, "model", json_string(tr.model_desc));
    check_detail(r, "fast_param_digest", json_string(tr.param_digest));
    if (dir[0]) {
        char rel[256];
        const char *p = strstr(dir, "/checks/");
        snprintf(rel, sizeof rel, "%s/metrics.jsonl", p ? p + 1 : "checks/train-ctr");
        check_artifact(r, rel);
    }
    if (!(tr.eval.auc >= AUC_FLOOR))
        check_set_status(r, CHECK_FAIL, "eval AUC %.4f below the floor %.2f (teacher %.4f)", tr.eval.auc, AUC_FLOOR,
                         tr.teacher_auc);

    /* 2. golden digests: device vs cpu */
    int on_cpu = !strncmp(device, "cpu", 3);
    struct train_result g1, g2;
    tiny_config(&cfg, device, ctx->threads);
    cfg.numerics = NUMERICS_GOLDEN;
    cfg.steps = GOLDEN_STEPS;
    cfg.eval_samples = 2000;
    rc = trainer_run(&cfg, c, &g1, e);
    if (!rc) {
        tiny_config(&cfg, "cpu", on_cpu ? 1 : ctx->threads);
        cfg.numerics = NUMERICS_GOLDEN;
        cfg.steps = GOLDEN_STEPS;
        cfg.eval_samples = 2000;
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
    int same = !strcmp(g1.param_digest, g2.param_digest);
    check_metric(r, "golden_digest_match", same ? 1.0 : 0.0, "");
    if (!same)
        check_set_status(r, CHECK_FAIL, "golden parameters after %d steps differ: %s %.12s... vs %s %.12s...",
                         GOLDEN_STEPS, device, g1.param_digest, on_cpu ? "cpu (1 thread)" : "cpu", g2.param_digest);
    return PLUMB_OK;
}
