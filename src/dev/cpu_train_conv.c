/* The cpu backend's vision ops (dev/train_ops.h "vision ops" gives every
 * definition; dev/train_vision.h the golden element functions).
 *
 * Golden: each output element is one chain in the documented order; the
 * loops vectorise across independent outputs (output channels k for the
 * forward, input channels c for the data gradient, c for the weight
 * gradient's outer products), never inside a chain, so the bits do not
 * depend on threads or vector width (tests/test_train_vision.c compares
 * them with the scalar element functions).
 * Fast: im2col + OpenBLAS sgemm (1x1 stride-1 convolutions are one GEMM
 * over the pixels), per-thread partial sums for the reductions. */
#include "dev/cpu_train_vision.h"
#include "dev/dev.h"
#include "dev/train_vision.h"
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

#define PAR_MIN (262144.0 * cpu_train_par_scale)
#define PAR_MIN_FLOP (3e6 * cpu_train_par_scale)
/* output pixels per im2col chunk (the column buffer stays in L2) */
#define COL_CHUNK 128
/* rows per chunk of the golden pairwise sums (a power of two: chunks are
 * aligned blocks of the tree, core/gmath.h) */
#define TREE_CHUNK 1024

static int nthreads(struct dev *d) { return d && d->threads > 0 ? d->threads : omp_get_max_threads(); }
static int golden(struct dev *d) { return d && d->numerics == NUMERICS_GOLDEN; }

#define NEED(cond, ...)                                                                  \
    do {                                                                                 \
        if (!(cond)) return err_set(e, PLUMB_EUSAGE, __VA_ARGS__);                       \
    } while (0)
#define RT_OK(op)                                                                        \
    do {                                                                                 \
        if (rt != DT_F32 && rt != DT_BF16 && rt != DT_F16)                               \
            return err_set(e, PLUMB_EUSAGE, "%s: rounding type %d is not fp32, bf16 or fp16", op, (int)rt); \
    } while (0)

/* grow-only scratch per thread (OpenMP workers are threads too) */
enum { VS_WT, VS_COL, VS_ACC, VS_PART, VS_N };
static __thread void *vs_ptr[VS_N];
static __thread size_t vs_cap[VS_N];
/* a thread's buffers are freed when it exits (a pthread key's destructor) */
static pthread_key_t vs_key;
static pthread_once_t vs_once = PTHREAD_ONCE_INIT;
static void vs_free(void *unused)
{
    (void)unused;
    for (int i = 0; i < VS_N; i++) {
        free(vs_ptr[i]);
        vs_ptr[i] = NULL;
        vs_cap[i] = 0;
    }
}
static void vs_key_make(void) { (void)pthread_key_create(&vs_key, vs_free); }
static void *scratch(int slot, size_t bytes)
{
    if (bytes > vs_cap[slot]) {
        free(vs_ptr[slot]);
        vs_ptr[slot] = malloc(bytes);
        vs_cap[slot] = vs_ptr[slot] ? bytes : 0;
        (void)pthread_once(&vs_once, vs_key_make);
        (void)pthread_setspecific(vs_key, (void *)1);
    }
    return vs_ptr[slot];
}

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

static int train_conv_check(const char *op, const struct train_conv *g, plumb_err *e)
{
    if (!g) return err_set(e, PLUMB_EUSAGE, "%s: no geometry", op);
    if (train_conv_valid(g))
        return err_set(e, PLUMB_EUSAGE,
                       "%s: bad geometry N=%d H=%d W=%d C=%d K=%d window %dx%d stride %d pad %d output %dx%d (expected "
                       "sizes >= 1, pad >= 0, the window inside the padded image, the output train_conv_set gives, "
                       "tensors below 2^31 elements)",
                       op, g->N, g->H, g->W, g->C, g->K, g->R, g->S, g->stride, g->pad, g->P, g->Q);
    return PLUMB_OK;
}

static int is_pointwise(const struct train_conv *g)
{
    return g->R == 1 && g->S == 1 && g->stride == 1 && g->pad == 0;
}

static void round_rows(float *y, size_t n, dtype_t rt)
{
    if (rt == DT_F32) return;
    for (size_t i = 0; i < n; i++) y[i] = tv_round(y[i], rt);
}

/* ======================= convolution: golden ======================= */

/* output pixel (n,p,q): acc[k] chains over r, s, c; wt [R,S,C,K] */
KERNEL static void conv_fwd_pixel(const struct train_conv *g, const float *restrict x, const float *restrict wt,
                                  float *restrict yr, int n, int p, int q, dtype_t rt, float *restrict acc)
{
    const int K = g->K, C = g->C;
    for (int k = 0; k < K; k++) acc[k] = 0.0f;
    for (int r = 0; r < g->R; r++) {
        int h = p * g->stride - g->pad + r;
        if (h < 0 || h >= g->H) continue;
        for (int s = 0; s < g->S; s++) {
            int ww = q * g->stride - g->pad + s;
            if (ww < 0 || ww >= g->W) continue;
            const float *xr = x + (((size_t)n * g->H + h) * g->W + ww) * C;
            const float *wb = wt + ((size_t)r * g->S + s) * C * K;
            for (int c = 0; c < C; c++) {
                const float xv = xr[c];
                const float *wr = wb + (size_t)c * K;
#pragma omp simd
                for (int k = 0; k < K; k++) acc[k] = fmaf(xv, wr[k], acc[k]);
            }
        }
    }
    for (int k = 0; k < K; k++) yr[k] = tv_round(acc[k], rt);
}

/* input pixel (n,h,w): acc[c] chains over r, s, k */
KERNEL static void conv_bwd_data_pixel(const struct train_conv *g, const float *restrict dy, const float *restrict w,
                                       float *restrict dxr, int n, int h, int ww, dtype_t rt, float *restrict acc)
{
    const int K = g->K, C = g->C;
    for (int c = 0; c < C; c++) acc[c] = 0.0f;
    for (int r = 0; r < g->R; r++) {
        int p = tv_conv_out_of(h, r, g->stride, g->pad, g->P);
        if (p < 0) continue;
        for (int s = 0; s < g->S; s++) {
            int q = tv_conv_out_of(ww, s, g->stride, g->pad, g->Q);
            if (q < 0) continue;
            const float *dr = dy + (((size_t)n * g->P + p) * g->Q + q) * K;
            for (int k = 0; k < K; k++) {
                const float gk = dr[k];
                const float *wr = w + (((size_t)k * g->R + r) * g->S + s) * C;
#pragma omp simd
                for (int c = 0; c < C; c++) acc[c] = fmaf(gk, wr[c], acc[c]);
            }
        }
    }
    for (int c = 0; c < C; c++) dxr[c] = tv_round(acc[c], rt);
}

/* dw[k0..k1, r, s, :]: acc[k][c] chains over n, p, q (outer products) */
KERNEL static void conv_bwd_filter_rs(const struct train_conv *g, const float *restrict x, const float *restrict dy,
                                      float *restrict dw, int r, int s, int k0, int k1, float *restrict acc)
{
    const int K = g->K, C = g->C, nk = k1 - k0;
    for (size_t i = 0; i < (size_t)nk * C; i++) acc[i] = 0.0f;
    for (int n = 0; n < g->N; n++)
        for (int p = 0; p < g->P; p++) {
            int h = p * g->stride - g->pad + r;
            if (h < 0 || h >= g->H) continue;
            for (int q = 0; q < g->Q; q++) {
                int ww = q * g->stride - g->pad + s;
                if (ww < 0 || ww >= g->W) continue;
                const float *dr = dy + (((size_t)n * g->P + p) * g->Q + q) * K;
                const float *xr = x + (((size_t)n * g->H + h) * g->W + ww) * C;
                for (int k = 0; k < nk; k++) {
                    const float gk = dr[k0 + k];
                    float *ar = acc + (size_t)k * C;
#pragma omp simd
                    for (int c = 0; c < C; c++) ar[c] = fmaf(gk, xr[c], ar[c]);
                }
            }
        }
    for (int k = 0; k < nk; k++)
        memcpy(dw + (((size_t)(k0 + k) * g->R + r) * g->S + s) * C, acc + (size_t)k * C, (size_t)C * sizeof(float));
}

/* ======================= convolution: fast (im2col + sgemm) ======================= */

/* col [np, R*S*C] for output pixels [o0, o0+np) of image n (zeros in the padding) */
static void im2col(const struct train_conv *g, const float *x, int n, int o0, int np, float *col)
{
    const int C = g->C, RSC = g->R * g->S * C;
    for (int i = 0; i < np; i++) {
        int o = o0 + i, p = o / g->Q, q = o % g->Q;
        float *cr = col + (size_t)i * RSC;
        /* the window's columns s are consecutive input pixels (NHWC): the
         * in-bounds span of a row is one contiguous copy */
        const int w0 = q * g->stride - g->pad;
        const int s_lo = w0 < 0 ? -w0 : 0, s_hi = w0 + g->S > g->W ? g->W - w0 : g->S;
        for (int r = 0; r < g->R; r++) {
            int h = p * g->stride - g->pad + r;
            float *dst = cr + (size_t)r * g->S * C;
            if (h < 0 || h >= g->H || s_hi <= s_lo) {
                memset(dst, 0, (size_t)g->S * C * sizeof(float));
                continue;
            }
            if (s_lo) memset(dst, 0, (size_t)s_lo * C * sizeof(float));
            memcpy(dst + (size_t)s_lo * C, x + (((size_t)n * g->H + h) * g->W + w0 + s_lo) * C,
                   (size_t)(s_hi - s_lo) * C * sizeof(float));
            if (s_hi < g->S) memset(dst + (size_t)s_hi * C, 0, (size_t)(g->S - s_hi) * C * sizeof(float));
        }
    }
}

/* dx of image n += col2im(dcol) for output pixels [o0, o0+np), in pixel order */
static void col2im_add(const struct train_conv *g, const float *dcol, int n, int o0, int np, float *dx)
{
    const int C = g->C, RSC = g->R * g->S * C;
    for (int i = 0; i < np; i++) {
        int o = o0 + i, p = o / g->Q, q = o % g->Q;
        const float *cr = dcol + (size_t)i * RSC;
        for (int r = 0; r < g->R; r++) {
            int h = p * g->stride - g->pad + r;
            if (h < 0 || h >= g->H) continue;
            for (int s = 0; s < g->S; s++) {
                int ww = q * g->stride - g->pad + s;
                if (ww < 0 || ww >= g->W) continue;
                float *dst = dx + (((size_t)n * g->H + h) * g->W + ww) * C;
                const float *src = cr + ((size_t)r * g->S + s) * C;
                for (int c = 0; c < C; c++) dst[c] += src[c];
            }
        }
    }
}

static double conv_flops(const struct train_conv *g)
{
    return (double)g->N * g->P * g->Q * g->K * g->R * g->S * g->C;
}

int cpu_conv2d_fwd(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x, const float *w,
                   float *y, dtype_t rt, plumb_err *e)
{
    (void)s;
    NEED(x && w && y, "conv2d_fwd: NULL x, w or y");
    RT_OK("conv2d_fwd");
    int rc = train_conv_check("conv2d_fwd", g, e);
    if (rc) return rc;
    const int nt = nthreads(d), K = g->K, RSC = g->R * g->S * g->C, PQ = g->P * g->Q;
    const int par = conv_flops(g) > PAR_MIN_FLOP;
    if (!golden(d)) {
        int prev = blas_single();
        if (is_pointwise(g)) { /* y [M,K] = x [M,C] w [K,C]^T */
            const long M = (long)g->N * PQ;
            const long nch = (M + 255) / 256;
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (par && nch > 1)
            for (long ch = 0; ch < nch; ch++) {
                long m0 = ch * 256, mb = M - m0 < 256 ? M - m0 : 256;
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)mb, K, g->C, 1.0f, x + (size_t)m0 * g->C,
                            g->C, w, g->C, 0.0f, y + (size_t)m0 * K, K);
                round_rows(y + (size_t)m0 * K, (size_t)mb * K, rt);
            }
        } else {
            const int cpi = (PQ + COL_CHUNK - 1) / COL_CHUNK;
            const long items = (long)g->N * cpi;
            int fail = 0;
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (par && items > 1) reduction(| : fail)
            for (long it = 0; it < items; it++) {
                int n = (int)(it / cpi), o0 = (int)(it % cpi) * COL_CHUNK, np = PQ - o0 < COL_CHUNK ? PQ - o0 : COL_CHUNK;
                float *col = scratch(VS_COL, (size_t)COL_CHUNK * RSC * sizeof(float));
                if (!col) {
                    fail = 1;
                    continue;
                }
                im2col(g, x, n, o0, np, col);
                float *yo = y + ((size_t)n * PQ + o0) * K;
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, np, K, RSC, 1.0f, col, RSC, w, RSC, 0.0f, yo, K);
                round_rows(yo, (size_t)np * K, rt);
            }
            if (fail) {
                blas_restore(prev);
                return err_set(e, PLUMB_ENOMEM, "conv2d_fwd: out of memory for the column buffer");
            }
        }
        blas_restore(prev);
        return PLUMB_OK;
    }
    /* golden: w transposed to [R,S,C,K] so a pixel's K chains run as vectors */
    float *wt = scratch(VS_WT, (size_t)K * RSC * sizeof(float));
    if (!wt) return err_set(e, PLUMB_ENOMEM, "conv2d_fwd: out of memory for scratch");
    for (int k = 0; k < K; k++)
        for (int i = 0; i < RSC; i++) wt[(size_t)i * K + k] = w[(size_t)k * RSC + i];
    const long npix = (long)g->N * PQ;
    int fail = 0;
#pragma omp parallel num_threads(nt) if (par) reduction(| : fail)
    {
        float *acc = scratch(VS_ACC, (size_t)K * sizeof(float));
        if (!acc) fail = 1;
#pragma omp for schedule(dynamic, 16)
        for (long i = 0; i < npix; i++) {
            if (!acc) continue;
            int n = (int)(i / PQ), o = (int)(i % PQ);
            conv_fwd_pixel(g, x, wt, y + (size_t)i * K, n, o / g->Q, o % g->Q, rt, acc);
        }
    }
    if (fail) return err_set(e, PLUMB_ENOMEM, "conv2d_fwd: out of memory for scratch");
    return PLUMB_OK;
}

int cpu_conv2d_bwd_data(struct dev *d, dev_stream *s, const struct train_conv *g, const float *dy, const float *w,
                        float *dx, dtype_t rt, plumb_err *e)
{
    (void)s;
    NEED(dy && w && dx, "conv2d_bwd_data: NULL dy, w or dx");
    RT_OK("conv2d_bwd_data");
    int rc = train_conv_check("conv2d_bwd_data", g, e);
    if (rc) return rc;
    const int nt = nthreads(d), K = g->K, C = g->C, RSC = g->R * g->S * C, PQ = g->P * g->Q, HW = g->H * g->W;
    const int par = conv_flops(g) > PAR_MIN_FLOP;
    int fail = 0;
    if (!golden(d)) {
        int prev = blas_single();
        if (is_pointwise(g)) { /* dx [M,C] = dy [M,K] w [K,C] */
            const long M = (long)g->N * PQ;
            const long nch = (M + 255) / 256;
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (par && nch > 1)
            for (long ch = 0; ch < nch; ch++) {
                long m0 = ch * 256, mb = M - m0 < 256 ? M - m0 : 256;
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)mb, C, K, 1.0f, dy + (size_t)m0 * K, K, w,
                            C, 0.0f, dx + (size_t)m0 * C, C);
                round_rows(dx + (size_t)m0 * C, (size_t)mb * C, rt);
            }
        } else {
            /* per image: dcol = dy_n w, scattered into dx_n in pixel order */
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (par && g->N > 1) reduction(| : fail)
            for (int n = 0; n < g->N; n++) {
                float *dcol = scratch(VS_COL, (size_t)COL_CHUNK * RSC * sizeof(float));
                if (!dcol) {
                    fail = 1;
                    continue;
                }
                float *dxn = dx + (size_t)n * HW * C;
                memset(dxn, 0, (size_t)HW * C * sizeof(float));
                for (int o0 = 0; o0 < PQ; o0 += COL_CHUNK) {
                    int np = PQ - o0 < COL_CHUNK ? PQ - o0 : COL_CHUNK;
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, np, RSC, K, 1.0f,
                                dy + ((size_t)n * PQ + o0) * K, K, w, RSC, 0.0f, dcol, RSC);
                    col2im_add(g, dcol, n, o0, np, dx);
                }
                round_rows(dxn, (size_t)HW * C, rt);
            }
        }
        blas_restore(prev);
        if (fail) return err_set(e, PLUMB_ENOMEM, "conv2d_bwd_data: out of memory for the column buffer");
        return PLUMB_OK;
    }
    const long npix = (long)g->N * HW;
#pragma omp parallel num_threads(nt) if (par) reduction(| : fail)
    {
        float *acc = scratch(VS_ACC, (size_t)C * sizeof(float));
        if (!acc) fail = 1;
#pragma omp for schedule(dynamic, 16)
        for (long i = 0; i < npix; i++) {
            if (!acc) continue;
            int n = (int)(i / HW), o = (int)(i % HW);
            conv_bwd_data_pixel(g, dy, w, dx + (size_t)i * C, n, o / g->W, o % g->W, rt, acc);
        }
    }
    if (fail) return err_set(e, PLUMB_ENOMEM, "conv2d_bwd_data: out of memory for scratch");
    return PLUMB_OK;
}

int cpu_conv2d_bwd_filter(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x, const float *dy,
                          float *dw, dtype_t rt, plumb_err *e)
{
    (void)s;
    NEED(x && dy && dw, "conv2d_bwd_filter: NULL x, dy or dw");
    RT_OK("conv2d_bwd_filter");
    int rc = train_conv_check("conv2d_bwd_filter", g, e);
    if (rc) return rc;
    const int nt = nthreads(d), K = g->K, C = g->C, RSC = g->R * g->S * C, PQ = g->P * g->Q;
    const int par = conv_flops(g) > PAR_MIN_FLOP;
    int fail = 0;
    if (!golden(d)) {
        /* thread t sums images [N t/T, N (t+1)/T) into its own partial
         * dw [K, RSC]; the partials are added in thread order */
        const int T = par ? (nt < g->N ? nt : g->N) : 1;
        float *parts = scratch(VS_PART, (size_t)T * K * RSC * sizeof(float));
        if (!parts) return err_set(e, PLUMB_ENOMEM, "conv2d_bwd_filter: out of memory for partial sums");
        int prev = blas_single(), team = 1;
#pragma omp parallel num_threads(T) if (T > 1) reduction(| : fail)
        {
            int t = omp_get_thread_num(), TT = omp_get_num_threads();
            if (t == 0) team = TT;
            float *dwp = parts + (size_t)t * K * RSC;
            memset(dwp, 0, (size_t)K * RSC * sizeof(float));
            int n0 = (int)((long)g->N * t / TT), n1 = (int)((long)g->N * (t + 1) / TT);
            float *col = is_pointwise(g) ? NULL : scratch(VS_COL, (size_t)COL_CHUNK * RSC * sizeof(float));
            if (!is_pointwise(g) && !col) fail = 1;
            for (int n = n0; n < n1 && !fail; n++)
                for (int o0 = 0; o0 < PQ; o0 += COL_CHUNK) {
                    int np = PQ - o0 < COL_CHUNK ? PQ - o0 : COL_CHUNK;
                    const float *src = x + ((size_t)n * PQ + o0) * C; /* pointwise: pixels are the rows */
                    if (col) {
                        im2col(g, x, n, o0, np, col);
                        src = col;
                    }
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, RSC, np, 1.0f,
                                dy + ((size_t)n * PQ + o0) * K, K, src, RSC, 1.0f, dwp, RSC);
                }
        }
        blas_restore(prev);
        if (fail) return err_set(e, PLUMB_ENOMEM, "conv2d_bwd_filter: out of memory for the column buffer");
        memcpy(dw, parts, (size_t)K * RSC * sizeof(float));
        for (int t = 1; t < team; t++) {
            const float *pt = parts + (size_t)t * K * RSC;
            for (size_t i = 0; i < (size_t)K * RSC; i++) dw[i] += pt[i];
        }
        return PLUMB_OK;
    }
    /* golden: work items (r, s, block of KB output channels) */
    const int KB = 16, nkb = (K + KB - 1) / KB, items = g->R * g->S * nkb;
#pragma omp parallel num_threads(nt) if (par && items > 1) reduction(| : fail)
    {
        float *acc = scratch(VS_ACC, (size_t)KB * C * sizeof(float));
        if (!acc) fail = 1;
#pragma omp for schedule(dynamic, 1)
        for (int it = 0; it < items; it++) {
            if (!acc) continue;
            int rs = it / nkb, kb = it % nkb, k0 = kb * KB, k1 = k0 + KB < K ? k0 + KB : K;
            conv_bwd_filter_rs(g, x, dy, dw, rs / g->S, rs % g->S, k0, k1, acc);
        }
    }
    if (fail) return err_set(e, PLUMB_ENOMEM, "conv2d_bwd_filter: out of memory for scratch");
    return PLUMB_OK;
}

/* ======================= batch normalisation ======================= */

/* The values BatchNorm sums for (row m, channel c). */
enum bn_val { BV_X, BV_SQ, BV_DY, BV_DYXH, BV_D };
static inline float bn_value(enum bn_val kind, const float *x, const float *dy, const float *mean,
                             const float *rstd, size_t m, int C, int c)
{
    const size_t i = m * (size_t)C + c;
    switch (kind) {
    case BV_X: return x[i];
    case BV_SQ: {
        float dd = x[i] - mean[c];
        return dd * dd;
    }
    case BV_DY: return dy[i];
    case BV_D: return x[i] - mean[c];
    default: return dy[i] * tv_bn_xhat(x[i], mean[c], rstd[c]);
    }
}

/* Golden: fixed-point sums over the M rows, hi words to hi[c], lo words to
 * lo[c]. Per-thread partials over row ranges, added as integers: exact, so
 * any thread split gives the same sums. */
static int bn_fix_sums(struct dev *d, enum bn_val kind, const float *x, const float *dy, const float *mean,
                       const float *rstd, size_t M, int C, int64_t *hi, int64_t *lo, plumb_err *e)
{
    const int nt = (double)M * C > PAR_MIN ? nthreads(d) : 1;
    int64_t *tp = scratch(VS_PART, (size_t)nt * 2 * C * sizeof(int64_t));
    if (!tp) return err_set(e, PLUMB_ENOMEM, "bn: out of memory for partial sums");
    int team = 1;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int t = omp_get_thread_num(), T = omp_get_num_threads();
        if (t == 0) team = T;
        int64_t *h = tp + (size_t)t * 2 * C, *l = h + C;
        memset(h, 0, 2 * (size_t)C * sizeof(int64_t));
        size_t m0 = M * t / T, m1 = M * (t + 1) / T;
        for (size_t m = m0; m < m1; m++)
            for (int c = 0; c < C; c++) {
                int64_t qh, ql;
                tv_fix_split(tv_fix(bn_value(kind, x, dy, mean, rstd, m, C, c)), &qh, &ql);
                h[c] += qh;
                l[c] += ql;
            }
    }
    for (int c = 0; c < C; c++) {
        int64_t sh = 0, sl = 0;
        for (int t = 0; t < team; t++) {
            sh += tp[(size_t)t * 2 * C + c];
            sl += tp[(size_t)t * 2 * C + C + c];
        }
        hi[c] = sh;
        lo[c] = sl;
    }
    return PLUMB_OK;
}

/* Fast: rows in chunks of 256 summed in fp32 vectors across channels, the
 * chunk sums added into per-thread double partials, those in thread order;
 * stored as float. One loop per kind so each vectorises. */
#define FAST_ROWS 256
KERNEL static void fast_rows(enum bn_val kind, const float *restrict x, const float *restrict dy,
                             const float *restrict mean, const float *restrict rstd, size_t m0, size_t m1, int C,
                             float *restrict ch, double *restrict a)
{
    for (size_t r0 = m0; r0 < m1; r0 += FAST_ROWS) {
        size_t r1 = r0 + FAST_ROWS < m1 ? r0 + FAST_ROWS : m1;
        for (int c = 0; c < C; c++) ch[c] = 0.0f;
        for (size_t m = r0; m < r1; m++) {
            const float *xr = x ? x + m * C : NULL, *dr = dy ? dy + m * C : NULL;
            if (kind == BV_X) {
#pragma omp simd
                for (int c = 0; c < C; c++) ch[c] += xr[c];
            } else if (kind == BV_D) {
#pragma omp simd
                for (int c = 0; c < C; c++) ch[c] += xr[c] - mean[c];
            } else if (kind == BV_SQ) {
#pragma omp simd
                for (int c = 0; c < C; c++) {
                    float dd = xr[c] - mean[c];
                    ch[c] += dd * dd;
                }
            } else if (kind == BV_DY) {
#pragma omp simd
                for (int c = 0; c < C; c++) ch[c] += dr[c];
            } else {
#pragma omp simd
                for (int c = 0; c < C; c++) ch[c] += dr[c] * ((xr[c] - mean[c]) * rstd[c]);
            }
        }
        for (int c = 0; c < C; c++) a[c] += (double)ch[c];
    }
}

static int bn_fast_sums(struct dev *d, enum bn_val kind, const float *x, const float *dy, const float *mean,
                        const float *rstd, size_t M, int C, float *out, plumb_err *e)
{
    const int nt = (double)M * C > PAR_MIN ? nthreads(d) : 1;
    double *tp = scratch(VS_PART, (size_t)nt * C * sizeof(double));
    if (!tp) return err_set(e, PLUMB_ENOMEM, "bn: out of memory for partial sums");
    int team = 1, fail = 0;
#pragma omp parallel num_threads(nt) if (nt > 1) reduction(| : fail)
    {
        int t = omp_get_thread_num(), T = omp_get_num_threads();
        if (t == 0) team = T;
        double *a = tp + (size_t)t * C;
        float *ch = scratch(VS_ACC, (size_t)C * sizeof(float));
        for (int c = 0; c < C; c++) a[c] = 0.0;
        if (!ch) fail = 1;
        else fast_rows(kind, x, dy, mean, rstd, M * t / T, M * (t + 1) / T, C, ch, a);
    }
    if (fail) return err_set(e, PLUMB_ENOMEM, "bn: out of memory for partial sums");
    for (int c = 0; c < C; c++) {
        double sum = 0.0;
        for (int t = 0; t < team; t++) sum += tp[(size_t)t * C + c];
        out[c] = (float)sum;
    }
    return PLUMB_OK;
}

int cpu_bn_stats(struct dev *d, dev_stream *s, const float *x, size_t M, int C, const float *mean, void *part,
                 plumb_err *e)
{
    (void)s;
    NEED(x && part, "bn_stats: NULL x or part");
    NEED(M > 0 && C > 0 && M < ((size_t)1 << 31), "bn_stats: bad shape M=%zu C=%d (expected 1..2^31-1 rows)", M, C);
    enum bn_val k = mean ? BV_SQ : BV_X;
    if (golden(d)) return bn_fix_sums(d, k, x, NULL, mean, NULL, M, C, part, (int64_t *)part + C, e);
    return bn_fast_sums(d, k, x, NULL, mean, NULL, M, C, part, e);
}

/* bn_stats1p16o's sums over the fp32 x (the 16-bit values widened): part
 * [2C] fp32, the sums of d = x - shift and of d * d; fast numerics only */
int cpu_bn_stats1p(struct dev *d, const float *x, size_t M, int C, const float *shift, float *part, plumb_err *e)
{
    NEED(x && part, "bn_stats1p16o: NULL x or part");
    NEED(M > 0 && C > 0 && M < ((size_t)1 << 31), "bn_stats1p16o: bad shape M=%zu C=%d (expected 1..2^31-1 rows)", M,
         C);
    NEED(!golden(d), "bn_stats1p16o: fast numerics only (golden statistics are bn_stats' two passes)");
    float *sh = malloc((size_t)C * sizeof(float));
    if (!sh) return err_set(e, PLUMB_ENOMEM, "bn_stats1p16o: out of memory for the shift");
    for (int c = 0; c < C; c++) sh[c] = tv_bn_shift(shift, c);
    int rc = bn_fast_sums(d, BV_D, x, NULL, sh, NULL, M, C, part, e);
    if (!rc) rc = bn_fast_sums(d, BV_SQ, x, NULL, sh, NULL, M, C, part + C, e);
    free(sh);
    return rc;
}

int cpu_bn_meanvar(struct dev *d, dev_stream *s, const void *part, int C, int64_t count, float eps, float momentum,
                   const float *shift, float *mean, float *rstd, float *run_mean, float *run_var, plumb_err *e)
{
    (void)s;
    NEED(part && mean && rstd, "bn_meanvar: NULL part, mean or rstd");
    NEED((!run_mean) == (!run_var), "bn_meanvar: running statistics need both run_mean and run_var");
    NEED(C > 0 && count >= 2, "bn_meanvar: C=%d count=%lld (expected C > 0, count >= 2)", C, (long long)count);
    NEED(!golden(d), "bn_meanvar: fast numerics only (golden statistics are bn_var's)");
    NEED(mean != shift && rstd != shift, "bn_meanvar: mean or rstd aliases the shift");
    for (int c = 0; c < C; c++)
        tv_bn_meanvar(part, C, c, (long long)count, eps, momentum, shift, mean, rstd, run_mean, run_var);
    return PLUMB_OK;
}

int cpu_bn_bwd_stats(struct dev *d, dev_stream *s, const float *x, const float *dy, const float *mean,
                     const float *rstd, size_t M, int C, void *part, plumb_err *e)
{
    (void)s;
    NEED(x && dy && mean && rstd && part, "bn_bwd_stats: NULL argument");
    NEED(M > 0 && C > 0 && M < ((size_t)1 << 31), "bn_bwd_stats: bad shape M=%zu C=%d", M, C);
    if (golden(d)) { /* [2, 2C]: hi of (dy, dy xhat), then lo of (dy, dy xhat) */
        int64_t *p = part;
        int rc = bn_fix_sums(d, BV_DY, x, dy, mean, rstd, M, C, p, p + 2 * C, e);
        if (!rc) rc = bn_fix_sums(d, BV_DYXH, x, dy, mean, rstd, M, C, p + C, p + 3 * C, e);
        return rc;
    }
    float *p = part;
    int rc = bn_fast_sums(d, BV_DY, x, dy, mean, rstd, M, C, p, e);
    if (!rc) rc = bn_fast_sums(d, BV_DYXH, x, dy, mean, rstd, M, C, p + C, e);
    return rc;
}

int cpu_bn_mean(struct dev *d, dev_stream *s, const void *part, int K, int64_t count, float *out, plumb_err *e)
{
    (void)s;
    NEED(part && out, "bn_mean: NULL part or out");
    NEED(K > 0 && count > 0, "bn_mean: K=%d count=%lld (expected > 0)", K, (long long)count);
    if (golden(d)) {
        const int64_t *p = part;
        for (int i = 0; i < K; i++) out[i] = tv_fix_mean(p[i], p[K + i], count);
    } else {
        const float *p = part;
        for (int i = 0; i < K; i++) out[i] = p[i] / (float)count;
    }
    return PLUMB_OK;
}

int cpu_bn_var(struct dev *d, dev_stream *s, const void *part, int C, int64_t count, float eps, float momentum,
               const float *mean, float *rstd, float *run_mean, float *run_var, plumb_err *e)
{
    (void)s;
    NEED(part && rstd, "bn_var: NULL part or rstd");
    NEED((!run_mean && !run_var) || (run_mean && run_var && mean), "bn_var: running statistics need run_mean, "
                                                                    "run_var and mean");
    NEED(C > 0 && count >= 2, "bn_var: C=%d count=%lld (expected C > 0, count >= 2)", C, (long long)count);
    for (int c = 0; c < C; c++) {
        float var, varu;
        if (golden(d)) {
            const int64_t *p = part;
            double v = tv_fix_value(p[c], p[C + c]);
            var = (float)(v / (double)count);
            varu = (float)(v / (double)(count - 1));
        } else {
            const float *p = part;
            var = p[c] / (float)count;
            varu = p[c] / (float)(count - 1);
        }
        rstd[c] = 1.0f / sqrtf(var + eps);
        if (run_mean) {
            run_mean[c] = tv_bn_running(run_mean[c], mean[c], momentum);
            run_var[c] = tv_bn_running(run_var[c], varu, momentum);
        }
    }
    return PLUMB_OK;
}

int cpu_bn_rstd(struct dev *d, dev_stream *s, const float *var, int C, float eps, float *rstd, plumb_err *e)
{
    (void)d, (void)s;
    NEED(var && rstd && C > 0, "bn_rstd: NULL argument or C=%d", C);
    for (int c = 0; c < C; c++) rstd[c] = 1.0f / sqrtf(var[c] + eps);
    return PLUMB_OK;
}

/* rows [m0, m1): the definition (train_vision.h tv_bn_apply) in passes
 * over each row that vectorise across channels (the same bits) */
KERNEL static void bn_apply_rows(const float *x, const float *restrict mean, const float *restrict rstd,
                                 const float *restrict gamma, const float *restrict beta, const float *z, float *y,
                                 size_t m0, size_t m1, int C, int relu, dtype_t rt)
{
    for (size_t m = m0; m < m1; m++) {
        const float *xr = x + m * C;
        float *yr = y + m * C;
        if (z) { /* y may alias x or z (not restrict): each element is read before it is written */
            const float *zr = z + m * C;
#pragma omp simd
            for (int c = 0; c < C; c++) yr[c] = fmaf((xr[c] - mean[c]) * rstd[c], gamma[c], beta[c]) + zr[c];
        } else {
#pragma omp simd
            for (int c = 0; c < C; c++) yr[c] = fmaf((xr[c] - mean[c]) * rstd[c], gamma[c], beta[c]);
        }
        if (relu) {
#pragma omp simd
            for (int c = 0; c < C; c++) yr[c] = yr[c] > 0.0f ? yr[c] : 0.0f;
        }
        if (rt != DT_F32)
            for (int c = 0; c < C; c++) yr[c] = tv_round(yr[c], rt);
    }
}

/* rows [m0, m1) of bn_bwd_data (train_vision.h tv_bn_dx), vectorised */
KERNEL static void bn_dx_rows(const float *restrict x, const float *dy, const float *restrict mean,
                              const float *restrict rstd, const float *restrict gamma, const float *restrict mdy,
                              float *dx, size_t m0, size_t m1, int C, dtype_t rt)
{
    for (size_t m = m0; m < m1; m++) {
        const float *xr = x + m * C, *dr = dy + m * C;
        float *o = dx + m * C;
#pragma omp simd
        for (int c = 0; c < C; c++) {
            float xh = (xr[c] - mean[c]) * rstd[c];
            float t = dr[c] - mdy[c];
            t = fmaf(-xh, mdy[C + c], t);
            o[c] = (gamma[c] * rstd[c]) * t;
        }
        if (rt != DT_F32)
            for (int c = 0; c < C; c++) o[c] = tv_round(o[c], rt);
    }
}

int cpu_bn_apply(struct dev *d, dev_stream *s, const float *x, const float *mean, const float *rstd,
                 const float *gamma, const float *beta, const float *z, float *y, size_t M, int C, int relu,
                 dtype_t rt, plumb_err *e)
{
    (void)s;
    NEED(x && mean && rstd && gamma && beta && y, "bn_apply: NULL argument");
    NEED(M > 0 && C > 0, "bn_apply: bad shape M=%zu C=%d", M, C);
    RT_OK("bn_apply");
    const int nt = nthreads(d);
#pragma omp parallel num_threads(nt) if ((double)M * C > PAR_MIN)
    {
        int t = omp_get_thread_num(), T = omp_get_num_threads();
        bn_apply_rows(x, mean, rstd, gamma, beta, z, y, M * t / T, M * (t + 1) / T, C, relu, rt);
    }
    return PLUMB_OK;
}

int cpu_bn_bwd_data(struct dev *d, dev_stream *s, const float *x, const float *dy, const float *mean,
                    const float *rstd, const float *gamma, const float *mdy, float *dx, size_t M, int C, dtype_t rt,
                    plumb_err *e)
{
    (void)s;
    NEED(x && dy && mean && rstd && gamma && mdy && dx, "bn_bwd_data: NULL argument");
    NEED(M > 0 && C > 0, "bn_bwd_data: bad shape M=%zu C=%d", M, C);
    RT_OK("bn_bwd_data");
    const int nt = nthreads(d);
#pragma omp parallel num_threads(nt) if ((double)M * C > PAR_MIN)
    {
        int t = omp_get_thread_num(), T = omp_get_num_threads();
        bn_dx_rows(x, dy, mean, rstd, gamma, mdy, dx, M * t / T, M * (t + 1) / T, C, rt);
    }
    return PLUMB_OK;
}

/* The pairwise tree of core/gmath.h over rows for C channels at once: the
 * push pattern depends only on the count, so every channel's stack moves
 * together (stack [64, C]). */
struct vtree {
    uint64_t count;
    int top, C;
    float *stack, *cur;
};
static void vt_init(struct vtree *t, int C, float *mem) /* mem: 65 * C floats */
{
    t->count = 0;
    t->top = 0;
    t->C = C;
    t->stack = mem;
    t->cur = mem + (size_t)64 * C;
}
KERNEL static void vt_push(struct vtree *t, const float *v)
{
    const int C = t->C;
    float *cur = t->cur;
    memcpy(cur, v, (size_t)C * sizeof(float));
    uint64_t c = t->count;
    while (c & 1u) {
        const float *sv = t->stack + (size_t)(--t->top) * C;
#pragma omp simd
        for (int i = 0; i < C; i++) cur[i] = sv[i] + cur[i];
        c >>= 1;
    }
    memcpy(t->stack + (size_t)(t->top++) * C, cur, (size_t)C * sizeof(float));
    t->count++;
}
static void vt_result(const struct vtree *t, float *out)
{
    const int C = t->C;
    if (t->top == 0) {
        for (int i = 0; i < C; i++) out[i] = 0.0f;
        return;
    }
    memcpy(out, t->stack + (size_t)(t->top - 1) * C, (size_t)C * sizeof(float));
    for (int j = t->top - 2; j >= 0; j--) {
        const float *sv = t->stack + (size_t)j * C;
        for (int i = 0; i < C; i++) out[i] = sv[i] + out[i];
    }
}

int cpu_bn_bwd_params(struct dev *d, dev_stream *s, const float *x, const float *dy, const float *mean,
                      const float *rstd, size_t M, int C, float *dgamma, float *dbeta, plumb_err *e)
{
    (void)s;
    NEED(x && dy && mean && rstd && dgamma && dbeta, "bn_bwd_params: NULL argument");
    NEED(M > 0 && C > 0, "bn_bwd_params: bad shape M=%zu C=%d", M, C);
    const int nt = nthreads(d);
    const size_t nch = (M + TREE_CHUNK - 1) / TREE_CHUNK;
    /* chunk sums [nch, 2, C]: dbeta then dgamma of each aligned chunk */
    float *cs = malloc(nch * 2 * (size_t)C * sizeof(float));
    if (!cs) return err_set(e, PLUMB_ENOMEM, "bn_bwd_params: out of memory (%zu chunks)", nch);
    int fail = 0, g = golden(d);
#pragma omp parallel num_threads(nt) if ((double)M * C > PAR_MIN && nch > 1) reduction(| : fail)
    {
        float *mem = scratch(VS_ACC, (size_t)(2 * 65 + 7) * C * sizeof(float));
        if (!mem) fail = 1;
#pragma omp for schedule(dynamic, 1)
        for (size_t ch = 0; ch < nch; ch++) {
            if (!mem) continue;
            size_t m0 = ch * TREE_CHUNK, m1 = m0 + TREE_CHUNK < M ? m0 + TREE_CHUNK : M;
            float *db = cs + ch * 2 * C, *dg = db + C, *prod = mem + (size_t)2 * 65 * C;
            if (g) {
                struct vtree tb, tg;
                vt_init(&tb, C, mem);
                vt_init(&tg, C, mem + (size_t)65 * C);
                for (size_t m = m0; m < m1; m++) {
                    const float *xr = x + m * C, *dr = dy + m * C;
                    for (int c = 0; c < C; c++) prod[c] = dr[c] * tv_bn_xhat(xr[c], mean[c], rstd[c]);
                    vt_push(&tb, dr);
                    vt_push(&tg, prod);
                }
                vt_result(&tb, db);
                vt_result(&tg, dg);
            } else {
                double *acc = (double *)(mem + (size_t)132 * C); /* 2C doubles after prod (8-byte aligned) */
                for (int c = 0; c < 2 * C; c++) acc[c] = 0.0;
                fast_rows(BV_DY, x, dy, mean, rstd, m0, m1, C, prod, acc);
                fast_rows(BV_DYXH, x, dy, mean, rstd, m0, m1, C, prod, acc + C);
                for (int c = 0; c < C; c++) {
                    db[c] = (float)acc[c];
                    dg[c] = (float)acc[C + c];
                }
            }
        }
    }
    if (fail) {
        free(cs);
        return err_set(e, PLUMB_ENOMEM, "bn_bwd_params: out of memory for scratch");
    }
    if (g) { /* the chunk sums are aligned level-10 elements: the same rule finishes the tree */
        float *mem = malloc((size_t)2 * 65 * C * sizeof(float));
        if (!mem) {
            free(cs);
            return err_set(e, PLUMB_ENOMEM, "bn_bwd_params: out of memory");
        }
        struct vtree tb, tg;
        vt_init(&tb, C, mem);
        vt_init(&tg, C, mem + (size_t)65 * C);
        for (size_t ch = 0; ch < nch; ch++) {
            vt_push(&tb, cs + ch * 2 * C);
            vt_push(&tg, cs + ch * 2 * C + C);
        }
        vt_result(&tb, dbeta);
        vt_result(&tg, dgamma);
        free(mem);
    } else {
        for (int c = 0; c < C; c++) dbeta[c] = dgamma[c] = 0.0f;
        for (size_t ch = 0; ch < nch; ch++)
            for (int c = 0; c < C; c++) {
                dbeta[c] += cs[ch * 2 * C + c];
                dgamma[c] += cs[ch * 2 * C + C + c];
            }
    }
    free(cs);
    return PLUMB_OK;
}

/* ======================= pooling, add ======================= */

int cpu_maxpool_fwd(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x, float *y,
                    int32_t *idx, plumb_err *e)
{
    (void)s;
    NEED(x && y && idx, "maxpool_fwd: NULL x, y or idx");
    int rc = train_conv_check("maxpool_fwd", g, e);
    if (rc) return rc;
    NEED(g->K == g->C && g->pad < g->R && g->pad < g->S, "maxpool_fwd: K=%d C=%d pad %d window %dx%d (expected K == C, "
                                                         "pad < window)", g->K, g->C, g->pad, g->R, g->S);
    const int nt = nthreads(d), C = g->C;
    const long npix = (long)g->N * g->P * g->Q;
#pragma omp parallel for num_threads(nt) schedule(static) if ((double)npix * C * g->R * g->S > PAR_MIN)
    for (long i = 0; i < npix; i++) {
        int n = (int)(i / (g->P * g->Q)), o = (int)(i % (g->P * g->Q));
        for (int c = 0; c < C; c++)
            y[(size_t)i * C + c] = tv_maxpool_elem(g, x, n, o / g->Q, o % g->Q, c, &idx[(size_t)i * C + c]);
    }
    return PLUMB_OK;
}

int cpu_maxpool_bwd(struct dev *d, dev_stream *s, const struct train_conv *g, const float *dy, const int32_t *idx,
                    float *dx, dtype_t rt, plumb_err *e)
{
    (void)s;
    NEED(dy && idx && dx, "maxpool_bwd: NULL dy, idx or dx");
    RT_OK("maxpool_bwd");
    int rc = train_conv_check("maxpool_bwd", g, e);
    if (rc) return rc;
    NEED(g->K == g->C, "maxpool_bwd: K=%d C=%d (expected K == C)", g->K, g->C);
    const int nt = nthreads(d), C = g->C;
    const long npix = (long)g->N * g->H * g->W;
#pragma omp parallel for num_threads(nt) schedule(static) if ((double)npix * C * g->R * g->S > PAR_MIN)
    for (long i = 0; i < npix; i++) {
        int n = (int)(i / (g->H * g->W)), o = (int)(i % (g->H * g->W));
        for (int c = 0; c < C; c++)
            dx[(size_t)i * C + c] = tv_round(tv_maxpool_bwd_elem(g, dy, idx, n, o / g->W, o % g->W, c), rt);
    }
    return PLUMB_OK;
}

int cpu_avgpool_fwd(struct dev *d, dev_stream *s, const float *x, float *y, int N, int HW, int C, dtype_t rt,
                    plumb_err *e)
{
    (void)s;
    NEED(x && y, "avgpool_fwd: NULL x or y");
    NEED(N > 0 && HW > 0 && C > 0, "avgpool_fwd: bad shape N=%d HW=%d C=%d", N, HW, C);
    RT_OK("avgpool_fwd");
    const int nt = nthreads(d);
    int fail = 0;
#pragma omp parallel num_threads(nt) if ((double)N * HW * C > PAR_MIN) reduction(| : fail)
    {
        float *mem = scratch(VS_ACC, (size_t)65 * C * sizeof(float));
        if (!mem) fail = 1;
#pragma omp for schedule(static)
        for (int n = 0; n < N; n++) {
            if (!mem) continue;
            struct vtree t;
            vt_init(&t, C, mem);
            for (int i = 0; i < HW; i++) vt_push(&t, x + ((size_t)n * HW + i) * C);
            float *yr = y + (size_t)n * C;
            vt_result(&t, yr);
            for (int c = 0; c < C; c++) yr[c] = tv_round(yr[c] / (float)HW, rt);
        }
    }
    if (fail) return err_set(e, PLUMB_ENOMEM, "avgpool_fwd: out of memory for scratch");
    return PLUMB_OK;
}

int cpu_avgpool_bwd(struct dev *d, dev_stream *s, const float *dy, float *dx, int N, int HW, int C, dtype_t rt,
                    plumb_err *e)
{
    (void)s;
    NEED(dy && dx, "avgpool_bwd: NULL dy or dx");
    NEED(N > 0 && HW > 0 && C > 0, "avgpool_bwd: bad shape N=%d HW=%d C=%d", N, HW, C);
    RT_OK("avgpool_bwd");
    const int nt = nthreads(d);
#pragma omp parallel for num_threads(nt) schedule(static) if ((double)N * HW * C > PAR_MIN)
    for (int n = 0; n < N; n++)
        for (int i = 0; i < HW; i++)
            for (int c = 0; c < C; c++)
                dx[((size_t)n * HW + i) * C + c] = tv_round(dy[(size_t)n * C + c] / (float)HW, rt);
    return PLUMB_OK;
}

int cpu_add(struct dev *d, dev_stream *s, const float *a, const float *b, float *y, size_t n, int relu, dtype_t rt,
            plumb_err *e)
{
    (void)s;
    NEED((a && b && y) || n == 0, "add: NULL a, b or y");
    RT_OK("add");
    const int nt = nthreads(d);
#pragma omp parallel for num_threads(nt) schedule(static) if (n > PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        float v = a[i] + b[i];
        if (relu) v = v > 0.0f ? v : 0.0f;
        y[i] = tv_round(v, rt);
    }
    return PLUMB_OK;
}

/* ======================= softmax cross-entropy ======================= */

/* fast row: libm expf/logf, plain sums */
static float xent_row_fast(const float *z, int V, int y, float gs, float *dz, int32_t *pred)
{
    float m = z[0];
    int32_t am = 0;
    for (int i = 1; i < V; i++)
        if (z[i] > m) {
            m = z[i];
            am = i;
        }
    *pred = am;
    if (y < 0) return 0.0f;
    float S = 0.0f;
    for (int i = 0; i < V; i++) S += expf(z[i] - m);
    if (dz)
        for (int i = 0; i < V; i++) {
            float p = expf(z[i] - m) / S;
            dz[i] = (i == y ? p - 1.0f : p) * gs;
        }
    return logf(S) - (z[y] - m);
}

int cpu_cls_xent(struct dev *d, dev_stream *s, const float *z, const int32_t *labels, int B, int V, int n_valid,
                 float grad_scale, float *loss_ps, double *sum_count, int32_t *pred, float *dz, plumb_err *e)
{
    (void)s;
    NEED(z, "cls_xent: NULL logits");
    NEED(labels || (!loss_ps && !sum_count && !dz) || n_valid == 0, "cls_xent: NULL labels");
    NEED(B > 0 && V > 0 && n_valid >= 0 && n_valid <= B, "cls_xent: bad B=%d V=%d n_valid=%d", B, V, n_valid);
    const int nt = nthreads(d), g = golden(d);
    float *lb = scratch(VS_PART, (size_t)B * sizeof(float));
    if (!lb) return err_set(e, PLUMB_ENOMEM, "cls_xent: out of memory");
#pragma omp parallel for num_threads(nt) schedule(static) if ((double)B * V > PAR_MIN / 8)
    for (int b = 0; b < B; b++) {
        int y = b < n_valid && labels ? labels[b] : -1;
        int32_t pr;
        float *dzr = dz ? dz + (size_t)b * V : NULL;
        float l = g ? tv_xent_row(z + (size_t)b * V, V, y, grad_scale, dzr, &pr)
                    : xent_row_fast(z + (size_t)b * V, V, y, grad_scale, dzr, &pr);
        if (y < 0 && dzr) memset(dzr, 0, (size_t)V * sizeof(float));
        lb[b] = l;
        if (pred) pred[b] = pr;
        if (loss_ps) loss_ps[b] = l;
    }
    if (sum_count) {
        double acc = 0.0;
        for (int b = 0; b < n_valid; b++) acc += (double)lb[b];
        sum_count[0] = acc;
        sum_count[1] = (double)n_valid;
    }
    return PLUMB_OK;
}
