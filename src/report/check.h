/* The result of a check: `check_run(ctx, params) -> check_result`
 * (docs/HACKING.md, "Layers"). It lives in report/ because results.json is made
 * of them; accept/ and the per-check commands build them (accept depends on
 * report, never the other way round). The result is a JSON object of schema
 * plumb.results/1's `checks[]` entry:
 *   { "name", "device", "status": "pass|warn|fail|skip", "reason",
 *     "metrics": [ {"name","value","unit"} ... ], "thresholds": {name: value},
 *     "duration_s", "artifacts": ["checks/<name>/file", ...], "details": {...} }
 * Helpers below build it; accept/ and the per-check commands share them. */
#ifndef PLUMB_CHECK_H
#define PLUMB_CHECK_H
#include <jansson.h>
#include "core/err.h"

enum check_status { CHECK_PASS = 0, CHECK_WARN = 1, CHECK_FAIL = 2, CHECK_SKIP = 3 };

struct check_ctx {
    const char *run_dir;     /* run folder root (may be NULL: no artifacts written) */
    const char *device;      /* device spec, e.g. "cpu", "cuda:0" */
    const char *level;       /* "quick", "standard", "full" */
    int threads;             /* cpu threads, 0 = all */
    int tty;                 /* progress may be drawn on stderr */
};

struct check_result {
    json_t *obj;             /* owned; the checks[] entry */
    enum check_status status;
    double t_start;
};

/* name e.g. "rng"; device may be NULL. */
int check_begin(struct check_result *r, const char *name, const char *device);
void check_metric(struct check_result *r, const char *name, double value, const char *unit);
void check_threshold(struct check_result *r, const char *name, double value);
/* Raises the status (pass < warn < fail; skip only from pass) and records the
 * reason of the worst finding. */
void check_set_status(struct check_result *r, enum check_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Artifact directory checks/<name>[-<device>]/ under the run folder (created). */
int check_artifact_dir(const struct check_ctx *ctx, const struct check_result *r, char *out,
                       size_t n, plumb_err *e);
/* Records an artifact path relative to the run folder. */
void check_artifact(struct check_result *r, const char *relpath);
/* Free-form JSON detail, stolen reference. */
void check_detail(struct check_result *r, const char *key, json_t *value);
/* Sets duration_s and the final status string. */
void check_end(struct check_result *r);
void check_free(struct check_result *r);
const char *check_status_name(enum check_status s);

#endif
