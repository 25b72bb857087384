/* Optimizers over a tensor list: see optim.h. */
#include "train/optim.h"
#include <math.h>
#include <string.h>

int optim_init(struct optim *o, struct dev *d, const struct model_layout *L, const char *kind, double weight_decay,
               double momentum, double beta1, double beta2, double eps, plumb_err *e)
{
    memset(o, 0, sizeof *o);
    if (!d->ops->train) return err_set(e, PLUMB_EUNSUPPORTED, "device %s has no training ops", d->label);
    o->d = d;
    o->T = d->ops->train;
    o->L = L;
    if (!strcmp(kind, "sgd")) o->kind = OPTIM_SGD;
    else if (!strcmp(kind, "adamw")) o->kind = OPTIM_ADAMW;
    else return err_set(e, PLUMB_EUSAGE, "optimizer '%s' (expected sgd or adamw)", kind);
    o->weight_decay = (float)weight_decay;
    o->momentum = (float)momentum;
    o->beta1 = (float)beta1;
    o->beta2 = (float)beta2;
    o->eps = (float)eps;
    if (o->kind == OPTIM_SGD && o->momentum > 0 && !o->T->sgd_momentum)
        return err_set(e, PLUMB_EUNSUPPORTED, "--momentum %g: device %s has no sgd_momentum op", momentum, d->label);
    /* dense ranges: the dense tensors in offset order, a new range where
     * the decay flag changes; the first starts at 0, the last ends at n_dense */
    int nt = L->n_tensors, nd = 0;
    const struct model_tensor *order[OPTIM_MAX_DENSE]; /* 16 KiB */
    for (int i = 0; i < nt; i++) {
        const struct model_tensor *t = &L->tensors[i];
        if (t->flags & (TENSOR_SPARSE | TENSOR_BUFFER)) continue;
        if (nd >= OPTIM_MAX_DENSE)
            return err_set(e, PLUMB_EINTERNAL, "optimizer: more than %d dense tensors", OPTIM_MAX_DENSE);
        int j = nd++;
        while (j > 0 && order[j - 1]->offset > t->offset) order[j] = order[j - 1], j--;
        order[j] = t;
    }
    size_t cur_lo = 0;
    int cur_dec = nd ? (order[0]->flags & TENSOR_DECAY) != 0 : 0;
    for (int i = 1; i < nd; i++) {
        int dec = (order[i]->flags & TENSOR_DECAY) != 0;
        if (dec == cur_dec) continue;
        o->lo[o->n_ranges] = cur_lo, o->hi[o->n_ranges] = order[i]->offset, o->dec[o->n_ranges++] = cur_dec;
        cur_lo = order[i]->offset;
        cur_dec = dec;
    }
    o->lo[o->n_ranges] = cur_lo, o->hi[o->n_ranges] = L->n_dense, o->dec[o->n_ranges++] = cur_dec;
    return PLUMB_OK;
}

void optim_free(struct optim *o)
{
    if (!o->d) return;
    if (o->m) dev_free(o->d, o->m);
    if (o->v) dev_free(o->d, o->v);
    if (o->buf) dev_free(o->d, o->buf);
    if (o->dec_dev) dev_free(o->d, o->dec_dev);
    o->m = o->v = o->buf = NULL;
    o->dec_dev = NULL;
    o->dec_ready = 0, o->n_dec = 0;
}

static int zalloc(struct dev *d, float **p, size_t n, plumb_err *e)
{
    int rc = dev_alloc(d, (n ? n : 1) * sizeof(float), (void **)p, e);
    if (!rc) rc = d->be->memset_async(d, NULL, *p, 0, (n ? n : 1) * sizeof(float), e);
    return rc;
}

/* The decaying ranges as {lo, hi} pairs (ascending, disjoint) on the device,
 * for the masked ops (adamw_masked, sgd_momentum_masked) */
static int dec_upload(struct optim *o, plumb_err *e)
{
    int64_t pairs[2 * OPTIM_MAX_DENSE];
    int nr = 0, rc = PLUMB_OK;
    for (int r = 0; r < o->n_ranges; r++)
        if (o->dec[r] && o->hi[r] > o->lo[r]) pairs[2 * nr] = (int64_t)o->lo[r], pairs[2 * nr + 1] = (int64_t)o->hi[r], nr++;
    if (nr && ((rc = dev_alloc(o->d, 2 * (size_t)nr * sizeof(int64_t), (void **)&o->dec_dev, e)) ||
               (rc = dev_upload(o->d, o->dec_dev, pairs, 2 * (size_t)nr * sizeof(int64_t), e))))
        return err_wrap(e, "the optimizer's decay ranges");
    o->n_dec = nr;
    o->dec_ready = 1;
    return PLUMB_OK;
}

int optim_state_alloc(struct optim *o, plumb_err *e)
{
    int rc = PLUMB_OK;
    if (o->kind == OPTIM_ADAMW && !o->m) {
        if ((rc = zalloc(o->d, &o->m, o->L->n_params, e)) || (rc = zalloc(o->d, &o->v, o->L->n_params, e)))
            return err_wrap(e, "AdamW state for %zu parameters", o->L->n_params);
        o->n_state = o->L->n_params;
        if (o->T->adamw_masked) rc = dec_upload(o, e);
    } else if (o->kind == OPTIM_SGD && o->momentum > 0 && !o->buf) {
        if ((rc = zalloc(o->d, &o->buf, o->L->n_dense, e))) return err_wrap(e, "SGD momentum for %zu parameters", o->L->n_dense);
        o->n_state = o->L->n_dense;
        if (o->T->sgd_momentum_masked && o->n_ranges > 1) rc = dec_upload(o, e);
    }
    return rc;
}

int optim_step(struct optim *o, float *params, const float *dense_grad, const int64_t *rows, const float *grads,
               size_t n, float lr, int64_t step, plumb_err *e)
{
    struct dev *d = o->d;
    const struct train_ops *T = o->T;
    const int D = o->L->sparse_dim;
    float *table = params + o->L->n_dense;
    if (!(lr >= 0.0f) || !isfinite(lr)) return err_set(e, PLUMB_EUSAGE, "optimizer: lr %g", (double)lr);
    if (step < 1) return err_set(e, PLUMB_EUSAGE, "optimizer: step %lld (expected >= 1)", (long long)step);
    if (n && D < 1) return err_set(e, PLUMB_EINTERNAL, "optimizer: %zu sparse rows but no sparse region", n);
    int rc = PLUMB_OK;
    if (o->kind == OPTIM_SGD) {
        if (o->momentum > 0 && (rc = optim_state_alloc(o, e))) return rc;
        /* several ranges and the device has the one-launch form: the same bits in one launch */
        const int masked = o->momentum > 0 && T->sgd_momentum_masked && o->n_ranges > 1 && o->dec_ready;
        if (masked)
            rc = T->sgd_momentum_masked(d, NULL, params, dense_grad, o->buf, o->L->n_dense, lr, o->weight_decay,
                                        o->momentum, !o->momentum_started, o->dec_dev, o->n_dec, e);
        for (int r = 0; r < o->n_ranges && !rc && !masked; r++) {
            size_t lo = o->lo[r], len = o->hi[r] - o->lo[r];
            float wd = o->dec[r] ? o->weight_decay : 0.0f;
            if (!len) continue;
            if (o->momentum > 0)
                rc = T->sgd_momentum(d, NULL, params + lo, dense_grad + lo, o->buf + lo, len, lr, wd, o->momentum,
                                     !o->momentum_started, e);
            else rc = T->sgd(d, NULL, params + lo, dense_grad + lo, len, lr, wd, e);
        }
        if (!rc && o->momentum > 0) o->momentum_started = 1;
        if (!rc && n) rc = T->sgd_sparse(d, NULL, table, rows, grads, n, D, lr, e);
    } else {
        if ((rc = optim_state_alloc(o, e))) return rc;
        double bc1 = 1.0 - pow((double)o->beta1, (double)step), bc2 = 1.0 - pow((double)o->beta2, (double)step);
        const int masked = T->adamw_masked && o->n_ranges > 1 && o->dec_ready; /* one launch; gscale 1: the gradient as it is */
        if (masked)
            rc = T->adamw_masked(d, NULL, params, dense_grad, o->m, o->v, o->L->n_dense, lr, o->beta1, o->beta2,
                                 o->eps, o->weight_decay, (float)bc1, (float)bc2, 1.0f, o->dec_dev, o->n_dec, e);
        for (int r = 0; r < o->n_ranges && !rc && !masked; r++) {
            size_t lo = o->lo[r], len = o->hi[r] - o->lo[r];
            float wd = o->dec[r] ? o->weight_decay : 0.0f;
            if (!len) continue;
            rc = T->adamw(d, NULL, params + lo, dense_grad + lo, o->m + lo, o->v + lo, len, lr, o->beta1, o->beta2,
                          o->eps, wd, (float)bc1, (float)bc2, e);
        }
        if (!rc && n)
            rc = T->adamw_sparse(d, NULL, table, o->m + o->L->n_dense, o->v + o->L->n_dense, rows, grads, n, D, lr,
                                 o->beta1, o->beta2, o->eps, 0.0f, (float)bc1, (float)bc2, e);
    }
    /* asynchronous: queued on the device stream, seen by every later op and
     * download (no host synchronisation, so steps can be queued back to back) */
    return rc;
}

int optim_can_gate(const struct optim *o)
{
    return o->kind == OPTIM_SGD && !(o->momentum > 0) && o->T->sgd_gated && o->T->sgd_sparse_dn;
}

int optim_step_gated(struct optim *o, float *params, const float *dense_grad, const int64_t *rows,
                     const float *grads, const int64_t *rows_n, size_t n_max, float lr, const int *skip,
                     plumb_err *e)
{
    struct dev *d = o->d;
    const struct train_ops *T = o->T;
    const int D = o->L->sparse_dim;
    if (!optim_can_gate(o))
        return err_set(e, PLUMB_EINTERNAL, "optimizer: a gated step needs plain SGD and the device's gated ops");
    if (!(lr >= 0.0f) || !isfinite(lr)) return err_set(e, PLUMB_EUSAGE, "optimizer: lr %g", (double)lr);
    int rc = PLUMB_OK;
    for (int r = 0; r < o->n_ranges && !rc; r++) {
        size_t lo = o->lo[r], len = o->hi[r] - o->lo[r];
        float wd = o->dec[r] ? o->weight_decay : 0.0f;
        if (len) rc = T->sgd_gated(d, NULL, params + lo, dense_grad + lo, len, lr, wd, skip, e);
    }
    if (!rc && n_max && D > 0)
        rc = T->sgd_sparse_dn(d, NULL, params + o->L->n_dense, rows, grads, rows_n, n_max, D, lr, skip, e);
    return rc;
}
