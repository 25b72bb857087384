/* Transformer training ops (dev/train_ops.h, "transformer ops (gpt)"): every
 * forward against a float64 reference written here, every backward against
 * central finite differences of that reference (L = sum R * output with a
 * random R), in both numerics modes; golden results bit-identical across
 * thread counts and equal to the shared definitions (dev/train_gpt_math.h)
 * evaluated here; fast within stated bounds of golden; adamw_masked equal to
 * adamw per range. Runs on test_device() through device memory, so a GPU
 * backend runs it too (PLUMB_TEST_DEVICE=cuda). */
#include "test.h"
#include "attn_ref.h"
#include "train_env.h"
#include "dev/cpu_train_gpt.h"
#include "dev/dev.h"
#include "dev/train_gpt_math.h"
#include "dev/train_ops.h"
#include <stdint.h>
#include <stdlib.h>

/* ---- helpers ---- */
static uint64_t rs = 0x51ed2701a3c94f1dull;
static double urand(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (double)(rs >> 11) * (1.0 / 9007199254740992.0);
}
/* The host buffers of the running test (frand, dcopy, get and the tests'
 * own arrays go through keep): done() frees them all with the device. A
 * test stopped early by a REQUIRE leaves its buffers to the next done(). */
static void **scratch;
static size_t n_scratch, cap_scratch;
static void *keep(void *p)
{
    if (!p || (n_scratch == cap_scratch &&
               !(scratch = realloc(scratch, (cap_scratch = cap_scratch ? 2 * cap_scratch : 64) * sizeof *scratch)))) {
        fprintf(stderr, "test_train_gpt_ops: out of host memory\n");
        abort();
    }
    scratch[n_scratch++] = p;
    return p;
}
static void done(struct dev *d)
{
    if (d) dev_close(d);
    for (size_t i = 0; i < n_scratch; i++) free(scratch[i]);
    n_scratch = 0;
}
static float *frand(size_t n, double lo, double hi)
{
    float *x = keep(malloc(n * sizeof(float) + 16));
    for (size_t i = 0; i < n; i++) x[i] = (float)(lo + (hi - lo) * urand());
    return x;
}
static double *dcopy(const float *x, size_t n)
{
    double *y = keep(malloc(n * sizeof(double) + 16));
    for (size_t i = 0; i < n; i++) y[i] = x[i];
    return y;
}

static struct dev *open_mode(enum numerics mode, int threads)
{
    struct dev *d = NULL;
    plumb_err e = {0};
    if (dev_open(test_device(), &d, &e)) return NULL;
    if (dev_set_numerics(d, mode, 0, &e) || !d->ops->train || !d->ops->train->attention_fwd) {
        dev_close(d);
        return NULL;
    }
    d->threads = threads;
    return d;
}
#define OPEN(d, mode, thr)                                                                          \
    struct dev *d = open_mode(mode, thr);                                                           \
    if (!d) TEST_SKIP("device %s has no transformer training ops", test_device());

static void *put(struct dev *d, const void *h, size_t bytes)
{
    void *p = NULL;
    plumb_err e = {0};
    if (dev_alloc(d, bytes ? bytes : 4, &p, &e)) return NULL;
    if (h && bytes) dev_upload(d, p, h, bytes, &e);
    else if (bytes) {
        void *z = calloc(1, bytes);
        dev_upload(d, p, z, bytes, &e);
        free(z);
    }
    return p;
}
static float *get(struct dev *d, const void *p, size_t n)
{
    float *h = keep(malloc(n * sizeof(float) + 16));
    plumb_err e = {0};
    dev_sync(d, &e);
    dev_download(d, h, p, n * sizeof(float), &e);
    return h;
}
static double rel_err(double a, double b) { return fabs(a - b) / fmax(1e-3, fmax(fabs(a), fabs(b))); }
static int same_bits(const float *a, const float *b, size_t n) { return !memcmp(a, b, n * sizeof(float)); }
static double max_rel(const float *a, const float *b, size_t n, double floor_)
{
    double w = 0;
    for (size_t i = 0; i < n; i++) w = fmax(w, fabs((double)a[i] - b[i]) / fmax(floor_, fabs((double)b[i])));
    return w;
}
/* the worst relative error of g[] against the central difference of f at x[] */
typedef double (*lossfn)(void *ctx);
static size_t fd_stride = 1; /* check every fd_stride-th element (large cases) */
static double fd_worst(double *x, size_t n, const float *g, lossfn f, void *ctx)
{
    const double h = 1e-6;
    double worst = 0;
    for (size_t i = 0; i < n; i += fd_stride) {
        const double s = x[i];
        x[i] = s + h;
        const double lp = f(ctx);
        x[i] = s - h;
        const double lm = f(ctx);
        x[i] = s;
        worst = fmax(worst, rel_err(g[i], (lp - lm) / (2 * h)));
    }
    return worst;
}
static double gelu_d(double x) { return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

/* ================= layernorm ================= */

struct ln_ctx {
    double *x, *w, *b, *R;
    int Rn, C;
};
static double ln_ref(void *p)
{
    struct ln_ctx *c = p;
    double L = 0;
    for (int r = 0; r < c->Rn; r++) {
        const double *x = c->x + r * c->C;
        double mu = 0, var = 0;
        for (int i = 0; i < c->C; i++) mu += x[i];
        mu /= c->C;
        for (int i = 0; i < c->C; i++) var += (x[i] - mu) * (x[i] - mu);
        var /= c->C;
        const double rstd = 1 / sqrt(var + 1e-5);
        for (int i = 0; i < c->C; i++) L += c->R[r * c->C + i] * ((x[i] - mu) * rstd * c->w[i] + c->b[i]);
    }
    return L;
}

static void check_layernorm(enum numerics mode)
{
    OPEN(d, mode, 0);
    enum { Rn = 6, C = 37 };
    float *x = frand(Rn * C, -2, 2), *w = frand(C, 0.5, 1.5), *b = frand(C, -0.5, 0.5), *R = frand(Rn * C, -1, 1);
    float *dres = frand(Rn * C, -1, 1);
    float *px = put(d, x, sizeof(float) * Rn * C), *pw = put(d, w, sizeof(float) * C), *pb = put(d, b, sizeof(float) * C);
    float *py = put(d, NULL, sizeof(float) * Rn * C), *pm = put(d, NULL, sizeof(float) * Rn), *pr = put(d, NULL, sizeof(float) * Rn);
    float *pR = put(d, R, sizeof(float) * Rn * C), *pdx = put(d, dres, sizeof(float) * Rn * C);
    float *pdw = put(d, NULL, sizeof(float) * C), *pdb = put(d, NULL, sizeof(float) * C);
    plumb_err e = {0};
    const struct train_ops *T = d->ops->train;
    REQUIRE(T->layernorm_fwd(d, NULL, px, pw, pb, py, pm, pr, Rn, C, 1e-5f, DT_F32, &e) == 0);
    /* dx accumulated in place onto dres */
    REQUIRE(T->layernorm_bwd(d, NULL, px, pw, pm, pr, pR, pdx, pdx, pdw, pdb, Rn, C, DT_F32, &e) == 0);
    float *y = get(d, py, Rn * C), *dx = get(d, pdx, Rn * C), *dw = get(d, pdw, C), *db = get(d, pdb, C);
    struct ln_ctx c = {dcopy(x, Rn * C), dcopy(w, C), dcopy(b, C), dcopy(R, Rn * C), Rn, C};
    /* forward: y . e_k = dL/dR_k; check y directly */
    double worst = 0;
    for (int r = 0; r < Rn; r++) {
        double mu = 0, var = 0;
        for (int i = 0; i < C; i++) mu += c.x[r * C + i];
        mu /= C;
        for (int i = 0; i < C; i++) var += (c.x[r * C + i] - mu) * (c.x[r * C + i] - mu);
        double rstd = 1 / sqrt(var / C + 1e-5);
        for (int i = 0; i < C; i++) worst = fmax(worst, fabs(y[r * C + i] - ((c.x[r * C + i] - mu) * rstd * w[i] + b[i])));
    }
    CHECK_MSG(worst < 2e-6, "layernorm forward worst abs error %g", worst);
    for (int i = 0; i < Rn * C; i++) dx[i] -= dres[i]; /* the part layernorm added */
    double wx = fd_worst(c.x, Rn * C, dx, ln_ref, &c);
    double ww = fd_worst(c.w, C, dw, ln_ref, &c), wb = fd_worst(c.b, C, db, ln_ref, &c);
    CHECK_MSG(wx < 2e-4 && ww < 1e-4 && wb < 1e-5, "layernorm gradients: dx %g dw %g db %g", wx, ww, wb);
    done(d);
}
TEST(gpt_ops_layernorm_fd_fast) { check_layernorm(NUMERICS_FAST); }
TEST(gpt_ops_layernorm_fd_golden) { check_layernorm(NUMERICS_GOLDEN); }

/* ================= matmul (+ GELU) ================= */

/* L = sum R * (gelu(pre) w^T + bias) with pre the input, or of
 * gelu(x w^T + bias) (fwd_gelu) */
struct mm_ctx {
    double *x, *w, *b, *R;
    int B, K, N, in_gelu, out_gelu;
};
static double mm_ref(void *p)
{
    struct mm_ctx *c = p;
    double L = 0;
    for (int b = 0; b < c->B; b++)
        for (int n = 0; n < c->N; n++) {
            double a = c->b[n];
            for (int k = 0; k < c->K; k++) {
                double xv = c->x[b * c->K + k];
                a += (c->in_gelu ? gelu_d(xv) : xv) * c->w[n * c->K + k];
            }
            L += c->R[b * c->N + n] * (c->out_gelu ? gelu_d(a) : a);
        }
    return L;
}

static void check_matmul(enum numerics mode)
{
    OPEN(d, mode, 0);
    enum { B = 9, K = 13, N = 11 };
    float *pre = frand(B * K, -3, 3), *w = frand(N * K, -0.5, 0.5), *b = frand(N, -0.3, 0.3), *R = frand(B * N, -1, 1);
    plumb_err e = {0};
    const struct train_ops *T = d->ops->train;
    /* x = gelu(pre) through the op itself (an identity GEMM would do too:
     * here a matmul_fwd with gelu from an identity weight) */
    float *eye = keep(calloc(K * K, sizeof(float)));
    for (int i = 0; i < K; i++) eye[i * K + i] = 1.0f;
    float *ppre_in = put(d, pre, sizeof(float) * B * K), *peye = put(d, eye, sizeof(float) * K * K);
    float *ppre = put(d, NULL, sizeof(float) * B * K), *px = put(d, NULL, sizeof(float) * B * K);
    REQUIRE(T->matmul_fwd(d, NULL, ppre_in, peye, NULL, px, ppre, B, K, K, 1, DT_F32, &e) == 0);
    float *x = get(d, px, B * K), *pre2 = get(d, ppre, B * K);
    CHECK(same_bits(pre2, pre, B * K)); /* identity: the pre-activation is the input */
    double worst = 0;
    for (int i = 0; i < B * K; i++) worst = fmax(worst, rel_err(x[i], gelu_d(pre[i])));
    CHECK_MSG(worst < 3e-5, "gelu forward worst relative error %g", worst);
    float *pw = put(d, w, sizeof(float) * N * K), *pb = put(d, b, sizeof(float) * N), *py = put(d, NULL, sizeof(float) * B * N);
    float *pR = put(d, R, sizeof(float) * B * N), *pdx = put(d, NULL, sizeof(float) * B * K);
    float *pdw = put(d, NULL, sizeof(float) * N * K), *pdb = put(d, NULL, sizeof(float) * N);
    REQUIRE(T->matmul_fwd(d, NULL, px, pw, pb, py, NULL, B, K, N, 0, DT_F32, &e) == 0);
    float *y = get(d, py, B * N);
    struct mm_ctx c = {dcopy(pre, B * K), dcopy(w, N * K), dcopy(b, N), dcopy(R, B * N), B, K, N, 1, 0};
    worst = 0;
    for (int bb = 0; bb < B; bb++)
        for (int n = 0; n < N; n++) {
            double a = b[n];
            for (int k = 0; k < K; k++) a += (double)x[bb * K + k] * w[n * K + k];
            worst = fmax(worst, fabs(a - y[bb * N + n]));
        }
    CHECK_MSG(worst < 1e-5, "matmul forward worst abs error %g", worst);
    REQUIRE(T->matmul_bwd(d, NULL, px, pw, pR, ppre, pdx, pdw, pdb, B, K, N, DT_F32, &e) == 0);
    float *dx = get(d, pdx, B * K), *dw = get(d, pdw, N * K), *db = get(d, pdb, N);
    double wx = fd_worst(c.x, B * K, dx, mm_ref, &c), ww = fd_worst(c.w, N * K, dw, mm_ref, &c);
    double wb = fd_worst(c.b, N, db, mm_ref, &c);
    CHECK_MSG(wx < 1e-4 && ww < 1e-4 && wb < 1e-5, "matmul gradients (GELU fused into dx): dx %g dw %g db %g", wx, ww, wb);
    /* the forward GELU's own gradient: L = sum R * gelu(x w^T + b) */
    float *ppre2 = put(d, NULL, sizeof(float) * B * N), *pdx2 = put(d, NULL, sizeof(float) * B * K);
    REQUIRE(T->matmul_fwd(d, NULL, px, pw, pb, py, ppre2, B, K, N, 1, DT_F32, &e) == 0);
    /* dL/da = R * gelu'(a): an identity GEMM's dx fused with pre_in = a */
    float *peyeN = put(d, NULL, sizeof(float) * N * N), *eyeN = keep(calloc(N * N, sizeof(float)));
    for (int i = 0; i < N; i++) eyeN[i * N + i] = 1.0f;
    dev_upload(d, peyeN, eyeN, sizeof(float) * N * N, &e);
    float *pda = put(d, NULL, sizeof(float) * B * N), *pdwI = put(d, NULL, sizeof(float) * N * N);
    REQUIRE(T->matmul_bwd(d, NULL, py, peyeN, pR, ppre2, pda, pdwI, NULL, B, N, N, DT_F32, &e) == 0);
    REQUIRE(T->matmul_bwd(d, NULL, px, pw, pda, NULL, pdx2, pdw, pdb, B, K, N, DT_F32, &e) == 0);
    float *dx2 = get(d, pdx2, B * K), *dw2 = get(d, pdw, N * K);
    struct mm_ctx c2 = {dcopy(x, B * K), dcopy(w, N * K), dcopy(b, N), dcopy(R, B * N), B, K, N, 0, 1};
    wx = fd_worst(c2.x, B * K, dx2, mm_ref, &c2);
    ww = fd_worst(c2.w, N * K, dw2, mm_ref, &c2);
    CHECK_MSG(wx < 3e-4 && ww < 3e-4, "gelu matmul gradients: dx %g dw %g", wx, ww);
    done(d);
}
TEST(gpt_ops_matmul_gelu_fd_fast) { check_matmul(NUMERICS_FAST); }
TEST(gpt_ops_matmul_gelu_fd_golden) { check_matmul(NUMERICS_GOLDEN); }

/* ================= attention ================= */

struct at_ctx {
    double *qkv, *R;
    int B, T, NH, HS;
    double *out, *lse; /* written by the reference when not NULL */
};
static double at_ref(void *p)
{
    struct at_ctx *c = p;
    const int C = c->NH * c->HS, C3 = 3 * C;
    const double scale = 1 / sqrt((double)c->HS);
    double L = 0, *s = malloc(sizeof(double) * c->T);
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < c->NH; h++)
            for (int t = 0; t < c->T; t++) {
                const double *q = c->qkv + ((size_t)b * c->T + t) * C3 + h * c->HS;
                double m = -1e300, l = 0;
                for (int j = 0; j <= t; j++) {
                    const double *k = c->qkv + ((size_t)b * c->T + j) * C3 + C + h * c->HS;
                    double a = 0;
                    for (int i = 0; i < c->HS; i++) a += q[i] * k[i];
                    s[j] = a * scale;
                    m = fmax(m, s[j]);
                }
                for (int j = 0; j <= t; j++) l += exp(s[j] - m);
                if (c->lse) c->lse[((size_t)b * c->NH + h) * c->T + t] = m + log(l);
                for (int i = 0; i < c->HS; i++) {
                    double o = 0;
                    for (int j = 0; j <= t; j++)
                        o += exp(s[j] - m) / l * c->qkv[((size_t)b * c->T + j) * C3 + 2 * C + h * c->HS + i];
                    const size_t oi = ((size_t)b * c->T + t) * C + h * c->HS + i;
                    if (c->out) c->out[oi] = o;
                    L += c->R[oi] * o;
                }
            }
    free(s);
    return L;
}

static void check_attention(enum numerics mode, int B, int T, int NH, int HS, double tol_fwd, double tol_bwd)
{
    OPEN(d, mode, 0);
    const int C = NH * HS;
    const size_t n3 = (size_t)B * T * 3 * C, n1 = (size_t)B * T * C;
    float *qkv = frand(n3, -1.5, 1.5), *R = frand(n1, -1, 1);
    float *pq = put(d, qkv, n3 * 4), *po = put(d, NULL, n1 * 4), *pl = put(d, NULL, (size_t)B * NH * T * 4);
    float *pR = put(d, R, n1 * 4), *pdq = put(d, NULL, n3 * 4);
    plumb_err e = {0};
    const struct train_ops *Tp = d->ops->train;
    REQUIRE(Tp->attention_fwd(d, NULL, pq, po, pl, B, T, NH, HS, DT_F32, &e) == 0);
    REQUIRE(Tp->attention_bwd(d, NULL, pq, po, pl, pR, pdq, B, T, NH, HS, DT_F32, &e) == 0);
    float *out = get(d, po, n1), *lse = get(d, pl, (size_t)B * NH * T), *dq = get(d, pdq, n3);
    struct at_ctx c = {dcopy(qkv, n3), dcopy(R, n1), B, T, NH, HS, keep(malloc(n1 * 8)), keep(malloc((size_t)B * NH * T * 8))};
    at_ref(&c);
    double wo = 0, wl = 0;
    for (size_t i = 0; i < n1; i++) wo = fmax(wo, fabs(out[i] - c.out[i]));
    for (size_t i = 0; i < (size_t)B * NH * T; i++) wl = fmax(wl, fabs(lse[i] - c.lse[i]));
    CHECK_MSG(wo < tol_fwd && wl < tol_fwd, "attention B%d T%d NH%d HS%d: out %g lse %g", B, T, NH, HS, wo, wl);
    c.out = c.lse = NULL;
    fd_stride = n3 > 2000 ? 17 : 1;
    double wg = fd_worst(c.qkv, n3, dq, at_ref, &c);
    fd_stride = 1;
    CHECK_MSG(wg < tol_bwd, "attention B%d T%d NH%d HS%d: dqkv worst relative error %g", B, T, NH, HS, wg);
    done(d);
}
TEST(gpt_ops_attention_fd_fast) { check_attention(NUMERICS_FAST, 2, 7, 2, 5, 2e-6, 2e-4); }
TEST(gpt_ops_attention_fd_golden) { check_attention(NUMERICS_GOLDEN, 2, 7, 2, 5, 2e-6, 2e-4); }
/* longer than one GPU tile of queries and keys, head width 16 */
TEST(gpt_ops_attention_fd_tiles) { check_attention(NUMERICS_FAST, 1, 67, 2, 16, 2e-6, 5e-4); }

/* ================= encoder, residual ================= */

/* C = 10, and C = 12 (a GPU's four-values-a-thread encoder) */
static void check_encoder(enum numerics mode, int C)
{
    OPEN(d, mode, 0);
    enum { B = 3, T = 9, V = 7 };
    float *wte = frand(V * C, -1, 1), *wpe = frand((T + 2) * C, -1, 1), *dout = frand(B * T * C, -1, 1);
    float *dwte0 = frand(V * C, -1, 1);
    int32_t tok[B * T];
    for (int i = 0; i < B * T; i++) tok[i] = (int32_t)(urand() * (V - 1)); /* token V-1 never appears */
    float *pwte = put(d, wte, sizeof(float) * V * C), *pwpe = put(d, wpe, sizeof(float) * (T + 2) * C);
    int32_t *ptok = put(d, tok, sizeof tok);
    float *po = put(d, NULL, sizeof(float) * B * T * C), *pg = put(d, dout, sizeof(float) * B * T * C);
    float *pdwte = put(d, dwte0, sizeof(float) * V * C), *pdwpe = put(d, NULL, sizeof(float) * (T + 2) * C);
    plumb_err e = {0};
    const struct train_ops *Tp = d->ops->train;
    REQUIRE(Tp->encoder_fwd(d, NULL, pwte, pwpe, ptok, po, B, T, C, DT_BF16, &e) == 0);
    REQUIRE(Tp->encoder_bwd(d, NULL, pg, ptok, pdwte, pdwpe, B, T, C, &e) == 0);
    float *out = get(d, po, B * T * C), *dwte = get(d, pdwte, V * C), *dwpe = get(d, pdwpe, T * C);
    int bad = 0;
    for (int p = 0; p < B * T; p++)
        for (int c = 0; c < C; c++)
            bad += f32_bits(out[p * C + c]) != f32_bits(gg_round(wte[tok[p] * C + c] + wpe[(p % T) * C + c], DT_BF16));
    CHECK_EQ_INT(bad, 0);
    double worst = 0;
    for (int v = 0; v < V; v++)
        for (int c = 0; c < C; c++) {
            double s = 0;
            int any = 0;
            for (int p = 0; p < B * T; p++)
                if (tok[p] == v) {
                    s += dout[p * C + c];
                    any = 1;
                }
            if (!any) CHECK(f32_bits(dwte[v * C + c]) == f32_bits(dwte0[v * C + c])); /* untouched */
            worst = fmax(worst, fabs(dwte[v * C + c] - (dwte0[v * C + c] + s)));
        }
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++) {
            double s = 0;
            for (int b = 0; b < B; b++) s += dout[(b * T + t) * C + c];
            worst = fmax(worst, fabs(dwpe[t * C + c] - s));
        }
    CHECK_MSG(worst < 1e-5, "encoder gradients worst abs error %g", worst);
    /* the golden order: dwpe one chain over b; dwte one chain in ascending position, then one add */
    if (mode == NUMERICS_GOLDEN) {
        bad = 0;
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++) {
                float s = 0;
                for (int b = 0; b < B; b++) s = s + dout[(b * T + t) * C + c];
                bad += f32_bits(s) != f32_bits(dwpe[t * C + c]);
            }
        for (int v = 0; v < V - 1; v++)
            for (int c = 0; c < C; c++) {
                float s = 0;
                int any = 0;
                for (int p = 0; p < B * T; p++)
                    if (tok[p] == v) {
                        s = s + dout[p * C + c];
                        any = 1;
                    }
                if (any) bad += f32_bits(dwte0[v * C + c] + s) != f32_bits(dwte[v * C + c]);
            }
        CHECK_EQ_INT(bad, 0);
    }
    float *a = frand(50, -1, 1), *bb = frand(50, -1, 1);
    float *pa = put(d, a, 200), *pb = put(d, bb, 200);
    REQUIRE(Tp->residual_fwd(d, NULL, pa, pb, pa, 50, DT_F16, &e) == 0); /* in place */
    float *y = get(d, pa, 50);
    bad = 0;
    for (int i = 0; i < 50; i++) bad += f32_bits(y[i]) != f32_bits(gg_round(a[i] + bb[i], DT_F16));
    CHECK_EQ_INT(bad, 0);
    done(d);
}
TEST(gpt_ops_encoder_residual_fast) { check_encoder(NUMERICS_FAST, 10); }
TEST(gpt_ops_encoder_residual_golden) { check_encoder(NUMERICS_GOLDEN, 10); }
TEST(gpt_ops_encoder_residual_fast_c12) { check_encoder(NUMERICS_FAST, 12); }

/* ================= classifier + cross-entropy ================= */

struct xe_ctx {
    double *x, *w;
    const int32_t *tgt;
    int R, C, V;
    double gs;
};
static double xe_ref(void *p)
{
    struct xe_ctx *c = p;
    double L = 0, *z = malloc(sizeof(double) * c->V);
    for (int r = 0; r < c->R; r++) {
        if (c->tgt[r] < 0) continue;
        double m = -1e300, l = 0;
        for (int v = 0; v < c->V; v++) {
            double a = 0;
            for (int k = 0; k < c->C; k++) a += c->x[r * c->C + k] * c->w[v * c->C + k];
            z[v] = a;
            m = fmax(m, a);
        }
        for (int v = 0; v < c->V; v++) l += exp(z[v] - m);
        L += (m + log(l) - z[c->tgt[r]]) * c->gs;
    }
    free(z);
    return L;
}

static void check_classifier(enum numerics mode)
{
    OPEN(d, mode, 0);
    enum { R = 11, C = 9, V = 23, Vp = 24 };
    float *x = frand(R * C, -1, 1), *w = frand(Vp * C, -1, 1);
    int32_t tgt[R];
    for (int r = 0; r < R; r++) tgt[r] = r % 4 == 3 ? -1 : (int32_t)(urand() * V);
    const float gs = 1.0f / 8.0f;
    float *px = put(d, x, sizeof(float) * R * C), *pw = put(d, w, sizeof(float) * Vp * C);
    int32_t *pt = put(d, tgt, sizeof tgt);
    float *pl = put(d, NULL, sizeof(float) * R), *pdx = put(d, NULL, sizeof(float) * R * C);
    float *pdw = put(d, NULL, sizeof(float) * V * C);
    double *psc = put(d, NULL, 2 * sizeof(double));
    plumb_err e = {0};
    const struct train_ops *Tp = d->ops->train;
    REQUIRE(Tp->classifier_fwd_bwd(d, NULL, px, pw, pt, R, C, V, gs, pl, psc, pdx, pdw, DT_F32, &e) == 0);
    float *loss = get(d, pl, R), *dx = get(d, pdx, R * C), *dw = get(d, pdw, V * C);
    double sc[2];
    dev_download(d, sc, psc, sizeof sc, &e);
    struct xe_ctx c = {dcopy(x, R * C), dcopy(w, Vp * C), tgt, R, C, V, 1.0};
    double tot = 0;
    int valid = 0;
    for (int r = 0; r < R; r++) {
        if (tgt[r] < 0) {
            CHECK(loss[r] == 0.0f);
            continue;
        }
        valid++;
        int32_t one[1] = {tgt[r]};
        struct xe_ctx cr = {c.x + r * C, c.w, one, 1, C, V, 1.0};
        double lr = xe_ref(&cr);
        CHECK_NEAR(loss[r], lr, 2e-6 * fmax(1, lr));
        tot += loss[r];
    }
    CHECK_EQ_INT((long)sc[1], valid);
    /* the op's contract: the double chain of the valid losses in ascending r, bit for bit */
    CHECK_MSG(sc[0] == tot, "loss sum %.17g, the chain %.17g", sc[0], tot);
    c.gs = gs;
    double wx = fd_worst(c.x, R * C, dx, xe_ref, &c), ww = fd_worst(c.w, V * C, dw, xe_ref, &c);
    CHECK_MSG(wx < 1e-4 && ww < 1e-4, "classifier gradients: dx %g dwte %g", wx, ww);
    for (int r = 0; r < R; r++)
        if (tgt[r] < 0)
            for (int k = 0; k < C; k++) CHECK(dx[r * C + k] == 0.0f);
    /* forward only: the same losses, nothing else written */
    float *pl2 = put(d, NULL, sizeof(float) * R);
    REQUIRE(Tp->classifier_fwd_bwd(d, NULL, px, pw, pt, R, C, V, gs, pl2, NULL, NULL, NULL, DT_F32, &e) == 0);
    float *loss2 = get(d, pl2, R);
    if (mode == NUMERICS_GOLDEN) CHECK(same_bits(loss, loss2, R));
    else CHECK(max_rel(loss2, loss, R, 1e-3) < 1e-5);
    done(d);
}
TEST(gpt_ops_classifier_fd_fast) { check_classifier(NUMERICS_FAST); }
/* the loss sum over many rows (a GPU sums them in threads where no add of the
 * chain rounds): the chain's bits and count, in both modes; then a row's
 * loss far below the rest (the chain's rounding decides) */
static void check_loss_sum(enum numerics mode)
{
    OPEN(d, mode, 0);
    enum { R = 5003, C = 8, V = 16 };
    float *x = frand(R * C, -2, 2), *w = frand(V * C, -2, 2);
    int32_t *tgt = keep(malloc(sizeof(int32_t) * R));
    for (int r = 0; r < R; r++) tgt[r] = r % 9 == 4 ? -1 : (int32_t)(urand() * V);
    float *px = put(d, x, sizeof(float) * R * C), *pw = put(d, w, sizeof(float) * V * C);
    int32_t *pt = put(d, tgt, sizeof(int32_t) * R);
    float *pl = put(d, NULL, sizeof(float) * R);
    double *psc = put(d, NULL, 2 * sizeof(double));
    plumb_err e = {0};
    const struct train_ops *Tp = d->ops->train;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            /* row 0 nearly certain of its target (logits 8 against -8): a loss near 2e-6
             * beside thousands near 2 */
            for (int k = 0; k < C; k++) x[k] = 0.0f;
            x[0] = 1.0f;
            for (int v = 0; v < V; v++) w[v * C] = v == tgt[0] ? 8.0f : -8.0f;
            dev_upload(d, px, x, sizeof(float) * R * C, &e);
            dev_upload(d, pw, w, sizeof(float) * V * C, &e);
        }
        REQUIRE(Tp->classifier_fwd_bwd(d, NULL, px, pw, pt, R, C, V, 1.0f / R, pl, psc, NULL, NULL, DT_F32, &e) == 0);
        float *loss = get(d, pl, R);
        double sc[2], tot = 0.0;
        long valid = 0;
        dev_download(d, sc, psc, sizeof sc, &e);
        for (int r = 0; r < R; r++)
            if (tgt[r] >= 0) tot += (double)loss[r], valid++;
        CHECK_EQ_INT((long)sc[1], valid);
        CHECK_MSG(sc[0] == tot, "pass %d: loss sum %.17g, the chain %.17g (row 0's loss %g)", pass, sc[0], tot,
                  (double)loss[0]);
    }
    done(d);
}
TEST(gpt_ops_loss_sum_chain_fast) { check_loss_sum(NUMERICS_FAST); }
TEST(gpt_ops_loss_sum_chain_golden) { check_loss_sum(NUMERICS_GOLDEN); }
/* many row chunks (a 3-row logits scratch): golden the same bits as one
 * chunk (the dwte chains continue across chunks), fast within 1e-5 (the chunk sums reassociate) */
TEST(gpt_ops_classifier_chunks)
{
    if (strncmp(test_device(), "cpu", 3)) TEST_SKIP("the chunk size hook is the cpu backend's");
    for (int mode = 0; mode < 2; mode++) {
        OPEN(d, (enum numerics)mode, 0);
        enum { R = 20, C = 8, V = 13 };
        float *x = frand(R * C, -1, 1), *w = frand(V * C, -1, 1);
        int32_t tgt[R];
        for (int r = 0; r < R; r++) tgt[r] = r == 7 ? -1 : (int32_t)(urand() * V);
        float *px = put(d, x, sizeof(float) * R * C), *pw = put(d, w, sizeof(float) * V * C);
        int32_t *pt = put(d, tgt, sizeof tgt);
        float *res[2][3];
        for (int k = 0; k < 2; k++) {
            cpu_gpt_xent_chunk_bytes = k ? 3 * V * sizeof(float) : (size_t)64 << 20;
            float *pl = put(d, NULL, R * 4), *pdx = put(d, NULL, R * C * 4), *pdw = put(d, NULL, V * C * 4);
            plumb_err e = {0};
            REQUIRE(d->ops->train->classifier_fwd_bwd(d, NULL, px, pw, pt, R, C, V, 0.5f, pl, NULL, pdx, pdw, DT_BF16,
                                                      &e) == 0);
            res[k][0] = get(d, pl, R);
            res[k][1] = get(d, pdx, R * C);
            res[k][2] = get(d, pdw, V * C);
        }
        cpu_gpt_xent_chunk_bytes = (size_t)64 << 20;
        const size_t ns[3] = {R, R * C, V * C};
        for (int i = 0; i < 3; i++) {
            if (mode == NUMERICS_GOLDEN) CHECK_MSG(same_bits(res[0][i], res[1][i], ns[i]), "golden output %d", i);
            else CHECK_MSG(max_rel(res[1][i], res[0][i], ns[i], 1e-2) < 1e-5, "fast output %d: %g", i, max_rel(res[1][i], res[0][i], ns[i], 1e-2));
        }
        done(d);
    }
}
TEST(gpt_ops_classifier_fd_golden) { check_classifier(NUMERICS_GOLDEN); }

/* The LayerNorm backward's dw/db parts four columns a thread (PLUMB_GPT_LN_PART_VEC=1)
 * against a column a thread (PLUMB_GPT_LN_PART_VEC=0, the default): the same
 * bits of dx, dw and db, for gpt2's C = 768 over 200 rows (a partial last
 * 64-row chunk) and C = 200; also from misaligned rows (C = 202: the
 * one-column kernel either way). The fused chunk kernel (PLUMB_GPT_LN_FUSED=1, the default,
 * where C = 4 NQ warp) gives the same bits too, and with layernorm_bwd16 from
 * dy16 with dx16 and dsum as well (a 16-bit dx aliasing dy16, as gpt16.c
 * calls it). The cpu has one way; the GPU suite runs it. */
TEST(gpt_ops_layernorm_bwd_parts_vec_same_bits)
{
    OPEN(d, NUMERICS_FAST, 0);
    const struct train_ops *T = d->ops->train;
    const int Rn = 200, Cs[3] = {768, 200, 202};
    static const char *const how[3][2] = {{"0", "0"}, {"1", "0"}, {"0", "1"}}; /* PART_VEC, FUSED */
    for (int ci = 0; ci < 3; ci++) {
        const int C = Cs[ci];
        const size_t n = (size_t)Rn * C;
        float *x = frand(n, -2, 2), *w = frand(C, 0.5, 1.5), *dy = frand(n, -1, 1), *dr = frand(n, -1, 1);
        uint16_t *dyh = malloc(n * 2);
        REQUIRE(dyh);
        for (size_t i = 0; i < n; i++) dyh[i] = f32_to_bf16(dy[i]);
        float mean[200], rstd[200];
        for (int r = 0; r < Rn; r++) {
            double m = 0, v = 0;
            for (int i = 0; i < C; i++) m += x[(size_t)r * C + i];
            m /= C;
            for (int i = 0; i < C; i++) v += (x[(size_t)r * C + i] - m) * (x[(size_t)r * C + i] - m);
            mean[r] = (float)m, rstd[r] = (float)(1.0 / sqrt(v / C + 1e-5));
        }
        float *px = put(d, x, n * 4), *pw = put(d, w, C * 4), *pdy = put(d, dy, n * 4), *pm = put(d, mean, sizeof mean);
        float *pr = put(d, rstd, sizeof rstd);
        float *out[3][3], *o16[3][4];
        uint16_t *h16[3];
        for (int v = 0; v < 3; v++) {
            float *pdx = put(d, dr, n * 4), *pdw = put(d, NULL, C * 4), *pdb = put(d, NULL, C * 4);
            plumb_err e = {0};
            char *k1 = env_push("PLUMB_GPT_LN_PART_VEC", how[v][0]), *k2 = env_push("PLUMB_GPT_LN_FUSED", how[v][1]);
            int rc = T->layernorm_bwd(d, NULL, px, pw, pm, pr, pdy, pdx, pdx, pdw, pdb, Rn, C, DT_BF16, &e);
            REQUIRE(rc == 0);
            out[v][0] = get(d, pdx, n), out[v][1] = get(d, pdw, C), out[v][2] = get(d, pdb, C);
            /* layernorm_bwd16: dx16 over dy16 (in place), dsum */
            o16[v][0] = NULL;
            h16[v] = NULL;
            if (T->layernorm_bwd16) {
                uint16_t *pyh = put(d, dyh, n * 2);
                float *qdx = put(d, dr, n * 4), *qdw = put(d, NULL, C * 4), *qdb = put(d, NULL, C * 4);
                float *qds = put(d, NULL, C * 4);
                rc = T->layernorm_bwd16(d, NULL, px, pw, pm, pr, pyh, qdx, qdx, pyh, qds, qdw, qdb, Rn, C, DT_BF16, &e);
                REQUIRE(rc == 0);
                o16[v][0] = get(d, qdx, n), o16[v][1] = get(d, qdw, C), o16[v][2] = get(d, qdb, C);
                o16[v][3] = get(d, qds, C);
                h16[v] = malloc(n * 2);
                REQUIRE(h16[v] && dev_download(d, h16[v], pyh, n * 2, &e) == PLUMB_OK);
            }
            env_restore("PLUMB_GPT_LN_FUSED", k2);
            env_restore("PLUMB_GPT_LN_PART_VEC", k1);
        }
        for (int v = 1; v < 3; v++) {
            CHECK_MSG(same_bits(out[0][0], out[v][0], n) && same_bits(out[0][1], out[v][1], C) &&
                          same_bits(out[0][2], out[v][2], C),
                      "C = %d, PART_VEC=%s FUSED=%s: dx %d dw %d db %d the same bits", C, how[v][0], how[v][1],
                      same_bits(out[0][0], out[v][0], n), same_bits(out[0][1], out[v][1], C),
                      same_bits(out[0][2], out[v][2], C));
            if (o16[0][0])
                CHECK_MSG(same_bits(o16[0][0], o16[v][0], n) && same_bits(o16[0][1], o16[v][1], C) &&
                              same_bits(o16[0][2], o16[v][2], C) && same_bits(o16[0][3], o16[v][3], C) &&
                              !memcmp(h16[0], h16[v], n * 2),
                          "C = %d, PART_VEC=%s FUSED=%s, layernorm_bwd16: dx %d dw %d db %d dsum %d dx16 %d the same "
                          "bits",
                          C, how[v][0], how[v][1], same_bits(o16[0][0], o16[v][0], n),
                          same_bits(o16[0][1], o16[v][1], C), same_bits(o16[0][2], o16[v][2], C),
                          same_bits(o16[0][3], o16[v][3], C), !memcmp(h16[0], h16[v], n * 2));
        }
        for (int v = 0; v < 3; v++) free(h16[v]);
        free(dyh);
    }
    done(d);
}

/* classifier_fwd_bwd16 (train_ops.h): from x's and wte's 16-bit values,
 * the bits of classifier_fwd_bwd from the widened values (losses, the loss
 * sum, dwte; dx16 the cast of its dx: the same bits on the cpu, within one
 * rt step on a GPU, whose dx GEMM may take another algorithm for a 16-bit
 * output); bf16 and fp16; V = 50 (a GPU pads its GEMMs to 56 rows) with
 * wte16 of exactly V rows (copied into a padded buffer), of 56 and of 64
 * (read in place: the rows past V hold finite values that must not show);
 * on a GPU also over 7-row chunks (the chunk-size hook), so dwte sums over
 * chunks and the last one's direct write; forward only too. Golden
 * numerics, an fp32 type and fewer rows than V are refused, named. */
TEST(gpt_ops_classifier16_is_classifier_of_widened)
{
    OPEN(d, NUMERICS_FAST, 0);
    const struct train_ops *T = d->ops->train;
    if (!T->classifier_fwd_bwd16) {
        done(d);
        TEST_SKIP("device %s has no classifier_fwd_bwd16", test_device());
    }
    enum { R = 40, C = 16, V = 50, MAXR = 64 };
    const int gpu = strncmp(test_device(), "cpu", 3) != 0;
    float *x = frand(R * C, -1, 1), *w = frand(MAXR * C, -1, 1);
    int32_t tgt[R];
    for (int r = 0; r < R; r++) tgt[r] = r == 5 ? -1 : (int32_t)(urand() * V);
    int32_t *pt = put(d, tgt, sizeof tgt);
    float *pl = put(d, NULL, R * 4), *pdx = put(d, NULL, R * C * 4), *pdw = put(d, NULL, V * C * 4);
    uint16_t *pdx16 = put(d, NULL, R * C * 2);
    double *psc = put(d, NULL, 2 * sizeof(double));
    const dtype_t rts[2] = {DT_BF16, DT_F16};
    const int rows[3] = {V, 56, MAXR};
    plumb_err e = {0};
    int cases = 0, same = 0;
    for (int ri = 0; ri < 2; ri++) {
        const dtype_t rt = rts[ri];
        float wr[MAXR * C], xr[R * C];
        uint16_t w16[MAXR * C], x16[R * C], dxh[R * C];
        for (int i = 0; i < MAXR * C; i++) {
            /* the padding rows: finite, larger than any real weight */
            const float v = i < V * C ? w[i] : 3.0f * w[i];
            w16[i] = rt == DT_BF16 ? f32_to_bf16(v) : f32_to_f16(v);
            wr[i] = rt == DT_BF16 ? bf16_to_f32(w16[i]) : f16_to_f32(w16[i]);
        }
        for (int i = 0; i < R * C; i++) {
            x16[i] = rt == DT_BF16 ? f32_to_bf16(x[i]) : f32_to_f16(x[i]);
            xr[i] = rt == DT_BF16 ? bf16_to_f32(x16[i]) : f16_to_f32(x16[i]);
        }
        float *pw = put(d, wr, sizeof(float) * V * C), *px = put(d, xr, sizeof xr);
        uint16_t *pw16 = put(d, w16, sizeof w16), *px16 = put(d, x16, sizeof x16);
        const double u = rt == DT_F16 ? 0x1p-10 : 0x1p-7;
        for (int chunked = 0; chunked < 1 + gpu; chunked++) {
            char *hook = env_push("PLUMB_GPT_XENT_CHUNK_BYTES", chunked ? "1568" : NULL); /* 7 rows of 56 fp32 */
            REQUIRE(T->classifier_fwd_bwd(d, NULL, px, pw, pt, R, C, V, 0.5f, pl, psc, pdx, pdw, rt, &e) == 0);
            float *ref[3] = {get(d, pl, R), get(d, pdx, R * C), get(d, pdw, V * C)};
            double sref[2];
            dev_download(d, sref, psc, sizeof sref, &e);
            for (int k = 0; k < 3; k++) {
                const double zero[2] = {0, 0};
                dev_upload(d, psc, zero, sizeof zero, &e);
                int rc = T->classifier_fwd_bwd16(d, NULL, px16, pw16, rows[k], pt, R, C, V, 0.5f, pl, psc, pdx16, pdw,
                                                 rt, &e);
                CHECK_MSG(rc == 0, "classifier_fwd_bwd16 %s rows %d: %s", dtype_name(rt), rows[k], e.msg);
                float *got[2] = {get(d, pl, R), get(d, pdw, V * C)};
                double sgot[2];
                dev_download(d, sgot, psc, sizeof sgot, &e);
                dev_download(d, dxh, pdx16, sizeof dxh, &e);
                size_t dx_off = 0, dx_far = 0;
                for (int i = 0; i < R * C; i++) {
                    const float g = rt == DT_BF16 ? bf16_to_f32(dxh[i]) : f16_to_f32(dxh[i]);
                    if (memcmp(&g, &ref[1][i], 4)) dx_off++;
                    if (!(fabs((double)g - ref[1][i]) <= u * fabs((double)ref[1][i]) + 1e-30)) dx_far++;
                }
                int ok = !memcmp(sref, sgot, sizeof sref) && same_bits(ref[0], got[0], R) &&
                         same_bits(ref[2], got[1], V * C) && (gpu ? dx_far == 0 : dx_off == 0);
                cases++;
                same += ok;
                CHECK_MSG(ok, "%s, wte16 of %d rows%s: not classifier_fwd_bwd's outputs (loss sum %.17g vs %.17g; "
                          "losses %d dwte %d the same bits; dx16: %zu differ, %zu by more than one rt step)",
                          dtype_name(rt), rows[k], chunked ? ", 7-row chunks" : "", sgot[0], sref[0],
                          same_bits(ref[0], got[0], R), same_bits(ref[2], got[1], V * C), dx_off, dx_far);
            }
            /* forward only: the same losses */
            REQUIRE(T->classifier_fwd_bwd16(d, NULL, px16, pw16, V, pt, R, C, V, 0.5f, pl, NULL, NULL, NULL, rt, &e) ==
                    0);
            CHECK_MSG(same_bits(ref[0], get(d, pl, R), R), "%s forward only: other losses", dtype_name(rt));
            env_restore("PLUMB_GPT_XENT_CHUNK_BYTES", hook);
        }
    }
    CHECK(same == cases && cases >= 6);
    /* refused, named: fewer rows than V, an fp32 type, golden numerics */
    uint16_t *pw16 = put(d, NULL, MAXR * C * 2), *px16 = put(d, NULL, R * C * 2);
    CHECK(T->classifier_fwd_bwd16(d, NULL, px16, pw16, V - 1, pt, R, C, V, 1.0f, pl, NULL, NULL, NULL, DT_BF16, &e) ==
              PLUMB_EUSAGE && strstr(e.msg, "classifier_fwd_bwd16"));
    CHECK(T->classifier_fwd_bwd16(d, NULL, px16, pw16, V, pt, R, C, V, 1.0f, pl, NULL, NULL, NULL, DT_F32, &e) ==
              PLUMB_EUSAGE && strstr(e.msg, "classifier_fwd_bwd16"));
    done(d);
    if (gpu) {
        OPEN(g, NUMERICS_GOLDEN, 0);
        uint16_t *gw = put(g, NULL, MAXR * C * 2), *gx = put(g, NULL, R * C * 2);
        float *gl = put(g, NULL, R * 4);
        int32_t *gt = put(g, tgt, sizeof tgt);
        CHECK(g->ops->train->classifier_fwd_bwd16(g, NULL, gx, gw, V, gt, R, C, V, 1.0f, gl, NULL, NULL, NULL, DT_BF16,
                                                  &e) == PLUMB_EUSAGE && strstr(e.msg, "golden"));
        done(g);
    }
}

/* ================= adamw_masked ================= */

TEST(gpt_ops_adamw_masked_equals_adamw_per_range)
{
    /* the last range ends before n, or at n (decay up to the last element) */
    for (int mode = 0; mode < 4; mode++) {
        OPEN(d, (enum numerics)(mode % 2), 0);
        enum { n = 3001 };
        const int64_t last = mode < 2 ? 2999 : n;
        float *w = frand(n, -1, 1), *g = frand(n, -2, 2), *m = frand(n, -0.1, 0.1), *v = frand(n, 0, 0.1);
        const int64_t dec[6] = {0, 700, 1000, 1000, 1024, last}; /* an empty range too */
        const float gscale = 0.37f, lr = 1e-3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, bc1 = 0.19f, bc2 = 0.0975f;
        float *pw = put(d, w, n * 4), *pg = put(d, g, n * 4), *pm = put(d, m, n * 4), *pv = put(d, v, n * 4);
        int64_t *pdec = put(d, dec, sizeof dec);
        plumb_err e = {0};
        const struct train_ops *T = d->ops->train;
        REQUIRE(T->adamw_masked(d, NULL, pw, pg, pm, pv, n, lr, b1, b2, eps, wd, bc1, bc2, gscale, pdec, 3, &e) == 0);
        float *w1 = get(d, pw, n), *m1 = get(d, pm, n), *v1 = get(d, pv, n);
        /* the reference: adamw per segment on pre-scaled gradients */
        float *gs = keep(malloc(n * 4));
        for (int i = 0; i < n; i++) gs[i] = g[i] * gscale;
        float *qw = put(d, w, n * 4), *qg = put(d, gs, n * 4), *qm = put(d, m, n * 4), *qv = put(d, v, n * 4);
        const int64_t seg[] = {0, 700, 1000, 1024, last, n};
        const int decays[] = {1, 0, 0, 1, 0};
        for (int s = 0; s < (last < n ? 5 : 4); s++) {
            const float wds = decays[s] ? wd : 0.0f;
            REQUIRE(T->adamw(d, NULL, qw + seg[s], qg + seg[s], qm + seg[s], qv + seg[s], (size_t)(seg[s + 1] - seg[s]), lr,
                             b1, b2, eps, wds, bc1, bc2, &e) == 0);
        }
        float *w2 = get(d, qw, n), *m2 = get(d, qm, n), *v2 = get(d, qv, n);
        CHECK(same_bits(w1, w2, n) && same_bits(m1, m2, n) && same_bits(v1, v2, n));
        /* a bad range list is an error naming the range */
        const int64_t badr[4] = {10, 20, 15, 30};
        int64_t *pbad = put(d, badr, sizeof badr);
        if (!strncmp(test_device(), "cpu", 3)) {
            CHECK(T->adamw_masked(d, NULL, pw, pg, pm, pv, n, lr, b1, b2, eps, wd, bc1, bc2, 1.0f, pbad, 2, &e) ==
                  PLUMB_EUSAGE);
            CHECK(strstr(e.msg, "range 1") != NULL);
        }
        done(d);
    }
}

/* ================= golden: thread counts, shared definitions, rounding ================= */

/* Runs every op golden with `threads` threads (parallel paths forced) and
 * returns the concatenated outputs. */
static float *gold_run(int threads, dtype_t rt, size_t *n_out)
{
    struct dev *d = open_mode(NUMERICS_GOLDEN, threads);
    if (!d) return NULL;
    cpu_train_par_scale = 0.0;
    enum { B = 2, T = 19, NH = 3, HS = 8, C = NH * HS, V = 29 };
    const int Rn = B * T;
    rs = 0x1234567ull;
    float *qkv = frand((size_t)Rn * 3 * C, -1, 1), *g = frand((size_t)Rn * C, -1, 1), *x = frand((size_t)Rn * C, -2, 2);
    float *w = frand(4 * C * C, -0.3, 0.3), *b = frand(4 * C, -0.3, 0.3), *lw = frand(C, 0.5, 1.5);
    int32_t tgt[B * T];
    for (int i = 0; i < Rn; i++) tgt[i] = i % 5 == 4 ? -1 : (int32_t)(urand() * V);
    const size_t cap = (size_t)1 << 20;
    float *res = calloc(cap, sizeof(float));
    size_t o = 0;
    plumb_err e = {0};
    const struct train_ops *Tp = d->ops->train;
    float *pq = put(d, qkv, (size_t)Rn * 3 * C * 4), *po = put(d, NULL, (size_t)Rn * C * 4);
    float *pl = put(d, NULL, (size_t)B * NH * T * 4), *pg = put(d, g, (size_t)Rn * C * 4);
    float *pdq = put(d, NULL, (size_t)Rn * 3 * C * 4);
    Tp->attention_fwd(d, NULL, pq, po, pl, B, T, NH, HS, rt, &e);
    Tp->attention_bwd(d, NULL, pq, po, pl, pg, pdq, B, T, NH, HS, rt, &e);
    float *h;
    memcpy(res + o, h = get(d, po, (size_t)Rn * C), (size_t)Rn * C * 4), o += (size_t)Rn * C;
    memcpy(res + o, h = get(d, pl, (size_t)B * NH * T), (size_t)B * NH * T * 4), o += (size_t)B * NH * T;
    memcpy(res + o, h = get(d, pdq, (size_t)Rn * 3 * C), (size_t)Rn * 3 * C * 4), o += (size_t)Rn * 3 * C;
    /* layernorm + matmul with GELU, forward and backward */
    float *px = put(d, x, (size_t)Rn * C * 4), *plw = put(d, lw, C * 4), *plb = put(d, b, C * 4);
    float *py = put(d, NULL, (size_t)Rn * C * 4), *pm = put(d, NULL, Rn * 4), *prs = put(d, NULL, Rn * 4);
    float *pw = put(d, w, 4 * C * C * 4), *pb = put(d, b, 4 * C * 4);
    float *pf = put(d, NULL, (size_t)Rn * 4 * C * 4), *pfg = put(d, NULL, (size_t)Rn * 4 * C * 4);
    float *pz = put(d, NULL, (size_t)Rn * C * 4), *pdf = put(d, NULL, (size_t)Rn * 4 * C * 4);
    float *pdw = put(d, NULL, 4 * C * C * 4), *pdb = put(d, NULL, 4 * C * 4), *pdx = put(d, g, (size_t)Rn * C * 4);
    float *pdw2 = put(d, NULL, 4 * C * C * 4), *pdln = put(d, NULL, (size_t)Rn * C * 4);
    float *pdlw = put(d, NULL, C * 4), *pdlb = put(d, NULL, C * 4);
    Tp->layernorm_fwd(d, NULL, px, plw, plb, py, pm, prs, Rn, C, 1e-5f, rt, &e);
    Tp->matmul_fwd(d, NULL, py, pw, pb, pfg, pf, Rn, C, 4 * C, 1, rt, &e);      /* fc + gelu [Rn, 4C] */
    Tp->matmul_fwd(d, NULL, pfg, pw, pb, pz, NULL, Rn, 4 * C, C, 0, rt, &e);    /* proj [Rn, C] (w as [C, 4C]) */
    Tp->matmul_bwd(d, NULL, pfg, pw, pg, pf, pdf, pdw, pdb, Rn, 4 * C, C, rt, &e); /* dfc pre-activation */
    Tp->matmul_bwd(d, NULL, py, pw, pdf, NULL, pdln, pdw2, pdb, Rn, C, 4 * C, rt, &e);
    Tp->layernorm_bwd(d, NULL, px, plw, pm, prs, pdln, pdx, pdx, pdlw, pdlb, Rn, C, rt, &e);
    const float *outs[] = {py, pfg, pf, pz, pdf, pdw, pdw2, pdb, pdln, pdx, pdlw, pdlb};
    const size_t ns[] = {(size_t)Rn * C, (size_t)Rn * 4 * C, (size_t)Rn * 4 * C, (size_t)Rn * C, (size_t)Rn * 4 * C,
                         4 * C * C, 4 * C * C, 4 * C, (size_t)Rn * C, (size_t)Rn * C, C, C};
    for (int i = 0; i < 12; i++) memcpy(res + o, h = get(d, outs[i], ns[i]), ns[i] * 4), o += ns[i];
    /* classifier */
    float *pwte = put(d, w, (size_t)V * C * 4), *pls = put(d, NULL, Rn * 4), *pcx = put(d, NULL, (size_t)Rn * C * 4);
    float *pcw = put(d, NULL, (size_t)V * C * 4);
    int32_t *pt = put(d, tgt, sizeof tgt);
    Tp->classifier_fwd_bwd(d, NULL, py, pwte, pt, Rn, C, V, 0.25f, pls, NULL, pcx, pcw, rt, &e);
    memcpy(res + o, h = get(d, pls, Rn), Rn * 4), o += Rn;
    memcpy(res + o, h = get(d, pcx, (size_t)Rn * C), (size_t)Rn * C * 4), o += (size_t)Rn * C;
    memcpy(res + o, h = get(d, pcw, (size_t)V * C), (size_t)V * C * 4), o += (size_t)V * C;
    cpu_train_par_scale = 1.0;
    CHECK_MSG(!e.msg[0], "golden run: %s", e.msg);
    done(d);
    *n_out = o;
    return res;
}

TEST(gpt_ops_golden_thread_count_independent)
{
    if (strncmp(test_device(), "cpu", 3)) TEST_SKIP("thread counts are the cpu backend's");
    for (int r = 0; r < 2; r++) {
        const dtype_t rt = r ? DT_BF16 : DT_F32;
        size_t n1 = 0, n2 = 0;
        float *a = gold_run(1, rt, &n1), *b = gold_run(2, rt, &n2);
        if (!a) TEST_SKIP("no transformer ops on the cpu");
        REQUIRE(n1 == n2 && n1 > 1000);
        size_t first = n1;
        for (size_t i = 0; i < n1 && first == n1; i++)
            if (f32_bits(a[i]) != f32_bits(b[i])) first = i;
        CHECK_MSG(first == n1, "%s: first difference at %zu of %zu: %.9g vs %.9g", dtype_name(rt), first, n1,
                  first < n1 ? a[first] : 0.0, first < n1 ? b[first] : 0.0);
        if (rt == DT_BF16) {
            /* every stored activation is a bf16 value: the first block (attention out) */
            int bad = 0;
            for (int i = 0; i < 2 * 19 * 24; i++) bad += (f32_bits(a[i]) & 0xffffu) != 0;
            CHECK_EQ_INT(bad, 0);
        }
        free(a);
        free(b);
    }
}

/* Golden results are the shared definitions of dev/train_gpt_math.h,
 * evaluated here on the host: attention (both passes), layernorm backward,
 * cross-entropy rows. */
TEST(gpt_ops_golden_equals_shared_definitions)
{
    OPEN(d, NUMERICS_GOLDEN, 0);
    enum { B = 2, T = 13, NH = 2, HS = 6, C = NH * HS, C3 = 3 * C, V = 17 };
    const int Rn = B * T;
    const float scale = 1.0f / sqrtf((float)HS);
    float *qkv = frand((size_t)Rn * C3, -1, 1), *g = frand((size_t)Rn * C, -1, 1);
    float *pq = put(d, qkv, (size_t)Rn * C3 * 4), *po = put(d, NULL, (size_t)Rn * C * 4);
    float *pl = put(d, NULL, (size_t)B * NH * T * 4), *pg = put(d, g, (size_t)Rn * C * 4);
    float *pdq = put(d, NULL, (size_t)Rn * C3 * 4);
    plumb_err e = {0};
    const struct train_ops *Tp = d->ops->train;
    REQUIRE(Tp->attention_fwd(d, NULL, pq, po, pl, B, T, NH, HS, DT_BF16, &e) == 0);
    REQUIRE(Tp->attention_bwd(d, NULL, pq, po, pl, pg, pdq, B, T, NH, HS, DT_BF16, &e) == 0);
    float *out = get(d, po, (size_t)Rn * C), *lse = get(d, pl, (size_t)B * NH * T), *dq = get(d, pdq, (size_t)Rn * C3);
    float ro[Rn * C], rl[B * NH * T], rq[Rn * C3], p[T], P[T * T], DS[T * T];
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *base = qkv + (size_t)b * T * C3 + h * HS;
            for (int t = 0; t < T; t++)
                gpt_gold_attn_row(base + t * C3, base + C, base + 2 * C, C3, t, HS, scale, p, ro + (b * T + t) * C + h * HS,
                                  rl + (b * NH + h) * T + t, DT_BF16);
        }
    CHECK(same_bits(out, ro, Rn * C) && same_bits(lse, rl, B * NH * T));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *base = qkv + (size_t)b * T * C3 + h * HS;
            for (int t = 0; t < T; t++)
                gpt_gold_attn_bwd_row(base + t * C3, base + C, base + 2 * C, C3, g + (b * T + t) * C + h * HS,
                                      out + (b * T + t) * C + h * HS, t, HS, scale, lse[(b * NH + h) * T + t], P + t * T,
                                      DS + t * T, rq + (b * T + t) * C3 + h * HS, DT_BF16);
            for (int j = 0; j < T; j++)
                gpt_gold_attn_bwd_key(base, C3, g + (size_t)b * T * C + h * HS, C, P, DS, T, j, T, HS, scale,
                                      rq + (b * T + j) * C3 + C + h * HS, rq + (b * T + j) * C3 + 2 * C + h * HS, DT_BF16);
        }
    CHECK(same_bits(dq, rq, Rn * C3));
    /* cross-entropy rows: golden logits are fmaf chains, then the shared row */
    float *x = frand((size_t)Rn * C, -1, 1), *w = frand((size_t)V * C, -1, 1);
    int32_t tgt[Rn];
    for (int r = 0; r < Rn; r++) tgt[r] = (int32_t)(urand() * V);
    float *px = put(d, x, (size_t)Rn * C * 4), *pw = put(d, w, (size_t)V * C * 4), *pls = put(d, NULL, Rn * 4);
    int32_t *pt = put(d, tgt, sizeof tgt);
    REQUIRE(Tp->classifier_fwd_bwd(d, NULL, px, pw, pt, Rn, C, V, 1.0f, pls, NULL, NULL, NULL, DT_F32, &e) == 0);
    float *ls = get(d, pls, Rn);
    int bad = 0;
    for (int r = 0; r < Rn; r++) {
        float z[V];
        for (int v = 0; v < V; v++) z[v] = gg_dot(x + r * C, w + v * C, C);
        bad += f32_bits(ls[r]) != f32_bits(gpt_gold_xent_row(z, V, tgt[r], 1.0f, NULL, DT_F32));
    }
    CHECK_EQ_INT(bad, 0);
    done(d);
}

/* A fast path that rounds p and ds to bf16 before its tensor-core products
 * (flash-attention style, train_ops.h) moves an output by up to u times the
 * magnitudes attn_ref64 (tests/attn_ref.h) gives beside it, which can be far
 * more than u times the output itself where the terms cancel. */
/* the worst of |a - b| / max(rel max(floor, |b|), 4 u (|b| + mag)): <= 1 passes */
static double attn_worst(const float *a, const float *b, const double *mag, size_t n, double rel, double floor_)
{
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        const double bound = fmax(rel * fmax(floor_, fabs((double)b[i])), 4 * 0x1p-9 * (fabs((double)b[i]) + mag[i]));
        w = fmax(w, fabs((double)a[i] - b[i]) / bound);
    }
    return w;
}

/* Fast against golden on one input, bf16: the bounds the model's fast path is
 * held to (rounding to bf16 is 2^-9 relative; a few roundings apart): each
 * element within 1.6e-2 (out; 3.2e-2 dqkv) relative to max(0.05, |golden|),
 * or within 4u of |golden| plus the magnitude its rounded terms scale with
 * (attn_ref64's magnitudes, tests/attn_ref.h). The inputs are bf16 values, as the model's stored
 * activations are (the contract of attention_fwd in train_ops.h). */
TEST(gpt_ops_fast_within_bounds_of_golden)
{
    enum { B = 2, T = 40, NH = 2, HS = 16, C = NH * HS, C3 = 3 * C };
    const int Rn = B * T;
    float *qkv = frand((size_t)Rn * C3, -1, 1), *g = frand((size_t)Rn * C, -1, 1);
    for (size_t i = 0; i < (size_t)Rn * C3; i++) qkv[i] = gg_round(qkv[i], DT_BF16);
    for (size_t i = 0; i < (size_t)Rn * C; i++) g[i] = gg_round(g[i], DT_BF16);
    float *res[2][3];
    for (int mode = 0; mode < 2; mode++) {
        OPEN(d, (enum numerics)mode, 0);
        float *pq = put(d, qkv, (size_t)Rn * C3 * 4), *po = put(d, NULL, (size_t)Rn * C * 4);
        float *pl = put(d, NULL, (size_t)B * NH * T * 4), *pg = put(d, g, (size_t)Rn * C * 4);
        float *pdq = put(d, NULL, (size_t)Rn * C3 * 4);
        plumb_err e = {0};
        REQUIRE(d->ops->train->attention_fwd(d, NULL, pq, po, pl, B, T, NH, HS, DT_BF16, &e) == 0);
        REQUIRE(d->ops->train->attention_bwd(d, NULL, pq, po, pl, pg, pdq, B, T, NH, HS, DT_BF16, &e) == 0);
        res[mode][0] = get(d, po, (size_t)Rn * C);
        res[mode][1] = get(d, pl, (size_t)B * NH * T);
        res[mode][2] = get(d, pdq, (size_t)Rn * C3);
        dev_close(d);
    }
    double *mo = malloc((size_t)Rn * C * sizeof(double)), *md = malloc((size_t)Rn * C3 * sizeof(double));
    attn_ref64(qkv, g, B, T, NH, HS, NULL, NULL, NULL, mo, md);
    const double wo = attn_worst(res[0][0], res[1][0], mo, (size_t)Rn * C, 1.6e-2, 0.05);
    const double wl = max_rel(res[0][1], res[1][1], (size_t)B * NH * T, 1.0);
    const double wq = attn_worst(res[0][2], res[1][2], md, (size_t)Rn * C3, 3.2e-2, 0.05);
    CHECK_MSG(wo <= 1 && wl <= 1e-5 && wq <= 1, "fast vs golden (bf16): out %g lse %g dqkv %g of their bounds", wo, wl,
              wq);
    free(mo);
    free(md);
    done(NULL);
}

/* PLUMB_LT_WS_MB (gpu/lt_matmul.cu, read when a device's cuBLASLt state is
 * made): 0 (no workspace) and the default both give matmul_fwd's product
 * within fp32 summation's error bound of the float64 one (TF32 off); a value that is not a whole
 * number of MiB from 0 to 4096 fails the op with an error naming it. Each
 * setting on a freshly opened device. CUDA only (HIP has no lt_matmul). */
TEST(gpt_ops_matmul_lt_workspace_setting)
{
    if (strncmp(test_device(), "cuda", 4)) TEST_SKIP("cuBLASLt's workspace: PLUMB_TEST_DEVICE=cuda only");
    enum { B = 64, K = 96, N = 80 };
    static const char *const vals[] = {NULL, "0", "7", "abc", "-3", "5000", "12MB"};
    float *x = frand(B * K, -1, 1), *w = frand(N * K, -1, 1), *bias = frand(N, -1, 1);
    /* ref: the float64 product; mag: the sum of its terms' magnitudes, for
     * the bound any fp32 summation order meets, |y - ref| <= gamma(K + 1) mag
     * with gamma(n) = n u / (1 - n u), u = 2^-24 (TF32's 2^-11 operand
     * rounding would exceed it about tenfold) */
    double ref[B * N], mag[B * N];
    for (int b = 0; b < B; b++)
        for (int n = 0; n < N; n++) {
            double s = bias[n], a = fabs(bias[n]);
            for (int k = 0; k < K; k++) {
                const double t = (double)x[b * K + k] * w[n * K + k];
                s += t, a += fabs(t);
            }
            ref[b * N + n] = s;
            mag[b * N + n] = a;
        }
    const double nu = (K + 1) * 0x1p-24, gamma = nu / (1 - nu);
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        char *kept = env_push("PLUMB_LT_WS_MB", vals[i]);
        struct dev *d = open_mode(NUMERICS_FAST, 0);
        if (!d) {
            env_restore("PLUMB_LT_WS_MB", kept);
            TEST_SKIP("device %s has no transformer training ops", test_device());
        }
        float *px = put(d, x, sizeof(float) * B * K), *pw = put(d, w, sizeof(float) * N * K);
        float *pb = put(d, bias, sizeof(float) * N), *py = put(d, NULL, sizeof(float) * B * N);
        plumb_err e = {0};
        const int rc = d->ops->train->matmul_fwd(d, NULL, px, pw, pb, py, NULL, B, K, N, 0, DT_F32, &e);
        const int bad = i >= 3;
        if (bad) {
            CHECK_MSG(rc != 0 && strstr(e.msg, "PLUMB_LT_WS_MB"), "PLUMB_LT_WS_MB=%s: rc %d, '%s'", vals[i], rc,
                      e.msg);
        } else {
            CHECK_MSG(rc == 0, "PLUMB_LT_WS_MB=%s: %s", vals[i] ? vals[i] : "(unset)", e.msg);
            const float *y = get(d, py, B * N);
            double worst = 0;
            for (int j = 0; j < B * N; j++) worst = fmax(worst, fabs(y[j] - ref[j]) / (gamma * mag[j]));
            CHECK_MSG(worst <= 1, "PLUMB_LT_WS_MB=%s: worst error %.3g of fp32's summation bound",
                      vals[i] ? vals[i] : "(unset)", worst);
        }
        dev_close(d);
        env_restore("PLUMB_LT_WS_MB", kept);
    }
    done(NULL);
}
