/* The GPU's fast attention in 16-bit training (on CUDA the tensor-core
 * kernels of gpu/train_gpt_attn_tc.cuh; on HIP, or with
 * PLUMB_GPT_ATTN=scalar, the scalar flash kernels) against a float64
 * reference computed here from the same rt-rounded inputs: out, lse and the
 * q, k, v parts of dqkv. Shapes: T below, at and past the 64-wide tile and
 * not a multiple of it, T = 1, head widths 16, 32, 64 and 96 (zero-padded
 * to 32, 64, 128), several heads and sequences, bf16 and fp16. Each case
 * runs twice and must repeat bit for bit (the backward has a fixed order, no
 * atomics); the scalar kernels and, on CUDA, the mma.sync kernels of
 * gpu/train_gpt_attn_mma.cuh (PLUMB_GPT_ATTN=mma: head widths up to 64,
 * wider ones fall back to tc; twice, bit for bit) and the pipelined ones of
 * gpu/train_gpt_attn_mma2.cuh (PLUMB_GPT_ATTN=mma2: the same; twice, bit for
 * bit, and the mma kernels' bits: the same products in the same order) run
 * on the same inputs and must meet the same bounds. Without a GPU every test
 * skips and says why.
 *
 * Bounds, with u the unit roundoff of rt (2^-8 bf16, 2^-11 fp16): the
 * outputs are rounded to rt (|rel| <= u each) and the tensor-core path also
 * rounds P and dS to rt before their products (FlashAttention-2's
 * rounding), each sum in fp32; rounding errors are independent across
 * terms, so the norm-wise relative difference ||gpu - ref|| / ||ref|| of
 * each output is held to 3u (expected about u); every element to
 * 2u |ref| + 16u max|ref| (a wrong row or tile shows up as O(1)); lse (fp32)
 * to 1e-4 (1 + |ref|). */
#include "test.h"
#include "attn_ref.h"
#include "core/dtype.h"
#include "core/philox.h"
#include "dev/dev.h"
#include "dev/train_gpt_math.h"
#include "dev/train_ops.h"
#include <stdlib.h>

static int gpu_spec(const char *s) { return !strncmp(s, "cuda", 4) || !strncmp(s, "hip", 3); }

struct attn_io {
    float *out, *lse, *dqkv;
};


/* forward then backward on the device; results into io (host). sixteen:
 * through the 16-bit ops (qkv and dout given as rt's 16-bit values, the
 * outputs widened back), else the fp32 ops */
static int run_ops(struct dev *d, const float *qkv, const float *dout, int B, int T, int NH, int HS, dtype_t rt,
                   int sixteen, struct attn_io *io, plumb_err *e)
{
    const size_t C = (size_t)NH * HS, n3 = (size_t)B * T * 3 * C, n1 = (size_t)B * T * C, nl = (size_t)B * NH * T;
    const size_t es = sixteen ? 2 : 4; /* bytes a stored value */
    const struct train_ops *Op = d->ops->train;
    void *h3 = malloc(n3 * es + 4), *h1 = malloc(n1 * es + 4);
    void *g_qkv = NULL, *g_dout = NULL, *g_out = NULL, *g_lse = NULL, *g_dqkv = NULL;
    int rc = h3 && h1 ? 0 : PLUMB_ENOMEM;
    for (size_t i = 0; !rc && i < n3; i++)
        if (sixteen) ((uint16_t *)h3)[i] = rt == DT_F16 ? f32_to_f16(qkv[i]) : f32_to_bf16(qkv[i]);
        else ((float *)h3)[i] = qkv[i];
    for (size_t i = 0; !rc && i < n1; i++)
        if (sixteen) ((uint16_t *)h1)[i] = rt == DT_F16 ? f32_to_f16(dout[i]) : f32_to_bf16(dout[i]);
        else ((float *)h1)[i] = dout[i];
    if (!rc) rc = dev_alloc(d, n3 * es, &g_qkv, e);
    if (!rc) rc = dev_alloc(d, n1 * es, &g_dout, e);
    if (!rc) rc = dev_alloc(d, n1 * es, &g_out, e);
    if (!rc) rc = dev_alloc(d, nl * 4, &g_lse, e);
    if (!rc) rc = dev_alloc(d, n3 * es, &g_dqkv, e);
    if (!rc) rc = dev_upload(d, g_qkv, h3, n3 * es, e);
    if (!rc) rc = dev_upload(d, g_dout, h1, n1 * es, e);
    if (!rc && sixteen) rc = Op->attention_fwd16(d, NULL, g_qkv, g_out, g_lse, B, T, NH, HS, rt, e);
    if (!rc && !sixteen) rc = Op->attention_fwd(d, NULL, g_qkv, g_out, g_lse, B, T, NH, HS, rt, e);
    if (!rc && sixteen) rc = Op->attention_bwd16(d, NULL, g_qkv, g_out, g_lse, g_dout, g_dqkv, B, T, NH, HS, rt, e);
    if (!rc && !sixteen) rc = Op->attention_bwd(d, NULL, g_qkv, g_out, g_lse, g_dout, g_dqkv, B, T, NH, HS, rt, e);
    if (!rc) rc = dev_sync(d, e);
    if (!rc) rc = dev_download(d, h1, g_out, n1 * es, e);
    if (!rc) rc = dev_download(d, io->lse, g_lse, nl * 4, e);
    if (!rc) rc = dev_download(d, h3, g_dqkv, n3 * es, e);
    for (size_t i = 0; !rc && i < n1; i++)
        io->out[i] = !sixteen ? ((float *)h1)[i] : rt == DT_F16 ? f16_to_f32(((uint16_t *)h1)[i])
                                                                : bf16_to_f32(((uint16_t *)h1)[i]);
    for (size_t i = 0; !rc && i < n3; i++)
        io->dqkv[i] = !sixteen ? ((float *)h3)[i] : rt == DT_F16 ? f16_to_f32(((uint16_t *)h3)[i])
                                                                 : bf16_to_f32(((uint16_t *)h3)[i]);
    void *all[] = {g_qkv, g_dout, g_out, g_lse, g_dqkv};
    for (int i = 0; i < 5; i++)
        if (all[i]) dev_free(d, all[i]);
    free(h3);
    free(h1);
    return rc;
}
static int run_gpu(struct dev *d, const float *qkv, const float *dout, int B, int T, int NH, int HS, dtype_t rt,
                   struct attn_io *io, plumb_err *e)
{
    return run_ops(d, qkv, dout, B, T, NH, HS, rt, 0, io, e);
}
static int run_gpu16(struct dev *d, const float *qkv, const float *dout, int B, int T, int NH, int HS, dtype_t rt,
                     struct attn_io *io, plumb_err *e)
{
    return run_ops(d, qkv, dout, B, T, NH, HS, rt, 1, io, e);
}

/* x: n values with a stride (the q, k or v part of dqkv: part offset, 3C
 * rows of C) against ref; norm-wise and element-wise bounds */
static void check_part(const char *what, const char *name, const float *x, const double *ref, size_t rows, size_t C,
                       size_t ld, double u, double acc_floor)
{
    double d2 = 0, r2 = 0, mx = 0;
    for (size_t r = 0; r < rows; r++)
        for (size_t i = 0; i < C; i++) mx = fmax(mx, fabs(ref[r * ld + i]));
    size_t bad = 0, at = 0;
    for (size_t r = 0; r < rows; r++)
        for (size_t i = 0; i < C; i++) {
            const double a = ref[r * ld + i], dd = (double)x[r * ld + i] - a;
            d2 += dd * dd, r2 += a * a;
            if (!(fabs(dd) <= 2 * u * fabs(a) + 16 * u * mx + acc_floor) && bad++ == 0) at = r * ld + i;
        }
    const double rel = r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
    CHECK_MSG(rel <= 3 * u, "%s: %s: norm-wise relative difference %.3g > 3u = %.3g", what, name, rel, 3 * u);
    CHECK_MSG(bad == 0,
              "%s: %s: %zu elements past 2u|ref| + 16u max|ref| (max %.3g) + %.3g (fp32 sums), first at %zu: ref %.9g gpu %.9g",
              what, name, bad, mx, acc_floor, at, bad ? ref[at] : 0.0, bad ? (double)x[at] : 0.0);
    if (getenv("PLUMB_TEST_VERBOSE")) fprintf(stderr, "  %s: %s: norm-wise %.3g u\n", what, name, rel / u);
}

/* the inputs: q, k in [-1.5, 1.5) (scores spread over a few units: peaked
 * and flat rows), v and dout in [-1, 1); rounded to rt as stored activations
 * are. qkv [n3] of rows 3C wide, dout [n1]; seed picks the draw. */
static void attn_inputs(uint32_t seed, float *qkv, float *dout, size_t n3, size_t n1, size_t C, int T, dtype_t rt)
{
    for (size_t i = 0; i < n3; i++) {
        const float a = (int)(i % (3 * C) / C) < 2 ? 3.0f : 2.0f;
        qkv[i] = gg_round((philox_uniform_at(seed, RNG_DATA, 1, (uint32_t)T, i) - 0.5f) * a, (int)rt);
    }
    for (size_t i = 0; i < n1; i++)
        dout[i] = gg_round(philox_uniform_at(seed, RNG_DATA, 2, (uint32_t)T, i) * 2 - 1, (int)rt);
}

/* acc_floor: what fp32 accumulation alone may leave where the exact result
 * cancels to 0 (at T = 1 every dS = P (dP - D) is exactly 0, but dP = dout . v
 * and D = dout . out are two fp32 sums of HS products in different orders):
 * |err dS_tj| <= P_tj 2 gamma_HS HS max|dout| max|qkv|, so for dq and dk
 * |err| <= scale 2 HS^2 2^-24 max|dout| max|qkv|^2 (sum_j P_tj = 1). It is far
 * below 16u max|ref| wherever the result does not cancel. */
static double acc_floor_of(const float *qkv, size_t n3, const float *dout, size_t n1, int HS)
{
    double mq = 0, mg = 0;
    for (size_t i = 0; i < n3; i++) mq = fmax(mq, fabs(qkv[i]));
    for (size_t i = 0; i < n1; i++) mg = fmax(mg, fabs(dout[i]));
    return (1.0 / sqrt((double)HS)) * 2.0 * HS * HS * 0x1p-24 * mg * mq * mq;
}
static void check_io(const char *what, const struct attn_io *io, const double *out, const double *lse,
                     const double *dqkv, int B, int T, int NH, int HS, double u, double acc_floor)
{
    const size_t C = (size_t)NH * HS, R = (size_t)B * T, nl = (size_t)B * NH * T;
    check_part(what, "out", io->out, out, R, C, C, u, acc_floor);
    size_t bad = 0, at = 0;
    for (size_t i = 0; i < nl; i++)
        if (!(fabs((double)io->lse[i] - lse[i]) <= 1e-4 * (1 + fabs(lse[i]))) && bad++ == 0) at = i;
    CHECK_MSG(bad == 0, "%s: lse: %zu of %zu past 1e-4 (1 + |ref|), first at %zu: ref %.9g gpu %.9g", what, bad, nl, at,
              bad ? lse[at] : 0.0, bad ? (double)io->lse[at] : 0.0);
    check_part(what, "dq", io->dqkv, dqkv, R, C, 3 * C, u, acc_floor);
    check_part(what, "dk", io->dqkv + C, dqkv + C, R, C, 3 * C, u, acc_floor);
    check_part(what, "dv", io->dqkv + 2 * C, dqkv + 2 * C, R, C, 3 * C, u, acc_floor);
}

static void io_alloc(struct attn_io *io, size_t n1, size_t nl, size_t n3)
{
    io->out = malloc(n1 * 4 + 4);
    io->lse = malloc(nl * 4 + 4);
    io->dqkv = malloc(n3 * 4 + 4);
}
static void io_free(struct attn_io *io)
{
    free(io->out);
    free(io->lse);
    free(io->dqkv);
}
static int io_same(const struct attn_io *a, const struct attn_io *b, size_t n1, size_t nl, size_t n3)
{
    return !memcmp(a->out, b->out, n1 * 4) && !memcmp(a->lse, b->lse, nl * 4) && !memcmp(a->dqkv, b->dqkv, n3 * 4);
}

/* the value of PLUMB_GPT_ATTN around a call, restored after */
static char *env_save(void)
{
    const char *v = getenv("PLUMB_GPT_ATTN");
    return v ? strdup(v) : NULL;
}
static void env_restore(char *v)
{
    if (v) setenv("PLUMB_GPT_ATTN", v, 1);
    else unsetenv("PLUMB_GPT_ATTN");
    free(v);
}

/* on device spec (gpu: also a second run and the scalar kernels) */
static void attn_on(const char *spec, int gpu, int B, int T, int NH, int HS, dtype_t rt)
{
    struct dev *d = NULL;
    plumb_err e = {0};
    REQUIRE(dev_open(spec, &d, &e) == 0);
    if (dev_set_numerics(d, NUMERICS_FAST, 0, &e) || !d->ops->train || !d->ops->train->attention_fwd) {
        dev_close(d);
        REQUIRE(!"no fast transformer ops on the device");
    }
    char what[96];
    snprintf(what, sizeof what, "%s B%d T%d NH%d HS%d %s", spec, B, T, NH, HS, dtype_name(rt));
    const double u = rt == DT_F16 ? 0x1p-11 : 0x1p-8;
    const size_t C = (size_t)NH * HS, n3 = (size_t)B * T * 3 * C, n1 = (size_t)B * T * C, nl = (size_t)B * NH * T;
    float *qkv = malloc(n3 * 4), *dout = malloc(n1 * 4);
    attn_inputs(23, qkv, dout, n3, n1, C, T, rt);
    double *rout = malloc(n1 * sizeof(double)), *rlse = malloc(nl * sizeof(double)), *rd = malloc(n3 * sizeof(double));
    attn_ref64(qkv, dout, B, T, NH, HS, rout, rlse, rd, NULL, NULL);
    const double acc_floor = acc_floor_of(qkv, n3, dout, n1, HS);

    struct attn_io a, a2, s, m, m2, p, p2, df;
    io_alloc(&a, n1, nl, n3);
    io_alloc(&a2, n1, nl, n3);
    io_alloc(&s, n1, nl, n3);
    io_alloc(&m, n1, nl, n3);
    io_alloc(&m2, n1, nl, n3);
    io_alloc(&p, n1, nl, n3);
    io_alloc(&p2, n1, nl, n3);
    io_alloc(&df, n1, nl, n3);
    char *saved = env_save();
    /* tc named (unset is the default, checked below against mma and tc) */
    setenv("PLUMB_GPT_ATTN", gpu ? "tc" : "", 1);
    int rc = run_gpu(d, qkv, dout, B, T, NH, HS, rt, &a, &e), rs = -1, rm = -1, rp = -1, rd_ = -1;
    CHECK_MSG(rc == 0, "%s: %s", what, e.msg);
    if (gpu) {
        if (!rc) rc = run_gpu(d, qkv, dout, B, T, NH, HS, rt, &a2, &e);
        CHECK_MSG(rc == 0, "%s (again): %s", what, e.msg);
        setenv("PLUMB_GPT_ATTN", "scalar", 1);
        rs = run_gpu(d, qkv, dout, B, T, NH, HS, rt, &s, &e);
        CHECK_MSG(rs == 0, "%s (scalar): %s", what, e.msg);
        /* the mma.sync kernels (gpu/train_gpt_attn_mma.cuh; wider heads fall back to tc) */
        setenv("PLUMB_GPT_ATTN", "mma", 1);
        rm = run_gpu(d, qkv, dout, B, T, NH, HS, rt, &m, &e);
        if (!rm) rm = run_gpu(d, qkv, dout, B, T, NH, HS, rt, &m2, &e);
        CHECK_MSG(rm == 0, "%s (mma): %s", what, e.msg);
        /* the pipelined mma.sync kernels (gpu/train_gpt_attn_mma2.cuh; wider heads fall back to tc) */
        setenv("PLUMB_GPT_ATTN", "mma2", 1);
        rp = run_gpu(d, qkv, dout, B, T, NH, HS, rt, &p, &e);
        if (!rp) rp = run_gpu(d, qkv, dout, B, T, NH, HS, rt, &p2, &e);
        CHECK_MSG(rp == 0, "%s (mma2): %s", what, e.msg);
        /* the default (unset): mma2 where it applies (16-bit, head width <= 64:
         * the fastest on an H100, BENCHMARKS.md 2026-12-05), else tc */
        unsetenv("PLUMB_GPT_ATTN");
        rd_ = run_gpu(d, qkv, dout, B, T, NH, HS, rt, &df, &e);
        CHECK_MSG(rd_ == 0, "%s (default): %s", what, e.msg);
    }
    env_restore(saved);
    if (!rc) {
        check_io(what, &a, rout, rlse, rd, B, T, NH, HS, u, acc_floor);
        if (gpu)
            CHECK_MSG(io_same(&a, &a2, n1, nl, n3), "%s: two runs differ (forward or backward not deterministic)", what);
    }
    if (!rs) {
        char ws[112];
        snprintf(ws, sizeof ws, "%s scalar", what);
        check_io(ws, &s, rout, rlse, rd, B, T, NH, HS, u, acc_floor);
    }
    if (!rm) {
        char ws[112];
        snprintf(ws, sizeof ws, "%s mma", what);
        check_io(ws, &m, rout, rlse, rd, B, T, NH, HS, u, acc_floor);
        CHECK_MSG(io_same(&m, &m2, n1, nl, n3), "%s: two runs differ (not deterministic)", ws);
    }
    if (!rp) {
        char ws[112];
        snprintf(ws, sizeof ws, "%s mma2", what);
        check_io(ws, &p, rout, rlse, rd, B, T, NH, HS, u, acc_floor);
        CHECK_MSG(io_same(&p, &p2, n1, nl, n3), "%s: two runs differ (not deterministic)", ws);
        /* mma2 computes every product of mma's in the same order (its header):
         * the same bits where it applies; where it does not, both are tc */
        if (!rm)
            CHECK_MSG(io_same(&p, &m, n1, nl, n3), "%s: not the mma kernels' bits (the same sums in the same order)",
                      ws);
    }
    if (!rd_ && !rp && !rc) {
        const int want_mma = HS <= 64 && (rt == DT_BF16 || rt == DT_F16);
        CHECK_MSG(io_same(&df, want_mma ? &p : &a, n1, nl, n3), "%s: PLUMB_GPT_ATTN unset is not the %s kernels' bits",
                  what, want_mma ? "mma2" : "tc");
    }
    io_free(&a);
    io_free(&a2);
    io_free(&s);
    io_free(&m);
    io_free(&m2);
    io_free(&p);
    io_free(&p2);
    io_free(&df);
    free(rout);
    free(rlse);
    free(rd);
    free(qkv);
    free(dout);
    dev_close(d);
}

static void attn_case(int B, int T, int NH, int HS, dtype_t rt)
{
    if (!gpu_spec(test_device()))
        TEST_SKIP("PLUMB_TEST_DEVICE=%s: GPU attention tests run with PLUMB_TEST_DEVICE=cuda or hip", test_device());
    attn_on(test_device(), 1, B, T, NH, HS, rt);
}

/* the reference and the bounds themselves, against the cpu backend's fast
 * path (fp32 P, the outputs rounded): runs everywhere */
TEST(cpu_gpt_attn_fast_meets_reference)
{
    attn_on("cpu", 0, 2, 100, 3, 64, DT_BF16);
    attn_on("cpu", 0, 1, 77, 2, 96, DT_F16);
    attn_on("cpu", 0, 2, 1, 1, 16, DT_BF16);
}

TEST(gpu_gpt_attn_fast_bf16_t100_hs64) { attn_case(2, 100, 3, 64, DT_BF16); }
TEST(gpu_gpt_attn_fast_bf16_t37_hs32) { attn_case(1, 37, 2, 32, DT_BF16); }
TEST(gpu_gpt_attn_fast_bf16_t1) { attn_case(2, 1, 2, 64, DT_BF16); }
TEST(gpu_gpt_attn_fast_bf16_t130_hs96) { attn_case(1, 130, 2, 96, DT_BF16); }
TEST(gpu_gpt_attn_fast_bf16_t256_hs64) { attn_case(1, 256, 2, 64, DT_BF16); }
TEST(gpu_gpt_attn_fast_fp16_t64_hs64) { attn_case(3, 64, 2, 64, DT_F16); }
TEST(gpu_gpt_attn_fast_fp16_t200_hs16) { attn_case(2, 200, 4, 16, DT_F16); }
TEST(gpu_gpt_attn_fast_fp16_t77_hs128) { attn_case(1, 77, 1, 128, DT_F16); }
/* mma2's 128-query forward and dQ tiles with a tile of one row (T = 129); head
 * width 36: k_mma2_to16's float4 loads with a chunk half past the head */
TEST(gpu_gpt_attn_fast_fp16_t129_hs36) { attn_case(2, 129, 2, 36, DT_F16); }

/* ---- cuDNN's fused attention (PLUMB_GPT_ATTN=cudnn / cudnn-nd, the 16-bit
 * ops; gpu/attn_cudnn.cu) against the same float64 reference and bounds:
 * cuDNN also rounds P and dS to rt before their products. cudnn (the
 * deterministic backward) must repeat bit for bit; cudnn-nd (dQ summed with
 * atomics) need not. Where the device's plugin cannot load cuDNN the test
 * skips and says why; a head width that is not a multiple of 8 may be
 * refused (cuDNN's engines take multiples of 8), nothing else may.
 * PLUMB_GPT_ATTN=auto, and unset, must give cuDNN's bits where cuDNN serves
 * the shape and our kernels' results (the same bounds) where it refuses it;
 * PLUMB_ATTN_VP_CACHE=1 (variant packs kept) cuDNN's bits. */

static void cudnn_case(const char *how, int B, int T, int NH, int HS, dtype_t rt)
{
    if (strncmp(test_device(), "cuda", 4))
        TEST_SKIP("PLUMB_TEST_DEVICE=%s: cuDNN's attention runs with PLUMB_TEST_DEVICE=cuda", test_device());
    struct dev *d = NULL;
    plumb_err e = {0};
    REQUIRE(dev_open(test_device(), &d, &e) == 0);
    REQUIRE(dev_set_numerics(d, NUMERICS_FAST, 0, &e) == 0 && d->ops->train && d->ops->train->attention_fwd16);
    char what[112];
    snprintf(what, sizeof what, "%s B%d T%d NH%d HS%d %s PLUMB_GPT_ATTN=%s", test_device(), B, T, NH, HS,
             dtype_name(rt), how);
    const double u = rt == DT_F16 ? 0x1p-11 : 0x1p-8;
    const size_t C = (size_t)NH * HS, n3 = (size_t)B * T * 3 * C, n1 = (size_t)B * T * C, nl = (size_t)B * NH * T;
    float *qkv = malloc(n3 * 4), *dout = malloc(n1 * 4);
    attn_inputs(29, qkv, dout, n3, n1, C, T, rt);
    struct attn_io a, a2;
    io_alloc(&a, n1, nl, n3);
    io_alloc(&a2, n1, nl, n3);
    char *saved = env_save();
    setenv("PLUMB_GPT_ATTN", how, 1);
    int rc = run_gpu16(d, qkv, dout, B, T, NH, HS, rt, &a, &e);
    if (!rc) rc = run_gpu16(d, qkv, dout, B, T, NH, HS, rt, &a2, &e);
    /* auto: cuDNN's bits where cuDNN serves the shape (checked against a
     * below), our kernels where it refuses it (held to the bounds below) */
    struct attn_io au;
    io_alloc(&au, n1, nl, n3);
    int rau = -1;
    if (!strcmp(how, "cudnn") && !(rc && strstr(e.msg, "not loadable"))) {
        plumb_err e2 = {0};
        setenv("PLUMB_GPT_ATTN", "auto", 1);
        rau = run_gpu16(d, qkv, dout, B, T, NH, HS, rt, &au, &e2);
        CHECK_MSG(rau == 0, "%s (auto): %s", what, e2.msg);
        if (!rau && !rc) CHECK_MSG(io_same(&a, &au, n1, nl, n3), "%s: auto is not cuDNN's bits", what);
        /* unset is auto on CUDA: the same bits; and with the variant packs
         * kept (PLUMB_ATTN_VP_CACHE=1, twice: made, then found) cuDNN's bits */
        struct attn_io un;
        io_alloc(&un, n1, nl, n3);
        unsetenv("PLUMB_GPT_ATTN");
        int ru = run_gpu16(d, qkv, dout, B, T, NH, HS, rt, &un, &e2);
        CHECK_MSG(ru == 0, "%s (unset): %s", what, e2.msg);
        if (!ru && !rau) CHECK_MSG(io_same(&au, &un, n1, nl, n3), "%s: PLUMB_GPT_ATTN unset is not auto's bits", what);
        if (!rc) {
            setenv("PLUMB_GPT_ATTN", "cudnn", 1);
            setenv("PLUMB_ATTN_VP_CACHE", "1", 1);
            for (int k = 0; k < 2 && !ru; k++) {
                ru = run_gpu16(d, qkv, dout, B, T, NH, HS, rt, &un, &e2);
                CHECK_MSG(ru == 0, "%s (PLUMB_ATTN_VP_CACHE=1, run %d): %s", what, k + 1, e2.msg);
                if (!ru)
                    CHECK_MSG(io_same(&a, &un, n1, nl, n3), "%s: PLUMB_ATTN_VP_CACHE=1 run %d is not cuDNN's bits",
                              what, k + 1);
            }
            unsetenv("PLUMB_ATTN_VP_CACHE");
        }
        io_free(&un);
    }
    env_restore(saved);
    int skipped = 0;
    if (rc && strstr(e.msg, "not loadable")) {
        skipped = 1; /* no cuDNN for the plugin: said below, after the frees */
    } else if (rc && HS % 8 && strstr(e.msg, "cuDNN")) {
        /* refused, with cuDNN's reason, for a head width it does not take */
    } else {
        CHECK_MSG(rc == 0, "%s: %s", what, e.msg);
    }
    if (!rc || !rau) {
        double *rout = malloc(n1 * sizeof(double)), *rlse = malloc(nl * sizeof(double)),
               *rd = malloc(n3 * sizeof(double));
        attn_ref64(qkv, dout, B, T, NH, HS, rout, rlse, rd, NULL, NULL);
        const double acc_floor = acc_floor_of(qkv, n3, dout, n1, HS);
        if (!rc) {
            check_io(what, &a, rout, rlse, rd, B, T, NH, HS, u, acc_floor);
            if (!strcmp(how, "cudnn"))
                CHECK_MSG(io_same(&a, &a2, n1, nl, n3), "%s: two runs differ (the deterministic backward is not)",
                          what);
            else
                check_io(what, &a2, rout, rlse, rd, B, T, NH, HS, u, acc_floor);
        } else if (!rau) {
            /* cuDNN refused the shape: auto ran our kernels, held to the same bounds */
            char wa[128];
            snprintf(wa, sizeof wa, "%s, auto", what);
            check_io(wa, &au, rout, rlse, rd, B, T, NH, HS, u, acc_floor);
        }
        free(rout);
        free(rlse);
        free(rd);
    }
    io_free(&au);
    io_free(&a);
    io_free(&a2);
    free(qkv);
    free(dout);
    dev_close(d);
    if (skipped) TEST_SKIP("%s", e.msg);
}
TEST(gpu_gpt_attn_cudnn_bf16_t256_hs64) { cudnn_case("cudnn", 2, 256, 3, 64, DT_BF16); }
TEST(gpu_gpt_attn_cudnn_bf16_t1024_hs64) { cudnn_case("cudnn", 1, 1024, 2, 64, DT_BF16); }
TEST(gpu_gpt_attn_cudnn_fp16_t100_hs64) { cudnn_case("cudnn", 2, 100, 2, 64, DT_F16); }
TEST(gpu_gpt_attn_cudnn_bf16_t37_hs32) { cudnn_case("cudnn", 1, 37, 2, 32, DT_BF16); }
TEST(gpu_gpt_attn_cudnn_fp16_t77_hs128) { cudnn_case("cudnn", 1, 77, 1, 128, DT_F16); }
TEST(gpu_gpt_attn_cudnn_bf16_t1) { cudnn_case("cudnn", 2, 1, 2, 64, DT_BF16); }
TEST(gpu_gpt_attn_cudnn_fp16_t129_hs36) { cudnn_case("cudnn", 2, 129, 2, 36, DT_F16); }
TEST(gpu_gpt_attn_cudnn_nd_bf16_t256_hs64) { cudnn_case("cudnn-nd", 2, 256, 3, 64, DT_BF16); }

/* a PLUMB_GPT_ATTN value that is none of the kinds is refused, named */
TEST(gpu_gpt_attn_env_bad_value)
{
    if (!gpu_spec(test_device()))
        TEST_SKIP("PLUMB_TEST_DEVICE=%s: GPU attention tests run with PLUMB_TEST_DEVICE=cuda or hip", test_device());
    struct dev *d = NULL;
    plumb_err e = {0};
    REQUIRE(dev_open(test_device(), &d, &e) == 0);
    REQUIRE(dev_set_numerics(d, NUMERICS_FAST, 0, &e) == 0 && d->ops->train && d->ops->train->attention_fwd);
    const int B = 1, T = 8, NH = 1, HS = 16;
    float *h = calloc((size_t)B * T * 3 * NH * HS, 4);
    struct attn_io io;
    io_alloc(&io, (size_t)B * T * NH * HS, (size_t)B * NH * T, (size_t)B * T * 3 * NH * HS);
    char *saved = env_save();
    setenv("PLUMB_GPT_ATTN", "tensor", 1);
    const int rc = run_gpu(d, h, h, B, T, NH, HS, DT_BF16, &io, &e);
    env_restore(saved);
    CHECK_MSG(rc == PLUMB_EUSAGE, "PLUMB_GPT_ATTN=tensor: rc %d (%s), expected PLUMB_EUSAGE", rc, e.msg);
    CHECK_MSG(strstr(e.msg, "PLUMB_GPT_ATTN=tensor") != NULL, "message does not name the value: %s", e.msg);
    io_free(&io);
    free(h);
    dev_close(d);
}
