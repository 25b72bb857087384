/* Seeds as evidence (docs/COMPARE.md): a workload's accept preset
 * (train/model.h, struct workload_accept) trained K times on one device, one
 * independent run per seed, each run's final metrics and loss curve one line
 * of a seeds.jsonl file (report/seeds.h). The seed changes the model
 * initialisation and the shuffling; the data seed stays fixed, so every run
 * sees the same training and evaluation sets.
 *
 * This file is the only caller of the trainer for the parity and ladder
 * checks (accept/check_parity.c, accept/check_ladder.c). The runs are the
 * train-<workload> check's fast runs (accept/check_train.c; ctr: ctr-tiny,
 * AdamW, lr 0.004, warmup 50, batch 256, 1500 steps, 50000 eval samples)
 * with the rung's numerics and precision on top. Every record carries the
 * workload's eval metrics by their own names, the deciding one as
 * "primary", each metric's direction ("better") and the descriptor's
 * margin, so plumb compare needs no workload table to read them. */
#ifndef PLUMB_SEED_RUNS_H
#define PLUMB_SEED_RUNS_H
#include <jansson.h>
#include <stdint.h>
#include "core/dtype.h"
#include "core/err.h"
#include "dev/dev.h"

struct workload;

struct seed_run_cfg {
    const struct workload *wl; /* with an accept descriptor; NULL: ACCEPT_DEFAULT_WORKLOAD */
    const char *device;
    int threads;               /* cpu threads, 0 = the trainer's default */
    enum numerics numerics;
    dtype_t precision;         /* DT_F32, DT_BF16 (AMP, fp32 master weights), DT_F16 */
    const char *loss_scale;    /* "auto" (dynamic for fp16), "dynamic", "off" */
    int allow_tf32;            /* fast fp32 GEMMs may use TF32 where the device has it */
    const char *gemm_reduction;/* PLUMB_GEMM_REDUCTION for the GPU plugins' GEMMs during the run:
                                  "none" (no split-K), "sequential" (the default), NULL: as set */
    double lr_scale;           /* the learning rate times this (1; a planted change otherwise) */
    long steps;                /* 0: the descriptor's (ctr 1500) */
    long eval_samples;         /* 0: the descriptor's (ctr 50000) */
};
/* The default workload's (ACCEPT_DEFAULT_WORKLOAD) fast fp32 run. */
void seed_run_cfg_defaults(struct seed_run_cfg *c, const char *device, int threads);
/* The workload of c (wl, or the default one). */
const struct workload *seed_run_workload(const struct seed_run_cfg *c);
/* "ctr-tiny, fast fp32, strict fp32, lr 0.004, 1500 steps" */
void seed_run_describe(const struct seed_run_cfg *c, char *buf, size_t n);

/* A planted change of known effect (--plant): "lr=3" (learning rate x3),
 * "precision=bf16|fp16|fp32", several joined by commas, and "@K" at the end
 * to apply it only from ladder rung K on (e.g. "lr=3@4"). Used to show that
 * the parity test and the ladder find a difference where one was put. */
struct plant {
    int active;
    double lr_scale;           /* 1 when not planted */
    int set_precision;
    dtype_t precision;
    int from_rung;             /* 0: every run */
    char text[128];
};
int plant_parse(const char *spec, struct plant *p, plumb_err *e);
/* Applies p to c when rung >= p->from_rung (rung 0: not a ladder run). */
void plant_apply(const struct plant *p, int rung, struct seed_run_cfg *c);

/* Trains seeds seed0 .. seed0+k-1 and writes one line per seed to out_path
 * (created; each line appended as its run ends, so an interrupted check keeps
 * the seeds it has). scratch: a folder for the runs' metrics.jsonl (removed
 * after each run). log: progress lines ("seed 3/5: auc ...") or NULL.
 * *recs (may be NULL) gets the records (owned by the caller). */
int seed_runs(const struct seed_run_cfg *c, uint64_t seed0, int k, const char *out_path, const char *scratch,
              FILE *log, json_t **recs, plumb_err *e);

#endif
