/* GPU vision ops and resnet against the cpu backend. With
 * PLUMB_TEST_DEVICE=cuda (or hip) every vision op runs on the GPU and on
 * the cpu on the same inputs: golden results are the same bits; fast
 * results agree within the stated tolerances (cuDNN / MIOpen or our
 * implicit-GEMM kernels, PLUMB_CONV_LIB=none forces the latter) and repeat
 * bit for bit; resnet-tiny trained a few golden steps on both ends with the
 * same parameter digest. Without a GPU every test skips and says why.
 * `PLUMB_TEST_DEVICE=cuda build/plumb-tests gpu_vision` */
#include "test.h"
#include "dev/dev.h"
#include "dev/train_ops.h"
#include "models/resnet/imgdata.h"
#include "models/resnet/resnet.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int is_gpu_spec(const char *s) { return !strncmp(s, "cuda", 4) || !strncmp(s, "hip", 3); }

struct pair {
    struct dev *c, *g;
};
#define OPEN_PAIR_OR_SKIP(p, mode)                                                                   \
    do {                                                                                             \
        const char *spec_ = test_device();                                                           \
        if (!is_gpu_spec(spec_))                                                                     \
            TEST_SKIP("PLUMB_TEST_DEVICE=%s: GPU vision tests run with PLUMB_TEST_DEVICE=cuda or hip", spec_); \
        plumb_err e_ = {0};                                                                          \
        REQUIRE(dev_open("cpu", &(p).c, &e_) == 0);                                                  \
        int rc_ = dev_open(spec_, &(p).g, &e_);                                                      \
        CHECK_MSG(rc_ == PLUMB_OK, "dev_open(%s): %s", spec_, e_.msg);                               \
        if (rc_) {                                                                                   \
            dev_close((p).c);                                                                        \
            return;                                                                                  \
        }                                                                                            \
        REQUIRE(dev_set_numerics((p).c, mode, 0, &e_) == 0 && dev_set_numerics((p).g, mode, 0, &e_) == 0); \
        REQUIRE((p).g->ops->train && (p).g->ops->train->conv2d_fwd);                                 \
    } while (0)

/* One SGD step with momentum and L2 weight decay as PyTorch takes it
 * (buf zero before the first step), on the host: the trainer's optimizer
 * runs it in training. buf: host [n]. */
static int sgdm_step(struct dev *d, float *w, const float *g, float *buf, size_t n, float lr, float mu, float wd)
{
    float *hw = malloc(n * sizeof(float)), *hg = malloc(n * sizeof(float));
    plumb_err e = {0};
    int rc = !hw || !hg || dev_download(d, hw, w, n * sizeof(float), &e) || dev_download(d, hg, g, n * sizeof(float), &e);
    for (size_t i = 0; i < n && !rc; i++) {
        float gg = fmaf(wd, hw[i], hg[i]);
        buf[i] = fmaf(mu, buf[i], gg);
        hw[i] = fmaf(-lr, buf[i], hw[i]);
    }
    if (!rc) rc = dev_upload(d, w, hw, n * sizeof(float), &e);
    free(hw), free(hg);
    return rc;
}

static void pair_close(struct pair *p)
{
    dev_close(p->g);
    dev_close(p->c);
}

static uint64_t g_rs = 0x9e3779b97f4a7c15ull;
static double urand(void)
{
    g_rs ^= g_rs << 13;
    g_rs ^= g_rs >> 7;
    g_rs ^= g_rs << 17;
    return (double)(g_rs >> 11) * (1.0 / 9007199254740992.0);
}
static float *rnd(size_t n, double lo, double hi, dtype_t rt)
{
    float *x = malloc(n * sizeof(float) + 4);
    for (size_t i = 0; i < n; i++) {
        float v = (float)(lo + (hi - lo) * urand());
        x[i] = rt == DT_BF16 ? bf16_to_f32(f32_to_bf16(v)) : rt == DT_F16 ? f16_to_f32(f32_to_f16(v)) : v;
    }
    return x;
}
static void *up(struct dev *d, const void *h, size_t bytes)
{
    void *p = NULL;
    plumb_err e = {0};
    if (dev_alloc(d, bytes ? bytes : 4, &p, &e)) return NULL;
    if (h && bytes && dev_upload(d, p, h, bytes, &e)) return NULL;
    if (!h && bytes) d->be->memset_async(d, NULL, p, 0, bytes, &e);
    return p;
}
static void *down(struct dev *d, const void *p, size_t bytes)
{
    void *h = malloc(bytes + 4);
    plumb_err e = {0};
    if (dev_sync(d, &e) || dev_download(d, h, p, bytes, &e)) {
        free(h);
        return NULL;
    }
    return h;
}
/* bit-exact (rtol 0) or |a - b| <= rtol (|a| + 1) */
static int cmp_f(const char *what, const float *a, const float *b, size_t n, double rtol)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        int ok = rtol == 0 ? !memcmp(&a[i], &b[i], 4) : fabs((double)a[i] - b[i]) <= rtol * (fabs((double)a[i]) + 1);
        if (!ok && bad++ == 0) first = i;
    }
    if (bad)
        fprintf(stderr, "  %s: %zu of %zu differ, first at %zu: cpu %.9g gpu %.9g\n", what, bad, n, first,
                (double)a[first], (double)b[first]);
    return bad == 0;
}

/* ---------------- convolution ---------------- */

static void conv_case(enum numerics mode, int N, int H, int W, int C, int K, int RS, int stride, int pad, dtype_t rt)
{
    struct pair p;
    OPEN_PAIR_OR_SKIP(p, mode);
    struct train_conv g;
    REQUIRE(train_conv_set(&g, N, H, W, C, K, RS, RS, stride, pad) == 0);
    size_t nx = (size_t)N * H * W * C, nw = (size_t)K * RS * RS * C, ny = (size_t)N * g.P * g.Q * K;
    float *x = rnd(nx, -1, 1, rt), *w = rnd(nw, -0.5, 0.5, rt), *dy = rnd(ny, -1, 1, rt);
    float *y = malloc(ny * 4), *dx = malloc(nx * 4), *dw = malloc(nw * 4);
    const struct train_ops *C_ = p.c->ops->train, *G = p.g->ops->train;
    plumb_err e = {0};
    REQUIRE(C_->conv2d_fwd(p.c, NULL, &g, x, w, y, rt, &e) == 0);
    REQUIRE(C_->conv2d_bwd_data(p.c, NULL, &g, dy, w, dx, rt, &e) == 0);
    REQUIRE(C_->conv2d_bwd_filter(p.c, NULL, &g, x, dy, dw, rt, &e) == 0);
    float *gx = up(p.g, x, nx * 4), *gw = up(p.g, w, nw * 4), *gdy = up(p.g, dy, ny * 4);
    float *gy = up(p.g, NULL, ny * 4), *gdx = up(p.g, NULL, nx * 4), *gdw = up(p.g, NULL, nw * 4);
    REQUIRE(gx && gw && gdy && gy && gdx && gdw);
    float *res[2][3];
    for (int rep = 0; rep < 2; rep++) { /* twice: a fast result repeats */
        CHECK_MSG(G->conv2d_fwd(p.g, NULL, &g, gx, gw, gy, rt, &e) == 0, "%s", e.msg);
        CHECK_MSG(G->conv2d_bwd_data(p.g, NULL, &g, gdy, gw, gdx, rt, &e) == 0, "%s", e.msg);
        CHECK_MSG(G->conv2d_bwd_filter(p.g, NULL, &g, gx, gdy, gdw, rt, &e) == 0, "%s", e.msg);
        res[rep][0] = down(p.g, gy, ny * 4), res[rep][1] = down(p.g, gdx, nx * 4), res[rep][2] = down(p.g, gdw, nw * 4);
        REQUIRE(res[rep][0] && res[rep][1] && res[rep][2]);
    }
    /* fast: fp32 sums of up to R S C terms in another order (TF32 off);
     * 16-bit outputs one rounding apart; the library's 16-bit dw is rounded */
    double tol = mode == NUMERICS_GOLDEN ? 0 : rt == DT_F32 ? 1e-4 : 2e-2;
    char what[96];
    snprintf(what, sizeof what, "conv %dx%d s%d p%d %s y", RS, RS, stride, pad, dtype_name(rt));
    CHECK(cmp_f(what, y, res[0][0], ny, tol));
    snprintf(what, sizeof what, "conv %dx%d s%d p%d %s dx", RS, RS, stride, pad, dtype_name(rt));
    CHECK(cmp_f(what, dx, res[0][1], nx, tol));
    snprintf(what, sizeof what, "conv %dx%d s%d p%d %s dw", RS, RS, stride, pad, dtype_name(rt));
    CHECK(cmp_f(what, dw, res[0][2], nw, tol * 4));
    for (int k = 0; k < 3; k++) CHECK(!memcmp(res[0][k], res[1][k], (k == 0 ? ny : k == 1 ? nx : nw) * 4));
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < 3; k++) free(res[r][k]);
    free(x), free(w), free(dy), free(y), free(dx), free(dw);
    pair_close(&p);
}

#define CONV_SHAPES(mode, rt)                                                                          \
    conv_case(mode, 2, 9, 9, 3, 16, 1, 1, 0, rt);                                                      \
    conv_case(mode, 2, 9, 9, 16, 8, 1, 2, 0, rt);                                                      \
    conv_case(mode, 3, 12, 11, 8, 16, 3, 1, 1, rt);                                                    \
    conv_case(mode, 2, 13, 13, 16, 32, 3, 2, 1, rt);                                                   \
    conv_case(mode, 2, 23, 23, 3, 16, 7, 2, 3, rt);                                                    \
    conv_case(mode, 64, 8, 8, 64, 64, 3, 1, 1, rt); /* a long weight-gradient reduction */

TEST(gpu_vision_conv_golden) { CONV_SHAPES(NUMERICS_GOLDEN, DT_F32) conv_case(NUMERICS_GOLDEN, 2, 9, 9, 8, 8, 3, 1, 1, DT_BF16); }
TEST(gpu_vision_conv_fast) { CONV_SHAPES(NUMERICS_FAST, DT_F32) }
TEST(gpu_vision_conv_fast_bf16) { CONV_SHAPES(NUMERICS_FAST, DT_BF16) conv_case(NUMERICS_FAST, 3, 12, 11, 8, 16, 3, 1, 1, DT_F16); }
/* our implicit-GEMM kernels where a library would otherwise run */
TEST(gpu_vision_conv_fast_own_kernels)
{
    const char *old = getenv("PLUMB_CONV_LIB");
    setenv("PLUMB_CONV_LIB", "none", 1);
    CONV_SHAPES(NUMERICS_FAST, DT_F32)
    if (old) setenv("PLUMB_CONV_LIB", old, 1);
    else unsetenv("PLUMB_CONV_LIB");
}

/* ---------------- BN, pooling, add, xent ---------------- */

static void small_ops(enum numerics mode)
{
    struct pair p;
    OPEN_PAIR_OR_SKIP(p, mode);
    plumb_err e = {0};
    const struct train_ops *Cc = p.c->ops->train, *G = p.g->ops->train;
    const size_t M = 5000; /* > one BN row block and > one tree chunk */
    const int C = 37;
    const size_t n = M * C;
    const double tol = mode == NUMERICS_GOLDEN ? 0 : 2e-5;
    float *x = rnd(n, -3, 5, DT_F32), *dy = rnd(n, -1, 1, DT_F32), *z = rnd(n, -1, 1, DT_F32);
    float *gam = rnd(C, 0.5, 1.5, DT_F32), *bet = rnd(C, -1, 1, DT_F32), *rm = rnd(C, 0, 1, DT_F32), *rv = rnd(C, 1, 2, DT_F32);
    int golden = mode == NUMERICS_GOLDEN;
    size_t pb = train_bn_part_bytes(2 * C, golden);
    /* cpu */
    void *part = malloc(pb);
    float mean[64], rstd[64], rmc[64], rvc[64], mdy[128], dg[64], db[64];
    memcpy(rmc, rm, C * 4), memcpy(rvc, rv, C * 4);
    float *y = malloc(n * 4), *dx = malloc(n * 4);
    REQUIRE(Cc->bn_stats(p.c, NULL, x, M, C, NULL, part, &e) == 0);
    REQUIRE(Cc->bn_mean(p.c, NULL, part, C, (int64_t)M, mean, &e) == 0);
    REQUIRE(Cc->bn_stats(p.c, NULL, x, M, C, mean, part, &e) == 0);
    REQUIRE(Cc->bn_var(p.c, NULL, part, C, (int64_t)M, 1e-5f, 0.1f, mean, rstd, rmc, rvc, &e) == 0);
    REQUIRE(Cc->bn_apply(p.c, NULL, x, mean, rstd, gam, bet, z, y, M, C, 1, DT_F32, &e) == 0);
    REQUIRE(Cc->bn_bwd_stats(p.c, NULL, x, dy, mean, rstd, M, C, part, &e) == 0);
    REQUIRE(Cc->bn_mean(p.c, NULL, part, 2 * C, (int64_t)M, mdy, &e) == 0);
    REQUIRE(Cc->bn_bwd_params(p.c, NULL, x, dy, mean, rstd, M, C, dg, db, &e) == 0);
    REQUIRE(Cc->bn_bwd_data(p.c, NULL, x, dy, mean, rstd, gam, mdy, dx, M, C, DT_BF16, &e) == 0);
    /* gpu */
    float *gx = up(p.g, x, n * 4), *gdy = up(p.g, dy, n * 4), *gz = up(p.g, z, n * 4), *gg = up(p.g, gam, C * 4);
    float *gb = up(p.g, bet, C * 4), *grm = up(p.g, rm, C * 4), *grv = up(p.g, rv, C * 4);
    float *gmean = up(p.g, NULL, C * 4), *grstd = up(p.g, NULL, C * 4), *gmdy = up(p.g, NULL, 2 * C * 4);
    float *gdg = up(p.g, NULL, C * 4), *gdb = up(p.g, NULL, C * 4), *gy = up(p.g, NULL, n * 4), *gdx = up(p.g, NULL, n * 4);
    void *gpart = up(p.g, NULL, pb);
    REQUIRE(G->bn_stats(p.g, NULL, gx, M, C, NULL, gpart, &e) == 0);
    if (golden) { /* the fixed-point parts themselves are exact: equal */
        void *hp = down(p.g, gpart, train_bn_part_bytes(C, 1));
        void *cp = malloc(pb);
        Cc->bn_stats(p.c, NULL, x, M, C, NULL, cp, &e);
        CHECK(!memcmp(hp, cp, train_bn_part_bytes(C, 1)));
        free(hp), free(cp);
    }
    REQUIRE(G->bn_mean(p.g, NULL, gpart, C, (int64_t)M, gmean, &e) == 0);
    REQUIRE(G->bn_stats(p.g, NULL, gx, M, C, gmean, gpart, &e) == 0);
    REQUIRE(G->bn_var(p.g, NULL, gpart, C, (int64_t)M, 1e-5f, 0.1f, gmean, grstd, grm, grv, &e) == 0);
    REQUIRE(G->bn_apply(p.g, NULL, gx, gmean, grstd, gg, gb, gz, gy, M, C, 1, DT_F32, &e) == 0);
    REQUIRE(G->bn_bwd_stats(p.g, NULL, gx, gdy, gmean, grstd, M, C, gpart, &e) == 0);
    REQUIRE(G->bn_mean(p.g, NULL, gpart, 2 * C, (int64_t)M, gmdy, &e) == 0);
    REQUIRE(G->bn_bwd_params(p.g, NULL, gx, gdy, gmean, grstd, M, C, gdg, gdb, &e) == 0);
    REQUIRE(G->bn_bwd_data(p.g, NULL, gx, gdy, gmean, grstd, gg, gmdy, gdx, M, C, DT_BF16, &e) == 0);
    float *h;
    CHECK(cmp_f("bn mean", mean, h = down(p.g, gmean, C * 4), C, tol));
    free(h);
    CHECK(cmp_f("bn rstd", rstd, h = down(p.g, grstd, C * 4), C, tol));
    free(h);
    CHECK(cmp_f("bn running mean", rmc, h = down(p.g, grm, C * 4), C, tol));
    free(h);
    CHECK(cmp_f("bn running var", rvc, h = down(p.g, grv, C * 4), C, tol));
    free(h);
    CHECK(cmp_f("bn apply", y, h = down(p.g, gy, n * 4), n, tol * 10));
    free(h);
    CHECK(cmp_f("bn mdy", mdy, h = down(p.g, gmdy, 2 * C * 4), 2 * C, tol * 10));
    free(h);
    CHECK(cmp_f("bn dgamma", dg, h = down(p.g, gdg, C * 4), C, tol * 100));
    free(h);
    CHECK(cmp_f("bn dbeta", db, h = down(p.g, gdb, C * 4), C, tol * 100));
    free(h);
    CHECK(cmp_f("bn dx", dx, h = down(p.g, gdx, n * 4), n, mode == NUMERICS_GOLDEN ? 0 : 1e-2));
    free(h);
    /* pooling, add, xent: one definition for both modes except xent's
     * exp/log */
    struct train_conv pg;
    REQUIRE(train_conv_set(&pg, 3, 15, 14, 5, 5, 3, 3, 2, 1) == 0);
    size_t npx = (size_t)3 * 15 * 14 * 5, npy = (size_t)3 * pg.P * pg.Q * 5;
    float *py = malloc(npy * 4), *pdx = malloc(npx * 4), *ay = malloc(15 * 4), *adx = malloc(npx * 4);
    int32_t *pidx = malloc(npy * 4);
    REQUIRE(Cc->maxpool_fwd(p.c, NULL, &pg, x, py, pidx, &e) == 0);
    REQUIRE(Cc->maxpool_bwd(p.c, NULL, &pg, dy, pidx, pdx, DT_F32, &e) == 0);
    REQUIRE(Cc->avgpool_fwd(p.c, NULL, x, ay, 3, 15 * 14, 5, DT_F32, &e) == 0);
    REQUIRE(Cc->avgpool_bwd(p.c, NULL, dy, adx, 3, 15 * 14, 5, DT_F16, &e) == 0);
    float *gpy = up(p.g, NULL, npy * 4), *gpdx = up(p.g, NULL, npx * 4), *gay = up(p.g, NULL, 15 * 4);
    float *gadx = up(p.g, NULL, npx * 4);
    int32_t *gpidx = up(p.g, NULL, npy * 4);
    REQUIRE(G->maxpool_fwd(p.g, NULL, &pg, gx, gpy, gpidx, &e) == 0);
    REQUIRE(G->maxpool_bwd(p.g, NULL, &pg, gdy, gpidx, gpdx, DT_F32, &e) == 0);
    REQUIRE(G->avgpool_fwd(p.g, NULL, gx, gay, 3, 15 * 14, 5, DT_F32, &e) == 0);
    REQUIRE(G->avgpool_bwd(p.g, NULL, gdy, gadx, 3, 15 * 14, 5, DT_F16, &e) == 0);
    CHECK(cmp_f("maxpool y", py, h = down(p.g, gpy, npy * 4), npy, 0));
    free(h);
    int32_t *hi = down(p.g, gpidx, npy * 4);
    CHECK(hi && !memcmp(hi, pidx, npy * 4));
    free(hi);
    CHECK(cmp_f("maxpool dx", pdx, h = down(p.g, gpdx, npx * 4), npx, 0));
    free(h);
    CHECK(cmp_f("avgpool y", ay, h = down(p.g, gay, 15 * 4), 15, 0));
    free(h);
    CHECK(cmp_f("avgpool dx", adx, h = down(p.g, gadx, npx * 4), npx, 0));
    free(h);
    REQUIRE(Cc->add(p.c, NULL, x, z, y, n, 1, DT_BF16, &e) == 0);
    REQUIRE(G->add(p.g, NULL, gx, gz, gy, n, 1, DT_BF16, &e) == 0);
    CHECK(cmp_f("add", y, h = down(p.g, gy, n * 4), n, 0));
    free(h);
    enum { XB = 70, XV = 1000 };
    float *lz = rnd((size_t)XB * XV, -6, 6, DT_F32), *ldz = malloc((size_t)XB * XV * 4), lps[XB];
    int32_t lab[XB], pred[XB];
    for (int b = 0; b < XB; b++) lab[b] = (b * 37) % XV;
    /* tied maxima: pred is the first (the fast GPU rows combine lanes' maxima,
     * lowest index among equals); a row of equal values predicts 0 */
    for (int b = 0; b < XB; b += 5) lz[(size_t)b * XV + 3 + b] = lz[(size_t)b * XV + 700 - b] = 9.0f;
    for (int i = 0; i < XV; i++) lz[(size_t)1 * XV + i] = 0.5f;
    double sc[2];
    REQUIRE(Cc->cls_xent(p.c, NULL, lz, lab, XB, XV, XB - 3, 0.25f, lps, sc, pred, ldz, &e) == 0);
    float *glz = up(p.g, lz, (size_t)XB * XV * 4), *gldz = up(p.g, NULL, (size_t)XB * XV * 4), *glps = up(p.g, NULL, XB * 4);
    int32_t *glab = up(p.g, lab, XB * 4), *gpred = up(p.g, NULL, XB * 4);
    double *gsc = up(p.g, NULL, 16);
    REQUIRE(G->cls_xent(p.g, NULL, glz, glab, XB, XV, XB - 3, 0.25f, glps, gsc, gpred, gldz, &e) == 0);
    CHECK(cmp_f("xent loss", lps, h = down(p.g, glps, XB * 4), XB, mode == NUMERICS_GOLDEN ? 0 : 1e-5));
    free(h);
    CHECK(cmp_f("xent dz", ldz, h = down(p.g, gldz, (size_t)XB * XV * 4), (size_t)XB * XV,
                mode == NUMERICS_GOLDEN ? 0 : 1e-6));
    free(h);
    int32_t *hp = down(p.g, gpred, XB * 4);
    CHECK(hp && !memcmp(hp, pred, XB * 4));
    free(hp);
    double *hs = down(p.g, gsc, 16);
    CHECK(hs && (mode == NUMERICS_GOLDEN ? hs[0] == sc[0] : fabs(hs[0] - sc[0]) <= 1e-4 * fabs(sc[0])) && hs[1] == sc[1]);
    free(hs);
    free(x), free(dy), free(z), free(gam), free(bet), free(rm), free(rv), free(part), free(y), free(dx);
    free(py), free(pdx), free(ay), free(adx), free(pidx), free(lz), free(ldz);
    pair_close(&p);
}
TEST(gpu_vision_small_ops_golden) { small_ops(NUMERICS_GOLDEN); }
TEST(gpu_vision_small_ops_fast) { small_ops(NUMERICS_FAST); }

/* ---------------- the model ---------------- */

/* a few steps of resnet-tiny (plain SGD with momentum) from the same init */
static int train_digest(struct dev *d, const char *preset, dtype_t prec, int steps, char hex[65], double *loss)
{
    struct resnet_config c;
    plumb_err e = {0};
    struct resnet_model *m;
    if (resnet_config_preset(preset, &c, &e) || resnet_create(d, &c, 16, prec, &m, &e) || resnet_init(m, 11, &e)) {
        fprintf(stderr, "  %s: %s\n", d->label, e.msg);
        return -1;
    }
    struct imgdata_opts o = {.seed = 3, .train_samples = 16 * steps, .test_samples = 16};
    struct imgdata *data;
    if (imgdata_open("synthetic", &o, &data, &e)) return -1;
    size_t np = resnet_n_params(m);
    float *buf = calloc(np, sizeof(float)), *x = malloc((size_t)16 * 3072 * 4);
    int32_t lab[16];
    uint32_t idx[16];
    int rc = 0;
    *loss = 0;
    for (int s = 0; s < steps && !rc; s++) {
        for (int i = 0; i < 16; i++) idx[i] = (uint32_t)(16 * s + i);
        imgdata_fill(data, 0, idx, 16, 1, 5, 0, x, lab);
        struct resnet_batch b = {.B = 16, .n_valid = 16, .x = x, .labels = lab};
        struct resnet_loss l;
        rc = resnet_forward_backward(m, &b, NULL, 1.0f / 16, &l, &e);
        if (!rc) rc = sgdm_step(d, resnet_params(m), resnet_grads(m), buf, np, 0.05f, 0.9f, 5e-4f);
        *loss = l.sum;
    }
    if (!rc) rc = resnet_digest(m, hex, &e);
    if (rc) fprintf(stderr, "  %s: %s\n", d->label, e.msg);
    free(buf);
    free(x);
    imgdata_free(data);
    resnet_free(m);
    return rc;
}

static void model_case(enum numerics mode, dtype_t prec)
{
    struct pair p;
    OPEN_PAIR_OR_SKIP(p, mode);
    char hc[65], hg[65], hg2[65];
    double lc, lg, lg2;
    REQUIRE(train_digest(p.g, "resnet-tiny", prec, 3, hg, &lg) == 0);
    REQUIRE(train_digest(p.g, "resnet-tiny", prec, 3, hg2, &lg2) == 0);
    REQUIRE(train_digest(p.c, "resnet-tiny", prec, 3, hc, &lc) == 0);
    fprintf(stderr, "  resnet-tiny %s %s: cpu %.16s loss %.9g | %s %.16s loss %.9g\n",
            mode == NUMERICS_GOLDEN ? "golden" : "fast", dtype_name(prec), hc, lc, p.g->label, hg, lg);
    CHECK_MSG(!strcmp(hg, hg2), "the GPU does not repeat itself: %s vs %s", hg, hg2);
    if (mode == NUMERICS_GOLDEN) CHECK_MSG(!strcmp(hc, hg), "golden digests: cpu %s, %s %s", hc, p.g->label, hg);
    else CHECK_NEAR(lg, lc, 0.02 * fabs(lc) + 1e-3);
    pair_close(&p);
}
TEST(gpu_vision_resnet_golden_digest) { model_case(NUMERICS_GOLDEN, DT_F32); model_case(NUMERICS_GOLDEN, DT_BF16); }
TEST(gpu_vision_resnet_fast) { model_case(NUMERICS_FAST, DT_F32); model_case(NUMERICS_FAST, DT_BF16); }
