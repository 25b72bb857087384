#include "train/ckpt.h"
#include "core/file.h"
#include "core/hash.h"
#include "core/log.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAGIC "PLUMBCK1"
#define VERSION 2u /* 2: 64-byte section names (tensor names like layer1.0.downsample.1.running_mean); 1: 32 */
#define HDR 24   /* magic 8 + version 4 + nsec 4 + step 8 */
#define ENT_OF(nm) ((nm) + 24) /* name + offset 8 + length 8 + crc 4 + pad 4 */
#define NAME_V1 32
#define ENT ENT_OF(CKPT_NAME_MAX) /* version 2: 88 */
#define ALIGN 64 /* section data alignment in the file */

static void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

int ckpt_path(const char *dir, long step, char *out, size_t n, plumb_err *e)
{
    char name[64];
    snprintf(name, sizeof name, "ckpt-%010ld.plumb", step);
    return file_join(out, n, dir, name, e);
}

int ckpt_check_dir_names(const char *dir, plumb_err *e)
{
    /* the longest name a write makes: a step of 10 digits, the temp suffix with a pid of up to 10 */
    int w = snprintf(NULL, 0, "%s/ckpt-%010ld.plumb.tmp.%d", dir, 0L, INT_MAX);
    if (w < 0 || w >= PATH_MAX)
        return err_set(e, PLUMB_EUSAGE, "--checkpoint-dir: path '%.60s...' is too long: its checkpoint files' names "
                       "(%d bytes) would not fit a path (at most %d)", dir, w, PATH_MAX - 1);
    return PLUMB_OK;
}

static int cmp_desc(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x < y) - (x > y);
}

int ckpt_list(const char *dir, long **steps, int *n, plumb_err *e)
{
    *steps = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return PLUMB_OK;
        return err_set(e, PLUMB_EIO, "checkpoint directory %s: %s", dir, strerror(errno));
    }
    int cap = 16, cnt = 0;
    long *v = malloc((size_t)cap * sizeof *v);
    if (!v) {
        closedir(d);
        return err_set(e, PLUMB_ENOMEM, "out of memory");
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        long s;
        char tail[16];
        /* exactly ckpt-NNNNNNNNNN.plumb (temp files have a longer suffix) */
        if (strlen(de->d_name) != 21 || sscanf(de->d_name, "ckpt-%10ld%6s", &s, tail) != 2 ||
            strcmp(tail, ".plumb"))
            continue;
        if (cnt == cap) {
            long *nv = realloc(v, (size_t)(cap *= 2) * sizeof *v);
            if (!nv) {
                free(v);
                closedir(d);
                return err_set(e, PLUMB_ENOMEM, "out of memory");
            }
            v = nv;
        }
        v[cnt++] = s;
    }
    closedir(d);
    qsort(v, (size_t)cnt, sizeof *v, cmp_desc);
    *steps = v;
    *n = cnt;
    return PLUMB_OK;
}

/* Temp files of writers killed mid-write (SIGKILL, a lost node): they would
 * pile up, one checkpoint's size each, under plumb launch's restarts. */
static void remove_stale_temps(const char *dir)
{
    int n = 0;
    plumb_err e = {0};
    if (file_remove_stale_temps(dir, "ckpt-", &n, &e)) log_warn("checkpoint: %s", e.msg);
    else if (n) log_info("checkpoint: removed %d temp file%s of writers that died in %s", n, n == 1 ? "" : "s", dir);
}

int ckpt_write(const char *dir, long step, const struct ckpt_section *sec, int nsec, int keep,
               char *path_out, plumb_err *e)
{
    int rc = file_mkdirs(dir, e);
    if (rc) return rc;
    remove_stale_temps(dir);
    char path[4096];
    if ((rc = ckpt_path(dir, step, path, sizeof path, e))) return rc;
    size_t hlen = HDR + (size_t)nsec * ENT + 4;
    unsigned char *h = calloc(1, hlen);
    /* iov: header, then per section (zero padding to ALIGN, data) */
    const void **bufs = calloc(2 * (size_t)nsec + 1, sizeof *bufs);
    size_t *lens = calloc(2 * (size_t)nsec + 1, sizeof *lens);
    static const unsigned char zeros[ALIGN];
    if (!h || !bufs || !lens) {
        free(h), free(bufs), free(lens);
        return err_set(e, PLUMB_ENOMEM, "checkpoint: out of memory");
    }
    memcpy(h, MAGIC, 8);
    put32(h + 8, VERSION);
    put32(h + 12, (uint32_t)nsec);
    put64(h + 16, (uint64_t)step);
    uint64_t off = hlen;
    int nb = 1;
    for (int i = 0; i < nsec; i++) {
        unsigned char *p = h + HDR + (size_t)i * ENT;
        size_t nl = strnlen(sec[i].name, CKPT_NAME_MAX);
        if (nl == 0 || nl >= CKPT_NAME_MAX) {
            free(h), free(bufs), free(lens);
            return err_set(e, PLUMB_EINTERNAL, "checkpoint: bad section name");
        }
        /* sections start on ALIGN-byte boundaries so a reader can use the
         * data in place (floats, int64) */
        uint64_t pad = (ALIGN - off % ALIGN) % ALIGN;
        bufs[nb] = zeros;
        lens[nb++] = (size_t)pad;
        off += pad;
        memcpy(p, sec[i].name, nl);
        put64(p + CKPT_NAME_MAX, off);
        put64(p + CKPT_NAME_MAX + 8, sec[i].len);
        put32(p + CKPT_NAME_MAX + 16, hash_crc32(0, sec[i].data, sec[i].len));
        off += sec[i].len;
        bufs[nb] = sec[i].data;
        lens[nb++] = sec[i].len;
    }
    put32(h + hlen - 4, hash_crc32(0, h, hlen - 4));
    bufs[0] = h;
    lens[0] = hlen;
    rc = file_write_atomic_iov(path, bufs, lens, nb, e);
    free(h), free(bufs), free(lens);
    if (rc) return err_wrap(e, "writing checkpoint %s", path);
    if (path_out) snprintf(path_out, 4096, "%s", path);
    if (keep > 0) {
        long *steps;
        int n;
        if (ckpt_list(dir, &steps, &n, e) == PLUMB_OK) {
            for (int i = keep; i < n; i++) {
                char old[4096];
                if (ckpt_path(dir, steps[i], old, sizeof old, NULL) == PLUMB_OK && unlink(old) != 0)
                    log_warn("checkpoint: cannot remove %s: %s", old, strerror(errno));
            }
            free(steps);
        }
    }
    return PLUMB_OK;
}

int ckpt_read(const char *path, struct ckpt *out, plumb_err *e)
{
    memset(out, 0, sizeof *out);
    char *buf;
    size_t size;
    int rc = file_read_all(path, &buf, &size, e);
    if (rc) return rc;
    return ckpt_parse(path, buf, size, out, e);
}

int ckpt_parse(const char *path, char *buf, size_t size, struct ckpt *out, plumb_err *e)
{
    memset(out, 0, sizeof *out);
    const unsigned char *u = (const unsigned char *)buf;
    if (size < HDR + 4 || memcmp(u, MAGIC, 8)) {
        free(buf);
        return err_set(e, PLUMB_ECORRUPT, "%s: not a plumb checkpoint (bad magic or %zu bytes)", path, size);
    }
    uint32_t ver = get32(u + 8), nsec = get32(u + 12);
    /* version 1 (32-byte names) is read as well */
    const size_t nm = ver == 1 ? NAME_V1 : CKPT_NAME_MAX, ent = ENT_OF(nm);
    if ((ver != VERSION && ver != 1) || nsec > 4096 || size < HDR + (size_t)nsec * ent + 4) {
        free(buf);
        return err_set(e, PLUMB_ECORRUPT, "%s: bad header (version %u, %u sections, %zu bytes)", path, ver, nsec, size);
    }
    size_t hlen = HDR + (size_t)nsec * ent + 4;
    if (hash_crc32(0, u, hlen - 4) != get32(u + hlen - 4)) {
        free(buf);
        return err_set(e, PLUMB_ECORRUPT, "%s: header checksum mismatch", path);
    }
    struct ckpt_section *sec = calloc(nsec ? nsec : 1, sizeof *sec);
    if (!sec) {
        free(buf);
        return err_set(e, PLUMB_ENOMEM, "out of memory");
    }
    uint64_t end = hlen;
    for (uint32_t i = 0; i < nsec; i++) {
        const unsigned char *p = u + HDR + (size_t)i * ent;
        memcpy(sec[i].name, p, nm);
        sec[i].name[nm - 1] = '\0';
        uint64_t off = get64(p + nm), len = get64(p + nm + 8);
        int bad = 0;
        if (off < hlen || off > size || len > size - off)
            bad = err_set(e, PLUMB_ECORRUPT, "%s: section '%s' [%llu, +%llu) outside the file (%zu bytes): partial write?",
                          path, sec[i].name, (unsigned long long)off, (unsigned long long)len, size);
        else if (hash_crc32(0, u + off, len) != get32(p + nm + 16))
            bad = err_set(e, PLUMB_ECORRUPT, "%s: section '%s' checksum mismatch", path, sec[i].name);
        if (bad) {
            free(sec), free(buf);
            return bad;
        }
        sec[i].data = u + off;
        sec[i].len = len;
        if (off + len > end) end = off + len;
    }
    if (end != size) {
        free(sec), free(buf);
        return err_set(e, PLUMB_ECORRUPT, "%s: %zu bytes, sections end at %llu", path, size, (unsigned long long)end);
    }
    snprintf(out->path, sizeof out->path, "%s", path);
    out->step = (long)get64(u + 16);
    out->nsec = (int)nsec;
    out->sec = sec;
    out->buf = buf;
    out->size = size;
    return PLUMB_OK;
}

int ckpt_load_latest(const char *dir, struct ckpt *out, int *found, plumb_err *e)
{
    return ckpt_load_newest(dir, out, found, NULL, NULL, 0, e);
}

int ckpt_load_newest(const char *dir, struct ckpt *out, int *found, int *nfiles, char *why, size_t why_n,
                     plumb_err *e)
{
    *found = 0;
    if (nfiles) *nfiles = 0;
    if (why && why_n) why[0] = 0;
    memset(out, 0, sizeof *out);
    remove_stale_temps(dir);
    long *steps;
    int n;
    int rc = ckpt_list(dir, &steps, &n, e);
    if (rc) return rc;
    if (nfiles) *nfiles = n;
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        char path[4096];
        if ((rc = ckpt_path(dir, steps[i], path, sizeof path, e))) break;
        plumb_err re = {0};
        if (ckpt_read(path, out, &re) == PLUMB_OK) {
            *found = 1;
            break;
        }
        log_warn("checkpoint %s unusable (%s); trying the previous one", path, re.msg);
        if (why && k + 1 < why_n) k += (size_t)snprintf(why + k, why_n - k, "%s%s", k ? "; " : "", re.msg);
    }
    free(steps);
    return rc;
}

const void *ckpt_find(const struct ckpt *c, const char *name, size_t *len)
{
    for (int i = 0; i < c->nsec; i++)
        if (!strcmp(c->sec[i].name, name)) {
            if (len) *len = c->sec[i].len;
            return c->sec[i].data;
        }
    return NULL;
}

void ckpt_free(struct ckpt *c)
{
    if (!c) return;
    free(c->sec);
    free(c->buf);
    c->sec = NULL;
    c->buf = NULL;
    c->nsec = 0;
}

int ckpt_corrupt_file(const char *path, plumb_err *e)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return err_set(e, PLUMB_EIO, "open %s: %s", path, strerror(errno));
    off_t size = lseek(fd, 0, SEEK_END);
    unsigned char b[8];
    /* the file ends with the last section's data (padding only precedes
     * sections), so its last bytes are always covered by a checksum */
    off_t at = size > 8 ? size - 8 : 0;
    ssize_t r = pread(fd, b, sizeof b, at);
    if (r <= 0) {
        close(fd);
        return err_set(e, PLUMB_EIO, "read %s: %s", path, r < 0 ? strerror(errno) : "empty");
    }
    for (ssize_t i = 0; i < r; i++) b[i] ^= 0xa5;
    if (pwrite(fd, b, (size_t)r, at) != r) {
        close(fd);
        return err_set(e, PLUMB_EIO, "write %s: %s", path, strerror(errno));
    }
    fsync(fd);
    close(fd);
    return PLUMB_OK;
}
