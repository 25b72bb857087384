/* resnet's 16-bit activation pipeline (dev/train_ops.h "resnet with 16-bit
 * activations"): with fast numerics in bf16 or fp16, the stem's and every
 * block's convolution outputs (cx16, sx16, stem_c16), BN outputs (ax16,
 * sa16, out16, stem_a16), the max-pool's output (pool16) and the gradients
 * flowing between the layers (slot16) are held as 16-bit values only.
 * resnet.c's mirror path stores the same values as fp32 numbers holding rt
 * values plus a 16-bit mirror of each tensor a convolution reads, so each
 * elementwise pass there moves fp32 and 16-bit copies; here it moves 16 bits
 * (PyTorch's autocast with channels_last stores activations likewise).
 * The values, and so the results, are the same: the cpu's 16-bit ops are its
 * fp32 ops between casts, and every stored tensor of the mirror path is
 * rt-rounded (tests/test_resnet16_ops.c: the same parameters on the cpu).
 *
 * What stays fp32: the parameters and their gradients (dw, dgamma, dbeta:
 * fp32 accumulation), the BN statistics and the backward's two sums (fp32
 * sums of the 16-bit values), the network's input (the stem reads in_x),
 * and the head: the last block's output is widened into last32 for the
 * average pool, whose gradient is narrowed back (both exact).
 *
 * ReLU masks are never stored: the BN backward and the residual add read
 * the gradient of a BN + ReLU output masked by that output (mask16), as
 * relu_bwd would have stored it. A BN whose ReLU follows it directly (the
 * stem's, a block's inner ones) has the mask recomputed from its input x16
 * instead (rn_bn_backward's own_relu; PLUMB_RESNET_MASK_FROM_X=0 reads it).
 *
 * Golden numerics and golden data-parallel folding need the fp32 activations:
 * a model made for the 16-bit pipeline refuses a golden step (resnet.c). */
#include "core/dtype.h"
#include "core/envswitch.h"
#include "dev/dev.h"
#include "models/resnet/resnet_model.h"
#include <stdlib.h>
#include <string.h>

long resnet16_forward_count;
long resnet16_bn1p_count;

int resnet16_ops(const struct train_ops *T)
{
    return T && T->conv2d_fwd16o && T->conv2d_bwd_data16o && T->conv2d_bwd_filter16o && T->bn_stats16o &&
           T->bn_apply16o && T->bn_bwd_reduce16o && T->bn_bwd_data16o && T->add16o && T->maxpool_fwd16o &&
           T->maxpool_bwd16o;
}

int resnet16_mask_self(int *on, plumb_err *e)
{
    return env_switch("PLUMB_RESNET_MASK_FROM_X", "the BN backward recomputes its own ReLU's mask", on, e);
}

int resnet16_bn_onepass(const struct train_ops *T, int act16, int *on, plumb_err *e)
{
    int sw;
    *on = 0;
    int rc = env_switch("PLUMB_RESNET_BN_ONEPASS", "the BN statistics in one pass (16-bit pipeline)", &sw, e);
    if (rc) return rc;
    *on = sw && act16 && T && T->bn_stats1p16o && T->bn_meanvar;
    return PLUMB_OK;
}

int resnet16_bn_apply2(const struct train_ops *T, int act16, int *on, plumb_err *e)
{
    int sw;
    *on = 0;
    int rc = env_switch("PLUMB_RESNET_BN_APPLY2", "a projection block's two BNs applied in one pass", &sw, e);
    if (rc) return rc;
    *on = sw && act16 && T && T->bn_apply2_16o;
    return PLUMB_OK;
}

long resnet16_bn2_count;

int resnet16_wanted(struct dev *d, dtype_t prec, int *want, plumb_err *e)
{
    int on;
    *want = 0;
    int rc = env_switch("PLUMB_RESNET_ACT16", "the 16-bit pipeline where it applies", &on, e);
    if (rc) return rc;
    *want = on && prec != DT_F32 && d->numerics == NUMERICS_FAST &&
            resnet16_ops(d->ops->train) && d->ops->cast;
    return PLUMB_OK;
}

int resnet_act16(const struct resnet_model *m) { return m->act16; }

/* y [n] of type yt from x of type xt (exact both ways here: rt values) */
static int cast(struct resnet_model *m, const void *x, dtype_t xt, void *y, dtype_t yt, size_t n, plumb_err *e)
{
    if (!n) return PLUMB_OK;
    int rc = m->d->ops->cast(m->d, NULL, x, xt, y, yt, n);
    return rc ? err_set(e, rc, "resnet: cast of %zu values from %s to %s failed on %s", n, dtype_name(xt),
                        dtype_name(yt), m->d->label)
              : PLUMB_OK;
}

static int slot_take(struct resnet_model *m, uint16_t **p, plumb_err *e)
{
    for (int i = 0; i < N_SLOTS; i++)
        if (!m->slot16_used[i]) {
            m->slot16_used[i] = 1;
            *p = m->slot16[i];
            return PLUMB_OK;
        }
    return err_set(e, PLUMB_EINTERNAL, "resnet: out of 16-bit gradient slots");
}
static void slot_give(struct resnet_model *m, const uint16_t *p)
{
    for (int i = 0; i < N_SLOTS; i++)
        if (m->slot16[i] == p) m->slot16_used[i] = 0;
}

/* the convolutions over the local batch; x: the network's fp32 input (the
 * stem) or NULL, then x16 */
static int conv_fwd(struct step *st, const struct rconv *cv, const float *x, const uint16_t *x16, uint16_t *y16,
                    plumb_err *e)
{
    struct resnet_model *m = st->m;
    if (!st->B) return PLUMB_OK;
    struct train_conv g = cv->g;
    g.N = st->B;
    return m->T->conv2d_fwd16o(m->d, NULL, &g, x, x16, m->w16 + cv->w16, y16, m->prec, e);
}
static int conv_wgrad(struct step *st, const struct rconv *cv, const float *x, const uint16_t *x16,
                      const uint16_t *dy16, plumb_err *e)
{
    struct resnet_model *m = st->m;
    if (!st->B) return PLUMB_OK;
    struct train_conv g = cv->g;
    g.N = st->B;
    return m->T->conv2d_bwd_filter16o(m->d, NULL, &g, x, x16, dy16, m->grads + cv->w, m->prec, e);
}
static int conv_dgrad(struct step *st, const struct rconv *cv, const uint16_t *dy16, uint16_t *dx16, plumb_err *e)
{
    struct resnet_model *m = st->m;
    if (!st->B) return PLUMB_OK;
    struct train_conv g = cv->g;
    g.N = st->B;
    return m->T->conv2d_bwd_data16o(m->d, NULL, &g, dy16, m->w16 + cv->w16, dx16, m->prec, e);
}

int resnet16_trunk_forward(struct step *st, const float **last, plumb_err *e)
{
    struct resnet_model *m = st->m;
    const int B = st->B;
    const int shw = m->stem.g.P * m->stem.g.Q;
    int rc = conv_fwd(st, &m->stem, m->in_x, NULL, m->stem_c16, e);
    if (!rc) rc = rn_bn_forward(st, &m->stem_bn, NULL, m->stem_c16, NULL, m->stem_a16, shw, NULL, NULL, 1, e);
    const uint16_t *cur = m->stem_a16;
    if (m->pool) {
        struct train_conv g = m->pg;
        g.N = B;
        if (!rc && B) rc = m->T->maxpool_fwd16o(m->d, NULL, &g, m->stem_a16, m->pool16, m->pool_idx, m->prec, e);
        cur = m->pool16;
    }
    for (int b = 0; b < m->nblocks && !rc; b++) {
        struct rblock *k = &m->blk[b];
        k->in = NULL;
        k->in16 = (uint16_t *)cur;
        const uint16_t *x16 = cur;
        const int L = k->nconv - 1;
        for (int i = 0; i < L && !rc; i++) {
            const struct train_conv *g = &k->conv[i].g;
            rc = conv_fwd(st, &k->conv[i], NULL, x16, k->cx16[i], e);
            if (!rc) rc = rn_bn_forward(st, &k->bn[i], NULL, k->cx16[i], NULL, k->ax16[i], g->P * g->Q, NULL, NULL, 1, e);
            x16 = k->ax16[i];
        }
        const struct train_conv *g = &k->conv[L].g;
        if (!rc) rc = conv_fwd(st, &k->conv[L], NULL, x16, k->cx16[L], e);
        const uint16_t *z16 = k->in16;
        /* training with a projection: both BNs' statistics, then one pass
         * applies them (the shortcut's output never stored) */
        const int two = k->proj && st->train && m->bn2;
        if (!rc && k->proj) {
            rc = conv_fwd(st, &k->sc, NULL, k->in16, k->sx16, e);
            if (!rc)
                rc = rn_bn_forward(st, &k->sbn, NULL, k->sx16, NULL, two ? NULL : k->sa16, k->sc.g.P * k->sc.g.Q, NULL,
                                   NULL, 0, e);
            z16 = k->sa16;
        }
        if (!rc && two) {
            const size_t M = (size_t)B * g->P * g->Q;
            rc = rn_bn_forward(st, &k->bn[L], NULL, k->cx16[L], NULL, NULL, g->P * g->Q, NULL, NULL, 1, e);
            if (!rc && M)
                rc = m->T->bn_apply2_16o(m->d, NULL, k->cx16[L], k->bn[L].mean, k->bn[L].rstd, m->params + k->bn[L].gamma,
                                         m->params + k->bn[L].beta, k->sx16, k->sbn.mean, k->sbn.rstd,
                                         m->params + k->sbn.gamma, m->params + k->sbn.beta, k->out16, M, k->bn[L].C, 1,
                                         m->prec, e);
            if (!rc) resnet16_bn2_count++;
        } else if (!rc) {
            rc = rn_bn_forward(st, &k->bn[L], NULL, k->cx16[L], NULL, k->out16, g->P * g->Q, NULL, z16, 1, e);
        }
        cur = k->out16;
    }
    /* the head's average pool reads fp32: the last output widened */
    const struct rblock *k = &m->blk[m->nblocks - 1];
    const struct train_conv *g = &k->conv[k->nconv - 1].g;
    if (!rc) rc = cast(m, cur, m->prec, m->last32, DT_F32, (size_t)B * g->P * g->Q * m->feat, e);
    *last = m->last32;
    if (!rc) resnet16_forward_count++;
    return rc;
}

/* one block: gout (a slot, the gradient of k->out: masked by its ReLU
 * already when gout_masked, else not yet) -> *gin (a slot, the gradient of
 * k->in, masked by inmask when that is given: k->in as a ReLU output).
 * Masking gin where the add makes it (add16o's ymask16) saves the reads of
 * the mask by the previous block's consumers of its gout: the last BN's
 * backward reduce and data passes, the projection BN's two, the identity
 * shortcut's add (resnet50 bf16/256: about 6 GB a step). The values are
 * the same: the mask is exact and its test relu_bwd's. */
static int block_backward(struct step *st, struct rblock *k, uint16_t *gout, int gout_masked, const uint16_t *inmask,
                          uint16_t **gin, plumb_err *e)
{
    struct resnet_model *m = st->m;
    const int L = k->nconv - 1;
    const struct train_conv *gl = &k->conv[L].g;
    /* gout's mask, where it is still to be applied */
    const uint16_t *outmask = gout_masked ? NULL : k->out16;
    /* the shortcut's gradient: gout masked by out16 (identity), or the
     * projection's dx */
    uint16_t *shortg = gout, *g2 = NULL;
    const uint16_t *shortmask = outmask;
    int rc = PLUMB_OK;
    if (k->proj) {
        uint16_t *t = NULL;
        rc = slot_take(m, &t, e);
        if (!rc)
            rc = rn_bn_backward(st, &k->sbn, NULL, k->sx16, NULL, gout, outmask, 0, NULL, t, k->sc.g.P * k->sc.g.Q, e);
        if (!rc) rc = slot_take(m, &shortg, e);
        if (!rc) rc = conv_dgrad(st, &k->sc, t, shortg, e);
        if (!rc) rc = conv_wgrad(st, &k->sc, NULL, k->in16, t, e);
        slot_give(m, t);
        shortmask = NULL;
        g2 = gout; /* in place: the shortcut has its own gradient now */
    } else {
        rc = slot_take(m, &g2, e);
    }
    if (!rc) rc = rn_bn_backward(st, &k->bn[L], NULL, k->cx16[L], NULL, gout, outmask, 0, NULL, g2, gl->P * gl->Q, e);
    for (int i = L; i >= 0 && !rc; i--) {
        /* g2 = d cx[i] */
        const uint16_t *x16 = i ? k->ax16[i - 1] : k->in16;
        uint16_t *nx = NULL;
        rc = conv_wgrad(st, &k->conv[i], NULL, x16, g2, e);
        if (!rc) rc = slot_take(m, &nx, e);
        if (!rc) rc = conv_dgrad(st, &k->conv[i], g2, nx, e);
        slot_give(m, g2);
        g2 = nx;
        if (!rc && i) {
            const struct train_conv *gi = &k->conv[i - 1].g;
            rc = rn_bn_backward(st, &k->bn[i - 1], NULL, k->cx16[i - 1], NULL, nx, k->ax16[i - 1], 1, NULL, nx,
                                gi->P * gi->Q, e);
        }
    }
    const struct train_conv *g0 = &k->conv[0].g;
    const size_t nin = (size_t)st->B * g0->H * g0->W * g0->C;
    if (!rc && nin) rc = m->T->add16o(m->d, NULL, g2, shortg, shortmask, inmask, g2, nin, m->prec, e);
    slot_give(m, shortg);
    *gin = g2;
    return rc;
}

int resnet16_trunk_backward(struct step *st, plumb_err *e)
{
    struct resnet_model *m = st->m;
    const struct train_ops *T = m->T;
    const int B = st->B, F = m->feat;
    for (int i = 0; i < N_SLOTS; i++) m->slot16_used[i] = 0;
    const struct rblock *lastb = &m->blk[m->nblocks - 1];
    const struct train_conv *gl = &lastb->conv[lastb->nconv - 1].g;
    const size_t nlast = (size_t)B * gl->P * gl->Q * F;
    uint16_t *g = NULL;
    int rc = slot_take(m, &g, e);
    if (!rc && B) rc = T->avgpool_bwd(m->d, NULL, m->dpooled, m->last32, B, gl->P * gl->Q, F, m->prec, e);
    if (!rc) rc = cast(m, m->last32, DT_F32, g, m->prec, nlast, e);
    for (int b = m->nblocks - 1; b >= 0 && !rc; b--) {
        uint16_t *gin;
        /* the first block's input is the max-pool's output or the stem's
         * BN + ReLU output, whose backward recomputes its own mask: its
         * gradient stays unmasked; every other block's input is the previous
         * block's ReLU output */
        const uint16_t *inmask = b ? m->blk[b].in16 : NULL;
        rc = block_backward(st, &m->blk[b], g, b != m->nblocks - 1, inmask, &gin, e);
        g = gin;
        if (!rc) rc = rn_grad_ready(st, m->nblocks - b, m->blk[b].p0, m->blk[b].p1 - m->blk[b].p0, e);
    }
    /* stem: (max-pool), BN with its ReLU's mask, conv weight from the fp32 input */
    const int shw = m->stem.g.P * m->stem.g.Q;
    if (!rc && m->pool) {
        uint16_t *t = NULL;
        rc = slot_take(m, &t, e);
        struct train_conv pg = m->pg;
        pg.N = B;
        if (!rc && B) rc = T->maxpool_bwd16o(m->d, NULL, &pg, g, m->pool_idx, t, m->prec, e);
        slot_give(m, g);
        g = t;
    }
    if (!rc) rc = rn_bn_backward(st, &m->stem_bn, NULL, m->stem_c16, NULL, g, m->stem_a16, 1, NULL, g, shw, e);
    if (!rc) rc = conv_wgrad(st, &m->stem, m->in_x, NULL, g, e);
    if (!rc) rc = rn_grad_ready(st, m->nblocks + 1, 0, m->stem_end, e);
    slot_give(m, g);
    return rc;
}
