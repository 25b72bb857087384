// The tensor-core flash attention kernels (src/gpu/train_gpt_attn_tc.cuh)
// run on the cpu: a block's 128 threads are pthreads, __syncthreads a block
// barrier, __syncwarp and __shfl_xor_sync warp barriers, the dynamic shared
// memory one static array, and nvcuda::wmma the stand-in of
// tests/tools/emu_tc/mma.h (each lane holds a whole fragment; lane 0
// stores). So the kernels' tiling, masking, staging, aliasing of shared
// memory and synchronisation are checked without a GPU (not the hardware's
// fragment layout, not the compiler): out, lse, dq, dk, dv against a
// float64 reference within the bounds of tests/test_gpu_attn.c (norm-wise
// 3u, every element 2u|ref| + 16u max|ref|, lse 1e-4 (1 + |ref|)), bf16
// and fp16, partial tiles, T < 64, head widths 16 to 128.
// Prints one line per check and "N passed, N failed"; exits 1 on a failure.
// Built and run by tests/t_gpu_emu.sh:
//   g++ -std=c++17 -O2 -Wno-unknown-pragmas -DPLUMB_CUDA -Isrc -Itests/tools/emu_tc tests/tools/gpu_emu_tc.cc -lpthread
#include <pthread.h>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
static thread_local dim3 threadIdx, blockIdx;
static dim3 blockDim, gridDim;
static pthread_barrier_t g_block_bar, g_warp_bar[4];
static float g_xch[128];

#define __global__
#define __device__
#define __host__
#define __shared__
#define __align__(n)
#define __launch_bounds__(n)

static inline void __syncthreads() { pthread_barrier_wait(&g_block_bar); }
static inline void __syncwarp() { pthread_barrier_wait(&g_warp_bar[threadIdx.x / 32]); }
static inline float __shfl_xor_sync(unsigned, float v, int lane_mask)
{
    const unsigned t = threadIdx.x, w = t / 32;
    g_xch[t] = v;
    __syncwarp();
    const float r = g_xch[(t % 32 ^ (unsigned)lane_mask) + w * 32];
    __syncwarp();
    return r;
}

#include <mma.h>
namespace nvcuda {
namespace wmma {
void emu_store_lane0(float *p, const float *x, unsigned ldm, bool rowm)
{
    if (threadIdx.x % 32) return;
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) (rowm ? p[(size_t)r * ldm + c] : p[(size_t)c * ldm + r]) = x[r * 16 + c];
}
} // namespace wmma
} // namespace nvcuda
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <type_traits>
namespace tcattn {
alignas(128) unsigned char smem[256 * 1024];

// mma.sync.m16n8k16 (gpu/train_gpt_attn_mma.cuh) from the PTX ISA's fragment
// layout, written here on its own: each lane puts its registers in the warp's
// exchange, then assembles A [16 x 16] and B [16 x 8] from all 32 lanes and
// computes its own four outputs (rows g and g + 8, columns 2q and 2q + 1 of
// lane 4g + q); the 16 products summed in double (exact for 16-bit inputs),
// then added to the fp32 accumulator
struct mma_xch {
    uint32_t a[32][4], b[32][2];
};
static mma_xch g_mx[4];
template <typename E> static float emu_from16(uint32_t v)
{
    return std::is_same<E, __half>::value ? f16_to_f32((uint16_t)v) : bf16_to_f32((uint16_t)v);
}
template <typename E> inline uint32_t mm_pack2(float lo, float hi)
{
    const bool h = std::is_same<E, __half>::value;
    return (uint32_t)(h ? f32_to_f16(lo) : f32_to_bf16(lo)) | (uint32_t)(h ? f32_to_f16(hi) : f32_to_bf16(hi)) << 16;
}
template <typename E> inline void mma16816(float *d, const uint32_t *a, const uint32_t *b)
{
    const unsigned w = threadIdx.x / 32, lane = threadIdx.x % 32;
    memcpy(g_mx[w].a[lane], a, sizeof g_mx[w].a[lane]);
    memcpy(g_mx[w].b[lane], b, sizeof g_mx[w].b[lane]);
    __syncwarp();
    float A[16][16], B[16][8];
    for (int L = 0; L < 32; L++) {
        const int g = L >> 2, q = L & 3;
        const uint32_t *ra = g_mx[w].a[L], *rb = g_mx[w].b[L];
        for (int hf = 0; hf < 2; hf++) {
            A[g][2 * q + hf] = emu_from16<E>(ra[0] >> (16 * hf));
            A[g + 8][2 * q + hf] = emu_from16<E>(ra[1] >> (16 * hf));
            A[g][2 * q + 8 + hf] = emu_from16<E>(ra[2] >> (16 * hf));
            A[g + 8][2 * q + 8 + hf] = emu_from16<E>(ra[3] >> (16 * hf));
            B[2 * q + hf][g] = emu_from16<E>(rb[0] >> (16 * hf));
            B[2 * q + 8 + hf][g] = emu_from16<E>(rb[1] >> (16 * hf));
        }
    }
    __syncwarp(); // every lane has read the exchange
    const int g = lane >> 2, q = lane & 3;
    for (int e = 0; e < 4; e++) {
        const int r = g + 8 * (e >> 1), c = 2 * q + (e & 1);
        double s = 0;
        for (int k = 0; k < 16; k++) s += (double)A[r][k] * B[k][c];
        d[e] = (float)((double)d[e] + s);
    }
}
}
#define PLUMB_MMA_EMU 1
#include "gpu/train_gpt_attn_tc.cuh"
#include "gpu/train_gpt_attn_mma.cuh"
#include "../attn_ref.h"

template <typename F> struct job {
    F *f;
    unsigned t;
    dim3 b;
};
template <typename F> static void *run_thread(void *p)
{
    job<F> *j = (job<F> *)p;
    threadIdx = dim3(j->t);
    blockIdx = j->b;
    (*j->f)();
    return nullptr;
}
// one block at a time; shared memory poisoned with NaN before each, so a
// read of a tile not yet written shows up
template <typename F> static void launch(dim3 grid, size_t smem_bytes, F f)
{
    const unsigned n = tcattn::TNT;
    if (smem_bytes > sizeof tcattn::smem) {
        fprintf(stderr, "launch: %zu bytes of shared memory\n", smem_bytes);
        exit(2);
    }
    blockDim = dim3(n);
    gridDim = grid;
    pthread_barrier_init(&g_block_bar, nullptr, n);
    for (unsigned w = 0; w < n / 32; w++) pthread_barrier_init(&g_warp_bar[w], nullptr, 32);
    std::vector<pthread_t> th(n);
    std::vector<job<F>> jobs(n);
    for (unsigned by = 0; by < grid.y; by++)
        for (unsigned bx = 0; bx < grid.x; bx++) {
            memset(tcattn::smem, 0xff, sizeof tcattn::smem);
            for (unsigned t = 0; t < n; t++) {
                jobs[t] = job<F>{&f, t, dim3(bx, by)};
                pthread_create(&th[t], nullptr, run_thread<F>, &jobs[t]);
            }
            for (unsigned t = 0; t < n; t++) pthread_join(th[t], nullptr);
        }
    pthread_barrier_destroy(&g_block_bar);
    for (unsigned w = 0; w < n / 32; w++) pthread_barrier_destroy(&g_warp_bar[w]);
}

static int g_pass, g_fail;
static uint64_t g_rs = 0x2545f4914f6cdd1dull;
static float frand(float lo, float hi)
{
    g_rs ^= g_rs << 13;
    g_rs ^= g_rs >> 7;
    g_rs ^= g_rs << 17;
    return lo + (hi - lo) * (float)((g_rs >> 11) * (1.0 / 9007199254740992.0));
}

// x (rows of C values, ld apart) against ref: tests/test_gpu_attn.c's bounds,
// with its acc_floor (what fp32 sums in another order leave where the result
// cancels to 0: at T = 1 every dS is exactly 0 in exact arithmetic)
static double g_acc_floor;
static void check(const char *what, const float *x, const double *ref, size_t rows, size_t C, size_t ld, double u)
{
    double d2 = 0, r2 = 0, mx = 0;
    for (size_t r = 0; r < rows; r++)
        for (size_t i = 0; i < C; i++) mx = fmax(mx, fabs(ref[r * ld + i]));
    size_t bad = 0, at = 0;
    for (size_t r = 0; r < rows; r++)
        for (size_t i = 0; i < C; i++) {
            const double a = ref[r * ld + i], dd = (double)x[r * ld + i] - a;
            d2 += dd * dd, r2 += a * a;
            if (!(fabs(dd) <= 2 * u * fabs(a) + 16 * u * mx + g_acc_floor) && bad++ == 0) at = r * ld + i;
        }
    const double rel = r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
    const int ok = rel <= 3 * u && bad == 0;
    printf("%s %s: norm-wise %.3g u, %zu elements past the bound%s", ok ? "ok  " : "FAIL", what, rel / u, bad,
           bad ? "" : "\n");
    if (bad) printf(" (first at %zu: ref %.9g got %.9g)\n", at, ref[at], (double)x[at]);
    ok ? g_pass++ : g_fail++;
}

static double g_bound[2]; // out, dqkv of the last case against the combined bound (<= 1 passes)
static double g_worst[3]; // max_rel of out, lse, dqkv of the last case (test_train_gpt_ops.c's measure)
static double max_rel_d(const float *a, const double *b, size_t n, double floor_)
{
    double w = 0;
    for (size_t i = 0; i < n; i++) w = fmax(w, fabs((double)a[i] - b[i]) / fmax(floor_, fabs(b[i])));
    return w;
}
static int g_uniform = 0; // 1: every input in [-1, 1) (test_train_gpt_ops.c's gpt_ops_fast_within_bounds_of_golden)
// mma: 0 the WMMA kernels (train_gpt_attn_tc.cuh), 1 the mma.sync ones (train_gpt_attn_mma.cuh, HSM <= 64)
template <typename E, int HSM> static void attention(int B, int T, int NH, int HS, int rt, int mma = 0)
{
    const int C = NH * HS;
    const size_t C3 = 3 * (size_t)C, n3 = (size_t)B * T * C3, n1 = (size_t)B * T * C, nl = (size_t)B * NH * T;
    const double u = rt == DT_F16 ? 0x1p-11 : 0x1p-8;
    std::vector<float> qkv(n3), dout(n1), out(n1, NAN), lse(nl, NAN), D(nl), dqkv(n3, NAN);
    for (size_t i = 0; i < n3; i++)
        qkv[i] = gg_round(g_uniform ? frand(-1, 1) : frand(-1.5f, 1.5f) * (i % C3 < 2 * (size_t)C ? 1.0f : 0.67f), rt);
    for (auto &v : dout) v = gg_round(frand(-1, 1), rt);
    const float scale = 1.0f / sqrtf((float)HS);
    {
        double mq = 0, mg = 0;
        for (float v : qkv) mq = fmax(mq, fabs(v));
        for (float v : dout) mg = fmax(mg, fabs(v));
        g_acc_floor = (1.0 / sqrt((double)HS)) * 2.0 * HS * HS * 0x1p-24 * mg * mq * mq;
    }
    // float64 reference, with the magnitudes of the combined bound (tests/attn_ref.h)
    std::vector<double> ro(n1), rl(nl), rd(n3), mo(n1), md(n3);
    attn_ref64(qkv.data(), dout.data(), B, T, NH, HS, ro.data(), rl.data(), rd.data(), mo.data(), md.data());
    const dim3 grid((unsigned)((T + 63) / 64), (unsigned)(B * NH));
    typedef tcattn::sz<E, HSM> SZ;
    const float *q = qkv.data(), *dO = dout.data();
    float *po = out.data(), *pl = lse.data(), *pd = D.data(), *pq = dqkv.data();
    if constexpr (HSM <= 64) {
        typedef tcattn::mdims<HSM> MD;
        if (mma) launch(grid, MD::FWD, [&] { tcattn::k_mma_fwd<E, HSM>(q, po, pl, T, NH, HS, scale, rt); });
    }
    if (!mma) launch(grid, SZ::FWD, [&] { tcattn::k_tc_fwd<E, HSM>(q, po, pl, T, NH, HS, scale, rt); });
    for (size_t r = 0; r < nl; r++) { // k_flash_bwd_pre's D
        const size_t t = r % T, h = r / T % NH, b = r / ((size_t)T * NH), off = (b * T + t) * C + h * HS;
        float acc = 0.0f;
        for (int i = 0; i < HS; i++) acc = fmaf(dout[off + i], out[off + i], acc);
        D[r] = acc;
    }
    if constexpr (HSM <= 64) {
        typedef tcattn::mdims<HSM> MD;
        if (mma) {
            launch(grid, MD::DKV, [&] { tcattn::k_mma_bwd_dkv<E, HSM>(q, dO, pl, pd, pq, T, NH, HS, scale, rt); });
            launch(grid, MD::DQ, [&] { tcattn::k_mma_bwd_dq<E, HSM>(q, dO, pl, pd, pq, T, NH, HS, scale, rt); });
        }
    }
    if (!mma) {
        launch(grid, SZ::DKV, [&] { tcattn::k_tc_bwd_dkv<E, HSM>(q, dO, pl, pd, pq, T, NH, HS, scale, rt); });
        launch(grid, SZ::DQ, [&] { tcattn::k_tc_bwd_dq<E, HSM>(q, dO, pl, pd, pq, T, NH, HS, scale, rt); });
    }
    char what[128];
    const char *tn = rt == DT_F16 ? "fp16" : "bf16";
#define W(name) (snprintf(what, sizeof what, "%s attention B%d T%d NH%d HS%d (HSM %d) %s %s", mma ? "mma" : "tc", B, T, NH, HS, HSM, tn, name), what)
    check(W("out"), out.data(), ro.data(), (size_t)B * T, C, C, u);
    size_t bad = 0, at = 0;
    for (size_t i = 0; i < nl; i++)
        if (!(fabs((double)lse[i] - rl[i]) <= 1e-4 * (1 + fabs(rl[i]))) && bad++ == 0) at = i;
    printf("%s %s: %zu past 1e-4 (1 + |ref|)", bad ? "FAIL" : "ok  ", W("lse"), bad);
    if (bad) printf(" (first at %zu: ref %.9g got %.9g)", at, rl[at], (double)lse[at]);
    printf("\n");
    bad ? g_fail++ : g_pass++;
    check(W("dq"), dqkv.data(), rd.data(), (size_t)B * T, C, C3, u);
    check(W("dk"), dqkv.data() + C, rd.data() + C, (size_t)B * T, C, C3, u);
    check(W("dv"), dqkv.data() + 2 * C, rd.data() + 2 * C, (size_t)B * T, C, C3, u);
#undef W
    g_worst[0] = max_rel_d(out.data(), ro.data(), n1, 0.05);
    if (g_uniform) { // against the golden forward too, as the C test measures
        std::vector<float> go(n1), gl(nl), pp(T);
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++) {
                const float *base = qkv.data() + (size_t)b * T * C3 + (size_t)h * HS;
                for (int t = 0; t < T; t++)
                    gpt_gold_attn_row(base + (size_t)t * C3, base + C, base + 2 * C, C3, t, HS, scale, pp.data(),
                                      go.data() + ((size_t)b * T + t) * C + (size_t)h * HS,
                                      gl.data() + ((size_t)b * NH + h) * T + t, rt);
            }
        std::vector<double> god(go.begin(), go.end());
        g_worst[0] = fmax(g_worst[0], max_rel_d(out.data(), god.data(), n1, 0.05));
    }
    g_worst[1] = max_rel_d(lse.data(), rl.data(), nl, 1.0);
    g_worst[2] = max_rel_d(dqkv.data(), rd.data(), n3, 0.05);
    { double wo = 0, wq = 0, u9 = 0x1p-9;
      for (size_t i = 0; i < n1; i++) { double d = fabs(out[i] - ro[i]); double b1 = 1.6e-2 * fmax(0.05, fabs(ro[i])), b2 = 4 * u9 * (fabs(ro[i]) + mo[i]); wo = fmax(wo, d / fmax(b1, b2)); }
      for (size_t i = 0; i < n3; i++) { double d = fabs(dqkv[i] - rd[i]); double b1 = 3.2e-2 * fmax(0.05, fabs(rd[i])), b2 = 4 * u9 * (fabs(rd[i]) + md[i]); wq = fmax(wq, d / fmax(b1, b2)); }
      g_bound[0] = wo, g_bound[1] = wq; }
}

int main()
{
    attention<__nv_bfloat16, 64>(2, 100, 2, 64, DT_BF16);
    attention<__nv_bfloat16, 32>(1, 37, 2, 32, DT_BF16);
    attention<__nv_bfloat16, 64>(1, 1, 1, 64, DT_BF16);
    attention<__half, 128>(1, 70, 1, 96, DT_F16);
    attention<__half, 32>(1, 130, 2, 16, DT_F16);
    attention<__nv_bfloat16, 64>(1, 128, 1, 48, DT_BF16);
    // the mma.sync kernels (head widths up to 64): partial tiles, T < 64, T = 1,
    // several tiles, odd and padded head widths, bf16 and fp16, T = 512
    attention<__nv_bfloat16, 64>(2, 100, 2, 64, DT_BF16, 1);
    attention<__nv_bfloat16, 32>(1, 37, 2, 32, DT_BF16, 1);
    attention<__nv_bfloat16, 64>(1, 1, 1, 64, DT_BF16, 1);
    attention<__half, 32>(1, 130, 2, 16, DT_F16, 1);
    attention<__nv_bfloat16, 64>(1, 128, 1, 48, DT_BF16, 1);
    attention<__half, 64>(1, 200, 1, 64, DT_F16, 1);
    attention<__nv_bfloat16, 64>(1, 77, 2, 50, DT_BF16, 1);
    attention<__nv_bfloat16, 64>(1, 512, 1, 64, DT_BF16, 1); // 8 tiles: mostly unmasked ones
    // gpt_ops_fast_within_bounds_of_golden's case and measure (against the float64
    // reference here, against golden there): out <= 1.6e-2, lse <= 1e-5, dqkv <= 3.2e-2
    g_uniform = 1;
    // over 30 input draws: the worst against the combined bound of
    // tests/test_train_gpt_ops.c's gpt_ops_fast_within_bounds_of_golden
    double wmax[2] = {0, 0};
    for (int sd = 1; sd <= 30; sd++) {
        g_rs = 0x9e3779b97f4a7c15ull * sd;
        attention<__nv_bfloat16, 32>(2, 40, 2, 16, DT_BF16);
        wmax[0] = fmax(wmax[0], g_bound[0]);
        wmax[1] = fmax(wmax[1], g_bound[1]);
    }
    g_uniform = 0;
    const int ok = wmax[0] <= 1 && wmax[1] <= 1;
    printf("%s B2 T40 NH2 HS16 bf16, 30 draws: out %.3g, dqkv %.3g of the combined bound\n", ok ? "ok  " : "FAIL",
           wmax[0], wmax[1]);
    ok ? g_pass++ : g_fail++;
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
