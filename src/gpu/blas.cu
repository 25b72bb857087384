/* Fast GEMM through the vendor library.
 *
 * CUDA: cuBLASLt, linked. The compute type is always stated:
 *   fp32 inputs  -> CUBLAS_COMPUTE_32F_PEDANTIC (IEEE fp32, no TF32), or
 *                   CUBLAS_COMPUTE_32F_FAST_TF32 when the device allows TF32;
 *   bf16/fp16    -> CUBLAS_COMPUTE_32F (fp32 accumulation, fp32 output).
 * Determinism (docs/GPU.md): each stream owns its workspace (gpu.h),
 * split-K reductions are limited to cuBLASLt's fixed-order schemes (or
 * forbidden with PLUMB_GEMM_REDUCTION=none), and the algorithm chosen for a
 * shape is pinned in a per-device plan cache so later calls never re-query.
 *
 * HIP: rocBLAS loaded with dlopen (the few functions declared in
 * gpu/rocblas_min.h), atomics mode set to not-allowed on the handle.
 *
 * Row-major C[m,n] = A[m,k] B[k,n] is computed as the column-major product
 * C^T[n,m] = B^T[n,k] A^T[k,m]: a row-major matrix with row stride ld is the
 * column-major transpose with leading dimension ld. */
#include "gpu/gpu.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static const char *compute_name(struct dev *d, dtype_t t)
{
    if (t == DT_F32) return d->allow_tf32 ? "32F_FAST_TF32" : "32F_PEDANTIC";
    return "32F";
}

#if !defined(PLUMB_HIP)
/* ======================= CUDA: cuBLASLt ======================= */
#include <cublasLt.h>

struct plan_key {
    int m, n, k, ta, tb, lda, ldb, ldc;
    int ab_type, compute, align;
    size_t ws;
};
struct plan {
    struct plan_key key;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    int used;
};
#define PLAN_SLOTS 128
struct blas_state {
    cublasLtHandle_t lt;
    uint32_t reduction_mask; /* CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK */
    pthread_mutex_t lock;
    struct plan plans[PLAN_SLOTS];
    int next_evict;
    unsigned long long n_plans_made;
};

#define LT_CHECK(d, call, e)                                                                 \
    do {                                                                                     \
        cublasStatus_t st_ = (call);                                                         \
        if (st_ != CUBLAS_STATUS_SUCCESS)                                                    \
            return gpu_err((e), PLUMB_EDEVICE, "%s: %s failed: %s (%d)", (d)->label, #call,    \
                           cublasLtGetStatusString(st_), (int)st_);                          \
    } while (0)

void blas_version(char *buf, size_t n)
{
    size_t v = cublasLtGetVersion();
    snprintf(buf, n, "cuBLASLt %zu.%zu.%zu", v / 10000, v / 100 % 100, v % 100);
}

int blas_init(struct dev *d, plumb_err *e)
{
    struct blas_state *b = (struct blas_state *)calloc(1, sizeof *b);
    if (!b) return gpu_err(e, PLUMB_ENOMEM, "%s: out of host memory", d->label);
    cublasStatus_t st = cublasLtCreate(&b->lt);
    if (st != CUBLAS_STATUS_SUCCESS) {
        free(b);
        return gpu_err(e, PLUMB_EDEVICE, "%s: cublasLtCreate failed: %s", d->label,
                       cublasLtGetStatusString(st));
    }
    pthread_mutex_init(&b->lock, NULL);
    /* PLUMB_GEMM_REDUCTION=sequential (default): cuBLASLt may pick split-K
     * algorithms whose reduction adds the parts in a fixed order (a
     * separate reduction kernel over this stream's own workspace, or in
     * place with counters that enforce the sequence), so results stay
     * bitwise reproducible run to run and stream to stream (tests/test_gpu.c
     * gpu_fast_gemm_streams_bits); without it tf32 at 2048x1024x1024 ran at
     * 0.68-0.79 of PyTorch on the H200 (BENCHMARKS.md). =none forbids split-K
     * reductions altogether. */
    const char *r = getenv("PLUMB_GEMM_REDUCTION");
    b->reduction_mask = CUBLASLT_REDUCTION_SCHEME_MASK;
    if (r && !strcmp(r, "none")) b->reduction_mask = CUBLASLT_REDUCTION_SCHEME_NONE;
    else if (r && *r && strcmp(r, "sequential")) {
        cublasLtDestroy(b->lt);
        free(b);
        return gpu_err(e, PLUMB_EUSAGE, "PLUMB_GEMM_REDUCTION='%s' (expected sequential or none)", r);
    }
    gpu_of(d)->blas = b;
    return PLUMB_OK;
}

static void plan_destroy(struct plan *p)
{
    if (!p->used) return;
    if (p->la) cublasLtMatrixLayoutDestroy(p->la);
    if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
    if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
    if (p->op) cublasLtMatmulDescDestroy(p->op);
    memset(p, 0, sizeof *p);
}

void blas_fini(struct dev *d)
{
    struct blas_state *b = gpu_of(d)->blas;
    if (!b) return;
    for (int i = 0; i < PLAN_SLOTS; i++) plan_destroy(&b->plans[i]);
    cublasLtDestroy(b->lt);
    pthread_mutex_destroy(&b->lock);
    free(b);
    gpu_of(d)->blas = NULL;
}

int blas_set_numerics(struct dev *d, plumb_err *e)
{
    (void)d;
    (void)e; /* the compute type is part of each plan's key */
    return PLUMB_OK;
}

void blas_describe(struct dev *d, char *buf, size_t n)
{
    char ver[64];
    blas_version(ver, sizeof ver);
    struct blas_state *b = gpu_of(d) ? gpu_of(d)->blas : NULL;
    snprintf(buf, n,
             "gemm=%s; compute fp32=%s, bf16/fp16=32F (fp32 accumulate, fp32 out); "
             "workspace=%zu MiB per stream (never shared); reduction_scheme=%s; atomics=none; "
             "algorithm=fixed per shape (first heuristic result, pinned in a plan cache; %llu plans)",
             ver, compute_name(d, DT_F32), GPU_WORKSPACE_BYTES >> 20,
             !b || b->reduction_mask == CUBLASLT_REDUCTION_SCHEME_NONE
                 ? "none (PLUMB_GEMM_REDUCTION=none: no split-K reduction)"
                 : "sequential (split-K only with fixed-order reductions: own workspace or in-place with "
                   "sequencing counters)",
             b ? b->n_plans_made : 0ULL);
}

static int ptr_align(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    int al = 256;
    while (al > 1 && (a % (uintptr_t)al)) al >>= 1;
    return al;
}

static int plan_make(struct dev *d, struct blas_state *b, const struct plan_key *k,
                     struct plan *p, plumb_err *e)
{
    memset(p, 0, sizeof *p);
    p->key = *k;
    p->used = 1;
    cudaDataType_t abt = k->ab_type == DT_F32 ? CUDA_R_32F : k->ab_type == DT_BF16 ? CUDA_R_16BF
                                                                                   : CUDA_R_16F;
    cublasComputeType_t ct = (cublasComputeType_t)k->compute;
    LT_CHECK(d, cublasLtMatmulDescCreate(&p->op, ct, CUDA_R_32F), e);
    /* column-major view: "A" of the library call is our B, "B" is our A */
    cublasOperation_t opa = k->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opb = k->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    LT_CHECK(d, cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa), e);
    LT_CHECK(d, cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb), e);
    /* library A: [n,k] after op; stored col-major as (tb ? [k,n] : [n,k]) */
    LT_CHECK(d, cublasLtMatrixLayoutCreate(&p->la, abt, k->tb ? k->k : k->n, k->tb ? k->n : k->k, k->ldb), e);
    LT_CHECK(d, cublasLtMatrixLayoutCreate(&p->lb, abt, k->ta ? k->m : k->k, k->ta ? k->k : k->m, k->lda), e);
    LT_CHECK(d, cublasLtMatrixLayoutCreate(&p->lc, CUDA_R_32F, k->n, k->m, k->ldc), e);

    cublasLtMatmulPreference_t pref;
    LT_CHECK(d, cublasLtMatmulPreferenceCreate(&pref), e);
    uint32_t scheme = b->reduction_mask;
    uint32_t al = (uint32_t)k->align;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &k->ws, sizeof k->ws);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &scheme, sizeof scheme);
    for (int a = CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES; st == CUBLAS_STATUS_SUCCESS && a <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES; a++)
        st = cublasLtMatmulPreferenceSetAttribute(pref, (cublasLtMatmulPreferenceAttributes_t)a, &al, sizeof al);
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulAlgoGetHeuristic(b->lt, p->op, p->la, p->lb, p->lc, p->lc, pref, 1, &res, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS)
        return gpu_err(e, PLUMB_EDEVICE, "%s: cuBLASLt heuristic for %s gemm m=%d n=%d k=%d failed: %s",
                       d->label, dtype_name((dtype_t)k->ab_type), k->m, k->n, k->k, cublasLtGetStatusString(st));
    if (found < 1)
        return gpu_err(e, PLUMB_EUNSUPPORTED,
                       "%s: cuBLASLt has no algorithm for %s gemm m=%d n=%d k=%d lda=%d ldb=%d ldc=%d "
                       "(compute %s, reduction scheme none, alignment %d)", d->label,
                       dtype_name((dtype_t)k->ab_type), k->m, k->n, k->k, k->lda, k->ldb, k->ldc,
                       compute_name(d, (dtype_t)k->ab_type), k->align);
    p->algo = res.algo;
    b->n_plans_made++;
    return PLUMB_OK;
}

int blas_gemm(struct dev *d, struct dev_stream *sst, const struct gemm_desc *g, plumb_err *e)
{
    struct blas_state *b = gpu_of(d)->blas;
    struct plan_key k;
    memset(&k, 0, sizeof k);
    k.m = g->m; k.n = g->n; k.k = g->k;
    k.ta = !!g->trans_a; k.tb = !!g->trans_b;
    k.lda = g->lda; k.ldb = g->ldb; k.ldc = g->ldc;
    k.ab_type = g->ab_type;
    k.compute = g->ab_type == DT_F32 ? (d->allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F_PEDANTIC)
                                     : CUBLAS_COMPUTE_32F;
    int al = ptr_align(g->a);
    if (ptr_align(g->b) < al) al = ptr_align(g->b);
    if (ptr_align(g->c) < al) al = ptr_align(g->c);
    k.align = al;
    k.ws = sst->ws_bytes;

    pthread_mutex_lock(&b->lock);
    struct plan *p = NULL;
    for (int i = 0; i < PLAN_SLOTS; i++)
        if (b->plans[i].used && !memcmp(&b->plans[i].key, &k, sizeof k)) { p = &b->plans[i]; break; }
    if (!p) {
        for (int i = 0; i < PLAN_SLOTS && !p; i++)
            if (!b->plans[i].used) p = &b->plans[i];
        if (!p) {
            p = &b->plans[b->next_evict];
            b->next_evict = (b->next_evict + 1) % PLAN_SLOTS;
            plan_destroy(p);
        }
        int rc = plan_make(d, b, &k, p, e);
        if (rc) {
            plan_destroy(p);
            pthread_mutex_unlock(&b->lock);
            return rc;
        }
    }
    float alpha = 1.0f, beta = g->accumulate ? 1.0f : 0.0f;
    cublasStatus_t st = cublasLtMatmul(b->lt, p->op, &alpha, g->b, p->la, g->a, p->lb, &beta, g->c, p->lc,
                                       g->c, p->lc, &p->algo, sst->ws, sst->ws_bytes, sst->s);
    pthread_mutex_unlock(&b->lock);
    if (st != CUBLAS_STATUS_SUCCESS)
        return gpu_err(e, PLUMB_EDEVICE, "%s: cublasLtMatmul (%s m=%d n=%d k=%d) failed: %s", d->label,
                       dtype_name(g->ab_type), g->m, g->n, g->k, cublasLtGetStatusString(st));
    return PLUMB_OK;
}

#else
/* ======================= HIP: rocBLAS via dlopen ======================= */
#include "gpu/rocblas_min.h"
#include <dlfcn.h>

struct blas_state {
    rocblas_handle h;
    pthread_mutex_t lock;
    char why[512]; /* non-empty when rocBLAS could not be loaded */
};

static struct rocblas_fns g_rb;
static int g_rb_loaded;
static char g_rb_why[512];
static pthread_mutex_t g_rb_lock = PTHREAD_MUTEX_INITIALIZER;

static int rb_load(void)
{
    pthread_mutex_lock(&g_rb_lock);
    if (!g_rb_loaded) {
        g_rb_loaded = rocblas_load(&g_rb, g_rb_why, sizeof g_rb_why) == 0 ? 1 : -1;
    }
    int ok = g_rb_loaded == 1;
    pthread_mutex_unlock(&g_rb_lock);
    return ok;
}

void blas_version(char *buf, size_t n)
{
    if (!rb_load()) {
        snprintf(buf, n, "rocBLAS unavailable");
        return;
    }
    char v[128] = "?";
    if (g_rb.get_version_string) g_rb.get_version_string(v, sizeof v);
    snprintf(buf, n, "rocBLAS %s", v);
}

int blas_init(struct dev *d, plumb_err *e)
{
    (void)e;
    struct blas_state *b = (struct blas_state *)calloc(1, sizeof *b);
    if (!b) return gpu_err(e, PLUMB_ENOMEM, "%s: out of host memory", d->label);
    pthread_mutex_init(&b->lock, NULL);
    gpu_of(d)->blas = b;
    /* A missing rocBLAS leaves golden ops usable; fast GEMM then fails with why. */
    if (!rb_load()) {
        snprintf(b->why, sizeof b->why, "%s", g_rb_why);
        return PLUMB_OK;
    }
    rocblas_status st = g_rb.create_handle(&b->h);
    if (st != rocblas_status_success) {
        snprintf(b->why, sizeof b->why, "rocblas_create_handle failed (status %d)", (int)st);
        b->h = NULL;
        return PLUMB_OK;
    }
    st = g_rb.set_atomics_mode(b->h, rocblas_atomics_not_allowed);
    if (st != rocblas_status_success) {
        g_rb.destroy_handle(b->h);
        b->h = NULL;
        return gpu_err(e, PLUMB_EDEVICE, "%s: rocblas_set_atomics_mode(not_allowed) failed (status %d)",
                       d->label, (int)st);
    }
    return PLUMB_OK;
}

void blas_fini(struct dev *d)
{
    struct blas_state *b = gpu_of(d)->blas;
    if (!b) return;
    if (b->h) g_rb.destroy_handle(b->h);
    pthread_mutex_destroy(&b->lock);
    free(b);
    gpu_of(d)->blas = NULL;
}

int blas_set_numerics(struct dev *d, plumb_err *e)
{
    (void)d;
    (void)e;
    return PLUMB_OK;
}

void blas_describe(struct dev *d, char *buf, size_t n)
{
    char ver[160];
    blas_version(ver, sizeof ver);
    struct blas_state *b = gpu_of(d) ? gpu_of(d)->blas : NULL;
    snprintf(buf, n,
             "gemm=%s%s%s; compute=f32 for fp32/bf16/fp16 inputs (no xf32); atomics_mode=not_allowed; "
             "algo=rocblas_gemm_algo_standard, solution_index=0",
             ver, b && b->why[0] ? ": " : "", b && b->why[0] ? b->why : "");
}

int blas_gemm(struct dev *d, struct dev_stream *sst, const struct gemm_desc *g, plumb_err *e)
{
    struct blas_state *b = gpu_of(d)->blas;
    if (!b->h) return gpu_err(e, PLUMB_EUNSUPPORTED, "%s: fast gemm needs rocBLAS: %s", d->label, b->why);
    rocblas_datatype abt = g->ab_type == DT_F32 ? rocblas_datatype_f32_r
                           : g->ab_type == DT_BF16 ? rocblas_datatype_bf16_r : rocblas_datatype_f16_r;
    float alpha = 1.0f, beta = g->accumulate ? 1.0f : 0.0f;
    pthread_mutex_lock(&b->lock);
    rocblas_status st = g_rb.set_stream(b->h, sst->s);
    if (st == rocblas_status_success)
        st = g_rb.gemm_ex(b->h, g->trans_b ? rocblas_operation_transpose : rocblas_operation_none,
                          g->trans_a ? rocblas_operation_transpose : rocblas_operation_none, g->n, g->m,
                          g->k, &alpha, g->b, abt, g->ldb, g->a, abt, g->lda, &beta, g->c,
                          rocblas_datatype_f32_r, g->ldc, g->c, rocblas_datatype_f32_r, g->ldc,
                          rocblas_datatype_f32_r, rocblas_gemm_algo_standard, 0, 0);
    pthread_mutex_unlock(&b->lock);
    if (st != rocblas_status_success)
        return gpu_err(e, PLUMB_EDEVICE, "%s: rocblas_gemm_ex (%s m=%d n=%d k=%d) failed (status %d)",
                       d->label, dtype_name(g->ab_type), g->m, g->n, g->k, (int)st);
    return PLUMB_OK;
}
#endif
