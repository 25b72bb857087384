/* Fault drills (plumb faults, accept's faults check): each drill runs a short
 * golden training of the caller's workload and preset (plumb faults and the
 * accept check use ctr-tiny) under `plumb launch` and `mpirun`, injects or
 * delivers one fault, and measures what happened:
 *
 *   kill     SIGKILL one rank from outside at some step; mpirun fails the
 *            job, the launcher restarts it, training resumes from the newest
 *            checkpoint
 *   hang     one rank blocks forever in the status all-reduce (hang@STEP:R);
 *            the watchdogs (--step-timeout) end the job, the launcher
 *            restarts it
 *   oom      allocation failures on one rank: 2 in a row (retry tier) and 5
 *            in a row (split tier: the batch is redone in micro-batches)
 *   nan      a non-finite gradient: the step is skipped; the digest must equal
 *            a run that skips that batch deliberately (--skip-batches)
 *   corrupt  the newest checkpoint is corrupted, then a rank exits; the
 *            restart falls back to the previous checkpoint
 *   sigterm  SIGTERM to the launcher: the ranks write a clean checkpoint and
 *            exit 0; a second launch resumes from it
 *
 * Every drill's final parameter digest is compared with an uninterrupted
 * run's (golden numerics: the same bits whatever happened in between).
 * Times are wall-clock, measured by this harness watching the launcher's
 * launch.jsonl and the trainer's metrics.jsonl as they grow. The plumb train
 * command lines come from a train_config through the option table
 * (train/options.h, train_config_argv). */
#ifndef PLUMB_DRILLS_H
#define PLUMB_DRILLS_H
#include <jansson.h>
#include "core/err.h"
#include "train/model.h"

#define DRILL_NAMES "kill,hang,oom,nan,corrupt,sigterm"
#define DRILL_MAX 10
#define DRILL_RECOVERY_LIMIT_S 30.0 /* detection + resume, kill and hang (docs/FAULTS.md) */

struct drill_opts {
    const struct workload *wl; /* what the drills train (required) */
    const char *preset;     /* one of wl's presets (NULL: its first) */
    const char *plumb;      /* path of the plumb binary to run */
    const char *mpirun;     /* "mpirun" (PATH) unless set */
    const char *out_dir;    /* drill folders go here (created) */
    const char *device;     /* "cpu", "cuda"... */
    const char *drills;     /* comma list from DRILL_NAMES */
    int ranks;
    double step_timeout;    /* the trainer's watchdog for every drill */
    long steps;             /* training length (global batches) */
    long ckpt_every;
    long batch;
    int quiet;              /* no progress lines on stderr */
};

void drill_opts_defaults(struct drill_opts *o);

struct drill_result {
    char name[16];          /* kill, hang, oom-retry, oom-split, nan, corrupt, sigterm */
    int ok;                 /* detected, recovered and the digest matched */
    int detected;
    int recovered;          /* training reached its last step */
    int digest_equal;
    int fault_delivered;    /* the fault happened before the end of training */
    double t_detect_s;      /* fault -> failure seen by the launcher (NAN: n/a) */
    double t_resume_s;      /* failure seen -> first training step after the restart (NAN: n/a) */
    int timing_applies;     /* kill, hang: detection + resume must be < DRILL_RECOVERY_LIMIT_S */
    int within_limit;
    long fault_step;        /* step at which the fault hit */
    long resumed_from;      /* checkpoint step the restart resumed from (-1: no restart) */
    long steps_lost;        /* steps computed again after the restart */
    long batches_skipped;
    int restarts;
    char digest[65], want[65];
    char note[512];
};

/* Runs the drills listed in o->drills (and the reference runs they need).
 * res has room for DRILL_MAX entries; *n gets the count. Writes
 * out_dir/faults.json. Returns an error only when the drills could not run
 * at all (bad options, the reference run failed); a failing drill is a
 * result (ok = 0). */
int drills_run(const struct drill_opts *o, struct drill_result *res, int *n, plumb_err *e);
/* The --drills list: names from DRILL_NAMES, at least one; PLUMB_EUSAGE naming the bad one
 * (plumb faults checks it before it opens its run folder). */
int drills_check_list(const char *list, plumb_err *e);

/* The results as a JSON array (new reference). */
json_t *drills_json(const struct drill_result *res, int n);
/* A text table of the results on f. */
void drills_print(const struct drill_result *res, int n, void *file /* FILE* */);

#endif
