/* The cpu backend's optional train ops (dev/train_ops.h, "fused" and the
 * 16-bit mirrors): each is the composition its definition names, made of the
 * cpu's own parts (cpu_train_ops), so the bits are those of the parts by
 * construction, in both modes. What the cpu gains is not speed but that the
 * model code behind these entries (src/models/ctr.c: the fused forward and
 * sparse SGD, the 16-bit-mirror GEMM operands, the fused ReLU backward) runs
 * on every machine, and that a GPU's versions can be compared with it.
 *
 * Mirrors on the cpu: a 16-bit mirror holds a tensor whose values are already
 * rounded to rt, so widening it to fp32 is exact and the fp32 op then sees
 * the same operands; a result the caller wants only as a mirror is computed
 * into fp32 scratch (rounded to rt by the op) and narrowed, which is exact
 * too. Padded mirrors ([rows, K rounded up to 8], zeros after K) are read
 * only in columns 0..K-1 and written with zeros after K. */
#include "dev/cpu_train.h"
#include "dev/dev.h"
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define NEED(cond, ...)                                                                  \
    do {                                                                                 \
        if (!(cond)) return err_set(e, PLUMB_EUSAGE, __VA_ARGS__);                       \
    } while (0)

static const struct train_ops *const P = &cpu_train_ops; /* the parts */

static int nthreads(struct dev *d) { return d && d->threads > 0 ? d->threads : omp_get_max_threads(); }
static size_t pad8(int k) { return ((size_t)k + 7) / 8 * 8; }

/* Grow-only scratch per calling thread, as in cpu_train_ops.c (one slot per
 * role, so a call holds several at once), freed when the thread exits. */
enum { FS_X, FS_DY, FS_DX, FS_Y, FS_ROWS, FS_GRADS, FS_N };
static __thread void *fs_ptr[FS_N];
static __thread size_t fs_cap[FS_N];
static pthread_key_t fs_key;
static pthread_once_t fs_once = PTHREAD_ONCE_INIT;
static void fs_free(void *unused)
{
    (void)unused;
    for (int i = 0; i < FS_N; i++) {
        free(fs_ptr[i]);
        fs_ptr[i] = NULL;
        fs_cap[i] = 0;
    }
}
static void fs_key_make(void) { (void)pthread_key_create(&fs_key, fs_free); }
static void *scratch(int slot, size_t bytes)
{
    if (bytes > fs_cap[slot]) {
        free(fs_ptr[slot]);
        fs_ptr[slot] = malloc(bytes);
        fs_cap[slot] = fs_ptr[slot] ? bytes : 0;
        (void)pthread_once(&fs_once, fs_key_make);
        (void)pthread_setspecific(fs_key, (void *)1);
    }
    return fs_ptr[slot];
}

static int rt16_ok(const char *op, dtype_t rt, plumb_err *e)
{
    if (rt != DT_BF16 && rt != DT_F16)
        return err_set(e, PLUMB_EUSAGE, "%s: rounding type %s is not bf16 or fp16 (16-bit mirrors)", op,
                       (unsigned)rt < 8 ? dtype_name(rt) : "?");
    return PLUMB_OK;
}

/* x [R, ld] 16-bit, columns 0..K-1 -> x32 [R, K] (exact widening) */
static void widen(const uint16_t *x16, size_t R, int K, size_t ld, float *x32, dtype_t rt, int nt)
{
#pragma omp parallel for num_threads(nt) schedule(static) if (R * (size_t)K > 262144)
    for (size_t r = 0; r < R; r++) {
        const uint16_t *s = x16 + r * ld;
        float *o = x32 + r * (size_t)K;
        if (rt == DT_BF16)
            for (int k = 0; k < K; k++) o[k] = bf16_to_f32(s[k]);
        else
            for (int k = 0; k < K; k++) o[k] = f16_to_f32(s[k]);
    }
}

/* x32 [R, K] (rt-rounded values) -> x16 [R, ld], zeros in columns K..ld-1 */
static void narrow(const float *x32, size_t R, int K, size_t ld, uint16_t *x16, dtype_t rt, int nt)
{
#pragma omp parallel for num_threads(nt) schedule(static) if (R * (size_t)K > 262144)
    for (size_t r = 0; r < R; r++) {
        const float *s = x32 + r * (size_t)K;
        uint16_t *o = x16 + r * ld;
        if (rt == DT_BF16)
            for (int k = 0; k < K; k++) o[k] = f32_to_bf16(s[k]);
        else
            for (int k = 0; k < K; k++) o[k] = f32_to_f16(s[k]);
        for (size_t k = (size_t)K; k < ld; k++) o[k] = 0;
    }
}

/* ---------------- fused embedding ops ---------------- */

int cpu_embedding_interact_fwd(struct dev *d, dev_stream *s, const float *table, const int64_t *off,
                               const uint32_t *idx, const float *bottom, float *emb, float *out, int B, int T,
                               int D, dtype_t rt, plumb_err *e)
{
    NEED(table && off && idx && bottom && emb && out, "embedding_interact_fwd: NULL argument");
    int rc = P->embedding_fwd(d, s, table, off, idx, emb, B, T, D, rt, e);
    return rc ? rc : P->interact_fwd(d, s, bottom, emb, out, B, T, D, rt, e);
}

int cpu_embedding_bwd_sgd(struct dev *d, dev_stream *s, const int64_t *off, const uint32_t *idx, const float *dout,
                          int B, int n_valid, int T, int D, float *table, float lr, int64_t *n_out,
                          const struct sgd_fused_out *out, plumb_err *e)
{
    NEED(off && idx && dout && table && n_out, "embedding_bwd_sgd: NULL argument");
    NEED(B > 0 && T > 0 && D > 0 && n_valid >= 0 && n_valid <= B,
         "embedding_bwd_sgd: bad shape B=%d n_valid=%d T=%d D=%d", B, n_valid, T, D);
    NEED(!(out && out->prev && !out->rows), "embedding_bwd_sgd: prev without rows");
    /* the sparse gradient in the caller's list or in scratch: [n_valid*T] rows, [n_valid*T, D] sums */
    const size_t n = (size_t)n_valid * T;
    int64_t *rows = out && out->rows ? out->rows : scratch(FS_ROWS, (n ? n : 1) * sizeof(int64_t));
    float *grads = out && out->sums ? out->sums : scratch(FS_GRADS, (n ? n : 1) * (size_t)D * sizeof(float));
    if (!rows || !grads) return err_set(e, PLUMB_ENOMEM, "embedding_bwd_sgd: out of memory (%zu rows)", n);
    int rc = P->embedding_bwd(d, s, off, idx, dout, B, n_valid, T, D, rows, grads, n_out, e);
    if (rc) return rc;
    const size_t U = (size_t)*n_out;
    /* the check of scale_check (times 1: every value, subnormals too, is unchanged) */
    if (out && out->found_inf && (rc = P->scale_check(d, s, grads, U * (size_t)D, 1.0f, out->found_inf, e))) return rc;
    if (out && out->prev)
        for (size_t u = 0; u < U; u++)
            memcpy(out->prev + u * (size_t)D, table + (size_t)rows[u] * D, (size_t)D * sizeof(float));
    return P->sgd_sparse(d, s, table, rows, grads, U, D, lr, e);
}

/* ---------------- 16-bit operand mirrors ---------------- */

int cpu_linear_fwd16(struct dev *d, dev_stream *s, const float *x, uint16_t *x16, const float *w, const uint16_t *w16,
                     const float *bias, float *y, uint16_t *y16, int B, int K, int N, int relu, dtype_t rt,
                     plumb_err *e)
{
    (void)w16; /* w is always given; its mirror holds the same values */
    NEED(w && (y || y16), "linear_fwd16: NULL w, or both y and y16");
    NEED(x || x16, "linear_fwd16: NULL x and x16");
    NEED(B > 0 && K > 0 && N > 0, "linear_fwd16: bad shape B=%d K=%d N=%d (expected > 0)", B, K, N);
    int rc = rt16_ok("linear_fwd16", rt, e);
    if (rc) return rc;
    const int nt = nthreads(d);
    const float *xf = x;
    if (!x) { /* mirror only: x16 is the padded mirror [B, pad8(K)] */
        float *xs = scratch(FS_X, (size_t)B * K * sizeof(float));
        if (!xs) return err_set(e, PLUMB_ENOMEM, "linear_fwd16: out of memory for x [%d, %d]", B, K);
        widen(x16, (size_t)B, K, pad8(K), xs, rt, nt);
        xf = xs;
    } else if (x16 && K % 8) {
        /* the padded mirror the backward of this layer reads: filled here */
        narrow(x, (size_t)B, K, pad8(K), x16, rt, nt);
    }
    float *yf = y;
    if (!y && !(yf = scratch(FS_Y, (size_t)B * N * sizeof(float))))
        return err_set(e, PLUMB_ENOMEM, "linear_fwd16: out of memory for y [%d, %d]", B, N);
    rc = P->linear_fwd(d, s, xf, w, bias, yf, B, K, N, relu, rt, e);
    if (!rc && y16) narrow(yf, (size_t)B, N, (size_t)N, y16, rt, nt);
    return rc;
}

int cpu_linear_bwd16(struct dev *d, dev_stream *s, const float *x, const uint16_t *x16, const float *w,
                     const uint16_t *w16, const float *y, float *dy, const uint16_t *dy16, float *dx, uint16_t *dx16,
                     float *dw, float *dbias, int B, int K, int N, int relu, dtype_t rt, int relu_in, float *dbias_x,
                     plumb_err *e)
{
    (void)w16;
    NEED(w && dw, "linear_bwd16: NULL w or dw");
    NEED(x || x16, "linear_bwd16: NULL x and x16");
    NEED(dy || (dy16 && !relu && !dbias),
         "linear_bwd16: dy NULL needs its mirror dy16, relu 0 and dbias NULL (dy is masked in place)");
    NEED(!relu || y, "linear_bwd16: relu needs the forward output y");
    NEED(!relu_in || dx || dx16, "linear_bwd16: relu_in needs dx or dx16");
    NEED(B > 0 && K > 0 && N > 0, "linear_bwd16: bad shape B=%d K=%d N=%d (expected > 0)", B, K, N);
    int rc = rt16_ok("linear_bwd16", rt, e);
    if (rc) return rc;
    const int nt = nthreads(d);
    const float *xf = x;
    if (!x) {
        float *xs = scratch(FS_X, (size_t)B * K * sizeof(float));
        if (!xs) return err_set(e, PLUMB_ENOMEM, "linear_bwd16: out of memory for x [%d, %d]", B, K);
        widen(x16, (size_t)B, K, pad8(K), xs, rt, nt);
        xf = xs;
    }
    float *dyf = dy;
    if (!dy) { /* relu 0 and no dbias: nothing is written to dy */
        if (!(dyf = scratch(FS_DY, (size_t)B * N * sizeof(float))))
            return err_set(e, PLUMB_ENOMEM, "linear_bwd16: out of memory for dy [%d, %d]", B, N);
        widen(dy16, (size_t)B, N, (size_t)N, dyf, rt, nt);
    }
    float *dxf = dx;
    if (!dx && dx16 && !(dxf = scratch(FS_DX, (size_t)B * K * sizeof(float))))
        return err_set(e, PLUMB_ENOMEM, "linear_bwd16: out of memory for dx [%d, %d]", B, K);
    rc = relu_in ? P->linear_bwd_relu_in(d, s, xf, w, y, dyf, dxf, dw, dbias, B, K, N, relu, rt, dbias_x, e)
                 : P->linear_bwd(d, s, xf, w, y, dyf, dxf, dw, dbias, B, K, N, relu, rt, e);
    /* dx's mirror: [B, K] next to an fp32 dx, [B, pad8(K)] when it is alone */
    if (!rc && dx16) narrow(dxf, (size_t)B, K, dx ? (size_t)K : pad8(K), dx16, rt, nt);
    return rc;
}

int cpu_embedding_interact_fwd16(struct dev *d, dev_stream *s, const float *table, const int64_t *off,
                                 const uint32_t *idx, const float *bottom, float *emb, float *out, uint16_t *out16,
                                 int ld16, int B, int T, int D, dtype_t rt, plumb_err *e)
{
    NEED(table && off && idx && bottom && emb && out16, "embedding_interact_fwd16: NULL argument");
    NEED(B > 0 && T > 0 && D > 0, "embedding_interact_fwd16: bad shape B=%d T=%d D=%d", B, T, D);
    const int F = T + 1, W = D + F * (F - 1) / 2;
    NEED(ld16 >= W, "embedding_interact_fwd16: ld16 %d < the output width %d", ld16, W);
    int rc = rt16_ok("embedding_interact_fwd16", rt, e);
    if (rc) return rc;
    float *o = out;
    if (!o && !(o = scratch(FS_Y, (size_t)B * W * sizeof(float))))
        return err_set(e, PLUMB_ENOMEM, "embedding_interact_fwd16: out of memory for [%d, %d]", B, W);
    rc = cpu_embedding_interact_fwd(d, s, table, off, idx, bottom, emb, o, B, T, D, rt, e);
    if (!rc) narrow(o, (size_t)B, W, (size_t)ld16, out16, rt, nthreads(d));
    return rc;
}

int cpu_interact_bwd16(struct dev *d, dev_stream *s, const float *bottom, const float *emb, const uint16_t *dout16,
                       int ldo, float *dbottom, float *demb, int B, int T, int D, dtype_t rt, plumb_err *e)
{
    NEED(bottom && emb && dout16 && dbottom && demb, "interact_bwd16: NULL argument");
    NEED(B > 0 && T > 0 && D > 0, "interact_bwd16: bad shape B=%d T=%d D=%d", B, T, D);
    const int F = T + 1, W = D + F * (F - 1) / 2;
    NEED(ldo >= W, "interact_bwd16: ldo %d < the gradient width %d", ldo, W);
    int rc = rt16_ok("interact_bwd16", rt, e);
    if (rc) return rc;
    float *g = scratch(FS_DY, (size_t)B * W * sizeof(float));
    if (!g) return err_set(e, PLUMB_ENOMEM, "interact_bwd16: out of memory for [%d, %d]", B, W);
    widen(dout16, (size_t)B, W, (size_t)ldo, g, rt, nthreads(d));
    return P->interact_bwd(d, s, bottom, emb, g, dbottom, demb, B, T, D, rt, e);
}
