/* Internal to the cpu backend: the transformer ops of dev/train_ops.h
 * (cpu_train_gpt.c), wired into cpu_train_ops by cpu_train_ops.c. */
#ifndef PLUMB_CPU_TRAIN_GPT_H
#define PLUMB_CPU_TRAIN_GPT_H
#include "dev/train_ops.h"

/* Test hook: the fp32 logits scratch of one classifier chunk (64 MiB). */
extern size_t cpu_gpt_xent_chunk_bytes;

int cpu_encoder_fwd(struct dev *d, dev_stream *s, const float *wte, const float *wpe, const int32_t *tok, float *out,
                    int B, int T, int C, dtype_t rt, plumb_err *e);
int cpu_encoder_bwd(struct dev *d, dev_stream *s, const float *dout, const int32_t *tok, float *dwte, float *dwpe,
                    int B, int T, int C, plumb_err *e);
int cpu_layernorm_fwd(struct dev *d, dev_stream *s, const float *x, const float *w, const float *b, float *y,
                      float *mean, float *rstd, int R, int C, float eps, dtype_t rt, plumb_err *e);
int cpu_layernorm_bwd(struct dev *d, dev_stream *s, const float *x, const float *w, const float *mean,
                      const float *rstd, const float *dy, const float *dres, float *dx, float *dw, float *db, int R,
                      int C, dtype_t rt, plumb_err *e);
int cpu_matmul_fwd(struct dev *d, dev_stream *s, const float *x, const float *w, const float *bias, float *y,
                   float *pre, int B, int K, int N, int gelu, dtype_t rt, plumb_err *e);
int cpu_matmul_bwd(struct dev *d, dev_stream *s, const float *x, const float *w, const float *dy, const float *pre_in,
                   float *dx, float *dw, float *dbias, int B, int K, int N, dtype_t rt, plumb_err *e);
int cpu_attention_fwd(struct dev *d, dev_stream *s, const float *qkv, float *out, float *lse, int B, int T, int NH,
                      int HS, dtype_t rt, plumb_err *e);
int cpu_attention_bwd(struct dev *d, dev_stream *s, const float *qkv, const float *out, const float *lse,
                      const float *dout, float *dqkv, int B, int T, int NH, int HS, dtype_t rt, plumb_err *e);
int cpu_residual_fwd(struct dev *d, dev_stream *s, const float *a, const float *b, float *y, size_t n, dtype_t rt,
                     plumb_err *e);
int cpu_classifier_fwd_bwd(struct dev *d, dev_stream *s, const float *x, const float *wte, const int32_t *tgt, int R,
                           int C, int V, float grad_scale, float *losses, double *sum_count, float *dx, float *dwte,
                           dtype_t rt, plumb_err *e);
int cpu_adamw_masked(struct dev *d, dev_stream *s, float *w, const float *g, float *m, float *v, size_t n, float lr,
                     float b1, float b2, float eps, float wd, float bc1, float bc2, float gscale, const int64_t *dec,
                     int nr, plumb_err *e);

/* the 16-bit activation entries (cpu_train_gpt16.c): the fp32 ops between casts */
int cpu_layernorm_fwd16(struct dev *d, dev_stream *s, const float *x, const float *w, const float *b, uint16_t *y16,
                        float *mean, float *rstd, int R, int C, float eps, dtype_t rt, plumb_err *e);
int cpu_layernorm_bwd16(struct dev *d, dev_stream *s, const float *x, const float *w, const float *mean,
                        const float *rstd, const uint16_t *dy16, const float *dres, float *dx, uint16_t *dx16,
                        float *dsum, float *dw, float *db, int R, int C, dtype_t rt, plumb_err *e);
/* cpu_train_ops.c: db [N] = dy [B, N] summed over the rows in order (linear_bwd's dbias) */
void cpu_col_sums(struct dev *d, const float *dy, float *db, int B, int N);
int cpu_classifier_fwd_bwd16(struct dev *d, dev_stream *s, const uint16_t *x16, const uint16_t *wte16, int rows16,
                             const int32_t *tgt, int R, int C, int V, float grad_scale, float *losses, double *sum_count,
                             uint16_t *dx16, float *dwte, dtype_t rt, plumb_err *e);
int cpu_matmul_fwd16(struct dev *d, dev_stream *s, const uint16_t *x16, const uint16_t *w16, const uint16_t *bias16,
                     uint16_t *y16, uint16_t *pre16, int B, int K, int N, int gelu, dtype_t rt, plumb_err *e);
int cpu_matmul_bwd16(struct dev *d, dev_stream *s, const uint16_t *x16, const uint16_t *w16, const uint16_t *dy16,
                     const uint16_t *pre16_in, uint16_t *dx16, float *dw, float *dbias, int B, int K, int N,
                     dtype_t rt, plumb_err *e);
int cpu_attention_fwd16(struct dev *d, dev_stream *s, const uint16_t *qkv16, uint16_t *out16, float *lse, int B,
                        int T, int NH, int HS, dtype_t rt, plumb_err *e);
int cpu_attention_bwd16(struct dev *d, dev_stream *s, const uint16_t *qkv16, const uint16_t *out16, const float *lse,
                        const uint16_t *dout16, uint16_t *dqkv16, int B, int T, int NH, int HS, dtype_t rt,
                        plumb_err *e);
int cpu_residual_fwd16(struct dev *d, dev_stream *s, const float *a, const uint16_t *b16, float *y, size_t n,
                       dtype_t rt, plumb_err *e);
int cpu_residual_layernorm_fwd16(struct dev *d, dev_stream *s, const float *a, const uint16_t *b16, float *res,
                                 const float *w, const float *b, uint16_t *y16, float *mean, float *rstd, int R, int C,
                                 float eps, dtype_t rt, plumb_err *e);

#endif
