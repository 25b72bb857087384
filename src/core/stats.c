/* Kolmogorov-Smirnov tests and histograms (see stats.h). */
#include "core/stats.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

double ks_kolmogorov_q(double lambda)
{
    if (lambda <= 0) return 1.0;
    if (lambda < 0.2) return 1.0; /* Q(0.2) = 1 - 3e-24 */
    if (lambda < 1.18) {
        /* the theta-function form converges fast for small lambda:
         * K(l) = sqrt(2 pi)/l sum_{k>=1} exp(-(2k-1)^2 pi^2 / (8 l^2)) */
        double s = 0, c = M_PI * M_PI / (8 * lambda * lambda);
        for (int k = 1; k < 20; k++) s += exp(-(2.0 * k - 1) * (2.0 * k - 1) * c);
        return 1.0 - sqrt(2 * M_PI) / lambda * s;
    }
    double s = 0, sign = 1;
    for (int k = 1; k < 100; k++) {
        double t = exp(-2.0 * k * k * lambda * lambda);
        s += sign * t;
        sign = -sign;
        if (t < 1e-300) break;
    }
    double q = 2 * s;
    return q < 0 ? 0 : q > 1 ? 1 : q;
}

/* ---- Marsaglia, Tsang, Wang (2003): P(D_n < d) = n!/n^n * (H^n)_{kk}, with
 * H the m x m matrix (m = 2k - 1, k = ceil-ish(n d), h = k - n d) below. The
 * matrix power keeps a separate power-of-ten exponent to avoid overflow. */

static void mat_mul(const double *a, const double *b, double *c, int m)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < m; j++) {
            double s = 0;
            for (int t = 0; t < m; t++) s += a[i * m + t] * b[t * m + j];
            c[i * m + j] = s;
        }
}

/* v = a^n with exponent bookkeeping: value = v * 10^(*ev) */
static int mat_pow(const double *a, int m, long n, double *v, int *ev)
{
    size_t sz = (size_t)m * m;
    double *base = malloc(sz * sizeof *base), *tmp = malloc(sz * sizeof *tmp);
    if (!base || !tmp) {
        free(base);
        free(tmp);
        return -1;
    }
    memcpy(base, a, sz * sizeof *base);
    int eb = 0;
    for (size_t i = 0; i < sz; i++) v[i] = 0;
    for (int i = 0; i < m; i++) v[i * m + i] = 1;
    *ev = 0;
    while (n > 0) {
        if (n & 1) {
            mat_mul(v, base, tmp, m);
            memcpy(v, tmp, sz * sizeof *v);
            *ev += eb;
            if (v[(m / 2) * m + m / 2] > 1e140) {
                for (size_t i = 0; i < sz; i++) v[i] *= 1e-140;
                *ev += 140;
            }
        }
        n >>= 1;
        if (n) {
            mat_mul(base, base, tmp, m);
            memcpy(base, tmp, sz * sizeof *base);
            eb *= 2;
            if (base[(m / 2) * m + m / 2] > 1e140) {
                for (size_t i = 0; i < sz; i++) base[i] *= 1e-140;
                eb += 140;
            }
        }
    }
    free(base);
    free(tmp);
    return 0;
}

double ks_mtw_cdf(long n, double d)
{
    if (n < 1 || !(d > 0)) return 0.0;
    if (d >= 1.0) return 1.0;
    double nd = n * d;
    int k = (int)nd + 1;
    int m = 2 * k - 1;
    double h = k - nd;
    double *H = calloc((size_t)m * m, sizeof *H), *Q = malloc((size_t)m * m * sizeof *Q);
    if (!H || !Q) {
        free(H);
        free(Q);
        return NAN;
    }
    for (int i = 0; i < m; i++)
        for (int j = 0; j < m; j++) H[i * m + j] = (i - j + 1 < 0) ? 0 : 1;
    for (int i = 0; i < m; i++) {
        H[i * m] -= pow(h, i + 1);
        H[(m - 1) * m + i] -= pow(h, m - i);
    }
    H[(m - 1) * m] += (2 * h - 1 > 0 ? pow(2 * h - 1, m) : 0);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < m; j++)
            if (i - j + 1 > 0)
                for (int g = 1; g <= i - j + 1; g++) H[i * m + j] /= g;
    int eq;
    if (mat_pow(H, m, n, Q, &eq)) {
        free(H);
        free(Q);
        return NAN;
    }
    double s = Q[(k - 1) * m + (k - 1)];
    for (long i = 1; i <= n; i++) {
        s = s * (double)i / (double)n;
        if (s < 1e-140) {
            s *= 1e140;
            eq -= 140;
        }
    }
    s *= pow(10.0, eq);
    free(H);
    free(Q);
    return s < 0 ? 0 : s > 1 ? 1 : s;
}

double ks_one_sample_p(long n, double d, int *exact)
{
    if (exact) *exact = 1;
    if (n < 1 || !(d > 0)) return 1.0;
    if (d >= 1.0) return 0.0;
    /* closed forms at the ends of the range (Durbin 1973): */
    if (d <= 0.5 / n) return 1.0;
    if (d >= 1.0 - 1.0 / n) return 2.0 * pow(1.0 - d, (double)n);
    int k = (int)(n * d) + 1;
    if (n <= 100000 && 2 * k - 1 <= KS_MTW_MAX_ORDER) return 1.0 - ks_mtw_cdf(n, d);
    if (exact) *exact = 0;
    double sn = sqrt((double)n), x = sn * d;
    return ks_kolmogorov_q(x + 1.0 / (6.0 * sn) + (x - 1.0) / (4.0 * n));
}

/* Exact two-sample: w(i,j) = fraction of monotone lattice paths from (0,0)
 * to (i,j) that keep |i/n - j/m| < d; w(i,j) = w(i-1,j) i/(i+j) +
 * w(i,j-1) j/(i+j). P(D >= d) = 1 - w(n,m). Points are compared in
 * integers: |i m - j n| >= L with L = d n m rounded (D n m is an integer). */
static double ks2_exact(long n, long m, double d)
{
    double dl = d * (double)n * (double)m;
    long L = (long)floor(dl + 0.5);
    if (fabs(dl - (double)L) > 1e-6 * dl) L = (long)ceil(dl);
    double *w = malloc((size_t)(m + 1) * sizeof *w);
    if (!w) return NAN;
    for (long j = 0; j <= m; j++) w[j] = (labs(0 * m - j * n) >= L) ? 0 : 1;
    for (long j = 1; j <= m; j++)
        if (w[j - 1] == 0) w[j] = 0;
    for (long i = 1; i <= n; i++) {
        w[0] = (labs(i * m) >= L) ? 0 : w[0];
        for (long j = 1; j <= m; j++) {
            if (labs(i * m - j * n) >= L) {
                w[j] = 0;
                continue;
            }
            double t = (double)(i + j);
            w[j] = w[j] * ((double)i / t) + w[j - 1] * ((double)j / t);
        }
    }
    double inside = w[m];
    free(w);
    double p = 1.0 - inside;
    return p < 0 ? 0 : p > 1 ? 1 : p;
}

double ks_two_sample_p(long n, long m, double d, int *exact)
{
    if (exact) *exact = 1;
    if (n < 1 || m < 1 || !(d > 0)) return 1.0;
    if ((double)n * (double)m <= KS2_EXACT_MAX) return ks2_exact(n, m, d);
    if (exact) *exact = 0;
    double en = (double)n * (double)m / (double)(n + m);
    long ne = (long)floor(en + 0.5);
    if (ne < 1) ne = 1;
    return ks_one_sample_p(ne, d, NULL);
}

double stats_cdf_uniform01(double x, const void *arg)
{
    (void)arg;
    return x <= 0 ? 0 : x >= 1 ? 1 : x;
}
double stats_cdf_normal01(double x, const void *arg)
{
    (void)arg;
    return 0.5 * erfc(-x / M_SQRT2);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int ks_one_sample(const double *x, size_t n, stats_cdf_fn cdf, const void *arg,
                  struct ks_result *r, plumb_err *e)
{
    if (n == 0) return err_set(e, PLUMB_EUSAGE, "ks_one_sample: empty sample (expected n >= 1)");
    double *s = malloc(n * sizeof *s);
    if (!s) return err_set(e, PLUMB_ENOMEM, "ks_one_sample: out of memory for %zu values", n);
    memcpy(s, x, n * sizeof *s);
    for (size_t i = 0; i < n; i++)
        if (isnan(s[i])) {
            free(s);
            return err_set(e, PLUMB_EUSAGE, "ks_one_sample: value %zu is NaN", i);
        }
    qsort(s, n, sizeof *s, cmp_double);
    double d = 0;
    for (size_t i = 0; i < n; i++) {
        double f = cdf(s[i], arg);
        double dp = (double)(i + 1) / (double)n - f, dm = f - (double)i / (double)n;
        if (dp > d) d = dp;
        if (dm > d) d = dm;
    }
    free(s);
    r->d = d;
    r->n = n;
    r->m = 0;
    r->p = ks_one_sample_p((long)n, d, &r->exact);
    return PLUMB_OK;
}

int ks_two_sample(const double *x, size_t n, const double *y, size_t m, struct ks_result *r,
                  plumb_err *e)
{
    if (n == 0 || m == 0)
        return err_set(e, PLUMB_EUSAGE, "ks_two_sample: empty sample (n=%zu, m=%zu; expected both >= 1)", n, m);
    double *a = malloc(n * sizeof *a), *b = malloc(m * sizeof *b);
    if (!a || !b) {
        free(a);
        free(b);
        return err_set(e, PLUMB_ENOMEM, "ks_two_sample: out of memory");
    }
    memcpy(a, x, n * sizeof *a);
    memcpy(b, y, m * sizeof *b);
    qsort(a, n, sizeof *a, cmp_double);
    qsort(b, m, sizeof *b, cmp_double);
    /* walk both sorted samples; ties advance together */
    size_t i = 0, j = 0;
    double d = 0;
    while (i < n && j < m) {
        double v = a[i] < b[j] ? a[i] : b[j];
        while (i < n && a[i] == v) i++;
        while (j < m && b[j] == v) j++;
        double diff = fabs((double)i / (double)n - (double)j / (double)m);
        if (diff > d) d = diff;
    }
    free(a);
    free(b);
    r->d = d;
    r->n = n;
    r->m = m;
    r->p = ks_two_sample_p((long)n, (long)m, d, &r->exact);
    return PLUMB_OK;
}

int hist_init(struct histogram *h, double lo, double hi, int bins, plumb_err *e)
{
    memset(h, 0, sizeof *h);
    if (bins < 1 || !(hi > lo))
        return err_set(e, PLUMB_EUSAGE, "histogram: need bins >= 1 and hi > lo (got %d bins on [%g, %g))", bins, lo, hi);
    h->counts = calloc((size_t)bins, sizeof *h->counts);
    if (!h->counts) return err_set(e, PLUMB_ENOMEM, "histogram: out of memory");
    h->lo = lo;
    h->hi = hi;
    h->bins = bins;
    return PLUMB_OK;
}

void hist_add(struct histogram *h, double v)
{
    h->total++;
    if (v < h->lo) {
        h->under++;
        return;
    }
    if (!(v < h->hi)) {
        h->over++;
        return;
    }
    int b = (int)((v - h->lo) / (h->hi - h->lo) * h->bins);
    if (b >= h->bins) b = h->bins - 1;
    h->counts[b]++;
}

void hist_add_floats(struct histogram *h, const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++) hist_add(h, v[i]);
}

void hist_expected(const struct histogram *h, stats_cdf_fn cdf, const void *arg, double *expected)
{
    double w = (h->hi - h->lo) / h->bins;
    for (int i = 0; i < h->bins; i++) {
        double a = h->lo + w * i, b = (i + 1 == h->bins) ? h->hi : h->lo + w * (i + 1);
        expected[i] = (double)h->total * (cdf(b, arg) - cdf(a, arg));
    }
}

double hist_chi2(const struct histogram *h, const double *expected, int *dof)
{
    double chi = 0, oacc = 0, eacc = 0;
    int cells = 0;
    for (int i = 0; i < h->bins; i++) {
        oacc += (double)h->counts[i];
        eacc += expected[i];
        if (eacc >= 5 || i + 1 == h->bins) {
            if (eacc > 0) {
                chi += (oacc - eacc) * (oacc - eacc) / eacc;
                cells++;
            }
            oacc = eacc = 0;
        }
    }
    if (dof) *dof = cells > 1 ? cells - 1 : 0;
    return chi;
}

void hist_free(struct histogram *h)
{
    free(h->counts);
    h->counts = NULL;
}
