#include "report/svg.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

void svg_fmt(char *buf, size_t n, double v)
{
    if (!isfinite(v)) snprintf(buf, n, "-");
    else if (v == 0) snprintf(buf, n, "0");
    else if (fabs(v) >= 1e6 || fabs(v) < 1e-3) snprintf(buf, n, "%.3g", v);
    else if (fabs(v) >= 100) snprintf(buf, n, "%.0f", v);
    else snprintf(buf, n, "%.5g", v);
}

static void open_fig(struct sbuf *b, const char *title, int W, int H, const char *legend)
{
    sb_puts(b, "<figure class=\"hist\"><figcaption><b>");
    sb_escape(b, title);
    sb_puts(b, "</b>");
    if (legend) sb_puts(b, legend);
    sb_printf(b, "</figcaption>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                 "role=\"img\"><title>", W, H, W, H);
    sb_escape(b, title);
    sb_puts(b, "</title>");
}

static void close_fig(struct sbuf *b) { sb_puts(b, "</svg></figure>\n"); }

static const char *LEGEND_AB = " <span style=\"color:" SVG_COLOR_A "\">&#9632; A</span> <span style=\"color:" SVG_COLOR_B
                               "\">&#9632; B</span>";

static void text(struct sbuf *b, double x, double y, const char *anchor, const char *s)
{
    sb_printf(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"%s\" fill=\"#4a5160\">", x, y, anchor);
    sb_escape(b, s);
    sb_puts(b, "</text>");
}

static void range_of(const double *v, size_t n, double *lo, double *hi)
{
    for (size_t i = 0; v && i < n; i++)
        if (isfinite(v[i])) *lo = fmin(*lo, v[i]), *hi = fmax(*hi, v[i]);
}

static void pad_range(double *lo, double *hi)
{
    if (!isfinite(*lo) || !isfinite(*hi)) *lo = 0, *hi = 1;
    if (*hi == *lo) {
        double d = *lo == 0 ? 1 : fabs(*lo) * 1e-3;
        *lo -= d, *hi += d;
    }
    double p = (*hi - *lo) * 0.06;
    *lo -= p, *hi += p;
}

void svg_strip(struct sbuf *b, const char *title, const double *va, size_t na, const double *vb, size_t nb, double ref,
               double margin)
{
    const int W = 460, H = vb ? 118 : 86, L = 34, R = 12, T = 8;
    double lo = INFINITY, hi = -INFINITY;
    range_of(va, na, &lo, &hi);
    range_of(vb, nb, &lo, &hi);
    if (margin > 0 && isfinite(ref)) lo = fmin(lo, ref - margin), hi = fmax(hi, ref + margin);
    pad_range(&lo, &hi);
    double pw = W - L - R;
#define SX(v) (L + pw * ((v) - lo) / (hi - lo))
    open_fig(b, title, W, H, vb ? LEGEND_AB : NULL);
    int rows = vb ? 2 : 1, rh = 32, ph = rows * rh;
    sb_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%d\" fill=\"#fafbfc\" stroke=\"#c9ced6\"/>", L, T, pw, ph);
    if (margin > 0 && isfinite(ref))
        sb_printf(b, "<rect class=\"margin-band\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"#15803d\" "
                     "fill-opacity=\"0.12\"><title>equivalence margin around A's mean</title></rect>"
                     "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#15803d\" stroke-dasharray=\"3,3\"/>",
                  SX(ref - margin), T, SX(ref + margin) - SX(ref - margin), ph, SX(ref), SX(ref), T, T + ph);
    for (int r = 0; r < rows; r++) {
        const double *v = r ? vb : va;
        size_t n = r ? nb : na;
        const char *col = r ? SVG_COLOR_B : SVG_COLOR_A;
        double y = T + rh * r + rh / 2.0, m = 0;
        size_t k = 0;
        text(b, L - 6, y + 3, "end", r ? "B" : "A");
        for (size_t i = 0; i < n; i++) {
            if (!isfinite(v[i])) continue;
            /* seeds with equal values are spread vertically so each dot shows */
            double jitter = ((double)(i % 5) - 2) * 2.2;
            sb_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.2\" fill=\"%s\" fill-opacity=\"0.75\"/>", SX(v[i]),
                      y + jitter, col);
            m += v[i], k++;
        }
        if (k) {
            m /= (double)k;
            sb_printf(b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>", SX(m),
                      SX(m), y - 11, y + 11, col);
        }
    }
    char t1[32], t2[32];
    svg_fmt(t1, sizeof t1, lo);
    svg_fmt(t2, sizeof t2, hi);
    text(b, L, T + ph + 14, "start", t1);
    text(b, W - R, T + ph + 14, "end", t2);
    if (margin > 0) {
        char t3[64];
        svg_fmt(t3, sizeof t3, margin);
        char lab[96];
        snprintf(lab, sizeof lab, "band: A mean +- %s", t3);
        text(b, L + pw / 2, T + ph + 14, "middle", lab);
    }
#undef SX
    close_fig(b);
}

static double clamp01(double v) { return v < 0 ? 0 : v > 1 ? 1 : v; }

static void polyline(struct sbuf *b, const double *x, const double *y, size_t n, double x0, double x1, double y0, double y1,
                     int L, int T, double pw, double ph, const char *col, double width)
{
    sb_printf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\" points=\"", col, width);
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i]) && isfinite(y[i]))
            sb_printf(b, "%.1f,%.1f ", L + pw * (x[i] - x0) / (x1 - x0), T + ph - ph * clamp01((y[i] - y0) / (y1 - y0)));
    sb_puts(b, "\"/>");
}

static void band(struct sbuf *b, const double *x, const double *lo, const double *hi, size_t n, double x0, double x1,
                 double y0, double y1, int L, int T, double pw, double ph, const char *col)
{
    sb_printf(b, "<polygon fill=\"%s\" fill-opacity=\"0.18\" stroke=\"none\" points=\"", col);
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i]) && isfinite(hi[i]))
            sb_printf(b, "%.1f,%.1f ", L + pw * (x[i] - x0) / (x1 - x0), T + ph - ph * clamp01((hi[i] - y0) / (y1 - y0)));
    for (size_t i = n; i-- > 0;)
        if (isfinite(x[i]) && isfinite(lo[i]))
            sb_printf(b, "%.1f,%.1f ", L + pw * (x[i] - x0) / (x1 - x0), T + ph - ph * clamp01((lo[i] - y0) / (y1 - y0)));
    sb_puts(b, "\"/>");
}

void svg_band_chart(struct sbuf *b, const char *title, const double *steps, size_t n, const double *a_mean,
                    const double *a_lo, const double *a_hi, const double *b_mean, const double *b_lo, const double *b_hi,
                    double mark_step)
{
    if (!n) return;
    const int W = 460, H = 230, L = 52, R = 10, T = 8, B = 24;
    double pw = W - L - R, ph = H - T - B;
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    range_of(steps, n, &x0, &x1);
    /* the y range from the points after the first 5%: the first losses of a
     * run are far above the rest and would flatten everything that matters;
     * points above the range are drawn at its top */
    size_t skip = n >= 40 ? n / 20 : 0;
    range_of(a_lo + skip, n - skip, &y0, &y1);
    range_of(a_hi + skip, n - skip, &y0, &y1);
    if (b_lo) range_of(b_lo + skip, n - skip, &y0, &y1);
    if (b_hi) range_of(b_hi + skip, n - skip, &y0, &y1);
    if (!isfinite(x0)) return;
    if (x1 == x0) x1 = x0 + 1;
    pad_range(&y0, &y1);
    open_fig(b, title, W, H, b_mean ? LEGEND_AB : NULL);
    sb_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" fill=\"#fafbfc\" stroke=\"#c9ced6\"/>", L, T, pw, ph);
    band(b, steps, a_lo, a_hi, n, x0, x1, y0, y1, L, T, pw, ph, SVG_COLOR_A);
    if (b_mean) band(b, steps, b_lo, b_hi, n, x0, x1, y0, y1, L, T, pw, ph, SVG_COLOR_B);
    polyline(b, steps, a_mean, n, x0, x1, y0, y1, L, T, pw, ph, SVG_COLOR_A, 1.4);
    if (b_mean) polyline(b, steps, b_mean, n, x0, x1, y0, y1, L, T, pw, ph, SVG_COLOR_B, 1.4);
    if (mark_step >= x0 && mark_step <= x1) {
        double x = L + pw * (mark_step - x0) / (x1 - x0);
        sb_printf(b, "<line class=\"separate\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%.0f\" stroke=\"#8f1919\" "
                     "stroke-dasharray=\"4,3\"/>", x, x, T, T + ph);
        char lab[64];
        snprintf(lab, sizeof lab, "bands apart from %.0f", mark_step);
        text(b, x + 3, T + 11, "start", lab);
    }
    char a[32], c[32], d[32], e[32];
    svg_fmt(a, sizeof a, y1);
    svg_fmt(c, sizeof c, y0);
    svg_fmt(d, sizeof d, x0);
    svg_fmt(e, sizeof e, x1);
    text(b, L - 3, T + 9, "end", a);
    text(b, L - 3, T + ph, "end", c);
    text(b, L, H - 8, "start", d);
    text(b, W - R, H - 8, "end", e);
    text(b, L + pw / 2, H - 8, "middle", "step");
    close_fig(b);
}

void svg_bars(struct sbuf *b, const char *title, const char *const *labels, const double *va, const double *vb, size_t n,
              const char *unit)
{
    if (!n) return;
    const int W = 460, L = 150, R = 70, T = 6, bar = 12, gap = 8;
    int per = vb ? 2 * bar + 2 : bar;
    int H = T + (int)n * (per + gap) + 18;
    double mx = 0;
    for (size_t i = 0; i < n; i++) {
        if (isfinite(va[i])) mx = fmax(mx, va[i]);
        if (vb && isfinite(vb[i])) mx = fmax(mx, vb[i]);
    }
    if (!(mx > 0)) mx = 1;
    double pw = W - L - R;
    open_fig(b, title, W, H, vb ? LEGEND_AB : NULL);
    for (size_t i = 0; i < n; i++) {
        double y = T + (double)i * (per + gap);
        text(b, L - 6, y + per / 2.0 + 3, "end", labels[i]);
        for (int s = 0; s < (vb ? 2 : 1); s++) {
            double v = s ? vb[i] : va[i];
            double yy = y + s * (bar + 2);
            if (!isfinite(v)) {
                text(b, L + 2, yy + bar - 2, "start", "-");
                continue;
            }
            sb_printf(b, "<rect x=\"%d\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/>", L, yy, pw * v / mx, bar,
                      s ? SVG_COLOR_B : SVG_COLOR_A);
            char t[48];
            svg_fmt(t, sizeof t, v);
            text(b, L + pw * v / mx + 4, yy + bar - 2, "start", t);
        }
    }
    if (unit && *unit) text(b, L + pw / 2, H - 4, "middle", unit);
    close_fig(b);
}

void svg_ladder(struct sbuf *b, const char *title, const char *const *names, const double *a_mean, const double *a_lo,
                const double *a_hi, const double *b_mean, const double *b_lo, const double *b_hi, size_t n, int parts_at)
{
    if (!n) return;
    const int W = 460, H = 240, L = 58, R = 10, T = 10, B = 40;
    double pw = W - L - R, ph = H - T - B;
    double y0 = INFINITY, y1 = -INFINITY;
    range_of(a_lo, n, &y0, &y1);
    range_of(a_hi, n, &y0, &y1);
    range_of(a_mean, n, &y0, &y1);
    range_of(b_lo, n, &y0, &y1);
    range_of(b_hi, n, &y0, &y1);
    range_of(b_mean, n, &y0, &y1);
    pad_range(&y0, &y1);
    double slot = pw / (double)n;
#define LY(v) (T + ph - ph * ((v) - y0) / (y1 - y0))
    open_fig(b, title, W, H, b_mean ? LEGEND_AB : NULL);
    sb_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" fill=\"#fafbfc\" stroke=\"#c9ced6\"/>", L, T, pw, ph);
    if (parts_at >= 1 && (size_t)parts_at <= n)
        sb_printf(b, "<rect class=\"parts\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%.0f\" fill=\"#fde0e0\" "
                     "fill-opacity=\"0.7\"><title>A and B part here</title></rect>",
                  L + slot * (parts_at - 1), T, slot, ph);
    for (size_t i = 0; i < n; i++) {
        double cx = L + slot * ((double)i + 0.5);
        for (int s = 0; s < (b_mean ? 2 : 1); s++) {
            const double *m = s ? b_mean : a_mean, *lo = s ? b_lo : a_lo, *hi = s ? b_hi : a_hi;
            const char *col = s ? SVG_COLOR_B : SVG_COLOR_A;
            double x = cx + (b_mean ? (s ? 7 : -7) : 0);
            if (!isfinite(m[i])) continue;
            if (isfinite(lo[i]) && isfinite(hi[i]))
                sb_printf(b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"1.5\"/>",
                          x, x, LY(lo[i]), LY(hi[i]), col);
            sb_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>", x, LY(m[i]), col);
        }
        char lab[48];
        snprintf(lab, sizeof lab, "%zu %s", i + 1, names[i]);
        text(b, cx, T + ph + 14, "middle", lab);
    }
    char a[32], c[32];
    svg_fmt(a, sizeof a, y1);
    svg_fmt(c, sizeof c, y0);
    text(b, L - 3, T + 9, "end", a);
    text(b, L - 3, T + ph, "end", c);
    text(b, L + pw / 2, H - 6, "middle", "rung (mean and 95% CI over seeds)");
#undef LY
    close_fig(b);
}

void svg_error_per_op(struct sbuf *b, const char *title, const char *const *labels, const double *va, const double *vb,
                      const double *thr, size_t n)
{
    if (!n) return;
    const int W = 720, L = 250, R = 16, T = 6, row = 15, B = 22;
    int H = T + (int)n * row + B;
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        const double *vs[3] = {va, vb, thr};
        for (int s = 0; s < 3; s++)
            if (vs[s] && isfinite(vs[s][i]) && vs[s][i] > 0) lo = fmin(lo, log10(vs[s][i])), hi = fmax(hi, log10(vs[s][i]));
    }
    if (!isfinite(lo)) lo = -8, hi = 0;
    lo = floor(lo) - 0.5, hi = ceil(hi) + 0.2;
    double floor_v = lo;
    double pw = W - L - R;
#define EX(l) (L + pw * ((l) - lo) / (hi - lo))
    open_fig(b, title, W, H, vb ? LEGEND_AB : NULL);
    sb_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%d\" fill=\"#fafbfc\" stroke=\"#c9ced6\"/>", L, T, pw,
              (int)n * row);
    for (int d = (int)ceil(lo); d <= (int)floor(hi); d++)
        sb_printf(b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#e6e9ee\"/>", EX(d), EX(d), T,
                  T + (int)n * row);
    for (size_t i = 0; i < n; i++) {
        double y = T + row * ((double)i + 0.5);
        text(b, L - 6, y + 3, "end", labels[i]);
        if (thr && isfinite(thr[i]) && thr[i] > 0)
            sb_printf(b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#15803d\" stroke-width=\"2\"/>",
                      EX(log10(thr[i])), EX(log10(thr[i])), y - 6, y + 6);
        for (int s = 0; s < (vb ? 2 : 1); s++) {
            double v = s ? vb[i] : va[i];
            if (!isfinite(v)) continue;
            double l = v > 0 ? log10(v) : floor_v;
            sb_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.3\" fill=\"%s\" fill-opacity=\"0.8\"/>", EX(l),
                      y + (vb ? (s ? 2.5 : -2.5) : 0), s ? SVG_COLOR_B : SVG_COLOR_A);
        }
    }
    for (int d = (int)ceil(lo); d <= (int)floor(hi); d++) {
        char t[16];
        snprintf(t, sizeof t, "1e%d", d);
        text(b, EX(d), H - 6, "middle", t);
    }
    text(b, L - 6, H - 6, "end", "error (log scale; threshold green)");
#undef EX
    close_fig(b);
}
