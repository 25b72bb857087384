/* Internal to the resnet model (resnet.c, resnet16.c): the model's state
 * and the helpers both files use. */
#ifndef PLUMB_MODELS_RESNET_MODEL_H
#define PLUMB_MODELS_RESNET_MODEL_H
#include "dev/train_ops.h"
#include "models/resnet/resnet.h"
#include <stdint.h>

#define ALIGN_F 16 /* tensors start on 64-byte boundaries; padding stays 0 */
#define MAX_TENSORS 640
#define MAX_BUFFERS 400
#define N_SLOTS 4

struct rbn {
    int C;
    size_t gamma, beta; /* parameter offsets (beta follows gamma) */
    size_t rmean, rvar; /* buffer offsets */
    float *mean, *rstd; /* device [C]: this step's batch statistics (the backward reads them) */
};
struct rconv {
    struct train_conv g; /* g.N = max_batch; set per call */
    size_t w;            /* parameter offset of [K, R, S, C] */
    size_t numel;        /* K R S C */
    size_t w16;          /* element offset of its mirror in m->w16 (256-byte aligned) */
};
struct rblock {
    int nconv; /* 2 (basic) or 3 (bottleneck) */
    struct rconv conv[3];
    struct rbn bn[3];
    int proj; /* the shortcut is conv + BN */
    struct rconv sc;
    struct rbn sbn;
    float *in;    /* block input (the previous block's out; not owned) */
    float *cx[3]; /* conv outputs */
    float *ax[2]; /* BN + ReLU outputs of the inner layers */
    float *sx, *sa;
    float *out;
    /* 16-bit mirrors (dev/train_ops.h) of the tensors a convolution reads,
     * written by the BN that writes the tensor (NULL: none) */
    uint16_t *in16, *ax16[2], *out16;
    /* the 16-bit pipeline's own (resnet16.c; then cx, ax, sx, sa, out are
     * NULL: only the 16-bit tensors exist) */
    uint16_t *cx16[3], *sx16, *sa16;
    size_t p0, p1; /* its parameter range */
};

struct resnet_model {
    struct dev *d;
    const struct train_ops *T;
    struct resnet_config c;
    dtype_t prec;
    int max_batch;
    int n_t, n_bt;
    struct resnet_tensor t[MAX_TENSORS], bt[MAX_BUFFERS];
    size_t n_params, n_bufs;
    float *params, *grads, *wwork, *bufs;
    float *in_x;            /* [MB, image, image, 3] */
    int32_t *labels;        /* [MB] */
    struct rconv stem;
    struct rbn stem_bn;
    float *stem_c, *stem_a; /* stem conv output, BN + ReLU output */
    int pool;               /* ImageNet stem: 3x3/2 max-pool */
    struct train_conv pg;
    float *pool_y;
    int32_t *pool_idx;
    int nblocks;
    struct rblock *blk;
    int feat;               /* channels into the head */
    size_t fc_w, fc_b, stem_end;
    float *pooled, *dpooled, *logits, *dlogits; /* [MB, feat], [MB, classes] */
    float *slot[N_SLOTS];   /* activation-gradient buffers [max_act] */
    int slot_used[N_SLOTS];
    size_t max_act;
    int maxC;
    void *part;             /* device: a BN part of up to 2 maxC sums (golden size) */
    int64_t *hpart;         /* host copy for the golden all-reduce */
    float *mdy;             /* device [2 maxC] */
    float *ev_rstd;         /* device [maxC], eval */
    double *sc;             /* device [2] */
    float *loss_ps;         /* device [MB] */
    int32_t *pred;          /* device [MB] */
    float *gshard;          /* golden folding: [nshards, n_params] per-shard gradients */
    int has16;              /* bf16/fp16 with the mirror ops: mirrors allocated */
    size_t n_w16;           /* elements of w16: each conv weight's mirror rounded up to 128 */
    uint16_t *w16;          /* the rounded conv weights' mirrors, made each step */
    uint16_t *stem_a16;     /* stem_a's mirror */
    uint16_t *g16;          /* [max_act] the mirror of the BN backward's dx the next convolution reads */
    int gshard_cap;         /* shards it holds */
    /* 16-bit activations (resnet16.c): chosen at create, then the fp32
     * activations and gradient slots are not allocated */
    int act16;
    int mask_self; /* the BN backward recomputes its own ReLU's mask from x16 (PLUMB_RESNET_MASK_FROM_X) */
    /* the training forward's BN statistics in one pass (bn_stats1p16o and
     * bn_meanvar, shifted by the running mean; PLUMB_RESNET_BN_ONEPASS),
     * with the 16-bit pipeline only */
    int bn1p;
    /* a projection block's two BNs applied in one pass in training
     * (bn_apply2_16o; PLUMB_RESNET_BN_APPLY2), with the 16-bit pipeline only */
    int bn2;
    uint16_t *stem_c16, *pool16;     /* stem conv output, max-pool output */
    uint16_t *slot16[N_SLOTS];       /* activation-gradient buffers [max_act] */
    int slot16_used[N_SLOTS];
    float *last32;                   /* [MB, HW, feat] the last block's output (gradient) widened for the pool */
    resnet_grad_ready_fn ready;
    void *ready_ctx;
};

struct step {
    struct resnet_model *m;
    const struct resnet_sync *sy;
    int B;              /* local valid samples: the rows computed */
    int64_t gvalid;     /* global valid samples (BN's count with sync) */
    int train;
    int keep_running;   /* training forward that leaves the running statistics alone (timing) */
    int synced;         /* BN statistics all-reduced */
    const float *W;     /* conv / fc weights as the ops read them (rounded copy) */
    int folding;        /* golden whole-batch folding: weight gradients per shard */
    int m16;            /* fast bf16/fp16, not folding: the ops read and write 16-bit mirrors */
    int a16;            /* the 16-bit pipeline (resnet16.c): 16-bit activations only */
    int ns;             /* shards (folding) or 1 */
    int s0[1024];       /* first row of each shard */
};

int rn_golden(const struct resnet_model *m);
int rn_zalloc(struct resnet_model *m, void **p, size_t bytes, plumb_err *e);
int rn_sync_part(struct step *st, int K, plumb_err *e);
int rn_zero_part(struct step *st, int K, plumb_err *e);
int rn_grad_ready(struct step *st, int k, size_t off, size_t len, plumb_err *e);
/* BN forward of x [B, HW, C] (or x16 with the 16-bit pipeline) into y (y16),
 * with the residual z (z16) and the ReLU; training: statistics of the
 * global batch (or local), and with y and y16 both NULL the statistics
 * only (bn->mean, bn->rstd: a fused apply follows); eval: running
 * statistics */
int rn_bn_forward(struct step *st, struct rbn *bn, const float *x, const uint16_t *x16, float *y, uint16_t *y16,
                  int HW, const float *z, const uint16_t *z16, int relu, plumb_err *e);
/* BN backward: dy [B, HW, C] -> dx (may be dy); the 16-bit pipeline reads
 * x16 and dy16 masked by mask16 (a ReLU output, may be NULL) into dx16.
 * own_relu: mask16 is this BN's own ReLU output (no residual before the
 * ReLU), which the ops may recompute from x16 instead of reading it
 * (m->mask_self; train_ops.h's mbeta) */
int rn_bn_backward(struct step *st, struct rbn *bn, const float *x, const uint16_t *x16, const float *dy,
                   const uint16_t *dy16, const uint16_t *mask16, int own_relu, float *dx, uint16_t *dx16, int HW,
                   plumb_err *e);
/* from PLUMB_RESNET_MASK_FROM_X (unset, "" or "1": recompute; "0": read the
 * stored ReLU output; anything else PLUMB_EUSAGE) */
int resnet16_mask_self(int *on, plumb_err *e);
/* *on from PLUMB_RESNET_BN_ONEPASS (unset, "" or "1": the one-pass BN
 * statistics where the 16-bit pipeline runs and the device has the two ops;
 * "0": the two passes; anything else PLUMB_EUSAGE) and act16, T */
int resnet16_bn_onepass(const struct train_ops *T, int act16, int *on, plumb_err *e);
/* *on from PLUMB_RESNET_BN_APPLY2 (unset, "" or "1": a projection block's
 * shortcut BN and last BN applied in one pass, in training, where the 16-bit
 * pipeline runs and the device has bn_apply2_16o; "0": apart; anything else
 * PLUMB_EUSAGE) and act16, T */
int resnet16_bn_apply2(const struct train_ops *T, int act16, int *on, plumb_err *e);

/* resnet16.c: the 16-bit pipeline */
int resnet16_ops(const struct train_ops *T);
/* from PLUMB_RESNET_ACT16 (unset, "" or "1": where it applies; "0": the
 * mirror path; anything else PLUMB_EUSAGE) and the device */
int resnet16_wanted(struct dev *d, dtype_t prec, int *want, plumb_err *e);
/* the stem and the blocks; *last: the last block's output as fp32 for the pool */
int resnet16_trunk_forward(struct step *st, const float **last, plumb_err *e);
/* from dpooled: the blocks and the stem (gradients, grad-ready reports) */
int resnet16_trunk_backward(struct step *st, plumb_err *e);

#endif
