/* Comm handles (host and device) and the collective entry points: argument
 * checks, then the implementation under the watchdog. */
#include "comm/comm.h"
#include "core/log.h"
#include "core/watchdog.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int env_int(const char *name, int def)
{
    const char *v = getenv(name);
    if (!v || !*v) return def;
    char *end;
    long x = strtol(v, &end, 10);
    return (*end || x < 0 || x > 1 << 24) ? def : (int)x;
}

int comm_launched_by_mpi(void)
{
    /* OpenMPI, MPICH/Hydra (PMI), PMIx (srun --mpi=pmix), Slurm */
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_NTASKS",
                                 "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (!v || !*v) continue;
        /* srun of one task with no MPI: stay self; PMIX_RANK alone is enough */
        if (!strcmp(vars[i], "SLURM_NTASKS") && env_int(vars[i], 1) <= 1) continue;
        return 1;
    }
    return 0;
}

int comm_init(const char *kind, struct comm **out, plumb_err *e)
{
    *out = NULL;
    if (!kind || !*kind) kind = "auto";
    int use_mpi;
    if (!strcmp(kind, "auto")) use_mpi = comm_launched_by_mpi();
    else if (!strcmp(kind, "mpi")) use_mpi = 1;
    else if (!strcmp(kind, "self")) use_mpi = 0;
    else return err_set(e, PLUMB_EUSAGE, "comm: '%s' is not one of auto|self|mpi", kind);
    struct comm *c = calloc(1, sizeof *c);
    if (!c) return err_set(e, PLUMB_ENOMEM, "comm: out of memory");
    int rc = use_mpi ? comm_mpi_init(c, e) : comm_self_init(c, e);
    if (rc) {
        free(c);
        return rc;
    }
    /* Local rank: from the launcher when it says, else what the
     * implementation found (self: 0 of 1; mpi: ranks sharing memory). */
    int lr = env_int("OMPI_COMM_WORLD_LOCAL_RANK", -1);
    if (lr < 0) lr = env_int("MPI_LOCALRANKID", -1);
    if (lr < 0) lr = env_int("SLURM_LOCALID", -1);
    int lw = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", -1);
    if (lw < 0) lw = env_int("MPI_LOCALNRANKS", -1);
    if (lr >= 0) c->local_rank = lr;
    if (lw > 0) c->local_world = lw;
    if (c->local_world <= 0) c->local_world = 1;
    if (!c->desc[0]) snprintf(c->desc, sizeof c->desc, "%s, rank %d of %d", c->ops->name, c->rank, c->world);
    *out = c;
    return PLUMB_OK;
}

static int is_gpu(const struct dev *d) { return !strcmp(d->be->name, "cuda") || !strcmp(d->be->name, "hip"); }

int comm_open_device(struct comm *host, struct dev *d, const char *kind, double timeout_s, struct comm **out,
                     plumb_err *e)
{
    *out = NULL;
    if (!kind || !*kind) kind = "auto";
    if (strcmp(kind, "auto") && strcmp(kind, "nccl") && strcmp(kind, "host"))
        return err_set(e, PLUMB_EUSAGE, "device comm: '%s' is not one of auto|nccl|host", kind);
    if (host->dev) return err_set(e, PLUMB_EINTERNAL, "device comm: the comm under it must be a host comm");
    int nccl = !strcmp(kind, "nccl"), rc;
    if (nccl && !is_gpu(d))
        return err_set(e, PLUMB_EUSAGE, "nccl: device %s is not a cuda or hip device", d->label);
    if (!strcmp(kind, "auto") && is_gpu(d)) {
        plumb_err le = {0};
        uint32_t v = comm_nccl_load(d->be->name, NULL, 0, &le) == PLUMB_OK;
        /* every rank must take the same path */
        if ((rc = comm_allreduce(host, &v, 1, DT_U32, COMM_MIN, "nccl availability", e))) return rc;
        nccl = (int)v;
        if (!nccl && host->rank == 0) log_info("device comm: staged through host memory (%s)", le.msg[0] ? le.msg : "NCCL/RCCL does not load on every rank");
    }
    struct comm *c = calloc(1, sizeof *c);
    if (!c) return err_set(e, PLUMB_ENOMEM, "comm: out of memory");
    c->rank = host->rank, c->world = host->world;
    c->local_rank = host->local_rank, c->local_world = host->local_world;
    c->dev = d;
    rc = nccl ? comm_nccl_init(c, host, d, timeout_s, e) : comm_staged_init(c, host, d, e);
    if (rc) {
        free(c);
        return rc;
    }
    *out = c;
    return PLUMB_OK;
}

void comm_finalize(struct comm *c)
{
    if (!c) return;
    if (c->ops && c->ops->finalize) c->ops->finalize(c);
    free(c);
}

/* ---- argument checks ---- */

const char *comm_coll_name(enum comm_coll coll)
{
    static const char *n[] = {"allreduce", "broadcast", "reduce", "allgather", "reduce-scatter", "alltoall"};
    return (unsigned)coll < COMM_COLL_N ? n[coll] : "?";
}

const char *comm_op_name(enum comm_op op)
{
    static const char *n[] = {"sum", "max", "min"};
    return (unsigned)op < COMM_OP_N ? n[op] : "?";
}

static int is_reduction(enum comm_coll coll)
{
    return coll == COMM_ALLREDUCE || coll == COMM_REDUCE || coll == COMM_REDUCE_SCATTER;
}

void comm_args_sizes(const struct comm *c, const struct comm_args *a, size_t *send_elems, size_t *recv_elems)
{
    size_t n = a->count, w = (size_t)c->world;
    size_t s = n, r = n;
    switch (a->coll) {
    case COMM_ALLREDUCE: break;
    case COMM_BROADCAST: s = c->rank == a->root ? n : 0; break;
    case COMM_REDUCE: r = c->rank == a->root ? n : 0; break;
    case COMM_ALLGATHER: r = n * w; break;
    case COMM_REDUCE_SCATTER: s = n * w; break;
    case COMM_ALLTOALL: s = r = n * w; break;
    default: s = r = 0;
    }
    if (send_elems) *send_elems = s;
    if (recv_elems) *recv_elems = r;
}

int comm_supports(const struct comm *c, enum comm_coll coll, dtype_t t, enum comm_op op)
{
    if ((unsigned)coll >= COMM_COLL_N || (unsigned)t > DT_U32) return 0;
    if (is_reduction(coll) && (unsigned)op >= COMM_OP_N) return 0;
    return c->ops->supports(c, coll, t, op);
}

static int check_args(const struct comm *c, const struct comm_args *a, plumb_err *e)
{
    const char *cn = comm_coll_name(a->coll);
    if ((unsigned)a->coll >= COMM_COLL_N) return err_set(e, PLUMB_EINTERNAL, "comm: collective %d unknown", (int)a->coll);
    if ((unsigned)a->dtype > DT_U32) return err_set(e, PLUMB_EINTERNAL, "%s: dtype %d unknown", cn, (int)a->dtype);
    if ((a->coll == COMM_BROADCAST || a->coll == COMM_REDUCE) && (a->root < 0 || a->root >= c->world))
        return err_set(e, PLUMB_EINTERNAL, "%s: root %d outside 0..%d", cn, a->root, c->world - 1);
    if (!comm_supports(c, a->coll, a->dtype, a->op)) {
        if (is_reduction(a->coll))
            return err_set(e, PLUMB_EUNSUPPORTED, "%s: %s of %s not supported by %s", cn, comm_op_name(a->op),
                           dtype_name(a->dtype), c->ops->name);
        return err_set(e, PLUMB_EUNSUPPORTED, "%s of %s not supported by %s", cn, dtype_name(a->dtype), c->ops->name);
    }
    if (a->coll == COMM_ALLTOALL && a->count) {
        size_t bytes = a->count * (size_t)c->world * dtype_size(a->dtype);
        const char *s = a->send, *r = a->recv;
        if (s < r + bytes && r < s + bytes)
            return err_set(e, PLUMB_EUSAGE, "alltoall: send and recv buffers overlap (it is out of place only)");
    }
    return PLUMB_OK;
}

/* ---- collectives ---- */

int comm_start(struct comm *c, const struct comm_args *a, dev_stream *after, const char *what, plumb_err *e)
{
    int rc = check_args(c, a, e);
    if (rc) return rc;
    watchdog_enter(what ? what : comm_coll_name(a->coll));
    rc = c->ops->start(c, a, after, e);
    watchdog_leave();
    return rc;
}

int comm_wait(struct comm *c, const char *what, plumb_err *e)
{
    if (!c->ops->wait) return PLUMB_OK;
    watchdog_enter(what ? what : "wait for collectives");
    int rc = c->ops->wait(c, e);
    watchdog_leave();
    return rc;
}

int comm_run(struct comm *c, const struct comm_args *a, const char *what, plumb_err *e)
{
    int rc = comm_start(c, a, NULL, what, e);
    return rc ? rc : comm_wait(c, what, e);
}

int comm_allreduce(struct comm *c, void *buf, size_t n, dtype_t t, enum comm_op op, const char *what, plumb_err *e)
{
    struct comm_args a = {.coll = COMM_ALLREDUCE, .send = buf, .recv = buf, .count = n, .dtype = t, .op = op};
    return comm_run(c, &a, what ? what : "allreduce", e);
}

int comm_allreduce_start(struct comm *c, void *buf, size_t n, dtype_t t, enum comm_op op, dev_stream *after,
                         const char *what, plumb_err *e)
{
    struct comm_args a = {.coll = COMM_ALLREDUCE, .send = buf, .recv = buf, .count = n, .dtype = t, .op = op};
    return comm_start(c, &a, after, what ? what : "allreduce", e);
}

int comm_sum_i64(struct comm *c, int64_t *buf, size_t n, const char *what, plumb_err *e)
{
    return comm_allreduce(c, buf, n, DT_I64, COMM_SUM, what ? what : "allreduce int64 (exact)", e);
}

int comm_broadcast(struct comm *c, void *buf, size_t bytes, int root, const char *what, plumb_err *e)
{
    struct comm_args a = {.coll = COMM_BROADCAST, .send = buf, .recv = buf, .count = bytes, .dtype = DT_U8, .root = root};
    return comm_run(c, &a, what ? what : "broadcast", e);
}

int comm_allgather(struct comm *c, const void *send, size_t bytes, void *recv, const char *what, plumb_err *e)
{
    struct comm_args a = {.coll = COMM_ALLGATHER, .send = send, .recv = recv, .count = bytes, .dtype = DT_U8};
    return comm_run(c, &a, what ? what : "allgather", e);
}

int comm_allgatherv_alloc(struct comm *c, const void *send, size_t bytes, void **recv, size_t *total, size_t *counts,
                          const char *what, plumb_err *e)
{
    *recv = NULL;
    *total = 0;
    if (!c->ops->allgatherv || (c->dev && strcmp(c->dev->be->name, "cpu")))
        return err_set(e, PLUMB_EUNSUPPORTED, "allgatherv: %s gathers host memory only (this comm serves %s)",
                       c->ops->name, c->dev ? c->dev->label : "?");
    size_t *cnt = calloc((size_t)c->world, sizeof *cnt);
    uint64_t *all = calloc((size_t)c->world, sizeof *all);
    if (!cnt || !all) {
        free(cnt), free(all);
        return err_set(e, PLUMB_ENOMEM, "allgatherv: out of memory");
    }
    uint64_t mine = bytes;
    watchdog_enter(what ? what : "allgatherv");
    struct comm_args a = {.coll = COMM_ALLGATHER, .send = &mine, .recv = all, .count = 1, .dtype = DT_I64};
    int rc = c->ops->start(c, &a, NULL, e);
    if (!rc && c->ops->wait) rc = c->ops->wait(c, e);
    size_t sum = 0;
    for (int r = 0; r < c->world; r++) sum += (cnt[r] = (size_t)all[r]);
    void *buf = NULL;
    if (!rc) {
        buf = malloc(sum ? sum : 1);
        if (!buf) rc = err_set(e, PLUMB_ENOMEM, "allgatherv: cannot allocate %zu bytes", sum);
    }
    if (!rc) rc = c->ops->allgatherv(c, send, bytes, buf, cnt, e);
    watchdog_leave();
    if (rc) {
        free(buf);
    } else {
        *recv = buf;
        *total = sum;
        if (counts) memcpy(counts, cnt, (size_t)c->world * sizeof *cnt);
    }
    free(cnt);
    free(all);
    return rc;
}

int comm_barrier(struct comm *c, const char *what, plumb_err *e)
{
    watchdog_enter(what ? what : "barrier");
    int rc = c->ops->barrier(c, e);
    watchdog_leave();
    return rc;
}

int comm_arrive(struct comm *c, const char *what, double timeout_s, int *missing, int max, int *nmissing,
                plumb_err *e)
{
    *nmissing = 0;
    if (c->dev) return err_set(e, PLUMB_EINTERNAL, "comm_arrive: %s is a device comm (use its host comm)", c->desc);
    if (!what) what = "arrival";
    if (!(timeout_s > 0) || !c->ops->arrive) return comm_barrier(c, what, e);
    /* the implementation ends within timeout_s; the watchdog only guards a bug in it */
    watchdog_enter(what);
    int rc = c->ops->arrive(c, timeout_s, missing, max, nmissing, e);
    watchdog_leave();
    if (rc == PLUMB_ETIMEOUT) err_wrap(e, "%s", what);
    return rc;
}

void comm_abort(struct comm *c, int code)
{
    if (c && c->ops && c->ops->abort) c->ops->abort(c, code);
    _Exit(code);
}
