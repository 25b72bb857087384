/* GPU backend tests. They run on the device named by PLUMB_TEST_DEVICE
 * (cuda, cuda:N, hip): `PLUMB_TEST_DEVICE=cuda build/plumb-tests gpu_`.
 * With the default (cpu) every device test skips and says so; the plugin
 * loading test always runs, so a host with no GPU checks the graceful path:
 * the plugin loads or says which library failed, and asking for the device
 * gives an error naming the cause, never a crash. */
#include "test.h"
#include "dev/dev.h"
#include "core/dtype.h"
#include "core/file.h"
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int is_gpu_spec(const char *s) { return !strncmp(s, "cuda", 4) || !strncmp(s, "hip", 3); }

/* Opens the test device, or skips. A GPU that was asked for and does not
 * open is a failure, not a skip. */
#define OPEN_GPU_OR_SKIP(d)                                                                    \
    do {                                                                                       \
        const char *spec_ = test_device();                                                     \
        if (!is_gpu_spec(spec_))                                                               \
            TEST_SKIP("PLUMB_TEST_DEVICE=%s: GPU tests run with PLUMB_TEST_DEVICE=cuda or hip", spec_); \
        plumb_err e_ = {0};                                                                    \
        int rc_ = dev_open(spec_, &(d), &e_);                                                  \
        CHECK_MSG(rc_ == PLUMB_OK, "dev_open(%s): %s", spec_, e_.msg);                         \
        if (rc_) return;                                                                       \
    } while (0)

/* A reproducible pattern in [-1, 1) from an integer hash (splitmix64). */
static void fill(float *x, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t z = seed * 0x9E3779B97F4A7C15ULL + i * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        z ^= z >> 31;
        x[i] = (float)((double)(z >> 40) / (double)(1ULL << 24) * 2.0 - 1.0);
    }
}

static void *dev_put(struct dev *d, const void *h, size_t bytes)
{
    void *p = NULL;
    plumb_err e = {0};
    if (dev_alloc(d, bytes, &p, &e) || dev_upload(d, p, h, bytes, &e)) {
        fprintf(stderr, "  dev_put: %s\n", e.msg);
        return NULL;
    }
    return p;
}

TEST(gpu_plugin_graceful)
{
    /* a bad spec is a usage error, never a silent fallback */
    struct dev *bad = NULL;
    plumb_err eb = {0};
    CHECK_EQ_INT(dev_open_or_cpu("cuda:x", &bad, &eb), PLUMB_EUSAGE);
    CHECK_EQ_INT(dev_open_or_cpu("tpu", &bad, &eb), PLUMB_EUSAGE);
    CHECK(bad == NULL);
    const char *names[] = {"cuda", "hip"};
    for (int i = 0; i < 2; i++) {
        plumb_err e = {0};
        const struct dev_backend *be = dev_backend_get(names[i], &e);
        char desc[1100];
        plugin_describe(names[i], desc, sizeof desc);
        CHECK(desc[0] != '\0');
        if (!be) {
            /* the message names the library and why it failed */
            CHECK_MSG(strstr(e.msg, names[i]) != NULL, "%s", e.msg);
            CHECK_MSG(strstr(e.msg, "libplumb-") != NULL || strstr(e.msg, ".so") != NULL, "%s", e.msg);
            continue;
        }
        CHECK_EQ_INT(be->abi, PLUMB_BACKEND_ABI);
        CHECK_STREQ(be->name, names[i]);
        int count = -1;
        plumb_err ec = {0};
        int rc = be->device_count(&count, &ec);
        if (rc != PLUMB_OK) {
            CHECK_EQ_INT(count, 0);
            CHECK_MSG(strstr(ec.msg, names[i]) != NULL && strlen(ec.msg) > 20, "%s", ec.msg);
            struct dev *d = NULL;
            plumb_err eo = {0};
            CHECK_EQ_INT(dev_open(names[i], &d, &eo), PLUMB_EDEVICE);
            CHECK(d == NULL);
            CHECK(eo.msg[0] != '\0');
            /* what commands use: the cpu instead, with a warning */
            struct dev *f = NULL;
            plumb_err ef = {0};
            CHECK_EQ_INT(dev_open_or_cpu(names[i], &f, &ef), PLUMB_OK);
            CHECK(f && !strcmp(f->be->name, "cpu"));
            if (f) dev_close(f);
            printf("  %s plugin loaded; no device: %s\n", names[i], ec.msg);
        } else {
            CHECK(count >= 1);
            printf("  %s plugin loaded; %d device(s)\n", names[i], count);
        }
    }
}

TEST(gpu_memory_streams_events)
{
    struct dev *d = NULL;
    OPEN_GPU_OR_SKIP(d);
    plumb_err e = {0};
    CHECK(d->info.warp_size == 32 || d->info.warp_size == 64);
    CHECK(d->info.compute_units > 0);
    CHECK(d->info.mem_total > ((size_t)1 << 30));
    CHECK(d->info.name[0] && d->info.arch[0] && d->info.driver[0] && d->info.libs[0]);
    printf("  %s: %s %s, %d SMs, warp %d, %s, %s\n", d->label, d->info.name, d->info.arch, d->info.compute_units,
           d->info.warp_size, d->info.driver, d->info.libs);
    const size_t n = (3u << 20) + 123; /* not a multiple of anything convenient */
    uint8_t *h = NULL, *back = malloc(n);
    REQUIRE(d->be->host_alloc(d, n, (void **)&h, &e) == PLUMB_OK);
    for (size_t i = 0; i < n; i++) h[i] = (uint8_t)(i * 2654435761u >> 13);
    void *a = NULL, *b = NULL;
    REQUIRE(dev_alloc(d, n, &a, &e) == PLUMB_OK);
    REQUIRE(dev_alloc(d, n, &b, &e) == PLUMB_OK);
    dev_stream *s = NULL;
    dev_event *e0 = NULL, *e1 = NULL;
    REQUIRE(d->be->stream_create(d, &s, &e) == PLUMB_OK);
    REQUIRE(d->be->event_create(d, &e0, &e) == PLUMB_OK && d->be->event_create(d, &e1, &e) == PLUMB_OK);
    CHECK(d->be->event_record(d, e0, s, &e) == PLUMB_OK);
    CHECK(d->be->memcpy_async(d, s, a, h, n, MEMCPY_H2D, &e) == PLUMB_OK);
    CHECK(d->be->memcpy_async(d, s, b, a, n, MEMCPY_D2D, &e) == PLUMB_OK);
    CHECK(d->be->memset_async(d, s, (uint8_t *)b + 100, 0xAB, 1000, &e) == PLUMB_OK);
    CHECK(d->be->event_record(d, e1, s, &e) == PLUMB_OK);
    /* the default stream waits for s through the event, then copies back */
    CHECK(d->be->stream_wait_event(d, NULL, e1, &e) == PLUMB_OK);
    CHECK(d->be->memcpy_async(d, NULL, back, b, n, MEMCPY_D2H, &e) == PLUMB_OK);
    CHECK(dev_sync(d, &e) == PLUMB_OK);
    float ms = -1;
    CHECK(d->be->event_sync(d, e1, &e) == PLUMB_OK);
    CHECK(d->be->event_elapsed_ms(d, e0, e1, &ms, &e) == PLUMB_OK);
    CHECK(ms >= 0);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t want = i >= 100 && i < 1100 ? 0xAB : h[i];
        bad += back[i] != want;
    }
    CHECK_EQ_INT(bad, 0);
    /* caching allocator over cudaMalloc: a freed block is reused for the same size */
    struct dev_mem_stats st0, st1;
    dev_mem_stats(d, &st0);
    dev_free(d, a);
    void *c = NULL;
    CHECK(dev_alloc(d, n, &c, &e) == PLUMB_OK);
    dev_mem_stats(d, &st1);
    CHECK(c == a);
    CHECK_EQ_INT(st1.n_raw_alloc, st0.n_raw_alloc);
    CHECK_EQ_INT(st1.n_cache_hits, st0.n_cache_hits + 1);
    /* a device-sized request fails with ENOMEM and a message, no crash */
    void *huge = NULL;
    plumb_err eh = {0};
    CHECK_EQ_INT(dev_alloc(d, (size_t)1 << 50, &huge, &eh), PLUMB_ENOMEM);
    CHECK_MSG(strstr(eh.msg, "cudaMalloc") != NULL || strstr(eh.msg, "memory") != NULL, "%s", eh.msg);
    char det[2048];
    d->be->describe_determinism(d, det, sizeof det);
    CHECK(strstr(det, "workspace") && strstr(det, "reduction") && strstr(det, "atomics"));
    d->be->event_destroy(d, e0);
    d->be->event_destroy(d, e1);
    d->be->stream_destroy(d, s);
    d->be->host_free(d, h);
    free(back);
    dev_free(d, b);
    dev_free(d, c);
    dev_close(d);
}

/* The device-side warp/block reduction unit test: runs on CUDA now and on
 * the first AMD GPU (64-lane wavefronts) the day one is present. */
TEST(gpu_warp_reductions)
{
    struct dev *d = NULL;
    OPEN_GPU_OR_SKIP(d);
    Dl_info info;
    REQUIRE(dladdr((void *)d->be->device_count, &info) && info.dli_fname);
    void *h = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    REQUIRE(h != NULL);
    int (*self)(int, int *, char *, size_t) =
        (int (*)(int, int *, char *, size_t))dlsym(h, "plumb_gpu_selftest_reductions");
    REQUIRE(self != NULL);
    char why[512];
    int warp = 0;
    int rc = self(d->ordinal, &warp, why, sizeof why);
    CHECK_MSG(rc == 0, "%s", why);
    CHECK_EQ_INT(warp, d->info.warp_size);
    printf("  warp %d: warp and block sum/max exact for 1..%d warps per block\n", warp, 1024 / warp);
    dlclose(h);
    dev_close(d);
}

/* float64 reference of C = A B (+ C0) with inputs as the device sees them. */
static void ref_gemm(int m, int n, int k, int ta, int tb, const float *a, const float *b, const float *c0,
                     double *c)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double acc = c0 ? c0[(size_t)i * n + j] : 0.0;
            for (int kk = 0; kk < k; kk++)
                acc += (double)a[ta ? (size_t)kk * m + i : (size_t)i * k + kk] *
                       (double)b[tb ? (size_t)j * k + kk : (size_t)kk * n + j];
            c[(size_t)i * n + j] = acc;
        }
}

static void to_dtype(const float *x, void *y, dtype_t t, size_t n, float *rounded)
{
    for (size_t i = 0; i < n; i++) {
        if (t == DT_F32) {
            ((float *)y)[i] = x[i];
            rounded[i] = x[i];
        } else {
            uint16_t h = t == DT_BF16 ? f32_to_bf16(x[i]) : f32_to_f16(x[i]);
            ((uint16_t *)y)[i] = h;
            rounded[i] = t == DT_BF16 ? bf16_to_f32(h) : f16_to_f32(h);
        }
    }
}

/* Runs one gemm on the device; returns the norm-wise relative error vs
 * float64 and checks run-to-run bit equality. */
static double gemm_case(struct dev *d, enum numerics mode, int tf32, dtype_t t, int m, int n, int k, int ta, int tb,
                        int accumulate, int *bits_equal)
{
    plumb_err e = {0};
    size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
    float *fa = malloc(na * 4), *fb = malloc(nb * 4), *ra = malloc(na * 4), *rb = malloc(nb * 4);
    float *c0 = malloc(nc * 4), *c1 = malloc(nc * 4), *c2 = malloc(nc * 4);
    void *ha = malloc(na * 4), *hb = malloc(nb * 4);
    double *ref = malloc(nc * 8);
    fill(fa, na, 1000 + m);
    fill(fb, nb, 2000 + n);
    fill(c0, nc, 3000 + k);
    to_dtype(fa, ha, t, na, ra);
    to_dtype(fb, hb, t, nb, rb);
    ref_gemm(m, n, k, ta, tb, ra, rb, accumulate ? c0 : NULL, ref);
    void *da = dev_put(d, ha, na * dtype_size(t)), *db = dev_put(d, hb, nb * dtype_size(t));
    float *dc = dev_put(d, c0, nc * 4);
    double err = INFINITY;
    *bits_equal = 0;
    if (da && db && dc && dev_set_numerics(d, mode, tf32, &e) == PLUMB_OK) {
        struct gemm_desc g = {.m = m, .n = n, .k = k, .trans_a = ta, .trans_b = tb, .ab_type = t, .a = da,
                              .lda = ta ? m : k, .b = db, .ldb = tb ? k : n, .c = dc, .ldc = n,
                              .accumulate = accumulate};
        int ok = d->ops->gemm(d, NULL, &g) == PLUMB_OK && dev_download(d, c1, dc, nc * 4, &e) == PLUMB_OK &&
                 dev_upload(d, dc, c0, nc * 4, &e) == PLUMB_OK && d->ops->gemm(d, NULL, &g) == PLUMB_OK &&
                 dev_download(d, c2, dc, nc * 4, &e) == PLUMB_OK;
        if (ok) {
            double num = 0, den = 0;
            for (size_t i = 0; i < nc; i++) {
                double df = (double)c1[i] - ref[i];
                num += df * df;
                den += ref[i] * ref[i];
            }
            err = sqrt(num / (den > 0 ? den : 1));
            *bits_equal = !memcmp(c1, c2, nc * 4);
        }
    }
    dev_set_numerics(d, NUMERICS_FAST, 0, &e);
    dev_free(d, da);
    dev_free(d, db);
    dev_free(d, dc);
    free(fa); free(fb); free(ra); free(rb); free(c0); free(c1); free(c2); free(ha); free(hb); free(ref);
    return err;
}

TEST(gpu_fast_gemm_accuracy)
{
    struct dev *d = NULL;
    OPEN_GPU_OR_SKIP(d);
    static const int shapes[][3] = {{64, 48, 40}, {33, 17, 29}, {128, 96, 257}, {1, 300, 7}, {255, 1, 64}};
    static const struct { dtype_t t; int tf32; double tol; const char *name; } precs[] = {
        {DT_F32, 0, 1e-5, "fp32"}, {DT_F32, 1, 3e-3, "tf32"}, {DT_BF16, 0, 1e-5, "bf16"}, {DT_F16, 0, 1e-5, "fp16"}};
    for (size_t p = 0; p < sizeof precs / sizeof precs[0]; p++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int tr = 0; tr < 4; tr++) {
                int eq = 0, acc = (int)s & 1;
                double err = gemm_case(d, NUMERICS_FAST, precs[p].tf32, precs[p].t, shapes[s][0], shapes[s][1],
                                       shapes[s][2], tr & 1, tr >> 1, acc, &eq);
                CHECK_MSG(err <= precs[p].tol, "%s m=%d n=%d k=%d ta=%d tb=%d acc=%d: rel err %.3g > %.3g",
                          precs[p].name, shapes[s][0], shapes[s][1], shapes[s][2], tr & 1, tr >> 1, acc, err,
                          precs[p].tol);
                CHECK_MSG(eq, "%s m=%d n=%d k=%d: two runs differ", precs[p].name, shapes[s][0], shapes[s][1],
                          shapes[s][2]);
            }
    /* TF32 really is in use when allowed (and only then): a large fp32 product
     * is less accurate with it than without */
    int eq;
    double e32 = gemm_case(d, NUMERICS_FAST, 0, DT_F32, 256, 256, 1024, 0, 0, 0, &eq);
    double etf = gemm_case(d, NUMERICS_FAST, 1, DT_F32, 256, 256, 1024, 0, 0, 0, &eq);
    printf("  256x256x1024 fp32 rel err %.3g, tf32 %.3g\n", e32, etf);
    CHECK(e32 < 1e-6);
    CHECK(etf > 1e-5);
    dev_close(d);
}

TEST(gpu_golden_gemm_fmaf_order)
{
    struct dev *d = NULL;
    OPEN_GPU_OR_SKIP(d);
    plumb_err e = {0};
    static const int shapes[][3] = {{37, 29, 53}, {64, 64, 64}, {1, 5, 1000}};
    for (size_t s = 0; s < 3; s++)
        for (int tr = 0; tr < 4; tr++)
            for (int ti = 0; ti < 3; ti++) {
                dtype_t t = ti == 0 ? DT_F32 : ti == 1 ? DT_BF16 : DT_F16;
                int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2], ta = tr & 1, tb = tr >> 1;
                size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
                float *fa = malloc(na * 4), *fb = malloc(nb * 4), *ra = malloc(na * 4), *rb = malloc(nb * 4);
                float *c0 = malloc(nc * 4), *got = malloc(nc * 4), *want = malloc(nc * 4);
                void *ha = malloc(na * 4), *hb = malloc(nb * 4);
                fill(fa, na, 7 + s);
                fill(fb, nb, 8 + s);
                fill(c0, nc, 9 + s);
                to_dtype(fa, ha, t, na, ra);
                to_dtype(fb, hb, t, nb, rb);
                /* the golden definition: acc = fmaf(a, b, acc) over ascending k from 0, then C + acc */
                for (int i = 0; i < m; i++)
                    for (int j = 0; j < n; j++) {
                        float acc = 0.0f;
                        for (int kk = 0; kk < k; kk++)
                            acc = fmaf(ra[ta ? (size_t)kk * m + i : (size_t)i * k + kk],
                                       rb[tb ? (size_t)j * k + kk : (size_t)kk * n + j], acc);
                        want[(size_t)i * n + j] = c0[(size_t)i * n + j] + acc;
                    }
                void *da = dev_put(d, ha, na * dtype_size(t)), *db = dev_put(d, hb, nb * dtype_size(t));
                float *dc = dev_put(d, c0, nc * 4);
                REQUIRE(da && db && dc);
                REQUIRE(dev_set_numerics(d, NUMERICS_GOLDEN, 0, &e) == PLUMB_OK);
                struct gemm_desc g = {.m = m, .n = n, .k = k, .trans_a = ta, .trans_b = tb, .ab_type = t, .a = da,
                                      .lda = ta ? m : k, .b = db, .ldb = tb ? k : n, .c = dc, .ldc = n,
                                      .accumulate = 1};
                CHECK(d->ops->gemm(d, NULL, &g) == PLUMB_OK);
                CHECK(dev_download(d, got, dc, nc * 4, &e) == PLUMB_OK);
                size_t first = nc;
                for (size_t i = 0; i < nc && first == nc; i++)
                    if (memcmp(&got[i], &want[i], 4)) first = i;
                CHECK_MSG(first == nc, "%s m=%d n=%d k=%d ta=%d tb=%d: element %zu is %a, CPU order gives %a",
                          dtype_name(t), m, n, k, ta, tb, first, first < nc ? got[first] : 0.0f,
                          first < nc ? want[first] : 0.0f);
                dev_free(d, da); dev_free(d, db); dev_free(d, dc);
                free(fa); free(fb); free(ra); free(rb); free(c0); free(got); free(want); free(ha); free(hb);
            }
    dev_set_numerics(d, NUMERICS_FAST, 0, &e);
    dev_close(d);
}

TEST(gpu_cast_bits)
{
    struct dev *d = NULL;
    OPEN_GPU_OR_SKIP(d);
    plumb_err e = {0};
    /* specials: ties, subnormals of both formats, overflow, inf, nan, signed zero */
    static const float sp[] = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65520.0f, 65519.99f, 1e-8f, 5.96e-8f, 2.98e-8f,
                               6.1e-5f, 1.00390625f, 1.0078125f, 1.01171875f, 3.0e38f, INFINITY, -INFINITY, NAN,
                               1.17549435e-38f, 1e-45f};
    const size_t n = 4096;
    float *x = malloc(n * 4), *back = malloc(n * 4), *want = malloc(n * 4);
    uint16_t *h16 = malloc(n * 2), *w16 = malloc(n * 2);
    fill(x, n, 77);
    for (size_t i = 0; i < n; i++) x[i] = ldexpf(x[i], (int)(i % 60) - 30);
    memcpy(x, sp, sizeof sp);
    float *dx = dev_put(d, x, n * 4);
    uint16_t *dh = NULL;
    float *dy = NULL;
    REQUIRE(dx && dev_alloc(d, n * 2, (void **)&dh, &e) == PLUMB_OK && dev_alloc(d, n * 4, (void **)&dy, &e) == PLUMB_OK);
    for (int ti = 0; ti < 2; ti++) {
        dtype_t t = ti ? DT_F16 : DT_BF16;
        CHECK(d->ops->cast(d, NULL, dx, DT_F32, dh, t, n) == PLUMB_OK);
        CHECK(d->ops->cast(d, NULL, dh, t, dy, DT_F32, n) == PLUMB_OK);
        CHECK(dev_download(d, h16, dh, n * 2, &e) == PLUMB_OK);
        CHECK(dev_download(d, back, dy, n * 4, &e) == PLUMB_OK);
        size_t bad = 0;
        for (size_t i = 0; i < n; i++) {
            w16[i] = t == DT_BF16 ? f32_to_bf16(x[i]) : f32_to_f16(x[i]);
            want[i] = t == DT_BF16 ? bf16_to_f32(w16[i]) : f16_to_f32(w16[i]);
            if (h16[i] != w16[i] || memcmp(&back[i], &want[i], 4)) {
                if (!bad) fprintf(stderr, "  %s: x=%a -> %04x (cpu %04x)\n", dtype_name(t), x[i], h16[i], w16[i]);
                bad++;
            }
        }
        CHECK_EQ_INT(bad, 0);
    }
    /* fp32 -> 16-bit four values a thread with a tail (n - 3), and one at a
     * time (x and y 4 bytes off the 16-byte alignment): the same bits, and
     * nothing written past the count */
    static const size_t offs[][2] = {{0, 3}, {1, 5}, {0, 4093}};
    for (int k = 0; k < 3; k++) {
        const size_t o = offs[k][0], m = n - offs[k][1];
        for (size_t i = 0; i < n; i++) w16[i] = 0x7fff;
        CHECK(dev_upload(d, dh, w16, n * 2, &e) == PLUMB_OK);
        CHECK(d->ops->cast(d, NULL, dx + o, DT_F32, dh + o, DT_BF16, m) == PLUMB_OK);
        CHECK(dev_download(d, h16, dh, n * 2, &e) == PLUMB_OK);
        size_t bad = 0;
        for (size_t i = 0; i < n; i++)
            bad += h16[i] != (i >= o && i < o + m ? f32_to_bf16(x[i]) : 0x7fff);
        CHECK_EQ_INT(bad, 0);
    }
    /* bf16 -> fp16 through fp32 */
    CHECK(d->ops->cast(d, NULL, dx, DT_F32, dh, DT_BF16, n) == PLUMB_OK);
    uint16_t *dh2 = NULL;
    REQUIRE(dev_alloc(d, n * 2, (void **)&dh2, &e) == PLUMB_OK);
    CHECK(d->ops->cast(d, NULL, dh, DT_BF16, dh2, DT_F16, n) == PLUMB_OK);
    CHECK(dev_download(d, h16, dh2, n * 2, &e) == PLUMB_OK);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += h16[i] != f32_to_f16(bf16_to_f32(f32_to_bf16(x[i])));
    CHECK_EQ_INT(bad, 0);
    /* an unsupported pair is an error, not garbage */
    CHECK(d->ops->cast(d, NULL, dx, DT_F32, dh, DT_I32, 4) != PLUMB_OK);
    dev_free(d, dx); dev_free(d, dh); dev_free(d, dh2); dev_free(d, dy);
    free(x); free(back); free(want); free(h16); free(w16);
    dev_close(d);
}

TEST(gpu_fast_ops_accuracy)
{
    struct dev *d = NULL;
    OPEN_GPU_OR_SKIP(d);
    plumb_err e = {0};
    /* sum of 1e6 + 3 values vs float64, and two runs bit-equal */
    size_t n = 1000003;
    float *x = malloc(n * 4), s1 = 0, s2 = 0;
    fill(x, n, 5);
    double ref = 0, aref = 0;
    for (size_t i = 0; i < n; i++) ref += x[i], aref += fabs(x[i]);
    float *dx = dev_put(d, x, n * 4), *ds = NULL;
    REQUIRE(dx && dev_alloc(d, 4, (void **)&ds, &e) == PLUMB_OK);
    CHECK(d->ops->sum(d, NULL, dx, n, ds) == PLUMB_OK && dev_download(d, &s1, ds, 4, &e) == PLUMB_OK);
    CHECK(d->ops->sum(d, NULL, dx, n, ds) == PLUMB_OK && dev_download(d, &s2, ds, 4, &e) == PLUMB_OK);
    CHECK_MSG(fabs(s1 - ref) <= 1e-6 * aref, "sum %.9g vs %.9g", s1, ref);
    CHECK(!memcmp(&s1, &s2, 4));
    /* softmax and layernorm rows of odd lengths */
    static const int cols_list[] = {1, 7, 100, 1000, 5000};
    for (int ci = 0; ci < 5; ci++) {
        int rows = 13, cols = cols_list[ci];
        size_t m = (size_t)rows * cols;
        float *h = malloc(m * 4), *y = malloc(m * 4), *w = malloc(cols * 4), *b = malloc(cols * 4);
        float *mean = malloc(rows * 4), *rstd = malloc(rows * 4);
        fill(h, m, 11 + ci);
        for (size_t i = 0; i < m; i++) h[i] *= 8;
        fill(w, cols, 12);
        fill(b, cols, 13);
        float *dh = dev_put(d, h, m * 4), *dy = NULL, *dw = dev_put(d, w, cols * 4), *db = dev_put(d, b, cols * 4);
        float *dm = NULL, *dr = NULL;
        REQUIRE(dh && dw && db && dev_alloc(d, m * 4, (void **)&dy, &e) == PLUMB_OK);
        REQUIRE(dev_alloc(d, rows * 4, (void **)&dm, &e) == PLUMB_OK && dev_alloc(d, rows * 4, (void **)&dr, &e) == PLUMB_OK);
        CHECK(d->ops->softmax(d, NULL, dh, dy, rows, cols) == PLUMB_OK);
        CHECK(dev_download(d, y, dy, m * 4, &e) == PLUMB_OK);
        double worst = 0;
        for (int r = 0; r < rows; r++) {
            double mx = -INFINITY, se = 0;
            for (int j = 0; j < cols; j++) mx = fmax(mx, h[(size_t)r * cols + j]);
            for (int j = 0; j < cols; j++) se += exp(h[(size_t)r * cols + j] - mx);
            for (int j = 0; j < cols; j++) {
                double want = exp(h[(size_t)r * cols + j] - mx) / se;
                worst = fmax(worst, fabs(y[(size_t)r * cols + j] - want) / want);
            }
        }
        CHECK_MSG(worst < 1e-5, "softmax cols=%d max rel err %.3g", cols, worst);
        CHECK(d->ops->layernorm(d, NULL, dh, dw, db, dy, dm, dr, rows, cols, 1e-5f) == PLUMB_OK);
        CHECK(dev_download(d, y, dy, m * 4, &e) == PLUMB_OK && dev_download(d, mean, dm, rows * 4, &e) == PLUMB_OK &&
              dev_download(d, rstd, dr, rows * 4, &e) == PLUMB_OK);
        worst = 0;
        for (int r = 0; r < rows; r++) {
            double mu = 0, var = 0;
            for (int j = 0; j < cols; j++) mu += h[(size_t)r * cols + j];
            mu /= cols;
            for (int j = 0; j < cols; j++) var += pow(h[(size_t)r * cols + j] - mu, 2);
            var /= cols;
            double rs = 1 / sqrt(var + 1e-5);
            CHECK_MSG(fabs(mean[r] - mu) <= 1e-5 * (1 + fabs(mu)) && fabs(rstd[r] - rs) <= 1e-4 * rs,
                      "layernorm cols=%d row %d: mean %g vs %g, rstd %g vs %g", cols, r, mean[r], mu, rstd[r], rs);
            for (int j = 0; j < cols; j++) {
                double want = (h[(size_t)r * cols + j] - mu) * rs * w[j] + b[j];
                worst = fmax(worst, fabs(y[(size_t)r * cols + j] - want));
            }
        }
        CHECK_MSG(worst < 1e-4, "layernorm cols=%d max abs err %.3g", cols, worst);
        dev_free(d, dh); dev_free(d, dy); dev_free(d, dw); dev_free(d, db); dev_free(d, dm); dev_free(d, dr);
        free(h); free(y); free(w); free(b); free(mean); free(rstd);
    }
    /* unary ops over a range that covers their interesting regions */
    size_t u = 20000;
    float *ux = malloc(u * 4), *uy = malloc(u * 4), *duy = NULL;
    for (size_t i = 0; i < u; i++) ux[i] = -10.0f + 20.0f * (float)i / (float)u;
    float *dux = dev_put(d, ux, u * 4);
    REQUIRE(dux && dev_alloc(d, u * 4, (void **)&duy, &e) == PLUMB_OK);
    static const char *names[] = {"exp", "log", "tanh", "erf", "gelu"};
    for (int op = 0; op < UNARY_COUNT; op++) {
        CHECK(d->ops->unary(d, NULL, (enum unary_op)op, dux, duy, u) == PLUMB_OK);
        CHECK(dev_download(d, uy, duy, u * 4, &e) == PLUMB_OK);
        double worst = 0;
        for (size_t i = 0; i < u; i++) {
            double v = ux[i], want;
            if (op == UNARY_LOG && v <= 0) continue;
            switch (op) {
            case UNARY_EXP: want = exp(v); break;
            case UNARY_LOG: want = log(v); break;
            case UNARY_TANH: want = tanh(v); break;
            case UNARY_ERF: want = erf(v); break;
            default: want = 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
            }
            worst = fmax(worst, fabs(uy[i] - want) / fmax(fabs(want), 1e-3));
        }
        CHECK_MSG(worst < 1e-5, "%s: max rel err %.3g", names[op], worst);
    }
    dev_free(d, dux); dev_free(d, duy); dev_free(d, dx); dev_free(d, ds);
    free(ux); free(uy); free(x);
    dev_close(d);
}

/* ---- golden = CPU bits: the GPU kernels against core/philox.h and
 * core/gmath.h evaluated on the host (the cpu backend's definitions) ---- */
#include "core/gmath.h"
#include "core/philox.h"

static size_t first_diff(const void *a, const void *b, size_t n, size_t elem)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp((const char *)a + i * elem, (const char *)b + i * elem, elem)) return i;
    return n;
}
/* Bit equality of floats, except that any NaN equals any NaN: NaN payloads
 * are not portable (x86 propagates an operand's payload, NVIDIA GPUs return
 * the canonical 0x7fffffff), and golden mode promises the same bits for
 * every non-NaN result and NaN where the CPU has NaN. */
static size_t first_diff_f(const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], 4) && !(isnan(a[i]) && isnan(b[i]))) return i;
    return n;
}

TEST(gpu_rng_bits)
{
    struct dev *d = NULL;
    OPEN_GPU_OR_SKIP(d);
    plumb_err e = {0};
    static const struct rng_stream streams[] = {
        {0, RNG_INIT, 0, 0}, {20261129, RNG_DROPOUT, 7, 3}, {0xFFFFFFFFFFFFFFFFULL, RNG_DATA, 0xFFFFFFFF, 1}};
    static const uint64_t firsts[] = {0, 1, 3, 5, 1000001, ((uint64_t)1 << 50) - 100003 - 1};
    static const size_t counts[] = {1, 7, 1000, 100003};
    size_t maxn = 100003;
    uint32_t *got = malloc(maxn * 4), *want = malloc(maxn * 4);
    void *dout = NULL;
    REQUIRE(dev_alloc(d, maxn * 4, &dout, &e) == PLUMB_OK);
    for (size_t s = 0; s < 3; s++)
        for (size_t f = 0; f < 6; f++)
            for (size_t c = 0; c < 4; c++)
                for (int kind = 0; kind < 3; kind++) {
                    const struct rng_stream *st = &streams[s];
                    size_t n = counts[c];
                    uint64_t first = firsts[f];
                    int rc = kind == 0 ? d->ops->rng_u32(d, NULL, st, first, dout, n)
                             : kind == 1 ? d->ops->rng_uniform(d, NULL, st, first, dout, n)
                                         : d->ops->rng_normal(d, NULL, st, first, dout, n);
                    CHECK(rc == PLUMB_OK);
                    CHECK(dev_download(d, got, dout, n * 4, &e) == PLUMB_OK);
                    for (size_t i = 0; i < n; i++) {
                        uint64_t idx = first + i;
                        if (kind == 0) want[i] = philox_u32_at(st->seed, st->purpose, st->a, st->b, idx);
                        else {
                            float v = kind == 1 ? philox_uniform_at(st->seed, st->purpose, st->a, st->b, idx)
                                                : philox_normal_at(st->seed, st->purpose, st->a, st->b, idx);
                            memcpy(&want[i], &v, 4);
                        }
                    }
                    size_t k = first_diff(got, want, n, 4);
                    CHECK_MSG(k == n, "%s stream %zu first %llu n %zu: element %zu is %08x, cpu %08x",
                              kind == 0 ? "u32" : kind == 1 ? "uniform" : "normal", s, (unsigned long long)first, n, k,
                              k < n ? got[k] : 0, k < n ? want[k] : 0);
                }
    /* past the last element (index 2^50 - 1) is an error, not a wrap */
    CHECK(d->ops->rng_u32(d, NULL, &streams[0], ((uint64_t)1 << 50) - 2, dout, 4) == PLUMB_EUSAGE);
    dev_free(d, dout);
    free(got);
    free(want);
    dev_close(d);
}

/* special values placed at the front of a row: NaN first, signed zeros, infinities */
static void put_specials(float *x, size_t n, int variant)
{
    static const float sp[][6] = {{-0.0f, 0.0f, -0.0f, 1.0f, -1.0f, 0.5f},
                                  {-INFINITY, 3.0f, 3.0f, -2.0f, 0.0f, -0.0f},
                                  {NAN, 1.0f, 2.0f, 3.0f, 4.0f, 5.0f},
                                  {1e-40f, -1e-40f, 88.0f, -88.0f, 1e30f, -1e30f}};
    for (size_t i = 0; i < 6 && i < n; i++) x[i] = sp[variant][i];
}

TEST(gpu_golden_ops_bits)
{
    struct dev *d = NULL;
    OPEN_GPU_OR_SKIP(d);
    plumb_err e = {0};
    REQUIRE(dev_set_numerics(d, NUMERICS_GOLDEN, 0, &e) == PLUMB_OK);
    /* sum: sizes around chunk boundaries, and the 1e7 of plumb numerics */
    static const size_t sums[] = {0, 1, 2, 3, 511, 512, 513, 4097, 262145, 1000003, 10000000};
    size_t maxs = 10000000;
    float *x = malloc(maxs * 4), got = 0, want;
    fill(x, maxs, 31);
    for (size_t i = 0; i < maxs; i += 7) x[i] *= 1e4f; /* wide dynamic range: order matters */
    float *dx = dev_put(d, x, maxs * 4), *ds = NULL;
    REQUIRE(dx && dev_alloc(d, 4, (void **)&ds, &e) == PLUMB_OK);
    for (size_t i = 0; i < sizeof sums / sizeof sums[0]; i++) {
        CHECK(d->ops->sum(d, NULL, dx, sums[i], ds) == PLUMB_OK);
        CHECK(dev_download(d, &got, ds, 4, &e) == PLUMB_OK);
        want = gsum(x, sums[i]);
        CHECK_MSG(first_diff_f(&got, &want, 1) == 1, "golden sum n=%zu: %a, cpu %a", sums[i], got, want);
    }
    /* softmax and layernorm per row */
    static const int cols_list[] = {1, 2, 7, 512, 513, 1500, 5000};
    for (int ci = 0; ci < 7; ci++) {
        int rows = 9, cols = cols_list[ci];
        size_t m = (size_t)rows * cols;
        float *h = malloc(m * 4), *y = malloc(m * 4), *yw = malloc(m * 4), *w = malloc(cols * 4), *b = malloc(cols * 4);
        float mean[9], rstd[9], wm[9], wr[9];
        fill(h, m, 100 + ci);
        for (size_t i = 0; i < m; i++) h[i] *= 10;
        for (int r = 0; r < 4; r++) put_specials(h + (size_t)r * cols, (size_t)cols, r);
        fill(w, cols, 200);
        fill(b, cols, 201);
        float *dh = dev_put(d, h, m * 4), *dy = NULL, *dw = dev_put(d, w, cols * 4), *db = dev_put(d, b, cols * 4);
        float *dm = NULL, *dr = NULL;
        REQUIRE(dh && dw && db && dev_alloc(d, m * 4, (void **)&dy, &e) == PLUMB_OK);
        REQUIRE(dev_alloc(d, 64, (void **)&dm, &e) == PLUMB_OK && dev_alloc(d, 64, (void **)&dr, &e) == PLUMB_OK);
        CHECK(d->ops->softmax(d, NULL, dh, dy, rows, cols) == PLUMB_OK);
        CHECK(dev_download(d, y, dy, m * 4, &e) == PLUMB_OK);
        for (int r = 0; r < rows; r++) gsoftmax_row(h + (size_t)r * cols, yw + (size_t)r * cols, cols);
        size_t k = first_diff_f(y, yw, m);
        CHECK_MSG(k == m, "golden softmax cols=%d: element %zu (row %zu) is %a, cpu %a", cols, k, k / cols,
                  k < m ? y[k] : 0.0f, k < m ? yw[k] : 0.0f);
        /* in place (y aliases x) gives the same bits */
        CHECK(d->ops->softmax(d, NULL, dh, dh, rows, cols) == PLUMB_OK);
        CHECK(dev_download(d, y, dh, m * 4, &e) == PLUMB_OK);
        CHECK(first_diff_f(y, yw, m) == m);
        CHECK(dev_upload(d, dh, h, m * 4, &e) == PLUMB_OK);
        for (int wb = 0; wb < 3; wb++) { /* with w and b; w only; neither */
            const float *pw = wb < 2 ? dw : NULL, *pb = wb == 0 ? db : NULL;
            CHECK(d->ops->layernorm(d, NULL, dh, pw, pb, dy, dm, dr, rows, cols, 1e-5f) == PLUMB_OK);
            CHECK(dev_download(d, y, dy, m * 4, &e) == PLUMB_OK);
            CHECK(dev_download(d, mean, dm, rows * 4, &e) == PLUMB_OK && dev_download(d, rstd, dr, rows * 4, &e) == PLUMB_OK);
            for (int r = 0; r < rows; r++)
                glayernorm_row(h + (size_t)r * cols, wb < 2 ? w : NULL, wb == 0 ? b : NULL, yw + (size_t)r * cols, cols,
                               1e-5f, &wm[r], &wr[r]);
            k = first_diff_f(y, yw, m);
            CHECK_MSG(k == m, "golden layernorm cols=%d wb=%d: element %zu is %a, cpu %a", cols, wb, k,
                      k < m ? y[k] : 0.0f, k < m ? yw[k] : 0.0f);
            CHECK(first_diff_f(mean, wm, rows) == (size_t)rows && first_diff_f(rstd, wr, rows) == (size_t)rows);
        }
        dev_free(d, dh); dev_free(d, dy); dev_free(d, dw); dev_free(d, db); dev_free(d, dm); dev_free(d, dr);
        free(h); free(y); free(yw); free(w); free(b);
    }
    /* unary: a sweep over [-100, 100] plus every special */
    size_t u = 200000;
    float *ux = malloc(u * 4), *uy = malloc(u * 4), *uw = malloc(u * 4);
    for (size_t i = 0; i < u; i++) ux[i] = -100.0f + 200.0f * (float)i / (float)u;
    static const float sp[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-45f, -1e-45f, 1e-38f, 88.7f, -87.3f, 4.0f, -44.5f};
    memcpy(ux, sp, sizeof sp);
    fill(ux + 100, 1000, 9);
    float *dux = dev_put(d, ux, u * 4), *duy = NULL;
    REQUIRE(dux && dev_alloc(d, u * 4, (void **)&duy, &e) == PLUMB_OK);
    static const char *names[] = {"exp", "log", "tanh", "erf", "gelu"};
    for (int op = 0; op < UNARY_COUNT; op++) {
        CHECK(d->ops->unary(d, NULL, (enum unary_op)op, dux, duy, u) == PLUMB_OK);
        CHECK(dev_download(d, uy, duy, u * 4, &e) == PLUMB_OK);
        for (size_t i = 0; i < u; i++) {
            float v = ux[i];
            uw[i] = op == UNARY_EXP ? gexpf(v) : op == UNARY_LOG ? glogf(v) : op == UNARY_TANH ? gtanhf(v)
                    : op == UNARY_ERF ? gerff(v) : ggeluf(v);
        }
        size_t k = first_diff_f(uy, uw, u);
        CHECK_MSG(k == u, "golden %s: x=%a gives %a, cpu %a", names[op], k < u ? ux[k] : 0.0f, k < u ? uy[k] : 0.0f,
                  k < u ? uw[k] : 0.0f);
    }
    dev_set_numerics(d, NUMERICS_FAST, 0, &e);
    dev_free(d, dx); dev_free(d, ds); dev_free(d, dux); dev_free(d, duy);
    free(x); free(ux); free(uy); free(uw);
    dev_close(d);
}

/* Fast GEMM is deterministic across streams: each stream owns its workspace
 * and the algorithm is pinned per shape, so the same product on two streams
 * running at once gives the same bits as on the default stream. */
TEST(gpu_fast_gemm_streams_bits)
{
    struct dev *d = NULL;
    OPEN_GPU_OR_SKIP(d);
    plumb_err e = {0};
    static const int shapes[][3] = {{512, 384, 4000}, {64, 64, 20000}, {2048, 1024, 1024}};
    for (int p = 0; p < 3; p++)
        for (int s = 0; s < 3; s++) {
            dtype_t t = p == 2 ? DT_BF16 : DT_F32;
            int tf32 = p == 1, m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
            size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
            float *fa = malloc(na * 4), *fb = malloc(nb * 4), *ra = malloc(na * 4), *rb = malloc(nb * 4);
            void *ha = malloc(na * 4), *hb = malloc(nb * 4);
            float *c[3];
            fill(fa, na, 41);
            fill(fb, nb, 42);
            to_dtype(fa, ha, t, na, ra);
            to_dtype(fb, hb, t, nb, rb);
            void *da = dev_put(d, ha, na * dtype_size(t)), *db = dev_put(d, hb, nb * dtype_size(t));
            float *dc[3] = {NULL, NULL, NULL};
            dev_stream *st[3] = {NULL, NULL, NULL};
            REQUIRE(da && db && dev_set_numerics(d, NUMERICS_FAST, tf32, &e) == PLUMB_OK);
            for (int i = 0; i < 3; i++) {
                c[i] = malloc(nc * 4);
                REQUIRE(dev_alloc(d, nc * 4, (void **)&dc[i], &e) == PLUMB_OK);
                if (i) REQUIRE(d->be->stream_create(d, &st[i], &e) == PLUMB_OK);
            }
            for (int i = 0; i < 3; i++) {
                struct gemm_desc g = {.m = m, .n = n, .k = k, .ab_type = t, .a = da, .lda = k, .b = db, .ldb = n,
                                      .c = dc[i], .ldc = n};
                CHECK(d->ops->gemm(d, st[i], &g) == PLUMB_OK);
            }
            for (int i = 0; i < 3; i++) {
                CHECK(d->be->stream_sync(d, st[i], &e) == PLUMB_OK);
                CHECK(dev_download(d, c[i], dc[i], nc * 4, &e) == PLUMB_OK);
            }
            CHECK_MSG(!memcmp(c[0], c[1], nc * 4) && !memcmp(c[0], c[2], nc * 4),
                      "%s%s %dx%dx%d differs between streams", dtype_name(t), tf32 ? "(tf32)" : "", m, n, k);
            for (int i = 0; i < 3; i++) {
                dev_free(d, dc[i]);
                free(c[i]);
                if (i) d->be->stream_destroy(d, st[i]);
            }
            dev_free(d, da); dev_free(d, db);
            free(fa); free(fb); free(ra); free(rb); free(ha); free(hb);
        }
    char det[2048];
    d->be->describe_determinism(d, det, sizeof det);
    printf("  %s\n", det);
    dev_set_numerics(d, NUMERICS_FAST, 0, &e);
    dev_close(d);
}

/* PLUMB_GRAPH_DUMP (src/gpu/graph_dump.cu): a captured graph of a memset, a
 * cuBLASLt GEMM and our cast is written one node a line, the memset with its
 * size, every kernel named (the GEMM's through the driver, since cuBLASLt's
 * kernels are not ours), and totals that agree with the lines. The graph
 * still replays and computes. */
TEST(gpu_graph_dump_names_nodes)
{
    struct dev *d = NULL;
    OPEN_GPU_OR_SKIP(d);
    plumb_err e = {0};
    if (!d->be->graph_begin || !strncmp(test_device(), "hip", 3)) {
        dev_close(d);
        TEST_SKIP("graph dumps are written by the cuda build only");
    }
    enum { N = 64 };
    float *ha = malloc(N * N * 4), *hc = malloc(N * N * 4);
    REQUIRE(ha && hc);
    for (int i = 0; i < N * N; i++) ha[i] = (float)((i * 7) % 13) - 6.0f;
    float *da = dev_put(d, ha, N * N * 4), *dc = NULL;
    uint16_t *d16 = NULL;
    REQUIRE(da && dev_alloc(d, N * N * 4, (void **)&dc, &e) == PLUMB_OK &&
            dev_alloc(d, N * N * 2, (void **)&d16, &e) == PLUMB_OK);
    char path[1100];
    snprintf(path, sizeof path, "%s/graph_dump.txt", test_tmpdir());
    unlink(path);
    setenv("PLUMB_GRAPH_DUMP", path, 1);
    dev_graph *g = NULL;
    REQUIRE(d->be->graph_begin(d, NULL, &e) == PLUMB_OK);
    int rc = d->be->memset_async(d, NULL, dc, 0, 256, &e);
    struct gemm_desc gd = {.m = N, .n = N, .k = N, .ab_type = DT_F32, .a = da, .lda = N, .b = da, .ldb = N,
                           .c = dc, .ldc = N};
    if (!rc) rc = d->ops->gemm(d, NULL, &gd);
    if (!rc) rc = d->ops->cast(d, NULL, dc, DT_F32, d16, DT_BF16, N * N);
    const int erc = d->be->graph_end(d, NULL, &g, &e);
    unsetenv("PLUMB_GRAPH_DUMP");
    CHECK_MSG(rc == PLUMB_OK && erc == PLUMB_OK && g, "capture: %d %d %s", rc, erc, e.msg);
    if (g) {
        CHECK(d->be->graph_launch(d, g, NULL, &e) == PLUMB_OK);
        CHECK(d->be->stream_sync(d, NULL, &e) == PLUMB_OK);
        CHECK(dev_download(d, hc, dc, N * N * 4, &e) == PLUMB_OK);
        double want = 0; /* c[0][0] = sum_k a[0][k] a[k][0], exact in fp32 */
        for (int k = 0; k < N; k++) want += (double)ha[k] * ha[k * N];
        CHECK_MSG(hc[0] == (float)want, "the replayed GEMM's c[0][0] = %g, want %g", hc[0], want);
        d->be->graph_destroy(d, g);
    }
    char *text = NULL;
    size_t len = 0;
    CHECK_MSG(file_read_all(path, &text, &len, &e) == PLUMB_OK, "%s", e.msg);
    if (text) {
        int heads = 0, nk = 0, nm = 0, m256 = 0, unnamed = 0, cast = 0, tk = -1, tm = -1, tok = 0;
        for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
            if (!strncmp(line, "# graph ", 8)) heads++;
            else if (sscanf(line, "# totals: %d kernels, %d memsets", &tk, &tm) == 2) tok = 1;
            else if (line[0] == 'K') {
                nk++;
                char name[512] = "";
                if (sscanf(line, "K %*d %511s", name) != 1 || !strcmp(name, "?")) unnamed++;
                if (strstr(name, "k_cast")) cast++;
            } else if (line[0] == 'M') {
                nm++;
                if (strstr(line, "bytes=256 value=0")) m256++;
            }
        }
        CHECK_EQ_INT(heads, 1);
        CHECK_MSG(tok && tk == nk && tm == nm, "totals %d kernels %d memsets against %d and %d lines", tk, tm, nk, nm);
        CHECK_MSG(m256 == 1, "%d memset lines of 256 bytes (want 1)", m256);
        CHECK_MSG(nk >= 2 && cast == 1 && unnamed == 0, "%d kernels, %d named k_cast*, %d unnamed", nk, cast, unnamed);
        free(text);
    }
    dev_free(d, da);
    dev_free(d, dc);
    dev_free(d, d16);
    free(ha);
    free(hc);
    dev_close(d);
}
