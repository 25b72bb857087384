/* Casts between fp32, bf16 and fp16 (bit patterns in uint16), round to
 * nearest even through core/dtype.h's software conversions, so the stored
 * bits equal the CPU's in both numerics modes. bf16 <-> fp16 goes through
 * fp32 (exact widening, one rounding). */
#include "gpu/gpu.h"
#include "gpu/ops.h"
#include "core/dtype.h"

__device__ static inline float load_as_f32(const void *x, int t, size_t i)
{
    if (t == DT_F32) return ((const float *)x)[i];
    uint16_t h = ((const uint16_t *)x)[i];
    return t == DT_BF16 ? bf16_to_f32(h) : f16_to_f32(h);
}

__global__ void k_cast(const void *__restrict__ x, int xt, void *__restrict__ y, int yt, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float v = load_as_f32(x, xt, i);
        if (yt == DT_F32) ((float *)y)[i] = v;
        else ((uint16_t *)y)[i] = yt == DT_BF16 ? f32_to_bf16(v) : f32_to_f16(v);
    }
}

/* fp32 -> 16-bit, four values a thread (a 16-byte load, an 8-byte store)
 * and the tail past the last whole four in block 0: the same conversion
 * per value, so the same bits. One value a thread took 62 us for each of
 * gpt2-124m's 12.6 M-value gradient casts on an H100 (BENCHMARKS.md,
 * 2026-12-05), about twice the bytes' time. */
__global__ void k_cast_f32_16x4(const float *__restrict__ x, uint16_t *__restrict__ y, int yt, size_t n)
{
    const size_t n4 = n / 4, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x; j < n4; j += stride) {
        const float4 v = ((const float4 *)x)[j];
        const float a[4] = {v.x, v.y, v.z, v.w};
        uint16_t h[4];
        for (int k = 0; k < 4; k++) h[k] = yt == DT_BF16 ? f32_to_bf16(a[k]) : f32_to_f16(a[k]);
        ((uint2 *)y)[j] = make_uint2((uint32_t)h[0] | (uint32_t)h[1] << 16, (uint32_t)h[2] | (uint32_t)h[3] << 16);
    }
    if (blockIdx.x == 0)
        for (size_t i = n4 * 4 + threadIdx.x; i < n; i += blockDim.x)
            y[i] = yt == DT_BF16 ? f32_to_bf16(x[i]) : f32_to_f16(x[i]);
}

int gpu_cast(struct dev *d, struct dev_stream *st, const void *x, dtype_t xt, void *y, dtype_t yt, size_t n,
             plumb_err *e)
{
    int ok = (xt == DT_F32 || xt == DT_BF16 || xt == DT_F16) && (yt == DT_F32 || yt == DT_BF16 || yt == DT_F16);
    if (!ok)
        return gpu_err(e, PLUMB_EUNSUPPORTED, "%s: cast %s -> %s (expected fp32, bf16 or fp16 on both sides)",
                       d->label, dtype_name(xt), dtype_name(yt));
    if (xt == yt) {
        GPU_CHECK(d, cudaMemcpyAsync(y, x, n * dtype_size(xt), cudaMemcpyDeviceToDevice, st->s), e);
        return PLUMB_OK;
    }
    if (xt == DT_F32 && !((uintptr_t)x & 15) && !((uintptr_t)y & 7)) {
        k_cast_f32_16x4<<<gpu_grid(n / 4 ? n / 4 : 1, 256), 256, 0, st->s>>>((const float *)x, (uint16_t *)y, (int)yt, n);
        GPU_CHECK_LAUNCH(d, "k_cast_f32_16x4", e);
        return PLUMB_OK;
    }
    k_cast<<<gpu_grid(n, 256), 256, 0, st->s>>>(x, (int)xt, y, (int)yt, n);
    GPU_CHECK_LAUNCH(d, "k_cast", e);
    return PLUMB_OK;
}
