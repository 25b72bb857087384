/* The sampler (docs/TRAINING.md, "Sampler and evaluation").
 *
 * An epoch is a permutation of the N training samples: Fisher-Yates driven by
 * Philox (seed, RNG_SHUFFLE, a = epoch), the same on every rank. Global step
 * t is batch k = t mod S of epoch t / S (S = ceil(N / B) steps per epoch):
 * the permutation positions [k*B, min((k+1)*B, N)). The last batch of an
 * epoch is partial, never padded with repeats or borrowed from the next
 * epoch; its missing samples are masked.
 *
 * The global batch is cut into fixed-size micro-shards of M samples
 * (ceil(B / M) shards, the last ones partial or empty at an epoch's end);
 * rank r of W takes the contiguous shard range [r*NS/W, (r+1)*NS/W). So each
 * sample of an epoch goes to exactly one rank, and the shard contents do not
 * depend on W (golden data parallel sums per-shard gradients). */
#ifndef PLUMB_SAMPLER_H
#define PLUMB_SAMPLER_H
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "core/err.h"

struct sampler {
    long n;            /* samples per epoch */
    long batch;        /* global batch B */
    int shard;         /* micro-shard size M */
    uint64_t seed;
    int shuffle;       /* 0: identity order (eval, tests) */
    long perm_epoch;   /* epoch of perm[], -1 none */
    uint32_t *perm;    /* [n] */
    /* look-ahead (sampler_set_ahead): epoch perm_epoch + 1's permutation is
     * computed on a thread of its own into perm_next while perm_epoch's
     * batches are served, so an epoch boundary does not stall the feed */
    int ahead_threads;      /* OpenMP threads of the look-ahead's draws; 0: off */
    long ahead_end;         /* no look-ahead for an epoch starting at or past this step */
    uint32_t *perm_next;    /* [n] */
    long next_epoch;        /* the epoch in (or being computed into) perm_next; -1 none */
    int next_live;          /* the thread runs or has not been joined */
    pthread_t next_th;
    atomic_int next_cancel; /* set: the thread stops early (perm_next then invalid) */
};

/* Where one rank's part of one global step lies. */
struct sampler_step {
    long step, epoch, batch_in_epoch;
    long global_valid;    /* samples in this global batch (B, or fewer at epoch end) */
    int nshards;          /* shards of this rank */
    int shard0;           /* first shard index (global within the batch) */
    long local_valid;     /* this rank's samples */
};

int sampler_init(struct sampler *s, long n, long batch, int shard, uint64_t seed, int shuffle,
                 plumb_err *e);
void sampler_free(struct sampler *s);
long sampler_steps_per_epoch(const struct sampler *s);
int sampler_nshards(const struct sampler *s); /* ceil(B / M) */
/* Fills st for (step, rank, world); idx[] (size >= local capacity, see
 * sampler_local_capacity) receives the sample indices of the rank's shards in
 * order, shard by shard; shard_valid[] (size >= nshards of the rank) the
 * valid count of each. Recomputes the permutation when the epoch changes. */
int sampler_get(struct sampler *s, long step, int rank, int world, struct sampler_step *st,
                uint32_t *idx, int *shard_valid, plumb_err *e);
/* Turns the look-ahead on (threads >= 1: OpenMP threads for its Philox
 * draws) or off (0), for the epochs that start before step `end` (the
 * feed's last step + 1: an epoch no step reaches is not computed). The
 * permutations are the same either way; without memory for a second
 * permutation it stays off. Call it before handing the sampler to a feed
 * thread; sampler_free stops the look-ahead. */
void sampler_set_ahead(struct sampler *s, int threads, long end);
/* Largest number of samples one rank gets in any step. */
long sampler_local_capacity(const struct sampler *s, int rank, int world);
/* Fisher-Yates permutation of [0, n) for (seed, epoch). */
void sampler_permutation(uint64_t seed, long epoch, long n, uint32_t *perm);
/* The same with `threads` OpenMP threads for the draws (0: OpenMP's
 * default); *cancel (may be NULL) set stops it early: returns 1 when it
 * completed, 0 when cancelled (perm then holds no permutation). */
int sampler_permutation_on(uint64_t seed, long epoch, long n, uint32_t *perm, int threads, const atomic_int *cancel);

#endif
