/* A device comm carried by a host comm (mpi or self): for the cpu device,
 * whose memory is host memory, the host comm runs on the buffers directly;
 * for a GPU without NCCL/RCCL, each collective waits for the stream that
 * produced its input, copies the input into pinned host memory, runs on the
 * host comm and copies the result back (default stream, synchronous); with
 * one rank it copies on the device instead. Every collective has completed
 * when start returns, so wait is nothing. */
#include "comm/comm.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct staged {
    struct comm *host;
    struct dev *d;
    int direct;       /* the device's memory is host memory */
    void *hs, *hr;    /* pinned staging: send [cap_s], recv [cap_r] bytes */
    size_t cap_s, cap_r;
};

static struct staged *st_of(const struct comm *c) { return c->impl; }

static int grow(struct staged *st, void **p, size_t *cap, size_t need, plumb_err *e)
{
    if (need <= *cap) return PLUMB_OK;
    if (*p) st->d->be->host_free(st->d, *p);
    *p = NULL;
    *cap = 0;
    size_t n = need + need / 4;
    int rc = st->d->be->host_alloc(st->d, n, p, e);
    if (rc) return err_wrap(e, "staged comm: %zu bytes of pinned host memory", n);
    *cap = n;
    return PLUMB_OK;
}

static int sg_supports(const struct comm *c, enum comm_coll coll, dtype_t t, enum comm_op op)
{
    const struct comm *h = st_of(c)->host;
    return h->ops->supports(h, coll, t, op);
}

static int run_host(struct comm *h, const struct comm_args *a, plumb_err *e)
{
    int rc = h->ops->start(h, a, NULL, e);
    if (!rc && h->ops->wait) rc = h->ops->wait(h, e);
    return rc;
}

static int sg_start(struct comm *c, const struct comm_args *a, dev_stream *after, plumb_err *e)
{
    struct staged *st = st_of(c);
    struct dev *d = st->d;
    /* the input is complete once the stream that wrote it has drained */
    int rc = d->be->stream_sync(d, after, e);
    if (rc) return rc;
    if (after && (rc = d->be->stream_sync(d, NULL, e))) return rc;
    if (st->direct) return run_host(st->host, a, e);
    size_t sn, rn, es = dtype_size(a->dtype);
    comm_args_sizes(c, a, &sn, &rn);
    if (c->world == 1) {
        /* one rank: every collective is a copy of send into recv, on the device
         * (gradients of a 1-rank run never leave it) */
        size_t bytes = (rn < sn ? rn : sn) * es;
        if (!bytes || a->send == a->recv) return PLUMB_OK;
        rc = d->be->memcpy_async(d, NULL, a->recv, a->send, bytes, MEMCPY_D2D, e);
        return rc ? rc : d->be->stream_sync(d, NULL, e);
    }
    if ((rc = grow(st, &st->hs, &st->cap_s, sn * es, e)) || (rc = grow(st, &st->hr, &st->cap_r, rn * es, e)))
        return rc;
    if (sn && (rc = d->be->memcpy_async(d, NULL, st->hs, a->send, sn * es, MEMCPY_D2H, e))) return rc;
    if (sn && (rc = d->be->stream_sync(d, NULL, e))) return rc;
    /* out of place on the host, whatever the device call was */
    struct comm_args h = *a;
    h.send = st->hs;
    h.recv = st->hr;
    if ((rc = run_host(st->host, &h, e))) return rc;
    if (rn && (rc = d->be->memcpy_async(d, NULL, a->recv, st->hr, rn * es, MEMCPY_H2D, e))) return rc;
    return rn ? d->be->stream_sync(d, NULL, e) : PLUMB_OK;
}

static int sg_allgatherv(struct comm *c, const void *send, size_t bytes, void *recv, const size_t *counts,
                         plumb_err *e)
{
    struct staged *st = st_of(c);
    if (!st->direct)
        return err_set(e, PLUMB_EUNSUPPORTED, "allgatherv: gathers host memory only, not memory of %s", st->d->label);
    return st->host->ops->allgatherv(st->host, send, bytes, recv, counts, e);
}

static int sg_barrier(struct comm *c, plumb_err *e)
{
    struct staged *st = st_of(c);
    int rc = st->d->be->stream_sync(st->d, NULL, e);
    return rc ? rc : st->host->ops->barrier(st->host, e);
}

static void sg_abort(struct comm *c, int code)
{
    struct comm *h = st_of(c)->host;
    if (h->ops->abort) h->ops->abort(h, code);
    _Exit(code);
}

static void sg_finalize(struct comm *c)
{
    struct staged *st = st_of(c);
    if (!st) return;
    if (st->hs) st->d->be->host_free(st->d, st->hs);
    if (st->hr) st->d->be->host_free(st->d, st->hr);
    free(st);
    c->impl = NULL;
}

static const struct comm_ops staged_ops = {
    .name = "host",
    .supports = sg_supports,
    .start = sg_start,
    .wait = NULL,
    .allgatherv = sg_allgatherv,
    .barrier = sg_barrier,
    .abort = sg_abort,
    .finalize = sg_finalize,
};

int comm_staged_init(struct comm *c, struct comm *host, struct dev *d, plumb_err *e)
{
    struct staged *st = calloc(1, sizeof *st);
    if (!st) return err_set(e, PLUMB_ENOMEM, "comm: out of memory");
    st->host = host;
    st->d = d;
    st->direct = !strcmp(d->be->name, "cpu");
    c->ops = &staged_ops;
    c->impl = st;
    c->dev = d;
    snprintf(c->desc, sizeof c->desc, "%s on %s%s", host->desc, d->label,
             st->direct ? " (its memory is host memory)" : ", staged through pinned host memory");
    return PLUMB_OK;
}
