/* struct model_comm (train/model.h) over a comm (comm/comm.h): what the
 * trainer hands models and eval reductions so they never include comm. */
#ifndef PLUMB_MCOMM_H
#define PLUMB_MCOMM_H
#include "comm/comm.h"
#include "dev/dev.h"
#include "train/model.h"

struct mcomm_ctx {
    struct comm *c;
    struct dev *d;   /* device of sum_f32's buffers; NULL or the cpu: host memory */
};

/* Binds out to ctx (which must outlive out). */
void mcomm_bind(struct mcomm_ctx *ctx, struct model_comm *out);

#endif
