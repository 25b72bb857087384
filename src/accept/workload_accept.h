/* The accept descriptor of a workload (train/model.h, struct
 * workload_accept) as the accept checks use it: which workloads have one,
 * which of them --standard trains by default, the check names, the metric
 * directions and the train configs of the fast and golden runs. */
#ifndef PLUMB_WORKLOAD_ACCEPT_H
#define PLUMB_WORKLOAD_ACCEPT_H
#include <stddef.h>
#include "core/dtype.h"
#include "core/err.h"
#include "train/model.h"
#include "train/trainer.h"

/* The workload the parity check and the ladder train when none is named
 * (--workload). Its checks keep the bare names "parity" and "ladder", so run
 * folders written before workloads had descriptors pair with new ones; any
 * other workload W's are "parity-W" and "ladder-W" (their own artifact
 * folders, and plumb compare pairs checks by name). */
#define ACCEPT_DEFAULT_WORKLOAD "ctr"

/* plumb accept --standard without --workloads trains every workload with a
 * descriptor whose not_standard is NULL and whose cpu_run_s is at most this:
 * the train check runs its preset 2 + K times (K = 3) on a GPU host's cpu,
 * so 30 s a run keeps a GPU's train check to a few minutes on 2 cores. */
#define ACCEPT_STANDARD_RUN_S 30.0

/* The workload called name, which must have a descriptor; PLUMB_EUSAGE
 * naming opt ("--workload") and the workloads that have one otherwise. */
int accept_workload_find(const char *name, const char *opt, const struct workload **out, plumb_err *e);
/* The i-th workload with a descriptor (table order), NULL past the end. */
const struct workload *accept_workload_at(int i);
/* "ctr, toy": the workloads with a descriptor. */
void accept_workload_names(char *buf, size_t n);
/* 1 when --standard trains wl by default; else 0 and why (may be NULL). */
int accept_workload_standard(const struct workload *wl, char *why, size_t n);
/* "ctr (toy: its arithmetic ...)": the default set, and why each other is left out. */
void accept_standard_desc(char *buf, size_t n);

/* base ("parity", "ladder") for the default workload, base-<name> otherwise. */
void accept_check_name(const char *base, const struct workload *wl, char *buf, size_t n);

/* 1 when higher is better for eval metric `metric` of wl, 0 when lower. */
int accept_metric_higher(const struct workload *wl, const char *metric);
/* Does wl train in precision p (workload_accept.precisions)? */
int accept_precision_ok(const struct workload *wl, dtype_t p);
/* 1 when v reaches the descriptor's bound (or there is none). */
int accept_bound_ok(const struct workload_accept *a, double v);
/* The threshold's name: "<metric>_floor" (higher is better) or "<metric>_ceiling". */
void accept_bound_name(const struct workload_accept *a, char *buf, size_t n);

/* One option of a run on top of the descriptor's ("--device", "cuda:0"); the
 * strings must outlive the config (the option table keeps text by pointer). */
struct accept_opt {
    const char *opt, *value;
};
/* wl's accept preset through the option table (train/options.h): the
 * preset's defaults, then the descriptor's fast (golden = 0) or golden
 * options (golden = 1, with --numerics golden), then extra[0..n) in order,
 * then --quiet; finished. PLUMB_EUSAGE naming the option on a bad value. */
int accept_train_config(const struct workload *wl, int golden, const struct accept_opt *extra, int n,
                        struct train_config *c, plumb_err *e);

/* The descriptor checked against the workload's tables: the preset exists,
 * the fast and golden options are valid, the metric is named and not among
 * lower_is_better, the margin parses, the precisions are known. */
int workload_accept_validate(const struct workload *wl, plumb_err *e);

#endif
