/* Prometheus text exposition format (version 0.0.4): one HELP and one TYPE
 * line per metric family, then one line per device that supports the
 * quantity, labelled device, uuid, vendor (and gpu index for GPUs, as
 * dcgm-exporter does). NVIDIA devices use dcgm-exporter names, AMD devices
 * AMD device-metrics-exporter names, the host plumb_host_* names. Unsupported
 * quantities produce no line. Alerts: plumb_health_alerts{device,...} = number
 * of rules currently crossed, and plumb_health_alert{...,quantity} = 1 per
 * crossed rule. */
#include "health/health.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct buf {
    char *p;
    size_t len, cap;
    int oom;
};

static void bprintf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bprintf(struct buf *b, const char *fmt, ...)
{
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int w = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (w < 0) {
            b->oom = 1;
            return;
        }
        if ((size_t)w < b->cap - b->len) {
            b->len += (size_t)w;
            return;
        }
        size_t nc = b->cap * 2 + (size_t)w + 1;
        char *np = realloc(b->p, nc);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
}

/* Label values escape backslash, double quote and newline. */
static void esc(char *out, size_t n, const char *s)
{
    size_t j = 0;
    for (; *s && j + 2 < n; s++) {
        if (*s == '\\' || *s == '"') {
            out[j++] = '\\';
            out[j++] = *s;
        } else if (*s == '\n') {
            out[j++] = '\\';
            out[j++] = 'n';
        } else {
            out[j++] = *s;
        }
    }
    out[j] = 0;
}

static void labels(struct buf *b, const struct health_sample *s, const char *extra_k, const char *extra_v)
{
    char dev[80], uuid[200], ev[200];
    esc(dev, sizeof dev, s->device);
    esc(uuid, sizeof uuid, s->uuid);
    bprintf(b, "{device=\"%s\",uuid=\"%s\",vendor=\"%s\"", dev, uuid, s->vendor);
    if (s->kind == HEALTH_GPU) bprintf(b, ",gpu=\"%d\"", s->index);
    if (extra_k) {
        esc(ev, sizeof ev, extra_v);
        bprintf(b, ",%s=\"%s\"", extra_k, ev);
    }
    bprintf(b, "}");
}

static const char *name_for(const struct health_sample *s, int q)
{
    if (s->kind != HEALTH_GPU) return hq_meta[q].prom_host;
    return !strcmp(s->vendor, "nvidia") ? hq_meta[q].prom_nv : !strcmp(s->vendor, "amd") ? hq_meta[q].prom_amd : NULL;
}

static void value(struct buf *b, double v)
{
    /* the shortest of %.15g / %.17g that reads back as the same double
     * (81.265, not 81.265000000000001) */
    char t[40];
    snprintf(t, sizeof t, "%.15g", v);
    if (strtod(t, NULL) != v) snprintf(t, sizeof t, "%.17g", v);
    bprintf(b, " %s\n", t);
}

char *health_prom_render(const struct health_sample *s, int n, const struct health_eval *ev)
{
    struct buf b = {malloc(8192), 0, 8192, 0};
    if (!b.p) return NULL;
    b.p[0] = 0;
    /* one family per distinct name: walk quantities, then the three naming schemes */
    for (int q = 0; q < HQ_COUNT; q++) {
        const char *names[3] = {hq_meta[q].prom_nv, hq_meta[q].prom_amd, hq_meta[q].prom_host};
        for (int k = 0; k < 3; k++) {
            if (!names[k]) continue;
            int header = 0;
            for (int i = 0; i < n; i++) {
                const char *nm = name_for(&s[i], q);
                if (!nm || strcmp(nm, names[k]) || !s[i].ok[q]) continue;
                if (!header) {
                    bprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", names[k], hq_meta[q].help, names[k]);
                    header = 1;
                }
                bprintf(&b, "%s", names[k]);
                labels(&b, &s[i], NULL, NULL);
                value(&b, s[i].v[q]);
            }
        }
    }
    /* decoded throttle reasons, one series per active reason */
    int header = 0;
    for (int i = 0; i < n; i++) {
        if (!s[i].ok[HQ_THROTTLE] || !s[i].throttle_bits) continue;
        char names[512];
        health_throttle_names(s[i].vendor, s[i].throttle_bits, names, sizeof names);
        if (!header) {
            bprintf(&b, "# HELP plumb_health_throttle_reason 1 for each active clock-event (throttle) reason.\n"
                        "# TYPE plumb_health_throttle_reason gauge\n");
            header = 1;
        }
        char *save = NULL;
        for (char *t = strtok_r(names, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            bprintf(&b, "plumb_health_throttle_reason");
            labels(&b, &s[i], "reason", t);
            value(&b, 1);
        }
    }
    bprintf(&b, "# HELP plumb_health_alerts Number of health thresholds currently crossed on the device.\n"
                "# TYPE plumb_health_alerts gauge\n");
    for (int i = 0; i < n; i++) {
        char active[256] = "";
        int c = ev ? health_eval_active(ev, s[i].device, active, sizeof active) : 0;
        bprintf(&b, "plumb_health_alerts");
        labels(&b, &s[i], NULL, NULL);
        value(&b, c);
    }
    header = 0;
    for (int i = 0; i < n && ev; i++) {
        char active[256] = "";
        if (!health_eval_active(ev, s[i].device, active, sizeof active)) continue;
        if (!header) {
            bprintf(&b, "# HELP plumb_health_alert 1 for each crossed threshold, by quantity.\n"
                        "# TYPE plumb_health_alert gauge\n");
            header = 1;
        }
        char *save = NULL;
        for (char *t = strtok_r(active, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            bprintf(&b, "plumb_health_alert");
            labels(&b, &s[i], "quantity", t);
            value(&b, 1);
        }
    }
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
