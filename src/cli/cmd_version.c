/* plumb version, and cli_fail shared by every cmd_*.c. */
#include "cli/commands.h"
#include "core/err.h"
#include "cli/args.h"
#include <stdio.h>

#ifndef PLUMB_VERSION
#define PLUMB_VERSION "0.1.0-dev"
#endif

int cli_fail(const char *cmd, const void *err)
{
    const plumb_err *e = err;
    fprintf(stderr, "plumb %s: %s\n", cmd, e->msg[0] ? e->msg : err_code_name(e->code));
    return err_exit_code(e->code);
}

int cmd_version(int argc, char **argv)
{
    static const struct opt opts[] = {{0}};
    plumb_err e = {0};
    if (argv) {
        int rc = args_parse("plumb version", "Print the version and the compiler plumb was built with.",
                            opts, argc, argv, NULL, 0, NULL, &e);
        if (rc == ARGS_HELP) return 0;
        if (rc) return cli_fail("version", &e);
    }
    printf("plumb %s (built %s %s, %s)\n", PLUMB_VERSION, __DATE__, __TIME__,
#ifdef __clang__
           "clang " __clang_version__
#else
           "gcc " __VERSION__
#endif
    );
    return 0;
}

