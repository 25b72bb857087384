/* plumb numerics: every numerics op vs a float64 reference, determinism,
 * golden digests (and golden equality with the cpu on other devices). */
#include "accept/checks.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/per_device.h"
#include "dev/dev.h"
#include "report/results.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

static void print_num(double v)
{
    if (isnan(v)) printf(" %10s", "-");
    else printf(" %10.3g", v);
}

void numerics_print_table(const struct check_result *r)
{
    const json_t *det = json_object_get(r->obj, "details");
    const json_t *ops = json_object_get(det, "ops");
    printf("numerics on %s (%s%s)\n", json_string_value(json_object_get(r->obj, "device")),
           json_string_value(json_object_get(det, "numerics")),
           json_is_true(json_object_get(det, "tf32")) ? ", tf32" : "");
    printf("%-15s %-5s %-22s %10s %10s %10s %-9s %10s %-5s %-16s %s\n", "op", "dtype", "shape", "max_rel",
           "norm_rel", "max_ulp", "criterion", "threshold", "det", "digest", "status");
    size_t i;
    json_t *o;
    json_array_foreach(ops, i, o)
    {
        const char *dg = json_string_value(json_object_get(o, "digest"));
        const json_t *dt = json_object_get(o, "deterministic");
        const char *crit = json_string_value(json_object_get(o, "criterion"));
        printf("%-15s %-5s %-22s", json_string_value(json_object_get(o, "op")),
               json_string_value(json_object_get(o, "dtype")),
               json_string_value(json_object_get(o, "shape")) ? json_string_value(json_object_get(o, "shape")) : "");
        const char *keys[] = {"max_rel", "norm_rel", "max_ulp"};
        for (int k = 0; k < 3; k++) {
            json_t *v = json_object_get(o, keys[k]);
            print_num(json_is_number(v) ? json_number_value(v) : NAN);
        }
        printf(" %-9s", crit ? crit : "-");
        json_t *th = json_object_get(o, "threshold");
        print_num(json_is_number(th) ? json_number_value(th) : NAN);
        printf(" %-5s %-16.16s %s", dt ? (json_is_true(dt) ? "yes" : "NO") : "-", dg ? dg : "-",
               json_string_value(json_object_get(o, "status")));
        const char *why = json_string_value(json_object_get(o, "reason"));
        if (why) printf("  (%s)", why);
        printf("\n");
    }
    printf("numerics: %s: %s\n", json_string_value(json_object_get(r->obj, "status")),
           json_string_value(json_object_get(r->obj, "reason")) ? json_string_value(json_object_get(r->obj, "reason")) : "");
}

struct numerics_args {
    const char *numerics;
    int tf32;
};

static int run_numerics(const struct check_ctx *ctx, void *arg, struct check_result *r, plumb_err *e)
{
    const struct numerics_args *a = arg;
    return check_numerics_run(ctx, a->numerics, a->tf32, r, e);
}

int cmd_numerics(int argc, char **argv)
{
    const char *device = NULL, *numerics = NULL, *out = NULL, *level = NULL;
    long threads = 0;
    int tf32 = 0;
    static const char *usage = "plumb numerics [options]";
    static const char *summary =
        "Checks every numerics op (GEMM fp32/bf16/fp16, sum, softmax, layernorm, exp/log/tanh/erf/gelu,\n"
        "bf16/fp16 casts) against a float64 reference: max relative, norm-wise relative and max ULP error\n"
        "against a threshold per op and dtype; determinism (run twice; golden on the cpu also with 1 and 2\n"
        "threads); a SHA-256 digest of every output. Golden mode on a GPU also compares every output with\n"
        "the cpu's golden output bit for bit. Exit 0 pass, 1 a check failed, 2 bad arguments.";
    const struct opt opts[] = {
        {"--device", OPT_STR, &device, "cpu", "device: cpu, cuda[:N], hip[:N] or all", NULL, "D"},
        {"--numerics", OPT_CHOICE, &numerics, "golden", "fast (vendor libraries) or golden (fixed order)", "fast|golden", NULL},
        {"--threads", OPT_INT, &threads, "0", "cpu worker threads (0 = all cores)", "0..1024", "N"},
        {"--tf32", OPT_FLAG, &tf32, NULL, "allow TF32 for fp32 GEMM in fast mode (looser threshold)", NULL, NULL},
        {"--level", OPT_CHOICE, &level, "quick", "problem sizes: quick and standard the same, full adds 1000^3 GEMMs", "quick|standard|full", NULL},
        {"--out", OPT_STR, &out, NULL, "run folder for results.json and report.html (default: print only)", NULL, "DIR"},
        {0},
    };
    plumb_err e = {0};
    int rc = args_parse(usage, summary, opts, argc, argv, NULL, 0, NULL, &e);
    if (rc == ARGS_HELP) return 0;
    if (rc) return cli_fail("numerics", &e);
    if (tf32 && !strcmp(numerics, "golden")) {
        err_set(&e, PLUMB_EUSAGE, "--tf32 needs --numerics fast (golden never uses TF32)");
        return cli_fail("numerics", &e);
    }
    struct numerics_args na = {numerics, tf32};
    struct per_device_run p = {.cmd = "numerics", .device = device, .out = out, .level = level,
                               .threads = (int)threads, .run = run_numerics, .print = numerics_print_table,
                               .arg = &na};
    return cli_run_per_device(&p, argc, argv);
}
