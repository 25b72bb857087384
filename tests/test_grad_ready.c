/* Every workload's grad-ready hook, through the model interface the trainer
 * uses (train/model.h "Grad-ready hook"): in one fast backward the hook is
 * called once per bucket of model_ops.grad_buckets, k = 0, 1, ... in order,
 * with that bucket's range; the gradient values in the range when it is
 * reported are the final ones (the trainer starts that bucket's all-reduce
 * then, so a value written later would be left out of the sum); and a hook
 * that fails ends the backward with its error. ctr's own test
 * (tests/test_ctr.c ctr_grad_ready_hook) checks more of ctr; this one holds
 * every workload in models/workloads.c to the contract. */
#include "test.h"
#include "dev/dev.h"
#include "models/workloads.h"
#include "train/mcomm.h"
#include "train/options.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAXB 64

struct rec {
    struct dev *d;
    const float *grads;
    int n, fail_at;
    int k[MAXB];
    size_t off[MAXB], len[MAXB];
    float *snap[MAXB];
};

static int hook(void *ctx, int k, size_t off, size_t len, dev_stream *s, plumb_err *e)
{
    struct rec *r = ctx;
    if (r->fail_at == k) return err_set(e, PLUMB_EDEVICE, "hook failure at bucket %d", k);
    if (r->n >= MAXB) return err_set(e, PLUMB_EINTERNAL, "more than %d buckets reported", MAXB);
    const int i = r->n++;
    r->k[i] = k, r->off[i] = off, r->len[i] = len;
    r->snap[i] = malloc((len ? len : 1) * sizeof(float));
    if (!r->snap[i]) return err_set(e, PLUMB_ENOMEM, "snapshot");
    /* work queued on s after the call sees the final values: read there */
    int rc = r->d->be->stream_sync ? r->d->be->stream_sync(r->d, s, e) : PLUMB_OK;
    if (!rc) rc = dev_sync(r->d, e);
    if (!rc) rc = dev_download(r->d, r->snap[i], r->grads + off, len * sizeof(float), e);
    return rc;
}

static void check_workload(const struct workload *wl)
{
    const char *preset = wl->accept ? wl->accept->preset : NULL;
    struct train_config cfg;
    plumb_err e = {0};
    train_config_defaults(&cfg, wl);
    if (preset) REQUIRE(train_option_set(&cfg, "--preset", preset, &e) == 0);
    REQUIRE(train_config_finish(&cfg, &e) == 0);
    void *spec = NULL;
    char desc[256];
    REQUIRE(wl->configure(&cfg, &spec, desc, sizeof desc, &e) == 0);
    struct dev *d = NULL;
    REQUIRE(dev_open(test_device(), &d, &e) == 0);
    REQUIRE(dev_set_numerics(d, NUMERICS_FAST, 0, &e) == 0);
    enum { B = 4 };
    struct model *m = NULL;
    int rc = wl->model->create(d, spec, B, DT_F32, &m, &e);
    if (rc == PLUMB_EUNSUPPORTED) {
        dev_close(d);
        wl->spec_free(spec);
        return; /* this device has no ops for the workload */
    }
    REQUIRE_MSG(rc == 0, "%s: create: %s", wl->name, e.msg);
    REQUIRE(wl->model->init(m, 7, &e) == 0);
    struct data_source *ds = NULL;
    REQUIRE_MSG(wl->data->open(&cfg, spec, 0, &ds, &e) == 0, "%s: data: %s", wl->name, e.msg);
    int nf = 0;
    const struct batch_field *f = wl->data->fields(ds, &nf);
    struct batch b;
    memset(&b, 0, sizeof b);
    b.B = b.n_valid = B;
    b.global_valid = B;
    for (int k = 0; k < nf; k++) {
        b.field[k] = calloc((size_t)B * f[k].width, dtype_size(f[k].dtype));
        REQUIRE(b.field[k]);
    }
    uint32_t idx[B];
    for (int i = 0; i < B; i++) idx[i] = (uint32_t)(3 * i + 1);
    REQUIRE_MSG(wl->data->fill(ds, SPLIT_TRAIN, 0, idx, B, b.field, &e) == 0, "%s: fill: %s", wl->name, e.msg);

    const struct model_layout *L = wl->model->layout(m);
    size_t off[MAXB], len[MAXB];
    const int nb = wl->model->grad_buckets(m, off, len, MAXB);
    CHECK_MSG(nb >= 1, "%s: %d buckets", wl->name, nb);
    float *g = wl->model->grads(m);
    REQUIRE(d->be->memset_async(d, NULL, g, 0xff, L->n_dense * sizeof(float), &e) == 0); /* NaN */
    struct rec r;
    memset(&r, 0, sizeof r);
    r.d = d, r.grads = g, r.fail_at = -1;
    /* one rank: the trainer's model_comm over comm "self" */
    struct comm *self = NULL;
    REQUIRE(comm_init("self", &self, &e) == 0);
    struct mcomm_ctx mx = {self, d};
    struct model_comm comm;
    mcomm_bind(&mx, &comm);
    struct step_ctx sc = {.ctx = &r, .grad_ready = hook, .comm = &comm};
    struct model_loss loss = {0, 0};
    rc = wl->model->forward_backward(m, &b, 1.0f / B, &sc, &loss, &e);
    CHECK_MSG(rc == 0, "%s: forward_backward: %s", wl->name, e.msg);
    float *fin = malloc(L->n_dense * sizeof(float));
    REQUIRE(fin);
    REQUIRE(dev_download(d, fin, g, L->n_dense * sizeof(float), &e) == 0);
    CHECK_MSG(r.n == nb, "%s: %d buckets reported, grad_buckets lists %d", wl->name, r.n, nb);
    /* the tensors' gradients (not the padding between them) are real values */
    size_t nonfinite = 0, nonzero = 0, first_bad = 0;
    for (int t = 0; t < L->n_tensors; t++) {
        const struct model_tensor *mt = &L->tensors[t];
        if (mt->flags & (TENSOR_SPARSE | TENSOR_BUFFER)) continue;
        for (size_t j = mt->offset; j < mt->offset + mt->numel; j++) {
            if (!isfinite(fin[j]) && !nonfinite++) first_bad = j;
            nonzero += fin[j] != 0;
        }
    }
    CHECK_MSG(nonfinite == 0 && nonzero > 0, "%s: %zu gradient values not finite (the first at %zu), %zu not zero",
              wl->name, nonfinite, first_bad, nonzero);
    for (int i = 0; i < r.n && i < nb; i++) {
        CHECK_MSG(r.k[i] == i, "%s: report %d is bucket %d", wl->name, i, r.k[i]);
        CHECK_MSG(r.off[i] == off[i] && r.len[i] == len[i], "%s: bucket %d reported [%zu,+%zu), listed [%zu,+%zu)",
                  wl->name, i, r.off[i], r.len[i], off[i], len[i]);
        size_t late = 0;
        for (size_t j = 0; j < r.len[i] && r.off[i] + j < L->n_dense; j++)
            late += f32_bits(r.snap[i][j]) != f32_bits(fin[r.off[i] + j]);
        CHECK_MSG(late == 0, "%s: bucket %d: %zu of %zu values changed after it was reported", wl->name, i, late,
                  r.len[i]);
    }
    for (int i = 0; i < r.n; i++) free(r.snap[i]);
    /* a failing hook ends the backward with its error */
    memset(&r, 0, sizeof r);
    r.d = d, r.grads = g, r.fail_at = nb > 1 ? 1 : 0;
    memset(&e, 0, sizeof e);
    rc = wl->model->forward_backward(m, &b, 1.0f / B, &sc, &loss, &e);
    char want[48];
    snprintf(want, sizeof want, "hook failure at bucket %d", r.fail_at);
    CHECK_MSG(rc == PLUMB_EDEVICE && strstr(e.msg, want), "%s: rc %d, '%s'", wl->name, rc, e.msg);
    CHECK_MSG(r.n == r.fail_at, "%s: %d buckets reported before the failing one (%d)", wl->name, r.n, r.fail_at);
    for (int i = 0; i < r.n; i++) free(r.snap[i]);
    free(fin);
    for (int k = 0; k < nf; k++) free(b.field[k]);
    comm_finalize(self);
    wl->data->free(ds);
    wl->model->free(m);
    wl->spec_free(spec);
    dev_close(d);
}

TEST(workloads_grad_ready_hook_reports_final_buckets_in_order)
{
    int n = 0;
    for (const struct workload *wl; (wl = workload_at(n)); n++) check_workload(wl);
    CHECK(n >= 3);
}
