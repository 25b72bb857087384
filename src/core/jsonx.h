/* JSON helpers over jansson: atomic file write, file read with a message that
 * names the file and line, and typed getters that report what was expected. */
#ifndef PLUMB_JSONX_H
#define PLUMB_JSONX_H
#include <jansson.h>
#include "core/err.h"

int jsonx_write_file(const char *path, const json_t *j, plumb_err *e); /* atomic, indented */
int jsonx_read_file(const char *path, json_t **out, plumb_err *e);
/* Appends one compact JSON object + '\n' to an open line file (metrics.jsonl). */
int jsonx_append_line(FILE *f, const json_t *j, plumb_err *e);
/* Number as double from an integer or real member; NAN if absent. */
double jsonx_num(const json_t *obj, const char *key);
const char *jsonx_str(const json_t *obj, const char *key); /* NULL if absent */

#endif
