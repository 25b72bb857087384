/* The GPU transformer ops (dev/train_ops.h, "transformer ops (gpt)"): the
 * table entries with their argument checks, and the small ops written here
 * (embedding, LayerNorm, residual add, AdamW over a buffer with per-tensor
 * decay). The GEMM/classifier and attention families are in
 * train_gpt_gemm.cu and train_gpt_attn.cu (see train_gpt.h).
 *
 * Golden: one thread per output row (or column) evaluates the shared
 * definition of dev/train_gpt_math.h / core/gmath.h, so the bits are the cpu
 * backend's. Fast: a warp (PLUMB_WARP lanes: 32 on NVIDIA, 64 on CDNA) per
 * row with the vendor's fixed butterfly; column sums in fixed 64-row chunks
 * added in chunk order: deterministic, no atomics. */
#include "gpu/train_gpt.h"
#include "gpu/train_gpt_kern.cuh"

#define TPB 256

#define NEED(cond, ...)                                                                                    \
    do {                                                                                                   \
        if (!(cond)) return gpu_err(e, PLUMB_EUSAGE, __VA_ARGS__);                                         \
    } while (0)
#define RT_OK(op)                                                                                          \
    NEED(rt == DT_F32 || rt == DT_BF16 || rt == DT_F16, "%s: %s: rounding type %d is not fp32, bf16 or fp16", \
         d->label, op, (int)rt)
#define ENTER()                                                                                            \
    do {                                                                                                   \
        int rc_ = gpu_enter(d, e);                                                                         \
        if (rc_) return rc_;                                                                               \
    } while (0)

static inline int golden(struct dev *d) { return d->numerics == NUMERICS_GOLDEN; }

/* ---------------- embedding ---------------- */

/* k_enc_fwd and k_enc_fwd4: gpu/train_gpt_kern.cuh */

int tg_encoder_fwd(struct dev *d, dev_stream *s, const float *wte, const float *wpe, const int32_t *tok,
                         float *out, int B, int T, int C, dtype_t rt, plumb_err *e)
{
    NEED(wte && wpe && tok && out, "%s: encoder_fwd: NULL wte, wpe, tok or out", d->label);
    NEED(B > 0 && T > 0 && C > 0, "%s: encoder_fwd: bad shape B=%d T=%d C=%d (expected > 0)", d->label, B, T, C);
    RT_OK("encoder_fwd");
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_GPT_EMBEDDING);
    struct dev_stream *st = gpu_stream(d, s);
    const size_t R = (size_t)B * T;
    if (C % 4 == 0 && R * C / 4 < ((size_t)1 << 31) && !(((uintptr_t)wte | (uintptr_t)wpe | (uintptr_t)out) & 15)) {
        const size_t n4 = R * C / 4;
        k_enc_fwd4<<<gpu_grid(n4, TPB), TPB, 0, st->s>>>((const float4 *)wte, (const float4 *)wpe, tok, (float4 *)out,
                                                         (unsigned)n4, T, (unsigned)(C / 4), (int)rt);
        GPU_CHECK_LAUNCH(d, "k_enc_fwd4", e);
        return PLUMB_OK;
    }
    k_enc_fwd<<<gpu_grid(R * C, TPB), TPB, 0, st->s>>>(wte, wpe, tok, out, R, T, C, (int)rt);
    GPU_CHECK_LAUNCH(d, "k_enc_fwd", e);
    return PLUMB_OK;
}

/* dwpe[t, c] = sum over b ascending of dout[b, t, c] (both modes) */
__global__ void k_enc_dwpe(const float *dout, float *dwpe, int B, int T, int C)
{
    const size_t tot = (size_t)T * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < tot; i += (size_t)gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (int b = 0; b < B; b++) s = s + dout[(size_t)b * tot + i];
        dwpe[i] = s;
    }
}

/* dwte[rows[u], :] += sums[u, :] for u < *n (distinct rows) */
__global__ void k_rows_add(float *dwte, const int64_t *rows, const float *sums, const int64_t *n, size_t cap, int C)
{
    const size_t U = (size_t)*n < cap ? (size_t)*n : cap, tot = U * (size_t)C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < tot; i += (size_t)gridDim.x * blockDim.x) {
        const size_t u = i / (size_t)C, c = i - u * (size_t)C;
        float *o = dwte + (size_t)rows[u] * C + c;
        *o = *o + sums[i];
    }
}

static size_t al256(size_t b) { return (b + 255) / 256 * 256; }

int tg_encoder_bwd(struct dev *d, dev_stream *s, const float *dout, const int32_t *tok, float *dwte, float *dwpe,
                         int B, int T, int C, plumb_err *e)
{
    NEED(dout && tok && dwte && dwpe, "%s: encoder_bwd: NULL dout, tok, dwte or dwpe", d->label);
    NEED(B > 0 && T > 0 && C > 0, "%s: encoder_bwd: bad shape B=%d T=%d C=%d (expected > 0)", d->label, B, T, C);
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_GPT_EMBEDDING);
    struct dev_stream *st = gpu_stream(d, s);
    const size_t n = (size_t)B * T;
    k_enc_dwpe<<<gpu_grid((size_t)T * C, TPB), TPB, 0, st->s>>>(dout, dwpe, B, T, C);
    GPU_CHECK_LAUNCH(d, "k_enc_dwpe", e);
    /* the token rows' sums in embedding_bwd's order: one table at offset 0,
     * each position a sample (slot 3: offset, count, rows, sums) */
    void *ws;
    const size_t o_rows = 256, o_sums = o_rows + al256(n * sizeof(int64_t));
    int rc = tws_get(d, 3, o_sums + n * (size_t)C * sizeof(float), &ws, e);
    if (rc) return rc;
    char *w = (char *)ws;
    int64_t *off = (int64_t *)w, *n_out = off + 1, *rows = (int64_t *)(w + o_rows);
    float *sums = (float *)(w + o_sums);
    GPU_CHECK(d, cudaMemsetAsync(off, 0, 2 * sizeof(int64_t), st->s), e);
    rc = tr_embedding_bwd(d, st, off, (const uint32_t *)tok, dout, (int)n, (int)n, 1, C, rows, sums, n_out, e);
    if (rc) return rc;
    k_rows_add<<<gpu_grid(n * C, TPB), TPB, 0, st->s>>>(dwte, rows, sums, n_out, n, C);
    GPU_CHECK_LAUNCH(d, "k_rows_add", e);
    return PLUMB_OK;
}

/* ---------------- residual ---------------- */

__global__ void k_residual(const float *a, const float *b, float *y, size_t n, int rt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = gg_round(a[i] + b[i], rt);
}

int tg_residual_fwd(struct dev *d, dev_stream *s, const float *a, const float *b, float *y, size_t n, dtype_t rt,
                          plumb_err *e)
{
    NEED((a && b && y) || n == 0, "%s: residual_fwd: NULL a, b or y", d->label);
    RT_OK("residual_fwd");
    if (!n) return PLUMB_OK;
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_GPT_RESIDUAL);
    k_residual<<<gpu_grid(n, TPB), TPB, 0, gpu_stream(d, s)->s>>>(a, b, y, n, (int)rt);
    GPU_CHECK_LAUNCH(d, "k_residual", e);
    return PLUMB_OK;
}

/* ---------------- layernorm ---------------- */

/* golden: one thread per row, gmath.h's glayernorm_row, then the round */
__global__ void k_ln_fwd_gold(const float *x, const float *w, const float *b, float *y, float *mean, float *rstd, int R,
                              int C, float eps, int rt)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= R) return;
    float mu, rs;
    float *yr = y + (size_t)r * C;
    glayernorm_row(x + (size_t)r * C, w, b, yr, C, eps, &mu, &rs);
    for (int i = 0; i < C; i++) yr[i] = gg_round(yr[i], rt);
    if (mean) mean[r] = mu;
    if (rstd) rstd[r] = rs;
}

/* the fast LayerNorm forward: k_ln_fwd_vec where its shape and alignment
 * hold (ln_vec_nq), else k_ln_fwd_fast; a warp a row, TPB / warp rows a block */
static void ln_fwd_launch(cudaStream_t cs, const float *x, const float *w, const float *b, float *y, uint16_t *y16,
                          float *mean, float *rstd, int R, int C, float eps, int rt, const float *ra = nullptr,
                          const uint16_t *rb16 = nullptr, float *rout = nullptr)
{
    const int rows = TPB / PLUMB_WARP;
    const unsigned grid = (unsigned)((R + rows - 1) / rows);
#define LN_VEC_CASE(NQ)                                                                                             \
    case NQ:                                                                                                        \
        k_ln_fwd_vec<NQ><<<grid, TPB, 0, cs>>>(x, w, b, y, y16, mean, rstd, R, C, eps, rt, ra, rb16, rout);      \
        return
    switch (ln_vec_nq(C, x, w, b, y, y16, ra, rb16, rout)) {
        LN_VEC_CASE(1);
        LN_VEC_CASE(2);
        LN_VEC_CASE(3);
        LN_VEC_CASE(4);
        LN_VEC_CASE(5);
        LN_VEC_CASE(6);
        LN_VEC_CASE(7);
        LN_VEC_CASE(8);
    default:
        k_ln_fwd_fast<<<grid, TPB, 0, cs>>>(x, w, b, y, y16, mean, rstd, R, C, eps, rt, ra, rb16, rout);
    }
#undef LN_VEC_CASE
}

int tg_layernorm_fwd(struct dev *d, dev_stream *s, const float *x, const float *w, const float *b, float *y,
                           float *mean, float *rstd, int R, int C, float eps, dtype_t rt, plumb_err *e)
{
    NEED(x && w && b && y, "%s: layernorm_fwd: NULL x, w, b or y", d->label);
    NEED(x != y, "%s: layernorm_fwd: y must not alias x (the backward reads x)", d->label);
    NEED(R > 0 && C > 0, "%s: layernorm_fwd: bad shape R=%d C=%d (expected > 0)", d->label, R, C);
    NEED(eps > 0.0f, "%s: layernorm_fwd: eps %g (expected > 0)", d->label, (double)eps);
    RT_OK("layernorm_fwd");
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_GPT_LAYERNORM);
    struct dev_stream *st = gpu_stream(d, s);
    if (golden(d)) {
        k_ln_fwd_gold<<<(R + 127) / 128, 128, 0, st->s>>>(x, w, b, y, mean, rstd, R, C, eps, (int)rt);
        GPU_CHECK_LAUNCH(d, "k_ln_fwd_gold", e);
    } else {
        ln_fwd_launch(st->s, x, w, b, y, NULL, mean, rstd, R, C, eps, (int)rt);
        GPU_CHECK_LAUNCH(d, "k_ln_fwd", e);
    }
    return PLUMB_OK;
}

/* golden dx: one thread per row (gpt_gold_ln_bwd_row) */
__global__ void k_ln_bwd_gold(const float *x, const float *w, const float *mean, const float *rstd, const float *dy,
                              const float *dres, float *dx, int R, int C, int rt)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= R) return;
    const size_t o = (size_t)r * C;
    gpt_gold_ln_bwd_row(x + o, w, mean[r], rstd[r], dy + o, dres ? dres + o : NULL, dx + o, C, rt);
}

/* golden dw/db: one thread per column, chains over rows ascending from 0 */
__global__ void k_ln_dwdb_gold(const float *x, const float *mean, const float *rstd, const float *dy, float *dw,
                               float *db, int R, int C)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= C) return;
    float aw = 0.0f, ab = 0.0f;
    for (int r = 0; r < R; r++) {
        const float g = dy[(size_t)r * C + i], h = (x[(size_t)r * C + i] - mean[r]) * rstd[r];
        aw = fmaf(g, h, aw);
        ab = ab + g;
    }
    dw[i] = aw;
    db[i] = ab;
}

/* k_ln_dwdb_part<V> with dy's type (ty: DT_F32 for dy, else dy16's) as a
 * compile-time constant, so its loads carry no conversion branches */
template <int V>
static void ln_dwdb_part_launch(cudaStream_t s, dim3 g, int ty, const float *x, const float *mean, const float *rstd,
                                const float *dy, const uint16_t *dy16, int t16, float *part, int R, int C, int np)
{
    if (ty == DT_BF16) k_ln_dwdb_part<V, DT_BF16><<<g, 128, 0, s>>>(x, mean, rstd, dy, dy16, t16, part, R, C, np);
    else if (ty == DT_F16) k_ln_dwdb_part<V, DT_F16><<<g, 128, 0, s>>>(x, mean, rstd, dy, dy16, t16, part, R, C, np);
    else k_ln_dwdb_part<V, DT_F32><<<g, 128, 0, s>>>(x, mean, rstd, dy, dy16, t16, part, R, C, np);
}

/* k_ln_bwd_chunk<nq> over nc chunks (C = 4 nq warp, so its shared memory
 * is set by nq); PLUMB_EUNSUPPORTED where that passes the device's limit
 * (the caller's three passes then). Past 48 KiB the kernel is allowed its
 * dynamic shared memory each call: the setting is the current device's, and
 * a graph replay makes no host calls. */
static int ln_chunk_smem_ok(struct dev *d, size_t smem, plumb_err *e)
{
#if defined(PLUMB_HIP)
    (void)d, (void)e;
    return smem <= 64 * 1024 ? PLUMB_OK : PLUMB_EUNSUPPORTED; /* gfx90a: 64 KiB of LDS a workgroup */
#else
    if (smem <= 48 * 1024) return PLUMB_OK;
    int dev = 0, optin = 0;
    GPU_CHECK(d, cudaGetDevice(&dev), e);
    GPU_CHECK(d, cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev), e);
    return smem <= (size_t)optin ? PLUMB_OK : PLUMB_EUNSUPPORTED;
#endif
}
template <int NQ>
static int ln_chunk_run(struct dev *d, struct dev_stream *st, size_t smem, const float *x, const float *w,
                        const float *mean, const float *rstd, const float *dy, const uint16_t *dy16, int t16,
                        const float *dres, float *dx, int R, int C, int rt, uint16_t *dx16, float *part, int np, int nc,
                        plumb_err *e)
{
#if !defined(PLUMB_HIP)
    if (smem > 48 * 1024)
        GPU_CHECK(d, cudaFuncSetAttribute(k_ln_bwd_chunk<NQ>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
                  e);
#endif
    k_ln_bwd_chunk<NQ><<<nc, LNF_TPB, smem, st->s>>>(x, w, mean, rstd, dy, dy16, t16, dres, dx, R, C, rt, dx16, part,
                                                     np);
    GPU_CHECK_LAUNCH(d, "k_ln_bwd_chunk", e);
    return PLUMB_OK;
}
static int ln_chunk_launch(struct dev *d, struct dev_stream *st, int nq, const float *x, const float *w,
                           const float *mean, const float *rstd, const float *dy, const uint16_t *dy16, int t16,
                           const float *dres, float *dx, int R, int C, int rt, uint16_t *dx16, float *part, int np,
                           int nc, plumb_err *e)
{
    const size_t smem = lnf_smem_bytes(C);
    int rc = ln_chunk_smem_ok(d, smem, e);
    if (rc) return rc;
#define LNF_CASE(NQ)                                                                                                 \
    case NQ:                                                                                                         \
        return ln_chunk_run<NQ>(d, st, smem, x, w, mean, rstd, dy, dy16, t16, dres, dx, R, C, rt, dx16, part, np, nc, \
                                e)
    switch (nq) {
        LNF_CASE(1);
        LNF_CASE(2);
        LNF_CASE(3);
        LNF_CASE(4);
        LNF_CASE(5);
        LNF_CASE(6);
        LNF_CASE(7);
        LNF_CASE(8);
    default:
        return gpu_err(e, PLUMB_EINTERNAL, "%s: k_ln_bwd_chunk: %d quads a lane", d->label, nq);
    }
#undef LNF_CASE
}

/* the three passes of the fast backward: dw/db (and dsum) from fixed 64-row
 * chunks into part [nc, np C] (np 3: dsum's from dx16), and dx a warp per
 * row (nq: ln_bwd_vec_nq's quads a lane, 0 for the general kernel) */
static int ln_bwd_passes(struct dev *d, struct dev_stream *st, int nq, const float *x, const float *w,
                         const float *mean, const float *rstd, const float *dy, const uint16_t *dy16, int t16,
                         const float *dres, float *dx, uint16_t *dx16, float *part, int R, int C, int np, int nc,
                         dtype_t rt, plumb_err *e)
{
    int rc;
    /* dw/db first: they read dy and x, which dx never overwrites (dx16 may);
     * a column a thread, or four where the loads allow
     * (PLUMB_GPT_LN_PART_VEC=1: the same bits, but 39.9 us a call against
     * the one-column form's 33.3 for gpt2-124m's 16384 x 768, and the step
     * 0.6% slower: CUPTI and plumb bench on an H100, 2026-12-07) */
    int vec4 = 0;
    if ((rc = gpu_env_switch(d, "PLUMB_GPT_LN_PART_VEC", "a column a thread", "four columns a thread where aligned",
                             &vec4, e, 0)))
        return rc;
    const int ty = dy16 ? t16 : DT_F32;
    if (vec4 && ln_dwdb_vec(C, x, dy, dy16))
        ln_dwdb_part_launch<4>(st->s, dim3((unsigned)((C / 4 + 127) / 128), (unsigned)nc), ty, x, mean, rstd, dy, dy16,
                               t16, part, R, C, np);
    else
        ln_dwdb_part_launch<1>(st->s, dim3((unsigned)((C + 127) / 128), (unsigned)nc), ty, x, mean, rstd, dy, dy16, t16,
                               part, R, C, np);
    GPU_CHECK_LAUNCH(d, "k_ln_dwdb_part", e);
    const int rows = TPB / PLUMB_WARP;
    const unsigned grid = (unsigned)((R + rows - 1) / rows);
#define LN_BWD_CASE(NQ)                                                                                             \
    case NQ:                                                                                                        \
        k_ln_bwd_fast<NQ><<<grid, TPB, 0, st->s>>>(x, w, mean, rstd, dy, dy16, t16, dres, dx, R, C, (int)rt, dx16); \
        break
    switch (nq) {
        LN_BWD_CASE(1);
        LN_BWD_CASE(2);
        LN_BWD_CASE(3);
        LN_BWD_CASE(4);
        LN_BWD_CASE(5);
        LN_BWD_CASE(6);
        LN_BWD_CASE(7);
        LN_BWD_CASE(8);
    default:
        k_ln_bwd_fast<0><<<grid, TPB, 0, st->s>>>(x, w, mean, rstd, dy, dy16, t16, dres, dx, R, C, (int)rt, dx16);
    }
#undef LN_BWD_CASE
    GPU_CHECK_LAUNCH(d, "k_ln_bwd", e);
    /* dsum: dx16's column sums in the same 64-row chunks (k_colsum_part, the
     * third part of [nc, 3C]), a pass of its own after dx: dx16 may alias
     * dy16, which k_ln_dwdb_part read before. (Summing dx, dw, db and dsum
     * in one pass, a warp taking 8 rows of a 32-row chunk so that the sums
     * stay in registers, took 157 us a call for gpt2-124m's 16384 x 768 on
     * an H100 against 76 + 34 for k_ln_bwd_fast<6> and k_ln_dwdb_part: with
     * a warp's rows in turn and 8 warps an SM, the loads did not overlap;
     * kprof, 2026-12-06 17:22. k_ln_bwd_chunk is the form with the sums in
     * shared memory and two chunks an SM.) */
    if (np == 3) {
        colsum_part_launch(st->s, NULL, dx16, R, C, nc, part + 2 * (size_t)C, NULL, t16, 3 * (size_t)C);
        GPU_CHECK_LAUNCH(d, "k_colsum_part", e);
    }
    return PLUMB_OK;
}

/* the fast backward: dw/db (and dsum) from fixed 64-row chunks added in a
 * fixed order (gpu/train_gpt_kern.cuh), and dx a warp per row, in one kernel
 * (PLUMB_GPT_LN_FUSED=1, where it applies) or in three passes; dy as fp32,
 * or (dy16 not NULL) as t16's 16-bit values */
static int ln_bwd_fast(struct dev *d, struct dev_stream *st, const char *op, const float *x, const float *w,
                       const float *mean, const float *rstd, const float *dy, const uint16_t *dy16, int t16,
                       const float *dres, float *dx, uint16_t *dx16, float *dsum, float *dw, float *db, int R, int C,
                       dtype_t rt, plumb_err *e)
{
    const int nc = (R + LN_ROWS - 1) / LN_ROWS, np = dsum ? 3 : 2;
    NEED(nc <= 65535, "%s: %s: %d rows exceed %d", d->label, op, R, 65535 * LN_ROWS);
    void *ws;
    int rc = tws_get(d, 0, (size_t)nc * np * C * sizeof(float), &ws, e);
    if (rc) return rc;
    float *part = (float *)ws;
    /* PLUMB_GPT_LN_FUSED=1: dx, the dw/db parts and dsum's in one kernel a
     * 64-row chunk (k_ln_bwd_chunk, the same bits), where the row fits in
     * registers and dsum comes from dx16 */
    int fused = 0;
    if ((rc = gpu_env_switch(d, "PLUMB_GPT_LN_FUSED", "dx, dw/db parts and dsum in three passes",
                             "dx, dw/db parts and dsum in one pass a 64-row chunk", &fused, e, 1)))
        return rc;
    const int nq = ln_bwd_vec_nq(C, x, w, dy, dy16, dres, dx, dx16);
    rc = PLUMB_EUNSUPPORTED;
    if (fused && nq && (!dsum || dx16))
        rc = ln_chunk_launch(d, st, nq, x, w, mean, rstd, dy, dy16, t16, dres, dx, R, C, (int)rt, dx16, part, np, nc,
                             e);
    if (rc == PLUMB_EUNSUPPORTED)
        rc = ln_bwd_passes(d, st, nq, x, w, mean, rstd, dy, dy16, t16, dres, dx, dx16, part, R, C, np, nc, rt, e);
    if (rc) return rc;
    k_ln_dwdb_final<<<ln_dwdb_final_grid(C, np), LN_FCOLS * LN_FRUNS, 0, st->s>>>(part, nc, C, dw, db, dsum);
    GPU_CHECK_LAUNCH(d, "k_ln_dwdb_final", e);
    return PLUMB_OK;
}

int tg_layernorm_bwd(struct dev *d, dev_stream *s, const float *x, const float *w, const float *mean,
                           const float *rstd, const float *dy, const float *dres, float *dx, float *dw, float *db, int R,
                           int C, dtype_t rt, plumb_err *e)
{
    NEED(x && w && mean && rstd && dy && dx && dw && db, "%s: layernorm_bwd: NULL argument", d->label);
    NEED(dx != dy && dx != x, "%s: layernorm_bwd: dx must not alias x or dy (it may alias dres)", d->label);
    NEED(R > 0 && C > 0, "%s: layernorm_bwd: bad shape R=%d C=%d (expected > 0)", d->label, R, C);
    RT_OK("layernorm_bwd");
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_GPT_LAYERNORM);
    struct dev_stream *st = gpu_stream(d, s);
    /* dw/db first: they read dy and x, which dx never overwrites */
    if (golden(d)) {
        k_ln_dwdb_gold<<<(C + 127) / 128, 128, 0, st->s>>>(x, mean, rstd, dy, dw, db, R, C);
        GPU_CHECK_LAUNCH(d, "k_ln_dwdb_gold", e);
        k_ln_bwd_gold<<<(R + 127) / 128, 128, 0, st->s>>>(x, w, mean, rstd, dy, dres, dx, R, C, (int)rt);
        GPU_CHECK_LAUNCH(d, "k_ln_bwd_gold", e);
        return PLUMB_OK;
    }
    return ln_bwd_fast(d, st, "layernorm_bwd", x, w, mean, rstd, dy, NULL, 0, dres, dx, NULL, NULL, dw, db, R, C, rt,
                       e);
}

/* ---------------- GEMM, classifier, attention (dispatch) ---------------- */

int tg_matmul_fwd(struct dev *d, dev_stream *s, const float *x, const float *w, const float *bias, float *y,
                        float *pre, int B, int K, int N, int gelu, dtype_t rt, plumb_err *e)
{
    NEED(x && w && y, "%s: matmul_fwd: NULL x, w or y", d->label);
    NEED(!gelu || (pre && pre != y), "%s: matmul_fwd: gelu needs pre, distinct from y", d->label);
    NEED(B > 0 && K > 0 && N > 0, "%s: matmul_fwd: bad shape B=%d K=%d N=%d (expected > 0)", d->label, B, K, N);
    RT_OK("matmul_fwd");
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_GPT_MATMUL_FWD);
    return tg_matmul_fwd_impl(d, gpu_stream(d, s), x, w, bias, y, pre, B, K, N, gelu, rt, e);
}

int tg_matmul_bwd(struct dev *d, dev_stream *s, const float *x, const float *w, const float *dy,
                        const float *pre_in, float *dx, float *dw, float *dbias, int B, int K, int N, dtype_t rt,
                        plumb_err *e)
{
    NEED(x && w && dy && dw, "%s: matmul_bwd: NULL x, w, dy or dw", d->label);
    NEED(B > 0 && K > 0 && N > 0, "%s: matmul_bwd: bad shape B=%d K=%d N=%d (expected > 0)", d->label, B, K, N);
    RT_OK("matmul_bwd");
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_GPT_MATMUL_BWD);
    return tg_matmul_bwd_impl(d, gpu_stream(d, s), x, w, dy, pre_in, dx, dw, dbias, B, K, N, rt, e);
}

static int attn_args(struct dev *d, const char *op, int B, int T, int NH, int HS, plumb_err *e)
{
    NEED(B > 0 && T > 0 && NH > 0 && HS > 0, "%s: %s: bad shape B=%d T=%d NH=%d HS=%d (expected > 0)", d->label, op, B,
         T, NH, HS);
    NEED(HS <= 128, "%s: %s: head width %d (expected at most 128: the flash tiles' limit)", d->label, op, HS);
    NEED((double)B * T * NH * HS * 3 < 9.0e18, "%s: %s: tensor too large", d->label, op);
    return PLUMB_OK;
}

int tg_attention_fwd(struct dev *d, dev_stream *s, const float *qkv, float *out, float *lse, int B, int T,
                           int NH, int HS, dtype_t rt, plumb_err *e)
{
    NEED(qkv && out && lse, "%s: attention_fwd: NULL qkv, out or lse", d->label);
    int rc = attn_args(d, "attention_fwd", B, T, NH, HS, e);
    if (rc) return rc;
    RT_OK("attention_fwd");
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_GPT_ATTN_FWD);
    return tg_attention_fwd_impl(d, gpu_stream(d, s), qkv, out, lse, B, T, NH, HS, rt, e);
}

int tg_attention_bwd(struct dev *d, dev_stream *s, const float *qkv, const float *out, const float *lse,
                           const float *dout, float *dqkv, int B, int T, int NH, int HS, dtype_t rt, plumb_err *e)
{
    NEED(qkv && out && lse && dout && dqkv, "%s: attention_bwd: NULL argument", d->label);
    NEED(dqkv != qkv, "%s: attention_bwd: dqkv must not alias qkv", d->label);
    int rc = attn_args(d, "attention_bwd", B, T, NH, HS, e);
    if (rc) return rc;
    RT_OK("attention_bwd");
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_GPT_ATTN_BWD);
    return tg_attention_bwd_impl(d, gpu_stream(d, s), qkv, out, lse, dout, dqkv, B, T, NH, HS, rt, e);
}

int tg_classifier_fwd_bwd(struct dev *d, dev_stream *s, const float *x, const float *wte, const int32_t *tgt,
                                int R, int C, int V, float grad_scale, float *losses, double *sum_count, float *dx,
                                float *dwte, dtype_t rt, plumb_err *e)
{
    NEED(x && wte && tgt, "%s: classifier_fwd_bwd: NULL x, wte or tgt", d->label);
    NEED(!dx || dwte, "%s: classifier_fwd_bwd: dx needs dwte", d->label);
    NEED(R > 0 && C > 0 && V > 0, "%s: classifier_fwd_bwd: bad shape R=%d C=%d V=%d (expected > 0)", d->label, R, C, V);
    RT_OK("classifier_fwd_bwd");
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_GPT_CLASSIFIER);
    const struct cls_io io = {x, wte, NULL, NULL, 0, dx, NULL};
    return tg_classifier(d, gpu_stream(d, s), &io, tgt, R, C, V, grad_scale, losses, sum_count, dwte, rt, e);
}

int tg_classifier_fwd_bwd16(struct dev *d, dev_stream *s, const uint16_t *x16, const uint16_t *wte16, int rows16,
                            const int32_t *tgt, int R, int C, int V, float grad_scale, float *losses, double *sum_count,
                            uint16_t *dx16, float *dwte, dtype_t rt, plumb_err *e)
{
    NEED(x16 && wte16 && tgt, "%s: classifier_fwd_bwd16: NULL x16, wte16 or tgt", d->label);
    NEED(!dx16 || dwte, "%s: classifier_fwd_bwd16: dx16 needs dwte", d->label);
    NEED(R > 0 && C > 0 && V > 0 && rows16 >= V,
         "%s: classifier_fwd_bwd16: bad shape R=%d C=%d V=%d, wte16 of %d rows (expected > 0, rows >= V)", d->label, R,
         C, V, rows16);
    FAST16("classifier_fwd_bwd16");
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_GPT_CLASSIFIER);
    const struct cls_io io = {NULL, NULL, x16, wte16, rows16, NULL, dx16};
    return tg_classifier(d, gpu_stream(d, s), &io, tgt, R, C, V, grad_scale, losses, sum_count, dwte, rt, e);
}

/* ---------------- the 16-bit activation ops (train_ops.h "gpt with 16-bit activations") ----------------
 * Fast numerics only (the model runs its 16-bit pipeline in fast mode); the
 * same kernels as the fp32 entries above with 16-bit loads and stores. */



int tg_residual_fwd16(struct dev *d, dev_stream *s, const float *a, const uint16_t *b16, float *y, size_t n,
                      dtype_t rt, plumb_err *e)
{
    NEED((a && b16 && y) || n == 0, "%s: residual_fwd16: NULL a, b16 or y", d->label);
    FAST16("residual_fwd16");
    if (!n) return PLUMB_OK;
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_GPT_RESIDUAL);
    cudaStream_t cs = gpu_stream(d, s)->s;
    if (!(((uintptr_t)a | (uintptr_t)b16 | (uintptr_t)y) & 15))
        k_residual16<8><<<gpu_grid(n / 8 ? n / 8 : 1, TPB), TPB, 0, cs>>>(a, b16, y, n, (int)rt);
    else
        k_residual16<1><<<gpu_grid(n, TPB), TPB, 0, cs>>>(a, b16, y, n, (int)rt);
    GPU_CHECK_LAUNCH(d, "k_residual16", e);
    return PLUMB_OK;
}

/* layernorm_fwd16 of x, or (b16 not NULL) of res = a + b16 formed on the way
 * (residual_layernorm_fwd16): ln_fwd_launch either way */
static int ln_fwd16(struct dev *d, dev_stream *s, const char *op, const float *x, const float *a, const uint16_t *b16,
                    float *res, const float *w, const float *b, uint16_t *y16, float *mean, float *rstd, int R, int C,
                    float eps, dtype_t rt, plumb_err *e)
{
    NEED((b16 ? a && res : x != NULL) && w && b && y16, "%s: %s: NULL argument", d->label, op);
    NEED(R > 0 && C > 0, "%s: %s: bad shape R=%d C=%d (expected > 0)", d->label, op, R, C);
    NEED(eps > 0.0f, "%s: %s: eps %g (expected > 0)", d->label, op, (double)eps);
    FAST16(op);
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_GPT_LAYERNORM);
    ln_fwd_launch(gpu_stream(d, s)->s, x, w, b, NULL, y16, mean, rstd, R, C, eps, (int)rt, a, b16, res);
    GPU_CHECK_LAUNCH(d, "k_ln_fwd", e);
    return PLUMB_OK;
}

int tg_layernorm_fwd16(struct dev *d, dev_stream *s, const float *x, const float *w, const float *b, uint16_t *y16,
                       float *mean, float *rstd, int R, int C, float eps, dtype_t rt, plumb_err *e)
{
    return ln_fwd16(d, s, "layernorm_fwd16", x, NULL, NULL, NULL, w, b, y16, mean, rstd, R, C, eps, rt, e);
}

int tg_layernorm_bwd16(struct dev *d, dev_stream *s, const float *x, const float *w, const float *mean,
                       const float *rstd, const uint16_t *dy16, const float *dres, float *dx, uint16_t *dx16,
                       float *dsum, float *dw, float *db, int R, int C, dtype_t rt, plumb_err *e)
{
    NEED(x && w && mean && rstd && dy16 && dx && dw && db, "%s: layernorm_bwd16: NULL argument", d->label);
    NEED(!dsum || dx16, "%s: layernorm_bwd16: dsum (the column sums of dx16) needs dx16", d->label);
    NEED(dx != x, "%s: layernorm_bwd16: dx must not alias x (it may alias dres)", d->label);
    NEED(R > 0 && C > 0, "%s: layernorm_bwd16: bad shape R=%d C=%d (expected > 0)", d->label, R, C);
    FAST16("layernorm_bwd16");
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_GPT_LAYERNORM);
    /* dx fp32 unrounded (the residual stream's gradient): rounding type fp32 */
    return ln_bwd_fast(d, gpu_stream(d, s), "layernorm_bwd16", x, w, mean, rstd, NULL, dy16, (int)rt, dres, dx, dx16,
                       dsum, dw, db, R, C, DT_F32, e);
}

int tg_residual_layernorm_fwd16(struct dev *d, dev_stream *s, const float *a, const uint16_t *b16, float *res,
                                const float *w, const float *b, uint16_t *y16, float *mean, float *rstd, int R, int C,
                                float eps, dtype_t rt, plumb_err *e)
{
    return ln_fwd16(d, s, "residual_layernorm_fwd16", NULL, a, b16, res, w, b, y16, mean, rstd, R, C, eps, rt, e);
}

int tg_matmul_fwd16(struct dev *d, dev_stream *s, const uint16_t *x16, const uint16_t *w16, const uint16_t *bias16,
                    uint16_t *y16, uint16_t *pre16, int B, int K, int N, int gelu, dtype_t rt, plumb_err *e)
{
    NEED(x16 && w16 && y16, "%s: matmul_fwd16: NULL x16, w16 or y16", d->label);
    NEED(!gelu || (pre16 && pre16 != y16), "%s: matmul_fwd16: gelu needs pre16, distinct from y16", d->label);
    NEED(B > 0 && K > 0 && N > 0, "%s: matmul_fwd16: bad shape B=%d K=%d N=%d (expected > 0)", d->label, B, K, N);
    FAST16("matmul_fwd16");
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_GPT_MATMUL_FWD);
    return tg_matmul_fwd16_impl(d, gpu_stream(d, s), x16, w16, bias16, y16, pre16, B, K, N, gelu, rt, e);
}

int tg_matmul_bwd16(struct dev *d, dev_stream *s, const uint16_t *x16, const uint16_t *w16, const uint16_t *dy16,
                    const uint16_t *pre16_in, uint16_t *dx16, float *dw, float *dbias, int B, int K, int N, dtype_t rt,
                    plumb_err *e)
{
    NEED(x16 && w16 && dy16 && dw, "%s: matmul_bwd16: NULL x16, w16, dy16 or dw", d->label);
    NEED(B > 0 && K > 0 && N > 0, "%s: matmul_bwd16: bad shape B=%d K=%d N=%d (expected > 0)", d->label, B, K, N);
    FAST16("matmul_bwd16");
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_GPT_MATMUL_BWD);
    return tg_matmul_bwd16_impl(d, gpu_stream(d, s), x16, w16, dy16, pre16_in, dx16, dw, dbias, B, K, N, rt, e);
}

/* Attention from and to 16-bit tensors: the mma kernels (the default for
 * 16-bit heads up to 64 wide) read and write them themselves
 * (tg_attention_*16_impl); the other kinds (tc, mma2, scalar, or a wider
 * head) read fp32, so the 16-bit tensors are widened into fp32 stand-ins
 * (slot 4: qkv, out, dout; slot 5: the fp32 result) and the result narrowed:
 * the same values, so the same bits. */
int tg_attention_fwd16(struct dev *d, dev_stream *s, const uint16_t *qkv16, uint16_t *out16, float *lse, int B, int T,
                       int NH, int HS, dtype_t rt, plumb_err *e)
{
    NEED(qkv16 && out16 && lse, "%s: attention_fwd16: NULL qkv16, out16 or lse", d->label);
    int rc = attn_args(d, "attention_fwd16", B, T, NH, HS, e);
    if (rc) return rc;
    FAST16("attention_fwd16");
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_GPT_ATTN_FWD);
    struct dev_stream *st = gpu_stream(d, s);
    if ((rc = tg_attention_fwd16_impl(d, st, qkv16, out16, lse, B, T, NH, HS, rt, e)) != PLUMB_EUNSUPPORTED) return rc;
    const size_t n = (size_t)B * T * NH * HS;
    void *w4, *w5;
    if ((rc = tws_get(d, 4, 3 * n * sizeof(float), &w4, e)) || (rc = tws_get(d, 5, n * sizeof(float), &w5, e)))
        return rc;
    float *qkv = (float *)w4, *out = (float *)w5;
    if ((rc = tg_widen16(d, st, qkv16, qkv, 3 * n, (int)rt, e)) ||
        (rc = tg_attention_fwd_impl(d, st, qkv, out, lse, B, T, NH, HS, rt, e)))
        return rc;
    return tg_narrow16(d, st, out, out16, n, (int)rt, e);
}

int tg_attention_bwd16(struct dev *d, dev_stream *s, const uint16_t *qkv16, const uint16_t *out16, const float *lse,
                       const uint16_t *dout16, uint16_t *dqkv16, int B, int T, int NH, int HS, dtype_t rt,
                       plumb_err *e)
{
    NEED(qkv16 && out16 && lse && dout16 && dqkv16, "%s: attention_bwd16: NULL argument", d->label);
    NEED(dqkv16 != qkv16, "%s: attention_bwd16: dqkv16 must not alias qkv16", d->label);
    int rc = attn_args(d, "attention_bwd16", B, T, NH, HS, e);
    if (rc) return rc;
    FAST16("attention_bwd16");
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_GPT_ATTN_BWD);
    struct dev_stream *st = gpu_stream(d, s);
    if ((rc = tg_attention_bwd16_impl(d, st, qkv16, out16, lse, dout16, dqkv16, B, T, NH, HS, rt, e)) !=
        PLUMB_EUNSUPPORTED)
        return rc;
    const size_t n = (size_t)B * T * NH * HS;
    void *w4, *w5;
    if ((rc = tws_get(d, 4, 5 * n * sizeof(float), &w4, e)) || (rc = tws_get(d, 5, 3 * n * sizeof(float), &w5, e)))
        return rc;
    float *qkv = (float *)w4, *out = qkv + 3 * n, *dout = out + n, *dqkv = (float *)w5;
    if ((rc = tg_widen16(d, st, qkv16, qkv, 3 * n, (int)rt, e)) || (rc = tg_widen16(d, st, out16, out, n, (int)rt, e)) ||
        (rc = tg_widen16(d, st, dout16, dout, n, (int)rt, e)) ||
        (rc = tg_attention_bwd_impl(d, st, qkv, out, lse, dout, dqkv, B, T, NH, HS, rt, e)))
        return rc;
    return tg_narrow16(d, st, dqkv, dqkv16, 3 * n, (int)rt, e);
}

/* ---------------- AdamW with per-tensor decay ---------------- */

/* the weight decay of element i: wd inside one of the nr ranges, else 0
 * (binary search over the range starts; the list is small and cached) */
__device__ static inline float decay_of(size_t i, const int64_t *dec, int nr, float wd)
{
    int lo = 0, hi = nr - 1, j = -1;
    while (lo <= hi) {
        const int mid = (lo + hi) / 2;
        if ((size_t)dec[2 * mid] <= i) {
            j = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return j >= 0 && i < (size_t)dec[2 * j + 1] ? wd : 0.0f;
}

__global__ void k_adamw_masked(float *w, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
                               float eps, float wd, float bc1, float bc2, float gscale, const int64_t *dec, int nr)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        gpt_adamw_one(w + i, g[i], m + i, v + i, lr, b1, b2, eps, decay_of(i, dec, nr, wd), bc1, bc2, gscale);
}

/* sgd_momentum's element (train_ops.cu's k_sgd_momentum) with its range's decay */
__global__ void k_sgd_momentum_masked(float *w, const float *g, float *buf, size_t n, float lr, float wd, float mu,
                                      int first, const int64_t *dec, int nr)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float wdi = decay_of(i, dec, nr, wd);
        const float dd = wdi == 0.0f ? g[i] : fmaf(wdi, w[i], g[i]);
        const float b = first ? dd : fmaf(mu, buf[i], dd);
        buf[i] = b;
        w[i] = fmaf(-lr, b, w[i]);
    }
}

int tg_sgd_momentum_masked(struct dev *d, dev_stream *s, float *w, const float *g, float *buf, size_t n, float lr,
                           float wd, float mu, int first, const int64_t *dec, int nr, plumb_err *e)
{
    NEED((w && g && buf) || n == 0, "%s: sgd_momentum_masked: NULL w, g or buf", d->label);
    NEED(nr >= 0 && (dec || nr == 0), "%s: sgd_momentum_masked: %d decay ranges without a range list", d->label, nr);
    if (!n) return PLUMB_OK;
    ENTER();
    k_sgd_momentum_masked<<<gpu_grid(n, TPB), TPB, 0, gpu_stream(d, s)->s>>>(w, g, buf, n, lr, wd, mu, first, dec, nr);
    GPU_CHECK_LAUNCH(d, "k_sgd_momentum_masked", e);
    return PLUMB_OK;
}

int tg_adamw_masked(struct dev *d, dev_stream *s, float *w, const float *g, float *m, float *v, size_t n,
                          float lr, float b1, float b2, float eps, float wd, float bc1, float bc2, float gscale,
                          const int64_t *dec, int nr, plumb_err *e)
{
    NEED((w && g && m && v) || n == 0, "%s: adamw_masked: NULL w, g, m or v", d->label);
    NEED(nr >= 0 && (dec || nr == 0), "%s: adamw_masked: %d decay ranges without a range list", d->label, nr);
    NEED(bc1 > 0.0f && bc1 <= 1.0f && bc2 > 0.0f && bc2 <= 1.0f,
         "%s: adamw_masked: bias corrections bc1=%g bc2=%g (expected in (0,1])", d->label, (double)bc1, (double)bc2);
    if (!n) return PLUMB_OK;
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_GPT_ADAMW);
    k_adamw_masked<<<gpu_grid(n, TPB), TPB, 0, gpu_stream(d, s)->s>>>(w, g, m, v, n, lr, b1, b2, eps, wd, bc1, bc2,
                                                                      gscale, dec, nr);
    GPU_CHECK_LAUNCH(d, "k_adamw_masked", e);
    return PLUMB_OK;
}

