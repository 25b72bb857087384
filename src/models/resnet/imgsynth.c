/* Synthetic class-conditional images: see imgsynth.h for the generator. */
#include "models/resnet/imgsynth.h"
#include "core/gmath.h"
#include "core/philox.h"
#include <stdlib.h>
#include <string.h>

/* Philox RNG_DATA `a` values of the image generators ("CI" in the high half) */
#define A_PROTO 0x43490001u
#define A_LABEL 0x43490002u
#define A_PARAM 0x43490003u
#define A_NOISE 0x43490004u
#define A_TEX 0x43490005u
#define A_224 0x43490006u

void imgsynth_protos(uint64_t seed, struct imgsynth_proto *p)
{
    for (int k = 0; k < CIFAR_CLASSES; k++) {
        float u[10];
        for (int j = 0; j < 10; j++) u[j] = philox_uniform_at(seed, RNG_DATA, A_PROTO, (uint32_t)k, (uint64_t)j);
        p->theta[k] = ((float)k + 0.4f * (u[0] - 0.5f)) / (float)CIFAR_CLASSES; /* in units of pi */
        p->freq[k] = 1.5f + 3.0f * u[1];                                       /* cycles per 32 pixels */
        for (int c = 0; c < 3; c++) {
            p->amp[k][c] = 0.4f + 0.6f * u[2 + c];
            p->tint[k][c] = 0.3f + 0.4f * u[5 + c];
        }
        p->bx[k] = 8.0f + 16.0f * u[8];
        p->by[k] = 8.0f + 16.0f * u[9];
    }
}

static uint8_t to_byte(float v)
{
    v = v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
    return (uint8_t)(v * 255.0f + 0.5f);
}

void imgsynth_cifar_sample(uint64_t seed, const struct imgsynth_proto *p, int split, uint64_t index, uint8_t *label,
                           uint8_t *pixels)
{
    const uint32_t sp = (uint32_t)split;
    const int k = (int)(philox_u32_at(seed, RNG_DATA, A_LABEL, sp, index) % CIFAR_CLASSES);
    *label = (uint8_t)k;
    float v[8];
    for (int j = 0; j < 8; j++) v[j] = philox_uniform_at(seed, RNG_DATA, A_PARAM, sp, index * 8 + (uint64_t)j);
    const float phase = v[0], contrast = 0.6f + 0.4f * v[1], bright = -0.1f + 0.2f * v[2];
    const float dx = (float)((int)(v[3] * 7.0f) - 3), dy = (float)((int)(v[4] * 7.0f) - 3);
    const float t2 = v[5], f2 = 1.5f + 3.0f * v[6], phase2 = v[7];
    const float ct = gcospif(p->theta[k]), st = gsinpif(p->theta[k]), ct2 = gcospif(t2), st2 = gsinpif(t2);
    const float bx = p->bx[k] + dx, by = p->by[k] + dy;
    float grat[CIFAR_SIDE * CIFAR_SIDE], rest[CIFAR_SIDE * CIFAR_SIDE];
    for (int h = 0; h < CIFAR_SIDE; h++)
        for (int w = 0; w < CIFAR_SIDE; w++) {
            float x = ((float)w * ct + (float)h * st) * p->freq[k] / (float)CIFAR_SIDE;
            float x2 = ((float)w * ct2 + (float)h * st2) * f2 / (float)CIFAR_SIDE;
            float ddx = (float)w - bx, ddy = (float)h - by;
            float blob = gexpf(-(ddx * ddx + ddy * ddy) / 32.0f);
            grat[h * CIFAR_SIDE + w] = gcospif(2.0f * (x + phase));
            rest[h * CIFAR_SIDE + w] = 0.30f * blob + 0.09f * gcospif(2.0f * (x2 + phase2));
        }
    /* noise: pixel q takes the byte pair (q & 1) of word (q / 2) % 4 of
     * Philox block index * 384 + q / 8 (eight pixels per block) */
    uint32_t blk[4];
    for (int q = 0; q < CIFAR_PIXELS; q++) {
        if ((q & 7) == 0) philox_block(seed, RNG_DATA, A_NOISE, sp, index * (CIFAR_PIXELS / 8) + (uint64_t)(q / 8), blk);
        uint32_t wd = blk[(q / 2) & 3];
        int sh = (q & 1) * 16;
        float noise = (float)(((wd >> sh) & 0xffu) + ((wd >> (sh + 8)) & 0xffu)) / 255.0f - 1.0f;
        int c = q / (CIFAR_SIDE * CIFAR_SIDE), hw = q % (CIFAR_SIDE * CIFAR_SIDE);
        float val = p->tint[k][c] + bright + contrast * 0.25f * p->amp[k][c] * grat[hw] + rest[hw] + 0.10f * noise;
        pixels[q] = to_byte(val);
    }
}

int imgsynth_cifar_set(uint64_t seed, int split, size_t first, size_t n, struct cifar_set *s, plumb_err *e)
{
    memset(s, 0, sizeof *s);
    s->labels = malloc(n ? n : 1);
    s->pixels = malloc((n ? n : 1) * CIFAR_PIXELS);
    if (!s->labels || !s->pixels) {
        cifar_set_free(s);
        return err_set(e, PLUMB_ENOMEM, "synthetic CIFAR: out of memory for %zu images", n);
    }
    struct imgsynth_proto p;
    imgsynth_protos(seed, &p);
#pragma omp parallel for schedule(dynamic, 64) if (n > 256)
    for (size_t i = 0; i < n; i++)
        imgsynth_cifar_sample(seed, &p, split, first + i, &s->labels[i], s->pixels + i * CIFAR_PIXELS);
    s->n = n;
    return PLUMB_OK;
}

/* ---------------- 224x224 ---------------- */

int img224_create(uint64_t seed, int classes, struct img224 **out, plumb_err *e)
{
    *out = NULL;
    if (classes < 1 || classes > 100000)
        return err_set(e, PLUMB_EUSAGE, "synthetic 224 source: %d classes (expected 1..100000)", classes);
    struct img224 *s = calloc(1, sizeof *s);
    const size_t tex_bytes = (size_t)IMG224_TEX * IMG224_TEX * 3;
    if (s) s->tex = malloc(IMG224_NTEX * tex_bytes);
    if (!s || !s->tex) {
        img224_free(s);
        return err_set(e, PLUMB_ENOMEM, "synthetic 224 source: out of memory for the textures");
    }
    s->seed = seed;
    s->classes = classes;
#pragma omp parallel for schedule(dynamic, 1)
    for (int t = 0; t < IMG224_NTEX; t++) {
        float u[10];
        for (int j = 0; j < 10; j++) u[j] = philox_uniform_at(seed, RNG_DATA, A_TEX, (uint32_t)t, (uint64_t)j);
        const float th = ((float)t + 0.4f * (u[0] - 0.5f)) / (float)IMG224_NTEX, f = 8.0f + 16.0f * u[1];
        const float ct = gcospif(th), st = gsinpif(th), bx = 64.0f + 128.0f * u[8], by = 64.0f + 128.0f * u[9];
        uint8_t *dst = s->tex + (size_t)t * tex_bytes;
        for (int h = 0; h < IMG224_TEX; h++)
            for (int w = 0; w < IMG224_TEX; w++) {
                float x = ((float)w * ct + (float)h * st) * f / (float)IMG224_TEX;
                float g = gcospif(2.0f * x);
                float ddx = (float)(w - bx), ddy = (float)(h - by);
                float blob = gexpf(-(ddx * ddx + ddy * ddy) / 2048.0f);
                for (int c = 0; c < 3; c++) {
                    float amp = 0.4f + 0.6f * u[2 + c], tint = 0.3f + 0.4f * u[5 + c];
                    dst[((size_t)h * IMG224_TEX + w) * 3 + c] = to_byte(tint + 0.25f * amp * g + 0.3f * blob);
                }
            }
    }
    *out = s;
    return PLUMB_OK;
}

void img224_free(struct img224 *s)
{
    if (!s) return;
    free(s->tex);
    free(s);
}

void img224_sample(const struct img224 *s, int split, uint64_t index, int32_t *label, uint8_t *hwc)
{
    uint32_t w[4];
    philox_block(s->seed, RNG_DATA, A_224, (uint32_t)split, index, w);
    const int y = (int)(w[0] % (uint32_t)s->classes);
    *label = y;
    const int range = IMG224_TEX - IMG224_SIDE + 1;
    const int ox = (int)(w[1] % (uint32_t)range), oy = (int)(w[2] % (uint32_t)range), flip = (int)(w[3] & 1u);
    const uint8_t *tex = s->tex + (size_t)(y % IMG224_NTEX) * IMG224_TEX * IMG224_TEX * 3;
    for (int h = 0; h < IMG224_SIDE; h++) {
        const uint8_t *src = tex + ((size_t)(oy + h) * IMG224_TEX + ox) * 3;
        uint8_t *dst = hwc + (size_t)h * IMG224_SIDE * 3;
        if (!flip) {
            memcpy(dst, src, (size_t)IMG224_SIDE * 3);
        } else {
            for (int x = 0; x < IMG224_SIDE; x++) memcpy(dst + (size_t)x * 3, src + (size_t)(IMG224_SIDE - 1 - x) * 3, 3);
        }
    }
}
