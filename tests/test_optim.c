/* The trainer's optimizers over a tensor list (train/optim.h) on the cpu
 * device: weight decay only on TENSOR_DECAY tensors, the sparse rows only
 * through the sparse ops, SGD momentum by its definition (train_ops.h), the
 * state allocated once; against a host reference of the same definitions,
 * bit for bit. */
#include "test.h"
#include "dev/train_ops.h"
#include "train/optim.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

/* [0,6) "w" decay, [6,8) "b" no decay, [8,12) "w2" decay, then a sparse
 * region of 3 rows x 2: the layout a model with mixed flags gives. */
static struct model_tensor tens[4] = {
    {"w", 0, 6, 2, 3, TENSOR_DECAY},
    {"b", 6, 2, 1, 2, 0},
    {"w2", 8, 4, 2, 2, TENSOR_DECAY},
    {"emb", 12, 6, 3, 2, TENSOR_SPARSE},
};
static const struct model_layout L = {.n_params = 18, .n_dense = 12, .sparse_dim = 2, .sparse_per_sample = 1,
                                      .n_tensors = 4, .tensors = tens, .out_width = 1};

static void fill(float *p, size_t n, float a)
{
    for (size_t i = 0; i < n; i++) p[i] = a * (float)((i * 37 + 11) % 17) / 17.0f - 0.3f;
}

static int decays(size_t i) { return i < 6 || (i >= 8 && i < 12); }

TEST(optim_sgd_momentum_decay_flags_and_sparse_rows)
{
    struct dev *d = NULL;
    plumb_err e = {0};
    REQUIRE(dev_open("cpu", &d, &e) == 0);
    if (!d->ops->train || !d->ops->train->sgd_momentum) TEST_SKIP("cpu backend without sgd_momentum");
    float w[18], g[12], ref[18], buf[12];
    fill(w, 18, 1.0f);
    memcpy(ref, w, sizeof w);
    int64_t rows[2] = {0, 2};
    float sg[4] = {0.5f, -0.25f, 1.0f, 2.0f};
    struct optim o;
    const float lr = 0.1f, wd = 0.01f, mu = 0.9f;
    REQUIRE(optim_init(&o, d, &L, "sgd", wd, mu, 0.9, 0.999, 1e-8, &e) == 0);
    CHECK_EQ_INT(o.n_ranges, 3); /* decay, no decay, decay */
    for (int step = 1; step <= 3; step++) {
        fill(g, 12, 0.5f * (float)step);
        REQUIRE(optim_step(&o, w, g, rows, sg, 2, lr, step, &e) == 0);
        for (size_t i = 0; i < 12; i++) {
            float dd = decays(i) ? fmaf(wd, ref[i], g[i]) : g[i];
            buf[i] = step == 1 ? dd : fmaf(mu, buf[i], dd);
            ref[i] = fmaf(-lr, buf[i], ref[i]);
        }
        for (int u = 0; u < 2; u++)
            for (int k = 0; k < 2; k++) {
                size_t at = 12 + (size_t)rows[u] * 2 + (size_t)k;
                ref[at] = fmaf(-lr, sg[u * 2 + k], ref[at]); /* plain SGD on the touched rows */
            }
    }
    CHECK(!memcmp(w, ref, sizeof w));
    CHECK(o.buf && o.n_state == 12 && o.momentum_started);
    optim_free(&o);
    dev_close(d);
}

TEST(optim_adamw_decays_only_flagged_tensors)
{
    struct dev *d = NULL;
    plumb_err e = {0};
    REQUIRE(dev_open("cpu", &d, &e) == 0);
    if (!d->ops->train) TEST_SKIP("no training ops");
    const struct train_ops *T = d->ops->train;
    float w[18], ref[18], g[12], m[18] = {0}, v[18] = {0};
    fill(w, 18, 1.0f);
    memcpy(ref, w, sizeof w);
    int64_t rows[1] = {1};
    float sg[2] = {0.75f, -1.5f};
    struct optim o;
    const float lr = 0.01f, wd = 0.1f;
    REQUIRE(optim_init(&o, d, &L, "adamw", wd, 0.0, 0.9, 0.95, 1e-8, &e) == 0);
    for (int step = 1; step <= 2; step++) {
        fill(g, 12, 0.25f * (float)step);
        REQUIRE(optim_step(&o, w, g, rows, sg, 1, lr, step, &e) == 0);
        /* the reference: the same ops tensor by tensor, decay where flagged */
        double bc1 = 1.0 - pow((double)0.9f, step), bc2 = 1.0 - pow((double)0.95f, step);
        for (int t = 0; t < 3; t++) {
            const struct model_tensor *x = &tens[t];
            REQUIRE(T->adamw(d, NULL, ref + x->offset, g + x->offset, m + x->offset, v + x->offset, x->numel, lr, 0.9f,
                             0.95f, 1e-8f, (x->flags & TENSOR_DECAY) ? wd : 0.0f, (float)bc1, (float)bc2, &e) == 0);
        }
        REQUIRE(T->adamw_sparse(d, NULL, ref + 12, m + 12, v + 12, rows, sg, 1, 2, lr, 0.9f, 0.95f, 1e-8f, 0.0f,
                                (float)bc1, (float)bc2, &e) == 0);
    }
    CHECK(!memcmp(w, ref, sizeof w));
    CHECK(!memcmp(o.m, m, sizeof m) && !memcmp(o.v, v, sizeof v));
    /* rows 0 and 2 of the table were never touched: lazy */
    CHECK(w[12] == ref[12] && o.m[12] == 0.0f && o.m[16] == 0.0f);
    optim_free(&o);
    plumb_err e2 = {0};
    CHECK(optim_init(&o, d, &L, "lamb", 0, 0, 0.9, 0.999, 1e-8, &e2) == PLUMB_EUSAGE && strstr(e2.msg, "lamb"));
    dev_close(d);
}

/* GPT-2 124M's layout alternates decaying matrices with biases and
 * LayerNorm weights (148 tensors, 97 ranges): 150 tensors alternating here,
 * updated in one pass (adamw_masked) with the bits of adamw per tensor. */
/* nt dense tensors of per floats, every third not decaying: 100 ranges for
 * 150 (no decay, decay (2 tensors), ...), as many as a deep model's */
static struct model_layout many_alternating(struct model_tensor *many, int nt, int per)
{
    for (int i = 0; i < nt; i++) {
        memset(&many[i], 0, sizeof many[i]);
        snprintf(many[i].name, sizeof many[i].name, "t%d", i);
        many[i].offset = (size_t)i * per, many[i].numel = (size_t)per, many[i].rows = 1, many[i].cols = per;
        many[i].flags = (i % 3) ? TENSOR_DECAY : 0;
    }
    const size_t n = (size_t)nt * per;
    return (struct model_layout){.n_params = n, .n_dense = n, .n_tensors = nt, .tensors = many, .out_width = 1};
}

TEST(optim_adamw_many_alternating_ranges)
{
    struct dev *d = NULL;
    plumb_err e = {0};
    REQUIRE(dev_open("cpu", &d, &e) == 0);
    if (!d->ops->train) TEST_SKIP("no training ops");
    const struct train_ops *T = d->ops->train;
    enum { NT = 150, PER = 5, N = NT * PER };
    static struct model_tensor many[NT];
    const struct model_layout LM = many_alternating(many, NT, PER);
    static float w[N], ref[N], g[N], m[N], v[N];
    fill(w, N, 1.0f);
    memcpy(ref, w, sizeof w);
    memset(m, 0, sizeof m);
    memset(v, 0, sizeof v);
    struct optim o;
    REQUIRE(optim_init(&o, d, &LM, "adamw", 0.1, 0.0, 0.9, 0.95, 1e-8, &e) == 0);
    CHECK_EQ_INT(o.n_ranges, 100); /* no decay, decay (2 tensors), ... */
    for (int step = 1; step <= 3; step++) {
        fill(g, N, 0.2f * (float)step);
        REQUIRE(optim_step(&o, w, g, NULL, NULL, 0, 0.01f, step, &e) == 0);
        double bc1 = 1.0 - pow((double)0.9f, step), bc2 = 1.0 - pow((double)0.95f, step);
        for (int t = 0; t < NT; t++) {
            const struct model_tensor *x = &many[t];
            REQUIRE(T->adamw(d, NULL, ref + x->offset, g + x->offset, m + x->offset, v + x->offset, x->numel, 0.01f,
                             0.9f, 0.95f, 1e-8f, (x->flags & TENSOR_DECAY) ? 0.1f : 0.0f, (float)bc1, (float)bc2,
                             &e) == 0);
        }
    }
    CHECK(!memcmp(w, ref, sizeof w));
    CHECK(!memcmp(o.m, m, sizeof m) && !memcmp(o.v, v, sizeof v));
    if (T->adamw_masked) CHECK_EQ_INT(o.n_dec, 50);
    optim_free(&o);
    dev_close(d);
}

/* Momentum SGD over 100 alternating decay ranges: optim_step's one launch
 * (train_ops.sgd_momentum_masked, where the device has it) against
 * sgd_momentum called per tensor, bit for bit, over three steps (the first
 * initialises the buffer) */
TEST(optim_sgd_momentum_masked_equals_per_tensor)
{
    struct dev *d = NULL;
    plumb_err e = {0};
    REQUIRE(dev_open("cpu", &d, &e) == 0);
    if (!d->ops->train) TEST_SKIP("no training ops");
    const struct train_ops *T = d->ops->train;
    enum { NT = 150, PER = 7, N = NT * PER };
    static struct model_tensor many[NT];
    const struct model_layout LM = many_alternating(many, NT, PER);
    static float w[N], ref[N], g[N], buf[N];
    fill(w, N, 1.0f);
    memcpy(ref, w, sizeof w);
    memset(buf, 0, sizeof buf);
    struct optim o;
    REQUIRE(optim_init(&o, d, &LM, "sgd", 5e-4, 0.9, 0.9, 0.999, 1e-8, &e) == 0);
    CHECK_EQ_INT(o.n_ranges, 100);
    for (int step = 1; step <= 3; step++) {
        fill(g, N, 0.3f * (float)step);
        REQUIRE(optim_step(&o, w, g, NULL, NULL, 0, 0.05f, step, &e) == 0);
        for (int t = 0; t < NT; t++) {
            const struct model_tensor *x = &many[t];
            REQUIRE(T->sgd_momentum(d, NULL, ref + x->offset, g + x->offset, buf + x->offset, x->numel, 0.05f,
                                    (x->flags & TENSOR_DECAY) ? 5e-4f : 0.0f, 0.9f, step == 1, &e) == 0);
        }
    }
    CHECK(!memcmp(w, ref, sizeof w));
    CHECK(!memcmp(o.buf, buf, sizeof buf));
    /* the one-launch path ran (the cpu has the op): its 50 decaying ranges uploaded */
    CHECK(T->sgd_momentum_masked != NULL);
    CHECK_EQ_INT(o.dec_ready, 1);
    CHECK_EQ_INT(o.n_dec, 50);
    /* a range list out of order is refused, naming the op */
    int64_t badr[4] = {10, 20, 5, 8};
    CHECK(T->sgd_momentum_masked(d, NULL, w, g, buf, N, 0.05f, 5e-4f, 0.9f, 0, badr, 2, &e) == PLUMB_EUSAGE);
    CHECK(strstr(e.msg, "sgd_momentum_masked") != NULL);
    optim_free(&o);
    dev_close(d);
}
