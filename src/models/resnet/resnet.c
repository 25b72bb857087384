/* resnet over the device's train_ops: see resnet.h for the presets, the
 * layout, the gradient contract and precision. */
#include "models/resnet/resnet_model.h"
#include "core/hash.h"
#include "core/philox.h"
#include "dev/train_ops.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BN_EPS 1e-5f
#define BN_MOMENTUM 0.1f

/* ---------------- configuration ---------------- */

const char *resnet_preset_names(void) { return "resnet-tiny|resnet18|resnet50-cifar|resnet50|resnet152"; }

int resnet_config_preset(const char *name, struct resnet_config *c, plumb_err *e)
{
    memset(c, 0, sizeof *c);
    if (!name) return err_set(e, PLUMB_EUSAGE, "resnet preset: none given (expected %s)", resnet_preset_names());
    static const int w4[4] = {64, 128, 256, 512};
    if (!strcmp(name, "resnet-tiny")) {
        *c = (struct resnet_config){.stem = RESNET_STEM_CIFAR, .bottleneck = 0, .stem_width = 8, .n_stages = 3,
                                    .blocks = {1, 1, 1}, .width = {8, 16, 32}, .image = 32, .classes = 10};
    } else if (!strcmp(name, "resnet18")) {
        *c = (struct resnet_config){.stem = RESNET_STEM_CIFAR, .stem_width = 64, .n_stages = 4, .blocks = {2, 2, 2, 2},
                                    .image = 32, .classes = 10};
        memcpy(c->width, w4, sizeof w4);
    } else if (!strcmp(name, "resnet50-cifar")) {
        *c = (struct resnet_config){.stem = RESNET_STEM_CIFAR, .bottleneck = 1, .stem_width = 64, .n_stages = 4,
                                    .blocks = {3, 4, 6, 3}, .image = 32, .classes = 10};
        memcpy(c->width, w4, sizeof w4);
    } else if (!strcmp(name, "resnet50")) {
        *c = (struct resnet_config){.stem = RESNET_STEM_IMAGENET, .bottleneck = 1, .stem_width = 64, .n_stages = 4,
                                    .blocks = {3, 4, 6, 3}, .image = 224, .classes = 1000};
        memcpy(c->width, w4, sizeof w4);
    } else if (!strcmp(name, "resnet152")) {
        *c = (struct resnet_config){.stem = RESNET_STEM_IMAGENET, .bottleneck = 1, .stem_width = 64, .n_stages = 4,
                                    .blocks = {3, 8, 36, 3}, .image = 224, .classes = 1000};
        memcpy(c->width, w4, sizeof w4);
    } else {
        return err_set(e, PLUMB_EUSAGE, "resnet preset '%s' unknown (expected %s)", name, resnet_preset_names());
    }
    snprintf(c->preset, sizeof c->preset, "%s", name);
    return resnet_config_validate(c, e);
}

int resnet_config_validate(const struct resnet_config *c, plumb_err *e)
{
    if (c->stem != RESNET_STEM_CIFAR && c->stem != RESNET_STEM_IMAGENET)
        return err_set(e, PLUMB_EUSAGE, "resnet config: stem %d (expected cifar or imagenet)", c->stem);
    if (c->n_stages < 1 || c->n_stages > RESNET_MAX_STAGES)
        return err_set(e, PLUMB_EUSAGE, "resnet config: %d stages (expected 1..%d)", c->n_stages, RESNET_MAX_STAGES);
    if (c->stem_width < 1 || c->stem_width > 4096)
        return err_set(e, PLUMB_EUSAGE, "resnet config: stem width %d (expected 1..4096)", c->stem_width);
    int nb = 0;
    for (int s = 0; s < c->n_stages; s++) {
        if (c->blocks[s] < 1 || c->blocks[s] > 64)
            return err_set(e, PLUMB_EUSAGE, "resnet config: stage %d has %d blocks (expected 1..64)", s, c->blocks[s]);
        if (c->width[s] < 1 || c->width[s] > 4096)
            return err_set(e, PLUMB_EUSAGE, "resnet config: stage %d width %d (expected 1..4096)", s, c->width[s]);
        nb += c->blocks[s];
    }
    if (nb > 128) return err_set(e, PLUMB_EUSAGE, "resnet config: %d blocks (at most 128)", nb);
    /* every stage after the first halves the side: the last must keep >= 1 pixel */
    int side = c->image / (c->stem == RESNET_STEM_IMAGENET ? 4 : 1) >> (c->n_stages - 1);
    if (c->image < 8 || c->image > 4096 || side < 1)
        return err_set(e, PLUMB_EUSAGE, "resnet config: image side %d (expected 8..4096, at least %d for %d stages)",
                       c->image, (c->stem == RESNET_STEM_IMAGENET ? 4 : 1) << (c->n_stages - 1), c->n_stages);
    if (c->classes < 2 || c->classes > 100000)
        return err_set(e, PLUMB_EUSAGE, "resnet config: %d classes (expected 2..100000)", c->classes);
    return PLUMB_OK;
}

void resnet_config_describe(const struct resnet_config *c, size_t n_params, char *buf, size_t n)
{
    char b[64] = "", w[96] = "";
    size_t ob = 0, ow = 0;
    for (int s = 0; s < c->n_stages; s++) {
        ob += (size_t)snprintf(b + ob, sizeof b - ob, "%s%d", s ? "," : "", c->blocks[s]);
        ow += (size_t)snprintf(w + ow, sizeof w - ow, "%s%d", s ? "," : "", c->width[s]);
    }
    char np[32];
    if (n_params >= 1000000) snprintf(np, sizeof np, "%.2f M", (double)n_params / 1e6);
    else snprintf(np, sizeof np, "%.1f k", (double)n_params / 1e3);
    snprintf(buf, n, "%s: %s stem %d, %s [%s] x %s, %dx%d, %d classes, %s parameters", c->preset[0] ? c->preset : "resnet",
             c->stem == RESNET_STEM_IMAGENET ? "imagenet" : "cifar", c->stem_width, c->bottleneck ? "bottleneck" : "basic",
             b, w, c->image, c->image, c->classes, np);
}

/* ---------------- the model ---------------- */

static size_t align_up(size_t x) { return (x + ALIGN_F - 1) / ALIGN_F * ALIGN_F; }

static int add_tensor(struct resnet_model *m, size_t *off, const char *name, size_t numel, int kind, plumb_err *e)
{
    int buf = kind == RESNET_T_RUNNING_MEAN || kind == RESNET_T_RUNNING_VAR;
    int *n = buf ? &m->n_bt : &m->n_t;
    if (*n >= (buf ? MAX_BUFFERS : MAX_TENSORS)) return err_set(e, PLUMB_EUSAGE, "resnet: too many tensors");
    struct resnet_tensor *t = buf ? &m->bt[(*n)++] : &m->t[(*n)++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->offset = *off;
    t->numel = numel;
    t->rows = 1;
    t->cols = (int)numel;
    t->kind = kind;
    *off = align_up(*off + numel);
    return PLUMB_OK;
}

static int add_conv(struct resnet_model *m, size_t *off, const char *name, struct rconv *cv, int H, int W, int C, int K,
                    int RS, int stride, int pad, plumb_err *e)
{
    if (train_conv_set(&cv->g, m->max_batch, H, W, C, K, RS, RS, stride, pad))
        return err_set(e, PLUMB_EUSAGE, "resnet: %s: a %dx%d window does not fit %dx%d", name, RS, RS, H, W);
    cv->w = *off;
    cv->numel = (size_t)K * RS * RS * C;
    cv->w16 = m->n_w16; /* each mirror on its own 256-byte boundary, as the library's staging copies */
    m->n_w16 += (cv->numel + 127) / 128 * 128;
    char nm[48];
    snprintf(nm, sizeof nm, "%s.weight", name);
    int rc = add_tensor(m, off, nm, (size_t)K * RS * RS * C, RESNET_T_CONV, e);
    if (!rc) m->t[m->n_t - 1].rows = K, m->t[m->n_t - 1].cols = RS * RS * C;
    return rc;
}

static int add_bn(struct resnet_model *m, size_t *off, size_t *boff, const char *name, struct rbn *bn, int C,
                  plumb_err *e)
{
    char nm[48];
    bn->C = C;
    if (C > m->maxC) m->maxC = C;
    bn->gamma = *off;
    snprintf(nm, sizeof nm, "%s.weight", name);
    int rc = add_tensor(m, off, nm, (size_t)C, RESNET_T_BN_WEIGHT, e);
    bn->beta = *off;
    snprintf(nm, sizeof nm, "%s.bias", name);
    if (!rc) rc = add_tensor(m, off, nm, (size_t)C, RESNET_T_BN_BIAS, e);
    bn->rmean = *boff;
    snprintf(nm, sizeof nm, "%s.running_mean", name);
    if (!rc) rc = add_tensor(m, boff, nm, (size_t)C, RESNET_T_RUNNING_MEAN, e);
    bn->rvar = *boff;
    snprintf(nm, sizeof nm, "%s.running_var", name);
    if (!rc) rc = add_tensor(m, boff, nm, (size_t)C, RESNET_T_RUNNING_VAR, e);
    return rc;
}

int rn_zalloc(struct resnet_model *m, void **p, size_t bytes, plumb_err *e)
{
    int rc = dev_alloc(m->d, bytes ? bytes : 8, p, e);
    if (rc) return err_wrap(e, "resnet: allocating %zu bytes", bytes);
    return m->d->be->memset_async(m->d, NULL, *p, 0, bytes ? bytes : 8, e);
}
/* activation buffer of [MB, H, W, C] floats */
static int act_alloc(struct resnet_model *m, float **p, int H, int W, int C, plumb_err *e)
{
    size_t n = (size_t)m->max_batch * H * W * C;
    if (n > m->max_act) m->max_act = n;
    return rn_zalloc(m, (void **)p, n * sizeof(float), e);
}
/* an fp32 activation of the trunk: none with the 16-bit pipeline (which
 * holds a16_alloc's 16-bit tensor instead), but its size counts for the
 * gradient slots either way */
static int act32_alloc(struct resnet_model *m, float **p, int H, int W, int C, plumb_err *e)
{
    size_t n = (size_t)m->max_batch * H * W * C;
    if (n > m->max_act) m->max_act = n;
    return m->act16 ? PLUMB_OK : rn_zalloc(m, (void **)p, n * sizeof(float), e);
}
/* a mirror of [MB, H, W, C] 16-bit values (only when the model has them),
 * or the 16-bit pipeline's tensor */
static int act16_alloc(struct resnet_model *m, uint16_t **p, int H, int W, int C, plumb_err *e)
{
    if (!m->has16 && !m->act16) return PLUMB_OK;
    return rn_zalloc(m, (void **)p, (size_t)m->max_batch * H * W * C * sizeof(uint16_t), e);
}
/* a tensor only the 16-bit pipeline holds */
static int a16_alloc(struct resnet_model *m, uint16_t **p, int H, int W, int C, plumb_err *e)
{
    if (!m->act16) return PLUMB_OK;
    return rn_zalloc(m, (void **)p, (size_t)m->max_batch * H * W * C * sizeof(uint16_t), e);
}
static int bn_alloc(struct resnet_model *m, struct rbn *bn, plumb_err *e)
{
    int rc = rn_zalloc(m, (void **)&bn->mean, (size_t)bn->C * sizeof(float), e);
    if (!rc) rc = rn_zalloc(m, (void **)&bn->rstd, (size_t)bn->C * sizeof(float), e);
    return rc;
}

void resnet_free(struct resnet_model *m)
{
    if (!m) return;
    struct dev *d = m->d;
    void *ps[] = {m->params, m->grads, m->wwork, m->bufs, m->in_x, m->labels, m->stem_c, m->stem_a, m->pool_y,
                  m->pool_idx, m->stem_bn.mean, m->stem_bn.rstd, m->pooled, m->dpooled, m->logits, m->dlogits,
                  m->part, m->mdy, m->ev_rstd, m->sc, m->loss_ps, m->pred, m->gshard, m->w16, m->stem_a16, m->g16,
                  m->stem_c16, m->pool16, m->last32};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        if (ps[i]) dev_free(d, ps[i]);
    for (int i = 0; i < N_SLOTS; i++) {
        if (m->slot[i]) dev_free(d, m->slot[i]);
        if (m->slot16[i]) dev_free(d, m->slot16[i]);
    }
    for (int b = 0; m->blk && b < m->nblocks; b++) {
        struct rblock *k = &m->blk[b];
        void *bs[] = {k->cx[0], k->cx[1], k->cx[2], k->bn[0].mean, k->bn[0].rstd, k->bn[1].mean, k->bn[1].rstd,
                      k->bn[2].mean, k->bn[2].rstd, k->ax[0], k->ax[1], k->sx, k->sa, k->out, k->sbn.mean,
                      k->sbn.rstd, k->ax16[0], k->ax16[1], k->out16, k->cx16[0], k->cx16[1], k->cx16[2],
                      k->sx16, k->sa16};
        for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++)
            if (bs[i]) dev_free(d, bs[i]);
    }
    free(m->blk);
    free(m->hpart);
    free(m);
}

/* The tensor list and the layers' geometry (no device memory): tensors in
 * forward order. */
static int layout(struct resnet_model *m, plumb_err *e)
{
    const struct resnet_config *c = &m->c;
    const int max_batch = m->max_batch;
    int rc = PLUMB_OK;
    size_t off = 0, boff = 0;
    int side = c->image, C = 3;
    if (c->stem == RESNET_STEM_IMAGENET)
        rc = add_conv(m, &off, "conv1", &m->stem, side, side, C, c->stem_width, 7, 2, 3, e);
    else
        rc = add_conv(m, &off, "conv1", &m->stem, side, side, C, c->stem_width, 3, 1, 1, e);
    if (!rc) rc = add_bn(m, &off, &boff, "bn1", &m->stem_bn, c->stem_width, e);
    side = m->stem.g.P;
    C = c->stem_width;
    if (!rc && c->stem == RESNET_STEM_IMAGENET) {
        m->pool = 1;
        if (train_conv_set(&m->pg, max_batch, side, side, C, C, 3, 3, 2, 1))
            rc = err_set(e, PLUMB_EUSAGE, "resnet: the stem's max-pool does not fit %dx%d", side, side);
        side = m->pg.P;
    }
    m->stem_end = off;
    int bi = 0;
    for (int s = 0; s < c->n_stages && !rc; s++)
        for (int j = 0; j < c->blocks[s] && !rc; j++, bi++) {
            struct rblock *k = &m->blk[bi];
            const int stride = s > 0 && j == 0 ? 2 : 1, planes = c->width[s];
            const int Cout = c->bottleneck ? 4 * planes : planes;
            char nm[48];
            k->p0 = off;
            k->nconv = c->bottleneck ? 3 : 2;
            /* a block's conv weights first (decayed), then its BN
             * parameters (not): two optimizer ranges per block
             * (train/optim.h), one grad-ready bucket */
            if (c->bottleneck) {
                snprintf(nm, sizeof nm, "layer%d.%d.conv1", s + 1, j);
                rc = add_conv(m, &off, nm, &k->conv[0], side, side, C, planes, 1, 1, 0, e);
                snprintf(nm, sizeof nm, "layer%d.%d.conv2", s + 1, j);
                if (!rc) rc = add_conv(m, &off, nm, &k->conv[1], side, side, planes, planes, 3, stride, 1, e);
                const int so = k->conv[1].g.P;
                snprintf(nm, sizeof nm, "layer%d.%d.conv3", s + 1, j);
                if (!rc) rc = add_conv(m, &off, nm, &k->conv[2], so, so, planes, Cout, 1, 1, 0, e);
            } else {
                snprintf(nm, sizeof nm, "layer%d.%d.conv1", s + 1, j);
                rc = add_conv(m, &off, nm, &k->conv[0], side, side, C, planes, 3, stride, 1, e);
                const int so = k->conv[0].g.P;
                snprintf(nm, sizeof nm, "layer%d.%d.conv2", s + 1, j);
                if (!rc) rc = add_conv(m, &off, nm, &k->conv[1], so, so, planes, planes, 3, 1, 1, e);
            }
            k->proj = stride != 1 || C != Cout;
            if (k->proj && !rc) {
                snprintf(nm, sizeof nm, "layer%d.%d.downsample.0", s + 1, j);
                rc = add_conv(m, &off, nm, &k->sc, side, side, C, Cout, 1, stride, 0, e);
            }
            for (int i = 0; i < k->nconv && !rc; i++) {
                snprintf(nm, sizeof nm, "layer%d.%d.bn%d", s + 1, j, i + 1);
                rc = add_bn(m, &off, &boff, nm, &k->bn[i], k->conv[i].g.K, e);
            }
            if (k->proj && !rc) {
                snprintf(nm, sizeof nm, "layer%d.%d.downsample.1", s + 1, j);
                rc = add_bn(m, &off, &boff, nm, &k->sbn, Cout, e);
            }
            k->p1 = off;
            side = k->conv[k->nconv - 1].g.P;
            C = Cout;
        }
    m->feat = C;
    m->fc_w = off;
    if (!rc) rc = add_tensor(m, &off, "fc.weight", (size_t)c->classes * C, RESNET_T_FC_WEIGHT, e);
    if (!rc) m->t[m->n_t - 1].rows = c->classes, m->t[m->n_t - 1].cols = C;
    m->fc_b = off;
    if (!rc) rc = add_tensor(m, &off, "fc.bias", (size_t)c->classes, RESNET_T_FC_BIAS, e);
    m->n_params = off;
    m->n_bufs = boff;
    return rc;
}

int resnet_create(struct dev *d, const struct resnet_config *c, int max_batch, dtype_t precision,
                  struct resnet_model **out, plumb_err *e)
{
    *out = NULL;
    int rc = resnet_config_validate(c, e);
    if (rc) return rc;
    const struct train_ops *T = d->ops->train;
    if (!T || !T->conv2d_fwd || !T->bn_stats || !T->cls_xent)
        return err_set(e, PLUMB_EUNSUPPORTED, "resnet: device %s has no vision training ops", d->label);
    if (max_batch < 1 || max_batch > (1 << 20))
        return err_set(e, PLUMB_EUSAGE, "resnet: batch %d (expected 1..1048576)", max_batch);
    if (precision != DT_F32 && precision != DT_BF16 && precision != DT_F16)
        return err_set(e, PLUMB_EUSAGE, "resnet: precision %s (expected fp32, bf16 or fp16)", dtype_name(precision));
    struct resnet_model *m = calloc(1, sizeof *m);
    if (!m) return err_set(e, PLUMB_ENOMEM, "resnet: out of host memory");
    m->d = d;
    m->T = T;
    m->c = *c;
    m->prec = precision;
    m->max_batch = max_batch;
    for (int s = 0; s < c->n_stages; s++) m->nblocks += c->blocks[s];
    m->blk = calloc((size_t)m->nblocks, sizeof *m->blk);
    if (!m->blk) {
        free(m);
        return err_set(e, PLUMB_ENOMEM, "resnet: out of host memory");
    }
    rc = layout(m, e);
    m->has16 = precision != DT_F32 && T->conv2d_fwd16 && T->conv2d_bwd_data16 && T->conv2d_bwd_filter16 &&
               T->bn_apply16 && T->bn_bwd_data16 && d->ops->cast;
    if (!rc) rc = resnet16_wanted(d, precision, &m->act16, e);
    if (!rc) rc = resnet16_mask_self(&m->mask_self, e);
    if (!rc) rc = resnet16_bn_onepass(T, m->act16, &m->bn1p, e);
    if (!rc) rc = resnet16_bn_apply2(T, m->act16, &m->bn2, e);
    if (m->act16) m->has16 = 0; /* no mirrors: the 16-bit tensors are the activations */
    /* ---- buffers ---- */
    const size_t fs = sizeof(float), MB = (size_t)max_batch;
    if (!rc) rc = rn_zalloc(m, (void **)&m->params, m->n_params * fs, e);
    if (!rc) rc = rn_zalloc(m, (void **)&m->grads, m->n_params * fs, e);
    if (!rc && precision != DT_F32) rc = rn_zalloc(m, (void **)&m->wwork, m->n_params * fs, e);
    if (!rc) rc = rn_zalloc(m, (void **)&m->bufs, m->n_bufs * fs, e);
    if (!rc) rc = act_alloc(m, &m->in_x, c->image, c->image, 3, e);
    if (!rc) rc = rn_zalloc(m, (void **)&m->labels, MB * sizeof(int32_t), e);
    if (!rc) rc = act32_alloc(m, &m->stem_c, m->stem.g.P, m->stem.g.Q, c->stem_width, e);
    if (!rc) rc = a16_alloc(m, &m->stem_c16, m->stem.g.P, m->stem.g.Q, c->stem_width, e);
    if (!rc) rc = act32_alloc(m, &m->stem_a, m->stem.g.P, m->stem.g.Q, c->stem_width, e);
    if (!rc) rc = act16_alloc(m, &m->stem_a16, m->stem.g.P, m->stem.g.Q, c->stem_width, e);
    if (!rc && (m->has16 || m->act16)) rc = rn_zalloc(m, (void **)&m->w16, m->n_w16 * sizeof(uint16_t), e);
    if (!rc) rc = bn_alloc(m, &m->stem_bn, e);
    if (!rc && m->pool) {
        rc = act32_alloc(m, &m->pool_y, m->pg.P, m->pg.Q, m->pg.C, e);
        if (!rc) rc = a16_alloc(m, &m->pool16, m->pg.P, m->pg.Q, m->pg.C, e);
        if (!rc) rc = rn_zalloc(m, (void **)&m->pool_idx, MB * m->pg.P * m->pg.Q * m->pg.C * sizeof(int32_t), e);
    }
    for (int b = 0; b < m->nblocks && !rc; b++) {
        struct rblock *k = &m->blk[b];
        for (int i = 0; i < k->nconv && !rc; i++) {
            const struct train_conv *g = &k->conv[i].g;
            rc = act32_alloc(m, &k->cx[i], g->P, g->Q, g->K, e);
            if (!rc) rc = a16_alloc(m, &k->cx16[i], g->P, g->Q, g->K, e);
            if (!rc && i < k->nconv - 1) rc = act32_alloc(m, &k->ax[i], g->P, g->Q, g->K, e);
            if (!rc && i < k->nconv - 1) rc = act16_alloc(m, &k->ax16[i], g->P, g->Q, g->K, e);
            if (!rc) rc = bn_alloc(m, &k->bn[i], e);
        }
        const struct train_conv *last = &k->conv[k->nconv - 1].g;
        if (!rc) rc = act32_alloc(m, &k->out, last->P, last->Q, last->K, e);
        if (!rc) rc = act16_alloc(m, &k->out16, last->P, last->Q, last->K, e);
        if (!rc && b == m->nblocks - 1 && m->act16) /* the pool's fp32 input and its gradient */
            rc = rn_zalloc(m, (void **)&m->last32, (size_t)max_batch * last->P * last->Q * last->K * fs, e);
        if (!rc && k->proj) {
            rc = act32_alloc(m, &k->sx, k->sc.g.P, k->sc.g.Q, k->sc.g.K, e);
            if (!rc) rc = a16_alloc(m, &k->sx16, k->sc.g.P, k->sc.g.Q, k->sc.g.K, e);
            if (!rc) rc = act32_alloc(m, &k->sa, k->sc.g.P, k->sc.g.Q, k->sc.g.K, e);
            if (!rc) rc = a16_alloc(m, &k->sa16, k->sc.g.P, k->sc.g.Q, k->sc.g.K, e);
            if (!rc) rc = bn_alloc(m, &k->sbn, e);
        }
    }
    if (!rc) rc = act_alloc(m, &m->pooled, 1, 1, m->feat, e);
    if (!rc) rc = act_alloc(m, &m->dpooled, 1, 1, m->feat, e);
    if (!rc) rc = act_alloc(m, &m->logits, 1, 1, c->classes, e);
    if (!rc) rc = act_alloc(m, &m->dlogits, 1, 1, c->classes, e);
    for (int i = 0; i < N_SLOTS && !rc; i++)
        rc = m->act16 ? rn_zalloc(m, (void **)&m->slot16[i], m->max_act * sizeof(uint16_t), e)
                      : rn_zalloc(m, (void **)&m->slot[i], m->max_act * fs, e);
    if (!rc && m->has16) rc = rn_zalloc(m, (void **)&m->g16, m->max_act * sizeof(uint16_t), e);
    if (!rc) rc = rn_zalloc(m, &m->part, train_bn_part_bytes(2 * m->maxC, 1), e);
    if (!rc && !(m->hpart = malloc(train_bn_part_bytes(2 * m->maxC, 1))))
        rc = err_set(e, PLUMB_ENOMEM, "resnet: out of host memory");
    if (!rc) rc = rn_zalloc(m, (void **)&m->mdy, 2 * (size_t)m->maxC * fs, e);
    if (!rc) rc = rn_zalloc(m, (void **)&m->ev_rstd, (size_t)m->maxC * fs, e);
    if (!rc) rc = rn_zalloc(m, (void **)&m->sc, 2 * sizeof(double), e);
    if (!rc) rc = rn_zalloc(m, (void **)&m->loss_ps, MB * fs, e);
    if (!rc) rc = rn_zalloc(m, (void **)&m->pred, MB * sizeof(int32_t), e);
    if (!rc) rc = dev_sync(d, e);
    if (rc) {
        resnet_free(m);
        return rc;
    }
    *out = m;
    return PLUMB_OK;
}

int resnet_config_count_params(const struct resnet_config *c, size_t *n, plumb_err *e)
{
    *n = 0;
    int rc = resnet_config_validate(c, e);
    if (rc) return rc;
    struct resnet_model *m = calloc(1, sizeof *m);
    if (!m) return err_set(e, PLUMB_ENOMEM, "resnet: out of host memory");
    m->c = *c;
    m->max_batch = 1;
    for (int s = 0; s < c->n_stages; s++) m->nblocks += c->blocks[s];
    m->blk = calloc((size_t)m->nblocks, sizeof *m->blk);
    rc = m->blk ? layout(m, e) : err_set(e, PLUMB_ENOMEM, "resnet: out of host memory");
    for (int i = 0; !rc && i < m->n_t; i++) *n += m->t[i].numel;
    free(m->blk);
    free(m);
    return rc;
}

/* ---------------- accessors ---------------- */

const struct resnet_config *resnet_config_of(const struct resnet_model *m) { return &m->c; }
size_t resnet_n_params(const struct resnet_model *m) { return m->n_params; }
float *resnet_params(struct resnet_model *m) { return m->params; }
float *resnet_grads(struct resnet_model *m) { return m->grads; }
int resnet_n_tensors(const struct resnet_model *m) { return m->n_t; }
const struct resnet_tensor *resnet_tensor(const struct resnet_model *m, int i)
{
    return i >= 0 && i < m->n_t ? &m->t[i] : NULL;
}
size_t resnet_n_buffers(const struct resnet_model *m) { return m->n_bufs; }
float *resnet_buffers(struct resnet_model *m) { return m->bufs; }
int resnet_n_buffer_tensors(const struct resnet_model *m) { return m->n_bt; }
const struct resnet_tensor *resnet_buffer_tensor(const struct resnet_model *m, int i)
{
    return i >= 0 && i < m->n_bt ? &m->bt[i] : NULL;
}
int resnet_max_batch(const struct resnet_model *m) { return m->max_batch; }
struct dev *resnet_dev(struct resnet_model *m) { return m->d; }
const double *resnet_loss_dev(const struct resnet_model *m) { return m->sc; }

int resnet_grad_buckets(const struct resnet_model *m, size_t *off, size_t *len, int max)
{
    /* backward order: the head, the blocks last to first, the stem (the
     * ranges the hook reports); more than max: neighbours merged, evenly */
    const int n = m->nblocks + 2;
    if (max < 1) return 0;
    const int k = n < max ? n : max;
    for (int g = 0; g < k; g++) {
        const int first = g * n / k, last = (g + 1) * n / k - 1; /* bucket indices of group g */
        size_t hi = 0, lo = 0;
        for (int i = first; i <= last; i++) {
            size_t a, b;
            if (i == 0) a = m->fc_w, b = m->n_params;
            else if (i == n - 1) a = 0, b = m->stem_end;
            else a = m->blk[m->nblocks - i].p0, b = m->blk[m->nblocks - i].p1;
            if (i == first) hi = b;
            lo = a;
        }
        off[g] = lo;
        len[g] = hi - lo;
    }
    return k;
}

void resnet_set_grad_ready_hook(struct resnet_model *m, resnet_grad_ready_fn fn, void *ctx)
{
    m->ready = fn;
    m->ready_ctx = ctx;
}

/* ---------------- init ---------------- */

static int fill_host(struct resnet_model *m, float *dst, size_t numel, uint64_t seed, uint32_t id, float a, float b,
                     int uniform, plumb_err *e)
{
    float *h = malloc((numel ? numel : 1) * sizeof(float));
    if (!h) return err_set(e, PLUMB_ENOMEM, "resnet init: out of host memory");
    for (size_t k = 0; k < numel; k++) {
        float r = uniform ? philox_uniform_at(seed, RNG_INIT, id, 0, k) : philox_normal_at(seed, RNG_INIT, id, 0, k);
        h[k] = fmaf(a, r, b);
    }
    int rc = dev_upload(m->d, dst, h, numel * sizeof(float), e);
    free(h);
    return rc;
}

int resnet_init(struct resnet_model *m, uint64_t seed, plumb_err *e)
{
    struct dev *d = m->d;
    const int on_dev = d->ops->rng_normal && d->ops->rng_uniform;
    int rc = d->be->memset_async(d, NULL, m->params, 0, m->n_params * sizeof(float), e);
    if (!rc) rc = d->be->memset_async(d, NULL, m->bufs, 0, m->n_bufs * sizeof(float), e);
    for (int i = 0; i < m->n_t && !rc; i++) {
        const struct resnet_tensor *t = &m->t[i];
        float *p = m->params + t->offset;
        if (t->kind == RESNET_T_BN_WEIGHT) { /* 1 = fmaf(0, 0, 1) */
            rc = m->T->affine(d, NULL, p, p, t->numel, 0.0f, 1.0f, e);
            continue;
        }
        if (t->kind == RESNET_T_BN_BIAS) continue; /* 0 */
        int uniform = t->kind == RESNET_T_FC_WEIGHT || t->kind == RESNET_T_FC_BIAS;
        float a, b = 0.0f;
        if (uniform) {
            float bound = (float)(1.0 / sqrt((double)m->feat));
            a = 2.0f * bound;
            b = -bound;
        } else { /* conv [K, R, S, C]: fan_out = K R S = numel / C */
            const struct rconv *cv = NULL;
            if (t->offset == m->stem.w) cv = &m->stem;
            for (int k = 0; k < m->nblocks && !cv; k++) {
                struct rblock *bl = &m->blk[k];
                for (int j = 0; j < bl->nconv && !cv; j++)
                    if (bl->conv[j].w == t->offset) cv = &bl->conv[j];
                if (!cv && bl->proj && bl->sc.w == t->offset) cv = &bl->sc;
            }
            if (!cv) return err_set(e, PLUMB_EINTERNAL, "resnet init: no conv for %s", t->name);
            a = (float)sqrt(2.0 / ((double)cv->g.K * cv->g.R * cv->g.S));
        }
        if (!on_dev) {
            rc = fill_host(m, p, t->numel, seed, (uint32_t)i, a, b, uniform, e);
            continue;
        }
        struct rng_stream st = {seed, (uint32_t)RNG_INIT, (uint32_t)i, 0};
        rc = uniform ? d->ops->rng_uniform(d, NULL, &st, 0, p, t->numel) : d->ops->rng_normal(d, NULL, &st, 0, p, t->numel);
        if (rc && e && !e->msg[0]) err_set(e, rc, "resnet init: rng op failed for %s", t->name);
        if (!rc) rc = m->T->affine(d, NULL, p, p, t->numel, a, b, e);
    }
    for (int i = 0; i < m->n_bt && !rc; i++)
        if (m->bt[i].kind == RESNET_T_RUNNING_VAR)
            rc = m->T->affine(d, NULL, m->bufs + m->bt[i].offset, m->bufs + m->bt[i].offset, m->bt[i].numel, 0.0f, 1.0f, e);
    if (!rc) rc = dev_sync(d, e);
    return rc;
}

/* ---------------- batch ---------------- */

int resnet_check_batch(const struct resnet_model *m, const struct resnet_batch *b, plumb_err *e)
{
    if (b->B < 1 || b->B > m->max_batch)
        return err_set(e, PLUMB_EUSAGE, "resnet batch: B=%d (expected 1..%d)", b->B, m->max_batch);
    if (b->n_valid < 0 || b->n_valid > b->B)
        return err_set(e, PLUMB_EUSAGE, "resnet batch: n_valid=%d (expected 0..%d)", b->n_valid, b->B);
    if (b->global_valid < 0) return err_set(e, PLUMB_EUSAGE, "resnet batch: global_valid %lld", (long long)b->global_valid);
    if (!b->x && b->n_valid) return err_set(e, PLUMB_EUSAGE, "resnet batch: no images");
    if (b->labels && !b->on_device) /* a device batch's labels were checked where they were read */
        for (int i = 0; i < b->n_valid; i++)
            if (b->labels[i] < 0 || b->labels[i] >= m->c.classes)
                return err_set(e, PLUMB_EUSAGE, "resnet batch: sample %d label %d (expected 0..%d)", i, (int)b->labels[i],
                               m->c.classes - 1);
    return PLUMB_OK;
}

/* ---------------- one step's context ---------------- */

int rn_golden(const struct resnet_model *m) { return m->d->numerics == NUMERICS_GOLDEN; }

/* all-reduce of a BN part of K sums (a no-op without sync) */
int rn_sync_part(struct step *st, int K, plumb_err *e)
{
    if (!st->synced) return PLUMB_OK;
    struct resnet_model *m = st->m;
    if (rn_golden(m)) {
        size_t bytes = train_bn_part_bytes(K, 1);
        int rc = dev_download(m->d, m->hpart, m->part, bytes, e);
        if (!rc) rc = st->sy->allreduce(st->sy->ctx, m->hpart, 2 * K, 1, e);
        if (!rc) rc = dev_upload(m->d, m->part, m->hpart, bytes, e);
        return rc;
    }
    return st->sy->allreduce(st->sy->ctx, m->part, K, 0, e);
}

int rn_zero_part(struct step *st, int K, plumb_err *e)
{
    struct resnet_model *m = st->m;
    return m->d->be->memset_async(m->d, NULL, m->part, 0, train_bn_part_bytes(K, rn_golden(m)), e);
}

/* bn (+ z) (+ ReLU) into y, and into its mirror y16 too when the step
 * keeps mirrors (y16 may be NULL); the 16-bit pipeline: x16 (+ z16) into
 * y16 only */
static int bn_apply_to(struct step *st, const float *x, const uint16_t *x16, const float *mean, const float *rstd,
                       const float *gamma, const float *beta, const float *z, const uint16_t *z16, float *y,
                       uint16_t *y16, size_t M, int C, int relu, plumb_err *e)
{
    struct resnet_model *m = st->m;
    if (st->a16)
        return m->T->bn_apply16o(m->d, NULL, x16, mean, rstd, gamma, beta, z16, y16, M, C, relu, m->prec, e);
    if (st->m16 && y16)
        return m->T->bn_apply16(m->d, NULL, x, mean, rstd, gamma, beta, z, y, y16, M, C, relu, m->prec, e);
    return m->T->bn_apply(m->d, NULL, x, mean, rstd, gamma, beta, z, y, M, C, relu, m->prec, e);
}

/* part = bn_stats of x (or x16), sums of x (mean NULL) or of squared deviations */
static int bn_stats_of(struct step *st, const float *x, const uint16_t *x16, size_t M, int C, const float *mean,
                       plumb_err *e)
{
    struct resnet_model *m = st->m;
    if (st->a16) return m->T->bn_stats16o(m->d, NULL, x16, M, C, mean, m->part, m->prec, e);
    return m->T->bn_stats(m->d, NULL, x, M, C, mean, m->part, e);
}

int rn_bn_forward(struct step *st, struct rbn *bn, const float *x, const uint16_t *x16, float *y, uint16_t *y16,
                  int HW, const float *z, const uint16_t *z16, int relu, plumb_err *e)
{
    struct resnet_model *m = st->m;
    const struct train_ops *T = m->T;
    struct dev *d = m->d;
    const size_t M = (size_t)st->B * HW;
    const float *gamma = m->params + bn->gamma, *beta = m->params + bn->beta;
    float *rm = m->bufs + bn->rmean, *rv = m->bufs + bn->rvar;
    int rc;
    if (!st->train) {
        if (!M) return PLUMB_OK;
        rc = T->bn_rstd(d, NULL, rv, bn->C, BN_EPS, m->ev_rstd, e);
        if (!rc) rc = bn_apply_to(st, x, x16, rm, m->ev_rstd, gamma, beta, z, z16, y, y16, M, bn->C, relu, e);
        return rc;
    }
    const int64_t count = st->synced ? st->gvalid * HW : (int64_t)M;
    if (count < 2)
        return err_set(e, PLUMB_EUSAGE, "resnet: BatchNorm over %lld value(s) per channel (training needs at least 2: "
                       "a larger batch)", (long long)count);
    if (st->a16 && m->bn1p) {
        /* one pass (never golden: a16 is fast only): the sums of x - shift
         * and of their squares, one all-reduce of 2C sums. The shift is the
         * running mean, the same on every rank (it moves only by the global
         * statistics), read by bn_meanvar before it updates it in place. */
        rc = M ? T->bn_stats1p16o(d, NULL, x16, M, bn->C, rm, m->part, m->prec, e) : rn_zero_part(st, 2 * bn->C, e);
        if (!rc) rc = rn_sync_part(st, 2 * bn->C, e);
        if (!rc)
            rc = T->bn_meanvar(d, NULL, m->part, bn->C, count, BN_EPS, BN_MOMENTUM, rm, bn->mean, bn->rstd,
                               st->keep_running ? NULL : rm, st->keep_running ? NULL : rv, e);
        if (!rc && M && (y || y16))
            rc = bn_apply_to(st, x, x16, bn->mean, bn->rstd, gamma, beta, z, z16, y, y16, M, bn->C, relu, e);
        if (!rc) resnet16_bn1p_count++;
        return rc;
    }
    rc = M ? bn_stats_of(st, x, x16, M, bn->C, NULL, e) : rn_zero_part(st, bn->C, e);
    if (!rc) rc = rn_sync_part(st, bn->C, e);
    if (!rc) rc = T->bn_mean(d, NULL, m->part, bn->C, count, bn->mean, e);
    if (!rc) rc = M ? bn_stats_of(st, x, x16, M, bn->C, bn->mean, e) : rn_zero_part(st, bn->C, e);
    if (!rc) rc = rn_sync_part(st, bn->C, e);
    if (!rc)
        rc = T->bn_var(d, NULL, m->part, bn->C, count, BN_EPS, BN_MOMENTUM, bn->mean, bn->rstd,
                       st->keep_running ? NULL : rm, st->keep_running ? NULL : rv, e);
    if (!rc && M && (y || y16))
        rc = bn_apply_to(st, x, x16, bn->mean, bn->rstd, gamma, beta, z, z16, y, y16, M, bn->C, relu, e);
    return rc;
}

/* x16: x's mirror or NULL */
static int conv_forward(struct step *st, const struct rconv *cv, const float *x, const uint16_t *x16, float *y,
                        plumb_err *e)
{
    if (!st->B) return PLUMB_OK;
    struct train_conv g = cv->g;
    g.N = st->B;
    if (st->m16)
        return st->m->T->conv2d_fwd16(st->m->d, NULL, &g, x, x16, st->W + cv->w, st->m->w16 + cv->w16, y,
                                      st->m->prec, e);
    return st->m->T->conv2d_fwd(st->m->d, NULL, &g, x, st->W + cv->w, y, st->m->prec, e);
}

/* the conv weights' mirrors from the rounded working copy (exact) */
static int mirror_one(struct resnet_model *m, const struct rconv *cv, plumb_err *e)
{
    if (m->d->ops->cast(m->d, NULL, m->wwork + cv->w, DT_F32, m->w16 + cv->w16, m->prec, cv->numel))
        return err_set(e, PLUMB_EINTERNAL, "resnet: the %s mirror of a conv weight (%zu values at %zu) failed",
                       dtype_name(m->prec), cv->numel, cv->w);
    return PLUMB_OK;
}
static int mirror_weights(struct resnet_model *m, plumb_err *e)
{
    int rc = mirror_one(m, &m->stem, e);
    for (int b = 0; b < m->nblocks && !rc; b++) {
        const struct rblock *k = &m->blk[b];
        for (int i = 0; i < k->nconv && !rc; i++) rc = mirror_one(m, &k->conv[i], e);
        if (!rc && k->proj) rc = mirror_one(m, &k->sc, e);
    }
    return rc;
}

/* the stem and the blocks with fp32 activations (and 16-bit mirrors) */
static int trunk_forward(struct step *st, const float **last, plumb_err *e)
{
    struct resnet_model *m = st->m;
    const struct train_ops *T = m->T;
    struct dev *d = m->d;
    const int B = st->B;
    int rc = PLUMB_OK;
    const int shw = m->stem.g.P * m->stem.g.Q;
    if (!rc) rc = conv_forward(st, &m->stem, m->in_x, NULL, m->stem_c, e);
    if (!rc) rc = rn_bn_forward(st, &m->stem_bn, m->stem_c, NULL, m->stem_a, m->stem_a16, shw, NULL, NULL, 1, e);
    float *cur = m->stem_a;
    uint16_t *cur16 = m->pool ? NULL : m->stem_a16;
    if (!rc && m->pool && B) {
        struct train_conv g = m->pg;
        g.N = B;
        rc = T->maxpool_fwd(d, NULL, &g, m->stem_a, m->pool_y, m->pool_idx, e);
    }
    if (m->pool) cur = m->pool_y;
    for (int b = 0; b < m->nblocks && !rc; b++) {
        struct rblock *k = &m->blk[b];
        k->in = cur;
        k->in16 = cur16;
        const float *x = cur;
        const uint16_t *x16 = cur16;
        for (int i = 0; i < k->nconv - 1 && !rc; i++) {
            const struct train_conv *g = &k->conv[i].g;
            rc = conv_forward(st, &k->conv[i], x, x16, k->cx[i], e);
            if (!rc)
                rc = rn_bn_forward(st, &k->bn[i], k->cx[i], NULL, k->ax[i], k->ax16[i], g->P * g->Q, NULL, NULL, 1, e);
            x = k->ax[i];
            x16 = k->ax16[i];
        }
        const int L = k->nconv - 1;
        const struct train_conv *g = &k->conv[L].g;
        if (!rc) rc = conv_forward(st, &k->conv[L], x, x16, k->cx[L], e);
        const float *z = k->in;
        if (!rc && k->proj) {
            rc = conv_forward(st, &k->sc, k->in, k->in16, k->sx, e);
            if (!rc) rc = rn_bn_forward(st, &k->sbn, k->sx, NULL, k->sa, NULL, k->sc.g.P * k->sc.g.Q, NULL, NULL, 0, e);
            z = k->sa;
        }
        if (!rc) rc = rn_bn_forward(st, &k->bn[L], k->cx[L], NULL, k->out, k->out16, g->P * g->Q, z, NULL, 1, e);
        cur = k->out;
        cur16 = k->out16;
    }
    *last = cur;
    return rc;
}

static int forward(struct step *st, plumb_err *e)
{
    struct resnet_model *m = st->m;
    const struct train_ops *T = m->T;
    struct dev *d = m->d;
    const int B = st->B;
    int rc = PLUMB_OK;
    if (m->act16 && (rn_golden(m) || st->folding))
        return err_set(e, PLUMB_EUSAGE, "resnet: the model holds 16-bit activations only (made for fast %s "
                       "numerics), so it cannot run a golden step; make it under golden numerics, or with "
                       "PLUMB_RESNET_ACT16=0", dtype_name(m->prec));
    if (m->prec != DT_F32) rc = T->round_fp32(d, NULL, m->params, m->wwork, m->n_params, m->prec, e);
    st->W = m->prec != DT_F32 ? m->wwork : m->params;
    st->a16 = m->act16;
    st->m16 = m->has16 && !rn_golden(m) && !st->folding;
    if (!rc && (st->m16 || st->a16)) rc = mirror_weights(m, e);
    const float *cur = NULL;
    if (st->a16) {
        if (!rc) rc = resnet16_trunk_forward(st, &cur, e);
    } else if (!rc) {
        rc = trunk_forward(st, &cur, e);
    }
    if (!rc && B) {
        const struct rblock *k = &m->blk[m->nblocks - 1];
        const struct train_conv *g = &k->conv[k->nconv - 1].g;
        rc = T->avgpool_fwd(d, NULL, cur, m->pooled, B, g->P * g->Q, m->feat, m->prec, e);
        if (!rc)
            rc = T->linear_fwd(d, NULL, m->pooled, st->W + m->fc_w, st->W + m->fc_b, m->logits, B, m->feat,
                               m->c.classes, 0, m->prec, e);
    }
    return rc;
}

/* ---------------- backward ---------------- */

static int slot_take(struct resnet_model *m, float **p, plumb_err *e)
{
    for (int i = 0; i < N_SLOTS; i++)
        if (!m->slot_used[i]) {
            m->slot_used[i] = 1;
            *p = m->slot[i];
            return PLUMB_OK;
        }
    return err_set(e, PLUMB_EINTERNAL, "resnet: out of gradient slots");
}
static void slot_give(struct resnet_model *m, const float *p)
{
    for (int i = 0; i < N_SLOTS; i++)
        if (m->slot[i] == p) m->slot_used[i] = 0;
}

/* Weight gradients go per shard (folding) or once over the local batch:
 * shard j is rows [s0[j], s0[j] + shard_n(j)), its gradient buffer
 * gdst(j). */
static int shard_n(const struct step *st, int j) { return st->folding ? st->sy->shard_valid[j] : st->B; }
static float *gdst(const struct step *st, int j)
{
    return st->folding ? st->m->gshard + (size_t)j * st->m->n_params : st->m->grads;
}

/* weight gradient of conv cv from its input x and output gradient dy (x16,
 * dy16: their mirrors or NULL) */
static int conv_wgrad(struct step *st, const struct rconv *cv, const float *x, const uint16_t *x16, const float *dy,
                      const uint16_t *dy16, plumb_err *e)
{
    struct resnet_model *m = st->m;
    if (st->m16) { /* not folding: one pass over the local batch */
        if (!st->B) return PLUMB_OK;
        struct train_conv g = cv->g;
        g.N = st->B;
        return m->T->conv2d_bwd_filter16(m->d, NULL, &g, x, x16, dy, dy16, m->grads + cv->w, m->prec, e);
    }
    const size_t in_px = (size_t)cv->g.H * cv->g.W * cv->g.C, out_px = (size_t)cv->g.P * cv->g.Q * cv->g.K;
    int rc = PLUMB_OK;
    for (int j = 0; j < st->ns && !rc; j++) {
        const int n = shard_n(st, j);
        if (!n) continue;
        struct train_conv g = cv->g;
        g.N = n;
        rc = m->T->conv2d_bwd_filter(m->d, NULL, &g, x + (size_t)st->s0[j] * in_px, dy + (size_t)st->s0[j] * out_px,
                                     gdst(st, j) + cv->w, m->prec, e);
    }
    return rc;
}

static int conv_dgrad(struct step *st, const struct rconv *cv, const float *dy, const uint16_t *dy16, float *dx,
                      plumb_err *e)
{
    if (!st->B) return PLUMB_OK;
    struct train_conv g = cv->g;
    g.N = st->B;
    if (st->m16)
        return st->m->T->conv2d_bwd_data16(st->m->d, NULL, &g, dy, dy16, st->W + cv->w, st->m->w16 + cv->w16, dx,
                                           st->m->prec, e);
    return st->m->T->conv2d_bwd_data(st->m->d, NULL, &g, dy, st->W + cv->w, dx, st->m->prec, e);
}

/* BN backward: dy [B, HW, C] (the gradient of bn's output v, masked) ->
 * dx (may be dy) and, with mirrors, dx16 (may be NULL); gamma / beta
 * gradients (per shard with fold) */
int rn_bn_backward(struct step *st, struct rbn *bn, const float *x, const uint16_t *x16, const float *dy,
                   const uint16_t *dy16, const uint16_t *mask16, int own_relu, float *dx, uint16_t *dx16, int HW,
                   plumb_err *e)
{
    struct resnet_model *m = st->m;
    const struct train_ops *T = m->T;
    struct dev *d = m->d;
    const size_t M = (size_t)st->B * HW;
    const int64_t count = st->synced ? st->gvalid * HW : (int64_t)M;
    if (st->a16) { /* never folding: the parameter gradients in the statistics' pass */
        /* this BN's own ReLU mask from x16 and the forward's parameters (unchanged until the update) */
        const float *mbeta = own_relu && m->mask_self ? m->params + bn->beta : NULL;
        if (mbeta) mask16 = NULL;
        int rc = !M ? rn_zero_part(st, 2 * bn->C, e)
                    : T->bn_bwd_reduce16o(d, NULL, x16, dy16, mask16, m->params + bn->gamma, mbeta, bn->mean,
                                          bn->rstd, M, bn->C, m->part, m->grads + bn->gamma, m->grads + bn->beta,
                                          m->prec, e);
        if (!rc) rc = rn_sync_part(st, 2 * bn->C, e);
        if (!rc) rc = T->bn_mean(d, NULL, m->part, 2 * bn->C, count, m->mdy, e);
        if (!rc && M)
            rc = T->bn_bwd_data16o(d, NULL, x16, dy16, mask16, mbeta, bn->mean, bn->rstd, m->params + bn->gamma,
                                   m->mdy, dx16, M, bn->C, m->prec, e);
        return rc;
    }
    /* not folding, the parameter gradients are over the same M rows as the
     * statistics: one call for both (the bits of the two) */
    const int one = T->bn_bwd_reduce && !st->folding && M;
    int rc = !M ? rn_zero_part(st, 2 * bn->C, e)
             : one ? T->bn_bwd_reduce(d, NULL, x, dy, bn->mean, bn->rstd, M, bn->C, m->part, m->grads + bn->gamma,
                                      m->grads + bn->beta, e)
                   : T->bn_bwd_stats(d, NULL, x, dy, bn->mean, bn->rstd, M, bn->C, m->part, e);
    if (!rc) rc = rn_sync_part(st, 2 * bn->C, e);
    if (!rc) rc = T->bn_mean(d, NULL, m->part, 2 * bn->C, count, m->mdy, e);
    for (int j = 0; j < st->ns && !rc && !one; j++) {
        const int n = shard_n(st, j);
        if (!n) continue;
        const size_t r0 = (size_t)st->s0[j] * HW, rn = (size_t)n * HW;
        rc = T->bn_bwd_params(d, NULL, x + r0 * bn->C, dy + r0 * bn->C, bn->mean, bn->rstd, rn, bn->C,
                              gdst(st, j) + bn->gamma, gdst(st, j) + bn->beta, e);
    }
    if (!rc && M && st->m16 && dx16)
        rc = T->bn_bwd_data16(d, NULL, x, dy, bn->mean, bn->rstd, m->params + bn->gamma, m->mdy, dx, dx16, M, bn->C,
                              m->prec, e);
    else if (!rc && M)
        rc = T->bn_bwd_data(d, NULL, x, dy, bn->mean, bn->rstd, m->params + bn->gamma, m->mdy, dx, M, bn->C, m->prec, e);
    return rc;
}

int rn_grad_ready(struct step *st, int k, size_t off, size_t len, plumb_err *e)
{
    struct resnet_model *m = st->m;
    if (!m->ready || st->folding) return PLUMB_OK;
    return m->ready(m->ready_ctx, k, off, len, NULL, e);
}

/* one block: gout (a slot, the gradient of k->out) -> *gin (a slot, the
 * gradient of k->in) */
static int block_backward(struct step *st, struct rblock *k, float *gout, float **gin, plumb_err *e)
{
    struct resnet_model *m = st->m;
    const struct train_ops *T = m->T;
    struct dev *d = m->d;
    const int L = k->nconv - 1;
    const struct train_conv *gl = &k->conv[L].g;
    const size_t nout = (size_t)st->B * gl->P * gl->Q * gl->K;
    int rc = nout ? T->relu_bwd(d, NULL, k->out, gout, gout, nout, e) : PLUMB_OK; /* d v = d out masked */
    float *shortg = gout, *g2 = NULL;
    if (!rc && k->proj) {
        float *t = NULL;
        rc = slot_take(m, &t, e);
        if (!rc) rc = rn_bn_backward(st, &k->sbn, k->sx, NULL, gout, NULL, NULL, 0, t, m->g16, k->sc.g.P * k->sc.g.Q, e);
        if (!rc) rc = slot_take(m, &shortg, e);
        if (!rc) rc = conv_dgrad(st, &k->sc, t, m->g16, shortg, e);
        if (!rc) rc = conv_wgrad(st, &k->sc, k->in, k->in16, t, m->g16, e);
        slot_give(m, t);
        g2 = gout; /* bn in place: the shortcut has its own gradient now */
    } else if (!rc) {
        rc = slot_take(m, &g2, e);
    }
    /* m->g16: the mirror of each BN backward's dx, read by the two
     * convolutions right after it (one at a time, in stream order) */
    if (!rc) rc = rn_bn_backward(st, &k->bn[L], k->cx[L], NULL, gout, NULL, NULL, 0, g2, m->g16, gl->P * gl->Q, e);
    for (int i = L; i >= 0 && !rc; i--) {
        /* g2 = d cx[i] (its mirror in m->g16) */
        const float *x = i ? k->ax[i - 1] : k->in;
        const uint16_t *x16 = i ? k->ax16[i - 1] : k->in16;
        float *nx = NULL;
        rc = conv_wgrad(st, &k->conv[i], x, x16, g2, m->g16, e);
        if (!rc) rc = slot_take(m, &nx, e);
        if (!rc) rc = conv_dgrad(st, &k->conv[i], g2, m->g16, nx, e);
        slot_give(m, g2);
        g2 = nx;
        if (!rc && i) {
            const struct train_conv *gi = &k->conv[i - 1].g;
            size_t n = (size_t)st->B * gi->P * gi->Q * gi->K;
            if (n) rc = T->relu_bwd(d, NULL, k->ax[i - 1], nx, nx, n, e);
            if (!rc) rc = rn_bn_backward(st, &k->bn[i - 1], k->cx[i - 1], NULL, nx, NULL, NULL, 0, nx, m->g16, gi->P * gi->Q, e);
        }
    }
    const struct train_conv *g0 = &k->conv[0].g;
    const size_t nin = (size_t)st->B * g0->H * g0->W * g0->C;
    if (!rc && nin) rc = T->add(d, NULL, g2, shortg, g2, nin, 0, m->prec, e);
    slot_give(m, shortg);
    *gin = g2;
    return rc;
}

/* from dpooled: the blocks, then the stem (fp32 activations, 16-bit mirrors) */
static int trunk_backward(struct step *st, plumb_err *e)
{
    struct resnet_model *m = st->m;
    const struct train_ops *T = m->T;
    struct dev *d = m->d;
    const int B = st->B, F = m->feat;
    int rc = PLUMB_OK;
    const struct rblock *lastb = &m->blk[m->nblocks - 1];
    const struct train_conv *gl = &lastb->conv[lastb->nconv - 1].g;
    float *g = NULL;
    if (!rc) rc = slot_take(m, &g, e);
    if (!rc && B) rc = T->avgpool_bwd(d, NULL, m->dpooled, g, B, gl->P * gl->Q, F, m->prec, e);
    for (int b = m->nblocks - 1; b >= 0 && !rc; b--) {
        float *gin;
        rc = block_backward(st, &m->blk[b], g, &gin, e);
        g = gin;
        if (!rc) rc = rn_grad_ready(st, m->nblocks - b, m->blk[b].p0, m->blk[b].p1 - m->blk[b].p0, e);
    }
    /* stem: (max-pool), ReLU, BN, conv weight */
    const int shw = m->stem.g.P * m->stem.g.Q;
    const size_t nst = (size_t)B * shw * m->c.stem_width;
    if (!rc && m->pool) {
        float *t = NULL;
        rc = slot_take(m, &t, e);
        struct train_conv pg = m->pg;
        pg.N = B;
        if (!rc && B) rc = T->maxpool_bwd(d, NULL, &pg, g, m->pool_idx, t, m->prec, e);
        slot_give(m, g);
        g = t;
    }
    if (!rc && nst) rc = T->relu_bwd(d, NULL, m->stem_a, g, g, nst, e);
    if (!rc) rc = rn_bn_backward(st, &m->stem_bn, m->stem_c, NULL, g, NULL, NULL, 0, g, m->g16, shw, e);
    if (!rc) rc = conv_wgrad(st, &m->stem, m->in_x, NULL, g, m->g16, e);
    if (!rc) rc = rn_grad_ready(st, m->nblocks + 1, 0, m->stem_end, e);
    slot_give(m, g);
    return rc;
}

static int backward(struct step *st, float grad_scale, struct resnet_loss *loss, plumb_err *e)
{
    struct resnet_model *m = st->m;
    const struct train_ops *T = m->T;
    struct dev *d = m->d;
    const int B = st->B, V = m->c.classes, F = m->feat;
    for (int i = 0; i < N_SLOTS; i++) m->slot_used[i] = 0;
    int rc = PLUMB_OK;
    if (!B && !st->folding) /* no rows: a zero contribution */
        rc = d->be->memset_async(d, NULL, m->grads, 0, m->n_params * sizeof(float), e);
    double sc[2] = {0, 0};
    if (!rc && B) {
        rc = T->cls_xent(d, NULL, m->logits, m->labels, B, V, B, grad_scale, st->folding ? m->loss_ps : NULL, m->sc,
                         NULL, m->dlogits, e);
        if (!rc && m->prec != DT_F32) rc = T->round_fp32(d, NULL, m->dlogits, m->dlogits, (size_t)B * V, m->prec, e);
        /* no loss asked for (the trainer's deferred step): no read back here */
        if (!rc && loss) rc = dev_download(d, sc, m->sc, sizeof sc, e);
    }
    /* head: fc per shard (its dx rows per shard too), then the average pool */
    for (int j = 0; j < st->ns && !rc; j++) {
        const int n = shard_n(st, j), s0 = st->s0[j];
        if (!n) continue;
        rc = T->linear_bwd(d, NULL, m->pooled + (size_t)s0 * F, st->W + m->fc_w, NULL, m->dlogits + (size_t)s0 * V,
                           m->dpooled + (size_t)s0 * F, gdst(st, j) + m->fc_w, gdst(st, j) + m->fc_b, n, F, V, 0,
                           m->prec, e);
    }
    if (!rc) rc = rn_grad_ready(st, 0, m->fc_w, m->n_params - m->fc_w, e);
    if (st->a16) {
        if (!rc) rc = resnet16_trunk_backward(st, e);
    } else if (!rc) {
        rc = trunk_backward(st, e);
    }
    if (!rc && st->folding) { /* each shard's whole gradient, in shard order */
        float *lps = B ? malloc((size_t)B * sizeof(float)) : NULL;
        if (B && !lps) rc = err_set(e, PLUMB_ENOMEM, "resnet: out of host memory");
        if (!rc && B) rc = dev_download(d, lps, m->loss_ps, (size_t)B * sizeof(float), e);
        for (int j = 0; j < st->ns && !rc; j++) {
            const int n = shard_n(st, j);
            if (!n) continue;
            struct resnet_loss lj = {0, n};
            for (int i = 0; i < n; i++) lj.sum += (double)lps[st->s0[j] + i];
            rc = d->be->memcpy_async(d, NULL, m->grads, gdst(st, j), m->n_params * sizeof(float), MEMCPY_D2D, e);
            if (!rc) rc = dev_sync(d, e);
            if (!rc) rc = st->sy->fold_shard(st->sy->fold_ctx, j, &lj, e);
        }
        free(lps);
    }
    if (!rc && loss) {
        loss->sum = sc[0];
        loss->count = B;
    }
    return rc;
}

static int upload_batch(struct resnet_model *m, const struct resnet_batch *b, plumb_err *e)
{
    const size_t px = (size_t)m->c.image * m->c.image * 3, xb = (size_t)b->n_valid * px * sizeof(float),
                 lb = (size_t)b->n_valid * sizeof(int32_t);
    if (!b->n_valid) return PLUMB_OK;
    if (b->on_device) { /* a device batch (the trainer's device feed): copied on the default stream */
        int rc = m->d->be->memcpy_async(m->d, NULL, m->in_x, b->x, xb, MEMCPY_D2D, e);
        if (!rc && b->labels) rc = m->d->be->memcpy_async(m->d, NULL, m->labels, b->labels, lb, MEMCPY_D2D, e);
        return rc;
    }
    int rc = dev_upload(m->d, m->in_x, b->x, xb, e);
    if (!rc && b->labels) rc = dev_upload(m->d, m->labels, b->labels, lb, e);
    return rc;
}

int resnet_forward_backward(struct resnet_model *m, const struct resnet_batch *b, const struct resnet_sync *sync,
                            float grad_scale, struct resnet_loss *loss, plumb_err *e)
{
    int rc = resnet_check_batch(m, b, e);
    if (rc) return rc;
    if (!b->labels && b->n_valid) return err_set(e, PLUMB_EUSAGE, "resnet forward_backward: batch has no labels");
    struct step st = {.m = m, .sy = sync, .B = b->n_valid, .train = 1, .ns = b->n_valid ? 1 : 0};
    if (sync && sync->fold_shard) {
        if (sync->nshards < 0 || sync->nshards > (int)(sizeof st.s0 / sizeof st.s0[0]) ||
            (sync->nshards && !sync->shard_valid))
            return err_set(e, PLUMB_EUSAGE, "resnet forward_backward: %d shards (expected 0..%zu with their sizes)",
                           sync->nshards, sizeof st.s0 / sizeof st.s0[0]);
        int tot = 0;
        for (int j = 0; j < sync->nshards; j++) {
            if (sync->shard_valid[j] < 0)
                return err_set(e, PLUMB_EUSAGE, "resnet forward_backward: shard %d has %d samples", j,
                               sync->shard_valid[j]);
            st.s0[j] = tot;
            tot += sync->shard_valid[j];
        }
        if (tot != b->n_valid)
            return err_set(e, PLUMB_EUSAGE, "resnet forward_backward: shards hold %d samples, the batch %d valid", tot,
                           b->n_valid);
        st.folding = 1;
        st.ns = sync->nshards;
        if (st.ns > m->gshard_cap) {
            if (m->gshard) dev_free(m->d, m->gshard);
            m->gshard = NULL;
            m->gshard_cap = 0;
            rc = rn_zalloc(m, (void **)&m->gshard, (size_t)st.ns * m->n_params * sizeof(float), e);
            if (rc) return rc;
            m->gshard_cap = st.ns;
        }
    }
    st.synced = sync && sync->allreduce && !sync->local_bn;
    st.gvalid = b->global_valid > 0 ? b->global_valid : b->n_valid;
    rc = upload_batch(m, b, e);
    if (!rc) rc = forward(&st, e);
    if (!rc && sync && sync->forward_done) rc = sync->forward_done(sync->ctx, e);
    if (!rc) rc = backward(&st, grad_scale, loss, e);
    if (!rc && loss) rc = dev_sync(m->d, e);
    return rc;
}

int resnet_forward_train(struct resnet_model *m, const struct resnet_batch *b, plumb_err *e)
{
    int rc = resnet_check_batch(m, b, e);
    if (rc) return rc;
    struct step st = {.m = m, .B = b->n_valid, .train = 1, .keep_running = 1, .ns = b->n_valid ? 1 : 0};
    st.gvalid = b->n_valid;
    rc = upload_batch(m, b, e);
    if (!rc) rc = forward(&st, e);
    if (!rc && b->n_valid && b->labels)
        rc = m->T->cls_xent(m->d, NULL, m->logits, m->labels, b->n_valid, m->c.classes, b->n_valid, 0.0f, NULL, m->sc,
                            NULL, NULL, e);
    return rc;
}

int resnet_predict(struct resnet_model *m, const struct resnet_batch *b, float *loss, int32_t *pred, plumb_err *e)
{
    int rc = resnet_check_batch(m, b, e);
    if (rc) return rc;
    if (loss && !b->labels) return err_set(e, PLUMB_EUSAGE, "resnet predict: loss requested but batch has no labels");
    struct step st = {.m = m, .B = b->n_valid, .train = 0};
    rc = upload_batch(m, b, e);
    if (!rc) rc = forward(&st, e);
    if (rc || !b->n_valid) return rc;
    const int B = b->n_valid;
    rc = m->T->cls_xent(m->d, NULL, m->logits, loss ? m->labels : NULL, B, m->c.classes, loss ? B : 0, 0.0f,
                        loss ? m->loss_ps : NULL, NULL, m->pred, NULL, e);
    if (!rc && loss) rc = dev_download(m->d, loss, m->loss_ps, (size_t)B * sizeof(float), e);
    if (!rc && pred) rc = dev_download(m->d, pred, m->pred, (size_t)B * sizeof(int32_t), e);
    return rc;
}

/* ---------------- digest ---------------- */

int resnet_digest(struct resnet_model *m, char hex[65], plumb_err *e)
{
    hash_sha256 h;
    if (hash_sha256_init(&h)) return err_set(e, PLUMB_EINTERNAL, "resnet digest: SHA-256 init failed");
    size_t n = m->n_params > m->n_bufs ? m->n_params : m->n_bufs;
    float *buf = malloc((n ? n : 1) * sizeof(float));
    uint8_t out[32];
    if (!buf) {
        hash_sha256_final(&h, out);
        return err_set(e, PLUMB_ENOMEM, "resnet digest: out of memory");
    }
    int rc = dev_download(m->d, buf, m->params, m->n_params * sizeof(float), e);
    if (!rc) hash_sha256_update(&h, buf, m->n_params * sizeof(float));
    if (!rc) rc = dev_download(m->d, buf, m->bufs, m->n_bufs * sizeof(float), e);
    if (!rc) hash_sha256_update(&h, buf, m->n_bufs * sizeof(float));
    hash_sha256_final(&h, out);
    free(buf);
    if (rc) return rc;
    hash_to_hex(out, 32, hex);
    return PLUMB_OK;
}
