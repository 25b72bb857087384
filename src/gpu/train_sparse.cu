/* Embeddings and the deterministic sparse reduction on the GPU
 * (train_ops.h; the interaction is in train_interact.cu).
 *
 * embedding_fwd: one thread per output element, a copy rounded to rt.
 * embedding_bwd / sparse_coalesce / embedding_bwd_sgd: a stable sort of
 *   (row, position) pairs by row: on CUDA CUB's onesweep radix sort; on HIP
 *   our LSD radix sort (4-bit digits: per-tile digit counts, one exclusive
 *   scan over (digit, tile), then a stable scatter where each thread owns
 *   consecutive items; passes beyond the largest key stop early on the
 *   device). Both are stable, so equal rows keep ascending position and the
 *   result does not depend on the sort. The host bounds the key width by
 *   the device memory (a row index of a table that fits), so no host
 *   synchronisation is needed. Head flags and a scan give the distinct rows
 *   in ascending order; then each row's vectors are summed as train_ops.h
 *   defines it: golden one chain of fp32 adds in ascending position from 0;
 *   fast the same for rows of at most TRAIN_SPARSE_CHUNK positions, and for
 *   hotter rows every chunk of every row summed in parallel (k_chunk_sum)
 *   then the chunk sums added per row in chunk order. embedding_bwd_sgd
 *   applies the sparse SGD update to the table with each row's sum in the
 *   same kernel instead of writing the sums (the bits of embedding_bwd +
 *   sgd_sparse). sparse_coalesce validates its rows (a negative one is a
 *   usage error naming it, which costs one synchronisation). */
#include "gpu/train_gpu.h"
#if !defined(PLUMB_HIP)
#include <cub/device/device_radix_sort.cuh>
#endif
#include <stdlib.h>
#include <string.h>

#define TPB 256

/* ---------------- embedding gather ---------------- */

__global__ void k_emb_fwd(const float *table, const int64_t *off, const uint32_t *idx, float *out, int B, int T, int D,
                          int rt)
{
    size_t tot = (size_t)B * T * D;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < tot; i += (size_t)gridDim.x * blockDim.x) {
        size_t bt = i / (size_t)D;
        int k = (int)(i % (size_t)D), t = (int)(bt % (size_t)T);
        int64_t row = off[t] + (int64_t)idx[bt];
        out[i] = tr_round(table[(size_t)row * D + k], rt);
    }
}

int tr_embedding_fwd(struct dev *d, struct dev_stream *st, const float *table, const int64_t *off, const uint32_t *idx,
                     float *out, int B, int T, int D, dtype_t rt, plumb_err *e)
{
    size_t tot = (size_t)B * T * D;
    k_emb_fwd<<<gpu_grid(tot, TPB), TPB, 0, st->s>>>(table, off, idx, out, B, T, D, (int)rt);
    GPU_CHECK_LAUNCH(d, "k_emb_fwd", e);
    return PLUMB_OK;
}

/* ---------------- stable radix sort ---------------- */

#define RS_ITEMS 8
#define RS_TILE (TPB * RS_ITEMS)
#define RS_BITS 4
#define RS_DIG (1 << RS_BITS)

/* keys from the embedding indices: key[p] = off[t] + idx[p], val[p] = p */
__global__ void k_emb_keys(const int64_t *off, const uint32_t *idx, size_t n, int T, uint64_t *key, uint32_t *val)
{
    for (size_t p = blockIdx.x * (size_t)blockDim.x + threadIdx.x; p < n; p += (size_t)gridDim.x * blockDim.x) {
        key[p] = (uint64_t)(off[p % (size_t)T] + (int64_t)idx[p]);
        val[p] = (uint32_t)p;
    }
}
__global__ void k_copy_keys(const int64_t *rows, size_t n, uint64_t *key, uint32_t *val)
{
    for (size_t p = blockIdx.x * (size_t)blockDim.x + threadIdx.x; p < n; p += (size_t)gridDim.x * blockDim.x) {
        key[p] = (uint64_t)rows[p];
        val[p] = (uint32_t)p;
    }
}

#if defined(PLUMB_HIP) /* our LSD radix sort; CUDA sorts with CUB */
/* meta[0] = largest key (integer max: the result does not depend on order) */
__global__ void k_maxkey(const uint64_t *key, size_t n, unsigned long long *meta)
{
    unsigned long long m = 0;
    for (size_t p = blockIdx.x * (size_t)blockDim.x + threadIdx.x; p < n; p += (size_t)gridDim.x * blockDim.x)
        m = key[p] > m ? key[p] : m;
    for (int o = PLUMB_WARP / 2; o > 0; o >>= 1) {
        unsigned long long v = plumb_shfl_xor(m, o);
        m = v > m ? v : m;
    }
    if (threadIdx.x % PLUMB_WARP == 0 && m) atomicMax(meta, m);
}

#endif

__device__ static inline int pass_active(const unsigned long long *meta, int shift)
{
    return shift == 0 ? meta[0] != 0 : (meta[0] >> shift) != 0;
}

#if defined(PLUMB_HIP)
/* counts[dig * ntiles + tile] */
__global__ void k_rs_hist(const uint64_t *key, size_t n, int shift, unsigned *counts, unsigned ntiles,
                          const unsigned long long *meta)
{
    if (!pass_active(meta, shift)) return;
    __shared__ unsigned c[RS_DIG];
    if (threadIdx.x < RS_DIG) c[threadIdx.x] = 0;
    __syncthreads();
    size_t base = (size_t)blockIdx.x * RS_TILE + (size_t)threadIdx.x * RS_ITEMS;
    unsigned loc[RS_DIG];
#pragma unroll
    for (int q = 0; q < RS_DIG; q++) loc[q] = 0;
    for (int j = 0; j < RS_ITEMS; j++)
        if (base + j < n) loc[(key[base + j] >> shift) & (RS_DIG - 1)]++;
#pragma unroll
    for (int q = 0; q < RS_DIG; q++)
        if (loc[q]) atomicAdd(&c[q], loc[q]); /* integer counts: order-free */
    __syncthreads();
    if (threadIdx.x < RS_DIG) counts[(size_t)threadIdx.x * ntiles + blockIdx.x] = c[threadIdx.x];
}

#endif

/* Exclusive scan of a[0..n) in place, one block of TPB threads (n up to a few
 * million: each thread scans a contiguous strip). total (optional) = sum. */
__global__ void k_scan1(unsigned *a, size_t n, const unsigned long long *meta, int shift, unsigned *total)
{
    if (meta && !pass_active(meta, shift)) return;
    __shared__ unsigned sh[TPB];
    size_t per = (n + TPB - 1) / TPB, s0 = threadIdx.x * per, s1 = s0 + per < n ? s0 + per : n;
    unsigned sum = 0;
    for (size_t i = s0; i < s1; i++) sum += a[i];
    sh[threadIdx.x] = sum;
    __syncthreads();
    for (int o = 1; o < TPB; o <<= 1) { /* Hillis-Steele inclusive */
        unsigned v = threadIdx.x >= (unsigned)o ? sh[threadIdx.x - o] : 0;
        __syncthreads();
        sh[threadIdx.x] += v;
        __syncthreads();
    }
    unsigned run = threadIdx.x ? sh[threadIdx.x - 1] : 0;
    if (total && threadIdx.x == TPB - 1) *total = sh[TPB - 1];
    for (size_t i = s0; i < s1; i++) {
        unsigned v = a[i];
        a[i] = run;
        run += v;
    }
}

#if defined(PLUMB_HIP)
__global__ void k_rs_scatter(const uint64_t *kin, const uint32_t *vin, uint64_t *kout, uint32_t *vout, size_t n,
                             int shift, const unsigned *counts, unsigned ntiles, const unsigned long long *meta)
{
    if (!pass_active(meta, shift)) return;
    __shared__ unsigned sc[RS_DIG * TPB]; /* [dig][thread] then its exclusive scan */
    __shared__ unsigned part[TPB];
    size_t base = (size_t)blockIdx.x * RS_TILE + (size_t)threadIdx.x * RS_ITEMS;
    uint64_t kk[RS_ITEMS];
    uint32_t vv[RS_ITEMS];
    unsigned loc[RS_DIG];
#pragma unroll
    for (int q = 0; q < RS_DIG; q++) loc[q] = 0;
#pragma unroll
    for (int j = 0; j < RS_ITEMS; j++) {
        if (base + j < n) {
            kk[j] = kin[base + j];
            vv[j] = vin[base + j];
            loc[(kk[j] >> shift) & (RS_DIG - 1)]++;
        }
    }
#pragma unroll
    for (int q = 0; q < RS_DIG; q++) sc[q * TPB + threadIdx.x] = loc[q];
    __syncthreads();
    /* exclusive scan of the RS_DIG*TPB array in digit-major order: thread t
     * scans the strip [t*RS_DIG, (t+1)*RS_DIG) */
    unsigned s = 0;
    for (int q = 0; q < RS_DIG; q++) s += sc[threadIdx.x * RS_DIG + q];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int o = 1; o < TPB; o <<= 1) {
        unsigned v = threadIdx.x >= (unsigned)o ? part[threadIdx.x - o] : 0;
        __syncthreads();
        part[threadIdx.x] += v;
        __syncthreads();
    }
    unsigned run = threadIdx.x ? part[threadIdx.x - 1] : 0;
    for (int q = 0; q < RS_DIG; q++) {
        unsigned v = sc[threadIdx.x * RS_DIG + q];
        sc[threadIdx.x * RS_DIG + q] = run;
        run += v;
    }
    __syncthreads();
    /* position = global offset of (digit, tile) + items of that digit in
     * earlier threads of this tile + earlier items of this thread */
    unsigned seen[RS_DIG];
#pragma unroll
    for (int q = 0; q < RS_DIG; q++) seen[q] = 0;
#pragma unroll
    for (int j = 0; j < RS_ITEMS; j++) {
        if (base + j < n) {
            int q = (int)((kk[j] >> shift) & (RS_DIG - 1));
            unsigned pos = counts[(size_t)q * ntiles + blockIdx.x] + (sc[q * TPB + threadIdx.x] - sc[q * TPB]) + seen[q]++;
            kout[pos] = kk[j];
            vout[pos] = vv[j];
        }
    }
}

#endif

/* ---------------- segments ---------------- */

/* Which buffer holds the sorted data: the number of active passes' parity. */
__device__ static inline int sorted_in_b(const unsigned long long *meta, int npass)
{
    if (!meta) return 0; /* a sort with a known output buffer (CUB) */
    int act = 0;
    for (int p = 0; p < npass; p++) act += pass_active(meta, p * RS_BITS);
    return act & 1;
}

__global__ void k_heads(const uint64_t *ka, const uint64_t *kb, size_t n, const unsigned long long *meta, int npass,
                        unsigned *flag)
{
    const uint64_t *k = sorted_in_b(meta, npass) ? kb : ka;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        flag[i] = (i == 0 || k[i] != k[i - 1]) ? 1u : 0u;
}

/* tile sums of flag into tsum[tile] (tile = RS_TILE items) */
__global__ void k_tile_sum(const unsigned *flag, size_t n, unsigned *tsum)
{
    __shared__ unsigned sh[TPB];
    size_t base = (size_t)blockIdx.x * RS_TILE;
    unsigned s = 0;
    for (int j = threadIdx.x; j < RS_TILE; j += TPB)
        if (base + j < n) s += flag[base + j];
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int w = TPB / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) tsum[blockIdx.x] = sh[0];
}

/* segment id of each head: seg[i] = tile offset + heads before i in the tile;
 * writes rows_out[u] and start[u]; start[U] = n, n_out = U */
__global__ void k_seg_write(const uint64_t *ka, const uint64_t *kb, const unsigned *flag, size_t n,
                            const unsigned *toff, const unsigned *total, const unsigned long long *meta, int npass,
                            int64_t *rows_out, unsigned *start, int64_t *n_out, unsigned *seg_of)
{
    __shared__ unsigned sh[TPB];
    const uint64_t *k = sorted_in_b(meta, npass) ? kb : ka;
    size_t base = (size_t)blockIdx.x * RS_TILE + (size_t)threadIdx.x * RS_ITEMS;
    unsigned s = 0;
    for (int j = 0; j < RS_ITEMS; j++)
        if (base + j < n) s += flag[base + j];
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int o = 1; o < TPB; o <<= 1) {
        unsigned v = threadIdx.x >= (unsigned)o ? sh[threadIdx.x - o] : 0;
        __syncthreads();
        sh[threadIdx.x] += v;
        __syncthreads();
    }
    unsigned u = toff[blockIdx.x] + (threadIdx.x ? sh[threadIdx.x - 1] : 0);
    for (int j = 0; j < RS_ITEMS; j++) {
        size_t i = base + j;
        if (i >= n) break;
        if (flag[i]) {
            rows_out[u] = (int64_t)k[i];
            start[u] = (unsigned)i;
            u++;
        }
        if (seg_of) seg_of[i] = u - 1; /* position 0 is a head: u >= 1 */
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        start[*total] = (unsigned)n;
        *n_out = (int64_t)*total;
    }
}

/* The per-row sums run G lanes per row (G = D rounded up to a power of two,
 * at most the warp): lane g owns columns g, g+G, ...; the lanes of a group
 * read the same sorted position (one broadcast load) and then the row's
 * D floats of that position together (one coalesced segment). Several
 * positions are loaded before they are added, in position order. Groups of
 * a warp run independently (no shuffles), so a short row does not wait for
 * a long one in the same warp beyond the hardware's divergence. */
__host__ __device__ static inline int group_lanes(int D)
{
    int g = 1;
    while (g < D && g < PLUMB_WARP) g <<= 1;
    return g;
}

/* One chain of the definition: column k of the sum of the sorted positions
 * [c0, c1), plain fp32 adds in ascending position from 0. */
__device__ static inline float group_chain(const uint32_t *perm, const float *vals, int D, unsigned c0, unsigned c1,
                                           int k)
{
    float acc = 0.0f;
    unsigned i = c0;
    /* 8 positions' loads in flight, then their adds in order */
    for (; i + 8 <= c1; i += 8) {
        float v[8];
#pragma unroll
        for (int j = 0; j < 8; j++) v[j] = vals[(size_t)perm[i + j] * D + k];
#pragma unroll
        for (int j = 0; j < 8; j++) acc = acc + v[j];
    }
    for (; i < c1; i++) acc = acc + vals[(size_t)perm[i] * D + k];
    return acc;
}

/* Fast mode: chunk c of a hot row (more than CH positions) starts at sorted
 * position s0 + c*CH. Window m = [m*CH, (m+1)*CH) holds at most two chunk
 * starts: one of the row that contains position m*CH (slot 2m), and the first
 * chunk of a hot row starting strictly inside the window (slot 2m+1; such a
 * row also contains (m+1)*CH). The slot of chunk start q of a row starting at
 * s0: 2*(q/CH) + (s0 > (q/CH)*CH). */
__device__ static inline size_t chunk_slot(unsigned s0, unsigned q, unsigned CH)
{
    const unsigned m = q / CH;
    return 2 * (size_t)m + (s0 > m * CH ? 1 : 0);
}

/* one group per slot (window, which): that hot-row chunk's sum, if any */
__global__ void k_chunk_sum(const uint32_t *va, const uint32_t *vb, const unsigned long long *meta, int npass,
                            const unsigned *start, const unsigned *seg_of, const float *vals, int D, size_t n,
                            unsigned CH, float *part)
{
    const uint32_t *perm = sorted_in_b(meta, npass) ? vb : va;
    const int G = group_lanes(D), gl = threadIdx.x % G;
    const size_t gpb = blockDim.x / G, nslot = 2 * ((n + CH - 1) / CH);
    for (size_t sl = blockIdx.x * gpb + threadIdx.x / G; sl < nslot; sl += (size_t)gridDim.x * gpb) {
        const size_t m = sl / 2, p0 = m * CH, p1 = p0 + CH < n ? p0 + CH : n;
        unsigned c0 = 0, c1 = 0; /* the chunk [c0, c1), if any */
        if (sl % 2 == 0) {
            const unsigned r = seg_of[p0], s0 = start[r], s1 = start[r + 1];
            if (s1 - s0 <= CH) continue;
            const unsigned q = s0 + (unsigned)((p0 - s0 + CH - 1) / CH) * CH;
            if (q >= p1 || q >= s1) continue;
            c0 = q;
            c1 = s1 - q < CH ? s1 : q + CH;
        } else {
            if (p1 >= n) continue;
            const unsigned r = seg_of[p1], s0 = start[r], s1 = start[r + 1];
            if (!(s0 > p0 && s0 < p1 && s1 - s0 > CH)) continue;
            c0 = s0;
            c1 = s0 + CH;
        }
        float *o = part + sl * (size_t)D;
        for (int k = gl; k < D; k += G) o[k] = group_chain(perm, vals, D, c0, c1, k);
    }
}

/* a hot row's chunk sums added in chunk order from 0, 8 loads in flight */
__device__ static inline float chunk_chain(const float *part, int D, unsigned s0, unsigned s1, unsigned CH, int k)
{
    float acc = 0.0f;
    unsigned q = s0;
    for (; q + 8 * CH <= s1; q += 8 * CH) {
        float v[8];
#pragma unroll
        for (int j = 0; j < 8; j++) v[j] = part[chunk_slot(s0, q + j * CH, CH) * D + k];
#pragma unroll
        for (int j = 0; j < 8; j++) acc = acc + v[j];
    }
    for (; q < s1; q += CH) acc = acc + part[chunk_slot(s0, q, CH) * D + k];
    return acc;
}

/* one group per row, the definition's order (see the header): golden (part
 * NULL) one chain; fast, a row of more than CH positions adds its chunk sums
 * (k_chunk_sum) in ascending chunk order from 0. Writes out[u, :] or, fused
 * with SGD (table != NULL), applies the sparse SGD update of train_ops.h to
 * table[rows[u], :] with the sum (the same fmaf as sgd_sparse). */
__global__ void k_seg_sum_ordered(const uint32_t *va, const uint32_t *vb, const unsigned long long *meta, int npass,
                                  const unsigned *start, const unsigned *total, const float *vals, int D, float *out,
                                  size_t maxu, const float *part, unsigned CH, const int64_t *rows, float *table,
                                  float lr, float *sums, float *prev, int *found)
{
    const uint32_t *perm = sorted_in_b(meta, npass) ? vb : va;
    const unsigned U = *total;
    const int G = group_lanes(D), gl = threadIdx.x % G;
    const size_t gpb = blockDim.x / G;
    for (size_t u = blockIdx.x * gpb + threadIdx.x / G; u < maxu && u < U; u += (size_t)gridDim.x * gpb) {
        const unsigned s0 = start[u], s1 = start[u + 1];
        const bool chunked = part && s1 - s0 > CH;
        float *dst = table ? table + (size_t)rows[u] * D : out + u * D;
        for (int k = gl; k < D; k += G) {
            float acc = 0.0f;
            if (chunked)
                acc = chunk_chain(part, D, s0, s1, CH, k);
            else
                acc = group_chain(perm, vals, D, s0, s1, k);
            if (!table) {
                dst[k] = acc;
                continue;
            }
            /* fused: what the step's checks need (train_ops.h sgd_fused_out), then the update */
            const float old = dst[k];
            if (prev) prev[u * D + k] = old;
            if (sums) sums[u * D + k] = acc;
            if (found && !isfinite(acc)) *found = 1;
            dst[k] = fmaf(-lr, acc, old);
        }
    }
}

#if !defined(PLUMB_HIP)
/* CUDA: the stable sort is CUB's onesweep radix sort (deterministic, stable)
 * over the key bits a table that fits in memory can use. Returns the temp
 * bytes it needs for n pairs (ptr NULL) or sorts (ka,va) -> (kb,vb). */
static int cub_sort(struct dev *d, struct dev_stream *st, void *tmp, size_t *tmp_bytes, const uint64_t *ka,
                    uint64_t *kb, const uint32_t *va, uint32_t *vb, size_t n, int bits, plumb_err *e)
{
    GPU_CHECK(d, cub::DeviceRadixSort::SortPairs(tmp, *tmp_bytes, ka, kb, va, vb, (int64_t)n, 0, bits, st->s), e);
    return PLUMB_OK;
}
#endif

/* The whole reduction: keys/vals filled from the embedding indices (from_emb)
 * or rows_in, sorted, segmented, summed into vals_out or, when table is
 * given, applied to it as sparse SGD with lr (vals_out unused). */
static int coalesce_run(struct dev *d, struct dev_stream *st, size_t n, int D, const float *vals, int64_t *rows_out,
                        float *vals_out, int64_t *n_out, int from_emb, const int64_t *off, const uint32_t *idx, int T,
                        const int64_t *rows_in, float *table, float lr, const struct sgd_fused_out *fo,
                        plumb_err *e)
{
    if (n == 0) {
        GPU_CHECK(d, cudaMemsetAsync(n_out, 0, sizeof(int64_t), st->s), e);
        return PLUMB_OK;
    }
    size_t ntiles = (n + RS_TILE - 1) / RS_TILE;
    /* the key width: a row index of a table that fits in device memory. The
     * embedding's rows index the model's table of D floats a row (32 bits on
     * a 141 GB device with D = 16: 4 onesweep passes); rows given to
     * sparse_coalesce are bounded as rows of one float (they are not checked
     * against a table) */
    double maxrows = d->info.mem_total > 0 ? (double)d->info.mem_total / (from_emb ? 4.0 * D : 4.0) : 1e12;
    int bits = 1;
    while (bits < 64 && (double)((unsigned long long)1 << bits) <= maxrows) bits++;
    int npass = (bits + RS_BITS - 1) / RS_BITS;
    size_t sort_tmp = 0;
#if !defined(PLUMB_HIP)
    int rc0 = cub_sort(d, st, NULL, &sort_tmp, NULL, NULL, NULL, NULL, n, bits, e);
    if (rc0) return rc0;
#endif
    /* workspace layout */
    size_t o_ka = 0, o_kb = o_ka + n * 8, o_va = o_kb + n * 8, o_vb = o_va + n * 4;
    size_t o_cnt = (o_vb + n * 4 + 15) / 16 * 16;
    size_t o_flag = o_cnt + (size_t)RS_DIG * ntiles * 4;
    size_t o_tsum = o_flag + n * 4, o_start = o_tsum + (ntiles + 1) * 4;
    size_t o_meta = (o_start + (n + 1) * 4 + 15) / 16 * 16, o_seg = o_meta + 32;
    /* fast mode: the chunk sums (two slots per window of TRAIN_SPARSE_CHUNK
     * positions); fused SGD: the distinct rows */
    const int fast = d->numerics != NUMERICS_GOLDEN;
    const unsigned CH = TRAIN_SPARSE_CHUNK;
    const size_t nw = (n + CH - 1) / CH;
    size_t o_part = (o_seg + n * 4 + 15) / 16 * 16;
    const int own_rows = table && !(fo && fo->rows); /* fused: the rows in the workspace unless the caller keeps them */
    size_t o_rows = (o_part + (fast ? 2 * nw * (size_t)D * 4 : 0) + 15) / 16 * 16;
    size_t o_tmp = (o_rows + (own_rows ? n * 8 : 0) + 255) / 256 * 256;
    size_t total_b = o_tmp + sort_tmp;
    void *ws;
    int rc = tws_get(d, 0, total_b, &ws, e);
    if (rc) return rc;
    char *w = (char *)ws;
    uint64_t *ka = (uint64_t *)(w + o_ka), *kb = (uint64_t *)(w + o_kb);
    uint32_t *va = (uint32_t *)(w + o_va), *vb = (uint32_t *)(w + o_vb);
    unsigned *flag = (unsigned *)(w + o_flag), *tsum = (unsigned *)(w + o_tsum);
    unsigned *start = (unsigned *)(w + o_start);
    unsigned long long *meta = (unsigned long long *)(w + o_meta);
    unsigned *total = (unsigned *)(meta + 1);
    unsigned *seg_of = (unsigned *)(w + o_seg);
    float *part = fast ? (float *)(w + o_part) : NULL;
    if (own_rows) rows_out = (int64_t *)(w + o_rows);
    else if (table) rows_out = fo->rows;

    unsigned g = gpu_grid(n, TPB);
    tprof_scope psort(st, TP_SORT);
    if (from_emb) k_emb_keys<<<g, TPB, 0, st->s>>>(off, idx, n, T, ka, va);
    else k_copy_keys<<<g, TPB, 0, st->s>>>(rows_in, n, ka, va);
    GPU_CHECK_LAUNCH(d, "k_emb_keys", e);
#if !defined(PLUMB_HIP)
    /* sorted into (kb, vb); the readers below take them as the "a" buffers */
    if ((rc = cub_sort(d, st, w + o_tmp, &sort_tmp, ka, kb, va, vb, n, bits, e))) return rc;
    {
        uint64_t *tk = ka;
        ka = kb;
        kb = tk;
        uint32_t *tv = va;
        va = vb;
        vb = tv;
    }
    const unsigned long long *smeta = NULL;
    npass = 0;
#else
    unsigned *cnt = (unsigned *)(w + o_cnt);
    GPU_CHECK(d, cudaMemsetAsync(meta, 0, 32, st->s), e);
    k_maxkey<<<g < 1024 ? g : 1024, TPB, 0, st->s>>>(ka, n, meta);
    GPU_CHECK_LAUNCH(d, "k_maxkey", e);
    for (int p = 0; p < npass; p++) {
        int shift = p * RS_BITS;
        /* ping-pong by pass number; inactive passes are no-ops, and the
         * readers below pick the buffer by the active passes' parity */
        const uint64_t *kin = (p & 1) ? kb : ka;
        uint64_t *kout = (p & 1) ? ka : kb;
        const uint32_t *vin = (p & 1) ? vb : va;
        uint32_t *vout = (p & 1) ? va : vb;
        k_rs_hist<<<(unsigned)ntiles, TPB, 0, st->s>>>(kin, n, shift, cnt, (unsigned)ntiles, meta);
        GPU_CHECK_LAUNCH(d, "k_rs_hist", e);
        k_scan1<<<1, TPB, 0, st->s>>>(cnt, (size_t)RS_DIG * ntiles, meta, shift, NULL);
        GPU_CHECK_LAUNCH(d, "k_scan1", e);
        k_rs_scatter<<<(unsigned)ntiles, TPB, 0, st->s>>>(kin, vin, kout, vout, n, shift, cnt, (unsigned)ntiles, meta);
        GPU_CHECK_LAUNCH(d, "k_rs_scatter", e);
    }
    const unsigned long long *smeta = meta;
#endif
    k_heads<<<g, TPB, 0, st->s>>>(ka, kb, n, smeta, npass, flag);
    GPU_CHECK_LAUNCH(d, "k_heads", e);
    k_tile_sum<<<(unsigned)ntiles, TPB, 0, st->s>>>(flag, n, tsum);
    GPU_CHECK_LAUNCH(d, "k_tile_sum", e);
    k_scan1<<<1, TPB, 0, st->s>>>(tsum, ntiles, NULL, 0, total);
    GPU_CHECK_LAUNCH(d, "k_scan1(tiles)", e);
    k_seg_write<<<(unsigned)ntiles, TPB, 0, st->s>>>(ka, kb, flag, n, tsum, total, smeta, npass, rows_out, start, n_out,
                                                    seg_of);
    GPU_CHECK_LAUNCH(d, "k_seg_write", e);
    /* train_ops.h: golden one chain per row in ascending position from 0;
     * fast the same for rows of at most CH positions, chunks of CH summed in
     * parallel (k_chunk_sum) then added in chunk order for hotter rows (a
     * Zipf head can hold a third of a batch: one chain was most of the step) */
    tprof_scope pseg(st, TP_SEGSUM);
    {
        const size_t gpb = TPB / group_lanes(D);
        if (fast) {
            size_t cb = (2 * nw + gpb - 1) / gpb;
            k_chunk_sum<<<(unsigned)(cb < 65536 * 8 ? cb : 65536 * 8), TPB, 0, st->s>>>(va, vb, smeta, npass, start,
                                                                                        seg_of, vals, D, n, CH, part);
            GPU_CHECK_LAUNCH(d, "k_chunk_sum", e);
        }
        size_t blocks = (n + gpb - 1) / gpb;
        k_seg_sum_ordered<<<(unsigned)(blocks < 65536 * 8 ? blocks : 65536 * 8), TPB, 0, st->s>>>(
            va, vb, smeta, npass, start, total, vals, D, vals_out, n, part, CH, rows_out, table, lr,
            table && fo ? fo->sums : NULL, table && fo ? fo->prev : NULL, table && fo ? fo->found_inf : NULL);
        GPU_CHECK_LAUNCH(d, "k_seg_sum_ordered", e);
    }
    return PLUMB_OK;
}

int tr_embedding_bwd(struct dev *d, struct dev_stream *st, const int64_t *off, const uint32_t *idx, const float *dout,
                     int B, int n_valid, int T, int D, int64_t *rows_out, float *grads_out, int64_t *n_out,
                     plumb_err *e)
{
    (void)B;
    size_t n = (size_t)n_valid * T;
    return coalesce_run(d, st, n, D, dout, rows_out, grads_out, n_out, 1, off, idx, T, NULL, NULL, 0.0f, NULL, e);
}

int tr_embedding_bwd_sgd(struct dev *d, struct dev_stream *st, const int64_t *off, const uint32_t *idx,
                         const float *dout, int B, int n_valid, int T, int D, float *table, float lr, int64_t *n_out,
                         const struct sgd_fused_out *out, plumb_err *e)
{
    (void)B;
    size_t n = (size_t)n_valid * T;
    return coalesce_run(d, st, n, D, dout, NULL, NULL, n_out, 1, off, idx, T, NULL, table, lr, out, e);
}

/* per-block first position of a negative row (-1: none) */
__global__ void k_neg_rows(const int64_t *rows, size_t n, long long *first)
{
    __shared__ long long sh[TPB];
    long long f = -1;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        if (rows[i] < 0) {
            f = (long long)i;
            break;
        }
    sh[threadIdx.x] = f;
    __syncthreads();
    for (int s = TPB / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) {
            long long a = sh[threadIdx.x], b = sh[threadIdx.x + s];
            if (b >= 0 && (a < 0 || b < a)) sh[threadIdx.x] = b;
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) first[blockIdx.x] = sh[0];
}

int tr_sparse_coalesce(struct dev *d, struct dev_stream *st, const int64_t *rows_in, const float *vals_in, size_t n,
                       int D, int64_t *rows_out, float *vals_out, int64_t *n_out, plumb_err *e)
{
    if (n > 0) {
        /* rows come from outside (gathered shards): a negative one is a usage
         * error naming it, like the cpu's; reporting it needs one sync */
        enum { NB = 64 };
        long long *dfirst = (long long *)st->scratch, hfirst[NB];
        k_neg_rows<<<NB, TPB, 0, st->s>>>(rows_in, n, dfirst);
        GPU_CHECK_LAUNCH(d, "k_neg_rows", e);
        GPU_CHECK(d, cudaMemcpyAsync(hfirst, dfirst, sizeof hfirst, cudaMemcpyDeviceToHost, st->s), e);
        GPU_CHECK(d, cudaStreamSynchronize(st->s), e);
        long long first = -1;
        for (int i = 0; i < NB; i++)
            if (hfirst[i] >= 0 && (first < 0 || hfirst[i] < first)) first = hfirst[i];
        if (first >= 0) {
            int64_t v = 0;
            GPU_CHECK(d, cudaMemcpyAsync(&v, rows_in + first, sizeof v, cudaMemcpyDeviceToHost, st->s), e);
            GPU_CHECK(d, cudaStreamSynchronize(st->s), e);
            return gpu_err(e, PLUMB_EUSAGE, "sparse row %lld at position %lld is negative", (long long)v, first);
        }
    }
    return coalesce_run(d, st, n, D, vals_in, rows_out, vals_out, n_out, 0, NULL, NULL, 0, rows_in, NULL, 0.0f, NULL,
                        e);
}
