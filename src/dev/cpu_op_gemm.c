/* cpu GEMM. C[m,n] (+)= A[m,k] B[k,n], row-major, see struct gemm_desc.
 * Golden: core/gmath.h's element definition (acc = 0; acc = fmaf(a, b, acc)
 * for p = 0..k-1; C = acc or C + acc), rows split over threads; each element
 * is one thread's fmaf chain, so the bits do not depend on the thread count.
 * A is widened to fp32 [m,k] and B to fp32 [k,n] first (bf16/fp16 widen
 * exactly). The inner loop runs 8..16 output columns at once, each its own
 * fmaf chain in p order; with FMA hardware the same code is built for it
 * (fmaf is one correctly rounded operation either way).
 * Fast: OpenBLAS cblas_sgemm on the fp32 (widened) inputs. */
#include "core/dtype.h"
#include "core/gmath.h"
#include "dev/cpu_numerics.h"
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static float load_elem(const void *p, dtype_t t, size_t i)
{
    switch (t) {
    case DT_BF16: return bf16_to_f32(((const uint16_t *)p)[i]);
    case DT_F16: return f16_to_f32(((const uint16_t *)p)[i]);
    default: return ((const float *)p)[i];
    }
}

/* dst[r, c] (rows x cols, dense) from src with logical element (r, c) at
 * src[trans ? c*ld + r : r*ld + c] */
static void widen(float *dst, const void *src, dtype_t t, int rows, int cols, int ld, int trans,
                  int nt)
{
#pragma omp parallel for num_threads(nt) schedule(static) if ((size_t)rows * cols > 65536)
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            dst[(size_t)r * cols + c] =
                load_elem(src, t, trans ? (size_t)c * ld + r : (size_t)r * ld + c);
}

#define GEMM_JB 256

#define GOLDEN_ROWS_BODY                                                             \
    for (int i = i0; i < i1; i++) {                                                  \
        float acc[GEMM_JB];                                                          \
        for (int j0 = 0; j0 < n; j0 += GEMM_JB) {                                    \
            int jn = n - j0 < GEMM_JB ? n - j0 : GEMM_JB;                            \
            for (int j = 0; j < jn; j++) acc[j] = 0.0f;                              \
            for (int p = 0; p < k; p++) {                                            \
                float av = A[(size_t)i * k + p];                                     \
                const float *brow = B + (size_t)p * n + j0;                          \
                _Pragma("omp simd") for (int j = 0; j < jn; j++) acc[j] = fmaf(av, brow[j], acc[j]); \
            }                                                                        \
            float *crow = c + (size_t)i * ldc + j0;                                  \
            if (accumulate)                                                          \
                for (int j = 0; j < jn; j++) crow[j] = crow[j] + acc[j];             \
            else                                                                     \
                for (int j = 0; j < jn; j++) crow[j] = acc[j];                       \
        }                                                                            \
    }

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma"))) static void golden_rows_fma(const float *A, const float *B,
                                                                float *c, int ldc, int i0, int i1,
                                                                int n, int k, int accumulate)
{
    GOLDEN_ROWS_BODY
}
#endif
static void golden_rows_generic(const float *A, const float *B, float *c, int ldc, int i0, int i1,
                                int n, int k, int accumulate)
{
    GOLDEN_ROWS_BODY
}

int cpu_gemm(struct dev *d, dev_stream *s, const struct gemm_desc *g)
{
    (void)s;
    if (!g || g->m < 0 || g->n < 0 || g->k < 0 || !g->c) return PLUMB_EUSAGE;
    if (g->ab_type != DT_F32 && g->ab_type != DT_BF16 && g->ab_type != DT_F16) return PLUMB_EUNSUPPORTED;
    int m = g->m, n = g->n, k = g->k;
    if (m == 0 || n == 0) return PLUMB_OK;
    if (g->ldc < n) return PLUMB_EUSAGE;
    if (k > 0 && (!g->a || !g->b)) return PLUMB_EUSAGE;
    if (k > 0 && (g->lda < (g->trans_a ? m : k) || g->ldb < (g->trans_b ? k : n))) return PLUMB_EUSAGE;
    int nt = cpu_nthreads(d);
    int golden = d && d->numerics == NUMERICS_GOLDEN;

    if (!golden && g->ab_type == DT_F32 && k > 0) {
        openblas_set_num_threads(nt);
        cblas_sgemm(CblasRowMajor, g->trans_a ? CblasTrans : CblasNoTrans,
                    g->trans_b ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, g->a, g->lda, g->b,
                    g->ldb, g->accumulate ? 1.0f : 0.0f, g->c, g->ldc);
        return PLUMB_OK;
    }
    float *A = malloc(((size_t)m * k + 1) * sizeof *A), *B = malloc(((size_t)k * n + 1) * sizeof *B);
    if (!A || !B) {
        free(A);
        free(B);
        return PLUMB_ENOMEM;
    }
    if (k > 0) {
        widen(A, g->a, g->ab_type, m, k, g->lda, g->trans_a, nt);
        widen(B, g->b, g->ab_type, k, n, g->ldb, g->trans_b, nt);
    }
    if (!golden) {
        openblas_set_num_threads(nt);
        if (k > 0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, A, k, B, n,
                        g->accumulate ? 1.0f : 0.0f, g->c, g->ldc);
        else if (!g->accumulate)
            for (int i = 0; i < m; i++) memset(g->c + (size_t)i * g->ldc, 0, (size_t)n * sizeof(float));
    } else {
        int use_fma = 0;
#if defined(__x86_64__) && defined(__GNUC__)
        use_fma = __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2");
#endif
        /* 4-row tasks; each row is computed entirely by one thread */
        int tasks = (m + 3) / 4;
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if ((double)m * n * k > 1e6)
        for (int t = 0; t < tasks; t++) {
            int i0 = t * 4, i1 = i0 + 4 < m ? i0 + 4 : m;
#if defined(__x86_64__) && defined(__GNUC__)
            if (use_fma) {
                golden_rows_fma(A, B, g->c, g->ldc, i0, i1, n, k, g->accumulate);
                continue;
            }
#endif
            golden_rows_generic(A, B, g->c, g->ldc, i0, i1, n, k, g->accumulate);
        }
        (void)use_fma;
    }
    free(A);
    free(B);
    return PLUMB_OK;
}
