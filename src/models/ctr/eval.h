/* ctr's exact evaluation metrics. Every eval sample is scored
 * by exactly one rank; ranks hold contiguous index ranges, rank order = index
 * order. Aggregation is exact, so N ranks give the bits 1 rank gives:
 *   - log loss and accuracy: (sum, count) pairs all-reduced, the loss sum in
 *     64-bit fixed point (2^-32 resolution per sample), which is associative;
 *   - AUC: all (label, logit) pairs gathered in index order and ranked on
 *     every rank, ties given their mid-rank (Mann-Whitney U). */
#ifndef PLUMB_EVALM_H
#define PLUMB_EVALM_H
#include <stddef.h>
#include <stdint.h>
#include "train/model.h"
#include "core/err.h"

struct eval_result {
    double auc;       /* NaN when one class is absent */
    double logloss;   /* mean binary cross-entropy of sigmoid(logit) */
    double accuracy;  /* fraction with (logit > 0) == label */
    long count, positives;
};

/* AUC of scores s[n] against labels y[n] (0/1), mid-rank ties; NaN if all
 * labels are equal. O(n log n). */
double eval_auc(const float *score, const float *label, size_t n);
/* Per-sample binary cross-entropy of a logit, in double, stable form. */
double eval_bce(float logit, float label);

/* Distributed exact evaluation of this rank's n local (logit, label) pairs.
 * When all_logits/all_labels are non-NULL they receive malloc'ed arrays of
 * every sample in index order (count entries), e.g. for --predictions. */
int eval_exact(const struct model_comm *c, const float *logit, const float *label, size_t n,
               struct eval_result *out, float **all_logits, float **all_labels, plumb_err *e);

#endif
