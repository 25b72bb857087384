/* The comm interface (comm/comm.h) on host and device buffers: every
 * collective, every dtype and reduction, in place and out of place, with
 * inputs whose exact result is known in any summation order (small
 * integers), so a wrong element cannot pass by accident; the async start +
 * wait of gradient buckets; argument errors.
 *
 * The plain suite runs them on 1 rank (self, the cpu device). tests/t_comm.sh
 * runs them on 2 and 3 MPI ranks and, through the environment, on other
 * device comms:
 *   PLUMB_TEST_COMM_DEV      device of the device comm (default cpu; "hip"
 *                            with the fake GPU plugin: one device per local rank)
 *   PLUMB_TEST_COMM_KIND     host | nccl | auto (default host)
 *   PLUMB_TEST_COMM_TIMEOUT  NCCL wait timeout in s (default 60)
 *   PLUMB_TEST_COMM_WATCHDOG process watchdog in s (default off) */
#include "test.h"
#include "comm/comm.h"
#include "core/watchdog.h"
#include "dev/dev.h"
#include <stdlib.h>

static const dtype_t g_types[] = {DT_F32, DT_F64, DT_BF16, DT_F16, DT_I32, DT_I64, DT_U32, DT_U8};
#define N_TYPES (sizeof g_types / sizeof g_types[0])

static int is_unsigned(dtype_t t) { return t == DT_U32 || t == DT_U8; }

/* Element i of rank r's input: a small integer, exact in every type (bf16
 * holds integers up to 256), and so are its sums over a few ranks. */
static int in_val(int r, size_t i, dtype_t t)
{
    int v = (int)((size_t)(r * 7 + 3) * (i % 101 + 1) % 11);
    return is_unsigned(t) ? v : v - 5;
}

static void put(void *p, dtype_t t, size_t i, double v)
{
    switch (t) {
    case DT_F32: ((float *)p)[i] = (float)v; break;
    case DT_F64: ((double *)p)[i] = v; break;
    case DT_BF16: ((uint16_t *)p)[i] = f32_to_bf16((float)v); break;
    case DT_F16: ((uint16_t *)p)[i] = f32_to_f16((float)v); break;
    case DT_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case DT_I64: ((int64_t *)p)[i] = (int64_t)v; break;
    case DT_U32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case DT_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    }
}

static double get(const void *p, dtype_t t, size_t i)
{
    switch (t) {
    case DT_F32: return ((const float *)p)[i];
    case DT_F64: return ((const double *)p)[i];
    case DT_BF16: return bf16_to_f32(((const uint16_t *)p)[i]);
    case DT_F16: return f16_to_f32(((const uint16_t *)p)[i]);
    case DT_I32: return ((const int32_t *)p)[i];
    case DT_I64: return (double)((const int64_t *)p)[i];
    case DT_U32: return ((const uint32_t *)p)[i];
    case DT_U8: return ((const uint8_t *)p)[i];
    }
    return 0;
}

static double reduce_ref(int world, dtype_t t, enum comm_op op, size_t i)
{
    double acc = in_val(0, i, t);
    for (int r = 1; r < world; r++) {
        double v = in_val(r, i, t);
        acc = op == COMM_SUM ? acc + v : op == COMM_MAX ? (v > acc ? v : acc) : (v < acc ? v : acc);
    }
    return acc;
}

/* Where the comm's buffers live: host memory (d NULL) or a device. */
struct side {
    struct comm *c;
    struct dev *d;
};

static void *s_alloc(struct side *s, size_t bytes)
{
    void *p = NULL;
    if (!s->d) return calloc(1, bytes ? bytes : 1);
    plumb_err e = {0};
    return dev_alloc(s->d, bytes ? bytes : 1, &p, &e) ? NULL : p;
}
static void s_free(struct side *s, void *p)
{
    if (!s->d) free(p);
    else dev_free(s->d, p);
}
static int s_put(struct side *s, void *dst, const void *src, size_t n)
{
    plumb_err e = {0};
    if (!n) return 0;
    if (!s->d) return memcpy(dst, src, n), 0;
    return dev_upload(s->d, dst, src, n, &e);
}
static int s_get(struct side *s, void *dst, const void *src, size_t n)
{
    plumb_err e = {0};
    if (!n) return 0;
    if (!s->d) return memcpy(dst, src, n), 0;
    return dev_download(s->d, dst, src, n, &e);
}

/* Runs one collective and compares every element this rank receives with
 * the exact answer; returns the number of wrong elements (-1: it failed),
 * naming the first. */
static long check_coll(struct side *s, enum comm_coll coll, dtype_t t, enum comm_op op, size_t count, int in_place,
                       int root)
{
    struct comm *c = s->c;
    size_t W = (size_t)c->world, R = (size_t)c->rank, es = dtype_size(t);
    size_t sn = count, rn = count; /* buffer lengths (elements) */
    if (coll == COMM_ALLGATHER) rn = count * W;
    if (coll == COMM_REDUCE_SCATTER) sn = count * W;
    if (coll == COMM_ALLTOALL) sn = rn = count * W;
    /* in place: one buffer, of the larger size */
    size_t blen = in_place ? (sn > rn ? sn : rn) : sn;
    char *hs = calloc(blen ? blen : 1, es), *hr = calloc(rn ? rn : 1, es);
    void *bs = s_alloc(s, blen * es), *br = in_place ? bs : s_alloc(s, rn * es);
    if (!hs || !hr || !bs || !br) return -1;
    /* the input: allgather in place puts it at block `rank` of the buffer */
    size_t at = in_place && coll == COMM_ALLGATHER ? R * count : 0;
    for (size_t i = 0; i < sn; i++) put(hs, t, at + i, in_val((int)R, i, t));
    long wrong = -1;
    plumb_err e = {0};
    if (!s_put(s, bs, hs, blen * es)) {
        struct comm_args a = {.coll = coll, .dtype = t, .op = op, .count = count, .root = root};
        a.send = (char *)bs + at * es;
        a.recv = in_place && coll == COMM_REDUCE_SCATTER ? (char *)bs + R * count * es : br;
        int rc = comm_run(c, &a, NULL, &e);
        if (rc) fprintf(stderr, "  rank %zu: %s %s %s count %zu: %s\n", R, comm_coll_name(coll), dtype_name(t),
                        comm_op_name(op), count, e.msg);
        if (!rc && !s_get(s, hr, (char *)a.recv, (coll == COMM_REDUCE && R != (size_t)root ? 0 : rn) * es)) {
            wrong = 0;
            size_t check_n = coll == COMM_REDUCE && R != (size_t)root ? 0 : rn;
            for (size_t i = 0; i < check_n; i++) {
                double want;
                switch (coll) {
                case COMM_ALLREDUCE:
                case COMM_REDUCE: want = reduce_ref((int)W, t, op, i); break;
                case COMM_BROADCAST: want = in_val(root, i, t); break;
                case COMM_ALLGATHER: want = in_val((int)(i / count), i % count, t); break;
                case COMM_REDUCE_SCATTER: want = reduce_ref((int)W, t, op, R * count + i); break;
                case COMM_ALLTOALL: want = in_val((int)(i / count), R * count + i % count, t); break;
                default: want = 0;
                }
                double got = get(hr, t, i);
                if (got != want) {
                    if (!wrong)
                        fprintf(stderr, "  rank %zu: %s %s %s count %zu%s: element %zu is %g, expected %g\n", R,
                                comm_coll_name(coll), dtype_name(t), comm_op_name(op), count,
                                in_place ? " in place" : "", i, got, want);
                    wrong++;
                }
            }
        }
    }
    s_free(s, bs);
    if (!in_place) s_free(s, br);
    free(hs), free(hr);
    return wrong;
}

/* Every collective x dtype x op x placement x count on side s; returns the
 * number of failed cases. */
static int all_collectives(struct side *s)
{
    static const size_t counts[] = {1, 7, 1000};
    int bad = 0, cases = 0;
    for (int coll = 0; coll < COMM_COLL_N; coll++) {
        int red = coll == COMM_ALLREDUCE || coll == COMM_REDUCE || coll == COMM_REDUCE_SCATTER;
        for (size_t ti = 0; ti < N_TYPES; ti++) {
            for (int op = 0; op < (red ? COMM_OP_N : 1); op++) {
                if (!comm_supports(s->c, (enum comm_coll)coll, g_types[ti], (enum comm_op)op)) {
                    fprintf(stderr, "  %s does not support %s %s %s\n", s->c->ops->name,
                            comm_coll_name((enum comm_coll)coll), dtype_name(g_types[ti]), comm_op_name((enum comm_op)op));
                    bad++;
                    continue;
                }
                for (int ip = 0; ip < (coll == COMM_ALLTOALL ? 1 : 2); ip++)
                    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
                        int root = (int)(k + (size_t)coll) % s->c->world;
                        long w = check_coll(s, (enum comm_coll)coll, g_types[ti], (enum comm_op)op, counts[k], ip, root);
                        cases++;
                        if (w) bad++;
                        if (w < 0) goto out; /* the comm is broken: the rest would fail alike */
                    }
            }
        }
    }
out:
    if (s->c->rank == 0) fprintf(stderr, "  %s, %d ranks: %d collective cases, %d wrong\n", s->c->ops->name, s->c->world,
                                 cases, bad);
    return bad;
}

static int env_int(const char *name, int def)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : def;
}

TEST(comm_host_collectives)
{
    plumb_err e = {0};
    struct comm *c;
    REQUIRE(comm_init("auto", &c, &e) == 0);
    struct side s = {c, NULL};
    CHECK_EQ_INT(all_collectives(&s), 0);
    /* the golden all-reduce: int64 sums beyond 2^53 stay exact */
    int64_t q[3] = {((int64_t)1 << 60) + c->rank, -((int64_t)1 << 55) * (c->rank + 1), 3};
    REQUIRE(comm_sum_i64(c, q, 3, NULL, &e) == 0);
    int64_t W = c->world;
    CHECK(q[0] == ((int64_t)1 << 60) * W + W * (W - 1) / 2);
    CHECK(q[1] == -((int64_t)1 << 55) * (W * (W + 1) / 2));
    CHECK(q[2] == 3 * W);
    /* argument errors name the collective */
    int x[2] = {0, 0};
    struct comm_args bad = {.coll = COMM_BROADCAST, .send = x, .recv = x, .count = 1, .dtype = DT_I32, .root = c->world};
    CHECK_EQ_INT(comm_run(c, &bad, NULL, &e), PLUMB_EINTERNAL);
    CHECK_MSG(strstr(e.msg, "broadcast: root") != NULL, "%s", e.msg);
    int *big = calloc((size_t)c->world * 2, sizeof *big);
    struct comm_args ov = {.coll = COMM_ALLTOALL, .send = big, .recv = big, .count = 1, .dtype = DT_I32};
    CHECK_EQ_INT(comm_run(c, &ov, NULL, &e), PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "overlap") != NULL, "%s", e.msg);
    free(big);
    CHECK_EQ_INT(comm_barrier(c, NULL, &e), 0);
    comm_finalize(c);
}

/* The device comm the environment names (default: the host comm serving the
 * cpu device). */
TEST(comm_device_collectives)
{
    plumb_err e = {0};
    const char *dev = getenv("PLUMB_TEST_COMM_DEV"), *kind = getenv("PLUMB_TEST_COMM_KIND");
    if (!dev || !*dev) dev = "cpu";
    if (!kind || !*kind) kind = "host";
    struct comm *host;
    REQUIRE(comm_init("auto", &host, &e) == 0);
    char spec[32];
    if (strcmp(dev, "cpu")) {
        if (dev_spec_for_local_rank(dev, host->local_rank, host->local_world, spec, &e)) {
            fprintf(stderr, "  %s\n", e.msg);
            CHECK(0);
            comm_finalize(host);
            return;
        }
    } else {
        snprintf(spec, sizeof spec, "cpu");
    }
    struct dev *d;
    if (dev_open(spec, &d, &e)) {
        fprintf(stderr, "  %s\n", e.msg);
        CHECK(0);
        comm_finalize(host);
        return;
    }
    int wd = env_int("PLUMB_TEST_COMM_WATCHDOG", 0);
    if (wd > 0) watchdog_start(wd);
    struct comm *c = NULL;
    int rc = comm_open_device(host, d, kind, env_int("PLUMB_TEST_COMM_TIMEOUT", 60), &c, &e);
    CHECK_MSG(rc == 0, "comm_open_device(%s, %s): %s", spec, kind, e.msg);
    if (!rc) {
        if (c->rank == 0) fprintf(stderr, "  device comm: %s\n", c->desc);
        CHECK(c->dev == d && c->rank == host->rank && c->world == host->world);
        struct side s = {c, d};
        CHECK_EQ_INT(all_collectives(&s), 0);
        /* gradient buckets: started after the default stream's work, one wait for all */
        enum { NB = 4, BN = 3000 };
        float *b[NB], *h = malloc(BN * sizeof *h);
        int ok = h != NULL;
        for (int k = 0; k < NB && ok; k++) {
            for (int i = 0; i < BN; i++) h[i] = (float)in_val(c->rank, (size_t)(i + k), DT_F32);
            ok = dev_alloc(d, BN * sizeof(float), (void **)&b[k], &e) == 0 && dev_upload(d, b[k], h, BN * sizeof *h, &e) == 0;
        }
        REQUIRE(ok);
        dev_stream *st = NULL;
        REQUIRE(d->be->stream_create(d, &st, &e) == 0);
        for (int k = 0; k < NB && !rc; k++) {
            char what[48];
            snprintf(what, sizeof what, "allreduce test bucket %d", k);
            rc = comm_allreduce_start(c, b[k], BN, DT_F32, COMM_SUM, k % 2 ? st : NULL, what, &e);
        }
        if (!rc) rc = comm_wait(c, "test buckets", &e);
        CHECK_MSG(rc == 0, "buckets: %s", e.msg);
        long wrong = 0;
        for (int k = 0; k < NB && !rc; k++) {
            REQUIRE(dev_download(d, h, b[k], BN * sizeof *h, &e) == 0);
            for (int i = 0; i < BN; i++) wrong += h[i] != (float)reduce_ref(c->world, DT_F32, COMM_SUM, (size_t)(i + k));
        }
        CHECK_EQ_INT(wrong, 0);
        for (int k = 0; k < NB; k++) dev_free(d, b[k]);
        d->be->stream_destroy(d, st);
        free(h);
        /* the golden all-reduce on device memory */
        int64_t q[2] = {((int64_t)1 << 58) + c->rank, 1}, *dq;
        REQUIRE(dev_alloc(d, sizeof q, (void **)&dq, &e) == 0 && dev_upload(d, dq, q, sizeof q, &e) == 0);
        CHECK(comm_sum_i64(c, dq, 2, NULL, &e) == 0);
        REQUIRE(dev_download(d, q, dq, sizeof q, &e) == 0);
        int64_t W = c->world;
        CHECK(q[0] == ((int64_t)1 << 58) * W + W * (W - 1) / 2 && q[1] == W);
        dev_free(d, dq);
        CHECK_MSG(comm_barrier(c, NULL, &e) == 0, "barrier: %s", e.msg);
        /* variable-size gathers are host memory only */
        void *all;
        size_t total;
        int direct = !strcmp(d->be->name, "cpu") && !strcmp(c->ops->name, "host");
        rc = comm_allgatherv_alloc(c, q, sizeof q, &all, &total, NULL, NULL, &e);
        if (direct) {
            CHECK(rc == 0 && total == sizeof q * (size_t)W);
            if (!rc) free(all);
        } else {
            CHECK_EQ_INT(rc, PLUMB_EUNSUPPORTED);
        }
        comm_finalize(c);
    }
    if (wd > 0) watchdog_stop();
    dev_close(d);
    comm_finalize(host);
}

TEST(comm_device_open_errors)
{
    plumb_err e = {0};
    struct comm *host, *c = NULL;
    REQUIRE(comm_init("self", &host, &e) == 0);
    struct dev *d;
    REQUIRE(dev_open("cpu", &d, &e) == 0);
    CHECK_EQ_INT(comm_open_device(host, d, "nccl", 0, &c, &e), PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "device cpu is not a cuda or hip device") != NULL, "%s", e.msg);
    CHECK_EQ_INT(comm_open_device(host, d, "gloo", 0, &c, &e), PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "'gloo'") != NULL, "%s", e.msg);
    CHECK(c == NULL);
    /* auto on the cpu device: the host comm, no NCCL probe */
    REQUIRE(comm_open_device(host, d, "auto", 0, &c, &e) == 0);
    CHECK_STREQ(c->ops->name, "host");
    struct comm *c2 = NULL;
    CHECK_EQ_INT(comm_open_device(c, d, "host", 0, &c2, &e), PLUMB_EINTERNAL); /* a device comm under a device comm */
    comm_finalize(c);
    dev_close(d);
    comm_finalize(host);
}
