/* Philox kernels (core/philox.h). */
#include "gpu/gpu.h"
#include "gpu/ops.h"
int rng_u32_launch(struct dev *d, struct dev_stream *st, const struct rng_stream *rs, uint64_t first,
                   uint32_t *out, size_t n, plumb_err *e)
{
    (void)st; (void)rs; (void)first; (void)out; (void)n;
    return gpu_err(e, PLUMB_EUNSUPPORTED, "%s: rng not built yet", d->label);
}
int rng_uniform_launch(struct dev *d, struct dev_stream *st, const struct rng_stream *rs, uint64_t first,
                       float *out, size_t n, plumb_err *e)
{
    (void)st; (void)rs; (void)first; (void)out; (void)n;
    return gpu_err(e, PLUMB_EUNSUPPORTED, "%s: rng not built yet", d->label);
}
int rng_normal_launch(struct dev *d, struct dev_stream *st, const struct rng_stream *rs, uint64_t first,
                      float *out, size_t n, plumb_err *e)
{
    (void)st; (void)rs; (void)first; (void)out; (void)n;
    return gpu_err(e, PLUMB_EUNSUPPORTED, "%s: rng not built yet", d->label);
}
