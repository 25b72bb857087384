/* plumb train WORKLOAD: trains a reference workload (ctr) on 1..N ranks.
 * Under mpirun/srun every rank runs this command; rank 0 writes the run
 * folder (metrics.jsonl, results.json) and prints the summary. */
#include "cli/args.h"
#include "cli/commands.h"
#include "comm/comm.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "accept/checks.h"
#include "health/monitor.h"
#include "report/results.h"
#include "train/bind.h"
#include "train/inject.h"
#include "train/trainer.h"
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Preset defaults for options left unset (-1). */
/* dlrm-kaggle: WORKLOADS.md (SGD, batch 2048, lr 0.1, warmup). ctr-tiny is
 * tuned to learn the synthetic teacher in well under a minute on 2 cores:
 * lazy AdamW reaches AUC ~0.76 (teacher 0.80) in 1500 steps of 256, where
 * sparse SGD needs several times more samples. */
static void preset_defaults(const char *preset, long *batch, double *lr, long *steps, long *warmup,
                            const char **opt)
{
    int big = !strcmp(preset, "dlrm-kaggle");
    if (!*opt) *opt = big ? "sgd" : "adamw";
    int adam = !strcmp(*opt, "adamw");
    if (*batch < 0) *batch = big ? 2048 : 256;
    if (*lr < 0) *lr = adam ? (big ? 0.001 : 0.004) : (big ? 0.1 : 0.2);
    if (*steps < 0) *steps = big ? 1000 : 1500;
    if (*warmup < 0) *warmup = big ? 100 : 50;
}

static dtype_t parse_precision(const char *s)
{
    return !strcmp(s, "bf16") ? DT_BF16 : !strcmp(s, "fp16") ? DT_F16 : DT_F32;
}

static void cmdline_join(int argc, char **argv, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "plumb");
    for (int i = 0; i < argc && k < n; i++) k += (size_t)snprintf(buf + k, n - k, " %s", argv[i]);
}

int cmd_train(int argc, char **argv)
{
    struct train_config cfg;
    train_config_defaults(&cfg);
    const char *preset = "ctr-tiny", *data = "synthetic", *eval_data = NULL, *bad = "error", *opt = NULL;
    const char *numerics = "fast", *precision = "fp32", *loss_scale = "auto", *device = "cpu";
    const char *ckdir = NULL, *out = NULL, *pred = NULL, *inject = NULL, *skip_batches = NULL;
    long max_bad = 3;
    long rows = 0, train_samples = cfg.train_samples, eval_samples = cfg.eval_samples, data_seed = 1234;
    long max_rows = 0, steps = -1, batch = -1, seed = 1, warmup = -1, eval_every = 0, eval_batch = 4096;
    long ck_every = 0, ck_keep = 3, micro = 64, ls_interval = 2000, threads = 0, prefetch = 4;
    double eval_frac = 0.1, lr = -1, wd = 0, ls_init = 65536, ls_growth = 2, ls_backoff = 0.5, clip = 0;
    double watchdog = 600;
    double health_interval = 10;
    const char *on_overheat = "stop", *health_thr = NULL, *comm = "auto", *bind = "none";
    int resume = 0, digest = 0, quiet = 0;
    const struct opt opts[] = {
        {"--preset", OPT_CHOICE, &preset, "ctr-tiny", "model preset", "ctr-tiny|dlrm-kaggle", NULL},
        {"--rows", OPT_INT, &rows, "0", "rows per embedding table (0 = the preset's: ctr-tiny 10000, dlrm-kaggle 1000000)",
         "0..2000000000", "N"},
        {"--data", OPT_STR, &data, "synthetic", "'synthetic' (teacher model) or a Criteo TSV file (.gz allowed)", NULL, "SRC"},
        {"--eval-data", OPT_STR, &eval_data, NULL, "Criteo TSV eval file (default: the last --eval-fraction of --data)", NULL, "FILE"},
        {"--eval-fraction", OPT_DOUBLE, &eval_frac, "0.1", "share of a data file's last lines held out for eval", NULL, "X"},
        {"--train-samples", OPT_INT, &train_samples, "1000000", "synthetic: samples per epoch", "1..4000000000", "N"},
        {"--eval-samples", OPT_INT, &eval_samples, "50000", "synthetic: eval split size", "1..100000000", "N"},
        {"--data-seed", OPT_INT, &data_seed, "1234", "synthetic data seed (the dataset; --seed is the model's)", "0..", "N"},
        {"--bad-lines", OPT_CHOICE, &bad, "error", "a malformed data line is an error, or is counted and skipped", "error|skip", NULL},
        {"--max-rows", OPT_INT, &max_rows, "0", "read at most N lines of --data (0 = all)", "0..", "N"},
        {"--steps", OPT_INT, &steps, NULL, "optimizer steps (global batches) in all (default: ctr-tiny 1500, dlrm-kaggle 1000)", "0..", "N"},
        {"--batch", OPT_INT, &batch, NULL, "global batch, split over the ranks (default: ctr-tiny 256, dlrm-kaggle 2048)", "1..100000000", "N"},
        {"--seed", OPT_INT, &seed, "1", "model initialisation and shuffling seed", "0..", "N"},
        {"--lr", OPT_DOUBLE, &lr, NULL, "learning rate after warmup (default: sgd 0.2 tiny / 0.1 kaggle, adamw 0.004 tiny / 0.001 kaggle)", NULL, "X"},
        {"--warmup", OPT_INT, &warmup, NULL, "linear warmup steps (default: ctr-tiny 50, dlrm-kaggle 100)", "0..", "N"},
        {"--optimizer", OPT_CHOICE, &opt, NULL, "sgd (sparse rows for tables) or adamw (lazy rows) (default: ctr-tiny adamw, dlrm-kaggle sgd)", "sgd|adamw", NULL},
        {"--weight-decay", OPT_DOUBLE, &wd, "0", "weight decay on dense tensors", NULL, "X"},
        {"--eval-every", OPT_INT, &eval_every, "0", "evaluate every N steps (0 = only at the end)", "0..", "N"},
        {"--eval-batch", OPT_INT, &eval_batch, "4096", "eval chunk size (fixed, so any rank count scores alike)", "1..1000000", "N"},
        {"--checkpoint-dir", OPT_STR, &ckdir, NULL, "write checkpoints here (and read them with --resume)", NULL, "DIR"},
        {"--checkpoint-every", OPT_INT, &ck_every, "0", "checkpoint every N steps (0 = at the end and on SIGTERM/SIGINT)", "0..", "N"},
        {"--checkpoint-keep", OPT_INT, &ck_keep, "3", "newest checkpoints kept", "1..1000", "K"},
        {"--resume", OPT_FLAG, &resume, NULL, "continue from the newest valid checkpoint in --checkpoint-dir", NULL, NULL},
        {"--numerics", OPT_CHOICE, &numerics, "fast", "fast, or golden (bit-identical on any device and rank count)", "fast|golden", NULL},
        {"--precision", OPT_CHOICE, &precision, "fp32", "compute precision (fp32 master weights)", "fp32|bf16|fp16", NULL},
        {"--micro-shard", OPT_INT, &micro, "64", "samples per micro-shard (golden reduction unit; rank split unit)", "1..1000000", "N"},
        {"--loss-scale", OPT_CHOICE, &loss_scale, "auto", "dynamic loss scaling (auto = on for fp16)", "auto|dynamic|off", NULL},
        {"--loss-scale-init", OPT_DOUBLE, &ls_init, "65536", "initial loss scale", NULL, "X"},
        {"--loss-scale-growth", OPT_DOUBLE, &ls_growth, "2", "scale factor after an interval of clean steps", NULL, "X"},
        {"--loss-scale-backoff", OPT_DOUBLE, &ls_backoff, "0.5", "scale factor after a non-finite step", NULL, "X"},
        {"--loss-scale-interval", OPT_INT, &ls_interval, "2000", "clean steps before growing the scale", "1..", "N"},
        {"--clip-grad-norm", OPT_DOUBLE, &clip, "0", "clip the global gradient norm to X (0 = off)", NULL, "X"},
        {"--device", OPT_STR, &device, "cpu", "cpu, cuda, hip, cuda:N, hip:N (cuda/hip: one GPU per local rank)", NULL, "D"},
        {"--bind", OPT_CHOICE, &bind, "none",
         "pin each rank's threads and memory: numa = the NUMA node of its GPU (cpu ranks: local rank mod nodes); none = "
         "the launcher's binding", "none|numa", NULL},
        {"--comm", OPT_CHOICE, &comm, "auto",
         "gradient comm: auto (nccl/rccl for a GPU with fast numerics on >1 rank, else the host comm), mpi, self (1 rank "
         "per process), nccl (also on 1 rank)", "auto|mpi|self|nccl", NULL},
        {"--threads", OPT_INT, &threads, "0", "cpu threads per rank (0 = cores / ranks on this host)", "0..4096", "N"},
        {"--out", OPT_STR, &out, NULL, "run folder (metrics.jsonl, results.json); default runs/<UTC>-<host>-<id>", NULL, "DIR"},
        {"--predictions", OPT_STR, &pred, NULL, "write the final eval's label,score pairs to FILE", NULL, "FILE"},
        {"--param-digest", OPT_FLAG, &digest, NULL, "print the SHA-256 of the final fp32 parameters", NULL, NULL},
        {"--prefetch", OPT_INT, &prefetch, "4", "batches the loader thread prepares ahead", "1..64", "N"},
        {"--inject", OPT_STR, &inject, NULL, "fault injection spec for drills (oom@S, nan@S, hang@S:R, exit@S:R, corrupt-checkpoint)", NULL, "SPEC"},
        {"--watchdog-timeout", OPT_DOUBLE, &watchdog, "600", "seconds a step or collective may block before the job fails (0 = off)", NULL, "S"},
        {"--step-timeout", OPT_DOUBLE, &watchdog, NULL, "the same as --watchdog-timeout", NULL, "S"},
        {"--skip-batches", OPT_STR, &skip_batches, NULL, "comma list of steps whose batch is skipped deliberately (no update; data and step advance)", NULL, "LIST"},
        {"--max-bad-steps", OPT_INT, &max_bad, "3", "non-finite steps in a row before rolling back to the last checkpoint", "1..1000000", "N"},
        {"--health-interval", OPT_DOUBLE, &health_interval, "10", "sample GPU and host health every S seconds into metrics.jsonl, with alerts (0 = off)", NULL, "S"},
        {"--on-overheat", OPT_CHOICE, &on_overheat, "stop", "on a critical temperature alert: checkpoint and stop cleanly, or only warn", "stop|warn", NULL},
        {"--health-thresholds", OPT_STR, &health_thr, NULL, "health thresholds file (key = value, docs/health.md); default 85 C, 90 C critical, 450 W, 10 ECC/h", NULL, "FILE"},
        {"--quiet", OPT_FLAG, &quiet, NULL, "no log lines, only the summary", NULL, NULL},
        {0},
    };
    plumb_err e = {0};
    char *pos[2];
    int npos = 0;
    int rc = args_parse("plumb train WORKLOAD [options]",
                        "Train a reference workload. WORKLOAD: ctr (DLRM on Criteo-format data). Runs on 1 rank, or on "
                        "N ranks under mpirun/srun (data parallel; golden numerics give the same bits on any rank "
                        "count). Writes metrics.jsonl and results.json (param_digest, auc, logloss, accuracy) to the "
                        "run folder.",
                        opts, argc, argv, pos, 2, &npos, &e);
    if (rc == ARGS_HELP) return 0;
    if (rc) return cli_fail("train", &e);
    if (npos != 1) {
        err_set(&e, PLUMB_EUSAGE, "expected one WORKLOAD (ctr), got %d", npos);
        return cli_fail("train", &e);
    }
    if (strcmp(pos[0], "ctr")) {
        err_set(&e, PLUMB_EUSAGE, "workload '%s' is not available (expected ctr)", pos[0]);
        return cli_fail("train", &e);
    }
    if (!(eval_frac > 0 && eval_frac < 1)) {
        err_set(&e, PLUMB_EUSAGE, "--eval-fraction: %g (expected 0 < X < 1)", eval_frac);
        return cli_fail("train", &e);
    }
    if (watchdog < 0 || clip < 0 || wd < 0) {
        err_set(&e, PLUMB_EUSAGE, "--watchdog-timeout, --clip-grad-norm and --weight-decay must be >= 0");
        return cli_fail("train", &e);
    }
    if (health_interval < 0) {
        err_set(&e, PLUMB_EUSAGE, "--health-interval: %g is negative (expected seconds >= 0)", health_interval);
        return cli_fail("train", &e);
    }
    struct health_thresholds hthr;
    health_thresholds_default(&hthr);
    if (health_thr && health_thresholds_load(&hthr, health_thr, &e)) return cli_fail("train", &e);
    if (inject && inject_parse(inject, &e)) return cli_fail("train", &e);
    long skip_list[64];
    int n_skip = 0;
    if (skip_batches) {
        char sb[1024], *items[64];
        int ni = args_split_list(skip_batches, sb, sizeof sb, items, 64);
        if (ni < 0) {
            err_set(&e, PLUMB_EUSAGE, "--skip-batches: more than 64 steps in '%s'", skip_batches);
            return cli_fail("train", &e);
        }
        for (int i = 0; i < ni; i++) {
            char *end;
            long v = strtol(items[i], &end, 10);
            if (!*items[i] || *end || v < 0) {
                err_set(&e, PLUMB_EUSAGE, "--skip-batches: '%s' is not a step number >= 0", items[i]);
                return cli_fail("train", &e);
            }
            skip_list[n_skip++] = v;
        }
    }
    preset_defaults(preset, &batch, &lr, &steps, &warmup, &opt);
    if (quiet) log_set_level(LOG_WARN);

    cfg.preset = preset;
    cfg.rows = rows;
    cfg.data = data;
    cfg.eval_data = eval_data;
    cfg.eval_fraction = eval_frac;
    cfg.train_samples = train_samples;
    cfg.eval_samples = eval_samples;
    cfg.data_seed = (uint64_t)data_seed;
    cfg.bad_lines_skip = !strcmp(bad, "skip");
    cfg.max_rows = max_rows;
    cfg.steps = steps;
    cfg.batch = batch;
    cfg.seed = (uint64_t)seed;
    cfg.lr = lr;
    cfg.warmup = warmup;
    cfg.optimizer = opt;
    cfg.weight_decay = wd;
    cfg.eval_every = eval_every;
    cfg.eval_batch = eval_batch;
    cfg.ckpt_dir = ckdir;
    cfg.ckpt_every = ck_every;
    cfg.ckpt_keep = (int)ck_keep;
    cfg.resume = resume;
    cfg.numerics = !strcmp(numerics, "golden") ? NUMERICS_GOLDEN : NUMERICS_FAST;
    cfg.precision = parse_precision(precision);
    cfg.micro_shard = (int)micro;
    cfg.loss_scale = loss_scale;
    cfg.ls_init = ls_init;
    cfg.ls_growth = ls_growth;
    cfg.ls_backoff = ls_backoff;
    cfg.ls_interval = ls_interval;
    cfg.clip_grad_norm = clip;
    cfg.device = device;
    cfg.comm = comm;
    cfg.threads = (int)threads;
    cfg.predictions = pred;
    cfg.prefetch = (int)prefetch;
    cfg.progress = 1;
    cfg.watchdog_s = watchdog;
    cfg.skip_batches = skip_list;
    cfg.n_skip_batches = n_skip;
    cfg.max_bad_steps = max_bad;
    cfg.quiet = quiet;

    struct comm *c;
    /* the host comm (control, golden sums, the host gradient path); nccl rides on it */
    if (comm_init(!strcmp(comm, "self") || !strcmp(comm, "mpi") ? comm : "auto", &c, &e)) return cli_fail("train", &e);

    /* binding first, so every thread started from here on inherits it and
     * the buffers the trainer allocates land on the node */
    struct bind_result bnd;
    if (bind_apply(bind, device, c->local_rank, c->local_world, &bnd, &e)) {
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

    /* rank 0 creates the run folder; everyone learns its path */
    struct results res;
    memset(&res, 0, sizeof res);
    char dir[PATH_MAX] = "";
    int32_t st = 0;
    if (c->rank == 0) {
        char cmdline[2048];
        cmdline_join(argc, argv, cmdline, sizeof cmdline);
        if (results_open(&res, out, cmdline, &e)) st = e.code;
        else snprintf(dir, sizeof dir, "%s", res.dir);
        if (!st && bnd_all) json_object_set(res.root, "binding", bnd_all);
    }
    plumb_err be = {0};
    if (comm_broadcast(c, &st, sizeof st, 0, "run folder", &be) || comm_broadcast(c, dir, sizeof dir, 0, "run folder", &be)) {
        if (!e.code) e = be;
        st = e.code ? e.code : PLUMB_EINTERNAL;
    }
    json_decref(bnd_all);
    if (st) {
        if (c->rank != 0 && !e.code) err_set(&e, st, "rank 0 could not create the run folder");
        comm_finalize(c);
        return cli_fail("train", &e);
    }
    cfg.out_dir = dir;

    /* health: one sampler per host (local rank 0) */
    struct health_monitor *hm = NULL;
    if (health_interval > 0 && c->local_rank == 0) {
        struct health_monitor_opts ho = {.interval_s = health_interval, .thresholds = &hthr};
        plumb_err he = {0};
        if (health_monitor_start(&hm, &ho, &he)) log_warn("health monitor not started: %s", he.msg);
    }
    cfg.health = hm;
    cfg.stop_on_overheat = !strcmp(on_overheat, "stop");

    struct train_result tr;
    rc = trainer_run(&cfg, c, &tr, &e);
    if (rc) {
        health_monitor_stop(hm);
        int code = cli_fail("train", &e);
        if (c->rank == 0) results_close(&res);
        /* a usage error is seen by every rank alike; anything else may have
         * left other ranks inside a collective: end the whole job */
        if (c->world > 1 && rc != PLUMB_EUSAGE) comm_abort(c, code);
        comm_finalize(c);
        return code;
    }
    int exit_code = 0;
    if (c->rank == 0) {
        struct check_result r;
        check_begin(&r, "train-ctr", device);
        check_metric(&r, "auc", tr.eval.auc, "");
        check_metric(&r, "logloss", tr.eval.logloss, "");
        check_metric(&r, "accuracy", tr.eval.accuracy, "");
        if (isfinite(tr.teacher_auc)) check_metric(&r, "teacher_auc", tr.teacher_auc, "");
        check_metric(&r, "samples_per_s", tr.samples_per_s, "samples/s");
        check_metric(&r, "steps", (double)tr.steps_done, "");
        check_metric(&r, "skipped_steps", (double)tr.skipped_steps, "");
        check_metric(&r, "ranks", (double)c->world, "");
        check_artifact(&r, "metrics.jsonl");
        check_detail(&r, "model", json_string(tr.model_desc));
        check_detail(&r, "data", json_string(tr.data_desc));
        check_detail(&r, "param_digest", json_string(tr.param_digest));
        if (tr.interrupted) check_set_status(&r, CHECK_SKIP, "interrupted at step %ld (checkpoint written)", tr.steps_done);
        results_add_check(&res, &r);
        check_free(&r);
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
        if (tr.has_eval) {
            json_object_set_new(root, "auc", json_real(tr.eval.auc));
            json_object_set_new(root, "logloss", json_real(tr.eval.logloss));
            json_object_set_new(root, "accuracy", json_real(tr.eval.accuracy));
        }
        if (isfinite(tr.teacher_auc)) json_object_set_new(root, "teacher_auc", json_real(tr.teacher_auc));
        json_object_set_new(root, "train",
                            json_pack("{s:s, s:I, s:I, s:I, s:i, s:s, s:s, s:f, s:f, s:f, s:b, s:I, s:I}", "workload", "ctr", "steps",
                                      (json_int_t)tr.steps_done, "start_step", (json_int_t)tr.start_step,
                                      "skipped_steps", (json_int_t)tr.skipped_steps, "ranks", c->world, "numerics",
                                      numerics, "precision", precision, "samples_per_s", tr.samples_per_s, "data_wait_frac",
                                      tr.data_wait_frac, "wall_s",
                                      tr.wall_s, "interrupted", tr.interrupted, "bad_lines_skipped",
                                      (json_int_t)tr.bad_lines_skipped, "truncated_lines", (json_int_t)tr.truncated_lines));
        if (results_write(&res, &e)) {
            exit_code = cli_fail("train", &e);
        }
        results_close(&res);
        if (tr.interrupted) {
            if (tr.overheat) printf("stopped: critical GPU temperature (--on-overheat stop)\n");
            printf("interrupted at step %ld; checkpoint %s\n", tr.steps_done, tr.ckpt_path[0] ? tr.ckpt_path : "(none)");
        } else {
            printf("trained ctr %s: %ld steps, %.0f samples/s, loss %.4f -> %.4f\n", preset, tr.steps_done,
                   tr.samples_per_s, tr.first_loss, tr.last_loss);
            printf("eval: auc %.6f  logloss %.6f  accuracy %.6f  (%ld samples", tr.eval.auc, tr.eval.logloss,
                   tr.eval.accuracy, tr.eval.count);
            if (isfinite(tr.teacher_auc)) printf(", teacher auc %.6f", tr.teacher_auc);
            printf(")\n");
        }
        if (digest) printf("param_digest %s\n", tr.param_digest);
        printf("run folder: %s\n", dir);
        fflush(stdout);
    }
    health_monitor_stop(hm);
    comm_finalize(c);
    return exit_code;
}
