#include "report/check.h"
#include "core/file.h"
#include "core/timer.h"
#include <stdarg.h>
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

int check_artifact_dir(const struct check_ctx *ctx, const struct check_result *r, char *out,
                       size_t n, plumb_err *e)
{
    if (!ctx->run_dir) return err_set(e, PLUMB_EUSAGE, "no run folder to write artifacts to");
    const char *name = json_string_value(json_object_get(r->obj, "name"));
    const char *dev = json_string_value(json_object_get(r->obj, "device"));
    int w;
    if (dev && strcmp(dev, "cpu")) {
        char safe[64];
        snprintf(safe, sizeof safe, "%s", dev);
        for (char *p = safe; *p; p++)
            if (*p == ':') *p = '-';
        w = snprintf(out, n, "%s/checks/%s-%s", ctx->run_dir, name, safe);
    } else {
        w = snprintf(out, n, "%s/checks/%s", ctx->run_dir, name);
    }
    if (w < 0 || (size_t)w >= n) return err_set(e, PLUMB_EUSAGE, "run folder path too long");
    return file_mkdirs(out, e);
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
