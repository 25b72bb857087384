/* The model interface: what a workload gives the trainer (train/trainer.h),
 * so one trainer runs every workload. A workload (src/models/<name>/) exports
 * one `struct workload`: its name, presets with their option defaults, extra
 * options, and three op tables:
 *   - model_ops: create on a device, init from a seed, the parameter layout
 *     (a named tensor list over ONE fp32 parameter buffer and ONE gradient
 *     buffer), forward_backward with the gradient contract below, predict;
 *   - data_ops:  open the data, sample counts per split, fill a batch of
 *     named fixed-width fields from global sample indices;
 *   - eval_ops:  accumulate predictions exactly, reduce across ranks exactly,
 *     report named metrics.
 * docs/ARCHITECTURE.md walks through adding one.
 *
 * ---- Batches ----
 * A batch is up to MODEL_MAX_FIELDS named fields, each [B, width] of one
 * dtype, row-major, sample b at field[k] + b * width * dtype_size. The data
 * source declares the fields (data_ops.fields); the loader, the device feed
 * and the trainer copy them without knowing what they mean. Samples
 * [n_valid, B) are masked padding (all bytes 0): the model must ignore them
 * and its indices there must be in range (0 is).
 *
 * ---- Parameters and gradients ----
 * params: [n_params] fp32 on the device, the tensors at their offsets (the
 * padding between them is 0). [0, n_dense) is the dense part, with a dense
 * gradient: grads [n_dense], the same offsets. [n_dense, n_params) is the
 * sparse region, rows of sparse_dim floats (embedding tables): its gradient
 * is a list (rows [U] int64 ascending distinct row numbers into the region,
 * grads [U, sparse_dim]), at most sparse_per_sample * B rows for a batch of
 * B samples. Buffers: [n_buffers] fp32 on the device that are not trained
 * (BatchNorm running statistics): checkpointed and part of the digest.
 *
 * ---- Gradient contract ----
 * forward_backward computes the gradient of
 *     grad_scale * sum_{b < n_valid} loss_b
 * and OVERWRITES grads and the sparse list with it (never accumulates).
 * loss (may be NULL) gets the unscaled sum of loss_b (double, ascending b)
 * and the count n_valid. The trainer picks grad_scale (loss scale / global
 * batch) and the reduction:
 *   - golden numerics: the global batch is cut into fixed micro-shards
 *     (train/sampler.h); the gradient of each shard is converted to 64-bit
 *     fixed point and summed exactly, so any rank count gives the bits of
 *     one rank. A model whose samples are independent (model_ops.whole_batch
 *     0) is called once per shard. A model that couples the samples of a
 *     batch (synchronised BatchNorm) sets whole_batch: it is called once
 *     with the whole local batch and its shard layout (batch.nshards,
 *     batch.shard_valid) and, for each non-empty shard j in order, leaves
 *     that shard's gradient contribution (the sum over its samples) in grads
 *     / the sparse list and calls step_ctx.fold_shard(ctx, j, loss_j);
 *     statistics that couple the shards come from step_ctx.comm (exact sums
 *     across ranks, so they do not depend on the rank count either);
 *   - fast numerics: one call over the rank's local batch, the gradients
 *     summed across ranks in fp32.
 * With golden numerics (dev_set_numerics) a call's result is bit-identical
 * on every device and thread count.
 *
 * Grad-ready hook (overlap of backward and all-reduce): step_ctx.grad_ready,
 * when not NULL, is called during backward each time the dense gradients of
 * bucket k (model_ops.grad_buckets, backward order) are complete on stream s
 * (NULL = the default stream); work enqueued on s after the call sees the
 * final values. A non-zero return ends the backward with that error. */
#ifndef PLUMB_MODEL_H
#define PLUMB_MODEL_H
#include <stddef.h>
#include <stdint.h>
#include "core/dtype.h"
#include "core/err.h"
#include "dev/dev.h"

struct train_config;

/* ---------------------------------------------------------------- batches */

#define MODEL_MAX_FIELDS 8

struct batch_field {
    char name[16];   /* "dense", "sparse", "label", "tokens"... */
    dtype_t dtype;
    int width;       /* elements per sample */
};

struct batch {
    int B;                          /* samples held, >= n_valid */
    int n_valid;                    /* the first n_valid count */
    int on_device;                  /* field pointers are device memory */
    /* training steps: valid samples of the GLOBAL batch (every rank's; the
     * sampler gives every rank this number without communication), the
     * count of statistics over the global batch (synchronised BatchNorm)
     * and the denominator of the trainer's grad_scale; 0 in eval batches */
    long global_valid;
    void *field[MODEL_MAX_FIELDS];  /* field k: [B, width_k] */
    /* golden, whole_batch models: the valid samples are nshards consecutive
     * micro-shards of shard_valid[j] samples (0 otherwise) */
    int nshards;
    const int *shard_valid;
};

/* ------------------------------------------------------------- parameters */

enum tensor_flag {
    TENSOR_DECAY = 1,   /* weight decay applies (AdamW: decoupled; SGD: L2) */
    TENSOR_SPARSE = 2,  /* lies in the sparse region: rows updated from the sparse list */
    TENSOR_BUFFER = 4,  /* a buffer (offset into the buffer array), not trained */
};

struct model_tensor {
    char name[64];   /* "bottom.0.weight", "emb.7", "layer1.0.downsample.1.running_mean"
                        (checkpoint sections are "p:" + name: train/ckpt.h) */
    size_t offset;   /* floats into params (or buffers for TENSOR_BUFFER) */
    size_t numel;
    int rows, cols;  /* shape as a matrix: a bias [1, out], a table [rows, D] */
    unsigned flags;  /* enum tensor_flag */
};

struct model_layout {
    size_t n_params;          /* floats in the parameter buffer */
    size_t n_dense;           /* floats with a dense gradient = the gradient buffer */
    int sparse_dim;           /* floats per row of the sparse region (0: none) */
    int sparse_per_sample;    /* sparse rows one sample can touch */
    size_t n_buffers;         /* floats of non-trainable buffers */
    int n_tensors;
    const struct model_tensor *tensors;
    int out_width;            /* floats per sample that predict writes */
};

/* ------------------------------------------------------------- step context */

/* Collectives a model may call inside forward/backward (synchronised
 * statistics), and eval reductions use; the trainer backs them with its
 * comm so models never include comm. Every rank must make the same calls
 * in the same order. */
struct model_comm {
    int rank, world;
    void *ctx;
    /* exact: host int64 element-wise sums across ranks, in place */
    int (*sum_i64)(void *ctx, int64_t *v, size_t n, const char *what, plumb_err *e);
    /* fast: device fp32 element-wise sums across ranks, in place, stream ordered on s */
    int (*sum_f32)(void *ctx, float *v, size_t n, dev_stream *s, const char *what, plumb_err *e);
    /* host bytes of every rank concatenated in rank order (malloc'ed *all) */
    int (*gather)(void *ctx, const void *buf, size_t bytes, void **all, size_t *total, const char *what,
                  plumb_err *e);
};

struct model_loss {
    double sum;      /* unscaled, ascending sample order */
    int64_t count;
};

/* What a deferred model leaves on the device (model_ops.defer). */
struct model_deferred {
    const double *loss;    /* device double [2]: {unscaled sum, count} x div */
    const int64_t *rows_n; /* device int64: the sparse list's length; NULL: no sparse list */
    double div;            /* >= 1 */
};

struct step_ctx {
    void *ctx;
    /* grad-ready hook, NULL: none (see above) */
    int (*grad_ready)(void *ctx, int k, size_t off, size_t len, dev_stream *s, plumb_err *e);
    /* whole_batch models under golden numerics: shard j's gradient is in
     * grads / the sparse list now, its unscaled loss in *l */
    int (*fold_shard)(void *ctx, int j, const struct model_loss *l, plumb_err *e);
    const struct model_comm *comm;
    int golden;      /* golden numerics (exact collectives: sum_i64) */
    /* NULL: none. Called once a forward_backward, when the forward is queued
     * and before the first backward op (a model whose loss is fused with the
     * gradient of its last layer calls it before that fused op). The trainer
     * marks the time there (dev.h's event_mark) for bench's forward /
     * backward split, which holds inside graph replays; a model that never
     * calls it leaves the split to the whole step. */
    int (*forward_done)(void *ctx, plumb_err *e);
};

/* ----------------------------------------------------------------- ops */

struct model;

struct model_ops {
    /* On d for batches of up to max_batch samples; spec from
     * workload.configure. Parameters uninitialised until init. */
    int (*create)(struct dev *d, const void *spec, int max_batch, dtype_t precision, struct model **out,
                  plumb_err *e);
    void (*free)(struct model *m);
    /* Initialise parameters and buffers from Philox(seed, RNG_INIT, ...). */
    int (*init)(struct model *m, uint64_t seed, plumb_err *e);
    const struct model_layout *(*layout)(const struct model *m);
    float *(*params)(struct model *m);   /* device [n_params] */
    float *(*grads)(struct model *m);    /* device [n_dense] */
    float *(*buffers)(struct model *m);  /* device [n_buffers], NULL when none */
    /* The gradient contract above; sc may be NULL (no hook, fast numerics). */
    int (*forward_backward)(struct model *m, const struct batch *b, float grad_scale, const struct step_ctx *sc,
                            struct model_loss *loss, plumb_err *e);
    /* The sparse list of the last forward_backward (device pointers). */
    void (*sparse_grads)(struct model *m, int64_t **rows, float **grads, size_t *n);
    /* The grad-ready buckets in backward order: off[k], len[k] in floats of
     * grads, descending, covering [0, n_dense) once; returns the count (<= max). */
    int (*grad_buckets)(const struct model *m, size_t *off, size_t *len, int max);
    /* Eval forward of the batch (host or device fields): out [B, out_width]
     * host floats; no gradient is touched. */
    int (*predict)(struct model *m, const struct batch *b, float *out, plumb_err *e);
    /* Optional (NULL: none): the sparse rows' plain SGD fused into the next
     * backward; bit-identical to forward_backward + sgd_sparse on the list.
     * The backward then leaves the sparse list empty, unless keep (the list
     * of rows and sums as unfused, for a norm) or prev (device [sparse cap,
     * D]: the touched rows' values before the update in list order, for an
     * exact undo of a skipped step; the rows stay in the list). found_inf
     * (device int, may be NULL) is set to 1 when a sum is inf or NaN.
     * PLUMB_EUNSUPPORTED when the device cannot. */
    int (*fuse_sparse_sgd)(struct model *m, float lr, int keep, float *prev, int *found_inf, plumb_err *e);
    /* Optional: a forward-only pass to the loss on a device batch (timing). */
    int (*forward)(struct model *m, const struct batch *b, plumb_err *e);
    /* Optional (NULL: 0): 1 when the model with this spec couples the samples
     * of a batch (see the gradient contract). Such a model is called on
     * every rank every step, also with no local samples (B = 0), so the
     * collectives inside match; the OOM split tier does not apply to it (an
     * injected OOM still runs it, then retries). A real allocation failure
     * inside it on one rank leaves the others in its collectives: the
     * watchdog ends the job. */
    int (*whole_batch)(const void *spec);
    /* Optional (NULL: none): the step that never waits for the host
     * (train/trainer.c, "the queued step", and the deferred synchronous
     * step that may be graphed). on = 1: the following forward_backward
     * calls (loss must be NULL) queue their work and return without
     * synchronising; the loss {unscaled sum, count}, each multiplied by
     * out->div, is left at out->loss (device double [2]) and, for a model
     * with a sparse list, the list's length U at out->rows_n (device int64,
     * U <= sparse_per_sample * B), while sparse_grads reports n = 0 (the list
     * is rows/grads [0, U)). A model without a sparse list sets rows_n NULL.
     * on = 0: back to the contract above. out is filled either way. The
     * same bits either way: loss[0] / div is the double the contract above
     * gives as the sum (one IEEE division: div 1, or the per-sample
     * positions a model averages over). */
    int (*defer)(struct model *m, int on, struct model_deferred *out, plumb_err *e);
    /* Optional (NULL: not checked): the parameters a model of this spec
     * holds, [n_params] floats, known before create allocates them, so the
     * trainer can say a configuration does not fit before trying. */
    size_t (*param_count)(const void *spec);
};

struct data_source;

/* Which split. */
enum { SPLIT_TRAIN = 0, SPLIT_EVAL = 1 };

struct data_info {
    char desc[512];
    long skipped, truncated;  /* malformed lines skipped, truncated last lines (file data) */
    int has_reference;        /* reference_outputs available (a teacher) */
};

struct data_ops {
    /* materialize: a hint that the samples are read many times or must keep
     * up with a GPU (build them into memory at open when the source can). */
    int (*open)(const struct train_config *cfg, const void *spec, int materialize, struct data_source **out,
                plumb_err *e);
    void (*free)(struct data_source *s);
    long (*count)(const struct data_source *s, int split);
    const struct batch_field *(*fields)(const struct data_source *s, int *n);
    /* Fills samples idx[0..count) of split into field[k] + i * width_k:
     * thread-safe (several build threads fill parts of one batch). epoch:
     * the sampler's epoch of the step (train split; 0 for eval), so an
     * augmentation can be a function of (seed, epoch, sample). A source
     * read from a file while training can fail (a mapped file that shrank:
     * core/mapguard.h): the error goes back through the loader or feed to
     * the trainer, which stops with it. */
    int (*fill)(const struct data_source *s, int split, long epoch, const uint32_t *idx, int count,
                void *const *field, plumb_err *e);
    void (*info)(const struct data_source *s, struct data_info *out);
    /* Optional: the outputs the data's own generating model gives samples
     * idx (the form predict writes), e.g. a synthetic teacher. */
    int (*reference_outputs)(const struct data_source *s, int split, const uint32_t *idx, int count, float *out,
                             plumb_err *e);
};

#define EVAL_MAX_METRICS 8
struct eval_metrics {
    int n;
    char name[EVAL_MAX_METRICS][24];
    double value[EVAL_MAX_METRICS];  /* NaN when undefined */
    long count;                      /* eval samples */
};

struct eval_acc;

struct eval_ops {
    /* Accumulator for this rank's share of the eval split (n_local samples,
     * a contiguous index range; rank order = index order). */
    int (*create)(const void *spec, long n_local, struct eval_acc **out, plumb_err *e);
    void (*free)(struct eval_acc *a);
    void (*reset)(struct eval_acc *a);
    /* The next n samples in index order: their host batch and predict's
     * outputs [n, out_width]. */
    int (*add)(struct eval_acc *a, const struct batch *host, const float *out, int n, plumb_err *e);
    /* Exact reduction over ranks: every rank gets the same metrics, on any
     * rank count. */
    int (*reduce)(struct eval_acc *a, const struct model_comm *c, struct eval_metrics *out, plumb_err *e);
    /* Optional: after reduce, rank 0 writes per-sample predictions. */
    int (*write_predictions)(struct eval_acc *a, const char *path, plumb_err *e);
    /* The metric reported for reference_outputs as "teacher_<name>" (NULL: none). */
    const char *reference_metric;
};

/* One option default of a preset: value of option `opt` ("--lr") when the
 * option was not given, optionally only when option `if_opt` has value
 * `if_val` ("--optimizer" "adamw"). */
struct preset_default {
    const char *opt, *value;
    const char *if_opt, *if_val;
};

struct train_preset {
    const char *name;
    const char *summary;
    const struct preset_default *defaults;  /* ends with {0} */
};

/* What a run of a preset must reach on the workload's own (synthetic) data
 * with at least min_steps steps: eval metric >= min (or <= max; NAN: that
 * side unchecked). plumb train's train-<workload> check fails below it. */
struct train_floor {
    const char *preset;
    const char *metric;
    double min, max;
    long min_steps;
};

struct train_option;

/* ---------------------------------------------------------------- accept */

/* How plumb accept trains and judges the workload: the train-<name> check
 * (accept/check_train.c), the parity check and the attribution ladder
 * (accept/seed_runs.c, docs/COMPARE.md). One literal per workload, next to
 * its struct workload, e.g. (figures illustrative):
 *
 *   static const struct preset_default gpt_accept_golden[] = {{"--steps", "40", NULL, NULL}, {0}};
 *   static const struct workload_accept gpt_accept = {
 *       .preset = "gpt-tiny", .golden = gpt_accept_golden,
 *       .metric = "val_loss", .label = "val loss", .higher_is_better = 0,
 *       .lower_is_better = "perplexity", .bound = 4.0, .spread_floor = 0.02,
 *       .margin = "0.5%", .cpu_run_s = 20,
 *   };
 *   ... .accept = &gpt_accept, in the struct workload.
 *
 * tests/test_accept.c checks every workload's literal (the metric names,
 * the overrides through the option table, the margin's grammar). */
struct workload_accept {
    const char *preset;                  /* the preset every accept run trains (the workload's smallest) */
    const struct preset_default *fast;   /* the fast runs' options on top of the preset's defaults (NULL, or
                                            ends with {0}); seed runs and ladder rungs then set their seed,
                                            numerics and precision, and --seed-steps its steps */
    const struct preset_default *golden; /* the golden run's options (--numerics golden implied) */
    const char *metric;                  /* the deciding eval metric (an eval_metrics name): "auc" */
    const char *label;                   /* how messages name it: "AUC" */
    int higher_is_better;                /* of metric: 1 for auc, top1; 0 for a loss */
    const char *lower_is_better;         /* the workload's OTHER eval metrics where lower is better, comma
                                            list ("logloss"); the rest are higher-is-better */
    double bound;                        /* the fast run's metric must reach it: at least bound when higher
                                            is better, at most when lower (a ceiling); 0: no bound */
    double spread_floor;                 /* the least tolerance of the device-vs-cpu seed-spread comparison
                                            (same units as metric) */
    const char *margin;                  /* parity margin, plumb compare --margin's grammar: "0.15%" (relative
                                            to A's mean), "0.01" (absolute), or per metric "val_loss=0.5%,1%";
                                            the seeds records carry it as their default margin */
    const char *precisions;              /* the compute precisions it trains in, comma list; NULL: fp32,bf16,fp16
                                            (the ladder leaves out the AMP rungs it lacks) */
    double cpu_run_s;                    /* seconds one fast run of the preset takes on a 2-core host,
                                            measured (the accept check trains it 2 + K times on a GPU host) */
    const char *not_standard;            /* NULL, or why plumb accept --standard leaves it out by default */
};

/* A generic option (train/options.c) a workload does not read, and what it
 * applies to instead: given, it is exit 2 naming it (train_option_set), not
 * ignored. */
struct unused_option {
    const char *opt; /* "--max-rows" */
    const char *why; /* "it reads ctr's Criteo TSV lines" */
};

struct workload {
    const char *name;     /* the name plumb train takes */
    const char *summary;
    const char *data_help;                /* what --data takes for this workload (help text); NULL: the
                                             table's generic line */
    const struct train_preset *presets;   /* ends with {0}; the first is the default */
    const struct train_option *options;   /* the workload's own options (values in
                                             train_config.wl_opt[slot]), ends with {0} */
    const struct train_floor *floors;     /* optional, ends with {0}: per preset */
    const struct unused_option *unused;   /* optional, ends with {0}: generic options it does not
                                             read (--predictions also when eval has no
                                             write_predictions) */
    /* The model's configuration from the train config (preset, workload
     * options); desc gets a one-line description of the model. */
    int (*configure)(const struct train_config *cfg, void **spec, char *desc, size_t n, plumb_err *e);
    void (*spec_free)(void *spec);
    const struct model_ops *model;
    const struct data_ops *data;
    const struct eval_ops *eval;
    const struct workload_accept *accept; /* NULL: plumb accept does not train it */
};

#endif
