/* Synthetic Criteo-format data from a hidden teacher (docs/TRAINING.md, "Data").
 *
 * Every sample is a pure function of (data seed, split, sample index): its
 * Philox stream is (seed, RNG_DATA, a = 0, b = split) and sample i uses the
 * blocks i*SYNTH_BLOCKS .. i*SYNTH_BLOCKS + SYNTH_BLOCKS-1, so any rank draws
 * any sample on its own. All arithmetic is golden float (core/gmath.h), so
 * the data has the same bits on every host.
 *
 * Features:
 *   - categorical field f (26): category k in 0..K_f-1 drawn from Zipf(s_f)
 *     (cardinalities modelled on Criteo Kaggle's, capped), written as the
 *     8-hex-digit token philox(seed, RNG_DATA, a = 100 + f, b = 0, k);
 *   - dense field i (13): count = floor(exp(mu_i + sd_i * z)) with z standard
 *     normal (log-normal counts), missing (empty) with probability pm_i.
 * Teacher: logit = bias + sum_f w_f[k_f] + sum_i a_i * (log(1 + count_i) - mu_i)
 *   + sum over 6 field pairs (f, g) of <u_f[k_f], u_g[k_g]> (4-d latents),
 * where w, u are normal draws keyed by (field, category); label ~
 * Bernoulli(sigmoid(logit)). The bias is chosen for a positive rate near 25%,
 * the scales for a teacher AUC near 0.80 on the eval split. */
#ifndef PLUMB_SYNTH_H
#define PLUMB_SYNTH_H
#include <stdint.h>
#include "core/err.h"
#include "models/ctr/criteo.h"

#define SYNTH_BLOCKS 24 /* Philox blocks (4 words each) per sample */
enum synth_split { SYNTH_TRAIN = 0, SYNTH_EVAL = 1 };

struct synth;

int synth_create(uint64_t seed, struct synth **out, plumb_err *e);
void synth_free(struct synth *s);

/* The raw sample as the TSV holds it: label, dense counts (missing[i] = 1:
 * empty field), tokens (8 hex digits + NUL), and the teacher's click
 * probability p (may be NULL). */
struct synth_raw {
    int label;
    long long dense[CRITEO_DENSE];
    unsigned char missing[CRITEO_DENSE];
    char token[CRITEO_CAT][9];
    float p;
};
void synth_raw_sample(const struct synth *s, int split, uint64_t index, struct synth_raw *r);
/* The parsed sample, exactly what criteo_parse_line gives for the raw line. */
void synth_sample(const struct synth *s, int split, uint64_t index, struct criteo_sample *out,
                  float *teacher_p);

#endif
