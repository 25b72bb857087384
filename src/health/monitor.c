/* Background health sampler; see monitor.h. */
#include "health/monitor.h"
#include "core/log.h"
#include "core/timer.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct health_monitor {
    struct health_ctx ctx;
    struct health_eval *ev;
    struct health_monitor_opts o;
    pthread_t th;
    int started, stopping, critical;
    pthread_mutex_t lock;  /* guards everything below and sampling */
    pthread_cond_t cond;
    json_t *pending;       /* array of sample lines since the last drain */
    json_t *alerts;        /* every alert */
    long nsamples;
    struct health_sample buf[HEALTH_MAX_DEVICES];
};

/* Called with m->lock held. */
static int sample_locked(struct health_monitor *m, plumb_err *e)
{
    int n = 0;
    int rc = health_sample_all(&m->ctx, m->buf, HEALTH_MAX_DEVICES, &n, e);
    if (rc) return rc;
    struct health_alert al[64];
    int na = 0;
    health_eval_samples(m->ev, m->buf, n, al, 64, &na);
    json_t *line = json_object();
    json_object_set_new(line, "type", json_string("health"));
    json_object_set_new(line, "time", json_real(timer_wall()));
    json_t *devs = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(devs, health_sample_json(&m->buf[i]));
    json_object_set_new(line, "devices", devs);
    if (na) {
        json_t *aa = json_array();
        for (int i = 0; i < na; i++) json_array_append_new(aa, health_alert_json(&al[i]));
        json_object_set_new(line, "alerts", aa);
    }
    if ((int)json_array_size(m->pending) >= m->o.max_kept) json_array_remove(m->pending, 0);
    json_array_append_new(m->pending, line);
    m->nsamples++;
    for (int i = 0; i < na; i++) {
        json_array_append_new(m->alerts, health_alert_json(&al[i]));
        if (al[i].critical) m->critical = 1;
    }
    /* callbacks outside the lock would race with stop; they are short by contract */
    for (int i = 0; i < na; i++)
        if (m->o.on_alert) m->o.on_alert(&al[i], m->o.user);
    return PLUMB_OK;
}

static void *sampler(void *arg)
{
    struct health_monitor *m = arg;
    pthread_mutex_lock(&m->lock);
    while (!m->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        /* at most ~31 years ahead: (time_t)1e300 is undefined, and the deadline came out in
         * the past: the thread sampled without pause holding the lock, and the trainer
         * (health_monitor_critical) waited on it until the watchdog ended the run */
        double dl = (double)ts.tv_sec + 1e-9 * ts.tv_nsec + (m->o.interval_s < 1e9 ? m->o.interval_s : 1e9);
        ts.tv_sec = (time_t)dl;
        ts.tv_nsec = (long)((dl - (double)ts.tv_sec) * 1e9);
        while (!m->stopping) {
            if (pthread_cond_timedwait(&m->cond, &m->lock, &ts) != 0) break; /* timed out */
        }
        if (m->stopping) break;
        plumb_err e = {0};
        if (sample_locked(m, &e)) log_warn("health monitor: sample failed: %s", e.msg);
    }
    pthread_mutex_unlock(&m->lock);
    return NULL;
}

int health_monitor_start(struct health_monitor **out, const struct health_monitor_opts *o, plumb_err *e)
{
    *out = NULL;
    struct health_monitor *m = calloc(1, sizeof *m);
    if (!m) return err_set(e, PLUMB_ENOMEM, "health monitor: out of memory");
    m->ev = calloc(1, sizeof *m->ev);
    if (!m->ev) {
        free(m);
        return err_set(e, PLUMB_ENOMEM, "health monitor: out of memory");
    }
    m->o = *o;
    if (m->o.interval_s <= 0) m->o.interval_s = 10;
    if (m->o.max_kept <= 0) m->o.max_kept = 1000;
    struct health_thresholds def;
    health_thresholds_default(&def);
    health_eval_init(m->ev, o->thresholds ? o->thresholds : &def);
    int rc = health_open(&m->ctx, o->providers ? o->providers : "all", e);
    if (rc) {
        free(m->ev);
        free(m);
        return rc;
    }
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->cond, NULL);
    m->pending = json_array();
    m->alerts = json_array();
    pthread_mutex_lock(&m->lock);
    rc = sample_locked(m, e);
    pthread_mutex_unlock(&m->lock);
    if (rc || pthread_create(&m->th, NULL, sampler, m) != 0) {
        if (!rc) rc = err_set(e, PLUMB_EINTERNAL, "health monitor: cannot start the sampler thread");
        m->started = 0;
        health_monitor_stop(m);
        return rc;
    }
    m->started = 1;
    *out = m;
    return PLUMB_OK;
}

int health_monitor_critical(struct health_monitor *m)
{
    pthread_mutex_lock(&m->lock);
    int c = m->critical;
    pthread_mutex_unlock(&m->lock);
    return c;
}

json_t *health_monitor_drain(struct health_monitor *m)
{
    pthread_mutex_lock(&m->lock);
    json_t *a = m->pending;
    m->pending = json_array();
    pthread_mutex_unlock(&m->lock);
    return a;
}

json_t *health_monitor_alerts_json(struct health_monitor *m)
{
    pthread_mutex_lock(&m->lock);
    json_t *a = json_deep_copy(m->alerts);
    pthread_mutex_unlock(&m->lock);
    return a;
}

int health_monitor_alert_count(struct health_monitor *m)
{
    pthread_mutex_lock(&m->lock);
    int n = (int)json_array_size(m->alerts);
    pthread_mutex_unlock(&m->lock);
    return n;
}

long health_monitor_samples(struct health_monitor *m)
{
    pthread_mutex_lock(&m->lock);
    long n = m->nsamples;
    pthread_mutex_unlock(&m->lock);
    return n;
}

int health_monitor_sample_now(struct health_monitor *m, plumb_err *e)
{
    pthread_mutex_lock(&m->lock);
    int rc = sample_locked(m, e);
    pthread_mutex_unlock(&m->lock);
    return rc;
}

void health_monitor_stop(struct health_monitor *m)
{
    if (!m) return;
    if (m->started) {
        pthread_mutex_lock(&m->lock);
        m->stopping = 1;
        pthread_cond_signal(&m->cond);
        pthread_mutex_unlock(&m->lock);
        pthread_join(m->th, NULL);
    }
    health_close(&m->ctx);
    json_decref(m->pending);
    json_decref(m->alerts);
    pthread_mutex_destroy(&m->lock);
    pthread_cond_destroy(&m->cond);
    free(m->ev);
    free(m);
}
