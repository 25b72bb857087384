/* The gradient utilities' sumsq (src/dev/train_ops.h) as device functions
 * both GPU vendors compile and tests/tools/gpu_emu.cc runs on the cpu
 * against the definition, bit for bit: the per-block sums (blocks of 1024
 * elements, each a double sum of (double)x*(double)x in ascending i), and
 * the two orders that add them into out[0] (golden: ascending; fast: in
 * groups). Included by gpu/train_ops.cu only. */
#ifndef PLUMB_GPU_TRAIN_SUMSQ_CUH
#define PLUMB_GPU_TRAIN_SUMSQ_CUH

#include "dev/train_ops.h" /* TRAIN_SUMSQ_GROUP */

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
/* acc + row[0]^2 + row[1]^2 + ... + row[len-1]^2 in double, in that order */
__device__ static inline double sumsq_chain(const float *row, size_t len, double acc)
{
#pragma unroll 16
    for (size_t k = 0; k < len; k++) {
        const double v = (double)row[k];
        acc += v * v;
    }
    return acc;
}
/* The fast path of sumsq_group for a group wholly inside x with x 16-byte
 * aligned: each thread holds its 8 float4 of the next chunk in registers,
 * loaded before the adds of the current one, so the next chunk's loads are in
 * flight while one warp adds (the staged form loaded, waited, then added:
 * 257 us for gpt2-124m's 124 M gradients on an H100, 1.9 TB/s). The tile and
 * the adds are the same, so the bits are. */
#define SQ_V4 (SQ_GROUP * SQ_CHUNK / 4 / SQ_TPB) /* float4s a thread a chunk */
__device__ static inline void sumsq_load4(const float4 *g, size_t c, float4 *v)
{
#pragma unroll
    for (int u = 0; u < SQ_V4; u++) {
        const unsigned f = threadIdx.x + (unsigned)u * SQ_TPB, rr = f / (SQ_CHUNK / 4), cc = f % (SQ_CHUNK / 4);
        v[u] = g[((size_t)rr * SUMSQ_BLK + c) / 4 + cc];
    }
}
__device__ static void sumsq_group_full(const float *xg, double *part, float (*tile)[SQ_CHUNK + 1])
{
    const float4 *g = (const float4 *)xg;
    const unsigned r = threadIdx.x;
    float4 v[SQ_V4];
    sumsq_load4(g, 0, v);
    double acc = 0.0;
    for (size_t c = 0; c < SUMSQ_BLK; c += SQ_CHUNK) {
#pragma unroll
        for (int u = 0; u < SQ_V4; u++) {
            const unsigned f = threadIdx.x + (unsigned)u * SQ_TPB, rr = f / (SQ_CHUNK / 4), cc = f % (SQ_CHUNK / 4) * 4;
            tile[rr][cc] = v[u].x;
            tile[rr][cc + 1] = v[u].y;
            tile[rr][cc + 2] = v[u].z;
            tile[rr][cc + 3] = v[u].w;
        }
        __syncthreads();
        if (c + SQ_CHUNK < SUMSQ_BLK) sumsq_load4(g, c + SQ_CHUNK, v);
        if (r < SQ_GROUP) acc = sumsq_chain(tile[r], SQ_CHUNK, acc);
        __syncthreads();
    }
    if (r < SQ_GROUP) part[r] = acc;
}
__device__ static void sumsq_group(const float *x, size_t n, size_t bl0, size_t nbl, double *part)
{
    __shared__ float tile[SQ_GROUP][SQ_CHUNK + 1]; /* one tile for both paths: 33 KB */
    const size_t j0 = (size_t)blockIdx.x * SQ_GROUP; /* first summation block of this CUDA block (from bl0) */
    const float *xg = x + (bl0 + j0) * SUMSQ_BLK;
    if (j0 + SQ_GROUP <= nbl && (bl0 + j0 + SQ_GROUP) * SUMSQ_BLK <= n && !((uintptr_t)xg & 15)) {
        sumsq_group_full(xg, part + j0, tile);
        return;
    }
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
            /* a whole chunk with the constant trip count, so the inlined,
             * unrolled chain's shared-memory loads issue ahead of the adds
             * that need them (the same order, so the same bits). With the
             * dynamic count each add waited on its load: ctr's 13.6 M
             * sparse-row values took 55 us on an H100, about 3x their
             * bytes' time (BENCHMARKS.md 2026-12-05). */
            acc = len == SQ_CHUNK ? sumsq_chain(tile[r], SQ_CHUNK, acc) : sumsq_chain(tile[r], len, acc);
        }
        __syncthreads();
    }
    if (r < SQ_GROUP && j0 + r < nbl) part[j0 + r] = acc;
}

/* ---- the block sums into out[0]: one block of threads ---- */

/* tot + part[0] + part[1] + ... + part[k-1], added left to right by thread 0
 * of the block (the sequential definition: the same bits as one thread's
 * loop over global memory). The other threads only stage the next tile of
 * part into shared memory (coalesced) while thread 0 adds the current one, so
 * the adds wait on shared memory instead of on one global load each (one
 * thread doing both measured 7 ms for 1.2e5 partials on the H200). */
#define ORDSUM_TILE 2048
__device__ static double ordered_dsum(const double *part, size_t k, double tot)
{
    __shared__ double buf[2][ORDSUM_TILE];
    const size_t nt = (k + ORDSUM_TILE - 1) / ORDSUM_TILE;
    for (size_t i = threadIdx.x; i < ORDSUM_TILE && i < k; i += blockDim.x) buf[0][i] = part[i];
    __syncthreads();
    for (size_t t = 0; t < nt; t++) {
        if (t + 1 < nt) { /* tile t + 1 into the other buffer, read last in round t - 1 */
            const size_t o = (t + 1) * ORDSUM_TILE, len = k - o < ORDSUM_TILE ? k - o : ORDSUM_TILE;
            double *nb = buf[(t + 1) & 1];
            for (size_t i = threadIdx.x; i < len; i += blockDim.x) nb[i] = part[o + i];
        }
        if (threadIdx.x == 0) {
            const size_t o = t * ORDSUM_TILE, len = k - o < ORDSUM_TILE ? k - o : ORDSUM_TILE;
            const double *cb = buf[t & 1];
#pragma unroll 16
            for (size_t i = 0; i < len; i++) tot += cb[i];
        }
        __syncthreads();
    }
    return tot;
}

/* sumsq's fast order (src/dev/train_ops.h): tot + g0 + g1 + ..., g_j the
 * sum from 0.0 of part[j * TRAIN_SUMSQ_GROUP ...] ascending. A thread sums a
 * group (blockDim.x groups at once), thread 0 adds the group sums of each
 * tile of GRPSUM_TILE in order: a chain of 128 + k / 128 adds, not k. */
#define GRPSUM_TILE 1024
__device__ static double grouped_dsum(const double *part, size_t k, double tot)
{
    __shared__ double gsum[GRPSUM_TILE];
    const size_t ng = (k + TRAIN_SUMSQ_GROUP - 1) / TRAIN_SUMSQ_GROUP;
    for (size_t c = 0; c < ng; c += GRPSUM_TILE) {
        const size_t len = ng - c < GRPSUM_TILE ? ng - c : GRPSUM_TILE;
        for (size_t g = threadIdx.x; g < len; g += blockDim.x) {
            const size_t b0 = (c + g) * TRAIN_SUMSQ_GROUP;
            const size_t b1 = k - b0 < TRAIN_SUMSQ_GROUP ? k : b0 + TRAIN_SUMSQ_GROUP;
            double a = 0.0;
#pragma unroll 8
            for (size_t b = b0; b < b1; b++) a += part[b];
            gsum[g] = a;
        }
        __syncthreads();
        if (threadIdx.x == 0)
            for (size_t i = 0; i < len; i++) tot += gsum[i];
        __syncthreads();
    }
    return tot;
}

#endif
