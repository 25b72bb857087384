/* Criteo TSV reader: streaming (a fixed read buffer over zlib's gzread, which
 * reads plain files unchanged), one line at a time, errors naming file, line
 * and field. */
#include "models/ctr/criteo.h"
#include "core/log.h"
#include <errno.h>
#include "core/gmath.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

uint32_t criteo_hash(int field, const char *tok, size_t len)
{
    uint32_t h = 2166136261u;
    h ^= (uint32_t)(field & 0xff);
    h *= 16777619u;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)tok[i];
        h *= 16777619u;
    }
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

float criteo_dense_transform(long long x)
{
    /* golden log (core/gmath.h): the same bits on every host; 1 + x >= 2, so
     * log(1 + x) loses nothing against log1p */
    if (x <= 0) return 0.0f;
    return glogf((float)x + 1.0f);
}

/* A decimal integer in the long long range (LLONG_MIN..LLONG_MAX), with an
 * optional sign; anything beyond is refused, never wrapped. */
static int parse_int(const char *p, size_t n, long long *out)
{
    size_t i = 0;
    int neg = 0;
    if (n && (p[0] == '-' || p[0] == '+')) neg = p[0] == '-', i = 1;
    if (i == n) return 0;
    const unsigned long long lim = neg ? 9223372036854775808ull : 9223372036854775807ull; /* |LLONG_MIN|, LLONG_MAX */
    unsigned long long v = 0;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return 0;
        const unsigned dgt = (unsigned)(p[i] - '0');
        if (v > (lim - dgt) / 10) return 0; /* v * 10 + dgt > lim */
        v = v * 10 + dgt;
    }
    *out = !neg ? (long long)v : v ? -(long long)(v - 1) - 1 : 0;
    return 1;
}

static void field_name(int f, char *buf, size_t n)
{
    if (f == 0) snprintf(buf, n, "label (column 1)");
    else if (f <= CRITEO_DENSE) snprintf(buf, n, "I%d (column %d)", f, f + 1);
    else snprintf(buf, n, "C%d (column %d)", f - CRITEO_DENSE, f + 1);
}

static void quote(const char *p, size_t n, char *buf, size_t bn)
{
    size_t k = n < 40 ? n : 40;
    size_t j = 0;
    for (size_t i = 0; i < k && j + 5 < bn; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c >= 32 && c < 127) buf[j++] = (char)c;
        else j += (size_t)snprintf(buf + j, bn - j, "\\x%02x", c);
    }
    if (n > k && j + 4 < bn) buf[j++] = '.', buf[j++] = '.', buf[j++] = '.';
    buf[j] = '\0';
}

int criteo_parse_line(const char *line, size_t len, struct criteo_sample *s, plumb_err *e)
{
    if (len && line[len - 1] == '\r') len--;
    const char *p = line, *end = line + len;
    int f = 0;
    char fname[32], q[200];
    for (;;) {
        const char *tab = memchr(p, '\t', (size_t)(end - p));
        const char *fe = tab ? tab : end;
        size_t n = (size_t)(fe - p);
        if (f >= CRITEO_FIELDS)
            return err_set(e, PLUMB_EUSAGE, "more than %d tab-separated fields", CRITEO_FIELDS);
        if (f == 0) {
            if (n != 1 || (p[0] != '0' && p[0] != '1')) {
                quote(p, n, q, sizeof q);
                return err_set(e, PLUMB_EUSAGE, "label (column 1): '%s' is not 0 or 1", q);
            }
            s->label = p[0] == '1' ? 1.0f : 0.0f;
        } else if (f <= CRITEO_DENSE) {
            long long v = 0;
            if (n && !parse_int(p, n, &v)) {
                field_name(f, fname, sizeof fname);
                quote(p, n, q, sizeof q);
                return err_set(e, PLUMB_EUSAGE, "%s: '%s' is not an integer", fname, q);
            }
            s->dense[f - 1] = n ? criteo_dense_transform(v) : 0.0f;
        } else {
            s->cat[f - 1 - CRITEO_DENSE] = criteo_hash(f - 1 - CRITEO_DENSE, p, n);
        }
        f++;
        if (!tab) break;
        p = tab + 1;
    }
    if (f != CRITEO_FIELDS)
        return err_set(e, PLUMB_EUSAGE, "%d tab-separated fields, expected %d (label, I1..I13, C1..C26)", f,
                       CRITEO_FIELDS);
    return PLUMB_OK;
}

int criteo_format_line(char *buf, size_t n, int label, const long long *dense,
                       const unsigned char *missing, const char *const *tokens)
{
    size_t j = 0;
    int w = snprintf(buf, n, "%d", label ? 1 : 0);
    if (w < 0 || (size_t)w >= n) return -1;
    j = (size_t)w;
    for (int i = 0; i < CRITEO_DENSE; i++) {
        if (missing && missing[i]) w = snprintf(buf + j, n - j, "\t");
        else w = snprintf(buf + j, n - j, "\t%lld", dense[i]);
        if (w < 0 || (size_t)w >= n - j) return -1;
        j += (size_t)w;
    }
    for (int i = 0; i < CRITEO_CAT; i++) {
        w = snprintf(buf + j, n - j, "\t%s", tokens[i] ? tokens[i] : "");
        if (w < 0 || (size_t)w >= n - j) return -1;
        j += (size_t)w;
    }
    w = snprintf(buf + j, n - j, "\n");
    if (w < 0 || (size_t)w >= n - j) return -1;
    return (int)(j + 1);
}

#define RBUF (1 << 20)

struct criteo_reader {
    gzFile gz;
    char *path;
    enum criteo_bad bad;
    char *rbuf;          /* raw read buffer */
    size_t rpos, rlen;
    int eof;
    char *line;          /* current line (grows) */
    size_t cap;
    long lineno, skipped, truncated;
};

int criteo_open(const char *path, enum criteo_bad bad, struct criteo_reader **out, plumb_err *e)
{
    *out = NULL;
    gzFile gz = gzopen(path, "rb");
    if (!gz) return err_set(e, PLUMB_EUSAGE, "%s: cannot open: %s", path, errno ? strerror(errno) : "zlib error");
    gzbuffer(gz, 1 << 18);
    struct criteo_reader *r = calloc(1, sizeof *r);
    if (!r || !(r->rbuf = malloc(RBUF)) || !(r->line = malloc(4096)) || !(r->path = strdup(path))) {
        gzclose(gz);
        if (r) free(r->rbuf), free(r->line), free(r);
        return err_set(e, PLUMB_ENOMEM, "%s: out of memory", path);
    }
    r->gz = gz;
    r->cap = 4096;
    r->bad = bad;
    *out = r;
    return PLUMB_OK;
}

/* gzread ended (returned 0 or less): a clean end of file, or an error. A
 * gzip member cut short (a copy or download that stopped early) reads as a
 * short stream whose end zlib reports as Z_BUF_ERROR ("unexpected end of
 * file"); without this check the rows before the cut train silently. */
int criteo_gz_end(void *gzv, const char *path, long lineno, int got, plumb_err *e)
{
    gzFile gz = gzv;
    int zerr = Z_OK;
    const char *m = gzerror(gz, &zerr);
    if (got == 0 && (zerr == Z_OK || zerr == Z_STREAM_END)) return PLUMB_OK;
    if (zerr == Z_BUF_ERROR)
        return err_set(e, PLUMB_EUSAGE,
                       "%s: truncated gzip stream after line %ld (read error: the file ends inside its compressed "
                       "data: an incomplete copy or download?)",
                       path, lineno);
    if (zerr == Z_ERRNO)
        return err_set(e, PLUMB_EUSAGE, "%s: line %ld: read error: %s", path, lineno + 1, strerror(errno));
    return err_set(e, PLUMB_EUSAGE, "%s: line %ld: read error: %s", path, lineno + 1, m && *m ? m : "zlib error");
}

int criteo_line_too_long(const char *path, long lineno, plumb_err *e)
{
    return err_set(e, PLUMB_EUSAGE,
                   "%s: line %ld is longer than %d bytes (not a Criteo TSV file? a line has 40 tab-separated "
                   "fields, ~200 bytes)",
                   path, lineno, CRITEO_MAX_LINE);
}

static int read_end(struct criteo_reader *r, int got, plumb_err *e)
{
    return criteo_gz_end(r->gz, r->path, r->lineno, got, e);
}

/* Reads the next line into r->line; *len its length; *nl whether it ended in
 * '\n'; returns 0 at end of file with nothing read, 1 when a line was read.
 * A line longer than CRITEO_MAX_LINE is an error (a binary file or
 * /dev/zero must not grow the buffer until memory runs out). */
static int read_line(struct criteo_reader *r, size_t *len, int *nl, plumb_err *e)
{
    size_t n = 0;
    *nl = 0;
    for (;;) {
        if (r->rpos == r->rlen) {
            if (r->eof) break;
            int got = gzread(r->gz, r->rbuf, RBUF);
            if (got <= 0) {
                if (read_end(r, got, e)) return -1;
                r->eof = 1;
                break;
            }
            r->rpos = 0;
            r->rlen = (size_t)got;
        }
        char *s = r->rbuf + r->rpos;
        size_t avail = r->rlen - r->rpos;
        char *nlp = memchr(s, '\n', avail);
        size_t take = nlp ? (size_t)(nlp - s) : avail;
        if (n + take > CRITEO_MAX_LINE) return criteo_line_too_long(r->path, r->lineno + 1, e), -1;
        if (n + take + 1 > r->cap) {
            size_t nc = r->cap;
            while (n + take + 1 > nc) nc *= 2;
            char *nb = realloc(r->line, nc);
            if (!nb) return err_set(e, PLUMB_ENOMEM, "%s: line %ld: out of memory", r->path, r->lineno + 1), -1;
            r->line = nb;
            r->cap = nc;
        }
        memcpy(r->line + n, s, take);
        n += take;
        r->rpos += take + (nlp ? 1 : 0);
        if (nlp) {
            *nl = 1;
            break;
        }
    }
    r->line[n] = '\0';
    *len = n;
    return (n > 0 || *nl) ? 1 : 0;
}

int criteo_next(struct criteo_reader *r, struct criteo_sample *s, int *got, plumb_err *e)
{
    *got = 0;
    for (;;) {
        size_t len;
        int nl;
        int rc = read_line(r, &len, &nl, e);
        if (rc < 0) return e ? e->code : PLUMB_EUSAGE;
        if (rc == 0) return PLUMB_OK;
        r->lineno++;
        plumb_err pe = {0};
        if (criteo_parse_line(r->line, len, s, &pe) == PLUMB_OK) {
            *got = 1;
            return PLUMB_OK;
        }
        if (!nl) {
            /* last line without newline and malformed: a write cut short */
            size_t fields = 1;
            for (size_t i = 0; i < len; i++) fields += r->line[i] == '\t';
            if (fields < CRITEO_FIELDS) {
                r->truncated++;
                log_warn("%s: line %ld: last line is incomplete (%zu of %d fields, no newline): ignored",
                         r->path, r->lineno, fields, CRITEO_FIELDS);
                return PLUMB_OK;
            }
        }
        if (r->bad == CRITEO_BAD_SKIP) {
            r->skipped++;
            if (r->skipped <= 5) log_warn("%s: line %ld: %s: skipped", r->path, r->lineno, pe.msg);
            continue;
        }
        return err_set(e, PLUMB_EUSAGE, "%s: line %ld: %s (use --bad-lines skip to skip such lines)",
                       r->path, r->lineno, pe.msg);
    }
}

long criteo_skipped(const struct criteo_reader *r) { return r->skipped; }
long criteo_truncated(const struct criteo_reader *r) { return r->truncated; }

void criteo_close(struct criteo_reader *r)
{
    if (!r) return;
    gzclose(r->gz);
    free(r->rbuf);
    free(r->line);
    free(r->path);
    free(r);
}
