/* The GPU data plane: batches built on host threads
 * straight into pinned buffers and copied to the device on a copy stream,
 * overlapping the compute of the previous step.
 *
 * A producer thread takes steps start, start+1, ... < end: for each it asks
 * the sampler for this rank's sample indices, fills a pinned host slot with
 * the data source's fill (train/model.h) split over `threads` threads of its
 * own pool (the source builds batches in range by construction), issues the
 * H2D copies on its own stream and records an event, and goes on to the next
 * step without waiting for the copy (it waits only before it rewrites a
 * slot's pinned buffers, for that slot's previous copy). devfeed_next hands the consumer the
 * next step's device batch after making the device's default stream wait for
 * that event (no host block when the copy is done in time). `depth` slots
 * circulate; a slot is reused after devfeed_release, which the consumer calls
 * once it has queued the work that reads the batch on the default stream (it
 * need not have run: release records an event there, and the slot's next
 * H2D copy waits for it on the device). */
#ifndef PLUMB_DEVFEED_H
#define PLUMB_DEVFEED_H
#include "core/err.h"
#include "dev/dev.h"
#include "train/loader.h"
#include "train/model.h"
#include "train/sampler.h"

struct devfeed;

/* The sampler is owned by the feed thread until devfeed_stop. */
int devfeed_start(struct dev *d, const struct feed_source *fs, int split, struct sampler *s, int rank, int world,
                  long start, long end, int depth, int threads, struct devfeed **out, plumb_err *e);
/* The next step's batch (device fields); *wait_s = seconds the host waited for it. */
int devfeed_next(struct devfeed *f, struct batch *b, long *step, double *wait_s, plumb_err *e);
/* The sampler's description of the taken batch (step, epoch, global_valid,
 * local_valid...); PLUMB_EINTERNAL when none is taken. */
int devfeed_step_info(struct devfeed *f, struct sampler_step *st);
/* Gives the batch of the last devfeed_next back (its step has synchronised). */
void devfeed_release(struct devfeed *f);
/* Seconds the producer spent building batches (host work) and copying. */
void devfeed_times(struct devfeed *f, double *build_s, double *copy_s);
void devfeed_stop(struct devfeed *f);

#endif
