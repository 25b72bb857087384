#include "core/err.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void err_keep_first(int rc1, const plumb_err *e1, int *rc, plumb_err *e)
{
#pragma omp critical(plumb_err_keep_first)
    if (!*rc) {
        *rc = rc1;
        if (e) *e = *e1;
    }
}

int err_set(plumb_err *e, int code, const char *fmt, ...)
{
    if (!e) return code;
    e->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return code;
}

int err_wrap(plumb_err *e, const char *fmt, ...)
{
    if (!e) return PLUMB_EINTERNAL;
    char prefix[512], old[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    snprintf(e->msg, sizeof e->msg, "%s: %s", prefix, old);
    return e->code;
}

void err_clear(plumb_err *e)
{
    if (!e) return;
    e->code = PLUMB_OK;
    e->msg[0] = '\0';
}

const char *err_code_name(int code)
{
    switch (code) {
    case PLUMB_OK: return "ok";
    case PLUMB_EFAIL: return "check failed";
    case PLUMB_EUSAGE: return "usage";
    case PLUMB_EINTERNAL: return "internal";
    case PLUMB_EIO: return "io";
    case PLUMB_ENOMEM: return "out of memory";
    case PLUMB_EDEVICE: return "device";
    case PLUMB_ETIMEOUT: return "timeout";
    case PLUMB_ECORRUPT: return "corrupt";
    case PLUMB_EUNSUPPORTED: return "unsupported";
    default: return "unknown";
    }
}

int err_exit_code(int code)
{
    switch (code) {
    case PLUMB_OK: return 0;
    case PLUMB_EFAIL: return 1;
    case PLUMB_EUSAGE: return 2;
    default: return 3;
    }
}
