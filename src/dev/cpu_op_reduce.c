/* cpu reductions: sum, softmax, layernorm.
 * Golden: core/gmath.h (pairwise tree; gsoftmax_row; glayernorm_row). The
 * whole-array sum splits the input into aligned 2^16-element chunks (level-16
 * elements of the tree), computed in parallel, then finishes the tree over
 * the chunk sums: the same bits for any thread count.
 * Fast: chunk sums with 16 float accumulators, chunks combined in float64 in
 * order; rows with libm expf and float64 row statistics. Deterministic for
 * any thread count too (fixed chunking). */
#include "core/gmath.h"
#include "dev/cpu_numerics.h"
#include <math.h>
#include <stdlib.h>

#define SUM_CHUNK_LOG2 16
#define SUM_CHUNK ((size_t)1 << SUM_CHUNK_LOG2)

static float fast_chunk_sum(const float *x, size_t n)
{
    float a[16] = {0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) a[j] += x[i + j];
    for (int j = 0; i < n; i++, j++) a[j] += x[i];
    double s = 0;
    for (int j = 0; j < 16; j++) s += a[j];
    return (float)s;
}

int cpu_sum(struct dev *d, dev_stream *s, const float *x, size_t n, float *out)
{
    (void)s;
    if (!out || (n && !x)) return PLUMB_EUSAGE;
    size_t nc = (n + SUM_CHUNK - 1) / SUM_CHUNK;
    if (nc <= 1) {
        *out = (d && d->numerics == NUMERICS_GOLDEN) ? gsum(x, n) : fast_chunk_sum(x, n);
        return PLUMB_OK;
    }
    float *cs = malloc(nc * sizeof *cs);
    if (!cs) return PLUMB_ENOMEM;
    int golden = d && d->numerics == NUMERICS_GOLDEN;
    int nt = cpu_nthreads(d);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (size_t c = 0; c < nc; c++) {
        size_t lo = c * SUM_CHUNK, len = n - lo < SUM_CHUNK ? n - lo : SUM_CHUNK;
        cs[c] = golden ? gsum(x + lo, len) : fast_chunk_sum(x + lo, len);
    }
    if (golden) {
        *out = gsum(cs, nc);
    } else {
        double t = 0;
        for (size_t c = 0; c < nc; c++) t += cs[c];
        *out = (float)t;
    }
    free(cs);
    return PLUMB_OK;
}

int cpu_softmax(struct dev *d, dev_stream *s, const float *x, float *y, int rows, int cols)
{
    (void)s;
    if (rows < 0 || cols < 0 || ((!x || !y) && rows && cols)) return PLUMB_EUSAGE;
    int golden = d && d->numerics == NUMERICS_GOLDEN;
    int nt = cpu_nthreads(d);
#pragma omp parallel for num_threads(nt) schedule(static) if ((double)rows * cols > 32768)
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * cols;
        float *yr = y + (size_t)r * cols;
        if (golden) {
            gsoftmax_row(xr, yr, cols);
            continue;
        }
        if (cols == 0) continue;
        float m = xr[0];
        for (int i = 1; i < cols; i++) m = xr[i] > m ? xr[i] : m;
        double sum = 0;
        for (int i = 0; i < cols; i++) {
            yr[i] = expf(xr[i] - m);
            sum += yr[i];
        }
        float inv = (float)(1.0 / sum);
        for (int i = 0; i < cols; i++) yr[i] *= inv;
    }
    return PLUMB_OK;
}

int cpu_layernorm(struct dev *d, dev_stream *s, const float *x, const float *w, const float *b,
                  float *y, float *mean, float *rstd, int rows, int cols, float eps)
{
    (void)s;
    if (rows < 0 || cols <= 0 || ((!x || !y) && rows)) return PLUMB_EUSAGE;
    int golden = d && d->numerics == NUMERICS_GOLDEN;
    int nt = cpu_nthreads(d);
#pragma omp parallel for num_threads(nt) schedule(static) if ((double)rows * cols > 32768)
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * cols;
        float *yr = y + (size_t)r * cols;
        if (golden) {
            glayernorm_row(xr, w, b, yr, cols, eps, mean ? mean + r : NULL, rstd ? rstd + r : NULL);
            continue;
        }
        double mu = 0, var = 0;
        for (int i = 0; i < cols; i++) mu += xr[i];
        mu /= cols;
        for (int i = 0; i < cols; i++) var += (xr[i] - mu) * (xr[i] - mu);
        var /= cols;
        float m = (float)mu, rs = (float)(1.0 / sqrt(var + eps));
        for (int i = 0; i < cols; i++) {
            float h = (xr[i] - m) * rs;
            yr[i] = h * (w ? w[i] : 1.0f) + (b ? b[i] : 0.0f);
        }
        if (mean) mean[r] = m;
        if (rstd) rstd[r] = rs;
    }
    return PLUMB_OK;
}
