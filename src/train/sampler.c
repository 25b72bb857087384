#include "train/sampler.h"
#include "core/philox.h"
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* Draws of the Fisher-Yates shuffle depend only on (seed, epoch, i), so they
 * are made in parallel, a block of PERM_BLOCK at a time; the swaps, which
 * must run in order, follow on one thread. Same permutation as one thread
 * drawing and swapping. The swaps touch perm[j] at random (a cache miss
 * each once perm outgrows the cache: ~100 ns, more than the draw); the j of
 * the next swaps are known, so their lines are prefetched SWAP_AHEAD swaps
 * early and the misses overlap. */
#define PERM_BLOCK 65536
#define SWAP_AHEAD 16
int sampler_permutation_on(uint64_t seed, long epoch, long n, uint32_t *perm, int threads, const atomic_int *cancel)
{
    for (long i = 0; i < n; i++) perm[i] = (uint32_t)i;
    uint64_t one, *jbuf = n > 1 ? malloc(PERM_BLOCK * sizeof *jbuf) : NULL;
    const long blk = jbuf ? PERM_BLOCK : 1; /* out of memory: one draw at a time */
    if (!jbuf) jbuf = &one;
    const int nt = threads > 0 ? threads : omp_get_max_threads();
    int done = 1;
    /* i from n-1 down to 1 swaps with j uniform in [0, i]: j = (x * (i+1)) >> 64
     * with x a 64-bit draw (two words of block i-1); the bias, < (i+1)/2^64,
     * is far below anything measurable. */
    for (long hi = n - 1; hi > 0; hi -= blk) {
        if (cancel && atomic_load_explicit(cancel, memory_order_relaxed)) {
            done = 0;
            break;
        }
        long lo = hi - blk + 1 > 1 ? hi - blk + 1 : 1; /* this block: i = hi down to lo */
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1 && hi - lo > 4096)
        for (long i = lo; i <= hi; i++) {
            uint32_t w[4];
            philox_block(seed, RNG_SHUFFLE, (uint32_t)epoch, (uint32_t)((uint64_t)epoch >> 32), (uint64_t)(i - 1), w);
            uint64_t x = ((uint64_t)w[0] << 32) | w[1];
            jbuf[hi - i] = (uint64_t)(((unsigned __int128)x * (uint64_t)(i + 1)) >> 64);
        }
        const long len = hi - lo + 1;
        for (long k = 0; k < len; k++) {
            if (k + SWAP_AHEAD < len) __builtin_prefetch(&perm[jbuf[k + SWAP_AHEAD]], 1);
            long i = hi - k;
            uint64_t j = jbuf[k];
            uint32_t t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
    }
    if (jbuf != &one) free(jbuf);
    return done;
}

void sampler_permutation(uint64_t seed, long epoch, long n, uint32_t *perm)
{
    (void)sampler_permutation_on(seed, epoch, n, perm, 0, NULL);
}

/* ---------------- the look-ahead ---------------- */

static void *ahead_main(void *arg)
{
    struct sampler *s = arg;
    if (!sampler_permutation_on(s->seed, s->next_epoch, s->n, s->perm_next, s->ahead_threads, &s->next_cancel))
        s->next_epoch = -1; /* cancelled (the joiner reads it after the join) */
    return NULL;
}

/* Waits for the look-ahead thread; cancel: stop it first (its epoch is not wanted). */
static void ahead_join(struct sampler *s, int cancel)
{
    if (!s->next_live) return;
    if (cancel) atomic_store(&s->next_cancel, 1);
    pthread_join(s->next_th, NULL);
    s->next_live = 0;
    if (cancel) s->next_epoch = -1;
}

/* Starts epoch `epoch`'s permutation into perm_next. */
static void ahead_launch(struct sampler *s, long epoch)
{
    if (!s->ahead_threads || !s->perm_next || s->next_live) return;
    if (epoch * sampler_steps_per_epoch(s) >= s->ahead_end) return; /* no step of the feed is in it */
    s->next_epoch = epoch;
    atomic_store(&s->next_cancel, 0);
    if (pthread_create(&s->next_th, NULL, ahead_main, s) == 0) s->next_live = 1;
    else s->next_epoch = -1; /* no thread: that epoch is computed when it comes */
}

void sampler_set_ahead(struct sampler *s, int threads, long end)
{
    ahead_join(s, 1);
    if (threads < 0) threads = 0;
    if (!s->shuffle || s->n < 2) threads = 0; /* nothing to compute */
    if (threads && !s->perm_next) s->perm_next = malloc((size_t)s->n * sizeof *s->perm_next);
    if (!s->perm_next) threads = 0;
    s->ahead_threads = threads;
    s->ahead_end = end;
    s->next_epoch = -1;
    if (threads && s->perm_epoch >= 0) ahead_launch(s, s->perm_epoch + 1);
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
    s->next_epoch = -1;
    if (shuffle) {
        s->perm = malloc((size_t)n * sizeof *s->perm);
        if (!s->perm) return err_set(e, PLUMB_ENOMEM, "sampler: cannot allocate a permutation of %ld", n);
    }
    return PLUMB_OK;
}

void sampler_free(struct sampler *s)
{
    ahead_join(s, 1);
    free(s->perm);
    free(s->perm_next);
    s->perm = s->perm_next = NULL;
    s->ahead_threads = 0;
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
        /* the look-ahead's epoch: wait for it (usually long done) and take
         * its buffer; any other epoch (a resume, a rollback): computed here */
        ahead_join(s, s->next_epoch != st->epoch);
        if (s->next_epoch == st->epoch) {
            uint32_t *t = s->perm;
            s->perm = s->perm_next;
            s->perm_next = t;
        } else {
            sampler_permutation(s->seed, st->epoch, s->n, s->perm);
        }
        s->next_epoch = -1;
        s->perm_epoch = st->epoch;
        ahead_launch(s, st->epoch + 1);
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
