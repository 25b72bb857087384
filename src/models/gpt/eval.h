/* gpt's validation metrics, exact across ranks: every scored position's
 * loss (fp32, from the classifier) is added in fixed point as an integer
 * part and a fraction in units of 2^-24 (two int64 sums: no overflow below
 * 5e11 positions at a loss of 16), so the totals do not depend on the order
 * of the additions, and N ranks holding contiguous sample ranges reduce to
 * the bits one rank gets. Loss = sum / count, perplexity = exp(loss). */
#ifndef PLUMB_GPT_EVAL_H
#define PLUMB_GPT_EVAL_H
#include <stddef.h>
#include <stdint.h>
#include "core/err.h"

#define GPT_EVAL_FRAC 16777216.0 /* 2^24 */

struct gpt_eval_acc {
    int64_t whole;  /* sum of floor(loss) */
    int64_t frac;   /* sum of (loss - floor(loss)) * 2^24, rounded */
    int64_t count;  /* scored positions */
    int64_t bad;    /* scored positions whose loss is not finite or not below 2^20: not in the sums
                       (a NaN's floor cast to int64 is undefined; the sums wrapped to a val_loss of 0) */
};

/* Adds the losses of the scored positions (tgt >= 0) of n positions. */
void gpt_eval_add(struct gpt_eval_acc *a, const float *losses, const int32_t *tgt, size_t n);
/* Across ranks: the four fields summed as int64 (exact in any order: the
 * caller's integer all-reduce, e.g. the trainer's model_comm.sum_i64). */
/* Mean loss (NaN when nothing was scored or a position's loss was bad) and its exp. */
double gpt_eval_loss(const struct gpt_eval_acc *a);
double gpt_eval_perplexity(const struct gpt_eval_acc *a);

#endif
