/* GPU 2-D convolution (dev/train_ops.h conv2d_fwd / bwd_data / bwd_filter)
 * and the vision ops' workspace.
 *
 * Golden: one thread per output element evaluating dev/train_vision.h's
 * chain (the cpu backend's bits; slow by design).
 * Fast, in order of preference:
 *   1. the vendor library (conv_lib.cu): cuDNN on CUDA, MIOpen on HIP, both
 *      dlopen'ed, deterministic algorithms only, NHWC; bf16/fp16 data
 *      (rt-rounded, so the 16-bit copies are exact) with fp32 accumulation;
 *   2. our own implicit-GEMM kernels (below): 64x64 tiles, the im2col
 *      gather done while loading the tile, fp32 accumulation in a fixed
 *      k order; the weight gradient's long reduction is cut into fixed
 *      slices summed in slice order (no atomics).
 * PLUMB_CONV_LIB=none forces 2 (tests compare both paths). */
#include "gpu/train_gpu.h"
#include "dev/train_vision.h"
#include <stdlib.h>
#include <string.h>

#define NEED(cond, ...)                                                                  \
    do {                                                                                 \
        if (!(cond)) return gpu_err(e, PLUMB_EUSAGE, __VA_ARGS__);                       \
    } while (0)
#define TPB 256

/* ---------------- golden: one thread per output element ---------------- */

__global__ void k_conv_fwd_golden(struct train_conv g, const float *x, const float *w, float *y, size_t n, int rt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        int k = (int)(i % g.K);
        size_t pix = i / g.K;
        int q = (int)(pix % g.Q), p = (int)(pix / g.Q % g.P), nn = (int)(pix / ((size_t)g.P * g.Q));
        y[i] = tv_round(tv_conv_fwd_elem(&g, x, w, nn, p, q, k), rt);
    }
}
__global__ void k_conv_bwd_data_golden(struct train_conv g, const float *dy, const float *w, float *dx, size_t n,
                                       int rt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        int c = (int)(i % g.C);
        size_t pix = i / g.C;
        int ww = (int)(pix % g.W), h = (int)(pix / g.W % g.H), nn = (int)(pix / ((size_t)g.H * g.W));
        dx[i] = tv_round(tv_conv_bwd_data_elem(&g, dy, w, nn, h, ww, c), rt);
    }
}
__global__ void k_conv_bwd_filter_golden(struct train_conv g, const float *x, const float *dy, float *dw, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        int c = (int)(i % g.C);
        size_t t = i / g.C;
        int s = (int)(t % g.S), r = (int)(t / g.S % g.R), k = (int)(t / ((size_t)g.R * g.S));
        dw[i] = tv_conv_bwd_filter_elem(&g, x, dy, k, r, s, c);
    }
}

/* ---------------- fast: our implicit GEMM ---------------- */

/* C[Mg, Ng] = A[Mg, Kg] B[Kg, Ng] with A and B gathered from the tensors:
 *   IG_FWD:    m = (n,p,q), j = k, kk = (r,s,c): A = x at the window (0 in
 *              the padding), B = w[k, kk]; C -> y[m, k]
 *   IG_DATA:   m = (n,h,w), j = c, kk = (r,s,k): A = dy[n,p,q,k] where
 *              (h, w) is reached by (r, s), else 0; B = w[k,r,s,c]; C -> dx
 *   IG_FILTER: m = k, j = (r,s,c), kk = (n,p,q) in [k0, k1): A = dy[kk, k],
 *              B = x at the window of kk; C -> part[m, j]
 * 64x64 tiles, BK = 16, 256 threads of 4x4 outputs; each output is one fp32
 * fmaf chain over kk ascending. */
enum { IG_FWD = 0, IG_DATA = 1, IG_FILTER = 2 };
#define IG_BM 64
#define IG_BN 64
#define IG_BK 16

template <int MODE>
__device__ static inline float ig_a(const struct train_conv &g, const float *x, const float *dy, long m, long kk)
{
    if (MODE == IG_FWD) {
        int c = (int)(kk % g.C);
        long t = kk / g.C;
        int s = (int)(t % g.S), r = (int)(t / g.S);
        int q = (int)(m % g.Q);
        long u = m / g.Q;
        int p = (int)(u % g.P), n = (int)(u / g.P);
        int h = p * g.stride - g.pad + r, w = q * g.stride - g.pad + s;
        if (h < 0 || h >= g.H || w < 0 || w >= g.W) return 0.0f;
        return x[(((size_t)n * g.H + h) * g.W + w) * g.C + c];
    } else if (MODE == IG_DATA) {
        int k = (int)(kk % g.K);
        long t = kk / g.K;
        int s = (int)(t % g.S), r = (int)(t / g.S);
        int w = (int)(m % g.W);
        long u = m / g.W;
        int h = (int)(u % g.H), n = (int)(u / g.H);
        int p = tv_conv_out_of(h, r, g.stride, g.pad, g.P), q = tv_conv_out_of(w, s, g.stride, g.pad, g.Q);
        if (p < 0 || q < 0) return 0.0f;
        return dy[(((size_t)n * g.P + p) * g.Q + q) * g.K + k];
    } else {
        return dy[(size_t)kk * g.K + m];
    }
}
template <int MODE>
__device__ static inline float ig_b(const struct train_conv &g, const float *x, const float *w, long kk, long j)
{
    if (MODE == IG_FWD) {
        return w[(size_t)j * g.R * g.S * g.C + kk];
    } else if (MODE == IG_DATA) {
        int k = (int)(kk % g.K);
        long t = kk / g.K; /* r * S + s */
        return w[((size_t)k * g.R * g.S + t) * g.C + j];
    } else {
        int c = (int)(j % g.C);
        long t = j / g.C;
        int s = (int)(t % g.S), r = (int)(t / g.S);
        int q = (int)(kk % g.Q);
        long u = kk / g.Q;
        int p = (int)(u % g.P), n = (int)(u / g.P);
        int h = p * g.stride - g.pad + r, ww = q * g.stride - g.pad + s;
        if (h < 0 || h >= g.H || ww < 0 || ww >= g.W) return 0.0f;
        return x[(((size_t)n * g.H + h) * g.W + ww) * g.C + c];
    }
}

template <int MODE>
__global__ void __launch_bounds__(256) k_igemm(struct train_conv g, const float *x, const float *w, const float *dy,
                                               float *out, long Mg, long Ng, long k0, long k1, int rt)
{
    __shared__ float As[IG_BK][IG_BM + 4];
    __shared__ float Bs[IG_BK][IG_BN + 4];
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    /* rows on x (up to 2^31 - 1 blocks), columns on y (<= 65535) */
    const long m0 = (long)blockIdx.x * IG_BM, j0 = (long)blockIdx.y * IG_BN;
    float acc[4][4];
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++) acc[a][b] = 0.0f;
    for (long kt = k0; kt < k1; kt += IG_BK) {
        for (int l = tid; l < IG_BM * IG_BK; l += 256) { /* A tile [BK][BM], m fastest */
            int mi = l % IG_BM, ki = l / IG_BM;
            long m = m0 + mi, kk = kt + ki;
            As[ki][mi] = m < Mg && kk < k1 ? ig_a<MODE>(g, x, dy, m, kk) : 0.0f;
        }
        for (int l = tid; l < IG_BN * IG_BK; l += 256) { /* B tile [BK][BN], j fastest */
            int ji = l % IG_BN, ki = l / IG_BN;
            long j = j0 + ji, kk = kt + ki;
            Bs[ki][ji] = j < Ng && kk < k1 ? ig_b<MODE>(g, x, w, kk, j) : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int ki = 0; ki < IG_BK; ki++) {
            float av[4], bv[4];
            for (int a = 0; a < 4; a++) av[a] = As[ki][ty * 4 + a];
            for (int b = 0; b < 4; b++) bv[b] = Bs[ki][tx * 4 + b];
            for (int a = 0; a < 4; a++)
                for (int b = 0; b < 4; b++) acc[a][b] = fmaf(av[a], bv[b], acc[a][b]);
        }
        __syncthreads();
    }
    for (int a = 0; a < 4; a++) {
        long m = m0 + ty * 4 + a;
        if (m >= Mg) continue;
        for (int b = 0; b < 4; b++) {
            long j = j0 + tx * 4 + b;
            if (j < Ng) out[(size_t)m * Ng + j] = tv_round(acc[a][b], rt);
        }
    }
}

/* dw = sum of the nsl slice partials [nsl, n], in slice order */
__global__ void k_tv_sum_slices(const float *part, int nsl, size_t n, float *dw)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float s = part[i];
        for (int t = 1; t < nsl; t++) s += part[(size_t)t * n + i];
        dw[i] = s;
    }
}

/* rows of the weight gradient's reduction per slice */
#define IG_SLICE 8192

static dim3 ig_grid(long Mg, long Ng)
{
    return dim3((unsigned)((Mg + IG_BM - 1) / IG_BM), (unsigned)((Ng + IG_BN - 1) / IG_BN));
}

static int ig_fwd(struct dev *d, struct dev_stream *st, const struct train_conv *g, const float *x, const float *w,
                  float *y, int rt, plumb_err *e)
{
    long Mg = (long)g->N * g->P * g->Q, Ng = g->K, Kg = (long)g->R * g->S * g->C;
    k_igemm<IG_FWD><<<ig_grid(Mg, Ng), 256, 0, st->s>>>(*g, x, w, NULL, y, Mg, Ng, 0, Kg, rt);
    GPU_CHECK_LAUNCH(d, "k_igemm<fwd>", e);
    return PLUMB_OK;
}
static int ig_data(struct dev *d, struct dev_stream *st, const struct train_conv *g, const float *dy, const float *w,
                   float *dx, int rt, plumb_err *e)
{
    long Mg = (long)g->N * g->H * g->W, Ng = g->C, Kg = (long)g->R * g->S * g->K;
    k_igemm<IG_DATA><<<ig_grid(Mg, Ng), 256, 0, st->s>>>(*g, NULL, w, dy, dx, Mg, Ng, 0, Kg, rt);
    GPU_CHECK_LAUNCH(d, "k_igemm<data>", e);
    return PLUMB_OK;
}
static int ig_filter(struct dev *d, struct dev_stream *st, const struct train_conv *g, const float *x, const float *dy,
                     float *dw, plumb_err *e)
{
    long Mg = g->K, Ng = (long)g->R * g->S * g->C, Kg = (long)g->N * g->P * g->Q;
    int nsl = (int)((Kg + IG_SLICE - 1) / IG_SLICE);
    size_t n = (size_t)Mg * Ng;
    float *part = dw;
    if (nsl > 1) {
        void *ws;
        int rc = tvws_get(d, TVWS_PART, (size_t)nsl * n * sizeof(float), &ws, e);
        if (rc) return rc;
        part = (float *)ws;
    }
    for (int t = 0; t < nsl; t++) {
        long a = (long)t * IG_SLICE, b = a + IG_SLICE < Kg ? a + IG_SLICE : Kg;
        k_igemm<IG_FILTER><<<ig_grid(Mg, Ng), 256, 0, st->s>>>(*g, x, NULL, dy, part + (size_t)t * n, Mg, Ng, a, b,
                                                              DT_F32);
        GPU_CHECK_LAUNCH(d, "k_igemm<filter>", e);
    }
    if (nsl > 1) {
        k_tv_sum_slices<<<gpu_grid(n, TPB), TPB, 0, st->s>>>(part, nsl, n, dw);
        GPU_CHECK_LAUNCH(d, "k_tv_sum_slices", e);
    }
    return PLUMB_OK;
}

/* ---------------- 16-bit staging for the library path ---------------- */

__global__ void k_tv_to16(const float *x, uint16_t *y, size_t n, int rt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = to16_rt(x[i], rt);
}
__global__ void k_tv_from16(const uint16_t *x, float *y, size_t n, int rt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = from16_rt(x[i], rt);
}
/* 4 at a time: n4 quads, fp32 side 16-byte and 16-bit side 8-byte aligned */
__global__ void k_tv_to16x4(const float *x, uint16_t *y, size_t n4, int rt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
        float4 v = ((const float4 *)x)[i];
        ushort4 h;
        h.x = to16_rt(v.x, rt), h.y = to16_rt(v.y, rt), h.z = to16_rt(v.z, rt), h.w = to16_rt(v.w, rt);
        ((ushort4 *)y)[i] = h;
    }
}
__global__ void k_tv_from16x4(const uint16_t *x, float *y, size_t n4, int rt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
        ushort4 h = ((const ushort4 *)x)[i];
        ((float4 *)y)[i] = make_float4(from16_rt(h.x, rt), from16_rt(h.y, rt), from16_rt(h.z, rt), from16_rt(h.w, rt));
    }
}
static int quad_ok(const void *f32, const void *h16, size_t n)
{
    return n % 4 == 0 && !((uintptr_t)f32 & 15) && !((uintptr_t)h16 & 7);
}
/* y16 [n] = the rt values of y (rounded to nearest even; exact for rt values) */
static int narrow16(struct dev *d, struct dev_stream *st, const float *y, size_t n, uint16_t *y16, int rt, plumb_err *e)
{
    if (quad_ok(y, y16, n)) {
        k_tv_to16x4<<<gpu_grid(n / 4, TPB), TPB, 0, st->s>>>(y, y16, n / 4, rt);
        GPU_CHECK_LAUNCH(d, "k_tv_to16x4", e);
        return PLUMB_OK;
    }
    k_tv_to16<<<gpu_grid(n, TPB), TPB, 0, st->s>>>(y, y16, n, rt);
    GPU_CHECK_LAUNCH(d, "k_tv_to16", e);
    return PLUMB_OK;
}
/* ---------------- channel padding (the library path, C < 8) ----------------
 * cuDNN's NHWC tensor-core kernels want C a multiple of 8; an ImageNet
 * stem's 3 input channels got legacy kernels (resnet50 bf16/256 on an H100:
 * 1.83 ms forward and 1.18 ms weight gradient, about 16 TFLOP/s; BENCHMARKS.md
 * 2026-12-05). So where C < 8 the forward and the weight gradient run on
 * copies padded to 8 channels with zeros: x [rows, C] -> [rows, 8] (from fp32
 * x or 16-bit x16), w [K R S, C] -> [K R S, 8]; the padded channels add
 * exact zero products to every output, and the padded weight gradient's
 * first C channels are the gradient. PLUMB_CONV_PAD_C=0 runs C as it is. */
#define PADC 8
__global__ void k_pad_c8(const float *x, const uint16_t *x16, size_t rows, int C, uint16_t *y, int rt)
{
    for (size_t r = blockIdx.x * (size_t)blockDim.x + threadIdx.x; r < rows; r += (size_t)gridDim.x * blockDim.x) {
        uint32_t w[PADC / 2] = {0, 0, 0, 0};
        for (int c = 0; c < C; c++) {
            const uint32_t v = x ? to16_rt(x[r * C + c], rt) : x16[r * C + c];
            w[c / 2] |= v << (16 * (c % 2));
        }
        ((uint4 *)y)[r] = make_uint4(w[0], w[1], w[2], w[3]);
    }
}
/* dw [rows, C] fp32 = the first C channels of dw16 [rows, 8] */
__global__ void k_unpad_c8(const uint16_t *dw16, size_t rows, int C, float *dw, int rt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < rows * C; i += (size_t)gridDim.x * blockDim.x)
        dw[i] = from16_rt(dw16[(i / C) * PADC + i % C], rt);
}
/* 1: pad this geometry's channels; 0: not; PLUMB_EUSAGE for a bad
 * PLUMB_CONV_PAD_C (unset, "" or "1": on; "0": off) */
static int pad_wanted(struct dev *d, const struct train_conv *g, int *on, plumb_err *e)
{
    int rc = gpu_env_switch(d, "PLUMB_CONV_PAD_C", "C as it is", "C < 8 padded to 8 channels", on, e);
    *on = !rc && *on && g->C < PADC;
    return rc;
}
/* *xp: x (fp32) or x16 padded to 8 channels in slot; rows = N H W */
static int pad_c8(struct dev *d, struct dev_stream *st, const float *x, const uint16_t *x16, size_t rows, int C,
                  int slot, int rt, const uint16_t **xp, plumb_err *e)
{
    void *ws;
    int rc = tvws_get(d, slot, rows * PADC * sizeof(uint16_t), &ws, e);
    if (rc) return rc;
    k_pad_c8<<<gpu_grid(rows, TPB), TPB, 0, st->s>>>(x, x16, rows, C, (uint16_t *)ws, rt);
    GPU_CHECK_LAUNCH(d, "k_pad_c8", e);
    *xp = (const uint16_t *)ws;
    return PLUMB_OK;
}

/* ---------------- space-to-depth (the library path, stride 2, C <= 4) ----------------
 * A stride-2 R x S convolution over C channels is a stride-1 R' x S'
 * convolution (R' = ceil(R / 2), S' = ceil(S / 2), no padding) over the
 * input's 2 x 2 pixel blocks as 4 C channels (padded with zeros to Cs = 8 or
 * 16): x'[n, i, j, (2 a + b) C + c] = x[n, 2 i + a - pad, 2 j + b - pad, c]
 * (0 outside), w'[k, u, v, (2 a + b) C + c] = w[k, 2 u + a, 2 v + b, c] (0
 * past R, S), so y[n, p, q, k] sums the same products plus exact zeros. The
 * ImageNet stem (7 x 7 / 2, C 3) becomes 4 x 4 / 1 over 16 channels, which
 * cuDNN's tensor-core kernels take; padded to 8 channels as it is it ran at
 * about 17 TFLOP/s on an H100 (BENCHMARKS.md, 2026-12-06). The weight
 * gradient is w' 's gradient gathered back. On by default: resnet50 bf16/256
 * on an H100 took 45.20 ms a step with it against 46.23 without (the stem's
 * forward 0.72 ms retimed against 1.78; BENCHMARKS.md, 2026-12-06 06:12);
 * PLUMB_CONV_S2D=0 turns it off. The geometry and the three kernels:
 * gpu/conv_s2d.cuh. */
#include "gpu/conv_s2d.cuh"
/* 1: this geometry runs space-to-depth; PLUMB_EUSAGE for a bad PLUMB_CONV_S2D
 * (unset, "" or "1": on where it applies; "0": off) */
static int s2d_wanted(struct dev *d, const struct train_conv *g, int *on, plumb_err *e)
{
    int rc = gpu_env_switch(d, "PLUMB_CONV_S2D", "as it is", "stride 2 over C <= 4 as space-to-depth", on, e, 1);
    *on = !rc && *on && g->stride == 2 && g->C <= 4 && g->R >= 3 && g->S >= 3;
    return rc;
}
static int s2d_x(struct dev *d, struct dev_stream *st, const float *x, const uint16_t *x16, const struct train_conv *g,
                 const struct train_conv *gs, int rt, const uint16_t **out, plumb_err *e)
{
    const size_t npix = (size_t)gs->N * gs->H * gs->W;
    void *ws;
    int rc = tvws_get(d, TVWS_A16, npix * gs->C * sizeof(uint16_t), &ws, e);
    if (rc) return rc;
    k_s2d_x<<<gpu_grid(npix, TPB), TPB, 0, st->s>>>(x, x16, g->H, g->W, g->C, g->pad, npix, gs->H, gs->W, gs->C,
                                                   (uint16_t *)ws, rt);
    GPU_CHECK_LAUNCH(d, "k_s2d_x", e);
    *out = (const uint16_t *)ws;
    return PLUMB_OK;
}

/* *out = x16 when given (the caller's mirror), else a staging slot filled
 * from x (x NULL: an output slot, not filled) */
static int to16(struct dev *d, struct dev_stream *st, const float *x, const uint16_t *x16, size_t n, int slot,
                int rt, const uint16_t **out, plumb_err *e)
{
    if (x16) {
        *out = x16;
        return PLUMB_OK;
    }
    void *ws;
    int rc = tvws_get(d, slot, n * sizeof(uint16_t), &ws, e);
    if (rc) return rc;
    *out = (const uint16_t *)ws;
    return x ? narrow16(d, st, x, n, (uint16_t *)ws, rt, e) : PLUMB_OK;
}
static int from16(struct dev *d, struct dev_stream *st, const uint16_t *x, size_t n, float *y, int rt, plumb_err *e)
{
    if (quad_ok(y, x, n)) {
        k_tv_from16x4<<<gpu_grid(n / 4, TPB), TPB, 0, st->s>>>(x, y, n / 4, rt);
        GPU_CHECK_LAUNCH(d, "k_tv_from16x4", e);
        return PLUMB_OK;
    }
    k_tv_from16<<<gpu_grid(n, TPB), TPB, 0, st->s>>>(x, y, n, rt);
    GPU_CHECK_LAUNCH(d, "k_tv_from16", e);
    return PLUMB_OK;
}

/* ---------------- dispatch ---------------- */

static int lib_wanted(void)
{
    const char *v = getenv("PLUMB_CONV_LIB");
    return !(v && !strcmp(v, "none"));
}

static int check_geom(struct dev *d, const char *op, const struct train_conv *g, plumb_err *e)
{
    if (!g) return gpu_err(e, PLUMB_EUSAGE, "%s: %s: no geometry", d->label, op);
    /* the same message as the cpu's (src/dev/cpu_train_conv.c): the geometry that was refused */
    if (train_conv_valid(g))
        return gpu_err(e, PLUMB_EUSAGE,
                       "%s: %s: bad geometry N=%d H=%d W=%d C=%d K=%d window %dx%d stride %d pad %d output %dx%d "
                       "(expected sizes >= 1, pad >= 0, the window inside the padded image, the output "
                       "train_conv_set gives, tensors below 2^31 elements)",
                       d->label, op, g->N, g->H, g->W, g->C, g->K, g->R, g->S, g->stride, g->pad, g->P, g->Q);
    return PLUMB_OK;
}
#define RT_OK(op)                                                                        \
    NEED(rt == DT_F32 || rt == DT_BF16 || rt == DT_F16, "%s: %s: rounding type %d is not fp32, bf16 or fp16", \
         d->label, op, (int)rt)

/* the fp32 ops and their 16-bit-mirror forms (mirrors NULL: made here) */
static int conv_fwd_any(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x,
                        const uint16_t *xm, const float *w, const uint16_t *wm, float *y, dtype_t rt, plumb_err *e)
{
    int rc = check_geom(d, "conv2d_fwd", g, e);
    if (rc) return rc;
    rc = gpu_enter(d, e);
    if (rc) return rc;
    struct dev_stream *st = gpu_stream(d, s);
    size_t ny = (size_t)g->N * g->P * g->Q * g->K;
    if (d->numerics == NUMERICS_GOLDEN) {
        k_conv_fwd_golden<<<gpu_grid(ny, TPB), TPB, 0, st->s>>>(*g, x, w, y, ny, (int)rt);
        GPU_CHECK_LAUNCH(d, "k_conv_fwd_golden", e);
        return PLUMB_OK;
    }
    if (lib_wanted() && convlib_ok(d, rt)) {
        if (rt == DT_F32) {
            rc = convlib_run(d, st, CONVLIB_FWD, g, x, w, y, rt, e);
        } else {
            const uint16_t *x16, *w16, *y16;
            size_t nx = (size_t)g->N * g->H * g->W * g->C, nw = (size_t)g->K * g->R * g->S * g->C;
            rc = to16(d, st, x, xm, nx, TVWS_A16, (int)rt, &x16, e);
            if (!rc) rc = to16(d, st, w, wm, nw, TVWS_B16, (int)rt, &w16, e);
            if (!rc) rc = to16(d, st, NULL, NULL, ny, TVWS_C16, (int)rt, &y16, e);
            if (!rc) rc = convlib_run(d, st, CONVLIB_FWD, g, x16, w16, (void *)y16, rt, e);
            if (!rc) rc = from16(d, st, y16, ny, y, (int)rt, e);
        }
        if (rc != PLUMB_EUNSUPPORTED) return rc; /* else: no deterministic algorithm, our kernels */
    }
    return ig_fwd(d, st, g, x, w, y, (int)rt, e);
}

static int conv_data_any(struct dev *d, dev_stream *s, const struct train_conv *g, const float *dy,
                         const uint16_t *dym, const float *w, const uint16_t *wm, float *dx, dtype_t rt, plumb_err *e)
{
    int rc = check_geom(d, "conv2d_bwd_data", g, e);
    if (rc) return rc;
    rc = gpu_enter(d, e);
    if (rc) return rc;
    struct dev_stream *st = gpu_stream(d, s);
    size_t nx = (size_t)g->N * g->H * g->W * g->C;
    if (d->numerics == NUMERICS_GOLDEN) {
        k_conv_bwd_data_golden<<<gpu_grid(nx, TPB), TPB, 0, st->s>>>(*g, dy, w, dx, nx, (int)rt);
        GPU_CHECK_LAUNCH(d, "k_conv_bwd_data_golden", e);
        return PLUMB_OK;
    }
    if (lib_wanted() && convlib_ok(d, rt)) {
        if (rt == DT_F32) {
            rc = convlib_run(d, st, CONVLIB_DATA, g, dy, w, dx, rt, e);
        } else {
            const uint16_t *dy16, *w16, *dx16;
            size_t ny = (size_t)g->N * g->P * g->Q * g->K, nw = (size_t)g->K * g->R * g->S * g->C;
            rc = to16(d, st, dy, dym, ny, TVWS_A16, (int)rt, &dy16, e);
            if (!rc) rc = to16(d, st, w, wm, nw, TVWS_B16, (int)rt, &w16, e);
            if (!rc) rc = to16(d, st, NULL, NULL, nx, TVWS_C16, (int)rt, &dx16, e);
            if (!rc) rc = convlib_run(d, st, CONVLIB_DATA, g, dy16, w16, (void *)dx16, rt, e);
            if (!rc) rc = from16(d, st, dx16, nx, dx, (int)rt, e);
        }
        if (rc != PLUMB_EUNSUPPORTED) return rc;
    }
    return ig_data(d, st, g, dy, w, dx, (int)rt, e);
}

static int conv_filter_any(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x,
                           const uint16_t *xm, const float *dy, const uint16_t *dym, float *dw, dtype_t rt,
                           plumb_err *e)
{
    int rc = check_geom(d, "conv2d_bwd_filter", g, e);
    if (rc) return rc;
    rc = gpu_enter(d, e);
    if (rc) return rc;
    struct dev_stream *st = gpu_stream(d, s);
    size_t nw = (size_t)g->K * g->R * g->S * g->C;
    if (d->numerics == NUMERICS_GOLDEN) {
        k_conv_bwd_filter_golden<<<gpu_grid(nw, TPB), TPB, 0, st->s>>>(*g, x, dy, dw, nw);
        GPU_CHECK_LAUNCH(d, "k_conv_bwd_filter_golden", e);
        return PLUMB_OK;
    }
    if (lib_wanted() && convlib_ok(d, rt)) {
        if (rt == DT_F32) {
            rc = convlib_run(d, st, CONVLIB_FILTER, g, x, dy, dw, rt, e);
        } else {
            /* 16-bit operands; the library's dw is 16-bit too (as PyTorch's
             * autocast convolution's), widened into the fp32 gradient */
            const uint16_t *x16, *dy16, *dw16;
            size_t nx = (size_t)g->N * g->H * g->W * g->C, ny = (size_t)g->N * g->P * g->Q * g->K;
            rc = to16(d, st, x, xm, nx, TVWS_A16, (int)rt, &x16, e);
            if (!rc) rc = to16(d, st, dy, dym, ny, TVWS_B16, (int)rt, &dy16, e);
            if (!rc) rc = to16(d, st, NULL, NULL, nw, TVWS_C16, (int)rt, &dw16, e);
            if (!rc) rc = convlib_run(d, st, CONVLIB_FILTER, g, x16, dy16, (void *)dw16, rt, e);
            if (!rc) rc = from16(d, st, dw16, nw, dw, (int)rt, e);
        }
        if (rc != PLUMB_EUNSUPPORTED) return rc;
    }
    return ig_filter(d, st, g, x, dy, dw, e);
}

int g_conv2d_fwd(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x, const float *w, float *y,
                 dtype_t rt, plumb_err *e)
{
    NEED(x && w && y, "%s: conv2d_fwd: NULL x, w or y", d->label);
    RT_OK("conv2d_fwd");
    return conv_fwd_any(d, s, g, x, NULL, w, NULL, y, rt, e);
}
int g_conv2d_bwd_data(struct dev *d, dev_stream *s, const struct train_conv *g, const float *dy, const float *w,
                      float *dx, dtype_t rt, plumb_err *e)
{
    NEED(dy && w && dx, "%s: conv2d_bwd_data: NULL dy, w or dx", d->label);
    RT_OK("conv2d_bwd_data");
    return conv_data_any(d, s, g, dy, NULL, w, NULL, dx, rt, e);
}
int g_conv2d_bwd_filter(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x, const float *dy,
                        float *dw, dtype_t rt, plumb_err *e)
{
    NEED(x && dy && dw, "%s: conv2d_bwd_filter: NULL x, dy or dw", d->label);
    RT_OK("conv2d_bwd_filter");
    return conv_filter_any(d, s, g, x, NULL, dy, NULL, dw, rt, e);
}

/* 16-bit mirrors: the library path reads them instead of staging copies
 * (the same values, so the same results); every other path reads fp32 */
#define RT16_OK(op)                                                                      \
    NEED(rt == DT_BF16 || rt == DT_F16, "%s: %s: rounding type %d is not bf16 or fp16", d->label, op, (int)rt)
int g_conv2d_fwd16(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x, const uint16_t *x16,
                   const float *w, const uint16_t *w16, float *y, dtype_t rt, plumb_err *e)
{
    NEED(x && w && y, "%s: conv2d_fwd16: NULL x, w or y", d->label);
    RT16_OK("conv2d_fwd16");
    return conv_fwd_any(d, s, g, x, x16, w, w16, y, rt, e);
}
int g_conv2d_bwd_data16(struct dev *d, dev_stream *s, const struct train_conv *g, const float *dy,
                        const uint16_t *dy16, const float *w, const uint16_t *w16, float *dx, dtype_t rt,
                        plumb_err *e)
{
    NEED(dy && w && dx, "%s: conv2d_bwd_data16: NULL dy, w or dx", d->label);
    RT16_OK("conv2d_bwd_data16");
    return conv_data_any(d, s, g, dy, dy16, w, w16, dx, rt, e);
}
int g_conv2d_bwd_filter16(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x,
                          const uint16_t *x16, const float *dy, const uint16_t *dy16, float *dw, dtype_t rt,
                          plumb_err *e)
{
    NEED(x && dy && dw, "%s: conv2d_bwd_filter16: NULL x, dy or dw", d->label);
    RT16_OK("conv2d_bwd_filter16");
    return conv_filter_any(d, s, g, x, x16, dy, dy16, dw, rt, e);
}

/* ---------------- resnet with 16-bit activations ----------------
 * (dev/train_ops.h): the library reads the 16-bit tensors and writes the
 * 16-bit output itself (fp32 accumulation; no fp32 output, no conversion
 * pass); the weight gradient comes out 16-bit as in the mirror path and is
 * widened into the fp32 dw. Where the library cannot run (none loaded,
 * PLUMB_CONV_LIB=none, no deterministic algorithm for the shape), the
 * operands are widened into fp32 stand-ins for the fp32 op (our kernels),
 * whose rt-rounded output is narrowed: the fp32 op's values either way. */
/* fp32 stand-in [n] in slot from x16 (NULL x16: an output stand-in, not filled) */
static int stand_in(struct dev *d, struct dev_stream *st, const uint16_t *x16, size_t n, int slot, int rt, float **out,
                    plumb_err *e)
{
    void *ws;
    int rc = tvws_get(d, slot, n * sizeof(float), &ws, e);
    if (rc) return rc;
    *out = (float *)ws;
    return x16 ? from16(d, st, x16, n, *out, rt, e) : PLUMB_OK;
}
static int enter16(struct dev *d, const char *op, const struct train_conv *g, plumb_err *e)
{
    int rc = check_geom(d, op, g, e);
    return rc ? rc : gpu_enter(d, e);
}

int g_conv2d_fwd16o(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x, const uint16_t *x16,
                    const uint16_t *w16, uint16_t *y16, dtype_t rt, plumb_err *e)
{
    NEED((x || x16) && w16 && y16, "%s: conv2d_fwd16o: NULL x (and x16), w16 or y16", d->label);
    FAST16("conv2d_fwd16o");
    int rc = enter16(d, "conv2d_fwd16o", g, e);
    if (rc) return rc;
    struct dev_stream *st = gpu_stream(d, s);
    const size_t nx = (size_t)g->N * g->H * g->W * g->C, ny = (size_t)g->N * g->P * g->Q * g->K,
                 nw = (size_t)g->K * g->R * g->S * g->C;
    if (lib_wanted() && convlib_ok(d, rt)) {
        const uint16_t *xs = x16;
        int s2d = 0, pad = 0;
        if ((rc = s2d_wanted(d, g, &s2d, e))) return rc;
        if (s2d) { /* x and w space-to-depth: a stride-1 convolution */
            struct train_conv gs;
            s2d_geom(g, &gs);
            const size_t nws = (size_t)gs.K * gs.R * gs.S * gs.C;
            void *wsp;
            rc = s2d_x(d, st, x16 ? NULL : x, x16, g, &gs, (int)rt, &xs, e);
            if (!rc) rc = tvws_get(d, TVWS_B16, nws * sizeof(uint16_t), &wsp, e);
            if (!rc) {
                k_s2d_w<<<gpu_grid(nws, TPB), TPB, 0, st->s>>>(w16, g->R, g->S, g->C, nws, gs.R, gs.S, gs.C,
                                                               (uint16_t *)wsp);
                GPU_CHECK_LAUNCH(d, "k_s2d_w", e);
            }
            if (!rc) rc = convlib_run(d, st, CONVLIB_FWD, &gs, xs, wsp, y16, rt, e);
            if (rc != PLUMB_EUNSUPPORTED) return rc;
            xs = x16, rc = PLUMB_OK; /* no algorithm for the stride-1 shape: on as below */
        }
        if ((rc = pad_wanted(d, g, &pad, e))) return rc;
        if (pad) { /* x and w padded to 8 channels */
            struct train_conv gp = *g;
            gp.C = PADC;
            const uint16_t *wp;
            rc = pad_c8(d, st, x16 ? NULL : x, x16, (size_t)g->N * g->H * g->W, g->C, TVWS_A16, (int)rt, &xs, e);
            if (!rc) rc = pad_c8(d, st, NULL, w16, (size_t)g->K * g->R * g->S, g->C, TVWS_B16, (int)rt, &wp, e);
            if (!rc) rc = convlib_run(d, st, CONVLIB_FWD, &gp, xs, wp, y16, rt, e);
            if (rc != PLUMB_EUNSUPPORTED) return rc;
            xs = x16, rc = PLUMB_OK; /* no algorithm for the padded shape: the shape as it is */
        }
        if (!xs) rc = to16(d, st, x, NULL, nx, TVWS_A16, (int)rt, &xs, e); /* the network's input */
        if (!rc) rc = convlib_run(d, st, CONVLIB_FWD, g, xs, w16, y16, rt, e);
        if (rc != PLUMB_EUNSUPPORTED) return rc;
    }
    float *xf = (float *)x, *wf, *yf;
    rc = x16 ? stand_in(d, st, x16, nx, TVWS_A32, (int)rt, &xf, e) : PLUMB_OK;
    if (!rc) rc = stand_in(d, st, w16, nw, TVWS_B32, (int)rt, &wf, e);
    if (!rc) rc = stand_in(d, st, NULL, ny, TVWS_C32, (int)rt, &yf, e);
    if (!rc) rc = ig_fwd(d, st, g, xf, wf, yf, (int)rt, e);
    if (!rc) rc = narrow16(d, st, yf, ny, y16, (int)rt, e);
    return rc;
}

int g_conv2d_bwd_data16o(struct dev *d, dev_stream *s, const struct train_conv *g, const uint16_t *dy16,
                         const uint16_t *w16, uint16_t *dx16, dtype_t rt, plumb_err *e)
{
    NEED(dy16 && w16 && dx16, "%s: conv2d_bwd_data16o: NULL dy16, w16 or dx16", d->label);
    FAST16("conv2d_bwd_data16o");
    int rc = enter16(d, "conv2d_bwd_data16o", g, e);
    if (rc) return rc;
    struct dev_stream *st = gpu_stream(d, s);
    const size_t nx = (size_t)g->N * g->H * g->W * g->C, ny = (size_t)g->N * g->P * g->Q * g->K,
                 nw = (size_t)g->K * g->R * g->S * g->C;
    if (lib_wanted() && convlib_ok(d, rt)) {
        rc = convlib_run(d, st, CONVLIB_DATA, g, dy16, w16, dx16, rt, e);
        if (rc != PLUMB_EUNSUPPORTED) return rc;
    }
    float *dyf, *wf, *dxf;
    rc = stand_in(d, st, dy16, ny, TVWS_A32, (int)rt, &dyf, e);
    if (!rc) rc = stand_in(d, st, w16, nw, TVWS_B32, (int)rt, &wf, e);
    if (!rc) rc = stand_in(d, st, NULL, nx, TVWS_C32, (int)rt, &dxf, e);
    if (!rc) rc = ig_data(d, st, g, dyf, wf, dxf, (int)rt, e);
    if (!rc) rc = narrow16(d, st, dxf, nx, dx16, (int)rt, e);
    return rc;
}

int g_conv2d_bwd_filter16o(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x,
                           const uint16_t *x16, const uint16_t *dy16, float *dw, dtype_t rt, plumb_err *e)
{
    NEED((x || x16) && dy16 && dw, "%s: conv2d_bwd_filter16o: NULL x (and x16), dy16 or dw", d->label);
    FAST16("conv2d_bwd_filter16o");
    int rc = enter16(d, "conv2d_bwd_filter16o", g, e);
    if (rc) return rc;
    struct dev_stream *st = gpu_stream(d, s);
    const size_t nx = (size_t)g->N * g->H * g->W * g->C, ny = (size_t)g->N * g->P * g->Q * g->K,
                 nw = (size_t)g->K * g->R * g->S * g->C;
    if (lib_wanted() && convlib_ok(d, rt)) {
        /* as conv_filter_any: the library's dw is 16-bit, widened into dw */
        const uint16_t *xs = x16, *dw16;
        int s2d = 0, pad = 0;
        if ((rc = s2d_wanted(d, g, &s2d, e))) return rc;
        if (s2d) { /* x space-to-depth; dw gathered from the stride-1 convolution's */
            struct train_conv gs;
            s2d_geom(g, &gs);
            const size_t nws = (size_t)gs.K * gs.R * gs.S * gs.C;
            rc = s2d_x(d, st, x16 ? NULL : x, x16, g, &gs, (int)rt, &xs, e);
            if (!rc) rc = to16(d, st, NULL, NULL, nws, TVWS_C16, (int)rt, &dw16, e);
            if (!rc) rc = convlib_run(d, st, CONVLIB_FILTER, &gs, xs, dy16, (void *)dw16, rt, e);
            if (!rc) {
                k_s2d_dw<<<gpu_grid(nw, TPB), TPB, 0, st->s>>>(dw16, g->R, g->S, g->C, nw, gs.R, gs.S, gs.C, dw, (int)rt);
                GPU_CHECK_LAUNCH(d, "k_s2d_dw", e);
            }
            if (rc != PLUMB_EUNSUPPORTED) return rc;
            xs = x16, rc = PLUMB_OK;
        }
        if ((rc = pad_wanted(d, g, &pad, e))) return rc;
        if (pad) { /* x padded to 8 channels; dw's first C of the padded dw's 8 */
            struct train_conv gp = *g;
            gp.C = PADC;
            const size_t kr = (size_t)g->K * g->R * g->S;
            rc = pad_c8(d, st, x16 ? NULL : x, x16, (size_t)g->N * g->H * g->W, g->C, TVWS_A16, (int)rt, &xs, e);
            if (!rc) rc = to16(d, st, NULL, NULL, kr * PADC, TVWS_C16, (int)rt, &dw16, e);
            if (!rc) rc = convlib_run(d, st, CONVLIB_FILTER, &gp, xs, dy16, (void *)dw16, rt, e);
            if (!rc) {
                k_unpad_c8<<<gpu_grid(kr * g->C, TPB), TPB, 0, st->s>>>(dw16, kr, g->C, dw, (int)rt);
                GPU_CHECK_LAUNCH(d, "k_unpad_c8", e);
            }
            if (rc != PLUMB_EUNSUPPORTED) return rc;
            xs = x16, rc = PLUMB_OK;
        }
        if (!xs) rc = to16(d, st, x, NULL, nx, TVWS_A16, (int)rt, &xs, e);
        if (!rc) rc = to16(d, st, NULL, NULL, nw, TVWS_C16, (int)rt, &dw16, e);
        if (!rc) rc = convlib_run(d, st, CONVLIB_FILTER, g, xs, dy16, (void *)dw16, rt, e);
        if (!rc) rc = from16(d, st, dw16, nw, dw, (int)rt, e);
        if (rc != PLUMB_EUNSUPPORTED) return rc;
    }
    float *xf = (float *)x, *dyf;
    rc = x16 ? stand_in(d, st, x16, nx, TVWS_A32, (int)rt, &xf, e) : PLUMB_OK;
    if (!rc) rc = stand_in(d, st, dy16, ny, TVWS_B32, (int)rt, &dyf, e);
    if (!rc) rc = ig_filter(d, st, g, xf, dyf, dw, e);
    return rc;
}
