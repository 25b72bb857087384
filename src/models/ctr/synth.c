#include "models/ctr/synth.h"
#include "core/gmath.h"
#include "core/philox.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Criteo Kaggle cardinalities (C1..C26), capped so the head of every field is
 * learnable from a few hundred thousand samples. */
static const int card_full[CRITEO_CAT] = {1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3,
                                          93145, 5683, 8351593, 3194, 27, 14992, 5461306, 10,
                                          5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572};
#define CARD_CAP 20000
#define LATENT 4
#define NPAIRS 6
static const int pairs[NPAIRS][2] = {{0, 1}, {2, 5}, {3, 7}, {4, 10}, {8, 12}, {13, 14}};

/* Calibrated on the eval split (tests/test_data.c checks the outcome):
 * positive rate ~0.25, teacher AUC ~0.80. */
#define W_SCALE 0.24f
#define DENSE_SCALE 0.21f
#define PAIR_SCALE 0.29f
#define BIAS (-1.40f)

struct synth {
    uint64_t seed;
    int card[CRITEO_CAT];
    float zipf_s[CRITEO_CAT];
    double *cdf[CRITEO_CAT];       /* [card] cumulative, last = 1 */
    float *w[CRITEO_CAT];          /* [card] teacher weight */
    float *u[CRITEO_CAT];          /* [card, LATENT] or NULL when in no pair */
    float field_sd[CRITEO_CAT];
    float mu[CRITEO_DENSE], sd[CRITEO_DENSE], pm[CRITEO_DENSE], a[CRITEO_DENSE];
};


void synth_free(struct synth *s)
{
    if (!s) return;
    for (int f = 0; f < CRITEO_CAT; f++) free(s->cdf[f]), free(s->w[f]), free(s->u[f]);
    free(s);
}

/* uniform in [0,1) from one word of a fixed-parameter stream */
static float param_u(uint64_t seed, uint32_t a, uint64_t i)
{
    return philox_uniform_at(seed, RNG_DATA, a, 0, i);
}

int synth_create(uint64_t seed, struct synth **out, plumb_err *e)
{
    *out = NULL;
    struct synth *s = calloc(1, sizeof *s);
    if (!s) return err_set(e, PLUMB_ENOMEM, "synth: out of memory");
    s->seed = seed;
    for (int f = 0; f < CRITEO_CAT; f++) {
        int K = card_full[f] < CARD_CAP ? card_full[f] : CARD_CAP;
        s->card[f] = K;
        /* Zipf exponent 1.05 .. 1.45 and field importance 0.3 .. 1.3 */
        s->zipf_s[f] = 1.05f + 0.4f * param_u(seed, 1, (uint64_t)f);
        s->field_sd[f] = W_SCALE * (0.3f + param_u(seed, 2, (uint64_t)f));
        s->cdf[f] = malloc((size_t)K * sizeof(double));
        s->w[f] = malloc((size_t)K * sizeof(float));
        if (!s->cdf[f] || !s->w[f]) {
            synth_free(s);
            return err_set(e, PLUMB_ENOMEM, "synth: out of memory");
        }
        double acc = 0;
        for (int k = 0; k < K; k++) {
            acc += (double)gexpf(-s->zipf_s[f] * glogf((float)(k + 1)));
            s->cdf[f][k] = acc;
        }
        for (int k = 0; k < K; k++) s->cdf[f][k] /= acc;
        s->cdf[f][K - 1] = 1.0;
        for (int k = 0; k < K; k++)
            s->w[f][k] = s->field_sd[f] * philox_normal_at(seed, RNG_DATA, 200 + (uint32_t)f, 0, (uint64_t)k);
    }
    for (int p = 0; p < NPAIRS; p++)
        for (int side = 0; side < 2; side++) {
            int f = pairs[p][side];
            if (s->u[f]) continue;
            int K = s->card[f];
            s->u[f] = malloc((size_t)K * LATENT * sizeof(float));
            if (!s->u[f]) {
                synth_free(s);
                return err_set(e, PLUMB_ENOMEM, "synth: out of memory");
            }
            for (size_t i = 0; i < (size_t)K * LATENT; i++)
                s->u[f][i] = PAIR_SCALE * philox_normal_at(seed, RNG_DATA, 300 + (uint32_t)f, 0, i);
        }
    for (int i = 0; i < CRITEO_DENSE; i++) {
        s->mu[i] = 0.5f + 3.5f * param_u(seed, 3, (uint64_t)i);
        s->sd[i] = 0.6f + 0.9f * param_u(seed, 4, (uint64_t)i);
        s->pm[i] = 0.4f * param_u(seed, 5, (uint64_t)i);
        s->a[i] = DENSE_SCALE * philox_normal_at(seed, RNG_DATA, 6, 0, (uint64_t)i);
    }
    *out = s;
    return PLUMB_OK;
}

static int zipf_draw(const double *cdf, int K, uint32_t w0, uint32_t w1)
{
    /* 53-bit uniform in [0, 1) */
    double u = (double)(((uint64_t)w0 << 21) ^ (uint64_t)(w1 >> 11)) * 0x1p-53;
    int lo = 0, hi = K - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (cdf[mid] > u) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

static float sigmoidf_g(float z)
{
    if (z >= 0) return 1.0f / (1.0f + gexpf(-z));
    float t = gexpf(z);
    return t / (1.0f + t);
}

/* dense transform shared with the reader: log(1 + x) for x > 0 */
static float dense_tf(long long x) { return criteo_dense_transform(x); }

void synth_raw_sample(const struct synth *s, int split, uint64_t index, struct synth_raw *r)
{
    uint32_t wd[SYNTH_BLOCKS * 4];
    for (int b = 0; b < SYNTH_BLOCKS; b++)
        philox_block(s->seed, RNG_DATA, 0, (uint32_t)split, index * SYNTH_BLOCKS + (uint64_t)b, wd + 4 * b);
    /* words: 0..51 categorical (2 each), 52..77 dense normals (13 pairs),
     * 78..90 missing draws, 91 label */
    float logit = BIAS;
    int k[CRITEO_CAT];
    for (int f = 0; f < CRITEO_CAT; f++) {
        k[f] = zipf_draw(s->cdf[f], s->card[f], wd[2 * f], wd[2 * f + 1]);
        uint32_t tok = philox_u32_at(s->seed, RNG_DATA, 100 + (uint32_t)f, 0, (uint64_t)k[f]);
        snprintf(r->token[f], sizeof r->token[f], "%08x", tok);
        logit += s->w[f][k[f]];
    }
    for (int p = 0; p < NPAIRS; p++) {
        int f = pairs[p][0], g = pairs[p][1];
        const float *uf = s->u[f] + (size_t)k[f] * LATENT, *ug = s->u[g] + (size_t)k[g] * LATENT;
        float dot = 0;
        for (int j = 0; j < LATENT; j++) dot = fmaf(uf[j], ug[j], dot);
        logit += dot;
    }
    for (int i = 0; i < CRITEO_DENSE; i += 2) {
        float z[2];
        philox_box_muller(wd[52 + i], wd[53 + i], z);
        for (int j = 0; j < 2 && i + j < CRITEO_DENSE; j++) {
            int d = i + j;
            float v = gexpf(s->mu[d] + s->sd[d] * z[j]);
            long long c = v < 1e15f ? (long long)v : 1000000000000000LL;
            r->missing[d] = philox_u01(wd[78 + d]) < s->pm[d];
            r->dense[d] = r->missing[d] ? 0 : c;
            if (!r->missing[d]) logit += s->a[d] * (dense_tf(c) - s->mu[d]);
        }
    }
    r->p = sigmoidf_g(logit);
    r->label = philox_u01(wd[91]) < r->p;
}

void synth_sample(const struct synth *s, int split, uint64_t index, struct criteo_sample *out,
                  float *teacher_p)
{
    struct synth_raw r;
    synth_raw_sample(s, split, index, &r);
    out->label = (float)r.label;
    for (int i = 0; i < CRITEO_DENSE; i++) out->dense[i] = r.missing[i] ? 0.0f : dense_tf(r.dense[i]);
    for (int f = 0; f < CRITEO_CAT; f++) out->cat[f] = criteo_hash(f, r.token[f], 8);
    if (teacher_p) *teacher_p = r.p;
}
