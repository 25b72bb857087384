/* Philox kernels: each thread computes one 4-word Philox block of the stream
 * (core/philox.h) and writes the elements of it that fall in
 * [first, first + n). Element i of the output is element first + i of the
 * stream, whatever the launch configuration, so the bits equal the CPU's. */
#include "gpu/gpu.h"
#include "gpu/ops.h"
#include "core/philox.h"

enum { RNG_KIND_U32 = 0, RNG_KIND_UNIFORM = 1, RNG_KIND_NORMAL = 2 };

__global__ void k_rng(int kind, uint64_t seed, uint32_t purpose, uint32_t a, uint32_t b, uint64_t first, size_t n,
                      void *out, uint64_t nblk)
{
    uint64_t blk0 = first >> 2;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; t < nblk; t += stride) {
        uint64_t blk = blk0 + t;
        uint32_t w[4];
        float z[4];
        if (kind == RNG_KIND_NORMAL) philox_normal4(seed, purpose, a, b, blk, z);
        else philox_block(seed, purpose, a, b, blk, w);
        for (int j = 0; j < 4; j++) {
            uint64_t idx = blk * 4 + (uint64_t)j;
            if (idx < first || idx - first >= n) continue;
            size_t o = (size_t)(idx - first);
            if (kind == RNG_KIND_U32) ((uint32_t *)out)[o] = w[j];
            else if (kind == RNG_KIND_UNIFORM) ((float *)out)[o] = philox_u01(w[j]);
            else ((float *)out)[o] = z[j];
        }
    }
}

static int rng_launch(struct dev *d, struct dev_stream *st, int kind, const struct rng_stream *rs, uint64_t first,
                      void *out, size_t n, plumb_err *e)
{
    if (!rs) return gpu_err(e, PLUMB_EUSAGE, "%s: rng stream is NULL", d->label);
    /* the counter holds the block index in 48 bits: element indices < 2^50 */
    if (first + n < first || ((first + n - 1) >> 50))
        return gpu_err(e, PLUMB_EUSAGE, "%s: rng elements [%llu, +%zu) exceed the 2^50 stream length", d->label,
                       (unsigned long long)first, n);
    uint64_t nblk = ((first + n + 3) >> 2) - (first >> 2);
    k_rng<<<gpu_grid((size_t)nblk, 256), 256, 0, st->s>>>(kind, rs->seed, rs->purpose, rs->a, rs->b, first, n, out,
                                                          nblk);
    GPU_CHECK_LAUNCH(d, "k_rng", e);
    return PLUMB_OK;
}

int rng_u32_launch(struct dev *d, struct dev_stream *st, const struct rng_stream *rs, uint64_t first, uint32_t *out,
                   size_t n, plumb_err *e)
{
    return rng_launch(d, st, RNG_KIND_U32, rs, first, out, n, e);
}
int rng_uniform_launch(struct dev *d, struct dev_stream *st, const struct rng_stream *rs, uint64_t first, float *out,
                       size_t n, plumb_err *e)
{
    return rng_launch(d, st, RNG_KIND_UNIFORM, rs, first, out, n, e);
}
int rng_normal_launch(struct dev *d, struct dev_stream *st, const struct rng_stream *rs, uint64_t first, float *out,
                      size_t n, plumb_err *e)
{
    return rng_launch(d, st, RNG_KIND_NORMAL, rs, first, out, n, e);
}
