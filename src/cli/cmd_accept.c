/* plumb accept: runs a table of checks at a level (--quick, --standard,
 * --full) on every device asked for, writes the run folder (results.json,
 * checks/<name>[-<device>]/, report.html) and prints a verdict table.
 * Exit 0 when no check failed, 1 when one did, 2 on usage errors, 3 when a
 * check could not run at all (internal error). */
#include "accept/check_parity.h"
#include "accept/checks.h"
#include "accept/workload_accept.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/table.h"
#include "core/jsonx.h"
#include "core/timer.h"
#include "dev/dev.h"
#include "health/monitor.h"
#include "report/results.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum level { LEVEL_QUICK = 0, LEVEL_STANDARD = 1, LEVEL_FULL = 2 };
static const char *level_names[] = {"quick", "standard", "full"};

struct accept_entry;
/* wl: the workload of a per-workload entry (NULL otherwise) */
typedef int (*accept_run_fn)(const struct check_ctx *ctx, const struct accept_entry *a, const struct workload *wl,
                             enum level lv, struct check_result *r, plumb_err *e);

/* One row of the acceptance table: `run` is called once (per_device = 0),
 * once per device (per_device = 1) or once per backend among the devices
 * (per_device = 2, ctx->device the backend: "cpu", "cuda", "hip") at every
 * level >= min_level; a per_workload entry once per selected workload
 * (--workloads), its check called "<label>-<workload>". */
struct accept_entry {
    const char *label;  /* progress text, e.g. "numerics golden" */
    enum level min_level;
    int per_device;
    accept_run_fn run;
    int per_workload;
};

static int run_doctor(const struct check_ctx *ctx, const struct accept_entry *a, const struct workload *wl,
                      enum level lv, struct check_result *r, plumb_err *e)
{
    (void)a, (void)wl, (void)lv;
    return check_doctor_run(ctx, r, e);
}

static int run_health(const struct check_ctx *ctx, const struct accept_entry *a, const struct workload *wl,
                      enum level lv, struct check_result *r, plumb_err *e)
{
    (void)a, (void)wl, (void)lv;
    return check_health_run(ctx, r, e);
}

static int run_rng(const struct check_ctx *ctx, const struct accept_entry *a, const struct workload *wl,
                   enum level lv, struct check_result *r, plumb_err *e)
{
    (void)a, (void)wl;
    return check_rng_run(ctx, lv == LEVEL_FULL ? 10000000 : 1000000, r, e);
}
static int run_numerics_golden(const struct check_ctx *ctx, const struct accept_entry *a,
                               const struct workload *wl, enum level lv, struct check_result *r, plumb_err *e)
{
    (void)a, (void)wl, (void)lv;
    return check_numerics_run(ctx, "golden", 0, r, e);
}
static int run_numerics_fast(const struct check_ctx *ctx, const struct accept_entry *a,
                             const struct workload *wl, enum level lv, struct check_result *r, plumb_err *e)
{
    (void)a, (void)wl, (void)lv;
    return check_numerics_run(ctx, "fast", 0, r, e);
}

static int run_faults(const struct check_ctx *ctx, const struct accept_entry *a, const struct workload *wl,
                      enum level lv, struct check_result *r, plumb_err *e)
{
    (void)a, (void)wl, (void)lv;
    return check_faults_run(ctx, r, e);
}

static int run_comm(const struct check_ctx *ctx, const struct accept_entry *a, const struct workload *wl,
                    enum level lv, struct check_result *r, plumb_err *e)
{
    (void)a, (void)wl, (void)lv;
    return check_comm_accept_run(ctx, r, e);
}

static int run_train(const struct check_ctx *ctx, const struct accept_entry *a, const struct workload *wl,
                     enum level lv, struct check_result *r, plumb_err *e)
{
    (void)a, (void)lv;
    return check_train_run(ctx, wl, r, e);
}

/* --seeds, --seed-base, --seed-steps, --plant, --workload: the parity check's settings */
static struct parity_check_opts g_parity;

static int run_parity(const struct check_ctx *ctx, const struct accept_entry *a, const struct workload *wl,
                      enum level lv, struct check_result *r, plumb_err *e)
{
    (void)a, (void)wl, (void)lv;
    return check_parity_run(ctx, &g_parity, r, e);
}

/* THE CHECK TABLE. Add a line per check; keep the order cheap -> expensive. */
static const struct accept_entry accept_table[] = {
    {"doctor", LEVEL_QUICK, 0, run_doctor, 0},
    {"rng", LEVEL_QUICK, 1, run_rng, 0},
    {"numerics golden", LEVEL_QUICK, 1, run_numerics_golden, 0},
    {"numerics fast", LEVEL_QUICK, 1, run_numerics_fast, 0},
    {"train", LEVEL_STANDARD, 1, run_train, 1},
    {"comm", LEVEL_STANDARD, 2, run_comm, 0},
    {"parity", LEVEL_STANDARD, 1, run_parity, 0},
    {"faults", LEVEL_STANDARD, 0, run_faults, 0},
    /* health stays last: it reports the run-wide health monitor's alerts */
    {"health", LEVEL_QUICK, 0, run_health, 0},
};

void doctor_print_rows(FILE *f, const json_t *check); /* cmd_doctor.c */

/* Does the entry run at this level? An explicit --seeds K adds parity at any level. */
static int entry_at_level(const struct accept_entry *a, enum level lv)
{
    return a->min_level <= lv || (a->run == run_parity && g_parity.seeds > 0);
}

/* Does the entry belong to the check called name (first word of its label;
 * a per-workload entry also answers to "<label>-<workload>")? *wl gets that
 * workload, NULL for the bare name. */
static int entry_named_wl(const struct accept_entry *a, const char *name, const struct workload **wl)
{
    size_t L = strcspn(a->label, " ");
    if (wl) *wl = NULL;
    if (strlen(name) == L && !strncmp(a->label, name, L)) return 1;
    if (!a->per_workload || strncmp(a->label, name, L) || name[L] != '-') return 0;
    for (int i = 0; accept_workload_at(i); i++)
        if (!strcmp(accept_workload_at(i)->name, name + L + 1)) {
            if (wl) *wl = accept_workload_at(i);
            return 1;
        }
    return 0;
}

static int entry_named(const struct accept_entry *a, const char *name) { return entry_named_wl(a, name, NULL); }

static int entry_selected(const struct accept_entry *a, char **names, int nnames)
{
    if (!nnames) return 1;
    for (int i = 0; i < nnames; i++)
        if (entry_named(a, names[i])) return 1;
    return 0;
}

/* The workloads a per-workload entry runs: those --checks names as
 * "<label>-<w>"; all of --workloads when --checks names the bare label,
 * gives nothing or is "all". Returns the count. */
#define MAX_WL 16
static int entry_workloads(const struct accept_entry *a, char **names, int nnames, const struct workload *const *sel,
                           int nsel, const struct workload **out)
{
    int n = 0, bare = !nnames;
    for (int i = 0; i < nnames; i++) {
        const struct workload *wl;
        if (!entry_named_wl(a, names[i], &wl)) continue;
        if (!wl) {
            bare = 1;
            continue;
        }
        int seen = 0;
        for (int k = 0; k < n; k++) seen |= out[k] == wl;
        if (!seen && n < MAX_WL) out[n++] = wl;
    }
    for (int i = 0; bare && i < nsel; i++) {
        int seen = 0;
        for (int k = 0; k < n; k++) seen |= out[k] == sel[i];
        if (!seen && n < MAX_WL) out[n++] = sel[i];
    }
    return n;
}

static int internal_code(int code)
{
    /* A device or watchdog error is the platform failing the check; the rest
     * (bad input, I/O, memory, bugs) mean the check could not run. */
    return !(code == PLUMB_EDEVICE || code == PLUMB_ETIMEOUT || code == PLUMB_EFAIL);
}

/* This command's checks and verdict (its exit code); the folder's verdict
 * over every run in it below, when earlier runs left checks there. */
static void print_verdict(const struct results *res, double secs)
{
    const json_t *checks = res->mine;
    printf("\n");
    table_put(stdout, "CHECK", 18, 1);
    table_put(stdout, "DEVICE", 8, 1);
    table_put(stdout, "STATUS", 6, 1);
    table_put(stdout, "TIME", 8, 1);
    printf("REASON\n");
    size_t i;
    json_t *c;
    int n[4] = {0, 0, 0, 0};
    json_array_foreach(checks, i, c)
    {
        char t[32];
        int s = results_parse_status(jsonx_str(c, "status"));
        if (s >= 0) n[s]++;
        snprintf(t, sizeof t, "%.1fs", jsonx_num(c, "duration_s"));
        char name[96];
        const char *mode = jsonx_str(json_object_get(c, "details"), "numerics");
        snprintf(name, sizeof name, "%s%s%s", jsonx_str(c, "name"), mode ? " " : "", mode ? mode : "");
        table_put(stdout, name, 18, 1);
        table_put(stdout, jsonx_str(c, "device") ? jsonx_str(c, "device") : "-", 8, 1);
        table_put(stdout, jsonx_str(c, "status"), 6, 1);
        table_put(stdout, t, 8, 1);
        table_put(stdout, jsonx_str(c, "reason") ? jsonx_str(c, "reason") : "", 0, 0);
        printf("\n");
    }
    enum check_status v = results_run_verdict(res);
    printf("\nverdict: %s (%zu checks: %d pass, %d warn, %d fail, %d skip) in %.1f s\n",
           v == CHECK_FAIL ? "FAIL" : v == CHECK_WARN ? "PASS with warnings" : "PASS", json_array_size(checks), n[0], n[1],
           n[2], n[3], secs);
    size_t all = json_array_size(json_object_get(res->root, "checks"));
    if (all > json_array_size(checks)) {
        enum check_status fv = results_verdict(res);
        printf("folder verdict: %s (%zu checks of %d runs in the folder; this is run %d)\n",
               fv == CHECK_FAIL ? "FAIL" : fv == CHECK_WARN ? "PASS with warnings" : "PASS", all, res->run, res->run);
    }
    printf("run folder: %s\nreport:     %s/report.html\n", res->dir, res->dir);
}

/* --device: "all" (every device present), "cpu", "cuda", "hip" (every device
 * of that backend) or one device "cuda:N" / "hip:N". */
static int select_devices(const char *want, char specs[][32], int max, int *n, plumb_err *e)
{
    char avail[64][32];
    int na = dev_list_available(avail, 64);
    *n = 0;
    if (!strcmp(want, "all")) {
        for (int i = 0; i < na && *n < max; i++) snprintf(specs[(*n)++], 32, "%s", avail[i]);
        return PLUMB_OK;
    }
    if (!strcmp(want, "cpu") || !strcmp(want, "cuda") || !strcmp(want, "hip")) {
        size_t L = strlen(want);
        for (int i = 0; i < na && *n < max; i++)
            if (!strncmp(avail[i], want, L) && (avail[i][L] == '\0' || avail[i][L] == ':'))
                snprintf(specs[(*n)++], 32, "%s", avail[i]);
        if (*n) return PLUMB_OK;
        char why[512] = "";
        plumb_err pe = {0};
        const struct dev_backend *be = dev_backend_get(want, &pe);
        int cnt = 0;
        if (!be) snprintf(why, sizeof why, "%s", pe.msg);
        else if (be->device_count(&cnt, &pe)) snprintf(why, sizeof why, "%s", pe.msg);
        else snprintf(why, sizeof why, "the %s backend reports %d devices", want, cnt);
        return err_set(e, PLUMB_EUSAGE, "--device %s: no %s device available here (%s)", want, want, why);
    }
    const char *colon = strchr(want, ':');
    if (colon && (!strncmp(want, "cuda:", 5) || !strncmp(want, "hip:", 4))) {
        for (int i = 0; i < na; i++)
            if (!strcmp(avail[i], want)) {
                snprintf(specs[(*n)++], 32, "%s", want);
                return PLUMB_OK;
            }
        return err_set(e, PLUMB_EUSAGE, "--device %s: no such device here (run 'plumb doctor' to see why)", want);
    }
    return err_set(e, PLUMB_EUSAGE, "--device: '%s' is not one of cpu, cuda, hip, all, cuda:N or hip:N", want);
}

int cmd_accept(int argc, char **argv)
{
    int quick = 0, standard = 0, full = 0;
    const char *out = NULL, *device = NULL, *only = NULL;
    long threads = 0, seeds = 0, seed_base = 1, seed_steps = 0;
    const char *plant_spec = NULL, *workloads = NULL, *parity_wl = ACCEPT_DEFAULT_WORKLOAD;
    static const char *usage = "plumb accept [--quick|--standard|--full] [options]";
    static const char *summary =
        "Accept this platform: run the acceptance checks at a level on every device asked for, write a run\n"
        "folder (results.json with schema plumb.results/1, checks/<name>[-<device>]/ artifacts, report.html)\n"
        "and print a verdict table. Levels: --quick: doctor, rng and numerics (golden and fast) on each device\n"
        "and the run-wide health monitor (seconds on a CPU host); --standard (the default): also train-<workload>\n"
        "on each device for every workload of --workloads (its accept preset, e.g. ctr-tiny: the deciding metric's\n"
        "floor, the fast metric within the cpu's seed spread, the golden digest against the cpu's), parity on each\n"
        "device (the --workload's preset trained with K = 5 seeds in fast mode, every seed's metrics and loss curve\n"
        "in checks/parity[-<device>]/seeds.jsonl for 'plumb compare'; a device other than the cpu is tested\n"
        "against the cpu's seeds), comm per backend (plumb comm on a rank per GPU, or 2 MPI ranks on the cpu:\n"
        "every collective and dtype, 0 wrong, busbw thresholds per SKU) and the fault drills (minutes);\n"
        "--full: also 10x larger RNG samples and K = 10 seeds. Exit 0 when no check failed, 1 when one did, 2 on bad arguments, 3 when a check could not run.";
    char wl_help[768], wl_names[256], std_desc[512];
    accept_workload_names(wl_names, sizeof wl_names);
    accept_standard_desc(std_desc, sizeof std_desc);
    snprintf(wl_help, sizeof wl_help,
             "train-<workload> checks: a comma list of %s (default: %s; --standard's default set is every workload "
             "whose accept descriptor does not opt out and whose one fast run takes at most %.0f s on 2 cpu cores)",
             wl_names, std_desc, ACCEPT_STANDARD_RUN_S);
    const struct opt opts[] = {
        {"--quick", OPT_FLAG, &quick, "off", "quick level", NULL, NULL},
        {"--standard", OPT_FLAG, &standard, "off", "standard level (the default when no level is given)", NULL, NULL},
        {"--full", OPT_FLAG, &full, "off", "full level", NULL, NULL},
        {"--out", OPT_STR, &out, NULL, "run folder to write (default runs/<UTC-time>-<host>-<id>)", NULL, "DIR"},
        {"--device", OPT_STR, &device, "all", "cpu, cuda, hip, all (every device present), cuda:N or hip:N", NULL, "D"},
        {"--threads", OPT_INT, &threads, "0", "cpu threads for the cpu device (0 = all cores)", "0..4096", "N"},
        {"--checks", OPT_STR, &only, "all", "run only these checks of the level (comma list of names, e.g. doctor,rng)",
         NULL, "LIST"},
        {"--seeds", OPT_INT, &seeds, "0", "parity: seeds per device (0 = 5 at --standard, 10 at --full); given at --quick it "
         "adds the parity check", "0..1000", "K"},
        {"--seed-base", OPT_INT, &seed_base, "1", "parity: the first seed (seeds S .. S+K-1)", "0..1000000000", "S"},
        {"--seed-steps", OPT_INT, &seed_steps, "0", "parity: training steps per seed (0 = the workload's: ctr 1500)",
         "0..100000000", "N"},
        {"--plant", OPT_STR, &plant_spec, NULL, "parity drill: plant a change of known effect (lr=3: 3x the learning rate; "
         "precision=bf16) to show compare finds it", NULL, "SPEC"},
        {"--workloads", OPT_STR, &workloads, NULL, wl_help, NULL, "LIST"},
        {"--workload", OPT_STR, &parity_wl, ACCEPT_DEFAULT_WORKLOAD, "parity: the workload its seeds train (its check is "
         "parity for ctr, parity-W for another W)", NULL, "W"},
        {0},
    };
    plumb_err e = {0};
    int rc = args_parse(usage, summary, opts, argc, argv, NULL, 0, NULL, &e);
    if (rc == ARGS_HELP) return 0;
    if (rc) return cli_fail("accept", &e);
    /* accept checks exactly the devices it lists: a GPU that fails to open
     * must fail its checks, not be replaced by the cpu (dev/dev.h) */
    dev_set_cpu_fallback(0);
    if (quick + standard + full > 1) {
        err_set(&e, PLUMB_EUSAGE, "give at most one of --quick, --standard, --full");
        return cli_fail("accept", &e);
    }
    enum level lv = quick ? LEVEL_QUICK : full ? LEVEL_FULL : LEVEL_STANDARD;
    static struct plant plant;
    if (plant_parse(plant_spec, &plant, &e)) return cli_fail("accept", &e);
    if (seeds == 1) {
        err_set(&e, PLUMB_EUSAGE, "--seeds 1: a seed spread needs at least 2 seeds");
        return cli_fail("accept", &e);
    }
    const struct workload *pwl;
    if (accept_workload_find(parity_wl, "--workload", &pwl, &e)) return cli_fail("accept", &e);
    g_parity.wl = pwl;
    /* --workloads: the train checks' workloads (default: the standard set) */
    const struct workload *sel[MAX_WL];
    int nsel = 0;
    if (workloads) {
        char wbuf[512], *wn[MAX_WL];
        int nw = args_split_list(workloads, wbuf, sizeof wbuf, wn, MAX_WL);
        if (nw <= 0) {
            err_set(&e, PLUMB_EUSAGE, "--workloads: '%s' is not a comma list of workloads (%s)", workloads, wl_names);
            return cli_fail("accept", &e);
        }
        for (int i = 0; i < nw; i++) {
            const struct workload *wl;
            if (accept_workload_find(wn[i], "--workloads", &wl, &e)) return cli_fail("accept", &e);
            int seen = 0;
            for (int k = 0; k < nsel; k++) seen |= sel[k] == wl;
            if (!seen) sel[nsel++] = wl;
        }
    } else {
        for (int i = 0; accept_workload_at(i) && nsel < MAX_WL; i++)
            if (accept_workload_standard(accept_workload_at(i), NULL, 0)) sel[nsel++] = accept_workload_at(i);
    }
    g_parity.seeds = (int)seeds;
    g_parity.seed_base = (uint64_t)seed_base;
    g_parity.steps = seed_steps;
    g_parity.plant = &plant;
    /* --checks: names are the first word of a table label ("numerics golden" -> numerics) */
    char onlybuf[512], *names[32];
    int nnames = 0;
    if (strcmp(only, "all")) {
        nnames = args_split_list(only, onlybuf, sizeof onlybuf, names, 32);
        if (nnames <= 0) {
            err_set(&e, PLUMB_EUSAGE, "--checks: '%s' is not a comma list of check names", only);
            return cli_fail("accept", &e);
        }
        for (int i = 0; i < nnames; i++) {
            int known = 0;
            for (size_t t = 0; t < sizeof accept_table / sizeof *accept_table && !known; t++)
                known = entry_named(&accept_table[t], names[i]);
            if (!known) {
                char list[512] = "";
                for (size_t t = 0; t < sizeof accept_table / sizeof *accept_table; t++) {
                    size_t L = strcspn(accept_table[t].label, " ");
                    if (t && !strncmp(accept_table[t].label, accept_table[t - 1].label, L)) continue;
                    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%.*s", t ? ", " : "", (int)L,
                             accept_table[t].label);
                    for (int w = 0; accept_table[t].per_workload && accept_workload_at(w); w++)
                        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%.*s-%s", w ? ", " : " (",
                                 (int)L, accept_table[t].label, accept_workload_at(w)->name);
                    if (accept_table[t].per_workload) snprintf(list + strlen(list), sizeof list - strlen(list), ")");
                }
                err_set(&e, PLUMB_EUSAGE, "--checks: unknown check '%s' (expected some of: %s)", names[i], list);
                return cli_fail("accept", &e);
            }
            /* a known check outside the level ran nothing and the verdict read
             * "PASS (0 checks)": a check that cannot fail */
            int at_level = 0, need = LEVEL_FULL;
            for (size_t t = 0; t < sizeof accept_table / sizeof *accept_table; t++)
                if (entry_named(&accept_table[t], names[i])) {
                    at_level |= entry_at_level(&accept_table[t], lv);
                    if ((int)accept_table[t].min_level < need) need = (int)accept_table[t].min_level;
                }
            if (!at_level) {
                err_set(&e, PLUMB_EUSAGE, "--checks: '%s' is not a check of --%s (it runs from --%s up: add --%s)",
                        names[i], level_names[lv], level_names[need], level_names[need]);
                return cli_fail("accept", &e);
            }
        }
    }
    /* the parity check's settings, given to a run without it, changed nothing and were ignored without
     * a word: 'plumb accept --quick --plant lr=3' (a drill that is to show compare finds the plant)
     * wrote a PASS folder with nothing planted */
    int parity_runs = 0;
    for (size_t t = 0; t < sizeof accept_table / sizeof *accept_table; t++)
        parity_runs |= accept_table[t].run == run_parity && entry_at_level(&accept_table[t], lv) &&
                       entry_selected(&accept_table[t], names, nnames);
    if (!parity_runs) {
        char given[128] = "";
        if (plant_spec) snprintf(given, sizeof given, "--plant %s", plant_spec);
        else if (seeds > 0) snprintf(given, sizeof given, "--seeds %ld", seeds);
        else if (seed_steps > 0) snprintf(given, sizeof given, "--seed-steps %ld", seed_steps);
        else if (seed_base != 1) snprintf(given, sizeof given, "--seed-base %ld", seed_base);
        else if (strcmp(parity_wl, ACCEPT_DEFAULT_WORKLOAD)) snprintf(given, sizeof given, "--workload %s", parity_wl);
        if (given[0]) {
            err_set(&e, PLUMB_EUSAGE, "%s applies only to the parity check, which this run does not include (%s)", given,
                    nnames ? "--checks does not name parity" : "it runs from --standard up, or at --quick with --seeds K");
            return cli_fail("accept", &e);
        }
    }
    char specs[64][32];
    int ndev = 0;
    if (select_devices(device, specs, 64, &ndev, &e)) return cli_fail("accept", &e);

    /* the command line as given, for the record */
    char cmdline[1024];
    args_command_line(argc, argv, cmdline, sizeof cmdline);
    struct results res;
    if (results_open(&res, out, cmdline, &e)) return cli_fail("accept", &e);
    json_object_set_new(res.root, "level", json_string(level_names[lv]));

    /* record the platform: every device used, opened once */
    for (int i = 0; i < ndev; i++) {
        struct dev *d = NULL;
        plumb_err de = {0};
        if (dev_open(specs[i], &d, &de) == PLUMB_OK) {
            results_add_device(&res, d);
            dev_close(d);
        }
    }

    /* backends among the devices ("cuda:0" -> "cuda"), for per-backend checks */
    char backends[64][32];
    int backend_of[64], nbackends = 0;
    for (int i = 0; i < ndev; i++) {
        snprintf(backends[i], sizeof backends[i], "%.*s", (int)strcspn(specs[i], ":"), specs[i]);
        backend_of[i] = i;
        for (int j = 0; j < i; j++)
            if (!strcmp(backends[j], backends[i])) {
                backend_of[i] = j;
                break;
            }
        if (backend_of[i] == i) nbackends++;
    }
    int tty = table_stderr_tty();
    int total = 0;
    for (size_t t = 0; t < sizeof accept_table / sizeof *accept_table; t++) {
        const struct accept_entry *a = &accept_table[t];
        if (!entry_at_level(a, lv) || !entry_selected(a, names, nnames)) continue;
        const struct workload *wls[MAX_WL];
        int nwl = a->per_workload ? entry_workloads(a, names, nnames, sel, nsel, wls) : 1;
        total += (a->per_device == 2 ? nbackends : a->per_device ? ndev : 1) * nwl;
        if (a->per_workload) {
            /* the record: which workloads the train checks ran */
            char list[256] = "";
            for (int i = 0; i < nwl; i++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? "," : "", wls[i]->name);
            json_object_set_new(res.root, "workloads", json_string(list));
        }
    }
    double t0 = timer_now();
    int had_internal = 0, step = 0;
    plumb_err he = {0};
    if (health_run_monitor_start(5, &he)) fprintf(stderr, "plumb accept: health monitor not started: %s\n", he.msg);
    for (size_t t = 0; t < sizeof accept_table / sizeof *accept_table; t++) {
        const struct accept_entry *a = &accept_table[t];
        if (!entry_at_level(a, lv) || !entry_selected(a, names, nnames)) continue;
        const struct workload *wls[MAX_WL] = {NULL};
        int nwl = a->per_workload ? entry_workloads(a, names, nnames, sel, nsel, wls) : 1;
        const int nd = a->per_device ? ndev : 1;
        for (int k = 0; k < nwl * nd; k++) {
            const int wi = k / nd, di = k % nd; /* workload-major: a workload's cpu reference serves every GPU */
            /* per backend: the first device of each backend stands for it */
            if (a->per_device == 2 && backend_of[di] != di) continue;
            const char *dspec = a->per_device == 2 ? backends[di] : specs[di];
            const struct workload *wl = a->per_workload ? wls[wi] : NULL;
            char label[96];
            if (wl) snprintf(label, sizeof label, "%s-%s", a->label, wl->name);
            else if (a->run == run_parity) accept_check_name("parity", g_parity.wl, label, sizeof label);
            else snprintf(label, sizeof label, "%s", a->label);
            struct check_ctx ctx = {.run_dir = res.dir, .device = a->per_device ? dspec : "cpu",
                                    .level = level_names[lv], .threads = (int)threads, .tty = tty};
            step++;
            if (tty) fprintf(stderr, "[%d/%d] %s%s%s ...", step, total, label, a->per_device ? " on " : "",
                             a->per_device ? dspec : "");
            struct check_result r = {0};
            plumb_err ce = {0};
            double c0 = timer_now();
            int crc = a->run(&ctx, a, wl, lv, &r, &ce);
            if (crc != PLUMB_OK) {
                /* it could not run: record that as a failed entry */
                if (!r.obj && check_begin(&r, label, a->per_device ? dspec : NULL) != PLUMB_OK) {
                    results_close(&res);
                    err_set(&e, PLUMB_ENOMEM, "out of memory");
                    return cli_fail("accept", &e);
                }
                check_set_status(&r, CHECK_FAIL, "could not run (%s): %s", err_code_name(crc), ce.msg);
                if (internal_code(crc)) had_internal = 1;
                json_object_del(r.obj, "status");
            }
            results_add_check(&res, &r);
            if (tty) fprintf(stderr, "\r[%d/%d] %s%s%s: %s (%.1f s)\033[K\n", step, total, label,
                             a->per_device ? " on " : "", a->per_device ? dspec : "", check_status_name(r.status),
                             timer_now() - c0);
            check_free(&r);
            /* results.json after every check: an interrupted run keeps what it has */
            res.write_html = 0;
            if (results_write(&res, &e)) {
                results_close(&res);
                return cli_fail("accept", &e);
            }
        }
    }
    health_run_monitor_stop();
    res.write_html = 1;
    if (results_write(&res, &e)) {
        results_close(&res);
        return cli_fail("accept", &e);
    }
    /* doctor findings worth a look, under the table */
    print_verdict(&res, timer_now() - t0);
    size_t i;
    json_t *c;
    json_array_foreach(res.mine, i, c)
    {
        if (strcmp(jsonx_str(c, "name"), "doctor")) continue;
        size_t j;
        json_t *row;
        int header = 0;
        json_array_foreach(json_object_get(json_object_get(c, "details"), "rows"), j, row)
        {
            const char *st = jsonx_str(row, "status");
            if (!st || !strcmp(st, "pass")) continue;
            if (!header++) printf("\ndoctor findings:\n");
            printf("  %-4s ", st);
            table_put(stdout, jsonx_str(row, "item"), 28, 1);
            table_put(stdout, jsonx_str(row, "reason"), 0, 0);
            printf("\n");
        }
    }
    int code = had_internal ? 3 : results_exit_code(&res);
    results_close(&res);
    return code;
}
