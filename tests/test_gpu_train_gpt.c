/* GPU transformer ops against the cpu backend. With PLUMB_TEST_DEVICE=cuda
 * (or hip) every transformer op runs on the GPU and on the cpu on the same
 * inputs, chained as one GPT block forward and backward: golden results must
 * be the same bits; fast results must agree within fp32 / bf16 bounds and
 * repeat bit for bit run to run. gpt-tiny trained through the trainer on
 * both must end with the same golden parameter digest. Shapes cover both flash tile
 * sizes (head width 64: 32 x 32 tiles; 96: 16 x 16), sequences that are not
 * a multiple of the tile, and the classifier's row chunks. Without a GPU
 * every test skips and says why. */
#include "test.h"
#include "train_env.h"
#include "core/philox.h"
#include "dev/dev.h"
#include "dev/train_gpt_math.h"
#include "dev/train_ops.h"
#include "comm/comm.h"
#include "models/gpt/gpt.h"
#include "models/workloads.h"
#include "train/options.h"
#include "train/trainer.h"
#include <stdlib.h>

static int is_gpu_spec(const char *s) { return !strncmp(s, "cuda", 4) || !strncmp(s, "hip", 3); }

#define SKIP_UNLESS_GPU()                                                                                     \
    do {                                                                                                      \
        if (!is_gpu_spec(test_device()))                                                                      \
            TEST_SKIP("PLUMB_TEST_DEVICE=%s: GPU training tests run with PLUMB_TEST_DEVICE=cuda or hip", test_device()); \
    } while (0)

static struct dev *open_on(const char *spec, enum numerics mode)
{
    struct dev *d = NULL;
    plumb_err e = {0};
    if (dev_open(spec, &d, &e)) {
        fprintf(stderr, "  dev_open(%s): %s\n", spec, e.msg);
        return NULL;
    }
    if (dev_set_numerics(d, mode, 0, &e) || !d->ops->train || !d->ops->train->attention_fwd) {
        fprintf(stderr, "  %s: no transformer ops\n", spec);
        dev_close(d);
        return NULL;
    }
    return d;
}

static void *put(struct dev *d, const void *h, size_t bytes)
{
    void *p = NULL;
    plumb_err e = {0};
    if (dev_alloc(d, bytes ? bytes : 4, &p, &e)) return NULL;
    void *z = h ? NULL : calloc(1, bytes ? bytes : 4);
    dev_upload(d, p, h ? h : z, bytes, &e);
    free(z);
    return p;
}

/* The outputs of one block's ops, forward and backward, in order. */
#define NOUT 16
struct outs {
    float *v[NOUT];
    size_t n[NOUT];
    const char *name[NOUT];
    int k;
};
static void keep(struct dev *d, struct outs *o, const char *name, const float *p, size_t n)
{
    plumb_err e = {0};
    o->v[o->k] = malloc(n * sizeof(float) + 4);
    dev_sync(d, &e);
    dev_download(d, o->v[o->k], p, n * sizeof(float), &e);
    o->n[o->k] = n;
    o->name[o->k++] = name;
}

/* x [R, C] -> ln -> qkv -> attention -> proj -> +x -> ln -> fc+gelu -> proj ->
 * classifier; then the backward of each, on device d */
static int run_block(struct dev *d, int B, int T, int NH, int HS, int V, dtype_t rt, struct outs *o)
{
    const int C = NH * HS, R = B * T;
    const size_t RC = (size_t)R * C;
    const struct train_ops *Op = d->ops->train;
    plumb_err e = {0};
    /* inputs from Philox: the same on every device */
    const size_t nw = (size_t)C * 3 * C + (size_t)C * C + 8 * (size_t)C * C + (size_t)V * C;
    float *h = malloc((RC + nw + 16 * (size_t)C) * sizeof(float));
    for (size_t i = 0; i < RC + nw + 16 * (size_t)C; i++) h[i] = philox_uniform_at(11, RNG_DATA, 7, 0, i) * 2.0f - 1.0f;
    for (size_t i = RC; i < RC + nw; i++) h[i] = gg_round(h[i] * 0.2f, rt);
    int32_t *tgt = malloc((size_t)R * 4);
    for (int r = 0; r < R; r++) tgt[r] = r % 7 == 6 ? -1 : (int32_t)(philox_u32_at(11, RNG_DATA, 8, 0, r) % (uint32_t)V);
    float *x = put(d, h, RC * 4), *W = put(d, h + RC, nw * 4), *vec = put(d, h + RC + nw, 16 * (size_t)C * 4);
    int32_t *dt = put(d, tgt, (size_t)R * 4);
    const float *wqkv = W, *wap = W + (size_t)3 * C * C, *wfc = wap + (size_t)C * C, *wfp = wfc + (size_t)4 * C * C,
                *wte = wfp + (size_t)4 * C * C;
    float *ln1 = put(d, NULL, RC * 4), *m1 = put(d, NULL, R * 4), *s1 = put(d, NULL, R * 4), *qkv = put(d, NULL, 3 * RC * 4);
    float *att = put(d, NULL, RC * 4), *lse = put(d, NULL, (size_t)B * NH * T * 4), *tmp = put(d, NULL, RC * 4);
    float *r2 = put(d, NULL, RC * 4), *ln2 = put(d, NULL, RC * 4), *m2 = put(d, NULL, R * 4), *s2 = put(d, NULL, R * 4);
    float *fc = put(d, NULL, 4 * RC * 4), *fg = put(d, NULL, 4 * RC * 4), *r3 = put(d, NULL, RC * 4);
    float *losses = put(d, NULL, R * 4), *dr3 = put(d, NULL, RC * 4), *dwte = put(d, NULL, (size_t)V * C * 4);
    double *sc = put(d, NULL, 16);
    float *dfc = put(d, NULL, 4 * RC * 4), *dln = put(d, NULL, RC * 4), *datt = put(d, NULL, RC * 4);
    float *dqkv = put(d, NULL, 3 * RC * 4), *gW = put(d, NULL, nw * 4), *gv = put(d, NULL, 16 * (size_t)C * 4);
    int rc = 0;
#define OK(call)                                                                                          \
    do {                                                                                                  \
        if (!rc && (rc = (call))) fprintf(stderr, "  %s: %s\n", #call, e.msg);                            \
    } while (0)
    OK(Op->layernorm_fwd(d, NULL, x, vec, vec + C, ln1, m1, s1, R, C, 1e-5f, rt, &e));
    OK(Op->matmul_fwd(d, NULL, ln1, wqkv, vec + 2 * C, qkv, NULL, R, C, 3 * C, 0, rt, &e));
    OK(Op->attention_fwd(d, NULL, qkv, att, lse, B, T, NH, HS, rt, &e));
    OK(Op->matmul_fwd(d, NULL, att, wap, vec + 5 * C, tmp, NULL, R, C, C, 0, rt, &e));
    OK(Op->residual_fwd(d, NULL, x, tmp, r2, RC, DT_F32, &e));
    OK(Op->layernorm_fwd(d, NULL, r2, vec + 6 * C, vec + 7 * C, ln2, m2, s2, R, C, 1e-5f, rt, &e));
    OK(Op->matmul_fwd(d, NULL, ln2, wfc, vec + 8 * C, fg, fc, R, C, 4 * C, 1, rt, &e));
    OK(Op->matmul_fwd(d, NULL, fg, wfp, vec + 12 * C, tmp, NULL, R, 4 * C, C, 0, rt, &e));
    OK(Op->residual_fwd(d, NULL, r2, tmp, r3, RC, DT_F32, &e));
    OK(Op->classifier_fwd_bwd(d, NULL, r3, wte, dt, R, C, V, 1.0f / R, losses, sc, dr3, dwte, rt, &e));
    keep(d, o, "qkv", qkv, 3 * RC);
    keep(d, o, "attention out", att, RC);
    keep(d, o, "lse", lse, (size_t)B * NH * T);
    keep(d, o, "mlp gelu", fg, 4 * RC);
    keep(d, o, "block out", r3, RC);
    keep(d, o, "losses", losses, R);
    keep(d, o, "classifier dx", dr3, RC);
    keep(d, o, "classifier dwte", dwte, (size_t)V * C);
    float *gwfp = gW + (wfp - W), *gwfc = gW + (wfc - W), *gwap = gW + (wap - W), *gwqkv = gW;
    OK(Op->matmul_bwd(d, NULL, fg, wfp, dr3, fc, dfc, gwfp, gv + 12 * C, R, 4 * C, C, rt, &e));
    OK(Op->matmul_bwd(d, NULL, ln2, wfc, dfc, NULL, dln, gwfc, gv + 8 * C, R, C, 4 * C, rt, &e));
    OK(Op->layernorm_bwd(d, NULL, r2, vec + 6 * C, m2, s2, dln, dr3, dr3, gv + 6 * C, gv + 7 * C, R, C, DT_F32, &e));
    OK(Op->matmul_bwd(d, NULL, att, wap, dr3, NULL, datt, gwap, gv + 5 * C, R, C, C, rt, &e));
    OK(Op->attention_bwd(d, NULL, qkv, att, lse, datt, dqkv, B, T, NH, HS, rt, &e));
    OK(Op->matmul_bwd(d, NULL, ln1, wqkv, dqkv, NULL, dln, gwqkv, gv + 2 * C, R, C, 3 * C, rt, &e));
    OK(Op->layernorm_bwd(d, NULL, x, vec, m1, s1, dln, dr3, dr3, gv, gv + C, R, C, DT_F32, &e));
    keep(d, o, "mlp dfc (GELU fused)", dfc, 4 * RC);
    keep(d, o, "dqkv", dqkv, 3 * RC);
    keep(d, o, "dx", dr3, RC);
    keep(d, o, "weight gradients", gW, nw - (size_t)V * C);
    keep(d, o, "vector gradients", gv, 13 * (size_t)C);
#undef OK
    void *all[] = {x, W, vec, dt, ln1, m1, s1, qkv, att, lse, tmp, r2, ln2, m2, s2, fc, fg, r3, losses, dr3, dwte, sc,
                   dfc, dln, datt, dqkv, gW, gv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dev_free(d, all[i]);
    free(h);
    free(tgt);
    return rc;
}

/* outputs [i0, i0 + k) of o, not copied (o keeps them) */
static struct outs outs_view(const struct outs *o, int i0, int k)
{
    struct outs v = {.k = k};
    for (int i = 0; i < k; i++) v.v[i] = o->v[i0 + i], v.n[i] = o->n[i0 + i], v.name[i] = o->name[i0 + i];
    return v;
}

static void outs_free(struct outs *o)
{
    for (int i = 0; i < o->k; i++) free(o->v[i]);
    o->k = 0;
}

/* worst |a - b| / (|a| + floor) of each output; floor is a fraction of the output's scale */
static void compare(const struct outs *c, const struct outs *g, double tol, const char *what)
{
    for (int i = 0; i < c->k; i++) {
        size_t bad = 0, first = 0;
        double scale = 0;
        for (size_t j = 0; j < c->n[i]; j++) scale = fmax(scale, fabs(c->v[i][j]));
        for (size_t j = 0; j < c->n[i]; j++) {
            const float a = c->v[i][j], b = g->v[i][j];
            int ok = tol == 0 ? !memcmp(&a, &b, 4) : fabs((double)a - b) <= tol * (fabs((double)a) + 0.05 * scale);
            if (!ok && bad++ == 0) first = j;
        }
        CHECK_MSG(bad == 0, "%s: %s: %zu of %zu differ, first at %zu: cpu %.9g gpu %.9g", what, c->name[i], bad, c->n[i],
                  first, bad ? (double)c->v[i][first] : 0.0, bad ? (double)g->v[i][first] : 0.0);
    }
}

/* 16-bit fast mode, cpu against GPU: each side rounds every stage's output
 * to rt in its own summation order, so single elements whose value cancels
 * (a gradient near 0, a softmax row's small terms) may differ by many of their
 * own ulps while the tensor as a whole agrees: the norm-wise relative
 * difference ||cpu - gpu|| / ||cpu|| is held to 20 u (u = 2^-9 for bf16:
 * about ten rounded stages in a block, on either side); the worst element is
 * printed. */
static void compare_norm(const struct outs *c, const struct outs *g, double tol, const char *what)
{
    for (int i = 0; i < c->k; i++) {
        double d2 = 0, a2 = 0, worst = 0;
        size_t at = 0;
        for (size_t j = 0; j < c->n[i]; j++) {
            const double a = c->v[i][j], b = g->v[i][j], dd = a - b;
            d2 += dd * dd, a2 += a * a;
            if (!(fabs(dd) <= worst)) worst = fabs(dd), at = j;
        }
        const double rel = a2 > 0 ? sqrt(d2 / a2) : sqrt(d2);
        CHECK_MSG(rel <= tol, "%s: %s: norm-wise relative difference %.3g > %.3g (worst element %zu: cpu %.9g gpu %.9g)",
                  what, c->name[i], rel, tol, at, (double)c->v[i][at], (double)g->v[i][at]);
        if (rel <= tol && getenv("PLUMB_TEST_VERBOSE"))
            fprintf(stderr, "  %s: %s: norm-wise %.3g (bound %.3g)\n", what, c->name[i], rel, tol);
    }
}

static void block_case(enum numerics mode, int B, int T, int NH, int HS, int V, dtype_t rt)
{
    SKIP_UNLESS_GPU();
    struct dev *c = open_on("cpu", mode), *g = open_on(test_device(), mode);
    REQUIRE(c && g);
    char what[96];
    snprintf(what, sizeof what, "%s B%d T%d NH%d HS%d V%d %s", mode ? "golden" : "fast", B, T, NH, HS, V,
             dtype_name(rt));
    struct outs oc = {0}, og = {0}, og2 = {0};
    REQUIRE(run_block(c, B, T, NH, HS, V, rt, &oc) == 0);
    REQUIRE(run_block(g, B, T, NH, HS, V, rt, &og) == 0);
    REQUIRE(run_block(g, B, T, NH, HS, V, rt, &og2) == 0);
    if (mode == NUMERICS_FAST && rt != DT_F32)
        compare_norm(&oc, &og, 20 * 0x1p-9, what);
    else
        compare(&oc, &og, mode == NUMERICS_GOLDEN ? 0 : 2e-4, what);
    compare(&og, &og2, 0, "GPU run to run"); /* fast repeats bit for bit too */
    outs_free(&oc);
    outs_free(&og);
    outs_free(&og2);
    dev_close(g);
    dev_close(c);
}

TEST(gpu_gpt_block_golden_fp32) { block_case(NUMERICS_GOLDEN, 2, 45, 2, 64, 300, DT_F32); }
TEST(gpu_gpt_block_golden_bf16_hs96) { block_case(NUMERICS_GOLDEN, 1, 37, 2, 96, 131, DT_BF16); }
TEST(gpu_gpt_block_fast_fp32) { block_case(NUMERICS_FAST, 2, 100, 2, 64, 300, DT_F32); }
TEST(gpu_gpt_block_fast_bf16) { block_case(NUMERICS_FAST, 2, 100, 3, 64, 1000, DT_BF16); }
TEST(gpu_gpt_block_fast_fp32_hs96) { block_case(NUMERICS_FAST, 1, 70, 2, 96, 257, DT_F32); }

/* The classifier over many row chunks (PLUMB_GPT_XENT_CHUNK_BYTES: 7 rows of
 * logits) against one chunk, on the GPU: golden the same bits (the dwte
 * chains continue across chunks); fast within 1e-5 norm-wise in fp32 (the
 * dwte chunk sums reassociate, the GEMMs' algorithms follow the row count)
 * and 2^-7 in bf16 (a logit one rounding step apart moves its gradient by
 * a bf16 ulp); repeated runs the same bits. */
static int cls_run_x(struct dev *d, int R, int C, int V, dtype_t rt, const char *chunk, const char *xent16,
                    struct outs *o, plumb_err *ep)
{
    const struct train_ops *Op = d->ops->train;
    plumb_err e = {0};
    if (!ep) ep = &e;
    float *h = malloc(((size_t)R * C + (size_t)V * C) * sizeof(float));
    for (size_t i = 0; i < (size_t)R * C + (size_t)V * C; i++)
        h[i] = gg_round((philox_uniform_at(12, RNG_DATA, 7, 0, i) * 2.0f - 1.0f) * 0.5f, rt);
    int32_t *tgt = malloc((size_t)R * 4);
    for (int r = 0; r < R; r++) tgt[r] = r % 7 == 6 ? -1 : (int32_t)(philox_u32_at(12, RNG_DATA, 8, 0, r) % (uint32_t)V);
    float *x = put(d, h, (size_t)R * C * 4), *wte = put(d, h + (size_t)R * C, (size_t)V * C * 4);
    int32_t *dt = put(d, tgt, (size_t)R * 4);
    float *losses = put(d, NULL, (size_t)R * 4), *dx = put(d, NULL, (size_t)R * C * 4),
          *dwte = put(d, NULL, (size_t)V * C * 4);
    double *sc = put(d, NULL, 16);
    if (chunk) setenv("PLUMB_GPT_XENT_CHUNK_BYTES", chunk, 1);
    if (xent16) setenv("PLUMB_GPT_XENT16", xent16, 1);
    int rc = Op->classifier_fwd_bwd(d, NULL, x, wte, dt, R, C, V, 1.0f / R, losses, sc, dx, dwte, rt, ep);
    unsetenv("PLUMB_GPT_XENT_CHUNK_BYTES");
    unsetenv("PLUMB_GPT_XENT16");
    if (rc && ep == &e) fprintf(stderr, "  classifier_fwd_bwd: %s\n", e.msg);
    else {
        keep(d, o, "losses", losses, (size_t)R);
        keep(d, o, "dx", dx, (size_t)R * C);
        keep(d, o, "dwte", dwte, (size_t)V * C);
    }
    void *all[] = {x, wte, dt, losses, dx, dwte, sc};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dev_free(d, all[i]);
    free(h);
    free(tgt);
    return rc;
}

static int cls_run(struct dev *d, int R, int C, int V, dtype_t rt, const char *chunk, struct outs *o)
{
    return cls_run_x(d, R, C, V, rt, chunk, NULL, o, NULL);
}

static void cls_chunks_case(enum numerics mode, dtype_t rt)
{
    SKIP_UNLESS_GPU();
    struct dev *g = open_on(test_device(), mode);
    REQUIRE(g);
    const int R = 300, C = 64, V = 1000;
    char chunk[32], what[64];
    snprintf(chunk, sizeof chunk, "%zu", (size_t)7 * V * sizeof(float));
    snprintf(what, sizeof what, "%s %s classifier chunks", mode ? "golden" : "fast", dtype_name(rt));
    struct outs one = {0}, many = {0}, many2 = {0};
    REQUIRE(cls_run(g, R, C, V, rt, NULL, &one) == 0);
    REQUIRE(cls_run(g, R, C, V, rt, chunk, &many) == 0);
    REQUIRE(cls_run(g, R, C, V, rt, chunk, &many2) == 0);
    if (mode == NUMERICS_GOLDEN) compare(&one, &many, 0, what);
    else compare_norm(&one, &many, rt == DT_F32 ? 1e-5 : 0x1p-7, what);
    compare(&many, &many2, 0, "GPU chunked run to run");
    outs_free(&one);
    outs_free(&many);
    outs_free(&many2);
    dev_close(g);
}
TEST(gpu_gpt_classifier_chunks_golden_bf16) { cls_chunks_case(NUMERICS_GOLDEN, DT_BF16); }
TEST(gpu_gpt_classifier_chunks_fast_fp32) { cls_chunks_case(NUMERICS_FAST, DT_F32); }
TEST(gpu_gpt_classifier_chunks_fast_bf16) { cls_chunks_case(NUMERICS_FAST, DT_BF16); }

/* the classifier with NAME=VALUE set refused as a usage error that names
 * NAME=VALUE (xent16: PLUMB_GPT_XENT16's value for the run) */
static void cls_env_refused(struct dev *g, int R, int C, int V, dtype_t rt, const char *chunk, const char *xent16,
                            const char *name, const char *value)
{
    struct outs bad = {0};
    char *kp = env_push(name, value);
    plumb_err e = {0};
    const int rc = cls_run_x(g, R, C, V, rt, chunk, xent16, &bad, &e);
    env_restore(name, kp);
    char want[96];
    snprintf(want, sizeof want, "%s=%s", name, value);
    CHECK_MSG(rc == PLUMB_EUSAGE && strstr(e.msg, want), "%s: rc %d (%s)", want, rc, e.msg);
    outs_free(&bad);
}

/* 16-bit logits straight from the GEMM (PLUMB_GPT_XENT16 unset or 1: the
 * default for 16-bit compute on CUDA) against fp32 logits rounded by the row
 * kernel (=0), fast, over several chunks, V odd (the row's last logit past
 * the quads) and a padded target: the same function of the rounded logits,
 * a logit at most a rounding step apart where the GEMM's algorithm differs,
 * so within 2^-7 norm-wise as the chunks are; repeated runs the same bits;
 * an unknown value refused, named (CUDA: the only backend that reads it) */
static void cls_xent16_case(dtype_t rt)
{
    SKIP_UNLESS_GPU();
    struct dev *g = open_on(test_device(), NUMERICS_FAST);
    REQUIRE(g);
    const int R = 300, C = 64, V = 1001;
    char chunk[32], what[64];
    snprintf(chunk, sizeof chunk, "%zu", (size_t)100 * V * sizeof(float));
    snprintf(what, sizeof what, "fast %s classifier 16-bit logits", dtype_name(rt));
    struct outs f32 = {0}, z16 = {0}, z16b = {0}, dflt = {0};
    REQUIRE(cls_run_x(g, R, C, V, rt, chunk, "0", &f32, NULL) == 0);
    REQUIRE(cls_run_x(g, R, C, V, rt, chunk, "1", &z16, NULL) == 0);
    REQUIRE(cls_run_x(g, R, C, V, rt, chunk, "1", &z16b, NULL) == 0);
    REQUIRE(cls_run_x(g, R, C, V, rt, chunk, NULL, &dflt, NULL) == 0);
    compare_norm(&f32, &z16, 0x1p-7, what);
    compare(&z16, &z16b, 0, "16-bit logits run to run");
    compare(&z16, &dflt, 0, "16-bit logits: PLUMB_GPT_XENT16 unset is 1");
    /* dwte over the rows padded to 8 (PLUMB_GPT_DWTE_PAD, on by default:
     * V = 1001 pads to 1008) against the product over V rows: losses and
     * dx the same bits, dwte within 1e-5 norm-wise (another GEMM algorithm
     * may sum in another order) */
    {
        struct outs np = {0};
        char *kp = env_push("PLUMB_GPT_DWTE_PAD", "0");
        REQUIRE(cls_run_x(g, R, C, V, rt, chunk, "1", &np, NULL) == 0);
        env_restore("PLUMB_GPT_DWTE_PAD", kp);
        const struct outs a = outs_view(&z16, 0, 2), b = outs_view(&np, 0, 2);
        compare(&a, &b, 0, "classifier: PLUMB_GPT_DWTE_PAD=0 against the default");
        const struct outs wa = outs_view(&z16, 2, 1), wb = outs_view(&np, 2, 1);
        compare_norm(&wa, &wb, 1e-5, "classifier: dwte with PLUMB_GPT_DWTE_PAD=0");
        outs_free(&np);
    }
    /* the last chunk's dwte written by its GEMM (PLUMB_GPT_DWTE_DIRECT, on
     * by default on CUDA: rows 0..999 straight into dwte, rows 1000..1007
     * through dwp) against the whole product into dwp and dwp copied: losses
     * and dx the same bits, dwte within 1e-5 norm-wise (N = 1000 against
     * 1008 may take another algorithm); over 3 chunks (the last one adds
     * dwp's sums as C) and over one (no C); a bad value refused, named */
    if (!strncmp(test_device(), "cuda", 4)) {
        for (int one = 0; one < 2; one++) {
            struct outs dir = {0}, cp = {0};
            REQUIRE(cls_run_x(g, R, C, V, rt, one ? NULL : chunk, "1", &dir, NULL) == 0);
            char *kp = env_push("PLUMB_GPT_DWTE_DIRECT", "0");
            REQUIRE(cls_run_x(g, R, C, V, rt, one ? NULL : chunk, "1", &cp, NULL) == 0);
            env_restore("PLUMB_GPT_DWTE_DIRECT", kp);
            const struct outs a = outs_view(&dir, 0, 2), b = outs_view(&cp, 0, 2);
            compare(&a, &b, 0, one ? "classifier, one chunk: PLUMB_GPT_DWTE_DIRECT=0 against the default"
                                   : "classifier, 3 chunks: PLUMB_GPT_DWTE_DIRECT=0 against the default");
            const struct outs wa = outs_view(&dir, 2, 1), wb = outs_view(&cp, 2, 1);
            compare_norm(&wa, &wb, 1e-5, one ? "classifier, one chunk: dwte with PLUMB_GPT_DWTE_DIRECT=0"
                                             : "classifier, 3 chunks: dwte with PLUMB_GPT_DWTE_DIRECT=0");
            outs_free(&dir);
            outs_free(&cp);
        }
        cls_env_refused(g, R, C, V, rt, chunk, "1", "PLUMB_GPT_DWTE_DIRECT", "2");
    }
    /* the row kernel's block size (PLUMB_GPT_XENT_TPB, 1024 by default):
     * 128 threads a row split the row's sums otherwise, so within 2^-7
     * norm-wise, as the logits paths are; a value outside 128..1024 refused,
     * named */
    {
        struct outs t128 = {0};
        char *kp = env_push("PLUMB_GPT_XENT_TPB", "128");
        REQUIRE(cls_run_x(g, R, C, V, rt, chunk, "1", &t128, NULL) == 0);
        env_restore("PLUMB_GPT_XENT_TPB", kp);
        compare_norm(&z16, &t128, 0x1p-7, "classifier: PLUMB_GPT_XENT_TPB=128 against the default");
        outs_free(&t128);
        cls_env_refused(g, R, C, V, rt, chunk, "1", "PLUMB_GPT_XENT_TPB", "2048");
    }
    /* the rows staged whole in shared memory (PLUMB_GPT_XENT_STAGE, on by
     * default on CUDA) against the kernel that reads each row twice: the
     * same threads, values and order, so the same bits; a value other than
     * 0 or 1 refused, named */
    if (!strncmp(test_device(), "cuda", 4)) {
        struct outs two = {0};
        char *kp = env_push("PLUMB_GPT_XENT_STAGE", "0");
        REQUIRE(cls_run_x(g, R, C, V, rt, chunk, "1", &two, NULL) == 0);
        env_restore("PLUMB_GPT_XENT_STAGE", kp);
        compare(&z16, &two, 0, "classifier: rows staged in shared memory against PLUMB_GPT_XENT_STAGE=0");
        outs_free(&two);
        cls_env_refused(g, R, C, V, rt, chunk, "1", "PLUMB_GPT_XENT_STAGE", "yes");
        cls_env_refused(g, R, C, V, rt, NULL, NULL, "PLUMB_GPT_XENT16", "on");
    }
    outs_free(&f32);
    outs_free(&z16);
    outs_free(&z16b);
    outs_free(&dflt);
    dev_close(g);
}
TEST(gpu_gpt_classifier_xent16_bf16) { cls_xent16_case(DT_BF16); }
TEST(gpu_gpt_classifier_xent16_fp16) { cls_xent16_case(DT_F16); }

/* matmul_bwd's dw in row slices (train_gpt_gemm.cu dw_slices: R = 4096 rows
 * of K = 64, N = 192 make 4 slices by the rule, 8 with tiles:512) against one GEMM
 * (PLUMB_GPT_DW_SLICES=1) on the GPU: dx and dbias the same bits (only dw is
 * sliced), dw within 1e-5 norm-wise (the slices reassociate the fp32 sum over
 * rows), repeated runs the same bits; and the sliced run against the cpu as
 * the block tests hold fast mode (fp32 2e-4 elementwise, bf16 20 u norm-wise).
 * A bad PLUMB_GPT_DW_SLICES is an error naming it. */
static int mm_run(struct dev *d, int R, int K, int N, dtype_t rt, const char *slices, struct outs *o, plumb_err *e)
{
    const struct train_ops *Op = d->ops->train;
    const size_t n = (size_t)R * K + (size_t)N * K + (size_t)R * N;
    float *h = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) h[i] = gg_round(philox_uniform_at(13, RNG_DATA, 9, 0, i) * 2.0f - 1.0f, rt);
    float *x = put(d, h, (size_t)R * K * 4), *w = put(d, h + (size_t)R * K, (size_t)N * K * 4),
          *dy = put(d, h + (size_t)R * K + (size_t)N * K, (size_t)R * N * 4);
    float *dx = put(d, NULL, (size_t)R * K * 4), *dw = put(d, NULL, (size_t)N * K * 4), *db = put(d, NULL, (size_t)N * 4);
    if (slices) setenv("PLUMB_GPT_DW_SLICES", slices, 1);
    int rc = Op->matmul_bwd(d, NULL, x, w, dy, NULL, dx, dw, db, R, K, N, rt, e);
    unsetenv("PLUMB_GPT_DW_SLICES");
    if (!rc) {
        keep(d, o, "dx", dx, (size_t)R * K);
        keep(d, o, "dw", dw, (size_t)N * K);
        keep(d, o, "dbias", db, (size_t)N);
    }
    void *all[] = {x, w, dy, dx, dw, db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dev_free(d, all[i]);
    free(h);
    return rc;
}

static void dw_slices_case(dtype_t rt)
{
    SKIP_UNLESS_GPU();
    struct dev *c = open_on("cpu", NUMERICS_FAST), *g = open_on(test_device(), NUMERICS_FAST);
    REQUIRE(c && g);
    const int R = 4096, K = 64, N = 192;
    char what[64];
    snprintf(what, sizeof what, "fast %s matmul_bwd dw slices", dtype_name(rt));
    struct outs oc = {0}, one = {0}, sl = {0}, sl2 = {0};
    plumb_err e = {0};
    REQUIRE(mm_run(c, R, K, N, rt, NULL, &oc, &e) == 0);
    CHECK_MSG(mm_run(g, R, K, N, rt, "1", &one, &e) == 0, "%s (one GEMM): %s", what, e.msg);
    CHECK_MSG(mm_run(g, R, K, N, rt, NULL, &sl, &e) == 0, "%s (sliced): %s", what, e.msg);
    CHECK_MSG(mm_run(g, R, K, N, rt, "auto", &sl2, &e) == 0, "%s (sliced again): %s", what, e.msg);
    if (one.k == 3 && sl.k == 3 && sl2.k == 3 && oc.k == 3) {
        CHECK_MSG(!memcmp(one.v[0], sl.v[0], one.n[0] * 4) && !memcmp(one.v[2], sl.v[2], one.n[2] * 4),
                  "%s: dx or dbias changed with the dw slices", what);
        const struct outs a = outs_view(&one, 1, 1), b = outs_view(&sl, 1, 1);
        compare_norm(&a, &b, 1e-5, what);
        compare(&sl, &sl2, 0, "GPU sliced run to run");
        if (rt != DT_F32) compare_norm(&oc, &sl, 20 * 0x1p-9, what);
        else compare(&oc, &sl, 2e-4, what);
        /* tiles:512: the rule with 512 tiles for 128 (8 slices, not 4 here):
         * dx and dbias the same bits again, dw within the same bound */
        struct outs t512 = {0};
        CHECK_MSG(mm_run(g, R, K, N, rt, "tiles:512", &t512, &e) == 0, "%s (tiles:512): %s", what, e.msg);
        if (t512.k == 3) {
            CHECK_MSG(!memcmp(one.v[0], t512.v[0], one.n[0] * 4) && !memcmp(one.v[2], t512.v[2], one.n[2] * 4),
                      "%s: dx or dbias changed with tiles:512", what);
            const struct outs c512 = outs_view(&t512, 1, 1);
            compare_norm(&a, &c512, 1e-5, what);
        }
        outs_free(&t512);
    }
    struct outs bad = {0};
    if (!strncmp(test_device(), "cuda", 4)) { /* the slices are the CUDA path's (cuBLASLt) */
        const int rb = mm_run(g, R, K, N, rt, "3", &bad, &e);
        CHECK_MSG(rb == PLUMB_EUSAGE && strstr(e.msg, "PLUMB_GPT_DW_SLICES=3"), "PLUMB_GPT_DW_SLICES=3: rc %d (%s)", rb,
                  e.msg);
        const char *badn[] = {"tiles:", "tiles:32", "tiles:9000", "tiles:2x", ""};
        for (int i = 0; badn[i][0]; i++) {
            struct outs b2 = {0};
            const int r2 = mm_run(g, R, K, N, rt, badn[i], &b2, &e);
            CHECK_MSG(r2 == PLUMB_EUSAGE && strstr(e.msg, badn[i]), "PLUMB_GPT_DW_SLICES=%s: rc %d (%s)", badn[i], r2,
                      e.msg);
            outs_free(&b2);
        }
    }
    outs_free(&oc);
    outs_free(&one);
    outs_free(&sl);
    outs_free(&sl2);
    outs_free(&bad);
    dev_close(g);
    dev_close(c);
}
TEST(gpu_gpt_matmul_dw_slices_fp32) { dw_slices_case(DT_F32); }
TEST(gpu_gpt_matmul_dw_slices_bf16) { dw_slices_case(DT_BF16); }

/* gpt-tiny through the trainer on the GPU and on the cpu, 6 steps of the
 * preset (AdamW, clipping, cosine): golden the same parameter digest (fp32
 * and bf16); fast the final losses within 1e-3 (fp32) / 2e-2 (bf16) */
static int tiny_run(const char *device, const char *numerics, const char *prec, struct train_result *tr, plumb_err *e)
{
    const char *words[] = {"--preset", "gpt-tiny", "--device", device, "--numerics", numerics, "--precision", prec,
                           "--steps", "6", "--batch", "8", "--micro-shard", "4", "--train-samples", "256",
                           "--eval-samples", "16", "--eval-batch", "8", "--health-interval", "0", "--quiet", NULL, NULL};
    struct train_config cfg;
    train_config_defaults(&cfg, workload_find("gpt"));
    for (int i = 0; words[i]; i += 2)
        if (train_option_set(&cfg, words[i], words[i + 1], e)) return PLUMB_EUSAGE;
    int rc = train_config_finish(&cfg, e);
    if (rc) return rc;
    cfg.progress = 0;
    struct comm *c = NULL;
    if ((rc = comm_init("self", &c, e))) return rc;
    rc = trainer_run(&cfg, c, tr, e);
    comm_finalize(c);
    return rc;
}

TEST(gpu_gpt_tiny_trainer_matches_cpu)
{
    SKIP_UNLESS_GPU();
    const char *modes[] = {"fast", "golden"}, *precs[] = {"fp32", "bf16"};
    for (int m = 0; m < 2; m++)
        for (int p = 0; p < 2; p++) {
            struct train_result tc, tg;
            plumb_err e = {0};
            int rc = tiny_run("cpu", modes[m], precs[p], &tc, &e);
            CHECK_MSG(rc == 0, "cpu %s %s: %s", modes[m], precs[p], e.msg);
            if (!rc) rc = tiny_run(test_device(), modes[m], precs[p], &tg, &e);
            CHECK_MSG(rc == 0, "%s %s %s: %s", test_device(), modes[m], precs[p], e.msg);
            if (rc) continue;
            if (m == 1) CHECK_MSG(!strcmp(tc.param_digest, tg.param_digest), "golden %s digest cpu %s gpu %s", precs[p],
                                  tc.param_digest, tg.param_digest);
            const double lc = eval_metric(&tc.eval, "val_loss"), lg = eval_metric(&tg.eval, "val_loss");
            CHECK_MSG(fabs(lc - lg) <= (p ? 2e-2 : 1e-3), "%s %s val loss cpu %.6f gpu %.6f", modes[m], precs[p], lc, lg);
        }
}
