/* Internal to the cpu backend: the optional train ops of dev/train_ops.h that
 * src/dev/cpu_train_fused.c builds from the parts in cpu_train_ops.c (each
 * the composition its definition names); cpu_train_ops lists them. */
#ifndef PLUMB_CPU_TRAIN_H
#define PLUMB_CPU_TRAIN_H
#include "dev/train_ops.h"

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
