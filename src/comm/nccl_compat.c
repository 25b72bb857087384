/* The nccl_* compatibility wrappers over comm.h: see comm/comm_nccl.h. */
#include "comm/comm_nccl.h"
#include <stdlib.h>

struct nccl_comm {
    struct comm *c;
};

int nccl_load(const char *backend, char *desc, size_t n, plumb_err *e) { return comm_nccl_load(backend, desc, n, e); }

int nccl_device_for_rank(const char *backend, int local_rank, int local_world, char spec[32], plumb_err *e)
{
    return dev_spec_for_local_rank(backend, local_rank, local_world, spec, e);
}

int nccl_comm_init(struct comm *host, struct dev *d, double timeout_s, struct nccl_comm **out, plumb_err *e)
{
    *out = NULL;
    struct nccl_comm *w = calloc(1, sizeof *w);
    if (!w) return err_set(e, PLUMB_ENOMEM, "nccl: out of memory");
    int rc = comm_open_device(host, d, "nccl", timeout_s, &w->c, e);
    if (rc) {
        free(w);
        return rc;
    }
    *out = w;
    return PLUMB_OK;
}

void nccl_comm_free(struct nccl_comm *c)
{
    if (!c) return;
    comm_finalize(c->c);
    free(c);
}

const char *nccl_describe(const struct nccl_comm *c) { return c->c->desc; }

struct comm *nccl_comm_of(struct nccl_comm *c) { return c->c; }

int nccl_allreduce_async(struct nccl_comm *c, void *buf, size_t n, dtype_t t, dev_stream *after, plumb_err *e)
{
    return comm_allreduce_start(c->c, buf, n, t, COMM_SUM, after, NULL, e);
}

int nccl_wait(struct nccl_comm *c, const char *what, plumb_err *e) { return comm_wait(c->c, what, e); }

int nccl_allreduce_buckets(struct nccl_comm *c, float *buf, size_t n, dev_stream *after, const char *what,
                           plumb_err *e)
{
    const char *v = getenv("PLUMB_NCCL_BUCKET_MB");
    double mb = v && *v ? atof(v) : 25.0;
    size_t per = mb > 0 ? (size_t)(mb * 1048576.0 / sizeof(float)) : n;
    if (per < 1) per = 1;
    int rc = PLUMB_OK;
    for (size_t o = 0; o < n && !rc; o += per)
        rc = comm_allreduce_start(c->c, buf + o, n - o < per ? n - o : per, DT_F32, COMM_SUM, after, what, e);
    if (!rc) rc = comm_wait(c->c, what, e);
    return rc;
}

int nccl_allgather(struct nccl_comm *c, const void *send, size_t bytes, void *recv, const char *what, plumb_err *e)
{
    return comm_allgather(c->c, send, bytes, recv, what, e);
}
