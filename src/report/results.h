/* Run folders and results.json (schema "plumb.results/1", README.md, run folders).
 *
 *   runs/<UTC-time>-<host>-<id>/      (or the folder given with --out)
 *     results.json   {"schema","command","started","finished","host","platform",
 *                     "versions","checks":[...],"verdict"}
 *     checks/<name>[-<device>]/       artifacts of one check
 *     report.html                     rendered from results.json (report/html.h)
 *
 * Every command that takes --out uses the same three calls:
 *
 *   struct results res;
 *   if (results_open(&res, out_dir_or_NULL, "plumb rng --count 1000", &e)) return cli_fail(...);
 *   struct check_ctx ctx = {.run_dir = res.dir, ...};
 *   check_rng_run(&ctx, ..., &r, &e);  results_add_check(&res, &r);  check_free(&r);
 *   results_add_device(&res, d);       (each device used, optional)
 *   results_write(&res, &e);           (results.json atomically, then report.html)
 *   rc = results_exit_code(&res);  results_close(&res);
 *
 * The run folder rule (README.md, "Run folders"): a folder is append-only.
 *   - Each command that opens it is a run: runs[] gets {"run": N, "command",
 *     "started", "pid", "host", "status": "running"} at once (results.json is
 *     written at open), then "finished", "verdict" (of its own checks),
 *     "checks" and, when it failed, "exit_code" and "error". A run left
 *     "running" by a process that is gone from this host (SIGKILL, the OOM
 *     killer) is marked "killed" by the next command that opens the folder,
 *     with "noted_by_run": that command's N.
 *   - Its checks are appended, each tagged "run": N; nothing an earlier run
 *     wrote is replaced: results_write merges into results.json as it is on
 *     disk (under a lock on the folder), so concurrent commands keep theirs.
 *   - A check's artifacts go to checks/<name>[-<device>]/ when that folder is
 *     new, else to checks/<name>[-<device>]-run<N>/ (report/check.h).
 *   - The exit code reflects this command's checks (results_exit_code); the
 *     folder's "verdict" (all checks of all runs) is reported separately.
 *   - A folder that is not empty and has no results.json is not a run folder:
 *     refused (PLUMB_EUSAGE), as is a results.json of another schema. */
#ifndef PLUMB_RESULTS_H
#define PLUMB_RESULTS_H
#include <jansson.h>
#include <limits.h>
#include "report/check.h"
#include "core/err.h"

#define RESULTS_SCHEMA "plumb.results/1"

struct dev;

struct results {
    char dir[PATH_MAX]; /* run folder, exists after results_open */
    json_t *root;       /* the whole document, owned */
    int write_html;     /* results_write also renders report.html (default 1) */
    int run;            /* this command's run number in the folder (runs[]) */
    json_t *mine;       /* this command's checks (shared with root's checks[]) */
};

/* Creates the run folder (dir, or runs/<UTC>-<host>-<id> under the current
 * directory when dir is NULL or ""), fills schema, host, versions, started.
 * command: the command line, recorded as is. An existing results.json in dir
 * is loaded and continued; an invalid one, or a non-empty folder without one,
 * is an error (PLUMB_EUSAGE), as is a --out that cannot be created or
 * written. Records this command in runs[] and writes results.json. */
int results_open(struct results *r, const char *dir, const char *command, plumb_err *e);
/* Same, under a given parent folder instead of "runs" (tests). */
int results_open_in(struct results *r, const char *parent, plumb_err *e);
/* Appends the check's entry (calls check_end first if the check did not).
 * The entry is shared with c (reference counted): check_free(c) stays correct. */
void results_add_check(struct results *r, struct check_result *c);
/* Records a device used in platform.devices[] (once per label). */
void results_add_device(struct results *r, const struct dev *d);
/* Records a version string, e.g. ("cuda_runtime", "13.0"); replaces. */
void results_set_version(struct results *r, const char *key, const char *value);
/* Worst status over the folder's checks[] (skip counts as pass); pass when
 * there are none. */
enum check_status results_verdict(const struct results *r);
/* The same over this command's checks only. */
enum check_status results_run_verdict(const struct results *r);
/* Records in this run's runs[] entry that the command failed (exit code and
 * message); results_write still has to be called. */
void results_note_error(struct results *r, int exit_code, const char *msg);
/* Sets verdict and finished, writes results.json atomically (core/jsonx.h),
 * then report.html when r->write_html. */
int results_write(struct results *r, plumb_err *e);
/* 1 when this command's verdict is fail, else 0. */
int results_exit_code(const struct results *r);
void results_close(struct results *r);

/* Reads and validates DIR/results.json (or a path to a .json file): a
 * regular file of at most RESULTS_READ_CAP bytes (file_check_input), schema,
 * checks[] entries with a name and a known status. PLUMB_EUSAGE naming the
 * file and the field on anything else. */
#define RESULTS_READ_CAP ((size_t)256 << 20)
int results_read(const char *dir_or_file, json_t **out, plumb_err *e);
/* Verdict of a document read back (same rule as results_verdict). */
enum check_status results_doc_verdict(const json_t *root);
/* "pass"/"warn"/"fail"/"skip" -> enum; -1 when unknown. */
int results_parse_status(const char *s);

#endif
