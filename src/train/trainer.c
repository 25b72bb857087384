/* The training engine: see trainer.h for the step structure and
 * train/model.h for what a workload provides. */
#include "train/trainer.h"
#include "core/envswitch.h"
#include "core/file.h"
#include "core/hash.h"
#include "core/hostinfo.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "core/timer.h"
#include "dev/train_ops.h"
#include "train/ckpt.h"
#include "train/devfeed.h"
#include "train/inject.h"
#include "train/loader.h"
#include "train/mcomm.h"
#include "train/optim.h"
#include "train/sampler.h"
#include "train/scaler.h"
#include "core/watchdog.h"
#include "health/monitor.h"
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <errno.h>
#include <unistd.h>

/* Golden gradients in 64-bit fixed point: q = round(g / loss_scale * 2^40).
 * Resolution 2^-40 (~9e-13); a per-element magnitude bound keeps the sum of
 * every micro-shard of a global batch below 2^62 (checked: overflow counts as
 * a non-finite step). */
#define FIX_BITS 40
#define LOSS_FIX 4294967296.0 /* losses summed in fixed point 2^-32 */

/* A loss sum in fixed point, or 0 with SF_LOSS_BAD set when it is not finite or
 * past int64 (llrint of those is undefined: a NaN loss was reported as
 * -134217728); the step's loss is then NaN (null in metrics.jsonl). */
static int64_t loss_fixed(double sum, int64_t *flags)
{
    const double x = sum * LOSS_FIX;
    if (fabs(x) < 9.0e18) return llrint(x);
    flags[SF_LOSS_BAD] = 1;
    return 0;
}
/* The step's mean loss from its fixed-point sum: NaN when nothing was scored
 * or a sum was not representable (loss_fixed). */
static double mean_loss(int64_t loss_fix, int64_t count, const int64_t *flags)
{
    return count && !flags[SF_LOSS_BAD] ? (double)loss_fix / LOSS_FIX / (double)count : NAN;
}
#define BUCKET ((size_t)1 << 20) /* gradient all-reduce bucket, elements */
#define SCR_SUMSQ 0 /* the step's status block (d_scratch): double sumsq */
#define SCR_FOUND 8 /* int found_inf */
#define SCR_N 16    /* int64 distinct sparse rows */
#define SCR_BYTES 24
#define MAX_BUCKETS 64 /* grad-ready buckets of a model */
#define GRAPHS 16      /* step graphs kept (feed slots x shapes x with/without the norm) */

static volatile sig_atomic_t g_stop; /* the signal that asked for a stop, 0: none */
static void on_signal(int sig) { g_stop = sig; }

double eval_metric(const struct eval_metrics *m, const char *name)
{
    for (int i = 0; m && i < m->n; i++)
        if (!strcmp(m->name[i], name)) return m->value[i];
    return NAN;
}

struct step_info {
    double loss;           /* mean loss of the global batch */
    double grad_norm;      /* global, after unscaling, before clipping */
    double lr;
    double scale;          /* loss scale used for this step */
    int skipped;
    int backoff;           /* skipped for an overflow while the dynamic loss scale is above 1 and
                              falling: the scaler's own recovery, not a bad step */
    int oom_skipped;       /* the batch was skipped by the OOM tiers */
    int deliberate;        /* --skip-batches */
    int64_t flags[SF_N];
    double compute_s, comm_s, opt_s;
    int queued;            /* the device's outcome is still to be read (the queued step) */
    int graphed;           /* the queued step ran as a graph (its update included) */
};

/* What a queued step leaves for the host (pinned, one slot per step in
 * flight): the model's loss {sum, count} and the status block. */
struct step_out {
    double loss[2];
    char scratch[SCR_BYTES];
};

/* status_to_host writes the slot as one run: the loss pair, then the block */
_Static_assert(offsetof(struct step_out, scratch) == sizeof(double[2]) && SCR_BYTES % 8 == 0,
               "struct step_out: the loss pair and the status block must be contiguous 8-byte words");

/* A queued step waiting for its outcome. */
/* trainer_run's description of a step (for its metrics line). */
struct step_meta {
    long step, epoch, gv;
    double step_s, wait_s;
};

struct queued {
    struct step_info si;
    long step;
    int slot;
    struct step_meta meta;
};

struct trainer {
    const struct train_config *cfg;
    struct comm *c;
    struct dev *d;
    int rank, world;
    const struct workload *wl;
    const struct model_ops *mo;
    void *spec;               /* the workload's model configuration */
    char model_desc[256];
    struct model *m;
    const struct model_layout *L;
    const struct train_ops *to;
    struct data_source *ds;
    struct feed_source fs;    /* the data source's ops and fields */
    struct data_info di;
    long n_split[2];          /* samples in the train and eval splits */
    struct sampler smp;
    struct loss_scaler sc;
    struct optim opt;
    struct mcomm_ctx mcx;     /* models' and evals' collectives (host comm) */
    struct model_comm mcomm;
    long step;      /* global steps done = next step to run */
    long opt_t;     /* optimizer updates applied (AdamW bias correction) */
    size_t n_dense, n_params;
    int D;                    /* sparse row width (0: no sparse region) */
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
    int exch;                 /* fast numerics exchange gradients (over dc) */
    struct comm *dc;          /* the gradients' device comm (comm_open_device), NULL: none */
    int n_layers, nb, launched;
    int close_at[MAX_BUCKETS];                 /* model bucket k closes comm bucket close_at[k] (-1: none) */
    size_t b_lo[MAX_BUCKETS], b_hi[MAX_BUCKETS]; /* dense comm buckets, in launch order */
    int64_t *l_rows;          /* this rank's sparse list before the exchange (device) */
    float *l_grads;
    size_t l_n;
    const int64_t *s_rows;    /* the step's reduced sparse list for the optimizer (device) */
    const float *s_grads;
    size_t s_n;
    void *d_send, *d_recv;    /* the sparse exchange */
    size_t send_cap, recv_cap;
    double ss;                /* squared global norm when have_ss */
    int have_ss;
    int logged;               /* the step in phase 1 gets a metrics.jsonl line (step_logged) */
    long first_step;          /* the first step of this trainer_run (it gets a line) */
    int use_feed;             /* fast numerics fed by train/devfeed (GPU; PLUMB_TRAIN_DEVFEED=1 on any device) */
    int feed_threads;
    struct batch db;          /* the step's device batch when use_feed */
    /* eval (this rank's contiguous share of the eval split) */
    long ev_lo, ev_n;
    struct host_batch ev;     /* its samples, field by field */
    float *ev_out;            /* [ev_n, out_width] predictions */
    struct eval_acc *acc;
    /* golden: whole-batch models fold shard by shard (fold_shard) */
    int64_t *g_flags, *g_loss_fix, *g_count;
    int g_engine_err;         /* fold_shard failed in the engine (not the model) */
    int whole;                /* the model couples a batch's samples (model_ops.whole_batch) */
    int fuse;                 /* the sparse SGD runs inside the backward (--fuse-sparse-sgd) */
    int fused_step;           /* this step's backward applied it (the touched rows' old values in d_sg_in) */
    float *buf_snap;          /* the model's buffers at the start of a step (device) */
    /* metrics */
    FILE *metrics;
    plumb_err metrics_err;    /* the first failed metrics.jsonl write (rank 0): the run stops */
    long metrics_fail_step;
    long metrics_failures;
    char cfg_str[2 * PATH_MAX + 1024];
    char cfg_hash[65];
    int oom_inject_left;
    /* recovery tiers (fault tolerance) */
    int split;                /* micro-batches per local batch after an OOM split (1 = none); kept */
    float *h_acc;             /* [n_dense] dense gradient accumulator of a split batch */
    long bad_run;             /* non-finite steps in a row */
    long rollbacks;
    plumb_err local_err;      /* the error behind SF_ERROR on this rank */
    /* the queued step (see "the queued step" below) */
    int queue;                /* steps may be queued without a host wait */
    int deferred_on;          /* the model's defer mode is on */
    const double *q_loss_dev; /* the model's device loss {sum, count} x q_div */
    const int64_t *q_rows_n;  /* the model's device sparse row count (NULL: no sparse list) */
    double q_div;             /* model_deferred.div */
    /* the deferred synchronous step (see "the deferred synchronous step") */
    int sync_defer;           /* forward/backward deferred, the loss read with the status block */
    int graph_sync;           /* and replayed as a graph */
    struct step_out *h_out;   /* pinned: [2] what a queued step leaves for the host, [1] the deferred step's one read */
    int found_of_norm;        /* the deferred steps' found flag off the norm where they can (norm_flags) */
    int status_write;         /* the outcome goes to h_out by the device's status_to_host, not two
                                 copies (PLUMB_TRAIN_STATUS=copy: the copies) */
    dev_event *q_ev[2];       /* recorded after each slot's copy */
    struct queued q[2];       /* queued steps, oldest first */
    int n_q;
    long q_seq;
    /* graphs of the queued step, or of the deferred synchronous step's
     * forward/backward: one per batch buffer and shape (key) */
    int graph_on;
    struct step_graph {
        uint64_t key[MODEL_MAX_FIELDS + 5];
        dev_graph *g;       /* NULL: seen once (the next step with this key captures) */
        unsigned used;      /* LRU clock */
        int fused;          /* captured with the sparse SGD inside the backward */
        int ph_valid;       /* captured with the three phase marks (ph below) */
        long replays;       /* launches of g */
    } sg[GRAPHS];
    unsigned sg_clock;
    long graphed, captures;
    long evicted;             /* captured graphs dropped for a new key (LRU) before a second replay */
    long deferred;            /* steps run by fast_local_deferred */
    long fused_total;         /* steps whose backward applied the sparse SGD */
    /* trainer_phase_marks: marks before the forward_backward (0), at the
     * model's forward_done (1) and after it (2); ph_hits counts forward_done
     * calls of the current one; ph_valid: the last step has the three */
    dev_event *ph[3];
    int ph_on, ph_hits, ph_valid;
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

/* Linear warmup over the first --warmup steps, then the schedule:
 * constant; cosine from lr to lr_min at the last step; or step decay by
 * gamma every lr_step_every steps. */
static double lr_at(const struct train_config *cfg, long step)
{
    if (cfg->warmup > 0 && step < cfg->warmup) return cfg->lr * (double)(step + 1) / (double)cfg->warmup;
    long after = step - (cfg->warmup > 0 ? cfg->warmup : 0);
    if (cfg->schedule && !strcmp(cfg->schedule, "cosine")) {
        long span = cfg->steps - (cfg->warmup > 0 ? cfg->warmup : 0);
        double f = span > 1 ? (double)after / (double)(span - 1) : 1.0;
        if (f > 1) f = 1;
        return cfg->lr_min + 0.5 * (cfg->lr - cfg->lr_min) * (1.0 + cos(M_PI * f));
    }
    if (cfg->schedule && !strcmp(cfg->schedule, "step") && cfg->lr_step_every > 0)
        return cfg->lr * pow(cfg->lr_step_gamma, (double)(after / cfg->lr_step_every));
    return cfg->lr;
}

/* A data file by its canonical path (a relative or linked name of the same
 * file resumes the same run); "synthetic" and names that do not resolve as
 * they are. */
static void data_name(const char *p, char *out, size_t n)
{
    char *r = p && strcmp(p, "synthetic") ? realpath(p, NULL) : NULL;
    snprintf(out, n, "%s", r ? r : p ? p : "");
    free(r);
}

static void config_string(struct trainer *t)
{
    const struct train_config *c = t->cfg;
    char data[PATH_MAX], eval_data[PATH_MAX];
    data_name(c->data, data, sizeof data);
    data_name(c->eval_data, eval_data, sizeof eval_data);
    snprintf(t->cfg_str, sizeof t->cfg_str,
             "workload=%s;preset=%s;model=%s;data=%s;eval_data=%s;data_seed=%llu;train_samples=%ld;"
             "batch=%ld;seed=%llu;lr=%.17g;warmup=%ld;schedule=%s/%.17g/%ld/%.17g;optimizer=%s;"
             "weight_decay=%.17g;momentum=%.17g;betas=%.17g/%.17g/%.17g;numerics=%s;"
             "precision=%s;micro_shard=%ld;loss_scale=%s;ls=%.17g/%.17g/%.17g/%ld;clip=%.17g",
             t->wl->name, c->preset, t->model_desc, data, eval_data,
             (unsigned long long)c->data_seed, t->n_split[0], c->batch, (unsigned long long)c->seed, c->lr,
             c->warmup, c->schedule, c->lr_min, c->lr_step_every, c->lr_step_gamma, c->optimizer,
             c->weight_decay, c->momentum, c->beta1, c->beta2, c->adam_eps,
             c->numerics == NUMERICS_GOLDEN ? "golden" : "fast", prec_name(c->precision), c->micro_shard,
             t->sc.enabled ? "dynamic" : "off", c->ls_init, c->ls_growth, c->ls_backoff, c->ls_interval,
             c->clip_grad_norm);
    hash_sha256_hex(t->cfg_str, strlen(t->cfg_str), t->cfg_hash);
}

/* ------------------------------------------------------------ setup/free */

static void trainer_free(struct trainer *t)
{
    if (t->metrics) fclose(t->metrics);
    if (t->d) {
        if (t->dc) comm_finalize(t->dc);
        dev_free(t->d, t->d_rows_in), dev_free(t->d, t->d_rows), dev_free(t->d, t->d_sg_in);
        dev_free(t->d, t->d_sg), dev_free(t->d, t->d_scratch);
        if (t->buf_snap) dev_free(t->d, t->buf_snap);
        if (t->d_send) dev_free(t->d, t->d_send);
        if (t->d_recv) dev_free(t->d, t->d_recv);
        for (int i = 0; i < 2; i++)
            if (t->q_ev[i]) t->d->be->event_destroy(t->d, t->q_ev[i]);
        for (int i = 0; i < GRAPHS; i++)
            if (t->sg[i].g) t->d->be->graph_destroy(t->d, t->sg[i].g);
        for (int i = 0; i < 3; i++)
            if (t->ph[i]) t->d->be->event_destroy(t->d, t->ph[i]);
        if (t->h_out) t->d->be->host_free(t->d, t->h_out);
    }
    optim_free(&t->opt);
    if (t->m) t->mo->free(t->m);
    free(t->h_dense), free(t->h_rows), free(t->h_sgrads), free(t->h_acc);
    free(t->q_dense), free(t->q_rows), free(t->q_vals);
    for (int k = 0; k < MODEL_MAX_FIELDS; k++) free(t->ev.field[k]);
    free(t->ev.idx), free(t->ev_out);
    if (t->acc) t->wl->eval->free(t->acc);
    sampler_free(&t->smp);
    if (t->ds) t->wl->data->free(t->ds);
    if (t->spec) t->wl->spec_free(t->spec);
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
        rc = dev_spec_for_local_rank(cfg->device, t->c->local_rank, t->c->local_world, s32, &me);
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
    /* a GPU run is on the GPU asked for, or it does not start (a cpu run
     * recorded as "cuda" would pass for a GPU result); --allow-cpu-fallback
     * trains on the cpu instead, with a warning */
    plumb_err de = {0};
    rc = cfg->allow_cpu_fallback ? dev_open_or_cpu(spec, &t->d, &de) : dev_open(spec, &t->d, &de);
    if (rc == PLUMB_EDEVICE)
        return err_set(e, PLUMB_EUSAGE, "--device %s: no usable device here (%s); --allow-cpu-fallback trains on the cpu instead",
                       spec, de.msg);
    if (rc) {
        if (e) *e = de;
        return rc;
    }
    if (!strcmp(t->d->be->name, "cpu")) {
        long th = cfg->threads;
        if (th <= 0) {
            long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
            th = (int)(ncpu / (t->c->local_world > 0 ? t->c->local_world : 1));
            if (th < 1) th = 1;
        }
        t->d->threads = (int)th;
    }
    if ((rc = dev_set_numerics(t->d, cfg->numerics, cfg->numerics == NUMERICS_FAST && cfg->allow_tf32, e))) return rc;
    if (!t->d->ops->train) return err_set(e, PLUMB_EUNSUPPORTED, "device %s has no training ops", t->d->label);
    t->to = t->d->ops->train;
    if ((rc = env_switch("PLUMB_FOUND_OF_NORM", "the found-inf flag read off the norm where it can be", &t->found_of_norm,
                         e)))
        return rc;
    t->found_of_norm = t->found_of_norm && t->to->found_of_sumsq;
    return PLUMB_OK;
}

/* A model too large for the device is a usage error said up front, with
 * what it needs: fp32 parameters [n_params], AdamW's two moments (the same
 * size again, twice), the dense gradients; before anything is allocated. */
static int check_fits(struct trainer *t, plumb_err *e)
{
    if (!t->mo->param_count) return PLUMB_OK;
    double np = (double)t->mo->param_count(t->spec);
    int adamw = !strcmp(t->cfg->optimizer, "adamw");
    double need = np * sizeof(float) * (adamw ? 3.0 : 1.0);
    double have = is_cpu(t) ? hostinfo_mem_available() : (double)t->d->info.mem_total;
    if (have <= 0 || need <= have) return PLUMB_OK;
    return err_set(e, PLUMB_EUSAGE,
                   "%s (%s) needs %.1f GB for %.0f fp32 parameters%s; %s has %.1f GB %s: use a smaller model (e.g. "
                   "fewer --rows) or a larger device",
                   t->wl->name, t->model_desc, need / 1e9, np, adamw ? " and their AdamW moments" : "", t->d->label,
                   have / 1e9, is_cpu(t) ? "available" : "in all");
}

static int setup(struct trainer *t, plumb_err *e)
{
    const struct train_config *cfg = t->cfg;
    int rc;
    if (!cfg->wl) return err_set(e, PLUMB_EUSAGE, "no workload (build the config with train/options.h)");
    t->wl = cfg->wl;
    t->mo = cfg->wl->model;
    if (cfg->steps < 0) return err_set(e, PLUMB_EUSAGE, "--steps: %ld (expected >= 0)", cfg->steps);
    if (cfg->batch < 1) return err_set(e, PLUMB_EUSAGE, "--batch: %ld (expected a positive global batch)", cfg->batch);
    if (cfg->micro_shard < 1) return err_set(e, PLUMB_EUSAGE, "--micro-shard: %ld (expected >= 1)", cfg->micro_shard);
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
    if ((rc = t->wl->configure(cfg, &t->spec, t->model_desc, sizeof t->model_desc, e))) return rc;
    if ((rc = open_device(t, e))) return rc;
    t->mcx.c = t->c;
    t->mcx.d = t->d;
    mcomm_bind(&t->mcx, &t->mcomm);
    if ((rc = check_fits(t, e))) return rc;

    /* samples into memory once when the feed must keep up with a GPU, or
     * when the run goes over the train split at least once anyway (a
     * generator is then evaluated once per sample, not once per access) */
    int materialize = (!is_cpu(t) && cfg->numerics != NUMERICS_GOLDEN) ||
                      (double)cfg->steps * (double)cfg->batch >= (double)cfg->train_samples;
    if ((rc = t->wl->data->open(cfg, t->spec, materialize, &t->ds, e))) return rc;
    t->fs.ops = t->wl->data;
    t->fs.src = t->ds;
    t->fs.fields = t->wl->data->fields(t->ds, &t->fs.n_fields);
    if (t->fs.n_fields < 1 || t->fs.n_fields > MODEL_MAX_FIELDS)
        return err_set(e, PLUMB_EINTERNAL, "%s data: %d batch fields (expected 1..%d)", t->wl->name, t->fs.n_fields,
                       MODEL_MAX_FIELDS);
    t->wl->data->info(t->ds, &t->di);
    t->n_split[0] = t->wl->data->count(t->ds, SPLIT_TRAIN);
    t->n_split[1] = t->wl->data->count(t->ds, SPLIT_EVAL);
    if ((rc = sampler_init(&t->smp, t->n_split[0], cfg->batch, (int)cfg->micro_shard, cfg->seed, 1, e))) return rc;

    long local_cap = sampler_local_capacity(&t->smp, t->rank, t->world);
    t->whole = t->mo->whole_batch && t->mo->whole_batch(t->spec);
    int train_mb = cfg->numerics == NUMERICS_GOLDEN && !t->whole ? (int)cfg->micro_shard
                                                                           : (int)(local_cap > 0 ? local_cap : 1);
    if (cfg->numerics == NUMERICS_GOLDEN && train_mb > cfg->batch) train_mb = (int)cfg->batch;
    t->max_batch = train_mb > cfg->eval_batch ? train_mb : (int)cfg->eval_batch;
    if ((rc = t->mo->create(t->d, t->spec, t->max_batch, cfg->precision, &t->m, e))) {
        if (rc != PLUMB_ENOMEM) return rc;
        /* the buffers are sized by the largest batch a call runs: the
         * user's --batch (or --eval-batch) to change, not an internal error */
        const int by_eval = cfg->eval_batch > train_mb;
        e->code = PLUMB_EUSAGE;
        return err_wrap(e, "%s %ld: %s's buffers for %d samples do not fit on %s (use a smaller %s)",
                        by_eval ? "--eval-batch" : "--batch", by_eval ? cfg->eval_batch : cfg->batch, t->wl->name,
                        t->max_batch, t->d->label, by_eval ? "--eval-batch" : "--batch");
    }
    if ((rc = t->mo->init(t->m, cfg->seed, e))) return rc;
    t->L = t->mo->layout(t->m);
    if (t->L->n_buffers && (rc = dev_alloc(t->d, t->L->n_buffers * sizeof(float), (void **)&t->buf_snap, e))) return rc;
    t->n_dense = t->L->n_dense;
    t->n_params = t->L->n_params;
    t->D = t->L->sparse_dim;

    int dyn = !strcmp(cfg->loss_scale, "dynamic") || (!strcmp(cfg->loss_scale, "auto") && cfg->precision == DT_F16);
    scaler_init(&t->sc, dyn, cfg->ls_init, cfg->ls_growth, cfg->ls_backoff, cfg->ls_interval);

    if ((rc = optim_init(&t->opt, t->d, t->L, cfg->optimizer, cfg->weight_decay, cfg->momentum, cfg->beta1, cfg->beta2,
                         cfg->adam_eps, e)))
        return rc;
    if ((rc = optim_state_alloc(&t->opt, e))) return rc;

    t->sparse_cap = cfg->batch * t->L->sparse_per_sample;
    size_t D = (size_t)t->D, sc = (size_t)(t->sparse_cap > 0 ? t->sparse_cap : 1), Dm = D ? D : 1;
    t->h_dense = malloc((t->n_dense ? t->n_dense : 1) * sizeof(float));
    t->h_rows = malloc(sc * sizeof(int64_t));
    t->h_sgrads = malloc(sc * Dm * sizeof(float));
    if (!t->h_dense || !t->h_rows || !t->h_sgrads) return err_set(e, PLUMB_ENOMEM, "trainer: out of host memory");
    if (cfg->numerics == NUMERICS_GOLDEN) {
        t->q_dense = malloc((t->n_dense ? t->n_dense : 1) * sizeof(int64_t));
        t->q_rows = malloc(sc * sizeof(int64_t));
        t->q_vals = malloc(sc * Dm * sizeof(int64_t));
        if (!t->q_dense || !t->q_rows || !t->q_vals) return err_set(e, PLUMB_ENOMEM, "trainer: out of host memory");
        /* every micro-shard of a global batch may add up to the bound */
        t->q_bound = ldexp(1.0, 62) / (double)(sampler_nshards(&t->smp) + 1);
    }
    if ((rc = dev_alloc(t->d, sc * sizeof(int64_t), (void **)&t->d_rows_in, e)) ||
        (rc = dev_alloc(t->d, sc * sizeof(int64_t), (void **)&t->d_rows, e)) ||
        (rc = dev_alloc(t->d, sc * Dm * sizeof(float), (void **)&t->d_sg_in, e)) ||
        (rc = dev_alloc(t->d, sc * Dm * sizeof(float), (void **)&t->d_sg, e)) ||
        (rc = dev_alloc(t->d, SCR_BYTES, &t->d_scratch, e)))
        return rc;
    t->d_sumsq = (double *)((char *)t->d_scratch + SCR_SUMSQ);
    t->d_found = (int *)((char *)t->d_scratch + SCR_FOUND);
    t->d_n = (int64_t *)((char *)t->d_scratch + SCR_N);

    /* this rank's eval share: contiguous chunks of eval_batch samples */
    long ne = t->n_split[1], E = cfg->eval_batch, C = (ne + E - 1) / E;
    long c0 = C * t->rank / t->world, c1 = C * (t->rank + 1) / t->world;
    t->ev_lo = c0 * E;
    long hi = c1 * E < ne ? c1 * E : ne;
    t->ev_n = hi > t->ev_lo ? hi - t->ev_lo : 0;
    size_t en = (size_t)(t->ev_n > 0 ? t->ev_n : 1);
    int ok = 1;
    for (int k = 0; k < t->fs.n_fields; k++) ok &= (t->ev.field[k] = calloc(en, feed_field_bytes(&t->fs, k))) != NULL;
    t->ev.idx = malloc(en * sizeof(uint32_t));
    t->ev_out = malloc(en * (size_t)(t->L->out_width > 0 ? t->L->out_width : 1) * sizeof(float));
    if (!ok || !t->ev.idx || !t->ev_out) return err_set(e, PLUMB_ENOMEM, "trainer: cannot hold %ld eval samples", t->ev_n);
    t->ev.cap = t->ev.n = (int)t->ev_n;
    for (long i = 0; i < t->ev_n; i++) t->ev.idx[i] = (uint32_t)(t->ev_lo + i);
    if ((rc = t->wl->data->fill(t->ds, SPLIT_EVAL, 0, t->ev.idx, (int)t->ev_n, t->ev.field, e)))
        return err_wrap(e, "reading the eval samples");
    if ((rc = t->wl->eval->create(t->spec, t->ev_n, &t->acc, e))) return rc;
    config_string(t);
    return PLUMB_OK;
}

/* ---- the queued step (docs/TRAINING.md, "The step and the host") ----
 * Where nothing the host decides before the next step depends on this
 * step's device results, the step is queued and never waits: forward,
 * backward, the found-inf check, the norm and the optimizer go onto the
 * device stream back to back, the update gated on the device by the
 * found-inf flag, the sparse row count read by the kernels from device
 * memory (launches sized by the bound sparse_per_sample * B). The loss and
 * the status block are copied into a pinned slot behind an event, and the
 * host reads them one step behind (settle_one) or when a decision needs
 * them (eval, checkpoint, stop, the end, a step that cannot be queued).
 * That is: fast numerics, 1 rank, nothing exchanged, no dynamic loss scale
 * (the next scale would depend on this step's flag), no clipping (the
 * coefficient needs the norm before the update), plain SGD (momentum's
 * first step and AdamW's bias correction count the applied steps), a model
 * with model_ops.defer and a device with the gated ops. The decisions keep
 * their semantics: a non-finite step is skipped by the gate and counted by
 * the host when it is settled; a rollback it triggers drops the step queued
 * behind it (the checkpoint overwrites what it did). PLUMB_TRAIN_QUEUE=0
 * turns it off (the tests compare both). */
static int setup_sync_defer(struct trainer *t, const char *gwhy, plumb_err *e);

static int setup_queue(struct trainer *t, plumb_err *e)
{
    const struct train_config *cfg = t->cfg;
    const char *qv = getenv("PLUMB_TRAIN_QUEUE");
    const char *why = cfg->numerics != NUMERICS_FAST ? "golden numerics"
                      : t->exch || t->world > 1      ? "gradients exchanged across ranks"
                      : t->whole                     ? "the model couples a batch's samples"
                      : t->sc.enabled                ? "dynamic loss scale"
                      : cfg->clip_grad_norm > 0      ? "--clip-grad-norm"
                      : !t->mo->defer                ? "the model keeps no outputs on the device"
                      : !t->to->sumsq_dn || !t->to->scale_check_dn || !t->to->sgd_gated || !t->to->sgd_sparse_dn
                          ? "the device has no gated ops"
                      : !optim_can_gate(&t->opt)     ? "the optimizer counts applied steps (momentum, AdamW)"
                      : qv && *qv && !atoi(qv)       ? "PLUMB_TRAIN_QUEUE=0"
                                                     : NULL;
    t->queue = why == NULL;
    if (t->rank == 0 && !cfg->quiet)
        log_info("step: %s%s%s", t->queue ? "queued (outcomes read one step behind, the update gated on the device)"
                                          : "synchronous (", t->queue ? "" : why, t->queue ? "" : ")");
    const char *gwhy = cfg->graph && !strcmp(cfg->graph, "off") ? "--graph off"
                       : !t->d->be->graph_begin                 ? "the device has no graphs"
                       : cfg->inject && *cfg->inject            ? "--inject (host-side faults inside the step)"
                                                                : NULL;
    if (!t->queue) return setup_sync_defer(t, gwhy, e);
    t->graph_on = gwhy == NULL;
    if (t->rank == 0 && !cfg->quiet)
        log_info("graph: %s%s%s", t->graph_on ? "the queued step captured once per batch buffer and shape, then replayed"
                                              : "none (", t->graph_on ? "" : gwhy, t->graph_on ? "" : ")");
    struct dev *d = t->d;
    int rc = d->be->host_alloc(d, 2 * sizeof(struct step_out), (void **)&t->h_out, e);
    for (int i = 0; i < 2 && !rc; i++) rc = d->be->event_create(d, &t->q_ev[i], e);
    if (!rc) memset(t->h_out, 0, 2 * sizeof(struct step_out));
    if (rc) return err_wrap(e, "the queued step's pinned slots and events");
    return PLUMB_OK;
}

/* ---- the deferred synchronous step ----
 * A step that is not queued (AdamW, momentum, clipping, a dynamic loss
 * scale, a whole-batch model) still waits for the host once: the optimizer
 * needs the found-inf flag, the norm and the loss. It need not wait more
 * than that. Where the model can defer (model_ops.defer) and has no sparse
 * list (whose length the host needs before the optimizer), on one rank with
 * nothing exchanged and fast numerics, forward_backward leaves the loss on
 * the device and returns without synchronising; the found-inf check and the
 * norm follow on the stream, and one read brings the status block back,
 * the loss pair with it (the model's own read-backs, up to two a step,
 * are gone). The same bits as the model's synchronous contract.
 * On a device with graphs (--graph on) this forward/backward + checks is
 * captured once per batch buffer and shape and replayed, as the queued
 * step is: the model's hundreds of launches (gpt2-124m, resnet152) become
 * one. Its key holds what the launches bake in: the batch's buffers and
 * shape, the gradient scale and the loss scale's inverse, and whether the
 * norm is computed. The optimizer stays outside the graph: its lr, step
 * count and clip coefficient change every step. PLUMB_TRAIN_DEFER=0 turns
 * the deferred step off (the model reads its loss back as before). */
static int setup_sync_defer(struct trainer *t, const char *gwhy, plumb_err *e)
{
    const struct train_config *cfg = t->cfg;
    struct model_deferred md = {0};
    int rc = t->mo->defer ? t->mo->defer(t->m, 0, &md, e) : PLUMB_OK;
    if (rc) return rc;
    int on = 1;
    if ((rc = env_switch("PLUMB_TRAIN_DEFER", "the deferred forward/backward where it applies", &on, e))) return rc;
    const char *why = cfg->numerics != NUMERICS_FAST ? "golden numerics"
                      : t->exch || t->world > 1      ? "gradients exchanged across ranks"
                      : !t->mo->defer || !md.loss    ? "the model keeps no outputs on the device"
                      : md.rows_n                    ? "the model's sparse list length is needed on the host"
                      : !on                          ? "PLUMB_TRAIN_DEFER=0"
                                                     : NULL;
    t->sync_defer = why == NULL;
    t->graph_sync = t->sync_defer && gwhy == NULL;
    /* the pinned slot its one read lands in */
    if (t->sync_defer) {
        if ((rc = t->d->be->host_alloc(t->d, sizeof(struct step_out), (void **)&t->h_out, e)))
            return err_wrap(e, "the deferred step's pinned slot");
        memset(t->h_out, 0, sizeof(struct step_out));
    }
    if (t->rank == 0 && !cfg->quiet) {
        if (!t->sync_defer)
            log_info("deferred forward/backward: none (%s)", why);
        else if (t->graph_sync)
            log_info("deferred forward/backward: one read a step; captured once per batch buffer and shape, then "
                     "replayed");
        else
            log_info("deferred forward/backward: one read a step; no graph (%s)", gwhy);
    }
    return PLUMB_OK;
}

/* The model's defer mode on (queued steps) or off (every other call). */
static int model_defer(struct trainer *t, int on, plumb_err *e)
{
    if (!t->mo->defer || t->deferred_on == on) return PLUMB_OK;
    struct model_deferred md = {0};
    int rc = t->mo->defer(t->m, on, &md, e);
    if (!rc && (!md.loss || !(md.div >= 1.0)))
        rc = err_set(e, PLUMB_EINTERNAL, "model defer: no device loss or a divisor %g below 1", md.div);
    if (!rc) {
        t->deferred_on = on;
        t->q_loss_dev = md.loss, t->q_rows_n = md.rows_n, t->q_div = md.div;
    }
    if (!rc && on) {
        /* the model's loss pair and the status block, 8-byte aligned, written in one launch */
        const char *sv = getenv("PLUMB_TRAIN_STATUS");
        t->status_write = t->to->status_to_host && !(sv && !strcmp(sv, "copy")) &&
                          (uintptr_t)t->q_loss_dev % 8 == 0 && (uintptr_t)t->d_scratch % 8 == 0;
    }
    return rc;
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
            use_nccl = comm_nccl_load(be, NULL, 0, &le) == PLUMB_OK;
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
    /* the gradients' comm (fast numerics): a device comm over the host comm,
     * NCCL/RCCL or the host comm itself serving the device (directly on
     * the cpu device, staged through pinned memory on a GPU); one path for
     * every case, with nothing to exchange on 1 rank unless asked for */
    int forced = fast && stand && !strcmp(stand, "host");
    if (forced && !is_cpu(t))
        return err_set(e, PLUMB_EUSAGE, "PLUMB_TRAIN_DEVICE_COMM=host needs the cpu device (not %s)", t->d->label);
    if (forced) snprintf(why + strlen(why), sizeof why - strlen(why), "; PLUMB_TRAIN_DEVICE_COMM=host");
    t->exch = fast && (t->world > 1 || use_nccl || forced);
    if (t->exch) {
        double to = cfg->watchdog_s > 0 ? cfg->watchdog_s : 300;
        if ((rc = comm_open_device(t->c, t->d, use_nccl ? "nccl" : "host", to, &t->dc, e)))
            return err_wrap(e, "--comm %s", kind);
    }
    /* --fuse-sparse-sgd auto: only where nothing must change the sparse
     * gradient before it is applied (one rank, nothing exchanged, plain SGD,
     * no dynamic loss scale to multiply by, no clipping). The decisions keep
     * their semantics: the fused backward flags a non-finite sum (d_found),
     * leaves the list for the metrics norm when it is wanted, and saves the
     * touched rows' old values (in d_sg_in) so a skipped step is put back
     * bit for bit (fused_undo). */
    t->fuse = cfg->fuse_sparse_sgd && !strcmp(cfg->fuse_sparse_sgd, "auto") && fast && !t->exch &&
              t->world == 1 && !strcmp(cfg->optimizer, "sgd") && !(cfg->momentum > 0) && !t->sc.enabled &&
              !(cfg->clip_grad_norm > 0) && t->mo->fuse_sparse_sgd && t->to->sparse_put_dn && t->D > 0;
    if ((rc = setup_queue(t, e))) return rc;
    if (t->exch) {
        /* dense buckets: layers in backward order merged up to PLUMB_NCCL_BUCKET_MB (default 25; 0 = one bucket) */
        size_t off[MAX_BUCKETS], len[MAX_BUCKETS];
        t->n_layers = t->mo->grad_buckets(t->m, off, len, MAX_BUCKETS);
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
        int th = cfg->threads > 0 ? (int)cfg->threads : (int)(ncpu / (t->c->local_world > 0 ? t->c->local_world : 1)) - 2;
        t->feed_threads = th < 1 ? 1 : th > 16 ? 16 : th;
        if (t->rank == 0 && !cfg->quiet)
            log_info("data: device feed (pinned buffers, %d build thread%s, H2D on a copy stream, %d deep)",
                     t->feed_threads, t->feed_threads == 1 ? "" : "s", cfg->prefetch > 2 ? (int)cfg->prefetch : 2);
    }
    if (t->rank == 0 && !cfg->quiet) {
        const char *hc = t->c->ops->name;
        if (cfg->numerics == NUMERICS_GOLDEN)
            log_info("comm: %s (golden: int64 fixed-point sums, staged through host memory) [%s]", hc, why);
        else if (t->exch && use_nccl)
            log_info("comm: gradients on the device over %s, %d bucket%s, control over %s [%s]", t->dc->desc, t->nb,
                     t->nb == 1 ? "" : "s", hc, why);
        else if (forced)
            log_info("comm: device-collective path with the host comm %s standing in for NCCL, %d bucket%s [%s]", hc,
                     t->nb, t->nb == 1 ? "" : "s", why);
        else if (t->exch)
            log_info("comm: %s, gradients staged through host memory%s [%s]", hc,
                     is_cpu(t) ? " (the cpu device's own)" : "", why);
        else
            log_info("comm: %s, 1 rank: gradients stay on the device, no exchange [%s]", hc, why);
    }
    return PLUMB_OK;
}

/* The data's own model (a synthetic teacher) scored on the eval split like
 * the model is, exactly over all ranks: res->reference gets
 * teacher_<reference_metric>. Nothing when the data have no such model. */
static int reference_eval(struct trainer *t, struct eval_metrics *ref, plumb_err *e)
{
    memset(ref, 0, sizeof *ref);
    const struct eval_ops *ev = t->wl->eval;
    if (!t->di.has_reference || !t->wl->data->reference_outputs || !ev->reference_metric) return PLUMB_OK;
    int rc = t->wl->data->reference_outputs(t->ds, SPLIT_EVAL, t->ev.idx, (int)t->ev_n, t->ev_out, e);
    ev->reset(t->acc);
    struct batch hb;
    host_batch_view(&t->fs, &t->ev, 0, (int)t->ev_n, &hb);
    if (!rc) rc = ev->add(t->acc, &hb, t->ev_out, (int)t->ev_n, e);
    struct eval_metrics m;
    if (!rc) rc = ev->reduce(t->acc, &t->mcomm, &m, e);
    if (rc) return err_wrap(e, "evaluating the data's reference model");
    ref->n = 1;
    ref->count = m.count;
    snprintf(ref->name[0], sizeof ref->name[0], "teacher_%s", ev->reference_metric);
    ref->value[0] = eval_metric(&m, ev->reference_metric);
    return PLUMB_OK;
}

/* --------------------------------------------------------------- eval */

static int run_eval(struct trainer *t, struct eval_metrics *r, plumb_err *e)
{
    long E = t->cfg->eval_batch;
    const struct eval_ops *ev = t->wl->eval;
    size_t W = (size_t)(t->L->out_width > 0 ? t->L->out_width : 1);
    ev->reset(t->acc);
    for (long off = 0; off < t->ev_n; off += E) {
        long n = t->ev_n - off < E ? t->ev_n - off : E;
        struct batch b;
        host_batch_view(&t->fs, &t->ev, off, (int)n, &b);
        int rc = t->mo->predict(t->m, &b, t->ev_out + (size_t)off * W, e);
        if (!rc) rc = ev->add(t->acc, &b, t->ev_out + (size_t)off * W, (int)n, e);
        if (rc) return err_wrap(e, "eval at step %ld", t->step);
    }
    return ev->reduce(t->acc, &t->mcomm, r, e);
}

/* SHA-256 of the fp32 parameter buffer's bytes (little endian, buffer
 * order), then of the buffers (none for most models). */
static int param_digest(struct trainer *t, char hex[65], plumb_err *e)
{
    hash_sha256 h;
    if (hash_sha256_init(&h)) return err_set(e, PLUMB_EINTERNAL, "digest: SHA-256 init failed");
    const size_t chunk = (size_t)1 << 22; /* floats */
    float *buf = malloc(chunk * sizeof(float));
    int rc = buf ? PLUMB_OK : err_set(e, PLUMB_ENOMEM, "digest: out of memory");
    const float *src[2] = {t->mo->params(t->m), t->mo->buffers(t->m)};
    size_t cnt[2] = {t->n_params, t->L->n_buffers};
    for (int k = 0; k < 2 && !rc; k++)
        for (size_t i = 0; i < cnt[k] && src[k] && !rc; i += chunk) {
            size_t n = cnt[k] - i < chunk ? cnt[k] - i : chunk;
            rc = to_host(t, buf, src[k] + i, n * sizeof(float), e);
            if (!rc) hash_sha256_update(&h, buf, n * sizeof(float));
        }
    uint8_t out[32];
    hash_sha256_final(&h, out);
    free(buf);
    if (rc) return rc;
    hash_to_hex(out, 32, hex);
    return PLUMB_OK;
}

/* --------------------------------------------------------- checkpoints */

/* The checkpoint's sections, from the tensor list: "p:<tensor>" the
 * parameters of each tensor, "b:<tensor>" each buffer, and the optimizer
 * state of each tensor it has state for ("m:" / "v:" AdamW moments,
 * "u:" SGD momentum, dense tensors only). */
enum { SEC_P = 0, SEC_B, SEC_M, SEC_V, SEC_U, SEC_KINDS };
static const char sec_prefix[SEC_KINDS][3] = {"p:", "b:", "m:", "v:", "u:"};

/* Device pointer of tensor i's section of kind k (NULL: the tensor has none). */
static float *sec_ptr(struct trainer *t, int i, int k)
{
    const struct model_tensor *x = &t->L->tensors[i];
    int buffer = (x->flags & TENSOR_BUFFER) != 0;
    switch (k) {
    case SEC_P: return buffer ? NULL : t->mo->params(t->m) + x->offset;
    case SEC_B: return buffer && t->mo->buffers(t->m) ? t->mo->buffers(t->m) + x->offset : NULL;
    case SEC_M: return !buffer && t->opt.m ? t->opt.m + x->offset : NULL;
    case SEC_V: return !buffer && t->opt.v ? t->opt.v + x->offset : NULL;
    case SEC_U: return !buffer && !(x->flags & TENSOR_SPARSE) && t->opt.buf ? t->opt.buf + x->offset : NULL;
    }
    return NULL;
}

static int ckpt_save(struct trainer *t, char *path_out, plumb_err *e)
{
    int rc = PLUMB_OK;
    char path[4096] = "";
    if (t->rank == 0) {
        int nt = t->L->n_tensors, cap = 1 + nt * SEC_KINDS;
        struct ckpt_section *sec = calloc((size_t)cap, sizeof *sec);
        void **bufs = calloc((size_t)cap, sizeof *bufs);
        int ns = 0;
        char digest[65] = "";
        char *ms = NULL;
        if (!sec || !bufs) rc = err_set(e, PLUMB_ENOMEM, "checkpoint: out of memory");
        if (!rc) rc = param_digest(t, digest, e);
        if (!rc) {
            json_t *meta = json_pack("{s:s, s:s, s:I, s:I, s:I, s:s, s:s, s:s, s:i, s:I, s:{s:f, s:I, s:I}, s:b, s:s}",
                                     "format", "plumb.ckpt/2", "workload", t->wl->name, "step", (json_int_t)t->step,
                                     "opt_step", (json_int_t)t->opt_t, "epoch",
                                     (json_int_t)(t->step / sampler_steps_per_epoch(&t->smp)), "config_hash",
                                     t->cfg_hash, "config", t->cfg_str, "param_digest", digest, "world", t->world,
                                     "samples_seen", (json_int_t)(t->step * t->cfg->batch), "scaler", "scale",
                                     t->sc.scale, "clean_steps", (json_int_t)t->sc.clean_steps, "skipped_total",
                                     (json_int_t)t->sc.skipped_total, "momentum_started", t->opt.momentum_started,
                                     "written_utc", "");
            char ts[32];
            time_t now = time(NULL);
            strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
            json_object_set_new(meta, "written_utc", json_string(ts));
            ms = json_dumps(meta, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
            json_decref(meta);
            snprintf(sec[ns].name, CKPT_NAME_MAX, "meta");
            sec[ns].data = ms, sec[ns++].len = strlen(ms);
        }
        for (int k = 0; k < SEC_KINDS && !rc; k++)
            for (int i = 0; i < nt && !rc; i++) {
                const float *src = sec_ptr(t, i, k);
                if (!src) continue;
                size_t bytes = t->L->tensors[i].numel * sizeof(float);
                if (!(bufs[ns] = malloc(bytes ? bytes : 1))) {
                    rc = err_set(e, PLUMB_ENOMEM, "checkpoint: out of memory for %s", t->L->tensors[i].name);
                    break;
                }
                rc = to_host(t, bufs[ns], src, bytes, e);
                snprintf(sec[ns].name, CKPT_NAME_MAX, "%s%s", sec_prefix[k], t->L->tensors[i].name);
                sec[ns].data = bufs[ns], sec[ns++].len = bytes;
            }
        if (!rc) rc = ckpt_write(t->cfg->ckpt_dir, t->step, sec, ns, (int)t->cfg->ckpt_keep, path, e);
        if (!rc && inject_take(INJECT_CORRUPT_CKPT, t->step, t->rank)) {
            log_warn("injected fault: corrupting checkpoint %s", path);
            plumb_err ce = {0};
            if (ckpt_corrupt_file(path, &ce)) log_warn("%s", ce.msg);
        }
        for (int i = 0; bufs && i < cap; i++) free(bufs[i]);
        free(bufs), free(sec), free(ms);
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

/* The fields of two config strings (config_string: "key=value;...") that
 * differ, named: "batch is 256 in the checkpoint, 128 here". Data files are
 * compared as files: the same file under another name (a hard link, a
 * moved mount) is the same data. Returns 0 when nothing differs. */
static int same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return a && b && *a && *b && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

static int config_differs(const char *ck, const char *mine, char *out, size_t n)
{
    if (!ck) {
        snprintf(out, n, "the checkpoint records no configuration");
        return 1;
    }
    int ndiff = 0;
    size_t k = 0;
    out[0] = 0;
    /* walk this run's fields; look each up in the checkpoint's */
    for (const char *p = mine; *p;) {
        const char *semi = strchr(p, ';'), *eq = strchr(p, '=');
        size_t flen = semi ? (size_t)(semi - p) : strlen(p);
        if (!eq || eq > p + flen) break;
        char key[64], a[512] = "", b[512];
        snprintf(key, sizeof key, "%.*s", (int)(eq - p), p);
        snprintf(b, sizeof b, "%.*s", (int)(p + flen - eq - 1), eq + 1);
        int found = 0;
        for (const char *q = ck; *q && !found;) {
            const char *s2 = strchr(q, ';'), *e2 = strchr(q, '=');
            size_t l2 = s2 ? (size_t)(s2 - q) : strlen(q);
            if (e2 && e2 < q + l2 && (size_t)(e2 - q) == strlen(key) && !strncmp(q, key, strlen(key))) {
                snprintf(a, sizeof a, "%.*s", (int)(q + l2 - e2 - 1), e2 + 1);
                found = 1;
            }
            q = s2 ? s2 + 1 : q + l2;
        }
        int differs = !found || strcmp(a, b);
        if (differs && (!strcmp(key, "data") || !strcmp(key, "eval_data")) && same_file(a, b)) differs = 0;
        if (differs) {
            if (ndiff < 4 && k < n)
                k += (size_t)snprintf(out + k, n - k, "%s%s is %s in the checkpoint, %s here", ndiff ? "; " : "", key,
                                      found ? a : "absent", b);
            ndiff++;
        }
        p = semi ? semi + 1 : p + flen;
    }
    if (ndiff > 4 && k < n) snprintf(out + k, n - k, "; and %d more", ndiff - 4);
    if (!ndiff && strcmp(ck, mine)) {
        /* the same fields, another layout (written by another plumb) */
        snprintf(out, n, "the configuration records differ (another plumb version?)");
        return 1;
    }
    return ndiff;
}

/* Rank 0 finds the newest valid checkpoint and broadcasts its image; every
 * rank verifies and applies it. *found = 0 when there is none; checkpoint
 * files that all fail to verify are an error (PLUMB_EUSAGE). */
static int ckpt_restore(struct trainer *t, int *found, plumb_err *e)
{
    *found = 0;
    struct ckpt ck;
    memset(&ck, 0, sizeof ck);
    uint64_t size = 0;
    int rc = PLUMB_OK;
    if (t->rank == 0) {
        int f = 0, nfiles = 0;
        char why[2048];
        rc = ckpt_load_newest(t->cfg->ckpt_dir, &ck, &f, &nfiles, why, sizeof why, e);
        if (!rc && f) size = ck.size;
        /* checkpoints that all fail to verify are never "no checkpoint" */
        if (!rc && !f && nfiles > 0)
            rc = err_set(e, PLUMB_EUSAGE, "%s: %d checkpoint%s found, none usable (%s)", t->cfg->ckpt_dir, nfiles,
                         nfiles == 1 ? "" : "s", why);
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
    char diff[768] = "";
    if ((!hash || strcmp(hash, t->cfg_hash)) && config_differs(jsonx_str(meta, "config"), t->cfg_str, diff, sizeof diff)) {
        rc = err_set(e, PLUMB_EUSAGE,
                     "%s was written by a run with another configuration: %s (resume with the same settings, or use "
                     "another --checkpoint-dir)",
                     path, diff);
        json_decref(meta);
        ckpt_free(&ck);
        return rc;
    }
    for (int k = 0; k < SEC_KINDS && !rc; k++)
        for (int i = 0; i < t->L->n_tensors && !rc; i++) {
            float *dst = sec_ptr(t, i, k);
            if (!dst) continue;
            char name[CKPT_NAME_MAX + 8];
            snprintf(name, sizeof name, "%s%s", sec_prefix[k], t->L->tensors[i].name);
            size_t len, want = t->L->tensors[i].numel * sizeof(float);
            const void *p = ckpt_find(&ck, name, &len);
            if (!p || len != want)
                rc = err_set(e, PLUMB_ECORRUPT, "%s: section %s has %zu bytes, expected %zu%s", path, name, p ? len : 0,
                             want, p ? "" : " (missing: another optimizer or model?)");
            else rc = to_dev(t, dst, p, len, e);
        }
    if (!rc) {
        t->step = (long)jsonx_num(meta, "step");
        t->opt_t = (long)jsonx_num(meta, "opt_step");
        json_t *s = json_object_get(meta, "scaler");
        t->sc.scale = jsonx_num(s, "scale");
        t->sc.clean_steps = (long)jsonx_num(s, "clean_steps");
        t->sc.skipped_total = (long)jsonx_num(s, "skipped_total");
        if (!t->sc.enabled) t->sc.scale = 1.0;
        t->opt.momentum_started = json_is_true(json_object_get(meta, "momentum_started"));
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


static int cmp_row(const void *a, const void *b)
{
    const int64_t *x = a, *y = b;
    return (*x > *y) - (*x < *y);
}

/* Golden: quantize the model's current gradients (dense + sparse list) and
 * add them to the accumulators. */
static int golden_accumulate(struct trainer *t, int64_t *flags, plumb_err *e)
{
    int rc = to_host(t, t->h_dense, t->mo->grads(t->m), t->n_dense * sizeof(float), e);
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
    t->mo->sparse_grads(t->m, &rows, &grads, &n);
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

/* A whole-batch model's shard j is in its gradient buffers (golden): the
 * same quantize-and-add as a per-shard call. After a non-finite shard the
 * rest are not added (the step is skipped anyway). */
static int golden_fold(void *ctx, int j, const struct model_loss *l, plumb_err *e)
{
    struct trainer *t = ctx;
    (void)j;
    if (t->g_flags[SF_NONFINITE]) return PLUMB_OK;
    *t->g_loss_fix += loss_fixed(l->sum, t->g_flags);
    *t->g_count += l->count;
    int rc = golden_accumulate(t, t->g_flags, e);
    if (rc) t->g_engine_err = 1;
    return rc;
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

/* ---- the fast gradient path (docs/TRAINING.md, "Where the gradients go") ----
 * One path over the gradients' device comm (t->dc, comm/comm.h: NCCL/RCCL,
 * or the host comm serving the device: directly on the cpu device, staged
 * through pinned memory on a GPU without NCCL): dense buckets all-reduced
 * as backward completes them (the model's grad-ready hook), sparse lists
 * gathered on the device (padded to the largest) and coalesced there;
 * unscale + inf check after the reduction (every rank sees the same sums,
 * so the same decision). With nothing to exchange (1 rank, t->exch 0) the
 * gradients stay where the model left them: its sparse list goes straight
 * to the optimizer. Each step reads back one small status block (scratch:
 * sumsq, found-inf, sparse count). */
struct scratch_host {
    double sumsq;
    int found, pad;
    int64_t n;
};

/* Whether step (0-based) gets a metrics.jsonl step line: every
 * --log-every-th (counted 1-based, as the lines name them), the run's first
 * and last, and the steps an eval follows; record_step adds the skipped ones. */
static int step_logged(const struct trainer *t, long step)
{
    const struct train_config *c = t->cfg;
    if (!t->metrics) return 0;
    long n = step + 1;
    return c->log_every <= 1 || n % c->log_every == 0 || step == t->first_step || n == c->steps ||
           (c->eval_every > 0 && n % c->eval_every == 0);
}

/* The norm is needed for clipping (every rank) and for the step's
 * metrics.jsonl line (rank 0, the steps step_logged names: computing it
 * every step costs two reductions over the gradients). t->logged is set by
 * trainer_step for the step in phase 1; a queued step remembers its own
 * (step_info.queued == 2) for when it settles. */
static int want_norm(const struct trainer *t) { return t->cfg->clip_grad_norm > 0 || t->logged; }

/* 1: the step's found-inf flag is read off its norm (found_of_sumsq,
 * dev/train_ops.h) instead of a scale_check pass of its own: where the
 * norm is computed and there is nothing to unscale (inv = 1: no loss
 * scale). PLUMB_FOUND_OF_NORM=0 keeps the pass (for a side-by-side run). */
static int norm_flags(const struct trainer *t, float inv)
{
    return t->found_of_norm && want_norm(t) && inv == 1.0f;
}

/* The status block's bytes (the device's layout) into h */
static void scratch_of(const char *buf, struct scratch_host *h)
{
    memcpy(&h->sumsq, buf + SCR_SUMSQ, sizeof h->sumsq);
    memcpy(&h->found, buf + SCR_FOUND, sizeof h->found);
    memcpy(&h->n, buf + SCR_N, sizeof h->n);
}

static int read_scratch(struct trainer *t, struct scratch_host *h, plumb_err *e)
{
    char buf[SCR_BYTES];
    int rc = to_host(t, buf, t->d_scratch, SCR_BYTES, e);
    if (!rc) scratch_of(buf, h);
    return rc;
}

/* Launches the dense all-reduce of buckets launched..j (in order: every rank
 * enqueues the same sequence). */
static int launch_upto(struct trainer *t, int j, dev_stream *s, plumb_err *e)
{
    while (t->launched <= j) {
        int k = t->launched;
        float *g = t->mo->grads(t->m) + t->b_lo[k];
        size_t n = t->b_hi[k] - t->b_lo[k];
        char what[64];
        snprintf(what, sizeof what, "allreduce grads bucket %d", k);
        int rc = comm_allreduce_start(t->dc, g, n, DT_F32, COMM_SUM, s, what, e);
        if (rc) return err_wrap(e, "all-reduce of gradient bucket %d [%zu, %zu)", k, t->b_lo[k], t->b_hi[k]);
        t->launched++;
    }
    return PLUMB_OK;
}

/* the model's grad-ready hook: bucket k's gradients are final on stream s */
static int grad_ready(void *ctx, int k, size_t off, size_t len, dev_stream *s, plumb_err *e)
{
    struct trainer *t = ctx;
    (void)off, (void)len;
    return k < t->n_layers && t->close_at[k] >= 0 ? launch_upto(t, t->close_at[k], s, e) : PLUMB_OK;
}

/* A fused step that is skipped: the touched rows get their old values back
 * (the table then holds the bits an unfused skipped step leaves). rows_n is
 * the list's device count; when is a device flag (NULL: now). */
static int fused_undo(struct trainer *t, const int64_t *rows, const int64_t *rows_n, const int *when, plumb_err *e)
{
    if (!t->fused_step || !t->sparse_cap) return PLUMB_OK;
    int rc = t->to->sparse_put_dn(t->d, NULL, t->mo->params(t->m) + t->L->n_dense, rows, t->d_sg_in, rows_n,
                                  (size_t)t->sparse_cap, t->D, when, e);
    return rc ? err_wrap(e, "undo of the fused sparse SGD") : PLUMB_OK;
}

/* A model's own failure (mrc != 0) into the step's flags: an allocation
 * failure for the OOM tiers, anything else an error for the status word
 * (its message kept for the report). */
static void flag_model_failure(struct trainer *t, struct step_info *si, int mrc, const plumb_err *me)
{
    if (mrc == PLUMB_ENOMEM) {
        si->flags[SF_OOM] = 1;
    } else {
        si->flags[SF_ERROR] = 1;
        t->local_err = *me;
    }
}

/* step_ctx.forward_done: the phase mark between forward and backward */
static int phase_forward_done(void *ctx, plumb_err *e)
{
    struct trainer *t = (struct trainer *)ctx;
    if (++t->ph_hits != 1) return PLUMB_OK; /* called twice: the step has no split (fwd_bwd) */
    return t->d->be->event_mark(t->d, t->ph[1], NULL, e);
}

static int model_fwd_bwd(struct trainer *t, const struct batch *mb, float gscale, const struct step_ctx *sc,
                         struct model_loss *l, plumb_err *e)
{
    t->ph_valid = 0;
    if (!t->ph_on) return t->mo->forward_backward(t->m, mb, gscale, sc, l, e);
    /* the marks around a whole batch's forward_backward (queued inside a
     * capture they are nodes of the graph: dev.h's event_mark); every step
     * context of this file has the trainer as its ctx */
    struct step_ctx pc = sc ? *sc : (struct step_ctx){0};
    pc.ctx = t, pc.forward_done = phase_forward_done;
    t->ph_hits = 0;
    int rc = t->d->be->event_mark(t->d, t->ph[0], NULL, e);
    if (rc) return rc;
    rc = t->mo->forward_backward(t->m, mb, gscale, &pc, l, e);
    if (rc) return rc;
    if ((rc = t->d->be->event_mark(t->d, t->ph[2], NULL, e))) return rc;
    t->ph_valid = t->ph_hits == 1;
    return PLUMB_OK;
}

/* Forward + backward of the step's local batch (whole), or of its samples
 * [off, off+cnt) (OOM split), from the device feed or the host batch. */
static int fwd_bwd(struct trainer *t, struct host_batch *b, int whole, long off, long cnt, float gscale,
                   const struct step_ctx *sc, struct model_loss *l, plumb_err *e)
{
    struct batch mb;
    if (t->use_feed) {
        mb = t->db;
        if (!whole) {
            mb.B = mb.n_valid = (int)cnt;
            for (int k = 0; k < t->fs.n_fields; k++)
                mb.field[k] = (char *)t->db.field[k] + (size_t)off * feed_field_bytes(&t->fs, k);
        }
    } else if (whole) {
        host_batch_view(&t->fs, b, 0, b->cap, &mb);
        mb.n_valid = b->n;
    } else {
        host_batch_view(&t->fs, b, off, (int)cnt, &mb);
    }
    mb.global_valid = b->st.global_valid;
    if (!whole) {
        t->ph_valid = 0; /* a piece of the step: no split */
        return t->mo->forward_backward(t->m, &mb, gscale, sc, l, e);
    }
    return model_fwd_bwd(t, &mb, gscale, sc, l, e);
}

/* OOM split (rare): micro-batch by micro-batch, the dense gradients summed on
 * the host (t->h_acc) and the sparse lists appended (h_rows/h_sgrads); each
 * unscaled and inf-checked on the device first unless the reduction does it
 * (an exchange: after it). *ok = 1 when every micro-batch ran. */
static int split_accumulate(struct trainer *t, struct host_batch *b, struct step_info *si, int k, double gscale,
                            int64_t *loss_fix, int64_t *count, int *ok, plumb_err *e)
{
    size_t D = (size_t)t->D;
    float inv = (float)(1.0 / si->scale);
    int unscale = !t->exch;
    int rc = PLUMB_OK;
    *ok = 0;
    memset(t->h_acc, 0, t->n_dense * sizeof(float));
    long per = (b->n + k - 1) / k;
    for (long off = 0; off < b->n && !rc; off += per) {
        long cnt = b->n - off < per ? b->n - off : per;
        struct model_loss l;
        plumb_err me = {0};
        int mrc = fwd_bwd(t, b, 0, off, cnt, (float)gscale, NULL, &l, &me);
        if (mrc) {
            flag_model_failure(t, si, mrc, &me);
            return PLUMB_OK;
        }
        *loss_fix += loss_fixed(l.sum, si->flags);
        *count += l.count;
        int64_t *rows;
        float *grads;
        size_t n;
        t->mo->sparse_grads(t->m, &rows, &grads, &n);
        if (t->h_n + n > (size_t)t->sparse_cap)
            return err_set(e, PLUMB_EINTERNAL, "sparse gradient list overflow (%zu + %zu > %ld)", t->h_n, n,
                           t->sparse_cap);
        /* unscale + inf check (linear, so the sum of unscaled gradients is the unscaled sum) */
        if (unscale) rc = t->to->scale_check(t->d, NULL, t->mo->grads(t->m), t->n_dense, inv, t->d_found, e);
        if (!rc && unscale) rc = t->to->scale_check(t->d, NULL, grads, n * D, inv, t->d_found, e);
        if (!rc) rc = to_host(t, t->h_dense, t->mo->grads(t->m), t->n_dense * sizeof(float), e);
        if (!rc) rc = to_host(t, t->h_rows + t->h_n, rows, n * sizeof(int64_t), e);
        if (!rc) rc = to_host(t, t->h_sgrads + t->h_n * D, grads, n * D * sizeof(float), e);
        if (!rc)
            for (size_t i = 0; i < t->n_dense; i++) t->h_acc[i] += t->h_dense[i];
        t->h_n += n;
    }
    if (!rc) *ok = 1;
    return rc;
}

/* Forward + backward of the step's whole local batch, with the step's
 * sparse SGD fused into the backward where t->fuse: the touched rows' old
 * values go to d_sg_in, a non-finite sum sets d_found, and the list stays
 * for the norm when it is wanted. t->fused_step = 1 when the backward
 * applied it (a failed backward ends before the fused update, its last op). */
static int fwd_bwd_fused(struct trainer *t, struct host_batch *b, const struct step_info *si, float gscale,
                         const struct step_ctx *sc, struct model_loss *l, plumb_err *me)
{
    t->fused_step = 0;
    int rc = PLUMB_OK;
    if (t->fuse) {
        rc = t->mo->fuse_sparse_sgd(t->m, (float)si->lr, want_norm(t), t->d_sg_in, t->d_found, me);
        if (rc == PLUMB_EUNSUPPORTED) {
            t->fuse = 0;
            memset(me, 0, sizeof *me);
            rc = PLUMB_OK;
        } else if (!rc) {
            t->fused_step = 1;
        }
    }
    if (!rc) rc = fwd_bwd(t, b, 1, 0, 0, gscale, sc, l, me);
    if (rc) t->fused_step = 0;
    else if (t->fused_step) t->fused_total++;
    return rc;
}

/* Phase 1 of a queued step: forward/backward with the loss and the row
 * count left on the device, the found-inf check and the norm queued behind
 * it; nothing read back. */
static int fast_queue(struct trainer *t, struct host_batch *b, struct step_info *si, plumb_err *e)
{
    struct dev *d = t->d;
    size_t D = (size_t)t->D, cap = (size_t)(t->sparse_cap > 0 ? t->sparse_cap : 0);
    float inv = (float)(1.0 / si->scale);
    double gscale = si->scale / (double)b->st.global_valid;
    float *grads = t->mo->grads(t->m);
    double t0 = timer_now();
    t->launched = 0;
    t->h_n = 0;
    t->have_ss = 0;
    if (t->n_q >= 2) return err_set(e, PLUMB_EINTERNAL, "queued step: two steps already in flight");
    int rc = model_defer(t, 1, e);
    if (!rc) rc = d->be->memset_async(d, NULL, t->d_scratch, 0, SCR_BYTES, e);
    if (rc) return rc;
    struct step_ctx sc = {.ctx = t, .comm = &t->mcomm};
    plumb_err me = {0};
    int mrc = fwd_bwd_fused(t, b, si, (float)gscale, &sc, NULL, &me);
    si->compute_s = timer_now() - t0;
    const int fused = t->fused_step;
    if (mrc) {
        flag_model_failure(t, si, mrc, &me);
        return PLUMB_OK;
    }
    t->mo->sparse_grads(t->m, &t->l_rows, &t->l_grads, &t->l_n);
    /* fused: the sparse rows are applied already (the optimizer has no list
     * to apply) and the backward checked their sums; the list stays for the norm */
    size_t nmax = fused ? 0 : cap;
    t->s_rows = t->l_rows, t->s_grads = t->l_grads, t->s_n = nmax;
    /* the flag off the norm (norm_flags) covers the list's rows too: over
     * cap rows, a superset of scale_check_dn's nmax (0 when fused, whose
     * backward checked the rows it applied) */
    const int of_norm = norm_flags(t, inv);
    if (!of_norm) {
        rc = t->to->scale_check(d, NULL, grads, t->n_dense, inv, t->d_found, e);
        if (!rc && nmax) rc = t->to->scale_check_dn(d, NULL, t->l_grads, t->q_rows_n, D, nmax, inv, t->d_found, e);
    }
    if (!rc && want_norm(t)) {
        rc = t->to->sumsq(d, NULL, grads, t->n_dense, t->d_sumsq, e);
        if (!rc && cap) rc = t->to->sumsq_dn(d, NULL, t->l_grads, t->q_rows_n, D, cap, t->d_sumsq, e);
        if (!rc && of_norm) rc = t->to->found_of_sumsq(d, NULL, t->d_sumsq, t->d_found, e);
        t->have_ss = 1;
    }
    /* a non-finite step (the gate below skips the dense update) leaves the table as it was */
    if (!rc && fused) rc = fused_undo(t, t->l_rows, t->q_rows_n, t->d_found, e);
    si->queued = t->have_ss ? 2 : 1; /* 2: the norm is in the status block */
    si->compute_s = timer_now() - t0;
    return rc;
}

/* The queued step's update, gated on the device by its found-inf flag. */
static int queue_apply(struct trainer *t, struct step_info *si, plumb_err *e)
{
    double t0 = timer_now();
    int rc = optim_step_gated(&t->opt, t->mo->params(t->m), t->mo->grads(t->m), t->s_rows, t->s_grads, t->q_rows_n,
                              t->s_n, (float)si->lr, t->d_found, e);
    if (rc) return err_wrap(e, "optimizer step %ld", t->step);
    si->opt_s = timer_now() - t0;
    return PLUMB_OK;
}

/* The deferred model's loss pair and the status block into the pinned slot
 * o, queued on the stream: one device-side write of both (the slot is
 * contiguous: loss, then the block) where the device has it, else two
 * copies; same bytes */
static int outcome_to(struct trainer *t, struct step_out *o, plumb_err *e)
{
    struct dev *d = t->d;
    if (t->status_write)
        return t->to->status_to_host(d, NULL, o, t->q_loss_dev, sizeof o->loss, t->d_scratch, SCR_BYTES, e);
    int rc = d->be->memcpy_async(d, NULL, o->loss, t->q_loss_dev, sizeof o->loss, MEMCPY_D2H, e);
    if (!rc) rc = d->be->memcpy_async(d, NULL, o->scratch, t->d_scratch, SCR_BYTES, MEMCPY_D2H, e);
    return rc;
}

/* The queued step's outcome into its pinned slot, behind an event. */
static int queue_finish(struct trainer *t, const struct step_info *si, long step, plumb_err *e)
{
    struct dev *d = t->d;
    int slot = (int)(t->q_seq & 1);
    int rc = outcome_to(t, &t->h_out[slot], e);
    if (!rc) rc = d->be->event_record(d, t->q_ev[slot], NULL, e);
    if (rc) return rc;
    t->q[t->n_q].si = *si;
    t->q[t->n_q].step = step;
    t->q[t->n_q].slot = slot;
    t->n_q++;
    t->q_seq++;
    return PLUMB_OK;
}

/* Reads the oldest queued step's outcome (waiting for its event) and takes
 * the host's part of its decisions as trainer_step takes them for a step
 * that was not queued: the loss, the norm, the non-finite skip (the gate
 * skipped the update on the device) and the scaler's count. *si gets the
 * complete step, *step its number. */
static int settle_one(struct trainer *t, struct step_info *si, long *step, plumb_err *e)
{
    if (t->n_q < 1) return err_set(e, PLUMB_EINTERNAL, "queued step: nothing to settle");
    struct queued q = t->q[0];
    t->q[0] = t->q[1];
    t->n_q--;
    *si = q.si;
    *step = q.step;
    int rc = t->d->be->event_sync(t->d, t->q_ev[q.slot], e);
    if (rc) return err_wrap(e, "step %ld", q.step);
    const struct step_out *o = &t->h_out[q.slot];
    struct scratch_host sh;
    scratch_of(o->scratch, &sh);
    /* 1 rank: the agreed loss is this rank's, in the same fixed point */
    int64_t loss_fix = loss_fixed(o->loss[0] / t->q_div, si->flags), count = (int64_t)(o->loss[1] / t->q_div);
    si->loss = mean_loss(loss_fix, count, si->flags);
    if (sh.found) si->flags[SF_NONFINITE] = 1;
    if (!si->flags[SF_NONFINITE]) {
        /* what step_apply computes (want_norm as when the step was queued) */
        si->grad_norm = si->queued == 2 ? sqrt(sh.sumsq) : NAN;
        if (si->queued == 2 && !isfinite(si->grad_norm)) si->flags[SF_NONFINITE] = 1;
    }
    int applied = scaler_update(&t->sc, si->flags[SF_NONFINITE] > 0);
    if (applied) t->opt_t++;
    si->skipped = !applied;
    si->queued = 0;
    if (si->skipped && t->rank == 0 && !t->cfg->quiet)
        log_warn("step %ld: non-finite gradients on %lld rank(s): step skipped, loss scale now %g", q.step,
                 (long long)si->flags[SF_NONFINITE], scaler_scale(&t->sc));
    return PLUMB_OK;
}

/* Waits for the queued steps and forgets them (a rollback overwrites what they did). */
static void queue_drop(struct trainer *t)
{
    for (int i = 0; i < t->n_q; i++) {
        plumb_err e = {0};
        (void)t->d->be->event_sync(t->d, t->q_ev[t->q[i].slot], &e);
    }
    t->n_q = 0;
}

/* Forgets the step graphs (their device addresses may go stale: an eval or
 * a restore can regrow a workspace the graphs point into). */
static void graphs_drop(struct trainer *t)
{
    for (int i = 0; i < GRAPHS; i++) {
        if (t->sg[i].g) t->d->be->graph_destroy(t->d, t->sg[i].g);
        memset(&t->sg[i], 0, sizeof t->sg[i]);
    }
}

/* What every step graph depends on: the batch's device buffers and shape,
 * which kind of graph (1 a queued step's, 2 a deferred synchronous step's)
 * and the workspaces' generation; words +1 and +2 are the kind's own. */
static void graph_key_base(const struct trainer *t, int kind, uint64_t *k)
{
    memset(k, 0, sizeof(uint64_t) * (MODEL_MAX_FIELDS + 5));
    for (int f = 0; f < t->fs.n_fields; f++) k[f] = (uint64_t)(uintptr_t)t->db.field[f];
    k[MODEL_MAX_FIELDS] = (uint64_t)t->db.B << 32 | (uint32_t)t->db.n_valid;
    k[MODEL_MAX_FIELDS + 3] = (uint64_t)kind; /* also marks a used slot */
    k[MODEL_MAX_FIELDS + 4] = t->d->ws_gen;
}

/* What a queued step's graph depends on besides: the scalars baked into the
 * launches (lr, gradient scale) and the path taken. */
static void graph_key(const struct trainer *t, const struct host_batch *b, const struct step_info *si, uint64_t *k)
{
    graph_key_base(t, 1, k);
    float lr = (float)si->lr, gs = (float)(si->scale / (double)b->st.global_valid);
    uint32_t lb, gb;
    memcpy(&lb, &lr, 4);
    memcpy(&gb, &gs, 4);
    k[MODEL_MAX_FIELDS + 1] = (uint64_t)lb << 32 | gb;
    k[MODEL_MAX_FIELDS + 2] = (uint64_t)want_norm(t) << 1 | (uint64_t)(t->fuse != 0);
}

/* The key of a deferred synchronous step's graph (forward/backward and the
 * checks, no optimizer): besides the base, the gradient scale and the loss
 * scale's inverse, and the norm. */
static void graph_key_sync(const struct trainer *t, const struct host_batch *b, const struct step_info *si,
                           uint64_t *k)
{
    graph_key_base(t, 2, k);
    float inv = (float)(1.0 / si->scale), gs = (float)(si->scale / (double)b->st.global_valid);
    uint32_t ib, gb;
    memcpy(&ib, &inv, 4);
    memcpy(&gb, &gs, 4);
    k[MODEL_MAX_FIELDS + 1] = (uint64_t)ib << 32 | gb;
    k[MODEL_MAX_FIELDS + 2] = (uint64_t)want_norm(t);
}

/* The slot of key: found (*seen = 1), or the least recently used one,
 * emptied and taken for key (*seen = 0). More keys in turn than slots (more
 * feed buffers x shapes than GRAPHS, say a large --prefetch) would capture
 * a graph every step and never replay one: after GRAPHS evictions of a
 * graph replayed at most once the run goes on without graphs (logged). A
 * graph that served its key and was left behind (the loss scale or the
 * learning rate moved on) is ordinary turnover and does not count. */
static struct step_graph *graph_slot(struct trainer *t, const uint64_t *key, int *seen)
{
    struct step_graph *g = NULL, *lru = &t->sg[0];
    for (int i = 0; i < GRAPHS; i++) {
        if (!memcmp(t->sg[i].key, key, sizeof t->sg[i].key)) g = &t->sg[i];
        if (t->sg[i].used < lru->used) lru = &t->sg[i];
    }
    *seen = g != NULL;
    if (!g) {
        if (lru->g && lru->replays < 2 && ++t->evicted > GRAPHS && (t->graph_on || t->graph_sync)) {
            if (t->rank == 0)
                log_warn("graph: more batch buffers and shapes in turn than the %d graph slots (%ld captured graphs "
                         "dropped); graphs off for this run",
                         GRAPHS, t->evicted);
            t->graph_on = t->graph_sync = 0;
        }
        if (lru->g) t->d->be->graph_destroy(t->d, lru->g);
        memset(lru, 0, sizeof *lru);
        memcpy(lru->key, key, sizeof lru->key);
        g = lru;
    }
    g->used = ++t->sg_clock;
    return g;
}

/* A queued step (fast_queue, then queue_apply) as a graph where it can be:
 * the first step with a key runs op by op (it also settles workspace sizes
 * and cached allocations), the second is captured, later ones replay it. A
 * capture that fails turns graphs off for the run (logged) and the step
 * runs op by op. A partial last batch is another key: op by op the first
 * time it is seen. */
static int queue_local(struct trainer *t, struct host_batch *b, struct step_info *si, plumb_err *e)
{
    if (!t->graph_on || !t->use_feed) return fast_queue(t, b, si, e);
    struct dev *d = t->d;
    uint64_t key[MODEL_MAX_FIELDS + 5];
    graph_key(t, b, si, key);
    int seen;
    struct step_graph *g = graph_slot(t, key, &seen);
    if (!seen) return fast_queue(t, b, si, e); /* seen once: op by op, remembered */
    if (!g->g) {
        int rc = d->be->graph_begin(d, NULL, e);
        if (rc) return rc;
        plumb_err ce = {0};
        int qrc = fast_queue(t, b, si, &ce);
        if (!qrc && si->queued && !si->flags[SF_OOM] && !si->flags[SF_ERROR]) qrc = queue_apply(t, si, &ce);
        plumb_err ge = {0};
        int grc = d->be->graph_end(d, NULL, &g->g, &ge);
        if (qrc || grc || !si->queued) {
            /* nothing of the captured work ran: turn graphs off and run the step op by op */
            if (t->rank == 0)
                log_warn("graph: capture of step %ld failed (%s); graphs off for this run", b->st.step,
                         qrc ? ce.msg : grc ? ge.msg : "the step did not queue");
            if (g->g) d->be->graph_destroy(d, g->g);
            g->g = NULL;
            t->graph_on = 0;
            graphs_drop(t);
            struct step_info keep = *si;
            memset(si, 0, sizeof *si);
            si->lr = keep.lr, si->scale = keep.scale;
            return fast_queue(t, b, si, e);
        }
        t->captures++;
        g->fused = t->fused_step;
        g->ph_valid = t->ph_valid;
    } else {
        /* the host state a capture leaves (the sparse list's pointers) is the same every replay */
        si->queued = want_norm(t) ? 2 : 1;
        t->have_ss = want_norm(t);
        t->fused_step = g->fused;
        if (g->fused) t->fused_total++;
        t->ph_valid = g->ph_valid;
    }
    double t0 = timer_now();
    int rc = d->be->graph_launch(d, g->g, NULL, e);
    si->compute_s = timer_now() - t0;
    if (rc) return rc;
    g->replays++;
    si->graphed = 1;
    t->graphed++;
    return PLUMB_OK;
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
    float *grads = t->mo->grads(t->m);
    double t0 = timer_now();
    t->launched = 0;
    t->l_n = 0;
    t->h_n = 0;
    t->have_ss = 0;
    int ok = 0;
    int rc = d->be->memset_async(d, NULL, t->d_scratch, 0, SCR_BYTES, e);
    if (!rc && (!skip || t->whole) && (b->n > 0 || t->whole) && k == 1) {
        /* one pass over the local batch */
        struct model_loss l;
        plumb_err me = {0};
        struct step_ctx sc = {.ctx = t, .grad_ready = t->exch ? grad_ready : NULL, .comm = &t->mcomm};
        /* the sparse rows' SGD inside the backward (--fuse-sparse-sgd) */
        int mrc = fwd_bwd_fused(t, b, si, (float)gscale, &sc, &l, &me);
        if (mrc) {
            flag_model_failure(t, si, mrc, &me);
        } else {
            *loss_fix += loss_fixed(l.sum, si->flags);
            *count += l.count;
            t->mo->sparse_grads(t->m, &t->l_rows, &t->l_grads, &t->l_n);
            ok = 1;
            if (!t->exch) {
                /* unscale + inf check of the local gradients, on the device
                 * (fused: the backward checked the sparse sums) */
                rc = t->to->scale_check(d, NULL, grads, t->n_dense, inv, t->d_found, e);
                if (!rc && !t->fused_step)
                    rc = t->to->scale_check(d, NULL, t->l_grads, t->l_n * D, inv, t->d_found, e);
            }
        }
    } else if (!rc && !skip && b->n > 0) {
        rc = split_accumulate(t, b, si, k, gscale, loss_fix, count, &ok, e);
        if (!rc && ok) {
            /* the sums back to the device: dense into the model's grads, the list into d_rows/d_sg */
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
    if (t->exch) {
        /* every rank enqueues every bucket, also after a local failure (the
         * status word then discards the step): no rank waits alone */
        double t1 = timer_now();
        rc = launch_upto(t, t->nb - 1, NULL, e);
        if (!rc) rc = comm_wait(t->dc, "allreduce grads", e);
        si->comm_s += timer_now() - t1;
        return rc;
    }
    if (!ok) return PLUMB_OK;
    {
        /* 1 rank: the list for the optimizer; the norm and the found flag in one read */
        t->s_rows = t->l_rows, t->s_grads = t->l_grads, t->s_n = t->l_n;
        if (k > 1 && t->D > 0) {
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
        /* fused: the list was for the norm; the optimizer has none to apply */
        if (t->fused_step) t->s_n = 0;
        struct scratch_host sh;
        if ((rc = read_scratch(t, &sh, e))) return rc;
        t->ss = sh.sumsq;
        if (sh.found) si->flags[SF_NONFINITE] = 1;
        si->compute_s = timer_now() - t0; /* the gradient checks and the norm count as compute */
        return PLUMB_OK;
    }
}

/* The deferred synchronous step's device work (see "the deferred
 * synchronous step"): forward/backward with the loss left on the device,
 * the found-inf check, the norm when wanted. *mrc: the model's own failure
 * (OOM and the like, message in *me); the return: the engine's. */
static int deferred_body(struct trainer *t, struct host_batch *b, float gscale, float inv, int norm, int *mrc,
                         plumb_err *me, plumb_err *e)
{
    struct dev *d = t->d;
    float *grads = t->mo->grads(t->m);
    int rc = d->be->memset_async(d, NULL, t->d_scratch, 0, SCR_BYTES, e);
    if (rc) return rc;
    struct step_ctx sc = {.ctx = t, .comm = &t->mcomm};
    *mrc = fwd_bwd(t, b, 1, 0, 0, gscale, &sc, NULL, me);
    if (*mrc) return PLUMB_OK;
    const int of_norm = norm && norm_flags(t, inv);
    if (!of_norm) rc = t->to->scale_check(d, NULL, grads, t->n_dense, inv, t->d_found, e);
    if (!rc && norm) rc = t->to->sumsq(d, NULL, grads, t->n_dense, t->d_sumsq, e);
    if (!rc && of_norm) rc = t->to->found_of_sumsq(d, NULL, t->d_sumsq, t->d_found, e);
    return rc;
}

/* deferred_body as a graph where it can be, as queue_local does for a
 * queued step: op by op the first time a key is seen, captured the second,
 * replayed after; a failed capture turns graphs off for the run (logged)
 * and the step runs op by op. */
static int deferred_graphed(struct trainer *t, struct host_batch *b, const struct step_info *si, float gscale,
                            float inv, int norm, int *mrc, plumb_err *me, plumb_err *e)
{
    struct dev *d = t->d;
    uint64_t key[MODEL_MAX_FIELDS + 5];
    graph_key_sync(t, b, si, key);
    int seen;
    struct step_graph *g = graph_slot(t, key, &seen);
    if (!seen) return deferred_body(t, b, gscale, inv, norm, mrc, me, e);
    if (!g->g) {
        int rc = d->be->graph_begin(d, NULL, e);
        if (rc) return rc;
        plumb_err ce = {0}, ge = {0};
        int brc = deferred_body(t, b, gscale, inv, norm, mrc, me, &ce);
        int grc = d->be->graph_end(d, NULL, &g->g, &ge);
        if (brc || *mrc || grc) {
            /* nothing of the captured work ran */
            if (t->rank == 0)
                log_warn("graph: capture of the forward/backward of step %ld failed (%s); graphs off for this run",
                         b->st.step, brc ? ce.msg : *mrc ? me->msg : ge.msg);
            if (g->g) d->be->graph_destroy(d, g->g);
            g->g = NULL;
            t->graph_sync = 0;
            graphs_drop(t);
            *mrc = 0;
            memset(me, 0, sizeof *me);
            return deferred_body(t, b, gscale, inv, norm, mrc, me, e);
        }
        t->captures++;
        g->ph_valid = t->ph_valid;
    } else {
        t->ph_valid = g->ph_valid;
    }
    int rc = d->be->graph_launch(d, g->g, NULL, e);
    if (!rc) t->graphed++, g->replays++;
    return rc;
}

/* Phase 1, fast numerics, the deferred synchronous step: one read of the
 * status block and the loss pair after the device work; the same outcome
 * as fast_local's one pass over the local batch. */
static int fast_local_deferred(struct trainer *t, struct host_batch *b, struct step_info *si, int64_t *loss_fix,
                               int64_t *count, plumb_err *e)
{
    const float inv = (float)(1.0 / si->scale), gscale = (float)(si->scale / (double)b->st.global_valid);
    const int norm = want_norm(t);
    double t0 = timer_now();
    t->launched = 0;
    t->l_n = 0, t->h_n = 0, t->s_n = 0;
    t->l_rows = NULL, t->l_grads = NULL, t->s_rows = NULL, t->s_grads = NULL;
    t->have_ss = 0;
    int mrc = 0;
    plumb_err me = {0};
    int rc = model_defer(t, 1, e);
    if (!rc)
        rc = t->graph_sync && t->use_feed ? deferred_graphed(t, b, si, gscale, inv, norm, &mrc, &me, e)
                                          : deferred_body(t, b, gscale, inv, norm, &mrc, &me, e);
    if (rc) return rc;
    if (mrc) {
        flag_model_failure(t, si, mrc, &me);
    } else {
        /* one read: the loss pair and the status block through the pinned slot */
        struct step_out *o = t->h_out;
        if ((rc = outcome_to(t, o, e)) || (rc = dev_sync(t->d, e))) return rc;
        struct scratch_host sh;
        scratch_of(o->scratch, &sh);
        /* the model's synchronous contract: {sum, count} = the pair / div */
        *loss_fix += loss_fixed(o->loss[0] / t->q_div, si->flags);
        *count += (int64_t)(o->loss[1] / t->q_div);
        t->ss = sh.sumsq;
        t->have_ss = norm;
        if (sh.found) si->flags[SF_NONFINITE] = 1;
        t->deferred++;
    }
    si->compute_s = timer_now() - t0; /* the gradient checks and the norm count as compute */
    return PLUMB_OK;
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
    t->fused_step = 0;
    t->ph_valid = 0; /* until a whole forward_backward or a graph of one sets it */
    double t0 = timer_now();
    int skip = 0;
    if (t->oom_inject_left > 0) {
        /* injected allocation failure (drills): as if forward_backward said ENOMEM */
        t->oom_inject_left--;
        si->flags[SF_OOM] = 1;
        skip = 1;
    }
    int rc = PLUMB_OK;
    if (cfg->numerics == NUMERICS_GOLDEN) {
        /* a whole-batch model still runs: its collectives must match the other ranks' */
        if (skip && !t->whole) return PLUMB_OK;
        memset(t->q_dense, 0, t->n_dense * sizeof(int64_t));
        t->q_n = 0;
        t->q_mul = ldexp(1.0, FIX_BITS) / si->scale;
        if (t->whole) {
            /* the model takes the local batch whole and folds shard by shard */
            struct batch mb;
            host_batch_view(&t->fs, b, 0, b->n, &mb);
            mb.global_valid = b->st.global_valid;
            mb.nshards = b->st.nshards;
            mb.shard_valid = b->shard_valid;
            t->g_flags = si->flags, t->g_loss_fix = loss_fix, t->g_count = count;
            struct step_ctx sc = {.ctx = t, .fold_shard = golden_fold, .comm = &t->mcomm, .golden = 1};
            plumb_err me = {0};
            int mrc = t->mo->forward_backward(t->m, &mb, (float)gscale, &sc, NULL, &me);
            if (mrc == PLUMB_ENOMEM) {
                si->flags[SF_OOM] = 1;
            } else if (mrc == PLUMB_EINTERNAL && t->g_engine_err) {
                rc = mrc, *e = me; /* the engine's own failure inside fold_shard */
            } else if (mrc) {
                si->flags[SF_ERROR] = 1;
                t->local_err = me;
            }
            t->g_engine_err = 0;
        } else {
            long off = 0;
            for (int j = 0; j < b->st.nshards && !rc; j++) {
                int cnt = b->shard_valid[j];
                if (cnt <= 0) continue;
                struct batch mb;
                host_batch_view(&t->fs, b, off, cnt, &mb);
                mb.global_valid = b->st.global_valid;
                struct model_loss l;
                plumb_err me = {0};
                int mrc = t->mo->forward_backward(t->m, &mb, (float)gscale, NULL, &l, &me);
                if (mrc == PLUMB_ENOMEM) {
                    si->flags[SF_OOM] = 1;
                    break;
                }
                if (mrc) {
                    si->flags[SF_ERROR] = 1;
                    t->local_err = me;
                    break;
                }
                *loss_fix += loss_fixed(l.sum, si->flags);
                *count += l.count;
                rc = golden_accumulate(t, si->flags, e);
                if (si->flags[SF_NONFINITE]) break;
                off += cnt;
            }
        }
        si->compute_s = timer_now() - t0;
    } else if (t->queue && t->split <= 1 && !skip && b->n > 0) {
        rc = queue_local(t, b, si, e); /* the loss stays on the device: agreed as 0 (1 rank) */
    } else if (t->sync_defer && t->split <= 1 && !skip && b->n > 0) {
        rc = fast_local_deferred(t, b, si, loss_fix, count, e);
    } else {
        if (!(rc = model_defer(t, 0, e))) rc = fast_local(t, b, si, skip, loss_fix, count, e);
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
    if (g_stop || t->metrics_err.code) v[SF_STOP] = 1;
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

/* Fast numerics with an exchange, after the dense all-reduce (phase 1): the sparse lists
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
            rc = comm_allgather(t->dc, snd, blk, rcv, "allgather sparse grads", e);
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
    float *grads = t->mo->grads(t->m);
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

/* Phase 3a: gradients of all ranks, unscaled, into the model's grads and the
 * device sparse list t->s_rows/s_grads/s_n (distinct rows, ascending). */
static int step_reduce(struct trainer *t, struct step_info *si, plumb_err *e)
{
    int rc;
    size_t D = (size_t)t->D;
    double t0 = timer_now();
    char what[64];
    if (t->cfg->numerics != NUMERICS_GOLDEN) {
        return t->exch ? device_reduce(t, si, e) : PLUMB_OK; /* 1 rank: nothing to exchange */
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
        if ((rc = to_dev(t, t->mo->grads(t->m), t->h_dense, t->n_dense * sizeof(float), e))) return rc;
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
            if (!rc) rc = t->to->sumsq(t->d, NULL, t->mo->grads(t->m), t->n_dense, t->d_sumsq, e);
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
        if ((rc = t->to->scale_check(t->d, NULL, t->mo->grads(t->m), t->n_dense, coef, t->d_found, e))) return rc;
        if ((rc = t->to->scale_check(t->d, NULL, (float *)t->s_grads, n_sparse * D, coef, t->d_found, e))) return rc;
    }
    rc = optim_step(&t->opt, t->mo->params(t->m), t->mo->grads(t->m), t->s_rows, t->s_grads, n_sparse, (float)si->lr,
                    t->opt_t + 1, e);
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
    t->logged = step_logged(t, b->st.step);
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
    /* buffers a forward updates (BatchNorm running statistics): a retried
     * step starts again from their values before its first attempt */
    float *bufs = t->mo->buffers(t->m);
    size_t nb = t->L->n_buffers * sizeof(float);
    if (bufs && nb && (rc = t->d->be->memcpy_async(t->d, NULL, t->buf_snap, bufs, nb, MEMCPY_D2D, e))) return rc;
    for (int attempt = 0;; attempt++) {
        memset(si->flags, 0, sizeof si->flags);
        if (attempt > 0 && bufs && nb &&
            (rc = t->d->be->memcpy_async(t->d, NULL, bufs, t->buf_snap, nb, MEMCPY_D2D, e)))
            return rc;
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
         * The limit depends only on the config, so every rank agrees. Not
         * for a model that couples the batch's samples (its statistics
         * would change with the split). */
        long local_max = t->cfg->batch / t->world;
        if (!t->whole && splits < SPLIT_TRIES && (long)t->split * 2 <= (local_max > 1 ? local_max : 1)) {
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
    if (si->queued) {
        /* the host's part waits for settle_one; the update is gated on the device */
        if (!si->graphed && !si->flags[SF_NONFINITE] && (rc = queue_apply(t, si, e))) return rc;
        /* flagged on the host (an injected fault; --inject turns graphs off, so
         * the update is still to apply): the fused rows put back too */
        if (si->flags[SF_NONFINITE] && (rc = fused_undo(t, t->l_rows, t->q_rows_n, NULL, e))) return rc;
        if ((rc = queue_finish(t, si, b->st.step, e))) return rc;
        t->step = b->st.step + 1;
        return PLUMB_OK;
    }
    si->loss = mean_loss(loss_fix, count, si->flags);
    if (!si->flags[SF_NONFINITE]) {
        if ((rc = step_reduce(t, si, e))) return rc;
        /* an exchange learns of non-finite sums only here (the same on every rank) */
        if (!si->flags[SF_NONFINITE] && (rc = step_apply(t, si, e))) return rc;
    }
    /* the scaler (all ranks decide the same: the flags are global) */
    int applied = scaler_update(&t->sc, si->flags[SF_NONFINITE] > 0);
    si->skipped = !applied;
    if (si->skipped && t->fused_step) {
        /* the fused rows put back (their count into the status block's slot for the op) */
        int64_t n = (int64_t)t->l_n;
        if ((rc = to_dev(t, t->d_n, &n, sizeof n, e)) || (rc = fused_undo(t, t->l_rows, t->d_n, NULL, e))) return rc;
    }
    /* GradScaler's recovery: an overflow at a scale above 1 backs the scale
     * off; only a non-finite step at a scale that no longer amplifies the
     * gradients (<= 1, or no dynamic scaling) counts toward --max-bad-steps */
    si->backoff = si->skipped && t->sc.enabled && si->scale > 1.0;
    if (si->skipped && t->rank == 0 && !t->cfg->quiet)
        log_warn("step %ld: non-finite gradients on %lld rank(s): step skipped, loss scale now %g%s", b->st.step,
                 (long long)si->flags[SF_NONFINITE], scaler_scale(&t->sc),
                 si->backoff ? " (loss scale backing off: not a bad step)" : "");
    t->step = b->st.step + 1;
    return PLUMB_OK;
}

/* --------------------------------------------------------------- metrics */

/* Every metrics.jsonl line goes through here: a failed write (a full disk)
 * is recorded, logged once and stops the run at the next step's status word
 * (with a checkpoint when --checkpoint-dir is set); no line is written after
 * it (the file would have a hole). */
static void metrics_put(struct trainer *t, const json_t *j)
{
    if (!t->metrics || !j) return;
    if (t->metrics_err.code) {
        t->metrics_failures++;
        return;
    }
    plumb_err me = {0};
    if (jsonx_append_line(t->metrics, j, &me) == PLUMB_OK) return;
    t->metrics_failures++;
    t->metrics_fail_step = t->step;
    err_set(&t->metrics_err, PLUMB_EIO, "%s/metrics.jsonl: %s at step %ld", t->cfg->out_dir ? t->cfg->out_dir : ".",
            me.msg, t->step);
    log_error("%s: the run stops%s", t->metrics_err.msg,
              t->cfg->ckpt_dir ? " after writing a checkpoint" : " (no --checkpoint-dir: no checkpoint)");
}

/* A step line. interval_steps / interval_samples_per_s: the steps since the
 * previous step line, this one included, and their throughput (with
 * --log-every N the line stands for them; 1 and samples_per_s otherwise). */
static void metrics_step(struct trainer *t, const struct step_info *si, long epoch, double step_s,
                         double wait_s, double sps, long iv_steps, double iv_sps)
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
    if (si->backoff) json_object_set_new(j, "backoff", json_true());
    json_object_set_new(j, "interval_steps", json_integer(iv_steps));
    json_object_set_new(j, "interval_samples_per_s", json_real(iv_sps));
    /* line by line (flushed), so a killed run leaves a readable file and watchers see progress */
    metrics_put(t, j);
    json_decref(j);
}

/* Health samples taken since the last step, one line each (type "health"). */
static void metrics_health(struct trainer *t)
{
    json_t *lines = health_monitor_drain(t->cfg->health);
    size_t i;
    json_t *l;
    json_array_foreach(lines, i, l) {
        json_object_set_new(l, "step", json_integer(t->step));
        metrics_put(t, l);
    }
    json_decref(lines);
}

/* One "eval" line: the workload's metrics (null when undefined), the
 * sample count and the reference model's metrics (a teacher) when known. */
static void metrics_eval(struct trainer *t, const struct eval_metrics *r, const struct eval_metrics *ref)
{
    if (!t->metrics) return;
    json_t *j = json_pack("{s:s, s:I}", "type", "eval", "step", (json_int_t)t->step);
    for (int i = 0; i < r->n; i++)
        json_object_set_new(j, r->name[i], isfinite(r->value[i]) ? json_real(r->value[i]) : json_null());
    json_object_set_new(j, "count", json_integer(r->count));
    for (int i = 0; ref && i < ref->n; i++)
        if (isfinite(ref->value[i])) json_object_set_new(j, ref->name[i], json_real(ref->value[i]));
    metrics_put(t, j);
    json_decref(j);
}

/* "auc 0.7512  logloss 0.4983  accuracy 0.7701" */
static void metrics_line(const struct eval_metrics *r, char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < r->n && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%s %.4f", i ? "  " : "", r->name[i], r->value[i]);
}

/* ------------------------------------------------------------------ run */

/* The training data of steps [t->step, steps): the device feed (pinned
 * buffers built on host threads, H2D on a copy stream) or the host loader. */
static int data_start(struct trainer *t, struct loader **ld, struct devfeed **feed, plumb_err *e)
{
    const struct train_config *cfg = t->cfg;
    if (t->use_feed)
        return devfeed_start(t->d, &t->fs, SPLIT_TRAIN, &t->smp, t->rank, t->world, t->step, cfg->steps,
                             cfg->prefetch > 2 ? (int)cfg->prefetch : 2, t->feed_threads, feed, e);
    return loader_start(&t->fs, &t->smp, t->rank, t->world, t->step, cfg->steps, (int)cfg->prefetch, ld, e);
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
        metrics_put(t, j);
        json_decref(j);
    }
    return data_start(t, ld, feed, e);
}

/* trainer_run's tallies over the steps it records. */
struct run_state {
    long nrun, win, k;
    double loss_first, loss_last;
    long n_first, n_last;
    double wait_total, step_total, samples_total;
    int tty;
    double *ring;          /* [win] the losses of the last win steps recorded */
    long backoff_steps;    /* skips of the loss scaler backing off (not bad steps) */
    /* the steps since the last step line (--log-every): its interval fields */
    long iv_steps;
    double iv_samples, iv_time;
};

/* One finished step of trainer_run: metrics.jsonl, the non-finite run
 * (*back = 1: more than --max-bad-steps in a row, roll back), the loss
 * windows, the progress line. */
static int record_step(struct trainer *t, struct run_state *rs, const struct step_info *si,
                       const struct step_meta *mt, int *back, plumb_err *e)
{
    const struct train_config *cfg = t->cfg;
    (void)e;
    *back = 0;
    rs->wait_total += mt->wait_s;
    rs->step_total += mt->step_s;
    rs->samples_total += (double)mt->gv;
    double sps = mt->step_s > 0 ? (double)mt->gv / mt->step_s : 0;
    long now = t->step;
    t->step = mt->step + 1; /* the line names the step it describes */
    rs->iv_steps++;
    rs->iv_samples += (double)mt->gv;
    rs->iv_time += mt->step_s;
    if (step_logged(t, mt->step) || si->skipped || si->backoff) {
        metrics_step(t, si, mt->epoch, mt->step_s, mt->wait_s, sps, rs->iv_steps,
                     rs->iv_time > 0 ? rs->iv_samples / rs->iv_time : 0);
        rs->iv_steps = 0, rs->iv_samples = 0, rs->iv_time = 0;
    }
    t->step = now;
    if (cfg->health && t->metrics) metrics_health(t);
    /* non-finite steps in a row (not OOM or deliberate skips, nor the
     * dynamic scaler's back-off while its scale is still falling) */
    if (si->backoff) rs->backoff_steps++;
    else if (si->skipped && !si->oom_skipped && !si->deliberate) t->bad_run++;
    else t->bad_run = 0;
    if (cfg->max_bad_steps > 0 && t->bad_run > cfg->max_bad_steps) {
        t->step = mt->step + 1; /* where the eager step would stand */
        *back = 1;
        return PLUMB_OK;
    }
    if (isfinite(si->loss) && rs->k < rs->win) rs->loss_first += si->loss, rs->n_first++;
    /* the last window of the steps run (a run may stop early: --stop-at) */
    if (rs->ring) rs->ring[rs->k % rs->win] = si->loss;
    rs->k++;
    if (rs->tty)
        fprintf(stderr, "\rstep %ld/%ld  loss %.4f  lr %.3g  scale %g  %.0f samples/s  data wait %2.0f%%   ",
                mt->step + 1, cfg->steps, si->loss, si->lr, si->scale,
                rs->step_total > 0 ? rs->samples_total / rs->step_total : 0,
                rs->step_total > 0 ? 100 * rs->wait_total / rs->step_total : 0);
    return PLUMB_OK;
}

/* Settles and records queued steps until `keep` remain. */
static int settle_record(struct trainer *t, struct run_state *rs, int keep, int *back, plumb_err *e)
{
    *back = 0;
    while (t->n_q > keep) {
        struct step_meta mt = t->q[0].meta;
        struct step_info si;
        long step;
        int rc = settle_one(t, &si, &step, e);
        if (!rc) rc = record_step(t, rs, &si, &mt, back, e);
        if (rc || *back) return rc;
    }
    return PLUMB_OK;
}

int trainer_open(const struct train_config *cfg, struct comm *c, struct trainer **out, plumb_err *e)
{
    *out = NULL;
    struct trainer *t = calloc(1, sizeof *t);
    if (!t) return err_set(e, PLUMB_ENOMEM, "trainer: out of memory");
    t->cfg = cfg;
    t->c = c;
    t->rank = c->rank;
    t->world = c->world;
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
        trainer_close(t);
        return rc;
    }
    *out = t;
    return PLUMB_OK;
}

void trainer_close(struct trainer *t)
{
    if (!t) return;
    trainer_free(t);
    free(t);
}

const struct model_ops *trainer_model(struct trainer *t, struct model **m)
{
    *m = t->m;
    return t->mo;
}

void trainer_step_kinds(const struct trainer *t, long *fused, long *graphed)
{
    if (fused) *fused = t->fused_total;
    if (graphed) *graphed = t->graphed;
}

struct dev *trainer_dev(struct trainer *t) { return t->d; }

int trainer_phase_marks(struct trainer *t, int on, plumb_err *e)
{
    const struct dev_backend *be = t->d->be;
    on = on != 0;
    if (t->n_q > 0) /* a queued step may still replay a graph graphs_drop would free */
        return err_set(e, PLUMB_EUSAGE, "trainer_phase_marks: %d steps still queued", t->n_q);
    if (on && !be->event_mark)
        return err_set(e, PLUMB_EUNSUPPORTED, "%s: the device cannot mark times inside a graph (no event_mark)",
                       t->d->label);
    for (int i = 0; on && i < 3; i++) {
        int rc = t->ph[i] ? PLUMB_OK : be->event_create(t->d, &t->ph[i], e);
        if (rc) return rc;
    }
    if (on != t->ph_on) graphs_drop(t); /* the next captures have the marks, or lose them */
    t->ph_on = on;
    t->ph_valid = 0;
    return PLUMB_OK;
}

dev_event *trainer_phase_event(struct trainer *t, int i) { return i >= 0 && i < 3 ? t->ph[i] : NULL; }

int trainer_phase_ms(struct trainer *t, double *fwd_ms, double *bwd_ms, plumb_err *e)
{
    *fwd_ms = *bwd_ms = NAN;
    if (!t->ph_on || !t->ph_valid) return PLUMB_OK;
    float a, b;
    int rc = t->d->be->event_elapsed_ms(t->d, t->ph[0], t->ph[1], &a, e);
    if (!rc) rc = t->d->be->event_elapsed_ms(t->d, t->ph[1], t->ph[2], &b, e);
    if (!rc) *fwd_ms = a, *bwd_ms = b;
    return rc;
}
int trainer_digest(struct trainer *t, char hex[65], plumb_err *e)
{
    while (t->n_q > 0) {
        struct step_info si;
        long sn;
        int rc = settle_one(t, &si, &sn, e);
        if (rc) return rc;
    }
    return param_digest(t, hex, e);
}

/* The public view of one step. */
static void stats_of(const struct step_info *si, struct trainer_step_stats *st)
{
    if (!st) return;
    st->loss = si->loss, st->grad_norm = si->grad_norm, st->lr = si->lr, st->scale = si->scale;
    st->skipped = si->skipped;
    st->compute_s = si->compute_s, st->comm_s = si->comm_s, st->opt_s = si->opt_s;
}

int trainer_step_on(struct trainer *t, const struct batch *b, long step, long global_valid,
                    struct trainer_step_stats *st, plumb_err *e)
{
    struct host_batch hb;
    int shards[1024];
    memset(&hb, 0, sizeof hb);
    hb.st.step = step;
    hb.st.global_valid = global_valid;
    hb.st.local_valid = b->n_valid;
    hb.n = b->n_valid;
    hb.cap = b->B;
    if (b->on_device && t->cfg->numerics == NUMERICS_GOLDEN)
        return err_set(e, PLUMB_EUSAGE, "trainer_step_on: golden numerics sum micro-shards of a host batch (got a device batch)");
    if (b->on_device) {
        t->db = *b;
    } else {
        for (int k = 0; k < t->fs.n_fields; k++) hb.field[k] = b->field[k];
        /* golden: micro-shards of --micro-shard samples, in order */
        long M = t->cfg->micro_shard;
        int ns = 0;
        for (long off = 0; off < b->n_valid; off += M) {
            if (ns >= 1024) return err_set(e, PLUMB_EUSAGE, "trainer_step_on: more than 1024 micro-shards");
            shards[ns++] = (int)(b->n_valid - off < M ? b->n_valid - off : M);
        }
        hb.st.nshards = ns;
        hb.shard_valid = shards;
    }
    int feed = t->use_feed;
    t->use_feed = b->on_device;
    struct step_info si;
    int rc = trainer_step(t, &hb, &si, e);
    t->use_feed = feed;
    /* st: the caller reads the step's figures, so it is settled now (and
     * any before it); NULL: settled one step behind, as trainer_steps does */
    while (!rc && t->n_q > (st ? 0 : 1)) {
        long sn;
        rc = settle_one(t, &si, &sn, e);
    }
    stats_of(&si, st);
    return rc;
}

int trainer_steps(struct trainer *t, long start, long warm, long n, struct trainer_steps_time *tm, plumb_err *e)
{
    struct loader *ld = NULL;
    struct devfeed *feed = NULL;
    long end = t->cfg->steps;
    t->step = start;
    if (start + warm + n > end)
        return err_set(e, PLUMB_EUSAGE, "trainer_steps: [%ld, %ld) past --steps %ld", start, start + warm + n, end);
    int rc = data_start(t, &ld, &feed, e);
    double wait = 0, build = 0, t0 = timer_now();
    for (long i = 0; i < warm + n && !rc; i++) {
        if (i == warm) {
            /* the timed part starts once the warm-up steps have run */
            rc = dev_sync(t->d, e);
            t0 = timer_now();
            wait = build = 0;
            if (rc) break;
        }
        struct host_batch *b, fb;
        double w = 0;
        if (feed) {
            memset(&fb, 0, sizeof fb);
            rc = devfeed_next(feed, &t->db, NULL, &w, e);
            if (!rc && devfeed_step_info(feed, &fb.st)) rc = err_set(e, PLUMB_EINTERNAL, "device feed: no step taken");
            fb.n = t->db.n_valid;
            fb.cap = t->db.B;
            b = &fb;
        } else {
            rc = loader_next(ld, &b, &w, e);
            if (!rc && i >= warm) build += b->build_s;
        }
        if (rc) break;
        wait += w;
        struct step_info si;
        rc = trainer_step(t, b, &si, e);
        if (feed) devfeed_release(feed);
        else loader_release(ld, b);
        /* queued steps settled one behind, as trainer_run settles them */
        while (!rc && t->n_q > 1) {
            long sn;
            rc = settle_one(t, &si, &sn, e);
        }
    }
    while (!rc && t->n_q > 0) {
        struct step_info si;
        long sn;
        rc = settle_one(t, &si, &sn, e);
    }
    queue_drop(t);
    if (!rc) rc = dev_sync(t->d, e);
    double el = timer_now() - t0;
    if (feed) {
        double b0 = 0;
        devfeed_times(feed, &b0, NULL);
        build = b0 * (double)n / (double)(warm + n); /* the feed counts all its batches */
    }
    data_stop(&ld, &feed);
    if (tm) tm->wait_s = wait, tm->build_s = build, tm->elapsed_s = el;
    return rc;
}

int trainer_run(const struct train_config *cfg, struct comm *c, struct train_result *res, plumb_err *e)
{
    memset(res, 0, sizeof *res);
    res->first_loss = res->last_loss = NAN;
    double t_start = timer_now();
    struct trainer *t = NULL;
    int rc = trainer_open(cfg, c, &t, e);
    if (rc) return rc;
    snprintf(res->model_desc, sizeof res->model_desc, "%s", t->model_desc);
    snprintf(res->device, sizeof res->device, "%s", t->d->label);
    res->steps_target = cfg->steps;
    snprintf(res->data_desc, sizeof res->data_desc, "%s", t->di.desc);
    res->bad_lines_skipped = t->di.skipped;
    res->truncated_lines = t->di.truncated;

    if (t->rank == 0 && cfg->out_dir) {
        char path[4096];
        if (!(rc = file_mkdirs(cfg->out_dir, e)) && !(rc = file_join(path, sizeof path, cfg->out_dir, "metrics.jsonl", e))) {
            t->metrics = fopen(path, cfg->resume ? "a" : "w");
            if (!t->metrics) rc = err_set(e, PLUMB_EIO, "cannot write %s: %s", path, strerror(errno));
        }
    }
    if (!rc) rc = reference_eval(t, &res->reference, e);
    int found = 0;
    if (!rc && cfg->resume) rc = ckpt_restore(t, &found, e);
    if (!rc && cfg->resume && !found) {
        /* every rank learned the same (the image size was broadcast) */
        if (!cfg->resume_auto)
            rc = err_set(e, PLUMB_EUSAGE,
                         "--resume: no checkpoint in %s (--resume auto starts at step 0 when the directory holds none)",
                         cfg->ckpt_dir);
        else if (t->rank == 0 && !cfg->quiet)
            log_info("--resume auto: no checkpoint in %s; starting at step 0", cfg->ckpt_dir);
    }
    if (!rc && found && t->step > cfg->steps)
        /* it trained nothing and reported the checkpoint's model as a run of --steps */
        rc = err_set(e, PLUMB_EUSAGE,
                     "--steps %ld: the newest checkpoint in %s is at step %ld, past it (expected --steps %ld or more to "
                     "continue that run, or another --checkpoint-dir)", cfg->steps, cfg->ckpt_dir, t->step, t->step);
    res->start_step = t->step;
    t->first_step = t->step;
    if (!rc && t->rank == 0 && !cfg->quiet) {
        /* data without a reference model (file data: no teacher): nothing to print then */
        char teacher[48] = "";
        if (res->reference.n && isfinite(res->reference.value[0]))
            snprintf(teacher, sizeof teacher, "; %s %.4f", res->reference.name[0], res->reference.value[0]);
        log_info("%s %s [%s] on %s x%d ranks, %s, %s, %s; %s%s", t->wl->name, cfg->preset, res->model_desc,
                 t->d->label, t->world, cfg->numerics == NUMERICS_GOLDEN ? "golden" : "fast",
                 prec_name(cfg->precision), cfg->optimizer, t->di.desc, teacher);
    }
    if (rc) {
        trainer_close(t);
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

    /* --stop-at: the workload's deciding metric and its direction */
    double target = NAN;
    const char *tmetric = NULL;
    int thigher = 1;
    if (cfg->stop_at && *cfg->stop_at) {
        char *end;
        target = strtod(cfg->stop_at, &end);
        if (end == cfg->stop_at || *end || !isfinite(target)) {
            rc = err_set(e, PLUMB_EUSAGE, "--stop-at: '%s' (expected a number)", cfg->stop_at);
        } else if (!t->wl->accept || !t->wl->accept->metric) {
            rc = err_set(e, PLUMB_EUSAGE, "--stop-at: workload %s names no deciding metric", t->wl->name);
        } else if (cfg->eval_every <= 0) {
            rc = err_set(e, PLUMB_EUSAGE, "--stop-at needs --eval-every N (the evals that test it)");
        } else {
            tmetric = t->wl->accept->metric;
            thigher = t->wl->accept->higher_is_better;
        }
        if (rc) {
            trainer_close(t);
            return rc;
        }
    }
    res->setup_s = timer_now() - t_start;
    double t_loop = timer_now();
    struct loader *ld = NULL;
    struct devfeed *feed = NULL;
    if (t->step < cfg->steps) rc = data_start(t, &ld, &feed, e);
    struct run_state rs;
    memset(&rs, 0, sizeof rs);
    rs.nrun = cfg->steps - t->step;
    /* the summary's first and last loss average a tenth of the steps, at most 10000: the
     * ring held steps / 10 doubles (--steps 99999999999 was exit 3 "out of memory for
     * 9999999999 losses", --steps 1e9 took 800 MB) */
    rs.win = rs.nrun / 10 > 0 ? (rs.nrun / 10 < 10000 ? rs.nrun / 10 : 10000) : 1;
    rs.tty = cfg->progress && t->rank == 0 && isatty(2);
    rs.ring = malloc((size_t)rs.win * sizeof *rs.ring);
    if (!rs.ring) rc = err_set(e, PLUMB_ENOMEM, "trainer: out of memory for %ld losses", rs.win);
    int tty = rs.tty;
    struct eval_metrics last_eval;
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
        long gv = b->st.global_valid, epoch = b->st.epoch, sn = b->st.step;
        if (feed) devfeed_release(feed);
        else loader_release(ld, b);
        if (rc) break;
        struct step_meta mt = {sn, epoch, gv, timer_now() - ts, wait_s};
        int back = 0; /* a settled step rolled back */
        if (si.queued) {
            t->q[t->n_q - 1].meta = mt;
        } else {
            /* a step that was not queued: the queued ones before it first */
            if ((rc = settle_record(t, &rs, 0, &back, e)) || back) goto rolled;
            if ((rc = record_step(t, &rs, &si, &mt, &back, e)) || back) goto rolled;
        }
        /* one step behind: the queue holds at most this step */
        if ((rc = settle_record(t, &rs, 1, &back, e)) || back) goto rolled;
        /* a queued step's time runs to here, through the wait for the step
         * before it (the settle above): in steady state the device's step
         * time, not the host's enqueue time (which made samples/s overstate
         * throughput on the H200: BENCHMARKS.md, issue 18's section) */
        if (si.queued && t->n_q > 0) t->q[t->n_q - 1].meta.step_s = timer_now() - ts;
        int stop = si.flags[SF_STOP] > 0;
        int do_eval = cfg->eval_every > 0 && t->step % cfg->eval_every == 0 && t->step < cfg->steps;
        int do_ckpt = cfg->ckpt_dir && ((cfg->ckpt_every > 0 && t->step % cfg->ckpt_every == 0) || stop);
        if (do_eval || do_ckpt || stop || t->step >= cfg->steps) {
            /* decisions on the host: every queued step settled first */
            if ((rc = settle_record(t, &rs, 0, &back, e)) || back) goto rolled;
        }
        if (do_eval && !stop) {
            double te = timer_now();
            graphs_drop(t);
            if ((rc = run_eval(t, &last_eval, e))) break;
            res->eval_s += timer_now() - te;
            last_eval_step = t->step;
            metrics_eval(t, &last_eval, &res->reference);
            if (t->rank == 0 && !cfg->quiet) {
                char line[512];
                metrics_line(&last_eval, line, sizeof line);
                if (tty) fprintf(stderr, "\n");
                log_info("eval at step %ld: %s", t->step, line);
            }
            double v = tmetric ? eval_metric(&last_eval, tmetric) : NAN;
            if (tmetric && isfinite(v) && (thigher ? v >= target : v <= target)) {
                /* time to quality: every rank sees the same exact metrics, so all stop here */
                res->reached = 1;
                res->reached_step = t->step;
                res->reached_s = timer_now() - t_loop;
                res->reached_value = v;
                if (t->rank == 0 && !cfg->quiet)
                    log_info("--stop-at %s: %s %.5f %s %s at step %ld, %.0f samples, %.2f s (evals %.2f s of it)",
                             cfg->stop_at, tmetric, v, thigher ? ">=" : "<=", cfg->stop_at, t->step,
                             (double)t->step * (double)cfg->batch, res->reached_s, res->eval_s);
                if (do_ckpt && (rc = ckpt_save(t, res->ckpt_path, e))) break;
                break;
            }
        }
        if (do_ckpt && (rc = ckpt_save(t, res->ckpt_path, e))) break;
        if (stop) {
            res->interrupted = 1;
            res->overheat = cfg->health && cfg->stop_on_overheat && health_monitor_critical(cfg->health);
            int sig = g_stop;
            snprintf(res->stop_reason, sizeof res->stop_reason, "%s",
                     res->overheat ? "critical temperature"
                     : t->metrics_err.code ? "metrics.jsonl write failed"
                     : sig == SIGTERM ? "SIGTERM"
                     : sig == SIGINT ? "SIGINT"
                     : "a stop on another rank");
            if (res->overheat)
                log_error("critical GPU temperature at step %ld: %s", t->step,
                          cfg->ckpt_dir ? "checkpoint written, stopping (--on-overheat stop)"
                                        : "stopping without a checkpoint (no --checkpoint-dir)");
            if (t->rank == 0) {
                if (tty) fprintf(stderr, "\n");
                log_warn("stop requested (%s) at step %ld of %ld: %s", res->stop_reason, t->step, cfg->steps,
                         cfg->ckpt_dir ? "checkpoint written, exiting" : "no --checkpoint-dir, exiting without a checkpoint");
            }
            break;
        }
        continue;
    rolled:
        if (rc) break;
        /* more than --max-bad-steps non-finite steps in a row: the steps
         * queued behind the last one are dropped (the checkpoint overwrites
         * them), then back to the checkpoint */
        queue_drop(t);
        graphs_drop(t);
        rc = rollback(t, &ld, &feed, e);
    }
    if (!rc && t->n_q) {
        int back = 0;
        rc = settle_record(t, &rs, 0, &back, e);
    }
    queue_drop(t);
    for (long i = rs.k - rs.win > 0 ? rs.k - rs.win : 0; rs.ring && i < rs.k; i++)
        if (isfinite(rs.ring[i % rs.win])) rs.loss_last += rs.ring[i % rs.win], rs.n_last++;
    free(rs.ring);
    double loss_first = rs.loss_first, loss_last = rs.loss_last;
    long n_first = rs.n_first, n_last = rs.n_last;
    double wait_total = rs.wait_total, step_total = rs.step_total, samples_total = rs.samples_total;
    if (tty) fprintf(stderr, "\n");
    data_stop(&ld, &feed);
    if (cfg->watchdog_s > 0) watchdog_stop();
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGINT, &old_int, NULL);

    if (!rc && !res->interrupted && cfg->ckpt_dir && (cfg->ckpt_every <= 0 || t->step % cfg->ckpt_every != 0) &&
        t->step > res->start_step)
        rc = ckpt_save(t, res->ckpt_path, e);
    if (!rc && !res->interrupted) {
        int want = cfg->predictions && t->rank == 0 && t->wl->eval->write_predictions;
        if (last_eval_step == t->step && !cfg->predictions) {
            res->eval = last_eval;
        } else {
            double te = timer_now();
            rc = run_eval(t, &res->eval, e);
            if (!rc) metrics_eval(t, &res->eval, &res->reference);
            double v = !rc && tmetric ? eval_metric(&res->eval, tmetric) : NAN;
            if (!res->reached && isfinite(v) && (thigher ? v >= target : v <= target)) {
                /* the final eval is an eval of the run too */
                res->eval_s += timer_now() - te;
                res->reached = 1;
                res->reached_step = t->step;
                res->reached_s = timer_now() - t_loop;
                res->reached_value = v;
            }
        }
        res->has_eval = !rc;
        if (!rc && want) rc = t->wl->eval->write_predictions(t->acc, cfg->predictions, e);
    }
    if (!rc) rc = param_digest(t, res->param_digest, e);
    memcpy(res->config_hash, t->cfg_hash, sizeof res->config_hash);
    if (t->metrics_err.code)
        snprintf(res->metrics_error, sizeof res->metrics_error, "%s (%ld line%s not written)", t->metrics_err.msg,
                 t->metrics_failures, t->metrics_failures == 1 ? "" : "s");
    res->steps_done = t->step;
    res->skipped_steps = t->sc.skipped_total;
    res->backoff_steps = rs.backoff_steps;
    res->final_scale = scaler_scale(&t->sc);
    res->first_loss = n_first ? loss_first / (double)n_first : NAN;
    res->last_loss = n_last ? loss_last / (double)n_last : NAN;
    res->samples_per_s = step_total > 0 ? samples_total / step_total : 0;
    res->data_wait_frac = step_total > 0 ? wait_total / step_total : 0;
    res->wall_s = timer_now() - t_start;
    res->fused_steps = t->fused_total;
    snprintf(res->sparse_sgd, sizeof res->sparse_sgd, "%s", t->D <= 0 ? "none" : t->fused_total ? "fused" : "list");
    res->graphed_steps = t->graphed;
    res->deferred_steps = t->deferred;
    trainer_close(t);
    return rc;
}
