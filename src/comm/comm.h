/* Collectives: one interface, three implementations (docs/COMM.md).
 *
 *   self: 1 rank; reductions are copies (no launcher).
 *   mpi:  Open MPI / MPICH over host memory; chosen when the environment
 *         shows a launcher (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK,
 *         SLURM_NTASKS > 1).
 *   nccl: NCCL (NVIDIA) or RCCL (AMD), dlopen'ed, over the memory of one
 *         cuda/hip device (comm/comm_nccl.c).
 *
 * A comm is either a host comm (comm_init: self or mpi; buffers are host
 * memory) or a device comm (comm_open_device: buffers are memory of one
 * device). A device comm is NCCL/RCCL, or the host comm serving the device:
 * directly for the cpu device (its memory is host memory), staged through
 * pinned host memory for a GPU without NCCL (comm/comm_staged.c). So a caller
 * has one code path for gradients whatever carries them.
 *
 * Ordering. comm_start enqueues a collective after the work queued so far on
 * a stream of the comm's device (NULL: the default stream) and may return
 * before it completes (nccl: on the comm's own stream, so an all-reduce of a
 * gradient bucket overlaps the rest of backward); comm_wait joins: after it
 * every started collective is complete, visible to the host and to the
 * device's default stream. Host comms and staged device comms complete
 * inside comm_start; comm_wait is then nothing. The synchronous wrappers
 * (comm_allreduce, ...) are start + wait.
 *
 * Every collective runs under the watchdog (core/watchdog.h), so a rank that
 * never arrives turns into a failed job, not a hang; NCCL also polls its
 * async error and aborts the communicator (bounded) after the timeout. All
 * ranks call a collective with the same arguments (except allgatherv's send
 * size) in the same order.
 *
 * Exact sums: DT_I64 COMM_SUM is the golden all-reduce (fixed-point
 * gradients): integer addition does not depend on order or rank count, on
 * every implementation. Floating-point sums may differ in the last bits
 * between implementations and rank counts (MPI and NCCL pick their own
 * trees); max/min are exact. */
#ifndef PLUMB_COMM_H
#define PLUMB_COMM_H
#include <stddef.h>
#include <stdint.h>
#include "core/dtype.h"
#include "core/err.h"
#include "dev/dev.h"

enum comm_op { COMM_SUM = 0, COMM_MAX = 1, COMM_MIN = 2, COMM_OP_N };

/* The collectives, with NCCL's count conventions (`count` elements of dtype):
 *   ALLREDUCE       recv[count] = op over ranks of send[count]
 *   BROADCAST       recv[count] = root's send[count] (send used on root only)
 *   REDUCE          on root: recv[count] = op over ranks of send[count]
 *   ALLGATHER       recv[world * count] = send[count] of every rank, by rank
 *   REDUCE_SCATTER  recv[count] = block `rank` of op over ranks of send[world * count]
 *   ALLTOALL        recv block r [count] = block `rank` of rank r's send[world * count]
 * In place (as NCCL defines it): send == recv for ALLREDUCE, BROADCAST,
 * and REDUCE; send == recv + rank * count (elements) for ALLGATHER;
 * recv == send + rank * count for REDUCE_SCATTER. ALLTOALL is out of place
 * only (send and recv must not overlap). Data-movement collectives (BROADCAST, ALLGATHER,
 * ALLTOALL) take any dtype; reductions take fp32, fp64, bf16, fp16, i32,
 * i64, u32 and u8 with SUM, MAX or MIN where the implementation supports the
 * combination (comm_supports). */
enum comm_coll {
    COMM_ALLREDUCE = 0,
    COMM_BROADCAST,
    COMM_REDUCE,
    COMM_ALLGATHER,
    COMM_REDUCE_SCATTER,
    COMM_ALLTOALL,
    COMM_COLL_N
};

struct comm_args {
    enum comm_coll coll;
    const void *send;
    void *recv;
    size_t count;    /* elements, as above */
    dtype_t dtype;
    enum comm_op op; /* reductions */
    int root;        /* BROADCAST, REDUCE */
};

struct comm;

/* What an implementation provides. Buffers are memory of c->dev (host memory
 * when c->dev is NULL). comm.c checks the arguments and wraps each call in
 * the watchdog before it reaches these. */
struct comm_ops {
    const char *name; /* "self", "mpi", "nccl", "host" (a host comm serving a device) */
    /* 1 when (coll, dtype, op) can run here (op ignored for data movement). */
    int (*supports)(const struct comm *c, enum comm_coll coll, dtype_t t, enum comm_op op);
    /* Enqueues (or runs) one collective after the work queued on `after`. */
    int (*start)(struct comm *c, const struct comm_args *a, dev_stream *after, plumb_err *e);
    /* Waits for every started collective (see "Ordering" above). */
    int (*wait)(struct comm *c, plumb_err *e);
    /* recv = the send buffers of counts[r] bytes each, concatenated by rank;
     * host memory only (NULL in device implementations that cannot). */
    int (*allgatherv)(struct comm *c, const void *send, size_t bytes, void *recv, const size_t *counts, plumb_err *e);
    int (*barrier)(struct comm *c, plumb_err *e);
    /* comm_arrive (below); NULL: a plain barrier (host comms only). */
    int (*arrive)(struct comm *c, double timeout_s, int *missing, int max, int *nmissing, plumb_err *e);
    /* Ends every rank of the job now with status code (never returns). */
    void (*abort)(struct comm *c, int code);
    void (*finalize)(struct comm *c);
};

struct comm {
    const struct comm_ops *ops;
    int rank, world;             /* global */
    int local_rank, local_world; /* on this host (for device selection) */
    struct dev *dev;             /* buffers live here; NULL: host memory */
    char desc[768];              /* one line for logs: library, version, ranks, device */
    void *impl;
};

/* ---- host comms ---- */
/* kind: "auto" (mpi when launched by mpirun/srun, else self), "self", "mpi". */
int comm_init(const char *kind, struct comm **out, plumb_err *e);
/* 1 when the environment says a launcher started us with several ranks. */
int comm_launched_by_mpi(void);

/* ---- device comms ----
 * Collective over all ranks of `host`, which must outlive the device comm
 * (it carries the NCCL unique id and serves the staged path). kind:
 *   "nccl": NCCL/RCCL on a cuda/hip device (PLUMB_EUSAGE for another
 *           device, PLUMB_EDEVICE naming the library when it does not load);
 *   "host": the host comm, staged through pinned host memory unless d is
 *           the cpu device;
 *   "auto": nccl when d is a GPU and NCCL/RCCL loads on every rank, else host.
 * timeout_s bounds every NCCL wait (<= 0: 300 s). */
int comm_open_device(struct comm *host, struct dev *d, const char *kind, double timeout_s, struct comm **out,
                     plumb_err *e);
/* Loads NCCL (backend "cuda") or RCCL ("hip") once and says which library
 * and version in desc, or why not (PLUMB_EDEVICE naming the library and
 * PLUMB_NCCL_LIB, the override of its path). */
int comm_nccl_load(const char *backend, char *desc, size_t n, plumb_err *e);

/* Host or device comm. A device comm leaves its host comm open. */
void comm_finalize(struct comm *c);

/* ---- collectives (each under the watchdog; `what` names it in a watchdog
 * or timeout report and may be NULL) ---- */
int comm_supports(const struct comm *c, enum comm_coll coll, dtype_t t, enum comm_op op);
int comm_start(struct comm *c, const struct comm_args *a, dev_stream *after, const char *what, plumb_err *e);
int comm_wait(struct comm *c, const char *what, plumb_err *e);
/* start (after the default stream's work) + wait */
int comm_run(struct comm *c, const struct comm_args *a, const char *what, plumb_err *e);

/* In place: buf[n] = op over ranks of buf[n]. comm_allreduce_start enqueues
 * after `after` and leaves the wait to comm_wait (gradient buckets). */
int comm_allreduce(struct comm *c, void *buf, size_t n, dtype_t t, enum comm_op op, const char *what, plumb_err *e);
int comm_allreduce_start(struct comm *c, void *buf, size_t n, dtype_t t, enum comm_op op, dev_stream *after,
                         const char *what, plumb_err *e);
/* The golden all-reduce: exact sum of 64-bit fixed-point values. */
int comm_sum_i64(struct comm *c, int64_t *buf, size_t n, const char *what, plumb_err *e);
/* bytes of buf from root to everyone */
int comm_broadcast(struct comm *c, void *buf, size_t bytes, int root, const char *what, plumb_err *e);
/* recv[world * bytes] = concatenation of every rank's send[bytes], by rank */
int comm_allgather(struct comm *c, const void *send, size_t bytes, void *recv, const char *what, plumb_err *e);
/* Gathers variable-size contributions (host memory): exchanges the sizes
 * first, then the data. *recv is malloc'ed (caller frees), *total its size in
 * bytes; counts (optional, world entries) receives each rank's size. */
int comm_allgatherv_alloc(struct comm *c, const void *send, size_t bytes, void **recv, size_t *total, size_t *counts,
                          const char *what, plumb_err *e);
int comm_barrier(struct comm *c, const char *what, plumb_err *e);
/* A barrier with a deadline that says who is missing (host comms only).
 * Every rank that calls it within timeout_s of the others returns PLUMB_OK
 * once all have. When some rank does not arrive in time, the ranks that did
 * learn which ones did not: PLUMB_ETIMEOUT, missing[0..*nmissing) the absent
 * ranks in increasing order (at most max are stored; *nmissing is their
 * number), and e says "<what>: rank(s) R did not arrive within T s (arrived:
 * ...)". The whole call, detection and exchange, ends within timeout_s. After
 * a timeout the job cannot go on (the absent rank may still be inside a
 * collective): the caller reports and ends it (comm_abort). timeout_s <= 0:
 * a plain barrier under the watchdog. */
int comm_arrive(struct comm *c, const char *what, double timeout_s, int *missing, int max, int *nmissing,
                plumb_err *e);
/* Ends every rank of the job now (never returns). */
void comm_abort(struct comm *c, int code);

const char *comm_coll_name(enum comm_coll coll);
const char *comm_op_name(enum comm_op op);
/* Elements of send and of recv a collective reads and writes on this rank. */
void comm_args_sizes(const struct comm *c, const struct comm_args *a, size_t *send_elems, size_t *recv_elems);

/* ---- implementations (what comm_init / comm_open_device call) ---- */
int comm_self_init(struct comm *c, plumb_err *e);
int comm_mpi_init(struct comm *c, plumb_err *e);
int comm_staged_init(struct comm *c, struct comm *host, struct dev *d, plumb_err *e);
int comm_nccl_init(struct comm *c, struct comm *host, struct dev *d, double timeout_s, plumb_err *e);
/* Reduces n elements of src into dst (dst[i] = dst[i] op src[i]) on the host,
 * for the self, mpi and staged implementations: bf16/fp16 through fp32 with
 * round-to-nearest-even. 0 when (t, op) is not a reduction we know. */
int comm_host_reduce(void *dst, const void *src, size_t n, dtype_t t, enum comm_op op);

#endif
