/* resnet's 16-bit activation ops (dev/train_ops.h, "resnet with 16-bit
 * activations") against the fp32 vision ops they are named after, on
 * test_device() in fast numerics, bf16 and fp16: the same inputs (rt
 * values), given to one as 16-bit values and to the other as fp32 numbers,
 * the masked gradients as relu_bwd would have stored them. On the cpu every
 * result is the same bits (its 16-bit ops are the fp32 ones between casts).
 * On a GPU the elementwise results (bn_apply16o, bn_bwd_data16o, add16o,
 * maxpool) must be the same bits too; a convolution may take another library
 * algorithm for a 16-bit output (one rt step), and the BN sums (fp32, in the
 * 16-bit kernels' own lane order) may differ by the reordering of fp32 adds:
 * |a - b| <= 2 n u32 sum|v| for n terms (u32 = 2^-24).
 * Then the model: resnet-tiny trained through the trainer with
 * PLUMB_RESNET_ACT16=1 and =0 (models/resnet/resnet16.c against resnet.c's
 * mirror path), and a small ImageNet-stem bottleneck net (max-pool,
 * projection shortcuts) stepped directly: the same parameters on the cpu,
 * losses within 1e-2 on a GPU. */
#include "test.h"
#include "t16.h"
#include "train_env.h"
#include "comm/comm.h"
#include "core/dtype.h"
#include "dev/dev.h"
#include "dev/train_ops.h"
#include "dev/train_vision.h"
#include "models/resnet/resnet.h"
#include "models/workloads.h"
#include "train/options.h"
#include "train/trainer.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* a (the fp32 op's) against b (the 16-bit op's): the same bits when exact,
 * else within one rt step (ulps) plus 2^-20 of the tensor's largest value
 * (an element whose sum cancels to near 0 keeps the absolute error of fp32
 * sums taken in another order: the space-to-depth stem's 7 x 7 / 2 output
 * 1.79e-4 was 4 fp16 steps apart on an H100, 2026-12-06), or, with abs_sum,
 * within the reordering bound 2 nterms 2^-24 abs_sum[i % C] of an fp32 sum */
static void cmp(const char *what, const float *a, const float *b, size_t n, int exact, const double *abs_sum,
                int C, double nterms, dtype_t rt)
{
    const double u = rt == DT_F16 ? 0x1p-10 : 0x1p-7;
    double amax = 0;
    for (size_t i = 0; i < n; i++) amax = fmax(amax, fabs((double)a[i]));
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        if (!memcmp(&a[i], &b[i], sizeof(float))) continue;
        double dd = fabs((double)a[i] - b[i]);
        double tol = abs_sum ? 2 * nterms * 0x1p-24 * abs_sum[i % (size_t)C] : u * fabs((double)a[i]) + 0x1p-20 * amax;
        if (exact || !(dd <= tol))
            if (!bad++) first = i;
    }
    CHECK_MSG(bad == 0, "%s %s: %zu of %zu differ (first [%zu]: %.9g against %.9g)%s", what, dtype_name(rt), bad, n,
              first, bad ? a[first] : 0.0, bad ? b[first] : 0.0, exact ? ", expected the same bits" : "");
}

static struct dev *open_fast16(void)
{
    struct dev *d = NULL;
    plumb_err e = {0};
    if (dev_open(test_device(), &d, &e)) return NULL;
    const struct train_ops *T = d->ops->train;
    if (dev_set_numerics(d, NUMERICS_FAST, 0, &e) || !T || !T->conv2d_fwd16o || !T->conv2d_bwd_data16o ||
        !T->conv2d_bwd_filter16o || !T->bn_stats16o || !T->bn_apply16o || !T->bn_bwd_reduce16o ||
        !T->bn_bwd_data16o || !T->add16o || !T->maxpool_fwd16o || !T->maxpool_bwd16o) {
        dev_close(d);
        return NULL;
    }
    return d;
}

static struct train_conv geom(int N, int H, int C, int K, int RS, int stride, int pad)
{
    struct train_conv g;
    memset(&g, 0, sizeof g);
    train_conv_set(&g, N, H, H, C, K, RS, RS, stride, pad);
    return g;
}

/* the three convolutions of geometry g: x rt values (fp32x: fp32 values
 * given as fp32 to both, the network's input) */
static void conv_case(struct dev *d, const struct train_conv *g, int fp32x, dtype_t rt)
{
    const struct train_ops *T = d->ops->train;
    plumb_err e = {0};
    const int exact = is_cpu(d);
    const size_t nx = (size_t)g->N * g->H * g->W * g->C, ny = (size_t)g->N * g->P * g->Q * g->K,
                 nw = (size_t)g->K * g->R * g->S * g->C;
    struct t16 x, w, y, dy, dx, dw;
    REQUIRE(!alloc_t(d, &x, nx, fp32x ? 2 : 1, -2, 2, rt) && !alloc_t(d, &w, nw, 1, -0.4f, 0.4f, rt) && !alloc_t(d, &y, ny, 0, 0, 0, rt) &&
            !alloc_t(d, &dy, ny, 1, -1, 1, rt) && !alloc_t(d, &dx, nx, 0, 0, 0, rt) && !alloc_t(d, &dw, nw, 0, 0, 0, rt));
    size_t nmax = nx > ny ? nx : ny;
    nmax = nmax > nw ? nmax : nw;
    float *a = malloc(nmax * sizeof(float)), *b = malloc(nmax * sizeof(float));
    REQUIRE(a && b);
    char what[96];
    snprintf(what, sizeof what, "%dx%d/%d C%d K%d%s", g->R, g->S, g->stride, g->C, g->K, fp32x ? " fp32 x" : "");

    int rc = T->conv2d_fwd(d, NULL, g, x.d, w.d, y.d, rt, &e);
    CHECK_MSG(rc == 0, "conv2d_fwd: %s", e.msg);
    fetch(d, &y, a, NULL, rt);
    rc = T->conv2d_fwd16o(d, NULL, g, fp32x ? x.d : NULL, fp32x ? NULL : x.d16, w.d16, y.d16, rt, &e);
    CHECK_MSG(rc == 0, "conv2d_fwd16o: %s", e.msg);
    fetch(d, &y, NULL, b, rt);
    char lab[160];
    snprintf(lab, sizeof lab, "conv2d_fwd16o y %s", what);
    cmp(lab, a, b, ny, exact, NULL, 1, 0, rt);

    if (!fp32x) { /* the network's input needs no gradient */
        rc = T->conv2d_bwd_data(d, NULL, g, dy.d, w.d, dx.d, rt, &e);
        CHECK_MSG(rc == 0, "conv2d_bwd_data: %s", e.msg);
        fetch(d, &dx, a, NULL, rt);
        rc = T->conv2d_bwd_data16o(d, NULL, g, dy.d16, w.d16, dx.d16, rt, &e);
        CHECK_MSG(rc == 0, "conv2d_bwd_data16o: %s", e.msg);
        fetch(d, &dx, NULL, b, rt);
        snprintf(lab, sizeof lab, "conv2d_bwd_data16o dx %s", what);
        cmp(lab, a, b, nx, exact, NULL, 1, 0, rt);
    }

    rc = T->conv2d_bwd_filter(d, NULL, g, x.d, dy.d, dw.d, rt, &e);
    CHECK_MSG(rc == 0, "conv2d_bwd_filter: %s", e.msg);
    fetch(d, &dw, a, NULL, rt);
    rc = T->conv2d_bwd_filter16o(d, NULL, g, fp32x ? x.d : NULL, fp32x ? NULL : x.d16, dy.d16, dw.d, rt, &e);
    CHECK_MSG(rc == 0, "conv2d_bwd_filter16o: %s", e.msg);
    fetch(d, &dw, b, NULL, rt);
    snprintf(lab, sizeof lab, "conv2d_bwd_filter16o dw %s", what);
    cmp(lab, a, b, nw, exact, NULL, 1, 0, rt);

    /* no x at all is refused, naming the op */
    rc = T->conv2d_fwd16o(d, NULL, g, NULL, NULL, w.d16, y.d16, rt, &e);
    CHECK_MSG(rc == PLUMB_EUSAGE && strstr(e.msg, "conv2d_fwd16o"), "conv2d_fwd16o without x: rc %d (%s)", rc, e.msg);
    free(a), free(b);
    struct t16 *all[] = {&x, &w, &y, &dy, &dx, &dw};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) free_t(d, all[i]);
}

static void bn_case(struct dev *d, dtype_t rt)
{
    const struct train_ops *T = d->ops->train;
    plumb_err e = {0};
    const int exact = is_cpu(d);
    const int C = 24;
    const size_t M = 147, n = M * C;
    struct t16 x, z, y, mask, dy, dym, dx, mean, rstd, gamma, beta, part, dg, db, mdy, dg2, db2;
    REQUIRE(!alloc_t(d, &x, n, 1, -2, 3, rt) && !alloc_t(d, &z, n, 1, -1, 1, rt) && !alloc_t(d, &y, n, 0, 0, 0, rt) &&
            !alloc_t(d, &mask, n, 1, -1, 1, rt) && !alloc_t(d, &dy, n, 1, -1, 1, rt) && !alloc_t(d, &dym, n, 0, 0, 0, rt) &&
            !alloc_t(d, &dx, n, 0, 0, 0, rt) && !alloc_t(d, &mean, C, 0, 0, 0, rt) && !alloc_t(d, &rstd, C, 0, 0, 0, rt) &&
            !alloc_t(d, &gamma, C, 2, 0.5f, 1.5f, rt) && !alloc_t(d, &beta, C, 2, -0.3f, 0.3f, rt) &&
            !alloc_t(d, &part, 2 * C, 0, 0, 0, rt) && !alloc_t(d, &dg, C, 0, 0, 0, rt) && !alloc_t(d, &db, C, 0, 0, 0, rt) &&
            !alloc_t(d, &mdy, 2 * C, 0, 0, 0, rt) && !alloc_t(d, &dg2, C, 0, 0, 0, rt) && !alloc_t(d, &db2, C, 0, 0, 0, rt));
    /* some mask values exactly 0 (relu_bwd passes only > 0) */
    for (size_t i = 0; i < n; i += 7) mask.h[i] = 0.0f;
    put16(d, &mask, mask.h, rt);
    plumb_err ue = {0};
    dev_upload(d, mask.d, mask.h, n * sizeof(float), &ue);
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float)), *pa = malloc(2 * C * sizeof(float));
    double *sx = calloc(2 * C, sizeof(double));
    REQUIRE(a && b && pa && sx);

    /* statistics: the sums of x, then of (x - mean)^2 */
    for (size_t i = 0; i < n; i++) sx[i % C] += fabs(x.h[i]);
    int rc = T->bn_stats(d, NULL, x.d, M, C, NULL, part.d, &e);
    CHECK_MSG(rc == 0, "bn_stats: %s", e.msg);
    fetch(d, &part, pa, NULL, rt);
    rc = T->bn_stats16o(d, NULL, x.d16, M, C, NULL, part.d, rt, &e);
    CHECK_MSG(rc == 0, "bn_stats16o: %s", e.msg);
    fetch(d, &part, b, NULL, rt);
    cmp("bn_stats16o sum", pa, b, C, exact, sx, C, (double)M, rt);
    rc = T->bn_mean(d, NULL, part.d, C, (int64_t)M, mean.d, &e);
    CHECK_MSG(rc == 0, "bn_mean: %s", e.msg);
    float *mh = malloc(C * sizeof(float));
    REQUIRE(mh != NULL);
    fetch(d, &mean, mh, NULL, rt);
    memset(sx, 0, 2 * C * sizeof(double));
    for (size_t i = 0; i < n; i++) sx[i % C] += (x.h[i] - mh[i % C]) * (double)(x.h[i] - mh[i % C]);
    rc = T->bn_stats(d, NULL, x.d, M, C, mean.d, part.d, &e);
    CHECK_MSG(rc == 0, "bn_stats (squares): %s", e.msg);
    fetch(d, &part, pa, NULL, rt);
    rc = T->bn_stats16o(d, NULL, x.d16, M, C, mean.d, part.d, rt, &e);
    CHECK_MSG(rc == 0, "bn_stats16o (squares): %s", e.msg);
    fetch(d, &part, b, NULL, rt);
    cmp("bn_stats16o squares", pa, b, C, exact, sx, C, (double)M, rt);
    rc = T->bn_var(d, NULL, part.d, C, (int64_t)M, 1e-5f, 0.1f, mean.d, rstd.d, NULL, NULL, &e);
    CHECK_MSG(rc == 0, "bn_var: %s", e.msg);

    /* apply: with the residual and the ReLU, and plain */
    for (int v = 0; v < 2; v++) {
        rc = T->bn_apply(d, NULL, x.d, mean.d, rstd.d, gamma.d, beta.d, v ? NULL : z.d, y.d, M, C, !v, rt, &e);
        CHECK_MSG(rc == 0, "bn_apply: %s", e.msg);
        fetch(d, &y, a, NULL, rt);
        rc = T->bn_apply16o(d, NULL, x.d16, mean.d, rstd.d, gamma.d, beta.d, v ? NULL : z.d16, y.d16, M, C, !v, rt, &e);
        CHECK_MSG(rc == 0, "bn_apply16o: %s", e.msg);
        fetch(d, &y, NULL, b, rt);
        cmp(v ? "bn_apply16o y" : "bn_apply16o y (z, relu)", a, b, n, 1, NULL, 1, 0, rt);
    }

    /* a projection block's two BNs in one pass: the two bn_apply16o calls'
     * bits, on every device. The shortcut's z from dy16 with (gamma, beta),
     * of both signs (a ReLU on it would show); the block's BN of x16 with
     * the two swapped (each BN's parameters its own) */
    if (T->bn_apply2_16o) {
        rc = T->bn_apply16o(d, NULL, dy.d16, mean.d, rstd.d, gamma.d, beta.d, NULL, dx.d16, M, C, 0, rt, &e);
        CHECK_MSG(rc == 0, "bn_apply16o (z): %s", e.msg);
        fetch(d, &dx, NULL, a, rt);
        size_t neg = 0;
        for (size_t i = 0; i < n; i++) neg += a[i] < 0.0f;
        CHECK_MSG(neg > 0 && neg < n, "bn_apply2_16o: %zu of %zu shortcut values below 0 (its sign untested)", neg, n);
        rc = T->bn_apply16o(d, NULL, x.d16, mean.d, rstd.d, beta.d, gamma.d, dx.d16, y.d16, M, C, 1, rt, &e);
        CHECK_MSG(rc == 0, "bn_apply16o (y): %s", e.msg);
        fetch(d, &y, NULL, a, rt);
        put16(d, &y, z.h, rt);
        rc = T->bn_apply2_16o(d, NULL, x.d16, mean.d, rstd.d, beta.d, gamma.d, dy.d16, mean.d, rstd.d, gamma.d, beta.d,
                              y.d16, M, C, 1, rt, &e);
        CHECK_MSG(rc == 0, "bn_apply2_16o: %s", e.msg);
        fetch(d, &y, NULL, b, rt);
        size_t pos = 0;
        for (size_t i = 0; i < n; i++) pos += a[i] > 0.0f;
        CHECK_MSG(pos > 0 && pos < n, "bn_apply2_16o: %zu of %zu outputs above 0 (the ReLU untested)", pos, n);
        cmp("bn_apply2_16o y (the two calls' bits)", a, b, n, 1, NULL, 1, 0, rt);
        rc = T->bn_apply2_16o(d, NULL, x.d16, mean.d, rstd.d, beta.d, gamma.d, NULL, mean.d, rstd.d, gamma.d, beta.d,
                              y.d16, M, C, 1, rt, &e);
        CHECK_MSG(rc == PLUMB_EUSAGE && strstr(e.msg, "bn_apply2_16o"), "bn_apply2_16o without zx16: rc %d (%s)", rc,
                  e.msg);
    }

    /* backward: the fp32 ops read relu_bwd(mask, dy) as stored */
    rc = T->relu_bwd(d, NULL, mask.d, dy.d, dym.d, n, &e);
    CHECK_MSG(rc == 0, "relu_bwd: %s", e.msg);
    fetch(d, &dym, dym.h, NULL, rt);
    put16(d, &dym, dym.h, rt); /* the masked gradient as 16 bits too */
    memset(sx, 0, 2 * C * sizeof(double));
    for (size_t i = 0; i < M; i++)
        for (int c = 0; c < C; c++) {
            sx[c] += fabs(dym.h[i * C + c]);
            sx[C + c] += fabs(dym.h[i * C + c]) * fabs((x.h[i * C + c] - mh[c])) * 10.0; /* xhat < 10 |x - mean| here */
        }
    rc = T->bn_bwd_stats(d, NULL, x.d, dym.d, mean.d, rstd.d, M, C, part.d, &e);
    if (!rc) rc = T->bn_bwd_params(d, NULL, x.d, dym.d, mean.d, rstd.d, M, C, dg.d, db.d, &e);
    CHECK_MSG(rc == 0, "bn_bwd_stats / params: %s", e.msg);
    float *pst = malloc(2 * C * sizeof(float)); /* the fp32 op's part */
    REQUIRE(pst != NULL);
    fetch(d, &part, pst, NULL, rt);
    rc = T->bn_bwd_reduce16o(d, NULL, x.d16, dy.d16, mask.d16, NULL, NULL, mean.d, rstd.d, M, C, part.d, dg2.d, db2.d,
                             rt, &e);
    CHECK_MSG(rc == 0, "bn_bwd_reduce16o: %s", e.msg);
    fetch(d, &part, b, NULL, rt);
    cmp("bn_bwd_reduce16o part", pst, b, 2 * (size_t)C, exact, sx, 2 * C, (double)M, rt);
    fetch(d, &dg, pa, NULL, rt);
    fetch(d, &dg2, b, NULL, rt);
    cmp("bn_bwd_reduce16o dgamma", pa, b, C, exact, sx + C, C, (double)M, rt);
    fetch(d, &db, pa, NULL, rt);
    fetch(d, &db2, b, NULL, rt);
    cmp("bn_bwd_reduce16o dbeta", pa, b, C, exact, sx, C, (double)M, rt);
    /* without a mask: dy as it is (a shortcut BN's gradient) */
    rc = T->bn_bwd_reduce16o(d, NULL, x.d16, dym.d16, NULL, NULL, NULL, mean.d, rstd.d, M, C, part.d, dg2.d, db2.d, rt,
                             &e);
    CHECK_MSG(rc == 0, "bn_bwd_reduce16o (no mask): %s", e.msg);
    fetch(d, &part, b, NULL, rt);
    cmp("bn_bwd_reduce16o part (no mask, dy masked before)", pst, b, 2 * (size_t)C, exact, sx, 2 * C, (double)M, rt);

    rc = T->bn_mean(d, NULL, part.d, 2 * C, (int64_t)M, mdy.d, &e);
    CHECK_MSG(rc == 0, "bn_mean (backward): %s", e.msg);
    rc = T->bn_bwd_data(d, NULL, x.d, dym.d, mean.d, rstd.d, gamma.d, mdy.d, dx.d, M, C, rt, &e);
    CHECK_MSG(rc == 0, "bn_bwd_data: %s", e.msg);
    fetch(d, &dx, a, NULL, rt);
    /* in place: dx16 is dy16 */
    rc = T->bn_bwd_data16o(d, NULL, x.d16, dy.d16, mask.d16, NULL, mean.d, rstd.d, gamma.d, mdy.d, dy.d16, M, C, rt,
                           &e);
    CHECK_MSG(rc == 0, "bn_bwd_data16o: %s", e.msg);
    fetch(d, &dy, NULL, b, rt);
    cmp("bn_bwd_data16o dx (in place, masked)", a, b, n, 1, NULL, 1, 0, rt);
    put16(d, &dy, dy.h, rt);

    /* the mask recomputed from x (train_ops.h, mbeta): this BN's own ReLU
     * output as bn_apply16o stored it (no z), read as mask16 or recomputed
     * from x16 and the parameters: the same bits, in both backward passes */
    rc = T->bn_apply16o(d, NULL, x.d16, mean.d, rstd.d, gamma.d, beta.d, NULL, y.d16, M, C, 1, rt, &e);
    CHECK_MSG(rc == 0, "bn_apply16o (own ReLU): %s", e.msg);
    fetch(d, &y, NULL, a, rt);
    size_t off = 0;
    for (size_t i = 0; i < n; i++) off += !(a[i] > 0.0f);
    CHECK_MSG(off > n / 10 && off < n - n / 10, "own ReLU masks %zu of %zu (the check needs both kinds)", off, n);
    float *pm = malloc(2 * C * sizeof(float));
    REQUIRE(pm != NULL);
    for (int k = 0; k < 2; k++) {
        rc = T->bn_bwd_reduce16o(d, NULL, x.d16, dy.d16, k ? NULL : y.d16, gamma.d, k ? beta.d : NULL, mean.d, rstd.d, M,
                                 C, part.d, dg2.d, db2.d, rt, &e);
        CHECK_MSG(rc == 0, "bn_bwd_reduce16o (own ReLU, %s): %s", k ? "recomputed" : "read", e.msg);
        fetch(d, &part, k ? pm : pa, NULL, rt);
    }
    CHECK_MSG(!memcmp(pa, pm, 2 * C * sizeof(float)), "bn_bwd_reduce16o: the recomputed mask's sums differ");
    for (int k = 0; k < 2; k++) {
        put16(d, &dy, dy.h, rt);
        rc = T->bn_bwd_data16o(d, NULL, x.d16, dy.d16, k ? NULL : y.d16, k ? beta.d : NULL, mean.d, rstd.d, gamma.d,
                               mdy.d, dy.d16, M, C, rt, &e);
        CHECK_MSG(rc == 0, "bn_bwd_data16o (own ReLU, %s): %s", k ? "recomputed" : "read", e.msg);
        fetch(d, &dy, NULL, k ? b : a, rt);
    }
    CHECK_MSG(!memcmp(a, b, n * sizeof(float)), "bn_bwd_data16o: the recomputed mask's dx differs");
    /* a mask both given and recomputed is refused */
    CHECK(T->bn_bwd_data16o(d, NULL, x.d16, dy.d16, y.d16, beta.d, mean.d, rstd.d, gamma.d, mdy.d, dy.d16, M, C, rt,
                            &e) != 0);
    CHECK(T->bn_bwd_reduce16o(d, NULL, x.d16, dy.d16, y.d16, gamma.d, beta.d, mean.d, rstd.d, M, C, part.d, dg2.d,
                              db2.d, rt, &e) != 0);
    free(pm);
    put16(d, &dy, dy.h, rt);

    /* add16o: a + relu_bwd(mask, b), in place into a16, and unmasked */
    rc = T->add(d, NULL, z.d, dym.d, y.d, n, 0, rt, &e);
    CHECK_MSG(rc == 0, "add: %s", e.msg);
    fetch(d, &y, a, NULL, rt);
    put16(d, &y, z.h, rt);
    rc = T->add16o(d, NULL, y.d16, dy.d16, mask.d16, NULL, y.d16, n, rt, &e);
    CHECK_MSG(rc == 0, "add16o: %s", e.msg);
    fetch(d, &y, NULL, b, rt);
    cmp("add16o (in place, masked)", a, b, n, 1, NULL, 1, 0, rt);
    /* the sum masked too (ymask16: x, of both signs): relu_bwd(x, the sum) */
    size_t yoff = 0;
    for (size_t i = 0; i < n; i++)
        if (!(x.h[i] > 0.0f)) a[i] = 0.0f, yoff++;
    put16(d, &y, z.h, rt);
    rc = T->add16o(d, NULL, y.d16, dy.d16, mask.d16, x.d16, y.d16, n, rt, &e);
    CHECK_MSG(rc == 0, "add16o (ymask16): %s", e.msg);
    fetch(d, &y, NULL, b, rt);
    CHECK_MSG(yoff > 0 && yoff < n, "ymask16 masks %zu of %zu: not a test of both sides", yoff, n);
    cmp("add16o (in place, masked, the sum masked by ymask16)", a, b, n, 1, NULL, 1, 0, rt);
    rc = T->add(d, NULL, z.d, dy.d, y.d, n, 0, rt, &e);
    fetch(d, &y, a, NULL, rt);
    rc = rc ? rc : T->add16o(d, NULL, z.d16, dy.d16, NULL, NULL, y.d16, n, rt, &e);
    CHECK_MSG(rc == 0, "add16o (no mask): %s", e.msg);
    fetch(d, &y, NULL, b, rt);
    cmp("add16o", a, b, n, 1, NULL, 1, 0, rt);

    /* the max-pool of the ImageNet stem, 3x3/2 pad 1, over x as [3, 7, 7, C] */
    struct train_conv pg = geom(3, 7, C, C, 3, 2, 1);
    const size_t np = (size_t)pg.N * pg.P * pg.Q * C;
    struct t16 py, idx, idx2, pdx;
    REQUIRE(!alloc_t(d, &py, np, 0, 0, 0, rt) && !alloc_t(d, &idx, np, 0, 0, 0, rt) && !alloc_t(d, &idx2, np, 0, 0, 0, rt) &&
            !alloc_t(d, &pdx, n, 0, 0, 0, rt));
    rc = T->maxpool_fwd(d, NULL, &pg, x.d, py.d, (int32_t *)idx.d, &e);
    CHECK_MSG(rc == 0, "maxpool_fwd: %s", e.msg);
    fetch(d, &py, a, NULL, rt);
    rc = T->maxpool_fwd16o(d, NULL, &pg, x.d16, py.d16, (int32_t *)idx2.d, rt, &e);
    CHECK_MSG(rc == 0, "maxpool_fwd16o: %s", e.msg);
    fetch(d, &py, NULL, b, rt);
    cmp("maxpool_fwd16o y", a, b, np, 1, NULL, 1, 0, rt);
    fetch(d, &idx, a, NULL, rt);
    fetch(d, &idx2, b, NULL, rt);
    CHECK_MSG(!memcmp(a, b, np * sizeof(float)), "maxpool_fwd16o %s: the winners' indices differ", dtype_name(rt));
    /* backward: dy of the pool's output shape, the first np values of dy */
    rc = T->maxpool_bwd(d, NULL, &pg, dy.d, (const int32_t *)idx.d, pdx.d, rt, &e);
    CHECK_MSG(rc == 0, "maxpool_bwd: %s", e.msg);
    fetch(d, &pdx, a, NULL, rt);
    rc = T->maxpool_bwd16o(d, NULL, &pg, dy.d16, (const int32_t *)idx.d, pdx.d16, rt, &e);
    CHECK_MSG(rc == 0, "maxpool_bwd16o: %s", e.msg);
    fetch(d, &pdx, NULL, b, rt);
    cmp("maxpool_bwd16o dx", a, b, n, 1, NULL, 1, 0, rt);

    /* a 16-bit type that is not one is refused, naming the op */
    rc = T->bn_apply16o(d, NULL, x.d16, mean.d, rstd.d, gamma.d, beta.d, NULL, y.d16, M, C, 1, DT_F32, &e);
    CHECK_MSG(rc == PLUMB_EUSAGE && strstr(e.msg, "bn_apply16o"), "bn_apply16o with fp32: rc %d (%s)", rc, e.msg);
    rc = T->add16o(d, NULL, x.d16, NULL, NULL, NULL, y.d16, n, rt, &e);
    CHECK_MSG(rc == PLUMB_EUSAGE && strstr(e.msg, "add16o"), "add16o without b16: rc %d (%s)", rc, e.msg);

    free(a), free(b), free(pa), free(pst), free(sx), free(mh);
    struct t16 *all[] = {&x,  &z,    &y,  &mask, &dy,  &dym, &dx, &mean, &rstd, &gamma, &beta,
                        &part, &dg, &db, &mdy, &dg2, &db2, &py, &idx, &idx2, &pdx};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) free_t(d, all[i]);
}

static void ops_case(dtype_t rt)
{
    struct dev *d = open_fast16();
    if (!d) TEST_SKIP("device %s has no 16-bit resnet ops", test_device());
    struct train_conv g1 = geom(3, 7, 8, 16, 3, 1, 1), g2 = geom(2, 9, 3, 8, 3, 2, 1), g3 = geom(2, 6, 16, 32, 1, 2, 0),
                      g4 = geom(2, 5, 24, 8, 1, 1, 0);
    conv_case(d, &g1, 0, rt);
    conv_case(d, &g2, 1, rt); /* the CIFAR stem's input: fp32 x, 3 channels, stride 2 */
    conv_case(d, &g3, 0, rt); /* a projection shortcut: 1x1 stride 2 */
    conv_case(d, &g4, 0, rt); /* 1x1 stride 1: one GEMM on the cpu */
    /* C < 8 from 16-bit x (the forward and weight gradient of cuDNN's path
     * pad the channels to 8: gpu/train_conv.cu), and both C < 8 cases with
     * the padding off: the fp32 op's values within one rt step either way */
    struct train_conv g5 = geom(2, 8, 3, 16, 3, 1, 1);
    conv_case(d, &g5, 0, rt);
    char *keep = env_push("PLUMB_CONV_PAD_C", "0");
    conv_case(d, &g2, 1, rt);
    conv_case(d, &g5, 0, rt);
    env_restore("PLUMB_CONV_PAD_C", keep);
    /* stride 2 with C <= 4 as a stride-1 convolution over 2 x 2 blocks
     * (PLUMB_CONV_S2D, on by default on cuDNN's path: gpu/train_conv.cu):
     * the ImageNet stem's 7 x 7 / 2 pad 3 over an odd and an even size,
     * 3 x 3 / 2, and C 1 (8 channels) and 4 (16); then the stem with it off */
    struct train_conv g6 = geom(2, 16, 3, 8, 7, 2, 3), g7 = geom(2, 11, 3, 8, 7, 2, 3), g8 = geom(2, 10, 1, 8, 3, 2, 1),
                      g9 = geom(2, 9, 4, 16, 5, 2, 2);
    keep = env_push("PLUMB_CONV_S2D", "1");
    conv_case(d, &g6, 1, rt);
    conv_case(d, &g6, 0, rt);
    conv_case(d, &g7, 1, rt);
    conv_case(d, &g2, 1, rt);
    conv_case(d, &g8, 0, rt);
    conv_case(d, &g9, 0, rt);
    env_restore("PLUMB_CONV_S2D", keep);
    keep = env_push("PLUMB_CONV_S2D", "0");
    conv_case(d, &g6, 1, rt);
    conv_case(d, &g7, 0, rt);
    env_restore("PLUMB_CONV_S2D", keep);
    bn_case(d, rt);
    dev_close(d);
}

TEST(resnet16_ops_bf16) { ops_case(DT_BF16); }
TEST(resnet16_ops_fp16) { ops_case(DT_F16); }

/* ---------------- the forward's BN statistics in one pass ----------------
 * bn_stats1p16o + bn_meanvar against float64 statistics of the same 16-bit
 * values (x [M, C]): channel 0 has mean 50 and std 0.5, channel 1 is the
 * constant 7.25 (variance 0), the others spread over [-2, 3) plus c / 10.
 * With d = x - shift (fp32 subtract, one rounding) and u = 2^-24, n = M:
 *   the sums: |s1 - S1| <= n u B, |s2 - S2| <= (n + 3) u A, where S1, S2,
 *     A = sum d^2 and B = sum |d| are float64 of the exact deviations
 *     (one rounding of d, of d * d, and n - 1 adds in any order);
 *   mean = shift + s1 / n: within (n + 2) u (B / n + |mean|);
 *   var = s2 / n - (s1 / n)^2: within (n + 6) u (A / n + 2 (B / n)^2)
 *     (|s1 / n| <= B / n; the clamp at 0 only moves it toward var >= 0);
 *   rstd within the interval of 1 / sqrt(var +- that + eps), widened 4 u;
 *   run_var within 0.1 n / (n - 1) of var's bound, plus 6 u.
 * A shift that is not finite counts as 0 (a poisoned running mean).
 * Shift 0 on channel 0 loses the low bits to cancellation (A / n = 2500 for
 * a variance of 0.25: the bound is about a quarter of it); a shift near the
 * mean (the running mean, as resnet passes it) keeps A / n near the
 * variance. The running mean is the contract's line from the op's own mean
 * (bit for bit), also in place (shift == run_mean: the old shift is read). */
static void onepass_case(dtype_t rt)
{
    struct dev *d = open_fast16();
    if (!d) TEST_SKIP("device %s has no 16-bit resnet ops", test_device());
    const struct train_ops *T = d->ops->train;
    if (!T->bn_stats1p16o || !T->bn_meanvar) {
        dev_close(d);
        TEST_SKIP("device %s has no one-pass BN statistics", test_device());
    }
    plumb_err e = {0};
    enum { C = 24 };
    const size_t M = 147, n = M * C;
    const float epsf = 1e-5f, momf = 0.1f;
    const double u = 0x1p-24, eps = epsf, mom = momf;
    float *xh = malloc(n * sizeof(float));
    REQUIRE(xh != NULL);
    rs16 = 4242;
    for (size_t m = 0; m < M; m++)
        for (int c = 0; c < C; c++) {
            float v = c == 0 ? 50.0f + 0.8660254f * (2 * urand16() - 1) /* std 0.5 */
                    : c == 1 ? 7.25f
                             : -2.0f + 5.0f * urand16() + 0.1f * c;
            xh[m * C + c] = to_rt(v, rt);
        }
    /* float64 statistics of the 16-bit values */
    double mref[C], vref[C];
    for (int c = 0; c < C; c++) {
        double s = 0, q = 0;
        for (size_t m = 0; m < M; m++) s += xh[m * C + c];
        mref[c] = s / (double)M;
        for (size_t m = 0; m < M; m++) q += (xh[m * C + c] - mref[c]) * (xh[m * C + c] - mref[c]);
        vref[c] = q / (double)M;
    }
    CHECK_MSG(fabs(mref[0] - 50) < 0.2 && vref[0] > 0.2 && vref[0] < 0.3 && vref[1] == 0.0,
              "test data: channel 0 mean %g var %g, channel 1 var %g", mref[0], vref[0], vref[1]);
    struct t16 x, shift, part, mean, rstd, rm, rv;
    REQUIRE(!alloc_t(d, &x, n, 0, 0, 0, rt) && !alloc_t(d, &shift, C, 0, 0, 0, rt) &&
            !alloc_t(d, &part, 2 * C, 0, 0, 0, rt) && !alloc_t(d, &mean, C, 0, 0, 0, rt) &&
            !alloc_t(d, &rstd, C, 0, 0, 0, rt) && !alloc_t(d, &rm, C, 0, 0, 0, rt) && !alloc_t(d, &rv, C, 0, 0, 0, rt));
    put16(d, &x, xh, rt);
    float sh[C], p[2 * C], mo[C], ro[C], rm0[C], rv0[C], rm1[C], rv1[C], mo2[C], ro2[C];
    double worst0 = 0, worst_near = 0;
    /* shift: 0 as NULL, 0 as zeros, near the mean, near the mean in place
     * (shift == run_mean), then not finite on channels 0 and 1 (NaN, inf:
     * counted as 0) and near the mean elsewhere */
    for (int k = 0; k < 5; k++) {
        for (int c = 0; c < C; c++) {
            sh[c] = k < 2 ? 0.0f : (float)(mref[c] + 0.01 * (c % 5 - 2) + 0.003);
            if (k == 4 && c < 2) sh[c] = c ? INFINITY : NAN;
            rm0[c] = k == 3 ? sh[c] : 0.25f * c;
            rv0[c] = 1.0f + 0.5f * c;
        }
        plumb_err ue = {0};
        REQUIRE(!dev_upload(d, shift.d, sh, sizeof sh, &ue) && !dev_upload(d, rm.d, rm0, sizeof rm0, &ue) &&
                !dev_upload(d, rv.d, rv0, sizeof rv0, &ue));
        const float *shp = k == 0 ? NULL : k == 3 ? rm.d : shift.d;
        int rc = T->bn_stats1p16o(d, NULL, x.d16, M, C, shp, part.d, rt, &e);
        CHECK_MSG(rc == 0, "bn_stats1p16o: %s", e.msg);
        /* without running statistics first (keep_running), then with */
        rc = rc ? rc : T->bn_meanvar(d, NULL, part.d, C, (int64_t)M, epsf, momf, shp, mean.d, rstd.d, NULL, NULL, &e);
        CHECK_MSG(rc == 0, "bn_meanvar (no running statistics): %s", e.msg);
        fetch(d, &mean, mo2, NULL, rt), fetch(d, &rstd, ro2, NULL, rt);
        rc = rc ? rc : T->bn_meanvar(d, NULL, part.d, C, (int64_t)M, epsf, momf, shp, mean.d, rstd.d, rm.d, rv.d, &e);
        CHECK_MSG(rc == 0, "bn_meanvar: %s", e.msg);
        if (rc) break;
        fetch(d, &part, p, NULL, rt), fetch(d, &mean, mo, NULL, rt), fetch(d, &rstd, ro, NULL, rt);
        fetch(d, &rm, rm1, NULL, rt), fetch(d, &rv, rv1, NULL, rt);
        for (int c = 0; c < C; c++) {
            double S1 = 0, S2 = 0, A = 0, B = 0;
            const double she = isfinite(sh[c]) ? sh[c] : 0.0;
            for (size_t m = 0; m < M; m++) {
                const double dd = (double)xh[m * C + c] - she;
                S1 += dd, S2 += dd * dd, A += dd * dd, B += fabs(dd);
            }
            const double nn = (double)M, tm = (nn + 2) * u * (B / nn + fabs(mref[c])),
                         tv = (nn + 6) * u * (A / nn + 2 * (B / nn) * (B / nn));
            CHECK_MSG(fabs(p[c] - S1) <= nn * u * B, "%s shift %d c%d: sum of d %.9g against %.9g", dtype_name(rt), k,
                      c, p[c], S1);
            CHECK_MSG(fabs(p[C + c] - S2) <= (nn + 3) * u * A, "%s shift %d c%d: sum of d^2 %.9g against %.9g",
                      dtype_name(rt), k, c, p[C + c], S2);
            CHECK_MSG(fabs(mo[c] - mref[c]) <= tm, "%s shift %d c%d: mean %.9g against %.9g (bound %.3g)",
                      dtype_name(rt), k, c, mo[c], mref[c], tm);
            const double rlo = 1 / sqrt(vref[c] + tv + eps) * (1 - 4 * u),
                         rhi = 1 / sqrt(fmax(vref[c] - tv, 0) + eps) * (1 + 4 * u);
            CHECK_MSG(ro[c] >= rlo && ro[c] <= rhi, "%s shift %d c%d: rstd %.9g outside [%.9g, %.9g] (var %.9g, bound %.3g)",
                      dtype_name(rt), k, c, ro[c], rlo, rhi, vref[c], tv);
            CHECK_MSG(!memcmp(&mo[c], &mo2[c], sizeof(float)) && !memcmp(&ro[c], &ro2[c], sizeof(float)),
                      "%s shift %d c%d: mean or rstd differ with running statistics", dtype_name(rt), k, c);
            const float rmw = tv_bn_running(rm0[c], mo[c], momf);
            CHECK_MSG(!memcmp(&rm1[c], &rmw, sizeof(float)), "%s shift %d c%d: run_mean %.9g, expected %.9g",
                      dtype_name(rt), k, c, rm1[c], rmw);
            const double rvw = (1 - mom) * rv0[c] + mom * vref[c] * nn / (nn - 1);
            CHECK_MSG(fabs(rv1[c] - rvw) <= mom * tv * nn / (nn - 1) + 6 * u * fabs(rvw),
                      "%s shift %d c%d: run_var %.9g against %.9g", dtype_name(rt), k, c, rv1[c], rvw);
            /* channel 0's variance error, for the printout */
            if (c == 0 && k < 4) {
                const double vo = 1.0 / ((double)ro[c] * ro[c]) - eps, er = fabs(vo - vref[c]) / vref[c];
                if (k < 2) worst0 = fmax(worst0, er);
                else worst_near = fmax(worst_near, er);
            }
        }
    }
    printf("  %s %s: channel 0 (mean 50, std 0.5) variance from rstd, relative error %.2e with shift 0, %.2e with a "
           "shift near the mean\n", test_device(), dtype_name(rt), worst0, worst_near);
    /* golden numerics are refused by name */
    if (!dev_set_numerics(d, NUMERICS_GOLDEN, 0, &e)) {
        int rc = T->bn_stats1p16o(d, NULL, x.d16, M, C, NULL, part.d, rt, &e);
        CHECK_MSG(rc == PLUMB_EUSAGE && strstr(e.msg, "bn_stats1p16o"), "golden bn_stats1p16o: rc %d (%s)", rc, e.msg);
        rc = T->bn_meanvar(d, NULL, part.d, C, (int64_t)M, 1e-5f, 0.1f, NULL, mean.d, rstd.d, NULL, NULL, &e);
        CHECK_MSG(rc == PLUMB_EUSAGE && strstr(e.msg, "bn_meanvar"), "golden bn_meanvar: rc %d (%s)", rc, e.msg);
    }
    struct t16 *all[] = {&x, &shift, &part, &mean, &rstd, &rm, &rv};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) free_t(d, all[i]);
    free(xh);
    dev_close(d);
}

TEST(resnet16_bn_onepass_stats_bf16) { onepass_case(DT_BF16); }
TEST(resnet16_bn_onepass_stats_fp16) { onepass_case(DT_F16); }

/* ---------------- the model ---------------- */

#define ENV16 "PLUMB_RESNET_ACT16"
/* the mirror path's BN statistics are two passes: the comparisons with it
 * run the pipeline with two passes too (the one-pass trainer test below) */
#define ENV1P "PLUMB_RESNET_BN_ONEPASS"

/* resnet-tiny, 8 steps of 16 through the trainer, PLUMB_RESNET_ACT16 = v */
static int tiny_run(const char *prec, const char *v, struct train_result *tr, plumb_err *e)
{
    const char *w[] = {"--preset", "resnet-tiny", "--device", test_device(), "--precision", prec, "--steps", "8",
                       "--batch", "16", "--eval-every", "0", "--threads", "1", "--health-interval", "0", "--quiet",
                       NULL, NULL};
    return train_with_env("resnet", w, ENV16, v, tr, e);
}

static void trainer_case(const char *prec)
{
    struct dev *d = open_fast16();
    if (!d) TEST_SKIP("device %s has no 16-bit resnet ops", test_device());
    const int cpu = is_cpu(d);
    dev_close(d);
    /* each step's forward (and the final eval's) through the pipeline with 1, none with 0 */
    /* on a GPU 2% of the loss: the 16-bit BN kernels give a thread 8
     * channels (one uint4) where the fp32 ones give 4, so their fp32 sums add
     * in another order and the trajectories drift by rounding (H100,
     * 2026-12-05: bf16 1.8843 against 1.8944, 0.54%, five bf16 unit
     * roundoffs of 2^-8 = 0.39% would be 2%; fp16 0.05%) */
    char *keep = env_push(ENV1P, "0");
    act16_same_as_off(tiny_run, prec, ENV16, &resnet16_forward_count, 8, cpu, 2e-2);
    env_restore(ENV1P, keep);
}

TEST(resnet16_trainer_bf16_same_as_mirror_path) { trainer_case("bf16"); }
TEST(resnet16_trainer_fp16_same_as_mirror_path) { trainer_case("fp16"); }

/* An ImageNet-stem bottleneck net (7x7/2 stem, 3x3/2 max-pool, projection
 * shortcuts, 32x32 images so it stays small), two steps of SGD by hand, then
 * eval predictions: the parameters, gradients and predictions with
 * PLUMB_RESNET_ACT16=1 against 0. */
static int net_run(struct dev *d, const char *v, dtype_t rt, float *grads, double *loss, int32_t *pred, plumb_err *e)
{
    char *keep = env_push(ENV16, v);
    struct resnet_config c = {.stem = RESNET_STEM_IMAGENET, .bottleneck = 1, .stem_width = 8, .n_stages = 2,
                              .blocks = {2, 1}, .width = {4, 8}, .image = 32, .classes = 10};
    struct resnet_model *m = NULL;
    const int B = 6;
    int rc = resnet_create(d, &c, B, rt, &m, e);
    env_restore(ENV16, keep);
    if (!rc) rc = resnet_init(m, 11, e);
    float *x = malloc((size_t)B * 32 * 32 * 3 * sizeof(float));
    int32_t lab[6] = {1, 3, 5, 7, 9, 0};
    if (!x) rc = rc ? rc : PLUMB_ENOMEM;
    rs16 = 77;
    for (int i = 0; x && i < B * 32 * 32 * 3; i++) x[i] = 2 * urand16() - 1;
    const size_t np = rc ? 0 : resnet_n_params(m);
    float *p = np ? malloc(np * sizeof(float)) : NULL;
    for (int step = 0; step < 2 && !rc; step++) {
        struct resnet_batch b = {.B = B, .n_valid = B, .x = x, .labels = lab};
        struct resnet_loss l;
        rc = resnet_forward_backward(m, &b, NULL, 1.0f / B, &l, e);
        *loss = l.sum;
        if (!rc) rc = dev_download(d, grads, resnet_grads(m), np * sizeof(float), e);
        if (!rc) rc = dev_download(d, p, resnet_params(m), np * sizeof(float), e);
        for (size_t i = 0; !rc && i < np; i++) p[i] -= 0.1f * grads[i];
        if (!rc) rc = dev_upload(d, resnet_params(m), p, np * sizeof(float), e);
    }
    struct resnet_batch b = {.B = B, .n_valid = B, .x = x, .labels = lab};
    float pl[6];
    if (!rc) rc = resnet_predict(m, &b, pl, pred, e);
    free(p), free(x);
    resnet_free(m);
    return rc;
}

static void net_case(dtype_t rt)
{
    struct dev *d = open_fast16();
    if (!d) TEST_SKIP("device %s has no 16-bit resnet ops", test_device());
    plumb_err e = {0};
    enum { NP_MAX = 200000 };
    float *g1 = malloc(NP_MAX * sizeof(float)), *g0 = malloc(NP_MAX * sizeof(float));
    REQUIRE(g1 && g0);
    double l1 = 0, l0 = 0;
    int32_t p1[6], p0[6];
    struct resnet_config c = {.stem = RESNET_STEM_IMAGENET, .bottleneck = 1, .stem_width = 8, .n_stages = 2,
                              .blocks = {2, 1}, .width = {4, 8}, .image = 32, .classes = 10};
    size_t np = 0;
    REQUIRE(resnet_config_count_params(&c, &np, &e) == 0 && np < NP_MAX);
    const long f0 = resnet16_forward_count, b0 = resnet16_bn2_count;
    char *keep = env_push(ENV1P, "0");
    int rc = net_run(d, "1", rt, g1, &l1, p1, &e);
    env_restore(ENV1P, keep);
    CHECK_MSG(rc == 0, "PLUMB_RESNET_ACT16=1: %s", e.msg);
    CHECK_MSG(resnet16_forward_count - f0 == 3, "%ld 16-bit forwards (expected 2 steps and 1 predict)",
              resnet16_forward_count - f0);
    /* the two projection blocks' BNs in one pass in each training step (not in predict) */
    if (d->ops->train->bn_apply2_16o)
        CHECK_MSG(resnet16_bn2_count - b0 == 4, "%ld two-BN applies (expected 2 blocks x 2 steps)",
                  resnet16_bn2_count - b0);
    rc = rc ? rc : net_run(d, "0", rt, g0, &l0, p0, &e);
    CHECK_MSG(rc == 0, "PLUMB_RESNET_ACT16=0: %s", e.msg);
    if (!rc && is_cpu(d)) {
        /* the layout's padding between tensors is never written: compare the whole buffer */
        size_t bad = 0;
        for (size_t i = 0; i < np; i++) bad += memcmp(&g1[i], &g0[i], sizeof(float)) != 0;
        CHECK_MSG(bad == 0, "%s: %zu of %zu gradients differ from the mirror path's", dtype_name(rt), bad, np);
        CHECK_MSG(l1 == l0, "loss %.9g against %.9g", l1, l0);
        CHECK(!memcmp(p1, p0, sizeof p1));
    } else if (!rc) {
        CHECK_MSG(fabs(l1 - l0) <= 1e-2 * 6, "loss %.6f against %.6f", l1, l0);
    }
    free(g1), free(g0);
    dev_close(d);
}

TEST(resnet16_imagenet_stem_bf16_same_as_mirror_path) { net_case(DT_BF16); }
TEST(resnet16_imagenet_stem_fp16_same_as_mirror_path) { net_case(DT_F16); }

/* The one-pass BN statistics through the trainer (PLUMB_RESNET_BN_ONEPASS
 * unset: the default) against the two passes ("0"): with the default every
 * training BN layer takes the one-pass ops, with 0 none; the statistics
 * are the same up to fp32 rounding (another formula: E[d^2] - E[d]^2 of the
 * deviations from the running mean, in one sum each), so the trajectories
 * drift apart by rounding like the GPU's reordered sums above: last losses
 * within 2% (resnet-tiny, 8 steps of 16). A value other than 0 or 1 is
 * refused by name. */
static int tiny_1p_run(const char *prec, const char *v, struct train_result *tr, plumb_err *e)
{
    const char *w[] = {"--preset", "resnet-tiny", "--device", test_device(), "--precision", prec, "--steps", "8",
                       "--batch", "16", "--eval-every", "0", "--threads", "1", "--health-interval", "0", "--quiet",
                       NULL, NULL};
    return train_with_env("resnet", w, ENV1P, v, tr, e);
}
TEST(resnet16_bn_onepass_trainer)
{
    struct dev *d = open_fast16();
    if (!d) TEST_SKIP("device %s has no 16-bit resnet ops", test_device());
    const int has = d->ops->train->bn_stats1p16o && d->ops->train->bn_meanvar;
    dev_close(d);
    if (!has) TEST_SKIP("device %s has no one-pass BN statistics", test_device());
    for (int k = 0; k < 2; k++) {
        const char *prec = k ? "fp16" : "bf16";
        struct train_result on, off;
        plumb_err e = {0};
        memset(&on, 0, sizeof on), memset(&off, 0, sizeof off);
        const long c0 = resnet16_bn1p_count;
        int rc = tiny_1p_run(prec, NULL, &on, &e);
        CHECK_MSG(rc == 0, "%s, one pass: %s", prec, e.msg);
        const long c1 = resnet16_bn1p_count;
        rc = rc ? rc : tiny_1p_run(prec, "0", &off, &e);
        CHECK_MSG(rc == 0, "%s, two passes: %s", prec, e.msg);
        if (rc) continue;
        /* resnet-tiny: 7 BN layers or more a forward, 8 training forwards */
        CHECK_MSG(c1 - c0 >= 8 * 7 && resnet16_bn1p_count == c1, "%s: %ld one-pass BN layers by default, %ld with 0",
                  prec, c1 - c0, resnet16_bn1p_count - c1);
        printf("  %s %s: one pass %.16s loss %.6f | two passes %.16s loss %.6f\n", test_device(), prec,
               on.param_digest, on.last_loss, off.param_digest, off.last_loss);
        CHECK_MSG(fabs(on.last_loss - off.last_loss) <= 2e-2 * fabs(off.last_loss), "%s: last loss %.6f against %.6f",
                  prec, on.last_loss, off.last_loss);
    }
    struct train_result bad;
    plumb_err e = {0};
    CHECK(tiny_1p_run("bf16", "yes", &bad, &e) == PLUMB_EUSAGE && strstr(e.msg, "PLUMB_RESNET_BN_ONEPASS=yes"));
}

/* an unknown PLUMB_RESNET_ACT16 is refused at create, named */
/* The BN backward's own ReLU mask recomputed from x16 (the default) or read
 * from the stored ReLU output (PLUMB_RESNET_MASK_FROM_X=0): the same mask,
 * so the same parameters bit for bit, on every device; a value other than
 * 0 or 1 is refused by name */
static int tiny_mask_run(const char *prec, const char *v, struct train_result *tr, plumb_err *e)
{
    const char *w[] = {"--preset", "resnet-tiny", "--device", test_device(), "--precision", prec, "--steps", "6",
                       "--batch", "16", "--eval-every", "0", "--threads", "1", "--health-interval", "0", "--quiet",
                       NULL, NULL};
    return train_with_env("resnet", w, "PLUMB_RESNET_MASK_FROM_X", v, tr, e);
}
TEST(resnet16_mask_from_x_same_bits)
{
    struct dev *d = open_fast16();
    if (!d) TEST_SKIP("device %s has no 16-bit resnet ops", test_device());
    dev_close(d);
    for (int k = 0; k < 2; k++) {
        const char *prec = k ? "fp16" : "bf16";
        struct train_result on, off;
        plumb_err e = {0};
        memset(&on, 0, sizeof on), memset(&off, 0, sizeof off);
        int rc = tiny_mask_run(prec, "1", &on, &e);
        CHECK_MSG(rc == 0, "%s, mask recomputed: %s", prec, e.msg);
        rc = tiny_mask_run(prec, "0", &off, &e);
        CHECK_MSG(rc == 0, "%s, mask read: %s", prec, e.msg);
        printf("  %s %s: mask recomputed %.16s, read %.16s\n", test_device(), prec, on.param_digest, off.param_digest);
        CHECK_MSG(on.param_digest[0] && !strcmp(on.param_digest, off.param_digest), "%s: %s against %s", prec,
                  on.param_digest, off.param_digest);
    }
    struct train_result bad;
    plumb_err e = {0};
    CHECK(tiny_mask_run("bf16", "yes", &bad, &e) == PLUMB_EUSAGE && strstr(e.msg, "PLUMB_RESNET_MASK_FROM_X=yes"));
}

TEST(resnet16_env_value_refused)
{
    struct dev *d = open_fast16();
    if (!d) TEST_SKIP("device %s has no 16-bit resnet ops", test_device());
    char *keep = env_push(ENV16, "yes");
    struct resnet_config c;
    plumb_err e = {0};
    struct resnet_model *m = NULL;
    REQUIRE(resnet_config_preset("resnet-tiny", &c, &e) == 0);
    int rc = resnet_create(d, &c, 2, DT_BF16, &m, &e);
    env_restore(ENV16, keep);
    CHECK_MSG(rc == PLUMB_EUSAGE && strstr(e.msg, "PLUMB_RESNET_ACT16=yes"), "rc %d: %s", rc, e.msg);
    resnet_free(m);
    m = NULL;
    keep = env_push("PLUMB_RESNET_BN_APPLY2", "2");
    rc = resnet_create(d, &c, 2, DT_BF16, &m, &e);
    env_restore("PLUMB_RESNET_BN_APPLY2", keep);
    CHECK_MSG(rc == PLUMB_EUSAGE && strstr(e.msg, "PLUMB_RESNET_BN_APPLY2=2"), "rc %d: %s", rc, e.msg);
    resnet_free(m);
    dev_close(d);
}

/* The 16-bit pipeline allocates no fp32 activations: the model's device
 * memory falls. Per activation element the mirror path holds 4 bytes (plus
 * a 2-byte mirror where a convolution reads it) and fp32 gradient slots; the
 * pipeline 2 bytes and 16-bit slots. The parameters, their gradients and
 * the head are the same in both, so the whole model must hold well under
 * two thirds of the mirror path's bytes at a batch where activations
 * dominate (resnet-tiny, 64 images of 32 x 32: 0.57 measured, the caching
 * allocator's 2 MiB granules for tensors over 1 MiB included). */
static size_t model_bytes(struct dev *d, const char *v, plumb_err *e)
{
    char *keep = env_push(ENV16, v);
    struct resnet_config c;
    struct resnet_model *m = NULL;
    struct dev_mem_stats a, b;
    dev_mem_stats(d, &a);
    int rc = resnet_config_preset("resnet-tiny", &c, e);
    if (!rc) rc = resnet_create(d, &c, 64, DT_BF16, &m, e);
    env_restore(ENV16, keep);
    dev_mem_stats(d, &b);
    int on = m ? resnet_act16(m) : -1;
    resnet_free(m);
    if (rc || on != (v[0] == '1')) return 0;
    return b.allocated - a.allocated;
}

TEST(resnet16_holds_no_fp32_activations)
{
    struct dev *d = open_fast16();
    if (!d) TEST_SKIP("device %s has no 16-bit resnet ops", test_device());
    plumb_err e = {0};
    const size_t on = model_bytes(d, "1", &e), off = model_bytes(d, "0", &e);
    fprintf(stderr, "  resnet-tiny batch 64 bf16: %.2f MiB with 16-bit activations, %.2f MiB with fp32 + mirrors (%.2f)\n",
            on / 1048576.0, off / 1048576.0, off ? (double)on / off : 0.0);
    CHECK_MSG(on > 0 && off > 0, "model sizes %zu and %zu (%s)", on, off, e.msg);
    CHECK_MSG(3 * on < 2 * off, "16-bit activations hold %zu bytes, the mirror path %zu", on, off);
    dev_close(d);
}
