/* MPI collectives over host buffers. MPI is initialised once per process
 * (MPI_THREAD_FUNNELED: only the main thread calls MPI; the data loader
 * thread never does) and finalised at exit. */
#include "comm/comm.h"
#include "core/log.h"
#include <limits.h>
#include <stdio.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

static int mpi_inited_here;

static void mpi_at_exit(void)
{
    int fin = 0, ini = 0;
    MPI_Initialized(&ini);
    MPI_Finalized(&fin);
    if (ini && !fin && mpi_inited_here) MPI_Finalize();
}

static int mpi_fail(plumb_err *e, const char *what, int rc)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "code %d", rc);
    return err_set(e, PLUMB_EDEVICE, "MPI %s failed: %s", what, msg);
}

static int mpi_type(dtype_t t, MPI_Datatype *mt)
{
    switch (t) {
    case DT_F32: *mt = MPI_FLOAT; return 1;
    case DT_F64: *mt = MPI_DOUBLE; return 1;
    case DT_I64: *mt = MPI_INT64_T; return 1;
    case DT_U32: *mt = MPI_UINT32_T; return 1;
    case DT_I32: *mt = MPI_INT32_T; return 1;
    default: return 0;
    }
}

/* MPI counts are int: large buffers go in chunks of at most 2^30 elements. */
#define CHUNK ((size_t)1 << 30)

static int m_allreduce(struct comm *c, void *buf, size_t n, dtype_t t, enum comm_op op,
                       plumb_err *e)
{
    (void)c;
    MPI_Datatype mt;
    if (!mpi_type(t, &mt))
        return err_set(e, PLUMB_EUNSUPPORTED, "allreduce: type %s not supported", dtype_name(t));
    MPI_Op mo = op == COMM_SUM ? MPI_SUM : op == COMM_MAX ? MPI_MAX : op == COMM_MIN ? MPI_MIN : MPI_OP_NULL;
    if (mo == MPI_OP_NULL) return err_set(e, PLUMB_EUNSUPPORTED, "allreduce: op %d not supported", (int)op);
    char *p = buf;
    size_t es = dtype_size(t);
    for (size_t off = 0; off < n; off += CHUNK) {
        size_t k = n - off < CHUNK ? n - off : CHUNK;
        int rc = MPI_Allreduce(MPI_IN_PLACE, p + off * es, (int)k, mt, mo, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return mpi_fail(e, "Allreduce", rc);
    }
    return PLUMB_OK;
}

static int m_broadcast(struct comm *c, void *buf, size_t bytes, int root, plumb_err *e)
{
    (void)c;
    char *p = buf;
    for (size_t off = 0; off < bytes; off += CHUNK) {
        size_t k = bytes - off < CHUNK ? bytes - off : CHUNK;
        int rc = MPI_Bcast(p + off, (int)k, MPI_BYTE, root, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return mpi_fail(e, "Bcast", rc);
    }
    return PLUMB_OK;
}

static int m_allgather(struct comm *c, const void *send, size_t bytes, void *recv, plumb_err *e)
{
    if (bytes * (size_t)c->world > INT_MAX)
        return err_set(e, PLUMB_EUNSUPPORTED, "allgather: %zu bytes per rank is too large", bytes);
    int rc = MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return mpi_fail(e, "Allgather", rc);
    return PLUMB_OK;
}

static int m_allgatherv(struct comm *c, const void *send, size_t bytes, void *recv,
                        const size_t *counts, plumb_err *e)
{
    int *cnt = malloc((size_t)c->world * sizeof *cnt), *dis = malloc((size_t)c->world * sizeof *dis);
    if (!cnt || !dis) {
        free(cnt), free(dis);
        return err_set(e, PLUMB_ENOMEM, "allgatherv: out of memory");
    }
    size_t off = 0;
    for (int r = 0; r < c->world; r++) {
        if (off + counts[r] > INT_MAX) {
            free(cnt), free(dis);
            return err_set(e, PLUMB_EUNSUPPORTED, "allgatherv: %zu bytes in all is too large", off + counts[r]);
        }
        cnt[r] = (int)counts[r];
        dis[r] = (int)off;
        off += counts[r];
    }
    if (counts[c->rank] != bytes) {
        free(cnt), free(dis);
        return err_set(e, PLUMB_EINTERNAL, "allgatherv: count %zu != %zu bytes sent", counts[c->rank], bytes);
    }
    int rc = MPI_Allgatherv(send, (int)bytes, MPI_BYTE, recv, cnt, dis, MPI_BYTE, MPI_COMM_WORLD);
    free(cnt), free(dis);
    if (rc != MPI_SUCCESS) return mpi_fail(e, "Allgatherv", rc);
    return PLUMB_OK;
}

static int m_barrier(struct comm *c, plumb_err *e)
{
    (void)c;
    int rc = MPI_Barrier(MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return mpi_fail(e, "Barrier", rc);
    return PLUMB_OK;
}

static void m_abort(struct comm *c, int code)
{
    (void)c;
    MPI_Abort(MPI_COMM_WORLD, code);
    _Exit(code);
}

static void m_finalize(struct comm *c) { (void)c; /* at exit, see mpi_at_exit */ }

static const struct comm_ops mpi_ops = {
    .name = "mpi",
    .allreduce = m_allreduce,
    .broadcast = m_broadcast,
    .allgather = m_allgather,
    .allgatherv = m_allgatherv,
    .barrier = m_barrier,
    .abort = m_abort,
    .finalize = m_finalize,
};

int comm_mpi_init(struct comm *c, plumb_err *e)
{
    int ini = 0, fin = 0;
    MPI_Initialized(&ini);
    MPI_Finalized(&fin);
    if (fin) return err_set(e, PLUMB_EINTERNAL, "MPI was already finalised in this process");
    if (!ini) {
        int provided = 0;
        int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
        if (rc != MPI_SUCCESS) return mpi_fail(e, "Init_thread", rc);
        mpi_inited_here = 1;
        atexit(mpi_at_exit);
        /* errors come back as codes we turn into messages */
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    }
    int rank = 0, world = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    c->ops = &mpi_ops;
    c->rank = rank;
    c->world = world;
    /* ranks sharing memory = ranks on this host */
    MPI_Comm node;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_rank(node, &c->local_rank);
        MPI_Comm_size(node, &c->local_world);
        MPI_Comm_free(&node);
    } else {
        c->local_rank = rank;
        c->local_world = world;
    }
    log_set_rank(rank, world);
    return PLUMB_OK;
}
