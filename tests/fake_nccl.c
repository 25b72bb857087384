/* A stand-in NCCL/RCCL for tests (PLUMB_NCCL_LIB=build/tests/libfake_nccl.so):
 * the part of the NCCL C API that comm/comm_nccl.c calls, over host memory
 * (the fake GPU plugin, tests/fake_gpu.c, is the cpu backend, whose device
 * memory is host memory), for any number of ranks on one host. Ranks meet in
 * a POSIX shared-memory segment named by the unique id; every collective
 * copies this rank's input into its slot, meets the others at a barrier and
 * reads what it needs from theirs, reducing in rank order (0, 1, ..., n-1).
 *
 * Like a real non-blocking communicator (ncclConfig_t.blocking = 0), init and
 * every collective return ncclInProgress and run in a thread of their own;
 * ncclCommGetAsyncError says ncclInProgress until they are done, then the
 * result. The config passed in must carry NCCL's size/magic/version header.
 *
 *   FAKE_NCCL_VERSION=N     what ncclGetVersion says (default 22105 = 2.21.5)
 *   FAKE_NCCL_HANG=R:K      rank R's K-th collective (1-based) never finishes
 *                           until the communicator is aborted
 *   FAKE_NCCL_ERROR=R:K     rank R's K-th collective fails (ncclSystemError)
 *   FAKE_NCCL_ABORT_HANG=1  ncclCommAbort never returns
 *   FAKE_NCCL_SLOT_BYTES=N  bytes per rank in the segment (default 1 MiB;
 *                           larger collectives go in chunks)
 * Each ncclCommAbort prints "fake nccl: rank R: ncclCommAbort" on stderr.
 * Built with FAKE_NCCL_OLD (tests/fake_nccl_old.c) it lacks
 * ncclCommInitRankConfig, as NCCL before 2.14 does. */
#include "core/dtype.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7
} ncclResult_t;
typedef struct {
    char internal[128];
} ncclUniqueId;
typedef struct {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking;
} ncclConfigHead;
enum { T_I8, T_U8, T_I32, T_U32, T_I64, T_U64, T_F16, T_F32, T_F64, T_BF16, T_N };
enum { OP_SUM, OP_PROD, OP_MAX, OP_MIN };

struct shm_hdr {
    _Atomic int arrived;
    _Atomic int count;
    _Atomic unsigned gen;
    _Atomic int aborted;
};
#define HDR_BYTES 4096

enum job_kind { J_INIT, J_ALLREDUCE, J_BROADCAST, J_REDUCE, J_ALLGATHER, J_REDUCE_SCATTER, J_ALLTOALL };
struct job {
    enum job_kind kind;
    const void *send;
    void *recv;
    size_t count;
    int type, op, root;
};

struct ncclComm {
    int rank, n, blocking;
    char name[128];
    size_t slot;
    struct shm_hdr *h;
    char *base; /* slots */
    size_t map_bytes;
    long ncoll; /* collectives started */
    _Atomic int status;
    _Atomic int aborted;
    int have_thread;
    pthread_t th;
    struct job job;
};
typedef struct ncclComm *ncclComm_t;

static long env_long(const char *name, long def)
{
    const char *v = getenv(name);
    return v && *v ? atol(v) : def;
}

/* "R:K" from the environment: 1 when rank r's k-th collective is named */
static int env_hit(const char *name, int rank, long k)
{
    const char *v = getenv(name);
    int r;
    long kk;
    return v && sscanf(v, "%d:%ld", &r, &kk) == 2 && r == rank && kk == k;
}

ncclResult_t ncclGetVersion(int *v)
{
    *v = (int)env_long("FAKE_NCCL_VERSION", 22105);
    return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r)
{
    static const char *s[] = {"no error", "unhandled cuda error", "unhandled system error", "internal error",
                              "invalid argument", "invalid usage", "remote process exited or there was a network error",
                              "NCCL operation in progress"};
    return (unsigned)r < 8 ? s[r] : "unknown result code";
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    static _Atomic int seq;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    memset(id, 0, sizeof *id);
    snprintf(id->internal, sizeof id->internal, "/plumb-fake-nccl-%d-%d-%ld", (int)getpid(), atomic_fetch_add(&seq, 1),
             (long)ts.tv_nsec);
    return ncclSuccess;
}

static size_t type_size(int t)
{
    static const size_t s[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
    return (unsigned)t < T_N ? s[t] : 0;
}

/* ---- meeting the other ranks ---- */

static int gone(struct ncclComm *c) { return atomic_load(&c->aborted) || atomic_load(&c->h->aborted); }

static ncclResult_t barrier(struct ncclComm *c)
{
    struct shm_hdr *h = c->h;
    unsigned g = atomic_load(&h->gen);
    if (atomic_fetch_add(&h->count, 1) == c->n - 1) {
        atomic_store(&h->count, 0);
        atomic_fetch_add(&h->gen, 1);
        return ncclSuccess;
    }
    while (atomic_load(&h->gen) == g) {
        if (gone(c)) return ncclRemoteError;
        usleep(5);
    }
    return ncclSuccess;
}

static char *slot(struct ncclComm *c, int r) { return c->base + (size_t)r * c->slot; }

/* dst[i] = dst[i] op src[i] */
static void reduce(void *dst, const void *src, size_t n, int t, int op)
{
#define R(T)                                                                                                           \
    do {                                                                                                               \
        T *d = dst;                                                                                                    \
        const T *s = src;                                                                                              \
        for (size_t i = 0; i < n; i++)                                                                                 \
            d[i] = op == OP_SUM ? (T)(d[i] + s[i]) : op == OP_PROD ? (T)(d[i] * s[i]) : op == OP_MAX ? (d[i] > s[i] ? d[i] : s[i]) : (d[i] < s[i] ? d[i] : s[i]); \
    } while (0)
#define H(TOF, FROMF)                                                                                                  \
    do {                                                                                                               \
        uint16_t *d = dst;                                                                                             \
        const uint16_t *s = src;                                                                                       \
        for (size_t i = 0; i < n; i++) {                                                                               \
            float x = TOF(d[i]), y = TOF(s[i]);                                                                        \
            d[i] = FROMF(op == OP_SUM ? x + y : op == OP_PROD ? x * y : op == OP_MAX ? (x > y ? x : y) : (x < y ? x : y)); \
        }                                                                                                              \
    } while (0)
    switch (t) {
    case T_I8: R(int8_t); break;
    case T_U8: R(uint8_t); break;
    case T_I32: R(int32_t); break;
    case T_U32: R(uint32_t); break;
    case T_I64: R(int64_t); break;
    case T_U64: R(uint64_t); break;
    case T_F32: R(float); break;
    case T_F64: R(double); break;
    case T_F16: H(f16_to_f32, f32_to_f16); break;
    case T_BF16: H(bf16_to_f32, f32_to_bf16); break;
    }
#undef R
#undef H
}

/* One collective, chunked to the slot size. Each round: this rank's part
 * into its slot, barrier, read the others' slots, barrier. */
static ncclResult_t run(struct ncclComm *c, const struct job *j)
{
    size_t es = type_size(j->type), n = (size_t)c->n, me = (size_t)c->rank;
    if (!es) return ncclInvalidArgument;
    const char *s = j->send;
    char *r = j->recv;
    /* elements per round: blocks of every peer share a slot for RS and A2A */
    size_t per = c->slot / es;
    if (j->kind == J_REDUCE_SCATTER || j->kind == J_ALLTOALL) per = c->slot / (es * n);
    if (per < 1) return ncclInvalidArgument;
    char *tmp = malloc(per * es);
    if (!tmp) return ncclSystemError;
    ncclResult_t rc = ncclSuccess;
    for (size_t off = 0; off < j->count && rc == ncclSuccess; off += per) {
        size_t k = j->count - off < per ? j->count - off : per, kb = k * es;
        switch (j->kind) {
        case J_ALLREDUCE:
        case J_REDUCE:
        case J_ALLGATHER: memcpy(slot(c, (int)me), s + off * es, kb); break;
        case J_BROADCAST:
            if ((int)me == j->root) memcpy(slot(c, (int)me), s + off * es, kb);
            break;
        case J_REDUCE_SCATTER:
        case J_ALLTOALL:
            for (size_t b = 0; b < n; b++) memcpy(slot(c, (int)me) + b * kb, s + (b * j->count + off) * es, kb);
            break;
        default: rc = ncclInternalError;
        }
        if (rc == ncclSuccess) rc = barrier(c);
        if (rc != ncclSuccess) break;
        switch (j->kind) {
        case J_ALLREDUCE:
        case J_REDUCE:
            memcpy(tmp, slot(c, 0), kb);
            for (size_t q = 1; q < n; q++) reduce(tmp, slot(c, (int)q), k, j->type, j->op);
            if (j->kind == J_ALLREDUCE || (int)me == j->root) memcpy(r + off * es, tmp, kb);
            break;
        case J_BROADCAST: memcpy(r + off * es, slot(c, j->root), kb); break;
        case J_ALLGATHER:
            for (size_t q = 0; q < n; q++) memcpy(r + (q * j->count + off) * es, slot(c, (int)q), kb);
            break;
        case J_REDUCE_SCATTER:
            memcpy(tmp, slot(c, 0) + me * kb, kb);
            for (size_t q = 1; q < n; q++) reduce(tmp, slot(c, (int)q) + me * kb, k, j->type, j->op);
            memcpy(r + off * es, tmp, kb);
            break;
        case J_ALLTOALL:
            for (size_t q = 0; q < n; q++) memcpy(r + (q * j->count + off) * es, slot(c, (int)q) + me * kb, kb);
            break;
        default: break;
        }
        rc = barrier(c);
    }
    free(tmp);
    return rc;
}

static ncclResult_t do_init(struct ncclComm *c)
{
    int fd = shm_open(c->name, O_CREAT | O_RDWR, 0600);
    if (fd < 0) return ncclSystemError;
    c->map_bytes = HDR_BYTES + (size_t)c->n * c->slot;
    if (ftruncate(fd, (off_t)c->map_bytes) != 0) {
        close(fd);
        return ncclSystemError;
    }
    void *p = mmap(NULL, c->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return ncclSystemError;
    c->h = p;
    c->base = (char *)p + HDR_BYTES;
    atomic_fetch_add(&c->h->arrived, 1);
    while (atomic_load(&c->h->arrived) < c->n) {
        if (gone(c)) return ncclRemoteError;
        usleep(50);
    }
    /* everyone has the segment open: the name can go */
    if (c->rank == 0) shm_unlink(c->name);
    return barrier(c);
}

static void *job_main(void *arg)
{
    struct ncclComm *c = arg;
    const struct job *j = &c->job;
    ncclResult_t rc;
    if (j->kind == J_INIT) {
        rc = do_init(c);
    } else if (env_hit("FAKE_NCCL_HANG", c->rank, c->ncoll)) {
        while (!gone(c)) usleep(1000);
        rc = ncclRemoteError;
    } else if (env_hit("FAKE_NCCL_ERROR", c->rank, c->ncoll)) {
        atomic_store(&c->h->aborted, 1); /* the peers see a remote error */
        rc = ncclSystemError;
    } else {
        rc = run(c, j);
    }
    atomic_store(&c->status, rc);
    return NULL;
}

/* Starts a job in its own thread (non-blocking) or runs it (blocking). */
static ncclResult_t submit(struct ncclComm *c, const struct job *j)
{
    if (atomic_load(&c->aborted)) return ncclInvalidUsage;
    int st = atomic_load(&c->status);
    if (st == ncclInProgress) return ncclInvalidUsage; /* the caller did not wait for the last one */
    if (st != ncclSuccess) return (ncclResult_t)st;     /* an async error is sticky */
    if (c->have_thread) pthread_join(c->th, NULL);
    c->have_thread = 0;
    if (j->kind != J_INIT) c->ncoll++;
    c->job = *j;
    atomic_store(&c->status, ncclInProgress);
    if (c->blocking) {
        job_main(c);
        return (ncclResult_t)atomic_load(&c->status);
    }
    if (pthread_create(&c->th, NULL, job_main, c) != 0) {
        atomic_store(&c->status, ncclSystemError);
        return ncclSystemError;
    }
    c->have_thread = 1;
    return ncclInProgress;
}

#ifndef FAKE_NCCL_OLD
ncclResult_t ncclCommInitRankConfig(ncclComm_t *out, int nranks, ncclUniqueId id, int rank, ncclConfigHead *cfg)
{
    *out = NULL;
    if (nranks < 1 || rank < 0 || rank >= nranks || strncmp(id.internal, "/plumb-fake-nccl-", 17)) return ncclInvalidArgument;
    /* the header every ncclConfig_t starts with (NCCL_CONFIG_INITIALIZER) */
    if (cfg && (cfg->magic != 0xcafebeefu || cfg->size < sizeof(ncclConfigHead) || cfg->version < 21400))
        return ncclInvalidArgument;
    struct ncclComm *c = calloc(1, sizeof *c);
    if (!c) return ncclSystemError;
    c->rank = rank;
    c->n = nranks;
    c->blocking = cfg ? cfg->blocking != 0 : 1;
    c->slot = (size_t)env_long("FAKE_NCCL_SLOT_BYTES", 1 << 20);
    memcpy(c->name, id.internal, sizeof c->name);
    c->name[sizeof c->name - 1] = 0;
    *out = c;
    struct job j = {.kind = J_INIT};
    return submit(c, &j);
}
#endif

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *st)
{
    if (!c) return ncclInvalidArgument;
    *st = (ncclResult_t)atomic_load(&c->status);
    return ncclSuccess;
}

static void release(struct ncclComm *c)
{
    if (c->have_thread) pthread_join(c->th, NULL);
    if (c->h) munmap(c->h, c->map_bytes);
    free(c);
}

ncclResult_t ncclCommAbort(ncclComm_t c)
{
    if (!c) return ncclSuccess;
    fprintf(stderr, "fake nccl: rank %d: ncclCommAbort\n", c->rank);
    if (getenv("FAKE_NCCL_ABORT_HANG") && atoi(getenv("FAKE_NCCL_ABORT_HANG"))) for (;;) pause();
    atomic_store(&c->aborted, 1);
    if (c->h) atomic_store(&c->h->aborted, 1);
    release(c);
    return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t c)
{
    if (!c) return ncclInvalidArgument;
    int st = atomic_load(&c->status);
    return st == ncclInProgress ? ncclInvalidUsage : ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t c)
{
    if (c) release(c);
    return ncclSuccess;
}

static ncclResult_t coll(ncclComm_t c, enum job_kind k, const void *s, void *r, size_t n, int t, int op, int root)
{
    if (!c || (unsigned)t >= T_N || (unsigned)op > OP_MIN || root < 0 || root >= c->n) return ncclInvalidArgument;
    struct job j = {k, s, r, n, t, op, root};
    return submit(c, &j);
}

ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, int t, int op, ncclComm_t c, void *stream)
{
    (void)stream;
    return coll(c, J_ALLREDUCE, s, r, n, t, op, 0);
}
ncclResult_t ncclBroadcast(const void *s, void *r, size_t n, int t, int root, ncclComm_t c, void *stream)
{
    (void)stream;
    return coll(c, J_BROADCAST, s, r, n, t, OP_SUM, root);
}
ncclResult_t ncclReduce(const void *s, void *r, size_t n, int t, int op, int root, ncclComm_t c, void *stream)
{
    (void)stream;
    return coll(c, J_REDUCE, s, r, n, t, op, root);
}
ncclResult_t ncclAllGather(const void *s, void *r, size_t n, int t, ncclComm_t c, void *stream)
{
    (void)stream;
    return coll(c, J_ALLGATHER, s, r, n, t, OP_SUM, 0);
}
ncclResult_t ncclReduceScatter(const void *s, void *r, size_t n, int t, int op, ncclComm_t c, void *stream)
{
    (void)stream;
    return coll(c, J_REDUCE_SCATTER, s, r, n, t, op, 0);
}
ncclResult_t ncclAlltoAll(const void *s, void *r, size_t n, int t, ncclComm_t c, void *stream)
{
    (void)stream;
    return coll(c, J_ALLTOALL, s, r, n, t, OP_SUM, 0);
}
