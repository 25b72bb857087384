/* The comm check: nccl-tests' sweep, bandwidth and #wrong over the comm
 * interface (comm_check.h, docs/COMM.md). */
#include "accept/comm_check.h"
#include "accept/comm_check_data.h"
#include "core/hostinfo.h"
#include "core/log.h"
#include "core/philox.h"
#include "core/timer.h"
#include "core/watchdog.h"
#include "dev/dev.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void comm_check_opts_default(struct comm_check_opts *o)
{
    memset(o, 0, sizeof *o);
    o->colls = 1u << COMM_ALLREDUCE;
    o->dtypes[0] = DT_F32;
    o->ndtypes = 1;
    o->op = COMM_SUM;
    o->root = 0;
    o->min_bytes = 8;
    o->max_bytes = 64u << 20;
    o->step_factor = 2;
    o->step_bytes = 1u << 20;
    o->warmup = 5;
    o->iters = 20;
    o->check = 1;
    o->timeout_s = 60;
    o->corrupt_rank = -1;
    o->hang_rank = -1;
    o->seed = 20;
}

double comm_busbw_factor(enum comm_coll coll, int n)
{
    if (n < 1) return 0;
    switch (coll) {
    case COMM_ALLREDUCE: return 2.0 * (n - 1) / n;
    case COMM_ALLGATHER:
    case COMM_REDUCE_SCATTER:
    case COMM_ALLTOALL: return (double)(n - 1) / n;
    case COMM_BROADCAST:
    case COMM_REDUCE: return 1.0;
    default: return 0;
    }
}

/* collectives whose size S is n blocks of a per-rank count */
static int blocked(enum comm_coll coll)
{
    return coll == COMM_ALLGATHER || coll == COMM_REDUCE_SCATTER || coll == COMM_ALLTOALL;
}

static int is_reduction(enum comm_coll coll)
{
    return coll == COMM_ALLREDUCE || coll == COMM_REDUCE || coll == COMM_REDUCE_SCATTER;
}

void comm_check_counts(enum comm_coll coll, dtype_t t, int n, size_t S, size_t *count, size_t *bytes)
{
    size_t es = dtype_size(t), total = S / es;
    size_t p = blocked(coll) ? total / (size_t)n : total;
    *count = p;
    *bytes = (blocked(coll) ? p * (size_t)n : p) * es;
}

double comm_check_exact_limit(dtype_t t)
{
    switch (t) {
    case DT_BF16: return 256;
    case DT_F16: return 2048;
    case DT_F32: return 16777216.0;             /* 2^24 */
    case DT_F64: return 9007199254740992.0;     /* 2^53 */
    case DT_I32: return 1073741824.0;           /* 2^30 (sums stay inside int32) */
    case DT_I64: return 4503599627370496.0;     /* 2^52: every value and sum exact in a double too */
    default: return 0;                          /* unsigned types: not swept */
    }
}

double comm_check_input(unsigned long long seed, unsigned case_id, enum comm_coll coll, dtype_t t, enum comm_op op,
                        int n, int r, size_t j)
{
    /* two words per element (stream elements 2j and 2j + 1, one Philox
     * block for two elements): 64 random bits, enough for the 2^53 ranges;
     * accept/comm_check_data.c maps them */
    struct comm_check_gen g;
    comm_check_gen_init(&g, seed, case_id, coll, t, op, n);
    return comm_check_gen_value(&g, r, j);
}

/* ---- buffers: on the comm's device, or host memory ---- */

struct bufs {
    struct dev *d;       /* NULL: host memory */
    char *send, *recv;   /* [cap] bytes each, where the collectives run */
    /* host memory, [cap] bytes each (pinned when d is a GPU, so the copies
     * run at the link's speed): */
    char *ones;          /* the timing inputs, 1 in every element */
    char *poison;        /* 2L in every element: never an input, never a result */
    char *mine;          /* this rank's inputs, elements 0.. (a sweep's, whatever the size) */
    char *want;          /* the exact results (reductions, broadcast: a sweep's; gathers: a row's) */
    char *got;           /* what the check collective delivered, downloaded */
    int filled_t;        /* the dtype ones and poison hold (-1: none) */
    size_t cap;
};

static char **bufs_host(struct bufs *b, int k)
{
    char **h[] = {&b->ones, &b->poison, &b->mine, &b->want, &b->got};
    return h[k];
}
#define BUFS_NHOST 5

static void bufs_free(struct bufs *b)
{
    int pinned = b->d && b->d->be->host_alloc && b->d->be->host_free;
    if (b->d) {
        if (b->send) dev_free(b->d, b->send);
        if (b->recv) dev_free(b->d, b->recv);
    } else {
        free(b->send), free(b->recv);
    }
    for (int k = 0; k < BUFS_NHOST; k++) {
        char **h = bufs_host(b, k);
        if (*h && pinned) b->d->be->host_free(b->d, *h);
        else free(*h);
    }
    memset(b, 0, sizeof *b);
}

static int bufs_alloc(struct bufs *b, struct dev *d, size_t cap, plumb_err *e)
{
    /* host memory first, said with what it needs: BUFS_NHOST host buffers of
     * the largest size, and send and receive too on the cpu */
    const size_t size = cap ? cap : 8;
    const int nhost = BUFS_NHOST + (d ? 0 : 2);
    const double need = (double)nhost * (double)size, have = hostinfo_mem_available();
    if (have > 0 && need > have)
        return err_set(e, PLUMB_EUSAGE,
                       "comm check: -e %zu needs %.2f GB of host memory per rank (%d buffers of the largest size); "
                       "this host has %.2f GB available: use a smaller -e",
                       cap, need / 1e9, nhost, have / 1e9);
    memset(b, 0, sizeof *b);
    b->d = d;
    b->cap = size;
    b->filled_t = -1;
    if (d) {
        if (dev_alloc(d, b->cap, (void **)&b->send, e) || dev_alloc(d, b->cap, (void **)&b->recv, e)) {
            bufs_free(b);
            return err_wrap(e, "comm check: two buffers of %zu bytes on %s", size, d->label);
        }
    } else {
        b->send = malloc(b->cap);
        b->recv = malloc(b->cap);
        if (!b->send || !b->recv) {
            bufs_free(b); /* zeroes b->cap: the message names size */
            return err_set(e, PLUMB_ENOMEM, "comm check: cannot allocate 2 buffers of %zu bytes", size);
        }
    }
    int pinned = d && d->be->host_alloc && d->be->host_free;
    for (int k = 0; k < BUFS_NHOST; k++) {
        char **h = bufs_host(b, k);
        if (pinned) {
            if (d->be->host_alloc(d, b->cap, (void **)h, e)) {
                *h = NULL;
                bufs_free(b);
                return err_wrap(e, "comm check: %d host buffers of %zu bytes for %s", BUFS_NHOST, cap, d->label);
            }
        } else if (!(*h = malloc(b->cap))) {
            bufs_free(b);
            return err_set(e, PLUMB_ENOMEM, "comm check: cannot allocate %d host buffers of %zu bytes", BUFS_NHOST, cap);
        }
    }
    return PLUMB_OK;
}

static int to_buf(struct bufs *b, char *dst, const void *src, size_t n, plumb_err *e)
{
    if (!n) return PLUMB_OK;
    if (!b->d) {
        memcpy(dst, src, n);
        return PLUMB_OK;
    }
    return dev_upload(b->d, dst, src, n, e);
}

static int from_buf(struct bufs *b, void *dst, const char *src, size_t n, plumb_err *e)
{
    if (!n) return PLUMB_OK;
    if (!b->d) {
        memcpy(dst, src, n);
        return PLUMB_OK;
    }
    return dev_download(b->d, dst, src, n, e);
}

/* ---- one batch: a (collective, dtype, size, placement) ---- */

struct batch {
    enum comm_coll coll;
    dtype_t t;
    enum comm_op op;
    int root, in_place;
    size_t p;          /* per-rank count (blocked) or the count */
    size_t bytes;      /* nccl-tests' size */
    unsigned case_id;
    const char *want;  /* host: the exact values of what this rank receives (checked_elems) */
    char what[160];    /* for the watchdog and messages */
};

/* sizes (elements) of the buffer regions of a batch on this rank */
static void batch_layout(const struct batch *bt, int W, int R, size_t *sn, size_t *rn, size_t *blen, size_t *at)
{
    size_t p = bt->p, w = (size_t)W;
    *sn = p, *rn = p;
    if (bt->coll == COMM_ALLGATHER) *rn = p * w;
    if (bt->coll == COMM_REDUCE_SCATTER) *sn = p * w;
    if (bt->coll == COMM_ALLTOALL) *sn = *rn = p * w;
    *blen = bt->in_place ? (*sn > *rn ? *sn : *rn) : *sn;
    *at = bt->in_place && bt->coll == COMM_ALLGATHER ? (size_t)R * p : 0;
}

static void batch_args(const struct batch *bt, struct bufs *b, int R, struct comm_args *a)
{
    size_t es = dtype_size(bt->t);
    memset(a, 0, sizeof *a);
    a->coll = bt->coll;
    a->dtype = bt->t;
    a->op = bt->op;
    a->root = bt->root;
    a->count = bt->p;
    if (!bt->in_place) {
        a->send = b->send;
        a->recv = b->recv;
        return;
    }
    a->send = b->recv;
    a->recv = b->recv;
    if (bt->coll == COMM_ALLGATHER) a->send = b->recv + (size_t)R * bt->p * es;
    if (bt->coll == COMM_REDUCE_SCATTER) a->recv = b->recv + (size_t)R * bt->p * es;
}

/* Writes this rank's inputs (b->mine) where the batch reads them, and the
 * poison value everywhere the collective must write, so a result that is
 * not delivered is wrong too. */
static int batch_init(const struct batch *bt, struct bufs *b, int W, int R, plumb_err *e)
{
    size_t sn, rn, blen, at, es = dtype_size(bt->t);
    batch_layout(bt, W, R, &sn, &rn, &blen, &at);
    if (bt->in_place) {
        int rc = to_buf(b, b->recv, b->poison, blen * es, e);
        return rc ? rc : to_buf(b, b->recv + at * es, b->mine, sn * es, e);
    }
    int rc = to_buf(b, b->send, b->mine, sn * es, e);
    return rc ? rc : to_buf(b, b->recv, b->poison, rn * es, e);
}

/* Timing inputs: ones wherever the batch reads or writes (normal numbers,
 * so no denormal slows a host reduction; the values do not matter there). */
static int batch_fill_ones(const struct batch *bt, struct bufs *b, int W, int R, plumb_err *e)
{
    size_t sn, rn, blen, at, es = dtype_size(bt->t);
    batch_layout(bt, W, R, &sn, &rn, &blen, &at);
    int rc = to_buf(b, b->send, b->ones, (bt->in_place ? 0 : sn) * es, e);
    return rc ? rc : to_buf(b, b->recv, b->ones, (bt->in_place ? blen : rn) * es, e);
}

/* The host buffers of a sweep (collective, dtype) on rank R of W: ones and
 * poison in the dtype; with the check on, this rank's inputs for the largest
 * row, and for reductions and broadcast the exact results (they do not
 * depend on the size: row S reads the first elements). */
static void sweep_prepare(struct bufs *b, const struct comm_check_gen *g, enum comm_coll coll, int root, int R,
                          int check)
{
    size_t n = b->cap / dtype_size(g->t);
    if (b->filled_t != (int)g->t) {
        comm_check_fill_value(g->t, 1.0, n, b->ones);
        comm_check_fill_value(g->t, 2 * comm_check_exact_limit(g->t), n, b->poison);
        b->filled_t = (int)g->t;
    }
    if (!check) return;
    comm_check_gen_fill(g, R, 0, n, b->mine);
    /* on one rank a reduction is the rank's own input, as is the broadcast on its root */
    if ((is_reduction(coll) && g->world == 1) || (coll == COMM_BROADCAST && root == R))
        memcpy(b->want, b->mine, n * dtype_size(g->t));
    else if (is_reduction(coll)) comm_check_gen_reduce(g, 0, n, b->want);
    else if (coll == COMM_BROADCAST) comm_check_gen_fill(g, root, 0, n, b->want);
}

/* Points bt->want at the exact values of what rank R receives in this row
 * (recv[i], i < the checked count), computing them for the gathers:
 *   allreduce, reduce: op over ranks of element i;  reduce-scatter: of R*p + i;
 *   broadcast: the root's element i;
 *   allgather: element i % p of rank i / p;  alltoall: element R*p + i % p of rank i / p. */
static void row_prepare(struct bufs *b, const struct comm_check_gen *g, struct batch *bt, int W, int R)
{
    size_t p = bt->p, es = dtype_size(bt->t);
    bt->want = b->want;
    if (bt->coll == COMM_REDUCE_SCATTER) bt->want = b->want + (size_t)R * p * es;
    if (bt->coll != COMM_ALLGATHER && bt->coll != COMM_ALLTOALL) return;
    size_t j0 = bt->coll == COMM_ALLTOALL ? (size_t)R * p : 0;
    for (int r = 0; r < W; r++) {
        char *dst = b->want + (size_t)r * p * es;
        /* this rank's own block: its inputs, made already */
        if (r == R) memcpy(dst, b->mine + j0 * es, p * es);
        else comm_check_gen_fill(g, r, j0, p, dst);
    }
}

/* one rank's findings of one batch, exchanged with the others */
struct rank_rec {
    double time_s;  /* timed loop / iters */
    int64_t wrong;
    int64_t offset; /* first wrong element (-1: none) */
    double want, got;
};

/* what this rank receives and must check: elements and where */
static size_t checked_elems(const struct batch *bt, int W, int R, struct comm_args *a, char **where)
{
    size_t sn, rn, blen, at;
    batch_layout(bt, W, R, &sn, &rn, &blen, &at);
    *where = (char *)a->recv;
    if (bt->coll == COMM_REDUCE && R != bt->root) return 0;
    return rn;
}

static int flip_bit(struct bufs *b, dtype_t t, char *where, size_t k, plumb_err *e)
{
    size_t es = dtype_size(t);
    unsigned char el[8];
    int rc = from_buf(b, el, where + k * es, es, e);
    if (rc) return rc;
    el[0] ^= 1u; /* little-endian: the lowest mantissa bit, or bit 0 of an integer */
    return to_buf(b, where + k * es, el, es, e);
}

static const char *placement_name(int in_place) { return in_place ? "in-place" : "out-of-place"; }

struct sweep_ctx {
    const struct comm_check_opts *o;
    struct comm *host, *c;
    struct bufs b;
    int W, R;
    struct check_result *r;
    json_t *wrong_list;   /* details.wrong_elements */
    long long total_wrong;
    int injected_note;
    char broken[1024];    /* why the sweep stopped (an arrival timeout, a failed collective) */
    int failed;           /* a collective failed on this rank (the others fail theirs, or the watchdog ends them) */
};

static void hang_forever(const struct sweep_ctx *s, const char *what)
{
    log_warn("inject hang@%d: rank %d stops before '%s' and never arrives", s->R, s->R, what);
    fflush(stderr);
    /* outside the watchdog: a hung rank does not end itself; the others
     * name it and end the job */
    for (;;) {
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL);
    }
}

/* Runs one batch; fills rec (this rank's) and all[W] (everyone's). An
 * arrival timeout sets out->broken and returns PLUMB_ETIMEOUT. */
static int run_batch(struct sweep_ctx *s, struct batch *bt, struct rank_rec *all, struct comm_check_outcome *out,
                     plumb_err *e)
{
    const struct comm_check_opts *o = s->o;
    int rc;
    if (o->hang_rank == s->R) hang_forever(s, bt->what);
    int missing[COMM_CHECK_MAX_MISSING], nmiss = 0;
    rc = comm_arrive(s->host, bt->what, o->timeout_s, missing, COMM_CHECK_MAX_MISSING, &nmiss, e);
    if (rc == PLUMB_ETIMEOUT) {
        out->broken = 1;
        out->nmissing = nmiss;
        memcpy(out->missing, missing, sizeof(int) * (size_t)(nmiss < COMM_CHECK_MAX_MISSING ? nmiss : COMM_CHECK_MAX_MISSING));
        /* the reporter: the lowest rank that arrived */
        int rep = 0;
        for (int k = 0; k < nmiss && k < COMM_CHECK_MAX_MISSING && missing[k] == rep; k++) rep++;
        out->reporter = rep == s->R;
        snprintf(s->broken, sizeof s->broken, "%s", e->msg);
        return rc;
    }
    if (rc) return rc;
    struct comm_args a;
    batch_args(bt, &s->b, s->R, &a);
    struct rank_rec me = {0, 0, -1, 0, 0};
    /* timing */
    if ((rc = batch_fill_ones(bt, &s->b, s->W, s->R, e))) return rc;
    for (int i = 0; i < o->warmup && !rc; i++) rc = comm_run(s->c, &a, bt->what, e);
    if (rc) return rc;
    if (o->time_each) {
        /* OSU's method: each call timed on its own, ranks lined up between calls */
        double sum = 0;
        for (int i = 0; i < o->iters && !rc; i++) {
            double t0 = timer_now();
            rc = comm_run(s->c, &a, bt->what, e);
            sum += timer_now() - t0;
            if (!rc) rc = comm_barrier(s->host, "comm check: between timed calls", e);
        }
        if (rc) return rc;
        me.time_s = sum / o->iters;
    } else {
        double t0 = timer_now();
        for (int i = 0; i < o->iters && !rc; i++) rc = comm_start(s->c, &a, NULL, bt->what, e);
        if (!rc) rc = comm_wait(s->c, bt->what, e);
        if (rc) return rc;
        me.time_s = (timer_now() - t0) / o->iters;
    }
    /* the check run */
    if (o->check) {
        if ((rc = batch_init(bt, &s->b, s->W, s->R, e))) return rc;
        if ((rc = comm_run(s->c, &a, bt->what, e))) return rc;
        char *where;
        size_t n = checked_elems(bt, s->W, s->R, &a, &where), es = dtype_size(bt->t);
        if (o->corrupt_rank == s->R && n) {
            if (!s->injected_note)
                log_warn("inject corrupt@%d: rank %d flips bit 0 of the middle element it received after every checked "
                         "collective", s->R, s->R);
            s->injected_note = 1;
            if ((rc = flip_bit(&s->b, bt->t, where, n / 2, e))) return rc;
        }
        if ((rc = from_buf(&s->b, s->b.got, where, n * es, e))) return rc;
        /* every element against its exact value */
        me.wrong = comm_check_compare(bt->t, s->b.got, bt->want, n, &me.offset);
        if (me.wrong) {
            me.want = comm_check_get(bt->want, bt->t, (size_t)me.offset);
            me.got = comm_check_get(s->b.got, bt->t, (size_t)me.offset);
        }
    }
    rc = comm_allgather(s->host, &me, sizeof me, all, "comm check: exchange timings and wrong counts", e);
    return rc;
}

static json_t *placement_json(double t_s, double bytes, double factor, long long wrong, int check)
{
    json_t *o = json_object();
    double algbw = t_s > 0 ? bytes / t_s / 1e9 : 0;
    json_object_set_new(o, "time_us", json_real(t_s * 1e6));
    json_object_set_new(o, "algbw_GBps", json_real(algbw));
    json_object_set_new(o, "busbw_GBps", json_real(algbw * factor));
    if (check) json_object_set_new(o, "wrong", json_integer(wrong));
    else json_object_set_new(o, "wrong", json_null());
    return o;
}

static void print_place(FILE *f, const json_t *pl)
{
    if (!pl) {
        fprintf(f, "  %9s %7s %7s %6s", "-", "-", "-", "-");
        return;
    }
    double t = json_real_value(json_object_get(pl, "time_us"));
    fprintf(f, "  %9.2f %7.2f %7.2f", t, json_real_value(json_object_get(pl, "algbw_GBps")),
            json_real_value(json_object_get(pl, "busbw_GBps")));
    const json_t *w = json_object_get(pl, "wrong");
    if (json_is_integer(w)) fprintf(f, " %6lld", (long long)json_integer_value(w));
    else fprintf(f, " %6s", "N/A");
}

static void print_header(FILE *f, enum comm_coll coll, dtype_t t, enum comm_op op)
{
    fprintf(f, "#\n# %s %s%s%s\n", comm_coll_name(coll), dtype_name(t), is_reduction(coll) ? " " : "",
            is_reduction(coll) ? comm_op_name(op) : "");
    /* the row prefix is 46 columns, each placement block 34 */
    fprintf(f, "#%45s%23s%11s%21s\n", "", "out-of-place", "", "in-place");
    fprintf(f, "# %10s %12s %6s %6s %6s  %9s %7s %7s %6s  %9s %7s %7s %6s\n", "size", "count", "type", "redop", "root",
            "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
    fprintf(f, "# %10s %12s %6s %6s %6s  %9s %7s %7s %6s  %9s %7s %7s %6s\n", "(B)", "(elements)", "", "", "", "(us)",
            "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
}

static void fmt_value(char *buf, size_t n, dtype_t t, double v)
{
    if (t == DT_I64 || t == DT_I32) snprintf(buf, n, "%lld", (long long)v);
    else snprintf(buf, n, "%.9g", v);
}

/* records every rank's first wrong element of a batch (capped) */
static void note_wrong(struct sweep_ctx *s, const struct batch *bt, const struct rank_rec *all)
{
    for (int q = 0; q < s->W; q++) {
        if (!all[q].wrong) continue;
        if (json_array_size(s->wrong_list) >= 64) return;
        char want[40], got[40];
        fmt_value(want, sizeof want, bt->t, all[q].want);
        fmt_value(got, sizeof got, bt->t, all[q].got);
        json_t *w = json_object();
        json_object_set_new(w, "rank", json_integer(q));
        json_object_set_new(w, "collective", json_string(comm_coll_name(bt->coll)));
        json_object_set_new(w, "dtype", json_string(dtype_name(bt->t)));
        json_object_set_new(w, "bytes", json_integer((json_int_t)bt->bytes));
        json_object_set_new(w, "placement", json_string(placement_name(bt->in_place)));
        json_object_set_new(w, "wrong", json_integer(all[q].wrong));
        json_object_set_new(w, "offset", json_integer(all[q].offset));
        json_object_set_new(w, "expected", json_string(want));
        json_object_set_new(w, "got", json_string(got));
        json_array_append_new(s->wrong_list, w);
        if (s->o->table)
            fprintf(s->o->table,
                    "# WRONG: rank %d: %s %s %zu B %s: %lld wrong element%s, first at offset %lld: expected %s, got %s\n", q,
                    comm_coll_name(bt->coll), dtype_name(bt->t), bt->bytes, placement_name(bt->in_place),
                    (long long)all[q].wrong, all[q].wrong > 1 ? "s" : "", (long long)all[q].offset, want, got);
    }
}

static const char *human(double bytes, char *buf, size_t n)
{
    if (bytes >= 1 << 30 && fmod(bytes, 1 << 30) == 0) snprintf(buf, n, "%.0f GiB", bytes / (1 << 30));
    else if (bytes >= 1 << 20 && fmod(bytes, 1 << 20) == 0) snprintf(buf, n, "%.0f MiB", bytes / (1 << 20));
    else if (bytes >= 1 << 10 && fmod(bytes, 1 << 10) == 0) snprintf(buf, n, "%.0f KiB", bytes / (1 << 10));
    else snprintf(buf, n, "%.0f B", bytes);
    return buf;
}

/* Threshold verdicts of one sweep (its largest row and its mean). */
static void judge_sweep(struct sweep_ctx *s, enum comm_coll coll, const char *tname, const json_t *last, double avg,
                        double *worst_ratio)
{
    const struct comm_check_opts *o = s->o;
    double bytes = (double)json_integer_value(json_object_get(last, "bytes"));
    char hb[32];
    human(bytes, hb, sizeof hb);
    struct lim {
        double v;
        const char *what;
    } lims[2] = {{o->min_busbw, "--min-busbw"}, {0, NULL}};
    char file_what[600];
    const struct comm_thresholds *thr = o->thr;
    if (thr && s->W >= thr->min_world && bytes >= thr->at_bytes && thr->min_busbw[coll] > 0) {
        snprintf(file_what, sizeof file_what, "min_busbw.%s of [%s] (%s)", comm_coll_name(coll),
                 thr->sections[0] ? thr->sections : "all devices", thr->source);
        lims[1].v = thr->min_busbw[coll];
        lims[1].what = file_what;
    }
    const char *pl_key[2] = {"out", "in"};
    for (int k = 0; k < 2; k++) {
        if (!(lims[k].v > 0)) continue;
        for (int ip = 0; ip < 2; ip++) {
            const json_t *pl = json_object_get(last, pl_key[ip]);
            if (!pl || json_is_null(pl)) continue;
            double bw = json_real_value(json_object_get(pl, "busbw_GBps"));
            double ratio = bw / lims[k].v;
            if (ratio < *worst_ratio) *worst_ratio = ratio;
            if (bw < lims[k].v)
                check_set_status(s->r, CHECK_FAIL, "%s %s busbw %.2f GB/s at %s (%s) is below %s = %g GB/s%s",
                                 comm_coll_name(coll), tname, bw, hb, placement_name(ip), lims[k].what,
                                 lims[k].v, s->W == 1 ? " (bus bandwidth is 0 on one rank)" : "");
        }
    }
    double avg_lim[2] = {o->min_avg_busbw, 0};
    if (thr && s->W >= thr->min_world && bytes >= thr->at_bytes) avg_lim[1] = thr->min_avg_busbw[coll];
    for (int k = 0; k < 2; k++)
        if (avg_lim[k] > 0 && avg < 0.9 * avg_lim[k])
            check_set_status(s->r, CHECK_FAIL,
                             "%s %s average busbw %.2f GB/s is below 0.9 x %s = %g GB/s (nccl-tests' NCCL_TESTS_MIN_BW rule)",
                             comm_coll_name(coll), tname, avg, k ? "min_avg_busbw of the thresholds" : "--min-avg-busbw",
                             avg_lim[k]);
}

int check_comm_run(const struct check_ctx *ctx, struct comm *host, struct comm *c, const struct comm_check_opts *o,
                   struct check_result *r, struct comm_check_outcome *out, plumb_err *e)
{
    memset(out, 0, sizeof *out);
    if (o->iters < 1 || o->warmup < 0) return err_set(e, PLUMB_EUSAGE, "comm check: -n must be >= 1 and -w >= 0");
    if (o->min_bytes < 1 || o->max_bytes < o->min_bytes)
        return err_set(e, PLUMB_EUSAGE, "comm check: sizes: -b %zu -e %zu (expected 1 <= -b <= -e)", o->min_bytes,
                       o->max_bytes);
    if (!(o->step_factor > 1) && o->step_bytes < 1)
        return err_set(e, PLUMB_EUSAGE, "comm check: -f must be > 1 or -i >= 1 (the sizes would not grow)");
    if (o->root < 0 || o->root >= c->world)
        return err_set(e, PLUMB_EUSAGE, "comm check: --root %d outside 0..%d", o->root, c->world - 1);
    if ((o->hang_rank >= 0 || o->corrupt_rank >= 0) &&
        (o->hang_rank >= c->world || o->corrupt_rank >= c->world))
        return err_set(e, PLUMB_EUSAGE, "comm check: --inject names rank %d of %d ranks",
                       o->hang_rank >= 0 ? o->hang_rank : o->corrupt_rank, c->world);
    if (o->hang_rank >= 0 && c->world < 2)
        return err_set(e, PLUMB_EUSAGE, "comm check: --inject hang@%d needs at least 2 ranks (a rank alone has nobody "
                       "waiting for it)", o->hang_rank);
    if (check_begin(r, "comm", ctx && ctx->device ? ctx->device : (c->dev ? c->dev->label : "cpu")))
        return err_set(e, PLUMB_ENOMEM, "out of memory");
    struct sweep_ctx s = {.o = o, .host = host, .c = c, .W = c->world, .R = c->rank, .r = r};
    s.wrong_list = json_array();
    /* the largest buffer any batch needs: S_max (blocked collectives use
     * n * count <= S elements; the others S) */
    int rc = bufs_alloc(&s.b, c->dev, o->max_bytes, e);
    if (rc) {
        json_decref(s.wrong_list);
        check_free(r);
        return rc;
    }
    json_t *sweeps = json_array();
    int ncolls = 0, nsweeps = 0;
    char summary[256] = "";
    double worst_ratio = INFINITY;
    struct rank_rec *all = calloc((size_t)s.W, sizeof *all);
    if (!all) rc = err_set(e, PLUMB_ENOMEM, "out of memory");
    size_t largest_seen = 0;
    for (int coll = 0; coll < COMM_COLL_N && !rc && !out->broken && !s.failed; coll++) {
        if (!(o->colls & (1u << coll))) continue;
        ncolls++;
        for (int ti = 0; ti < o->ndtypes && !rc && !out->broken && !s.failed; ti++) {
            dtype_t t = o->dtypes[ti];
            json_t *sw = json_object();
            json_object_set_new(sw, "collective", json_string(comm_coll_name((enum comm_coll)coll)));
            json_object_set_new(sw, "dtype", json_string(dtype_name(t)));
            json_object_set_new(sw, "redop", is_reduction((enum comm_coll)coll) ? json_string(comm_op_name(o->op)) : json_null());
            json_object_set_new(sw, "root", json_integer(coll == COMM_BROADCAST || coll == COMM_REDUCE ? o->root : -1));
            json_array_append_new(sweeps, sw);
            const char *skip = NULL;
            char why[160];
            if (!comm_supports(c, (enum comm_coll)coll, t, o->op)) {
                snprintf(why, sizeof why, "%s does not support %s of %s%s%s", c->ops->name,
                         comm_coll_name((enum comm_coll)coll), dtype_name(t),
                         is_reduction((enum comm_coll)coll) ? " with " : "", is_reduction((enum comm_coll)coll) ? comm_op_name(o->op) : "");
                skip = why;
            } else if (!(comm_check_exact_limit(t) > 0)) {
                snprintf(why, sizeof why, "%s is not a dtype the check knows exact values for", dtype_name(t));
                skip = why;
            } else if (is_reduction((enum comm_coll)coll) && o->op == COMM_SUM && comm_check_exact_limit(t) < s.W) {
                snprintf(why, sizeof why, "a %s sum over %d ranks is not exact (%s holds every integer only up to %.0f)",
                         dtype_name(t), s.W, dtype_name(t), comm_check_exact_limit(t));
                skip = why;
            }
            if (skip) {
                json_object_set_new(sw, "skipped", json_string(skip));
                if (o->table) fprintf(o->table, "#\n# %s %s: skipped: %s\n", comm_coll_name((enum comm_coll)coll), dtype_name(t), skip);
                continue;
            }
            if (o->table) print_header(o->table, (enum comm_coll)coll, t, o->op);
            json_t *rows = json_array();
            json_object_set_new(sw, "rows", rows);
            double bw_sum = 0;
            int bw_n = 0;
            long long sw_wrong = 0;
            const json_t *last = NULL;
            double factor = comm_busbw_factor((enum comm_coll)coll, s.W);
            const unsigned case_id = (unsigned)(coll * 64 + (int)t * 4 + (int)o->op);
            struct comm_check_gen gen;
            comm_check_gen_init(&gen, o->seed, case_id, (enum comm_coll)coll, t, o->op, s.W);
            sweep_prepare(&s.b, &gen, (enum comm_coll)coll, o->root, s.R, o->check);
            for (size_t S = o->min_bytes; S <= o->max_bytes && !rc && !out->broken && !s.failed;) {
                struct batch bt = {.coll = (enum comm_coll)coll, .t = t, .op = o->op, .root = o->root};
                comm_check_counts(bt.coll, t, s.W, S, &bt.p, &bt.bytes);
                bt.case_id = case_id;
                if (bt.p > 0) {
                    if (o->check) row_prepare(&s.b, &gen, &bt, s.W, s.R);
                    json_t *row = json_object();
                    json_object_set_new(row, "bytes", json_integer((json_int_t)bt.bytes));
                    json_object_set_new(row, "count", json_integer((json_int_t)(bt.bytes / dtype_size(t))));
                    for (int ip = 0; ip < 2 && !rc && !out->broken && !s.failed; ip++) {
                        const char *key = ip ? "in" : "out";
                        if (ip && coll == COMM_ALLTOALL) {
                            json_object_set_new(row, key, json_null()); /* out of place only */
                            continue;
                        }
                        bt.in_place = ip;
                        snprintf(bt.what, sizeof bt.what, "%s %s %zu B %s", comm_coll_name(bt.coll), dtype_name(t),
                                 bt.bytes, placement_name(ip));
                        rc = run_batch(&s, &bt, all, out, e);
                        if (rc == PLUMB_ETIMEOUT && out->broken) rc = PLUMB_OK;
                        if (rc == PLUMB_EDEVICE || rc == PLUMB_ETIMEOUT || rc == PLUMB_EFAIL) {
                            /* the platform failed the collective (an NCCL timeout or error, the
                             * communicator aborted): a finding; the sweep cannot go on */
                            snprintf(s.broken, sizeof s.broken, "%s: %s", bt.what, e->msg);
                            s.failed = 1;
                            rc = PLUMB_OK;
                        }
                        if (rc || out->broken || s.failed) break;
                        double tsum = 0;
                        long long wr = 0;
                        for (int q = 0; q < s.W; q++) tsum += all[q].time_s, wr += all[q].wrong;
                        double tavg = tsum / s.W;
                        json_t *pl = placement_json(tavg, (double)bt.bytes, factor, wr, o->check);
                        bw_sum += json_real_value(json_object_get(pl, "busbw_GBps"));
                        bw_n++;
                        sw_wrong += wr;
                        json_object_set_new(row, key, pl);
                        if (wr) note_wrong(&s, &bt, all);
                    }
                    if (rc || out->broken || s.failed) {
                        json_decref(row);
                        break;
                    }
                    json_array_append_new(rows, row);
                    last = row;
                    if (bt.bytes > largest_seen) largest_seen = bt.bytes;
                    if (o->table) {
                        fprintf(o->table, "  %10zu %12zu %6s %6s %6d", bt.bytes, bt.bytes / dtype_size(t), dtype_name(t),
                                is_reduction(bt.coll) ? comm_op_name(o->op) : "none",
                                coll == COMM_BROADCAST || coll == COMM_REDUCE ? o->root : -1);
                        print_place(o->table, json_object_get(row, "out"));
                        const json_t *in = json_object_get(row, "in");
                        print_place(o->table, json_is_null(in) ? NULL : in);
                        fprintf(o->table, "\n");
                        fflush(o->table);
                    }
                }
                size_t next = o->step_factor > 1 ? (size_t)((double)S * o->step_factor) : S + o->step_bytes;
                if (next <= S) break;
                S = next;
            }
            if (rc || out->broken || s.failed) break;
            double avg = bw_n ? bw_sum / bw_n : 0;
            json_object_set_new(sw, "avg_busbw_GBps", json_real(avg));
            json_object_set_new(sw, "wrong", o->check ? json_integer(sw_wrong) : json_null());
            s.total_wrong += sw_wrong;
            nsweeps++;
            if (o->table)
                fprintf(o->table, "# %s %s: out of bounds values: %lld %s; avg bus bandwidth: %.3f GB/s\n",
                        comm_coll_name((enum comm_coll)coll), dtype_name(t), sw_wrong,
                        !o->check ? "(not checked)" : sw_wrong ? "FAILED" : "OK", avg);
            if (last) {
                char m[96], hb[32];
                const json_t *lo = json_object_get(last, "out");
                double lbytes = (double)json_integer_value(json_object_get(last, "bytes"));
                snprintf(m, sizeof m, "%s_%s_busbw_GBps", comm_coll_name((enum comm_coll)coll), dtype_name(t));
                check_metric(r, m, json_real_value(json_object_get(lo, "busbw_GBps")), "GB/s");
                snprintf(m, sizeof m, "%s_%s_algbw_GBps", comm_coll_name((enum comm_coll)coll), dtype_name(t));
                check_metric(r, m, json_real_value(json_object_get(lo, "algbw_GBps")), "GB/s");
                snprintf(m, sizeof m, "%s_%s_avg_busbw_GBps", comm_coll_name((enum comm_coll)coll), dtype_name(t));
                check_metric(r, m, avg, "GB/s");
                json_object_set(sw, "largest", (json_t *)last);
                if (!summary[0])
                    snprintf(summary, sizeof summary, "%s %s busbw %.2f GB/s, algbw %.2f GB/s at %s",
                             comm_coll_name((enum comm_coll)coll), dtype_name(t),
                             json_real_value(json_object_get(lo, "busbw_GBps")),
                             json_real_value(json_object_get(lo, "algbw_GBps")), human(lbytes, hb, sizeof hb));
            }
        }
    }
    free(all);
    bufs_free(&s.b);
    if (rc) {
        json_decref(sweeps);
        json_decref(s.wrong_list);
        check_free(r);
        return rc;
    }
    /* the record */
    json_t *det = json_object_get(r->obj, "details");
    json_object_set_new(det, "transport", json_string(c->desc));
    json_object_set_new(det, "implementation", json_string(c->ops->name));
    json_object_set_new(det, "ranks", json_integer(s.W));
    json_object_set_new(det, "min_bytes", json_integer((json_int_t)o->min_bytes));
    json_object_set_new(det, "max_bytes", json_integer((json_int_t)o->max_bytes));
    if (o->step_factor > 1) json_object_set_new(det, "step_factor", json_real(o->step_factor));
    else json_object_set_new(det, "step_bytes", json_integer((json_int_t)o->step_bytes));
    json_object_set_new(det, "warmup_iters", json_integer(o->warmup));
    json_object_set_new(det, "iters", json_integer(o->iters));
    json_object_set_new(det, "check", json_boolean(o->check));
    json_object_set_new(det, "timing", json_string(o->time_each ? "each call between barriers (OSU)" : "back-to-back loop (nccl-tests)"));
    json_object_set_new(det, "seed", json_integer((json_int_t)o->seed));
    json_object_set_new(det, "timeout_s", json_real(o->timeout_s));
    json_object_set_new(det, "size_rule", json_string("nccl-tests: size = the larger of a rank's send and receive "
                                                      "buffers; algbw = size / time (GB = 1e9 B); busbw = algbw x "
                                                      "2(n-1)/n allreduce, (n-1)/n allgather, reduce-scatter, "
                                                      "alltoall, 1 broadcast, reduce"));
    json_object_set_new(det, "sweeps", sweeps);
    json_object_set_new(det, "wrong_elements", s.wrong_list);
    if (o->corrupt_rank >= 0 || o->hang_rank >= 0) {
        char inj[64];
        snprintf(inj, sizeof inj, "%s@%d", o->corrupt_rank >= 0 ? "corrupt" : "hang",
                 o->corrupt_rank >= 0 ? o->corrupt_rank : o->hang_rank);
        json_object_set_new(det, "inject", json_string(inj));
    }
    if (o->thr) json_object_set_new(det, "thresholds", comm_thresholds_json(o->thr));
    if (o->min_busbw > 0) check_threshold(r, "min_busbw_GBps", o->min_busbw);
    if (o->min_avg_busbw > 0) check_threshold(r, "min_avg_busbw_GBps", o->min_avg_busbw);
    if (o->thr)
        for (int k = 0; k < COMM_COLL_N; k++)
            if (o->thr->min_busbw[k] > 0 && (o->colls & (1u << k))) {
                char m[64];
                snprintf(m, sizeof m, "min_busbw_GBps.%s", comm_coll_name((enum comm_coll)k));
                check_threshold(r, m, o->thr->min_busbw[k]);
            }
    check_metric(r, "wrong", (double)s.total_wrong, "elements");
    check_metric(r, "ranks", s.W, "");
    if (s.failed) check_set_status(r, CHECK_FAIL, "%s", s.broken);
    if (out->broken) {
        check_set_status(r, CHECK_FAIL, "%s", s.broken);
        json_t *m = json_array();
        for (int k = 0; k < out->nmissing && k < COMM_CHECK_MAX_MISSING; k++) json_array_append_new(m, json_integer(out->missing[k]));
        json_object_set_new(det, "missing_ranks", m);
    }
    if (s.total_wrong) {
        json_t *w0 = json_array_get(s.wrong_list, 0);
        check_set_status(r, CHECK_FAIL, "%lld wrong elements; first: rank %lld, %s %s %lld B %s, offset %lld: expected %s, got %s",
                         s.total_wrong, (long long)json_integer_value(json_object_get(w0, "rank")),
                         json_string_value(json_object_get(w0, "collective")), json_string_value(json_object_get(w0, "dtype")),
                         (long long)json_integer_value(json_object_get(w0, "bytes")),
                         json_string_value(json_object_get(w0, "placement")),
                         (long long)json_integer_value(json_object_get(w0, "offset")),
                         json_string_value(json_object_get(w0, "expected")), json_string_value(json_object_get(w0, "got")));
    }
    /* thresholds last, so the reason names a wrong element before a slow row */
    size_t si;
    json_t *sw;
    json_array_foreach(sweeps, si, sw)
    {
        const json_t *last = json_object_get(sw, "largest");
        if (!last) continue;
        judge_sweep(&s, (enum comm_coll)comm_coll_parse(json_string_value(json_object_get(sw, "collective"))),
                    json_string_value(json_object_get(sw, "dtype")), last,
                    json_real_value(json_object_get(sw, "avg_busbw_GBps")), &worst_ratio);
    }
    if (isfinite(worst_ratio)) check_metric(r, "busbw_over_threshold_min", worst_ratio, "");
    if (!out->broken && !s.failed && !nsweeps) check_set_status(r, CHECK_SKIP, "nothing to sweep: every collective and dtype asked for was skipped");
    char lo[32], hi[32];
    check_set_status(r, CHECK_PASS, "%d collective%s x %d dtype%s, %s..%s on %d rank%s (%s): %s%s%s", ncolls,
                     ncolls == 1 ? "" : "s", o->ndtypes, o->ndtypes == 1 ? "" : "s", human((double)o->min_bytes, lo, sizeof lo),
                     human((double)largest_seen, hi, sizeof hi), s.W, s.W == 1 ? "" : "s", c->ops->name,
                     o->check ? "0 wrong" : "data not checked", summary[0] ? "; " : "", summary);
    check_end(r);
    return PLUMB_OK;
}
