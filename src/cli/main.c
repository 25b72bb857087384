/* plumb: dispatch to one subcommand. */
#include "cli/commands.h"
#include "core/err.h"
#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: plumb COMMAND [options]\n\n"
               "plumb accepts GPU training platforms (CUDA, ROCm, CPU) and trains reference\n"
               "models on them. Exit codes: 0 pass, 1 a check failed, 2 usage or input error,\n"
               "3 internal error.\n\ncommands:\n");
    for (const struct command *c = plumb_commands; c->name; c++) fprintf(f, "  %-10s %s\n", c->name, c->summary);
    fprintf(f, "\nRun 'plumb COMMAND --help' for a command's options and their defaults.\n");
}

int main(int argc, char **argv)
{
    /* Line-buffered stdout even into a file or pipe: a long run that a
     * scheduler or `timeout` kills keeps every line it printed. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) return cmd_version(0, NULL);
    for (const struct command *c = plumb_commands; c->name; c++)
        if (!strcmp(argv[1], c->name)) return c->run(argc - 1, argv + 1);
    fprintf(stderr, "plumb: unknown command '%s' (run 'plumb --help' for the list)\n", argv[1]);
    return 2;
}
