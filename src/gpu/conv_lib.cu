/* Fast convolutions through the vendor library, dlopen'ed through our own
 * declarations: cuDNN (gpu/cudnn_min.h) in the CUDA plugin, MIOpen
 * (gpu/miopen_min.h) in the HIP plugin. Tensors are NHWC, filters KRSC
 * (cuDNN: CUDNN_TENSOR_NHWC; MIOpen: NCHW dims with NHWC strides).
 *
 * Determinism: for every (direction, geometry, data type) a plan is made
 * once: descriptors, then the library's Find on the caller's buffers, and
 * the fastest result that is deterministic (cuDNN: the perf result's
 * `determinism` field; MIOpen: MIOPEN_CONVOLUTION_ATTRIB_DETERMINISTIC
 * set on the descriptor, so Find offers only deterministic solvers), has
 * status success, fits the workspace limit and, for fp32 without TF32,
 * runs FMA kernels only (CUDNN_FMA_MATH). The algorithm is then pinned, so
 * a fast result repeats run to run. No such algorithm: PLUMB_EUNSUPPORTED,
 * and train_conv.cu runs its own kernels for that shape.
 *
 * Environment: PLUMB_CUDNN_LIB / PLUMB_MIOPEN_LIB (a path to the library),
 * PLUMB_CONV_WS_MB (the workspace limit, default 256), PLUMB_CONV_LOG (set:
 * one line on stderr per cuDNN plan made: the geometry, the algorithm taken
 * and its Find time against the fastest result of any kind, so the time that
 * determinism costs each layer can be read off a run), PLUMB_CONV_RETIME=0
 * (pin Find's first usable algorithm instead of timing the candidates
 * again: see retime), PLUMB_CONV_CACHE (cuDNN: the file that keeps the
 * picks across processes, gpu/conv_picks.h; "0" or "off": none). */
#include "gpu/train_gpu.h"
#include "gpu/conv_picks.h"
#include <dlfcn.h>
#include <glob.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t g_lib_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_state;              /* 0 not tried, 1 loaded, -1 failed */
static char g_lib[512], g_why[1024], g_ver[64];

static size_t ws_limit(void)
{
    const char *v = getenv("PLUMB_CONV_WS_MB");
    long mb = v && *v ? atol(v) : 256;
    if (mb < 0) mb = 0;
    return (size_t)mb << 20;
}

/* dlopen the first candidate that loads; g_why collects the failures */
static void *open_first(const char *const *cands, int n)
{
    void *h = NULL;
    size_t used = 0;
    g_why[0] = '\0';
    for (int i = 0; i < n && !h; i++) {
        if (!cands[i] || !*cands[i]) continue;
        h = dlopen(cands[i], RTLD_NOW | RTLD_LOCAL);
        if (h) snprintf(g_lib, sizeof g_lib, "%s", cands[i]);
        else if (used < sizeof g_why)
            used += (size_t)snprintf(g_why + used, sizeof g_why - used, "%s%s", used ? "; " : "", dlerror());
    }
    return h;
}

struct plan_key {
    struct dev *d;
    int dir, rt, tf32;
    struct train_conv g;
};
static int key_eq(const struct plan_key *a, const struct plan_key *b)
{
    return a->d == b->d && a->dir == b->dir && a->rt == b->rt && a->tf32 == b->tf32 && !memcmp(&a->g, &b->g, sizeof a->g);
}

/* The algorithm each shape took, for the life of the process, by device
 * label (cuda:0, hip:1: one GPU each in a process) and plan key: a device
 * opened again (the trainer opens one per run; two runs in one process, as
 * tests/test_resnet16_ops.c's compare) takes the algorithms the first
 * opening chose, so the same configuration gives the same bits. Find and the
 * retiming time candidates, and two candidates within noise of each other
 * can swap between timings (on an H100, 2026-12-05: PLUMB_RESNET_MASK_FROM_X
 * on and off, two runs of resnet-tiny in one process, differed in their
 * parameters' digest until this memo). With cuDNN the picks are also kept
 * in a file (gpu/conv_picks.h) read at a label's first plan, so separate
 * processes on the same machine, device, driver and library pin the same
 * algorithms; a pick from the file is checked with the library before use
 * (from_file). MIOpen must run its Find before a convolution, so the HIP
 * plugin keeps picks per process only. Under g_lib_lock. */
struct pick {
    char label[32];
    struct plan_key key; /* key.d NULL */
    int usable, algo, math;
    size_t ws;
    int from_file; /* read from the picks file, not yet checked in this process */
};
#define MAX_PICKS 4096
static struct pick g_picks[MAX_PICKS];
static int g_npicks;
static struct pick *pick_at(const struct dev *d, const struct plan_key *k)
{
    struct plan_key kk = *k;
    kk.d = NULL;
    for (int i = 0; i < g_npicks; i++)
        if (!strcmp(g_picks[i].label, d->label) && key_eq(&g_picks[i].key, &kk)) return &g_picks[i];
    return NULL;
}
/* A new memo entry for (d's label, k); NULL when the memo is full (later
 * shapes then choose per opening, as before the memo) */
static struct pick *pick_new(const struct dev *d, const struct plan_key *k)
{
    if (g_npicks == MAX_PICKS) return NULL;
    struct pick *p = &g_picks[g_npicks++];
    memset(p, 0, sizeof *p);
    snprintf(p->label, sizeof p->label, "%s", d->label);
    p->key = *k;
    p->key.d = NULL;
    return p;
}

#if !defined(PLUMB_HIP)
static int picks_retime_on(void);
/* the picks file's context for d (library, device, driver, workspace limit, retiming) */
static void picks_ctx_of(const struct dev *d, char *ctx, size_t n)
{
    conv_picks_ctx(ctx, n, g_ver, d->info.name, d->info.driver, ws_limit(), picks_retime_on());
}
/* The file's lines for d's context into the memo (its label), once per label */
static char g_picks_loaded[16][32];
static int g_npicks_loaded;
static void picks_load(const struct dev *d)
{
    for (int i = 0; i < g_npicks_loaded; i++)
        if (!strcmp(g_picks_loaded[i], d->label)) return;
    if (g_npicks_loaded < 16) snprintf(g_picks_loaded[g_npicks_loaded++], 32, "%s", d->label);
    char path[1024], ctx[512], line[1024];
    if (!conv_picks_path(path, sizeof path)) return;
    picks_ctx_of(d, ctx, sizeof ctx);
    FILE *f = fopen(path, "r");
    if (!f) return; /* none yet */
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        struct conv_pick_rec r;
        if (!conv_picks_parse(line, ctx, &r)) continue;
        struct plan_key k;
        memset(&k, 0, sizeof k);
        k.dir = r.dir, k.rt = r.rt, k.tf32 = r.tf32, k.g = r.g;
        struct pick *p = pick_at(d, &k); /* the last line of a plan wins */
        if (!p && !(p = pick_new(d, &k))) break;
        p->usable = r.usable, p->algo = r.algo, p->math = r.math, p->ws = r.ws;
        p->from_file = 1;
    }
    fclose(f);
}
/* One line for a pick made in this process; a file that cannot be written
 * is said once (the picks then hold for this process only) */
static void picks_append(const struct dev *d, const struct pick *p)
{
    static int warned;
    char path[1024], ctx[512], line[1024];
    if (!conv_picks_path(path, sizeof path)) return;
    picks_ctx_of(d, ctx, sizeof ctx);
    struct conv_pick_rec r;
    memset(&r, 0, sizeof r);
    r.dir = p->key.dir, r.rt = p->key.rt, r.tf32 = p->key.tf32, r.g = p->key.g;
    r.usable = p->usable, r.algo = p->algo, r.math = p->math, r.ws = p->ws;
    if (conv_picks_format(line, sizeof line, ctx, &r) < 0) return;
    int rc = conv_picks_append(path, line);
    if (rc && !warned) {
        warned = 1;
        fprintf(stderr, "plumb: %s: cannot write the convolution picks file %s (%s): picks kept for this process only "
                        "(PLUMB_CONV_CACHE names another file, or off)\n",
                d->label, path, strerror(rc));
    }
}
#endif

static const struct pick *pick_find(const struct dev *d, const struct plan_key *k)
{
#if !defined(PLUMB_HIP)
    picks_load(d);
#endif
    return pick_at(d, k);
}
/* A pick made in this process (a file's pick that did not check out is
 * replaced, in the file too) */
static void pick_keep(const struct dev *d, const struct plan_key *k, int usable, int algo, int math, size_t ws)
{
    struct pick *p = pick_at(d, k);
    if (p && !p->from_file) return;
    if (!p && !(p = pick_new(d, k))) return;
    p->usable = usable, p->algo = algo, p->math = math, p->ws = ws;
    p->from_file = 0;
#if !defined(PLUMB_HIP)
    picks_append(d, p);
#endif
}

#if defined(PLUMB_HIP)
/* =============================== MIOpen =============================== */
#include "gpu/miopen_min.h"

static struct miopen_fns M;

static int load_locked(void)
{
    const char *cands[] = {getenv("PLUMB_MIOPEN_LIB"), "libMIOpen.so.1", "/opt/rocm/lib/libMIOpen.so.1"};
    void *h = open_first(cands, 3);
    if (!h) return -1;
#define SYM(field, name)                                                                              \
    do {                                                                                              \
        *(void **)&M.field = dlsym(h, name);                                                          \
        if (!M.field) {                                                                               \
            snprintf(g_why, sizeof g_why, "%s has no symbol %s", g_lib, name);                        \
            return -1;                                                                                \
        }                                                                                             \
    } while (0)
    SYM(GetVersion, "miopenGetVersion");
    SYM(GetErrorString, "miopenGetErrorString");
    SYM(Create, "miopenCreate");
    SYM(Destroy, "miopenDestroy");
    SYM(SetStream, "miopenSetStream");
    SYM(CreateTensorDescriptor, "miopenCreateTensorDescriptor");
    SYM(SetTensorDescriptor, "miopenSetTensorDescriptor");
    SYM(DestroyTensorDescriptor, "miopenDestroyTensorDescriptor");
    SYM(CreateConvolutionDescriptor, "miopenCreateConvolutionDescriptor");
    SYM(InitConvolutionDescriptor, "miopenInitConvolutionDescriptor");
    SYM(SetConvolutionAttribute, "miopenSetConvolutionAttribute");
    SYM(DestroyConvolutionDescriptor, "miopenDestroyConvolutionDescriptor");
    SYM(ConvolutionForwardGetWorkSpaceSize, "miopenConvolutionForwardGetWorkSpaceSize");
    SYM(ConvolutionBackwardDataGetWorkSpaceSize, "miopenConvolutionBackwardDataGetWorkSpaceSize");
    SYM(ConvolutionBackwardWeightsGetWorkSpaceSize, "miopenConvolutionBackwardWeightsGetWorkSpaceSize");
    SYM(FindConvolutionForwardAlgorithm, "miopenFindConvolutionForwardAlgorithm");
    SYM(FindConvolutionBackwardDataAlgorithm, "miopenFindConvolutionBackwardDataAlgorithm");
    SYM(FindConvolutionBackwardWeightsAlgorithm, "miopenFindConvolutionBackwardWeightsAlgorithm");
    SYM(ConvolutionForward, "miopenConvolutionForward");
    SYM(ConvolutionBackwardData, "miopenConvolutionBackwardData");
    SYM(ConvolutionBackwardWeights, "miopenConvolutionBackwardWeights");
#undef SYM
    size_t a = 0, b = 0, c = 0;
    if (M.GetVersion(&a, &b, &c) != MIO_STATUS_SUCCESS) {
        snprintf(g_why, sizeof g_why, "%s: miopenGetVersion failed", g_lib);
        return -1;
    }
    snprintf(g_ver, sizeof g_ver, "MIOpen %zu.%zu.%zu", a, b, c);
    return 0;
}

static int lib_err(struct dev *d, const char *call, mio_status_t st, plumb_err *e)
{
    return gpu_err(e, PLUMB_EDEVICE, "%s: %s failed: status %d (%s)", d->label, call, st, M.GetErrorString(st));
}
#define MCHECK(call, name)                                                                           \
    do {                                                                                             \
        mio_status_t st_ = (call);                                                                   \
        if (st_ != MIO_STATUS_SUCCESS) return lib_err(d, name, st_, e);                              \
    } while (0)

struct plan {
    struct plan_key key;
    int usable, algo;
    size_t ws;
    mio_tensor_t ta, tb, tout; /* per direction: (x, w, y), (dy, w, dx), (x, dy, dw) */
    mio_conv_t conv;
};

static mio_dtype_t mio_type(int rt) { return rt == DT_BF16 ? MIO_BFLOAT16 : rt == DT_F16 ? MIO_HALF : MIO_FLOAT; }

/* NCHW dims with NHWC strides */
static int set_nhwc(struct dev *d, mio_tensor_t t, int rt, int n, int c, int h, int w, plumb_err *e)
{
    int dims[4] = {n, c, h, w}, strides[4] = {h * w * c, 1, w * c, c};
    MCHECK(M.SetTensorDescriptor(t, mio_type(rt), 4, dims, strides), "miopenSetTensorDescriptor");
    return PLUMB_OK;
}

struct handle_slot {
    struct dev *d;
    mio_handle_t h;
};
static struct handle_slot g_handles[64];

static int get_handle(struct dev *d, mio_handle_t *h, plumb_err *e)
{
    for (int i = 0; i < 64; i++)
        if (g_handles[i].d == d) {
            *h = g_handles[i].h;
            return PLUMB_OK;
        }
    for (int i = 0; i < 64; i++)
        if (!g_handles[i].d) {
            MCHECK(M.Create(&g_handles[i].h), "miopenCreate");
            g_handles[i].d = d;
            *h = g_handles[i].h;
            return PLUMB_OK;
        }
    return gpu_err(e, PLUMB_EINTERNAL, "%s: more than 64 devices hold MIOpen handles", d->label);
}

static int make_plan(struct dev *d, mio_handle_t h, struct dev_stream *st, struct plan *p, const void *a, const void *b,
                     void *out, plumb_err *e)
{
    (void)st; /* MIOpen's Find keeps its own ranking (not retimed: no AMD GPU to measure it on) */
    const struct train_conv *g = &p->key.g;
    const int rt = p->key.rt;
    MCHECK(M.CreateTensorDescriptor(&p->ta), "miopenCreateTensorDescriptor");
    MCHECK(M.CreateTensorDescriptor(&p->tb), "miopenCreateTensorDescriptor");
    MCHECK(M.CreateTensorDescriptor(&p->tout), "miopenCreateTensorDescriptor");
    MCHECK(M.CreateConvolutionDescriptor(&p->conv), "miopenCreateConvolutionDescriptor");
    MCHECK(M.InitConvolutionDescriptor(p->conv, MIO_CONVOLUTION, g->pad, g->pad, g->stride, g->stride, 1, 1),
           "miopenInitConvolutionDescriptor");
    MCHECK(M.SetConvolutionAttribute(p->conv, MIO_CONVOLUTION_ATTRIB_DETERMINISTIC, 1),
           "miopenSetConvolutionAttribute(DETERMINISTIC)");
    int rc;
    /* x [N,C,H,W], w [K,C,R,S], y [N,K,P,Q] as NCHW dims, NHWC strides */
    if (p->key.dir == CONVLIB_FWD) {
        rc = set_nhwc(d, p->ta, rt, g->N, g->C, g->H, g->W, e);
        if (!rc) rc = set_nhwc(d, p->tb, rt, g->K, g->C, g->R, g->S, e);
        if (!rc) rc = set_nhwc(d, p->tout, rt, g->N, g->K, g->P, g->Q, e);
    } else if (p->key.dir == CONVLIB_DATA) {
        rc = set_nhwc(d, p->ta, rt, g->N, g->K, g->P, g->Q, e);
        if (!rc) rc = set_nhwc(d, p->tb, rt, g->K, g->C, g->R, g->S, e);
        if (!rc) rc = set_nhwc(d, p->tout, rt, g->N, g->C, g->H, g->W, e);
    } else {
        rc = set_nhwc(d, p->ta, rt, g->N, g->C, g->H, g->W, e);
        if (!rc) rc = set_nhwc(d, p->tb, rt, g->N, g->K, g->P, g->Q, e);
        if (!rc) rc = set_nhwc(d, p->tout, rt, g->K, g->C, g->R, g->S, e);
    }
    if (rc) return rc;
    size_t need = 0;
    if (p->key.dir == CONVLIB_FWD)
        MCHECK(M.ConvolutionForwardGetWorkSpaceSize(h, p->tb, p->ta, p->conv, p->tout, &need),
               "miopenConvolutionForwardGetWorkSpaceSize");
    else if (p->key.dir == CONVLIB_DATA)
        MCHECK(M.ConvolutionBackwardDataGetWorkSpaceSize(h, p->ta, p->tb, p->conv, p->tout, &need),
               "miopenConvolutionBackwardDataGetWorkSpaceSize");
    else
        MCHECK(M.ConvolutionBackwardWeightsGetWorkSpaceSize(h, p->tb, p->ta, p->conv, p->tout, &need),
               "miopenConvolutionBackwardWeightsGetWorkSpaceSize");
    size_t lim = ws_limit(), wsb = need < lim ? need : lim;
    void *ws = NULL;
    if (wsb) {
        rc = tvws_get(d, TVWS_CONV, wsb, &ws, e);
        if (rc) return rc;
    }
    const struct pick *was = pick_find(d, &p->key);
    if (was) { /* this process chose for this shape before */
        p->usable = was->usable, p->algo = was->algo, p->ws = was->ws;
        return PLUMB_OK;
    }
    mio_perf_t perf[8];
    int nret = 0;
    memset(perf, 0, sizeof perf);
    if (p->key.dir == CONVLIB_FWD)
        MCHECK(M.FindConvolutionForwardAlgorithm(h, p->ta, a, p->tb, b, p->conv, p->tout, out, 8, &nret, perf, ws, wsb,
                                                 0),
               "miopenFindConvolutionForwardAlgorithm");
    else if (p->key.dir == CONVLIB_DATA)
        MCHECK(M.FindConvolutionBackwardDataAlgorithm(h, p->ta, a, p->tb, b, p->conv, p->tout, out, 8, &nret, perf,
                                                      ws, wsb, 0),
               "miopenFindConvolutionBackwardDataAlgorithm");
    else /* dy first, then x */
        MCHECK(M.FindConvolutionBackwardWeightsAlgorithm(h, p->tb, b, p->ta, a, p->conv, p->tout, out, 8, &nret, perf,
                                                         ws, wsb, 0),
               "miopenFindConvolutionBackwardWeightsAlgorithm");
    p->usable = 0;
    for (int i = 0; i < nret && !p->usable; i++) /* sorted by time; only deterministic solvers are offered */
        if (perf[i].memory <= wsb) {
            p->usable = 1;
            p->algo = perf[i].algo;
            p->ws = perf[i].memory;
        }
    pick_keep(d, &p->key, p->usable, p->algo, 0, p->ws);
    return PLUMB_OK;
}

static int run_plan(struct dev *d, mio_handle_t h, const struct plan *p, const void *a, const void *b, void *out,
                    plumb_err *e)
{
    const float one = 1.0f, zero = 0.0f;
    void *ws = NULL;
    if (p->ws) {
        int rc = tvws_get(d, TVWS_CONV, p->ws, &ws, e);
        if (rc) return rc;
    }
    if (p->key.dir == CONVLIB_FWD)
        MCHECK(M.ConvolutionForward(h, &one, p->ta, a, p->tb, b, p->conv, p->algo, &zero, p->tout, out, ws, p->ws),
               "miopenConvolutionForward");
    else if (p->key.dir == CONVLIB_DATA)
        MCHECK(M.ConvolutionBackwardData(h, &one, p->ta, a, p->tb, b, p->conv, p->algo, &zero, p->tout, out, ws, p->ws),
               "miopenConvolutionBackwardData");
    else
        MCHECK(M.ConvolutionBackwardWeights(h, &one, p->tb, b, p->ta, a, p->conv, p->algo, &zero, p->tout, out, ws,
                                            p->ws),
               "miopenConvolutionBackwardWeights");
    return PLUMB_OK;
}
static void plan_destroy(struct plan *p)
{
    if (p->ta) (void)M.DestroyTensorDescriptor(p->ta);
    if (p->tb) (void)M.DestroyTensorDescriptor(p->tb);
    if (p->tout) (void)M.DestroyTensorDescriptor(p->tout);
    if (p->conv) (void)M.DestroyConvolutionDescriptor(p->conv);
}
static void handle_destroy(mio_handle_t h) { (void)M.Destroy(h); }
#define LIB_NAME "MIOpen (libMIOpen.so.1)"
#define LIB_ENV "PLUMB_MIOPEN_LIB"
typedef mio_handle_t lib_handle_t;
static int set_stream(struct dev *d, lib_handle_t h, struct dev_stream *st, plumb_err *e)
{
    MCHECK(M.SetStream(h, (void *)st->s), "miopenSetStream");
    return PLUMB_OK;
}

#else
/* =============================== cuDNN =============================== */
#include "gpu/cudnn_min.h"
#include <stddef.h>

#if defined(__has_include)
#if __has_include(<cudnn.h>)
/* The installed header is at hand: our declarations must match it. */
#include <cudnn.h>
static_assert(sizeof(cdn_perf_t) == sizeof(cudnnConvolutionFwdAlgoPerf_t), "perf struct size");
static_assert(sizeof(cdn_perf_t) == sizeof(cudnnConvolutionBwdDataAlgoPerf_t), "perf struct size");
static_assert(sizeof(cdn_perf_t) == sizeof(cudnnConvolutionBwdFilterAlgoPerf_t), "perf struct size");
static_assert(offsetof(cdn_perf_t, memory) == offsetof(cudnnConvolutionFwdAlgoPerf_t, memory), "perf.memory");
static_assert(offsetof(cdn_perf_t, determinism) == offsetof(cudnnConvolutionFwdAlgoPerf_t, determinism),
              "perf.determinism");
static_assert(offsetof(cdn_perf_t, mathType) == offsetof(cudnnConvolutionFwdAlgoPerf_t, mathType), "perf.mathType");
static_assert(CDN_DATA_FLOAT == CUDNN_DATA_FLOAT && CDN_DATA_HALF == CUDNN_DATA_HALF &&
                  CDN_DATA_BFLOAT16 == CUDNN_DATA_BFLOAT16,
              "data types");
static_assert(CDN_TENSOR_NHWC == CUDNN_TENSOR_NHWC && CDN_CROSS_CORRELATION == CUDNN_CROSS_CORRELATION, "layout");
static_assert(CDN_FMA_MATH == CUDNN_FMA_MATH && CDN_TENSOR_OP_MATH == CUDNN_TENSOR_OP_MATH &&
                  CDN_DEFAULT_MATH == CUDNN_DEFAULT_MATH,
              "math types");
static_assert(CDN_DETERMINISTIC == CUDNN_DETERMINISTIC && CDN_STATUS_SUCCESS == CUDNN_STATUS_SUCCESS, "enums");
/* the backend API's values (gpu/attn_cudnn.cu) */
static_assert(CDN_BK_POINTWISE == CUDNN_BACKEND_POINTWISE_DESCRIPTOR && CDN_BK_ENGINE == CUDNN_BACKEND_ENGINE_DESCRIPTOR &&
                  CDN_BK_ENGINECFG == CUDNN_BACKEND_ENGINECFG_DESCRIPTOR &&
                  CDN_BK_ENGINEHEUR == CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR &&
                  CDN_BK_EXECUTION_PLAN == CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR &&
                  CDN_BK_OP_POINTWISE == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR &&
                  CDN_BK_OPERATIONGRAPH == CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR &&
                  CDN_BK_VARIANT_PACK == CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR &&
                  CDN_BK_TENSOR == CUDNN_BACKEND_TENSOR_DESCRIPTOR && CDN_BK_MATMUL == CUDNN_BACKEND_MATMUL_DESCRIPTOR &&
                  CDN_BK_OP_MATMUL == CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR &&
                  CDN_BK_REDUCTION == CUDNN_BACKEND_REDUCTION_DESCRIPTOR &&
                  CDN_BK_OP_REDUCTION == CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR &&
                  CDN_BK_OP_RESHAPE == CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR,
              "backend descriptor types");
static_assert(CDN_TYPE_HANDLE == CUDNN_TYPE_HANDLE && CDN_TYPE_DATA_TYPE == CUDNN_TYPE_DATA_TYPE &&
                  CDN_TYPE_BOOLEAN == CUDNN_TYPE_BOOLEAN && CDN_TYPE_INT64 == CUDNN_TYPE_INT64 &&
                  CDN_TYPE_VOID_PTR == CUDNN_TYPE_VOID_PTR && CDN_TYPE_HEUR_MODE == CUDNN_TYPE_HEUR_MODE &&
                  CDN_TYPE_NUMERICAL_NOTE == CUDNN_TYPE_NUMERICAL_NOTE &&
                  CDN_TYPE_POINTWISE_MODE == CUDNN_TYPE_POINTWISE_MODE &&
                  CDN_TYPE_BACKEND_DESCRIPTOR == CUDNN_TYPE_BACKEND_DESCRIPTOR &&
                  CDN_TYPE_REDUCTION_OPERATOR_TYPE == CUDNN_TYPE_REDUCTION_OPERATOR_TYPE,
              "backend attribute types");
static_assert(CDN_A_POINTWISE_MODE == CUDNN_ATTR_POINTWISE_MODE && CDN_A_POINTWISE_MATH_PREC == CUDNN_ATTR_POINTWISE_MATH_PREC &&
                  CDN_A_POINTWISE_AXIS == CUDNN_ATTR_POINTWISE_AXIS && CDN_A_ENGINEHEUR_MODE == CUDNN_ATTR_ENGINEHEUR_MODE &&
                  CDN_A_ENGINEHEUR_OPERATION_GRAPH == CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH &&
                  CDN_A_ENGINEHEUR_RESULTS == CUDNN_ATTR_ENGINEHEUR_RESULTS &&
                  CDN_A_ENGINECFG_ENGINE == CUDNN_ATTR_ENGINECFG_ENGINE &&
                  CDN_A_EXECUTION_PLAN_ENGINE_CONFIG == CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG &&
                  CDN_A_EXECUTION_PLAN_WORKSPACE_SIZE == CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE &&
                  CDN_A_OP_POINTWISE_PW_DESCRIPTOR == CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR &&
                  CDN_A_OP_POINTWISE_XDESC == CUDNN_ATTR_OPERATION_POINTWISE_XDESC &&
                  CDN_A_OP_POINTWISE_BDESC == CUDNN_ATTR_OPERATION_POINTWISE_BDESC &&
                  CDN_A_OP_POINTWISE_YDESC == CUDNN_ATTR_OPERATION_POINTWISE_YDESC &&
                  CDN_A_OP_POINTWISE_TDESC == CUDNN_ATTR_OPERATION_POINTWISE_TDESC &&
                  CDN_A_OPERATIONGRAPH_OPS == CUDNN_ATTR_OPERATIONGRAPH_OPS &&
                  CDN_A_TENSOR_BYTE_ALIGNMENT == CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT &&
                  CDN_A_TENSOR_DATA_TYPE == CUDNN_ATTR_TENSOR_DATA_TYPE &&
                  CDN_A_TENSOR_DIMENSIONS == CUDNN_ATTR_TENSOR_DIMENSIONS &&
                  CDN_A_TENSOR_STRIDES == CUDNN_ATTR_TENSOR_STRIDES &&
                  CDN_A_TENSOR_UNIQUE_ID == CUDNN_ATTR_TENSOR_UNIQUE_ID &&
                  CDN_A_TENSOR_IS_VIRTUAL == CUDNN_ATTR_TENSOR_IS_VIRTUAL &&
                  CDN_A_TENSOR_IS_BY_VALUE == CUDNN_ATTR_TENSOR_IS_BY_VALUE &&
                  CDN_A_VARIANT_PACK_UNIQUE_IDS == CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS &&
                  CDN_A_VARIANT_PACK_DATA_POINTERS == CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS &&
                  CDN_A_VARIANT_PACK_WORKSPACE == CUDNN_ATTR_VARIANT_PACK_WORKSPACE &&
                  CDN_A_ENGINE_GLOBAL_INDEX == CUDNN_ATTR_ENGINE_GLOBAL_INDEX &&
                  CDN_A_ENGINE_NUMERICAL_NOTE == CUDNN_ATTR_ENGINE_NUMERICAL_NOTE &&
                  CDN_A_MATMUL_COMP_TYPE == CUDNN_ATTR_MATMUL_COMP_TYPE &&
                  CDN_A_OP_MATMUL_ADESC == CUDNN_ATTR_OPERATION_MATMUL_ADESC &&
                  CDN_A_OP_MATMUL_BDESC == CUDNN_ATTR_OPERATION_MATMUL_BDESC &&
                  CDN_A_OP_MATMUL_CDESC == CUDNN_ATTR_OPERATION_MATMUL_CDESC &&
                  CDN_A_OP_MATMUL_DESC == CUDNN_ATTR_OPERATION_MATMUL_DESC &&
                  CDN_A_REDUCTION_OPERATOR == CUDNN_ATTR_REDUCTION_OPERATOR &&
                  CDN_A_REDUCTION_COMP_TYPE == CUDNN_ATTR_REDUCTION_COMP_TYPE &&
                  CDN_A_OP_REDUCTION_XDESC == CUDNN_ATTR_OPERATION_REDUCTION_XDESC &&
                  CDN_A_OP_REDUCTION_YDESC == CUDNN_ATTR_OPERATION_REDUCTION_YDESC &&
                  CDN_A_OP_REDUCTION_DESC == CUDNN_ATTR_OPERATION_REDUCTION_DESC &&
                  CDN_A_OP_RESHAPE_XDESC == CUDNN_ATTR_OPERATION_RESHAPE_XDESC &&
                  CDN_A_OP_RESHAPE_YDESC == CUDNN_ATTR_OPERATION_RESHAPE_YDESC,
              "backend attribute names");
static_assert(CDN_DATA_INT32 == CUDNN_DATA_INT32 && CDN_DATA_BOOLEAN == CUDNN_DATA_BOOLEAN && CDN_PW_ADD == CUDNN_POINTWISE_ADD &&
                  CDN_PW_MUL == CUDNN_POINTWISE_MUL && CDN_PW_DIV == CUDNN_POINTWISE_DIV &&
                  CDN_PW_SUB == CUDNN_POINTWISE_SUB && CDN_PW_EXP == CUDNN_POINTWISE_EXP &&
                  CDN_PW_LOG == CUDNN_POINTWISE_LOG && CDN_PW_IDENTITY == CUDNN_POINTWISE_IDENTITY &&
                  CDN_PW_CMP_GE == CUDNN_POINTWISE_CMP_GE && CDN_PW_GEN_INDEX == CUDNN_POINTWISE_GEN_INDEX &&
                  CDN_PW_BINARY_SELECT == CUDNN_POINTWISE_BINARY_SELECT && CDN_REDUCE_ADD == CUDNN_REDUCE_TENSOR_ADD &&
                  CDN_REDUCE_MAX == CUDNN_REDUCE_TENSOR_MAX && CDN_HEUR_MODE_INSTANT == CUDNN_HEUR_MODE_INSTANT &&
                  CDN_HEUR_MODE_A == CUDNN_HEUR_MODE_A && CDN_NOTE_NONDETERMINISTIC == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC,
              "backend values");
#endif
#endif

static struct cudnn_fns Cd;

/* the cuDNN a PyTorch wheel brings, when no other is on the library path */
static void torch_cudnn_paths(char out[][512], int max, int *n)
{
    const char *pats[] = {"/usr/local/lib/python3*/dist-packages/nvidia/cudnn/lib/libcudnn.so.9",
                          "/usr/local/lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn.so.9",
                          "/usr/lib/python3*/dist-packages/nvidia/cudnn/lib/libcudnn.so.9",
                          "/opt/conda/lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn.so.9"};
    for (size_t i = 0; i < sizeof pats / sizeof pats[0] && *n < max; i++) {
        glob_t gl;
        if (glob(pats[i], 0, NULL, &gl) == 0) {
            for (size_t j = 0; j < gl.gl_pathc && *n < max; j++) snprintf(out[(*n)++], 512, "%s", gl.gl_pathv[j]);
            globfree(&gl);
        }
    }
    const char *home = getenv("HOME");
    if (home && *n < max) {
        char pat[600];
        snprintf(pat, sizeof pat, "%s/.local/lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn.so.9", home);
        glob_t gl;
        if (glob(pat, 0, NULL, &gl) == 0) {
            for (size_t j = 0; j < gl.gl_pathc && *n < max; j++) snprintf(out[(*n)++], 512, "%s", gl.gl_pathv[j]);
            globfree(&gl);
        }
    }
}

static int load_locked(void)
{
    char extra[8][512];
    int nx = 0;
    torch_cudnn_paths(extra, 8, &nx);
    const char *cands[12] = {getenv("PLUMB_CUDNN_LIB"), "libcudnn.so.9"};
    int nc = 2;
    for (int i = 0; i < nx; i++) cands[nc++] = extra[i];
    void *h = open_first(cands, nc);
    if (!h) return -1;
#define SYM(field, name)                                                                              \
    do {                                                                                              \
        *(void **)&Cd.field = dlsym(h, name);                                                         \
        if (!Cd.field) {                                                                              \
            snprintf(g_why, sizeof g_why, "%s has no symbol %s", g_lib, name);                        \
            return -1;                                                                                \
        }                                                                                             \
    } while (0)
    SYM(GetVersion, "cudnnGetVersion");
    SYM(GetErrorString, "cudnnGetErrorString");
    SYM(Create, "cudnnCreate");
    SYM(Destroy, "cudnnDestroy");
    SYM(SetStream, "cudnnSetStream");
    SYM(CreateTensorDescriptor, "cudnnCreateTensorDescriptor");
    SYM(SetTensor4dDescriptor, "cudnnSetTensor4dDescriptor");
    SYM(DestroyTensorDescriptor, "cudnnDestroyTensorDescriptor");
    SYM(CreateFilterDescriptor, "cudnnCreateFilterDescriptor");
    SYM(SetFilter4dDescriptor, "cudnnSetFilter4dDescriptor");
    SYM(DestroyFilterDescriptor, "cudnnDestroyFilterDescriptor");
    SYM(CreateConvolutionDescriptor, "cudnnCreateConvolutionDescriptor");
    SYM(SetConvolution2dDescriptor, "cudnnSetConvolution2dDescriptor");
    SYM(SetConvolutionMathType, "cudnnSetConvolutionMathType");
    SYM(DestroyConvolutionDescriptor, "cudnnDestroyConvolutionDescriptor");
    SYM(FindConvolutionForwardAlgorithmEx, "cudnnFindConvolutionForwardAlgorithmEx");
    SYM(FindConvolutionBackwardDataAlgorithmEx, "cudnnFindConvolutionBackwardDataAlgorithmEx");
    SYM(FindConvolutionBackwardFilterAlgorithmEx, "cudnnFindConvolutionBackwardFilterAlgorithmEx");
    SYM(GetConvolutionForwardWorkspaceSize, "cudnnGetConvolutionForwardWorkspaceSize");
    SYM(GetConvolutionBackwardDataWorkspaceSize, "cudnnGetConvolutionBackwardDataWorkspaceSize");
    SYM(GetConvolutionBackwardFilterWorkspaceSize, "cudnnGetConvolutionBackwardFilterWorkspaceSize");
    SYM(ConvolutionForward, "cudnnConvolutionForward");
    SYM(ConvolutionBackwardData, "cudnnConvolutionBackwardData");
    SYM(ConvolutionBackwardFilter, "cudnnConvolutionBackwardFilter");
#undef SYM
    /* the backend API (gpu/attn_cudnn.cu): optional, the convolutions do without it */
    *(void **)&Cd.BackendCreateDescriptor = dlsym(h, "cudnnBackendCreateDescriptor");
    *(void **)&Cd.BackendDestroyDescriptor = dlsym(h, "cudnnBackendDestroyDescriptor");
    *(void **)&Cd.BackendFinalize = dlsym(h, "cudnnBackendFinalize");
    *(void **)&Cd.BackendSetAttribute = dlsym(h, "cudnnBackendSetAttribute");
    *(void **)&Cd.BackendGetAttribute = dlsym(h, "cudnnBackendGetAttribute");
    *(void **)&Cd.BackendExecute = dlsym(h, "cudnnBackendExecute");
    *(void **)&Cd.GetLastErrorString = dlsym(h, "cudnnGetLastErrorString");
    size_t v = Cd.GetVersion();
    if (v < 8000) {
        snprintf(g_why, sizeof g_why, "%s is cuDNN version %zu; plumb needs 8.0 or newer (NHWC, FMA math type)", g_lib,
                 v);
        return -1;
    }
    /* 9.x: major*10000 + minor*100 + patch; 8.x: major*1000 + minor*100 + patch */
    if (v >= 90000) snprintf(g_ver, sizeof g_ver, "cuDNN %zu.%zu.%zu", v / 10000, v / 100 % 100, v % 100);
    else snprintf(g_ver, sizeof g_ver, "cuDNN %zu.%zu.%zu", v / 1000, v / 100 % 10, v % 100);
    return 0;
}

static int lib_err(struct dev *d, const char *call, cdn_status_t st, plumb_err *e)
{
    return gpu_err(e, PLUMB_EDEVICE, "%s: %s failed: status %d (%s)", d->label, call, st, Cd.GetErrorString(st));
}
#define CCHECK(call, name)                                                                           \
    do {                                                                                             \
        cdn_status_t st_ = (call);                                                                   \
        if (st_ != CDN_STATUS_SUCCESS) return lib_err(d, name, st_, e);                              \
    } while (0)

struct plan {
    struct plan_key key;
    int usable, algo;
    size_t ws;
    /* FWD: ta = x, tb = y (tensors), f = w; DATA: ta = dy, tb = dx, f = w;
     * FILTER: ta = x, tb = dy, f = dw */
    cdn_tensor_t ta, tb;
    cdn_filter_t f;
    cdn_conv_t conv;
};

static cdn_dtype_t cdn_type(int rt) { return rt == DT_BF16 ? CDN_DATA_BFLOAT16 : rt == DT_F16 ? CDN_DATA_HALF : CDN_DATA_FLOAT; }

struct handle_slot {
    struct dev *d;
    cdn_handle_t h;
};
static struct handle_slot g_handles[64];

static int get_handle(struct dev *d, cdn_handle_t *h, plumb_err *e)
{
    for (int i = 0; i < 64; i++)
        if (g_handles[i].d == d) {
            *h = g_handles[i].h;
            return PLUMB_OK;
        }
    for (int i = 0; i < 64; i++)
        if (!g_handles[i].d) {
            CCHECK(Cd.Create(&g_handles[i].h), "cudnnCreate");
            g_handles[i].d = d;
            *h = g_handles[i].h;
            return PLUMB_OK;
        }
    return gpu_err(e, PLUMB_EINTERNAL, "%s: more than 64 devices hold cuDNN handles", d->label);
}

static int run_plan(struct dev *d, cdn_handle_t h, const struct plan *p, const void *a, const void *b, void *out,
                    plumb_err *e);

/* Find times each algorithm once, while the plan is made, which is at the
 * start of a run on a GPU just out of idle (the H100 reads 345 MHz there):
 * its order is partly noise, and the algorithm it puts first is pinned for
 * the run. resnet152 bf16/64 pinned cuDNN's legacy implicit_convolve_sgemm
 * for its 1x1 forward convolutions at 0.31 ms a call, 38% of the step's GPU
 * time, and its bf16 figure moved 573-851 img/s from run to run
 * (BENCHMARKS.md, 2026-12-05 call 6). So the usable candidates (at most
 * RETIME_MAX, Find's first) run again here on the plan's stream, one warm-up
 * then RETIME_RUNS timed runs each, and the lowest median wins; *pick is its
 * index, *ms its median. Under stream capture nothing may run: Find's first
 * stands. The runs write `out`, which the caller's own run overwrites. */
#define RETIME_MAX 4
#define RETIME_RUNS 3 /* the median below is of three */
static int picks_retime_on(void)
{
    const char *env = getenv("PLUMB_CONV_RETIME");
    return !(env && !strcmp(env, "0"));
}
static int retime(struct dev *d, cdn_handle_t h, struct dev_stream *st, struct plan *p, const cdn_perf_t *cand, int nc,
                  const void *a, const void *b, void *out, int *pick, float *ms, plumb_err *e)
{
    *pick = 0;
    *ms = -1.0f;
    if (!picks_retime_on()) return PLUMB_OK; /* Find's first, as before */
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(st->s, &cap) != cudaSuccess || cap != cudaStreamCaptureStatusNone) {
        (void)cudaGetLastError();
        return PLUMB_OK;
    }
    cudaEvent_t ev[RETIME_RUNS + 1];
    int made = 0, rc = PLUMB_OK;
    for (; made <= RETIME_RUNS; made++)
        if (cudaEventCreate(&ev[made]) != cudaSuccess) break;
    if (made <= RETIME_RUNS) {
        rc = gpu_err(e, PLUMB_EINTERNAL, "%s: cudaEventCreate for the convolution timing failed", d->label);
        goto out;
    }
    for (int i = 0; i < nc && !rc; i++) {
        struct plan q = *p;
        q.algo = cand[i].algo;
        q.ws = cand[i].memory;
        if (Cd.SetConvolutionMathType(q.conv, cand[i].mathType) != CDN_STATUS_SUCCESS) continue;
        if ((rc = run_plan(d, h, &q, a, b, out, e))) break; /* warm-up */
        float t[RETIME_RUNS];
        cudaError_t ce = cudaEventRecord(ev[0], st->s);
        for (int k = 0; k < RETIME_RUNS && !rc && ce == cudaSuccess; k++)
            if (!(rc = run_plan(d, h, &q, a, b, out, e))) ce = cudaEventRecord(ev[k + 1], st->s);
        if (rc) break;
        if (ce == cudaSuccess) ce = cudaEventSynchronize(ev[RETIME_RUNS]);
        for (int k = 0; k < RETIME_RUNS && ce == cudaSuccess; k++) ce = cudaEventElapsedTime(&t[k], ev[k], ev[k + 1]);
        if (ce != cudaSuccess) {
            rc = gpu_err(e, PLUMB_EINTERNAL, "%s: timing a convolution algorithm: %s", d->label, cudaGetErrorString(ce));
            break;
        }
        /* the median of three */
        const float lo = t[0] < t[1] ? t[0] : t[1], hi = t[0] < t[1] ? t[1] : t[0];
        const float med = t[2] < lo ? lo : t[2] > hi ? hi : t[2];
        if (*ms < 0.0f || med < *ms) *ms = med, *pick = i;
    }
out:
    for (int k = 0; k < made; k++) (void)cudaEventDestroy(ev[k]);
    return rc;
}

static int make_plan(struct dev *d, cdn_handle_t h, struct dev_stream *st, struct plan *p, const void *a, const void *b,
                     void *out, plumb_err *e)
{
    const struct train_conv *g = &p->key.g;
    const int rt = p->key.rt;
    const cdn_dtype_t t = cdn_type(rt);
    CCHECK(Cd.CreateTensorDescriptor(&p->ta), "cudnnCreateTensorDescriptor");
    CCHECK(Cd.CreateTensorDescriptor(&p->tb), "cudnnCreateTensorDescriptor");
    CCHECK(Cd.CreateFilterDescriptor(&p->f), "cudnnCreateFilterDescriptor");
    CCHECK(Cd.CreateConvolutionDescriptor(&p->conv), "cudnnCreateConvolutionDescriptor");
    CCHECK(Cd.SetFilter4dDescriptor(p->f, t, CDN_TENSOR_NHWC, g->K, g->C, g->R, g->S), "cudnnSetFilter4dDescriptor");
    const int xin = p->key.dir != CONVLIB_DATA; /* ta is x (FWD, FILTER) or dy (DATA) */
    CCHECK(Cd.SetTensor4dDescriptor(p->ta, CDN_TENSOR_NHWC, t, g->N, xin ? g->C : g->K, xin ? g->H : g->P,
                                    xin ? g->W : g->Q),
           "cudnnSetTensor4dDescriptor");
    const int tb_is_x = p->key.dir == CONVLIB_DATA; /* tb is y/dy (FWD, FILTER) or dx (DATA) */
    CCHECK(Cd.SetTensor4dDescriptor(p->tb, CDN_TENSOR_NHWC, t, g->N, tb_is_x ? g->C : g->K, tb_is_x ? g->H : g->P,
                                    tb_is_x ? g->W : g->Q),
           "cudnnSetTensor4dDescriptor");
    CCHECK(Cd.SetConvolution2dDescriptor(p->conv, g->pad, g->pad, g->stride, g->stride, 1, 1, CDN_CROSS_CORRELATION,
                                         CDN_DATA_FLOAT),
           "cudnnSetConvolution2dDescriptor");
    const int fma_only = rt == DT_F32 && !p->key.tf32;
    CCHECK(Cd.SetConvolutionMathType(p->conv, rt != DT_F32 ? CDN_TENSOR_OP_MATH : fma_only ? CDN_FMA_MATH
                                                                                         : CDN_DEFAULT_MATH),
           "cudnnSetConvolutionMathType");
    size_t wsb = ws_limit();
    void *ws = NULL;
    if (wsb) {
        int rc = tvws_get(d, TVWS_CONV, wsb, &ws, e);
        if (rc) return rc;
    }
    const struct pick *was = pick_find(d, &p->key);
    if (was && was->from_file && was->usable) {
        /* a pick of an earlier process: still an algorithm the library runs for
         * this plan within the workspace limit? Otherwise Find as if new */
        size_t need = 0;
        cdn_status_t s = Cd.SetConvolutionMathType(p->conv, (cdn_math_t)was->math);
        if (s == CDN_STATUS_SUCCESS) {
            if (p->key.dir == CONVLIB_FWD)
                s = Cd.GetConvolutionForwardWorkspaceSize(h, p->ta, p->f, p->conv, p->tb, was->algo, &need);
            else if (p->key.dir == CONVLIB_DATA)
                s = Cd.GetConvolutionBackwardDataWorkspaceSize(h, p->f, p->ta, p->conv, p->tb, was->algo, &need);
            else
                s = Cd.GetConvolutionBackwardFilterWorkspaceSize(h, p->ta, p->tb, p->conv, p->f, was->algo, &need);
        }
        if (s == CDN_STATUS_SUCCESS && need <= wsb) {
            struct pick *w = pick_at(d, &p->key);
            w->ws = need;
            w->from_file = 0; /* checked: this process's pick now */
            const char *lg = getenv("PLUMB_CONV_LOG");
            if (lg && *lg) {
                static const char *dirs[] = {"fwd", "dgrad", "wgrad"};
                fprintf(stderr,
                        "plumb: %s: cudnn %s N%d H%d W%d C%d -> K%d R%dxS%d stride %d pad %d %s: algo %d from the picks "
                        "file (no Find)\n",
                        d->label, dirs[p->key.dir], g->N, g->H, g->W, g->C, g->K, g->R, g->S, g->stride, g->pad,
                        rt == DT_BF16 ? "bf16" : rt == DT_F16 ? "fp16" : "fp32", was->algo);
            }
        } else {
            CCHECK(Cd.SetConvolutionMathType(p->conv, rt != DT_F32 ? CDN_TENSOR_OP_MATH : fma_only ? CDN_FMA_MATH
                                                                                                 : CDN_DEFAULT_MATH),
                   "cudnnSetConvolutionMathType");
            was = NULL;
        }
    }
    if (was) { /* chosen for this shape before (this process, or a checked pick of the file): the same algorithm, so the same bits */
        p->usable = was->usable, p->algo = was->algo, p->ws = was->ws;
        if (was->usable) CCHECK(Cd.SetConvolutionMathType(p->conv, (cdn_math_t)was->math), "cudnnSetConvolutionMathType");
        return PLUMB_OK;
    }
    cdn_perf_t perf[16];
    int nret = 0;
    memset(perf, 0, sizeof perf);
    if (p->key.dir == CONVLIB_FWD)
        CCHECK(Cd.FindConvolutionForwardAlgorithmEx(h, p->ta, a, p->f, b, p->conv, p->tb, out, 16, &nret, perf, ws, wsb),
               "cudnnFindConvolutionForwardAlgorithmEx");
    else if (p->key.dir == CONVLIB_DATA) /* a = dy, b = w */
        CCHECK(Cd.FindConvolutionBackwardDataAlgorithmEx(h, p->f, b, p->ta, a, p->conv, p->tb, out, 16, &nret, perf, ws,
                                                         wsb),
               "cudnnFindConvolutionBackwardDataAlgorithmEx");
    else /* a = x, b = dy */
        CCHECK(Cd.FindConvolutionBackwardFilterAlgorithmEx(h, p->ta, a, p->tb, b, p->conv, p->f, out, 16, &nret, perf,
                                                           ws, wsb),
               "cudnnFindConvolutionBackwardFilterAlgorithmEx");
    /* the usable results, in Find's order (sorted by its time) */
    cdn_perf_t cand[RETIME_MAX];
    int nc = 0;
    for (int i = 0; i < nret && nc < RETIME_MAX; i++) {
        const cdn_perf_t *r = &perf[i];
        if (r->status != CDN_STATUS_SUCCESS || r->determinism != CDN_DETERMINISTIC || r->memory > wsb) continue;
        if (fma_only && r->mathType != CDN_FMA_MATH) continue;
        cand[nc++] = *r;
    }
    p->usable = nc > 0;
    float taken_ms = -1.0f, retimed_ms = -1.0f;
    if (nc) {
        int pick = 0;
        int rc = retime(d, h, st, p, cand, nc, a, b, out, &pick, &retimed_ms, e);
        if (rc) return rc;
        p->algo = cand[pick].algo;
        p->ws = cand[pick].memory;
        taken_ms = cand[pick].time;
        CCHECK(Cd.SetConvolutionMathType(p->conv, cand[pick].mathType), "cudnnSetConvolutionMathType");
        pick_keep(d, &p->key, 1, p->algo, (int)cand[pick].mathType, p->ws);
    } else {
        pick_keep(d, &p->key, 0, 0, 0, 0);
    }
    const char *lg = getenv("PLUMB_CONV_LOG");
    if (lg && *lg) {
        const cdn_perf_t *f = NULL; /* the fastest that ran, deterministic or not */
        for (int i = 0; i < nret && !f; i++)
            if (perf[i].status == CDN_STATUS_SUCCESS) f = &perf[i];
        static const char *dirs[] = {"fwd", "dgrad", "wgrad"};
        fprintf(stderr,
                "plumb: %s: cudnn %s N%d H%d W%d C%d -> K%d R%dxS%d stride %d pad %d %s: algo %d %.4f ms (retimed "
                "%.4f ms of %d candidates)%s; fastest algo %d %.4f ms (%s, %zu B)\n",
                d->label, dirs[p->key.dir], g->N, g->H, g->W, g->C, g->K, g->R, g->S, g->stride, g->pad,
                rt == DT_BF16 ? "bf16" : rt == DT_F16 ? "fp16" : "fp32", p->usable ? p->algo : -1, taken_ms,
                retimed_ms, nc, p->usable ? "" : " (none usable: own kernels)", f ? f->algo : -1, f ? f->time : -1.0f,
                f && f->determinism == CDN_DETERMINISTIC ? "deterministic" : "not deterministic", f ? f->memory : (size_t)0);
    }
    return PLUMB_OK;
}

static int run_plan(struct dev *d, cdn_handle_t h, const struct plan *p, const void *a, const void *b, void *out,
                    plumb_err *e)
{
    const float one = 1.0f, zero = 0.0f;
    void *ws = NULL;
    if (p->ws) {
        int rc = tvws_get(d, TVWS_CONV, p->ws, &ws, e);
        if (rc) return rc;
    }
    if (p->key.dir == CONVLIB_FWD)
        CCHECK(Cd.ConvolutionForward(h, &one, p->ta, a, p->f, b, p->conv, p->algo, ws, p->ws, &zero, p->tb, out),
               "cudnnConvolutionForward");
    else if (p->key.dir == CONVLIB_DATA)
        CCHECK(Cd.ConvolutionBackwardData(h, &one, p->f, b, p->ta, a, p->conv, p->algo, ws, p->ws, &zero, p->tb, out),
               "cudnnConvolutionBackwardData");
    else
        CCHECK(Cd.ConvolutionBackwardFilter(h, &one, p->ta, a, p->tb, b, p->conv, p->algo, ws, p->ws, &zero, p->f, out),
               "cudnnConvolutionBackwardFilter");
    return PLUMB_OK;
}
static void plan_destroy(struct plan *p)
{
    if (p->ta) (void)Cd.DestroyTensorDescriptor(p->ta);
    if (p->tb) (void)Cd.DestroyTensorDescriptor(p->tb);
    if (p->f) (void)Cd.DestroyFilterDescriptor(p->f);
    if (p->conv) (void)Cd.DestroyConvolutionDescriptor(p->conv);
}
static void handle_destroy(cdn_handle_t h) { (void)Cd.Destroy(h); }
#define LIB_NAME "cuDNN (libcudnn.so.9)"
#define LIB_ENV "PLUMB_CUDNN_LIB"
typedef cdn_handle_t lib_handle_t;
static int set_stream(struct dev *d, lib_handle_t h, struct dev_stream *st, plumb_err *e)
{
    CCHECK(Cd.SetStream(h, (void *)st->s), "cudnnSetStream");
    return PLUMB_OK;
}
#endif

/* =============================== common =============================== */

#define MAX_PLANS 1024
static struct plan *g_plans[MAX_PLANS];
static int g_nplans;

int convlib_ok(struct dev *d, dtype_t rt)
{
    (void)d, (void)rt; /* every library here takes fp32, bf16 and fp16 */
    pthread_mutex_lock(&g_lib_lock);
    if (!g_state) g_state = load_locked() == 0 ? 1 : -1;
    int ok = g_state == 1;
    pthread_mutex_unlock(&g_lib_lock);
    return ok;
}

/* At device close (backend.cu): the device's plans and library handle go,
 * so opening devices one after another neither leaks descriptors nor runs
 * out of handle slots, and a later device at the same address starts clean. */
void convlib_release(struct dev *d)
{
    pthread_mutex_lock(&g_lib_lock);
    if (g_state == 1) {
        int k = 0;
        for (int i = 0; i < g_nplans; i++)
            if (g_plans[i]->key.d == d) {
                plan_destroy(g_plans[i]);
                free(g_plans[i]);
            } else {
                g_plans[k++] = g_plans[i];
            }
        g_nplans = k;
#if !defined(PLUMB_HIP)
        attn_cudnn_release(d, &Cd);
#endif
        for (int i = 0; i < 64; i++)
            if (g_handles[i].d == d) {
                handle_destroy(g_handles[i].h);
                memset(&g_handles[i], 0, sizeof g_handles[i]);
            }
    }
    pthread_mutex_unlock(&g_lib_lock);
}

void convlib_describe(char *buf, size_t n)
{
    pthread_mutex_lock(&g_lib_lock);
    if (!g_state) g_state = load_locked() == 0 ? 1 : -1;
    if (g_state == 1)
        snprintf(buf, n, "%s (%s), deterministic algorithms, NHWC", g_ver, g_lib);
    else
        snprintf(buf, n, "own implicit-GEMM kernels: %s not loadable (%s; set %s)", LIB_NAME, g_why, LIB_ENV);
    pthread_mutex_unlock(&g_lib_lock);
}

#if !defined(PLUMB_HIP)
/* gpu/attn_cudnn.cu's way to the library: loaded (or *why says why not), the
 * device's handle bound to st's stream; the lock is held from a PLUMB_OK
 * return until cudnn_graph_leave, as convlib_run holds it round a plan */
int cudnn_graph_enter(struct dev *d, struct dev_stream *st, const struct cudnn_fns **fns, cdn_handle_t *h,
                      plumb_err *e)
{
    pthread_mutex_lock(&g_lib_lock);
    if (!g_state) g_state = load_locked() == 0 ? 1 : -1;
    int rc = PLUMB_OK;
    if (g_state != 1)
        rc = gpu_err(e, PLUMB_EUNSUPPORTED, "%s: %s not loadable (%s; set %s)", d->label, LIB_NAME, g_why, LIB_ENV);
    else if (!Cd.BackendCreateDescriptor || !Cd.BackendDestroyDescriptor || !Cd.BackendFinalize ||
             !Cd.BackendSetAttribute || !Cd.BackendGetAttribute || !Cd.BackendExecute)
        rc = gpu_err(e, PLUMB_EUNSUPPORTED, "%s: %s (%s) has no backend graph API", d->label, g_lib, g_ver);
    if (!rc) rc = get_handle(d, h, e);
    if (!rc) rc = set_stream(d, *h, st, e);
    if (rc) pthread_mutex_unlock(&g_lib_lock);
    else *fns = &Cd;
    return rc;
}
void cudnn_graph_leave(void) { pthread_mutex_unlock(&g_lib_lock); }
#endif

int convlib_run(struct dev *d, struct dev_stream *st, int dir, const struct train_conv *g, const void *a,
                const void *b, void *out, dtype_t rt, plumb_err *e)
{
    if (!convlib_ok(d, rt)) return gpu_err(e, PLUMB_EUNSUPPORTED, "%s: %s not loaded", d->label, LIB_NAME);
    struct plan_key key;
    memset(&key, 0, sizeof key);
    key.d = d;
    key.dir = dir;
    key.rt = (int)rt;
    key.tf32 = d->allow_tf32 && rt == DT_F32;
    key.g = *g;
    pthread_mutex_lock(&g_lib_lock);
    lib_handle_t h = NULL;
    int rc = get_handle(d, &h, e);
    if (!rc) rc = set_stream(d, h, st, e);
    struct plan *p = NULL;
    for (int i = 0; i < g_nplans && !rc && !p; i++)
        if (key_eq(&g_plans[i]->key, &key)) p = g_plans[i];
    if (!rc && !p) {
        if (g_nplans == MAX_PLANS) {
            rc = gpu_err(e, PLUMB_EINTERNAL, "%s: more than %d convolution plans", d->label, MAX_PLANS);
        } else {
            p = (struct plan *)calloc(1, sizeof *p);
            if (!p) rc = gpu_err(e, PLUMB_ENOMEM, "%s: out of host memory for a convolution plan", d->label);
            else {
                p->key = key;
                rc = make_plan(d, h, st, p, a, b, out, e);
                if (!rc) g_plans[g_nplans++] = p; /* (a failed plan's descriptors are not reused) */
                else {
                    plan_destroy(p);
                    free(p);
                }
                if (rc) p = NULL;
            }
        }
    }
    if (!rc && !p->usable)
        rc = gpu_err(e, PLUMB_EUNSUPPORTED, "%s: %s has no deterministic algorithm for this convolution", d->label,
                     LIB_NAME);
    if (!rc) rc = run_plan(d, h, p, a, b, out, e);
    pthread_mutex_unlock(&g_lib_lock);
    return rc;
}
