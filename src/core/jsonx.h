/* JSON helpers over jansson: atomic file write, file read with a message that
 * names the file and line, and typed getters that report what was expected. */
#ifndef PLUMB_JSONX_H
#define PLUMB_JSONX_H
#include <jansson.h>
#include "core/err.h"

int jsonx_write_file(const char *path, const json_t *j, plumb_err *e); /* atomic, indented */
int jsonx_read_file(const char *path, json_t **out, plumb_err *e);
/* A JSON document a user names (a run folder's results.json): the rules of
 * file_check_input (a regular file of at most cap bytes; a FIFO or a device
 * is an error naming it) and the parse in one open. Errors PLUMB_EUSAGE
 * (PLUMB_ENOMEM when the text does not fit in memory). */
int jsonx_read_input(const char *path, size_t cap, json_t **out, plumb_err *e);
/* Appends one compact JSON object + '\n' to an open line file (metrics.jsonl). */
int jsonx_append_line(FILE *f, const json_t *j, plumb_err *e);
/* Number as double from an integer or real member; NAN if absent. */
double jsonx_num(const json_t *obj, const char *key);
const char *jsonx_str(const json_t *obj, const char *key); /* NULL if absent */

#endif
