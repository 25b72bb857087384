/* plumb compare (docs/COMPARE.md): two run folders, or two devices of one, or
 * two per-seed metric files, side by side, as one JSON document (schema
 * "plumb.compare/1") that compare_text.c prints and compare_html.c renders.
 *
 *   {"schema", "a": {side}, "b": {side}, "options": {...},
 *    "pairs":    [{"name", "mode", "device_a", "device_b", "status_a", "status_b", "reason_a",
 *                  "reason_b", "metrics": [{"name","unit","a","b","delta","ratio"}],
 *                  "thresholds": [{"name","a","b"}]}],
 *    "unmatched": [{"side", "name", "mode", "device"}],
 *    "digests":  [{"kind", "item", "a", "b", "equal"}],   kind: rng | numerics-golden |
 *                                                          train-golden | ladder-golden
 *    "digest_fault": null or {"kind", "item", "message"}   (the first row that differs)
 *    "parity":   [{"check", "device_a", "device_b", "source_a", "source_b",
 *                  "metrics": [parity of one metric, below], "curves": {...}, "verdict"}],
 *    "ladder":   null or {...} (compare_ladder.c),
 *    "throughput": [{"check", "name", "unit", "a", "b"}],
 *    "numerics": [{"mode", "op", "dtype", "shape", "criterion", "a", "b", "threshold"}],
 *    "verdict":  "equivalent" | "different" | "undecided" | "digests equal" (a parity group's
 *                verdict is its primary metric's: one test, so the false-alarm rate stays at alpha),
 *    "summary":  one sentence, "exit_code": 0 | 1}
 *
 * One metric's parity: {"metric", "n_a", "n_b", "seeds_a", "seeds_b", "values_a", "values_b",
 *   "mean_a", "mean_b", "std_a", "std_b", "diff", "rel_diff", "ci95", "welch": {"t","df","p"},
 *   "tost": {"low","upp","p","ci90"}, "permutation": {"p","exact","splits"}, "ks": {"d","p"},
 *   "gap_sd", "margin": {"text","abs","from"}, "seeds_needed", "more_per_side", "verdict", "text",
 *   "better": "higher" | "lower" | null, "b_vs_a": "better" | "worse" | "same" (when better is known)}
 * (differences are B - A; margin.from: "--margin", "A's records", "B's records" or "the
 * default"). A parity group also has "primary" and "primary_from" (report/seeds.h: the
 * records name their primary metric, each metric's direction and a margin; the verdict is
 * two-sided, the direction only says which side is ahead). Exit code: 0 when every group's
 * primary metric is equivalent (or there are none) and every digest row is equal, else 1. */
#ifndef PLUMB_COMPARE_H
#define PLUMB_COMPARE_H
#include <jansson.h>
#include <stdio.h>
#include "core/err.h"
#include "report/parity.h"
#include "report/seeds.h"

#define COMPARE_SCHEMA "plumb.compare/1"

struct compare_opts {
    const char *dev_a, *dev_b; /* only these devices' checks (NULL: pair by device, see compare.c) */
    const char *margin;        /* "0.15%" (relative to A's mean), "0.001" (absolute), or a list
                                  "auc=0.15%,logloss=0.002" with an optional default entry;
                                  NULL: the records' own margin (A's, else B's), else 0.15% */
    double alpha, power;
    const char *metric;        /* the primary metric, whose verdict is the group's (NULL: the records'
                                  "primary" when both sides have it, else auc when both have it, else
                                  the first metric they share); the rest are secondary */
    int attribute;             /* the ladder must be there on both sides (else PLUMB_EUSAGE) */
    const char *pub_a, *pub_b; /* trusted public keys to verify each side's signature (may be NULL) */
};
void compare_opts_defaults(struct compare_opts *o);

/* Two run folders (results.json read and validated by the caller, results_read). */
int compare_runs(const json_t *a, const char *dir_a, const json_t *b, const char *dir_b,
                 const struct compare_opts *o, json_t **out, plumb_err *e);
/* Two per-seed metric files (report/seeds.h format) from any trainer. */
int compare_metric_files(const char *path_a, const char *path_b, const struct compare_opts *o, json_t **out,
                         plumb_err *e);

/* Parity of two seed sets: one entry per metric both have, the curve bands,
 * and the group verdict. Used by compare_runs, compare_metric_files and the
 * ladder. */
int compare_parity_group(const struct seed_set *a, const struct seed_set *b, const struct compare_opts *o,
                         json_t **out, plumb_err *e);
/* The worse of two verdicts: different > undecided > equivalent (a may be NULL). */
const char *compare_worse_verdict(const char *a, const char *b);
/* The margin for one metric from the --margin text; *abs the half-width. */
int compare_margin_for(const char *spec, const char *metric, double ref, double *abs, char *text, size_t n,
                       plumb_err *e);

/* Digest rows of two paired checks (compare_digest.c): appends to rows. */
void compare_digest_rows(const json_t *ca, const json_t *cb, json_t *rows);
/* The first unequal row as {"kind","item","message"}, or NULL. */
json_t *compare_digest_fault(const json_t *rows);

/* The ladder (compare_ladder.c): one side's ladder check (ca) or two. dir_*
 * are the run folders its seeds files are relative to. The document has the
 * check's "workload", "metric" and its "better" direction, and "skipped":
 * the rungs the workload could not run (a precision it lacks). compare_runs
 * pairs A's ladder with B's of the same check name (ladder, ladder-W);
 * ladders of different workloads are PLUMB_EUSAGE. */
int compare_ladder(const json_t *ca, const char *dir_a, const json_t *cb, const char *dir_b,
                   const struct compare_opts *o, json_t **out, plumb_err *e);

/* A seeds artifact of a check (the first artifact path ending in
 * "seeds.jsonl"), read from its run folder. 0 with s->n = 0 when the check
 * has none. */
int compare_check_seeds(const json_t *check, const char *dir, struct seed_set *s, plumb_err *e);
/* Reads dir/rel (rel must stay inside dir). */
int compare_read_seeds_rel(const char *dir, const char *rel, struct seed_set *s, plumb_err *e);

/* Text report (compare_text.c). */
void compare_print(FILE *f, const json_t *doc);
/* compare.html (compare_html.c): self-contained, inline CSS and SVG. */
char *compare_html_render(const json_t *doc);
int compare_html_write(const json_t *doc, const char *path, plumb_err *e);

#endif
