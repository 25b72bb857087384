/* GEMM + bias + tanh-GELU (train_ops.h matmul_fwd / matmul_bwd) and the
 * tied classifier with softmax cross-entropy (classifier_fwd_bwd) on the GPU.
 *
 * Golden: the linear layers' golden kernels (train_linear.cu: one fmaf chain
 * per output in the contracted index's order) give the GEMM, then the GELU
 * pass evaluates gmath.h's ggeluf / ggelu_gradf; the classifier runs one
 * thread per logit / gradient element with the chains of train_ops.h and
 * one thread per row for the shared cross-entropy row (dev/train_gpt_math.h).
 *
 * Fast (CUDA): cuBLASLt through lt_matmul.cu with the bias in the epilogue;
 * the GELU after the GEMM from the rounded pre-activation (k_round_gelu) and
 * gelu' after the dx GEMM (k_dgelu), since cuBLASLt's GELU_AUX and DGELU
 * epilogues are not the tanh form's bits (see tg_matmul_fwd_impl). 16-bit
 * compute converts the operands to bf16/fp16 copies (exact: they hold rt
 * values) for native tensor-core GEMMs with fp32 accumulation and output;
 * the reduction scheme is NONE and the algorithm pinned per shape, so
 * results repeat. dbias is a fixed-chunk column sum. Where cuBLASLt has no
 * algorithm (and on HIP) the plugin's GEMM (blas_gemm) plus our own
 * epilogue kernels.
 * The classifier runs over row chunks whose stored logits fit
 * XENT_CHUNK_BYTES (never an unbounded batch's): logits GEMM, a row kernel (block max and sum,
 * loss, gradient rounded and stored in place or as its 16-bit copy; with
 * 16-bit compute on CUDA the GEMM writes 16-bit logits and the gradient
 * overwrites them, PLUMB_GPT_XENT16 below), dx
 * GEMM, and dwte accumulated over the chunks in ascending order by the
 * GEMM's beta = 1. */
#include "gpu/train_gpt.h"
#include "gpu/train_gpt_kern.cuh"
#include <stdlib.h>
#include <string.h>

#define TPB 256

static inline int golden(struct dev *d) { return d->numerics == NUMERICS_GOLDEN; }
static size_t al256(size_t b) { return (b + 255) / 256 * 256; }

/* ---------------- elementwise: GELU, rounding, 16-bit copies ---------------- */

/* y = round(gelu(pre)) */
__global__ void k_gelu(const float *pre, float *y, size_t n, int gold, int rt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = gg_round(gold ? ggeluf(pre[i]) : fast_gelu(pre[i]), rt);
}
/* after the GELU_AUX epilogue: pre and y rounded to rt (y may be NULL) */
__global__ void k_round2(float *pre, float *y, size_t n, int rt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        pre[i] = gg_round(pre[i], rt);
        if (y) y[i] = gg_round(y[i], rt);
    }
}
/* dx = round(dx * gelu'(pre)) */
__global__ void k_dgelu(float *dx, const float *pre, size_t n, int gold, int rt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dx[i] = gg_round(dx[i] * (gold ? ggelu_gradf(pre[i]) : fast_gelu_grad(pre[i])), rt);
}
/* after the BIAS epilogue of a GELU layer: pre rounded to rt in place, then
 * y = round(gelu(pre)) from the rounded value (one pass: k_round2 then k_gelu
 * read and wrote pre twice) */
__global__ void k_round_gelu(float *pre, float *y, size_t n, int rt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float p = gg_round(pre[i], rt);
        pre[i] = p;
        y[i] = gg_round(fast_gelu(p), rt);
    }
}
__global__ void k_to16g(const float *x, uint16_t *y, size_t n, int rt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = rt == DT_F16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
}
/* the same, 4 values a thread: float4 loads, one 8-byte store (x 16-byte and
 * y 8-byte aligned); the n % 4 tail by the first block's first threads */
__global__ void k_to16g4(const float4 *x, uint2 *y, size_t n4, const float *xt, uint16_t *yt, int nt, int rt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
        const float4 a = x[i];
        y[i] = to16x4_of(a.x, a.y, a.z, a.w, rt);
    }
    if (blockIdx.x == 0 && (int)threadIdx.x < nt) yt[threadIdx.x] = to16_of(xt[threadIdx.x], rt);
}

static int launch_round2(struct dev *d, struct dev_stream *st, float *a, float *b, size_t n, int rt, plumb_err *e)
{
    if (rt == DT_F32) return PLUMB_OK;
    k_round2<<<gpu_grid(n, TPB), TPB, 0, st->s>>>(a, b, n, rt);
    GPU_CHECK_LAUNCH(d, "k_round2", e);
    return PLUMB_OK;
}
static int to16(struct dev *d, struct dev_stream *st, const float *x, size_t n, uint16_t *y, int rt, plumb_err *e)
{
    if (!((uintptr_t)x % 16) && !((uintptr_t)y % 8)) {
        const size_t n4 = n / 4;
        k_to16g4<<<gpu_grid(n4, TPB), TPB, 0, st->s>>>((const float4 *)x, (uint2 *)y, n4, x + 4 * n4, y + 4 * n4,
                                                         (int)(n - 4 * n4), rt);
        GPU_CHECK_LAUNCH(d, "k_to16g4", e);
        return PLUMB_OK;
    }
    k_to16g<<<gpu_grid(n, TPB), TPB, 0, st->s>>>(x, y, n, rt);
    GPU_CHECK_LAUNCH(d, "k_to16g", e);
    return PLUMB_OK;
}

/* ---------------- column sums (dbias) ---------------- */

__global__ void k_colsum_gold(const float *dy, int B, int N, float *db)
{
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N) return;
    float s = 0.0f;
    for (int b = 0; b < B; b++) s = s + dy[(size_t)b * N + n];
    db[n] = s;
}

/* tg_colsum (fast) that also stores dy16 [B, N], the 16-bit copy of dy;
 * src16 (not NULL, dy NULL): dy given as rt's 16-bit values */
static int colsum16(struct dev *d, struct dev_stream *st, const float *dy, const uint16_t *src16, int B, int N,
                    float *dbias, uint16_t *dy16, int rt, plumb_err *e);

int tg_colsum(struct dev *d, struct dev_stream *st, const float *dy, int B, int N, float *dbias, plumb_err *e)
{
    if (!golden(d)) return colsum16(d, st, dy, NULL, B, N, dbias, NULL, 0, e);
    k_colsum_gold<<<(N + 127) / 128, 128, 0, st->s>>>(dy, B, N, dbias);
    GPU_CHECK_LAUNCH(d, "k_colsum_gold", e);
    return PLUMB_OK;
}

/* k_colsum_part over nc chunks (gpu/train_gpt.h): eight columns a thread
 * where the rows are 16-byte aligned, else one */
void colsum_part_launch(cudaStream_t s, const float *dy, const uint16_t *src16, int B, int N, int nc, float *part,
                        uint16_t *dy16, int rt, size_t ldp)
{
    const dim3 g8((unsigned)((N / 8 + 127) / 128), (unsigned)nc);
    if (N % 8 == 0 && !(((uintptr_t)dy | (uintptr_t)src16 | (uintptr_t)dy16) & 15)) {
        /* the 16-bit pipeline's form (src16, no store) with rt a constant */
        if (src16 && !dy16 && rt == DT_BF16)
            k_colsum_part<8, 1, DT_BF16, 0><<<g8, 128, 0, s>>>(dy, src16, B, N, part, dy16, rt, ldp);
        else if (src16 && !dy16 && rt == DT_F16)
            k_colsum_part<8, 1, DT_F16, 0><<<g8, 128, 0, s>>>(dy, src16, B, N, part, dy16, rt, ldp);
        else
            k_colsum_part<8><<<g8, 128, 0, s>>>(dy, src16, B, N, part, dy16, rt, ldp);
    } else
        k_colsum_part<1><<<dim3((unsigned)((N + 127) / 128), (unsigned)nc), 128, 0, s>>>(dy, src16, B, N, part, dy16,
                                                                                         rt, ldp);
}

static int colsum16(struct dev *d, struct dev_stream *st, const float *dy, const uint16_t *src16, int B, int N,
                    float *dbias, uint16_t *dy16, int rt, plumb_err *e)
{
    const int nc = (B + CS_ROWS - 1) / CS_ROWS;
    if (nc > 65535) return gpu_err(e, PLUMB_EUNSUPPORTED, "%s: column sum of %d rows exceeds %d", d->label, B, 65535 * CS_ROWS);
    void *ws;
    int rc = tws_get(d, 0, (size_t)nc * N * sizeof(float), &ws, e);
    if (rc) return rc;
    colsum_part_launch(st->s, dy, src16, B, N, nc, (float *)ws, dy16, rt, 0);
    GPU_CHECK_LAUNCH(d, "k_colsum_part", e);
    k_colsum_chunks<<<gpu_grid((size_t)N, 128), 128, 0, st->s>>>((const float *)ws, nc, N, dbias);
    GPU_CHECK_LAUNCH(d, "k_colsum_chunks", e);
    return PLUMB_OK;
}

/* ---------------- row-major GEMM through the plugin's blas_gemm ---------------- */

/* C[m,n] (ldc) = A[m,k] B[k,n] (+ C when acc): trans_a: A stored [k,m];
 * trans_b: B stored [n,k]; operands fp32 or 16-bit (ab) */
static int gemm(struct dev *d, struct dev_stream *st, int m, int n, int k, int ta, int tb, const void *a, int lda,
                const void *b, int ldb, float *c, int ldc, int acc, dtype_t ab, plumb_err *e)
{
    struct gemm_desc g;
    memset(&g, 0, sizeof g);
    g.m = m;
    g.n = n;
    g.k = k;
    g.trans_a = ta;
    g.trans_b = tb;
    g.ab_type = ab;
    g.a = a;
    g.lda = lda;
    g.b = b;
    g.ldb = ldb;
    g.c = c;
    g.ldc = ldc;
    g.accumulate = acc;
    return blas_gemm(d, st, &g, e);
}

#if !defined(PLUMB_HIP)
/* ---------------- cuBLASLt (CUDA): lt_matmul.cu ---------------- */

/* Column-major C[m,n] (fp32, ldc) = op(A) op(B) (+ C when beta = 1) with an
 * epilogue (LT_EPI_NONE or LT_EPI_BIAS); A and B fp32 (ab16 = 0) or rt's
 * 16-bit type; batch > 1: that many products at element offsets sa, sb, sc
 * apart (strided batch). PLUMB_EUNSUPPORTED (no message) when cuBLASLt has
 * no algorithm: the caller falls back. */
static int gl_gemm_batched(struct dev *d, struct dev_stream *st, int ta, int tb, int m, int n, int k, const void *A,
                           int lda, const void *Bm, int ldb, float *C, int ldc, float beta, int rt, int ab16, int epi,
                           const float *bias, int batch, long long sa, long long sb, long long sc, plumb_err *e)
{
    const struct lt_mm g = {ta, tb, m, n, k, A, lda, Bm, ldb, C, ldc, beta, rt, ab16, 0, epi, bias, batch, sa, sb, sc};
    return lt_matmul(d, st, &g, e);
}
static int gl_gemm(struct dev *d, struct dev_stream *st, int ta, int tb, int m, int n, int k, const void *A, int lda,
                   const void *Bm, int ldb, float *C, int ldc, float beta, int rt, int ab16, int epi, const float *bias,
                   plumb_err *e)
{
    return gl_gemm_batched(d, st, ta, tb, m, n, k, A, lda, Bm, ldb, C, ldc, beta, rt, ab16, epi, bias, 1, 0, 0, 0, e);
}

/* Slices of the batch rows for dw = dy^T x (matmul_bwd): the contraction runs
 * over the B rows, and with no split-K (reduction scheme NONE, for repeatable
 * bits) one GEMM has only about (K/128)(N/128) output tiles to spread over
 * the SMs: 36 for gpt2-124m's attention projection (768 x 768), 108 for
 * c_attn, 144 for the MLP, on the H200's 132. Cut into S slices (one
 * strided-batched GEMM writes S partial dw's, tr_sum_slices adds them in
 * slice order: deterministic, S a function of the shape alone), it has
 * S times as many: S is the smallest power of two giving at least 128 tiles
 * of 128 x 128 (about one wave of the 132 SMs), at most 16, each slice at
 * least 512 rows (768 x 768: 4, c_attn: 2, MLP: 1 at B T = 16384). An H100
 * measured gpt2-124m B=16 T=1024 bf16 at 34.74 ms a step with 128 tiles,
 * 35.07 with 256 and 35.70 with 512 (the rule until then; BENCHMARKS.md,
 * 2026-12-06 17:43 UTC): fewer partial dw's to write and add.
 * PLUMB_GPT_DW_SLICES=N (1, 2, 4, 8 or 16; must divide B) fixes S, 1 being
 * the single GEMM; tiles:N the rule with N (64 to 8192) tiles for 128;
 * "auto" or unset the rule; anything else an error naming it. */
static int dw_slices(struct dev *d, int B, int K, int N, int *S, plumb_err *e)
{
    const char *v = getenv("PLUMB_GPT_DW_SLICES");
    long want = 128;
    if (v && *v && strcmp(v, "auto")) {
        char *end = NULL;
        if (!strncmp(v, "tiles:", 6)) {
            want = strtol(v + 6, &end, 10);
            if (end == v + 6 || *end || want < 64 || want > 8192)
                return gpu_err(e, PLUMB_EUSAGE, "%s: PLUMB_GPT_DW_SLICES=%s: expected tiles:N with N from 64 to 8192",
                               d->label, v);
        } else {
            const long n = strtol(v, &end, 10);
            if (end == v || *end || (n != 1 && n != 2 && n != 4 && n != 8 && n != 16))
                return gpu_err(e, PLUMB_EUSAGE,
                               "%s: PLUMB_GPT_DW_SLICES=%s: expected auto, 1, 2, 4, 8, 16 or tiles:N", d->label, v);
            *S = B % n == 0 ? (int)n : 1;
            return PLUMB_OK;
        }
    }
    const long tiles = (long)((K + 127) / 128) * ((N + 127) / 128);
    int s = 1;
    while (s < 16 && tiles * s < want && B % (2 * s) == 0 && B / (2 * s) >= 512) s *= 2;
    *S = s;
    return PLUMB_OK;
}
#endif /* !PLUMB_HIP */

/* Row-major C[m,n] (ldc) = A[m,k] B[k,n] (+ C when acc) for the classifier:
 * on CUDA through gl_gemm (the column-major product C^T = B^T A^T, the
 * reduction scheme NONE, the plan pinned per shape and alignment: the path
 * whose sm90 kernels the other GEMMs get), falling back to blas_gemm where
 * cuBLASLt has no algorithm; on HIP blas_gemm. ab: DT_F32 or rt's 16-bit type. */
static int cls_gemm(struct dev *d, struct dev_stream *st, int m, int n, int k, int ta, int tb, const void *a, int lda,
                    const void *b, int ldb, float *c, int ldc, int acc, dtype_t ab, plumb_err *e)
{
#if !defined(PLUMB_HIP)
    const int ab16 = ab != DT_F32;
    int rc = gl_gemm(d, st, tb, ta, n, m, k, b, ldb, a, lda, c, ldc, acc ? 1.0f : 0.0f, ab16 ? (int)ab : DT_F32, ab16,
                     LT_EPI_NONE, NULL, e);
    if (rc != PLUMB_EUNSUPPORTED) return rc;
#endif
    return gemm(d, st, m, n, k, ta, tb, a, lda, b, ldb, c, ldc, acc, ab, e);
}

/* ---------------- matmul_fwd / matmul_bwd ---------------- */

int tg_matmul_fwd_impl(struct dev *d, struct dev_stream *st, const float *x, const float *w, const float *bias, float *y,
                       float *pre, int B, int K, int N, int gelu, dtype_t rt, plumb_err *e)
{
    const size_t BN = (size_t)B * N;
    int rc;
    if (golden(d)) {
        /* a = linear_fwd's chain + bias, rounded; then gmath.h's GELU */
        if ((rc = tr_linear_fwd(d, st, x, w, bias, gelu ? pre : y, B, K, N, 0, rt, e))) return rc;
        if (!gelu) return PLUMB_OK;
        k_gelu<<<gpu_grid(BN, TPB), TPB, 0, st->s>>>(pre, y, BN, 1, (int)rt);
        GPU_CHECK_LAUNCH(d, "k_gelu", e);
        return PLUMB_OK;
    }
#if !defined(PLUMB_HIP)
    {
        /* y^T [N x B] = (w viewed K x N)^T (x viewed K x B), bias and GELU in the epilogue */
        const int ab16 = rt != DT_F32;
        const void *xa = x, *wa = w;
        if (ab16) {
            void *ws;
            const size_t ox = al256((size_t)B * K * 2);
            if ((rc = tws_get(d, 1, ox + (size_t)N * K * 2, &ws, e))) return rc;
            uint16_t *x16 = (uint16_t *)ws, *w16 = (uint16_t *)((char *)ws + ox);
            if ((rc = to16(d, st, x, (size_t)B * K, x16, (int)rt, e)) || (rc = to16(d, st, w, (size_t)N * K, w16, (int)rt, e)))
                return rc;
            xa = x16;
            wa = w16;
        }
        /* bias in the epilogue; the GELU after it, on the rounded
         * pre-activation, as the cpu computes it: cuBLASLt's GELU_AUX
         * epilogue applies its own GELU to the unrounded sum (measured on the
         * H200: 8e-5 relative off the tanh form in fp32, and bf16 outputs a
         * rounding step apart from the cpu's) */
        float *out = gelu ? pre : y;
        rc = gl_gemm(d, st, 1, 0, N, B, K, wa, K, xa, K, out, N, 0.0f, (int)rt, ab16,
                     bias ? LT_EPI_BIAS : LT_EPI_NONE, bias, e);
        if (rc == PLUMB_OK) {
            if (!gelu) return launch_round2(d, st, out, NULL, BN, (int)rt, e);
            if (rt == DT_F32) k_gelu<<<gpu_grid(BN, TPB), TPB, 0, st->s>>>(pre, y, BN, 0, (int)rt);
            else k_round_gelu<<<gpu_grid(BN, TPB), TPB, 0, st->s>>>(pre, y, BN, (int)rt);
            GPU_CHECK_LAUNCH(d, "k_round_gelu", e);
            return PLUMB_OK;
        }
        if (rc != PLUMB_EUNSUPPORTED) return rc;
    }
#endif
    /* the plugin's GEMM with our epilogue (bias, round), then the GELU */
    if ((rc = tr_linear_fwd(d, st, x, w, bias, gelu ? pre : y, B, K, N, 0, rt, e))) return rc;
    if (!gelu) return PLUMB_OK;
    k_gelu<<<gpu_grid(BN, TPB), TPB, 0, st->s>>>(pre, y, BN, 0, (int)rt);
    GPU_CHECK_LAUNCH(d, "k_gelu", e);
    return PLUMB_OK;
}

int tg_matmul_bwd_impl(struct dev *d, struct dev_stream *st, const float *x, const float *w, const float *dy,
                       const float *pre_in, float *dx, float *dw, float *dbias, int B, int K, int N, dtype_t rt,
                       plumb_err *e)
{
    const size_t BK = (size_t)B * K;
    const int gold = golden(d);
    int rc, db_done = 0; /* dbias summed (the fast CUDA path does it first) */
#if !defined(PLUMB_HIP)
    if (!gold) {
        db_done = 1;
        const int ab16 = rt != DT_F32;
        const void *xa = x, *wa = w, *dya = dy;
        if (ab16) {
            void *ws;
            const size_t ox = 0, ow = al256(BK * 2), ody = ow + al256((size_t)N * K * 2);
            if ((rc = tws_get(d, 1, ody + (size_t)B * N * 2, &ws, e))) return rc;
            char *w1 = (char *)ws;
            /* the column sum reads dy once and stores its 16-bit copy on the
             * way (slot 1 is taken first: a later growth would drop it) */
            if (dbias) rc = colsum16(d, st, dy, NULL, B, N, dbias, (uint16_t *)(w1 + ody), (int)rt, e);
            else rc = to16(d, st, dy, (size_t)B * N, (uint16_t *)(w1 + ody), (int)rt, e);
            if (rc || (rc = to16(d, st, x, BK, (uint16_t *)(w1 + ox), (int)rt, e)) ||
                (rc = to16(d, st, w, (size_t)N * K, (uint16_t *)(w1 + ow), (int)rt, e)))
                return rc;
            xa = w1 + ox;
            wa = w1 + ow;
            dya = w1 + ody;
        } else if (dbias && (rc = tg_colsum(d, st, dy, B, N, dbias, e))) {
            return rc;
        }
        int ok = 1;
        if (dx) {
            /* dx^T [K x B] = (w viewed K x N)(dy viewed N x B), times gelu'(pre_in) in the epilogue */
            /* gelu'(pre_in) after the GEMM, not in cuBLASLt's DGELU epilogue
             * (its derivative is not the tanh form's: FD off by 2e-3 on the H200) */
            rc = gl_gemm(d, st, 0, 0, K, B, N, wa, K, dya, N, dx, K, 0.0f, (int)rt, ab16, LT_EPI_NONE, NULL, e);
            if (rc == PLUMB_OK && pre_in) {
                k_dgelu<<<gpu_grid(BK, TPB), TPB, 0, st->s>>>(dx, pre_in, BK, 0, (int)rt);
                GPU_CHECK_LAUNCH(d, "k_dgelu", e);
            } else if (rc == PLUMB_OK) {
                rc = launch_round2(d, st, dx, NULL, BK, (int)rt, e);
            }
            if (rc == PLUMB_EUNSUPPORTED) ok = 0;
            else if (rc) return rc;
        }
        if (ok) {
            /* dw^T [K x N] = (x viewed K x B)(dy viewed N x B)^T, in S row slices
             * (dw_slices) added in order, or as one GEMM */
            int S = 1;
            if ((rc = dw_slices(d, B, K, N, &S, e))) return rc;
            if (S > 1) {
                void *wp;
                const size_t kn = (size_t)K * N;
                const int Bc = B / S;
                if ((rc = tws_get(d, 2, (size_t)S * kn * sizeof(float), &wp, e))) return rc;
                rc = gl_gemm_batched(d, st, 0, 1, K, N, Bc, xa, K, dya, N, (float *)wp, K, 0.0f, (int)rt, ab16, LT_EPI_NONE,
                                     NULL, S, (long long)Bc * K, (long long)Bc * N, (long long)kn, e);
                if (rc == PLUMB_OK) return tr_sum_slices(d, st, (const float *)wp, S, kn, dw, e);
                if (rc != PLUMB_EUNSUPPORTED) return rc;
            }
            rc = gl_gemm(d, st, 0, 1, K, N, B, xa, K, dya, N, dw, K, 0.0f, (int)rt, ab16, LT_EPI_NONE, NULL, e);
            if (rc != PLUMB_EUNSUPPORTED) return rc;
        }
    }
#endif
    if (dbias && !db_done && (rc = tg_colsum(d, st, dy, B, N, dbias, e))) return rc;
    /* golden (the linear layers' chains), or the plugin's GEMM: dx unrounded
     * when the GELU backward follows */
    if ((rc = tr_linear_bwd(d, st, x, w, NULL, (float *)dy, dx, dw, NULL, B, K, N, 0, pre_in && dx ? DT_F32 : rt, 0, NULL,
                            e)))
        return rc;
    if (!pre_in || !dx) return PLUMB_OK;
    k_dgelu<<<gpu_grid(BK, TPB), TPB, 0, st->s>>>(dx, pre_in, BK, gold, (int)rt);
    GPU_CHECK_LAUNCH(d, "k_dgelu", e);
    return PLUMB_OK;
}

/* ---------------- matmul_fwd16 / matmul_bwd16 (the 16-bit pipeline) ----------------
 * Operands and activation results in rt's 16-bit values (train_ops.h "gpt
 * with 16-bit activations"): cuBLASLt reads x16, w16, dy16 as they are and
 * stores y16 / dx16 itself (the fp32 result, after the bias epilogue, rounded
 * to rt on the store: round(a) of matmul_fwd), so neither a conversion pass
 * before the product nor a rounding pass after it runs. The GELU and gelu'
 * are small 16-bit passes. Where cuBLASLt has no algorithm (or on HIP, which
 * does not list these entries) the fp32 implementation runs between casts
 * in workspace slots 4 and 5. */

/* k_gelu16 / k_dgelu16 (gpu/train_gpt_kern.cuh): eight elements a thread
 * where every pointer is 16-byte aligned, else one */
static void launch_gelu16(cudaStream_t s, const uint16_t *pre16, uint16_t *y16, size_t n, int rt)
{
    if (!(((uintptr_t)pre16 | (uintptr_t)y16) & 15))
        k_gelu16<8><<<gpu_grid(n / 8 ? n / 8 : 1, TPB), TPB, 0, s>>>(pre16, y16, n, rt);
    else
        k_gelu16<1><<<gpu_grid(n, TPB), TPB, 0, s>>>(pre16, y16, n, rt);
}
static void launch_dgelu16(cudaStream_t s, const float *dx, const uint16_t *pre16, uint16_t *dx16, size_t n, int rt)
{
    if (!(((uintptr_t)dx | (uintptr_t)pre16 | (uintptr_t)dx16) & 15))
        k_dgelu16<8><<<gpu_grid(n / 8 ? n / 8 : 1, TPB), TPB, 0, s>>>(dx, pre16, dx16, n, rt);
    else
        k_dgelu16<1><<<gpu_grid(n, TPB), TPB, 0, s>>>(dx, pre16, dx16, n, rt);
}
/* the linear layers' widening (train_linear.cu) over n values as one row each */
int tg_widen16(struct dev *d, struct dev_stream *st, const uint16_t *x16, float *y, size_t n, int rt, plumb_err *e)
{
    return n ? tr_widen16(d, st, x16, n, 1, 1, y, rt, e) : PLUMB_OK;
}
int tg_narrow16(struct dev *d, struct dev_stream *st, const float *x, uint16_t *y16, size_t n, int rt, plumb_err *e)
{
    return n ? to16(d, st, x, n, y16, rt, e) : PLUMB_OK;
}

/* the fp32 implementation between casts (slot 4: fp32 stand-ins) */
static int mm_fwd16_staged(struct dev *d, struct dev_stream *st, const uint16_t *x16, const uint16_t *w16,
                           const uint16_t *bias16, uint16_t *y16, uint16_t *pre16, int B, int K, int N, int gelu,
                           dtype_t rt, plumb_err *e)
{
    const size_t bk = (size_t)B * K, nk = (size_t)N * K, bn = (size_t)B * N;
    const size_t ox = 0, ow = al256(bk * 4), oy = ow + al256(nk * 4), op = oy + al256(bn * 4);
    const size_t ob = op + al256(gelu ? bn * 4 : 0);
    void *ws;
    int rc = tws_get(d, 4, ob + (bias16 ? (size_t)N * 4 : 0), &ws, e);
    if (rc) return rc;
    char *w = (char *)ws;
    float *x = (float *)(w + ox), *wf = (float *)(w + ow), *y = (float *)(w + oy), *pre = gelu ? (float *)(w + op) : NULL;
    float *bias = bias16 ? (float *)(w + ob) : NULL;
    if ((rc = tg_widen16(d, st, x16, x, bk, (int)rt, e)) || (rc = tg_widen16(d, st, w16, wf, nk, (int)rt, e)) ||
        (bias16 && (rc = tg_widen16(d, st, bias16, bias, (size_t)N, (int)rt, e))) ||
        (rc = tg_matmul_fwd_impl(d, st, x, wf, bias, y, pre, B, K, N, gelu, rt, e)) ||
        (rc = tg_narrow16(d, st, y, y16, bn, (int)rt, e)))
        return rc;
    return gelu ? tg_narrow16(d, st, pre, pre16, bn, (int)rt, e) : PLUMB_OK;
}

int tg_matmul_fwd16_impl(struct dev *d, struct dev_stream *st, const uint16_t *x16, const uint16_t *w16,
                         const uint16_t *bias16, uint16_t *y16, uint16_t *pre16, int B, int K, int N, int gelu,
                         dtype_t rt, plumb_err *e)
{
#if !defined(PLUMB_HIP)
    {
        int rc;
        /* cuBLASLt 13 takes a 16-bit D's bias in the same type: bias16 as
         * it is (it was cast here from an fp32 bias a call: 48 launches of
         * ~3.4 us a gpt2-124m forward on an H100) */
        const uint16_t *b16 = bias16;
        const int bias = b16 != NULL;
        /* y^T [N x B] = (w viewed K x N)^T (x viewed K x B), stored in 16
         * bits. With the GELU (PLUMB_GPT_GELU_EPI, on by default) in
         * cuBLASLt's GELU_AUX_BIAS epilogue: pre16 = round(product + bias)
         * stored as its aux output and y16 = round(gelu(product + bias)),
         * cuBLASLt's GELU of the unrounded fp32 value (matmul_fwd's is of
         * the rounded pre-activation: y within two rt steps plus two of pre
         * times gelu', tests/test_gpt16_ops.c); else pre16 from the GEMM and
         * k_gelu16 after it. */
        int gelu_epi = 0;
        if (gelu && bias && pre16 && (rc = gpu_env_switch(d, "PLUMB_GPT_GELU_EPI", "k_gelu16 after the GEMM",
                                                 "the GEMM's GELU_AUX_BIAS epilogue", &gelu_epi, e)))
            return rc;
        rc = PLUMB_EUNSUPPORTED;
        if (gelu_epi) {
            struct lt_mm g = {1, 0, N, B, K, w16, K, x16, K, y16, N, 0.0f, (int)rt, 1, 1, LT_EPI_GELU_AUX_BIAS, b16,
                              1, 0, 0, 0};
            g.aux = pre16;
            g.aux_ld = N;
            rc = lt_matmul(d, st, &g, e);
            if (rc == PLUMB_OK) return PLUMB_OK;
            if (rc != PLUMB_EUNSUPPORTED) return rc;
        }
        uint16_t *out = gelu ? pre16 : y16;
        const struct lt_mm g = {1, 0, N, B, K, w16, K, x16, K, out, N, 0.0f, (int)rt, 1, 1,
                                bias ? LT_EPI_BIAS : LT_EPI_NONE, b16, 1, 0, 0, 0};
        rc = lt_matmul(d, st, &g, e);
        if (rc == PLUMB_OK) {
            if (!gelu) return PLUMB_OK;
            const size_t bn = (size_t)B * N;
            launch_gelu16(st->s, pre16, y16, bn, (int)rt);
            GPU_CHECK_LAUNCH(d, "k_gelu16", e);
            return PLUMB_OK;
        }
        if (rc != PLUMB_EUNSUPPORTED) return rc;
    }
#endif
    return mm_fwd16_staged(d, st, x16, w16, bias16, y16, pre16, B, K, N, gelu, rt, e);
}

/* the fp32 implementation between casts (slot 4: fp32 stand-ins) */
static int mm_bwd16_staged(struct dev *d, struct dev_stream *st, const uint16_t *x16, const uint16_t *w16,
                           const uint16_t *dy16, const uint16_t *pre16, uint16_t *dx16, float *dw, float *dbias, int B,
                           int K, int N, dtype_t rt, plumb_err *e)
{
    const size_t bk = (size_t)B * K, nk = (size_t)N * K, bn = (size_t)B * N;
    const size_t ox = 0, ow = al256(bk * 4), ody = ow + al256(nk * 4), op = ody + al256(bn * 4);
    const size_t odx = op + al256(pre16 ? bk * 4 : 0);
    void *ws;
    int rc = tws_get(d, 4, odx + (dx16 ? bk * 4 : 0), &ws, e);
    if (rc) return rc;
    char *w = (char *)ws;
    float *x = (float *)(w + ox), *wf = (float *)(w + ow), *dy = (float *)(w + ody);
    float *pre = pre16 ? (float *)(w + op) : NULL, *dx = dx16 ? (float *)(w + odx) : NULL;
    if ((rc = tg_widen16(d, st, x16, x, bk, (int)rt, e)) || (rc = tg_widen16(d, st, w16, wf, nk, (int)rt, e)) ||
        (rc = tg_widen16(d, st, dy16, dy, bn, (int)rt, e)) ||
        (pre && (rc = tg_widen16(d, st, pre16, pre, bk, (int)rt, e))) ||
        (rc = tg_matmul_bwd_impl(d, st, x, wf, dy, pre, dx, dw, dbias, B, K, N, rt, e)))
        return rc;
    return dx16 ? tg_narrow16(d, st, dx, dx16, bk, (int)rt, e) : PLUMB_OK;
}

#if !defined(PLUMB_HIP)
/* lt_matmul of a dw GEMM g whose epilogue is BGRADB or NONE; where cuBLASLt
 * has no BGRADB algorithm for it, the same GEMM without the epilogue.
 * *db_done = 1 when the bias gradient was written. */
static int lt_matmul_bgrad(struct dev *d, struct dev_stream *st, struct lt_mm *g, int *db_done, plumb_err *e)
{
    int rc = lt_matmul(d, st, g, e);
    if (rc == PLUMB_EUNSUPPORTED && g->epi == LT_EPI_BGRADB) {
        g->epi = LT_EPI_NONE;
        g->bias = NULL;
        return lt_matmul(d, st, g, e);
    }
    if (rc == PLUMB_OK && g->epi == LT_EPI_BGRADB) *db_done = 1;
    return rc;
}
#endif

int tg_matmul_bwd16_impl(struct dev *d, struct dev_stream *st, const uint16_t *x16, const uint16_t *w16,
                         const uint16_t *dy16, const uint16_t *pre16_in, uint16_t *dx16, float *dw, float *dbias, int B,
                         int K, int N, dtype_t rt, plumb_err *e)
{
#if !defined(PLUMB_HIP)
    {
        const size_t bk = (size_t)B * K;
        int rc;
        int ok = 1, dgelu_epi = 0, bgrad_epi = 0;
        if ((rc = gpu_env_switch(d, "PLUMB_GPT_DGELU_EPI", "gelu' in a pass after the dx GEMM",
                                 "in the GEMM's DGELU epilogue", &dgelu_epi, e, 1)) ||
            (rc = gpu_env_switch(d, "PLUMB_GPT_BGRAD_EPI", "dbias as a column-sum pass",
                                 "in the dw GEMM's BGRADB epilogue", &bgrad_epi, e, 0)))
            return rc;
        if (dx16) {
            /* dx^T [K x B] = (w viewed K x N)(dy viewed N x B): stored in 16
             * bits by the GEMM. With the GELU below, dx = round(product x
             * gelu'(pre_in)) as matmul_bwd computes it: in cuBLASLt's DGELU
             * epilogue (aux = pre16_in [B, K], the 16-bit pre-activation the
             * forward stored; the product never leaves the registers), or
             * where it has none, the product in fp32 (slot 4) and gelu' in
             * k_dgelu16 */
            rc = PLUMB_EUNSUPPORTED;
            if (pre16_in && dgelu_epi) {
                struct lt_mm g = {0, 0, K, B, N, w16, K, dy16, N, dx16, K, 0.0f, (int)rt, 1, 1, LT_EPI_DGELU, NULL,
                                  1, 0, 0, 0};
                g.aux = pre16_in;
                g.aux_ld = K;
                rc = lt_matmul(d, st, &g, e);
                if (rc != PLUMB_OK && rc != PLUMB_EUNSUPPORTED) return rc;
            }
            if (rc == PLUMB_EUNSUPPORTED) {
                float *dxf = NULL;
                if (pre16_in) {
                    void *ws;
                    if ((rc = tws_get(d, 4, bk * sizeof(float), &ws, e))) return rc;
                    dxf = (float *)ws;
                }
                const struct lt_mm g = {0, 0, K, B, N, w16, K, dy16, N, pre16_in ? (void *)dxf : (void *)dx16, K, 0.0f,
                                        (int)rt, 1, pre16_in ? 0 : 1, LT_EPI_NONE, NULL, 1, 0, 0, 0};
                rc = lt_matmul(d, st, &g, e);
                if (rc == PLUMB_OK && pre16_in) {
                    launch_dgelu16(st->s, dxf, pre16_in, dx16, bk, (int)rt);
                    GPU_CHECK_LAUNCH(d, "k_dgelu16", e);
                }
            }
            if (rc == PLUMB_EUNSUPPORTED) ok = 0;
            else if (rc) return rc;
        }
        if (ok) {
            /* dw^T [K x N] = (x viewed K x B)(dy viewed N x B)^T, in the row
             * slices of dw_slices; dbias [N] = dy summed over the B rows, in
             * the same GEMM's BGRADB epilogue (op(B) = dy viewed B x N, summed
             * over k = the rows: one partial vector a slice, added in slice
             * order as the dw slices are), else colsum16's pass */
            int S = 1;
            if ((rc = dw_slices(d, B, K, N, &S, e))) return rc;
            const int bg = dbias && bgrad_epi;
            int db_done = 0;
            rc = PLUMB_EUNSUPPORTED;
            if (S > 1) {
                void *wp;
                const size_t kn = (size_t)K * N;
                const int Bc = B / S;
                if ((rc = tws_get(d, 2, (size_t)S * (kn + (size_t)N) * sizeof(float), &wp, e))) return rc;
                float *parts = (float *)wp, *bparts = parts + (size_t)S * kn;
                struct lt_mm g = {0, 1, K, N, Bc, x16, K, dy16, N, parts, K, 0.0f, (int)rt, 1, 0,
                                  bg ? LT_EPI_BGRADB : LT_EPI_NONE, bg ? bparts : NULL, S, (long long)Bc * K,
                                  (long long)Bc * N, (long long)kn};
                g.bias_stride = N;
                rc = lt_matmul_bgrad(d, st, &g, &db_done, e);
                if (rc == PLUMB_OK) rc = tr_sum_slices(d, st, parts, S, kn, dw, e);
                if (rc == PLUMB_OK && db_done) rc = tr_sum_slices(d, st, bparts, S, (size_t)N, dbias, e);
                else if (rc != PLUMB_OK && rc != PLUMB_EUNSUPPORTED) return rc;
            }
            if (rc == PLUMB_EUNSUPPORTED) {
                struct lt_mm g = {0, 1, K, N, B, x16, K, dy16, N, dw, K, 0.0f, (int)rt, 1, 0,
                                  bg ? LT_EPI_BGRADB : LT_EPI_NONE, bg ? dbias : NULL, 1, 0, 0, 0};
                rc = lt_matmul_bgrad(d, st, &g, &db_done, e);
            }
            /* the column sum over the 16-bit dy, in colsum16's chunks and order */
            if (rc == PLUMB_OK && dbias && !db_done) return colsum16(d, st, NULL, dy16, B, N, dbias, NULL, (int)rt, e);
            if (rc != PLUMB_EUNSUPPORTED) return rc;
        }
    }
#endif
    return mm_bwd16_staged(d, st, x16, w16, dy16, pre16_in, dx16, dw, dbias, B, K, N, rt, e);
}

/* ---------------- classifier + cross-entropy ---------------- */

/* The stored logits of one row chunk are at most XENT_CHUNK_BYTES: 2 GiB,
 * whatever the batch. With 16-bit compute on CUDA the logits are stored
 * as 16-bit values (PLUMB_GPT_XENT16), 2 bytes each, so gpt2's B=16 T=1024
 * (16384 rows of 50264) is one chunk of 1.65 GB; fp32 logits take 4 bytes
 * each, so the same batch is two chunks of 8192 rows. One chunk against
 * four of 4096 rows (the rule of 1 GiB of fp32 logits until 2026-12-06):
 * 474,860 against 471,966 tokens/s for gpt2-124m on an H100 in one call
 * (BENCHMARKS.md, 2026-12-06 23:37): fewer, larger GEMMs, and dwte's
 * beta = 1 reads of the padded 154 MB sums go. Chunks are split evenly and
 * their rows rounded up to a multiple of 128 (the GEMM tiles' height), so
 * no chunk is a thin remainder. */
#define XENT_CHUNK_BYTES ((size_t)2 << 30)
#define XENT_ROW_ALIGN 128

/* rows per chunk for R rows of V logits of elem bytes each;
 * PLUMB_GPT_XENT_CHUNK_BYTES (a test hook: tests/test_gpu_train_gpt.c runs
 * many small chunks against one) replaces the cap, counted in fp32 logits
 * whatever elem (its tests' row counts do not move with the storage) */
static int xent_chunk_rows(int R, int V, int elem)
{
    const char *hook = getenv("PLUMB_GPT_XENT_CHUNK_BYTES");
    const int hooked = hook && atoll(hook) > 0;
    const size_t row = (size_t)V * (size_t)(hooked ? 4 : elem);
    const size_t bytes = hooked ? (size_t)atoll(hook) : XENT_CHUNK_BYTES;
    size_t cap = bytes / row; /* rows that fit */
    if (cap < 1) cap = 1;
    const size_t nch = ((size_t)R + cap - 1) / cap;
    size_t rc = ((size_t)R + nch - 1) / nch;
    const size_t up = (rc + XENT_ROW_ALIGN - 1) / XENT_ROW_ALIGN * XENT_ROW_ALIGN;
    if (up <= cap) rc = up; /* the rounding never crosses the cap */
    return rc > (size_t)R ? R : (int)rc;
}

/* golden logits of a chunk: one thread per (r, v), z = round(gg_dot(x_r, w_v)) */
__global__ void k_xent_logits_gold(const float *x, const float *w, float *z, int nr, int C, int V, int rt)
{
    const size_t tot = (size_t)nr * V;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < tot; i += (size_t)gridDim.x * blockDim.x) {
        const size_t r = i / (size_t)V, v = i - r * (size_t)V;
        z[i] = gg_round(gg_dot(x + r * C, w + v * C, C), rt);
    }
}
/* golden rows: one thread per row, the shared cross-entropy row in place */
__global__ void k_xent_rows_gold(float *z, const int32_t *tgt, int nr, int V, float gs, int grad, float *loss, int rt)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= nr) return;
    float *zr = z + (size_t)r * V;
    const int tg = tgt[r];
    if (tg < 0) {
        loss[r] = 0.0f;
        if (grad)
            for (int v = 0; v < V; v++) zr[v] = 0.0f;
        return;
    }
    loss[r] = gpt_gold_xent_row(zr, V, tg, gs, grad ? zr : NULL, rt);
}
/* golden dx: one thread per (r, c), a chain over v ascending */
__global__ void k_xent_dx_gold(const float *g, const float *w, float *dx, int nr, int C, int V, int rt)
{
    const size_t tot = (size_t)nr * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < tot; i += (size_t)gridDim.x * blockDim.x) {
        const size_t r = i / (size_t)C, c = i - r * (size_t)C;
        float acc = 0.0f;
        for (int v = 0; v < V; v++) acc = fmaf(g[r * V + v], w[(size_t)v * C + c], acc);
        dx[i] = gg_round(acc, rt);
    }
}
/* golden dwte: one thread per (v, c), the chain continued over the chunk's rows */
__global__ void k_xent_dw_gold(const float *g, const float *x, float *dw, int nr, int C, int V)
{
    const size_t tot = (size_t)V * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < tot; i += (size_t)gridDim.x * blockDim.x) {
        const size_t v = i / (size_t)C, c = i - v * (size_t)C;
        float acc = dw[i];
        for (int r = 0; r < nr; r++) acc = fmaf(g[(size_t)r * V + v], x[(size_t)r * C + c], acc);
        dw[i] = acc;
    }
}
__global__ void k_round_inplace(float *x, size_t n, int rt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = gg_round(x[i], rt);
}

/* PLUMB_GPT_XENT16: 1 or unset: 16-bit compute on CUDA writes the logits
 * as rt values straight from the GEMM (cuBLASLt's 16-bit output, rounded
 * once from its fp32 sums) and the row kernel reads those and overwrites
 * them with the gradient: 2 bytes a logit where the fp32 logits took 4
 * written and 8 read (gpt2-124m B 16 T 1024: 16384 x 50304 logits, 3.3 GB
 * in fp32 a step). The rows are a function of the rounded logits alone,
 * the same either way; the GEMM may take another algorithm for a 16-bit
 * output, so a logit can land one rounding step apart. 0: fp32 logits
 * (for timing the two side by side). Anything else is an error naming it
 * (gpu_env_switch). */

/* threads a block of k_xent_rows_fast (a block a row): 1024 unless
 * PLUMB_GPT_XENT_TPB says 128, 256, 512 or 1024 (anything else an error
 * naming it). The block size also sets how many rows a SM holds at once
 * (2048 threads: 16, 8, 4 or 2), so how many of a 4096-row chunk's 100 KB
 * rows (gpt2: 50264 16-bit logits) are in flight between the pass that
 * reads a row and the one that reads it again: at 2 a SM (26 MB) the second
 * read finds the row in the L2. gpt2-124m B 16 on an H100 (2026-12-06
 * 08:35, one call): 40.37, 40.19 and 39.69 ms a step at 256, 512, 1024. */
static int xent_tpb(struct dev *d, int *tpb, plumb_err *e)
{
    const char *v = getenv("PLUMB_GPT_XENT_TPB");
    *tpb = 1024;
    if (!v || !*v) return PLUMB_OK;
    if (strcmp(v, "128") && strcmp(v, "256") && strcmp(v, "512") && strcmp(v, "1024"))
        return gpu_err(e, PLUMB_EUSAGE, "%s: PLUMB_GPT_XENT_TPB=%s: expected 128, 256, 512 or 1024", d->label, v);
    *tpb = atoi(v);
    return PLUMB_OK;
}

#if !defined(PLUMB_HIP)
/* The last chunk's dwte product when the chunks accumulate into the padded
 * dwp [VG, C] (slot 3): instead of the whole product into dwp and dwp's
 * first V rows copied to dwte (gpt2: 154 MB read and written again a step),
 * the GEMM over the first V8 = V & ~7 rows reads dwp as C and writes dwte
 * as D (cuBLASLt's out-of-place product; V8 keeps N a multiple of 8, so
 * the sm90 kernels stay eligible), the padded tail's rows V8..VG-1 go to
 * dwp as before, and its rows V8..V-1 are copied (gpt2: one row). *done = 0
 * (nothing written) where cuBLASLt has no algorithm or V < 8: the caller's
 * padded product then. Column-major: dwte^T (C x V8) = x^T (C x nr) G
 * (nr x V8), G [nr, LD] the 16-bit gradient rows, x16 [nr, C]. */
static int dwte_last_direct(struct dev *d, struct dev_stream *st, const uint16_t *g16, int LD, const uint16_t *x16, int C,
                            int nr, int V, int VG, float *dwp, float *dwte, int acc, int rt, int *done, plumb_err *e)
{
    *done = 0;
    const int V8 = V & ~7;
    if (V8 == 0) return PLUMB_OK;
    struct lt_mm g = {0, 1, C, V8, nr, x16, C, g16, LD, dwp, C, acc ? 1.0f : 0.0f, rt, 1, 0, LT_EPI_NONE, NULL, 1,
                      0, 0, 0};
    g.dst = dwte;
    int rc = lt_matmul(d, st, &g, e);
    if (rc == PLUMB_EUNSUPPORTED) return PLUMB_OK;
    if (rc) return rc;
    if ((rc = cls_gemm(d, st, VG - V8, C, nr, 1, 0, g16 + V8, LD, x16, C, dwp + (size_t)V8 * C, C, acc, (dtype_t)rt, e)))
        return rc;
    GPU_CHECK(d, cudaMemcpyAsync(dwte + (size_t)V8 * C, dwp + (size_t)V8 * C, (size_t)(V - V8) * C * sizeof(float),
                                 cudaMemcpyDeviceToDevice, st->s), e);
    *done = 1;
    return PLUMB_OK;
}

/* PLUMB_GPT_XENT_STAGE: 1 or unset: the 16-bit logits' rows staged whole
 * in shared memory (k_xent_rows_staged: each row read from memory once,
 * the same bits as k_xent_rows_fast), where a row of LD 16-bit values fits
 * the device's opt-in shared memory a block (gpt2: 100,528 bytes of the
 * H100's 227 KB, so two row blocks a SM); 0: k_xent_rows_fast (two reads
 * a row). Anything else is an error naming it (gpu_env_switch). */
static int xent_stage_on(struct dev *d, int LD, int *on, plumb_err *e)
{
    int rc = gpu_env_switch(d, "PLUMB_GPT_XENT_STAGE", "k_xent_rows_fast (each row read twice)",
                            "each row staged once in shared memory", on, e);
    if (rc || !*on) return rc;
    int dev = 0, optin = 0;
    GPU_CHECK(d, cudaGetDevice(&dev), e);
    GPU_CHECK(d, cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev), e);
    const size_t bytes = (size_t)LD * 2, stat = 2 * PLUMB_WARP * sizeof(float) + 64; /* red, the barrier, slack */
    if (bytes + stat > (size_t)optin) { /* a vocabulary too wide: the two-read rows */
        *on = 0;
        return PLUMB_OK;
    }
    GPU_CHECK(d, cudaFuncSetAttribute(k_xent_rows_staged, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes), e);
    return PLUMB_OK;
}
#endif

int tg_classifier(struct dev *d, struct dev_stream *st, const struct cls_io *io, const int32_t *tgt, int R, int C,
                  int V, float grad_scale, float *losses, double *sum_count, float *dwte, dtype_t rt, plumb_err *e)
{
    const float *x = io->x, *wte = io->wte;
    const uint16_t *wte16 = io->wte16, *xin16 = io->x16;
    float *dx = io->dx;
    uint16_t *dx16 = io->dx16;
    const int rows16 = io->rows16;
    const int gold = golden(d), grad = dx != NULL || dx16 != NULL;
    const int ab16 = !gold && rt != DT_F32;
    if ((wte16 || xin16 || dx16) && !ab16)
        return gpu_err(e, PLUMB_EUSAGE, "%s: the classifier in 16 bits in %s numerics with %s", d->label,
                       gold ? "golden" : "fast", dtype_name(rt));
    int z16 = 0; /* the logits as 16-bit rt values in g16 (CUDA, 16-bit compute) */
#if !defined(PLUMB_HIP)
    if (ab16) {
        int rc0 = gpu_env_switch(d, "PLUMB_GPT_XENT16", "fp32 logits", "16-bit logits from the GEMM", &z16, e);
        if (rc0) return rc0;
    }
#endif
    /* fast: the logits and 16-bit gradient rows have a leading dimension LD
     * rounded up to 8 columns. With LD = V = 50257 (GPT-2's odd vocabulary)
     * every row after the first was misaligned and cuBLASLt could only pick
     * its align1 sm75 kernels (~32 ms of a gpt2-124m step on the H200). */
    const int LD = gold ? V : (V + 7) & ~7;
    const int RC = xent_chunk_rows(R, LD, z16 ? 2 : 4);
    int rc, xtpb = TPB, stage = 0;
    if (!gold && (rc = xent_tpb(d, &xtpb, e))) return rc;
#if !defined(PLUMB_HIP)
    if (z16 && (rc = xent_stage_on(d, LD, &stage, e))) return rc;
#else
    (void)stage;
#endif
    void *w0, *w1, *w2 = NULL;
    /* slot 0: per-row losses when the caller keeps none; slot 1: the logits chunk [RC, LD];
     * slot 2 (16-bit compute): g16 [RC, LD], w16 [LD, C] (rows V..LD-1 zero), x16 [RC, C] */
    if ((rc = tws_get(d, 0, (size_t)R * sizeof(float), &w0, e))) return rc;
    /* the fp32 logits' slot only where they are used (taken later if the
     * 16-bit output finds no cuBLASLt algorithm) */
    if (!z16 && (rc = tws_get(d, 1, (size_t)RC * LD * sizeof(float), &w1, e))) return rc;
    float *lossv = losses ? losses : (float *)w0, *Z = z16 ? NULL : (float *)w1;
    uint16_t *g16 = NULL, *x16 = NULL;
    const uint16_t *w16 = NULL;
    const size_t og = 0, ow = al256((size_t)RC * LD * 2), ox = ow + al256((size_t)LD * C * 2);
    if (ab16) {
        /* x16's part only where x is cast here (not given as 16 bits) */
        if ((rc = tws_get(d, 2, ox + (xin16 ? 0 : (size_t)RC * C * 2), &w2, e))) return rc;
        g16 = (uint16_t *)((char *)w2 + og);
        x16 = xin16 ? NULL : (uint16_t *)((char *)w2 + ox);
        /* the 16-bit wte [LD, C]: the caller's where it has LD rows (its
         * padding rows finite, meeting only zero gradient columns), else
         * cast or copied into the slot with rows V..LD-1 zero */
        uint16_t *wp = (uint16_t *)((char *)w2 + ow);
        if (wte16 && rows16 >= LD) {
            w16 = wte16;
        } else {
            if (wte16)
                GPU_CHECK(d, cudaMemcpyAsync(wp, wte16, (size_t)V * C * 2, cudaMemcpyDeviceToDevice, st->s), e);
            else if ((rc = to16(d, st, wte, (size_t)V * C, wp, (int)rt, e)))
                return rc;
            if (LD > V) GPU_CHECK(d, cudaMemsetAsync(wp + (size_t)V * C, 0, (size_t)(LD - V) * C * 2, st->s), e);
            w16 = wp;
        }
    }
    /* The 16-bit GEMMs run over VG = LD vocabulary rows (the 16-bit wte's
     * rows V..LD-1 zero, so are the logits and gradient columns there):
     * with V = 50257 the logits GEMM's M and the dx GEMM's K are odd and
     * cuBLASLt could only take sm75 align1 kernels (CUPTI on the H200: 3.3
     * and 3.2 ms a call, 26 ms of a 96 ms gpt2-124m step; BENCHMARKS.md
     * 2026-12-05). fp32 reads wte itself, which may have only V rows: V. */
    const int VG = ab16 ? LD : V;
    /* dwte over VG rows too (PLUMB_GPT_DWTE_PAD, on by default with 16-bit
     * compute where VG > V): the product's N = V = 50257 odd, cuBLASLt's
     * first answer was an sm80 cutlass kernel, 673 us a 4096-row chunk
     * against 381-455 us for the chunk's other two GEMMs of the same FLOPs
     * (CUPTI on an H100, BENCHMARKS.md 2026-12-06); so the chunks accumulate
     * into dwp [VG, C] (slot 3; rows V.. are the zero columns' sums, zero)
     * and its first V rows are copied to dwte at the end; on CUDA the last
     * chunk's GEMM writes most of dwte itself (dwte_last_direct,
     * PLUMB_GPT_DWTE_DIRECT, on by default) */
    float *dwp = NULL;
    int direct = 0, dwp_done = 0;
    if (grad && ab16 && VG > V && R > 0) {
        int pad = 0;
        if ((rc = gpu_env_switch(d, "PLUMB_GPT_DWTE_PAD", "the product over V rows",
                                 "over the rows padded to a multiple of 8", &pad, e)))
            return rc;
        if ((rc = gpu_env_switch(d, "PLUMB_GPT_DWTE_DIRECT", "the last chunk into dwp, then dwp copied to dwte",
                                 "the last chunk's GEMM writes dwte's first V & ~7 rows itself", &direct, e)))
            return rc;
#if defined(PLUMB_HIP)
        (void)direct;
#endif
        void *w3;
        if (pad && (rc = tws_get(d, 3, (size_t)VG * C * sizeof(float), &w3, e))) return rc;
        if (pad) dwp = (float *)w3;
    }
    /* dwte starts at 0 (the golden chunks and the first GEMM add into it);
     * the padded product's copy at the end writes all of it instead */
    if (grad && !dwp) GPU_CHECK(d, cudaMemsetAsync(dwte, 0, (size_t)V * C * sizeof(float), st->s), e);
    for (int r0 = 0, ch = 0; r0 < R; r0 += RC, ch++) {
        const int nr = R - r0 < RC ? R - r0 : RC;
        const float *xc = x ? x + (size_t)r0 * C : NULL;
        const size_t nz = (size_t)nr * V, nx = (size_t)nr * C;
        if (gold) {
            k_xent_logits_gold<<<gpu_grid(nz, TPB), TPB, 0, st->s>>>(xc, wte, Z, nr, C, V, (int)rt);
            GPU_CHECK_LAUNCH(d, "k_xent_logits_gold", e);
            k_xent_rows_gold<<<(nr + 127) / 128, 128, 0, st->s>>>(Z, tgt + r0, nr, V, grad_scale, grad, lossv + r0,
                                                                  (int)rt);
            GPU_CHECK_LAUNCH(d, "k_xent_rows_gold", e);
            if (!grad) continue;
            k_xent_dx_gold<<<gpu_grid(nx, TPB), TPB, 0, st->s>>>(Z, wte, dx + (size_t)r0 * C, nr, C, V, (int)rt);
            GPU_CHECK_LAUNCH(d, "k_xent_dx_gold", e);
            k_xent_dw_gold<<<gpu_grid((size_t)V * C, TPB), TPB, 0, st->s>>>(Z, xc, dwte, nr, C, V);
            GPU_CHECK_LAUNCH(d, "k_xent_dw_gold", e);
            continue;
        }
        /* Z [nr, V] = x_c [nr, C] wte^T (wte stored [V, C]) */
        const void *xa = xc, *wa = wte;
        if (ab16) {
            if (xin16) xa = xin16 + (size_t)r0 * C; /* the caller's 16-bit x */
            else if ((rc = to16(d, st, xc, nx, x16, (int)rt, e))) return rc;
            else xa = x16;
            wa = w16;
        }
        const dtype_t ab = ab16 ? rt : DT_F32;
#if !defined(PLUMB_HIP)
        if (z16) {
            /* G16 [nr, LD] = round(x_c wte^T): the column-major product (LD x nr) = w16^T x16 */
            const struct lt_mm g = {1, 0, VG, nr, C, wa, C, xa, C, g16, LD, 0.0f, (int)rt, 1, 1, LT_EPI_NONE, NULL, 1,
                                    0, 0, 0};
            rc = lt_matmul(d, st, &g, e);
            if (rc == PLUMB_EUNSUPPORTED) { /* no 16-bit-output algorithm: fp32 logits from here on, in
                                             * chunks sized for 16-bit ones (up to 4 GiB of fp32) */
                z16 = 0;
                if ((rc = tws_get(d, 1, (size_t)RC * LD * sizeof(float), &w1, e))) return rc;
                Z = (float *)w1;
            } else if (rc) {
                return rc;
            }
        }
        if (z16 && stage) {
            k_xent_rows_staged<<<nr, xtpb, (size_t)LD * 2, st->s>>>(g16, tgt + r0, V, LD, grad_scale, grad, lossv + r0,
                                                                   (int)rt);
            GPU_CHECK_LAUNCH(d, "k_xent_rows_staged", e);
        } else if (z16) {
            k_xent_rows_fast<uint16_t><<<nr, xtpb, 0, st->s>>>(g16, g16, tgt + r0, V, LD, grad_scale, grad,
                                                              lossv + r0, (int)rt);
            GPU_CHECK_LAUNCH(d, "k_xent_rows_fast", e);
        } else
#endif
        {
            if ((rc = cls_gemm(d, st, nr, VG, C, 0, 1, xa, C, wa, C, Z, LD, 0, ab, e))) return rc;
            k_xent_rows_fast<float><<<nr, xtpb, 0, st->s>>>(Z, g16, tgt + r0, V, LD, grad_scale, grad, lossv + r0,
                                                           (int)rt);
            GPU_CHECK_LAUNCH(d, "k_xent_rows_fast", e);
        }
        if (!grad) continue;
        const void *ga = ab16 ? (const void *)g16 : (const void *)Z;
        /* dx_c [nr, C] = G [nr, V] wte [V, C]; dwte [V, C] += G^T x_c (chunks in order) */
        if (dx16) {
            /* stored as 16-bit values by the GEMM (the fp32 result rounded
             * on the store); where cuBLASLt has no such algorithm, the fp32
             * product in slot 4 and its cast (the same rounding) */
            rc = PLUMB_EUNSUPPORTED;
#if !defined(PLUMB_HIP)
            const struct lt_mm g = {0, 0, C, nr, VG, wa, C, ga, LD, dx16 + (size_t)r0 * C, C, 0.0f, (int)rt, 1, 1,
                                    LT_EPI_NONE, NULL, 1, 0, 0, 0};
            rc = lt_matmul(d, st, &g, e);
#endif
            if (rc == PLUMB_EUNSUPPORTED) {
                void *w4;
                if ((rc = tws_get(d, 4, nx * sizeof(float), &w4, e)) ||
                    (rc = cls_gemm(d, st, nr, C, VG, 0, 0, ga, LD, wa, C, (float *)w4, C, 0, ab, e)) ||
                    (rc = to16(d, st, (const float *)w4, nx, dx16 + (size_t)r0 * C, (int)rt, e)))
                    return rc;
            } else if (rc) {
                return rc;
            }
        } else {
            if ((rc = cls_gemm(d, st, nr, C, VG, 0, 0, ga, LD, wa, C, dx + (size_t)r0 * C, C, 0, ab, e))) return rc;
            if (rt != DT_F32) {
                k_round_inplace<<<gpu_grid(nx, TPB), TPB, 0, st->s>>>(dx + (size_t)r0 * C, nx, (int)rt);
                GPU_CHECK_LAUNCH(d, "k_round_inplace", e);
            }
        }
#if !defined(PLUMB_HIP)
        if (dwp && direct && r0 + nr >= R) { /* the last chunk: dwte written by the GEMM itself */
            if ((rc = dwte_last_direct(d, st, (const uint16_t *)ga, LD, (const uint16_t *)xa, C, nr, V, VG, dwp, dwte,
                                       ch > 0, (int)rt, &dwp_done, e)))
                return rc;
            if (dwp_done) continue;
        }
#endif
        if ((rc = cls_gemm(d, st, dwp ? VG : V, C, nr, 1, 0, ga, LD, xa, C, dwp ? dwp : dwte, C, ch > 0, ab, e)))
            return rc;
    }
    if (dwp && !dwp_done)
        GPU_CHECK(d, cudaMemcpyAsync(dwte, dwp, (size_t)V * C * sizeof(float), cudaMemcpyDeviceToDevice, st->s), e);
    if (sum_count) {
        k_xent_sum<<<1, XSUM_TPB, 0, st->s>>>(lossv, tgt, R, sum_count);
        GPU_CHECK_LAUNCH(d, "k_xent_sum", e);
    }
    return PLUMB_OK;
}

