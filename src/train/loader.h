/* The background batch loader for host batches (the device feed,
 * train/devfeed.h, is its GPU counterpart).
 *
 * The loader runs on its own thread: for global steps start, start+1, ... it
 * asks the sampler for this rank's sample indices, has the data source fill
 * the batch's fields (train/model.h, data_ops.fill; padding past the valid
 * samples is zero bytes) and puts it in a bounded queue of `depth` batches.
 * The trainer takes batches in order; the time it waits is the data wait
 * shown in the step timing. */
#ifndef PLUMB_LOADER_H
#define PLUMB_LOADER_H
#include <stdint.h>
#include "core/err.h"
#include "train/model.h"
#include "train/sampler.h"

/* What a data source feeds: its ops and object, and its fields. */
struct feed_source {
    const struct data_ops *ops;
    const struct data_source *src;
    int n_fields;
    const struct batch_field *fields;
};

/* Host arrays of one (local) batch. */
struct host_batch {
    struct sampler_step st;
    int cap;                        /* capacity in samples */
    int n;                          /* samples filled = st.local_valid (the rest zero padding) */
    void *field[MODEL_MAX_FIELDS];  /* field k: [cap, width_k] */
    int *shard_valid;               /* [nshards] */
    uint32_t *idx;                  /* [cap] sample indices */
    double build_s;                 /* seconds the loader spent building it */
};

/* Bytes of one sample of field k. */
size_t feed_field_bytes(const struct feed_source *fs, int k);
/* b as a struct batch of samples [off, off + n) (host pointers). */
void host_batch_view(const struct feed_source *fs, const struct host_batch *hb, long off, int n, struct batch *out);

struct loader;
/* Starts the thread producing batches for steps [start, end) of rank/world.
 * The sampler is owned by the loader thread from here on. */
int loader_start(const struct feed_source *fs, struct sampler *s, int rank, int world, long start, long end, int depth,
                 struct loader **out, plumb_err *e);
/* The batch of the next step; *wait_s gets the seconds spent waiting. The
 * batch stays valid until loader_release. */
int loader_next(struct loader *l, struct host_batch **b, double *wait_s, plumb_err *e);
void loader_release(struct loader *l, struct host_batch *b);
/* Stops the thread and frees everything. */
void loader_stop(struct loader *l);

#endif
