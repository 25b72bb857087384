/* gpt's token streams and sample windows (see data.h). */
#include "models/gpt/data.h"
#include "core/file.h"
#include "core/mapguard.h"
#include "core/philox.h"
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define HEADER_BYTES (256 * 4)

#define MAX_HOLES 8
struct shard {
    char *path;
    const uint8_t *map; /* the whole file, mmap'ed */
    size_t map_len;
    const uint16_t *tok; /* map + HEADER_BYTES */
    uint64_t n, start;   /* tokens, first global position */
    /* a sparse file's holes (byte ranges that read as zeros), up to
     * MAX_HOLES of them: the id scan skips them (a zero is token 0) */
    uint64_t holes[MAX_HOLES][2];
    int nholes;
};

enum kind { K_FILES, K_TEXT, K_SYNTH };

/* one split: a view [base, base + n) of a stream */
struct stream {
    enum kind kind;
    struct shard *sh; /* K_FILES */
    int nsh;
    const uint8_t *text; /* K_TEXT */
    uint64_t base, n;
    int split_id; /* K_SYNTH: Philox a */
};

struct gpt_data {
    struct stream s[2];
    struct shard *own[2]; /* shard arrays owned (train files, val files) */
    int nown[2];
    uint8_t *text;
    uint64_t seed;
    int vocab;
    int val_vocab; /* the validation files' own (0: none) */
    int fixed;
    char desc[512];
};

/* ---------------- token files ---------------- */

/* The reads out of a shard's map, each under a guard (core/mapguard.h): a
 * file truncated (or rewritten shorter in place) while it is mapped faults
 * on the pages past its new end; each helper then returns PLUMB_EIO naming
 * the file. Small functions: nothing but the copy runs guarded. The header
 * is a plain copy (mapguard_memcpy, in shard_open). */

/* tokens [j0, j1) of sh widened into out */
static int shard_copy(const struct shard *sh, uint64_t j0, uint64_t j1, int32_t *out, plumb_err *e)
{
    struct mapguard g;
    mapguard_prepare(&g, sh->map, sh->map_len);
    if (sigsetjmp(g.jb, 0)) return mapguard_error(&g, sh->path, "token file", e);
    mapguard_arm(&g);
    const uint16_t *t = sh->tok;
    for (uint64_t j = j0; j < j1; j++) out[j - j0] = t[j];
    mapguard_disarm(&g);
    return PLUMB_OK;
}

/* the largest of tokens [j0, j1) of sh into *mx */
static int shard_max(const struct shard *sh, uint64_t j0, uint64_t j1, int *mx, plumb_err *e)
{
    /* tokens [j0, j1) inside one hole: zeros, without touching the pages
     * (an 8 GiB sparse file took 44 s of page-cache zero fill on the build
     * machine) */
    const uint64_t b0 = HEADER_BYTES + 2 * j0, b1 = HEADER_BYTES + 2 * j1;
    for (int h = 0; h < sh->nholes; h++)
        if (b0 >= sh->holes[h][0] && b1 <= sh->holes[h][1]) {
            *mx = 0;
            return PLUMB_OK;
        }
    struct mapguard g;
    mapguard_prepare(&g, sh->map, sh->map_len);
    if (sigsetjmp(g.jb, 0)) return mapguard_error(&g, sh->path, "token file", e);
    mapguard_arm(&g);
    const uint16_t *t = sh->tok;
    int m = 0;
    for (uint64_t j = j0; j < j1; j++) m = t[j] > m ? t[j] : m;
    mapguard_disarm(&g);
    *mx = m;
    return PLUMB_OK;
}

/* the first error of a parallel loop's iterations into (*rc, e) */
static int shard_open(const char *path, struct shard *s, plumb_err *e)
{
    memset(s, 0, sizeof *s);
    /* only a regular file can be memory-mapped */
    int fd;
    struct stat st;
    int r = file_open_regular(path, 0, &fd, &st);
    if (r > 0) return err_set(e, PLUMB_EUSAGE, "%s: cannot open token file: %s", path, strerror(r));
    if (r < 0)
        return err_set(e, PLUMB_EUSAGE, "%s: not a regular file (expected an llm.c token file; %s cannot be memory-mapped)",
                       path, file_kind(&st));
    const uint64_t size = (uint64_t)st.st_size;
    if (size < HEADER_BYTES) {
        close(fd);
        return err_set(e, PLUMB_EUSAGE,
                       "%s: truncated token file: %llu byte%s (expected a %d-byte header of 256 int32, magic %d)", path,
                       (unsigned long long)size, size == 1 ? "" : "s", HEADER_BYTES, GPT_TOKEN_MAGIC);
    }
    /* the reads out of the map are guarded (shard_copy): a file truncated
     * during the run is an error naming it, not a SIGBUS */
    int rc = mapguard_init(e);
    if (rc) {
        close(fd);
        return rc;
    }
    void *m = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
    /* fewer blocks than bytes: a sparse file; its first holes */
    for (off_t off = 0; m != MAP_FAILED && (uint64_t)st.st_blocks * 512 < size && off < (off_t)size &&
                        s->nholes < MAX_HOLES;) {
        errno = 0;
        off_t data = lseek(fd, off, SEEK_DATA);
        if (data < 0) {
            if (errno != ENXIO) break; /* no SEEK_DATA here: nothing more recorded, everything read */
            data = (off_t)size;        /* a hole to the end */
        }
        if (data > off) s->holes[s->nholes][0] = (uint64_t)off, s->holes[s->nholes++][1] = (uint64_t)data;
        if (data >= (off_t)size) break;
        const off_t hole = lseek(fd, data, SEEK_HOLE);
        if (hole <= data) break;
        off = hole;
    }
    close(fd);
    if (m == MAP_FAILED) return err_set(e, PLUMB_EIO, "%s: mmap of %llu bytes failed: %s", path, (unsigned long long)size, strerror(errno));
    s->map = m;
    s->map_len = (size_t)size;
    s->path = strdup(path);
    if (!s->path) rc = err_set(e, PLUMB_ENOMEM, "%s: out of memory", path);
    int32_t h[3];
    if (!rc) rc = mapguard_memcpy(s->map, s->map_len, s->path, "token file", h, s->map, sizeof h, e);
    if (rc) {
        /* out of memory, or the file shrank already (said above) */
    } else if (h[0] != GPT_TOKEN_MAGIC)
        rc = err_set(e, PLUMB_EUSAGE, "%s: magic %d (expected %d: an llm.c token file)", path, h[0], GPT_TOKEN_MAGIC);
    else if (h[1] != GPT_TOKEN_VERSION)
        rc = err_set(e, PLUMB_EUSAGE, "%s: version %d (expected %d: uint16 tokens)", path, h[1], GPT_TOKEN_VERSION);
    else if (h[2] <= 0)
        rc = err_set(e, PLUMB_EUSAGE, "%s: token count %d (expected > 0)", path, h[2]);
    else if (size < HEADER_BYTES + 2 * (uint64_t)h[2])
        rc = err_set(e, PLUMB_EUSAGE, "%s: truncated: %llu bytes for %d tokens (expected %llu = 1024 + 2 x %d)", path,
                     (unsigned long long)size, h[2], (unsigned long long)(HEADER_BYTES + 2 * (uint64_t)h[2]), h[2]);
    else if (size > HEADER_BYTES + 2 * (uint64_t)h[2])
        rc = err_set(e, PLUMB_EUSAGE,
                     "%s: %llu bytes but the header's token count %d needs %llu (expected the count to match the file)",
                     path, (unsigned long long)size, h[2], (unsigned long long)(HEADER_BYTES + 2 * (uint64_t)h[2]));
    if (rc) {
        munmap((void *)s->map, s->map_len);
        s->map = NULL;
        free(s->path);
        s->path = NULL;
        return rc;
    }
    s->tok = (const uint16_t *)(s->map + HEADER_BYTES);
    s->n = (uint64_t)h[2];
    (void)madvise((void *)s->map, s->map_len, MADV_RANDOM);
    return PLUMB_OK;
}

static void shards_free(struct shard *sh, int n)
{
    for (int i = 0; i < n; i++) {
        if (sh[i].map) munmap((void *)sh[i].map, sh[i].map_len);
        free(sh[i].path);
    }
    free(sh);
}

/* glob's read error: the directory it could not read (glob reports only a code) */
static __thread char glob_bad_path[512];
static __thread int glob_bad_errno;

static int glob_note_error(const char *epath, int eerrno)
{
    snprintf(glob_bad_path, sizeof glob_bad_path, "%s", epath);
    glob_bad_errno = eerrno;
    return 1; /* stop: GLOB_ERR semantics */
}

/* every file matching pattern, in lexicographic order */
static int shards_open(const char *pattern, struct shard **out, int *nout, uint64_t *total, plumb_err *e)
{
    glob_t g;
    memset(&g, 0, sizeof g);
    glob_bad_path[0] = 0;
    glob_bad_errno = 0;
    int gr = glob(pattern, GLOB_ERR, glob_note_error, &g);
    if (gr == GLOB_NOMATCH || (gr == 0 && g.gl_pathc == 0)) {
        globfree(&g);
        return err_set(e, PLUMB_EUSAGE, "no token files match '%s' (expected llm.c .bin shards)", pattern);
    }
    if (gr) {
        globfree(&g);
        if (gr == GLOB_ABORTED && glob_bad_path[0])
            return err_set(e, PLUMB_EUSAGE, "no token files match '%s': cannot read directory %s: %s", pattern,
                           glob_bad_path, strerror(glob_bad_errno));
        return err_set(e, gr == GLOB_NOSPACE ? PLUMB_ENOMEM : PLUMB_EUSAGE, "cannot expand '%s' (%s)", pattern,
                       gr == GLOB_NOSPACE ? "out of memory" : "read error");
    }
    struct shard *sh = calloc(g.gl_pathc, sizeof *sh);
    if (!sh) {
        globfree(&g);
        return err_set(e, PLUMB_ENOMEM, "out of memory for %zu token files", g.gl_pathc);
    }
    uint64_t pos = 0;
    int rc = PLUMB_OK;
    size_t i;
    for (i = 0; i < g.gl_pathc && !rc; i++) {
        rc = shard_open(g.gl_pathv[i], &sh[i], e);
        sh[i].start = pos;
        pos += sh[i].n;
    }
    if (rc) {
        shards_free(sh, (int)i);
        globfree(&g);
        return rc;
    }
    *out = sh;
    *nout = (int)g.gl_pathc;
    *total = pos;
    globfree(&g);
    return PLUMB_OK;
}

/* ---------------- open ---------------- */

static void split_view(struct stream *full, struct stream *tr, struct stream *va, double frac)
{
    uint64_t nv = (uint64_t)((double)full->n * frac);
    if (nv < 2 && full->n >= 4) nv = 2;
    *tr = *full;
    *va = *full;
    tr->n = full->n - nv;
    va->base = full->base + tr->n;
    va->n = nv;
}

static void human(uint64_t n, char *buf, size_t len)
{
    if (n >= 1000000000ull) snprintf(buf, len, "%.2f G", (double)n / 1e9);
    else if (n >= 1000000ull) snprintf(buf, len, "%.2f M", (double)n / 1e6);
    else if (n >= 1000ull) snprintf(buf, len, "%.1f k", (double)n / 1e3);
    else snprintf(buf, len, "%llu ", (unsigned long long)n);
}

int gpt_data_open(const char *spec, const char *val_spec, const struct gpt_data_opts *o, struct gpt_data **out,
                  plumb_err *e)
{
    *out = NULL;
    if (!spec || !*spec) return err_set(e, PLUMB_EUSAGE, "--data: empty (expected synthetic, text:FILE or tokens:GLOB)");
    const double frac = o->val_fraction > 0 ? o->val_fraction : 0.1;
    if (frac >= 0.5)
        return err_set(e, PLUMB_EUSAGE, "--eval-fraction %g: gpt holds out less than half of its tokens (expected below 0.5)", frac);
    struct gpt_data *d = calloc(1, sizeof *d);
    if (!d) return err_set(e, PLUMB_ENOMEM, "out of memory");
    d->seed = o->seed;
    d->fixed = o->fixed_windows;
    int rc = PLUMB_OK;
    char a[32], b[32];
    const int have_val = val_spec && *val_spec;
    if (!strcmp(spec, "synthetic")) {
        if (o->vocab < 2) rc = err_set(e, PLUMB_EUSAGE, "synthetic tokens: vocabulary %d (expected >= 2)", o->vocab);
        if (have_val) rc = err_set(e, PLUMB_EUSAGE, "--eval-data %s: synthetic data has its own validation split (expected no --eval-data)", val_spec);
        d->vocab = o->vocab;
        for (int k = 0; k < 2 && !rc; k++) {
            d->s[k].kind = K_SYNTH;
            d->s[k].split_id = k;
            d->s[k].n = k ? (o->synth_val ? o->synth_val : (uint64_t)1 << 20) : (o->synth_train ? o->synth_train : (uint64_t)1 << 24);
        }
        human(d->s[0].n, a, sizeof a);
        human(d->s[1].n, b, sizeof b);
        snprintf(d->desc, sizeof d->desc, "synthetic tokens (Markov chain, vocabulary %d): %stokens, val %stokens",
                 d->vocab, a, b);
    } else if (!strncmp(spec, "text:", 5)) {
        const char *path = spec + 5;
        char *buf = NULL;
        size_t len = 0;
        if (!*path) rc = err_set(e, PLUMB_EUSAGE, "--data text: names no file (expected text:FILE)");
        else if (have_val) rc = err_set(e, PLUMB_EUSAGE, "--eval-data %s: text data holds out its last %g instead (expected no --eval-data)", val_spec, frac);
        if (!rc) rc = file_read_all(path, &buf, &len, e);
        if (!rc && len < 16) rc = err_set(e, PLUMB_EUSAGE, "%s: %zu byte%s of text (expected at least 16)", path, len, len == 1 ? "" : "s");
        if (rc) {
            free(buf);
        } else {
            d->text = (uint8_t *)buf;
            d->vocab = 256;
            struct stream full = {K_TEXT, NULL, 0, d->text, 0, len, 0};
            split_view(&full, &d->s[0], &d->s[1], frac);
            human(d->s[0].n, a, sizeof a);
            human(d->s[1].n, b, sizeof b);
            snprintf(d->desc, sizeof d->desc, "text %s as bytes: %stokens, val (last %g) %stokens", path, a, frac, b);
        }
    } else {
        const char *pat = !strncmp(spec, "tokens:", 7) ? spec + 7 : spec;
        uint64_t n0 = 0, n1 = 0;
        int mx[2] = {0, 0};
        rc = shards_open(pat, &d->own[0], &d->nown[0], &n0, e);
        if (!rc && have_val) rc = shards_open(!strncmp(val_spec, "tokens:", 7) ? val_spec + 7 : val_spec, &d->own[1], &d->nown[1], &n1, e);
        if (!rc) {
            /* the largest token id of every file: a model must cover it (the
             * device gathers rows without a bounds check); one pass over the
             * mapped tokens at memory speed, in guarded pieces */
            const uint64_t C = (uint64_t)1 << 20; /* tokens a guarded piece */
            for (int k = 0; k < 2 && !rc; k++)
                for (int i = 0; i < d->nown[k] && !rc; i++) {
                    const struct shard *sh = &d->own[k][i];
                    const long np = (long)((sh->n + C - 1) / C);
                    int m1 = 0;
#pragma omp parallel for reduction(max : m1) schedule(static) if (np > 1)
                    for (long p = 0; p < np; p++) {
                        const uint64_t j0 = (uint64_t)p * C, j1 = sh->n - j0 < C ? sh->n : j0 + C;
                        int m = 0;
                        plumb_err ep;
                        int r = shard_max(sh, j0, j1, &m, &ep);
                        if (r) err_keep_first(r, &ep, &rc, e);
                        m1 = m > m1 ? m : m1;
                    }
                    mx[k] = m1 > mx[k] ? m1 : mx[k];
                }
        }
        if (!rc) {
            d->vocab = (mx[0] > mx[1] ? mx[0] : mx[1]) + 1;
            d->val_vocab = have_val ? mx[1] + 1 : 0;
            struct stream full = {K_FILES, d->own[0], d->nown[0], NULL, 0, n0, 0};
            if (have_val) {
                d->s[0] = full;
                d->s[1] = (struct stream){K_FILES, d->own[1], d->nown[1], NULL, 0, n1, 1};
            } else {
                split_view(&full, &d->s[0], &d->s[1], frac);
            }
            human(d->s[0].n, a, sizeof a);
            human(d->s[1].n, b, sizeof b);
            if (have_val)
                snprintf(d->desc, sizeof d->desc, "%d token file%s (%stokens), val %d file%s (%stokens)", d->nown[0],
                         d->nown[0] > 1 ? "s" : "", a, d->nown[1], d->nown[1] > 1 ? "s" : "", b);
            else
                snprintf(d->desc, sizeof d->desc, "%d token file%s: %stokens, val (last %g) %stokens", d->nown[0],
                         d->nown[0] > 1 ? "s" : "", a, frac, b);
        }
    }
    if (rc) {
        gpt_data_free(d);
        return rc;
    }
    *out = d;
    return PLUMB_OK;
}

void gpt_data_free(struct gpt_data *d)
{
    if (!d) return;
    for (int k = 0; k < 2; k++)
        if (d->own[k]) shards_free(d->own[k], d->nown[k]);
    free(d->text);
    free(d);
}

uint64_t gpt_data_tokens(const struct gpt_data *d, int split) { return d->s[split].n; }
int gpt_data_vocab(const struct gpt_data *d) { return d->vocab; }
int gpt_data_val_vocab(const struct gpt_data *d) { return d->val_vocab; }
const char *gpt_data_describe(const struct gpt_data *d) { return d->desc; }

/* ---------------- access ---------------- */

/* The synthetic chain (data.h): token i of block blk of split k, i > 0,
 * follows token i-1 = a: with w = Philox(seed, RNG_DATA, k, blk, i),
 * succ(a) when w >> 24 < 205 (probability 205/256), else (w & 0xffffff) mod V;
 * succ(a) = Philox(seed, RNG_DATA, SYNTH_SUCC, 0, a) mod V is one table for
 * both splits; token 0 of a block is Philox(seed, RNG_DATA, k, blk, 0) mod V. */
#define SYNTH_SUCC 0xfffffu
static int32_t synth_next(uint64_t seed, int vocab, uint32_t k, uint32_t blk, uint32_t i, int32_t prev)
{
    const uint32_t w = philox_u32_at(seed, RNG_DATA, k, blk, i);
    if (i == 0) return (int32_t)(w % (uint32_t)vocab);
    if ((w >> 24) < 205u) return (int32_t)(philox_u32_at(seed, RNG_DATA, SYNTH_SUCC, 0, (uint64_t)prev) % (uint32_t)vocab);
    return (int32_t)((w & 0xffffffu) % (uint32_t)vocab);
}

/* tokens [g, g + n) of the chain: each block from its start (a block is
 * at most GPT_SYNTH_BLOCK tokens of work) */
static void synth_read(const struct stream *s, uint64_t seed, int vocab, uint64_t g, size_t n, int32_t *out)
{
    size_t done = 0;
    while (done < n) {
        const uint64_t pos = g + done, blk = pos / GPT_SYNTH_BLOCK, i0 = pos % GPT_SYNTH_BLOCK;
        const size_t take = n - done < GPT_SYNTH_BLOCK - i0 ? n - done : (size_t)(GPT_SYNTH_BLOCK - i0);
        int32_t x = 0;
        for (uint64_t i = 0; i < i0 + take; i++) {
            x = synth_next(seed, vocab, (uint32_t)s->split_id, (uint32_t)blk, (uint32_t)i, x);
            if (i >= i0) out[done + (i - i0)] = x;
        }
        done += take;
    }
}

int gpt_data_read(const struct gpt_data *d, int split, uint64_t pos, size_t n, int32_t *out, plumb_err *e)
{
    const struct stream *s = &d->s[split];
    uint64_t g = s->base + pos; /* position in the underlying stream */
    switch (s->kind) {
    case K_TEXT:
        for (size_t i = 0; i < n; i++) out[i] = s->text[g + i];
        return PLUMB_OK;
    case K_SYNTH:
        synth_read(s, d->seed, d->vocab, g, n, out);
        return PLUMB_OK;
    case K_FILES: {
        /* the shard holding g: binary search over the starts */
        int lo = 0, hi = s->nsh - 1;
        while (lo < hi) {
            int mid = (lo + hi + 1) / 2;
            if (s->sh[mid].start <= g) lo = mid;
            else hi = mid - 1;
        }
        size_t i = 0;
        for (int k = lo; i < n && k < s->nsh; k++) {
            const struct shard *sh = &s->sh[k];
            const uint64_t in = g + i - sh->start;
            if (in >= sh->n) continue;
            const uint64_t take = sh->n - in < n - i ? sh->n - in : n - i;
            int rc = shard_copy(sh, in, in + take, out + i, e);
            if (rc) return rc;
            i += take;
        }
        return PLUMB_OK;
    }
    }
    return PLUMB_OK;
}

int gpt_data_shift(uint64_t seed, long epoch, int T)
{
    return T > 1 ? (int)(philox_u32_at(seed, RNG_AUGMENT, (uint32_t)epoch, 0, 0) % (uint32_t)T) : 0;
}

long gpt_data_samples(const struct gpt_data *d, int split, int T)
{
    const uint64_t n = d->s[split].n;
    if (T < 1) return 0;
    if (split == GPT_TRAIN) return n >= 2 * (uint64_t)T ? (long)(n / (uint64_t)T - 1) : 0;
    return n >= 2 ? (long)((n - 1 + (uint64_t)T - 1) / (uint64_t)T) : 0;
}

int gpt_data_sample(const struct gpt_data *d, int split, int T, uint64_t seed, long epoch, long index, int32_t *tok,
                    int32_t *tgt, plumb_err *e)
{
    int32_t buf[1 + 4096];
    int32_t *w = T + 1 <= 4097 ? buf : malloc(((size_t)T + 1) * sizeof(int32_t));
    if (!w) return err_set(e, PLUMB_ENOMEM, "gpt data: out of memory for a window of %d tokens", T + 1);
    int rc;
    if (split == GPT_TRAIN) {
        /* o + T <= shift + (n_train - 1) T + T <= (T - 1) + n - 2T + T < n */
        const uint64_t o = (uint64_t)(d->fixed ? 0 : gpt_data_shift(seed, epoch, T)) + (uint64_t)index * T;
        rc = gpt_data_read(d, split, o, (size_t)T + 1, w, e);
        if (!rc) {
            memcpy(tok, w, (size_t)T * sizeof(int32_t));
            memcpy(tgt, w + 1, (size_t)T * sizeof(int32_t));
        }
    } else {
        const uint64_t n = d->s[split].n, o = (uint64_t)index * T;
        const uint64_t have = o < n ? (n - o < (uint64_t)T + 1 ? n - o : (uint64_t)T + 1) : 0; /* tokens of the window */
        rc = gpt_data_read(d, split, o, (size_t)have, w, e);
        for (int t = 0; t < T && !rc; t++) {
            tok[t] = (uint64_t)t < have ? w[t] : 0;
            tgt[t] = (uint64_t)t + 1 < have ? w[t + 1] : -1;
        }
    }
    if (w != buf) free(w);
    return rc;
}

int gpt_data_fill(const struct gpt_data *d, int split, int T, uint64_t seed, long epoch, const uint32_t *idx,
                  int count, int cap, int32_t *tok, int32_t *tgt, plumb_err *e)
{
    int rc = PLUMB_OK;
#pragma omp parallel for schedule(static) if ((long)count * T > 65536)
    for (int r = 0; r < count; r++) {
        plumb_err er;
        int r1 = gpt_data_sample(d, split, T, seed, epoch, (long)idx[r], tok + (size_t)r * T, tgt + (size_t)r * T, &er);
        if (r1) err_keep_first(r1, &er, &rc, e);
    }
    for (int r = count; r < cap; r++)
        for (int t = 0; t < T; t++) {
            tok[(size_t)r * T + t] = 0;
            tgt[(size_t)r * T + t] = -1;
        }
    return rc;
}

int gpt_token_file_write(const char *path, const uint16_t *tok, size_t n, plumb_err *e)
{
    if (n == 0 || n > 2147483647u) return err_set(e, PLUMB_EUSAGE, "%s: %zu tokens (expected 1..2^31-1)", path, n);
    int32_t h[256];
    memset(h, 0, sizeof h);
    h[0] = GPT_TOKEN_MAGIC;
    h[1] = GPT_TOKEN_VERSION;
    h[2] = (int32_t)n;
    const void *bufs[2] = {h, tok};
    const size_t lens[2] = {sizeof h, n * sizeof(uint16_t)};
    return file_write_atomic_iov(path, bufs, lens, 2, e);
}
