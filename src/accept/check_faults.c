/* The faults check: fault drills (faults/drills.h) as a checks[] entry. */
#include "accept/check_faults.h"
#include "accept/checks.h"
#include "accept/child.h"
#include "core/file.h"
#include "faults/drills.h"
#include "models/workloads.h"
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int check_faults_drills(const struct check_ctx *ctx, const char *plumb, const char *drills, int ranks,
                        double step_timeout, long steps, long ckpt_every, int quiet, struct check_result *r,
                        void *table, plumb_err *e)
{
    struct drill_opts o;
    drill_opts_defaults(&o);
    o.wl = workload_find("ctr");
    o.preset = "ctr-tiny";
    char bin[PATH_MAX];
    if (plumb) snprintf(bin, sizeof bin, "%s", plumb);
    else if (accept_find_plumb(bin, sizeof bin, e)) return err_wrap(e, "faults");
    o.plumb = bin;
    if (drills) o.drills = drills;
    if (ctx->device) o.device = ctx->device;
    if (ranks > 0) o.ranks = ranks;
    if (step_timeout > 0) o.step_timeout = step_timeout;
    if (steps > 0) o.steps = steps;
    if (ckpt_every > 0) o.ckpt_every = ckpt_every;
    o.quiet = quiet;
    int rc = check_begin(r, "faults", o.device);
    if (rc) return err_set(e, PLUMB_EINTERNAL, "faults: cannot start the check");
    char dir[PATH_MAX];
    if (ctx->run_dir) {
        if ((rc = check_artifact_dir(ctx, r, dir, sizeof dir, e))) {
            check_free(r); /* a check that returns an error owns no result */
            return rc;
        }
    } else {
        snprintf(dir, sizeof dir, "/tmp/plumb-faults-%d", (int)getpid());
    }
    o.out_dir = dir;
    struct drill_result res[DRILL_MAX];
    int n = 0;
    rc = drills_run(&o, res, &n, e);
    if (rc == PLUMB_EFAIL) {
        /* the reference training itself failed: a finding, not a crash */
        check_set_status(r, CHECK_FAIL, "%s", e->msg);
        err_clear(e);
        check_end(r);
        return PLUMB_OK;
    }
    if (rc) {
        check_free(r);
        return rc;
    }
    if (table) drills_print(res, n, table);
    int passed = 0;
    for (int i = 0; i < n; i++) {
        const struct drill_result *d = &res[i];
        passed += d->ok;
        char m[64];
        if (isfinite(d->t_detect_s)) {
            snprintf(m, sizeof m, "%s_detect_s", d->name);
            check_metric(r, m, d->t_detect_s, "s");
        }
        if (isfinite(d->t_resume_s)) {
            snprintf(m, sizeof m, "%s_resume_s", d->name);
            check_metric(r, m, d->t_resume_s, "s");
        }
        if (!d->ok)
            check_set_status(r, CHECK_FAIL, "drill %s: %s", d->name,
                             d->note[0] ? d->note
                             : !d->fault_delivered ? "the fault was not delivered"
                             : !d->detected ? "not detected"
                             : !d->recovered ? "did not recover"
                                             : "final digest differs");
        else if (d->timing_applies && !d->within_limit)
            check_set_status(r, CHECK_FAIL, "drill %s: detection + resume took %.1f s (limit %.0f s)", d->name,
                             d->t_detect_s + d->t_resume_s, DRILL_RECOVERY_LIMIT_S);
    }
    /* the summary, kept only when no drill recorded a finding */
    char sum[512];
    size_t sl = (size_t)snprintf(sum, sizeof sum, "%d/%d drills recovered with the reference digest", passed, n);
    for (int i = 0; i < n && sl < sizeof sum; i++)
        if (res[i].timing_applies && isfinite(res[i].t_detect_s) && isfinite(res[i].t_resume_s))
            sl += (size_t)snprintf(sum + sl, sizeof sum - sl, "; %s %.1f s to detect + resume", res[i].name,
                                   res[i].t_detect_s + res[i].t_resume_s);
    if (sl < sizeof sum) snprintf(sum + sl, sizeof sum - sl, " (limit %.0f s)", DRILL_RECOVERY_LIMIT_S);
    check_set_status(r, CHECK_PASS, "%s", sum);
    check_metric(r, "drills_passed", passed, "");
    check_metric(r, "drills", n, "");
    check_threshold(r, "recovery_s", DRILL_RECOVERY_LIMIT_S);
    check_detail(r, "drills", drills_json(res, n));
    check_detail(r, "ranks", json_integer(o.ranks));
    check_detail(r, "step_timeout_s", json_real(o.step_timeout));
    if (ctx->run_dir) {
        const char *rel = strstr(dir, "checks/");
        char a[PATH_MAX];
        snprintf(a, sizeof a, "%s/faults.json", rel ? rel : dir);
        check_artifact(r, a);
    }
    check_end(r);
    return PLUMB_OK;
}

int check_faults_run(const struct check_ctx *ctx, struct check_result *r, plumb_err *e)
{
    return check_faults_drills(ctx, NULL, NULL, 0, 0, 0, 0, !ctx->tty, r, NULL, e);
}
