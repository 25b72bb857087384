/* The cpu backend's training ops (dev/train_ops.h gives every definition and
 * the golden evaluation orders).
 *
 * Fast: OpenBLAS sgemm for the linear layers, OpenMP loops elsewhere.
 * Golden: every output element is computed by one thread as one fmaf chain in
 * the documented order; loops vectorise across independent outputs only
 * (never inside a chain), so results do not depend on the thread count or on
 * the vector width. Kernels are cloned for x86-64-v3 (AVX2+FMA) with a
 * default fallback; fmaf is correctly rounded in both, so the bits agree. */
#include "dev/train_ops.h"
#include "dev/cpu_train.h"
#include "dev/cpu_train_gpt.h"
#include "dev/dev.h"
#include "dev/train_math.h"
#include "dev/cpu_train_vision.h"
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define KERNEL __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define KERNEL
#endif

/* Below these sizes (about a millisecond of work) a parallel region costs
 * more than it saves, and on a loaded machine spinning OpenMP threads are
 * expensive: run serially. Tests scale them to 0 to force every parallel path
 * (cpu_train_par_scale, dev/train_ops.h); results never depend on it. */
double cpu_train_par_scale = 1.0;
#define PAR_MIN (262144.0 * cpu_train_par_scale)
#define PAR_MIN_FLOP (3e7 * cpu_train_par_scale)

static int nthreads(struct dev *d)
{
    return d && d->threads > 0 ? d->threads : omp_get_max_threads();
}
/* Fast linear layers: rows per sgemm call (the epilogue runs while the
 * chunk is in L2). */
#define LIN_CHUNK 256
/* Rows per work item of the per-sample kernels. Work items are handed out
 * dynamically (a descheduled thread on a shared machine does not hold up
 * the others); every output element is computed the same way whichever
 * thread takes it, so results do not change. */
#define ROW_CHUNK 64

/* OpenBLAS runs single-threaded inside our OpenMP regions; the caller's
 * setting is restored afterwards. */
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

/* Grow-only scratch buffers per calling thread (ops are called from one
 * thread per device), so steady-state steps do not page-fault fresh memory. */
enum { SC_KEYS, SC_PERM, SC_SEG, SC_TMP, SC_INTER, SC_WT, SC_ACC, SC_PART, SC_N };
static __thread void *sc_ptr[SC_N];
static __thread size_t sc_cap[SC_N];
/* a thread's buffers are freed when it exits (a pthread key's destructor) */
static pthread_key_t sc_key;
static pthread_once_t sc_once = PTHREAD_ONCE_INIT;
static void sc_free(void *unused)
{
    (void)unused;
    for (int i = 0; i < SC_N; i++) {
        free(sc_ptr[i]);
        sc_ptr[i] = NULL;
        sc_cap[i] = 0;
    }
}
static void sc_key_make(void) { (void)pthread_key_create(&sc_key, sc_free); }
static void *scratch(int slot, size_t bytes)
{
    if (bytes > sc_cap[slot]) {
        free(sc_ptr[slot]);
        sc_ptr[slot] = malloc(bytes);
        sc_cap[slot] = sc_ptr[slot] ? bytes : 0;
        (void)pthread_once(&sc_once, sc_key_make);
        (void)pthread_setspecific(sc_key, (void *)1);
    }
    return sc_ptr[slot];
}

static int golden(struct dev *d) { return d && d->numerics == NUMERICS_GOLDEN; }

static inline float round_to(float x, dtype_t rt)
{
    if (rt == DT_BF16) return bf16_to_f32(f32_to_bf16(x));
    if (rt == DT_F16) return f16_to_f32(f32_to_f16(x));
    return x;
}

static int check_rt(const char *op, dtype_t rt, plumb_err *e)
{
    if (rt != DT_F32 && rt != DT_BF16 && rt != DT_F16)
        return err_set(e, PLUMB_EUSAGE, "%s: rounding type %d is not fp32, bf16 or fp16", op,
                       (int)rt);
    return PLUMB_OK;
}

#define RT_OK(op)                                                                        \
    do {                                                                                 \
        int rc_ = check_rt(op, rt, e);                                                   \
        if (rc_) return rc_;                                                             \
    } while (0)

#define NEED(cond, ...)                                                                  \
    do {                                                                                 \
        if (!(cond)) return err_set(e, PLUMB_EUSAGE, __VA_ARGS__);                       \
    } while (0)

/* y[i] = round(x[i]) over [n]; in place allowed */
static void round_array(float *y, const float *x, size_t n, dtype_t rt, int nt)
{
    if (rt == DT_F32) {
        if (y != x) memcpy(y, x, n * sizeof(float));
        return;
    }
#pragma omp parallel for num_threads(nt) schedule(static) if (n > PAR_MIN)
    for (size_t i = 0; i < n; i++) y[i] = round_to(x[i], rt);
}

/* ======================= linear ======================= */

/* golden forward, rows [b0,b1): acc[n] chains over k (wT [K,N]) */
KERNEL static void lin_fwd_rows(const float *restrict x, const float *restrict wT,
                                const float *restrict bias, float *restrict y, int b0, int b1,
                                int K, int N, int relu, dtype_t rt, float *restrict acc)
{
    for (int b = b0; b < b1; b++) {
        for (int n = 0; n < N; n++) acc[n] = 0.0f;
        const float *xr = x + (size_t)b * K;
        for (int k = 0; k < K; k++) {
            const float xv = xr[k];
            const float *wr = wT + (size_t)k * N;
#pragma omp simd
            for (int n = 0; n < N; n++) acc[n] = fmaf(xv, wr[n], acc[n]);
        }
        float *yr = y + (size_t)b * N;
        for (int n = 0; n < N; n++) {
            float v = bias ? acc[n] + bias[n] : acc[n];
            if (relu) v = v > 0.0f ? v : 0.0f;
            yr[n] = round_to(v, rt);
        }
    }
}

/* golden dx rows [b0,b1): acc[k] chains over n */
KERNEL static void lin_dx_rows(const float *restrict dy, const float *restrict w,
                               float *restrict dx, int b0, int b1, int K, int N, dtype_t rt,
                               float *restrict acc)
{
    for (int b = b0; b < b1; b++) {
        for (int k = 0; k < K; k++) acc[k] = 0.0f;
        const float *dyr = dy + (size_t)b * N;
        for (int n = 0; n < N; n++) {
            const float g = dyr[n];
            const float *wr = w + (size_t)n * K;
#pragma omp simd
            for (int k = 0; k < K; k++) acc[k] = fmaf(g, wr[k], acc[k]);
        }
        float *dxr = dx + (size_t)b * K;
        for (int k = 0; k < K; k++) dxr[k] = round_to(acc[k], rt);
    }
}

/* golden dw rows [n0,n1): dw[n,k] chains over b */
KERNEL static void lin_dw_rows(const float *restrict dy, const float *restrict x,
                               float *restrict dw, int n0, int n1, int B, int K, int N)
{
    for (int n = n0; n < n1; n++) {
        float *acc = dw + (size_t)n * K;
        for (int k = 0; k < K; k++) acc[k] = 0.0f;
        for (int b = 0; b < B; b++) {
            const float g = dy[(size_t)b * N + n];
            const float *xr = x + (size_t)b * K;
#pragma omp simd
            for (int k = 0; k < K; k++) acc[k] = fmaf(g, xr[k], acc[k]);
        }
    }
}

/* dbias[n] = sum over b ascending, plain adds (both modes) */
KERNEL static void col_sum(const float *restrict dy, float *restrict db, int n0, int n1, int B,
                           int N)
{
    for (int n = n0; n < n1; n++) db[n] = 0.0f;
    for (int b = 0; b < B; b++) {
        const float *r = dy + (size_t)b * N;
#pragma omp simd
        for (int n = n0; n < n1; n++) db[n] = db[n] + r[n];
    }
}

/* db [N] = dy [B, N] summed over the rows in order (col_sum), the columns
 * split over the threads: linear_bwd's dbias, and cpu_layernorm_bwd16's
 * dsum (the same bits, as gpt's 16-bit pipeline needs) */
void cpu_col_sums(struct dev *d, const float *dy, float *db, int B, int N)
{
    const size_t BN = (size_t)B * N;
#pragma omp parallel num_threads(nthreads(d)) if (BN > PAR_MIN)
    {
        int t = omp_get_thread_num(), T = omp_get_num_threads();
        int n0 = (int)((long)N * t / T), n1 = (int)((long)N * (t + 1) / T);
        col_sum(dy, db, n0, n1, B, N);
    }
}

/* y[b,n] = round(relu(y[b,n] + bias[n])) over [B, N] */
KERNEL static void epilogue(float *restrict y, const float *restrict bias, int B, int N, int relu,
                            dtype_t rt)
{
    for (int b = 0; b < B; b++) {
        float *yr = y + (size_t)b * N;
        if (bias) {
#pragma omp simd
            for (int n = 0; n < N; n++) yr[n] = yr[n] + bias[n];
        }
        if (relu) {
#pragma omp simd
            for (int n = 0; n < N; n++) yr[n] = yr[n] > 0.0f ? yr[n] : 0.0f;
        }
        if (rt != DT_F32)
            for (int n = 0; n < N; n++) yr[n] = round_to(yr[n], rt);
    }
}

static int cpu_linear_fwd(struct dev *d, dev_stream *s, const float *x, const float *w,
                          const float *bias, float *y, int B, int K, int N, int relu, dtype_t rt,
                          plumb_err *e)
{
    (void)s;
    NEED(x && w && y, "linear_fwd: NULL x, w or y");
    NEED(B > 0 && K > 0 && N > 0, "linear_fwd: bad shape B=%d K=%d N=%d (expected > 0)", B, K, N);
    RT_OK("linear_fwd");
    int nt = nthreads(d);
    if (!golden(d)) {
        /* OpenMP threads over row chunks, each a single-threaded sgemm with
         * the epilogue (bias, ReLU, rounding) while the chunk is in cache:
         * one thread pool, no OpenBLAS threads spinning against ours. */
        int prev = blas_single();
        int nch = (B + LIN_CHUNK - 1) / LIN_CHUNK;
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nch > 1 && (double)B * K * N > PAR_MIN_FLOP)
        for (int ch = 0; ch < nch; ch++) {
            int b0 = ch * LIN_CHUNK, mb = B - b0 < LIN_CHUNK ? B - b0 : LIN_CHUNK;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, mb, N, K, 1.0f, x + (size_t)b0 * K, K, w,
                        K, 0.0f, y + (size_t)b0 * N, N);
            if (bias || relu || rt != DT_F32) epilogue(y + (size_t)b0 * N, bias, mb, N, relu, rt);
        }
        blas_restore(prev);
        return PLUMB_OK;
    }
    float *wT = scratch(SC_WT, (size_t)K * N * sizeof(float));
    float *acc = scratch(SC_ACC, (size_t)nt * N * sizeof(float));
    if (!wT || !acc) {
        return err_set(e, PLUMB_ENOMEM, "linear_fwd: out of memory for scratch");
    }
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) wT[(size_t)k * N + n] = w[(size_t)n * K + k];
#pragma omp parallel num_threads(nt) if ((double)B * K * N > PAR_MIN_FLOP)
    {
        int t = omp_get_thread_num(), T = omp_get_num_threads();
        int b0 = (int)((long)B * t / T), b1 = (int)((long)B * (t + 1) / T);
        lin_fwd_rows(x, wT, bias, y, b0, b1, K, N, relu, rt, acc + (size_t)t * N);
    }
    return PLUMB_OK;
}

static int cpu_linear_bwd(struct dev *d, dev_stream *s, const float *x, const float *w,
                          const float *y, float *dy, float *dx, float *dw, float *dbias, int B,
                          int K, int N, int relu, dtype_t rt, plumb_err *e)
{
    (void)s;
    NEED(x && w && dy && dw, "linear_bwd: NULL x, w, dy or dw");
    NEED(!relu || y, "linear_bwd: relu needs the forward output y");
    NEED(B > 0 && K > 0 && N > 0, "linear_bwd: bad shape B=%d K=%d N=%d (expected > 0)", B, K, N);
    RT_OK("linear_bwd");
    int nt = nthreads(d);
    size_t BN = (size_t)B * N;
    if (relu) {
#pragma omp parallel for num_threads(nt) schedule(static) if (BN > PAR_MIN)
        for (size_t i = 0; i < BN; i++) dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
    }
    if (dbias) cpu_col_sums(d, dy, dbias, B, N);
    if (!golden(d)) {
        int prev = blas_single();
        int nch = (B + LIN_CHUNK - 1) / LIN_CHUNK;
        int par = (double)B * K * N > PAR_MIN_FLOP;
        if (dx) {
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (par && nch > 1)
            for (int ch = 0; ch < nch; ch++) {
                int b0 = ch * LIN_CHUNK, mb = B - b0 < LIN_CHUNK ? B - b0 : LIN_CHUNK;
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, mb, K, N, 1.0f, dy + (size_t)b0 * N,
                            N, w, K, 0.0f, dx + (size_t)b0 * K, K);
                if (rt != DT_F32)
                    for (size_t i = (size_t)b0 * K; i < (size_t)(b0 + mb) * K; i++) dx[i] = round_to(dx[i], rt);
            }
        }
        /* dw rows split over threads: each output row is one thread's */
#pragma omp parallel num_threads(nt) if (par && N > 1)
        {
            int t = omp_get_thread_num(), T = omp_get_num_threads();
            int n0 = (int)((long)N * t / T), n1 = (int)((long)N * (t + 1) / T);
            if (n1 > n0)
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n1 - n0, K, B, 1.0f, dy + n0, N, x, K,
                            0.0f, dw + (size_t)n0 * K, K);
        }
        blas_restore(prev);
        return PLUMB_OK;
    }
    if (dx) {
        float *acc = scratch(SC_ACC, (size_t)nt * K * sizeof(float));
        if (!acc) return err_set(e, PLUMB_ENOMEM, "linear_bwd: out of memory for scratch");
#pragma omp parallel num_threads(nt) if ((double)B * K * N > PAR_MIN_FLOP)
        {
            int t = omp_get_thread_num(), T = omp_get_num_threads();
            int b0 = (int)((long)B * t / T), b1 = (int)((long)B * (t + 1) / T);
            lin_dx_rows(dy, w, dx, b0, b1, K, N, rt, acc + (size_t)t * K);
        }
    }
#pragma omp parallel num_threads(nt) if ((double)B * K * N > PAR_MIN_FLOP)
    {
        int t = omp_get_thread_num(), T = omp_get_num_threads();
        int n0 = (int)((long)N * t / T), n1 = (int)((long)N * (t + 1) / T);
        lin_dw_rows(dy, x, dw, n0, n1, B, K, N);
    }
    return PLUMB_OK;
}

/* linear_bwd, then the input layer's ReLU backward on dx and its dbias
 * (train_ops.h): the composition itself, so the bits are linear_bwd's plus
 * relu_bwd's plus col_sum's by construction. x [B,K] (a ReLU output),
 * dx [B,K] masked in place, dbias_x [K]. */
static int cpu_linear_bwd_relu_in(struct dev *d, dev_stream *s, const float *x, const float *w, const float *y,
                                  float *dy, float *dx, float *dw, float *dbias, int B, int K, int N, int relu,
                                  dtype_t rt, float *dbias_x, plumb_err *e)
{
    NEED(dx, "linear_bwd_relu_in: dx must not be NULL");
    int rc = cpu_linear_bwd(d, s, x, w, y, dy, dx, dw, dbias, B, K, N, relu, rt, e);
    if (rc) return rc;
    int nt = nthreads(d);
    size_t BK = (size_t)B * K;
#pragma omp parallel for num_threads(nt) schedule(static) if (BK > PAR_MIN)
    for (size_t i = 0; i < BK; i++) dx[i] = x[i] > 0.0f ? dx[i] : 0.0f;
    if (dbias_x) {
#pragma omp parallel num_threads(nt) if (BK > PAR_MIN)
        {
            int t = omp_get_thread_num(), T = omp_get_num_threads();
            int k0 = (int)((long)K * t / T), k1 = (int)((long)K * (t + 1) / T);
            col_sum(dx, dbias_x, k0, k1, B, K);
        }
    }
    return PLUMB_OK;
}

static int cpu_relu_fwd(struct dev *d, dev_stream *s, const float *x, float *y, size_t n,
                        dtype_t rt, plumb_err *e)
{
    (void)s;
    NEED(x && y, "relu_fwd: NULL x or y");
    RT_OK("relu_fwd");
    int nt = nthreads(d);
#pragma omp parallel for num_threads(nt) schedule(static) if (n > PAR_MIN)
    for (size_t i = 0; i < n; i++) y[i] = round_to(x[i] > 0.0f ? x[i] : 0.0f, rt);
    return PLUMB_OK;
}

static int cpu_relu_bwd(struct dev *d, dev_stream *s, const float *y, const float *dy, float *dx,
                        size_t n, plumb_err *e)
{
    (void)s;
    NEED(y && dy && dx, "relu_bwd: NULL y, dy or dx");
    int nt = nthreads(d);
#pragma omp parallel for num_threads(nt) schedule(static) if (n > PAR_MIN)
    for (size_t i = 0; i < n; i++) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
    return PLUMB_OK;
}

/* ======================= embeddings ======================= */

static int cpu_embedding_fwd(struct dev *d, dev_stream *s, const float *table, const int64_t *off,
                             const uint32_t *idx, float *out, int B, int T, int D, dtype_t rt,
                             plumb_err *e)
{
    (void)s;
    NEED(table && off && idx && out, "embedding_fwd: NULL table, off, idx or out");
    NEED(B > 0 && T > 0 && D > 0, "embedding_fwd: bad shape B=%d T=%d D=%d", B, T, D);
    RT_OK("embedding_fwd");
    int nt = nthreads(d);
#pragma omp parallel for num_threads(nt) schedule(static) if ((size_t)B * T * D > PAR_MIN)
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            const float *src = table + (size_t)(off[t] + (int64_t)idx[(size_t)b * T + t]) * D;
            float *dst = out + ((size_t)b * T + t) * D;
            if (rt == DT_F32)
                memcpy(dst, src, (size_t)D * sizeof(float));
            else
                for (int k = 0; k < D; k++) dst[k] = round_to(src[k], rt);
        }
    }
    return PLUMB_OK;
}

/* Stable LSD radix sort of positions by key (11-bit digits): perm ends
 * holding positions 0..n-1 ordered by key, ties in ascending position. */
static int radix_sort_positions(const int64_t *key, size_t n, uint32_t *perm, plumb_err *e)
{
    int64_t maxk = 0;
    for (size_t i = 0; i < n; i++) {
        if (key[i] < 0) return err_set(e, PLUMB_EUSAGE, "sparse row %lld at position %zu is negative",
                                       (long long)key[i], i);
        if (key[i] > maxk) maxk = key[i];
    }
    uint32_t *tmp = scratch(SC_TMP, n * sizeof(uint32_t) + 4);
    if (!tmp) return err_set(e, PLUMB_ENOMEM, "sparse sort: out of memory (%zu entries)", n);
    for (size_t i = 0; i < n; i++) perm[i] = (uint32_t)i;
    uint32_t *src = perm, *dst = tmp;
    enum { BITS = 11, NB = 1 << BITS };
    size_t cnt[NB];
    for (int shift = 0; shift < 63 && (maxk >> shift) != 0; shift += BITS) {
        memset(cnt, 0, sizeof cnt);
        for (size_t i = 0; i < n; i++) cnt[(key[src[i]] >> shift) & (NB - 1)]++;
        size_t sum = 0;
        for (int b = 0; b < NB; b++) {
            size_t c = cnt[b];
            cnt[b] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++) dst[cnt[(key[src[i]] >> shift) & (NB - 1)]++] = src[i];
        uint32_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != perm) memcpy(perm, src, n * sizeof(uint32_t));
    return PLUMB_OK;
}

/* Segment reduce over the sorted permutation: writes distinct rows ascending
 * and each row's sum in the train_ops.h order: chunk = 0, one chain in
 * ascending position from 0 (golden); chunk = C, chains of C positions from
 * 0, the chunk sums added in ascending chunk order from 0 (fast). */
KERNEL static void seg_sum(const float *restrict vals, const uint32_t *restrict perm,
                           const size_t *restrict seg, size_t u0, size_t u1, int D, size_t chunk,
                           float *restrict out)
{
    for (size_t u = u0; u < u1; u++) {
        float *o = out + u * D;
        const size_t s0 = seg[u], s1 = seg[u + 1];
        if (!chunk || s1 - s0 <= chunk) {
            for (int k = 0; k < D; k++) o[k] = 0.0f;
            for (size_t i = s0; i < s1; i++) {
                const float *v = vals + (size_t)perm[i] * D;
#pragma omp simd
                for (int k = 0; k < D; k++) o[k] = o[k] + v[k];
            }
            continue;
        }
        enum { KB = 64 };
        for (int k0 = 0; k0 < D; k0 += KB) {
            const int kn = D - k0 < KB ? D - k0 : KB;
            float tot[KB], part[KB];
            for (int k = 0; k < kn; k++) tot[k] = 0.0f;
            for (size_t c0 = s0; c0 < s1; c0 += chunk) {
                const size_t c1 = s1 - c0 < chunk ? s1 : c0 + chunk;
                for (int k = 0; k < kn; k++) part[k] = 0.0f;
                for (size_t i = c0; i < c1; i++) {
                    const float *v = vals + (size_t)perm[i] * D + k0;
#pragma omp simd
                    for (int k = 0; k < kn; k++) part[k] = part[k] + v[k];
                }
                for (int k = 0; k < kn; k++) tot[k] = tot[k] + part[k];
            }
            for (int k = 0; k < kn; k++) o[k0 + k] = tot[k];
        }
    }
}

static int coalesce(struct dev *d, const int64_t *keys, const float *vals, size_t n, int D,
                    int64_t *rows_out, float *vals_out, int64_t *n_out, plumb_err *e)
{
    if (n == 0) {
        *n_out = 0;
        return PLUMB_OK;
    }
    if (n > 0xffffffffu) return err_set(e, PLUMB_EUSAGE, "sparse_coalesce: %zu pairs (at most 2^32-1)", n);
    uint32_t *perm = scratch(SC_PERM, n * sizeof(uint32_t));
    size_t *seg = scratch(SC_SEG, (n + 1) * sizeof(size_t));
    if (!perm || !seg) {
        return err_set(e, PLUMB_ENOMEM, "sparse_coalesce: out of memory (%zu pairs)", n);
    }
    int rc = radix_sort_positions(keys, n, perm, e);
    if (rc) return rc;
    size_t U = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || keys[perm[i]] != keys[perm[i - 1]]) {
            seg[U] = i;
            rows_out[U] = keys[perm[i]];
            U++;
        }
    }
    seg[U] = n;
    int nt = nthreads(d);
    const size_t chunk = golden(d) ? 0 : TRAIN_SPARSE_CHUNK;
#pragma omp parallel num_threads(nt) if (n * (size_t)D > PAR_MIN)
    {
        int t = omp_get_thread_num(), T = omp_get_num_threads();
        size_t u0 = U * t / T, u1 = U * (t + 1) / T;
        seg_sum(vals, perm, seg, u0, u1, D, chunk, vals_out);
    }
    *n_out = (int64_t)U;
    return PLUMB_OK;
}

static int cpu_embedding_bwd(struct dev *d, dev_stream *s, const int64_t *off, const uint32_t *idx,
                             const float *dout, int B, int n_valid, int T, int D, int64_t *rows_out,
                             float *grads_out, int64_t *n_out, plumb_err *e)
{
    (void)s;
    NEED(off && idx && dout && rows_out && grads_out && n_out,
         "embedding_bwd: NULL argument");
    NEED(B > 0 && T > 0 && D > 0 && n_valid >= 0 && n_valid <= B,
         "embedding_bwd: bad shape B=%d n_valid=%d T=%d D=%d", B, n_valid, T, D);
    size_t n = (size_t)n_valid * T;
    int64_t *keys = scratch(SC_KEYS, n * sizeof(int64_t) + 8);
    if (!keys) return err_set(e, PLUMB_ENOMEM, "embedding_bwd: out of memory");
    for (int b = 0; b < n_valid; b++)
        for (int t = 0; t < T; t++)
            keys[(size_t)b * T + t] = off[t] + (int64_t)idx[(size_t)b * T + t];
    return coalesce(d, keys, dout, n, D, rows_out, grads_out, n_out, e);
}

static int cpu_sparse_coalesce(struct dev *d, dev_stream *s, const int64_t *rows_in,
                               const float *vals_in, size_t n, int D, int64_t *rows_out,
                               float *vals_out, int64_t *n_out, plumb_err *e)
{
    (void)s;
    NEED((rows_in && vals_in && rows_out && vals_out && n_out) || (n == 0 && n_out),
         "sparse_coalesce: NULL argument");
    NEED(D > 0, "sparse_coalesce: D=%d (expected > 0)", D);
    return coalesce(d, rows_in, vals_in, n, D, rows_out, vals_out, n_out, e);
}

/* ======================= interaction ======================= */

/* zT [D, F] holds the sample's vectors transposed so that the dots of z_i
 * with all z_j (j < i) advance together, vectorised over j; each dot is still
 * its own fmaf chain over k ascending. */
static inline __attribute__((always_inline)) void
interact_fwd_body(const float *restrict bottom, const float *restrict emb, float *restrict out, int b0,
                  int b1, int T, int D, dtype_t rt, float *restrict zT, float *restrict acc)
{
    const int F = T + 1, W = D + F * (F - 1) / 2;
    for (int b = b0; b < b1; b++) {
        const float *x0 = bottom + (size_t)b * D;
        const float *eb = emb + (size_t)b * T * D;
        float *o = out + (size_t)b * W;
        for (int k = 0; k < D; k++) {
            o[k] = round_to(x0[k], rt);
            zT[(size_t)k * F] = x0[k];
        }
        for (int t = 0; t < T; t++)
            for (int k = 0; k < D; k++) zT[(size_t)k * F + 1 + t] = eb[(size_t)t * D + k];
        int p = D;
        for (int i = 1; i < F; i++) {
            for (int j = 0; j < i; j++) acc[j] = 0.0f;
            for (int k = 0; k < D; k++) {
                const float *zk = zT + (size_t)k * F;
                const float zik = zk[i];
#pragma omp simd
                for (int j = 0; j < i; j++) acc[j] = fmaf(zik, zk[j], acc[j]);
            }
            for (int j = 0; j < i; j++) o[p + j] = round_to(acc[j], rt);
            p += i;
        }
    }
}

static inline __attribute__((always_inline)) void
interact_bwd_body(const float *restrict bottom, const float *restrict emb, const float *restrict dout,
                  float *restrict dbottom, float *restrict demb, int b0, int b1, int T, int D, dtype_t rt,
                  float *restrict G, float *restrict acc)
{
    const int F = T + 1, W = D + F * (F - 1) / 2;
    for (int b = b0; b < b1; b++) {
        const float *x0 = bottom + (size_t)b * D;
        const float *eb = emb + (size_t)b * T * D;
        const float *g = dout + (size_t)b * W;
        /* G[i][j] = G[j][i] = dout of pair (i, j) */
        int p = D;
        for (int i = 1; i < F; i++)
            for (int j = 0; j < i; j++) {
                G[i * F + j] = g[p];
                G[j * F + i] = g[p];
                p++;
            }
        const float *zp[F];
        zp[0] = x0;
        for (int j = 1; j < F; j++) zp[j] = eb + (size_t)(j - 1) * D;
        for (int i = 0; i < F; i++) {
            float *dst = i == 0 ? dbottom + (size_t)b * D : demb + ((size_t)b * T + (i - 1)) * D;
            const float *Gi = G + (size_t)i * F;
            /* k in blocks of 16 held in registers; j ascending, skipping j == i */
            for (int k0 = 0; k0 < D; k0 += 16) {
                const int kn = D - k0 < 16 ? D - k0 : 16;
                float a[16];
                for (int k = 0; k < kn; k++) a[k] = i == 0 ? g[k0 + k] : 0.0f;
                for (int j = 0; j < i; j++) {
                    const float c = Gi[j], *zj = zp[j] + k0;
#pragma omp simd
                    for (int k = 0; k < kn; k++) a[k] = fmaf(c, zj[k], a[k]);
                }
                for (int j = i + 1; j < F; j++) {
                    const float c = Gi[j], *zj = zp[j] + k0;
#pragma omp simd
                    for (int k = 0; k < kn; k++) a[k] = fmaf(c, zj[k], a[k]);
                }
                for (int k = 0; k < kn; k++) dst[k0 + k] = round_to(a[k], rt);
            }
        }
        (void)acc;
    }
}

/* The bodies specialised for the common widths (D = 16: dlrm-kaggle, 8:
 * ctr-tiny) so the k loops unroll into whole vectors; same arithmetic. */
KERNEL static void interact_fwd_rows(const float *restrict bottom, const float *restrict emb,
                                     float *restrict out, int b0, int b1, int T, int D, dtype_t rt,
                                     float *restrict zT, float *restrict acc)
{
    if (D == 16)
        interact_fwd_body(bottom, emb, out, b0, b1, T, 16, rt, zT, acc);
    else if (D == 8)
        interact_fwd_body(bottom, emb, out, b0, b1, T, 8, rt, zT, acc);
    else
        interact_fwd_body(bottom, emb, out, b0, b1, T, D, rt, zT, acc);
}

KERNEL static void interact_bwd_rows(const float *restrict bottom, const float *restrict emb,
                                     const float *restrict dout, float *restrict dbottom,
                                     float *restrict demb, int b0, int b1, int T, int D, dtype_t rt,
                                     float *restrict G, float *restrict acc)
{
    if (D == 16)
        interact_bwd_body(bottom, emb, dout, dbottom, demb, b0, b1, T, 16, rt, G, acc);
    else if (D == 8)
        interact_bwd_body(bottom, emb, dout, dbottom, demb, b0, b1, T, 8, rt, G, acc);
    else
        interact_bwd_body(bottom, emb, dout, dbottom, demb, b0, b1, T, D, rt, G, acc);
}

static int cpu_interact_fwd(struct dev *d, dev_stream *s, const float *bottom, const float *emb,
                            float *out, int B, int T, int D, dtype_t rt, plumb_err *e)
{
    (void)s;
    NEED(bottom && emb && out, "interact_fwd: NULL bottom, emb or out");
    NEED(B > 0 && T > 0 && D > 0, "interact_fwd: bad shape B=%d T=%d D=%d", B, T, D);
    RT_OK("interact_fwd");
    int nt = nthreads(d), F = T + 1;
    size_t per = (size_t)F * D + F;
    float *scr = scratch(SC_INTER, (size_t)nt * per * sizeof(float));
    if (!scr) return err_set(e, PLUMB_ENOMEM, "interact_fwd: out of memory");
#pragma omp parallel num_threads(nt) if (2.0 * B * (T + 1) * (T + 1) * D > PAR_MIN_FLOP)
    {
        float *zT = scr + (size_t)omp_get_thread_num() * per;
#pragma omp for schedule(dynamic, 1)
        for (int b0 = 0; b0 < B; b0 += ROW_CHUNK)
            interact_fwd_rows(bottom, emb, out, b0, b0 + ROW_CHUNK < B ? b0 + ROW_CHUNK : B, T, D, rt, zT,
                              zT + (size_t)F * D);
    }
    return PLUMB_OK;
}

static int cpu_interact_bwd(struct dev *d, dev_stream *s, const float *bottom, const float *emb,
                            const float *dout, float *dbottom, float *demb, int B, int T, int D,
                            dtype_t rt, plumb_err *e)
{
    (void)s;
    NEED(bottom && emb && dout && dbottom && demb, "interact_bwd: NULL argument");
    NEED(B > 0 && T > 0 && D > 0, "interact_bwd: bad shape B=%d T=%d D=%d", B, T, D);
    RT_OK("interact_bwd");
    int nt = nthreads(d), F = T + 1;
    float *scr = scratch(SC_INTER, (size_t)nt * ((size_t)F * F + D) * sizeof(float));
    if (!scr) return err_set(e, PLUMB_ENOMEM, "interact_bwd: out of memory");
#pragma omp parallel num_threads(nt) if (2.0 * B * (T + 1) * (T + 1) * D > PAR_MIN_FLOP)
    {
        float *G = scr + (size_t)omp_get_thread_num() * ((size_t)F * F + D);
#pragma omp for schedule(dynamic, 1)
        for (int b0 = 0; b0 < B; b0 += ROW_CHUNK)
            interact_bwd_rows(bottom, emb, dout, dbottom, demb, b0, b0 + ROW_CHUNK < B ? b0 + ROW_CHUNK : B, T, D,
                              rt, G, G + (size_t)F * F);
    }
    return PLUMB_OK;
}

/* ======================= loss ======================= */

static inline float fast_sigmoid(float z)
{
    if (z >= 0.0f) return 1.0f / (1.0f + expf(-z));
    float ez = expf(z);
    return ez / (1.0f + ez);
}

static int cpu_bce_logits(struct dev *d, dev_stream *s, const float *z, const float *y, int B,
                          int n_valid, float grad_scale, float *loss_ps, double *sum_count,
                          float *dz, plumb_err *e)
{
    (void)s;
    NEED(z, "bce_logits: NULL logits");
    NEED(y || (!loss_ps && !sum_count && !dz) || n_valid == 0, "bce_logits: NULL labels");
    NEED(B > 0 && n_valid >= 0 && n_valid <= B, "bce_logits: bad B=%d n_valid=%d", B, n_valid);
    int g = golden(d);
    double sum = 0.0;
    for (int b = 0; b < B; b++) {
        if (b >= n_valid) {
            if (loss_ps) loss_ps[b] = 0.0f;
            if (dz) dz[b] = 0.0f;
            continue;
        }
        float zb = z[b], yb = y[b];
        float l;
        if (g) {
            l = tm_bce_logit(zb, yb);
        } else {
            float a = zb > 0.0f ? zb : 0.0f;
            l = (a - zb * yb) + log1pf(expf(-fabsf(zb)));
        }
        if (loss_ps) loss_ps[b] = l;
        sum += (double)l;
        if (dz) dz[b] = ((g ? tm_sigmoidf(zb) : fast_sigmoid(zb)) - yb) * grad_scale;
    }
    if (sum_count) {
        sum_count[0] = sum;
        sum_count[1] = (double)n_valid;
    }
    return PLUMB_OK;
}

static int cpu_sigmoid(struct dev *d, dev_stream *s, const float *z, float *p, size_t n,
                       plumb_err *e)
{
    (void)s;
    NEED(z && p, "sigmoid: NULL z or p");
    int g = golden(d), nt = nthreads(d);
#pragma omp parallel for num_threads(nt) schedule(static) if (n > PAR_MIN)
    for (size_t i = 0; i < n; i++) p[i] = g ? tm_sigmoidf(z[i]) : fast_sigmoid(z[i]);
    return PLUMB_OK;
}

/* ======================= optimizers ======================= */

KERNEL static void sgd_kernel(float *restrict w, const float *restrict g, size_t n, float lr,
                              float wd)
{
    if (wd == 0.0f) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) w[i] = fmaf(-lr, g[i], w[i]);
    } else {
#pragma omp simd
        for (size_t i = 0; i < n; i++) w[i] = fmaf(-lr, fmaf(wd, w[i], g[i]), w[i]);
    }
}

static int cpu_sgd(struct dev *d, dev_stream *s, float *w, const float *g, size_t n, float lr,
                   float wd, plumb_err *e)
{
    (void)s;
    NEED(w && g, "sgd: NULL w or g");
    int nt = nthreads(d);
#pragma omp parallel num_threads(nt) if (n > PAR_MIN)
    {
        int t = omp_get_thread_num(), T = omp_get_num_threads();
        size_t i0 = n * t / T, i1 = n * (t + 1) / T;
        sgd_kernel(w + i0, g + i0, i1 - i0, lr, wd);
    }
    return PLUMB_OK;
}

KERNEL static void sgd_momentum_kernel(float *restrict w, const float *restrict g, float *restrict buf, size_t n,
                                       float lr, float wd, float mu, int first)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float dd = wd == 0.0f ? g[i] : fmaf(wd, w[i], g[i]);
        float b = first ? dd : fmaf(mu, buf[i], dd);
        buf[i] = b;
        w[i] = fmaf(-lr, b, w[i]);
    }
}

static int cpu_sgd_momentum(struct dev *d, dev_stream *s, float *w, const float *g, float *buf, size_t n, float lr,
                            float wd, float mu, int first, plumb_err *e)
{
    (void)s;
    NEED(w && g && buf, "sgd_momentum: NULL w, g or buf");
    int nt = nthreads(d);
#pragma omp parallel num_threads(nt) if (n > PAR_MIN)
    {
        int t = omp_get_thread_num(), T = omp_get_num_threads();
        size_t i0 = n * t / T, i1 = n * (t + 1) / T;
        sgd_momentum_kernel(w + i0, g + i0, buf + i0, i1 - i0, lr, wd, mu, first);
    }
    return PLUMB_OK;
}

struct momentum_args {
    float *w, *buf;
    const float *g;
    float lr, mu;
    int first;
};
static void momentum_seg_of(void *ctx, size_t i, size_t end, float wdi)
{
    const struct momentum_args *a = ctx;
    sgd_momentum_kernel(a->w + i, a->g + i, a->buf + i, end - i, a->lr, wdi, a->mu, a->first);
}

/* sgd_momentum over the decay ranges' segments, each as sgd_momentum computes it */
static int cpu_sgd_momentum_masked(struct dev *d, dev_stream *s, float *w, const float *g, float *buf, size_t n,
                                   float lr, float wd, float mu, int first, const int64_t *dec, int nr, plumb_err *e)
{
    (void)s;
    NEED((w && g && buf) || n == 0, "sgd_momentum_masked: NULL w, g or buf");
    char why[256];
    if (cpu_decay_ranges_bad(dec, nr, n, "sgd_momentum_masked", why, sizeof why))
        return err_set(e, PLUMB_EUSAGE, "%s", why);
    struct momentum_args a = {w, buf, g, lr, mu, first};
    const int nt = nthreads(d);
#pragma omp parallel num_threads(nt) if (n > PAR_MIN)
    {
        const int t = omp_get_thread_num(), T = omp_get_num_threads();
        cpu_decay_segments(n * t / T, n * (t + 1) / T, dec, nr, wd, momentum_seg_of, &a);
    }
    return PLUMB_OK;
}

static int cpu_sgd_sparse(struct dev *d, dev_stream *s, float *table, const int64_t *rows,
                          const float *grads, size_t n, int D, float lr, plumb_err *e)
{
    (void)s;
    NEED((table && rows && grads) || n == 0, "sgd_sparse: NULL argument");
    NEED(D > 0, "sgd_sparse: D=%d", D);
    int nt = nthreads(d);
#pragma omp parallel for num_threads(nt) schedule(static) if (n * (size_t)D > PAR_MIN)
    for (size_t u = 0; u < n; u++) sgd_kernel(table + (size_t)rows[u] * D, grads + u * D, (size_t)D, lr, 0.0f);
    return PLUMB_OK;
}

static inline void adamw_one(float *w, float g, float *m, float *v, float lr, float b1, float b2,
                             float eps, float wd, float bc1, float bc2)
{
    float x = *w;
    x = x - lr * wd * x;
    float mm = b1 * *m + (1.0f - b1) * g;
    float vv = b2 * *v + (1.0f - b2) * g * g;
    *m = mm;
    *v = vv;
    x = x - lr * (mm / bc1) / (sqrtf(vv / bc2) + eps);
    *w = x;
}

KERNEL static void adamw_kernel(float *restrict w, const float *restrict g, float *restrict m,
                                float *restrict v, size_t n, float lr, float b1, float b2,
                                float eps, float wd, float bc1, float bc2)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) adamw_one(w + i, g[i], m + i, v + i, lr, b1, b2, eps, wd, bc1, bc2);
}

static int adam_args(float bc1, float bc2, plumb_err *e)
{
    if (!(bc1 > 0.0f && bc1 <= 1.0f && bc2 > 0.0f && bc2 <= 1.0f))
        return err_set(e, PLUMB_EUSAGE, "adamw: bias corrections bc1=%g bc2=%g (expected in (0,1])",
                       (double)bc1, (double)bc2);
    return PLUMB_OK;
}

static int cpu_adamw(struct dev *d, dev_stream *s, float *w, const float *g, float *m, float *v,
                     size_t n, float lr, float b1, float b2, float eps, float wd, float bc1,
                     float bc2, plumb_err *e)
{
    (void)s;
    NEED(w && g && m && v, "adamw: NULL argument");
    if (adam_args(bc1, bc2, e)) return PLUMB_EUSAGE;
    int nt = nthreads(d);
#pragma omp parallel num_threads(nt) if (n > PAR_MIN)
    {
        int t = omp_get_thread_num(), T = omp_get_num_threads();
        size_t i0 = n * t / T, i1 = n * (t + 1) / T;
        adamw_kernel(w + i0, g + i0, m + i0, v + i0, i1 - i0, lr, b1, b2, eps, wd, bc1, bc2);
    }
    return PLUMB_OK;
}

static int cpu_adamw_sparse(struct dev *d, dev_stream *s, float *table, float *m, float *v,
                            const int64_t *rows, const float *grads, size_t n, int D, float lr,
                            float b1, float b2, float eps, float wd, float bc1, float bc2,
                            plumb_err *e)
{
    (void)s;
    NEED((table && m && v && rows && grads) || n == 0, "adamw_sparse: NULL argument");
    NEED(D > 0, "adamw_sparse: D=%d", D);
    if (adam_args(bc1, bc2, e)) return PLUMB_EUSAGE;
    int nt = nthreads(d);
#pragma omp parallel for num_threads(nt) schedule(static) if (n * (size_t)D > PAR_MIN)
    for (size_t u = 0; u < n; u++) {
        size_t o = (size_t)rows[u] * D;
        adamw_kernel(table + o, grads + u * D, m + o, v + o, (size_t)D, lr, b1, b2, eps, wd, bc1,
                     bc2);
    }
    return PLUMB_OK;
}

/* ======================= gradient utilities ======================= */

static int cpu_sumsq(struct dev *d, dev_stream *s, const float *x, size_t n, double *out,
                     plumb_err *e)
{
    (void)s;
    NEED((x || n == 0) && out, "sumsq: NULL argument");
    enum { BLK = 1024 };
    size_t nb = (n + BLK - 1) / BLK;
    double *part = scratch(SC_PART, (nb + 1) * sizeof(double));
    if (!part) return err_set(e, PLUMB_ENOMEM, "sumsq: out of memory");
    int nt = nthreads(d);
#pragma omp parallel for num_threads(nt) schedule(static) if (nb > PAR_MIN / 1024)
    for (size_t bl = 0; bl < nb; bl++) {
        size_t i0 = bl * BLK, i1 = i0 + BLK < n ? i0 + BLK : n;
        double acc = 0.0;
        for (size_t i = i0; i < i1; i++) acc += (double)x[i] * (double)x[i];
        part[bl] = acc;
    }
    double tot = out[0];
    if (d->numerics == NUMERICS_GOLDEN) {
        for (size_t bl = 0; bl < nb; bl++) tot += part[bl];
    } else {
        for (size_t g0 = 0; g0 < nb; g0 += TRAIN_SUMSQ_GROUP) {
            size_t g1 = g0 + TRAIN_SUMSQ_GROUP < nb ? g0 + TRAIN_SUMSQ_GROUP : nb;
            double grp = 0.0;
            for (size_t bl = g0; bl < g1; bl++) grp += part[bl];
            tot += grp;
        }
    }
    out[0] = tot;
    return PLUMB_OK;
}

static int cpu_scale_check(struct dev *d, dev_stream *s, float *x, size_t n, float mul,
                           int *found_inf, plumb_err *e)
{
    (void)s;
    NEED((x || n == 0) && found_inf, "scale_check: NULL argument");
    int nt = nthreads(d), bad = 0;
#pragma omp parallel for num_threads(nt) schedule(static) reduction(| : bad) if (n > PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        bad |= !isfinite(x[i]);
        x[i] = x[i] * mul;
    }
    if (bad) *found_inf = 1;
    return PLUMB_OK;
}

static int cpu_found_of_sumsq(struct dev *d, dev_stream *s, const double *sumsq, int *found_inf, plumb_err *e)
{
    (void)d, (void)s;
    NEED(sumsq && found_inf, "found_of_sumsq: NULL argument");
    if (!isfinite(*sumsq)) *found_inf = 1;
    return PLUMB_OK;
}

KERNEL static void affine_kernel(const float *x, float *y, size_t n, float a, float b)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = fmaf(a, x[i], b);
}

static int cpu_affine(struct dev *d, dev_stream *s, const float *x, float *y, size_t n, float a,
                      float b, plumb_err *e)
{
    (void)s;
    NEED((x && y) || n == 0, "affine: NULL x or y");
    int nt = nthreads(d);
#pragma omp parallel num_threads(nt) if (n > PAR_MIN)
    {
        int t = omp_get_thread_num(), T = omp_get_num_threads();
        size_t i0 = n * t / T, i1 = n * (t + 1) / T;
        affine_kernel(x + i0, y + i0, i1 - i0, a, b);
    }
    return PLUMB_OK;
}

static int cpu_round_fp32(struct dev *d, dev_stream *s, const float *x, float *y, size_t n,
                          dtype_t rt, plumb_err *e)
{
    (void)s;
    NEED((x && y) || n == 0, "round_fp32: NULL x or y");
    RT_OK("round_fp32");
    round_array(y, x, n, rt, nthreads(d));
    return PLUMB_OK;
}

/* ======================= counts and decisions on the device ======================= */

static size_t rows_of(const int64_t *rows_n, size_t n_max)
{
    int64_t u = *rows_n;
    return u < 0 ? 0 : (size_t)u > n_max ? n_max : (size_t)u;
}

static int cpu_sumsq_dn(struct dev *d, dev_stream *s, const float *x, const int64_t *rows_n, size_t per,
                        size_t n_max, double *out, plumb_err *e)
{
    NEED(rows_n, "sumsq_dn: NULL count");
    return cpu_sumsq(d, s, x, rows_of(rows_n, n_max) * per, out, e);
}

static int cpu_scale_check_dn(struct dev *d, dev_stream *s, float *x, const int64_t *rows_n, size_t per,
                              size_t n_max, float mul, int *found_inf, plumb_err *e)
{
    NEED(rows_n, "scale_check_dn: NULL count");
    return cpu_scale_check(d, s, x, rows_of(rows_n, n_max) * per, mul, found_inf, e);
}

static int cpu_sgd_sparse_dn(struct dev *d, dev_stream *s, float *table, const int64_t *rows, const float *grads,
                             const int64_t *rows_n, size_t n_max, int D, float lr, const int *skip, plumb_err *e)
{
    NEED(rows_n, "sgd_sparse_dn: NULL count");
    if (skip && *skip) return PLUMB_OK;
    return cpu_sgd_sparse(d, s, table, rows, grads, rows_of(rows_n, n_max), D, lr, e);
}

static int cpu_sparse_put_dn(struct dev *d, dev_stream *s, float *table, const int64_t *rows, const float *vals,
                             const int64_t *rows_n, size_t n_max, int D, const int *when, plumb_err *e)
{
    (void)d, (void)s;
    NEED(rows_n, "sparse_put_dn: NULL count");
    NEED(D > 0, "sparse_put_dn: D=%d (expected > 0)", D);
    if (when && !*when) return PLUMB_OK;
    const size_t U = rows_of(rows_n, n_max);
    NEED((table && rows && vals) || U == 0, "sparse_put_dn: NULL argument");
    for (size_t u = 0; u < U; u++)
        memcpy(table + (size_t)rows[u] * D, vals + u * (size_t)D, (size_t)D * sizeof(float));
    return PLUMB_OK;
}

/* The cpu's device memory is host memory: the two regions copied, with the
 * GPU op's preconditions (train_ops.h), so the trainer's one-write path and
 * its contract run on every cpu queued step too. */
static int cpu_status_to_host(struct dev *d, dev_stream *s, void *host, const void *a, size_t na, const void *b,
                              size_t nb, plumb_err *e)
{
    (void)d, (void)s;
    NEED(host && (a || !na) && (b || !nb), "status_to_host: NULL argument");
    NEED(na % 8 == 0 && nb % 8 == 0 && na + nb <= 256,
         "status_to_host: %zu + %zu bytes (expected multiples of 8, at most 256 in all)", na, nb);
    NEED((uintptr_t)host % 8 == 0 && (uintptr_t)a % 8 == 0 && (uintptr_t)b % 8 == 0,
         "status_to_host: an address not 8-byte aligned");
    if (na) memcpy(host, a, na);
    if (nb) memcpy((char *)host + na, b, nb);
    return PLUMB_OK;
}

static int cpu_sgd_gated(struct dev *d, dev_stream *s, float *w, const float *g, size_t n, float lr, float wd,
                         const int *skip, plumb_err *e)
{
    if (skip && *skip) return PLUMB_OK;
    return cpu_sgd(d, s, w, g, n, lr, wd, e);
}

const struct train_ops cpu_train_ops = {
    .linear_fwd = cpu_linear_fwd,
    .linear_bwd = cpu_linear_bwd,
    .relu_fwd = cpu_relu_fwd,
    .relu_bwd = cpu_relu_bwd,
    .embedding_fwd = cpu_embedding_fwd,
    .embedding_bwd = cpu_embedding_bwd,
    .sparse_coalesce = cpu_sparse_coalesce,
    .interact_fwd = cpu_interact_fwd,
    .interact_bwd = cpu_interact_bwd,
    .bce_logits = cpu_bce_logits,
    .sigmoid = cpu_sigmoid,
    .sgd = cpu_sgd,
    .sgd_sparse = cpu_sgd_sparse,
    .sgd_momentum = cpu_sgd_momentum,
    .sgd_momentum_masked = cpu_sgd_momentum_masked,
    .residual_layernorm_fwd16 = cpu_residual_layernorm_fwd16,
    .adamw = cpu_adamw,
    .adamw_sparse = cpu_adamw_sparse,
    .sumsq = cpu_sumsq,
    .scale_check = cpu_scale_check,
    .affine = cpu_affine,
    .round_fp32 = cpu_round_fp32,
    .linear_bwd_relu_in = cpu_linear_bwd_relu_in,
    /* the other optional entries: compositions of the above (cpu_train_fused.c) */
    .embedding_interact_fwd = cpu_embedding_interact_fwd,
    .embedding_bwd_sgd = cpu_embedding_bwd_sgd,
    .linear_fwd16 = cpu_linear_fwd16,
    .linear_bwd16 = cpu_linear_bwd16,
    .embedding_interact_fwd16 = cpu_embedding_interact_fwd16,
    .interact_bwd16 = cpu_interact_bwd16,
    /* transformer ops (gpt): cpu_train_gpt.c */
    .encoder_fwd = cpu_encoder_fwd,
    .encoder_bwd = cpu_encoder_bwd,
    .layernorm_fwd = cpu_layernorm_fwd,
    .layernorm_bwd = cpu_layernorm_bwd,
    .matmul_fwd = cpu_matmul_fwd,
    .matmul_bwd = cpu_matmul_bwd,
    .attention_fwd = cpu_attention_fwd,
    .attention_bwd = cpu_attention_bwd,
    .residual_fwd = cpu_residual_fwd,
    .classifier_fwd_bwd = cpu_classifier_fwd_bwd,
    .adamw_masked = cpu_adamw_masked,
    /* gpt with 16-bit activations: the ops above between casts (cpu_train_gpt16.c) */
    .layernorm_fwd16 = cpu_layernorm_fwd16,
    .layernorm_bwd16 = cpu_layernorm_bwd16,
    .matmul_fwd16 = cpu_matmul_fwd16,
    .matmul_bwd16 = cpu_matmul_bwd16,
    .attention_fwd16 = cpu_attention_fwd16,
    .attention_bwd16 = cpu_attention_bwd16,
    .residual_fwd16 = cpu_residual_fwd16,
    /* vision ops (resnet): dev/cpu_train_conv.c */
    .conv2d_fwd = cpu_conv2d_fwd,
    .conv2d_bwd_data = cpu_conv2d_bwd_data,
    .conv2d_bwd_filter = cpu_conv2d_bwd_filter,
    .bn_stats = cpu_bn_stats,
    .bn_mean = cpu_bn_mean,
    .bn_var = cpu_bn_var,
    .bn_rstd = cpu_bn_rstd,
    .bn_apply = cpu_bn_apply,
    .bn_bwd_stats = cpu_bn_bwd_stats,
    .bn_bwd_data = cpu_bn_bwd_data,
    .bn_bwd_params = cpu_bn_bwd_params,
    .maxpool_fwd = cpu_maxpool_fwd,
    .maxpool_bwd = cpu_maxpool_bwd,
    .avgpool_fwd = cpu_avgpool_fwd,
    .avgpool_bwd = cpu_avgpool_bwd,
    .add = cpu_add,
    .conv2d_fwd16 = cpu_conv2d_fwd16,
    .conv2d_bwd_data16 = cpu_conv2d_bwd_data16,
    .conv2d_bwd_filter16 = cpu_conv2d_bwd_filter16,
    .bn_apply16 = cpu_bn_apply16,
    .bn_bwd_data16 = cpu_bn_bwd_data16,
    .bn_bwd_reduce = cpu_bn_bwd_reduce,
    /* resnet with 16-bit activations: the vision ops between casts (cpu_train_vision16.c) */
    .conv2d_fwd16o = cpu_conv2d_fwd16o,
    .conv2d_bwd_data16o = cpu_conv2d_bwd_data16o,
    .conv2d_bwd_filter16o = cpu_conv2d_bwd_filter16o,
    .bn_stats16o = cpu_bn_stats16o,
    .bn_apply16o = cpu_bn_apply16o,
    .bn_bwd_reduce16o = cpu_bn_bwd_reduce16o,
    .bn_bwd_data16o = cpu_bn_bwd_data16o,
    .add16o = cpu_add16o,
    .bn_apply2_16o = cpu_bn_apply2_16o,
    .maxpool_fwd16o = cpu_maxpool_fwd16o,
    .maxpool_bwd16o = cpu_maxpool_bwd16o,
    /* the forward's BN statistics in one pass (cpu_train_conv.c, cpu_train_vision16.c) */
    .bn_stats1p16o = cpu_bn_stats1p16o,
    .bn_meanvar = cpu_bn_meanvar,
    .sparse_put_dn = cpu_sparse_put_dn,
    .cls_xent = cpu_cls_xent,
    .sumsq_dn = cpu_sumsq_dn,
    .scale_check_dn = cpu_scale_check_dn,
    .sgd_sparse_dn = cpu_sgd_sparse_dn,
    .sgd_gated = cpu_sgd_gated,
    .status_to_host = cpu_status_to_host,
    .found_of_sumsq = cpu_found_of_sumsq,
    .classifier_fwd_bwd16 = cpu_classifier_fwd_bwd16,
};
