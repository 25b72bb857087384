/* plumb train WORKLOAD: trains a reference workload (models/workloads.h) on 1..N ranks.
 * Under mpirun/srun every rank runs this command; rank 0 writes the run
 * folder (metrics.jsonl, results.json) and prints the summary. */
#include "cli/args.h"
#include "cli/commands.h"
#include "comm/comm.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "accept/checks.h"
#include "accept/train_verdict.h"
#include "core/file.h"
#include "health/monitor.h"
#include "report/results.h"
#include "models/workloads.h"
#include "train/bind.h"
#include "train/ckpt.h"
#include "train/inject.h"
#include "train/options.h"
#include "train/trainer.h"
#include <errno.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The command line through the option table (train/options.h): every
 * option of the workload as a cli/args.h option holding its text, then set
 * on the config in table order, then the preset's defaults. */
struct parsed {
    const char *text[TRAIN_MAX_OPTS];
    int flag[TRAIN_MAX_OPTS];
    char help[TRAIN_MAX_OPTS][768];
    struct opt opts[TRAIN_MAX_OPTS + 1];
};

static int parse_train(int argc, char **argv, const struct workload *wl, struct parsed *p, struct train_config *cfg,
                       plumb_err *e)
{
    int n = train_option_count(wl);
    if (n > TRAIN_MAX_OPTS) return err_set(e, PLUMB_EINTERNAL, "%d options (at most %d)", n, TRAIN_MAX_OPTS);
    memset(p->opts, 0, sizeof p->opts);
    for (int i = 0; i < n; i++) {
        const struct train_option *o = train_option_at(wl, i);
        char def[512] = "";
        train_option_default_desc(wl, o, def, sizeof def);
        const char *h = !strcmp(o->name, "--data") && wl->data_help ? wl->data_help : o->help;
        size_t k = (size_t)snprintf(p->help[i], sizeof p->help[i], "%s", h);
        if (o->kind == TOPT_CHOICE) k += (size_t)snprintf(p->help[i] + k, sizeof p->help[i] - k, " [%s]", o->range);
        else if (o->range && (o->kind == TOPT_INT || o->kind == TOPT_NUM || o->kind == TOPT_U64))
            k += (size_t)snprintf(p->help[i] + k, sizeof p->help[i] - k, " [%s]", o->range);
        if (!strcmp(o->name, "--preset")) {
            k += (size_t)snprintf(p->help[i] + k, sizeof p->help[i] - k, ":");
            for (const struct train_preset *q = wl->presets; q && q->name; q++)
                k += (size_t)snprintf(p->help[i] + k, sizeof p->help[i] - k, " %s (%s);", q->name, q->summary);
        }
        if (def[0] && o->kind != TOPT_FLAG && o->kind != TOPT_OPTCHOICE)
            snprintf(p->help[i] + k, sizeof p->help[i] - k, " (default: %s)", def);
        const char *unused = train_option_unused(wl, o);
        if (unused) snprintf(p->help[i], sizeof p->help[i], "not read by %s (%s): exit 2 when given", wl->name, unused);
        p->text[i] = NULL;
        p->flag[i] = 0;
        p->opts[i] = (struct opt){o->name, o->kind == TOPT_FLAG ? OPT_FLAG : o->kind == TOPT_OPTCHOICE ? OPT_OPTCHOICE : OPT_STR,
                                  o->kind == TOPT_FLAG ? (void *)&p->flag[i] : (void *)&p->text[i], NULL, p->help[i],
                                  o->kind == TOPT_OPTCHOICE ? o->range : NULL, o->metavar};
    }
    char usage[128], summary[1024], names[256];
    workload_names(names, sizeof names);
    snprintf(usage, sizeof usage, "plumb train %s [options]", wl->name);
    snprintf(summary, sizeof summary,
             "Train the %s workload: %s. Runs on 1 rank, or on N ranks under mpirun/srun (data parallel; golden "
             "numerics give the same bits on any rank count). Writes metrics.jsonl and results.json (param_digest "
             "and the workload's eval metrics) to the run folder. Workloads: %s.",
             wl->name, wl->summary, names);
    char *pos[2];
    int npos = 0;
    int rc = args_parse(usage, summary, p->opts, argc, argv, pos, 2, &npos, e);
    if (rc) return rc;
    if (npos != 1 || strcmp(pos[0], wl->name))
        return err_set(e, PLUMB_EUSAGE, "expected one WORKLOAD (%s), got %d words that are not options%s%s", names, npos,
                       npos > 1 ? ", e.g. " : "", npos > 1 ? pos[1] : "");
    train_config_defaults(cfg, wl);
    for (int i = 0; i < n; i++) {
        const struct train_option *o = train_option_at(wl, i);
        if (o->kind == TOPT_FLAG ? !p->flag[i] : !p->text[i]) continue;
        if ((rc = train_option_set(cfg, o->name, o->kind == TOPT_FLAG ? NULL : p->text[i], e))) return rc;
    }
    return train_config_finish(cfg, e);
}

/* Every output path besides the run folder (results_open checks --out). */
static int train_outputs_check(const struct train_config *cfg, plumb_err *e)
{
    int rc;
    if (cfg->ckpt_dir && (rc = ckpt_check_dir_names(cfg->ckpt_dir, e))) return rc;
    if (cfg->ckpt_dir && (rc = file_check_output_dir("--checkpoint-dir", cfg->ckpt_dir, e))) return rc;
    if (cfg->predictions && (rc = file_check_output("--predictions", cfg->predictions, e))) return rc;
    return PLUMB_OK;
}

int cmd_train(int argc, char **argv)
{
    plumb_err e = {0};
    char names[256];
    workload_names(names, sizeof names);
    /* the WORKLOAD: the first word that is neither an option nor an
     * option's value (options of any workload count); an unknown option
     * before it is named */
    const char *wname = NULL;
    int help = 0;
    for (int i = 1; i < argc && !wname; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help = 1;
            continue;
        }
        if (a[0] != '-' || !a[1]) {
            wname = a;
            break;
        }
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)strcspn(a, "="), a);
        const struct train_option *o = train_option_find(NULL, name, NULL);
        for (int w = 0; !o && workload_at(w); w++) o = train_option_find(workload_at(w), name, NULL);
        if (!o) {
            err_set(&e, PLUMB_EUSAGE, "unknown option '%s' (see plumb train WORKLOAD --help)", name);
            return cli_fail("train", &e);
        }
        /* its value: not an option (--preset --out X is an error parse_train names) */
        if (o->kind == TOPT_FLAG || strchr(a, '=') || i + 1 >= argc) continue;
        const char *nx = argv[i + 1];
        if (o->kind == TOPT_OPTCHOICE) {
            size_t L = strlen(nx);
            const char *r = o->range;
            int is_choice = 0;
            for (const char *q = r; q && *q;) {
                size_t n = strcspn(q, "|");
                is_choice |= n == L && !strncmp(q, nx, L);
                q = q[n] ? q + n + 1 : q + n;
            }
            if (is_choice) i++;
        } else if (!(nx[0] == '-' && nx[1] == '-')) {
            i++;
        }
    }
    if (!wname) {
        if (help) {
            printf("usage: plumb train WORKLOAD [options]\n\nTrain a reference workload. WORKLOAD: %s.\n"
                   "plumb train WORKLOAD --help lists its options with their defaults.\n", names);
            for (int i = 0; workload_at(i); i++) printf("  %-10s %s\n", workload_at(i)->name, workload_at(i)->summary);
            return 0;
        }
        err_set(&e, PLUMB_EUSAGE, "expected a WORKLOAD (%s)", names);
        return cli_fail("train", &e);
    }
    const struct workload *wl = workload_find(wname);
    if (!wl) {
        err_set(&e, PLUMB_EUSAGE, "workload '%s' is not available (expected %s)", wname, names);
        return cli_fail("train", &e);
    }
    struct train_config cfg;
    struct parsed *pp = calloc(1, sizeof *pp);
    if (!pp) {
        err_set(&e, PLUMB_ENOMEM, "out of memory");
        return cli_fail("train", &e);
    }
    int rc = parse_train(argc, argv, wl, pp, &cfg, &e);
    if (rc == ARGS_HELP) {
        free(pp);
        return 0;
    }
    if (rc) {
        free(pp);
        return cli_fail("train", &e);
    }
    struct health_thresholds hthr;
    health_thresholds_default(&hthr);
    if (cfg.health_thresholds && health_thresholds_load(&hthr, cfg.health_thresholds, &e)) {
        err_wrap(&e, "--health-thresholds"); /* was named --thresholds, plumb health's option */
        free(pp);
        return cli_fail("train", &e);
    }
    if (cfg.inject && inject_parse(cfg.inject, &e)) {
        free(pp);
        return cli_fail("train", &e);
    }
    if (cfg.quiet) log_set_level(LOG_WARN);
    cfg.progress = 1;
    const char *comm = cfg.comm, *device = cfg.device, *out = cfg.out;
    const double health_interval = cfg.health_interval;

    struct comm *c;
    /* the host comm (control, golden sums, the host gradient path); nccl rides on it */
    if (comm_init(!strcmp(comm, "self") || !strcmp(comm, "mpi") ? comm : "auto", &c, &e)) return cli_fail("train", &e);

    /* binding first, so every thread started from here on inherits it and
     * the buffers the trainer allocates land on the node */
    struct bind_result bnd;
    if (bind_apply(cfg.bind ? cfg.bind : "none", device, c->local_rank, c->local_world, &bnd, &e)) {
        free(pp);
        int code = cli_fail("train", &e);
        if (c->world > 1) comm_abort(c, code);
        comm_finalize(c);
        return code;
    }
    /* every rank's binding, for results.json */
    json_t *bnd_all = NULL;
    {
        json_t *mine = bind_json(&bnd);
        json_object_set_new(mine, "rank", json_integer(c->rank));
        json_object_set_new(mine, "local_rank", json_integer(c->local_rank));
        char *txt = json_dumps(mine, JSON_COMPACT);
        json_decref(mine);
        void *all = NULL;
        size_t total = 0;
        plumb_err ge = {0};
        if (txt && comm_allgatherv_alloc(c, txt, strlen(txt) + 1, &all, &total, NULL, "rank bindings", &ge) == PLUMB_OK) {
            bnd_all = json_array();
            for (size_t off = 0; off < total; off += strlen((char *)all + off) + 1)
                json_array_append_new(bnd_all, json_loads((char *)all + off, 0, NULL));
            free(all);
        } else {
            log_warn("bind: the ranks' bindings could not be gathered: %s", ge.msg);
        }
        free(txt);
    }

    /* rank 0 checks every output path, then creates the run folder and the
     * train check's artifact folder (metrics.jsonl); everyone learns the
     * outcome. Nothing trains before all of them are known to be writable. */
    struct results res;
    memset(&res, 0, sizeof res);
    struct check_result r;
    memset(&r, 0, sizeof r);
    char check_name[64], adir[PATH_MAX] = "", mrel[PATH_MAX] = "";
    snprintf(check_name, sizeof check_name, "train-%s", wl->name);
    int32_t st = 0;
    if (c->rank == 0) {
        char cmdline[2048];
        args_command_line(argc, argv, cmdline, sizeof cmdline);
        struct check_ctx actx = {0};
        char mpath[PATH_MAX + 32];
        if (results_open(&res, out, cmdline, &e)) {
            st = e.code;
        } else if (actx.run_dir = res.dir, actx.device = device, check_begin(&r, check_name, device)) {
            st = err_set(&e, PLUMB_ENOMEM, "out of memory");
        } else if (train_outputs_check(&cfg, &e)) {
            /* the run folder records why nothing trained */
            st = e.code;
            check_set_status(&r, CHECK_FAIL, "could not run (%s): %s", err_code_name(st), e.msg);
            results_add_check(&res, &r);
        } else if (check_artifact_dir(&actx, &r, adir, sizeof adir, &e)) {
            st = e.code ? e.code : PLUMB_EIO;
        } else {
            snprintf(mpath, sizeof mpath, "%s/metrics.jsonl", adir);
            check_artifact_rel(&actx, mpath, mrel, sizeof mrel);
            check_artifact(&r, mrel);
        }
        if (!st && bnd_all && res.root) json_object_set(res.root, "binding", bnd_all);
    }
    plumb_err be = {0};
    if (comm_broadcast(c, &st, sizeof st, 0, "run folder", &be) || comm_broadcast(c, adir, sizeof adir, 0, "run folder", &be)) {
        if (!e.code) e = be;
        st = e.code ? e.code : PLUMB_EINTERNAL;
    }
    json_decref(bnd_all);
    if (st) {
        if (c->rank != 0 && !e.code) err_set(&e, st, "rank 0 could not create the run folder");
        check_free(&r);
        if (res.root) {
            results_note_error(&res, err_exit_code(st), e.msg);
            plumb_err we = {0};
            (void)results_write(&res, &we);
            results_close(&res);
        }
        comm_finalize(c);
        free(pp);
        return cli_fail("train", &e);
    }
    cfg.out_dir = adir;

    /* health: one sampler per host (local rank 0) */
    struct health_monitor *hm = NULL;
    if (health_interval > 0 && c->local_rank == 0) {
        struct health_monitor_opts ho = {.interval_s = health_interval, .thresholds = &hthr};
        plumb_err he = {0};
        if (health_monitor_start(&hm, &ho, &he)) log_warn("health monitor not started: %s", he.msg);
    }
    cfg.health = hm;

    struct train_result tr;
    rc = trainer_run(&cfg, c, &tr, &e);
    if (rc) {
        free(pp);
        health_monitor_stop(hm);
        int code = err_exit_code(rc);
        if (c->rank == 0) {
            /* the run folder says what happened: the check failed, with its reason */
            check_set_status(&r, CHECK_FAIL, "%s (%s): %s", tr.steps_done > 0 ? "failed" : "could not run",
                             err_code_name(rc), e.msg);
            results_add_check(&res, &r);
            results_note_error(&res, code, e.msg);
            plumb_err we = {0};
            if (results_write(&res, &we)) fprintf(stderr, "plumb train: %s\n", we.msg);
            results_close(&res);
        }
        check_free(&r);
        code = cli_fail("train", &e);
        /* a usage error is seen by every rank alike; anything else may have
         * left other ranks inside a collective: end the whole job */
        if (c->world > 1 && rc != PLUMB_EUSAGE) comm_abort(c, code);
        comm_finalize(c);
        return code;
    }
    int exit_code = 0;
    if (c->rank == 0) {
        if (strcmp(tr.device, device)) {
            json_object_set_new(r.obj, "device", json_string(tr.device));
            check_detail(&r, "device_requested", json_string(device));
        }
        for (int i = 0; i < tr.eval.n; i++) check_metric(&r, tr.eval.name[i], tr.eval.value[i], "");
        for (int i = 0; i < tr.reference.n; i++)
            if (isfinite(tr.reference.value[i])) check_metric(&r, tr.reference.name[i], tr.reference.value[i], "");
        check_metric(&r, "samples_per_s", tr.samples_per_s, "samples/s");
        check_metric(&r, "steps", (double)tr.steps_done, "");
        check_metric(&r, "skipped_steps", (double)tr.skipped_steps, "");
        check_metric(&r, "backoff_steps", (double)tr.backoff_steps, "");
        check_metric(&r, "ranks", (double)c->world, "");
        check_detail(&r, "model", json_string(tr.model_desc));
        check_detail(&r, "data", json_string(tr.data_desc));
        check_detail(&r, "param_digest", json_string(tr.param_digest));
        if (tr.config_hash[0]) check_detail(&r, "config_hash", json_string(tr.config_hash));
        if (tr.ckpt_path[0]) check_detail(&r, "checkpoint", json_string(tr.ckpt_path));
        train_check_verdict(&r, &cfg, &tr);
        json_t *summary = json_pack("{s:s, s:I, s:I, s:I, s:I, s:i, s:s, s:s, s:f, s:f, s:f, s:b, s:I, s:I}", "workload",
                                    wl->name, "steps", (json_int_t)tr.steps_done, "start_step", (json_int_t)tr.start_step,
                                    "skipped_steps", (json_int_t)tr.skipped_steps, "backoff_steps",
                                    (json_int_t)tr.backoff_steps, "ranks", c->world, "numerics", cfg.numerics_name,
                                    "precision", cfg.precision_name, "samples_per_s", tr.samples_per_s, "data_wait_frac",
                                    tr.data_wait_frac, "wall_s", tr.wall_s, "interrupted", tr.interrupted,
                                    "bad_lines_skipped", (json_int_t)tr.bad_lines_skipped, "truncated_lines",
                                    (json_int_t)tr.truncated_lines);
        if (tr.interrupted) json_object_set_new(summary, "stop_reason", json_string(tr.stop_reason));
        json_object_set_new(summary, "setup_s", json_real(tr.setup_s));
        json_object_set_new(summary, "eval_s", json_real(tr.eval_s));
        /* how the steps ran: the sparse SGD fused into the backward or applied
         * from the row list; steps replayed as a device graph */
        json_object_set_new(summary, "sparse_sgd", json_string(tr.sparse_sgd));
        json_object_set_new(summary, "fused_steps", json_integer(tr.fused_steps));
        json_object_set_new(summary, "graphed_steps", json_integer(tr.graphed_steps));
        json_object_set_new(summary, "deferred_steps", json_integer(tr.deferred_steps));
        if (cfg.stop_at) {
            /* time to quality (--stop-at) */
            json_object_set_new(summary, "stop_at", json_string(cfg.stop_at));
            json_object_set_new(summary, "reached", json_boolean(tr.reached));
            if (tr.reached) {
                json_object_set_new(summary, "reached_step", json_integer(tr.reached_step));
                json_object_set_new(summary, "reached_s", json_real(tr.reached_s));
                json_object_set_new(summary, "reached_value", json_real(tr.reached_value));
                json_object_set_new(summary, "reached_samples", json_integer((json_int_t)tr.reached_step * cfg.batch));
            }
        }
        /* in the check (kept for every run of the folder) and, for the
         * latest plumb train, at the top level */
        check_detail(&r, "train", json_deep_copy(summary));
        results_add_check(&res, &r);
        if (hm) {
            /* the health entry: every alert of the run, the last sample (the
             * series is in metrics.jsonl) */
            plumb_err he = {0};
            if (health_monitor_sample_now(hm, &he)) log_warn("health: final sample failed: %s", he.msg);
            json_t *lines = health_monitor_drain(hm), *alerts = health_monitor_alerts_json(hm);
            struct check_ctx hctx = {.run_dir = res.dir, .device = device, .level = "quick"};
            struct check_result hr = {0};
            if (!check_health_report(&hctx, lines, alerts, &hthr,
                                     tr.overheat ? "sampled through the run; stopped on a critical temperature"
                                                 : "sampled through the run",
                                     &hr, &he))
                results_add_check(&res, &hr);
            check_free(&hr);
            json_decref(lines);
            json_decref(alerts);
        }
        json_t *root = res.root;
        json_object_set_new(root, "param_digest", json_string(tr.param_digest));
        if (tr.has_eval)
            for (int i = 0; i < tr.eval.n; i++)
                json_object_set_new(root, tr.eval.name[i],
                                    isfinite(tr.eval.value[i]) ? json_real(tr.eval.value[i]) : json_null());
        for (int i = 0; i < tr.reference.n; i++)
            if (isfinite(tr.reference.value[i]))
                json_object_set_new(root, tr.reference.name[i], json_real(tr.reference.value[i]));
        json_object_set_new(root, "train", summary);
        exit_code = results_exit_code(&res);
        if (tr.metrics_error[0]) {
            /* the disk (or whatever refused the write) failed, not the training */
            exit_code = 3;
            results_note_error(&res, exit_code, tr.metrics_error);
            fprintf(stderr, "plumb train: %s\n", tr.metrics_error);
        }
        if (results_write(&res, &e)) {
            exit_code = cli_fail("train", &e);
        }
        results_close(&res);
        if (tr.interrupted) {
            if (tr.overheat) printf("stopped: critical GPU temperature (--on-overheat stop)\n");
            printf("interrupted at step %ld of %ld (%s); checkpoint %s\n", tr.steps_done, tr.steps_target, tr.stop_reason,
                   tr.ckpt_path[0] ? tr.ckpt_path : "(none: no --checkpoint-dir, the run cannot be resumed)");
        } else {
            if (tr.steps_done == 0) /* --steps 0: no loss to report */
                printf("trained %s %s: 0 steps (evaluation only)\n", wl->name, cfg.preset);
            else if (tr.steps_done == tr.start_step) /* resumed at --steps: no step ran, no loss ("nan -> nan") */
                printf("trained %s %s: 0 steps (resumed at step %ld of %ld: evaluation only)\n", wl->name, cfg.preset,
                       tr.start_step, tr.steps_target);
            else
                printf("trained %s %s: %ld steps, %.0f samples/s, loss %.4f -> %.4f\n", wl->name, cfg.preset,
                       tr.steps_done, tr.samples_per_s, tr.first_loss, tr.last_loss);
            if (cfg.stop_at && tr.reached)
                printf("reached %s %s at step %ld (%ld samples) in %.2f s (evals %.2f s; set-up %.2f s before)\n",
                       wl->accept->metric, cfg.stop_at, tr.reached_step, tr.reached_step * cfg.batch, tr.reached_s,
                       tr.eval_s, tr.setup_s);
            else if (cfg.stop_at)
                printf("did not reach %s %s in %ld steps\n", wl->accept->metric, cfg.stop_at, tr.steps_done);
            printf("eval:");
            for (int i = 0; i < tr.eval.n; i++) printf("%s %s %.6f", i ? " " : "", tr.eval.name[i], tr.eval.value[i]);
            printf("  (%ld samples", tr.eval.count);
            for (int i = 0; i < tr.reference.n; i++)
                if (isfinite(tr.reference.value[i])) printf(", %s %.6f", tr.reference.name[i], tr.reference.value[i]);
            printf(")\n");
        }
        const char *rs = jsonx_str(r.obj, "reason");
        printf("check %s: %s%s%s\n", check_name, check_status_name(r.status), rs ? ": " : "", rs ? rs : "");
        if (cfg.param_digest) printf("param_digest %s\n", tr.param_digest);
        printf("run folder: %s\n", res.dir);
        fflush(stdout);
    }
    check_free(&r);
    health_monitor_stop(hm);
    comm_finalize(c);
    free(pp);
    return exit_code;
}
