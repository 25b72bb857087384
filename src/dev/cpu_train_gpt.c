/* The cpu backend's transformer ops (dev/train_ops.h, "transformer ops
 * (gpt)"; golden definitions in dev/train_gpt_math.h).
 *
 * Golden: every output element is one chain computed by one thread in the
 * documented order; loops vectorise across independent outputs only, so the
 * bits do not depend on the thread count or the vector width.
 * Fast: OpenBLAS sgemm (single-threaded inside our OpenMP regions, over
 * fixed-size blocks so results do not depend on the thread count either),
 * libm expf, vectorised sums.
 * The GEMM layers reuse the linear ops (their chains are matmul's by
 * definition) and add the GELU pass; the GELU is gmath.h's in both modes
 * (inline + * fma: several times faster than libm's tanhf, and as exact). */
#include "dev/cpu_train_gpt.h"
#include "dev/cpu_train.h"
#include "dev/dev.h"
#include "dev/train_gpt_math.h"
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define KERNEL __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define KERNEL
#endif

/* Parallel regions below this much work run serially (see cpu_train_ops.c;
 * tests scale them to 0 with cpu_train_par_scale). */
#define PAR_MIN (262144.0 * cpu_train_par_scale)

static int nthreads(struct dev *d) { return d && d->threads > 0 ? d->threads : omp_get_max_threads(); }
static int golden(struct dev *d) { return d && d->numerics == NUMERICS_GOLDEN; }

static int blas_single(void)
{
    int prev = openblas_get_num_threads();
    if (prev != 1) openblas_set_num_threads(1);
    return prev;
}
static void blas_restore(int prev)
{
    if (prev != 1) openblas_set_num_threads(prev);
}

/* Grow-only scratch per calling thread (slot per use); per-OpenMP-thread
 * parts are carved out of one slot by the caller. */
enum { GS_A, GS_B, GS_C, GS_ROWS, GS_N };
static __thread void *gs_ptr[GS_N];
static __thread size_t gs_cap[GS_N];
static void *scratch(int slot, size_t bytes)
{
    if (bytes > gs_cap[slot]) {
        free(gs_ptr[slot]);
        gs_ptr[slot] = malloc(bytes);
        gs_cap[slot] = gs_ptr[slot] ? bytes : 0;
    }
    return gs_ptr[slot];
}

#define NEED(cond, ...)                                                                                     \
    do {                                                                                                    \
        if (!(cond)) return err_set(e, PLUMB_EUSAGE, __VA_ARGS__);                                          \
    } while (0)
#define RT_OK(op)                                                                                           \
    NEED(rt == DT_F32 || rt == DT_BF16 || rt == DT_F16, "%s: rounding type %d is not fp32, bf16 or fp16", op, \
         (int)rt)

/* The shared golden rows compiled for x86-64-v3 too (KERNEL), so their
 * fmaf is the instruction rather than libm's call; the same bits. */
KERNEL static void k_ln_fwd_row(const float *x, const float *w, const float *b, float *y, int C, float eps, int rt,
                                float *mu, float *rs)
{
    glayernorm_row(x, w, b, y, C, eps, mu, rs);
    for (int i = 0; i < C; i++) y[i] = gg_round(y[i], rt);
}
KERNEL static void k_ln_bwd_row(const float *x, const float *w, float mean, float rstd, const float *dy,
                                const float *dres, float *dx, int C, int rt)
{
    gpt_gold_ln_bwd_row(x, w, mean, rstd, dy, dres, dx, C, rt);
}
KERNEL static void k_attn_row(const float *q, const float *k0, const float *v0, size_t stride, int t, int HS,
                              float scale, float *p, float *out, float *lse, int rt)
{
    gpt_gold_attn_row(q, k0, v0, stride, t, HS, scale, p, out, lse, rt);
}
KERNEL static void k_attn_bwd_bh(const float *Q, const float *dOb, const float *Ob, const float *L, float *dQ, int T,
                                 int C, int HS, float scale, int rt, float *P, float *DS)
{
    const size_t C3 = 3 * (size_t)C;
    for (int t = 0; t < T; t++)
        gpt_gold_attn_bwd_row(Q + (size_t)t * C3, Q + C, Q + 2 * C, C3, dOb + (size_t)t * C, Ob + (size_t)t * C, t, HS,
                              scale, L[t], P + (size_t)t * T, DS + (size_t)t * T, dQ + (size_t)t * C3, rt);
    for (int j = 0; j < T; j++)
        gpt_gold_attn_bwd_key(Q, C3, dOb, (size_t)C, P, DS, (size_t)T, j, T, HS, scale, dQ + C + (size_t)j * C3,
                              dQ + 2 * C + (size_t)j * C3, rt);
}
KERNEL static float k_xent_row(float *z, int V, int tgt, float gs, int grad, int rt)
{
    return gpt_gold_xent_row(z, V, tgt, gs, grad ? z : NULL, rt);
}
KERNEL static void k_gelu(const float *pre, float *y, size_t n, int rt)
{
    for (size_t i = 0; i < n; i++) y[i] = gg_round(ggeluf(pre[i]), rt);
}
KERNEL static void k_dgelu(float *dx, const float *pre, size_t n, int rt)
{
    for (size_t i = 0; i < n; i++) dx[i] = gg_round(dx[i] * ggelu_gradf(pre[i]), rt);
}

/* ======================= embedding ======================= */

static int check_tokens(const char *op, const int32_t *tok, size_t n, int V, plumb_err *e)
{
    for (size_t i = 0; i < n; i++)
        if (tok[i] < 0 || (V > 0 && tok[i] >= V))
            return err_set(e, PLUMB_EUSAGE, "%s: token %d at position %zu (expected 0..%d)", op, tok[i], i,
                           V > 0 ? V - 1 : 2147483647);
    return PLUMB_OK;
}

int cpu_encoder_fwd(struct dev *d, dev_stream *s, const float *wte, const float *wpe, const int32_t *tok, float *out,
                    int B, int T, int C, dtype_t rt, plumb_err *e)
{
    (void)s;
    NEED(wte && wpe && tok && out, "encoder_fwd: NULL wte, wpe, tok or out");
    NEED(B > 0 && T > 0 && C > 0, "encoder_fwd: bad shape B=%d T=%d C=%d (expected > 0)", B, T, C);
    RT_OK("encoder_fwd");
    int rc = check_tokens("encoder_fwd", tok, (size_t)B * T, 0, e);
    if (rc) return rc;
    const int nt = nthreads(d);
    const long R = (long)B * T;
#pragma omp parallel for num_threads(nt) schedule(static) if ((double)R * C > PAR_MIN)
    for (long r = 0; r < R; r++) {
        const float *a = wte + (size_t)tok[r] * C, *p = wpe + (size_t)(r % T) * C;
        float *o = out + (size_t)r * C;
        for (int c = 0; c < C; c++) o[c] = gg_round(a[c] + p[c], rt);
    }
    return PLUMB_OK;
}

int cpu_encoder_bwd(struct dev *d, dev_stream *s, const float *dout, const int32_t *tok, float *dwte, float *dwpe,
                    int B, int T, int C, plumb_err *e)
{
    NEED(dout && tok && dwte && dwpe, "encoder_bwd: NULL dout, tok, dwte or dwpe");
    NEED(B > 0 && T > 0 && C > 0, "encoder_bwd: bad shape B=%d T=%d C=%d (expected > 0)", B, T, C);
    const size_t n = (size_t)B * T;
    int rc = check_tokens("encoder_bwd", tok, n, 0, e);
    if (rc) return rc;
    const int nt = nthreads(d);
    /* dwpe[t,:]: fp32 adds over b ascending from 0 */
#pragma omp parallel for num_threads(nt) schedule(static) if ((double)n * C > PAR_MIN)
    for (int t = 0; t < T; t++) {
        float *o = dwpe + (size_t)t * C;
        for (int c = 0; c < C; c++) o[c] = 0.0f;
        for (int b = 0; b < B; b++) {
            const float *g = dout + ((size_t)b * T + t) * C;
#pragma omp simd
            for (int c = 0; c < C; c++) o[c] = o[c] + g[c];
        }
    }
    /* dwte: each token's sum in embedding_bwd's order (one table at offset 0,
     * the positions as its samples), then one add into dwte per row */
    int64_t *rows = scratch(GS_ROWS, n * sizeof(int64_t) + 2 * sizeof(int64_t));
    float *sums = scratch(GS_A, n * (size_t)C * sizeof(float));
    if (!rows || !sums) return err_set(e, PLUMB_ENOMEM, "encoder_bwd: out of memory for %zu positions", n);
    int64_t *off = rows + n, *n_out = rows + n + 1;
    *off = 0;
    rc = cpu_train_ops.embedding_bwd(d, s, off, (const uint32_t *)tok, dout, (int)n, (int)n, 1, C, rows, sums, n_out, e);
    if (rc) return rc;
    const long U = (long)*n_out;
#pragma omp parallel for num_threads(nt) schedule(static) if ((double)U * C > PAR_MIN)
    for (long u = 0; u < U; u++) {
        float *o = dwte + (size_t)rows[u] * C;
        const float *g = sums + (size_t)u * C;
        for (int c = 0; c < C; c++) o[c] = o[c] + g[c];
    }
    return PLUMB_OK;
}

int cpu_residual_fwd(struct dev *d, dev_stream *s, const float *a, const float *b, float *y, size_t n, dtype_t rt,
                     plumb_err *e)
{
    (void)s;
    NEED((a && b && y) || n == 0, "residual_fwd: NULL a, b or y");
    RT_OK("residual_fwd");
    const int nt = nthreads(d);
#pragma omp parallel for num_threads(nt) schedule(static) if (n > PAR_MIN)
    for (size_t i = 0; i < n; i++) y[i] = gg_round(a[i] + b[i], rt);
    return PLUMB_OK;
}

/* ======================= layernorm ======================= */

KERNEL static void ln_fast_row(const float *restrict x, const float *restrict w, const float *restrict b,
                               float *restrict y, int C, float eps, int rt, float *mean_out, float *rstd_out)
{
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int i = 0; i < C; i++) sum += x[i];
    const float mean = sum / (float)C;
    float var = 0.0f;
#pragma omp simd reduction(+ : var)
    for (int i = 0; i < C; i++) {
        const float dd = x[i] - mean;
        var += dd * dd;
    }
    const float rstd = 1.0f / sqrtf(var / (float)C + eps);
#pragma omp simd
    for (int i = 0; i < C; i++) y[i] = (x[i] - mean) * rstd * w[i] + b[i];
    if (rt != DT_F32)
        for (int i = 0; i < C; i++) y[i] = gg_round(y[i], rt);
    if (mean_out) *mean_out = mean;
    if (rstd_out) *rstd_out = rstd;
}

int cpu_layernorm_fwd(struct dev *d, dev_stream *s, const float *x, const float *w, const float *b, float *y,
                      float *mean, float *rstd, int R, int C, float eps, dtype_t rt, plumb_err *e)
{
    (void)s;
    NEED(x && w && b && y, "layernorm_fwd: NULL x, w, b or y");
    NEED(x != y, "layernorm_fwd: y must not alias x (the backward reads x)");
    NEED(R > 0 && C > 0, "layernorm_fwd: bad shape R=%d C=%d (expected > 0)", R, C);
    NEED(eps > 0.0f, "layernorm_fwd: eps %g (expected > 0)", (double)eps);
    RT_OK("layernorm_fwd");
    const int nt = nthreads(d), g = golden(d);
#pragma omp parallel for num_threads(nt) schedule(static) if ((double)R * C > PAR_MIN)
    for (int r = 0; r < R; r++) {
        const float *xr = x + (size_t)r * C;
        float *yr = y + (size_t)r * C, mu, rs;
        if (g) {
            k_ln_fwd_row(xr, w, b, yr, C, eps, (int)rt, &mu, &rs);
        } else {
            ln_fast_row(xr, w, b, yr, C, eps, (int)rt, &mu, &rs);
        }
        if (mean) mean[r] = mu;
        if (rstd) rstd[r] = rs;
    }
    return PLUMB_OK;
}

KERNEL static void ln_bwd_fast_row(const float *restrict x, const float *restrict w, float mean, float rstd,
                                   const float *restrict dy, const float *dres, float *dx, int C, int rt)
{
    float a = 0.0f, c = 0.0f;
#pragma omp simd reduction(+ : a, c)
    for (int i = 0; i < C; i++) {
        const float g = dy[i] * w[i];
        a += g;
        c += g * ((x[i] - mean) * rstd);
    }
    a = a / (float)C;
    c = c / (float)C;
    for (int i = 0; i < C; i++) {
        const float g = dy[i] * w[i], h = (x[i] - mean) * rstd;
        const float v = ((g - a) - h * c) * rstd;
        dx[i] = gg_round(dres ? dres[i] + v : v, rt);
    }
}

/* dw[i], db[i] for columns [c0, c1): chains over r ascending from 0 (both modes) */
KERNEL static void ln_dwdb_cols(const float *restrict x, const float *restrict mean, const float *restrict rstd,
                                const float *restrict dy, float *restrict dw, float *restrict db, int R, int C, int c0,
                                int c1)
{
    for (int i = c0; i < c1; i++) {
        dw[i] = 0.0f;
        db[i] = 0.0f;
    }
    for (int r = 0; r < R; r++) {
        const float *xr = x + (size_t)r * C, *gr = dy + (size_t)r * C;
        const float mu = mean[r], rs = rstd[r];
#pragma omp simd
        for (int i = c0; i < c1; i++) {
            const float h = (xr[i] - mu) * rs;
            dw[i] = fmaf(gr[i], h, dw[i]);
            db[i] = db[i] + gr[i];
        }
    }
}

int cpu_layernorm_bwd(struct dev *d, dev_stream *s, const float *x, const float *w, const float *mean,
                      const float *rstd, const float *dy, const float *dres, float *dx, float *dw, float *db, int R,
                      int C, dtype_t rt, plumb_err *e)
{
    (void)s;
    NEED(x && w && mean && rstd && dy && dx && dw && db, "layernorm_bwd: NULL argument");
    NEED(dx != dy && dx != x, "layernorm_bwd: dx must not alias x or dy (it may alias dres)");
    NEED(R > 0 && C > 0, "layernorm_bwd: bad shape R=%d C=%d (expected > 0)", R, C);
    RT_OK("layernorm_bwd");
    const int nt = nthreads(d), g = golden(d);
    const int par = (double)R * C > PAR_MIN;
#pragma omp parallel num_threads(nt) if (par)
    {
        int t = omp_get_thread_num(), Tn = omp_get_num_threads();
        int c0 = (int)((long)C * t / Tn), c1 = (int)((long)C * (t + 1) / Tn);
        if (c1 > c0) ln_dwdb_cols(x, mean, rstd, dy, dw, db, R, C, c0, c1);
    }
#pragma omp parallel for num_threads(nt) schedule(static) if (par)
    for (int r = 0; r < R; r++) {
        const size_t o = (size_t)r * C;
        if (g)
            k_ln_bwd_row(x + o, w, mean[r], rstd[r], dy + o, dres ? dres + o : NULL, dx + o, C, (int)rt);
        else
            ln_bwd_fast_row(x + o, w, mean[r], rstd[r], dy + o, dres ? dres + o : NULL, dx + o, C, (int)rt);
    }
    return PLUMB_OK;
}

/* ======================= GEMM + GELU ======================= */

int cpu_matmul_fwd(struct dev *d, dev_stream *s, const float *x, const float *w, const float *bias, float *y,
                   float *pre, int B, int K, int N, int gelu, dtype_t rt, plumb_err *e)
{
    NEED(x && w && y, "matmul_fwd: NULL x, w or y");
    NEED(!gelu || (pre && pre != y), "matmul_fwd: gelu needs pre, distinct from y");
    NEED(B > 0 && K > 0 && N > 0, "matmul_fwd: bad shape B=%d K=%d N=%d (expected > 0)", B, K, N);
    RT_OK("matmul_fwd");
    /* a = x w^T + bias is linear_fwd's chain (relu 0), rounded */
    int rc = cpu_train_ops.linear_fwd(d, s, x, w, bias, gelu ? pre : y, B, K, N, 0, rt, e);
    if (rc || !gelu) return rc;
    const size_t n = (size_t)B * N;
    const int nt = nthreads(d);
#pragma omp parallel num_threads(nt) if (n > PAR_MIN / 8)
    {
        const int t = omp_get_thread_num(), Tn = omp_get_num_threads();
        const size_t i0 = n * t / Tn, i1 = n * (t + 1) / Tn;
        k_gelu(pre + i0, y + i0, i1 - i0, (int)rt);
    }
    return PLUMB_OK;
}

int cpu_matmul_bwd(struct dev *d, dev_stream *s, const float *x, const float *w, const float *dy, const float *pre_in,
                   float *dx, float *dw, float *dbias, int B, int K, int N, dtype_t rt, plumb_err *e)
{
    NEED(x && w && dy && dw, "matmul_bwd: NULL x, w, dy or dw");
    NEED(B > 0 && K > 0 && N > 0, "matmul_bwd: bad shape B=%d K=%d N=%d (expected > 0)", B, K, N);
    RT_OK("matmul_bwd");
    /* linear_bwd with relu 0 reads dy only; dx unrounded when the GELU follows */
    int rc = cpu_train_ops.linear_bwd(d, s, x, w, NULL, (float *)dy, dx, dw, dbias, B, K, N, 0,
                                      pre_in && dx ? DT_F32 : rt, e);
    if (rc || !pre_in || !dx) return rc;
    const size_t n = (size_t)B * K;
    const int nt = nthreads(d);
#pragma omp parallel num_threads(nt) if (n > PAR_MIN / 8)
    {
        const int t = omp_get_thread_num(), Tn = omp_get_num_threads();
        const size_t i0 = n * t / Tn, i1 = n * (t + 1) / Tn;
        k_dgelu(dx + i0, pre_in + i0, i1 - i0, (int)rt);
    }
    return PLUMB_OK;
}

/* ======================= attention ======================= */

static int attn_args(const char *op, int B, int T, int NH, int HS, plumb_err *e)
{
    NEED(B > 0 && T > 0 && NH > 0 && HS > 0, "%s: bad shape B=%d T=%d NH=%d HS=%d (expected > 0)", op, B, T, NH, HS);
    NEED((double)NH * HS * 3 < 2147483647.0, "%s: width %d x %d too large", op, NH, HS);
    return PLUMB_OK;
}

static float attn_scale(int HS) { return 1.0f / sqrtf((float)HS); }

/* fast forward of one (b, h): S = scale Q K^T [T, T] by sgemm, causal
 * softmax rows (expf), O = P V by sgemm, rounded. */
static void attn_fwd_fast_bh(const float *Q, const float *K, const float *V, float *O, float *lse, int T, int C,
                             int HS, float scale, int rt, float *S)
{
    const int C3 = 3 * C;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, HS, scale, Q, C3, K, C3, 0.0f, S, T);
    for (int t = 0; t < T; t++) {
        float *row = S + (size_t)t * T, m = row[0];
        for (int j = 1; j <= t; j++) m = row[j] > m ? row[j] : m;
        float l = 0.0f;
        for (int j = 0; j <= t; j++) {
            row[j] = expf(row[j] - m);
            l += row[j];
        }
        const float inv = 1.0f / l;
        for (int j = 0; j <= t; j++) row[j] *= inv;
        for (int j = t + 1; j < T; j++) row[j] = 0.0f;
        lse[t] = m + logf(l);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, HS, T, 1.0f, S, T, V, C3, 0.0f, O, C);
    if (rt != DT_F32)
        for (int t = 0; t < T; t++)
            for (int i = 0; i < HS; i++) O[(size_t)t * C + i] = gg_round(O[(size_t)t * C + i], rt);
}

int cpu_attention_fwd(struct dev *d, dev_stream *s, const float *qkv, float *out, float *lse, int B, int T, int NH,
                      int HS, dtype_t rt, plumb_err *e)
{
    (void)s;
    NEED(qkv && out && lse, "attention_fwd: NULL qkv, out or lse");
    int rc = attn_args("attention_fwd", B, T, NH, HS, e);
    if (rc) return rc;
    RT_OK("attention_fwd");
    const int C = NH * HS, C3 = 3 * C, nt = nthreads(d);
    const float scale = attn_scale(HS);
    const double work = (double)B * NH * T * T * HS;
    if (golden(d)) {
        float *p = scratch(GS_A, (size_t)nt * T * sizeof(float));
        if (!p) return err_set(e, PLUMB_ENOMEM, "attention_fwd: out of memory");
        const long rows = (long)B * NH * T;
#pragma omp parallel num_threads(nt) if (work > PAR_MIN * 16)
        {
            float *pt = p + (size_t)omp_get_thread_num() * T;
#pragma omp for schedule(dynamic, 16)
            for (long q = 0; q < rows; q++) {
                const int t = (int)(q % T), h = (int)(q / T % NH), b = (int)(q / ((long)T * NH));
                const float *base = qkv + (size_t)b * T * C3 + (size_t)h * HS;
                k_attn_row(base + (size_t)t * C3, base + C, base + 2 * C, (size_t)C3, t, HS, scale, pt,
                                  out + ((size_t)b * T + t) * C + (size_t)h * HS, lse + ((size_t)b * NH + h) * T + t,
                                  (int)rt);
            }
        }
        return PLUMB_OK;
    }
    float *S = scratch(GS_A, (size_t)nt * T * T * sizeof(float));
    if (!S) return err_set(e, PLUMB_ENOMEM, "attention_fwd: out of memory for %d x %d scores", T, T);
    int prev = blas_single();
#pragma omp parallel num_threads(nt) if (work > PAR_MIN * 16)
    {
        float *St = S + (size_t)omp_get_thread_num() * T * T;
#pragma omp for schedule(dynamic, 1)
        for (int bh = 0; bh < B * NH; bh++) {
            const int b = bh / NH, h = bh % NH;
            const float *Q = qkv + (size_t)b * T * C3 + (size_t)h * HS;
            attn_fwd_fast_bh(Q, Q + C, Q + 2 * C, out + (size_t)b * T * C + (size_t)h * HS, lse + (size_t)bh * T, T, C,
                             HS, scale, (int)rt, St);
        }
    }
    blas_restore(prev);
    return PLUMB_OK;
}

/* fast backward of one (b, h) with two [T, T] scratch matrices */
static void attn_bwd_fast_bh(const float *Q, const float *K, const float *V, const float *O, const float *dO,
                             const float *lse, float *dQ, float *dK, float *dV, int T, int C, int HS, float scale, int rt,
                             float *P, float *dS)
{
    const int C3 = 3 * C;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, HS, scale, Q, C3, K, C3, 0.0f, P, T);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, HS, 1.0f, dO, C, V, C3, 0.0f, dS, T);
    for (int t = 0; t < T; t++) {
        float Dt = 0.0f;
        for (int i = 0; i < HS; i++) Dt += dO[(size_t)t * C + i] * O[(size_t)t * C + i];
        float *pr = P + (size_t)t * T, *sr = dS + (size_t)t * T;
        for (int j = 0; j <= t; j++) {
            pr[j] = expf(pr[j] - lse[t]);
            sr[j] = pr[j] * (sr[j] - Dt);
        }
        for (int j = t + 1; j < T; j++) pr[j] = sr[j] = 0.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, HS, T, scale, dS, T, K, C3, 0.0f, dQ, C3);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, HS, T, scale, dS, T, Q, C3, 0.0f, dK, C3);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, HS, T, 1.0f, P, T, dO, C, 0.0f, dV, C3);
    if (rt != DT_F32)
        for (int t = 0; t < T; t++)
            for (int i = 0; i < HS; i++) {
                const size_t o = (size_t)t * C3 + i;
                dQ[o] = gg_round(dQ[o], rt);
                dK[o] = gg_round(dK[o], rt);
                dV[o] = gg_round(dV[o], rt);
            }
}

int cpu_attention_bwd(struct dev *d, dev_stream *s, const float *qkv, const float *out, const float *lse,
                      const float *dout, float *dqkv, int B, int T, int NH, int HS, dtype_t rt, plumb_err *e)
{
    (void)s;
    NEED(qkv && out && lse && dout && dqkv, "attention_bwd: NULL argument");
    NEED(dqkv != qkv, "attention_bwd: dqkv must not alias qkv");
    int rc = attn_args("attention_bwd", B, T, NH, HS, e);
    if (rc) return rc;
    RT_OK("attention_bwd");
    const int C = NH * HS, C3 = 3 * C, nt = nthreads(d), g = golden(d);
    const float scale = attn_scale(HS);
    const double work = (double)B * NH * T * T * HS;
    float *P = scratch(GS_A, (size_t)nt * 2 * T * T * sizeof(float));
    if (!P) return err_set(e, PLUMB_ENOMEM, "attention_bwd: out of memory for %d x %d scores", T, T);
    int prev = g ? 1 : blas_single();
#pragma omp parallel num_threads(nt) if (work > PAR_MIN * 16)
    {
        float *Pt = P + (size_t)omp_get_thread_num() * 2 * T * T, *DSt = Pt + (size_t)T * T;
#pragma omp for schedule(dynamic, 1)
        for (int bh = 0; bh < B * NH; bh++) {
            const int b = bh / NH, h = bh % NH;
            const float *Q = qkv + (size_t)b * T * C3 + (size_t)h * HS;
            const float *Ob = out + (size_t)b * T * C + (size_t)h * HS, *dOb = dout + (size_t)b * T * C + (size_t)h * HS;
            float *dQ = dqkv + (size_t)b * T * C3 + (size_t)h * HS;
            const float *L = lse + (size_t)bh * T;
            if (!g) {
                attn_bwd_fast_bh(Q, Q + C, Q + 2 * C, Ob, dOb, L, dQ, dQ + C, dQ + 2 * C, T, C, HS, scale, (int)rt, Pt,
                                 DSt);
                continue;
            }
            k_attn_bwd_bh(Q, dOb, Ob, L, dQ, T, C, HS, scale, (int)rt, Pt, DSt);
        }
    }
    if (!g) blas_restore(prev);
    return PLUMB_OK;
}

/* ======================= classifier + cross-entropy ======================= */

/* Rows per chunk: the chunk's fp32 logits [RC, V] stay within
 * cpu_gpt_xent_chunk_bytes (64 MiB; tests shrink it to force many chunks). */
size_t cpu_gpt_xent_chunk_bytes = (size_t)64 << 20;
static int xent_chunk_rows(int R, int V)
{
    long rc = (long)(cpu_gpt_xent_chunk_bytes / 4 / (size_t)(V > 0 ? V : 1));
    if (rc < 1) rc = 1;
    return rc < R ? (int)rc : R;
}

/* golden logits of rows [r0, r1) of a chunk: z[r, v] chains over c
 * ascending from 0, vectorised across v with the transposed table wT [C, V] */
KERNEL static void xent_gold_logits(const float *restrict x, const float *restrict wT, float *restrict z, int r0,
                                    int r1, int C, int V, int rt)
{
    for (int r = r0; r < r1; r++) {
        float *zr = z + (size_t)r * V;
        const float *xr = x + (size_t)r * C;
        for (int v = 0; v < V; v++) zr[v] = 0.0f;
        for (int c = 0; c < C; c++) {
            const float xv = xr[c], *wr = wT + (size_t)c * V;
#pragma omp simd
            for (int v = 0; v < V; v++) zr[v] = fmaf(xv, wr[v], zr[v]);
        }
        if (rt != DT_F32)
            for (int v = 0; v < V; v++) zr[v] = gg_round(zr[v], rt);
    }
}

/* golden dx rows: chains over v ascending from 0 */
KERNEL static void xent_gold_dx(const float *restrict g, const float *restrict w, float *restrict dx, int r0, int r1,
                                int C, int V, int rt)
{
    for (int r = r0; r < r1; r++) {
        float *o = dx + (size_t)r * C;
        const float *gr = g + (size_t)r * V;
        for (int c = 0; c < C; c++) o[c] = 0.0f;
        for (int v = 0; v < V; v++) {
            const float gv = gr[v], *wr = w + (size_t)v * C;
#pragma omp simd
            for (int c = 0; c < C; c++) o[c] = fmaf(gv, wr[c], o[c]);
        }
        for (int c = 0; c < C; c++) o[c] = gg_round(o[c], rt);
    }
}

/* golden dwte rows [v0, v1): the chains continue over the chunk's rows in
 * ascending order (dwte holds the chain so far) */
KERNEL static void xent_gold_dw(const float *restrict g, const float *restrict x, float *restrict dw, int v0, int v1,
                                int nr, int C, int V)
{
    for (int v = v0; v < v1; v++) {
        float *o = dw + (size_t)v * C;
        for (int r = 0; r < nr; r++) {
            const float gv = g[(size_t)r * V + v], *xr = x + (size_t)r * C;
#pragma omp simd
            for (int c = 0; c < C; c++) o[c] = fmaf(gv, xr[c], o[c]);
        }
    }
}

/* fast loss + gradient of one row, in place on z (libm expf/logf) */
static float xent_fast_row(float *z, int V, int tgt, float grad_scale, int want_grad, int rt)
{
    float m = z[0];
    for (int v = 1; v < V; v++) m = z[v] > m ? z[v] : m;
    float l = 0.0f;
    for (int v = 0; v < V; v++) l += expf(z[v] - m);
    const float loss = (m + logf(l)) - z[tgt];
    if (want_grad) {
        const float inv = 1.0f / l;
        for (int v = 0; v < V; v++) {
            const float p = expf(z[v] - m) * inv;
            z[v] = gg_round((p - (v == tgt ? 1.0f : 0.0f)) * grad_scale, rt);
        }
    }
    return loss;
}

int cpu_classifier_fwd_bwd(struct dev *d, dev_stream *s, const float *x, const float *wte, const int32_t *tgt, int R,
                           int C, int V, float grad_scale, float *losses, double *sum_count, float *dx, float *dwte,
                           dtype_t rt, plumb_err *e)
{
    (void)s;
    NEED(x && wte && tgt, "classifier_fwd_bwd: NULL x, wte or tgt");
    NEED(!dx || dwte, "classifier_fwd_bwd: dx needs dwte");
    NEED(R > 0 && C > 0 && V > 0, "classifier_fwd_bwd: bad shape R=%d C=%d V=%d (expected > 0)", R, C, V);
    RT_OK("classifier_fwd_bwd");
    for (int r = 0; r < R; r++)
        NEED(tgt[r] < V, "classifier_fwd_bwd: target %d at row %d (expected < %d, or < 0 to ignore)", tgt[r], r, V);
    const int nt = nthreads(d), g = golden(d), grad = dx != NULL;
    const int RC = xent_chunk_rows(R, V);
    float *Z = scratch(GS_A, (size_t)RC * V * sizeof(float));
    float *lr = scratch(GS_C, (size_t)R * sizeof(float));
    float *wT = g ? scratch(GS_B, (size_t)C * V * sizeof(float)) : NULL;
    if (!Z || !lr || (g && !wT)) return err_set(e, PLUMB_ENOMEM, "classifier_fwd_bwd: out of memory");
    if (g)
        for (int v = 0; v < V; v++)
            for (int c = 0; c < C; c++) wT[(size_t)c * V + v] = wte[(size_t)v * C + c];
    if (grad) memset(dwte, 0, (size_t)V * C * sizeof(float));
    const double work = 2.0 * RC * C * V;
    const int par = work > PAR_MIN * 16;
    enum { RB = 64, VB = 256 }; /* fixed BLAS blocks: results independent of the thread count */
    int prev = g ? 1 : blas_single();
    for (int r0 = 0; r0 < R; r0 += RC) {
        const int nr = R - r0 < RC ? R - r0 : RC;
        const float *xc = x + (size_t)r0 * C;
        const int nrb = (nr + RB - 1) / RB;
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (par && nrb > 1)
        for (int rb = 0; rb < nrb; rb++) {
            const int a = rb * RB, bnd = a + RB < nr ? a + RB : nr;
            if (g) {
                xent_gold_logits(xc, wT, Z, a, bnd, C, V, (int)rt);
            } else {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bnd - a, V, C, 1.0f, xc + (size_t)a * C, C, wte,
                            C, 0.0f, Z + (size_t)a * V, V);
                if (rt != DT_F32)
                    for (size_t i = (size_t)a * V; i < (size_t)bnd * V; i++) Z[i] = gg_round(Z[i], rt);
            }
            for (int r = a; r < bnd; r++) {
                float *zr = Z + (size_t)r * V;
                const int tg = tgt[r0 + r];
                if (tg < 0) {
                    lr[r0 + r] = 0.0f;
                    if (grad) memset(zr, 0, (size_t)V * sizeof(float));
                    continue;
                }
                lr[r0 + r] = g ? k_xent_row(zr, V, tg, grad_scale, grad, (int)rt)
                               : xent_fast_row(zr, V, tg, grad_scale, grad, (int)rt);
            }
            if (!grad) continue;
            if (g) {
                xent_gold_dx(Z, wte, dx + (size_t)r0 * C, a, bnd, C, V, (int)rt);
            } else {
                float *o = dx + ((size_t)r0 + a) * C;
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bnd - a, C, V, 1.0f, Z + (size_t)a * V, V, wte,
                            C, 0.0f, o, C);
                if (rt != DT_F32)
                    for (size_t i = 0; i < (size_t)(bnd - a) * C; i++) o[i] = gg_round(o[i], rt);
            }
        }
        if (!grad) continue;
        const int nvb = (V + VB - 1) / VB;
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (par && nvb > 1)
        for (int vb = 0; vb < nvb; vb++) {
            const int v0 = vb * VB, v1 = v0 + VB < V ? v0 + VB : V;
            if (g)
                xent_gold_dw(Z, xc, dwte, v0, v1, nr, C, V);
            else /* dwte[v0:v1) += G[:, v0:v1)^T X (the first chunk's beta 0 is the memset's 0) */
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, v1 - v0, C, nr, 1.0f, Z + v0, V, xc, C, 1.0f,
                            dwte + (size_t)v0 * C, C);
        }
    }
    if (!g) blas_restore(prev);
    if (losses) memcpy(losses, lr, (size_t)R * sizeof(float));
    if (sum_count) {
        double sum = 0.0;
        long cnt = 0;
        for (int r = 0; r < R; r++)
            if (tgt[r] >= 0) {
                sum += (double)lr[r];
                cnt++;
            }
        sum_count[0] = sum;
        sum_count[1] = (double)cnt;
    }
    return PLUMB_OK;
}

/* ======================= AdamW with per-tensor decay ======================= */

KERNEL static void adamw_seg(float *restrict w, const float *restrict g, float *restrict m, float *restrict v,
                             size_t n, float lr, float b1, float b2, float eps, float wd, float bc1, float bc2,
                             float gscale)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) gpt_adamw_one(w + i, g[i], m + i, v + i, lr, b1, b2, eps, wd, bc1, bc2, gscale);
}

struct adamw_args {
    float *w, *m, *v;
    const float *g;
    float lr, b1, b2, eps, bc1, bc2, gscale;
};
static void adamw_seg_of(void *ctx, size_t i, size_t end, float wdi)
{
    const struct adamw_args *a = ctx;
    adamw_seg(a->w + i, a->g + i, a->m + i, a->v + i, end - i, a->lr, a->b1, a->b2, a->eps, wdi, a->bc1, a->bc2,
              a->gscale);
}

int cpu_adamw_masked(struct dev *d, dev_stream *s, float *w, const float *g, float *m, float *v, size_t n, float lr,
                     float b1, float b2, float eps, float wd, float bc1, float bc2, float gscale, const int64_t *dec,
                     int nr, plumb_err *e)
{
    (void)s;
    NEED((w && g && m && v) || n == 0, "adamw_masked: NULL w, g, m or v");
    NEED(bc1 > 0.0f && bc1 <= 1.0f && bc2 > 0.0f && bc2 <= 1.0f,
         "adamw_masked: bias corrections bc1=%g bc2=%g (expected in (0,1])", (double)bc1, (double)bc2);
    char why[256];
    if (cpu_decay_ranges_bad(dec, nr, n, "adamw_masked", why, sizeof why)) return err_set(e, PLUMB_EUSAGE, "%s", why);
    struct adamw_args a = {w, m, v, g, lr, b1, b2, eps, bc1, bc2, gscale};
    const int nt = nthreads(d);
#pragma omp parallel num_threads(nt) if (n > PAR_MIN)
    {
        const int t = omp_get_thread_num(), Tn = omp_get_num_threads();
        cpu_decay_segments(n * t / Tn, n * (t + 1) / Tn, dec, nr, wd, adamw_seg_of, &a);
    }
    return PLUMB_OK;
}
