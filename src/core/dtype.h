/* Element types and the software round-to-nearest-even casts that golden mode
 * uses on every device (so bf16/fp16 storage has the same bits on CPU and GPU).
 * bf16 and fp16 values are carried as uint16_t bit patterns. */
#ifndef PLUMB_DTYPE_H
#define PLUMB_DTYPE_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "core/hd.h"

typedef enum dtype {
    DT_F32 = 0,
    DT_BF16 = 1,
    DT_F16 = 2,
    DT_F64 = 3,
    DT_I32 = 4,
    DT_I64 = 5,
    DT_U8 = 6,
    DT_U32 = 7,
} dtype_t;

static inline size_t dtype_size(dtype_t t)
{
    static const size_t s[] = {4, 2, 2, 8, 4, 8, 1, 4};
    return s[t];
}
static inline const char *dtype_name(dtype_t t)
{
    static const char *n[] = {"fp32", "bf16", "fp16", "fp64", "i32", "i64", "u8", "u32"};
    return n[t];
}

PLUMB_HD uint32_t f32_bits(float f)
{
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
#endif
}
PLUMB_HD float bits_f32(uint32_t u)
{
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, 4);
    return f;
#endif
}

/* CUDA device code on sm_80 and later converts with the hardware's cvt
 * instructions (PLUMB_HW_CVT): IEEE round to nearest even with subnormals,
 * the same bits as the software below for every value but NaN, whose
 * payload the software keeps and cvt does not, so NaN (and, widening,
 * fp16 inf / NaN) takes the software path. One instruction where the
 * software takes about six integer operations (bf16) or a branchy dozen
 * (fp16): the 16-bit elementwise kernels were issue-bound on them
 * (BENCHMARKS.md, 2026-12-05: BN apply 1.23x, backward data 1.31x a copy's
 * time). HIP (gfx90a has no bf16 convert) and host code use the software. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(PLUMB_HIP) && !defined(PLUMB_NO_HW_CVT)
#define PLUMB_HW_CVT 1
#endif

/* fp32 -> bf16, round to nearest even; NaN stays a quiet NaN. */
PLUMB_HD uint16_t f32_to_bf16(float f)
{
#if defined(PLUMB_HW_CVT)
    if (f == f) {
        unsigned short r;
        asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f));
        return r;
    }
    return (uint16_t)((f32_bits(f) >> 16) | 0x40u);
#endif
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
PLUMB_HD float bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

/* fp32 -> IEEE binary16, round to nearest even, with subnormals, overflow to inf. */
PLUMB_HD uint16_t f32_to_f16(float f)
{
#if defined(PLUMB_HW_CVT)
    if (f == f) {
        unsigned short r;
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(f));
        return r;
    }
    return (uint16_t)(((f32_bits(f) >> 16) & 0x8000u) | 0x7e00u);
#endif
    uint32_t u = f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);          /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);          /* >= 65520: inf */
    if (a < 0x38800000u) {                                           /* below 2^-14: subnormal */
        if (a < 0x33000000u) return (uint16_t)sign;                  /* below 2^-25: zero */
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        int s = 126 - (int)(a >> 23); /* value/2^-24 = m * 2^(E-126), s in [14,24] */
        uint32_t r = m >> s;
        uint32_t rem = m & ((1u << s) - 1u), half = 1u << (s - 1);
        if (rem > half || (rem == half && (r & 1u))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = a - 0x38000000u;          /* rebias exponent 127 -> 15 */
    uint32_t rem = r & 0x1fffu;
    r >>= 13;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r++;
    return (uint16_t)(sign | r);
}
PLUMB_HD float f16_to_f32(uint16_t h)
{
#if defined(PLUMB_HW_CVT)
    if ((h & 0x7c00u) != 0x7c00u) {
        float r;
        asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"((unsigned short)h));
        return r;
    }
#endif
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        if (m == 0) return bits_f32(sign);
        /* subnormal: m * 2^-24, exact in fp32 */
        float v = (float)m * 5.9604644775390625e-08f;
        return sign ? -v : v;
    }
    if (e == 31) return bits_f32(sign | 0x7f800000u | (m << 13));
    return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

#endif
