/* Causal attention through cuDNN's fused flash-attention engines, for gpt's
 * 16-bit activations (gpu/train_gpt_attn.cu picks it: PLUMB_GPT_ATTN).
 *
 * cuDNN has no fixed-function attention call: its engines are chosen for an
 * operation graph, built here with the backend API (gpu/cudnn_min.h, loaded
 * through conv_lib.cu's loader). The graphs are the ones cuDNN's runtime
 * fusion engines recognise as flash attention (cuDNN's "fused flash
 * attention fprop / bprop" patterns, causal, no dropout, no bias):
 *
 *   forward   S = Q K^T (fp32)  * scale  -> causal mask (row >= col, else -inf)
 *             m = max_j S, E = exp(S - m), l = sum_j E
 *             stats = m + log l  (our lse: natural log, [B, NH, T])
 *             O = (E / l) V
 *   backward  Dsum = sum_d dO O                           ([B, NH, T], fp32)
 *             P = exp(mask(Q K^T * scale - stats))
 *             dV = P^T dO,  dP = dO V^T,  dS = P (dP - Dsum) * scale
 *             dK = dS^T Q,  dQ = dS K
 *
 * Tensors are read and written in place: Q, K, V are the thirds of the 16-bit
 * qkv [B, T, 3C] (dims [B, NH, T, HS], strides [3CT, HS, 3C, 1]); O and dO
 * are [B, T, C]; dQ, dK, dV the thirds of dqkv. No copies.
 *
 * Determinism: with dQ written by its own product of dS and K (the graph
 * above), cuDNN's Hopper engines hold dS in a workspace and accumulate dQ
 * without atomics; the engine's numerical notes are read and an engine that
 * declares itself nondeterministic is passed over, so a result repeats run to
 * run. PLUMB_GPT_ATTN=cudnn-nd takes the other graph (dQ summed into an fp32
 * accumulator with atomics, then narrowed): faster, not reproducible bit for
 * bit, so never the default.
 *
 * A plan (graph, engine, execution plan) is made once per (device,
 * direction, shape, type) and kept until the device closes. */
#include "gpu/train_gpu.h"
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(PLUMB_HIP)
int attn_cudnn_fwd(struct dev *d, struct dev_stream *st, const uint16_t *qkv16, uint16_t *out16, float *lse, int B,
                   int T, int NH, int HS, dtype_t rt, plumb_err *e)
{
    (void)st, (void)qkv16, (void)out16, (void)lse, (void)B, (void)T, (void)NH, (void)HS, (void)rt;
    return gpu_err(e, PLUMB_EUNSUPPORTED, "%s: cuDNN's fused attention is CUDA's", d->label);
}
int attn_cudnn_bwd(struct dev *d, struct dev_stream *st, const uint16_t *qkv16, const uint16_t *out16,
                   const float *lse, const uint16_t *dout16, uint16_t *dqkv16, int B, int T, int NH, int HS,
                   dtype_t rt, int det, plumb_err *e)
{
    (void)st, (void)qkv16, (void)out16, (void)lse, (void)dout16, (void)dqkv16, (void)B, (void)T, (void)NH, (void)HS;
    (void)rt, (void)det;
    return gpu_err(e, PLUMB_EUNSUPPORTED, "%s: cuDNN's fused attention is CUDA's", d->label);
}
#else

/* the tensors the caller supplies, by unique id */
enum { U_Q = 1, U_K, U_V, U_O, U_STATS, U_DO, U_DQ, U_DK, U_DV, U_DSUM, U_DQACC, U_SCALE, U_NEGINF, U_ONE, U_VIRTUAL = 100 };
#define MAX_DESCS 128
#define MAX_OPS 48
#define MAX_CFGS 32
#define MAX_VPS 32
#define MAX_VP_PTRS 16

/* a finalized variant pack and the pointers it holds */
struct vpack {
    cdn_bdesc_t vp;
    int n;
    void *ptrs[MAX_VP_PTRS], *ws;
};
struct aplan {
    struct dev *d;
    int dir, B, T, NH, HS, rt, det; /* the key: dir 0 forward, 1 backward */
    cdn_bdesc_t descs[MAX_DESCS];   /* every descriptor made for it, destroyed with it */
    int nd;
    cdn_bdesc_t plan;
    int64_t ws, engine;
    int variant; /* graph_bwd's */
    int failed;  /* no plan: why[] says why, and the key is not tried again */
    char why[1024];
    float scale, neginf, one; /* the by-value scalars' host values (the variant pack points at them) */
    /* PLUMB_ATTN_VP_CACHE=1: finalized variant packs kept by their pointers
     * (a model's layers call with a fixed set each), slots reused in turn */
    struct vpack vps[MAX_VPS];
    int nvp, vp_next;
};

#define MAX_APLANS 64
static struct aplan *g_aplans[MAX_APLANS];
static int g_naplans;

/* building: the first failure is kept, the rest of the calls are skipped */
struct gb {
    const struct cudnn_fns *F;
    struct aplan *p;
    cdn_bdesc_t ops[MAX_OPS];
    int nops, st, vuid;
    char what[200];
};

static void gb_fail(struct gb *g, const char *what, cdn_status_t st)
{
    if (g->st) return;
    g->st = st ? st : -1;
    char last[160] = "";
    if (g->F->GetLastErrorString) g->F->GetLastErrorString(last, sizeof last);
    snprintf(g->what, sizeof g->what, "%s: status %d (%s)%s%s", what, (int)st, st ? g->F->GetErrorString(st) : "",
             last[0] ? ": " : "", last);
}
static cdn_bdesc_t mk(struct gb *g, int type)
{
    cdn_bdesc_t x = NULL;
    if (g->st) return NULL;
    if (g->p->nd == MAX_DESCS) {
        gb_fail(g, "too many cuDNN descriptors", 0);
        return NULL;
    }
    const cdn_status_t s = g->F->BackendCreateDescriptor(type, &x);
    if (s != CDN_STATUS_SUCCESS) {
        gb_fail(g, "cudnnBackendCreateDescriptor", s);
        return NULL;
    }
    g->p->descs[g->p->nd++] = x;
    return x;
}
static void set(struct gb *g, cdn_bdesc_t x, int name, int type, int64_t n, const void *v, const char *what)
{
    if (g->st) return;
    const cdn_status_t s = g->F->BackendSetAttribute(x, name, type, n, v);
    if (s != CDN_STATUS_SUCCESS) gb_fail(g, what, s);
}
static void fin(struct gb *g, cdn_bdesc_t x, const char *what)
{
    if (g->st) return;
    const cdn_status_t s = g->F->BackendFinalize(x);
    if (s != CDN_STATUS_SUCCESS) gb_fail(g, what, s);
}
static void setd(struct gb *g, cdn_bdesc_t x, int name, cdn_bdesc_t v, const char *what)
{
    set(g, x, name, CDN_TYPE_BACKEND_DESCRIPTOR, 1, &v, what);
}

/* a 4-d tensor: uid 0 takes the next virtual id */
static cdn_bdesc_t tensor(struct gb *g, int64_t uid, int dtype, const int64_t dims[4], const int64_t strides[4],
                          bool virt, bool by_value)
{
    cdn_bdesc_t t = mk(g, CDN_BK_TENSOR);
    if (!uid) uid = g->vuid++;
    const int64_t align = 16;
    set(g, t, CDN_A_TENSOR_DATA_TYPE, CDN_TYPE_DATA_TYPE, 1, &dtype, "tensor data type");
    set(g, t, CDN_A_TENSOR_DIMENSIONS, CDN_TYPE_INT64, 4, dims, "tensor dims");
    set(g, t, CDN_A_TENSOR_STRIDES, CDN_TYPE_INT64, 4, strides, "tensor strides");
    set(g, t, CDN_A_TENSOR_UNIQUE_ID, CDN_TYPE_INT64, 1, &uid, "tensor uid");
    set(g, t, CDN_A_TENSOR_BYTE_ALIGNMENT, CDN_TYPE_INT64, 1, &align, "tensor alignment");
    set(g, t, CDN_A_TENSOR_IS_VIRTUAL, CDN_TYPE_BOOLEAN, 1, &virt, "tensor virtual");
    set(g, t, CDN_A_TENSOR_IS_BY_VALUE, CDN_TYPE_BOOLEAN, 1, &by_value, "tensor by value");
    fin(g, t, "tensor finalize");
    return t;
}
/* a virtual tensor of x's shape */
struct shape {
    int64_t dims[4], strides[4];
};
static cdn_bdesc_t vt(struct gb *g, const struct shape *s, int dtype)
{
    return tensor(g, 0, dtype, s->dims, s->strides, true, false);
}
static void add_op(struct gb *g, cdn_bdesc_t op)
{
    if (g->st) return;
    if (g->nops == MAX_OPS) return gb_fail(g, "too many graph operations", 0);
    g->ops[g->nops++] = op;
}
/* y = mode(x, b, t); b, t may be NULL; axis >= 0 for GEN_INDEX */
static void pw(struct gb *g, int mode, int prec, cdn_bdesc_t x, cdn_bdesc_t b, cdn_bdesc_t t, cdn_bdesc_t y,
               int64_t axis = -1)
{
    cdn_bdesc_t pd = mk(g, CDN_BK_POINTWISE);
    set(g, pd, CDN_A_POINTWISE_MODE, CDN_TYPE_POINTWISE_MODE, 1, &mode, "pointwise mode");
    set(g, pd, CDN_A_POINTWISE_MATH_PREC, CDN_TYPE_DATA_TYPE, 1, &prec, "pointwise precision");
    if (axis >= 0) set(g, pd, CDN_A_POINTWISE_AXIS, CDN_TYPE_INT64, 1, &axis, "pointwise axis");
    fin(g, pd, "pointwise finalize");
    cdn_bdesc_t op = mk(g, CDN_BK_OP_POINTWISE);
    setd(g, op, CDN_A_OP_POINTWISE_PW_DESCRIPTOR, pd, "pointwise op descriptor");
    setd(g, op, CDN_A_OP_POINTWISE_XDESC, x, "pointwise x");
    if (b) setd(g, op, CDN_A_OP_POINTWISE_BDESC, b, "pointwise b");
    if (t) setd(g, op, CDN_A_OP_POINTWISE_TDESC, t, "pointwise t");
    setd(g, op, CDN_A_OP_POINTWISE_YDESC, y, "pointwise y");
    fin(g, op, "pointwise op finalize");
    add_op(g, op);
}
static void mm(struct gb *g, cdn_bdesc_t a, cdn_bdesc_t b, cdn_bdesc_t c)
{
    const int comp = CDN_DATA_FLOAT;
    cdn_bdesc_t md = mk(g, CDN_BK_MATMUL);
    set(g, md, CDN_A_MATMUL_COMP_TYPE, CDN_TYPE_DATA_TYPE, 1, &comp, "matmul compute type");
    fin(g, md, "matmul finalize");
    cdn_bdesc_t op = mk(g, CDN_BK_OP_MATMUL);
    setd(g, op, CDN_A_OP_MATMUL_ADESC, a, "matmul a");
    setd(g, op, CDN_A_OP_MATMUL_BDESC, b, "matmul b");
    setd(g, op, CDN_A_OP_MATMUL_CDESC, c, "matmul c");
    setd(g, op, CDN_A_OP_MATMUL_DESC, md, "matmul descriptor");
    fin(g, op, "matmul op finalize");
    add_op(g, op);
}
static void red(struct gb *g, int how, cdn_bdesc_t x, cdn_bdesc_t y)
{
    const int comp = CDN_DATA_FLOAT;
    cdn_bdesc_t rd = mk(g, CDN_BK_REDUCTION);
    set(g, rd, CDN_A_REDUCTION_OPERATOR, CDN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &how, "reduction operator");
    set(g, rd, CDN_A_REDUCTION_COMP_TYPE, CDN_TYPE_DATA_TYPE, 1, &comp, "reduction compute type");
    fin(g, rd, "reduction finalize");
    cdn_bdesc_t op = mk(g, CDN_BK_OP_REDUCTION);
    setd(g, op, CDN_A_OP_REDUCTION_XDESC, x, "reduction x");
    setd(g, op, CDN_A_OP_REDUCTION_YDESC, y, "reduction y");
    setd(g, op, CDN_A_OP_REDUCTION_DESC, rd, "reduction descriptor");
    fin(g, op, "reduction op finalize");
    add_op(g, op);
}
static void reshape(struct gb *g, cdn_bdesc_t x, cdn_bdesc_t y)
{
    cdn_bdesc_t op = mk(g, CDN_BK_OP_RESHAPE);
    setd(g, op, CDN_A_OP_RESHAPE_XDESC, x, "reshape x");
    setd(g, op, CDN_A_OP_RESHAPE_YDESC, y, "reshape y");
    fin(g, op, "reshape op finalize");
    add_op(g, op);
}

/* the shapes of one problem */
struct shapes {
    struct shape q, kt, v, vt, o, s, st, stat, k, dot, dqacc;
};
static void shapes_of(struct shapes *h, int64_t B, int64_t T, int64_t NH, int64_t HS)
{
    const int64_t C = NH * HS, C3 = 3 * C;
    *h = (struct shapes){};
    /* a third of qkv [B, T, 3C]: [B, NH, T, HS] */
    h->q = (struct shape){{B, NH, T, HS}, {T * C3, HS, C3, 1}};
    h->v = h->q;
    h->k = h->q;
    /* K^T (and V^T): [B, NH, HS, T], the same memory */
    h->kt = (struct shape){{B, NH, HS, T}, {T * C3, HS, 1, C3}};
    h->vt = h->kt;
    /* out, dout [B, T, C]: [B, NH, T, HS] */
    h->o = (struct shape){{B, NH, T, HS}, {T * C, HS, C, 1}};
    /* scores [B, NH, T, T] row-major, and their transposes */
    h->s = (struct shape){{B, NH, T, T}, {NH * T * T, T * T, T, 1}};
    h->st = (struct shape){{B, NH, T, T}, {NH * T * T, T * T, 1, T}};
    /* per row: [B, NH, T, 1] (the lse layout) */
    h->stat = (struct shape){{B, NH, T, 1}, {NH * T, T, 1, 1}};
    /* dO * O, as cuDNN's own graphs lay it out */
    h->dot = (struct shape){{B, NH, T, HS}, {NH * T * HS, T * HS, NH * HS, 1}};
    /* cudnn-nd's fp32 dQ accumulator: [B, NH, T, HS] contiguous */
    h->dqacc = (struct shape){{B, NH, T, HS}, {NH * T * HS, T * HS, HS, 1}};
}

static const struct shape one = {{1, 1, 1, 1}, {1, 1, 1, 1}};

/* the causal mask on x (scores): y = row >= col ? x : -inf */
static cdn_bdesc_t causal(struct gb *g, const struct shapes *h, cdn_bdesc_t x, cdn_bdesc_t neginf)
{
    cdn_bdesc_t row = vt(g, &h->s, CDN_DATA_INT32), col = vt(g, &h->s, CDN_DATA_INT32);
    pw(g, CDN_PW_GEN_INDEX, CDN_DATA_FLOAT, x, NULL, NULL, row, 2);
    pw(g, CDN_PW_GEN_INDEX, CDN_DATA_FLOAT, x, NULL, NULL, col, 3);
    cdn_bdesc_t keep = vt(g, &h->s, CDN_DATA_BOOLEAN);
    pw(g, CDN_PW_CMP_GE, CDN_DATA_BOOLEAN, row, col, NULL, keep);
    cdn_bdesc_t y = vt(g, &h->s, CDN_DATA_FLOAT);
    pw(g, CDN_PW_BINARY_SELECT, CDN_DATA_FLOAT, x, neginf, keep, y);
    return y;
}

static void graph_fwd(struct gb *g, const struct shapes *h, int io)
{
    const int F = CDN_DATA_FLOAT;
    cdn_bdesc_t q = tensor(g, U_Q, io, h->q.dims, h->q.strides, false, false);
    cdn_bdesc_t kt = tensor(g, U_K, io, h->kt.dims, h->kt.strides, false, false);
    cdn_bdesc_t v = tensor(g, U_V, io, h->v.dims, h->v.strides, false, false);
    cdn_bdesc_t o = tensor(g, U_O, io, h->o.dims, h->o.strides, false, false);
    cdn_bdesc_t stats = tensor(g, U_STATS, F, h->stat.dims, h->stat.strides, false, false);
    cdn_bdesc_t scale = tensor(g, U_SCALE, F, one.dims, one.strides, false, true);
    cdn_bdesc_t neginf = tensor(g, U_NEGINF, F, one.dims, one.strides, false, true);
    cdn_bdesc_t s = vt(g, &h->s, F), ss = vt(g, &h->s, F);
    mm(g, q, kt, s);
    pw(g, CDN_PW_MUL, F, s, scale, NULL, ss);
    cdn_bdesc_t sm = causal(g, h, ss, neginf);
    cdn_bdesc_t mx = vt(g, &h->stat, F), z = vt(g, &h->s, F), ex = vt(g, &h->s, F), sum = vt(g, &h->stat, F);
    /* P in the 16-bit type: the engines multiply P V with both operands of
     * one type (cuDNN 9.14 on an H100: "A and B need to have the same
     * datatype in the matmul" for an fp32 P) */
    cdn_bdesc_t lg = vt(g, &h->stat, F), p = vt(g, &h->s, io);
    red(g, CDN_REDUCE_MAX, sm, mx);
    pw(g, CDN_PW_SUB, F, sm, mx, NULL, z);
    pw(g, CDN_PW_EXP, F, z, NULL, NULL, ex);
    red(g, CDN_REDUCE_ADD, ex, sum);
    pw(g, CDN_PW_LOG, F, sum, NULL, NULL, lg);
    pw(g, CDN_PW_ADD, F, mx, lg, NULL, stats);
    pw(g, CDN_PW_DIV, F, ex, sum, NULL, p);
    mm(g, p, v, o);
}

/* variant 0: dS and K fp32 in dQ = dS K (as cuDNN's own frontend builds it);
 * 1: both in the 16-bit type (tried when no engine takes variant 0) */
static void graph_bwd(struct gb *g, const struct shapes *h, int io, int det, int variant)
{
    const int F = CDN_DATA_FLOAT;
    cdn_bdesc_t q = tensor(g, U_Q, io, h->q.dims, h->q.strides, false, false);
    cdn_bdesc_t kt = tensor(g, U_K, io, h->kt.dims, h->kt.strides, false, false);
    cdn_bdesc_t vt_ = tensor(g, U_V, io, h->vt.dims, h->vt.strides, false, false);
    cdn_bdesc_t o = tensor(g, U_O, io, h->o.dims, h->o.strides, false, false);
    cdn_bdesc_t dO = tensor(g, U_DO, io, h->o.dims, h->o.strides, false, false);
    cdn_bdesc_t stats = tensor(g, U_STATS, F, h->stat.dims, h->stat.strides, false, false);
    cdn_bdesc_t dsum = tensor(g, U_DSUM, F, h->stat.dims, h->stat.strides, false, false);
    cdn_bdesc_t dq = tensor(g, U_DQ, io, h->q.dims, h->q.strides, false, false);
    cdn_bdesc_t dk = tensor(g, U_DK, io, h->k.dims, h->k.strides, false, false);
    cdn_bdesc_t dv = tensor(g, U_DV, io, h->v.dims, h->v.strides, false, false);
    cdn_bdesc_t scale = tensor(g, U_SCALE, F, one.dims, one.strides, false, true);
    cdn_bdesc_t neginf = tensor(g, U_NEGINF, F, one.dims, one.strides, false, true);
    /* Dsum = (sum_d dO O) * 1: the engines know the chain with its scale
     * (the dropout scale's place; 1 without dropout) and the sum virtual */
    cdn_bdesc_t one_ = tensor(g, U_ONE, F, one.dims, one.strides, false, true);
    cdn_bdesc_t prod = vt(g, &h->dot, F), rsum = vt(g, &h->stat, F);
    pw(g, CDN_PW_MUL, F, dO, o, NULL, prod);
    red(g, CDN_REDUCE_ADD, prod, rsum);
    pw(g, CDN_PW_MUL, F, rsum, one_, NULL, dsum);
    /* P = exp(mask(Q K^T scale - stats)) */
    cdn_bdesc_t s = vt(g, &h->s, F), ss = vt(g, &h->s, F), sz = vt(g, &h->s, F);
    mm(g, q, kt, s);
    pw(g, CDN_PW_MUL, F, s, scale, NULL, ss);
    pw(g, CDN_PW_SUB, F, ss, stats, NULL, sz);
    cdn_bdesc_t sm = causal(g, h, sz, neginf);
    cdn_bdesc_t p = vt(g, &h->s, F);
    pw(g, CDN_PW_EXP, F, sm, NULL, NULL, p);
    /* dV = P^T dO */
    cdn_bdesc_t pt = vt(g, &h->st, io);
    reshape(g, p, pt);
    mm(g, pt, dO, dv);
    /* dS = P (dO V^T - Dsum) scale */
    const int dqt = variant ? io : F;
    cdn_bdesc_t dp = vt(g, &h->s, F), dpz = vt(g, &h->s, F), ds0 = vt(g, &h->s, F), ds = vt(g, &h->s, dqt);
    mm(g, dO, vt_, dp);
    pw(g, CDN_PW_SUB, F, dp, dsum, NULL, dpz);
    pw(g, CDN_PW_MUL, F, dpz, p, NULL, ds0);
    pw(g, CDN_PW_MUL, F, ds0, scale, NULL, ds);
    /* dK = dS^T Q */
    cdn_bdesc_t dst = vt(g, &h->st, io);
    reshape(g, ds, dst);
    mm(g, dst, q, dk);
    /* dQ = dS K */
    cdn_bdesc_t k = vt(g, &h->k, dqt);
    reshape(g, kt, k);
    if (det) {
        mm(g, ds, k, dq);
    } else {
        cdn_bdesc_t dqa = tensor(g, U_DQACC, F, h->dqacc.dims, h->dqacc.strides, false, false);
        mm(g, ds, k, dqa);
        pw(g, CDN_PW_IDENTITY, F, dqa, NULL, NULL, dq);
    }
}

static void aplan_destroy(const struct cudnn_fns *F, struct aplan *p)
{
    for (int i = 0; i < p->nvp; i++) {
        if (p->vps[i].vp) (void)F->BackendDestroyDescriptor(p->vps[i].vp);
        p->vps[i].vp = NULL;
    }
    p->nvp = p->vp_next = 0;
    for (int i = p->nd - 1; i >= 0; i--)
        if (p->descs[i]) (void)F->BackendDestroyDescriptor(p->descs[i]);
    p->nd = 0;
    p->plan = NULL;
    p->ws = 0;
    p->engine = -1;
}

/* the graph, then the first engine the heuristics offer that finalizes (and,
 * det, does not call itself nondeterministic) */
static int aplan_make(struct dev *d, const struct cudnn_fns *F, cdn_handle_t h, struct aplan *p, plumb_err *e)
{
    struct gb g;
    memset(&g, 0, sizeof g);
    g.F = F;
    g.p = p;
    g.vuid = U_VIRTUAL;
    struct shapes sh;
    shapes_of(&sh, p->B, p->T, p->NH, p->HS);
    const int io = p->rt == DT_F16 ? CDN_DATA_HALF : CDN_DATA_BFLOAT16;
    if (p->dir == 0) graph_fwd(&g, &sh, io);
    else graph_bwd(&g, &sh, io, p->det, p->variant);
    cdn_bdesc_t og = mk(&g, CDN_BK_OPERATIONGRAPH);
    set(&g, og, CDN_A_OPERATIONGRAPH_HANDLE, CDN_TYPE_HANDLE, 1, &h, "operation graph handle");
    set(&g, og, CDN_A_OPERATIONGRAPH_OPS, CDN_TYPE_BACKEND_DESCRIPTOR, g.nops, g.ops, "operation graph ops");
    fin(&g, og, "operation graph finalize");
    cdn_bdesc_t heur = mk(&g, CDN_BK_ENGINEHEUR);
    const int mode = CDN_HEUR_MODE_A;
    setd(&g, heur, CDN_A_ENGINEHEUR_OPERATION_GRAPH, og, "heuristics graph");
    set(&g, heur, CDN_A_ENGINEHEUR_MODE, CDN_TYPE_HEUR_MODE, 1, &mode, "heuristics mode");
    fin(&g, heur, "heuristics finalize");
    int64_t n = 0;
    if (!g.st) {
        const cdn_status_t s = F->BackendGetAttribute(heur, CDN_A_ENGINEHEUR_RESULTS, CDN_TYPE_BACKEND_DESCRIPTOR, 0,
                                                      &n, NULL);
        if (s != CDN_STATUS_SUCCESS) gb_fail(&g, "heuristics result count", s);
    }
    if (n > MAX_CFGS) n = MAX_CFGS;
    cdn_bdesc_t cfg[MAX_CFGS];
    for (int64_t i = 0; i < n; i++) cfg[i] = mk(&g, CDN_BK_ENGINECFG);
    int64_t got = 0;
    if (!g.st && n) {
        const cdn_status_t s = F->BackendGetAttribute(heur, CDN_A_ENGINEHEUR_RESULTS, CDN_TYPE_BACKEND_DESCRIPTOR, n,
                                                      &got, cfg);
        if (s != CDN_STATUS_SUCCESS) gb_fail(&g, "heuristics results", s);
    }
    char tried[160] = "";
    size_t used = 0;
    for (int64_t i = 0; i < got && !g.st && !p->plan; i++) {
        cdn_bdesc_t eng = mk(&g, CDN_BK_ENGINE);
        int64_t k = 0, idx = -1;
        int notes[16];
        int64_t nn = 0;
        if (g.st) break;
        if (F->BackendGetAttribute(cfg[i], CDN_A_ENGINECFG_ENGINE, CDN_TYPE_BACKEND_DESCRIPTOR, 1, &k, &eng) !=
                CDN_STATUS_SUCCESS ||
            F->BackendGetAttribute(eng, CDN_A_ENGINE_GLOBAL_INDEX, CDN_TYPE_INT64, 1, &k, &idx) != CDN_STATUS_SUCCESS ||
            F->BackendGetAttribute(eng, CDN_A_ENGINE_NUMERICAL_NOTE, CDN_TYPE_NUMERICAL_NOTE, 16, &nn, notes) !=
                CDN_STATUS_SUCCESS)
            continue;
        int nondet = 0;
        for (int64_t j = 0; j < nn && j < 16; j++) nondet |= notes[j] == CDN_NOTE_NONDETERMINISTIC;
        if (used < sizeof tried)
            used += (size_t)snprintf(tried + used, sizeof tried - used, "%s%lld%s", used ? " " : "", (long long)idx,
                                     nondet ? "(nondet)" : "");
        if (p->det && nondet) continue;
        cdn_bdesc_t plan = mk(&g, CDN_BK_EXECUTION_PLAN);
        if (g.st) break;
        if (F->BackendSetAttribute(plan, CDN_A_EXECUTION_PLAN_HANDLE, CDN_TYPE_HANDLE, 1, &h) != CDN_STATUS_SUCCESS ||
            F->BackendSetAttribute(plan, CDN_A_EXECUTION_PLAN_ENGINE_CONFIG, CDN_TYPE_BACKEND_DESCRIPTOR, 1,
                                   &cfg[i]) != CDN_STATUS_SUCCESS ||
            F->BackendFinalize(plan) != CDN_STATUS_SUCCESS)
            continue;
        int64_t ws = 0;
        if (F->BackendGetAttribute(plan, CDN_A_EXECUTION_PLAN_WORKSPACE_SIZE, CDN_TYPE_INT64, 1, &k, &ws) !=
            CDN_STATUS_SUCCESS)
            continue;
        p->plan = plan;
        p->ws = ws;
        p->engine = idx;
    }
    if (g.st)
        return gpu_err(e, PLUMB_EUNSUPPORTED, "%s: cuDNN fused attention %s graph (B%d T%d NH%d HS%d): %s", d->label,
                       p->dir ? "backward" : "forward", p->B, p->T, p->NH, p->HS, g.what);
    if (!p->plan)
        return gpu_err(e, PLUMB_EUNSUPPORTED,
                       "%s: cuDNN fused attention %s (B%d T%d NH%d HS%d%s): no engine of the %lld offered [%s] "
                       "finalizes%s",
                       d->label, p->dir ? "backward" : "forward", p->B, p->T, p->NH, p->HS,
                       p->dir && p->det ? ", deterministic" : "", (long long)got, tried,
                       p->dir && p->det ? " and calls itself deterministic" : "");
    if (getenv("PLUMB_ATTN_LOG"))
        fprintf(stderr, "plumb: cuDNN attention %s B%d T%d NH%d HS%d %s%s: engine %lld, workspace %lld bytes "
                        "(offered: %s)%s, cuDNN v%zu\n",
                p->dir ? "backward" : "forward", p->B, p->T, p->NH, p->HS, p->rt == DT_F16 ? "fp16" : "bf16",
                p->dir ? (p->det ? " deterministic" : " nondeterministic") : "", (long long)p->engine,
                (long long)p->ws, tried, p->variant ? ", dQ from 16-bit dS and K" : "", (size_t)F->GetVersion());
    return PLUMB_OK;
}

/* the plan of the key, made on first use; *out NULL with the error when it
 * cannot be made. A plan cuDNN refuses (PLUMB_EUNSUPPORTED) is kept as
 * refused, with its reason, so auto asks the heuristics once per shape; any
 * other failure is not kept, and a later call tries again. */
static int aplan_get(struct dev *d, const struct cudnn_fns *F, cdn_handle_t h, int dir, int B, int T, int NH, int HS,
                     dtype_t rt, int det, struct aplan **out, plumb_err *e)
{
    for (int i = 0; i < g_naplans; i++) {
        struct aplan *p = g_aplans[i];
        if (p->d == d && p->dir == dir && p->B == B && p->T == T && p->NH == NH && p->HS == HS && p->rt == (int)rt &&
            p->det == det) {
            if (p->failed) return gpu_err(e, PLUMB_EUNSUPPORTED, "%s", p->why);
            *out = p;
            return PLUMB_OK;
        }
    }
    *out = NULL;
    if (g_naplans == MAX_APLANS)
        return gpu_err(e, PLUMB_EINTERNAL, "%s: more than %d cuDNN attention plans", d->label, MAX_APLANS);
    struct aplan *p = (struct aplan *)calloc(1, sizeof *p);
    if (!p) return gpu_err(e, PLUMB_ENOMEM, "%s: out of host memory for a cuDNN attention plan", d->label);
    p->d = d, p->dir = dir, p->B = B, p->T = T, p->NH = NH, p->HS = HS, p->rt = (int)rt, p->det = det;
    p->scale = 1.0f / sqrtf((float)HS);
    /* cuDNN before 9.10 wants the lowest finite value as the mask's fill */
    p->neginf = F->GetVersion() >= 91000 ? -INFINITY : -FLT_MAX;
    p->one = 1.0f;
    int rc = aplan_make(d, F, h, p, e);
    if (rc == PLUMB_EUNSUPPORTED && dir == 1) {
        /* the backward's other form; the first one's reason is kept if both fail */
        plumb_err e2 = {};
        aplan_destroy(F, p);
        p->variant = 1;
        if (!(rc = aplan_make(d, F, h, p, &e2))) memset(e, 0, sizeof *e);
    }
    if (rc) {
        aplan_destroy(F, p);
        if (rc != PLUMB_EUNSUPPORTED) {
            free(p);
            return rc;
        }
        /* kept, marked: PLUMB_GPT_ATTN=auto asks once a call and must not
         * run the heuristics again each time */
        p->failed = 1;
        snprintf(p->why, sizeof p->why, "%s", e->msg);
    }
    g_aplans[g_naplans++] = p;
    if (p->failed) return PLUMB_EUNSUPPORTED;
    *out = p;
    return PLUMB_OK;
}

/* a finalized variant pack of (uids, ptrs, ws), or NULL with *s set */
static cdn_bdesc_t vpack_make(const struct cudnn_fns *F, int n, const int64_t *uids, void **ptrs, void *ws,
                              cdn_status_t *s, const char **what)
{
    cdn_bdesc_t vp = NULL;
    *what = "cudnnBackendCreateDescriptor(variant pack)";
    *s = F->BackendCreateDescriptor(CDN_BK_VARIANT_PACK, &vp);
    if (*s != CDN_STATUS_SUCCESS) return NULL;
    *what = "variant pack";
    *s = F->BackendSetAttribute(vp, CDN_A_VARIANT_PACK_UNIQUE_IDS, CDN_TYPE_INT64, n, uids);
    if (*s == CDN_STATUS_SUCCESS)
        *s = F->BackendSetAttribute(vp, CDN_A_VARIANT_PACK_DATA_POINTERS, CDN_TYPE_VOID_PTR, n, ptrs);
    if (*s == CDN_STATUS_SUCCESS)
        *s = F->BackendSetAttribute(vp, CDN_A_VARIANT_PACK_WORKSPACE, CDN_TYPE_VOID_PTR, 1, &ws);
    if (*s == CDN_STATUS_SUCCESS) *s = F->BackendFinalize(vp);
    if (*s == CDN_STATUS_SUCCESS) return vp;
    (void)F->BackendDestroyDescriptor(vp);
    return NULL;
}

/* PLUMB_ATTN_VP_CACHE=1 keeps each plan's variant packs by their pointers
 * (unset or 0: one made and destroyed a call, as before). Opt-in until a GPU
 * run times it: with cuDNN's attention an H100 kept the GPU busy 86.9% of a
 * gpt2-124m bench against 93.1% with our kernels (kprof, BENCHMARKS.md
 * 2026-12-06 17:43 UTC), and the per-call pack is one host cost to rule out. */
static int vp_cache_on(void)
{
    const char *v = getenv("PLUMB_ATTN_VP_CACHE");
    return v && !strcmp(v, "1");
}

static int run(struct dev *d, const struct cudnn_fns *F, cdn_handle_t h, struct aplan *p, int n, const int64_t *uids,
               void **ptrs, void *ws, plumb_err *e)
{
    cdn_status_t s = CDN_STATUS_SUCCESS;
    const char *what = "variant pack";
    cdn_bdesc_t vp = NULL;
    const int keep = vp_cache_on() && n <= MAX_VP_PTRS;
    for (int i = 0; keep && i < p->nvp && !vp; i++) {
        const struct vpack *c = &p->vps[i];
        if (c->n == n && c->ws == ws && !memcmp(c->ptrs, ptrs, (size_t)n * sizeof *ptrs)) vp = c->vp;
    }
    const int made = !vp;
    if (made) vp = vpack_make(F, n, uids, ptrs, ws, &s, &what);
    if (vp) {
        what = "cudnnBackendExecute";
        s = F->BackendExecute(h, p->plan, vp);
    }
    if (vp && made && keep && s == CDN_STATUS_SUCCESS) {
        int slot = p->nvp;
        if (p->nvp < MAX_VPS) p->nvp++;
        else slot = p->vp_next, p->vp_next = (p->vp_next + 1) % MAX_VPS;
        struct vpack *c = &p->vps[slot];
        if (c->vp) (void)F->BackendDestroyDescriptor(c->vp); /* the evicted one */
        c->vp = vp, c->n = n, c->ws = ws;
        memcpy(c->ptrs, ptrs, (size_t)n * sizeof *ptrs);
    } else if (vp && made) {
        (void)F->BackendDestroyDescriptor(vp);
    }
    if (s != CDN_STATUS_SUCCESS) {
        char last[160] = "";
        if (F->GetLastErrorString) F->GetLastErrorString(last, sizeof last);
        return gpu_err(e, PLUMB_EDEVICE, "%s: cuDNN attention %s (engine %lld): %s failed: status %d (%s)%s%s",
                       d->label, p->dir ? "backward" : "forward", (long long)p->engine, what, (int)s,
                       F->GetErrorString(s), last[0] ? ": " : "", last);
    }
    return PLUMB_OK;
}

/* every tensor is declared 16-byte aligned (the tensor-core engines need
 * it): the thirds of qkv start C values apart, so C must be a multiple of 8
 * and each base 16-byte aligned */
static int aligned(struct dev *d, int NH, int HS, const void *const *p, int n, plumb_err *e)
{
    int ok = (NH * HS) % 8 == 0 && HS % 8 == 0;
    for (int i = 0; i < n && ok; i++) ok = !((uintptr_t)p[i] % 16);
    return ok ? PLUMB_OK
              : gpu_err(e, PLUMB_EUNSUPPORTED, "%s: cuDNN fused attention needs 16-byte aligned rows and heads "
                                               "(NH %d x HS %d, HS a multiple of 8)", d->label, NH, HS);
}

int attn_cudnn_fwd(struct dev *d, struct dev_stream *st, const uint16_t *qkv16, uint16_t *out16, float *lse, int B,
                   int T, int NH, int HS, dtype_t rt, plumb_err *e)
{
    const void *ps[] = {qkv16, out16, lse};
    if (aligned(d, NH, HS, ps, 3, e)) return PLUMB_EUNSUPPORTED;
    const struct cudnn_fns *F;
    cdn_handle_t h;
    int rc = cudnn_graph_enter(d, st, &F, &h, e);
    if (rc) return rc;
    struct aplan *p;
    rc = aplan_get(d, F, h, 0, B, T, NH, HS, rt, 1, &p, e);
    void *ws = NULL;
    if (!rc && p->ws) rc = tws_get(d, 1, (size_t)p->ws, &ws, e);
    if (!rc) {
        const size_t C = (size_t)NH * HS;
        const int64_t uids[] = {U_Q, U_K, U_V, U_O, U_STATS, U_SCALE, U_NEGINF};
        void *ptrs[] = {(void *)qkv16, (void *)(qkv16 + C), (void *)(qkv16 + 2 * C), out16, lse, &p->scale, &p->neginf};
        rc = run(d, F, h, p, 7, uids, ptrs, ws, e);
    }
    cudnn_graph_leave();
    return rc;
}

int attn_cudnn_bwd(struct dev *d, struct dev_stream *st, const uint16_t *qkv16, const uint16_t *out16,
                   const float *lse, const uint16_t *dout16, uint16_t *dqkv16, int B, int T, int NH, int HS,
                   dtype_t rt, int det, plumb_err *e)
{
    const void *ps[] = {qkv16, out16, lse, dout16, dqkv16};
    if (aligned(d, NH, HS, ps, 5, e)) return PLUMB_EUNSUPPORTED;
    const struct cudnn_fns *F;
    cdn_handle_t h;
    int rc = cudnn_graph_enter(d, st, &F, &h, e);
    if (rc) return rc;
    struct aplan *p;
    rc = aplan_get(d, F, h, 1, B, T, NH, HS, rt, det, &p, e);
    /* slot 0: Dsum [B NH T] fp32, then (not det) the fp32 dQ accumulator
     * [B NH T HS]; slot 1: the engine's workspace */
    const size_t rows = (size_t)B * NH * T, acc = det ? 0 : rows * HS;
    void *w0 = NULL, *ws = NULL;
    if (!rc) rc = tws_get(d, 0, (rows + acc) * sizeof(float), &w0, e);
    if (!rc && p->ws) rc = tws_get(d, 1, (size_t)p->ws, &ws, e);
    if (!rc && !det)
        rc = gpu_check_(cudaMemsetAsync((float *)w0 + rows, 0, acc * sizeof(float), st->s), "cudaMemsetAsync(dQ acc)",
                        d->label, e);
    if (!rc) {
        const size_t C = (size_t)NH * HS;
        int64_t uids[] = {U_Q,  U_K,  U_V,     U_O,      U_DO,  U_STATS, U_DSUM,
                          U_DQ, U_DK, U_DV,    U_SCALE,  U_NEGINF, U_ONE, U_DQACC};
        void *ptrs[] = {(void *)qkv16, (void *)(qkv16 + C), (void *)(qkv16 + 2 * C), (void *)out16, (void *)dout16,
                        (void *)lse, w0, dqkv16, dqkv16 + C, dqkv16 + 2 * C, &p->scale, &p->neginf, &p->one,
                        (float *)w0 + rows};
        rc = run(d, F, h, p, det ? 13 : 14, uids, ptrs, ws, e);
    }
    cudnn_graph_leave();
    return rc;
}

/* conv_lib.cu's convlib_release, with the library's lock held and before the
 * device's handle goes: the device's plans */
void attn_cudnn_release(struct dev *d, const struct cudnn_fns *F)
{
    int k = 0;
    for (int i = 0; i < g_naplans; i++) {
        if (g_aplans[i]->d != d) {
            g_aplans[k++] = g_aplans[i];
            continue;
        }
        aplan_destroy(F, g_aplans[i]);
        free(g_aplans[i]);
    }
    g_naplans = k;
}
#endif
