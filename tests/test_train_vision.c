/* Vision training ops (dev/train_ops.h "vision ops"): convolution, batch
 * normalisation, pooling, add, softmax cross-entropy.
 * Each op against a float64 reference written here, backward passes
 * against float64 adjoints and central finite differences of the float64
 * forward, golden results bit-identical to the scalar element definitions
 * of dev/train_vision.h and across thread counts, fast within stated bounds
 * of the reference, and BatchNorm's fixed-point partial sums: any split of
 * the rows adds up to the whole batch's bits. Runs on test_device() through
 * device memory, so a GPU backend runs it too. */
#include "test.h"
#include "dev/dev.h"
#include "dev/train_ops.h"
#include "dev/train_vision.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rs = 0x2545f4914f6cdd1dull;
static double urand(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (double)(rs >> 11) * (1.0 / 9007199254740992.0);
}
static float *rnd(size_t n, double lo, double hi)
{
    float *x = malloc(n * sizeof(float) + 4);
    for (size_t i = 0; i < n; i++) x[i] = (float)(lo + (hi - lo) * urand());
    return x;
}
static void round_all(float *x, size_t n, dtype_t rt)
{
    for (size_t i = 0; i < n; i++) x[i] = tv_round(x[i], rt);
}

static struct dev *open_dev(enum numerics mode, int threads)
{
    struct dev *d = NULL;
    plumb_err e = {0};
    if (dev_open(test_device(), &d, &e)) return NULL;
    if (dev_set_numerics(d, mode, 0, &e) || !d->ops->train || !d->ops->train->conv2d_fwd) {
        dev_close(d);
        return NULL;
    }
    d->threads = threads;
    return d;
}
#define OPEN(d, mode, thr)                                                                             \
    struct dev *d = open_dev(mode, thr);                                                               \
    if (!d) TEST_SKIP("device %s has no vision training ops", test_device());

static void *dput(struct dev *d, const void *h, size_t bytes)
{
    void *p = NULL;
    plumb_err e = {0};
    if (dev_alloc(d, bytes ? bytes : 4, &p, &e)) return NULL;
    if (h && bytes) {
        if (dev_upload(d, p, h, bytes, &e)) return NULL;
    } else if (bytes) {
        void *z = calloc(1, bytes);
        dev_upload(d, p, z, bytes, &e);
        free(z);
    }
    return p;
}
static void dget(struct dev *d, void *h, const void *p, size_t bytes)
{
    plumb_err e = {0};
    dev_sync(d, &e);
    dev_download(d, h, p, bytes, &e);
}
#define PUT(d, h, n) dput(d, h, (n) * sizeof *(h))
#define ZEROS(d, n) dput(d, NULL, (n) * sizeof(float))

/* ================= convolution ================= */

static double x_at(const struct train_conv *g, const double *x, int n, int h, int w, int c)
{
    if (h < 0 || h >= g->H || w < 0 || w >= g->W) return 0.0;
    return x[(((size_t)n * g->H + h) * g->W + w) * g->C + c];
}
/* y64 = conv(x64, w64) */
static void conv_ref(const struct train_conv *g, const double *x, const double *w, double *y)
{
    for (int n = 0; n < g->N; n++)
        for (int p = 0; p < g->P; p++)
            for (int q = 0; q < g->Q; q++)
                for (int k = 0; k < g->K; k++) {
                    double a = 0;
                    for (int r = 0; r < g->R; r++)
                        for (int s = 0; s < g->S; s++)
                            for (int c = 0; c < g->C; c++)
                                a += x_at(g, x, n, p * g->stride - g->pad + r, q * g->stride - g->pad + s, c) *
                                     w[(((size_t)k * g->R + r) * g->S + s) * g->C + c];
                    y[(((size_t)n * g->P + p) * g->Q + q) * g->K + k] = a;
                }
}
/* L = sum R * conv(x, w): dL/dx and dL/dw by the float64 adjoint */
static void conv_ref_adjoint(const struct train_conv *g, const double *x, const double *w, const double *R,
                             double *dx, double *dw)
{
    size_t nx = (size_t)g->N * g->H * g->W * g->C, nw = (size_t)g->K * g->R * g->S * g->C;
    memset(dx, 0, nx * sizeof(double));
    memset(dw, 0, nw * sizeof(double));
    for (int n = 0; n < g->N; n++)
        for (int p = 0; p < g->P; p++)
            for (int q = 0; q < g->Q; q++)
                for (int k = 0; k < g->K; k++) {
                    double gy = R[(((size_t)n * g->P + p) * g->Q + q) * g->K + k];
                    for (int r = 0; r < g->R; r++)
                        for (int s = 0; s < g->S; s++) {
                            int h = p * g->stride - g->pad + r, ww = q * g->stride - g->pad + s;
                            if (h < 0 || h >= g->H || ww < 0 || ww >= g->W) continue;
                            for (int c = 0; c < g->C; c++) {
                                size_t xi = (((size_t)n * g->H + h) * g->W + ww) * g->C + c;
                                size_t wi = (((size_t)k * g->R + r) * g->S + s) * g->C + c;
                                dx[xi] += gy * w[wi];
                                dw[wi] += gy * x[xi];
                            }
                        }
                }
}

static double *to64(const float *x, size_t n)
{
    double *y = malloc(n * sizeof(double) + 8);
    for (size_t i = 0; i < n; i++) y[i] = x[i];
    return y;
}
static double dot64(const double *a, const double *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* max |a - ref| / (|ref| + floor) */
static double max_rel(const float *a, const double *ref, size_t n, double floor, size_t *where)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double r = fabs((double)a[i] - ref[i]) / (fabs(ref[i]) + floor);
        if (!(r <= worst)) {
            worst = r;
            if (where) *where = i;
        }
    }
    return worst;
}

static void conv_case(enum numerics mode, int N, int H, int W, int C, int K, int RS, int stride, int pad, dtype_t rt)
{
    OPEN(d, mode, 0);
    struct train_conv g;
    REQUIRE(train_conv_set(&g, N, H, W, C, K, RS, RS, stride, pad) == 0);
    size_t nx = (size_t)N * H * W * C, nw = (size_t)K * RS * RS * C, ny = (size_t)N * g.P * g.Q * K;
    float *x = rnd(nx, -1, 1), *w = rnd(nw, -0.5, 0.5), *R = rnd(ny, -1, 1);
    round_all(x, nx, rt), round_all(w, nw, rt), round_all(R, ny, rt);
    double *x64 = to64(x, nx), *w64 = to64(w, nw), *R64 = to64(R, ny);
    double *y64 = malloc(ny * 8), *dx64 = malloc(nx * 8), *dw64 = malloc(nw * 8);
    conv_ref(&g, x64, w64, y64);
    conv_ref_adjoint(&g, x64, w64, R64, dx64, dw64);
    /* the adjoint against central differences of the float64 forward (the reference's own check) */
    for (int t = 0; t < 3; t++) {
        size_t i = (size_t)(urand() * nx), j = (size_t)(urand() * nw);
        double hh = 1e-3, save = x64[i];
        double *yp = malloc(ny * 8);
        x64[i] = save + hh;
        conv_ref(&g, x64, w64, yp);
        double lp = dot64(yp, R64, ny);
        x64[i] = save - hh;
        conv_ref(&g, x64, w64, yp);
        double lm = dot64(yp, R64, ny);
        x64[i] = save;
        CHECK_NEAR((lp - lm) / (2 * hh), dx64[i], 1e-6 * (1 + fabs(dx64[i])));
        save = w64[j];
        w64[j] = save + hh;
        conv_ref(&g, x64, w64, yp);
        lp = dot64(yp, R64, ny);
        w64[j] = save - hh;
        conv_ref(&g, x64, w64, yp);
        lm = dot64(yp, R64, ny);
        w64[j] = save;
        CHECK_NEAR((lp - lm) / (2 * hh), dw64[j], 1e-6 * (1 + fabs(dw64[j])));
        free(yp);
    }
    float *gx = PUT(d, x, nx), *gw = PUT(d, w, nw), *gR = PUT(d, R, ny);
    float *gy = ZEROS(d, ny), *gdx = ZEROS(d, nx), *gdw = ZEROS(d, nw);
    REQUIRE(gx && gw && gR && gy && gdx && gdw);
    const struct train_ops *T = d->ops->train;
    plumb_err e = {0};
    REQUIRE(T->conv2d_fwd(d, NULL, &g, gx, gw, gy, rt, &e) == 0);
    REQUIRE(T->conv2d_bwd_data(d, NULL, &g, gR, gw, gdx, rt, &e) == 0);
    REQUIRE(T->conv2d_bwd_filter(d, NULL, &g, gx, gR, gdw, rt, &e) == 0);
    float *y = malloc(ny * 4), *dx = malloc(nx * 4), *dw = malloc(nw * 4);
    dget(d, y, gy, ny * 4);
    dget(d, dx, gdx, nx * 4);
    dget(d, dw, gdw, nw * 4);
    /* fp32 accumulation of up to R S C (or K R S, N P Q) terms of size ~1:
     * errors ~ sqrt(terms) 2^-24 relative to the sum of |terms|; the 16-bit
     * outputs add their own rounding (2^-8 bf16, 2^-11 fp16) */
    double tol = rt == DT_BF16 ? 8e-3 : rt == DT_F16 ? 1e-3 : 2e-5;
    size_t wh = 0;
    double ey = max_rel(y, y64, ny, 1.0, &wh);
    CHECK_MSG(ey <= tol, "conv fwd %dx%d s%d p%d: rel err %.3g at %zu (%g vs %g)", RS, RS, stride, pad, ey, wh,
              (double)y[wh], y64[wh]);
    double ex = max_rel(dx, dx64, nx, 1.0, &wh);
    CHECK_MSG(ex <= tol, "conv dx %dx%d s%d p%d: rel err %.3g at %zu (%g vs %g)", RS, RS, stride, pad, ex, wh,
              (double)dx[wh], dx64[wh]);
    double ew = max_rel(dw, dw64, nw, 1.0, &wh);
    CHECK_MSG(ew <= (rt == DT_F32 ? 2e-5 : tol), "conv dw %dx%d s%d p%d: rel err %.3g at %zu (%g vs %g)", RS, RS,
              stride, pad, ew, wh, (double)dw[wh], dw64[wh]);
    if (rt != DT_F32) { /* train_ops.h: y and dx are stored rounded to rt, in every mode */
        size_t ny16 = 0, nx16 = 0;
        for (size_t i = 0; i < ny; i++) ny16 += f32_bits(tv_round(y[i], rt)) != f32_bits(y[i]);
        for (size_t i = 0; i < nx; i++) nx16 += f32_bits(tv_round(dx[i], rt)) != f32_bits(dx[i]);
        CHECK_MSG(ny16 == 0 && nx16 == 0, "conv %dx%d s%d p%d %s: %zu of %zu y and %zu of %zu dx values not %s values",
                  RS, RS, stride, pad, dtype_name(rt), ny16, ny, nx16, nx, dtype_name(rt));
    }
    if (mode == NUMERICS_GOLDEN) { /* the exact chains of dev/train_vision.h */
        size_t bad = 0;
        for (int n = 0; n < N; n++)
            for (int p = 0; p < g.P; p++)
                for (int q = 0; q < g.Q; q++)
                    for (int k = 0; k < K; k++) {
                        float v = tv_round(tv_conv_fwd_elem(&g, x, w, n, p, q, k), rt);
                        bad += memcmp(&v, &y[(((size_t)n * g.P + p) * g.Q + q) * K + k], 4) != 0;
                    }
        for (int n = 0; n < N; n++)
            for (int h = 0; h < H; h++)
                for (int ww = 0; ww < W; ww++)
                    for (int c = 0; c < C; c++) {
                        float v = tv_round(tv_conv_bwd_data_elem(&g, R, w, n, h, ww, c), rt);
                        bad += memcmp(&v, &dx[(((size_t)n * H + h) * W + ww) * C + c], 4) != 0;
                    }
        for (int k = 0; k < K; k++)
            for (int r = 0; r < RS; r++)
                for (int s = 0; s < RS; s++)
                    for (int c = 0; c < C; c++) {
                        float v = tv_conv_bwd_filter_elem(&g, x, R, k, r, s, c);
                        bad += memcmp(&v, &dw[(((size_t)k * RS + r) * RS + s) * C + c], 4) != 0;
                    }
        CHECK_MSG(bad == 0, "golden conv %dx%d s%d p%d: %zu elements differ from the element definitions", RS, RS,
                  stride, pad, bad);
    }
    free(x), free(w), free(R), free(x64), free(w64), free(R64), free(y64), free(dx64), free(dw64);
    free(y), free(dx), free(dw);
    dev_close(d);
}

/* 1x1, 3x3, 7x7; stride 1 and 2; padding; channel counts not multiples of 4 */
#define CONV_SHAPES(mode, rt)                                                                          \
    conv_case(mode, 2, 5, 6, 3, 4, 1, 1, 0, rt);                                                       \
    conv_case(mode, 2, 5, 5, 5, 6, 1, 2, 0, rt);                                                       \
    conv_case(mode, 2, 6, 5, 3, 5, 3, 1, 1, rt);                                                       \
    conv_case(mode, 3, 7, 7, 4, 3, 3, 2, 1, rt);                                                       \
    conv_case(mode, 1, 11, 9, 3, 4, 7, 2, 3, rt);

TEST(train_vision_conv_golden) { CONV_SHAPES(NUMERICS_GOLDEN, DT_F32) }
TEST(train_vision_conv_fast) { CONV_SHAPES(NUMERICS_FAST, DT_F32) }
TEST(train_vision_conv_bf16) { conv_case(NUMERICS_GOLDEN, 2, 6, 5, 3, 5, 3, 1, 1, DT_BF16);
                               conv_case(NUMERICS_FAST, 2, 6, 5, 3, 5, 3, 1, 1, DT_BF16);
                               conv_case(NUMERICS_FAST, 2, 6, 5, 3, 5, 3, 2, 1, DT_F16);
                               /* 1 x 1, stride 1: the fast path's GEMM without im2col */
                               conv_case(NUMERICS_FAST, 3, 9, 11, 6, 7, 1, 1, 0, DT_BF16);
                               conv_case(NUMERICS_FAST, 3, 9, 11, 6, 7, 1, 1, 0, DT_F16);
                               conv_case(NUMERICS_GOLDEN, 3, 9, 11, 6, 7, 1, 1, 0, DT_BF16); }

/* golden convolution and BN results do not depend on the thread count */
TEST(train_vision_golden_thread_count_independent)
{
    extern double cpu_train_par_scale;
    if (strcmp(test_device(), "cpu")) TEST_SKIP("thread counts are a cpu backend property");
    struct train_conv g;
    REQUIRE(train_conv_set(&g, 3, 9, 9, 5, 7, 3, 3, 2, 1) == 0);
    size_t nx = (size_t)3 * 9 * 9 * 5, nw = (size_t)7 * 9 * 5, ny = (size_t)3 * g.P * g.Q * 7;
    float *x = rnd(nx, -1, 1), *w = rnd(nw, -1, 1), *R = rnd(ny, -1, 1);
    float *out[3][3];
    int64_t part[3][2 * 7];
    double saved = cpu_train_par_scale;
    cpu_train_par_scale = 0; /* every op on all threads */
    int thr[3] = {1, 2, 3};
    for (int t = 0; t < 3; t++) {
        struct dev *d = open_dev(NUMERICS_GOLDEN, thr[t]);
        REQUIRE(d);
        plumb_err e = {0};
        out[t][0] = malloc(ny * 4), out[t][1] = malloc(nx * 4), out[t][2] = malloc(nw * 4);
        REQUIRE(d->ops->train->conv2d_fwd(d, NULL, &g, x, w, out[t][0], DT_F32, &e) == 0);
        REQUIRE(d->ops->train->conv2d_bwd_data(d, NULL, &g, R, w, out[t][1], DT_F32, &e) == 0);
        REQUIRE(d->ops->train->conv2d_bwd_filter(d, NULL, &g, x, R, out[t][2], DT_F32, &e) == 0);
        REQUIRE(d->ops->train->bn_stats(d, NULL, out[t][0], ny / 7, 7, NULL, part[t], &e) == 0);
        dev_close(d);
    }
    cpu_train_par_scale = saved;
    for (int t = 1; t < 3; t++) {
        CHECK(!memcmp(out[0][0], out[t][0], ny * 4));
        CHECK(!memcmp(out[0][1], out[t][1], nx * 4));
        CHECK(!memcmp(out[0][2], out[t][2], nw * 4));
        CHECK(!memcmp(part[0], part[t], sizeof part[0]));
    }
    for (int t = 0; t < 3; t++) free(out[t][0]), free(out[t][1]), free(out[t][2]);
    free(x), free(w), free(R);
}

/* ================= batch normalisation ================= */

/* float64 BN over x [M, C] with batch statistics: y = relu?(gamma xhat + beta (+ z)) */
static void bn_ref(const double *x, const double *gamma, const double *beta, const double *z, size_t M, int C,
                   int relu, double eps, double *y, double *mean, double *var)
{
    for (int c = 0; c < C; c++) {
        double s = 0, q = 0;
        for (size_t m = 0; m < M; m++) s += x[m * C + c];
        double mu = s / (double)M;
        for (size_t m = 0; m < M; m++) q += (x[m * C + c] - mu) * (x[m * C + c] - mu);
        double v = q / (double)M, rstd = 1 / sqrt(v + eps);
        if (mean) mean[c] = mu;
        if (var) var[c] = v;
        for (size_t m = 0; m < M; m++) {
            double o = gamma[c] * (x[m * C + c] - mu) * rstd + beta[c] + (z ? z[m * C + c] : 0);
            y[m * C + c] = relu && o < 0 ? 0 : o;
        }
    }
}

/* The whole training-mode BN on the device for one rank (no collective
 * needed): stats, mean, stats(mean), var, apply; returns mean, rstd. */
static int bn_forward_dev(struct dev *d, float *gx, float *gg, float *gb, float *gz, float *gy, size_t M, int C,
                          int relu, float eps, float *gmean, float *grstd, float *grm, float *grv, dtype_t rt)
{
    const struct train_ops *T = d->ops->train;
    plumb_err e = {0};
    int golden = d->numerics == NUMERICS_GOLDEN;
    void *part = dput(d, NULL, train_bn_part_bytes(C, golden));
    int rc = T->bn_stats(d, NULL, gx, M, C, NULL, part, &e);
    if (!rc) rc = T->bn_mean(d, NULL, part, C, (int64_t)M, gmean, &e);
    if (!rc) rc = T->bn_stats(d, NULL, gx, M, C, gmean, part, &e);
    if (!rc) rc = T->bn_var(d, NULL, part, C, (int64_t)M, eps, 0.1f, gmean, grstd, grm, grv, &e);
    if (!rc) rc = T->bn_apply(d, NULL, gx, gmean, grstd, gg, gb, gz, gy, M, C, relu, rt, &e);
    if (rc) fprintf(stderr, "  bn forward: %s\n", e.msg);
    dev_free(d, part);
    return rc;
}

/* backward of bn_forward_dev's apply (dy already the gradient of v, i.e.
 * masked): dx, dgamma, dbeta */
static int bn_backward_dev(struct dev *d, float *gx, float *gdy, float *gmean, float *grstd, float *gg, float *gdx,
                           float *gdg, float *gdb, size_t M, int C, dtype_t rt)
{
    const struct train_ops *T = d->ops->train;
    plumb_err e = {0};
    int golden = d->numerics == NUMERICS_GOLDEN;
    void *part = dput(d, NULL, train_bn_part_bytes(2 * C, golden));
    float *mdy = ZEROS(d, 2 * (size_t)C);
    int rc = T->bn_bwd_stats(d, NULL, gx, gdy, gmean, grstd, M, C, part, &e);
    if (!rc) rc = T->bn_mean(d, NULL, part, 2 * C, (int64_t)M, mdy, &e);
    if (!rc) rc = T->bn_bwd_params(d, NULL, gx, gdy, gmean, grstd, M, C, gdg, gdb, &e);
    if (!rc) rc = T->bn_bwd_data(d, NULL, gx, gdy, gmean, grstd, gg, mdy, gdx, M, C, rt, &e);
    if (rc) fprintf(stderr, "  bn backward: %s\n", e.msg);
    dev_free(d, part);
    dev_free(d, mdy);
    return rc;
}

static void bn_case(enum numerics mode, size_t M, int C, int relu, int residual)
{
    OPEN(d, mode, 0);
    const float eps = 1e-5f;
    size_t n = M * (size_t)C;
    float *x = rnd(n, -2, 3), *gam = rnd(C, 0.5, 1.5), *bet = rnd(C, -0.5, 0.5), *z = rnd(n, -1, 1);
    float *R = rnd(n, -1, 1), *rm = rnd(C, -0.1, 0.1), *rv = rnd(C, 0.9, 1.1);
    for (int c = 0; c < C; c++) /* channels with their own offset and scale */
        for (size_t m = 0; m < M; m++) x[m * C + c] = x[m * C + c] * (float)(1 + c) + (float)(3 * c);
    double *x64 = to64(x, n), *g64 = to64(gam, C), *b64 = to64(bet, C), *z64 = residual ? to64(z, n) : NULL;
    double *y64 = malloc(n * 8), mean64[64], var64[64];
    bn_ref(x64, g64, b64, z64, M, C, relu, eps, y64, mean64, var64);
    float *gx = PUT(d, x, n), *gg = PUT(d, gam, C), *gb = PUT(d, bet, C), *gz = residual ? PUT(d, z, n) : NULL;
    float *gy = ZEROS(d, n), *gmean = ZEROS(d, C), *grstd = ZEROS(d, C), *grm = PUT(d, rm, C), *grv = PUT(d, rv, C);
    REQUIRE(bn_forward_dev(d, gx, gg, gb, gz, gy, M, C, relu, eps, gmean, grstd, grm, grv, DT_F32) == 0);
    float *y = malloc(n * 4), mean[64], rstd[64], rm2[64], rv2[64];
    dget(d, y, gy, n * 4);
    dget(d, mean, gmean, C * 4);
    dget(d, rstd, grstd, C * 4);
    dget(d, rm2, grm, C * 4);
    dget(d, rv2, grv, C * 4);
    size_t wh = 0;
    double ey = max_rel(y, y64, n, 1.0, &wh);
    CHECK_MSG(ey <= 2e-5, "bn forward rel err %.3g at %zu (%g vs %g)", ey, wh, (double)y[wh], y64[wh]);
    for (int c = 0; c < C; c++) {
        CHECK_NEAR(mean[c], mean64[c], 1e-5 * (1 + fabs(mean64[c])));
        CHECK_NEAR(rstd[c], 1 / sqrt(var64[c] + eps), 1e-5 / sqrt(var64[c] + eps));
        /* PyTorch's running statistics: momentum 0.1, unbiased variance */
        CHECK_NEAR(rm2[c], 0.9 * rm[c] + 0.1 * mean64[c], 1e-5 * (1 + fabs(mean64[c])));
        CHECK_NEAR(rv2[c], 0.9 * rv[c] + 0.1 * var64[c] * M / (M - 1), 1e-5 * (1 + var64[c]));
    }
    /* backward: L = sum R * y; dy of v = R masked by the ReLU output */
    float *dv = malloc(n * 4);
    for (size_t i = 0; i < n; i++) dv[i] = relu && !(y[i] > 0) ? 0.0f : R[i];
    float *gdv = PUT(d, dv, n), *gdx = ZEROS(d, n), *gdg = ZEROS(d, C), *gdb = ZEROS(d, C);
    REQUIRE(bn_backward_dev(d, gx, gdv, gmean, grstd, gg, gdx, gdg, gdb, M, C, DT_F32) == 0);
    float *dx = malloc(n * 4), dg[64], db[64];
    dget(d, dx, gdx, n * 4);
    dget(d, dg, gdg, C * 4);
    dget(d, db, gdb, C * 4);
    /* float64 analytic gradients */
    double *dx64 = calloc(n, 8), dg64[64], db64[64];
    for (int c = 0; c < C; c++) {
        double rstd64 = 1 / sqrt(var64[c] + eps), sdy = 0, sdyx = 0;
        for (size_t m = 0; m < M; m++) {
            double xh = (x64[m * C + c] - mean64[c]) * rstd64;
            sdy += dv[m * C + c];
            sdyx += dv[m * C + c] * xh;
        }
        db64[c] = sdy;
        dg64[c] = sdyx;
        for (size_t m = 0; m < M; m++) {
            double xh = (x64[m * C + c] - mean64[c]) * rstd64;
            dx64[m * C + c] = g64[c] * rstd64 * (dv[m * C + c] - sdy / M - xh * sdyx / M);
        }
    }
    double ex = max_rel(dx, dx64, n, 0.1, &wh);
    CHECK_MSG(ex <= 1e-4, "bn dx rel err %.3g at %zu (%g vs %g)", ex, wh, (double)dx[wh], dx64[wh]);
    for (int c = 0; c < C; c++) {
        CHECK_NEAR(db[c], db64[c], 1e-5 * (1 + fabs(db64[c])) * sqrt((double)M));
        CHECK_NEAR(dg[c], dg64[c], 1e-5 * (1 + fabs(dg64[c])) * sqrt((double)M));
    }
    /* the analytic gradient against central differences of the float64
     * forward (away from the ReLU kink: relu off here) */
    if (!relu) {
        for (int t = 0; t < 4; t++) {
            size_t i = (size_t)(urand() * n);
            double hh = 1e-4, save = x64[i], *yp = malloc(n * 8);
            x64[i] = save + hh;
            bn_ref(x64, g64, b64, z64, M, C, 0, eps, yp, NULL, NULL);
            double lp = 0;
            for (size_t j = 0; j < n; j++) lp += yp[j] * R[j];
            x64[i] = save - hh;
            bn_ref(x64, g64, b64, z64, M, C, 0, eps, yp, NULL, NULL);
            double lm = 0;
            for (size_t j = 0; j < n; j++) lm += yp[j] * R[j];
            x64[i] = save;
            CHECK_NEAR((lp - lm) / (2 * hh), dx64[i], 1e-5 * (1 + fabs(dx64[i])));
            free(yp);
        }
    }
    if (mode == NUMERICS_GOLDEN) {
        /* the golden dbeta / dgamma are core/gmath.h's pairwise tree over rows */
        size_t bad = 0;
        float *prod = malloc(n * 4);
        for (size_t i = 0; i < n; i++) {
            int c = (int)(i % C);
            prod[i] = dv[i] * tv_bn_xhat(x[i], mean[c], rstd[c]);
        }
        for (int c = 0; c < C; c++) {
            float sb = gsum_strided(dv + c, M, C), sg = gsum_strided(prod + c, M, C);
            bad += memcmp(&sb, &db[c], 4) != 0;
            bad += memcmp(&sg, &dg[c], 4) != 0;
        }
        CHECK_MSG(bad == 0, "golden bn_bwd_params: %zu sums differ from gsum_strided (M=%zu)", bad, M);
        free(prod);
    }
    free(x), free(gam), free(bet), free(z), free(R), free(rm), free(rv), free(x64), free(g64), free(b64), free(z64);
    free(y64), free(y), free(dv), free(dx), free(dx64);
    dev_close(d);
}

TEST(train_vision_bn_golden) { bn_case(NUMERICS_GOLDEN, 300, 5, 0, 0); bn_case(NUMERICS_GOLDEN, 2500, 3, 1, 1); }
TEST(train_vision_bn_fast) { bn_case(NUMERICS_FAST, 300, 5, 0, 0); bn_case(NUMERICS_FAST, 2500, 3, 1, 1); }
/* channel counts a multiple of 4 (a GPU's 4-wide path) and not a power of 2 */
TEST(train_vision_bn_fast_wide)
{
    bn_case(NUMERICS_FAST, 3000, 64, 1, 1);
    bn_case(NUMERICS_FAST, 2000, 48, 0, 0);
    bn_case(NUMERICS_FAST, 1500, 36, 1, 0);
}

/* The ops with 16-bit mirrors give the bits of the fp32 ops they name, and
 * the mirrors hold those values in rt; bn_bwd_reduce gives the bits of
 * bn_bwd_stats and bn_bwd_params. Per device, so a GPU backend checks its
 * own fused and 4-wide kernels against its plain ones. */
static int same_bits(const char *what, const void *a, const void *b, size_t bytes)
{
    if (!memcmp(a, b, bytes)) return 1;
    fprintf(stderr, "  %s: the bits differ\n", what);
    return 0;
}
static void mirror_case(enum numerics mode, size_t M, int C, dtype_t rt)
{
    OPEN(d, mode, 0);
    const struct train_ops *T = d->ops->train;
    if (!T->bn_apply16 || !T->bn_bwd_data16 || !T->bn_bwd_reduce || !T->conv2d_fwd16) {
        dev_close(d);
        TEST_SKIP("device %s has no 16-bit mirror ops", test_device());
    }
    plumb_err e = {0};
    const size_t n = M * (size_t)C;
    const int golden = mode == NUMERICS_GOLDEN;
    float *x = rnd(n, -2, 3), *z = rnd(n, -1, 1), *dy = rnd(n, -1, 1), *gam = rnd(C, 0.5, 1.5), *bet = rnd(C, -1, 1);
    round_all(x, n, rt), round_all(z, n, rt), round_all(dy, n, rt);
    float *gx = PUT(d, x, n), *gz = PUT(d, z, n), *gdy = PUT(d, dy, n), *gg = PUT(d, gam, C), *gb = PUT(d, bet, C);
    float *gmean = ZEROS(d, C), *grstd = ZEROS(d, C), *gy = ZEROS(d, n), *gy2 = ZEROS(d, n), *mdy = ZEROS(d, 2 * (size_t)C);
    uint16_t *gy16 = dput(d, NULL, n * 2);
    void *part = dput(d, NULL, train_bn_part_bytes(2 * C, golden)), *part2 = dput(d, NULL, train_bn_part_bytes(2 * C, golden));
    float *dg = ZEROS(d, C), *db = ZEROS(d, C), *dg2 = ZEROS(d, C), *db2 = ZEROS(d, C);
    REQUIRE(T->bn_stats(d, NULL, gx, M, C, NULL, part, &e) == 0);
    REQUIRE(T->bn_mean(d, NULL, part, C, (int64_t)M, gmean, &e) == 0);
    REQUIRE(T->bn_stats(d, NULL, gx, M, C, gmean, part, &e) == 0);
    REQUIRE(T->bn_var(d, NULL, part, C, (int64_t)M, 1e-5f, 0.1f, NULL, grstd, NULL, NULL, &e) == 0);
    /* forward: y and its mirror */
    REQUIRE(T->bn_apply(d, NULL, gx, gmean, grstd, gg, gb, gz, gy, M, C, 1, rt, &e) == 0);
    CHECK_MSG(T->bn_apply16(d, NULL, gx, gmean, grstd, gg, gb, gz, gy2, gy16, M, C, 1, rt, &e) == 0, "%s", e.msg);
    float *y = malloc(n * 4), *y2 = malloc(n * 4);
    uint16_t *y16 = malloc(n * 2), *want16 = malloc(n * 2);
    dget(d, y, gy, n * 4);
    dget(d, y2, gy2, n * 4);
    dget(d, y16, gy16, n * 2);
    for (size_t i = 0; i < n; i++) want16[i] = rt == DT_F16 ? f32_to_f16(y[i]) : f32_to_bf16(y[i]);
    CHECK(same_bits("bn_apply16 y", y, y2, n * 4));
    CHECK(same_bits("bn_apply16 y16", y16, want16, n * 2));
    /* backward: reduce = stats + params; data16 = data + mirror */
    REQUIRE(T->bn_bwd_stats(d, NULL, gx, gdy, gmean, grstd, M, C, part, &e) == 0);
    REQUIRE(T->bn_bwd_params(d, NULL, gx, gdy, gmean, grstd, M, C, dg, db, &e) == 0);
    CHECK_MSG(T->bn_bwd_reduce(d, NULL, gx, gdy, gmean, grstd, M, C, part2, dg2, db2, &e) == 0, "%s", e.msg);
    size_t pb = train_bn_part_bytes(2 * C, golden);
    void *hp = malloc(pb), *hp2 = malloc(pb);
    float *h1 = malloc(C * 4), *h2 = malloc(C * 4);
    dget(d, hp, part, pb);
    dget(d, hp2, part2, pb);
    CHECK(same_bits("bn_bwd_reduce part", hp, hp2, pb));
    dget(d, h1, dg, C * 4);
    dget(d, h2, dg2, C * 4);
    CHECK(same_bits("bn_bwd_reduce dgamma", h1, h2, C * 4));
    dget(d, h1, db, C * 4);
    dget(d, h2, db2, C * 4);
    CHECK(same_bits("bn_bwd_reduce dbeta", h1, h2, C * 4));
    REQUIRE(T->bn_mean(d, NULL, part, 2 * C, (int64_t)M, mdy, &e) == 0);
    REQUIRE(T->bn_bwd_data(d, NULL, gx, gdy, gmean, grstd, gg, mdy, gy, M, C, rt, &e) == 0);
    CHECK_MSG(T->bn_bwd_data16(d, NULL, gx, gdy, gmean, grstd, gg, mdy, gy2, gy16, M, C, rt, &e) == 0, "%s", e.msg);
    dget(d, y, gy, n * 4);
    dget(d, y2, gy2, n * 4);
    dget(d, y16, gy16, n * 2);
    for (size_t i = 0; i < n; i++) want16[i] = rt == DT_F16 ? f32_to_f16(y[i]) : f32_to_bf16(y[i]);
    CHECK(same_bits("bn_bwd_data16 dx", y, y2, n * 4));
    CHECK(same_bits("bn_bwd_data16 dx16", y16, want16, n * 2));
    /* a 16-bit argument that is not bf16 or fp16 is refused */
    CHECK(T->bn_apply16(d, NULL, gx, gmean, grstd, gg, gb, gz, gy2, gy16, M, C, 1, DT_F32, &e) == PLUMB_EUSAGE);
    /* convolutions: mirrors given, mirrors made by the op, the fp32 op */
    struct train_conv g;
    REQUIRE(train_conv_set(&g, 3, 8, 7, C, 16, 3, 3, 1, 1) == 0);
    size_t nx = (size_t)3 * 8 * 7 * C, nw = (size_t)16 * 9 * C, ny = (size_t)3 * g.P * g.Q * 16;
    float *cx = rnd(nx, -1, 1), *cw = rnd(nw, -0.5, 0.5), *cdy = rnd(ny, -1, 1);
    round_all(cx, nx, rt), round_all(cw, nw, rt), round_all(cdy, ny, rt);
    uint16_t *m16 = malloc((nx > nw ? (nx > ny ? nx : ny) : (nw > ny ? nw : ny)) * 2);
#define MIRROR(src, cnt, dst)                                                                          \
    do {                                                                                               \
        for (size_t i_ = 0; i_ < (cnt); i_++) m16[i_] = rt == DT_F16 ? f32_to_f16(src[i_]) : f32_to_bf16(src[i_]); \
        dst = dput(d, m16, (cnt) * 2);                                                                 \
    } while (0)
    uint16_t *gx16, *gw16, *gdy16;
    MIRROR(cx, nx, gx16);
    MIRROR(cw, nw, gw16);
    MIRROR(cdy, ny, gdy16);
#undef MIRROR
    float *gcx = PUT(d, cx, nx), *gcw = PUT(d, cw, nw), *gcdy = PUT(d, cdy, ny);
    size_t no[3] = {ny, nx, nw};
    float *o[3][3], *h[3][3];
    for (int v = 0; v < 3; v++)
        for (int k = 0; k < 3; k++) o[v][k] = ZEROS(d, no[k]);
    for (int v = 0; v < 3; v++) { /* 0: fp32 op, 1: mirrors given, 2: mirrors NULL */
        const uint16_t *a = v == 1 ? gx16 : NULL, *b = v == 1 ? gw16 : NULL, *c = v == 1 ? gdy16 : NULL;
        int rc = v == 0 ? T->conv2d_fwd(d, NULL, &g, gcx, gcw, o[v][0], rt, &e)
                        : T->conv2d_fwd16(d, NULL, &g, gcx, a, gcw, b, o[v][0], rt, &e);
        if (!rc) rc = v == 0 ? T->conv2d_bwd_data(d, NULL, &g, gcdy, gcw, o[v][1], rt, &e)
                             : T->conv2d_bwd_data16(d, NULL, &g, gcdy, c, gcw, b, o[v][1], rt, &e);
        if (!rc) rc = v == 0 ? T->conv2d_bwd_filter(d, NULL, &g, gcx, gcdy, o[v][2], rt, &e)
                             : T->conv2d_bwd_filter16(d, NULL, &g, gcx, a, gcdy, c, o[v][2], rt, &e);
        CHECK_MSG(rc == 0, "conv variant %d: %s", v, e.msg);
        for (int k = 0; k < 3; k++) {
            h[v][k] = malloc(no[k] * 4);
            dget(d, h[v][k], o[v][k], no[k] * 4);
        }
    }
    const char *nm[3] = {"conv2d_fwd16 y", "conv2d_bwd_data16 dx", "conv2d_bwd_filter16 dw"};
    for (int v = 1; v < 3; v++)
        for (int k = 0; k < 3; k++) CHECK(same_bits(nm[k], h[0][k], h[v][k], no[k] * 4));
    for (int v = 0; v < 3; v++)
        for (int k = 0; k < 3; k++) free(h[v][k]), dev_free(d, o[v][k]);
    void *dv[] = {gx, gz, gdy, gg, gb, gmean, grstd, gy, gy2, mdy, gy16, part, part2, dg, db, dg2, db2, gx16, gw16,
                  gdy16, gcx, gcw, gcdy};
    for (size_t i = 0; i < sizeof dv / sizeof dv[0]; i++) dev_free(d, dv[i]);
    free(x), free(z), free(dy), free(gam), free(bet), free(y), free(y2), free(y16), free(want16), free(hp), free(hp2);
    free(h1), free(h2), free(cx), free(cw), free(cdy), free(m16);
    dev_close(d);
}
TEST(train_vision_mirror_ops_match_fp32_ops)
{
    mirror_case(NUMERICS_FAST, 3000, 64, DT_BF16);
    mirror_case(NUMERICS_FAST, 1000, 6, DT_F16);
    mirror_case(NUMERICS_GOLDEN, 700, 8, DT_BF16);
}

/* Splitting the rows into k parts and adding the parts' fixed-point sums as
 * integers gives the bits of the whole batch: statistics of N ranks equal
 * the 1-rank statistics. */
TEST(train_vision_bn_partial_sums_add_up)
{
    OPEN(d, NUMERICS_GOLDEN, 0);
    const struct train_ops *T = d->ops->train;
    enum { M = 1000, C = 6 };
    float *x = rnd((size_t)M * C, -50, 80);
    x[7] = 1e-30f, x[8] = -3e-9f; /* tiny values count too */
    float *gx = PUT(d, x, (size_t)M * C), *gmean = ZEROS(d, C);
    int64_t whole[2 * C], whole2[2 * 2 * C];
    void *gp = dput(d, NULL, train_bn_part_bytes(2 * C, 1));
    plumb_err e = {0};
    REQUIRE(T->bn_stats(d, NULL, gx, M, C, NULL, gp, &e) == 0);
    dget(d, whole, gp, sizeof whole);
    REQUIRE(T->bn_mean(d, NULL, gp, C, M, gmean, &e) == 0);
    float *dy = rnd((size_t)M * C, -1, 1), rstd[C];
    for (int c = 0; c < C; c++) rstd[c] = 0.03f + 0.01f * c;
    float *gdy = PUT(d, dy, (size_t)M * C), *grstd = PUT(d, rstd, C);
    REQUIRE(T->bn_bwd_stats(d, NULL, gx, gdy, gmean, grstd, M, C, gp, &e) == 0);
    dget(d, whole2, gp, sizeof whole2);
    int cuts[][4] = {{1, 0, 0, 0}, {500, 0, 0, 0}, {1, 333, 999, 0}, {250, 500, 750, 0}, {7, 13, 512, 640}};
    for (size_t ci = 0; ci < sizeof cuts / sizeof cuts[0]; ci++) {
        int b[6] = {0}, nb = 1;
        for (int j = 0; j < 4 && cuts[ci][j]; j++) b[nb++] = cuts[ci][j];
        b[nb] = M;
        int64_t sum[2 * C] = {0}, sum2[4 * C] = {0}, p[4 * C];
        for (int k = 0; k < nb; k++) {
            size_t m0 = (size_t)b[k], rows = (size_t)(b[k + 1] - b[k]);
            REQUIRE(T->bn_stats(d, NULL, gx + m0 * C, rows, C, NULL, gp, &e) == 0);
            dget(d, p, gp, 2 * C * 8);
            for (int i = 0; i < 2 * C; i++) sum[i] += p[i];
            REQUIRE(T->bn_bwd_stats(d, NULL, gx + m0 * C, gdy + m0 * C, gmean, grstd, rows, C, gp, &e) == 0);
            dget(d, p, gp, 4 * C * 8);
            for (int i = 0; i < 4 * C; i++) sum2[i] += p[i];
        }
        CHECK_MSG(!memcmp(sum, whole, sizeof sum), "forward sums of %d parts differ from the whole batch's", nb);
        CHECK_MSG(!memcmp(sum2, whole2, sizeof sum2), "backward sums of %d parts differ from the whole batch's", nb);
    }
    /* the fixed-point mean is the exact mean of the values rounded to 2^-40 */
    float mean[C];
    dget(d, mean, gmean, sizeof mean);
    for (int c = 0; c < C; c++) {
        long double s = 0;
        for (int m = 0; m < M; m++) s += rintl((long double)x[m * C + c] * 1099511627776.0L);
        float ref = (float)((double)(s / 1099511627776.0L) / M);
        CHECK_MSG(!memcmp(&ref, &mean[c], 4), "channel %d: mean %.9g, exact %.9g", c, (double)mean[c], (double)ref);
    }
    free(x), free(dy);
    dev_close(d);
}

/* saturation and rounding of the fixed-point conversion */
TEST(train_vision_bn_fix_edges)
{
    const int64_t big = (int64_t)0x7fffffffffffffffLL;
    CHECK(tv_fix(0.0f) == 0);
    CHECK(tv_fix(1.0f) == (int64_t)1 << 40);
    CHECK(tv_fix(-1.5f) == -((int64_t)3 << 39));
    CHECK(tv_fix(0x1p-41f) == 0);            /* tie: to even */
    CHECK(tv_fix(0x1.8p-40f) == 2);          /* 1.5 -> 2 */
    CHECK(tv_fix(0x1.8p-41f) == 1);          /* 0.75 -> 1 */
    CHECK(tv_fix(-0x1.8p-40f) == -2);
    CHECK(tv_fix(8388607.5f) == (int64_t)(8388607.5 * 1099511627776.0));
    CHECK(tv_fix(8388608.0f) == big);
    CHECK(tv_fix(-INFINITY) == -big);
    CHECK(tv_fix(NAN) == big);
    int64_t h, l;
    tv_fix_split(-1, &h, &l);
    CHECK(h == -1 && l == 0xffffffffLL);
    CHECK(tv_fix_value(h, l) == -1.0 / 1099511627776.0);
    tv_fix_split(big, &h, &l);
    CHECK(tv_fix_value(h, l) == 8388608.0);
}

/* ================= pooling, add ================= */

TEST(train_vision_maxpool)
{
    for (int mode = 0; mode < 2; mode++) {
        OPEN(d, mode ? NUMERICS_GOLDEN : NUMERICS_FAST, 0);
        struct train_conv g; /* the ImageNet stem's 3x3 stride-2 pad-1 pool */
        REQUIRE(train_conv_set(&g, 2, 7, 8, 3, 3, 3, 3, 2, 1) == 0);
        size_t nx = (size_t)2 * 7 * 8 * 3, ny = (size_t)2 * g.P * g.Q * 3;
        float *x = rnd(nx, -1, 1), *dy = rnd(ny, -1, 1);
        for (size_t i = 0; i < nx; i += 5) x[i] = 0.25f; /* ties: the first in (r, s) order wins */
        float *gx = PUT(d, x, nx), *gy = ZEROS(d, ny), *gdy = PUT(d, dy, ny), *gdx = ZEROS(d, nx);
        int32_t *gi = dput(d, NULL, ny * 4);
        plumb_err e = {0};
        REQUIRE(d->ops->train->maxpool_fwd(d, NULL, &g, gx, gy, gi, &e) == 0);
        REQUIRE(d->ops->train->maxpool_bwd(d, NULL, &g, gdy, gi, gdx, DT_F32, &e) == 0);
        float *y = malloc(ny * 4), *dx = malloc(nx * 4);
        int32_t *idx = malloc(ny * 4);
        dget(d, y, gy, ny * 4), dget(d, dx, gdx, nx * 4), dget(d, idx, gi, ny * 4);
        double *dx64 = calloc(nx, 8);
        size_t bad = 0;
        for (int n = 0; n < 2; n++)
            for (int p = 0; p < g.P; p++)
                for (int q = 0; q < g.Q; q++)
                    for (int c = 0; c < 3; c++) {
                        double m = -1e30;
                        int arg = -1;
                        for (int r = 0; r < 3; r++)
                            for (int s = 0; s < 3; s++) {
                                int h = 2 * p - 1 + r, w = 2 * q - 1 + s;
                                if (h < 0 || h >= 7 || w < 0 || w >= 8) continue;
                                double v = x[((n * 7 + h) * 8 + w) * 3 + c];
                                if (v > m) m = v, arg = r * 3 + s;
                            }
                        size_t o = (((size_t)n * g.P + p) * g.Q + q) * 3 + c;
                        bad += y[o] != (float)m || idx[o] != arg;
                        int h = 2 * p - 1 + arg / 3, w = 2 * q - 1 + arg % 3;
                        dx64[((n * 7 + h) * 8 + w) * 3 + c] += dy[o];
                    }
        CHECK_MSG(bad == 0, "maxpool: %zu outputs or winners differ from the reference", bad);
        CHECK(max_rel(dx, dx64, nx, 1.0, NULL) <= 1e-6);
        free(x), free(dy), free(y), free(dx), free(idx), free(dx64);
        dev_close(d);
    }
}

TEST(train_vision_avgpool_add)
{
    OPEN(d, NUMERICS_FAST, 0);
    enum { N = 3, HW = 49, C = 5 };
    float *x = rnd((size_t)N * HW * C, -1, 1), *dy = rnd((size_t)N * C, -1, 1), *b = rnd((size_t)N * HW * C, -1, 1);
    float *gx = PUT(d, x, (size_t)N * HW * C), *gy = ZEROS(d, (size_t)N * C), *gdy = PUT(d, dy, (size_t)N * C);
    float *gdx = ZEROS(d, (size_t)N * HW * C), *gb = PUT(d, b, (size_t)N * HW * C);
    plumb_err e = {0};
    const struct train_ops *T = d->ops->train;
    REQUIRE(T->avgpool_fwd(d, NULL, gx, gy, N, HW, C, DT_F32, &e) == 0);
    REQUIRE(T->avgpool_bwd(d, NULL, gdy, gdx, N, HW, C, DT_F32, &e) == 0);
    float y[N * C], *dx = malloc((size_t)N * HW * C * 4);
    dget(d, y, gy, sizeof y), dget(d, dx, gdx, (size_t)N * HW * C * 4);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            float ref = gsum_strided(x + (size_t)n * HW * C + c, HW, C) / (float)HW;
            CHECK(!memcmp(&ref, &y[n * C + c], 4)); /* one definition for both modes */
            double s = 0;
            for (int i = 0; i < HW; i++) s += x[((size_t)n * HW + i) * C + c];
            CHECK_NEAR(y[n * C + c], s / HW, 1e-6);
            for (int i = 0; i < HW; i++) CHECK(dx[((size_t)n * HW + i) * C + c] == dy[n * C + c] / (float)HW);
        }
    /* add with ReLU, bf16 rounding, in place */
    REQUIRE(T->add(d, NULL, gx, gb, gx, (size_t)N * HW * C, 1, DT_BF16, &e) == 0);
    float *s = malloc((size_t)N * HW * C * 4);
    dget(d, s, gx, (size_t)N * HW * C * 4);
    size_t bad = 0;
    for (size_t i = 0; i < (size_t)N * HW * C; i++) {
        float v = x[i] + b[i];
        v = tv_round(v > 0 ? v : 0, DT_BF16);
        bad += memcmp(&v, &s[i], 4) != 0;
    }
    CHECK(bad == 0);
    free(x), free(dy), free(b), free(dx), free(s);
    dev_close(d);
}

/* ================= softmax cross-entropy ================= */

static void xent_case(enum numerics mode)
{
    OPEN(d, mode, 0);
    enum { B = 9, V = 10, NV = 7 };
    float *z = rnd(B * V, -4, 4);
    z[3] = z[5]; /* a tie in some row */
    int32_t lab[B];
    for (int b = 0; b < B; b++) lab[b] = (b * 7 + 3) % V;
    lab[NV] = 999; /* masked rows are never read */
    float *gz = PUT(d, z, B * V), *gdz = ZEROS(d, B * V), *gl = ZEROS(d, B);
    int32_t *glab = PUT(d, lab, B), *gpred = dput(d, NULL, B * 4);
    double *gsc = dput(d, NULL, 16);
    plumb_err e = {0};
    const float gs = 0.5f;
    REQUIRE(d->ops->train->cls_xent(d, NULL, gz, glab, B, V, NV, gs, gl, gsc, gpred, gdz, &e) == 0);
    float dz[B * V], l[B];
    int32_t pred[B];
    double sc[2];
    dget(d, dz, gdz, sizeof dz), dget(d, l, gl, sizeof l), dget(d, pred, gpred, sizeof pred), dget(d, sc, gsc, 16);
    double tot = 0;
    for (int b = 0; b < B; b++) {
        const float *r = z + b * V;
        double m = r[0];
        int am = 0;
        for (int i = 1; i < V; i++)
            if (r[i] > m) m = r[i], am = i;
        CHECK_EQ_INT(pred[b], am);
        if (b >= NV) {
            CHECK(l[b] == 0);
            for (int i = 0; i < V; i++) CHECK(dz[b * V + i] == 0);
            continue;
        }
        double S = 0;
        for (int i = 0; i < V; i++) S += exp(r[i] - m);
        double loss = log(S) - (r[lab[b]] - m);
        CHECK_NEAR(l[b], loss, 1e-5 * (1 + loss));
        tot += l[b];
        for (int i = 0; i < V; i++) {
            double p = exp(r[i] - m) / S - (i == lab[b]);
            CHECK_NEAR(dz[b * V + i], p * gs, 2e-6);
            /* central difference of the float64 loss in z */
            double h = 1e-5, Sp = 0, Sm = 0;
            for (int j = 0; j < V; j++) {
                Sp += exp(r[j] + (j == i ? h : 0) - m);
                Sm += exp(r[j] - (j == i ? h : 0) - m);
            }
            double lp = log(Sp) - (r[lab[b]] + (i == lab[b] ? h : 0) - m);
            double lm = log(Sm) - (r[lab[b]] - (i == lab[b] ? h : 0) - m);
            CHECK_NEAR((lp - lm) / (2 * h) * gs, dz[b * V + i], 1e-5);
        }
    }
    CHECK(sc[0] == tot); /* double adds in ascending b */
    CHECK(sc[1] == NV);
    if (mode == NUMERICS_GOLDEN)
        for (int b = 0; b < NV; b++) {
            float ref[V];
            int32_t pr;
            float lr = tv_xent_row(z + b * V, V, lab[b], gs, ref, &pr);
            CHECK(!memcmp(&lr, &l[b], 4) && !memcmp(ref, dz + b * V, sizeof ref));
        }
    free(z);
    dev_close(d);
}
TEST(train_vision_xent_golden) { xent_case(NUMERICS_GOLDEN); }
TEST(train_vision_xent_fast) { xent_case(NUMERICS_FAST); }

/* argument checks name the op and the bad value */
TEST(train_vision_bad_geometry_is_an_error)
{
    OPEN(d, NUMERICS_FAST, 0);
    struct train_conv g;
    REQUIRE(train_conv_set(&g, 1, 4, 4, 2, 2, 3, 3, 1, 1) == 0);
    g.P = 5;
    float *buf = ZEROS(d, 64);
    plumb_err e = {0};
    CHECK(d->ops->train->conv2d_fwd(d, NULL, &g, buf, buf, buf, DT_F32, &e) == PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "conv2d_fwd") && strstr(e.msg, "output 5x4"), "message: %s", e.msg);
    CHECK(train_conv_set(&g, 1, 2, 2, 1, 1, 7, 7, 1, 1) == -1); /* window larger than the padded image */
    dev_close(d);
}
