/* Numerics ops of the op table (rng, gemm, sum, softmax, layernorm, unary,
 * cast) against float64 references in fast and golden mode; golden results
 * equal to core/gmath.h's definitions and bit-identical for 1, 2 and 3
 * threads; the numerics and rng checks end to end. Runs on test_device()
 * through device memory, so GPU backends run it too. */
#include "test.h"
#include "accept/checks.h"
#include "core/gmath.h"
#include "core/hash.h"
#include "core/jsonx.h"
#include "core/philox.h"
#include "dev/dev.h"
#include <float.h>
#include <stdint.h>
#include <stdlib.h>

static struct dev *nopen(enum numerics mode, int threads)
{
    struct dev *d = NULL;
    plumb_err e = {0};
    if (dev_open(test_device(), &d, &e)) return NULL;
    d->threads = threads;
    if (dev_set_numerics(d, mode, 0, &e)) {
        dev_close(d);
        return NULL;
    }
    return d;
}
#define NOPEN(d, mode, thr)                                                          \
    struct dev *d = nopen(mode, thr);                                                \
    if (!d) TEST_SKIP("cannot open device %s", test_device());

static void *up(struct dev *d, const void *h, size_t bytes)
{
    void *p = NULL;
    plumb_err e = {0};
    if (dev_alloc(d, bytes ? bytes : 4, &p, &e)) return NULL;
    if (h && bytes) dev_upload(d, p, h, bytes, &e);
    return p;
}
static void down(struct dev *d, void *h, const void *p, size_t bytes)
{
    plumb_err e = {0};
    dev_sync(d, &e);
    dev_download(d, h, p, bytes, &e);
}

static void fill(float *x, size_t n, uint32_t a, float lo, float hi)
{
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * philox_uniform_at(99, RNG_DATA, a, 0, i);
}

TEST(numerics_rng_ops_match_header)
{
    for (int thr = 1; thr <= 3; thr++) {
        NOPEN(d, NUMERICS_GOLDEN, thr);
        struct rng_stream st = {0x1234567890ull, RNG_DROPOUT, 5, 6};
        size_t n = 100003;
        uint64_t first = ((uint64_t)1 << 33) + 3; /* odd start, high counter bits */
        uint32_t *u = malloc(n * 4);
        float *f = malloc(n * 4), *g = malloc(n * 4);
        void *p = up(d, NULL, n * 4);
        REQUIRE(p && u && f && g);
        REQUIRE(d->ops->rng_u32(d, NULL, &st, first, p, n) == 0);
        down(d, u, p, n * 4);
        REQUIRE(d->ops->rng_uniform(d, NULL, &st, first, p, n) == 0);
        down(d, f, p, n * 4);
        REQUIRE(d->ops->rng_normal(d, NULL, &st, first, p, n) == 0);
        down(d, g, p, n * 4);
        int bad = 0;
        for (size_t i = 0; i < n; i += (i < 100 ? 1 : 997)) {
            uint64_t idx = first + i;
            bad += u[i] != philox_u32_at(st.seed, st.purpose, st.a, st.b, idx);
            bad += f32_bits(f[i]) != f32_bits(philox_uniform_at(st.seed, st.purpose, st.a, st.b, idx));
            bad += f32_bits(g[i]) != f32_bits(philox_normal_at(st.seed, st.purpose, st.a, st.b, idx));
        }
        CHECK_MSG(bad == 0, "threads %d: %d values differ from core/philox.h", thr, bad);
        /* zero-length and an index past 2^50 */
        CHECK(d->ops->rng_u32(d, NULL, &st, 0, p, 0) == 0);
        CHECK(d->ops->rng_u32(d, NULL, &st, (uint64_t)1 << 50, p, 4) != 0);
        dev_free(d, p);
        free(u);
        free(f);
        free(g);
        dev_close(d);
    }
}

struct gshape { int m, n, k, ta, tb, acc; };

/* C = A B (+C) in float64 from the stored inputs; logical A[i,p], B[p,j] */
static double ref_gemm(const float *A, const float *B, const float *C0, const struct gshape *s, int i, int j)
{
    double acc = s->acc ? C0[(size_t)i * s->n + j] : 0;
    for (int p = 0; p < s->k; p++) {
        double a = s->ta ? A[(size_t)p * s->m + i] : A[(size_t)i * s->k + p];
        double b = s->tb ? B[(size_t)j * s->k + p] : B[(size_t)p * s->n + j];
        acc += a * b;
    }
    return acc;
}

static void run_gemm(struct dev *d, dtype_t dt, const struct gshape *s, const float *A, const float *B,
                     const float *C0, float *C)
{
    size_t na = (size_t)s->m * s->k, nb = (size_t)s->k * s->n, nc = (size_t)s->m * s->n;
    size_t es = dtype_size(dt);
    uint16_t *ha = malloc(na * 2 + 2), *hb = malloc(nb * 2 + 2);
    for (size_t i = 0; i < na; i++) ha[i] = dt == DT_BF16 ? f32_to_bf16(A[i]) : f32_to_f16(A[i]);
    for (size_t i = 0; i < nb; i++) hb[i] = dt == DT_BF16 ? f32_to_bf16(B[i]) : f32_to_f16(B[i]);
    void *da = up(d, dt == DT_F32 ? (const void *)A : ha, na * es), *db = up(d, dt == DT_F32 ? (const void *)B : hb, nb * es);
    float *dc = up(d, C0, nc * 4);
    struct gemm_desc g = {.m = s->m, .n = s->n, .k = s->k, .trans_a = s->ta, .trans_b = s->tb, .ab_type = dt,
                          .a = da, .lda = s->ta ? s->m : s->k, .b = db, .ldb = s->tb ? s->k : s->n,
                          .c = dc, .ldc = s->n, .accumulate = s->acc};
    CHECK(d->ops->gemm(d, NULL, &g) == 0);
    down(d, C, dc, nc * 4);
    dev_free(d, da);
    dev_free(d, db);
    dev_free(d, dc);
    free(ha);
    free(hb);
}

TEST(numerics_gemm_vs_float64_and_golden_definition)
{
    struct gshape shapes[] = {{1, 1, 1, 0, 0, 0}, {17, 33, 65, 0, 0, 0}, {64, 300, 31, 1, 0, 1},
                              {9, 7, 130, 0, 1, 0}, {33, 17, 40, 1, 1, 1}, {5, 6, 0, 0, 0, 1}};
    dtype_t dts[] = {DT_F32, DT_BF16, DT_F16};
    for (int mode = 0; mode < 2; mode++) {
        NOPEN(d, mode ? NUMERICS_GOLDEN : NUMERICS_FAST, 0);
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            const struct gshape *s = &shapes[si];
            size_t na = (size_t)s->m * s->k, nb = (size_t)s->k * s->n, nc = (size_t)s->m * s->n;
            float *A = malloc(na * 4 + 4), *B = malloc(nb * 4 + 4), *C0 = malloc(nc * 4), *C = malloc(nc * 4);
            fill(A, na, 1, -1, 1);
            fill(B, nb, 2, -1, 1);
            fill(C0, nc, 3, -1, 1);
            for (int t = 0; t < 3; t++) {
                dtype_t dt = dts[t];
                /* the inputs the device sees, widened */
                float *Aw = malloc(na * 4 + 4), *Bw = malloc(nb * 4 + 4);
                for (size_t i = 0; i < na; i++)
                    Aw[i] = dt == DT_F32 ? A[i] : dt == DT_BF16 ? bf16_to_f32(f32_to_bf16(A[i])) : f16_to_f32(f32_to_f16(A[i]));
                for (size_t i = 0; i < nb; i++)
                    Bw[i] = dt == DT_F32 ? B[i] : dt == DT_BF16 ? bf16_to_f32(f32_to_bf16(B[i])) : f16_to_f32(f32_to_f16(B[i]));
                run_gemm(d, dt, s, A, B, C0, C);
                double se = 0, sr = 0;
                int def_bad = 0;
                for (int i = 0; i < s->m; i++)
                    for (int j = 0; j < s->n; j++) {
                        double r = ref_gemm(Aw, Bw, C0, s, i, j), y = C[(size_t)i * s->n + j];
                        se += (y - r) * (y - r);
                        sr += r * r;
                        if (mode) { /* golden: exactly the gmath element definition */
                            float acc = ggemm_dot(s->ta ? Aw + i : Aw + (size_t)i * s->k, s->ta ? (size_t)s->m : 1,
                                                  s->tb ? Bw + (size_t)j * s->k : Bw + j, s->tb ? 1 : (size_t)s->n, s->k);
                            float want = s->acc ? C0[(size_t)i * s->n + j] + acc : acc;
                            def_bad += f32_bits(want) != f32_bits((float)y);
                        }
                    }
                double rel = sr > 0 ? sqrt(se / sr) : sqrt(se);
                CHECK_MSG(rel < 1e-6, "%s gemm %s %dx%dx%d: norm rel %g", mode ? "golden" : "fast", dtype_name(dt), s->m,
                          s->n, s->k, rel);
                CHECK_MSG(def_bad == 0, "golden gemm %s %dx%dx%d: %d elements differ from ggemm_dot", dtype_name(dt), s->m,
                          s->n, s->k, def_bad);
                free(Aw);
                free(Bw);
            }
            free(A);
            free(B);
            free(C0);
            free(C);
        }
        dev_close(d);
    }
}

/* golden output of a whole op with `threads` threads */
static void golden_gemm_threads(int threads, float *C)
{
    struct dev *d = nopen(NUMERICS_GOLDEN, threads);
    if (!d) return;
    struct gshape s = {130, 70, 300, 0, 0, 0};
    float *A = malloc(130 * 300 * 4), *B = malloc(300 * 70 * 4), *C0 = calloc(130 * 70, 4);
    fill(A, 130 * 300, 4, -1, 1);
    fill(B, 300 * 70, 5, -1, 1);
    run_gemm(d, DT_BF16, &s, A, B, C0, C);
    free(A);
    free(B);
    free(C0);
    dev_close(d);
}

TEST(numerics_golden_thread_count_independent)
{
    float *c1 = malloc(130 * 70 * 4), *c2 = malloc(130 * 70 * 4), *c3 = malloc(130 * 70 * 4);
    golden_gemm_threads(1, c1);
    golden_gemm_threads(2, c2);
    golden_gemm_threads(3, c3);
    CHECK(!memcmp(c1, c2, 130 * 70 * 4) && !memcmp(c1, c3, 130 * 70 * 4));
    free(c1);
    free(c2);
    free(c3);
    /* sum of 3e6 + 17 elements (several 2^16 chunks and a partial one) */
    size_t n = 3000017;
    float *x = malloc(n * 4);
    fill(x, n, 6, -1, 1.5f);
    float want = gsum(x, n), got[4];
    for (int t = 1; t <= 3; t++) {
        NOPEN(d, NUMERICS_GOLDEN, t);
        float *dx = up(d, x, n * 4), *ds = up(d, NULL, 4);
        REQUIRE(d->ops->sum(d, NULL, dx, n, ds) == 0);
        down(d, &got[t], ds, 4);
        CHECK_MSG(f32_bits(got[t]) == f32_bits(want), "threads %d: %a vs gsum %a", t, got[t], want);
        dev_free(d, dx);
        dev_free(d, ds);
        dev_close(d);
    }
    double ref = 0, mag = 0;
    for (size_t i = 0; i < n; i++) ref += x[i], mag += fabs(x[i]);
    CHECK(fabs(want - ref) <= 22 * 0x1p-24 * mag);
    free(x);
}

/* Fast sum (src/dev/cpu_op_reduce.c): the array is cut into 2^16-element
 * chunks; chunk c's element i goes to fp32 lane i mod 16 (one chain per
 * lane, the last n % 16 elements of a chunk through the tail loop), the 16
 * lanes are added in double and rounded to fp32, the chunk sums added in
 * double and the total rounded to fp32. Two bounds, from that analysis:
 *  1. Exact data: every x_i a multiple of 1/2 with sum |x_i| < 2^23, so every
 *     partial sum (in any order, lanes and chunks alike) is a multiple of 1/2
 *     below 2^23 and representable in fp32: every addition is exact and the
 *     result is the exact sum, bit for bit. Error bound 0, whatever the order,
 *     so it holds for a GPU's fast sum too; one element lost or counted twice
 *     (e.g. the tail loop skipped) shows.
 *  2. Random data: to first order the error is E = sum_k d_k s_k + (rounding
 *     of the chunk sums and the total), s_k running over every fp32 partial
 *     sum of the lanes, |d_k| <= u = 2^-24. Deterministically |E| <= u sum|s_k|
 *     (~90 here, useless); with the d_k independent and mean zero (the
 *     probabilistic model of Higham & Mary, SIAM J. Sci. Comput. 2019),
 *     Hoeffding gives |E| <= lambda u sqrt(sum s_k^2) except with probability
 *     2 exp(-lambda^2 / 2): lambda = 8 (1e-14). Plus u |s_c| per chunk and
 *     u |s| for the total (deterministic). s_k are taken as the exact partial
 *     sums (first order). A device whose fast sum has shorter chains (a GPU's
 *     grid-stride partials, then a tree) has smaller running sums, so the
 *     bound is generous for it. */
static void fast_sum_case(struct dev *d, const float *x, size_t n, int exact, double *err_out, double *bound_out)
{
    float *dx = up(d, x, n * 4), *ds = up(d, NULL, 4);
    float f1 = 0, f2 = 0;
    REQUIRE(d->ops->sum(d, NULL, dx, n, ds) == 0);
    down(d, &f1, ds, 4);
    REQUIRE(d->ops->sum(d, NULL, dx, n, ds) == 0);
    down(d, &f2, ds, 4);
    CHECK_MSG(f32_bits(f1) == f32_bits(f2), "fast sum of %zu not deterministic: %a vs %a", n, f1, f2);
    const size_t C = (size_t)1 << 16;
    double ref = 0, ss = 0, chunks = 0;
    for (size_t c0 = 0; c0 < n; c0 += C) {
        const size_t c1 = n - c0 < C ? n : c0 + C;
        double lane[16] = {0}, sc = 0;
        for (size_t i = c0; i < c1; i++) {
            double *l = &lane[(i - c0) % 16];
            *l += x[i];
            if (i - c0 >= 16) ss += *l * *l; /* the first element of a lane is no addition */
            sc += x[i];
        }
        chunks += fabs(sc);
        ref += sc;
    }
    const double u = 0x1p-24;
    double bound = exact ? 0 : 8 * u * sqrt(ss) + u * chunks + u * fabs(ref);
    double err = fabs((double)f1 - ref);
    CHECK_MSG(err <= bound, "fast sum of %zu (%s data): error %.3g, bound %.3g (sum %.9g, got %.9g)", n,
              exact ? "exact" : "random", err, bound, ref, (double)f1);
    *err_out = err;
    *bound_out = bound;
    dev_free(d, dx);
    dev_free(d, ds);
}

TEST(numerics_fast_sum_error_bound)
{
    NOPEN(d, NUMERICS_FAST, 2);
    /* lengths: several chunks with a last chunk of n % 16 = 15 (3000015: 45
     * chunks and 50895 elements) or 1 (3000017); one chunk, with a tail
     * (4111 = 256 * 16 + 15), without (4096), shorter than a lane group (9) */
    const size_t ns[] = {3000015, 3000017, 4111, 4096, 9};
    size_t nmax = 3000017;
    float *x = malloc(nmax * 4);
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        const size_t n = ns[k];
        double err, bound;
        /* exact: x_i in {-1, -1/2, ..., 3/2} (sum |x_i| <= 1.5 n < 2^23); the
         * last 15 elements large, so a lost tail cannot cancel out */
        for (size_t i = 0; i < n; i++) x[i] = (float)((int)(philox_uniform_at(7, RNG_DATA, 1, 0, i) * 6.0f) - 2) * 0.5f;
        for (size_t i = n > 15 ? n - 15 : 0; i < n; i++) x[i] = 1.5f;
        fast_sum_case(d, x, n, 1, &err, &bound);
        fill(x, n, 6, -1, 1.5f);
        fast_sum_case(d, x, n, 0, &err, &bound);
        fprintf(stderr, "  n=%zu: random data error %.3g, bound %.3g\n", n, err, bound);
    }
    free(x);
    dev_close(d);
}

TEST(numerics_softmax_layernorm)
{
    int rows = 67, cols = 301;
    size_t n = (size_t)rows * cols;
    float *x = malloc(n * 4), *y = malloc(n * 4), *w = malloc(cols * 4), *b = malloc(cols * 4);
    float mean[67], rstd[67];
    fill(x, n, 7, -12, 9);
    fill(w, cols, 8, 0.5f, 1.5f);
    fill(b, cols, 9, -1, 1);
    for (int mode = 0; mode < 2; mode++) {
        NOPEN(d, mode ? NUMERICS_GOLDEN : NUMERICS_FAST, 0);
        float *dx = up(d, x, n * 4), *dy = up(d, NULL, n * 4), *dw = up(d, w, cols * 4), *db = up(d, b, cols * 4);
        float *dm = up(d, NULL, rows * 4), *dr = up(d, NULL, rows * 4);
        REQUIRE(d->ops->softmax(d, NULL, dx, dy, rows, cols) == 0);
        down(d, y, dy, n * 4);
        double worst = 0;
        int def_bad = 0;
        float row[301];
        for (int r = 0; r < rows; r++) {
            const float *xr = x + (size_t)r * cols;
            double m = -INFINITY, s = 0;
            for (int j = 0; j < cols; j++) m = fmax(m, xr[j]);
            for (int j = 0; j < cols; j++) s += exp(xr[j] - m);
            for (int j = 0; j < cols; j++) {
                double ref = exp(xr[j] - m) / s;
                worst = fmax(worst, fabs(y[(size_t)r * cols + j] - ref) / ref);
            }
            if (mode) {
                gsoftmax_row(xr, row, cols);
                def_bad += memcmp(row, y + (size_t)r * cols, cols * 4) != 0;
            }
        }
        CHECK_MSG(worst < 5e-6, "%s softmax max rel %g", mode ? "golden" : "fast", worst);
        CHECK(def_bad == 0);
        REQUIRE(d->ops->layernorm(d, NULL, dx, dw, db, dy, dm, dr, rows, cols, 1e-5f) == 0);
        down(d, y, dy, n * 4);
        down(d, mean, dm, rows * 4);
        down(d, rstd, dr, rows * 4);
        double se = 0, sr = 0;
        for (int r = 0; r < rows; r++) {
            const float *xr = x + (size_t)r * cols;
            double mu = 0, var = 0;
            for (int j = 0; j < cols; j++) mu += xr[j];
            mu /= cols;
            for (int j = 0; j < cols; j++) var += (xr[j] - mu) * (xr[j] - mu);
            var /= cols;
            double rs = 1 / sqrt(var + 1e-5);
            CHECK_NEAR(mean[r], mu, 1e-5 * (1 + fabs(mu)));
            CHECK_NEAR(rstd[r], rs, 1e-5 * rs);
            for (int j = 0; j < cols; j++) {
                double ref = (xr[j] - mu) * rs * w[j] + b[j], e = y[(size_t)r * cols + j] - ref;
                se += e * e;
                sr += ref * ref;
            }
            if (mode) {
                float m1, r1;
                glayernorm_row(xr, w, b, row, cols, 1e-5f, &m1, &r1);
                CHECK(!memcmp(row, y + (size_t)r * cols, cols * 4) && f32_bits(m1) == f32_bits(mean[r]) &&
                      f32_bits(r1) == f32_bits(rstd[r]));
            }
        }
        CHECK_MSG(sqrt(se / sr) < 1e-6, "%s layernorm norm rel %g", mode ? "golden" : "fast", sqrt(se / sr));
        dev_free(d, dx);
        dev_free(d, dy);
        dev_free(d, dw);
        dev_free(d, db);
        dev_free(d, dm);
        dev_free(d, dr);
        dev_close(d);
    }
    free(x);
    free(y);
    free(w);
    free(b);
}

static double gelu_ref(double x) { return x / (1 + exp(-2 * sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

TEST(numerics_unary_and_cast)
{
    size_t n = 200000;
    float *x = malloc(n * 4), *y = malloc(n * 4);
    float (*gf[])(float) = {gexpf, glogf, gtanhf, gerff, ggeluf};
    double (*rf[])(double) = {exp, log, tanh, erf, gelu_ref};
    float lo[] = {-87, 1e-30f, -9, -4.5f, -5}, hi[] = {88, 1e30f, 9, 4.5f, 5};
    double max_ulp[] = {4, 4, 4, 4, 64};
    for (int mode = 0; mode < 2; mode++) {
        NOPEN(d, mode ? NUMERICS_GOLDEN : NUMERICS_FAST, 0);
        float *dx = up(d, NULL, n * 4), *dy = up(d, NULL, n * 4);
        for (int op = 0; op < UNARY_COUNT; op++) {
            if (op == UNARY_LOG)
                for (size_t i = 0; i < n; i++) x[i] = expf(-69 + 138 * philox_uniform_at(3, RNG_DATA, 9, 9, i));
            else
                fill(x, n, 10 + op, lo[op], hi[op]);
            dev_upload(d, dx, x, n * 4, &(plumb_err){0});
            REQUIRE(d->ops->unary(d, NULL, (enum unary_op)op, dx, dy, n) == 0);
            down(d, y, dy, n * 4);
            double worst = 0;
            int def_bad = 0;
            for (size_t i = 0; i < n; i++) {
                double r = rf[op](x[i]);
                int ex;
                frexp(fabs(r), &ex);
                double ulp = fabs(r) < FLT_MIN ? 0x1p-149 : ldexp(1, ex - 24);
                worst = fmax(worst, fabs(y[i] - r) / ulp);
                if (mode) def_bad += f32_bits(y[i]) != f32_bits(gf[op](x[i]));
            }
            CHECK_MSG(worst <= max_ulp[op], "%s unary %d: %.2f ulp", mode ? "golden" : "fast", op, worst);
            CHECK_MSG(def_bad == 0, "golden unary %d differs from gmath in %d elements", op, def_bad);
        }
        /* casts: fp32 -> bf16/fp16 RNE and back exactly */
        uint16_t *h = malloc(n * 2);
        fill(x, n, 30, -70000, 70000);
        x[0] = 1.0f + 0x1p-8f;         /* tie in bf16: rounds to even 1.0 */
        x[1] = 1.0f + 3 * 0x1p-8f;     /* tie: rounds up to 1 + 2^-6 */
        x[2] = 65520.0f;               /* fp16: rounds to inf */
        x[3] = 0x1p-25f;               /* fp16: tie with 0 -> 0 */
        x[4] = 0x1.8p-25f;             /* fp16: above the tie -> smallest subnormal */
        dev_upload(d, dx, x, n * 4, &(plumb_err){0});
        uint16_t *dh = up(d, NULL, n * 2);
        for (int t = 0; t < 2; t++) {
            dtype_t nt = t ? DT_F16 : DT_BF16;
            REQUIRE(d->ops->cast(d, NULL, dx, DT_F32, dh, nt, n) == 0);
            down(d, h, dh, n * 2);
            int bad = 0;
            for (size_t i = 0; i < n; i++) bad += h[i] != (nt == DT_F16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]));
            CHECK(bad == 0);
            REQUIRE(d->ops->cast(d, NULL, dh, nt, dy, DT_F32, n) == 0);
            down(d, y, dy, n * 4);
            for (size_t i = 0; i < n; i++) bad += f32_bits(y[i]) != f32_bits(nt == DT_F16 ? f16_to_f32(h[i]) : bf16_to_f32(h[i]));
            CHECK(bad == 0);
            if (nt == DT_BF16) {
                CHECK(y[0] == 1.0f && y[1] == 1.0f + 0x1p-6f);
            } else {
                CHECK(isinf(y[2]) && y[3] == 0.0f && y[4] == 0x1p-24f);
            }
        }
        CHECK(d->ops->cast(d, NULL, dx, DT_I32, dh, DT_F16, n) == PLUMB_EUNSUPPORTED);
        free(h);
        dev_free(d, dh);
        dev_free(d, dx);
        dev_free(d, dy);
        dev_close(d);
    }
    free(x);
    free(y);
}

TEST(numerics_check_golden_end_to_end)
{
    struct check_ctx ctx = {.run_dir = NULL, .device = test_device(), .level = "quick", .threads = 0};
    struct check_result r;
    plumb_err e = {0};
    REQUIRE(check_numerics_run(&ctx, "golden", 0, &r, &e) == 0);
    CHECK_STREQ(json_string_value(json_object_get(r.obj, "status")), "pass");
    json_t *ops = json_object_get(json_object_get(r.obj, "details"), "ops");
    CHECK(json_array_size(ops) == 26);
    size_t i;
    json_t *o;
    int have_sum = 0, have_short = 0;
    json_array_foreach(ops, i, o)
    {
        CHECK(strlen(json_string_value(json_object_get(o, "digest"))) == 64);
        CHECK(json_is_true(json_object_get(o, "deterministic")));
        if (!strcmp(json_string_value(json_object_get(o, "op")), "sum")) {
            const char *sh = json_string_value(json_object_get(o, "shape"));
            have_sum += !strcmp(sh, "10000015");
            have_short += !strcmp(sh, "4111");
        }
    }
    CHECK(have_sum == 1 && have_short == 1);
    check_free(&r);
    CHECK(check_numerics_run(&ctx, "turbo", 0, &r, &e) == PLUMB_EUSAGE);
    CHECK(strstr(e.msg, "turbo") != NULL);
}

TEST(numerics_check_rng_end_to_end)
{
    struct check_ctx ctx = {.run_dir = test_tmpdir(), .device = test_device(), .level = "quick", .threads = 0};
    struct check_result r;
    plumb_err e = {0};
    REQUIRE(check_rng_run(&ctx, 20000, &r, &e) == 0);
    CHECK_STREQ(json_string_value(json_object_get(r.obj, "status")), "pass");
    json_t *det = json_object_get(r.obj, "details");
    CHECK(json_array_size(json_object_get(det, "kat")) == 3);
    json_t *s0 = json_array_get(json_object_get(det, "streams"), 0);
    /* the digest is the SHA-256 of the raw words, computable here */
    uint32_t *w = malloc(20000 * 4);
    for (size_t i = 0; i < 20000; i++) w[i] = philox_u32_at(2024, RNG_INIT, 0, 0, i);
    char dg[65];
    hash_sha256_hex(w, 20000 * 4, dg);
    CHECK_STREQ(json_string_value(json_object_get(s0, "digest_u32")), dg);
    free(w);
    /* artifacts go to checks/rng[-<device label, ':' as '-'>] (cuda -> rng-cuda-0) */
    char path[1024], dev[64];
    snprintf(dev, sizeof dev, "%s", json_string_value(json_object_get(r.obj, "device")));
    for (char *q = dev; *q; q++)
        if (*q == ':') *q = '-';
    snprintf(path, sizeof path, "%s/checks/rng%s%s/histograms.json", test_tmpdir(), strcmp(dev, "cpu") ? "-" : "",
             strcmp(dev, "cpu") ? dev : "");
    json_t *h = NULL;
    REQUIRE(jsonx_read_file(path, &h, &e) == 0);
    json_t *hs = json_object_get(h, "streams");
    CHECK(json_array_size(hs) == 10);
    json_t *first = json_array_get(hs, 0);
    CHECK_STREQ(json_string_value(json_object_get(first, "kind")), "uniform");
    CHECK(json_array_size(json_object_get(first, "counts")) == json_array_size(json_object_get(first, "expected")));
    json_decref(h);
    check_free(&r);
    CHECK(check_rng_run(&ctx, 5, &r, &e) == PLUMB_EUSAGE);
}
