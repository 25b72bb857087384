/* An environment variable that switches a path on or off, on by default
 * (PLUMB_GPT_ACT16, PLUMB_RESNET_ACT16, PLUMB_RESNET_MASK_FROM_X). */
#ifndef PLUMB_CORE_ENVSWITCH_H
#define PLUMB_CORE_ENVSWITCH_H
#include "core/err.h"

/* *on = 0 where name is "0", else 1 (unset, "" or "1"); any other value is
 * PLUMB_EUSAGE naming the variable, its value and what 1 means (one_means) */
int env_switch(const char *name, const char *one_means, int *on, plumb_err *e);

#endif
