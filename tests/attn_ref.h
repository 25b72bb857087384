/* The float64 reference of dev/train_ops.h's attention_fwd / attention_bwd,
 * shared by the GPU attention tests (tests/test_gpu_attn.c), the fast-vs-
 * golden bound of tests/test_train_gpt_ops.c and the CPU emulation of the
 * tensor-core kernels (tests/tools/gpu_emu_tc.cc; plain C that C++ takes).
 * qkv [B, T, 3C], dout [B, T, C]; out [B, T, C], lse [B, NH, T], dqkv
 * [B, T, 3C]. Optional magnitudes (NULL: not computed): mo[t,i] = sum_j
 * p_tj |v_j[i]| beside out; md beside dqkv: scale sum_j |ds_tj k_j[i]| (dq),
 * scale sum_t |ds_tj q_t[i]| (dk), sum_t p_tj |dout_t[i]| (dv). They are what
 * a rounding of each term of those sums scales with. */
#ifndef PLUMB_TESTS_ATTN_REF_H
#define PLUMB_TESTS_ATTN_REF_H
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void attn_ref64(const float *qkv, const float *dout, int B, int T, int NH, int HS, double *out, double *lse,
                       double *dqkv, double *mo, double *md)
{
    const int C = NH * HS;
    const size_t C3 = 3 * (size_t)C, n1 = (size_t)B * T * C, n3 = (size_t)B * T * C3;
    const double scale = (double)(1.0f / sqrtf((float)HS));
    double *p = (double *)malloc((size_t)T * sizeof(double)), *o = (double *)malloc((size_t)HS * sizeof(double));
    if (dqkv) memset(dqkv, 0, n3 * sizeof(double));
    if (mo) memset(mo, 0, n1 * sizeof(double));
    if (md) memset(md, 0, n3 * sizeof(double));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *base = qkv + (size_t)b * T * C3 + (size_t)h * HS;
            const size_t bh = (size_t)b * T * C3 + (size_t)h * HS;
            for (int t = 0; t < T; t++) {
                const float *q = base + (size_t)t * C3, *g = dout + ((size_t)b * T + t) * C + (size_t)h * HS;
                const size_t ot = ((size_t)b * T + t) * C + (size_t)h * HS;
                double m = -INFINITY, l = 0;
                for (int j = 0; j <= t; j++) {
                    double s = 0;
                    for (int i = 0; i < HS; i++) s += (double)q[i] * base[(size_t)j * C3 + C + i];
                    p[j] = s * scale;
                    if (p[j] > m) m = p[j];
                }
                for (int j = 0; j <= t; j++) l += (p[j] = exp(p[j] - m));
                for (int i = 0; i < HS; i++) o[i] = 0;
                for (int j = 0; j <= t; j++) {
                    p[j] /= l;
                    for (int i = 0; i < HS; i++) {
                        const double v = base[(size_t)j * C3 + 2 * C + i];
                        o[i] += p[j] * v;
                        if (mo) mo[ot + i] += p[j] * fabs(v);
                    }
                }
                double Dt = 0;
                for (int i = 0; i < HS; i++) {
                    if (out) out[ot + i] = o[i];
                    Dt += (double)g[i] * o[i];
                }
                if (lse) lse[((size_t)b * NH + h) * T + t] = m + log(l);
                for (int j = 0; j <= t; j++) {
                    const float *k = base + (size_t)j * C3 + C, *v = k + C;
                    double dp = 0;
                    for (int i = 0; i < HS; i++) dp += (double)g[i] * v[i];
                    const double ds = p[j] * (dp - Dt);
                    for (int i = 0; i < HS; i++) {
                        if (dqkv) {
                            dqkv[bh + (size_t)t * C3 + i] += scale * ds * k[i];
                            dqkv[bh + (size_t)j * C3 + C + i] += scale * ds * q[i];
                            dqkv[bh + (size_t)j * C3 + 2 * C + i] += p[j] * g[i];
                        }
                        if (md) {
                            md[bh + (size_t)t * C3 + i] += scale * fabs(ds * k[i]);
                            md[bh + (size_t)j * C3 + C + i] += scale * fabs(ds * q[i]);
                            md[bh + (size_t)j * C3 + 2 * C + i] += p[j] * fabs(g[i]);
                        }
                    }
                }
            }
        }
    free(p);
    free(o);
}
#endif
