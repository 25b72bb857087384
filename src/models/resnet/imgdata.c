/* Image datasets, augmentation and exact eval totals: see imgdata.h. */
#include "models/resnet/imgdata.h"
#include "core/philox.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const float cifar_mean[3] = {0.4914f, 0.4822f, 0.4465f}, cifar_std[3] = {0.2470f, 0.2435f, 0.2616f};
static const float inet_mean[3] = {0.485f, 0.456f, 0.406f}, inet_std[3] = {0.229f, 0.224f, 0.225f};

static void make_lut(struct imgdata *d, const float *mean, const float *sd)
{
    for (int c = 0; c < 3; c++)
        for (int v = 0; v < 256; v++) d->lut[c][v] = ((float)v / 255.0f - mean[c]) / sd[c];
}

int imgdata_open(const char *spec, const struct imgdata_opts *o, struct imgdata **out, plumb_err *e)
{
    *out = NULL;
    if (!spec || !*spec) return err_set(e, PLUMB_EUSAGE, "image data: no source (expected synthetic, synthetic224 or "
                                                         "a CIFAR-10 binary directory)");
    struct imgdata *d = calloc(1, sizeof *d);
    if (!d) return err_set(e, PLUMB_ENOMEM, "image data: out of memory");
    int rc = PLUMB_OK;
    if (!strcmp(spec, "synthetic224")) {
        d->side = IMG224_SIDE;
        d->classes = o->classes > 0 ? o->classes : 1000;
        d->n[0] = o->train_samples > 0 ? o->train_samples : 1281167; /* ImageNet-1k's training set size */
        d->n[1] = o->test_samples > 0 ? o->test_samples : 50000;
        rc = img224_create(o->seed, d->classes, &d->s224, e);
        make_lut(d, inet_mean, inet_std);
        snprintf(d->desc, sizeof d->desc, "synthetic 224x224 (%d classes, data seed %llu), %ld train / %ld test",
                 d->classes, (unsigned long long)o->seed, d->n[0], d->n[1]);
    } else if (!strcmp(spec, "synthetic")) {
        d->side = CIFAR_SIDE;
        d->classes = CIFAR_CLASSES;
        long nt = o->train_samples > 0 ? o->train_samples : 50000, ne = o->test_samples > 0 ? o->test_samples : 10000;
        rc = imgsynth_cifar_set(o->seed, IMG_SPLIT_TRAIN, 0, (size_t)nt, &d->set[0], e);
        if (!rc) rc = imgsynth_cifar_set(o->seed, IMG_SPLIT_TEST, 0, (size_t)ne, &d->set[1], e);
        make_lut(d, cifar_mean, cifar_std);
        snprintf(d->desc, sizeof d->desc, "synthetic CIFAR (data seed %llu), %ld train / %ld test",
                 (unsigned long long)o->seed, nt, ne);
    } else {
        d->side = CIFAR_SIDE;
        d->classes = CIFAR_CLASSES;
        rc = cifar_read_dir(spec, 1, &d->set[0], e);
        if (!rc) rc = cifar_read_dir(spec, 0, &d->set[1], e);
        make_lut(d, cifar_mean, cifar_std);
        snprintf(d->desc, sizeof d->desc, "CIFAR-10 binary %s, %zu train / %zu test", spec, d->set[0].n, d->set[1].n);
    }
    if (rc) {
        imgdata_free(d);
        return rc;
    }
    if (!d->s224) {
        d->n[0] = (long)d->set[0].n;
        d->n[1] = (long)d->set[1].n;
    }
    *out = d;
    return PLUMB_OK;
}

void imgdata_free(struct imgdata *d)
{
    if (!d) return;
    cifar_set_free(&d->set[0]);
    cifar_set_free(&d->set[1]);
    img224_free(d->s224);
    free(d);
}

void imgdata_augment_params(uint64_t aug_seed, uint32_t epoch, uint32_t sample, int *ox, int *oy, int *flip)
{
    uint32_t w[4];
    philox_block(aug_seed, RNG_AUGMENT, epoch, sample, 0, w);
    *ox = (int)(w[0] % 9u);
    *oy = (int)(w[1] % 9u);
    *flip = (int)(w[2] & 1u);
}

/* one 32x32 image: CHW bytes -> NHWC normalised, cropped and flipped */
static void fill_cifar(const struct imgdata *d, const uint8_t *chw, int ox, int oy, int flip, float *x)
{
    const int S = CIFAR_SIDE, HW = S * S;
    for (int h = 0; h < S; h++)
        for (int w = 0; w < S; w++) {
            int sw = flip ? S - 1 - w : w;  /* flip of the crop */
            int ih = oy + h - 4, iw = ox + sw - 4; /* in the unpadded image */
            int in = ih >= 0 && ih < S && iw >= 0 && iw < S;
            float *dst = x + ((size_t)h * S + w) * 3;
            for (int c = 0; c < 3; c++) dst[c] = d->lut[c][in ? chw[c * HW + ih * S + iw] : 0];
        }
}

void imgdata_fill(const struct imgdata *d, int split, const uint32_t *idx, int count, int augment, uint64_t aug_seed,
                  uint32_t epoch, float *x, int32_t *labels)
{
    const size_t row = (size_t)d->side * d->side * 3;
#pragma omp parallel for schedule(dynamic, 8) if (count >= 64)
    for (int r = 0; r < count; r++) {
        float *xr = x + (size_t)r * row;
        if (d->s224) {
            uint8_t hwc[IMG224_SIDE * IMG224_SIDE * 3];
            img224_sample(d->s224, split, idx[r], &labels[r], hwc);
            for (size_t i = 0; i < row; i++) xr[i] = d->lut[i % 3][hwc[i]];
            continue;
        }
        const struct cifar_set *s = &d->set[split];
        size_t i = idx[r];
        int ox = 4, oy = 4, flip = 0; /* no augmentation: the image itself */
        if (augment) imgdata_augment_params(aug_seed, epoch, idx[r], &ox, &oy, &flip);
        labels[r] = s->labels[i];
        fill_cifar(d, s->pixels + i * CIFAR_PIXELS, ox, oy, flip, xr);
    }
}

void img_eval_add(struct img_eval *ev, const float *loss, const int32_t *pred, const int32_t *labels, int n)
{
    for (int i = 0; i < n; i++) {
        ev->count++;
        ev->correct += pred[i] == labels[i];
        ev->loss_fix += (int64_t)llrint((double)loss[i] * 4294967296.0);
    }
}
double img_eval_top1(const struct img_eval *ev) { return ev->count ? (double)ev->correct / (double)ev->count : 0.0; }
double img_eval_loss(const struct img_eval *ev)
{
    return ev->count ? (double)ev->loss_fix / 4294967296.0 / (double)ev->count : 0.0;
}
