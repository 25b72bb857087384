/* The 1-rank communicator: reductions are identities, gathers are copies. */
#include "comm/comm.h"
#include <stdlib.h>
#include <string.h>

static int self_allreduce(struct comm *c, void *buf, size_t n, dtype_t t, enum comm_op op,
                          plumb_err *e)
{
    (void)c, (void)buf, (void)n;
    if (t != DT_F32 && t != DT_F64 && t != DT_I64 && t != DT_U32)
        return err_set(e, PLUMB_EUNSUPPORTED, "allreduce: type %s not supported", dtype_name(t));
    if (op != COMM_SUM && op != COMM_MAX && op != COMM_MIN)
        return err_set(e, PLUMB_EUNSUPPORTED, "allreduce: op %d not supported", (int)op);
    return PLUMB_OK;
}

static int self_broadcast(struct comm *c, void *buf, size_t bytes, int root, plumb_err *e)
{
    (void)c, (void)buf, (void)bytes, (void)root, (void)e;
    return PLUMB_OK;
}

static int self_allgather(struct comm *c, const void *send, size_t bytes, void *recv, plumb_err *e)
{
    (void)c, (void)e;
    if (bytes && recv != send) memmove(recv, send, bytes);
    return PLUMB_OK;
}

static int self_allgatherv(struct comm *c, const void *send, size_t bytes, void *recv,
                           const size_t *counts, plumb_err *e)
{
    (void)c;
    if (counts[0] != bytes)
        return err_set(e, PLUMB_EINTERNAL, "allgatherv: count %zu != %zu bytes sent", counts[0], bytes);
    if (bytes && recv != send) memmove(recv, send, bytes);
    return PLUMB_OK;
}

static int self_barrier(struct comm *c, plumb_err *e)
{
    (void)c, (void)e;
    return PLUMB_OK;
}

static void self_abort(struct comm *c, int code)
{
    (void)c;
    _Exit(code);
}

static void self_finalize(struct comm *c) { (void)c; }

static const struct comm_ops self_ops = {
    .name = "self",
    .allreduce = self_allreduce,
    .broadcast = self_broadcast,
    .allgather = self_allgather,
    .allgatherv = self_allgatherv,
    .barrier = self_barrier,
    .abort = self_abort,
    .finalize = self_finalize,
};

int comm_self_init(struct comm *c, plumb_err *e)
{
    (void)e;
    c->ops = &self_ops;
    c->rank = 0;
    c->world = 1;
    c->local_rank = 0;
    c->local_world = 1;
    c->impl = NULL;
    return PLUMB_OK;
}
