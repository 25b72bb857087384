#include "accept/seed_runs.h"
#include "comm/comm.h"
#include "core/file.h"
#include "core/jsonx.h"
#include "models/workloads.h"
#include "report/seeds.h"
#include "train/options.h"
#include "train/trainer.h"
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ctr-tiny as accept/check_train_ctr.c trains it */
#define SR_LR 0.004
#define SR_STEPS 1500
#define SR_EVAL 50000
/* the loss curve kept per seed: block means, at most this many points */
#define SR_CURVE_POINTS 300

void seed_run_cfg_defaults(struct seed_run_cfg *c, const char *device, int threads)
{
    memset(c, 0, sizeof *c);
    c->device = device;
    c->threads = threads;
    c->numerics = NUMERICS_FAST;
    c->precision = DT_F32;
    c->loss_scale = "auto";
    c->lr_scale = 1.0;
}

void seed_run_describe(const struct seed_run_cfg *c, char *buf, size_t n)
{
    snprintf(buf, n, "%s %s%s%s%s, lr %.4g, %ld steps", c->numerics == NUMERICS_GOLDEN ? "golden" : "fast",
             dtype_name(c->precision), c->precision == DT_F16 && strcmp(c->loss_scale, "off") ? " (dynamic loss scaling)" : "",
             c->numerics == NUMERICS_FAST && c->precision == DT_F32 ? (c->allow_tf32 ? ", TF32 allowed" : ", strict fp32")
                                                                     : "",
             c->gemm_reduction && strncmp(c->device, "cpu", 3)
                 ? (!strcmp(c->gemm_reduction, "none") ? ", no split-K" : ", split-K allowed")
                 : "",
             SR_LR * c->lr_scale, c->steps > 0 ? c->steps : SR_STEPS);
}

int plant_parse(const char *spec, struct plant *p, plumb_err *e)
{
    memset(p, 0, sizeof *p);
    p->lr_scale = 1.0;
    if (!spec || !*spec) return PLUMB_OK;
    snprintf(p->text, sizeof p->text, "%s", spec);
    char buf[128];
    snprintf(buf, sizeof buf, "%s", spec);
    char *at = strrchr(buf, '@');
    if (at) {
        char *end;
        long k = strtol(at + 1, &end, 10);
        if (end == at + 1 || *end || k < 1 || k > 16)
            return err_set(e, PLUMB_EUSAGE, "--plant %s: '@%s' is not a rung number 1..16", spec, at + 1);
        p->from_rung = (int)k;
        *at = '\0';
    }
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq) return err_set(e, PLUMB_EUSAGE, "--plant %s: '%s' is not key=value (lr=X, precision=P)", spec, tok);
        *eq = '\0';
        const char *v = eq + 1;
        if (!strcmp(tok, "lr")) {
            char *end;
            double x = strtod(v, &end);
            if (end == v || *end || !(x > 0) || !isfinite(x))
                return err_set(e, PLUMB_EUSAGE, "--plant %s: lr=%s is not a positive factor", spec, v);
            p->lr_scale = x;
        } else if (!strcmp(tok, "precision")) {
            p->set_precision = 1;
            if (!strcmp(v, "fp32")) p->precision = DT_F32;
            else if (!strcmp(v, "bf16")) p->precision = DT_BF16;
            else if (!strcmp(v, "fp16")) p->precision = DT_F16;
            else return err_set(e, PLUMB_EUSAGE, "--plant %s: precision=%s is not fp32, bf16 or fp16", spec, v);
        } else {
            return err_set(e, PLUMB_EUSAGE, "--plant %s: unknown key '%s' (expected lr or precision)", spec, tok);
        }
    }
    p->active = 1;
    return PLUMB_OK;
}

void plant_apply(const struct plant *p, int rung, struct seed_run_cfg *c)
{
    if (!p || !p->active || rung < p->from_rung) return;
    c->lr_scale *= p->lr_scale;
    if (p->set_precision) c->precision = p->precision;
}

/* The run's config through the option table (train/options.h), as
 * accept/check_train_ctr.c builds its own: ctr-tiny at the preset's
 * defaults, with the rung's numerics/precision/loss scaling/TF32 and the
 * planted learning-rate factor on top. */
static int train_cfg(const struct seed_run_cfg *c, uint64_t seed, const char *scratch, struct train_config *t,
                     plumb_err *e)
{
    const struct workload *wl = workload_find("ctr");
    if (!wl) return err_set(e, PLUMB_EINTERNAL, "the ctr workload is not in the workload table");
    train_config_defaults(t, wl);
    char th[32], steps[32], ev[32], sd[32], lr[64];
    snprintf(th, sizeof th, "%d", c->threads);
    snprintf(steps, sizeof steps, "%ld", c->steps > 0 ? c->steps : SR_STEPS);
    snprintf(ev, sizeof ev, "%ld", c->eval_samples > 0 ? c->eval_samples : SR_EVAL);
    snprintf(sd, sizeof sd, "%llu", (unsigned long long)seed);
    snprintf(lr, sizeof lr, "%.17g", SR_LR * c->lr_scale);
    const char *kv[][2] = {{"--preset", "ctr-tiny"},
                           {"--device", c->device},
                           {"--threads", th},
                           {"--optimizer", "adamw"},
                           {"--lr", lr},
                           {"--warmup", "50"},
                           {"--batch", "256"},
                           {"--steps", steps},
                           {"--eval-samples", ev},
                           {"--seed", sd},
                           {"--numerics", c->numerics == NUMERICS_GOLDEN ? "golden" : "fast"},
                           {"--precision", dtype_name(c->precision)},
                           {"--loss-scale", c->loss_scale}};
    int rc = PLUMB_OK;
    for (size_t i = 0; i < sizeof kv / sizeof kv[0] && !rc; i++) rc = train_option_set(t, kv[i][0], kv[i][1], e);
    if (!rc && c->allow_tf32) rc = train_option_set(t, "--allow-tf32", NULL, e);
    if (!rc) rc = train_option_set(t, "--quiet", NULL, e);
    if (!rc) rc = train_config_finish(t, e);
    if (rc) return err_wrap(e, "seed run config");
    t->out_dir = scratch;
    t->progress = 0;
    return PLUMB_OK;
}

/* The per-step training loss of a run, from its metrics.jsonl ("type":"step"
 * lines), as block means. */
static json_t *read_curve(const char *path, plumb_err *e)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        err_set(e, PLUMB_EIO, "%s: %s (the trainer wrote no metrics)", path, strerror(errno));
        return NULL;
    }
    long *st = NULL;
    double *lo = NULL;
    size_t n = 0, cap = 0;
    char *line = NULL;
    size_t lcap = 0;
    while (getline(&line, &lcap, f) > 0) {
        if (!strstr(line, "\"step\"")) continue;
        json_error_t je;
        json_t *o = json_loads(line, 0, &je);
        const char *type = jsonx_str(o, "type");
        if (type && !strcmp(type, "step") && !json_is_true(json_object_get(o, "skipped"))) {
            if (n == cap) {
                cap = cap ? cap * 2 : 2048;
                long *ns = realloc(st, cap * sizeof *ns);
                double *nl = realloc(lo, cap * sizeof *nl);
                if (ns) st = ns;
                if (nl) lo = nl;
                if (!ns || !nl) {
                    json_decref(o);
                    break;
                }
            }
            st[n] = (long)jsonx_num(o, "step");
            lo[n] = jsonx_num(o, "loss");
            n++;
        }
        json_decref(o);
    }
    free(line);
    fclose(f);
    json_t *c = seeds_curve_blocks(st, lo, n, SR_CURVE_POINTS);
    free(st);
    free(lo);
    return c;
}

/* Sets PLUMB_GEMM_REDUCTION for one run and puts the old value back after. */
struct env_save {
    char old[64];
    int had, set;
};
static void env_push(struct env_save *s, const char *v)
{
    memset(s, 0, sizeof *s);
    if (!v) return;
    const char *o = getenv("PLUMB_GEMM_REDUCTION");
    s->had = o != NULL;
    if (o) snprintf(s->old, sizeof s->old, "%s", o);
    setenv("PLUMB_GEMM_REDUCTION", v, 1);
    s->set = 1;
}
static void env_pop(const struct env_save *s)
{
    if (!s->set) return;
    if (s->had) setenv("PLUMB_GEMM_REDUCTION", s->old, 1);
    else unsetenv("PLUMB_GEMM_REDUCTION");
}

static json_t *jnum(double x) { return isfinite(x) ? json_real(x) : json_null(); }

static int run_one(const struct seed_run_cfg *c, uint64_t seed, const char *scratch, struct comm *comm, json_t **rec,
                   plumb_err *e)
{
    *rec = NULL;
    if (file_mkdirs(scratch, e)) return e->code;
    char mpath[PATH_MAX];
    snprintf(mpath, sizeof mpath, "%s/metrics.jsonl", scratch);
    unlink(mpath);
    struct train_config t;
    int rc = train_cfg(c, seed, scratch, &t, e);
    if (rc) return rc;
    struct train_result tr;
    struct env_save es;
    env_push(&es, c->gemm_reduction);
    rc = trainer_run(&t, comm, &tr, e);
    env_pop(&es);
    if (rc) return err_wrap(e, "training seed %llu on %s", (unsigned long long)seed, c->device);
    if (!tr.has_eval) return err_set(e, PLUMB_EFAIL, "seed %llu on %s: the run ended without an evaluation",
                                     (unsigned long long)seed, c->device);
    json_t *curve = read_curve(mpath, e);
    unlink(mpath);
    rmdir(scratch);
    if (!curve) return e->code;
    char desc[160];
    seed_run_describe(c, desc, sizeof desc);
    json_t *info = json_pack("{s:s, s:o, s:o, s:I, s:I, s:o, s:s, s:s, s:s, s:o}", "param_digest", tr.param_digest,
                             "samples_per_s", jnum(tr.samples_per_s), "train_wall_s", jnum(tr.wall_s), "steps",
                             (json_int_t)tr.steps_done, "skipped_steps", (json_int_t)tr.skipped_steps, "final_scale",
                             jnum(tr.final_scale), "device", c->device, "setting", desc, "model", tr.model_desc,
                             "teacher_auc", jnum(eval_metric(&tr.reference, "teacher_auc")));
    double auc = eval_metric(&tr.eval, "auc"), logloss = eval_metric(&tr.eval, "logloss");
    *rec = json_pack("{s:I, s:o, s:o, s:o, s:o, s:o}", "seed", (json_int_t)seed, "auc", jnum(auc), "logloss",
                     jnum(logloss), "accuracy", jnum(eval_metric(&tr.eval, "accuracy")), "curve", curve, "info", info);
    if (!isfinite(auc) || !isfinite(logloss)) {
        json_decref(*rec);
        *rec = NULL;
        return err_set(e, PLUMB_EFAIL, "seed %llu on %s: eval metrics are not finite (auc %g, logloss %g): the run "
                       "diverged", (unsigned long long)seed, c->device, auc, logloss);
    }
    return PLUMB_OK;
}

int seed_runs(const struct seed_run_cfg *c, uint64_t seed0, int k, const char *out_path, const char *scratch, FILE *log,
              json_t **recs, plumb_err *e)
{
    if (recs) *recs = json_array();
    if (k < 2) return err_set(e, PLUMB_EUSAGE, "--seeds %d: a seed spread needs at least 2 runs", k);
    FILE *f = fopen(out_path, "w");
    if (!f) return err_set(e, PLUMB_EIO, "%s: %s", out_path, strerror(errno));
    struct comm *comm;
    int rc = comm_init("self", &comm, e);
    if (rc) {
        fclose(f);
        return rc;
    }
    for (int i = 0; i < k && !rc; i++) {
        json_t *rec;
        uint64_t seed = seed0 + (uint64_t)i;
        if ((rc = run_one(c, seed, scratch, comm, &rec, e))) break;
        rc = jsonx_append_line(f, rec, e);
        if (!rc && fflush(f)) rc = err_set(e, PLUMB_EIO, "%s: %s", out_path, strerror(errno));
        if (log)
            fprintf(log, "  seed %llu (%d/%d) on %s: auc %.6f logloss %.6f in %.1f s\n", (unsigned long long)seed, i + 1,
                    k, c->device, jsonx_num(rec, "auc"), jsonx_num(rec, "logloss"),
                    jsonx_num(json_object_get(rec, "info"), "train_wall_s"));
        if (recs) json_array_append(*recs, rec);
        json_decref(rec);
    }
    comm_finalize(comm);
    if (fclose(f) && !rc) rc = err_set(e, PLUMB_EIO, "%s: %s", out_path, strerror(errno));
    return rc;
}
