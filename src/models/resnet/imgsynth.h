/* Synthetic class-conditional images, every one a pure function of
 * (data seed, split, sample index) through Philox (purpose RNG_DATA), so any
 * rank generates any sample and a file written by `plumb data synth-cifar`
 * holds exactly the images `--data synthetic` generates in memory.
 *
 * CIFAR-sized images (32x32x3, the CIFAR-10 binary layout of cifar.h).
 * Each of the 10 classes has a prototype drawn from the seed: a grating
 * (orientation, spatial frequency, per-channel amplitude), a colour tint and
 * the centre of a bright blob. A sample of class k is
 *   v[c,h,w] = tint_k[c] + brightness + contrast * 0.25 * amp_k[c] *
 *              cos(2 pi (f_k (w cos t_k + h sin t_k) / 32 + phase))
 *            + 0.30 * blob_k(h - dy, w - dx)            (Gaussian, radius 4)
 *            + 0.09 * cos(2 pi (f' (w cos t' + h sin t') / 32 + phase'))
 *            + 0.10 * noise                           (triangular, [-1, 1])
 * with per-sample phase, contrast in [0.6, 1], brightness in [-0.1, 0.1],
 * blob jitter dx, dy in [-3, 3], and a distractor grating (t', f', phase')
 * of a random other orientation; pixel = round(255 clamp(v, 0, 1)). The
 * class lives in orientation, frequency, colour and blob position, none of
 * which alone is a lookup: a small convolutional net learns it well above
 * chance (10%) in a few hundred steps, a linear model on pixels much less
 * (the phase, shift and distractor move every pixel). Labels are uniform
 * over the 10 classes. Transcendentals are core/gmath.h's, so every host
 * writes the same bytes.
 *
 * 224x224 throughput source: 16 base textures of 256x256x3 (the same
 * prototype recipe at 8x the scale, generated once), sample i of class
 * y = hash(i) mod n_classes shows texture y mod 16 cropped at an offset
 * and flip from (seed, i): cheap enough that the host feeds a GPU
 * (memcpy-speed per image), labelled so that loss and accuracy mean
 * something (16 texture families). */
#ifndef PLUMB_IMGSYNTH_H
#define PLUMB_IMGSYNTH_H
#include <stddef.h>
#include <stdint.h>
#include "core/err.h"
#include "models/resnet/cifar.h"

enum { IMG_SPLIT_TRAIN = 0, IMG_SPLIT_TEST = 1 };

struct imgsynth_proto {
    float theta[CIFAR_CLASSES], freq[CIFAR_CLASSES];
    float amp[CIFAR_CLASSES][3], tint[CIFAR_CLASSES][3];
    float bx[CIFAR_CLASSES], by[CIFAR_CLASSES];
};

/* The class prototypes of a data seed. */
void imgsynth_protos(uint64_t seed, struct imgsynth_proto *p);
/* Sample `index` of split: *label and pixels [3, 32, 32] (CHW). */
void imgsynth_cifar_sample(uint64_t seed, const struct imgsynth_proto *p, int split, uint64_t index,
                           uint8_t *label, uint8_t *pixels);
/* Samples [first, first + n) of split into s (allocated here; threads). */
int imgsynth_cifar_set(uint64_t seed, int split, size_t first, size_t n, struct cifar_set *s, plumb_err *e);

/* The 224x224 source. */
#define IMG224_SIDE 224
#define IMG224_TEX 256
#define IMG224_NTEX 16
struct img224 {
    uint64_t seed;
    int classes;
    uint8_t *tex; /* [16, 256, 256, 3] HWC */
};
int img224_create(uint64_t seed, int classes, struct img224 **out, plumb_err *e);
void img224_free(struct img224 *s);
/* *label and pixels [224, 224, 3] (HWC, uint8) of sample index of split. */
void img224_sample(const struct img224 *s, int split, uint64_t index, int32_t *label, uint8_t *hwc);

#endif
