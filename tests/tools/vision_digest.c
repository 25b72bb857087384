/* Prints a digest (FNV-1a 64 over result bits) of the golden vision element
 * definitions of dev/train_vision.h (convolution chains, BatchNorm fixed
 * point, BN elements, pooling, softmax cross-entropy) and of the synthetic
 * CIFAR generator's formula inputs, on fixed Philox inputs, so
 * tests/t_vision_golden.sh can compare builds by different compilers and
 * flags. Header-only: nothing from the library. */
#include <stdio.h>
#include <stdint.h>
#include "core/philox.h"
#include "dev/train_vision.h"

static uint64_t h = 1469598103934665603ull;
static void mixu(uint64_t u, int bytes)
{
    for (int i = 0; i < bytes; i++) {
        h ^= (u >> (8 * i)) & 0xffu;
        h *= 1099511628211ull;
    }
}
static void mix(float f) { mixu(f32_bits(f), 4); }

int main(void)
{
    enum { N = 2, H = 9, W = 8, C = 5, K = 6 };
    static float x[N * H * W * C], w[K * 7 * 7 * C], dy[N * H * W * K];
    for (int i = 0; i < N * H * W * C; i++) x[i] = philox_normal_at(5, RNG_DATA, 1, 0, (uint64_t)i);
    for (int i = 0; i < K * 49 * C; i++) w[i] = philox_normal_at(5, RNG_DATA, 2, 0, (uint64_t)i) * 0.2f;
    for (int i = 0; i < N * H * W * K; i++) dy[i] = philox_normal_at(5, RNG_DATA, 3, 0, (uint64_t)i);
    const int geo[][3] = {{1, 1, 0}, {3, 1, 1}, {3, 2, 1}, {7, 2, 3}, {1, 2, 0}};
    for (int gi = 0; gi < 5; gi++) {
        struct train_conv g;
        if (train_conv_set(&g, N, H, W, C, K, geo[gi][0], geo[gi][0], geo[gi][1], geo[gi][2])) return 1;
        for (int n = 0; n < N; n++)
            for (int p = 0; p < g.P; p++)
                for (int q = 0; q < g.Q; q++)
                    for (int k = 0; k < K; k++) mix(tv_round(tv_conv_fwd_elem(&g, x, w, n, p, q, k), DT_BF16));
        for (int n = 0; n < N; n++)
            for (int hh = 0; hh < H; hh++)
                for (int ww = 0; ww < W; ww++)
                    for (int c = 0; c < C; c++) mix(tv_conv_bwd_data_elem(&g, dy, w, n, hh, ww, c));
        for (int k = 0; k < K; k++)
            for (int r = 0; r < g.R; r++)
                for (int s = 0; s < g.S; s++)
                    for (int c = 0; c < C; c++) mix(tv_conv_bwd_filter_elem(&g, x, dy, k, r, s, c));
        struct train_conv pg;
        if (train_conv_set(&pg, N, H, W, C, C, 3, 3, 2, 1)) return 1;
        for (int n = 0; n < N; n++)
            for (int p = 0; p < pg.P; p++)
                for (int q = 0; q < pg.Q; q++)
                    for (int c = 0; c < C; c++) {
                        int32_t a;
                        mix(tv_maxpool_elem(&pg, x, n, p, q, c, &a));
                        mixu((uint32_t)a, 4);
                    }
    }
    /* BatchNorm: fixed-point sums, the moments, the elements */
    int64_t shi = 0, slo = 0;
    for (int i = 0; i < N * H * W * C; i++) {
        int64_t a, b;
        tv_fix_split(tv_fix(x[i] * 37.0f), &a, &b);
        shi += a, slo += b;
        mixu((uint64_t)tv_fix(x[i] * 1e-7f), 8);
    }
    mixu((uint64_t)shi, 8), mixu((uint64_t)slo, 8);
    mix(tv_fix_mean(shi, slo, N * H * W * C));
    for (int i = 0; i < 200; i++) {
        mix(tv_bn_apply(x[i], 0.1f, 1.7f, 0.9f, -0.2f, &dy[i], 1));
        mix(tv_bn_dx(x[i], dy[i], 0.1f, 1.7f, 0.9f, 0.03f, -0.4f));
        mix(tv_bn_running(x[i], dy[i], 0.1f));
    }
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) mix(tv_avgpool_elem(x, n, H * W, C, c));
    /* softmax cross-entropy rows of 10 and 1000 classes */
    static float z[1000], dz[1000];
    for (int i = 0; i < 1000; i++) z[i] = philox_normal_at(5, RNG_DATA, 4, 0, (uint64_t)i) * 4.0f;
    int32_t pred;
    mix(tv_xent_row(z, 10, 3, 0.5f, dz, &pred));
    for (int i = 0; i < 10; i++) mix(dz[i]);
    mix(tv_xent_row(z, 1000, 777, 1.0f / 256, dz, &pred));
    for (int i = 0; i < 1000; i++) mix(dz[i]);
    mixu((uint32_t)pred, 4);
    printf("%016llx\n", (unsigned long long)h);
    return 0;
}
