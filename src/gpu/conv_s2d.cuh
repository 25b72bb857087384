/* Space-to-depth for a stride-2 convolution over C <= 4 channels
 * (gpu/train_conv.cu, PLUMB_CONV_S2D): the stride-1 geometry and the three
 * kernels, included by train_conv.cu and by tests/tools/s2d_check.cc, which
 * runs them on the cpu against a direct convolution and weight gradient.
 * Needs, from gpu/train_gpu.h or the check: to16_rt, from16_rt, uint4 and
 * make_uint4, the CUDA thread built-ins; and dev/train_ops.h.
 *
 * x'[n, i, j, (2 a + b) C + c] = x[n, 2 i + a - pad, 2 j + b - pad, c] (0
 * outside), w'[k, u, v, (2 a + b) C + c] = w[k, 2 u + a, 2 v + b, c] (0 past
 * R, S), channels past 4 C zero, so the stride-1 R' x S' convolution of x'
 * and w' sums the products of the stride-2 one plus exact zeros. */
#ifndef PLUMB_GPU_CONV_S2D_CUH
#define PLUMB_GPU_CONV_S2D_CUH
#include "dev/train_ops.h"

/* gs: R' = ceil(R / 2), S' = ceil(S / 2), stride 1, no padding, the same
 * output P x Q, input (P + R' - 1) x (Q + S' - 1) of Cs = 8 (4 C <= 8) or 16 */
static inline void s2d_geom(const struct train_conv *g, struct train_conv *gs)
{
    const int Rs = (g->R + 1) / 2, Ss = (g->S + 1) / 2;
    train_conv_set(gs, g->N, g->P + Rs - 1, g->Q + Ss - 1, 4 * g->C <= 8 ? 8 : 16, g->K, Rs, Ss, 1, 0);
}

/* x' [N, Hs, Ws, Cs] (16-bit) from x (fp32) or x16 [N, H, W, C]: a thread a pixel of x' */
__global__ void k_s2d_x(const float *x, const uint16_t *x16, int H, int W, int C, int pad, size_t npix, int Hs,
                        int Ws, int Cs, uint16_t *y, int rt)
{
    for (size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x; t < npix; t += (size_t)gridDim.x * blockDim.x) {
        const int j = (int)(t % Ws), i = (int)(t / Ws % Hs);
        const size_t n = t / Ws / Hs;
        uint32_t w[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 2; b++) {
                const int h = 2 * i + a - pad, ww = 2 * j + b - pad;
                if (h < 0 || h >= H || ww < 0 || ww >= W) continue;
                const size_t base = ((n * H + h) * W + ww) * C;
                for (int c = 0; c < C; c++) {
                    const int ch = (2 * a + b) * C + c;
                    const uint32_t v = x ? to16_rt(x[base + c], rt) : x16[base + c];
                    w[ch / 2] |= v << (16 * (ch % 2));
                }
            }
        uint4 *o = (uint4 *)(y + t * Cs);
        o[0] = make_uint4(w[0], w[1], w[2], w[3]);
        if (Cs == 16) o[1] = make_uint4(w[4], w[5], w[6], w[7]);
    }
}

/* w' [K, Rs, Ss, Cs] from w16 [K, R, S, C]: a thread an element of w' */
__global__ void k_s2d_w(const uint16_t *w16, int R, int S, int C, size_t n, int Rs, int Ss, int Cs, uint16_t *ws)
{
    for (size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x; t < n; t += (size_t)gridDim.x * blockDim.x) {
        const int ch = (int)(t % Cs), v = (int)(t / Cs % Ss), u = (int)(t / Cs / Ss % Rs);
        const size_t k = t / Cs / Ss / Rs;
        uint16_t val = 0;
        if (ch < 4 * C) {
            const int blk = ch / C, c = ch % C, r = 2 * u + blk / 2, s = 2 * v + blk % 2;
            if (r < R && s < S) val = w16[((k * R + r) * S + s) * C + c];
        }
        ws[t] = val;
    }
}

/* dw [K, R, S, C] fp32 from w' 's gradient dws16 [K, Rs, Ss, Cs]: a thread an element of dw */
__global__ void k_s2d_dw(const uint16_t *dws16, int R, int S, int C, size_t n, int Rs, int Ss, int Cs, float *dw, int rt)
{
    for (size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x; t < n; t += (size_t)gridDim.x * blockDim.x) {
        const int c = (int)(t % C), s = (int)(t / C % S), r = (int)(t / C / S % R);
        const size_t k = t / C / S / R;
        const int ch = (2 * (r % 2) + s % 2) * C + c;
        dw[t] = from16_rt(dws16[((k * Rs + r / 2) * Ss + s / 2) * Cs + ch], rt);
    }
}

#endif
