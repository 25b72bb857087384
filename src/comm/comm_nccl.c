/* The nccl implementation of comm.h: NCCL (cuda backend) or RCCL (hip), the
 * same C API, loaded with dlopen (core/dynlib.h): libnccl.so.2 or
 * librccl.so.1, PLUMB_NCCL_LIB overriding the path. Our own declarations of
 * the functions used are below; the library's version is checked at load
 * (non-blocking communicators need 2.14.3).
 *
 * - The unique id is made on rank 0 and broadcast over the host comm (MPI
 *   under a launcher, self with one rank).
 * - The communicator is non-blocking (config.blocking = 0): every call that
 *   answers ncclInProgress is polled with ncclCommGetAsyncError, and every
 *   wait polls both the comm stream and the async error. A wait longer than
 *   the timeout, or an async error, aborts the communicator (ncclCommAbort in
 *   a helper thread, bounded to PLUMB_NCCL_ABORT_BOUND_S, default 10 s) and
 *   returns PLUMB_ETIMEOUT / PLUMB_EDEVICE, so the command exits non-zero; the
 *   process watchdog (core/watchdog.h) also gets an abort hook that aborts the
 *   communicator before it ends a hung process.
 * - Collectives run on the communicator's own stream: it first waits (on the
 *   device, no host block) for an event recorded on the stream that produced
 *   the data, so an all-reduce of a gradient bucket starts as soon as its
 *   layers are done while backward continues; wait joins them back into the
 *   default stream.
 * - Buffers are device memory of the device given at init; streams and
 *   events are reached through dev/dev.h only.
 * - ncclAlltoAll (NCCL 2.28) / ncclAllToAll (RCCL) when the library has one,
 *   else a group of ncclSend/ncclRecv (NCCL 2.7 and later). */
#include "comm/comm.h"
#include "core/dynlib.h"
#include "core/log.h"
#include "core/timer.h"
#include "core/watchdog.h"
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- our own declarations of the NCCL C API (nccl.h, the same in RCCL) ---- */
typedef struct nccl_comm_opaque *nc_comm_t;
typedef struct {
    char internal[128];
} nc_unique_id;
typedef int nc_result; /* ncclResult_t */
enum { NC_SUCCESS = 0, NC_INVALID_ARGUMENT = 4, NC_IN_PROGRESS = 7 };
/* ncclDataType_t */
enum { NC_INT8 = 0, NC_UINT8 = 1, NC_INT32 = 2, NC_UINT32 = 3, NC_INT64 = 4, NC_UINT64 = 5, NC_FLOAT16 = 6,
       NC_FLOAT32 = 7, NC_FLOAT64 = 8, NC_BFLOAT16 = 9 };
enum { NC_SUM = 0, NC_PROD = 1, NC_MAX = 2, NC_MIN = 3 }; /* ncclRedOp_t */
/* ncclConfig_t of NCCL 2.14.3, the oldest layout with `blocking`; newer
 * libraries read a config by its size, magic and version fields and take
 * the defaults for the fields this layout lacks. */
typedef struct {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking, cgaClusterSize, minCTAs, maxCTAs;
    const char *netName;
} nc_config_v21403;
#define NC_CONFIG_MAGIC 0xcafebeefu
#define NC_MIN_VERSION 21403
#define NC_UNDEF_INT INT_MIN

struct nc_fns {
    nc_result (*GetVersion)(int *);
    const char *(*GetErrorString)(nc_result);
    nc_result (*GetUniqueId)(nc_unique_id *);
    nc_result (*CommInitRankConfig)(nc_comm_t *, int, nc_unique_id, int, nc_config_v21403 *);
    nc_result (*CommGetAsyncError)(nc_comm_t, nc_result *);
    nc_result (*CommAbort)(nc_comm_t);
    nc_result (*CommFinalize)(nc_comm_t);
    nc_result (*CommDestroy)(nc_comm_t);
    nc_result (*AllReduce)(const void *, void *, size_t, int, int, nc_comm_t, void *);
    nc_result (*Broadcast)(const void *, void *, size_t, int, int, nc_comm_t, void *);
    nc_result (*Reduce)(const void *, void *, size_t, int, int, int, nc_comm_t, void *);
    nc_result (*AllGather)(const void *, void *, size_t, int, nc_comm_t, void *);
    nc_result (*ReduceScatter)(const void *, void *, size_t, int, int, nc_comm_t, void *);
    /* optional */
    nc_result (*AlltoAll)(const void *, void *, size_t, int, nc_comm_t, void *);
    nc_result (*GroupStart)(void);
    nc_result (*GroupEnd)(void);
    nc_result (*Send)(const void *, size_t, int, int, nc_comm_t, void *);
    nc_result (*Recv)(void *, size_t, int, int, nc_comm_t, void *);
};

#define S(field, name, alt, req) DYNLIB_SYM(struct nc_fns, field, name, alt, req)
static const struct dynlib_sym g_syms[] = {
    S(GetVersion, "ncclGetVersion", NULL, 1),
    S(GetErrorString, "ncclGetErrorString", NULL, 1),
    S(GetUniqueId, "ncclGetUniqueId", NULL, 1),
    S(CommInitRankConfig, "ncclCommInitRankConfig", NULL, 1),
    S(CommGetAsyncError, "ncclCommGetAsyncError", NULL, 1),
    S(CommAbort, "ncclCommAbort", NULL, 1),
    S(CommFinalize, "ncclCommFinalize", NULL, 1),
    S(CommDestroy, "ncclCommDestroy", NULL, 1),
    S(AllReduce, "ncclAllReduce", NULL, 1),
    S(Broadcast, "ncclBroadcast", NULL, 1),
    S(Reduce, "ncclReduce", NULL, 1),
    S(AllGather, "ncclAllGather", NULL, 1),
    S(ReduceScatter, "ncclReduceScatter", NULL, 1),
    S(AlltoAll, "ncclAlltoAll", "ncclAllToAll", 0),
    S(GroupStart, "ncclGroupStart", NULL, 0),
    S(GroupEnd, "ncclGroupEnd", NULL, 0),
    S(Send, "ncclSend", NULL, 0),
    S(Recv, "ncclRecv", NULL, 0),
};
#undef S

static struct nc_fns g_nc;
static int g_loaded; /* 0 not tried, 1 ok, -1 failed */
static int g_version;
static struct dynlib g_lib;
static plumb_err g_why;
static pthread_mutex_t g_load_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *lib_name(const char *backend) { return backend && !strcmp(backend, "hip") ? "RCCL" : "NCCL"; }

static int load_locked(const char *backend)
{
    int hip = backend && !strcmp(backend, "hip");
    const char *cands[] = {hip ? "librccl.so.1" : "libnccl.so.2", hip ? "/opt/rocm/lib/librccl.so.1" : NULL};
    err_clear(&g_why);
    if (dynlib_open(&g_lib, lib_name(backend), getenv("PLUMB_NCCL_LIB"), cands, 2, &g_why)) return -1;
    if (dynlib_resolve(&g_lib, lib_name(backend), g_syms, sizeof g_syms / sizeof g_syms[0], &g_nc, &g_why)) {
        size_t l = strlen(g_why.msg);
        snprintf(g_why.msg + l, sizeof g_why.msg - l, " (too old a %s? plumb needs 2.14.3 or newer)", lib_name(backend));
        dynlib_close(&g_lib);
        return -1;
    }
    if (g_nc.GetVersion(&g_version) != NC_SUCCESS) {
        err_set(&g_why, PLUMB_EDEVICE, "%s: ncclGetVersion failed", g_lib.path);
        return -1;
    }
    if (g_version < NC_MIN_VERSION) {
        err_set(&g_why, PLUMB_EDEVICE, "%s is version code %d; plumb needs %d (2.14.3) or newer for non-blocking "
                "communicators", g_lib.path, g_version, NC_MIN_VERSION);
        return -1;
    }
    return 0;
}

int comm_nccl_load(const char *backend, char *desc, size_t n, plumb_err *e)
{
    pthread_mutex_lock(&g_load_lock);
    if (!g_loaded) g_loaded = load_locked(backend) == 0 ? 1 : -1;
    int ok = g_loaded == 1;
    pthread_mutex_unlock(&g_load_lock);
    if (!ok)
        return err_set(e, PLUMB_EDEVICE, "%s not loadable: %s (set PLUMB_NCCL_LIB to the library's path)",
                       backend && !strcmp(backend, "hip") ? "RCCL (librccl.so.1)" : "NCCL (libnccl.so.2)", g_why.msg);
    if (desc) {
        /* version codes: 2.14.3 = 21403 (since 2.9), older 2.8.4 = 2804 */
        int v = g_version, maj = v >= 10000 ? v / 10000 : v / 1000, min = v >= 10000 ? v / 100 % 100 : v / 100 % 10;
        snprintf(desc, n, "%s %d.%d.%d (%s)", lib_name(backend), maj, min, v % 100, g_lib.path);
    }
    return PLUMB_OK;
}

/* ---- the communicator ---- */

struct nccl {
    struct comm *host;
    struct dev *d;
    nc_comm_t comm;
    dev_stream *cs; /* the comm stream */
    dev_event *ev_in, *ev_out;
    int32_t *scratch; /* [1] on the device, for barrier */
    int rank, world;
    double timeout_s;
    int aborted;
    int hooked; /* the watchdog's abort hook is ours */
};

static struct nccl *nc_of(const struct comm *c) { return c->impl; }

struct abort_job {
    nc_comm_t comm;
    int done;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};
static void *abort_main(void *arg)
{
    struct abort_job *j = arg;
    g_nc.CommAbort(j->comm);
    pthread_mutex_lock(&j->mu);
    j->done = 1;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

static double abort_bound_s(void)
{
    const char *v = getenv("PLUMB_NCCL_ABORT_BOUND_S");
    double s = v && *v ? atof(v) : 10.0;
    return s > 0 ? s : 10.0;
}

/* ncclCommAbort can itself hang: run it in a thread and wait a bounded time. */
static int abort_bounded(struct nccl *c)
{
    if (c->aborted || !c->comm) return 1;
    c->aborted = 1;
    struct abort_job *j = calloc(1, sizeof *j); /* leaked if the abort never returns */
    if (!j) return 0;
    j->comm = c->comm;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    pthread_t th;
    if (pthread_create(&th, NULL, abort_main, j) != 0) return 0;
    double bound = abort_bound_s();
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    long ns = dl.tv_nsec + (long)((bound - (double)(long)bound) * 1e9);
    dl.tv_sec += (time_t)bound + ns / 1000000000L;
    dl.tv_nsec = ns % 1000000000L;
    pthread_mutex_lock(&j->mu);
    while (!j->done)
        if (pthread_cond_timedwait(&j->cv, &j->mu, &dl) != 0) break;
    int done = j->done;
    pthread_mutex_unlock(&j->mu);
    if (done) {
        pthread_join(th, NULL);
        free(j);
        log_warn("nccl: communicator aborted");
    } else {
        pthread_detach(th);
        log_error("nccl: ncclCommAbort did not return within %.0f s; giving up on it", bound);
    }
    return done;
}

static void watchdog_hook(void *arg) { abort_bounded(arg); }

static int nc_fail(struct nccl *c, const char *what, nc_result r, plumb_err *e)
{
    if (c) abort_bounded(c);
    return err_set(e, PLUMB_EDEVICE, "nccl: %s failed: %s (%d)%s", what, g_nc.GetErrorString(r), r,
                   c ? "; communicator aborted" : "");
}

/* After a call on a non-blocking communicator: ncclInProgress means poll the
 * async error until it settles (bounded by the timeout). */
static int settle(struct nccl *c, const char *what, nc_result r, plumb_err *e)
{
    if (r == NC_SUCCESS) return PLUMB_OK;
    if (r != NC_IN_PROGRESS) return nc_fail(c, what, r, e);
    double t0 = timer_now();
    for (;;) {
        nc_result st = NC_SUCCESS;
        nc_result q = g_nc.CommGetAsyncError(c->comm, &st);
        if (q != NC_SUCCESS) return nc_fail(c, "ncclCommGetAsyncError", q, e);
        if (st == NC_SUCCESS) return PLUMB_OK;
        if (st != NC_IN_PROGRESS) return nc_fail(c, what, st, e);
        if (timer_now() - t0 > c->timeout_s) {
            abort_bounded(c);
            return err_set(e, PLUMB_ETIMEOUT, "nccl: %s still in progress after %.0f s (a rank is missing or hung); "
                           "communicator aborted", what, c->timeout_s);
        }
        usleep(100);
    }
}

static int nc_type(dtype_t t)
{
    switch (t) {
    case DT_F32: return NC_FLOAT32;
    case DT_F64: return NC_FLOAT64;
    case DT_BF16: return NC_BFLOAT16;
    case DT_F16: return NC_FLOAT16;
    case DT_I32: return NC_INT32;
    case DT_I64: return NC_INT64;
    case DT_U32: return NC_UINT32;
    case DT_U8: return NC_UINT8;
    }
    return -1;
}

static int nc_op(enum comm_op op) { return op == COMM_SUM ? NC_SUM : op == COMM_MAX ? NC_MAX : NC_MIN; }

static int nc_supports(const struct comm *c, enum comm_coll coll, dtype_t t, enum comm_op op)
{
    (void)c, (void)op;
    if (nc_type(t) < 0) return 0;
    if (coll == COMM_ALLTOALL) return g_nc.AlltoAll || (g_nc.GroupStart && g_nc.GroupEnd && g_nc.Send && g_nc.Recv);
    return 1;
}

/* the comm stream waits (on the device) for the work so far on `after` */
static int join_in(struct nccl *c, dev_stream *after, plumb_err *e)
{
    struct dev *d = c->d;
    int rc = d->be->event_record(d, c->ev_in, after, e);
    if (!rc) rc = d->be->stream_wait_event(d, c->cs, c->ev_in, e);
    return rc;
}

static int alltoall(struct nccl *c, const struct comm_args *a, int nt, void *s, plumb_err *e)
{
    if (g_nc.AlltoAll) return settle(c, "ncclAlltoAll", g_nc.AlltoAll(a->send, a->recv, a->count, nt, c->comm, s), e);
    size_t blk = a->count * dtype_size(a->dtype);
    int rc = settle(c, "ncclGroupStart", g_nc.GroupStart(), e);
    for (int r = 0; r < c->world && !rc; r++) {
        nc_result x = g_nc.Send((const char *)a->send + (size_t)r * blk, a->count, nt, r, c->comm, s);
        if (x == NC_SUCCESS) x = g_nc.Recv((char *)a->recv + (size_t)r * blk, a->count, nt, r, c->comm, s);
        if (x != NC_SUCCESS && x != NC_IN_PROGRESS) rc = nc_fail(c, "ncclSend/ncclRecv", x, e);
    }
    nc_result end = g_nc.GroupEnd();
    return rc ? rc : settle(c, "ncclGroupEnd", end, e);
}

static int nc_start(struct comm *cm, const struct comm_args *a, dev_stream *after, plumb_err *e)
{
    struct nccl *c = nc_of(cm);
    if (c->aborted) return err_set(e, PLUMB_EDEVICE, "nccl: communicator was aborted");
    int rc = join_in(c, after, e);
    if (rc) return rc;
    if (!a->count) return PLUMB_OK;
    int nt = nc_type(a->dtype), op = nc_op(a->op);
    void *s = dev_stream_native(c->d, c->cs);
    switch (a->coll) {
    case COMM_ALLREDUCE:
        return settle(c, "ncclAllReduce", g_nc.AllReduce(a->send, a->recv, a->count, nt, op, c->comm, s), e);
    case COMM_BROADCAST:
        return settle(c, "ncclBroadcast", g_nc.Broadcast(a->send, a->recv, a->count, nt, a->root, c->comm, s), e);
    case COMM_REDUCE:
        return settle(c, "ncclReduce", g_nc.Reduce(a->send, a->recv, a->count, nt, op, a->root, c->comm, s), e);
    case COMM_ALLGATHER:
        return settle(c, "ncclAllGather", g_nc.AllGather(a->send, a->recv, a->count, nt, c->comm, s), e);
    case COMM_REDUCE_SCATTER:
        return settle(c, "ncclReduceScatter", g_nc.ReduceScatter(a->send, a->recv, a->count, nt, op, c->comm, s), e);
    case COMM_ALLTOALL: return alltoall(c, a, nt, s, e);
    default: return err_set(e, PLUMB_EINTERNAL, "nccl: collective %d unknown", (int)a->coll);
    }
}

static int nc_wait(struct comm *cm, plumb_err *e)
{
    struct nccl *c = nc_of(cm);
    struct dev *d = c->d;
    if (c->aborted) return err_set(e, PLUMB_EDEVICE, "nccl: communicator was aborted");
    double t0 = timer_now();
    for (;;) {
        int done = 0;
        int rc = dev_stream_query(d, c->cs, &done, e);
        if (rc) {
            abort_bounded(c);
            return err_wrap(e, "nccl: waiting for the comm stream");
        }
        if (done) break;
        nc_result st = NC_SUCCESS;
        nc_result r = g_nc.CommGetAsyncError(c->comm, &st);
        if (r != NC_SUCCESS || (st != NC_SUCCESS && st != NC_IN_PROGRESS))
            return nc_fail(c, "collective", r != NC_SUCCESS ? r : st, e);
        if (timer_now() - t0 > c->timeout_s) {
            abort_bounded(c);
            return err_set(e, PLUMB_ETIMEOUT, "nccl: collectives did not complete within %.0f s (a rank is missing or "
                           "hung); communicator aborted", c->timeout_s);
        }
        usleep(20);
    }
    /* the default stream sees the results */
    int rc = d->be->event_record(d, c->ev_out, c->cs, e);
    if (!rc) rc = d->be->stream_wait_event(d, NULL, c->ev_out, e);
    return rc;
}

/* NCCL has no barrier: a one-element all-reduce, waited for, is one (and it
 * drains the comm stream) */
static int nc_barrier(struct comm *cm, plumb_err *e)
{
    struct nccl *c = nc_of(cm);
    struct comm_args a = {.coll = COMM_ALLREDUCE, .send = c->scratch, .recv = c->scratch, .count = 1, .dtype = DT_I32,
                          .op = COMM_SUM};
    int rc = nc_start(cm, &a, NULL, e);
    return rc ? rc : nc_wait(cm, e);
}

static void nc_abort(struct comm *cm, int code)
{
    struct nccl *c = nc_of(cm);
    abort_bounded(c);
    if (c->host && c->host->ops->abort) c->host->ops->abort(c->host, code);
    _Exit(code);
}

static void nc_finalize(struct comm *cm)
{
    struct nccl *c = nc_of(cm);
    if (!c) return;
    struct dev *d = c->d;
    if (c->hooked) watchdog_set_abort_hook(NULL, NULL);
    if (c->comm && !c->aborted) {
        plumb_err e = {0};
        nc_result r = g_nc.CommFinalize(c->comm);
        if (settle(c, "ncclCommFinalize", r, &e) == PLUMB_OK) g_nc.CommDestroy(c->comm);
        else log_warn("%s", e.msg);
    }
    if (c->cs) {
        plumb_err e = {0};
        (void)d->be->stream_sync(d, c->cs, &e);
        d->be->stream_destroy(d, c->cs);
    }
    if (c->ev_in) d->be->event_destroy(d, c->ev_in);
    if (c->ev_out) d->be->event_destroy(d, c->ev_out);
    if (c->scratch) dev_free(d, c->scratch);
    free(c);
    cm->impl = NULL;
}

static const struct comm_ops nccl_ops = {
    .name = "nccl",
    .supports = nc_supports,
    .start = nc_start,
    .wait = nc_wait,
    .allgatherv = NULL,
    .barrier = nc_barrier,
    .abort = nc_abort,
    .finalize = nc_finalize,
};

int comm_nccl_init(struct comm *cm, struct comm *host, struct dev *d, double timeout_s, plumb_err *e)
{
    if (strcmp(d->be->name, "cuda") && strcmp(d->be->name, "hip"))
        return err_set(e, PLUMB_EUSAGE, "nccl: device %s is not a cuda or hip device", d->label);
    if (!d->be->stream_query)
        return err_set(e, PLUMB_EDEVICE, "nccl: the %s backend cannot query streams (plugin too old)", d->be->name);
    char ver[600];
    int rc = comm_nccl_load(d->be->name, ver, sizeof ver, e);
    if (rc) return rc;
    struct nccl *c = calloc(1, sizeof *c);
    if (!c) return err_set(e, PLUMB_ENOMEM, "nccl: out of memory");
    c->host = host;
    c->d = d;
    c->rank = host->rank;
    c->world = host->world;
    c->timeout_s = timeout_s > 0 ? timeout_s : 300;
    cm->ops = &nccl_ops;
    cm->impl = c;
    cm->dev = d;
    nc_unique_id id;
    memset(&id, 0, sizeof id);
    if (c->rank == 0) {
        nc_result r = g_nc.GetUniqueId(&id);
        if (r != NC_SUCCESS) {
            rc = nc_fail(NULL, "ncclGetUniqueId", r, e);
            free(c);
            return rc;
        }
    }
    /* every rank takes part in the broadcast, also one whose setup failed below */
    if ((rc = comm_broadcast(host, &id, sizeof id, 0, "nccl unique id", e))) {
        free(c);
        return rc;
    }
    if ((rc = d->be->stream_create(d, &c->cs, e)) || (rc = d->be->event_create(d, &c->ev_in, e)) ||
        (rc = d->be->event_create(d, &c->ev_out, e)) || (rc = dev_alloc(d, sizeof *c->scratch, (void **)&c->scratch, e))) {
        nc_finalize(cm);
        return rc;
    }
    nc_config_v21403 cfg = {sizeof cfg, NC_CONFIG_MAGIC, NC_MIN_VERSION, 0, NC_UNDEF_INT, NC_UNDEF_INT, NC_UNDEF_INT, NULL};
    watchdog_enter("nccl communicator init");
    nc_result r = g_nc.CommInitRankConfig(&c->comm, c->world, id, c->rank, &cfg);
    if (r == NC_SUCCESS || r == NC_IN_PROGRESS) {
        rc = settle(c, "ncclCommInitRankConfig", r, e);
    } else {
        c->comm = NULL;
        rc = nc_fail(NULL, "ncclCommInitRankConfig", r, e);
    }
    watchdog_leave();
    if (rc) {
        nc_finalize(cm);
        return rc;
    }
    watchdog_set_abort_hook(watchdog_hook, c);
    c->hooked = 1;
    snprintf(cm->desc, sizeof cm->desc, "%s, rank %d of %d on %s, non-blocking, timeout %.0f s", ver, c->rank, c->world,
             d->label, c->timeout_s);
    return PLUMB_OK;
}
