/* accept's comm check: `plumb comm` as a child job on every rank the
 * platform trains with (docs/COMM.md, "In plumb accept"): on a GPU backend
 * one rank per GPU of it (NCCL/RCCL; world size 1 on a one-GPU host), on the
 * cpu 2 MPI ranks when mpirun is there (skipped otherwise: one rank has no
 * collective to measure). Its comm entry, with the figures, becomes this
 * check's result; the child's run folder and log are the artifacts. */
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
    char plumb[PATH_MAX], dir[PATH_MAX], run[PATH_MAX + 8], logp[PATH_MAX + 16];
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
    snprintf(run, sizeof run, "%s/run", dir);
    snprintf(logp, sizeof logp, "%s/log.txt", dir);
    int full = ctx->level && !strcmp(ctx->level, "full");
    char np[16];
    snprintf(np, sizeof np, "%d", ranks);
    /* every collective and dtype, 16 B to 64 MiB (the size the per-SKU
     * thresholds are for) by factors of 4 */
    const char *argv[40];
    int k = 0;
    if (ranks > 1) {
        argv[k++] = "mpirun";
        argv[k++] = "--oversubscribe";
        argv[k++] = "-np";
        argv[k++] = np;
    }
    argv[k++] = plumb;
    argv[k++] = "comm";
    argv[k++] = "--device";
    argv[k++] = backend;
    argv[k++] = "--ops";
    argv[k++] = "all";
    argv[k++] = "--dtype";
    argv[k++] = "all";
    argv[k++] = "-b";
    argv[k++] = "16";
    argv[k++] = "-e";
    argv[k++] = "64M";
    argv[k++] = "-f";
    argv[k++] = "4";
    argv[k++] = "-w";
    argv[k++] = full ? "5" : "2";
    argv[k++] = "-n";
    argv[k++] = full ? "20" : "5";
    argv[k++] = "--timeout";
    argv[k++] = "120";
    argv[k++] = "--out";
    argv[k++] = run;
    argv[k] = NULL;
    if (geteuid() == 0) {
        /* mpirun refuses root without these; this is a short job of our own */
        setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
        setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    }
    char cmd[2048];
    size_t cl = 0;
    for (int i = 0; argv[i] && cl < sizeof cmd; i++) cl += (size_t)snprintf(cmd + cl, sizeof cmd - cl, "%s%s", i ? " " : "", argv[i]);
    int code = -1, timed_out = 0;
    if ((rc = accept_run_child((char *const *)argv, logp, 1800, &code, &timed_out, e))) {
        check_free(r);
        return rc;
    }
    json_t *doc = NULL;
    plumb_err re = {0};
    json_t *entry = NULL;
    if (results_read(run, &doc, &re) == PLUMB_OK) {
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(doc, "checks"), i, c)
        {
            const char *nm = jsonx_str(c, "name");
            if (nm && !strcmp(nm, "comm")) entry = c;
        }
    }
    char tail[400];
    if (!entry) {
        log_tail(logp, tail, sizeof tail);
        check_set_status(r, CHECK_FAIL, "plumb comm on %d rank%s %s%s without a result: %s", ranks, ranks == 1 ? "" : "s",
                         timed_out ? "ran past 30 min and was stopped" : "exited",
                         code == 124 ? " with 124 (a collective hung: watchdog)" : "", tail);
    } else {
        /* the child's entry is this check's result */
        json_t *copy = json_deep_copy(entry);
        json_decref(r->obj);
        r->obj = copy;
        int st = results_parse_status(jsonx_str(copy, "status"));
        r->status = st < 0 ? CHECK_FAIL : (enum check_status)st;
        json_object_set_new(copy, "device", json_string(backend));
        json_object_set_new(copy, "artifacts", json_array());
    }
    json_decref(doc);
    json_t *det = json_object_get(r->obj, "details");
    if (det) {
        json_object_set_new(det, "command", json_string(cmd));
        json_object_set_new(det, "exit_code", json_integer(code));
    }
    if (ctx->run_dir) {
        const char *rel = strstr(dir, "checks/");
        char a[PATH_MAX + 32];
        snprintf(a, sizeof a, "%s/log.txt", rel ? rel : dir);
        check_artifact(r, a);
        snprintf(a, sizeof a, "%s/run/results.json", rel ? rel : dir);
        if (entry) check_artifact(r, a);
    }
    check_end(r);
    return PLUMB_OK;
}
