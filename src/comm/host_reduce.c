/* dst[i] = dst[i] op src[i] on the host, for every (dtype, op) the host
 * implementations reduce: what MPI has no predefined operation for (bf16,
 * fp16: through fp32, rounded to nearest even like the device casts) and the
 * staged and self paths. */
#include "comm/comm.h"

#define LOOP(T, EXPR)                                                                                                  \
    do {                                                                                                               \
        T *d_ = dst;                                                                                                   \
        const T *s_ = src;                                                                                             \
        for (size_t i = 0; i < n; i++) {                                                                               \
            T x = d_[i], y = s_[i];                                                                                    \
            d_[i] = (EXPR);                                                                                            \
        }                                                                                                              \
    } while (0)
#define BY_OP(T)                                                                                                       \
    do {                                                                                                               \
        if (op == COMM_SUM) LOOP(T, (T)(x + y));                                                                       \
        else if (op == COMM_MAX) LOOP(T, x > y ? x : y);                                                               \
        else LOOP(T, x < y ? x : y);                                                                                   \
    } while (0)
/* NaN propagates through max/min as it does on the devices */
#define BY_OP_FLOAT(T)                                                                                                 \
    do {                                                                                                               \
        if (op == COMM_SUM) LOOP(T, x + y);                                                                            \
        else if (op == COMM_MAX) LOOP(T, (x != x || x > y) ? x : y);                                                   \
        else LOOP(T, (x != x || x < y) ? x : y);                                                                       \
    } while (0)
#define HALF(TO_F, FROM_F)                                                                                             \
    do {                                                                                                               \
        uint16_t *d_ = dst;                                                                                            \
        const uint16_t *s_ = src;                                                                                      \
        for (size_t i = 0; i < n; i++) {                                                                               \
            float x = TO_F(d_[i]), y = TO_F(s_[i]);                                                                    \
            float r = op == COMM_SUM ? x + y : op == COMM_MAX ? ((x != x || x > y) ? x : y) : ((x != x || x < y) ? x : y); \
            d_[i] = FROM_F(r);                                                                                         \
        }                                                                                                              \
    } while (0)

int comm_host_reduce(void *dst, const void *src, size_t n, dtype_t t, enum comm_op op)
{
    if ((unsigned)op >= COMM_OP_N) return 0;
    switch (t) {
    case DT_F32: BY_OP_FLOAT(float); return 1;
    case DT_F64: BY_OP_FLOAT(double); return 1;
    /* signed sums wrap (unsigned arithmetic), as MPI and NCCL do on overflow */
    case DT_I32:
        if (op == COMM_SUM) LOOP(int32_t, (int32_t)((uint32_t)x + (uint32_t)y));
        else BY_OP(int32_t);
        return 1;
    case DT_I64:
        if (op == COMM_SUM) LOOP(int64_t, (int64_t)((uint64_t)x + (uint64_t)y));
        else BY_OP(int64_t);
        return 1;
    case DT_U32: BY_OP(uint32_t); return 1;
    case DT_U8: BY_OP(uint8_t); return 1;
    case DT_BF16: HALF(bf16_to_f32, f32_to_bf16); return 1;
    case DT_F16: HALF(f16_to_f32, f32_to_f16); return 1;
    }
    return 0;
}
