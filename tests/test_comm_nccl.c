/* comm/comm_nccl.c over stand-ins (run by tests/t_nccl_fake.sh, also under
 * mpirun -np 2 and 3): the NCCL API from tests/fake_nccl.c (collectives over
 * the process's real MPI ranks), hipStreamQuery from tests/fake_hipstream.c,
 * the device from tests/fake_gpu.c (the cpu backend named "hip"). What is
 * checked is plumb's side: the library found, its version checked, the unique
 * id made on rank 0 and broadcast, the non-blocking init and finalize polled
 * to completion, sums and gathers in rank order, buckets, exact int64 sums,
 * an async error or a hung collective turned into an error that names it and
 * aborts the communicator (and nothing more is sent on it). Outside that
 * script (no PLUMB_NCCL_LIB pointing at the fake) every test skips. */
#include "test.h"
#include "comm/comm.h"
#include "comm/comm_nccl.h"
#include "dev/dev.h"
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

static int fake_in_use(void)
{
    const char *lib = getenv("PLUMB_NCCL_LIB");
    return lib && strstr(lib, "libfake_nccl.so");
}
#define NEED_FAKE()                                                                                  \
    do {                                                                                             \
        if (!fake_in_use()) TEST_SKIP("PLUMB_NCCL_LIB is not the fake NCCL: tests/t_nccl_fake.sh runs these"); \
    } while (0)

static int fake_counter(const char *name)
{
    void *h = dlopen(getenv("PLUMB_NCCL_LIB"), RTLD_NOW | RTLD_NOLOAD);
    int (*f)(void) = NULL;
    if (h) *(void **)&f = dlsym(h, name);
    int v = f ? f() : -1;
    if (h) dlclose(h);
    return v;
}

struct world {
    struct comm *host;
    struct dev *d;
    struct nccl_comm *nc;
};

/* host comm (MPI under mpirun, else self), the fake hip device, the NCCL comm */
static int open_world(struct world *w, double timeout_s, plumb_err *e)
{
    memset(w, 0, sizeof *w);
    int rc = comm_init("auto", &w->host, e);
    if (!rc) rc = dev_open("hip", &w->d, e);
    if (!rc) rc = nccl_comm_init(w->host, w->d, timeout_s, &w->nc, e);
    return rc;
}
static void close_world(struct world *w)
{
    nccl_comm_free(w->nc);
    if (w->d) dev_close(w->d);
    if (w->host) comm_finalize(w->host);
}

TEST(nccl_fake_collectives)
{
    NEED_FAKE();
    plumb_err e = {0};
    char desc[600];
    REQUIRE(nccl_load("hip", desc, sizeof desc, &e) == 0);
    CHECK_MSG(strstr(desc, "RCCL 2.19.3") && strstr(desc, "libfake_nccl.so"), "%s", desc);
    struct world w;
    int rc = open_world(&w, 60, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (rc) {
        close_world(&w);
        return;
    }
    const int R = w.host->rank, W = w.host->world;
    char want[64];
    snprintf(want, sizeof want, "rank %d of %d on hip:0, non-blocking", R, W);
    CHECK_MSG(strstr(nccl_describe(w.nc), want) != NULL, "%s", nccl_describe(w.nc));
    /* fp32 sums in buckets of 1000 floats (4 buckets and a short one) */
    enum { N = 4321 };
    float *g = NULL;
    REQUIRE(dev_alloc(w.d, N * sizeof *g, (void **)&g, &e) == 0);
    for (int i = 0; i < N; i++) g[i] = (float)(R + 1) * (float)(i % 17); /* the cpu device: host memory */
    setenv("PLUMB_NCCL_BUCKET_MB", "0.003814697265625", 1);                /* 1000 floats */
    int c0 = fake_counter("fake_nccl_collectives");
    REQUIRE(nccl_allreduce_buckets(w.nc, g, N, NULL, "test buckets", &e) == 0);
    unsetenv("PLUMB_NCCL_BUCKET_MB");
    CHECK_EQ_INT(fake_counter("fake_nccl_collectives") - c0, 5);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += g[i] != (float)(W * (W + 1) / 2) * (float)(i % 17);
    CHECK_EQ_INT(bad, 0);
    /* exact int64 sums (the golden data-parallel path) */
    int64_t q[3] = {(int64_t)1 << 60, -R, 7};
    REQUIRE(nccl_allreduce_i64(w.nc, q, 3, "test i64", &e) == 0);
    CHECK(q[0] == ((int64_t)1 << 60) * W && q[1] == -(int64_t)W * (W - 1) / 2 && q[2] == 7 * W);
    /* fp64 through the async call and an explicit wait */
    double dd[2] = {0.5, (double)R};
    REQUIRE(nccl_allreduce_async(w.nc, dd, 2, DT_F64, NULL, &e) == 0);
    REQUIRE(nccl_wait(w.nc, "test f64", &e) == 0);
    CHECK(dd[0] == 0.5 * W && dd[1] == W * (W - 1) / 2.0);
    /* an unsupported type is refused naming it */
    uint32_t u = 1;
    CHECK_EQ_INT(nccl_allreduce_async(w.nc, &u, 1, DT_U32, NULL, &e), PLUMB_EUNSUPPORTED);
    CHECK_MSG(strstr(e.msg, "u32") != NULL, "%s", e.msg);
    /* gather: every rank's bytes, by rank */
    char mine[8] = {0}, *all = malloc((size_t)W * 8);
    snprintf(mine, sizeof mine, "rank%02d", R);
    REQUIRE(nccl_allgather(w.nc, mine, 8, all, "test gather", &e) == 0);
    for (int r = 0; r < W; r++) {
        char exp[8] = {0};
        snprintf(exp, sizeof exp, "rank%02d", r);
        CHECK_MSG(!memcmp(all + r * 8, exp, 8), "slot %d holds %.8s", r, all + r * 8);
    }
    free(all);
    dev_free(w.d, g);
    CHECK_EQ_INT(fake_counter("fake_nccl_aborts"), 0);
    close_world(&w);
    if (W > 1) fprintf(stderr, "  rank %d of %d: nccl collectives ok\n", R, W);
}

/* An asynchronous error (a peer died) while a collective is still running
 * (its stream busy): the wait fails naming the library's error, the
 * communicator is aborted, and later calls refuse to use it. */
TEST(nccl_fake_async_error_aborts)
{
    NEED_FAKE();
    plumb_err e = {0};
    struct world w;
    int rc = open_world(&w, 60, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (rc) {
        close_world(&w);
        return;
    }
    int a0 = fake_counter("fake_nccl_aborts");
    setenv("FAKE_NCCL_ASYNC_ERROR", "0", 1);
    setenv("FAKE_HIP_STREAM_BUSY", "1", 1);
    float x[4] = {1, 2, 3, 4};
    rc = nccl_allreduce_async(w.nc, x, 4, DT_F32, NULL, &e);
    if (!rc) rc = nccl_wait(w.nc, "grads bucket 0", &e);
    unsetenv("FAKE_NCCL_ASYNC_ERROR");
    unsetenv("FAKE_HIP_STREAM_BUSY");
    CHECK_EQ_INT(rc, PLUMB_EDEVICE);
    CHECK_MSG(strstr(e.msg, "grads bucket 0") && strstr(e.msg, "unhandled system error") && strstr(e.msg, "aborted"),
              "%s", e.msg);
    CHECK_EQ_INT(fake_counter("fake_nccl_aborts") - a0, 1);
    CHECK_EQ_INT(nccl_allreduce_async(w.nc, x, 4, DT_F32, NULL, &e), PLUMB_EDEVICE);
    CHECK_MSG(strstr(e.msg, "aborted") != NULL, "%s", e.msg);
    close_world(&w);
}

/* A collective that never completes (the stream stays busy): the wait gives
 * up after the timeout with an error saying so, and aborts. */
TEST(nccl_fake_hung_collective_times_out)
{
    NEED_FAKE();
    plumb_err e = {0};
    struct world w;
    int rc = open_world(&w, 1, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (rc) {
        close_world(&w);
        return;
    }
    int a0 = fake_counter("fake_nccl_aborts");
    setenv("FAKE_HIP_STREAM_BUSY", "1", 1);
    int64_t q[1] = {1};
    rc = nccl_allreduce_i64(w.nc, q, 1, "eval sums", &e);
    unsetenv("FAKE_HIP_STREAM_BUSY");
    CHECK_EQ_INT(rc, PLUMB_ETIMEOUT);
    CHECK_MSG(strstr(e.msg, "eval sums did not complete within 1 s") && strstr(e.msg, "aborted"), "%s", e.msg);
    CHECK_EQ_INT(fake_counter("fake_nccl_aborts") - a0, 1);
    close_world(&w);
}

/* Only cuda and hip devices take an NCCL communicator; the rank-to-GPU map
 * gives local rank r device r and refuses more ranks than visible devices. */
TEST(nccl_fake_device_checks)
{
    NEED_FAKE();
    plumb_err e = {0};
    struct comm *host;
    struct dev *cpu;
    REQUIRE(comm_init("self", &host, &e) == 0);
    REQUIRE(dev_open("cpu", &cpu, &e) == 0);
    struct nccl_comm *nc = NULL;
    CHECK_EQ_INT(nccl_comm_init(host, cpu, 10, &nc, &e), PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "not a cuda or hip device") != NULL, "%s", e.msg);
    dev_close(cpu);
    comm_finalize(host);
    char spec[32];
    setenv("FAKE_GPU_COUNT", "2", 1);
    CHECK(nccl_device_for_rank("hip", 1, 2, spec, &e) == 0 && !strcmp(spec, "hip:1"));
    CHECK_EQ_INT(nccl_device_for_rank("hip", 2, 3, spec, &e), PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "3 ranks on this host but 2 visible hip devices") && strstr(e.msg, "ROCR_VISIBLE_DEVICES"),
              "%s", e.msg);
    unsetenv("FAKE_GPU_COUNT");
}

/* Run alone with FAKE_NCCL_VERSION below 2.14.3 (the library is loaded once
 * per process): refused, naming the version needed. */
TEST(nccl_fake_old_version_refused)
{
    NEED_FAKE();
    if (!getenv("FAKE_NCCL_VERSION")) TEST_SKIP("needs FAKE_NCCL_VERSION (tests/t_nccl_fake.sh sets it)");
    plumb_err e = {0};
    CHECK_EQ_INT(nccl_load("hip", NULL, 0, &e), PLUMB_EDEVICE);
    CHECK_MSG(strstr(e.msg, "version code") && strstr(e.msg, "2.14.3"), "%s", e.msg);
}
