#include "models/ctr/data.h"
#include "core/hugemem.h"
#include "core/file.h"
#include "core/log.h"
#include "core/mapguard.h"
#include "models/ctr/cache.h"
#include "models/ctr/ctr.h"
#include "train/options.h"
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A file's samples: its binary cache mapped (FILE itself a cache, or
 * FILE.plumbcache beside it: refused when stale or corrupt), else FILE
 * parsed on all threads. Cache slot k of d holds the mapping. */
static int load_file(struct dataset *d, int k, const char *path, const struct data_opts *o, long max,
                     struct criteo_sample **out, long *n, plumb_err *e)
{
    char side[4200];
    const char *cache = NULL, *src = NULL;
    if (criteo_cache_is(path)) {
        cache = path;
    } else {
        snprintf(side, sizeof side, "%s%s", path, CRITEO_CACHE_SUFFIX);
        if (file_exists(side)) cache = side, src = path;
    }
    if (!cache) {
        int rc = criteo_read_all(path, o->bad, max, 0, out, n, &d->skipped, &d->truncated, e);
        if (!rc) d->own[k] = *out;
        return rc;
    }
    struct criteo_cache *c = &d->cache[k];
    int rc = criteo_cache_map(cache, src, c, e);
    /* a corrupt cache named by --data (or beside its file) is the user's
     * input, as a malformed TSV is: exit 2, the message says to rewrite it */
    if (rc == PLUMB_ECORRUPT) e->code = rc = PLUMB_EUSAGE;
    if (rc) return rc;
    if (c->skipped && o->bad != CRITEO_BAD_SKIP)
        return err_set(e, PLUMB_EUSAGE, "%s: its source had %ld malformed lines, skipped when the cache was written "
                       "(run with --bad-lines skip, or rewrite the cache)", cache, c->skipped);
    d->skipped += c->skipped;
    d->truncated += c->truncated;
    *out = (struct criteo_sample *)c->samples; /* read-only mapping: only read */
    *n = max > 0 && c->rows > max ? max : c->rows;
    log_info("%s: %ld samples from the cache %s (mapped)", path, *n, cache);
    return PLUMB_OK;
}

int dataset_open(const char *spec, const struct data_opts *o, struct dataset **out, plumb_err *e)
{
    *out = NULL;
    struct dataset *d = calloc(1, sizeof *d);
    if (!d) return err_set(e, PLUMB_ENOMEM, "out of memory");
    int rc;
    if (!strcmp(spec, "synthetic")) {
        if (o->eval_file && *o->eval_file) { /* it was ignored silently: the eval ran on the teacher's split */
            free(d);
            return err_set(e, PLUMB_EUSAGE, "--eval-data %s: synthetic data has its own eval split (--eval-samples); "
                           "expected no --eval-data", o->eval_file);
        }
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
                    d->mem[sp] = huge_alloc((size_t)d->n[sp] * sizeof *d->mem[sp]);
                    if (!d->mem[sp]) break;
                    struct criteo_sample *m = d->mem[sp];
                    const struct synth *syn = d->syn;
                    const long n = d->n[sp];
#pragma omp parallel for schedule(static)
                    for (long i = 0; i < n; i++) synth_sample(syn, sp, (uint64_t)i, &m[i], NULL);
                }
                d->own[0] = d->mem[0], d->own[1] = d->mem[1];
                if (d->mem[0] && d->mem[1]) {
                    where = "generated into memory";
                } else { /* out of memory: stay on demand */
                    free(d->mem[0]), free(d->mem[1]);
                    d->mem[0] = d->mem[1] = NULL;
                    d->own[0] = d->own[1] = NULL;
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
    if ((rc = load_file(d, 0, spec, o, o->max_rows, &all, &n, e))) {
        dataset_free(d);
        return rc;
    }
    if (o->eval_file && *o->eval_file) {
        d->mem[0] = all;
        d->n[0] = n;
        if ((rc = load_file(d, 1, o->eval_file, o, 0, &d->mem[1], &d->n[1], e))) {
            dataset_free(d);
            return rc;
        }
    } else {
        long ne = (long)((double)n * o->eval_fraction);
        if (ne < 1 || ne >= n) {
            dataset_free(d);
            return err_set(e, PLUMB_EUSAGE, "%s: %ld samples cannot be split with --eval-fraction %g", spec, n,
                           o->eval_fraction);
        }
        /* the eval split is the tail of the same samples (only read) */
        d->mem[0] = all;
        d->n[0] = n - ne;
        d->mem[1] = all + (n - ne);
        d->n[1] = ne;
    }
    if (d->n[0] < 1 || d->n[1] < 1) {
        /* with an eval file each split is a file of its own: name the empty one */
        const int ev = o->eval_file && *o->eval_file && d->n[0] >= 1;
        long a = d->n[0], b = d->n[1];
        dataset_free(d);
        if (o->eval_file && *o->eval_file)
            return err_set(e, PLUMB_EUSAGE, "%s %s: no samples (expected Criteo lines; %ld train and %ld eval samples)",
                           ev ? "--eval-data" : "--data", ev ? o->eval_file : spec, a, b);
        return err_set(e, PLUMB_EUSAGE, "%s: %ld train and %ld eval samples; both must be non-empty", spec, a, b);
    }
    snprintf(d->desc, sizeof d->desc, "%s: %ld train, %ld eval samples%s", spec, d->n[0], d->n[1],
             o->eval_file && *o->eval_file ? " (eval file)" : " (eval = last lines)");
    *out = d;
    return PLUMB_OK;
}

void dataset_free(struct dataset *d)
{
    if (!d) return;
    synth_free(d->syn);
    free(d->own[0]);
    free(d->own[1]);
    criteo_cache_unmap(&d->cache[0]);
    criteo_cache_unmap(&d->cache[1]);
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

/* A batch from samples in memory, in blocks of FILL_BLOCK samples: first
 * the gather (the pool is read at random: each sample's three cache lines
 * prefetched FILL_AHEAD samples early; hashes copied as they are), then the
 * remainders of the block's hashes in place while they are in L1. Doing the
 * 26 remainders inside the gather loop kept the core from running ahead to
 * the next samples' misses: ~2.5x slower a sample (bench/feed_host.c). */
#define FILL_BLOCK 256
#define FILL_AHEAD 16
static void fill_prefetch(const struct criteo_sample *p)
{
    const char *q = (const char *)p;
    for (size_t o = 0; o < sizeof *p; o += 64) __builtin_prefetch(q + o);
    __builtin_prefetch(q + sizeof *p - 1);
}

/* The gather of samples in memory (below), whole batch. */
static void fill_mem(const struct criteo_sample *mem, const uint32_t *idx, int count, const uint64_t *M,
                     const uint32_t *R, float *dense, uint32_t *sparse, float *labels)
{
    for (int i = 0; i < FILL_AHEAD && i < count; i++) fill_prefetch(&mem[idx[i]]);
    for (int b0 = 0; b0 < count; b0 += FILL_BLOCK) {
        const int b1 = count - b0 < FILL_BLOCK ? count : b0 + FILL_BLOCK;
        for (int i = b0; i < b1; i++) {
            if (i + FILL_AHEAD < count) fill_prefetch(&mem[idx[i + FILL_AHEAD]]);
            const struct criteo_sample *s = &mem[idx[i]];
            memcpy(dense + (size_t)i * CRITEO_DENSE, s->dense, sizeof s->dense);
            memcpy(sparse + (size_t)i * CRITEO_CAT, s->cat, sizeof s->cat);
            labels[i] = s->label;
        }
        for (int i = b0; i < b1; i++) {
            uint32_t *row = sparse + (size_t)i * CRITEO_CAT;
            for (int t = 0; t < CRITEO_CAT; t++) row[t] = fastmod_u32(row[t], M[t], R[t]);
        }
    }
}

/* The same out of a mapped cache, under a guard (core/mapguard.h): a cache
 * truncated during the run faults on the pages past its new end, and the
 * batch is then an error naming the file instead of a SIGBUS. One guard a
 * batch: the gather is all that runs inside it (no allocation, no lock). */
static int fill_mapped(const struct criteo_cache *c, const struct criteo_sample *mem, const uint32_t *idx, int count,
                       const uint64_t *M, const uint32_t *R, float *dense, uint32_t *sparse, float *labels,
                       plumb_err *e)
{
    struct mapguard g;
    mapguard_prepare(&g, c->map, c->map_len);
    if (sigsetjmp(g.jb, 0)) return mapguard_error(&g, c->path, "Criteo cache", e);
    mapguard_arm(&g);
    fill_mem(mem, idx, count, M, R, dense, sparse, labels);
    mapguard_disarm(&g);
    return PLUMB_OK;
}

int data_fill(const struct dataset *d, int split, const uint32_t *idx, int count, const int64_t *rows, float *dense,
              uint32_t *sparse, float *labels, plumb_err *e)
{
    uint64_t M[CRITEO_CAT];
    uint32_t R[CRITEO_CAT];
    for (int t = 0; t < CRITEO_CAT; t++) {
        R[t] = (uint32_t)rows[t];
        M[t] = UINT64_MAX / R[t] + 1;
    }
    const struct criteo_sample *mem = d->mem[split];
    if (!mem) { /* generated per access: the teacher's cost dominates */
        for (int i = 0; i < count; i++) {
            struct criteo_sample s;
            dataset_get(d, split, idx[i], &s);
            memcpy(dense + (size_t)i * CRITEO_DENSE, s.dense, sizeof s.dense);
            for (int t = 0; t < CRITEO_CAT; t++) sparse[(size_t)i * CRITEO_CAT + t] = fastmod_u32(s.cat[t], M[t], R[t]);
            labels[i] = s.label;
        }
        return PLUMB_OK;
    }
    /* the eval split without --eval-data lies in the train file's cache */
    for (int k = 0; k < 2; k++)
        if (criteo_cache_holds(&d->cache[k], mem))
            return fill_mapped(&d->cache[k], mem, idx, count, M, R, dense, sparse, labels, e);
    fill_mem(mem, idx, count, M, R, dense, sparse, labels);
    return PLUMB_OK;
}

/* ---------------- the data source of the workload (train/model.h) ---------------- */

static const struct batch_field ctr_fields[CTR_N_FIELDS] = {
    {"dense", DT_F32, CTR_N_DENSE},
    {"sparse", DT_U32, CTR_N_TABLES},
    {"label", DT_F32, 1},
};

void ctr_source_wrap(struct data_source *s, struct dataset *ds, const int64_t *rows)
{
    memset(s, 0, sizeof *s);
    s->ds = ds;
    memcpy(s->rows, rows, sizeof s->rows);
}

void ctr_feed_source(const struct data_source *s, struct feed_source *fs)
{
    fs->ops = &ctr_data_ops;
    fs->src = s;
    fs->fields = ctr_fields;
    fs->n_fields = CTR_N_FIELDS;
}



static int d_open(const struct train_config *cfg, const void *spec, int materialize, struct data_source **out,
                  plumb_err *e)
{
    const struct ctr_config *c = spec;
    struct data_source *s = calloc(1, sizeof *s);
    if (!s) return err_set(e, PLUMB_ENOMEM, "ctr: out of memory");
    memcpy(s->rows, c->rows, sizeof s->rows);
    s->owns = 1;
    struct data_opts dop = {.seed = cfg->data_seed,
                            .train_samples = cfg->train_samples,
                            .eval_samples = cfg->eval_samples,
                            .eval_file = cfg->eval_data,
                            .eval_fraction = cfg->eval_fraction,
                            .bad = cfg->bad_lines && !strcmp(cfg->bad_lines, "skip") ? CRITEO_BAD_SKIP : CRITEO_BAD_ERROR,
                            .max_rows = cfg->max_rows,
                            .materialize = materialize};
    int rc = dataset_open(cfg->data, &dop, &s->ds, e);
    if (rc) {
        free(s);
        return rc;
    }
    *out = s;
    return PLUMB_OK;
}

static void d_free(struct data_source *s)
{
    if (!s) return;
    if (s->owns) dataset_free(s->ds);
    free(s);
}

static long d_count(const struct data_source *s, int split) { return s->ds->n[split]; }

static const struct batch_field *d_fields(const struct data_source *s, int *n)
{
    (void)s;
    *n = CTR_N_FIELDS;
    return ctr_fields;
}

static int d_fill(const struct data_source *s, int split, long epoch, const uint32_t *idx, int count,
                  void *const *field, plumb_err *e)
{
    (void)epoch; /* no augmentation */
    return data_fill(s->ds, split, idx, count, s->rows, field[CTR_F_DENSE], field[CTR_F_SPARSE], field[CTR_F_LABEL], e);
}

static void d_info(const struct data_source *s, struct data_info *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->desc, sizeof out->desc, "%s", s->ds->desc);
    out->skipped = s->ds->skipped;
    out->truncated = s->ds->truncated;
    out->has_reference = s->ds->synthetic; /* file data have no teacher */
}

/* The teacher's click probability of each sample: a score ranked like a
 * logit (only the AUC of the teacher is reported). */
static int d_reference(const struct data_source *s, int split, const uint32_t *idx, int count, float *out,
                       plumb_err *e)
{
    if (!s->ds->synthetic) return err_set(e, PLUMB_EUNSUPPORTED, "ctr: file data have no teacher");
    for (int i = 0; i < count; i++) {
        struct criteo_sample cs;
        synth_sample(s->ds->syn, split, idx[i], &cs, &out[i]);
    }
    return PLUMB_OK;
}

const struct data_ops ctr_data_ops = {
    .open = d_open,
    .free = d_free,
    .count = d_count,
    .fields = d_fields,
    .fill = d_fill,
    .info = d_info,
    .reference_outputs = d_reference,
};

