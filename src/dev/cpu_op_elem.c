/* cpu elementwise ops: unary functions and dtype casts.
 * Golden unary: core/gmath.h. Fast unary: libm (gelu as x/(1+expf(-2v)),
 * the same tanh-GELU without the 1+tanh cancellation). Casts are the RNE
 * casts of core/dtype.h in both modes. */
#include "core/dtype.h"
#include "core/gmath.h"
#include "dev/cpu_numerics.h"
#include <math.h>

static float fast_gelu(float x)
{
    float w = x + 0.044715f * x * x * x;
    return x / (1.0f + expf(-1.5957691216f * w));
}

int cpu_unary(struct dev *d, dev_stream *s, enum unary_op op, const float *x, float *y, size_t n)
{
    (void)s;
    if ((unsigned)op >= UNARY_COUNT || (n && (!x || !y))) return PLUMB_EUSAGE;
    int golden = d && d->numerics == NUMERICS_GOLDEN;
    int nt = cpu_nthreads(d);
    int64_t nn = (int64_t)n;
#pragma omp parallel for num_threads(nt) schedule(static) if (n > 65536)
    for (int64_t i = 0; i < nn; i++) {
        float v = x[i], r;
        switch (op) {
        case UNARY_EXP: r = golden ? gexpf(v) : expf(v); break;
        case UNARY_LOG: r = golden ? glogf(v) : logf(v); break;
        case UNARY_TANH: r = golden ? gtanhf(v) : tanhf(v); break;
        case UNARY_ERF: r = golden ? gerff(v) : erff(v); break;
        default: r = golden ? ggeluf(v) : fast_gelu(v); break;
        }
        y[i] = r;
    }
    return PLUMB_OK;
}

static int cast_ok(dtype_t t) { return t == DT_F32 || t == DT_BF16 || t == DT_F16; }

int cpu_cast(struct dev *d, dev_stream *s, const void *x, dtype_t xt, void *y, dtype_t yt, size_t n)
{
    (void)s;
    if (!cast_ok(xt) || !cast_ok(yt)) return PLUMB_EUNSUPPORTED;
    if (n && (!x || !y)) return PLUMB_EUSAGE;
    int nt = cpu_nthreads(d);
    int64_t nn = (int64_t)n;
#pragma omp parallel for num_threads(nt) schedule(static) if (n > 65536)
    for (int64_t i = 0; i < nn; i++) {
        float v;
        switch (xt) {
        case DT_BF16: v = bf16_to_f32(((const uint16_t *)x)[i]); break;
        case DT_F16: v = f16_to_f32(((const uint16_t *)x)[i]); break;
        default: v = ((const float *)x)[i]; break;
        }
        switch (yt) {
        case DT_BF16: ((uint16_t *)y)[i] = f32_to_bf16(v); break;
        case DT_F16: ((uint16_t *)y)[i] = f32_to_f16(v); break;
        default: ((float *)y)[i] = v; break;
        }
    }
    return PLUMB_OK;
}
