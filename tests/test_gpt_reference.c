/* gpt against PyTorch: bench/gpt_reference.py's gpt-tiny state (inputs,
 * initial parameters, logits, loss, every gradient) against plumb's model
 * on test_device(), fast and golden fp32. Tolerances (fp32 on both sides,
 * different summation orders):
 *   logits and loss: 1e-5 absolute;
 *   each gradient tensor: max |plumb - torch| <= 1e-5 * max |torch| of
 *     the tensor (plus 1e-7).
 * Measured on the cpu (fast and golden): logits 3e-7, loss 4e-7, gradients
 * 5e-7 of the largest. The reference's 10 AdamW steps go through the trainer
 * (tests/test_gpt_trainer.c). */
#include "test.h"
#include "dev/dev.h"
#include "dev/train_ops.h"
#include "models/gpt/gpt.h"
#include "models/gpt/refstate.h"
#include <stdlib.h>

static const char *ref_path(char *buf, size_t n)
{
    const char *root = getenv("PLUMB_ROOT");
    snprintf(buf, n, "%s/bench/gpt_tiny_reference.bin", root ? root : ".");
    return buf;
}

static void check_reference(enum numerics mode)
{
    char path[1024];
    struct gpt_ref r;
    plumb_err e = {0};
    int rc = gpt_ref_load(ref_path(path, sizeof path), &r, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (rc) return;
    struct dev *d = NULL;
    if (dev_open(test_device(), &d, &e) || dev_set_numerics(d, mode, 0, &e) || !d->ops->train ||
        !d->ops->train->attention_fwd) {
        gpt_ref_free(&r);
        if (d) dev_close(d);
        TEST_SKIP("device %s has no transformer ops", test_device());
    }
    const int B = r.B, T = r.T, V = r.c.vocab;
    struct gpt_model *m = NULL;
    REQUIRE(gpt_create(d, &r.c, B, DT_F32, &m, &e) == 0);
    const size_t n = gpt_n_params(m);
    float *p = calloc(n, sizeof(float)), *g = malloc(n * sizeof(float)), *gr = malloc(n * sizeof(float));
    char nm[64];
    for (int i = 0; i < gpt_n_tensors(m); i++) {
        const struct gpt_tensor *t = gpt_tensor(m, i);
        snprintf(nm, sizeof nm, "param:%s", t->name);
        REQUIRE(gpt_ref_f32(&r, nm, p + t->offset, t->numel, &e) == 0);
    }
    REQUIRE(dev_upload(d, gpt_params(m), p, n * sizeof(float), &e) == 0);
    int32_t *tok = malloc((size_t)B * T * 4), *tgt = malloc((size_t)B * T * 4);
    REQUIRE(gpt_ref_i32(&r, "tokens", tok, (size_t)B * T, &e) == 0 && gpt_ref_i32(&r, "targets", tgt, (size_t)B * T, &e) == 0);
    struct gpt_batch bt = {B, B, T, tok, tgt};
    /* logits */
    float *lg = malloc((size_t)B * T * V * 4), *lr = malloc((size_t)B * T * V * 4);
    REQUIRE(gpt_logits(m, &bt, lg, &e) == 0);
    REQUIRE(gpt_ref_f32(&r, "logits", lr, (size_t)B * T * V, &e) == 0);
    double wl = 0;
    for (size_t i = 0; i < (size_t)B * T * V; i++) wl = fmax(wl, fabs((double)lg[i] - lr[i]));
    CHECK_MSG(wl <= 1e-5, "logits: max abs difference %g", wl);
    /* loss and gradients */
    struct gpt_loss loss;
    REQUIRE(gpt_forward_backward(m, &bt, 1.0f / (float)(B * T), &loss, &e) == 0);
    float rl;
    REQUIRE(gpt_ref_f32(&r, "loss", &rl, 1, &e) == 0);
    CHECK_EQ_INT(loss.count, B * T);
    CHECK_MSG(fabs(loss.sum / (double)loss.count - rl) <= 1e-5, "loss %.7f vs torch %.7f", loss.sum / loss.count, rl);
    REQUIRE(dev_download(d, g, gpt_grads(m), n * sizeof(float), &e) == 0);
    double worst = 0;
    const char *wname = "";
    for (int i = 0; i < gpt_n_tensors(m); i++) {
        const struct gpt_tensor *t = gpt_tensor(m, i);
        snprintf(nm, sizeof nm, "grad:%s", t->name);
        REQUIRE(gpt_ref_f32(&r, nm, gr + t->offset, t->numel, &e) == 0);
        double mx = 0, df = 0;
        for (size_t k = 0; k < t->numel; k++) {
            mx = fmax(mx, fabs(gr[t->offset + k]));
            df = fmax(df, fabs((double)g[t->offset + k] - gr[t->offset + k]));
        }
        const double rel = df / (mx + 1e-7);
        if (rel > worst) worst = rel, wname = t->name;
    }
    CHECK_MSG(worst <= 1e-5, "gradients: worst tensor %s, max difference %g of its largest gradient", wname, worst);
    if (getenv("PLUMB_TEST_VERBOSE"))
        fprintf(stderr, "  logits %g, loss %g, gradients %g (%s)\n", wl, fabs(loss.sum / loss.count - rl), worst, wname);
    float want[16];
    REQUIRE(r.steps <= 16 && gpt_ref_f32(&r, "losses", want, (size_t)r.steps, &e) == 0);
    CHECK(want[r.steps - 1] < want[0] - 0.5); /* the reference itself trains */
    free(p), free(g), free(gr), free(tok), free(tgt), free(lg), free(lr);
    gpt_free(m);
    dev_close(d);
    gpt_ref_free(&r);
}

TEST(gpt_reference_pytorch_fast) { check_reference(NUMERICS_FAST); }
TEST(gpt_reference_pytorch_golden) { check_reference(NUMERICS_GOLDEN); }

TEST(gpt_reference_bad_files_are_named)
{
    char path[1024], buf[1100];
    plumb_err e = {0};
    struct gpt_ref r;
    snprintf(path, sizeof path, "%s/not_ref.bin", test_tmpdir());
    FILE *f = fopen(path, "wb");
    REQUIRE(f);
    fputs("PLUMBGPTREF0\n{}\n", f);
    fclose(f);
    CHECK(gpt_ref_load(path, &r, &e) == PLUMB_EUSAGE);
    CHECK(strstr(e.msg, "not_ref.bin") && strstr(e.msg, "PLUMBGPTREF1"));
    /* a real state cut short: the header names a tensor past the end */
    char *data = NULL;
    size_t len = 0;
    FILE *in = fopen(ref_path(buf, sizeof buf), "rb");
    REQUIRE(in);
    data = malloc(1 << 21);
    len = fread(data, 1, 1 << 21, in);
    fclose(in);
    snprintf(path, sizeof path, "%s/cut.bin", test_tmpdir());
    f = fopen(path, "wb");
    fwrite(data, 1, len - 1000, f);
    fclose(f);
    CHECK(gpt_ref_load(path, &r, &e) == PLUMB_EUSAGE);
    /* the first tensor past the cut, named (the name was once read from the freed header) */
    CHECK_MSG(strstr(e.msg, "cut.bin") && strstr(e.msg, "tensor logits [724480, +131072) lies past the end of the payload"),
              "%s", e.msg);
    free(data);
}
