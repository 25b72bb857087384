/* The host batch loader: see loader.h. */
#include "train/loader.h"
#include "core/timer.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t feed_field_bytes(const struct feed_source *fs, int k)
{
    return (size_t)fs->fields[k].width * dtype_size(fs->fields[k].dtype);
}

void host_batch_view(const struct feed_source *fs, const struct host_batch *hb, long off, int n, struct batch *out)
{
    memset(out, 0, sizeof *out);
    out->B = out->n_valid = n;
    for (int k = 0; k < fs->n_fields; k++) out->field[k] = (char *)hb->field[k] + (size_t)off * feed_field_bytes(fs, k);
}

/* ---------------- the loader thread ---------------- */

struct loader {
    struct feed_source fs;
    struct sampler *s;
    int rank, world;
    long next_step, end;
    int depth;
    struct host_batch *slots;
    int *state;            /* 0 free, 1 filled, 2 taken */
    long *slot_step;
    long consume_step;
    int stop, failed;
    plumb_err err;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

static void batch_free(struct host_batch *b)
{
    for (int k = 0; k < MODEL_MAX_FIELDS; k++) free(b->field[k]);
    free(b->shard_valid), free(b->idx);
}

static int batch_alloc(const struct feed_source *fs, struct host_batch *b, int cap, int nshards)
{
    memset(b, 0, sizeof *b);
    b->cap = cap;
    int ok = 1;
    for (int k = 0; k < fs->n_fields; k++) ok &= (b->field[k] = calloc((size_t)cap, feed_field_bytes(fs, k))) != NULL;
    b->shard_valid = calloc((size_t)nshards + 1, sizeof *b->shard_valid);
    b->idx = calloc((size_t)cap, sizeof *b->idx);
    return ok && b->shard_valid && b->idx;
}

static void *loader_main(void *arg)
{
    struct loader *l = arg;
    for (;;) {
        pthread_mutex_lock(&l->mu);
        int slot = -1;
        while (!l->stop && l->next_step < l->end) {
            for (int i = 0; i < l->depth; i++)
                if (l->state[i] == 0) {
                    slot = i;
                    break;
                }
            if (slot >= 0) break;
            pthread_cond_wait(&l->cv, &l->mu);
        }
        if (l->stop || l->next_step >= l->end) {
            pthread_mutex_unlock(&l->mu);
            return NULL;
        }
        long step = l->next_step++;
        pthread_mutex_unlock(&l->mu);

        struct host_batch *b = &l->slots[slot];
        double t0 = timer_now();
        plumb_err e = {0};
        int rc = sampler_get(l->s, step, l->rank, l->world, &b->st, b->idx, b->shard_valid, &e);
        if (!rc) {
            b->n = (int)b->st.local_valid;
            /* a failed fill (a data file that shrank: train/model.h) ends the
             * loader like a failed sampler: loader_next hands the error over */
            rc = l->fs.ops->fill(l->fs.src, SPLIT_TRAIN, b->st.epoch, b->idx, b->n, b->field, &e);
        }
        if (!rc) {
            /* zero padding (in range for any index field), masked by n_valid */
            size_t pad = (size_t)(b->cap - b->n);
            for (int k = 0; k < l->fs.n_fields; k++) {
                size_t w = feed_field_bytes(&l->fs, k);
                memset((char *)b->field[k] + (size_t)b->n * w, 0, pad * w);
            }
        }
        b->build_s = timer_now() - t0;
        pthread_mutex_lock(&l->mu);
        if (rc) {
            /* the slot stays free: loader_next hands over the batches built
             * before this step, then the error (a filled slot would have
             * been taken as this step's batch) */
            l->failed = 1;
            l->err = e;
        } else {
            l->state[slot] = 1;
            l->slot_step[slot] = step;
        }
        pthread_cond_broadcast(&l->cv);
        pthread_mutex_unlock(&l->mu);
        if (rc) return NULL;
    }
}

int loader_start(const struct feed_source *fs, struct sampler *s, int rank, int world, long start, long end, int depth,
                 struct loader **out, plumb_err *e)
{
    *out = NULL;
    if (depth < 1) depth = 1;
    struct loader *l = calloc(1, sizeof *l);
    if (!l) return err_set(e, PLUMB_ENOMEM, "loader: out of memory");
    l->fs = *fs;
    l->s = s;
    l->rank = rank;
    l->world = world;
    l->next_step = l->consume_step = start;
    l->end = end;
    l->depth = depth;
    l->slots = calloc((size_t)depth, sizeof *l->slots);
    l->state = calloc((size_t)depth, sizeof *l->state);
    l->slot_step = calloc((size_t)depth, sizeof *l->slot_step);
    int cap = (int)sampler_local_capacity(s, rank, world);
    int ok = l->slots && l->state && l->slot_step;
    for (int i = 0; ok && i < depth; i++) ok = batch_alloc(fs, &l->slots[i], cap > 0 ? cap : 1, sampler_nshards(s));
    if (!ok) {
        loader_stop(l);
        return err_set(e, PLUMB_ENOMEM, "loader: cannot allocate %d batches of %d samples", depth, cap);
    }
    /* the next epoch's permutation computed while this one is served (one
     * thread: host steps are slow beside a GPU's) */
    sampler_set_ahead(s, 1, end);
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    if (pthread_create(&l->th, NULL, loader_main, l) != 0) {
        pthread_mutex_destroy(&l->mu);
        pthread_cond_destroy(&l->cv);
        l->th = 0;
        loader_stop(l);
        return err_set(e, PLUMB_EINTERNAL, "loader: cannot start the thread");
    }
    *out = l;
    return PLUMB_OK;
}

int loader_next(struct loader *l, struct host_batch **b, double *wait_s, plumb_err *e)
{
    double t0 = timer_now();
    pthread_mutex_lock(&l->mu);
    int slot = -1;
    for (;;) {
        for (int i = 0; i < l->depth; i++)
            if (l->state[i] == 1 && l->slot_step[i] == l->consume_step) slot = i;
        if (slot >= 0 || l->failed) break;
        if (l->consume_step >= l->end) break;
        pthread_cond_wait(&l->cv, &l->mu);
    }
    int rc = PLUMB_OK;
    if (slot >= 0) {
        l->state[slot] = 2;
        l->consume_step++;
        *b = &l->slots[slot];
    } else if (l->failed) {
        rc = err_set(e, l->err.code, "data loader: %s", l->err.msg);
    } else {
        rc = err_set(e, PLUMB_EINTERNAL, "data loader: no batch after step %ld", l->end - 1);
    }
    pthread_mutex_unlock(&l->mu);
    if (wait_s) *wait_s = timer_now() - t0;
    return rc;
}

void loader_release(struct loader *l, struct host_batch *b)
{
    pthread_mutex_lock(&l->mu);
    int i = (int)(b - l->slots);
    if (i >= 0 && i < l->depth) l->state[i] = 0;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

void loader_stop(struct loader *l)
{
    if (!l) return;
    if (l->th) {
        pthread_mutex_lock(&l->mu);
        l->stop = 1;
        pthread_cond_broadcast(&l->cv);
        pthread_mutex_unlock(&l->mu);
        pthread_join(l->th, NULL);
        pthread_mutex_destroy(&l->mu);
        pthread_cond_destroy(&l->cv);
    }
    for (int i = 0; l->slots && i < l->depth; i++) batch_free(&l->slots[i]);
    free(l->slots), free(l->state), free(l->slot_step);
    free(l);
}
