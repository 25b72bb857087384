/* The accept `health` check: passes when no health threshold was crossed
 * during the run. When the run started a run-wide monitor
 * (health_run_monitor_start, called by accept before the other checks), its
 * samples and alerts cover the whole run; otherwise the check samples for a
 * while itself (quick 3 rounds, standard 10, full 30, 0.5 s apart).
 * Thresholds: defaults, or the file named by PLUMB_HEALTH_THRESHOLDS.
 * Artifacts: checks/health/samples.jsonl, checks/health/alerts.json (a write
 * that fails fails the check). With no GPU and no host temperature or power
 * sensor nothing the thresholds cover is measured: skip ("no sensors"). */
#include "accept/checks.h"
#include "core/file.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "health/health.h"
#include "health/monitor.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct health_monitor *g_run_monitor;

int health_run_monitor_start(double interval_s, plumb_err *e)
{
    if (g_run_monitor) return PLUMB_OK;
    struct health_thresholds t;
    health_thresholds_default(&t);
    const char *f = getenv("PLUMB_HEALTH_THRESHOLDS");
    if (f && *f) {
        int rc = health_thresholds_load(&t, f, e);
        if (rc) return err_wrap(e, "PLUMB_HEALTH_THRESHOLDS");
    }
    struct health_monitor_opts o = {.interval_s = interval_s, .thresholds = &t};
    return health_monitor_start(&g_run_monitor, &o, e);
}

void health_run_monitor_stop(void)
{
    health_monitor_stop(g_run_monitor);
    g_run_monitor = NULL;
}

static void track_max(json_t *line, double *max_temp, double *max_power, int *ngpu, int *measured)
{
    size_t i;
    json_t *d;
    int gpus = 0;
    json_array_foreach(json_object_get(line, "devices"), i, d) {
        *measured |= json_is_number(json_object_get(d, "temp_c")) || json_is_number(json_object_get(d, "power_w"));
        const char *kind = jsonx_str(d, "kind");
        if (!kind || strcmp(kind, "gpu")) continue;
        gpus++;
        double t = jsonx_num(d, "temp_c"), p = jsonx_num(d, "power_w");
        if (!isnan(t) && t > *max_temp) *max_temp = t;
        if (!isnan(p) && p > *max_power) *max_power = p;
    }
    if (gpus > *ngpu) *ngpu = gpus;
}

static int cmp_key(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* A copy with object keys in sorted order (results.json is written sorted:
 * details rendered before and after a reload then read the same). Steals j. */
static json_t *sorted(json_t *j)
{
    if (json_is_array(j)) {
        json_t *a = json_array();
        size_t i;
        json_t *v;
        json_array_foreach(j, i, v) json_array_append_new(a, sorted(json_incref(v)));
        json_decref(j);
        return a;
    }
    if (!json_is_object(j)) return j;
    size_t n = json_object_size(j), k = 0;
    const char **keys = malloc((n ? n : 1) * sizeof *keys);
    if (!keys) return j;
    const char *key;
    json_t *v;
    json_object_foreach(j, key, v) keys[k++] = key;
    qsort(keys, n, sizeof *keys, cmp_key);
    json_t *o = json_object();
    for (k = 0; k < n; k++) json_object_set_new(o, keys[k], sorted(json_incref(json_object_get(j, keys[k]))));
    free(keys);
    json_decref(j);
    return o;
}

int check_health_report(const struct check_ctx *ctx, json_t *lines, json_t *alerts, const struct health_thresholds *tp,
                        const char *scope, struct check_result *r, plumb_err *e)
{
    const struct health_thresholds t = *tp;
    int rc = check_begin(r, "health", NULL);
    if (rc) return err_set(e, rc, "health: out of memory");
    check_threshold(r, "gpu_temp_c", t.gpu_temp_c);
    check_threshold(r, "power_w", t.power_w);
    check_threshold(r, "ecc_per_hour", t.ecc_per_hour);
    double max_temp = -INFINITY, max_power = -INFINITY;
    int ngpu = 0, measured = 0;
    size_t i;
    json_t *line;
    json_array_foreach(lines, i, line) track_max(line, &max_temp, &max_power, &ngpu, &measured);
    check_metric(r, "samples", (double)json_array_size(lines), "");
    check_metric(r, "alerts", (double)json_array_size(alerts), "");
    check_metric(r, "gpus", ngpu, "");
    if (isfinite(max_temp)) check_metric(r, "max_gpu_temp", max_temp, "C");
    if (isfinite(max_power)) check_metric(r, "max_gpu_power", max_power, "W");
    check_detail(r, "thresholds", sorted(health_thresholds_json(&t)));
    check_detail(r, "alerts", sorted(json_incref(alerts)));
    check_detail(r, "scope", json_string(scope));
    /* the evidence: a write that fails is this check's failure, never silent */
    char werr[1024] = "";
    if (ctx->run_dir) {
        char dir[1024], path[1200], rel[1200];
        plumb_err we = {0};
        if ((rc = check_artifact_dir(ctx, r, dir, sizeof dir, &we)) == 0) {
            snprintf(path, sizeof path, "%s/samples.jsonl", dir);
            FILE *f = fopen(path, "w");
            int ok = f != NULL;
            json_array_foreach(lines, i, line) if (ok && jsonx_append_line(f, line, &we)) ok = 0;
            if (f && fclose(f) != 0 && ok) ok = 0, err_set(&we, PLUMB_EIO, "close: %s", strerror(errno));
            if (!f) err_set(&we, PLUMB_EIO, "%s", strerror(errno));
            check_artifact_rel(ctx, path, rel, sizeof rel);
            if (ok) check_artifact(r, rel);
            else snprintf(werr, sizeof werr, "%s not written: %s", rel, we.msg);
            snprintf(path, sizeof path, "%s/alerts.json", dir);
            check_artifact_rel(ctx, path, rel, sizeof rel);
            if (jsonx_write_file(path, alerts, &we) == 0) check_artifact(r, rel);
            else if (!werr[0]) snprintf(werr, sizeof werr, "%s not written: %s", rel, we.msg);
        } else {
            snprintf(werr, sizeof werr, "no artifact folder: %s", we.msg);
        }
        rc = PLUMB_OK;
    }
    size_t na = json_array_size(alerts);
    if (na) {
        json_t *a0 = json_array_get(alerts, 0);
        check_set_status(r, CHECK_FAIL, "%zu health alert%s; first: %s %s = %g (limit %g)", na, na == 1 ? "" : "s",
                         jsonx_str(a0, "device"), jsonx_str(a0, "quantity"), jsonx_num(a0, "value"),
                         jsonx_num(a0, "limit"));
    } else if (!json_array_size(lines)) {
        check_set_status(r, CHECK_SKIP, "no health sample could be taken");
    } else if (!ngpu && !measured) {
        /* nothing the thresholds cover was read: not a pass */
        check_set_status(r, CHECK_SKIP, "no sensors: 0 GPUs and no host temperature or power reading in %zu samples",
                         json_array_size(lines));
    } else {
        check_set_status(r, CHECK_PASS, "no threshold crossed in %zu samples of %d GPU%s and the host",
                         json_array_size(lines), ngpu, ngpu == 1 ? "" : "s");
    }
    if (werr[0]) check_set_status(r, CHECK_FAIL, "%s", werr);
    check_end(r);
    return PLUMB_OK;
}

int check_health_run(const struct check_ctx *ctx, struct check_result *r, plumb_err *e)
{
    int rc;
    struct health_thresholds t;
    health_thresholds_default(&t);
    const char *tf = getenv("PLUMB_HEALTH_THRESHOLDS");
    if (tf && *tf && (rc = health_thresholds_load(&t, tf, e))) return err_wrap(e, "PLUMB_HEALTH_THRESHOLDS");
    json_t *lines = NULL, *alerts = NULL;
    int own = !g_run_monitor;
    struct health_monitor *m = g_run_monitor;
    if (own) {
        int rounds = ctx->level && !strcmp(ctx->level, "full") ? 30 : ctx->level && !strcmp(ctx->level, "standard") ? 10 : 3;
        struct health_monitor_opts o = {.interval_s = 3600, .thresholds = &t};
        if ((rc = health_monitor_start(&m, &o, e))) return err_wrap(e, "health");
        for (int i = 1; i < rounds; i++) {
            struct timespec ts = {0, 500 * 1000000L};
            nanosleep(&ts, NULL);
            if ((rc = health_monitor_sample_now(m, e))) {
                health_monitor_stop(m);
                return err_wrap(e, "health");
            }
        }
    } else if ((rc = health_monitor_sample_now(m, e))) {
        return err_wrap(e, "health");
    }
    lines = health_monitor_drain(m);
    alerts = health_monitor_alerts_json(m);
    if (own) health_monitor_stop(m);
    rc = check_health_report(ctx, lines, alerts, &t, own ? "sampled during the check" : "sampled through the whole run", r, e);
    json_decref(lines);
    json_decref(alerts);
    return rc;
}

