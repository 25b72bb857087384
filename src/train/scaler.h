/* Dynamic loss scaling with PyTorch GradScaler semantics:
 *   - the loss (its gradient) is multiplied by `scale` before backward;
 *   - gradients are unscaled (multiplied by 1/scale) and checked for inf/NaN
 *     over all ranks;
 *   - a step with a non-finite gradient is skipped and scale *= backoff, the
 *     count of clean steps restarts;
 *   - after `interval` consecutive clean steps, scale *= growth.
 * Disabled (fp32, bf16 by default) means scale stays 1 and updates never
 * change it; non-finite steps are still skipped by the trainer. */
#ifndef PLUMB_SCALER_H
#define PLUMB_SCALER_H
#include <stdint.h>

struct loss_scaler {
    int enabled;
    double scale;        /* current scale (a power of two with default knobs) */
    double growth;       /* default 2.0 */
    double backoff;      /* default 0.5 */
    long interval;       /* default 2000 */
    long clean_steps;    /* consecutive non-skipped steps since the last change */
    long skipped_total;  /* steps skipped because of inf/NaN */
};

void scaler_init(struct loss_scaler *s, int enabled, double init, double growth,
                 double backoff, long interval);
/* After the all-rank inf check: returns 1 when the optimizer step should be
 * applied (found_inf == 0), 0 when it is skipped; updates the scale. */
int scaler_update(struct loss_scaler *s, int found_inf);
static inline double scaler_scale(const struct loss_scaler *s) { return s->enabled ? s->scale : 1.0; }

#endif
