/* cpu rng ops: the Philox stream mapping of core/philox.h, element by
 * element; threads split the range on block (4-element) boundaries, so the
 * values never depend on the thread count. */
#include "core/philox.h"
#include "dev/cpu_numerics.h"
#include <omp.h>

int cpu_nthreads(const struct dev *d)
{
    return d && d->threads > 0 ? d->threads : omp_get_max_threads();
}

/* kind 0: u32, 1: uniform, 2: normal */
static int rng_fill(struct dev *d, const struct rng_stream *st, uint64_t first, void *out,
                    size_t n, int kind)
{
    if (!st || (!out && n)) return PLUMB_EUSAGE;
    if (n == 0) return PLUMB_OK;
    if (first + n < first || ((first + n - 1) >> 50)) return PLUMB_EUSAGE; /* index < 2^50 */
    uint64_t b0 = first >> 2, b1 = (first + n - 1) >> 2; /* inclusive block range */
    int64_t nb = (int64_t)(b1 - b0 + 1);
    int nt = cpu_nthreads(d);
#pragma omp parallel for num_threads(nt) schedule(static) if (nb > 4096)
    for (int64_t bi = 0; bi < nb; bi++) {
        uint64_t blk = b0 + (uint64_t)bi;
        uint32_t w[4];
        float z[4];
        if (kind == 2)
            philox_normal4(st->seed, st->purpose, st->a, st->b, blk, z);
        else
            philox_block(st->seed, st->purpose, st->a, st->b, blk, w);
        for (int j = 0; j < 4; j++) {
            uint64_t idx = blk * 4 + (uint64_t)j;
            if (idx < first || idx >= first + n) continue;
            size_t o = (size_t)(idx - first);
            if (kind == 0) ((uint32_t *)out)[o] = w[j];
            else if (kind == 1) ((float *)out)[o] = philox_u01(w[j]);
            else ((float *)out)[o] = z[j];
        }
    }
    return PLUMB_OK;
}

int cpu_rng_u32(struct dev *d, dev_stream *s, const struct rng_stream *st, uint64_t first,
                uint32_t *out, size_t n)
{
    (void)s;
    return rng_fill(d, st, first, out, n, 0);
}
int cpu_rng_uniform(struct dev *d, dev_stream *s, const struct rng_stream *st, uint64_t first,
                    float *out, size_t n)
{
    (void)s;
    return rng_fill(d, st, first, out, n, 1);
}
int cpu_rng_normal(struct dev *d, dev_stream *s, const struct rng_stream *st, uint64_t first,
                   float *out, size_t n)
{
    (void)s;
    return rng_fill(d, st, first, out, n, 2);
}
