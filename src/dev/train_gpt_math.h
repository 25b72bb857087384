/* Golden definitions of the transformer ops (dev/train_ops.h, "transformer
 * ops (gpt)"), shared by the cpu backend (dev/cpu_train_gpt.c) and the GPU
 * kernels (gpu/train_gpt_*.cu) through PLUMB_HD: one source, so golden
 * results are the same bits on every device. Built only from fp32 + - * /,
 * fmaf written out and core/gmath.h (gexpf, glogf, the pairwise sum), with
 * -ffp-contract=off / --fmad=false, as gmath.h requires.
 *
 * Every function computes one row (or one key column) of an op; callers
 * parallelise over rows only, never inside a chain. */
#ifndef PLUMB_TRAIN_GPT_MATH_H
#define PLUMB_TRAIN_GPT_MATH_H
#include <stddef.h>
#include <stdint.h>
#include "core/dtype.h"
#include "core/gmath.h"
#include "core/hd.h"

/* x rounded to nearest even in rt (DT_BF16, DT_F16) and widened back;
 * DT_F32 (and anything else): x. The rounding every op applies to what it
 * stores (dev/train_ops.h). */
PLUMB_HD float gg_round(float x, int rt)
{
    if (rt == DT_BF16) return bf16_to_f32(f32_to_bf16(x));
    if (rt == DT_F16) return f16_to_f32(f32_to_f16(x));
    return x;
}

/* acc = +0; acc = fmaf(a[i], b[i], acc) for i = 0..n-1: the golden dot. */
PLUMB_HD float gg_dot(const float *a, const float *b, int n)
{
    float acc = 0.0f;
    for (int i = 0; i < n; i++) acc = fmaf(a[i], b[i], acc);
    return acc;
}

/* ---------------------------------------------------------------- attention */

/* One query row of attention_fwd. q [HS] is q_t; key j's k and v are at
 * k0 + j*stride and v0 + j*stride (stride = 3C in the qkv layout); keys
 * 0..t. p [t+1] is scratch (it ends holding the softmax row), out [HS] the
 * output row (also the accumulator), *lse the log-sum-exp.
 *   s_j = gg_dot(q, k_j) * scale;  m = s_0, then m = s_j when s_j > m;
 *   e_j = gexpf(s_j - m); l = pairwise sum of e_0..e_t; p_j = e_j / l;
 *   out[i] = fmaf chain of p_j * v_j[i] over j ascending from 0, rounded;
 *   lse = m + glogf(l). */
PLUMB_HD void gpt_gold_attn_row(const float *q, const float *k0, const float *v0, size_t stride, int t, int HS,
                                float scale, float *p, float *out, float *lse, int rt)
{
    float m = 0.0f;
    for (int j = 0; j <= t; j++) {
        float s = gg_dot(q, k0 + (size_t)j * stride, HS) * scale;
        p[j] = s;
        if (j == 0 || s > m) m = s;
    }
    struct gpairwise pw;
    gpw_init(&pw);
    for (int j = 0; j <= t; j++) {
        float ev = gexpf(p[j] - m);
        p[j] = ev;
        gpw_push(&pw, ev);
    }
    float l = gpw_result(&pw);
    for (int j = 0; j <= t; j++) p[j] = p[j] / l;
    for (int i = 0; i < HS; i++) out[i] = 0.0f;
    for (int j = 0; j <= t; j++) {
        const float pj = p[j], *v = v0 + (size_t)j * stride;
        for (int i = 0; i < HS; i++) out[i] = fmaf(pj, v[i], out[i]);
    }
    for (int i = 0; i < HS; i++) out[i] = gg_round(out[i], rt);
    *lse = m + glogf(l);
}

/* One query row of attention_bwd: with D = gg_dot(dout_t, out_t),
 *   P[j] = gexpf(gg_dot(q, k_j) * scale - lse), dp = gg_dot(dout_t, v_j),
 *   DS[j] = P[j] * (dp - D)  for j = 0..t;
 *   dq[i] = round(scale * (fmaf chain of DS[j] * k_j[i], j ascending from 0))
 * (the product with scale after the chain). P, DS: [t+1] (row t of the
 * [T, T] matrices gpt_gold_attn_bwd_key reads); dq [HS]. */
PLUMB_HD void gpt_gold_attn_bwd_row(const float *q, const float *k0, const float *v0, size_t stride,
                                    const float *dout_t, const float *out_t, int t, int HS, float scale, float lse,
                                    float *P, float *DS, float *dq, int rt)
{
    const float D = gg_dot(dout_t, out_t, HS);
    for (int j = 0; j <= t; j++) {
        const float s = gg_dot(q, k0 + (size_t)j * stride, HS) * scale;
        const float p = gexpf(s - lse);
        const float dp = gg_dot(dout_t, v0 + (size_t)j * stride, HS);
        P[j] = p;
        DS[j] = p * (dp - D);
    }
    for (int i = 0; i < HS; i++) dq[i] = 0.0f;
    for (int j = 0; j <= t; j++) {
        const float c = DS[j], *k = k0 + (size_t)j * stride;
        for (int i = 0; i < HS; i++) dq[i] = fmaf(c, k[i], dq[i]);
    }
    for (int i = 0; i < HS; i++) dq[i] = gg_round(dq[i] * scale, rt);
}

/* One key column j of attention_bwd, from the P and DS rows of every query
 * (row t at P + t*ldp, column j; rows t = j..T-1): q_t at q0 + t*stride,
 * dout_t at dout0 + t*dstride;
 *   dk[i] = round(scale * (fmaf chain of DS[t][j] * q_t[i], t ascending from j))
 *   dv[i] = round(fmaf chain of P[t][j] * dout_t[i], t ascending from j). */
PLUMB_HD void gpt_gold_attn_bwd_key(const float *q0, size_t stride, const float *dout0, size_t dstride, const float *P,
                                    const float *DS, size_t ldp, int j, int T, int HS, float scale, float *dk, float *dv,
                                    int rt)
{
    for (int i = 0; i < HS; i++) {
        dk[i] = 0.0f;
        dv[i] = 0.0f;
    }
    for (int t = j; t < T; t++) {
        const float c = DS[(size_t)t * ldp + j], p = P[(size_t)t * ldp + j];
        const float *q = q0 + (size_t)t * stride, *g = dout0 + (size_t)t * dstride;
        for (int i = 0; i < HS; i++) {
            dk[i] = fmaf(c, q[i], dk[i]);
            dv[i] = fmaf(p, g[i], dv[i]);
        }
    }
    for (int i = 0; i < HS; i++) {
        dk[i] = gg_round(dk[i] * scale, rt);
        dv[i] = gg_round(dv[i], rt);
    }
}

/* ---------------------------------------------------------------- layernorm */

/* One row of layernorm_bwd's dx (x, dy, dres, dx: [C]; w [C]):
 *   g_i = dy_i * w_i, h_i = (x_i - mean) * rstd,
 *   a = pairwise_sum(g) / C, c = pairwise_sum(g_i * h_i) / C  (IEEE /, (float)C),
 *   v_i = ((g_i - a) - h_i * c) * rstd, dx_i = round(dres_i + v_i)
 *   (dres NULL: round(v_i)). dx may alias dres. */
PLUMB_HD void gpt_gold_ln_bwd_row(const float *x, const float *w, float mean, float rstd, const float *dy,
                                  const float *dres, float *dx, int C, int rt)
{
    struct gpairwise pa, pc;
    gpw_init(&pa);
    gpw_init(&pc);
    for (int i = 0; i < C; i++) {
        const float g = dy[i] * w[i], h = (x[i] - mean) * rstd;
        gpw_push(&pa, g);
        gpw_push(&pc, g * h);
    }
    const float a = gpw_result(&pa) / (float)C, c = gpw_result(&pc) / (float)C;
    for (int i = 0; i < C; i++) {
        const float g = dy[i] * w[i], h = (x[i] - mean) * rstd;
        const float v = ((g - a) - h * c) * rstd;
        dx[i] = gg_round(dres ? dres[i] + v : v, rt);
    }
}

/* ---------------------------------------------------------------- cross-entropy */

/* One row of classifier_fwd_bwd after its logits z [V] (already rounded):
 * returns loss = (m + glogf(l)) - z[tgt] with m = z_0, then z_v when
 * z_v > m; l = pairwise sum of gexpf(z_v - m). When g is not NULL,
 *   g[v] = round((gexpf(z_v - m) / l - (v == tgt ? 1 : 0)) * grad_scale)
 * (g may alias z: each z_v is read before g[v] is written, and the loss is
 * formed first). 0 <= tgt < V. */
PLUMB_HD float gpt_gold_xent_row(const float *z, int V, int tgt, float grad_scale, float *g, int rt)
{
    float m = z[0];
    for (int v = 1; v < V; v++)
        if (z[v] > m) m = z[v];
    struct gpairwise pw;
    gpw_init(&pw);
    for (int v = 0; v < V; v++) gpw_push(&pw, gexpf(z[v] - m));
    const float l = gpw_result(&pw);
    const float loss = (m + glogf(l)) - z[tgt];
    if (g)
        for (int v = 0; v < V; v++) {
            const float p = gexpf(z[v] - m) / l;
            g[v] = gg_round((p - (v == tgt ? 1.0f : 0.0f)) * grad_scale, rt);
        }
    return loss;
}

/* ---------------------------------------------------------------- adamw */

/* One element of adamw_masked: g' = g * gscale, then train_ops.h's adamw
 * lines left to right in fp32 (no fma, IEEE division and sqrt). */
PLUMB_HD void gpt_adamw_one(float *w, float g, float *m, float *v, float lr, float b1, float b2, float eps, float wd,
                            float bc1, float bc2, float gscale)
{
    g = g * gscale;
    float x = *w;
    x = x - lr * wd * x;
    float mm = b1 * *m + (1.0f - b1) * g;
    float vv = b2 * *v + (1.0f - b2) * g * g;
    *m = mm;
    *v = vv;
    x = x - lr * (mm / bc1) / (sqrtf(vv / bc2) + eps);
    *w = x;
}

#endif
