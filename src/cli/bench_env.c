/* The PLUMB_* environment variables a benchmark ran under (PLUMB_GPT_ATTN,
 * PLUMB_GPT_DW_SLICES, PLUMB_CONV_LIB, PLUMB_TRAIN_STATUS, ...: they choose
 * kernels and paths), so its figures say which kernels ran: one printed line
 * and a JSON object {name: value}, names sorted. PLUMB_BACKEND_PATH and the
 * test hooks' PLUMB_TEST_* say where things were found, not what ran, and are
 * left out. */
#include "cli/bench.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

static int by_name(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static int counted(const char *kv)
{
    return !strncmp(kv, "PLUMB_", 6) && strncmp(kv, "PLUMB_BACKEND_PATH=", 19) && strncmp(kv, "PLUMB_TEST_", 11) &&
           strchr(kv, '=');
}

json_t *bench_env(FILE *print_to)
{
    size_t n = 0;
    for (char **p = environ; p && *p; p++) n += counted(*p);
    const char **v = n ? malloc(n * sizeof *v) : NULL;
    json_t *o = json_object();
    if (n && !v) n = 0;
    size_t k = 0;
    for (char **p = environ; p && *p && k < n; p++)
        if (counted(*p)) v[k++] = *p;
    qsort(v, k, sizeof *v, by_name);
    if (print_to) fprintf(print_to, "settings from the environment:%s", k ? "" : " none");
    for (size_t i = 0; i < k; i++) {
        const char *eq = strchr(v[i], '=');
        char name[128];
        const size_t len = (size_t)(eq - v[i]) < sizeof name - 1 ? (size_t)(eq - v[i]) : sizeof name - 1;
        memcpy(name, v[i], len);
        name[len] = 0;
        json_object_set_new(o, name, json_string(eq + 1));
        if (print_to) fprintf(print_to, " %s", v[i]);
    }
    if (print_to) fputc('\n', print_to);
    free(v);
    return o;
}
