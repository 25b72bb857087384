/* struct model_comm over a comm: see mcomm.h. */
#include "train/mcomm.h"
#include <stdlib.h>
#include <string.h>

static int sum_i64(void *ctx, int64_t *v, size_t n, const char *what, plumb_err *e)
{
    struct mcomm_ctx *m = ctx;
    return comm_allreduce(m->c, v, n, DT_I64, COMM_SUM, what, e);
}

/* Device fp32 sums: in place on host memory (the cpu device), else staged
 * through the host (stream ordered: the download waits for s's work). */
static int sum_f32(void *ctx, float *v, size_t n, dev_stream *s, const char *what, plumb_err *e)
{
    struct mcomm_ctx *m = ctx;
    if (!m->d || !strcmp(m->d->be->name, "cpu")) return comm_allreduce(m->c, v, n, DT_F32, COMM_SUM, what, e);
    float *h = malloc((n ? n : 1) * sizeof *h);
    if (!h) return err_set(e, PLUMB_ENOMEM, "%s: out of memory", what);
    int rc = m->d->be->stream_sync(m->d, s, e);
    if (!rc) rc = dev_download(m->d, h, v, n * sizeof *h, e);
    if (!rc) rc = comm_allreduce(m->c, h, n, DT_F32, COMM_SUM, what, e);
    if (!rc) rc = dev_upload(m->d, v, h, n * sizeof *h, e);
    free(h);
    return rc;
}

static int gather(void *ctx, const void *buf, size_t bytes, void **all, size_t *total, const char *what,
                  plumb_err *e)
{
    struct mcomm_ctx *m = ctx;
    return comm_allgatherv_alloc(m->c, buf, bytes, all, total, NULL, what, e);
}

void mcomm_bind(struct mcomm_ctx *ctx, struct model_comm *out)
{
    memset(out, 0, sizeof *out);
    out->rank = ctx->c->rank;
    out->world = ctx->c->world;
    out->ctx = ctx;
    out->sum_i64 = sum_i64;
    out->sum_f32 = sum_f32;
    out->gather = gather;
}
