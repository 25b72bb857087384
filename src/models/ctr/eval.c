#include "models/ctr/eval.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct sl {
    float s;
    uint32_t i;
};

static int cmp_sl(const void *a, const void *b)
{
    const struct sl *x = a, *y = b;
    if (x->s < y->s) return -1;
    if (x->s > y->s) return 1;
    return (x->i > y->i) - (x->i < y->i);
}

double eval_auc(const float *score, const float *label, size_t n)
{
    struct sl *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return NAN;
    double npos = 0;
    for (size_t i = 0; i < n; i++) {
        v[i].s = isnan(score[i]) ? -INFINITY : score[i];
        v[i].i = (uint32_t)i;
        npos += label[i] > 0.5f;
    }
    double nneg = (double)n - npos;
    if (npos == 0 || nneg == 0) {
        free(v);
        return NAN;
    }
    qsort(v, n, sizeof *v, cmp_sl);
    /* sum of the (1-based, mid-rank) ranks of the positives, exact in double
     * as long as 2*ranksum < 2^53 */
    double ranksum2 = 0; /* twice the sum, so mid-ranks stay integers */
    for (size_t a = 0; a < n;) {
        size_t b = a;
        while (b + 1 < n && v[b + 1].s == v[a].s) b++;
        double mid2 = (double)(a + 1) + (double)(b + 1); /* 2 * mid-rank */
        for (size_t k = a; k <= b; k++)
            if (label[v[k].i] > 0.5f) ranksum2 += mid2;
        a = b + 1;
    }
    free(v);
    double u = ranksum2 / 2.0 - npos * (npos + 1) / 2.0;
    return u / (npos * nneg);
}

double eval_bce(float logit, float label)
{
    double z = logit, y = label;
    return (z > 0 ? z : 0) - z * y + log1p(exp(-fabs(z)));
}

#define LOSS_FIX 4294967296.0 /* 2^32 */

int eval_exact(const struct model_comm *c, const float *logit, const float *label, size_t n,
               struct eval_result *out, float **all_logits, float **all_labels, plumb_err *e)
{
    memset(out, 0, sizeof *out);
    if (all_logits) *all_logits = NULL;
    if (all_labels) *all_labels = NULL;
    /* [0] loss sum in fixed point, [1] count, [2] correct, [3] positives */
    int64_t acc[4] = {0, (int64_t)n, 0, 0};
    for (size_t i = 0; i < n; i++) {
        double l = eval_bce(logit[i], label[i]);
        if (!isfinite(l) || l * LOSS_FIX > 9.0e18 / 4)
            return err_set(e, PLUMB_EFAIL, "eval: sample %zu of this rank has non-finite or huge loss (logit %g)", i,
                           (double)logit[i]);
        acc[0] += llrint(l * LOSS_FIX);
        int pred = logit[i] > 0.0f;
        int y = label[i] > 0.5f;
        acc[2] += pred == y;
        acc[3] += y;
    }
    int rc = c->sum_i64(c->ctx, acc, 4, "eval sums", e);
    if (rc) return rc;
    /* pairs (logit, label) in index order */
    float *pairs = malloc((n ? n : 1) * 2 * sizeof *pairs);
    if (!pairs) return err_set(e, PLUMB_ENOMEM, "eval: out of memory");
    for (size_t i = 0; i < n; i++) pairs[2 * i] = logit[i], pairs[2 * i + 1] = label[i];
    void *all = NULL;
    size_t total = 0;
    rc = c->gather(c->ctx, pairs, n * 2 * sizeof *pairs, &all, &total, "eval scores", e);
    free(pairs);
    if (rc) return rc;
    size_t N = total / (2 * sizeof(float));
    if ((int64_t)N != acc[1]) {
        free(all);
        return err_set(e, PLUMB_EINTERNAL, "eval: gathered %zu scores, counted %lld", N, (long long)acc[1]);
    }
    float *s = malloc((N ? N : 1) * sizeof *s), *y = malloc((N ? N : 1) * sizeof *y);
    if (!s || !y) {
        free(s), free(y), free(all);
        return err_set(e, PLUMB_ENOMEM, "eval: out of memory");
    }
    const float *pa = all;
    for (size_t i = 0; i < N; i++) s[i] = pa[2 * i], y[i] = pa[2 * i + 1];
    free(all);
    out->count = (long)acc[1];
    out->positives = (long)acc[3];
    out->auc = eval_auc(s, y, N);
    out->logloss = N ? (double)acc[0] / LOSS_FIX / (double)N : NAN;
    out->accuracy = N ? (double)acc[2] / (double)N : NAN;
    if (all_logits) *all_logits = s;
    else free(s);
    if (all_labels) *all_labels = y;
    else free(y);
    return PLUMB_OK;
}
