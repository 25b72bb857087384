/* One cuBLASLt GEMM path for the fast train ops (CUDA): the linear layers
 * (train_linear.cu) and the transformer's GEMMs and classifier
 * (train_gpt_gemm.cu) both call lt_matmul, so one plan cache, one handle and
 * one workspace serve a device, and one set of rules chooses the compute
 * type, the alignment and the reduction scheme.
 *
 * Repeatable bits: the reduction scheme is NONE (no split-K sums in an order
 * the library may change) and a plan's algorithm is pinned the first time a
 * shape is seen (cublasLtMatmulAlgoGetHeuristic, its first answer), so the
 * same call gives the same bits for the life of the process.
 *
 * Plans are keyed by everything that makes cuBLASLt choose differently:
 * transposes, sizes, leading dimensions, types, epilogue, the alignment the
 * pointers (and, in a strided batch, the batch offsets) share, and the
 * batch. 128 plans a device; a full cache reuses its slots round robin. */
#include "gpu/train_gpu.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if !defined(PLUMB_HIP)
#include <cublasLt.h>

struct lt_key {
    int ta, tb, m, n, k, lda, ldb, ldc, compute, abtype, ctype, epi, align, batch;
    long long sa, sb, sc; /* strided-batch offsets (elements) when batch > 1 */
    long long aux_ld, bias_stride; /* DGELU's aux, BGRADB's per-product vectors */
};
struct lt_plan {
    struct lt_key key;
    int used, ok;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
};
#define LT_PLANS 128
#define LT_DEVS 16
#define LT_WS_MB_DEFAULT 32
struct lt_state {
    struct dev *d;
    cublasLtHandle_t h;
    void *ws;
    size_t ws_bytes; /* PLUMB_LT_WS_MB, read when the state is made */
    struct lt_plan plans[LT_PLANS];
    int next;
};
static struct lt_state g_lt[LT_DEVS];
static pthread_mutex_t g_lt_lock = PTHREAD_MUTEX_INITIALIZER;

/* PLUMB_LT_WS_MB: the workspace cuBLASLt's algorithms may use, in MiB
 * (default 32; 0 keeps the heuristic to algorithms that need none). Some
 * algorithms want part of it zeroed before each call, which costs a memset
 * a GEMM in the step graph (scripts/gpu-gptab.sh times ws0). */
static int ws_bytes_of(struct dev *d, size_t *out, plumb_err *e)
{
    const char *v = getenv("PLUMB_LT_WS_MB");
    *out = (size_t)LT_WS_MB_DEFAULT << 20;
    if (!v || !*v) return PLUMB_OK;
    char *end = NULL;
    const long mb = strtol(v, &end, 10);
    if (*end || mb < 0 || mb > 4096)
        return gpu_err(e, PLUMB_EUSAGE, "%s: PLUMB_LT_WS_MB='%s' (expected MiB, 0 to 4096)", d->label, v);
    *out = (size_t)mb << 20;
    return PLUMB_OK;
}

/* the device's state, created on first use; under g_lt_lock */
static struct lt_state *lt_of(struct dev *d, plumb_err *e)
{
    for (int i = 0; i < LT_DEVS; i++)
        if (g_lt[i].d == d) return &g_lt[i];
    size_t wsb;
    if (ws_bytes_of(d, &wsb, e)) return NULL;
    for (int i = 0; i < LT_DEVS; i++)
        if (!g_lt[i].d) {
            struct lt_state *s = &g_lt[i];
            memset(s, 0, sizeof *s);
            s->ws_bytes = wsb;
            const cublasStatus_t cs = cublasLtCreate(&s->h);
            if (cs != CUBLAS_STATUS_SUCCESS) {
                gpu_err(e, PLUMB_EDEVICE, "%s: cublasLtCreate failed: %s", d->label, cublasLtGetStatusString(cs));
                return NULL;
            }
            if (wsb && cudaMalloc(&s->ws, wsb) != cudaSuccess) {
                cublasLtDestroy(s->h);
                gpu_err(e, PLUMB_ENOMEM, "%s: cannot allocate the %zu MiB cuBLASLt workspace", d->label, wsb >> 20);
                return NULL;
            }
            s->d = d;
            return s;
        }
    gpu_err(e, PLUMB_EINTERNAL, "%s: more than %d devices hold cuBLASLt plans", d->label, LT_DEVS);
    return NULL;
}

static void plan_clear(struct lt_plan *p)
{
    if (p->la) cublasLtMatrixLayoutDestroy(p->la);
    if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
    if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
    if (p->op) cublasLtMatmulDescDestroy(p->op);
    memset(p, 0, sizeof *p);
}

/* At device close (train_gpu.h gpu_train_release): the plans, the handle and
 * the workspace go and the slot is free again (without it a process that
 * opened 17 devices one after another failed "too many devices"). */
void lt_release(struct dev *d)
{
    pthread_mutex_lock(&g_lt_lock);
    for (int i = 0; i < LT_DEVS; i++)
        if (g_lt[i].d == d) {
            struct lt_state *s = &g_lt[i];
            for (int k = 0; k < LT_PLANS; k++)
                if (s->plans[k].used) plan_clear(&s->plans[k]);
            if (s->ws) (void)cudaFree(s->ws);
            if (s->h) cublasLtDestroy(s->h);
            memset(s, 0, sizeof *s);
        }
    pthread_mutex_unlock(&g_lt_lock);
}

/* the largest power of two up to 256 dividing the address */
static int align_of(uintptr_t a)
{
    int al = 256;
    while (al > 4 && (a % (uintptr_t)al)) al >>= 1;
    return al;
}

static cublasLtEpilogue_t epilogue_of(int epi)
{
    return epi == LT_EPI_BIAS        ? CUBLASLT_EPILOGUE_BIAS
           : epi == LT_EPI_RELU_BIAS ? CUBLASLT_EPILOGUE_RELU_BIAS
           : epi == LT_EPI_RELU      ? CUBLASLT_EPILOGUE_RELU
           : epi == LT_EPI_BGRADB    ? CUBLASLT_EPILOGUE_BGRADB
           : epi == LT_EPI_DGELU     ? CUBLASLT_EPILOGUE_DGELU
           : epi == LT_EPI_GELU_AUX_BIAS ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                                     : CUBLASLT_EPILOGUE_DEFAULT;
}

/* the epilogue's pointers, set on the descriptor at plan time (the
 * heuristic reads their alignment) and before every call */
static int set_epi_pointers(struct lt_plan *p, const struct lt_mm *g)
{
    const int epi = g->epi;
    if ((epi == LT_EPI_BIAS || epi == LT_EPI_RELU_BIAS || epi == LT_EPI_BGRADB || epi == LT_EPI_GELU_AUX_BIAS) &&
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g->bias, sizeof g->bias))
        return -1;
    if ((epi == LT_EPI_DGELU || epi == LT_EPI_GELU_AUX_BIAS) &&
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g->aux, sizeof g->aux))
        return -1;
    return 0;
}

/* Makes a plan; p->ok = 0 when the library has no algorithm for it (the
 * caller then falls back to blas_gemm or its own epilogue kernels). */
static void plan_make(struct lt_state *s, const struct lt_key *k, const struct lt_mm *g, struct lt_plan *p)
{
    memset(p, 0, sizeof *p);
    p->key = *k;
    p->used = 1;
    if (cublasLtMatmulDescCreate(&p->op, (cublasComputeType_t)k->compute, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS) return;
    const cublasOperation_t oa = k->ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = k->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasLtEpilogue_t epi = epilogue_of(k->epi);
    if (cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &oa, sizeof oa) ||
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &ob, sizeof ob) ||
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi))
        return;
    if ((k->epi == LT_EPI_BIAS || k->epi == LT_EPI_RELU_BIAS || k->epi == LT_EPI_BGRADB) && k->ctype == CUDA_R_32F) {
        /* fp32 bias for an fp32 D; a 16-bit D takes a bias of its own type
         * (the default: cuBLASLt 13 has no fp32 bias with a 16-bit D) */
        const cudaDataType_t bt = CUDA_R_32F;
        if (cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt)) return;
    }
    if (k->epi == LT_EPI_BGRADB && k->batch > 1) {
        const int64_t bs = k->bias_stride;
        if (cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &bs, sizeof bs)) return;
    }
    if (k->epi == LT_EPI_DGELU || k->epi == LT_EPI_GELU_AUX_BIAS) {
        const int64_t ld = k->aux_ld;
        if (cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld)) return;
    }
    if (set_epi_pointers(p, g)) return;
    /* column-major: A is (ta ? k x m : m x k), B is (tb ? n x k : k x n) */
    const cudaDataType_t at = (cudaDataType_t)k->abtype;
    if (cublasLtMatrixLayoutCreate(&p->la, at, k->ta ? k->k : k->m, k->ta ? k->m : k->k, k->lda) ||
        cublasLtMatrixLayoutCreate(&p->lb, at, k->tb ? k->n : k->k, k->tb ? k->k : k->n, k->ldb) ||
        cublasLtMatrixLayoutCreate(&p->lc, (cudaDataType_t)k->ctype, k->m, k->n, k->ldc))
        return;
    if (k->batch > 1) {
        const int32_t bc = k->batch;
        const int64_t sa = k->sa, sb = k->sb, sc = k->sc;
        if (cublasLtMatrixLayoutSetAttribute(p->la, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc) ||
            cublasLtMatrixLayoutSetAttribute(p->lb, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc) ||
            cublasLtMatrixLayoutSetAttribute(p->lc, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc) ||
            cublasLtMatrixLayoutSetAttribute(p->la, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sa, sizeof sa) ||
            cublasLtMatrixLayoutSetAttribute(p->lb, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sb, sizeof sb) ||
            cublasLtMatrixLayoutSetAttribute(p->lc, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sc, sizeof sc))
            return;
    }
    cublasLtMatmulPreference_t pref;
    if (cublasLtMatmulPreferenceCreate(&pref)) return;
    const uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_NONE, al = (uint32_t)k->align;
    const size_t wsb = s->ws_bytes;
    int bad = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb) ||
              cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &scheme,
                                                   sizeof scheme);
    for (int a = CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES; !bad && a <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES; a++)
        bad = cublasLtMatmulPreferenceSetAttribute(pref, (cublasLtMatmulPreferenceAttributes_t)a, &al, sizeof al);
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    if (!bad &&
        cublasLtMatmulAlgoGetHeuristic(s->h, p->op, p->la, p->lb, p->lc, p->lc, pref, 1, &res, &found) ==
            CUBLAS_STATUS_SUCCESS &&
        found > 0) {
        p->algo = res.algo;
        p->ok = 1;
    }
    cublasLtMatmulPreferenceDestroy(pref);
}

int lt_matmul(struct dev *d, struct dev_stream *st, const struct lt_mm *g, plumb_err *e)
{
    struct lt_key key;
    memset(&key, 0, sizeof key); /* the key is compared with memcmp: padding too */
    key.ta = g->ta;
    key.tb = g->tb;
    key.m = g->m;
    key.n = g->n;
    key.k = g->k;
    key.lda = g->lda;
    key.ldb = g->ldb;
    key.ldc = g->ldc;
    key.epi = g->epi;
    const int rt = g->rt;
    /* A and B: fp32, or 16-bit copies of rt values (exact). 16-bit operands
     * compute in fp32 on the tensor cores; fp32 operands holding 16-bit
     * values (train_ops.h: activations stored rounded, weights through
     * round_fp32) use the FAST_16BF / _16F compute types, whose
     * down-conversion is then exact; fp32 proper is COMPUTE_32F, TF32 only
     * where the device allows it. C/D in 16 bits (c16): the library rounds
     * its fp32 result, after the epilogue, to rt on the store. */
    const int t16 = rt == DT_F16 ? CUDA_R_16F : CUDA_R_16BF;
    if (g->ab16) {
        key.abtype = t16;
        key.compute = CUBLAS_COMPUTE_32F;
    } else {
        key.abtype = CUDA_R_32F;
        key.compute = rt == DT_BF16   ? CUBLAS_COMPUTE_32F_FAST_16BF
                      : rt == DT_F16  ? CUBLAS_COMPUTE_32F_FAST_16F
                      : d->allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                      : CUBLAS_COMPUTE_32F;
    }
    key.ctype = g->c16 ? t16 : CUDA_R_32F;
    key.batch = g->batch > 1 ? g->batch : 1;
    /* BGRADB writes fp32 vectors (a 16-bit D would make them 16-bit); DGELU
     * reads its aux in D's 16-bit type, one product at a time */
    if ((g->epi == LT_EPI_BGRADB && (g->c16 || !g->bias)) ||
        ((g->epi == LT_EPI_DGELU || g->epi == LT_EPI_GELU_AUX_BIAS) && (!g->c16 || !g->aux || g->aux_ld < g->m)) ||
        (g->epi == LT_EPI_GELU_AUX_BIAS && !g->bias))
        return gpu_err(e, PLUMB_EINTERNAL, "%s: lt_matmul: epilogue %d with c16 %d, aux_ld %lld", d->label, g->epi,
                       g->c16, g->aux_ld);
    const int has_aux = g->epi == LT_EPI_DGELU || g->epi == LT_EPI_GELU_AUX_BIAS;
    if (has_aux && (key.batch > 1 || g->aux_ld % 8)) return PLUMB_EUNSUPPORTED;
    key.aux_ld = has_aux ? g->aux_ld : 0;
    key.bias_stride = g->epi == LT_EPI_BGRADB && key.batch > 1 ? g->bias_stride : 0;
    void *dout = g->dst ? g->dst : g->c;
    int al = align_of((uintptr_t)g->a);
    const int others[3] = {align_of((uintptr_t)g->b), align_of((uintptr_t)g->c), align_of((uintptr_t)dout)};
    for (int i = 0; i < 3; i++)
        if (others[i] < al) al = others[i];
    /* the epilogue's vectors and aux matrix: cuBLASLt's kernels load them as
     * wide as they are aligned too */
    if (g->epi != LT_EPI_NONE && g->epi != LT_EPI_RELU && g->bias && align_of((uintptr_t)g->bias) < al)
        al = align_of((uintptr_t)g->bias);
    if (has_aux && align_of((uintptr_t)g->aux) < al) al = align_of((uintptr_t)g->aux);
    if (key.batch > 1) { /* every product of the batch starts as aligned as the first */
        key.sa = g->sa;
        key.sb = g->sb;
        key.sc = g->sc;
        const size_t eab = g->ab16 ? 2 : 4, ec = g->c16 ? 2 : 4;
        const uintptr_t offs[3] = {(uintptr_t)g->sa * eab, (uintptr_t)g->sb * eab, (uintptr_t)g->sc * ec};
        for (int i = 0; i < 3; i++)
            if (align_of(offs[i]) < al) al = align_of(offs[i]);
    }
    key.align = al;

    pthread_mutex_lock(&g_lt_lock);
    struct lt_state *s = lt_of(d, e);
    if (!s) {
        pthread_mutex_unlock(&g_lt_lock);
        return e ? e->code : PLUMB_EDEVICE;
    }
    struct lt_plan *p = NULL;
    for (int i = 0; i < LT_PLANS && !p; i++)
        if (s->plans[i].used && !memcmp(&s->plans[i].key, &key, sizeof key)) p = &s->plans[i];
    if (!p) {
        for (int i = 0; i < LT_PLANS && !p; i++)
            if (!s->plans[i].used) p = &s->plans[i];
        if (!p) {
            p = &s->plans[s->next];
            s->next = (s->next + 1) % LT_PLANS;
            plan_clear(p);
        }
        plan_make(s, &key, g, p);
    }
    if (!p->ok) {
        pthread_mutex_unlock(&g_lt_lock);
        return PLUMB_EUNSUPPORTED;
    }
    if (set_epi_pointers(p, g)) {
        pthread_mutex_unlock(&g_lt_lock);
        return gpu_err(e, PLUMB_EDEVICE, "%s: cuBLASLt: cannot set the epilogue's pointers (epilogue %d)", d->label,
                       g->epi);
    }
    const float alpha = 1.0f, beta = g->beta;
    const cublasStatus_t rs = cublasLtMatmul(s->h, p->op, &alpha, g->a, p->la, g->b, p->lb, &beta, g->c, p->lc, dout,
                                             p->lc, &p->algo, s->ws, s->ws_bytes, st->s);
    pthread_mutex_unlock(&g_lt_lock);
    if (rs != CUBLAS_STATUS_SUCCESS)
        return gpu_err(e, PLUMB_EDEVICE, "%s: cublasLtMatmul m=%d n=%d k=%d (batch %d) failed: %s", d->label, g->m, g->n,
                       g->k, key.batch, cublasLtGetStatusString(rs));
    return PLUMB_OK;
}
#else
/* no cuBLASLt state on HIP */
void lt_release(struct dev *d) { (void)d; }
#endif /* !PLUMB_HIP */
