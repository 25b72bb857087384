/* COMPATIBILITY ONLY: the nccl_* functions that src/train/trainer.c and
 * src/cli/bench_ctr.c called before NCCL/RCCL became an implementation of
 * comm/comm.h. Each is a thin wrapper over comm.h (comm/nccl_compat.c) and
 * goes once those callers use comm.h directly:
 *
 *   nccl_load              -> comm_nccl_load
 *   nccl_device_for_rank   -> dev_spec_for_local_rank (dev/dev.h)
 *   nccl_comm_init         -> comm_open_device(host, d, "nccl", timeout, ...)
 *   nccl_comm_free         -> comm_finalize
 *   nccl_describe          -> struct comm's desc
 *   nccl_allreduce_async   -> comm_allreduce_start (SUM, after `after`)
 *   nccl_wait              -> comm_wait
 *   nccl_allreduce_buckets -> comm_allreduce_start per bucket, then comm_wait
 *   nccl_allgather         -> comm_allgather
 *
 * New code includes comm/comm.h only. */
#ifndef PLUMB_COMM_NCCL_H
#define PLUMB_COMM_NCCL_H
#include <stddef.h>
#include <stdint.h>
#include "comm/comm.h"
#include "core/dtype.h"
#include "core/err.h"
#include "dev/dev.h"

struct nccl_comm; /* wraps a device comm of kind "nccl" */

int nccl_load(const char *backend, char *desc, size_t n, plumb_err *e);
int nccl_device_for_rank(const char *backend, int local_rank, int local_world, char spec[32], plumb_err *e);
int nccl_comm_init(struct comm *host, struct dev *d, double timeout_s, struct nccl_comm **out, plumb_err *e);
void nccl_comm_free(struct nccl_comm *c);
const char *nccl_describe(const struct nccl_comm *c);
/* the device comm behind the wrapper */
struct comm *nccl_comm_of(struct nccl_comm *c);
int nccl_allreduce_async(struct nccl_comm *c, void *buf, size_t n, dtype_t t, dev_stream *after, plumb_err *e);
int nccl_wait(struct nccl_comm *c, const char *what, plumb_err *e);
/* fp32 sums in buckets of PLUMB_NCCL_BUCKET_MB (default 25) MiB, then wait */
int nccl_allreduce_buckets(struct nccl_comm *c, float *buf, size_t n, dev_stream *after, const char *what,
                           plumb_err *e);
int nccl_allgather(struct nccl_comm *c, const void *send, size_t bytes, void *recv, const char *what, plumb_err *e);

#endif
