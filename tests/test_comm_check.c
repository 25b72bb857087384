/* The comm check (accept/comm_check.h): nccl-tests' bandwidth factors and
 * sizes, inputs whose exact sums survive any order, the sweep on one rank
 * (self and the cpu device) with and without a corrupting rank, thresholds
 * (accept/comm_thresholds.h) and the key = value format they share with the
 * health thresholds (core/kvfile.h). tests/t_plumb_comm.sh runs the sweep on
 * 2, 3 and 4 MPI ranks and over the fake NCCL. */
#include "test.h"
#include "accept/comm_check.h"
#include "accept/comm_check_data.h"
#include "core/philox.h"
#include "accept/comm_thresholds.h"
#include "core/kvfile.h"
#include "health/health.h"
#include "dev/dev.h"
#include <jansson.h>
#include <stdlib.h>

TEST(comm_check_busbw_factors_are_nccl_tests)
{
    CHECK_NEAR(comm_busbw_factor(COMM_ALLREDUCE, 1), 0, 0);
    CHECK_NEAR(comm_busbw_factor(COMM_ALLREDUCE, 2), 1, 0);
    CHECK_NEAR(comm_busbw_factor(COMM_ALLREDUCE, 8), 1.75, 0);
    CHECK_NEAR(comm_busbw_factor(COMM_ALLGATHER, 4), 0.75, 0);
    CHECK_NEAR(comm_busbw_factor(COMM_REDUCE_SCATTER, 4), 0.75, 0);
    CHECK_NEAR(comm_busbw_factor(COMM_ALLTOALL, 3), 2.0 / 3, 1e-15);
    CHECK_NEAR(comm_busbw_factor(COMM_BROADCAST, 8), 1, 0);
    CHECK_NEAR(comm_busbw_factor(COMM_REDUCE, 8), 1, 0);
}

TEST(comm_check_sizes_as_nccl_tests)
{
    size_t p, b;
    comm_check_counts(COMM_ALLREDUCE, DT_F32, 3, 8, &p, &b);
    CHECK(p == 2 && b == 8);
    /* allgather: size is the gathered buffer, n blocks of a per-rank count */
    comm_check_counts(COMM_ALLGATHER, DT_F32, 3, 4096, &p, &b);
    CHECK(p == 341 && b == 4092);
    comm_check_counts(COMM_ALLGATHER, DT_F32, 3, 8, &p, &b); /* 2 elements for 3 ranks: nothing to send */
    CHECK(p == 0 && b == 0);
    comm_check_counts(COMM_REDUCE_SCATTER, DT_BF16, 4, 64, &p, &b);
    CHECK(p == 8 && b == 64);
    comm_check_counts(COMM_ALLTOALL, DT_I64, 2, 1 << 20, &p, &b);
    CHECK(p == 65536 && b == 1 << 20);
    comm_check_counts(COMM_BROADCAST, DT_F16, 4, 7, &p, &b);
    CHECK(p == 3 && b == 6);
}

TEST(comm_check_parse_sizes)
{
    plumb_err e = {0};
    size_t v;
    CHECK(comm_parse_bytes("8", "-b", &v, &e) == 0 && v == 8);
    CHECK(comm_parse_bytes("512K", "-b", &v, &e) == 0 && v == 512u << 10);
    CHECK(comm_parse_bytes("64M", "-e", &v, &e) == 0 && v == 64u << 20);
    CHECK(comm_parse_bytes("2G", "-e", &v, &e) == 0 && v == (size_t)2 << 30);
    const char *bad[] = {"", "M", "-1", "12Q", "1.5M", "8MB"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ_INT(comm_parse_bytes(bad[i], "-e", &v, &e), PLUMB_EUSAGE);
        CHECK_MSG(strstr(e.msg, "-e:") && strstr(e.msg, "is not a size"), "%s", e.msg);
    }
    CHECK_EQ_INT(comm_coll_parse("all-reduce"), COMM_ALLREDUCE);
    CHECK_EQ_INT(comm_coll_parse("reduce_scatter"), COMM_REDUCE_SCATTER);
    CHECK_EQ_INT(comm_coll_parse("AllToAll"), COMM_ALLTOALL);
    CHECK_EQ_INT(comm_coll_parse("gather"), -1);
}

/* a + b rounded to bf16 / fp16 after every addition, as a device summing in
 * that type would */
static double add_in(dtype_t t, double a, double b)
{
    float s = (float)(a + b);
    return t == DT_BF16 ? bf16_to_f32(f32_to_bf16(s)) : t == DT_F16 ? f16_to_f32(f32_to_f16(s)) : s;
}

TEST(comm_check_inputs_sum_exactly_in_any_order)
{
    const dtype_t types[] = {DT_BF16, DT_F16, DT_F32};
    const int worlds[] = {2, 3, 4, 8};
    for (size_t ti = 0; ti < 3; ti++)
        for (size_t wi = 0; wi < 4; wi++) {
            dtype_t t = types[ti];
            int n = worlds[wi];
            double m = floor(comm_check_exact_limit(t) / n);
            long bad = 0, zero = 0, out = 0;
            for (size_t j = 0; j < 4000; j++) {
                double v[8], exact = 0, fwd = 0, rev = 0, tree;
                for (int r = 0; r < n; r++) {
                    v[r] = comm_check_input(7, 3, COMM_ALLREDUCE, t, COMM_SUM, n, r, j);
                    exact += v[r];
                    zero += v[r] == 0;
                    out += fabs(v[r]) > m || v[r] != floor(v[r]);
                }
                for (int r = 0; r < n; r++) fwd = add_in(t, fwd, v[r]);
                for (int r = n - 1; r >= 0; r--) rev = add_in(t, rev, v[r]);
                /* pairs first, then the pairs' sums (a tree, as rings and trees do) */
                double part[8];
                int k = 0;
                for (int r = 0; r < n; r += 2) part[k++] = r + 1 < n ? add_in(t, v[r], v[r + 1]) : v[r];
                tree = 0;
                for (int q = 0; q < k; q++) tree = add_in(t, tree, part[q]);
                bad += fwd != exact || rev != exact || tree != exact;
            }
            CHECK_MSG(bad == 0 && zero == 0 && out == 0, "%s n=%d: %ld inexact, %ld zero, %ld out of [-%g, %g]",
                      dtype_name(t), n, bad, zero, out, m, m);
        }
    /* ranks and offsets get different values (a misplaced element shows) */
    int same = 0;
    for (size_t j = 0; j < 1000; j++)
        same += comm_check_input(7, 3, COMM_ALLGATHER, DT_F32, COMM_SUM, 2, 0, j) ==
                comm_check_input(7, 3, COMM_ALLGATHER, DT_F32, COMM_SUM, 2, 1, j);
    CHECK_MSG(same < 3, "%d of 1000 fp32 elements equal on two ranks", same);
}

/* The documented input of rank r, element j, computed the plain way (a
 * divide per element): the bulk generator must give the same numbers. */
static double input_by_definition(unsigned long long seed, unsigned id, int sum, dtype_t t, int n, int r, size_t j)
{
    uint32_t w[4];
    philox_block(seed, RNG_COMM_CHECK, (uint32_t)r, id, (uint64_t)j >> 1, w);
    uint64_t u = (uint64_t)w[(j & 1) * 2 + 1] << 32 | w[(j & 1) * 2];
    double L = comm_check_exact_limit(t);
    if (sum) {
        uint64_t m = (uint64_t)floor(L / n);
        double k = (double)((u >> 1) % (m ? m : 1) + 1);
        return (u & 1) ? -k : k;
    }
    return (double)(u % (uint64_t)(2 * L + 1)) - L;
}

TEST(comm_check_bulk_inputs_and_results_match_the_definition)
{
    const dtype_t types[] = {DT_F32, DT_BF16, DT_F16, DT_I64, DT_F64, DT_I32};
    const int worlds[] = {1, 3, 4, 7};
    const size_t j0 = 4095, n = 20001; /* an odd start: a pair split at each end */
    char *buf = malloc(n * 8), *red = malloc(n * 8);
    REQUIRE(buf && red);
    long bad = 0, bad_red = 0, checked = 0;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
        for (size_t wi = 0; wi < 4; wi++)
            for (int opi = 0; opi < 3; opi++) {
                dtype_t t = types[ti];
                int W = worlds[wi];
                enum comm_op op = (enum comm_op)opi;
                /* a reduction (sum: small nonzero values) and a data-movement collective */
                enum comm_coll colls[2] = {COMM_REDUCE_SCATTER, COMM_ALLTOALL};
                for (int ci = 0; ci < 2; ci++) {
                    if (ci && op != COMM_SUM) continue;
                    struct comm_check_gen g;
                    unsigned id = 9 + (unsigned)ti * 16 + (unsigned)ci;
                    comm_check_gen_init(&g, 42, id, colls[ci], t, op, W);
                    int sum = ci == 0 && op == COMM_SUM;
                    for (int r = 0; r < W; r++) {
                        comm_check_gen_fill(&g, r, j0, n, buf);
                        for (size_t k = 0; k < n; k++, checked++) {
                            double want = input_by_definition(42, id, sum, t, W, r, j0 + k);
                            bad += comm_check_get(buf, t, k) != want ||
                                   comm_check_input(42, id, colls[ci], t, op, W, r, j0 + k) != want;
                        }
                    }
                    if (ci) continue;
                    comm_check_gen_reduce(&g, j0, n, red);
                    for (size_t k = 0; k < n; k++) {
                        double acc = input_by_definition(42, id, sum, t, W, 0, j0 + k);
                        for (int r = 1; r < W; r++) {
                            double v = input_by_definition(42, id, sum, t, W, r, j0 + k);
                            acc = op == COMM_SUM ? acc + v : op == COMM_MAX ? fmax(acc, v) : fmin(acc, v);
                        }
                        bad_red += comm_check_get(red, t, k) != acc;
                    }
                }
            }
    CHECK_MSG(bad == 0, "%ld of %ld inputs differ from the definition", bad, checked);
    CHECK_MSG(bad_red == 0, "%ld exact results differ from the ranks' inputs reduced in float64", bad_red);
    free(buf);
    free(red);
}

TEST(comm_check_compare_counts_every_wrong_element)
{
    enum { N = 300000 }; /* several threads' share */
    float *want = malloc(N * sizeof *want), *got = malloc(N * sizeof *got);
    REQUIRE(want && got);
    for (size_t i = 0; i < N; i++) want[i] = got[i] = (float)(i % 1000) - 500;
    int64_t first;
    CHECK_EQ_INT(comm_check_compare(DT_F32, got, want, N, &first), 0);
    CHECK_EQ_INT(first, -1);
    got[500] = -0.0f; /* want[500] is +0: the same number */
    CHECK_EQ_INT(comm_check_compare(DT_F32, got, want, N, &first), 0);
    got[N - 1] = NAN, got[123457] += 1, got[7] = 2e9f;
    CHECK_EQ_INT(comm_check_compare(DT_F32, got, want, N, &first), 3);
    CHECK_EQ_INT(first, 7);
    /* 16-bit: one flipped low bit in the last element */
    uint16_t a[5] = {1, 2, 3, 4, 5}, b[5] = {1, 2, 3, 4, 5 ^ 1};
    CHECK_EQ_INT(comm_check_compare(DT_BF16, b, a, 5, &first), 1);
    CHECK_EQ_INT(first, 4);
    free(want);
    free(got);
}

/* A 1-rank comm that delivers nothing: its collectives return without
 * writing. Every element a collective must write out of place keeps the
 * poison and must count as wrong; in place on one rank the input is already
 * the answer. */
static int deliver_nothing(struct comm *c, const struct comm_args *a, dev_stream *after, plumb_err *e)
{
    (void)c, (void)a, (void)after, (void)e;
    return PLUMB_OK;
}

TEST(comm_check_every_element_of_every_row_is_checked)
{
    plumb_err e = {0};
    struct comm *self;
    REQUIRE(comm_init("self", &self, &e) == 0);
    static struct comm_ops lazy_ops;
    lazy_ops = *self->ops;
    lazy_ops.name = "lazy";
    lazy_ops.start = deliver_nothing;
    struct comm lazy = *self;
    lazy.ops = &lazy_ops;
    struct comm_check_opts o;
    comm_check_opts_default(&o);
    o.colls = (1u << COMM_COLL_N) - 1;
    dtype_t t[] = {DT_F32, DT_BF16, DT_F16, DT_I64};
    memcpy(o.dtypes, t, sizeof t);
    o.ndtypes = 4;
    o.min_bytes = 8;
    o.max_bytes = 1 << 20;
    o.step_factor = 4;
    o.warmup = 0;
    o.iters = 1;
    struct check_result r;
    struct comm_check_outcome oc;
    struct check_ctx ctx = {.device = "cpu"};
    REQUIRE(check_comm_run(&ctx, self, &lazy, &o, &r, &oc, &e) == 0);
    CHECK_EQ_INT(r.status, CHECK_FAIL);
    json_t *sweeps = json_object_get(json_object_get(r.obj, "details"), "sweeps");
    CHECK_EQ_INT(json_array_size(sweeps), 24);
    size_t i, k;
    json_t *sw, *row;
    long bad = 0, rows = 0;
    long long total = 0;
    json_array_foreach(sweeps, i, sw)
    {
        long long sw_sum = 0;
        json_array_foreach(json_object_get(sw, "rows"), k, row)
        {
            long long count = json_integer_value(json_object_get(row, "count"));
            long long out = json_integer_value(json_object_get(json_object_get(row, "out"), "wrong"));
            json_t *in = json_object_get(row, "in");
            bad += out != count || (json_is_object(in) && json_integer_value(json_object_get(in, "wrong")) != 0);
            sw_sum += out;
            rows++;
        }
        bad += json_integer_value(json_object_get(sw, "wrong")) != sw_sum;
        total += sw_sum;
    }
    CHECK_MSG(bad == 0, "%ld rows where out of place wrong != count or in place wrong != 0", bad);
    CHECK_EQ_INT(rows, 24 * 9); /* 8 B, 32 B, .. 1 MiB */
    const char *reason = json_string_value(json_object_get(r.obj, "reason"));
    char want[96];
    /* the poison (2 x 2^24) is what the first element got */
    snprintf(want, sizeof want, "%lld wrong elements; first: rank 0, allreduce fp32 8 B out-of-place, offset 0: "
             "expected ", total);
    CHECK_MSG(reason && strstr(reason, want) && strstr(reason, ", got 33554432"), "%s (want '%s')", reason, want);
    check_free(&r);
    comm_finalize(self);
}

/* one sweep on 1 rank: self (host buffers) or the cpu device's comm */
static int sweep(struct comm *c, struct comm_check_opts *o, struct check_result *r, struct comm_check_outcome *oc)
{
    plumb_err e = {0};
    struct check_ctx ctx = {.device = "cpu"};
    int rc = check_comm_run(&ctx, c->dev ? NULL : c, c, o, r, oc, &e);
    if (rc) fprintf(stderr, "  check_comm_run: %s\n", e.msg);
    return rc;
}

static void small_opts(struct comm_check_opts *o)
{
    comm_check_opts_default(o);
    o->colls = (1u << COMM_COLL_N) - 1;
    dtype_t t[] = {DT_F32, DT_BF16, DT_F16, DT_I64};
    memcpy(o->dtypes, t, sizeof t);
    o->ndtypes = 4;
    o->min_bytes = 8;
    o->max_bytes = 64 << 10;
    o->step_factor = 8;
    o->warmup = 1;
    o->iters = 2;
}

TEST(comm_check_sweep_one_rank)
{
    plumb_err e = {0};
    struct comm *c;
    REQUIRE(comm_init("self", &c, &e) == 0);
    struct comm_check_opts o;
    small_opts(&o);
    struct check_result r;
    struct comm_check_outcome oc;
    REQUIRE(sweep(c, &o, &r, &oc) == 0);
    CHECK_EQ_INT(r.status, CHECK_PASS);
    CHECK(!oc.broken);
    json_t *det = json_object_get(r.obj, "details");
    json_t *sweeps = json_object_get(det, "sweeps");
    CHECK_EQ_INT(json_array_size(sweeps), 24); /* 6 collectives x 4 dtypes */
    /* 8, 64, 512, 4096, 32768 B: 5 rows each; alltoall has no in-place column */
    size_t i;
    json_t *sw;
    json_array_foreach(sweeps, i, sw)
    {
        json_t *rows = json_object_get(sw, "rows");
        const char *dt = json_string_value(json_object_get(sw, "dtype"));
        CHECK_MSG(json_array_size(rows) == 5, "%s %s: %zu rows", json_string_value(json_object_get(sw, "collective")), dt,
                  json_array_size(rows));
        json_t *row0 = json_array_get(rows, 0);
        CHECK(json_integer_value(json_object_get(json_object_get(row0, "out"), "wrong")) == 0);
        int a2a = !strcmp(json_string_value(json_object_get(sw, "collective")), "alltoall");
        CHECK(a2a ? json_is_null(json_object_get(row0, "in")) : json_is_object(json_object_get(row0, "in")));
    }
    const char *reason = json_string_value(json_object_get(r.obj, "reason"));
    CHECK_MSG(strstr(reason, "6 collectives x 4 dtypes, 8 B..32 KiB on 1 rank (self): 0 wrong"), "%s", reason);
    check_free(&r);

    /* a rank that flips a bit of what it received: caught and named, per row */
    o.corrupt_rank = 0;
    o.colls = 1u << COMM_ALLREDUCE | 1u << COMM_ALLGATHER;
    o.ndtypes = 2;
    REQUIRE(sweep(c, &o, &r, &oc) == 0);
    CHECK_EQ_INT(r.status, CHECK_FAIL);
    json_t *wl = json_object_get(json_object_get(r.obj, "details"), "wrong_elements");
    /* 2 collectives x 2 dtypes x 5 sizes x 2 placements, each 1 wrong element */
    CHECK_EQ_INT(json_array_size(wl), 40);
    json_t *w;
    long bad = 0;
    json_array_foreach(wl, i, w)
    {
        long long bytes = json_integer_value(json_object_get(w, "bytes"));
        const char *dt = json_string_value(json_object_get(w, "dtype"));
        long long count = bytes / (!strcmp(dt, "fp32") ? 4 : 2);
        bad += json_integer_value(json_object_get(w, "rank")) != 0 || json_integer_value(json_object_get(w, "wrong")) != 1 ||
               json_integer_value(json_object_get(w, "offset")) != count / 2 ||
               !strcmp(json_string_value(json_object_get(w, "expected")), json_string_value(json_object_get(w, "got")));
    }
    CHECK_EQ_INT(bad, 0);
    reason = json_string_value(json_object_get(r.obj, "reason"));
    CHECK_MSG(strstr(reason, "40 wrong elements; first: rank 0, allreduce fp32 8 B out-of-place, offset 1: expected "),
              "%s", reason);
    check_free(&r);
    comm_finalize(c);
}

TEST(comm_check_sweep_cpu_device_buffers)
{
    plumb_err e = {0};
    struct comm *host, *c;
    struct dev *d;
    REQUIRE(comm_init("self", &host, &e) == 0);
    REQUIRE(dev_open("cpu", &d, &e) == 0);
    REQUIRE(comm_open_device(host, d, "host", 10, &c, &e) == 0);
    struct comm_check_opts o;
    small_opts(&o);
    o.max_bytes = 4096;
    struct check_result r;
    struct comm_check_outcome oc;
    plumb_err e2 = {0};
    struct check_ctx ctx = {.device = "cpu"};
    REQUIRE(check_comm_run(&ctx, host, c, &o, &r, &oc, &e2) == 0);
    CHECK_EQ_INT(r.status, CHECK_PASS);
    CHECK_STREQ(json_string_value(json_object_get(json_object_get(r.obj, "details"), "implementation")), "host");
    check_free(&r);
    /* data not checked: #wrong is null, not 0 */
    o.check = 0;
    o.colls = 1u << COMM_ALLREDUCE;
    REQUIRE(check_comm_run(&ctx, host, c, &o, &r, &oc, &e2) == 0);
    json_t *row = json_array_get(json_object_get(json_array_get(json_object_get(json_object_get(r.obj, "details"), "sweeps"), 0), "rows"), 0);
    CHECK(json_is_null(json_object_get(json_object_get(row, "out"), "wrong")));
    CHECK_MSG(strstr(json_string_value(json_object_get(r.obj, "reason")), "data not checked"), "%s",
              json_string_value(json_object_get(r.obj, "reason")));
    check_free(&r);
    comm_finalize(c);
    dev_close(d);
    comm_finalize(host);
}

TEST(comm_check_min_busbw)
{
    plumb_err e = {0};
    struct comm *c;
    REQUIRE(comm_init("self", &c, &e) == 0);
    struct comm_check_opts o;
    comm_check_opts_default(&o);
    o.max_bytes = 4096;
    o.warmup = 0;
    o.iters = 1;
    o.min_busbw = 1e9;
    struct check_result r;
    struct comm_check_outcome oc;
    REQUIRE(sweep(c, &o, &r, &oc) == 0);
    CHECK_EQ_INT(r.status, CHECK_FAIL);
    const char *reason = json_string_value(json_object_get(r.obj, "reason"));
    CHECK_MSG(strstr(reason, "allreduce fp32 busbw 0.00 GB/s at 4 KiB (out-of-place) is below --min-busbw = 1e+09 GB/s "
                             "(bus bandwidth is 0 on one rank)"), "%s", reason);
    check_free(&r);
    /* file thresholds need min_world ranks: on one rank they do not apply */
    struct comm_thresholds t;
    comm_thresholds_clear(&t);
    for (int k = 0; k < COMM_COLL_N; k++) t.min_busbw[k] = 1e9;
    o.min_busbw = 0;
    o.thr = &t;
    REQUIRE(sweep(c, &o, &r, &oc) == 0);
    CHECK_EQ_INT(r.status, CHECK_PASS);
    check_free(&r);
    t.min_world = 1;
    t.at_bytes = 8192; /* larger than the sweep: not applied */
    REQUIRE(sweep(c, &o, &r, &oc) == 0);
    CHECK_EQ_INT(r.status, CHECK_PASS);
    check_free(&r);
    t.at_bytes = 4096;
    snprintf(t.source, sizeof t.source, "built-in + x.conf");
    REQUIRE(sweep(c, &o, &r, &oc) == 0);
    CHECK_EQ_INT(r.status, CHECK_FAIL);
    reason = json_string_value(json_object_get(r.obj, "reason"));
    CHECK_MSG(strstr(reason, "is below min_busbw.allreduce of [all devices] (built-in + x.conf)"), "%s", reason);
    check_free(&r);
    /* nccl-tests' rule: the mean busbw over the sweep below 0.9 x the limit */
    t.min_busbw[COMM_ALLREDUCE] = 0;
    o.thr = NULL;
    o.min_avg_busbw = 1e9;
    REQUIRE(sweep(c, &o, &r, &oc) == 0);
    CHECK_EQ_INT(r.status, CHECK_FAIL);
    reason = json_string_value(json_object_get(r.obj, "reason"));
    CHECK_MSG(strstr(reason, "allreduce fp32 average busbw 0.00 GB/s is below 0.9 x --min-avg-busbw"), "%s", reason);
    check_free(&r);
    comm_finalize(c);
}

TEST(comm_thresholds_per_sku)
{
    plumb_err e = {0};
    struct comm_thresholds t;
    REQUIRE(comm_thresholds_resolve(NULL, "NVIDIA H200", &t, &e) == 0);
    CHECK_NEAR(t.min_busbw[COMM_ALLREDUCE], 100, 0);
    CHECK_NEAR(t.min_busbw[COMM_BROADCAST], 0, 0);
    CHECK_NEAR(t.at_bytes, 64 << 20, 0);
    CHECK_EQ_INT(t.min_world, 2);
    CHECK_STREQ(t.sections, "H200");
    /* the narrower, later section wins */
    REQUIRE(comm_thresholds_resolve(NULL, "NVIDIA H100 PCIe", &t, &e) == 0);
    CHECK_NEAR(t.min_busbw[COMM_ALLREDUCE], 0, 0);
    CHECK_STREQ(t.sections, "H100; H100 PCIe");
    REQUIRE(comm_thresholds_resolve(NULL, "AMD EPYC 7763", &t, &e) == 0);
    for (int k = 0; k < COMM_COLL_N; k++) CHECK(t.min_busbw[k] == 0 && t.min_avg_busbw[k] == 0);
    CHECK_STREQ(t.sections, "");
    CHECK_STREQ(t.source, "built-in");
    /* a site file over the built-in table; case-insensitive sections */
    char path[512];
    snprintf(path, sizeof path, "%s/comm.conf", test_tmpdir());
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fprintf(f, "# site\nmin_avg_busbw = 1\n[test cpu]\nmin_busbw = 2.5\nmin_busbw.alltoall = off\n[other]\nmin_busbw = 99\n");
    fclose(f);
    REQUIRE(comm_thresholds_resolve(path, "Test CPU 9000", &t, &e) == 0);
    CHECK_NEAR(t.min_busbw[COMM_ALLREDUCE], 2.5, 0);
    CHECK_NEAR(t.min_busbw[COMM_ALLTOALL], 0, 0);
    CHECK_NEAR(t.min_avg_busbw[COMM_REDUCE], 1, 0);
    CHECK_STREQ(t.sections, "test cpu");
    CHECK_MSG(strstr(t.source, "built-in + ") && strstr(t.source, "comm.conf"), "%s", t.source);
    /* errors name the line, also in a section for another SKU */
    const char *bad[][2] = {
        {"[x]\nmin_busbw.gather = 3\n", "t:2: 'min_busbw.gather': unknown collective 'gather'"},
        {"min_busbw = fast\n", "t:1: min_busbw = 'fast' is not a non-negative number of GB/s"},
        {"\n\nspeed = 3\n", "t:3: unknown key 'speed'"},
        {"at_bytes = 64Q\n", "t:1: at_bytes: '64Q' is not a size"},
        {"[unclosed\n", "t:1: '[unclosed' is not a [section] line"},
        {"min_world = 0\n", "t:1: min_world = '0' is not a rank count"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        comm_thresholds_clear(&t);
        CHECK_EQ_INT(comm_thresholds_parse(&t, bad[i][0], "t", "y", &e), PLUMB_EUSAGE);
        CHECK_MSG(strstr(e.msg, bad[i][1]), "%s (want %s)", e.msg, bad[i][1]);
    }
    CHECK_EQ_INT(comm_thresholds_resolve("/nonexistent/comm.conf", "x", &t, &e), PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "--thresholds") && strstr(e.msg, "/nonexistent/comm.conf"), "%s", e.msg);
}

struct kv_seen {
    char log[512];
};
static int kv_log(void *arg, const char *origin, int line, const char *section, const char *k, const char *v,
                  plumb_err *e)
{
    (void)origin, (void)e;
    struct kv_seen *s = arg;
    size_t L = strlen(s->log);
    snprintf(s->log + L, sizeof s->log - L, "%d:%s:%s=%s;", line, section ? section : "-", k, v);
    return PLUMB_OK;
}

TEST(core_kvfile_sections_quotes_comments)
{
    plumb_err e = {0};
    struct kv_seen s = {""};
    REQUIRE(kvfile_parse("a = 1\n# c\n\n  b=\"x y\"  # trailing\n[ NVIDIA H200 ]\nc = 3\n[\"q\"]\nd=\n", "f", kv_log, &s,
                         &e) == 0);
    CHECK_STREQ(s.log, "1:-:a=1;4:-:b=x y;6:NVIDIA H200:c=3;8:q:d=;");
    CHECK_EQ_INT(kvfile_parse("a = 1\nnot a pair\n", "f", kv_log, &s, &e), PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "f:2: 'not a pair' is not 'key = value'"), "%s", e.msg);
    CHECK_EQ_INT(kvfile_parse("[]\n", "f", kv_log, &s, &e), PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "f:1: empty [section] name"), "%s", e.msg);
    CHECK_EQ_INT(kvfile_parse(" = 3\n", "f", kv_log, &s, &e), PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "f:1: a value without a key"), "%s", e.msg);
    /* the health thresholds read the same format, without sections */
    struct health_thresholds h;
    health_thresholds_default(&h);
    CHECK(health_thresholds_parse(&h, "power_w = 500 # W\n", "h", &e) == 0 && h.power_w == 500);
    CHECK_EQ_INT(health_thresholds_parse(&h, "[H200]\npower_w = 700\n", "h", &e), PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "h:2: health thresholds have no sections"), "%s", e.msg);
}
