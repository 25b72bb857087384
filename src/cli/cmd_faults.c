/* plumb faults: fault drills against a short ctr-tiny golden training under
 * plumb launch and mpirun (faults/drills.h). */
#include "report/check.h"
#include "accept/check_faults.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "core/log.h"
#include "dev/dev.h"
#include "report/results.h"
#include "faults/drills.h"
#include "models/workloads.h"
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The plumb binary drills run: this one. */
static int self_path(char *out, size_t n)
{
    ssize_t l = readlink("/proc/self/exe", out, n - 1);
    if (l <= 0) return -1;
    out[l] = 0;
    return 0;
}

int cmd_faults(int argc, char **argv)
{
    struct drill_opts o;
    drill_opts_defaults(&o);
    o.wl = workload_find("ctr");
    o.preset = "ctr-tiny";
    const char *drills = DRILL_NAMES, *device = "cpu", *out = NULL;
    long ranks = 2, steps = o.steps, every = o.ckpt_every;
    double timeout = 10;
    int quiet = 0;
    struct opt opts[] = {
        {"--drills", OPT_STR, &drills, DRILL_NAMES, "comma list of drills to run", NULL, "LIST"},
        {"--ranks", OPT_INT, &ranks, "2", "MPI ranks of the drill trainings (mpirun -np)", "1..64", "N"},
        {"--device", OPT_STR, &device, "cpu", "device of the drill trainings (cpu, cuda, hip)", NULL, "D"},
        {"--step-timeout", OPT_DOUBLE, &timeout, "10", "the trainer's watchdog: seconds a step or collective may block",
         NULL, "S"},
        {"--steps", OPT_INT, &steps, "160", "training length of every drill", "12..100000", "N"},
        {"--checkpoint-every", OPT_INT, &every, "10", "checkpoint interval of every drill", "2..10000", "N"},
        {"--out", OPT_STR, &out, NULL, "run folder (results.json, checks/faults/); default runs/<UTC>-<host>-<id>", NULL,
         "DIR"},
        {"--quiet", OPT_FLAG, &quiet, NULL, "no progress lines", NULL, NULL},
        {0},
    };
    plumb_err e = {0};
    int rc = args_parse(
        "plumb faults [options]",
        "Fault drills: each runs a short ctr-tiny golden training (plumb train ctr --numerics golden) under plumb "
        "launch and mpirun and delivers one fault: kill (SIGKILL one rank from outside), hang (one rank blocks in a "
        "collective; the watchdogs fire after --step-timeout), oom (allocation failures: retry, then split the batch "
        "into micro-batches), nan (a non-finite gradient: the step is skipped), corrupt (the newest checkpoint is "
        "corrupted, then a rank dies: the restart falls back to the previous checkpoint), sigterm (clean checkpoint "
        "and exit, then a second launch resumes). Reports per drill: detected, time to detect, time to resume, steps "
        "lost, and whether the final parameter digest equals an uninterrupted run's (nan: a run that skips that "
        "batch deliberately). Kill and hang must recover (detect + resume) within 30 s. Exit 0 when every drill "
        "passed, 1 otherwise.",
        opts, argc, argv, NULL, 0, NULL, &e);
    if (rc == ARGS_HELP) return 0;
    if (rc) return cli_fail("faults", &e);
    if (!(timeout > 0)) {
        err_set(&e, PLUMB_EUSAGE, "--step-timeout: %g (expected > 0 seconds)", timeout);
        return cli_fail("faults", &e);
    }
    if (steps < 6 * every) {
        err_set(&e, PLUMB_EUSAGE, "--steps %ld with --checkpoint-every %ld: need steps >= 6 x interval", steps, every);
        return cli_fail("faults", &e);
    }
    /* the drill list and the device before the run folder: '--drills bogus' left an empty run folder behind, and
     * '--device nope' (or cuda on a host without one) ran mpirun, whose reference training failed: exit 1, a
     * failed check, for what is bad input (plumb train says exit 2 for the same --device) */
    if (drills_check_list(drills, &e)) return cli_fail("faults", &e);
    {
        struct dev *d = NULL;
        plumb_err de = {0};
        int drc = dev_open(device, &d, &de);
        dev_close(d);
        if (drc == PLUMB_EDEVICE) {
            err_set(&e, PLUMB_EUSAGE, "--device %s: no usable device here (%s)", device, de.msg);
            return cli_fail("faults", &e);
        }
        if (drc) {
            err_set(&e, PLUMB_EUSAGE, "--device %s: %s", device, de.msg);
            return cli_fail("faults", &e);
        }
    }
    char self[PATH_MAX];
    if (self_path(self, sizeof self)) {
        err_set(&e, PLUMB_EINTERNAL, "cannot find the plumb binary (/proc/self/exe)");
        return cli_fail("faults", &e);
    }
    struct results res;
    char cmdline[1024];
    args_command_line(argc, argv, cmdline, sizeof cmdline);
    if (results_open(&res, out, cmdline, &e)) return cli_fail("faults", &e);
    struct check_ctx ctx = {.run_dir = res.dir, .device = device, .level = "standard"};
    struct check_result r;
    rc = check_faults_drills(&ctx, self, drills, (int)ranks, timeout, steps, every, quiet, &r, stdout, &e);
    if (rc) {
        results_close(&res);
        return cli_fail("faults", &e);
    }
    results_add_check(&res, &r);
    int status = r.status;
    check_free(&r);
    if (results_write(&res, &e)) {
        results_close(&res);
        return cli_fail("faults", &e);
    }
    printf("run folder: %s\n", res.dir);
    results_close(&res);
    return status == CHECK_FAIL ? 1 : 0;
}
