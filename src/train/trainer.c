/* The ctr training engine: see trainer.h for the step structure. */
#include "train/trainer.h"
#include "core/file.h"
#include "core/hash.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "core/timer.h"
#include "comm/comm_nccl.h"
#include "dev/train_ops.h"
#include "models/ctr.h"
#include "train/ckpt.h"
#include "train/data.h"
#include "train/devfeed.h"
#include "train/inject.h"
#include "train/sampler.h"
#include "train/scaler.h"
#include "core/watchdog.h"
#include "health/monitor.h"
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Golden gradients in 64-bit fixed point: q = round(g / loss_scale * 2^40).
 * Resolution 2^-40 (~9e-13); a per-element magnitude bound keeps the sum of
 * every micro-shard of a global batch below 2^62 (checked: overflow counts as
 * a non-finite step). */
#define FIX_BITS 40
#define LOSS_FIX 4294967296.0 /* losses summed in fixed point 2^-32 */
#define BUCKET ((size_t)1 << 20) /* gradient all-reduce bucket, elements */
#define SCR_SUMSQ 0 /* the step's status block (d_scratch): double sumsq */
#define SCR_FOUND 8 /* int found_inf */
#define SCR_N 16    /* int64 distinct sparse rows */
#define SCR_BYTES 24
enum { GP_LOCAL = 0, GP_HOST = 1, GP_DEVICE = 2 };

static volatile sig_atomic_t g_stop;
void trainer_request_stop(void) { g_stop = 1; }
static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

void train_config_defaults(struct train_config *c)
{
    memset(c, 0, sizeof *c);
    c->preset = "ctr-tiny";
    c->data = "synthetic";
    c->eval_fraction = 0.1;
    c->train_samples = 1000000;
    c->eval_samples = 50000;
    c->data_seed = 1234;
    c->steps = 1000;
    c->batch = 256;
    c->seed = 1;
    c->lr = 0.1;
    c->warmup = 100;
    c->optimizer = "sgd";
    c->eval_every = 0;
    c->eval_batch = 4096;
    c->ckpt_keep = 3;
    c->numerics = NUMERICS_FAST;
    c->precision = DT_F32;
    c->micro_shard = 64;
    c->loss_scale = "auto";
    c->ls_init = 65536.0;
    c->ls_growth = 2.0;
    c->ls_backoff = 0.5;
    c->ls_interval = 2000;
    c->device = "cpu";
    c->prefetch = 4;
    c->watchdog_s = 0;
    c->max_bad_steps = 3;
}

struct trainer {
    const struct train_config *cfg;
    struct comm *c;
    struct dev *d;
    int rank, world;
    struct ctr_config mc;
    struct ctr_model *m;
    const struct train_ops *to;
    struct dataset *ds;
    struct sampler smp;
    struct loss_scaler sc;
    struct ctr_opt opt;
    long step;      /* global steps done = next step to run */
    long opt_t;     /* optimizer updates applied (AdamW bias correction) */
    size_t n_dense, n_params;
    int D;
    int64_t rows[CTR_N_TABLES];
    int max_batch;
    long sparse_cap; /* rows a global batch can touch */
    /* host staging */
    float *h_dense;           /* [n_dense] */
    int64_t *h_rows;          /* [sparse_cap] */
    float *h_sgrads;          /* [sparse_cap, D] */
    size_t h_n;
    /* golden accumulators */
    int64_t *q_dense;         /* [n_dense] */
    int64_t *q_rows;          /* [sparse_cap] */
    int64_t *q_vals;          /* [sparse_cap, D] */
    size_t q_n;
    double q_mul;             /* 2^40 / loss_scale of the step */
    double q_bound;           /* per element |q| bound */
    /* device scratch */
    int64_t *d_rows_in, *d_rows;   /* [sparse_cap] */
    float *d_sg_in, *d_sg;         /* [sparse_cap, D] */
    int64_t *d_n;             /* -> d_scratch + SCR_N */
    int *d_found;             /* -> d_scratch + SCR_FOUND */
    double *d_sumsq;          /* -> d_scratch + SCR_SUMSQ */
    void *d_scratch;          /* the step's status block, read back in one piece */
    /* fast gradient path (see "the fast gradient path" below) */
    int gp;                   /* GP_LOCAL, GP_HOST, GP_DEVICE */
    struct nccl_comm *nc;     /* GP_DEVICE over NCCL/RCCL; NULL: the host comm stands in (cpu device) */
    int n_layers, nb, launched;
    int close_at[2 * CTR_MAX_LAYERS];          /* backward layer k closes bucket close_at[k] (-1: none) */
    size_t b_lo[2 * CTR_MAX_LAYERS], b_hi[2 * CTR_MAX_LAYERS]; /* dense buckets, in launch order */
    int64_t *l_rows;          /* this rank's sparse list before the exchange (device) */
    float *l_grads;
    size_t l_n;
    const int64_t *s_rows;    /* the step's reduced sparse list for the optimizer (device) */
    const float *s_grads;
    size_t s_n;
    void *d_send, *d_recv;    /* GP_DEVICE sparse exchange */
    size_t send_cap, recv_cap;
    double ss;                /* squared global norm when have_ss */
    int have_ss;
    int use_feed;             /* fast numerics fed by train/devfeed (GPU; PLUMB_TRAIN_DEVFEED=1 on any device) */
    int feed_threads;
    struct ctr_dev_batch db;  /* the step's device batch when use_feed */
    float *hd;                /* GP_HOST host views of the dense grads and the sparse list */
    const int64_t *hr;
    const float *hg;
    size_t hn;
    /* eval (this rank's contiguous share of the eval split) */
    long ev_lo, ev_n;
    float *ev_dense, *ev_labels;
    uint32_t *ev_sparse;
    float *ev_logits;
    /* metrics */
    FILE *metrics;
    char cfg_str[1024];
    char cfg_hash[65];
    int oom_inject_left;
    /* recovery tiers (fault tolerance) */
    int split;                /* micro-batches per local batch after an OOM split (1 = none); kept */
    float *h_acc;             /* [n_dense] dense gradient accumulator of a split batch */
    long bad_run;             /* non-finite steps in a row */
    long rollbacks;
    plumb_err local_err;      /* the error behind SF_ERROR on this rank */
};

/* ------------------------------------------------------------------ utils */

static int is_cpu(const struct trainer *t) { return !strcmp(t->d->be->name, "cpu"); }

static int to_host(struct trainer *t, void *dst, const void *src, size_t bytes, plumb_err *e)
{
    if (!bytes) return PLUMB_OK;
    if (is_cpu(t)) {
        memcpy(dst, src, bytes);
        return PLUMB_OK;
    }
    return dev_download(t->d, dst, src, bytes, e);
}

static int to_dev(struct trainer *t, void *dst, const void *src, size_t bytes, plumb_err *e)
{
    if (!bytes) return PLUMB_OK;
    if (is_cpu(t)) {
        memcpy(dst, src, bytes);
        return PLUMB_OK;
    }
    return dev_upload(t->d, dst, src, bytes, e);
}

static const char *prec_name(dtype_t p) { return dtype_name(p); }

static double lr_at(const struct train_config *cfg, long step)
{
    if (cfg->warmup > 0 && step < cfg->warmup) return cfg->lr * (double)(step + 1) / (double)cfg->warmup;
    return cfg->lr;
}

static void config_string(struct trainer *t)
{
    const struct train_config *c = t->cfg;
    char model[256];
    ctr_config_describe(&t->mc, model, sizeof model);
    snprintf(t->cfg_str, sizeof t->cfg_str,
             "workload=ctr;preset=%s;model=%s;data=%s;eval_data=%s;data_seed=%llu;train_samples=%ld;"
             "batch=%ld;seed=%llu;lr=%.17g;warmup=%ld;optimizer=%s;weight_decay=%.17g;numerics=%s;"
             "precision=%s;micro_shard=%d;loss_scale=%s;ls=%.17g/%.17g/%.17g/%ld;clip=%.17g",
             c->preset, model, c->data, c->eval_data ? c->eval_data : "", (unsigned long long)c->data_seed,
             t->ds->n[0], c->batch, (unsigned long long)c->seed, c->lr, c->warmup, c->optimizer,
             c->weight_decay, c->numerics == NUMERICS_GOLDEN ? "golden" : "fast", prec_name(c->precision),
             c->micro_shard, t->sc.enabled ? "dynamic" : "off", c->ls_init, c->ls_growth, c->ls_backoff,
             c->ls_interval, c->clip_grad_norm);
    hash_sha256_hex(t->cfg_str, strlen(t->cfg_str), t->cfg_hash);
}

/* ------------------------------------------------------------ setup/free */

static void trainer_free(struct trainer *t)
{
    if (t->metrics) fclose(t->metrics);
    if (t->d) {
        if (t->nc) nccl_comm_free(t->nc);
        dev_free(t->d, t->d_rows_in), dev_free(t->d, t->d_rows), dev_free(t->d, t->d_sg_in);
        dev_free(t->d, t->d_sg), dev_free(t->d, t->d_scratch);
        if (t->d_send) dev_free(t->d, t->d_send);
        if (t->d_recv) dev_free(t->d, t->d_recv);
    }
    ctr_free(t->m);
    free(t->h_dense), free(t->h_rows), free(t->h_sgrads), free(t->h_acc);
    free(t->q_dense), free(t->q_rows), free(t->q_vals);
    free(t->ev_dense), free(t->ev_labels), free(t->ev_sparse), free(t->ev_logits);
    sampler_free(&t->smp);
    dataset_free(t->ds);
    if (t->d) dev_close(t->d);
}

static int open_device(struct trainer *t, plumb_err *e)
{
    const struct train_config *cfg = t->cfg;
    char spec[64];
    int rc;
    /* one process per GPU: "cuda" means cuda:<local rank> (an error when the
     * host shows fewer GPUs than ranks, naming the visibility variable) */
    if ((!strcmp(cfg->device, "cuda") || !strcmp(cfg->device, "hip")) && t->c->local_world > 1) {
        char s32[32];
        plumb_err me = {0};
        rc = nccl_device_for_rank(cfg->device, t->c->local_rank, t->c->local_world, s32, &me);
        if (rc == PLUMB_EUSAGE) {
            if (e) *e = me;
            return rc;
        }
        /* no backend to count devices: dev_open below reports it (or falls back to the cpu) */
        if (rc) snprintf(s32, sizeof s32, "%s:%d", cfg->device, t->c->local_rank);
        snprintf(spec, sizeof spec, "%s", s32);
    } else {
        snprintf(spec, sizeof spec, "%s", cfg->device);
    }
    rc = dev_open_or_cpu(spec, &t->d, e);
    if (rc) return rc;
    if (!strcmp(t->d->be->name, "cpu")) {
        int th = cfg->threads;
        if (th <= 0) {
            long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
            th = (int)(ncpu / (t->c->local_world > 0 ? t->c->local_world : 1));
            if (th < 1) th = 1;
        }
        t->d->threads = th;
    }
    if ((rc = dev_set_numerics(t->d, cfg->numerics, cfg->numerics == NUMERICS_FAST && cfg->allow_tf32, e))) return rc;
    if (!t->d->ops->train) return err_set(e, PLUMB_EUNSUPPORTED, "device %s has no training ops", t->d->label);
    t->to = t->d->ops->train;
    return PLUMB_OK;
}

static int setup(struct trainer *t, plumb_err *e)
{
    const struct train_config *cfg = t->cfg;
    int rc;
    if (cfg->steps < 0) return err_set(e, PLUMB_EUSAGE, "--steps: %ld (expected >= 0)", cfg->steps);
    if (cfg->batch < 1) return err_set(e, PLUMB_EUSAGE, "--batch: %ld (expected a positive global batch)", cfg->batch);
    if (cfg->micro_shard < 1) return err_set(e, PLUMB_EUSAGE, "--micro-shard: %d (expected >= 1)", cfg->micro_shard);
    if (cfg->eval_batch < 1) return err_set(e, PLUMB_EUSAGE, "--eval-batch: %ld (expected >= 1)", cfg->eval_batch);
    if (!(cfg->lr > 0)) return err_set(e, PLUMB_EUSAGE, "--lr: %g (expected > 0)", cfg->lr);
    if (cfg->precision != DT_F32 && cfg->precision != DT_BF16 && cfg->precision != DT_F16)
        return err_set(e, PLUMB_EUSAGE, "--precision: %s (expected fp32, bf16 or fp16)", dtype_name(cfg->precision));
    if (!(cfg->ls_init > 0) || !(cfg->ls_growth >= 1) || !(cfg->ls_backoff > 0 && cfg->ls_backoff < 1) ||
        cfg->ls_interval < 1)
        return err_set(e, PLUMB_EUSAGE,
                       "loss scaling: init %g, growth %g, backoff %g, interval %ld (expected init > 0, growth >= 1, "
                       "0 < backoff < 1, interval >= 1)",
                       cfg->ls_init, cfg->ls_growth, cfg->ls_backoff, cfg->ls_interval);
    if (cfg->resume && !cfg->ckpt_dir) return err_set(e, PLUMB_EUSAGE, "--resume needs --checkpoint-dir");
    if ((rc = ctr_config_preset(cfg->preset, cfg->rows, &t->mc, e))) return rc;
    if ((rc = open_device(t, e))) return rc;

    struct data_opts dop = {.seed = cfg->data_seed,
                            .train_samples = cfg->train_samples,
                            .eval_samples = cfg->eval_samples,
                            .eval_file = cfg->eval_data,
                            .eval_fraction = cfg->eval_fraction,
                            .bad = cfg->bad_lines_skip ? CRITEO_BAD_SKIP : CRITEO_BAD_ERROR,
                            .max_rows = cfg->max_rows};
    /* synthetic samples into memory once when the feed must keep up with a
     * GPU, or when the run goes over the train split at least once anyway
     * (the teacher is then evaluated once per sample, not once per access) */
    dop.materialize = (!is_cpu(t) && cfg->numerics != NUMERICS_GOLDEN) ||
                      (double)cfg->steps * (double)cfg->batch >= (double)cfg->train_samples;
    if ((rc = dataset_open(cfg->data, &dop, &t->ds, e))) return rc;
    if ((rc = sampler_init(&t->smp, t->ds->n[0], cfg->batch, cfg->micro_shard, cfg->seed, 1, e))) return rc;

    long local_cap = sampler_local_capacity(&t->smp, t->rank, t->world);
    int train_mb = cfg->numerics == NUMERICS_GOLDEN ? cfg->micro_shard : (int)(local_cap > 0 ? local_cap : 1);
    if (cfg->numerics == NUMERICS_GOLDEN && train_mb > cfg->batch) train_mb = (int)cfg->batch;
    t->max_batch = train_mb > cfg->eval_batch ? train_mb : (int)cfg->eval_batch;
    if ((rc = ctr_create(t->d, &t->mc, t->max_batch, cfg->precision, &t->m, e))) return rc;
    if ((rc = ctr_init(t->m, cfg->seed, e))) return rc;
    t->n_dense = ctr_n_dense(t->m);
    t->n_params = ctr_n_params(t->m);
    t->D = t->mc.emb_dim;
    memcpy(t->rows, t->mc.rows, sizeof t->rows);

    int dyn = !strcmp(cfg->loss_scale, "dynamic") || (!strcmp(cfg->loss_scale, "auto") && cfg->precision == DT_F16);
    scaler_init(&t->sc, dyn, cfg->ls_init, cfg->ls_growth, cfg->ls_backoff, cfg->ls_interval);

    t->opt.kind = !strcmp(cfg->optimizer, "adamw") ? CTR_OPT_ADAMW : CTR_OPT_SGD;
    t->opt.weight_decay = (float)cfg->weight_decay;
    t->opt.beta1 = 0.9f;
    t->opt.beta2 = 0.999f;
    t->opt.eps = 1e-8f;
    if (t->opt.kind == CTR_OPT_ADAMW && (rc = ctr_opt_state_alloc(t->m, e))) return rc;

    t->sparse_cap = cfg->batch * CTR_N_TABLES;
    size_t D = (size_t)t->D, sc = (size_t)t->sparse_cap;
    t->h_dense = malloc(t->n_dense * sizeof(float));
    t->h_rows = malloc(sc * sizeof(int64_t));
    t->h_sgrads = malloc(sc * D * sizeof(float));
    if (!t->h_dense || !t->h_rows || !t->h_sgrads) return err_set(e, PLUMB_ENOMEM, "trainer: out of host memory");
    if (cfg->numerics == NUMERICS_GOLDEN) {
        t->q_dense = malloc(t->n_dense * sizeof(int64_t));
        t->q_rows = malloc(sc * sizeof(int64_t));
        t->q_vals = malloc(sc * D * sizeof(int64_t));
        if (!t->q_dense || !t->q_rows || !t->q_vals) return err_set(e, PLUMB_ENOMEM, "trainer: out of host memory");
        /* every micro-shard of a global batch may add up to the bound */
        t->q_bound = ldexp(1.0, 62) / (double)(sampler_nshards(&t->smp) + 1);
    }
    if ((rc = dev_alloc(t->d, sc * sizeof(int64_t), (void **)&t->d_rows_in, e)) ||
        (rc = dev_alloc(t->d, sc * sizeof(int64_t), (void **)&t->d_rows, e)) ||
        (rc = dev_alloc(t->d, sc * D * sizeof(float), (void **)&t->d_sg_in, e)) ||
        (rc = dev_alloc(t->d, sc * D * sizeof(float), (void **)&t->d_sg, e)) ||
        (rc = dev_alloc(t->d, SCR_BYTES, &t->d_scratch, e)))
        return rc;
    t->d_sumsq = (double *)((char *)t->d_scratch + SCR_SUMSQ);
    t->d_found = (int *)((char *)t->d_scratch + SCR_FOUND);
    t->d_n = (int64_t *)((char *)t->d_scratch + SCR_N);

    /* this rank's eval share: contiguous chunks of eval_batch samples */
    long ne = t->ds->n[1], E = cfg->eval_batch, C = (ne + E - 1) / E;
    long c0 = C * t->rank / t->world, c1 = C * (t->rank + 1) / t->world;
    t->ev_lo = c0 * E;
    long hi = c1 * E < ne ? c1 * E : ne;
    t->ev_n = hi > t->ev_lo ? hi - t->ev_lo : 0;
    size_t en = (size_t)(t->ev_n > 0 ? t->ev_n : 1);
    t->ev_dense = malloc(en * CTR_N_DENSE * sizeof(float));
    t->ev_sparse = malloc(en * CTR_N_TABLES * sizeof(uint32_t));
    t->ev_labels = malloc(en * sizeof(float));
    t->ev_logits = malloc(en * sizeof(float));
    uint32_t *idx = malloc(en * sizeof(uint32_t));
    if (!t->ev_dense || !t->ev_sparse || !t->ev_labels || !t->ev_logits || !idx) {
        free(idx);
        return err_set(e, PLUMB_ENOMEM, "trainer: cannot hold %ld eval samples", t->ev_n);
    }
    for (long i = 0; i < t->ev_n; i++) idx[i] = (uint32_t)(t->ev_lo + i);
    data_fill(t->ds, 1, idx, (int)t->ev_n, t->rows, t->ev_dense, t->ev_sparse, t->ev_labels);
    free(idx);
    config_string(t);
    return PLUMB_OK;
}

/* The gradient path of fast numerics and the device comm (--comm; see "the
 * fast gradient path" below). Collective: every rank calls it after setup
 * succeeded everywhere. */
static int setup_comm(struct trainer *t, plumb_err *e)
{
    const struct train_config *cfg = t->cfg;
    const char *kind = cfg->comm && *cfg->comm ? cfg->comm : "auto";
    const char *be = t->d->be->name;
    int gpu = !strcmp(be, "cuda") || !strcmp(be, "hip");
    int fast = cfg->numerics == NUMERICS_FAST;
    const char *stand = getenv("PLUMB_TRAIN_DEVICE_COMM");
    char why[1024] = "";
    int use_nccl = 0, rc;
    if (strcmp(kind, "auto") && strcmp(kind, "nccl") && strcmp(kind, "mpi") && strcmp(kind, "self"))
        return err_set(e, PLUMB_EUSAGE, "--comm: '%s' (expected auto, mpi, self or nccl)", kind);
    if (!strcmp(kind, "nccl")) {
        if (!gpu)
            return err_set(e, PLUMB_EUSAGE, "--comm nccl: device %s is not a cuda or hip GPU (use --comm auto or mpi)",
                           t->d->label);
        if (fast) use_nccl = 1, snprintf(why, sizeof why, "--comm nccl");
        else snprintf(why, sizeof why, "--comm nccl, but golden numerics sum int64 fixed point over the host comm");
    } else if (!strcmp(kind, "auto")) {
        if (!gpu) snprintf(why, sizeof why, "auto: device %s is not a GPU", t->d->label);
        else if (!fast) snprintf(why, sizeof why, "auto: golden numerics (exact int64 sums over the host comm)");
        else if (t->world == 1) snprintf(why, sizeof why, "auto: 1 rank, nothing to exchange");
        else {
            plumb_err le = {0};
            use_nccl = nccl_load(be, NULL, 0, &le) == PLUMB_OK;
            if (!use_nccl) snprintf(why, sizeof why, "auto: %s", le.msg);
            /* every rank must take the same path */
            uint32_t v = (uint32_t)use_nccl;
            if ((rc = comm_allreduce(t->c, &v, 1, DT_U32, COMM_MIN, "nccl availability", e))) return rc;
            if (use_nccl && !v) snprintf(why, sizeof why, "auto: NCCL/RCCL does not load on every rank");
            use_nccl = (int)v;
            if (use_nccl) snprintf(why, sizeof why, "auto: %s device, fast numerics, %d ranks", be, t->world);
        }
    } else {
        snprintf(why, sizeof why, "--comm %s", kind);
    }
    if (use_nccl) {
        double to = cfg->watchdog_s > 0 ? cfg->watchdog_s : 300;
        if ((rc = nccl_comm_init(t->c, t->d, to, &t->nc, e))) return err_wrap(e, "--comm %s", kind);
        t->gp = GP_DEVICE;
    } else if (fast && stand && !strcmp(stand, "host")) {
        /* test hook: the device-collective path with the host comm standing
         * in for NCCL, possible on the cpu device only (its memory is host memory) */
        if (!is_cpu(t))
            return err_set(e, PLUMB_EUSAGE, "PLUMB_TRAIN_DEVICE_COMM=host needs the cpu device (not %s)", t->d->label);
        t->gp = GP_DEVICE;
        snprintf(why + strlen(why), sizeof why - strlen(why), "; PLUMB_TRAIN_DEVICE_COMM=host");
    } else {
        t->gp = t->world > 1 ? GP_HOST : GP_LOCAL;
    }
    if (t->gp == GP_DEVICE) {
        /* dense buckets: layers in backward order merged up to PLUMB_NCCL_BUCKET_MB (default 25; 0 = one bucket) */
        size_t off[2 * CTR_MAX_LAYERS], len[2 * CTR_MAX_LAYERS];
        t->n_layers = ctr_grad_layers(t->m, off, len);
        const char *v = getenv("PLUMB_NCCL_BUCKET_MB");
        double mb = v && *v ? atof(v) : 25.0;
        size_t min = mb > 0 ? (size_t)(mb * 1048576.0 / sizeof(float)) : (size_t)-1;
        if (min < 1) min = 1;
        size_t acc = 0, hi = t->n_layers ? off[0] + len[0] : 0;
        t->nb = 0;
        for (int k = 0; k < t->n_layers; k++) {
            acc += len[k];
            t->close_at[k] = -1;
            if (acc >= min || k == t->n_layers - 1) {
                t->b_lo[t->nb] = off[k];
                t->b_hi[t->nb] = hi;
                t->close_at[k] = t->nb++;
                hi = off[k];
                acc = 0;
            }
        }
    }
    /* the data path: the device feed for fast numerics on a GPU (PLUMB_TRAIN_DEVFEED=1/0 forces it on/off) */
    const char *fv = getenv("PLUMB_TRAIN_DEVFEED");
    t->use_feed = fast && (fv && *fv ? atoi(fv) != 0 : !is_cpu(t));
    if (t->use_feed) {
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        /* default: this rank's share of the cores, less the launching and
         * producer threads (the builders run a fraction of each step; more
         * of them than cores slows the launching thread) */
        int th = cfg->threads > 0 ? cfg->threads : (int)(ncpu / (t->c->local_world > 0 ? t->c->local_world : 1)) - 2;
        t->feed_threads = th < 1 ? 1 : th > 16 ? 16 : th;
        if (t->rank == 0 && !cfg->quiet)
            log_info("data: device feed (pinned buffers, %d build thread%s, H2D on a copy stream, %d deep)",
                     t->feed_threads, t->feed_threads == 1 ? "" : "s", cfg->prefetch > 2 ? cfg->prefetch : 2);
    }
    if (t->rank == 0 && !cfg->quiet) {
        const char *hc = t->c->ops->name;
        if (cfg->numerics == NUMERICS_GOLDEN)
            log_info("comm: %s (golden: int64 fixed-point sums, staged through host memory) [%s]", hc, why);
        else if (t->gp == GP_DEVICE && t->nc)
            log_info("comm: gradients on the device over %s, %d bucket%s, control over %s [%s]", nccl_describe(t->nc),
                     t->nb, t->nb == 1 ? "" : "s", hc, why);
        else if (t->gp == GP_DEVICE)
            log_info("comm: device-collective path with the host comm %s standing in for NCCL, %d bucket%s [%s]", hc,
                     t->nb, t->nb == 1 ? "" : "s", why);
        else if (t->gp == GP_HOST)
            log_info("comm: %s, gradients staged through host memory%s [%s]", hc,
                     is_cpu(t) ? " (the cpu device's own)" : "", why);
        else
            log_info("comm: %s, 1 rank: gradients stay on the device, no exchange [%s]", hc, why);
    }
    return PLUMB_OK;
}

/* The teacher's AUC on the eval split (synthetic data), computed exactly over
 * all ranks like any eval. */
static int teacher_auc(struct trainer *t, double *auc, plumb_err *e)
{
    *auc = NAN;
    if (!t->ds->synthetic) return PLUMB_OK;
    size_t n = (size_t)t->ev_n;
    float *lg = malloc((n ? n : 1) * sizeof *lg);
    if (!lg) return err_set(e, PLUMB_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        struct criteo_sample s;
        float p;
        synth_sample(t->ds->syn, SYNTH_EVAL, (uint64_t)(t->ev_lo + (long)i), &s, &p);
        lg[i] = p; /* AUC depends on the order only */
    }
    /* only the AUC of the gathered probabilities is used */
    void *sv, *yv;
    size_t sn, yn;
    int rc = comm_allgatherv_alloc(t->c, lg, n * sizeof(float), &sv, &sn, NULL, "teacher scores", e);
    free(lg);
    if (rc) return rc;
    rc = comm_allgatherv_alloc(t->c, t->ev_labels, n * sizeof(float), &yv, &yn, NULL, "teacher labels", e);
    if (rc) {
        free(sv);
        return rc;
    }
    float *all_s = sv, *all_y = yv;
    *auc = eval_auc(all_s, all_y, yn / sizeof(float));
    free(all_s);
    free(all_y);
    return PLUMB_OK;
}

/* --------------------------------------------------------------- eval */

static int run_eval(struct trainer *t, struct eval_result *r, float **all_logits, float **all_labels,
                    plumb_err *e)
{
    long E = t->cfg->eval_batch;
    for (long off = 0; off < t->ev_n; off += E) {
        long n = t->ev_n - off < E ? t->ev_n - off : E;
        struct ctr_batch b = {.B = (int)n,
                              .n_valid = (int)n,
                              .dense = t->ev_dense + off * CTR_N_DENSE,
                              .sparse = t->ev_sparse + off * CTR_N_TABLES,
                              .labels = t->ev_labels + off};
        int rc = ctr_predict(t->m, &b, NULL, t->ev_logits + off, NULL, e);
        if (rc) return err_wrap(e, "eval at step %ld", t->step);
    }
    return eval_exact(t->c, t->ev_logits, t->ev_labels, (size_t)t->ev_n, r, all_logits, all_labels, e);
}

/* --------------------------------------------------------- checkpoints */

static int ckpt_save(struct trainer *t, char *path_out, plumb_err *e)
{
    int rc = PLUMB_OK;
    char path[4096] = "";
    if (t->rank == 0) {
        float *params = malloc(t->n_params * sizeof(float));
        float *am = NULL, *av = NULL, *hm = NULL, *hv = NULL;
        size_t an = 0;
        ctr_opt_state(t->m, &am, &av, &an);
        if (!params) rc = err_set(e, PLUMB_ENOMEM, "checkpoint: out of memory");
        if (!rc) rc = to_host(t, params, ctr_params(t->m), t->n_params * sizeof(float), e);
        if (!rc && an) {
            hm = malloc(an * sizeof(float));
            hv = malloc(an * sizeof(float));
            if (!hm || !hv) rc = err_set(e, PLUMB_ENOMEM, "checkpoint: out of memory");
            if (!rc) rc = to_host(t, hm, am, an * sizeof(float), e);
            if (!rc) rc = to_host(t, hv, av, an * sizeof(float), e);
        }
        char digest[65] = "";
        if (!rc) rc = ctr_param_digest(t->m, digest, e);
        if (!rc) {
            json_t *meta = json_pack("{s:s, s:s, s:I, s:I, s:I, s:s, s:s, s:s, s:i, s:I, s:{s:f, s:I, s:I}, s:s}",
                                     "format", "plumb.ckpt/1", "workload", "ctr", "step", (json_int_t)t->step,
                                     "opt_step", (json_int_t)t->opt_t, "epoch",
                                     (json_int_t)(t->step / sampler_steps_per_epoch(&t->smp)), "config_hash",
                                     t->cfg_hash, "config", t->cfg_str, "param_digest", digest, "world", t->world,
                                     "samples_seen", (json_int_t)(t->step * t->cfg->batch), "scaler", "scale",
                                     t->sc.scale, "clean_steps", (json_int_t)t->sc.clean_steps, "skipped_total",
                                     (json_int_t)t->sc.skipped_total, "written_utc", "");
            char ts[32];
            time_t now = time(NULL);
            strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
            json_object_set_new(meta, "written_utc", json_string(ts));
            char *ms = json_dumps(meta, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
            json_decref(meta);
            struct ckpt_section sec[4];
            int ns = 0;
            memset(sec, 0, sizeof sec);
            snprintf(sec[ns].name, CKPT_NAME_MAX, "meta");
            sec[ns].data = ms, sec[ns++].len = strlen(ms);
            snprintf(sec[ns].name, CKPT_NAME_MAX, "params");
            sec[ns].data = params, sec[ns++].len = t->n_params * sizeof(float);
            if (an) {
                snprintf(sec[ns].name, CKPT_NAME_MAX, "adam_m");
                sec[ns].data = hm, sec[ns++].len = an * sizeof(float);
                snprintf(sec[ns].name, CKPT_NAME_MAX, "adam_v");
                sec[ns].data = hv, sec[ns++].len = an * sizeof(float);
            }
            rc = ckpt_write(t->cfg->ckpt_dir, t->step, sec, ns, t->cfg->ckpt_keep, path, e);
            free(ms);
            if (!rc && inject_take(INJECT_CORRUPT_CKPT, t->step, t->rank)) {
                log_warn("injected fault: corrupting checkpoint %s", path);
                plumb_err ce = {0};
                if (ckpt_corrupt_file(path, &ce)) log_warn("%s", ce.msg);
            }
        }
        free(params), free(hm), free(hv);
    }
    /* everyone learns whether rank 0 managed */
    int32_t status[2] = {rc, 0};
    int brc = comm_broadcast(t->c, status, sizeof status, 0, "checkpoint status", e);
    if (brc) return brc;
    if (status[0] && t->rank != 0) return err_set(e, status[0], "rank 0 could not write the checkpoint at step %ld", t->step);
    if (!rc && path_out) snprintf(path_out, 4096, "%s", path);
    if (!rc && t->rank == 0 && !t->cfg->quiet) log_info("checkpoint written: %s (step %ld)", path, t->step);
    return rc;
}

/* Rank 0 finds the newest valid checkpoint and broadcasts its image; every
 * rank verifies and applies it. *found = 0 when there is none. */
static int ckpt_restore(struct trainer *t, int *found, plumb_err *e)
{
    *found = 0;
    struct ckpt ck;
    memset(&ck, 0, sizeof ck);
    uint64_t size = 0;
    int rc = PLUMB_OK;
    if (t->rank == 0) {
        int f = 0;
        rc = ckpt_load_latest(t->cfg->ckpt_dir, &ck, &f, e);
        if (!rc && f) size = ck.size;
    }
    int32_t st = rc;
    int brc = comm_broadcast(t->c, &st, sizeof st, 0, "resume status", e);
    if (!brc) brc = comm_broadcast(t->c, &size, sizeof size, 0, "resume size", e);
    if (brc) {
        ckpt_free(&ck);
        return brc;
    }
    if (st) {
        ckpt_free(&ck);
        return t->rank == 0 ? rc : err_set(e, st, "rank 0 could not read the checkpoint directory");
    }
    if (size == 0) return PLUMB_OK;
    char *buf;
    char path[4096];
    if (t->rank == 0) {
        buf = ck.buf;
        snprintf(path, sizeof path, "%s", ck.path);
        ck.buf = NULL;
        ckpt_free(&ck);
    } else {
        buf = malloc(size);
        if (!buf) return err_set(e, PLUMB_ENOMEM, "resume: cannot hold a %llu-byte checkpoint", (unsigned long long)size);
        snprintf(path, sizeof path, "%s (from rank 0)", t->cfg->ckpt_dir);
    }
    if ((rc = comm_broadcast(t->c, buf, size, 0, "resume checkpoint", e))) {
        free(buf);
        return rc;
    }
    if ((rc = ckpt_parse(path, buf, size, &ck, e))) return rc;
    size_t ml;
    const char *ms = ckpt_find(&ck, "meta", &ml);
    json_error_t je;
    json_t *meta = ms ? json_loadb(ms, ml, 0, &je) : NULL;
    if (!meta) {
        ckpt_free(&ck);
        return err_set(e, PLUMB_ECORRUPT, "%s: no readable meta section", path);
    }
    const char *hash = jsonx_str(meta, "config_hash");
    if (!hash || strcmp(hash, t->cfg_hash)) {
        const char *cs = jsonx_str(meta, "config");
        rc = err_set(e, PLUMB_EUSAGE,
                     "%s was written by a run with another configuration:\n  checkpoint: %s\n  this run:   %s\n"
                     "(resume with the same preset, data, batch, seed, optimizer, numerics and precision, or use "
                     "another --checkpoint-dir)",
                     path, cs ? cs : "?", t->cfg_str);
        json_decref(meta);
        ckpt_free(&ck);
        return rc;
    }
    size_t pl;
    const void *p = ckpt_find(&ck, "params", &pl);
    if (!p || pl != t->n_params * sizeof(float)) {
        json_decref(meta);
        ckpt_free(&ck);
        return err_set(e, PLUMB_ECORRUPT, "%s: params section has %zu bytes, expected %zu", path, p ? pl : 0,
                       t->n_params * sizeof(float));
    }
    rc = to_dev(t, ctr_params(t->m), p, pl, e);
    if (!rc && t->opt.kind == CTR_OPT_ADAMW) {
        float *am, *av;
        size_t an;
        ctr_opt_state(t->m, &am, &av, &an);
        size_t ml2, vl;
        const void *mm = ckpt_find(&ck, "adam_m", &ml2), *vv = ckpt_find(&ck, "adam_v", &vl);
        if (!mm || !vv || ml2 != an * sizeof(float) || vl != an * sizeof(float))
            rc = err_set(e, PLUMB_ECORRUPT, "%s: AdamW state missing or of the wrong size", path);
        if (!rc) rc = to_dev(t, am, mm, ml2, e);
        if (!rc) rc = to_dev(t, av, vv, vl, e);
    }
    if (!rc) {
        t->step = (long)jsonx_num(meta, "step");
        t->opt_t = (long)jsonx_num(meta, "opt_step");
        json_t *s = json_object_get(meta, "scaler");
        t->sc.scale = jsonx_num(s, "scale");
        t->sc.clean_steps = (long)jsonx_num(s, "clean_steps");
        t->sc.skipped_total = (long)jsonx_num(s, "skipped_total");
        if (!t->sc.enabled) t->sc.scale = 1.0;
        *found = 1;
        if (t->rank == 0 && !t->cfg->quiet)
            log_info("resumed from %s: step %ld (written on %d ranks, now %d)", path, t->step,
                     (int)jsonx_num(meta, "world"), t->world);
    }
    json_decref(meta);
    ckpt_free(&ck);
    return rc;
}

/* ---------------------------------------------------------------- step */

struct step_info {
    double loss;           /* mean loss of the global batch */
    double grad_norm;      /* global, after unscaling, before clipping */
    double lr;
    double scale;          /* loss scale used for this step */
    int skipped;
    int oom_skipped;       /* the batch was skipped by the OOM tiers */
    int deliberate;        /* --skip-batches */
    int64_t flags[SF_N];
    double compute_s, comm_s, opt_s;
};

static int cmp_row(const void *a, const void *b)
{
    const int64_t *x = a, *y = b;
    return (*x > *y) - (*x < *y);
}

/* Golden: quantize the model's current gradients (dense + sparse list) and
 * add them to the accumulators. */
static int golden_accumulate(struct trainer *t, int64_t *flags, plumb_err *e)
{
    int rc = to_host(t, t->h_dense, ctr_grads(t->m), t->n_dense * sizeof(float), e);
    if (rc) return rc;
    double k = t->q_mul, bound = t->q_bound;
    for (size_t i = 0; i < t->n_dense; i++) {
        double v = (double)t->h_dense[i] * k;
        if (!(fabs(v) < bound)) {
            flags[SF_NONFINITE] = 1;
            return PLUMB_OK;
        }
        t->q_dense[i] += llrint(v);
    }
    int64_t *rows;
    float *grads;
    size_t n;
    ctr_sparse_grads(t->m, &rows, &grads, &n);
    if (t->q_n + n > (size_t)t->sparse_cap)
        return err_set(e, PLUMB_EINTERNAL, "sparse gradient list overflow (%zu + %zu > %ld)", t->q_n, n, t->sparse_cap);
    size_t D = (size_t)t->D;
    if ((rc = to_host(t, t->q_rows + t->q_n, rows, n * sizeof(int64_t), e))) return rc;
    if ((rc = to_host(t, t->h_sgrads, grads, n * D * sizeof(float), e))) return rc;
    for (size_t u = 0; u < n * D; u++) {
        double v = (double)t->h_sgrads[u] * k;
        if (!(fabs(v) < bound)) {
            flags[SF_NONFINITE] = 1;
            return PLUMB_OK;
        }
        t->q_vals[t->q_n * D + u] = llrint(v);
    }
    t->q_n += n;
    return PLUMB_OK;
}

/* Sums records (row, q[D]) with equal rows: sorted by row, exact. Records
 * are packed as int64 [row, q0..qD-1]. Returns the distinct count. */
static size_t merge_records(int64_t *rec, size_t n, int D)
{
    size_t w = (size_t)D + 1;
    qsort(rec, n, w * sizeof(int64_t), cmp_row);
    size_t u = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t *src = rec + i * w;
        if (u > 0 && rec[(u - 1) * w] == src[0]) {
            int64_t *dst = rec + (u - 1) * w;
            for (int j = 1; j <= D; j++) dst[j] += src[j];
        } else {
            if (u != i) memmove(rec + u * w, src, w * sizeof(int64_t));
            u++;
        }
    }
    return u;
}

/* ---- the fast gradient path (DESIGN.md section 8; docs/TRAINING.md) ----
 * GP_LOCAL  (1 rank, no device comm): the gradients never leave the device;
 *           the model's sparse list goes straight to the optimizer.
 * GP_DEVICE (a device comm: NCCL/RCCL, or the host comm standing in for it
 *           on the cpu device): dense buckets all-reduced on the device as
 *           backward completes them (ctr grad-ready hook), sparse lists
 *           gathered on the device (padded to the largest) and coalesced
 *           there; unscale + inf check after the reduction (every rank sees
 *           the same sums, so the same decision).
 * GP_HOST   (ranks over the host comm: cpu device, or a GPU without NCCL):
 *           staged through host memory (no copies on the cpu device, whose
 *           memory is host memory), reduced with MPI, coalesced on the device.
 * Each path reads back one small status block per step where it can
 * (scratch: sumsq, found-inf, sparse count). */
struct scratch_host {
    double sumsq;
    int found, pad;
    int64_t n;
};

/* the norm is needed for clipping (every rank) and for metrics.jsonl (rank 0) */
static int want_norm(const struct trainer *t) { return t->cfg->clip_grad_norm > 0 || t->metrics != NULL; }

static int read_scratch(struct trainer *t, struct scratch_host *h, plumb_err *e)
{
    char buf[SCR_BYTES];
    int rc = to_host(t, buf, t->d_scratch, SCR_BYTES, e);
    if (rc) return rc;
    memcpy(&h->sumsq, buf + SCR_SUMSQ, sizeof h->sumsq);
    memcpy(&h->found, buf + SCR_FOUND, sizeof h->found);
    memcpy(&h->n, buf + SCR_N, sizeof h->n);
    return PLUMB_OK;
}

/* Launches the dense all-reduce of buckets launched..j (in order: every rank
 * enqueues the same sequence). */
static int launch_upto(struct trainer *t, int j, dev_stream *s, plumb_err *e)
{
    while (t->launched <= j) {
        int k = t->launched;
        float *g = ctr_grads(t->m) + t->b_lo[k];
        size_t n = t->b_hi[k] - t->b_lo[k];
        int rc;
        if (t->nc) {
            rc = nccl_allreduce_async(t->nc, g, n, DT_F32, s, e);
        } else {
            char what[64];
            snprintf(what, sizeof what, "allreduce grads bucket %d", k);
            rc = comm_allreduce(t->c, g, n, DT_F32, COMM_SUM, what, e);
        }
        if (rc) return err_wrap(e, "all-reduce of gradient bucket %d [%zu, %zu)", k, t->b_lo[k], t->b_hi[k]);
        t->launched++;
    }
    return PLUMB_OK;
}

/* ctr's grad-ready hook: layer k's gradients are final on stream s */
static int grad_ready(void *ctx, int k, size_t off, size_t len, dev_stream *s, plumb_err *e)
{
    struct trainer *t = ctx;
    (void)off, (void)len;
    return k < t->n_layers && t->close_at[k] >= 0 ? launch_upto(t, t->close_at[k], s, e) : PLUMB_OK;
}

/* Forward + backward of the step's local batch (whole), or of its samples
 * [off, off+cnt) (OOM split), from the device feed or the host batch. */
static int fwd_bwd(struct trainer *t, struct host_batch *b, int whole, long off, long cnt, float gscale,
                   struct ctr_loss *l, plumb_err *e)
{
    if (t->use_feed) {
        struct ctr_dev_batch db = t->db;
        if (!whole) {
            db.B = db.n_valid = (int)cnt;
            db.dense = t->db.dense + off * CTR_N_DENSE;
            db.sparse = t->db.sparse + off * CTR_N_TABLES;
            db.labels = t->db.labels + off;
        }
        return ctr_forward_backward_dev(t->m, &db, gscale, l, e);
    }
    struct ctr_batch mb = {.B = b->cap, .n_valid = b->n, .dense = b->dense, .sparse = b->sparse, .labels = b->labels};
    if (!whole) {
        mb.B = mb.n_valid = (int)cnt;
        mb.dense = b->dense + off * CTR_N_DENSE;
        mb.sparse = b->sparse + off * CTR_N_TABLES;
        mb.labels = b->labels + off;
    }
    return ctr_forward_backward(t->m, &mb, gscale, l, e);
}

/* OOM split (rare): micro-batch by micro-batch, the dense gradients summed on
 * the host (t->h_acc) and the sparse lists appended (h_rows/h_sgrads); each
 * unscaled and inf-checked on the device first unless the reduction does it
 * (GP_DEVICE). *ok = 1 when every micro-batch ran. */
static int split_accumulate(struct trainer *t, struct host_batch *b, struct step_info *si, int k, double gscale,
                            int64_t *loss_fix, int64_t *count, int *ok, plumb_err *e)
{
    size_t D = (size_t)t->D;
    float inv = (float)(1.0 / si->scale);
    int unscale = t->gp != GP_DEVICE;
    int rc = PLUMB_OK;
    *ok = 0;
    memset(t->h_acc, 0, t->n_dense * sizeof(float));
    long per = (b->n + k - 1) / k;
    for (long off = 0; off < b->n && !rc; off += per) {
        long cnt = b->n - off < per ? b->n - off : per;
        struct ctr_loss l;
        plumb_err me = {0};
        int mrc = fwd_bwd(t, b, 0, off, cnt, (float)gscale, &l, &me);
        if (mrc == PLUMB_ENOMEM) {
            si->flags[SF_OOM] = 1;
            return PLUMB_OK;
        } else if (mrc) {
            si->flags[SF_ERROR] = 1;
            t->local_err = me;
            return PLUMB_OK;
        }
        *loss_fix += llrint(l.sum * LOSS_FIX);
        *count += l.count;
        int64_t *rows;
        float *grads;
        size_t n;
        ctr_sparse_grads(t->m, &rows, &grads, &n);
        if (t->h_n + n > (size_t)t->sparse_cap)
            return err_set(e, PLUMB_EINTERNAL, "sparse gradient list overflow (%zu + %zu > %ld)", t->h_n, n,
                           t->sparse_cap);
        /* unscale + inf check (linear, so the sum of unscaled gradients is the unscaled sum) */
        if (unscale) rc = t->to->scale_check(t->d, NULL, ctr_grads(t->m), t->n_dense, inv, t->d_found, e);
        if (!rc && unscale) rc = t->to->scale_check(t->d, NULL, grads, n * D, inv, t->d_found, e);
        if (!rc) rc = to_host(t, t->h_dense, ctr_grads(t->m), t->n_dense * sizeof(float), e);
        if (!rc) rc = to_host(t, t->h_rows + t->h_n, rows, n * sizeof(int64_t), e);
        if (!rc) rc = to_host(t, t->h_sgrads + t->h_n * D, grads, n * D * sizeof(float), e);
        if (!rc)
            for (size_t i = 0; i < t->n_dense; i++) t->h_acc[i] += t->h_dense[i];
        t->h_n += n;
    }
    if (!rc) *ok = 1;
    return rc;
}

/* Phase 1, fast numerics. */
static int fast_local(struct trainer *t, struct host_batch *b, struct step_info *si, int skip, int64_t *loss_fix,
                      int64_t *count, plumb_err *e)
{
    struct dev *d = t->d;
    size_t D = (size_t)t->D;
    float inv = (float)(1.0 / si->scale);
    double gscale = si->scale / (double)b->st.global_valid;
    int k = t->split > 1 ? t->split : 1;
    float *grads = ctr_grads(t->m);
    double t0 = timer_now();
    t->launched = 0;
    t->l_n = 0;
    t->h_n = 0;
    t->have_ss = 0;
    t->hd = NULL;
    int ok = 0;
    int rc = d->be->memset_async(d, NULL, t->d_scratch, 0, SCR_BYTES, e);
    if (!rc && !skip && b->n > 0 && k == 1) {
        /* one pass over the local batch */
        struct ctr_loss l;
        plumb_err me = {0};
        if (t->gp == GP_DEVICE) ctr_set_grad_ready_hook(t->m, grad_ready, t);
        int mrc = fwd_bwd(t, b, 1, 0, 0, (float)gscale, &l, &me);
        ctr_set_grad_ready_hook(t->m, NULL, NULL);
        if (mrc == PLUMB_ENOMEM) {
            si->flags[SF_OOM] = 1;
        } else if (mrc) {
            si->flags[SF_ERROR] = 1;
            t->local_err = me;
        } else {
            *loss_fix += llrint(l.sum * LOSS_FIX);
            *count += l.count;
            ctr_sparse_grads(t->m, &t->l_rows, &t->l_grads, &t->l_n);
            ok = 1;
            if (t->gp != GP_DEVICE) {
                /* unscale + inf check of the local gradients, on the device */
                rc = t->to->scale_check(d, NULL, grads, t->n_dense, inv, t->d_found, e);
                if (!rc) rc = t->to->scale_check(d, NULL, t->l_grads, t->l_n * D, inv, t->d_found, e);
            }
        }
    } else if (!rc && !skip && b->n > 0) {
        rc = split_accumulate(t, b, si, k, gscale, loss_fix, count, &ok, e);
        if (!rc && ok && t->gp != GP_HOST) {
            /* the sums back to the device: dense into ctr_grads, the list into d_rows/d_sg */
            rc = to_dev(t, grads, t->h_acc, t->n_dense * sizeof(float), e);
            if (!rc) rc = to_dev(t, t->d_rows, t->h_rows, t->h_n * sizeof(int64_t), e);
            if (!rc) rc = to_dev(t, t->d_sg, t->h_sgrads, t->h_n * D * sizeof(float), e);
            t->l_rows = t->d_rows, t->l_grads = t->d_sg, t->l_n = t->h_n;
        }
    } else if (!rc && !skip) {
        /* no local samples: a zero contribution */
        rc = d->be->memset_async(d, NULL, grads, 0, t->n_dense * sizeof(float), e);
        t->l_rows = t->d_rows, t->l_grads = t->d_sg, t->l_n = 0;
        ok = 1;
    }
    si->compute_s = timer_now() - t0;
    if (rc) return rc;
    if (t->gp == GP_DEVICE) {
        /* every rank enqueues every bucket, also after a local failure (the
         * status word then discards the step): no rank waits alone */
        double t1 = timer_now();
        rc = launch_upto(t, t->nb - 1, NULL, e);
        if (!rc && t->nc) rc = nccl_wait(t->nc, "allreduce grads (nccl)", e);
        si->comm_s += timer_now() - t1;
        return rc;
    }
    if (!ok) return PLUMB_OK;
    if (t->gp == GP_LOCAL) {
        /* 1 rank: the list for the optimizer; the norm and the found flag in one read */
        t->s_rows = t->l_rows, t->s_grads = t->l_grads, t->s_n = t->l_n;
        if (k > 1) {
            /* split: the appended list (in d_rows/d_sg) coalesced */
            if ((rc = to_dev(t, t->d_rows_in, t->h_rows, t->h_n * sizeof(int64_t), e)) ||
                (rc = to_dev(t, t->d_sg_in, t->h_sgrads, t->h_n * D * sizeof(float), e)) ||
                (rc = t->to->sparse_coalesce(d, NULL, t->d_rows_in, t->d_sg_in, t->h_n, t->D, t->d_rows, t->d_sg,
                                             t->d_n, e)))
                return rc;
            struct scratch_host sh;
            if ((rc = read_scratch(t, &sh, e))) return rc;
            t->s_rows = t->d_rows, t->s_grads = t->d_sg, t->s_n = (size_t)sh.n;
        }
        if (want_norm(t)) {
            rc = t->to->sumsq(d, NULL, grads, t->n_dense, t->d_sumsq, e);
            if (!rc) rc = t->to->sumsq(d, NULL, t->s_grads, t->s_n * D, t->d_sumsq, e);
            if (rc) return rc;
            t->have_ss = 1;
        }
        struct scratch_host sh;
        if ((rc = read_scratch(t, &sh, e))) return rc;
        t->ss = sh.sumsq;
        if (sh.found) si->flags[SF_NONFINITE] = 1;
        si->compute_s = timer_now() - t0; /* the gradient checks and the norm count as compute */
        return PLUMB_OK;
    }
    /* GP_HOST: the found flag now (it goes into the status word), then host
     * views (the staging counts as comm) */
    double ts = timer_now();
    int found = 0;
    if ((rc = to_host(t, &found, t->d_found, sizeof found, e))) return rc;
    if (found) si->flags[SF_NONFINITE] = 1;
    if (k > 1) {
        t->hd = t->h_acc, t->hr = t->h_rows, t->hg = t->h_sgrads, t->hn = t->h_n;
    } else if (is_cpu(t)) {
        t->hd = grads, t->hr = t->l_rows, t->hg = t->l_grads, t->hn = t->l_n;
    } else {
        rc = to_host(t, t->h_dense, grads, t->n_dense * sizeof(float), e);
        if (!rc) rc = to_host(t, t->h_rows, t->l_rows, t->l_n * sizeof(int64_t), e);
        if (!rc) rc = to_host(t, t->h_sgrads, t->l_grads, t->l_n * D * sizeof(float), e);
        t->hd = t->h_dense, t->hr = t->h_rows, t->hg = t->h_sgrads, t->hn = t->l_n;
    }
    si->comm_s += timer_now() - ts;
    return rc;
}

/* Phase 1: this rank's forward/backward. Sets flags; never returns an error
 * for OOM or a model failure (they go to the status word so every rank
 * learns of them in phase 2), only for failures of the engine itself. */
static int step_local(struct trainer *t, struct host_batch *b, struct step_info *si, int64_t *loss_fix,
                      int64_t *count, plumb_err *e)
{
    const struct train_config *cfg = t->cfg;
    double gscale = si->scale / (double)b->st.global_valid;
    *loss_fix = 0;
    *count = 0;
    double t0 = timer_now();
    int skip = 0;
    if (t->oom_inject_left > 0) {
        /* injected allocation failure (drills): as if ctr_forward_backward said ENOMEM */
        t->oom_inject_left--;
        si->flags[SF_OOM] = 1;
        skip = 1;
    }
    int rc = PLUMB_OK;
    if (cfg->numerics == NUMERICS_GOLDEN) {
        if (skip) return PLUMB_OK;
        memset(t->q_dense, 0, t->n_dense * sizeof(int64_t));
        t->q_n = 0;
        t->q_mul = ldexp(1.0, FIX_BITS) / si->scale;
        long off = 0;
        for (int j = 0; j < b->st.nshards && !rc; j++) {
            int cnt = b->shard_valid[j];
            if (cnt <= 0) continue;
            struct ctr_batch mb = {.B = cnt,
                                   .n_valid = cnt,
                                   .dense = b->dense + off * CTR_N_DENSE,
                                   .sparse = b->sparse + off * CTR_N_TABLES,
                                   .labels = b->labels + off};
            struct ctr_loss l;
            plumb_err me = {0};
            int mrc = ctr_forward_backward(t->m, &mb, (float)gscale, &l, &me);
            if (mrc == PLUMB_ENOMEM) {
                si->flags[SF_OOM] = 1;
                break;
            }
            if (mrc) {
                si->flags[SF_ERROR] = 1;
                t->local_err = me;
                break;
            }
            *loss_fix += llrint(l.sum * LOSS_FIX);
            *count += l.count;
            rc = golden_accumulate(t, si->flags, e);
            if (si->flags[SF_NONFINITE]) break;
            off += cnt;
        }
        si->compute_s = timer_now() - t0;
    } else {
        rc = fast_local(t, b, si, skip, loss_fix, count, e);
    }
    if (inject_take(INJECT_NAN, b->st.step, t->rank)) {
        log_warn("injected fault: non-finite gradient at step %ld", b->st.step);
        si->flags[SF_NONFINITE] = 1;
    }
    return rc;
}
/* Phase 2: the status word and the loss, summed over ranks (flags become
 * counts of ranks; > 0 means "some rank"). */
static int step_agree(struct trainer *t, long step, struct step_info *si, int64_t *loss_fix, int64_t *count,
                      plumb_err *e)
{
    int64_t v[SF_N + 2];
    for (int i = 0; i < SF_N; i++) v[i] = si->flags[i];
    if (g_stop) v[SF_STOP] = 1;
    if (t->cfg->health && t->cfg->stop_on_overheat && health_monitor_critical(t->cfg->health)) v[SF_STOP] = 1;
    v[SF_N] = *loss_fix;
    v[SF_N + 1] = *count;
    if (inject_take(INJECT_HANG, step, t->rank)) {
        log_warn("injected fault: rank %d hangs in the status all-reduce of step %ld", t->rank, step);
        watchdog_enter("status all-reduce (injected hang)");
        for (;;) pause();
    }
    double t0 = timer_now();
    int rc = comm_allreduce(t->c, v, SF_N + 2, DT_I64, COMM_SUM, "allreduce step status", e);
    si->comm_s += timer_now() - t0;
    if (rc) return rc;
    for (int i = 0; i < SF_N; i++) si->flags[i] = v[i];
    *loss_fix = v[SF_N];
    *count = v[SF_N + 1];
    return PLUMB_OK;
}

/* Fast GP_HOST: dense sums over the host comm in buckets, the sparse lists
 * gathered (by rank) and coalesced on the device. */
static int host_reduce(struct trainer *t, struct step_info *si, plumb_err *e)
{
    int rc;
    size_t D = (size_t)t->D;
    double t0 = timer_now();
    char what[64];
    for (size_t off = 0, k = 0; off < t->n_dense; off += BUCKET, k++) {
        size_t n = t->n_dense - off < BUCKET ? t->n_dense - off : BUCKET;
        snprintf(what, sizeof what, "allreduce grads bucket %zu", k);
        if ((rc = comm_allreduce(t->c, t->hd + off, n, DT_F32, COMM_SUM, what, e))) return rc;
    }
    size_t w = sizeof(int64_t) + D * sizeof(float);
    char *rec = malloc((t->hn ? t->hn : 1) * w);
    if (!rec) return err_set(e, PLUMB_ENOMEM, "out of memory");
    for (size_t u = 0; u < t->hn; u++) {
        memcpy(rec + u * w, &t->hr[u], sizeof(int64_t));
        memcpy(rec + u * w + sizeof(int64_t), t->hg + u * D, D * sizeof(float));
    }
    void *all;
    size_t total;
    rc = comm_allgatherv_alloc(t->c, rec, t->hn * w, &all, &total, NULL, "allgather sparse grads", e);
    free(rec);
    if (rc) return rc;
    si->comm_s += timer_now() - t0;
    size_t an = total / w;
    if (an > (size_t)t->sparse_cap) {
        free(all);
        return err_set(e, PLUMB_EINTERNAL, "sparse rows %zu exceed capacity %ld", an, t->sparse_cap);
    }
    /* unpacked straight into the device buffers on the cpu device */
    int64_t *ur = is_cpu(t) ? t->d_rows_in : t->h_rows;
    float *ug = is_cpu(t) ? t->d_sg_in : t->h_sgrads;
    const char *a = all;
    for (size_t u = 0; u < an; u++) {
        memcpy(&ur[u], a + u * w, sizeof(int64_t));
        memcpy(ug + u * D, a + u * w + sizeof(int64_t), D * sizeof(float));
    }
    free(all);
    float *grads = ctr_grads(t->m);
    if (t->hd != grads && (rc = to_dev(t, grads, t->hd, t->n_dense * sizeof(float), e))) return rc;
    if (!is_cpu(t)) {
        if ((rc = to_dev(t, t->d_rows_in, ur, an * sizeof(int64_t), e))) return rc;
        if ((rc = to_dev(t, t->d_sg_in, ug, an * D * sizeof(float), e))) return rc;
    }
    if ((rc = t->to->sparse_coalesce(t->d, NULL, t->d_rows_in, t->d_sg_in, an, t->D, t->d_rows, t->d_sg, t->d_n, e)))
        return rc;
    int64_t un;
    if ((rc = to_host(t, &un, t->d_n, sizeof un, e))) return rc;
    t->s_rows = t->d_rows, t->s_grads = t->d_sg, t->s_n = (size_t)un;
    return PLUMB_OK;
}

/* device buffer of at least `need` bytes (grown by a quarter; all ranks grow alike) */
static int ensure_dev(struct trainer *t, void **p, size_t *cap, size_t need, plumb_err *e)
{
    if (need <= *cap) return PLUMB_OK;
    if (*p) dev_free(t->d, *p);
    *p = NULL;
    *cap = 0;
    size_t n = need + need / 4;
    int rc = dev_alloc(t->d, n, p, e);
    if (rc) return err_wrap(e, "sparse gradient exchange buffer of %zu bytes", n);
    *cap = n;
    return PLUMB_OK;
}

/* Fast GP_DEVICE, after the dense all-reduce (phase 1): the sparse lists
 * gathered on the device, padded to the longest (counts over the host comm),
 * compacted in rank order and coalesced; unscale + inf check of the global
 * sums; the norm; one read of {sumsq, found, distinct rows}. */
static int device_reduce(struct trainer *t, struct step_info *si, plumb_err *e)
{
    struct dev *d = t->d;
    size_t D = (size_t)t->D, W = (size_t)t->world;
    double t0 = timer_now();
    int64_t mine = (int64_t)t->l_n;
    int64_t *counts = malloc(W * sizeof *counts);
    if (!counts) return err_set(e, PLUMB_ENOMEM, "out of memory");
    int rc = comm_allgather(t->c, &mine, sizeof mine, counts, "allgather sparse counts", e);
    size_t nmax = 0, total = 0;
    for (size_t r = 0; r < W && !rc; r++) {
        nmax = (size_t)counts[r] > nmax ? (size_t)counts[r] : nmax;
        total += (size_t)counts[r];
    }
    if (!rc && total > (size_t)t->sparse_cap)
        rc = err_set(e, PLUMB_EINTERNAL, "sparse rows %zu exceed capacity %ld", total, t->sparse_cap);
    size_t rb = nmax * sizeof(int64_t), blk = rb + nmax * D * sizeof(float);
    if (!rc && nmax > 0) {
        rc = ensure_dev(t, &t->d_send, &t->send_cap, blk, e);
        if (!rc) rc = ensure_dev(t, &t->d_recv, &t->recv_cap, blk * W, e);
        /* send block: rows [nmax] then grads [nmax, D]; the tail past this rank's count is padding */
        char *snd = t->d_send, *rcv = t->d_recv;
        if (!rc && t->l_n)
            rc = d->be->memcpy_async(d, NULL, snd, t->l_rows, t->l_n * sizeof(int64_t), MEMCPY_D2D, e);
        if (!rc && t->l_n)
            rc = d->be->memcpy_async(d, NULL, snd + rb, t->l_grads, t->l_n * D * sizeof(float), MEMCPY_D2D, e);
        if (!rc)
            rc = t->nc ? nccl_allgather(t->nc, snd, blk, rcv, "allgather sparse grads (nccl)", e)
                       : comm_allgather(t->c, snd, blk, rcv, "allgather sparse grads", e);
        /* compact by rank: the order of the gathered list is the rank order, never timing */
        size_t off = 0;
        for (size_t r = 0; r < W && !rc; r++) {
            size_t c = (size_t)counts[r];
            if (!c) continue;
            rc = d->be->memcpy_async(d, NULL, t->d_rows_in + off, rcv + r * blk, c * sizeof(int64_t), MEMCPY_D2D, e);
            if (!rc)
                rc = d->be->memcpy_async(d, NULL, t->d_sg_in + off * D, rcv + r * blk + rb, c * D * sizeof(float),
                                         MEMCPY_D2D, e);
            off += c;
        }
    }
    free(counts);
    if (rc) return rc;
    float inv = (float)(1.0 / si->scale);
    float *grads = ctr_grads(t->m);
    rc = t->to->scale_check(d, NULL, grads, t->n_dense, inv, t->d_found, e);
    if (!rc && total) rc = t->to->scale_check(d, NULL, t->d_sg_in, total * D, inv, t->d_found, e);
    int norm = want_norm(t);
    /* zeros past the distinct rows: the norm over total*D equals the norm over U*D */
    if (!rc && total && norm) rc = d->be->memset_async(d, NULL, t->d_sg, 0, total * D * sizeof(float), e);
    if (!rc && total)
        rc = t->to->sparse_coalesce(d, NULL, t->d_rows_in, t->d_sg_in, total, t->D, t->d_rows, t->d_sg, t->d_n, e);
    if (!rc && norm) {
        rc = t->to->sumsq(d, NULL, grads, t->n_dense, t->d_sumsq, e);
        if (!rc && total) rc = t->to->sumsq(d, NULL, t->d_sg, total * D, t->d_sumsq, e);
        t->have_ss = 1;
    }
    struct scratch_host sh;
    if (!rc) rc = read_scratch(t, &sh, e);
    si->comm_s += timer_now() - t0; /* the exchange and the reduction of the global sums */
    if (rc) return rc;
    t->ss = sh.sumsq;
    t->s_rows = t->d_rows, t->s_grads = t->d_sg, t->s_n = total ? (size_t)sh.n : 0;
    /* the same sums on every rank: the same decision without another vote */
    if (sh.found) si->flags[SF_NONFINITE] = 1;
    return PLUMB_OK;
}

/* Phase 3a: gradients of all ranks, unscaled, into ctr_grads() and the
 * device sparse list t->s_rows/s_grads/s_n (distinct rows, ascending). */
static int step_reduce(struct trainer *t, struct step_info *si, plumb_err *e)
{
    int rc;
    size_t D = (size_t)t->D;
    double t0 = timer_now();
    char what[64];
    if (t->cfg->numerics != NUMERICS_GOLDEN) {
        if (t->gp == GP_LOCAL) return PLUMB_OK; /* nothing to exchange */
        return t->gp == GP_DEVICE ? device_reduce(t, si, e) : host_reduce(t, si, e);
    }
    {
        for (size_t off = 0, k = 0; off < t->n_dense; off += BUCKET, k++) {
            size_t n = t->n_dense - off < BUCKET ? t->n_dense - off : BUCKET;
            snprintf(what, sizeof what, "allreduce int64 grads bucket %zu", k);
            if ((rc = comm_allreduce(t->c, t->q_dense + off, n, DT_I64, COMM_SUM, what, e))) return rc;
        }
        for (size_t i = 0; i < t->n_dense; i++) t->h_dense[i] = (float)ldexp((double)t->q_dense[i], -FIX_BITS);
        /* sparse: pack (row, q[D]) records, merge locally, gather, merge */
        size_t w = D + 1;
        int64_t *rec = malloc((t->q_n ? t->q_n : 1) * w * sizeof(int64_t));
        if (!rec) return err_set(e, PLUMB_ENOMEM, "out of memory");
        for (size_t u = 0; u < t->q_n; u++) {
            rec[u * w] = t->q_rows[u];
            memcpy(rec + u * w + 1, t->q_vals + u * D, D * sizeof(int64_t));
        }
        size_t un = merge_records(rec, t->q_n, t->D);
        void *all;
        size_t total;
        rc = comm_allgatherv_alloc(t->c, rec, un * w * sizeof(int64_t), &all, &total, NULL, "allgather sparse grads", e);
        free(rec);
        if (rc) return rc;
        size_t an = total / (w * sizeof(int64_t));
        size_t m = merge_records(all, an, t->D);
        if (m > (size_t)t->sparse_cap) {
            free(all);
            return err_set(e, PLUMB_EINTERNAL, "sparse rows %zu exceed capacity %ld", m, t->sparse_cap);
        }
        const int64_t *a = all;
        for (size_t u = 0; u < m; u++) {
            t->h_rows[u] = a[u * w];
            for (size_t j = 0; j < D; j++) t->h_sgrads[u * D + j] = (float)ldexp((double)a[u * w + 1 + j], -FIX_BITS);
        }
        free(all);
        si->comm_s += timer_now() - t0;
        t->s_rows = t->d_rows, t->s_grads = t->d_sg, t->s_n = m;
        if ((rc = to_dev(t, ctr_grads(t->m), t->h_dense, t->n_dense * sizeof(float), e))) return rc;
        if ((rc = to_dev(t, t->d_rows, t->h_rows, m * sizeof(int64_t), e))) return rc;
        return to_dev(t, t->d_sg, t->h_sgrads, m * D * sizeof(float), e);
    }
}

/* Phase 3b: global norm, clipping, optimizer. */
static int step_apply(struct trainer *t, struct step_info *si, plumb_err *e)
{
    double t0 = timer_now();
    size_t D = (size_t)t->D, n_sparse = t->s_n;
    int rc = PLUMB_OK;
    si->grad_norm = NAN;
    if (want_norm(t) || t->cfg->numerics == NUMERICS_GOLDEN) {
        if (!t->have_ss) {
            double zero = 0;
            rc = to_dev(t, t->d_sumsq, &zero, sizeof zero, e);
            if (!rc) rc = t->to->sumsq(t->d, NULL, ctr_grads(t->m), t->n_dense, t->d_sumsq, e);
            if (!rc) rc = t->to->sumsq(t->d, NULL, t->s_grads, n_sparse * D, t->d_sumsq, e);
            if (!rc) rc = to_host(t, &t->ss, t->d_sumsq, sizeof t->ss, e);
            if (rc) return rc;
        }
        si->grad_norm = sqrt(t->ss);
        if (!isfinite(si->grad_norm)) {
            si->flags[SF_NONFINITE] = 1;
            return PLUMB_OK;
        }
    }
    if (t->cfg->clip_grad_norm > 0 && si->grad_norm > t->cfg->clip_grad_norm) {
        /* PyTorch clip_grad_norm_: coef = max_norm / (norm + 1e-6), at most 1 */
        float coef = (float)(t->cfg->clip_grad_norm / (si->grad_norm + 1e-6));
        if ((rc = t->to->scale_check(t->d, NULL, ctr_grads(t->m), t->n_dense, coef, t->d_found, e))) return rc;
        if ((rc = t->to->scale_check(t->d, NULL, (float *)t->s_grads, n_sparse * D, coef, t->d_found, e))) return rc;
    }
    t->opt.lr = (float)si->lr;
    rc = ctr_opt_step(t->m, &t->opt, t->opt_t + 1, ctr_grads(t->m), t->s_rows, t->s_grads, n_sparse, e);
    if (rc) return err_wrap(e, "optimizer step %ld", t->step);
    t->opt_t++;
    si->opt_s = timer_now() - t0;
    return PLUMB_OK;
}
#define OOM_RETRIES 3
#define SPLIT_TRIES 3 /* halvings of the micro-batch before the batch is skipped */

/* One global step over batch b. Returns an error only when the job must end;
 * a skipped step (non-finite gradients) is a normal outcome (si->skipped). */
static int trainer_step(struct trainer *t, struct host_batch *b, struct step_info *si, plumb_err *e)
{
    memset(si, 0, sizeof *si);
    si->lr = lr_at(t->cfg, b->st.step);
    si->scale = scaler_scale(&t->sc);
    int64_t loss_fix = 0, count = 0;
    int rc;
    if (inject_take(INJECT_EXIT, b->st.step, t->rank)) {
        log_error("injected fault: rank %d exits at step %ld", t->rank, b->st.step);
        _exit(1);
    }
    for (int i = 0; i < t->cfg->n_skip_batches; i++) {
        if (t->cfg->skip_batches[i] != b->st.step) continue;
        /* deliberate skip (every rank has the same list): the data position
         * and the step advance, nothing is computed or updated; counted
         * like a non-finite skip, the loss scale is left alone */
        if (t->rank == 0 && !t->cfg->quiet) log_warn("step %ld: batch skipped deliberately (--skip-batches)", b->st.step);
        si->loss = NAN;
        si->grad_norm = NAN;
        si->skipped = 1;
        si->deliberate = 1;
        t->sc.skipped_total++;
        t->sc.clean_steps = 0;
        t->step = b->st.step + 1;
        return PLUMB_OK;
    }
    int n_oom = inject_take(INJECT_OOM, b->st.step, t->rank);
    if (n_oom > 0) t->oom_inject_left = n_oom;
    int splits = 0;
    for (int attempt = 0;; attempt++) {
        memset(si->flags, 0, sizeof si->flags);
        if ((rc = step_local(t, b, si, &loss_fix, &count, e))) return rc;
        if ((rc = step_agree(t, b->st.step, si, &loss_fix, &count, e))) return rc;
        if (si->flags[SF_ERROR]) {
            if (t->local_err.code) {
                *e = t->local_err;
                return err_wrap(e, "step %ld", b->st.step);
            }
            return err_set(e, PLUMB_EFAIL, "step %ld: another rank failed (see its log)", b->st.step);
        }
        if (!si->flags[SF_OOM]) break;
        /* Recovery tiers for an allocation failure on any rank; every rank
         * sees the same flags, so all take the same branch together.
         * Tier 1: free cached memory, retry the batch (OOM_RETRIES times). */
        dev_empty_cache(t->d);
        if (attempt < OOM_RETRIES) {
            if (t->rank == 0)
                log_warn("step %ld: out of memory on %lld rank(s); emptying the allocator cache and retrying (%d/%d)",
                         b->st.step, (long long)si->flags[SF_OOM], attempt + 1, OOM_RETRIES);
            continue;
        }
        /* Tier 2: split the local batch into twice as many micro-batches
         * with gradient accumulation, and keep the split for later steps.
         * The limit depends only on the config, so every rank agrees. */
        long local_max = t->cfg->batch / t->world;
        if (splits < SPLIT_TRIES && (long)t->split * 2 <= (local_max > 1 ? local_max : 1)) {
            if (t->split < 1) t->split = 1;
            t->split *= 2;
            splits++;
            if (!t->h_acc && !(t->h_acc = malloc(t->n_dense * sizeof(float))))
                return err_set(e, PLUMB_ENOMEM, "trainer: out of host memory for the gradient accumulator");
            if (t->rank == 0)
                log_warn("step %ld: still out of memory after %d retries; splitting the batch into %d micro-batches "
                         "with gradient accumulation (%s), kept for the following steps",
                         b->st.step, OOM_RETRIES, t->split,
                         t->cfg->numerics == NUMERICS_GOLDEN ? "golden: micro-shard sums, the same bits" : "the same math");
            continue;
        }
        /* Tier 3: skip the batch (no update; data and step advance). */
        if (t->rank == 0)
            log_warn("step %ld: out of memory even in %d micro-batch(es); batch skipped", b->st.step,
                     t->split > 1 ? t->split : 1);
        t->oom_inject_left = 0;
        si->loss = NAN;
        si->grad_norm = NAN;
        si->skipped = 1;
        si->oom_skipped = 1;
        t->sc.skipped_total++;
        t->step = b->st.step + 1;
        return PLUMB_OK;
    }
    si->loss = count ? (double)loss_fix / LOSS_FIX / (double)count : NAN;
    if (!si->flags[SF_NONFINITE]) {
        if ((rc = step_reduce(t, si, e))) return rc;
        /* GP_DEVICE learns of non-finite sums only here (the same on every rank) */
        if (!si->flags[SF_NONFINITE] && (rc = step_apply(t, si, e))) return rc;
    }
    /* the scaler (all ranks decide the same: the flags are global) */
    int applied = scaler_update(&t->sc, si->flags[SF_NONFINITE] > 0);
    si->skipped = !applied;
    if (si->skipped && t->rank == 0 && !t->cfg->quiet)
        log_warn("step %ld: non-finite gradients on %lld rank(s): step skipped, loss scale now %g", b->st.step,
                 (long long)si->flags[SF_NONFINITE], scaler_scale(&t->sc));
    t->step = b->st.step + 1;
    return PLUMB_OK;
}

/* --------------------------------------------------------------- metrics */

static void metrics_step(struct trainer *t, const struct step_info *si, long epoch, double step_s,
                         double wait_s, double sps)
{
    if (!t->metrics) return;
    struct dev_mem_stats ms;
    dev_mem_stats(t->d, &ms);
    json_t *j = json_pack("{s:s, s:I, s:I, s:f, s:f, s:f, s:f, s:b, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:I, s:I, s:I}",
                          "type", "step", "step", (json_int_t)t->step, "epoch", (json_int_t)epoch, "loss",
                          isfinite(si->loss) ? si->loss : -1.0, "lr", si->lr, "grad_norm",
                          isfinite(si->grad_norm) ? si->grad_norm : -1.0, "loss_scale", si->scale, "skipped",
                          si->skipped, "skipped_total", (json_int_t)t->sc.skipped_total, "samples_per_s", sps,
                          "step_s", step_s, "data_wait_s", wait_s, "compute_s", si->compute_s, "comm_s", si->comm_s,
                          "opt_s", si->opt_s, "mem_allocated", (json_int_t)ms.allocated, "mem_reserved",
                          (json_int_t)ms.reserved, "mem_peak", (json_int_t)ms.peak_allocated);
    if (!isfinite(si->loss)) json_object_set_new(j, "loss", json_null());
    if (!isfinite(si->grad_norm) || si->flags[SF_NONFINITE]) json_object_set_new(j, "grad_norm", json_null());
    jsonx_append_line(t->metrics, j, NULL);
    json_decref(j);
    /* line by line, so a killed run leaves a readable file and watchers see progress */
    fflush(t->metrics);
}

/* Health samples taken since the last step, one line each (type "health"). */
static void metrics_health(struct trainer *t)
{
    json_t *lines = health_monitor_drain(t->cfg->health);
    size_t i;
    json_t *l;
    json_array_foreach(lines, i, l) {
        json_object_set_new(l, "step", json_integer(t->step));
        jsonx_append_line(t->metrics, l, NULL);
    }
    json_decref(lines);
}

static void metrics_eval(struct trainer *t, const struct eval_result *r, double teacher)
{
    if (!t->metrics) return;
    json_t *j = json_pack("{s:s, s:I, s:f, s:f, s:f, s:I, s:I}", "type", "eval", "step", (json_int_t)t->step, "auc",
                          r->auc, "logloss", r->logloss, "accuracy", r->accuracy, "count", (json_int_t)r->count,
                          "positives", (json_int_t)r->positives);
    if (isfinite(teacher)) json_object_set_new(j, "teacher_auc", json_real(teacher));
    jsonx_append_line(t->metrics, j, NULL);
    json_decref(j);
    fflush(t->metrics);
}

static int write_predictions(const char *path, const float *logits, const float *labels, long n, plumb_err *e)
{
    size_t cap = (size_t)n * 24 + 32, len = 0;
    char *buf = malloc(cap);
    if (!buf) return err_set(e, PLUMB_ENOMEM, "predictions: out of memory");
    len += (size_t)snprintf(buf, cap, "label,score\n");
    for (long i = 0; i < n; i++) {
        double z = logits[i];
        float p = (float)(z >= 0 ? 1.0 / (1.0 + exp(-z)) : exp(z) / (1.0 + exp(z)));
        len += (size_t)snprintf(buf + len, cap - len, "%d,%.9g\n", labels[i] > 0.5f, (double)p);
    }
    int rc = file_write_atomic(path, buf, len, e);
    free(buf);
    return rc;
}

/* ------------------------------------------------------------------ run */

/* The training data of steps [t->step, steps): the device feed (pinned
 * buffers built on host threads, H2D on a copy stream) or the host loader. */
static int data_start(struct trainer *t, struct loader **ld, struct devfeed **feed, plumb_err *e)
{
    const struct train_config *cfg = t->cfg;
    if (t->use_feed)
        return devfeed_start(t->d, t->ds, 0, &t->smp, t->rows, t->rank, t->world, t->step, cfg->steps,
                             cfg->prefetch > 2 ? cfg->prefetch : 2, t->feed_threads, feed, e);
    return loader_start(t->ds, &t->smp, t->rows, t->rank, t->world, t->step, cfg->steps, cfg->prefetch, ld, e);
}

static void data_stop(struct loader **ld, struct devfeed **feed)
{
    loader_stop(*ld);
    *ld = NULL;
    devfeed_stop(*feed);
    *feed = NULL;
}

/* Recovery tier for repeated non-finite steps: more than --max-bad-steps
 * in a row and the run goes back to the newest valid checkpoint (all ranks
 * together: the decision comes from the agreed status words, and
 * ckpt_restore is collective), the loader restarting at its step. */
static int rollback(struct trainer *t, struct loader **ld, struct devfeed **feed, plumb_err *e)
{
    const struct train_config *cfg = t->cfg;
    long from = t->step, bad = t->bad_run;
    if (!cfg->ckpt_dir)
        return err_set(e, PLUMB_EFAIL,
                       "%ld non-finite steps in a row (more than --max-bad-steps %ld) at step %ld and no "
                       "--checkpoint-dir to roll back to",
                       bad, cfg->max_bad_steps, from);
    data_stop(ld, feed);
    int found = 0;
    int rc = ckpt_restore(t, &found, e);
    if (rc) return err_wrap(e, "rolling back after %ld non-finite steps in a row", bad);
    if (!found)
        return err_set(e, PLUMB_EFAIL,
                       "%ld non-finite steps in a row (more than --max-bad-steps %ld) at step %ld and no checkpoint "
                       "in %s to roll back to",
                       bad, cfg->max_bad_steps, from, cfg->ckpt_dir);
    t->bad_run = 0;
    t->rollbacks++;
    if (t->rank == 0)
        log_warn("%ld non-finite steps in a row (more than --max-bad-steps %ld): rolled back from step %ld to the "
                 "checkpoint at step %ld",
                 bad, cfg->max_bad_steps, from, t->step);
    if (t->metrics) {
        json_t *j = json_pack("{s:s, s:I, s:I, s:I}", "type", "rollback", "from_step", (json_int_t)from, "to_step",
                              (json_int_t)t->step, "bad_steps", (json_int_t)bad);
        jsonx_append_line(t->metrics, j, NULL);
        json_decref(j);
        fflush(t->metrics);
    }
    return data_start(t, ld, feed, e);
}

int trainer_run(const struct train_config *cfg, struct comm *c, struct train_result *res, plumb_err *e)
{
    memset(res, 0, sizeof *res);
    res->teacher_auc = NAN;
    res->first_loss = res->last_loss = NAN;
    struct trainer tr;
    memset(&tr, 0, sizeof tr);
    struct trainer *t = &tr;
    t->cfg = cfg;
    t->c = c;
    t->rank = c->rank;
    t->world = c->world;
    double t_start = timer_now();
    int rc = setup(t, e);
    /* a setup failure on one rank must not leave the others waiting */
    int32_t ok = rc ? 1 : 0;
    int arc = comm_allreduce(c, &ok, 1, DT_U32, COMM_MAX, "setup status", e);
    if (!rc && arc) rc = arc;
    if (!rc && ok) rc = err_set(e, PLUMB_EFAIL, "another rank failed to set up (see its log)");
    if (!rc) {
        rc = setup_comm(t, e);
        ok = rc ? 1 : 0;
        arc = comm_allreduce(c, &ok, 1, DT_U32, COMM_MAX, "comm setup status", e);
        if (!rc && arc) rc = arc;
        if (!rc && ok) rc = err_set(e, PLUMB_EFAIL, "another rank failed to set up its comm (see its log)");
    }
    if (rc) {
        trainer_free(t);
        return rc;
    }
    ctr_config_describe(&t->mc, res->model_desc, sizeof res->model_desc);
    snprintf(res->data_desc, sizeof res->data_desc, "%s", t->ds->desc);
    res->bad_lines_skipped = t->ds->skipped;
    res->truncated_lines = t->ds->truncated;

    if (t->rank == 0 && cfg->out_dir) {
        char path[4096];
        if (!(rc = file_mkdirs(cfg->out_dir, e)) && !(rc = file_join(path, sizeof path, cfg->out_dir, "metrics.jsonl", e))) {
            t->metrics = fopen(path, cfg->resume ? "a" : "w");
            if (!t->metrics) rc = err_set(e, PLUMB_EIO, "cannot write %s", path);
        }
    }
    if (!rc) rc = teacher_auc(t, &res->teacher_auc, e);
    int found = 0;
    if (!rc && cfg->resume) rc = ckpt_restore(t, &found, e);
    if (!rc && cfg->resume && !found && t->rank == 0 && !cfg->quiet)
        log_info("--resume: no checkpoint in %s; starting at step 0", cfg->ckpt_dir);
    res->start_step = t->step;
    if (!rc && t->rank == 0 && !cfg->quiet) {
        /* file data have no teacher: nothing to print then */
        char teacher[48] = "";
        if (isfinite(res->teacher_auc)) snprintf(teacher, sizeof teacher, "; teacher AUC %.4f", res->teacher_auc);
        log_info("ctr %s [%s] on %s x%d ranks, %s, %s, %s; %s%s", cfg->preset, res->model_desc, t->d->label,
                 t->world, cfg->numerics == NUMERICS_GOLDEN ? "golden" : "fast", prec_name(cfg->precision),
                 cfg->optimizer, t->ds->desc, teacher);
    }
    if (rc) {
        trainer_free(t);
        return rc;
    }

    struct sigaction sa, old_term, old_int;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    g_stop = 0;
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGINT, &sa, &old_int);
    if (cfg->watchdog_s > 0) watchdog_start(cfg->watchdog_s);

    struct loader *ld = NULL;
    struct devfeed *feed = NULL;
    if (t->step < cfg->steps) rc = data_start(t, &ld, &feed, e);
    long nrun = cfg->steps - t->step, k = 0;
    long win = nrun / 10 > 0 ? nrun / 10 : 1;
    double loss_first = 0, loss_last = 0;
    long n_first = 0, n_last = 0;
    double wait_total = 0, step_total = 0, samples_total = 0;
    int tty = cfg->progress && t->rank == 0 && isatty(2);
    struct eval_result last_eval;
    memset(&last_eval, 0, sizeof last_eval);
    long last_eval_step = -1;
    while (!rc && t->step < cfg->steps) {
        struct host_batch *b, fb;
        double wait_s;
        double ts = timer_now();
        watchdog_enter("data loader");
        if (feed) {
            /* a device batch; fb carries the sampler's step description */
            memset(&fb, 0, sizeof fb);
            rc = devfeed_next(feed, &t->db, NULL, &wait_s, e);
            if (!rc && devfeed_step_info(feed, &fb.st)) rc = err_set(e, PLUMB_EINTERNAL, "device feed: no step taken");
            fb.n = t->db.n_valid;
            fb.cap = t->db.B;
            b = &fb;
        } else {
            rc = loader_next(ld, &b, &wait_s, e);
        }
        watchdog_leave();
        if (rc) break;
        struct step_info si;
        char wd[64];
        snprintf(wd, sizeof wd, "train step %ld", b->st.step);
        watchdog_enter(wd);
        rc = trainer_step(t, b, &si, e);
        watchdog_leave();
        long gv = b->st.global_valid, epoch = b->st.epoch;
        if (feed) devfeed_release(feed);
        else loader_release(ld, b);
        if (rc) break;
        double step_s = timer_now() - ts;
        wait_total += wait_s;
        step_total += step_s;
        samples_total += (double)gv;
        double sps = step_s > 0 ? (double)gv / step_s : 0;
        metrics_step(t, &si, epoch, step_s, wait_s, sps);
        if (cfg->health && t->metrics) metrics_health(t);
        /* non-finite steps in a row (not OOM or deliberate skips) */
        if (si.skipped && !si.oom_skipped && !si.deliberate) t->bad_run++;
        else t->bad_run = 0;
        if (cfg->max_bad_steps > 0 && t->bad_run > cfg->max_bad_steps) {
            if ((rc = rollback(t, &ld, &feed, e))) break;
            continue;
        }
        if (isfinite(si.loss)) {
            if (k < win) loss_first += si.loss, n_first++;
            if (k >= nrun - win) loss_last += si.loss, n_last++;
        }
        k++;
        if (tty)
            fprintf(stderr, "\rstep %ld/%ld  loss %.4f  lr %.3g  scale %g  %.0f samples/s  data wait %2.0f%%   ", t->step,
                    cfg->steps, si.loss, si.lr, si.scale, step_total > 0 ? samples_total / step_total : 0,
                    step_total > 0 ? 100 * wait_total / step_total : 0);
        int stop = si.flags[SF_STOP] > 0;
        int do_eval = cfg->eval_every > 0 && t->step % cfg->eval_every == 0 && t->step < cfg->steps;
        if (do_eval && !stop) {
            if ((rc = run_eval(t, &last_eval, NULL, NULL, e))) break;
            last_eval_step = t->step;
            metrics_eval(t, &last_eval, res->teacher_auc);
            if (t->rank == 0 && !cfg->quiet) {
                if (tty) fprintf(stderr, "\n");
                log_info("eval at step %ld: AUC %.4f  logloss %.4f  accuracy %.4f", t->step, last_eval.auc,
                         last_eval.logloss, last_eval.accuracy);
            }
        }
        int do_ckpt = cfg->ckpt_dir && ((cfg->ckpt_every > 0 && t->step % cfg->ckpt_every == 0) || stop);
        if (do_ckpt && (rc = ckpt_save(t, res->ckpt_path, e))) break;
        if (stop) {
            res->interrupted = 1;
            res->overheat = cfg->health && cfg->stop_on_overheat && health_monitor_critical(cfg->health);
            if (res->overheat)
                log_error("critical GPU temperature at step %ld: %s", t->step,
                          cfg->ckpt_dir ? "checkpoint written, stopping (--on-overheat stop)"
                                        : "stopping without a checkpoint (no --checkpoint-dir)");
            if (t->rank == 0) {
                if (tty) fprintf(stderr, "\n");
                log_warn("stop requested (SIGTERM/SIGINT or overheat) at step %ld: %s", t->step,
                         cfg->ckpt_dir ? "checkpoint written, exiting" : "no --checkpoint-dir, exiting without a checkpoint");
            }
            break;
        }
    }
    if (tty) fprintf(stderr, "\n");
    data_stop(&ld, &feed);
    if (cfg->watchdog_s > 0) watchdog_stop();
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGINT, &old_int, NULL);

    if (!rc && !res->interrupted && cfg->ckpt_dir && (cfg->ckpt_every <= 0 || t->step % cfg->ckpt_every != 0) &&
        t->step > res->start_step)
        rc = ckpt_save(t, res->ckpt_path, e);
    if (!rc && !res->interrupted) {
        float *all_l = NULL, *all_y = NULL;
        int want = cfg->predictions && t->rank == 0;
        if (last_eval_step == t->step && !want) {
            res->eval = last_eval;
        } else {
            rc = run_eval(t, &res->eval, want ? &all_l : NULL, want ? &all_y : NULL, e);
            if (!rc) metrics_eval(t, &res->eval, res->teacher_auc);
        }
        res->has_eval = !rc;
        if (!rc && want) rc = write_predictions(cfg->predictions, all_l, all_y, res->eval.count, e);
        free(all_l), free(all_y);
    }
    if (!rc) rc = ctr_param_digest(t->m, res->param_digest, e);
    res->steps_done = t->step;
    res->skipped_steps = t->sc.skipped_total;
    res->final_scale = scaler_scale(&t->sc);
    res->first_loss = n_first ? loss_first / (double)n_first : NAN;
    res->last_loss = n_last ? loss_last / (double)n_last : NAN;
    res->samples_per_s = step_total > 0 ? samples_total / step_total : 0;
    res->data_wait_frac = step_total > 0 ? wait_total / step_total : 0;
    res->wall_s = timer_now() - t_start;
    trainer_free(t);
    return rc;
}
