/* The resnet workload's model interface (models/resnet/workload.h over
 * train/model.h): the tensor list (torchvision names that fit, weight decay
 * on the conv and linear weights only, BN running statistics as buffers),
 * the grad-ready buckets (descending, covering the parameters once, merged
 * when the trainer takes fewer), and the optimizer's ranges (two per layer).
 * The trainer runs of the workload are tests/t_resnet.sh. */
#include "test.h"
#include "dev/dev.h"
#include "models/resnet/workload.h"
#include "models/workloads.h"
#include "train/optim.h"
#include "train/options.h"
#include <stdlib.h>
#include <string.h>

static void check_preset(const char *preset, int nblocks)
{
    const struct workload *wl = workload_find("resnet");
    REQUIRE(wl);
    struct train_config cfg;
    plumb_err e = {0};
    train_config_defaults(&cfg, wl);
    REQUIRE(train_option_set(&cfg, "--preset", preset, &e) == 0);
    REQUIRE(train_config_finish(&cfg, &e) == 0);
    void *spec = NULL;
    char desc[256];
    REQUIRE(wl->configure(&cfg, &spec, desc, sizeof desc, &e) == 0);
    CHECK_MSG(strstr(desc, preset) && strstr(desc, "synchronised BatchNorm"), "%s", desc);
    struct dev *d = NULL;
    REQUIRE(dev_open("cpu", &d, &e) == 0);
    struct model *m = NULL;
    int rc = wl->model->create(d, spec, 2, DT_F32, &m, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (rc) {
        dev_close(d);
        wl->spec_free(spec);
        return;
    }
    const struct model_layout *L = wl->model->layout(m);
    CHECK(L->n_dense == L->n_params && L->sparse_dim == 0 && L->out_width == RESNET_OUT_WIDTH);
    int conv = 0, bn = 0, buf = 0, decayed_fc = 0;
    for (int i = 0; i < L->n_tensors; i++) {
        const struct model_tensor *t = &L->tensors[i];
        const int is_conv = strstr(t->name, "conv") || strstr(t->name, "downsample.0");
        const int is_bn = !(t->flags & TENSOR_BUFFER) && !is_conv && strncmp(t->name, "fc.", 3);
        CHECK_MSG((size_t)t->rows * t->cols == t->numel, "%s: %d x %d != %zu", t->name, t->rows, t->cols, t->numel);
        if (t->flags & TENSOR_BUFFER) {
            buf++;
            CHECK_MSG(strstr(t->name, ".running_mean") || strstr(t->name, ".running_var"), "%s", t->name);
            CHECK(t->offset + t->numel <= L->n_buffers);
        } else if (is_conv) {
            conv++;
            CHECK_MSG(t->flags == TENSOR_DECAY, "%s: flags %u (conv weights decay)", t->name, t->flags);
        } else if (is_bn) {
            bn++;
            CHECK_MSG(t->flags == 0, "%s: flags %u (BN parameters do not decay)", t->name, t->flags);
        } else {
            decayed_fc += !!(t->flags & TENSOR_DECAY);
            CHECK_MSG(!strcmp(t->name, "fc.weight") == !!(t->flags & TENSOR_DECAY), "%s: flags %u", t->name, t->flags);
        }
    }
    CHECK(decayed_fc == 1);
    CHECK_MSG(bn == 2 * (buf / 2) && buf > 0, "%d BN parameter tensors, %d buffers", bn, buf);
    CHECK_MSG(conv > nblocks, "%d convs for %d blocks", conv, nblocks);
    /* buckets: descending, contiguous, covering [0, n_dense) once; and merged */
    for (int max = 64; max >= 1; max = max > 3 ? 3 : max - 1) {
        size_t off[64], len[64];
        int n = wl->model->grad_buckets(m, off, len, max);
        CHECK_EQ_INT(n, nblocks + 2 < max ? nblocks + 2 : max);
        size_t hi = L->n_dense;
        for (int k = 0; k < n; k++) {
            CHECK_MSG(off[k] + len[k] == hi && len[k] > 0, "max %d: bucket %d [%zu, +%zu) after %zu", max, k, off[k],
                      len[k], hi);
            hi = off[k];
        }
        CHECK_MSG(hi == 0, "max %d: the buckets end at %zu", max, hi);
    }
    /* the optimizer takes each layer's decayed weights and BN parameters as two ranges */
    struct optim o;
    REQUIRE(optim_init(&o, d, L, "sgd", 5e-4, 0.9, 0.9, 0.999, 1e-8, &e) == 0);
    CHECK_EQ_INT(o.n_ranges, 2 * (nblocks + 2));
    for (int r = 0; r < o.n_ranges; r++) CHECK_EQ_INT(o.dec[r], r % 2 == 0);
    optim_free(&o);
    wl->model->free(m);
    wl->spec_free(spec);
    dev_close(d);
}

TEST(resnet_workload_tensor_list_buckets_ranges)
{
    check_preset("resnet-tiny", 3);
    check_preset("resnet18", 8);
    check_preset("resnet50-cifar", 16);
}

/* Synthetic CIFAR is generated into memory at open: more images than this
 * host's memory holds is exit 2 naming --train-samples/--eval-samples and
 * what they need (it was exit 3 "synthetic CIFAR: out of memory for N
 * images"). 4e9 images are 12 TB: more than any host. */
TEST(resnet_synthetic_beyond_memory_names_the_counts)
{
    const struct workload *wl = workload_find("resnet");
    REQUIRE(wl);
    struct train_config cfg;
    plumb_err e = {0};
    train_config_defaults(&cfg, wl);
    REQUIRE(train_option_set(&cfg, "--train-samples", "4000000000", &e) == 0);
    REQUIRE(train_config_finish(&cfg, &e) == 0);
    void *spec = NULL;
    REQUIRE(wl->configure(&cfg, &spec, NULL, 0, &e) == 0);
    struct data_source *ds = NULL;
    CHECK_EQ_INT(wl->data->open(&cfg, spec, 0, &ds, &e), PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "--train-samples 4000000000") && strstr(e.msg, "GB"), "%s", e.msg);
    if (ds) wl->data->free(ds);
    wl->spec_free(spec);
}

TEST(resnet_workload_data_and_preset_errors)
{
    const struct workload *wl = workload_find("resnet");
    REQUIRE(wl);
    struct {
        const char *preset, *data, *want;
    } cases[] = {
        {"resnet50", "/tmp", "CIFAR-10 images are 32x32, preset resnet50 takes 224x224"},
        {"resnet18", "synthetic224", "preset resnet18 takes 32x32"},
        {"resnet-tiny", "/nonexistent-cifar", "not a directory"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct train_config cfg;
        plumb_err e = {0};
        train_config_defaults(&cfg, wl);
        REQUIRE(train_option_set(&cfg, "--preset", cases[i].preset, &e) == 0);
        REQUIRE(train_option_set(&cfg, "--data", cases[i].data, &e) == 0);
        REQUIRE(train_config_finish(&cfg, &e) == 0);
        void *spec = NULL;
        CHECK_EQ_INT(wl->configure(&cfg, &spec, NULL, 0, &e), PLUMB_EUSAGE);
        CHECK_MSG(strstr(e.msg, cases[i].want), "%s --data %s: %s", cases[i].preset, cases[i].data, e.msg);
    }
    /* --eval-data: resnet scores the --data directory's test_batch.bin (or
     * the synthetic test split); a file given there was ignored silently */
    {
        struct train_config cfg;
        plumb_err e = {0};
        train_config_defaults(&cfg, wl);
        REQUIRE(train_option_set(&cfg, "--eval-data", "/tmp/some_test_batch.bin", &e) == 0);
        REQUIRE(train_config_finish(&cfg, &e) == 0);
        void *spec = NULL;
        CHECK_EQ_INT(wl->configure(&cfg, &spec, NULL, 0, &e), PLUMB_EUSAGE);
        CHECK_MSG(strstr(e.msg, "--eval-data /tmp/some_test_batch.bin") && strstr(e.msg, "test_batch.bin"), "%s", e.msg);
        if (spec) wl->spec_free(spec);
    }
    struct train_config cfg;
    plumb_err e = {0};
    train_config_defaults(&cfg, wl);
    CHECK_EQ_INT(train_option_set(&cfg, "--bn", "median", &e), PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "--bn") && strstr(e.msg, "sync|local"), "%s", e.msg);
}
