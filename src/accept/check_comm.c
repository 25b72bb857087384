/* accept's comm check: `plumb comm` as child jobs on every rank the
 * platform trains with (docs/COMM.md, "In plumb accept"): on a GPU backend
 * one rank per GPU of it (NCCL/RCCL; world size 1 on a one-GPU host), on the
 * cpu 2 MPI ranks when mpirun is there (skipped otherwise: one rank has no
 * collective to measure). Two runs, an exact check of every collective and
 * dtype at small sizes and the collectives with per-SKU floors at 64 MiB;
 * their comm entries merge into this check's result; their run folders and
 * the log are the artifacts. */
#include "accept/checks.h"
#include "accept/child.h"
#include "core/file.h"
#include "core/jsonx.h"
#include "dev/dev.h"
#include "report/results.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* the last lines of a log, for a reason */
static void log_tail(const char *path, char *out, size_t n)
{
    out[0] = 0;
    char *text = NULL;
    size_t len = 0;
    plumb_err e = {0};
    if (file_read_all(path, &text, &len, &e)) return;
    size_t start = len > n - 1 ? len - (n - 1) : 0;
    snprintf(out, n, "%s", text + start);
    for (char *p = out; *p; p++)
        if (*p == '\n') *p = ' ';
    free(text);
}

int check_comm_accept_run(const struct check_ctx *ctx, struct check_result *r, plumb_err *e)
{
    char backend[16];
    snprintf(backend, sizeof backend, "%.*s", (int)strcspn(ctx->device ? ctx->device : "cpu", ":"),
             ctx->device ? ctx->device : "cpu");
    int gpu = strcmp(backend, "cpu") != 0;
    int ranks = 1;
    if (gpu) {
        plumb_err be = {0};
        const struct dev_backend *b = dev_backend_get(backend, &be);
        if (!b || b->device_count(&ranks, &be) || ranks < 1) {
            if (check_begin(r, "comm", backend)) return err_set(e, PLUMB_ENOMEM, "out of memory");
            check_set_status(r, CHECK_FAIL, "cannot count the %s devices: %s", backend, be.msg);
            check_end(r);
            return PLUMB_OK;
        }
    } else {
        const char *v = getenv("PLUMB_ACCEPT_COMM_RANKS");
        ranks = v && *v ? atoi(v) : accept_have_mpirun() ? 2 : 1;
        if (ranks < 1) ranks = 1;
    }
    if (check_begin(r, "comm", backend)) return err_set(e, PLUMB_ENOMEM, "out of memory");
    if (!gpu && ranks < 2) {
        check_set_status(r, CHECK_SKIP, "one rank on the cpu and no GPU: no collective to measure%s",
                         accept_have_mpirun() ? "" : " (mpirun is not on PATH)");
        check_end(r);
        return PLUMB_OK;
    }
    int rc;
    char plumb[PATH_MAX], dir[PATH_MAX], run[PATH_MAX + 16], logp[PATH_MAX + 16];
    if ((rc = accept_find_plumb(plumb, sizeof plumb, e))) {
        check_free(r);
        return rc;
    }
    if (ctx->run_dir) {
        if ((rc = check_artifact_dir(ctx, r, dir, sizeof dir, e))) {
            check_free(r);
            return rc;
        }
    } else {
        snprintf(dir, sizeof dir, "/tmp/plumb-comm-%d", (int)getpid());
        if ((rc = file_mkdirs(dir, e))) {
            check_free(r);
            return rc;
        }
    }
    snprintf(logp, sizeof logp, "%s/log.txt", dir);
    int full = ctx->level && !strcmp(ctx->level, "full");
    char np[16];
    snprintf(np, sizeof np, "%d", ranks);
    if (geteuid() == 0) {
        /* mpirun refuses root without these; these are short jobs of our own */
        setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
        setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    }
    /* two runs: every collective and dtype at small and middle sizes (the
     * exact check), then the collectives with per-SKU floors at 64 MiB, the
     * size the floors are for (bandwidth, checked too) */
    static const char *const run_name[2] = {"correctness", "bandwidth"};
    const char *sweep[2][12] = {
        {"--ops", "all", "--dtype", "all", "-b", "16", "-e", full ? "16M" : "1M", "-f", "4", NULL},
        {"--ops", "allreduce,allgather,reduce-scatter", "--dtype", "fp32", "-b", full ? "1M" : "64M", "-e", "64M", "-f",
         "4", NULL},
    };
    json_t *entries[2] = {NULL, NULL}, *docs[2] = {NULL, NULL};
    json_t *commands = json_array();
    char reason[1024] = "";
    for (int k = 0; k < 2; k++) {
        snprintf(run, sizeof run, "%s/%s", dir, run_name[k]);
        const char *argv[48];
        int a = 0;
        if (ranks > 1) {
            argv[a++] = "mpirun";
            argv[a++] = "--oversubscribe";
            argv[a++] = "-np";
            argv[a++] = np;
        }
        argv[a++] = plumb;
        argv[a++] = "comm";
        argv[a++] = "--device";
        argv[a++] = backend;
        for (int i = 0; sweep[k][i]; i++) argv[a++] = sweep[k][i];
        argv[a++] = "-w";
        argv[a++] = full ? "5" : "2";
        argv[a++] = "-n";
        argv[a++] = full ? "20" : "5";
        argv[a++] = "--timeout";
        argv[a++] = "120";
        argv[a++] = "--out";
        argv[a++] = run;
        argv[a] = NULL;
        char cmd[2048];
        size_t cl = 0;
        for (int i = 0; argv[i] && cl < sizeof cmd; i++) cl += (size_t)snprintf(cmd + cl, sizeof cmd - cl, "%s%s", i ? " " : "", argv[i]);
        json_array_append_new(commands, json_string(cmd));
        int code = -1, timed_out = 0;
        if ((rc = accept_run_child((char *const *)argv, logp, 1800, &code, &timed_out, e))) {
            json_decref(commands);
            json_decref(docs[0]);
            check_free(r);
            return rc;
        }
        plumb_err re = {0};
        if (results_read(run, &docs[k], &re) == PLUMB_OK) {
            size_t i;
            json_t *c;
            json_array_foreach(json_object_get(docs[k], "checks"), i, c)
            {
                const char *nm = jsonx_str(c, "name");
                if (nm && !strcmp(nm, "comm")) entries[k] = c;
            }
        }
        size_t rl = strlen(reason);
        if (!entries[k]) {
            char tail[400];
            log_tail(logp, tail, sizeof tail);
            check_set_status(r, CHECK_FAIL, "%s run (plumb comm on %d rank%s) %s%s without a result: %s", run_name[k], ranks,
                             ranks == 1 ? "" : "s", timed_out ? "ran past 30 min and was stopped" : "exited",
                             code == 124 ? " with 124 (a collective hung: watchdog)" : "", tail);
            snprintf(reason + rl, sizeof reason - rl, "%s%s: no result", rl ? "; " : "", run_name[k]);
            continue;
        }
        int st = results_parse_status(jsonx_str(entries[k], "status"));
        const char *why = jsonx_str(entries[k], "reason");
        if (st == CHECK_FAIL || st < 0) check_set_status(r, CHECK_FAIL, "%s: %s", run_name[k], why ? why : "failed");
        snprintf(reason + rl, sizeof reason - rl, "%s%s: %s", rl ? "; " : "", run_name[k], why ? why : "?");
        if (ctx->run_dir) {
            const char *rel = strstr(run, "checks/");
            char art[PATH_MAX + 32];
            snprintf(art, sizeof art, "%s/results.json", rel ? rel : run);
            check_artifact(r, art);
        }
    }
    /* one entry: both runs' figures, sweeps and wrong elements */
    json_t *det = json_object_get(r->obj, "details");
    json_t *sweeps = json_array(), *wrong = json_array(), *runs = json_object();
    for (int k = 0; k < 2; k++) {
        if (!entries[k]) continue;
        size_t i;
        json_t *m;
        json_array_foreach(json_object_get(entries[k], "metrics"), i, m)
        {
            /* the figures are the bandwidth run's (at 64 MiB; the correctness
             * run's small sizes stay in details.sweeps); wrong is summed below */
            const char *nm = jsonx_str(m, "name");
            if (!k || !nm || !strcmp(nm, "wrong")) continue;
            json_array_append(json_object_get(r->obj, "metrics"), m);
        }
        json_object_update(json_object_get(r->obj, "thresholds"), json_object_get(entries[k], "thresholds"));
        json_t *d = json_object_get(entries[k], "details");
        json_array_extend(sweeps, json_object_get(d, "sweeps"));
        json_array_extend(wrong, json_object_get(d, "wrong_elements"));
        json_t *summary = json_pack("{s:O*, s:O*, s:O*, s:O*}", "transport", json_object_get(d, "transport"), "max_bytes",
                                    json_object_get(d, "max_bytes"), "iters", json_object_get(d, "iters"), "status",
                                    json_object_get(entries[k], "status"));
        json_object_set_new(runs, run_name[k], summary);
        if (!json_object_get(det, "thresholds") && json_object_get(d, "thresholds"))
            json_object_set(det, "thresholds", json_object_get(d, "thresholds"));
    }
    double total_wrong = 0;
    size_t wi;
    json_t *w;
    json_array_foreach(wrong, wi, w) total_wrong += (double)json_integer_value(json_object_get(w, "wrong"));
    if (entries[0] || entries[1]) check_metric(r, "wrong", total_wrong, "elements");
    json_object_set_new(det, "ranks", json_integer(ranks));
    json_object_set_new(det, "runs", runs);
    json_object_set_new(det, "sweeps", sweeps);
    json_object_set_new(det, "wrong_elements", wrong);
    json_object_set_new(det, "commands", commands);
    check_set_status(r, CHECK_PASS, "%s", reason);
    json_decref(docs[0]);
    json_decref(docs[1]);
    if (ctx->run_dir) {
        const char *rel = strstr(dir, "checks/");
        char a[PATH_MAX + 32];
        snprintf(a, sizeof a, "%s/log.txt", rel ? rel : dir);
        check_artifact(r, a);
    }
    check_end(r);
    return PLUMB_OK;
}
