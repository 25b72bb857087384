/* Fault injection for drills and tests (docs/FAULTS.md), off unless
 * asked. Spec grammar, comma-separated list of:
 *   oom@STEP[:RANK][xCOUNT]  allocation failure at STEP (COUNT consecutive failures, default 1)
 *   nan@STEP[:RANK]          non-finite gradient at STEP
 *   hang@STEP:RANK           RANK blocks forever in the collective of STEP
 *   exit@STEP:RANK           RANK exits with status 1 at STEP
 *   corrupt-checkpoint       the newest checkpoint written is corrupted after writing
 * RANK omitted = every rank. An injection fires once per process lifetime, and
 * not again after a resume that restarts below STEP unless the launcher passes
 * it again (the drill harness strips it on restart). Under plumb launch the
 * spec is armed only on attempt 0 (PLUMB_LAUNCH_ATTEMPT unset or "0"); later
 * attempts check it but do not arm it. corrupt-checkpoint also takes an
 * optional @STEP (the checkpoint written at STEP) and :RANK. */
#ifndef PLUMB_INJECT_H
#define PLUMB_INJECT_H
#include "core/err.h"

enum inject_kind { INJECT_OOM = 0, INJECT_NAN, INJECT_HANG, INJECT_EXIT, INJECT_CORRUPT_CKPT, INJECT_KINDS };

int inject_parse(const char *spec, plumb_err *e); /* NULL or "" clears */
/* Returns the number of times to fire (0 = not now) for kind at step on rank,
 * and consumes it. */
int inject_take(enum inject_kind kind, long step, int rank);
int inject_active(void);

#endif
