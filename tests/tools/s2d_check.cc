// The space-to-depth kernels of src/gpu/conv_s2d.cuh (a stride-2
// convolution over C <= 4 channels as a stride-1 one over 2 x 2 pixel blocks,
// gpu/train_conv.cu's PLUMB_CONV_S2D) run on the cpu, one thread walking every
// element through their grid-stride loops, against a direct convolution and
// weight gradient of the same integer-valued tensors (exact in any order):
// the geometry, x' from fp32 and from 16-bit x (the same bits), w', and dw
// gathered back from the stride-1 weight gradient. tests/t_conv_s2d.sh runs it.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
extern "C" {
#include "dev/train_ops.h"
}
struct dim1 { unsigned x; };
static dim1 blockIdx{0}, blockDim{1}, gridDim{1}, threadIdx{0};
struct uint4 { uint32_t x, y, z, w; };
static uint4 make_uint4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) { return {a, b, c, d}; }
#define __global__ static
// "16-bit values" here are small integers carried as they are: the check is of
// the index arithmetic (the conversions are core/dtype.h's, checked elsewhere)
static uint16_t to16_rt(float x, int) { return (uint16_t)(int)x; }
static float from16_rt(uint16_t h, int) { return (float)h; }
#include "gpu/conv_s2d.cuh"

static size_t ix(int a, int b, int c, int d, int B, int C, int D) { return (((size_t)a * B + b) * C + c) * D + d; }

int main()
{
    int pass = 0, fail = 0;
    // N, H (= W), C, K, R (= S), stride, pad: the ImageNet stem (7 x 7 / 2 pad 3) over even, odd and 224 sizes,
    // 3 x 3 / 2 and 5 x 5 / 2, C 1 (8 channels), 3 and 4 (16)
    const int cases[][7] = {{2, 16, 3, 8, 7, 2, 3}, {2, 11, 3, 8, 7, 2, 3}, {1, 224, 3, 4, 7, 2, 3},
                            {2, 10, 1, 8, 3, 2, 1}, {2, 9, 4, 16, 5, 2, 2}, {2, 9, 3, 8, 3, 2, 1}};
    srand(7);
    for (const auto &cs : cases) {
        train_conv g, gs;
        memset(&g, 0, sizeof g);
        if (train_conv_set(&g, cs[0], cs[1], cs[1], cs[2], cs[3], cs[4], cs[4], cs[5], cs[6])) return 2;
        s2d_geom(&g, &gs);
        char what[128];
        snprintf(what, sizeof what, "N%d H%d C%d K%d %dx%d/%d pad %d -> %dx%d/1 over %dx%dx%d", g.N, g.H, g.C, g.K, g.R,
                 g.S, g.stride, g.pad, gs.R, gs.S, gs.H, gs.W, gs.C);
        if (gs.P != g.P || gs.Q != g.Q || gs.stride != 1 || gs.pad != 0 || gs.C < 4 * g.C) {
            printf("FAIL %s: the geometry (P %d Q %d against %d %d)\n", what, gs.P, gs.Q, g.P, g.Q);
            fail++;
            continue;
        }
        const size_t nx = (size_t)g.N * g.H * g.W * g.C, nw = (size_t)g.K * g.R * g.S * g.C;
        const size_t npix = (size_t)gs.N * gs.H * gs.W, nws = (size_t)gs.K * gs.R * gs.S * gs.C;
        const size_t ny = (size_t)g.N * g.P * g.Q * g.K;
        std::vector<uint16_t> x16(nx), w16(nw), dy(ny), xs(npix * gs.C, 0xffff), xs2(npix * gs.C, 0xffff), ws(nws, 0xffff);
        std::vector<float> xf(nx);
        for (size_t i = 0; i < nx; i++) x16[i] = (uint16_t)(rand() % 7 + 1), xf[i] = x16[i];
        for (size_t i = 0; i < nw; i++) w16[i] = (uint16_t)(rand() % 5 + 1);
        for (size_t i = 0; i < ny; i++) dy[i] = (uint16_t)(rand() % 3 + 1);
        k_s2d_x(nullptr, x16.data(), g.H, g.W, g.C, g.pad, npix, gs.H, gs.W, gs.C, xs.data(), 0);
        k_s2d_x(xf.data(), nullptr, g.H, g.W, g.C, g.pad, npix, gs.H, gs.W, gs.C, xs2.data(), 0);
        k_s2d_w(w16.data(), g.R, g.S, g.C, nws, gs.R, gs.S, gs.C, ws.data());
        // the input under tap (r, s) of output (p, q): 0 in the padding (adds nothing)
        auto tap = [&](int n, int p, int q, int r, int s, int c) -> long {
            const int h = p * g.stride - g.pad + r, w = q * g.stride - g.pad + s;
            return h < 0 || h >= g.H || w < 0 || w >= g.W ? 0 : (long)x16[ix(n, h, w, c, g.H, g.W, g.C)];
        };
        // the forward: every output of the direct stride-2 convolution and of the stride-1 one
        size_t bad = 0;
        for (int n = 0; n < g.N; n++)
            for (int p = 0; p < g.P; p++)
                for (int q = 0; q < g.Q; q++)
                    for (int k = 0; k < g.K; k++) {
                        long a = 0, b = 0;
                        for (int r = 0; r < g.R; r++)
                            for (int s = 0; s < g.S; s++)
                                for (int c = 0; c < g.C; c++) a += tap(n, p, q, r, s, c) * w16[ix(k, r, s, c, g.R, g.S, g.C)];
                        for (int u = 0; u < gs.R; u++)
                            for (int v = 0; v < gs.S; v++)
                                for (int c = 0; c < gs.C; c++)
                                    b += (long)xs[ix(n, p + u, q + v, c, gs.H, gs.W, gs.C)] * ws[ix(k, u, v, c, gs.R, gs.S, gs.C)];
                        bad += a != b;
                    }
        // the weight gradient: direct, against the stride-1 one gathered back by k_s2d_dw
        std::vector<uint16_t> dws(nws);
        for (int k = 0; k < gs.K; k++)
            for (int u = 0; u < gs.R; u++)
                for (int v = 0; v < gs.S; v++)
                    for (int c = 0; c < gs.C; c++) {
                        long t = 0;
                        for (int n = 0; n < g.N; n++)
                            for (int p = 0; p < g.P; p++)
                                for (int q = 0; q < g.Q; q++)
                                    t += (long)dy[ix(n, p, q, k, g.P, g.Q, g.K)] * xs[ix(n, p + u, q + v, c, gs.H, gs.W, gs.C)];
                        dws[ix(k, u, v, c, gs.R, gs.S, gs.C)] = (uint16_t)(t & 0xffff);
                    }
        std::vector<float> dw(nw, -1.0f);
        k_s2d_dw(dws.data(), g.R, g.S, g.C, nw, gs.R, gs.S, gs.C, dw.data(), 0);
        size_t badw = 0;
        for (int k = 0; k < g.K; k++)
            for (int r = 0; r < g.R; r++)
                for (int s = 0; s < g.S; s++)
                    for (int c = 0; c < g.C; c++) {
                        long t = 0;
                        for (int n = 0; n < g.N; n++)
                            for (int p = 0; p < g.P; p++)
                                for (int q = 0; q < g.Q; q++) t += (long)dy[ix(n, p, q, k, g.P, g.Q, g.K)] * tap(n, p, q, r, s, c);
                        badw += (float)(t & 0xffff) != dw[ix(k, r, s, c, g.R, g.S, g.C)];
                    }
        const int ok = !bad && !badw && xs == xs2;
        printf("%s s2d %s: y %zu of %zu differ, dw %zu of %zu, x' from fp32 %s\n", ok ? "ok  " : "FAIL", what, bad, ny,
               badw, nw, xs == xs2 ? "= from 16-bit" : "differs from 16-bit");
        ok ? pass++ : fail++;
    }
    printf("%d passed, %d failed\n", pass, fail);
    return fail ? 1 : 0;
}
