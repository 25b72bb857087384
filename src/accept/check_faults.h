/* The faults check (plumb faults, plumb accept --standard): runs the fault
 * drills of faults/drills.h into checks/faults[-device]/ and turns their
 * results into a checks[] entry. */
#ifndef PLUMB_CHECK_FAULTS_H
#define PLUMB_CHECK_FAULTS_H
#include "report/check.h"

/* plumb: the binary the drills run (NULL: this process's own binary, or the
 * plumb next to it when this is not plumb, e.g. plumb-tests); drills: comma
 * list (NULL: all); table: FILE* for the results table (NULL: none). */
int check_faults_drills(const struct check_ctx *ctx, const char *plumb, const char *drills, int ranks,
                        double step_timeout, long steps, long ckpt_every, int quiet, struct check_result *r,
                        void *table, plumb_err *e);

#endif
