/* Training ops (dev/train_ops.h): every backward against central finite
 * differences of a float64 reference forward written here, forwards against
 * the float64 reference, optimizers and utilities against known answers, and
 * golden results bit-identical across thread counts. Runs on test_device()
 * through device memory (upload/download), so the GPU backends run it too. */
#include "test.h"
#include "dev/dev.h"
#include "dev/train_ops.h"
#include "dev/train_math.h"
#include "models/ctr/ctr.h"
#include <float.h>
#include <stdint.h>
#include <stdlib.h>

/* ---- helpers ---- */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double urand(void) /* [0,1) */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) * (1.0 / 9007199254740992.0);
}
static void fill(float *x, size_t n, double lo, double hi)
{
    for (size_t i = 0; i < n; i++) x[i] = (float)(lo + (hi - lo) * urand());
}

static struct dev *open_dev(enum numerics mode, int threads)
{
    struct dev *d = NULL;
    plumb_err e = {0};
    if (dev_open(test_device(), &d, &e)) return NULL;
    if (dev_set_numerics(d, mode, 0, &e)) {
        dev_close(d);
        return NULL;
    }
    d->threads = threads;
    if (!d->ops->train) {
        dev_close(d);
        return NULL;
    }
    return d;
}
#define OPEN(d, mode, thr)                                                           \
    struct dev *d = open_dev(mode, thr);                                             \
    if (!d) TEST_SKIP("device %s has no training ops", test_device());

/* device copy of host data */
static void *dput(struct dev *d, const void *h, size_t bytes)
{
    void *p = NULL;
    plumb_err e = {0};
    if (dev_alloc(d, bytes ? bytes : 4, &p, &e)) return NULL;
    if (h && bytes && dev_upload(d, p, h, bytes, &e)) return NULL;
    if (!h && bytes) {
        void *z = calloc(1, bytes);
        dev_upload(d, p, z, bytes, &e);
        free(z);
    }
    return p;
}
static void dget(struct dev *d, void *h, const void *p, size_t bytes)
{
    plumb_err e = {0};
    dev_download(d, h, p, bytes, &e);
}
#define TO(d, h, n) dput(d, h, (n) * sizeof *(h))

static double rel_err(double a, double b) { return fabs(a - b) / fmax(1e-3, fmax(fabs(a), fabs(b))); }

/* ================= linear ================= */

/* float64 reference: L = sum R[b,n] * act(x w^T + bias) */
static double lin_ref_loss(const double *x, const double *w, const double *bias, const double *R,
                           int B, int K, int N, int relu, double *y_out)
{
    double L = 0;
    for (int b = 0; b < B; b++)
        for (int n = 0; n < N; n++) {
            double acc = bias ? bias[n] : 0;
            for (int k = 0; k < K; k++) acc += x[b * K + k] * w[n * K + k];
            if (relu && acc < 0) acc = 0;
            if (y_out) y_out[b * N + n] = acc;
            L += R[b * N + n] * acc;
        }
    return L;
}

static void check_linear(enum numerics mode, int relu)
{
    OPEN(d, mode, 0);
    enum { B = 7, K = 13, N = 9 };
    float x[B * K], w[N * K], bias[N], R[B * N];
    fill(x, B * K, -1, 1);
    fill(w, N * K, -0.5, 0.5);
    fill(bias, N, -0.3, 0.3);
    fill(R, B * N, -1, 1);
    double xd[B * K], wd[N * K], bd[N], Rd[B * N], yd[B * N];
    for (int i = 0; i < B * K; i++) xd[i] = x[i];
    for (int i = 0; i < N * K; i++) wd[i] = w[i];
    for (int i = 0; i < N; i++) bd[i] = bias[i];
    for (int i = 0; i < B * N; i++) Rd[i] = R[i];
    lin_ref_loss(xd, wd, bd, Rd, B, K, N, relu, yd);

    float *dx_ = TO(d, x, B * K), *dw_ = TO(d, w, N * K), *db_ = TO(d, bias, N);
    float *dy_ = dput(d, NULL, sizeof(float) * B * N), *dR = TO(d, R, B * N);
    float *gx = dput(d, NULL, sizeof x), *gw = dput(d, NULL, sizeof w), *gb = dput(d, NULL, sizeof bias);
    REQUIRE(dx_ && dw_ && db_ && dy_ && dR && gx && gw && gb);
    plumb_err e = {0};
    const struct train_ops *T = d->ops->train;
    REQUIRE(T->linear_fwd(d, NULL, dx_, dw_, db_, dy_, B, K, N, relu, DT_F32, &e) == 0);
    float y[B * N];
    dget(d, y, dy_, sizeof y);
    for (int i = 0; i < B * N; i++) CHECK_NEAR(y[i], yd[i], 1e-5);
    REQUIRE(T->linear_bwd(d, NULL, dx_, dw_, dy_, dR, gx, gw, gb, B, K, N, relu, DT_F32, &e) == 0);
    float hx[B * K], hw[N * K], hb[N];
    dget(d, hx, gx, sizeof hx);
    dget(d, hw, gw, sizeof hw);
    dget(d, hb, gb, sizeof hb);
    const double h = 1e-6;
    double worst = 0;
    for (int i = 0; i < B * K; i++) {
        double s = xd[i];
        xd[i] = s + h;
        double lp = lin_ref_loss(xd, wd, bd, Rd, B, K, N, relu, NULL);
        xd[i] = s - h;
        double lm = lin_ref_loss(xd, wd, bd, Rd, B, K, N, relu, NULL);
        xd[i] = s;
        worst = fmax(worst, rel_err(hx[i], (lp - lm) / (2 * h)));
    }
    for (int i = 0; i < N * K; i++) {
        double s = wd[i];
        wd[i] = s + h;
        double lp = lin_ref_loss(xd, wd, bd, Rd, B, K, N, relu, NULL);
        wd[i] = s - h;
        double lm = lin_ref_loss(xd, wd, bd, Rd, B, K, N, relu, NULL);
        wd[i] = s;
        worst = fmax(worst, rel_err(hw[i], (lp - lm) / (2 * h)));
    }
    for (int i = 0; i < N; i++) {
        double s = bd[i];
        bd[i] = s + h;
        double lp = lin_ref_loss(xd, wd, bd, Rd, B, K, N, relu, NULL);
        bd[i] = s - h;
        double lm = lin_ref_loss(xd, wd, bd, Rd, B, K, N, relu, NULL);
        bd[i] = s;
        worst = fmax(worst, rel_err(hb[i], (lp - lm) / (2 * h)));
    }
    CHECK_MSG(worst < 1e-4, "linear relu=%d numerics=%d: worst gradient relative error %g", relu,
              (int)mode, worst);
    dev_free(d, dx_); dev_free(d, dw_); dev_free(d, db_); dev_free(d, dy_); dev_free(d, dR);
    dev_free(d, gx); dev_free(d, gw); dev_free(d, gb);
    dev_close(d);
}

TEST(train_ops_linear_fd_fast) { check_linear(NUMERICS_FAST, 0); }
TEST(train_ops_linear_relu_fd_fast) { check_linear(NUMERICS_FAST, 1); }
TEST(train_ops_linear_fd_golden) { check_linear(NUMERICS_GOLDEN, 0); }
TEST(train_ops_linear_relu_fd_golden) { check_linear(NUMERICS_GOLDEN, 1); }

/* Golden linear is one fmaf chain per element in k order: check the exact bits
 * against the same chain written here. */
TEST(train_ops_linear_golden_exact_order)
{
    OPEN(d, NUMERICS_GOLDEN, 0);
    enum { B = 5, K = 37, N = 11 };
    float x[B * K], w[N * K], bias[N], y[B * N], dy[B * N], dx[B * K], dw[N * K], db[N];
    fill(x, B * K, -3, 3);
    fill(w, N * K, -1, 1);
    fill(bias, N, -1, 1);
    fill(dy, B * N, -1, 1);
    float *px = TO(d, x, B * K), *pw = TO(d, w, N * K), *pb = TO(d, bias, N);
    float *py = dput(d, NULL, sizeof y), *pdy = TO(d, dy, B * N);
    float *pdx = dput(d, NULL, sizeof dx), *pdw = dput(d, NULL, sizeof dw), *pdb = dput(d, NULL, sizeof db);
    plumb_err e = {0};
    const struct train_ops *T = d->ops->train;
    REQUIRE(T->linear_fwd(d, NULL, px, pw, pb, py, B, K, N, 0, DT_F32, &e) == 0);
    REQUIRE(T->linear_bwd(d, NULL, px, pw, py, pdy, pdx, pdw, pdb, B, K, N, 0, DT_F32, &e) == 0);
    dget(d, y, py, sizeof y);
    dget(d, dx, pdx, sizeof dx);
    dget(d, dw, pdw, sizeof dw);
    dget(d, db, pdb, sizeof db);
    int bad = 0;
    for (int b = 0; b < B; b++)
        for (int n = 0; n < N; n++) {
            float acc = 0;
            for (int k = 0; k < K; k++) acc = fmaf(x[b * K + k], w[n * K + k], acc);
            acc = acc + bias[n];
            bad += f32_bits(acc) != f32_bits(y[b * N + n]);
        }
    for (int b = 0; b < B; b++)
        for (int k = 0; k < K; k++) {
            float acc = 0;
            for (int n = 0; n < N; n++) acc = fmaf(dy[b * N + n], w[n * K + k], acc);
            bad += f32_bits(acc) != f32_bits(dx[b * K + k]);
        }
    for (int n = 0; n < N; n++) {
        for (int k = 0; k < K; k++) {
            float acc = 0;
            for (int b = 0; b < B; b++) acc = fmaf(dy[b * N + n], x[b * K + k], acc);
            bad += f32_bits(acc) != f32_bits(dw[n * K + k]);
        }
        float s = 0;
        for (int b = 0; b < B; b++) s = s + dy[b * N + n];
        bad += f32_bits(s) != f32_bits(db[n]);
    }
    CHECK_EQ_INT(bad, 0);
    dev_free(d, px); dev_free(d, pw); dev_free(d, pb); dev_free(d, py); dev_free(d, pdy);
    dev_free(d, pdx); dev_free(d, pdw); dev_free(d, pdb);
    dev_close(d);
}

/* ================= relu ================= */

TEST(train_ops_relu_fd)
{
    OPEN(d, NUMERICS_FAST, 0);
    enum { n = 101 };
    float x[n], R[n], y[n], g[n];
    fill(x, n, -1, 1);
    fill(R, n, -1, 1);
    float *px = TO(d, x, n), *py = dput(d, NULL, sizeof y), *pR = TO(d, R, n), *pg = dput(d, NULL, sizeof g);
    plumb_err e = {0};
    REQUIRE(d->ops->train->relu_fwd(d, NULL, px, py, n, DT_F32, &e) == 0);
    REQUIRE(d->ops->train->relu_bwd(d, NULL, py, pR, pg, n, &e) == 0);
    dget(d, y, py, sizeof y);
    dget(d, g, pg, sizeof g);
    const double h = 1e-6;
    for (int i = 0; i < n; i++) {
        CHECK(y[i] == (x[i] > 0 ? x[i] : 0));
        double fp = R[i] * fmax((double)x[i] + h, 0), fm = R[i] * fmax((double)x[i] - h, 0);
        CHECK_NEAR(g[i], (fp - fm) / (2 * h), 1e-6);
    }
    dev_free(d, px); dev_free(d, py); dev_free(d, pR); dev_free(d, pg);
    dev_close(d);
}

/* ================= embeddings ================= */

static void check_embedding(enum numerics mode)
{
    OPEN(d, mode, 0);
    enum { T = 3, D = 5, B = 9, NV = 7 };
    const int64_t rows[T] = {4, 6, 3};
    int64_t off[T] = {0, 4, 10};
    const int R = 13;
    float table[R * D];
    fill(table, R * D, -1, 1);
    uint32_t idx[B * T];
    for (int i = 0; i < B * T; i++) idx[i] = (uint32_t)(urand() * rows[i % T]); /* duplicates */
    float Rw[B * T * D];
    fill(Rw, B * T * D, -1, 1);
    float *pt = TO(d, table, R * D), *po = dput(d, NULL, sizeof Rw), *pR = TO(d, Rw, B * T * D);
    int64_t *poff = TO(d, off, T);
    uint32_t *pidx = TO(d, idx, B * T);
    int64_t *prows = dput(d, NULL, sizeof(int64_t) * B * T), *pn = dput(d, NULL, sizeof(int64_t));
    float *pg = dput(d, NULL, sizeof(float) * B * T * D);
    plumb_err e = {0};
    const struct train_ops *Tp = d->ops->train;
    REQUIRE(Tp->embedding_fwd(d, NULL, pt, poff, pidx, po, B, T, D, DT_F32, &e) == 0);
    float out[B * T * D];
    dget(d, out, po, sizeof out);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int k = 0; k < D; k++)
                CHECK(out[(b * T + t) * D + k] == table[(off[t] + idx[b * T + t]) * D + k]);
    REQUIRE(Tp->embedding_bwd(d, NULL, poff, pidx, pR, B, NV, T, D, prows, pg, pn, &e) == 0);
    int64_t U = 0, rws[B * T];
    float g[B * T * D];
    dget(d, &U, pn, sizeof U);
    REQUIRE(U > 0 && U <= NV * T);
    dget(d, rws, prows, sizeof(int64_t) * U);
    dget(d, g, pg, sizeof(float) * U * D);
    for (int u = 1; u < U; u++) CHECK(rws[u] > rws[u - 1]);
    /* dense gradient from the sparse list vs finite differences of the float64
     * reference L = sum_{b < NV} R[b,t,:] . table[row(b,t), :] */
    double dense[R * D];
    memset(dense, 0, sizeof dense);
    for (int u = 0; u < U; u++)
        for (int k = 0; k < D; k++) dense[rws[u] * D + k] = g[u * D + k];
    const double h = 1e-6;
    double worst = 0;
    for (int r = 0; r < R; r++)
        for (int k = 0; k < D; k++) {
            double lp = 0, lm = 0;
            for (int b = 0; b < NV; b++)
                for (int t = 0; t < T; t++) {
                    int64_t row = off[t] + idx[b * T + t];
                    double v = table[row * D + k];
                    double rr = Rw[(b * T + t) * D + k];
                    lp += rr * (row == r ? v + h : v);
                    lm += rr * (row == r ? v - h : v);
                }
            worst = fmax(worst, rel_err(dense[r * D + k], (lp - lm) / (2 * h)));
        }
    CHECK_MSG(worst < 1e-5, "embedding gradient worst relative error %g", worst);
    /* rows touched only by masked samples are absent */
    for (int u = 0; u < U; u++) {
        int seen = 0;
        for (int b = 0; b < NV; b++)
            for (int t = 0; t < T; t++) seen |= off[t] + idx[b * T + t] == rws[u];
        CHECK(seen);
    }
    dev_free(d, pt); dev_free(d, po); dev_free(d, pR); dev_free(d, poff); dev_free(d, pidx);
    dev_free(d, prows); dev_free(d, pn); dev_free(d, pg);
    dev_close(d);
}
TEST(train_ops_embedding_fd_fast) { check_embedding(NUMERICS_FAST); }
TEST(train_ops_embedding_fd_golden) { check_embedding(NUMERICS_GOLDEN); }

/* The sparse sum order of train_ops.h, exactly, for both ops and both modes:
 * rows with 1, C-1, C, C+1, 2C+1 and 5C+3 duplicates (C = TRAIN_SPARSE_CHUNK),
 * interleaved in input order, starting at sorted offsets on and off chunk
 * boundaries, against a host reimplementation of the definitions in fp32:
 * golden one chain in ascending position from 0; fast chains of C positions
 * from 0, the chunk sums added in chunk order from 0. Values of very different
 * magnitudes make the two orders differ on the hot rows (checked too). */
static void sparse_order_case(enum numerics mode)
{
    OPEN(d, mode, 0);
    enum { C = TRAIN_SPARSE_CHUNK, NR = 10, D = 3 };
    const int64_t rowid[NR] = {3, 5, 17, 40, 100000, 100001, 100007, 4000000000ll, 4000000001ll, 4000000002ll};
    const int cnt[NR] = {1, C - 1, C + 1, 5 * C + 3, C, C + 1, 2, 5 * C + 3, 1, 2 * C + 1};
    size_t n = 0;
    for (int r = 0; r < NR; r++) n += (size_t)cnt[r];
    /* input order: the duplicates interleaved by a seeded shuffle */
    int64_t *rows = malloc(n * 8);
    float *vals = malloc(n * D * 4);
    size_t q = 0;
    for (int r = 0; r < NR; r++)
        for (int j = 0; j < cnt[r]; j++) rows[q++] = rowid[r];
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)(urand() * (double)(i + 1));
        int64_t t = rows[i];
        rows[i] = rows[j];
        rows[j] = t;
    }
    for (size_t i = 0; i < n * D; i++) {
        int ex = (int)(urand() * 30) - 10;
        vals[i] = (float)ldexp(urand() - 0.5, ex);
    }
    /* the host reference: rows ascending (rowid is), positions ascending */
    float *ref_g = calloc((size_t)NR * D, 4), *ref_f = calloc((size_t)NR * D, 4);
    int differ = 0;
    for (int r = 0; r < NR; r++)
        for (int k = 0; k < D; k++) {
            float g = 0.0f, tot = 0.0f, part = 0.0f;
            int m = 0;
            for (size_t i = 0; i < n; i++) {
                if (rows[i] != rowid[r]) continue;
                float v = vals[i * D + k];
                g = g + v;
                part = part + v;
                if (++m % C == 0) {
                    tot = tot + part;
                    part = 0.0f;
                }
            }
            if (m % C) tot = tot + part;
            ref_g[r * D + k] = g;
            ref_f[r * D + k] = tot;
            if (cnt[r] <= C) CHECK(memcmp(&g, &tot, 4) == 0); /* the definitions agree there */
            else differ += memcmp(&g, &tot, 4) != 0;
        }
    CHECK_MSG(differ > 0, "the test values do not tell the two orders apart");
    const float *ref = mode == NUMERICS_GOLDEN ? ref_g : ref_f;
    plumb_err e = {0};
    int64_t *pr = TO(d, rows, n), *po = dput(d, NULL, n * 8), *pn = dput(d, NULL, 8);
    float *pv = TO(d, vals, n * D), *pvo = dput(d, NULL, n * D * 4);
    int64_t off0 = 0, *poff = TO(d, &off0, 1);
    uint32_t *idx = malloc(n * 4);
    for (size_t i = 0; i < n; i++) idx[i] = (uint32_t)rows[i];
    uint32_t *pidx = TO(d, idx, n);
    int64_t U = -1, ro[NR];
    float *vo = malloc(n * D * 4);
    for (int op = 0; op < 2; op++) {
        /* op 0: sparse_coalesce; op 1: embedding_bwd with T = 1 (position p = b)
         * over the rows below 2^32 (the first 7) */
        size_t nn = n;
        int nr = NR;
        if (op == 1) {
            nn = 0;
            for (size_t i = 0; i < n; i++)
                if (rows[i] < 4000000000ll) idx[nn] = (uint32_t)rows[i], memcpy(vo + nn * D, vals + i * D, D * 4), nn++;
            nr = 7;
            dev_upload(d, pidx, idx, nn * 4, &e);
            dev_upload(d, pv, vo, nn * D * 4, &e);
            REQUIRE(d->ops->train->embedding_bwd(d, NULL, poff, pidx, pv, (int)nn, (int)nn, 1, D, po, pvo, pn, &e) == 0);
        } else {
            REQUIRE(d->ops->train->sparse_coalesce(d, NULL, pr, pv, n, D, po, pvo, pn, &e) == 0);
        }
        dget(d, &U, pn, 8);
        CHECK_EQ_INT(U, nr);
        if (U != nr) continue;
        dget(d, ro, po, (size_t)nr * 8);
        dget(d, vo, pvo, (size_t)nr * D * 4);
        for (int r = 0; r < nr; r++) {
            CHECK_EQ_INT(ro[r], rowid[r]);
            for (int k = 0; k < D; k++)
                CHECK_MSG(memcmp(&vo[r * D + k], &ref[r * D + k], 4) == 0,
                          "%s %s row %lld (%d duplicates) col %d: %.9g, expected %.9g",
                          op ? "embedding_bwd" : "sparse_coalesce", mode == NUMERICS_GOLDEN ? "golden" : "fast",
                          (long long)rowid[r], cnt[r], k, vo[r * D + k], ref[r * D + k]);
        }
    }
    dev_free(d, pr); dev_free(d, po); dev_free(d, pn); dev_free(d, pv); dev_free(d, pvo);
    dev_free(d, poff); dev_free(d, pidx);
    free(rows); free(vals); free(ref_g); free(ref_f); free(idx); free(vo);
    dev_close(d);
}
TEST(train_ops_sparse_sum_order_golden) { sparse_order_case(NUMERICS_GOLDEN); }
TEST(train_ops_sparse_sum_order_fast) { sparse_order_case(NUMERICS_FAST); }

/* Duplicates are summed in ascending input position: 1e8 + 1 - 1e8 = 0 in
 * fp32 that order (any other order gives 1). */
TEST(train_ops_sparse_coalesce_order)
{
    OPEN(d, NUMERICS_FAST, 0);
    int64_t rows[6] = {7, 3, 7, 9, 7, 3};
    float vals[6] = {1e8f, 2.0f, 1.0f, 5.0f, -1e8f, 0.5f};
    int64_t *pr = TO(d, rows, 6), *po = dput(d, NULL, sizeof rows), *pn = dput(d, NULL, 8);
    float *pv = TO(d, vals, 6), *pvo = dput(d, NULL, sizeof vals);
    plumb_err e = {0};
    REQUIRE(d->ops->train->sparse_coalesce(d, NULL, pr, pv, 6, 1, po, pvo, pn, &e) == 0);
    int64_t U, ro[6];
    float vo[6];
    dget(d, &U, pn, 8);
    REQUIRE(U == 3);
    dget(d, ro, po, sizeof ro);
    dget(d, vo, pvo, sizeof vo);
    CHECK(ro[0] == 3 && ro[1] == 7 && ro[2] == 9);
    CHECK(vo[0] == 2.5f);
    CHECK(vo[1] == 0.0f);
    CHECK(vo[2] == 5.0f);
    /* rows spanning 35 bits, whose order in the low digits is the reverse of
     * their order: every 11-bit radix digit (up to bits 33..43) decides */
    {
        int64_t wr[5] = {((int64_t)1 << 34), ((int64_t)1 << 23) + 7, 100, ((int64_t)1 << 33) + ((int64_t)1 << 21),
                         ((int64_t)1 << 23) + 7};
        float wv[5] = {1, 2, 3, 4, 5};
        int64_t *pwr = TO(d, wr, 5), *pwo = dput(d, NULL, sizeof wr);
        float *pwv = TO(d, wv, 5), *pwvo = dput(d, NULL, sizeof wv);
        REQUIRE(d->ops->train->sparse_coalesce(d, NULL, pwr, pwv, 5, 1, pwo, pwvo, pn, &e) == 0);
        int64_t wu = 0, wro[5];
        float wvo[5];
        dget(d, &wu, pn, 8);
        REQUIRE(wu == 4);
        dget(d, wro, pwo, sizeof wro);
        dget(d, wvo, pwvo, sizeof wvo);
        CHECK(wro[0] == 100 && wro[1] == ((int64_t)1 << 23) + 7 && wro[2] == ((int64_t)1 << 33) + ((int64_t)1 << 21) &&
              wro[3] == ((int64_t)1 << 34));
        CHECK(wvo[0] == 3 && wvo[1] == 7 && wvo[2] == 4 && wvo[3] == 1);
        dev_free(d, pwr); dev_free(d, pwo); dev_free(d, pwv); dev_free(d, pwvo);
    }
    /* a negative row is an error naming it */
    rows[2] = -4;
    dev_upload(d, pr, rows, sizeof rows, &e);
    CHECK(d->ops->train->sparse_coalesce(d, NULL, pr, pv, 6, 1, po, pvo, pn, &e) == PLUMB_EUSAGE);
    CHECK(strstr(e.msg, "-4") != NULL);
    dev_free(d, pr); dev_free(d, po); dev_free(d, pn); dev_free(d, pv); dev_free(d, pvo);
    dev_close(d);
}

/* ================= interaction ================= */

static double inter_ref_loss(const double *bot, const double *emb, const double *R, int B, int T,
                             int D)
{
    int F = T + 1, W = D + F * (F - 1) / 2;
    double L = 0;
    for (int b = 0; b < B; b++) {
        const double *g = R + b * W;
        for (int k = 0; k < D; k++) L += g[k] * bot[b * D + k];
        int p = D;
        for (int i = 1; i < F; i++)
            for (int j = 0; j < i; j++) {
                const double *zi = emb + (b * T + i - 1) * D;
                const double *zj = j == 0 ? bot + b * D : emb + (b * T + j - 1) * D;
                double s = 0;
                for (int k = 0; k < D; k++) s += zi[k] * zj[k];
                L += g[p++] * s;
            }
    }
    return L;
}

static void check_interact(enum numerics mode)
{
    OPEN(d, mode, 0);
    enum { B = 4, T = 5, D = 3, F = T + 1, W = D + F * (F - 1) / 2 };
    float bot[B * D], emb[B * T * D], R[B * W];
    fill(bot, B * D, -1, 1);
    fill(emb, B * T * D, -1, 1);
    fill(R, B * W, -1, 1);
    double bd[B * D], ed[B * T * D], Rd[B * W];
    for (int i = 0; i < B * D; i++) bd[i] = bot[i];
    for (int i = 0; i < B * T * D; i++) ed[i] = emb[i];
    for (int i = 0; i < B * W; i++) Rd[i] = R[i];
    float *pb = TO(d, bot, B * D), *pe = TO(d, emb, B * T * D), *pR = TO(d, R, B * W);
    float *po = dput(d, NULL, sizeof R), *pgb = dput(d, NULL, sizeof bot), *pge = dput(d, NULL, sizeof emb);
    plumb_err e = {0};
    REQUIRE(d->ops->train->interact_fwd(d, NULL, pb, pe, po, B, T, D, DT_F32, &e) == 0);
    float out[B * W];
    dget(d, out, po, sizeof out);
    /* forward: the pair layout i > j row by row after the bottom output */
    for (int b = 0; b < B; b++) {
        for (int k = 0; k < D; k++) CHECK(out[b * W + k] == bot[b * D + k]);
        int p = D;
        for (int i = 1; i < F; i++)
            for (int j = 0; j < i; j++) {
                const double *zi = ed + (b * T + i - 1) * D;
                const double *zj = j == 0 ? bd + b * D : ed + (b * T + j - 1) * D;
                double s = 0;
                for (int k = 0; k < D; k++) s += zi[k] * zj[k];
                CHECK_NEAR(out[b * W + p], s, 1e-6);
                p++;
            }
    }
    REQUIRE(d->ops->train->interact_bwd(d, NULL, pb, pe, pR, pgb, pge, B, T, D, DT_F32, &e) == 0);
    float gb[B * D], ge[B * T * D];
    dget(d, gb, pgb, sizeof gb);
    dget(d, ge, pge, sizeof ge);
    const double h = 1e-6;
    double worst = 0;
    for (int i = 0; i < B * D; i++) {
        double s = bd[i];
        bd[i] = s + h;
        double lp = inter_ref_loss(bd, ed, Rd, B, T, D);
        bd[i] = s - h;
        double lm = inter_ref_loss(bd, ed, Rd, B, T, D);
        bd[i] = s;
        worst = fmax(worst, rel_err(gb[i], (lp - lm) / (2 * h)));
    }
    for (int i = 0; i < B * T * D; i++) {
        double s = ed[i];
        ed[i] = s + h;
        double lp = inter_ref_loss(bd, ed, Rd, B, T, D);
        ed[i] = s - h;
        double lm = inter_ref_loss(bd, ed, Rd, B, T, D);
        ed[i] = s;
        worst = fmax(worst, rel_err(ge[i], (lp - lm) / (2 * h)));
    }
    CHECK_MSG(worst < 1e-4, "interaction gradient worst relative error %g", worst);
    dev_free(d, pb); dev_free(d, pe); dev_free(d, pR); dev_free(d, po); dev_free(d, pgb); dev_free(d, pge);
    dev_close(d);
}
TEST(train_ops_interact_fd_fast) { check_interact(NUMERICS_FAST); }
TEST(train_ops_interact_fd_golden) { check_interact(NUMERICS_GOLDEN); }

/* The DLRM width: 27 vectors of 16 give 16 + 351 = 367 features per sample.
 * interact_fwd on [B, 26, 16] writes exactly 367 columns per row (rows
 * back to back, nothing after the last one), the last column is the dot of
 * the last two tables' vectors, and the dlrm-kaggle preset's top MLP reads
 * that width (a config that disagrees is refused naming 367). */
TEST(train_ops_interact_dlrm_width)
{
    OPEN(d, NUMERICS_GOLDEN, 0);
    enum { B = 3, T = 26, D = 16, W = 367, GUARD = 64 };
    static float bot[B * D], emb[B * T * D], out[B * W + GUARD];
    fill(bot, B * D, -1, 1);
    fill(emb, B * T * D, -1, 1);
    for (int i = 0; i < B * W + GUARD; i++) out[i] = -12345.0f;
    float *pb = TO(d, bot, B * D), *pe = TO(d, emb, B * T * D), *po = TO(d, out, B * W + GUARD);
    plumb_err e = {0};
    REQUIRE(d->ops->train->interact_fwd(d, NULL, pb, pe, po, B, T, D, DT_F32, &e) == 0);
    dget(d, out, po, sizeof out);
    int untouched = 0, written = 0;
    for (int i = B * W; i < B * W + GUARD; i++) untouched += out[i] == -12345.0f;
    for (int i = 0; i < B * W; i++) written += out[i] != -12345.0f;
    CHECK_EQ_INT(untouched, GUARD);
    CHECK_EQ_INT(written, B * W);
    for (int b = 0; b < B; b++) {
        /* column 366 = pair (i = 26, j = 25): tables 25 and 24 */
        float acc = 0;
        for (int k = 0; k < D; k++) acc = fmaf(emb[(b * T + 25) * D + k], emb[(b * T + 24) * D + k], acc);
        CHECK_MSG(f32_bits(out[b * W + W - 1]) == f32_bits(acc), "sample %d: column 366 %.9g, want %.9g", b,
                  (double)out[b * W + W - 1], (double)acc);
        CHECK(out[b * W] == bot[b * D]); /* column 0: the bottom output */
    }
    struct ctr_config c;
    REQUIRE(ctr_config_preset("dlrm-kaggle", 0, &c, &e) == 0);
    CHECK_EQ_INT(c.top[0], W);
    CHECK_EQ_INT(c.emb_dim, D);
    c.top[0] = W - 1;
    CHECK(ctr_config_validate(&c, &e) == PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "367") != NULL, "message: %s", e.msg);
    dev_free(d, pb); dev_free(d, pe); dev_free(d, po);
    dev_close(d);
}

/* ================= BCE ================= */

static double bce_ref(double z, double y) { return y * log1p(exp(-z)) + (1 - y) * log1p(exp(z)); }

static void check_bce(enum numerics mode)
{
    OPEN(d, mode, 0);
    enum { B = 12, NV = 10 };
    float z[B] = {-3.5f, -1.0f, -0.25f, 0.0f, 0.3f, 1.7f, 4.0f, 9.0f, -60.0f, 80.0f, 5.0f, -5.0f};
    float y[B] = {0, 1, 0, 1, 1, 0, 1, 0, 1, 0, 1, 1};
    const float gs = 0.125f;
    float *pz = TO(d, z, B), *py = TO(d, y, B), *pl = dput(d, NULL, sizeof z), *pdz = dput(d, NULL, sizeof z);
    double *psc = dput(d, NULL, 2 * sizeof(double));
    plumb_err e = {0};
    REQUIRE(d->ops->train->bce_logits(d, NULL, pz, py, B, NV, gs, pl, psc, pdz, &e) == 0);
    float l[B], dz[B];
    double sc[2];
    dget(d, l, pl, sizeof l);
    dget(d, dz, pdz, sizeof dz);
    dget(d, sc, psc, sizeof sc);
    double sum = 0;
    for (int b = 0; b < NV; b++) {
        double ref = bce_ref(z[b], y[b]);
        CHECK_MSG(rel_err(l[b], ref) < 1e-6, "bce z=%g y=%g: %.9g vs %.9g", z[b], y[b], l[b], ref);
        sum += l[b];
        const double h = 1e-6;
        double fd = gs * (bce_ref(z[b] + h, y[b]) - bce_ref(z[b] - h, y[b])) / (2 * h);
        CHECK_MSG(fabs(dz[b] - fd) < 1e-6, "bce grad z=%g: %g vs fd %g", z[b], dz[b], fd);
    }
    for (int b = NV; b < B; b++) CHECK(l[b] == 0 && dz[b] == 0);
    CHECK_NEAR(sc[0], sum, 1e-9);
    CHECK(sc[1] == NV);
    /* the stable form: large logits give finite losses equal to |z| */
    CHECK_NEAR(l[8], 60.0, 1e-5);
    CHECK_NEAR(l[9], 80.0, 1e-5);
    dev_free(d, pz); dev_free(d, py); dev_free(d, pl); dev_free(d, pdz); dev_free(d, psc);
    dev_close(d);
}
TEST(train_ops_bce_fd_fast) { check_bce(NUMERICS_FAST); }
TEST(train_ops_bce_fd_golden) { check_bce(NUMERICS_GOLDEN); }

/* The golden exp/log1p/sigmoid are within 1 ulp-ish of the float64 truth. */
TEST(train_ops_golden_math_accuracy)
{
    double worst_e = 0, worst_l = 0, worst_s = 0;
    for (int i = 0; i < 200000; i++) {
        float x = (float)(-100.0 + 188.0 * (i / 200000.0));
        double t = exp((double)x);
        if (t > 1e-37 && t < 3e38) worst_e = fmax(worst_e, fabs(tm_expf(x) - t) / t);
        float u = (float)(-0.999 + 50.0 * (i / 200000.0));
        double lt = log1p((double)u);
        if (fabs(lt) > 1e-30) worst_l = fmax(worst_l, fabs(tm_log1pf(u) - lt) / fabs(lt));
        double st = 1.0 / (1.0 + exp(-(double)x));
        if (st > 1e-30) worst_s = fmax(worst_s, fabs(tm_sigmoidf(x) - st) / st);
    }
    CHECK_MSG(worst_e < 1.2e-7, "exp rel err %g", worst_e);
    CHECK_MSG(worst_l < 1.2e-7, "log1p rel err %g", worst_l);
    CHECK_MSG(worst_s < 3e-7, "sigmoid rel err %g", worst_s);
    CHECK(tm_log1pf(1e-30f) == 1e-30f);
    CHECK(tm_expf(0.0f) == 1.0f);
    CHECK(isinf(tm_expf(100.0f)) && tm_expf(-200.0f) == 0.0f);
}

/* ================= optimizers ================= */

TEST(train_ops_sgd_dense_and_sparse)
{
    OPEN(d, NUMERICS_FAST, 0);
    enum { n = 10, D = 4, R = 6 };
    float w[n], g[n], w0[n];
    fill(w, n, -1, 1);
    fill(g, n, -1, 1);
    memcpy(w0, w, sizeof w);
    float *pw = TO(d, w, n), *pg = TO(d, g, n);
    plumb_err e = {0};
    REQUIRE(d->ops->train->sgd(d, NULL, pw, pg, n, 0.1f, 0.0f, &e) == 0);
    dget(d, w, pw, sizeof w);
    for (int i = 0; i < n; i++) CHECK(w[i] == fmaf(-0.1f, g[i], w0[i]));
    memcpy(w, w0, sizeof w);
    dev_upload(d, pw, w, sizeof w, &e);
    REQUIRE(d->ops->train->sgd(d, NULL, pw, pg, n, 0.1f, 0.01f, &e) == 0);
    dget(d, w, pw, sizeof w);
    for (int i = 0; i < n; i++) CHECK_NEAR(w[i], w0[i] - 0.1 * (g[i] + 0.01 * w0[i]), 1e-7);
    /* sparse: only rows 1 and 4 move */
    float tab[R * D], tab0[R * D], gr[2 * D];
    fill(tab, R * D, -1, 1);
    fill(gr, 2 * D, -1, 1);
    memcpy(tab0, tab, sizeof tab);
    int64_t rows[2] = {4, 1};
    float *pt = TO(d, tab, R * D), *pgr = TO(d, gr, 2 * D);
    int64_t *pr = TO(d, rows, 2);
    REQUIRE(d->ops->train->sgd_sparse(d, NULL, pt, pr, pgr, 2, D, 0.5f, &e) == 0);
    dget(d, tab, pt, sizeof tab);
    for (int r = 0; r < R; r++)
        for (int k = 0; k < D; k++) {
            int u = r == 4 ? 0 : r == 1 ? 1 : -1;
            float want = u < 0 ? tab0[r * D + k] : fmaf(-0.5f, gr[u * D + k], tab0[r * D + k]);
            CHECK(tab[r * D + k] == want);
        }
    dev_free(d, pw); dev_free(d, pg); dev_free(d, pt); dev_free(d, pgr); dev_free(d, pr);
    dev_close(d);
}

/* AdamW over 5 steps against the float64 PyTorch formula. */
TEST(train_ops_adamw_matches_reference)
{
    OPEN(d, NUMERICS_FAST, 0);
    enum { n = 16 };
    float w[n], m[n] = {0}, v[n] = {0}, g[n];
    double wr[n], mr[n] = {0}, vr[n] = {0};
    fill(w, n, -1, 1);
    for (int i = 0; i < n; i++) wr[i] = w[i];
    float *pw = TO(d, w, n), *pm = TO(d, m, n), *pv = TO(d, v, n), *pg = dput(d, NULL, sizeof g);
    const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1;
    plumb_err e = {0};
    for (int t = 1; t <= 5; t++) {
        fill(g, n, -1, 1);
        dev_upload(d, pg, g, sizeof g, &e);
        double bc1 = 1 - pow(b1, t), bc2 = 1 - pow(b2, t);
        REQUIRE(d->ops->train->adamw(d, NULL, pw, pg, pm, pv, n, (float)lr, (float)b1, (float)b2,
                                     (float)eps, (float)wd, (float)bc1, (float)bc2, &e) == 0);
        for (int i = 0; i < n; i++) {
            wr[i] -= lr * wd * wr[i];
            mr[i] = b1 * mr[i] + (1 - b1) * g[i];
            vr[i] = b2 * vr[i] + (1 - b2) * (double)g[i] * g[i];
            wr[i] -= lr * (mr[i] / bc1) / (sqrt(vr[i] / bc2) + eps);
        }
    }
    dget(d, w, pw, sizeof w);
    for (int i = 0; i < n; i++) CHECK_NEAR(w[i], wr[i], 2e-6);
    CHECK(d->ops->train->adamw(d, NULL, pw, pg, pm, pv, n, 0.1f, 0.9f, 0.999f, 1e-8f, 0, 0.0f, 1.0f, &e) == PLUMB_EUSAGE);
    dev_free(d, pw); dev_free(d, pm); dev_free(d, pv); dev_free(d, pg);
    dev_close(d);
}

/* ================= utilities ================= */

TEST(train_ops_sumsq_scale_check_round)
{
    OPEN(d, NUMERICS_FAST, 0);
    enum { n = 5000 };
    float x[n];
    fill(x, n, -2, 2);
    double ref = 0;
    for (int i = 0; i < n; i++) ref += (double)x[i] * x[i];
    float *px = TO(d, x, n);
    double *ps = dput(d, NULL, sizeof(double));
    int *pinf = dput(d, NULL, sizeof(int));
    plumb_err e = {0};
    REQUIRE(d->ops->train->sumsq(d, NULL, px, n, ps, &e) == 0);
    double s;
    dget(d, &s, ps, sizeof s);
    CHECK_NEAR(s, ref, 1e-9 * ref);
    REQUIRE(d->ops->train->scale_check(d, NULL, px, n, 0.5f, pinf, &e) == 0);
    int inf;
    dget(d, &inf, pinf, sizeof inf);
    CHECK(inf == 0);
    float y[n];
    dget(d, y, px, sizeof y);
    for (int i = 0; i < n; i++) CHECK(y[i] == x[i] * 0.5f);
    x[1234] = INFINITY;
    dev_upload(d, px, x, sizeof x, &e);
    REQUIRE(d->ops->train->scale_check(d, NULL, px, n, 0.5f, pinf, &e) == 0);
    dget(d, &inf, pinf, sizeof inf);
    CHECK(inf == 1);
    /* rounding: ties to even; fp16 overflow to inf */
    float r[4] = {1.0f + 0.00390625f, 1.0f + 3 * 0.00390625f, 70000.0f, -1.0f / 3.0f};
    float *pr = TO(d, r, 4), *po = dput(d, NULL, sizeof r);
    float o[4];
    REQUIRE(d->ops->train->round_fp32(d, NULL, pr, po, 4, DT_BF16, &e) == 0);
    dget(d, o, po, sizeof o);
    CHECK(o[0] == 1.0f);
    CHECK(o[1] == 1.015625f);
    CHECK(o[3] == bf16_to_f32(f32_to_bf16(-1.0f / 3.0f)));
    REQUIRE(d->ops->train->round_fp32(d, NULL, pr, po, 4, DT_F16, &e) == 0);
    dget(d, o, po, sizeof o);
    CHECK(isinf(o[2]));
    CHECK(d->ops->train->round_fp32(d, NULL, pr, po, 4, DT_I32, &e) == PLUMB_EUSAGE);
    dev_free(d, px); dev_free(d, ps); dev_free(d, pinf); dev_free(d, pr); dev_free(d, po);
    dev_close(d);
}

/* sumsq's two orders (src/dev/train_ops.h), bit for bit against the
 * definition written here: 301 blocks of 1024 (the last short), so the fast
 * order has three groups of block sums; out starts non-zero. The data's
 * magnitudes vary so that the orders round differently, which is checked
 * too (else the test could not tell a golden sum from a fast one). */
static void sumsq_order_case(enum numerics mode)
{
    OPEN(d, mode, 0);
    enum { BLK = 1024, NB = 301, N = (NB - 1) * BLK + 77 };
    float *x = malloc(N * sizeof *x);
    REQUIRE(x);
    /* its own generator: the data, so whether it tells the orders apart,
     * must not depend on which tests ran before; every seventh block large */
    uint32_t st = 2463534242u;
    for (int i = 0; i < N; i++) {
        st ^= st << 13, st ^= st >> 17, st ^= st << 5;
        x[i] = ((float)(st >> 8) / 16777216.0f - 0.5f) * ((i / BLK) % 7 == 0 ? 3e3f : 1e-2f);
    }
    double part[NB], seq = 0.5, grp = 0.5;
    for (int b = 0; b < NB; b++) {
        double acc = 0.0;
        for (int i = b * BLK; i < (b + 1) * BLK && i < N; i++) acc += (double)x[i] * (double)x[i];
        part[b] = acc;
        seq += acc;
    }
    for (int g = 0; g < NB; g += TRAIN_SUMSQ_GROUP) {
        double acc = 0.0;
        for (int b = g; b < g + TRAIN_SUMSQ_GROUP && b < NB; b++) acc += part[b];
        grp += acc;
    }
    CHECK_MSG(memcmp(&seq, &grp, sizeof seq), "the data does not tell the orders apart (%.17g)", seq);
    float *px = TO(d, x, N);
    double h = 0.5, *ps = TO(d, &h, 1);
    plumb_err e = {0};
    REQUIRE(d->ops->train->sumsq(d, NULL, px, N, ps, &e) == 0);
    double got, want = mode == NUMERICS_GOLDEN ? seq : grp;
    dget(d, &got, ps, sizeof got);
    CHECK_MSG(!memcmp(&got, &want, sizeof got), "%s sumsq %.17g, the definition %.17g",
              mode == NUMERICS_GOLDEN ? "golden" : "fast", got, want);
    dev_free(d, px); dev_free(d, ps);
    free(x);
    dev_close(d);
}
TEST(train_ops_sumsq_golden_order) { sumsq_order_case(NUMERICS_GOLDEN); }
TEST(train_ops_sumsq_fast_order) { sumsq_order_case(NUMERICS_FAST); }

/* The ops with the count on the device (the queued step): the bits of the
 * plain op called with n = U, a stale tail past U untouched and unread,
 * and the gate. */
TEST(train_ops_device_count_and_gate)
{
    OPEN(d, NUMERICS_FAST, 0);
    const struct train_ops *T = d->ops->train;
    REQUIRE(T->sumsq_dn && T->scale_check_dn && T->sgd_sparse_dn && T->sgd_gated);
    enum { R = 40, D = 8, NMAX = 30, U = 17 };
    float tab[R * D], tab2[R * D], g[NMAX * D];
    int64_t rows[NMAX];
    fill(tab, R * D, -1, 1);
    fill(g, NMAX * D, -3, 3);
    for (int u = 0; u < NMAX; u++) rows[u] = (u * 7) % R; /* distinct rows */
    for (int k = U * D; k < NMAX * D; k++) g[k] = NAN;  /* garbage past U: never read */
    memcpy(tab2, tab, sizeof tab);
    int64_t un = U, big = 1000;
    float *pt = TO(d, tab, R * D), *pt2 = TO(d, tab2, R * D), *pg = TO(d, g, NMAX * D);
    int64_t *pr = TO(d, rows, NMAX), *pu = TO(d, &un, 1), *pbig = TO(d, &big, 1);
    double z = 0.25, *ps = TO(d, &z, 1), *ps2 = TO(d, &z, 1);
    int zero = 0, one = 1, *pf = TO(d, &zero, 1), *pf2 = TO(d, &zero, 1), *pone = TO(d, &one, 1);
    plumb_err e = {0};
    REQUIRE(T->sumsq_dn(d, NULL, pg, pu, D, NMAX, ps, &e) == 0);
    REQUIRE(T->sumsq(d, NULL, pg, (size_t)U * D, ps2, &e) == 0);
    double a, b;
    dget(d, &a, ps, sizeof a);
    dget(d, &b, ps2, sizeof b);
    CHECK_MSG(!memcmp(&a, &b, sizeof a), "sumsq_dn %.17g vs sumsq %.17g", a, b);
    REQUIRE(T->scale_check_dn(d, NULL, pg, pu, D, NMAX, 1.0f, pf, &e) == 0);
    int f;
    dget(d, &f, pf, sizeof f);
    CHECK_MSG(f == 0, "scale_check_dn read past U");
    REQUIRE(T->scale_check_dn(d, NULL, pg, pbig, D, NMAX, 1.0f, pf2, &e) == 0); /* clamped to NMAX: sees the tail */
    dget(d, &f, pf2, sizeof f);
    CHECK(f == 1);
    REQUIRE(T->sgd_sparse_dn(d, NULL, pt, pr, pg, pu, NMAX, D, 0.5f, NULL, &e) == 0);
    REQUIRE(T->sgd_sparse(d, NULL, pt2, pr, pg, U, D, 0.5f, &e) == 0);
    float h1[R * D], h2[R * D];
    dget(d, h1, pt, sizeof h1);
    dget(d, h2, pt2, sizeof h2);
    CHECK(!memcmp(h1, h2, sizeof h1));
    /* gated: nothing written */
    REQUIRE(T->sgd_sparse_dn(d, NULL, pt, pr, pg, pu, NMAX, D, 0.5f, pone, &e) == 0);
    REQUIRE(T->sgd_gated(d, NULL, pt, pt2, R * D, 0.5f, 0.1f, pone, &e) == 0);
    dget(d, h1, pt, sizeof h1);
    CHECK(!memcmp(h1, h2, sizeof h1));
    REQUIRE(T->sgd_gated(d, NULL, pt, pt2, R * D, 0.5f, 0.1f, pf, &e) == 0); /* flag 0: the plain sgd */
    REQUIRE(T->sgd(d, NULL, pt2, pt2, R * D, 0.5f, 0.1f, &e) == 0);
    for (int i = 0; i < R * D; i++) h2[i] = fmaf(-0.5f, fmaf(0.1f, h2[i], h2[i]), h2[i]);
    dget(d, h1, pt, sizeof h1);
    CHECK(!memcmp(h1, h2, sizeof h1));
    void *all[] = {pt, pt2, pg, pr, pu, pbig, ps, ps2, pf, pf2, pone};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dev_free(d, all[i]);
    dev_close(d);
}

/* The queued step's outcome to the host in one device-side write
 * (train_ops.h status_to_host): into pinned memory from host_alloc, read
 * after an event behind it as the trainer reads it, the same bytes as the
 * two regions; its preconditions refused with a message. */
TEST(train_ops_status_to_host)
{
    OPEN(d, NUMERICS_FAST, 0);
    const struct train_ops *T = d->ops->train;
    if (!T->status_to_host) {
        dev_close(d);
        TEST_SKIP("device %s has no status_to_host (the trainer copies twice)", test_device());
    }
    double loss[2] = {12345.678901234567, 32768.0};
    unsigned char blk[24];
    for (int i = 0; i < 24; i++) blk[i] = (unsigned char)(0xA5 ^ (i * 37));
    double *pl = TO(d, loss, 2);
    unsigned char *pb = TO(d, blk, 24);
    unsigned char *host = NULL;
    plumb_err e = {0};
    REQUIRE(d->be->host_alloc(d, 64, (void **)&host, &e) == 0);
    memset(host, 0x5A, 64);
    dev_event *ev = NULL;
    REQUIRE(d->be->event_create(d, &ev, &e) == 0);
    REQUIRE(T->status_to_host(d, NULL, host, pl, sizeof loss, pb, sizeof blk, &e) == 0);
    REQUIRE(d->be->event_record(d, ev, NULL, &e) == 0);
    REQUIRE(d->be->event_sync(d, ev, &e) == 0);
    CHECK_MSG(!memcmp(host, loss, sizeof loss), "the loss pair differs");
    CHECK_MSG(!memcmp(host + sizeof loss, blk, sizeof blk), "the status block differs");
    int tail = 1;
    for (int i = (int)(sizeof loss + sizeof blk); i < 64; i++) tail &= host[i] == 0x5A;
    CHECK_MSG(tail, "bytes past the two regions written");
    /* an address off 8, a size not a multiple of 8, more than 256 bytes: refused, named */
    CHECK(T->status_to_host(d, NULL, host + 4, pl, 16, pb, 24, &e) == PLUMB_EUSAGE && strstr(e.msg, "aligned"));
    CHECK(T->status_to_host(d, NULL, host, pl, 12, pb, 24, &e) == PLUMB_EUSAGE && strstr(e.msg, "multiples of 8"));
    CHECK(T->status_to_host(d, NULL, host, pl, 16, pb, 248, &e) == PLUMB_EUSAGE && strstr(e.msg, "at most 256"));
    d->be->event_destroy(d, ev);
    d->be->host_free(d, host);
    dev_free(d, pl), dev_free(d, pb);
    dev_close(d);
}

/* The found-inf flag off the norm (train_ops.h found_of_sumsq) against
 * scale_check's flag at mul = 1, over the values that decide it: one +inf,
 * -inf or NaN (quiet, and one with a payload) anywhere among finite values;
 * the largest finite values (squares near 2^256, 5000 of them still a
 * finite double); subnormals and zeros. A finite total leaves a set flag
 * set; NULL arguments are refused. In both modes (the sums' orders differ,
 * the flag must not). */
TEST(train_ops_found_of_sumsq_is_scale_checks_flag)
{
    for (int mode = 0; mode < 2; mode++) {
        OPEN(d, mode ? NUMERICS_GOLDEN : NUMERICS_FAST, 0);
        const struct train_ops *T = d->ops->train;
        if (!T->found_of_sumsq) {
            dev_close(d);
            TEST_SKIP("device %s has no found_of_sumsq (the trainer runs scale_check)", test_device());
        }
        enum { n = 5000 };
        static float x[n];
        const float odd[] = {INFINITY, -INFINITY, NAN, -NAN, FLT_MAX, -FLT_MAX, FLT_MIN / 8, 0.0f};
        float *px = dput(d, NULL, sizeof x);
        double *ps = dput(d, NULL, sizeof(double));
        int *pa = dput(d, NULL, sizeof(int)), *pb = dput(d, NULL, sizeof(int));
        plumb_err e = {0};
        int cases = 0, agree = 0;
        for (size_t k = 0; k < sizeof odd / sizeof odd[0]; k++)
            for (int where = 0; where < 3; where++) {
                fill(x, n, -3, 3);
                const int at = where == 0 ? 0 : where == 1 ? n / 2 + 1 : n - 1;
                if (isfinite(odd[k]) && fabsf(odd[k]) > 1.0f)
                    for (int i = 0; i < n; i++) x[i] = odd[k]; /* all of them huge */
                x[at] = odd[k];
                if (k == 3) { /* a NaN with a payload */
                    uint32_t u = 0x7fc0beefu;
                    memcpy(&x[at], &u, 4);
                }
                const int zero = 0;
                double dz = 0.0;
                dev_upload(d, px, x, sizeof x, &e);
                dev_upload(d, pa, &zero, sizeof zero, &e);
                dev_upload(d, pb, &zero, sizeof zero, &e);
                dev_upload(d, ps, &dz, sizeof dz, &e);
                REQUIRE(T->scale_check(d, NULL, px, n, 1.0f, pa, &e) == 0);
                REQUIRE(T->sumsq(d, NULL, px, n, ps, &e) == 0);
                REQUIRE(T->found_of_sumsq(d, NULL, ps, pb, &e) == 0);
                int fa, fb;
                dget(d, &fa, pa, sizeof fa);
                dget(d, &fb, pb, sizeof fb);
                cases++;
                agree += fa == fb && fa == !isfinite(odd[k]);
                CHECK_MSG(fa == fb && fa == !isfinite(odd[k]), "mode %d value %g at %d: scale_check %d, of the norm %d",
                          mode, (double)odd[k], at, fa, fb);
            }
        CHECK(agree == cases);
        /* a finite total leaves a set flag as it was */
        const int one = 1;
        const double fin = 12.5;
        dev_upload(d, pb, &one, sizeof one, &e);
        dev_upload(d, ps, &fin, sizeof fin, &e);
        REQUIRE(T->found_of_sumsq(d, NULL, ps, pb, &e) == 0);
        int fb;
        dget(d, &fb, pb, sizeof fb);
        CHECK_MSG(fb == 1, "a finite total cleared the flag");
        CHECK(T->found_of_sumsq(d, NULL, NULL, pb, &e) == PLUMB_EUSAGE && strstr(e.msg, "found_of_sumsq"));
        CHECK(T->found_of_sumsq(d, NULL, ps, NULL, &e) == PLUMB_EUSAGE && strstr(e.msg, "NULL"));
        dev_free(d, px), dev_free(d, ps), dev_free(d, pa), dev_free(d, pb);
        dev_close(d);
    }
}

/* bf16 storage: outputs are exactly representable in bf16 and equal the
 * rounded fp32 results. */
TEST(train_ops_bf16_outputs_are_rounded)
{
    OPEN(d, NUMERICS_GOLDEN, 0);
    enum { B = 4, K = 6, N = 5 };
    float x[B * K], w[N * K], y32[B * N], y16[B * N];
    fill(x, B * K, -1, 1);
    fill(w, N * K, -1, 1);
    float *px = TO(d, x, B * K), *pw = TO(d, w, N * K), *py = dput(d, NULL, sizeof y32);
    plumb_err e = {0};
    REQUIRE(d->ops->train->linear_fwd(d, NULL, px, pw, NULL, py, B, K, N, 0, DT_F32, &e) == 0);
    dget(d, y32, py, sizeof y32);
    REQUIRE(d->ops->train->linear_fwd(d, NULL, px, pw, NULL, py, B, K, N, 0, DT_BF16, &e) == 0);
    dget(d, y16, py, sizeof y16);
    for (int i = 0; i < B * N; i++) {
        CHECK(y16[i] == bf16_to_f32(f32_to_bf16(y32[i])));
        CHECK((f32_bits(y16[i]) & 0xffffu) == 0);
    }
    dev_free(d, px); dev_free(d, pw); dev_free(d, py);
    dev_close(d);
}

/* ================= golden: independent of the thread count ================= */

struct golden_out {
    float y[64 * 40], dx[64 * 37], dw[40 * 37], db[40], io[64 * (8 + 15)], gb[64 * 8], ge[64 * 5 * 8];
    float eg[64 * 5 * 8];
    int64_t er[64 * 5], en;
};

static int golden_run(int threads, struct golden_out *o)
{
    enum { B = 64, K = 37, N = 40, T = 5, D = 8, W = D + 15 };
    struct dev *d = open_dev(NUMERICS_GOLDEN, threads);
    if (!d) return -1;
    rng_state = 12345;
    static float x[B * K], w[N * K], bias[N], dy[B * N], bot[B * D], emb[B * T * D], dout[B * W];
    fill(x, B * K, -1, 1);
    fill(w, N * K, -1, 1);
    fill(bias, N, -1, 1);
    fill(dy, B * N, -1, 1);
    fill(bot, B * D, -1, 1);
    fill(emb, B * T * D, -1, 1);
    fill(dout, B * W, -1, 1);
    uint32_t idx[B * T];
    for (int i = 0; i < B * T; i++) idx[i] = (uint32_t)(urand() * 7);
    int64_t off[T] = {0, 7, 14, 21, 28};
    plumb_err e = {0};
    const struct train_ops *Tp = d->ops->train;
    float *px = TO(d, x, B * K), *pw = TO(d, w, N * K), *pb = TO(d, bias, N), *pdy = TO(d, dy, B * N);
    float *py = dput(d, NULL, sizeof o->y), *pdx = dput(d, NULL, sizeof o->dx);
    float *pdw = dput(d, NULL, sizeof o->dw), *pdb = dput(d, NULL, sizeof o->db);
    float *pbot = TO(d, bot, B * D), *pemb = TO(d, emb, B * T * D), *pdo = TO(d, dout, B * W);
    float *pio = dput(d, NULL, sizeof o->io), *pgb = dput(d, NULL, sizeof o->gb), *pge = dput(d, NULL, sizeof o->ge);
    int64_t *poff = TO(d, off, T), *per = dput(d, NULL, sizeof o->er), *pen = dput(d, NULL, 8);
    uint32_t *pidx = TO(d, idx, B * T);
    float *peg = dput(d, NULL, sizeof o->eg);
    int rc = Tp->linear_fwd(d, NULL, px, pw, pb, py, B, K, N, 1, DT_F32, &e) ||
             Tp->linear_bwd(d, NULL, px, pw, py, pdy, pdx, pdw, pdb, B, K, N, 1, DT_F32, &e) ||
             Tp->interact_fwd(d, NULL, pbot, pemb, pio, B, T, D, DT_F32, &e) ||
             Tp->interact_bwd(d, NULL, pbot, pemb, pdo, pgb, pge, B, T, D, DT_F32, &e) ||
             Tp->embedding_bwd(d, NULL, poff, pidx, pemb, B, B, T, D, per, peg, pen, &e);
    dget(d, o->y, py, sizeof o->y);
    dget(d, o->dx, pdx, sizeof o->dx);
    dget(d, o->dw, pdw, sizeof o->dw);
    dget(d, o->db, pdb, sizeof o->db);
    dget(d, o->io, pio, sizeof o->io);
    dget(d, o->gb, pgb, sizeof o->gb);
    dget(d, o->ge, pge, sizeof o->ge);
    dget(d, &o->en, pen, 8);
    dget(d, o->er, per, sizeof o->er);
    dget(d, o->eg, peg, sizeof o->eg);
    void *ps[] = {px, pw, pb, pdy, py, pdx, pdw, pdb, pbot, pemb, pdo, pio, pgb, pge, poff, per, pen, pidx, peg};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) dev_free(d, ps[i]);
    dev_close(d);
    return rc;
}

TEST(train_ops_golden_thread_count_independent)
{
    static struct golden_out a, b, c;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    memset(&c, 0, sizeof c);
    cpu_train_par_scale = 0.0; /* every op splits its work, however small */
    int ra = golden_run(1, &a);
    int rb = golden_run(2, &b), rc = golden_run(3, &c);
    cpu_train_par_scale = 1.0;
    if (ra < 0) TEST_SKIP("device %s has no training ops", test_device());
    REQUIRE(ra == 0);
    REQUIRE(rb == 0);
    REQUIRE(rc == 0);
    CHECK(a.en > 0 && a.en <= 35);
    CHECK(memcmp(&a, &b, sizeof a) == 0);
    CHECK(memcmp(&a, &c, sizeof a) == 0);
}

/* Golden interaction: each dot and each gradient is the documented fmaf chain. */
TEST(train_ops_interact_golden_exact_order)
{
    OPEN(d, NUMERICS_GOLDEN, 0);
    enum { B = 3, T = 26, D = 16, F = T + 1, W = D + F * (F - 1) / 2 };
    static float bot[B * D], emb[B * T * D], g[B * W], out[B * W], gb[B * D], ge[B * T * D];
    fill(bot, B * D, -2, 2);
    fill(emb, B * T * D, -2, 2);
    fill(g, B * W, -1, 1);
    float *pb = TO(d, bot, B * D), *pe = TO(d, emb, B * T * D), *pg = TO(d, g, B * W);
    float *po = dput(d, NULL, sizeof out), *pgb = dput(d, NULL, sizeof gb), *pge = dput(d, NULL, sizeof ge);
    plumb_err e = {0};
    REQUIRE(d->ops->train->interact_fwd(d, NULL, pb, pe, po, B, T, D, DT_F32, &e) == 0);
    REQUIRE(d->ops->train->interact_bwd(d, NULL, pb, pe, pg, pgb, pge, B, T, D, DT_F32, &e) == 0);
    dget(d, out, po, sizeof out);
    dget(d, gb, pgb, sizeof gb);
    dget(d, ge, pge, sizeof ge);
    int bad = 0;
    for (int b = 0; b < B; b++) {
        const float *z[F];
        z[0] = bot + b * D;
        for (int t = 0; t < T; t++) z[t + 1] = emb + (b * T + t) * D;
        int p = D;
        float G[F][F];
        for (int i = 1; i < F; i++)
            for (int j = 0; j < i; j++, p++) {
                float acc = 0;
                for (int k = 0; k < D; k++) acc = fmaf(z[i][k], z[j][k], acc);
                bad += f32_bits(acc) != f32_bits(out[b * W + p]);
                G[i][j] = G[j][i] = g[b * W + p];
            }
        for (int i = 0; i < F; i++)
            for (int k = 0; k < D; k++) {
                float acc = i == 0 ? g[b * W + k] : 0.0f;
                for (int j = 0; j < F; j++)
                    if (j != i) acc = fmaf(G[i][j], z[j][k], acc);
                float got = i == 0 ? gb[b * D + k] : ge[(b * T + i - 1) * D + k];
                bad += f32_bits(acc) != f32_bits(got);
            }
    }
    CHECK_EQ_INT(bad, 0);
    dev_free(d, pb); dev_free(d, pe); dev_free(d, pg); dev_free(d, po); dev_free(d, pgb); dev_free(d, pge);
    dev_close(d);
}

/* ================= optional ops: fused and 16-bit mirrors ================= */

static uint16_t to16(float v, dtype_t rt) { return rt == DT_BF16 ? f32_to_bf16(v) : f32_to_f16(v); }
static float bf_to32(uint16_t h, dtype_t rt) { return rt == DT_BF16 ? bf16_to_f32(h) : f16_to_f32(h); }
static float round_bf(float v, dtype_t rt) { return rt == DT_BF16 ? bf16_to_f32(f32_to_bf16(v)) : f16_to_f32(f32_to_f16(v)); }

/* Each optional op of train_ops.h against the composition its definition
 * names, on the same device, bit for bit in both modes: linear_fwd16 /
 * linear_bwd16 with tensors given as their 16-bit mirrors alone (the padded
 * mirror has zeros after K, as train_ops.h says, which a GPU GEMM over the
 * padded width reads; dx16's padding is written as zeros),
 * the interaction's 16-bit output and gradient at a stride wider than the
 * row, the fused gather + interaction, and the fused sparse SGD. A device
 * without an op skips naming it. */
static void optional_ops_case(enum numerics mode, dtype_t rt, int B, int K, int N)
{
    OPEN(d, mode, 0);
    const struct train_ops *O = d->ops->train;
    if (!O->linear_fwd16 || !O->linear_bwd16 || !O->linear_bwd_relu_in || !O->embedding_interact_fwd ||
        !O->embedding_bwd_sgd || !O->embedding_interact_fwd16 || !O->interact_bwd16 || !O->sparse_put_dn) {
        dev_close(d);
        TEST_SKIP("%s lacks an optional train op", d->label);
    }
    plumb_err e = {0};
    const int Kp = (K + 7) / 8 * 8;
    const size_t BK = (size_t)B * K, BN = (size_t)B * N, NK = (size_t)N * K, BKp = (size_t)B * Kp;
    float *x = malloc(BK * 4), *w = malloc(NK * 4), *bias = malloc(N * 4), *dy = malloc(BN * 4);
    fill(x, BK, -1, 1);
    fill(w, NK, -0.5, 0.5);
    fill(bias, N, -0.3, 0.3);
    fill(dy, BN, -1, 1);
    for (size_t i = 0; i < BK; i++) x[i] = round_bf(x[i] > 0 ? x[i] : 0, rt); /* a ReLU output, stored in rt */
    for (size_t i = 0; i < NK; i++) w[i] = round_bf(w[i], rt);
    for (int i = 0; i < N; i++) bias[i] = round_bf(bias[i], rt);
    for (size_t i = 0; i < BN; i++) dy[i] = i % 5 == 0 ? 0.0f : round_bf(dy[i], rt); /* arrives masked */
    uint16_t *x16 = malloc(BKp * 2), *dy16 = malloc(BN * 2);
    for (int b = 0; b < B; b++)
        for (int k = 0; k < Kp; k++) x16[(size_t)b * Kp + k] = k < K ? to16(x[(size_t)b * K + k], rt) : 0;
    for (size_t i = 0; i < BN; i++) dy16[i] = to16(dy[i], rt);
    float *px = TO(d, x, BK), *pw = TO(d, w, NK), *pb = TO(d, bias, N), *pdy = TO(d, dy, BN);
    uint16_t *px16 = TO(d, x16, BKp), *pdy16 = TO(d, dy16, BN);
    float *py = dput(d, NULL, BN * 4), *pdx = dput(d, NULL, BK * 4), *pdw1 = dput(d, NULL, NK * 4);
    float *pdw2 = dput(d, NULL, NK * 4), *pbx1 = dput(d, NULL, K * 4), *pbx2 = dput(d, NULL, K * 4);
    uint16_t *py16 = dput(d, NULL, BN * 2), *pdx16 = dput(d, NULL, BKp * 2), *pfill = dput(d, NULL, BKp * 2);
    REQUIRE(px && pw && pb && pdy && px16 && pdy16 && py && pdx && pdw1 && pdw2 && pbx1 && pbx2 && py16 && pdx16 && pfill);
    {
        /* dx16's padding columns must be written as zeros: junk there first */
        uint16_t *junk = malloc(BKp * 2);
        for (size_t i = 0; i < BKp; i++) junk[i] = 0x7f7f;
        dev_upload(d, pdx16, junk, BKp * 2, &e);
        free(junk);
    }
    /* the fp32 ops */
    REQUIRE(O->linear_fwd(d, NULL, px, pw, pb, py, B, K, N, 1, rt, &e) == 0);
    REQUIRE(O->linear_bwd_relu_in(d, NULL, px, pw, NULL, pdy, pdx, pdw1, NULL, B, K, N, 0, rt, pbx1, &e) == 0);
    /* mirror only: x as its padded mirror (NaN after K), y16 alone; dy16 alone, dx16 alone */
    REQUIRE(O->linear_fwd16(d, NULL, NULL, px16, pw, NULL, pb, NULL, py16, B, K, N, 1, rt, &e) == 0);
    REQUIRE(O->linear_bwd16(d, NULL, NULL, px16, pw, NULL, NULL, NULL, pdy16, NULL, pdx16, pdw2, NULL, B, K, N, 0, rt, 1,
                            pbx2, &e) == 0);
    /* x given in fp32 with a padded mirror to fill (K % 8 != 0; else x16 is
     * the caller's mirror, read, so it gets x's) */
    {
        uint16_t *junk = malloc(BKp * 2);
        for (size_t i = 0; i < BKp; i++) junk[i] = 0x7f7f;
        dev_upload(d, pfill, K % 8 ? junk : x16, BKp * 2, &e);
        free(junk);
    }
    REQUIRE(O->linear_fwd16(d, NULL, px, pfill, pw, NULL, pb, py, NULL, B, K, N, 1, rt, &e) == 0);
    float *y = malloc(BN * 4), *dx = malloc(BK * 4), *dw1 = malloc(NK * 4), *dw2 = malloc(NK * 4), *bx1 = malloc(K * 4),
          *bx2 = malloc(K * 4);
    uint16_t *y16 = malloc(BN * 2), *dx16 = malloc(BKp * 2), *fl = malloc(BKp * 2);
    dget(d, y, py, BN * 4), dget(d, dx, pdx, BK * 4), dget(d, dw1, pdw1, NK * 4), dget(d, dw2, pdw2, NK * 4);
    dget(d, bx1, pbx1, K * 4), dget(d, bx2, pbx2, K * 4), dget(d, y16, py16, BN * 2), dget(d, dx16, pdx16, BKp * 2);
    dget(d, fl, pfill, BKp * 2);
    /* golden: the same bits. fast: the 16-bit GEMM may sum in another order
     * than the fp32 one (train_ops.h), on rt-rounded operands whose products
     * are exact in fp32, so two results differ by at most 2 gamma_n S (S the
     * sum of |terms|, gamma_n = n u / (1 - n u), u = 2^-24), and a 16-bit
     * result by half an rt ulp more for its own rounding (ReLU and the mask
     * are 1-Lipschitz). */
    const int fast = mode == NUMERICS_FAST;
    double *Sy = calloc(BN, sizeof(double)), *Sdx = calloc(BK, sizeof(double)), *Sdw = calloc(NK, sizeof(double));
    for (int b = 0; b < B; b++)
        for (int n = 0; n < N; n++) {
            double sy = fabs(bias[n]);
            for (int k = 0; k < K; k++) {
                const double xw = fabs((double)x[(size_t)b * K + k] * w[(size_t)n * K + k]);
                sy += xw;
                Sdx[(size_t)b * K + k] += fabs((double)dy[(size_t)b * N + n] * w[(size_t)n * K + k]);
                Sdw[(size_t)n * K + k] += fabs((double)dy[(size_t)b * N + n] * x[(size_t)b * K + k]);
            }
            Sy[(size_t)b * N + n] = sy;
        }
    const double u = 0x1p-24, pbits = rt == DT_BF16 ? 8 : 11;
#define GAMMA(n) ((n) * u / (1 - (n) * u))
#define ULP16(v) (fmax(ldexp(1.0, (int)floor(log2(fmax(fabs(v), 1e-30))) + 1 - (int)pbits), rt == DT_F16 ? 0x1p-24 : 0))
#define NEAR16(h, ref, S, n) (fabs((double)bf_to32(h, rt) - (ref)) <= 2 * GAMMA(n) * (S) + 0.5 * ULP16(ref) + 0.5 * ULP16(bf_to32(h, rt)))
    size_t by = 0, bdx = 0, bpad = 0, bfill = 0, bdw = 0, bbx = 0;
    for (size_t i = 0; i < BN; i++)
        by += fast ? !NEAR16(y16[i], y[i], Sy[i], K) : y16[i] != to16(y[i], rt);
    for (int b = 0; b < B; b++)
        for (int k = 0; k < Kp; k++) {
            const size_t o = (size_t)b * Kp + k;
            if (k < K) {
                const size_t q = (size_t)b * K + k;
                bdx += fast ? !NEAR16(dx16[o], dx[q], Sdx[q], N) : dx16[o] != to16(dx[q], rt);
                bfill += fl[o] != x16[o];
            } else {
                bpad += dx16[o] != 0;
                bfill += fl[o] != 0;
            }
        }
    CHECK_MSG(by == 0, "linear_fwd16 y16: %zu of %zu differ from linear_fwd's y (%s)", by, BN, fast ? "beyond the bound" : "bits");
    CHECK_MSG(bdx == 0, "linear_bwd16 dx16: %zu of %zu differ from linear_bwd_relu_in's dx", bdx, BK);
    CHECK_MSG(bpad == 0, "linear_bwd16 dx16: %zu padding columns are not 0", bpad);
    CHECK_MSG(bfill == 0, "linear_fwd16: %zu elements of the padded x mirror it fills are wrong", bfill);
    if (fast) {
        for (size_t i = 0; i < NK; i++) bdw += fabs((double)dw1[i] - dw2[i]) > 2 * GAMMA(B) * Sdw[i];
        /* dbias_x: the column sums of the masked dx, each dx as bound above, plus their own order */
        for (int k = 0; k < K; k++) {
            double t = 0, a = 0;
            for (int b = 0; b < B; b++) t += 2 * GAMMA(N) * Sdx[(size_t)b * K + k], a += fabs(dx[(size_t)b * K + k]);
            bbx += fabs((double)bx1[k] - bx2[k]) > t + 2 * GAMMA(B) * (a + t);
        }
        CHECK_MSG(bdw == 0, "linear_bwd16 dw: %zu of %zu beyond 2 gamma_B sum|dy x| of linear_bwd_relu_in's", bdw, NK);
        CHECK_MSG(bbx == 0, "linear_bwd16 dbias_x: %zu of %d beyond the bound", bbx, K);
    } else {
        CHECK_MSG(!memcmp(dw1, dw2, NK * 4), "linear_bwd16 dw differs from linear_bwd_relu_in's");
        CHECK_MSG(!memcmp(bx1, bx2, K * 4), "linear_bwd16 dbias_x differs from linear_bwd_relu_in's");
    }
#undef NEAR16
#undef ULP16
#undef GAMMA
    free(Sy), free(Sdx), free(Sdw);
    /* a 16-bit op asked for fp32 is a usage error naming the types */
    CHECK(O->linear_fwd16(d, NULL, px, NULL, pw, NULL, pb, py, NULL, B, K, N, 1, DT_F32, &e) == PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "bf16 or fp16") != NULL, "message: %s", e.msg);

    /* the interaction: fused gather + interaction, its 16-bit output at a
     * wider stride, the backward from 16-bit gradients, the fused sparse SGD */
    enum { T = 26, RT = 40 };
    const int D = 8, F = T + 1, W = D + F * (F - 1) / 2, ld = W + 3;
    const size_t BW = (size_t)B * W, BTD = (size_t)B * T * D, R = (size_t)T * RT;
    int64_t off[T];
    for (int t = 0; t < T; t++) off[t] = (int64_t)t * RT;
    uint32_t *idx = malloc((size_t)B * T * 4);
    for (int i = 0; i < B * T; i++) idx[i] = (uint32_t)(urand() * 3) * (uint32_t)(i % 7 == 0 ? 0 : 1) + (uint32_t)(urand() * (RT - 3));
    float *table = malloc(R * D * 4), *bot = malloc((size_t)B * D * 4), *g = malloc(BW * 4);
    fill(table, R * D, -0.3, 0.3);
    fill(bot, (size_t)B * D, -1, 1);
    fill(g, BW, -1, 1);
    for (size_t i = 0; i < BW; i++) g[i] = round_bf(g[i], rt);
    uint16_t *g16 = malloc((size_t)B * ld * 2);
    for (int b = 0; b < B; b++)
        for (int q = 0; q < ld; q++) g16[(size_t)b * ld + q] = q < W ? to16(g[(size_t)b * W + q], rt) : 0xffff;
    float *ptab = TO(d, table, R * D), *pbot = TO(d, bot, (size_t)B * D), *pg = TO(d, g, BW);
    int64_t *poff = TO(d, off, T);
    uint32_t *pidx = TO(d, idx, (size_t)B * T);
    uint16_t *pg16 = TO(d, g16, (size_t)B * ld), *po16 = TO(d, g16, (size_t)B * ld);
    float *pe1 = dput(d, NULL, BTD * 4), *pe2 = dput(d, NULL, BTD * 4), *pe3 = dput(d, NULL, BTD * 4);
    float *po1 = dput(d, NULL, BW * 4), *po2 = dput(d, NULL, BW * 4);
    float *pgb1 = dput(d, NULL, (size_t)B * D * 4), *pgb2 = dput(d, NULL, (size_t)B * D * 4);
    float *pge1 = dput(d, NULL, BTD * 4), *pge2 = dput(d, NULL, BTD * 4);
    REQUIRE(ptab && pbot && pg && poff && pidx && pg16 && po16 && pe1 && pe2 && pe3 && po1 && po2 && pgb1 && pgb2 && pge1 &&
            pge2);
    REQUIRE(O->embedding_fwd(d, NULL, ptab, poff, pidx, pe1, B, T, D, rt, &e) == 0);
    REQUIRE(O->interact_fwd(d, NULL, pbot, pe1, po1, B, T, D, rt, &e) == 0);
    REQUIRE(O->embedding_interact_fwd(d, NULL, ptab, poff, pidx, pbot, pe2, po2, B, T, D, rt, &e) == 0);
    REQUIRE(O->embedding_interact_fwd16(d, NULL, ptab, poff, pidx, pbot, pe3, NULL, po16, ld, B, T, D, rt, &e) == 0);
    REQUIRE(O->interact_bwd(d, NULL, pbot, pe1, pg, pgb1, pge1, B, T, D, rt, &e) == 0);
    REQUIRE(O->interact_bwd16(d, NULL, pbot, pe1, pg16, ld, pgb2, pge2, B, T, D, rt, &e) == 0);
    float *e1 = malloc(BTD * 4), *e2 = malloc(BTD * 4), *o1 = malloc(BW * 4), *o2 = malloc(BW * 4);
    uint16_t *o16 = malloc((size_t)B * ld * 2);
    dget(d, e1, pe1, BTD * 4), dget(d, e2, pe2, BTD * 4), dget(d, o1, po1, BW * 4), dget(d, o2, po2, BW * 4);
    dget(d, o16, po16, (size_t)B * ld * 2);
    CHECK_MSG(!memcmp(e1, e2, BTD * 4) && !memcmp(o1, o2, BW * 4), "embedding_interact_fwd differs from its parts");
    dget(d, e2, pe3, BTD * 4);
    CHECK_MSG(!memcmp(e1, e2, BTD * 4), "embedding_interact_fwd16: emb differs from embedding_fwd's");
    size_t bo = 0;
    for (int b = 0; b < B; b++)
        for (int q = 0; q < ld; q++) bo += o16[(size_t)b * ld + q] != (q < W ? to16(o1[(size_t)b * W + q], rt) : 0);
    CHECK_MSG(bo == 0, "embedding_interact_fwd16: %zu of %d 16-bit outputs (zeros after %d) differ", bo, B * ld, W);
    dget(d, e1, pge1, BTD * 4), dget(d, e2, pge2, BTD * 4), dget(d, o1, pgb1, (size_t)B * D * 4);
    dget(d, o2, pgb2, (size_t)B * D * 4);
    CHECK_MSG(!memcmp(e1, e2, BTD * 4) && !memcmp(o1, o2, (size_t)B * D * 4),
              "interact_bwd16 differs from interact_bwd on the same values");
    CHECK(O->embedding_interact_fwd16(d, NULL, ptab, poff, pidx, pbot, pe3, NULL, po16, W - 1, B, T, D, rt, &e) ==
          PLUMB_EUSAGE);
    /* fused sparse SGD = embedding_bwd then sgd_sparse, on the first B-1 samples */
    const float lr = 0.37f;
    int64_t *prows = dput(d, NULL, (size_t)B * T * 8), *pn1 = dput(d, NULL, 8), *pn2 = dput(d, NULL, 8);
    float *prg = dput(d, NULL, BTD * 4), *ptab2 = TO(d, table, R * D);
    REQUIRE(prows && pn1 && pn2 && prg && ptab2);
    REQUIRE(O->embedding_bwd(d, NULL, poff, pidx, pge1, B, B - 1, T, D, prows, prg, pn1, &e) == 0);
    int64_t n1 = 0, n2 = 0;
    dget(d, &n1, pn1, 8);
    REQUIRE(O->sgd_sparse(d, NULL, ptab, prows, prg, (size_t)n1, D, lr, &e) == 0);
    REQUIRE(O->embedding_bwd_sgd(d, NULL, poff, pidx, pge1, B, B - 1, T, D, ptab2, lr, pn2, NULL, &e) == 0);
    dget(d, &n2, pn2, 8);
    float *t1 = malloc(R * D * 4), *t2 = malloc(R * D * 4);
    dget(d, t1, ptab, R * D * 4), dget(d, t2, ptab2, R * D * 4);
    CHECK_EQ_INT(n2, n1);
    CHECK_MSG(!memcmp(t1, t2, R * D * 4), "embedding_bwd_sgd differs from embedding_bwd + sgd_sparse");
    CHECK_MSG(memcmp(t1, table, R * D * 4) != 0, "the fused sparse SGD left the table as it was");
    {
        /* what the step's checks need: the unfused list's rows and sums, the
         * touched rows' old values and the non-finite flag, with the same
         * update; then the undo (sparse_put_dn) gated on the flag */
        int zero = 0, found = -1;
        int64_t n3 = 0, *prows3 = dput(d, NULL, (size_t)B * T * 8), *pn3 = dput(d, NULL, 8);
        float *psum3 = dput(d, NULL, BTD * 4), *pprev = dput(d, NULL, BTD * 4), *ptab3 = TO(d, table, R * D);
        int *pfound = dput(d, &zero, sizeof zero);
        REQUIRE(prows3 && pn3 && psum3 && pprev && ptab3 && pfound);
        const struct sgd_fused_out fo = {prows3, psum3, pprev, pfound};
        REQUIRE(O->embedding_bwd_sgd(d, NULL, poff, pidx, pge1, B, B - 1, T, D, ptab3, lr, pn3, &fo, &e) == 0);
        dget(d, &n3, pn3, 8), dget(d, &found, pfound, sizeof found);
        CHECK_EQ_INT(n3, n1);
        CHECK_EQ_INT(found, 0);
        float *t3 = malloc(R * D * 4), *s1 = malloc(BTD * 4), *s3 = malloc(BTD * 4), *pv = malloc(BTD * 4);
        int64_t *r1 = malloc((size_t)B * T * 8), *r3 = malloc((size_t)B * T * 8);
        REQUIRE(t3 && s1 && s3 && pv && r1 && r3 && n1 > 0 && n1 <= (int64_t)B * T);
        dget(d, t3, ptab3, R * D * 4), dget(d, r1, prows, n1 * 8), dget(d, r3, prows3, n1 * 8);
        dget(d, s1, prg, n1 * D * 4), dget(d, s3, psum3, n1 * D * 4), dget(d, pv, pprev, n1 * D * 4);
        CHECK_MSG(!memcmp(t3, t1, R * D * 4), "embedding_bwd_sgd with outputs: the table differs");
        CHECK_MSG(!memcmp(r3, r1, n1 * 8), "embedding_bwd_sgd: rows differ from embedding_bwd's");
        CHECK_MSG(!memcmp(s3, s1, n1 * D * 4), "embedding_bwd_sgd: sums differ from embedding_bwd's");
        size_t bad = 0;
        for (int64_t u = 0; u < n1; u++) bad += memcmp(pv + u * D, table + r1[u] * D, D * 4) != 0;
        CHECK_MSG(bad == 0, "embedding_bwd_sgd: %zu of %lld rows' old values differ", bad, (long long)n1);
        /* the flag is 0: nothing put back; then put back unconditionally: the table before the step */
        REQUIRE(O->sparse_put_dn(d, NULL, ptab3, prows3, pprev, pn3, (size_t)B * T, D, pfound, &e) == 0);
        dget(d, t3, ptab3, R * D * 4);
        CHECK_MSG(!memcmp(t3, t1, R * D * 4), "sparse_put_dn wrote with its flag 0");
        REQUIRE(O->sparse_put_dn(d, NULL, ptab3, prows3, pprev, pn3, (size_t)B * T, D, NULL, &e) == 0);
        dget(d, t3, ptab3, R * D * 4);
        CHECK_MSG(!memcmp(t3, table, R * D * 4), "sparse_put_dn: the table is not as before the fused step");
        /* a NaN in one valid sample's gradient: the flag is set */
        float *gn = malloc(BTD * 4);
        REQUIRE(gn);
        dget(d, gn, pge1, BTD * 4);
        gn[3] = NAN;
        float *pgn = TO(d, gn, BTD);
        const struct sgd_fused_out fo2 = {NULL, NULL, NULL, pfound};
        REQUIRE(pgn && O->embedding_bwd_sgd(d, NULL, poff, pidx, pgn, B, B - 1, T, D, ptab3, lr, pn3, &fo2, &e) == 0);
        dget(d, &found, pfound, sizeof found);
        CHECK_EQ_INT(found, 1);
        const struct sgd_fused_out fo3 = {NULL, NULL, pprev, NULL};
        CHECK(O->embedding_bwd_sgd(d, NULL, poff, pidx, pge1, B, B - 1, T, D, ptab3, lr, pn3, &fo3, &e) ==
              PLUMB_EUSAGE);
        void *dv3[] = {prows3, pn3, psum3, pprev, ptab3, pfound, pgn};
        for (size_t i = 0; i < sizeof dv3 / sizeof dv3[0]; i++) dev_free(d, dv3[i]);
        free(t3), free(s1), free(s3), free(pv), free(r1), free(r3), free(gn);
    }
    void *dv[] = {px, pw, pb, pdy, px16, pdy16, py, pdx, pdw1, pdw2, pbx1, pbx2, py16, pdx16, pfill, ptab, pbot, pg,
                  poff, pidx, pg16, po16, pe1, pe2, pe3, po1, po2, pgb1, pgb2, pge1, pge2, prows, pn1, pn2, prg, ptab2};
    for (size_t i = 0; i < sizeof dv / sizeof dv[0]; i++) dev_free(d, dv[i]);
    void *hv[] = {x, w, bias, dy, x16, dy16, y, dx, dw1, dw2, bx1, bx2, y16, dx16, fl, idx, table, bot, g, g16, e1, e2, o1,
                  o2, o16, t1, t2};
    for (size_t i = 0; i < sizeof hv / sizeof hv[0]; i++) free(hv[i]);
    dev_close(d);
}
TEST(train_ops_optional_ops_golden)
{
    optional_ops_case(NUMERICS_GOLDEN, DT_BF16, 37, 13, 20); /* K % 8 = 5: a padded mirror */
    optional_ops_case(NUMERICS_GOLDEN, DT_F16, 20, 24, 9);
}
TEST(train_ops_optional_ops_fast)
{
    optional_ops_case(NUMERICS_FAST, DT_BF16, 300, 36, 64);
    optional_ops_case(NUMERICS_FAST, DT_F16, 64, 64, 1); /* N = 1: the logits layer */
}
