#include "train/data.h"
#include "core/log.h"
#include "core/timer.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int read_all(const char *path, const struct data_opts *o, long max, struct criteo_sample **out,
                    long *n, long *skipped, long *truncated, plumb_err *e)
{
    struct criteo_reader *r;
    int rc = criteo_open(path, o->bad, &r, e);
    if (rc) return rc;
    size_t cap = 1 << 16, cnt = 0;
    struct criteo_sample *v = malloc(cap * sizeof *v);
    if (!v) {
        criteo_close(r);
        return err_set(e, PLUMB_ENOMEM, "%s: out of memory", path);
    }
    for (;;) {
        if (max > 0 && (long)cnt >= max) break;
        if (cnt == cap) {
            struct criteo_sample *nv = realloc(v, (cap *= 2) * sizeof *v);
            if (!nv) {
                free(v);
                criteo_close(r);
                return err_set(e, PLUMB_ENOMEM, "%s: out of memory after %zu samples", path, cnt);
            }
            v = nv;
        }
        int got;
        if ((rc = criteo_next(r, &v[cnt], &got, e))) {
            free(v);
            criteo_close(r);
            return rc;
        }
        if (!got) break;
        cnt++;
    }
    *skipped += criteo_skipped(r);
    *truncated += criteo_truncated(r);
    if (criteo_skipped(r)) log_warn("%s: %ld malformed lines skipped (--bad-lines skip)", path, criteo_skipped(r));
    criteo_close(r);
    *out = v;
    *n = (long)cnt;
    return PLUMB_OK;
}

int dataset_open(const char *spec, const struct data_opts *o, struct dataset **out, plumb_err *e)
{
    *out = NULL;
    struct dataset *d = calloc(1, sizeof *d);
    if (!d) return err_set(e, PLUMB_ENOMEM, "out of memory");
    int rc;
    if (!strcmp(spec, "synthetic")) {
        if (o->train_samples <= 0 || o->eval_samples <= 0) {
            free(d);
            return err_set(e, PLUMB_EUSAGE, "synthetic data needs positive train/eval sizes (got %ld, %ld)",
                           o->train_samples, o->eval_samples);
        }
        d->synthetic = 1;
        if ((rc = synth_create(o->seed, &d->syn, e))) {
            free(d);
            return rc;
        }
        d->n[0] = o->train_samples;
        d->n[1] = o->eval_samples;
        const char *where = "generated per access";
        if (o->materialize) {
            const char *mb = getenv("PLUMB_SYNTH_MEM_MB");
            double cap = (mb && *mb ? atof(mb) : 4096.0) * 1048576.0;
            double need = (double)(d->n[0] + d->n[1]) * (double)sizeof(struct criteo_sample);
            if (need <= cap) {
                for (int sp = 0; sp < 2; sp++) {
                    d->mem[sp] = malloc((size_t)d->n[sp] * sizeof *d->mem[sp]);
                    if (!d->mem[sp]) break;
                    struct criteo_sample *m = d->mem[sp];
                    const struct synth *syn = d->syn;
                    const long n = d->n[sp];
#pragma omp parallel for schedule(static)
                    for (long i = 0; i < n; i++) synth_sample(syn, sp, (uint64_t)i, &m[i], NULL);
                }
                if (d->mem[0] && d->mem[1]) {
                    where = "generated into memory";
                } else { /* out of memory: stay on demand */
                    free(d->mem[0]), free(d->mem[1]);
                    d->mem[0] = d->mem[1] = NULL;
                }
            }
        }
        snprintf(d->desc, sizeof d->desc, "synthetic teacher (data seed %llu): %ld train, %ld eval samples, %s",
                 (unsigned long long)o->seed, d->n[0], d->n[1], where);
        *out = d;
        return PLUMB_OK;
    }
    struct criteo_sample *all;
    long n;
    if ((rc = read_all(spec, o, o->max_rows, &all, &n, &d->skipped, &d->truncated, e))) {
        free(d);
        return rc;
    }
    if (o->eval_file && *o->eval_file) {
        d->mem[0] = all;
        d->n[0] = n;
        if ((rc = read_all(o->eval_file, o, 0, &d->mem[1], &d->n[1], &d->skipped, &d->truncated, e))) {
            dataset_free(d);
            return rc;
        }
    } else {
        long ne = (long)((double)n * o->eval_fraction);
        if (ne < 1 || ne >= n) {
            free(all);
            free(d);
            return err_set(e, PLUMB_EUSAGE, "%s: %ld samples cannot be split with --eval-fraction %g", spec, n,
                           o->eval_fraction);
        }
        d->mem[0] = all;
        d->n[0] = n - ne;
        d->mem[1] = malloc((size_t)ne * sizeof *d->mem[1]);
        if (!d->mem[1]) {
            dataset_free(d);
            return err_set(e, PLUMB_ENOMEM, "out of memory");
        }
        memcpy(d->mem[1], all + (n - ne), (size_t)ne * sizeof *all);
        d->n[1] = ne;
    }
    if (d->n[0] < 1 || d->n[1] < 1) {
        long a = d->n[0], b = d->n[1];
        dataset_free(d);
        return err_set(e, PLUMB_EUSAGE, "%s: %ld train and %ld eval samples; both must be non-empty", spec, a, b);
    }
    snprintf(d->desc, sizeof d->desc, "%s: %ld train, %ld eval samples%s", spec, d->n[0], d->n[1],
             o->eval_file ? " (eval file)" : " (eval = last lines)");
    *out = d;
    return PLUMB_OK;
}

void dataset_free(struct dataset *d)
{
    if (!d) return;
    synth_free(d->syn);
    free(d->mem[0]);
    free(d->mem[1]);
    free(d);
}

void dataset_get(const struct dataset *d, int split, uint64_t index, struct criteo_sample *s)
{
    if (d->mem[split]) *s = d->mem[split][index];
    else synth_sample(d->syn, split, index, s, NULL);
}

/* hash % rows without a division: Lemire's fastmod, exact for 32-bit
 * operands (M = floor((2^64 - 1) / rows) + 1, hash % rows = hi64((M * hash
 * mod 2^64) * rows)). A batch takes 26 remainders a sample; the divisions
 * were a third of the build time of a GPU-sized batch. */
static inline uint32_t fastmod_u32(uint32_t a, uint64_t M, uint32_t d)
{
    const uint64_t low = M * a;
    return (uint32_t)(((unsigned __int128)low * d) >> 64);
}

void data_fill(const struct dataset *d, int split, const uint32_t *idx, int count,
               const int64_t *rows, float *dense, uint32_t *sparse, float *labels)
{
    uint64_t M[CRITEO_CAT];
    uint32_t R[CRITEO_CAT];
    for (int t = 0; t < CRITEO_CAT; t++) {
        R[t] = (uint32_t)rows[t];
        M[t] = UINT64_MAX / R[t] + 1;
    }
    const struct criteo_sample *mem = d->mem[split];
    enum { AHEAD = 8 }; /* samples prefetched ahead: the pool is read at random */
    for (int i = 0; i < count; i++) {
        struct criteo_sample s;
        if (mem) {
            if (i + AHEAD < count) {
                const char *q = (const char *)&mem[idx[i + AHEAD]];
                for (size_t o = 0; o < sizeof s; o += 64) __builtin_prefetch(q + o);
                __builtin_prefetch(q + sizeof s - 1);
            }
            s = mem[idx[i]];
        } else {
            dataset_get(d, split, idx[i], &s);
        }
        memcpy(dense + (size_t)i * CRITEO_DENSE, s.dense, sizeof s.dense);
        for (int t = 0; t < CRITEO_CAT; t++) sparse[(size_t)i * CRITEO_CAT + t] = fastmod_u32(s.cat[t], M[t], R[t]);
        labels[i] = s.label;
    }
}

/* ---------------- the loader thread ---------------- */

struct loader {
    const struct dataset *d;
    struct sampler *s;
    int64_t rows[CRITEO_CAT];
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
    free(b->dense), free(b->sparse), free(b->labels), free(b->shard_valid), free(b->idx);
}

static int batch_alloc(struct host_batch *b, int cap, int nshards)
{
    memset(b, 0, sizeof *b);
    b->cap = cap;
    b->dense = calloc((size_t)cap * CRITEO_DENSE, sizeof *b->dense);
    b->sparse = calloc((size_t)cap * CRITEO_CAT, sizeof *b->sparse);
    b->labels = calloc((size_t)cap, sizeof *b->labels);
    b->shard_valid = calloc((size_t)nshards + 1, sizeof *b->shard_valid);
    b->idx = calloc((size_t)cap, sizeof *b->idx);
    return b->dense && b->sparse && b->labels && b->shard_valid && b->idx;
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
            data_fill(l->d, 0, b->idx, b->n, l->rows, b->dense, b->sparse, b->labels);
            /* zero padding: valid indices (row 0), label 0, masked by n_valid */
            size_t pad = (size_t)(b->cap - b->n);
            memset(b->dense + (size_t)b->n * CRITEO_DENSE, 0, pad * CRITEO_DENSE * sizeof(float));
            memset(b->sparse + (size_t)b->n * CRITEO_CAT, 0, pad * CRITEO_CAT * sizeof(uint32_t));
            memset(b->labels + b->n, 0, pad * sizeof(float));
        }
        b->build_s = timer_now() - t0;
        pthread_mutex_lock(&l->mu);
        if (rc) {
            l->failed = 1;
            l->err = e;
        }
        l->state[slot] = 1;
        l->slot_step[slot] = step;
        pthread_cond_broadcast(&l->cv);
        pthread_mutex_unlock(&l->mu);
        if (rc) return NULL;
    }
}

int loader_start(const struct dataset *d, struct sampler *s, const int64_t *rows, int rank,
                 int world, long start, long end, int depth, struct loader **out, plumb_err *e)
{
    *out = NULL;
    if (depth < 1) depth = 1;
    struct loader *l = calloc(1, sizeof *l);
    if (!l) return err_set(e, PLUMB_ENOMEM, "loader: out of memory");
    l->d = d;
    l->s = s;
    memcpy(l->rows, rows, sizeof l->rows);
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
    for (int i = 0; ok && i < depth; i++) ok = batch_alloc(&l->slots[i], cap > 0 ? cap : 1, sampler_nshards(s));
    if (!ok) {
        loader_stop(l);
        return err_set(e, PLUMB_ENOMEM, "loader: cannot allocate %d batches of %d samples", depth, cap);
    }
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
