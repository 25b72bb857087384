/* The numerics check (plumb numerics): every numerics op of the device's op
 * table against a float64 reference computed here, determinism (run twice;
 * golden on the cpu also with 1 and 2 threads), a SHA-256 digest of every
 * output, and, in golden mode on a non-cpu device, bitwise equality with the
 * cpu's golden outputs (the first differing element is named).
 *
 * Inputs come from Philox streams (purpose RNG_DATA, a = case number,
 * b = operand), so every device and host sees the same inputs.
 *
 * Error measures, per op (details.ops[]):
 *   max_rel  = max_i |y_i - r_i| / max(|r_i|, 1e-6 * max_j |r_j|)
 *   norm_rel = ||y - r||_2 / ||r||_2 (for sum: |y - r| / sum_i |x_i|, the
 *              error relative to the problem's condition)
 *   max_ulp  = max_i |y_i - r_i| / ulp_fp32(r_i) (casts: in ulps of the
 *              narrow type, against an independent float64 RNE rounding)
 *   criterion names the measure compared with threshold; see thr_* below. */
#include "accept/checks.h"
#include "core/dtype.h"
#include "core/hash.h"
#include "core/philox.h"
#include "dev/dev.h"
#include <float.h>
#include <omp.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum case_kind { K_GEMM, K_SUM, K_SOFTMAX, K_LAYERNORM, K_UNARY, K_CAST };

struct ncase {
    enum case_kind kind;
    const char *op;  /* row label */
    dtype_t dt;      /* gemm input type, cast narrow type; fp32 otherwise */
    int m, n, k;     /* gemm; softmax/layernorm rows=m cols=n; sum/unary/cast n */
    int ta, tb, acc; /* gemm transposes / accumulate */
    enum unary_op uop;
    size_t count;    /* sum/unary/cast element count */
};

/* Host-side inputs and outputs of one case. */
struct nbufs {
    void *in[4];
    size_t in_bytes[4];
    int nin;
    size_t out_bytes;  /* bytes of the output the op writes */
    size_t out_elems;
    size_t elem_size;  /* for naming the first differing element */
};

static const char *unary_name(enum unary_op op)
{
    static const char *n[] = {"exp", "log", "tanh", "erf", "gelu"};
    return n[op];
}

/* ---------------------------------------------------------------- inputs */

static float uni_at(uint32_t cs, uint32_t operand, uint64_t i)
{
    return philox_uniform_at(0x5eed, RNG_DATA, cs, operand, i);
}

static void fill_uniform(float *x, size_t n, uint32_t cs, uint32_t operand, float lo, float hi)
{
    int64_t nn = (int64_t)n;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < nn; i++) x[i] = lo + (hi - lo) * uni_at(cs, operand, (uint64_t)i);
}

static void fill_normal(float *x, size_t n, uint32_t cs, uint32_t operand, float mu, float sd)
{
    int64_t nb = (int64_t)((n + 3) / 4);
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t b = 0; b < nb; b++) {
        float z[4];
        philox_normal4(0x5eed, RNG_DATA, cs, operand, (uint64_t)b, z);
        for (int j = 0; j < 4 && (size_t)b * 4 + j < n; j++) x[b * 4 + j] = mu + sd * z[j];
    }
}

/* Values for the cast round trips of narrow type dt: a third random finite
 * fp32 bit patterns, a third log-uniform over the narrow type's range
 * (subnormals to overflow), a third exact ties between neighbours. */
static void fill_cast(float *x, size_t n, uint32_t cs, dtype_t dt)
{
    int64_t nn = (int64_t)n;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < nn; i++) {
        uint32_t w = philox_u32_at(0x5eed, RNG_DATA, cs, 0, (uint64_t)i);
        uint32_t w2 = philox_u32_at(0x5eed, RNG_DATA, cs, 1, (uint64_t)i);
        float v;
        if (i % 3 == 0) {
            v = bits_f32(w);
            if (!isfinite(v)) v = bits_f32(w & 0xbf7fffffu);
        } else if (i % 3 == 1) {
            int lo = dt == DT_F16 ? -27 : -136, hi = dt == DT_F16 ? 17 : 128;
            int ex = lo + (int)((w2 >> 8) % (uint32_t)(hi - lo));
            v = ldexpf(1.0f + philox_u01(w), ex);
            if (!isfinite(v)) v = FLT_MAX;
            if (w2 & 1) v = -v;
        } else {
            /* midpoint of two adjacent finite narrow values (exact in fp32) */
            uint16_t h = (uint16_t)(w & (dt == DT_F16 ? 0x7bfeu : 0x7f7eu));
            float a = dt == DT_F16 ? f16_to_f32(h) : bf16_to_f32(h);
            float b = dt == DT_F16 ? f16_to_f32((uint16_t)(h + 1)) : bf16_to_f32((uint16_t)(h + 1));
            v = a + (b - a) * 0.5f;
            if (w2 & 1) v = -v;
        }
        x[i] = v;
    }
}

/* ---------------------------------------------------------------- reference */

static double ulp32(double r)
{
    double a = fabs(r);
    if (a < FLT_MIN) return 0x1p-149;
    int ex;
    frexp(a, &ex);
    return ldexp(1.0, ex - 24);
}

/* RNE rounding of v to a binary format with `p` significant bits, minimum
 * normal exponent emin and largest finite value maxf (float64 arithmetic:
 * scaling by powers of two and rint are exact). */
static double round_ref(double v, int p, int emin, double maxf)
{
    if (v == 0 || !isfinite(v)) return v;
    int ex;
    frexp(fabs(v), &ex); /* |v| in [2^(ex-1), 2^ex) */
    int e = ex - 1 < emin ? emin : ex - 1;
    double q = ldexp(1.0, e - (p - 1));
    double r = rint(v / q) * q;
    if (fabs(r) > maxf) return v > 0 ? INFINITY : -INFINITY;
    return r;
}

struct errs {
    double max_rel, norm_rel, max_ulp;
};

static void elem_errors(const float *y, const double *r, size_t n, struct errs *E)
{
    double rmax = 0, se = 0, sr = 0, mr = 0, mu = 0;
    for (size_t i = 0; i < n; i++) rmax = fmax(rmax, fabs(r[i]));
    double floor_ = 1e-6 * rmax;
    if (floor_ == 0) floor_ = DBL_MIN;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)y[i] - r[i]);
        if (isnan(y[i]) != isnan(r[i])) d = INFINITY;
        else if (isnan(r[i])) d = 0;
        if (isinf(r[i]) && y[i] == r[i]) d = 0;
        se += d * d;
        sr += r[i] * r[i];
        mr = fmax(mr, d / fmax(fabs(r[i]), floor_));
        mu = fmax(mu, d / ulp32(r[i]));
    }
    E->max_rel = mr;
    E->norm_rel = sr > 0 ? sqrt(se / sr) : sqrt(se);
    E->max_ulp = mu;
}

static double unary_ref(enum unary_op op, double x)
{
    switch (op) {
    case UNARY_EXP: return exp(x);
    case UNARY_LOG: return log(x);
    case UNARY_TANH: return tanh(x);
    case UNARY_ERF: return erf(x);
    default: return x / (1 + exp(-2 * sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    }
}

/* ---------------------------------------------------------------- thresholds */

/* GEMM, norm-wise: fp32 accumulation over k <= 512 of exactly representable
 * inputs gives ~sqrt(k)*eps ~ 1.4e-6 on random data; 1e-5 leaves room.
 * bf16/fp16 inputs are compared against the float64 product of the same
 * (widened) inputs, so they share fp32's bound. TF32 (10-bit mantissa
 * inputs) gets 2e-3. Sum: |error| / sum|x| <= 1e-5. Softmax max_rel 1e-5
 * (the rounding of x - max costs up to |x - max| * 2^-24). Layernorm
 * norm-wise 1e-5. Unary functions in fp32 ulps: 4 (gelu 64: its tail
 * amplifies the rounding of the argument, see core/gmath.h). Casts: exact
 * (0 ulp of the narrow type). */
static double case_threshold(const struct ncase *c, int allow_tf32, const char **criterion)
{
    switch (c->kind) {
    case K_GEMM: *criterion = "norm_rel"; return (c->dt == DT_F32 && allow_tf32) ? 2e-3 : 1e-5;
    case K_SUM: *criterion = "norm_rel"; return 1e-5;
    case K_SOFTMAX: *criterion = "max_rel"; return 1e-5;
    case K_LAYERNORM: *criterion = "norm_rel"; return 1e-5;
    case K_UNARY: *criterion = "max_ulp"; return c->uop == UNARY_GELU ? 64 : 4;
    default: *criterion = "max_ulp"; return 0;
    }
}

/* ---------------------------------------------------------------- cases */

#define MAX_CASES 40

static int build_cases(struct ncase *cs, const char *level)
{
    int n = 0;
    int full = level && !strcmp(level, "full");
    static const int shapes[][3] = {{1, 1, 1}, {17, 33, 65}, {128, 96, 257}, {512, 512, 512}};
    dtype_t dts[] = {DT_F32, DT_BF16, DT_F16};
    for (int t = 0; t < 3; t++) {
        for (int s = 0; s < 4; s++)
            cs[n++] = (struct ncase){.kind = K_GEMM, .op = "gemm", .dt = dts[t], .m = shapes[s][0],
                                     .n = shapes[s][1], .k = shapes[s][2]};
        /* transposed operands and accumulation into C */
        cs[n++] = (struct ncase){.kind = K_GEMM, .op = "gemm_tn_acc", .dt = dts[t], .m = 40, .n = 24,
                                 .k = 72, .ta = 1, .tb = 1, .acc = 1};
        if (full)
            cs[n++] = (struct ncase){.kind = K_GEMM, .op = "gemm", .dt = dts[t], .m = 1000, .n = 1000, .k = 1000};
    }
    /* sums: 152 chunks of 2^16 and one of 38543 elements, and one short
     * chunk; both lengths are 15 mod 16, so the fast sum's tail loop runs
     * (src/dev/cpu_op_reduce.c), and in the short one 15 lost elements are
     * ~1e-3 of sum|x|, far above the threshold */
    cs[n++] = (struct ncase){.kind = K_SUM, .op = "sum", .dt = DT_F32, .count = 10000015};
    cs[n++] = (struct ncase){.kind = K_SUM, .op = "sum", .dt = DT_F32, .count = 4111};
    cs[n++] = (struct ncase){.kind = K_SOFTMAX, .op = "softmax", .dt = DT_F32, .m = 256, .n = 1000};
    cs[n++] = (struct ncase){.kind = K_LAYERNORM, .op = "layernorm", .dt = DT_F32, .m = 256, .n = 1024};
    for (int u = 0; u < UNARY_COUNT; u++)
        cs[n++] = (struct ncase){.kind = K_UNARY, .op = unary_name((enum unary_op)u), .dt = DT_F32,
                                 .uop = (enum unary_op)u, .count = (size_t)1 << 20};
    cs[n++] = (struct ncase){.kind = K_CAST, .op = "cast_roundtrip", .dt = DT_BF16, .count = (size_t)1 << 20};
    cs[n++] = (struct ncase){.kind = K_CAST, .op = "cast_roundtrip", .dt = DT_F16, .count = (size_t)1 << 20};
    return n;
}

static void shape_text(const struct ncase *c, char *buf, size_t n)
{
    switch (c->kind) {
    case K_GEMM:
        snprintf(buf, n, "%dx%dx%d%s%s%s", c->m, c->n, c->k, c->ta ? " A^T" : "", c->tb ? " B^T" : "",
                 c->acc ? " +C" : "");
        break;
    case K_SOFTMAX:
    case K_LAYERNORM: snprintf(buf, n, "%dx%d", c->m, c->n); break;
    default: snprintf(buf, n, "%zu", c->count); break;
    }
}

static void free_bufs(struct nbufs *b)
{
    for (int i = 0; i < b->nin; i++) free(b->in[i]);
    memset(b, 0, sizeof *b);
}

static void *xmalloc(size_t n) { return malloc(n ? n : 1); }

/* Host inputs of case number ci. */
static int make_inputs(const struct ncase *c, uint32_t ci, struct nbufs *b)
{
    memset(b, 0, sizeof *b);
    switch (c->kind) {
    case K_GEMM: {
        size_t na = (size_t)c->m * c->k, nb = (size_t)c->k * c->n, nc = (size_t)c->m * c->n;
        size_t es = dtype_size(c->dt);
        float *a = xmalloc(na * 4), *bb = xmalloc(nb * 4), *cc = xmalloc(nc * 4);
        fill_uniform(a, na, ci, 0, -1, 1);
        fill_uniform(bb, nb, ci, 1, -1, 1);
        fill_uniform(cc, nc, ci, 2, -1, 1);
        b->in[0] = xmalloc(na * es);
        b->in[1] = xmalloc(nb * es);
        for (size_t i = 0; i < na; i++) {
            if (c->dt == DT_F32) ((float *)b->in[0])[i] = a[i];
            else ((uint16_t *)b->in[0])[i] = c->dt == DT_BF16 ? f32_to_bf16(a[i]) : f32_to_f16(a[i]);
        }
        for (size_t i = 0; i < nb; i++) {
            if (c->dt == DT_F32) ((float *)b->in[1])[i] = bb[i];
            else ((uint16_t *)b->in[1])[i] = c->dt == DT_BF16 ? f32_to_bf16(bb[i]) : f32_to_f16(bb[i]);
        }
        b->in[2] = cc;
        b->in_bytes[0] = na * es;
        b->in_bytes[1] = nb * es;
        b->in_bytes[2] = nc * 4;
        b->nin = 3;
        free(a);
        free(bb);
        b->out_elems = nc;
        b->elem_size = 4;
        break;
    }
    case K_SUM: {
        float *x = xmalloc(c->count * 4);
        fill_uniform(x, c->count, ci, 0, -0.75f, 1.25f);
        b->in[0] = x;
        b->in_bytes[0] = c->count * 4;
        b->nin = 1;
        b->out_elems = 1;
        b->elem_size = 4;
        break;
    }
    case K_SOFTMAX: {
        size_t nn = (size_t)c->m * c->n;
        float *x = xmalloc(nn * 4);
        fill_normal(x, nn, ci, 0, 0, 4);
        b->in[0] = x;
        b->in_bytes[0] = nn * 4;
        b->nin = 1;
        b->out_elems = nn;
        b->elem_size = 4;
        break;
    }
    case K_LAYERNORM: {
        size_t nn = (size_t)c->m * c->n;
        float *x = xmalloc(nn * 4), *w = xmalloc((size_t)c->n * 4), *bb = xmalloc((size_t)c->n * 4);
        fill_normal(x, nn, ci, 0, 1, 2);
        fill_uniform(w, (size_t)c->n, ci, 1, 0.5f, 1.5f);
        fill_uniform(bb, (size_t)c->n, ci, 2, -0.5f, 0.5f);
        b->in[0] = x;
        b->in[1] = w;
        b->in[2] = bb;
        b->in_bytes[0] = nn * 4;
        b->in_bytes[1] = b->in_bytes[2] = (size_t)c->n * 4;
        b->nin = 3;
        b->out_elems = nn + 2 * (size_t)c->m; /* y, then mean and rstd */
        b->elem_size = 4;
        break;
    }
    case K_UNARY: {
        float *x = xmalloc(c->count * 4);
        switch (c->uop) {
        case UNARY_EXP: fill_uniform(x, c->count, ci, 0, -87.0f, 88.0f); break;
        case UNARY_LOG:
            fill_uniform(x, c->count, ci, 0, -85.0f, 85.0f);
            for (size_t i = 0; i < c->count; i++) x[i] = (float)exp((double)x[i]);
            break;
        case UNARY_TANH: fill_uniform(x, c->count, ci, 0, -10.0f, 10.0f); break;
        case UNARY_ERF: fill_uniform(x, c->count, ci, 0, -5.0f, 5.0f); break;
        default: fill_uniform(x, c->count, ci, 0, -5.0f, 5.0f); break;
        }
        b->in[0] = x;
        b->in_bytes[0] = c->count * 4;
        b->nin = 1;
        b->out_elems = c->count;
        b->elem_size = 4;
        break;
    }
    case K_CAST: {
        float *x = xmalloc(c->count * 4);
        fill_cast(x, c->count, ci, c->dt);
        b->in[0] = x;
        b->in_bytes[0] = c->count * 4;
        b->nin = 1;
        /* output: the narrow values (2 bytes each) then the widened fp32 */
        b->out_elems = c->count;
        b->elem_size = 2;
        break;
    }
    }
    b->out_bytes = c->kind == K_CAST ? c->count * 6 : b->out_elems * 4;
    return PLUMB_OK;
}

/* Runs case c on device d with host inputs b; *out (malloc'ed, out_bytes)
 * gets the output. */
static int run_case(struct dev *d, const struct ncase *c, const struct nbufs *b, void **out,
                    plumb_err *e)
{
    void *din[4] = {0}, *dout = NULL;
    int rc = PLUMB_OK;
    *out = xmalloc(b->out_bytes);
    if (!*out) return err_set(e, PLUMB_ENOMEM, "numerics: out of host memory");
    for (int i = 0; i < b->nin && !rc; i++) {
        rc = dev_alloc(d, b->in_bytes[i] ? b->in_bytes[i] : 4, &din[i], e);
        if (!rc) rc = dev_upload(d, din[i], b->in[i], b->in_bytes[i], e);
    }
    if (!rc) rc = dev_alloc(d, b->out_bytes, &dout, e);
    const struct dev_ops *o = d->ops;
    if (!rc) {
        int orc = PLUMB_OK;
        const char *missing = NULL;
        switch (c->kind) {
        case K_GEMM: {
            if (!o->gemm) { missing = "gemm"; break; }
            /* C starts as the third input so accumulation has something to add to */
            rc = dev_upload(d, dout, b->in[2], b->in_bytes[2], e);
            if (rc) break;
            struct gemm_desc g = {.m = c->m, .n = c->n, .k = c->k, .trans_a = c->ta, .trans_b = c->tb,
                                  .ab_type = c->dt, .a = din[0], .lda = c->ta ? c->m : c->k,
                                  .b = din[1], .ldb = c->tb ? c->k : c->n, .c = dout, .ldc = c->n,
                                  .accumulate = c->acc};
            orc = o->gemm(d, NULL, &g);
            break;
        }
        case K_SUM:
            if (!o->sum) { missing = "sum"; break; }
            orc = o->sum(d, NULL, din[0], c->count, dout);
            break;
        case K_SOFTMAX:
            if (!o->softmax) { missing = "softmax"; break; }
            orc = o->softmax(d, NULL, din[0], dout, c->m, c->n);
            break;
        case K_LAYERNORM: {
            if (!o->layernorm) { missing = "layernorm"; break; }
            float *y = dout;
            size_t nn = (size_t)c->m * c->n;
            orc = o->layernorm(d, NULL, din[0], din[1], din[2], y, y + nn, y + nn + c->m, c->m, c->n, 1e-5f);
            break;
        }
        case K_UNARY:
            if (!o->unary) { missing = "unary"; break; }
            orc = o->unary(d, NULL, c->uop, din[0], dout, c->count);
            break;
        case K_CAST: {
            if (!o->cast) { missing = "cast"; break; }
            uint16_t *narrow = dout;
            float *wide = (float *)((char *)dout + c->count * 2);
            orc = o->cast(d, NULL, din[0], DT_F32, narrow, c->dt, c->count);
            if (!orc) orc = o->cast(d, NULL, narrow, c->dt, wide, DT_F32, c->count);
            break;
        }
        }
        if (!rc && missing)
            rc = err_set(e, PLUMB_EUNSUPPORTED, "device %s has no %s op", d->label, missing);
        else if (!rc && orc)
            rc = err_set(e, orc, "%s (%s) failed on %s: %s", c->op, dtype_name(c->dt), d->label, err_code_name(orc));
    }
    if (!rc) rc = dev_sync(d, e);
    if (!rc) rc = dev_download(d, *out, dout, b->out_bytes, e);
    for (int i = 0; i < b->nin; i++)
        if (din[i]) dev_free(d, din[i]);
    if (dout) dev_free(d, dout);
    if (rc) {
        free(*out);
        *out = NULL;
    }
    return rc;
}

/* float64 reference and the error measures of output y */
static void case_errors(const struct ncase *c, const struct nbufs *b, const void *yv, struct errs *E)
{
    const float *y = yv;
    switch (c->kind) {
    case K_GEMM: {
        size_t nc = (size_t)c->m * c->n;
        double *r = xmalloc(nc * sizeof *r);
        double *A = xmalloc((size_t)c->m * c->k * sizeof *A), *B = xmalloc((size_t)c->k * c->n * sizeof *B);
        /* widen the stored inputs exactly; logical A[i,p], B[p,j] */
        for (int i = 0; i < c->m; i++)
            for (int p = 0; p < c->k; p++) {
                size_t s = c->ta ? (size_t)p * c->m + i : (size_t)i * c->k + p;
                A[(size_t)i * c->k + p] = c->dt == DT_F32 ? ((float *)b->in[0])[s]
                                          : c->dt == DT_BF16 ? bf16_to_f32(((uint16_t *)b->in[0])[s])
                                                             : f16_to_f32(((uint16_t *)b->in[0])[s]);
            }
        for (int p = 0; p < c->k; p++)
            for (int j = 0; j < c->n; j++) {
                size_t s = c->tb ? (size_t)j * c->k + p : (size_t)p * c->n + j;
                B[(size_t)p * c->n + j] = c->dt == DT_F32 ? ((float *)b->in[1])[s]
                                          : c->dt == DT_BF16 ? bf16_to_f32(((uint16_t *)b->in[1])[s])
                                                             : f16_to_f32(((uint16_t *)b->in[1])[s]);
            }
        int64_t m = c->m;
#pragma omp parallel for schedule(static) if ((double)c->m * c->n * c->k > 1e6)
        for (int64_t i = 0; i < m; i++) {
            double *ri = r + (size_t)i * c->n;
            for (int j = 0; j < c->n; j++) ri[j] = c->acc ? ((float *)b->in[2])[(size_t)i * c->n + j] : 0.0;
            for (int p = 0; p < c->k; p++) {
                double a = A[(size_t)i * c->k + p];
                const double *bp = B + (size_t)p * c->n;
                for (int j = 0; j < c->n; j++) ri[j] += a * bp[j];
            }
        }
        elem_errors(y, r, nc, E);
        free(r);
        free(A);
        free(B);
        break;
    }
    case K_SUM: {
        const float *x = b->in[0];
        double s = 0, sa = 0;
        for (size_t i = 0; i < c->count; i++) {
            s += x[i];
            sa += fabs(x[i]);
        }
        double d = fabs((double)y[0] - s);
        E->max_rel = d / fabs(s);
        E->norm_rel = d / sa;
        E->max_ulp = d / ulp32(s);
        break;
    }
    case K_SOFTMAX: {
        size_t nn = (size_t)c->m * c->n;
        double *r = xmalloc(nn * sizeof *r);
        const float *x = b->in[0];
        for (int i = 0; i < c->m; i++) {
            const float *xi = x + (size_t)i * c->n;
            double mx = -INFINITY, s = 0;
            for (int j = 0; j < c->n; j++) mx = fmax(mx, xi[j]);
            for (int j = 0; j < c->n; j++) s += exp(xi[j] - mx);
            for (int j = 0; j < c->n; j++) r[(size_t)i * c->n + j] = exp(xi[j] - mx) / s;
        }
        elem_errors(y, r, nn, E);
        /* rows: relative error per element within its row's scale */
        free(r);
        break;
    }
    case K_LAYERNORM: {
        size_t nn = (size_t)c->m * c->n;
        double *r = xmalloc((nn + 2 * (size_t)c->m) * sizeof *r);
        const float *x = b->in[0], *w = b->in[1], *bb = b->in[2];
        for (int i = 0; i < c->m; i++) {
            const float *xi = x + (size_t)i * c->n;
            double mu = 0, var = 0;
            for (int j = 0; j < c->n; j++) mu += xi[j];
            mu /= c->n;
            for (int j = 0; j < c->n; j++) var += (xi[j] - mu) * (xi[j] - mu);
            var /= c->n;
            double rs = 1 / sqrt(var + (double)1e-5f);
            for (int j = 0; j < c->n; j++) r[(size_t)i * c->n + j] = (xi[j] - mu) * rs * w[j] + bb[j];
            r[nn + i] = mu;
            r[nn + c->m + i] = rs;
        }
        elem_errors(y, r, nn, E); /* y only; mean/rstd are checked for equality by digest */
        free(r);
        break;
    }
    case K_UNARY: {
        double *r = xmalloc(c->count * sizeof *r);
        const float *x = b->in[0];
        for (size_t i = 0; i < c->count; i++) r[i] = unary_ref(c->uop, x[i]);
        elem_errors(y, r, c->count, E);
        free(r);
        break;
    }
    case K_CAST: {
        const float *x = b->in[0];
        const uint16_t *narrow = yv;
        const float *wide = (const float *)((const char *)yv + c->count * 2);
        double mu = 0, mr = 0;
        int p = c->dt == DT_F16 ? 11 : 8, emin = c->dt == DT_F16 ? -14 : -126;
        double maxf = c->dt == DT_F16 ? 65504.0 : (double)bf16_to_f32(0x7f7f);
        for (size_t i = 0; i < c->count; i++) {
            double r = round_ref(x[i], p, emin, maxf);
            double back = c->dt == DT_F16 ? f16_to_f32(narrow[i]) : bf16_to_f32(narrow[i]);
            double d = (isinf(r) && back == r) ? 0 : fabs(back - r);
            if (wide[i] != (float)back && !(isnan(wide[i]) && isnan(back))) d = INFINITY;
            int ex;
            frexp(fabs(r), &ex);
            int e = ex - 1 < emin ? emin : ex - 1;
            double ulpn = ldexp(1.0, e - (p - 1));
            mu = fmax(mu, d / ulpn);
            /* relative error of the round trip within the narrow normal range */
            if (isfinite(r) && fabs(x[i]) >= ldexp(1.0, emin) && fabs(x[i]) <= maxf)
                mr = fmax(mr, fabs(back - x[i]) / fabs(x[i]));
        }
        E->max_ulp = mu;
        E->max_rel = mr;
        E->norm_rel = NAN;
        break;
    }
    }
}

static json_t *num_or_null(double v) { return isfinite(v) ? json_real(v) : json_null(); }

/* Index and description of the first element where two outputs differ. */
static int first_diff(const struct ncase *c, const struct nbufs *b, const void *x, const void *y,
                      char *buf, size_t n)
{
    size_t es = b->elem_size, cnt = b->out_bytes / es;
    for (size_t i = 0; i < cnt; i++) {
        if (memcmp((const char *)x + i * es, (const char *)y + i * es, es)) {
            if (es == 4) {
                float fx, fy;
                memcpy(&fx, (const char *)x + i * 4, 4);
                memcpy(&fy, (const char *)y + i * 4, 4);
                snprintf(buf, n, "%s %s: element %zu differs: %.9g (0x%08x) vs %.9g (0x%08x)", c->op,
                         dtype_name(c->dt), i, fx, f32_bits(fx), fy, f32_bits(fy));
            } else {
                uint16_t hx, hy;
                memcpy(&hx, (const char *)x + i * 2, 2);
                memcpy(&hy, (const char *)y + i * 2, 2);
                snprintf(buf, n, "%s %s: element %zu differs: 0x%04x vs 0x%04x", c->op, dtype_name(c->dt), i,
                         hx, hy);
            }
            return 1;
        }
    }
    snprintf(buf, n, "%s %s: outputs are equal", c->op, dtype_name(c->dt));
    return 0;
}

static int open_dev(const char *spec, enum numerics mode, int allow_tf32, int threads, struct dev **d,
                    plumb_err *e)
{
    int rc = dev_open_or_cpu(spec, d, e);
    if (rc) return rc;
    (*d)->threads = threads;
    rc = dev_set_numerics(*d, mode, allow_tf32, e);
    if (rc) {
        dev_close(*d);
        *d = NULL;
    }
    return rc;
}

int check_numerics_run(const struct check_ctx *ctx, const char *numerics, int allow_tf32,
                       struct check_result *r, plumb_err *e)
{
    const char *spec = ctx->device ? ctx->device : "cpu";
    if (!numerics) numerics = "golden";
    enum numerics mode;
    if (!strcmp(numerics, "golden")) mode = NUMERICS_GOLDEN;
    else if (!strcmp(numerics, "fast")) mode = NUMERICS_FAST;
    else return err_set(e, PLUMB_EUSAGE, "numerics: '%s' is not a numerics mode (expected fast or golden)", numerics);
    if (mode == NUMERICS_GOLDEN) allow_tf32 = 0;
    struct dev *d = NULL, *cpu = NULL, *cpu1 = NULL;
    int rc = open_dev(spec, mode, allow_tf32, ctx->threads, &d, e);
    if (rc) return rc;
    int is_cpu = !strcmp(d->be->name, "cpu");
    if (check_begin(r, "numerics", d->label)) {
        dev_close(d);
        return err_set(e, PLUMB_ENOMEM, "numerics: out of memory");
    }
    if (mode == NUMERICS_GOLDEN && !is_cpu) rc = open_dev("cpu", NUMERICS_GOLDEN, 0, ctx->threads, &cpu, e);
    /* golden on the cpu: the same bits with 1 and 2 threads */
    if (!rc && mode == NUMERICS_GOLDEN && is_cpu) rc = open_dev("cpu", NUMERICS_GOLDEN, 0, 1, &cpu1, e);
    if (rc) {
        dev_close(d);
        check_free(r);
        return rc;
    }

    struct ncase cs[MAX_CASES];
    int ncs = build_cases(cs, ctx->level);
    json_t *ops = json_array();
    int nfail = 0, nnondet = 0, nmismatch = 0;
    double worst_ratio = 0;
    char det_desc[512] = "";
    if (d->be->describe_determinism) d->be->describe_determinism(d, det_desc, sizeof det_desc);

    for (int ci = 0; ci < ncs && !rc; ci++) {
        const struct ncase *c = &cs[ci];
        struct nbufs b;
        make_inputs(c, (uint32_t)ci, &b);
        void *y = NULL, *y2 = NULL, *yt = NULL;
        rc = run_case(d, c, &b, &y, e);
        if (rc == PLUMB_EUNSUPPORTED) {
            /* a missing op is a failed check, not an error of the tool */
            check_set_status(r, CHECK_FAIL, "%s", e->msg);
            json_t *row = json_object();
            json_object_set_new(row, "op", json_string(c->op));
            json_object_set_new(row, "dtype", json_string(dtype_name(c->dt)));
            json_object_set_new(row, "status", json_string("fail"));
            json_object_set_new(row, "reason", json_string(e->msg));
            json_array_append_new(ops, row);
            nfail++;
            err_clear(e);
            rc = PLUMB_OK;
            free_bufs(&b);
            continue;
        }
        if (rc) {
            free_bufs(&b);
            break;
        }
        rc = run_case(d, c, &b, &y2, e);
        int deterministic = !rc && !memcmp(y, y2, b.out_bytes);
        int threads_ok = -1, cpu_ok = -1;
        char why[400] = "";
        if (!rc && cpu1) {
            /* 1 and 2 threads; the thread count of the main run (already run
             * twice) is not repeated */
            int main_t = d->threads > 0 ? d->threads : omp_get_max_threads();
            threads_ok = 1;
            for (int t = 1; t <= 2 && !rc && threads_ok; t++) {
                if (t == main_t) continue;
                cpu1->threads = t;
                free(yt);
                yt = NULL;
                rc = run_case(cpu1, c, &b, &yt, e);
                if (!rc) {
                    threads_ok = !memcmp(y, yt, b.out_bytes);
                    if (!threads_ok) first_diff(c, &b, y, yt, why, sizeof why);
                }
            }
        }
        if (!rc && cpu) {
            free(yt);
            yt = NULL;
            rc = run_case(cpu, c, &b, &yt, e);
            if (!rc) {
                cpu_ok = !memcmp(y, yt, b.out_bytes);
                if (!cpu_ok) first_diff(c, &b, y, yt, why, sizeof why);
            }
        }
        if (rc) {
            free(y);
            free(y2);
            free(yt);
            free_bufs(&b);
            break;
        }
        struct errs E = {NAN, NAN, NAN};
        case_errors(c, &b, y, &E);
        const char *crit;
        double thr = case_threshold(c, allow_tf32, &crit);
        double val = !strcmp(crit, "max_ulp") ? E.max_ulp : !strcmp(crit, "max_rel") ? E.max_rel : E.norm_rel;
        int acc_ok = val <= thr;
        int pass = acc_ok && deterministic && threads_ok != 0 && cpu_ok != 0;
        char digest[65];
        hash_sha256_hex(y, b.out_bytes, digest);
        char shape[64];
        shape_text(c, shape, sizeof shape);
        json_t *row = json_object();
        json_object_set_new(row, "op", json_string(c->op));
        json_object_set_new(row, "dtype", json_string(dtype_name(c->dt)));
        json_object_set_new(row, "shape", json_string(shape));
        json_object_set_new(row, "max_rel", num_or_null(E.max_rel));
        json_object_set_new(row, "norm_rel", num_or_null(E.norm_rel));
        json_object_set_new(row, "max_ulp", num_or_null(E.max_ulp));
        json_object_set_new(row, "criterion", json_string(crit));
        json_object_set_new(row, "threshold", json_real(thr));
        json_object_set_new(row, "digest", json_string(digest));
        json_object_set_new(row, "deterministic", json_boolean(deterministic));
        if (threads_ok >= 0) json_object_set_new(row, "threads_1_2_equal", json_boolean(threads_ok));
        if (cpu_ok >= 0) json_object_set_new(row, "cpu_equal", json_boolean(cpu_ok));
        json_object_set_new(row, "status", json_string(pass ? "pass" : "fail"));
        if (why[0]) json_object_set_new(row, "reason", json_string(why));
        json_array_append_new(ops, row);
        if (thr > 0 && val / thr > worst_ratio) worst_ratio = val / thr;
        if (!acc_ok) {
            nfail++;
            check_set_status(r, CHECK_FAIL, "%s %s %s: %s %.3g above threshold %.3g", c->op, dtype_name(c->dt),
                             shape, crit, val, thr);
        }
        if (!deterministic) {
            nnondet++;
            char w2[400];
            first_diff(c, &b, y, y2, w2, sizeof w2);
            check_set_status(r, CHECK_FAIL, "not deterministic: two runs differ: %s", w2);
        }
        if (threads_ok == 0) {
            nnondet++;
            check_set_status(r, CHECK_FAIL, "golden result depends on the thread count: %s", why);
        }
        if (cpu_ok == 0) {
            nmismatch++;
            check_set_status(r, CHECK_FAIL, "golden %s differs from the cpu: %s", d->label, why);
        }
        free(y);
        free(y2);
        free(yt);
        free_bufs(&b);
    }
    if (rc) {
        json_decref(ops);
        dev_close(d);
        if (cpu) dev_close(cpu);
        if (cpu1) dev_close(cpu1);
        check_free(r);
        return rc;
    }
    check_metric(r, "ops", (double)json_array_size(ops), "count");
    check_metric(r, "ops_over_threshold", nfail, "count");
    check_metric(r, "ops_not_deterministic", nnondet, "count");
    if (cpu) check_metric(r, "ops_differing_from_cpu", nmismatch, "count");
    check_metric(r, "worst_error_to_threshold", worst_ratio, "ratio");
    check_threshold(r, "gemm_fp32_norm_rel", allow_tf32 ? 2e-3 : 1e-5);
    check_threshold(r, "gemm_bf16_norm_rel", 1e-5);
    check_threshold(r, "gemm_fp16_norm_rel", 1e-5);
    check_threshold(r, "sum_fp32_norm_rel", 1e-5);
    check_threshold(r, "softmax_fp32_max_rel", 1e-5);
    check_threshold(r, "layernorm_fp32_norm_rel", 1e-5);
    check_threshold(r, "unary_fp32_max_ulp", 4);
    check_threshold(r, "gelu_fp32_max_ulp", 64);
    check_threshold(r, "cast_max_ulp", 0);
    check_detail(r, "ops", ops);
    check_detail(r, "numerics", json_string(numerics));
    check_detail(r, "tf32", json_boolean(allow_tf32));
    check_detail(r, "threads", json_integer(ctx->threads));
    check_detail(r, "determinism_settings", json_string(det_desc));
    check_detail(r, "device_name", json_string(d->info.name));
    check_detail(r, "libs", json_string(d->info.libs));
    if (r->status == CHECK_PASS)
        check_set_status(r, CHECK_PASS, "%zu ops within thresholds and deterministic%s%s",
                         json_array_size(ops), cpu1 ? ", golden equal with 1 and 2 threads" : "",
                         cpu ? ", golden equal to the cpu" : "");
    check_end(r);
    dev_close(d);
    if (cpu) dev_close(cpu);
    if (cpu1) dev_close(cpu1);
    return PLUMB_OK;
}
