/* The binary cache of a Criteo file (cache.h). */
#include "models/ctr/cache.h"
#include "core/file.h"
#include "core/mapguard.h"
#include <errno.h>
#include <fcntl.h>
#include <omp.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define HDR 256
#define HDR_CRC_AT 252
#define SRC_AT 60
#define SRC_LEN 180
#define MODE_AT (SRC_AT + SRC_LEN) /* 240 */
#define DCRC_AT (MODE_AT + 4)      /* 244 */
static const char MAGIC[8] = {'P', 'L', 'U', 'M', 'B', 'C', 'R', 'C'};

int criteo_cache_is(const char *path)
{
    size_t n = strlen(path), k = strlen(CRITEO_CACHE_SUFFIX);
    return n > k && !strcmp(path + n - k, CRITEO_CACHE_SUFFIX);
}

/* The mapping of a cache being checked: its range and name, for guarded reads. */
struct cmap {
    const void *map;
    size_t len;
    const char *path;
};

/* crc32(x, p, len) into *out. m: the mapping p lies in, read under a guard
 * (core/mapguard.h: a cache truncated while it is checked faults, and this
 * says so); NULL: memory of our own, nothing to guard */
static int crc_piece(const struct cmap *m, uLong x, const void *p, size_t len, uLong *out, plumb_err *e)
{
    if (!m) {
        *out = crc32(x, p, (uInt)len);
        return PLUMB_OK;
    }
    struct mapguard g;
    mapguard_prepare(&g, m->map, m->len);
    if (sigsetjmp(g.jb, 0)) return mapguard_error(&g, m->path, "Criteo cache", e);
    mapguard_arm(&g);
    uLong c = crc32(x, p, (uInt)len);
    mapguard_disarm(&g);
    *out = c;
    return PLUMB_OK;
}

/* CRC-32 of n bytes in 64 MiB pieces on all threads, combined in order. m:
 * the mapping p lies in (NULL: memory of our own, nothing to guard). */
static int crc_par(const struct cmap *m, const void *p, size_t n, uint32_t *crc, plumb_err *e)
{
    const size_t piece = (size_t)64 << 20;
    long np = (long)((n + piece - 1) / piece);
    int rc = PLUMB_OK;
    uLong x = 0;
    if (np <= 1) {
        rc = crc_piece(m, 0L, p, n, &x, e);
        *crc = (uint32_t)x;
        return rc;
    }
    uLong *c = malloc((size_t)np * sizeof *c);
    if (!c) { /* serial then */
        for (size_t o = 0; o < n && !rc; o += piece) {
            const size_t len = n - o < piece ? n - o : piece;
            rc = crc_piece(m, x, (const Bytef *)p + o, len, &x, e);
        }
        *crc = (uint32_t)x;
        return rc;
    }
#pragma omp parallel for schedule(static)
    for (long i = 0; i < np; i++) {
        size_t o = (size_t)i * piece, len = n - o < piece ? n - o : piece;
        plumb_err ei;
        const int r = crc_piece(m, 0L, (const Bytef *)p + o, len, &c[i], &ei);
        if (r) err_keep_first(r, &ei, &rc, e);
    }
    x = c[0];
    for (long i = 1; i < np && !rc; i++) {
        size_t o = (size_t)i * piece, len = n - o < piece ? n - o : piece;
        x = crc32_combine(x, c[i], (z_off_t)len);
    }
    free(c);
    *crc = (uint32_t)x;
    return rc;
}

static void put32(unsigned char *h, size_t at, uint32_t v) { memcpy(h + at, &v, 4); }
static void put64(unsigned char *h, size_t at, uint64_t v) { memcpy(h + at, &v, 8); }
static uint32_t get32(const unsigned char *h, size_t at)
{
    uint32_t v;
    memcpy(&v, h + at, 4);
    return v;
}
static uint64_t get64(const unsigned char *h, size_t at)
{
    uint64_t v;
    memcpy(&v, h + at, 8);
    return v;
}

int criteo_cache_write(const char *src, const char *out, enum criteo_bad bad, int threads, struct criteo_cache *info,
                       plumb_err *e)
{
    struct stat st;
    if (stat(src, &st)) return err_set(e, PLUMB_EUSAGE, "%s: cannot stat: %s", src, strerror(errno));
    if (strlen(src) >= SRC_LEN)
        return err_set(e, PLUMB_EUSAGE, "%s: path longer than %d bytes (the cache records it)", src, SRC_LEN - 1);
    struct criteo_sample *v;
    long n = 0, skipped = 0, truncated = 0;
    int rc = criteo_read_all(src, bad, 0, threads, &v, &n, &skipped, &truncated, e);
    if (rc) return rc;
    if (n == 0) { /* a cache of nothing trains nothing: said now, not by plumb train */
        free(v);
        return err_set(e, PLUMB_EUSAGE, "%s: no samples (%ld malformed line%s skipped, %ld truncated; expected Criteo "
                       "lines: label, 13 integer and 26 categorical fields)", src, skipped, skipped == 1 ? "" : "s", truncated);
    }
    unsigned char h[HDR];
    memset(h, 0, sizeof h);
    memcpy(h, MAGIC, 8);
    put32(h, 8, CRITEO_CACHE_VERSION);
    put32(h, 12, (uint32_t)sizeof(struct criteo_sample));
    put64(h, 16, (uint64_t)n);
    put64(h, 24, (uint64_t)skipped);
    put64(h, 32, (uint64_t)truncated);
    put64(h, 40, (uint64_t)st.st_size);
    put64(h, 48, (uint64_t)st.st_mtim.tv_sec);
    put32(h, 56, (uint32_t)st.st_mtim.tv_nsec);
    /* 60: source path [180]; the mode and the data CRC after it */
    memcpy(h + SRC_AT, src, strlen(src));
    size_t bytes = (size_t)n * sizeof *v;
    put32(h, MODE_AT, (uint32_t)bad);
    uint32_t dcrc = 0;
    (void)crc_par(NULL, v, bytes, &dcrc, NULL); /* our own memory: cannot fail */
    put32(h, DCRC_AT, dcrc);
    put32(h, HDR_CRC_AT, (uint32_t)crc32(0L, h, HDR_CRC_AT));
    const void *bufs[2] = {h, v};
    size_t lens[2] = {HDR, bytes};
    rc = file_write_atomic_iov(out, bufs, lens, 2, e);
    free(v);
    if (rc) return err_wrap(e, "writing the cache %s", out);
    if (info) {
        memset(info, 0, sizeof *info);
        info->rows = n, info->skipped = skipped, info->truncated = truncated, info->bad = bad;
        snprintf(info->source, sizeof info->source, "%s", src);
    }
    return PLUMB_OK;
}

int criteo_cache_map(const char *path, const char *src, struct criteo_cache *c, plumb_err *e)
{
    memset(c, 0, sizeof *c);
    /* only a regular file can be mapped */
    int fd;
    struct stat st;
    int r = file_open_regular(path, 0, &fd, &st);
    if (r > 0) return err_set(e, PLUMB_EUSAGE, "%s: cannot open the cache: %s", path, strerror(r));
    if (r < 0)
        return err_set(e, PLUMB_EUSAGE, "%s: not a regular file but %s (expected a cache written by plumb data cache)",
                       path, file_kind(&st));
    if (st.st_size < HDR) {
        close(fd);
        return err_set(e, PLUMB_ECORRUPT, "%s: corrupt cache: %lld bytes, shorter than its %d-byte header (rewrite it "
                       "with plumb data cache)", path, (long long)st.st_size, HDR);
    }
    /* every read of the mapping is guarded: a cache truncated while it is
     * mapped is an error naming it, not a SIGBUS */
    int rc = mapguard_init(e);
    if (rc) {
        close(fd);
        return rc;
    }
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return err_set(e, PLUMB_EIO, "%s: cannot map the cache: %s", path, strerror(errno));
    const struct cmap cm = {m, (size_t)st.st_size, path};
    unsigned char h[HDR] = {0};
    rc = mapguard_memcpy(m, cm.len, path, "Criteo cache", h, m, HDR, e);
    uint64_t rows = get64(h, 16);
    uint32_t dcrc = 0;
    if (rc) {
        /* the file shrank already (said above) */
    } else if (memcmp(h, MAGIC, 8))
        rc = err_set(e, PLUMB_ECORRUPT, "%s: not a plumb Criteo cache (bad magic)", path);
    else if (get32(h, HDR_CRC_AT) != (uint32_t)crc32(0L, h, HDR_CRC_AT))
        rc = err_set(e, PLUMB_ECORRUPT, "%s: corrupt cache: header checksum mismatch (rewrite it with plumb data cache)",
                     path);
    else if (get32(h, 8) != CRITEO_CACHE_VERSION || get32(h, 12) != sizeof(struct criteo_sample))
        rc = err_set(e, PLUMB_ECORRUPT, "%s: cache version %u with %u-byte samples, expected version %d with %zu "
                     "(rewrite it with plumb data cache)", path, get32(h, 8), get32(h, 12), CRITEO_CACHE_VERSION,
                     sizeof(struct criteo_sample));
    else if ((uint64_t)st.st_size != HDR + rows * sizeof(struct criteo_sample))
        rc = err_set(e, PLUMB_ECORRUPT, "%s: corrupt cache: %lld bytes, the header says %llu rows (%llu bytes)", path,
                     (long long)st.st_size, (unsigned long long)rows,
                     (unsigned long long)(HDR + rows * sizeof(struct criteo_sample)));
    char rec[SRC_LEN + 1];
    memcpy(rec, h + SRC_AT, SRC_LEN);
    rec[SRC_LEN] = 0;
    const char *against = src ? src : rec;
    struct stat ss;
    if (!rc && *against && !stat(against, &ss) &&
        ((uint64_t)ss.st_size != get64(h, 40) || (uint64_t)ss.st_mtim.tv_sec != get64(h, 48) ||
         (uint32_t)ss.st_mtim.tv_nsec != get32(h, 56)))
        rc = err_set(e, PLUMB_EUSAGE, "%s: stale cache: %s has changed since it was written (size %lld, was %llu; "
                     "mtime %lld, was %llu); rewrite it with plumb data cache %s, or remove it", path, against,
                     (long long)ss.st_size, (unsigned long long)get64(h, 40), (long long)ss.st_mtim.tv_sec,
                     (unsigned long long)get64(h, 48), against);
    if (!rc) rc = crc_par(&cm, (const unsigned char *)m + HDR, rows * sizeof(struct criteo_sample), &dcrc, e);
    if (!rc && get32(h, DCRC_AT) != dcrc)
        rc = err_set(e, PLUMB_ECORRUPT, "%s: corrupt cache: the samples' checksum does not match the header (rewrite "
                     "it with plumb data cache)", path);
    if (rc) {
        munmap(m, (size_t)st.st_size);
        return rc;
    }
    c->path = strdup(path);
    if (!c->path) {
        munmap(m, (size_t)st.st_size);
        return err_set(e, PLUMB_ENOMEM, "%s: out of memory", path);
    }
    c->map = m;
    c->map_len = (size_t)st.st_size;
    c->samples = (const struct criteo_sample *)((const unsigned char *)m + HDR);
    c->rows = (long)rows;
    c->skipped = (long)get64(h, 24);
    c->truncated = (long)get64(h, 32);
    c->bad = (enum criteo_bad)get32(h, MODE_AT);
    snprintf(c->source, sizeof c->source, "%s", rec);
    return PLUMB_OK;
}

void criteo_cache_unmap(struct criteo_cache *c)
{
    if (c && c->map) munmap(c->map, c->map_len);
    if (c) free(c->path);
    if (c) memset(c, 0, sizeof *c);
}

int criteo_cache_holds(const struct criteo_cache *c, const void *p)
{
    const char *a = p, *lo = c->map;
    return lo && a >= lo && a < lo + c->map_len;
}
