/* models/ctr: the whole model's gradient against central finite differences
 * of a float64 DLRM written here, presets and layout, masking, the gradient
 * contract (overwrite, never accumulate), golden thread-count independence of
 * training, and that a small model learns. */
#include "test.h"
#include "core/hash.h"
#include "core/philox.h"
#include "dev/dev.h"
#include "dev/train_ops.h"
#include "models/ctr/ctr.h"
#include "train/optim.h"
#include <stdlib.h>

static uint64_t rs = 0x2545f4914f6cdd1dull;
static double ur(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (double)(rs >> 11) * (1.0 / 9007199254740992.0);
}

static struct dev *open_cpu(enum numerics mode, int threads)
{
    struct dev *d = NULL;
    plumb_err e = {0};
    if (dev_open(test_device(), &d, &e)) return NULL;
    if (dev_set_numerics(d, mode, 0, &e) || !d->ops->train) {
        dev_close(d);
        return NULL;
    }
    d->threads = threads;
    return d;
}

/* Host-side init with the scales of ctr_init (models/ctr/ctr.h; test only: ctr_init uses Philox). */
static void host_init(struct ctr_model *m, double scale)
{
    size_t n = ctr_n_params(m);
    float *p = calloc(n, sizeof(float));
    for (int i = 0; i < ctr_n_tensors(m); i++) {
        const struct model_tensor *t = ctr_tensor(m, i);
        double b = (t->flags & TENSOR_SPARSE) ? sqrt(1.0 / t->rows) : sqrt(6.0 / (t->rows + t->cols)) * scale;
        for (size_t k = 0; k < t->numel; k++) p[t->offset + k] = (float)((2 * ur() - 1) * b);
    }
    plumb_err e = {0};
    dev_upload(ctr_dev(m), ctr_params(m), p, n * sizeof(float), &e);
    free(p);
}

/* device-to-device copy (plain copy on the cpu) */
static void d2d(struct dev *d, void *dst, const void *src, size_t bytes)
{
    plumb_err e = {0};
    d->be->memcpy_async(d, NULL, dst, src, bytes, MEMCPY_D2D, &e);
    dev_sync(d, &e);
}

static struct ctr_config small_config(int D, int h1, int h2, int rows)
{
    struct ctr_config c;
    memset(&c, 0, sizeof c);
    snprintf(c.preset, sizeof c.preset, "test");
    c.emb_dim = D;
    c.n_bottom = 2;
    c.bottom[0] = CTR_N_DENSE;
    c.bottom[1] = h1;
    c.bottom[2] = D;
    c.n_top = 2;
    c.top[0] = D + 351;
    c.top[1] = h2;
    c.top[2] = 1;
    for (int t = 0; t < CTR_N_TABLES; t++) c.rows[t] = rows + t % 3;
    return c;
}

TEST(ctr_presets_and_layout)
{
    struct ctr_config c;
    plumb_err e = {0};
    REQUIRE(ctr_config_preset("dlrm-kaggle", 0, &c, &e) == 0);
    CHECK_EQ_INT(c.emb_dim, 16);
    CHECK_EQ_INT(c.bottom[0], 13);
    CHECK_EQ_INT(c.bottom[1], 512);
    CHECK_EQ_INT(c.bottom[4], 16);
    CHECK_EQ_INT(c.top[0], 367);
    CHECK_EQ_INT(c.top[3], 1);
    CHECK_EQ_INT(c.rows[25], 1000000);
    REQUIRE(ctr_config_preset("dlrm-kaggle", 5000, &c, &e) == 0);
    CHECK_EQ_INT(c.rows[0], 5000);
    char desc[256];
    ctr_config_describe(&c, desc, sizeof desc);
    CHECK_STREQ(desc, "bottom 13-512-256-64-16 | 26x5000x16 | top 367-512-256-1");
    CHECK(ctr_config_preset("dlrm-huge", 0, &c, &e) == PLUMB_EUSAGE);
    CHECK(strstr(e.msg, "dlrm-huge") != NULL);
    REQUIRE(ctr_config_preset("ctr-tiny", 0, &c, &e) == 0);
    c.top[0] = 100;
    CHECK(ctr_config_validate(&c, &e) == PLUMB_EUSAGE);
    CHECK(strstr(e.msg, "top input width 100") != NULL);

    struct dev *d = open_cpu(NUMERICS_FAST, 0);
    if (!d) TEST_SKIP("no training ops on %s", test_device());
    struct ctr_model *m = NULL;
    REQUIRE(ctr_config_preset("dlrm-kaggle", 100, &c, &e) == 0);
    REQUIRE(ctr_create(d, &c, 8, DT_F32, &m, &e) == 0);
    /* 4 + 3 layers, weight + bias each, then 26 tables */
    CHECK_EQ_INT(ctr_n_tensors(m), 2 * 7 + 26);
    size_t dense = 0;
    for (int i = 0; i < ctr_n_tensors(m); i++) {
        const struct model_tensor *t = ctr_tensor(m, i);
        CHECK(t->offset % 16 == 0 || (t->flags & TENSOR_SPARSE));
        if (!(t->flags & TENSOR_SPARSE)) dense += t->numel;
    }
    /* 13*512+512 + 512*256+256 + 256*64+64 + 64*16+16 + 367*512+512 + 512*256+256 + 256+1 = 475985 */
    CHECK_EQ_INT(dense, 475985);
    CHECK(ctr_n_dense(m) >= dense && ctr_n_dense(m) < dense + 16 * 14);
    CHECK_EQ_INT(ctr_n_params(m), ctr_n_dense(m) + 26 * 100 * 16);
    CHECK_STREQ(ctr_tensor(m, 0)->name, "bottom.0.weight");
    CHECK_EQ_INT(ctr_tensor(m, 0)->rows, 512);
    CHECK_EQ_INT(ctr_tensor(m, 0)->cols, 13);
    CHECK_STREQ(ctr_tensor(m, 14)->name, "emb.0");
    CHECK_EQ_INT(ctr_table_off(m)[3], 300);
    /* batch validation names sample and field */
    float dense_in[2 * 13] = {0}, lab[2] = {0, 1};
    uint32_t sp[2 * 26] = {0};
    sp[26 + 4] = 100;
    struct ctr_batch b = {2, 2, dense_in, sp, lab};
    CHECK(ctr_check_batch(m, &b, &e) == PLUMB_EUSAGE);
    CHECK(strstr(e.msg, "sample 1, C5: row 100") != NULL);
    sp[26 + 4] = 99;
    lab[0] = 0.5f;
    CHECK(ctr_check_batch(m, &b, &e) == PLUMB_EUSAGE);
    CHECK(strstr(e.msg, "label") != NULL);
    ctr_free(m);
    dev_close(d);
}

/* ---------------- float64 reference DLRM ---------------- */

struct ref {
    const struct ctr_model *m;
    const struct ctr_config *c;
    double *p; /* float64 copy of the parameter buffer */
};

static void ref_linear(const double *W, const double *bias, const double *x, double *y, int in, int out, int relu)
{
    for (int o = 0; o < out; o++) {
        double a = bias[o];
        for (int i = 0; i < in; i++) a += W[(size_t)o * in + i] * x[i];
        y[o] = relu && a < 0 ? 0 : a;
    }
}

static double ref_logit(const struct ref *r, const float *dense, const uint32_t *sp)
{
    const struct ctr_config *c = r->c;
    int D = c->emb_dim, F = CTR_N_TABLES + 1;
    double h[1024], g[1024], z[27][64];
    for (int i = 0; i < 13; i++) h[i] = dense[i];
    int ti = 0;
    for (int l = 0; l < c->n_bottom; l++, ti += 2) {
        ref_linear(r->p + ctr_tensor(r->m, ti)->offset, r->p + ctr_tensor(r->m, ti + 1)->offset, h, g, c->bottom[l],
                   c->bottom[l + 1], 1);
        memcpy(h, g, sizeof(double) * c->bottom[l + 1]);
    }
    for (int k = 0; k < D; k++) z[0][k] = h[k];
    size_t tab = ctr_n_dense(r->m);
    for (int t = 0; t < CTR_N_TABLES; t++)
        for (int k = 0; k < D; k++) z[t + 1][k] = r->p[tab + (size_t)(ctr_table_off(r->m)[t] + sp[t]) * D + k];
    double in[1024];
    for (int k = 0; k < D; k++) in[k] = z[0][k];
    int p = D;
    for (int i = 1; i < F; i++)
        for (int j = 0; j < i; j++) {
            double s = 0;
            for (int k = 0; k < D; k++) s += z[i][k] * z[j][k];
            in[p++] = s;
        }
    for (int l = 0; l < c->n_top; l++, ti += 2) {
        ref_linear(r->p + ctr_tensor(r->m, ti)->offset, r->p + ctr_tensor(r->m, ti + 1)->offset, in, g, c->top[l],
                   c->top[l + 1], l < c->n_top - 1);
        memcpy(in, g, sizeof(double) * c->top[l + 1]);
    }
    return in[0];
}

static double ref_loss(const struct ref *r, const struct ctr_batch *b, double gs)
{
    double L = 0;
    for (int i = 0; i < b->n_valid; i++) {
        double zz = ref_logit(r, b->dense + i * 13, b->sparse + i * 26), y = b->labels[i];
        L += y * log1p(exp(-zz)) + (1 - y) * log1p(exp(zz));
    }
    return L * gs;
}

static void make_batch(int B, const struct ctr_config *c, float *dense, uint32_t *sp, float *lab)
{
    for (int i = 0; i < B * 13; i++) dense[i] = (float)(3 * ur());
    for (int i = 0; i < B; i++)
        for (int t = 0; t < 26; t++) sp[i * 26 + t] = (uint32_t)(ur() * c->rows[t]);
    for (int i = 0; i < B; i++) lab[i] = ur() < 0.4 ? 1.0f : 0.0f;
}

static void check_model_fd(enum numerics mode)
{
    struct dev *d = open_cpu(mode, 0);
    if (!d) TEST_SKIP("no training ops on %s", test_device());
    struct ctr_config c = small_config(4, 6, 5, 3); /* 3-5 rows: many duplicate rows */
    plumb_err e = {0};
    struct ctr_model *m = NULL;
    REQUIRE(ctr_create(d, &c, 8, DT_F32, &m, &e) == 0);
    rs = 777;
    host_init(m, 3.0);
    enum { B = 6, NV = 5 };
    float dense[B * 13], lab[B];
    uint32_t sp[B * 26];
    make_batch(B, &c, dense, sp, lab);
    struct ctr_batch b = {B, NV, dense, sp, lab};
    const float gs = 0.25f;
    struct ctr_loss loss;
    REQUIRE(ctr_forward_backward(m, &b, gs, &loss, &e) == 0);
    CHECK_EQ_INT(loss.count, NV);
    size_t np = ctr_n_params(m), nd = ctr_n_dense(m);
    float *pf = malloc(np * sizeof(float)), *gd = malloc(nd * sizeof(float));
    dev_download(d, pf, ctr_params(m), np * sizeof(float), &e);
    dev_download(d, gd, ctr_grads(m), nd * sizeof(float), &e);
    int64_t *rows;
    float *rg;
    size_t nr;
    ctr_sparse_grads(m, &rows, &rg, &nr);
    int64_t *hr = malloc(sizeof(int64_t) * (nr + 1));
    float *hg = malloc(sizeof(float) * (nr + 1) * c.emb_dim);
    dev_download(d, hr, rows, nr * sizeof(int64_t), &e);
    dev_download(d, hg, rg, nr * c.emb_dim * sizeof(float), &e);
    struct ref r = {m, &c, malloc(np * sizeof(double))};
    for (size_t i = 0; i < np; i++) r.p[i] = pf[i];
    double L0 = ref_loss(&r, &b, 1.0);
    CHECK_MSG(fabs(loss.sum - L0) < 1e-5 * fmax(1, fabs(L0)), "loss %.9g vs float64 %.9g", loss.sum, L0);
    const double h = 1e-6;
    double worst = 0;
    size_t worst_i = 0;
    for (size_t i = 0; i < nd; i++) {
        double s = r.p[i];
        r.p[i] = s + h;
        double lp = ref_loss(&r, &b, gs);
        r.p[i] = s - h;
        double lm = ref_loss(&r, &b, gs);
        r.p[i] = s;
        double fd = (lp - lm) / (2 * h);
        double err = fabs(gd[i] - fd) / fmax(1e-3, fabs(fd));
        if (err > worst) worst = err, worst_i = i;
    }
    CHECK_MSG(worst < 2e-3, "dense gradient worst relative error %g at %zu", worst, worst_i);
    /* sparse: every table entry; untouched (or masked-only) rows have no entry */
    int D = c.emb_dim;
    double worst_s = 0;
    for (int64_t row = 0; row < ctr_table_rows(m); row++)
        for (int k = 0; k < D; k++) {
            size_t i = nd + (size_t)row * D + k;
            double s = r.p[i];
            r.p[i] = s + h;
            double lp = ref_loss(&r, &b, gs);
            r.p[i] = s - h;
            double lm = ref_loss(&r, &b, gs);
            r.p[i] = s;
            double fd = (lp - lm) / (2 * h), got = 0;
            int found = 0;
            for (size_t u = 0; u < nr; u++)
                if (hr[u] == row) got = hg[u * D + k], found = 1;
            if (!found) CHECK_MSG(fd == 0, "row %lld has gradient %g but no sparse entry", (long long)row, fd);
            worst_s = fmax(worst_s, fabs(got - fd) / fmax(1e-3, fabs(fd)));
        }
    CHECK_MSG(worst_s < 2e-3, "sparse gradient worst relative error %g", worst_s);
    for (size_t u = 1; u < nr; u++) CHECK(hr[u] > hr[u - 1]);

    /* contract: a second call overwrites (same batch -> same gradient bits) */
    REQUIRE(ctr_forward_backward(m, &b, gs, NULL, &e) == 0);
    float *gd2 = malloc(nd * sizeof(float));
    dev_download(d, gd2, ctr_grads(m), nd * sizeof(float), &e);
    CHECK(memcmp(gd, gd2, nd * sizeof(float)) == 0);
    /* predict gives sigmoid of the same logits and the same loss */
    float sc[B], lg[B];
    struct ctr_loss l2;
    REQUIRE(ctr_predict(m, &b, sc, lg, &l2, &e) == 0);
    CHECK(l2.sum == loss.sum && l2.count == NV);
    for (int i = 0; i < B; i++) {
        double zz = ref_logit(&r, dense + i * 13, sp + i * 26);
        CHECK_NEAR(lg[i], zz, 1e-4 * fmax(1, fabs(zz)));
        CHECK_NEAR(sc[i], 1 / (1 + exp(-zz)), 1e-5);
    }
    free(pf); free(gd); free(gd2); free(hr); free(hg); free(r.p);
    ctr_free(m);
    dev_close(d);
}
TEST(ctr_gradient_fd_fast) { check_model_fd(NUMERICS_FAST); }
TEST(ctr_gradient_fd_golden) { check_model_fd(NUMERICS_GOLDEN); }

/* bf16: the same model's loss and gradient stay close to fp32 */
TEST(ctr_bf16_close_to_fp32)
{
    struct dev *d = open_cpu(NUMERICS_GOLDEN, 0);
    if (!d) TEST_SKIP("no training ops on %s", test_device());
    struct ctr_config c = small_config(8, 32, 32, 50);
    plumb_err e = {0};
    struct ctr_model *m32 = NULL, *m16 = NULL;
    REQUIRE(ctr_create(d, &c, 64, DT_F32, &m32, &e) == 0);
    REQUIRE(ctr_create(d, &c, 64, DT_BF16, &m16, &e) == 0);
    rs = 99;
    host_init(m32, 1.0);
    size_t np = ctr_n_params(m32), nd = ctr_n_dense(m32);
    d2d(d, ctr_params(m16), ctr_params(m32), np * sizeof(float));
    float dense[64 * 13], lab[64];
    uint32_t sp[64 * 26];
    make_batch(64, &c, dense, sp, lab);
    struct ctr_batch b = {64, 64, dense, sp, lab};
    struct ctr_loss l32, l16;
    REQUIRE(ctr_forward_backward(m32, &b, 1.0f / 64, &l32, &e) == 0);
    REQUIRE(ctr_forward_backward(m16, &b, 1.0f / 64, &l16, &e) == 0);
    CHECK(l16.sum != l32.sum);
    CHECK_NEAR(l16.sum, l32.sum, 0.02 * fabs(l32.sum));
    float *g32 = malloc(nd * sizeof(float)), *g16 = malloc(nd * sizeof(float));
    dev_download(d, g32, ctr_grads(m32), nd * sizeof(float), &e);
    dev_download(d, g16, ctr_grads(m16), nd * sizeof(float), &e);
    double dot = 0, n1 = 0, n2 = 0;
    for (size_t i = 0; i < nd; i++) dot += (double)g32[i] * g16[i], n1 += (double)g32[i] * g32[i], n2 += (double)g16[i] * g16[i];
    CHECK_MSG(dot / sqrt(n1 * n2) > 0.99, "bf16 vs fp32 gradient cosine %g", dot / sqrt(n1 * n2));
    free(g32);
    free(g16);
    ctr_free(m32);
    ctr_free(m16);
    dev_close(d);
}

/* A few golden SGD steps: the same digest with 1 and 2 threads. */
static int golden_digest(int threads, char hex[65])
{
    struct dev *d = open_cpu(NUMERICS_GOLDEN, threads);
    if (!d) return -1;
    struct ctr_config c = small_config(8, 32, 16, 40);
    plumb_err e = {0};
    struct ctr_model *m = NULL;
    if (ctr_create(d, &c, 48, DT_F32, &m, &e)) return 1;
    rs = 4242;
    host_init(m, 1.0);
    float dense[48 * 13], lab[48];
    uint32_t sp[48 * 26];
    struct optim o;
    int rc = optim_init(&o, d, ctr_layout(m), "sgd", 0.0, 0.0, 0.9, 0.999, 1e-8, &e);
    for (int s = 1; s <= 4 && !rc; s++) {
        make_batch(48, &c, dense, sp, lab);
        struct ctr_batch b = {48, 40, dense, sp, lab};
        rc = ctr_forward_backward(m, &b, 1.0f / 40, NULL, &e);
        int64_t *rows;
        float *rg;
        size_t nr;
        ctr_sparse_grads(m, &rows, &rg, &nr);
        if (!rc) rc = optim_step(&o, ctr_params(m), ctr_grads(m), rows, rg, nr, 0.1f, s, &e);
    }
    if (!rc) rc = ctr_param_digest(m, hex, &e);
    optim_free(&o);
    ctr_free(m);
    dev_close(d);
    return rc;
}

TEST(ctr_golden_digest_thread_independent)
{
    char a[65], b[65];
    cpu_train_par_scale = 0.0; /* every op splits its work, however small */
    int ra = golden_digest(1, a), rb = golden_digest(2, b);
    cpu_train_par_scale = 1.0;
    if (ra < 0) TEST_SKIP("no training ops on %s", test_device());
    REQUIRE(ra == 0);
    REQUIRE(rb == 0);
    CHECK_STREQ(a, b);
    CHECK(strlen(a) == 64);
}

/* The digest is the SHA-256 of the fp32 parameter buffer. */
TEST(ctr_param_digest_is_sha256_of_params)
{
    struct dev *d = open_cpu(NUMERICS_FAST, 0);
    if (!d) TEST_SKIP("no training ops on %s", test_device());
    struct ctr_config c = small_config(4, 8, 8, 10);
    plumb_err e = {0};
    struct ctr_model *m = NULL;
    REQUIRE(ctr_create(d, &c, 4, DT_F32, &m, &e) == 0);
    host_init(m, 1.0);
    size_t np = ctr_n_params(m);
    float *p = malloc(np * sizeof(float));
    dev_download(d, p, ctr_params(m), np * sizeof(float), &e);
    char want[65], got[65];
    hash_sha256_hex(p, np * sizeof(float), want);
    REQUIRE(ctr_param_digest(m, got, &e) == 0);
    CHECK_STREQ(got, want);
    free(p);
    ctr_free(m);
    dev_close(d);
}

/* ctr_init follows models/ctr/ctr.h: the per-tensor spread, and every value is
 * the documented function of Philox (checked bit for bit against
 * core/philox.h evaluated here, whether the device or the host drew them). */
TEST(ctr_init_scales)
{
    struct dev *d = open_cpu(NUMERICS_FAST, 0);
    if (!d) TEST_SKIP("no training ops on %s", test_device());
    struct ctr_config c;
    plumb_err e = {0};
    REQUIRE(ctr_config_preset("ctr-tiny", 2000, &c, &e) == 0);
    struct ctr_model *m = NULL;
    REQUIRE(ctr_create(d, &c, 4, DT_F32, &m, &e) == 0);
    REQUIRE(ctr_init(m, 1, &e) == 0);
    size_t np = ctr_n_params(m);
    float *p = malloc(np * sizeof(float));
    dev_download(d, p, ctr_params(m), np * sizeof(float), &e);
    for (int i = 0; i < ctr_n_tensors(m); i++) {
        const struct model_tensor *t = ctr_tensor(m, i);
        double s2 = 0, mx = 0;
        for (size_t k = 0; k < t->numel; k++) s2 += (double)p[t->offset + k] * p[t->offset + k], mx = fmax(mx, fabs(p[t->offset + k]));
        double sd = sqrt(s2 / t->numel);
        if ((t->flags & TENSOR_SPARSE)) {
            double bound = sqrt(1.0 / t->rows);
            CHECK(mx <= bound);
            CHECK_NEAR(sd, bound / sqrt(3.0), 0.05 * bound);
        } else if (t->numel >= 500) {
            double want = strstr(t->name, "weight") ? sqrt(2.0 / (t->rows + t->cols)) : sqrt(1.0 / t->cols);
            CHECK_MSG(fabs(sd - want) < 0.1 * want, "%s: sd %g, want %g", t->name, sd, want);
        }
    }
    long mismatch = 0;
    for (int i = 0; i < ctr_n_tensors(m); i++) {
        const struct model_tensor *t = ctr_tensor(m, i);
        size_t step = t->numel > 5000 ? t->numel / 4999 : 1;
        for (size_t k = 0; k < t->numel; k += step) {
            float want;
            if ((t->flags & TENSOR_SPARSE)) {
                float s = (float)sqrt(1.0 / t->rows);
                want = fmaf(2.0f * s, philox_uniform_at(1, RNG_INIT, (uint32_t)i, 0, k), -s);
            } else {
                float sd = (float)(strstr(t->name, ".weight") ? sqrt(2.0 / (t->rows + t->cols)) : sqrt(1.0 / t->cols));
                want = fmaf(sd, philox_normal_at(1, RNG_INIT, (uint32_t)i, 0, k), 0.0f);
            }
            mismatch += f32_bits(want) != f32_bits(p[t->offset + k]);
        }
        if (i + 1 < ctr_n_tensors(m) && !(t->flags & TENSOR_SPARSE))
            for (size_t k = t->offset + t->numel; k < ctr_tensor(m, i + 1)->offset; k++) mismatch += p[k] != 0.0f;
    }
    CHECK_EQ_INT(mismatch, 0);
    char h1[65], h2[65];
    REQUIRE(ctr_param_digest(m, h1, &e) == 0);
    REQUIRE(ctr_init(m, 1, &e) == 0);
    REQUIRE(ctr_param_digest(m, h2, &e) == 0);
    CHECK_STREQ(h1, h2);
    REQUIRE(ctr_init(m, 2, &e) == 0);
    REQUIRE(ctr_param_digest(m, h2, &e) == 0);
    CHECK(strcmp(h1, h2) != 0);
    free(p);
    ctr_free(m);
    dev_close(d);
}

/* ctr-tiny-shaped model learns a planted rule: the log loss on a fixed
 * held-out set falls. */
static void planted(int B, float *dense, uint32_t *sp, float *lab)
{
    for (int i = 0; i < B; i++) {
        for (int k = 0; k < 13; k++) dense[i * 13 + k] = (float)(2 * ur());
        for (int t = 0; t < 26; t++) sp[i * 26 + t] = (uint32_t)(ur() * 500);
        double logit = 2.0 * (dense[i * 13] - 1.0) + (sp[i * 26 + 3] < 250 ? 1.5 : -1.5) +
                       (sp[i * 26 + 7] % 2 ? 1.0 : -1.0);
        lab[i] = ur() < 1 / (1 + exp(-logit)) ? 1.0f : 0.0f;
    }
}

static double heldout_loss(struct ctr_model *m, const float *dense, const uint32_t *sp, const float *lab, int n,
                           int B)
{
    double sum = 0;
    plumb_err e = {0};
    for (int i = 0; i < n; i += B) {
        struct ctr_batch b = {B, B, dense + i * 13, sp + i * 26, lab + i};
        struct ctr_loss l;
        if (ctr_predict(m, &b, NULL, NULL, &l, &e)) return NAN;
        sum += l.sum;
    }
    return sum / n;
}

static void check_learns(const char *kind, float lr, double want_drop, double want_below)
{
    struct dev *d = open_cpu(NUMERICS_FAST, 0);
    if (!d) TEST_SKIP("no training ops on %s", test_device());
    struct ctr_config c;
    plumb_err e = {0};
    REQUIRE(ctr_config_preset("ctr-tiny", 500, &c, &e) == 0);
    struct ctr_model *m = NULL;
    enum { B = 128, NE = 2048 };
    REQUIRE(ctr_create(d, &c, B, DT_F32, &m, &e) == 0);
    rs = 5;
    host_init(m, 1.0);
    static float ed[NE * 13], el[NE];
    static uint32_t es[NE * 26];
    planted(NE, ed, es, el);
    double before = heldout_loss(m, ed, es, el, NE, B);
    float dense[B * 13], lab[B];
    uint32_t sp[B * 26];
    struct optim o;
    REQUIRE(optim_init(&o, d, ctr_layout(m), kind, 0.0, 0.0, 0.9, 0.999, 1e-8, &e) == 0);
    for (int s = 1; s <= 300; s++) {
        planted(B, dense, sp, lab);
        struct ctr_batch b = {B, B, dense, sp, lab};
        REQUIRE(ctr_forward_backward(m, &b, 1.0f / B, NULL, &e) == 0);
        int64_t *rows;
        float *rg;
        size_t nr;
        ctr_sparse_grads(m, &rows, &rg, &nr);
        REQUIRE(optim_step(&o, ctr_params(m), ctr_grads(m), rows, rg, nr, lr, s, &e) == 0);
    }
    double after = heldout_loss(m, ed, es, el, NE, B);
    CHECK_MSG(after < before - want_drop && after < want_below, "held-out loss %g -> %g", before, after);
    optim_free(&o);
    ctr_free(m);
    dev_close(d);
}
TEST(ctr_learns_sgd) { check_learns("sgd", 0.5f, 0.04, 0.66); }
TEST(ctr_learns_adamw) { check_learns("adamw", 0.003f, 0.1, 0.55); }

/* fp16 storage: an activation gradient past 65504 becomes inf, and the
 * gradients carry it so the loss scaler's check sees it; fp32 stays finite. */
TEST(ctr_fp16_overflow_reaches_gradients)
{
    struct dev *d = open_cpu(NUMERICS_FAST, 0);
    if (!d) TEST_SKIP("no training ops on %s", test_device());
    struct ctr_config c = small_config(8, 16, 16, 20);
    plumb_err e = {0};
    struct ctr_model *m16 = NULL, *m32 = NULL;
    REQUIRE(ctr_create(d, &c, 16, DT_F16, &m16, &e) == 0);
    REQUIRE(ctr_create(d, &c, 16, DT_F32, &m32, &e) == 0);
    rs = 31;
    host_init(m16, 1.0);
    d2d(d, ctr_params(m32), ctr_params(m16), ctr_n_params(m16) * sizeof(float));
    float dense[16 * 13], lab[16];
    uint32_t sp[16 * 26];
    make_batch(16, &c, dense, sp, lab);
    struct ctr_batch b = {16, 16, dense, sp, lab};
    int *found = NULL;
    REQUIRE(dev_alloc(d, sizeof(int), (void **)&found, &e) == 0);
    const float huge = 1e7f; /* loss scale far too large for fp16 */
    int f16 = 0, f32 = 0, zero = 0;
    REQUIRE(ctr_forward_backward(m16, &b, huge, NULL, &e) == 0);
    dev_upload(d, found, &zero, sizeof zero, &e);
    REQUIRE(d->ops->train->scale_check(d, NULL, ctr_grads(m16), ctr_n_dense(m16), 1.0f, found, &e) == 0);
    dev_download(d, &f16, found, sizeof f16, &e);
    REQUIRE(ctr_forward_backward(m32, &b, huge, NULL, &e) == 0);
    dev_upload(d, found, &zero, sizeof zero, &e);
    REQUIRE(d->ops->train->scale_check(d, NULL, ctr_grads(m32), ctr_n_dense(m32), 1.0f, found, &e) == 0);
    dev_download(d, &f32, found, sizeof f32, &e);
    CHECK_EQ_INT(f16, 1);
    CHECK_EQ_INT(f32, 0);
    /* with a modest scale fp16 is finite */
    REQUIRE(ctr_forward_backward(m16, &b, 8.0f, NULL, &e) == 0);
    dev_upload(d, found, &zero, sizeof zero, &e);
    REQUIRE(d->ops->train->scale_check(d, NULL, ctr_grads(m16), ctr_n_dense(m16), 1.0f, found, &e) == 0);
    dev_download(d, &f16, found, sizeof f16, &e);
    CHECK_EQ_INT(f16, 0);
    dev_free(d, found);
    ctr_free(m16);
    ctr_free(m32);
    dev_close(d);
}

/* The gradient-ready hook: ranges in backward order tile ctr_grads() exactly
 * once, each holds its final values when reported (grads prefilled with NaN;
 * the snapshot taken in the hook equals the buffer after the whole backward),
 * and the layers below the reported one are still untouched then. */
struct hook_rec {
    struct dev *d;
    const float *grads;
    size_t nd;
    int n, fail_at;
    int k[2 * CTR_MAX_LAYERS];
    size_t off[2 * CTR_MAX_LAYERS], len[2 * CTR_MAX_LAYERS];
    float *snap[2 * CTR_MAX_LAYERS];
    int below_untouched[2 * CTR_MAX_LAYERS];
};

static int hook_fn(void *ctx, int k, size_t off, size_t len, dev_stream *s, plumb_err *e)
{
    struct hook_rec *h = ctx;
    (void)s;
    if (h->n == h->fail_at) return err_set(e, PLUMB_EDEVICE, "hook failure at layer %d", k);
    int i = h->n++;
    h->k[i] = k, h->off[i] = off, h->len[i] = len;
    h->snap[i] = malloc(len * sizeof(float));
    dev_download(h->d, h->snap[i], h->grads + off, len * sizeof(float), e);
    /* everything below off still holds the NaN fill */
    float *below = malloc((off ? off : 1) * sizeof(float));
    dev_download(h->d, below, h->grads, off * sizeof(float), e);
    int untouched = 1;
    for (size_t j = 0; j < off; j++) untouched &= isnan(below[j]);
    h->below_untouched[i] = untouched;
    free(below);
    return PLUMB_OK;
}

TEST(ctr_grad_ready_hook)
{
    struct dev *d = open_cpu(NUMERICS_FAST, 0);
    if (!d) TEST_SKIP("no training ops on %s", test_device());
    struct ctr_config c = small_config(8, 24, 20, 30);
    c.n_bottom = 3; /* 13-24-12-8 */
    c.bottom[2] = 12;
    c.bottom[3] = 8;
    plumb_err e = {0};
    struct ctr_model *m = NULL;
    REQUIRE(ctr_create(d, &c, 32, DT_F32, &m, &e) == 0);
    rs = 4242;
    host_init(m, 1.0);
    size_t nd = ctr_n_dense(m);
    size_t loff[2 * CTR_MAX_LAYERS], llen[2 * CTR_MAX_LAYERS];
    int nl = ctr_grad_layers(m, loff, llen);
    CHECK_EQ_INT(nl, 5);
    float dense[32 * 13], lab[32];
    uint32_t sp[32 * 26];
    make_batch(32, &c, dense, sp, lab);
    struct ctr_batch b = {32, 30, dense, sp, lab};
    struct hook_rec h;
    memset(&h, 0, sizeof h);
    h.d = d, h.grads = ctr_grads(m), h.nd = nd, h.fail_at = -1;
    REQUIRE(d->be->memset_async(d, NULL, ctr_grads(m), 0xff, nd * sizeof(float), &e) == 0); /* NaN */
    ctr_set_grad_ready_hook(m, hook_fn, &h);
    REQUIRE(ctr_forward_backward(m, &b, 1.0f / 30, NULL, &e) == 0);
    float *fin = malloc(nd * sizeof(float));
    REQUIRE(dev_download(d, fin, ctr_grads(m), nd * sizeof(float), &e) == 0);
    REQUIRE(h.n == nl);
    size_t end = nd, covered = 0;
    for (int i = 0; i < h.n; i++) {
        CHECK_EQ_INT(h.k[i], i);
        CHECK_MSG(h.off[i] == loff[i] && h.len[i] == llen[i], "layer %d: [%zu,+%zu) vs listed [%zu,+%zu)", i,
                  h.off[i], h.len[i], loff[i], llen[i]);
        CHECK_MSG(h.off[i] + h.len[i] == end, "layer %d ends at %zu, expected %zu", i, h.off[i] + h.len[i], end);
        CHECK(h.len[i] > 0);
        end = h.off[i];
        covered += h.len[i];
        CHECK_MSG(!memcmp(h.snap[i], fin + h.off[i], h.len[i] * sizeof(float)),
                  "layer %d: values at report time differ from the final gradient", i);
        CHECK_MSG(h.below_untouched[i], "layer %d: gradients below it were written before it was reported", i);
        free(h.snap[i]);
    }
    CHECK(end == 0);
    CHECK(covered == nd);
    /* the final gradient is finite and not all zero (the snapshots compared real values) */
    int finite = 1, nonzero = 0;
    for (int i = 0; i < ctr_n_tensors(m); i++) {
        const struct model_tensor *t = ctr_tensor(m, i);
        if ((t->flags & TENSOR_SPARSE)) continue;
        for (size_t j = t->offset; j < t->offset + t->numel; j++) finite &= isfinite(fin[j]) != 0, nonzero |= fin[j] != 0;
    }
    CHECK(finite && nonzero);
    /* a failing hook ends the backward with its error */
    memset(&h, 0, sizeof h);
    h.d = d, h.grads = ctr_grads(m), h.nd = nd, h.fail_at = 2;
    int rc = ctr_forward_backward(m, &b, 1.0f / 30, NULL, &e);
    CHECK_EQ_INT(rc, PLUMB_EDEVICE);
    CHECK(strstr(e.msg, "hook failure at layer 2") != NULL);
    for (int i = 0; i < h.n; i++) free(h.snap[i]);
    ctr_set_grad_ready_hook(m, NULL, NULL);
    free(fin);
    ctr_free(m);
    dev_close(d);
}

/* On the cpu the optional ops are the compositions of the fp32 ops
 * (src/dev/cpu_train_fused.c), so the model's 16-bit-mirror path (fast
 * bf16/fp16: hidden activations and their gradients held only as mirrors,
 * the interaction's 16-bit output, the fused ReLU backward) and its fused
 * sparse SGD must end with the bits of the plain path (PLUMB_TRAIN_MIRRORS=0,
 * the sparse gradient listed and applied by ctr_opt_step). Widths 100 and 36
 * (not multiples of 8: fp32 tensors with padded mirrors) next to 64 and 16
 * (mirror only). */
static int mirror_run(enum numerics mode, dtype_t prec, int mirrors, int fused, char hex[65])
{
    struct dev *d = NULL;
    plumb_err e = {0};
    if (dev_open("cpu", &d, &e) || dev_set_numerics(d, mode, 0, &e)) return 1;
    struct ctr_config c = small_config(16, 100, 36, 30);
    c.n_bottom = 3;
    c.bottom[2] = 64;
    c.bottom[3] = 16;
    c.n_top = 3;
    c.top[2] = 16;
    c.top[3] = 1;
    if (ctr_config_validate(&c, &e)) return 1;
    if (mirrors) unsetenv("PLUMB_TRAIN_MIRRORS");
    else setenv("PLUMB_TRAIN_MIRRORS", "0", 1);
    struct ctr_model *m = NULL;
    int rc = ctr_create(d, &c, 72, prec, &m, &e);
    unsetenv("PLUMB_TRAIN_MIRRORS");
    if (rc) return 1;
    rs = 777;
    host_init(m, 1.0);
    float dense[72 * 13], lab[72];
    uint32_t sp[72 * 26];
    struct optim o;
    const float lr = 0.2f;
    rc = optim_init(&o, d, ctr_layout(m), "sgd", 0.0, 0.0, 0.9, 0.999, 1e-8, &e);
    for (int s = 1; s <= 4 && !rc; s++) {
        make_batch(72, &c, dense, sp, lab);
        struct ctr_batch b = {72, 65, dense, sp, lab};
        if (fused) rc = ctr_fuse_sparse_sgd(m, lr, fused == 2, NULL, NULL, &e);
        if (!rc) rc = ctr_forward_backward(m, &b, 1.0f / 65, NULL, &e);
        int64_t *rows;
        float *rg;
        size_t nr;
        ctr_sparse_grads(m, &rows, &rg, &nr);
        /* fused and kept (for a norm): the list is there, and already applied */
        if (fused == 2 && !rc && nr == 0) rc = 1, snprintf(e.msg, sizeof e.msg, "fused, kept: no list left");
        if (fused) nr = 0;
        if (!rc) rc = optim_step(&o, ctr_params(m), ctr_grads(m), rows, rg, nr, lr, s, &e);
    }
    optim_free(&o);
    if (!rc) rc = ctr_param_digest(m, hex, &e);
    if (rc) fprintf(stderr, "  mirror_run: %s\n", e.msg);
    ctr_free(m);
    dev_close(d);
    return rc;
}

TEST(ctr_cpu_mirrors_and_fused_sgd_keep_the_bits)
{
    const dtype_t precs[] = {DT_BF16, DT_F16, DT_F32};
    for (int mode = 0; mode < 2; mode++)
        for (int p = 0; p < 3; p++) {
            const enum numerics nm = mode ? NUMERICS_GOLDEN : NUMERICS_FAST;
            char plain[65], mir[65], fus[65], kept[65];
            REQUIRE(mirror_run(nm, precs[p], 0, 0, plain) == 0);
            REQUIRE(mirror_run(nm, precs[p], 1, 0, mir) == 0);
            REQUIRE(mirror_run(nm, precs[p], 1, 1, fus) == 0);
            REQUIRE(mirror_run(nm, precs[p], 1, 2, kept) == 0);
            fprintf(stderr, "  %s %s: plain %.16s mirrors %.16s fused sgd %.16s\n", mode ? "golden" : "fast",
                    dtype_name(precs[p]), plain, mir, fus);
            CHECK_STREQ(mir, plain);
            CHECK_STREQ(fus, plain);
            CHECK_STREQ(kept, plain);
        }
}
