/* gpt behind the trainer's model interface (train/model.h): the model
 * (gpt.h), its token data (data.h) and its eval (eval.h), the presets and
 * the --seq-len option. docs/GPT.md describes the workload.
 *
 * A sample is one window of T tokens. Batch fields: 0 "tokens" i32 [B, T],
 * 1 "targets" i32 [B, T] (the next tokens; -1 where nothing is scored).
 * loss_b of a sample is the mean cross-entropy over its T positions, so the
 * trainer's mean over samples is the mean over tokens (what PyTorch's
 * cross_entropy gives a [B, T] batch); predict writes the per-position
 * losses [B, T] (0 where unscored), and the eval sums them exactly. */
#include "models/gpt/workload.h"
#include "models/gpt/data.h"
#include "models/gpt/eval.h"
#include "models/gpt/gpt.h"
#include "models/gpt/refstate.h"
#include "train/options.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { F_TOKENS = 0, F_TARGETS = 1 };

struct gpt_spec {
    struct gpt_config c;
    int T;              /* the sequence length of every sample */
    int fixed_windows;  /* --windows fixed */
    char init_from[4096]; /* --init-from: parameters from a reference state ("" = Philox init) */
};

/* ---------------------------------------------------------------- spec */

static int configure(const struct train_config *cfg, void **spec, char *desc, size_t n, plumb_err *e)
{
    struct gpt_spec *s = calloc(1, sizeof *s);
    if (!s) return err_set(e, PLUMB_ENOMEM, "gpt: out of memory");
    int rc = gpt_config_preset(cfg->preset, &s->c, e);
    if (rc) {
        free(s);
        return rc;
    }
    long T = cfg->wl_opt[0] ? strtol(cfg->wl_opt[0], NULL, 10) : 0;
    if (T == 0) T = s->c.block_size;
    if (T < 1 || T > s->c.block_size) {
        const int ctx = s->c.block_size;
        free(s);
        return err_set(e, PLUMB_EUSAGE, "--seq-len: %ld (expected 1..%d, the context of %s)", T, ctx, cfg->preset);
    }
    s->T = (int)T;
    s->fixed_windows = cfg->wl_opt[1] && !strcmp(cfg->wl_opt[1], "fixed");
    if (cfg->wl_opt[2] && *cfg->wl_opt[2]) snprintf(s->init_from, sizeof s->init_from, "%s", cfg->wl_opt[2]);
    if (desc) {
        char d[96];
        gpt_config_describe(&s->c, d, sizeof d);
        /* --windows fixed said too: the description is part of the configuration a
         * checkpoint records, and a resume with the other windows was accepted */
        snprintf(desc, n, "%s, sequences of %d%s", d, s->T, s->fixed_windows ? ", fixed windows (--windows fixed)" : "");
    }
    *spec = s;
    return PLUMB_OK;
}

static void spec_free(void *spec) { free(spec); }

/* ---------------------------------------------------------------- model */

struct model {
    struct gpt_model *m;
    int T;
    const char *init_from; /* the spec's, "" = none */
    struct model_layout layout;
    struct model_tensor *tensors;
    int deferred; /* model_ops.defer: forward_backward leaves the loss on the device */
};

static int m_create(struct dev *d, const void *spec, int max_batch, dtype_t precision, struct model **out,
                    plumb_err *e)
{
    const struct gpt_spec *s = spec;
    struct model *w = calloc(1, sizeof *w);
    if (!w) return err_set(e, PLUMB_ENOMEM, "gpt: out of memory");
    int rc = gpt_create(d, &s->c, max_batch, precision, &w->m, e);
    if (rc) {
        free(w);
        return rc;
    }
    w->T = s->T;
    w->init_from = s->init_from;
    const int nt = gpt_n_tensors(w->m);
    w->tensors = calloc((size_t)nt, sizeof *w->tensors);
    if (!w->tensors) {
        gpt_free(w->m);
        free(w);
        return err_set(e, PLUMB_ENOMEM, "gpt: out of memory");
    }
    for (int i = 0; i < nt; i++) {
        const struct gpt_tensor *t = gpt_tensor(w->m, i);
        struct model_tensor *o = &w->tensors[i];
        snprintf(o->name, sizeof o->name, "%s", t->name);
        o->offset = t->offset;
        o->numel = t->numel;
        o->rows = t->rows;
        o->cols = t->cols;
        o->flags = t->decay ? TENSOR_DECAY : 0;
    }
    w->layout.n_params = w->layout.n_dense = gpt_n_params(w->m);
    w->layout.n_tensors = nt;
    w->layout.tensors = w->tensors;
    w->layout.out_width = s->T;
    *out = w;
    return PLUMB_OK;
}

static void m_free(struct model *w)
{
    if (!w) return;
    gpt_free(w->m);
    free(w->tensors);
    free(w);
}

/* Philox's GPT-2 init, or every tensor from a reference state
 * (bench/gpt_reference.py's format: "param:NAME" for each tensor name) */
static int m_init(struct model *w, uint64_t seed, plumb_err *e)
{
    int rc = gpt_init(w->m, seed, e);
    if (rc || !w->init_from[0]) return rc;
    struct gpt_ref r;
    if ((rc = gpt_ref_load(w->init_from, &r, e))) return err_wrap(e, "--init-from");
    const struct gpt_config *c = gpt_config_of(w->m);
    if (r.c.n_layer != c->n_layer || r.c.n_head != c->n_head || r.c.n_embd != c->n_embd ||
        r.c.block_size != c->block_size || r.c.vocab != c->vocab || r.c.vocab_padded != c->vocab_padded) {
        /* the message first: gpt_ref_free zeroes r.c */
        rc = err_set(e, PLUMB_EUSAGE, "--init-from %s: a model of L%d H%d C%d T%d V%d (expected the preset's L%d H%d C%d T%d V%d)",
                     w->init_from, r.c.n_layer, r.c.n_head, r.c.n_embd, r.c.block_size, r.c.vocab, c->n_layer, c->n_head,
                     c->n_embd, c->block_size, c->vocab);
        gpt_ref_free(&r);
        return rc;
    }
    char nm[64];
    float *h = NULL;
    for (int i = 0; i < gpt_n_tensors(w->m) && !rc; i++) {
        const struct gpt_tensor *t = gpt_tensor(w->m, i);
        float *nh = realloc(h, t->numel * sizeof(float));
        if (!nh) {
            rc = err_set(e, PLUMB_ENOMEM, "--init-from: out of memory");
            break;
        }
        h = nh;
        snprintf(nm, sizeof nm, "param:%s", t->name);
        rc = gpt_ref_f32(&r, nm, h, t->numel, e);
        if (!rc) rc = dev_upload(gpt_dev(w->m), gpt_params(w->m) + t->offset, h, t->numel * sizeof(float), e);
    }
    free(h);
    gpt_ref_free(&r);
    return rc ? err_wrap(e, "--init-from %s", w->init_from) : PLUMB_OK;
}
static const struct model_layout *m_layout(const struct model *w) { return &w->layout; }
static float *m_params(struct model *w) { return gpt_params(w->m); }
static float *m_grads(struct model *w) { return gpt_grads(w->m); }
static float *m_buffers(struct model *w)
{
    (void)w;
    return NULL;
}

static int m_forward_backward(struct model *w, const struct batch *b, float grad_scale, const struct step_ctx *sc,
                              struct model_loss *loss, plumb_err *e)
{
    struct gpt_loss l;
    int rc;
    if (w->deferred && loss) return err_set(e, PLUMB_EINTERNAL, "gpt forward_backward: deferred, yet a loss asked for");
    if (b->B < 1) {
        if (loss) loss->sum = 0, loss->count = 0;
        return PLUMB_OK;
    }
    if (sc && sc->grad_ready) gpt_set_grad_ready_hook(w->m, sc->grad_ready, sc->ctx);
    if (sc && sc->forward_done) gpt_set_forward_done_hook(w->m, sc->forward_done, sc->ctx);
    /* loss_b = the mean over the sample's T positions */
    const float gs = grad_scale / (float)w->T;
    if (b->on_device) {
        struct gpt_dev_batch db = {b->B, b->n_valid, w->T, b->field[F_TOKENS], b->field[F_TARGETS]};
        rc = gpt_forward_backward_dev(w->m, &db, gs, w->deferred ? NULL : &l, e);
    } else {
        struct gpt_batch hb = {b->B, b->n_valid, w->T, b->field[F_TOKENS], b->field[F_TARGETS]};
        rc = gpt_forward_backward(w->m, &hb, gs, w->deferred ? NULL : &l, e);
    }
    if (sc && sc->grad_ready) gpt_set_grad_ready_hook(w->m, NULL, NULL);
    gpt_set_forward_done_hook(w->m, NULL, NULL);
    if (!rc && loss) {
        loss->sum = l.sum / (double)w->T;
        loss->count = b->n_valid;
    }
    return rc;
}

/* The deferred step: the classifier's device pair is {sum over the scored
 * positions, their count}; the contract's per-sample loss is the mean over
 * a sample's T positions, so div = T (what the synchronous path divides by) */
static int m_defer(struct model *w, int on, struct model_deferred *out, plumb_err *e)
{
    (void)e;
    w->deferred = on != 0;
    out->loss = gpt_loss_dev(w->m);
    out->rows_n = NULL;
    out->div = (double)w->T;
    return PLUMB_OK;
}

static void m_sparse_grads(struct model *w, int64_t **rows, float **grads, size_t *n)
{
    (void)w;
    *rows = NULL;
    *grads = NULL;
    *n = 0;
}

static int m_grad_buckets(const struct model *w, size_t *off, size_t *len, int max)
{
    size_t o[GPT_MAX_LAYERS + 2], l[GPT_MAX_LAYERS + 2];
    int n = gpt_grad_layers(w->m, o, l);
    if (n > max) n = max;
    memcpy(off, o, (size_t)n * sizeof *off);
    memcpy(len, l, (size_t)n * sizeof *len);
    return n;
}

static int m_predict(struct model *w, const struct batch *b, float *out, plumb_err *e)
{
    if (b->on_device) {
        struct gpt_dev_batch db = {b->B, b->n_valid, w->T, b->field[F_TOKENS], b->field[F_TARGETS]};
        return gpt_predict_dev(w->m, &db, out, NULL, e);
    }
    struct gpt_batch hb = {b->B, b->n_valid, w->T, b->field[F_TOKENS], b->field[F_TARGETS]};
    return gpt_predict(w->m, &hb, out, NULL, e);
}

static int m_forward(struct model *w, const struct batch *b, plumb_err *e)
{
    return m_predict(w, b, NULL, e);
}

static const struct model_ops gpt_model_ops = {
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
    .forward = m_forward,
    .defer = m_defer,
};

/* ---------------------------------------------------------------- data */

struct data_source {
    struct gpt_data *d;
    int T;
    uint64_t seed;
    struct batch_field fields[2];
};

static int d_open(const struct train_config *cfg, const void *spec, int materialize, struct data_source **out,
                  plumb_err *e)
{
    (void)materialize; /* token files are memory-mapped, text is read whole, synthetic is a hash */
    const struct gpt_spec *sp = spec;
    struct data_source *s = calloc(1, sizeof *s);
    if (!s) return err_set(e, PLUMB_ENOMEM, "gpt data: out of memory");
    s->T = sp->T;
    s->seed = cfg->data_seed;
    /* synthetic: --train-samples / --eval-samples windows of T tokens */
    struct gpt_data_opts o = {cfg->data_seed, sp->c.vocab, ((uint64_t)cfg->train_samples + 1) * (uint64_t)sp->T,
                              (uint64_t)cfg->eval_samples * (uint64_t)sp->T + 1, cfg->eval_fraction, sp->fixed_windows};
    int rc = gpt_data_open(cfg->data, cfg->eval_data, &o, &s->d, e);
    /* the validation files' faults name --eval-data; the rest --data */
    const int have_val = cfg->eval_data && *cfg->eval_data;
    if (!rc && gpt_data_val_vocab(s->d) > sp->c.vocab)
        rc = err_set(e, PLUMB_EUSAGE, "--eval-data %s: token ids up to %d, but %s has a vocabulary of %d (expected ids below it)",
                     cfg->eval_data, gpt_data_val_vocab(s->d) - 1, cfg->preset, sp->c.vocab);
    if (!rc && gpt_data_vocab(s->d) > sp->c.vocab)
        rc = err_set(e, PLUMB_EUSAGE, "--data %s: token ids up to %d, but %s has a vocabulary of %d (expected ids below it)",
                     cfg->data, gpt_data_vocab(s->d) - 1, cfg->preset, sp->c.vocab);
    if (!rc && have_val && gpt_data_samples(s->d, GPT_VAL, s->T) < 1)
        rc = err_set(e, PLUMB_EUSAGE, "--eval-data %s: %llu validation tokens (expected at least 2)", cfg->eval_data,
                     (unsigned long long)gpt_data_tokens(s->d, GPT_VAL));
    if (!rc && (gpt_data_samples(s->d, GPT_TRAIN, s->T) < 1 || gpt_data_samples(s->d, GPT_VAL, s->T) < 1))
        rc = err_set(e, PLUMB_EUSAGE, "--data %s: %llu train and %llu validation tokens (expected at least %d and 2)",
                     cfg->data, (unsigned long long)gpt_data_tokens(s->d, GPT_TRAIN),
                     (unsigned long long)gpt_data_tokens(s->d, GPT_VAL), 2 * s->T);
    if (rc) {
        gpt_data_free(s->d);
        free(s);
        return rc;
    }
    s->fields[F_TOKENS] = (struct batch_field){"tokens", DT_I32, s->T};
    s->fields[F_TARGETS] = (struct batch_field){"targets", DT_I32, s->T};
    *out = s;
    return PLUMB_OK;
}

static void d_free(struct data_source *s)
{
    if (!s) return;
    gpt_data_free(s->d);
    free(s);
}
static long d_count(const struct data_source *s, int split)
{
    return gpt_data_samples(s->d, split == SPLIT_TRAIN ? GPT_TRAIN : GPT_VAL, s->T);
}
static const struct batch_field *d_fields(const struct data_source *s, int *n)
{
    *n = 2;
    return s->fields;
}
static int d_fill(const struct data_source *s, int split, long epoch, const uint32_t *idx, int count,
                  void *const *field, plumb_err *e)
{
    return gpt_data_fill(s->d, split == SPLIT_TRAIN ? GPT_TRAIN : GPT_VAL, s->T, s->seed, epoch, idx, count, count,
                         field[F_TOKENS], field[F_TARGETS], e);
}
static void d_info(const struct data_source *s, struct data_info *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->desc, sizeof out->desc, "%s; windows of %d: %ld train, %ld validation", gpt_data_describe(s->d), s->T,
             d_count(s, SPLIT_TRAIN), d_count(s, SPLIT_EVAL));
}

static const struct data_ops gpt_data_ops = {
    .open = d_open, .free = d_free, .count = d_count, .fields = d_fields, .fill = d_fill, .info = d_info,
};

/* ---------------------------------------------------------------- eval */

struct eval_acc {
    struct gpt_eval_acc a;
    long seqs; /* validation windows added */
    int T;
};

static int e_create(const void *spec, long n_local, struct eval_acc **out, plumb_err *e)
{
    (void)n_local;
    *out = calloc(1, sizeof **out);
    if (!*out) return err_set(e, PLUMB_ENOMEM, "gpt eval: out of memory");
    (*out)->T = ((const struct gpt_spec *)spec)->T;
    return PLUMB_OK;
}
static void e_free(struct eval_acc *a) { free(a); }
static void e_reset(struct eval_acc *a)
{
    memset(&a->a, 0, sizeof a->a);
    a->seqs = 0;
}

static int e_add(struct eval_acc *a, const struct batch *host, const float *out, int n, plumb_err *e)
{
    (void)e;
    gpt_eval_add(&a->a, out, host->field[F_TARGETS], (size_t)n * a->T);
    a->seqs += n;
    return PLUMB_OK;
}

static int e_reduce(struct eval_acc *a, const struct model_comm *c, struct eval_metrics *m, plumb_err *e)
{
    int64_t v[5] = {a->a.whole, a->a.frac, a->a.count, a->seqs, a->a.bad};
    int rc = c->sum_i64(c->ctx, v, 5, "gpt eval loss", e);
    if (rc) return rc;
    struct gpt_eval_acc t = {v[0], v[1], v[2], v[4]};
    memset(m, 0, sizeof *m);
    m->n = 3;
    snprintf(m->name[0], sizeof m->name[0], "val_loss");
    snprintf(m->name[1], sizeof m->name[1], "perplexity");
    snprintf(m->name[2], sizeof m->name[2], "val_tokens");
    m->value[0] = gpt_eval_loss(&t);
    m->value[1] = gpt_eval_perplexity(&t);
    m->value[2] = (double)t.count; /* every validation token after the first, once */
    m->count = (long)v[3];          /* windows */
    return PLUMB_OK;
}

static const struct eval_ops gpt_eval_ops = {
    .create = e_create, .free = e_free, .reset = e_reset, .add = e_add, .reduce = e_reduce,
};

/* ---------------------------------------------------------------- presets */

/* gpt-tiny learns the GPL-3 text to a validation loss near 2.7 in 400 steps
 * of 16 x 64 tokens (docs/GPT.md); gpt2-124m is GPT-2 small as llm.c and
 * nanoGPT train it (lr 6e-4, AdamW (0.9, 0.95), wd 0.1 on matrices, clip 1). */
static const struct preset_default tiny_defaults[] = {
    {"--batch", "16", NULL, NULL},         {"--steps", "400", NULL, NULL},
    {"--optimizer", "adamw", NULL, NULL},  {"--lr", "0.003", NULL, NULL},
    {"--warmup", "20", NULL, NULL},        {"--schedule", "cosine", NULL, NULL},
    {"--lr-min", "0.0003", NULL, NULL},    {"--adam-beta2", "0.95", NULL, NULL},
    {"--weight-decay", "0.1", NULL, NULL}, {"--clip-grad-norm", "1", NULL, NULL},
    {"--train-samples", "16384", NULL, NULL}, {"--eval-samples", "256", NULL, NULL},
    {"--micro-shard", "4", NULL, NULL},    {"--eval-batch", "64", NULL, NULL},
    {0},
};
static const struct preset_default gpt2_defaults[] = {
    {"--batch", "16", NULL, NULL},         {"--steps", "5000", NULL, NULL},
    {"--optimizer", "adamw", NULL, NULL},  {"--lr", "0.0006", NULL, NULL},
    {"--warmup", "700", NULL, NULL},       {"--schedule", "cosine", NULL, NULL},
    {"--lr-min", "0.00006", NULL, NULL},   {"--adam-beta2", "0.95", NULL, NULL},
    {"--weight-decay", "0.1", NULL, NULL}, {"--clip-grad-norm", "1", NULL, NULL},
    {"--train-samples", "100000", NULL, NULL}, {"--eval-samples", "64", NULL, NULL},
    {"--micro-shard", "1", NULL, NULL},    {"--eval-batch", "16", NULL, NULL},
    {0},
};
/* plumb train's train-gpt floor (accept/train_verdict.h): the preset's 400
 * steps on the synthetic chain reach val_loss about 1.68 (the chain's
 * entropy about 1.6, ln 256 = 5.55; BENCHMARKS.md, 2026-12-05) */
static const struct train_floor gpt_floors[] = {
    {"gpt-tiny", "val_loss", NAN, 2.0, 400},
    {0},
};
static const struct train_preset gpt_presets[] = {
    {"gpt-tiny", "2 layers, 4 heads, width 64, context 64, bytes: learns a text file in a minute on 2 cores", tiny_defaults},
    {"gpt2-124m", "GPT-2 small: 12 layers, 12 heads, width 768, context 1024, vocabulary 50257 (padded 50304)",
     gpt2_defaults},
    {0},
};

static const struct train_option gpt_options[] = {
    {"--seq-len", TOPT_INT, TOPT_WL(0), "0", "tokens per sample (0 = the preset's context: gpt-tiny 64, gpt2-124m 1024)",
     "0..1048576", "T"},
    {"--windows", TOPT_CHOICE, TOPT_WL(1), "shifted",
     "train windows: shifted by a Philox offset per epoch, or fixed at multiples of the sequence length", "shifted|fixed",
     NULL},
    {"--init-from", TOPT_STR, TOPT_WL(2), NULL,
     "initial parameters from a reference state (bench/gpt_reference.py's format) instead of GPT-2's random init", NULL,
     "FILE"},
    {0},
};

/* ---------------------------------------------------------------- accept */

/* The train-gpt check, the parity seeds and the ladder (--workload gpt):
 * gpt-tiny on the synthetic chain (loss floor ~1.6 nats at V = 256; a
 * uniform guess is ln 256 = 5.545), 150 fast steps of the preset's 16 x 64
 * tokens (val loss ~1.72 on the cpu); golden 8 steps of 8 sequences scored
 * on 16. */
static const struct preset_default gpt_accept_fast[] = {
    {"--steps", "150", NULL, NULL},
    {0},
};
static const struct preset_default gpt_accept_golden[] = {
    {"--steps", "8", NULL, NULL},
    {"--batch", "8", NULL, NULL},
    {"--eval-samples", "16", NULL, NULL},
    {0},
};
static const struct workload_accept gpt_accept = {
    .preset = "gpt-tiny",
    .fast = gpt_accept_fast,
    .golden = gpt_accept_golden,
    .metric = "val_loss",
    .label = "val loss",
    .higher_is_better = 0,
    .lower_is_better = "perplexity",
    .bound = 4.0,           /* well under ln 256; the chain's floor is ~1.6 */
    .spread_floor = 0.02,   /* nats: the least tolerance however close the cpu seeds land */
    .margin = "1%",         /* of A's mean val loss: ~0.017 nats at 1.72 */
    .cpu_run_s = 8,         /* 150 steps of 16 x 64 on 2 idle cores: ~7 s */
};

static const struct unused_option gpt_unused[] = {
    {"--bad-lines", "it applies to ctr's Criteo TSV lines"},
    {"--max-rows", "it applies to ctr's Criteo TSV lines"},
    {0},
};

const struct workload gpt_workload = {
    .name = "gpt",
    .summary = "GPT-2 language model on llm.c token files, a text file as bytes, or synthetic tokens",
    .data_help = "'synthetic' (a Markov chain of tokens), llm.c token shards (a file or a glob, optionally tokens:GLOB), or "
                 "text:FILE (the file's bytes, vocabulary 256)",
    .presets = gpt_presets,
    .floors = gpt_floors,
    .options = gpt_options,
    .unused = gpt_unused,
    .configure = configure,
    .spec_free = spec_free,
    .model = &gpt_model_ops,
    .data = &gpt_data_ops,
    .eval = &gpt_eval_ops,
    .accept = &gpt_accept,
};
