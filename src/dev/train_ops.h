/* Training ops: forward and backward of the layers the reference workloads
 * need, optimizers and gradient utilities. `dev_ops.train` points at one of
 * these tables; a NULL entry means "not implemented on this backend".
 *
 * Conventions (every backend keeps them):
 * - All pointers are device pointers (host memory for the cpu backend); every
 *   op is asynchronous on stream s (NULL = default stream) and never calls
 *   back to the host. Sizes and scalars are passed by value from the host.
 *   Where an op produces a count (sparse_coalesce) it writes it to device
 *   memory; the caller downloads it.
 * - Tensors are row-major; shapes are given as [rows, cols] or [B, T, D].
 * - Every op is deterministic: no atomics in reductions or scatter-adds,
 *   results independent of thread/block count in golden mode.
 * - Numerics: d->numerics selects fast (BLAS, vectorised loops) or golden
 *   (the fixed evaluation orders written next to each op below, fmaf written
 *   out, transcendental functions from core/gmath.h, -ffp-contract=off /
 *   --fmad=false). Golden results are bit-identical on every device.
 *   Elementwise ops without transcendentals (relu, sgd, adamw, ...) have one
 *   definition used by both modes.
 * - Precision: activations and gradients of activations live in fp32 buffers;
 *   an op with a `dtype_t rt` argument rounds what it stores to rt (DT_F32:
 *   no rounding, DT_BF16 / DT_F16: round to nearest even through
 *   core/dtype.h) so the stored values are exactly those a GPU storing bf16 /
 *   fp16 holds. fp16 overflow becomes inf (the loss scaler sees it). GEMM
 *   inputs are rounded by the caller (activations are stored rounded; weights
 *   through round_fp32 into a working copy); accumulation is always fp32.
 * - Outputs are overwritten, never accumulated into, unless an op says so.
 * - Every op returns PLUMB_OK, or an error code with a message in *e naming
 *   the bad argument (e may be NULL).
 */
#ifndef PLUMB_TRAIN_OPS_H
#define PLUMB_TRAIN_OPS_H
#include <stddef.h>
#include <stdint.h>
#include "core/dtype.h"
#include "core/err.h"

struct dev;
typedef struct dev_stream dev_stream;

/* Chunk length of the fast-mode sparse sum (embedding_bwd, sparse_coalesce). */
#define TRAIN_SPARSE_CHUNK 128

/* Group length of the fast-mode sumsq: block sums per group (sumsq below). */
#define TRAIN_SUMSQ_GROUP 128

/* Geometry of a 2-D convolution or pooling window over NHWC images
 * (vision ops below): input [N, H, W, C], window R x S, stride, zero padding
 * pad on every side, output [N, P, Q, K] with P = (H + 2 pad - R) / stride
 * + 1 and Q likewise (train_conv_set fills P, Q). A convolution's weight is
 * [K, R, S, C] (cuDNN's NHWC filter layout, "KRSC"); pooling has K == C. */
struct train_conv {
    int N, H, W, C;   /* input */
    int K, R, S;      /* output channels, window rows, columns */
    int stride, pad;
    int P, Q;         /* output rows, columns */
};
/* Fills g and returns 0, or -1 when a size is < 1 (pad < 0) or the window
 * does not fit the padded input. */
static inline int train_conv_set(struct train_conv *g, int N, int H, int W, int C, int K, int R, int S,
                                 int stride, int pad)
{
    g->N = N, g->H = H, g->W = W, g->C = C, g->K = K, g->R = R, g->S = S, g->stride = stride, g->pad = pad;
    g->P = g->Q = 0;
    if (N < 1 || H < 1 || W < 1 || C < 1 || K < 1 || R < 1 || S < 1 || stride < 1 || pad < 0) return -1;
    if (H + 2 * pad < R || W + 2 * pad < S) return -1;
    g->P = (H + 2 * pad - R) / stride + 1;
    g->Q = (W + 2 * pad - S) / stride + 1;
    return 0;
}
/* 0 when g is what train_conv_set makes of its fields (P and Q agree) and
 * no tensor has more than 2^31 - 1 elements; else -1. */
static inline int train_conv_valid(const struct train_conv *g)
{
    struct train_conv t;
    if (!g || train_conv_set(&t, g->N, g->H, g->W, g->C, g->K, g->R, g->S, g->stride, g->pad)) return -1;
    if (t.P != g->P || t.Q != g->Q) return -1;
    if ((double)g->N * g->H * g->W * g->C > 2147483647.0 || (double)g->N * g->P * g->Q * g->K > 2147483647.0 ||
        (double)g->K * g->R * g->S * g->C > 2147483647.0)
        return -1;
    return 0;
}

/* BatchNorm statistics in golden mode are sums in two-word 64-bit fixed
 * point, so that the partial sums of any split of the rows (micro-shards,
 * ranks) add up, as integers, to the whole batch's bits. Each value v (an
 * fp32) becomes q = rint(v * 2^TRAIN_BN_FIX_SHIFT) (|v| < 2^23: larger and
 * infinite values saturate to +-(2^63 - 1), NaN counts as +2^63 - 1), split
 * as q = hi * 2^32 + lo with lo in [0, 2^32); a part of K sums is int64
 * [2, K]: the sums of hi (row 0) and of lo (row 1). Exact for up to 2^31
 * values per sum. The value of a part is (double)sum_hi * 2^32 +
 * (double)sum_lo (each int64 -> double conversion and the add correctly
 * rounded), times 2^-SHIFT. Fast mode: a part is float [K], plain fp32 sums
 * (any deterministic order). train_bn_part_bytes gives the size. */
#define TRAIN_BN_FIX_SHIFT 40
static inline size_t train_bn_part_bytes(int K, int golden)
{
    return golden ? 2 * (size_t)K * sizeof(int64_t) : (size_t)K * sizeof(float);
}

/* What embedding_bwd_sgd leaves for the step's checks (see there). */
struct sgd_fused_out {
    int64_t *rows;
    float *sums;
    float *prev;
    int *found_inf;
};

struct train_ops {
    /* ---------------- dense layers ---------------- */

    /* Linear layer, weight in PyTorch layout:
     *   y[B,N] = x[B,K] * w[N,K]^T + bias[N], then ReLU when relu != 0,
     *   then rounded to rt.  bias may be NULL (no bias).
     * Golden: y[b,n] = bias[n] + (((0 + x[b,0]w[n,0]) + x[b,1]w[n,1]) ...) with
     *   each step acc = fmaf(x[b,k], w[n,k], acc), k ascending, then
     *   acc + bias[n] (one fp32 add), then relu (acc > 0 ? acc : 0), then round. */
    int (*linear_fwd)(struct dev *d, dev_stream *s, const float *x, const float *w,
                      const float *bias, float *y, int B, int K, int N, int relu, dtype_t rt,
                      plumb_err *e);

    /* Backward of linear_fwd. x[B,K], w[N,K] as in the forward; y[B,N] the
     * forward output (read only when relu != 0); dy[B,N] the gradient of y.
     * When relu != 0, dy is first masked IN PLACE: dy[b,n] = y[b,n] > 0 ? dy : 0.
     *   dx[B,K] = dy * w       (rounded to rt; dx may be NULL: not needed)
     *   dw[N,K] = dy^T * x     (fp32, overwritten)
     *   dbias[N] = sum_b dy    (fp32, overwritten; NULL when bias was NULL)
     * Golden: every output element is one fmaf chain in ascending order of the
     *   contracted index (n for dx, b for dw), starting from 0; dbias is a
     *   plain fp32 sum in ascending b starting from 0. */
    int (*linear_bwd)(struct dev *d, dev_stream *s, const float *x, const float *w,
                      const float *y, float *dy, float *dx, float *dw, float *dbias, int B,
                      int K, int N, int relu, dtype_t rt, plumb_err *e);

    /* y[i] = max(x[i], 0) rounded to rt; in place allowed. x,y: [n] */
    int (*relu_fwd)(struct dev *d, dev_stream *s, const float *x, float *y, size_t n,
                    dtype_t rt, plumb_err *e);
    /* dx[i] = y[i] > 0 ? dy[i] : 0 (y is the forward output); in place allowed. */
    int (*relu_bwd)(struct dev *d, dev_stream *s, const float *y, const float *dy, float *dx,
                    size_t n, plumb_err *e);

    /* ---------------- embeddings ---------------- */

    /* Gather from T tables stored back to back in one fused table.
     *   table [R, D]: table t's row r is fused row off[t] + r.
     *   off [T] (device, int64), idx [B, T] (uint32, row within table t).
     *   out[b, t, :] = table[off[t] + idx[b,t], :]  rounded to rt.  out: [B, T, D].
     * No bounds check on the device: the caller validates indices on the host
     * (ctr_check_batch). */
    int (*embedding_fwd)(struct dev *d, dev_stream *s, const float *table, const int64_t *off,
                         const uint32_t *idx, float *out, int B, int T, int D, dtype_t rt,
                         plumb_err *e);

    /* Sparse gradient of embedding_fwd for the first n_valid samples (the
     * rest of the batch is masked out and contributes no rows):
     * the n = n_valid*T pairs (row = off[t] + idx[b,t], grad = dout[b,t,:]) are
     * coalesced as sparse_coalesce does, keyed by position p = b*T + t.
     *   dout [B, T, D]; rows_out [n_valid*T] int64; grads_out [n_valid*T, D];
     *   *n_out (device int64) = number of distinct rows U; rows_out[0..U)
     *   ascending, grads_out[u,:] = sum of the pairs with that row, in the
     *   sparse sum order below (golden: one chain; fast: chunked). */
    int (*embedding_bwd)(struct dev *d, dev_stream *s, const int64_t *off, const uint32_t *idx,
                         const float *dout, int B, int n_valid, int T, int D, int64_t *rows_out,
                         float *grads_out, int64_t *n_out, plumb_err *e);

    /* Deterministic sparse reduction ("segment reduce"): n (row, vector) pairs
     * with possibly repeated rows -> U distinct rows ascending, each vector the
     * sum of that row's vectors (stable sort by row; the row's m positions
     * taken in ascending input position, plain fp32 adds):
     *   golden: one chain, acc = 0, acc = acc + v_i for i = 0..m-1;
     *   fast:   the m sorted positions are cut into consecutive chunks of
     *           TRAIN_SPARSE_CHUNK (the last one shorter); each chunk is one
     *           chain from 0 as above, and the chunk sums are added in
     *           ascending chunk order from 0. Independent of threads and
     *           launch configuration; a row with m <= TRAIN_SPARSE_CHUNK
     *           gets the golden bits. (A Zipf-hot row is then many short
     *           chains that a GPU sums in parallel.)
     * Used after gathering sparse gradients of
     * several micro-shards or ranks. rows_in [n], vals_in [n, D],
     * rows_out [n], vals_out [n, D], *n_out = U (device int64). Outputs must
     * not alias inputs. */
    int (*sparse_coalesce)(struct dev *d, dev_stream *s, const int64_t *rows_in,
                           const float *vals_in, size_t n, int D, int64_t *rows_out,
                           float *vals_out, int64_t *n_out, plumb_err *e);

    /* ---------------- DLRM dot interaction ---------------- */

    /* F = T + 1 vectors per sample: z_0 = bottom[b,:] (the bottom MLP output),
     * z_{1+t} = emb[b,t,:]. Output [B, D + F(F-1)/2]:
     *   out[b, 0:D]   = bottom[b, :]
     *   out[b, D + p] = dot(z_i, z_j) for i > j, p = i(i-1)/2 + j
     *   (i = 1..F-1, j = 0..i-1: the lower triangle row by row; for T = 26,
     *    D = 16: 351 dots, 367 features), rounded to rt.
     * bottom [B, D], emb [B, T, D].
     * Golden: each dot is one fmaf chain over k = 0..D-1 from 0. */
    int (*interact_fwd)(struct dev *d, dev_stream *s, const float *bottom, const float *emb,
                        float *out, int B, int T, int D, dtype_t rt, plumb_err *e);

    /* Backward: dout [B, D + F(F-1)/2] ->
     *   dbottom[b,:] = dout[b,0:D] + sum_{j != 0} dout[pair(0,j)] * z_j
     *   demb[b,t,:]  = sum_{j != 1+t} dout[pair(1+t,j)] * z_j
     * both rounded to rt. Golden: for vector i, acc starts at dout[b,0:D]
     * (i = 0) or 0, then acc = fmaf(dout[pair(i,j)], z_j[k], acc) for
     * j = 0..F-1 ascending, j != i. */
    int (*interact_bwd)(struct dev *d, dev_stream *s, const float *bottom, const float *emb,
                        const float *dout, float *dbottom, float *demb, int B, int T, int D,
                        dtype_t rt, plumb_err *e);

    /* ---------------- loss ---------------- */

    /* Binary cross-entropy on logits, numerically stable form
     *   l_b = max(z,0) - z*y + log1p(exp(-|z|))
     * for the first n_valid of B samples (the rest are masked: no loss, zero
     * gradient). z [B] logits, y [B] labels (0 or 1 as float).
     *   loss_ps [B] (may be NULL): per-sample loss (0 for masked samples)
     *   sum_count [2] (device double, may be NULL): {sum of l_b in ascending b
     *     (double adds from 0), n_valid}
     *   dz [B] (may be NULL): (sigmoid(z_b) - y_b) * grad_scale, 0 when masked.
     * grad_scale is usually loss_scale / global_batch so that micro-shard
     * gradients add up to the gradient of the (scaled) global mean loss.
     * Golden: log1p and exp from core/gmath.h; sigmoid(z) = 1/(1+exp(-z)) for
     *   z >= 0, exp(z)/(1+exp(z)) otherwise (IEEE division). */
    int (*bce_logits)(struct dev *d, dev_stream *s, const float *z, const float *y, int B,
                      int n_valid, float grad_scale, float *loss_ps, double *sum_count, float *dz,
                      plumb_err *e);

    /* p[i] = sigmoid(z[i]) (same definition as bce_logits). z, p: [n] */
    int (*sigmoid)(struct dev *d, dev_stream *s, const float *z, float *p, size_t n,
                   plumb_err *e);

    /* ---------------- optimizers (fp32 master weights) ---------------- */

    /* Dense SGD with L2 weight decay, both modes:
     *   w[i] = fmaf(-lr, fmaf(wd, w[i], g[i]), w[i])   (wd == 0: fmaf(-lr, g[i], w[i]))
     * w, g: [n] */
    int (*sgd)(struct dev *d, dev_stream *s, float *w, const float *g, size_t n, float lr,
               float wd, plumb_err *e);

    /* Sparse SGD on the touched rows only: for u < n,
     *   table[rows[u], k] = fmaf(-lr, grads[u, k], table[rows[u], k]).
     * rows must be distinct (the output of embedding_bwd / sparse_coalesce),
     * so rows update independently. table [R, D], rows [n], grads [n, D]. */
    int (*sgd_sparse)(struct dev *d, dev_stream *s, float *table, const int64_t *rows,
                      const float *grads, size_t n, int D, float lr, plumb_err *e);

    /* AdamW (PyTorch semantics, decoupled weight decay). For each i:
     *   w = w - lr*wd*w
     *   m = b1*m + (1-b1)*g ;  v = b2*v + (1-b2)*g*g
     *   w = w - lr * (m / bc1) / (sqrt(v / bc2) + eps)
     * bc1 = 1 - b1^t, bc2 = 1 - b2^t for step t >= 1, computed by the caller
     * on the host (in double, cast to float) so every device gets the same
     * scalars. Each line is evaluated left to right in fp32, no fma, IEEE
     * division and sqrt. w, g, m, v: [n] */
    int (*adamw)(struct dev *d, dev_stream *s, float *w, const float *g, float *m, float *v,
                 size_t n, float lr, float b1, float b2, float eps, float wd, float bc1,
                 float bc2, plumb_err *e);

    /* Sparse ("lazy") AdamW on touched rows: the adamw update above applied
     * to table[rows[u],:], m[rows[u],:], v[rows[u],:] with grads[u,:].
     * rows distinct. table, m, v: [R, D]; rows [n]; grads [n, D]. */
    int (*adamw_sparse)(struct dev *d, dev_stream *s, float *table, float *m, float *v,
                        const int64_t *rows, const float *grads, size_t n, int D, float lr,
                        float b1, float b2, float eps, float wd, float bc1, float bc2,
                        plumb_err *e);

    /* ---------------- gradient utilities ---------------- */

    /* out[0] += sum of x[i]^2 (device double). Order: blocks of 1024
     * elements; within a block a double sum of (double)x*(double)x in
     * ascending i from 0. Then
     *   golden: block sums added to out[0] in ascending block order;
     *   fast:   the block sums cut into consecutive groups of
     *           TRAIN_SUMSQ_GROUP (the first at block 0); each group's sum,
     *           from 0.0 in ascending block order, added to out[0] in
     *           ascending group order.
     * Both orders are fixed, so every backend gives the same bits in a mode.
     * The golden chain is nb adds long; the fast one nb / 128 + 128, as a
     * GPU runs it with a thread a group (ctr's bf16/32768 step has about 13k
     * block sums, and train/trainer.c computes the norm for every logged
     * step). The caller zeroes out first; a fast-mode global norm is
     * the sqrt of the all-reduced partials of the ranks. x: [n] */
    int (*sumsq)(struct dev *d, dev_stream *s, const float *x, size_t n, double *out,
                 plumb_err *e);

    /* x[i] *= mul (exact fp32 multiply), and *found_inf (device int) is set to
     * 1 if any x[i] is inf or NaN before the multiply (left unchanged
     * otherwise): the loss scaler's unscale + check, and gradient clipping
     * (mul = clip factor). x: [n] */
    int (*scale_check)(struct dev *d, dev_stream *s, float *x, size_t n, float mul,
                       int *found_inf, plumb_err *e);

    /* y[i] = fmaf(a, x[i], b), both modes; in place allowed. Parameter init
     * (scaling Philox normals/uniforms) and simple rescaling. x, y: [n] */
    int (*affine)(struct dev *d, dev_stream *s, const float *x, float *y, size_t n, float a,
                  float b, plumb_err *e);

    /* y[i] = x[i] rounded to nearest even in dtype rt and widened back to
     * fp32 (DT_F32: plain copy). In place allowed. The working copy of the
     * weights for bf16/fp16 GEMMs. x, y: [n] */
    int (*round_fp32)(struct dev *d, dev_stream *s, const float *x, float *y, size_t n,
                      dtype_t rt, plumb_err *e);

    /* ---------------- fused (optional: NULL = use the parts) ----------------
     * Each equals the composition it names, bit for bit, in both modes; a
     * backend provides one when fusing saves memory traffic. */

    /* embedding_fwd(table, off, idx -> emb) then interact_fwd(bottom, emb ->
     * out): emb [B, T, D] is still written (the backward reads it), but the
     * interaction takes the gathered rows without reading emb back. */
    int (*embedding_interact_fwd)(struct dev *d, dev_stream *s, const float *table,
                                  const int64_t *off, const uint32_t *idx, const float *bottom,
                                  float *emb, float *out, int B, int T, int D, dtype_t rt,
                                  plumb_err *e);

    /* embedding_bwd(...) then sgd_sparse(table, rows, grads, U, D, lr): the
     * sparse gradient is applied to the table as each row's sum is formed.
     * *n_out (device int64) = U, the rows touched. For one rank with plain
     * SGD and no loss-scale multiply or clipping (nothing that must change
     * the sum before it is applied). What the step's checks need is left in
     * *out (NULL, or any member NULL: not written):
     *   rows [U]       the distinct rows, ascending (embedding_bwd's rows_out);
     *   sums [U, D]    each row's sum (embedding_bwd's grads_out): a norm of
     *                  them (sumsq_dn) has the unfused list's bits;
     *   prev [U, D]    each row's table values before the update, so a step
     *                  found non-finite is undone exactly (sparse_put_dn);
     *   found_inf      device int set to 1 when a sum is inf or NaN (as
     *                  scale_check would), left unchanged otherwise.
     * prev needs rows. */
    int (*embedding_bwd_sgd)(struct dev *d, dev_stream *s, const int64_t *off,
                             const uint32_t *idx, const float *dout, int B, int n_valid, int T,
                             int D, float *table, float lr, int64_t *n_out,
                             const struct sgd_fused_out *out, plumb_err *e);

    /* linear_bwd(x, w, y, dy -> dx, dw, dbias) where x is itself the output
     * of a ReLU layer (x >= 0), followed by that layer's ReLU backward: dx is
     * stored masked, dx[b,k] = x[b,k] > 0 ? dx[b,k] : 0 (after rounding), and
     * dbias_x [K] (may be NULL) = the sums over b of the masked dx in the
     * order linear_bwd defines dbias. So the producing layer's linear_bwd is
     * then called with relu = 0 and dbias = NULL (its dy is already masked
     * and its dbias done): the same bits, one pass over dx instead of two.
     * dx must not be NULL. */
    int (*linear_bwd_relu_in)(struct dev *d, dev_stream *s, const float *x, const float *w,
                              const float *y, float *dy, float *dx, float *dw, float *dbias,
                              int B, int K, int N, int relu, dtype_t rt, float *dbias_x,
                              plumb_err *e);

    /* 16-bit operand copies ("mirrors"), rt = DT_BF16 or DT_F16 only. A
     * mirror holds a tensor's values in rt (exact: the tensor is rt-rounded),
     * written by the op that writes the tensor, so the GEMMs read 16-bit
     * operands. Results as linear_fwd / linear_bwd_relu_in (golden: the same
     * bits; fast: the GEMM may sum in another order).
     * linear_fwd16: linear_fwd; x16 [B,K] and w16 [N,K] the mirrors of x and
     *   w (NULL: made by the op); y16 [B,N] (may be NULL) receives y's mirror.
     *   When K % 8 != 0 (rows not 16-byte aligned) x16 is instead a padded
     *   mirror [B, K rounded up to 8] that linear_fwd16 fills from x (zeros
     *   after K) and linear_bwd16 reads: the backward of the same layer
     *   reuses it (pass NULL to both to have each make its own).
     * linear_bwd16: linear_bwd, or linear_bwd_relu_in when relu_in; dy16 the
     *   mirror of dy as it arrives, needed only when relu == 0 and dbias ==
     *   NULL (dy already masked; NULL: made by the op), otherwise the op
     *   forms it with the mask; dx16 (may be NULL) receives dx's mirror as
     *   stored (masked when relu_in).
     * Mirror only: a tensor may be given as its mirror alone, and is then
     *   neither read nor written in fp32 (the mirror holds the same values,
     *   so the results are those of the fp32 call):
     *   - y NULL (linear_fwd16, y16 given): only y16 [B,N] is written; the
     *     bias is then read in rt, so it must be rt-rounded (a model's
     *     rounded weights are);
     *   - x NULL (both ops): x16 is read instead, as [B, K rounded up to 8]
     *     with zeros after K (the padded mirror, already filled);
     *   - dy NULL (linear_bwd16): dy16 is read; needs relu == 0 and dbias ==
     *     NULL (nothing to mask in place);
     *   - dx NULL with dx16 given (linear_bwd16): only dx16 is written, as
     *     [B, K rounded up to 8] (the columns after K hold nothing to read;
     *     with relu_in: masked, and dbias_x formed, from it).
     *   So a model keeps hidden activations and their gradients in 16 bits
     *   only, and the GEMMs store 16-bit results themselves. */
    int (*linear_fwd16)(struct dev *d, dev_stream *s, const float *x, uint16_t *x16,
                        const float *w, const uint16_t *w16, const float *bias, float *y,
                        uint16_t *y16, int B, int K, int N, int relu, dtype_t rt, plumb_err *e);
    int (*linear_bwd16)(struct dev *d, dev_stream *s, const float *x, const uint16_t *x16,
                        const float *w, const uint16_t *w16, const float *y, float *dy,
                        const uint16_t *dy16, float *dx, uint16_t *dx16, float *dw, float *dbias,
                        int B, int K, int N, int relu, dtype_t rt, int relu_in, float *dbias_x,
                        plumb_err *e);

    /* The interaction with a 16-bit output / gradient (rt = DT_BF16 or
     * DT_F16; results those of the fp32 ops, in both modes):
     * embedding_interact_fwd16: embedding_interact_fwd, also writing out16
     *   [B, ld16] (ld16 >= W = D + F(F-1)/2), the 16-bit values of out with
     *   zeros after W: the padded mirror the top MLP's first linear_fwd16 /
     *   bwd16 read as x16 (x NULL). out may be NULL (not written).
     * interact_bwd16: interact_bwd with dout given as its 16-bit values
     *   dout16 [B, ldo] (columns 0..W read), e.g. a mirror-only dx16 of
     *   linear_bwd16 with ldo = W rounded up to 8. */
    int (*embedding_interact_fwd16)(struct dev *d, dev_stream *s, const float *table,
                                    const int64_t *off, const uint32_t *idx, const float *bottom,
                                    float *emb, float *out, uint16_t *out16, int ld16, int B, int T,
                                    int D, dtype_t rt, plumb_err *e);
    int (*interact_bwd16)(struct dev *d, dev_stream *s, const float *bottom, const float *emb,
                          const uint16_t *dout16, int ldo, float *dbottom, float *demb, int B, int T,
                          int D, dtype_t rt, plumb_err *e);

    /* ---------------- transformer ops (gpt) ----------------
     * The GPT-2 layers (models/gpt). Shapes: B sequences of T positions, width
     * C = NH heads x HS, vocabulary V; a "row" r = b*T + t of a [B, T, C]
     * tensor. Token ids are int32 and validated by the caller on the host
     * (0 <= id < V; a target < 0 is "ignore"). Golden orders name the shared
     * definitions in dev/train_gpt_math.h (PLUMB_HD: the cpu backend and the
     * GPU kernels evaluate the same source). Fast: any fixed order (BLAS,
     * tiled kernels), deterministic run to run. */

    /* Token + position embedding, both modes:
     *   out[b,t,:] = round(wte[tok[b,t],:] + wpe[t,:])   (one fp32 add)
     * wte [V, C], wpe [>= T, C], tok [B, T], out [B, T, C]. */
    int (*encoder_fwd)(struct dev *d, dev_stream *s, const float *wte, const float *wpe,
                       const int32_t *tok, float *out, int B, int T, int C, dtype_t rt,
                       plumb_err *e);

    /* Backward of encoder_fwd. ACCUMULATES into dwte (the tied classifier
     * wrote it first), overwrites dwpe[0:T):
     *   dwpe[t,:] = sum over b of dout[b,t,:]  (fp32 adds, ascending b from 0)
     *   dwte[v,:] = dwte[v,:] + S_v (one fp32 add) for every token v of the
     *     batch, S_v the sum of dout[p,:] over the positions p = b*T+t with
     *     tok[p] = v in embedding_bwd's sum order (positions ascending; golden
     *     one chain from 0, fast chunks of TRAIN_SPARSE_CHUNK); rows of
     *     tokens not in the batch are left as they are.
     * dout [B, T, C], dwte [V, C], dwpe [>= T, C]. */
    int (*encoder_bwd)(struct dev *d, dev_stream *s, const float *dout, const int32_t *tok,
                       float *dwte, float *dwpe, int B, int T, int C, plumb_err *e);

    /* LayerNorm of each row of x [R, C] with weight w [C] and bias b [C]:
     *   y = round((x - mean) * rstd * w + b), rstd = 1 / sqrt(var + eps);
     *   mean [R], rstd [R] (fp32, may be NULL) receive the row statistics the
     *   backward reads. y must not alias x (the backward reads x).
     * Golden: glayernorm_row of core/gmath.h, then the round.
     * Fast: two passes per row in any fixed order. */
    int (*layernorm_fwd)(struct dev *d, dev_stream *s, const float *x, const float *w,
                         const float *b, float *y, float *mean, float *rstd, int R, int C,
                         float eps, dtype_t rt, plumb_err *e);

    /* Backward of layernorm_fwd from x, w and the saved mean, rstd; dy [R, C]:
     *   h_i = (x_i - mean) * rstd (the forward's expression), g_i = dy_i * w_i,
     *   a = sum(g) / C, c = sum(g_i * h_i) / C,
     *   dx_i = round(dres_i + ((g_i - a) - h_i * c) * rstd)   (dres NULL: 0 +)
     *   dw[i] = sum over rows of dy * h ; db[i] = sum over rows of dy
     *   (overwritten).
     * dres [R, C] (may be NULL) is the gradient arriving through the
     * residual connection; dx may alias it (accumulated in place).
     * Golden (gpt_gold_ln_bwd_row per row): the sums are gmath.h pairwise
     *   sums (products rounded first), divisions IEEE by (float)C, each
     *   expression left to right as written, dx = round(dres + v); dw[i]:
     *   acc = fmaf(dy[r,i], h[r,i], acc) over r ascending from 0, db[i] plain
     *   fp32 adds over r ascending from 0.
     * Fast: rows in parallel, dw/db from fixed row chunks added in chunk order. */
    int (*layernorm_bwd)(struct dev *d, dev_stream *s, const float *x, const float *w,
                         const float *mean, const float *rstd, const float *dy,
                         const float *dres, float *dx, float *dw, float *db, int R, int C,
                         dtype_t rt, plumb_err *e);

    /* GEMM with bias and optional tanh-GELU, weight in PyTorch layout:
     *   a[B,N] = x[B,K] w[N,K]^T + bias[N]   (bias may be NULL)
     *   gelu == 0: y = round(a), pre unused (may be NULL);
     *   gelu != 0: pre = round(a) (the pre-activation the backward reads) and
     *   y = round(gelu(pre)).
     * Golden: a is linear_fwd's chain (acc = fmaf(x, w, acc), k ascending
     *   from 0, then acc + bias[n]); gelu is ggeluf of core/gmath.h.
     * Fast: BLAS; on CUDA the bias and GELU ride in the cuBLASLt epilogue
     *   (GELU_AUX_BIAS: the GELU then sees the unrounded pre-activation). */
    int (*matmul_fwd)(struct dev *d, dev_stream *s, const float *x, const float *w,
                      const float *bias, float *y, float *pre, int B, int K, int N, int gelu,
                      dtype_t rt, plumb_err *e);

    /* Backward of matmul_fwd (gelu == 0) with the GELU of the layer BELOW
     * fused into dx. x [B,K] the forward input, w [N,K], dy [B,N] (rt values);
     * pre_in [B,K] (may be NULL): x = round(gelu(pre_in)) was produced by a
     * gelu matmul_fwd, and dx is then the gradient of pre_in:
     *   dx[B,K] = round((dy w)[b,k] * gelu'(pre_in[b,k]))  (pre_in NULL:
     *             round(dy w); dx may be NULL: not needed)
     *   dw[N,K] = dy^T x (fp32, overwritten)
     *   dbias[N] = sum over b of dy (fp32, overwritten; NULL: no bias)
     * Golden: dx is linear_bwd's chain (over n ascending from 0), then one fp32
     *   multiply by ggelu_gradf(pre_in); dw and dbias as linear_bwd.
     * Fast: BLAS; on CUDA the GELU backward rides in the dx GEMM's epilogue
     *   (cuBLASLt DGELU). */
    int (*matmul_bwd)(struct dev *d, dev_stream *s, const float *x, const float *w,
                      const float *dy, const float *pre_in, float *dx, float *dw, float *dbias,
                      int B, int K, int N, dtype_t rt, plumb_err *e);

    /* Causal multi-head self-attention. qkv [B, T, 3C]: q, k, v of each
     * position in columns [0,C), [C,2C), [2C,3C), head h at columns
     * h*HS .. h*HS+HS-1 of each (C = NH*HS). For head h, query t, key j <= t:
     *   s_tj = (q_t . k_j) * scale, scale = 1 / sqrtf(HS) (fp32)
     *   out[b,t,h*HS+i] = round(sum_j softmax_j(s_t)_j v_j[i])   [B, T, C]
     *   lse[b,h,t] = log(sum_j exp(s_tj)) (fp32, [B, NH, T]) for the backward.
     * Golden (gpt_gold_attn_row; a materialised softmax row): dots are fmaf
     *   chains over i ascending from 0; m = max (left-to-right `>` scan),
     *   e_j = gexpf(s_tj - m), l = gmath.h pairwise sum of e_0..e_t,
     *   p_j = e_j / l, out_i = fmaf chain of p_j * v_j[i] over j ascending
     *   from 0, rounded; lse = m + glogf(l).
     * Fast: flash-style (key tiles streamed against a tile of queries,
     *   online softmax; no T x T matrix in memory). With rt bf16 or fp16 the
     *   fast path takes qkv (and the backward's dout) as rt values, as every
     *   activation the models store is: the CUDA tensor-core kernels read them
     *   as 16-bit operands (exact for rt values; other inputs are rounded). */
    int (*attention_fwd)(struct dev *d, dev_stream *s, const float *qkv, float *out, float *lse,
                         int B, int T, int NH, int HS, dtype_t rt, plumb_err *e);

    /* Backward of attention_fwd from qkv, its out and lse; dout [B, T, C] ->
     * dqkv [B, T, 3C] (overwritten):
     *   p_tj = exp(s_tj - lse_t), dp_tj = dout_t . v_j, D_t = dout_t . out_t,
     *   ds_tj = p_tj * (dp_tj - D_t),
     *   dq_t = scale * sum_{j<=t} ds_tj k_j, dk_j = scale * sum_{t>=j} ds_tj q_t,
     *   dv_j = sum_{t>=j} p_tj dout_t, each rounded to rt.
     * Golden (gpt_gold_attn_bwd_row, then gpt_gold_attn_bwd_key): dots fmaf
     *   chains over i ascending from 0, s_tj as the forward, p = gexpf(s - lse),
     *   ds = p * (dp - D); dq: fmaf chain of ds_tj k_j[i] over j ascending,
     *   dk: of ds_tj q_t[i] over t ascending from j, dv: of p_tj dout_t[i]
     *   over t ascending from j; dq and dk then times scale; rounded.
     * Fast: recomputes p from lse tile by tile; dk, dv accumulated per key
     *   tile over the query tiles in ascending order, dq per query tile over
     *   the key tiles in ascending order (no atomics, no T x T matrix). */
    int (*attention_bwd)(struct dev *d, dev_stream *s, const float *qkv, const float *out,
                         const float *lse, const float *dout, float *dqkv, int B, int T, int NH,
                         int HS, dtype_t rt, plumb_err *e);

    /* Residual add, both modes: y[i] = round(a[i] + b[i]); y may alias a or
     * b. Its backward is the identity for both inputs (layernorm_bwd's dres
     * adds the residual gradient). */
    int (*residual_fwd)(struct dev *d, dev_stream *s, const float *a, const float *b, float *y,
                        size_t n, dtype_t rt, plumb_err *e);

    /* Tied classifier fused with softmax cross-entropy over R rows x [R, C]
     * and the first V rows of wte [>= V, C] (padding rows are not read):
     *   z[r,v] = round(x[r,:] . wte[v,:]), v < V (the logits)
     *   loss_r = log(sum_v exp(z[r,v])) - z[r, tgt[r]]; tgt[r] < 0: ignored
     *     (loss 0, gradient 0)
     *   losses [R] (may be NULL): loss_r;
     *   sum_count [2] (device double, may be NULL): {sum of loss_r over the
     *     valid rows, double adds in ascending r from 0; number of valid rows}
     *   g[r,v] = round((softmax(z_r)_v - [v == tgt[r]]) * grad_scale)
     *   dx [R, C] (NULL: forward only, dwte then unused) = round(g wte)
     *   dwte [V, C] (overwritten) = g^T x
     * Golden (gpt_gold_xent_row per row): z is an fmaf chain over c
     *   ascending from 0; m = max (left-to-right), e_v = gexpf(z_v - m),
     *   l = pairwise sum over v, loss = (m + glogf(l)) - z_tgt, softmax e_v / l;
     *   dx: fmaf chain over v ascending from 0; dwte: over r ascending from 0.
     * Fast: rows in chunks whose fp32 logits fit a bounded scratch (never the
     *   whole batch's logits), BLAS GEMMs, dwte summed over the chunks in
     *   ascending chunk order. */
    int (*classifier_fwd_bwd)(struct dev *d, dev_stream *s, const float *x, const float *wte,
                              const int32_t *tgt, int R, int C, int V, float grad_scale,
                              float *losses, double *sum_count, float *dx, float *dwte, dtype_t rt,
                              plumb_err *e);

    /* AdamW over a whole parameter buffer in one pass, with per-tensor
     * weight decay and the gradient scaled on the fly: for each i,
     *   g' = g[i] * gscale (one fp32 multiply; gscale = clip factor times the
     *        loss-scale reciprocal, 1 leaves g as it is),
     *   then the adamw update above with g' and weight decay wd when i lies in
     *   one of the nr ranges [dec[2j], dec[2j+1]) (device int64, ascending,
     *   disjoint: the tensors that decay, e.g. the matrices), 0 elsewhere.
     * The bits of adamw called per tensor on pre-scaled gradients, in one
     * launch instead of one per tensor and without a pass of its own for
     * clipping. w, g, m, v: [n] */
    int (*adamw_masked)(struct dev *d, dev_stream *s, float *w, const float *g, float *m,
                        float *v, size_t n, float lr, float b1, float b2, float eps, float wd,
                        float bc1, float bc2, float gscale, const int64_t *dec, int nr,
                        plumb_err *e);

    /* ---------------- vision ops (resnet) ----------------
     * Images are NHWC (channels last): x [N, H, W, C] row-major, pixel
     * (n, h, w) is the C floats at ((n H + h) W + w) C; "rows" M = N H W
     * when a per-channel op sees the image as [M, C]. Geometry in struct
     * train_conv (above). Golden orders are written out once in
     * dev/train_vision.h (PLUMB_HD), which the cpu and GPU kernels share. */

    /* 2-D convolution, no bias: y [N,P,Q,K] = x [N,H,W,C] (*) w [K,R,S,C],
     * rounded to rt. x and w hold rt-rounded values (the caller rounds them;
     * fast mode may then compute with rt operands, which is exact).
     * Golden: y[n,p,q,k] = one fmaf chain from +0 over r = 0..R-1 (input
     *   row h = p stride - pad + r), s = 0..S-1 (column w = q stride - pad +
     *   s), c = 0..C-1, in that nesting, skipping (h, w) outside the image:
     *   acc = fmaf(x[n,h,w,c], w[k,r,s,c], acc); then rounded to rt. */
    int (*conv2d_fwd)(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x,
                      const float *w, float *y, dtype_t rt, plumb_err *e);
    /* Gradient of the input: dx [N,H,W,C] from dy [N,P,Q,K], rounded to rt.
     * Golden: dx[n,h,w,c] = one fmaf chain from +0 over r = 0..R-1, s =
     *   0..S-1, k = 0..K-1 (that nesting) of the (r, s) whose output
     *   position exists (p = (h + pad - r) / stride exact and in [0, P), q
     *   likewise): acc = fmaf(dy[n,p,q,k], w[k,r,s,c], acc). */
    int (*conv2d_bwd_data)(struct dev *d, dev_stream *s, const struct train_conv *g, const float *dy,
                           const float *w, float *dx, dtype_t rt, plumb_err *e);
    /* Gradient of the weight: dw [K,R,S,C] (fp32, overwritten) from x and
     * dy over all g->N images. rt: the precision x and dy are stored in
     * (fast mode may use rt operands and round dw to rt; golden ignores it).
     * Golden: dw[k,r,s,c] = one fmaf chain from +0 over n = 0..N-1, p =
     *   0..P-1, q = 0..Q-1 (that nesting), skipping positions whose input
     *   (h, w) lies in the padding: acc = fmaf(dy[n,p,q,k], x[n,h,w,c], acc).
     *   Golden data-parallel training calls it per micro-shard (g->N the
     *   shard's images, x and dy offset to its first image). */
    int (*conv2d_bwd_filter)(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x,
                             const float *dy, float *dw, dtype_t rt, plumb_err *e);

    /* BatchNorm, training: statistics over the rows of x [M, C] that every
     * rank holds, made global by the caller between the calls (all-reduce
     * of the parts, TRAIN_BN_FIX_SHIFT above), so N ranks normalise with
     * the 1-rank statistics:
     *   bn_stats(x, mean NULL) -> part1 -> all-reduce -> bn_mean -> mean
     *   bn_stats(x, mean)      -> part2 -> all-reduce -> bn_var -> rstd,
     *   running statistics updated; then bn_apply.
     * bn_stats: part [K = C] sums over m of v = x[m,c] (mean NULL) or of
     *   v = d * d with d = x[m,c] - mean[c] (fp32 subtract, fp32 product).
     *   Golden: fixed point, any order (integer sums); fast: fp32. */
    int (*bn_stats)(struct dev *d, dev_stream *s, const float *x, size_t M, int C, const float *mean,
                    void *part, plumb_err *e);
    /* out[i] = value of sum i / count, i < K (count = global rows, >= 1).
     * Golden: (float)(value_double * 2^-SHIFT / (double)count), IEEE double
     * ops; fast: sum / (float)count. part: a part of K sums. */
    int (*bn_mean)(struct dev *d, dev_stream *s, const void *part, int K, int64_t count, float *out,
                   plumb_err *e);
    /* From part2 (C sums of squared deviations, global) and count >= 2:
     *   var = sum / count (biased, as bn_mean computes it), rstd[c] =
     *   1 / sqrtf(var + eps); when run_mean / run_var are not NULL (PyTorch's
     *   running statistics, momentum 0.1 there):
     *   run_mean = (1 - momentum) * run_mean + momentum * mean
     *   run_var  = (1 - momentum) * run_var + momentum * var_unbiased
     *   with var_unbiased = sum / (count - 1) the same way, each line fp32
     *   left to right without fma. */
    int (*bn_var)(struct dev *d, dev_stream *s, const void *part, int C, int64_t count, float eps,
                  float momentum, const float *mean, float *rstd, float *run_mean, float *run_var,
                  plumb_err *e);
    /* rstd[c] = 1 / sqrtf(var[c] + eps): eval mode from the running variance. */
    int (*bn_rstd)(struct dev *d, dev_stream *s, const float *var, int C, float eps, float *rstd,
                   plumb_err *e);
    /* y [M,C] = bn(x) (+ z) (then ReLU), rounded to rt; both modes:
     *   h = (x - mean[c]) * rstd[c]; v = fmaf(h, gamma[c], beta[c]);
     *   v = v + z[m,c] when z (the residual) is not NULL; relu: v > 0 ? v : 0.
     * In place allowed (y == x or y == z). Eval: mean = running mean, rstd
     * from bn_rstd. */
    int (*bn_apply)(struct dev *d, dev_stream *s, const float *x, const float *mean, const float *rstd,
                    const float *gamma, const float *beta, const float *z, float *y, size_t M, int C,
                    int relu, dtype_t rt, plumb_err *e);
    /* Backward statistics: part [K = 2C]: sums over m of dy[m,c] (i = c)
     * and of dy[m,c] * xhat (i = C + c), xhat = (x - mean[c]) * rstd[c]
     * (fp32, product rounded); all-reduced like bn_stats' parts, then
     * bn_mean(part, 2C, count) gives mdy [2C] for bn_bwd_data. dy is the
     * gradient of bn's output v before the residual add (already masked by
     * the ReLU's output where there is one). */
    int (*bn_bwd_stats)(struct dev *d, dev_stream *s, const float *x, const float *dy, const float *mean,
                        const float *rstd, size_t M, int C, void *part, plumb_err *e);
    /* dx [M,C], rounded to rt, both modes: xhat as above, t = dy - mdy[c],
     * t = fmaf(-xhat, mdy[C + c], t), dx = (gamma[c] * rstd[c]) * t.
     * In place allowed (dx == dy). */
    int (*bn_bwd_data)(struct dev *d, dev_stream *s, const float *x, const float *dy, const float *mean,
                       const float *rstd, const float *gamma, const float *mdy, float *dx, size_t M, int C,
                       dtype_t rt, plumb_err *e);
    /* Parameter gradients over the M rows given (fp32, overwritten):
     * dbeta[c] = sum of dy[m,c], dgamma[c] = sum of dy * xhat (xhat and the
     * product as in bn_bwd_stats). Golden: each the level-by-level pairwise
     * tree of core/gmath.h over m ascending; per micro-shard in golden
     * data-parallel training. Fast: any deterministic fp32 order. */
    int (*bn_bwd_params)(struct dev *d, dev_stream *s, const float *x, const float *dy, const float *mean,
                         const float *rstd, size_t M, int C, float *dgamma, float *dbeta, plumb_err *e);

    /* Max pooling (K == C; g->pad: padding that never wins), both modes:
     * y[n,p,q,c] = the first maximum over the window in (r, s) order
     * (strict >, starting from the first in-image position), idx[n,p,q,c]
     * = r * S + s of it (int32). Every window must hold an in-image
     * position (pad < R, pad < S). No rounding (y is one of x). */
    int (*maxpool_fwd)(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x, float *y,
                       int32_t *idx, plumb_err *e);
    /* dx[n,h,w,c] = sum of dy[n,p,q,c] over the windows (p ascending, then
     * q) whose winner is (h, w), plain fp32 adds from +0, rounded to rt. */
    int (*maxpool_bwd)(struct dev *d, dev_stream *s, const struct train_conv *g, const float *dy,
                       const int32_t *idx, float *dx, dtype_t rt, plumb_err *e);
    /* Global average pool, both modes: y [N, C] from x [N, HW, C]:
     * y[n,c] = (pairwise sum over i = 0..HW-1 of x[n,i,c], core/gmath.h's
     * tree) / (float)HW, rounded to rt. Backward: dx[n,i,c] = dy[n,c] /
     * (float)HW, rounded to rt. */
    int (*avgpool_fwd)(struct dev *d, dev_stream *s, const float *x, float *y, int N, int HW, int C,
                       dtype_t rt, plumb_err *e);
    int (*avgpool_bwd)(struct dev *d, dev_stream *s, const float *dy, float *dx, int N, int HW, int C,
                       dtype_t rt, plumb_err *e);
    /* y[i] = a[i] + b[i] (then ReLU when relu != 0), rounded to rt; both
     * modes, in place allowed. The residual add, and gradients of a tensor
     * that feeds two layers. */
    int (*add)(struct dev *d, dev_stream *s, const float *a, const float *b, float *y, size_t n, int relu,
               dtype_t rt, plumb_err *e);

    /* Softmax cross-entropy over V classes for the first n_valid of B rows
     * (the rest masked: loss 0, gradient 0). z [B, V] logits, labels [B]
     * int32 in [0, V) (validated by the caller; masked rows not read).
     * Per row: m = max z (left-to-right scan, `>`, from z[0]); e_i =
     * exp(z_i - m); S = sum e_i; loss = log(S) - (z[y] - m);
     * dz_i = (e_i / S - [i == y]) * grad_scale.
     *   loss_ps [B], sum_count [2] (device double: loss sum in ascending b,
     *   double adds from 0, and n_valid), pred [B] (int32: the index of m,
     *   the top-1 class, for every row), dz [B, V]: each may be NULL.
     * Golden: exp / log from core/gmath.h (gexpf, glogf), S the pairwise
     * tree over i ascending, IEEE division; fast: libm / vendor expf, logf,
     * any fixed order for S. */
    int (*cls_xent)(struct dev *d, dev_stream *s, const float *z, const int32_t *labels, int B, int V,
                    int n_valid, float grad_scale, float *loss_ps, double *sum_count, int32_t *pred,
                    float *dz, plumb_err *e);

    /* ---------------- optional optimizers (NULL: not available) ---------------- */

    /* SGD with momentum and L2 weight decay (PyTorch semantics), both modes:
     *   d = fmaf(wd, w[i], g[i])            (wd == 0: d = g[i])
     *   buf[i] = first ? d : fmaf(mu, buf[i], d)
     *   w[i] = fmaf(-lr, buf[i], w[i])
     * first: the first step (buf uninitialised). w, g, buf: [n] */
    int (*sgd_momentum)(struct dev *d, dev_stream *s, float *w, const float *g, float *buf, size_t n,
                        float lr, float wd, float mu, int first, plumb_err *e);

    /* ---------------- counts and decisions on the device (optional) ----------------
     * For the step that never waits for the host (train/trainer.c, "the
     * queued step"): a sparse list's length U stays on the device (*rows_n,
     * int64, clamped to the host bound n_max the launch is sized for), and
     * an update is gated by a device flag (*skip != 0: nothing is written;
     * skip may be NULL: never). Each gives the bits of the op it names
     * called with n = U (or not called when *skip). */

    /* sumsq over x [U * per] (the block order of sumsq). */
    int (*sumsq_dn)(struct dev *d, dev_stream *s, const float *x, const int64_t *rows_n, size_t per,
                    size_t n_max, double *out, plumb_err *e);
    /* scale_check over x [U * per]. */
    int (*scale_check_dn)(struct dev *d, dev_stream *s, float *x, const int64_t *rows_n, size_t per,
                          size_t n_max, float mul, int *found_inf, plumb_err *e);
    /* sgd_sparse over rows [U], grads [U, D], unless *skip. */
    int (*sgd_sparse_dn)(struct dev *d, dev_stream *s, float *table, const int64_t *rows,
                         const float *grads, const int64_t *rows_n, size_t n_max, int D, float lr,
                         const int *skip, plumb_err *e);
    /* sgd, unless *skip. */
    int (*sgd_gated)(struct dev *d, dev_stream *s, float *w, const float *g, size_t n, float lr,
                     float wd, const int *skip, plumb_err *e);

    /* ---------------- vision ops with 16-bit mirrors (optional) ----------------
     * rt = DT_BF16 or DT_F16. A mirror holds an rt-rounded tensor's values
     * in rt (exact), written by the op that writes the tensor, so the fast
     * convolution reads 16-bit operands without a conversion pass of its
     * own. Every fp32 tensor is still given (and written): a mirror is an
     * extra, the fp32 results are bit for bit those of the op named, in both
     * modes (golden ignores the mirrors it reads). */

    /* conv2d_fwd / conv2d_bwd_data / conv2d_bwd_filter with the operands'
     * mirrors x16 [N,H,W,C], w16 [K,R,S,C], dy16 [N,P,Q,K], each may be
     * NULL (then made by the op from its fp32 tensor). */
    int (*conv2d_fwd16)(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x,
                        const uint16_t *x16, const float *w, const uint16_t *w16, float *y, dtype_t rt,
                        plumb_err *e);
    int (*conv2d_bwd_data16)(struct dev *d, dev_stream *s, const struct train_conv *g, const float *dy,
                             const uint16_t *dy16, const float *w, const uint16_t *w16, float *dx,
                             dtype_t rt, plumb_err *e);
    int (*conv2d_bwd_filter16)(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x,
                               const uint16_t *x16, const float *dy, const uint16_t *dy16, float *dw,
                               dtype_t rt, plumb_err *e);
    /* bn_apply, also writing y16 [M,C] (may be NULL), y's mirror. */
    int (*bn_apply16)(struct dev *d, dev_stream *s, const float *x, const float *mean, const float *rstd,
                      const float *gamma, const float *beta, const float *z, float *y, uint16_t *y16,
                      size_t M, int C, int relu, dtype_t rt, plumb_err *e);
    /* bn_bwd_data, also writing dx16 [M,C] (may be NULL), dx's mirror. */
    int (*bn_bwd_data16)(struct dev *d, dev_stream *s, const float *x, const float *dy, const float *mean,
                         const float *rstd, const float *gamma, const float *mdy, float *dx, uint16_t *dx16,
                         size_t M, int C, dtype_t rt, plumb_err *e);
    /* bn_bwd_stats and bn_bwd_params over the same M rows in one call: part
     * as bn_bwd_stats writes it, dgamma / dbeta as bn_bwd_params writes
     * them (the same bits as the two calls; fast mode: one pass over x and
     * dy serves both). */
    int (*bn_bwd_reduce)(struct dev *d, dev_stream *s, const float *x, const float *dy, const float *mean,
                         const float *rstd, size_t M, int C, void *part, float *dgamma, float *dbeta,
                         plumb_err *e);

    /* ---------------- the fused sparse SGD's undo (optional) ---------------- */

    /* table[rows[u], :] = vals[u, :] for u < U (*rows_n, clamped to n_max),
     * when *when != 0 (when NULL: always): embedding_bwd_sgd's prev put back
     * for a step that is skipped, so the table holds the bits it had before
     * the step. rows [U], vals [U, D]. */
    int (*sparse_put_dn)(struct dev *d, dev_stream *s, float *table, const int64_t *rows,
                         const float *vals, const int64_t *rows_n, size_t n_max, int D,
                         const int *when, plumb_err *e);

    /* ---------------- the queued step's outcome to the host (optional) ----------------
     * host[0, na) = a[0, na) and host[na, na + nb) = b[0, nb): two small
     * device regions (the loss pair, the status block) written into pinned
     * host memory from the backend's host_alloc (device-addressable under
     * unified addressing) by the device itself, in stream order like a
     * copy: the host reads it after an event recorded behind it. One launch
     * instead of two copy-engine transfers. host, a, b, na and nb are
     * multiples of 8 and na + nb <= 256. NULL: the trainer makes two
     * memcpy_async D2H. */
    int (*status_to_host)(struct dev *d, dev_stream *s, void *host, const void *a, size_t na, const void *b,
                          size_t nb, plumb_err *e);

    /* ---------------- gpt with 16-bit activations (optional, all or none) ----------------
     * Fast numerics, rt = DT_BF16 or DT_F16. The transformer's activations
     * that a GEMM or the attention reads, and the gradients flowing between
     * them, are held only as rt's 16-bit values (uint16_t, the bits of the
     * bf16 / fp16 value): exactly the values the fp32 ops above store, since
     * those store rt-rounded values. So no op converts an fp32 copy before its
     * product, and no pass rounds an fp32 result in place; each moves half
     * the bytes. The residual stream, the LayerNorm statistics and the
     * parameter gradients stay fp32. Each op gives the bits of the fp32 op it
     * is named after on the same device (the cpu composes it from that op and
     * casts; tests/test_gpt16_ops.c checks it on the test device), except that
     * a GPU's fast GEMM may pick another algorithm for 16-bit outputs, and
     * that on CUDA matmul_fwd16 / matmul_bwd16 may evaluate the GELU and gelu'
     * in cuBLASLt's epilogues (the GELU of the unrounded sum, cuBLASLt's own
     * gelu'; within the bounds of tests/test_gpt16_ops.c's mm16_epi_case;
     * docs/GPT.md, PLUMB_GPT_GELU_EPI and PLUMB_GPT_DGELU_EPI).
     * w16: the weight's 16-bit values [N, K] (the rounded working copy cast).
     *
     * layernorm_fwd16: layernorm_fwd with y stored as y16 [R, C].
     * layernorm_bwd16: layernorm_bwd with dy given as dy16 [R, C] and dx
     *   fp32 as layernorm_bwd with rt DT_F32 gives it (the residual stream's
     *   gradient); rt is dy16's type. dx16 (may be NULL): dx's values cast
     *   to rt as well (round to nearest even, as cast; may alias dy16), the
     *   16-bit copy the next GEMMs read, so the model needs no cast pass.
     *   dsum [C] (may be NULL; needs dx16): dx16's values summed over the R
     *   rows, the dbias of the GEMM that takes dx16 as its dy16 (the model
     *   then passes that matmul_bwd16 no dbias: one pass over the rows, not
     *   two). The cpu sums them as its matmul_bwd16 sums dbias (rows in
     *   order: the same bits); a GPU in its own fixed order.
     * matmul_fwd16: matmul_fwd from x16 [B, K]; y16 [B, N]; gelu: pre16 too.
     *   bias16 [N] (may be NULL): the bias as rt's 16-bit values (the rounded
     *   working copy cast, as w16): matmul_fwd's bias widened, so the same
     *   values, and a 16-bit output's GEMM epilogue reads it as it is
     *   (cuBLASLt 13 takes a 16-bit D's bias in D's type; gpt16.c's biases
     *   come with the matrices from weights16, not cast a call).
     * matmul_bwd16: matmul_bwd from x16, dy16 [B, N] and pre16_in [B, K]
     *   (may be NULL); dx16 [B, K] (may be NULL: not needed); dw, dbias fp32.
     * attention_fwd16 / attention_bwd16: attention_fwd / attention_bwd with
     *   qkv16 [B, T, 3C], out16 [B, T, C], dout16 and dqkv16.
     * residual_fwd16: y[i] = a[i] + b16[i] in fp32 (residual_fwd with rt
     *   DT_F32: the residual stream), y may alias a; rt is b16's type. */
    int (*layernorm_fwd16)(struct dev *d, dev_stream *s, const float *x, const float *w, const float *b,
                           uint16_t *y16, float *mean, float *rstd, int R, int C, float eps, dtype_t rt,
                           plumb_err *e);
    int (*layernorm_bwd16)(struct dev *d, dev_stream *s, const float *x, const float *w, const float *mean,
                           const float *rstd, const uint16_t *dy16, const float *dres, float *dx,
                           uint16_t *dx16, float *dsum, float *dw, float *db, int R, int C, dtype_t rt,
                           plumb_err *e);
    int (*matmul_fwd16)(struct dev *d, dev_stream *s, const uint16_t *x16, const uint16_t *w16,
                        const uint16_t *bias16, uint16_t *y16, uint16_t *pre16, int B, int K, int N, int gelu,
                        dtype_t rt, plumb_err *e);
    int (*matmul_bwd16)(struct dev *d, dev_stream *s, const uint16_t *x16, const uint16_t *w16,
                        const uint16_t *dy16, const uint16_t *pre16_in, uint16_t *dx16, float *dw,
                        float *dbias, int B, int K, int N, dtype_t rt, plumb_err *e);
    int (*attention_fwd16)(struct dev *d, dev_stream *s, const uint16_t *qkv16, uint16_t *out16, float *lse,
                           int B, int T, int NH, int HS, dtype_t rt, plumb_err *e);
    int (*attention_bwd16)(struct dev *d, dev_stream *s, const uint16_t *qkv16, const uint16_t *out16,
                           const float *lse, const uint16_t *dout16, uint16_t *dqkv16, int B, int T, int NH,
                           int HS, dtype_t rt, plumb_err *e);
    int (*residual_fwd16)(struct dev *d, dev_stream *s, const float *a, const uint16_t *b16, float *y, size_t n,
                          dtype_t rt, plumb_err *e);

    /* ---------------- resnet with 16-bit activations (optional, all or none) ----------------
     * Fast numerics, rt = DT_BF16 or DT_F16 (16-bit values as uint16_t, the
     * bits of the bf16 / fp16 value). The convolutions' outputs, the BN
     * (+ residual) (+ ReLU) outputs and the gradients flowing between layers
     * are held only as 16-bit values: exactly the values the fp32 vision ops
     * above store, since those store rt-rounded values (conv outputs, bn_apply,
     * bn_bwd_data, add, maxpool_bwd all round to rt). Each op gives the bits
     * of the fp32 op it is named after (x16 etc. widened, the result narrowed:
     * the cpu composes it so, tests/test_resnet16_ops.c), except that a GPU's
     * library may pick another convolution algorithm for a 16-bit output (an
     * rt ulp) and its fast reductions may add in another order (fp32 sums).
     * Weight, gamma and beta gradients and the BN statistics stay fp32.
     * mask16 (may be NULL): a ReLU output [M, C]; where mask16[i] is not > 0
     * the gradient dy16[i] reads as 0 (relu_bwd(mask, dy) applied on the fly,
     * so the masked gradient is never stored).
     * mbeta (BN backward only; may be NULL, never with mask16): the mask is
     * this BN's own ReLU output, recomputed from x16 instead of read:
     * dy16[i] reads as 0 where tv_round(tv_bn_apply(x, mean, rstd, gamma,
     * mbeta, no z, ReLU), rt) is not > 0, the value bn_apply16o stored in the
     * forward with the same parameters (so the same mask, bit for bit), one
     * tensor read less in each of the two backward passes. gamma: the
     * reduce's mgamma, the data op's gamma.
     *
     * conv2d_fwd16o: conv2d_fwd from x16 (or, x16 NULL, the fp32 x: the
     *   network's input) and w16 [K,R,S,C], y16 [N,P,Q,K].
     * conv2d_bwd_data16o: conv2d_bwd_data from dy16, w16 into dx16 [N,H,W,C].
     * conv2d_bwd_filter16o: conv2d_bwd_filter from x16 (or x) and dy16 into
     *   the fp32 dw [K,R,S,C].
     * bn_stats16o: bn_stats of x16 [M, C].
     * bn_apply16o: bn_apply from x16 and z16 (may be NULL) into y16.
     * bn_bwd_reduce16o: bn_bwd_reduce over x16 and dy16 (masked by mask16).
     * bn_bwd_data16o: bn_bwd_data over x16, dy16 (masked) into dx16 (may be
     *   dy16: in place).
     * add16o: y16 = add(a16, b16 masked by mask16), no ReLU, then masked by
     *   ymask16 (may be NULL: relu_bwd's test on a ReLU output, applied to the
     *   rounded sum, so a consumer that would mask y16 by it may read y16
     *   unmasked); in place allowed.
     * maxpool_fwd16o / maxpool_bwd16o: maxpool_fwd / maxpool_bwd over x16 /
     *   dy16 into y16 / dx16. */
    int (*conv2d_fwd16o)(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x,
                         const uint16_t *x16, const uint16_t *w16, uint16_t *y16, dtype_t rt, plumb_err *e);
    int (*conv2d_bwd_data16o)(struct dev *d, dev_stream *s, const struct train_conv *g, const uint16_t *dy16,
                              const uint16_t *w16, uint16_t *dx16, dtype_t rt, plumb_err *e);
    int (*conv2d_bwd_filter16o)(struct dev *d, dev_stream *s, const struct train_conv *g, const float *x,
                                const uint16_t *x16, const uint16_t *dy16, float *dw, dtype_t rt, plumb_err *e);
    int (*bn_stats16o)(struct dev *d, dev_stream *s, const uint16_t *x16, size_t M, int C, const float *mean,
                       void *part, dtype_t rt, plumb_err *e);
    int (*bn_apply16o)(struct dev *d, dev_stream *s, const uint16_t *x16, const float *mean, const float *rstd,
                       const float *gamma, const float *beta, const uint16_t *z16, uint16_t *y16, size_t M, int C,
                       int relu, dtype_t rt, plumb_err *e);
    int (*bn_bwd_reduce16o)(struct dev *d, dev_stream *s, const uint16_t *x16, const uint16_t *dy16,
                            const uint16_t *mask16, const float *mgamma, const float *mbeta, const float *mean,
                            const float *rstd, size_t M, int C, void *part, float *dgamma, float *dbeta, dtype_t rt,
                            plumb_err *e);
    int (*bn_bwd_data16o)(struct dev *d, dev_stream *s, const uint16_t *x16, const uint16_t *dy16,
                          const uint16_t *mask16, const float *mbeta, const float *mean, const float *rstd,
                          const float *gamma, const float *mdy, uint16_t *dx16, size_t M, int C, dtype_t rt,
                          plumb_err *e);
    int (*add16o)(struct dev *d, dev_stream *s, const uint16_t *a16, const uint16_t *b16, const uint16_t *mask16,
                  const uint16_t *ymask16, uint16_t *y16, size_t n, dtype_t rt, plumb_err *e);
    int (*maxpool_fwd16o)(struct dev *d, dev_stream *s, const struct train_conv *g, const uint16_t *x16,
                          uint16_t *y16, int32_t *idx, dtype_t rt, plumb_err *e);
    int (*maxpool_bwd16o)(struct dev *d, dev_stream *s, const struct train_conv *g, const uint16_t *dy16,
                          const int32_t *idx, uint16_t *dx16, dtype_t rt, plumb_err *e);

    /* ---------------- resnet: BN statistics in one pass (optional, both or none) ----------------
     * Fast numerics, 16-bit x (rt = DT_BF16 or DT_F16); golden is refused
     * (its statistics stay bn_stats' two passes). Replaces the forward's
     *   bn_stats16o(x, NULL) -> all-reduce -> bn_mean -> bn_stats16o(x, mean)
     *   -> all-reduce -> bn_var
     * by one read of x and one all-reduce of 2C sums:
     *   bn_stats1p16o(x, shift) -> part [2C] -> all-reduce -> bn_meanvar.
     * The sums are of deviations from a shift that every rank holds
     * identically (resnet passes the BN's running mean: the same on every
     * rank, 0 at the start), so the parts of the ranks add up; the nearer
     * the shift to the batch mean, the less the variance E[d^2] - E[d]^2
     * cancels (with shift 0 and |mean| >> std it loses about log2(mean^2 /
     * var) bits of the fp32 sums; tests/test_resnet16_ops.c states the
     * bound).
     * bn_stats1p16o: x16 [M, C], shift [C] fp32 (NULL: zeros; a shift[c]
     *   that is not finite counts as 0, in both ops: a running mean made
     *   non-finite by one step must not poison the next steps' statistics;
     *   dev/train_vision.h tv_bn_shift), part [2C] fp32
     *   (train_bn_part_bytes(2C, 0)): with d = x[m,c] - shift[c] (fp32
     *   subtract), part[c] = sum over m of d, part[C + c] = sum of d * d
     *   (fp32 product), fp32 sums in any deterministic order.
     * bn_meanvar: from part [2C] (the global sums), count >= 2 (global rows),
     *   per channel c, fp32 left to right without fma (dev/train_vision.h
     *   tv_bn_meanvar): n = (float)count, m1 = part[c] / n, mean[c] =
     *   shift[c] + m1, var = part[C + c] / n - m1 * m1, var = 0 where it is
     *   < 0 (a NaN stays), rstd[c] = 1 / sqrtf(var + eps); when run_mean /
     *   run_var are not NULL the running statistics as bn_var updates them,
     *   with var_unbiased = var * (n / (float)(count - 1)). shift (NULL:
     *   zeros) may be run_mean: each channel's shift is read before its
     *   running mean is written. mean and rstd [C] must not alias shift. */
    int (*bn_stats1p16o)(struct dev *d, dev_stream *s, const uint16_t *x16, size_t M, int C, const float *shift,
                         void *part, dtype_t rt, plumb_err *e);
    int (*bn_meanvar)(struct dev *d, dev_stream *s, const void *part, int C, int64_t count, float eps,
                      float momentum, const float *shift, float *mean, float *rstd, float *run_mean, float *run_var,
                      plumb_err *e);

    /* ---------------- optional: the momentum SGD in one launch ----------------
     * sgd_momentum_masked: sgd_momentum over a whole parameter buffer [n],
     * with weight decay wd where i lies in one of the nr ranges [dec[2j],
     * dec[2j+1]) (device int64, ascending, disjoint: the tensors that decay)
     * and 0 elsewhere. The bits of sgd_momentum called per range, in one
     * launch instead of one per range (resnet152: about 100 a step, each a
     * few microseconds of GPU and of host time). */
    int (*sgd_momentum_masked)(struct dev *d, dev_stream *s, float *w, const float *g, float *buf, size_t n,
                               float lr, float wd, float mu, int first, const int64_t *dec, int nr, plumb_err *e);

    /* ---------------- gpt's residual add and LayerNorm in one pass ----------------
     * residual_layernorm_fwd16: one of the "gpt with 16-bit activations" set
     * above (all or none; placed last only to keep the table's order):
     * residual_fwd16 (res [R, C] = a + b16, fp32; res may alias a)
     * then layernorm_fwd16 of res, in one pass over the rows, with the bits of
     * the two calls. The transformer's every residual add is followed by a
     * LayerNorm of its sum; fused, the sum is not read back from memory. */
    int (*residual_layernorm_fwd16)(struct dev *d, dev_stream *s, const float *a, const uint16_t *b16, float *res,
                                    const float *w, const float *b, uint16_t *y16, float *mean, float *rstd, int R,
                                    int C, float eps, dtype_t rt, plumb_err *e);

    /* ---------------- resnet: a projection block's two BNs applied in one pass ----------------
     * bn_apply2_16o (optional; NULL: the model applies them apart): y16 =
     * bn_apply16o(x16, mean, rstd, gamma, beta, z16, relu) with z16 =
     * bn_apply16o(zx16, zmean, zrstd, zgamma, zbeta, no z, no ReLU), z
     * rounded to rt as that call stores it: the same bits, and z never
     * written to memory or read back (resnet50 bf16/256: 1.5 GB a step). */
    int (*bn_apply2_16o)(struct dev *d, dev_stream *s, const uint16_t *x16, const float *mean, const float *rstd,
                         const float *gamma, const float *beta, const uint16_t *zx16, const float *zmean,
                         const float *zrstd, const float *zgamma, const float *zbeta, uint16_t *y16, size_t M, int C,
                         int relu, dtype_t rt, plumb_err *e);

    /* ---------------- gpt: the 16-bit pipeline's weights in one pass ----------------
     * weights16 (optional; NULL: round_fp32 of all n into y, then the
     * device's cast of all n into y16): for i in one of the nr ranges
     * [r[2j], r[2j+1]) (device int64, ascending, disjoint: the matrices the
     * blocks' GEMMs read as 16-bit values) y16[i] = x[i] as rt's 16-bit
     * value (the cast's bits); elsewhere y[i] = round_fp32's x[i] (the
     * classifier's weights, the biases). y inside the ranges and y16 outside
     * are left as they are: each element is read once and written once
     * (gpt2-124m: 0.8 GB a step instead of 1.7). x, y: [n] fp32; y16 [n]. */
    int (*weights16)(struct dev *d, dev_stream *s, const float *x, float *y, uint16_t *y16, size_t n,
                     const int64_t *r, int nr, dtype_t rt, plumb_err *e);

    /* ---------------- the found-inf flag from the norm (optional) ----------------
     * *found_inf (device int) = 1 if *sumsq (device double, a sumsq total)
     * is inf or NaN, left unchanged otherwise. A sum of squares is finite
     * exactly when every value is: squares are >= 0, so an inf or a NaN is
     * never cancelled, and no finite fp32 square (< 2^256), nor a sum of up
     * to 2^60 of them, reaches double's 2^1024. So with no multiply to do
     * (mul = 1: bf16 and fp32 have no loss scale) scale_check's pass gives
     * nothing that the norm's pass does not, and train/trainer.c reads the
     * flag off the norm where it computes one (one read of the gradients a
     * step instead of two: 163 us of a gpt2-124m step on an H100). NULL: the
     * trainer runs scale_check. */
    int (*found_of_sumsq)(struct dev *d, dev_stream *s, const double *sumsq, int *found_inf, plumb_err *e);

    /* ---------------- gpt: the classifier in 16 bits (optional) ----------------
     * classifier_fwd_bwd (one of the 16-bit pipeline's ops: fast numerics,
     * rt = DT_BF16 or DT_F16) with its input, weights and dx as rt's 16-bit
     * values: x16 [R, C] (ln_f's output as layernorm_fwd16 stores it),
     * wte16 [rows16, C] (rows16 >= V: the rounded working copy cast, as the
     * pipeline's w16) and dx16 [R, C] (NULL: forward only; dx's values, which
     * classifier_fwd_bwd stores rounded to rt, so exact). Losses, the sum and
     * dwte (fp32) as classifier_fwd_bwd gives them from the widened values;
     * dx16 too, except that a GPU's dx GEMM may take another algorithm for
     * its 16-bit output (as matmul_fwd16's may). Rows V..rows16-1 (the padded
     * vocabulary's) must be finite and are otherwise unused: a GPU's GEMMs
     * may run over the rows padded to a multiple of 8, where they meet only
     * zero gradient columns, so with rows16 at least that padded count it
     * reads wte16 as it is (gpt2-124m: no 38.6 M-value cast, no 77 MB copy, no
     * cast of x and no rounding pass over dx a step), else copies it into a
     * padded buffer. */
    int (*classifier_fwd_bwd16)(struct dev *d, dev_stream *s, const uint16_t *x16, const uint16_t *wte16, int rows16,
                                const int32_t *tgt, int R, int C, int V, float grad_scale, float *losses,
                                double *sum_count, uint16_t *dx16, float *dwte, dtype_t rt, plumb_err *e);
};

/* The cpu backend's table (src/dev/cpu_train_ops.c). */
extern const struct train_ops cpu_train_ops;
/* Test hook: multiplies the cpu ops' minimum sizes for parallel regions
 * (1.0 default; 0 forces every op onto all d->threads threads). */
extern double cpu_train_par_scale;

#endif
