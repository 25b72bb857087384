/* Child jobs of accept checks that run plumb itself (under mpirun for
 * several ranks): where the plumb binary is, and running a command with its
 * output in a log file and a time limit. */
#ifndef PLUMB_ACCEPT_CHILD_H
#define PLUMB_ACCEPT_CHILD_H
#include <stddef.h>
#include "core/err.h"

/* $PLUMB when set and executable, else this executable when it is plumb,
 * else `plumb` next to it (the test binary's case). */
int accept_find_plumb(char *out, size_t n, plumb_err *e);
/* 1 when `mpirun` is on PATH. */
int accept_have_mpirun(void);
/* Runs argv (argv[0] a path, or a name looked up on PATH) in a process group
 * of its own, stdout and stderr appended to log_path (the command line
 * first), stdin /dev/null. After limit_s seconds the group gets SIGTERM,
 * then SIGKILL 10 s later. *exit_code: the exit status, 128 + signal when
 * killed by one, and *timed_out set when the limit ended it. */
int accept_run_child(char *const *argv, const char *log_path, double limit_s, int *exit_code, int *timed_out,
                     plumb_err *e);

#endif
