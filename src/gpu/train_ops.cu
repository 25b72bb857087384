/* The GPU training op table (dev/train_ops.h): argument checks, dispatch to
 * the kernel families (train_linear.cu, train_sparse.cu), and the small ops
 * written here: relu, BCE, sigmoid, optimizers, gradient utilities.
 *
 * Golden: each kernel evaluates the cpu backend's expression for one output
 * element in the documented order (fmaf written out, --fmad=false /
 * -ffp-contract=off, train_math.h transcendentals, IEEE division and sqrt),
 * so the bits equal the cpu backend's. Sequential definitions (the BCE loss
 * sum, sumsq's block order) run sequentially on the device.
 * Fast: vendor exp/log1p, deterministic tree reductions with a fixed shape
 * (never atomics on floats), so a fast result repeats run to run. */
#include "gpu/train_gpu.h"
#include "gpu/train_gpt.h"
#include "dev/train_math.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------------- workspace ---------------- */

struct tws_slot {
    struct dev *d;
    void *p[TWS_SLOTS];
    size_t bytes[TWS_SLOTS];
};
#define TWS_DEVS 64
static struct tws_slot g_tws[TWS_DEVS];
static pthread_mutex_t g_tws_lock = PTHREAD_MUTEX_INITIALIZER;

int gpu_env_switch(struct dev *d, const char *name, const char *zero_means, const char *one_means, int *on,
                   plumb_err *e, int dflt)
{
    const char *v = getenv(name);
    if (v && *v && strcmp(v, "0") && strcmp(v, "1"))
        return gpu_err(e, PLUMB_EUSAGE, "%s: %s=%s: expected 0 (%s%s) or 1 (%s%s)", d->label, name, v, zero_means,
                       dflt ? "" : "; the default", one_means, dflt ? "; the default" : "");
    *on = v && *v ? v[0] == '1' : dflt;
    return PLUMB_OK;
}

int tws_get(struct dev *d, int slot, size_t bytes, void **p, plumb_err *e)
{
    if (slot < 0 || slot >= TWS_SLOTS)
        return gpu_err(e, PLUMB_EINTERNAL, "%s: train workspace slot %d (expected 0..%d)", d->label, slot, TWS_SLOTS - 1);
    pthread_mutex_lock(&g_tws_lock);
    struct tws_slot *s = NULL;
    for (int i = 0; i < TWS_DEVS && !s; i++)
        if (g_tws[i].d == d) s = &g_tws[i];
    for (int i = 0; i < TWS_DEVS && !s; i++)
        if (!g_tws[i].d) {
            s = &g_tws[i];
            s->d = d;
        }
    if (!s) {
        pthread_mutex_unlock(&g_tws_lock);
        return gpu_err(e, PLUMB_EINTERNAL, "%s: more than %d devices hold train workspaces", d->label, TWS_DEVS);
    }
    if (bytes < 256) bytes = 256;
    if (s->bytes[slot] < bytes) {
        size_t nb = bytes + bytes / 2;
        cudaError_t rc = cudaDeviceSynchronize(); /* the old buffer may still be read */
        if (rc == cudaSuccess && s->p[slot]) rc = cudaFree(s->p[slot]);
        s->p[slot] = NULL;
        s->bytes[slot] = 0;
        if (rc == cudaSuccess) rc = cudaMalloc(&s->p[slot], nb);
        if (rc != cudaSuccess) {
            s->p[slot] = NULL;
            pthread_mutex_unlock(&g_tws_lock);
            return gpu_check_(rc, "cudaMalloc(train workspace)", d->label, e);
        }
        s->bytes[slot] = nb;
        d->ws_gen++;
    }
    *p = s->p[slot];
    pthread_mutex_unlock(&g_tws_lock);
    return PLUMB_OK;
}

/* At device close (backend.cu): the slot is freed, so a process that opens
 * and closes devices (accept's seeds, the ladder's rungs) neither leaks the
 * buffers nor runs out of slots, and a later device that happens to get the
 * same struct dev address starts clean. The caller has synchronised. */
void tws_release(struct dev *d)
{
    pthread_mutex_lock(&g_tws_lock);
    for (int i = 0; i < TWS_DEVS; i++)
        if (g_tws[i].d == d) {
            for (int k = 0; k < TWS_SLOTS; k++)
                if (g_tws[i].p[k]) (void)cudaFree(g_tws[i].p[k]);
            memset(&g_tws[i], 0, sizeof g_tws[i]);
        }
    pthread_mutex_unlock(&g_tws_lock);
}

/* ---------------- profile ---------------- */

static const char *g_tp_names[TP_COUNT] = {
    "linear_fwd", "linear_bwd", "  bwd: mask+dbias", "  bwd: dx gemm", "  bwd: dw gemm", "relu", "embedding_fwd",
    "embedding_bwd", "  sparse: sort+seg sum", "  sparse: seg sum", "sparse_coalesce", "interact_fwd", "interact_bwd",
    "bce_logits", "sigmoid", "sgd", "sgd_sparse", "adamw", "sumsq", "scale_check", "affine", "round_fp32",
    "gpt embedding", "gpt layernorm", "gpt matmul_fwd", "gpt matmul_bwd", "gpt attention_fwd", "gpt attention_bwd",
    "gpt residual", "gpt classifier", "gpt adamw_masked"};
static double g_tp_s[TP_COUNT];
static long g_tp_n[TP_COUNT];
static int g_tp = -1;
static pthread_mutex_t g_tp_lock = PTHREAD_MUTEX_INITIALIZER;

static void tprof_report(void)
{
    fprintf(stderr, "\nPLUMB_TRAIN_PROF (%s)\n%-24s %8s %12s %10s\n",
            g_tp == 2 ? "host time to queue each op, no synchronisation" : "each op between stream synchronisations",
            "op", "calls", "total ms", "ms/call");
    for (int i = 0; i < TP_COUNT; i++)
        if (g_tp_n[i])
            fprintf(stderr, "%-24s %8ld %12.3f %10.4f\n", g_tp_names[i], g_tp_n[i], 1e3 * g_tp_s[i],
                    1e3 * g_tp_s[i] / (double)g_tp_n[i]);
}

int tprof_on(void)
{
    if (g_tp < 0) {
        const char *v = getenv("PLUMB_TRAIN_PROF");
        g_tp = v && *v && strcmp(v, "0") ? (!strcmp(v, "host") ? 2 : 1) : 0;
        if (g_tp) atexit(tprof_report);
    }
    return g_tp;
}

void tprof_add(int id, double s)
{
    pthread_mutex_lock(&g_tp_lock);
    g_tp_s[id] += s;
    g_tp_n[id]++;
    pthread_mutex_unlock(&g_tp_lock);
}

double tprof_sync_now(struct dev_stream *st)
{
    if (g_tp != 2) (void)cudaStreamSynchronize(st->s); /* host: the host's own time to queue each op */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---------------- checks ---------------- */

#define NEED(cond, ...)                                                                  \
    do {                                                                                 \
        if (!(cond)) return gpu_err(e, PLUMB_EUSAGE, __VA_ARGS__);                       \
    } while (0)

static int rt_ok(struct dev *d, const char *op, dtype_t rt, plumb_err *e)
{
    if (rt != DT_F32 && rt != DT_BF16 && rt != DT_F16)
        return gpu_err(e, PLUMB_EUSAGE, "%s: %s: rounding type %d is not fp32, bf16 or fp16", d->label, op, (int)rt);
    return PLUMB_OK;
}
#define RT_OK(op)                                                                        \
    do {                                                                                 \
        int rc_ = rt_ok(d, op, rt, e);                                                   \
        if (rc_) return rc_;                                                             \
    } while (0)
#define ENTER()                                                                          \
    do {                                                                                 \
        int rc_ = gpu_enter(d, e);                                                       \
        if (rc_) return rc_;                                                             \
    } while (0)

static inline int is_golden(struct dev *d) { return d->numerics == NUMERICS_GOLDEN; }

#define TPB 256

/* ---------------- dense layers ---------------- */

static int g_linear_fwd(struct dev *d, dev_stream *s, const float *x, const float *w, const float *bias, float *y,
                        int B, int K, int N, int relu, dtype_t rt, plumb_err *e)
{
    NEED(x && w && y, "%s: linear_fwd: NULL x, w or y", d->label);
    NEED(B > 0 && K > 0 && N > 0, "%s: linear_fwd: bad shape B=%d K=%d N=%d (expected > 0)", d->label, B, K, N);
    RT_OK("linear_fwd");
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_LINEAR_FWD);
    return tr_linear_fwd(d, gpu_stream(d, s), x, w, bias, y, B, K, N, relu, rt, e);
}

static int g_linear_bwd(struct dev *d, dev_stream *s, const float *x, const float *w, const float *y, float *dy,
                        float *dx, float *dw, float *dbias, int B, int K, int N, int relu, dtype_t rt, plumb_err *e)
{
    NEED(x && w && dy && dw, "%s: linear_bwd: NULL x, w, dy or dw", d->label);
    NEED(!relu || y, "%s: linear_bwd: relu needs the forward output y", d->label);
    NEED(B > 0 && K > 0 && N > 0, "%s: linear_bwd: bad shape B=%d K=%d N=%d (expected > 0)", d->label, B, K, N);
    RT_OK("linear_bwd");
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_LINEAR_BWD);
    return tr_linear_bwd(d, gpu_stream(d, s), x, w, y, dy, dx, dw, dbias, B, K, N, relu, rt, 0, NULL, e);
}

static int g_linear_bwd_relu_in(struct dev *d, dev_stream *s, const float *x, const float *w, const float *y,
                                float *dy, float *dx, float *dw, float *dbias, int B, int K, int N, int relu,
                                dtype_t rt, float *dbias_x, plumb_err *e)
{
    NEED(x && w && dy && dw && dx, "%s: linear_bwd_relu_in: NULL x, w, dy, dx or dw", d->label);
    NEED(!relu || y, "%s: linear_bwd_relu_in: relu needs the forward output y", d->label);
    NEED(B > 0 && K > 0 && N > 0, "%s: linear_bwd_relu_in: bad shape B=%d K=%d N=%d (expected > 0)", d->label, B, K,
         N);
    RT_OK("linear_bwd_relu_in");
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_LINEAR_BWD);
    return tr_linear_bwd(d, gpu_stream(d, s), x, w, y, dy, dx, dw, dbias, B, K, N, relu, rt, 1, dbias_x, e);
}

static int g_linear_fwd16(struct dev *d, dev_stream *s, const float *x, uint16_t *x16, const float *w,
                          const uint16_t *w16, const float *bias, float *y, uint16_t *y16, int B, int K, int N,
                          int relu, dtype_t rt, plumb_err *e)
{
    NEED(w && (y || y16), "%s: linear_fwd16: NULL w, or both y and y16", d->label);
    NEED(x || x16, "%s: linear_fwd16: NULL x and x16", d->label);
    NEED(B > 0 && K > 0 && N > 0, "%s: linear_fwd16: bad shape B=%d K=%d N=%d (expected > 0)", d->label, B, K, N);
    NEED(rt == DT_BF16 || rt == DT_F16, "%s: linear_fwd16: rounding type %d is not bf16 or fp16", d->label, (int)rt);
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_LINEAR_FWD);
    return tr_linear_fwd16(d, gpu_stream(d, s), x, x16, w, w16, bias, y, y16, B, K, N, relu, rt, e);
}

static int g_linear_bwd16(struct dev *d, dev_stream *s, const float *x, const uint16_t *x16, const float *w,
                          const uint16_t *w16, const float *y, float *dy, const uint16_t *dy16, float *dx,
                          uint16_t *dx16, float *dw, float *dbias, int B, int K, int N, int relu, dtype_t rt,
                          int relu_in, float *dbias_x, plumb_err *e)
{
    NEED(w && dw, "%s: linear_bwd16: NULL w or dw", d->label);
    NEED(x || x16, "%s: linear_bwd16: NULL x and x16", d->label);
    NEED(dy || (dy16 && !relu && !dbias),
         "%s: linear_bwd16: dy NULL needs its mirror dy16, relu 0 and dbias NULL (dy is masked in place)", d->label);
    NEED(!relu || y, "%s: linear_bwd16: relu needs the forward output y", d->label);
    NEED(!relu_in || dx || dx16, "%s: linear_bwd16: relu_in needs dx or dx16", d->label);
    NEED(B > 0 && K > 0 && N > 0, "%s: linear_bwd16: bad shape B=%d K=%d N=%d (expected > 0)", d->label, B, K, N);
    NEED(rt == DT_BF16 || rt == DT_F16, "%s: linear_bwd16: rounding type %d is not bf16 or fp16", d->label, (int)rt);
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_LINEAR_BWD);
    return tr_linear_bwd16(d, gpu_stream(d, s), x, x16, w, w16, y, dy, dy16, dx, dx16, dw, dbias, B, K, N, relu, rt,
                           relu_in, dbias_x, e);
}

__global__ void k_relu_fwd(const float *x, float *y, size_t n, int rt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = tr_round(x[i] > 0.0f ? x[i] : 0.0f, rt);
}
__global__ void k_relu_bwd(const float *y, const float *dy, float *dx, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}
/* the same 4 at a time (n % 4 == 0, 16-byte aligned) */
__global__ void k_relu_bwd4(const float *y, const float *dy, float *dx, size_t n4)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
        float4 yv = ((const float4 *)y)[i], gv = ((const float4 *)dy)[i];
        ((float4 *)dx)[i] = make_float4(yv.x > 0.0f ? gv.x : 0.0f, yv.y > 0.0f ? gv.y : 0.0f,
                                        yv.z > 0.0f ? gv.z : 0.0f, yv.w > 0.0f ? gv.w : 0.0f);
    }
}

static int g_relu_fwd(struct dev *d, dev_stream *s, const float *x, float *y, size_t n, dtype_t rt, plumb_err *e)
{
    NEED(x && y, "%s: relu_fwd: NULL x or y", d->label);
    RT_OK("relu_fwd");
    if (!n) return PLUMB_OK;
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_RELU);
    k_relu_fwd<<<gpu_grid(n, TPB), TPB, 0, gpu_stream(d, s)->s>>>(x, y, n, (int)rt);
    GPU_CHECK_LAUNCH(d, "k_relu_fwd", e);
    return PLUMB_OK;
}

static int g_relu_bwd(struct dev *d, dev_stream *s, const float *y, const float *dy, float *dx, size_t n,
                      plumb_err *e)
{
    NEED(y && dy && dx, "%s: relu_bwd: NULL y, dy or dx", d->label);
    if (!n) return PLUMB_OK;
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_RELU);
    if (n % 4 == 0 && !(((uintptr_t)y | (uintptr_t)dy | (uintptr_t)dx) & 15)) {
        k_relu_bwd4<<<gpu_grid(n / 4, TPB), TPB, 0, gpu_stream(d, s)->s>>>(y, dy, dx, n / 4);
        GPU_CHECK_LAUNCH(d, "k_relu_bwd4", e);
        return PLUMB_OK;
    }
    k_relu_bwd<<<gpu_grid(n, TPB), TPB, 0, gpu_stream(d, s)->s>>>(y, dy, dx, n);
    GPU_CHECK_LAUNCH(d, "k_relu_bwd", e);
    return PLUMB_OK;
}

/* ---------------- embeddings / interaction (train_sparse.cu) ---------------- */

static int g_embedding_fwd(struct dev *d, dev_stream *s, const float *table, const int64_t *off, const uint32_t *idx,
                           float *out, int B, int T, int D, dtype_t rt, plumb_err *e)
{
    NEED(table && off && idx && out, "%s: embedding_fwd: NULL table, off, idx or out", d->label);
    NEED(B > 0 && T > 0 && D > 0, "%s: embedding_fwd: bad shape B=%d T=%d D=%d", d->label, B, T, D);
    RT_OK("embedding_fwd");
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_EMB_FWD);
    return tr_embedding_fwd(d, gpu_stream(d, s), table, off, idx, out, B, T, D, rt, e);
}

static int g_embedding_bwd(struct dev *d, dev_stream *s, const int64_t *off, const uint32_t *idx, const float *dout,
                           int B, int n_valid, int T, int D, int64_t *rows_out, float *grads_out, int64_t *n_out,
                           plumb_err *e)
{
    NEED(off && idx && dout && rows_out && grads_out && n_out, "%s: embedding_bwd: NULL argument", d->label);
    NEED(B > 0 && T > 0 && D > 0 && n_valid >= 0 && n_valid <= B,
         "%s: embedding_bwd: bad shape B=%d n_valid=%d T=%d D=%d", d->label, B, n_valid, T, D);
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_EMB_BWD);
    return tr_embedding_bwd(d, gpu_stream(d, s), off, idx, dout, B, n_valid, T, D, rows_out, grads_out, n_out, e);
}

static int g_embedding_bwd_sgd(struct dev *d, dev_stream *s, const int64_t *off, const uint32_t *idx,
                               const float *dout, int B, int n_valid, int T, int D, float *table, float lr,
                               int64_t *n_out, const struct sgd_fused_out *out, plumb_err *e)
{
    NEED(off && idx && dout && table && n_out, "%s: embedding_bwd_sgd: NULL argument", d->label);
    NEED(!(out && out->prev && !out->rows), "%s: embedding_bwd_sgd: prev without rows", d->label);
    NEED(B > 0 && T > 0 && D > 0 && n_valid >= 0 && n_valid <= B,
         "%s: embedding_bwd_sgd: bad shape B=%d n_valid=%d T=%d D=%d", d->label, B, n_valid, T, D);
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_EMB_BWD);
    return tr_embedding_bwd_sgd(d, gpu_stream(d, s), off, idx, dout, B, n_valid, T, D, table, lr, n_out, out, e);
}

static int g_sparse_coalesce(struct dev *d, dev_stream *s, const int64_t *rows_in, const float *vals_in, size_t n,
                             int D, int64_t *rows_out, float *vals_out, int64_t *n_out, plumb_err *e)
{
    NEED((rows_in && vals_in && rows_out && vals_out && n_out) || (n == 0 && n_out),
         "%s: sparse_coalesce: NULL argument", d->label);
    NEED(D > 0, "%s: sparse_coalesce: D=%d (expected > 0)", d->label, D);
    NEED(n <= 0xffffffffu, "%s: sparse_coalesce: %zu pairs (at most 2^32-1)", d->label, n);
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_COALESCE);
    return tr_sparse_coalesce(d, gpu_stream(d, s), rows_in, vals_in, n, D, rows_out, vals_out, n_out, e);
}

static int g_interact_fwd(struct dev *d, dev_stream *s, const float *bottom, const float *emb, float *out, int B,
                          int T, int D, dtype_t rt, plumb_err *e)
{
    NEED(bottom && emb && out, "%s: interact_fwd: NULL bottom, emb or out", d->label);
    NEED(B > 0 && T > 0 && D > 0, "%s: interact_fwd: bad shape B=%d T=%d D=%d", d->label, B, T, D);
    RT_OK("interact_fwd");
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_INTER_FWD);
    return tr_interact_fwd(d, gpu_stream(d, s), bottom, emb, out, B, T, D, rt, e);
}

static int g_embedding_interact_fwd(struct dev *d, dev_stream *s, const float *table, const int64_t *off,
                                    const uint32_t *idx, const float *bottom, float *emb, float *out, int B, int T,
                                    int D, dtype_t rt, plumb_err *e)
{
    NEED(table && off && idx && bottom && emb && out, "%s: embedding_interact_fwd: NULL argument", d->label);
    NEED(B > 0 && T > 0 && D > 0, "%s: embedding_interact_fwd: bad shape B=%d T=%d D=%d", d->label, B, T, D);
    RT_OK("embedding_interact_fwd");
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_INTER_FWD);
    return tr_embedding_interact_fwd(d, gpu_stream(d, s), table, off, idx, bottom, emb, out, B, T, D, rt, e);
}

static int g_interact_bwd(struct dev *d, dev_stream *s, const float *bottom, const float *emb, const float *dout,
                          float *dbottom, float *demb, int B, int T, int D, dtype_t rt, plumb_err *e)
{
    NEED(bottom && emb && dout && dbottom && demb, "%s: interact_bwd: NULL argument", d->label);
    NEED(B > 0 && T > 0 && D > 0, "%s: interact_bwd: bad shape B=%d T=%d D=%d", d->label, B, T, D);
    RT_OK("interact_bwd");
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_INTER_BWD);
    return tr_interact_bwd(d, gpu_stream(d, s), bottom, emb, dout, dbottom, demb, B, T, D, rt, e);
}

static int g_embedding_interact_fwd16(struct dev *d, dev_stream *s, const float *table, const int64_t *off,
                                      const uint32_t *idx, const float *bottom, float *emb, float *out,
                                      uint16_t *out16, int ld16, int B, int T, int D, dtype_t rt, plumb_err *e)
{
    NEED(table && off && idx && bottom && emb && out16, "%s: embedding_interact_fwd16: NULL argument", d->label);
    NEED(B > 0 && T > 0 && D > 0, "%s: embedding_interact_fwd16: bad shape B=%d T=%d D=%d", d->label, B, T, D);
    NEED(rt == DT_BF16 || rt == DT_F16, "%s: embedding_interact_fwd16: rounding type %d is not bf16 or fp16", d->label,
         (int)rt);
    NEED(ld16 >= D + (T + 1) * T / 2, "%s: embedding_interact_fwd16: row stride %d < %d outputs", d->label, ld16,
         D + (T + 1) * T / 2);
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_INTER_FWD);
    return tr_embedding_interact_fwd16(d, gpu_stream(d, s), table, off, idx, bottom, emb, out, out16, ld16, B, T, D, rt,
                                       e);
}

static int g_interact_bwd16(struct dev *d, dev_stream *s, const float *bottom, const float *emb,
                            const uint16_t *dout16, int ldo, float *dbottom, float *demb, int B, int T, int D,
                            dtype_t rt, plumb_err *e)
{
    NEED(bottom && emb && dout16 && dbottom && demb, "%s: interact_bwd16: NULL argument", d->label);
    NEED(B > 0 && T > 0 && D > 0, "%s: interact_bwd16: bad shape B=%d T=%d D=%d", d->label, B, T, D);
    NEED(rt == DT_BF16 || rt == DT_F16, "%s: interact_bwd16: rounding type %d is not bf16 or fp16", d->label, (int)rt);
    NEED(ldo >= D + (T + 1) * T / 2, "%s: interact_bwd16: row stride %d < %d outputs", d->label, ldo,
         D + (T + 1) * T / 2);
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_INTER_BWD);
    return tr_interact_bwd16(d, gpu_stream(d, s), bottom, emb, dout16, ldo, dbottom, demb, B, T, D, rt, e);
}

/* ---------------- loss ---------------- */

__device__ static inline float fast_sigmoid(float z)
{
    if (z >= 0.0f) return 1.0f / (1.0f + expf(-z));
    float ez = expf(z);
    return ez / (1.0f + ez);
}

/* per-sample loss into lb[B] (0 when masked), optional loss_ps and dz */
__global__ void k_bce(const float *z, const float *y, int B, int n_valid, float gs, float *loss_ps, float *dz,
                      float *lb, int golden)
{
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B) return;
    if (b >= n_valid) {
        if (loss_ps) loss_ps[b] = 0.0f;
        if (dz) dz[b] = 0.0f;
        lb[b] = 0.0f;
        return;
    }
    float zb = z[b], yb = y ? y[b] : 0.0f, l;
    if (golden) {
        l = tm_bce_logit(zb, yb);
    } else {
        float a = zb > 0.0f ? zb : 0.0f;
        l = (a - zb * yb) + log1pf(expf(-fabsf(zb)));
    }
    if (loss_ps) loss_ps[b] = l;
    lb[b] = l;
    if (dz) dz[b] = ((golden ? tm_sigmoidf(zb) : fast_sigmoid(zb)) - yb) * gs;
}

/* golden: the definition's order, double adds in ascending b from 0 */
__global__ void k_bce_sum_seq(const float *lb, int n_valid, double *sc)
{
    double s = 0.0;
    for (int b = 0; b < n_valid; b++) s += (double)lb[b];
    sc[0] = s;
    sc[1] = (double)n_valid;
}

/* fast: per-block double tree sums (fixed shape), then one block sums those */
__global__ void k_bce_sum_blocks(const float *lb, int n_valid, double *part)
{
    __shared__ double sh[TPB];
    int b = blockIdx.x * TPB + threadIdx.x;
    sh[threadIdx.x] = b < n_valid ? (double)lb[b] : 0.0;
    __syncthreads();
    for (int w = TPB / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) part[blockIdx.x] = sh[0];
}
__global__ void k_bce_sum_final(const double *part, int nb, int n_valid, double *sc)
{
    __shared__ double sh[TPB];
    double s = 0.0;
    for (int i = threadIdx.x; i < nb; i += TPB) s += part[i];
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int w = TPB / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        sc[0] = sh[0];
        sc[1] = (double)n_valid;
    }
}

static int g_bce_logits(struct dev *d, dev_stream *s, const float *z, const float *y, int B, int n_valid,
                        float grad_scale, float *loss_ps, double *sum_count, float *dz, plumb_err *e)
{
    NEED(z, "%s: bce_logits: NULL logits", d->label);
    NEED(y || (!loss_ps && !sum_count && !dz) || n_valid == 0, "%s: bce_logits: NULL labels", d->label);
    NEED(B > 0 && n_valid >= 0 && n_valid <= B, "%s: bce_logits: bad B=%d n_valid=%d", d->label, B, n_valid);
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_BCE);
    struct dev_stream *st = gpu_stream(d, s);
    int nb = (B + TPB - 1) / TPB;
    void *ws;
    int rc = tws_get(d, 0, (size_t)B * sizeof(float) + (size_t)(nb + 1) * sizeof(double), &ws, e);
    if (rc) return rc;
    double *part = (double *)ws;
    float *lb = (float *)(part + nb + 1);
    int g = is_golden(d);
    k_bce<<<nb, TPB, 0, st->s>>>(z, y, B, n_valid, grad_scale, loss_ps, dz, lb, g);
    GPU_CHECK_LAUNCH(d, "k_bce", e);
    if (sum_count) {
        if (g) {
            k_bce_sum_seq<<<1, 1, 0, st->s>>>(lb, n_valid, sum_count);
            GPU_CHECK_LAUNCH(d, "k_bce_sum_seq", e);
        } else {
            k_bce_sum_blocks<<<nb, TPB, 0, st->s>>>(lb, n_valid, part);
            GPU_CHECK_LAUNCH(d, "k_bce_sum_blocks", e);
            k_bce_sum_final<<<1, TPB, 0, st->s>>>(part, nb, n_valid, sum_count);
            GPU_CHECK_LAUNCH(d, "k_bce_sum_final", e);
        }
    }
    return PLUMB_OK;
}

__global__ void k_sigmoid(const float *z, float *p, size_t n, int golden)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = golden ? tm_sigmoidf(z[i]) : fast_sigmoid(z[i]);
}

static int g_sigmoid(struct dev *d, dev_stream *s, const float *z, float *p, size_t n, plumb_err *e)
{
    NEED(z && p, "%s: sigmoid: NULL z or p", d->label);
    if (!n) return PLUMB_OK;
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_SIGMOID);
    k_sigmoid<<<gpu_grid(n, TPB), TPB, 0, gpu_stream(d, s)->s>>>(z, p, n, is_golden(d));
    GPU_CHECK_LAUNCH(d, "k_sigmoid", e);
    return PLUMB_OK;
}

/* ---------------- optimizers ---------------- */

__global__ void k_sgd(float *w, const float *g, size_t n, float lr, float wd)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        w[i] = wd == 0.0f ? fmaf(-lr, g[i], w[i]) : fmaf(-lr, fmaf(wd, w[i], g[i]), w[i]);
}

static int g_sgd(struct dev *d, dev_stream *s, float *w, const float *g, size_t n, float lr, float wd, plumb_err *e)
{
    NEED(w && g, "%s: sgd: NULL w or g", d->label);
    if (!n) return PLUMB_OK;
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_SGD);
    k_sgd<<<gpu_grid(n, TPB), TPB, 0, gpu_stream(d, s)->s>>>(w, g, n, lr, wd);
    GPU_CHECK_LAUNCH(d, "k_sgd", e);
    return PLUMB_OK;
}

__global__ void k_sgd_momentum(float *w, const float *g, float *buf, size_t n, float lr, float wd, float mu, int first)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float dd = wd == 0.0f ? g[i] : fmaf(wd, w[i], g[i]);
        float b = first ? dd : fmaf(mu, buf[i], dd);
        buf[i] = b;
        w[i] = fmaf(-lr, b, w[i]);
    }
}

static int g_sgd_momentum(struct dev *d, dev_stream *s, float *w, const float *g, float *buf, size_t n, float lr,
                          float wd, float mu, int first, plumb_err *e)
{
    NEED(w && g && buf, "%s: sgd_momentum: NULL w, g or buf", d->label);
    if (!n) return PLUMB_OK;
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_SGD);
    k_sgd_momentum<<<gpu_grid(n, TPB), TPB, 0, gpu_stream(d, s)->s>>>(w, g, buf, n, lr, wd, mu, first);
    GPU_CHECK_LAUNCH(d, "k_sgd_momentum", e);
    return PLUMB_OK;
}

__global__ void k_sgd_sparse(float *table, const int64_t *rows, const float *grads, size_t n, int D, float lr)
{
    size_t tot = n * (size_t)D;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < tot; i += (size_t)gridDim.x * blockDim.x) {
        size_t u = i / (size_t)D, k = i % (size_t)D;
        float *t = table + (size_t)rows[u] * D + k;
        *t = fmaf(-lr, grads[i], *t);
    }
}

static int g_sgd_sparse(struct dev *d, dev_stream *s, float *table, const int64_t *rows, const float *grads, size_t n,
                        int D, float lr, plumb_err *e)
{
    NEED((table && rows && grads) || n == 0, "%s: sgd_sparse: NULL argument", d->label);
    NEED(D > 0, "%s: sgd_sparse: D=%d", d->label, D);
    if (!n) return PLUMB_OK;
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_SGD_SPARSE);
    k_sgd_sparse<<<gpu_grid(n * (size_t)D, TPB), TPB, 0, gpu_stream(d, s)->s>>>(table, rows, grads, n, D, lr);
    GPU_CHECK_LAUNCH(d, "k_sgd_sparse", e);
    return PLUMB_OK;
}

/* The cpu's adamw_one, line by line (fp32, no fma: --fmad=false). */
__device__ static inline void adamw_one(float *w, float g, float *m, float *v, float lr, float b1, float b2, float eps,
                                        float wd, float bc1, float bc2)
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

__global__ void k_adamw(float *w, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
                        float eps, float wd, float bc1, float bc2)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        adamw_one(w + i, g[i], m + i, v + i, lr, b1, b2, eps, wd, bc1, bc2);
}

__global__ void k_adamw_sparse(float *table, float *m, float *v, const int64_t *rows, const float *grads, size_t n,
                               int D, float lr, float b1, float b2, float eps, float wd, float bc1, float bc2)
{
    size_t tot = n * (size_t)D;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < tot; i += (size_t)gridDim.x * blockDim.x) {
        size_t u = i / (size_t)D, k = i % (size_t)D;
        size_t o = (size_t)rows[u] * D + k;
        adamw_one(table + o, grads[i], m + o, v + o, lr, b1, b2, eps, wd, bc1, bc2);
    }
}

static int adam_args(struct dev *d, float bc1, float bc2, plumb_err *e)
{
    if (!(bc1 > 0.0f && bc1 <= 1.0f && bc2 > 0.0f && bc2 <= 1.0f))
        return gpu_err(e, PLUMB_EUSAGE, "%s: adamw: bias corrections bc1=%g bc2=%g (expected in (0,1])", d->label,
                       (double)bc1, (double)bc2);
    return PLUMB_OK;
}

static int g_adamw(struct dev *d, dev_stream *s, float *w, const float *g, float *m, float *v, size_t n, float lr,
                   float b1, float b2, float eps, float wd, float bc1, float bc2, plumb_err *e)
{
    NEED(w && g && m && v, "%s: adamw: NULL argument", d->label);
    if (adam_args(d, bc1, bc2, e)) return PLUMB_EUSAGE;
    if (!n) return PLUMB_OK;
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_ADAMW);
    k_adamw<<<gpu_grid(n, TPB), TPB, 0, gpu_stream(d, s)->s>>>(w, g, m, v, n, lr, b1, b2, eps, wd, bc1, bc2);
    GPU_CHECK_LAUNCH(d, "k_adamw", e);
    return PLUMB_OK;
}

static int g_adamw_sparse(struct dev *d, dev_stream *s, float *table, float *m, float *v, const int64_t *rows,
                          const float *grads, size_t n, int D, float lr, float b1, float b2, float eps, float wd,
                          float bc1, float bc2, plumb_err *e)
{
    NEED((table && m && v && rows && grads) || n == 0, "%s: adamw_sparse: NULL argument", d->label);
    NEED(D > 0, "%s: adamw_sparse: D=%d", d->label, D);
    if (adam_args(d, bc1, bc2, e)) return PLUMB_EUSAGE;
    if (!n) return PLUMB_OK;
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_ADAMW);
    k_adamw_sparse<<<gpu_grid(n * (size_t)D, TPB), TPB, 0, gpu_stream(d, s)->s>>>(table, m, v, rows, grads, n, D, lr,
                                                                                   b1, b2, eps, wd, bc1, bc2);
    GPU_CHECK_LAUNCH(d, "k_adamw_sparse", e);
    return PLUMB_OK;
}

/* ---------------- gradient utilities ---------------- */

#include "gpu/train_sumsq.cuh"
__global__ void k_sumsq_blocks(const float *x, size_t n, size_t bl0, size_t nbl, double *part)
{
    sumsq_group(x, n, bl0, nbl, part);
}
static unsigned sumsq_grid(size_t nbl) { return (unsigned)((nbl + SQ_GROUP - 1) / SQ_GROUP); }
#define ORDSUM_TPB 256
/* g_sumsq's rounds of 2^20 blocks each start on a group of the fast order */
static_assert(((size_t)1 << 20) % TRAIN_SUMSQ_GROUP == 0, "sumsq rounds cut a group");

/* block sums added to out[0]: in ascending block order (golden), or in
 * groups (GROUPED, fast); one block of ORDSUM_TPB */
template <int GROUPED> __global__ void k_sumsq_total(const double *part, size_t nbl, double *out)
{
    const double tot = GROUPED ? grouped_dsum(part, nbl, out[0]) : ordered_dsum(part, nbl, out[0]);
    if (threadIdx.x == 0) out[0] = tot;
}

static int g_sumsq(struct dev *d, dev_stream *s, const float *x, size_t n, double *out, plumb_err *e)
{
    NEED((x || n == 0) && out, "%s: sumsq: NULL argument", d->label);
    if (!n) return PLUMB_OK;
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_SUMSQ);
    struct dev_stream *st = gpu_stream(d, s);
    size_t nb = (n + SUMSQ_BLK - 1) / SUMSQ_BLK, round = (size_t)1 << 20;
    void *ws;
    int rc = tws_get(d, 0, (nb < round ? nb : round) * sizeof(double), &ws, e);
    if (rc) return rc;
    for (size_t b0 = 0; b0 < nb; b0 += round) {
        size_t k = nb - b0 < round ? nb - b0 : round;
        k_sumsq_blocks<<<sumsq_grid(k), SQ_TPB, 0, st->s>>>(x, n, b0, k, (double *)ws);
        GPU_CHECK_LAUNCH(d, "k_sumsq_blocks", e);
        if (is_golden(d))
            k_sumsq_total<0><<<1, ORDSUM_TPB, 0, st->s>>>((const double *)ws, k, out);
        else
            k_sumsq_total<1><<<1, ORDSUM_TPB, 0, st->s>>>((const double *)ws, k, out);
        GPU_CHECK_LAUNCH(d, "k_sumsq_total", e);
    }
    return PLUMB_OK;
}

/* x [n] *= mul, and *found_inf = 1 where any x was not finite. float4 a
 * step where x is 16-byte aligned, the last n % 4 values one by one; with
 * mul == 1 (no loss scale: bf16 and fp32) nothing is stored, since x * 1 is
 * x (a NaN's payload aside, and such a step is skipped): the pass reads the
 * gradients only. (One value a thread-step, stored always, took 383 us a
 * gpt2-124m step on an H100, 2026-12-06 08:24: 124 M values read and
 * written.) */
template <bool STORE>
__global__ void k_scale_check(float *x, size_t n, float mul, int *found_inf, int vec)
{
    int bad = 0;
    const size_t n4 = vec ? n / 4 : 0, stride = (size_t)gridDim.x * blockDim.x;
    const size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    float4 *x4 = (float4 *)x;
    for (size_t i = t; i < n4; i += stride) {
        const float4 v = x4[i];
        bad |= !isfinite(v.x);
        bad |= !isfinite(v.y);
        bad |= !isfinite(v.z);
        bad |= !isfinite(v.w);
        if (STORE) x4[i] = make_float4(v.x * mul, v.y * mul, v.z * mul, v.w * mul);
    }
    for (size_t i = 4 * n4 + t; i < n; i += stride) {
        const float v = x[i];
        bad |= !isfinite(v);
        if (STORE) x[i] = v * mul;
    }
    if (bad) *found_inf = 1; /* every writer stores the same value */
}

static int g_scale_check(struct dev *d, dev_stream *s, float *x, size_t n, float mul, int *found_inf, plumb_err *e)
{
    NEED((x || n == 0) && found_inf, "%s: scale_check: NULL argument", d->label);
    if (!n) return PLUMB_OK;
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_SCALE);
    const int vec = !((uintptr_t)x % 16);
    const unsigned g = gpu_grid(vec && n >= 4 ? n / 4 : n, TPB);
    if (mul == 1.0f) k_scale_check<false><<<g, TPB, 0, gpu_stream(d, s)->s>>>(x, n, mul, found_inf, vec);
    else k_scale_check<true><<<g, TPB, 0, gpu_stream(d, s)->s>>>(x, n, mul, found_inf, vec);
    GPU_CHECK_LAUNCH(d, "k_scale_check", e);
    return PLUMB_OK;
}

/* found_of_sumsq (dev/train_ops.h): one thread */
__global__ void k_found_of_sumsq(const double *sumsq, int *found_inf)
{
    if (!isfinite(*sumsq)) *found_inf = 1;
}

static int g_found_of_sumsq(struct dev *d, dev_stream *s, const double *sumsq, int *found_inf, plumb_err *e)
{
    NEED(sumsq && found_inf, "%s: found_of_sumsq: NULL argument", d->label);
    ENTER();
    k_found_of_sumsq<<<1, 1, 0, gpu_stream(d, s)->s>>>(sumsq, found_inf);
    GPU_CHECK_LAUNCH(d, "k_found_of_sumsq", e);
    return PLUMB_OK;
}

__global__ void k_affine(const float *x, float *y, size_t n, float a, float b)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = fmaf(a, x[i], b);
}

static int g_affine(struct dev *d, dev_stream *s, const float *x, float *y, size_t n, float a, float b, plumb_err *e)
{
    NEED((x && y) || n == 0, "%s: affine: NULL x or y", d->label);
    if (!n) return PLUMB_OK;
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_AFFINE);
    k_affine<<<gpu_grid(n, TPB), TPB, 0, gpu_stream(d, s)->s>>>(x, y, n, a, b);
    GPU_CHECK_LAUNCH(d, "k_affine", e);
    return PLUMB_OK;
}

__global__ void k_round(const float *x, float *y, size_t n, int rt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = tr_round(x[i], rt);
}

static int g_round_fp32(struct dev *d, dev_stream *s, const float *x, float *y, size_t n, dtype_t rt, plumb_err *e)
{
    NEED((x && y) || n == 0, "%s: round_fp32: NULL x or y", d->label);
    RT_OK("round_fp32");
    if (!n) return PLUMB_OK;
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_ROUND);
    struct dev_stream *st = gpu_stream(d, s);
    if (rt == DT_F32) {
        if (x != y) GPU_CHECK(d, cudaMemcpyAsync(y, x, n * sizeof(float), cudaMemcpyDeviceToDevice, st->s), e);
        return PLUMB_OK;
    }
    k_round<<<gpu_grid(n, TPB), TPB, 0, st->s>>>(x, y, n, (int)rt);
    GPU_CHECK_LAUNCH(d, "k_round", e);
    return PLUMB_OK;
}

/* weights16 (dev/train_ops.h): four values a thread where the four lie on
 * one side of every range boundary and x is 16-byte aligned (a float4 load,
 * then a float4 or an 8-byte store), one at a time otherwise; the range of
 * a value by binary search over the nr starts */
__device__ static inline int in_ranges(size_t i, const int64_t *r, int nr, size_t *next)
{
    int lo = 0, hi = nr - 1, j = -1;
    while (lo <= hi) {
        const int mid = (lo + hi) / 2;
        if ((size_t)r[2 * mid] <= i) j = mid, lo = mid + 1;
        else hi = mid - 1;
    }
    const int in = j >= 0 && i < (size_t)r[2 * j + 1];
    /* the first index past i where membership may change */
    *next = in ? (size_t)r[2 * j + 1] : j + 1 < nr ? (size_t)r[2 * (j + 1)] : (size_t)-1;
    return in;
}
__device__ static inline uint16_t to16(float v, int rt) { return rt == DT_BF16 ? f32_to_bf16(v) : f32_to_f16(v); }
__global__ void k_weights16(const float *__restrict__ x, float *__restrict__ y, uint16_t *__restrict__ y16, size_t n,
                            const int64_t *__restrict__ r, int nr, int rt, int vec)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t q = blockIdx.x * (size_t)blockDim.x + threadIdx.x; q * 4 < n; q += stride) {
        const size_t i0 = q * 4, i1 = i0 + 4 < n ? i0 + 4 : n;
        size_t next;
        const int in = in_ranges(i0, r, nr, &next);
        if (vec && i1 == i0 + 4 && next >= i1) {
            const float4 v = ((const float4 *)x)[q];
            if (in) {
                ((uint2 *)y16)[q] = make_uint2((uint32_t)to16(v.x, rt) | (uint32_t)to16(v.y, rt) << 16,
                                               (uint32_t)to16(v.z, rt) | (uint32_t)to16(v.w, rt) << 16);
            } else {
                ((float4 *)y)[q] = make_float4(tr_round(v.x, rt), tr_round(v.y, rt), tr_round(v.z, rt),
                                               tr_round(v.w, rt));
            }
            continue;
        }
        for (size_t i = i0; i < i1; i++) {
            if (in_ranges(i, r, nr, &next)) y16[i] = to16(x[i], rt);
            else y[i] = tr_round(x[i], rt);
        }
    }
}

static int g_weights16(struct dev *d, dev_stream *s, const float *x, float *y, uint16_t *y16, size_t n,
                       const int64_t *r, int nr, dtype_t rt, plumb_err *e)
{
    NEED((x && y && y16) || n == 0, "%s: weights16: NULL x, y or y16", d->label);
    NEED(nr >= 0 && (r || nr == 0), "%s: weights16: %d ranges without a range list", d->label, nr);
    NEED(rt == DT_BF16 || rt == DT_F16, "%s: weights16: %s (expected bf16 or fp16)", d->label, dtype_name(rt));
    if (!n) return PLUMB_OK;
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_ROUND);
    struct dev_stream *st = gpu_stream(d, s);
    const int vec = !((uintptr_t)x & 15) && !((uintptr_t)y & 15) && !((uintptr_t)y16 & 7);
    k_weights16<<<gpu_grid((n + 3) / 4, TPB), TPB, 0, st->s>>>(x, y, y16, n, r, nr, (int)rt, vec);
    GPU_CHECK_LAUNCH(d, "k_weights16", e);
    return PLUMB_OK;
}

/* ---------------- counts and decisions on the device ---------------- */

/* U = *rows_n clamped to [0, n_max] (the launch is sized for n_max) */
__device__ static inline size_t dn_rows(const int64_t *rows_n, size_t n_max)
{
    int64_t u = *rows_n;
    return u < 0 ? 0 : (size_t)u > n_max ? n_max : (size_t)u;
}

__global__ void k_sumsq_blocks_dn(const float *x, const int64_t *rows_n, size_t per, size_t n_max, size_t bl0,
                                  size_t nbl, double *part)
{
    sumsq_group(x, dn_rows(rows_n, n_max) * per, bl0, nbl, part);
}
/* the blocks of [bl0, bl0 + nbl) that hold elements, in sumsq's order
 * (GROUPED: fast) */
template <int GROUPED>
__global__ void k_sumsq_total_dn(const double *part, const int64_t *rows_n, size_t per, size_t n_max, size_t bl0,
                                 size_t nbl, double *out)
{
    size_t n = dn_rows(rows_n, n_max) * per, nb = (n + SUMSQ_BLK - 1) / SUMSQ_BLK;
    if (nb <= bl0) return;
    size_t k = nb - bl0 < nbl ? nb - bl0 : nbl;
    const double tot = GROUPED ? grouped_dsum(part, k, out[0]) : ordered_dsum(part, k, out[0]);
    if (threadIdx.x == 0) out[0] = tot;
}

static int g_sumsq_dn(struct dev *d, dev_stream *s, const float *x, const int64_t *rows_n, size_t per, size_t n_max,
                      double *out, plumb_err *e)
{
    NEED((x || n_max == 0) && out && rows_n, "%s: sumsq_dn: NULL argument", d->label);
    size_t nmax = n_max * per;
    if (!nmax) return PLUMB_OK;
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_SUMSQ);
    struct dev_stream *st = gpu_stream(d, s);
    size_t nb = (nmax + SUMSQ_BLK - 1) / SUMSQ_BLK, round = (size_t)1 << 20;
    void *ws;
    int rc = tws_get(d, 0, (nb < round ? nb : round) * sizeof(double), &ws, e);
    if (rc) return rc;
    for (size_t b0 = 0; b0 < nb; b0 += round) {
        size_t k = nb - b0 < round ? nb - b0 : round;
        k_sumsq_blocks_dn<<<sumsq_grid(k), SQ_TPB, 0, st->s>>>(x, rows_n, per, n_max, b0, k,
                                                                            (double *)ws);
        GPU_CHECK_LAUNCH(d, "k_sumsq_blocks_dn", e);
        if (is_golden(d))
            k_sumsq_total_dn<0><<<1, ORDSUM_TPB, 0, st->s>>>((const double *)ws, rows_n, per, n_max, b0, k, out);
        else
            k_sumsq_total_dn<1><<<1, ORDSUM_TPB, 0, st->s>>>((const double *)ws, rows_n, per, n_max, b0, k, out);
        GPU_CHECK_LAUNCH(d, "k_sumsq_total_dn", e);
    }
    return PLUMB_OK;
}

__global__ void k_scale_check_dn(float *x, const int64_t *rows_n, size_t per, size_t n_max, float mul, int *found_inf)
{
    size_t n = dn_rows(rows_n, n_max) * per;
    int bad = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float v = x[i];
        bad |= !isfinite(v);
        x[i] = v * mul;
    }
    if (bad) *found_inf = 1;
}

static int g_scale_check_dn(struct dev *d, dev_stream *s, float *x, const int64_t *rows_n, size_t per, size_t n_max,
                            float mul, int *found_inf, plumb_err *e)
{
    NEED((x || n_max == 0) && found_inf && rows_n, "%s: scale_check_dn: NULL argument", d->label);
    if (!n_max || !per) return PLUMB_OK;
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_SCALE);
    k_scale_check_dn<<<gpu_grid(n_max * per, TPB), TPB, 0, gpu_stream(d, s)->s>>>(x, rows_n, per, n_max, mul,
                                                                                   found_inf);
    GPU_CHECK_LAUNCH(d, "k_scale_check_dn", e);
    return PLUMB_OK;
}

__global__ void k_sgd_sparse_dn(float *table, const int64_t *rows, const float *grads, const int64_t *rows_n,
                                size_t n_max, int D, float lr, const int *skip)
{
    if (skip && *skip) return;
    size_t tot = dn_rows(rows_n, n_max) * (size_t)D;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < tot; i += (size_t)gridDim.x * blockDim.x) {
        size_t u = i / (size_t)D, k = i % (size_t)D;
        float *t = table + (size_t)rows[u] * D + k;
        *t = fmaf(-lr, grads[i], *t);
    }
}

static int g_sgd_sparse_dn(struct dev *d, dev_stream *s, float *table, const int64_t *rows, const float *grads,
                           const int64_t *rows_n, size_t n_max, int D, float lr, const int *skip, plumb_err *e)
{
    NEED(((table && rows && grads) || n_max == 0) && rows_n, "%s: sgd_sparse_dn: NULL argument", d->label);
    NEED(D > 0, "%s: sgd_sparse_dn: D=%d", d->label, D);
    if (!n_max) return PLUMB_OK;
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_SGD_SPARSE);
    k_sgd_sparse_dn<<<gpu_grid(n_max * (size_t)D, TPB), TPB, 0, gpu_stream(d, s)->s>>>(table, rows, grads, rows_n,
                                                                                        n_max, D, lr, skip);
    GPU_CHECK_LAUNCH(d, "k_sgd_sparse_dn", e);
    return PLUMB_OK;
}

__global__ void k_sgd_gated(float *w, const float *g, size_t n, float lr, float wd, const int *skip)
{
    if (skip && *skip) return;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        w[i] = wd == 0.0f ? fmaf(-lr, g[i], w[i]) : fmaf(-lr, fmaf(wd, w[i], g[i]), w[i]);
}

static int g_sgd_gated(struct dev *d, dev_stream *s, float *w, const float *g, size_t n, float lr, float wd,
                       const int *skip, plumb_err *e)
{
    NEED(w && g, "%s: sgd_gated: NULL w or g", d->label);
    if (!n) return PLUMB_OK;
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_SGD);
    k_sgd_gated<<<gpu_grid(n, TPB), TPB, 0, gpu_stream(d, s)->s>>>(w, g, n, lr, wd, skip);
    GPU_CHECK_LAUNCH(d, "k_sgd_gated", e);
    return PLUMB_OK;
}

__global__ void k_sparse_put_dn(float *table, const int64_t *rows, const float *vals, const int64_t *rows_n,
                                size_t n_max, int D, const int *when)
{
    if (when && !*when) return;
    size_t tot = dn_rows(rows_n, n_max) * (size_t)D;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < tot; i += (size_t)gridDim.x * blockDim.x) {
        size_t u = i / (size_t)D, k = i % (size_t)D;
        table[(size_t)rows[u] * D + k] = vals[i];
    }
}

static int g_sparse_put_dn(struct dev *d, dev_stream *s, float *table, const int64_t *rows, const float *vals,
                           const int64_t *rows_n, size_t n_max, int D, const int *when, plumb_err *e)
{
    NEED(((table && rows && vals) || n_max == 0) && rows_n, "%s: sparse_put_dn: NULL argument", d->label);
    NEED(D > 0, "%s: sparse_put_dn: D=%d (expected > 0)", d->label, D);
    if (!n_max) return PLUMB_OK;
    ENTER();
    tprof_scope prof_(gpu_stream(d, s), TP_SGD_SPARSE);
    /* gated (when): the put is rare (a skipped step) and every block first
     * reads the flag, so the grid is capped: ctr's 852 k-row list at the
     * full grid (53 k blocks that read the flag and leave) took 33 us of
     * each step on an H100 (2026-12-06 08:24). The grid-stride loop covers
     * the rest; each element is written once, so the bits are the same. */
    unsigned g = gpu_grid(n_max * (size_t)D, TPB);
    if (when && g > 1024) g = 1024;
    k_sparse_put_dn<<<g, TPB, 0, gpu_stream(d, s)->s>>>(table, rows, vals, rows_n, n_max, D, when);
    GPU_CHECK_LAUNCH(d, "k_sparse_put_dn", e);
    return PLUMB_OK;
}

/* host [na + nb bytes as 8-byte words] <- a [na], b [nb]: one thread a
 * word; the system fence makes the stores to host memory visible before
 * the kernel counts as complete for an event behind it */
__global__ void k_status_to_host(unsigned long long *host, const unsigned long long *a, int wa,
                                 const unsigned long long *b, int wb)
{
    int i = threadIdx.x;
    if (i < wa) host[i] = a[i];
    else if (i < wa + wb) host[i] = b[i - wa];
    __threadfence_system();
}

static int g_status_to_host(struct dev *d, dev_stream *s, void *host, const void *a, size_t na, const void *b,
                            size_t nb, plumb_err *e)
{
    NEED(host && (a || !na) && (b || !nb), "%s: status_to_host: NULL argument", d->label);
    NEED(na % 8 == 0 && nb % 8 == 0 && na + nb <= 256, "%s: status_to_host: %zu + %zu bytes (expected multiples of 8, "
         "at most 256 in all)", d->label, na, nb);
    NEED((uintptr_t)host % 8 == 0 && (uintptr_t)a % 8 == 0 && (uintptr_t)b % 8 == 0,
         "%s: status_to_host: an address not 8-byte aligned", d->label);
    if (!na && !nb) return PLUMB_OK;
    ENTER();
    const int wa = (int)(na / 8), wb = (int)(nb / 8);
    k_status_to_host<<<1, 32 * ((wa + wb + 31) / 32), 0, gpu_stream(d, s)->s>>>(
        (unsigned long long *)host, (const unsigned long long *)a, wa, (const unsigned long long *)b, wb);
    GPU_CHECK_LAUNCH(d, "k_status_to_host", e);
    return PLUMB_OK;
}

#if !defined(__HIP_DEVICE_COMPILE__)
const struct train_ops gpu_train_ops = {
    g_linear_fwd,   g_linear_bwd,  g_relu_fwd, g_relu_bwd,     g_embedding_fwd, g_embedding_bwd, g_sparse_coalesce,
    g_interact_fwd, g_interact_bwd, g_bce_logits, g_sigmoid,   g_sgd,           g_sgd_sparse,    g_adamw,
    g_adamw_sparse, g_sumsq,       g_scale_check, g_affine,    g_round_fp32,
    g_embedding_interact_fwd, g_embedding_bwd_sgd, g_linear_bwd_relu_in,
#if defined(PLUMB_HIP)
    /* no 16-bit rocBLAS path yet: mirrors would only add passes */
    NULL, NULL, NULL, NULL,
#else
    g_linear_fwd16, g_linear_bwd16, g_embedding_interact_fwd16, g_interact_bwd16,
#endif
    /* transformer ops (gpt): train_gpt_ops.cu */
    tg_encoder_fwd, tg_encoder_bwd, tg_layernorm_fwd, tg_layernorm_bwd, tg_matmul_fwd, tg_matmul_bwd,
    tg_attention_fwd, tg_attention_bwd, tg_residual_fwd, tg_classifier_fwd_bwd, tg_adamw_masked,
    /* vision ops (resnet): train_conv.cu, train_vision.cu */
    g_conv2d_fwd, g_conv2d_bwd_data, g_conv2d_bwd_filter, g_bn_stats, g_bn_mean, g_bn_var, g_bn_rstd, g_bn_apply,
    g_bn_bwd_stats, g_bn_bwd_data, g_bn_bwd_params, g_maxpool_fwd, g_maxpool_bwd, g_avgpool_fwd, g_avgpool_bwd, g_add,
    g_cls_xent,
    g_sgd_momentum,
    g_sumsq_dn, g_scale_check_dn, g_sgd_sparse_dn, g_sgd_gated,
    /* vision ops with 16-bit mirrors: train_conv.cu, train_vision.cu */
    g_conv2d_fwd16, g_conv2d_bwd_data16, g_conv2d_bwd_filter16, g_bn_apply16, g_bn_bwd_data16, g_bn_bwd_reduce,
    /* the fused sparse SGD's undo */
    g_sparse_put_dn,
    /* the queued step's outcome to the host */
    g_status_to_host,
    /* gpt with 16-bit activations: train_gpt_ops.cu, train_gpt_gemm.cu */
#if defined(PLUMB_HIP)
    /* no 16-bit rocBLAS GEMM: the fp32 ops between casts would only add passes */
    NULL, NULL, NULL, NULL, NULL, NULL, NULL,
#else
    tg_layernorm_fwd16, tg_layernorm_bwd16, tg_matmul_fwd16, tg_matmul_bwd16, tg_attention_fwd16, tg_attention_bwd16,
    tg_residual_fwd16,
#endif
    /* resnet with 16-bit activations: train_conv.cu, train_vision.cu (cuDNN or MIOpen, else our kernels) */
    g_conv2d_fwd16o, g_conv2d_bwd_data16o, g_conv2d_bwd_filter16o, g_bn_stats16o, g_bn_apply16o, g_bn_bwd_reduce16o,
    g_bn_bwd_data16o, g_add16o, g_maxpool_fwd16o, g_maxpool_bwd16o,
    /* the forward's BN statistics in one pass: train_vision.cu */
    g_bn_stats1p16o, g_bn_meanvar,
    /* the momentum SGD in one launch: train_gpt_ops.cu */
    tg_sgd_momentum_masked,
    /* gpt's residual add and LayerNorm in one pass (one of the 16-bit set: not on HIP) */
#if defined(PLUMB_HIP)
    NULL,
#else
    tg_residual_layernorm_fwd16,
#endif
    /* a projection block's two BNs in one pass: train_vision.cu */
    g_bn_apply2_16o,
    /* gpt's 16-bit weights in one pass */
    g_weights16,
    /* the found-inf flag from the norm */
    g_found_of_sumsq,
    /* gpt's classifier from 16-bit weights (one of the 16-bit set: not on HIP) */
#if defined(PLUMB_HIP)
    NULL,
#else
    tg_classifier_fwd_bwd16,
#endif
};
#endif
