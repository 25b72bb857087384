/* The option table of plumb train: see options.h. */
#include "train/options.h"
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define F(x) ((long)offsetof(struct train_config, x))

const struct train_option train_options[] = {
    {"--preset", TOPT_STR, F(preset), NULL, "model preset (the workload's)", NULL, "NAME"},
    {"--data", TOPT_STR, F(data), "synthetic", "'synthetic' (the workload's generator) or a data file", NULL, "SRC"},
    {"--eval-data", TOPT_STR, F(eval_data), NULL, "eval file (default: the last --eval-fraction of --data)", NULL, "FILE"},
    {"--eval-fraction", TOPT_NUM, F(eval_fraction), "0.1", "share of a data file's last samples held out for eval", "(0..1)", "X"},
    {"--train-samples", TOPT_INT, F(train_samples), "1000000", "synthetic: samples per epoch", "1..4000000000", "N"},
    {"--eval-samples", TOPT_INT, F(eval_samples), "50000", "synthetic: eval split size", "1..100000000", "N"},
    {"--data-seed", TOPT_U64, F(data_seed), "1234", "synthetic data seed (the dataset; --seed is the model's)", "0..", "N"},
    {"--bad-lines", TOPT_CHOICE, F(bad_lines), "error", "a malformed data line is an error, or is counted and skipped", "error|skip", NULL},
    {"--max-rows", TOPT_INT, F(max_rows), "0", "read at most N lines of --data (0 = all)", "0..", "N"},
    {"--steps", TOPT_INT, F(steps), "1000", "optimizer steps (global batches) in all", "0..", "N"},
    {"--batch", TOPT_INT, F(batch), "256", "global batch, split over the ranks", "1..100000000", "N"},
    {"--seed", TOPT_U64, F(seed), "1", "model initialisation and shuffling seed", "0..", "N"},
    {"--lr", TOPT_NUM, F(lr), "0.1", "learning rate after warmup", "(0..", "X"},
    {"--warmup", TOPT_INT, F(warmup), "0", "linear warmup steps", "0..", "N"},
    {"--schedule", TOPT_CHOICE, F(schedule), "constant",
     "learning rate after warmup: constant, cosine (to --lr-min at --steps) or step (x --lr-step-gamma every --lr-step-every)",
     "constant|cosine|step", NULL},
    {"--lr-min", TOPT_NUM, F(lr_min), "0", "cosine schedule: the final learning rate", "0..", "X"},
    {"--lr-step-every", TOPT_INT, F(lr_step_every), "0", "step schedule: steps between decays (after warmup)", "0..", "N"},
    {"--lr-step-gamma", TOPT_NUM, F(lr_step_gamma), "0.1", "step schedule: factor per decay", "(0..1", "X"},
    {"--optimizer", TOPT_CHOICE, F(optimizer), "sgd", "sgd (sparse rows for tables) or adamw (lazy rows)", "sgd|adamw", NULL},
    {"--weight-decay", TOPT_NUM, F(weight_decay), "0", "weight decay on the tensors the model marks for it", "0..", "X"},
    {"--momentum", TOPT_NUM, F(momentum), "0", "SGD momentum (dense tensors)", "0..1)", "X"},
    {"--adam-beta1", TOPT_NUM, F(beta1), "0.9", "AdamW beta1", "0..1)", "X"},
    {"--adam-beta2", TOPT_NUM, F(beta2), "0.999", "AdamW beta2", "0..1)", "X"},
    {"--adam-eps", TOPT_NUM, F(adam_eps), "1e-8", "AdamW epsilon", "(0..", "X"},
    {"--eval-every", TOPT_INT, F(eval_every), "0", "evaluate every N steps (0 = only at the end)", "0..", "N"},
    {"--stop-at", TOPT_STR, F(stop_at), NULL,
     "stop at the first eval where the workload's deciding metric reaches X (higher-is-better metrics: >= X, lower: <= X; with --eval-every)", NULL, "X"},
    {"--eval-batch", TOPT_INT, F(eval_batch), "4096", "eval chunk size (fixed, so any rank count scores alike)", "1..1000000", "N"},
    {"--checkpoint-dir", TOPT_STR, F(ckpt_dir), NULL, "write checkpoints here (and read them with --resume)", NULL, "DIR"},
    {"--checkpoint-every", TOPT_INT, F(ckpt_every), "0", "checkpoint every N steps (0 = at the end and on SIGTERM/SIGINT)", "0..", "N"},
    {"--checkpoint-keep", TOPT_INT, F(ckpt_keep), "3", "newest checkpoints kept", "1..1000", "K"},
    {"--resume", TOPT_OPTCHOICE, F(resume_mode), "require",
     "continue from the newest valid checkpoint in --checkpoint-dir: alone (require) one must exist; auto starts at "
     "step 0 when the directory holds none; checkpoints that all fail to verify are an error either way",
     "require|auto", NULL},
    {"--allow-cpu-fallback", TOPT_FLAG, F(allow_cpu_fallback), NULL,
     "train on the cpu when the --device GPU is unavailable (without it: exit 2)", NULL, NULL},
    {"--numerics", TOPT_CHOICE, F(numerics_name), "fast", "fast, or golden (bit-identical on any device and rank count)", "fast|golden", NULL},
    {"--precision", TOPT_CHOICE, F(precision_name), "fp32", "compute precision (fp32 master weights)", "fp32|bf16|fp16", NULL},
    {"--micro-shard", TOPT_INT, F(micro_shard), "64", "samples per micro-shard (golden reduction unit; rank split unit)", "1..1000000", "N"},
    {"--loss-scale", TOPT_CHOICE, F(loss_scale), "auto", "dynamic loss scaling (auto = on for fp16)", "auto|dynamic|off", NULL},
    {"--loss-scale-init", TOPT_NUM, F(ls_init), "65536", "initial loss scale", "(0..", "X"},
    {"--loss-scale-growth", TOPT_NUM, F(ls_growth), "2", "scale factor after an interval of clean steps", "1..", "X"},
    {"--loss-scale-backoff", TOPT_NUM, F(ls_backoff), "0.5", "scale factor after a non-finite step", "(0..1)", "X"},
    {"--loss-scale-interval", TOPT_INT, F(ls_interval), "2000", "clean steps before growing the scale", "1..", "N"},
    {"--clip-grad-norm", TOPT_NUM, F(clip_grad_norm), "0", "clip the global gradient norm to X (0 = off)", "0..", "X"},
    {"--allow-tf32", TOPT_FLAG, F(allow_tf32), NULL, "fast fp32 GEMMs may use TF32 where the device has it (without it: strict fp32)", NULL, NULL},
    {"--device", TOPT_STR, F(device), "cpu", "cpu, cuda, hip, cuda:N, hip:N (cuda/hip: one GPU per local rank)", NULL, "D"},
    {"--bind", TOPT_CHOICE, F(bind), "none",
     "pin each rank's threads and memory: numa = the NUMA node of its GPU (cpu ranks: local rank mod nodes); none = "
     "the launcher's binding", "none|numa", NULL},
    {"--comm", TOPT_CHOICE, F(comm), "auto",
     "gradient comm: auto (nccl/rccl for a GPU with fast numerics on >1 rank, else the host comm), mpi, self (1 rank "
     "per process), nccl (also on 1 rank)", "auto|mpi|self|nccl", NULL},
    {"--graph", TOPT_CHOICE, F(graph), "on",
     "CUDA/HIP graph of the queued step, captured once per batch buffer and shape and replayed (off: launched op by "
     "op; the cpu has none)", "on|off", NULL},
    {"--fuse-sparse-sgd", TOPT_CHOICE, F(fuse_sparse_sgd), "auto",
     "auto: the sparse rows' SGD inside the embedding backward where nothing must change their gradient first (fast "
     "numerics, 1 rank, plain SGD, no dynamic loss scale or clipping); same bits as no: a non-finite step is put back "
     "and the metrics norm still sees the rows",
     "no|auto", NULL},
    {"--threads", TOPT_INT, F(threads), "0", "cpu threads per rank (0 = cores / ranks on this host)", "0..4096", "N"},
    {"--out", TOPT_STR, F(out), NULL, "run folder (metrics.jsonl, results.json); default runs/<UTC>-<host>-<id>", NULL, "DIR"},
    {"--predictions", TOPT_STR, F(predictions), NULL, "write the final eval's per-sample predictions to FILE", NULL, "FILE"},
    {"--param-digest", TOPT_FLAG, F(param_digest), NULL, "print the SHA-256 of the final fp32 parameters", NULL, NULL},
    {"--prefetch", TOPT_INT, F(prefetch), "4", "batches the loader thread prepares ahead", "1..64", "N"},
    {"--inject", TOPT_STR, F(inject), NULL, "fault injection spec for drills (oom@S, nan@S, hang@S:R, exit@S:R, corrupt-checkpoint)", NULL, "SPEC"},
    {"--watchdog-timeout", TOPT_NUM, F(watchdog_s), "600", "seconds a step or collective may block before the job fails (0 = off)", "0..", "S"},
    {"--step-timeout", TOPT_NUM, F(watchdog_s), NULL, "the same as --watchdog-timeout", "0..", "S"},
    {"--skip-batches", TOPT_STR, F(skip_batches_list), NULL, "comma list of steps whose batch is skipped deliberately (no update; data and step advance)", NULL, "LIST"},
    {"--max-bad-steps", TOPT_INT, F(max_bad_steps), "3", "non-finite steps in a row before rolling back to the last checkpoint", "1..1000000", "N"},
    {"--log-every", TOPT_INT, F(log_every), "1",
     "a step line in metrics.jsonl (loss, gradient norm, timings) every N steps, and for the first, the last, every "
     "eval step and every skipped one; the gradient norm is computed only for those steps (unless --clip-grad-norm "
     "needs it every step)", "1..", "N"},
    {"--health-interval", TOPT_NUM, F(health_interval), "10", "sample GPU and host health every S seconds into metrics.jsonl, with alerts (0 = off)", "0..", "S"},
    {"--on-overheat", TOPT_CHOICE, F(on_overheat), "stop", "on a critical temperature alert: checkpoint and stop cleanly, or only warn", "stop|warn", NULL},
    {"--health-thresholds", TOPT_STR, F(health_thresholds), NULL, "health thresholds file (key = value, docs/health.md); default 85 C, 90 C critical, 450 W, 10 ECC/h", NULL, "FILE"},
    {"--quiet", TOPT_FLAG, F(quiet), NULL, "no log lines, only the summary", NULL, NULL},
    {0},
};

static int n_generic(void)
{
    int n = 0;
    while (train_options[n].name) n++;
    return n;
}

int train_option_count(const struct workload *wl)
{
    int n = n_generic();
    for (const struct train_option *o = wl && wl->options ? wl->options : NULL; o && o->name; o++) n++;
    return n;
}

const struct train_option *train_option_at(const struct workload *wl, int i)
{
    int g = n_generic();
    if (i < 0) return NULL;
    if (i < g) return &train_options[i];
    return wl && wl->options ? &wl->options[i - g] : NULL;
}

const struct train_option *train_option_find(const struct workload *wl, const char *name, int *index)
{
    int n = train_option_count(wl);
    for (int i = 0; i < n; i++) {
        const struct train_option *o = train_option_at(wl, i);
        if (!strcmp(o->name, name)) {
            if (index) *index = i;
            return o;
        }
    }
    return NULL;
}

static int choice_ok(const char *choices, const char *v)
{
    size_t n = strlen(v);
    for (const char *p = choices; p && *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && !strncmp(p, v, n)) return 1;
        if (!bar) break;
        p = bar + 1;
    }
    return 0;
}

/* Range "lo..hi" with optional ends; '(' / ')' exclusive. 1 when x fits. */
static int in_range(const char *r, double x)
{
    if (!r || !*r) return 1;
    const char *dots = strstr(r, "..");
    if (!dots) return 1;
    int lo_ex = r[0] == '(';
    const char *lo_s = r + lo_ex;
    if (lo_s < dots) {
        double lo = strtod(lo_s, NULL);
        if (lo_ex ? !(x > lo) : !(x >= lo)) return 0;
    }
    const char *hi_s = dots + 2;
    size_t hl = strlen(hi_s);
    int hi_ex = hl > 0 && hi_s[hl - 1] == ')';
    if (hl > (size_t)hi_ex) {
        double hi = strtod(hi_s, NULL);
        if (hi_ex ? !(x < hi) : !(x <= hi)) return 0;
    }
    return 1;
}

static void range_text(const char *r, char *buf, size_t n)
{
    /* "(0..1)" -> "0 < X < 1", "0.." -> ">= 0", "1..10" -> "1..10" */
    const char *dots = r ? strstr(r, "..") : NULL;
    if (!dots) {
        snprintf(buf, n, "%s", r ? r : "");
        return;
    }
    int lo_ex = r[0] == '(';
    char lo[32] = "", hi[32] = "";
    snprintf(lo, sizeof lo, "%.*s", (int)(dots - r - lo_ex), r + lo_ex);
    const char *h = dots + 2;
    size_t hl = strlen(h);
    int hi_ex = hl > 0 && h[hl - 1] == ')';
    snprintf(hi, sizeof hi, "%.*s", (int)(hl - (size_t)hi_ex), h);
    if (*lo && *hi && !lo_ex && !hi_ex) snprintf(buf, n, "%s..%s", lo, hi);
    else if (*lo && *hi) snprintf(buf, n, "%s %s X %s %s", lo, lo_ex ? "<" : "<=", hi_ex ? "<" : "<=", hi);
    else if (*lo) snprintf(buf, n, "%s %s", lo_ex ? ">" : ">=", lo);
    else snprintf(buf, n, "%s %s", hi_ex ? "<" : "<=", hi);
}

/* Parses v for o into the config (no "given" bookkeeping). */
static int store(struct train_config *c, const struct train_option *o, const char *v, plumb_err *e)
{
    char rt[64];
    if (o->field < 0) { /* a workload option: validated text */
        long slot = -1 - o->field;
        if (slot >= TRAIN_WL_OPTS) return err_set(e, PLUMB_EINTERNAL, "%s: workload option slot %ld", o->name, slot);
        if (o->kind == TOPT_INT || o->kind == TOPT_U64 || o->kind == TOPT_NUM) {
            char *end;
            errno = 0;
            double x = o->kind == TOPT_NUM ? strtod(v, &end) : (double)strtoll(v, &end, 10);
            if (errno || end == v || *end || !isfinite(x))
                return err_set(e, PLUMB_EUSAGE, "%s: '%s' is not %s", o->name, v,
                               o->kind == TOPT_NUM ? "a finite number" : "an integer");
            if (!in_range(o->range, x)) {
                range_text(o->range, rt, sizeof rt);
                return err_set(e, PLUMB_EUSAGE, "%s: %s is out of range (expected %s)", o->name, v, rt);
            }
        } else if (o->kind == TOPT_CHOICE && !choice_ok(o->range, v)) {
            return err_set(e, PLUMB_EUSAGE, "%s: '%s' is not one of %s", o->name, v, o->range);
        }
        c->wl_opt[slot] = o->kind == TOPT_FLAG ? "1" : v;
        return PLUMB_OK;
    }
    char *dst = (char *)c + o->field;
    char *end;
    switch (o->kind) {
    case TOPT_STR:
        *(const char **)dst = v;
        return PLUMB_OK;
    case TOPT_CHOICE:
        if (!choice_ok(o->range, v)) return err_set(e, PLUMB_EUSAGE, "%s: '%s' is not one of %s", o->name, v, o->range);
        *(const char **)dst = v;
        return PLUMB_OK;
    case TOPT_FLAG:
        *(int *)dst = 1;
        return PLUMB_OK;
    case TOPT_OPTCHOICE:
        if (v && *v && !choice_ok(o->range, v))
            return err_set(e, PLUMB_EUSAGE, "%s: '%s' is not one of %s (or no value)", o->name, v, o->range);
        *(const char **)dst = v && *v ? v : o->def;
        return PLUMB_OK;
    case TOPT_U64:
        if (strchr(v, '-') == NULL) {
            /* the whole unsigned 64-bit range (a seed of 2^64 - 1 was "not an integer" through strtoll) */
            errno = 0;
            const unsigned long long u = strtoull(v, &end, 10);
            if (errno || end == v || *end) return err_set(e, PLUMB_EUSAGE, "%s: '%s' is not an integer", o->name, v);
            if (!in_range(o->range, (double)u)) {
                range_text(o->range, rt, sizeof rt);
                return err_set(e, PLUMB_EUSAGE, "%s: %llu is out of range (expected %s)", o->name, u, rt);
            }
            *(uint64_t *)dst = (uint64_t)u;
            return PLUMB_OK;
        }
        /* a negative number: refused below, naming it */
        __attribute__((fallthrough));
    case TOPT_INT: {
        errno = 0;
        long long x = strtoll(v, &end, 10);
        if (errno || end == v || *end) return err_set(e, PLUMB_EUSAGE, "%s: '%s' is not an integer", o->name, v);
        if (!in_range(o->range, (double)x)) {
            range_text(o->range, rt, sizeof rt);
            return err_set(e, PLUMB_EUSAGE, "%s: %lld is out of range (expected %s)", o->name, x, rt);
        }
        if (o->kind == TOPT_U64) {
            if (x < 0) return err_set(e, PLUMB_EUSAGE, "%s: %lld is negative", o->name, x);
            *(uint64_t *)dst = (uint64_t)x;
        } else {
            *(long *)dst = (long)x;
        }
        return PLUMB_OK;
    }
    case TOPT_NUM: {
        errno = 0;
        double x = strtod(v, &end);
        if (errno || end == v || *end || !isfinite(x))
            return err_set(e, PLUMB_EUSAGE, "%s: '%s' is not a finite number", o->name, v);
        if (!in_range(o->range, x)) {
            range_text(o->range, rt, sizeof rt);
            return err_set(e, PLUMB_EUSAGE, "%s: %s is out of range (expected %s)", o->name, v, rt);
        }
        *(double *)dst = x;
        return PLUMB_OK;
    }
    }
    return err_set(e, PLUMB_EINTERNAL, "%s: bad option kind", o->name);
}

void train_config_defaults(struct train_config *c, const struct workload *wl)
{
    memset(c, 0, sizeof *c);
    c->wl = wl;
    c->workload = wl ? wl->name : NULL;
    int n = train_option_count(wl);
    for (int i = 0; i < n; i++) {
        const struct train_option *o = train_option_at(wl, i);
        plumb_err e = {0};
        if (o->def && o->kind != TOPT_FLAG && o->kind != TOPT_OPTCHOICE)
            (void)store(c, o, o->def, &e); /* the table's own defaults are valid */
    }
    if (wl && wl->presets && wl->presets[0].name) c->preset = wl->presets[0].name;
    c->numerics = NUMERICS_FAST;
    c->precision = DT_F32;
}

const char *train_option_unused(const struct workload *wl, const struct train_option *o)
{
    if (!wl || !o || o->field < 0) return NULL;
    for (const struct unused_option *u = wl->unused; u && u->opt; u++)
        if (!strcmp(u->opt, o->name)) return u->why;
    if (!strcmp(o->name, "--predictions") && wl->eval && !wl->eval->write_predictions)
        return "its evaluation writes no per-sample predictions";
    return NULL;
}

int train_option_set(struct train_config *c, const char *name, const char *value, plumb_err *e)
{
    int idx;
    const struct train_option *o = train_option_find(c->wl, name, &idx);
    if (!o) return err_set(e, PLUMB_EUSAGE, "unknown option '%s'", name);
    /* an option the workload does not read was ignored silently (gpt
     * --predictions FILE wrote no file, exit 0) */
    const char *why = train_option_unused(c->wl, o);
    if (why) return err_set(e, PLUMB_EUSAGE, "%s: the %s workload does not read it (%s); expected no %s", name, c->wl->name, why, name);
    if (o->kind != TOPT_FLAG && o->kind != TOPT_OPTCHOICE && !value)
        return err_set(e, PLUMB_EUSAGE, "%s needs a value", name);
    if (o->kind == TOPT_FLAG && value && strcmp(value, "1")) return err_set(e, PLUMB_EUSAGE, "%s takes no value", name);
    int rc = store(c, o, value, e);
    if (rc) return rc;
    if (idx < TRAIN_MAX_OPTS) c->given[idx] = 1;
    /* an alias marks the options bound to the same field */
    int n = train_option_count(c->wl);
    for (int i = 0; i < n && i < TRAIN_MAX_OPTS; i++)
        if (i != idx && train_option_at(c->wl, i)->field == o->field) c->given[i] = 2;
    return PLUMB_OK;
}

static const struct train_preset *find_preset(const struct workload *wl, const char *name)
{
    for (const struct train_preset *p = wl && wl->presets ? wl->presets : NULL; p && p->name; p++)
        if (name && !strcmp(p->name, name)) return p;
    return NULL;
}

const char *train_option_preset_default(const struct workload *wl, const char *preset, const char *name)
{
    const struct train_preset *p = find_preset(wl, preset);
    for (const struct preset_default *d = p ? p->defaults : NULL; d && d->opt; d++)
        if (!d->if_opt && !strcmp(d->opt, name)) return d->value;
    const struct train_option *o = train_option_find(wl, name, NULL);
    return o ? o->def : NULL;
}

/* The text value of option `name` in c, for a preset condition. */
static const char *current_text(const struct train_config *c, const char *name)
{
    const struct train_option *o = train_option_find(c->wl, name, NULL);
    if (!o) return NULL;
    if (o->field < 0) return c->wl_opt[-1 - o->field];
    if (o->kind == TOPT_STR || o->kind == TOPT_CHOICE) return *(const char *const *)((const char *)c + o->field);
    return NULL;
}

int train_config_finish(struct train_config *c, plumb_err *e)
{
    const struct workload *wl = c->wl;
    int rc;
    if (!wl) return err_set(e, PLUMB_EUSAGE, "no workload");
    const struct train_preset *p = find_preset(wl, c->preset);
    if (!p) {
        char names[256] = "";
        size_t k = 0;
        for (const struct train_preset *q = wl->presets; q && q->name; q++)
            k += (size_t)snprintf(names + k, sizeof names - (k < sizeof names ? k : sizeof names), "%s%s",
                                  k ? ", " : "", q->name);
        return err_set(e, PLUMB_EUSAGE, "--preset: '%s' is not a %s preset (expected %s)", c->preset ? c->preset : "",
                       wl->name, names);
    }
    /* two passes: unconditional defaults first (e.g. the optimizer), then
     * the ones conditional on another option's value (the optimizer's lr) */
    for (int pass = 0; pass < 2; pass++)
        for (const struct preset_default *d = p->defaults; d && d->opt; d++) {
            if ((d->if_opt != NULL) != (pass == 1)) continue;
            int idx;
            const struct train_option *o = train_option_find(wl, d->opt, &idx);
            if (!o) return err_set(e, PLUMB_EINTERNAL, "preset %s: unknown option %s", p->name, d->opt);
            if (idx < TRAIN_MAX_OPTS && c->given[idx]) continue;
            if (d->if_opt) {
                const char *v = current_text(c, d->if_opt);
                if (!v || strcmp(v, d->if_val)) continue;
            }
            if ((rc = store(c, o, d->value, e))) return err_wrap(e, "preset %s", p->name);
        }
    c->numerics = c->numerics_name && !strcmp(c->numerics_name, "golden") ? NUMERICS_GOLDEN : NUMERICS_FAST;
    const char *pr = c->precision_name ? c->precision_name : "fp32";
    c->precision = !strcmp(pr, "bf16") ? DT_BF16 : !strcmp(pr, "fp16") ? DT_F16 : DT_F32;
    c->stop_on_overheat = !c->on_overheat || !strcmp(c->on_overheat, "stop");
    c->resume = c->resume_mode != NULL;
    c->resume_auto = c->resume_mode && !strcmp(c->resume_mode, "auto");
    c->n_skip_batches = 0;
    if (c->skip_batches_list && *c->skip_batches_list) {
        const char *s = c->skip_batches_list;
        while (*s) {
            char *end;
            errno = 0;
            long v = strtol(s, &end, 10);
            if (end == s || errno || v < 0 || (*end && *end != ','))
                return err_set(e, PLUMB_EUSAGE, "--skip-batches: '%s' is not a comma list of step numbers >= 0",
                               c->skip_batches_list);
            if (c->n_skip_batches >= (int)(sizeof c->skip_batches / sizeof c->skip_batches[0]))
                return err_set(e, PLUMB_EUSAGE, "--skip-batches: more than 64 steps in '%s'", c->skip_batches_list);
            c->skip_batches[c->n_skip_batches++] = v;
            s = *end ? end + 1 : end;
            if (*end && !*s) /* '1,' was taken as '1' */
                return err_set(e, PLUMB_EUSAGE, "--skip-batches: '%s' ends with a comma (expected a step number after it)",
                               c->skip_batches_list);
        }
    }
    if (c->stop_at) {
        /* '' was taken as no --stop-at while the summary said "did not reach val_loss  in N steps" */
        char *end;
        double x = strtod(c->stop_at, &end);
        if (end == c->stop_at || *end || !isfinite(x))
            return err_set(e, PLUMB_EUSAGE, "--stop-at: '%s' (expected a number)", c->stop_at);
    }
    if (c->resume && !c->ckpt_dir) return err_set(e, PLUMB_EUSAGE, "--resume needs --checkpoint-dir");
    if (!strcmp(c->schedule, "step") && c->lr_step_every < 1)
        return err_set(e, PLUMB_EUSAGE, "--schedule step needs --lr-step-every N >= 1");
    if (!strcmp(c->schedule, "cosine") && !(c->lr_min <= c->lr))
        return err_set(e, PLUMB_EUSAGE, "--lr-min: %g is above --lr %g", c->lr_min, c->lr);
    /* options that only shape another option's behaviour, given without it, changed nothing and were
     * ignored without a word: --checkpoint-every 100 with no --checkpoint-dir wrote no checkpoint
     * (a run the user believed resumable), --lr-min with a constant schedule never decayed */
    static const struct {
        const char *opt, *needs;
    } needs[] = {
        {"--checkpoint-every", "--checkpoint-dir DIR"},
        {"--checkpoint-keep", "--checkpoint-dir DIR"},
        {"--lr-min", "--schedule cosine"},
        {"--lr-step-every", "--schedule step"},
        {"--lr-step-gamma", "--schedule step"},
    };
    for (size_t i = 0; i < sizeof needs / sizeof needs[0]; i++) {
        int idx;
        if (!train_option_find(wl, needs[i].opt, &idx) || idx >= TRAIN_MAX_OPTS || c->given[idx] != 1) continue;
        int ok = !strncmp(needs[i].needs, "--checkpoint-dir", 16) ? c->ckpt_dir != NULL
                 : !strcmp(needs[i].needs, "--schedule cosine") ? !strcmp(c->schedule, "cosine")
                                                                 : !strcmp(c->schedule, "step");
        if (!ok)
            return err_set(e, PLUMB_EUSAGE, "%s applies only with %s%s%s (expected both, or no %s)", needs[i].opt,
                           needs[i].needs, strncmp(needs[i].needs, "--schedule", 10) ? "" : "; the schedule here is ",
                           strncmp(needs[i].needs, "--schedule", 10) ? "" : c->schedule, needs[i].opt);
    }
    return PLUMB_OK;
}

void train_option_default_desc(const struct workload *wl, const struct train_option *o, char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = 0;
    if (!wl) {
        if (o->def) snprintf(buf, n, "%s", o->def);
        return;
    }
    if (!strcmp(o->name, "--preset")) {
        snprintf(buf, n, "%s", wl->presets && wl->presets[0].name ? wl->presets[0].name : "");
        return;
    }
    for (const struct train_preset *p = wl->presets; p && p->name; p++)
        for (const struct preset_default *d = p->defaults; d && d->opt; d++) {
            if (strcmp(d->opt, o->name) || k >= n) continue;
            if (d->if_opt)
                k += (size_t)snprintf(buf + k, n - k, "%s%s %s %s", k ? ", " : "", p->name, d->if_val, d->value);
            else k += (size_t)snprintf(buf + k, n - k, "%s%s %s", k ? ", " : "", p->name, d->value);
        }
    if (!k && o->def) snprintf(buf, n, "%s", o->def);
}

int train_config_argv(const struct train_config *c, char **argv, int max, char *buf, size_t n)
{
    int w = 0;
    size_t k = 0;
    int cnt = train_option_count(c->wl);
    for (int i = 0; i < cnt && i < TRAIN_MAX_OPTS; i++) {
        if (c->given[i] != 1) continue;
        const struct train_option *o = train_option_at(c->wl, i);
        const char *src = (const char *)c + (o->field >= 0 ? o->field : 0);
        char val[512] = "";
        if (o->field < 0) snprintf(val, sizeof val, "%s", c->wl_opt[-1 - o->field] ? c->wl_opt[-1 - o->field] : "");
        else if (o->kind == TOPT_INT) snprintf(val, sizeof val, "%ld", *(const long *)src);
        else if (o->kind == TOPT_U64) snprintf(val, sizeof val, "%llu", (unsigned long long)*(const uint64_t *)src);
        else if (o->kind == TOPT_NUM) snprintf(val, sizeof val, "%.17g", *(const double *)src);
        else if (o->kind == TOPT_STR || o->kind == TOPT_CHOICE || o->kind == TOPT_OPTCHOICE)
            snprintf(val, sizeof val, "%s", *(const char *const *)src ? *(const char *const *)src : "");
        /* an optional value equal to the implicit one travels as the option alone */
        int words = o->kind == TOPT_FLAG || (o->kind == TOPT_OPTCHOICE && o->def && !strcmp(val, o->def)) ? 1 : 2;
        if (w + words > max) return -1;
        const char *parts[2] = {o->name, val};
        for (int j = 0; j < words; j++) {
            size_t len = strlen(parts[j]) + 1;
            if (k + len > n) return -1;
            memcpy(buf + k, parts[j], len);
            argv[w++] = buf + k;
            k += len;
        }
    }
    return w;
}
