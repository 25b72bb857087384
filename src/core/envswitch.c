#include "core/envswitch.h"
#include <stdlib.h>
#include <string.h>

int env_switch(const char *name, const char *one_means, int *on, plumb_err *e)
{
    const char *v = getenv(name);
    *on = !(v && !strcmp(v, "0"));
    if (v && *v && strcmp(v, "0") && strcmp(v, "1"))
        return err_set(e, PLUMB_EUSAGE, "%s=%s: expected 1 (%s) or 0", name, v, one_means);
    return PLUMB_OK;
}
