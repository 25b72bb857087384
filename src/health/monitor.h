/* Health inside a run: a background thread samples every interval seconds,
 * applies the thresholds, calls a callback for each new alert, and keeps the
 * samples as JSON for the caller's metrics.jsonl.
 *
 * Trainer use (plumb train --health-interval S --on-overheat stop|warn):
 *   struct health_monitor_opts o = {.interval_s = S, .on_alert = cb, .user = me};
 *   health_monitor_start(&m, &o, &e);
 *   ... each step: if (health_monitor_critical(m) && stop) { checkpoint; stop }
 *   ... when logging: json_t *lines = health_monitor_drain(m); append each
 *       element to metrics.jsonl; json_decref(lines);
 *   health_monitor_stop(m);  (then health_monitor_alerts_json for results)
 * Every call is thread-safe; the callback runs on the sampler thread. */
#ifndef PLUMB_HEALTH_MONITOR_H
#define PLUMB_HEALTH_MONITOR_H
#include <jansson.h>
#include "core/err.h"
#include "health/health.h"

struct health_monitor_opts {
    double interval_s;                        /* > 0; default 10 when 0 */
    const struct health_thresholds *thresholds; /* NULL: defaults */
    const char *providers;                    /* NULL or "all": every provider that opens */
    void (*on_alert)(const struct health_alert *a, void *user); /* may be NULL */
    void *user;
    int max_kept;                             /* samples kept between drains, default 1000 */
};

struct health_monitor;
/* Opens the providers, takes the first sample synchronously (so a run that
 * ends at once still has one), then starts the thread. */
int health_monitor_start(struct health_monitor **m, const struct health_monitor_opts *o, plumb_err *e);
/* 1 once a critical alert (temperature >= gpu_temp_critical_c) was raised. */
int health_monitor_critical(struct health_monitor *m);
/* Samples taken since the last drain, as an array of objects
 * {"type":"health","time":T,"devices":[sample...]} (new reference). */
json_t *health_monitor_drain(struct health_monitor *m);
/* Every alert raised so far (new reference), and their count. */
json_t *health_monitor_alerts_json(struct health_monitor *m);
int health_monitor_alert_count(struct health_monitor *m);
/* Samples taken so far. */
long health_monitor_samples(struct health_monitor *m);
/* Takes one sample now, on the caller's thread (tests, final sample). */
int health_monitor_sample_now(struct health_monitor *m, plumb_err *e);
void health_monitor_stop(struct health_monitor *m);

/* A run-wide monitor for plumb accept (defined in accept/check_health.c):
 * start it before the other checks so check_health_run reports every alert
 * of the run; thresholds from PLUMB_HEALTH_THRESHOLDS or the defaults. */
int health_run_monitor_start(double interval_s, plumb_err *e);
void health_run_monitor_stop(void);

#endif
