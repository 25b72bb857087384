#include "train/sampler.h"
#include "core/philox.h"
#include <stdlib.h>
#include <string.h>

/* Draws of the Fisher-Yates shuffle depend only on (seed, epoch, i), so they
 * are made in parallel, a block of PERM_BLOCK at a time; the swaps, which
 * must run in order, follow on one thread. Same permutation as one thread
 * drawing and swapping (the swap loop is ~1 ns a step, the Philox draw ~30:
 * an epoch boundary no longer stalls the data plane for long). */
#define PERM_BLOCK 65536
void sampler_permutation(uint64_t seed, long epoch, long n, uint32_t *perm)
{
    for (long i = 0; i < n; i++) perm[i] = (uint32_t)i;
    uint64_t one, *jbuf = n > 1 ? malloc(PERM_BLOCK * sizeof *jbuf) : NULL;
    const long blk = jbuf ? PERM_BLOCK : 1; /* out of memory: one draw at a time */
    if (!jbuf) jbuf = &one;
    /* i from n-1 down to 1 swaps with j uniform in [0, i]: j = (x * (i+1)) >> 64
     * with x a 64-bit draw (two words of block i-1); the bias, < (i+1)/2^64,
     * is far below anything measurable. */
    for (long hi = n - 1; hi > 0; hi -= blk) {
        long lo = hi - blk + 1 > 1 ? hi - blk + 1 : 1; /* this block: i = hi down to lo */
#pragma omp parallel for schedule(static) if (hi - lo > 4096)
        for (long i = lo; i <= hi; i++) {
            uint32_t w[4];
            philox_block(seed, RNG_SHUFFLE, (uint32_t)epoch, (uint32_t)((uint64_t)epoch >> 32), (uint64_t)(i - 1), w);
            uint64_t x = ((uint64_t)w[0] << 32) | w[1];
            jbuf[hi - i] = (uint64_t)(((unsigned __int128)x * (uint64_t)(i + 1)) >> 64);
        }
        for (long i = hi; i >= lo; i--) {
            uint64_t j = jbuf[hi - i];
            uint32_t t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
    }
    if (jbuf != &one) free(jbuf);
}

int sampler_init(struct sampler *s, long n, long batch, int shard, uint64_t seed, int shuffle,
                 plumb_err *e)
{
    memset(s, 0, sizeof *s);
    if (n <= 0 || n > 0xffffffffL) return err_set(e, PLUMB_EUSAGE, "sampler: %ld samples (expected 1..2^32-1)", n);
    if (batch <= 0) return err_set(e, PLUMB_EUSAGE, "--batch: %ld (expected a positive global batch)", batch);
    if (shard <= 0) return err_set(e, PLUMB_EUSAGE, "micro-shard size %d (expected > 0)", shard);
    s->n = n;
    s->batch = batch;
    s->shard = shard;
    s->seed = seed;
    s->shuffle = shuffle;
    s->perm_epoch = -1;
    if (shuffle) {
        s->perm = malloc((size_t)n * sizeof *s->perm);
        if (!s->perm) return err_set(e, PLUMB_ENOMEM, "sampler: cannot allocate a permutation of %ld", n);
    }
    return PLUMB_OK;
}

void sampler_free(struct sampler *s)
{
    free(s->perm);
    s->perm = NULL;
}

long sampler_steps_per_epoch(const struct sampler *s) { return (s->n + s->batch - 1) / s->batch; }
int sampler_nshards(const struct sampler *s) { return (int)((s->batch + s->shard - 1) / s->shard); }

static void shard_range(int nshards, int rank, int world, int *lo, int *hi)
{
    *lo = (int)((long)nshards * rank / world);
    *hi = (int)((long)nshards * (rank + 1) / world);
}

long sampler_local_capacity(const struct sampler *s, int rank, int world)
{
    int lo, hi;
    shard_range(sampler_nshards(s), rank, world, &lo, &hi);
    long cap = 0;
    for (int j = lo; j < hi; j++) {
        long a = (long)j * s->shard, b = a + s->shard;
        if (b > s->batch) b = s->batch;
        cap += b - a;
    }
    return cap;
}

int sampler_get(struct sampler *s, long step, int rank, int world, struct sampler_step *st,
                uint32_t *idx, int *shard_valid, plumb_err *e)
{
    if (step < 0) return err_set(e, PLUMB_EINTERNAL, "sampler: negative step %ld", step);
    long spe = sampler_steps_per_epoch(s);
    memset(st, 0, sizeof *st);
    st->step = step;
    st->epoch = step / spe;
    st->batch_in_epoch = step % spe;
    long start = st->batch_in_epoch * s->batch;
    long end = start + s->batch < s->n ? start + s->batch : s->n;
    st->global_valid = end - start;
    if (s->shuffle && s->perm_epoch != st->epoch) {
        sampler_permutation(s->seed, st->epoch, s->n, s->perm);
        s->perm_epoch = st->epoch;
    }
    int lo, hi;
    shard_range(sampler_nshards(s), rank, world, &lo, &hi);
    st->shard0 = lo;
    st->nshards = hi - lo;
    long k = 0;
    for (int j = lo; j < hi; j++) {
        long a = start + (long)j * s->shard, b = a + s->shard;
        if (b > start + s->batch) b = start + s->batch;
        if (b > end) b = end;
        int cnt = a < b ? (int)(b - a) : 0;
        if (shard_valid) shard_valid[j - lo] = cnt;
        for (long p = a; p < b; p++) idx[k++] = s->shuffle ? s->perm[p] : (uint32_t)p;
    }
    st->local_valid = k;
    return PLUMB_OK;
}
