/* Logging to stderr with a rank prefix and levels.
 * Level from PLUMB_LOG=debug|info|warn|error (default info) or log_set_level. */
#ifndef PLUMB_LOG_H
#define PLUMB_LOG_H

enum log_level { LOG_DEBUG = 0, LOG_INFO = 1, LOG_WARN = 2, LOG_ERROR = 3, LOG_QUIET = 4 };

void log_set_level(int level);
int log_get_level(void);
/* Rank and world size shown as "[r1/4]"; rank < 0 (default) shows nothing. */
void log_set_rank(int rank, int world);
int log_parse_level(const char *s); /* -1 when unknown */
void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif
