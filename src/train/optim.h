/* The optimizers, owned by the trainer and run over a model's tensor list
 * (train/model.h) with the device's train_ops (dev/train_ops.h):
 *   - SGD: dense tensors sgd (L2 weight decay on TENSOR_DECAY tensors), or
 *     sgd_momentum when momentum > 0; the sparse region's touched rows
 *     sgd_sparse (no decay, no momentum: the update stays lazy);
 *   - AdamW (PyTorch semantics, decoupled decay on TENSOR_DECAY tensors):
 *     dense adamw, sparse rows adamw_sparse (lazy: touched rows only).
 * Consecutive dense tensors with the same flags are updated by one call over
 * their range (padding included: its gradient is 0), so a model whose dense
 * tensors all decay alike costs one launch. AdamW on a device with
 * adamw_masked updates the whole dense region in one launch with the
 * decaying ranges as a device list (the bits of adamw per range: the op's
 * contract, tests/test_train_gpt_ops.c), so a model whose decaying matrices
 * alternate with biases and LayerNorm weights (GPT-2 124M: 148 tensors, 97
 * ranges) still costs one. State (AdamW m and v, each
 * [n_params] laid out like the parameters; SGD momentum [n_dense]) is
 * allocated on first use and saved in checkpoints. */
#ifndef PLUMB_OPTIM_H
#define PLUMB_OPTIM_H
#include <stddef.h>
#include <stdint.h>
#include "core/err.h"
#include "dev/dev.h"
#include "dev/train_ops.h"
#include "train/model.h"

enum optim_kind { OPTIM_SGD = 0, OPTIM_ADAMW = 1 };
/* dense tensors (so ranges) a layout may have: resnet152 has about 470,
 * gpt2-124m 148 */
#define OPTIM_MAX_DENSE 2048

struct optim {
    enum optim_kind kind;
    float weight_decay;
    float momentum;            /* SGD */
    float beta1, beta2, eps;   /* AdamW */
    struct dev *d;
    const struct train_ops *T;
    const struct model_layout *L;
    float *m, *v;              /* AdamW state, device [n_params] */
    float *buf;                /* SGD momentum, device [n_dense] */
    size_t n_state;            /* floats in each state buffer (0: none yet) */
    int momentum_started;      /* buf holds a first step */
    /* dense ranges of equal flags: [lo[i], hi[i]) decays when dec[i]
     * (resnet152: two per block, 104) */
    int n_ranges;
    size_t lo[OPTIM_MAX_DENSE], hi[OPTIM_MAX_DENSE];
    int dec[OPTIM_MAX_DENSE];
    int64_t *dec_dev;          /* the masked ops: device [2 n_dec] {lo, hi} of the decaying ranges */
    int n_dec;
    int dec_ready;             /* dec_dev / n_dec uploaded (0: the masked ops are not used) */
};

/* kind "sgd" or "adamw". */
int optim_init(struct optim *o, struct dev *d, const struct model_layout *L, const char *kind, double weight_decay,
               double momentum, double beta1, double beta2, double eps, plumb_err *e);
void optim_free(struct optim *o);
/* Allocates (zeroed) the state the kind needs, e.g. before loading a checkpoint. */
int optim_state_alloc(struct optim *o, plumb_err *e);
/* One update (queued on the default stream, no host synchronisation):
 * params [n_params], dense_grad [n_dense], sparse rows [n] (distinct rows of
 * the sparse region) with grads [n, sparse_dim]; step is 1-based (AdamW's
 * bias correction). */
int optim_step(struct optim *o, float *params, const float *dense_grad, const int64_t *rows, const float *grads,
               size_t n, float lr, int64_t step, plumb_err *e);

/* The queued step (train/trainer.c): whether this optimizer can update with
 * the sparse count on the device and the step gated by a device flag
 * (plain SGD, no momentum, on a device with sgd_gated / sgd_sparse_dn). */
int optim_can_gate(const struct optim *o);
/* optim_step with the sparse list's length on the device (*rows_n <=
 * n_max) and nothing written when *skip != 0: the same bits as optim_step
 * with n = *rows_n when *skip is 0. */
int optim_step_gated(struct optim *o, float *params, const float *dense_grad, const int64_t *rows,
                     const float *grads, const int64_t *rows_n, size_t n_max, float lr, const int *skip,
                     plumb_err *e);

#endif
