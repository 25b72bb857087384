/* ctr: the DLRM over the device's train_ops (see ctr.h for the layout, the
 * gradient contract and precision). */
#include "models/ctr/ctr.h"
#include "core/hash.h"
#include "dev/train_ops.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/philox.h"

#define ALIGN_F 16 /* tensors start on 64-byte boundaries; padding stays 0 */
#define MAX_TENSORS (2 * 2 * CTR_MAX_LAYERS + CTR_N_TABLES)

struct ctr_model {
    struct dev *d;
    const struct train_ops *T;
    struct ctr_config c;
    dtype_t prec;
    int max_batch;
    int n_tensors;
    struct model_tensor t[MAX_TENSORS];
    struct model_layout layout;
    size_t n_dense, n_params;
    int64_t R, off[CTR_N_TABLES];
    int inter_w;      /* D + 27*26/2 */
    int max_w;        /* widest activation */
    float *params;    /* [n_params] */
    float *grads;     /* [n_dense] */
    float *wwork;     /* [n_dense] rounded copy for bf16/fp16, else NULL */
    int64_t *d_off;   /* [26] */
    float *in_dense;  /* [MB, 13] */
    uint32_t *in_idx; /* [MB, 26] */
    float *in_label;  /* [MB] */
    float *act_b[CTR_MAX_LAYERS + 1]; /* act_b[0] = in_dense; act_b[l+1]: [MB, bottom[l+1]] */
    float *act_t[CTR_MAX_LAYERS + 1]; /* act_t[0]: interaction [MB, inter_w]; act_t[l+1] */
    float *emb;       /* [MB, 26, D] */
    float *g0, *g1;   /* activation-gradient ping-pong [MB, max_w] */
    float *demb;      /* [MB, 26, D] */
    float *dz;        /* [MB] */
    double *sc;       /* [2] */
    float *scores;    /* [MB] */
    int64_t *rows;    /* [MB*26] */
    float *rgrads;    /* [MB*26, D] */
    int64_t *d_nrows; /* [1] */
    size_t nrows;
    /* 16-bit operand mirrors (train_ops linear_fwd16/bwd16), fast bf16/fp16
     * only: act16_b/t[l] mirror act_b/t[l] (l >= 1), g16[0/1] mirror g0/g1,
     * w16 the rounded weights wwork */
    uint16_t *act16_b[CTR_MAX_LAYERS + 1], *act16_t[CTR_MAX_LAYERS + 1], *g16[2], *w16;
    int has16;
    float fused_lr;   /* >= 0: the next backward applies sparse SGD (ctr_fuse_sparse_sgd) */
    int fused_keep;   /* ... and leaves the list (rows, sums) as an unfused backward does */
    float *fused_prev; /* ... and the touched rows' values before the update [MB*26, D] (not owned) */
    int *fused_found; /* ... and sets this device flag when a sum is non-finite (not owned) */
    int deferred;     /* ctr_defer: the loss and the row count stay on the device */
    ctr_grad_ready_fn ready;  /* backward hook (ctr_set_grad_ready_hook), or NULL */
    void *ready_ctx;
};

/* ---------------- configuration ---------------- */

int ctr_config_preset(const char *name, int64_t rows_override, struct ctr_config *c, plumb_err *e)
{
    memset(c, 0, sizeof *c);
    if (!name) return err_set(e, PLUMB_EUSAGE, "ctr preset: none given (expected ctr-tiny or dlrm-kaggle)");
    if (rows_override < 0)
        return err_set(e, PLUMB_EUSAGE, "--rows: %lld (expected a positive row count)",
                       (long long)rows_override);
    if (!strcmp(name, "dlrm-kaggle")) {
        c->emb_dim = 16;
        c->n_bottom = 4;
        int b[] = {CTR_N_DENSE, 512, 256, 64, 16};
        memcpy(c->bottom, b, sizeof b);
        c->n_top = 3;
        int t[] = {16 + 27 * 26 / 2, 512, 256, 1};
        memcpy(c->top, t, sizeof t);
        for (int i = 0; i < CTR_N_TABLES; i++) c->rows[i] = 1000000;
    } else if (!strcmp(name, "ctr-tiny")) {
        c->emb_dim = 8;
        c->n_bottom = 2;
        int b[] = {CTR_N_DENSE, 64, 8};
        memcpy(c->bottom, b, sizeof b);
        c->n_top = 2;
        int t[] = {8 + 27 * 26 / 2, 64, 1};
        memcpy(c->top, t, sizeof t);
        for (int i = 0; i < CTR_N_TABLES; i++) c->rows[i] = 10000;
    } else {
        return err_set(e, PLUMB_EUSAGE, "ctr preset '%s' unknown (expected ctr-tiny or dlrm-kaggle)", name);
    }
    snprintf(c->preset, sizeof c->preset, "%s", name);
    if (rows_override > 0)
        for (int i = 0; i < CTR_N_TABLES; i++) c->rows[i] = rows_override;
    return ctr_config_validate(c, e);
}

int ctr_config_validate(const struct ctr_config *c, plumb_err *e)
{
    int D = c->emb_dim;
    if (D < 1 || D > 4096) return err_set(e, PLUMB_EUSAGE, "ctr config: emb_dim %d (expected 1..4096)", D);
    if (c->n_bottom < 1 || c->n_bottom > CTR_MAX_LAYERS)
        return err_set(e, PLUMB_EUSAGE, "ctr config: %d bottom layers (expected 1..%d)", c->n_bottom, CTR_MAX_LAYERS);
    if (c->n_top < 1 || c->n_top > CTR_MAX_LAYERS)
        return err_set(e, PLUMB_EUSAGE, "ctr config: %d top layers (expected 1..%d)", c->n_top, CTR_MAX_LAYERS);
    if (c->bottom[0] != CTR_N_DENSE)
        return err_set(e, PLUMB_EUSAGE, "ctr config: bottom input width %d (expected %d)", c->bottom[0], CTR_N_DENSE);
    if (c->bottom[c->n_bottom] != D)
        return err_set(e, PLUMB_EUSAGE, "ctr config: bottom output width %d (expected emb_dim %d)",
                       c->bottom[c->n_bottom], D);
    int F = CTR_N_TABLES + 1;
    if (c->top[0] != D + F * (F - 1) / 2)
        return err_set(e, PLUMB_EUSAGE, "ctr config: top input width %d (expected %d = %d + 351)", c->top[0],
                       D + F * (F - 1) / 2, D);
    if (c->top[c->n_top] != 1)
        return err_set(e, PLUMB_EUSAGE, "ctr config: top output width %d (expected 1)", c->top[c->n_top]);
    for (int l = 0; l <= c->n_bottom; l++)
        if (c->bottom[l] < 1 || c->bottom[l] > 65536)
            return err_set(e, PLUMB_EUSAGE, "ctr config: bottom width %d at %d (expected 1..65536)", c->bottom[l], l);
    for (int l = 0; l <= c->n_top; l++)
        if (c->top[l] < 1 || c->top[l] > 65536)
            return err_set(e, PLUMB_EUSAGE, "ctr config: top width %d at %d (expected 1..65536)", c->top[l], l);
    int64_t total = 0;
    for (int t = 0; t < CTR_N_TABLES; t++) {
        if (c->rows[t] < 1 || c->rows[t] > 0xffffffffLL)
            return err_set(e, PLUMB_EUSAGE, "ctr config: table %d rows %lld (expected 1..2^32-1)", t,
                           (long long)c->rows[t]);
        total += c->rows[t];
    }
    if ((double)total * D > 4e10)
        return err_set(e, PLUMB_EUSAGE, "ctr config: %lld embedding rows x %d is too large", (long long)total, D);
    return PLUMB_OK;
}

void ctr_config_describe(const struct ctr_config *c, char *buf, size_t n)
{
    char b[128] = "", t[128] = "";
    size_t o = 0;
    for (int l = 0; l <= c->n_bottom; l++) o += snprintf(b + o, sizeof b - o, "%s%d", l ? "-" : "", c->bottom[l]);
    o = 0;
    for (int l = 0; l <= c->n_top; l++) o += snprintf(t + o, sizeof t - o, "%s%d", l ? "-" : "", c->top[l]);
    int same = 1;
    for (int i = 1; i < CTR_N_TABLES; i++) same &= c->rows[i] == c->rows[0];
    if (same)
        snprintf(buf, n, "bottom %s | %dx%lldx%d | top %s", b, CTR_N_TABLES, (long long)c->rows[0], c->emb_dim, t);
    else
        snprintf(buf, n, "bottom %s | %d tables (rows vary) x%d | top %s", b, CTR_N_TABLES, c->emb_dim, t);
}

/* ---------------- create / free ---------------- */

static size_t align_up(size_t x) { return (x + ALIGN_F - 1) / ALIGN_F * ALIGN_F; }

static void add_tensor(struct ctr_model *m, size_t *off, const char *name, int rows, int cols, int table)
{
    struct model_tensor *t = &m->t[m->n_tensors++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->offset = *off;
    t->rows = rows;
    t->cols = cols;
    t->numel = (size_t)rows * cols;
    /* weight decay on every dense tensor (biases too), none on the tables */
    t->flags = table ? TENSOR_SPARSE : TENSOR_DECAY;
    *off = align_up(*off + t->numel);
}

static int zalloc(struct ctr_model *m, void **p, size_t bytes, plumb_err *e)
{
    int rc = dev_alloc(m->d, bytes ? bytes : 8, p, e);
    if (rc) return err_wrap(e, "ctr: allocating %zu bytes", bytes);
    return m->d->be->memset_async(m->d, NULL, *p, 0, bytes ? bytes : 8, e);
}

void ctr_free(struct ctr_model *m)
{
    if (!m) return;
    struct dev *d = m->d;
    void *ps[] = {m->params, m->grads, m->wwork, m->d_off, m->in_dense, m->in_idx, m->in_label, m->emb,
                  m->g0, m->g1, m->demb, m->dz, m->sc, m->scores, m->rows, m->rgrads, m->d_nrows,
                  m->act_t[0]};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        if (ps[i]) dev_free(d, ps[i]);
    for (int l = 0; l <= CTR_MAX_LAYERS; l++) {
        if (l && m->act_b[l]) dev_free(d, m->act_b[l]);
        if (l && m->act_t[l]) dev_free(d, m->act_t[l]);
        if (m->act16_b[l]) dev_free(d, m->act16_b[l]);
        if (m->act16_t[l]) dev_free(d, m->act16_t[l]);
    }
    if (m->g16[0]) dev_free(d, m->g16[0]);
    if (m->g16[1]) dev_free(d, m->g16[1]);
    if (m->w16) dev_free(d, m->w16);
    free(m);
}

int ctr_create(struct dev *d, const struct ctr_config *c, int max_batch, dtype_t precision,
               struct ctr_model **out, plumb_err *e)
{
    *out = NULL;
    int rc = ctr_config_validate(c, e);
    if (rc) return rc;
    if (!d->ops->train) return err_set(e, PLUMB_EUNSUPPORTED, "ctr: device %s has no training ops", d->label);
    if (max_batch < 1 || max_batch > (1 << 24))
        return err_set(e, PLUMB_EUSAGE, "ctr: batch %d (expected 1..16777216)", max_batch);
    if (precision != DT_F32 && precision != DT_BF16 && precision != DT_F16)
        return err_set(e, PLUMB_EUSAGE, "ctr: precision %s (expected fp32, bf16 or fp16)", dtype_name(precision));
    struct ctr_model *m = calloc(1, sizeof *m);
    if (!m) return err_set(e, PLUMB_ENOMEM, "ctr: out of host memory");
    m->d = d;
    m->T = d->ops->train;
    m->c = *c;
    m->prec = precision;
    m->max_batch = max_batch;
    m->fused_lr = -1.0f; /* no fused sparse SGD unless asked for one step */
    const int D = c->emb_dim, F = CTR_N_TABLES + 1;
    m->inter_w = D + F * (F - 1) / 2;
    size_t off = 0;
    char name[32];
    for (int l = 0; l < c->n_bottom; l++) {
        snprintf(name, sizeof name, "bottom.%d.weight", l);
        add_tensor(m, &off, name, c->bottom[l + 1], c->bottom[l], 0);
        snprintf(name, sizeof name, "bottom.%d.bias", l);
        add_tensor(m, &off, name, 1, c->bottom[l + 1], 0);
    }
    for (int l = 0; l < c->n_top; l++) {
        snprintf(name, sizeof name, "top.%d.weight", l);
        add_tensor(m, &off, name, c->top[l + 1], c->top[l], 0);
        snprintf(name, sizeof name, "top.%d.bias", l);
        add_tensor(m, &off, name, 1, c->top[l + 1], 0);
    }
    m->n_dense = off;
    m->R = 0;
    for (int t = 0; t < CTR_N_TABLES; t++) {
        m->off[t] = m->R;
        m->R += c->rows[t];
        struct model_tensor *tt = &m->t[m->n_tensors++];
        snprintf(tt->name, sizeof tt->name, "emb.%d", t);
        tt->offset = m->n_dense + (size_t)m->off[t] * D;
        tt->rows = (int)c->rows[t];
        tt->cols = D;
        tt->numel = (size_t)c->rows[t] * D;
        tt->flags = TENSOR_SPARSE;
    }
    m->n_params = m->n_dense + (size_t)m->R * D;
    m->layout = (struct model_layout){.n_params = m->n_params,
                                      .n_dense = m->n_dense,
                                      .sparse_dim = D,
                                      .sparse_per_sample = CTR_N_TABLES,
                                      .n_tensors = m->n_tensors,
                                      .tensors = m->t,
                                      .out_width = 1};
    int maxw = m->inter_w;
    for (int l = 0; l <= c->n_bottom; l++) maxw = c->bottom[l] > maxw ? c->bottom[l] : maxw;
    for (int l = 0; l <= c->n_top; l++) maxw = c->top[l] > maxw ? c->top[l] : maxw;
    m->max_w = maxw;
    size_t MB = (size_t)max_batch, fs = sizeof(float);
    rc = zalloc(m, (void **)&m->params, m->n_params * fs, e);
    if (!rc) rc = zalloc(m, (void **)&m->grads, m->n_dense * fs, e);
    if (!rc && precision != DT_F32) rc = zalloc(m, (void **)&m->wwork, m->n_dense * fs, e);
    if (!rc) rc = zalloc(m, (void **)&m->d_off, sizeof m->off, e);
    if (!rc) rc = dev_upload(d, m->d_off, m->off, sizeof m->off, e);
    if (!rc) rc = zalloc(m, (void **)&m->in_dense, MB * CTR_N_DENSE * fs, e);
    if (!rc) rc = zalloc(m, (void **)&m->in_idx, MB * CTR_N_TABLES * sizeof(uint32_t), e);
    if (!rc) rc = zalloc(m, (void **)&m->in_label, MB * fs, e);
    m->act_b[0] = m->in_dense;
    for (int l = 1; l <= c->n_bottom && !rc; l++) rc = zalloc(m, (void **)&m->act_b[l], MB * c->bottom[l] * fs, e);
    if (!rc) rc = zalloc(m, (void **)&m->act_t[0], MB * m->inter_w * fs, e);
    for (int l = 1; l <= c->n_top && !rc; l++) rc = zalloc(m, (void **)&m->act_t[l], MB * c->top[l] * fs, e);
    if (!rc) rc = zalloc(m, (void **)&m->emb, MB * CTR_N_TABLES * D * fs, e);
    if (!rc) rc = zalloc(m, (void **)&m->demb, MB * CTR_N_TABLES * D * fs, e);
    if (!rc) rc = zalloc(m, (void **)&m->g0, MB * maxw * fs, e);
    /* mirrors where the backend reads 16-bit GEMM operands (PLUMB_TRAIN_MIRRORS=0: not used) */
    const char *mv = getenv("PLUMB_TRAIN_MIRRORS");
    if (!rc && precision != DT_F32 && m->T->linear_fwd16 && m->T->linear_bwd16 && d->ops->cast &&
        !(mv && !strcmp(mv, "0"))) {
        const size_t hs = sizeof(uint16_t);
        /* l = 0: the padded mirrors of the dense input and the interaction
         * (rows of K rounded up to 8; filled by the forward, read by the backward) */
        for (int l = 0; l < c->n_bottom && !rc; l++)
            rc = zalloc(m, (void **)&m->act16_b[l], MB * (size_t)((c->bottom[l] + 7) / 8 * 8) * hs, e);
        for (int l = 0; l < c->n_top && !rc; l++)
            rc = zalloc(m, (void **)&m->act16_t[l], MB * (size_t)((c->top[l] + 7) / 8 * 8) * hs, e);
        /* gradient mirrors: rows up to the widest, padded to 8 (the interaction's) */
        for (int k = 0; k < 2 && !rc; k++) rc = zalloc(m, (void **)&m->g16[k], MB * (size_t)((maxw + 7) / 8 * 8) * hs, e);
        if (!rc) rc = zalloc(m, (void **)&m->w16, m->n_dense * hs, e);
        m->has16 = !rc;
    }
    if (!rc) rc = zalloc(m, (void **)&m->g1, MB * maxw * fs, e);
    if (!rc) rc = zalloc(m, (void **)&m->dz, MB * fs, e);
    if (!rc) rc = zalloc(m, (void **)&m->sc, 2 * sizeof(double), e);
    if (!rc) rc = zalloc(m, (void **)&m->scores, MB * fs, e);
    if (!rc) rc = zalloc(m, (void **)&m->rows, MB * CTR_N_TABLES * sizeof(int64_t), e);
    if (!rc) rc = zalloc(m, (void **)&m->rgrads, MB * CTR_N_TABLES * D * fs, e);
    if (!rc) rc = zalloc(m, (void **)&m->d_nrows, sizeof(int64_t), e);
    if (!rc) rc = dev_sync(d, e);
    if (rc) {
        ctr_free(m);
        return rc;
    }
    *out = m;
    return PLUMB_OK;
}

/* ---------------- accessors ---------------- */

size_t ctr_n_params(const struct ctr_model *m) { return m->n_params; }
size_t ctr_n_dense(const struct ctr_model *m) { return m->n_dense; }
int ctr_n_tensors(const struct ctr_model *m) { return m->n_tensors; }
const struct model_layout *ctr_layout(const struct ctr_model *m) { return &m->layout; }
const struct model_tensor *ctr_tensor(const struct ctr_model *m, int i)
{
    return i >= 0 && i < m->n_tensors ? &m->t[i] : NULL;
}
float *ctr_params(struct ctr_model *m) { return m->params; }
float *ctr_grads(struct ctr_model *m) { return m->grads; }
int64_t ctr_table_rows(const struct ctr_model *m) { return m->R; }
const int64_t *ctr_table_off(const struct ctr_model *m) { return m->off; }
struct dev *ctr_dev(struct ctr_model *m) { return m->d; }

void ctr_set_grad_ready_hook(struct ctr_model *m, ctr_grad_ready_fn fn, void *ctx)
{
    m->ready = fn;
    m->ready_ctx = ctx;
}

static int bwd_fuses(const struct ctr_model *m, int l);

/* The range of ctr_grads() that backward layer j (tensor order: bottom
 * layers 0..nb-1, then top layers; weight tensor 2j, bias 2j+1) writes, so
 * that the ranges descend in backward order and tile [0, n_dense) exactly:
 * - unfused: its weight, its bias and the padding up to the next layer;
 * - fused (bwd_fuses: linear_bwd_relu_in or linear_bwd16 with relu_in, for
 *   every layer above the first of its MLP): the layer writes its weight's
 *   gradient and the bias gradient of the layer BELOW it (that layer's ReLU
 *   backward is done here), while its own bias gradient came from the layer
 *   above. Its range then starts at the lower layer's bias, which sits just
 *   before its weight, and ends where the layer above's range starts.
 * A layer is reported once everything in its range is final and nothing
 * below the range has been written yet (tests/test_ctr.c
 * ctr_grad_ready_hook). */
static size_t layer_start(const struct ctr_model *m, int j)
{
    int l = j < m->c.n_bottom ? j : j - m->c.n_bottom;
    return bwd_fuses(m, l) ? m->t[2 * j - 1].offset : m->t[2 * j].offset;
}

static void layer_range(const struct ctr_model *m, int j, size_t *off, size_t *len)
{
    const int nl = m->c.n_bottom + m->c.n_top;
    size_t end = j + 1 < nl ? layer_start(m, j + 1) : m->n_dense;
    *off = layer_start(m, j);
    *len = end - *off;
}

int ctr_grad_layers(const struct ctr_model *m, size_t *off, size_t *len)
{
    const int nl = m->c.n_bottom + m->c.n_top;
    for (int k = 0; k < nl; k++) layer_range(m, nl - 1 - k, &off[k], &len[k]);
    return nl;
}

/* backward layer k (tensor-order layer j = nl-1-k) is complete */
static int grad_ready(struct ctr_model *m, int k, plumb_err *e)
{
    if (!m->ready) return PLUMB_OK;
    size_t off, len;
    layer_range(m, m->c.n_bottom + m->c.n_top - 1 - k, &off, &len);
    return m->ready(m->ready_ctx, k, off, len, NULL, e);
}

void ctr_sparse_grads(struct ctr_model *m, int64_t **rows, float **grads, size_t *n)
{
    *rows = m->rows;
    *grads = m->rgrads;
    *n = m->nrows;
}

/* ---------------- init ---------------- */

/* Host evaluation of the same definition (core/philox.h is what the rng ops
 * compute), chunked through a host buffer, for devices without rng ops. */
static int init_tensor_host(struct ctr_model *m, const struct model_tensor *t, uint64_t seed, uint32_t id, float a,
                            float b, int uniform, plumb_err *e)
{
    const size_t chunk = (size_t)1 << 20;
    size_t cap = t->numel < chunk ? t->numel : chunk;
    float *h = malloc((cap ? cap : 1) * sizeof(float));
    if (!h) return err_set(e, PLUMB_ENOMEM, "ctr init: out of host memory");
    int rc = PLUMB_OK;
    for (size_t i0 = 0; i0 < t->numel && !rc; i0 += chunk) {
        size_t n = t->numel - i0 < chunk ? t->numel - i0 : chunk;
#pragma omp parallel for schedule(static) if (n > 65536)
        for (size_t k = 0; k < n; k++) {
            float r = uniform ? philox_uniform_at(seed, RNG_INIT, id, 0, i0 + k)
                              : philox_normal_at(seed, RNG_INIT, id, 0, i0 + k);
            h[k] = fmaf(a, r, b);
        }
        rc = dev_upload(m->d, m->params + t->offset + i0, h, n * sizeof(float), e);
    }
    free(h);
    return rc;
}

int ctr_init(struct ctr_model *m, uint64_t seed, plumb_err *e)
{
    struct dev *d = m->d;
    int on_dev = d->ops->rng_normal && d->ops->rng_uniform;
    int rc = d->be->memset_async(d, NULL, m->params, 0, m->n_params * sizeof(float), e);
    if (rc) return rc;
    for (int i = 0; i < m->n_tensors && !rc; i++) {
        const struct model_tensor *t = &m->t[i];
        struct rng_stream st = {seed, (uint32_t)RNG_INIT, (uint32_t)i, 0};
        float *p = m->params + t->offset;
        /* table: fmaf(2 bound, u, -bound), u uniform [0,1); weight [out, in]:
         * fmaf(sqrt(2/(fan_in+fan_out)), z, 0); bias [1, out]: fmaf(sqrt(1/fan_out), z, 0) */
        int uniform = (t->flags & TENSOR_SPARSE) != 0;
        float a, b;
        if (uniform) {
            float bound = (float)sqrt(1.0 / (double)t->rows);
            a = 2.0f * bound;
            b = -bound;
        } else {
            a = (float)(strstr(t->name, ".weight") ? sqrt(2.0 / (double)(t->rows + t->cols)) : sqrt(1.0 / (double)t->cols));
            b = 0.0f;
        }
        if (!on_dev) {
            rc = init_tensor_host(m, t, seed, (uint32_t)i, a, b, uniform, e);
            continue;
        }
        rc = uniform ? d->ops->rng_uniform(d, NULL, &st, 0, p, t->numel) : d->ops->rng_normal(d, NULL, &st, 0, p, t->numel);
        if (!rc) rc = m->T->affine(d, NULL, p, p, t->numel, a, b, e);
        if (rc && e && !e->msg[0]) err_set(e, rc, "ctr init: rng op failed for %s", t->name);
    }
    if (!rc) rc = dev_sync(d, e);
    return rc;
}

/* ---------------- forward / backward ---------------- */

int ctr_check_batch(const struct ctr_model *m, const struct ctr_batch *b, plumb_err *e)
{
    if (b->B < 1 || b->B > m->max_batch)
        return err_set(e, PLUMB_EUSAGE, "ctr batch: B=%d (expected 1..%d)", b->B, m->max_batch);
    if (b->n_valid < 0 || b->n_valid > b->B)
        return err_set(e, PLUMB_EUSAGE, "ctr batch: n_valid=%d (expected 0..%d)", b->n_valid, b->B);
    if (!b->dense || !b->sparse) return err_set(e, PLUMB_EUSAGE, "ctr batch: missing dense or sparse features");
    for (int i = 0; i < b->B; i++)
        for (int t = 0; t < CTR_N_TABLES; t++) {
            uint32_t r = b->sparse[(size_t)i * CTR_N_TABLES + t];
            if ((int64_t)r >= m->c.rows[t])
                return err_set(e, PLUMB_EUSAGE, "ctr batch: sample %d, C%d: row %u >= %lld rows", i, t + 1, r,
                               (long long)m->c.rows[t]);
        }
    if (b->labels)
        for (int i = 0; i < b->n_valid; i++)
            if (b->labels[i] != 0.0f && b->labels[i] != 1.0f)
                return err_set(e, PLUMB_EUSAGE, "ctr batch: sample %d label %g (expected 0 or 1)", i,
                               (double)b->labels[i]);
    return PLUMB_OK;
}

/* upload + forward to logits (act_t[n_top], [B, 1]) */
static int forward_compute(struct ctr_model *m, int B, plumb_err *e);

/* With 16-bit operands, a hidden activation of a width that is a multiple
 * of 8 lives in 16 bits only ("mirror only", train_ops.h): the layer below
 * stores just its mirror, the backward reads just the mirror, and its
 * gradient is 16-bit only too. Other widths keep the fp32 tensor, and the
 * mirror buffer (allocated padded) is then the padded copy the op fills
 * from it. The first layer's input is fp32: the dense features, and the
 * interaction unless the backend has its 16-bit ops (inter16). */
static int only16(int l, int width) { return l && width % 8 == 0; }

/* the 16-bit operand path: mirrors allocated and the device in fast mode */
static int use16(const struct ctr_model *m) { return m->has16 && m->d->numerics == NUMERICS_FAST; }
/* ... and the interaction's output and gradient in 16 bits only (its padded
 * mirror act16_t[0], [B, inter_w rounded up to 8]: rows of inter_ld) */
static int inter16(const struct ctr_model *m)
{
    return use16(m) && m->T->embedding_interact_fwd16 && m->T->interact_bwd16;
}
static int inter_ld(const struct ctr_model *m) { return (m->inter_w + 7) / 8 * 8; }
/* Whether the backward of MLP layer l (within its MLP) also does the ReLU
 * backward of the layer below it and that layer's bias gradient
 * (linear_bwd_relu_in, or linear_bwd16 with relu_in): the first layer of an
 * MLP has no ReLU layer below it. */
static int bwd_fuses(const struct ctr_model *m, int l)
{
    return (use16(m) || m->T->linear_bwd_relu_in) && l >= 1;
}

/* With 16-bit operands, the input of bottom (top = 0) or top (top = 1)
 * layer l: in32 its fp32 tensor, NULL when it lives in 16 bits only (and
 * then so does its gradient); in16 its mirror, NULL when the op makes its
 * own copy (an fp32 first input of a width that is a multiple of 8). */
static float *in32(const struct ctr_model *m, int top, int l)
{
    if (top) return only16(l, m->c.top[l]) || (!l && inter16(m)) ? NULL : m->act_t[l];
    return only16(l, m->c.bottom[l]) ? NULL : m->act_b[l];
}
static uint16_t *in16(const struct ctr_model *m, int top, int l)
{
    if (top) return l || inter16(m) || m->inter_w % 8 ? m->act16_t[l] : NULL;
    return l || m->c.bottom[0] % 8 ? m->act16_b[l] : NULL;
}

static int forward(struct ctr_model *m, const struct ctr_batch *b, plumb_err *e)
{
    struct dev *d = m->d;
    const int B = b->B;
    int rc = ctr_check_batch(m, b, e);
    if (rc) return rc;
    rc = dev_upload(d, m->in_dense, b->dense, (size_t)B * CTR_N_DENSE * sizeof(float), e);
    if (!rc) rc = dev_upload(d, m->in_idx, b->sparse, (size_t)B * CTR_N_TABLES * sizeof(uint32_t), e);
    if (!rc && b->labels) rc = dev_upload(d, m->in_label, b->labels, (size_t)B * sizeof(float), e);
    if (rc) return rc;
    return forward_compute(m, B, e);
}

/* device batch -> the model's input buffers (device-to-device, stream ordered) */
static int forward_dev(struct ctr_model *m, const struct ctr_dev_batch *b, plumb_err *e)
{
    struct dev *d = m->d;
    if (b->B < 1 || b->B > m->max_batch)
        return err_set(e, PLUMB_EUSAGE, "ctr device batch: B=%d (expected 1..%d)", b->B, m->max_batch);
    if (b->n_valid < 0 || b->n_valid > b->B)
        return err_set(e, PLUMB_EUSAGE, "ctr device batch: n_valid=%d (expected 0..%d)", b->n_valid, b->B);
    if (!b->dense || !b->sparse) return err_set(e, PLUMB_EUSAGE, "ctr device batch: missing dense or sparse features");
    const size_t B = (size_t)b->B;
    int rc = d->be->memcpy_async(d, NULL, m->in_dense, b->dense, B * CTR_N_DENSE * sizeof(float), MEMCPY_D2D, e);
    if (!rc) rc = d->be->memcpy_async(d, NULL, m->in_idx, b->sparse, B * CTR_N_TABLES * sizeof(uint32_t), MEMCPY_D2D, e);
    if (!rc && b->labels) rc = d->be->memcpy_async(d, NULL, m->in_label, b->labels, B * sizeof(float), MEMCPY_D2D, e);
    if (rc) return rc;
    return forward_compute(m, b->B, e);
}

/* forward of the batch in the input buffers to logits (act_t[n_top], [B, 1]) */
static int forward_compute(struct ctr_model *m, int B, plumb_err *e)
{
    struct dev *d = m->d;
    const struct train_ops *T = m->T;
    const struct ctr_config *c = &m->c;
    const int D = c->emb_dim;
    int rc = PLUMB_OK;
    const float *W = m->params;
    if (m->prec != DT_F32) {
        rc = T->round_fp32(d, NULL, m->params, m->wwork, m->n_dense, m->prec, e);
        if (!rc) rc = T->round_fp32(d, NULL, m->in_dense, m->in_dense, (size_t)B * CTR_N_DENSE, m->prec, e);
        if (rc) return rc;
        W = m->wwork;
    }
    /* 16-bit GEMM operands (fast bf16/fp16 where the backend has them): the
     * rounded weights' copy once per forward, activations' copies written
     * by the layers that produce them */
    const int m16 = use16(m);
    const uint16_t *W16 = m->w16;
    if (m16) rc = d->ops->cast(d, NULL, m->wwork, DT_F32, m->w16, m->prec, m->n_dense);
    if (rc) return err_set(e, rc, "ctr: casting the weights to %s on %s failed", dtype_name(m->prec), d->label);
    int ti = 0;
    for (int l = 0; l < c->n_bottom && !rc; l++, ti += 2) {
        if (m16) { /* the last layer's output feeds the interaction in fp32 */
            const int y16 = l + 1 < c->n_bottom && !in32(m, 0, l + 1);
            rc = T->linear_fwd16(d, NULL, in32(m, 0, l), in16(m, 0, l), W + m->t[ti].offset, W16 + m->t[ti].offset,
                                 W + m->t[ti + 1].offset, y16 ? NULL : m->act_b[l + 1], y16 ? m->act16_b[l + 1] : NULL,
                                 B, c->bottom[l], c->bottom[l + 1], 1, m->prec, e);
        } else
            rc = T->linear_fwd(d, NULL, m->act_b[l], W + m->t[ti].offset, W + m->t[ti + 1].offset, m->act_b[l + 1], B,
                               c->bottom[l], c->bottom[l + 1], 1, m->prec, e);
    }
    /* embeddings [B, 26, D] and the interaction [B, inter_w]: one fused op
     * where the backend has it (the same bits) */
    if (!rc && inter16(m)) {
        rc = T->embedding_interact_fwd16(d, NULL, m->params + m->n_dense, m->d_off, m->in_idx, m->act_b[c->n_bottom],
                                         m->emb, NULL, m->act16_t[0], inter_ld(m), B, CTR_N_TABLES, D, m->prec, e);
    } else if (!rc && T->embedding_interact_fwd) {
        rc = T->embedding_interact_fwd(d, NULL, m->params + m->n_dense, m->d_off, m->in_idx, m->act_b[c->n_bottom],
                                       m->emb, m->act_t[0], B, CTR_N_TABLES, D, m->prec, e);
    } else if (!rc) {
        rc = T->embedding_fwd(d, NULL, m->params + m->n_dense, m->d_off, m->in_idx, m->emb, B, CTR_N_TABLES, D,
                              m->prec, e);
        if (!rc)
            rc = T->interact_fwd(d, NULL, m->act_b[c->n_bottom], m->emb, m->act_t[0], B, CTR_N_TABLES, D, m->prec, e);
    }
    for (int l = 0; l < c->n_top && !rc; l++, ti += 2) {
        if (m16) { /* the logits are fp32 */
            const int y16 = l + 1 < c->n_top && !in32(m, 1, l + 1);
            rc = T->linear_fwd16(d, NULL, in32(m, 1, l), in16(m, 1, l), W + m->t[ti].offset, W16 + m->t[ti].offset,
                                 W + m->t[ti + 1].offset, y16 ? NULL : m->act_t[l + 1], y16 ? m->act16_t[l + 1] : NULL,
                                 B, c->top[l], c->top[l + 1], l < c->n_top - 1, m->prec, e);
        } else
            rc = T->linear_fwd(d, NULL, m->act_t[l], W + m->t[ti].offset, W + m->t[ti + 1].offset, m->act_t[l + 1], B,
                               c->top[l], c->top[l + 1], l < c->n_top - 1, m->prec, e);
    }
    return rc;
}

static int backward_after_forward(struct ctr_model *m, int B, int n_valid, float grad_scale, struct ctr_loss *loss,
                                  plumb_err *e);

int ctr_forward_backward(struct ctr_model *m, const struct ctr_batch *b, float grad_scale, struct ctr_loss *loss,
                         plumb_err *e)
{
    if (!b->labels) return err_set(e, PLUMB_EUSAGE, "ctr forward_backward: batch has no labels");
    int rc = forward(m, b, e);
    if (rc) return rc;
    return backward_after_forward(m, b->B, b->n_valid, grad_scale, loss, e);
}

int ctr_forward_backward_dev(struct ctr_model *m, const struct ctr_dev_batch *b, float grad_scale,
                             struct ctr_loss *loss, plumb_err *e)
{
    if (!b->labels) return err_set(e, PLUMB_EUSAGE, "ctr forward_backward: device batch has no labels");
    int rc = forward_dev(m, b, e);
    if (rc) return rc;
    return backward_after_forward(m, b->B, b->n_valid, grad_scale, loss, e);
}

int ctr_forward_dev(struct ctr_model *m, const struct ctr_dev_batch *b, plumb_err *e)
{
    int rc = forward_dev(m, b, e);
    if (!rc) rc = dev_sync(m->d, e);
    return rc;
}

/* the gradient ping-pong buffers and their 16-bit mirrors change roles */
static void swap_grads(float **cur, float **nxt, uint16_t **cur16, uint16_t **nxt16)
{
    float *s = *cur;
    *cur = *nxt;
    *nxt = s;
    uint16_t *s16 = *cur16;
    *cur16 = *nxt16;
    *nxt16 = s16;
}

static int backward_after_forward(struct ctr_model *m, int B, int n_valid, float grad_scale, struct ctr_loss *loss,
                                  plumb_err *e)
{
    struct dev *d = m->d;
    const struct train_ops *T = m->T;
    const struct ctr_config *c = &m->c;
    const int D = c->emb_dim;
    int rc;
    const float *W = m->prec != DT_F32 ? m->wwork : m->params;
    rc = T->bce_logits(d, NULL, m->act_t[c->n_top], m->in_label, B, n_valid, grad_scale, NULL, m->sc, m->g0, e);
    if (!rc && m->prec != DT_F32) rc = T->round_fp32(d, NULL, m->g0, m->g0, (size_t)B, m->prec, e);
    if (rc) return rc;
    /* top MLP backward: cur holds d(output of layer l) */
    float *cur = m->g0, *nxt = m->g1;
    int ti = 2 * (c->n_bottom + c->n_top) - 2;
    /* pre: cur is already masked by its layer's ReLU and that layer's dbias
     * done (linear_bwd_relu_in of the layer above, where the backend fuses) */
    int pre = 0;
    /* with 16-bit operands, cur16/nxt16 are the mirrors of cur/nxt */
    const int m16 = use16(m);
    const uint16_t *W16 = m->w16;
    uint16_t *cur16 = m->g16[0], *nxt16 = m->g16[1];
    int cur32 = 1; /* cur (fp32) holds the gradient; else only cur16 does */
    for (int l = c->n_top - 1; l >= 0 && !rc; l--, ti -= 2) {
        const int relu = l < c->n_top - 1 && !pre, fuse = bwd_fuses(m, l);
        float *db = pre ? NULL : m->grads + m->t[ti + 1].offset;
        if (m16) /* dx as the input: fp32 and/or 16-bit (l = 0: the interaction's gradient) */
            rc = T->linear_bwd16(d, NULL, in32(m, 1, l), in16(m, 1, l), W + m->t[ti].offset, W16 + m->t[ti].offset,
                                 relu ? m->act_t[l + 1] : NULL, cur32 ? cur : NULL, pre ? cur16 : NULL,
                                 in32(m, 1, l) ? nxt : NULL, l || inter16(m) ? nxt16 : NULL,
                                 m->grads + m->t[ti].offset, db, B, c->top[l], c->top[l + 1], relu, m->prec, fuse,
                                 fuse ? m->grads + m->t[ti - 1].offset : NULL, e);
        else if (fuse) /* act_t[l], l >= 1, is the output of ReLU layer l-1 */
            rc = T->linear_bwd_relu_in(d, NULL, m->act_t[l], W + m->t[ti].offset, m->act_t[l + 1], cur, nxt,
                                       m->grads + m->t[ti].offset, db, B, c->top[l], c->top[l + 1], relu, m->prec,
                                       m->grads + m->t[ti - 1].offset, e);
        else
            rc = T->linear_bwd(d, NULL, m->act_t[l], W + m->t[ti].offset, m->act_t[l + 1], cur, nxt,
                               m->grads + m->t[ti].offset, db, B, c->top[l], c->top[l + 1], relu, m->prec, e);
        if (!rc) rc = grad_ready(m, c->n_top - 1 - l, e);
        pre = fuse;
        cur32 = !m16 || in32(m, 1, l);
        swap_grads(&cur, &nxt, &cur16, &nxt16);
    }
    /* cur: d interaction output [B, inter_w] -> d bottom output (nxt), d emb;
     * or from its 16-bit padded copy alone (cur16, rows of inter_ld) */
    if (!rc && inter16(m))
        rc = T->interact_bwd16(d, NULL, m->act_b[c->n_bottom], m->emb, cur16, inter_ld(m), nxt, m->demb, B,
                               CTR_N_TABLES, D, m->prec, e);
    else if (!rc)
        rc = T->interact_bwd(d, NULL, m->act_b[c->n_bottom], m->emb, cur, nxt, m->demb, B, CTR_N_TABLES, D, m->prec, e);
    swap_grads(&cur, &nxt, &cur16, &nxt16);
    pre = 0;
    cur32 = 1;
    for (int l = c->n_bottom - 1; l >= 0 && !rc; l--, ti -= 2) {
        const int fuse = bwd_fuses(m, l); /* act_b[l], l >= 1: a ReLU output */
        float *db = pre ? NULL : m->grads + m->t[ti + 1].offset;
        if (m16) /* !pre: the last layer, its y (fp32, it feeds the interaction) read for the ReLU mask */
            rc = T->linear_bwd16(d, NULL, in32(m, 0, l), in16(m, 0, l), W + m->t[ti].offset, W16 + m->t[ti].offset,
                                 pre ? NULL : m->act_b[l + 1], cur32 ? cur : NULL, pre ? cur16 : NULL,
                                 l && in32(m, 0, l) ? nxt : NULL, l ? nxt16 : NULL,
                                 m->grads + m->t[ti].offset, db, B, c->bottom[l], c->bottom[l + 1], !pre, m->prec, fuse,
                                 fuse ? m->grads + m->t[ti - 1].offset : NULL, e);
        else if (fuse)
            rc = T->linear_bwd_relu_in(d, NULL, m->act_b[l], W + m->t[ti].offset, m->act_b[l + 1], cur, nxt,
                                       m->grads + m->t[ti].offset, db, B, c->bottom[l], c->bottom[l + 1], !pre,
                                       m->prec, m->grads + m->t[ti - 1].offset, e);
        else
            rc = T->linear_bwd(d, NULL, m->act_b[l], W + m->t[ti].offset, m->act_b[l + 1], cur, l > 0 ? nxt : NULL,
                               m->grads + m->t[ti].offset, db, B, c->bottom[l], c->bottom[l + 1], !pre, m->prec, e);
        if (!rc) rc = grad_ready(m, c->n_top + c->n_bottom - 1 - l, e);
        pre = fuse;
        cur32 = !m16 || in32(m, 0, l);
        swap_grads(&cur, &nxt, &cur16, &nxt16);
    }
    /* sparse gradient: the list (rows, rgrads), or applied to the table at once */
    const float flr = m->fused_lr;
    m->fused_lr = -1.0f;
    /* fused and a list asked for (the keep or prev of ctr_fuse_sparse_sgd): the rows always */
    const int list = flr >= 0.0f && (m->fused_keep || m->fused_prev);
    if (!rc && flr >= 0.0f) {
        const struct sgd_fused_out fo = {list ? m->rows : NULL, m->fused_keep ? m->rgrads : NULL, m->fused_prev,
                                         m->fused_found};
        rc = T->embedding_bwd_sgd(d, NULL, m->d_off, m->in_idx, m->demb, B, n_valid, CTR_N_TABLES, D,
                                  m->params + m->n_dense, flr, m->d_nrows, &fo, e);
    } else if (!rc)
        rc = T->embedding_bwd(d, NULL, m->d_off, m->in_idx, m->demb, B, n_valid, CTR_N_TABLES, D, m->rows,
                              m->rgrads, m->d_nrows, e);
    int64_t nr = 0;
    double sc[2] = {0, 0};
    if (!rc && m->deferred) {
        /* ctr_defer: the loss (sc) and the row count (d_nrows) stay on the device */
        m->nrows = 0;
        return PLUMB_OK;
    }
    if (!rc && flr >= 0.0f && !loss && !list) {
        /* fused and no loss asked for: nothing the host needs, so no
         * synchronisation here (the row count stays on the device) */
        m->nrows = 0;
        return PLUMB_OK;
    }
    if (!rc) rc = dev_download(d, &nr, m->d_nrows, sizeof nr, e);
    if (!rc) rc = dev_download(d, sc, m->sc, sizeof sc, e);
    if (rc) return rc;
    m->nrows = flr >= 0.0f && !list ? 0 : (size_t)nr; /* fused: the table is updated, no list left unless asked */
    if (loss) {
        loss->sum = sc[0];
        loss->count = (int64_t)sc[1];
    }
    return PLUMB_OK;
}

int ctr_predict(struct ctr_model *m, const struct ctr_batch *b, float *scores, float *logits, struct ctr_loss *loss,
                plumb_err *e)
{
    if (loss && !b->labels) return err_set(e, PLUMB_EUSAGE, "ctr predict: loss requested but batch has no labels");
    int rc = forward(m, b, e);
    if (rc) return rc;
    struct dev *d = m->d;
    const float *z = m->act_t[m->c.n_top];
    if (scores) {
        rc = m->T->sigmoid(d, NULL, z, m->scores, (size_t)b->B, e);
        if (!rc) rc = dev_download(d, scores, m->scores, (size_t)b->B * sizeof(float), e);
    }
    if (!rc && logits) rc = dev_download(d, logits, z, (size_t)b->B * sizeof(float), e);
    if (!rc && loss) {
        double sc[2];
        rc = m->T->bce_logits(d, NULL, z, m->in_label, b->B, b->n_valid, 0.0f, NULL, m->sc, NULL, e);
        if (!rc) rc = dev_download(d, sc, m->sc, sizeof sc, e);
        if (!rc) {
            loss->sum = sc[0];
            loss->count = (int64_t)sc[1];
        }
    }
    return rc;
}

/* ---------------- the fused sparse SGD ---------------- */

int ctr_fuse_sparse_sgd(struct ctr_model *m, float lr, int keep, float *prev, int *found_inf, plumb_err *e)
{
    if (!m->T->embedding_bwd_sgd)
        return err_set(e, PLUMB_EUNSUPPORTED, "%s has no fused sparse SGD", m->d->label);
    if (!(lr >= 0.0f) || !isfinite(lr)) return err_set(e, PLUMB_EUSAGE, "ctr fused sparse SGD: lr %g", (double)lr);
    m->fused_lr = lr;
    m->fused_keep = keep != 0;
    m->fused_prev = prev;
    m->fused_found = found_inf;
    return PLUMB_OK;
}


int ctr_defer(struct ctr_model *m, int on, const double **loss_dev, const int64_t **rows_n)
{
    m->deferred = on != 0;
    if (loss_dev) *loss_dev = m->sc;
    if (rows_n) *rows_n = m->d_nrows;
    return PLUMB_OK;
}

/* ---------------- digest ---------------- */

int ctr_param_digest(struct ctr_model *m, char hex[65], plumb_err *e)
{
    hash_sha256 h;
    if (hash_sha256_init(&h)) return err_set(e, PLUMB_EINTERNAL, "ctr digest: SHA-256 init failed");
    const size_t chunk = (size_t)1 << 22; /* floats */
    float *buf = malloc(chunk * sizeof(float));
    if (!buf) {
        uint8_t dummy[32];
        hash_sha256_final(&h, dummy);
        return err_set(e, PLUMB_ENOMEM, "ctr digest: out of memory");
    }
    int rc = PLUMB_OK;
    for (size_t i = 0; i < m->n_params && !rc; i += chunk) {
        size_t k = m->n_params - i < chunk ? m->n_params - i : chunk;
        rc = dev_download(m->d, buf, m->params + i, k * sizeof(float), e);
        if (!rc) hash_sha256_update(&h, buf, k * sizeof(float));
    }
    uint8_t out[32];
    hash_sha256_final(&h, out);
    free(buf);
    if (rc) return rc;
    hash_to_hex(out, 32, hex);
    return PLUMB_OK;
}
