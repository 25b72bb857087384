/* gpt's 16-bit activation pipeline (dev/train_ops.h, "gpt with 16-bit
 * activations"): with fast numerics in bf16 or fp16, what the GEMMs and the
 * attention read and write (ln1, qkv, att, the projections' outputs, ln2, the
 * MLP's pre-activation and GELU output, and the gradients between them) is
 * held as 16-bit values only. The fp32 path (gpt.c) stores the same values
 * as fp32 numbers holding rt values, so every GEMM converts its operands to
 * 16-bit copies and every output is rounded in place afterwards: on the H200
 * those passes were a fifth of gpt2-124m's step (docs/GPT.md). The values,
 * and so the results, are the same: the cpu's 16-bit ops are its fp32 ops
 * between casts (tests/test_gpt16_ops.c; the digests of tests/t_gpt.sh hold
 * either way). The residual stream (enc, res2, res3), the LayerNorm
 * statistics, ln_f's output (the classifier's input), the residual
 * stream's gradient (dres) and the parameter gradients stay fp32.
 *
 * Buffers: the 16-bit tensors live in the first half of the fp32 regions
 * gpt_create lays out (gpt_model.h), so the pipeline needs no memory of its
 * own but w16, the weights' 16-bit values [n_params], cast once a step.
 * Shapes: R = B T rows, C the width; per layer ln1_16 [R,C], qkv16 [R,3C],
 * att16 [R,C], fc16 (pre-GELU) and fcg16 [R,4C]; tmp16 [R,C] a projection's
 * output; dy16 [R,C] dres as 16 bits for the GEMM that reads it; dln16,
 * datt16 [R,C], dqkv16 [R,3C], dfc16 [R,4C].
 *
 * PLUMB_GPT_ACT16: unset, "" or "1" the pipeline where the precision and the
 * device's ops allow it; "0" the fp32 path (for measurements side by side);
 * anything else an error at create. */
#include "core/dtype.h"
#include "core/envswitch.h"
#include "dev/dev.h"
#include "models/gpt/gpt_model.h"
#include <stdlib.h>
#include <string.h>

static int has_ops16(const struct train_ops *T)
{
    return T && T->layernorm_fwd16 && T->layernorm_bwd16 && T->matmul_fwd16 && T->matmul_bwd16 && T->attention_fwd16 &&
           T->attention_bwd16 && T->residual_fwd16 && T->residual_layernorm_fwd16;
}

int gpt16_wanted(const struct gpt_model *m, int *want, plumb_err *e)
{
    int on;
    *want = 0;
    int rc = env_switch("PLUMB_GPT_ACT16", "the 16-bit pipeline where it applies", &on, e);
    if (rc) return rc;
    *want = on && m->prec != DT_F32 && has_ops16(m->T) && m->d->ops->cast;
    return PLUMB_OK;
}

int gpt16_on(const struct gpt_model *m) { return m->w16 && m->d->numerics == NUMERICS_FAST; }
int gpt_cls16(const struct gpt_model *m) { return m->cls16 && gpt16_on(m); }

static const uint16_t *W16(const struct gpt_model *m, int l, int k)
{
    return m->w16 + m->t[2 + T_PER_LAYER * l + k].offset;
}

/* y16 [n] = x as rt's 16-bit values (round to nearest even, as round_fp32) */
static int cast16(struct gpt_model *m, const float *x, uint16_t *y16, size_t n, plumb_err *e)
{
    int rc = m->d->ops->cast(m->d, NULL, x, DT_F32, y16, m->prec, n);
    return rc ? err_set(e, rc, "gpt: cast of %zu values to %s failed on %s", n, dtype_name(m->prec), m->d->label) : 0;
}

long gpt16_forward_count;

int gpt16_forward(struct gpt_model *m, int B, int T, plumb_err *e)
{
    gpt16_forward_count++;
    struct dev *d = m->d;
    const struct train_ops *Op = m->T;
    const int C = m->c.n_embd, NH = m->c.n_head, HS = C / NH, R = B * T;
    const dtype_t rt = m->prec;
    const size_t RC = (size_t)R * C;
    uint16_t *tmp16 = h16(m->tmp);
    /* wwork: the classifier's (fp32-stored) weights and the LayerNorms'
     * parameters; w16 the blocks' matrices and biases (one pass where the
     * device fuses the two) */
    int rc;
    if (Op->weights16) {
        rc = Op->weights16(d, NULL, m->params, m->wwork, m->w16, m->n_params, m->r16, m->n_r16, rt, e);
    } else {
        rc = Op->round_fp32(d, NULL, m->params, m->wwork, m->n_params, rt, e);
        if (!rc) rc = cast16(m, m->params, m->w16, m->n_params, e);
    }
    if (!rc) rc = Op->encoder_fwd(d, NULL, m->params, m->params + m->t[1].offset, m->tok, m->enc, B, T, C, DT_F32, e);
    const float *x = m->enc;
    const int L = m->c.n_layer;
    /* layer 0's ln1 from the embeddings; every later ln1 with the residual
     * add before it (res3 of the layer before), as ln2 with res2's */
    if (!rc && L > 0)
        rc = Op->layernorm_fwd16(d, NULL, x, P(m, 0, LN1W), P(m, 0, LN1B), h16(m->L[0].ln1), m->L[0].ln1_mean,
                                 m->L[0].ln1_rstd, R, C, GPT_LN_EPS, rt, e);
    for (int l = 0; l < L && !rc; l++) {
        struct gpt_layer_act *a = &m->L[l];
        uint16_t *ln1 = h16(a->ln1), *qkv = h16(a->qkv), *att = h16(a->att), *ln2 = h16(a->ln2);
        uint16_t *fc = h16(a->fc), *fcg = h16(a->fc_gelu);
        rc = Op->matmul_fwd16(d, NULL, ln1, W16(m, l, QKVW), W16(m, l, QKVB), qkv, NULL, R, C, 3 * C, 0, rt, e);
        if (!rc) rc = Op->attention_fwd16(d, NULL, qkv, att, a->lse, B, T, NH, HS, rt, e);
        if (!rc) rc = Op->matmul_fwd16(d, NULL, att, W16(m, l, APW), W16(m, l, APB), tmp16, NULL, R, C, C, 0, rt, e);
        if (!rc)
            rc = Op->residual_layernorm_fwd16(d, NULL, x, tmp16, a->res2, P(m, l, LN2W), P(m, l, LN2B), ln2, a->ln2_mean,
                                             a->ln2_rstd, R, C, GPT_LN_EPS, rt, e);
        if (!rc) rc = Op->matmul_fwd16(d, NULL, ln2, W16(m, l, FCW), W16(m, l, FCB), fcg, fc, R, C, 4 * C, 1, rt, e);
        if (!rc) rc = Op->matmul_fwd16(d, NULL, fcg, W16(m, l, FPW), W16(m, l, FPB), tmp16, NULL, R, 4 * C, C, 0, rt, e);
        if (!rc && l + 1 < L) {
            struct gpt_layer_act *n = &m->L[l + 1];
            rc = Op->residual_layernorm_fwd16(d, NULL, a->res2, tmp16, a->res3, P(m, l + 1, LN1W), P(m, l + 1, LN1B),
                                             h16(n->ln1), n->ln1_mean, n->ln1_rstd, R, C, GPT_LN_EPS, rt, e);
        } else if (!rc) {
            rc = Op->residual_fwd16(d, NULL, a->res2, tmp16, a->res3, RC, rt, e);
        }
        x = a->res3;
    }
    const struct gpt_tensor *lw = &m->t[m->n_tensors - 2], *lb = &m->t[m->n_tensors - 1];
    /* ln_f: 16-bit output where the classifier reads 16 bits (gpt_cls16) */
    if (!rc && gpt_cls16(m))
        rc = Op->layernorm_fwd16(d, NULL, x, m->params + lw->offset, m->params + lb->offset, h16(m->lnf), m->lnf_mean,
                                 m->lnf_rstd, R, C, GPT_LN_EPS, rt, e);
    else if (!rc)
        rc = Op->layernorm_fwd(d, NULL, x, m->params + lw->offset, m->params + lb->offset, m->lnf, m->lnf_mean,
                               m->lnf_rstd, R, C, GPT_LN_EPS, rt, e);
    return rc;
}

/* The blocks' backward, last to first, from dres (the gradient of the last
 * block's output, fp32); leaves dres the gradient of the embeddings' output. */
int gpt16_backward_blocks(struct gpt_model *m, int B, int T, int dy16_done, plumb_err *e)
{
    struct dev *d = m->d;
    const struct train_ops *Op = m->T;
    const int C = m->c.n_embd, NH = m->c.n_head, HS = C / NH, R = B * T, L = m->c.n_layer;
    const dtype_t rt = m->prec;
    const size_t RC = (size_t)R * C;
    uint16_t *dy16 = h16(m->dy16), *dln16 = h16(m->dln), *datt16 = h16(m->datt), *dqkv16 = h16(m->dqkv);
    uint16_t *dfc16 = h16(m->dfc);
    int rc = PLUMB_OK;
    for (int l = L - 1; l >= 0 && !rc; l--) {
        struct gpt_layer_act *a = &m->L[l];
        const float *x = l ? m->L[l - 1].res3 : m->enc;
        const uint16_t *ln1 = h16(a->ln1), *qkv = h16(a->qkv), *att = h16(a->att), *ln2 = h16(a->ln2);
        const uint16_t *fc = h16(a->fc), *fcg = h16(a->fc_gelu);
        /* MLP: res3 = res2 + proj(gelu(fc(ln2(res2)))); the GEMMs read dres
         * as 16 bits: dy16, cast here for the last layer (dres from the
         * classifier), else stored by the LayerNorm backward before (dx16),
         * which also summed it into this projection's dbias (dsum) */
        const int last = l == L - 1 && !dy16_done; /* dy16 and FPB's dbias still to make */
        if (last) rc = cast16(m, m->dres, dy16, RC, e);
        if (!rc)
            rc = Op->matmul_bwd16(d, NULL, fcg, W16(m, l, FPW), dy16, fc, dfc16, G(m, l, FPW), last ? G(m, l, FPB) : NULL,
                                  R, 4 * C, C, rt, e);
        if (!rc)
            rc = Op->matmul_bwd16(d, NULL, ln2, W16(m, l, FCW), dfc16, NULL, dln16, G(m, l, FCW), G(m, l, FCB), R, C,
                                  4 * C, rt, e);
        if (!rc)
            rc = Op->layernorm_bwd16(d, NULL, a->res2, P(m, l, LN2W), a->ln2_mean, a->ln2_rstd, dln16, m->dres,
                                     m->dres, dy16, G(m, l, APB), G(m, l, LN2W), G(m, l, LN2B), R, C, rt, e);
        /* attention: res2 = x + proj(attention(qkv(ln1(x)))); its dbias
         * came with dy16 (dsum above) */
        if (!rc)
            rc = Op->matmul_bwd16(d, NULL, att, W16(m, l, APW), dy16, NULL, datt16, G(m, l, APW), NULL, R, C, C, rt,
                                  e);
        if (!rc) rc = Op->attention_bwd16(d, NULL, qkv, att, a->lse, datt16, dqkv16, B, T, NH, HS, rt, e);
        if (!rc)
            rc = Op->matmul_bwd16(d, NULL, ln1, W16(m, l, QKVW), dqkv16, NULL, dln16, G(m, l, QKVW), G(m, l, QKVB), R,
                                  C, 3 * C, rt, e);
        if (!rc)
            rc = Op->layernorm_bwd16(d, NULL, x, P(m, l, LN1W), a->ln1_mean, a->ln1_rstd, dln16, m->dres, m->dres,
                                     l ? dy16 : NULL, l ? G(m, l - 1, FPB) : NULL, G(m, l, LN1W), G(m, l, LN1B), R, C,
                                     rt, e);
        if (!rc) rc = gpt_grad_ready_block(m, L - l, e);
    }
    return rc;
}
