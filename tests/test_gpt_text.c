/* gpt-tiny learns real text: the bytes of a licence Debian ships
 * (/usr/share/common-licenses/GPL-3), the last 10% held out; the train
 * windows shuffled by the sampler, AdamW (0.9, 0.95), weight decay 0.1 on
 * the matrices, cosine learning rate with warmup, clipping at 1.0; the
 * validation loss over every held-out token exactly once (models/gpt/eval.h)
 * must fall well below ln(256) = 5.545, the loss of a uniform guess.
 * The optimizer loop here is test-local op calls standing in for the
 * trainer. In the suite: 80 steps of 8 x 64 tokens (val loss about 3.6);
 * PLUMB_GPT_TEXT_STEPS=N PLUMB_GPT_TEXT_BATCH=B train longer (the
 * demonstration run). */
#include "test.h"
#include "core/timer.h"
#include "dev/dev.h"
#include "dev/train_ops.h"
#include "models/gpt/data.h"
#include "models/gpt/eval.h"
#include "models/gpt/gpt.h"
#include "train/sampler.h"
#include <stdlib.h>
#include <unistd.h>

#define TEXT "/usr/share/common-licenses/GPL-3"

/* the validation loss over every val token once */
static double val_loss(struct gpt_model *m, const struct gpt_data *data, int B, int T, plumb_err *e)
{
    const long n = gpt_data_samples(data, GPT_VAL, T);
    int32_t *tok = malloc((size_t)B * T * 4), *tgt = malloc((size_t)B * T * 4);
    float *ls = malloc((size_t)B * T * 4);
    uint32_t *idx = malloc((size_t)B * 4);
    struct gpt_eval_acc acc = {0};
    for (long i0 = 0; i0 < n; i0 += B) {
        const int cnt = n - i0 < B ? (int)(n - i0) : B;
        for (int k = 0; k < cnt; k++) idx[k] = (uint32_t)(i0 + k);
        gpt_data_fill(data, GPT_VAL, T, 0, 0, idx, cnt, cnt, tok, tgt);
        struct gpt_batch bt = {cnt, cnt, T, tok, tgt};
        if (gpt_predict(m, &bt, ls, NULL, e)) break;
        gpt_eval_add(&acc, ls, tgt, (size_t)cnt * T);
    }
    free(tok), free(tgt), free(ls), free(idx);
    return gpt_eval_loss(&acc);
}

TEST(gpt_tiny_learns_text)
{
    if (access(TEXT, R_OK)) TEST_SKIP("%s not readable", TEXT);
    struct dev *d = NULL;
    plumb_err e = {0};
    if (dev_open(test_device(), &d, &e) || dev_set_numerics(d, NUMERICS_FAST, 0, &e) || !d->ops->train ||
        !d->ops->train->attention_fwd) {
        if (d) dev_close(d);
        TEST_SKIP("device %s has no transformer ops", test_device());
    }
    /* one thread in the suite (a shared 2-core machine spends more time in
     * OpenMP barriers than in these small ops); PLUMB_GPT_TEXT_THREADS=0: all cores */
    const char *envt = getenv("PLUMB_GPT_TEXT_THREADS");
    d->threads = envt ? atoi(envt) : 1;
    const char *env = getenv("PLUMB_GPT_TEXT_STEPS");
    const long steps = env && atol(env) > 0 ? atol(env) : 80;
    const char *envb = getenv("PLUMB_GPT_TEXT_BATCH");
    const int B = envb && atoi(envb) > 0 && atoi(envb) <= 64 ? atoi(envb) : 8;
    enum { T = 64 };
    struct gpt_data_opts o = {1, 256, 0, 0, 0.1, 0};
    struct gpt_data *data = NULL;
    REQUIRE(gpt_data_open("text:" TEXT, NULL, &o, &data, &e) == 0);
    struct gpt_config c;
    REQUIRE(gpt_config_preset("gpt-tiny", &c, &e) == 0);
    struct gpt_model *m = NULL;
    REQUIRE(gpt_create(d, &c, B, DT_F32, &m, &e) == 0);
    REQUIRE(gpt_init(m, 1, &e) == 0);
    const double v0 = val_loss(m, data, B, T, &e);
    const size_t n = gpt_n_params(m);
    float *mom = NULL, *var = NULL;
    double *dsum = NULL;
    int64_t *ddec = NULL;
    int nr = 0;
    const int64_t *dec = gpt_decay_ranges(m, &nr);
    REQUIRE(dev_alloc(d, n * 4, (void **)&mom, &e) == 0 && dev_alloc(d, n * 4, (void **)&var, &e) == 0);
    REQUIRE(dev_alloc(d, 8, (void **)&dsum, &e) == 0 && dev_alloc(d, (size_t)nr * 16, (void **)&ddec, &e) == 0);
    float *zero = calloc(n, 4);
    REQUIRE(dev_upload(d, mom, zero, n * 4, &e) == 0 && dev_upload(d, var, zero, n * 4, &e) == 0);
    REQUIRE(dev_upload(d, ddec, dec, (size_t)nr * 16, &e) == 0);
    free(zero);
    struct sampler s;
    REQUIRE(sampler_init(&s, gpt_data_samples(data, GPT_TRAIN, T), B, B, 1, 1, &e) == 0);
    int32_t tok[64 * T], tgt[64 * T];
    uint32_t idx[64];
    int sv[1];
    const double lr_max = 3e-3, warm = steps / 20 + 1;
    double t0 = timer_now(), last = 0;
    for (long step = 0; step < steps; step++) {
        struct sampler_step st;
        REQUIRE(sampler_get(&s, step, 0, 1, &st, idx, sv, &e) == 0);
        gpt_data_fill(data, GPT_TRAIN, T, 1, st.epoch, idx, (int)st.local_valid, B, tok, tgt);
        struct gpt_batch bt = {B, B, T, tok, tgt};
        struct gpt_loss l;
        REQUIRE(gpt_forward_backward(m, &bt, 1.0f / (float)(st.local_valid * T), &l, &e) == 0);
        last = l.sum / (double)l.count;
        /* clip at global norm 1.0, cosine lr with linear warmup */
        double zero1 = 0, ss = 0;
        REQUIRE(dev_upload(d, dsum, &zero1, 8, &e) == 0);
        REQUIRE(d->ops->train->sumsq(d, NULL, gpt_grads(m), n, dsum, &e) == 0);
        REQUIRE(dev_download(d, &ss, dsum, 8, &e) == 0);
        const double coef = 1.0 / (sqrt(ss) + 1e-6);
        const double lr = step < warm ? lr_max * (step + 1) / warm
                                      : 0.1 * lr_max + 0.45 * lr_max * (1 + cos(M_PI * (step - warm) / (steps - warm)));
        const double bc1 = 1 - pow(0.9, step + 1), bc2 = 1 - pow(0.95, step + 1);
        REQUIRE(d->ops->train->adamw_masked(d, NULL, gpt_params(m), gpt_grads(m), mom, var, n, (float)lr, 0.9f, 0.95f,
                                            1e-8f, 0.1f, (float)bc1, (float)bc2, coef < 1 ? (float)coef : 1.0f, ddec, nr,
                                            &e) == 0);
    }
    const double secs = timer_now() - t0;
    const double v1 = val_loss(m, data, B, T, &e);
    fprintf(stderr, "  gpt-tiny on %s: %ld steps of %d x %d tokens, %d thread(s), in %.1f s (%.0f tokens/s), train loss "
                    "%.3f, val loss %.3f -> %.3f (ln 256 = 5.545)\n",
            TEXT, steps, B, T, d->threads, secs, steps * (double)B * T / secs, last, v0, v1);
    CHECK_NEAR(v0, log(256.0), 0.1);
    CHECK_MSG(v1 < 4.0, "val loss %.3f after %ld steps (expected well below ln 256 = 5.545)", v1, steps);
    sampler_free(&s);
    dev_free(d, mom), dev_free(d, var), dev_free(d, dsum), dev_free(d, ddec);
    gpt_free(m);
    gpt_data_free(data);
    dev_close(d);
}
