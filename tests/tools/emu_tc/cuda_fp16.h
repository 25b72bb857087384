// tests/tools/gpu_emu_tc.cc's stand-in for CUDA's cuda_fp16.h (see cuda_bf16.h).
#pragma once
#include <cstdint>
#include "core/dtype.h"
struct __half {
    uint16_t bits;
    float f() const { return f16_to_f32(bits); }
};
static inline __half __float2half_rn(float x) { return __half{f32_to_f16(x)}; }
