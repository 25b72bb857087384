/* The ordered slice sum behind tr_sum_slices (gpu/train_linear.cu): the
 * second half of a GEMM whose contraction over the batch was cut into S
 * slices, out[j] = part[0][j] + part[1][j] + ... + part[S-1][j] added in
 * slice order, so the bits do not depend on the launch. Device code that
 * gpu/train_linear.cu launches and tests/tools/gpu_emu.cc runs on the cpu. */
#ifndef PLUMB_GPU_SUM_SLICES_CUH
#define PLUMB_GPU_SUM_SLICES_CUH

/* one element a thread: part [S, n] -> out [n] */
static __global__ void k_sum_slices(const float *part, int S, size_t n, float *out)
{
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < n; j += (size_t)gridDim.x * blockDim.x) {
        float s = part[j];
        for (int i = 1; i < S; i++) s = s + part[(size_t)i * n + j];
        out[j] = s;
    }
}

/* The same sums, four elements a thread (float4: n = 4 n4, part and out
 * 16-byte aligned). A group of SUMSL_G slices' loads is issued before their
 * adds, so a thread has up to SUMSL_G x 16 bytes in flight where
 * k_sum_slices waits on each 4-byte load in turn (96 calls of it took 1.04 ms
 * of a gpt2-124m step on an H100, 2026-12-06, against about 0.7 ms for their
 * bytes). Each element gets the same additions in the same order, starting
 * from slice 0's value: the same bits. */
#define SUMSL_G 8
__device__ static inline void sumsl_add(float4 &s, const float4 &v)
{
    s.x = s.x + v.x;
    s.y = s.y + v.y;
    s.z = s.z + v.z;
    s.w = s.w + v.w;
}
static __global__ void k_sum_slices4(const float4 *part, int S, size_t n4, float4 *out)
{
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < n4; j += (size_t)gridDim.x * blockDim.x) {
        float4 s = part[j];
        for (int g = 1; g < S; g += SUMSL_G) {
            float4 v[SUMSL_G];
#pragma unroll
            for (int k = 0; k < SUMSL_G; k++)
                if (g + k < S) v[k] = part[(size_t)(g + k) * n4 + j];
#pragma unroll
            for (int k = 0; k < SUMSL_G; k++)
                if (g + k < S) sumsl_add(s, v[k]);
        }
        out[j] = s;
    }
}

#endif
