/* Datasets for ctr and the background batch loader.
 *
 * A dataset has two splits (train, eval) with random access by sample index:
 *   - synthetic: samples generated on demand from the teacher (train/synth.h),
 *     n_train and n_eval chosen by the caller; with data_opts.materialize
 *     generated once at open into memory (the same samples: a feed that
 *     must keep up with a GPU then copies instead of evaluating the teacher);
 *   - a Criteo TSV file (plain or gzip): parsed once by the streaming reader
 *     into memory (160 bytes per sample); the eval split is --eval-data FILE,
 *     or else the last eval_fraction of the file's lines (the later samples,
 *     as Criteo's own day split holds out the last day).
 *
 * The loader runs on its own thread: for global steps start, start+1, ... it
 * asks the sampler for this rank's sample indices, builds the host batch
 * (dense features, table rows = hash mod rows[t], labels) and puts it in a
 * bounded queue of `depth` batches. The trainer takes batches in order; the
 * time it waits is the data wait shown in the step timing. */
#ifndef PLUMB_DATA_H
#define PLUMB_DATA_H
#include <pthread.h>
#include <stdint.h>
#include "core/err.h"
#include "train/criteo.h"
#include "train/sampler.h"
#include "train/synth.h"

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
    struct criteo_sample *mem[2];  /* file data */
    long skipped, truncated;       /* malformed lines skipped, truncated last lines */
    char desc[512];
};

/* spec: "synthetic" or a file path. */
int dataset_open(const char *spec, const struct data_opts *o, struct dataset **out, plumb_err *e);
void dataset_free(struct dataset *d);
void dataset_get(const struct dataset *d, int split, uint64_t index, struct criteo_sample *s);

/* Host arrays of one (local) batch; rows already reduced mod rows[t]. */
struct host_batch {
    struct sampler_step st;
    int cap;                /* capacity in samples */
    int n;                  /* samples filled = st.local_valid (the rest zero padding) */
    float *dense;           /* [cap, 13] */
    uint32_t *sparse;       /* [cap, 26] */
    float *labels;          /* [cap] */
    int *shard_valid;       /* [nshards] */
    uint32_t *idx;          /* [cap] sample indices */
    double build_s;         /* seconds the loader spent building it */
};

/* Fills rows i0..i1-1 of b from samples idx (split); rows mod rows[t]. */
void data_fill(const struct dataset *d, int split, const uint32_t *idx, int count,
               const int64_t *rows, float *dense, uint32_t *sparse, float *labels);

struct loader;
/* Starts the thread producing batches for steps [start, end) of rank/world.
 * The sampler is owned by the loader thread from here on. */
int loader_start(const struct dataset *d, struct sampler *s, const int64_t *rows, int rank,
                 int world, long start, long end, int depth, struct loader **out, plumb_err *e);
/* The batch of the next step; *wait_s gets the seconds spent waiting. The
 * batch stays valid until loader_release. */
int loader_next(struct loader *l, struct host_batch **b, double *wait_s, plumb_err *e);
void loader_release(struct loader *l, struct host_batch *b);
/* Stops the thread and frees everything. */
void loader_stop(struct loader *l);

#endif
