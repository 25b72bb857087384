#include "core/log.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>

static int g_level = -1;
static int g_rank = -1, g_world = 0;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

int log_parse_level(const char *s)
{
    if (!s) return -1;
    if (!strcmp(s, "debug")) return LOG_DEBUG;
    if (!strcmp(s, "info")) return LOG_INFO;
    if (!strcmp(s, "warn")) return LOG_WARN;
    if (!strcmp(s, "error")) return LOG_ERROR;
    if (!strcmp(s, "quiet")) return LOG_QUIET;
    return -1;
}

int log_get_level(void)
{
    if (g_level < 0) {
        int l = log_parse_level(getenv("PLUMB_LOG"));
        g_level = l < 0 ? LOG_INFO : l;
    }
    return g_level;
}

void log_set_level(int level) { g_level = level; }
void log_set_rank(int rank, int world) { g_rank = rank; g_world = world; }

void log_msg(int level, const char *fmt, ...)
{
    if (level < log_get_level()) return;
    static const char *names[] = {"debug", "info", "warn", "error"};
    char line[4096];
    int n = 0;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    n += snprintf(line + n, sizeof line - n, "%02d:%02d:%02d.%03ld ", tm.tm_hour, tm.tm_min,
                  tm.tm_sec, ts.tv_nsec / 1000000);
    if (g_rank >= 0) n += snprintf(line + n, sizeof line - n, "[r%d/%d] ", g_rank, g_world);
    n += snprintf(line + n, sizeof line - n, "%s: ", names[level < 0 ? 0 : level > 3 ? 3 : level]);
    va_list ap;
    va_start(ap, fmt);
    if (n < (int)sizeof line) vsnprintf(line + n, sizeof line - n, fmt, ap);
    va_end(ap);
    /* one write per line so ranks' lines do not interleave mid-line */
    pthread_mutex_lock(&g_lock);
    fprintf(stderr, "%s\n", line);
    fflush(stderr);
    pthread_mutex_unlock(&g_lock);
}
