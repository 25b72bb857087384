/* The training engine, one for every workload (the model interface is
 * train/model.h; docs/ARCHITECTURE.md and docs/TRAINING.md describe it):
 * data parallel over a comm (self or MPI), fast or golden numerics,
 * fp32/bf16/fp16 with dynamic loss scaling, checkpoints, exact evaluation.
 *
 * One step, on every rank (trainer.c):
 *   1. local:  forward/backward of this rank's part of the global batch
 *              (golden: micro-shard by micro-shard, each gradient converted to
 *              64-bit fixed point and added up; fast: one pass);
 *   2. agree:  one small all-reduce of the status word (non-finite, OOM,
 *              stop requested, error) and the loss (fixed point): every rank
 *              sees the same decision, so no rank enters a collective alone;
 *   3. commit: gradients reduced (golden: int64 sums, exact and
 *              order-free; fast: fp32 buckets), unscaled, found-inf checked,
 *              clipped by the global norm, optimizer step or skip.
 * Recovery tiers (OOM retry/split/skip, non-finite skip, rollback) hook in
 * between agree and commit on the status word (step_status below).
 * Fast numerics keep the gradients on the device (trainer.c, "the fast
 * gradient path"): 1 rank exchanges nothing; otherwise one path over the
 * gradients' device comm (comm/comm.h comm_open_device: NCCL/RCCL, or the
 * host comm serving the device, staged through pinned memory on a GPU):
 * the dense buckets are all-reduced during backward (the model's
 * grad-ready hook, before step 2: every rank enqueues every bucket) and the
 * sparse lists gathered and coalesced on the device, the found-inf check
 * taken on the global sums. */
#ifndef PLUMB_TRAINER_H
#define PLUMB_TRAINER_H
#include <stdint.h>
#include "comm/comm.h"
#include "core/dtype.h"
#include "core/err.h"
#include "dev/dev.h"
#include "train/model.h"

/* A run's whole description. Each field is bound to one option of
 * plumb train by the table in train/options.c (its default there, the
 * preset's in the workload's table); build configs through train/options.h
 * (train_config_defaults, train_option_set, train_config_finish), never by
 * setting fields after the fact, so every caller gets the same defaults. */
#define TRAIN_WL_OPTS 8
#define TRAIN_MAX_OPTS 96
struct train_config {
    const char *workload;      /* the workload's name (the table's key) */
    const char *preset;        /* one of the workload's presets */
    const char *wl_opt[TRAIN_WL_OPTS]; /* the workload's own options as validated text */
    const char *data;          /* "synthetic" or a data file */
    const char *eval_data;     /* optional eval file */
    double eval_fraction;      /* file data: held-out tail */
    long train_samples;        /* synthetic: epoch size */
    long eval_samples;         /* synthetic: eval split size */
    uint64_t data_seed;
    const char *bad_lines;     /* "error" | "skip" */
    long max_rows;
    long steps;                /* optimizer steps (batches) in total */
    long batch;                /* global batch */
    uint64_t seed;             /* model init and shuffling */
    double lr;
    long warmup;               /* linear warmup steps */
    const char *schedule;      /* after warmup: "constant" | "cosine" (to lr_min at --steps) | "step" */
    double lr_min;             /* cosine: the final learning rate */
    long lr_step_every;        /* step: multiply by lr_step_gamma every N steps after warmup */
    double lr_step_gamma;
    const char *optimizer;     /* "sgd" | "adamw" */
    double weight_decay;       /* on tensors flagged TENSOR_DECAY */
    double momentum;           /* SGD */
    double beta1, beta2, adam_eps; /* AdamW */
    long eval_every;           /* 0: only at the end */
    const char *stop_at;       /* NULL, or the value of the workload's accept metric that ends the run (time to quality) */
    long eval_batch;
    const char *ckpt_dir;      /* NULL: no checkpoints */
    long ckpt_every;           /* 0: only at the end / on a signal */
    long ckpt_keep;
    int resume;                /* continue from the newest valid checkpoint (--resume given) */
    const char *resume_mode;   /* --resume: "require" (alone) or "auto"; NULL: not given */
    int resume_auto;           /* --resume auto: no checkpoint at all starts at step 0 */
    const char *numerics_name; /* "fast" | "golden" -> numerics */
    const char *precision_name;/* "fp32" | "bf16" | "fp16" -> precision */
    enum numerics numerics;
    int allow_tf32;            /* fast fp32 GEMMs may use TF32 where the device has it (dev_set_numerics);
                                  default 0: strict fp32 */
    dtype_t precision;         /* DT_F32, DT_BF16, DT_F16 */
    long micro_shard;          /* samples per micro-shard */
    const char *loss_scale;    /* "auto" (dynamic for fp16), "dynamic", "off" */
    double ls_init, ls_growth, ls_backoff;
    long ls_interval;
    double clip_grad_norm;     /* 0: no clipping */
    const char *device;        /* "cpu", "cuda:0"... (local rank picks the ordinal when none) */
    int allow_cpu_fallback;    /* an unavailable GPU trains on the cpu (default: a usage error) */
    const char *fuse_sparse_sgd; /* "no" | "auto": the sparse rows' SGD inside the backward where allowed */
    const char *bind;          /* rank binding: "none" or "numa" (train/bind.h; applied by cmd_train) */
    const char *graph;         /* "on" | "off": the queued step as a CUDA/HIP graph (trainer.c, "the queued step") */
    const char *comm;          /* gradient comm: "auto", "mpi", "self", "nccl" (the host comm
                                  itself is the caller's; see setup_comm in trainer.c) */
    long threads;              /* cpu threads per rank, 0 = cores / local ranks */
    const char *out;           /* requested run folder (plumb train; NULL: runs/<UTC>-...) */
    const char *out_dir;       /* run folder for metrics.jsonl (rank 0), NULL: none */
    const char *predictions;   /* final eval's per-sample predictions (rank 0), NULL: none */
    long prefetch;             /* loader queue depth */
    int progress;              /* draw a progress line on stderr (rank 0) */
    double watchdog_s;         /* collective/step timeout, 0 = off */
    int quiet;                 /* no log lines (accept check) */
    int param_digest;          /* print the digest (plumb train) */
    const char *inject;        /* fault injection spec (train/inject.h) */
    const char *skip_batches_list; /* comma list -> skip_batches */
    long skip_batches[64];     /* steps whose batch is skipped deliberately (drills: the nan reference) */
    int n_skip_batches;
    long max_bad_steps;        /* non-finite steps in a row before a rollback to the last checkpoint */
    long log_every;            /* metrics.jsonl step lines every N steps (and first, last, eval, skipped) */
    double health_interval;    /* plumb train's health sampler period, 0 = off */
    const char *on_overheat;   /* "stop" | "warn" */
    const char *health_thresholds;
    /* health (health/monitor.h): the caller's sampler on this rank, or NULL.
     * Rank 0 appends its samples to metrics.jsonl; with stop_on_overheat a
     * critical temperature alert on any rank stops the run like SIGTERM does
     * (checkpoint, clean exit). */
    struct health_monitor *health;
    int stop_on_overheat;
    const struct workload *wl; /* resolved from `workload` by train_config_finish */
    unsigned char given[TRAIN_MAX_OPTS]; /* options set explicitly (train/options.c) */
};


struct train_result {
    char param_digest[65];
    char config_hash[65];      /* SHA-256 of what decides the parameters' bits but the device and --steps
                                  (the checkpoint's config hash): two golden runs with the same hash and
                                  steps must have the same param_digest (plumb compare's train-golden row) */
    struct eval_metrics eval;  /* final eval: the workload's metrics */
    int has_eval;
    struct eval_metrics reference; /* the data's own model (a teacher) on the eval split: teacher_<name>; n = 0 none */
    long steps_done;           /* global step reached */
    long start_step;           /* 0, or the resumed checkpoint's step */
    long skipped_steps;
    double first_loss, last_loss;  /* mean loss of the first and last 10% of steps run */
    double samples_per_s;      /* training throughput, global */
    double data_wait_frac;     /* share of step time spent waiting for data */
    double wall_s;
    int interrupted;           /* stopped before --steps (SIGTERM/SIGINT, overheat, a failed metrics write) */
    int overheat;              /* the stop came from a critical temperature alert on this rank */
    char stop_reason[64];      /* when interrupted: "SIGTERM", "SIGINT", "critical temperature",
                                  "metrics.jsonl write failed" */
    char ckpt_path[4096];      /* last checkpoint written ("" none) */
    char device[64];           /* the device trained on (its label, e.g. "cuda:0") */
    long backoff_steps;        /* steps skipped by the loss scaler backing off (not bad steps) */
    long steps_target;         /* --steps */
    char metrics_error[1024];  /* rank 0: metrics.jsonl could not be written completely ("" fine) */
    double final_scale;
    char data_desc[512];
    long bad_lines_skipped;    /* file data with --bad-lines skip */
    long truncated_lines;      /* incomplete last lines dropped */
    char model_desc[256];
    /* --stop-at: the eval that reached the target (reached = 0: none did) */
    int reached;
    long reached_step;
    double reached_s;          /* from the first step to the end of that eval, evals included */
    double reached_value;
    double eval_s;             /* seconds spent in the evals during training */
    double setup_s;            /* trainer_open and the data's open, before the first step */
    long fused_steps;          /* steps whose sparse SGD ran inside the backward (--fuse-sparse-sgd) */
    char sparse_sgd[8];        /* "fused" (some steps were), "list" (applied from the row list), "none" (no sparse rows) */
    long graphed_steps;        /* steps replayed as a device graph (--graph) */
    long deferred_steps;       /* synchronous steps whose forward/backward was deferred (one read a step) */
};

/* Status word flags, all-reduced each step (step 2 above). */
enum step_flag { SF_NONFINITE = 0, SF_OOM = 1, SF_STOP = 2, SF_ERROR = 3, SF_LOSS_BAD = 4, SF_N = 5 };

/* Runs training (and the evals) on comm c. Every rank calls it with the same
 * config. Rank 0 writes metrics.jsonl (cfg->out_dir), predictions and
 * checkpoints. */
int trainer_run(const struct train_config *cfg, struct comm *c, struct train_result *res,
                plumb_err *e);

/* ---- the trainer as an object: what plumb bench times (one loop, this one) ----
 * trainer_open sets everything up (collective, like trainer_run);
 * trainer_step_on runs one global step on a batch the caller built (this
 * rank's samples of global step `step`, global_valid samples in the global
 * batch; host or device fields, see train/model.h; st NULL: a queued step's
 * outcome is read one step behind, st given: at once); trainer_steps runs
 * warm + n steps from step `start` on the trainer's own data path (loader
 * or device feed) and times the last n: the host's wait for data, the time
 * spent building batches, the elapsed time to a synchronisation (tm may be
 * NULL). Steps are queued on the device
 * as trainer_run queues them (dev_sync(trainer_dev(t)) waits for them). */
struct trainer;
struct trainer_step_stats {
    double loss, grad_norm, lr, scale;
    int skipped;
    double compute_s, comm_s, opt_s;  /* host time in each phase */
};
int trainer_open(const struct train_config *cfg, struct comm *c, struct trainer **out, plumb_err *e);
void trainer_close(struct trainer *t);
int trainer_step_on(struct trainer *t, const struct batch *b, long step, long global_valid,
                    struct trainer_step_stats *st, plumb_err *e);
struct trainer_steps_time {
    double wait_s, build_s, elapsed_s;  /* of the n timed steps */
};
int trainer_steps(struct trainer *t, long start, long warm, long n, struct trainer_steps_time *tm, plumb_err *e);
const struct model_ops *trainer_model(struct trainer *t, struct model **m);
struct dev *trainer_dev(struct trainer *t);
/* The forward / backward split of a step, graphed or not (bench): on = 1
 * marks the device's time before each whole forward_backward, at the
 * model's forward_done (model.h) and after it, from the next step on (step
 * graphs captured without the marks are dropped). PLUMB_EUNSUPPORTED where
 * the device has no event_mark (dev.h). */
int trainer_phase_marks(struct trainer *t, int on, plumb_err *e);
/* After the device finished the last step (a sync): its forward and
 * backward in device milliseconds, the backward from forward_done to the
 * end of forward_backward (the gradient checks and norm that follow are in
 * neither). NaN each when that step had no split: marks off, the model did
 * not call forward_done exactly once, or the step ran in pieces (OOM split,
 * golden numerics' shards). */
int trainer_phase_ms(struct trainer *t, double *fwd_ms, double *bwd_ms, plumb_err *e);
/* The marks themselves (0 before, 1 forward_done, 2 after; NULL until
 * trainer_phase_marks made them), for tests that check they were recorded
 * by the last step and not an earlier one. */
dev_event *trainer_phase_event(struct trainer *t, int i);
/* Steps so far whose sparse SGD ran inside the backward, and steps replayed as a graph. */
void trainer_step_kinds(const struct trainer *t, long *fused, long *graphed);
int trainer_digest(struct trainer *t, char hex[65], plumb_err *e);

/* The value of metric `name` in m, NaN when absent. */
double eval_metric(const struct eval_metrics *m, const char *name);

#endif
