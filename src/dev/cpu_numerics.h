/* The cpu numerics ops (cpu_op_*.c), wired into cpu_ops in cpu_ops.c.
 * Golden variants follow core/gmath.h exactly and give the same bits for any
 * thread count; fast variants use OpenBLAS and libm and are deterministic
 * run to run for a fixed thread count. */
#ifndef PLUMB_CPU_NUMERICS_H
#define PLUMB_CPU_NUMERICS_H
#include "dev/dev.h"

int cpu_rng_u32(struct dev *d, dev_stream *s, const struct rng_stream *st, uint64_t first,
                uint32_t *out, size_t n);
int cpu_rng_uniform(struct dev *d, dev_stream *s, const struct rng_stream *st, uint64_t first,
                    float *out, size_t n);
int cpu_rng_normal(struct dev *d, dev_stream *s, const struct rng_stream *st, uint64_t first,
                   float *out, size_t n);
int cpu_gemm(struct dev *d, dev_stream *s, const struct gemm_desc *g);
int cpu_sum(struct dev *d, dev_stream *s, const float *x, size_t n, float *out);
int cpu_softmax(struct dev *d, dev_stream *s, const float *x, float *y, int rows, int cols);
int cpu_layernorm(struct dev *d, dev_stream *s, const float *x, const float *w, const float *b,
                  float *y, float *mean, float *rstd, int rows, int cols, float eps);
int cpu_unary(struct dev *d, dev_stream *s, enum unary_op op, const float *x, float *y, size_t n);
int cpu_cast(struct dev *d, dev_stream *s, const void *x, dtype_t xt, void *y, dtype_t yt,
             size_t n);
/* worker threads for d (d->threads, or all) */
int cpu_nthreads(const struct dev *d);

#endif
