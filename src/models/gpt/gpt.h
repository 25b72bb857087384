/* gpt: GPT-2 (docs/GPT.md), explicit forward and backward over the
 * device's transformer ops (dev/train_ops.h), llm.c style.
 *
 * Model: token + learned position embeddings -> L pre-LayerNorm blocks
 *   x = x + attn_proj(attention(qkv(ln_1(x))))
 *   x = x + mlp_proj(gelu(mlp_fc(ln_2(x))))
 * -> final LayerNorm -> logits = ln_f(x) wte^T (output weights tied to the
 * token embedding) -> softmax cross-entropy. Causal attention with NH heads
 * of HS = C / NH; MLP width 4C; tanh-GELU; LayerNorm eps 1e-5.
 *
 * Memory (on the device):
 * - ONE fp32 parameter buffer of gpt_n_params() floats, the tensors of the
 *   list (gpt_tensor) back to back, each starting on a 64-byte boundary
 *   (padding 0): wte [Vp, C] (rows V..Vp-1 are padding, kept 0), wpe [T, C],
 *   then per layer ln_1 w/b [C], attn.c_attn w [3C, C] b [3C], attn.c_proj
 *   w [C, C] b [C], ln_2 w/b [C], mlp.c_fc w [4C, C] b [4C], mlp.c_proj
 *   w [C, 4C] b [C], then ln_f w/b [C]. Linear weights are [out, in]
 *   (PyTorch layout). This buffer is the fp32 master copy; the digest hashes
 *   exactly it.
 * - ONE fp32 gradient buffer with the same layout.
 * - Activations laid out once for max_batch sequences of block_size
 *   positions (rows r = b*T + t): per layer ln_1 [R,C] (+ mean, rstd [R]),
 *   qkv [R,3C], att [R,C] (+ lse [B,NH,T]), res_2 [R,C], ln_2 [R,C]
 *   (+ stats), fc [R,4C] (pre-GELU), fc_gelu [R,4C], res_3 [R,C]; the
 *   embedding output, ln_f [R,C] (+ stats), per-row losses [R]; the
 *   backward's scratch dres [R,C] (residual gradient, fp32), dln [R,C],
 *   datt [R,C], dqkv [R,3C], dfc [R,4C].
 *
 * Batches: B sequences of T <= block_size positions; tokens [B,T] (0 <= id
 * < V) and targets [B,T] (the next token, or -1: not scored, e.g. past the
 * end of a file or a masked sequence).
 *
 * ---- Gradient contract (as ctr's: the trainer sums, the model overwrites) ----
 * gpt_forward_backward() computes the gradient of
 *     grad_scale * sum over scored positions of cross-entropy
 * for the batch and OVERWRITES the gradient buffer with it. The trainer
 * passes grad_scale = loss_scale / (scored positions of the global batch),
 * so micro-shard gradients add up to the gradient of the mean loss.
 * With golden numerics the result of one call has the same bits on every
 * device and thread count.
 *
 * ---- Precision ----
 * DT_F32, DT_BF16 or DT_F16: parameters, optimizer state and gradients are
 * fp32. With 16-bit compute the GEMM weights and biases are read from a
 * rounded working copy; LayerNorm outputs, GEMM outputs, attention outputs,
 * the GELU and the logits are rounded to the precision as a GPU storing them
 * in 16 bits holds them; the residual stream, LayerNorm statistics, the loss
 * and the residual gradient stay fp32 (PyTorch autocast's choices: embedding,
 * layer_norm and the residual adds run in fp32). The gradient arriving at a
 * GEMM is rounded first (autograd hands a bf16 output's gradient to its
 * backward in bf16).
 */
#ifndef PLUMB_GPT_H
#define PLUMB_GPT_H
#include <stddef.h>
#include <stdint.h>
#include "core/dtype.h"
#include "core/err.h"
#include "dev/dev.h"

#define GPT_MAX_LAYERS 96
#define GPT_LN_EPS 1e-5f

struct gpt_config {
    char preset[32];
    int n_layer;      /* L */
    int n_head;       /* NH */
    int n_embd;       /* C, a multiple of NH */
    int block_size;   /* maximum sequence length T */
    int vocab;        /* V: token ids 0..V-1 */
    int vocab_padded; /* Vp >= V: rows of wte (GPU-friendly multiple of 128 for GPT-2) */
};

/* Presets: "gpt-tiny" (2 layers, 4 heads, width 64, context 64, vocabulary
 * 256 bytes; trains on 2 cores in seconds) and "gpt2-124m" (12/12/768, 1024,
 * 50257 padded to 50304). Unknown name: PLUMB_EUSAGE naming it. */
int gpt_config_preset(const char *name, struct gpt_config *c, plumb_err *e);
int gpt_config_validate(const struct gpt_config *c, plumb_err *e);
/* "L2 H4 C64 T64 V256" */
void gpt_config_describe(const struct gpt_config *c, char *buf, size_t n);

/* One named tensor of the parameter (and gradient) buffer. Its Philox init
 * stream is (seed, RNG_INIT, a = its list position, b = 0). */
struct gpt_tensor {
    char name[48];  /* "wte", "h.3.attn.c_attn.weight", "ln_f.bias" */
    size_t offset;  /* in floats */
    size_t numel;
    int rows, cols; /* a vector is [1, n] */
    int decay;      /* 1: weight decay applies (matrices), 0: biases and LayerNorm */
};

/* The tensor list of a configuration without a device: fills ts (room for
 * max, at least 2 + 12 L + 2), *n_tensors and *n_params (floats, padding
 * included). */
int gpt_layout(const struct gpt_config *c, struct gpt_tensor *ts, int max, int *n_tensors, size_t *n_params,
               plumb_err *e);

struct gpt_model;

/* Allocates parameters, gradients and activations on d for batches of up to
 * max_batch sequences of block_size positions. Parameters are uninitialised
 * until gpt_init (or a checkpoint load). */
int gpt_create(struct dev *d, const struct gpt_config *c, int max_batch, dtype_t precision, struct gpt_model **out,
               plumb_err *e);
void gpt_free(struct gpt_model *m);

/* GPT-2 init from Philox stream (seed, RNG_INIT, tensor id, 0), element
 * index = position within the tensor, z = philox_normal_at(...):
 * matrices fmaf(0.02, z, 0) (wte rows >= V: 0), the residual projections
 * attn.c_proj.weight and mlp.c_proj.weight fmaf(0.02/sqrt(2L), z, 0)
 * (scale rounded to fp32 once), biases 0, LayerNorm weights 1 and biases 0.
 * On the device (rng_normal + affine) or on the host when the device has no
 * rng ops: the same bits either way. */
int gpt_init(struct gpt_model *m, uint64_t seed, plumb_err *e);

/* ---- the layout ---- */
const struct gpt_config *gpt_config_of(const struct gpt_model *m);
size_t gpt_n_params(const struct gpt_model *m);
int gpt_n_tensors(const struct gpt_model *m);
const struct gpt_tensor *gpt_tensor(const struct gpt_model *m, int i);
/* tensor by name, or NULL */
const struct gpt_tensor *gpt_tensor_named(const struct gpt_model *m, const char *name);
float *gpt_params(struct gpt_model *m); /* device [n_params] */
float *gpt_grads(struct gpt_model *m);  /* device [n_params] */
struct dev *gpt_dev(struct gpt_model *m);
/* device double [2]: the last forward_backward's {loss sum, scored positions} */
const double *gpt_loss_dev(const struct gpt_model *m);
int gpt_max_batch(const struct gpt_model *m);
dtype_t gpt_precision(const struct gpt_model *m);
/* The decaying tensors as ascending [start, end) float ranges of the
 * parameter buffer: host int64 pairs, *n ranges (adamw_masked's list). */
const int64_t *gpt_decay_ranges(const struct gpt_model *m, int *n);
/* Parameters outside the embeddings (wte, wpe): N of the FLOP formula. */
size_t gpt_n_nonembedding(const struct gpt_model *m);
/* Training FLOPs per token at sequence length T, forward + backward:
 * 6 N + 12 L T C (PaLM, appendix B; attention's score and value products
 * counted causally-unmasked as there). */
double gpt_flops_per_token(const struct gpt_model *m, int T);

/* ---- one (micro-)batch ---- */
struct gpt_batch {
    int B;                  /* sequences held, 1 <= B <= max_batch */
    int n_valid;            /* the first n_valid are real; rows n_valid..B-1 are masked padding:
                               never scored (their targets are treated as -1), tokens in range */
    int T;                  /* 1 <= T <= block_size */
    const int32_t *tokens;  /* host [B, T] */
    const int32_t *targets; /* host [B, T], -1 = not scored (may be NULL for predict without loss) */
};
/* Checks shape and ids on the host; the error names the position. */
int gpt_check_batch(const struct gpt_model *m, const struct gpt_batch *b, plumb_err *e);
/* The same on the device (tokens, targets: device pointers, already
 * validated by the producer: the device does no bounds check). */
struct gpt_dev_batch {
    int B, n_valid, T;
    const int32_t *tokens;
    const int32_t *targets;
};

/* Loss over the scored positions: sum of per-position cross-entropy (double,
 * ascending row order) and their count. */
struct gpt_loss {
    double sum;
    int64_t count;
};

/* Forward + backward (the gradient contract above). gpt_grads() holds the
 * gradient on return, *loss the unscaled loss of the batch. loss NULL: the
 * work is queued and nothing is read back (no synchronisation); the loss
 * pair is then at gpt_loss_dev. */
int gpt_forward_backward(struct gpt_model *m, const struct gpt_batch *b, float grad_scale, struct gpt_loss *loss,
                         plumb_err *e);
int gpt_forward_backward_dev(struct gpt_model *m, const struct gpt_dev_batch *b, float grad_scale,
                             struct gpt_loss *loss, plumb_err *e);

/* Eval forward: per-position losses to host losses [B*T] (may be NULL; 0 at
 * unscored positions) and *loss (may be NULL). No gradient touched. */
int gpt_predict(struct gpt_model *m, const struct gpt_batch *b, float *losses, struct gpt_loss *loss, plumb_err *e);
int gpt_predict_dev(struct gpt_model *m, const struct gpt_dev_batch *b, float *losses, struct gpt_loss *loss,
                    plumb_err *e);
/* Debug/reference: the logits of the batch's positions to host logits
 * [B*T, V] (rounded to the precision as the classifier sees them). */
int gpt_logits(struct gpt_model *m, const struct gpt_batch *b, float *logits, plumb_err *e);

/* Gradient-ready hook (backward/all-reduce overlap): fn(ctx, k, off, len, s,
 * e) is called in backward order when the range [off, off+len) of
 * gpt_grads() (floats, padding included) is final in stream order on s:
 * k = 0: ln_f; k = 1..L: block L-k (the last block first); k = L+1: wte and
 * wpe (wte's tied gradient is written first by the classifier and completed
 * by the embedding backward, last). The ranges descend and cover
 * [0, n_params) once. A non-zero return ends the backward with that error. */
typedef int (*gpt_grad_ready_fn)(void *ctx, int k, size_t off, size_t len, dev_stream *s, plumb_err *e);
void gpt_set_grad_ready_hook(struct gpt_model *m, gpt_grad_ready_fn fn, void *ctx);
/* fn(ctx, e) (NULL: none) is called by each forward_backward once the forward
 * through ln_f is queued, before the tied classifier, whose logits, loss and
 * logit gradients are one fused op and so count with the backward. A
 * non-zero return ends forward_backward with that error. */
typedef int (*gpt_forward_done_fn)(void *ctx, plumb_err *e);
void gpt_set_forward_done_hook(struct gpt_model *m, gpt_forward_done_fn fn, void *ctx);
/* The hook's ranges in backward order; returns their count (L + 2). */
int gpt_grad_layers(const struct gpt_model *m, size_t *off, size_t *len);

/* SHA-256 of the fp32 parameter buffer (little endian, buffer order), hex. */
int gpt_param_digest(struct gpt_model *m, char hex[65], plumb_err *e);

/* Forwards run by the 16-bit activation pipeline (models/gpt/gpt16.c) in
 * this process: how a test or a benchmark tells which path ran. */
extern long gpt16_forward_count;
/* test hook: classifier calls in 16 bits (classifier_fwd_bwd16) */
extern long gpt_cls16_count;

#endif
