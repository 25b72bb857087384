/* Runs one check on each device named by --device (a spec, or "all" for
 * every device present), prints each result, and with --out writes them to a
 * run folder (results.json + report). Shared by plumb rng and plumb numerics,
 * which differ only in the check they run and the table they print. */
#ifndef PLUMB_PER_DEVICE_H
#define PLUMB_PER_DEVICE_H
#include "report/check.h"

struct per_device_run {
    const char *cmd;    /* "rng": messages and the recorded command line */
    const char *device; /* --device */
    const char *out;    /* --out, or NULL: print only */
    const char *level;  /* check_ctx.level */
    int threads;
    /* runs the check on ctx->device; arg is the command's own parameters */
    int (*run)(const struct check_ctx *ctx, void *arg, struct check_result *r, plumb_err *e);
    void (*print)(const struct check_result *r);
    void *arg;
};

/* Returns the exit code: 0 all passed, 1 a check failed, 2/3 on errors. */
int cli_run_per_device(const struct per_device_run *p, int argc, char **argv);

#endif
