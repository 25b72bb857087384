// The tensor-core flash attention kernels (src/gpu/train_gpt_attn_tc.cuh)
// run on the cpu: a block's 128 (or 256) threads are pthreads, __syncthreads a block
// barrier, __syncwarp and __shfl_xor_sync warp barriers, the dynamic shared
// memory one static array, and nvcuda::wmma the stand-in of
// tests/tools/emu_tc/mma.h (each lane holds a whole fragment; lane 0
// stores). So the kernels' tiling, masking, staging, aliasing of shared
// memory and synchronisation are checked without a GPU (not the hardware's
// fragment layout, not the compiler): out, lse, dq, dk, dv against a
// float64 reference within the bounds of tests/test_gpu_attn.c (norm-wise
// 3u, every element 2u|ref| + 16u max|ref|, lse 1e-4 (1 + |ref|)), bf16
// and fp16, partial tiles, T < 64, head widths 16 to 128.
// The mma.sync kernels (train_gpt_attn_mma.cuh) with mma.sync emulated from
// the PTX fragment layout; the pipelined ones (train_gpt_attn_mma2.cuh) also
// with ldmatrix (.trans) from the PTX ISA's distribution of matrix rows to
// lanes and cp.async as a per-thread queue of copies done at the
// cp.async.wait_group that covers their group (deferred: a read of a tile
// before its wait sees the NaN poison) or at issue (eager: the second,
// repeat run; it must give the same bits), their 16-bit copies made by
// k_mma2_to16 run here too. Out-of-bounds or misaligned shared-memory
// addresses, and copies never waited for, stop the run (exit 2).
// Prints one line per check and "N passed, N failed"; exits 1 on a failure.
// Built and run by tests/t_gpu_emu.sh:
//   g++ -std=c++17 -O2 -Wno-unknown-pragmas -DPLUMB_CUDA -Isrc -Itests/tools/emu_tc tests/tools/gpu_emu_tc.cc -lpthread
#include <pthread.h>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct float4 {
    float x, y, z, w;
};
struct uint4 {
    uint32_t x, y, z, w;
};
static thread_local dim3 threadIdx, blockIdx;
static dim3 blockDim, gridDim;
static pthread_barrier_t g_block_bar, g_warp_bar[8];
static float g_xch[2][256];
// A warp's exchanges (shuffles, mma.sync's registers, ldmatrix's addresses)
// alternate between two slots by this count of the lane's exchanges, so one
// barrier each suffices: a lane writes slot n % 2 again only at exchange
// n + 2, after the barrier of exchange n + 1, which every lane reaches after
// reading exchange n. (Every lane of a warp makes the same exchanges.)
static thread_local unsigned t_xn;

#define __global__
#define __device__
#define __host__
#define __shared__
#define __align__(n)
#define __launch_bounds__(...)

static inline void __syncthreads() { pthread_barrier_wait(&g_block_bar); }
static inline void __syncwarp() { pthread_barrier_wait(&g_warp_bar[threadIdx.x / 32]); }
static inline float __shfl_xor_sync(unsigned, float v, int lane_mask)
{
    const unsigned t = threadIdx.x, w = t / 32;
    float *x = g_xch[t_xn++ & 1];
    x[t] = v;
    __syncwarp();
    return x[(t % 32 ^ (unsigned)lane_mask) + w * 32];
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
static mma_xch g_mx[2][8];
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
    mma_xch &x = g_mx[t_xn++ & 1][w];
    memcpy(x.a[lane], a, sizeof x.a[lane]);
    memcpy(x.b[lane], b, sizeof x.b[lane]);
    __syncwarp();
    float A[16][16], B[16][8];
    for (int L = 0; L < 32; L++) {
        const int g = L >> 2, q = L & 3;
        const uint32_t *ra = x.a[L], *rb = x.b[L];
        for (int hf = 0; hf < 2; hf++) {
            A[g][2 * q + hf] = emu_from16<E>(ra[0] >> (16 * hf));
            A[g + 8][2 * q + hf] = emu_from16<E>(ra[1] >> (16 * hf));
            A[g][2 * q + 8 + hf] = emu_from16<E>(ra[2] >> (16 * hf));
            A[g + 8][2 * q + 8 + hf] = emu_from16<E>(ra[3] >> (16 * hf));
            B[2 * q + hf][g] = emu_from16<E>(rb[0] >> (16 * hf));
            B[2 * q + 8 + hf][g] = emu_from16<E>(rb[1] >> (16 * hf));
        }
    }
    const int g = lane >> 2, q = lane & 3;
    for (int e = 0; e < 4; e++) {
        const int r = g + 8 * (e >> 1), c = 2 * q + (e & 1);
        double s = 0;
        for (int k = 0; k < 16; k++) s += (double)A[r][k] * B[k][c];
        d[e] = (float)((double)d[e] + s);
    }
}
}
namespace tcattn {
// cp.async and ldmatrix (gpu/train_gpt_attn_mma2.cuh), written here from the
// PTX ISA on their own. Shared-memory addresses must lie in the launch's
// dynamic shared memory (g_smem_bytes) and be 16-byte aligned (4 for the
// 4-byte copy); global sources aligned to the copy's size and inside one of
// the buffers the kernel is given (g_src: the 16-bit copies, lse, D).
static size_t g_smem_bytes;
static std::vector<std::pair<const void *, size_t>> g_src; // (start, bytes)
static bool g_cp_eager; // copies done at issue (else at the covering wait)
[[noreturn]] static void emu_die(const char *what, const void *p)
{
    fprintf(stderr, "emulation: %s (address %p, thread %u of block %u,%u)\n", what, p, threadIdx.x, blockIdx.x,
            blockIdx.y);
    exit(2);
}
static void emu_smem_ok(const void *p, size_t n, size_t align, const char *what)
{
    const unsigned char *c = (const unsigned char *)p;
    if (c < smem || c + n > smem + g_smem_bytes || (uintptr_t)c % align) emu_die(what, p);
}
struct cp_op {
    void *dst;
    const void *src;
    size_t n;
    unsigned group;
};
static thread_local std::vector<cp_op> t_cp; // issued, not yet done
static thread_local unsigned t_cp_groups;    // committed groups (the open group's number)
static void cp_async_n(void *s, const void *g, size_t n)
{
    emu_smem_ok(s, n, n, "cp.async destination outside shared memory or misaligned");
    if ((uintptr_t)g % n) emu_die("cp.async source misaligned", g);
    bool in = false;
    for (const auto &r : g_src)
        in = in || ((const char *)g >= (const char *)r.first && (const char *)g + n <= (const char *)r.first + r.second);
    if (!in) emu_die("cp.async source outside the kernel's buffers", g);
    if (g_cp_eager) memcpy(s, g, n);
    else t_cp.push_back(cp_op{s, g, n, t_cp_groups});
}
inline void cp_async16(void *s, const void *g) { cp_async_n(s, g, 16); }
inline void cp_async4(void *s, const void *g) { cp_async_n(s, g, 4); }
inline void cp_commit() { t_cp_groups++; }
// every committed group but the N most recent done, in issue order; the open
// group's copies are not waited for
template <int N> inline void cp_wait()
{
    std::vector<cp_op> keep;
    for (const cp_op &c : t_cp)
        if (c.group + N < t_cp_groups) memcpy(c.dst, c.src, c.n);
        else keep.push_back(c);
    t_cp.swap(keep);
}
// ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16: lane 8 i + r gives the
// address of row r of matrix i (8 16-bit values, 16 bytes); without .trans
// lane 4 g + q receives in register i row g's values 2q (low half) and
// 2q + 1, with .trans column g's values of rows 2q (low) and 2q + 1
static const uint16_t *g_ldsm[2][8][32];
template <bool TR> static void emu_ldsm4(uint32_t (&r)[4], const uint16_t *p)
{
    const unsigned w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, q = lane & 3;
    emu_smem_ok(p, 16, 16, "ldmatrix row address outside shared memory or misaligned");
    const uint16_t **x = g_ldsm[t_xn++ & 1][w];
    x[lane] = p;
    __syncwarp();
    for (int i = 0; i < 4; i++) {
        uint16_t lo, hi;
        if (!TR) {
            lo = x[8 * i + g][2 * q];
            hi = x[8 * i + g][2 * q + 1];
        } else {
            lo = x[8 * i + 2 * q][g];
            hi = x[8 * i + 2 * q + 1][g];
        }
        r[i] = (uint32_t)lo | (uint32_t)hi << 16;
    }
}
inline void ldsm4(uint32_t (&r)[4], const uint16_t *p) { emu_ldsm4<false>(r, p); }
inline void ldsm4t(uint32_t (&r)[4], const uint16_t *p) { emu_ldsm4<true>(r, p); }
}
#define PLUMB_MMA_EMU 1
#include "gpu/train_gpt_attn_tc.cuh"
#include "gpu/train_gpt_attn_mma.cuh"
#include "gpu/train_gpt_attn_mma2.cuh"
#include "../attn_ref.h"

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
    /* a pool thread's per-thread state starts each block as a new thread's did */
    t_xn = 0;
    tcattn::t_cp.clear();
    tcattn::t_cp_groups = 0;
    (*k->f)();
    if (!tcattn::t_cp.empty()) tcattn::emu_die("a cp.async never waited for", tcattn::t_cp[0].dst);
}
// one block at a time; shared memory poisoned with NaN before each, so a
// read of a tile not yet written shows up; n threads a block (at most 256)
template <typename F> static void launch(dim3 grid, size_t smem_bytes, F f, unsigned n = tcattn::TNT)
{
    if (smem_bytes > sizeof tcattn::smem || n > 256 || n % 32) {
        fprintf(stderr, "launch: %zu bytes of shared memory, %u threads\n", smem_bytes, n);
        exit(2);
    }
    tcattn::g_smem_bytes = smem_bytes;
    blockDim = dim3(n);
    gridDim = grid;
    pthread_barrier_init(&g_block_bar, nullptr, n);
    for (unsigned w = 0; w < n / 32; w++) pthread_barrier_init(&g_warp_bar[w], nullptr, 32);
    for (unsigned by = 0; by < grid.y; by++)
        for (unsigned bx = 0; bx < grid.x; bx++) {
            memset(tcattn::smem, 0xff, sizeof tcattn::smem);
            blk<F> k{&f, dim3(bx, by)};
            emu_pool_run(n, run_thread<F>, &k);
        }
    pthread_barrier_destroy(&g_block_bar);
    for (unsigned w = 0; w < n / 32; w++) pthread_barrier_destroy(&g_warp_bar[w]);
}
// a kernel without barriers or shuffles (k_mma2_to16): its threads one after
// another on this thread
template <typename F> static void launch_flat(dim3 grid, unsigned n, F f)
{
    blockDim = dim3(n);
    gridDim = grid;
    for (unsigned by = 0; by < grid.y; by++)
        for (unsigned bx = 0; bx < grid.x; bx++)
            for (unsigned t = 0; t < n; t++) {
                threadIdx = dim3(t);
                blockIdx = dim3(bx, by);
                f();
            }
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
// mma: 0 the WMMA kernels (train_gpt_attn_tc.cuh), 1 the mma.sync ones (train_gpt_attn_mma.cuh, HSM <= 64),
// 2 the pipelined mma.sync ones (train_gpt_attn_mma2.cuh, HSM <= 64; also repeated and against mma's bits)
// the 16-bit pipeline's out widened (of) and k_flash_bwd_pre's D from the
// 16-bit out and dout (D16 [B NH, T]); C = NH HS
template <typename E>
static void widen_out_and_d16(const std::vector<uint16_t> &o16, const std::vector<uint16_t> &d16, std::vector<float> &of,
                              std::vector<float> &D16, int T, int NH, int HS)
{
    const size_t C = (size_t)NH * HS;
    for (size_t i = 0; i < o16.size(); i++) of[i] = tcattn::emu_from16<E>(o16[i]);
    for (size_t r = 0; r < D16.size(); r++) {
        const size_t t = r % T, hh = r / T % NH, b = r / ((size_t)T * NH), off = (b * T + t) * C + hh * HS;
        float acc = 0.0f;
        for (int i = 0; i < HS; i++) acc = fmaf(tcattn::emu_from16<E>(d16[off + i]), of[off + i], acc);
        D16[r] = acc;
    }
}

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
    // part p of k_mma2_to16's copies at h (Tp rows a head): train_gpt_attn.cu's mma2_copy_rows
    auto copy_rows = [&](const uint16_t *h, int p, int Tp) {
        const size_t part = (size_t)B * NH * Tp * HSM;
        return tcattn::m2rows{h + p * part, (size_t)HSM, (size_t)NH * Tp * HSM, (size_t)Tp * HSM};
    };
    // the kernels of `kind` (0 tc, 1 mma, 2 mma2) forward and backward into o, l, dq
    auto run = [&](int kind, std::vector<float> &o, std::vector<float> &l, std::vector<float> &dq) {
        float *po = o.data(), *pl = l.data(), *pd = D.data(), *pq = dq.data();
        (void)pd, (void)pq;
        const int Tp = (T + 127) / 128 * 128; // train_gpt_attn.cu's mma2_tp
        const size_t part = (size_t)B * NH * Tp * HSM;
        std::vector<uint16_t> h16(4 * part, 0xffff); // k_mma2_to16 writes every element: NaN where it did not
        tcattn::g_src = {{h16.data(), h16.size() * 2}, {l.data(), l.size() * 4}, {D.data(), D.size() * 4}};
        if constexpr (HSM <= 64) {
            typedef tcattn::mdims<HSM> MD;
            typedef tcattn::m2dims<HSM> M2;
            if (kind == 1) launch(grid, MD::FWD, [&] { tcattn::k_mma_fwd<E, HSM>(q, po, pl, T, NH, HS, scale, rt); });
            if (kind == 2) {
                // train_gpt_attn.cu's mma2_to16: float4 loads where HS % 4 == 0 (the vectors are 16-byte aligned)
                const int vec = HS % 4 == 0;
                launch_flat(dim3((unsigned)((3 * part / 8 + 255) / 256)), 256, [&] {
                    tcattn::k_mma2_to16<E, HSM>(q, h16.data(), 3, C3, B, T, Tp, NH, HS, vec);
                });
                const tcattn::m2rows hq = copy_rows(h16.data(), 0, Tp), hk = copy_rows(h16.data(), 1, Tp),
                                     hv = copy_rows(h16.data(), 2, Tp);
                launch(dim3((unsigned)((T + 16 * tcattn::M2FW - 1) / (16 * tcattn::M2FW)), (unsigned)(B * NH)), M2::FWD,
                       [&] { tcattn::k_mma2_fwd<E, HSM, tcattn::M2FW>(hq, hk, hv, po, pl, T, NH, HS, scale, rt); },
                       32 * tcattn::M2FW);
            }
        }
        if (kind == 0) launch(grid, SZ::FWD, [&] { tcattn::k_tc_fwd<E, HSM>(q, po, pl, T, NH, HS, scale, rt); });
        for (size_t r = 0; r < nl; r++) { // k_flash_bwd_pre's D
            const size_t t = r % T, h = r / T % NH, b = r / ((size_t)T * NH), off = (b * T + t) * C + h * HS;
            float acc = 0.0f;
            for (int i = 0; i < HS; i++) acc = fmaf(dout[off + i], o[off + i], acc);
            D[r] = acc;
        }
        if constexpr (HSM <= 64) {
            typedef tcattn::mdims<HSM> MD;
            typedef tcattn::m2dims<HSM> M2;
            if (kind == 1) {
                launch(grid, MD::DKV, [&] { tcattn::k_mma_bwd_dkv<E, HSM>(q, dO, pl, pd, pq, T, NH, HS, scale, rt); });
                launch(grid, MD::DQ, [&] { tcattn::k_mma_bwd_dq<E, HSM>(q, dO, pl, pd, pq, T, NH, HS, scale, rt); });
            }
            if (kind == 2) {
                std::fill(h16.begin(), h16.end(), (uint16_t)0xffff);
                const int vec = HS % 4 == 0;
                launch_flat(dim3((unsigned)((3 * part / 8 + 255) / 256)), 256, [&] {
                    tcattn::k_mma2_to16<E, HSM>(q, h16.data(), 3, C3, B, T, Tp, NH, HS, vec);
                });
                launch_flat(dim3((unsigned)((part / 8 + 255) / 256)), 256, [&] {
                    tcattn::k_mma2_to16<E, HSM>(dO, h16.data() + 3 * part, 1, (size_t)C, B, T, Tp, NH, HS, vec);
                });
                const tcattn::m2rows hq = copy_rows(h16.data(), 0, Tp), hk = copy_rows(h16.data(), 1, Tp),
                                     hv = copy_rows(h16.data(), 2, Tp), hd = copy_rows(h16.data(), 3, Tp);
                launch(grid, M2::DKV, [&] {
                    tcattn::k_mma2_bwd_dkv<E, HSM>(hq, hk, hv, hd, pl, pd, pq, T, NH, HS, scale, rt);
                }, 32 * tcattn::M2KW);
                launch(dim3((unsigned)((T + 16 * tcattn::M2QW - 1) / (16 * tcattn::M2QW)), (unsigned)(B * NH)), M2::DQ,
                       [&] { tcattn::k_mma2_bwd_dq<E, HSM, tcattn::M2QW>(hq, hk, hv, hd, pl, pd, pq, T, NH, HS, scale, rt); },
                       32 * tcattn::M2QW);
            }
        }
        if (kind == 0) {
            launch(grid, SZ::DKV, [&] { tcattn::k_tc_bwd_dkv<E, HSM>(q, dO, pl, pd, pq, T, NH, HS, scale, rt); });
            launch(grid, SZ::DQ, [&] { tcattn::k_tc_bwd_dq<E, HSM>(q, dO, pl, pd, pq, T, NH, HS, scale, rt); });
        }
    };
    char what[128];
    const char *tn = rt == DT_F16 ? "fp16" : "bf16";
    const char *label = "tc";
#define W(name) (snprintf(what, sizeof what, "%s attention B%d T%d NH%d HS%d (HSM %d) %s %s", label, B, T, NH, HS, HSM, tn, name), what)
    // out, lse, dqkv against the float64 reference
    auto checks = [&](const std::vector<float> &o, const std::vector<float> &l, const std::vector<float> &dq) {
        check(W("out"), o.data(), ro.data(), (size_t)B * T, C, C, u);
        size_t bad = 0, at = 0;
        for (size_t i = 0; i < nl; i++)
            if (!(fabs((double)l[i] - rl[i]) <= 1e-4 * (1 + fabs(rl[i]))) && bad++ == 0) at = i;
        printf("%s %s: %zu past 1e-4 (1 + |ref|)", bad ? "FAIL" : "ok  ", W("lse"), bad);
        if (bad) printf(" (first at %zu: ref %.9g got %.9g)", at, rl[at], (double)l[at]);
        printf("\n");
        bad ? g_fail++ : g_pass++;
        check(W("dq"), dq.data(), rd.data(), (size_t)B * T, C, C3, u);
        check(W("dk"), dq.data() + C, rd.data() + C, (size_t)B * T, C, C3, u);
        check(W("dv"), dq.data() + 2 * C, rd.data() + 2 * C, (size_t)B * T, C, C3, u);
    };
    auto same = [&](const std::vector<float> &a, const std::vector<float> &b) {
        return !memcmp(a.data(), b.data(), a.size() * sizeof(float));
    };
    tcattn::g_cp_eager = false;
    run(mma == 3 ? 1 : mma, out, lse, dqkv);
    label = mma == 0 ? "tc" : mma == 2 ? "mma2" : "mma";
    checks(out, lse, dqkv);
    if constexpr (HSM <= 64) {
        if (mma == 1 || mma == 3) { // out, lse, dqkv hold the mma kernels' results
            // the mma kernels on 16-bit storage (S = uint16_t: the gpt 16-bit
            // activation pipeline, train_ops.h): qkv, dout in, out, dqkv out as
            // E's 16 bits, D from the 16-bit out and dout: the same bits
            typedef tcattn::mdims<HSM> MD;
            const bool h = std::is_same<E, __half>::value;
            std::vector<uint16_t> q16(n3), d16(n1), o16(n1, 0xffff), g16(n3, 0xffff);
            for (size_t i = 0; i < n3; i++) q16[i] = h ? f32_to_f16(qkv[i]) : f32_to_bf16(qkv[i]);
            for (size_t i = 0; i < n1; i++) d16[i] = h ? f32_to_f16(dout[i]) : f32_to_bf16(dout[i]);
            std::vector<float> l16(nl, NAN), D16(nl), of(n1), gf(n3);
            const uint16_t *pq16 = q16.data(), *pd16 = d16.data();
            uint16_t *po16 = o16.data(), *pg16 = g16.data();
            float *pl16 = l16.data(), *pD16 = D16.data();
            launch(grid, MD::FWD, [&] { tcattn::k_mma_fwd<E, HSM, uint16_t>(pq16, po16, pl16, T, NH, HS, scale, rt); });
            widen_out_and_d16<E>(o16, d16, of, D16, T, NH, HS);
            launch(grid, MD::DKV, [&] {
                tcattn::k_mma_bwd_dkv<E, HSM, uint16_t>(pq16, pd16, pl16, pD16, pg16, T, NH, HS, scale, rt);
            });
            launch(grid, MD::DQ, [&] {
                tcattn::k_mma_bwd_dq<E, HSM, uint16_t>(pq16, pd16, pl16, pD16, pg16, T, NH, HS, scale, rt);
            });
            for (size_t i = 0; i < n3; i++) gf[i] = tcattn::emu_from16<E>(g16[i]);
            const bool ok = same(of, out) && same(l16, lse) && same(gf, dqkv);
            printf("%s %s\n", ok ? "ok  " : "FAIL", W("16-bit storage: the fp32 storage's bits (out, lse, dqkv)"));
            ok ? g_pass++ : g_fail++;
        }
    }
    if (mma >= 2) {
        // mma 3: the mma kernels' results in out, lse, dqkv, mma2's in o2..;
        // mma 2: mma2's in out, lse, dqkv, the mma kernels' (for the bits) in o2..
        std::vector<float> o2(n1, NAN), l2(nl, NAN), d2(n3, NAN);
        run(mma == 3 ? 2 : 1, o2, l2, d2);
        if (mma == 3) {
            label = "mma2";
            checks(o2, l2, d2);
        }
        const std::vector<float> &a = mma == 3 ? o2 : out, &al = mma == 3 ? l2 : lse, &ad = mma == 3 ? d2 : dqkv;
        const std::vector<float> &m = mma == 3 ? out : o2, &ml = mma == 3 ? lse : l2, &md_ = mma == 3 ? dqkv : d2;
        // where more than two tiles stream through the double buffers (T >
        // 128), the same case again with every cp.async done at issue (other
        // timings of the copies: the same bits)
        if (T > 128) {
            std::vector<float> o4(n1, NAN), l4(nl, NAN), d4(n3, NAN);
            tcattn::g_cp_eager = true;
            run(2, o4, l4, d4);
            tcattn::g_cp_eager = false;
            const bool ok = same(a, o4) && same(al, l4) && same(ad, d4);
            printf("%s %s\n", ok ? "ok  " : "FAIL", W("bits repeat with cp.async done at issue"));
            ok ? g_pass++ : g_fail++;
        }
        // the mma kernels on the same inputs: the same products in the same
        // order (train_gpt_attn_mma2.cuh), so the same bits
        const bool ok = same(a, m) && same(al, ml) && same(ad, md_);
        printf("%s %s\n", ok ? "ok  " : "FAIL", W("bits: the mma kernels' (out, lse, dqkv)"));
        ok ? g_pass++ : g_fail++;
        if constexpr (HSM <= 64) {
            // mma2 on 16-bit storage (S = uint16_t, the gpt 16-bit activation
            // pipeline): k_mma2_to16 copies the 16-bit qkv and dout (one uint4
            // a thread where HS % 8 == 0), out and dqkv are written as E's 16
            // bits, D from the 16-bit out and dout: the fp32 storage's bits
            typedef tcattn::m2dims<HSM> M2;
            const bool hf = std::is_same<E, __half>::value;
            std::vector<uint16_t> q16(n3), d16(n1), o16(n1, 0xffff), g16(n3, 0xffff);
            for (size_t i = 0; i < n3; i++) q16[i] = hf ? f32_to_f16(qkv[i]) : f32_to_bf16(qkv[i]);
            for (size_t i = 0; i < n1; i++) d16[i] = hf ? f32_to_f16(dout[i]) : f32_to_bf16(dout[i]);
            const int Tp = (T + 127) / 128 * 128;
            const size_t part = (size_t)B * NH * Tp * HSM;
            std::vector<uint16_t> h16(4 * part, 0xffff);
            std::vector<float> l16(nl, NAN), D16(nl), of(n1), gf(n3);
            tcattn::g_src = {{h16.data(), h16.size() * 2}, {l16.data(), l16.size() * 4}, {D16.data(), D16.size() * 4}};
            const int vec = HS % 8 == 0;
            const uint16_t *pq16 = q16.data(), *pd16 = d16.data();
            const tcattn::m2rows hq = copy_rows(h16.data(), 0, Tp), hk = copy_rows(h16.data(), 1, Tp),
                                 hv = copy_rows(h16.data(), 2, Tp), hd = copy_rows(h16.data(), 3, Tp);
            uint16_t *po16 = o16.data(), *pg16 = g16.data(), *ph = h16.data();
            float *pl16 = l16.data(), *pD16 = D16.data();
            // forward, D from the 16-bit out, then the backward, all reading
            // rows q, k, v, dout (before_bwd refills them where they are
            // copies); true where out, lse and dqkv are the fp32 storage's bits
            auto run16 = [&](const tcattn::m2rows &q_, const tcattn::m2rows &k_, const tcattn::m2rows &v_,
                             const tcattn::m2rows &d_, auto &&before_bwd) {
                launch(dim3((unsigned)((T + 16 * tcattn::M2FW - 1) / (16 * tcattn::M2FW)), (unsigned)(B * NH)),
                       M2::FWD,
                       [&] { tcattn::k_mma2_fwd<E, HSM, tcattn::M2FW, uint16_t>(q_, k_, v_, po16, pl16, T, NH, HS, scale, rt); },
                       32 * tcattn::M2FW);
                widen_out_and_d16<E>(o16, d16, of, D16, T, NH, HS);
                before_bwd();
                launch(grid, M2::DKV, [&] {
                    tcattn::k_mma2_bwd_dkv<E, HSM, uint16_t>(q_, k_, v_, d_, pl16, pD16, pg16, T, NH, HS, scale, rt);
                }, 32 * tcattn::M2KW);
                launch(dim3((unsigned)((T + 16 * tcattn::M2QW - 1) / (16 * tcattn::M2QW)), (unsigned)(B * NH)), M2::DQ,
                       [&] { tcattn::k_mma2_bwd_dq<E, HSM, tcattn::M2QW, uint16_t>(q_, k_, v_, d_, pl16, pD16, pg16, T, NH, HS, scale, rt); },
                       32 * tcattn::M2QW);
                for (size_t i = 0; i < n3; i++) gf[i] = tcattn::emu_from16<E>(g16[i]);
                return same(of, a) && same(l16, al) && same(gf, ad);
            };
            launch_flat(dim3((unsigned)((3 * part / 8 + 255) / 256)), 256, [&] {
                tcattn::k_mma2_to16<E, HSM, uint16_t>(pq16, ph, 3, C3, B, T, Tp, NH, HS, vec);
            });
            const bool ok16 = run16(hq, hk, hv, hd, [&] {
                std::fill(h16.begin(), h16.end(), (uint16_t)0xffff);
                launch_flat(dim3((unsigned)((3 * part / 8 + 255) / 256)), 256, [&] {
                    tcattn::k_mma2_to16<E, HSM, uint16_t>(pq16, ph, 3, C3, B, T, Tp, NH, HS, vec);
                });
                launch_flat(dim3((unsigned)((part / 8 + 255) / 256)), 256, [&] {
                    tcattn::k_mma2_to16<E, HSM, uint16_t>(pd16, ph + 3 * part, 1, (size_t)C, B, T, Tp, NH, HS, vec);
                });
            });
            label = "mma2";
            printf("%s %s\n", ok16 ? "ok  " : "FAIL", W("16-bit storage: the fp32 storage's bits (out, lse, dqkv)"));
            ok16 ? g_pass++ : g_fail++;
            if (T % tcattn::M2TP == 0 && HS == HSM) {
                // the same kernels reading qkv and dout in place (train_gpt_attn.cu's
                // mma2_fits shapes): rows at stride 3C or C, no copies;
                // the copies are not among the buffers cp.async may read
                // (g_src), so a tile the kernels still took from them dies
                const auto direct = [&](const uint16_t *src, int p, size_t ld) {
                    return tcattn::m2rows{src + (size_t)p * NH * HS, ld, (size_t)T * ld, (size_t)HS};
                };
                std::fill(o16.begin(), o16.end(), (uint16_t)0xffff);
                std::fill(g16.begin(), g16.end(), (uint16_t)0xffff);
                std::fill(l16.begin(), l16.end(), NAN);
                tcattn::g_src = {{pq16, q16.size() * 2}, {pd16, d16.size() * 2}, {l16.data(), l16.size() * 4},
                                 {D16.data(), D16.size() * 4}};
                const bool okd = run16(direct(pq16, 0, C3), direct(pq16, 1, C3), direct(pq16, 2, C3),
                                       direct(pd16, 0, (size_t)C), [] {});
                printf("%s %s\n", okd ? "ok  " : "FAIL", W("16-bit storage read in place: the fp32 storage's bits"));
                okd ? g_pass++ : g_fail++;
            }
        }
    }
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

// argument: tc, mma or mma2 runs those cases only (the mma2 cases also run
// the mma kernels for their bits); none: all
int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : nullptr;
    const bool tc = !only || !strcmp(only, "tc"), mm = !only || !strcmp(only, "mma"),
               m2 = !only || !strcmp(only, "mma2");
    if (tc) {
        attention<__nv_bfloat16, 64>(2, 100, 2, 64, DT_BF16);
        attention<__nv_bfloat16, 32>(1, 37, 2, 32, DT_BF16);
        attention<__nv_bfloat16, 64>(1, 1, 1, 64, DT_BF16);
        attention<__half, 128>(1, 70, 1, 96, DT_F16);
        attention<__half, 32>(1, 130, 2, 16, DT_F16);
        attention<__nv_bfloat16, 64>(1, 128, 1, 48, DT_BF16);
    }
    // the mma.sync kernels (head widths up to 64): partial tiles, T < 64, T = 1,
    // several tiles, odd and padded head widths, bf16 and fp16, T = 512; and
    // the pipelined ones (train_gpt_attn_mma2.cuh) on the same inputs (m 3)
    const int m = (mm ? 1 : 0) | (m2 ? 2 : 0);
    if (m) {
        attention<__nv_bfloat16, 64>(2, 100, 2, 64, DT_BF16, m);
        attention<__nv_bfloat16, 32>(1, 37, 2, 32, DT_BF16, m);
        attention<__nv_bfloat16, 64>(1, 1, 1, 64, DT_BF16, m);
        attention<__half, 32>(1, 130, 2, 16, DT_F16, m);
        attention<__nv_bfloat16, 64>(1, 128, 1, 48, DT_BF16, m);
        attention<__half, 64>(1, 200, 1, 64, DT_F16, m);
        attention<__nv_bfloat16, 64>(1, 77, 2, 50, DT_BF16, m);
        attention<__nv_bfloat16, 64>(1, 512, 1, 64, DT_BF16, m); // 8 tiles: mostly unmasked ones
        attention<__half, 64>(2, 256, 2, 64, DT_F16, m);          // in place over several images and heads
    }
    // the pipelined kernels alone (and the mma kernels for their bits): T = 129
    // (a 128-query forward and dQ tile with one row), T = 1 in fp16 at width 32,
    // width 36 (float4 loads, the second of a chunk past the head), T = 256
    // (whole tiles, no padded rows)
    if (m2) {
        attention<__half, 64>(1, 129, 1, 64, DT_F16, 2);
        attention<__half, 32>(2, 1, 2, 32, DT_F16, 2);
        attention<__nv_bfloat16, 64>(1, 300, 2, 36, DT_BF16, 2);
        attention<__half, 64>(2, 256, 1, 64, DT_F16, 2);
    }
    if (tc) {
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
    }
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
