#include <errno.h>
#include "core/jsonx.h"
#include "core/file.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

int jsonx_write_file(const char *path, const json_t *j, plumb_err *e)
{
    char *s = json_dumps(j, JSON_INDENT(1) | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    if (!s) return err_set(e, PLUMB_EINTERNAL, "cannot serialise JSON for %s", path);
    size_t n = strlen(s);
    const void *bufs[2] = {s, "\n"};
    size_t lens[2] = {n, 1};
    int rc = file_write_atomic_iov(path, bufs, lens, 2, e);
    free(s);
    return rc;
}

int jsonx_read_file(const char *path, json_t **out, plumb_err *e)
{
    json_error_t je;
    /* a key twice (a hand-edited results.json with two "checks") kept the last without a word */
    *out = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!*out) {
        if (!file_exists(path)) return err_set(e, PLUMB_EUSAGE, "%s: no such file", path);
        return err_set(e, PLUMB_EUSAGE, "%s:%d:%d: invalid JSON: %s", path, je.line, je.column, je.text);
    }
    return PLUMB_OK;
}

int jsonx_read_input(const char *path, size_t cap, json_t **out, plumb_err *e)
{
    char *buf = NULL;
    size_t len = 0;
    *out = NULL;
    int rc = file_read_input(path, cap, &buf, &len, e);
    if (rc) return rc;
    json_error_t je;
    *out = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je); /* as jsonx_read_file: a key twice is an error */
    free(buf);
    if (!*out) return err_set(e, PLUMB_EUSAGE, "%s:%d:%d: invalid JSON: %s", path, je.line, je.column, je.text);
    return PLUMB_OK;
}

int jsonx_append_line(FILE *f, const json_t *j, plumb_err *e)
{
    char *s = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(10));
    if (!s) return err_set(e, PLUMB_EINTERNAL, "cannot serialise JSON line");
    errno = 0;
    int ok = fputs(s, f) >= 0 && fputc('\n', f) != EOF && fflush(f) == 0;
    int err = errno;
    free(s);
    return ok ? PLUMB_OK : err_set(e, PLUMB_EIO, "write of a JSON line failed: %s", err ? strerror(err) : "I/O error");
}

double jsonx_num(const json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

const char *jsonx_str(const json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}
