/* Every check plumb accept can run. Each fills r (see check.h) and returns
 * PLUMB_OK when it ran (whatever its verdict) or an error when it could not
 * run at all (bad input, internal failure). The accept command decides which
 * run at each level (--quick, --standard, --full). */
#ifndef PLUMB_CHECKS_H
#define PLUMB_CHECKS_H
#include "report/check.h"

/* host, drivers, libraries, plugins, risky env vars (accept/check_doctor.c) */
int check_doctor_run(const struct check_ctx *ctx, struct check_result *r, plumb_err *e);
/* Philox KATs, KS tests, stream digests on ctx->device, compared with the
 * cpu's digests when the device is not the cpu (accept/check_rng.c) */
int check_rng_run(const struct check_ctx *ctx, long count, struct check_result *r, plumb_err *e);
/* the same with the streams' base seed (check_rng_run uses RNG_CHECK_DEFAULT_SEED) */
#define RNG_CHECK_DEFAULT_SEED 2024u
int check_rng_run_seed(const struct check_ctx *ctx, long count, unsigned long long seed,
                       struct check_result *r, plumb_err *e);
/* every op vs float64, determinism, golden digests vs the cpu's
 * (accept/check_numerics.c); numerics = "fast" or "golden" */
int check_numerics_run(const struct check_ctx *ctx, const char *numerics, int allow_tf32,
                       struct check_result *r, plumb_err *e);
/* The workload's accept preset (train/model.h, struct workload_accept)
 * trained on ctx->device, the check train-<name>: the deciding metric's
 * bound, the fast metric within the cpu's seed-to-seed spread, the golden
 * digest vs the cpu's (accept/check_train.c). */
struct workload;
int check_train_run(const struct check_ctx *ctx, const struct workload *wl, struct check_result *r, plumb_err *e);
/* The spread verdict of check_train_run, pure: cpu_values[0..k-1] are the
 * cpu's fast values of the deciding metric over k seeds, cpu_values[0] at
 * the device run's seed. Sets *spread = max - min of cpu_values and *tol =
 * max(*spread, floor) (both NaN when an input is not finite or k < 1);
 * returns 1 when |dev_value - cpu_values[0]| <= *tol, else 0 (two-sided,
 * whichever direction is better). spread/tol may be NULL. */
int train_spread_verdict(double dev_value, const double *cpu_values, int k, double floor, double *spread,
                         double *tol);
/* health sampled during the run, no threshold crossed (accept/check_health.c) */
int check_health_run(const struct check_ctx *ctx, struct check_result *r, plumb_err *e);
/* The health entry from samples already taken (array of {"type":"health",
 * "devices":[...]} lines) and their alerts: plumb health --out uses it. */
struct health_thresholds;
int check_health_report(const struct check_ctx *ctx, json_t *lines, json_t *alerts,
                        const struct health_thresholds *t, const char *scope, struct check_result *r,
                        plumb_err *e);
/* plumb comm as a child job on every rank of ctx->device's backend: one per
 * GPU (NCCL/RCCL), 2 MPI ranks on the cpu (skipped without mpirun)
 * (accept/check_comm.c) */
int check_comm_accept_run(const struct check_ctx *ctx, struct check_result *r, plumb_err *e);
/* fault drills (accept/check_faults.c) */
int check_faults_run(const struct check_ctx *ctx, struct check_result *r, plumb_err *e);

#endif
