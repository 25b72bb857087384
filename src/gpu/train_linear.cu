/* Linear layers on the GPU (train_ops.h linear_fwd / linear_bwd).
 *
 * Golden: one tiled kernel computes C[M,N] = chain over k of
 *   acc = fmaf(A(m,k), B(k,n), acc), k ascending from 0,
 * with A and B addressed through strides, which covers y = x w^T
 * (A = x, B(k,n) = w[n,k]), dx = dy w and dw = dy^T x; tiles only decide which
 * thread holds which chain, never the order inside one, so the bits equal the
 * cpu backend's. The epilogue (bias add, ReLU, rounding) is the cpu's
 * expression. dbias is one sequential fp32 sum per column (ascending b).
 *
 * Fast (CUDA): cuBLASLt (lt_matmul.cu) with fp32 storage. fp32 uses CUBLAS_COMPUTE_32F (TF32
 * only when the device allows it); bf16/fp16 use COMPUTE_32F_FAST_16BF /
 * _16F: the inputs are already rounded to bf16/fp16 values by the contract
 * (activations stored rounded, weights through round_fp32), so the
 * library's down-conversion is exact and the product is a bf16 tensor-core
 * GEMM with fp32 accumulation. Bias and ReLU ride in the cuBLASLt epilogue
 * (BIAS / RELU_BIAS); rounding of the stored output to bf16 is one extra
 * elementwise pass. The backward masks dy by the ReLU and reduces dbias in
 * the same pass (fixed 64-row chunks, then a fixed-order sum of the chunks:
 * deterministic, no atomics). PLUMB_TRAIN_BF16=convert switches bf16/fp16 to
 * explicit conversion into 16-bit copies and native 16-bit GEMMs (for
 * comparison). Plans (layouts, algorithm) are cached per shape; the
 * reduction scheme is NONE, so results repeat run to run (lt_matmul.cu).
 * Fast (HIP), and the fallback when cuBLASLt offers no algorithm: the plugin's
 * blas_gemm (rocBLAS / cuBLASLt) plus our own epilogue kernel. */
#include "gpu/train_gpu.h"
#include "gpu/sum_slices.cuh"
#include <stdlib.h>
#include <string.h>

#define GT 16

/* ---------------- golden ---------------- */

/* C[M,N] (row stride ldc) = sum_k A(m,k) B(k,n) with A(m,k) = A[m*sam + k*sak],
 * B(k,n) = B[k*sbk + n*sbn]; then epilogue: bias (per n), relu, round. */
__global__ void k_gold_mm(int M, int N, int K, const float *A, long long sam, long long sak, const float *Bm,
                          long long sbk, long long sbn, float *C, int ldc, const float *bias, int relu, int rt)
{
    __shared__ float As[GT][GT + 1]; /* [m][k] */
    __shared__ float Bs[GT][GT + 1]; /* [k][n] */
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int m0 = blockIdx.y * GT, n0 = blockIdx.x * GT;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += GT) {
        /* load so that adjacent threads read adjacent addresses where possible */
        {
            int mm = sam == 1 ? tx : ty, kk = sam == 1 ? ty : tx;
            int gm = m0 + mm, gk = k0 + kk;
            As[mm][kk] = (gm < M && gk < K) ? A[gm * sam + gk * sak] : 0.0f;
        }
        {
            int kk = sbn == 1 ? ty : tx, nn = sbn == 1 ? tx : ty;
            int gk = k0 + kk, gn = n0 + nn;
            Bs[kk][nn] = (gk < K && gn < N) ? Bm[gk * sbk + gn * sbn] : 0.0f;
        }
        __syncthreads();
        int kend = K - k0 < GT ? K - k0 : GT;
        for (int kk = 0; kk < kend; kk++) acc = fmaf(As[ty][kk], Bs[kk][tx], acc);
        __syncthreads();
    }
    int m = m0 + ty, n = n0 + tx;
    if (m < M && n < N) {
        float v = bias ? acc + bias[n] : acc;
        if (relu) v = v > 0.0f ? v : 0.0f;
        C[(size_t)m * ldc + n] = tr_round(v, rt);
    }
}

static int gold_mm(struct dev *d, struct dev_stream *st, int M, int N, int K, const float *A, long long sam,
                   long long sak, const float *Bm, long long sbk, long long sbn, float *C, const float *bias,
                   int relu, int rt, plumb_err *e)
{
    dim3 blk(GT, GT), grd((unsigned)((N + GT - 1) / GT), (unsigned)((M + GT - 1) / GT));
    if (grd.y > 65535)
        return gpu_err(e, PLUMB_EUNSUPPORTED, "%s: golden linear: %d rows exceed %d", d->label, M, 65535 * GT);
    k_gold_mm<<<grd, blk, 0, st->s>>>(M, N, K, A, sam, sak, Bm, sbk, sbn, C, N, bias, relu, rt);
    GPU_CHECK_LAUNCH(d, "k_gold_mm", e);
    return PLUMB_OK;
}

/* dy[b,n] = y[b,n] > 0 ? dy : 0 in place */
__global__ void k_relu_mask(const float *y, float *dy, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

/* golden dbias: one sequential fp32 sum per column, ascending b from 0 */
__global__ void k_colsum_seq(const float *dy, float *db, int B, int N)
{
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N) return;
    float s = 0.0f;
    for (int b = 0; b < B; b++) s = s + dy[(size_t)b * N + n];
    db[n] = s;
}

/* ---------------- fast: shared pieces ---------------- */

#define CS_ROWS 64
#define MB 8 /* rows a mask/colsum thread loads before it stores */
/* Rows per chunk (64; more when the grid's y limit needs it). Shorter
 * chunks for narrow layers were tried and measured slower on an H200 (the
 * extra partial sums cost more than the serial loads they save). */
/* The fast dbias order: per-chunk column sums, part[c, n] = sum of rows
 * [64c, 64c+64) in ascending b, then the chunks summed by k_colsum_final.
 * One pass (mask_colsum_any picks the kernel for the storage; every kernel
 * runs these chains) serves the relu mask + dbias of linear_bwd and the
 * fused dx epilogue of linear_bwd_relu_in:
 *   v = round(src[b*lds + n]); if (mask) v = mask[b*ldm + n] > 0 ? v : 0;
 *   dst[b*N + n] = v; part[c, n] = sum of v over the chunk (part may be NULL).
 * src may be dst; rt = DT_F32 does not round. */

/* With a 16-bit mirror: two columns per thread (float2 loads and stores, the
 * two 16-bit values as one 32-bit store); each column's chain unchanged. */
__global__ void k_mask_colsum2m(const float *src, int lds, const float *mask, float *dst, int B, int N, int rt,
                                float *part, int rows, uint32_t *dst16x2, int t16)
{
    int c = blockIdx.y;
    int b0 = c * rows, b1 = b0 + rows < B ? b0 + rows : B;
    const int N2 = N / 2;
    for (int q = blockIdx.x * blockDim.x + threadIdx.x; q < N2; q += gridDim.x * blockDim.x) {
        float2 s = make_float2(0.0f, 0.0f);
        for (int bb = b0; bb < b1; bb += MB) { /* MB rows loaded, then stored (see k_mask_colsum) */
            float2 g[MB], mk[MB];
#pragma unroll
            for (int j = 0; j < MB; j++)
                if (bb + j < b1) {
                    g[j] = reinterpret_cast<const float2 *>(src + (size_t)(bb + j) * lds)[q];
                    mk[j] = mask ? reinterpret_cast<const float2 *>(mask + (size_t)(bb + j) * N)[q] : make_float2(1, 1);
                }
#pragma unroll
            for (int j = 0; j < MB; j++)
                if (bb + j < b1) {
                    float2 v = make_float2(tr_round(g[j].x, rt), tr_round(g[j].y, rt));
                    if (mask) v = make_float2(mk[j].x > 0.0f ? v.x : 0.0f, mk[j].y > 0.0f ? v.y : 0.0f);
                    reinterpret_cast<float2 *>(dst + (size_t)(bb + j) * N)[q] = v;
                    dst16x2[(size_t)(bb + j) * N2 + q] = (uint32_t)to16_rt(v.x, t16) | ((uint32_t)to16_rt(v.y, t16) << 16);
                    s.x = s.x + v.x;
                    s.y = s.y + v.y;
                }
        }
        if (part) reinterpret_cast<float2 *>(part + (size_t)c * N)[q] = s;
    }
}

/* The same chunked pass for any mix of element types: S the source, M the
 * mask (the ReLU output, its sign is all that is read; NULL: no mask). The
 * values are rounded to rt (a 16-bit source is already rounded: no-op),
 * stored to dst (fp32, may be NULL) and/or dst16 [B, N], summed into part. */
template <typename S, typename M>
__global__ void k_mask_colsum_t(const S *src, int lds, const M *mask, int ldm, float *dst, uint16_t *dst16, int ldd,
                                int B, int N, int rt, float *part, int rows, int t16)
{
    int c = blockIdx.y;
    int b0 = c * rows, b1 = b0 + rows < B ? b0 + rows : B;
    for (int n = blockIdx.x * blockDim.x + threadIdx.x; n < N; n += gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (int bb = b0; bb < b1; bb += MB) { /* MB rows loaded, then stored (see k_mask_colsum) */
            float g[MB], mk[MB];
#pragma unroll
            for (int j = 0; j < MB; j++)
                if (bb + j < b1) {
                    g[j] = ld_rt(src, (size_t)(bb + j) * lds + n, t16);
                    mk[j] = mask ? ld_rt(mask, (size_t)(bb + j) * ldm + n, t16) : 1.0f;
                }
#pragma unroll
            for (int j = 0; j < MB; j++)
                if (bb + j < b1) {
                    float v = tr_round(g[j], rt);
                    if (mask) v = mk[j] > 0.0f ? v : 0.0f;
                    if (dst) dst[(size_t)(bb + j) * N + n] = v;
                    if (dst16) dst16[(size_t)(bb + j) * ldd + n] = to16_rt(v, t16);
                    s = s + v;
                }
        }
        if (part) part[(size_t)c * N + n] = s;
    }
}
/* All 16-bit (source, mask, destination): two columns per thread, one
 * 32-bit load of each per row (narrow, so that many threads keep many
 * loads in flight: the chains are 64 rows long); each column's chain as
 * above. A masked element becomes +0 (what to16_rt(0.0f) stores). In place
 * allowed. */
__global__ void k_mask16_colsum2(const uint16_t *src, int lds, const uint16_t *mask, int ldm, uint16_t *dst, int ldd,
                                 int B, int N, float *part, int rows, int t16)
{
    int c = blockIdx.y;
    int b0 = c * rows, b1 = b0 + rows < B ? b0 + rows : B;
    const int N2 = N / 2;
    for (int q = blockIdx.x * blockDim.x + threadIdx.x; q < N2; q += gridDim.x * blockDim.x) {
        float s0 = 0.0f, s1 = 0.0f;
        for (int bb = b0; bb < b1; bb += MB) { /* MB rows loaded, then stored (in place: see k_mask_colsum) */
            uint32_t v[MB], mk[MB];
#pragma unroll
            for (int j = 0; j < MB; j++)
                if (bb + j < b1) {
                    v[j] = reinterpret_cast<const uint32_t *>(src + (size_t)(bb + j) * lds)[q];
                    mk[j] = mask ? reinterpret_cast<const uint32_t *>(mask + (size_t)(bb + j) * ldm)[q] : 0u;
                }
#pragma unroll
            for (int j = 0; j < MB; j++)
                if (bb + j < b1) {
                    uint32_t lo = v[j] & 0xffffu, hi = v[j] >> 16;
                    if (mask) {
                        if (!(from16_rt((uint16_t)(mk[j] & 0xffffu), t16) > 0.0f)) lo = 0;
                        if (!(from16_rt((uint16_t)(mk[j] >> 16), t16) > 0.0f)) hi = 0;
                    }
                    s0 = s0 + from16_rt((uint16_t)lo, t16);
                    s1 = s1 + from16_rt((uint16_t)hi, t16);
                    reinterpret_cast<uint32_t *>(dst + (size_t)(bb + j) * ldd)[q] = lo | (hi << 16);
                }
        }
        if (part) reinterpret_cast<float2 *>(part + (size_t)c * N)[q] = make_float2(s0, s1);
    }
}
/* db[n] = the nc chunk sums of column n: lane L adds chunks L, L+W, ... in
 * ascending order, then the lanes' sums meet in the warp's fixed butterfly
 * (deterministic: the shape depends only on nc and the warp width). One warp
 * per column. */
__global__ void k_colsum_final(const float *part, int nc, int N, float *db)
{
    const int lane = threadIdx.x % PLUMB_WARP;
    const int n = blockIdx.x * (blockDim.x / PLUMB_WARP) + threadIdx.x / PLUMB_WARP;
    if (n >= N) return; /* the whole warp */
    float s = 0.0f;
    for (int c = lane; c < nc; c += PLUMB_WARP) s = s + part[(size_t)c * N + n];
    s = plumb_warp_sum(s);
    if (lane == 0) db[n] = s;
}

/* The masked/rounded copy + dbias of the chunk sums (part from workspace
 * slot 0), for any mix of storage: src fp32 or 16-bit (src16), the ReLU
 * mask fp32 or 16-bit (mask16, row stride ldm) or none, destinations dst
 * (fp32 [B, N], may be NULL) and dst16 (16-bit t16, row stride ldd, may be
 * NULL). rt rounds the values (DT_F32: not). Every kernel below runs the
 * same chains, so the dbias bits do not depend on the storage. */
static int mask_colsum_any(struct dev *d, struct dev_stream *st, const float *src, const uint16_t *src16, int lds,
                           const float *mask, const uint16_t *mask16, int ldm, float *dst, uint16_t *dst16, int ldd,
                           int B, int N, int rt, int t16, float *dbias, plumb_err *e)
{
    int rows = CS_ROWS;
    if ((B + rows - 1) / rows > 65535) rows = (B + 65534) / 65535; /* the grid's y limit */
    int nc = (B + rows - 1) / rows, rc;
    float *part = NULL;
    if (dbias) {
        void *ws;
        if ((rc = tws_get(d, 0, (size_t)nc * N * sizeof(float), &ws, e))) return rc;
        part = (float *)ws;
    }
    t16 = t16 == DT_F16 ? DT_F16 : DT_BF16;
    const int tpb = 128;
    /* all 16-bit: pairs of columns */
    const int vec16 = src16 && !dst && !mask && N % 2 == 0 && lds % 2 == 0 && ldd % 2 == 0 &&
                      (!mask16 || ldm % 2 == 0) && !((uintptr_t)src16 % 4) && !((uintptr_t)mask16 % 4) &&
                      !((uintptr_t)dst16 % 4) && !((uintptr_t)part % 8);
    /* fp32 with a 16-bit copy: pairs of columns (float4 columns measured
     * slower on an H200 at DLRM widths: a quarter of the threads for the
     * same 64-row chains) */
    const int vec32 = src && !src16 && !mask16 && dst && dst16 && ldd == N && (!mask || ldm == N) && N % 2 == 0 &&
                      lds % 2 == 0 && !((uintptr_t)src % 8) && !((uintptr_t)dst % 8) && !((uintptr_t)mask % 8) &&
                      !((uintptr_t)part % 8) && !((uintptr_t)dst16 % 4);
    if (vec16) {
        dim3 grd((unsigned)((N / 2 + tpb - 1) / tpb), (unsigned)nc);
        k_mask16_colsum2<<<grd, tpb, 0, st->s>>>(src16, lds, mask16, ldm, dst16, ldd, B, N, part, rows, t16);
    } else if (vec32) {
        dim3 grd((unsigned)((N / 2 + tpb - 1) / tpb), (unsigned)nc);
        k_mask_colsum2m<<<grd, tpb, 0, st->s>>>(src, lds, mask, dst, B, N, rt, part, rows, (uint32_t *)dst16, t16);
    } else {
        dim3 grd((unsigned)((N + tpb - 1) / tpb), (unsigned)nc);
        if (src16 && mask16)
            k_mask_colsum_t<uint16_t, uint16_t><<<grd, tpb, 0, st->s>>>(src16, lds, mask16, ldm, dst, dst16, ldd, B, N,
                                                                         rt, part, rows, t16);
        else if (src16)
            k_mask_colsum_t<uint16_t, float><<<grd, tpb, 0, st->s>>>(src16, lds, mask, ldm, dst, dst16, ldd, B, N, rt,
                                                                      part, rows, t16);
        else if (mask16)
            k_mask_colsum_t<float, uint16_t><<<grd, tpb, 0, st->s>>>(src, lds, mask16, ldm, dst, dst16, ldd, B, N, rt,
                                                                      part, rows, t16);
        else
            k_mask_colsum_t<float, float><<<grd, tpb, 0, st->s>>>(src, lds, mask, ldm, dst, dst16, ldd, B, N, rt, part,
                                                                   rows, t16);
    }
    GPU_CHECK_LAUNCH(d, "k_mask_colsum", e);
    if (dbias) {
        const int wpb = 128 / PLUMB_WARP;
        k_colsum_final<<<(N + wpb - 1) / wpb, 128, 0, st->s>>>(part, nc, N, dbias);
        GPU_CHECK_LAUNCH(d, "k_colsum_final", e);
    }
    return PLUMB_OK;
}

/* fp32 source, fp32 mask [B, N] (or none), fp32 destination [B, N] and
 * optionally its 16-bit copy dst16 [B, N] of type t16 */
static int mask_colsum16(struct dev *d, struct dev_stream *st, const float *src, int lds, const float *mask, float *dst,
                         int B, int N, int rt, float *dbias, uint16_t *dst16, int t16, plumb_err *e)
{
    return mask_colsum_any(d, st, src, NULL, lds, mask, NULL, N, dst, dst16, N, B, N, rt, t16, dbias, e);
}

static int mask_colsum(struct dev *d, struct dev_stream *st, const float *src, int lds, const float *mask, float *dst,
                       int B, int N, int rt, float *dbias, plumb_err *e)
{
    return mask_colsum16(d, st, src, lds, mask, dst, B, N, rt, dbias, NULL, DT_BF16, e);
}

/* x[r, 0:K) = the values of x16[r, 0:K) (row stride ld): a 16-bit tensor
 * widened to fp32 (exact), for the fp32-operand path */
__global__ void k_from16(const uint16_t *x16, size_t R, int K, int ld, float *x, int t16)
{
    size_t tot = R * (size_t)K;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < tot; i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / (size_t)K;
        x[i] = from16_rt(x16[r * ld + (i - r * (size_t)K)], t16);
    }
}

static int widen16(struct dev *d, struct dev_stream *st, const uint16_t *x16, size_t R, int K, int ld, float *x, int rt,
                   plumb_err *e)
{
    k_from16<<<gpu_grid(R * (size_t)K, 256), 256, 0, st->s>>>(x16, R, K, ld, x, rt == DT_F16 ? DT_F16 : DT_BF16);
    GPU_CHECK_LAUNCH(d, "k_from16", e);
    return PLUMB_OK;
}

/* y = round(relu(y + bias)) in place, [B, N] */
__global__ void k_epilogue(float *y, const float *bias, size_t B, int N, int relu, int rt)
{
    size_t tot = B * (size_t)N;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < tot; i += (size_t)gridDim.x * blockDim.x) {
        float v = y[i];
        if (bias) v = v + bias[i % (size_t)N];
        if (relu) v = v > 0.0f ? v : 0.0f;
        y[i] = tr_round(v, rt);
    }
}

/* y = round(y) in place and y16 = its 16-bit copy, [n] (fast 16-bit path) */
__global__ void k_round16(float *y, uint16_t *y16, size_t n, int rt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float v = tr_round(y[i], rt);
        y[i] = v;
        if (y16) y16[i] = to16_rt(v, rt);
    }
}

/* x16[r, 0:K) = x[r, :] in 16 bits (x is rt-rounded: exact), x16[r, K:Kp) = 0;
 * one flat index over [R, Kp] (I: 32-bit where the tensor allows, cheap division) */
template <typename I> __global__ void k_pad_cols16(const float *x, I R, I K, I Kp, uint16_t *x16, int rt)
{
    const I tot = R * Kp;
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < tot; i += (I)gridDim.x * blockDim.x) {
        const I r = i / Kp, k = i - r * Kp;
        x16[i] = k < K ? to16_rt(x[r * K + k], rt) : (uint16_t)0;
    }
}

/* out[j] = part[0][j] + ... + part[S-1][j] in slice order (gpu/sum_slices.cuh):
 * the deterministic second half of a GEMM whose contraction was cut into S
 * slices (here for dw below, and in train_gpt_gemm.cu for the transformer's
 * dw); four elements a thread where n and the pointers allow, the same bits */
int tr_sum_slices(struct dev *d, struct dev_stream *st, const float *part, int S, size_t n, float *out, plumb_err *e)
{
    if (n % 4 == 0 && !((uintptr_t)part % 16) && !((uintptr_t)out % 16))
        k_sum_slices4<<<gpu_grid(n / 4, 256), 256, 0, st->s>>>((const float4 *)part, S, n / 4, (float4 *)out);
    else
        k_sum_slices<<<gpu_grid(n, 256), 256, 0, st->s>>>(part, S, n, out);
    GPU_CHECK_LAUNCH(d, "k_sum_slices", e);
    return PLUMB_OK;
}

/* Rows of K floats (K % 4 != 0) are not 16-byte aligned, and cuBLASLt then
 * takes its slowest (1-element aligned) kernels, several times slower on the
 * two DLRM layers with K = 13 and K = 367. The fast path pads such rows to
 * Kp = K rounded up to 8 with zeros (zero products leave every sum as it
 * is) and drops the padding from outputs in a pass it needs anyway
 * (rounding, or the slice sum of dw). */
__host__ __device__ static inline int pad8(int K) { return (K + 7) / 8 * 8; }

/* xp[r, 0:K) = x[r, :], xp[r, K:Kp) = 0: [R, K] -> [R, Kp]. I is the index
 * type: 32-bit (cheap division) whenever the tensor allows. */
template <typename I> __global__ void k_pad_cols(const float *x, I R, I K, I Kp, float *xp)
{
    const I tot = R * Kp;
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < tot; i += (I)gridDim.x * blockDim.x) {
        const I r = i / Kp, k = i - r * Kp;
        xp[i] = k < K ? x[r * K + k] : 0.0f;
    }
}

/* y[r, :] = round(yp[r, 0:K)): [R, Kp] -> [R, K] */
template <typename I> __global__ void k_unpad_round(const float *yp, I R, I K, I Kp, float *y, int rt)
{
    const I tot = R * K;
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < tot; i += (I)gridDim.x * blockDim.x) {
        const I r = i / K, k = i - r * K;
        y[i] = tr_round(yp[r * Kp + k], rt);
    }
}

/* Wide rows: row r on blockIdx.y, the columns on the threads (no division). */
__global__ void k_unpad_round_rows(const float *yp, size_t R, int K, int Kp, float *y, int rt)
{
    for (size_t r = blockIdx.y; r < R; r += gridDim.y)
        for (int k = threadIdx.x; k < K; k += blockDim.x) y[r * K + k] = tr_round(yp[r * Kp + k], rt);
}
__global__ void k_pad_cols_rows(const float *x, size_t R, int K, int Kp, float *xp)
{
    for (size_t r = blockIdx.y; r < R; r += gridDim.y)
        for (int k = threadIdx.x; k < Kp; k += blockDim.x) xp[r * Kp + k] = k < K ? x[r * K + k] : 0.0f;
}

static int unpad_round(struct dev *d, struct dev_stream *st, const float *yp, size_t R, int K, int Kp, float *y, int rt,
                       plumb_err *e)
{
    size_t tot = R * (size_t)Kp;
    if (K >= 128)
        k_unpad_round_rows<<<dim3(1, (unsigned)(R < 65535 ? R : 65535)), 128, 0, st->s>>>(yp, R, K, Kp, y, rt);
    else if (tot < ((size_t)1 << 31))
        k_unpad_round<unsigned><<<gpu_grid(tot, 256), 256, 0, st->s>>>(yp, (unsigned)R, (unsigned)K, (unsigned)Kp, y, rt);
    else
        k_unpad_round<size_t><<<gpu_grid(tot, 256), 256, 0, st->s>>>(yp, R, (size_t)K, (size_t)Kp, y, rt);
    GPU_CHECK_LAUNCH(d, "k_unpad_round", e);
    return PLUMB_OK;
}

/* dw[n, k] = part[0][n][k] + part[1][n][k] + ... in slice order, the parts
 * [S, N, Kp] padded, dw [N, K] */
__global__ void k_sum_slices_unpad(const float *part, int S, int N, int K, int Kp, float *dw)
{
    size_t tot = (size_t)N * K, kn = (size_t)N * Kp;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < tot; i += (size_t)gridDim.x * blockDim.x) {
        size_t n = i / (size_t)K;
        size_t j = n * Kp + (i - n * (size_t)K);
        float s = part[j];
        for (int q = 1; q < S; q++) s = s + part[(size_t)q * kn + j];
        dw[i] = s;
    }
}

/* dw [N, K] from the S slices' parts [S, N, Kp] (Kp >= K): tr_sum_slices
 * where they are not padded, else k_sum_slices_unpad (the same order) */
static int sum_slices_dw(struct dev *d, struct dev_stream *st, const float *part, int S, int N, int K, int Kp, float *dw,
                         plumb_err *e)
{
    if (Kp == K) return tr_sum_slices(d, st, part, S, (size_t)N * K, dw, e);
    k_sum_slices_unpad<<<gpu_grid((size_t)N * K, 256), 256, 0, st->s>>>(part, S, N, K, Kp, dw);
    GPU_CHECK_LAUNCH(d, "k_sum_slices_unpad", e);
    return PLUMB_OK;
}

/* the batch slices of a linear layer's dw GEMM: the largest S of 32, 16, ..,
 * 2 that divides B into slices of at least 512 rows, else 1 */
static int dw_slice_count(int B)
{
    for (int c = 32; c > 1; c >>= 1)
        if (B % c == 0 && B / c >= 512) return c;
    return 1;
}

static int pad_cols(struct dev *d, struct dev_stream *st, const float *x, size_t R, int K, float *xp, plumb_err *e)
{
    size_t tot = R * (size_t)pad8(K);
    if (K >= 128)
        k_pad_cols_rows<<<dim3(1, (unsigned)(R < 65535 ? R : 65535)), 128, 0, st->s>>>(x, R, K, pad8(K), xp);
    else if (tot < ((size_t)1 << 31))
        k_pad_cols<unsigned><<<gpu_grid(tot, 256), 256, 0, st->s>>>(x, (unsigned)R, (unsigned)K, (unsigned)pad8(K), xp);
    else
        k_pad_cols<size_t><<<gpu_grid(tot, 256), 256, 0, st->s>>>(x, R, (size_t)K, (size_t)pad8(K), xp);
    GPU_CHECK_LAUNCH(d, "k_pad_cols", e);
    return PLUMB_OK;
}

__global__ void k_to16(const float *x, uint16_t *y, size_t n, int rt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = to16_rt(x[i], rt);
}

static int launch_epilogue(struct dev *d, struct dev_stream *st, float *y, const float *bias, int B, int N, int relu,
                           int rt, plumb_err *e)
{
    if (!bias && !relu && rt == DT_F32) return PLUMB_OK;
    size_t n = (size_t)B * N;
    k_epilogue<<<gpu_grid(n, 256), 256, 0, st->s>>>(y, bias, (size_t)B, N, relu, rt);
    GPU_CHECK_LAUNCH(d, "k_epilogue", e);
    return PLUMB_OK;
}

/* Row-major gemm through the plugin's blas_gemm (fp32 inputs). */
static int gemm_rm(struct dev *d, struct dev_stream *st, int m, int n, int k, int ta, int tb, const float *a, int lda,
                   const float *b, int ldb, float *c, int ldc, plumb_err *e)
{
    struct gemm_desc g;
    memset(&g, 0, sizeof g);
    g.m = m; g.n = n; g.k = k;
    g.trans_a = ta; g.trans_b = tb;
    g.ab_type = DT_F32;
    g.a = a; g.lda = lda; g.b = b; g.ldb = ldb; g.c = c; g.ldc = ldc;
    return blas_gemm(d, st, &g, e);
}

#if !defined(PLUMB_HIP)
/* ---------------- fast: cuBLASLt with epilogues ---------------- */

enum { EPI_NONE = LT_EPI_NONE, EPI_BIAS = LT_EPI_BIAS, EPI_RELU_BIAS = LT_EPI_RELU_BIAS, EPI_RELU = LT_EPI_RELU };
static int g_convert = -1; /* PLUMB_TRAIN_BF16=convert */

/* Column-major C[m,n] = op(A) op(B) (+ epilogue) through lt_matmul.cu; C/D
 * in rt's 16-bit type when c16. PLUMB_EUNSUPPORTED (no message) when
 * cuBLASLt has no algorithm: the caller falls back. */
static int lt_gemm_c(struct dev *d, struct dev_stream *st, int ta, int tb, int m, int n, int k, const void *A, int lda,
                     const void *Bm, int ldb, void *C, int ldc, int rt, int abtype16, int c16, int epi,
                     const void *bias, int batch, long long sa, long long sb, long long sc, plumb_err *e)
{
    const struct lt_mm g = {ta, tb, m, n, k, A, lda, Bm, ldb, C, ldc, 0.0f, rt, abtype16, c16, epi, bias, batch,
                            sa, sb, sc};
    return lt_matmul(d, st, &g, e);
}

/* lt_gemm_c with an fp32 C/D */
static int lt_gemm(struct dev *d, struct dev_stream *st, int ta, int tb, int m, int n, int k, const void *A, int lda,
                   const void *Bm, int ldb, float *C, int ldc, int rt, int abtype16, int epi, const float *bias,
                   int batch, long long sa, long long sb, long long sc, plumb_err *e)
{
    return lt_gemm_c(d, st, ta, tb, m, n, k, A, lda, Bm, ldb, C, ldc, rt, abtype16, 0, epi, bias, batch, sa, sb, sc, e);
}

static int use_convert(void)
{
    if (g_convert < 0) {
        const char *v = getenv("PLUMB_TRAIN_BF16");
        g_convert = v && !strcmp(v, "convert");
    }
    return g_convert;
}

/* Converted 16-bit copies of the two GEMM inputs when PLUMB_TRAIN_BF16=convert. */
static int to16(struct dev *d, struct dev_stream *st, const float *x, size_t n, uint16_t *y, int rt, plumb_err *e)
{
    k_to16<<<gpu_grid(n, 256), 256, 0, st->s>>>(x, y, n, rt);
    GPU_CHECK_LAUNCH(d, "k_to16", e);
    return PLUMB_OK;
}

/* One column-major Lt gemm with fp32 storage, through conversion when asked. */
static int lt_gemm32(struct dev *d, struct dev_stream *st, int ta, int tb, int m, int n, int k, const float *A,
                     size_t a_elems, int lda, const float *Bm, size_t b_elems, int ldb, float *C, int ldc, int rt,
                     int epi, const float *bias, plumb_err *e)
{
    if (rt != DT_F32 && use_convert()) {
        void *ws;
        size_t na = (a_elems + 127) / 128 * 128;
        int rc = tws_get(d, 1, (na + b_elems) * sizeof(uint16_t), &ws, e);
        if (rc) return rc;
        uint16_t *a16 = (uint16_t *)ws, *b16 = a16 + na;
        if ((rc = to16(d, st, A, a_elems, a16, rt, e)) || (rc = to16(d, st, Bm, b_elems, b16, rt, e))) return rc;
        return lt_gemm(d, st, ta, tb, m, n, k, a16, lda, b16, ldb, C, ldc, rt, 1, epi, bias, 1, 0, 0, 0, e);
    }
    return lt_gemm(d, st, ta, tb, m, n, k, A, lda, Bm, ldb, C, ldc, rt, 0, epi, bias, 1, 0, 0, 0, e);
}
#endif /* !PLUMB_HIP */

/* ---------------- entry points ---------------- */

int tr_linear_fwd(struct dev *d, struct dev_stream *st, const float *x, const float *w, const float *bias, float *y,
                  int B, int K, int N, int relu, dtype_t rt, plumb_err *e)
{
    if (d->numerics == NUMERICS_GOLDEN)
        return gold_mm(d, st, B, N, K, x, K, 1, w, 1, K, y, bias, relu, (int)rt, e);
#if !defined(PLUMB_HIP)
    /* y^T [N x B] = (w viewed K x N)^T (x viewed K x B); rows of K % 4 != 0
     * floats padded to Ka (see pad8) */
    int epi = bias ? (relu ? EPI_RELU_BIAS : EPI_BIAS) : (relu ? EPI_RELU : EPI_NONE);
    const float *xa = x, *wa = w;
    int Ka = K, rc;
    if (K % 4) {
        void *ws;
        Ka = pad8(K);
        if ((rc = tws_get(d, 2, ((size_t)B + N) * Ka * sizeof(float), &ws, e))) return rc;
        float *xp = (float *)ws, *wp = xp + (size_t)B * Ka;
        if ((rc = pad_cols(d, st, x, (size_t)B, K, xp, e)) || (rc = pad_cols(d, st, w, (size_t)N, K, wp, e))) return rc;
        xa = xp;
        wa = wp;
    }
    rc = lt_gemm32(d, st, 1, 0, N, B, Ka, wa, (size_t)N * Ka, Ka, xa, (size_t)B * Ka, Ka, y, N, (int)rt, epi, bias, e);
    if (rc == PLUMB_OK) return rt == DT_F32 ? PLUMB_OK : launch_epilogue(d, st, y, NULL, B, N, 0, (int)rt, e);
    if (rc != PLUMB_EUNSUPPORTED) return rc;
    rc = lt_gemm32(d, st, 1, 0, N, B, Ka, wa, (size_t)N * Ka, Ka, xa, (size_t)B * Ka, Ka, y, N, (int)rt, EPI_NONE, NULL,
                   e);
    if (rc == PLUMB_OK) return launch_epilogue(d, st, y, bias, B, N, relu, (int)rt, e);
    if (rc != PLUMB_EUNSUPPORTED) return rc;
#endif
    int rc2 = gemm_rm(d, st, B, N, K, 0, 1, x, K, w, K, y, N, e);
    if (rc2) return rc2;
    return launch_epilogue(d, st, y, bias, B, N, relu, (int)rt, e);
}

/* relu_in (linear_bwd_relu_in): x is a ReLU output; dx is stored masked by
 * x > 0 and dbias_x (may be NULL) gets the masked dx's column sums, in the
 * order the producing layer's linear_bwd would use. */
int tr_linear_bwd(struct dev *d, struct dev_stream *st, const float *x, const float *w, const float *y, float *dy,
                  float *dx, float *dw, float *dbias, int B, int K, int N, int relu, dtype_t rt, int relu_in,
                  float *dbias_x, plumb_err *e)
{
    size_t BN = (size_t)B * N;
    int rc;
    if (d->numerics == NUMERICS_GOLDEN) {
        if (relu) {
            k_relu_mask<<<gpu_grid(BN, 256), 256, 0, st->s>>>(y, dy, BN);
            GPU_CHECK_LAUNCH(d, "k_relu_mask", e);
        }
        if (dbias) {
            k_colsum_seq<<<(N + 127) / 128, 128, 0, st->s>>>(dy, dbias, B, N);
            GPU_CHECK_LAUNCH(d, "k_colsum_seq", e);
        }
        /* dx[b,k] = sum_n dy[b,n] w[n,k]: A = dy (sam N, sak 1), B(n,k) = w[n*K + k] */
        if (dx && (rc = gold_mm(d, st, B, K, N, dy, N, 1, w, K, 1, dx, NULL, 0, (int)rt, e))) return rc;
        if (dx && relu_in) { /* the producing layer's golden mask and dbias */
            size_t BK = (size_t)B * K;
            k_relu_mask<<<gpu_grid(BK, 256), 256, 0, st->s>>>(x, dx, BK);
            GPU_CHECK_LAUNCH(d, "k_relu_mask", e);
            if (dbias_x) {
                k_colsum_seq<<<(K + 127) / 128, 128, 0, st->s>>>(dx, dbias_x, B, K);
                GPU_CHECK_LAUNCH(d, "k_colsum_seq", e);
            }
        }
        /* dw[n,k] = sum_b dy[b,n] x[b,k]: A(n,b) = dy[b*N + n] (sam 1, sak N), B(b,k) = x[b*K + k] */
        return gold_mm(d, st, N, K, B, dy, 1, N, x, K, 1, dw, NULL, 0, DT_F32, e);
    }
    /* fast: mask + dbias partials in one pass */
    if (relu || dbias) {
        tprof_scope pm(st, TP_LBWD_MASK);
        if ((rc = mask_colsum(d, st, dy, N, relu ? y : NULL, dy, B, N, DT_F32, dbias, e))) return rc;
    }
#if !defined(PLUMB_HIP)
    /* dx^T [K x B] = (w viewed K x N) (dy viewed N x B) */
    int dx_done = !dx, dw_done = 0;
    const int Kp = pad8(K), padk = K % 4 != 0;
    if (dx && padk) {
        /* dxp [B, Kp] = dy wp with w padded to [N, Kp]; then dx = round(dxp[:, 0:K)) */
        tprof_scope pdx(st, TP_LBWD_DX);
        void *ws;
        if ((rc = tws_get(d, 2, ((size_t)B + N) * Kp * sizeof(float), &ws, e))) return rc;
        float *dxp = (float *)ws, *wp = dxp + (size_t)B * Kp;
        if ((rc = pad_cols(d, st, w, (size_t)N, K, wp, e))) return rc;
        rc = lt_gemm32(d, st, 0, 0, Kp, B, N, wp, (size_t)N * Kp, Kp, dy, BN, N, dxp, Kp, (int)rt, EPI_NONE, NULL, e);
        if (rc == PLUMB_OK) {
            dx_done = 1;
            if (relu_in) {
                if ((rc = mask_colsum(d, st, dxp, Kp, x, dx, B, K, (int)rt, dbias_x, e))) return rc;
            } else {
                if ((rc = unpad_round(d, st, dxp, (size_t)B, K, Kp, dx, (int)rt, e))) return rc;
            }
        } else if (rc != PLUMB_EUNSUPPORTED) {
            return rc;
        }
    } else if (dx) {
        tprof_scope pdx(st, TP_LBWD_DX);
        rc = lt_gemm32(d, st, 0, 0, K, B, N, w, (size_t)N * K, K, dy, BN, N, dx, K, (int)rt, EPI_NONE, NULL, e);
        if (rc == PLUMB_OK) {
            dx_done = 1;
            /* rounding, and with relu_in the input layer's mask + dbias, in one pass */
            if (relu_in) {
                if ((rc = mask_colsum(d, st, dx, K, x, dx, B, K, (int)rt, dbias_x, e))) return rc;
            } else if (rt != DT_F32 && (rc = launch_epilogue(d, st, dx, NULL, B, K, 0, (int)rt, e))) {
                return rc;
            }
        } else if (rc != PLUMB_EUNSUPPORTED) {
            return rc;
        }
    }
    /* dw^T [K x N] = (x viewed K x B) (dy viewed N x B)^T; fp32 output.
     * The contraction runs over the batch: a single GEMM would have only
     * (K/tile)(N/tile) output tiles and no split-K (reduction scheme none),
     * so it is cut into S slices of B/S rows, one strided-batched GEMM writes
     * the S partial dw's, and k_sum_slices adds them in slice order. */
    {
        tprof_scope pdw(st, TP_LBWD_DW);
        const int S = dw_slice_count(B);
        if (S > 1 || padk) {
            /* K % 4 != 0: x padded to [B, Kp] and the parts [S, N, Kp], the
             * padding dropped by the slice sum */
            const int Ka = padk ? Kp : K;
            void *ws;
            const float *xs = x;
            if (padk) {
                if ((rc = tws_get(d, 2, (size_t)B * Kp * sizeof(float), &ws, e))) return rc;
                if ((rc = pad_cols(d, st, x, (size_t)B, K, (float *)ws, e))) return rc;
                xs = (const float *)ws;
            }
            size_t kn = (size_t)Ka * N, npart = ((size_t)S * kn + 127) / 128 * 128;
            int c16 = rt != DT_F32 && use_convert();
            size_t nx = ((size_t)B * Ka + 127) / 128 * 128;
            size_t bytes = npart * sizeof(float) + (c16 ? (nx + BN) * sizeof(uint16_t) : 0);
            if ((rc = tws_get(d, 1, bytes, &ws, e))) return rc;
            float *part = (float *)ws;
            const void *xa = xs, *dya = dy;
            if (c16) {
                uint16_t *x16 = (uint16_t *)(part + npart), *dy16 = x16 + nx;
                if ((rc = to16(d, st, xs, (size_t)B * Ka, x16, (int)rt, e)) || (rc = to16(d, st, dy, BN, dy16, (int)rt, e)))
                    return rc;
                xa = x16;
                dya = dy16;
            }
            int Bc = B / S;
            rc = lt_gemm(d, st, 0, 1, Ka, N, Bc, xa, Ka, dya, N, part, Ka, (int)rt, c16, EPI_NONE, NULL, S,
                         (long long)Bc * Ka, (long long)Bc * N, (long long)kn, e);
            if (rc == PLUMB_OK) {
                if ((rc = sum_slices_dw(d, st, part, S, N, K, Ka, dw, e))) return rc;
                dw_done = 1;
            } else if (rc != PLUMB_EUNSUPPORTED) {
                return rc;
            }
        }
        if (!dw_done) {
            rc = lt_gemm32(d, st, 0, 1, K, N, B, x, (size_t)B * K, K, dy, BN, N, dw, K, (int)rt, EPI_NONE, NULL, e);
            if (rc == PLUMB_OK) dw_done = 1;
            else if (rc != PLUMB_EUNSUPPORTED) return rc;
        }
    }
    if (dx_done && dw_done) return PLUMB_OK;
    if (!dx_done) {
        if ((rc = gemm_rm(d, st, B, K, N, 0, 0, dy, N, w, K, dx, K, e))) return rc;
        if ((rc = launch_epilogue(d, st, dx, NULL, B, K, 0, (int)rt, e))) return rc;
        if (relu_in && (rc = mask_colsum(d, st, dx, K, x, dx, B, K, DT_F32, dbias_x, e))) return rc;
    }
    if (!dw_done) return gemm_rm(d, st, N, K, B, 1, 0, dy, N, x, K, dw, K, e);
    return PLUMB_OK;
#else
    if (dx) {
        if ((rc = gemm_rm(d, st, B, K, N, 0, 0, dy, N, w, K, dx, K, e))) return rc;
        if ((rc = launch_epilogue(d, st, dx, NULL, B, K, 0, (int)rt, e))) return rc;
        if (relu_in && (rc = mask_colsum(d, st, dx, K, x, dx, B, K, DT_F32, dbias_x, e))) return rc;
    }
    return gemm_rm(d, st, N, K, B, 1, 0, dy, N, x, K, dw, K, e);
#endif
}

/* ---------------- fast 16-bit operands (linear_fwd16 / linear_bwd16) ----------------
 *
 * The caller keeps rt copies ("mirrors") of the activations next to the fp32
 * tensors, written by the pass that writes the tensor, so the GEMMs read
 * 16-bit operands (native bf16/fp16 tensor-core kernels, half the bytes)
 * instead of fp32 ones under COMPUTE_32F_FAST_16BF, which cuBLASLt runs on
 * tf32 kernels. Rows of K % 8 != 0 elements are padded as 16-bit copies made
 * straight from the fp32 tensor. A missing mirror is made here. */

static int round16(struct dev *d, struct dev_stream *st, float *y, uint16_t *y16, size_t n, int rt, plumb_err *e)
{
    k_round16<<<gpu_grid(n, 256), 256, 0, st->s>>>(y, y16, n, rt);
    GPU_CHECK_LAUNCH(d, "k_round16", e);
    return PLUMB_OK;
}

static int pad16(struct dev *d, struct dev_stream *st, const float *x, size_t R, int K, int Kp, uint16_t *x16, int rt,
                 plumb_err *e)
{
    const size_t tot = R * (size_t)Kp;
    if (tot < ((size_t)1 << 31))
        k_pad_cols16<unsigned><<<gpu_grid(tot, 256), 256, 0, st->s>>>(x, (unsigned)R, (unsigned)K, (unsigned)Kp, x16, rt);
    else
        k_pad_cols16<size_t><<<gpu_grid(tot, 256), 256, 0, st->s>>>(x, R, (size_t)K, (size_t)Kp, x16, rt);
    GPU_CHECK_LAUNCH(d, "k_pad_cols16", e);
    return PLUMB_OK;
}

static size_t al256(size_t b) { return (b + 255) / 256 * 256; }

int tr_linear_fwd16(struct dev *d, struct dev_stream *st, const float *x, uint16_t *x16, const float *w,
                    const uint16_t *w16, const float *bias, float *y, uint16_t *y16, int B, int K, int N, int relu,
                    dtype_t rt, plumb_err *e)
{
    int rc;
    void *ws;
#if !defined(PLUMB_HIP)
    if (d->numerics == NUMERICS_GOLDEN) goto plain; /* golden: the definition's kernels */
    {
    const int pad = K % 8 != 0, Ka = pad ? pad8(K) : K;
    /* x: the caller's mirror; or, padded, made here (into the caller's
     * padded mirror when given, which the backward then reads) */
    const int mkx = x && (pad || !x16), mkw = pad || !w16; /* x NULL: x16 [B, Ka] is filled */
    size_t ox = 0, ow = al256(mkx && !x16 ? (size_t)B * Ka * 2 : 0);
    if ((rc = tws_get(d, 2, ow + (size_t)N * Ka * 2, &ws, e))) return rc;
    uint16_t *xa = x16 ? x16 : (uint16_t *)((char *)ws + ox), *wa = (uint16_t *)w16;
    if (mkx && (rc = pad16(d, st, x, (size_t)B, K, Ka, xa, (int)rt, e))) return rc;
    if (mkw && (rc = pad16(d, st, w, (size_t)N, K, Ka, wa = (uint16_t *)((char *)ws + ow), (int)rt, e))) return rc;
    int epi = bias ? (relu ? EPI_RELU_BIAS : EPI_BIAS) : (relu ? EPI_RELU : EPI_NONE);
    float *yo = y;
    if (!y) {
        /* mirror only: the GEMM stores y in 16 bits itself (rounded after
         * bias and ReLU), no fp32 copy and no rounding pass; its bias is
         * then 16-bit too (the contract: rt-rounded, so the copy is exact) */
        uint16_t *b16 = NULL;
        if (bias) {
            void *wb;
            if ((rc = tws_get(d, 3, (size_t)N * 2, &wb, e))) return rc;
            if ((rc = to16(d, st, bias, (size_t)N, b16 = (uint16_t *)wb, (int)rt, e))) return rc;
        }
        rc = lt_gemm_c(d, st, 1, 0, N, B, Ka, wa, Ka, xa, Ka, y16, N, (int)rt, 1, 1, epi, b16, 1, 0, 0, 0, e);
        if (rc != PLUMB_EUNSUPPORTED) return rc;
        void *w1; /* no 16-bit store for this shape: fp32 into a stand-in, then the mirror */
        if ((rc = tws_get(d, 1, (size_t)B * N * sizeof(float), &w1, e))) return rc;
        yo = (float *)w1;
    }
    rc = lt_gemm(d, st, 1, 0, N, B, Ka, wa, Ka, xa, Ka, yo, N, (int)rt, 1, epi, bias, 1, 0, 0, 0, e);
    if (rc == PLUMB_OK) return round16(d, st, yo, y16, (size_t)B * N, (int)rt, e);
    if (rc != PLUMB_EUNSUPPORTED) return rc;
    }
plain:
#endif
    /* golden, or no 16-bit algorithm: the fp32-operand path, then the
     * mirror; fp32 stand-ins (workspace slot 3) for tensors given only as
     * mirrors (x NULL: x16 is [B, pad8(K)]) */
    {
    const float *xf = x;
    float *yf = y;
    const size_t ox = al256(x ? 0 : (size_t)B * K * sizeof(float));
    if (!x || !y) {
        if ((rc = tws_get(d, 3, ox + (y ? 0 : (size_t)B * N * sizeof(float)), &ws, e))) return rc;
        if (!x && (rc = widen16(d, st, x16, (size_t)B, K, pad8(K), (float *)ws, (int)rt, e))) return rc;
        if (!x) xf = (const float *)ws;
        if (!y) yf = (float *)((char *)ws + ox);
    }
    /* the padded mirror the backward reads is filled here too (the contract
     * of train_ops.h: linear_fwd16 fills it from x when K % 8 != 0) */
    if (x && x16 && K % 8 != 0 && (rc = pad16(d, st, x, (size_t)B, K, pad8(K), x16, (int)rt, e))) return rc;
    if ((rc = tr_linear_fwd(d, st, xf, w, bias, yf, B, K, N, relu, rt, e))) return rc;
    return y16 ? round16(d, st, yf, y16, (size_t)B * N, (int)rt, e) : PLUMB_OK;
    }
}

int tr_linear_bwd16(struct dev *d, struct dev_stream *st, const float *x, const uint16_t *x16, const float *w,
                    const uint16_t *w16, const float *y, float *dy, const uint16_t *dy16, float *dx, uint16_t *dx16,
                    float *dw, float *dbias, int B, int K, int N, int relu, dtype_t rt, int relu_in, float *dbias_x,
                    plumb_err *e)
{
    int rc;
    void *ws;
#if !defined(PLUMB_HIP)
    if (d->numerics == NUMERICS_GOLDEN) goto plain; /* golden: the definition's kernels */
    {
    const int pad = K % 8 != 0, Ka = pad ? pad8(K) : K;
    const size_t BN = (size_t)B * N;
    /* workspace 2: dy16 | w16 padded | x16 padded | dxp (fp32 padded dx) */
    /* x16: padded (K % 8 != 0) it is the one the forward filled */
    const int want_dx = dx || dx16;
    const int mkdy = relu || dbias || !dy16, mkw = want_dx && (pad || !w16), mkx = !x16;
    size_t o_dy = 0, o_w = al256(mkdy ? BN * 2 : 0), o_x = o_w + al256(mkw ? (size_t)N * Ka * 2 : 0);
    size_t o_dx = o_x + al256(mkx ? (size_t)B * Ka * 2 : 0);
    size_t tot = o_dx + (pad && dx ? (size_t)B * Ka * 4 : 0);
    if ((rc = tws_get(d, 2, tot, &ws, e))) return rc;
    char *w2 = (char *)ws;
    uint16_t *dya = (uint16_t *)dy16, *wa = (uint16_t *)w16, *xa = (uint16_t *)x16;
    /* dy: masked (+ dbias) with its mirror in one pass, or the caller's mirror */
    if (relu || dbias) {
        tprof_scope pm(st, TP_LBWD_MASK);
        dya = (uint16_t *)(w2 + o_dy);
        if ((rc = mask_colsum16(d, st, dy, N, relu ? y : NULL, dy, B, N, DT_F32, dbias, dya, (int)rt, e))) return rc;
    } else if (!dy16) {
        dya = (uint16_t *)(w2 + o_dy);
        if ((rc = pad16(d, st, dy, (size_t)B, N, N, dya, (int)rt, e))) return rc;
    }
    if (mkw && (rc = pad16(d, st, w, (size_t)N, K, Ka, wa = (uint16_t *)(w2 + o_w), (int)rt, e))) return rc;
    if (mkx && (rc = pad16(d, st, x, (size_t)B, K, Ka, xa = (uint16_t *)(w2 + o_x), (int)rt, e))) return rc;
    /* xa [B, Ka] is x's exact 16-bit copy: the relu_in mask reads its sign */
    int ok = 1;
    if (dx) {
        /* dx^T [Ka x B] = (w16 viewed Ka x N) (dy16 viewed N x B) */
        tprof_scope pdx(st, TP_LBWD_DX);
        float *c = pad ? (float *)(w2 + o_dx) : dx;
        rc = lt_gemm(d, st, 0, 0, Ka, B, N, wa, Ka, dya, N, c, Ka, (int)rt, 1, EPI_NONE, NULL, 1, 0, 0, 0, e);
        if (rc == PLUMB_OK) {
            if (relu_in) /* the mask from x, or from its mirror when x is given only as that */
                rc = mask_colsum_any(d, st, c, NULL, Ka, x, x ? NULL : xa, x ? K : Ka, dx, dx16, K, B, K, (int)rt,
                                     (int)rt, dbias_x, e);
            else if (pad && (rc = unpad_round(d, st, c, (size_t)B, K, Ka, dx, (int)rt, e)) == PLUMB_OK)
                rc = dx16 ? round16(d, st, dx, dx16, (size_t)B * K, (int)rt, e) : PLUMB_OK;
            else if (!pad)
                rc = round16(d, st, dx, dx16, (size_t)B * K, (int)rt, e);
            if (rc) return rc;
        } else if (rc == PLUMB_EUNSUPPORTED) {
            ok = 0;
        } else {
            return rc;
        }
    } else if (dx16) {
        /* mirror only: the GEMM stores dx [B, Ka] in 16 bits itself
         * (rounded on the store; the columns after K are the padded
         * weights' zeros); the relu_in mask + dbias then run over the
         * 16-bit data in place */
        tprof_scope pdx(st, TP_LBWD_DX);
        rc = lt_gemm_c(d, st, 0, 0, Ka, B, N, wa, Ka, dya, N, dx16, Ka, (int)rt, 1, 1, EPI_NONE, NULL, 1, 0, 0, 0, e);
        if (rc == PLUMB_OK) {
            if (relu_in &&
                (rc = mask_colsum_any(d, st, NULL, dx16, Ka, NULL, xa, Ka, NULL, dx16, Ka, B, K, (int)rt, (int)rt, dbias_x,
                                      e)))
                return rc;
        } else if (rc == PLUMB_EUNSUPPORTED) {
            void *w3; /* no 16-bit store for this shape: fp32 into a stand-in */
            if ((rc = tws_get(d, 3, (size_t)B * Ka * sizeof(float), &w3, e))) return rc;
            float *c32 = (float *)w3;
            rc = lt_gemm(d, st, 0, 0, Ka, B, N, wa, Ka, dya, N, c32, Ka, (int)rt, 1, EPI_NONE, NULL, 1, 0, 0, 0, e);
            if (rc == PLUMB_OK)
                rc = mask_colsum_any(d, st, c32, NULL, Ka, NULL, relu_in ? xa : NULL, Ka, NULL, dx16, Ka, B,
                                     relu_in ? K : Ka, (int)rt, (int)rt, relu_in ? dbias_x : NULL, e);
            if (rc == PLUMB_EUNSUPPORTED) ok = 0;
            else if (rc) return rc;
        } else {
            return rc;
        }
    }
    if (ok) {
        /* dw^T [Ka x N] = (x16 viewed Ka x B)(dy16 viewed N x B)^T in batch slices + an ordered sum */
        tprof_scope pdw(st, TP_LBWD_DW);
        const int S = dw_slice_count(B);
        size_t kn = (size_t)Ka * N;
        void *wp;
        if ((rc = tws_get(d, 1, (size_t)S * kn * sizeof(float), &wp, e))) return rc;
        float *part = (float *)wp;
        int Bc = B / S;
        rc = lt_gemm(d, st, 0, 1, Ka, N, Bc, xa, Ka, dya, N, part, Ka, (int)rt, 1, EPI_NONE, NULL, S, (long long)Bc * Ka,
                     (long long)Bc * N, (long long)kn, e);
        if (rc == PLUMB_OK) return sum_slices_dw(d, st, part, S, N, K, Ka, dw, e);
        if (rc != PLUMB_EUNSUPPORTED) return rc;
    }
    }
plain:
#endif
    /* golden, or no 16-bit algorithm: the fp32 path (dy may be masked
     * already: masking again changes nothing; dbias is formed again), with
     * fp32 stand-ins (workspace slot 3) for tensors given only as mirrors
     * (x NULL: x16 is [B, pad8(K)]; dy NULL: dy16 [B, N]; dx NULL: dx16 wanted) */
    {
    const float *xf = x;
    float *dyf = dy, *dxf = dx;
    const size_t ox = al256(x ? 0 : (size_t)B * K * sizeof(float));
    const size_t ody = ox + al256(dy ? 0 : (size_t)B * N * sizeof(float));
    if (!x || !dy || (!dx && dx16)) {
        if ((rc = tws_get(d, 3, ody + (!dx && dx16 ? (size_t)B * K * sizeof(float) : 0), &ws, e))) return rc;
        if (!x && (rc = widen16(d, st, x16, (size_t)B, K, pad8(K), (float *)ws, (int)rt, e))) return rc;
        if (!dy && (rc = widen16(d, st, dy16, (size_t)B, N, N, (float *)((char *)ws + ox), (int)rt, e))) return rc;
        if (!x) xf = (const float *)ws;
        if (!dy) dyf = (float *)((char *)ws + ox);
        if (!dx && dx16) dxf = (float *)((char *)ws + ody);
    }
    if ((rc = tr_linear_bwd(d, st, xf, w, y, dyf, dxf, dw, dbias, B, K, N, relu, rt, relu_in, dbias_x, e))) return rc;
    if (!dxf || !dx16) return PLUMB_OK;
    /* the mirror: [B, K] next to an fp32 dx, [B, pad8(K)] when alone */
    return dx ? round16(d, st, dxf, dx16, (size_t)B * K, (int)rt, e) : pad16(d, st, dxf, (size_t)B, K, pad8(K), dx16, (int)rt, e);
    }
}

int tr_pad16(struct dev *d, struct dev_stream *st, const float *x, size_t R, int K, int ld, uint16_t *x16, int rt,
             plumb_err *e)
{
    return pad16(d, st, x, R, K, ld, x16, rt, e);
}

int tr_widen16(struct dev *d, struct dev_stream *st, const uint16_t *x16, size_t R, int K, int ld, float *x, int rt,
               plumb_err *e)
{
    return widen16(d, st, x16, R, K, ld, x, rt, e);
}

