/* resnet (models/resnet/resnet.h): parameter counts against torchvision's,
 * the model's gradient against central finite differences of its own loss
 * (basic and bottleneck blocks, both stems), golden data parallel over
 * threads standing in for ranks (the BN all-reduce and the fold of every
 * micro-shard's gradient): 1, 2 and 4 "ranks" give the same bits with
 * synchronized BatchNorm, and with per-rank BatchNorm they do not, by an
 * amount the test prints; eval scores each sample independently of its
 * batch; resnet-tiny learns the synthetic CIFAR classes. The trainer's
 * MPI run of the same is tests/t_resnet.sh. */
#include "test.h"
#include "core/philox.h"
#include "dev/dev.h"
#include "dev/train_ops.h"
#include "models/resnet/imgdata.h"
#include "models/resnet/resnet.h"
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

/* One SGD step with momentum and L2 weight decay as PyTorch takes it
 * (buf zero before the first step), on the host: the trainer's optimizer
 * runs it in training. buf: host [n]. */
static int sgdm_step(struct dev *d, float *w, const float *g, float *buf, size_t n, float lr, float mu, float wd)
{
    float *hw = malloc(n * sizeof(float)), *hg = malloc(n * sizeof(float));
    plumb_err e = {0};
    int rc = !hw || !hg || dev_download(d, hw, w, n * sizeof(float), &e) || dev_download(d, hg, g, n * sizeof(float), &e);
    for (size_t i = 0; i < n && !rc; i++) {
        float gg = fmaf(wd, hw[i], hg[i]);
        buf[i] = fmaf(mu, buf[i], gg);
        hw[i] = fmaf(-lr, buf[i], hw[i]);
    }
    if (!rc) rc = dev_upload(d, w, hw, n * sizeof(float), &e);
    free(hw), free(hg);
    return rc;
}

static struct dev *open_dev(enum numerics mode, int threads)
{
    struct dev *d = NULL;
    plumb_err e = {0};
    if (dev_open(test_device(), &d, &e)) return NULL;
    if (dev_set_numerics(d, mode, 0, &e) || !d->ops->train || !d->ops->train->conv2d_fwd) {
        dev_close(d);
        return NULL;
    }
    d->threads = threads;
    return d;
}

TEST(resnet_param_counts_match_torchvision)
{
    struct {
        const char *preset;
        int imagenet_resnet18;
        size_t want;
    } cases[] = {
        {"resnet50", 0, 25557032},       /* torchvision.models.resnet50() */
        {"resnet152", 0, 60192808},      /* torchvision.models.resnet152() */
        {"resnet18", 1, 11689512},       /* torchvision.models.resnet18() */
        {"resnet18", 0, 11173962},       /* CIFAR stem, 10 classes */
        {"resnet50-cifar", 0, 23520842}, /* CIFAR stem, 10 classes */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct resnet_config c;
        plumb_err e = {0};
        REQUIRE(resnet_config_preset(cases[i].preset, &c, &e) == 0);
        if (cases[i].imagenet_resnet18) {
            c.stem = RESNET_STEM_IMAGENET;
            c.image = 224;
            c.classes = 1000;
        }
        size_t n = 0;
        REQUIRE(resnet_config_count_params(&c, &n, &e) == 0);
        CHECK_MSG(n == cases[i].want, "%s%s: %zu parameters, torchvision has %zu", cases[i].preset,
                  cases[i].imagenet_resnet18 ? " (imagenet)" : "", n, cases[i].want);
    }
    struct resnet_config c;
    plumb_err e = {0};
    CHECK(resnet_config_preset("resnet34", &c, &e) == PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "resnet34") && strstr(e.msg, "resnet-tiny"), "message: %s", e.msg);
}

/* ---------------- init ---------------- */

/* The window side of a conv tensor from torchvision's names: the stem
 * "conv1" 7 (ImageNet) or 3 (CIFAR), "downsample.0" 1, a basic block's
 * convs 3, a bottleneck's conv2 3 and conv1 / conv3 1. */
static int conv_side(const struct resnet_config *c, const char *name)
{
    if (!strcmp(name, "conv1.weight")) return c->stem == RESNET_STEM_IMAGENET ? 7 : 3;
    if (strstr(name, "downsample.0.weight")) return 1;
    if (!c->bottleneck) return 3;
    return strstr(name, ".conv2.weight") ? 3 : 1;
}

/* Every parameter and buffer element is torchvision's init drawn from
 * Philox (resnet.h resnet_init), bit for bit: conv normal(0, sqrt(2 /
 * (K R S))), BN weight 1 and bias 0, fc weight and bias uniform(-b, b) with
 * b = 1/sqrt(features), running mean 0 and variance 1. */
static void check_init(const struct resnet_config *c, uint64_t seed)
{
    struct dev *d = open_dev(NUMERICS_FAST, 0);
    if (!d) TEST_SKIP("no vision ops");
    struct resnet_model *m = NULL;
    plumb_err e = {0};
    REQUIRE(resnet_create(d, c, 2, DT_F32, &m, &e) == 0);
    REQUIRE(resnet_init(m, seed, &e) == 0);
    const size_t np = resnet_n_params(m), nb = resnet_n_buffers(m);
    float *p = malloc(np * sizeof(float)), *bu = malloc((nb ? nb : 1) * sizeof(float));
    REQUIRE(p && bu);
    REQUIRE(dev_download(d, p, resnet_params(m), np * sizeof(float), &e) == 0);
    if (nb) REQUIRE(dev_download(d, bu, resnet_buffers(m), nb * sizeof(float), &e) == 0);
    int bad = 0, convs = 0, fcs = 0;
    for (int i = 0; i < resnet_n_tensors(m); i++) {
        const struct resnet_tensor *t = resnet_tensor(m, i);
        int side = 0;
        float a = 0, b = 0;
        if (t->kind == RESNET_T_CONV) {
            side = conv_side(c, t->name);
            CHECK_MSG(t->cols % (side * side) == 0, "%s: %d columns, not a multiple of %d x %d", t->name, t->cols, side,
                      side);
            a = (float)sqrt(2.0 / ((double)t->rows * side * side));
            convs++;
        } else if (t->kind == RESNET_T_FC_WEIGHT || t->kind == RESNET_T_FC_BIAS) {
            const struct resnet_tensor *fw = t->kind == RESNET_T_FC_WEIGHT ? t : resnet_tensor(m, i - 1);
            const float bound = (float)(1.0 / sqrt((double)fw->cols));
            a = 2.0f * bound;
            b = -bound;
            fcs++;
        }
        for (size_t k = 0; k < t->numel; k++) {
            float want;
            if (t->kind == RESNET_T_BN_WEIGHT) want = 1.0f;
            else if (t->kind == RESNET_T_BN_BIAS) want = 0.0f;
            else if (t->kind == RESNET_T_CONV) want = fmaf(a, philox_normal_at(seed, RNG_INIT, (uint32_t)i, 0, k), 0.0f);
            else want = fmaf(a, philox_uniform_at(seed, RNG_INIT, (uint32_t)i, 0, k), b);
            if (f32_bits(p[t->offset + k]) != f32_bits(want) && bad++ < 3)
                fprintf(stderr, "  %s[%zu]: %.9g, want %.9g\n", t->name, k, p[t->offset + k], want);
        }
    }
    for (int i = 0; i < resnet_n_buffer_tensors(m); i++) {
        const struct resnet_tensor *t = resnet_buffer_tensor(m, i);
        const float want = t->kind == RESNET_T_RUNNING_VAR ? 1.0f : 0.0f;
        for (size_t k = 0; k < t->numel; k++)
            if (f32_bits(bu[t->offset + k]) != f32_bits(want) && bad++ < 3)
                fprintf(stderr, "  %s[%zu]: %.9g, want %.9g\n", t->name, k, bu[t->offset + k], want);
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(convs > 0 && fcs == 2);
    free(p);
    free(bu);
    resnet_free(m);
    dev_close(d);
}

TEST(resnet_init_is_torchvisions)
{
    struct resnet_config c;
    plumb_err e = {0};
    REQUIRE(resnet_config_preset("resnet-tiny", &c, &e) == 0);
    check_init(&c, 11);
    /* bottleneck blocks, the ImageNet stem, a projection in each stage */
    struct resnet_config b = {"test", RESNET_STEM_IMAGENET, 1, 8, 2, {1, 2}, {4, 8}, 32, 7};
    REQUIRE(resnet_config_validate(&b, &e) == 0);
    check_init(&b, 12);
}

/* ---------------- finite differences ---------------- */

static uint64_t rs = 0x853c49e6748fea9bull;
static double urand(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (double)(rs >> 11) * (1.0 / 9007199254740992.0);
}

static double loss_of(struct resnet_model *m, const struct resnet_batch *b)
{
    struct resnet_loss l = {0};
    plumb_err e = {0};
    if (resnet_forward_backward(m, b, NULL, 1.0f, &l, &e)) {
        fprintf(stderr, "  forward_backward: %s\n", e.msg);
        return NAN;
    }
    return l.sum;
}

static void fd_case(enum numerics mode, int bottleneck, int imagenet)
{
    struct dev *d = open_dev(mode, 0);
    if (!d) TEST_SKIP("device %s has no vision training ops", test_device());
    struct resnet_config c = {.stem = imagenet ? RESNET_STEM_IMAGENET : RESNET_STEM_CIFAR, .bottleneck = bottleneck,
                              .stem_width = 4, .n_stages = 2, .blocks = {1, 1}, .width = {4, 6},
                              .image = imagenet ? 16 : 8, .classes = 3};
    snprintf(c.preset, sizeof c.preset, "fd");
    enum { B = 4 };
    struct resnet_model *m;
    plumb_err e = {0};
    REQUIRE(resnet_create(d, &c, B, DT_F32, &m, &e) == 0);
    REQUIRE(resnet_init(m, 7, &e) == 0);
    size_t px = (size_t)c.image * c.image * 3;
    float *x = malloc(B * px * sizeof(float));
    for (size_t i = 0; i < B * px; i++) x[i] = (float)(2 * urand() - 1);
    int32_t lab[B] = {0, 2, 1, 2};
    struct resnet_batch b = {.B = B, .n_valid = B, .x = x, .labels = lab};
    size_t np = resnet_n_params(m);
    float *p = malloc(np * 4), *g = malloc(np * 4);
    REQUIRE(!isnan(loss_of(m, &b)));
    dev_download(d, g, resnet_grads(m), np * 4, &e);
    dev_download(d, p, resnet_params(m), np * 4, &e);
    int checked = 0, bad = 0;
    for (int ti = 0; ti < resnet_n_tensors(m); ti++) {
        const struct resnet_tensor *t = resnet_tensor(m, ti);
        for (int k = 0; k < 2; k++) {
            size_t i = t->offset + (size_t)(urand() * t->numel);
            /* small enough that few ReLU kinks lie within +-h (1e-2 crossed
             * several), large enough for fp32 loss differences */
            const float h = 1e-3f * fmaxf(1.0f, fabsf(p[i]));
            float save = p[i], v = save + h;
            dev_upload(d, resnet_params(m) + i, &v, 4, &e);
            double lp = loss_of(m, &b);
            v = save - h;
            dev_upload(d, resnet_params(m) + i, &v, 4, &e);
            double lm = loss_of(m, &b);
            dev_upload(d, resnet_params(m) + i, &save, 4, &e);
            double fd = (lp - lm) / (2.0 * h), an = g[i];
            checked++;
            if (!(fabs(fd - an) <= 3e-3 + 3e-2 * fabs(an))) {
                bad++;
                fprintf(stderr, "  %s[%zu]: finite difference %.6g, gradient %.6g\n", t->name, i - t->offset, fd, an);
            }
        }
    }
    /* a ReLU kink or a max-pool tie crossed by +-h can spoil one estimate */
    CHECK_MSG(bad <= checked / 20, "%d of %d finite differences disagree", bad, checked);
    free(x), free(p), free(g);
    resnet_free(m);
    dev_close(d);
}

TEST(resnet_gradient_fd_basic_fast) { fd_case(NUMERICS_FAST, 0, 0); }
TEST(resnet_gradient_fd_basic_golden) { fd_case(NUMERICS_GOLDEN, 0, 0); }
TEST(resnet_gradient_fd_bottleneck_imagenet_stem) { fd_case(NUMERICS_FAST, 1, 1); }

/* ---------------- threads standing in for ranks ---------------- */

#define MAXW 4
struct world {
    int W;
    pthread_barrier_t bar;
    void *bufs[MAXW];
    int64_t *acc[MAXW]; /* fold accumulators, [n_params] each */
    int64_t tmp[1 << 14];
};
struct rank {
    struct world *w;
    int r, local_bn;
    struct resnet_model *m;
    size_t np;
    float *hg; /* host copy for the fold */
    const float *x;
    const int32_t *lab;
    int B, n_valid, gvalid, shard;
    char digest[65];
    float *bufs; /* running statistics after the run */
    size_t nbufs;
    int fail;
};

/* sum over the ranks of n int64 (golden parts) in place */
static int fake_allreduce(void *ctx, void *buf, int n, int golden, plumb_err *e)
{
    struct rank *rk = ctx;
    struct world *w = rk->w;
    if (!golden || n > (int)(sizeof w->tmp / sizeof w->tmp[0]))
        return err_set(e, PLUMB_EUNSUPPORTED, "fake allreduce: golden parts of at most 16384 only");
    w->bufs[rk->r] = buf;
    pthread_barrier_wait(&w->bar);
    if (rk->r == 0)
        for (int i = 0; i < n; i++) {
            int64_t s = 0;
            for (int r = 0; r < w->W; r++) s += ((int64_t *)w->bufs[r])[i];
            w->tmp[i] = s;
        }
    pthread_barrier_wait(&w->bar);
    memcpy(buf, w->tmp, (size_t)n * sizeof(int64_t));
    pthread_barrier_wait(&w->bar);
    return PLUMB_OK;
}

/* the trainer's side of folding: shard j's gradient, round(g * 2^40),
 * added to int64 accumulators */
static int fake_fold(void *ctx, int j, const struct resnet_loss *l, plumb_err *e)
{
    (void)j, (void)l;
    struct rank *rk = ctx;
    int rc = dev_download(resnet_dev(rk->m), rk->hg, resnet_grads(rk->m), rk->np * sizeof(float), e);
    for (size_t i = 0; i < rk->np && !rc; i++) rk->w->acc[rk->r][i] += (int64_t)llrint((double)rk->hg[i] * 1099511627776.0);
    return rc;
}

static void *rank_main(void *arg)
{
    struct rank *rk = arg;
    struct world *w = rk->w;
    plumb_err e = {0};
    struct dev *d = open_dev(NUMERICS_GOLDEN, 1);
    struct resnet_config c;
    if (!d || resnet_config_preset("resnet-tiny", &c, &e) || resnet_create(d, &c, rk->B, DT_F32, &rk->m, &e) ||
        resnet_init(rk->m, 42, &e)) {
        fprintf(stderr, "  rank %d: %s\n", rk->r, e.msg);
        rk->fail = 1;
        return NULL;
    }
    rk->np = resnet_n_params(rk->m);
    rk->hg = calloc(rk->np, sizeof(float));
    w->acc[rk->r] = calloc(rk->np, sizeof(int64_t));
    float *buf = calloc(rk->np, sizeof(float));
    int sv[64];
    for (int j = 0; j < rk->n_valid / rk->shard; j++) sv[j] = rk->shard;
    struct resnet_sync sy = {.allreduce = fake_allreduce, .ctx = rk, .local_bn = rk->local_bn,
                             .nshards = rk->n_valid / rk->shard, .shard_valid = sv, .fold_shard = fake_fold, .fold_ctx = rk};
    for (int step = 0; step < 2 && !rk->fail; step++) {
        memset(w->acc[rk->r], 0, rk->np * sizeof(int64_t));
        const size_t px = 32 * 32 * 3;
        struct resnet_batch b = {.B = rk->B, .n_valid = rk->n_valid, .global_valid = rk->gvalid,
                                 .x = rk->x + (size_t)step * rk->gvalid * px, .labels = rk->lab + step * rk->gvalid};
        if (resnet_forward_backward(rk->m, &b, &sy, 1.0f / (float)rk->gvalid, NULL, &e)) {
            fprintf(stderr, "  rank %d: %s\n", rk->r, e.msg);
            rk->fail = 1;
            break;
        }
        /* the exact int64 all-reduce of the accumulators, then SGD */
        pthread_barrier_wait(&w->bar);
        if (rk->r == 0)
            for (size_t i = 0; i < rk->np; i++)
                for (int r = 1; r < w->W; r++) w->acc[0][i] += w->acc[r][i];
        pthread_barrier_wait(&w->bar);
        for (size_t i = 0; i < rk->np; i++) rk->hg[i] = (float)((double)w->acc[0][i] / 1099511627776.0);
        pthread_barrier_wait(&w->bar);
        dev_upload(d, resnet_grads(rk->m), rk->hg, rk->np * sizeof(float), &e);
        sgdm_step(d, resnet_params(rk->m), resnet_grads(rk->m), buf, rk->np, 0.1f, 0.9f, 5e-4f);
    }
    if (!rk->fail) {
        resnet_digest(rk->m, rk->digest, &e);
        rk->nbufs = resnet_n_buffers(rk->m);
        rk->bufs = malloc(rk->nbufs * sizeof(float));
        dev_download(d, rk->bufs, resnet_buffers(rk->m), rk->nbufs * sizeof(float), &e);
    }
    free(buf);
    free(rk->hg);
    resnet_free(rk->m);
    dev_close(d);
    return NULL;
}

/* Two golden steps of resnet-tiny over a global batch of 16 on W "ranks";
 * rank 0's digest and running statistics. */
static int run_world(int W, int local_bn, const float *x, const int32_t *lab, char digest[65], float **bufs,
                     size_t *nbufs)
{
    struct world w = {.W = W};
    pthread_barrier_init(&w.bar, NULL, (unsigned)W);
    struct rank rk[MAXW];
    pthread_t th[MAXW];
    const int G = 16;
    for (int r = 0; r < W; r++) {
        /* contiguous shard ranges, as the sampler gives them (shard = 2 samples) */
        int s0 = G * r / W, s1 = G * (r + 1) / W;
        /* step t's global batch is rows t*G .. t*G+G-1; the rank reads its
         * own rows of it (rank_main adds the step's offset) */
        rk[r] = (struct rank){.w = &w, .r = r, .local_bn = local_bn, .B = s1 - s0, .n_valid = s1 - s0, .gvalid = G,
                              .shard = 2, .x = x + (size_t)s0 * 32 * 32 * 3, .lab = lab + s0};
    }
    for (int r = 0; r < W; r++) pthread_create(&th[r], NULL, rank_main, &rk[r]);
    for (int r = 0; r < W; r++) pthread_join(th[r], NULL);
    int fail = 0;
    for (int r = 0; r < W; r++) {
        fail |= rk[r].fail;
        /* with synchronized BN every rank holds the same running statistics
         * (and so the same digest); per-rank BN gives each rank its own */
        if (!local_bn && !rk[r].fail && strcmp(rk[r].digest, rk[0].digest)) {
            fprintf(stderr, "  W=%d: rank %d digest %s differs from rank 0's %s\n", W, r, rk[r].digest, rk[0].digest);
            fail = 1;
        }
        free(w.acc[r]);
        if (r) free(rk[r].bufs);
    }
    pthread_barrier_destroy(&w.bar);
    memcpy(digest, rk[0].digest, 65);
    *bufs = rk[0].bufs;
    *nbufs = rk[0].nbufs;
    return fail;
}

TEST(resnet_golden_ranks_equal_with_sync_bn_not_with_local_bn)
{
    if (strcmp(test_device(), "cpu")) TEST_SKIP("the thread-rank harness runs on the cpu device");
    struct dev *probe = open_dev(NUMERICS_GOLDEN, 1);
    if (!probe) TEST_SKIP("no vision ops");
    dev_close(probe);
    struct imgdata_opts o = {.seed = 5, .train_samples = 32, .test_samples = 8};
    struct imgdata *data;
    plumb_err e = {0};
    REQUIRE(imgdata_open("synthetic", &o, &data, &e) == 0);
    uint32_t idx[32];
    for (int i = 0; i < 32; i++) idx[i] = (uint32_t)i;
    float *x = malloc(32 * 3072 * sizeof(float));
    int32_t lab[32];
    imgdata_fill(data, 0, idx, 32, 1, 9, 0, x, lab);
    char dg[3][65], dl[65];
    float *bufs[3], *lbufs;
    size_t nb, nbl;
    const int Ws[3] = {1, 2, 4};
    for (int i = 0; i < 3; i++) REQUIRE(run_world(Ws[i], 0, x, lab, dg[i], &bufs[i], &nb) == 0);
    CHECK_MSG(!strcmp(dg[0], dg[1]) && !strcmp(dg[0], dg[2]), "sync BN digests: 1 rank %s, 2 ranks %s, 4 ranks %s",
              dg[0], dg[1], dg[2]);
    REQUIRE(run_world(4, 1, x, lab, dl, &lbufs, &nbl) == 0);
    CHECK_MSG(strcmp(dl, dg[0]), "per-rank BN on 4 ranks gave the 1-rank digest %s", dl);
    /* how far per-rank statistics move the running statistics (rank 0's
     * view: its own 4 samples) */
    double dmax = 0, dsum = 0;
    for (size_t i = 0; i < nb; i++) {
        double dd = fabs((double)lbufs[i] - bufs[0][i]);
        dsum += dd;
        if (dd > dmax) dmax = dd;
    }
    fprintf(stderr, "  --bn local on 4 ranks vs 1 rank: running statistics differ by %.4g at most, %.4g on average "
            "(over %zu values)\n", dmax, dsum / (double)nb, nb);
    CHECK(dmax > 1e-4);
    for (int i = 0; i < 3; i++) free(bufs[i]);
    free(lbufs);
    free(x);
    imgdata_free(data);
}

/* eval uses the running statistics: a sample's score does not depend on
 * the batch it is in */
TEST(resnet_predict_is_per_sample)
{
    struct dev *d = open_dev(NUMERICS_GOLDEN, 0);
    if (!d) TEST_SKIP("no vision ops");
    struct resnet_config c;
    plumb_err e = {0};
    REQUIRE(resnet_config_preset("resnet-tiny", &c, &e) == 0);
    struct resnet_model *m;
    REQUIRE(resnet_create(d, &c, 6, DT_F32, &m, &e) == 0);
    REQUIRE(resnet_init(m, 3, &e) == 0);
    struct imgdata_opts o = {.seed = 5, .train_samples = 6, .test_samples = 6};
    struct imgdata *data;
    REQUIRE(imgdata_open("synthetic", &o, &data, &e) == 0);
    uint32_t idx[6] = {0, 1, 2, 3, 4, 5};
    float *x = malloc(6 * 3072 * 4);
    int32_t lab[6];
    imgdata_fill(data, 1, idx, 6, 0, 0, 0, x, lab);
    struct resnet_batch b = {.B = 6, .n_valid = 6, .x = x, .labels = lab};
    REQUIRE(resnet_forward_backward(m, &b, NULL, 1.0f / 6, NULL, &e) == 0); /* running stats move off init */
    float l6[6], l1[6];
    int32_t p6[6], p1[6];
    REQUIRE(resnet_predict(m, &b, l6, p6, &e) == 0);
    for (int i = 0; i < 6; i++) {
        struct resnet_batch one = {.B = 1, .n_valid = 1, .x = x + (size_t)i * 3072, .labels = lab + i};
        REQUIRE(resnet_predict(m, &one, &l1[i], &p1[i], &e) == 0);
    }
    CHECK(!memcmp(l6, l1, sizeof l6));
    CHECK(!memcmp(p6, p1, sizeof p6));
    free(x);
    imgdata_free(data);
    resnet_free(m);
    dev_close(d);
}

/* resnet-tiny on synthetic CIFAR: a short run learns well above chance */
TEST(resnet_tiny_learns_synthetic_cifar)
{
    struct dev *d = open_dev(NUMERICS_FAST, 0);
    if (!d) TEST_SKIP("no vision ops");
    struct resnet_config c;
    plumb_err e = {0};
    REQUIRE(resnet_config_preset("resnet-tiny", &c, &e) == 0);
    enum { B = 16, STEPS = 40, NTEST = 300 };
    struct resnet_model *m;
    REQUIRE(resnet_create(d, &c, B, DT_F32, &m, &e) == 0);
    REQUIRE(resnet_init(m, 1, &e) == 0);
    struct imgdata_opts o = {.seed = 1234, .train_samples = B * STEPS, .test_samples = NTEST};
    struct imgdata *data;
    REQUIRE(imgdata_open("synthetic", &o, &data, &e) == 0);
    size_t np = resnet_n_params(m);
    float *buf = calloc(np, sizeof(float));
    float *x = malloc((size_t)B * 3072 * 4);
    int32_t lab[B];
    uint32_t idx[B];
    double first = 0, last = 0;
    for (int s = 0; s < STEPS; s++) {
        for (int i = 0; i < B; i++) idx[i] = (uint32_t)(s * B + i);
        imgdata_fill(data, 0, idx, B, 1, 77, 0, x, lab);
        struct resnet_batch b = {.B = B, .n_valid = B, .x = x, .labels = lab};
        struct resnet_loss l;
        REQUIRE(resnet_forward_backward(m, &b, NULL, 1.0f / B, &l, &e) == 0);
        float lr = 0.05f * (s < 10 ? (float)(s + 1) / 10.0f : 1.0f);
        REQUIRE(sgdm_step(d, resnet_params(m), resnet_grads(m), buf, np, lr, 0.9f, 5e-4f) == 0);
        if (s < 10) first += l.sum / B / 10;
        if (s >= STEPS - 10) last += l.sum / B / 10;
    }
    struct img_eval ev = {0};
    for (int i0 = 0; i0 < NTEST; i0 += B) {
        int n = NTEST - i0 < B ? NTEST - i0 : B;
        for (int i = 0; i < n; i++) idx[i] = (uint32_t)(i0 + i);
        imgdata_fill(data, 1, idx, n, 0, 0, 0, x, lab);
        struct resnet_batch b = {.B = B, .n_valid = n, .x = x, .labels = lab};
        float l[B];
        int32_t p[B];
        REQUIRE(resnet_predict(m, &b, l, p, &e) == 0);
        img_eval_add(&ev, l, p, lab, n);
    }
    fprintf(stderr, "  resnet-tiny, %d steps of %d: train loss %.3f -> %.3f, test top-1 %.3f, loss %.3f\n", STEPS, B,
            first, last, img_eval_top1(&ev), img_eval_loss(&ev));
    CHECK(last < first - 0.3);
    CHECK(img_eval_top1(&ev) > 0.3); /* chance is 0.1 */
    free(buf);
    free(x);
    imgdata_free(data);
    resnet_free(m);
    dev_close(d);
}

TEST(resnet_bf16_step_runs_and_rounds)
{
    struct dev *d = open_dev(NUMERICS_FAST, 0);
    if (!d) TEST_SKIP("no vision ops");
    struct resnet_config c;
    plumb_err e = {0};
    REQUIRE(resnet_config_preset("resnet-tiny", &c, &e) == 0);
    struct resnet_model *m;
    REQUIRE(resnet_create(d, &c, 4, DT_BF16, &m, &e) == 0);
    REQUIRE(resnet_init(m, 1, &e) == 0);
    float *x = malloc(4 * 3072 * 4);
    for (int i = 0; i < 4 * 3072; i++) x[i] = (float)(2 * urand() - 1);
    int32_t lab[4] = {1, 2, 3, 4};
    struct resnet_batch b = {.B = 4, .n_valid = 4, .x = x, .labels = lab};
    struct resnet_loss l;
    REQUIRE(resnet_forward_backward(m, &b, NULL, 0.25f, &l, &e) == 0);
    CHECK(isfinite(l.sum) && l.sum > 0);
    size_t np = resnet_n_params(m);
    float *g = malloc(np * 4);
    dev_download(d, g, resnet_grads(m), np * 4, &e);
    double n2 = 0;
    for (size_t i = 0; i < np; i++) n2 += (double)g[i] * g[i];
    CHECK(isfinite(n2) && n2 > 0);
    free(g), free(x);
    resnet_free(m);
    dev_close(d);
}

TEST(resnet_bad_batch_is_an_error)
{
    struct dev *d = open_dev(NUMERICS_FAST, 0);
    if (!d) TEST_SKIP("no vision ops");
    struct resnet_config c;
    plumb_err e = {0};
    REQUIRE(resnet_config_preset("resnet-tiny", &c, &e) == 0);
    struct resnet_model *m;
    REQUIRE(resnet_create(d, &c, 2, DT_F32, &m, &e) == 0);
    float x[2 * 3072] = {0};
    int32_t lab[2] = {3, 10};
    struct resnet_batch b = {.B = 2, .n_valid = 2, .x = x, .labels = lab};
    CHECK(resnet_forward_backward(m, &b, NULL, 1.0f, NULL, &e) == PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "sample 1 label 10"), "message: %s", e.msg);
    lab[1] = 0;
    b.n_valid = 1; /* BN over 1 value per channel cannot train */
    b.B = 1;
    CHECK(resnet_forward_backward(m, &b, NULL, 1.0f, NULL, &e) == 0); /* 32x32 values per channel: fine */
    resnet_free(m);
    dev_close(d);
}
