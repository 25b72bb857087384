/* Internal to the cpu backend: the optional train ops of dev/train_ops.h that
 * src/dev/cpu_train_fused.c builds from the parts in cpu_train_ops.c (each
 * the composition its definition names); cpu_train_ops lists them. */
#ifndef PLUMB_CPU_TRAIN_H
#define PLUMB_CPU_TRAIN_H
#include "dev/train_ops.h"
#include <stdio.h>

/* The masked optimizers' decay ranges (adamw_masked, sgd_momentum_masked):
 * nr ranges [dec[2j], dec[2j+1]) ascending, disjoint, within [0, n). 0, or
 * a message in why naming op. */
static inline int cpu_decay_ranges_bad(const int64_t *dec, int nr, size_t n, const char *op, char *why, size_t wn)
{
    if (nr < 0 || (!dec && nr)) return snprintf(why, wn, "%s: %d decay ranges without a range list", op, nr), 1;
    for (int j = 0; j < nr; j++)
        if (!(dec[2 * j] >= (j ? dec[2 * j - 1] : 0) && dec[2 * j] <= dec[2 * j + 1] && (size_t)dec[2 * j + 1] <= n))
            return snprintf(why, wn, "%s: decay range %d [%lld, %lld) is not ascending, disjoint and within [0, %zu)",
                            op, j, (long long)dec[2 * j], (long long)dec[2 * j + 1], n),
                   1;
    return 0;
}

/* Walks the segments (no decay, decay range j, no decay, ...) that meet
 * [i0, i1): seg(ctx, i, end, wd there) in ascending order */
static inline void cpu_decay_segments(size_t i0, size_t i1, const int64_t *dec, int nr, float wd,
                                      void (*seg)(void *ctx, size_t i, size_t end, float wdi), void *ctx)
{
    size_t i = i0;
    int j = 0;
    while (j < nr && (size_t)dec[2 * j + 1] <= i) j++;
    while (i < i1) {
        size_t end;
        float wdi;
        if (j < nr && (size_t)dec[2 * j] <= i) {
            end = (size_t)dec[2 * j + 1];
            wdi = wd;
            j++;
        } else {
            end = j < nr ? (size_t)dec[2 * j] : i1;
            wdi = 0.0f;
        }
        if (end > i1) end = i1;
        seg(ctx, i, end, wdi);
        i = end;
    }
}

int cpu_embedding_interact_fwd(struct dev *d, dev_stream *s, const float *table, const int64_t *off,
                               const uint32_t *idx, const float *bottom, float *emb, float *out, int B, int T,
                               int D, dtype_t rt, plumb_err *e);
int cpu_embedding_bwd_sgd(struct dev *d, dev_stream *s, const int64_t *off, const uint32_t *idx, const float *dout,
                          int B, int n_valid, int T, int D, float *table, float lr, int64_t *n_out,
                          const struct sgd_fused_out *out, plumb_err *e);
int cpu_linear_fwd16(struct dev *d, dev_stream *s, const float *x, uint16_t *x16, const float *w, const uint16_t *w16,
                     const float *bias, float *y, uint16_t *y16, int B, int K, int N, int relu, dtype_t rt,
                     plumb_err *e);
int cpu_linear_bwd16(struct dev *d, dev_stream *s, const float *x, const uint16_t *x16, const float *w,
                     const uint16_t *w16, const float *y, float *dy, const uint16_t *dy16, float *dx, uint16_t *dx16,
                     float *dw, float *dbias, int B, int K, int N, int relu, dtype_t rt, int relu_in, float *dbias_x,
                     plumb_err *e);
int cpu_embedding_interact_fwd16(struct dev *d, dev_stream *s, const float *table, const int64_t *off,
                                 const uint32_t *idx, const float *bottom, float *emb, float *out, uint16_t *out16,
                                 int ld16, int B, int T, int D, dtype_t rt, plumb_err *e);
int cpu_interact_bwd16(struct dev *d, dev_stream *s, const float *bottom, const float *emb, const uint16_t *dout16,
                       int ldo, float *dbottom, float *demb, int B, int T, int D, dtype_t rt, plumb_err *e);

#endif
