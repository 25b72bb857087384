/* The comm check's data in bulk: a rank's inputs, the exact results, and the
 * element-by-element comparison, written straight into buffers of the
 * swept dtype (accept/comm_check.h describes the values).
 *
 * Why in bulk: a sweep of 8 B..64 MiB checks ~2 x 64 MiB per placement per
 * (collective, dtype), and every element costs a Philox block. Element by
 * element through doubles that was ~0.1 us an element, seconds a row at
 * 64 MiB; here a Philox block serves the two elements it carries, the loops
 * run on every core (OpenMP), and the inputs and reductions are made once
 * per sweep (they do not depend on the size: element j of rank r is the
 * same number in every row), so a row costs its copies and one compare.
 * The values are the ones comm_check_input gives, bit for bit. */
#ifndef PLUMB_COMM_CHECK_DATA_H
#define PLUMB_COMM_CHECK_DATA_H
#include <stddef.h>
#include <stdint.h>
#include "comm/comm.h"
#include "core/dtype.h"

/* The stream of one sweep: inputs of (seed, case, collective, dtype, op) on
 * `world` ranks. */
struct comm_check_gen {
    unsigned long long seed;
    unsigned case_id;
    dtype_t t;
    enum comm_op op;
    int world;
    int sum;       /* a SUM reduction: nonzero integers in [-m, m] */
    uint64_t m;    /* sum: the largest magnitude */
    uint64_t span; /* otherwise: values are u % span - L */
    uint64_t m_inv, span_inv; /* floor((2^64 - 1) / d): the remainders by multiplication */
    double L;      /* comm_check_exact_limit(t) */
};

void comm_check_gen_init(struct comm_check_gen *g, unsigned long long seed, unsigned case_id, enum comm_coll coll,
                         dtype_t t, enum comm_op op, int world);
/* Input element j of rank r as a double (exact). */
double comm_check_gen_value(const struct comm_check_gen *g, int r, size_t j);
/* dst[k] = input element j0 + k of rank r, k < n, in g->t. */
void comm_check_gen_fill(const struct comm_check_gen *g, int r, size_t j0, size_t n, void *dst);
/* dst[k] = g->op over ranks 0..world-1 of their input element j0 + k, in
 * g->t (exact: the inputs are chosen so). */
void comm_check_gen_reduce(const struct comm_check_gen *g, size_t j0, size_t n, void *dst);
/* dst[k] = v for k < n, in dtype t. */
void comm_check_fill_value(dtype_t t, double v, size_t n, void *dst);
/* Element i of a buffer of dtype t as a double. */
double comm_check_get(const void *p, dtype_t t, size_t i);

/* Compares got[n] with want[n] (dtype t): an element is wrong unless it
 * equals the wanted value as a number (the same bits, or +0 against -0).
 * Returns the number wrong; *first the offset of the first (-1: none). */
int64_t comm_check_compare(dtype_t t, const void *got, const void *want, size_t n, int64_t *first);

#endif
