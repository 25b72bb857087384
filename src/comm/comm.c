/* Comm handle creation and the watchdog-wrapped collective entry points. */
#include "comm/comm.h"
#include "train/watchdog.h"
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
    /* Local rank: from the launcher when it says, else the global rank for
     * one host (self) or rank modulo nothing known (MPI computes it). */
    int lr = env_int("OMPI_COMM_WORLD_LOCAL_RANK", -1);
    if (lr < 0) lr = env_int("MPI_LOCALRANKID", -1);
    if (lr < 0) lr = env_int("SLURM_LOCALID", -1);
    int lw = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", -1);
    if (lw < 0) lw = env_int("MPI_LOCALNRANKS", -1);
    if (lr >= 0) c->local_rank = lr;
    if (lw > 0) c->local_world = lw;
    if (c->local_world <= 0) c->local_world = 1;
    *out = c;
    return PLUMB_OK;
}

void comm_finalize(struct comm *c)
{
    if (!c) return;
    if (c->ops && c->ops->finalize) c->ops->finalize(c);
    free(c);
}

int comm_allreduce(struct comm *c, void *buf, size_t n, dtype_t t, enum comm_op op,
                   const char *what, plumb_err *e)
{
    watchdog_enter(what ? what : "allreduce");
    int rc = c->ops->allreduce(c, buf, n, t, op, e);
    watchdog_leave();
    return rc;
}

int comm_broadcast(struct comm *c, void *buf, size_t bytes, int root, const char *what,
                   plumb_err *e)
{
    if (root < 0 || root >= c->world)
        return err_set(e, PLUMB_EINTERNAL, "broadcast: root %d outside 0..%d", root, c->world - 1);
    watchdog_enter(what ? what : "broadcast");
    int rc = c->ops->broadcast(c, buf, bytes, root, e);
    watchdog_leave();
    return rc;
}

int comm_allgather(struct comm *c, const void *send, size_t bytes, void *recv,
                   const char *what, plumb_err *e)
{
    watchdog_enter(what ? what : "allgather");
    int rc = c->ops->allgather(c, send, bytes, recv, e);
    watchdog_leave();
    return rc;
}

int comm_allgatherv_alloc(struct comm *c, const void *send, size_t bytes, void **recv,
                          size_t *total, size_t *counts, const char *what, plumb_err *e)
{
    *recv = NULL;
    *total = 0;
    size_t *cnt = calloc((size_t)c->world, sizeof *cnt);
    if (!cnt) return err_set(e, PLUMB_ENOMEM, "allgatherv: out of memory");
    uint64_t mine = bytes;
    uint64_t *all = calloc((size_t)c->world, sizeof *all);
    if (!all) {
        free(cnt);
        return err_set(e, PLUMB_ENOMEM, "allgatherv: out of memory");
    }
    watchdog_enter(what ? what : "allgatherv");
    int rc = c->ops->allgather(c, &mine, sizeof mine, all, e);
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

void comm_abort(struct comm *c, int code)
{
    if (c && c->ops && c->ops->abort) c->ops->abort(c, code);
    _Exit(code);
}
