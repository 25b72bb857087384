/* plumb health: one table of every device's health (GPUs through NVML / ROCm
 * SMI, the host and NUMA nodes through Linux), thresholds and alerts,
 * --watch, --json, --jsonl, and --serve (Prometheus /metrics). */
#include "accept/checks.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "core/err.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "core/timer.h"
#include "health/exporter.h"
#include "health/health.h"
#include "report/results.h"
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t g_stop;
static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

static void cell(char *out, size_t n, const struct health_sample *s, int q, const char *fmt)
{
    if (!s->ok[q]) snprintf(out, n, "-");
    else snprintf(out, n, fmt, s->v[q]);
}

static void print_table(const struct health_sample *s, int n, const struct health_eval *ev)
{
    printf("%-8s %-22s %6s %6s %15s %5s %17s %6s %9s %11s %-18s %s\n", "device", "name", "temp", "memtmp",
           "power/limit W", "util", "mem used/total", "sm", "ecc c/u", "pcie", "throttle", "alerts");
    for (int i = 0; i < n; i++) {
        const struct health_sample *x = &s[i];
        char t[16], mt[16], pw[32], p1[16], p2[16], ut[16], mem[40], m1[16], m2[16], sm[16], ecc[32], pcie[32],
            thr[256], al[256];
        cell(t, sizeof t, x, HQ_TEMP, "%.0fC");
        cell(mt, sizeof mt, x, HQ_MEM_TEMP, "%.0fC");
        cell(p1, sizeof p1, x, HQ_POWER, "%.1f");
        cell(p2, sizeof p2, x, HQ_POWER_LIMIT, "%.0f");
        snprintf(pw, sizeof pw, "%s/%s", p1, p2);
        if (x->kind == HEALTH_HOST) cell(ut, sizeof ut, x, HQ_LOAD1, "ld%.1f");
        else cell(ut, sizeof ut, x, HQ_UTIL_GPU, "%.0f%%");
        cell(m1, sizeof m1, x, HQ_MEM_USED, "%.0f");
        cell(m2, sizeof m2, x, HQ_MEM_TOTAL, "%.0f");
        snprintf(mem, sizeof mem, "%s/%s MiB", m1, m2);
        cell(sm, sizeof sm, x, HQ_CLK_SM, "%.0f");
        int cq = x->ok[HQ_ECC_CORR_VOL] ? HQ_ECC_CORR_VOL : HQ_ECC_CORR_AGG;
        int uq = x->ok[HQ_ECC_UNCORR_VOL] ? HQ_ECC_UNCORR_VOL : HQ_ECC_UNCORR_AGG;
        if (x->ok[cq] && x->ok[uq]) snprintf(ecc, sizeof ecc, "%.0f/%.0f", x->v[cq], x->v[uq]);
        else snprintf(ecc, sizeof ecc, "-");
        if (x->ok[HQ_PCIE_GEN] && x->ok[HQ_PCIE_WIDTH])
            snprintf(pcie, sizeof pcie, "g%.0fx%.0f", x->v[HQ_PCIE_GEN], x->v[HQ_PCIE_WIDTH]);
        else snprintf(pcie, sizeof pcie, "-");
        if (x->ok[HQ_PCIE_GEN] && x->ok[HQ_PCIE_WIDTH] && x->ok[HQ_PCIE_GEN_MAX] && x->ok[HQ_PCIE_WIDTH_MAX])
            snprintf(pcie, sizeof pcie, "g%.0fx%.0f/g%.0fx%.0f", x->v[HQ_PCIE_GEN], x->v[HQ_PCIE_WIDTH],
                     x->v[HQ_PCIE_GEN_MAX], x->v[HQ_PCIE_WIDTH_MAX]);
        if (!x->ok[HQ_THROTTLE]) snprintf(thr, sizeof thr, "-");
        else if (!health_throttle_names(x->vendor, x->throttle_bits, thr, sizeof thr)) snprintf(thr, sizeof thr, "none");
        if (!health_eval_active(ev, x->device, al, sizeof al)) snprintf(al, sizeof al, "none");
        char name[23];
        snprintf(name, sizeof name, "%s", x->name);
        printf("%-8s %-22s %6s %6s %15s %5s %17s %6s %9s %11s %-18s %s\n", x->device, name, t, mt, pw, ut, mem, sm,
               ecc, pcie, thr, al);
    }
}

static json_t *round_json(const struct health_sample *s, int n, const struct health_alert *al, int na)
{
    json_t *o = json_object();
    json_object_set_new(o, "type", json_string("health"));
    json_object_set_new(o, "time", json_real(timer_wall()));
    json_t *d = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(d, health_sample_json(&s[i]));
    json_object_set_new(o, "devices", d);
    json_t *a = json_array();
    for (int i = 0; i < na; i++) json_array_append_new(a, health_alert_json(&al[i]));
    json_object_set_new(o, "alerts", a);
    return o;
}

static void sleep_until_stop(double seconds)
{
    double end = timer_now() + seconds;
    while (!g_stop && timer_now() < end) {
        double left = end - timer_now();
        struct timespec ts = {0, (long)((left < 0.1 ? left : 0.1) * 1e9)};
        if (ts.tv_nsec > 0) nanosleep(&ts, NULL);
    }
}

int cmd_health(int argc, char **argv)
{
    const char *out_dir = NULL, *thr_file = NULL, *jsonl = NULL, *serve = NULL, *providers = NULL, *port_file = NULL;
    double watch = 0, req_timeout = 10, duration = 0;
    long count = 0;
    int json = 0;
    const struct opt opts[] = {
        {"--json", OPT_FLAG, &json, NULL, "print one JSON document (devices, alerts, thresholds) instead of the table", NULL, NULL},
        {"--jsonl", OPT_STR, &jsonl, NULL, "append one JSON line per sample round to FILE", NULL, "FILE"},
        {"--watch", OPT_DOUBLE, &watch, "0", "refresh every SECONDS (0: once); with --serve: the sampling interval (0 means 5)", NULL, "SECONDS"},
        {"--count", OPT_INT, &count, "0", "with --watch or --serve: stop after N sample rounds (0: until interrupted)", "0..1000000000", NULL},
        {"--thresholds", OPT_STR, &thr_file, NULL, "threshold file (key = value; see docs/health.md). Defaults: gpu_temp_c 85, power_w 450, ecc_per_hour 10", NULL, "FILE"},
        {"--providers", OPT_STR, &providers, "all", "providers to use: all, or a comma list of nvml, rocm-smi, amdsmi, linux", NULL, "LIST"},
        {"--serve", OPT_STR, &serve, NULL, "serve Prometheus text at http://ADDR:PORT/metrics; ':PORT' or 'PORT' bind 127.0.0.1; port 0 picks a free one (printed); a port in use is an error", NULL, "ADDR:PORT"},
        {"--request-timeout", OPT_DOUBLE, &req_timeout, "10", "with --serve: cut a connection whose request takes longer than SECONDS", NULL, "SECONDS"},
        {"--duration", OPT_DOUBLE, &duration, "0", "with --serve: stop after SECONDS (0: until SIGINT/SIGTERM)", NULL, "SECONDS"},
        {"--out", OPT_STR, &out_dir, NULL, "also record a 'health' check (samples, alerts) in run folder DIR (results.json, report.html)", NULL, "DIR"},
        {"--port-file", OPT_STR, &port_file, NULL, "with --serve: write the bound port number to FILE", NULL, "FILE"},
        {0},
    };
    plumb_err e = {0};
    int rc = args_parse("plumb health [options]",
                        "Samples every device's health (NVIDIA through NVML, AMD through ROCm SMI, the host and its NUMA\n"
                        "nodes through Linux sysfs/procfs), applies thresholds and prints one table. Quantities a device\n"
                        "does not report show as '-' and are never exported as 0. Exit 1 when a threshold is crossed.",
                        opts, argc, argv, NULL, 0, NULL, &e);
    if (rc == ARGS_HELP) return 0;
    if (rc) return cli_fail("health", &e);
    if (watch < 0) {
        err_set(&e, PLUMB_EUSAGE, "--watch: %g is negative (expected seconds >= 0)", watch);
        return cli_fail("health", &e);
    }
    /* each bad value named with what was given (it read "--request-timeout must be > 0 and --duration >= 0") */
    if (!(req_timeout > 0)) {
        err_set(&e, PLUMB_EUSAGE, "--request-timeout: %g is not a positive number of seconds", req_timeout);
        return cli_fail("health", &e);
    }
    if (duration < 0) {
        err_set(&e, PLUMB_EUSAGE, "--duration: %g is negative (expected seconds >= 0)", duration);
        return cli_fail("health", &e);
    }
    /* options that only mean something with --serve (or --watch) were ignored without a word: --port-file
     * never written (a script waiting for it waits for ever), --duration never stopping a --watch loop */
    if (!serve) {
        const char *only = port_file ? "--port-file" : duration != 0 ? "--duration" : req_timeout != 10 ? "--request-timeout" : NULL;
        if (only) {
            err_set(&e, PLUMB_EUSAGE, "%s applies only with --serve ADDR:PORT", only);
            return cli_fail("health", &e);
        }
        if (count > 0 && watch == 0) {
            err_set(&e, PLUMB_EUSAGE, "--count %ld applies only with --watch SECONDS or --serve (without them: one "
                    "round)", count);
            return cli_fail("health", &e);
        }
    }
    struct health_thresholds thr;
    health_thresholds_default(&thr);
    if (thr_file && (rc = health_thresholds_load(&thr, thr_file, &e))) {
        err_wrap(&e, "--thresholds");
        return cli_fail("health", &e);
    }
    /* the run folder opened (created, or an existing one checked) before any
     * sampling: a bad --out was said only after a --watch or --duration ran */
    struct results res;
    int res_open = 0;
    if (out_dir) {
        char cmdline[1024];
        args_command_line(argc, argv, cmdline, sizeof cmdline);
        if ((rc = results_open(&res, out_dir, cmdline, &e))) return cli_fail("health", &e);
        res_open = 1;
    }
    struct health_ctx ctx;
    if ((rc = health_open(&ctx, providers, &e))) {
        if (res_open) results_close(&res);
        return cli_fail("health", &e);
    }
    if (ctx.nprov == 0) {
        err_set(&e, PLUMB_EUNSUPPORTED, "no health provider could be opened (nvml: %s; rocm-smi: %s; amdsmi: %s; linux: %s)",
                ctx.notes[0], ctx.notes[1], ctx.notes[2], ctx.notes[3]);
        if (res_open) results_close(&res);
        health_close(&ctx);
        return cli_fail("health", &e);
    }
    for (int i = 0; i < HEALTH_NPROV; i++)
        if (ctx.notes[i][0] && strcmp(ctx.notes[i], "not requested")) log_debug("health: %s: %s", ctx.names[i], ctx.notes[i]);
    struct health_eval *ev = calloc(1, sizeof *ev);
    struct health_sample *s = calloc(HEALTH_MAX_DEVICES, sizeof *s);
    FILE *jl = NULL;
    struct health_exporter *x = NULL;
    json_t *kept = json_array(), *all_alerts = json_array(); /* for --out */
    int any_alert = 0, exit_code = 0;
    if (!ev || !s) {
        err_set(&e, PLUMB_ENOMEM, "out of memory");
        exit_code = cli_fail("health", &e);
        goto out;
    }
    health_eval_init(ev, &thr);
    if (jsonl && !(jl = fopen(jsonl, "a"))) {
        err_set(&e, PLUMB_EUSAGE, "--jsonl: cannot open '%s' for appending", jsonl);
        exit_code = cli_fail("health", &e);
        goto out;
    }
    g_stop = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (serve) {
        struct health_exporter_opts xo = {serve, req_timeout, 10, 512, 64 * 1024};
        if ((rc = health_exporter_start(&x, &xo, &e))) {
            exit_code = cli_fail("health", &e);
            goto out;
        }
        if (watch <= 0) watch = 5;
    }
    double t_start = timer_now();
    for (long round = 0;; round++) {
        int n = 0;
        if ((rc = health_sample_all(&ctx, s, HEALTH_MAX_DEVICES, &n, &e))) {
            exit_code = cli_fail("health", &e);
            goto out;
        }
        struct health_alert al[128];
        int na = 0;
        health_eval_samples(ev, s, n, al, 128, &na);
        any_alert |= na > 0;
        if (out_dir) {
            /* keep at most 1000 rounds for the run folder */
            if (json_array_size(kept) >= 1000) json_array_remove(kept, 0);
            json_array_append_new(kept, round_json(s, n, al, na));
            for (int i = 0; i < na; i++) json_array_append_new(all_alerts, health_alert_json(&al[i]));
        }
        if (jl) {
            json_t *line = round_json(s, n, al, na);
            rc = jsonx_append_line(jl, line, &e);
            json_decref(line);
            if (rc) {
                exit_code = cli_fail("health", &e);
                goto out;
            }
        }
        if (x) {
            char *text = health_prom_render(s, n, ev);
            if (!text) {
                err_set(&e, PLUMB_ENOMEM, "cannot render /metrics");
                exit_code = cli_fail("health", &e);
                goto out;
            }
            health_exporter_publish(x, text);
            if (round == 0) {
                char url[160];
                health_exporter_url(x, url, sizeof url);
                printf("serving %s (port %d)\n", url, health_exporter_port(x));
                fflush(stdout);
                if (port_file) {
                    FILE *pf = fopen(port_file, "w");
                    if (!pf || fprintf(pf, "%d\n", health_exporter_port(x)) < 0 || fclose(pf)) {
                        err_set(&e, PLUMB_EUSAGE, "--port-file: cannot write '%s'", port_file);
                        exit_code = cli_fail("health", &e);
                        goto out;
                    }
                }
            }
        } else if (json) {
            json_t *doc = round_json(s, n, al, na);
            json_object_set_new(doc, "thresholds", health_thresholds_json(&thr));
            json_t *pv = json_object();
            for (int i = 0; i < HEALTH_NPROV; i++)
                json_object_set_new(pv, ctx.names[i], json_string(ctx.notes[i][0] ? ctx.notes[i] : "ok"));
            json_object_set_new(doc, "providers", pv);
            char *str = json_dumps(doc, JSON_INDENT(2) | JSON_REAL_PRECISION(15));
            json_decref(doc);
            if (str) printf("%s\n", str);
            free(str);
        } else {
            if (watch > 0 && isatty(STDOUT_FILENO)) printf("\033[H\033[2J");
            print_table(s, n, ev);
            for (int i = 0; i < na; i++)
                printf("ALERT %s %s = %g (limit %g)%s%s\n", al[i].device, al[i].quantity, al[i].value, al[i].limit,
                       al[i].detail[0] ? ": " : "", al[i].detail);
        }
        fflush(stdout);
        if (watch <= 0 || g_stop) break;
        if (count > 0 && round + 1 >= count) break;
        if (x && duration > 0) {
            double left = duration - (timer_now() - t_start);
            if (left <= 0) break;
            sleep_until_stop(left < watch ? left : watch);
            if (timer_now() - t_start >= duration) break;
        } else {
            sleep_until_stop(watch);
        }
        if (g_stop) break;
    }
    if (x) {
        unsigned long req = 0, reaped = 0;
        health_exporter_stats(x, &req, &reaped);
        log_info("health: exporter answered %lu /metrics requests, cut %lu slow connections", req, reaped);
    }
    exit_code = any_alert && !x ? 1 : 0;
    if (res_open) {
        struct check_ctx cctx = {.run_dir = res.dir, .device = "cpu", .level = "quick"};
        struct check_result r = {0};
        rc = check_health_report(&cctx, kept, all_alerts, &thr, "plumb health", &r, &e);
        if (!rc) {
            results_add_check(&res, &r);
            rc = results_write(&res, &e);
        }
        check_free(&r);
        results_close(&res);
        res_open = 0;
        if (rc) {
            exit_code = cli_fail("health", &e);
            goto out;
        }
        printf("run folder: %s\n", res.dir);
    }
out:
    if (res_open) results_close(&res);
    json_decref(kept);
    json_decref(all_alerts);
    if (x) health_exporter_stop(x);
    if (jl) fclose(jl);
    health_close(&ctx);
    free(ev);
    free(s);
    return exit_code;
}
