// tests/tools/gpu_emu_tc.cc's stand-in for CUDA's cuda_bf16.h: the 16-bit
// storage type and its round-to-nearest-even conversion (core/dtype.h).
#pragma once
#include <cstdint>
#include "core/dtype.h"
struct __nv_bfloat16 {
    uint16_t bits;
    float f() const { return bf16_to_f32(bits); }
};
static inline __nv_bfloat16 __float2bfloat16_rn(float x) { return __nv_bfloat16{f32_to_bf16(x)}; }
