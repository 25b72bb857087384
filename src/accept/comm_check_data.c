/* The comm check's inputs, exact results and compare, in bulk
 * (accept/comm_check_data.h). */
#include "accept/comm_check_data.h"
#include "accept/comm_check.h"
#include "core/philox.h"
#include <math.h>
#include <string.h>

/* below this many elements a loop stays on one thread */
#define PAR_MIN ((size_t)1 << 16)

static int is_reduction(enum comm_coll coll)
{
    return coll == COMM_ALLREDUCE || coll == COMM_REDUCE || coll == COMM_REDUCE_SCATTER;
}

void comm_check_gen_init(struct comm_check_gen *g, unsigned long long seed, unsigned case_id, enum comm_coll coll,
                         dtype_t t, enum comm_op op, int world)
{
    memset(g, 0, sizeof *g);
    g->seed = seed;
    g->case_id = case_id;
    g->t = t;
    g->op = op;
    g->world = world > 0 ? world : 1;
    g->L = comm_check_exact_limit(t);
    g->sum = is_reduction(coll) && op == COMM_SUM;
    /* the arithmetic of the element-by-element definition, kept as it was
     * (for fp64, 2L + 1 rounds to 2^54 in a double: span is 2^54) */
    g->m = (uint64_t)floor(g->L / g->world);
    if (g->m < 1) g->m = 1;
    g->span = (uint64_t)(2 * g->L + 1);
    if (g->span < 1) g->span = 1;
    g->m_inv = UINT64_MAX / g->m;
    g->span_inv = UINT64_MAX / g->span;
}

/* u % d without a division (a 64-bit divide is most of an element's cost):
 * q = floor(u * inv / 2^64) is floor(u / d) or at most 2 below it, so r
 * needs at most 2 corrections; the result is exactly u % d. */
static inline uint64_t mod_by(uint64_t u, uint64_t d, uint64_t inv)
{
    uint64_t q = (uint64_t)(((unsigned __int128)u * inv) >> 64);
    uint64_t r = u - q * d;
    while (r >= d) r -= d;
    return r;
}

/* the value of the 64 random bits u of one element */
static inline double gen_map(const struct comm_check_gen *g, uint64_t u)
{
    if (g->sum) {
        double k = (double)(mod_by(u >> 1, g->m, g->m_inv) + 1); /* [1, m] */
        return (u & 1) ? -k : k;
    }
    return (double)mod_by(u, g->span, g->span_inv) - g->L; /* [-L, L] */
}

/* element j is words 2(j&1), 2(j&1)+1 of Philox block j/2 of the rank's
 * stream (RNG_COMM_CHECK, a = rank, b = case) */
static inline uint64_t gen_bits(const uint32_t w[4], size_t j)
{
    return (uint64_t)w[(j & 1) * 2 + 1] << 32 | w[(j & 1) * 2];
}

double comm_check_gen_value(const struct comm_check_gen *g, int r, size_t j)
{
    uint32_t w[4];
    philox_block(g->seed, RNG_COMM_CHECK, (uint32_t)r, g->case_id, (uint64_t)j >> 1, w);
    return gen_map(g, gen_bits(w, j));
}

static inline void put(void *p, dtype_t t, size_t i, double v)
{
    switch (t) {
    case DT_F32: ((float *)p)[i] = (float)v; break;
    case DT_F64: ((double *)p)[i] = v; break;
    case DT_BF16: ((uint16_t *)p)[i] = f32_to_bf16((float)v); break;
    case DT_F16: ((uint16_t *)p)[i] = f32_to_f16((float)v); break;
    case DT_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case DT_I64: ((int64_t *)p)[i] = (int64_t)v; break;
    case DT_U32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case DT_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    }
}

double comm_check_get(const void *p, dtype_t t, size_t i)
{
    switch (t) {
    case DT_F32: return ((const float *)p)[i];
    case DT_F64: return ((const double *)p)[i];
    case DT_BF16: return bf16_to_f32(((const uint16_t *)p)[i]);
    case DT_F16: return f16_to_f32(((const uint16_t *)p)[i]);
    case DT_I32: return ((const int32_t *)p)[i];
    case DT_I64: return (double)((const int64_t *)p)[i];
    case DT_U32: return ((const uint32_t *)p)[i];
    case DT_U8: return ((const uint8_t *)p)[i];
    }
    return NAN;
}

void comm_check_gen_fill(const struct comm_check_gen *g, int r, size_t j0, size_t n, void *dst)
{
    if (!n) return;
    const size_t end = j0 + n;
    const uint64_t qa = (uint64_t)j0 >> 1, qb = (uint64_t)(end - 1) >> 1;
    /* one Philox block per pair of elements */
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
    for (uint64_t q = qa; q <= qb; q++) {
        uint32_t w[4];
        philox_block(g->seed, RNG_COMM_CHECK, (uint32_t)r, g->case_id, q, w);
        for (size_t j = (size_t)q * 2; j < (size_t)q * 2 + 2; j++)
            if (j >= j0 && j < end) put(dst, g->t, j - j0, gen_map(g, gen_bits(w, j)));
    }
}

void comm_check_gen_reduce(const struct comm_check_gen *g, size_t j0, size_t n, void *dst)
{
    if (!n) return;
    const size_t end = j0 + n;
    const uint64_t qa = (uint64_t)j0 >> 1, qb = (uint64_t)(end - 1) >> 1;
#pragma omp parallel for schedule(static) if (n * (size_t)g->world > PAR_MIN)
    for (uint64_t q = qa; q <= qb; q++) {
        double acc[2] = {0, 0};
        for (int r = 0; r < g->world; r++) {
            uint32_t w[4];
            philox_block(g->seed, RNG_COMM_CHECK, (uint32_t)r, g->case_id, q, w);
            for (int h = 0; h < 2; h++) {
                double v = gen_map(g, gen_bits(w, (size_t)h));
                /* in rank order: every partial result is exact, so any order gives the same */
                acc[h] = r == 0 ? v : g->op == COMM_SUM ? acc[h] + v : g->op == COMM_MAX ? (v > acc[h] ? v : acc[h])
                                                                                       : (v < acc[h] ? v : acc[h]);
            }
        }
        for (int h = 0; h < 2; h++) {
            size_t j = (size_t)q * 2 + (size_t)h;
            if (j >= j0 && j < end) put(dst, g->t, j - j0, acc[h]);
        }
    }
}

void comm_check_fill_value(dtype_t t, double v, size_t n, void *dst)
{
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
    for (size_t i = 0; i < n; i++) put(dst, t, i, v);
}

/* the bits of one element of es bytes (1, 2, 4 or 8) */
static inline uint64_t load_bits(const unsigned char *p, size_t es)
{
    switch (es) {
    case 1: return *p;
    case 2: {
        uint16_t v;
        memcpy(&v, p, 2);
        return v;
    }
    case 4: {
        uint32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    default: {
        uint64_t v;
        memcpy(&v, p, 8);
        return v;
    }
    }
}

int64_t comm_check_compare(dtype_t t, const void *got, const void *want, size_t n, int64_t *first)
{
    const size_t es = dtype_size(t);
    const unsigned char *a = got, *b = want;
    int64_t wrong = 0, lo = INT64_MAX;
#pragma omp parallel for schedule(static) reduction(+ : wrong) reduction(min : lo) if (n > PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        if (load_bits(a + i * es, es) == load_bits(b + i * es, es)) continue;
        /* other bits, the same number: only +0 and -0 */
        if (comm_check_get(got, t, i) == comm_check_get(want, t, i)) continue;
        wrong++;
        if ((int64_t)i < lo) lo = (int64_t)i;
    }
    *first = wrong ? lo : -1;
    return wrong;
}
