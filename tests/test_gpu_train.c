/* GPU training ops against the cpu backend (docs/GPU.md). With PLUMB_TEST_DEVICE=cuda (or
 * hip) every train_ops entry runs on the GPU and on the cpu backend on the
 * same inputs: golden results must be the same bits; fast results must agree
 * within fp32/bf16 tolerances and repeat bit-for-bit run to run. The whole
 * ctr model trained a few golden steps on both must end with the same
 * parameter digest; in fast mode its per-tensor parameter deltas must agree
 * within the ops' error bounds (fast_deltas_case). An optional op the GPU
 * lacks is a skip naming it. Without a GPU every test skips and says why;
 * tests/t_gpu_fake.sh runs them all on the fake plugin (tests/fake_gpu.c, the
 * cpu backend named "hip"). `PLUMB_TEST_DEVICE=cuda build/plumb-tests gpu_train` */
#include "test.h"
#include "dev/dev.h"
#include "dev/train_ops.h"
#include "core/hash.h"
#include "models/ctr/ctr.h"
#include "train/optim.h"
#include "models/ctr/data.h"
#include "train/sampler.h"
#include "models/ctr/synth.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int is_gpu_spec(const char *s) { return !strncmp(s, "cuda", 4) || !strncmp(s, "hip", 3); }

struct pair {
    struct dev *c, *g;
};

/* Opens cpu and the GPU under test with numerics mode, or skips. */
#define OPEN_PAIR_OR_SKIP(p, mode)                                                                   \
    do {                                                                                             \
        const char *spec_ = test_device();                                                           \
        if (!is_gpu_spec(spec_))                                                                     \
            TEST_SKIP("PLUMB_TEST_DEVICE=%s: GPU training tests run with PLUMB_TEST_DEVICE=cuda or hip", spec_); \
        plumb_err e_ = {0};                                                                          \
        REQUIRE(dev_open("cpu", &(p).c, &e_) == 0);                                                  \
        int rc_ = dev_open(spec_, &(p).g, &e_);                                                      \
        CHECK_MSG(rc_ == PLUMB_OK, "dev_open(%s): %s", spec_, e_.msg);                               \
        if (rc_) {                                                                                   \
            dev_close((p).c);                                                                        \
            return;                                                                                  \
        }                                                                                            \
        REQUIRE(dev_set_numerics((p).c, mode, 0, &e_) == 0 && dev_set_numerics((p).g, mode, 0, &e_) == 0); \
        REQUIRE((p).g->ops->train != NULL);                                                          \
    } while (0)

static void pair_close(struct pair *p)
{
    dev_close(p->g);
    dev_close(p->c);
}

/* An optional op the device lacks: its comparison cannot run, so the test
 * reports a skip naming it (not a pass), while the rest of it still runs
 * and can still fail. Closes the pair when a case returns at once. */
static void note_missing(struct pair *p, const char *op)
{
    snprintf(test_skip_reason, sizeof test_skip_reason, "%s has no %s (optional train op): not compared", p->g->label, op);
    test_skipped_now = 1;
}
static void missing_op(struct pair *p, const char *op)
{
    note_missing(p, op);
    pair_close(p);
}

static uint64_t g_rs = 88172645463325252ull;
static double urand(void)
{
    g_rs ^= g_rs << 13;
    g_rs ^= g_rs >> 7;
    g_rs ^= g_rs << 17;
    return (double)(g_rs >> 11) * (1.0 / 9007199254740992.0);
}
static float *rnd_f(size_t n, double lo, double hi)
{
    float *x = malloc(n * sizeof(float) + 4);
    for (size_t i = 0; i < n; i++) x[i] = (float)(lo + (hi - lo) * urand());
    return x;
}
static void *up(struct dev *d, const void *h, size_t bytes)
{
    void *p = NULL;
    plumb_err e = {0};
    if (dev_alloc(d, bytes ? bytes : 4, &p, &e)) return NULL;
    if (h && bytes && dev_upload(d, p, h, bytes, &e)) return NULL;
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
/* Bit-exact (golden) or relative-tolerance comparison of n floats; g_floor
 * is the magnitude below which the tolerance stops shrinking (sums of many
 * signed terms can cancel to near 0 while their rounding errors do not). */
static double g_floor = 1e-3;
static int cmp_f(const char *what, const float *a, const float *b, size_t n, double rtol)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        int ok;
        if (rtol == 0) ok = !memcmp(&a[i], &b[i], sizeof(float));
        else ok = fabs((double)a[i] - b[i]) <= rtol * (fabs((double)a[i]) + g_floor) || (a[i] != a[i] && b[i] != b[i]);
        if (!ok && bad++ == 0) first = i;
    }
    if (bad)
        fprintf(stderr, "  %s: %zu of %zu differ, first at %zu: cpu %.9g gpu %.9g\n", what, bad, n, first,
                (double)a[first], (double)b[first]);
    return bad == 0;
}

/* ---------------- linear ---------------- */

static void linear_case(enum numerics mode, int B, int K, int N, int relu, int with_bias, dtype_t rt)
{
    struct pair p;
    OPEN_PAIR_OR_SKIP(p, mode);
    double tol = mode == NUMERICS_GOLDEN ? 0 : rt == DT_F32 ? 2e-4 : 3e-2;
    plumb_err e = {0};
    float *x = rnd_f((size_t)B * K, -1, 1), *w = rnd_f((size_t)N * K, -0.5, 0.5), *bias = rnd_f(N, -0.3, 0.3);
    float *dy = rnd_f((size_t)B * N, -1, 1);
    const struct train_ops *C = p.c->ops->train, *G = p.g->ops->train;
    REQUIRE(C->round_fp32(p.c, NULL, x, x, (size_t)B * K, rt, &e) == 0);
    REQUIRE(C->round_fp32(p.c, NULL, w, w, (size_t)N * K, rt, &e) == 0);
    REQUIRE(C->round_fp32(p.c, NULL, dy, dy, (size_t)B * N, rt, &e) == 0);
    float *yc = malloc((size_t)B * N * 4), *dxc = malloc((size_t)B * K * 4), *dwc = malloc((size_t)N * K * 4),
          *dbc = malloc((size_t)N * 4), *dyc = malloc((size_t)B * N * 4);
    memcpy(dyc, dy, (size_t)B * N * 4);
    REQUIRE(C->linear_fwd(p.c, NULL, x, w, with_bias ? bias : NULL, yc, B, K, N, relu, rt, &e) == 0);
    REQUIRE(C->linear_bwd(p.c, NULL, x, w, yc, dyc, dxc, dwc, with_bias ? dbc : NULL, B, K, N, relu, rt, &e) == 0);

    float *gx = up(p.g, x, (size_t)B * K * 4), *gw = up(p.g, w, (size_t)N * K * 4), *gb = up(p.g, bias, N * 4);
    float *gy = up(p.g, NULL, (size_t)B * N * 4), *gdy = up(p.g, dy, (size_t)B * N * 4);
    float *gdx = up(p.g, NULL, (size_t)B * K * 4), *gdw = up(p.g, NULL, (size_t)N * K * 4), *gdb = up(p.g, NULL, N * 4);
    REQUIRE(gx && gw && gb && gy && gdy && gdx && gdw && gdb);
    REQUIRE(G->linear_fwd(p.g, NULL, gx, gw, with_bias ? gb : NULL, gy, B, K, N, relu, rt, &e) == 0);
    float *hy = down(p.g, gy, (size_t)B * N * 4);
    /* backward from the cpu's forward output, so the relu mask is the same */
    REQUIRE(dev_upload(p.g, gy, yc, (size_t)B * N * 4, &e) == 0);
    REQUIRE(G->linear_bwd(p.g, NULL, gx, gw, gy, gdy, gdx, gdw, with_bias ? gdb : NULL, B, K, N, relu, rt, &e) == 0);
    float *hdx = down(p.g, gdx, (size_t)B * K * 4), *hdw = down(p.g, gdw, (size_t)N * K * 4),
          *hdb = down(p.g, gdb, N * 4), *hdy = down(p.g, gdy, (size_t)B * N * 4);
    REQUIRE(hy && hdx && hdw && hdb && hdy);
    char what[96];
    snprintf(what, sizeof what, "linear_fwd B%d K%d N%d relu%d bias%d %s", B, K, N, relu, with_bias, dtype_name(rt));
    g_floor = 1e-2 * sqrt((double)K);
    CHECK_MSG(cmp_f(what, yc, hy, (size_t)B * N, tol), "%s", what);
    CHECK_MSG(cmp_f("linear_bwd masked dy", dyc, hdy, (size_t)B * N, 0), "masked dy differs (%s)", what);
    g_floor = 1e-2 * sqrt((double)N);
    CHECK_MSG(cmp_f("linear_bwd dx", dxc, hdx, (size_t)B * K, tol), "dx differs (%s)", what);
    g_floor = 1e-2 * sqrt((double)B); /* dw and dbias sum B terms of size ~0.5 */
    CHECK_MSG(cmp_f("linear_bwd dw", dwc, hdw, (size_t)N * K, tol * 4), "dw differs (%s)", what);
    if (with_bias) CHECK_MSG(cmp_f("linear_bwd dbias", dbc, hdb, N, tol * 4), "dbias differs (%s)", what);
    g_floor = 1e-3;
    /* run to run: the GPU result repeats bit for bit in both modes */
    REQUIRE(G->linear_fwd(p.g, NULL, gx, gw, with_bias ? gb : NULL, gy, B, K, N, relu, rt, &e) == 0);
    float *hy2 = down(p.g, gy, (size_t)B * N * 4);
    CHECK(hy2 && cmp_f("linear_fwd repeat", hy, hy2, (size_t)B * N, 0));
    free(hy2);
    void *all[] = {gx, gw, gb, gy, gdy, gdx, gdw, gdb};
    for (int i = 0; i < 8; i++) dev_free(p.g, all[i]);
    free(x); free(w); free(bias); free(dy); free(yc); free(dxc); free(dwc); free(dbc); free(dyc);
    free(hy); free(hdx); free(hdw); free(hdb); free(hdy);
    pair_close(&p);
}

/* linear_bwd_relu_in (optional fused op) against its definition on the same
 * device: linear_bwd, then the producing layer's linear_bwd (relu 1) masking
 * dx in place and forming its dbias. Bits must be equal in both modes. */
static void relu_in_case(enum numerics mode, int B, int K, int N, int relu, dtype_t rt)
{
    struct pair p;
    OPEN_PAIR_OR_SKIP(p, mode);
    const struct train_ops *G = p.g->ops->train;
    if (!G->linear_bwd_relu_in) {
        missing_op(&p, "linear_bwd_relu_in");
        return;
    }
    plumb_err e = {0};
    enum { KP = 8 }; /* the producing layer: [B, KP] -> [B, K] */
    const struct train_ops *C = p.c->ops->train;
    float *x = rnd_f((size_t)B * K, -1, 1), *w = rnd_f((size_t)N * K, -0.5, 0.5), *y = rnd_f((size_t)B * N, -1, 1);
    float *dy = rnd_f((size_t)B * N, -1, 1), *xp = rnd_f((size_t)B * KP, -1, 1), *wp = rnd_f((size_t)K * KP, -1, 1);
    for (size_t i = 0; i < (size_t)B * K; i++) x[i] = x[i] > 0.0f ? x[i] : 0.0f; /* a ReLU output */
    REQUIRE(C->round_fp32(p.c, NULL, x, x, (size_t)B * K, rt, &e) == 0);
    REQUIRE(C->round_fp32(p.c, NULL, dy, dy, (size_t)B * N, rt, &e) == 0);
    size_t BK = (size_t)B * K, BN = (size_t)B * N, NK = (size_t)N * K;
    float *gx = up(p.g, x, BK * 4), *gw = up(p.g, w, NK * 4), *gy = up(p.g, y, BN * 4), *gxp = up(p.g, xp, (size_t)B * KP * 4);
    float *gwp = up(p.g, wp, (size_t)K * KP * 4), *gdy1 = up(p.g, dy, BN * 4), *gdy2 = up(p.g, dy, BN * 4);
    float *gdx1 = up(p.g, NULL, BK * 4), *gdx2 = up(p.g, NULL, BK * 4), *gdw1 = up(p.g, NULL, NK * 4);
    float *gdw2 = up(p.g, NULL, NK * 4), *gdb1 = up(p.g, NULL, N * 4), *gdb2 = up(p.g, NULL, N * 4);
    float *gdbx1 = up(p.g, NULL, K * 4), *gdbx2 = up(p.g, NULL, K * 4), *gdwp = up(p.g, NULL, (size_t)K * KP * 4);
    REQUIRE(gx && gw && gy && gxp && gwp && gdy1 && gdy2 && gdx1 && gdx2 && gdw1 && gdw2 && gdb1 && gdb2 && gdbx1 &&
            gdbx2 && gdwp);
    /* the definition: linear_bwd, then the producer's masking + dbias */
    REQUIRE(G->linear_bwd(p.g, NULL, gx, gw, gy, gdy1, gdx1, gdw1, gdb1, B, K, N, relu, rt, &e) == 0);
    REQUIRE(G->linear_bwd(p.g, NULL, gxp, gwp, gx, gdx1, NULL, gdwp, gdbx1, B, KP, K, 1, rt, &e) == 0);
    /* fused */
    REQUIRE(G->linear_bwd_relu_in(p.g, NULL, gx, gw, gy, gdy2, gdx2, gdw2, gdb2, B, K, N, relu, rt, gdbx2, &e) == 0);
    char what[96];
    snprintf(what, sizeof what, "relu_in %s B%d K%d N%d relu%d %s", mode == NUMERICS_GOLDEN ? "golden" : "fast", B, K,
             N, relu, dtype_name(rt));
    struct { const float *a, *b; size_t n; const char *name; } cmp[] = {
        {gdx1, gdx2, BK, "dx"}, {gdw1, gdw2, NK, "dw"}, {gdb1, gdb2, (size_t)N, "dbias"}, {gdbx1, gdbx2, (size_t)K, "dbias_x"}};
    for (int i = 0; i < 4; i++) {
        float *ha = down(p.g, cmp[i].a, cmp[i].n * 4), *hb = down(p.g, cmp[i].b, cmp[i].n * 4);
        CHECK_MSG(ha && hb && cmp_f(cmp[i].name, ha, hb, cmp[i].n, 0), "%s: %s differs", what, cmp[i].name);
        free(ha);
        free(hb);
    }
    void *all[] = {gx, gw, gy, gxp, gwp, gdy1, gdy2, gdx1, gdx2, gdw1, gdw2, gdb1, gdb2, gdbx1, gdbx2, gdwp};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dev_free(p.g, all[i]);
    free(x); free(w); free(y); free(dy); free(xp); free(wp);
    pair_close(&p);
}

/* linear_fwd16 / linear_bwd16 (optional, 16-bit operand mirrors) against
 * linear_fwd / linear_bwd_relu_in on the same device: fast mode sums in
 * another order (tolerance); the mirrors written must be exactly the bf16 of
 * the fp32 results; golden mode must give the same bits. */
/* The inputs of a 16-bit linear case, on the host: x [B,K] a ReLU output
 * (for relu_in), w [N,K], bias [N], dy [B,N], each rounded to rt as the
 * contract wants GEMM inputs (bias too when round_bias; every third dy zero,
 * as if masked above, when masked_dy). */
static void lin16_inputs(struct dev *cpu, int B, int K, int N, dtype_t rt, int round_bias, int masked_dy, float **x,
                         float **w, float **bias, float **dy)
{
    const struct train_ops *C = cpu->ops->train;
    plumb_err e = {0};
    const size_t BK = (size_t)B * K, BN = (size_t)B * N, NK = (size_t)N * K;
    *x = rnd_f(BK, -1, 1), *w = rnd_f(NK, -0.5, 0.5), *bias = rnd_f(N, -0.3, 0.3), *dy = rnd_f(BN, -1, 1);
    for (size_t i = 0; i < BK; i++) (*x)[i] = (*x)[i] > 0.0f ? (*x)[i] : 0.0f;
    for (size_t i = 0; masked_dy && i < BN; i++) (*dy)[i] = i % 3 == 0 ? 0.0f : (*dy)[i];
    REQUIRE(C->round_fp32(cpu, NULL, *x, *x, BK, rt, &e) == 0);
    REQUIRE(C->round_fp32(cpu, NULL, *w, *w, NK, rt, &e) == 0);
    REQUIRE(C->round_fp32(cpu, NULL, *dy, *dy, BN, rt, &e) == 0);
    if (round_bias) REQUIRE(C->round_fp32(cpu, NULL, *bias, *bias, (size_t)N, rt, &e) == 0);
}

static void mirror_case(enum numerics mode, int B, int K, int N, dtype_t rt)
{
    struct pair p;
    OPEN_PAIR_OR_SKIP(p, mode);
    const struct train_ops *G = p.g->ops->train;
    if (!G->linear_fwd16 || !G->linear_bwd16) {
        missing_op(&p, "linear_fwd16 / linear_bwd16");
        return;
    }
    plumb_err e = {0};
    const double tol = mode == NUMERICS_GOLDEN ? 0 : 3e-2;
    size_t BK = (size_t)B * K, BN = (size_t)B * N, NK = (size_t)N * K;
    float *x, *w, *bias, *dy;
    lin16_inputs(p.c, B, K, N, rt, 0, 0, &x, &w, &bias, &dy);
    float *gx = up(p.g, x, BK * 4), *gw = up(p.g, w, NK * 4), *gb = up(p.g, bias, N * 4);
    float *gy1 = up(p.g, NULL, BN * 4), *gy2 = up(p.g, NULL, BN * 4), *gdy1 = up(p.g, dy, BN * 4), *gdy2 = up(p.g, dy, BN * 4);
    float *gdx1 = up(p.g, NULL, BK * 4), *gdx2 = up(p.g, NULL, BK * 4), *gdw1 = up(p.g, NULL, NK * 4), *gdw2 = up(p.g, NULL, NK * 4);
    float *gdb1 = up(p.g, NULL, N * 4), *gdb2 = up(p.g, NULL, N * 4), *gdx_b1 = up(p.g, NULL, K * 4), *gdx_b2 = up(p.g, NULL, K * 4);
    uint16_t *gy16 = up(p.g, NULL, BN * 2), *gdx16 = up(p.g, NULL, BK * 2);
    REQUIRE(gx && gw && gb && gy1 && gy2 && gdy1 && gdy2 && gdx1 && gdx2 && gdw1 && gdw2 && gdb1 && gdb2 && gdx_b1 &&
            gdx_b2 && gy16 && gdx16);
    REQUIRE(G->linear_fwd(p.g, NULL, gx, gw, gb, gy1, B, K, N, 1, rt, &e) == 0);
    REQUIRE(G->linear_fwd16(p.g, NULL, gx, NULL, gw, NULL, gb, gy2, gy16, B, K, N, 1, rt, &e) == 0);
    REQUIRE(G->linear_bwd_relu_in(p.g, NULL, gx, gw, gy1, gdy1, gdx1, gdw1, gdb1, B, K, N, 1, rt, gdx_b1, &e) == 0);
    REQUIRE(G->linear_bwd16(p.g, NULL, gx, NULL, gw, NULL, gy1, gdy2, NULL, gdx2, gdx16, gdw2, gdb2, B, K, N, 1, rt, 1,
                            gdx_b2, &e) == 0);
    char what[96];
    snprintf(what, sizeof what, "mirrors %s B%d K%d N%d %s", mode == NUMERICS_GOLDEN ? "golden" : "fast", B, K, N,
             dtype_name(rt));
    struct { const float *a, *b; size_t n; double fl; const char *name; } cmp[] = {
        {gy1, gy2, BN, sqrt((double)K), "y"}, {gdx1, gdx2, BK, sqrt((double)N), "dx"},
        {gdw1, gdw2, NK, sqrt((double)B), "dw"}, {gdb1, gdb2, (size_t)N, sqrt((double)B), "dbias"},
        {gdx_b1, gdx_b2, (size_t)K, sqrt((double)B), "dbias_x"}};
    for (int i = 0; i < 5; i++) {
        float *ha = down(p.g, cmp[i].a, cmp[i].n * 4), *hb = down(p.g, cmp[i].b, cmp[i].n * 4);
        g_floor = 1e-2 * cmp[i].fl;
        CHECK_MSG(ha && hb && cmp_f(cmp[i].name, ha, hb, cmp[i].n, i >= 2 ? tol * 4 : tol), "%s: %s differs", what,
                  cmp[i].name);
        free(ha);
        free(hb);
    }
    g_floor = 1e-3;
    if (K % 8) {
        /* a padded mirror filled by the forward and read by the backward:
         * the same operands as the op's own copies, so the same bits */
        const size_t Kp = (size_t)(K + 7) / 8 * 8;
        uint16_t *gxp = up(p.g, NULL, (size_t)B * Kp * 2);
        float *gy3 = up(p.g, NULL, BN * 4), *gdy3 = up(p.g, dy, BN * 4), *gdx3 = up(p.g, NULL, BK * 4);
        float *gdw3 = up(p.g, NULL, NK * 4), *gdb3 = up(p.g, NULL, N * 4), *gdx_b3 = up(p.g, NULL, K * 4);
        REQUIRE(gxp && gy3 && gdy3 && gdx3 && gdw3 && gdb3 && gdx_b3);
        REQUIRE(G->linear_fwd16(p.g, NULL, gx, gxp, gw, NULL, gb, gy3, NULL, B, K, N, 1, rt, &e) == 0);
        REQUIRE(G->linear_bwd16(p.g, NULL, gx, gxp, gw, NULL, gy1, gdy3, NULL, gdx3, NULL, gdw3, gdb3, B, K, N, 1, rt, 1,
                                gdx_b3, &e) == 0);
        float *ha = down(p.g, gdw2, NK * 4), *hb = down(p.g, gdw3, NK * 4), *hy2 = down(p.g, gy2, BN * 4),
              *hy3 = down(p.g, gy3, BN * 4);
        CHECK_MSG(ha && hb && cmp_f("dw, padded mirror reused", ha, hb, NK, 0), "%s: padded mirror dw differs", what);
        CHECK_MSG(hy2 && hy3 && cmp_f("y, padded mirror", hy2, hy3, BN, 0), "%s: padded mirror y differs", what);
        free(ha), free(hb), free(hy2), free(hy3);
        void *more[] = {gxp, gy3, gdy3, gdx3, gdw3, gdb3, gdx_b3};
        for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) dev_free(p.g, more[i]);
    }
    /* the mirrors: exactly the 16-bit values of what was stored */
    float *hy = down(p.g, gy2, BN * 4), *hdx = down(p.g, gdx2, BK * 4);
    uint16_t *hy16 = down(p.g, gy16, BN * 2), *hdx16 = down(p.g, gdx16, BK * 2);
    REQUIRE(hy && hdx && hy16 && hdx16);
    size_t bad = 0;
    for (size_t i = 0; i < BN; i++) bad += (rt == DT_BF16 ? f32_to_bf16(hy[i]) : f32_to_f16(hy[i])) != hy16[i];
    for (size_t i = 0; i < BK; i++) bad += (rt == DT_BF16 ? f32_to_bf16(hdx[i]) : f32_to_f16(hdx[i])) != hdx16[i];
    CHECK_MSG(bad == 0, "%s: %zu mirror elements differ from the stored values", what, bad);
    free(hy), free(hdx), free(hy16), free(hdx16);
    void *all[] = {gx, gw, gb, gy1, gy2, gdy1, gdy2, gdx1, gdx2, gdw1, gdw2, gdb1, gdb2, gdx_b1, gdx_b2, gy16, gdx16};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dev_free(p.g, all[i]);
    free(x), free(w), free(bias), free(dy);
    pair_close(&p);
}

/* Mirror only (train_ops.h): tensors given as their 16-bit mirrors alone
 * (x, y, dy, dx NULL) give the results of the calls with fp32 tensors:
 * golden the same bits, fast within tolerance (the GEMM may store 16 bits
 * itself, with another kernel). dy arrives masked (relu 0, no dbias), as
 * from the layer above's relu_in. */
static void mirror_only_case(enum numerics mode, int B, int K, int N, dtype_t rt)
{
    struct pair p;
    OPEN_PAIR_OR_SKIP(p, mode);
    const struct train_ops *G = p.g->ops->train;
    if (!G->linear_fwd16 || !G->linear_bwd16) {
        missing_op(&p, "linear_fwd16 / linear_bwd16");
        return;
    }
    plumb_err e = {0};
    const double tol = mode == NUMERICS_GOLDEN ? 0 : 3e-2;
    const size_t Kp = (size_t)(K + 7) / 8 * 8, BK = (size_t)B * K, BN = (size_t)B * N, NK = (size_t)N * K;
    /* a 16-bit store reads the bias in rt: the contract wants it rounded */
    float *x, *w, *bias, *dy;
    lin16_inputs(p.c, B, K, N, rt, 1, 1, &x, &w, &bias, &dy);
    uint16_t *x16h = malloc(BK * 2), *dy16h = malloc(BN * 2);
    for (size_t i = 0; i < BK; i++) x16h[i] = rt == DT_BF16 ? f32_to_bf16(x[i]) : f32_to_f16(x[i]);
    for (size_t i = 0; i < BN; i++) dy16h[i] = rt == DT_BF16 ? f32_to_bf16(dy[i]) : f32_to_f16(dy[i]);
    float *gx = up(p.g, x, BK * 4), *gw = up(p.g, w, NK * 4), *gb = up(p.g, bias, N * 4), *gdy = up(p.g, dy, BN * 4);
    /* x16: x's padded mirror [B, Kp] (zeros after K), as a layer below or
     * the interaction fills it; dx16 alone is [B, Kp] too */
    uint16_t *x16p = calloc((size_t)B * Kp, 2);
    for (int b = 0; b < B; b++) memcpy(x16p + (size_t)b * Kp, x16h + (size_t)b * K, (size_t)K * 2);
    uint16_t *gx16 = up(p.g, x16p, (size_t)B * Kp * 2), *gdy16 = up(p.g, dy16h, BN * 2);
    float *gy = up(p.g, NULL, BN * 4), *gdx = up(p.g, NULL, BK * 4), *gdw1 = up(p.g, NULL, NK * 4),
          *gdw2 = up(p.g, NULL, NK * 4), *gbx1 = up(p.g, NULL, K * 4), *gbx2 = up(p.g, NULL, K * 4);
    uint16_t *gy16 = up(p.g, NULL, BN * 2), *gdx16 = up(p.g, NULL, (size_t)B * Kp * 2);
    REQUIRE(gx && gw && gb && gdy && gx16 && gdy16 && gy && gdx && gdw1 && gdw2 && gbx1 && gbx2 && gy16 && gdx16);
    /* the fp32 calls */
    REQUIRE(G->linear_fwd(p.g, NULL, gx, gw, gb, gy, B, K, N, 1, rt, &e) == 0);
    REQUIRE(G->linear_bwd_relu_in(p.g, NULL, gx, gw, NULL, gdy, gdx, gdw1, NULL, B, K, N, 0, rt, gbx1, &e) == 0);
    /* mirror only: y16 alone; x as its padded mirror; dy16 alone; dx16 alone */
    REQUIRE(G->linear_fwd16(p.g, NULL, NULL, gx16, gw, NULL, gb, NULL, gy16, B, K, N, 1, rt, &e) == 0);
    REQUIRE(G->linear_bwd16(p.g, NULL, NULL, gx16, gw, NULL, NULL, NULL, gdy16, NULL, gdx16, gdw2, NULL, B, K, N, 0, rt,
                            1, gbx2, &e) == 0);
    char what[96];
    snprintf(what, sizeof what, "mirror only %s B%d K%d N%d %s", mode == NUMERICS_GOLDEN ? "golden" : "fast", B, K, N,
             dtype_name(rt));
    float *hy = down(p.g, gy, BN * 4), *hdx = down(p.g, gdx, BK * 4);
    uint16_t *hy16 = down(p.g, gy16, BN * 2), *hdxp = down(p.g, gdx16, (size_t)B * Kp * 2), *hdx16 = malloc(BK * 2);
    REQUIRE(hy && hdx && hy16 && hdxp && hdx16);
    for (int b = 0; b < B; b++) memcpy(hdx16 + (size_t)b * K, hdxp + (size_t)b * Kp, (size_t)K * 2);
    float *wy = malloc(BN * 4), *wdx = malloc(BK * 4);
    for (size_t i = 0; i < BN; i++) wy[i] = rt == DT_BF16 ? bf16_to_f32(hy16[i]) : f16_to_f32(hy16[i]);
    for (size_t i = 0; i < BK; i++) wdx[i] = rt == DT_BF16 ? bf16_to_f32(hdx16[i]) : f16_to_f32(hdx16[i]);
    g_floor = 1e-2 * sqrt((double)K);
    CHECK_MSG(cmp_f("y16", hy, wy, BN, tol), "%s: y16 differs from y", what);
    g_floor = 1e-2 * sqrt((double)N);
    CHECK_MSG(cmp_f("dx16", hdx, wdx, BK, tol), "%s: dx16 differs from dx", what);
    size_t neg = 0; /* the relu_in mask: dx16 is +0 wherever x is not positive */
    for (size_t i = 0; i < BK; i++) neg += !(x[i] > 0.0f) && hdx16[i] != 0;
    CHECK_MSG(neg == 0, "%s: %zu masked dx16 elements are not +0", what, neg);
    struct { const float *a, *b; size_t n; const char *name; } cmp[] = {
        {gdw1, gdw2, NK, "dw"}, {gbx1, gbx2, (size_t)K, "dbias_x"}};
    for (int i = 0; i < 2; i++) {
        float *ha = down(p.g, cmp[i].a, cmp[i].n * 4), *hb = down(p.g, cmp[i].b, cmp[i].n * 4);
        g_floor = 1e-2 * sqrt((double)B);
        CHECK_MSG(ha && hb && cmp_f(cmp[i].name, ha, hb, cmp[i].n, tol * 4), "%s: %s differs", what, cmp[i].name);
        free(ha);
        free(hb);
    }
    g_floor = 1e-3;
    free(hy), free(hdx), free(hy16), free(hdx16), free(hdxp), free(wy), free(wdx), free(x16h), free(x16p), free(dy16h);
    void *all[] = {gx, gw, gb, gdy, gx16, gdy16, gy, gdx, gdw1, gdw2, gbx1, gbx2, gy16, gdx16};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dev_free(p.g, all[i]);
    free(x), free(w), free(bias), free(dy);
    pair_close(&p);
}

TEST(gpu_train_linear_mirror_only)
{
    mirror_only_case(NUMERICS_GOLDEN, 70, 24, 33, DT_BF16);
    mirror_only_case(NUMERICS_GOLDEN, 45, 13, 20, DT_F16);  /* padded K */
    mirror_only_case(NUMERICS_FAST, 4096, 512, 256, DT_BF16);
    mirror_only_case(NUMERICS_FAST, 4096, 64, 16, DT_BF16); /* the narrow bottom layers */
    mirror_only_case(NUMERICS_FAST, 1000, 96, 40, DT_F16);  /* B not a multiple of 64: a short last chunk */
    mirror_only_case(NUMERICS_FAST, 2048, 367, 512, DT_BF16);
    mirror_only_case(NUMERICS_FAST, 512, 36, 20, DT_BF16);  /* K % 8 = 4 */
}

TEST(gpu_train_linear_mirrors)
{
    mirror_case(NUMERICS_GOLDEN, 70, 24, 33, DT_BF16);
    mirror_case(NUMERICS_FAST, 4096, 512, 256, DT_BF16);  /* aligned K, dw in batch slices */
    mirror_case(NUMERICS_FAST, 4096, 367, 512, DT_BF16);  /* padded K */
    mirror_case(NUMERICS_FAST, 2048, 13, 512, DT_F16);    /* the dense input's width, fp16 */
    mirror_case(NUMERICS_FAST, 1024, 256, 1, DT_BF16);    /* N = 1 */
}

TEST(gpu_train_linear_relu_in)
{
    relu_in_case(NUMERICS_GOLDEN, 70, 24, 33, 1, DT_F32);
    relu_in_case(NUMERICS_GOLDEN, 65, 367, 40, 0, DT_BF16);
    relu_in_case(NUMERICS_FAST, 4096, 512, 256, 1, DT_BF16);  /* aligned K, dw in batch slices */
    relu_in_case(NUMERICS_FAST, 4096, 367, 512, 1, DT_BF16);  /* padded K */
    relu_in_case(NUMERICS_FAST, 300, 64, 16, 1, DT_F32);
    relu_in_case(NUMERICS_FAST, 2048, 256, 1, 0, DT_F32);     /* N = 1: the top MLP's last layer */
}

TEST(gpu_train_linear_golden)
{
    linear_case(NUMERICS_GOLDEN, 37, 29, 19, 1, 1, DT_F32);
    linear_case(NUMERICS_GOLDEN, 70, 13, 33, 0, 0, DT_F32);
    linear_case(NUMERICS_GOLDEN, 65, 367, 40, 1, 1, DT_BF16);
    linear_case(NUMERICS_GOLDEN, 20, 24, 1, 0, 1, DT_F16);
}
TEST(gpu_train_linear_fast)
{
    linear_case(NUMERICS_FAST, 256, 64, 128, 1, 1, DT_F32);
    linear_case(NUMERICS_FAST, 130, 367, 512, 1, 1, DT_BF16);
    linear_case(NUMERICS_FAST, 77, 13, 1, 0, 1, DT_F32);
    /* B = 4096: dw as 8 batch slices of 512 rows (strided-batched GEMM + ordered sum) */
    linear_case(NUMERICS_FAST, 4096, 64, 96, 1, 1, DT_BF16);
    linear_case(NUMERICS_FAST, 4096, 13, 512, 1, 1, DT_F32);
}

/* Devices opened one after another in one process (accept's seeds, the
 * ladder's rungs): each close must release the plugin's per-device state.
 * The freed struct dev is kept occupied by a host block of its size so the
 * next open gets a new address (as it does in a long run, where other
 * allocations take the freed block); the plugin's caches were keyed by that
 * address with 16 slots and never released, so the 17th device failed
 * ("too many devices for the cuBLASLt plan cache"), leaking each device's
 * workspaces on the way. */
TEST(gpu_train_devices_opened_in_turn_release_their_state)
{
    const char *spec = test_device();
    if (!is_gpu_spec(spec)) TEST_SKIP("PLUMB_TEST_DEVICE=%s: GPU training tests run with PLUMB_TEST_DEVICE=cuda or hip", spec);
    enum { N_OPENS = 40 };
    void *hold[N_OPENS] = {0};
    for (int i = 0; i < N_OPENS; i++) {
        linear_case(NUMERICS_FAST, 130, 367, 512, 1, 1, i % 2 ? DT_BF16 : DT_F32);
        if (test_failed_now) {
            fprintf(stderr, "  device open %d of %d failed\n", i + 1, N_OPENS);
            break;
        }
        hold[i] = malloc(sizeof(struct dev));
    }
    for (int i = 0; i < N_OPENS; i++) free(hold[i]);
}

/* ---------------- small elementwise ops, loss, optimizers ---------------- */

/* sumsq of x [n] (host) and gx (its device copy) added to out = start:
 * the cpu's bits on the GPU */
static void sumsq_same(struct pair *p, const float *x, const float *gx, size_t n, double start)
{
    plumb_err e = {0};
    double c = start, *g = up(p->g, &start, 8);
    REQUIRE(p->c->ops->train->sumsq(p->c, NULL, x, n, &c, &e) == 0);
    REQUIRE(p->g->ops->train->sumsq(p->g, NULL, gx, n, g, &e) == 0);
    double *h = down(p->g, g, 8);
    CHECK_MSG(h && !memcmp(h, &c, 8), "sumsq of %zu %.17g vs %.17g", n, h ? *h : 0.0, c);
    free(h);
    dev_free(p->g, g);
}

static void small_ops(enum numerics mode)
{
    struct pair p;
    OPEN_PAIR_OR_SKIP(p, mode);
    double tol = mode == NUMERICS_GOLDEN ? 0 : 1e-5;
    const struct train_ops *C = p.c->ops->train, *G = p.g->ops->train;
    plumb_err e = {0};
    enum { N = 5000, B = 300 };
    float *x = rnd_f(N, -3, 3), *x2 = rnd_f(N, -1, 1);
    x[7] = -0.0f;
    x[8] = 0.0f;
    float *gx = up(p.g, x, N * 4), *gx2 = up(p.g, x2, N * 4), *gy = up(p.g, NULL, N * 4);
    float *yc = malloc(N * 4), *h;
    /* relu fwd (bf16) / bwd, round, affine: one definition in both modes */
    REQUIRE(C->relu_fwd(p.c, NULL, x, yc, N, DT_BF16, &e) == 0);
    REQUIRE(G->relu_fwd(p.g, NULL, gx, gy, N, DT_BF16, &e) == 0);
    CHECK((h = down(p.g, gy, N * 4)) && cmp_f("relu_fwd", yc, h, N, 0));
    free(h);
    REQUIRE(C->relu_bwd(p.c, NULL, x, x2, yc, N, &e) == 0);
    REQUIRE(G->relu_bwd(p.g, NULL, gx, gx2, gy, N, &e) == 0);
    CHECK((h = down(p.g, gy, N * 4)) && cmp_f("relu_bwd", yc, h, N, 0));
    free(h);
    REQUIRE(C->round_fp32(p.c, NULL, x, yc, N, DT_F16, &e) == 0);
    REQUIRE(G->round_fp32(p.g, NULL, gx, gy, N, DT_F16, &e) == 0);
    CHECK((h = down(p.g, gy, N * 4)) && cmp_f("round_fp32 f16", yc, h, N, 0));
    free(h);
    REQUIRE(C->affine(p.c, NULL, x, yc, N, 0.37f, -0.11f, &e) == 0);
    REQUIRE(G->affine(p.g, NULL, gx, gy, N, 0.37f, -0.11f, &e) == 0);
    CHECK((h = down(p.g, gy, N * 4)) && cmp_f("affine", yc, h, N, 0));
    free(h);
    /* sigmoid and BCE: golden transcendentals vs fast vendor ones */
    float *z = rnd_f(B, -20, 20), *lab = malloc(B * 4);
    for (int i = 0; i < B; i++) lab[i] = urand() < 0.3 ? 1.0f : 0.0f;
    z[0] = 0.0f;
    z[1] = -90.0f;
    z[2] = 90.0f;
    float *gz = up(p.g, z, B * 4), *glab = up(p.g, lab, B * 4), *gl = up(p.g, NULL, B * 4), *gdz = up(p.g, NULL, B * 4);
    double *gsc = up(p.g, NULL, 16), sc_c[2];
    float lc[B], dzc[B];
    REQUIRE(C->sigmoid(p.c, NULL, z, yc, B, &e) == 0);
    REQUIRE(G->sigmoid(p.g, NULL, gz, gy, B, &e) == 0);
    CHECK((h = down(p.g, gy, B * 4)) && cmp_f("sigmoid", yc, h, B, tol));
    free(h);
    REQUIRE(C->bce_logits(p.c, NULL, z, lab, B, B - 17, 0.125f, lc, sc_c, dzc, &e) == 0);
    REQUIRE(G->bce_logits(p.g, NULL, gz, glab, B, B - 17, 0.125f, gl, gsc, gdz, &e) == 0);
    CHECK((h = down(p.g, gl, B * 4)) && cmp_f("bce loss", lc, h, B, tol));
    free(h);
    CHECK((h = down(p.g, gdz, B * 4)) && cmp_f("bce dz", dzc, h, B, tol));
    free(h);
    double *hsc = down(p.g, gsc, 16);
    REQUIRE(hsc);
    if (mode == NUMERICS_GOLDEN) CHECK_MSG(!memcmp(hsc, sc_c, 16), "bce sum %.17g vs %.17g", hsc[0], sc_c[0]);
    else CHECK_NEAR(hsc[0], sc_c[0], 1e-9 * fabs(sc_c[0]) + 1e-12);
    CHECK_EQ_INT((long long)hsc[1], B - 17);
    free(hsc);
    /* sgd, adamw (dense): same definitions in both modes */
    float *w = rnd_f(N, -1, 1), *m = rnd_f(N, -0.1, 0.1), *v = rnd_f(N, 0, 0.01);
    float *gw = up(p.g, w, N * 4), *gm = up(p.g, m, N * 4), *gv = up(p.g, v, N * 4);
    REQUIRE(C->sgd(p.c, NULL, w, x2, N, 0.05f, 0.01f, &e) == 0);
    REQUIRE(G->sgd(p.g, NULL, gw, gx2, N, 0.05f, 0.01f, &e) == 0);
    CHECK((h = down(p.g, gw, N * 4)) && cmp_f("sgd", w, h, N, 0));
    free(h);
    REQUIRE(C->adamw(p.c, NULL, w, x2, m, v, N, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, 0.271f, 0.00399f, &e) == 0);
    REQUIRE(G->adamw(p.g, NULL, gw, gx2, gm, gv, N, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, 0.271f, 0.00399f, &e) == 0);
    CHECK((h = down(p.g, gw, N * 4)) && cmp_f("adamw w", w, h, N, 0));
    free(h);
    CHECK((h = down(p.g, gv, N * 4)) && cmp_f("adamw v", v, h, N, 0));
    free(h);
    /* sparse optimizers on distinct rows of a [R, D] table */
    enum { R = 50, D = 16, U = 9 };
    int64_t rows[U] = {3, 0, 49, 17, 18, 5, 44, 2, 30};
    float *tab = rnd_f(R * D, -1, 1), *tm = rnd_f(R * D, -0.1, 0.1), *tv = rnd_f(R * D, 0, 0.01), *rg = rnd_f(U * D, -1, 1);
    float *gtab = up(p.g, tab, R * D * 4), *gtm = up(p.g, tm, R * D * 4), *gtv = up(p.g, tv, R * D * 4);
    float *grg = up(p.g, rg, U * D * 4);
    int64_t *grows = up(p.g, rows, sizeof rows);
    REQUIRE(C->sgd_sparse(p.c, NULL, tab, rows, rg, U, D, 0.1f, &e) == 0);
    REQUIRE(G->sgd_sparse(p.g, NULL, gtab, grows, grg, U, D, 0.1f, &e) == 0);
    REQUIRE(C->adamw_sparse(p.c, NULL, tab, tm, tv, rows, rg, U, D, 1e-2f, 0.9f, 0.99f, 1e-8f, 0.0f, 0.1f, 0.01f, &e) == 0);
    REQUIRE(G->adamw_sparse(p.g, NULL, gtab, gtm, gtv, grows, grg, U, D, 1e-2f, 0.9f, 0.99f, 1e-8f, 0.0f, 0.1f, 0.01f, &e) == 0);
    CHECK((h = down(p.g, gtab, R * D * 4)) && cmp_f("sgd_sparse+adamw_sparse table", tab, h, R * D, 0));
    free(h);
    CHECK((h = down(p.g, gtm, R * D * 4)) && cmp_f("adamw_sparse m", tm, h, R * D, 0));
    free(h);
    /* sumsq (several 1024-blocks, added to what out holds) and scale_check */
    sumsq_same(&p, x, gx, N, 1.5);
    /* and over 301 blocks: three groups of the fast order (src/dev/train_ops.h) */
    {
        const size_t nb = 300 * 1024 + 77;
        float *xb = rnd_f(nb, -2, 2), *gxb = up(p.g, xb, nb * 4);
        sumsq_same(&p, xb, gxb, nb, 0.5);
        dev_free(p.g, gxb);
        free(xb);
    }
    int fi_c = 0, fi0 = 0, *gfi = up(p.g, &fi0, 4);
    REQUIRE(C->scale_check(p.c, NULL, x, N, 0.5f, &fi_c, &e) == 0);
    REQUIRE(G->scale_check(p.g, NULL, gx, N, 0.5f, gfi, &e) == 0);
    int *hfi = down(p.g, gfi, 4);
    CHECK(hfi && *hfi == 0 && fi_c == 0);
    free(hfi);
    CHECK((h = down(p.g, gx, N * 4)) && cmp_f("scale_check", x, h, N, 0));
    free(h);
    float inf = INFINITY;
    REQUIRE(dev_upload(p.g, gx + 4999, &inf, 4, &e) == 0);
    REQUIRE(G->scale_check(p.g, NULL, gx, N, 1.0f, gfi, &e) == 0);
    hfi = down(p.g, gfi, 4);
    CHECK_MSG(hfi && *hfi == 1, "scale_check did not see an inf");
    free(hfi);
    /* mul 1 reads only: a NaN is seen in the float4 steps, in the last
     * n % 4 values and from a pointer that is not 16-byte aligned (offset,
     * n; the NaN at the last value), and finite values stay their bits */
    {
        const size_t cs[3][2] = {{0, 4996}, {0, 4998}, {1, 4996}};
        const float nan = NAN;
        REQUIRE(dev_upload(p.g, gx + 4999, &x[4999], 4, &e) == 0);
        for (int k = 0; k < 3; k++) {
            const size_t last = cs[k][0] + cs[k][1] - 1;
            REQUIRE(dev_upload(p.g, gfi, &fi0, 4, &e) == 0);
            REQUIRE(dev_upload(p.g, gx + last, &nan, 4, &e) == 0);
            REQUIRE(G->scale_check(p.g, NULL, gx + cs[k][0], cs[k][1], 1.0f, gfi, &e) == 0);
            hfi = down(p.g, gfi, 4);
            CHECK_MSG(hfi && *hfi == 1, "scale_check (mul 1, offset %zu, n %zu) did not see a NaN at %zu", cs[k][0],
                      cs[k][1], last);
            free(hfi);
            REQUIRE(dev_upload(p.g, gx + last, &x[last], 4, &e) == 0);
        }
        REQUIRE(dev_upload(p.g, gfi, &fi0, 4, &e) == 0);
        REQUIRE(G->scale_check(p.g, NULL, gx, N, 1.0f, gfi, &e) == 0);
        hfi = down(p.g, gfi, 4);
        CHECK_MSG(hfi && *hfi == 0, "scale_check (mul 1) saw a non-finite value in finite data");
        free(hfi);
        CHECK((h = down(p.g, gx, N * 4)) && cmp_f("scale_check mul 1", x, h, N, 0));
        free(h);
    }
    /* the ops with the count on the device (the queued step): U = 5 of the 9 rows, the gate */
    if (G->sumsq_dn && G->scale_check_dn && G->sgd_sparse_dn && G->sgd_gated) {
        int64_t un = 5;
        int64_t *gun = up(p.g, &un, 8);
        double s_c = 0, s0 = 0, *gs = up(p.g, &s0, 8);
        REQUIRE(C->sumsq(p.c, NULL, rg, 5 * D, &s_c, &e) == 0);
        REQUIRE(G->sumsq_dn(p.g, NULL, grg, gun, D, U, gs, &e) == 0);
        double *hs = down(p.g, gs, 8);
        CHECK_MSG(hs && !memcmp(hs, &s_c, 8), "sumsq_dn %.17g vs %.17g", hs ? *hs : 0.0, s_c);
        free(hs);
        REQUIRE(C->sgd_sparse(p.c, NULL, tab, rows, rg, 5, D, 0.1f, &e) == 0);
        REQUIRE(G->sgd_sparse_dn(p.g, NULL, gtab, grows, grg, gun, U, D, 0.1f, NULL, &e) == 0);
        int one = 1, *gone = up(p.g, &one, 4);
        REQUIRE(G->sgd_sparse_dn(p.g, NULL, gtab, grows, grg, gun, U, D, 0.1f, gone, &e) == 0); /* gated off */
        REQUIRE(G->sgd_gated(p.g, NULL, gtab, gtm, R * D, 0.1f, 0.0f, gone, &e) == 0);
        CHECK((h = down(p.g, gtab, R * D * 4)) && cmp_f("sgd_sparse_dn table", tab, h, R * D, 0));
        free(h);
        dev_free(p.g, gun), dev_free(p.g, gs), dev_free(p.g, gone);
    }
    void *all[] = {gx, gx2, gy, gz, glab, gl, gdz, gsc, gw, gm, gv, gtab, gtm, gtv, grg, grows, gfi};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dev_free(p.g, all[i]);
    free(x); free(x2); free(yc); free(z); free(lab); free(w); free(m); free(v);
    free(tab); free(tm); free(tv); free(rg);
    pair_close(&p);
}

/* sgd_momentum_masked on the GPU against the cpu's, bit for bit (fmaf chains
 * alike), over 3 steps and 7 decay ranges of odd lengths, the first step
 * initialising the buffer */
static void momentum_masked_case(enum numerics mode)
{
    struct pair p;
    OPEN_PAIR_OR_SKIP(p, mode);
    const struct train_ops *C = p.c->ops->train, *G = p.g->ops->train;
    if (!G->sgd_momentum_masked || !C->sgd_momentum_masked) return missing_op(&p, "sgd_momentum_masked");
    plumb_err e = {0};
    enum { N = 100003 };
    const int64_t dec[14] = {0, 17, 100, 5000, 5001, 5002, 9000, 40000, 40001, 60000, 70000, 99999, 100000, 100003};
    float *w = rnd_f(N, -1, 1), *buf = malloc(N * 4);
    memset(buf, 0, N * 4);
    float *gw = up(p.g, w, N * 4), *gb = up(p.g, buf, N * 4);
    int64_t *gd = up(p.g, dec, sizeof dec);
    for (int step = 0; step < 3; step++) {
        float *g = rnd_f(N, -2, 2), *gg = up(p.g, g, N * 4);
        REQUIRE(C->sgd_momentum_masked(p.c, NULL, w, g, buf, N, 0.05f, 1e-3f, 0.9f, step == 0, dec, 7, &e) == 0);
        REQUIRE(G->sgd_momentum_masked(p.g, NULL, gw, gg, gb, N, 0.05f, 1e-3f, 0.9f, step == 0, gd, 7, &e) == 0);
        dev_free(p.g, gg);
        free(g);
    }
    float *h = down(p.g, gw, N * 4);
    CHECK(h && cmp_f("sgd_momentum_masked w", w, h, N, 0));
    free(h);
    h = down(p.g, gb, N * 4);
    CHECK(h && cmp_f("sgd_momentum_masked buf", buf, h, N, 0));
    free(h);
    dev_free(p.g, gw), dev_free(p.g, gb), dev_free(p.g, gd);
    free(w), free(buf);
    pair_close(&p);
}
TEST(gpu_train_sgd_momentum_masked_fast) { momentum_masked_case(NUMERICS_FAST); }
TEST(gpu_train_sgd_momentum_masked_golden) { momentum_masked_case(NUMERICS_GOLDEN); }

TEST(gpu_train_small_ops_golden) { small_ops(NUMERICS_GOLDEN); }
TEST(gpu_train_small_ops_fast) { small_ops(NUMERICS_FAST); }

/* ---------------- embeddings, interaction, sparse reduction ---------------- */

static void sparse_ops(enum numerics mode, int B, int rows_per_table, int hot, int D)
{
    struct pair p;
    OPEN_PAIR_OR_SKIP(p, mode);
    /* embedding and interaction have one definition in both modes; the
     * sparse sums have one per mode (golden one chain, fast chunks of
     * TRAIN_SPARSE_CHUNK, train_ops.h) that the cpu implements too: the same
     * bits as the cpu in the pair's mode either way */
    (void)mode;
    const struct train_ops *C = p.c->ops->train, *G = p.g->ops->train;
    plumb_err e = {0};
    enum { T = 26 };
    const int F = T + 1, W = D + F * (F - 1) / 2, NV = B - B / 7;
    int64_t off[T];
    for (int t = 0; t < T; t++) off[t] = (int64_t)t * rows_per_table;
    size_t R = (size_t)T * rows_per_table;
    uint32_t *idx = malloc((size_t)B * T * 4);
    for (int i = 0; i < B * T; i++) {
        double u = urand();
        /* a Zipf-like head: with `hot`, 40% of samples hit row 0 of each table */
        idx[i] = hot && u < 0.4 ? 0 : (uint32_t)(urand() * rows_per_table);
    }
    float *table = rnd_f(R * D, -0.2, 0.2), *bottom = rnd_f((size_t)B * D, -1, 1);
    float *emb_c = malloc((size_t)B * T * D * 4), *int_c = malloc((size_t)B * W * 4);
    float *dout = rnd_f((size_t)B * W, -1, 1), *dbot_c = malloc((size_t)B * D * 4), *demb_c = malloc((size_t)B * T * D * 4);
    int64_t *rows_c = malloc((size_t)B * T * 8), nr_c = -1;
    float *rg_c = malloc((size_t)B * T * D * 4);
    dtype_t rt = DT_BF16;
    REQUIRE(C->embedding_fwd(p.c, NULL, table, off, idx, emb_c, B, T, D, rt, &e) == 0);
    REQUIRE(C->interact_fwd(p.c, NULL, bottom, emb_c, int_c, B, T, D, rt, &e) == 0);
    REQUIRE(C->interact_bwd(p.c, NULL, bottom, emb_c, dout, dbot_c, demb_c, B, T, D, rt, &e) == 0);
    REQUIRE(C->embedding_bwd(p.c, NULL, off, idx, demb_c, B, NV, T, D, rows_c, rg_c, &nr_c, &e) == 0);

    float *gtable = up(p.g, table, R * D * 4), *gbottom = up(p.g, bottom, (size_t)B * D * 4);
    int64_t *goff = up(p.g, off, sizeof off);
    uint32_t *gidx = up(p.g, idx, (size_t)B * T * 4);
    float *gemb = up(p.g, NULL, (size_t)B * T * D * 4), *gint = up(p.g, NULL, (size_t)B * W * 4);
    float *gdout = up(p.g, dout, (size_t)B * W * 4), *gdbot = up(p.g, NULL, (size_t)B * D * 4);
    float *gdemb = up(p.g, NULL, (size_t)B * T * D * 4), *grg = up(p.g, NULL, (size_t)B * T * D * 4);
    int64_t *grows = up(p.g, NULL, (size_t)B * T * 8), *gnr = up(p.g, NULL, 8);
    REQUIRE(gtable && gbottom && goff && gidx && gemb && gint && gdout && gdbot && gdemb && grg && grows && gnr);
    REQUIRE(G->embedding_fwd(p.g, NULL, gtable, goff, gidx, gemb, B, T, D, rt, &e) == 0);
    REQUIRE(G->interact_fwd(p.g, NULL, gbottom, gemb, gint, B, T, D, rt, &e) == 0);
    REQUIRE(G->interact_bwd(p.g, NULL, gbottom, gemb, gdout, gdbot, gdemb, B, T, D, rt, &e) == 0);
    float *h;
    CHECK((h = down(p.g, gdemb, (size_t)B * T * D * 4)) && cmp_f("interact_bwd demb", demb_c, h, (size_t)B * T * D, 0));
    free(h);
    /* the sparse backward from the cpu's demb, so only the reduction is compared */
    REQUIRE(dev_upload(p.g, gdemb, demb_c, (size_t)B * T * D * 4, &e) == 0);
    REQUIRE(G->embedding_bwd(p.g, NULL, goff, gidx, gdemb, B, NV, T, D, grows, grg, gnr, &e) == 0);
    /* fused ops (optional entries): the same bits as their parts */
    if (!G->embedding_interact_fwd) note_missing(&p, "embedding_interact_fwd");
    if (G->embedding_interact_fwd) {
        float *gemb2 = up(p.g, NULL, (size_t)B * T * D * 4), *gint2 = up(p.g, NULL, (size_t)B * W * 4);
        REQUIRE(gemb2 && gint2);
        REQUIRE(G->embedding_interact_fwd(p.g, NULL, gtable, goff, gidx, gbottom, gemb2, gint2, B, T, D, rt, &e) == 0);
        CHECK((h = down(p.g, gemb2, (size_t)B * T * D * 4)) && cmp_f("fused gather emb", emb_c, h, (size_t)B * T * D, 0));
        free(h);
        CHECK((h = down(p.g, gint2, (size_t)B * W * 4)) && cmp_f("fused gather+interact", int_c, h, (size_t)B * W, 0));
        free(h);
        dev_free(p.g, gemb2);
        dev_free(p.g, gint2);
    }
    if (!G->embedding_interact_fwd16 || !G->interact_bwd16) note_missing(&p, "embedding_interact_fwd16 / interact_bwd16");
    if (G->embedding_interact_fwd16 && G->interact_bwd16) {
        /* the interaction's 16-bit output (padded rows, zeros after W) and
         * gradient: exactly the fp32 ops' values, at the model's stride and
         * at a wider one */
        for (int ld = (W + 7) / 8 * 8; ld <= (W + 7) / 8 * 8 + 2; ld += 2) {
            const size_t n16 = (size_t)B * ld;
            uint16_t *fill = malloc(n16 * 2), *d16 = malloc(n16 * 2);
            float *doutr = malloc((size_t)B * W * 4), *dbot_r = malloc((size_t)B * D * 4),
                  *demb_r = malloc((size_t)B * T * D * 4);
            REQUIRE(fill && d16 && doutr && dbot_r && demb_r);
            for (size_t i = 0; i < n16; i++) fill[i] = 0xffff; /* NaN: what must be overwritten or not read */
            for (int b = 0; b < B; b++)
                for (int q = 0; q < ld; q++)
                    d16[(size_t)b * ld + q] = q < W ? f32_to_bf16(dout[(size_t)b * W + q]) : 0xffff;
            for (size_t i = 0; i < (size_t)B * W; i++) doutr[i] = bf16_to_f32(f32_to_bf16(dout[i]));
            REQUIRE(C->interact_bwd(p.c, NULL, bottom, emb_c, doutr, dbot_r, demb_r, B, T, D, rt, &e) == 0);
            uint16_t *gi16 = up(p.g, fill, n16 * 2), *gd16 = up(p.g, d16, n16 * 2);
            float *gemb3 = up(p.g, NULL, (size_t)B * T * D * 4), *gdbot3 = up(p.g, NULL, (size_t)B * D * 4),
                  *gdemb3 = up(p.g, NULL, (size_t)B * T * D * 4);
            REQUIRE(gi16 && gd16 && gemb3 && gdbot3 && gdemb3);
            REQUIRE(G->embedding_interact_fwd16(p.g, NULL, gtable, goff, gidx, gbottom, gemb3, NULL, gi16, ld, B, T, D,
                                                rt, &e) == 0);
            REQUIRE(G->interact_bwd16(p.g, NULL, gbottom, gemb3, gd16, ld, gdbot3, gdemb3, B, T, D, rt, &e) == 0);
            uint16_t *h16 = down(p.g, gi16, n16 * 2);
            size_t bad = 0;
            for (int b = 0; h16 && b < B; b++)
                for (int q = 0; q < ld; q++)
                    bad += h16[(size_t)b * ld + q] != (q < W ? f32_to_bf16(int_c[(size_t)b * W + q]) : 0);
            CHECK_MSG(h16 && bad == 0, "embedding_interact_fwd16 ld %d: %zu of %zu 16-bit outputs differ", ld, bad, n16);
            free(h16);
            CHECK((h = down(p.g, gemb3, (size_t)B * T * D * 4)) && cmp_f("fwd16 emb", emb_c, h, (size_t)B * T * D, 0));
            free(h);
            CHECK((h = down(p.g, gdbot3, (size_t)B * D * 4)) && cmp_f("interact_bwd16 dbottom", dbot_r, h, (size_t)B * D, 0));
            free(h);
            CHECK((h = down(p.g, gdemb3, (size_t)B * T * D * 4)) &&
                  cmp_f("interact_bwd16 demb", demb_r, h, (size_t)B * T * D, 0));
            free(h);
            void *g3[] = {gi16, gd16, gemb3, gdbot3, gdemb3};
            for (size_t i = 0; i < sizeof g3 / sizeof g3[0]; i++) dev_free(p.g, g3[i]);
            free(fill), free(d16), free(doutr), free(dbot_r), free(demb_r);
        }
    }
    if (!G->embedding_bwd_sgd) note_missing(&p, "embedding_bwd_sgd");
    if (G->embedding_bwd_sgd) {
        const float lr = 0.37f;
        float *tab_c = malloc(R * D * 4);
        memcpy(tab_c, table, R * D * 4);
        REQUIRE(C->sgd_sparse(p.c, NULL, tab_c, rows_c, rg_c, (size_t)nr_c, D, lr, &e) == 0);
        float *gtab2 = up(p.g, table, R * D * 4);
        int64_t *gnr2 = up(p.g, NULL, 8);
        REQUIRE(gtab2 && gnr2);
        REQUIRE(G->embedding_bwd_sgd(p.g, NULL, goff, gidx, gdemb, B, NV, T, D, gtab2, lr, gnr2, NULL, &e) == 0);
        int64_t *hn2 = down(p.g, gnr2, 8);
        CHECK(hn2 && *hn2 == nr_c);
        free(hn2);
        CHECK((h = down(p.g, gtab2, R * D * 4)) && cmp_f("fused embedding_bwd+sgd table", tab_c, h, R * D, 0));
        free(h);
        dev_free(p.g, gtab2);
        dev_free(p.g, gnr2);
        free(tab_c);
    }
    CHECK((h = down(p.g, gemb, (size_t)B * T * D * 4)) && cmp_f("embedding_fwd", emb_c, h, (size_t)B * T * D, 0));
    free(h);
    CHECK((h = down(p.g, gint, (size_t)B * W * 4)) && cmp_f("interact_fwd", int_c, h, (size_t)B * W, 0));
    free(h);
    CHECK((h = down(p.g, gdbot, (size_t)B * D * 4)) && cmp_f("interact_bwd dbottom", dbot_c, h, (size_t)B * D, 0));
    free(h);
    int64_t *hnr = down(p.g, gnr, 8);
    REQUIRE(hnr);
    CHECK_EQ_INT(*hnr, nr_c);
    if (*hnr == nr_c) {
        int64_t *hrows = down(p.g, grows, (size_t)nr_c * 8);
        CHECK_MSG(hrows && !memcmp(hrows, rows_c, (size_t)nr_c * 8), "embedding_bwd rows differ");
        free(hrows);
        CHECK((h = down(p.g, grg, (size_t)nr_c * D * 4)) && cmp_f("embedding_bwd grads", rg_c, h, (size_t)nr_c * D, 0));
        free(h);
    }
    free(hnr);
    /* sparse_coalesce of rows beyond 2^32 (up to 35 bits: every radix pass of an H200-sized table active) */
    size_t n = (size_t)B * 3;
    int64_t *rin = malloc(n * 8);
    for (size_t i = 0; i < n; i++) rin[i] = (int64_t)(urand() * 40) * 123456789011ll % 30000000000ll + (i % 5 == 0 ? 7 : 0);
    float *vin = rnd_f(n * D, -1, 1), *vout_c = malloc(n * D * 4);
    int64_t *rout_c = malloc(n * 8), nu_c = -1;
    REQUIRE(C->sparse_coalesce(p.c, NULL, rin, vin, n, D, rout_c, vout_c, &nu_c, &e) == 0);
    int64_t *grin = up(p.g, rin, n * 8), *grout = up(p.g, NULL, n * 8), *gnu = up(p.g, NULL, 8);
    float *gvin = up(p.g, vin, n * D * 4), *gvout = up(p.g, NULL, n * D * 4);
    REQUIRE(G->sparse_coalesce(p.g, NULL, grin, gvin, n, D, grout, gvout, gnu, &e) == 0);
    int64_t *hnu = down(p.g, gnu, 8);
    REQUIRE(hnu);
    CHECK_EQ_INT(*hnu, nu_c);
    if (*hnu == nu_c) {
        int64_t *hr = down(p.g, grout, (size_t)nu_c * 8);
        CHECK_MSG(hr && !memcmp(hr, rout_c, (size_t)nu_c * 8), "sparse_coalesce rows differ");
        free(hr);
        CHECK((h = down(p.g, gvout, (size_t)nu_c * D * 4)) && cmp_f("sparse_coalesce vals", vout_c, h, (size_t)nu_c * D, 0));
        free(h);
    }
    free(hnu);
    void *all[] = {gtable, gbottom, goff, gidx, gemb, gint, gdout, gdbot, gdemb, grg, grows, gnr, grin, grout, gnu, gvin, gvout};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dev_free(p.g, all[i]);
    free(idx); free(table); free(bottom); free(emb_c); free(int_c); free(dout); free(dbot_c); free(demb_c);
    free(rows_c); free(rg_c); free(rin); free(vin); free(vout_c); free(rout_c);
    pair_close(&p);
}

TEST(gpu_train_sparse_golden)
{
    sparse_ops(NUMERICS_GOLDEN, 9, 7, 0, 16);       /* tiny tables: many duplicates */
    sparse_ops(NUMERICS_GOLDEN, 700, 1000, 1, 16);  /* several sort tiles, a hot row */
    sparse_ops(NUMERICS_GOLDEN, 300, 50, 1, 8);     /* ctr-tiny's width (warp interaction kernels) */
    sparse_ops(NUMERICS_GOLDEN, 200, 50, 1, 12);    /* a width without warp kernels: block-per-sample path */
}
TEST(gpu_train_sparse_fast)
{
    sparse_ops(NUMERICS_FAST, 700, 1000, 1, 16);    /* hot rows: 40% of the samples in one row per table */
    sparse_ops(NUMERICS_FAST, 3000, 100000, 0, 16);
    sparse_ops(NUMERICS_FAST, 4000, 1000, 1, 16);   /* ~1600 duplicates: 7 chunks per hot row */
    sparse_ops(NUMERICS_FAST, 2000, 300, 1, 32);    /* the widest warp kernel; G = 32 lanes per row */
    sparse_ops(NUMERICS_FAST, 500, 80, 1, 4);       /* G = 4 lanes per row, 8 rows per warp */
}

/* ---------------- the whole model ---------------- */

struct run_cfg {
    const char *preset;
    int rows, B, steps;
    dtype_t prec;
};

/* What one training run leaves: the parameters before and after (host
 * copies, [n_params]), the tensor layout, the digest and the last loss. */
struct run_out {
    float *init, *final;
    size_t np;
    int nt;
    struct model_tensor t[2 * 2 * CTR_MAX_LAYERS + CTR_N_TABLES];
    int n_bottom, n_top, kmax;
    char hex[65];
    double loss;
};
static void run_out_free(struct run_out *o)
{
    free(o->init);
    free(o->final);
}

static int cfg_of(const struct run_cfg *rc_, struct ctr_config *c, plumb_err *e)
{
    if (!strcmp(rc_->preset, "odd-widths")) {
        /* hidden widths that are not multiples of 8 (100, 36) next to ones that are (16) */
        if (ctr_config_preset("dlrm-kaggle", rc_->rows, c, e)) return 1;
        c->n_bottom = 2;
        c->bottom[1] = 100;
        c->bottom[2] = 16;
        c->n_top = 3;
        c->top[1] = 36;
        c->top[2] = 16;
        c->top[3] = 1;
        return ctr_config_validate(c, e) != 0;
    }
    return ctr_config_preset(rc_->preset, rc_->rows, c, e) != 0;
}

/* Trains cfg on device d from ctr_init (Philox on d: the same bits on every
 * device) over the same synthetic batches (a hot head of rows 0..2 in every
 * table, 3 masked samples per batch), plain SGD; fills *o. */
static int train_run(struct dev *d, const struct run_cfg *rc_, struct run_out *o)
{
    plumb_err e = {0};
    memset(o, 0, sizeof *o);
    struct ctr_config c;
    if (cfg_of(rc_, &c, &e)) {
        fprintf(stderr, "  config: %s\n", e.msg);
        return 1;
    }
    struct ctr_model *m = NULL;
    int irc = ctr_create(d, &c, rc_->B, rc_->prec, &m, &e);
    if (!irc) irc = ctr_init(m, 1234, &e);
    if (!irc) {
        o->np = ctr_n_params(m);
        o->init = malloc(o->np * 4);
        o->final = malloc(o->np * 4);
        irc = dev_download(d, o->init, ctr_params(m), o->np * 4, &e);
    }
    if (irc) {
        fprintf(stderr, "  %s: %s\n", d->label, e.msg);
        ctr_free(m);
        return 1;
    }
    o->nt = ctr_n_tensors(m);
    for (int i = 0; i < o->nt; i++) o->t[i] = *ctr_tensor(m, i);
    o->n_bottom = c.n_bottom;
    o->n_top = c.n_top;
    o->kmax = c.emb_dim;
    for (int l = 0; l < c.n_bottom; l++) o->kmax = c.bottom[l] > o->kmax ? c.bottom[l] : o->kmax;
    for (int l = 0; l < c.n_top; l++) o->kmax = c.top[l] > o->kmax ? c.top[l] : o->kmax;
    int B = rc_->B;
    float *dense = malloc((size_t)B * 13 * 4), *lab = malloc((size_t)B * 4);
    uint32_t *sp = malloc((size_t)B * 26 * 4);
    uint64_t s = 99;
    struct optim opt;
    int rc = optim_init(&opt, d, ctr_layout(m), "sgd", 0.0, 0.0, 0.9, 0.999, 1e-8, &e);
    for (int st = 1; st <= rc_->steps && !rc; st++) {
        for (int i = 0; i < B * 13; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            dense[i] = (float)((s >> 40) % 1000) / 250.0f;
        }
        for (int i = 0; i < B * 26; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            uint32_t r = (uint32_t)((s >> 33) % (uint64_t)c.rows[i % 26]);
            sp[i] = (s >> 20) % 3 == 0 ? r % 3 : r; /* a hot head */
        }
        for (int i = 0; i < B; i++) lab[i] = (float)((dense[i * 13] + dense[i * 13 + 1]) > 4.0f);
        struct ctr_batch b = {B, B - 3, dense, sp, lab};
        struct ctr_loss l;
        rc = ctr_forward_backward(m, &b, 1.0f / (B - 3), &l, &e);
        int64_t *rows;
        float *rg;
        size_t nr;
        ctr_sparse_grads(m, &rows, &rg, &nr);
        if (!rc) rc = optim_step(&opt, ctr_params(m), ctr_grads(m), rows, rg, nr, 0.1f, st, &e);
        o->loss = l.sum / (double)l.count;
    }
    optim_free(&opt);
    if (!rc) rc = dev_download(d, o->final, ctr_params(m), o->np * 4, &e);
    if (!rc) rc = ctr_param_digest(m, o->hex, &e);
    if (rc) fprintf(stderr, "  %s: %s\n", d->label, e.msg);
    free(dense); free(lab); free(sp);
    ctr_free(m);
    return rc;
}

static void digest_of(const float *p, size_t n, char hex[65]) { hash_sha256_hex(p, n * 4, hex); }

/* Fast mode: the GPU's parameter deltas (end minus initial, per tensor,
 * embedding tables included) against the cpu's, within a tolerance from the
 * ops' error bounds. Two correct implementations of one op differ by at most
 * twice its bound:
 *   - a K-term fp32 dot product in any order: |s^ - s| <= g_K sum|a_i b_i|,
 *     g_K = K u / (1 - K u), u = 2^-24 (K up to the widest fan-in, kmax);
 *   - a result stored in rt (bf16 / fp16) is rounded once more: + u_rt
 *     relative (2^-8 / 2^-11; fp32: 0).
 * A parameter's gradient is a chain of L = 2 (n_bottom + 1 + n_top) such
 * stages (forward to the loss and back; 1 for the interaction), and S steps
 * feed each step's difference into the next, so to first order, normwise
 * over a tensor (where no cancellation dominates),
 *   ||dGPU - dCPU|| <= tau ||dCPU||,  tau = S L 2 (g_K + u_rt) + sqrt(S L 2 g_K).
 * The square-root term is the ReLU masks: a mask entry flips only where a
 * pre-activation lies within its fp32 error bound of 0 (rounding to rt keeps
 * the sign), a fraction <= 2 g_K of the entries per stage, each an O(1)
 * change of its term, so O(sqrt(fraction)) normwise. dlrm-kaggle fp32:
 * tau = 0.057; bf16: 0.43; fp16: 0.10. Exact, whatever the arithmetic: the
 * initial parameters (Philox on each device) are the same bits, every tensor
 * moves (else the comparison says nothing), and the table rows that move are
 * exactly the same rows (the rows of the samples). */
static void fast_deltas_case(struct pair *p, const struct run_cfg *cfg)
{
    struct run_out g, c;
    REQUIRE(train_run(p->g, cfg, &g) == 0);
    if (train_run(p->c, cfg, &c)) {
        run_out_free(&g);
        REQUIRE(0);
    }
    REQUIRE(g.np == c.np && g.nt == c.nt);
    char hg[65], hc[65];
    digest_of(g.init, g.np, hg);
    digest_of(c.init, c.np, hc);
    CHECK_MSG(!strcmp(hg, hc), "initial parameters: %s %.16s, cpu %.16s", p->g->label, hg, hc);
    const double u = 0x1p-24, uk = c.kmax * u / (1 - c.kmax * u);
    const double urt = cfg->prec == DT_BF16 ? 0x1p-8 : cfg->prec == DT_F16 ? 0x1p-11 : 0;
    const double SL = (double)cfg->steps * 2 * (c.n_bottom + 1 + c.n_top);
    const double tau = SL * 2 * (uk + urt) + sqrt(SL * 2 * uk);
    double worst = 0;
    const char *worst_t = "";
    int bad = 0;
    for (int i = 0; i < c.nt; i++) {
        const struct model_tensor *t = &c.t[i];
        double dd = 0, dc = 0;
        size_t moved_c = 0, rows_differ = 0;
        for (size_t k = 0; k < t->numel; k++) {
            size_t o = t->offset + k;
            double a = (double)g.final[o] - g.init[o], b = (double)c.final[o] - c.init[o];
            dd += (a - b) * (a - b);
            dc += b * b;
            moved_c += b != 0;
        }
        if (t->flags & TENSOR_SPARSE) /* a row moves on one device exactly when it moves on the other */
            for (int r = 0; r < t->rows; r++) {
                int mg = 0, mc = 0;
                for (int k = 0; k < t->cols; k++) {
                    size_t o = t->offset + (size_t)r * t->cols + k;
                    mg |= g.final[o] != g.init[o];
                    mc |= c.final[o] != c.init[o];
                }
                rows_differ += mg != mc;
            }
        double rel = dc > 0 ? sqrt(dd / dc) : INFINITY;
        if (rel > worst) worst = rel, worst_t = t->name;
        if (!moved_c || rel > tau || rows_differ) {
            if (bad++ < 5)
                fprintf(stderr, "  %s: |d%s - dcpu| / |dcpu| = %.3g (tau %.3g), %zu of %zu moved on the cpu, %zu rows "
                                "moved on one device only\n",
                        t->name, p->g->label, rel, tau, moved_c, t->numel, rows_differ);
        }
    }
    fprintf(stderr, "  %s fast rows=%d B=%d steps=%d %s: worst delta difference %.3g (%s), tau %.3g; cpu %.16s loss %.9g | "
                    "%s %.16s loss %.9g\n",
            cfg->preset, cfg->rows, cfg->B, cfg->steps, dtype_name(cfg->prec), worst, worst_t, tau, c.hex, c.loss,
            p->g->label, g.hex, g.loss);
    CHECK_MSG(bad == 0, "%d of %d tensors: deltas outside the bound, not moved, or other rows moved", bad, c.nt);
    run_out_free(&g);
    run_out_free(&c);
}

static void model_case(enum numerics mode, const struct run_cfg *cfg)
{
    struct pair p;
    OPEN_PAIR_OR_SKIP(p, mode);
    if (mode == NUMERICS_FAST) {
        fast_deltas_case(&p, cfg);
        pair_close(&p);
        return;
    }
    /* golden: the same bits, from the same (device-made) initial parameters */
    struct run_out g, c;
    REQUIRE(train_run(p.g, cfg, &g) == 0);
    REQUIRE(train_run(p.c, cfg, &c) == 0);
    fprintf(stderr, "  %s golden rows=%d B=%d steps=%d %s: cpu %.16s loss %.9g | %s %.16s loss %.9g\n", cfg->preset,
            cfg->rows, cfg->B, cfg->steps, dtype_name(cfg->prec), c.hex, c.loss, p.g->label, g.hex, g.loss);
    CHECK_STREQ(g.hex, c.hex);
    run_out_free(&g);
    run_out_free(&c);
    pair_close(&p);
}

TEST(gpu_train_ctr_golden_digest)
{
    struct run_cfg a = {"ctr-tiny", 50, 96, 4, DT_F32};
    model_case(NUMERICS_GOLDEN, &a);
    struct run_cfg b = {"ctr-tiny", 50, 64, 3, DT_BF16};
    model_case(NUMERICS_GOLDEN, &b);
    struct run_cfg c = {"dlrm-kaggle", 100, 128, 3, DT_F32};
    model_case(NUMERICS_GOLDEN, &c);
}
TEST(gpu_train_ctr_fast)
{
    struct run_cfg a = {"dlrm-kaggle", 100, 512, 3, DT_F32};
    model_case(NUMERICS_FAST, &a);
    struct run_cfg b = {"dlrm-kaggle", 100, 512, 3, DT_BF16};
    model_case(NUMERICS_FAST, &b);
    struct run_cfg c = {"odd-widths", 100, 256, 3, DT_BF16}; /* mirror-only and fp32 hidden layers mixed */
    model_case(NUMERICS_FAST, &c);
    struct run_cfg d = {"ctr-tiny", 100, 256, 3, DT_F16};
    model_case(NUMERICS_FAST, &d);
}

/* The device-batch path (GPU data plane) gives the host-batch path's bits:
 * runs on the test device (cpu by default), fed by train/devfeed. */
#include "train/devfeed.h"
TEST(ctr_dev_batch_matches_host_batch)
{
    struct dev *d = NULL;
    plumb_err e = {0};
    REQUIRE(dev_open(test_device(), &d, &e) == 0);
    REQUIRE(dev_set_numerics(d, NUMERICS_GOLDEN, 0, &e) == 0);
    struct ctr_config c;
    REQUIRE(ctr_config_preset("ctr-tiny", 30, &c, &e) == 0);
    struct synth *syn = NULL;
    REQUIRE(synth_create(3, &syn, &e) == 0);
    struct dataset ds;
    memset(&ds, 0, sizeof ds);
    ds.synthetic = 1;
    ds.syn = syn;
    ds.n[0] = 500;
    ds.n[1] = 10;
    enum { B = 64, STEPS = 5 };
    struct ctr_model *m[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) REQUIRE(ctr_create(d, &c, B, DT_BF16, &m[k], &e) == 0);
    size_t np = ctr_n_params(m[0]);
    float *init = rnd_f(np, -0.05, 0.05);
    for (int k = 0; k < 2; k++) REQUIRE(dev_upload(d, ctr_params(m[k]), init, np * 4, &e) == 0);
    /* host path: sampler + data_fill + ctr_forward_backward */
    struct sampler s1, *s2 = calloc(1, sizeof *s2);
    REQUIRE(sampler_init(&s1, ds.n[0], B, B, 9, 1, &e) == 0 && sampler_init(s2, ds.n[0], B, B, 9, 1, &e) == 0);
    struct devfeed *f = NULL;
    struct data_source src;
    struct feed_source fs;
    ctr_source_wrap(&src, &ds, c.rows);
    ctr_feed_source(&src, &fs);
    REQUIRE(devfeed_start(d, &fs, 0, s2, 0, 1, 0, STEPS, 3, 2, &f, &e) == 0);
    uint32_t idx[B];
    int shv[4];
    float dense[B * 13], lab[B];
    uint32_t sp[B * 26];
    struct optim o[2];
    for (int k = 0; k < 2; k++)
        REQUIRE(optim_init(&o[k], d, ctr_layout(m[k]), "sgd", 0.0, 0.0, 0.9, 0.999, 1e-8, &e) == 0);
    for (long st = 0; st < STEPS; st++) {
        struct sampler_step ss;
        REQUIRE(sampler_get(&s1, st, 0, 1, &ss, idx, shv, &e) == 0);
        REQUIRE(data_fill(&ds, 0, idx, (int)ss.local_valid, c.rows, dense, sp, lab, NULL) == 0);
        struct ctr_batch hb = {B, (int)ss.local_valid, dense, sp, lab};
        struct batch fb;
        long fst = -1;
        REQUIRE(devfeed_next(f, &fb, &fst, NULL, &e) == 0);
        struct ctr_dev_batch db = {fb.B, fb.n_valid, fb.field[CTR_F_DENSE], fb.field[CTR_F_SPARSE], fb.field[CTR_F_LABEL]};
        CHECK_EQ_INT(fst, st);
        CHECK_EQ_INT(db.n_valid, ss.local_valid);
        struct ctr_loss l1, l2;
        REQUIRE(ctr_forward_backward(m[0], &hb, 1.0f / B, &l1, &e) == 0);
        REQUIRE(ctr_forward_backward_dev(m[1], &db, 1.0f / B, &l2, &e) == 0);
        devfeed_release(f);
        CHECK(l1.sum == l2.sum && l1.count == l2.count);
        for (int k = 0; k < 2; k++) {
            int64_t *rows;
            float *rg;
            size_t nr;
            ctr_sparse_grads(m[k], &rows, &rg, &nr);
            REQUIRE(optim_step(&o[k], ctr_params(m[k]), ctr_grads(m[k]), rows, rg, nr, 0.2f, st + 1, &e) == 0);
        }
    }
    devfeed_stop(f);
    optim_free(&o[0]), optim_free(&o[1]);
    sampler_free(s2);
    free(s2);
    sampler_free(&s1);
    char h1[65], h2[65];
    REQUIRE(ctr_param_digest(m[0], h1, &e) == 0 && ctr_param_digest(m[1], h2, &e) == 0);
    CHECK_STREQ(h1, h2);
    /* a device batch out of range is refused with a message naming it */
    struct ctr_dev_batch bad = {B + 1, B, NULL, NULL, NULL};
    CHECK(ctr_forward_backward_dev(m[1], &bad, 1.0f, NULL, &e) == PLUMB_EUSAGE);
    for (int k = 0; k < 2; k++) ctr_free(m[k]);
    free(init);
    synth_free(syn);
    dev_close(d);
}

/* comm/nccl without an NCCL library (CI) fails cleanly with a message naming
 * the library and the override; with one (GPU host) it loads and reports its
 * version. The rank mapping refuses more local ranks than visible GPUs. */
#include "comm/comm.h"
TEST(nccl_load_clean_error_or_version)
{
    plumb_err e = {0};
    char desc[600] = "";
    int rc = comm_nccl_load("cuda", desc, sizeof desc, &e);
    if (rc == PLUMB_OK) {
        CHECK_MSG(strstr(desc, "NCCL ") != NULL, "description '%s'", desc);
    } else {
        CHECK_EQ_INT(rc, PLUMB_EDEVICE);
        CHECK_MSG(strstr(e.msg, "libnccl.so.2") && strstr(e.msg, "PLUMB_NCCL_LIB"), "message: %s", e.msg);
    }
    char spec[32];
    plumb_err e2 = {0};
    rc = dev_spec_for_local_rank("cuda", 0, 1000, spec, &e2);
    CHECK(rc != PLUMB_OK);
    CHECK_MSG(e2.msg[0] != '\0', "no message for 1000 local ranks");
}
