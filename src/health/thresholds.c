/* Thresholds (the key = value file documented in health.h) and their
 * evaluation into edge-triggered alerts. */
#include "health/health.h"
#include "core/file.h"
#include "core/kvfile.h"
#include "core/log.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_THROTTLE "hw_slowdown,sw_thermal,hw_thermal,hw_power_brake,temp_edge,temp_hotspot,temp_mem,vrhot0,vrhot1,prochot_gfx"

void health_thresholds_default(struct health_thresholds *t)
{
    memset(t, 0, sizeof *t);
    t->gpu_temp_c = 85;
    t->gpu_temp_critical_c = 90;
    t->mem_temp_c = 95;
    t->cpu_temp_c = 95;
    t->power_w = 450;
    t->ecc_per_hour = 10;
    t->ecc_window_s = 3600;
    t->uncorrected_ecc = 1;
    t->pcie_width_downgrade = 1;
    t->pcie_gen_downgrade = 0;
    t->xid = 1;
    snprintf(t->throttle, sizeof t->throttle, "%s", DEFAULT_THROTTLE);
}

static int parse_num(const char *origin, int line, const char *key, const char *v, double *out, plumb_err *e)
{
    if (!strcmp(v, "off") || !strcmp(v, "none")) {
        *out = 0;
        return PLUMB_OK;
    }
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(x) || x < 0)
        return err_set(e, PLUMB_EUSAGE, "%s:%d: %s = '%s' is not a non-negative number (or off)", origin, line, key, v);
    *out = x;
    return PLUMB_OK;
}

static int parse_flag(const char *origin, int line, const char *key, const char *v, int *out, plumb_err *e)
{
    if (!strcmp(v, "1") || !strcmp(v, "on") || !strcmp(v, "true") || !strcmp(v, "yes")) *out = 1;
    else if (!strcmp(v, "0") || !strcmp(v, "off") || !strcmp(v, "false") || !strcmp(v, "no")) *out = 0;
    else return err_set(e, PLUMB_EUSAGE, "%s:%d: %s = '%s' is not 1/0/on/off", origin, line, key, v);
    return PLUMB_OK;
}

static int health_key(void *arg, const char *origin, int lineno, const char *section, const char *k, const char *v,
                      plumb_err *e)
{
    struct health_thresholds *t = arg;
    if (section)
        return err_set(e, PLUMB_EUSAGE, "%s:%d: health thresholds have no sections ('%s' is under [%s])", origin, lineno,
                       k, section);
    struct {
        const char *key;
        double *num;
        int *flag;
    } keys[] = {
        {"gpu_temp_c", &t->gpu_temp_c, NULL},   {"gpu_temp_critical_c", &t->gpu_temp_critical_c, NULL},
        {"mem_temp_c", &t->mem_temp_c, NULL},   {"cpu_temp_c", &t->cpu_temp_c, NULL},
        {"power_w", &t->power_w, NULL},         {"ecc_per_hour", &t->ecc_per_hour, NULL},
        {"ecc_window_s", &t->ecc_window_s, NULL}, {"uncorrected_ecc", NULL, &t->uncorrected_ecc},
        {"pcie_width_downgrade", NULL, &t->pcie_width_downgrade},
        {"pcie_gen_downgrade", NULL, &t->pcie_gen_downgrade}, {"xid", NULL, &t->xid},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        if (strcmp(k, keys[i].key)) continue;
        return keys[i].num ? parse_num(origin, lineno, k, v, keys[i].num, e)
                           : parse_flag(origin, lineno, k, v, keys[i].flag, e);
    }
    if (!strcmp(k, "throttle")) {
        uint64_t bits;
        int rc;
        if (strlen(v) >= sizeof t->throttle) return err_set(e, PLUMB_EUSAGE, "%s:%d: throttle list too long", origin, lineno);
        if ((rc = health_throttle_parse("nvidia", v, &bits, e))) return err_wrap(e, "%s:%d", origin, lineno);
        snprintf(t->throttle, sizeof t->throttle, "%s", v);
        return PLUMB_OK;
    }
    return err_set(e, PLUMB_EUSAGE,
                   "%s:%d: unknown key '%s' (expected gpu_temp_c, gpu_temp_critical_c, mem_temp_c, "
                   "cpu_temp_c, power_w, ecc_per_hour, ecc_window_s, uncorrected_ecc, throttle, "
                   "pcie_width_downgrade, pcie_gen_downgrade, xid)", origin, lineno, k);
}

int health_thresholds_parse(struct health_thresholds *t, const char *text, const char *origin, plumb_err *e)
{
    int rc = kvfile_parse(text, origin, health_key, t, e);
    if (!rc && t->ecc_per_hour > 0 && t->ecc_window_s <= 0)
        rc = err_set(e, PLUMB_EUSAGE, "%s: ecc_window_s must be > 0 when ecc_per_hour is set", origin);
    return rc;
}

int health_thresholds_load(struct health_thresholds *t, const char *path, plumb_err *e)
{
    char *text = NULL;
    size_t len = 0;
    /* a small text file: /dev/zero was read into memory without end, a FIFO
     * blocked for ever; the caller names where the path came from */
    int rc = file_read_input(path, KVFILE_READ_CAP, &text, &len, e);
    if (rc) return rc;
    rc = health_thresholds_parse(t, text, path, e);
    free(text);
    return rc;
}

json_t *health_thresholds_json(const struct health_thresholds *t)
{
    json_t *o = json_object();
    json_object_set_new(o, "gpu_temp_c", json_real(t->gpu_temp_c));
    json_object_set_new(o, "gpu_temp_critical_c", json_real(t->gpu_temp_critical_c));
    json_object_set_new(o, "mem_temp_c", json_real(t->mem_temp_c));
    json_object_set_new(o, "cpu_temp_c", json_real(t->cpu_temp_c));
    json_object_set_new(o, "power_w", json_real(t->power_w));
    json_object_set_new(o, "ecc_per_hour", json_real(t->ecc_per_hour));
    json_object_set_new(o, "ecc_window_s", json_real(t->ecc_window_s));
    json_object_set_new(o, "uncorrected_ecc", json_integer(t->uncorrected_ecc));
    json_object_set_new(o, "throttle", json_string(t->throttle));
    json_object_set_new(o, "pcie_width_downgrade", json_integer(t->pcie_width_downgrade));
    json_object_set_new(o, "pcie_gen_downgrade", json_integer(t->pcie_gen_downgrade));
    json_object_set_new(o, "xid", json_integer(t->xid));
    return o;
}

/* ---- evaluation ---- */
void health_eval_init(struct health_eval *ev, const struct health_thresholds *t)
{
    memset(ev, 0, sizeof *ev);
    ev->thr = *t;
}

static struct health_eval_dev *dev_state(struct health_eval *ev, const char *device)
{
    for (int i = 0; i < ev->ndev; i++)
        if (!strcmp(ev->dev[i].device, device)) return &ev->dev[i];
    if (ev->ndev >= HEALTH_MAX_DEVICES) return NULL;
    struct health_eval_dev *d = &ev->dev[ev->ndev++];
    memset(d, 0, sizeof *d);
    snprintf(d->device, sizeof d->device, "%s", device);
    return d;
}

static const char *rule_quantity[HR_COUNT] = {
    [HR_TEMP] = "temp_c", [HR_TEMP_CRIT] = "temp_critical", [HR_MEM_TEMP] = "mem_temp_c", [HR_POWER] = "power_w",
    [HR_ECC_RATE] = "ecc_per_hour", [HR_ECC_UNCORR] = "ecc_uncorrected", [HR_THROTTLE] = "throttle",
    [HR_PCIE_WIDTH] = "pcie_width", [HR_PCIE_GEN] = "pcie_gen", [HR_XID] = "xid",
};

/* ECC errors in the trailing window, scaled to one hour. The baseline is the
 * newest history point at or before now - window (or the oldest point when
 * monitoring started inside the window). History points are kept at least
 * window/256 apart so the ring always spans the window. */
static double ecc_rate(struct health_eval_dev *d, double now, double count, double window)
{
    int last = (d->hist_head + HEALTH_ECC_HIST - 1) % HEALTH_ECC_HIST;
    if (d->nhist && count < d->hist_n[last]) d->nhist = 0; /* counter reset (driver reload) */
    if (!d->nhist || now - d->hist_t[last] >= window / 256) {
        d->hist_t[d->hist_head] = now;
        d->hist_n[d->hist_head] = count;
        d->hist_head = (d->hist_head + 1) % HEALTH_ECC_HIST;
        if (d->nhist < HEALTH_ECC_HIST) d->nhist++;
    }
    int oldest = (d->hist_head + HEALTH_ECC_HIST - d->nhist) % HEALTH_ECC_HIST;
    double base = d->hist_n[oldest];
    for (int k = 0; k < d->nhist; k++) {
        int i = (oldest + k) % HEALTH_ECC_HIST;
        if (d->hist_t[i] <= now - window) base = d->hist_n[i];
        else break;
    }
    return (count - base) * 3600.0 / window;
}

static void fire(struct health_eval_dev *d, const struct health_sample *s, int rule, int now_true, double value,
                  double limit, int critical, const char *detail, struct health_alert *out, int max, int *nout)
{
    int was = d->active[rule];
    d->active[rule] = (unsigned char)now_true;
    d->active_value[rule] = value;
    if (!now_true || was) return;
    const char *q = rule_quantity[rule];
    if (critical) log_error("health alert: %s %s = %.15g >= %.15g (critical)%s%s", s->device, q, value, limit,
                            detail && *detail ? ": " : "", detail ? detail : "");
    else log_warn("health alert: %s %s = %.15g (limit %.15g)%s%s", s->device, q, value, limit, detail && *detail ? ": " : "",
                  detail ? detail : "");
    if (!out || *nout >= max) return;
    struct health_alert *a = &out[(*nout)++];
    memset(a, 0, sizeof *a);
    snprintf(a->device, sizeof a->device, "%s", s->device);
    snprintf(a->uuid, sizeof a->uuid, "%s", s->uuid);
    snprintf(a->vendor, sizeof a->vendor, "%s", s->vendor);
    snprintf(a->quantity, sizeof a->quantity, "%s", q);
    a->value = value;
    a->limit = limit;
    a->time = s->time;
    a->critical = critical;
    if (detail) snprintf(a->detail, sizeof a->detail, "%s", detail);
}

void health_eval_samples(struct health_eval *ev, const struct health_sample *ss, int n, struct health_alert *out,
                         int max, int *nout)
{
    const struct health_thresholds *t = &ev->thr;
    for (int i = 0; i < n; i++) {
        const struct health_sample *s = &ss[i];
        struct health_eval_dev *d = dev_state(ev, s->device);
        if (!d) continue;
        char detail[160];
        int gpu = s->kind == HEALTH_GPU;
        double tl = gpu ? t->gpu_temp_c : s->kind == HEALTH_HOST ? t->cpu_temp_c : 0;
        if (s->ok[HQ_TEMP] && tl > 0)
            fire(d, s, HR_TEMP, s->v[HQ_TEMP] >= tl, s->v[HQ_TEMP], tl, 0, NULL, out, max, nout);
        if (gpu && s->ok[HQ_TEMP] && t->gpu_temp_critical_c > 0)
            fire(d, s, HR_TEMP_CRIT, s->v[HQ_TEMP] >= t->gpu_temp_critical_c, s->v[HQ_TEMP],
                  t->gpu_temp_critical_c, 1, "critical temperature", out, max, nout);
        if (s->ok[HQ_MEM_TEMP] && t->mem_temp_c > 0)
            fire(d, s, HR_MEM_TEMP, s->v[HQ_MEM_TEMP] >= t->mem_temp_c, s->v[HQ_MEM_TEMP], t->mem_temp_c, 0, NULL,
                  out, max, nout);
        if (s->ok[HQ_POWER] && t->power_w > 0)
            fire(d, s, HR_POWER, s->v[HQ_POWER] >= t->power_w, s->v[HQ_POWER], t->power_w, 0, NULL, out, max, nout);
        /* ECC: driver-load counters when the device has them, else lifetime ones */
        int vol = s->ok[HQ_ECC_CORR_VOL] && s->ok[HQ_ECC_UNCORR_VOL];
        int agg = s->ok[HQ_ECC_CORR_AGG] && s->ok[HQ_ECC_UNCORR_AGG];
        if ((vol || agg) && t->ecc_per_hour > 0) {
            double c = vol ? s->v[HQ_ECC_CORR_VOL] + s->v[HQ_ECC_UNCORR_VOL]
                           : s->v[HQ_ECC_CORR_AGG] + s->v[HQ_ECC_UNCORR_AGG];
            double r = ecc_rate(d, s->time, c, t->ecc_window_s);
            snprintf(detail, sizeof detail, "%.0f errors in the last %.0f s", r * t->ecc_window_s / 3600.0,
                     t->ecc_window_s);
            fire(d, s, HR_ECC_RATE, r >= t->ecc_per_hour, r, t->ecc_per_hour, 0, detail, out, max, nout);
        }
        int uq = s->ok[HQ_ECC_UNCORR_VOL] ? HQ_ECC_UNCORR_VOL : s->ok[HQ_ECC_UNCORR_AGG] ? HQ_ECC_UNCORR_AGG : -1;
        if (uq >= 0 && t->uncorrected_ecc) {
            if (!d->have_uncorr || s->v[uq] < d->first_uncorr) {
                d->first_uncorr = s->v[uq];
                d->have_uncorr = 1;
            }
            double nnew = s->v[uq] - d->first_uncorr;
            snprintf(detail, sizeof detail, "%.0f new uncorrected ECC errors", nnew);
            fire(d, s, HR_ECC_UNCORR, nnew >= 1, nnew, 1, 0, detail, out, max, nout);
        }
        if (s->ok[HQ_THROTTLE] && t->throttle[0]) {
            uint64_t mask = 0;
            health_throttle_parse(s->vendor, t->throttle, &mask, NULL);
            uint64_t hit = s->throttle_bits & mask;
            health_throttle_names(s->vendor, hit, detail, sizeof detail);
            fire(d, s, HR_THROTTLE, hit != 0, (double)hit, (double)mask, 0, detail, out, max, nout);
        }
        if (t->pcie_width_downgrade && s->ok[HQ_PCIE_WIDTH] && s->ok[HQ_PCIE_WIDTH_MAX]) {
            snprintf(detail, sizeof detail, "x%.0f < max x%.0f", s->v[HQ_PCIE_WIDTH], s->v[HQ_PCIE_WIDTH_MAX]);
            fire(d, s, HR_PCIE_WIDTH, s->v[HQ_PCIE_WIDTH] < s->v[HQ_PCIE_WIDTH_MAX], s->v[HQ_PCIE_WIDTH],
                  s->v[HQ_PCIE_WIDTH_MAX], 0, detail, out, max, nout);
        }
        if (t->pcie_gen_downgrade && s->ok[HQ_PCIE_GEN] && s->ok[HQ_PCIE_GEN_MAX]) {
            snprintf(detail, sizeof detail, "gen %.0f < max gen %.0f", s->v[HQ_PCIE_GEN], s->v[HQ_PCIE_GEN_MAX]);
            fire(d, s, HR_PCIE_GEN, s->v[HQ_PCIE_GEN] < s->v[HQ_PCIE_GEN_MAX], s->v[HQ_PCIE_GEN],
                  s->v[HQ_PCIE_GEN_MAX], 0, detail, out, max, nout);
        }
        if (t->xid && s->ok[HQ_XID_COUNT]) {
            double nnew = s->v[HQ_XID_COUNT] - (d->have_xid ? d->last_xid_count : 0);
            d->last_xid_count = s->v[HQ_XID_COUNT];
            d->have_xid = 1;
            snprintf(detail, sizeof detail, "%.0f new critical events, last Xid %.0f", nnew,
                     s->ok[HQ_XID_LAST] ? s->v[HQ_XID_LAST] : 0.0);
            /* each sample with new events is a new crossing */
            if (nnew >= 1) d->active[HR_XID] = 0;
            fire(d, s, HR_XID, nnew >= 1, s->ok[HQ_XID_LAST] ? s->v[HQ_XID_LAST] : nnew, 1, 0, detail, out, max, nout);
        }
    }
}

int health_eval_active(const struct health_eval *ev, const char *device, char *names, size_t n)
{
    if (names && n) names[0] = 0;
    for (int i = 0; i < ev->ndev; i++) {
        if (strcmp(ev->dev[i].device, device)) continue;
        int c = 0;
        size_t len = 0;
        for (int r = 0; r < HR_COUNT; r++) {
            if (!ev->dev[i].active[r]) continue;
            if (names && len < n) {
                int w = snprintf(names + len, n - len, "%s%s", c ? "," : "", rule_quantity[r]);
                if (w > 0) len += (size_t)w;
            }
            c++;
        }
        return c;
    }
    return 0;
}

json_t *health_alert_json(const struct health_alert *a)
{
    json_t *o = json_object();
    json_object_set_new(o, "device", json_string(a->device));
    if (a->uuid[0]) json_object_set_new(o, "uuid", json_string(a->uuid));
    json_object_set_new(o, "vendor", json_string(a->vendor));
    json_object_set_new(o, "quantity", json_string(a->quantity));
    json_object_set_new(o, "value", json_real(a->value));
    json_object_set_new(o, "limit", json_real(a->limit));
    json_object_set_new(o, "time", json_real(a->time));
    json_object_set_new(o, "critical", json_boolean(a->critical));
    if (a->detail[0]) json_object_set_new(o, "detail", json_string(a->detail));
    return o;
}
