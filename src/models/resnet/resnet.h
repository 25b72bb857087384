/* resnet: the ResNets of docs/RESNET.md over the device's train_ops
 * (dev/train_ops.h, "vision ops"), explicit forward and backward, NHWC.
 *
 * Presets (resnet_config_preset):
 *   resnet-tiny     CIFAR stem (3x3 conv 3->8, no max-pool), basic blocks
 *                   [1,1,1] of widths 8,16,32, 32x32 input, 10 classes:
 *                   trains on 2 cores in seconds;
 *   resnet18        CIFAR stem (3x3, 64), basic blocks [2,2,2,2], 32x32, 10;
 *   resnet50-cifar  CIFAR stem, bottleneck blocks [3,4,6,3], 32x32, 10;
 *   resnet50        ImageNet stem (7x7/2 conv, 3x3/2 max-pool), bottleneck
 *                   [3,4,6,3], 224x224, 1000 classes (torchvision's);
 *   resnet152       ImageNet stem, bottleneck [3,8,36,3], 224x224, 1000.
 * Blocks as torchvision's: basic = 3x3 conv, BN, ReLU, 3x3 conv, BN, + the
 * shortcut, ReLU; bottleneck = 1x1, 3x3 (the stride here, "v1.5"), 1x1 of 4x
 * the width, each followed by BN (ReLU after the first two), + shortcut,
 * ReLU. A shortcut that changes shape is a 1x1 strided conv + BN. Head:
 * global average pool, linear layer to the classes, softmax cross-entropy.
 * No conv has a bias. BN: eps 1e-5, momentum 0.1 (PyTorch's).
 *
 * Memory (on the device d):
 * - ONE fp32 parameter buffer (resnet_params), tensors in forward order of
 *   the layers, within each layer (the stem, a block, the head) the conv or
 *   linear weights first and the BN parameters after them, so the decayed
 *   and the undecayed tensors form two ranges per layer (resnet_tensor lists
 *   them with torchvision's names: conv1.weight, layer1.0.bn2.bias,
 *   fc.weight...), each 64-byte aligned (padding 0); conv weights
 *   [K, R, S, C], BN gamma then beta adjacent;
 * - ONE fp32 gradient buffer of the same layout (resnet_grads);
 * - ONE fp32 buffer of the non-trainable BN running statistics
 *   (resnet_buffers: running_mean, running_var per BN, listed by
 *   resnet_buffer_tensor); the digest covers parameters and buffers.
 *
 * ---- Gradient contract ----
 * resnet_forward_backward computes the gradient of
 *     grad_scale * sum_{b < n_valid} xent(logits_b, label_b)
 * over this rank's batch, with BatchNorm statistics over the GLOBAL batch
 * (struct resnet_sync: the caller all-reduces each BN's partial sums, in
 * the forward and again in the backward), and OVERWRITES the gradient
 * buffer; it also updates the running statistics (once per call, from the
 * global statistics, so every rank holds the same buffers). Rows past
 * n_valid are never computed (an empty local batch still takes part in
 * every collective).
 * - golden data parallel: with sync.fold_shard set, the valid samples
 *   are sync.nshards consecutive micro-shards of sync.shard_valid[j]
 *   samples; every weight gradient is computed shard by shard, and for each
 *   shard j in order the model leaves that shard's whole contribution in
 *   resnet_grads() and calls fold_shard(ctx, j, loss of shard j): the
 *   caller adds it, converted to fixed point, to its accumulators.
 *   Activations and their gradients are per sample and BN statistics exact
 *   (fixed point, dev/train_ops.h), so the folded sums have the same bits
 *   on any rank count (train/model.h's whole-batch contract).
 * - fast: fold_shard NULL: each weight gradient over the whole local batch; the
 *   caller all-reduces resnet_grads() (the grad-ready hook reports each
 *   block's range as backward finishes it).
 * sync.allreduce NULL, or sync.local_bn: per-rank statistics (plain DDP's
 * BatchNorm, `--bn local`), which differ from the 1-rank statistics: the
 * source documents' accuracy drop.
 *
 * ---- Precision ----
 * DT_F32, DT_BF16 or DT_F16: parameters, running statistics and gradients
 * stay fp32; activations, their gradients and the conv / linear weights
 * the ops read (a rounded working copy) are rounded to the precision, BN
 * statistics and parameters are fp32 (as PyTorch autocast keeps BN). */
#ifndef PLUMB_RESNET_H
#define PLUMB_RESNET_H
#include <stddef.h>
#include <stdint.h>
#include "core/dtype.h"
#include "core/err.h"
#include "dev/dev.h"

#define RESNET_MAX_STAGES 4
enum resnet_stem { RESNET_STEM_CIFAR = 0, RESNET_STEM_IMAGENET = 1 };

struct resnet_config {
    char preset[32];
    int stem;                        /* enum resnet_stem */
    int bottleneck;                  /* 0: basic blocks, 1: bottleneck (expansion 4) */
    int stem_width;                  /* the stem conv's output channels */
    int n_stages;
    int blocks[RESNET_MAX_STAGES];   /* blocks per stage */
    int width[RESNET_MAX_STAGES];    /* planes per stage (bottleneck output 4x) */
    int image;                       /* input side: 32 or 224 (any >= 8 works) */
    int classes;
};

/* Unknown name: PLUMB_EUSAGE listing the presets. */
int resnet_config_preset(const char *name, struct resnet_config *c, plumb_err *e);
int resnet_config_validate(const struct resnet_config *c, plumb_err *e);
/* "resnet-tiny: cifar stem 8, basic [1,1,1] x 8,16,32, 32x32, 10 classes, 12.3 k parameters" */
void resnet_config_describe(const struct resnet_config *c, size_t n_params, char *buf, size_t n);
/* Trainable parameters of c (the sum of the tensors' sizes, no padding):
 * torchvision's counts for its models (resnet50 25,557,032). */
int resnet_config_count_params(const struct resnet_config *c, size_t *n, plumb_err *e);
/* the preset names, "|"-separated (for option help and errors) */
const char *resnet_preset_names(void);

struct resnet_tensor {
    char name[48];
    size_t offset, numel;   /* floats, into resnet_params / resnet_grads (or resnet_buffers) */
    int rows, cols;         /* as a matrix: conv [K, R S C], fc.weight [classes, features], others [1, n] */
    int kind;               /* RESNET_T_CONV, _BN_WEIGHT, _BN_BIAS, _FC_WEIGHT, _FC_BIAS, _RUNNING_MEAN, _RUNNING_VAR */
};
enum { RESNET_T_CONV, RESNET_T_BN_WEIGHT, RESNET_T_BN_BIAS, RESNET_T_FC_WEIGHT, RESNET_T_FC_BIAS,
       RESNET_T_RUNNING_MEAN, RESNET_T_RUNNING_VAR };

struct resnet_model;

int resnet_create(struct dev *d, const struct resnet_config *c, int max_batch, dtype_t precision,
                  struct resnet_model **out, plumb_err *e);
void resnet_free(struct resnet_model *m);

/* torchvision's init from Philox (seed, RNG_INIT, a = tensor id (list
 * position), b = 0, index = element): conv weights normal(0, sqrt(2 /
 * fan_out)), fan_out = K R S (kaiming_normal_, mode fan_out, ReLU gain);
 * BN weight 1, bias 0; fc weight and bias uniform(-1/sqrt(fan_in),
 * 1/sqrt(fan_in)) (nn.Linear's default); running mean 0, var 1. Scales
 * rounded to fp32, value = fmaf(scale, z, 0) / fmaf(2 bound, u, -bound).
 * On the device through rng ops + affine, or on the host: the same bits. */
int resnet_init(struct resnet_model *m, uint64_t seed, plumb_err *e);

const struct resnet_config *resnet_config_of(const struct resnet_model *m);
size_t resnet_n_params(const struct resnet_model *m);
float *resnet_params(struct resnet_model *m);
float *resnet_grads(struct resnet_model *m);
int resnet_n_tensors(const struct resnet_model *m);
const struct resnet_tensor *resnet_tensor(const struct resnet_model *m, int i);
size_t resnet_n_buffers(const struct resnet_model *m);
float *resnet_buffers(struct resnet_model *m);
int resnet_n_buffer_tensors(const struct resnet_model *m);
const struct resnet_tensor *resnet_buffer_tensor(const struct resnet_model *m, int i);
int resnet_max_batch(const struct resnet_model *m);
struct dev *resnet_dev(struct resnet_model *m);

/* One (local) batch, in host memory unless on_device. */
struct resnet_loss {
    double sum;              /* sum of the per-sample losses, double adds in ascending sample order */
    int64_t count;
};

struct resnet_batch {
    int B, n_valid;          /* rows; the first n_valid are samples (the rest masked, not computed) */
    int on_device;           /* x and labels are device memory (labels unchecked: the source checked them) */
    int64_t global_valid;    /* valid samples over all ranks (BN's count); 0: n_valid */
    const float *x;          /* [B, image, image, 3] NHWC, normalised (models/resnet/imgdata.h) */
    const int32_t *labels;   /* [B] in [0, classes) */
};
int resnet_check_batch(const struct resnet_model *m, const struct resnet_batch *b, plumb_err *e);

/* Collectives and folding during forward_backward (see the contract). */
struct resnet_sync {
    /* In-place sum over ranks of n values: golden: host int64 (BN's
     * fixed-point parts, train_bn_part_bytes), fast: device float. NULL:
     * one rank, or local statistics. */
    int (*allreduce)(void *ctx, void *buf, int n, int golden, plumb_err *e);
    void *ctx;
    int local_bn;            /* 1: per-rank statistics even with allreduce (--bn local) */
    /* golden data parallel: the shards and the fold (see above) */
    int nshards;
    const int *shard_valid;  /* [nshards] valid samples per shard, summing to n_valid */
    int (*fold_shard)(void *ctx, int j, const struct resnet_loss *l, plumb_err *e);
    void *fold_ctx;
    /* NULL: none. Called with ctx once the forward to the logits is queued,
     * before the loss and the backward (model.h's forward_done). */
    int (*forward_done)(void *ctx, plumb_err *e);
};

/* The 16-bit activation pipeline (models/resnet/resnet16.c): with fast
 * bf16/fp16 numerics and the device's optional "resnet with 16-bit
 * activations" ops, the convolutions' outputs, the BN outputs and the
 * gradients between layers are held as 16-bit values only (the fp32
 * activations are not allocated). PLUMB_RESNET_ACT16=0 keeps today's fp32
 * activations with 16-bit mirrors; a value other than 0 or 1 is
 * PLUMB_EUSAGE at resnet_create. resnet_act16: whether the model runs it;
 * resnet16_forward_count: forwards through it in this process (tests,
 * plumb bench resnet). */
int resnet_act16(const struct resnet_model *m);
extern long resnet16_forward_count;
/* With the pipeline, the training forward's BN statistics are one pass
 * over x16 (bn_stats1p16o, one all-reduce of 2C sums, bn_meanvar; shifted
 * by the running mean) where the device has the two ops;
 * PLUMB_RESNET_BN_ONEPASS=0 keeps the two passes (the mean, then the
 * squared deviations; bn_stats16o twice), a value other than 0 or 1 is
 * PLUMB_EUSAGE at resnet_create. resnet16_bn1p_count: BN layers whose
 * statistics were made in one pass in this process (tests). */
extern long resnet16_bn1p_count;
/* In training with the pipeline, a projection block's shortcut BN and last
 * BN are applied in one pass (bn_apply2_16o) where the device has it;
 * PLUMB_RESNET_BN_APPLY2=0 applies them apart, a value other than 0 or 1 is
 * PLUMB_EUSAGE at resnet_create. resnet16_bn2_count: blocks applied so in
 * this process (tests). */
extern long resnet16_bn2_count;

/* loss NULL (fast numerics, no fold_shard): the work is queued and nothing
 * is read back (no synchronisation); the loss pair {sum, count} is then at
 * resnet_loss_dev. */
int resnet_forward_backward(struct resnet_model *m, const struct resnet_batch *b, const struct resnet_sync *sync,
                            float grad_scale, struct resnet_loss *loss, plumb_err *e);
/* device double [2]: the last forward_backward's {loss sum, sample count} */
const double *resnet_loss_dev(const struct resnet_model *m);

/* Grad-ready hook (fast data parallel overlap): called as backward
 * completes the gradients of each block (then the stem), k = 0, 1, ... in
 * backward order, with [off, off + len) its range of resnet_grads(); the
 * ranges descend and cover [0, n_params) once. Not called with fold_shard. */
typedef int (*resnet_grad_ready_fn)(void *ctx, int k, size_t off, size_t len, dev_stream *s, plumb_err *e);
void resnet_set_grad_ready_hook(struct resnet_model *m, resnet_grad_ready_fn fn, void *ctx);
/* The hook's ranges in backward order (off[k], len[k] in floats, descending,
 * covering [0, n_params) once; neighbours merged to at most max); the count. */
int resnet_grad_buckets(const struct resnet_model *m, size_t *off, size_t *len, int max);

/* The training forward of the local batch to the loss (batch statistics,
 * local: no collectives), no backward, the running statistics untouched:
 * bench resnet's forward-only timing. Queued, no synchronisation. */
int resnet_forward_train(struct resnet_model *m, const struct resnet_batch *b, plumb_err *e);

/* Eval forward with the running statistics (per sample: any batch split
 * scores a sample the same): per-sample loss and top-1 class into host
 * arrays [n_valid] (either may be NULL; loss needs labels). */
int resnet_predict(struct resnet_model *m, const struct resnet_batch *b, float *loss, int32_t *pred, plumb_err *e);

/* SHA-256 (64 hex chars) of the parameter buffer then the buffers. */
int resnet_digest(struct resnet_model *m, char hex[65], plumb_err *e);

#endif
