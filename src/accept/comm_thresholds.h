/* Bandwidth thresholds of the comm check (docs/COMM.md, "Thresholds"): the
 * key = value format of core/kvfile.h, with sections per SKU.
 *
 *   at_bytes = 64M            the size the figures are meant for: they apply
 *                             when the largest size swept is at least this
 *   min_world = 2             and only with at least this many ranks (bus
 *                             bandwidth is 0 on one rank)
 *   min_busbw = 100           GB/s (1e9 B/s): every collective's busbw at the
 *                             largest size swept, out of place and in place
 *   min_busbw.allreduce = 150 the same for one collective (allreduce,
 *                             allgather, reduce-scatter, broadcast, reduce,
 *                             alltoall), over min_busbw
 *   min_avg_busbw = 50        nccl-tests' NCCL_TESTS_MIN_BW: fails when the
 *                             mean busbw over every row of a (collective,
 *                             dtype) sweep, both placements, is below 0.9 x
 *                             the value; min_avg_busbw.<collective> as above
 *   [NVIDIA H200]             keys below apply when the device name contains
 *                             the section name (case-insensitive); every
 *                             matching section applies, in file order, so a
 *                             later, narrower one ("H100 PCIe") overrides an
 *                             earlier, broader one ("H100")
 * "off" or 0 disables a limit. Keys before the first section apply to every
 * device. The built-in table (comm_thresholds_builtin) is read first, then a
 * file given with --thresholds over it. */
#ifndef PLUMB_COMM_THRESHOLDS_H
#define PLUMB_COMM_THRESHOLDS_H
#include <jansson.h>
#include <stddef.h>
#include "comm/comm.h"
#include "core/err.h"

struct comm_thresholds {
    double at_bytes;
    int min_world;
    double min_busbw[COMM_COLL_N];     /* GB/s, 0 = off */
    double min_avg_busbw[COMM_COLL_N]; /* GB/s, 0 = off */
    char sections[256];                /* the sections that matched, "; "-separated ("" none) */
    char source[512];                  /* "built-in" or "built-in + FILE" */
};

/* The built-in per-SKU table, as text in the file format. */
extern const char comm_thresholds_builtin[];

/* Thresholds for a device called sku (its name, e.g. "NVIDIA H200"): the
 * built-in table, then `file` (NULL: none) over it. Errors name file:line. */
int comm_thresholds_resolve(const char *file, const char *sku, struct comm_thresholds *t, plumb_err *e);
/* Same from text (tests); origin names it in messages. Starts from t as it is. */
int comm_thresholds_parse(struct comm_thresholds *t, const char *text, const char *origin, const char *sku,
                          plumb_err *e);
void comm_thresholds_clear(struct comm_thresholds *t);
json_t *comm_thresholds_json(const struct comm_thresholds *t);

/* "64M" -> 67108864: an integer with an optional K, M or G suffix (powers of
 * 1024, as nccl-tests reads -b/-e). PLUMB_EUSAGE naming `what` otherwise. */
int comm_parse_bytes(const char *s, const char *what, size_t *out, plumb_err *e);
/* "allreduce" (also "all-reduce", "all_reduce") -> COMM_ALLREDUCE; -1 when unknown. */
int comm_coll_parse(const char *s);

#endif
