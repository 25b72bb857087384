#include "cli/commands.h"
#include <stddef.h>

/* Alphabetical; add a line per new cmd_<name>.c. */
const struct command plumb_commands[] = {
    {"version", "print the version and build configuration", cmd_version},
    {NULL, NULL, NULL},
};
