/* Image datasets for resnet and the batch they fill.
 *
 * Sources (imgdata_open spec):
 *   "synthetic"    CIFAR-sized synthetic images (models/resnet/imgsynth.h),
 *                  both splits generated into memory at open: the same
 *                  images `plumb data synth-cifar` writes;
 *   DIR            a CIFAR-10 binary directory (data_batch_1..5.bin,
 *                  test_batch.bin; models/resnet/cifar.h);
 *   "synthetic224" the 224x224 throughput source (imgsynth.h), generated
 *                  per access.
 *
 * A batch row is one image as NHWC fp32 [side, side, 3], normalised per
 * channel, (pixel / 255 - mean_c) / std_c (CIFAR-10's mean and std for the
 * 32x32 sources, ImageNet's for 224), and an int32 label.
 *
 * Augmentation (training split of the 32x32 sources, when asked): random
 * crop of the image zero-padded by 4 (torchvision RandomCrop(32, padding=4):
 * the padding is pixel value 0, normalised like any pixel) then horizontal
 * flip with probability 1/2 (RandomHorizontalFlip). The crop offset and the
 * flip of sample i in epoch t are Philox block (aug seed, RNG_AUGMENT, a = t,
 * b = i): words 0 and 1 mod 9 give the column and row offset in the padded
 * 40x40 image, bit 0 of word 2 the flip. So every rank count sees the images
 * one rank sees. */
#ifndef PLUMB_IMGDATA_H
#define PLUMB_IMGDATA_H
#include <stddef.h>
#include <stdint.h>
#include "core/err.h"
#include "models/resnet/cifar.h"
#include "models/resnet/imgsynth.h"

struct imgdata_opts {
    uint64_t seed;      /* synthetic sources: the data seed */
    long train_samples; /* synthetic: training-split size (0: 50000) */
    long test_samples;  /* synthetic: test-split size (0: 10000) */
    int classes;        /* synthetic224: label count (0: 1000) */
};

struct imgdata {
    int side;                  /* 32 or 224 */
    int classes;               /* 10, or the 224 source's */
    long n[2];                 /* samples of split 0 (train) and 1 (test) */
    struct cifar_set set[2];   /* 32x32 sources: in memory */
    struct img224 *s224;       /* the 224 source */
    float lut[3][256];         /* normalised value of each byte, per channel */
    char desc[512];
};

int imgdata_open(const char *spec, const struct imgdata_opts *o, struct imgdata **out, plumb_err *e);
void imgdata_free(struct imgdata *d);

/* Rows r < count: sample idx[r] of split into x [count, side, side, 3] and
 * labels [count]; augment (32x32 only) with (aug_seed, epoch) as above. */
void imgdata_fill(const struct imgdata *d, int split, const uint32_t *idx, int count, int augment,
                  uint64_t aug_seed, uint32_t epoch, float *x, int32_t *labels);
/* The crop offsets (0..8 in the padded image) and flip of sample i in epoch t. */
void imgdata_augment_params(uint64_t aug_seed, uint32_t epoch, uint32_t sample, int *ox, int *oy, int *flip);

/* Exact evaluation totals (top-1 and loss over the samples scored), summed
 * across ranks as integers: loss in 64-bit fixed point of 2^-32, so the
 * totals of N ranks equal 1 rank's when each sample is scored the same. */
struct img_eval {
    int64_t count, correct, loss_fix;
};
void img_eval_add(struct img_eval *ev, const float *loss, const int32_t *pred, const int32_t *labels, int n);
double img_eval_top1(const struct img_eval *ev);
double img_eval_loss(const struct img_eval *ev);

#endif
