/* Per-seed training results (docs/COMPARE.md): the evidence `plumb compare`
 * tests. One JSON object per line (seeds.jsonl):
 *
 *   {"seed": 3, "auc": 0.7597, "logloss": 0.4741, "accuracy": 0.7781,
 *    "primary": "auc",                                       (optional)
 *    "better": {"auc": "higher", "logloss": "lower"},        (optional)
 *    "margin": "auc=0.15%",                                  (optional)
 *    "curve": [[5, 0.6862], [10, 0.6790], ...],            (optional)
 *    "info": {"samples_per_s": 18400, ...}}                  (optional)
 *
 * - "seed": an integer, unique in the file;
 * - every other top-level number is a metric compared between the sides;
 * - "primary": the metric whose verdict decides when plumb compare is given
 *   no --metric (a numeric field of the record; the same on every line);
 * - "better": per metric, "higher" or "lower" is better (reports say which
 *   side is ahead; the verdict itself is two-sided);
 * - "margin": the default equivalence margin, --margin's grammar ("0.15%",
 *   "0.001", "val_loss=0.5%,0.15%"), used when --margin is not given;
 *   plumb writes the workload's accept descriptor's (train/model.h) into
 *   all three;
 * - "curve": [step, training loss] pairs, steps increasing (plumb writes
 *   block means: the mean loss of the steps since the previous point);
 * - "info": anything else (throughput, digests, settings): shown, never
 *   tested; plumb's own records keep "param_digest" there;
 * - other strings, booleans and nulls at top level are ignored.
 * plumb writes checks/<name>[-<device>]/seeds.jsonl (accept --seeds, the
 * ladder's rungs); any framework can write the same lines. */
#ifndef PLUMB_SEEDS_H
#define PLUMB_SEEDS_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include "core/err.h"

#define SEEDS_MAX_METRICS 32
#define SEEDS_READ_CAP ((size_t)256 << 20) /* bytes of one seeds file */

struct seed_set {
    char path[4096];
    size_t n;               /* records */
    json_t **rec;           /* owned */
    long long *seed;
    char *metric[SEEDS_MAX_METRICS]; /* metric names in first-seen order (owned) */
    size_t nmetric;
    char primary[64];       /* "primary" of the records, "" when none */
    char margin[256];       /* "margin" of the records, "" when none */
    json_t *better;         /* "better" of the records merged: {metric: "higher"|"lower"} (owned) */
};

/* Reads and validates a seeds.jsonl file, a regular file of at most
 * SEEDS_READ_CAP bytes. PLUMB_EUSAGE naming the file, the
 * line and the field on a malformed line, a missing or duplicate seed, a
 * non-finite metric, or a bad curve. Blank lines are skipped; an empty file
 * is an error. */
int seeds_read(const char *path, struct seed_set *s, plumb_err *e);
void seeds_free(struct seed_set *s);
/* The metric's values over the records that have it (in file order);
 * returns how many (out has room for s->n). */
size_t seeds_values(const struct seed_set *s, const char *metric, double *out);
/* The mean of info.<key> over the records that have it; NaN when none. */
double seeds_info_mean(const struct seed_set *s, const char *key);
/* A metric present in both sets? */
int seeds_has_metric(const struct seed_set *s, const char *metric);
/* The records' direction of metric: 1 higher is better, -1 lower, 0 not stated. */
int seeds_better(const struct seed_set *s, const char *metric);

/* Downsamples a per-step loss sequence into at most max_points block means:
 * steps[i], loss[i] for i < n -> a JSON array [[step, mean], ...] whose step
 * is the last step of each block. Non-finite losses are left out of the mean
 * (a block of only non-finite values records null). */
json_t *seeds_curve_blocks(const long *steps, const double *loss, size_t n, size_t max_points);

/* Seed bands of two sets of curves on their common steps.
 *   band at a step: [min, max] over the seeds of one side, and the mean;
 *   separated: the two bands are disjoint;
 *   separate_at: the first step from which they stay disjoint for at least
 *   max(3, 5% of the common points) points in a row, or for all of them
 *   when there are fewer (-1: never). */
struct curve_band {
    size_t n;               /* common steps */
    double *step;
    double *a_mean, *a_lo, *a_hi, *b_mean, *b_lo, *b_hi;
    long separate_at;       /* step, or -1 */
    size_t separated_points;
    size_t seeds_a, seeds_b;/* seeds with a curve */
};
/* PLUMB_OK with b->n = 0 when either side has no curves or no common step. */
int seeds_curve_bands(const struct seed_set *a, const struct seed_set *b, struct curve_band *out, plumb_err *e);
void curve_band_free(struct curve_band *b);

#endif
