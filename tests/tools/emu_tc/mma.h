// tests/tools/gpu_emu_tc.cc's stand-in for nvcuda::wmma (16x16x16 only):
// every thread of a warp holds the whole 16 x 16 matrix of a fragment
// (x[r * 16 + c]), so the element-to-row map a kernel reads from a fragment
// it loaded stays consistent; load reads the layout asked for, store is done
// by lane 0 alone (the others see it only after the kernel's __syncwarp),
// mma_sync sums over k ascending in fp32.
#pragma once
#include <cstddef>
#include <type_traits>
namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
template <typename Use, int M, int N, int K, typename T, typename L = void> struct fragment {
    enum { num_elements = 256 };
    float x[256];
};
template <typename Use, typename T, typename L>
inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, L> &a, const T *p, unsigned ldm)
{
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++)
            a.x[r * 16 + c] = std::is_same<L, col_major>::value ? p[(size_t)c * ldm + r].f() : p[(size_t)r * ldm + c].f();
}
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &a, const float *p, unsigned ldm, layout_t l)
{
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) a.x[r * 16 + c] = l == mem_row_major ? p[(size_t)r * ldm + c] : p[(size_t)c * ldm + r];
}
void emu_store_lane0(float *p, const float *x, unsigned ldm, bool rowm);
inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &a, unsigned ldm, layout_t l)
{
    emu_store_lane0(p, a.x, ldm, l == mem_row_major);
}
template <typename U, typename T, typename L> inline void fill_fragment(fragment<U, 16, 16, 16, T, L> &a, float v)
{
    for (int i = 0; i < 256; i++) a.x[i] = v;
}
template <typename T, typename LA, typename LB>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d, const fragment<matrix_a, 16, 16, 16, T, LA> &a,
                     const fragment<matrix_b, 16, 16, 16, T, LB> &b, const fragment<accumulator, 16, 16, 16, float> &c)
{
    float out[256];
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 16; n++) {
            float s = c.x[r * 16 + n];
            for (int k = 0; k < 16; k++) s += a.x[r * 16 + k] * b.x[k * 16 + n];
            out[r * 16 + n] = s;
        }
    for (int i = 0; i < 256; i++) d.x[i] = out[i];
}
} // namespace wmma
} // namespace nvcuda
