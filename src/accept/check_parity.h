/* The checks that train with many seeds (docs/COMPARE.md):
 *   parity: K fast-mode seeds on a device -> checks/parity[-dev]/seeds.jsonl
 *           (accept/check_parity.c);
 *   ladder: K seeds at each rung of increasing numerical freedom, golden ->
 *           fast strict fp32 -> vendor defaults (split-K, TF32) -> bf16 AMP ->
 *           fp16 AMP, one seeds file per rung (accept/check_ladder.c).
 * Both are plumb.results/1 checks ("parity", "ladder") that plumb compare
 * pairs by name and device. */
#ifndef PLUMB_CHECK_PARITY_H
#define PLUMB_CHECK_PARITY_H
#include <stdint.h>
#include "report/check.h"
#include "accept/seed_runs.h"

struct workload;

/* Both checks train the workload's accept preset (train/model.h, struct
 * workload_accept) and are named accept_check_name("parity" / "ladder", wl):
 * the bare names for the default workload (ctr), parity-W / ladder-W for
 * any other W. */
struct parity_check_opts {
    const struct workload *wl; /* NULL: ACCEPT_DEFAULT_WORKLOAD */
    int seeds;                 /* K; 0: parity_seeds_for_level */
    uint64_t seed_base;        /* seeds seed_base .. seed_base + K - 1 */
    long steps;                /* 0: the workload's */
    const struct plant *plant; /* NULL: none */
};
/* K = 5 at quick and standard, 10 at full. */
int parity_seeds_for_level(const char *level);
int check_parity_run(const struct check_ctx *ctx, const struct parity_check_opts *o, struct check_result *r,
                     plumb_err *e);

struct ladder_opts {
    const struct workload *wl; /* NULL: ACCEPT_DEFAULT_WORKLOAD */
    int seeds;                 /* K per rung; 0: parity_seeds_for_level */
    uint64_t seed_base;
    long steps;
    const struct plant *plant; /* applied from plant->from_rung on */
    const char *rungs;         /* comma list of rung names to run, NULL: all five */
    FILE *log;                 /* progress lines, or NULL */
};
/* The rung names in order: golden, fast-strict, fast-vendor, bf16-amp, fp16-amp. */
extern const char *const ladder_rung_names[5];
int check_ladder_run(const struct check_ctx *ctx, const struct ladder_opts *o, struct check_result *r, plumb_err *e);
/* --rungs: NULL or "all", else a comma list of ladder_rung_names, at least one; PLUMB_EUSAGE
 * naming the bad entry (plumb attribute checks it before it opens its run folder). */
int ladder_check_rungs(const char *rungs, plumb_err *e);

#endif
