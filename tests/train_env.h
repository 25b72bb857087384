/* Test helpers for runs that differ only in an environment switch (the
 * 16-bit activation pipelines' PLUMB_GPT_ACT16, PLUMB_RESNET_ACT16): set it
 * for the length of one run and put the caller's value back after. */
#ifndef PLUMB_TESTS_TRAIN_ENV_H
#define PLUMB_TESTS_TRAIN_ENV_H
#include "test.h"
#include "comm/comm.h"
#include "models/workloads.h"
#include "train/options.h"
#include "train/trainer.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* env = val (val NULL: unset); returns the old value to give env_restore */
static inline char *env_push(const char *env, const char *val)
{
    const char *old = getenv(env);
    char *keep = old ? strdup(old) : NULL;
    if (val) setenv(env, val, 1);
    else unsetenv(env);
    return keep;
}
static inline void env_restore(const char *env, char *keep)
{
    if (keep) setenv(env, keep, 1);
    else unsetenv(env);
    free(keep);
}

/* the trainer on one rank (comm "self") over workload with the option
 * words (name, value pairs ending in NULL), env = val during the run */
static inline int train_with_env(const char *workload, const char *const *words, const char *env, const char *val,
                                 struct train_result *tr, plumb_err *e)
{
    char *keep = env_push(env, val);
    struct train_config cfg;
    train_config_defaults(&cfg, workload_find(workload));
    int rc = 0;
    for (int i = 0; words[i] && !rc; i += 2) rc = train_option_set(&cfg, words[i], words[i + 1], e);
    if (!rc) rc = train_config_finish(&cfg, e);
    struct comm *c = NULL;
    if (!rc) rc = comm_init("self", &c, e);
    if (!rc) {
        cfg.progress = 0;
        rc = trainer_run(&cfg, c, tr, e);
        comm_finalize(c);
    }
    env_restore(env, keep);
    return rc;
}

/* A 16-bit pipeline against the path its switch env = "0" keeps: run(prec,
 * "1") then run(prec, "0"); with 1 at least min_fwd forwards through the
 * pipeline (*count, its forward counter, grows), with 0 none; on the cpu
 * (its 16-bit ops are its fp32 ops between casts) the same parameter
 * digest, on a GPU last losses within rel of the switch-off run's (the
 * caller says why: where the GPU's 16-bit kernels add their sums in another
 * order the two trajectories drift apart by rounding). */
typedef int (*act16_run_fn)(const char *prec, const char *v, struct train_result *tr, plumb_err *e);
static inline void act16_same_as_off(act16_run_fn run, const char *prec, const char *env, const long *count,
                                     long min_fwd, int cpu, double rel)
{
    struct train_result on, off;
    plumb_err e = {0};
    const long f0 = *count;
    int rc = run(prec, "1", &on, &e);
    CHECK_MSG(rc == 0, "%s=1 %s: %s", env, prec, e.msg);
    const long f1 = *count;
    rc = rc ? rc : run(prec, "0", &off, &e);
    CHECK_MSG(rc == 0, "%s=0 %s: %s", env, prec, e.msg);
    if (rc) return;
    CHECK_MSG(f1 - f0 >= min_fwd && *count == f1, "16-bit forwards: %ld with %s=1, %ld with 0", f1 - f0, env,
              *count - f1);
    fprintf(stderr, "  %s %s: 16-bit pipeline %.16s loss %.6f | %s=0 %.16s loss %.6f\n", test_device(), prec,
            on.param_digest, on.last_loss, env, off.param_digest, off.last_loss);
    if (cpu) CHECK_STREQ(on.param_digest, off.param_digest);
    else
        CHECK_MSG(fabs(on.last_loss - off.last_loss) <= rel * fabs(off.last_loss),
                  "last loss %.6f against %.6f (bound: %g of it)", on.last_loss, off.last_loss, rel);
}

#endif
