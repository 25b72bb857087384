/* Opening devices by spec and the thin synchronous wrappers. */
#include "dev/dev.h"
#include "dev/alloc.h"
#include "core/log.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct dev_backend *dev_backend_get(const char *name, plumb_err *e)
{
    if (!strcmp(name, "cpu")) return &cpu_backend;
    if (!strcmp(name, "cuda") || !strcmp(name, "hip")) return plugin_load(name, e);
    err_set(e, PLUMB_EUSAGE, "unknown device '%s' (expected cpu, cuda, hip, cuda:N or hip:N)", name);
    return NULL;
}

static int parse_spec(const char *spec, char *name, size_t n, int *ordinal, plumb_err *e)
{
    const char *colon = strchr(spec, ':');
    size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
    if (len == 0 || len >= n)
        return err_set(e, PLUMB_EUSAGE, "bad device '%s' (expected cpu, cuda, hip, cuda:N or hip:N)", spec);
    memcpy(name, spec, len);
    name[len] = '\0';
    *ordinal = 0;
    if (colon) {
        char *end;
        long v = strtol(colon + 1, &end, 10);
        if (*end || end == colon + 1 || v < 0 || v > 1024)
            return err_set(e, PLUMB_EUSAGE, "bad device ordinal in '%s' (expected a number >= 0)", spec);
        *ordinal = (int)v;
    }
    return PLUMB_OK;
}

int dev_open(const char *spec, struct dev **out, plumb_err *e)
{
    char name[16];
    int ordinal, rc;
    *out = NULL;
    if ((rc = parse_spec(spec, name, sizeof name, &ordinal, e))) return rc;
    const struct dev_backend *be = dev_backend_get(name, e);
    if (!be) return e ? e->code : PLUMB_EDEVICE;
    int count = 0;
    if ((rc = be->device_count(&count, e))) return rc;
    /* the cpu is one device on every host: cpu:N (N >= 1) names nothing that could be present, a
     * usage error (it was PLUMB_EDEVICE, exit 3 from plumb rng, numerics, bench and attribute) */
    if (ordinal >= count)
        return err_set(e, !strcmp(name, "cpu") ? PLUMB_EUSAGE : PLUMB_EDEVICE, "device %s: only %d %s device(s) present",
                       spec, count, name);
    struct dev *d = calloc(1, sizeof *d);
    if (!d) return err_set(e, PLUMB_ENOMEM, "out of host memory");
    d->be = be;
    d->ops = be->ops;
    d->ordinal = ordinal;
    snprintf(d->label, sizeof d->label, "%s%s%.0d", name, strcmp(name, "cpu") ? ":" : "", 0);
    if (strcmp(name, "cpu")) snprintf(d->label, sizeof d->label, "%s:%d", name, ordinal);
    else snprintf(d->label, sizeof d->label, "cpu");
    if ((rc = alloc_create(d, e))) {
        free(d);
        return rc;
    }
    if ((rc = be->open(d, ordinal, e))) {
        alloc_destroy(d);
        free(d);
        return rc;
    }
    *out = d;
    return PLUMB_OK;
}

static int g_cpu_fallback = 1;

void dev_set_cpu_fallback(int allow) { g_cpu_fallback = allow; }

int dev_open_or_cpu(const char *spec, struct dev **out, plumb_err *e)
{
    plumb_err e2 = {0};
    int rc = dev_open(spec, out, &e2);
    if (rc == PLUMB_EDEVICE && strncmp(spec, "cpu", 3) && g_cpu_fallback) {
        log_warn("%s unavailable (%s); falling back to the cpu", spec, e2.msg);
        return dev_open("cpu", out, e);
    }
    if (rc && e) *e = e2;
    return rc;
}

void dev_close(struct dev *d)
{
    if (!d) return;
    alloc_destroy(d);
    d->be->close(d);
    free(d);
}

int dev_set_numerics(struct dev *d, enum numerics mode, int allow_tf32, plumb_err *e)
{
    d->numerics = mode;
    d->allow_tf32 = allow_tf32;
    return d->be->set_numerics ? d->be->set_numerics(d, e) : PLUMB_OK;
}

int dev_list_available(char specs[][32], int max)
{
    int n = 0;
    if (n < max) snprintf(specs[n++], 32, "cpu");
    static const char *gpus[] = {"cuda", "hip"};
    for (int g = 0; g < 2; g++) {
        plumb_err e = {0};
        const struct dev_backend *be = dev_backend_get(gpus[g], &e);
        int count = 0;
        if (!be || be->device_count(&count, &e) != PLUMB_OK) continue;
        for (int i = 0; i < count && n < max; i++) snprintf(specs[n++], 32, "%s:%d", gpus[g], i);
    }
    return n;
}

int dev_upload(struct dev *d, void *dst, const void *src, size_t n, plumb_err *e)
{
    int rc = d->be->memcpy_async(d, NULL, dst, src, n, MEMCPY_H2D, e);
    return rc ? rc : d->be->stream_sync(d, NULL, e);
}

int dev_download(struct dev *d, void *dst, const void *src, size_t n, plumb_err *e)
{
    int rc = d->be->memcpy_async(d, NULL, dst, src, n, MEMCPY_D2H, e);
    return rc ? rc : d->be->stream_sync(d, NULL, e);
}

int dev_sync(struct dev *d, plumb_err *e) { return d->be->stream_sync(d, NULL, e); }

void *dev_stream_native(struct dev *d, dev_stream *s)
{
    return d->be->stream_native ? d->be->stream_native(d, s) : NULL;
}

int dev_stream_query(struct dev *d, dev_stream *s, int *done, plumb_err *e)
{
    if (!d->be->stream_query) return err_set(e, PLUMB_EUNSUPPORTED, "%s: the backend cannot query a stream", d->label);
    return d->be->stream_query(d, s, done, e);
}

int dev_spec_for_local_rank(const char *backend, int local_rank, int local_world, char spec[32], plumb_err *e)
{
    const struct dev_backend *be = dev_backend_get(backend, e);
    if (!be) return e ? e->code : PLUMB_EDEVICE;
    int count = 0;
    int rc = be->device_count(&count, e);
    if (rc) return rc;
    const char *var = !strcmp(backend, "cuda")          ? "CUDA_VISIBLE_DEVICES"
                      : getenv("HIP_VISIBLE_DEVICES") ? "HIP_VISIBLE_DEVICES"
                                                      : "ROCR_VISIBLE_DEVICES";
    const char *vis = getenv(var);
    if (local_rank < 0 || local_world < 1 || local_rank >= local_world || local_world > count)
        return err_set(e, PLUMB_EUSAGE, "%d ranks on this host but %d visible %s device%s (%s=%s): one rank per GPU",
                       local_world, count, backend, count == 1 ? "" : "s", var, vis ? vis : "(unset)");
    snprintf(spec, 32, "%s:%d", backend, local_rank);
    return PLUMB_OK;
}
