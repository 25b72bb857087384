#include "cli/per_device.h"
#include "cli/commands.h"
#include "dev/dev.h"
#include "report/results.h"
#include <stdio.h>
#include <string.h>

int cli_run_per_device(const struct per_device_run *p, int argc, char **argv)
{
    plumb_err e = {0};
    char specs[16][32];
    int nspec = 0;
    if (!strcmp(p->device, "all")) nspec = dev_list_available(specs, 16);
    else snprintf(specs[nspec++], sizeof specs[0], "%s", p->device);
    struct results res;
    int have_res = 0;
    if (p->out) {
        char cmdline[512];
        snprintf(cmdline, sizeof cmdline, "plumb %s", p->cmd);
        for (int i = 1; i < argc; i++) {
            size_t L = strlen(cmdline);
            snprintf(cmdline + L, sizeof cmdline - L, " %s", argv[i]);
        }
        if (results_open(&res, p->out, cmdline, &e)) return cli_fail(p->cmd, &e);
        have_res = 1;
    }
    int failed = 0;
    for (int i = 0; i < nspec; i++) {
        struct check_ctx ctx = {.run_dir = have_res ? res.dir : NULL, .device = specs[i], .level = p->level,
                                .threads = p->threads};
        struct check_result r;
        if (p->run(&ctx, p->arg, &r, &e)) {
            if (have_res) results_close(&res);
            return cli_fail(p->cmd, &e);
        }
        p->print(&r);
        if (r.status == CHECK_FAIL) failed = 1;
        if (have_res) results_add_check(&res, &r);
        check_free(&r);
    }
    if (have_res) {
        if (results_write(&res, &e)) {
            results_close(&res);
            return cli_fail(p->cmd, &e);
        }
        printf("results: %s/results.json\n", res.dir);
        results_close(&res);
    }
    return failed ? 1 : 0;
}
