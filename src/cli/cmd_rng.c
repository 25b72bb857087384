/* plumb rng: Philox known answers, stream digests, KS tests, histograms. */
#include "accept/checks.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/per_device.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_rng(const struct check_result *r)
{
    const json_t *det = json_object_get(r->obj, "details");
    printf("rng on %s\n", json_string_value(json_object_get(r->obj, "device")));
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(det, "kat"), i, o)
    printf("  KAT %-6s %s  %s\n", json_string_value(json_object_get(o, "vector")),
           json_string_value(json_object_get(o, "got")), json_is_true(json_object_get(o, "pass")) ? "ok" : "FAIL");
    printf("  %-24s %-8s %-64s %9s %9s\n", "stream", "kind", "sha256 of the first N values", "KS D", "KS p");
    json_array_foreach(json_object_get(det, "streams"), i, o)
    {
        static const char *kinds[] = {"u32", "uniform", "normal"};
        for (int k = 0; k < 3; k++) {
            char key[32];
            snprintf(key, sizeof key, "digest_%s", kinds[k]);
            const char *dg = json_string_value(json_object_get(o, key));
            printf("  %-24s %-8s %-64s", k == 0 ? json_string_value(json_object_get(o, "name")) : "", kinds[k],
                   dg ? dg : "-");
            if (k) {
                snprintf(key, sizeof key, "ks_%s_d", kinds[k]);
                double dd = json_number_value(json_object_get(o, key));
                snprintf(key, sizeof key, "ks_%s_p", kinds[k]);
                double pp = json_number_value(json_object_get(o, key));
                printf(" %9.3g %9.3g", dd, pp);
            }
            printf("\n");
        }
    }
    const json_t *t = json_object_get(det, "two_sample_ks");
    if (t)
        printf("  two-sample KS %s: D %.3g p %.3g\n", json_string_value(json_object_get(t, "streams")),
               json_number_value(json_object_get(t, "d")), json_number_value(json_object_get(t, "p")));
    printf("rng: %s: %s\n", json_string_value(json_object_get(r->obj, "status")),
           json_string_value(json_object_get(r->obj, "reason")) ? json_string_value(json_object_get(r->obj, "reason")) : "");
}

struct rng_args {
    long count;
    unsigned long long seed;
};

static int run_rng(const struct check_ctx *ctx, void *arg, struct check_result *r, plumb_err *e)
{
    const struct rng_args *a = arg;
    return check_rng_run_seed(ctx, a->count, a->seed, r, e);
}

int cmd_rng(int argc, char **argv)
{
    const char *device = NULL, *out = NULL, *seed_s = NULL;
    long count = 0;
    static const char *usage = "plumb rng [options]";
    static const char *summary =
        "Checks the Philox4x32-10 streams of a device: the Random123 known-answer vectors, five streams keyed by\n"
        "(seed, purpose, a, b) with a SHA-256 digest of the first N raw words, uniforms and normals of each,\n"
        "one-sample KS tests of uniforms vs U(0,1) and normals vs N(0,1) (fail below p = 1e-4), a two-sample\n"
        "KS between two streams, and, on a GPU, bitwise equality with the cpu's streams. Histograms go to\n"
        "checks/rng[-DEV]/histograms.json in the run folder. Exit 0 pass, 1 a check failed, 2 bad arguments.";
    long threads = 0;
    const struct opt opts[] = {
        {"--device", OPT_STR, &device, "cpu", "device: cpu, cuda[:N], hip[:N] or all", NULL, "D"},
        {"--count", OPT_INT, &count, "1000000", "values drawn per stream and kind", "100..100000000", "N"},
        {"--seed", OPT_STR, &seed_s, "2024", "base seed of the streams (decimal or 0x hex, 64-bit)", NULL, "S"},
        {"--threads", OPT_INT, &threads, "0", "cpu worker threads (0 = all cores)", "0..1024", "N"},
        {"--out", OPT_STR, &out, NULL, "run folder for results.json, histograms and report.html (default: print only)", NULL, "DIR"},
        {0},
    };
    plumb_err e = {0};
    int rc = args_parse(usage, summary, opts, argc, argv, NULL, 0, NULL, &e);
    if (rc == ARGS_HELP) return 0;
    if (rc) return cli_fail("rng", &e);
    char *end = NULL;
    errno = 0;
    unsigned long long seed = strtoull(seed_s, &end, 0);
    if (errno || end == seed_s || *end || seed_s[0] == '-') {
        err_set(&e, PLUMB_EUSAGE, "--seed: '%s' is not an unsigned 64-bit integer (decimal or 0x hex)", seed_s);
        return cli_fail("rng", &e);
    }
    struct rng_args ra = {count, seed};
    struct per_device_run p = {.cmd = "rng", .device = device, .out = out, .level = "quick",
                               .threads = (int)threads, .run = run_rng, .print = print_rng, .arg = &ra};
    return cli_run_per_device(&p, argc, argv);
}
