/* The training engine for ctr (DESIGN.md section 8): data parallel over a
 * comm (self or MPI), fast or golden numerics, fp32/bf16/fp16 with dynamic
 * loss scaling, checkpoints, exact evaluation.
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
 * gradient path"): 1 rank exchanges nothing; with a device comm (--comm
 * nccl/auto) the dense buckets are all-reduced during backward (ctr's
 * grad-ready hook, before step 2: every rank enqueues every bucket) and the
 * sparse lists gathered and coalesced on the device, the found-inf check
 * taken on the global sums; the host comm path (cpu, or no NCCL) stages
 * through host memory. */
#ifndef PLUMB_TRAINER_H
#define PLUMB_TRAINER_H
#include <stdint.h>
#include "comm/comm.h"
#include "core/dtype.h"
#include "core/err.h"
#include "dev/dev.h"
#include "train/evalm.h"

struct train_config {
    const char *preset;        /* "ctr-tiny", "dlrm-kaggle" */
    long rows;                 /* rows per table override, 0 = preset's */
    const char *data;          /* "synthetic" or a Criteo TSV (.gz) path */
    const char *eval_data;     /* optional eval file */
    double eval_fraction;      /* file data: held-out tail */
    long train_samples;        /* synthetic: epoch size */
    long eval_samples;         /* synthetic: eval split size */
    uint64_t data_seed;
    int bad_lines_skip;
    long max_rows;
    long steps;                /* optimizer steps (batches) in total */
    long batch;                /* global batch */
    uint64_t seed;             /* model init */
    double lr;
    long warmup;               /* linear warmup steps */
    const char *optimizer;     /* "sgd" | "adamw" */
    double weight_decay;
    long eval_every;           /* 0: only at the end */
    long eval_batch;
    const char *ckpt_dir;      /* NULL: no checkpoints */
    long ckpt_every;           /* 0: only at the end / on a signal */
    int ckpt_keep;
    int resume;                /* continue from the newest valid checkpoint */
    enum numerics numerics;
    int allow_tf32;            /* fast fp32 GEMMs may use TF32 where the device has it (dev_set_numerics);
                                  default 0: strict fp32 */
    dtype_t precision;         /* DT_F32, DT_BF16, DT_F16 */
    int micro_shard;           /* samples per micro-shard */
    const char *loss_scale;    /* "auto" (dynamic for fp16), "dynamic", "off" */
    double ls_init, ls_growth, ls_backoff;
    long ls_interval;
    double clip_grad_norm;     /* 0: no clipping */
    const char *device;        /* "cpu", "cuda:0"... (local rank picks the ordinal when none) */
    const char *comm;          /* gradient comm: "auto" (NULL), "mpi", "self", "nccl" (the host comm
                                  itself is the caller's; see setup_comm in trainer.c) */
    int threads;               /* cpu threads per rank, 0 = cores / local ranks */
    const char *out_dir;       /* run folder for metrics.jsonl (rank 0), NULL: none */
    const char *predictions;   /* final eval's label,score file (rank 0), NULL: none */
    int prefetch;              /* loader queue depth */
    int progress;              /* draw a progress line on stderr (rank 0) */
    double watchdog_s;         /* collective/step timeout, 0 = off */
    int quiet;                 /* no log lines (accept check) */
    const long *skip_batches;  /* steps whose batch is skipped deliberately (drills: the nan reference) */
    int n_skip_batches;
    long max_bad_steps;        /* non-finite steps in a row before a rollback to the last checkpoint */
    /* health (health/monitor.h): the caller's sampler on this rank, or NULL.
     * Rank 0 appends its samples to metrics.jsonl; with stop_on_overheat a
     * critical temperature alert on any rank stops the run like SIGTERM does
     * (checkpoint, clean exit). */
    struct health_monitor *health;
    int stop_on_overheat;
};

void train_config_defaults(struct train_config *c);

struct train_result {
    char param_digest[65];
    struct eval_result eval;   /* final eval */
    int has_eval;
    double teacher_auc;        /* synthetic data: the teacher's own AUC on the eval split, else NaN */
    long steps_done;           /* global step reached */
    long start_step;           /* 0, or the resumed checkpoint's step */
    long skipped_steps;
    double first_loss, last_loss;  /* mean loss of the first and last 10% of steps run */
    double samples_per_s;      /* training throughput, global */
    double data_wait_frac;     /* share of step time spent waiting for data */
    double wall_s;
    int interrupted;           /* stopped by SIGTERM/SIGINT after writing a checkpoint */
    int overheat;              /* the stop came from a critical temperature alert on this rank */
    char ckpt_path[4096];      /* last checkpoint written ("" none) */
    double final_scale;
    char data_desc[512];
    long bad_lines_skipped;    /* file data with --bad-lines skip */
    long truncated_lines;      /* incomplete last lines dropped */
    char model_desc[256];
};

/* Status word flags, all-reduced each step (step 2 above). */
enum step_flag { SF_NONFINITE = 0, SF_OOM = 1, SF_STOP = 2, SF_ERROR = 3, SF_N = 4 };

/* Runs training (and the evals) on comm c. Every rank calls it with the same
 * config. Rank 0 writes metrics.jsonl (cfg->out_dir), predictions and
 * checkpoints. */
int trainer_run(const struct train_config *cfg, struct comm *c, struct train_result *res,
                plumb_err *e);

/* SIGTERM/SIGINT handlers that ask the running trainer to checkpoint and
 * stop at the next step boundary; trainer_run installs them. */
void trainer_request_stop(void);

#endif
