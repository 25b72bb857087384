/* The per-block sums of the gradient utilities' sumsq (src/dev/train_ops.h:
 * blocks of 1024 elements, each a double sum of (double)x*(double)x in
 * ascending i), as a device function both GPU vendors compile and
 * tests/tools/gpu_emu.cc runs on the cpu against the definition, bit for
 * bit. Included by gpu/train_ops.cu only. */
#ifndef PLUMB_GPU_TRAIN_SUMSQ_CUH
#define PLUMB_GPU_TRAIN_SUMSQ_CUH

#define SUMSQ_BLK 1024
/* The per-block sums, in sumsq's order (a double sum of (double)x*(double)x
 * in ascending i over each 1024-element block), computed fast: one CUDA
 * block of SQ_TPB threads serves SQ_GROUP consecutive summation blocks. All
 * its threads stage a [SQ_GROUP, SQ_CHUNK] tile of x into shared memory
 * with coalesced loads (SQ_TPB * 32 independent loads in flight), then
 * thread r < SQ_GROUP adds summation block r's SQ_CHUNK values in ascending
 * i; SUMSQ_BLK / SQ_CHUNK rounds. Only the adds' order decides the bits,
 * and it is the definition's (one thread a block looping over global memory took 134 us
 * for 4.7e5 elements on the H200: each step waited on a load). The tile row
 * is padded by one so thread r's reads x[r][k] fall in distinct banks.
 * n: elements in x; blocks [bl0, bl0 + nbl) of it; part[j - bl0]. */
#define SQ_GROUP 32
#define SQ_CHUNK 256
#define SQ_TPB 256 /* threads of a CUDA block; any multiple of SQ_GROUP works */
__device__ static void sumsq_group(const float *x, size_t n, size_t bl0, size_t nbl, double *part)
{
    __shared__ float tile[SQ_GROUP][SQ_CHUNK + 1];
    const size_t j0 = (size_t)blockIdx.x * SQ_GROUP; /* first summation block of this CUDA block (from bl0) */
    const unsigned r = threadIdx.x;
    double acc = 0.0;
    for (size_t c = 0; c < SUMSQ_BLK; c += SQ_CHUNK) {
        for (unsigned f = threadIdx.x; f < SQ_GROUP * SQ_CHUNK; f += SQ_TPB) {
            const unsigned rr = f / SQ_CHUNK, cc = f % SQ_CHUNK;
            const size_t i = (bl0 + j0 + rr) * SUMSQ_BLK + c + cc;
            tile[rr][cc] = (j0 + rr < nbl && i < n) ? x[i] : 0.0f;
        }
        __syncthreads();
        if (r < SQ_GROUP && j0 + r < nbl) {
            const size_t i0 = (bl0 + j0 + r) * SUMSQ_BLK + c;
            const size_t len = i0 >= n ? 0 : n - i0 < SQ_CHUNK ? n - i0 : SQ_CHUNK;
            const float *row = tile[r];
            for (size_t k = 0; k < len; k++) {
                const double v = (double)row[k];
                acc += v * v;
            }
        }
        __syncthreads();
    }
    if (r < SQ_GROUP && j0 + r < nbl) part[j0 + r] = acc;
}

#endif
