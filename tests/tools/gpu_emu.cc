// The GPU's fast transformer kernels (src/gpu/train_gpt_kern.cuh) run on the
// cpu: each block's threads are pthreads, __syncthreads is a block barrier,
// a warp shuffle goes through a shared array between two warp barriers, and
// __shared__ arrays are function statics (blocks run one after another). So
// the very source the plugins compile is checked without a GPU, for the warp
// width given by -DPLUMB_WARP (32: NVIDIA, 64: CDNA), against the golden
// definitions of src/dev/train_gpt_math.h and core/gmath.h:
//   flash attention forward (out, lse) and backward (dq, dk, dv) on shapes
//   that use both tile sizes and partial tiles; LayerNorm forward and
//   backward (dx, dw, db); the classifier's cross-entropy rows; the GELU;
//   and src/gpu/train_vision_kern.cuh's kernels over 16-bit storage (BN's
//   one-pass sums against float64 and the fp32 kernel, BN apply and backward
//   data, the masked add, in place, and the max-pool: the fp32 kernels' bits).
// Prints one line per check and "N passed, N failed"; exits 1 on a failure.
// Built and run by tests/t_gpu_emu.sh:
//   g++ -std=c++17 -O1 -Wno-unknown-pragmas -DPLUMB_WARP=64 -Isrc tests/tools/gpu_emu.cc -lpthread
#include <pthread.h>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <type_traits>
#include <vector>

#ifndef PLUMB_WARP
#define PLUMB_WARP 32
#endif

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct float4 {
    float x, y, z, w;
};
static inline float4 make_float4(float a, float b, float c, float d) { return float4{a, b, c, d}; }
struct uint2 {
    uint32_t x, y;
};
struct uint4 {
    uint32_t x, y, z, w;
};
static inline uint4 make_uint4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) { return uint4{a, b, c, d}; }
static inline uint2 make_uint2(uint32_t a, uint32_t b) { return uint2{a, b}; }
struct ushort4 {
    uint16_t x, y, z, w;
};
static thread_local dim3 threadIdx, blockIdx;
static dim3 blockDim, gridDim;
static pthread_barrier_t g_block_bar, g_warp_bar[1024 / 16];
static float g_xch[1024];

#define __global__
#define __device__
#define __host__
#define __shared__ static
#define __launch_bounds__(...)

static inline void __syncthreads() { pthread_barrier_wait(&g_block_bar); }
template <typename T> static inline T plumb_shfl_xor(T v, int lane_mask)
{
    const unsigned t = threadIdx.x, w = t / PLUMB_WARP;
    g_xch[t] = (float)v;
    pthread_barrier_wait(&g_warp_bar[w]);
    const T r = (T)g_xch[(t % PLUMB_WARP ^ (unsigned)lane_mask) + w * PLUMB_WARP];
    pthread_barrier_wait(&g_warp_bar[w]);
    return r;
}
// gpu/vendor.h's reductions, the same expressions
static inline float plumb_warp_sum(float v)
{
    for (int off = PLUMB_WARP / 2; off > 0; off >>= 1) v += plumb_shfl_xor(v, off);
    return v;
}
static inline float plumb_warp_max(float v)
{
    for (int off = PLUMB_WARP / 2; off > 0; off >>= 1) v = fmaxf(v, plumb_shfl_xor(v, off));
    return v;
}
static inline float plumb_block_sum(float v, float *scratch)
{
    int lane = threadIdx.x % PLUMB_WARP, wid = threadIdx.x / PLUMB_WARP, nw = blockDim.x / PLUMB_WARP;
    v = plumb_warp_sum(v);
    __syncthreads();
    if (lane == 0) scratch[wid] = v;
    __syncthreads();
    v = lane < nw ? scratch[lane] : 0.0f;
    return plumb_warp_sum(v);
}
static inline float plumb_block_max(float v, float *scratch)
{
    int lane = threadIdx.x % PLUMB_WARP, wid = threadIdx.x / PLUMB_WARP, nw = blockDim.x / PLUMB_WARP;
    v = plumb_warp_max(v);
    __syncthreads();
    if (lane == 0) scratch[wid] = v;
    __syncthreads();
    v = lane < nw ? scratch[lane] : -INFINITY;
    return plumb_warp_max(v);
}

#include "gpu/train_gpt_kern.cuh"
#include "gpu/train_sumsq.cuh"
#include "gpu/sum_slices.cuh"
// gpu/train_gpu.h's 16-bit storage helpers, the same expressions
static inline uint16_t to16_rt(float x, int rt) { return rt == DT_F16 ? f32_to_f16(x) : f32_to_bf16(x); }
static inline float from16_rt(uint16_t h, int rt) { return rt == DT_F16 ? f16_to_f32(h) : bf16_to_f32(h); }
#include "gpu/train_vision_kern.cuh"

// ---- launching: one block at a time, its threads on the pool's pthreads ----

#include "emu_pool.h"
template <typename F> struct blk {
    F *f;
    dim3 b;
};
template <typename F> static void run_thread(void *p, unsigned t)
{
    blk<F> *k = (blk<F> *)p;
    threadIdx = dim3(t);
    blockIdx = k->b;
    (*k->f)();
}
template <typename F> static void launch(dim3 grid, dim3 block, F f)
{
    const unsigned n = block.x;
    if (n % PLUMB_WARP || n > 1024) {
        fprintf(stderr, "launch: %u threads is not a multiple of the warp %d\n", n, PLUMB_WARP);
        exit(2);
    }
    blockDim = block;
    gridDim = grid;
    pthread_barrier_init(&g_block_bar, nullptr, n);
    for (unsigned w = 0; w < n / PLUMB_WARP; w++) pthread_barrier_init(&g_warp_bar[w], nullptr, PLUMB_WARP);
    for (unsigned by = 0; by < grid.y; by++)
        for (unsigned bx = 0; bx < grid.x; bx++) {
            blk<F> k{&f, dim3(bx, by)};
            emu_pool_run(n, run_thread<F>, &k);
        }
    pthread_barrier_destroy(&g_block_bar);
    for (unsigned w = 0; w < n / PLUMB_WARP; w++) pthread_barrier_destroy(&g_warp_bar[w]);
}

// ---- checks ----

static int g_pass, g_fail;
static uint64_t g_rs = 0x2545f4914f6cdd1dull;
static float frand(float lo, float hi)
{
    g_rs ^= g_rs << 13;
    g_rs ^= g_rs >> 7;
    g_rs ^= g_rs << 17;
    return lo + (hi - lo) * (float)((g_rs >> 11) * (1.0 / 9007199254740992.0));
}
static void check(const char *what, const float *got, const float *want, size_t n, double tol)
{
    double scale = 0, worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    for (size_t i = 0; i < n; i++) {
        const double err = fabs((double)got[i] - want[i]) / (fabs((double)want[i]) + 0.01 * scale + 1e-30);
        if (!(err <= worst)) worst = err, at = i; // NaN counts as the worst
    }
    const int ok = worst <= tol;
    printf("%s warp %d: %s: worst relative error %.3g at %zu (got %.9g, golden %.9g, bound %.0e)\n", ok ? "ok  " : "FAIL",
           PLUMB_WARP, what, worst, at, n ? got[at] : 0.0, n ? want[at] : 0.0, tol);
    ok ? g_pass++ : g_fail++;
}

// k_flash_bwd_pre's D against its stated order, written here from its
// comment: lane j of 8 chains the row's 8-value chunks j, j + 8, .. with
// fmaf(dout, out, acc), then the eight sums add as ((s0 + s4) + (s2 + s6)) +
// ((s1 + s5) + (s3 + s7)) (the butterfly xor 4, 2, 1 seen from lane 0); the
// same bits with vector loads and without, from fp32 and from 16-bit storage
// (bf16 values of the same numbers) alike
static void rowdots(const float *o, const float *dO, const float *Dgot, int B, int T, int NH, int HS)
{
    const size_t nl = (size_t)B * NH * T, n1 = (size_t)B * T * NH * HS, C = (size_t)NH * HS;
    std::vector<uint16_t> o16(n1), d16(n1);
    std::vector<float> o16f(n1), d16f(n1);
    for (size_t i = 0; i < n1; i++) {
        o16[i] = f32_to_bf16(o[i]), d16[i] = f32_to_bf16(dO[i]);
        o16f[i] = bf16_to_f32(o16[i]), d16f[i] = bf16_to_f32(d16[i]);
    }
    auto ref = [&](const float *x, const float *y, std::vector<float> &R) {
        for (size_t q = 0; q < nl; q++) {
            const size_t t = q % T, h = q / T % NH, b = q / ((size_t)T * NH), off = (b * T + t) * C + h * HS;
            float sj[8];
            for (int j = 0; j < 8; j++) {
                float acc = 0.0f;
                for (int c0 = 8 * j; c0 < HS; c0 += 64)
                    for (int i = c0; i < c0 + 8 && i < HS; i++) acc = fmaf(x[off + i], y[off + i], acc);
                sj[j] = acc;
            }
            R[q] = ((sj[0] + sj[4]) + (sj[2] + sj[6])) + ((sj[1] + sj[5]) + (sj[3] + sj[7]));
        }
    };
    std::vector<float> want(nl), want16(nl), got(nl, NAN), got16(nl, NAN), got16v(nl, NAN);
    ref(dO, o, want);
    ref(d16f.data(), o16f.data(), want16);
    const bool v = HS % 8 == 0; // the vectors are 16-byte aligned
    float *pg = got.data(), *pg16 = got16.data(), *pg16v = got16v.data();
    const uint16_t *po16 = o16.data(), *pd16 = d16.data();
    const dim3 g((unsigned)((nl + 15) / 16));
    launch(g, dim3(128), [&] { k_flash_bwd_pre(o, dO, pg, B, T, NH, HS, NULL, NULL, 0, v); });
    launch(g, dim3(128), [&] { k_flash_bwd_pre(NULL, NULL, pg16, B, T, NH, HS, po16, pd16, DT_BF16, 0); });
    launch(dim3(3), dim3(128), [&] { k_flash_bwd_pre(NULL, NULL, pg16v, B, T, NH, HS, po16, pd16, DT_BF16, v); });
    const bool ok = !memcmp(Dgot, want.data(), nl * 4) && !memcmp(pg, want.data(), nl * 4) &&
                    !memcmp(pg16, want16.data(), nl * 4) && !memcmp(pg16v, want16.data(), nl * 4);
    printf("%s warp %d: row dots D B%d T%d NH%d HS%d: the stated order's bits (fp32 %s, 16-bit scalar and %s, a "
           "short grid)\n", ok ? "ok  " : "FAIL", PLUMB_WARP, B, T, NH, HS, v ? "vector" : "scalar",
           v ? "vector" : "scalar");
    ok ? g_pass++ : g_fail++;
}

static void attention(int B, int T, int NH, int HS)
{
    const int C = NH * HS, C3 = 3 * C;
    const size_t n3 = (size_t)B * T * C3, n1 = (size_t)B * T * C, nl = (size_t)B * NH * T;
    std::vector<float> qkv(n3), dout(n1), out(n1), lse(nl), D(nl), dqkv(n3, 0.0f);
    for (auto &v : qkv) v = frand(-1.5f, 1.5f);
    for (auto &v : dout) v = frand(-1, 1);
    const float scale = 1.0f / sqrtf((float)HS);
    // golden reference on the same inputs
    std::vector<float> go(n1), gl(nl), gq(n3, 0.0f), P((size_t)T * T), DS((size_t)T * T), p(T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *base = qkv.data() + (size_t)b * T * C3 + h * HS;
            for (int t = 0; t < T; t++)
                gpt_gold_attn_row(base + (size_t)t * C3, base + C, base + 2 * C, C3, t, HS, scale, p.data(),
                                  go.data() + ((size_t)b * T + t) * C + h * HS, gl.data() + ((size_t)b * NH + h) * T + t, 0);
            for (int t = 0; t < T; t++)
                gpt_gold_attn_bwd_row(base + (size_t)t * C3, base + C, base + 2 * C, C3,
                                      dout.data() + ((size_t)b * T + t) * C + h * HS,
                                      go.data() + ((size_t)b * T + t) * C + h * HS, t, HS, scale,
                                      gl[((size_t)b * NH + h) * T + t], P.data() + (size_t)t * T, DS.data() + (size_t)t * T,
                                      gq.data() + ((size_t)b * T + t) * C3 + h * HS, 0);
            for (int j = 0; j < T; j++)
                gpt_gold_attn_bwd_key(base, C3, dout.data() + (size_t)b * T * C + h * HS, C, P.data(), DS.data(), T, j, T, HS,
                                      scale, gq.data() + ((size_t)b * T + j) * C3 + C + h * HS,
                                      gq.data() + ((size_t)b * T + j) * C3 + 2 * C + h * HS, 0);
        }
    const float *q = qkv.data(), *dO = dout.data();
    float *o = out.data(), *l = lse.data(), *Dp = D.data(), *dq = dqkv.data();
    const int br = HS <= 64 ? 32 : 16;
    const dim3 grid((unsigned)((T + br - 1) / br), (unsigned)(B * NH));
    if (HS <= 64) {
        launch(grid, dim3(NT), [&] { k_flash_fwd<32, 64>(q, o, l, T, NH, HS, scale, 0); });
    } else {
        launch(grid, dim3(NT), [&] { k_flash_fwd<16, 128>(q, o, l, T, NH, HS, scale, 0); });
    }
    launch(dim3((unsigned)((nl + 127) / 128)), dim3(128), [&] { k_flash_bwd_pre(o, dO, Dp, B, T, NH, HS); });
    if (HS <= 64) {
        launch(grid, dim3(NT), [&] { k_flash_bwd_dkv<32, 64>(q, dO, l, Dp, dq, T, NH, HS, scale, 0); });
        launch(grid, dim3(NT), [&] { k_flash_bwd_dq<32, 64>(q, dO, l, Dp, dq, T, NH, HS, scale, 0); });
    } else {
        launch(grid, dim3(NT), [&] { k_flash_bwd_dkv<16, 128>(q, dO, l, Dp, dq, T, NH, HS, scale, 0); });
        launch(grid, dim3(NT), [&] { k_flash_bwd_dq<16, 128>(q, dO, l, Dp, dq, T, NH, HS, scale, 0); });
    }
    char what[128];
    snprintf(what, sizeof what, "flash attention B%d T%d NH%d HS%d out", B, T, NH, HS);
    check(what, o, go.data(), n1, 2e-5);
    snprintf(what, sizeof what, "flash attention B%d T%d NH%d HS%d lse", B, T, NH, HS);
    check(what, l, gl.data(), nl, 2e-6);
    snprintf(what, sizeof what, "flash attention B%d T%d NH%d HS%d dqkv", B, T, NH, HS);
    check(what, dq, gq.data(), n3, 1e-4);
    // run to run: the same bits
    std::vector<float> dq2(n3, 0.0f);
    float *dq2p = dq2.data();
    if (HS <= 64) {
        launch(grid, dim3(NT), [&] { k_flash_bwd_dkv<32, 64>(q, dO, l, Dp, dq2p, T, NH, HS, scale, 0); });
        launch(grid, dim3(NT), [&] { k_flash_bwd_dq<32, 64>(q, dO, l, Dp, dq2p, T, NH, HS, scale, 0); });
    } else {
        launch(grid, dim3(NT), [&] { k_flash_bwd_dkv<16, 128>(q, dO, l, Dp, dq2p, T, NH, HS, scale, 0); });
        launch(grid, dim3(NT), [&] { k_flash_bwd_dq<16, 128>(q, dO, l, Dp, dq2p, T, NH, HS, scale, 0); });
    }
    const int same = !memcmp(dq, dq2p, n3 * sizeof(float));
    printf("%s warp %d: flash backward B%d T%d repeats bit for bit\n", same ? "ok  " : "FAIL", PLUMB_WARP, B, T);
    same ? g_pass++ : g_fail++;
    rowdots(o, dO, Dp, B, T, NH, HS);
}

// k_ln_dwdb_part<4> (four columns a thread, where C % 4 == 0) against
// the V = 1 parts ref [nc, 2C]: the same bits, dy fp32 or 16-bit
static void dwdb_vec_check(const float *xp, const float *mp, const float *rp, const float *dyp, const uint16_t *dyhp,
                           int t16, int R, int C, const std::vector<float> &ref)
{
    if (C % 4) return;
    const int nc = (R + LN_ROWS - 1) / LN_ROWS;
    std::vector<float> p4((size_t)nc * 2 * C, NAN), pc((size_t)nc * 2 * C, NAN), p1c((size_t)nc * 2 * C, NAN);
    float *pp = p4.data(), *pcp = pc.data(), *p1p = p1c.data();
    const dim3 g4((unsigned)((C / 4 + 127) / 128), (unsigned)nc), g1((unsigned)((C + 127) / 128), (unsigned)nc);
    launch(g4, dim3(128), [&] { k_ln_dwdb_part<4>(xp, mp, rp, dyp, dyhp, t16, pp, R, C); });
    // the compile-time forms train_gpt_ops.cu launches (dy's type a constant), four columns and one
    auto forms = [&](auto ty) {
        constexpr int TY = decltype(ty)::value;
        launch(g4, dim3(128), [&] { k_ln_dwdb_part<4, TY>(xp, mp, rp, dyp, dyhp, t16, pcp, R, C); });
        launch(g1, dim3(128), [&] { k_ln_dwdb_part<1, TY>(xp, mp, rp, dyp, dyhp, t16, p1p, R, C); });
    };
    const int ty = dyhp ? t16 : DT_F32;
    if (ty == DT_BF16) forms(std::integral_constant<int, DT_BF16>());
    else if (ty == DT_F16) forms(std::integral_constant<int, DT_F16>());
    else forms(std::integral_constant<int, DT_F32>());
    char what[128];
    snprintf(what, sizeof what, "ln dw/db parts, 4 columns a thread, R%d C%d %s", R, C, dyhp ? "dy16" : "dy fp32");
    check(what, pp, ref.data(), p4.size(), 0);
    snprintf(what, sizeof what, "ln dw/db parts, 4 columns a thread, type a constant, R%d C%d %s", R, C, dyhp ? "dy16" : "dy fp32");
    check(what, pcp, ref.data(), pc.size(), 0);
    snprintf(what, sizeof what, "ln dw/db parts, a column a thread, type a constant, R%d C%d %s", R, C, dyhp ? "dy16" : "dy fp32");
    check(what, p1p, ref.data(), p1c.size(), 0);
}

static void layernorm(int R, int C)
{
    const size_t n = (size_t)R * C;
    std::vector<float> x(n), w(C), b(C), y(n), mean(R), rstd(R), dy(n), dres(n), dx(n), dw(C), db(C);
    for (auto &v : x) v = frand(-2, 2);
    for (auto &v : w) v = frand(0.5f, 1.5f);
    for (auto &v : b) v = frand(-0.5f, 0.5f);
    for (auto &v : dy) v = frand(-1, 1);
    for (auto &v : dres) v = frand(-1, 1);
    dx = dres;
    std::vector<float> gy(n), gm(R), gr(R), gdx(n), gdw(C, 0.0f), gdb(C, 0.0f);
    for (int r = 0; r < R; r++) {
        glayernorm_row(x.data() + (size_t)r * C, w.data(), b.data(), gy.data() + (size_t)r * C, C, 1e-5f, &gm[r], &gr[r]);
        gpt_gold_ln_bwd_row(x.data() + (size_t)r * C, w.data(), gm[r], gr[r], dy.data() + (size_t)r * C,
                            dres.data() + (size_t)r * C, gdx.data() + (size_t)r * C, C, 0);
        for (int i = 0; i < C; i++) {
            gdw[i] = fmaf(dy[(size_t)r * C + i], (x[(size_t)r * C + i] - gm[r]) * gr[r], gdw[i]);
            gdb[i] = gdb[i] + dy[(size_t)r * C + i];
        }
    }
    const float *xp = x.data(), *wp = w.data(), *bp = b.data(), *dyp = dy.data();
    float *yp = y.data(), *mp = mean.data(), *rp = rstd.data(), *dxp = dx.data(), *dwp = dw.data(), *dbp = db.data();
    const int rows = 256 / PLUMB_WARP;
    launch(dim3((unsigned)((R + rows - 1) / rows)), dim3(256), [&] { k_ln_fwd_fast(xp, wp, bp, yp, nullptr, mp, rp, R, C, 1e-5f, 0); });
    const int nc = (R + LN_ROWS - 1) / LN_ROWS;
    std::vector<float> part((size_t)nc * 2 * C);
    float *pp = part.data();
    launch(dim3((unsigned)((C + 127) / 128), (unsigned)nc), dim3(128), [&] { k_ln_dwdb_part(xp, mp, rp, dyp, nullptr, 0, pp, R, C); });
    dwdb_vec_check(xp, mp, rp, dyp, nullptr, 0, R, C, part);
    launch(dim3(ln_dwdb_final_grid(C)), dim3(LN_FCOLS * LN_FRUNS), [&] { k_ln_dwdb_final(pp, nc, C, dwp, dbp); });
    launch(dim3((unsigned)((R + rows - 1) / rows)), dim3(256), [&] { k_ln_bwd_fast(xp, wp, mp, rp, dyp, nullptr, 0, dxp, dxp, R, C, 0); });
    char what[96];
    snprintf(what, sizeof what, "layernorm R%d C%d y", R, C);
    check(what, yp, gy.data(), n, 1e-5);
    snprintf(what, sizeof what, "layernorm R%d C%d rstd", R, C);
    check(what, rp, gr.data(), R, 1e-5);
    snprintf(what, sizeof what, "layernorm R%d C%d dx (onto dres)", R, C);
    check(what, dxp, gdx.data(), n, 1e-5);
    snprintf(what, sizeof what, "layernorm R%d C%d dw, db", R, C);
    check(what, dwp, gdw.data(), C, 1e-5);
    check(what, dbp, gdb.data(), C, 1e-5);
}

// The residual add fused in front of a LayerNorm forward (rb16): the sum
// as k_residual16 gives it, then the LayerNorm of that sum, against the same
// forward given the sum: the same bits. ln(x, y16, mean, rstd, ra, rb16,
// rout) launches the forward under test over R rows of C.
template <typename LN> static void residual_ln_check(const char *name, int R, int C, int rt, LN ln)
{
    const size_t n = (size_t)R * C;
    std::vector<float> ra(n), sum2(n), sum1(n), m2(R), r2(R), m1(R), r1(R);
    std::vector<uint16_t> rb(n), yh1(n), yh2(n);
    for (size_t i = 0; i < n; i++) ra[i] = frand(-2, 2), rb[i] = to16_of(frand(-2, 2), rt);
    const float *rap = ra.data();
    const uint16_t *rbp = rb.data();
    float *s1p = sum1.data(), *s2p = sum2.data();
    launch(dim3(2), dim3(64), [&] { k_residual16<1>(rap, rbp, s1p, n, rt); });
    ln(s1p, yh1.data(), m1.data(), r1.data(), nullptr, nullptr, nullptr);
    ln(nullptr, yh2.data(), m2.data(), r2.data(), rap, rbp, s2p);
    std::vector<float> yw1(n), yw2(n);
    for (size_t i = 0; i < n; i++) yw1[i] = from16_of(yh1[i], rt), yw2[i] = from16_of(yh2[i], rt);
    char what[96];
    snprintf(what, sizeof what, "%s R%d C%d rt%d sum", name, R, C, rt);
    check(what, s2p, s1p, n, 0);
    snprintf(what, sizeof what, "%s R%d C%d rt%d y16, mean, rstd", name, R, C, rt);
    check(what, yw2.data(), yw1.data(), n, 0);
    check(what, m2.data(), m1.data(), R, 0);
    check(what, r2.data(), r1.data(), R, 0);
}

// The 16-bit storage of the LayerNorm kernels (the gpt 16-bit pipeline):
// y16 against the fp32 y rounded to rt, dx and dw/db from dy16 against the
// same kernels fed dy rounded to rt in fp32: the same bits (tolerance 0).
static void layernorm16(int R, int C, int rt)
{
    const size_t n = (size_t)R * C;
    std::vector<float> x(n), w(C), b(C), y(n), y16f(n), mean(R), rstd(R), dy(n), dx(n), dx16(n), dw(C), db(C),
        dw16(C), db16(C);
    std::vector<uint16_t> y16(n), dyh(n);
    for (auto &v : x) v = frand(-2, 2);
    for (auto &v : w) v = frand(0.5f, 1.5f);
    for (auto &v : b) v = frand(-0.5f, 0.5f);
    for (size_t i = 0; i < n; i++) {
        dy[i] = gg_round(frand(-1, 1), rt);
        dyh[i] = to16_of(dy[i], rt);
    }
    const float *xp = x.data(), *wp = w.data(), *bp = b.data(), *dyp = dy.data();
    const uint16_t *dyhp = dyh.data();
    float *yp = y.data(), *mp = mean.data(), *rp = rstd.data();
    uint16_t *y16p = y16.data();
    const int rows = 256 / PLUMB_WARP;
    launch(dim3((unsigned)((R + rows - 1) / rows)), dim3(256), [&] { k_ln_fwd_fast(xp, wp, bp, yp, nullptr, mp, rp, R, C, 1e-5f, rt); });
    launch(dim3((unsigned)((R + rows - 1) / rows)), dim3(256), [&] { k_ln_fwd_fast(xp, wp, bp, nullptr, y16p, mp, rp, R, C, 1e-5f, rt); });
    for (size_t i = 0; i < n; i++) y16f[i] = from16_of(y16[i], rt);
    const int nc = (R + LN_ROWS - 1) / LN_ROWS;
    std::vector<float> part((size_t)nc * 2 * C), part16((size_t)nc * 2 * C);
    float *pp = part.data(), *pp16 = part16.data(), *dxp = dx.data(), *dx16p = dx16.data();
    float *dwp = dw.data(), *dbp = db.data(), *dw16p = dw16.data(), *db16p = db16.data();
    launch(dim3((unsigned)((C + 127) / 128), (unsigned)nc), dim3(128), [&] { k_ln_dwdb_part(xp, mp, rp, dyp, nullptr, 0, pp, R, C); });
    launch(dim3((unsigned)((C + 127) / 128), (unsigned)nc), dim3(128), [&] { k_ln_dwdb_part(xp, mp, rp, nullptr, dyhp, rt, pp16, R, C); });
    dwdb_vec_check(xp, mp, rp, nullptr, dyhp, rt, R, C, part16);
    launch(dim3(ln_dwdb_final_grid(C)), dim3(LN_FCOLS * LN_FRUNS), [&] { k_ln_dwdb_final(pp, nc, C, dwp, dbp); });
    launch(dim3(ln_dwdb_final_grid(C)), dim3(LN_FCOLS * LN_FRUNS), [&] { k_ln_dwdb_final(pp16, nc, C, dw16p, db16p); });
    launch(dim3((unsigned)((R + rows - 1) / rows)), dim3(256), [&] { k_ln_bwd_fast(xp, wp, mp, rp, dyp, nullptr, 0, nullptr, dxp, R, C, 0); });
    launch(dim3((unsigned)((R + rows - 1) / rows)), dim3(256), [&] { k_ln_bwd_fast(xp, wp, mp, rp, nullptr, dyhp, rt, nullptr, dx16p, R, C, 0); });
    char what[96];
    snprintf(what, sizeof what, "layernorm16 R%d C%d rt%d y16", R, C, rt);
    check(what, y16f.data(), yp, n, 0);
    snprintf(what, sizeof what, "layernorm16 R%d C%d rt%d dx from dy16", R, C, rt);
    check(what, dx16p, dxp, n, 0);
    snprintf(what, sizeof what, "layernorm16 R%d C%d rt%d dw, db from dy16", R, C, rt);
    check(what, dw16p, dwp, C, 0);
    check(what, db16p, dbp, C, 0);

    // dx's 16-bit copy stored on the way (dx16): dx unchanged, dx16 its cast
    std::vector<float> dxc(n), dxcw(n), dxcast(n);
    std::vector<uint16_t> dxh(n);
    float *dxcp = dxc.data();
    uint16_t *dxhp = dxh.data();
    launch(dim3((unsigned)((R + rows - 1) / rows)), dim3(256),
           [&] { k_ln_bwd_fast(xp, wp, mp, rp, nullptr, dyhp, rt, nullptr, dxcp, R, C, 0, dxhp); });
    for (size_t i = 0; i < n; i++) dxcw[i] = from16_of(dxh[i], rt), dxcast[i] = from16_of(to16_of(dx16[i], rt), rt);
    snprintf(what, sizeof what, "layernorm16 R%d C%d rt%d dx with dx16 stored", R, C, rt);
    check(what, dxcp, dx16p, n, 0);
    snprintf(what, sizeof what, "layernorm16 R%d C%d rt%d dx16 (the cast of dx)", R, C, rt);
    check(what, dxcw.data(), dxcast.data(), n, 0);

    // the residual add fused in front (rb16)
    const unsigned g = (unsigned)((R + rows - 1) / rows);
    residual_ln_check("residual+layernorm16", R, C, rt,
                      [&](const float *x, uint16_t *y, float *m, float *r, const float *ra, const uint16_t *rb, float *ro) {
                          launch(dim3(g), dim3(256), [&] { k_ln_fwd_fast(x, wp, bp, nullptr, y, m, r, R, C, 1e-5f, rt, ra, rb, ro); });
                      });
}

// k_ln_fwd_vec<NQ> (the row in registers; C = 4 NQ warp): y against the
// golden LayerNorm, y16 against y rounded (the same bits), the residual
// fused in front against k_residual16 then the kernel (the same bits), and
// ln_vec_nq's choice (NQ where C and the pointers fit, else 0)
template <int NQ> static void layernorm_vec(int R, int rt)
{
    const int C = 4 * NQ * PLUMB_WARP;
    const size_t n = (size_t)R * C;
    std::vector<float> x(n), w(C), b(C), y(n), y16f(n), mean(R), rstd(R), gy(n), gm(R), gr(R);
    std::vector<uint16_t> y16(n);
    for (auto &v : x) v = frand(-2, 2);
    for (auto &v : w) v = frand(0.5f, 1.5f);
    for (auto &v : b) v = frand(-0.5f, 0.5f);
    for (int r = 0; r < R; r++) {
        glayernorm_row(x.data() + (size_t)r * C, w.data(), b.data(), gy.data() + (size_t)r * C, C, 1e-5f, &gm[r], &gr[r]);
        for (int i = 0; i < C; i++) gy[(size_t)r * C + i] = gg_round(gy[(size_t)r * C + i], rt);
    }
    const float *xp = x.data(), *wp = w.data(), *bp = b.data();
    float *yp = y.data(), *mp = mean.data(), *rp = rstd.data();
    uint16_t *y16p = y16.data();
    const int rows = 256 / PLUMB_WARP;
    const dim3 grid((unsigned)((R + rows - 1) / rows));
    int pick = ln_vec_nq(C, xp, wp, bp, yp, nullptr, nullptr, nullptr, nullptr);
    int pick_odd = ln_vec_nq(C, xp + 1, wp, bp, yp, nullptr, nullptr, nullptr, nullptr) +
                   ln_vec_nq(C + PLUMB_WARP, xp, wp, bp, yp, nullptr, nullptr, nullptr, nullptr);
    printf("%s warp %d: layernorm vec C%d: ln_vec_nq %d (want %d), misaligned or another C %d (want 0)\n",
           pick == NQ && !pick_odd ? "ok  " : "FAIL", PLUMB_WARP, C, pick, NQ, pick_odd);
    pick == NQ && !pick_odd ? g_pass++ : g_fail++;
    launch(grid, dim3(256), [&] { k_ln_fwd_vec<NQ>(xp, wp, bp, yp, nullptr, mp, rp, R, C, 1e-5f, rt); });
    char what[96];
    snprintf(what, sizeof what, "layernorm vec R%d C%d rt%d y", R, C, rt);
    check(what, yp, gy.data(), n, rt ? 1e-2 : 1e-5);
    snprintf(what, sizeof what, "layernorm vec R%d C%d rt%d mean, rstd", R, C, rt);
    check(what, mp, gm.data(), R, 1e-5);
    check(what, rp, gr.data(), R, 1e-5);
    // the backward with the row in registers: k_ln_bwd_fast's bits, from
    // fp32 dy onto dres, and (16-bit) from dy16 with the dx16 copy stored;
    // then dsum (k_colsum_part over that dx16 into the third part,
    // k_ln_dwdb_final) against dx16's rows added in order, dw and db unchanged by it
    {
        std::vector<float> dy(n), dres(n), dxa(n), dxb(n);
        std::vector<uint16_t> dyh(n), dxha(n), dxhb(n);
        for (size_t i = 0; i < n; i++) {
            dy[i] = gg_round(frand(-1, 1), rt ? rt : DT_BF16);
            dyh[i] = to16_of(dy[i], rt ? rt : DT_BF16);
            dres[i] = frand(-1, 1);
        }
        const float *dyp = dy.data(), *drp = dres.data();
        const uint16_t *dyhp = dyh.data();
        float *ap = dxa.data(), *bq = dxb.data();
        uint16_t *hap = dxha.data(), *hbp = dxhb.data();
        const int t16 = rt ? rt : DT_BF16;
        int nq = ln_bwd_vec_nq(C, xp, wp, dyp, nullptr, drp, ap, nullptr);
        printf("%s warp %d: layernorm vec C%d: ln_bwd_vec_nq %d (want %d)\n", nq == NQ ? "ok  " : "FAIL", PLUMB_WARP, C,
               nq, NQ);
        nq == NQ ? g_pass++ : g_fail++;
        launch(grid, dim3(256), [&] { k_ln_bwd_fast(xp, wp, mp, rp, dyp, nullptr, 0, drp, ap, R, C, rt); });
        launch(grid, dim3(256), [&] { k_ln_bwd_fast<NQ>(xp, wp, mp, rp, dyp, nullptr, 0, drp, bq, R, C, rt); });
        snprintf(what, sizeof what, "layernorm vec R%d C%d rt%d dx onto dres (k_ln_bwd_fast's bits)", R, C, rt);
        check(what, bq, ap, n, 0);
        launch(grid, dim3(256), [&] { k_ln_bwd_fast(xp, wp, mp, rp, nullptr, dyhp, t16, nullptr, ap, R, C, 0, hap); });
        launch(grid, dim3(256), [&] { k_ln_bwd_fast<NQ>(xp, wp, mp, rp, nullptr, dyhp, t16, nullptr, bq, R, C, 0, hbp); });
        const bool same = !memcmp(ap, bq, n * sizeof(float)) && dxha == dxhb;
        printf("%s warp %d: layernorm vec R%d C%d t16 %d dx and dx16 from dy16 (k_ln_bwd_fast's bits)\n",
               same ? "ok  " : "FAIL", PLUMB_WARP, R, C, t16);
        same ? g_pass++ : g_fail++;
        const int nc = (R + LN_ROWS - 1) / LN_ROWS;
        std::vector<float> p2((size_t)nc * 2 * C), p3((size_t)nc * 3 * C), dw2(C), db2(C), dw3(C), db3(C), ds(C);
        const dim3 pg((unsigned)((C + 127) / 128), (unsigned)nc), fb(LN_FCOLS * LN_FRUNS);
        launch(pg, dim3(128), [&] { k_ln_dwdb_part(xp, mp, rp, nullptr, dyhp, t16, p2.data(), R, C); });
        launch(dim3(ln_dwdb_final_grid(C)), fb, [&] { k_ln_dwdb_final(p2.data(), nc, C, dw2.data(), db2.data()); });
        launch(pg, dim3(128), [&] { k_ln_dwdb_part(xp, mp, rp, nullptr, dyhp, t16, p3.data(), R, C, 3); });
        launch(dim3((unsigned)((C / 8 + 127) / 128), (unsigned)nc), dim3(128),
               [&] { k_colsum_part<8>(nullptr, hbp, R, C, p3.data() + 2 * C, nullptr, t16, 3 * (size_t)C); });
        launch(dim3(ln_dwdb_final_grid(C, 3)), fb,
               [&] { k_ln_dwdb_final(p3.data(), nc, C, dw3.data(), db3.data(), ds.data()); });
        const bool same_wb = dw2 == dw3 && db2 == db3;
        printf("%s warp %d: layernorm vec R%d C%d t16 %d dw, db the same bits with dsum's part beside them\n",
               same_wb ? "ok  " : "FAIL", PLUMB_WARP, R, C, t16);
        same_wb ? g_pass++ : g_fail++;
        std::vector<float> gs(C, 0.0f);
        for (int r = 0; r < R; r++)
            for (int i = 0; i < C; i++) gs[i] = gs[i] + from16_of(dxhb[(size_t)r * C + i], t16);
        snprintf(what, sizeof what, "layernorm vec R%d C%d rt%d dsum against dx16's rows in order", R, C, rt);
        check(what, ds.data(), gs.data(), C, R <= LN_ROWS ? 0 : 1e-5);
        // the fused chunk kernel (k_ln_bwd_chunk): from dy16 with dx16 and
        // dsum (np 3), its dx, dx16 and [nc, 3C] parts those of the three
        // kernels above; from fp32 dy onto dres (np 2), those of
        // k_ln_bwd_fast<NQ> onto dres and k_ln_dwdb_part from dy
        std::vector<float> smem(lnf_smem_bytes(C) / sizeof(float) + 1), dxf(n), pf((size_t)nc * 3 * C, -1.0f);
        std::vector<uint16_t> dxhf(n);
        float *fp = dxf.data(), *pfp = pf.data(), *sp = smem.data();
        uint16_t *hfp = dxhf.data();
        launch(dim3((unsigned)nc), dim3(LNF_TPB),
               [&] { ln_bwd_chunk<NQ>(xp, wp, mp, rp, nullptr, dyhp, t16, nullptr, fp, R, C, 0, hfp, pfp, 3, sp); });
        const bool fsame = !memcmp(fp, bq, n * sizeof(float)) && dxhf == dxhb && pf == p3;
        printf("%s warp %d: layernorm fused chunks R%d C%d t16 %d from dy16: dx, dx16 and dw/db/dsum parts the three passes' bits\n",
               fsame ? "ok  " : "FAIL", PLUMB_WARP, R, C, t16);
        fsame ? g_pass++ : g_fail++;
        std::vector<float> pa((size_t)nc * 2 * C), pb((size_t)nc * 2 * C, -1.0f);
        launch(grid, dim3(256), [&] { k_ln_bwd_fast<NQ>(xp, wp, mp, rp, dyp, nullptr, 0, drp, bq, R, C, rt); });
        launch(pg, dim3(128), [&] { k_ln_dwdb_part(xp, mp, rp, dyp, nullptr, 0, pa.data(), R, C); });
        float *pbp = pb.data();
        launch(dim3((unsigned)nc), dim3(LNF_TPB),
               [&] { ln_bwd_chunk<NQ>(xp, wp, mp, rp, dyp, nullptr, 0, drp, fp, R, C, rt, nullptr, pbp, 2, sp); });
        const bool fsame2 = !memcmp(fp, bq, n * sizeof(float)) && pa == pb;
        printf("%s warp %d: layernorm fused chunks R%d C%d rt %d from dy onto dres: dx and dw/db parts the two passes' bits\n",
               fsame2 ? "ok  " : "FAIL", PLUMB_WARP, R, C, rt);
        fsame2 ? g_pass++ : g_fail++;
    }
    if (!rt) return;
    launch(grid, dim3(256), [&] { k_ln_fwd_vec<NQ>(xp, wp, bp, nullptr, y16p, mp, rp, R, C, 1e-5f, rt); });
    for (size_t i = 0; i < n; i++) y16f[i] = from16_of(y16[i], rt);
    snprintf(what, sizeof what, "layernorm vec R%d C%d rt%d y16 (y's bits)", R, C, rt);
    check(what, y16f.data(), yp, n, 0);
    residual_ln_check("residual+layernorm vec", R, C, rt,
                      [&](const float *x, uint16_t *y, float *m, float *r, const float *ra, const uint16_t *rb, float *ro) {
                          launch(grid, dim3(256), [&] { k_ln_fwd_vec<NQ>(x, wp, bp, nullptr, y, m, r, R, C, 1e-5f, rt, ra, rb, ro); });
                      });
}

// rt 0: fp32, the gradient in place; rt DT_BF16 or DT_F16: logits
// rounded, the gradient as its 16-bit copy g16 (the 16-bit classifier
// path); tpb threads a block (the kernel takes any multiple of the warp);
// pad8: rows padded to a multiple of 8 (the classifier's layout, steps of
// eight), else ld = V (one value at a time where V % 8 != 0)
static void xent(int R, int V, int rt = 0, int tpb = 256, bool pad8 = true)
{
    std::vector<float> z((size_t)R * V), gz, loss(R), gloss(R), g16f((size_t)R * V);
    std::vector<uint16_t> g16((size_t)R * V);
    std::vector<int32_t> tgt(R);
    for (auto &v : z) v = frand(-4, 4);
    for (int r = 0; r < R; r++) tgt[r] = r % 5 == 4 ? -1 : (int32_t)(frand(0, 1) * (V - 1));
    if (R > 1) tgt[1] = V - 1; // the last column (the tail of a float4 row)
    gz = z;
    for (auto &v : gz) v = gg_round(v, rt);
    for (int r = 0; r < R; r++) {
        float *zr = gz.data() + (size_t)r * V;
        if (tgt[r] < 0) {
            gloss[r] = 0.0f;
            for (int v = 0; v < V; v++) zr[v] = 0.0f;
        } else {
            gloss[r] = gpt_gold_xent_row(zr, V, tgt[r], 0.125f, zr, rt);
        }
    }
    // rows padded to LD = V rounded up to 8 (the classifier's layout); the
    // padding holds NaN, which the kernel must never read
    const int LD = pad8 ? (V + 7) & ~7 : V;
    std::vector<float> zl((size_t)R * LD, NAN);
    std::vector<uint16_t> g16l((size_t)R * LD, 0xffff);
    for (int r = 0; r < R; r++)
        for (int v = 0; v < V; v++) zl[(size_t)r * LD + v] = z[(size_t)r * V + v];
    float *zp = zl.data(), *lp = loss.data();
    uint16_t *gp = rt ? g16l.data() : nullptr;
    const int32_t *tp = tgt.data();
    launch(dim3((unsigned)R), dim3((unsigned)tpb), [&] { k_xent_rows_fast(zp, gp, tp, V, LD, 0.125f, 1, lp, rt); });
    if (rt) {
        // the 16-bit logits (the GEMM's rt output, PLUMB_GPT_XENT16): the same
        // rounded logits as bf16 values, the gradient over them in place;
        // the padding NaN bits: the same loss and gradient bits
        std::vector<uint16_t> z16((size_t)R * LD, 0xffff);
        std::vector<float> l16(R, NAN);
        for (int r = 0; r < R; r++)
            for (int v = 0; v < V; v++) z16[(size_t)r * LD + v] = to16_of(gg_round(z[(size_t)r * V + v], rt), rt);
        uint16_t *z16p = z16.data();
        float *l16p = l16.data();
        std::vector<uint16_t> zs16 = z16; // the staged kernel's input, before the fast one overwrites z16
        launch(dim3((unsigned)R), dim3((unsigned)tpb), [&] { k_xent_rows_fast(z16p, z16p, tp, V, LD, 0.125f, 1, l16p, rt); });
        if (pad8) {
            // k_xent_rows_staged's rows (the row staged in shared memory first):
            // k_xent_rows_fast's bits, loss and gradient, the padding zeroed
            std::vector<uint16_t> stage((size_t)LD, 0xffff);
            std::vector<float> ls(R, NAN);
            static float red[PLUMB_WARP];
            static unsigned long long bar;
            uint16_t *zsp = zs16.data(), *stp = stage.data();
            float *lsp = ls.data();
            launch(dim3((unsigned)R), dim3((unsigned)tpb),
                   [&] { xent_row_staged16(zsp, stp, &bar, tp, V, LD, 0.125f, 1, lsp, rt, red); });
            const bool st_same = !memcmp(lsp, l16p, R * sizeof(float)) && zs16 == z16;
            printf("%s warp %d: cross-entropy rows R%d V%d rt%d tpb %d staged in shared memory: the two-read rows' bits\n",
                   st_same ? "ok  " : "FAIL", PLUMB_WARP, R, V, rt, tpb);
            st_same ? g_pass++ : g_fail++;
        }
        const bool same = !memcmp(l16p, lp, R * sizeof(float)) && z16 == g16l;
        printf("%s warp %d: cross-entropy rows R%d V%d rt%d tpb %d from 16-bit logits in place: the fp32 logits' bits\n",
               same ? "ok  " : "FAIL", PLUMB_WARP, R, V, rt, tpb);
        same ? g_pass++ : g_fail++;
    }
    for (int r = 0; r < R; r++)
        for (int v = 0; v < V; v++) {
            z[(size_t)r * V + v] = zl[(size_t)r * LD + v];
            g16[(size_t)r * V + v] = g16l[(size_t)r * LD + v];
        }
    const float *got = z.data();
    if (rt) {
        for (size_t i = 0; i < g16.size(); i++) g16f[i] = from16_of(g16[i], rt);
        got = g16f.data();
    }
    char what[96];
    const char *tn = rt == DT_F16 ? "fp16" : rt ? "bf16" : "fp32";
    snprintf(what, sizeof what, "cross-entropy rows R%d V%d ld %d %s tpb %d loss", R, V, LD, tn, tpb);
    check(what, lp, gloss.data(), R, 1e-5);
    snprintf(what, sizeof what, "cross-entropy rows R%d V%d ld %d %s tpb %d gradient", R, V, LD, tn, tpb);
    // bf16: a gradient one rounding step from the golden one where the
    // fast exp differs in the last place
    check(what, got, gz.data(), (size_t)R * V, rt ? 1e-2 : 1e-5);
}

// the loss sum (k_xent_sum) against the chain it must equal bit for bit:
// double adds of the valid rows' losses in ascending r from +0.0, and the count
static void xsum(const char *what, std::vector<float> loss, std::vector<int32_t> tgt)
{
    const int R = (int)loss.size();
    double s = 0.0, n = 0.0;
    for (int r = 0; r < R; r++)
        if (tgt[r] >= 0) s += (double)loss[r], n += 1.0;
    double sc[2] = {-1.0, -1.0};
    const float *lp = loss.data();
    const int32_t *tp = tgt.data();
    double *scp = sc;
    launch(dim3(1), dim3(XSUM_TPB), [&] { k_xent_sum(lp, tp, R, scp); });
    const bool same = !memcmp(&sc[0], &s, sizeof s) && sc[1] == n;
    printf("%s warp %d: loss sum R%d (%s): %.17g n %.0f, the chain %.17g n %.0f\n", same ? "ok  " : "FAIL", PLUMB_WARP,
           R, what, sc[0], sc[1], s, n);
    same ? g_pass++ : g_fail++;
}
static void xsums()
{
    for (int R : {0, 1, 7, 5000, 16384}) {
        std::vector<float> l(R);
        std::vector<int32_t> t(R);
        for (int r = 0; r < R; r++) l[r] = frand(0.5f, 11.0f), t[r] = r % 7 == 3 ? -1 : r;
        xsum("losses 0.5..11, a row in 7 without a target", l, t);
        if (R < 5000) continue;
        std::vector<float> m = l;
        m[R / 2] = 1e-6f; // far below the rest: the adds round, the chain's order decides
        xsum("one loss of 1e-6", m, t);
        m = l;
        for (int r = 0; r < R; r++) m[r] = frand(-1e-3f, 1e-3f) + (r % 3 ? 0.0f : 2.5f);
        xsum("signs mixed, small and large", m, t);
        m = l;
        m[18] = NAN; // rows with a target (r % 7 != 3)
        xsum("a NaN", m, t);
        m = l;
        m[R - 2] = INFINITY;
        xsum("an infinity", m, t);
        m = l;
        m[5] = 1e-40f; // subnormal
        xsum("a subnormal", m, t);
        std::vector<int32_t> none(R, -1);
        xsum("no row with a target", l, none);
        for (int r = 0; r < R; r++) m[r] = r % 2 ? -0.0f : 0.0f;
        xsum("zeros of both signs", m, t);
        for (int r = 0; r < R; r++) m[r] = (float)(r % 13) * 0.25f;
        xsum("quarters (every add exact)", m, t);
        for (int r = 0; r < R; r++) m[r] = r % 2 ? 3e30f : -3e30f + frand(0, 1);
        xsum("+-3e30 (the adds round)", m, t);
    }
}
static void gelu()
{
    std::vector<float> x(4001), y(4001), g(4001), gy(4001), gg(4001);
    for (int i = 0; i < 4001; i++) x[i] = -10.0f + 0.005f * i;
    for (int i = 0; i < 4001; i++) {
        y[i] = fast_gelu(x[i]);
        gy[i] = ggeluf(x[i]);
        g[i] = fast_gelu_grad(x[i]);
        gg[i] = ggelu_gradf(x[i]);
    }
    /* tanhf saturates to -1 below x = -5: the fast gradient is 0 where the
     * golden one is -5e-7 (relative to 1% of the largest, 5e-5) */
    check("gelu", y.data(), gy.data(), 4001, 1e-5);
    check("gelu gradient", g.data(), gg.data(), 4001, 1e-4);
}

// the GELU over 16-bit storage (gpu/train_gpt_kern.cuh), eight elements a
// thread and one, against the per-element definition, bit for bit: n with a
// tail past the last whole vector, and n below one vector
static void gelu16(size_t n, int rt)
{
    std::vector<uint16_t> pre(n), y(n), dx16(n), want_y(n), want_dx(n);
    std::vector<float> dx(n);
    for (size_t i = 0; i < n; i++) {
        pre[i] = to16_of(frand(-7, 7), rt);
        dx[i] = frand(-3, 3);
        want_y[i] = to16_of(fast_gelu(from16_of(pre[i], rt)), rt);
        want_dx[i] = to16_of(dx[i] * fast_gelu_grad(from16_of(pre[i], rt)), rt);
    }
    const uint16_t *pp = pre.data();
    const float *dp = dx.data();
    uint16_t *yp = y.data(), *op = dx16.data();
    for (int V : {8, 1}) {
        std::fill(y.begin(), y.end(), 0x7fff), std::fill(dx16.begin(), dx16.end(), 0x7fff);
        if (V == 8) {
            launch(dim3(2), dim3(256), [&] { k_gelu16<8>(pp, yp, n, rt); });
            launch(dim3(2), dim3(256), [&] { k_dgelu16<8>(dp, pp, op, n, rt); });
        } else {
            launch(dim3(2), dim3(256), [&] { k_gelu16<1>(pp, yp, n, rt); });
            launch(dim3(2), dim3(256), [&] { k_dgelu16<1>(dp, pp, op, n, rt); });
        }
        const int ok_y = y == want_y, ok_d = dx16 == want_dx;
        printf("%s gelu16 n %zu rt%d V %d: y %s\n", ok_y ? "ok  " : "FAIL", n, rt, V, ok_y ? "the definition's bits" : "differs");
        printf("%s dgelu16 n %zu rt%d V %d: dx %s\n", ok_d ? "ok  " : "FAIL", n, rt, V, ok_d ? "the definition's bits" : "differs");
        ok_y ? g_pass++ : g_fail++;
        ok_d ? g_pass++ : g_fail++;
    }
}

// the residual add over 16-bit b (gpu/train_gpt_kern.cuh), eight values a
// thread and one, against the definition, bit for bit (n with a tail)
// the token + position embedding (encoder_fwd): k_enc_fwd and the float4
// form k_enc_fwd4 against the definition round(wte[tok] + wpe[t]), bit for
// bit, over R = B T rows of C (several passes of a small grid)
static void encoder(int B, int T, int C, int V, int rt)
{
    const size_t R = (size_t)B * T, n = R * C;
    std::vector<float> wte((size_t)V * C), wpe((size_t)T * C), y1(n, NAN), y4(n, NAN), want(n);
    std::vector<int32_t> tok(R);
    for (auto &v : wte) v = frand(-2, 2);
    for (auto &v : wpe) v = frand(-2, 2);
    for (size_t r = 0; r < R; r++) tok[r] = (int32_t)(frand(0, 1) * (V - 1));
    for (size_t r = 0; r < R; r++)
        for (int c = 0; c < C; c++)
            want[r * C + c] = gg_round(wte[(size_t)tok[r] * C + c] + wpe[(r % T) * C + c], rt);
    const float *wp = wte.data(), *pp = wpe.data();
    const int32_t *tp = tok.data();
    float *o1 = y1.data(), *o4 = y4.data();
    launch(dim3(3), dim3(64), [&] { k_enc_fwd(wp, pp, tp, o1, R, T, C, rt); });
    char what[96];
    snprintf(what, sizeof what, "encoder B%d T%d C%d rt%d: the definition's bits", B, T, C, rt);
    check(what, o1, want.data(), n, 0);
    if (C % 4) return;
    launch(dim3(3), dim3(64), [&] {
        k_enc_fwd4((const float4 *)wp, (const float4 *)pp, tp, (float4 *)o4, (unsigned)(n / 4), T, (unsigned)(C / 4), rt);
    });
    snprintf(what, sizeof what, "encoder B%d T%d C%d rt%d four values a thread: the definition's bits", B, T, C, rt);
    check(what, o4, want.data(), n, 0);
}

static void residual16(size_t n, int rt)
{
    std::vector<float> a(n), y(n), want(n);
    std::vector<uint16_t> b(n);
    for (size_t i = 0; i < n; i++) {
        a[i] = frand(-4, 4), b[i] = to16_of(frand(-4, 4), rt);
        want[i] = a[i] + from16_of(b[i], rt);
    }
    const float *ap = a.data();
    const uint16_t *bp = b.data();
    float *yp = y.data();
    for (int V : {8, 1}) {
        std::fill(y.begin(), y.end(), NAN);
        if (V == 8) launch(dim3(2), dim3(64), [&] { k_residual16<8>(ap, bp, yp, n, rt); });
        else launch(dim3(2), dim3(64), [&] { k_residual16<1>(ap, bp, yp, n, rt); });
        char what[96];
        snprintf(what, sizeof what, "residual16 n %zu rt%d V %d: the definition's bits", n, rt, V);
        check(what, yp, want.data(), n, 0);
    }
}

// the fast column sums (gpu/train_gpt_kern.cuh: the linear layers' dbias),
// eight columns a thread and one, against the definition written here (rows
// in chunks of 64 ascending, the chunks in order), bit for bit: from fp32 dy
// with its 16-bit copy stored on the way, and from 16-bit dy
static void colsum(int B, int N, int rt)
{
    std::vector<float> dy((size_t)B * N), want(N), got(N);
    std::vector<uint16_t> src16((size_t)B * N), dy16((size_t)B * N);
    for (size_t i = 0; i < dy.size(); i++) src16[i] = to16_of(frand(-1, 1) * (i % 5 ? 1.0f : 300.0f), rt), dy[i] = from16_of(src16[i], rt);
    const int nc = (B + CS_ROWS - 1) / CS_ROWS;
    for (int n = 0; n < N; n++) {
        float t = 0.0f;
        for (int c = 0; c < nc; c++) {
            float s = 0.0f;
            for (int b = c * CS_ROWS; b < B && b < (c + 1) * CS_ROWS; b++) s = s + dy[(size_t)b * N + n];
            t = t + s;
        }
        want[n] = t;
    }
    std::vector<float> part((size_t)nc * N);
    float *pp = part.data(), *gp = got.data();
    const float *dp = dy.data();
    const uint16_t *sp = src16.data();
    uint16_t *op = dy16.data();
    for (int V : {8, 1}) {
        if (V == 8 && N % 8) continue;
        for (int from16 : {0, 1}) {
            std::fill(part.begin(), part.end(), NAN), std::fill(dy16.begin(), dy16.end(), 0x7fff);
            const float *d = from16 ? nullptr : dp;
            const uint16_t *s16 = from16 ? sp : nullptr;
            uint16_t *o16 = from16 ? nullptr : op;
            const dim3 grid(2, (unsigned)nc); // 2 x 64 threads: column loops of several passes
            if (V == 8) launch(grid, dim3(64), [&] { k_colsum_part<8>(d, s16, B, N, pp, o16, rt); });
            else launch(grid, dim3(64), [&] { k_colsum_part<1>(d, s16, B, N, pp, o16, rt); });
            launch(dim3(1), dim3(64), [&] { k_colsum_chunks(pp, nc, N, gp); });
            char what[128];
            snprintf(what, sizeof what, "colsum B%d N%d rt%d V %d from %s: the definition's bits", B, N, rt, V, from16 ? "16-bit" : "fp32");
            check(what, gp, want.data(), N, 0);
            if (V == 8 && from16 && (rt == DT_BF16 || rt == DT_F16)) {
                // the compile-time form colsum_part_launch takes (src16, rt constant, no store): the same parts
                std::vector<float> pc((size_t)nc * N, NAN);
                float *pcp = pc.data();
                if (rt == DT_BF16) launch(grid, dim3(64), [&] { k_colsum_part<8, 1, DT_BF16, 0>(d, s16, B, N, pcp, nullptr, rt); });
                else launch(grid, dim3(64), [&] { k_colsum_part<8, 1, DT_F16, 0>(d, s16, B, N, pcp, nullptr, rt); });
                snprintf(what, sizeof what, "colsum B%d N%d rt%d compile-time form: the runtime form's parts", B, N, rt);
                check(what, pcp, pp, pc.size(), 0);
            }
            if (!from16) {
                const int ok = dy16 == src16;
                printf("%s colsum B%d N%d rt%d V %d: dy's 16-bit copy %s\n", ok ? "ok  " : "FAIL", B, N, rt, V, ok ? "exact" : "differs");
                ok ? g_pass++ : g_fail++;
            }
        }
    }
}

// sumsq's per-block sums (gpu/train_sumsq.cuh) against the definition of
// src/dev/train_ops.h, bit for bit: n not a multiple of the block, fewer
// elements than one block, a group of 32 blocks cut short, a window
// [bl0, bl0 + nbl) that starts inside the array; whole groups of 32 blocks
// take the float4 path when x is 16-byte aligned (skew 0) and the staged one
// when it is not (skew 1: x one float past an aligned address)
static void sumsq(size_t n, size_t bl0, size_t nbl, int skew = 0)
{
    std::vector<float> store(n + 4);
    float *x = store.data() + ((16 - ((uintptr_t)store.data() & 15)) & 15) / 4 + skew;
    uint32_t st = 12345u + (uint32_t)n;
    for (size_t i = 0; i < n; i++) {
        st = st * 1664525u + 1013904223u;
        x[i] = ((float)(st >> 8) / 16777216.0f - 0.5f) * (i % 7 == 0 ? 1e3f : 1e-2f);
    }
    std::vector<double> got(nbl, -1.0), want(nbl, 0.0);
    const float *xp = x;
    double *gp = got.data();
    launch(dim3((unsigned)((nbl + SQ_GROUP - 1) / SQ_GROUP)), dim3(SQ_TPB), [&] { sumsq_group(xp, n, bl0, nbl, gp); });
    size_t bad = 0;
    for (size_t j = 0; j < nbl; j++) {
        double acc = 0.0;
        for (size_t i = (bl0 + j) * SUMSQ_BLK; i < (bl0 + j + 1) * SUMSQ_BLK && i < n; i++) acc += (double)x[i] * (double)x[i];
        want[j] = acc;
        if (memcmp(&got[j], &want[j], sizeof acc)) bad++;
    }
    char what[96];
    snprintf(what, sizeof what, "sumsq blocks n %zu [%zu, +%zu) skew %d: the definition's bits", n, bl0, nbl, skew);
    if (!bad) {
        printf("ok   %s\n", what);
        g_pass++;
    } else {
        printf("FAIL %s: %zu of %zu blocks differ\n", what, bad, nbl);
        g_fail++;
    }
}

// The block sums into out[0] (gpu/train_sumsq.cuh) against src/dev/train_ops.h's
// two orders, bit for bit: golden adds part[0..k) to tot in order; fast adds
// to tot, in order, each TRAIN_SUMSQ_GROUP-long group's sum from 0.0. Block
// sums of mixed magnitudes so that the orders round differently (checked):
// a k with a partial last group, one group, fewer than a group, and more
// groups than one tile of the fast kernel's shared memory.
// gpu/sum_slices.cuh: the slice sum four elements a thread (k_sum_slices4,
// its loads in groups of eight slices) and one a thread (k_sum_slices)
// against the host's slice-order loop: the same bits, for S on both sides of
// a group's boundary. The parts mix magnitudes 1e-3 and 1e3 so that another
// order gives other bits, and the check shows it can tell (the reverse order
// differs somewhere).
static void sum_slices(int S, size_t n)
{
    std::vector<float> part((size_t)S * n), a(n), b(n), h(n), rev(n);
    for (auto &v : part) v = frand(-1, 1) * (frand(0, 1) < 0.5f ? 1e-3f : 1e3f);
    for (size_t j = 0; j < n; j++) {
        float s = part[j], r = part[(size_t)(S - 1) * n + j];
        for (int i = 1; i < S; i++) s = s + part[(size_t)i * n + j];
        for (int i = S - 2; i >= 0; i--) r = r + part[(size_t)i * n + j];
        h[j] = s;
        rev[j] = r;
    }
    const float *pp = part.data();
    float *ap = a.data(), *bp = b.data();
    launch(dim3(3), dim3(64), [&] { k_sum_slices(pp, S, n, ap); });
    launch(dim3(2), dim3(64), [&] { k_sum_slices4((const float4 *)pp, S, n / 4, (float4 *)bp); });
    const bool same = !memcmp(ap, h.data(), n * sizeof(float)) && !memcmp(bp, h.data(), n * sizeof(float));
    const bool tells = S < 3 || memcmp(rev.data(), h.data(), n * sizeof(float));
    printf("%s warp %d: slice sums S %d n %zu: one and four a thread, the slice order's bits%s\n",
           same && tells ? "ok  " : "FAIL", PLUMB_WARP, S, n, tells ? "" : " (the reverse order gives the same bits)");
    same && tells ? g_pass++ : g_fail++;
}

static void sumsq_orders(size_t k)
{
    std::vector<double> part(k);
    uint64_t st = 0x9e3779b97f4a7c15ull + k;
    for (size_t i = 0; i < k; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        part[i] = (double)(st >> 11) / 9007199254740992.0 * (i % 5 == 0 ? 1e6 : 1e-3);
    }
    const double tot0 = 0.75;
    double seq = tot0, grp = tot0;
    for (size_t i = 0; i < k; i++) seq += part[i];
    for (size_t g0 = 0; g0 < k; g0 += TRAIN_SUMSQ_GROUP) {
        double a = 0.0;
        for (size_t i = g0; i < g0 + TRAIN_SUMSQ_GROUP && i < k; i++) a += part[i];
        grp += a;
    }
    double got_seq = -1, got_grp = -1;
    const double *pp = part.data();
    launch(dim3(1), dim3(256), [&] {
        double t = ordered_dsum(pp, k, tot0);
        if (threadIdx.x == 0) got_seq = t;
    });
    launch(dim3(1), dim3(256), [&] {
        double t = grouped_dsum(pp, k, tot0);
        if (threadIdx.x == 0) got_grp = t;
    });
    const int ok_seq = !memcmp(&got_seq, &seq, 8), ok_grp = !memcmp(&got_grp, &grp, 8);
    printf("%s sumsq golden order, %zu block sums: %.17g vs %.17g\n", ok_seq ? "ok  " : "FAIL", k, got_seq, seq);
    printf("%s sumsq fast order, %zu block sums: %.17g vs %.17g\n", ok_grp ? "ok  " : "FAIL", k, got_grp, grp);
    ok_seq ? g_pass++ : g_fail++;
    ok_grp ? g_pass++ : g_fail++;
    if (k > TRAIN_SUMSQ_GROUP) { // else the two orders are one chain
        const int differ = memcmp(&seq, &grp, 8) != 0;
        printf("%s sumsq orders differ at %zu block sums (the check can tell them apart)\n", differ ? "ok  " : "FAIL", k);
        differ ? g_pass++ : g_fail++;
    }
}

// ---- the vision kernels over 16-bit storage (resnet's 16-bit activations) ----

// got (16-bit values) against want (fp32 values): the same bits
static void check16(const char *what, const std::vector<uint16_t> &got, const std::vector<float> &want, int rt)
{
    std::vector<float> g(got.size());
    for (size_t i = 0; i < got.size(); i++) g[i] = from16_rt(got[i], rt);
    size_t bad = 0;
    for (size_t i = 0; i < got.size(); i++) bad += got[i] != to16_rt(want[i], rt);
    printf("%s warp %d: %s: %zu of %zu 16-bit values differ from the fp32 kernel's\n", bad ? "FAIL" : "ok  ", PLUMB_WARP,
           what, bad, got.size());
    bad ? g_fail++ : g_pass++;
}

// BN's one-pass sums over [M, C] (kind, NS) for storage S, as train_vision.cu
// launches them: V = VW where C allows, else 1
template <typename S, int VW>
static void bn_sums(int kind, int NS, const S *x, const S *dy, const uint16_t *mask, const float *mean,
                    const float *rstd, size_t M, int C, float *out, float *c0, float *c1, int rt,
                    const float *mgamma = nullptr, const float *mbeta = nullptr)
{
    const int V = C % VW == 0 ? VW : 1;
    const bn_geom g = bn_geom_of(M, C, V);
    std::vector<float> part((size_t)g.nby * NS * C);
    float *pp = part.data();
    const dim3 grid(g.ncb, g.nby);
    const bn_red_part_fn<S> f = V == VW ? bn_red_part_of<S, VW>(NS, kind) : bn_red_part_of<S, 1>(NS, kind);
    launch(grid, dim3(256), [&] { f(x, dy, mask, mgamma, mbeta, mean, rstd, M, C, g.rpb, g.QX, g.RY, pp, rt); });
    {   // the rows loaded ahead change nothing: one row at a time gives the same partial sums' bits
        std::vector<float> p1(part.size(), NAN);
        float *q = p1.data();
        const bn_red_part_fn<S> f1 = V == VW ? bn_red_part_of<S, VW, 1>(NS, kind) : bn_red_part_of<S, 1, 1>(NS, kind);
        launch(grid, dim3(256), [&] { f1(x, dy, mask, mgamma, mbeta, mean, rstd, M, C, g.rpb, g.QX, g.RY, q, rt); });
        const int same = memcmp(p1.data(), part.data(), part.size() * sizeof(float)) == 0;
        printf("%s warp %d: bn partial sums kind %d NS %d M%zu C%d V%d: loaded %d rows ahead = one at a time\n",
               same ? "ok  " : "FAIL", PLUMB_WARP, kind, NS, M, C, V, kind == BV_DY ? BN_RED_U : BN_RED_U1);
        same ? g_pass++ : g_fail++;
    }
    const int K = NS * C;
    launch(dim3((unsigned)((K + 31) / 32)), dim3(256), [&] {
        // k_bn_red_final runs as 32 x 8 threads: the emulator's blocks are 1-D
        const unsigned t = threadIdx.x;
        threadIdx = dim3(t % 32, t / 32);
        k_bn_red_final(pp, (int)g.nby, K, C, out, c0, c1);
    });
}

static void vision16(size_t M, int C, int rt)
{
    const size_t n = M * (size_t)C;
    std::vector<float> x(n), z(n), dy(n), mk(n), dym(n), mean(C), rstd(C), gam(C), bet(C), mdy(2 * C);
    std::vector<uint16_t> x16(n), z16(n), dy16(n), mk16(n);
    for (size_t i = 0; i < n; i++) {
        x[i] = tv_round(frand(-2, 3), rt), z[i] = tv_round(frand(-1, 1), rt), dy[i] = tv_round(frand(-1, 1), rt);
        mk[i] = i % 7 ? tv_round(frand(-1, 1), rt) : 0.0f; // some exact zeros: masked
        dym[i] = mk[i] > 0.0f ? dy[i] : 0.0f;
        x16[i] = to16_rt(x[i], rt), z16[i] = to16_rt(z[i], rt), dy16[i] = to16_rt(dy[i], rt), mk16[i] = to16_rt(mk[i], rt);
    }
    for (int c = 0; c < C; c++) gam[c] = frand(0.5f, 1.5f), bet[c] = frand(-0.3f, 0.3f);
    char what[128];
    // statistics: sums of x, of (x - mean)^2, then the backward's dy and dy xhat (masked), against float64
    std::vector<double> ref(2 * C, 0.0);
    for (size_t i = 0; i < n; i++) ref[i % C] += x[i];
    for (int c = 0; c < C; c++) mean[c] = (float)(ref[c] / (double)M);
    std::vector<float> out(2 * C), want(2 * C), o32(2 * C);
    bn_sums<uint16_t, 8>(BV_X, 1, x16.data(), nullptr, nullptr, nullptr, nullptr, M, C, out.data(), nullptr, nullptr, rt);
    for (int c = 0; c < C; c++) want[c] = (float)ref[c];
    snprintf(what, sizeof what, "bn sums of x16 M%zu C%d rt%d (float64)", M, C, rt);
    check(what, out.data(), want.data(), C, 1e-4);
    std::fill(ref.begin(), ref.end(), 0.0);
    for (size_t i = 0; i < n; i++) {
        const float dd = x[i] - mean[i % C];
        ref[i % C] += (double)(dd * dd);
    }
    bn_sums<uint16_t, 8>(BV_SQ, 1, x16.data(), nullptr, nullptr, mean.data(), nullptr, M, C, out.data(), nullptr, nullptr, rt);
    for (int c = 0; c < C; c++) want[c] = (float)ref[c], rstd[c] = 1.0f / sqrtf((float)(ref[c] / (double)M) + 1e-5f);
    snprintf(what, sizeof what, "bn sums of squares of x16 M%zu C%d rt%d (float64)", M, C, rt);
    check(what, out.data(), want.data(), C, 1e-4);
    std::fill(ref.begin(), ref.end(), 0.0);
    for (size_t i = 0; i < n; i++) {
        const int c = (int)(i % C);
        ref[c] += dym[i];
        ref[C + c] += (double)(dym[i] * tv_bn_xhat(x[i], mean[c], rstd[c]));
    }
    std::vector<float> dg(C), db(C);
    bn_sums<uint16_t, 8>(BV_DY, 2, x16.data(), dy16.data(), mk16.data(), mean.data(), rstd.data(), M, C, out.data(),
                         db.data(), dg.data(), rt);
    for (int j = 0; j < 2 * C; j++) want[j] = (float)ref[j];
    snprintf(what, sizeof what, "bn backward sums of x16, dy16 masked M%zu C%d rt%d (float64)", M, C, rt);
    check(what, out.data(), want.data(), 2 * (size_t)C, 1e-4);
    snprintf(what, sizeof what, "bn backward dbeta, dgamma copies M%zu C%d rt%d", M, C, rt);
    check(what, db.data(), out.data(), C, 0);
    check(what, dg.data(), out.data() + C, C, 0);
    // the fp32 kernel's sums of the masked dy (stored): within the same bound
    bn_sums<float, 4>(BV_DY, 2, x.data(), dym.data(), nullptr, mean.data(), rstd.data(), M, C, o32.data(), nullptr, nullptr, 0);
    snprintf(what, sizeof what, "bn backward sums 16-bit against fp32 kernel M%zu C%d rt%d", M, C, rt);
    check(what, out.data(), o32.data(), 2 * (size_t)C, 1e-4);
    for (int j = 0; j < 2 * C; j++) mdy[j] = out[j] / (float)M;

    // elementwise: 16-bit kernels (V = 8 where C allows) against the fp32 kernels (V = 4 / 1) on the same values
    const int V16 = C % 8 == 0 ? 8 : 1, V32 = C % 4 == 0 ? 4 : 1;
    const size_t nv16 = n / V16, nv32 = n / V32;
    const unsigned gr = 3; // grid-stride loops: a few blocks
    // the BN kernels in bn_ew_of's geometry, at most 3 row blocks: each thread walks several rows
    const bn_ew e16 = bn_ew_of(M, C, V16, 256, 3 * ((C / V16 + 31) / 32)), e32 = bn_ew_of(M, C, V32, 256, 3 * ((C / V32 + 31) / 32));
    const dim3 g16(e16.gx, e16.gy), g32(e32.gx, e32.gy);
    const int q16 = e16.QX, q32 = e32.QX;
    std::vector<float> y(n);
    std::vector<uint16_t> y16(n);
    for (int zr = 0; zr < 2; zr++) {
        const float *zp = zr ? z.data() : nullptr;
        const uint16_t *z16p = zr ? z16.data() : nullptr;
        float *yp = y.data();
        uint16_t *y16p = y16.data();
        const float *xp = x.data(), *mp = mean.data(), *rp = rstd.data(), *gp = gam.data(), *bp = bet.data();
        const uint16_t *x16p = x16.data();
        std::fill(y.begin(), y.end(), NAN);
        if (V32 == 4) launch(g32, dim3(256), [&] { k_bn_apply<float, 4>(xp, mp, rp, gp, bp, zp, yp, nullptr, M, C, q32, zr, rt); });
        else launch(g32, dim3(256), [&] { k_bn_apply<float, 1>(xp, mp, rp, gp, bp, zp, yp, nullptr, M, C, q32, zr, rt); });
        if (V16 == 8) launch(g16, dim3(256), [&] { k_bn_apply<uint16_t, 8>(x16p, mp, rp, gp, bp, z16p, nullptr, y16p, M, C, q16, zr, rt); });
        else launch(g16, dim3(256), [&] { k_bn_apply<uint16_t, 1>(x16p, mp, rp, gp, bp, z16p, nullptr, y16p, M, C, q16, zr, rt); });
        std::vector<float> want_y(n);
        for (size_t i = 0; i < n; i++) {
            const int c = (int)(i % C);
            want_y[i] = tv_round(tv_bn_apply(x[i], mean[c], rstd[c], gam[c], bet[c], zr ? &z[i] : nullptr, zr), rt);
        }
        snprintf(what, sizeof what, "bn_apply fp32 kernel%s M%zu C%d rt%d: the definition's bits", zr ? " (z, relu)" : "", M, C, rt);
        check(what, y.data(), want_y.data(), n, 0);
        snprintf(what, sizeof what, "bn_apply16o%s M%zu C%d rt%d", zr ? " (z, relu)" : "", M, C, rt);
        check16(what, y16, y, rt);
    }
    {   // a projection block's two BNs in one pass (k_bn_apply2: the shortcut's z from dy16, gamma and beta
        // swapped) against the two k_bn_apply calls it stands for: the same bits
        std::vector<uint16_t> zt(n), want(n), got(n, 0x7fff);
        const uint16_t *x16p = x16.data(), *zx = dy16.data();
        uint16_t *ztp = zt.data(), *wp = want.data(), *op = got.data();
        const float *mp = mean.data(), *rp = rstd.data(), *gp = gam.data(), *bp = bet.data();
        if (V16 == 8) {
            launch(g16, dim3(256), [&] { k_bn_apply<uint16_t, 8>(zx, mp, rp, bp, gp, nullptr, nullptr, ztp, M, C, q16, 0, rt); });
            launch(g16, dim3(256), [&] { k_bn_apply<uint16_t, 8>(x16p, mp, rp, gp, bp, ztp, nullptr, wp, M, C, q16, 1, rt); });
            launch(g16, dim3(256), [&] { k_bn_apply2<8>(x16p, mp, rp, gp, bp, zx, mp, rp, bp, gp, op, M, C, q16, 1, rt); });
        } else {
            launch(g16, dim3(256), [&] { k_bn_apply<uint16_t, 1>(zx, mp, rp, bp, gp, nullptr, nullptr, ztp, M, C, q16, 0, rt); });
            launch(g16, dim3(256), [&] { k_bn_apply<uint16_t, 1>(x16p, mp, rp, gp, bp, ztp, nullptr, wp, M, C, q16, 1, rt); });
            launch(g16, dim3(256), [&] { k_bn_apply2<1>(x16p, mp, rp, gp, bp, zx, mp, rp, bp, gp, op, M, C, q16, 1, rt); });
        }
        size_t pos = 0;
        for (size_t i = 0; i < n; i++) pos += from16_rt(want[i], rt) > 0.0f;
        const int ok = got == want && pos > 0 && pos < n;
        printf("%s bn_apply2_16o M%zu C%d rt%d (%zu of %zu above 0): %s\n", ok ? "ok  " : "FAIL", M, C, rt, pos, n,
               ok ? "the two k_bn_apply calls' bits" : "differs (or the ReLU is all or nothing)");
        ok ? g_pass++ : g_fail++;
    }
    {   // backward data, masked, in place (dx16 is dy16)
        const float *xp = x.data(), *mp = mean.data(), *rp = rstd.data(), *gp = gam.data(), *md = mdy.data(), *dyp = dym.data();
        float *yp = y.data();
        std::vector<uint16_t> io = dy16;
        uint16_t *iop = io.data();
        const uint16_t *x16p = x16.data(), *m16p = mk16.data();
        std::fill(y.begin(), y.end(), NAN);
        if (V32 == 4) launch(g32, dim3(256), [&] { k_bn_bwd_data<float, 4>(xp, dyp, nullptr, nullptr, mp, rp, gp, md, yp, nullptr, M, C, q32, rt); });
        else launch(g32, dim3(256), [&] { k_bn_bwd_data<float, 1>(xp, dyp, nullptr, nullptr, mp, rp, gp, md, yp, nullptr, M, C, q32, rt); });
        if (V16 == 8) launch(g16, dim3(256), [&] { k_bn_bwd_data<uint16_t, 8>(x16p, iop, m16p, nullptr, mp, rp, gp, md, nullptr, iop, M, C, q16, rt); });
        else launch(g16, dim3(256), [&] { k_bn_bwd_data<uint16_t, 1>(x16p, iop, m16p, nullptr, mp, rp, gp, md, nullptr, iop, M, C, q16, rt); });
        std::vector<float> want_dx(n);
        for (size_t i = 0; i < n; i++) {
            const int c = (int)(i % C);
            want_dx[i] = tv_round(tv_bn_dx(x[i], dym[i], mean[c], rstd[c], gam[c], mdy[c], mdy[C + c]), rt);
        }
        snprintf(what, sizeof what, "bn_bwd_data fp32 kernel M%zu C%d rt%d: the definition's bits", M, C, rt);
        check(what, y.data(), want_dx.data(), n, 0);
        snprintf(what, sizeof what, "bn_bwd_data16o masked, in place M%zu C%d rt%d", M, C, rt);
        check16(what, io, y, rt);
    }
    {   // the mask recomputed from x (mbeta): this BN's own ReLU output as k_bn_apply stored it, read as the
        // mask or recomputed, in the backward's sums and its data pass: the same bits
        const float *mp = mean.data(), *rp = rstd.data(), *gp = gam.data(), *bp = bet.data(), *md = mdy.data();
        const uint16_t *x16p = x16.data();
        std::vector<uint16_t> own(n);
        uint16_t *ownp = own.data();
        if (V16 == 8) launch(g16, dim3(256), [&] { k_bn_apply<uint16_t, 8>(x16p, mp, rp, gp, bp, nullptr, nullptr, ownp, M, C, q16, 1, rt); });
        else launch(g16, dim3(256), [&] { k_bn_apply<uint16_t, 1>(x16p, mp, rp, gp, bp, nullptr, nullptr, ownp, M, C, q16, 1, rt); });
        size_t off = 0;
        for (size_t i = 0; i < n; i++) off += !(from16_rt(own[i], rt) > 0.0f);
        std::vector<float> sr(2 * C), sx(2 * C);
        bn_sums<uint16_t, 8>(BV_DY, 2, x16.data(), dy16.data(), ownp, mp, rp, M, C, sr.data(), nullptr, nullptr, rt);
        bn_sums<uint16_t, 8>(BV_DY, 2, x16.data(), dy16.data(), nullptr, mp, rp, M, C, sx.data(), nullptr, nullptr, rt, gp, bp);
        snprintf(what, sizeof what, "bn backward sums, own ReLU mask recomputed from x16 M%zu C%d rt%d (%zu of %zu masked)", M, C, rt, off, n);
        check(what, sx.data(), sr.data(), 2 * (size_t)C, 0);
        std::vector<uint16_t> ioa = dy16, iob = dy16;
        uint16_t *ap = ioa.data(), *bq = iob.data();
        const uint16_t *op = own.data();
        if (V16 == 8) {
            launch(g16, dim3(256), [&] { k_bn_bwd_data<uint16_t, 8>(x16p, ap, op, nullptr, mp, rp, gp, md, nullptr, ap, M, C, q16, rt); });
            launch(g16, dim3(256), [&] { k_bn_bwd_data<uint16_t, 8>(x16p, bq, nullptr, bp, mp, rp, gp, md, nullptr, bq, M, C, q16, rt); });
        } else {
            launch(g16, dim3(256), [&] { k_bn_bwd_data<uint16_t, 1>(x16p, ap, op, nullptr, mp, rp, gp, md, nullptr, ap, M, C, q16, rt); });
            launch(g16, dim3(256), [&] { k_bn_bwd_data<uint16_t, 1>(x16p, bq, nullptr, bp, mp, rp, gp, md, nullptr, bq, M, C, q16, rt); });
        }
        const int ok = ioa == iob && off > 0 && off < n;
        printf("%s bn_bwd_data16o own ReLU mask recomputed from x16 M%zu C%d rt%d: %s\n", ok ? "ok  " : "FAIL", M, C, rt,
               ok ? "the read mask's bits" : "differs (or the mask is all or nothing)");
        ok ? g_pass++ : g_fail++;
    }
    {   // add: a + b masked, in place into a
        const float *ap = z.data(), *bp = dym.data();
        float *yp = y.data();
        std::vector<uint16_t> io = z16;
        uint16_t *iop = io.data();
        const uint16_t *b16p = dy16.data(), *m16p = mk16.data();
        if (V32 == 4) launch(dim3(gr), dim3(256), [&] { k_add<float, 4>(ap, bp, nullptr, nullptr, yp, nullptr, nv32, 0, rt); });
        else launch(dim3(gr), dim3(256), [&] { k_add<float, 1>(ap, bp, nullptr, nullptr, yp, nullptr, nv32, 0, rt); });
        if (V16 == 8) launch(dim3(gr), dim3(256), [&] { k_add<uint16_t, 8>(iop, b16p, m16p, nullptr, nullptr, iop, nv16, 0, rt); });
        else launch(dim3(gr), dim3(256), [&] { k_add<uint16_t, 1>(iop, b16p, m16p, nullptr, nullptr, iop, nv16, 0, rt); });
        snprintf(what, sizeof what, "add16o masked, in place M%zu C%d rt%d", M, C, rt);
        check16(what, io, y, rt);
        // the sum masked too (ymask: x16, of both signs), against the fp32 sum masked here
        std::vector<uint16_t> io2 = z16;
        uint16_t *io2p = io2.data();
        const uint16_t *ym = x16.data();
        std::vector<float> ymk(y);
        size_t off = 0;
        for (size_t i = 0; i < ymk.size(); i++)
            if (!(from16_rt(x16[i], rt) > 0.0f)) ymk[i] = 0.0f, off++;
        if (V16 == 8) launch(dim3(gr), dim3(256), [&] { k_add<uint16_t, 8>(io2p, b16p, m16p, ym, nullptr, io2p, nv16, 0, rt); });
        else launch(dim3(gr), dim3(256), [&] { k_add<uint16_t, 1>(io2p, b16p, m16p, ym, nullptr, io2p, nv16, 0, rt); });
        snprintf(what, sizeof what, "add16o masked, the sum masked by ymask (%zu of %zu) M%zu C%d rt%d", off, ymk.size(), M, C, rt);
        check16(what, io2, ymk, rt);
    }
}

// BN's one-pass statistics (bn_stats1p16o: kind BV_SH, NS 2; bn_meanvar:
// k_bn_meanvar): the sums of d = x - shift and d * d against float64 within
// n u sum|d| and (n + 3) u sum d^2 (u = 2^-24: one rounding of d, of d * d,
// n - 1 adds), shift 0, near the mean, and not finite (counted as 0) on two
// channels, channel 0 with mean 50 and std 0.5;
// then k_bn_meanvar against dev/train_vision.h's tv_bn_meanvar on the host
// (the cpu's bits), the shift the running mean in place
static void bn_onepass16(size_t M, int C, int rt)
{
    const size_t n = M * (size_t)C;
    std::vector<float> x(n), sh(C), out(2 * C), mo(C), ro(C), rm(C), rv(C), wm(C), wr(C), wrm(C), wrv(C);
    std::vector<uint16_t> x16(n);
    for (size_t i = 0; i < n; i++) {
        const int c = (int)(i % C);
        x[i] = tv_round(c == 0 ? 50.0f + frand(-0.866f, 0.866f) : frand(-2, 3) + 0.1f * c, rt);
        x16[i] = to16_rt(x[i], rt);
    }
    std::vector<double> mref(C, 0.0);
    for (size_t i = 0; i < n; i++) mref[i % C] += x[i];
    for (int c = 0; c < C; c++) mref[c] /= (double)M;
    const double u = 0x1p-24;
    const char *shn[3] = {"0", "near the mean", "not finite on channels 0, 1 (as 0)"};
    for (int k = 0; k < 3; k++) {
        for (int c = 0; c < C; c++) sh[c] = k ? (float)(mref[c] + 0.01 * (c % 5 - 2)) : 0.0f;
        if (k == 2) sh[0] = NAN, sh[1] = INFINITY;
        bn_sums<uint16_t, 8>(BV_SH, 2, x16.data(), nullptr, nullptr, sh.data(), nullptr, M, C, out.data(), nullptr,
                             nullptr, rt);
        size_t bad = 0, at = 0;
        for (int c = 0; c < C; c++) {
            double s1 = 0, s2 = 0, b = 0;
            const double she = std::isfinite(sh[c]) ? sh[c] : 0.0;
            for (size_t m = 0; m < M; m++) {
                const double dd = (double)x[m * C + c] - she;
                s1 += dd, s2 += dd * dd, b += fabs(dd);
            }
            const int ok = fabs(out[c] - s1) <= (double)M * u * b && fabs(out[C + c] - s2) <= (M + 3.0) * u * s2;
            if (!ok && !bad++) at = (size_t)c;
        }
        printf("%s warp %d: bn one-pass sums of x16 M%zu C%d rt%d shift %s: %zu of %d channels outside the bound (first %zu)\n",
               bad ? "FAIL" : "ok  ", PLUMB_WARP, M, C, rt, shn[k], bad, C, at);
        bad ? g_fail++ : g_pass++;
        // k_bn_meanvar, shift = run_mean in place, against tv_bn_meanvar on the host
        for (int c = 0; c < C; c++) rm[c] = wrm[c] = sh[c], rv[c] = wrv[c] = 1.0f + 0.5f * c;
        for (int c = 0; c < C; c++) tv_bn_meanvar(out.data(), C, c, (long long)M, 1e-5f, 0.1f, wrm.data(), wm.data(), wr.data(), wrm.data(), wrv.data());
        const float *op = out.data();
        float *mop = mo.data(), *rop = ro.data(), *rmp = rm.data(), *rvp = rv.data();
        launch(dim3((unsigned)((C + 255) / 256)), dim3(256), [&] { k_bn_meanvar(op, C, (long long)M, 1e-5f, 0.1f, rmp, mop, rop, rmp, rvp); });
        const int same = !memcmp(mo.data(), wm.data(), C * 4) && !memcmp(ro.data(), wr.data(), C * 4) &&
                         !memcmp(rm.data(), wrm.data(), C * 4) && !memcmp(rv.data(), wrv.data(), C * 4);
        // and the statistics themselves: channel 0's mean within 1e-4 of float64
        const int near = fabs(mo[0] - mref[0]) <= 1e-4 * fabs(mref[0]);
        printf("%s warp %d: bn one-pass k_bn_meanvar M%zu C%d rt%d shift %s: %s, mean %.9g against %.9g\n",
               same && near ? "ok  " : "FAIL", PLUMB_WARP, M, C, rt, shn[k],
               same ? "the host's bits" : "differs from the host's", mo[0], mref[0]);
        same && near ? g_pass++ : g_fail++;
    }
}

// the 16-bit max-pool against dev/train_vision.h's elements on the widened values
static void maxpool16(int N, int H, int C, int rt)
{
    train_conv g;
    memset(&g, 0, sizeof g);
    train_conv_set(&g, N, H, H, C, C, 3, 3, 2, 1);
    const size_t nx = (size_t)N * H * H * C, ny = (size_t)N * g.P * g.Q * C;
    std::vector<float> x(nx), dy(ny), y(ny), dx(nx);
    std::vector<uint16_t> x16(nx), dy16(ny), y16(ny), dx16(nx);
    std::vector<int32_t> idx(ny), idx16(ny);
    for (size_t i = 0; i < nx; i++) x[i] = tv_round(frand(-2, 2), rt), x16[i] = to16_rt(x[i], rt);
    for (size_t i = 0; i < ny; i++) dy[i] = tv_round(frand(-1, 1), rt), dy16[i] = to16_rt(dy[i], rt);
    for (size_t i = 0; i < ny; i++) {
        const int c = (int)(i % C);
        const size_t pix = i / C;
        y[i] = tv_maxpool_elem(&g, x.data(), (int)(pix / ((size_t)g.P * g.Q)), (int)(pix / g.Q % g.P), (int)(pix % g.Q), c, &idx[i]);
    }
    for (size_t i = 0; i < nx; i++) {
        const int c = (int)(i % C);
        const size_t pix = i / C;
        dx[i] = tv_round(tv_maxpool_bwd_elem(&g, dy.data(), idx.data(), (int)(pix / ((size_t)H * H)), (int)(pix / H % H),
                                             (int)(pix % H), c), rt);
    }
    const uint16_t *xp = x16.data(), *dyp = dy16.data();
    uint16_t *yp = y16.data(), *dxp = dx16.data();
    int32_t *ip = idx16.data();
    // each kernel choice of gpu/train_vision.cu: eight channels an item or one, 32- or 64-bit indices
    for (int variant = 0; variant < 4; variant++) {
        const int V = variant & 1 ? 1 : 8, i32 = variant < 2;
        if (V == 8 && C % 8) continue;
        std::fill(y16.begin(), y16.end(), 0x7fff), std::fill(dx16.begin(), dx16.end(), 0x7fff);
        std::fill(idx16.begin(), idx16.end(), -7);
        const size_t iy = ny / V, ix = nx / V;
        if (V == 8 && i32) {
            launch(dim3(2), dim3(256), [&] { k_maxpool_fwd16<8, uint32_t>(g, xp, yp, ip, (uint32_t)iy, rt); });
            launch(dim3(2), dim3(256), [&] { k_maxpool_bwd16<8, uint32_t>(g, dyp, ip, dxp, (uint32_t)ix, rt); });
        } else if (V == 8) {
            launch(dim3(2), dim3(256), [&] { k_maxpool_fwd16<8, size_t>(g, xp, yp, ip, iy, rt); });
            launch(dim3(2), dim3(256), [&] { k_maxpool_bwd16<8, size_t>(g, dyp, ip, dxp, ix, rt); });
        } else if (i32) {
            launch(dim3(2), dim3(256), [&] { k_maxpool_fwd16<1, uint32_t>(g, xp, yp, ip, (uint32_t)iy, rt); });
            launch(dim3(2), dim3(256), [&] { k_maxpool_bwd16<1, uint32_t>(g, dyp, ip, dxp, (uint32_t)ix, rt); });
        } else {
            launch(dim3(2), dim3(256), [&] { k_maxpool_fwd16<1, size_t>(g, xp, yp, ip, iy, rt); });
            launch(dim3(2), dim3(256), [&] { k_maxpool_bwd16<1, size_t>(g, dyp, ip, dxp, ix, rt); });
        }
        char what[128];
        snprintf(what, sizeof what, "maxpool_fwd16o N%d H%d C%d rt%d (V %d, %d-bit indices)", N, H, C, rt, V, i32 ? 32 : 64);
        check16(what, y16, y, rt);
        const int same = idx == idx16;
        printf("%s warp %d: %s: the winners' indices %s\n", same ? "ok  " : "FAIL", PLUMB_WARP, what, same ? "equal" : "differ");
        same ? g_pass++ : g_fail++;
        snprintf(what, sizeof what, "maxpool_bwd16o N%d H%d C%d rt%d (V %d, %d-bit indices)", N, H, C, rt, V, i32 ? 32 : 64);
        check16(what, dx16, dx, rt);
        // the 3x3 / stride-2 / pad-1 backward a 2x2 pixel block an item, from the same indices
        if (!maxpool_bwd_s2(&g)) continue;
        std::fill(dx16.begin(), dx16.end(), 0x7fff);
        const size_t ib = (size_t)N * ((H + 1) / 2) * ((H + 1) / 2) * C / V;
        if (V == 8 && i32) launch(dim3(2), dim3(256), [&] { k_maxpool_bwd16_s2<8, uint32_t>(g, dyp, ip, dxp, (uint32_t)ib, rt); });
        else if (V == 8) launch(dim3(2), dim3(256), [&] { k_maxpool_bwd16_s2<8, size_t>(g, dyp, ip, dxp, ib, rt); });
        else if (i32) launch(dim3(2), dim3(256), [&] { k_maxpool_bwd16_s2<1, uint32_t>(g, dyp, ip, dxp, (uint32_t)ib, rt); });
        else launch(dim3(2), dim3(256), [&] { k_maxpool_bwd16_s2<1, size_t>(g, dyp, ip, dxp, ib, rt); });
        snprintf(what, sizeof what, "maxpool_bwd16o 2x2 blocks N%d H%d C%d rt%d (V %d, %d-bit indices)", N, H, C, rt, V, i32 ? 32 : 64);
        check16(what, dx16, dx, rt);
    }
}

int main()
{
    sumsq(100, 0, 1);
    sumsq(70001, 0, 69);
    sumsq(40 * 1024 + 3, 5, 36);
    sumsq(33 * 1024, 0, 33);
    sumsq(3000, 0, 4); // a block past the end of x sums nothing
    sumsq(5 * 32 * 1024 + 77, 0, 161);    // five whole groups (float4) and a cut one
    sumsq(5 * 32 * 1024 + 77, 0, 161, 1); // the same, x not 16-byte aligned: staged
    sumsq(2 * 32 * 1024, 3, 61);          // whole groups from inside the array
    sumsq_orders(13313);
    sum_slices(2, 4096);
    sum_slices(8, 1000);
    sum_slices(9, 1000);  // one whole group of eight after slice 0
    sum_slices(16, 2052);
    sum_slices(32, 400);  // ctr's widest cut
    sumsq_orders(TRAIN_SUMSQ_GROUP);
    sumsq_orders(5);
    sumsq_orders((size_t)GRPSUM_TILE * TRAIN_SUMSQ_GROUP + 3 * TRAIN_SUMSQ_GROUP + 1);

    attention(2, 100, 2, 64); // 32 x 32 tiles, a partial last tile
    attention(1, 37, 2, 96);  // 16 x 16 tiles
    attention(1, 1, 1, 64);   // one position
    attention(1, 64, 3, 16);  // exactly two tiles, narrow heads
    { // the row dots alone at a head width that is no multiple of 8 (a partial last chunk, scalar loads)
        const int B = 2, T = 9, NH = 3, HS = 36;
        const size_t n1 = (size_t)B * T * NH * HS, nl = (size_t)B * NH * T;
        std::vector<float> o(n1), dO(n1), D(nl, NAN);
        for (auto &x : o) x = frand(-1, 1);
        for (auto &x : dO) x = frand(-1, 1);
        const float *po = o.data(), *pd = dO.data();
        float *pD = D.data();
        launch(dim3(2), dim3(128), [&] { k_flash_bwd_pre(po, pd, pD, B, T, NH, HS); });
        rowdots(po, pd, pD, B, T, NH, HS);
    }
    layernorm(37, 200);
    layernorm(130, 64);
    layernorm(9, 37); // a row that is no whole number of quads: the scalar loads, a partial last quad
    layernorm16(37, 200, DT_BF16);
    layernorm16(130, 64, DT_F16);
    layernorm16(9, 37, DT_BF16); // C % 4 != 0: dx16 stored one value at a time
    layernorm_vec<6>(19, 0);       // gpt2's C = 768 at warp 32
    layernorm_vec<6>(11, DT_BF16);
    layernorm_vec<1>(13, DT_F16);  // the smallest row the kernel takes
    layernorm_vec<8>(5, DT_BF16);  // the largest
    layernorm_vec<6>(75, DT_BF16); // two chunks of LN_ROWS, the last partial (dsum's chunk sums)
    layernorm_vec<6>(131, DT_F16); // three chunks, the last of 3 rows (a round cut short)
    layernorm_vec<2>(41, 0);
    xent(7, 1000);
    xent(3, 50);
    xent(5, 1000, DT_BF16);
    xent(4, 257, DT_BF16);
    xent(2, 9001);          // more octets than 4 a thread: every unrolled load, a second trip, a tail
    xent(3, 9001, DT_BF16);
    xent(3, 9001, DT_F16);  // fp16 logits: the same steps, the other 16-bit type
    xent(4, 5003, DT_BF16, 128); // the other block sizes the host may pick (PLUMB_GPT_XENT_TPB)
    xent(3, 20011, 0, 512);
    xent(3, 1001, DT_BF16, 256, false); // ld = V, odd: no step of eight, every value one by one
    xsums();
    gelu();
    gelu16(10003, DT_BF16);
    gelu16(4101, DT_F16);
    gelu16(5, DT_BF16);
    residual16(3001, DT_BF16);
    encoder(3, 9, 12, 7, DT_BF16);
    encoder(2, 5, 768, 11, DT_F32);
    encoder(1, 7, 10, 5, DT_F16); // C % 4 != 0: the one-value form only
    residual16(6, DT_F16);
    colsum(200, 48, DT_BF16); // a last chunk of 8 rows
    colsum(130, 40, DT_F16);
    colsum(70, 20, DT_BF16); // N % 8 != 0: one column a thread only
    vision16(300, 40, DT_BF16); // eight 16-bit values a load
    vision16(130, 24, DT_F16);
    vision16(97, 20, DT_BF16);  // C % 8 != 0: one at a time (fp32: four)
    vision16(50, 6, DT_F16);    // C % 4 != 0: one at a time both
    vision16(40, 264, DT_BF16); // 33 channel groups: two column blocks of the BN kernels
    bn_onepass16(300, 40, DT_BF16); // eight 16-bit values a load
    bn_onepass16(97, 20, DT_F16);   // one at a time
    bn_onepass16(40, 264, DT_BF16); // 33 channel groups
    maxpool16(2, 9, 16, DT_BF16);
    maxpool16(1, 8, 8, DT_F16);
    maxpool16(2, 7, 12, DT_BF16); // C not a multiple of 8: one channel an item only
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
