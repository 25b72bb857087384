/* The text format of plumb's threshold files (health thresholds,
 * docs/health.md; comm thresholds, docs/COMM.md):
 *
 *   # a comment, to the end of the line
 *   key = value            (a value may be "quoted"; spaces around are trimmed)
 *   [section name]         (keys below it belong to the section, until the next one)
 *
 * Blank lines are ignored. kvfile_parse calls fn once per key, in order, with
 * the section it is in (NULL before the first section header) and its line
 * number, so that messages name origin:line; fn returns PLUMB_OK or an error
 * (filling e), which stops the parse. A line that is none of the above is
 * PLUMB_EUSAGE naming origin:line. */
#ifndef PLUMB_KVFILE_H
#define PLUMB_KVFILE_H
#include "core/err.h"

typedef int (*kvfile_fn)(void *arg, const char *origin, int line, const char *section, const char *key,
                         const char *value, plumb_err *e);

int kvfile_parse(const char *text, const char *origin, kvfile_fn fn, void *arg, plumb_err *e);
/* The most bytes a threshold file may have (its readers read it with
 * file_read_input: a device or a FIFO is refused). */
#define KVFILE_READ_CAP ((size_t)1 << 20)

#endif
