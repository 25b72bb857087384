/* Collectives (DESIGN.md section 7): one handle per process, an ops table per
 * implementation so NCCL/RCCL (issue 5) slots in beside MPI and self.
 *
 *   self: 1 rank, every collective is a copy or nothing (no launcher).
 *   mpi:  OpenMPI/MPICH over host buffers; chosen when the environment shows
 *         a launcher (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK, SLURM_NTASKS>1).
 *
 * Every collective is wrapped by comm.c in watchdog_enter/leave, so a rank
 * that never arrives turns into a failed job, not a hang. Buffers are host
 * memory for self and mpi; a device implementation documents its own. All
 * ranks must call a collective with the same arguments (except allgatherv's
 * send count). Reductions are in-place. */
#ifndef PLUMB_COMM_H
#define PLUMB_COMM_H
#include <stddef.h>
#include <stdint.h>
#include "core/dtype.h"
#include "core/err.h"

enum comm_op { COMM_SUM = 0, COMM_MAX = 1, COMM_MIN = 2 };

struct comm;

struct comm_ops {
    const char *name; /* "self", "mpi", "nccl" */
    /* In place on buf[n] of type t: SUM for DT_F32/DT_F64/DT_I64, MAX/MIN for
     * DT_U32/DT_I64/DT_F64. */
    int (*allreduce)(struct comm *c, void *buf, size_t n, dtype_t t, enum comm_op op,
                     plumb_err *e);
    /* bytes of buf from root to everyone */
    int (*broadcast)(struct comm *c, void *buf, size_t bytes, int root, plumb_err *e);
    /* recv[world * bytes] = concatenation of every rank's send[bytes], by rank */
    int (*allgather)(struct comm *c, const void *send, size_t bytes, void *recv, plumb_err *e);
    /* recv = concatenation by rank of send buffers of counts[r] bytes each;
     * counts[world] must be known on every rank (allgather them first). */
    int (*allgatherv)(struct comm *c, const void *send, size_t bytes, void *recv,
                      const size_t *counts, plumb_err *e);
    int (*barrier)(struct comm *c, plumb_err *e);
    /* Ends every rank of the job now with status code (never returns). */
    void (*abort)(struct comm *c, int code);
    void (*finalize)(struct comm *c);
};

struct comm {
    const struct comm_ops *ops;
    int rank, world;             /* global */
    int local_rank, local_world; /* on this host (for device selection) */
    void *impl;
};

/* kind: "auto" (mpi when launched by mpirun/srun, else self), "self", "mpi". */
int comm_init(const char *kind, struct comm **out, plumb_err *e);
void comm_finalize(struct comm *c);
/* 1 when the environment says a launcher started us with several ranks. */
int comm_launched_by_mpi(void);

/* Wrappers that run the implementation under the watchdog; what names the
 * collective in a watchdog report (may be NULL). */
int comm_allreduce(struct comm *c, void *buf, size_t n, dtype_t t, enum comm_op op,
                   const char *what, plumb_err *e);
int comm_broadcast(struct comm *c, void *buf, size_t bytes, int root, const char *what,
                   plumb_err *e);
int comm_allgather(struct comm *c, const void *send, size_t bytes, void *recv,
                   const char *what, plumb_err *e);
/* Gathers variable-size contributions: exchanges the sizes first, then the
 * data. *recv is malloc'ed (caller frees), *total its size in bytes; counts
 * (optional, world entries) receives each rank's size. */
int comm_allgatherv_alloc(struct comm *c, const void *send, size_t bytes, void **recv,
                          size_t *total, size_t *counts, const char *what, plumb_err *e);
int comm_barrier(struct comm *c, const char *what, plumb_err *e);
void comm_abort(struct comm *c, int code);

/* Implementations (comm_self.c, comm_mpi.c). */
int comm_self_init(struct comm *c, plumb_err *e);
int comm_mpi_init(struct comm *c, plumb_err *e);

#endif
