/* Guarded reads out of a mapped file (mapguard.h). */
#include "core/mapguard.h"
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>

/* The guard armed on this thread. initial-exec: the handler reads it, and
 * a variable of the executable itself needs no lazy allocation there. */
static __thread struct mapguard *g_active __attribute__((tls_model("initial-exec")));
static struct sigaction g_prev; /* the disposition the handler replaced */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_install_errno;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    struct mapguard *g = g_active;
    const char *a = si ? (const char *)si->si_addr : NULL;
    if (g && a >= g->lo && a < g->lo + g->len) {
        g->fault = a;
        g_active = NULL;
        siglongjmp(g->jb, 1);
    }
    /* not a guarded read: whatever handled SIGBUS before (the default ends
     * the process with "Bus error") handles it now. The signal is blocked
     * until this handler returns, so the raised one is delivered then; a
     * fault would also come again when the instruction is retried. */
    sigaction(SIGBUS, &g_prev, NULL);
    raise(sig);
}

static void install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, &g_prev)) g_install_errno = errno ? errno : EINVAL;
}

int mapguard_init(plumb_err *e)
{
    pthread_once(&g_once, install);
    if (g_install_errno)
        return err_set(e, PLUMB_EINTERNAL, "cannot install the SIGBUS handler for mapped files: %s",
                       strerror(g_install_errno));
    return PLUMB_OK;
}

void mapguard_prepare(struct mapguard *g, const void *map, size_t len)
{
    pthread_once(&g_once, install);
    g->lo = map;
    g->len = len;
    g->fault = NULL;
}

void mapguard_arm(struct mapguard *g)
{
    g_active = g;
    /* the guarded loads stay after this store (the handler runs on this thread) */
    atomic_signal_fence(memory_order_seq_cst);
}

void mapguard_disarm(struct mapguard *g)
{
    (void)g;
    atomic_signal_fence(memory_order_seq_cst);
    g_active = NULL;
}

int mapguard_memcpy(const void *map, size_t len, const char *path, const char *what, void *dst, const void *src,
                    size_t n, plumb_err *e)
{
    struct mapguard g;
    mapguard_prepare(&g, map, len);
    if (sigsetjmp(g.jb, 0)) return mapguard_error(&g, path, what, e);
    mapguard_arm(&g);
    memcpy(dst, src, n);
    mapguard_disarm(&g);
    return PLUMB_OK;
}

int mapguard_error(struct mapguard *g, const char *path, const char *what, plumb_err *e)
{
    g_active = NULL;
    sigset_t bus;
    sigemptyset(&bus);
    sigaddset(&bus, SIGBUS);
    pthread_sigmask(SIG_UNBLOCK, &bus, NULL);
    const size_t at = g->fault ? (size_t)(g->fault - g->lo) : 0;
    struct stat st;
    char now[64];
    if (stat(path, &st) == 0) snprintf(now, sizeof now, "%lld bytes now", (long long)st.st_size);
    else snprintf(now, sizeof now, "now gone: %s", strerror(errno));
    return err_set(e, PLUMB_EIO,
                   "%s: %s shrank while being read (%zu bytes when opened, %s; the read at byte %zu failed): it was "
                   "truncated or rewritten in place during the run (expected it unchanged until the run ends)",
                   path, what, g->len, now, at);
}
