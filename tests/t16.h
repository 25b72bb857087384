/* Test helpers for the 16-bit activation ops (tests/test_gpt16_ops.c,
 * tests/test_resnet16_ops.c): rt values, and tensors held on the device both
 * as fp32 numbers and as their 16-bit values, so an op and its 16-bit form
 * read the same inputs. */
#ifndef PLUMB_TESTS_T16_H
#define PLUMB_TESTS_T16_H
#include "core/dtype.h"
#include "dev/dev.h"
#include <stdlib.h>
#include <string.h>

static uint64_t rs16 = 0x9e3779b97f4a7c15ull; /* xorshift state; a test may reseed it */
static inline float urand16(void)
{
    rs16 ^= rs16 << 13;
    rs16 ^= rs16 >> 7;
    rs16 ^= rs16 << 17;
    return (float)((double)(rs16 >> 11) * (1.0 / 9007199254740992.0));
}

static inline float to_rt(float v, dtype_t rt) { return rt == DT_F16 ? f16_to_f32(f32_to_f16(v)) : bf16_to_f32(f32_to_bf16(v)); }
static inline uint16_t bits16(float v, dtype_t rt) { return rt == DT_F16 ? f32_to_f16(v) : f32_to_bf16(v); }
static inline float from16(uint16_t b, dtype_t rt) { return rt == DT_F16 ? f16_to_f32(b) : bf16_to_f32(b); }

/* one tensor on the host and the device, as fp32 and as 16 bits */
struct t16 {
    size_t n;
    float *h;      /* host fp32 (the values uploaded) */
    float *d;      /* device fp32 */
    uint16_t *d16; /* device 16-bit */
};

/* fill: 0 zeros, 1 rt values in [lo, hi), 2 fp32 values in [lo, hi) (not
 * rounded: the 16-bit copy is their rounding) */
static inline int alloc_t(struct dev *d, struct t16 *t, size_t n, int fill, float lo, float hi, dtype_t rt)
{
    plumb_err e = {0};
    memset(t, 0, sizeof *t);
    t->n = n;
    t->h = calloc(n ? n : 1, sizeof(float));
    uint16_t *h16 = calloc(n ? n : 1, sizeof(uint16_t));
    if (!t->h || !h16) {
        free(h16);
        return -1;
    }
    for (size_t i = 0; fill && i < n; i++) {
        const float v = lo + (hi - lo) * urand16();
        t->h[i] = fill == 1 ? to_rt(v, rt) : v;
        h16[i] = bits16(t->h[i], rt);
    }
    int rc = dev_alloc(d, (n ? n : 1) * sizeof(float), (void **)&t->d, &e) ||
             dev_alloc(d, (n ? n : 1) * sizeof(uint16_t), (void **)&t->d16, &e) ||
             dev_upload(d, t->d, t->h, n * sizeof(float), &e) || dev_upload(d, t->d16, h16, n * sizeof(uint16_t), &e);
    free(h16);
    return rc ? -1 : 0;
}

static inline void free_t(struct dev *d, struct t16 *t)
{
    if (t->d) dev_free(d, t->d);
    if (t->d16) dev_free(d, t->d16);
    free(t->h);
    memset(t, 0, sizeof *t);
}

/* the device's fp32 values of t (f32, may be NULL) and its 16-bit values
 * widened (w16, may be NULL) */
static inline void fetch(struct dev *d, const struct t16 *t, float *f32, float *w16, dtype_t rt)
{
    plumb_err e = {0};
    uint16_t *b = malloc((t->n ? t->n : 1) * sizeof *b);
    dev_sync(d, &e);
    if (f32) dev_download(d, f32, t->d, t->n * sizeof(float), &e);
    if (w16 && b && !dev_download(d, b, t->d16, t->n * sizeof(uint16_t), &e))
        for (size_t i = 0; i < t->n; i++) w16[i] = from16(b[i], rt);
    free(b);
}

/* t's 16-bit copy = the rt values of v [t->n] */
static inline void put16(struct dev *d, struct t16 *t, const float *v, dtype_t rt)
{
    plumb_err e = {0};
    uint16_t *b = malloc((t->n ? t->n : 1) * sizeof *b);
    for (size_t i = 0; b && i < t->n; i++) b[i] = bits16(v[i], rt);
    if (b) dev_upload(d, t->d16, b, t->n * sizeof(uint16_t), &e);
    free(b);
}

static inline int is_cpu(const struct dev *d) { return !strcmp(d->be->name, "cpu"); }

#endif
