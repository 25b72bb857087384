/* GPU collectives through NCCL (NVIDIA) or RCCL (AMD), same C API, loaded
 * with dlopen (DESIGN.md section 7): libnccl.so.2 for the cuda backend,
 * librccl.so.1 for hip (PLUMB_NCCL_LIB overrides the path). Our own
 * declarations of the few functions used live in comm_nccl.c; the library
 * version is checked at load (non-blocking communicators need 2.14.3).
 *
 * - The unique id is made on rank 0 and broadcast over the host comm (MPI
 *   under a launcher, self with one rank).
 * - The communicator is non-blocking (config.blocking = 0): every call that
 *   answers ncclInProgress is polled with ncclCommGetAsyncError, and every
 *   wait for a collective polls both the stream and the async error. A wait
 *   longer than the timeout, or an async error, aborts the communicator
 *   (ncclCommAbort in a helper thread, bounded to 10 s) and returns
 *   PLUMB_ETIMEOUT / PLUMB_EDEVICE, so the command exits non-zero; the
 *   process watchdog (train/watchdog.h) also gets an abort hook that aborts
 *   the communicator before it ends a hung process.
 * - Collectives run on the communicator's own stream: it first waits (on the
 *   device, no host block) for an event recorded on the stream that produced
 *   the data, so an all-reduce of a gradient bucket can start as soon as its
 *   layers are done while backward continues; nccl_wait joins them back.
 * - Buffers are device memory of the device given at init.
 * - Golden data parallel: nccl_allreduce_i64 sums 64-bit fixed-point
 *   gradients exactly (integer sums do not depend on order or rank count).
 * - Rank-to-GPU mapping: nccl_device_for_rank picks ordinal local_rank of the
 *   devices the runtime shows, i.e. after CUDA_VISIBLE_DEVICES /
 *   HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES, which are respected as set. */
#ifndef PLUMB_COMM_NCCL_H
#define PLUMB_COMM_NCCL_H
#include <stddef.h>
#include <stdint.h>
#include "comm/comm.h"
#include "core/dtype.h"
#include "core/err.h"
#include "dev/dev.h"

struct nccl_comm;

/* Loads the library (once) and says which and what version, or why not. */
int nccl_load(const char *backend, char *desc, size_t n, plumb_err *e);
/* Device spec ("cuda:1") for this local rank; error when the host has fewer
 * visible devices than local ranks (naming the visibility variable). */
int nccl_device_for_rank(const char *backend, int local_rank, int local_world, char spec[32], plumb_err *e);
/* Collective init over all ranks of host (which broadcasts the id). */
int nccl_comm_init(struct comm *host, struct dev *d, double timeout_s, struct nccl_comm **out, plumb_err *e);
void nccl_comm_free(struct nccl_comm *c);
const char *nccl_describe(const struct nccl_comm *c);

/* Enqueues a sum all-reduce of buf[n] (DT_F32, DT_F64 or DT_I64) in place on
 * the comm stream, after the work queued so far on stream `after` (NULL: the
 * device's default stream). Does not wait. */
int nccl_allreduce_async(struct nccl_comm *c, void *buf, size_t n, dtype_t t, dev_stream *after, plumb_err *e);
/* Waits for everything enqueued on the comm stream (polling async errors,
 * bounded by the timeout) and makes the default stream wait for it too. */
int nccl_wait(struct nccl_comm *c, const char *what, plumb_err *e);
/* fp32 gradients in buckets of PLUMB_NCCL_BUCKET_MB (default 25) MiB, then wait. */
int nccl_allreduce_buckets(struct nccl_comm *c, float *buf, size_t n, dev_stream *after, const char *what,
                           plumb_err *e);
/* Exact golden sum of 64-bit fixed-point values, then wait. */
int nccl_allreduce_i64(struct nccl_comm *c, int64_t *buf, size_t n, const char *what, plumb_err *e);
/* recv[world * bytes] = every rank's send[bytes] by rank, then wait. */
int nccl_allgather(struct nccl_comm *c, const void *send, size_t bytes, void *recv, const char *what, plumb_err *e);

#endif
