/* plumb launch [options] -- COMMAND...: supervise COMMAND (faults/launch.h). */
#include "cli/args.h"
#include "cli/commands.h"
#include "core/file.h"
#include "faults/launch.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* "2", "2,3", "none" -> set[status] = 1; -1 on anything else ('' too) */
static int parse_no_restart(const char *v, unsigned char set[256])
{
    if (!strcmp(v, "none")) return 0;
    const char *p = v;
    do {
        char *end = NULL;
        if (*p < '0' || *p > '9') return -1;
        const long c = strtol(p, &end, 10);
        if (end == p || c < 1 || c > 255 || (*end && *end != ',')) return -1;
        set[c] = 1;
        p = *end ? end + 1 : end;
    } while (*p || p[-1] == ',');
    return 0;
}

int cmd_launch(int argc, char **argv)
{
    static const char usage[] = "plumb launch [options] -- COMMAND [ARGS...]";
    static const char summary[] =
        "Run COMMAND (usually `mpirun -np N plumb train ... --resume auto`) in a process group of its own and "
        "restart it when it fails, after a backoff that doubles with each failure; give up when more than "
        "--max-restarts failures fall within --restart-window seconds. SIGINT, SIGTERM and SIGHUP are "
        "forwarded to the command, which is then not restarted: plumb launch waits for it and exits with its "
        "status. Each attempt's start and end (exit status or signal, time, restart count) is appended to "
        "RUN_DIR/launch.jsonl. The command sees PLUMB_LAUNCH_ATTEMPT (0, 1, ...) and PLUMB_LAUNCH_RUN_DIR; "
        "fault injections (--inject) are armed only on attempt 0. Exit status: the command's (0 when it "
        "succeeded, 128+N if it died of signal N); after giving up, the last attempt's status; 2 when the "
        "command cannot be run at all. A command that exits with a status --no-restart names (default 2, "
        "plumb's usage or input error) is not restarted: the same input would fail the same way.";
    long max_restarts = 3;
    double window = 600, backoff = 1, backoff_max = 30, grace = 300;
    const char *run_dir = NULL, *no_restart = "2";
    struct opt opts[] = {
        {"--max-restarts", OPT_INT, &max_restarts, "3", "give up after this many restarts within the window",
         "0..1000000", "K"},
        {"--restart-window", OPT_DOUBLE, &window, "600", "seconds over which failures are counted", NULL, "S"},
        {"--backoff", OPT_DOUBLE, &backoff, "1", "delay before the first restart; doubles per failure in the window",
         NULL, "S"},
        {"--backoff-max", OPT_DOUBLE, &backoff_max, "30", "the backoff stops doubling here", NULL, "S"},
        {"--stop-grace", OPT_DOUBLE, &grace, "300",
         "after forwarding SIGINT/SIGTERM, SIGKILL the job if it has not ended within S seconds (0 = never)", NULL,
         "S"},
        {"--run-dir", OPT_STR, &run_dir, NULL, "folder for launch.jsonl, created (default: runs/launch-<UTC time>)", NULL,
         "DIR"},
        {"--no-restart", OPT_STR, &no_restart, "2",
         "exit statuses after which the command is not restarted: a comma list of 1..255, or none", NULL, "LIST"},
        {0},
    };
    /* options end at the first "--"; everything after it is the command,
     * untouched (its own --help or options are not ours) */
    int dd = -1;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--")) {
            dd = i;
            break;
        }
    plumb_err e = {0};
    int rc = args_parse(usage, summary, opts, dd < 0 ? argc : dd, argv, NULL, 0, NULL, &e);
    if (rc == ARGS_HELP) return 0;
    if (rc) return cli_fail("launch", &e);
    if (dd < 0 || dd + 1 >= argc) {
        fprintf(stderr, "plumb launch: no command given; usage: %s\n", usage);
        return 2;
    }
    if (!(window > 0)) {
        fprintf(stderr, "plumb launch: --restart-window: %g is not a positive number of seconds\n", window);
        return 2;
    }
    if (!(backoff >= 0) || !(backoff_max >= 0)) {
        fprintf(stderr, "plumb launch: --backoff/--backoff-max: %g/%g, expected seconds >= 0\n", backoff, backoff_max);
        return 2;
    }
    if (!(grace >= 0)) { /* a negative grace was taken as 0: never SIGKILL */
        fprintf(stderr, "plumb launch: --stop-grace: %g, expected seconds >= 0 (0 = never SIGKILL)\n", grace);
        return 2;
    }
    /* every option checked before the run folder is made */
    unsigned char final[256] = {0};
    if (parse_no_restart(no_restart, final)) {
        fprintf(stderr, "plumb launch: --no-restart '%s': expected a comma list of exit statuses 1..255, or none\n",
                no_restart);
        return 2;
    }
    char defdir[64];
    if (!run_dir) {
        time_t t = time(NULL);
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(defdir, sizeof defdir, "runs/launch-%Y%m%dT%H%M%SZ", &tm);
        run_dir = defdir;
    }
    /* before the first attempt: a file in its place, '' or a folder that cannot be
     * made was exit 3 from launch.jsonl's mkdir ("mkdir : No such file or directory") */
    if (file_check_output_dir("--run-dir", run_dir, &e)) return cli_fail("launch", &e);
    struct launch_opts o = {
        .argv = argv + dd + 1,
        .run_dir = run_dir,
        .max_restarts = (int)max_restarts,
        .restart_window = window,
        .backoff = backoff,
        .backoff_max = backoff_max,
        .stop_grace = grace,
    };
    memcpy(o.no_restart, final, sizeof final);
    struct launch_result res;
    rc = launch_run(&o, &res, &e);
    if (rc) return cli_fail("launch", &e);
    if (res.outcome == LAUNCH_GAVE_UP)
        fprintf(stderr,
                "plumb launch: gave up after %d restart%s within %g s (--max-restarts %ld); last attempt exited "
                "with status %d; see %s/launch.jsonl\n",
                res.restarts, res.restarts == 1 ? "" : "s", window, max_restarts, res.exit_status, run_dir);
    return res.exit_status;
}
