/* Linux provider: the host ("cpu") and each NUMA node ("numa<N>"), so a
 * CPU-only host is monitored too. Sources:
 *   temperature: hwmon chips named coretemp / k10temp / zenpower / cpu_thermal
 *                (temp*_input, millidegrees; the hottest one), else thermal zones
 *                of type x86_pkg_temp / cpu-thermal / cpu_thermal / soc_thermal;
 *   memory:      /proc/meminfo MemTotal - MemAvailable;
 *   load:        /proc/loadavg;
 *   NUMA:        /sys/devices/system/node/node<N>/meminfo (MemTotal, MemUsed).
 * The host's name is its CPU model from hwloc (core/hostinfo.h), like every
 * other reader of CPU facts. PLUMB_HEALTH_SYSFS and PLUMB_HEALTH_PROCFS
 * replace /sys and /proc for the sensors and counters above (tests). */
#include "health/health.h"
#include "core/hostinfo.h"
#include "core/timer.h"
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct linux_state {
    char sys[200], proc[200];
    char model[96];
};

static int read_line(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int ok = fgets(buf, (int)n, f) != NULL;
    fclose(f);
    if (ok) buf[strcspn(buf, "\n")] = 0;
    return ok;
}

static int linux_open(struct health_provider *p, plumb_err *e)
{
    struct linux_state *st = calloc(1, sizeof *st);
    if (!st) return err_set(e, PLUMB_ENOMEM, "linux: out of memory");
    const char *s = getenv("PLUMB_HEALTH_SYSFS"), *pr = getenv("PLUMB_HEALTH_PROCFS");
    snprintf(st->sys, sizeof st->sys, "%s", s && *s ? s : "/sys");
    snprintf(st->proc, sizeof st->proc, "%s", pr && *pr ? pr : "/proc");
    char path[300], line[256];
    snprintf(path, sizeof path, "%s/meminfo", st->proc);
    if (!read_line(path, line, sizeof line)) {
        int rc = err_set(e, PLUMB_EUNSUPPORTED, "linux: cannot read %s", path);
        free(st);
        return rc;
    }
    snprintf(st->model, sizeof st->model, "%s", hostinfo_cpu_model(hostinfo_this()));
    p->state = st;
    p->ndev = 1;
    return PLUMB_OK;
}

/* Hottest CPU temperature in C; 0 when no sensor was found. */
static int cpu_temp(const struct linux_state *st, double *out)
{
    static const char *chips[] = {"coretemp", "k10temp", "zenpower", "cpu_thermal", NULL};
    static const char *zones[] = {"x86_pkg_temp", "cpu-thermal", "cpu_thermal", "soc_thermal", NULL};
    char dir[300], path[600], line[128];
    double best = -1e9;
    int found = 0;
    snprintf(dir, sizeof dir, "%s/class/hwmon", st->sys);
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d))) {
            if (de->d_name[0] == '.') continue;
            snprintf(path, sizeof path, "%s/%s/name", dir, de->d_name);
            if (!read_line(path, line, sizeof line)) continue;
            int match = 0;
            for (int i = 0; chips[i]; i++) match |= !strcmp(line, chips[i]);
            if (!match) continue;
            for (int k = 1; k <= 64; k++) {
                snprintf(path, sizeof path, "%s/%s/temp%d_input", dir, de->d_name, k);
                if (!read_line(path, line, sizeof line)) continue;
                char *end;
                double v = strtod(line, &end) / 1000.0;
                if (end == line) continue;
                found = 1;
                if (v > best) best = v;
            }
        }
        closedir(d);
    }
    if (found) {
        *out = best;
        return 1;
    }
    snprintf(dir, sizeof dir, "%s/class/thermal", st->sys);
    d = opendir(dir);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d))) {
            if (strncmp(de->d_name, "thermal_zone", 12)) continue;
            snprintf(path, sizeof path, "%s/%s/type", dir, de->d_name);
            if (!read_line(path, line, sizeof line)) continue;
            int match = 0;
            for (int i = 0; zones[i]; i++) match |= !strcmp(line, zones[i]);
            if (!match) continue;
            snprintf(path, sizeof path, "%s/%s/temp", dir, de->d_name);
            if (!read_line(path, line, sizeof line)) continue;
            char *end;
            double v = strtod(line, &end) / 1000.0;
            if (end == line) continue;
            found = 1;
            if (v > best) best = v;
        }
        closedir(d);
    }
    if (found) *out = best;
    return found;
}

/* Reads "Key: <n> kB" lines; key without the trailing colon. Matches the key
 * anywhere in the line so NUMA "Node 0 MemTotal:" lines work too. */
static int meminfo_kb(const char *path, const char *key, double *kb)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[256], pat[64];
    snprintf(pat, sizeof pat, "%s:", key);
    int ok = 0;
    while (fgets(line, sizeof line, f)) {
        char *k = strstr(line, pat);
        if (!k || (k != line && k[-1] != ' ')) continue;
        char *end;
        double v = strtod(k + strlen(pat), &end);
        if (end != k + strlen(pat)) {
            *kb = v;
            ok = 1;
        }
        break;
    }
    fclose(f);
    return ok;
}

static void base(struct health_sample *s, const char *dev, int kind, int index, const char *name)
{
    memset(s, 0, sizeof *s);
    snprintf(s->device, sizeof s->device, "%s", dev);
    snprintf(s->vendor, sizeof s->vendor, "linux");
    snprintf(s->name, sizeof s->name, "%s", name);
    s->kind = kind;
    s->index = index;
    s->time = timer_wall();
}

static int linux_sample(struct health_provider *p, struct health_sample *out, int max, int *n, plumb_err *e)
{
    struct linux_state *st = p->state;
    if (*n >= max) return err_set(e, PLUMB_EINTERNAL, "linux: more than %d devices", max);
    struct health_sample *s = &out[(*n)++];
    base(s, "cpu", HEALTH_HOST, 0, st->model);
    double t, tot, avail, v;
    if (cpu_temp(st, &t)) hs_set(s, HQ_TEMP, t);
    char path[300], line[256];
    snprintf(path, sizeof path, "%s/meminfo", st->proc);
    if (meminfo_kb(path, "MemTotal", &tot) && meminfo_kb(path, "MemAvailable", &avail)) {
        hs_set(s, HQ_MEM_TOTAL, tot / 1024.0);
        hs_set(s, HQ_MEM_USED, (tot - avail) / 1024.0);
    }
    snprintf(path, sizeof path, "%s/loadavg", st->proc);
    if (read_line(path, line, sizeof line)) {
        char *end;
        v = strtod(line, &end);
        if (end != line) hs_set(s, HQ_LOAD1, v);
    }
    /* NUMA nodes in index order */
    for (int node = 0; node < 1024; node++) {
        snprintf(path, sizeof path, "%s/devices/system/node/node%d/meminfo", st->sys, node);
        if (!meminfo_kb(path, "MemTotal", &tot)) break;
        if (*n >= max) return err_set(e, PLUMB_EINTERNAL, "linux: more than %d devices", max);
        struct health_sample *ns = &out[(*n)++];
        char dev[32], nm[48];
        snprintf(dev, sizeof dev, "numa%d", node);
        snprintf(nm, sizeof nm, "NUMA node %d", node);
        base(ns, dev, HEALTH_NUMA, node, nm);
        hs_set(ns, HQ_MEM_TOTAL, tot / 1024.0);
        if (meminfo_kb(path, "MemUsed", &v)) hs_set(ns, HQ_MEM_USED, v / 1024.0);
    }
    return PLUMB_OK;
}

static json_t *linux_info(struct health_provider *p)
{
    struct linux_state *st = p->state;
    json_t *o = json_object();
    json_object_set_new(o, "provider", json_string("linux"));
    json_object_set_new(o, "cpu", json_string(st->model));
    return o;
}

static void linux_close(struct health_provider *p)
{
    free(p->state);
    p->state = NULL;
}

const struct health_provider_ops health_linux_ops = {"linux", linux_open, linux_sample, linux_info, linux_close};
