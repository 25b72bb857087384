/* Internal to the gpt model (gpt.c, gpt16.c): the model's state and the
 * helpers both files use. */
#ifndef PLUMB_MODELS_GPT_MODEL_H
#define PLUMB_MODELS_GPT_MODEL_H
#include "dev/train_ops.h"
#include "models/gpt/gpt.h"
#include <stdint.h>

#define ALIGN_F 16 /* tensors start on 64-byte boundaries */
#define T_PER_LAYER 12
#define MAX_TENSORS (2 + T_PER_LAYER * GPT_MAX_LAYERS + 2)

/* per-layer tensor slots, in layout order */
enum { LN1W, LN1B, QKVW, QKVB, APW, APB, LN2W, LN2B, FCW, FCB, FPW, FPB };

/* Activations of one layer (device pointers into m->act). With the 16-bit
 * pipeline (gpt16.c) the regions of ln1, qkv, att, ln2, fc and fc_gelu hold
 * 16-bit values instead (uint16_t, the first half of each region). */
struct gpt_layer_act {
    float *ln1, *ln1_mean, *ln1_rstd; /* [R,C], [R], [R] */
    float *qkv;                       /* [R,3C] */
    float *att, *lse;                 /* [R,C], [B,NH,T] */
    float *res2;                      /* [R,C] x + attention branch */
    float *ln2, *ln2_mean, *ln2_rstd;
    float *fc, *fc_gelu;              /* [R,4C] */
    float *res3;                      /* [R,C] the block's output */
};

struct gpt_model {
    struct dev *d;
    const struct train_ops *T;
    struct gpt_config c;
    dtype_t prec;
    int max_batch;
    int n_tensors;
    struct gpt_tensor t[MAX_TENSORS];
    size_t n_params, n_nonemb;
    int64_t dec[2 * MAX_TENSORS];
    int n_dec;
    float *params, *grads;
    float *wwork; /* [n_params] rounded working copy (16-bit compute), else NULL */
    uint16_t *w16; /* [n_params] its 16-bit values: the 16-bit pipeline's weights (gpt16.c), else NULL */
    int64_t *r16;  /* device [2 n_r16]: the ranges of w16 the GEMMs read (the blocks' four matrices and biases a
                      layer; wte where cls16) */
    int n_r16;
    int cls16;     /* the classifier reads wte from w16 (classifier_fwd_bwd16); wwork's wte then unwritten */
    int32_t *tok, *tgt; /* [MB*T] */
    float *act;         /* the activation buffer */
    float *enc;         /* [R,C] */
    struct gpt_layer_act L[GPT_MAX_LAYERS];
    float *lnf, *lnf_mean, *lnf_rstd; /* [R,C], [R], [R] */
    float *losses;                    /* [R] */
    float *tmp;                       /* [R,C] a projection's output before its residual add */
    float *dres, *dln, *datt, *dqkv, *dfc, *dy16; /* backward scratch */
    float *logits;                    /* [LG_ROWS, V] gpt_logits scratch, on demand */
    double *sc;                       /* [2] */
    gpt_grad_ready_fn ready;
    void *ready_ctx;
    gpt_forward_done_fn fwd_done; /* gpt_set_forward_done_hook */
    void *fwd_done_ctx;
};

/* weights for the GEMMs: the rounded working copy with 16-bit compute */
/* a region's first half as 16-bit values (the 16-bit pipeline keeps an
 * activation's rt values where its fp32 copy would be) */
static inline uint16_t *h16(float *region) { return (uint16_t *)region; }
static inline const float *gemm_weights(const struct gpt_model *m) { return m->wwork ? m->wwork : m->params; }
static inline const float *W(const struct gpt_model *m, int l, int k)
{
    return gemm_weights(m) + m->t[2 + T_PER_LAYER * l + k].offset;
}
static inline const float *P(const struct gpt_model *m, int l, int k)
{
    return m->params + m->t[2 + T_PER_LAYER * l + k].offset;
}
static inline float *G(struct gpt_model *m, int l, int k) { return m->grads + m->t[2 + T_PER_LAYER * l + k].offset; }

/* the grad-ready hook for gradient block k (gpt.c) */
int gpt_grad_ready_block(struct gpt_model *m, int k, plumb_err *e);

/* gpt16.c: whether this forward runs the 16-bit pipeline, and the pipeline's
 * forward (embeddings through ln_f) and backward (ln_f's input gradient in
 * m->dln, through the blocks; the embeddings' backward is the caller's) */
/* at create: *want = 1 for the pipeline (the precision, the device's ops,
 * PLUMB_GPT_ACT16); an unknown PLUMB_GPT_ACT16 value is PLUMB_EUSAGE */
int gpt16_wanted(const struct gpt_model *m, int *want, plumb_err *e);
int gpt16_on(const struct gpt_model *m);
int gpt16_forward(struct gpt_model *m, int B, int T, plumb_err *e);
/* dy16_done: the ln_f backward stored the last block's dy16 and its last
 * dbias (layernorm_bwd16's dx16 and dsum; gpt_cls16) */
int gpt16_backward_blocks(struct gpt_model *m, int B, int T, int dy16_done, plumb_err *e);
/* the classifier and ln_f in 16 bits (classifier_fwd_bwd16): the 16-bit
 * pipeline runs and the model took the op (cls16) */
int gpt_cls16(const struct gpt_model *m);

#endif
