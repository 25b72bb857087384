/* A stand-in NCCL/RCCL for tests (PLUMB_NCCL_LIB=build/tests/libfake_nccl.so):
 * the functions src/comm/comm_nccl.c dlopens, with the C API's shapes, over
 * the cpu device (device memory is host memory) and real MPI ranks: the
 * collectives are MPI_Allreduce / MPI_Allgather on MPI_COMM_WORLD (the
 * process already runs MPI through plumb's host comm; a single process uses
 * copies). The communicator is non-blocking the way NCCL's is: init and
 * finalize answer ncclInProgress and settle after a few polls of
 * ncclCommGetAsyncError. Knobs, read on every call:
 *   FAKE_NCCL_VERSION   the version code (default 21903, 2.19.3)
 *   FAKE_NCCL_ASYNC_ERROR=N  after N collectives the async error turns to
 *                       ncclSystemError (a peer died)
 * Counters for the test: fake_nccl_aborts() (ncclCommAbort calls),
 * fake_nccl_collectives(). */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    char internal[128];
} ncclUniqueId;
enum { SUCCESS = 0, SYSTEM_ERROR = 2, INVALID_ARGUMENT = 4, IN_PROGRESS = 7 };
enum { T_UINT8 = 1, T_INT64 = 4, T_FLOAT32 = 7, T_FLOAT64 = 8 };
typedef struct {
    size_t size;
    unsigned int magic, version;
    int blocking, cgaClusterSize, minCTAs, maxCTAs;
    const char *netName;
} ncclConfig_t;

struct fake_comm {
    int rank, nranks, pending; /* pending: polls until an init/finalize settles */
    int aborted;
    ncclUniqueId id;
};
static int g_aborts, g_collectives, g_ids;

int fake_nccl_aborts(void) { return g_aborts; }
int fake_nccl_collectives(void) { return g_collectives; }

static int env_int(const char *k, int def)
{
    const char *v = getenv(k);
    return v && *v ? atoi(v) : def;
}

int ncclGetVersion(int *v)
{
    *v = env_int("FAKE_NCCL_VERSION", 21903);
    return SUCCESS;
}

const char *ncclGetErrorString(int r)
{
    switch (r) {
    case SUCCESS: return "no error";
    case SYSTEM_ERROR: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case INVALID_ARGUMENT: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case IN_PROGRESS: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

int ncclGetUniqueId(ncclUniqueId *id)
{
    memset(id, 0, sizeof *id);
    snprintf(id->internal, sizeof id->internal, "fake-nccl-id pid %ld #%d", (long)getpid(), ++g_ids);
    return SUCCESS;
}

static int mpi_world(void)
{
    int ini = 0, n = 1;
    MPI_Initialized(&ini);
    if (ini) MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
}

int ncclCommInitRankConfig(struct fake_comm **out, int nranks, ncclUniqueId id, int rank, ncclConfig_t *cfg)
{
    if (!cfg || cfg->size < sizeof *cfg || cfg->magic != 0xcafebeefu || cfg->blocking != 0) return INVALID_ARGUMENT;
    if (nranks < 1 || rank < 0 || rank >= nranks || nranks != mpi_world()) return INVALID_ARGUMENT;
    if (nranks > 1) { /* every rank got rank 0's id */
        char *all = malloc((size_t)nranks * sizeof id.internal);
        if (!all) return SYSTEM_ERROR;
        MPI_Allgather(id.internal, (int)sizeof id.internal, MPI_BYTE, all, (int)sizeof id.internal, MPI_BYTE, MPI_COMM_WORLD);
        int same = 1;
        for (int r = 0; r < nranks; r++) same &= !memcmp(all + (size_t)r * sizeof id.internal, id.internal, sizeof id.internal);
        free(all);
        if (!same) return INVALID_ARGUMENT;
    }
    if (!strstr(id.internal, "fake-nccl-id")) return INVALID_ARGUMENT;
    struct fake_comm *c = calloc(1, sizeof *c);
    if (!c) return SYSTEM_ERROR;
    c->rank = rank;
    c->nranks = nranks;
    c->id = id;
    c->pending = 3;
    *out = c;
    return IN_PROGRESS;
}

int ncclCommGetAsyncError(struct fake_comm *c, int *st)
{
    if (!c) return INVALID_ARGUMENT;
    int after = env_int("FAKE_NCCL_ASYNC_ERROR", -1);
    if (c->pending > 0) {
        c->pending--;
        *st = IN_PROGRESS;
    } else if (after >= 0 && g_collectives >= after) {
        *st = SYSTEM_ERROR;
    } else {
        *st = SUCCESS;
    }
    return SUCCESS;
}

int ncclCommAbort(struct fake_comm *c)
{
    if (!c) return INVALID_ARGUMENT;
    g_aborts++;
    c->aborted = 1;
    return SUCCESS;
}

int ncclCommFinalize(struct fake_comm *c)
{
    if (!c || c->aborted) return INVALID_ARGUMENT;
    c->pending = 2;
    return IN_PROGRESS;
}

int ncclCommDestroy(struct fake_comm *c)
{
    free(c);
    return SUCCESS;
}

static int mpi_type(int t, MPI_Datatype *m, size_t *es)
{
    switch (t) {
    case T_FLOAT32: *m = MPI_FLOAT; *es = 4; return 1;
    case T_FLOAT64: *m = MPI_DOUBLE; *es = 8; return 1;
    case T_INT64: *m = MPI_INT64_T; *es = 8; return 1;
    case T_UINT8: *m = MPI_BYTE; *es = 1; return 1;
    default: return 0;
    }
}

int ncclAllReduce(const void *send, void *recv, size_t count, int type, int op, struct fake_comm *c, void *stream)
{
    (void)stream; /* synchronous: done when it returns, the stream is idle */
    MPI_Datatype mt;
    size_t es;
    if (!c || c->aborted || op != 0 || !mpi_type(type, &mt, &es) || type == T_UINT8) return INVALID_ARGUMENT;
    g_collectives++;
    if (c->nranks == 1) {
        if (send != recv) memmove(recv, send, count * es);
        return SUCCESS;
    }
    int rc = MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, (int)count, mt, MPI_SUM, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? SUCCESS : SYSTEM_ERROR;
}

int ncclAllGather(const void *send, void *recv, size_t count, int type, struct fake_comm *c, void *stream)
{
    (void)stream;
    MPI_Datatype mt;
    size_t es;
    if (!c || c->aborted || !mpi_type(type, &mt, &es)) return INVALID_ARGUMENT;
    g_collectives++;
    if (c->nranks == 1) {
        memmove(recv, send, count * es);
        return SUCCESS;
    }
    int rc = MPI_Allgather(send, (int)count, mt, recv, (int)count, mt, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? SUCCESS : SYSTEM_ERROR;
}
