/* A Criteo file parsed on several threads (criteo.h, criteo_read_all): zlib
 * reads (and inflates) chunks of whole lines on the calling thread, the
 * lines of a chunk are parsed in parallel into their final slots, and a
 * serial pass in line order takes the decisions criteo_next takes one line
 * at a time: a malformed line is an error naming file, line and field, or
 * skipped and counted (the first five warned about); an incomplete last
 * line without a newline is dropped with a warning; `max` samples at most.
 * The samples are those of the streaming reader, bit for bit (the parse of
 * a line is the same function). */
#include "models/ctr/criteo.h"
#include "core/hugemem.h"
#include "core/log.h"
#include <errno.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

size_t criteo_read_chunk = (size_t)32 << 20; /* bytes of text parsed per round */
#define CHUNK criteo_read_chunk

struct lines {
    size_t *start, *len;
    unsigned char *nl, *bad;
    size_t n, cap;
};

static int lines_grow(struct lines *L, size_t need)
{
    if (need <= L->cap) return 0;
    size_t c = L->cap ? L->cap : 1 << 16;
    while (c < need) c *= 2;
    size_t *s = realloc(L->start, c * sizeof *s), *l = s ? realloc(L->len, c * sizeof *l) : NULL;
    if (s) L->start = s;
    if (l) L->len = l;
    unsigned char *nl = l ? realloc(L->nl, c) : NULL;
    if (nl) L->nl = nl;
    unsigned char *bad = nl ? realloc(L->bad, c) : NULL;
    if (bad) L->bad = bad;
    if (!bad) return -1;
    L->cap = c;
    return 0;
}

static size_t count_fields(const char *p, size_t n)
{
    size_t f = 1;
    for (size_t i = 0; i < n; i++) f += p[i] == '\t';
    return f;
}

int criteo_read_all(const char *path, enum criteo_bad bad, long max, int threads, struct criteo_sample **out,
                    long *n_out, long *skipped_out, long *truncated_out, plumb_err *e)
{
    *out = NULL;
    *n_out = 0;
    errno = 0;
    gzFile gz = gzopen(path, "rb");
    if (!gz) return err_set(e, PLUMB_EUSAGE, "%s: cannot open: %s", path, errno ? strerror(errno) : "zlib error");
    gzbuffer(gz, 1 << 20);
    if (threads < 1) threads = omp_get_max_threads();
    size_t bcap = CHUNK + 4096, have = 0; /* have: bytes in buf (a carried partial line first) */
    char *buf = malloc(bcap);
    struct lines L = {0};
    size_t vcap = 1 << 16, cnt = 0;
    struct criteo_sample *v = malloc(vcap * sizeof *v);
    long lineno = 0, skipped = 0, truncated = 0;
    huge_advise(v, vcap * sizeof *v); /* the batches gather from it at random (core/hugemem.h) */
    int rc = buf && v ? PLUMB_OK : err_set(e, PLUMB_ENOMEM, "%s: out of memory", path);
    int eof = 0, done = 0;
    while (!rc && !done) {
        /* fill the buffer up to CHUNK new bytes (or the end of the file) */
        size_t want = have + CHUNK > bcap ? bcap - have : CHUNK;
        size_t got = 0;
        while (got < want && !eof) {
            int r = gzread(gz, buf + have + got, (unsigned)(want - got));
            if (r <= 0) {
                /* an error names the last whole line read, as the line-by-line
                 * reader does: those before this buffer plus the buffer's own
                 * (counted once, at the end of the file) */
                long whole = lineno;
                for (const char *q = buf, *end = buf + have + got; (q = memchr(q, '\n', (size_t)(end - q))); q++)
                    whole++;
                if ((rc = criteo_gz_end(gz, path, whole, r, e))) break;
                eof = 1;
                break;
            }
            got += (size_t)r;
        }
        if (rc) break;
        size_t total = have + got, complete = total;
        if (!eof) {
            char *last = memrchr(buf, '\n', total);
            if (!last) {
                /* no line ends in the buffer: read on, growing it once it is full,
                 * up to the line cap (a binary file or /dev/zero must not take
                 * all memory) */
                if (total > CRITEO_MAX_LINE) {
                    rc = criteo_line_too_long(path, lineno + 1, e);
                    break;
                }
                if (total == bcap) {
                    char *nb = realloc(buf, bcap * 2);
                    if (!nb) {
                        rc = err_set(e, PLUMB_ENOMEM, "%s: line %ld too long", path, lineno + 1);
                        break;
                    }
                    buf = nb, bcap *= 2;
                }
                have = total;
                continue;
            }
            complete = (size_t)(last - buf) + 1;
        }
        /* the lines of [0, complete): a last piece without '\n' only at the end of the file */
        L.n = 0;
        for (size_t p = 0; p < complete;) {
            const char *nlp = memchr(buf + p, '\n', complete - p);
            size_t len = nlp ? (size_t)(nlp - (buf + p)) : complete - p;
            if (lines_grow(&L, L.n + 1)) {
                rc = err_set(e, PLUMB_ENOMEM, "%s: out of memory", path);
                break;
            }
            L.start[L.n] = p, L.len[L.n] = len, L.nl[L.n] = nlp != NULL;
            L.n++;
            p += len + (nlp ? 1 : 0);
        }
        if (rc) break;
        if (cnt + L.n > vcap) {
            while (cnt + L.n > vcap) vcap *= 2;
            struct criteo_sample *nv = realloc(v, vcap * sizeof *v);
            if (!nv) {
                rc = err_set(e, PLUMB_ENOMEM, "%s: out of memory after %zu samples", path, cnt);
                break;
            }
            v = nv;
            huge_advise(v, vcap * sizeof *v); /* the batches gather from it at random (core/hugemem.h) */
        }
        /* parse in parallel into the slots cnt + i */
        const long nl = (long)L.n;
#pragma omp parallel for num_threads(threads) schedule(static, 4096) if (nl > 8192)
        for (long i = 0; i < nl; i++) {
            plumb_err pe = {0};
            L.bad[i] = criteo_parse_line(buf + L.start[i], L.len[i], &v[cnt + (size_t)i], &pe) != PLUMB_OK;
        }
        /* decisions in line order, compacting over skipped lines */
        size_t w = cnt;
        for (size_t i = 0; i < L.n && !rc; i++) {
            if (max > 0 && (long)w >= max) {
                done = 1;
                break;
            }
            lineno++;
            if (!L.bad[i]) {
                if (w != cnt + i) v[w] = v[cnt + i];
                w++;
                continue;
            }
            const char *s = buf + L.start[i];
            size_t len = L.len[i];
            plumb_err pe = {0};
            struct criteo_sample tmp;
            criteo_parse_line(s, len, &tmp, &pe); /* again, for its message */
            if (!L.nl[i]) {
                size_t f = count_fields(s, len);
                if (f < CRITEO_FIELDS) {
                    truncated++;
                    log_warn("%s: line %ld: last line is incomplete (%zu of %d fields, no newline): ignored", path,
                             lineno, f, CRITEO_FIELDS);
                    continue;
                }
            }
            if (bad == CRITEO_BAD_SKIP) {
                skipped++;
                if (skipped <= 5) log_warn("%s: line %ld: %s: skipped", path, lineno, pe.msg);
                continue;
            }
            rc = err_set(e, PLUMB_EUSAGE, "%s: line %ld: %s (use --bad-lines skip to skip such lines)", path, lineno,
                         pe.msg);
        }
        cnt = w;
        if (eof) done = 1;
        /* the partial line after the last '\n' starts the next round */
        have = total - complete;
        if (have && !done) memmove(buf, buf + complete, have);
    }
    gzclose(gz);
    free(buf);
    free(L.start), free(L.len), free(L.nl), free(L.bad);
    if (rc) {
        free(v);
        return rc;
    }
    if (skipped) log_warn("%s: %ld malformed lines skipped (--bad-lines skip)", path, skipped);
    *out = v;
    *n_out = (long)cnt;
    *skipped_out += skipped;
    *truncated_out += truncated;
    return PLUMB_OK;
}
