/* Internal to the GPU plugins: the training ops of dev/train_ops.h on the GPU
 * (train_ops.cu: table, checks, elementwise/loss/optimizer kernels;
 * train_linear.cu: golden tiled GEMM chains and fast cuBLASLt GEMMs with
 * fused epilogues; train_sparse.cu: embeddings, the deterministic sort and
 * segment reduce, fused with sparse SGD; train_interact.cu: the DLRM
 * interaction, fused with the embedding gather).
 *
 * All train ops of one device run on one stream at a time (the trainer's
 * compute stream), so they share one per-device workspace (tws_get). */
#ifndef PLUMB_GPU_TRAIN_H
#define PLUMB_GPU_TRAIN_H
#include "gpu/gpu.h"
extern "C" {
#include "dev/train_ops.h"
}

/* Rounds a fp32 value to rt (fp32: unchanged) exactly as the cpu backend does. */
__device__ static inline float tr_round(float x, int rt)
{
    if (rt == DT_BF16) return bf16_to_f32(f32_to_bf16(x));
    if (rt == DT_F16) return f16_to_f32(f32_to_f16(x));
    return x;
}

/* 16-bit storage (rt DT_F16, else bf16): the bits of an rt-rounded value
 * (exact), a value from its bits, and one element of an fp32 or 16-bit
 * tensor as a float (the same kernel source serves both storages). */
__device__ static inline uint16_t to16_rt(float x, int rt) { return rt == DT_F16 ? f32_to_f16(x) : f32_to_bf16(x); }
__device__ static inline float from16_rt(uint16_t h, int rt) { return rt == DT_F16 ? f16_to_f32(h) : bf16_to_f32(h); }
__device__ static inline float ld_rt(const float *p, size_t i, int) { return p[i]; }
__device__ static inline float ld_rt(const uint16_t *p, size_t i, int rt) { return from16_rt(p[i], rt); }

/* The 16-bit activation ops' (gpt's and resnet's) common refusal: a type
 * other than bf16 / fp16, or golden numerics (golden runs the fp32 ops).
 * Needs rt, d and e in scope. */
#define FAST16(op)                                                                                               \
    do {                                                                                                         \
        if (rt != DT_BF16 && rt != DT_F16)                                                                       \
            return gpu_err(e, PLUMB_EUSAGE, "%s: %s: 16-bit type %d (expected bf16 or fp16)", d->label, op,      \
                           (int)rt);                                                                             \
        if (d->numerics == NUMERICS_GOLDEN)                                                                      \
            return gpu_err(e, PLUMB_EUSAGE, "%s: %s: fast numerics only (golden runs the fp32 ops)", d->label,   \
                           op);                                                                                  \
    } while (0)

/* Per-device workspace that grows on demand (the old one is released after a
 * device synchronize, so growth costs a sync once; steady state never
 * allocates). slot 0: sparse/loss/reduction scratch, slot 1: linear layers,
 * slot 2: linear layers' padded copies (rows of K % 4 != 0 floats), slot 3:
 * the 16-bit linear ops' fp32 stand-ins for tensors given only as mirrors;
 * slots 4 and 5: gpt's 16-bit activation ops (train_gpt_ops.cu,
 * train_gpt_gemm.cu): fp32
 * stand-ins, the GELU layer's unrounded dx, a GEMM's 16-bit bias. */
int tws_get(struct dev *d, int slot, size_t bytes, void **p, plumb_err *e);

/* A path's on/off environment switch in the plugin, on by default unless
 * dflt says otherwise (PLUMB_GPT_BGRAD_EPI is off by default; the plugin's
 * counterpart of core/envswitch.h, which it does not link):
 * *on = 0 where name is "0", 1 where it is "1", else (unset or "") dflt;
 * any other value is PLUMB_EUSAGE naming the device, the variable, its value
 * and what 0 and 1 mean (PLUMB_GPT_ATTN_DIRECT, PLUMB_GPT_XENT16,
 * PLUMB_CONV_PAD_C, PLUMB_CONV_S2D, PLUMB_GPT_GELU_EPI, PLUMB_GPT_DGELU_EPI,
 * PLUMB_GPT_BGRAD_EPI, PLUMB_GPT_DWTE_PAD) */
int gpu_env_switch(struct dev *d, const char *name, const char *zero_means, const char *one_means, int *on,
                   plumb_err *e, int dflt = 1);
/* slots 0..TWS_TRAIN_SLOTS-1 are the train ops' above; tvws_get's (vision,
 * below) follow them in the same table */
#define TWS_TRAIN_SLOTS 6

/* PLUMB_TRAIN_PROF=1: every train op (and the parts of the big ones) is
 * timed between stream synchronisations and a table goes to stderr at exit;
 * PLUMB_TRAIN_PROF=host: the host's time to queue each op (no
 * synchronisation: where a step is host-bound). Off (the default) it costs
 * one branch per op. */
enum tprof_id {
    TP_LINEAR_FWD, TP_LINEAR_BWD, TP_LBWD_MASK, TP_LBWD_DX, TP_LBWD_DW, TP_RELU, TP_EMB_FWD, TP_EMB_BWD,
    TP_SORT, TP_SEGSUM, TP_COALESCE, TP_INTER_FWD, TP_INTER_BWD, TP_BCE, TP_SIGMOID, TP_SGD, TP_SGD_SPARSE,
    TP_ADAMW, TP_SUMSQ, TP_SCALE, TP_AFFINE, TP_ROUND,
    /* transformer ops (gpt) */
    TP_GPT_EMBEDDING, TP_GPT_LAYERNORM, TP_GPT_MATMUL_FWD, TP_GPT_MATMUL_BWD, TP_GPT_ATTN_FWD, TP_GPT_ATTN_BWD,
    TP_GPT_RESIDUAL, TP_GPT_CLASSIFIER, TP_GPT_ADAMW, TP_COUNT
};
int tprof_on(void);
void tprof_add(int id, double s);
double tprof_sync_now(struct dev_stream *st);
struct tprof_scope {
    int id;
    struct dev_stream *st;
    double t0;
    tprof_scope(struct dev_stream *s, int i) : id(i), st(s), t0(0) { if (tprof_on()) t0 = tprof_sync_now(st); }
    ~tprof_scope() { if (tprof_on()) tprof_add(id, tprof_sync_now(st) - t0); }
};

/* lt_matmul.cu (CUDA): column-major D[m,n] (ldc) = op(A) op(B) + beta C, then
 * the epilogue, through the device's one cuBLASLt plan cache. A [lda], B
 * [ldb]: fp32, or rt's 16-bit type when ab16; C/D fp32, or rt's 16-bit type
 * when c16; D is C unless dst names another matrix of C's layout; batch >
 * 1: that many products, sa, sb, sc elements apart.
 * Epilogues:
 *   BIAS, RELU_BIAS  bias [m] added: fp32 with an fp32 D, else D's type;
 *   BGRADB           bias [n] (fp32, D fp32) = the sum of op(B) over k, the
 *                    bias gradient of a weight-gradient GEMM; with batch > 1
 *                    one vector a product, bias_stride elements apart;
 *   DGELU            D = the product times gelu'(aux) (cuBLASLt's own
 *                    tanh-form evaluation), aux [m, n] (ld aux_ld) in D's
 *                    16-bit type: the pre-activation the forward stored;
 *   GELU_AUX_BIAS    aux = product + bias [m] (D's 16-bit type, stored to
 *                    aux, ld aux_ld), D = gelu of it (cuBLASLt's GELU).
 * PLUMB_EUNSUPPORTED (no message) when cuBLASLt has no algorithm: the caller
 * falls back (blas_gemm, or its own epilogue kernels). */
enum { LT_EPI_NONE = 0, LT_EPI_BIAS, LT_EPI_RELU_BIAS, LT_EPI_RELU, LT_EPI_BGRADB, LT_EPI_DGELU, LT_EPI_GELU_AUX_BIAS };
struct lt_mm {
    int ta, tb, m, n, k;
    const void *a;
    int lda;
    const void *b;
    int ldb;
    void *c;
    int ldc;
    float beta;
    int rt, ab16, c16;
    int epi;
    const void *bias;
    int batch;
    long long sa, sb, sc;
    const void *aux;      /* DGELU's input, GELU_AUX_BIAS's second output */
    long long aux_ld;     /* its leading dimension (a multiple of 8) */
    long long bias_stride; /* BGRADB with batch > 1 */
    void *dst;            /* D, where it is not C (C's layout and type); NULL: D is C */
};
int lt_matmul(struct dev *d, struct dev_stream *st, const struct lt_mm *g, plumb_err *e);

/* train_linear.cu */
/* out [n] = the S slices part [S, n] added in slice order (train_linear.cu) */
int tr_sum_slices(struct dev *d, struct dev_stream *st, const float *part, int S, size_t n, float *out, plumb_err *e);
int tr_linear_fwd(struct dev *d, struct dev_stream *st, const float *x, const float *w, const float *bias,
                  float *y, int B, int K, int N, int relu, dtype_t rt, plumb_err *e);
int tr_linear_bwd(struct dev *d, struct dev_stream *st, const float *x, const float *w, const float *y,
                  float *dy, float *dx, float *dw, float *dbias, int B, int K, int N, int relu, dtype_t rt,
                  int relu_in, float *dbias_x, plumb_err *e);
int tr_linear_fwd16(struct dev *d, struct dev_stream *st, const float *x, uint16_t *x16, const float *w,
                    const uint16_t *w16, const float *bias, float *y, uint16_t *y16, int B, int K, int N, int relu,
                    dtype_t rt, plumb_err *e);
int tr_linear_bwd16(struct dev *d, struct dev_stream *st, const float *x, const uint16_t *x16, const float *w,
                    const uint16_t *w16, const float *y, float *dy, const uint16_t *dy16, float *dx, uint16_t *dx16,
                    float *dw, float *dbias, int B, int K, int N, int relu, dtype_t rt, int relu_in, float *dbias_x,
                    plumb_err *e);

/* train_sparse.cu */
int tr_embedding_fwd(struct dev *d, struct dev_stream *st, const float *table, const int64_t *off,
                     const uint32_t *idx, float *out, int B, int T, int D, dtype_t rt, plumb_err *e);
int tr_embedding_bwd(struct dev *d, struct dev_stream *st, const int64_t *off, const uint32_t *idx,
                     const float *dout, int B, int n_valid, int T, int D, int64_t *rows_out, float *grads_out,
                     int64_t *n_out, plumb_err *e);
int tr_embedding_bwd_sgd(struct dev *d, struct dev_stream *st, const int64_t *off, const uint32_t *idx,
                         const float *dout, int B, int n_valid, int T, int D, float *table, float lr, int64_t *n_out,
                         const struct sgd_fused_out *out, plumb_err *e);
int tr_sparse_coalesce(struct dev *d, struct dev_stream *st, const int64_t *rows_in, const float *vals_in,
                       size_t n, int D, int64_t *rows_out, float *vals_out, int64_t *n_out, plumb_err *e);

/* train_interact.cu */
int tr_embedding_interact_fwd(struct dev *d, struct dev_stream *st, const float *table, const int64_t *off,
                              const uint32_t *idx, const float *bottom, float *emb, float *out, int B, int T, int D,
                              dtype_t rt, plumb_err *e);
int tr_interact_fwd(struct dev *d, struct dev_stream *st, const float *bottom, const float *emb, float *out,
                    int B, int T, int D, dtype_t rt, plumb_err *e);
int tr_interact_bwd(struct dev *d, struct dev_stream *st, const float *bottom, const float *emb,
                    const float *dout, float *dbottom, float *demb, int B, int T, int D, dtype_t rt,
                    plumb_err *e);
int tr_embedding_interact_fwd16(struct dev *d, struct dev_stream *st, const float *table, const int64_t *off,
                                const uint32_t *idx, const float *bottom, float *emb, float *out, uint16_t *out16,
                                int ld16, int B, int T, int D, dtype_t rt, plumb_err *e);
int tr_interact_bwd16(struct dev *d, struct dev_stream *st, const float *bottom, const float *emb,
                      const uint16_t *dout16, int ldo, float *dbottom, float *demb, int B, int T, int D, dtype_t rt,
                      plumb_err *e);
/* train_linear.cu: 16-bit copies. x16 [R, ld] = x [R, K] (rt-rounded:
 * exact), zeros after K; x [R, K] = the values of x16 [R, ld]. */
int tr_pad16(struct dev *d, struct dev_stream *st, const float *x, size_t R, int K, int ld, uint16_t *x16, int rt,
             plumb_err *e);
int tr_widen16(struct dev *d, struct dev_stream *st, const uint16_t *x16, size_t R, int K, int ld, float *x, int rt,
               plumb_err *e);

/* ---- vision ops (resnet): train_conv.cu, conv_lib.cu, train_vision.cu ---- */

/* The vision ops' own per-device workspace (like tws_get): reductions,
 * weight-gradient slices, the library's workspace, 16-bit staging. */
enum { TVWS_RED = 0, TVWS_PART, TVWS_CONV, TVWS_A16, TVWS_B16, TVWS_C16, TVWS_A32, TVWS_B32, TVWS_C32, TVWS_N };
/* TVWS_A32..C32: the 16-bit-only convolutions' fp32 stand-ins when the
 * library cannot run them (our implicit-GEMM kernels read fp32) */
#define TWS_SLOTS (TWS_TRAIN_SLOTS + TVWS_N)
static inline int tvws_get(struct dev *d, int slot, size_t bytes, void **p, plumb_err *e)
{
    return tws_get(d, TWS_TRAIN_SLOTS + slot, bytes, p, e);
}

/* conv_lib.cu: cuDNN (CUDA) / MIOpen (HIP), dlopen'ed. convlib_ok: the
 * library loaded. convlib_run: dir FWD (a = x, b = w, out = y), DATA (a = dy,
 * b = w, out = dx), FILTER (a = x, b = dy, out = dw), tensors of type rt
 * (fp32, or 16-bit copies for bf16/fp16); PLUMB_EUNSUPPORTED when the
 * library has no deterministic algorithm for the case. */
enum { CONVLIB_FWD = 0, CONVLIB_DATA = 1, CONVLIB_FILTER = 2 };
int convlib_ok(struct dev *d, dtype_t rt);
int convlib_run(struct dev *d, struct dev_stream *st, int dir, const struct train_conv *g, const void *a,
                const void *b, void *out, dtype_t rt, plumb_err *e);
void convlib_describe(char *buf, size_t n);

/* Per-device state of the train ops, released when the device closes
 * (backend.cu's gpu_close calls gpu_train_release after synchronising):
 * tws_get's workspaces (tvws_get's among them), lt_matmul.cu's cuBLASLt plans,
 * handle and workspace, and conv_lib.cu's
 * plans and handle. Each is keyed by the struct dev, so without it every
 * open leaked them, and a process's 17th device failed. */
/* attn_cudnn.cu: causal attention of 16-bit qkv through cuDNN's fused
 * flash-attention engines (PLUMB_EUNSUPPORTED, with the reason, where the
 * library or an engine for the shape is missing; always on HIP). det: the
 * backward's deterministic graph (dQ without atomics). */
int attn_cudnn_fwd(struct dev *d, struct dev_stream *st, const uint16_t *qkv16, uint16_t *out16, float *lse, int B,
                   int T, int NH, int HS, dtype_t rt, plumb_err *e);
int attn_cudnn_bwd(struct dev *d, struct dev_stream *st, const uint16_t *qkv16, const uint16_t *out16,
                   const float *lse, const uint16_t *dout16, uint16_t *dqkv16, int B, int T, int NH, int HS,
                   dtype_t rt, int det, plumb_err *e);
#if !defined(PLUMB_HIP)
#include "gpu/cudnn_min.h"
/* conv_lib.cu: the cuDNN loaded (or PLUMB_EUNSUPPORTED saying why), the
 * device's handle on st's stream, the library's lock held until
 * cudnn_graph_leave */
int cudnn_graph_enter(struct dev *d, struct dev_stream *st, const struct cudnn_fns **fns, cdn_handle_t *h,
                      plumb_err *e);
void cudnn_graph_leave(void);
/* attn_cudnn.cu: the device's attention plans, from convlib_release */
void attn_cudnn_release(struct dev *d, const struct cudnn_fns *F);
#endif
void tws_release(struct dev *d);
void lt_release(struct dev *d);
void convlib_release(struct dev *d);
static inline void gpu_train_release(struct dev *d)
{
    convlib_release(d);
    lt_release(d);
    tws_release(d);
}

/* the table entries (argument checks included) */
int g_conv2d_fwd16(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x, const uint16_t *x16,
                   const float *w, const uint16_t *w16, float *y, dtype_t rt, plumb_err *e);
/* resnet with 16-bit activations (train_conv.cu, train_vision.cu) */
int g_conv2d_fwd16o(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x, const uint16_t *x16,
                    const uint16_t *w16, uint16_t *y16, dtype_t rt, plumb_err *e);
int g_conv2d_bwd_data16o(struct dev *d, dev_stream *s, const struct train_conv *g, const uint16_t *dy16,
                         const uint16_t *w16, uint16_t *dx16, dtype_t rt, plumb_err *e);
int g_conv2d_bwd_filter16o(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x,
                           const uint16_t *x16, const uint16_t *dy16, float *dw, dtype_t rt, plumb_err *e);
int g_bn_stats16o(struct dev *d, dev_stream *s, const uint16_t *x16, size_t M, int C, const float *mean, void *part,
                  dtype_t rt, plumb_err *e);
int g_bn_apply16o(struct dev *d, dev_stream *s, const uint16_t *x16, const float *mean, const float *rstd,
                  const float *gamma, const float *beta, const uint16_t *z16, uint16_t *y16, size_t M, int C, int relu,
                  dtype_t rt, plumb_err *e);
int g_bn_bwd_reduce16o(struct dev *d, dev_stream *s, const uint16_t *x16, const uint16_t *dy16,
                       const uint16_t *mask16, const float *mgamma, const float *mbeta, const float *mean,
                       const float *rstd, size_t M, int C, void *part, float *dgamma, float *dbeta, dtype_t rt,
                       plumb_err *e);
int g_bn_bwd_data16o(struct dev *d, dev_stream *s, const uint16_t *x16, const uint16_t *dy16, const uint16_t *mask16,
                     const float *mbeta, const float *mean, const float *rstd, const float *gamma, const float *mdy,
                     uint16_t *dx16, size_t M, int C, dtype_t rt, plumb_err *e);
int g_bn_apply2_16o(struct dev *d, dev_stream *s, const uint16_t *x16, const float *mean, const float *rstd,
                    const float *gamma, const float *beta, const uint16_t *zx16, const float *zmean,
                    const float *zrstd, const float *zgamma, const float *zbeta, uint16_t *y16, size_t M, int C,
                    int relu, dtype_t rt, plumb_err *e);
int g_add16o(struct dev *d, dev_stream *s, const uint16_t *a16, const uint16_t *b16, const uint16_t *mask16,
             const uint16_t *ymask16, uint16_t *y16, size_t n, dtype_t rt, plumb_err *e);
int g_maxpool_fwd16o(struct dev *d, dev_stream *s, const struct train_conv *g, const uint16_t *x16, uint16_t *y16,
                     int32_t *idx, dtype_t rt, plumb_err *e);
int g_maxpool_bwd16o(struct dev *d, dev_stream *s, const struct train_conv *g, const uint16_t *dy16,
                     const int32_t *idx, uint16_t *dx16, dtype_t rt, plumb_err *e);
/* the forward's BN statistics in one pass (train_vision.cu) */
int g_bn_stats1p16o(struct dev *d, dev_stream *s, const uint16_t *x16, size_t M, int C, const float *shift,
                    void *part, dtype_t rt, plumb_err *e);
int g_bn_meanvar(struct dev *d, dev_stream *s, const void *part, int C, int64_t count, float eps, float momentum,
                 const float *shift, float *mean, float *rstd, float *run_mean, float *run_var, plumb_err *e);
int g_conv2d_bwd_data16(struct dev *d, dev_stream *s, const struct train_conv *g, const float *dy,
                        const uint16_t *dy16, const float *w, const uint16_t *w16, float *dx, dtype_t rt,
                        plumb_err *e);
int g_conv2d_bwd_filter16(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x,
                          const uint16_t *x16, const float *dy, const uint16_t *dy16, float *dw, dtype_t rt,
                          plumb_err *e);
int g_bn_apply16(struct dev *d, dev_stream *s, const float *x, const float *mean, const float *rstd,
                 const float *gamma, const float *beta, const float *z, float *y, uint16_t *y16, size_t M, int C,
                 int relu, dtype_t rt, plumb_err *e);
int g_bn_bwd_data16(struct dev *d, dev_stream *s, const float *x, const float *dy, const float *mean,
                    const float *rstd, const float *gamma, const float *mdy, float *dx, uint16_t *dx16, size_t M,
                    int C, dtype_t rt, plumb_err *e);
int g_bn_bwd_reduce(struct dev *d, dev_stream *s, const float *x, const float *dy, const float *mean,
                    const float *rstd, size_t M, int C, void *part, float *dgamma, float *dbeta, plumb_err *e);
int g_conv2d_fwd(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x, const float *w, float *y,
                 dtype_t rt, plumb_err *e);
int g_conv2d_bwd_data(struct dev *d, dev_stream *s, const struct train_conv *g, const float *dy, const float *w,
                      float *dx, dtype_t rt, plumb_err *e);
int g_conv2d_bwd_filter(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x, const float *dy,
                        float *dw, dtype_t rt, plumb_err *e);
int g_bn_stats(struct dev *d, dev_stream *s, const float *x, size_t M, int C, const float *mean, void *part,
               plumb_err *e);
int g_bn_mean(struct dev *d, dev_stream *s, const void *part, int K, int64_t count, float *out, plumb_err *e);
int g_bn_var(struct dev *d, dev_stream *s, const void *part, int C, int64_t count, float eps, float momentum,
             const float *mean, float *rstd, float *run_mean, float *run_var, plumb_err *e);
int g_bn_rstd(struct dev *d, dev_stream *s, const float *var, int C, float eps, float *rstd, plumb_err *e);
int g_bn_apply(struct dev *d, dev_stream *s, const float *x, const float *mean, const float *rstd, const float *gamma,
               const float *beta, const float *z, float *y, size_t M, int C, int relu, dtype_t rt, plumb_err *e);
int g_bn_bwd_stats(struct dev *d, dev_stream *s, const float *x, const float *dy, const float *mean,
                   const float *rstd, size_t M, int C, void *part, plumb_err *e);
int g_bn_bwd_data(struct dev *d, dev_stream *s, const float *x, const float *dy, const float *mean, const float *rstd,
                  const float *gamma, const float *mdy, float *dx, size_t M, int C, dtype_t rt, plumb_err *e);
int g_bn_bwd_params(struct dev *d, dev_stream *s, const float *x, const float *dy, const float *mean,
                    const float *rstd, size_t M, int C, float *dgamma, float *dbeta, plumb_err *e);
int g_maxpool_fwd(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x, float *y, int32_t *idx,
                  plumb_err *e);
int g_maxpool_bwd(struct dev *d, dev_stream *s, const struct train_conv *g, const float *dy, const int32_t *idx,
                  float *dx, dtype_t rt, plumb_err *e);
int g_avgpool_fwd(struct dev *d, dev_stream *s, const float *x, float *y, int N, int HW, int C, dtype_t rt,
                  plumb_err *e);
int g_avgpool_bwd(struct dev *d, dev_stream *s, const float *dy, float *dx, int N, int HW, int C, dtype_t rt,
                  plumb_err *e);
int g_add(struct dev *d, dev_stream *s, const float *a, const float *b, float *y, size_t n, int relu, dtype_t rt,
          plumb_err *e);
int g_cls_xent(struct dev *d, dev_stream *s, const float *z, const int32_t *labels, int B, int V, int n_valid,
               float grad_scale, float *loss_ps, double *sum_count, int32_t *pred, float *dz, plumb_err *e);

/* The GPU training op table (train_ops.cu); dev_ops.train points here. */
extern const struct train_ops gpu_train_ops;

#endif
