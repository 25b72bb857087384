#include "train/scaler.h"

void scaler_init(struct loss_scaler *s, int enabled, double init, double growth,
                 double backoff, long interval)
{
    s->enabled = enabled;
    s->scale = enabled ? init : 1.0;
    s->growth = growth;
    s->backoff = backoff;
    s->interval = interval;
    s->clean_steps = 0;
    s->skipped_total = 0;
}

int scaler_update(struct loss_scaler *s, int found_inf)
{
    if (found_inf) {
        s->skipped_total++;
        s->clean_steps = 0;
        if (s->enabled) s->scale *= s->backoff;
        return 0;
    }
    if (!s->enabled) return 1;
    if (++s->clean_steps >= s->interval) {
        s->scale *= s->growth;
        s->clean_steps = 0;
    }
    return 1;
}
