/* Watchdog (docs/FAULTS.md): a background thread that turns a hang into
 * a failure. Code about to block (a collective, a whole step) calls
 * watchdog_enter("allreduce grads bucket 3") and watchdog_leave() after; if
 * the time between them exceeds the timeout, the watchdog logs what the rank
 * waited on and for how long, runs the registered abort hook (e.g.
 * ncclCommAbort, bounded), and ends the process with exit status
 * WATCHDOG_EXIT_CODE so the launcher sees a failure, never a hang.
 * Nesting is allowed; the innermost description is reported. Thread-safe.
 * With timeout <= 0 the watchdog is off and enter/leave cost a few loads. */
#ifndef PLUMB_WATCHDOG_H
#define PLUMB_WATCHDOG_H

#define WATCHDOG_EXIT_CODE 124

int watchdog_start(double timeout_s);
void watchdog_stop(void);
void watchdog_enter(const char *what);
void watchdog_leave(void);
/* Called (once) from the watchdog thread before exiting. */
void watchdog_set_abort_hook(void (*hook)(void *), void *arg);

#endif
