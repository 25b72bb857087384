/* plumb doctor: the preflight checklist (accept/check_doctor.c) as a table. */
#include "accept/checks.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/table.h"
#include "core/jsonx.h"
#include "report/results.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Shared with plumb accept: the doctor rows of a check entry. */
void doctor_print_rows(FILE *f, const json_t *check)
{
    const json_t *rows = json_object_get(json_object_get(check, "details"), "rows");
    table_put(f, "ITEM", 30, 1);
    table_put(f, "STATUS", 6, 1);
    table_put(f, "VALUE", 40, 1);
    fputs("REASON\n", f);
    size_t i;
    json_t *r;
    json_array_foreach(rows, i, r)
    {
        table_put(f, jsonx_str(r, "item"), 30, 1);
        table_put(f, jsonx_str(r, "status"), 6, 1);
        table_put(f, jsonx_str(r, "value"), 40, 1);
        table_put(f, jsonx_str(r, "reason"), 0, 0);
        fputc('\n', f);
    }
}

int cmd_doctor(int argc, char **argv)
{
    const char *out = NULL;
    int as_json = 0;
    static const char *usage = "plumb doctor [options]";
    static const char *summary =
        "Preflight checklist of this host: OS, kernel, CPU and NUMA, memory, compiler, BLAS and MPI versions,\n"
        "GPU plugins and devices (or why none loaded), and every environment variable that changes numerics or\n"
        "communication (NVIDIA_TF32_OVERRIDE, CUBLAS_WORKSPACE_CONFIG, NCCL_*, HSA_*, ROCBLAS_*, MIOPEN_*,\n"
        "OMP_NUM_THREADS, OPENBLAS_*, *_VISIBLE_DEVICES, ...). Each row is pass, warn or fail with a reason.\n"
        "Exit 0 when no row fails, 1 when one does.";
    const struct opt opts[] = {
        {"--out", OPT_STR, &out, NULL, "also write a run folder (results.json, report.html) here", NULL, "DIR"},
        {"--json", OPT_FLAG, &as_json, "off", "print the check entry as JSON instead of the table", NULL, NULL},
        {0},
    };
    plumb_err e = {0};
    int rc = args_parse(usage, summary, opts, argc, argv, NULL, 0, NULL, &e);
    if (rc == ARGS_HELP) return 0;
    if (rc) return cli_fail("doctor", &e);
    struct results res;
    int have_res = 0;
    if (out) {
        if (results_open(&res, out, "plumb doctor", &e)) return cli_fail("doctor", &e);
        have_res = 1;
    }
    struct check_ctx ctx = {.run_dir = have_res ? res.dir : NULL, .device = "cpu", .level = "quick",
                            .tty = table_stderr_tty()};
    struct check_result r;
    if (check_doctor_run(&ctx, &r, &e)) {
        if (have_res) results_close(&res);
        return cli_fail("doctor", &e);
    }
    if (as_json) {
        char *s = json_dumps(r.obj, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(10));
        if (s) puts(s);
        free(s);
    } else {
        doctor_print_rows(stdout, r.obj);
        printf("\ndoctor: %s", check_status_name(r.status));
        const char *reason = jsonx_str(r.obj, "reason");
        if (reason && r.status != CHECK_PASS) {
            putchar(' ');
            table_put(stdout, reason, 0, 0);
        }
        putchar('\n');
    }
    int code = r.status == CHECK_FAIL ? 1 : 0;
    if (have_res) {
        results_add_check(&res, &r);
        rc = results_write(&res, &e);
        if (!rc && !as_json) printf("results: %s/results.json\n", res.dir);
        results_close(&res);
        if (rc) {
            check_free(&r);
            return cli_fail("doctor", &e);
        }
    }
    check_free(&r);
    return code;
}
