/* The comm check (plumb comm, accept's comm check; docs/COMM.md): a sweep of
 * collectives over sizes as nccl-tests runs it, with bandwidth in its terms
 * and a correctness check that cannot pass by accident.
 *
 * For each collective, dtype and size S (bytes, from min_bytes to max_bytes,
 * times step_factor or plus step_bytes), out of place and in place:
 *   1. all ranks meet (comm_arrive: a rank that does not arrive within the
 *      timeout is named, and the job fails);
 *   2. warmup + iters back-to-back collectives; time = wall time / iters,
 *      averaged over ranks (time_each: each call timed alone, a barrier
 *      between calls, the OSU micro-benchmarks' method); algbw = S / time (GB = 1e9 B); busbw = algbw x
 *      2(n-1)/n (allreduce), (n-1)/n (allgather, reduce-scatter, alltoall),
 *      1 (broadcast, reduce), nccl-tests' factors;
 *   3. with check on: fresh inputs, one more collective, every received
 *      element compared with its exact value (#wrong, summed over ranks).
 * S is nccl-tests' size: the larger of a rank's send and receive buffers
 * (allgather: the gathered buffer; reduce-scatter: the buffer reduced;
 * alltoall: a rank's whole send buffer); per-rank counts are S / dtype size
 * / n for the last three, rounded down, and a size that leaves a rank no
 * element is skipped. All-to-all has no in-place form.
 *
 * Inputs (rank r, element j of its send buffer) are integers drawn from
 * Philox (seed, RNG_COMM_CHECK, r, case, j), so every exact result is known
 * in any summation order:
 *   sum:  nonzero integers in [-m, -1] U [1, m], m = floor(L / n), with L
 *         the largest integer up to which the dtype holds every integer
 *         (bf16 256, fp16 2048, fp32 2^24, fp64 2^53, i32 2^30, i64 2^52):
 *         every partial sum over any subset of ranks is exact, and a missing
 *         or doubled contribution always changes the result;
 *   max/min and data movement: integers in [-L, L] (bit-exact copies).
 * A misplaced element is wrong unless its value happens to equal the right
 * one (probability ~1 / (2L + 1) per element for data movement). */
#ifndef PLUMB_COMM_CHECK_H
#define PLUMB_COMM_CHECK_H
#include <stdio.h>
#include "accept/comm_thresholds.h"
#include "comm/comm.h"
#include "report/check.h"

#define COMM_CHECK_MAX_DTYPES 8
#define COMM_CHECK_MAX_MISSING 64

struct comm_check_opts {
    unsigned colls;                       /* bits 1u << enum comm_coll */
    dtype_t dtypes[COMM_CHECK_MAX_DTYPES];
    int ndtypes;
    enum comm_op op;
    int root;                             /* broadcast, reduce */
    size_t min_bytes, max_bytes, step_bytes;
    double step_factor;                   /* > 1: sizes multiply by it; else they grow by step_bytes */
    int warmup, iters;
    int check;                            /* verify the data */
    int time_each;                        /* time every call between barriers (OSU's method) instead of the
                                           * back-to-back loop (nccl-tests') */
    double timeout_s;                     /* arrival deadline before every batch (<= 0: plain barrier) */
    double min_busbw;                     /* --min-busbw: GB/s at the largest size, every collective (0 off) */
    double min_avg_busbw;                 /* --min-avg-busbw: nccl-tests' NCCL_TESTS_MIN_BW (0 off) */
    const struct comm_thresholds *thr;    /* per-SKU thresholds (NULL: none) */
    int corrupt_rank;                     /* test injection: this rank flips a bit of what it received (-1 off) */
    int hang_rank;                        /* test injection: this rank never arrives (-1 off) */
    unsigned long long seed;
    FILE *table;                          /* rows printed here as they finish (NULL: none) */
};
void comm_check_opts_default(struct comm_check_opts *o);

/* What a failed arrival leaves: the job cannot continue; the reporter (the
 * lowest rank that arrived) says so and ends the job. */
struct comm_check_outcome {
    int broken;                            /* an arrival timed out */
    int missing[COMM_CHECK_MAX_MISSING];
    int nmissing;
    int reporter;                          /* this rank reports and ends the job */
};

/* Runs the sweep on comm c (a host comm: host buffers; a device comm:
 * buffers in c->dev's memory), with `host` (c itself, or the host comm
 * under the device comm) carrying the check-in, the timings and the wrong
 * counts. Every rank calls it; every rank fills r (rank 0's is the one to
 * write). PLUMB_OK when the sweep ran (r says pass or fail; a failed
 * arrival is a fail with out->broken set), an error when it could not. */
int check_comm_run(const struct check_ctx *ctx, struct comm *host, struct comm *c, const struct comm_check_opts *o,
                   struct check_result *r, struct comm_check_outcome *out, plumb_err *e);

/* nccl-tests' bus bandwidth factor for n ranks. */
double comm_busbw_factor(enum comm_coll coll, int n);
/* Per-rank element count and nccl-tests' size (bytes) for a requested size
 * S: *count = elements per rank's block, *bytes = the size reported (0 when
 * S leaves a rank no element). */
void comm_check_counts(enum comm_coll coll, dtype_t t, int n, size_t S, size_t *count, size_t *bytes);
/* Input element j of rank r (see above), as a double (exact). */
double comm_check_input(unsigned long long seed, unsigned case_id, enum comm_coll coll, dtype_t t, enum comm_op op,
                        int n, int r, size_t j);
/* The largest integer up to which dtype t holds every integer. */
double comm_check_exact_limit(dtype_t t);

#endif
