/* NCCL / RCCL through dlopen: see comm_nccl.h. */
#include "comm/comm_nccl.h"
#include "core/log.h"
#include "core/timer.h"
#include "train/watchdog.h"
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- our own declarations of the NCCL C API (nccl.h, same in RCCL) ---- */
typedef struct nccl_comm_opaque *nc_comm_t;
typedef struct {
    char internal[128];
} nc_unique_id;
typedef enum { NC_SUCCESS = 0, NC_IN_PROGRESS = 7 } nc_result_anchor;
typedef int nc_result; /* ncclResult_t */
enum { NC_INT64 = 4, NC_FLOAT32 = 7, NC_FLOAT64 = 8, NC_UINT8 = 1 }; /* ncclDataType_t */
enum { NC_SUM = 0 };                                                  /* ncclRedOp_t */
/* ncclConfig_t of NCCL 2.14.3, the oldest layout with `blocking`; newer
 * libraries read a config by its size and version fields. */
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
    nc_result (*AllGather)(const void *, void *, size_t, int, nc_comm_t, void *);
};

static struct nc_fns g_nc;
static int g_loaded; /* 0 not tried, 1 ok, -1 failed */
static int g_version;
static char g_lib[512], g_why[1024];
static pthread_mutex_t g_load_lock = PTHREAD_MUTEX_INITIALIZER;

/* stream query from the driver library (the runtime lives in the plugin) */
static int (*g_stream_query)(void *stream);
static int g_not_ready = 600; /* CUDA_ERROR_NOT_READY == hipErrorNotReady == 600 */

static int load_locked(const char *backend)
{
    const char *over = getenv("PLUMB_NCCL_LIB");
    int hip = backend && !strcmp(backend, "hip");
    const char *cands[4] = {over && *over ? over : NULL, hip ? "librccl.so.1" : "libnccl.so.2",
                            hip ? "/opt/rocm/lib/librccl.so.1" : NULL, NULL};
    void *h = NULL;
    size_t used = 0;
    g_why[0] = '\0';
    for (int i = 0; i < 3 && !h; i++) {
        if (!cands[i]) continue;
        h = dlopen(cands[i], RTLD_NOW | RTLD_LOCAL);
        if (h) snprintf(g_lib, sizeof g_lib, "%s", cands[i]);
        else used += (size_t)snprintf(g_why + used, used < sizeof g_why ? sizeof g_why - used : 0, "%s%s", used ? "; " : "",
                                      dlerror());
    }
    if (!h) return -1;
#define SYM(field, name)                                                                              \
    do {                                                                                              \
        *(void **)&g_nc.field = dlsym(h, name);                                                       \
        if (!g_nc.field) {                                                                            \
            snprintf(g_why, sizeof g_why, "%s has no symbol %s (too old a %s?)", g_lib, name, hip ? "RCCL" : "NCCL"); \
            return -1;                                                                                \
        }                                                                                             \
    } while (0)
    SYM(GetVersion, "ncclGetVersion");
    SYM(GetErrorString, "ncclGetErrorString");
    SYM(GetUniqueId, "ncclGetUniqueId");
    SYM(CommInitRankConfig, "ncclCommInitRankConfig");
    SYM(CommGetAsyncError, "ncclCommGetAsyncError");
    SYM(CommAbort, "ncclCommAbort");
    SYM(CommFinalize, "ncclCommFinalize");
    SYM(CommDestroy, "ncclCommDestroy");
    SYM(AllReduce, "ncclAllReduce");
    SYM(AllGather, "ncclAllGather");
#undef SYM
    if (g_nc.GetVersion(&g_version) != NC_SUCCESS) {
        snprintf(g_why, sizeof g_why, "%s: ncclGetVersion failed", g_lib);
        return -1;
    }
    if (g_version < NC_MIN_VERSION) {
        snprintf(g_why, sizeof g_why, "%s is version code %d; plumb needs %d (2.14.3) or newer for non-blocking "
                 "communicators", g_lib, g_version, NC_MIN_VERSION);
        return -1;
    }
    /* the driver's stream query, to poll completion while watching errors */
    const char *drv[] = {hip ? "libamdhip64.so.6" : "libcuda.so.1", hip ? "libamdhip64.so.5" : NULL, hip ? "libamdhip64.so" : NULL};
    for (int i = 0; i < 3 && !g_stream_query; i++) {
        if (!drv[i]) continue;
        void *dh = dlopen(drv[i], RTLD_NOW | RTLD_LOCAL);
        if (dh) *(void **)&g_stream_query = dlsym(dh, hip ? "hipStreamQuery" : "cuStreamQuery");
    }
    if (!g_stream_query) {
        snprintf(g_why, sizeof g_why, "no stream query in %s (needed to watch collectives)",
                 hip ? "libamdhip64.so" : "libcuda.so.1");
        return -1;
    }
    return 0;
}

int nccl_load(const char *backend, char *desc, size_t n, plumb_err *e)
{
    pthread_mutex_lock(&g_load_lock);
    if (!g_loaded) g_loaded = load_locked(backend) == 0 ? 1 : -1;
    int ok = g_loaded == 1;
    pthread_mutex_unlock(&g_load_lock);
    if (!ok)
        return err_set(e, PLUMB_EDEVICE, "%s not loadable: %s (set PLUMB_NCCL_LIB to the library's path)",
                       backend && !strcmp(backend, "hip") ? "RCCL (librccl.so.1)" : "NCCL (libnccl.so.2)", g_why);
    if (desc) {
        int v = g_version, maj = v >= 10000 ? v / 10000 : v / 1000, min = v >= 10000 ? v / 100 % 100 : v / 100 % 10;
        snprintf(desc, n, "%s %d.%d.%d (%s)", backend && !strcmp(backend, "hip") ? "RCCL" : "NCCL", maj, min, v % 100,
                 g_lib);
    }
    return PLUMB_OK;
}

int nccl_device_for_rank(const char *backend, int local_rank, int local_world, char spec[32], plumb_err *e)
{
    const struct dev_backend *be = dev_backend_get(backend, e);
    if (!be) return e ? e->code : PLUMB_EDEVICE;
    int count = 0;
    int rc = be->device_count(&count, e);
    if (rc) return rc;
    const char *var = strcmp(backend, "hip") ? "CUDA_VISIBLE_DEVICES" : getenv("HIP_VISIBLE_DEVICES") ? "HIP_VISIBLE_DEVICES"
                                                                                                   : "ROCR_VISIBLE_DEVICES";
    const char *vis = getenv(var);
    if (local_rank < 0 || local_world < 1 || local_world > count)
        return err_set(e, PLUMB_EUSAGE, "%d ranks on this host but %d visible %s device%s (%s=%s): one rank per GPU",
                       local_world, count, backend, count == 1 ? "" : "s", var, vis ? vis : "(unset)");
    snprintf(spec, 32, "%s:%d", backend, local_rank);
    return PLUMB_OK;
}

/* ---- the communicator ---- */

struct nccl_comm {
    struct dev *d;
    nc_comm_t comm;
    dev_stream *cs;    /* comm stream */
    dev_event *ev_in, *ev_out;
    int rank, world;
    double timeout_s;
    int aborted;
    char desc[768];
};

/* Native stream of a cuda/hip dev_stream: the plugin's struct dev_stream
 * starts with the vendor stream, and its device state starts with the
 * default dev_stream (src/gpu/gpu.h). */
static void *native_stream(struct dev *d, dev_stream *s) { return s ? *(void **)s : *(void **)d->impl; }

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
/* ncclCommAbort can itself hang: run it in a thread and wait at most 10 s. */
static int abort_bounded(struct nccl_comm *c)
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
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 10;
    pthread_mutex_lock(&j->mu);
    while (!j->done)
        if (pthread_cond_timedwait(&j->cv, &j->mu, &dl) != 0) break;
    int done = j->done;
    pthread_mutex_unlock(&j->mu);
    if (done) {
        pthread_join(th, NULL);
        free(j);
    } else {
        pthread_detach(th);
        log_error("nccl: ncclCommAbort did not return within 10 s; giving up on it");
    }
    return done;
}

static void watchdog_hook(void *arg) { abort_bounded((struct nccl_comm *)arg); }

static int nc_fail(struct nccl_comm *c, const char *what, nc_result r, plumb_err *e)
{
    if (c) abort_bounded(c);
    return err_set(e, PLUMB_EDEVICE, "nccl: %s failed: %s (%d)%s", what, g_nc.GetErrorString(r), r,
                   c ? "; communicator aborted" : "");
}

/* After a call on a non-blocking communicator: ncclInProgress means poll the
 * async error until it settles (bounded). */
static int settle(struct nccl_comm *c, const char *what, nc_result r, plumb_err *e)
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
            return err_set(e, PLUMB_ETIMEOUT, "nccl: %s still in progress after %.0f s; communicator aborted", what,
                           c->timeout_s);
        }
        usleep(100);
    }
}

int nccl_comm_init(struct comm *host, struct dev *d, double timeout_s, struct nccl_comm **out, plumb_err *e)
{
    *out = NULL;
    if (strcmp(d->be->name, "cuda") && strcmp(d->be->name, "hip"))
        return err_set(e, PLUMB_EUSAGE, "nccl: device %s is not a cuda or hip device", d->label);
    char ver[600];
    int rc = nccl_load(d->be->name, ver, sizeof ver, e);
    if (rc) return rc;
    struct nccl_comm *c = calloc(1, sizeof *c);
    if (!c) return err_set(e, PLUMB_ENOMEM, "nccl: out of memory");
    c->d = d;
    c->rank = host->rank;
    c->world = host->world;
    c->timeout_s = timeout_s > 0 ? timeout_s : 300;
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
    if ((rc = comm_broadcast(host, &id, sizeof id, 0, "nccl unique id", e))) {
        free(c);
        return rc;
    }
    if ((rc = d->be->stream_create(d, &c->cs, e)) || (rc = d->be->event_create(d, &c->ev_in, e)) ||
        (rc = d->be->event_create(d, &c->ev_out, e))) {
        nccl_comm_free(c);
        return rc;
    }
    nc_config_v21403 cfg = {sizeof cfg, NC_CONFIG_MAGIC, NC_MIN_VERSION, 0, NC_UNDEF_INT, NC_UNDEF_INT, NC_UNDEF_INT, NULL};
    watchdog_enter("nccl communicator init");
    nc_result r = g_nc.CommInitRankConfig(&c->comm, c->world, id, c->rank, &cfg);
    rc = r == NC_SUCCESS || r == NC_IN_PROGRESS ? settle(c, "ncclCommInitRankConfig", r, e)
                                               : nc_fail(NULL, "ncclCommInitRankConfig", r, e);
    watchdog_leave();
    if (rc) {
        if (r != NC_SUCCESS && r != NC_IN_PROGRESS) c->comm = NULL;
        nccl_comm_free(c);
        return rc;
    }
    watchdog_set_abort_hook(watchdog_hook, c);
    snprintf(c->desc, sizeof c->desc, "%s, rank %d of %d on %s, non-blocking, watchdog %.0f s", ver, c->rank, c->world,
             d->label, c->timeout_s);
    *out = c;
    return PLUMB_OK;
}

const char *nccl_describe(const struct nccl_comm *c) { return c->desc; }

void nccl_comm_free(struct nccl_comm *c)
{
    if (!c) return;
    struct dev *d = c->d;
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
    watchdog_set_abort_hook(NULL, NULL);
    free(c);
}

static int nc_type(dtype_t t, int *nt, plumb_err *e)
{
    switch (t) {
    case DT_F32: *nt = NC_FLOAT32; return PLUMB_OK;
    case DT_F64: *nt = NC_FLOAT64; return PLUMB_OK;
    case DT_I64: *nt = NC_INT64; return PLUMB_OK;
    default: return err_set(e, PLUMB_EUNSUPPORTED, "nccl: all-reduce of %s not supported (fp32, fp64, int64)", dtype_name(t));
    }
}

/* the comm stream waits for the work so far on `after` */
static int join_in(struct nccl_comm *c, dev_stream *after, plumb_err *e)
{
    struct dev *d = c->d;
    int rc = d->be->event_record(d, c->ev_in, after, e);
    if (!rc) rc = d->be->stream_wait_event(d, c->cs, c->ev_in, e);
    return rc;
}

int nccl_allreduce_async(struct nccl_comm *c, void *buf, size_t n, dtype_t t, dev_stream *after, plumb_err *e)
{
    if (c->aborted) return err_set(e, PLUMB_EDEVICE, "nccl: communicator was aborted");
    int nt = 0, rc;
    if ((rc = nc_type(t, &nt, e)) || (rc = join_in(c, after, e))) return rc;
    if (!n) return PLUMB_OK;
    nc_result r = g_nc.AllReduce(buf, buf, n, nt, NC_SUM, c->comm, native_stream(c->d, c->cs));
    return settle(c, "ncclAllReduce", r, e);
}

int nccl_wait(struct nccl_comm *c, const char *what, plumb_err *e)
{
    struct dev *d = c->d;
    watchdog_enter(what ? what : "nccl collective");
    double t0 = timer_now();
    int rc = PLUMB_OK;
    void *s = native_stream(d, c->cs);
    for (;;) {
        int q = g_stream_query(s);
        if (q == 0) break;
        if (q != g_not_ready) {
            rc = err_set(e, PLUMB_EDEVICE, "nccl: %s: stream query failed with driver error %d", what ? what : "wait", q);
            abort_bounded(c);
            break;
        }
        nc_result st = NC_SUCCESS;
        nc_result r = g_nc.CommGetAsyncError(c->comm, &st);
        if (r != NC_SUCCESS || (st != NC_SUCCESS && st != NC_IN_PROGRESS)) {
            rc = nc_fail(c, what ? what : "collective", r != NC_SUCCESS ? r : st, e);
            break;
        }
        if (timer_now() - t0 > c->timeout_s) {
            abort_bounded(c);
            rc = err_set(e, PLUMB_ETIMEOUT, "nccl: %s did not complete within %.0f s (a rank is missing or hung); "
                         "communicator aborted", what ? what : "collective", c->timeout_s);
            break;
        }
        usleep(20);
    }
    watchdog_leave();
    if (rc) return rc;
    /* the default stream sees the results */
    rc = d->be->event_record(d, c->ev_out, c->cs, e);
    if (!rc) rc = d->be->stream_wait_event(d, NULL, c->ev_out, e);
    return rc;
}

int nccl_allreduce_buckets(struct nccl_comm *c, float *buf, size_t n, dev_stream *after, const char *what,
                           plumb_err *e)
{
    const char *v = getenv("PLUMB_NCCL_BUCKET_MB");
    double mb = v && *v ? atof(v) : 25.0;
    size_t per = mb > 0 ? (size_t)(mb * 1048576.0 / sizeof(float)) : n;
    if (per < 1) per = 1;
    int rc = PLUMB_OK;
    for (size_t o = 0; o < n && !rc; o += per)
        rc = nccl_allreduce_async(c, buf + o, n - o < per ? n - o : per, DT_F32, o ? c->cs : after, e);
    if (!rc) rc = nccl_wait(c, what, e);
    return rc;
}

int nccl_allreduce_i64(struct nccl_comm *c, int64_t *buf, size_t n, const char *what, plumb_err *e)
{
    int rc = nccl_allreduce_async(c, buf, n, DT_I64, NULL, e);
    if (!rc) rc = nccl_wait(c, what, e);
    return rc;
}

int nccl_allgather(struct nccl_comm *c, const void *send, size_t bytes, void *recv, const char *what, plumb_err *e)
{
    if (c->aborted) return err_set(e, PLUMB_EDEVICE, "nccl: communicator was aborted");
    int rc = join_in(c, NULL, e);
    if (rc) return rc;
    nc_result r = g_nc.AllGather(send, recv, bytes, NC_UINT8, c->comm, native_stream(c->d, c->cs));
    if ((rc = settle(c, "ncclAllGather", r, e))) return rc;
    return nccl_wait(c, what, e);
}
