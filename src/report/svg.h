/* Inline SVG charts for report.html and compare.html (no script, no
 * network): each writes one <figure class="hist"> with a caption. Side A is
 * drawn blue, side B orange; a single run uses A's colour. NaN values are
 * left out. */
#ifndef PLUMB_SVG_H
#define PLUMB_SVG_H
#include <stddef.h>
#include "report/html.h"

#define SVG_COLOR_A "#1f5fbf"
#define SVG_COLOR_B "#c2410c"

/* Seed strip plot of one metric: a row of dots per side (one per seed), each
 * side's mean as a tick, and the equivalence band [ref - margin, ref +
 * margin] around A's mean shaded (margin <= 0: no band). vb may be NULL (one
 * side). */
void svg_strip(struct sbuf *b, const char *title, const double *va, size_t na, const double *vb, size_t nb, double ref,
               double margin);

/* Loss curves with seed bands: per side a shaded [lo, hi] band and the mean
 * line over steps[0..n); the B arrays may be NULL. mark_step >= 0 draws a
 * vertical line there (where the bands separate). */
void svg_band_chart(struct sbuf *b, const char *title, const double *steps, size_t n, const double *a_mean,
                    const double *a_lo, const double *a_hi, const double *b_mean, const double *b_lo, const double *b_hi,
                    double mark_step);

/* Horizontal bars, A (and B when vb is not NULL) per label, one linear scale. */
void svg_bars(struct sbuf *b, const char *title, const char *const *labels, const double *va, const double *vb, size_t n,
              const char *unit);

/* Points with 95% CI whiskers per rung (x = rung), A and optionally B, with
 * the rung where they part (parts_at, 1-based; 0 none) marked. */
void svg_ladder(struct sbuf *b, const char *title, const char *const *names, const double *a_mean, const double *a_lo,
                const double *a_hi, const double *b_mean, const double *b_lo, const double *b_hi, size_t n, int parts_at);

/* Error per op on a log10 scale: A and B as dots per op, the threshold as a
 * tick. Values <= 0 are drawn at the floor (exact). */
void svg_error_per_op(struct sbuf *b, const char *title, const char *const *labels, const double *va, const double *vb,
                      const double *thr, size_t n);

/* A number for chart labels ("0.7581", "1.2e-05", "18400"). */
void svg_fmt(char *buf, size_t n, double v);

#endif
