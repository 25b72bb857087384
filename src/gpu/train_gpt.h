/* Internal to the GPU plugins: the transformer ops of dev/train_ops.h
 * ("transformer ops (gpt)").
 *   train_gpt_ops.cu:  the table entries (checks, dispatch) and the small
 *                      ops: embedding, LayerNorm, residual, AdamW;
 *   train_gpt_gemm.cu: GEMM + bias + GELU (cuBLASLt epilogues on CUDA) and
 *                      the tied classifier with cross-entropy;
 *   train_gpt_attn.cu: causal attention, golden (materialised rows) and
 *                      flash-style (tiles, online softmax, deterministic
 *                      backward).
 * Golden kernels evaluate the shared definitions of dev/train_gpt_math.h,
 * one output (row) per thread, so their bits are the cpu backend's.
 * Workspace slots (tws_get; one op runs at a time on a device): 0 small
 * reductions, 1 16-bit operand copies (the GEMMs', mma2 attention's q, k,
 * v, dout) and the classifier's logits chunk, 2 the classifier's 16-bit
 * gradient chunk, 3 golden attention's softmax rows and the embedding
 * backward's row sums, 4 and 5 the 16-bit activation ops' fp32 stand-ins,
 * the GELU layer's unrounded dx and a GEMM's 16-bit bias (train_gpt_ops.cu,
 * train_gpt_gemm.cu). */
#ifndef PLUMB_GPU_TRAIN_GPT_H
#define PLUMB_GPU_TRAIN_GPT_H
#include "gpu/train_gpu.h"

/* train_gpt_ops.cu: the table entries (train_ops.cu lists them in gpu_train_ops) */
int tg_encoder_fwd(struct dev *d, dev_stream *s, const float *wte, const float *wpe, const int32_t *tok, float *out,
                   int B, int T, int C, dtype_t rt, plumb_err *e);
int tg_encoder_bwd(struct dev *d, dev_stream *s, const float *dout, const int32_t *tok, float *dwte, float *dwpe, int B,
                   int T, int C, plumb_err *e);
int tg_layernorm_fwd(struct dev *d, dev_stream *s, const float *x, const float *w, const float *b, float *y,
                     float *mean, float *rstd, int R, int C, float eps, dtype_t rt, plumb_err *e);
int tg_layernorm_bwd(struct dev *d, dev_stream *s, const float *x, const float *w, const float *mean, const float *rstd,
                     const float *dy, const float *dres, float *dx, float *dw, float *db, int R, int C, dtype_t rt,
                     plumb_err *e);
int tg_matmul_fwd(struct dev *d, dev_stream *s, const float *x, const float *w, const float *bias, float *y, float *pre,
                  int B, int K, int N, int gelu, dtype_t rt, plumb_err *e);
int tg_matmul_bwd(struct dev *d, dev_stream *s, const float *x, const float *w, const float *dy, const float *pre_in,
                  float *dx, float *dw, float *dbias, int B, int K, int N, dtype_t rt, plumb_err *e);
int tg_attention_fwd(struct dev *d, dev_stream *s, const float *qkv, float *out, float *lse, int B, int T, int NH,
                     int HS, dtype_t rt, plumb_err *e);
int tg_attention_bwd(struct dev *d, dev_stream *s, const float *qkv, const float *out, const float *lse,
                     const float *dout, float *dqkv, int B, int T, int NH, int HS, dtype_t rt, plumb_err *e);
int tg_residual_fwd(struct dev *d, dev_stream *s, const float *a, const float *b, float *y, size_t n, dtype_t rt,
                    plumb_err *e);
int tg_classifier_fwd_bwd(struct dev *d, dev_stream *s, const float *x, const float *wte, const int32_t *tgt, int R,
                          int C, int V, float grad_scale, float *losses, double *sum_count, float *dx, float *dwte,
                          dtype_t rt, plumb_err *e);
int tg_sgd_momentum_masked(struct dev *d, dev_stream *s, float *w, const float *g, float *buf, size_t n, float lr,
                           float wd, float mu, int first, const int64_t *dec, int nr, plumb_err *e);
int tg_adamw_masked(struct dev *d, dev_stream *s, float *w, const float *g, float *m, float *v, size_t n, float lr,
                    float b1, float b2, float eps, float wd, float bc1, float bc2, float gscale, const int64_t *dec,
                    int nr, plumb_err *e);

/* The implementations behind them (stream resolved, arguments checked). */
/* train_gpt_gemm.cu */
int tg_matmul_fwd_impl(struct dev *d, struct dev_stream *st, const float *x, const float *w, const float *bias, float *y,
                       float *pre, int B, int K, int N, int gelu, dtype_t rt, plumb_err *e);
int tg_matmul_bwd_impl(struct dev *d, struct dev_stream *st, const float *x, const float *w, const float *dy,
                       const float *pre_in, float *dx, float *dw, float *dbias, int B, int K, int N, dtype_t rt,
                       plumb_err *e);
/* the classifier from fp32 x, wte into fp32 dx; or (fast, 16-bit rt) from
 * x16 and wte16 [rows16, C] into dx16 (classifier_fwd_bwd16): struct cls_io */
struct cls_io {
    const float *x, *wte;
    const uint16_t *x16, *wte16;
    int rows16;
    float *dx;
    uint16_t *dx16;
};
int tg_classifier(struct dev *d, struct dev_stream *st, const struct cls_io *io, const int32_t *tgt, int R, int C,
                  int V, float grad_scale, float *losses, double *sum_count, float *dwte, dtype_t rt, plumb_err *e);
int tg_classifier_fwd_bwd16(struct dev *d, dev_stream *s, const uint16_t *x16, const uint16_t *wte16, int rows16,
                            const int32_t *tgt, int R, int C, int V, float grad_scale, float *losses, double *sum_count,
                            uint16_t *dx16, float *dwte, dtype_t rt, plumb_err *e);
/* dbias[n] = sum over b of dy[b, n] (golden: one chain ascending b; fast:
 * 64-row chunks, then the chunks in order) */
int tg_colsum(struct dev *d, struct dev_stream *st, const float *dy, int B, int N, float *dbias, plumb_err *e);
/* train_gpt_gemm.cu: gpu/train_gpt_kern.cuh's k_colsum_part, the column sums
 * of dy [B, N] (or src16) in 64-row chunks into part [nc, ldp] (ldp 0: N),
 * launched; the caller checks the launch */
void colsum_part_launch(cudaStream_t s, const float *dy, const uint16_t *src16, int B, int N, int nc, float *part,
                        uint16_t *dy16, int rt, size_t ldp);

/* the 16-bit activation ops (train_ops.h "gpt with 16-bit activations"):
 * train_gpt_ops.cu the table entries, train_gpt_gemm.cu the GEMMs; y [n] =
 * the values of x16 (widen) and y16 = x rounded to rt (narrow) */
int tg_layernorm_fwd16(struct dev *d, dev_stream *s, const float *x, const float *w, const float *b, uint16_t *y16,
                       float *mean, float *rstd, int R, int C, float eps, dtype_t rt, plumb_err *e);
int tg_layernorm_bwd16(struct dev *d, dev_stream *s, const float *x, const float *w, const float *mean,
                       const float *rstd, const uint16_t *dy16, const float *dres, float *dx, uint16_t *dx16,
                       float *dsum, float *dw, float *db, int R, int C, dtype_t rt, plumb_err *e);
int tg_residual_layernorm_fwd16(struct dev *d, dev_stream *s, const float *a, const uint16_t *b16, float *res,
                                const float *w, const float *b, uint16_t *y16, float *mean, float *rstd, int R, int C,
                                float eps, dtype_t rt, plumb_err *e);
int tg_matmul_fwd16(struct dev *d, dev_stream *s, const uint16_t *x16, const uint16_t *w16, const uint16_t *bias16,
                    uint16_t *y16, uint16_t *pre16, int B, int K, int N, int gelu, dtype_t rt, plumb_err *e);
int tg_matmul_bwd16(struct dev *d, dev_stream *s, const uint16_t *x16, const uint16_t *w16, const uint16_t *dy16,
                    const uint16_t *pre16_in, uint16_t *dx16, float *dw, float *dbias, int B, int K, int N, dtype_t rt,
                    plumb_err *e);
int tg_attention_fwd16(struct dev *d, dev_stream *s, const uint16_t *qkv16, uint16_t *out16, float *lse, int B, int T,
                       int NH, int HS, dtype_t rt, plumb_err *e);
int tg_attention_bwd16(struct dev *d, dev_stream *s, const uint16_t *qkv16, const uint16_t *out16, const float *lse,
                       const uint16_t *dout16, uint16_t *dqkv16, int B, int T, int NH, int HS, dtype_t rt,
                       plumb_err *e);
int tg_residual_fwd16(struct dev *d, dev_stream *s, const float *a, const uint16_t *b16, float *y, size_t n,
                      dtype_t rt, plumb_err *e);
int tg_matmul_fwd16_impl(struct dev *d, struct dev_stream *st, const uint16_t *x16, const uint16_t *w16,
                         const uint16_t *bias16, uint16_t *y16, uint16_t *pre16, int B, int K, int N, int gelu, dtype_t rt,
                         plumb_err *e);
int tg_matmul_bwd16_impl(struct dev *d, struct dev_stream *st, const uint16_t *x16, const uint16_t *w16,
                         const uint16_t *dy16, const uint16_t *pre16_in, uint16_t *dx16, float *dw, float *dbias, int B,
                         int K, int N, dtype_t rt, plumb_err *e);
int tg_widen16(struct dev *d, struct dev_stream *st, const uint16_t *x16, float *y, size_t n, int rt, plumb_err *e);
int tg_narrow16(struct dev *d, struct dev_stream *st, const float *x, uint16_t *y16, size_t n, int rt, plumb_err *e);
/* train_gpt_attn.cu */
int tg_attention_fwd_impl(struct dev *d, struct dev_stream *st, const float *qkv, float *out, float *lse, int B, int T,
                          int NH, int HS, dtype_t rt, plumb_err *e);
/* attention from and to 16-bit storage where the kernels in force read it
 * (mma); PLUMB_EUNSUPPORTED (no message) elsewhere */
int tg_attention_fwd16_impl(struct dev *d, struct dev_stream *st, const uint16_t *qkv16, uint16_t *out16, float *lse,
                            int B, int T, int NH, int HS, dtype_t rt, plumb_err *e);
int tg_attention_bwd16_impl(struct dev *d, struct dev_stream *st, const uint16_t *qkv16, const uint16_t *out16,
                            const float *lse, const uint16_t *dout16, uint16_t *dqkv16, int B, int T, int NH, int HS,
                            dtype_t rt, plumb_err *e);
int tg_attention_bwd_impl(struct dev *d, struct dev_stream *st, const float *qkv, const float *out, const float *lse,
                          const float *dout, float *dqkv, int B, int T, int NH, int HS, dtype_t rt, plumb_err *e);

#endif
