/* models/gpt: presets and layout (GPT-2 124M's known parameter count), init,
 * the whole model's loss against a float64 GPT-2 written here and its
 * gradient against central finite differences of that reference, the
 * gradient contract (overwrite, ignored targets), golden thread-count
 * independence, the grad-ready ranges, and 16-bit compute near fp32. */
#include "test.h"
#include "core/philox.h"
#include "dev/dev.h"
#include "dev/train_ops.h"
#include "models/gpt/gpt.h"
#include <stdlib.h>

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

TEST(gpt_presets_and_layout)
{
    struct gpt_config c;
    plumb_err e = {0};
    REQUIRE(gpt_config_preset("gpt2-124m", &c, &e) == 0);
    CHECK_EQ_INT(c.n_layer, 12);
    CHECK_EQ_INT(c.n_embd, 768);
    CHECK_EQ_INT(c.vocab_padded, 50304);
    char desc[96];
    gpt_config_describe(&c, desc, sizeof desc);
    CHECK_STREQ(desc, "L12 H12 C768 T1024 V50257 (padded 50304)");
    CHECK(gpt_config_preset("gpt-huge", &c, &e) == PLUMB_EUSAGE);
    CHECK(strstr(e.msg, "gpt-huge") != NULL);
    REQUIRE(gpt_config_preset("gpt-tiny", &c, &e) == 0);
    c.n_embd = 66;
    CHECK(gpt_config_validate(&c, &e) == PLUMB_EUSAGE);
    CHECK(strstr(e.msg, "width 66 with 4 heads") != NULL);

    /* the 124M layout, without allocating it */
    REQUIRE(gpt_config_preset("gpt2-124m", &c, &e) == 0);
    static struct gpt_tensor ts[160];
    int nt = 0;
    size_t np = 0;
    REQUIRE(gpt_layout(&c, ts, 160, &nt, &np, &e) == 0);
    CHECK_EQ_INT(nt, 2 + 12 * 12 + 2);
    size_t total = 0, decayed = 0, nonemb = 0;
    for (int i = 0; i < nt; i++) {
        CHECK(ts[i].offset % 16 == 0);
        total += ts[i].numel;
        if (ts[i].decay) decayed += ts[i].numel;
        if (i >= 2) nonemb += ts[i].numel;
    }
    /* llm.c's count for GPT-2 124M with the vocabulary padded to 50304 */
    CHECK_EQ_INT(total, 124475904);
    CHECK_EQ_INT(nonemb, 124475904 - 50304 * 768 - 1024 * 768);
    CHECK_STREQ(ts[4].name, "h.0.attn.c_attn.weight");
    CHECK_EQ_INT(ts[4].rows, 2304);
    CHECK_STREQ(ts[nt - 3].name, "h.11.mlp.c_proj.bias");
    /* decay: matrices only (wte, wpe and the four weights of every block) */
    CHECK_EQ_INT(decayed, 50304 * 768 + 1024 * 768 + 12 * (768 * 2304 + 768 * 768 + 768 * 3072 * 2));
    CHECK(gpt_layout(&c, ts, 100, &nt, &np, &e) == PLUMB_EUSAGE);

    /* a small model on the device: accessors, decay ranges, FLOPs, hook ranges */
    struct dev *d = open_mode(NUMERICS_FAST, 0);
    if (!d) TEST_SKIP("no transformer ops on %s", test_device());
    c = (struct gpt_config){"test", 3, 2, 16, 8, 50, 64};
    struct gpt_model *m = NULL;
    REQUIRE(gpt_create(d, &c, 1, DT_F32, &m, &e) == 0);
    CHECK(gpt_tensor_named(m, "ln_f.bias") == gpt_tensor(m, gpt_n_tensors(m) - 1));
    int nr = 0;
    const int64_t *dec = gpt_decay_ranges(m, &nr);
    size_t dsum = 0, want = 0;
    for (int j = 0; j < nr; j++) {
        dsum += (size_t)(dec[2 * j + 1] - dec[2 * j]);
        if (j) CHECK(dec[2 * j] > dec[2 * j - 1]);
    }
    for (int i = 0; i < gpt_n_tensors(m); i++)
        if (gpt_tensor(m, i)->decay) want += gpt_tensor(m, i)->numel;
    CHECK_EQ_INT(dsum, want); /* ranges merge only where tensors touch: no padding decays */
    CHECK_NEAR(gpt_flops_per_token(m, 8), 6.0 * gpt_n_nonembedding(m) + 12.0 * 3 * 8 * 16, 1e-6);
    size_t off[16], len[16];
    int k = gpt_grad_layers(m, off, len);
    CHECK_EQ_INT(k, 5);
    size_t cover = 0;
    for (int i = 0; i < k; i++) {
        cover += len[i];
        if (i) CHECK(off[i] + len[i] == off[i - 1]);
    }
    CHECK_EQ_INT(off[k - 1], 0);
    CHECK_EQ_INT(cover, gpt_n_params(m));
    gpt_free(m);
    dev_close(d);
}

TEST(gpt_init_is_gpt2s)
{
    struct dev *d = open_mode(NUMERICS_FAST, 0);
    if (!d) TEST_SKIP("no transformer ops on %s", test_device());
    struct gpt_config c = {"test", 3, 2, 8, 6, 11, 16};
    struct gpt_model *m = NULL;
    plumb_err e = {0};
    REQUIRE(gpt_create(d, &c, 2, DT_F32, &m, &e) == 0);
    REQUIRE(gpt_init(m, 42, &e) == 0);
    float *p = malloc(gpt_n_params(m) * sizeof(float));
    REQUIRE(dev_download(d, p, gpt_params(m), gpt_n_params(m) * sizeof(float), &e) == 0);
    const float sres = (float)(0.02 / sqrt(6.0));
    int bad = 0;
    for (int i = 0; i < gpt_n_tensors(m); i++) {
        const struct gpt_tensor *t = gpt_tensor(m, i);
        for (size_t j = 0; j < t->numel; j++) {
            float want;
            if (!t->decay) want = strstr(t->name, "ln_") && strstr(t->name, ".weight") ? 1.0f : 0.0f;
            else if (i == 0 && j >= (size_t)11 * 8) want = 0.0f; /* padding rows of wte */
            else want = fmaf(strstr(t->name, "c_proj.weight") ? sres : 0.02f, philox_normal_at(42, RNG_INIT, (uint32_t)i, 0, j), 0.0f);
            bad += f32_bits(p[t->offset + j]) != f32_bits(want);
        }
    }
    CHECK_EQ_INT(bad, 0);
    free(p);
    gpt_free(m);
    dev_close(d);
}

/* ---------------- a float64 GPT-2 ---------------- */

struct ref {
    int L, NH, C, T, V, Vp, B;
    const int32_t *tok, *tgt;
    double *p; /* parameters, the model's layout (offsets of gpt_tensor) */
    size_t off[2 + 12 * 4 + 2];
};

static void ref_ln(const double *x, const double *w, const double *b, double *y, int C)
{
    double mu = 0, var = 0;
    for (int i = 0; i < C; i++) mu += x[i];
    mu /= C;
    for (int i = 0; i < C; i++) var += (x[i] - mu) * (x[i] - mu);
    var /= C;
    const double rs = 1 / sqrt(var + 1e-5);
    for (int i = 0; i < C; i++) y[i] = (x[i] - mu) * rs * w[i] + b[i];
}
static void ref_lin(const double *x, const double *w, const double *b, double *y, int K, int N)
{
    for (int n = 0; n < N; n++) {
        double a = b[n];
        for (int k = 0; k < K; k++) a += x[k] * w[n * K + k];
        y[n] = a;
    }
}
static double ref_gelu(double x) { return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

/* mean cross-entropy over the scored positions */
static double ref_loss(const struct ref *r)
{
    const int C = r->C, T = r->T, HS = C / r->NH;
    double *x = calloc((size_t)T * C, 8), *h = calloc((size_t)T * 4 * C, 8), *qkv = calloc((size_t)T * 3 * C, 8);
    double *att = calloc((size_t)T * C, 8), *o = calloc((size_t)4 * C, 8), *z = calloc(r->V, 8);
    double tot = 0;
    long cnt = 0;
#define PP(i) (r->p + r->off[i])
    for (int b = 0; b < r->B; b++) {
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++) x[t * C + c] = PP(0)[r->tok[b * T + t] * C + c] + PP(1)[t * C + c];
        for (int l = 0; l < r->L; l++) {
            const int q = 2 + 12 * l;
            for (int t = 0; t < T; t++) {
                ref_ln(x + t * C, PP(q + 0), PP(q + 1), h, C);
                ref_lin(h, PP(q + 2), PP(q + 3), qkv + t * 3 * C, C, 3 * C);
            }
            for (int hd = 0; hd < r->NH; hd++)
                for (int t = 0; t < T; t++) {
                    double s[64], m = -1e300, l2 = 0;
                    for (int j = 0; j <= t; j++) {
                        double a = 0;
                        for (int i = 0; i < HS; i++) a += qkv[t * 3 * C + hd * HS + i] * qkv[j * 3 * C + C + hd * HS + i];
                        s[j] = a / sqrt((double)HS);
                        m = fmax(m, s[j]);
                    }
                    for (int j = 0; j <= t; j++) l2 += exp(s[j] - m);
                    for (int i = 0; i < HS; i++) {
                        double a = 0;
                        for (int j = 0; j <= t; j++) a += exp(s[j] - m) / l2 * qkv[j * 3 * C + 2 * C + hd * HS + i];
                        att[t * C + hd * HS + i] = a;
                    }
                }
            for (int t = 0; t < T; t++) {
                ref_lin(att + t * C, PP(q + 4), PP(q + 5), o, C, C);
                for (int c = 0; c < C; c++) x[t * C + c] += o[c];
                ref_ln(x + t * C, PP(q + 6), PP(q + 7), o, C);
                ref_lin(o, PP(q + 8), PP(q + 9), h, C, 4 * C);
                for (int i = 0; i < 4 * C; i++) h[i] = ref_gelu(h[i]);
                ref_lin(h, PP(q + 10), PP(q + 11), o, 4 * C, C);
                for (int c = 0; c < C; c++) x[t * C + c] += o[c];
            }
        }
        const int f = 2 + 12 * r->L;
        for (int t = 0; t < T; t++) {
            const int tg = r->tgt[b * T + t];
            if (tg < 0) continue;
            ref_ln(x + t * C, PP(f), PP(f + 1), o, C);
            double m = -1e300, l2 = 0;
            for (int v = 0; v < r->V; v++) {
                double a = 0;
                for (int c = 0; c < C; c++) a += o[c] * PP(0)[v * C + c];
                z[v] = a;
                m = fmax(m, a);
            }
            for (int v = 0; v < r->V; v++) l2 += exp(z[v] - m);
            tot += m + log(l2) - z[tg];
            cnt++;
        }
    }
#undef PP
    free(x), free(h), free(qkv), free(att), free(o), free(z);
    return tot / (double)cnt;
}

static void check_model_fd(enum numerics mode)
{
    struct dev *d = open_mode(mode, 0);
    if (!d) TEST_SKIP("no transformer ops on %s", test_device());
    struct gpt_config c = {"test", 2, 2, 8, 7, 11, 12};
    enum { B = 2, T = 5 }; /* shorter than the context */
    struct gpt_model *m = NULL;
    plumb_err e = {0};
    REQUIRE(gpt_create(d, &c, B, DT_F32, &m, &e) == 0);
    REQUIRE(gpt_init(m, 7, &e) == 0);
    /* larger weights than GPT-2's init so every path carries signal */
    const size_t n = gpt_n_params(m);
    float *p = malloc(n * 4);
    REQUIRE(dev_download(d, p, gpt_params(m), n * 4, &e) == 0);
    for (int i = 0; i < gpt_n_tensors(m); i++) {
        const struct gpt_tensor *t = gpt_tensor(m, i);
        for (size_t j = 0; j < t->numel; j++)
            p[t->offset + j] = t->decay ? p[t->offset + j] * 15.0f : p[t->offset + j] + 0.1f * philox_normal_at(3, 9, i, 0, j);
        if (i == 0) memset(p + (size_t)11 * 8, 0, 8 * sizeof(float)); /* padding row */
    }
    REQUIRE(dev_upload(d, gpt_params(m), p, n * 4, &e) == 0);
    int32_t tok[B * T] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3}, tgt[B * T] = {1, 4, 1, 5, -1, 2, 6, 5, 3, 10};
    struct gpt_batch bt = {B, B, T, tok, tgt};
    struct gpt_loss loss;
    REQUIRE(gpt_forward_backward(m, &bt, 1.0f / 9.0f, &loss, &e) == 0);
    CHECK_EQ_INT(loss.count, 9);
    float *g = malloc(n * 4);
    REQUIRE(dev_download(d, g, gpt_grads(m), n * 4, &e) == 0);
    struct ref r = {2, 2, 8, T, 11, 12, B, tok, tgt, malloc(n * 8), {0}};
    for (size_t i = 0; i < n; i++) r.p[i] = p[i];
    for (int i = 0; i < gpt_n_tensors(m); i++) r.off[i] = gpt_tensor(m, i)->offset;
    const double L0 = ref_loss(&r);
    CHECK_NEAR(loss.sum / (double)loss.count, L0, 2e-5 * fmax(1, L0));
    /* finite differences on every 3rd element of every tensor */
    const double h = 1e-5;
    double worst = 0;
    const char *wname = "";
    for (int i = 0; i < gpt_n_tensors(m); i++) {
        const struct gpt_tensor *t = gpt_tensor(m, i);
        for (size_t j = i % 3; j < t->numel; j += 3) {
            double *x = &r.p[t->offset + j], s = *x;
            *x = s + h;
            const double lp = ref_loss(&r);
            *x = s - h;
            const double lm = ref_loss(&r);
            *x = s;
            const double fd = (lp - lm) / (2 * h), gg = g[t->offset + j];
            const double err = fabs(fd - gg) / fmax(2e-3, fmax(fabs(fd), fabs(gg)));
            if (err > worst) worst = err, wname = t->name;
        }
    }
    CHECK_MSG(worst < 5e-4, "gradient vs finite differences: worst relative error %g in %s", worst, wname);
    if (getenv("PLUMB_TEST_VERBOSE")) fprintf(stderr, "  worst %g in %s\n", worst, wname);
    /* padding rows of wte and rows of wpe past T get no gradient */
    for (int k = 0; k < 8; k++) CHECK(g[11 * 8 + k] == 0.0f);
    for (size_t k = (size_t)T * 8; k < (size_t)7 * 8; k++) CHECK(g[gpt_tensor(m, 1)->offset + k] == 0.0f);
    /* overwrite, never accumulate: the same call again gives the same bits */
    float *g2 = malloc(n * 4);
    REQUIRE(gpt_forward_backward(m, &bt, 1.0f / 9.0f, &loss, &e) == 0);
    REQUIRE(dev_download(d, g2, gpt_grads(m), n * 4, &e) == 0);
    CHECK(!memcmp(g, g2, n * 4));
    /* predict: the same losses, per position, 0 where unscored */
    float ls[B * T];
    struct gpt_loss pl;
    REQUIRE(gpt_predict(m, &bt, ls, &pl, &e) == 0);
    CHECK_EQ_INT(pl.count, 9);
    CHECK(ls[4] == 0.0f);
    double s = 0;
    for (int i = 0; i < B * T; i++) s += ls[i];
    CHECK_NEAR(s, loss.sum, 1e-9);
    /* padding: sequence 1 masked (n_valid 1) gives the gradient of sequence 0
     * alone; golden chains add exact zeros for it, so the values are equal */
    if (mode == NUMERICS_GOLDEN) {
        struct gpt_batch pad = {B, 1, T, tok, tgt}, one = {1, 1, T, tok, tgt};
        struct gpt_loss lp, lo;
        REQUIRE(gpt_forward_backward(m, &pad, 0.25f, &lp, &e) == 0);
        REQUIRE(dev_download(d, g, gpt_grads(m), n * 4, &e) == 0);
        REQUIRE(gpt_forward_backward(m, &one, 0.25f, &lo, &e) == 0);
        REQUIRE(dev_download(d, g2, gpt_grads(m), n * 4, &e) == 0);
        CHECK_EQ_INT(lp.count, 4);
        CHECK(lp.count == lo.count && lp.sum == lo.sum);
        size_t diff = 0;
        for (size_t i = 0; i < n; i++) diff += g[i] != g2[i];
        CHECK_EQ_INT(diff, 0);
    }
    /* bad batches are named */
    tok[3] = 11;
    CHECK(gpt_forward_backward(m, &bt, 1.0f, NULL, &e) == PLUMB_EUSAGE);
    CHECK(strstr(e.msg, "sequence 0, position 3: token 11") != NULL);
    tok[3] = 1;
    struct gpt_batch longb = {1, 1, 8, tok, tgt};
    CHECK(gpt_forward_backward(m, &longb, 1.0f, NULL, &e) == PLUMB_EUSAGE);
    free(p), free(g), free(g2), free(r.p);
    gpt_free(m);
    dev_close(d);
}
TEST(gpt_model_gradient_fd_fast) { check_model_fd(NUMERICS_FAST); }
TEST(gpt_model_gradient_fd_golden) { check_model_fd(NUMERICS_GOLDEN); }

/* golden forward_backward: the same gradient bits with 1 and 2 threads (all
 * parallel paths), fp32 and bf16; bf16's loss near fp32's */
TEST(gpt_model_golden_threads_and_bf16)
{
    if (strncmp(test_device(), "cpu", 3)) TEST_SKIP("thread counts are the cpu backend's");
    struct gpt_config c;
    plumb_err e = {0};
    REQUIRE(gpt_config_preset("gpt-tiny", &c, &e) == 0);
    enum { B = 2, T = 32 };
    int32_t tok[B * T], tgt[B * T];
    for (int i = 0; i < B * T; i++) {
        tok[i] = (int32_t)(philox_u32_at(5, RNG_DATA, 0, 0, i) % 256);
        tgt[i] = (int32_t)(philox_u32_at(5, RNG_DATA, 0, 1, i) % 256);
    }
    struct gpt_batch bt = {B, B, T, tok, tgt};
    double lossv[2] = {0, 0};
    for (int prec = 0; prec < 2; prec++) {
        char dig[2][65];
        for (int th = 1; th <= 2; th++) {
            struct dev *d = open_mode(NUMERICS_GOLDEN, th);
            if (!d) TEST_SKIP("no transformer ops");
            cpu_train_par_scale = 0.0;
            struct gpt_model *m = NULL;
            REQUIRE(gpt_create(d, &c, B, prec ? DT_BF16 : DT_F32, &m, &e) == 0);
            REQUIRE(gpt_init(m, 1, &e) == 0);
            struct gpt_loss l;
            REQUIRE(gpt_forward_backward(m, &bt, 1.0f / (B * T), &l, &e) == 0);
            lossv[prec] = l.sum / (double)l.count;
            /* hash the gradient buffer: copy it into the parameters' place */
            float *tmp = malloc(gpt_n_params(m) * 4);
            dev_download(d, tmp, gpt_grads(m), gpt_n_params(m) * 4, &e);
            dev_upload(d, gpt_params(m), tmp, gpt_n_params(m) * 4, &e);
            free(tmp);
            REQUIRE(gpt_param_digest(m, dig[th - 1], &e) == 0);
            cpu_train_par_scale = 1.0;
            gpt_free(m);
            dev_close(d);
        }
        CHECK_MSG(!strcmp(dig[0], dig[1]), "%s gradient digests differ between 1 and 2 threads", prec ? "bf16" : "fp32");
    }
    /* random targets: about ln(256) at init; bf16 within its rounding */
    CHECK_NEAR(lossv[0], log(256.0), 0.1);
    CHECK_NEAR(lossv[1], lossv[0], 0.01);
}
