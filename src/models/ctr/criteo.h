/* Criteo click logs (docs/TRAINING.md, "Data"): one sample per line,
 *   label \t I1..I13 \t C1..C26
 * label 0/1; I* integers (may be empty or negative); C* tokens (8 hex digits
 * in the real data, may be empty). Plain or gzip'ed files (zlib reads both).
 *
 * A parsed sample keeps the transformed dense features and the 32-bit hash of
 * each categorical token together with its field index; the model takes the
 * row `hash % rows_per_table` (data_fill in data.h), so one parsed file
 * serves any table size. */
#ifndef PLUMB_CRITEO_H
#define PLUMB_CRITEO_H
#include <stddef.h>
#include <stdint.h>
#include "core/err.h"

#define CRITEO_DENSE 13
#define CRITEO_CAT 26
#define CRITEO_FIELDS (1 + CRITEO_DENSE + CRITEO_CAT)

struct criteo_sample {
    float label;                 /* 0 or 1 */
    float dense[CRITEO_DENSE];   /* log(1 + max(x, 0)), missing = 0 */
    uint32_t cat[CRITEO_CAT];    /* criteo_hash(field, token) */
};

/* Fixed 32-bit hash of a token together with its categorical field index
 * (0..25): FNV-1a over the field byte then the token bytes, finished with the
 * murmur3 fmix32 avalanche so `mod rows` uses every bit. Empty tokens hash
 * too (one "missing" row per field). */
uint32_t criteo_hash(int field, const char *tok, size_t len);
/* log(1 + max(x, 0)) rounded to fp32 */
float criteo_dense_transform(long long x);

/* Parses one line (no newline; a trailing '\r' is accepted). On error returns
 * PLUMB_EUSAGE with a message naming the field ("I3 (column 4): 'x1' is not
 * an integer"); the caller adds file and line. */
int criteo_parse_line(const char *line, size_t len, struct criteo_sample *s, plumb_err *e);

/* The longest line the reader accepts (bytes, without the newline): a real
 * line is ~200 bytes; anything longer is not Criteo data. */
#define CRITEO_MAX_LINE (1 << 20)

/* The end of a gzread (it returned got <= 0) on gz (a gzFile), after line
 * `lineno` of `path`: PLUMB_OK for a clean end of file, else the error
 * (PLUMB_EUSAGE): a gzip member cut short reads as a short stream whose end
 * zlib reports as Z_BUF_ERROR, "truncated gzip stream"; without the check
 * the rows before the cut train silently. Both readers (criteo.c, and the
 * parallel criteo_par.c) end through it, so they fail alike. */
int criteo_gz_end(void *gz, const char *path, long lineno, int got, plumb_err *e);
/* Line `lineno` of `path` is over CRITEO_MAX_LINE: the error (PLUMB_EUSAGE). */
int criteo_line_too_long(const char *path, long lineno, plumb_err *e);

enum criteo_bad { CRITEO_BAD_ERROR = 0, CRITEO_BAD_SKIP = 1 };

struct criteo_reader;
/* Opens path (plain or gzip). bad = what a malformed line does. */
int criteo_open(const char *path, enum criteo_bad bad, struct criteo_reader **out, plumb_err *e);
/* Next sample: *got = 1 with s filled, or *got = 0 at the end. A malformed
 * line is an error naming file, line and field, or (CRITEO_BAD_SKIP) counted
 * and skipped. A last line with no newline that is incomplete (fewer fields)
 * is a truncated write: dropped with a warning and counted in truncated. A
 * gzip file whose compressed stream is cut short, a read error or a line
 * longer than CRITEO_MAX_LINE are errors (PLUMB_EUSAGE) naming the file. */
int criteo_next(struct criteo_reader *r, struct criteo_sample *s, int *got, plumb_err *e);
long criteo_skipped(const struct criteo_reader *r);   /* malformed lines skipped */
long criteo_truncated(const struct criteo_reader *r); /* 0 or 1 */
void criteo_close(struct criteo_reader *r);

/* The whole file (plain or gzip) into memory, parsed on `threads` threads
 * (0: OpenMP's default): the samples, skips, truncation and errors of
 * criteo_next called line by line, at most max samples (0: all). *out is
 * malloc'ed; *skipped and *truncated are added to. */
int criteo_read_all(const char *path, enum criteo_bad bad, long max, int threads, struct criteo_sample **out,
                    long *n, long *skipped, long *truncated, plumb_err *e);
/* Test hook: bytes of text criteo_read_all parses per round (32 MiB). */
extern size_t criteo_read_chunk;

/* Writes one sample's line in the real format from raw values: dense[13]
 * integers with missing[i] != 0 written as empty, tokens[26] strings. */
int criteo_format_line(char *buf, size_t n, int label, const long long *dense,
                       const unsigned char *missing, const char *const *tokens);

#endif
