/* Causal multi-head attention on the GPU (train_ops.h attention_fwd /
 * attention_bwd).
 *
 * Golden: one thread per query row (forward, backward rows) or key column
 * (backward keys) evaluates dev/train_gpt_math.h's gpt_gold_attn_row /
 * _bwd_row / _bwd_key, with the softmax rows materialised in workspace
 * slot 3 ([B*NH*T, T] forward; P and dS [B*NH, T, T] backward), so the bits
 * are the cpu backend's.
 *
 * Fast: flash-style, no T x T matrix in memory. The inputs hold rt values
 * (bf16 when training in bf16) and every product is accumulated in fp32.
 * One block of 128 threads per (tile of BR queries, sequence, head); a
 * query row is owned by TPR = 128 / BR consecutive lanes (a row group,
 * inside one warp of either width), which split its keys for the scores and
 * its head dimensions for the output.
 *   forward: the Q tile in shared memory; key/value tiles of BC = BR
 *     positions streamed up to the diagonal; scores, the online softmax
 *     (running max m and sum l per row, rescaling the output by
 *     exp(m_old - m_new)), P V accumulated in registers; out = O / l,
 *     lse = m + log l.
 *   backward: D_t = dout_t . out_t first; then one block per key tile
 *     (dK, dV) loops over the query tiles at or after it in ascending order,
 *     recomputing P = exp(s - lse) and dS = P (dP - D) per tile from the
 *     saved lse, and accumulates dK, dV in registers in that fixed order; a
 *     second kernel, one block per query tile, recomputes dS over the key
 *     tiles in ascending order for dQ. Each accumulator has one owner and a
 *     fixed order: deterministic, no atomics.
 * Tiles by head width: HS <= 64: 32 x 32; <= 128: 16 x 16 (shared memory
 * below 48 KiB; on gfx90a LDS is 64 KiB); wider heads are not supported.
 *
 * Fast, 16-bit (rt bf16 or fp16) on CUDA: the tensor-core kernels of
 * gpu/train_gpt_attn_tc.cuh (WMMA, 64 x 64 tiles, the same structure and
 * the same rules: online softmax, lse saved, a fixed order per
 * accumulator, no atomics) for HS <= 128. fp32 training keeps the scalar
 * kernels above (tensor cores would round the fp32 operands), as do HIP
 * builds (PLUMB_ATTN_TC undefined: no WMMA for gfx90a here) and any run with
 * PLUMB_GPT_ATTN=scalar (docs/GPT.md). For head widths up to 64 the mma.sync
 * kernels of gpu/train_gpt_attn_mma.cuh are the default, and
 * PLUMB_GPT_ATTN=mma2 selects the pipelined ones of
 * gpu/train_gpt_attn_mma2.cuh (16-bit copies of q, k, v, dout in workspace
 * slot 1, cp.async double buffers, ldmatrix; the mma kernels' bits). */
#include "gpu/train_gpt.h"
#include "gpu/train_gpt_kern.cuh"
#include "gpu/train_gpt_attn_tc.cuh"
#include "gpu/train_gpt_attn_mma.cuh"
#include "gpu/train_gpt_attn_mma2.cuh"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static inline int golden(struct dev *d) { return d->numerics == NUMERICS_GOLDEN; }

/* ---------------- golden ---------------- */

__global__ void k_attn_fwd_gold(const float *qkv, float *out, float *lse, float *p, int B, int T, int NH, int HS,
                                float scale, int rt)
{
    const size_t rows = (size_t)B * NH * T;
    const size_t q = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (q >= rows) return;
    const int t = (int)(q % T), h = (int)(q / T % NH), b = (int)(q / ((size_t)T * NH));
    const int C = NH * HS, C3 = 3 * C;
    const float *base = qkv + (size_t)b * T * C3 + (size_t)h * HS;
    gpt_gold_attn_row(base + (size_t)t * C3, base + C, base + 2 * C, (size_t)C3, t, HS, scale, p + q * T,
                      out + ((size_t)b * T + t) * C + (size_t)h * HS, lse + ((size_t)b * NH + h) * T + t, rt);
}

__global__ void k_attn_bwd_rows_gold(const float *qkv, const float *out, const float *lse, const float *dout, float *P,
                                     float *DS, float *dqkv, int B, int T, int NH, int HS, float scale, int rt)
{
    const size_t rows = (size_t)B * NH * T;
    const size_t q = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (q >= rows) return;
    const int t = (int)(q % T), h = (int)(q / T % NH), b = (int)(q / ((size_t)T * NH));
    const int C = NH * HS, C3 = 3 * C;
    const float *base = qkv + (size_t)b * T * C3 + (size_t)h * HS;
    const size_t bh = (size_t)b * NH + h, ro = ((size_t)b * T + t) * C + (size_t)h * HS;
    gpt_gold_attn_bwd_row(base + (size_t)t * C3, base + C, base + 2 * C, (size_t)C3, dout + ro, out + ro, t, HS, scale,
                          lse[bh * T + t], P + (bh * T + t) * T, DS + (bh * T + t) * T,
                          dqkv + (size_t)b * T * C3 + (size_t)t * C3 + (size_t)h * HS, rt);
}

__global__ void k_attn_bwd_keys_gold(const float *qkv, const float *dout, const float *P, const float *DS, float *dqkv,
                                     int B, int T, int NH, int HS, float scale, int rt)
{
    const size_t cols = (size_t)B * NH * T;
    const size_t q = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (q >= cols) return;
    const int j = (int)(q % T), h = (int)(q / T % NH), b = (int)(q / ((size_t)T * NH));
    const int C = NH * HS, C3 = 3 * C;
    const size_t bh = (size_t)b * NH + h;
    float *dk = dqkv + (size_t)b * T * C3 + (size_t)j * C3 + C + (size_t)h * HS;
    gpt_gold_attn_bwd_key(qkv + (size_t)b * T * C3 + (size_t)h * HS, (size_t)C3, dout + (size_t)b * T * C + (size_t)h * HS,
                          (size_t)C, P + bh * T * T, DS + bh * T * T, (size_t)T, j, T, HS, scale, dk, dk + C, rt);
}

/* ---------------- fast: tensor-core tiles (CUDA, 16-bit) ---------------- */

enum { ATTN_SCALAR = 0, ATTN_TC, ATTN_MMA, ATTN_MMA2 };
/* PLUMB_GPT_ATTN: unset, "" or "mma2": the pipelined mma.sync kernels of
 * gpu/train_gpt_attn_mma2.cuh (16-bit copies, cp.async, ldmatrix) where they
 * apply (16-bit, head width <= 64), else as tc (gpt2-124m B=16 T=1024 bf16,
 * fp32 activations, on an H100: 243.1 k tokens/s against mma's 201.2 k and
 * tc's 166.8 k, BENCHMARKS.md 2026-12-05 10:09 UTC; the same bits as mma);
 * "mma": the mma.sync kernels of gpu/train_gpt_attn_mma.cuh where they apply
 * (the same), else as tc; "tc": the WMMA kernels
 * where they apply (16-bit, head width <= 128); "scalar": the scalar flash
 * kernels always; "cudnn" / "cudnn-nd": the 16-bit ops go through cuDNN's
 * fused attention (gpu/attn_cudnn.cu; -nd its faster backward that is not
 * reproducible run to run), "auto" through it where it serves the shape,
 * the fp32 ops as unset; anything else an error naming the value.
 * *kind: ATTN_* */
static int attn_kind(struct dev *d, int HS, dtype_t rt, int *kind, plumb_err *e)
{
    const char *v = getenv("PLUMB_GPT_ATTN");
    *kind = ATTN_SCALAR;
    if (v && *v && strcmp(v, "tc") && strcmp(v, "scalar") && strcmp(v, "mma") && strcmp(v, "mma2") &&
        strcmp(v, "cudnn") && strcmp(v, "cudnn-nd") && strcmp(v, "auto"))
        return gpu_err(e, PLUMB_EUSAGE,
                       "%s: PLUMB_GPT_ATTN=%s: expected tc, mma, mma2, cudnn, cudnn-nd, auto or scalar", d->label, v);
    if (v && (!strncmp(v, "cudnn", 5) || !strcmp(v, "auto"))) v = NULL; /* the fp32 ops' kind: as unset */
#if defined(PLUMB_ATTN_TC)
    const int sixteen = rt == DT_BF16 || rt == DT_F16;
    if (sixteen && HS <= 128 && !(v && !strcmp(v, "scalar"))) *kind = ATTN_TC;
#if defined(PLUMB_ATTN_MMA)
    if (sixteen && HS <= 64 && !(v && (!strcmp(v, "scalar") || !strcmp(v, "tc")))) *kind = ATTN_MMA;
#endif
#if defined(PLUMB_ATTN_MMA2)
    if (sixteen && HS <= 64 && !(v && (!strcmp(v, "scalar") || !strcmp(v, "tc") || !strcmp(v, "mma"))))
        *kind = ATTN_MMA2;
#endif
#else
    (void)HS;
    (void)rt;
#endif
    return PLUMB_OK;
}

#if defined(PLUMB_ATTN_TC)
/* dynamic shared memory past the default 48 KiB must be allowed per kernel */
template <typename K> static int tc_smem(struct dev *d, K *kernel, size_t bytes, const char *name, plumb_err *e)
{
    if (bytes <= 48 * 1024) return PLUMB_OK;
    const cudaError_t r = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
    if (r != cudaSuccess)
        return gpu_err(e, PLUMB_EDEVICE, "%s: cudaFuncSetAttribute(%s, MaxDynamicSharedMemorySize, %zu) failed: %s (%s)",
                       d->label, name, bytes, cudaGetErrorName(r), cudaGetErrorString(r));
    return PLUMB_OK;
}

/* one tiled attention kernel over (query or key tiles of `tile`, B * NH):
 * its shared memory allowed, launched, the launch checked */
template <typename K, typename... A>
static int tile_launch(struct dev *d, struct dev_stream *st, plumb_err *e, K *kernel, const char *name, size_t smem,
                       int tile, unsigned threads, int B, int T, int NH, A... args)
{
    const int rc = tc_smem(d, kernel, smem, name, e);
    if (rc) return rc;
    const dim3 grid((unsigned)((T + tile - 1) / tile), (unsigned)(B * NH));
    kernel<<<grid, threads, smem, st->s>>>(args...);
    char what[64]; /* GPU_CHECK_LAUNCH's words, for a name that is not a literal */
    snprintf(what, sizeof what, "launch of %s", name);
    return gpu_check_(cudaGetLastError(), what, d->label, e);
}

template <typename E, int HSM>
static int tc_fwd(struct dev *d, struct dev_stream *st, const float *qkv, float *out, float *lse, int B, int T, int NH,
                  int HS, float scale, int rt, plumb_err *e)
{
    return tile_launch(d, st, e, tcattn::k_tc_fwd<E, HSM>, "k_tc_fwd", tcattn::sz<E, HSM>::FWD, tcattn::TB, tcattn::TNT,
                       B, T, NH, qkv, out, lse, T, NH, HS, scale, rt);
}

template <typename E, int HSM>
static int tc_bwd(struct dev *d, struct dev_stream *st, const float *qkv, const float *dout, const float *lse,
                  const float *D, float *dqkv, int B, int T, int NH, int HS, float scale, int rt, plumb_err *e)
{
    typedef tcattn::sz<E, HSM> SZ;
    int rc = tile_launch(d, st, e, tcattn::k_tc_bwd_dkv<E, HSM>, "k_tc_bwd_dkv", SZ::DKV, tcattn::TB, tcattn::TNT, B, T,
                         NH, qkv, dout, lse, D, dqkv, T, NH, HS, scale, rt);
    if (!rc)
        rc = tile_launch(d, st, e, tcattn::k_tc_bwd_dq<E, HSM>, "k_tc_bwd_dq", SZ::DQ, tcattn::TB, tcattn::TNT, B, T, NH,
                         qkv, dout, lse, D, dqkv, T, NH, HS, scale, rt);
    return rc;
}

#if defined(PLUMB_ATTN_MMA)
/* S: the storage of qkv, out, dout, dqkv: fp32 (rt values) or E's 16 bits
 * (the gpt 16-bit activation pipeline); the same tiles, so the same bits */
template <typename E, int HSM, typename S>
static int mma_fwd(struct dev *d, struct dev_stream *st, const S *qkv, S *out, float *lse, int B, int T, int NH, int HS,
                   float scale, int rt, plumb_err *e)
{
    return tile_launch(d, st, e, tcattn::k_mma_fwd<E, HSM, S>, "k_mma_fwd", tcattn::mdims<HSM>::FWD, tcattn::MB,
                       tcattn::MNT, B, T, NH, qkv, out, lse, T, NH, HS, scale, rt);
}

template <typename E, int HSM, typename S>
static int mma_bwd(struct dev *d, struct dev_stream *st, const S *qkv, const S *dout, const float *lse, const float *D,
                   S *dqkv, int B, int T, int NH, int HS, float scale, int rt, plumb_err *e)
{
    typedef tcattn::mdims<HSM> MD;
    int rc = tile_launch(d, st, e, tcattn::k_mma_bwd_dkv<E, HSM, S>, "k_mma_bwd_dkv", MD::DKV, tcattn::MB, tcattn::MNT,
                         B, T, NH, qkv, dout, lse, D, dqkv, T, NH, HS, scale, rt);
    if (!rc)
        rc = tile_launch(d, st, e, tcattn::k_mma_bwd_dq<E, HSM, S>, "k_mma_bwd_dq", MD::DQ, tcattn::MB, tcattn::MNT, B,
                         T, NH, qkv, dout, lse, D, dqkv, T, NH, HS, scale, rt);
    return rc;
}

#if defined(PLUMB_ATTN_MMA2)
/* k_mma2_to16: P parts of src ([B, T, ld] fp32 rt values, or S = uint16_t:
 * E's bits) as 16-bit rows [P][B NH][Tp][HSM] at dst */
template <typename E, int HSM, typename S>
static int mma2_to16(struct dev *d, struct dev_stream *st, const S *src, uint16_t *dst, int P, size_t ld, int B,
                     int T, int Tp, int NH, int HS, plumb_err *e)
{
    const size_t n = (size_t)P * B * NH * Tp * (HSM / 8);
    const int per = 16 / (int)sizeof(S); /* values in one 16-byte load */
    const int vec = HS % per == 0 && ld % per == 0 && !((uintptr_t)src % 16);
    tcattn::k_mma2_to16<E, HSM, S><<<gpu_grid(n, 256), 256, 0, st->s>>>(src, dst, P, ld, B, T, Tp, NH, HS, vec);
    GPU_CHECK_LAUNCH(d, "k_mma2_to16", e);
    return PLUMB_OK;
}
/* the 16-bit copies live in workspace slot 1 (the 16-bit operand copies;
 * one op at a time): parts of B NH Tp HSM values, Tp = T rounded up to the
 * largest tile, so every tile the kernels copy lies inside */
static inline int mma2_tp(int T) { return (T + tcattn::M2TP - 1) / tcattn::M2TP * tcattn::M2TP; }
/* part p of k_mma2_to16's copies at h: [B NH][Tp][HSM] */
static inline tcattn::m2rows mma2_copy_rows(const uint16_t *h, int p, int B, int NH, int Tp, int HSM)
{
    const size_t part = (size_t)B * NH * Tp * HSM;
    return tcattn::m2rows{h + p * part, (size_t)HSM, (size_t)NH * Tp * HSM, (size_t)Tp * HSM};
}
/* PLUMB_GPT_ATTN_DIRECT: 1 or unset, the kernels read 16-bit activations
 * in place where mma2_fits lets them; 0, always the copies (for timing the
 * two side by side) */
static int mma2_direct_on(struct dev *d, int *on, plumb_err *e)
{
    return gpu_env_switch(d, "PLUMB_GPT_ATTN_DIRECT", "copy q, k, v, dout to head-major 16-bit rows first",
                          "read them in place where the shapes allow", on, e);
}
/* a 16-bit tensor the kernels can read in place (no k_mma2_to16 pass):
 * every tile they load lies inside it and every 16-byte copy is aligned: T
 * a multiple of the largest tile (so Tp = T: no rows past T), the head
 * exactly HSM wide (no zero columns to supply), rows and heads starting on
 * 16 bytes */
static int mma2_fits(const void *src, size_t ld, int T, int HS, int HSM)
{
    return T % tcattn::M2TP == 0 && HS == HSM && ld % 8 == 0 && HS % 8 == 0 && !((uintptr_t)src % 16);
}
/* part p (q 0, k 1, v 2) of a 16-bit qkv [B, T, 3C], or dout [B, T, C] (p 0, ld C), in place */
static inline tcattn::m2rows mma2_direct_rows(const uint16_t *src, int p, size_t ld, int T, int NH, int HS)
{
    return tcattn::m2rows{src + (size_t)p * NH * HS, ld, (size_t)T * ld, (size_t)HS};
}

/* S: the storage of qkv, out, dout, dqkv, as mma_fwd / mma_bwd */
template <typename E, int HSM, typename S>
static int mma2_fwd(struct dev *d, struct dev_stream *st, const S *qkv, S *out, float *lse, int B, int T, int NH,
                    int HS, float scale, int rt, plumb_err *e)
{
    const int Tp = mma2_tp(T);
    const size_t C3 = 3 * (size_t)NH * HS;
    int direct = 0;
    int rc = sizeof(S) == 2 ? mma2_direct_on(d, &direct, e) : PLUMB_OK;
    direct = direct && mma2_fits(qkv, C3, T, HS, HSM);
    tcattn::m2rows r[3];
    if (!rc && direct)
        for (int p = 0; p < 3; p++) r[p] = mma2_direct_rows((const uint16_t *)qkv, p, C3, T, NH, HS);
    else if (!rc) {
        void *ws;
        rc = tws_get(d, 1, 3 * (size_t)B * NH * Tp * HSM * sizeof(uint16_t), &ws, e);
        if (!rc) rc = mma2_to16<E, HSM>(d, st, qkv, (uint16_t *)ws, 3, C3, B, T, Tp, NH, HS, e);
        for (int p = 0; p < 3; p++) r[p] = mma2_copy_rows((const uint16_t *)ws, p, B, NH, Tp, HSM);
    }
    if (!rc)
        rc = tile_launch(d, st, e, tcattn::k_mma2_fwd<E, HSM, tcattn::M2FW, S>, "k_mma2_fwd", tcattn::m2dims<HSM>::FWD,
                         16 * tcattn::M2FW, 32 * tcattn::M2FW, B, T, NH, r[0], r[1], r[2], out, lse, T, NH, HS, scale,
                         rt);
    return rc;
}

template <typename E, int HSM, typename S>
static int mma2_bwd(struct dev *d, struct dev_stream *st, const S *qkv, const S *dout, const float *lse,
                    const float *D, S *dqkv, int B, int T, int NH, int HS, float scale, int rt, plumb_err *e)
{
    typedef tcattn::m2dims<HSM> MD;
    const int Tp = mma2_tp(T);
    const size_t C = (size_t)NH * HS;
    int direct = 0;
    int rc = sizeof(S) == 2 ? mma2_direct_on(d, &direct, e) : PLUMB_OK;
    direct = direct && mma2_fits(qkv, 3 * C, T, HS, HSM) && mma2_fits(dout, C, T, HS, HSM);
    tcattn::m2rows r[4];
    if (!rc && direct) {
        for (int p = 0; p < 3; p++) r[p] = mma2_direct_rows((const uint16_t *)qkv, p, 3 * C, T, NH, HS);
        r[3] = mma2_direct_rows((const uint16_t *)dout, 0, C, T, NH, HS);
    } else if (!rc) {
        void *ws;
        rc = tws_get(d, 1, 4 * (size_t)B * NH * Tp * HSM * sizeof(uint16_t), &ws, e);
        if (!rc) rc = mma2_to16<E, HSM>(d, st, qkv, (uint16_t *)ws, 3, 3 * C, B, T, Tp, NH, HS, e);
        if (!rc) rc = mma2_to16<E, HSM>(d, st, dout, (uint16_t *)ws + 3 * ((size_t)B * NH * Tp * HSM), 1, C, B, T,
                                        Tp, NH, HS, e);
        for (int p = 0; p < 4; p++) r[p] = mma2_copy_rows((const uint16_t *)ws, p, B, NH, Tp, HSM);
    }
    if (!rc)
        rc = tile_launch(d, st, e, tcattn::k_mma2_bwd_dkv<E, HSM, S>, "k_mma2_bwd_dkv", MD::DKV, tcattn::M2T,
                         32 * tcattn::M2KW, B, T, NH, r[0], r[1], r[2], r[3], lse, D, dqkv, T, NH, HS, scale, rt);
    if (!rc)
        rc = tile_launch(d, st, e, tcattn::k_mma2_bwd_dq<E, HSM, tcattn::M2QW, S>, "k_mma2_bwd_dq", MD::DQ,
                         16 * tcattn::M2QW, 32 * tcattn::M2QW, B, T, NH, r[0], r[1], r[2], r[3], lse, D, dqkv, T, NH,
                         HS, scale, rt);
    return rc;
}
#endif

/* E by rt, HSM the head width rounded up to 32 or 64 */
#define MMA_DISPATCH(FN, ...)                                                                                   \
    (rt == DT_F16 ? (HS <= 32 ? FN<__half, 32>(__VA_ARGS__) : FN<__half, 64>(__VA_ARGS__))                      \
                  : (HS <= 32 ? FN<__nv_bfloat16, 32>(__VA_ARGS__) : FN<__nv_bfloat16, 64>(__VA_ARGS__)))
#endif

/* E by rt, HSM the head width rounded up to 32, 64 or 128 */
#define TC_DISPATCH(FN, ...)                                                                                     (rt == DT_F16 ? (HS <= 32 ? FN<__half, 32>(__VA_ARGS__) : HS <= 64 ? FN<__half, 64>(__VA_ARGS__)                                                                        : FN<__half, 128>(__VA_ARGS__))                                    : (HS <= 32 ? FN<__nv_bfloat16, 32>(__VA_ARGS__) : HS <= 64 ? FN<__nv_bfloat16, 64>(__VA_ARGS__)                                                                    : FN<__nv_bfloat16, 128>(__VA_ARGS__)))
#endif

/* ---------------- fast: flash-style tiles ---------------- */

/* ---------------- entry points ---------------- */

static int grid_ok(struct dev *d, int B, int NH, plumb_err *e)
{
    if ((long)B * NH > 65535)
        return gpu_err(e, PLUMB_EUNSUPPORTED, "%s: attention: %d sequences x %d heads exceed the grid's 65535", d->label,
                       B, NH);
    return PLUMB_OK;
}

#define FLASH_DISPATCH(KERNEL, ...)                                                                         \
    do {                                                                                                    \
        if (HS <= 64)                                                                                       \
            KERNEL<32, 64><<<dim3((unsigned)((T + 31) / 32), (unsigned)(B * NH)), NT, 0, st->s>>>(__VA_ARGS__); \
        else                                                                                                \
            KERNEL<16, 128><<<dim3((unsigned)((T + 15) / 16), (unsigned)(B * NH)), NT, 0, st->s>>>(__VA_ARGS__); \
    } while (0)

int tg_attention_fwd_impl(struct dev *d, struct dev_stream *st, const float *qkv, float *out, float *lse, int B, int T,
                          int NH, int HS, dtype_t rt, plumb_err *e)
{
    const float scale = 1.0f / sqrtf((float)HS);
    const size_t rows = (size_t)B * NH * T;
    int rc;
    if (golden(d)) {
        void *ws;
        if ((rc = tws_get(d, 3, rows * (size_t)T * sizeof(float), &ws, e))) return rc;
        k_attn_fwd_gold<<<(unsigned)((rows + 127) / 128), 128, 0, st->s>>>(qkv, out, lse, (float *)ws, B, T, NH, HS, scale,
                                                                           (int)rt);
        GPU_CHECK_LAUNCH(d, "k_attn_fwd_gold", e);
        return PLUMB_OK;
    }
    if ((rc = grid_ok(d, B, NH, e))) return rc;
    int kind;
    if ((rc = attn_kind(d, HS, rt, &kind, e))) return rc;
#if defined(PLUMB_ATTN_MMA)
    if (kind == ATTN_MMA) return MMA_DISPATCH(mma_fwd, d, st, qkv, out, lse, B, T, NH, HS, scale, (int)rt, e);
#endif
#if defined(PLUMB_ATTN_MMA2)
    if (kind == ATTN_MMA2) return MMA_DISPATCH(mma2_fwd, d, st, qkv, out, lse, B, T, NH, HS, scale, (int)rt, e);
#endif
#if defined(PLUMB_ATTN_TC)
    if (kind == ATTN_TC) return TC_DISPATCH(tc_fwd, d, st, qkv, out, lse, B, T, NH, HS, scale, (int)rt, e);
#endif
    FLASH_DISPATCH(k_flash_fwd, qkv, out, lse, T, NH, HS, scale, (int)rt);
    GPU_CHECK_LAUNCH(d, "k_flash_fwd", e);
    return PLUMB_OK;
}

int tg_attention_bwd_impl(struct dev *d, struct dev_stream *st, const float *qkv, const float *out, const float *lse,
                          const float *dout, float *dqkv, int B, int T, int NH, int HS, dtype_t rt, plumb_err *e)
{
    const float scale = 1.0f / sqrtf((float)HS);
    const size_t rows = (size_t)B * NH * T;
    void *ws;
    int rc;
    if (golden(d)) {
        const size_t tt = rows * (size_t)T;
        if ((rc = tws_get(d, 3, 2 * tt * sizeof(float), &ws, e))) return rc;
        float *P = (float *)ws, *DS = P + tt;
        const unsigned g = (unsigned)((rows + 127) / 128);
        k_attn_bwd_rows_gold<<<g, 128, 0, st->s>>>(qkv, out, lse, dout, P, DS, dqkv, B, T, NH, HS, scale, (int)rt);
        GPU_CHECK_LAUNCH(d, "k_attn_bwd_rows_gold", e);
        k_attn_bwd_keys_gold<<<g, 128, 0, st->s>>>(qkv, dout, P, DS, dqkv, B, T, NH, HS, scale, (int)rt);
        GPU_CHECK_LAUNCH(d, "k_attn_bwd_keys_gold", e);
        return PLUMB_OK;
    }
    if ((rc = grid_ok(d, B, NH, e))) return rc;
    int kind;
    if ((rc = attn_kind(d, HS, rt, &kind, e))) return rc;
    if ((rc = tws_get(d, 0, rows * sizeof(float), &ws, e))) return rc;
    float *D = (float *)ws;
    /* ROWDOT_G lanes a row: 128 / ROWDOT_G rows a block */
    k_flash_bwd_pre<<<gpu_grid(rows, 128 / ROWDOT_G), 128, 0, st->s>>>(out, dout, D, B, T, NH, HS, NULL, NULL, 0,
                                                                       rowdot_vec(out, dout, HS));
    GPU_CHECK_LAUNCH(d, "k_flash_bwd_pre", e);
#if defined(PLUMB_ATTN_MMA)
    if (kind == ATTN_MMA) return MMA_DISPATCH(mma_bwd, d, st, qkv, dout, lse, D, dqkv, B, T, NH, HS, scale, (int)rt, e);
#endif
#if defined(PLUMB_ATTN_MMA2)
    if (kind == ATTN_MMA2)
        return MMA_DISPATCH(mma2_bwd, d, st, qkv, dout, lse, D, dqkv, B, T, NH, HS, scale, (int)rt, e);
#endif
#if defined(PLUMB_ATTN_TC)
    if (kind == ATTN_TC) return TC_DISPATCH(tc_bwd, d, st, qkv, dout, lse, D, dqkv, B, T, NH, HS, scale, (int)rt, e);
#endif
    FLASH_DISPATCH(k_flash_bwd_dkv, qkv, dout, lse, D, dqkv, T, NH, HS, scale, (int)rt);
    GPU_CHECK_LAUNCH(d, "k_flash_bwd_dkv", e);
    FLASH_DISPATCH(k_flash_bwd_dq, qkv, dout, lse, D, dqkv, T, NH, HS, scale, (int)rt);
    GPU_CHECK_LAUNCH(d, "k_flash_bwd_dq", e);
    return PLUMB_OK;
}

/* ---------------- 16-bit storage (train_ops.h "gpt with 16-bit activations") ----------------
 * The mma and mma2 kernels read and write the 16-bit tensors themselves
 * (their tiles are 16-bit anyway). PLUMB_EUNSUPPORTED, with no message, where
 * the kind in force is another (golden, tc, scalar; HIP): the caller then
 * runs the fp32 implementation between casts. */
#if defined(PLUMB_ATTN_MMA)
/* PLUMB_OK and *kind where the mma or mma2 kernels are the kind in force
 * (fast numerics, a grid that fits); PLUMB_EUNSUPPORTED elsewhere; a bad
 * PLUMB_GPT_ATTN its error */
static int mma16_applies(struct dev *d, int B, int NH, int HS, dtype_t rt, int *kind, plumb_err *e)
{
    if (golden(d) || grid_ok(d, B, NH, e)) return PLUMB_EUNSUPPORTED;
    const int rc = attn_kind(d, HS, rt, kind, e);
    return rc ? rc : *kind == ATTN_MMA || *kind == ATTN_MMA2 ? PLUMB_OK : PLUMB_EUNSUPPORTED;
}
#endif

/* In fast numerics with 16-bit activations: PLUMB_GPT_ATTN=cudnn 1,
 * cudnn-nd 2, auto or unset 3 (cuDNN where it serves the shape, else our
 * kernels; on HIP always ours), anything else (mma2, mma, tc, scalar) 0: our
 * kernels. */
static int cudnn_asked(struct dev *d, dtype_t rt)
{
    const char *v = getenv("PLUMB_GPT_ATTN");
    if (golden(d) || !(rt == DT_BF16 || rt == DT_F16)) return 0;
    /* unset is auto: cuDNN where it serves (an H100 measured gpt2-124m B=16
     * T=1024 bf16 at 446.2 k tokens/s with it against 412.4 k with mma2,
     * BENCHMARKS.md 2026-12-06 17:22 UTC) */
#if defined(PLUMB_HIP)
    if (!v || !*v || !strcmp(v, "auto")) return 0;
#else
    if (!v || !*v || !strcmp(v, "auto")) return 3;
#endif
    return !strcmp(v, "cudnn") ? 1 : !strcmp(v, "cudnn-nd") ? 2 : 0;
}
/* an explicit PLUMB_GPT_ATTN=cudnn that cuDNN cannot serve is an error that
 * says why, not a quiet fall-back to our kernels; under auto, PLUMB_EUNSUPPORTED
 * sends the call on to them */
static int cudnn_refused(struct dev *d, int rc, plumb_err *e)
{
    if (rc != PLUMB_EUNSUPPORTED) return rc;
    char why[sizeof e->msg];
    snprintf(why, sizeof why, "%s", e->msg);
    return gpu_err(e, PLUMB_EDEVICE, "PLUMB_GPT_ATTN=%s: %s", getenv("PLUMB_GPT_ATTN"), why);
}

/* the outcome of a cuDNN call r under cudnn_asked's cu: 1 and *rc the
 * op's result, or 0 where auto hands the call on to our kernels (cuDNN
 * refused the shape; the refusal's message cleared) */
static int cudnn_served(struct dev *d, int cu, int r, int *rc, plumb_err *e)
{
    if (cu != 3 || r != PLUMB_EUNSUPPORTED) {
        *rc = cu != 3 ? cudnn_refused(d, r, e) : r;
        return 1;
    }
    memset(e, 0, sizeof *e);
    return 0;
}

int tg_attention_fwd16_impl(struct dev *d, struct dev_stream *st, const uint16_t *qkv16, uint16_t *out16, float *lse,
                            int B, int T, int NH, int HS, dtype_t rt, plumb_err *e)
{
    const int cu = cudnn_asked(d, rt);
    int r;
    if (cu && cudnn_served(d, cu, attn_cudnn_fwd(d, st, qkv16, out16, lse, B, T, NH, HS, rt, e), &r, e)) return r;
#if defined(PLUMB_ATTN_MMA)
    int kind;
    int rc = mma16_applies(d, B, NH, HS, rt, &kind, e);
    if (rc) return rc;
    const float scale = 1.0f / sqrtf((float)HS);
#if defined(PLUMB_ATTN_MMA2)
    if (kind == ATTN_MMA2) return MMA_DISPATCH(mma2_fwd, d, st, qkv16, out16, lse, B, T, NH, HS, scale, (int)rt, e);
#endif
    return MMA_DISPATCH(mma_fwd, d, st, qkv16, out16, lse, B, T, NH, HS, scale, (int)rt, e);
#else
    (void)d, (void)st, (void)qkv16, (void)out16, (void)lse, (void)B, (void)T, (void)NH, (void)HS, (void)rt, (void)e;
    return PLUMB_EUNSUPPORTED;
#endif
}

int tg_attention_bwd16_impl(struct dev *d, struct dev_stream *st, const uint16_t *qkv16, const uint16_t *out16,
                            const float *lse, const uint16_t *dout16, uint16_t *dqkv16, int B, int T, int NH, int HS,
                            dtype_t rt, plumb_err *e)
{
    const int cu = cudnn_asked(d, rt);
    int r;
    if (cu && cudnn_served(d, cu,
                           attn_cudnn_bwd(d, st, qkv16, out16, lse, dout16, dqkv16, B, T, NH, HS, rt, cu != 2, e), &r,
                           e))
        return r;
#if defined(PLUMB_ATTN_MMA)
    int kind;
    int rc = mma16_applies(d, B, NH, HS, rt, &kind, e);
    if (rc) return rc;
    const float scale = 1.0f / sqrtf((float)HS);
    const size_t rows = (size_t)B * NH * T;
    void *ws;
    if ((rc = tws_get(d, 0, rows * sizeof(float), &ws, e))) return rc;
    float *D = (float *)ws;
    k_flash_bwd_pre<<<gpu_grid(rows, 128 / ROWDOT_G), 128, 0, st->s>>>(NULL, NULL, D, B, T, NH, HS, out16, dout16,
                                                                       (int)rt, rowdot_vec(out16, dout16, HS));
    GPU_CHECK_LAUNCH(d, "k_flash_bwd_pre", e);
#if defined(PLUMB_ATTN_MMA2)
    if (kind == ATTN_MMA2)
        return MMA_DISPATCH(mma2_bwd, d, st, qkv16, dout16, lse, (const float *)D, dqkv16, B, T, NH, HS, scale, (int)rt,
                            e);
#endif
    return MMA_DISPATCH(mma_bwd, d, st, qkv16, dout16, lse, (const float *)D, dqkv16, B, T, NH, HS, scale, (int)rt, e);
#else
    (void)d, (void)st, (void)qkv16, (void)out16, (void)lse, (void)dout16, (void)dqkv16, (void)B, (void)T, (void)NH;
    (void)HS, (void)rt, (void)e;
    return PLUMB_EUNSUPPORTED;
#endif
}
