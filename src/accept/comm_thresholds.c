/* Comm bandwidth thresholds: the file format and the built-in per-SKU table
 * (comm_thresholds.h). */
#include "accept/comm_thresholds.h"
#include "core/file.h"
#include "core/kvfile.h"
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Floors, not expectations: each is above what a PCIe-only path between the
 * GPUs can carry (PCIe Gen5 x16 moves at most ~63 GB/s per direction, Gen4
 * x16 ~31.5), so a fabric that fell back to PCIe (a link down, peer access
 * off, the wrong NCCL transport) fails, while a healthy one passes with
 * room. They come from link arithmetic, not from measurements on these SKUs
 * (docs/COMM.md says so); tighten them per site with --thresholds. */
const char comm_thresholds_builtin[] =
    "# built-in comm thresholds (accept/comm_thresholds.c)\n"
    "at_bytes = 64M\n"
    "min_world = 2\n"
    "[H100]\n"
    "min_busbw.allreduce = 100      # NVLink 4: 18 links x 25 GB/s per direction\n"
    "min_busbw.allgather = 100\n"
    "min_busbw.reduce-scatter = 100\n"
    "[H200]\n"
    "min_busbw.allreduce = 100\n"
    "min_busbw.allgather = 100\n"
    "min_busbw.reduce-scatter = 100\n"
    "[H100 PCIe]                    # no NVLink switch: no floor\n"
    "min_busbw = off\n"
    "[H100 NVL]                     # NVLink bridges pair cards only\n"
    "min_busbw = off\n"
    "[MI300X]\n"
    "min_busbw.allreduce = 70       # 7 xGMI links x 64 GB/s, all-to-all between the 8 GPUs\n"
    "min_busbw.allgather = 70\n"
    "min_busbw.reduce-scatter = 70\n";

void comm_thresholds_clear(struct comm_thresholds *t)
{
    memset(t, 0, sizeof *t);
    t->at_bytes = 0;
    t->min_world = 2;
}

int comm_coll_parse(const char *s)
{
    char n[32];
    size_t k = 0;
    for (; *s && k + 1 < sizeof n; s++)
        if (*s != '-' && *s != '_') n[k++] = (char)tolower((unsigned char)*s);
    n[k] = 0;
    if (!strcmp(n, "allreduce")) return COMM_ALLREDUCE;
    if (!strcmp(n, "broadcast")) return COMM_BROADCAST;
    if (!strcmp(n, "reduce")) return COMM_REDUCE;
    if (!strcmp(n, "allgather")) return COMM_ALLGATHER;
    if (!strcmp(n, "reducescatter")) return COMM_REDUCE_SCATTER;
    if (!strcmp(n, "alltoall")) return COMM_ALLTOALL;
    return -1;
}

int comm_parse_bytes(const char *s, const char *what, size_t *out, plumb_err *e)
{
    char *end;
    errno = 0;
    if (!s || !isdigit((unsigned char)*s))
        return err_set(e, PLUMB_EUSAGE, "%s: '%s' is not a size (expected bytes, e.g. 8, 512K, 64M, 1G)", what,
                       s ? s : "");
    unsigned long long v = strtoull(s, &end, 10);
    unsigned long long mul = 1;
    if (*end == 'K' || *end == 'k') mul = 1ull << 10, end++;
    else if (*end == 'M' || *end == 'm') mul = 1ull << 20, end++;
    else if (*end == 'G' || *end == 'g') mul = 1ull << 30, end++;
    if (errno || *end || (v && mul > ~0ull / v))
        return err_set(e, PLUMB_EUSAGE, "%s: '%s' is not a size (expected bytes, e.g. 8, 512K, 64M, 1G)", what, s);
    *out = (size_t)(v * mul);
    return PLUMB_OK;
}

static int parse_limit(const char *origin, int line, const char *k, const char *v, double *out, plumb_err *e)
{
    if (!strcmp(v, "off") || !strcmp(v, "none")) {
        *out = 0;
        return PLUMB_OK;
    }
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(x) || x < 0)
        return err_set(e, PLUMB_EUSAGE, "%s:%d: %s = '%s' is not a non-negative number of GB/s (or off)", origin, line,
                       k, v);
    *out = x;
    return PLUMB_OK;
}

/* does the device name contain the section name (case-insensitive)? */
static int matches(const char *sku, const char *section)
{
    if (!sku) return 0;
    size_t n = strlen(section);
    for (const char *p = sku; *p; p++)
        if (!strncasecmp(p, section, n)) return 1;
    return 0;
}

struct parse_ctx {
    struct comm_thresholds *t;
    const char *sku;
    const char *last_section;
};

static int on_key(void *arg, const char *origin, int line, const char *section, const char *k, const char *v,
                  plumb_err *e)
{
    struct parse_ctx *p = arg;
    struct comm_thresholds *t = p->t;
    /* check every key (so a typo in a section for another SKU is still an
     * error), apply only those of matching sections */
    int apply = !section || matches(p->sku, section);
    struct comm_thresholds scratch;
    if (!apply) {
        scratch = *t;
        t = &scratch;
    } else if (section && (!p->last_section || strcmp(p->last_section, section))) {
        size_t L = strlen(p->t->sections);
        snprintf(p->t->sections + L, sizeof p->t->sections - L, "%s%s", L ? "; " : "", section);
        p->last_section = section;
    }
    if (!strcmp(k, "at_bytes")) {
        size_t b;
        char what[96];
        snprintf(what, sizeof what, "%s:%d: at_bytes", origin, line);
        if (comm_parse_bytes(v, what, &b, e)) return e->code;
        t->at_bytes = (double)b;
        return PLUMB_OK;
    }
    if (!strcmp(k, "min_world")) {
        char *end;
        long w = strtol(v, &end, 10);
        if (end == v || *end || w < 1 || w > 1 << 20)
            return err_set(e, PLUMB_EUSAGE, "%s:%d: min_world = '%s' is not a rank count >= 1", origin, line, v);
        t->min_world = (int)w;
        return PLUMB_OK;
    }
    double *arr = NULL;
    const char *rest = NULL;
    if (!strncmp(k, "min_busbw", 9)) arr = t->min_busbw, rest = k + 9;
    if (!strncmp(k, "min_avg_busbw", 13)) arr = t->min_avg_busbw, rest = k + 13;
    if (arr && (!*rest || *rest == '.')) {
        double x = 0;
        int rc = parse_limit(origin, line, k, v, &x, e);
        if (rc) return rc;
        if (!*rest) {
            for (int c = 0; c < COMM_COLL_N; c++) arr[c] = x;
            return PLUMB_OK;
        }
        int c = comm_coll_parse(rest + 1);
        if (c < 0)
            return err_set(e, PLUMB_EUSAGE,
                           "%s:%d: '%s': unknown collective '%s' (expected allreduce, allgather, reduce-scatter, "
                           "broadcast, reduce or alltoall)", origin, line, k, rest + 1);
        arr[c] = x;
        return PLUMB_OK;
    }
    return err_set(e, PLUMB_EUSAGE,
                   "%s:%d: unknown key '%s' (expected at_bytes, min_world, min_busbw[.COLL], min_avg_busbw[.COLL])",
                   origin, line, k);
}

int comm_thresholds_parse(struct comm_thresholds *t, const char *text, const char *origin, const char *sku,
                          plumb_err *e)
{
    struct parse_ctx p = {t, sku, NULL};
    return kvfile_parse(text, origin, on_key, &p, e);
}

int comm_thresholds_resolve(const char *file, const char *sku, struct comm_thresholds *t, plumb_err *e)
{
    comm_thresholds_clear(t);
    int rc = comm_thresholds_parse(t, comm_thresholds_builtin, "built-in comm thresholds", sku, e);
    if (rc) return rc;
    snprintf(t->source, sizeof t->source, "built-in");
    if (!file) return PLUMB_OK;
    char *text = NULL;
    size_t len = 0;
    /* a small text file: /dev/zero was read into memory without end, a FIFO blocked for ever */
    if ((rc = file_read_input(file, KVFILE_READ_CAP, &text, &len, e))) return err_wrap(e, "--thresholds");
    rc = comm_thresholds_parse(t, text, file, sku, e);
    free(text);
    if (!rc) snprintf(t->source, sizeof t->source, "built-in + %s", file);
    return rc;
}

json_t *comm_thresholds_json(const struct comm_thresholds *t)
{
    json_t *o = json_object(), *mb = json_object(), *ma = json_object();
    for (int c = 0; c < COMM_COLL_N; c++) {
        if (t->min_busbw[c] > 0) json_object_set_new(mb, comm_coll_name((enum comm_coll)c), json_real(t->min_busbw[c]));
        if (t->min_avg_busbw[c] > 0)
            json_object_set_new(ma, comm_coll_name((enum comm_coll)c), json_real(t->min_avg_busbw[c]));
    }
    json_object_set_new(o, "min_busbw_GBps", mb);
    json_object_set_new(o, "min_avg_busbw_GBps", ma);
    json_object_set_new(o, "at_bytes", json_real(t->at_bytes));
    json_object_set_new(o, "min_world", json_integer(t->min_world));
    json_object_set_new(o, "sections", json_string(t->sections));
    json_object_set_new(o, "source", json_string(t->source));
    return o;
}
