/* core/file.c's atomic write makes a file durable before it becomes visible
 * and the rename durable after: data fsync'ed, then renamed over the old
 * name, then the directory fsync'ed, in that order. A crash before the
 * rename leaves the old file (test_core.c); here the calls themselves are
 * watched: this file defines fsync and rename for the test binary (the
 * library is linked in statically, so its calls resolve here first), records
 * them while a test listens, and passes them on to the C library's. */
#include "test.h"
#include "core/file.h"
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

enum { TRACE_MAX = 16 };
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_listen, g_n;
static char g_trace[TRACE_MAX][PATH_MAX + 16];

static void record(const char *fmt, const char *a, const char *b)
{
    pthread_mutex_lock(&g_mu);
    if (g_listen && g_n < TRACE_MAX) snprintf(g_trace[g_n++], sizeof g_trace[0], fmt, a, b ? b : "");
    pthread_mutex_unlock(&g_mu);
}

int fsync(int fd)
{
    static int (*real)(int);
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "fsync");
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    path[n > 0 ? n : 0] = 0;
    record("fsync %s%s", path, NULL);
    return real ? real(fd) : -1;
}

int rename(const char *from, const char *to)
{
    static int (*real)(const char *, const char *);
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "rename");
    record("rename %s -> %s", from, to);
    return real ? real(from, to) : -1;
}

TEST(core_atomic_write_fsyncs_then_renames_then_fsyncs_the_dir)
{
    char dir[PATH_MAX], path[PATH_MAX], want[4][PATH_MAX + 16];
    plumb_err e = {0};
    /* a real directory name (the trace holds the kernel's path of each fd) */
    REQUIRE(realpath(test_tmpdir(), dir) != NULL);
    REQUIRE(file_join(path, sizeof path, dir, "durable.json", &e) == 0);
    REQUIRE(file_write_atomic(path, "old", 3, &e) == 0);
    pthread_mutex_lock(&g_mu);
    g_n = 0;
    g_listen = 1;
    pthread_mutex_unlock(&g_mu);
    int rc = file_write_atomic(path, "{\"new\": 1}", 10, &e);
    pthread_mutex_lock(&g_mu);
    g_listen = 0;
    pthread_mutex_unlock(&g_mu);
    REQUIRE(rc == 0);
    char tmp[PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    snprintf(want[0], sizeof want[0], "fsync %s", tmp);
    snprintf(want[1], sizeof want[1], "rename %s -> %s", tmp, path);
    snprintf(want[2], sizeof want[2], "fsync %s", dir);
    for (int i = 0; i < g_n; i++) fprintf(stderr, "  %d: %s\n", i, g_trace[i]);
    CHECK_EQ_INT(g_n, 3);
    for (int i = 0; i < 3 && i < g_n; i++) CHECK_STREQ(g_trace[i], want[i]);
    char *data = NULL;
    size_t len = 0;
    REQUIRE(file_read_all(path, &data, &len, &e) == 0);
    CHECK(len == 10 && !memcmp(data, "{\"new\": 1}", 10));
    free(data);
}
