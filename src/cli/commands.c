#include "cli/commands.h"
#include <stddef.h>

/* Alphabetical; add a line per new cmd_<name>.c. */
const struct command plumb_commands[] = {
    {"report", "re-render report.html from a run folder's results.json", cmd_report},
    {"version", "print the version and build configuration", cmd_version},
    {NULL, NULL, NULL},
};
