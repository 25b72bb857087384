/* gpt: GPT-2 over the device's transformer ops (see gpt.h for the layout, the
 * gradient contract and precision). */
#include "models/gpt/gpt.h"
#include "models/gpt/gpt_model.h"
#include "core/envswitch.h"
#include "core/hash.h"
#include "core/philox.h"
#include "dev/train_ops.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------- configuration ---------------- */

int gpt_config_preset(const char *name, struct gpt_config *c, plumb_err *e)
{
    memset(c, 0, sizeof *c);
    if (!name) return err_set(e, PLUMB_EUSAGE, "gpt preset: none given (expected gpt-tiny or gpt2-124m)");
    if (!strcmp(name, "gpt-tiny")) {
        *c = (struct gpt_config){"", 2, 4, 64, 64, 256, 256};
    } else if (!strcmp(name, "gpt2-124m")) {
        *c = (struct gpt_config){"", 12, 12, 768, 1024, 50257, 50304};
    } else {
        return err_set(e, PLUMB_EUSAGE, "gpt preset '%s' unknown (expected gpt-tiny or gpt2-124m)", name);
    }
    snprintf(c->preset, sizeof c->preset, "%s", name);
    return gpt_config_validate(c, e);
}

int gpt_config_validate(const struct gpt_config *c, plumb_err *e)
{
    if (c->n_layer < 1 || c->n_layer > GPT_MAX_LAYERS)
        return err_set(e, PLUMB_EUSAGE, "gpt config: %d layers (expected 1..%d)", c->n_layer, GPT_MAX_LAYERS);
    if (c->n_head < 1 || c->n_embd < 1 || c->n_embd % c->n_head)
        return err_set(e, PLUMB_EUSAGE, "gpt config: width %d with %d heads (expected a positive multiple of the heads)",
                       c->n_embd, c->n_head);
    if (c->n_embd / c->n_head > 128) /* the GPU flash tiles' limit */
        return err_set(e, PLUMB_EUSAGE, "gpt config: head width %d (expected at most 128)", c->n_embd / c->n_head);
    if (c->n_embd > 65536) return err_set(e, PLUMB_EUSAGE, "gpt config: width %d (expected at most 65536)", c->n_embd);
    if (c->block_size < 1 || c->block_size > 1 << 20)
        return err_set(e, PLUMB_EUSAGE, "gpt config: context %d (expected 1..%d)", c->block_size, 1 << 20);
    if (c->vocab < 2 || c->vocab > 1 << 24)
        return err_set(e, PLUMB_EUSAGE, "gpt config: vocabulary %d (expected 2..%d)", c->vocab, 1 << 24);
    if (c->vocab_padded < c->vocab)
        return err_set(e, PLUMB_EUSAGE, "gpt config: padded vocabulary %d < vocabulary %d", c->vocab_padded, c->vocab);
    return PLUMB_OK;
}

void gpt_config_describe(const struct gpt_config *c, char *buf, size_t n)
{
    if (c->vocab_padded != c->vocab)
        snprintf(buf, n, "L%d H%d C%d T%d V%d (padded %d)", c->n_layer, c->n_head, c->n_embd, c->block_size, c->vocab,
                 c->vocab_padded);
    else
        snprintf(buf, n, "L%d H%d C%d T%d V%d", c->n_layer, c->n_head, c->n_embd, c->block_size, c->vocab);
}

/* ---------------- create / free ---------------- */

static size_t align_up(size_t x) { return (x + ALIGN_F - 1) / ALIGN_F * ALIGN_F; }

static void add_tensor(struct gpt_tensor *ts, int *nt, size_t *off, const char *name, int rows, int cols, int decay)
{
    struct gpt_tensor *t = &ts[(*nt)++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->offset = *off;
    t->rows = rows;
    t->cols = cols;
    t->numel = (size_t)rows * cols;
    t->decay = decay;
    *off = align_up(*off + t->numel);
}

int gpt_layout(const struct gpt_config *c, struct gpt_tensor *ts, int max, int *n_tensors, size_t *n_params,
               plumb_err *e)
{
    int rc = gpt_config_validate(c, e);
    if (rc) return rc;
    const int C = c->n_embd, L = c->n_layer, nt = 2 + T_PER_LAYER * L + 2;
    if (max < nt) return err_set(e, PLUMB_EUSAGE, "gpt layout: room for %d tensors, %d needed", max, nt);
    static const char *names[T_PER_LAYER] = {"ln_1.weight",      "ln_1.bias",      "attn.c_attn.weight",
                                             "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
                                             "ln_2.weight",      "ln_2.bias",      "mlp.c_fc.weight",
                                             "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};
    const int rows[T_PER_LAYER] = {1, 1, 3 * C, 1, C, 1, 1, 1, 4 * C, 1, C, 1};
    const int cols[T_PER_LAYER] = {C, C, C, 3 * C, C, C, C, C, C, 4 * C, 4 * C, C};
    size_t off = 0;
    int n = 0;
    char nm[48];
    add_tensor(ts, &n, &off, "wte", c->vocab_padded, C, 1);
    add_tensor(ts, &n, &off, "wpe", c->block_size, C, 1);
    for (int l = 0; l < L; l++)
        for (int k = 0; k < T_PER_LAYER; k++) {
            snprintf(nm, sizeof nm, "h.%d.%s", l, names[k]);
            add_tensor(ts, &n, &off, nm, rows[k], cols[k], rows[k] > 1);
        }
    add_tensor(ts, &n, &off, "ln_f.weight", 1, C, 0);
    add_tensor(ts, &n, &off, "ln_f.bias", 1, C, 0);
    *n_params = off;
    *n_tensors = n;
    return PLUMB_OK;
}

/* append [off, off + n) to the ranges r [2 *nr] (ascending), merged into
 * the last range where it starts where that one ends */
static void range_add(int64_t *r, int *nr, size_t off, size_t n)
{
    if (*nr && r[2 * *nr - 1] == (int64_t)off) {
        r[2 * *nr - 1] = (int64_t)(off + n);
    } else {
        r[2 * *nr] = (int64_t)off;
        r[2 * *nr + 1] = (int64_t)(off + n);
        (*nr)++;
    }
}

static int zalloc(struct gpt_model *m, void **p, size_t bytes, plumb_err *e)
{
    int rc = dev_alloc(m->d, bytes ? bytes : 8, p, e);
    if (rc) return err_wrap(e, "gpt: allocating %zu bytes", bytes);
    return m->d->be->memset_async(m->d, NULL, *p, 0, bytes ? bytes : 8, e);
}

void gpt_free(struct gpt_model *m)
{
    if (!m) return;
    void *ps[] = {m->params, m->grads, m->wwork, m->w16, m->r16, m->tok, m->tgt, m->act, m->sc, m->logits};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        if (ps[i]) dev_free(m->d, ps[i]);
    free(m);
}

/* the ops the model calls */
static int has_ops(const struct train_ops *T)
{
    return T && T->encoder_fwd && T->encoder_bwd && T->layernorm_fwd && T->layernorm_bwd && T->matmul_fwd &&
           T->matmul_bwd && T->attention_fwd && T->attention_bwd && T->residual_fwd && T->classifier_fwd_bwd &&
           T->round_fp32 && T->affine;
}

int gpt_create(struct dev *d, const struct gpt_config *c, int max_batch, dtype_t precision, struct gpt_model **out,
               plumb_err *e)
{
    *out = NULL;
    int rc = gpt_config_validate(c, e);
    if (rc) return rc;
    if (!has_ops(d->ops->train))
        return err_set(e, PLUMB_EUNSUPPORTED, "gpt: device %s has no transformer training ops", d->label);
    if (max_batch < 1 || (double)max_batch * c->block_size > 2147483647.0 / (4.0 * c->n_embd))
        return err_set(e, PLUMB_EUSAGE, "gpt: batch %d x context %d (expected 1.. and rows x 4C below 2^31)", max_batch,
                       c->block_size);
    if (precision != DT_F32 && precision != DT_BF16 && precision != DT_F16)
        return err_set(e, PLUMB_EUSAGE, "gpt: precision %s (expected fp32, bf16 or fp16)", dtype_name(precision));
    struct gpt_model *m = calloc(1, sizeof *m);
    if (!m) return err_set(e, PLUMB_ENOMEM, "gpt: out of host memory");
    m->d = d;
    m->T = d->ops->train;
    m->c = *c;
    m->prec = precision;
    m->max_batch = max_batch;
    const int C = c->n_embd, L = c->n_layer;
    if ((rc = gpt_layout(c, m->t, MAX_TENSORS, &m->n_tensors, &m->n_params, e))) {
        free(m);
        return rc;
    }
    for (int i = 0; i < m->n_tensors; i++) {
        const struct gpt_tensor *t = &m->t[i];
        if (i >= 2) m->n_nonemb += t->numel;
        if (t->decay) range_add(m->dec, &m->n_dec, t->offset, t->numel);
    }
    /* activations: rows R = max_batch * block_size */
    const size_t R = (size_t)max_batch * c->block_size, RC = R * C, lse_n = R * c->n_head;
    const size_t per_layer = RC * (1 + 3 + 1 + 1 + 1 + 4 + 4 + 1) + 4 * R + lse_n;
    const size_t total = RC + (size_t)L * per_layer + RC + 2 * R + R + RC /* tmp */ +
                         RC * (1 + 1 + 1 + 3 + 4 + 1) /* dres dln datt dqkv dfc dy16 */;
    const size_t fs = sizeof(float);
    rc = zalloc(m, (void **)&m->params, m->n_params * fs, e);
    if (!rc) rc = zalloc(m, (void **)&m->grads, m->n_params * fs, e);
    if (!rc && precision != DT_F32) rc = zalloc(m, (void **)&m->wwork, m->n_params * fs, e);
    int want16 = 0;
    if (!rc) rc = gpt16_wanted(m, &want16, e);
    if (!rc && want16) rc = zalloc(m, (void **)&m->w16, m->n_params * sizeof(uint16_t), e);
    if (!rc && want16) {
        /* the blocks' four matrices and their biases a layer, adjacent ones
         * merged (QKVW..APB and FCW..FPB: two ranges a layer): gpt16.c casts
         * only these to 16 bits (weights16), for the GEMMs and their bias
         * epilogues (matmul_fwd16's bias16) */
        int64_t r[2 * (8 * GPT_MAX_LAYERS + 1)];
        int nr = 0;
        /* wte (all vocab_padded rows: the padding rows are 0, as gpt_init
         * leaves them and no gradient reaches them, so finite) where the
         * device's classifier reads 16-bit weights */
        m->cls16 = 0;
        if (m->T->classifier_fwd_bwd16)
            rc = env_switch("PLUMB_GPT_CLS16", "the classifier from 16-bit weights (wte cast with the blocks' weights)",
                            &m->cls16, e);
        if (!rc && m->cls16) range_add(r, &nr, m->t[0].offset, m->t[0].numel);
        const int ks[8] = {QKVW, QKVB, APW, APB, FCW, FCB, FPW, FPB};
        for (int l = 0; l < L; l++)
            for (int k = 0; k < 8; k++) {
                const struct gpt_tensor *t = &m->t[2 + T_PER_LAYER * l + ks[k]];
                range_add(r, &nr, t->offset, t->numel);
            }
        m->n_r16 = nr;
        if (!rc) rc = zalloc(m, (void **)&m->r16, sizeof r, e);
        if (!rc) rc = dev_upload(d, m->r16, r, (size_t)nr * 2 * sizeof(int64_t), e);
    }
    if (!rc) rc = zalloc(m, (void **)&m->tok, R * sizeof(int32_t), e);
    if (!rc) rc = zalloc(m, (void **)&m->tgt, R * sizeof(int32_t), e);
    if (!rc) rc = zalloc(m, (void **)&m->sc, 2 * sizeof(double), e);
    if (!rc) rc = zalloc(m, (void **)&m->act, total * fs, e);
    if (!rc) rc = dev_sync(d, e);
    if (rc) {
        gpt_free(m);
        return rc;
    }
    float *p = m->act;
#define TAKE(ptr, n) (ptr = p, p += (n))
    TAKE(m->enc, RC);
    for (int l = 0; l < L; l++) {
        struct gpt_layer_act *a = &m->L[l];
        TAKE(a->ln1, RC);
        TAKE(a->ln1_mean, R);
        TAKE(a->ln1_rstd, R);
        TAKE(a->qkv, 3 * RC);
        TAKE(a->att, RC);
        TAKE(a->lse, lse_n);
        TAKE(a->res2, RC);
        TAKE(a->ln2, RC);
        TAKE(a->ln2_mean, R);
        TAKE(a->ln2_rstd, R);
        TAKE(a->fc, 4 * RC);
        TAKE(a->fc_gelu, 4 * RC);
        TAKE(a->res3, RC);
    }
    TAKE(m->lnf, RC);
    TAKE(m->lnf_mean, R);
    TAKE(m->lnf_rstd, R);
    TAKE(m->losses, R);
    TAKE(m->tmp, RC);
    TAKE(m->dres, RC);
    TAKE(m->dln, RC);
    TAKE(m->datt, RC);
    TAKE(m->dqkv, 3 * RC);
    TAKE(m->dfc, 4 * RC);
    TAKE(m->dy16, RC);
#undef TAKE
    if ((size_t)(p - m->act) != total) {
        gpt_free(m);
        return err_set(e, PLUMB_EINTERNAL, "gpt: activation layout %zu floats, allocated %zu", (size_t)(p - m->act),
                       total);
    }
    *out = m;
    return PLUMB_OK;
}

/* ---------------- accessors ---------------- */

const struct gpt_config *gpt_config_of(const struct gpt_model *m) { return &m->c; }
size_t gpt_n_params(const struct gpt_model *m) { return m->n_params; }
int gpt_n_tensors(const struct gpt_model *m) { return m->n_tensors; }
const struct gpt_tensor *gpt_tensor(const struct gpt_model *m, int i)
{
    return i >= 0 && i < m->n_tensors ? &m->t[i] : NULL;
}
const struct gpt_tensor *gpt_tensor_named(const struct gpt_model *m, const char *name)
{
    for (int i = 0; i < m->n_tensors; i++)
        if (!strcmp(m->t[i].name, name)) return &m->t[i];
    return NULL;
}
float *gpt_params(struct gpt_model *m) { return m->params; }
float *gpt_grads(struct gpt_model *m) { return m->grads; }
struct dev *gpt_dev(struct gpt_model *m) { return m->d; }
const double *gpt_loss_dev(const struct gpt_model *m) { return m->sc; }
int gpt_max_batch(const struct gpt_model *m) { return m->max_batch; }
dtype_t gpt_precision(const struct gpt_model *m) { return m->prec; }
const int64_t *gpt_decay_ranges(const struct gpt_model *m, int *n)
{
    *n = m->n_dec;
    return m->dec;
}
size_t gpt_n_nonembedding(const struct gpt_model *m) { return m->n_nonemb; }
double gpt_flops_per_token(const struct gpt_model *m, int T)
{
    return 6.0 * (double)m->n_nonemb + 12.0 * m->c.n_layer * (double)T * m->c.n_embd;
}

void gpt_set_grad_ready_hook(struct gpt_model *m, gpt_grad_ready_fn fn, void *ctx)
{
    m->ready = fn;
    m->ready_ctx = ctx;
}
void gpt_set_forward_done_hook(struct gpt_model *m, gpt_forward_done_fn fn, void *ctx)
{
    m->fwd_done = fn;
    m->fwd_done_ctx = ctx;
}

/* first float of block l's tensors; l = L: ln_f */
static size_t block_start(const struct gpt_model *m, int l) { return m->t[2 + T_PER_LAYER * l].offset; }

static void range_of(const struct gpt_model *m, int k, size_t *off, size_t *len)
{
    const int L = m->c.n_layer;
    size_t a, b;
    if (k == 0) {
        a = block_start(m, L);
        b = m->n_params;
    } else if (k <= L) {
        a = block_start(m, L - k);
        b = block_start(m, L - k + 1);
    } else {
        a = 0;
        b = block_start(m, 0);
    }
    *off = a;
    *len = b - a;
}

int gpt_grad_layers(const struct gpt_model *m, size_t *off, size_t *len)
{
    for (int k = 0; k < m->c.n_layer + 2; k++) range_of(m, k, &off[k], &len[k]);
    return m->c.n_layer + 2;
}

int gpt_grad_ready_block(struct gpt_model *m, int k, plumb_err *e)
{
    if (!m->ready) return PLUMB_OK;
    size_t off, len;
    range_of(m, k, &off, &len);
    return m->ready(m->ready_ctx, k, off, len, NULL, e);
}

/* ---------------- init ---------------- */

static int init_tensor_host(struct gpt_model *m, const struct gpt_tensor *t, size_t n, uint64_t seed, uint32_t id,
                            float a, plumb_err *e)
{
    const size_t chunk = (size_t)1 << 20;
    float *h = malloc((n < chunk ? n : chunk) * sizeof(float) + 4);
    if (!h) return err_set(e, PLUMB_ENOMEM, "gpt init: out of host memory");
    int rc = PLUMB_OK;
    for (size_t i0 = 0; i0 < n && !rc; i0 += chunk) {
        const size_t k = n - i0 < chunk ? n - i0 : chunk;
#pragma omp parallel for schedule(static) if (k > 65536)
        for (size_t i = 0; i < k; i++) h[i] = fmaf(a, philox_normal_at(seed, RNG_INIT, id, 0, i0 + i), 0.0f);
        rc = dev_upload(m->d, m->params + t->offset + i0, h, k * sizeof(float), e);
    }
    free(h);
    return rc;
}

int gpt_init(struct gpt_model *m, uint64_t seed, plumb_err *e)
{
    struct dev *d = m->d;
    const int on_dev = d->ops->rng_normal != NULL;
    int rc = d->be->memset_async(d, NULL, m->params, 0, m->n_params * sizeof(float), e);
    const float std = 0.02f, std_res = (float)(0.02 / sqrt(2.0 * m->c.n_layer));
    for (int i = 0; i < m->n_tensors && !rc; i++) {
        const struct gpt_tensor *t = &m->t[i];
        float *p = m->params + t->offset;
        if (!t->decay) { /* vectors: LayerNorm weights 1, everything else 0 */
            if (strstr(t->name, "ln_") && strstr(t->name, ".weight"))
                rc = m->T->affine(d, NULL, p, p, t->numel, 0.0f, 1.0f, e);
            continue;
        }
        const float a = strstr(t->name, "c_proj.weight") ? std_res : std;
        /* wte: only the V real rows are drawn; the padding rows stay 0 */
        const size_t n = i == 0 ? (size_t)m->c.vocab * t->cols : t->numel;
        if (!on_dev) {
            rc = init_tensor_host(m, t, n, seed, (uint32_t)i, a, e);
            continue;
        }
        struct rng_stream st = {seed, (uint32_t)RNG_INIT, (uint32_t)i, 0};
        rc = d->ops->rng_normal(d, NULL, &st, 0, p, n);
        if (!rc) rc = m->T->affine(d, NULL, p, p, n, a, 0.0f, e);
        if (rc && e && !e->msg[0]) err_set(e, rc, "gpt init: rng op failed for %s", t->name);
    }
    if (!rc) rc = dev_sync(d, e);
    return rc;
}

/* ---------------- forward ---------------- */

int gpt_check_batch(const struct gpt_model *m, const struct gpt_batch *b, plumb_err *e)
{
    if (b->B < 1 || b->B > m->max_batch)
        return err_set(e, PLUMB_EUSAGE, "gpt batch: B=%d (expected 1..%d)", b->B, m->max_batch);
    if (b->n_valid < 0 || b->n_valid > b->B)
        return err_set(e, PLUMB_EUSAGE, "gpt batch: n_valid=%d (expected 0..%d)", b->n_valid, b->B);
    if (b->T < 1 || b->T > m->c.block_size)
        return err_set(e, PLUMB_EUSAGE, "gpt batch: T=%d (expected 1..%d)", b->T, m->c.block_size);
    if (!b->tokens) return err_set(e, PLUMB_EUSAGE, "gpt batch: no tokens");
    const size_t n = (size_t)b->B * b->T, nv = (size_t)b->n_valid * b->T;
    for (size_t i = 0; i < n; i++) {
        if (b->tokens[i] < 0 || b->tokens[i] >= m->c.vocab)
            return err_set(e, PLUMB_EUSAGE, "gpt batch: sequence %zu, position %zu: token %d (expected 0..%d)",
                           i / b->T, i % b->T, b->tokens[i], m->c.vocab - 1);
        if (b->targets && i < nv && (b->targets[i] < -1 || b->targets[i] >= m->c.vocab))
            return err_set(e, PLUMB_EUSAGE, "gpt batch: sequence %zu, position %zu: target %d (expected -1..%d)",
                           i / b->T, i % b->T, b->targets[i], m->c.vocab - 1);
    }
    return PLUMB_OK;
}


/* embeddings through ln_f for B sequences of T positions (inputs in m->tok) */
static int forward_compute(struct gpt_model *m, int B, int T, plumb_err *e)
{
    struct dev *d = m->d;
    const struct train_ops *Op = m->T;
    const int C = m->c.n_embd, NH = m->c.n_head, HS = C / NH, R = B * T;
    const dtype_t rt = m->prec;
    const size_t RC = (size_t)R * C;
    if (gpt16_on(m)) return gpt16_forward(m, B, T, e);
    int rc = PLUMB_OK;
    if (m->wwork) rc = Op->round_fp32(d, NULL, m->params, m->wwork, m->n_params, rt, e);
    /* enc [R,C] = wte[tok] + wpe (the residual stream: fp32) */
    if (!rc) rc = Op->encoder_fwd(d, NULL, m->params, m->params + m->t[1].offset, m->tok, m->enc, B, T, C, DT_F32, e);
    const float *x = m->enc;
    for (int l = 0; l < m->c.n_layer && !rc; l++) {
        struct gpt_layer_act *a = &m->L[l];
        rc = Op->layernorm_fwd(d, NULL, x, P(m, l, LN1W), P(m, l, LN1B), a->ln1, a->ln1_mean, a->ln1_rstd, R, C,
                               GPT_LN_EPS, rt, e);
        if (!rc) rc = Op->matmul_fwd(d, NULL, a->ln1, W(m, l, QKVW), W(m, l, QKVB), a->qkv, NULL, R, C, 3 * C, 0, rt, e);
        if (!rc) rc = Op->attention_fwd(d, NULL, a->qkv, a->att, a->lse, B, T, NH, HS, rt, e);
        if (!rc) rc = Op->matmul_fwd(d, NULL, a->att, W(m, l, APW), W(m, l, APB), m->tmp, NULL, R, C, C, 0, rt, e);
        if (!rc) rc = Op->residual_fwd(d, NULL, x, m->tmp, a->res2, RC, DT_F32, e);
        if (!rc)
            rc = Op->layernorm_fwd(d, NULL, a->res2, P(m, l, LN2W), P(m, l, LN2B), a->ln2, a->ln2_mean, a->ln2_rstd, R,
                                   C, GPT_LN_EPS, rt, e);
        if (!rc) rc = Op->matmul_fwd(d, NULL, a->ln2, W(m, l, FCW), W(m, l, FCB), a->fc_gelu, a->fc, R, C, 4 * C, 1, rt, e);
        if (!rc) rc = Op->matmul_fwd(d, NULL, a->fc_gelu, W(m, l, FPW), W(m, l, FPB), m->tmp, NULL, R, 4 * C, C, 0, rt, e);
        if (!rc) rc = Op->residual_fwd(d, NULL, a->res2, m->tmp, a->res3, RC, DT_F32, e);
        x = a->res3;
    }
    const struct gpt_tensor *lw = &m->t[m->n_tensors - 2], *lb = &m->t[m->n_tensors - 1];
    if (!rc)
        rc = Op->layernorm_fwd(d, NULL, x, m->params + lw->offset, m->params + lb->offset, m->lnf, m->lnf_mean,
                               m->lnf_rstd, R, C, GPT_LN_EPS, rt, e);
    return rc;
}

/* the padding rows' targets as -1 (all bytes 0xff): never scored */
static int mask_padding(struct gpt_model *m, int B, int n_valid, int T, plumb_err *e)
{
    if (n_valid >= B) return PLUMB_OK;
    return m->d->be->memset_async(m->d, NULL, m->tgt + (size_t)n_valid * T, 0xff,
                                  (size_t)(B - n_valid) * T * sizeof(int32_t), e);
}

static int upload_batch(struct gpt_model *m, const struct gpt_batch *b, plumb_err *e)
{
    int rc = gpt_check_batch(m, b, e);
    if (rc) return rc;
    const size_t n = (size_t)b->B * b->T;
    rc = dev_upload(m->d, m->tok, b->tokens, n * sizeof(int32_t), e);
    if (!rc && b->targets) rc = dev_upload(m->d, m->tgt, b->targets, n * sizeof(int32_t), e);
    if (!rc && b->targets) rc = mask_padding(m, b->B, b->n_valid, b->T, e);
    return rc;
}

static int copy_dev_batch(struct gpt_model *m, const struct gpt_dev_batch *b, plumb_err *e)
{
    if (b->B < 1 || b->B > m->max_batch || b->T < 1 || b->T > m->c.block_size || b->n_valid < 0 || b->n_valid > b->B)
        return err_set(e, PLUMB_EUSAGE, "gpt device batch: B=%d n_valid=%d T=%d (expected 1..%d, 0..B, 1..%d)", b->B,
                       b->n_valid, b->T, m->max_batch, m->c.block_size);
    const size_t n = (size_t)b->B * b->T * sizeof(int32_t);
    int rc = m->d->be->memcpy_async(m->d, NULL, m->tok, b->tokens, n, MEMCPY_D2D, e);
    if (!rc && b->targets) rc = m->d->be->memcpy_async(m->d, NULL, m->tgt, b->targets, n, MEMCPY_D2D, e);
    if (!rc && b->targets) rc = mask_padding(m, b->B, b->n_valid, b->T, e);
    return rc;
}

/* ---------------- backward ---------------- */

/* the gradient arriving at a GEMM, in the precision (autograd hands a 16-bit
 * output's gradient over in 16 bits): dres itself with fp32 compute */
static const float *gemm_dy(struct gpt_model *m, size_t n, int *rc, plumb_err *e)
{
    if (m->prec == DT_F32) return m->dres;
    *rc = m->T->round_fp32(m->d, NULL, m->dres, m->dy16, n, m->prec, e);
    return m->dy16;
}

/* the tied classifier over ln_f's R rows (m->lnf, m->tgt): losses into
 * m->losses and m->sc; with grad, dln_f into m->dln and dwte into the
 * gradients' first rows. In 16 bits where the 16-bit pipeline runs and the
 * device has the op (gpt_cls16): ln_f's output, w16's wte and dln_f as
 * 16-bit values in the first half of their regions (gpt16.c); else fp32
 * from the working copy. */
long gpt_cls16_count;
static int classifier(struct gpt_model *m, int R, float grad_scale, int grad, plumb_err *e)
{
    const int C = m->c.n_embd, V = m->c.vocab;
    if (gpt_cls16(m)) {
        gpt_cls16_count++;
        return m->T->classifier_fwd_bwd16(m->d, NULL, h16(m->lnf), m->w16 + m->t[0].offset, m->c.vocab_padded,
                                          m->tgt, R, C, V, grad_scale, m->losses, m->sc, grad ? h16(m->dln) : NULL,
                                          grad ? m->grads : NULL, m->prec, e);
    }
    return m->T->classifier_fwd_bwd(m->d, NULL, m->lnf, gemm_weights(m), m->tgt, R, C, V, grad_scale, m->losses, m->sc,
                                    grad ? m->dln : NULL, grad ? m->grads : NULL, m->prec, e);
}

static int backward(struct gpt_model *m, int B, int T, float grad_scale, struct gpt_loss *loss, plumb_err *e)
{
    struct dev *d = m->d;
    const struct train_ops *Op = m->T;
    const int C = m->c.n_embd, NH = m->c.n_head, HS = C / NH, R = B * T, L = m->c.n_layer, V = m->c.vocab;
    const dtype_t rt = m->prec;
    const size_t RC = (size_t)R * C;
    const struct gpt_tensor *lw = &m->t[m->n_tensors - 2], *lb = &m->t[m->n_tensors - 1];
    /* logits, loss and dln_f; the tied classifier writes dwte's first part */
    int rc = classifier(m, R, grad_scale, 1, e);
    /* padding rows of wte get no gradient */
    if (!rc && m->c.vocab_padded > V)
        rc = d->be->memset_async(d, NULL, m->grads + (size_t)V * C, 0, (size_t)(m->c.vocab_padded - V) * C * sizeof(float),
                                 e);
    /* dres = gradient of the last block's output (fp32, unrounded); in 16
     * bits (gpt_cls16) from dln_f's 16-bit values, also storing dres's cast
     * (the last block's first dy16) and its column sums (that block's last
     * dbias), which gpt16_backward_blocks then takes as they are */
    const int cls16 = gpt_cls16(m);
    if (!rc && cls16)
        rc = Op->layernorm_bwd16(d, NULL, m->L[L - 1].res3, m->params + lw->offset, m->lnf_mean, m->lnf_rstd,
                                 h16(m->dln), NULL, m->dres, h16(m->dy16), G(m, L - 1, FPB), m->grads + lw->offset,
                                 m->grads + lb->offset, R, C, rt, e);
    else if (!rc)
        rc = Op->layernorm_bwd(d, NULL, m->L[L - 1].res3, m->params + lw->offset, m->lnf_mean, m->lnf_rstd, m->dln, NULL,
                               m->dres, m->grads + lw->offset, m->grads + lb->offset, R, C, DT_F32, e);
    if (!rc) rc = gpt_grad_ready_block(m, 0, e);
    if (!rc && gpt16_on(m)) rc = gpt16_backward_blocks(m, B, T, cls16, e);
    for (int l = L - 1; l >= 0 && !rc && !gpt16_on(m); l--) {
        struct gpt_layer_act *a = &m->L[l];
        const float *x = l ? m->L[l - 1].res3 : m->enc;
        /* MLP: res3 = res2 + proj(gelu(fc(ln2(res2)))) */
        const float *dy = gemm_dy(m, RC, &rc, e);
        if (!rc)
            rc = Op->matmul_bwd(d, NULL, a->fc_gelu, W(m, l, FPW), dy, a->fc, m->dfc, G(m, l, FPW), G(m, l, FPB), R, 4 * C,
                                C, rt, e);
        if (!rc)
            rc = Op->matmul_bwd(d, NULL, a->ln2, W(m, l, FCW), m->dfc, NULL, m->dln, G(m, l, FCW), G(m, l, FCB), R, C,
                                4 * C, rt, e);
        if (!rc)
            rc = Op->layernorm_bwd(d, NULL, a->res2, P(m, l, LN2W), a->ln2_mean, a->ln2_rstd, m->dln, m->dres, m->dres,
                                   G(m, l, LN2W), G(m, l, LN2B), R, C, DT_F32, e);
        /* attention: res2 = x + proj(attention(qkv(ln1(x)))) */
        if (!rc) dy = gemm_dy(m, RC, &rc, e);
        if (!rc)
            rc = Op->matmul_bwd(d, NULL, a->att, W(m, l, APW), dy, NULL, m->datt, G(m, l, APW), G(m, l, APB), R, C, C, rt,
                                e);
        if (!rc) rc = Op->attention_bwd(d, NULL, a->qkv, a->att, a->lse, m->datt, m->dqkv, B, T, NH, HS, rt, e);
        if (!rc)
            rc = Op->matmul_bwd(d, NULL, a->ln1, W(m, l, QKVW), m->dqkv, NULL, m->dln, G(m, l, QKVW), G(m, l, QKVB), R,
                                C, 3 * C, rt, e);
        if (!rc)
            rc = Op->layernorm_bwd(d, NULL, x, P(m, l, LN1W), a->ln1_mean, a->ln1_rstd, m->dln, m->dres, m->dres,
                                   G(m, l, LN1W), G(m, l, LN1B), R, C, DT_F32, e);
        if (!rc) rc = gpt_grad_ready_block(m, L - l, e);
    }
    /* embeddings: dwte += scatter of dres, dwpe[0:T) = column sums; rows
     * T..block_size-1 of wpe get no gradient from this batch */
    if (!rc) rc = Op->encoder_bwd(d, NULL, m->dres, m->tok, m->grads, m->grads + m->t[1].offset, B, T, C, e);
    if (!rc && T < m->c.block_size)
        rc = d->be->memset_async(d, NULL, m->grads + m->t[1].offset + (size_t)T * C, 0,
                                 (size_t)(m->c.block_size - T) * C * sizeof(float), e);
    if (!rc) rc = gpt_grad_ready_block(m, L + 1, e);
    /* no loss asked for (the trainer's deferred step): nothing read back, no wait */
    if (!loss) return rc;
    double sc[2] = {0, 0};
    if (!rc) rc = dev_download(d, sc, m->sc, sizeof sc, e);
    if (!rc) {
        loss->sum = sc[0];
        loss->count = (int64_t)sc[1];
    }
    return rc;
}

int gpt_forward_backward(struct gpt_model *m, const struct gpt_batch *b, float grad_scale, struct gpt_loss *loss,
                         plumb_err *e)
{
    if (!b->targets) return err_set(e, PLUMB_EUSAGE, "gpt forward_backward: batch has no targets");
    int rc = upload_batch(m, b, e);
    if (!rc) rc = forward_compute(m, b->B, b->T, e);
    if (!rc && m->fwd_done) rc = m->fwd_done(m->fwd_done_ctx, e);
    if (!rc) rc = backward(m, b->B, b->T, grad_scale, loss, e);
    return rc;
}

int gpt_forward_backward_dev(struct gpt_model *m, const struct gpt_dev_batch *b, float grad_scale,
                             struct gpt_loss *loss, plumb_err *e)
{
    if (!b->targets) return err_set(e, PLUMB_EUSAGE, "gpt forward_backward: device batch has no targets");
    int rc = copy_dev_batch(m, b, e);
    if (!rc) rc = forward_compute(m, b->B, b->T, e);
    if (!rc && m->fwd_done) rc = m->fwd_done(m->fwd_done_ctx, e);
    if (!rc) rc = backward(m, b->B, b->T, grad_scale, loss, e);
    return rc;
}

static int predict_after_forward(struct gpt_model *m, int B, int T, int have_tgt, float *losses, struct gpt_loss *loss,
                                 plumb_err *e)
{
    if ((losses || loss) && !have_tgt) return err_set(e, PLUMB_EUSAGE, "gpt predict: losses asked for without targets");
    const int R = B * T;
    int rc = PLUMB_OK;
    if (losses || loss)
        rc = classifier(m, R, 1.0f, 0, e);
    if (!rc && losses) rc = dev_download(m->d, losses, m->losses, (size_t)R * sizeof(float), e);
    if (!rc && loss) {
        double sc[2];
        rc = dev_download(m->d, sc, m->sc, sizeof sc, e);
        if (!rc) {
            loss->sum = sc[0];
            loss->count = (int64_t)sc[1];
        }
    }
    if (!rc) rc = dev_sync(m->d, e);
    return rc;
}

int gpt_predict(struct gpt_model *m, const struct gpt_batch *b, float *losses, struct gpt_loss *loss, plumb_err *e)
{
    int rc = upload_batch(m, b, e);
    if (!rc) rc = forward_compute(m, b->B, b->T, e);
    if (!rc) rc = predict_after_forward(m, b->B, b->T, b->targets != NULL, losses, loss, e);
    return rc;
}

int gpt_predict_dev(struct gpt_model *m, const struct gpt_dev_batch *b, float *losses, struct gpt_loss *loss,
                    plumb_err *e)
{
    int rc = copy_dev_batch(m, b, e);
    if (!rc) rc = forward_compute(m, b->B, b->T, e);
    if (!rc) rc = predict_after_forward(m, b->B, b->T, b->targets != NULL, losses, loss, e);
    return rc;
}

#define LG_ROWS 64 /* rows of logits per GEMM in gpt_logits */

int gpt_logits(struct gpt_model *m, const struct gpt_batch *b, float *logits, plumb_err *e)
{
    int rc = upload_batch(m, b, e);
    if (!rc) rc = forward_compute(m, b->B, b->T, e);
    const int R = b->B * b->T, C = m->c.n_embd, V = m->c.vocab;
    if (!rc && !m->logits) rc = zalloc(m, (void **)&m->logits, (size_t)LG_ROWS * V * sizeof(float), e);
    /* in 16 bits (gpt_cls16) ln_f's output is 16-bit (widened into tmp) and
     * the working copy has no wte (rounded into it here) */
    const float *x = m->lnf;
    if (!rc && gpt_cls16(m)) {
        const struct gpt_tensor *t0 = &m->t[0];
        rc = m->d->ops->cast(m->d, NULL, m->lnf, m->prec, m->tmp, DT_F32, (size_t)R * C);
        if (!rc) rc = m->T->round_fp32(m->d, NULL, m->params + t0->offset, m->wwork + t0->offset, t0->numel, m->prec, e);
        if (rc && !e->msg[0]) err_set(e, rc, "gpt logits: widening ln_f's 16-bit output failed on %s", m->d->label);
        x = m->tmp;
    }
    /* z = round(ln_f(x) wte^T): the classifier's logits are this GEMM's chain */
    for (int r0 = 0; r0 < R && !rc; r0 += LG_ROWS) {
        const int nr = R - r0 < LG_ROWS ? R - r0 : LG_ROWS;
        rc = m->T->matmul_fwd(m->d, NULL, x + (size_t)r0 * C, gemm_weights(m), NULL, m->logits, NULL, nr, C, V, 0,
                              m->prec, e);
        if (!rc) rc = dev_download(m->d, logits + (size_t)r0 * V, m->logits, (size_t)nr * V * sizeof(float), e);
    }
    return rc;
}

/* ---------------- digest ---------------- */

int gpt_param_digest(struct gpt_model *m, char hex[65], plumb_err *e)
{
    hash_sha256 h;
    if (hash_sha256_init(&h)) return err_set(e, PLUMB_EINTERNAL, "gpt digest: SHA-256 init failed");
    const size_t chunk = (size_t)1 << 22;
    float *buf = malloc(chunk * sizeof(float));
    if (!buf) {
        uint8_t dummy[32];
        hash_sha256_final(&h, dummy);
        return err_set(e, PLUMB_ENOMEM, "gpt digest: out of memory");
    }
    int rc = PLUMB_OK;
    for (size_t i = 0; i < m->n_params && !rc; i += chunk) {
        const size_t k = m->n_params - i < chunk ? m->n_params - i : chunk;
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
