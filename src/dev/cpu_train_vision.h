/* The cpu backend's vision ops (dev/train_ops.h "vision ops"; code in
 * dev/cpu_train_conv.c), wired into cpu_train_ops by cpu_train_ops.c. */
#ifndef PLUMB_CPU_TRAIN_VISION_H
#define PLUMB_CPU_TRAIN_VISION_H
#include "dev/train_ops.h"

int cpu_conv2d_fwd(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x, const float *w,
                   float *y, dtype_t rt, plumb_err *e);
int cpu_conv2d_bwd_data(struct dev *d, dev_stream *s, const struct train_conv *g, const float *dy,
                        const float *w, float *dx, dtype_t rt, plumb_err *e);
int cpu_conv2d_bwd_filter(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x,
                          const float *dy, float *dw, dtype_t rt, plumb_err *e);
int cpu_bn_stats(struct dev *d, dev_stream *s, const float *x, size_t M, int C, const float *mean, void *part,
                 plumb_err *e);
int cpu_bn_mean(struct dev *d, dev_stream *s, const void *part, int K, int64_t count, float *out, plumb_err *e);
int cpu_bn_var(struct dev *d, dev_stream *s, const void *part, int C, int64_t count, float eps, float momentum,
               const float *mean, float *rstd, float *run_mean, float *run_var, plumb_err *e);
/* the one-pass statistics (bn_stats1p16o's sums over fp32 x; bn_meanvar) */
int cpu_bn_stats1p(struct dev *d, const float *x, size_t M, int C, const float *shift, float *part, plumb_err *e);
int cpu_bn_meanvar(struct dev *d, dev_stream *s, const void *part, int C, int64_t count, float eps, float momentum,
                   const float *shift, float *mean, float *rstd, float *run_mean, float *run_var, plumb_err *e);
int cpu_bn_rstd(struct dev *d, dev_stream *s, const float *var, int C, float eps, float *rstd, plumb_err *e);
int cpu_bn_apply(struct dev *d, dev_stream *s, const float *x, const float *mean, const float *rstd,
                 const float *gamma, const float *beta, const float *z, float *y, size_t M, int C, int relu,
                 dtype_t rt, plumb_err *e);
int cpu_bn_bwd_stats(struct dev *d, dev_stream *s, const float *x, const float *dy, const float *mean,
                     const float *rstd, size_t M, int C, void *part, plumb_err *e);
int cpu_bn_bwd_data(struct dev *d, dev_stream *s, const float *x, const float *dy, const float *mean,
                    const float *rstd, const float *gamma, const float *mdy, float *dx, size_t M, int C,
                    dtype_t rt, plumb_err *e);
int cpu_bn_bwd_params(struct dev *d, dev_stream *s, const float *x, const float *dy, const float *mean,
                      const float *rstd, size_t M, int C, float *dgamma, float *dbeta, plumb_err *e);
int cpu_maxpool_fwd(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x, float *y,
                    int32_t *idx, plumb_err *e);
int cpu_maxpool_bwd(struct dev *d, dev_stream *s, const struct train_conv *g, const float *dy,
                    const int32_t *idx, float *dx, dtype_t rt, plumb_err *e);
int cpu_avgpool_fwd(struct dev *d, dev_stream *s, const float *x, float *y, int N, int HW, int C, dtype_t rt,
                    plumb_err *e);
int cpu_avgpool_bwd(struct dev *d, dev_stream *s, const float *dy, float *dx, int N, int HW, int C, dtype_t rt,
                    plumb_err *e);
int cpu_add(struct dev *d, dev_stream *s, const float *a, const float *b, float *y, size_t n, int relu,
            dtype_t rt, plumb_err *e);
int cpu_cls_xent(struct dev *d, dev_stream *s, const float *z, const int32_t *labels, int B, int V, int n_valid,
                 float grad_scale, float *loss_ps, double *sum_count, int32_t *pred, float *dz, plumb_err *e);

/* dev/cpu_train_vision16.c: the ops with 16-bit mirrors */
int cpu_conv2d_fwd16(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x, const uint16_t *x16,
                     const float *w, const uint16_t *w16, float *y, dtype_t rt, plumb_err *e);
int cpu_conv2d_bwd_data16(struct dev *d, dev_stream *s, const struct train_conv *g, const float *dy,
                          const uint16_t *dy16, const float *w, const uint16_t *w16, float *dx, dtype_t rt,
                          plumb_err *e);
int cpu_conv2d_bwd_filter16(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x,
                            const uint16_t *x16, const float *dy, const uint16_t *dy16, float *dw, dtype_t rt,
                            plumb_err *e);
int cpu_bn_apply16(struct dev *d, dev_stream *s, const float *x, const float *mean, const float *rstd,
                   const float *gamma, const float *beta, const float *z, float *y, uint16_t *y16, size_t M, int C,
                   int relu, dtype_t rt, plumb_err *e);
int cpu_bn_bwd_data16(struct dev *d, dev_stream *s, const float *x, const float *dy, const float *mean,
                      const float *rstd, const float *gamma, const float *mdy, float *dx, uint16_t *dx16, size_t M,
                      int C, dtype_t rt, plumb_err *e);
int cpu_bn_bwd_reduce(struct dev *d, dev_stream *s, const float *x, const float *dy, const float *mean,
                      const float *rstd, size_t M, int C, void *part, float *dgamma, float *dbeta, plumb_err *e);

/* dev/cpu_train_vision16.c: resnet with 16-bit activations (the fp32 ops between casts) */
int cpu_conv2d_fwd16o(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x, const uint16_t *x16,
                      const uint16_t *w16, uint16_t *y16, dtype_t rt, plumb_err *e);
int cpu_conv2d_bwd_data16o(struct dev *d, dev_stream *s, const struct train_conv *g, const uint16_t *dy16,
                           const uint16_t *w16, uint16_t *dx16, dtype_t rt, plumb_err *e);
int cpu_conv2d_bwd_filter16o(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x,
                             const uint16_t *x16, const uint16_t *dy16, float *dw, dtype_t rt, plumb_err *e);
int cpu_bn_stats16o(struct dev *d, dev_stream *s, const uint16_t *x16, size_t M, int C, const float *mean, void *part,
                    dtype_t rt, plumb_err *e);
int cpu_bn_apply16o(struct dev *d, dev_stream *s, const uint16_t *x16, const float *mean, const float *rstd,
                    const float *gamma, const float *beta, const uint16_t *z16, uint16_t *y16, size_t M, int C,
                    int relu, dtype_t rt, plumb_err *e);
int cpu_bn_bwd_reduce16o(struct dev *d, dev_stream *s, const uint16_t *x16, const uint16_t *dy16,
                         const uint16_t *mask16, const float *mgamma, const float *mbeta, const float *mean,
                         const float *rstd, size_t M, int C, void *part, float *dgamma, float *dbeta, dtype_t rt,
                         plumb_err *e);
int cpu_bn_bwd_data16o(struct dev *d, dev_stream *s, const uint16_t *x16, const uint16_t *dy16,
                       const uint16_t *mask16, const float *mbeta, const float *mean, const float *rstd,
                       const float *gamma, const float *mdy, uint16_t *dx16, size_t M, int C, dtype_t rt,
                       plumb_err *e);
int cpu_bn_stats1p16o(struct dev *d, dev_stream *s, const uint16_t *x16, size_t M, int C, const float *shift,
                      void *part, dtype_t rt, plumb_err *e);
int cpu_bn_apply2_16o(struct dev *d, dev_stream *s, const uint16_t *x16, const float *mean, const float *rstd,
                      const float *gamma, const float *beta, const uint16_t *zx16, const float *zmean,
                      const float *zrstd, const float *zgamma, const float *zbeta, uint16_t *y16, size_t M, int C,
                      int relu, dtype_t rt, plumb_err *e);
int cpu_add16o(struct dev *d, dev_stream *s, const uint16_t *a16, const uint16_t *b16, const uint16_t *mask16,
               const uint16_t *ymask16, uint16_t *y16, size_t n, dtype_t rt, plumb_err *e);
int cpu_maxpool_fwd16o(struct dev *d, dev_stream *s, const struct train_conv *g, const uint16_t *x16, uint16_t *y16,
                       int32_t *idx, dtype_t rt, plumb_err *e);
int cpu_maxpool_bwd16o(struct dev *d, dev_stream *s, const struct train_conv *g, const uint16_t *dy16,
                       const int32_t *idx, uint16_t *dx16, dtype_t rt, plumb_err *e);

#endif
