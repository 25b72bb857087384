/* plumb train's check verdict: see train_verdict.h. */
#include "accept/train_verdict.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

static const struct train_floor *floor_of(const struct train_config *cfg)
{
    for (const struct train_floor *f = cfg->wl ? cfg->wl->floors : NULL; f && f->preset; f++)
        if (cfg->preset && !strcmp(f->preset, cfg->preset)) return f;
    return NULL;
}

void train_check_verdict(struct check_result *r, const struct train_config *cfg, const struct train_result *tr)
{
    const char *ck = strrchr(tr->ckpt_path, '/');
    ck = ck ? ck + 1 : tr->ckpt_path;
    if (tr->metrics_error[0]) {
        check_set_status(r, CHECK_FAIL, "%s", tr->metrics_error);
        return;
    }
    if (tr->interrupted) {
        if (tr->ckpt_path[0])
            check_set_status(r, CHECK_SKIP, "stopped by %s at step %ld of %ld (not finished): checkpoint %s written; "
                             "continue with --resume", tr->stop_reason, tr->steps_done, tr->steps_target, ck);
        else
            check_set_status(r, CHECK_FAIL, "stopped by %s at step %ld of %ld (not finished) with no checkpoint "
                             "(no --checkpoint-dir): the steps done are lost", tr->stop_reason, tr->steps_done,
                             tr->steps_target);
        return;
    }
    check_threshold(r, "skipped_steps_max", tr->steps_done > 0 ? (double)(tr->steps_done - 1) : 0);
    if (tr->steps_done > 0 && tr->skipped_steps >= tr->steps_done) {
        check_set_status(r, CHECK_FAIL, "all %ld steps were skipped (non-finite gradients%s): nothing was trained",
                         tr->steps_done, tr->backoff_steps ? ", the loss scale backing off" : "");
        return;
    }
    for (int i = 0; i < tr->eval.n; i++)
        if (!isfinite(tr->eval.value[i])) {
            check_set_status(r, CHECK_FAIL, "eval %s is not finite (%g)", tr->eval.name[i], tr->eval.value[i]);
            return;
        }
    char what[512];
    size_t k = 0;
    what[0] = 0;
    for (int i = 0; i < tr->eval.n && k < sizeof what; i++)
        k += (size_t)snprintf(what + k, sizeof what - k, "%s%s %.4f", i ? ", " : "", tr->eval.name[i], tr->eval.value[i]);
    const struct train_floor *f = floor_of(cfg);
    int synthetic = cfg->data && !strcmp(cfg->data, "synthetic");
    char fl[256] = "";
    if (f && synthetic && tr->steps_done >= f->min_steps) {
        double v = eval_metric(&tr->eval, f->metric);
        char key[64];
        if (!isnan(f->min)) snprintf(key, sizeof key, "%s_min", f->metric), check_threshold(r, key, f->min);
        if (!isnan(f->max)) snprintf(key, sizeof key, "%s_max", f->metric), check_threshold(r, key, f->max);
        if ((!isnan(f->min) && !(v >= f->min)) || (!isnan(f->max) && !(v <= f->max))) {
            check_set_status(r, CHECK_FAIL, "eval %s %.4f misses the %s floor (%s %g after %ld steps on the synthetic data)",
                             f->metric, v, cfg->preset, !isnan(f->min) ? ">=" : "<=", !isnan(f->min) ? f->min : f->max,
                             f->min_steps);
            return;
        }
        snprintf(fl, sizeof fl, "; %s within the %s floor (%s %g)", f->metric, cfg->preset, !isnan(f->min) ? ">=" : "<=",
                 !isnan(f->min) ? f->min : f->max);
    } else if (f) {
        snprintf(fl, sizeof fl, "; the %s floor (%s) applies from %ld steps on the synthetic data", cfg->preset, f->metric,
                 f->min_steps);
    }
    check_set_status(r, CHECK_PASS, "finite eval (%s); %ld of %ld steps skipped%s", what[0] ? what : "no metric",
                     tr->skipped_steps, tr->steps_done, fl);
}
