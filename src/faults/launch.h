/* plumb launch (docs/FAULTS.md): a supervisor for any command, usually
 * `mpirun -np N plumb train ... --resume auto`. It runs the command in a
 * process group of its own, forwards SIGINT/SIGTERM/SIGHUP to it (to the
 * process groups of its descendants when it has some, e.g. mpirun's ranks;
 * see forward_signal in launch.c; a second signal also reaches the command)
 * and then does not restart: it waits for the job's clean exit and returns
 * its status, restarts the command when it fails, after a backoff that
 * doubles with each failure in the window, and gives up once more than
 * max_restarts failures fall within restart_window seconds. Every attempt's
 * start and end is appended as a JSON line to RUN_DIR/launch.jsonl.
 *
 * The command sees PLUMB_LAUNCH_ATTEMPT (0 for the first attempt, 1 for the
 * first restart...) and PLUMB_LAUNCH_RUN_DIR in its environment; fault
 * injections (train/inject.h) are armed only on attempt 0. No transport of
 * our own: every process of an attempt is started by the command itself. */
#ifndef PLUMB_LAUNCH_H
#define PLUMB_LAUNCH_H
#include "core/err.h"

struct launch_opts {
    char **argv;            /* command, NULL-terminated */
    const char *run_dir;    /* where launch.jsonl goes (created) */
    int max_restarts;       /* K: restarts allowed within the window */
    double restart_window;  /* S seconds: failures older than this are forgotten */
    double backoff;         /* first delay before a restart, seconds */
    double backoff_max;     /* the doubling stops here */
    double stop_grace;      /* after a forwarded signal, SIGKILL after this (0: never) */
    /* exit statuses that end the supervision at once, no restart (plumb's 2,
     * a usage or input error, which a restart would only repeat) */
    unsigned char no_restart[256];
};

enum launch_outcome {
    LAUNCH_SUCCEEDED = 0,   /* the command (eventually) exited 0 */
    LAUNCH_GAVE_UP,         /* more than max_restarts failures within the window */
    LAUNCH_INTERRUPTED,     /* a signal was forwarded; the job's status is returned */
    LAUNCH_NOT_RESTARTED,   /* the command exited with a status in no_restart */
};

struct launch_result {
    enum launch_outcome outcome;
    int exit_status;        /* what `plumb launch` should exit with: the last
                             * attempt's status, 128+N if it died of signal N */
    int attempts;           /* commands started */
    int restarts;           /* attempts - 1 */
};

/* Runs the supervision loop. Returns PLUMB_OK when the loop ran (whatever
 * the outcome), PLUMB_EUSAGE when the command cannot be started at all (not
 * found, not executable) or options are bad, PLUMB_EIO when the run folder
 * cannot be written. */
int launch_run(const struct launch_opts *o, struct launch_result *res, plumb_err *e);

/* Text for a wait status: "exit status 3", "signal 9 (SIGKILL)". */
void launch_describe_status(int wstatus, char *buf, size_t n);

#endif
