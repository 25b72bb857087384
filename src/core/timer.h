/* Monotonic wall-clock timers (CLOCK_MONOTONIC), seconds as double. */
#ifndef PLUMB_TIMER_H
#define PLUMB_TIMER_H
#include <time.h>

static inline double timer_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* UTC wall time as seconds since the epoch (for timestamps in results). */
static inline double timer_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
#endif
