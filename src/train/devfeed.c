/* The GPU data plane: see devfeed.h. */
#include "train/devfeed.h"
#include "core/timer.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

enum { SLOT_FREE = 0, SLOT_READY = 1, SLOT_TAKEN = 2 };

struct feed_slot {
    void *h[MODEL_MAX_FIELDS];   /* pinned host, field k [cap, width_k] */
    void *dv[MODEL_MAX_FIELDS];  /* device */
    uint32_t *idx;
    int *shard_valid;
    dev_event *ev;
    dev_event *used;  /* recorded on the default stream at release: the batch's consumers */
    int used_pending;
    int copy_pending; /* ev recorded after this slot's copy, not yet waited for */
    int state, B, n_valid;
    long step;
    struct sampler_step st;
};

/* The batch builders: a pool of threads that wait on a condition variable.
 * (OpenMP's workers spin after every parallel region by default; each step's
 * build left a dozen cores spinning, which slowed the thread launching the
 * GPU work by several per cent.) A job is cut into chunks of BUILD_CHUNK
 * samples that the producer and the helpers claim from one atomic counter
 * (the job's generation in its high word, so a helper that wakes late never
 * claims a chunk of the next job): a helper still asleep when the others
 * have built everything costs nothing, and the producer waits for the
 * chunks to be built, not for every helper to wake. */
#define BUILD_CHUNK 256 /* the smallest chunk; a large batch takes multiples (pool_build) */
struct build_pool {
    pthread_t *th;
    int n, started;
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    long gen;
    int stop;
    /* the job (gen) */
    struct devfeed *f;
    struct feed_slot *sl;
    int count, nchunks, chunk;
    _Atomic uint64_t claim; /* gen << 32 | next chunk */
    atomic_int built;       /* chunks of the job built */
};

struct devfeed {
    struct dev *d;
    struct feed_source fs;
    int split;
    struct sampler *s;
    int rank, world, depth, threads, cap;
    long next_fill, next_take, end;
    struct feed_slot *slots;
    dev_stream *copy;
    int taken, stop, failed;
    plumb_err err;
    double build_s, copy_s;
    pthread_t th;
    int th_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct build_pool pool;
    int pool_inited;
    /* the first failed fill of the batch being built (a data file that
     * shrank: train/model.h): claimed by a CAS, its message written by the
     * claimer before it counts its chunk built, read by the producer once
     * every chunk is built */
    atomic_int build_rc;
    plumb_err build_err;
};

static void build_chunk(struct devfeed *f, struct feed_slot *sl, int count, int chunk, int c)
{
    int i0 = c * chunk;
    int cnt = count - i0 < chunk ? count - i0 : chunk;
    void *dst[MODEL_MAX_FIELDS];
    for (int k = 0; k < f->fs.n_fields; k++) dst[k] = (char *)sl->h[k] + (size_t)i0 * feed_field_bytes(&f->fs, k);
    plumb_err e;
    int rc = f->fs.ops->fill(f->fs.src, f->split, sl->st.epoch, sl->idx + i0, cnt, dst, &e);
    int none = 0;
    if (rc && atomic_compare_exchange_strong(&f->build_rc, &none, -1)) {
        f->build_err = e;
        atomic_store(&f->build_rc, rc);
    }
}

/* Claims and builds chunks of job `gen` until none is left; 1 when this
 * thread built the job's last chunk. */
static int build_claimed(struct build_pool *p, uint64_t gen, struct devfeed *f, struct feed_slot *sl, int count,
                         int chunk, int nchunks)
{
    int last = 0;
    for (;;) {
        uint64_t c = atomic_load(&p->claim);
        if ((c >> 32) != (gen & 0xffffffffu) || (int)(uint32_t)c >= nchunks) break;
        if (!atomic_compare_exchange_weak(&p->claim, &c, c + 1)) continue;
        build_chunk(f, sl, count, chunk, (int)(uint32_t)c);
        if (atomic_fetch_add(&p->built, 1) + 1 == nchunks) last = 1;
    }
    return last;
}

struct pool_arg {
    struct build_pool *p;
    int w;
};

static void *pool_main(void *arg)
{
    struct pool_arg *a = arg;
    struct build_pool *p = a->p;
    free(a);
    long seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->gen == seen) pthread_cond_wait(&p->go, &p->mu);
        if (p->stop) break;
        seen = p->gen;
        struct devfeed *f = p->f;
        struct feed_slot *sl = p->sl;
        int count = p->count, chunk = p->chunk, nchunks = p->nchunks;
        pthread_mutex_unlock(&p->mu);
        int last = build_claimed(p, (uint64_t)seen, f, sl, count, chunk, nchunks);
        pthread_mutex_lock(&p->mu);
        if (last) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* n helper threads (the producer is worker n); 0 helpers: the producer alone */
static int pool_start(struct build_pool *p, int n)
{
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    p->th = n > 0 ? calloc((size_t)n, sizeof *p->th) : NULL;
    if (n > 0 && !p->th) return -1;
    for (int i = 0; i < n; i++) {
        struct pool_arg *a = malloc(sizeof *a);
        if (!a) return -1;
        a->p = p;
        a->w = i;
        if (pthread_create(&p->th[i], NULL, pool_main, a) != 0) {
            free(a);
            return -1;
        }
        p->started++;
    }
    p->n = n;
    return 0;
}

static void pool_stop(struct build_pool *p)
{
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->started; i++) pthread_join(p->th[i], NULL);
    free(p->th);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
}

/* the whole batch: the helpers and the producer claim its chunks; the
 * producer returns once every chunk is built */
static void pool_build(struct devfeed *f, struct feed_slot *sl, int count)
{
    struct build_pool *p = &f->pool;
    /* about four chunks a thread, in multiples of BUILD_CHUNK: each chunk
     * restarts the builder's prefetch pipeline, so not smaller than needed */
    int chunk = count / (4 * (p->n + 1)) / BUILD_CHUNK * BUILD_CHUNK;
    if (chunk < BUILD_CHUNK) chunk = BUILD_CHUNK;
    int nchunks = (count + chunk - 1) / chunk;
    if (p->started < p->n || p->n == 0 || nchunks <= 1) { /* a helper did not start, or one chunk: build alone */
        for (int c = 0; c < nchunks; c++) build_chunk(f, sl, count, chunk, c);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->gen++;
    p->f = f;
    p->sl = sl;
    p->count = count;
    p->nchunks = nchunks;
    p->chunk = chunk;
    atomic_store(&p->built, 0);
    atomic_store(&p->claim, ((uint64_t)p->gen & 0xffffffffu) << 32);
    /* as many helpers as there are chunks beyond the producer's first */
    if (nchunks - 1 >= p->n) pthread_cond_broadcast(&p->go);
    else
        for (int i = 0; i < nchunks - 1; i++) pthread_cond_signal(&p->go);
    uint64_t gen = (uint64_t)p->gen;
    pthread_mutex_unlock(&p->mu);
    (void)build_claimed(p, gen, f, sl, count, chunk, nchunks);
    pthread_mutex_lock(&p->mu);
    while (atomic_load(&p->built) < nchunks) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

/* Builds step `step` into slot sl (producer thread). */
static int fill_slot(struct devfeed *f, struct feed_slot *sl, long step, plumb_err *e)
{
    struct sampler_step st;
    int rc = sampler_get(f->s, step, f->rank, f->world, &st, sl->idx, sl->shard_valid, e);
    if (rc) return rc;
    sl->st = st; /* the build threads read the epoch */
    int n = (int)st.local_valid, B = n;
    if (B < 1) B = 1; /* an empty rank still runs the step on one masked sample */
    struct dev *d = f->d;
    /* the pinned buffers are rewritten only after this slot's last copy
     * from them has completed (long done: it was consumed since) */
    if (sl->copy_pending) {
        sl->copy_pending = 0;
        if ((rc = d->be->event_sync(d, sl->ev, e))) return rc;
    }
    double t0 = timer_now();
    atomic_store(&f->build_rc, 0);
    pool_build(f, sl, n);
    if ((rc = atomic_load(&f->build_rc))) {
        if (e) *e = f->build_err;
        return rc;
    }
    if (n < B) /* masked padding: zero bytes (index fields in range) */
        for (int k = 0; k < f->fs.n_fields; k++) memset(sl->h[k], 0, feed_field_bytes(&f->fs, k));
    double t1 = timer_now();
    /* the device buffers are overwritten only after the work that read them
     * (queued on the default stream before release) has run */
    if (sl->used_pending) {
        rc = d->be->stream_wait_event(d, f->copy, sl->used, e);
        sl->used_pending = 0;
        if (rc) return rc;
    }
    for (int k = 0; k < f->fs.n_fields && !rc; k++)
        rc = d->be->memcpy_async(d, f->copy, sl->dv[k], sl->h[k], (size_t)B * feed_field_bytes(&f->fs, k), MEMCPY_H2D, e);
    if (!rc) rc = d->be->event_record(d, sl->ev, f->copy, e);
    /* the producer does not wait for the copy: it builds the next batch
     * while this one travels (the consumer's stream waits on ev; a copy
     * error surfaces at the slot's next fill or the consumer's next sync).
     * copy_s is the time to queue it. */
    if (!rc) sl->copy_pending = 1;
    f->build_s += t1 - t0;
    f->copy_s += timer_now() - t1;
    sl->B = B;
    sl->n_valid = n;
    sl->step = step;
    sl->st = st;
    return rc;
}

static void *feed_main(void *arg)
{
    struct devfeed *f = arg;
    pthread_mutex_lock(&f->mu);
    for (;;) {
        while (!f->stop && f->next_fill < f->end && f->slots[f->next_fill % f->depth].state != SLOT_FREE)
            pthread_cond_wait(&f->cv, &f->mu);
        if (f->stop || f->next_fill >= f->end) break;
        long step = f->next_fill;
        struct feed_slot *sl = &f->slots[step % f->depth];
        pthread_mutex_unlock(&f->mu);
        plumb_err e = {0};
        int rc = fill_slot(f, sl, step, &e);
        pthread_mutex_lock(&f->mu);
        if (rc) {
            f->failed = rc;
            f->err = e;
            pthread_cond_broadcast(&f->cv);
            break;
        }
        sl->state = SLOT_READY;
        f->next_fill++;
        pthread_cond_broadcast(&f->cv);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

void devfeed_stop(struct devfeed *f)
{
    if (!f) return;
    if (f->th_started) {
        pthread_mutex_lock(&f->mu);
        f->stop = 1;
        pthread_cond_broadcast(&f->cv);
        pthread_mutex_unlock(&f->mu);
        pthread_join(f->th, NULL);
    }
    if (f->pool_inited) pool_stop(&f->pool);
    struct dev *d = f->d;
    if (f->copy) {
        plumb_err e = {0};
        (void)d->be->stream_sync(d, f->copy, &e);
    }
    for (int i = 0; f->slots && i < f->depth; i++) {
        struct feed_slot *sl = &f->slots[i];
        for (int k = 0; k < MODEL_MAX_FIELDS; k++) {
            if (sl->h[k]) d->be->host_free(d, sl->h[k]);
            if (sl->dv[k]) dev_free(d, sl->dv[k]);
        }
        if (sl->ev) d->be->event_destroy(d, sl->ev);
        if (sl->used) d->be->event_destroy(d, sl->used);
        free(sl->idx);
        free(sl->shard_valid);
    }
    free(f->slots);
    if (f->copy) d->be->stream_destroy(d, f->copy);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    free(f);
}

int devfeed_start(struct dev *d, const struct feed_source *fs, int split, struct sampler *s, int rank, int world,
                  long start, long end, int depth, int threads, struct devfeed **out, plumb_err *e)
{
    *out = NULL;
    if (depth < 2 || depth > 64) return err_set(e, PLUMB_EUSAGE, "devfeed: depth %d (expected 2..64)", depth);
    if (start < 0 || end < start) return err_set(e, PLUMB_EUSAGE, "devfeed: steps [%ld, %ld)", start, end);
    struct devfeed *f = calloc(1, sizeof *f);
    if (!f) return err_set(e, PLUMB_ENOMEM, "devfeed: out of memory");
    f->d = d;
    f->fs = *fs;
    f->split = split;
    f->s = s;
    f->rank = rank;
    f->world = world;
    f->depth = depth;
    f->threads = threads;
    f->next_fill = f->next_take = start;
    f->end = end;
    f->cap = (int)sampler_local_capacity(s, rank, world);
    if (f->cap < 1) f->cap = 1;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    int rc = d->be->stream_create(d, &f->copy, e);
    f->slots = calloc((size_t)depth, sizeof *f->slots);
    if (!rc && !f->slots) rc = err_set(e, PLUMB_ENOMEM, "devfeed: out of memory");
    size_t cap = (size_t)f->cap;
    int nsh = sampler_nshards(s) + 1;
    for (int i = 0; i < depth && !rc; i++) {
        struct feed_slot *sl = &f->slots[i];
        for (int k = 0; k < fs->n_fields && !rc; k++) {
            rc = d->be->host_alloc(d, cap * feed_field_bytes(fs, k), &sl->h[k], e);
            if (!rc) rc = dev_alloc(d, cap * feed_field_bytes(fs, k), &sl->dv[k], e);
        }
        if (!rc) rc = d->be->event_create(d, &sl->ev, e);
        if (!rc) rc = d->be->event_create(d, &sl->used, e);
        sl->idx = calloc(cap, sizeof *sl->idx);
        sl->shard_valid = calloc((size_t)nsh, sizeof *sl->shard_valid);
        if (!rc && (!sl->idx || !sl->shard_valid)) rc = err_set(e, PLUMB_ENOMEM, "devfeed: out of memory");
    }
    if (!rc) {
        /* the next epoch's permutation computed while this one is served
         * (a quarter of the build threads for its draws, at most 4): an
         * epoch boundary would otherwise stall the feed for the whole
         * shuffle (tens of ms for millions of samples) */
        int at = threads / 4;
        sampler_set_ahead(s, at < 1 ? 1 : at > 4 ? 4 : at, end);
        /* threads - 1 helpers: the producer builds its share too; a helper
         * that cannot start leaves the producer building alone (slower, not wrong) */
        (void)pool_start(&f->pool, threads > 1 ? threads - 1 : 0);
        f->pool_inited = 1;
        if (pthread_create(&f->th, NULL, feed_main, f) != 0) rc = err_set(e, PLUMB_EINTERNAL, "devfeed: cannot start thread");
        else f->th_started = 1;
    }
    if (rc) {
        devfeed_stop(f);
        return rc;
    }
    *out = f;
    return PLUMB_OK;
}

int devfeed_next(struct devfeed *f, struct batch *b, long *step, double *wait_s, plumb_err *e)
{
    double t0 = timer_now();
    pthread_mutex_lock(&f->mu);
    if (f->taken) {
        pthread_mutex_unlock(&f->mu);
        return err_set(e, PLUMB_EINTERNAL, "devfeed: next before release of the previous batch");
    }
    if (f->next_take >= f->end) {
        pthread_mutex_unlock(&f->mu);
        return err_set(e, PLUMB_EUSAGE, "devfeed: step %ld is past the end (%ld)", f->next_take, f->end);
    }
    struct feed_slot *sl = &f->slots[f->next_take % f->depth];
    while (sl->state != SLOT_READY && !f->failed) pthread_cond_wait(&f->cv, &f->mu);
    if (f->failed) {
        int rc = f->failed;
        if (e) *e = f->err;
        pthread_mutex_unlock(&f->mu);
        return rc;
    }
    sl->state = SLOT_TAKEN;
    f->taken = 1;
    pthread_mutex_unlock(&f->mu);
    if (wait_s) *wait_s = timer_now() - t0;
    /* the default stream waits for the batch's copy on the device */
    int rc = f->d->be->stream_wait_event(f->d, NULL, sl->ev, e);
    if (rc) return rc;
    memset(b, 0, sizeof *b);
    b->B = sl->B;
    b->n_valid = sl->n_valid;
    b->on_device = 1;
    for (int k = 0; k < f->fs.n_fields; k++) b->field[k] = sl->dv[k];
    if (step) *step = sl->step;
    return PLUMB_OK;
}

void devfeed_release(struct devfeed *f)
{
    pthread_mutex_lock(&f->mu);
    if (f->taken) {
        struct feed_slot *sl = &f->slots[f->next_take % f->depth];
        /* the consumers may still be queued: the refill waits for this event */
        plumb_err e = {0};
        if (f->d->be->event_record(f->d, sl->used, NULL, &e) == PLUMB_OK) {
            sl->used_pending = 1;
        } else if (!f->failed) {
            f->failed = e.code ? e.code : PLUMB_EDEVICE;
            f->err = e;
        }
        sl->state = SLOT_FREE;
        f->next_take++;
        f->taken = 0;
        pthread_cond_broadcast(&f->cv);
    }
    pthread_mutex_unlock(&f->mu);
}

int devfeed_step_info(struct devfeed *f, struct sampler_step *st)
{
    pthread_mutex_lock(&f->mu);
    int ok = f->taken;
    if (ok) *st = f->slots[f->next_take % f->depth].st;
    pthread_mutex_unlock(&f->mu);
    return ok ? PLUMB_OK : PLUMB_EINTERNAL;
}

void devfeed_times(struct devfeed *f, double *build_s, double *copy_s)
{
    pthread_mutex_lock(&f->mu);
    if (build_s) *build_s = f->build_s;
    if (copy_s) *copy_s = f->copy_s;
    pthread_mutex_unlock(&f->mu);
}
