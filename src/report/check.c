#include "report/check.h"
#include "core/file.h"
#include "core/timer.h"
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <stdio.h>
#include <string.h>

const char *check_status_name(enum check_status s)
{
    static const char *n[] = {"pass", "warn", "fail", "skip"};
    return n[s];
}

int check_begin(struct check_result *r, const char *name, const char *device)
{
    memset(r, 0, sizeof *r);
    r->obj = json_object();
    if (!r->obj) return PLUMB_ENOMEM;
    json_object_set_new(r->obj, "name", json_string(name));
    if (device) json_object_set_new(r->obj, "device", json_string(device));
    json_object_set_new(r->obj, "metrics", json_array());
    json_object_set_new(r->obj, "thresholds", json_object());
    json_object_set_new(r->obj, "artifacts", json_array());
    json_object_set_new(r->obj, "details", json_object());
    r->status = CHECK_PASS;
    r->t_start = timer_now();
    return PLUMB_OK;
}

void check_metric(struct check_result *r, const char *name, double value, const char *unit)
{
    json_t *m = json_object();
    json_object_set_new(m, "name", json_string(name));
    json_object_set_new(m, "value", json_real(value));
    json_object_set_new(m, "unit", json_string(unit ? unit : ""));
    json_array_append_new(json_object_get(r->obj, "metrics"), m);
}

void check_threshold(struct check_result *r, const char *name, double value)
{
    json_object_set_new(json_object_get(r->obj, "thresholds"), name, json_real(value));
}

void check_set_status(struct check_result *r, enum check_status s, const char *fmt, ...)
{
    int rank_new = s == CHECK_SKIP ? 0 : (int)s, rank_old = r->status == CHECK_SKIP ? 0 : (int)r->status;
    int replace = rank_new > rank_old || (s == CHECK_SKIP && r->status == CHECK_PASS) ||
                  (s == r->status && !json_object_get(r->obj, "reason"));
    if (!replace) return;
    r->status = s;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    json_object_set_new(r->obj, "reason", json_string(buf));
}

/* The folders this process made (run folder, check key) and the run number
 * of each run folder it opened. Small: a command opens one run folder; the
 * test binary a few hundred. */
#define REG_MAX 1024
static struct {
    char run_dir[PATH_MAX];
    char key[160];  /* "<name>[-<device>]" */
    char dir[PATH_MAX];
} g_dirs[REG_MAX];
static int g_ndirs;
static struct {
    char run_dir[PATH_MAX];
    int run;
} g_runs[64];
static int g_nruns;
static pthread_mutex_t g_reg = PTHREAD_MUTEX_INITIALIZER;

void check_register_run(const char *run_dir, int run)
{
    pthread_mutex_lock(&g_reg);
    int i = 0;
    while (i < g_nruns && strcmp(g_runs[i].run_dir, run_dir)) i++;
    if (i == g_nruns && g_nruns < 64) g_nruns++;
    else if (i == g_nruns) i = (int)(run % 64); /* full: reuse a slot */
    snprintf(g_runs[i].run_dir, sizeof g_runs[i].run_dir, "%s", run_dir);
    g_runs[i].run = run;
    /* a new run of this folder: folders of an earlier run are not reused */
    for (int k = 0; k < g_ndirs; k++)
        if (!strcmp(g_dirs[k].run_dir, run_dir)) g_dirs[k] = g_dirs[--g_ndirs], k--;
    pthread_mutex_unlock(&g_reg);
}

static void check_key(const char *name, const char *dev, char *key, size_t n)
{
    if (dev && strcmp(dev, "cpu")) {
        char safe[64];
        snprintf(safe, sizeof safe, "%s", dev);
        for (char *p = safe; *p; p++)
            if (*p == ':') *p = '-';
        snprintf(key, n, "%s-%s", name, safe);
    } else {
        snprintf(key, n, "%s", name);
    }
}

int check_artifact_dir_find(const char *run_dir, const char *name, const char *device, char *out, size_t n)
{
    char key[160];
    check_key(name, device, key, sizeof key);
    int found = 0;
    out[0] = 0;
    pthread_mutex_lock(&g_reg);
    for (int k = 0; k < g_ndirs && !found; k++)
        if (!strcmp(g_dirs[k].run_dir, run_dir) && !strcmp(g_dirs[k].key, key))
            snprintf(out, n, "%s", g_dirs[k].dir), found = 1;
    pthread_mutex_unlock(&g_reg);
    return found;
}

void check_artifact_rel(const struct check_ctx *ctx, const char *abs, char *out, size_t n)
{
    size_t L = ctx && ctx->run_dir ? strlen(ctx->run_dir) : 0;
    if (L && !strncmp(abs, ctx->run_dir, L) && abs[L] == '/') snprintf(out, n, "%s", abs + L + 1);
    else {
        const char *p = strstr(abs, "/checks/");
        snprintf(out, n, "%s", p ? p + 1 : abs);
    }
}

int check_artifact_dir(const struct check_ctx *ctx, const struct check_result *r, char *out,
                       size_t n, plumb_err *e)
{
    if (!ctx->run_dir) return err_set(e, PLUMB_EUSAGE, "no run folder to write artifacts to");
    const char *name = json_string_value(json_object_get(r->obj, "name"));
    const char *dev = json_string_value(json_object_get(r->obj, "device"));
    char key[160], checks[PATH_MAX];
    check_key(name ? name : "check", dev, key, sizeof key);
    if (check_artifact_dir_find(ctx->run_dir, name ? name : "check", dev, out, n)) return file_mkdirs(out, e);
    int w = snprintf(checks, sizeof checks, "%s/checks", ctx->run_dir);
    if (w < 0 || (size_t)w >= sizeof checks) return err_set(e, PLUMB_EUSAGE, "run folder path too long");
    int rc = file_mkdirs(checks, e);
    if (rc) return rc;
    int run = 0;
    pthread_mutex_lock(&g_reg);
    for (int i = 0; i < g_nruns; i++)
        if (!strcmp(g_runs[i].run_dir, ctx->run_dir)) run = g_runs[i].run;
    pthread_mutex_unlock(&g_reg);
    /* the plain name when it is new, else -run<N> (then N+1, ... should that exist too) */
    for (int k = run > 1 ? run : 2, tries = 0;; tries++) {
        if (tries == 0) w = snprintf(out, n, "%s/%s", checks, key);
        else w = snprintf(out, n, "%s/%s-run%d", checks, key, k++);
        if (w < 0 || (size_t)w >= n) return err_set(e, PLUMB_EUSAGE, "run folder path too long");
        if (mkdir(out, 0755) == 0) break;
        if (errno != EEXIST) return err_set(e, PLUMB_EIO, "mkdir %s: %s", out, strerror(errno));
        if (tries > 10000) return err_set(e, PLUMB_EIO, "%s: no free artifact folder name", out);
    }
    pthread_mutex_lock(&g_reg);
    if (g_ndirs == REG_MAX) g_ndirs--; /* forget the newest: only reuse within a check is lost */
    snprintf(g_dirs[g_ndirs].run_dir, sizeof g_dirs[0].run_dir, "%s", ctx->run_dir);
    snprintf(g_dirs[g_ndirs].key, sizeof g_dirs[0].key, "%s", key);
    snprintf(g_dirs[g_ndirs].dir, sizeof g_dirs[0].dir, "%s", out);
    g_ndirs++;
    pthread_mutex_unlock(&g_reg);
    return PLUMB_OK;
}

void check_artifact(struct check_result *r, const char *relpath)
{
    json_array_append_new(json_object_get(r->obj, "artifacts"), json_string(relpath));
}

void check_detail(struct check_result *r, const char *key, json_t *value)
{
    json_object_set_new(json_object_get(r->obj, "details"), key, value);
}

void check_end(struct check_result *r)
{
    json_object_set_new(r->obj, "duration_s", json_real(timer_now() - r->t_start));
    json_object_set_new(r->obj, "status", json_string(check_status_name(r->status)));
}

void check_free(struct check_result *r)
{
    json_decref(r->obj);
    r->obj = NULL;
}
