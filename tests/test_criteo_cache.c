/* models/ctr/criteo_par.c and cache.c: the parallel parse gives the
 * streaming reader's samples, skips, truncation and errors bit for bit
 * (across chunk boundaries and a line longer than a chunk), and the binary
 * cache maps back the same bytes, refusing a stale or corrupt one by name. */
#include "test.h"
#include "core/file.h"
#include "models/ctr/cache.h"
#include "models/ctr/criteo.h"
#include "models/ctr/data.h"
#include "models/ctr/synth.h"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define NL 30000

/* NL synthetic lines with awkward ones among them: malformed (bad), CRLF,
 * empty, one long line; the last line cut (no newline). */
static char *make_text(size_t *len, int with_bad)
{
    struct synth *s;
    plumb_err e = {0};
    if (synth_create(7, &s, &e)) return NULL;
    size_t cap = (size_t)NL * 400 + 100000, n = 0;
    char *t = malloc(cap);
    for (long i = 0; i < NL; i++) {
        struct synth_raw r;
        synth_raw_sample(s, 0, (uint64_t)i, &r);
        const char *tk[CRITEO_CAT];
        for (int k = 0; k < CRITEO_CAT; k++) tk[k] = r.token[k];
        int w = criteo_format_line(t + n, cap - n, r.label, r.dense, r.missing, tk);
        n += (size_t)w;
        if (i % 997 == 5) { /* CRLF */
            t[n - 1] = '\r';
            t[n++] = '\n';
        }
        if (with_bad && i % 4001 == 17) n += (size_t)sprintf(t + n, "1\t3\tx%ld\t1\n", i);
        if (with_bad && i == 20000) n += (size_t)sprintf(t + n, "\n");
        if (i == 12345) { /* a long line: a token of 100 kB in C26 (then a valid line) */
            n--;
            memset(t + n, 'a', 100000);
            n += 100000;
            t[n++] = '\n';
        }
    }
    n += (size_t)sprintf(t + n, "1\t2\t3");
    synth_free(s);
    *len = n;
    return t;
}

/* The clean text (make_text) written to test_tmpdir()/name as path; cache:
 * the path of its binary cache (not written). 0 or an error. */
static int write_tsv_and_name_cache(const char *name, char *path, size_t np, char *cache, size_t nc, plumb_err *e)
{
    if (file_join(path, np, test_tmpdir(), name, e)) return -1;
    snprintf(cache, nc, "%s%s", path, CRITEO_CACHE_SUFFIX);
    size_t len;
    char *t = make_text(&len, 0);
    const int rc = t ? file_write_atomic(path, t, len, e) : -1;
    free(t);
    return rc;
}

static int stream_all(const char *path, enum criteo_bad bad, struct criteo_sample **out, long *n, long *sk, long *tr,
                      plumb_err *e)
{
    struct criteo_reader *r;
    int rc = criteo_open(path, bad, &r, e);
    if (rc) return rc;
    size_t cap = 1024;
    struct criteo_sample *v = malloc(cap * sizeof *v);
    *n = 0;
    for (;;) {
        int got;
        if ((size_t)*n == cap) v = realloc(v, (cap *= 2) * sizeof *v);
        if ((rc = criteo_next(r, &v[*n], &got, e)) || !got) break;
        (*n)++;
    }
    *sk = criteo_skipped(r), *tr = criteo_truncated(r);
    criteo_close(r);
    *out = v;
    return rc;
}

TEST(criteo_parallel_parse_equals_streaming)
{
    char path[512], gzp[512];
    plumb_err e = {0};
    REQUIRE(!file_join(path, sizeof path, test_tmpdir(), "par.tsv", &e));
    REQUIRE(!file_join(gzp, sizeof gzp, test_tmpdir(), "par.tsv.gz", &e));
    size_t len;
    char *t = make_text(&len, 1);
    REQUIRE(t);
    REQUIRE(!file_write_atomic(path, t, len, &e));
    gzFile g = gzopen(gzp, "wb1");
    REQUIRE(g && gzwrite(g, t, (unsigned)len) == (int)len && gzclose(g) == Z_OK);
    struct criteo_sample *a, *b;
    long na, nb, ska = 0, skb = 0, tra = 0, trb = 0;
    REQUIRE(stream_all(path, CRITEO_BAD_SKIP, &a, &na, &ska, &tra, &e) == 0);
    CHECK(na > NL - 100 && ska >= 8 && tra == 1);
    size_t chunks[] = {(size_t)32 << 20, 65536, 4096};
    for (int c = 0; c < 3; c++) {
        criteo_read_chunk = chunks[c];
        for (int z = 0; z < 2; z++) {
            skb = trb = 0;
            int rc = criteo_read_all(z ? gzp : path, CRITEO_BAD_SKIP, 0, 3, &b, &nb, &skb, &trb, &e);
            CHECK_MSG(rc == 0, "chunk %zu: %s", chunks[c], e.msg);
            if (rc) break;
            CHECK_MSG(nb == na && skb == ska && trb == tra, "chunk %zu %s: %ld/%ld/%ld vs streaming %ld/%ld/%ld",
                      chunks[c], z ? "gz" : "plain", nb, skb, trb, na, ska, tra);
            CHECK_MSG(nb == na && !memcmp(a, b, (size_t)na * sizeof *a), "chunk %zu: samples differ", chunks[c]);
            free(b);
        }
        /* --bad-lines error: the same message, naming file, line and field */
        plumb_err e1 = {0}, e2 = {0};
        struct criteo_sample *x;
        long nx, s1 = 0, t1 = 0;
        CHECK(stream_all(path, CRITEO_BAD_ERROR, &x, &nx, &s1, &t1, &e1) == PLUMB_EUSAGE);
        free(x);
        CHECK(criteo_read_all(path, CRITEO_BAD_ERROR, 0, 3, &x, &nx, &s1, &t1, &e2) == PLUMB_EUSAGE);
        CHECK_MSG(!strcmp(e1.msg, e2.msg) && strstr(e2.msg, "line 19"), "'%s' vs '%s'", e1.msg, e2.msg);
        /* max samples: the first max of the streaming reader */
        skb = trb = 0;
        REQUIRE(criteo_read_all(path, CRITEO_BAD_SKIP, 9999, 2, &b, &nb, &skb, &trb, &e) == 0);
        CHECK(nb == 9999 && !memcmp(a, b, 9999 * sizeof *a));
        free(b);
    }
    criteo_read_chunk = (size_t)32 << 20;
    free(a);
    free(t);
}

TEST(criteo_cache_maps_the_parsed_rows_and_refuses_stale_or_corrupt)
{
    char path[512], cache[600];
    plumb_err e = {0};
    REQUIRE(write_tsv_and_name_cache("c.tsv", path, sizeof path, cache, sizeof cache, &e) == 0);
    struct criteo_sample *a;
    long na, sk = 0, tr = 0;
    REQUIRE(criteo_read_all(path, CRITEO_BAD_ERROR, 0, 2, &a, &na, &sk, &tr, &e) == 0);
    struct criteo_cache info, c;
    REQUIRE(criteo_cache_write(path, cache, CRITEO_BAD_ERROR, 2, &info, &e) == 0);
    CHECK(info.rows == na && info.truncated == 1);
    REQUIRE(criteo_cache_map(cache, NULL, &c, &e) == 0);
    CHECK_MSG(c.rows == na && !memcmp(c.samples, a, (size_t)na * sizeof *a), "cache rows %ld vs parsed %ld", c.rows, na);
    CHECK(c.truncated == 1 && !strcmp(c.source, path));
    criteo_cache_unmap(&c);
    /* stale: the source's mtime moves */
    struct timespec ts[2] = {{1000000000, 0}, {1000000000, 0}};
    REQUIRE(utimensat(AT_FDCWD, path, ts, 0) == 0);
    CHECK(criteo_cache_map(cache, path, &c, &e) == PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, cache) && strstr(e.msg, "stale"), "%s", e.msg);
    REQUIRE(criteo_cache_write(path, cache, CRITEO_BAD_ERROR, 2, &info, &e) == 0);
    REQUIRE(criteo_cache_map(cache, path, &c, &e) == 0);
    criteo_cache_unmap(&c);
    /* corrupt: one sample byte flipped; the header; a cut file */
    char *img;
    size_t il;
    REQUIRE(file_read_all(cache, &img, &il, &e) == 0);
    const char *names[3] = {"checksum", "header checksum", "bytes"};
    for (int k = 0; k < 3; k++) {
        char bad[600];
        snprintf(bad, sizeof bad, "%s/bad%d%s", test_tmpdir(), k, CRITEO_CACHE_SUFFIX);
        char *cp = malloc(il);
        memcpy(cp, img, il);
        size_t wl = il;
        if (k == 0) cp[256 + 160 * 77 + 5] ^= 1;
        if (k == 1) cp[20] ^= 1;
        if (k == 2) wl -= 160;
        REQUIRE(file_write_atomic(bad, cp, wl, &e) == 0);
        free(cp);
        err_clear(&e);
        CHECK(criteo_cache_map(bad, path, &c, &e) == PLUMB_ECORRUPT);
        CHECK_MSG(strstr(e.msg, bad) && strstr(e.msg, names[k]), "%s", e.msg);
    }
    free(img);
    free(a);
}

/* A cache truncated while it is mapped (core/mapguard.h): a batch with a
 * sample past the new end is PLUMB_EIO naming the cache (data_fill, the
 * reader of the training loader and feed); a batch inside it fills as
 * before. (Unguarded, the gather raised SIGBUS.) */
TEST(criteo_cache_truncated_while_mapped)
{
    char path[512], cache[600];
    plumb_err e = {0};
    REQUIRE(write_tsv_and_name_cache("shrink.tsv", path, sizeof path, cache, sizeof cache, &e) == 0);
    struct criteo_cache info;
    REQUIRE(criteo_cache_write(path, cache, CRITEO_BAD_ERROR, 2, &info, &e) == 0);
    struct data_opts o = {.eval_fraction = 0.1, .bad = CRITEO_BAD_ERROR};
    struct dataset *d = NULL;
    REQUIRE(dataset_open(cache, &o, &d, &e) == 0);
    REQUIRE(truncate(cache, 256 + 160 * 1000) == 0); /* 1000 rows left */
    int64_t rows[CRITEO_CAT];
    for (int k = 0; k < CRITEO_CAT; k++) rows[k] = 1000 + k;
    enum { B = 64 };
    uint32_t idx[B];
    float dense[B * CRITEO_DENSE], lab[B];
    uint32_t sparse[B * CRITEO_CAT];
    for (int i = 0; i < B; i++) idx[i] = (uint32_t)(i * 7);
    CHECK_EQ_INT(data_fill(d, 0, idx, B, rows, dense, sparse, lab, &e), PLUMB_OK);
    idx[B - 1] = 20000;
    CHECK_EQ_INT(data_fill(d, 0, idx, B, rows, dense, sparse, lab, &e), PLUMB_EIO);
    CHECK_MSG(strstr(e.msg, cache) && strstr(e.msg, "Criteo cache shrank while being read"), "%s", e.msg);
    /* the eval split (the tail of the same cache) */
    err_clear(&e);
    idx[0] = 0;
    CHECK_EQ_INT(data_fill(d, 1, idx, 1, rows, dense, sparse, lab, &e), PLUMB_EIO);
    CHECK_MSG(strstr(e.msg, cache), "%s", e.msg);
    dataset_free(d);
}
