/* Watchdog (docs/FAULTS.md): one background thread per process that
 * turns a hang into a failure. watchdog_enter/leave keep a small stack of
 * (description, entry time); the thread wakes a few times per timeout and, if
 * any open entry is older than the timeout, logs the innermost description and
 * how long each level has waited, runs the abort hook (bounded: it gets
 * WATCHDOG_HOOK_BOUND_S seconds in a thread of its own) and calls _exit, so
 * the launcher (mpirun, plumb launch) sees a failed process, never a hang.
 *
 * Why a stack with per-level times: the outermost entry is usually the whole
 * step ("step 41") and the inner ones are collectives; a step that is slow
 * although each collective is quick must fire as well as a single collective
 * that never returns, and the report names the innermost thing waited on. */
#include "core/watchdog.h"
#include "core/log.h"
#include "core/timer.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WD_DEPTH 16
#define WD_WHAT 160
#define WATCHDOG_HOOK_BOUND_S 5.0

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv;
static int g_cv_init;
static pthread_t g_thread;
static int g_running;     /* thread started and not asked to stop (under g_mu) */
static int g_stop;        /* asked to stop (under g_mu) */
static _Atomic int g_on;  /* fast path: watchdog enabled */
static double g_timeout;

static int g_depth;       /* entries open (may exceed WD_DEPTH; extra ones untracked) */
static char g_what[WD_DEPTH][WD_WHAT];
static double g_since[WD_DEPTH];

static void (*g_hook)(void *);
static void *g_hook_arg;

static void *hook_thread(void *arg)
{
    (void)arg;
    if (g_hook) g_hook(g_hook_arg);
    return NULL;
}

/* Runs the abort hook for at most WATCHDOG_HOOK_BOUND_S (a hook such as
 * ncclCommAbort may itself block), then ends the process. */
static void fire(const char *what, double waited, const char *outer, double outer_waited, int depth)
{
    if (depth > 1)
        log_error("watchdog: timed out after %.1f s (limit %.1f s) waiting on '%s' (inside '%s', open %.1f s); "
                  "exiting with status %d",
                  waited, g_timeout, what, outer, outer_waited, WATCHDOG_EXIT_CODE);
    else
        log_error("watchdog: timed out after %.1f s (limit %.1f s) waiting on '%s'; exiting with status %d",
                  waited, g_timeout, what, WATCHDOG_EXIT_CODE);
    if (g_hook) {
        pthread_t t;
        if (pthread_create(&t, NULL, hook_thread, NULL) == 0) {
            double t0 = timer_now();
            /* poll for the hook to finish; pthread_timedjoin_np is GNU only
             * but we build with _GNU_SOURCE */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += (time_t)WATCHDOG_HOOK_BOUND_S;
            if (pthread_timedjoin_np(t, NULL, &ts) != 0)
                log_error("watchdog: abort hook did not return within %.0f s; exiting anyway",
                          timer_now() - t0);
        }
    }
    fflush(stdout);
    fflush(stderr);
    _exit(WATCHDOG_EXIT_CODE);
}

static void *watch_thread(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&g_mu);
    while (!g_stop) {
        double period = g_timeout / 20.0;
        if (period < 0.01) period = 0.01;
        if (period > 0.25) period = 0.25;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        long ns = ts.tv_nsec + (long)(period * 1e9);
        ts.tv_sec += ns / 1000000000L;
        ts.tv_nsec = ns % 1000000000L;
        pthread_cond_timedwait(&g_cv, &g_mu, &ts);
        if (g_stop) break;
        double now = timer_now();
        int n = g_depth < WD_DEPTH ? g_depth : WD_DEPTH;
        for (int i = 0; i < n; i++) {
            if (now - g_since[i] > g_timeout) {
                char what[WD_WHAT], outer[WD_WHAT];
                snprintf(what, sizeof what, "%s", g_what[n - 1]);
                snprintf(outer, sizeof outer, "%s", g_what[0]);
                double w = now - g_since[n - 1], ow = now - g_since[0];
                pthread_mutex_unlock(&g_mu);
                fire(what, w, outer, ow, n);
                /* not reached */
            }
        }
    }
    pthread_mutex_unlock(&g_mu);
    return NULL;
}

int watchdog_start(double timeout_s)
{
    watchdog_stop();
    if (!(timeout_s > 0)) return 0;
    pthread_mutex_lock(&g_mu);
    if (!g_cv_init) {
        pthread_condattr_t a;
        pthread_condattr_init(&a);
        pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
        pthread_cond_init(&g_cv, &a);
        pthread_condattr_destroy(&a);
        g_cv_init = 1;
    }
    g_timeout = timeout_s;
    g_stop = 0;
    /* entries opened before the start count from now */
    double now = timer_now();
    for (int i = 0; i < WD_DEPTH; i++) g_since[i] = now;
    int rc = pthread_create(&g_thread, NULL, watch_thread, NULL);
    if (rc == 0) {
        g_running = 1;
        atomic_store(&g_on, 1);
    }
    pthread_mutex_unlock(&g_mu);
    if (rc) log_error("watchdog: cannot start its thread (pthread_create: %s)", strerror(rc));
    return rc ? -1 : 0;
}

void watchdog_stop(void)
{
    pthread_mutex_lock(&g_mu);
    if (!g_running) {
        pthread_mutex_unlock(&g_mu);
        return;
    }
    atomic_store(&g_on, 0);
    g_stop = 1;
    g_running = 0;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
    pthread_join(g_thread, NULL);
}

void watchdog_enter(const char *what)
{
    /* the stack is kept even while off so that a watchdog started later
     * reports correctly; the fast path is one atomic load plus the lock only
     * when on */
    if (!atomic_load_explicit(&g_on, memory_order_relaxed)) {
        pthread_mutex_lock(&g_mu);
        if (g_depth < WD_DEPTH) snprintf(g_what[g_depth], WD_WHAT, "%s", what ? what : "?");
        g_depth++;
        pthread_mutex_unlock(&g_mu);
        return;
    }
    double now = timer_now();
    pthread_mutex_lock(&g_mu);
    if (g_depth < WD_DEPTH) {
        snprintf(g_what[g_depth], WD_WHAT, "%s", what ? what : "?");
        g_since[g_depth] = now;
    }
    g_depth++;
    pthread_mutex_unlock(&g_mu);
}

void watchdog_leave(void)
{
    pthread_mutex_lock(&g_mu);
    if (g_depth > 0) g_depth--;
    pthread_mutex_unlock(&g_mu);
}

void watchdog_set_abort_hook(void (*hook)(void *), void *arg)
{
    pthread_mutex_lock(&g_mu);
    g_hook = hook;
    g_hook_arg = arg;
    pthread_mutex_unlock(&g_mu);
}
