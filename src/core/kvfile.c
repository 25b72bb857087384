/* key = value files with [sections]: see kvfile.h. */
#include "core/kvfile.h"
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) s++;
    char *end = s + strlen(s);
    while (end > s && isspace((unsigned char)end[-1])) *--end = 0;
    return s;
}

static char *unquote(char *v)
{
    size_t n = strlen(v);
    if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
        v[n - 1] = 0;
        v++;
    }
    return v;
}

int kvfile_parse(const char *text, const char *origin, kvfile_fn fn, void *arg, plumb_err *e)
{
    char *copy = strdup(text ? text : "");
    if (!copy) return err_set(e, PLUMB_ENOMEM, "out of memory");
    int rc = PLUMB_OK, lineno = 0;
    char *section = NULL, *next = NULL;
    /* strtok_r would skip empty lines and shift line numbers: split by hand */
    for (char *ln = copy; ln && !rc; ln = next) {
        next = strchr(ln, '\n');
        if (next) *next++ = 0;
        lineno++;
        char *hash = strchr(ln, '#');
        if (hash) *hash = 0;
        char *s = trim(ln);
        if (!*s) continue;
        if (*s == '[') {
            char *close = strchr(s, ']');
            if (!close || *trim(close + 1)) {
                rc = err_set(e, PLUMB_EUSAGE, "%s:%d: '%s' is not a [section] line", origin, lineno, s);
                break;
            }
            *close = 0;
            section = unquote(trim(s + 1));
            if (!*section) rc = err_set(e, PLUMB_EUSAGE, "%s:%d: empty [section] name", origin, lineno);
            continue;
        }
        char *eq = strchr(s, '=');
        if (!eq) {
            rc = err_set(e, PLUMB_EUSAGE, "%s:%d: '%s' is not 'key = value'", origin, lineno, s);
            break;
        }
        *eq = 0;
        char *k = trim(s), *v = unquote(trim(eq + 1));
        if (!*k) {
            rc = err_set(e, PLUMB_EUSAGE, "%s:%d: a value without a key", origin, lineno);
            break;
        }
        rc = fn(arg, origin, lineno, section, k, v, e);
    }
    free(copy);
    return rc;
}
