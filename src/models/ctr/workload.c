/* ctr behind the trainer's model interface (train/model.h): the model
 * (ctr.h), its data (Criteo files or the synthetic teacher, data.h) and its
 * eval (AUC, log loss, accuracy; eval.h), the presets and the --rows option.
 *
 * Batch fields: 0 "dense" f32 [B, 13] (transformed), 1 "sparse" u32 [B, 26]
 * (row within table t), 2 "label" f32 [B, 1] (0 or 1). predict writes the
 * logit [B, 1]. */
#include "models/ctr/workload.h"
#include "core/log.h"
#include "core/file.h"
#include "models/ctr/ctr.h"
#include "models/ctr/data.h"
#include "models/ctr/eval.h"
#include "train/options.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ---------------------------------------------------------------- spec */

static int configure(const struct train_config *cfg, void **spec, char *desc, size_t n, plumb_err *e)
{
    struct ctr_config *c = calloc(1, sizeof *c);
    if (!c) return err_set(e, PLUMB_ENOMEM, "ctr: out of memory");
    long rows = cfg->wl_opt[0] ? strtol(cfg->wl_opt[0], NULL, 10) : 0;
    int rc = ctr_config_preset(cfg->preset, rows, c, e);
    if (rc) {
        free(c);
        return rc;
    }
    if (desc) ctr_config_describe(c, desc, n);
    *spec = c;
    return PLUMB_OK;
}

static void spec_free(void *spec) { free(spec); }

/* The dense layers' weights and biases plus every table's rows x D. */
static size_t m_param_count(const void *spec)
{
    const struct ctr_config *c = spec;
    size_t n = 0;
    for (int l = 0; l < c->n_bottom; l++) n += (size_t)c->bottom[l] * (size_t)c->bottom[l + 1] + (size_t)c->bottom[l + 1];
    for (int l = 0; l < c->n_top; l++) n += (size_t)c->top[l] * (size_t)c->top[l + 1] + (size_t)c->top[l + 1];
    for (int t = 0; t < CTR_N_TABLES; t++) n += (size_t)c->rows[t] * (size_t)c->emb_dim;
    return n;
}

/* ---------------------------------------------------------------- model */

struct model {
    struct ctr_model *m;
};

static int m_create(struct dev *d, const void *spec, int max_batch, dtype_t precision, struct model **out,
                    plumb_err *e)
{
    struct model *w = calloc(1, sizeof *w);
    if (!w) return err_set(e, PLUMB_ENOMEM, "ctr: out of memory");
    int rc = ctr_create(d, spec, max_batch, precision, &w->m, e);
    if (rc) {
        free(w);
        return rc;
    }
    *out = w;
    return PLUMB_OK;
}

static void m_free(struct model *w)
{
    if (!w) return;
    ctr_free(w->m);
    free(w);
}

static int m_init(struct model *w, uint64_t seed, plumb_err *e) { return ctr_init(w->m, seed, e); }
static const struct model_layout *m_layout(const struct model *w) { return ctr_layout(w->m); }
static float *m_params(struct model *w) { return ctr_params(w->m); }
static float *m_grads(struct model *w) { return ctr_grads(w->m); }
static float *m_buffers(struct model *w)
{
    (void)w;
    return NULL;
}

static int m_forward_backward(struct model *w, const struct batch *b, float grad_scale, const struct step_ctx *sc,
                              struct model_loss *loss, plumb_err *e)
{
    struct ctr_loss l;
    int rc;
    if (sc && sc->grad_ready) ctr_set_grad_ready_hook(w->m, sc->grad_ready, sc->ctx);
    if (b->on_device) {
        struct ctr_dev_batch db = {b->B, b->n_valid, b->field[CTR_F_DENSE], b->field[CTR_F_SPARSE], b->field[CTR_F_LABEL]};
        rc = ctr_forward_backward_dev(w->m, &db, grad_scale, loss ? &l : NULL, e);
    } else {
        struct ctr_batch hb = {b->B, b->n_valid, b->field[CTR_F_DENSE], b->field[CTR_F_SPARSE], b->field[CTR_F_LABEL]};
        rc = ctr_forward_backward(w->m, &hb, grad_scale, loss ? &l : NULL, e);
    }
    if (sc && sc->grad_ready) ctr_set_grad_ready_hook(w->m, NULL, NULL);
    if (!rc && loss) loss->sum = l.sum, loss->count = l.count;
    return rc;
}

static void m_sparse_grads(struct model *w, int64_t **rows, float **grads, size_t *n)
{
    ctr_sparse_grads(w->m, rows, grads, n);
}

static int m_grad_buckets(const struct model *w, size_t *off, size_t *len, int max)
{
    size_t o[2 * CTR_MAX_LAYERS], l[2 * CTR_MAX_LAYERS];
    int n = ctr_grad_layers(w->m, o, l);
    if (n > max) n = max;
    memcpy(off, o, (size_t)n * sizeof *off);
    memcpy(len, l, (size_t)n * sizeof *len);
    return n;
}

static int m_predict(struct model *w, const struct batch *b, float *out, plumb_err *e)
{
    if (b->on_device) return err_set(e, PLUMB_EINTERNAL, "ctr predict: host batches only");
    struct ctr_batch hb = {b->B, b->n_valid, b->field[CTR_F_DENSE], b->field[CTR_F_SPARSE], b->field[CTR_F_LABEL]};
    return ctr_predict(w->m, &hb, NULL, out, NULL, e);
}

static int m_fuse_sparse_sgd(struct model *w, float lr, int keep, float *prev, int *found_inf, plumb_err *e)
{
    return ctr_fuse_sparse_sgd(w->m, lr, keep, prev, found_inf, e);
}

static int m_defer(struct model *w, int on, struct model_deferred *out, plumb_err *e)
{
    (void)e;
    out->div = 1.0;
    return ctr_defer(w->m, on, &out->loss, &out->rows_n);
}

static int m_forward(struct model *w, const struct batch *b, plumb_err *e)
{
    if (!b->on_device) return err_set(e, PLUMB_EINTERNAL, "ctr forward: device batches only");
    struct ctr_dev_batch db = {b->B, b->n_valid, b->field[CTR_F_DENSE], b->field[CTR_F_SPARSE], b->field[CTR_F_LABEL]};
    return ctr_forward_dev(w->m, &db, e);
}

static const struct model_ops ctr_model_ops = {
    .create = m_create,
    .free = m_free,
    .init = m_init,
    .layout = m_layout,
    .params = m_params,
    .grads = m_grads,
    .buffers = m_buffers,
    .forward_backward = m_forward_backward,
    .sparse_grads = m_sparse_grads,
    .grad_buckets = m_grad_buckets,
    .predict = m_predict,
    .fuse_sparse_sgd = m_fuse_sparse_sgd,
    .forward = m_forward,
    .defer = m_defer,
    .param_count = m_param_count,
};

/* ---------------------------------------------------------------- eval */

struct eval_acc {
    long cap, n;
    float *logit, *label;          /* [cap] this rank's share in index order */
    float *all_logit, *all_label;  /* after reduce: every sample (for predictions) */
    long n_all;
};

static void e_free(struct eval_acc *a)
{
    if (!a) return;
    free(a->logit), free(a->label), free(a->all_logit), free(a->all_label);
    free(a);
}

static int e_create(const void *spec, long n_local, struct eval_acc **out, plumb_err *e)
{
    (void)spec;
    struct eval_acc *a = calloc(1, sizeof *a);
    size_t c = (size_t)(n_local > 0 ? n_local : 1);
    if (a) a->logit = malloc(c * sizeof(float)), a->label = malloc(c * sizeof(float));
    if (!a || !a->logit || !a->label) {
        e_free(a);
        return err_set(e, PLUMB_ENOMEM, "ctr eval: cannot hold %ld samples", n_local);
    }
    a->cap = n_local;
    *out = a;
    return PLUMB_OK;
}

static void e_reset(struct eval_acc *a)
{
    a->n = 0;
    free(a->all_logit), free(a->all_label);
    a->all_logit = a->all_label = NULL;
    a->n_all = 0;
}

static int e_add(struct eval_acc *a, const struct batch *host, const float *out, int n, plumb_err *e)
{
    if (a->n + n > a->cap) return err_set(e, PLUMB_EINTERNAL, "ctr eval: %ld + %d samples > %ld", a->n, n, a->cap);
    memcpy(a->logit + a->n, out, (size_t)n * sizeof(float));
    memcpy(a->label + a->n, host->field[CTR_F_LABEL], (size_t)n * sizeof(float));
    a->n += n;
    return PLUMB_OK;
}

static int e_reduce(struct eval_acc *a, const struct model_comm *c, struct eval_metrics *m, plumb_err *e)
{
    struct eval_result r;
    free(a->all_logit), free(a->all_label);
    a->all_logit = a->all_label = NULL;
    int rc = eval_exact(c, a->logit, a->label, (size_t)a->n, &r, &a->all_logit, &a->all_label, e);
    if (rc) return rc;
    a->n_all = r.count;
    memset(m, 0, sizeof *m);
    const char *names[] = {"auc", "logloss", "accuracy"};
    double vals[] = {r.auc, r.logloss, r.accuracy};
    for (int i = 0; i < 3; i++) {
        snprintf(m->name[i], sizeof m->name[i], "%s", names[i]);
        m->value[i] = vals[i];
    }
    m->n = 3;
    m->count = r.count;
    return PLUMB_OK;
}

/* label,score lines (score = sigmoid(logit)) of every eval sample in index order */
static int e_write_predictions(struct eval_acc *a, const char *path, plumb_err *e)
{
    long n = a->n_all;
    if (!a->all_logit) return err_set(e, PLUMB_EINTERNAL, "ctr eval: predictions before reduce");
    size_t cap = (size_t)n * 24 + 32, len = 0;
    char *buf = malloc(cap);
    if (!buf) return err_set(e, PLUMB_ENOMEM, "predictions: out of memory");
    len += (size_t)snprintf(buf, cap, "label,score\n");
    for (long i = 0; i < n; i++) {
        double z = a->all_logit[i];
        float p = (float)(z >= 0 ? 1.0 / (1.0 + exp(-z)) : exp(z) / (1.0 + exp(z)));
        len += (size_t)snprintf(buf + len, cap - len, "%d,%.9g\n", a->all_label[i] > 0.5f, (double)p);
    }
    int rc = file_write_atomic(path, buf, len, e);
    free(buf);
    return rc;
}

static const struct eval_ops ctr_eval_ops = {
    .create = e_create,
    .free = e_free,
    .reset = e_reset,
    .add = e_add,
    .reduce = e_reduce,
    .write_predictions = e_write_predictions,
    .reference_metric = "auc",
};

/* ---------------------------------------------------------------- presets */

/* dlrm-kaggle: the Criteo Kaggle DLRM (SGD, batch 2048, lr 0.1, warmup).
 * ctr-tiny is tuned to learn the synthetic teacher in well under a minute
 * on 2 cores: lazy AdamW reaches AUC ~0.76 (teacher 0.80) in 1500 steps of
 * 256, where sparse SGD needs several times more samples. */
static const struct preset_default tiny_defaults[] = {
    {"--batch", "256", NULL, NULL},       {"--steps", "1500", NULL, NULL},
    {"--warmup", "50", NULL, NULL},       {"--optimizer", "adamw", NULL, NULL},
    {"--lr", "0.004", "--optimizer", "adamw"}, {"--lr", "0.2", "--optimizer", "sgd"},
    {0},
};
static const struct preset_default kaggle_defaults[] = {
    {"--batch", "2048", NULL, NULL},      {"--steps", "1000", NULL, NULL},
    {"--warmup", "100", NULL, NULL},      {"--optimizer", "sgd", NULL, NULL},
    {"--lr", "0.1", "--optimizer", "sgd"}, {"--lr", "0.001", "--optimizer", "adamw"},
    {0},
};
/* plumb train's train-ctr floor (accept/train_verdict.h), accept's bound
 * below: the preset's 1500 steps on the synthetic teacher reach AUC ~0.77
 * (docs/TRAINING.md) */
static const struct train_floor ctr_floors[] = {
    {"ctr-tiny", "auc", 0.75, NAN, 1500},
    {0},
};
static const struct train_preset ctr_presets[] = {
    {"ctr-tiny", "13-64-8 | 26x10000x8 | 359-64-1, learns the synthetic teacher in under a minute on 2 cores", tiny_defaults},
    {"dlrm-kaggle", "13-512-256-64-16 | 26x1000000x16 | 367-512-256-1 (the Criteo Kaggle DLRM)", kaggle_defaults},
    {0},
};

static const struct train_option ctr_options[] = {
    {"--rows", TOPT_INT, TOPT_WL(0), "0", "rows per embedding table (0 = the preset's: ctr-tiny 10000, dlrm-kaggle 1000000)",
     "0..2000000000", "N"},
    {0},
};

/* ---------------------------------------------------------------- accept */

/* The train-ctr check, the parity seeds and the ladder (docs/COMPARE.md):
 * ctr-tiny's 1500-step schedule on the synthetic teacher with 50000 eval
 * samples; golden 60 steps scored on 2000. */
static const struct preset_default ctr_accept_fast[] = {
    {"--steps", "1500", NULL, NULL},
    {"--eval-samples", "50000", NULL, NULL},
    {0},
};
static const struct preset_default ctr_accept_golden[] = {
    {"--steps", "60", NULL, NULL},
    {"--eval-samples", "2000", NULL, NULL},
    {0},
};
static const struct workload_accept ctr_accept = {
    .preset = "ctr-tiny",
    .fast = ctr_accept_fast,
    .golden = ctr_accept_golden,
    .metric = "auc",
    .label = "AUC",
    .higher_is_better = 1,
    .lower_is_better = "logloss",
    .bound = 0.75,          /* the teacher's own AUC is ~0.80; ctr-tiny reaches ~0.76 on the cpu */
    .spread_floor = 0.002,  /* README.md's convergence tolerance of the train-ctr check */
    .margin = "0.15%",      /* the source documents' acceptance figure for AUC */
    .cpu_run_s = 6,         /* 1500 steps of 256 on 2 idle cores: 5-6 s */
};

const struct workload ctr_workload = {
    .name = "ctr",
    .summary = "DLRM click-through-rate model on Criteo-format data (or its synthetic teacher)",
    .data_help = "'synthetic' (the teacher), a Criteo TSV file (plain or .gz), or a `plumb data cache` file",
    .presets = ctr_presets,
    .options = ctr_options,
    .floors = ctr_floors,
    .configure = configure,
    .spec_free = spec_free,
    .model = &ctr_model_ops,
    .data = &ctr_data_ops,
    .eval = &ctr_eval_ops,
    .accept = &ctr_accept,
};
