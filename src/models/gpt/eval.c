/* gpt's exact validation loss (see eval.h). */
#include "models/gpt/eval.h"
#include <math.h>

void gpt_eval_add(struct gpt_eval_acc *a, const float *losses, const int32_t *tgt, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (tgt[i] < 0) continue;
        const double l = (double)losses[i], w = floor(l);
        a->count++;
        if (!(fabs(l) < 1048576.0)) { /* NaN, an infinity, or past the sums' headroom */
            a->bad++;
            continue;
        }
        a->whole += (int64_t)w;
        a->frac += (int64_t)llround((l - w) * GPT_EVAL_FRAC);
    }
}

double gpt_eval_loss(const struct gpt_eval_acc *a)
{
    if (a->count <= 0 || a->bad) return NAN;
    return ((double)a->whole + (double)a->frac / GPT_EVAL_FRAC) / (double)a->count;
}

double gpt_eval_perplexity(const struct gpt_eval_acc *a) { return exp(gpt_eval_loss(a)); }
