/* ctr's datasets (the generic batch loader is train/loader.h).
 *
 * A dataset has two splits (train, eval) with random access by sample index:
 *   - synthetic: samples generated on demand from the teacher (train/synth.h),
 *     n_train and n_eval chosen by the caller; with data_opts.materialize
 *     generated once at open into memory (the same samples: a feed that
 *     must keep up with a GPU then copies instead of evaluating the teacher);
 *   - a Criteo TSV file (plain or gzip): parsed once on all threads into
 *     memory (160 bytes per sample), or its binary cache mapped (FILE.plumbcache
 *     beside it, or the cache itself: models/ctr/cache.h); the eval split is --eval-data FILE,
 *     or else the last eval_fraction of the file's lines (the later samples,
 *     as Criteo's own day split holds out the last day). */
#ifndef PLUMB_DATA_H
#define PLUMB_DATA_H
#include <stdint.h>
#include "core/err.h"
#include "models/ctr/cache.h"
#include "models/ctr/criteo.h"
#include "models/ctr/synth.h"
#include "train/loader.h"
#include "train/model.h"

struct data_opts {
    uint64_t seed;          /* synthetic data seed */
    long train_samples;     /* synthetic: samples per epoch */
    long eval_samples;      /* synthetic: eval split size */
    const char *eval_file;  /* file data: separate eval file (NULL: hold out) */
    double eval_fraction;   /* file data without eval_file */
    enum criteo_bad bad;
    long max_rows;          /* file data: stop after this many lines (0: all) */
    int materialize;        /* synthetic: generate both splits into memory at open
                             * (in parallel) instead of per access, when they fit in
                             * PLUMB_SYNTH_MEM_MB (default 4096) MiB */
};

struct dataset {
    int synthetic;
    long n[2];                     /* samples in split 0 (train) and 1 (eval) */
    struct synth *syn;
    struct criteo_sample *mem[2];  /* file data (views into own[] or a cache's mapping) */
    void *own[2];                  /* malloc'ed sample arrays */
    struct criteo_cache cache[2];  /* mapped binary caches (models/ctr/cache.h) */
    long skipped, truncated;       /* malformed lines skipped, truncated last lines */
    char desc[512];
};

/* spec: "synthetic" or a file path. */
int dataset_open(const char *spec, const struct data_opts *o, struct dataset **out, plumb_err *e);
void dataset_free(struct dataset *d);
void dataset_get(const struct dataset *d, int split, uint64_t index, struct criteo_sample *s);

/* Fills rows 0..count-1 of the fields from samples idx (split); table rows
 * are hash mod rows[t]. A mapped cache is read under a guard: one that shrank
 * during the run (truncated, rewritten in place) is PLUMB_EIO naming it. */
int data_fill(const struct dataset *d, int split, const uint32_t *idx, int count, const int64_t *rows, float *dense,
              uint32_t *sparse, float *labels, plumb_err *e);

/* ---- the workload's data source (train/model.h, data_ops) ----
 * Batch fields: CTR_F_DENSE "dense" f32 [B, 13] (transformed),
 * CTR_F_SPARSE "sparse" u32 [B, 26] (row within table t: hash mod rows[t]),
 * CTR_F_LABEL "label" f32 [B, 1] (0 or 1). */
enum { CTR_F_DENSE = 0, CTR_F_SPARSE = 1, CTR_F_LABEL = 2, CTR_N_FIELDS = 3 };
struct data_source {
    struct dataset *ds;
    int owns;                /* data_ops.free frees ds */
    int64_t rows[CRITEO_CAT];
};
extern const struct data_ops ctr_data_ops;
/* s over an open dataset it does not own (benches, tests). */
void ctr_source_wrap(struct data_source *s, struct dataset *ds, const int64_t *rows);
/* The feed (loader / device feed) over s. */
void ctr_feed_source(const struct data_source *s, struct feed_source *fs);

#endif
