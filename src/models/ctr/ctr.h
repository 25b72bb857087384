/* ctr: the DLRM (Criteo Kaggle configuration), explicit forward and backward
 * over the device's train_ops (dev/train_ops.h); docs/TRAINING.md describes
 * the model and its data. The workload glue (models/ctr/workload.c) puts it
 * behind the trainer's model interface (train/model.h).
 *
 * Model (dlrm-kaggle): dense [B,13] -> bottom MLP 13-512-256-64-16 (ReLU after
 * every layer) -> x0 [B,16]; 26 embedding tables rows x 16 -> e [B,26,16];
 * dot interaction of the 27 vectors (x0 and the 26 embeddings: 351 dots i > j,
 * concatenated after x0) -> [B,367]; top MLP 367-512-256-1 (ReLU between
 * layers, none after the last) -> logit [B]; loss BCE on the logit.
 *
 * Memory (all on the device, d):
 * - ONE fp32 parameter buffer of ctr_n_params() floats: the dense tensors
 *   first, in the order of the tensor list (ctr_tensor), then the fused
 *   embedding table [R, D] with R = sum of rows, table t at row table_off[t].
 *   This buffer is the fp32 master copy; the digest hashes exactly it.
 * - ONE fp32 gradient buffer of ctr_n_dense() floats for the dense tensors
 *   (same offsets as in the parameter buffer).
 * - Sparse embedding gradients as a (rows, grads) list: rows [U] int64 fused
 *   row numbers ascending and distinct, grads [U, D]; U <= n_valid * 26.
 *
 * Inputs (struct ctr_batch, host memory): dense features already transformed
 * by the data reader, x = log(1 + max(raw, 0)), missing = 0; categorical
 * features already hashed and reduced mod rows[t] (row index within table t).
 *
 * ---- Gradient contract (golden data parallel and fast mode) ----
 * ctr_forward_backward() computes the gradient of
 *     grad_scale * sum_{b < n_valid} bce(logit_b, label_b)
 * for the given batch and OVERWRITES the dense gradient buffer and the sparse
 * list with it; it never accumulates. So:
 * - golden data parallel: the engine cuts the global batch into fixed-size
 *   micro-shards, calls ctr_forward_backward once per micro-shard with
 *   grad_scale = loss_scale / global_batch, and after each call converts the
 *   dense gradient and the sparse (row, grad) pairs to 64-bit fixed point and
 *   adds them to its own accumulators (order-free, rank-count-free). It then
 *   converts the sums back to fp32 into ctr_grads() (dense) and into a sparse
 *   list (distinct rows), and runs the optimizer (train/optim.h).
 * - fast mode: one call over the rank's local batch (grad_scale = loss_scale
 *   / global_batch), all-reduce ctr_grads() in place, all-gather the sparse
 *   lists and coalesce them (train_ops.sparse_coalesce), then the optimizer.
 * With golden numerics (dev_set_numerics) the result of one call is
 * bit-identical on every device and thread count.
 *
 * ---- Precision ----
 * precision DT_F32, DT_BF16 or DT_F16 (--precision): parameters, optimizer
 * state and the dense/sparse gradient outputs stay fp32; activations, their
 * gradients and the GEMM weight inputs are rounded to the precision (round to
 * nearest even), as a GPU storing them in bf16/fp16 would hold them. With fp16
 * an overflowing activation gradient becomes inf and shows up in the
 * gradients (the loss scaler's found-inf check).
 */
#ifndef PLUMB_CTR_H
#define PLUMB_CTR_H
#include <stddef.h>
#include <stdint.h>
#include "core/dtype.h"
#include "core/err.h"
#include "dev/dev.h"
#include "train/model.h"

#define CTR_N_DENSE 13
#define CTR_N_TABLES 26
#define CTR_MAX_LAYERS 8

struct ctr_config {
    char preset[32];
    int emb_dim;                    /* D: 16 (dlrm-kaggle) */
    int64_t rows[CTR_N_TABLES];     /* rows of each table */
    int n_bottom;                   /* number of bottom layers (4) */
    int bottom[CTR_MAX_LAYERS + 1]; /* widths incl. input: 13,512,256,64,16; last == D */
    int n_top;                      /* number of top layers (3) */
    int top[CTR_MAX_LAYERS + 1];    /* widths incl. input: 367,512,256,1; first ==
                                       D + 27*26/2, last == 1 */
};

/* Presets: "ctr-tiny" (trains in seconds on 2 cores) and "dlrm-kaggle".
 * rows_override > 0 sets every table's rows (--rows); 0 keeps the preset's
 * (dlrm-kaggle: 1,000,000). Unknown name: PLUMB_EUSAGE naming it. */
int ctr_config_preset(const char *name, int64_t rows_override, struct ctr_config *c,
                      plumb_err *e);
/* Checks widths and rows; error names the bad field. */
int ctr_config_validate(const struct ctr_config *c, plumb_err *e);
/* "13-512-256-64-16 | 26x1000000x16 | 367-512-256-1" style description. */
void ctr_config_describe(const struct ctr_config *c, char *buf, size_t n);

/* The tensor list (struct model_tensor, train/model.h). Tensor ids (the
 * Philox `a` of its init stream) are list positions: bottom layer l: weight
 * 2l, bias 2l+1; top layer l: weight 2(nb+l), bias 2(nb+l)+1; table t:
 * 2(nb+nt) + t. Linear weights are [out, in] (PyTorch layout); dense tensors
 * are flagged TENSOR_DECAY, tables TENSOR_SPARSE. */

struct ctr_model;

/* Allocates the parameter, gradient and activation buffers on d for batches
 * of up to max_batch samples. precision: DT_F32, DT_BF16 or DT_F16.
 * Parameters are uninitialised until ctr_init (or a checkpoint load). */
int ctr_create(struct dev *d, const struct ctr_config *c, int max_batch, dtype_t precision,
               struct ctr_model **out, plumb_err *e);
void ctr_free(struct ctr_model *m);

/* Init from Philox purpose RNG_INIT, stream (seed, RNG_INIT,
 * a = tensor id, b = 0), element index i = position within the tensor:
 * linear weight w_i = fmaf(sqrt(2/(fan_in+fan_out)), normal_i, 0), bias
 * fmaf(sqrt(1/fan_out), normal_i, 0), table fmaf(2s, uniform_i, -s) with
 * s = sqrt(1/rows_t) (scales rounded to fp32; normal_i / uniform_i as
 * core/philox.h's philox_normal_at / philox_uniform_at define them). Runs on
 * the device through rng_normal / rng_uniform + affine, or on the host and
 * uploaded when the device has no rng ops: the same bits either way. Padding
 * between tensors is 0. Resets optimizer state. */
int ctr_init(struct ctr_model *m, uint64_t seed, plumb_err *e);

/* ---- the layout ---- */
size_t ctr_n_params(const struct ctr_model *m); /* dense + table floats */
size_t ctr_n_dense(const struct ctr_model *m);  /* dense floats (= gradient buffer) */
int ctr_n_tensors(const struct ctr_model *m);
const struct model_tensor *ctr_tensor(const struct ctr_model *m, int i);
const struct model_layout *ctr_layout(const struct ctr_model *m);
float *ctr_params(struct ctr_model *m);         /* device [n_params] */
float *ctr_grads(struct ctr_model *m);          /* device [n_dense] */
int64_t ctr_table_rows(const struct ctr_model *m); /* R */
/* Fused row of (table t, row r) is table_off[t] + r (host array [26]). */
const int64_t *ctr_table_off(const struct ctr_model *m);
struct dev *ctr_dev(struct ctr_model *m);

/* ---- one (micro-)batch ---- */
struct ctr_batch {
    int B;                  /* samples, 1 <= B <= max_batch */
    int n_valid;            /* the first n_valid count; the rest is masked padding
                               (its indices must still be in range, e.g. 0) */
    const float *dense;     /* host [B, 13], transformed (see above) */
    const uint32_t *sparse; /* host [B, 26], row within table t: < rows[t] */
    const float *labels;    /* host [B], 0 or 1 (may be NULL for ctr_predict) */
};

/* Validates a batch on the host: B, n_valid, every index < rows[t], labels
 * 0/1. Error names sample and field ("sample 17, C5: row 1000003 >= 1000000"). */
int ctr_check_batch(const struct ctr_model *m, const struct ctr_batch *b, plumb_err *e);

/* Loss of the valid samples: sum of per-sample BCE (double, ascending sample
 * order) and count (= n_valid). */
struct ctr_loss {
    double sum;
    int64_t count;
};

/* Forward + backward (see the gradient contract above). On return:
 * ctr_grads() holds the dense gradient, ctr_sparse_grads() the sparse list,
 * *loss (may be NULL) the unscaled loss of the batch. Synchronous: the
 * results are complete when it returns; except after ctr_fuse_sparse_sgd
 * with loss NULL, when the work is only queued on the device stream (every
 * later op on it comes after). */
int ctr_forward_backward(struct ctr_model *m, const struct ctr_batch *b, float grad_scale,
                         struct ctr_loss *loss, plumb_err *e);
/* Device-resident batch (the GPU data plane): the same fields as ctr_batch
 * but device pointers, already validated by the producer (ctr_check_batch
 * or built in range, as the data loader does: there is no bounds check on the
 * device) and complete on the device stream the ops use (e.g. an H2D copy
 * from pinned memory on a copy stream, made visible by stream_wait_event on
 * the default stream). The model copies it device-to-device into its input
 * buffers, stream ordered, so the caller may refill its buffer after the
 * call returns. */
struct ctr_dev_batch {
    int B, n_valid;
    const float *dense;     /* device [B, 13] */
    const uint32_t *sparse; /* device [B, 26] */
    const float *labels;    /* device [B] */
};
/* ctr_forward_backward on a device batch (same contract and results). */
int ctr_forward_backward_dev(struct ctr_model *m, const struct ctr_dev_batch *b, float grad_scale,
                             struct ctr_loss *loss, plumb_err *e);
/* Forward only to the logits (for timing the forward part); synchronous. */
int ctr_forward_dev(struct ctr_model *m, const struct ctr_dev_batch *b, plumb_err *e);

/* Gradient-ready hook (data-parallel overlap): during backward, each time a
 * layer's dense gradients (weight + bias) are complete on stream s (NULL =
 * the default stream), fn(ctx, k, off, len, s, e) is called with k the
 * layer's position in backward order (0 = the top MLP's last layer ... the
 * bottom MLP's first layer last) and [off, off+len) its range of ctr_grads()
 * in floats, padding to the next layer included. The ranges descend and
 * cover [0, n_dense) exactly once (ctr_grad_layers lists them). "Complete"
 * is in stream order: work enqueued on s after the call sees the final
 * values (e.g. an all-reduce of that bucket). A non-zero return ends the
 * backward with that error. fn NULL: no hook. */
typedef int (*ctr_grad_ready_fn)(void *ctx, int k, size_t off, size_t len, dev_stream *s, plumb_err *e);
void ctr_set_grad_ready_hook(struct ctr_model *m, ctr_grad_ready_fn fn, void *ctx);
/* The hook's ranges in backward order: off[k], len[k] for k < the returned
 * layer count (n_bottom + n_top <= 2 * CTR_MAX_LAYERS entries). */
int ctr_grad_layers(const struct ctr_model *m, size_t *off, size_t *len);

/* The sparse gradient list of the last ctr_forward_backward: device rows [*n]
 * (ascending, distinct) and grads [*n, D]. */
void ctr_sparse_grads(struct ctr_model *m, int64_t **rows, float **grads, size_t *n);

/* Fused sparse SGD for the next forward_backward only (train_ops
 * embedding_bwd_sgd): its backward applies table[row] = fmaf(-lr, g, table[row])
 * with each touched row's summed gradient g as it forms it, so a following
 * optimizer step (train/optim.h) with SGD updates only the dense parameters.
 * The result is bit-identical to forward_backward + SGD(lr) on the full
 * lists. Only for plain SGD where nothing must change the sparse gradient
 * before it is applied (one rank, no loss-scale multiply, no clipping).
 * keep = 0 and prev NULL: the sparse list is left empty (ctr_sparse_grads
 * n = 0). keep = 1: the list (rows, sums) is left as an unfused backward
 * leaves it, for a norm over it. prev (device [max batch * 26 rows, D], or
 * NULL): each touched row's values before the update, in list order (the
 * rows are then left in the list), so a skipped step can be put back
 * (train_ops sparse_put_dn). found_inf (device int, or NULL): set to 1 when
 * a sum is inf or NaN. PLUMB_EUNSUPPORTED when the backend has no fused op. */
int ctr_fuse_sparse_sgd(struct ctr_model *m, float lr, int keep, float *prev, int *found_inf, plumb_err *e);
/* on = 1: ctr_forward_backward* queue their work and return without
 * synchronising (loss must be NULL): the loss {sum, count} stays at
 * *loss_dev (device double [2]) and the sparse list's length at *rows_n
 * (device int64); ctr_sparse_grads reports n = 0. on = 0: as before. */
int ctr_defer(struct ctr_model *m, int on, const double **loss_dev, const int64_t **rows_n);

/* Eval forward: scores[b] = sigmoid(logit_b) for b < B written to host memory
 * (may be NULL), logits to host (may be NULL); *loss (may be NULL) over the
 * first n_valid samples (labels required then). No gradients touched. */
int ctr_predict(struct ctr_model *m, const struct ctr_batch *b, float *scores, float *logits,
                struct ctr_loss *loss, plumb_err *e);

/* SHA-256 of the fp32 parameter buffer's bytes (little endian, buffer order),
 * 64 lowercase hex chars. */
int ctr_param_digest(struct ctr_model *m, char hex[65], plumb_err *e);

#endif
