/* report.html: one self-contained file (inline CSS and SVG, no scripts, no
 * network) rendered from a results.json document and the artifacts of its run
 * folder: the verdict table, one section per check (status, reason, metrics,
 * thresholds, details), RNG histograms as SVG (checks/rng[-dev]/histograms.json:
 * {"streams":[{"name","kind","lo","hi","counts":[...],"expected":[...]}]}),
 * the numerics error table (details.ops: [{"op","dtype","shape","max_rel",
 * "norm_rel","max_ulp","threshold","digest","deterministic"}]) and the doctor
 * table (details.rows: [{"item","value","status","reason"}]).
 * Every string taken from the document is HTML-escaped. */
#ifndef PLUMB_HTML_H
#define PLUMB_HTML_H
#include <jansson.h>
#include <stddef.h>
#include "core/err.h"

/* Growable text buffer. */
struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
};
void sb_puts(struct sbuf *b, const char *s);
void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s with & < > " ' escaped; invalid UTF-8 bytes become U+FFFD and
 * control characters other than \t \n are dropped. */
void sb_escape(struct sbuf *b, const char *s);
void sb_free(struct sbuf *b);

/* Renders the document; run_dir (may be NULL) is where artifacts are read
 * from. Returns a malloc'ed NUL-terminated string, NULL on out of memory. */
char *html_render(const json_t *results, const char *run_dir);
/* Renders and writes atomically to path. */
int html_render_file(const json_t *results, const char *run_dir, const char *path, plumb_err *e);

/* Parts of the report for training evidence, throughput and signatures
 * (html_run.c): */
/* The signature section (report/sign.h), verified against the key set by
 * html_set_trusted_key (NULL: the manifest's own key). Nothing when unsigned. */
void html_put_signature(struct sbuf *b, const char *run_dir);
void html_set_trusted_key(const char *pub_path);
/* A check's per-seed results (seeds.jsonl artifact: strip plots, loss seed
 * band) or, for the ladder check, its rungs. */
void html_put_training(struct sbuf *b, const json_t *check, const char *run_dir);
/* Bars of every metric with a rate unit (".../s") over all checks. */
void html_put_throughput(struct sbuf *b, const json_t *root);

#endif
