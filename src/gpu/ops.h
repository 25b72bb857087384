/* Internal to the GPU plugins: kernels' host-side launchers, one family per
 * file (ops_fast.cu, ops_golden.cu, ops_rng.cu), dispatched by ops.cu. Each
 * launches on st->s and returns a plumb status with a message in e. */
#ifndef PLUMB_GPU_OPS_H
#define PLUMB_GPU_OPS_H
#include "gpu/gpu.h"

int fast_sum(struct dev *d, struct dev_stream *st, const float *x, size_t n, float *out, plumb_err *e);
int fast_softmax(struct dev *d, struct dev_stream *st, const float *x, float *y, int rows, int cols,
                 plumb_err *e);
int fast_layernorm(struct dev *d, struct dev_stream *st, const float *x, const float *w, const float *b,
                   float *y, float *mean, float *rstd, int rows, int cols, float eps, plumb_err *e);
int fast_unary(struct dev *d, struct dev_stream *st, enum unary_op op, const float *x, float *y, size_t n,
               plumb_err *e);

int golden_gemm(struct dev *d, struct dev_stream *st, const struct gemm_desc *g, plumb_err *e);
int golden_sum(struct dev *d, struct dev_stream *st, const float *x, size_t n, float *out, plumb_err *e);
int golden_softmax(struct dev *d, struct dev_stream *st, const float *x, float *y, int rows, int cols,
                   plumb_err *e);
int golden_layernorm(struct dev *d, struct dev_stream *st, const float *x, const float *w, const float *b,
                     float *y, float *mean, float *rstd, int rows, int cols, float eps, plumb_err *e);
int golden_unary(struct dev *d, struct dev_stream *st, enum unary_op op, const float *x, float *y, size_t n,
                 plumb_err *e);
/* Casts are exact software RNE in both modes (core/dtype.h). */
int gpu_cast(struct dev *d, struct dev_stream *st, const void *x, dtype_t xt, void *y, dtype_t yt, size_t n,
             plumb_err *e);

int rng_u32_launch(struct dev *d, struct dev_stream *st, const struct rng_stream *rs, uint64_t first,
                   uint32_t *out, size_t n, plumb_err *e);
int rng_uniform_launch(struct dev *d, struct dev_stream *st, const struct rng_stream *rs, uint64_t first,
                       float *out, size_t n, plumb_err *e);
int rng_normal_launch(struct dev *d, struct dev_stream *st, const struct rng_stream *rs, uint64_t first,
                      float *out, size_t n, plumb_err *e);
#endif
