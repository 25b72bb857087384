/* gpt's 16-bit activation ops (dev/train_ops.h, "gpt with 16-bit
 * activations") against the fp32 ops they are named after, on test_device()
 * in fast numerics, bf16 and fp16: the same inputs (rt values), given to one
 * as 16-bit values and to the other as fp32 numbers. On the cpu the results
 * are the same bits (its 16-bit ops are the fp32 ones between casts). On a
 * GPU the LayerNorm, attention and residual results must be the same bits
 * too; a GEMM may take another cuBLASLt algorithm for a 16-bit output, so its
 * 16-bit results may differ by one rounding step (an rt ulp) and its fp32
 * weight and bias gradients by the reordering of fp32 sums (1e-4 relative).
 * Then gpt-tiny trained through the trainer with PLUMB_GPT_ACT16=1 and =0
 * (models/gpt/gpt16.c against gpt.c's fp32 path): the same parameters on the
 * cpu, losses within 1e-2 on a GPU. */
#include "test.h"
#include "t16.h"
#include "train_env.h"
#include "comm/comm.h"
#include "core/dtype.h"
#include "dev/dev.h"
#include "dev/train_ops.h"
#include "models/gpt/gpt.h"
#include "models/workloads.h"
#include "train/options.h"
#include "train/trainer.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* a (the fp32 op's) against b (the 16-bit op's): equal bits, or within
 * `ulps` rt rounding steps (rel: relative tolerance for fp32 results) */
static void compare(const char *what, const float *a, const float *b, size_t n, int exact, double rel, dtype_t rt)
{
    const double u = rt == DT_F16 ? 0x1p-10 : 0x1p-7; /* one step between neighbouring rt values, relative */
    size_t bad = 0, first = 0;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        if (!memcmp(&a[i], &b[i], sizeof(float))) continue;
        double d = fabs((double)a[i] - b[i]), s = fmax(fabs((double)a[i]), 1e-6);
        worst = fmax(worst, d / s);
        if (exact || d > (rel > 0 ? rel : u) * s + 1e-7)
            if (!bad++) first = i;
    }
    CHECK_MSG(bad == 0, "%s %s: %zu of %zu differ (first [%zu]: %.9g against %.9g; worst relative %.3g)%s", what,
              dtype_name(rt), bad, n, first, bad ? a[first] : 0.0, bad ? b[first] : 0.0, worst,
              exact ? ", expected the same bits" : "");
}

static struct dev *open_fast(void)
{
    struct dev *d = NULL;
    plumb_err e = {0};
    if (dev_open(test_device(), &d, &e)) return NULL;
    const struct train_ops *T = d->ops->train;
    if (dev_set_numerics(d, NUMERICS_FAST, 0, &e) || !T || !T->matmul_fwd16 || !T->layernorm_fwd16 ||
        !T->attention_fwd16 || !T->residual_fwd16 || !T->matmul_bwd16 || !T->layernorm_bwd16 || !T->attention_bwd16 ||
        !T->residual_layernorm_fwd16) {
        dev_close(d);
        return NULL;
    }
    return d;
}

static void ops_case(dtype_t rt)
{
    struct dev *d = open_fast();
    if (!d) TEST_SKIP("device %s has no 16-bit gpt ops", test_device());
    const struct train_ops *T = d->ops->train;
    plumb_err e = {0};
    const int exact = is_cpu(d);
    const int R = 37, C = 48, N = 72, B = 1, TT = 37, NH = 3, HS = 16;
    struct t16 x, w, bias, lw, lb, y, pre, mean, rstd, dy, dx, dw, db, dw2, db2, res, qkv, out, lse, dout, dqkv;
    memset(&x, 0, sizeof x);
    int ok = !alloc_t(d, &x, (size_t)R * C, 1, -2, 2, rt) && !alloc_t(d, &w, (size_t)N * C, 1, -0.3f, 0.3f, rt) &&
             !alloc_t(d, &bias, N, 1, -0.5f, 0.5f, rt) && !alloc_t(d, &lw, C, 1, 0.5f, 1.5f, rt) &&
             !alloc_t(d, &lb, C, 1, -0.2f, 0.2f, rt) && !alloc_t(d, &y, (size_t)R * N, 0, 0, 0, rt) &&
             !alloc_t(d, &pre, (size_t)R * N, 0, 0, 0, rt) && !alloc_t(d, &mean, R, 0, 0, 0, rt) &&
             !alloc_t(d, &rstd, R, 0, 0, 0, rt) && !alloc_t(d, &dy, (size_t)R * N, 1, -1, 1, rt) &&
             !alloc_t(d, &dx, (size_t)R * C, 0, 0, 0, rt) && !alloc_t(d, &dw, (size_t)N * C, 0, 0, 0, rt) &&
             !alloc_t(d, &db, N, 0, 0, 0, rt) && !alloc_t(d, &dw2, (size_t)N * C, 0, 0, 0, rt) &&
             !alloc_t(d, &db2, N, 0, 0, 0, rt) && !alloc_t(d, &res, (size_t)R * C, 1, -3, 3, rt) &&
             !alloc_t(d, &qkv, (size_t)B * TT * 3 * NH * HS, 1, -1.5f, 1.5f, rt) &&
             !alloc_t(d, &out, (size_t)B * TT * NH * HS, 0, 0, 0, rt) && !alloc_t(d, &lse, (size_t)B * NH * TT, 0, 0, 0, rt) &&
             !alloc_t(d, &dout, (size_t)B * TT * NH * HS, 1, -1, 1, rt) &&
             !alloc_t(d, &dqkv, (size_t)B * TT * 3 * NH * HS, 0, 0, 0, rt);
    REQUIRE(ok);
    const size_t RC = (size_t)R * C, RN = (size_t)R * N, NA = (size_t)B * TT * NH * HS;
    float *a = malloc(4 * RN * 3 * sizeof(float) + 4 * NA * 3 * sizeof(float) + 1024);
    float *b = a + 3 * RN + 3 * NA + 64;
    REQUIRE(a != NULL);
    float *mean1 = malloc(R * sizeof(float)), *rstd1 = malloc(R * sizeof(float));
    float *lse1 = malloc(B * NH * TT * sizeof(float));
    REQUIRE(mean1 && rstd1 && lse1);

    /* layernorm_fwd16: y16 against layernorm_fwd's y; mean, rstd the same */
    int rc = T->layernorm_fwd(d, NULL, x.d, lw.d, lb.d, dx.d, mean.d, rstd.d, R, C, 1e-5f, rt, &e);
    CHECK_MSG(rc == 0, "layernorm_fwd: %s", e.msg);
    fetch(d, &dx, a, NULL, rt);
    fetch(d, &mean, mean1, NULL, rt);
    fetch(d, &rstd, rstd1, NULL, rt);
    rc = T->layernorm_fwd16(d, NULL, x.d, lw.d, lb.d, dx.d16, mean.d, rstd.d, R, C, 1e-5f, rt, &e);
    CHECK_MSG(rc == 0, "layernorm_fwd16: %s", e.msg);
    fetch(d, &dx, NULL, b, rt);
    compare("layernorm_fwd16 y", a, b, RC, 1, 0, rt);
    fetch(d, &mean, b, NULL, rt);
    compare("layernorm_fwd16 mean", mean1, b, R, 1, 0, rt);
    fetch(d, &rstd, b, NULL, rt);
    compare("layernorm_fwd16 rstd", rstd1, b, R, 1, 0, rt);

    /* layernorm_bwd16: dx (fp32, with a residual gradient), dw, db from dy16 */
    rc = T->layernorm_bwd(d, NULL, x.d, lw.d, mean.d, rstd.d, res.d, x.d, dx.d, dw.d, db.d, R, C, DT_F32, &e);
    CHECK_MSG(rc == 0, "layernorm_bwd: %s", e.msg);
    float *dxa = malloc(RC * sizeof(float)), *dwa = malloc(C * sizeof(float)), *dba = malloc(C * sizeof(float));
    REQUIRE(dxa && dwa && dba);
    fetch(d, &dx, dxa, NULL, rt);
    plumb_err de = {0};
    dev_download(d, dwa, dw.d, C * sizeof(float), &de);
    dev_download(d, dba, db.d, C * sizeof(float), &de);
    /* without dx16, then with it, then with dsum too (dx16's values summed
     * over the rows: the dbias of the GEMM that reads dx16): dx the same,
     * dx16 its cast to rt, dw and db the same. dsum: the cpu's the rows
     * added in order in fp32 (its matmul_bwd16's dbias: the same bits), a
     * GPU's within 1e-5 of the column's sum of magnitudes; dsum without dx16
     * is an error naming it. */
    struct t16 ds;
    REQUIRE(!alloc_t(d, &ds, (size_t)C, 0, 0, 0, rt));
    float *got = malloc(C * sizeof(float)), *v16 = malloc(RC * sizeof(float));
    REQUIRE(got && v16);
    for (int mode = 0; mode < 3; mode++) {
        rc = T->layernorm_bwd16(d, NULL, x.d, lw.d, mean.d, rstd.d, res.d16, x.d, dx.d, mode ? dx.d16 : NULL,
                                mode == 2 ? ds.d : NULL, dw2.d, db2.d, R, C, rt, &e);
        CHECK_MSG(rc == 0, "layernorm_bwd16 (%s): %s", mode == 2 ? "dsum too" : mode ? "dx16 too" : "dx", e.msg);
        fetch(d, &dx, b, mode ? v16 : NULL, rt);
        compare(mode == 2 ? "layernorm_bwd16 (dsum too) dx" : mode ? "layernorm_bwd16 (dx16 too) dx" : "layernorm_bwd16 dx",
                dxa, b, RC, 1, 0, rt);
        if (mode) {
            for (size_t i = 0; i < RC; i++) b[i] = to_rt(dxa[i], rt);
            compare("layernorm_bwd16 dx16 (the cast of dx)", b, v16, RC, 1, 0, rt);
        }
        dev_sync(d, &de);
        dev_download(d, b, dw2.d, C * sizeof(float), &de);
        compare("layernorm_bwd16 dw", dwa, b, C, 1, 0, rt);
        dev_download(d, b, db2.d, C * sizeof(float), &de);
        compare("layernorm_bwd16 db", dba, b, C, 1, 0, rt);
    }
    {
        dev_download(d, got, ds.d, C * sizeof(float), &de);
        int bad = 0, first = -1;
        for (int c = 0; c < C; c++) {
            float inorder = 0.0f;
            double mag = 0.0;
            for (int r = 0; r < R; r++) inorder = inorder + v16[(size_t)r * C + c], mag += fabs(v16[(size_t)r * C + c]);
            const int ok = exact ? !memcmp(&inorder, &got[c], sizeof(float))
                                 : fabs((double)got[c] - inorder) <= 1e-5 * mag + 1e-30;
            if (!ok && !bad++) first = c;
        }
        CHECK_MSG(bad == 0, "layernorm_bwd16 dsum %s: %d of %d columns off (first [%d]: %.9g, the rows in order %s)",
                  dtype_name(rt), bad, C, first, bad ? got[first] : 0.0, exact ? "exactly" : "within 1e-5");
        rc = T->layernorm_bwd16(d, NULL, x.d, lw.d, mean.d, rstd.d, res.d16, x.d, dx.d, NULL, ds.d, dw2.d, db2.d, R,
                                C, rt, &e);
        CHECK_MSG(rc == PLUMB_EUSAGE && strstr(e.msg, "dsum"), "layernorm_bwd16 dsum without dx16: rc %d (%s)", rc,
                  e.msg);
        free(got), free(v16);
        free_t(d, &ds);
    }

    /* residual_layernorm_fwd16 against residual_fwd16 then layernorm_fwd16:
     * the sum, y16, mean and rstd the same bits; then with res onto a */
    {
        struct t16 s1, s2;
        REQUIRE(!alloc_t(d, &s1, RC, 0, 0, 0, rt) && !alloc_t(d, &s2, RC, 0, 0, 0, rt));
        float *c = malloc(4 * RC * sizeof(float) + 4 * R * sizeof(float));
        REQUIRE(c != NULL);
        float *csum = c, *cy = c + RC, *fsum = c + 2 * RC, *fy = c + 3 * RC, *cm = c + 4 * RC, *cr = cm + R, *fm = cr + R,
              *fr = fm + R;
        rc = T->residual_fwd16(d, NULL, x.d, res.d16, s1.d, RC, rt, &e);
        if (!rc) rc = T->layernorm_fwd16(d, NULL, s1.d, lw.d, lb.d, s1.d16, mean.d, rstd.d, R, C, 1e-5f, rt, &e);
        CHECK_MSG(rc == 0, "residual_fwd16, layernorm_fwd16: %s", e.msg);
        fetch(d, &s1, csum, cy, rt);
        fetch(d, &mean, cm, NULL, rt);
        fetch(d, &rstd, cr, NULL, rt);
        for (int inplace = 0; inplace < 2; inplace++) {
            const char *how = inplace ? "residual_layernorm_fwd16 (res onto a)" : "residual_layernorm_fwd16";
            if (inplace) dev_upload(d, s2.d, x.h, RC * sizeof(float), &de);
            rc = T->residual_layernorm_fwd16(d, NULL, inplace ? s2.d : x.d, res.d16, s2.d, lw.d, lb.d, s2.d16, mean.d,
                                             rstd.d, R, C, 1e-5f, rt, &e);
            CHECK_MSG(rc == 0, "%s: %s", how, e.msg);
            fetch(d, &s2, fsum, fy, rt);
            fetch(d, &mean, fm, NULL, rt);
            fetch(d, &rstd, fr, NULL, rt);
            char what[96];
            snprintf(what, sizeof what, "%s sum", how);
            compare(what, csum, fsum, RC, 1, 0, rt);
            snprintf(what, sizeof what, "%s y16", how);
            compare(what, cy, fy, RC, 1, 0, rt);
            snprintf(what, sizeof what, "%s mean, rstd", how);
            compare(what, cm, fm, R, 1, 0, rt);
            compare(what, cr, fr, R, 1, 0, rt);
        }
        rc = T->residual_layernorm_fwd16(d, NULL, x.d, res.d16, s2.d, lw.d, lb.d, s2.d16, mean.d, rstd.d, R, 0, 1e-5f,
                                         rt, &e);
        CHECK_MSG(rc == PLUMB_EUSAGE && strstr(e.msg, "residual_layernorm_fwd16"),
                  "residual_layernorm_fwd16 with C = 0: rc %d (%s)", rc, e.msg);
        free(c);
        free_t(d, &s1), free_t(d, &s2);
    }

    /* matmul_fwd16, without and with the GELU */
    for (int gelu = 0; gelu < 2; gelu++) {
        rc = T->matmul_fwd(d, NULL, x.d, w.d, bias.d, y.d, gelu ? pre.d : NULL, R, C, N, gelu, rt, &e);
        CHECK_MSG(rc == 0, "matmul_fwd: %s", e.msg);
        fetch(d, &y, a, NULL, rt);
        if (gelu) fetch(d, &pre, a + RN, NULL, rt);
        /* the GELU as matmul_fwd evaluates it (the GELU_AUX_BIAS epilogue's
         * is held to its bound in mm16_epi_case below) */
        char *kg = env_push("PLUMB_GPT_GELU_EPI", "0");
        rc = T->matmul_fwd16(d, NULL, x.d16, w.d16, bias.d16, y.d16, gelu ? pre.d16 : NULL, R, C, N, gelu, rt, &e);
        env_restore("PLUMB_GPT_GELU_EPI", kg);
        CHECK_MSG(rc == 0, "matmul_fwd16: %s", e.msg);
        fetch(d, &y, NULL, b, rt);
        compare(gelu ? "matmul_fwd16 (gelu) y" : "matmul_fwd16 y", a, b, RN, exact, 0, rt);
        if (gelu) {
            fetch(d, &pre, NULL, b + RN, rt);
            compare("matmul_fwd16 (gelu) pre", a + RN, b + RN, RN, exact, 0, rt);
        }
    }
    /* matmul_bwd16 with the GELU below (pre_in: x's region as a pre-activation) and without */
    for (int pg = 0; pg < 2; pg++) {
        rc = T->matmul_bwd(d, NULL, x.d, w.d, dy.d, pg ? res.d : NULL, dx.d, dw.d, db.d, R, C, N, rt, &e);
        CHECK_MSG(rc == 0, "matmul_bwd: %s", e.msg);
        fetch(d, &dx, a, NULL, rt);
        dev_sync(d, &de);
        dev_download(d, a + RC, dw.d, (size_t)N * C * sizeof(float), &de);
        dev_download(d, a + RC + (size_t)N * C, db.d, N * sizeof(float), &de);
        /* gelu' as matmul_bwd evaluates it (the DGELU epilogue's own gelu'
         * is held to its bound in mm16_epi_case below) */
        char *kd = env_push("PLUMB_GPT_DGELU_EPI", "0");
        rc = T->matmul_bwd16(d, NULL, x.d16, w.d16, dy.d16, pg ? res.d16 : NULL, dx.d16, dw2.d, db2.d, R, C, N, rt, &e);
        env_restore("PLUMB_GPT_DGELU_EPI", kd);
        CHECK_MSG(rc == 0, "matmul_bwd16: %s", e.msg);
        fetch(d, &dx, NULL, b, rt);
        dev_sync(d, &de);
        dev_download(d, b + RC, dw2.d, (size_t)N * C * sizeof(float), &de);
        dev_download(d, b + RC + (size_t)N * C, db2.d, N * sizeof(float), &de);
        compare(pg ? "matmul_bwd16 (gelu below) dx" : "matmul_bwd16 dx", a, b, RC, exact, 0, rt);
        compare("matmul_bwd16 dw", a + RC, b + RC, (size_t)N * C, exact, 1e-4, rt);
        compare("matmul_bwd16 dbias", a + RC + (size_t)N * C, b + RC + (size_t)N * C, N, exact, 1e-4, rt);
    }
    /* dx16 NULL: only the weight gradients */
    rc = T->matmul_bwd16(d, NULL, x.d16, w.d16, dy.d16, NULL, NULL, dw2.d, db2.d, R, C, N, rt, &e);
    CHECK_MSG(rc == 0, "matmul_bwd16 without dx: %s", e.msg);

    /* attention_fwd16 / attention_bwd16, our kernels named (PLUMB_GPT_ATTN
     * unset would take cuDNN on CUDA, whose sums are not our kernels': its
     * own tests are tests/test_gpu_attn.c's gpu_gpt_attn_cudnn_*) */
    char *kept_attn = env_push("PLUMB_GPT_ATTN", "mma2");
    rc = T->attention_fwd(d, NULL, qkv.d, out.d, lse.d, B, TT, NH, HS, rt, &e);
    CHECK_MSG(rc == 0, "attention_fwd: %s", e.msg);
    fetch(d, &out, a, NULL, rt);
    fetch(d, &lse, lse1, NULL, rt);
    rc = T->attention_fwd16(d, NULL, qkv.d16, out.d16, lse.d, B, TT, NH, HS, rt, &e);
    CHECK_MSG(rc == 0, "attention_fwd16: %s", e.msg);
    fetch(d, &out, NULL, b, rt);
    compare("attention_fwd16 out", a, b, NA, 1, 0, rt);
    fetch(d, &lse, b, NULL, rt);
    compare("attention_fwd16 lse", lse1, b, (size_t)B * NH * TT, 1, 0, rt);
    /* the backward from the fp32 op's out (the 16-bit out holds the same values) */
    rc = T->attention_bwd(d, NULL, qkv.d, out.d, lse.d, dout.d, dqkv.d, B, TT, NH, HS, rt, &e);
    CHECK_MSG(rc == 0, "attention_bwd: %s", e.msg);
    fetch(d, &dqkv, a, NULL, rt);
    rc = T->attention_bwd16(d, NULL, qkv.d16, out.d16, lse.d, dout.d16, dqkv.d16, B, TT, NH, HS, rt, &e);
    CHECK_MSG(rc == 0, "attention_bwd16: %s", e.msg);
    fetch(d, &dqkv, NULL, b, rt);
    compare("attention_bwd16 dqkv", a, b, 3 * NA, 1, 0, rt);
    env_restore("PLUMB_GPT_ATTN", kept_attn);

    /* residual_fwd16: fp32 a + 16-bit b, unrounded, also in place */
    rc = T->residual_fwd(d, NULL, x.d, res.d, dx.d, RC, DT_F32, &e);
    CHECK_MSG(rc == 0, "residual_fwd: %s", e.msg);
    fetch(d, &dx, a, NULL, rt);
    rc = T->residual_fwd16(d, NULL, x.d, res.d16, x.d, RC, rt, &e);
    CHECK_MSG(rc == 0, "residual_fwd16: %s", e.msg);
    fetch(d, &x, b, NULL, rt);
    compare("residual_fwd16 (in place)", a, b, RC, 1, 0, rt);

    /* a 16-bit type that is not one is refused, naming the op */
    rc = T->matmul_fwd16(d, NULL, x.d16, w.d16, bias.d16, y.d16, NULL, R, C, N, 0, DT_F32, &e);
    CHECK_MSG(rc == PLUMB_EUSAGE && strstr(e.msg, "matmul_fwd16"), "matmul_fwd16 with fp32: rc %d (%s)", rc, e.msg);

    free(a), free(mean1), free(rstd1), free(lse1), free(dxa), free(dwa), free(dba);
    struct t16 *all[] = {&x, &w, &bias, &lw, &lb, &y, &pre, &mean, &rstd, &dy, &dx, &dw, &db, &dw2, &db2, &res, &qkv,
                         &out, &lse, &dout, &dqkv};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) free_t(d, all[i]);
    dev_close(d);
}

TEST(gpt16_ops_bf16) { ops_case(DT_BF16); }
TEST(gpt16_ops_fp16) { ops_case(DT_F16); }

/* matmul_bwd16's cuBLASLt epilogues (CUDA: train_gpt_gemm.cu): dx with the
 * GELU below through the DGELU epilogue, dbias through the dw GEMM's BGRADB
 * epilogue (one partial vector a dw row slice), against the passes they
 * replace (PLUMB_GPT_DGELU_EPI=0, PLUMB_GPT_BGRAD_EPI=0). dx = round(p
 * gelu'(pre)), p the fp32 product: cuBLASLt evaluates gelu' its own way
 * (on an H100 up to 6% apart where gelu' cancels to near 0, as a hardware
 * tanh approximation of relative error 2^-11 gives), so each element is held
 * to two rt steps plus 2^-9 |p| (gelu' within 2^-9 absolute; p in float64
 * from the same 16-bit operands). dw and dbias within 1e-5 norm-wise (fp32
 * sums reassociated: the epilogue may pick another GEMM algorithm), the
 * epilogues run to run the same bits. Shapes: 4096 rows (dw in 8 slices), 37 (one GEMM), K = 60 (aux rows
 * not a multiple of 8: the DGELU epilogue refuses it, the pass runs). A value
 * other than 0 or 1 is refused, naming the variable (CUDA reads them). */
static double norm_rel(const float *a, const float *b, size_t n)
{
    double d2 = 0, a2 = 0;
    for (size_t i = 0; i < n; i++) d2 += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), a2 += (double)a[i] * a[i];
    return a2 > 0 ? sqrt(d2 / a2) : sqrt(d2);
}
static void compare_dgelu(const char *what, const float *a, const float *b, const struct t16 *dy,
                          const struct t16 *w, int R, int K, int N, dtype_t rt)
{
    const double u = rt == DT_F16 ? 0x1p-10 : 0x1p-7;
    size_t bad = 0, first = 0;
    double worst = 0;
    for (int r = 0; r < R; r++)
        for (int k = 0; k < K; k++) {
            const size_t i = (size_t)r * K + k;
            double p = 0;
            for (int n = 0; n < N; n++) p += (double)dy->h[(size_t)r * N + n] * w->h[(size_t)n * K + k];
            const double dd = fabs((double)a[i] - b[i]), bound = 2 * u * fabs((double)a[i]) + 0x1p-9 * fabs(p) + 1e-30;
            worst = fmax(worst, dd / bound);
            if (dd > bound && !bad++) first = i;
        }
    CHECK_MSG(bad == 0, "%s %s: %zu of %zu past two rt steps + 2^-9 |p| (first [%zu]: %.9g against %.9g; worst %.3g of "
              "the bound)", what, dtype_name(rt), bad, (size_t)R * K, first, bad ? a[first] : 0.0, bad ? b[first] : 0.0,
              worst);
}
static void mm16_epi_case(dtype_t rt, int R, int K, int N)
{
    struct dev *d = open_fast();
    if (!d) TEST_SKIP("device %s has no 16-bit gpt ops", test_device());
    const struct train_ops *T = d->ops->train;
    plumb_err e = {0};
    const size_t RK = (size_t)R * K, NK = (size_t)N * K;
    struct t16 x, w, dy, pre, dx, dw, db, bs;
    int ok = !alloc_t(d, &x, RK, 1, -2, 2, rt) && !alloc_t(d, &w, NK, 1, -0.3f, 0.3f, rt) &&
             !alloc_t(d, &dy, (size_t)R * N, 1, -1, 1, rt) && !alloc_t(d, &pre, RK, 1, -4, 3, rt) &&
             !alloc_t(d, &dx, RK, 0, 0, 0, rt) && !alloc_t(d, &dw, NK, 0, 0, 0, rt) && !alloc_t(d, &db, N, 0, 0, 0, rt) &&
             !alloc_t(d, &bs, K, 1, -0.5f, 0.5f, rt);
    REQUIRE(ok);
    /* [run][dx RK | dw NK | db N]: 0 the passes, 1 and 2 both epilogues on
     * (named: BGRADB is off by default since bbc819c, DGELU on) */
    const size_t per = RK + NK + (size_t)N;
    float *o = malloc(3 * per * sizeof(float));
    REQUIRE(o != NULL);
    const char *epi[3] = {"0", "1", "1"};
    for (int r = 0; r < 3; r++) {
        char *k1 = env_push("PLUMB_GPT_DGELU_EPI", epi[r]), *k2 = env_push("PLUMB_GPT_BGRAD_EPI", epi[r]);
        int rc = T->matmul_bwd16(d, NULL, x.d16, w.d16, dy.d16, pre.d16, dx.d16, dw.d, db.d, R, K, N, rt, &e);
        env_restore("PLUMB_GPT_BGRAD_EPI", k2);
        env_restore("PLUMB_GPT_DGELU_EPI", k1);
        CHECK_MSG(rc == 0, "matmul_bwd16 R %d K %d N %d (epilogues %s): %s", R, K, N, r ? "on" : "off", e.msg);
        float *at = o + (size_t)r * per;
        fetch(d, &dx, NULL, at, rt);
        fetch(d, &dw, at + RK, NULL, rt);
        fetch(d, &db, at + RK + NK, NULL, rt);
    }
    char what[96];
    snprintf(what, sizeof what, "matmul_bwd16 %dx%dx%d epilogues: dx", R, K, N);
    compare_dgelu(what, o, o + per, &dy, &w, R, K, N, rt);
    const double rw = norm_rel(o + RK, o + per + RK, NK), rb = norm_rel(o + RK + NK, o + per + RK + NK, N);
    CHECK_MSG(rw <= 1e-5 && rb <= 1e-5, "matmul_bwd16 %dx%dx%d %s: epilogues against passes: dw %.3g, dbias %.3g "
              "norm-wise (bound 1e-5)", R, K, N, dtype_name(rt), rw, rb);
    CHECK_MSG(!memcmp(o + per, o + 2 * per, per * sizeof(float)), "matmul_bwd16 %dx%dx%d %s: not the same bits run to run",
              R, K, N, dtype_name(rt));
    if (!strncmp(test_device(), "cuda", 4)) {
        char *k = env_push("PLUMB_GPT_BGRAD_EPI", "yes");
        const int rc = T->matmul_bwd16(d, NULL, x.d16, w.d16, dy.d16, pre.d16, dx.d16, dw.d, db.d, R, K, N, rt, &e);
        env_restore("PLUMB_GPT_BGRAD_EPI", k);
        CHECK_MSG(rc == PLUMB_EUSAGE && strstr(e.msg, "PLUMB_GPT_BGRAD_EPI=yes"), "PLUMB_GPT_BGRAD_EPI=yes: rc %d (%s)",
                  rc, e.msg);
    }
    /* the forward: y = gelu(x w^T + bias) with pre (N = K here, so the
     * backward's tensors serve: x [R, K] -> pre, y [R, K] from w [K, K]'s
     * first K rows) through GELU_AUX_BIAS against k_gelu16 after the GEMM:
     * pre within one rt step (the GEMM may take another algorithm); y within
     * two rt steps plus two of pre (cuBLASLt's GELU is of the unrounded sum,
     * |gelu'| <= 1.13), run to run the same bits */
    if (N >= K) {
        const size_t n = RK;
        float *f = malloc(6 * n * sizeof(float));
        REQUIRE(f != NULL);
        const char *ge[3] = {"0", NULL, NULL};
        for (int r = 0; r < 3; r++) {
            char *kg = env_push("PLUMB_GPT_GELU_EPI", ge[r]);
            int rc = T->matmul_fwd16(d, NULL, x.d16, w.d16, bs.d16, dx.d16, pre.d16, R, K, K, 1, rt, &e);
            env_restore("PLUMB_GPT_GELU_EPI", kg);
            CHECK_MSG(rc == 0, "matmul_fwd16 (gelu) R %d K %d: %s", R, K, e.msg);
            fetch(d, &dx, NULL, f + (size_t)(2 * r) * n, rt);
            fetch(d, &pre, NULL, f + (size_t)(2 * r + 1) * n, rt);
        }
        const double u = rt == DT_F16 ? 0x1p-10 : 0x1p-7;
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < n; i++) {
            const double y0 = f[i], p0 = f[n + i], y1 = f[2 * n + i], p1 = f[3 * n + i];
            const int ok = fabs(p0 - p1) <= u * fabs(p0) && fabs(y0 - y1) <= 2 * u * fabs(y0) + 2 * u * fabs(p0) + 1e-30;
            if (!ok && !bad++) first = i;
        }
        CHECK_MSG(bad == 0, "matmul_fwd16 %dx%d %s GELU_AUX_BIAS: %zu of %zu past the bound (first [%zu]: y %.9g against "
                  "%.9g, pre %.9g against %.9g)", R, K, dtype_name(rt), bad, n, first, bad ? f[first] : 0.0,
                  bad ? f[2 * n + first] : 0.0, bad ? f[n + first] : 0.0, bad ? f[3 * n + first] : 0.0);
        CHECK_MSG(!memcmp(f + 2 * n, f + 4 * n, 2 * n * sizeof(float)), "matmul_fwd16 %dx%d %s GELU_AUX_BIAS: not the "
                  "same bits run to run", R, K, dtype_name(rt));
        free(f);
    }
    free(o);
    struct t16 *all[] = {&x, &w, &dy, &pre, &dx, &dw, &db, &bs};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) free_t(d, all[i]);
    dev_close(d);
}
TEST(gpt16_matmul_bwd_epilogues_bf16) { mm16_epi_case(DT_BF16, 4096, 64, 192); }
TEST(gpt16_matmul_bwd_epilogues_fp16) { mm16_epi_case(DT_F16, 4096, 64, 192); }
TEST(gpt16_matmul_bwd_epilogues_one_gemm) { mm16_epi_case(DT_BF16, 37, 48, 72); }
TEST(gpt16_matmul_bwd_epilogues_k60) { mm16_epi_case(DT_F16, 300, 60, 72); }

/* attention_fwd16 / attention_bwd16 at shapes where CUDA's pipelined mma.sync
 * kernels read the 16-bit qkv and dout in place (T a multiple of 128, head
 * width 64: gpu/train_gpt_attn.cu's mma2_fits), several images and
 * heads: the fp32 ops' bits, and the same bits with PLUMB_GPT_ATTN_DIRECT=0
 * (the head-major copies first); any other value of it is refused, named,
 * on CUDA (the only backend that reads it). PLUMB_GPT_ATTN=mma2 throughout:
 * our kernels, whose bits these are */
static void attn16_case(dtype_t rt, int B, int TT, int NH, int HS)
{
    struct dev *d = open_fast();
    if (!d) TEST_SKIP("device %s has no 16-bit gpt ops", test_device());
    const struct train_ops *T = d->ops->train;
    plumb_err e = {0};
    const size_t NA = (size_t)B * TT * NH * HS, NL = (size_t)B * NH * TT;
    struct t16 qkv, out, lse, dout, dqkv;
    int ok = !alloc_t(d, &qkv, 3 * NA, 1, -1.5f, 1.5f, rt) && !alloc_t(d, &out, NA, 0, 0, 0, rt) &&
             !alloc_t(d, &lse, NL, 0, 0, 0, rt) && !alloc_t(d, &dout, NA, 1, -1, 1, rt) &&
             !alloc_t(d, &dqkv, 3 * NA, 0, 0, 0, rt);
    REQUIRE(ok);
    float *a = malloc(3 * NA * sizeof(float)), *b = malloc(3 * NA * sizeof(float)), *c = malloc(3 * NA * sizeof(float));
    float *la = malloc(NL * sizeof(float)), *lb = malloc(NL * sizeof(float));
    REQUIRE(a && b && c && la && lb);
    /* the fp32 ops */
    int rc = T->attention_fwd(d, NULL, qkv.d, out.d, lse.d, B, TT, NH, HS, rt, &e);
    CHECK_MSG(rc == 0, "attention_fwd: %s", e.msg);
    fetch(d, &out, a, NULL, rt);
    fetch(d, &lse, la, NULL, rt);
    rc = T->attention_bwd(d, NULL, qkv.d, out.d, lse.d, dout.d, dqkv.d, B, TT, NH, HS, rt, &e);
    CHECK_MSG(rc == 0, "attention_bwd: %s", e.msg);
    fetch(d, &dqkv, c, NULL, rt);
    /* our kernels, whatever the caller's environment names (cuDNN's attention has other bits) */
    char *kept_attn = env_push("PLUMB_GPT_ATTN", "mma2");
    const char *how[] = {NULL, "0", "1"};
    for (int k = 0; k < 3; k++) {
        char *keep = env_push("PLUMB_GPT_ATTN_DIRECT", how[k]);
        rc = T->attention_fwd16(d, NULL, qkv.d16, out.d16, lse.d, B, TT, NH, HS, rt, &e);
        CHECK_MSG(rc == 0, "attention_fwd16 (PLUMB_GPT_ATTN_DIRECT %s): %s", how[k] ? how[k] : "unset", e.msg);
        fetch(d, &out, NULL, b, rt);
        compare(k == 1 ? "attention_fwd16 out (copies)" : "attention_fwd16 out", a, b, NA, 1, 0, rt);
        fetch(d, &lse, lb, NULL, rt);
        compare(k == 1 ? "attention_fwd16 lse (copies)" : "attention_fwd16 lse", la, lb, NL, 1, 0, rt);
        rc = T->attention_bwd16(d, NULL, qkv.d16, out.d16, lse.d, dout.d16, dqkv.d16, B, TT, NH, HS, rt, &e);
        CHECK_MSG(rc == 0, "attention_bwd16 (PLUMB_GPT_ATTN_DIRECT %s): %s", how[k] ? how[k] : "unset", e.msg);
        fetch(d, &dqkv, NULL, b, rt);
        compare(k == 1 ? "attention_bwd16 dqkv (copies)" : "attention_bwd16 dqkv", c, b, 3 * NA, 1, 0, rt);
        env_restore("PLUMB_GPT_ATTN_DIRECT", keep);
    }
    if (!strncmp(test_device(), "cuda", 4)) {
        char *keep = env_push("PLUMB_GPT_ATTN_DIRECT", "yes");
        rc = T->attention_fwd16(d, NULL, qkv.d16, out.d16, lse.d, B, TT, NH, HS, rt, &e);
        env_restore("PLUMB_GPT_ATTN_DIRECT", keep);
        CHECK_MSG(rc == PLUMB_EUSAGE && strstr(e.msg, "PLUMB_GPT_ATTN_DIRECT=yes"), "PLUMB_GPT_ATTN_DIRECT=yes: rc %d (%s)",
                  rc, e.msg);
    }
    env_restore("PLUMB_GPT_ATTN", kept_attn);
    free(a), free(b), free(c), free(la), free(lb);
    struct t16 *all[] = {&qkv, &out, &lse, &dout, &dqkv};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) free_t(d, all[i]);
    dev_close(d);
}
TEST(gpt16_attention_in_place_bf16) { attn16_case(DT_BF16, 2, 256, 2, 64); }
TEST(gpt16_attention_in_place_fp16) { attn16_case(DT_F16, 1, 384, 3, 64); }

/* gpt-tiny, 6 steps of 4 x 64 through the trainer, env = v */
static int tiny_env(const char *env, const char *prec, const char *v, struct train_result *tr, plumb_err *e)
{
    const char *w[] = {"--preset", "gpt-tiny", "--device", test_device(), "--precision", prec, "--steps", "6",
                       "--batch", "4", "--micro-shard", "4", "--eval-every", "0", "--threads", "1",
                       "--health-interval", "0", "--quiet", NULL, NULL};
    return train_with_env("gpt", w, env, v, tr, e);
}
static int tiny_run(const char *prec, const char *v, struct train_result *tr, plumb_err *e)
{
    return tiny_env("PLUMB_GPT_ACT16", prec, v, tr, e);
}

static void trainer_case(const char *prec)
{
    struct dev *d = open_fast();
    if (!d) TEST_SKIP("device %s has no 16-bit gpt ops", test_device());
    const int cpu = is_cpu(d);
    dev_close(d);
    /* each step's forward (and the evals') through the pipeline with 1, none with 0 */
    /* on a GPU 2e-3 of the loss (about 1e-2 at gpt-tiny's 5.36): the 16-bit
     * kernels keep the fp32 ones' orders (H100, 2026-12-05: equal digests) */
    act16_same_as_off(tiny_run, prec, "PLUMB_GPT_ACT16", &gpt16_forward_count, 6, cpu, 2e-3);
}

TEST(gpt16_trainer_bf16_same_as_fp32_path) { trainer_case("bf16"); }
TEST(gpt16_trainer_fp16_same_as_fp32_path) { trainer_case("fp16"); }

/* the classifier and ln_f in 16 bits (classifier_fwd_bwd16, the default
 * where the device has it) against the pipeline's fp32 classifier
 * (PLUMB_GPT_CLS16=0): 6 steps of gpt-tiny, the same digest on the cpu, on
 * a GPU the last loss within 2e-3 (its dx GEMM may take another algorithm
 * for a 16-bit output); every classifier call of the first run in 16 bits,
 * none of the second */
static int tiny_cls(const char *prec, const char *v, struct train_result *tr, plumb_err *e)
{
    return tiny_env("PLUMB_GPT_CLS16", prec, v, tr, e);
}
static void cls16_case(const char *prec)
{
    struct dev *d = open_fast();
    if (!d) TEST_SKIP("device %s has no 16-bit gpt ops", test_device());
    const int cpu = is_cpu(d), has = d->ops->train->classifier_fwd_bwd16 != NULL;
    dev_close(d);
    if (!has) TEST_SKIP("device %s has no classifier_fwd_bwd16", test_device());
    act16_same_as_off(tiny_cls, prec, "PLUMB_GPT_CLS16", &gpt_cls16_count, 6, cpu, 2e-3);
}
TEST(gpt16_classifier16_bf16_same_as_fp32_classifier) { cls16_case("bf16"); }
TEST(gpt16_classifier16_fp16_same_as_fp32_classifier) { cls16_case("fp16"); }

/* an unknown PLUMB_GPT_ACT16 is refused, named */
TEST(gpt16_env_value_refused)
{
    struct train_result tr;
    plumb_err e = {0};
    int rc = tiny_run("bf16", "yes", &tr, &e);
    CHECK_MSG(rc == PLUMB_EUSAGE && strstr(e.msg, "PLUMB_GPT_ACT16=yes"), "rc %d: %s", rc, e.msg);
}

/* weights16 (optional; the GPU's): each value read once, y16 = its 16-bit
 * value inside the ranges (the cast's bits), y = round_fp32's value outside,
 * and nothing else written (sentinels stay): ranges with odd ends, two
 * adjacent, one reaching n, an n that is not a multiple of four, and the
 * same with every pointer one element off (the one-at-a-time path) */
static void weights16_case(dtype_t rt, size_t off)
{
    struct dev *d = open_fast();
    if (!d) TEST_SKIP("device %s has no 16-bit gpt ops", test_device());
    const struct train_ops *T = d->ops->train;
    if (!T->weights16) {
        dev_close(d);
        TEST_SKIP("device %s has no fused weights16 (gpt16.c rounds and casts apart)", test_device());
    }
    plumb_err e = {0};
    const size_t n = 1000003;
    const int64_t r[] = {3, 1001, 1001, 5000, 7777, 500001, 999990, (int64_t)n};
    const int nr = 4;
    float *x = malloc((n + off) * sizeof(float)), *y = malloc((n + off) * sizeof(float));
    uint16_t *y16 = malloc((n + off) * sizeof(uint16_t));
    REQUIRE(x && y && y16);
    for (size_t i = 0; i < n + off; i++) {
        x[i] = (urand16() - 0.5f) * (i % 7 == 0 ? 3e4f : 2.0f);
        y[i] = 12345.0f;
        y16[i] = 0xABCD;
    }
    void *dx = NULL, *dy = NULL, *dy16 = NULL, *dr = NULL;
    int rc = dev_alloc(d, (n + off) * 4, &dx, &e) || dev_alloc(d, (n + off) * 4, &dy, &e) ||
             dev_alloc(d, (n + off) * 2, &dy16, &e) || dev_alloc(d, sizeof r, &dr, &e) ||
             dev_upload(d, dx, x, (n + off) * 4, &e) || dev_upload(d, dy, y, (n + off) * 4, &e) ||
             dev_upload(d, dy16, y16, (n + off) * 2, &e) || dev_upload(d, dr, r, sizeof r, &e);
    REQUIRE(rc == 0);
    rc = T->weights16(d, NULL, (const float *)dx + off, (float *)dy + off, (uint16_t *)dy16 + off, n, dr, nr, rt, &e);
    CHECK_MSG(rc == 0, "weights16: %s", e.msg);
    rc = dev_sync(d, &e) || dev_download(d, y, dy, (n + off) * 4, &e) || dev_download(d, y16, dy16, (n + off) * 2, &e);
    REQUIRE(rc == 0);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        int in = 0;
        for (int j = 0; j < nr; j++) in |= (int64_t)i >= r[2 * j] && (int64_t)i < r[2 * j + 1];
        const float *xi = x + off + i;
        const int ok = in ? y16[off + i] == bits16(*xi, rt) && y[off + i] == 12345.0f
                          : y[off + i] == to_rt(*xi, rt) && y16[off + i] == 0xABCD;
        if (!ok && !bad++) first = i;
    }
    for (size_t i = 0; i < off; i++) bad += y[i] != 12345.0f || y16[i] != 0xABCD;
    CHECK_MSG(bad == 0, "weights16 %s (offset %zu): %zu of %zu wrong, first [%zu]: x %.9g y %.9g y16 0x%04x", dtype_name(rt),
              off, bad, n, first, x[off + first], y[off + first], y16[off + first]);
    dev_free(d, dx), dev_free(d, dy), dev_free(d, dy16), dev_free(d, dr);
    free(x), free(y), free(y16);
    dev_close(d);
}
TEST(gpt16_weights16_bf16) { weights16_case(DT_BF16, 0); }
TEST(gpt16_weights16_fp16) { weights16_case(DT_F16, 0); }
TEST(gpt16_weights16_unaligned) { weights16_case(DT_BF16, 1); }
