/* MPI collectives over host memory. MPI is initialised once per process
 * (MPI_THREAD_FUNNELED: only the main thread calls MPI; the data loader
 * thread never does) and finalised at exit. bf16 and fp16 reductions use
 * our own MPI operations (MPI has no such types); the rest map to MPI's. */
#include "comm/comm.h"
#include "core/log.h"
#include "core/timer.h"
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int mpi_inited_here;
/* comm_arrive's own communicators (duplicates of MPI_COMM_WORLD, so its
 * messages never match anything else): the barrier, then the roll call
 * after a timeout */
static MPI_Comm g_arrive_comm = MPI_COMM_NULL, g_roll_comm = MPI_COMM_NULL;
/* user operations for [bf16, fp16][sum, max, min] (created at init) */
static MPI_Op g_half_ops[2][COMM_OP_N];
static int g_half_ops_made;

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

/* MPI_Datatype of one element; bf16/fp16 travel as 16-bit words */
static MPI_Datatype mpi_type(dtype_t t)
{
    switch (t) {
    case DT_F32: return MPI_FLOAT;
    case DT_F64: return MPI_DOUBLE;
    case DT_I64: return MPI_INT64_T;
    case DT_U32: return MPI_UINT32_T;
    case DT_I32: return MPI_INT32_T;
    case DT_U8: return MPI_UINT8_T;
    case DT_BF16:
    case DT_F16: return MPI_UINT16_T;
    }
    return MPI_DATATYPE_NULL;
}

#define HALF_FN(name, T, OP)                                                                                           \
    static void name(void *in, void *inout, int *len, MPI_Datatype *dt)                                                \
    {                                                                                                                  \
        (void)dt;                                                                                                      \
        comm_host_reduce(inout, in, (size_t)*len, T, OP);                                                              \
    }
HALF_FN(bf16_sum, DT_BF16, COMM_SUM)
HALF_FN(bf16_max, DT_BF16, COMM_MAX)
HALF_FN(bf16_min, DT_BF16, COMM_MIN)
HALF_FN(f16_sum, DT_F16, COMM_SUM)
HALF_FN(f16_max, DT_F16, COMM_MAX)
HALF_FN(f16_min, DT_F16, COMM_MIN)

static MPI_Op mpi_op(dtype_t t, enum comm_op op)
{
    if (t == DT_BF16 || t == DT_F16) return g_half_ops_made ? g_half_ops[t == DT_F16][op] : MPI_OP_NULL;
    return op == COMM_SUM ? MPI_SUM : op == COMM_MAX ? MPI_MAX : op == COMM_MIN ? MPI_MIN : MPI_OP_NULL;
}

static int m_supports(const struct comm *c, enum comm_coll coll, dtype_t t, enum comm_op op)
{
    (void)c;
    if (mpi_type(t) == MPI_DATATYPE_NULL) return 0;
    if (coll == COMM_ALLREDUCE || coll == COMM_REDUCE || coll == COMM_REDUCE_SCATTER)
        return (unsigned)op < COMM_OP_N && mpi_op(t, op) != MPI_OP_NULL;
    return 1;
}

/* MPI counts are int: reductions and broadcasts go in chunks of at most 2^30
 * elements; the gathers and all-to-all must fit in one call. */
#define CHUNK ((size_t)1 << 30)

static int fits_int(size_t n, const char *what, plumb_err *e)
{
    if (n <= INT_MAX) return PLUMB_OK;
    return err_set(e, PLUMB_EUNSUPPORTED, "%s: %zu elements per call is more than MPI's int counts allow", what, n);
}

static int m_start(struct comm *c, const struct comm_args *a, dev_stream *after, plumb_err *e)
{
    (void)after;
    MPI_Datatype mt = mpi_type(a->dtype);
    MPI_Op mo = mpi_op(a->dtype, a->op);
    size_t es = dtype_size(a->dtype), n = a->count, w = (size_t)c->world;
    const char *s = a->send;
    char *r = a->recv;
    int rc = MPI_SUCCESS;
    switch (a->coll) {
    case COMM_ALLREDUCE:
        for (size_t off = 0; off < n && rc == MPI_SUCCESS; off += CHUNK) {
            int k = (int)(n - off < CHUNK ? n - off : CHUNK);
            rc = MPI_Allreduce(s == r ? MPI_IN_PLACE : s + off * es, r + off * es, k, mt, mo, MPI_COMM_WORLD);
        }
        return rc == MPI_SUCCESS ? PLUMB_OK : mpi_fail(e, "Allreduce", rc);
    case COMM_REDUCE:
        for (size_t off = 0; off < n && rc == MPI_SUCCESS; off += CHUNK) {
            int k = (int)(n - off < CHUNK ? n - off : CHUNK);
            int inplace = c->rank == a->root && s == r;
            rc = MPI_Reduce(inplace ? MPI_IN_PLACE : s + off * es, r ? r + off * es : NULL, k, mt, mo, a->root,
                            MPI_COMM_WORLD);
        }
        return rc == MPI_SUCCESS ? PLUMB_OK : mpi_fail(e, "Reduce", rc);
    case COMM_BROADCAST:
        if (c->rank == a->root && s != r && n) memmove(r, s, n * es);
        for (size_t off = 0; off < n * es && rc == MPI_SUCCESS; off += CHUNK) {
            int k = (int)(n * es - off < CHUNK ? n * es - off : CHUNK);
            rc = MPI_Bcast(r + off, k, MPI_BYTE, a->root, MPI_COMM_WORLD);
        }
        return rc == MPI_SUCCESS ? PLUMB_OK : mpi_fail(e, "Bcast", rc);
    case COMM_ALLGATHER: {
        if ((rc = fits_int(n * w * es, "allgather", e))) return rc;
        int inplace = s == r + (size_t)c->rank * n * es;
        rc = MPI_Allgather(inplace ? MPI_IN_PLACE : s, (int)(n * es), MPI_BYTE, r, (int)(n * es), MPI_BYTE,
                           MPI_COMM_WORLD);
        return rc == MPI_SUCCESS ? PLUMB_OK : mpi_fail(e, "Allgather", rc);
    }
    case COMM_REDUCE_SCATTER: {
        if ((rc = fits_int(n * w, "reduce-scatter", e))) return rc;
        /* MPI's in-place form keeps the result at the start of the buffer,
         * NCCL's at block `rank`: an overlapping call reduces from a copy */
        const char *src = s;
        char *tmp = NULL;
        if (n && r < s + n * w * es && s < r + n * es) {
            if (!(tmp = malloc(n * w * es))) return err_set(e, PLUMB_ENOMEM, "reduce-scatter: out of memory");
            memcpy(tmp, s, n * w * es);
            src = tmp;
        }
        rc = MPI_Reduce_scatter_block(src, r, (int)n, mt, mo, MPI_COMM_WORLD);
        free(tmp);
        return rc == MPI_SUCCESS ? PLUMB_OK : mpi_fail(e, "Reduce_scatter_block", rc);
    }
    case COMM_ALLTOALL:
        if ((rc = fits_int(n * w * es, "alltoall", e))) return rc;
        rc = MPI_Alltoall(s, (int)(n * es), MPI_BYTE, r, (int)(n * es), MPI_BYTE, MPI_COMM_WORLD);
        return rc == MPI_SUCCESS ? PLUMB_OK : mpi_fail(e, "Alltoall", rc);
    default: return err_set(e, PLUMB_EINTERNAL, "mpi: collective %d unknown", (int)a->coll);
    }
}

static int m_allgatherv(struct comm *c, const void *send, size_t bytes, void *recv, const size_t *counts,
                        plumb_err *e)
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

static void nap_us(long us)
{
    struct timespec ts = {0, us * 1000L};
    nanosleep(&ts, NULL);
}

/* comm_arrive: a non-blocking barrier polled until timeout - grace; when it
 * has not completed by then, a roll call: every rank that got here sends its
 * rank to every other rank and listens for the grace period; whoever it did
 * not hear from is missing. Live ranks reach the roll call within a grace
 * period of each other (they left the previous meeting together and wait
 * the same time), so one that is merely slow, not hung, is still heard. */
static int m_arrive(struct comm *c, double timeout_s, int *missing, int max, int *nmissing, plumb_err *e)
{
    *nmissing = 0;
    if (c->world <= 1) return PLUMB_OK;
    double grace = timeout_s / 4 < 1.0 ? timeout_s / 4 : 1.0;
    double t0 = timer_now(), deadline = t0 + timeout_s - grace;
    MPI_Request req;
    int rc = MPI_Ibarrier(g_arrive_comm, &req);
    if (rc != MPI_SUCCESS) return mpi_fail(e, "Ibarrier", rc);
    long us = 5;
    for (;;) {
        int done = 0;
        if ((rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE)) != MPI_SUCCESS) return mpi_fail(e, "Test", rc);
        if (done) return PLUMB_OK;
        if (timer_now() >= deadline) break;
        nap_us(us);
        if (us < 200) us *= 2; /* quick for a short wait, cheap for a long one */
    }
    /* roll call; the barrier request stays pending (the job is over) */
    int W = c->world, me = c->rank;
    int *heard = calloc((size_t)W, sizeof *heard), *from = calloc((size_t)W, sizeof *from);
    MPI_Request *rq = calloc((size_t)W * 2, sizeof *rq);
    if (!heard || !from || !rq) {
        free(heard), free(from), free(rq);
        return err_set(e, PLUMB_ENOMEM, "arrive: out of memory");
    }
    for (int r = 0; r < W; r++) {
        rq[r] = rq[W + r] = MPI_REQUEST_NULL;
        if (r == me) continue;
        MPI_Irecv(&from[r], 1, MPI_INT, r, 0, g_roll_comm, &rq[r]);
        MPI_Isend(&me, 1, MPI_INT, r, 0, g_roll_comm, &rq[W + r]);
    }
    heard[me] = 1;
    double end = timer_now() + grace;
    int nheard = 1;
    while (nheard < W && timer_now() < end) {
        for (int r = 0; r < W; r++) {
            if (heard[r] || rq[r] == MPI_REQUEST_NULL) continue;
            int done = 0;
            if (MPI_Test(&rq[r], &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done) heard[r] = 1, nheard++;
        }
        nap_us(200);
    }
    char gone[256] = "", here[256] = "";
    size_t gl = 0, hl = 0;
    for (int r = 0; r < W; r++) {
        if (heard[r]) {
            if (hl < sizeof here) hl += (size_t)snprintf(here + hl, sizeof here - hl, "%s%d", hl ? ", " : "", r);
            continue;
        }
        if (*nmissing < max) missing[*nmissing] = r;
        (*nmissing)++;
        if (gl < sizeof gone) gl += (size_t)snprintf(gone + gl, sizeof gone - gl, "%s%d", gl ? ", " : "", r);
        if (rq[r] != MPI_REQUEST_NULL) {
            MPI_Cancel(&rq[r]);
            MPI_Request_free(&rq[r]);
        }
    }
    /* sends to a rank that never listens may stay pending: let them go */
    for (int r = 0; r < W; r++)
        if (rq[W + r] != MPI_REQUEST_NULL) MPI_Request_free(&rq[W + r]);
    int n = *nmissing;
    free(heard), free(from), free(rq);
    if (!n) {
        /* everyone answered the roll call: late, but here, so the barrier completes */
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        return rc == MPI_SUCCESS ? PLUMB_OK : mpi_fail(e, "Wait", rc);
    }
    return err_set(e, PLUMB_ETIMEOUT, "rank%s %s did not arrive within %.1f s (arrived: %s)", n > 1 ? "s" : "", gone,
                   timeout_s, here);
}

static void m_abort(struct comm *c, int code)
{
    (void)c;
    MPI_Abort(MPI_COMM_WORLD, code);
    _Exit(code);
}

static const struct comm_ops mpi_ops = {
    .name = "mpi",
    .supports = m_supports,
    .start = m_start,
    .wait = NULL,
    .allgatherv = m_allgatherv,
    .barrier = m_barrier,
    .arrive = m_arrive,
    .abort = m_abort,
    .finalize = NULL, /* at exit, see mpi_at_exit */
};

static void make_half_ops(void)
{
    if (g_half_ops_made) return;
    MPI_User_function *fns[2][COMM_OP_N] = {{bf16_sum, bf16_max, bf16_min}, {f16_sum, f16_max, f16_min}};
    for (int t = 0; t < 2; t++)
        for (int o = 0; o < COMM_OP_N; o++)
            if (MPI_Op_create(fns[t][o], 1, &g_half_ops[t][o]) != MPI_SUCCESS) return;
    g_half_ops_made = 1;
}

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
    make_half_ops();
    if (g_arrive_comm == MPI_COMM_NULL) {
        int rc = MPI_Comm_dup(MPI_COMM_WORLD, &g_arrive_comm);
        if (rc == MPI_SUCCESS) rc = MPI_Comm_dup(MPI_COMM_WORLD, &g_roll_comm);
        if (rc != MPI_SUCCESS) return mpi_fail(e, "Comm_dup", rc);
        MPI_Comm_set_errhandler(g_arrive_comm, MPI_ERRORS_RETURN);
        MPI_Comm_set_errhandler(g_roll_comm, MPI_ERRORS_RETURN);
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
    char ver[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (MPI_Get_library_version(ver, &len) == MPI_SUCCESS) {
        ver[strcspn(ver, ",\n")] = '\0'; /* "Open MPI v4.1.4" */
        snprintf(c->desc, sizeof c->desc, "mpi (%s), rank %d of %d", ver, rank, world);
    }
    log_set_rank(rank, world);
    return PLUMB_OK;
}
