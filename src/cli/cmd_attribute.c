/* plumb attribute: the attribution ladder (accept/check_ladder.c) on one or
 * two devices of this host into a run folder; with two devices it also
 * writes the comparison (compare.json, compare.html) and names the first
 * rung where they part. Two hosts: run it on each, then
 * `plumb compare A B --attribute`. */
#include "accept/check_parity.h"
#include "accept/workload_accept.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/table.h"
#include "core/file.h"
#include "core/jsonx.h"
#include "dev/dev.h"
#include "report/compare.h"
#include "report/results.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmd_attribute(int argc, char **argv)
{
    const char *out = NULL, *devices = "cpu", *rungs = "all", *plant_spec = NULL, *plant_on = NULL; /* NULL: b */
    const char *workload = ACCEPT_DEFAULT_WORKLOAD;
    long seeds = 5, seed_base = 1, steps = 0, threads = 0;
    static const char *usage = "plumb attribute [options]";
    static const char *summary =
        "The attribution ladder: train the workload's accept preset (--workload; ctr: ctr-tiny) with K seeds at each\n"
        "rung of increasing numerical freedom, every rung a real training run: 1 golden (bit-identical everywhere),\n"
        "2 fast-strict (strict IEEE fp32 GEMMs, no split-K), 3 fast-vendor (the vendor library's defaults: split-K,\n"
        "TF32 where the device has it), 4 bf16-amp, 5 fp16-amp (dynamic loss scaling). On the cpu rungs 2 and 3 are\n"
        "the same setting and the report says so; a rung whose precision the workload lacks is not run. Reports each\n"
        "rung's deciding metric (ctr: AUC) with its 95% CI and the rung-to-rung shift against the seed spread, and\n"
        "whether a shift is worse or better. The check is called ladder for ctr, ladder-W for another workload W.\n"
        "With two devices (--device cuda:0,cpu) it also compares them rung by rung (golden must be bit-equal) and\n"
        "names the first rung where they part, written to compare.json and compare.html in the run folder. Across\n"
        "hosts: run it on each host, then 'plumb compare A B --attribute' (also for two ladders on one device).\n"
        "Exit 0 when every run trained, 1 when a rung failed or (two devices) the golden rung differs, 2 on bad\n"
        "arguments.";
    const struct opt opts[] = {
        {"--device", OPT_STR, &devices, "cpu", "one device, or two as a comma list (A,B), e.g. cuda:0,cpu", NULL, "LIST"},
        {"--seeds", OPT_INT, &seeds, "5", "seeds per rung", "2..1000", "K"},
        {"--seed-base", OPT_INT, &seed_base, "1", "the first seed (seeds S .. S+K-1)", "0..1000000000", "S"},
        {"--workload", OPT_STR, &workload, ACCEPT_DEFAULT_WORKLOAD, "the workload the rungs train (one with an accept "
         "descriptor)", NULL, "W"},
        {"--steps", OPT_INT, &steps, "0", "training steps per run (0 = the workload's: ctr 1500)", "0..100000000", "N"},
        {"--rungs", OPT_STR, &rungs, "all", "rungs to run: all, or a comma list of golden, fast-strict, fast-vendor, "
         "bf16-amp, fp16-amp", NULL, "LIST"},
        {"--plant", OPT_STR, &plant_spec, NULL, "drill: plant a change of known effect, e.g. lr=3@4 (3x the learning rate "
         "from rung 4 on), to show the ladder finds its rung", NULL, "SPEC"},
        {"--plant-on", OPT_CHOICE, &plant_on, NULL, "with --plant and two devices: the side the plant goes to (default: b)",
         "a|b|both", NULL},
        {"--threads", OPT_INT, &threads, "0", "cpu threads (0 = all cores)", "0..4096", "N"},
        {"--out", OPT_STR, &out, NULL, "run folder (default runs/<UTC-time>-<host>-<id>)", NULL, "DIR"},
        {0},
    };
    plumb_err e = {0};
    int rc = args_parse(usage, summary, opts, argc, argv, NULL, 0, NULL, &e);
    if (rc == ARGS_HELP) return 0;
    if (rc) return cli_fail("attribute", &e);
    char devbuf[256], *dev[3];
    int nd = args_split_list(devices, devbuf, sizeof devbuf, dev, 2);
    if (nd < 1) {
        err_set(&e, PLUMB_EUSAGE, "--device: '%s' is not one device or a comma list of two", devices);
        return cli_fail("attribute", &e);
    }
    if (nd == 2 && !strcmp(dev[0], dev[1])) {
        err_set(&e, PLUMB_EUSAGE, "--device %s: the same device twice; for two ladders on one device (a planted drill) "
                "run plumb attribute twice with --out A and --out B, then plumb compare A B --attribute", devices);
        return cli_fail("attribute", &e);
    }
    struct plant plant;
    if (plant_parse(plant_spec, &plant, &e)) return cli_fail("attribute", &e);
    /* checked before the run folder opens: '--rungs bogus' left a run folder whose run stayed "running", and
     * '--rungs ''' ran all five rungs */
    if (ladder_check_rungs(rungs, &e)) return cli_fail("attribute", &e);
    /* --plant-on chooses between two devices' ladders: with one device, or with no --plant, it changed
     * nothing and was ignored without a word */
    if (plant_on && (nd != 2 || !plant_spec)) {
        err_set(&e, PLUMB_EUSAGE, "--plant-on %s applies only with --plant and two devices (--device A,B)%s", plant_on,
                nd != 2 ? "; one device: the plant goes to its ladder" : "");
        return cli_fail("attribute", &e);
    }
    if (!plant_on) plant_on = "b";
    const struct workload *wl;
    if (accept_workload_find(workload, "--workload", &wl, &e)) return cli_fail("attribute", &e);
    dev_set_cpu_fallback(0);
    for (int i = 0; i < nd; i++) {
        struct dev *d = NULL;
        plumb_err de = {0};
        int drc = dev_open(dev[i], &d, &de);
        dev_close(d);
        /* a device this host does not have is the user's input, as in plumb train, faults and
         * accept (it was exit 3, the message naming neither --device nor the device) */
        if (drc == PLUMB_EDEVICE) {
            err_set(&e, PLUMB_EUSAGE, "--device %s: no usable device here (%s)", dev[i], de.msg);
            return cli_fail("attribute", &e);
        }
        if (drc) {
            e = de;
            return cli_fail("attribute", &e);
        }
    }
    char cmdline[1024];
    args_command_line(argc, argv, cmdline, sizeof cmdline);
    struct results res;
    if (results_open(&res, out, cmdline, &e)) return cli_fail("attribute", &e);
    int failed = 0;
    for (int i = 0; i < nd; i++) {
        struct dev *d = NULL;
        if (dev_open(dev[i], &d, &e) == PLUMB_OK) {
            results_add_device(&res, d);
            dev_close(d);
        }
        int planted = nd == 1 || !strcmp(plant_on, "both") || (i == 0 && !strcmp(plant_on, "a")) ||
                      (i == 1 && !strcmp(plant_on, "b"));
        struct check_ctx ctx = {.run_dir = res.dir, .device = dev[i], .level = "standard", .threads = (int)threads,
                                .tty = table_stderr_tty()};
        struct ladder_opts lo = {.wl = wl, .seeds = (int)seeds, .seed_base = (uint64_t)seed_base, .steps = steps,
                                 .plant = planted ? &plant : NULL, .rungs = rungs, .log = stderr};
        struct check_result r = {0};
        rc = check_ladder_run(&ctx, &lo, &r, &e);
        if (rc) {
            results_close(&res);
            return cli_fail("attribute", &e);
        }
        results_add_check(&res, &r);
        failed |= r.status == CHECK_FAIL;
        printf("ladder on %s: %s\n", dev[i], jsonx_str(r.obj, "reason") ? jsonx_str(r.obj, "reason") : "");
        check_free(&r);
        res.write_html = 0;
        if (results_write(&res, &e)) {
            results_close(&res);
            return cli_fail("attribute", &e);
        }
    }
    res.write_html = 1;
    if (results_write(&res, &e)) {
        results_close(&res);
        return cli_fail("attribute", &e);
    }
    if (nd == 2 && !failed) {
        struct compare_opts o;
        compare_opts_defaults(&o);
        o.dev_a = dev[0];
        o.dev_b = dev[1];
        o.attribute = 1;
        json_t *doc = NULL;
        char path[PATH_MAX + 32];
        rc = compare_runs(res.root, res.dir, res.root, res.dir, &o, &doc, &e);
        if (rc) {
            results_close(&res);
            return cli_fail("attribute", &e);
        }
        rc = file_join(path, sizeof path, res.dir, "compare.json", &e);
        if (!rc) rc = jsonx_write_file(path, doc, &e);
        if (!rc && !(rc = file_join(path, sizeof path, res.dir, "compare.html", &e))) rc = compare_html_write(doc, path, &e);
        if (rc) {
            json_decref(doc);
            results_close(&res);
            return cli_fail("attribute", &e);
        }
        compare_print(stdout, doc);
        failed |= json_is_object(json_object_get(doc, "digest_fault"));
        printf("compare:    %s/compare.html\n", res.dir);
        json_decref(doc);
    }
    printf("run folder: %s\nreport:     %s/report.html\n", res.dir, res.dir);
    results_close(&res);
    return failed ? 1 : 0;
}
