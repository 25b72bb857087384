#include "accept/seed_runs.h"
#include "accept/workload_accept.h"
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

const struct workload *seed_run_workload(const struct seed_run_cfg *c)
{
    return c->wl ? c->wl : workload_find(ACCEPT_DEFAULT_WORKLOAD);
}

/* The run's config through the option table (train/options.h), as
 * accept/check_train.c builds its own fast run (accept_train_config: the
 * descriptor's preset and fast options), with the seed, the rung's
 * numerics/precision/loss scaling/TF32, --seed-steps and the planted
 * learning-rate factor on top. The factor multiplies the learning rate the
 * preset resolves to (which may depend on the optimizer), so the config is
 * built once to read it and once with --lr given. scratch may be NULL. */
static int train_cfg(const struct seed_run_cfg *c, uint64_t seed, const char *scratch, struct train_config *t,
                     plumb_err *e)
{
    const struct workload *wl = seed_run_workload(c);
    if (!wl || !wl->accept)
        return err_set(e, PLUMB_EINTERNAL, "seed runs: workload %s has no accept descriptor",
                       wl ? wl->name : ACCEPT_DEFAULT_WORKLOAD);
    if (!accept_precision_ok(wl, c->precision))
        return err_set(e, PLUMB_EUSAGE, "%s trains in %s only, not %s", wl->name, wl->accept->precisions,
                       dtype_name(c->precision));
    char th[32], steps[32], ev[32], sd[32], lr[64]; /* numbers: parsed, not kept */
    snprintf(th, sizeof th, "%d", c->threads);
    snprintf(steps, sizeof steps, "%ld", c->steps);
    snprintf(ev, sizeof ev, "%ld", c->eval_samples);
    snprintf(sd, sizeof sd, "%llu", (unsigned long long)seed);
    struct accept_opt x[12];
    int n = 0;
    x[n++] = (struct accept_opt){"--device", c->device};
    x[n++] = (struct accept_opt){"--threads", th};
    x[n++] = (struct accept_opt){"--seed", sd};
    x[n++] = (struct accept_opt){"--numerics", c->numerics == NUMERICS_GOLDEN ? "golden" : "fast"};
    x[n++] = (struct accept_opt){"--precision", dtype_name(c->precision)};
    x[n++] = (struct accept_opt){"--loss-scale", c->loss_scale};
    if (c->steps > 0) x[n++] = (struct accept_opt){"--steps", steps};
    if (c->eval_samples > 0) x[n++] = (struct accept_opt){"--eval-samples", ev};
    if (c->allow_tf32) x[n++] = (struct accept_opt){"--allow-tf32", NULL};
    int rc = accept_train_config(wl, 0, x, n, t, e);
    if (!rc && c->lr_scale != 1.0) {
        snprintf(lr, sizeof lr, "%.17g", t->lr * c->lr_scale);
        x[n++] = (struct accept_opt){"--lr", lr};
        rc = accept_train_config(wl, 0, x, n, t, e);
    }
    if (rc) return err_wrap(e, "seed run config");
    t->out_dir = scratch;
    return PLUMB_OK;
}

void seed_run_describe(const struct seed_run_cfg *c, char *buf, size_t n)
{
    struct train_config t;
    plumb_err e = {0};
    if (train_cfg(c, 1, NULL, &t, &e)) {
        snprintf(buf, n, "(%s)", e.msg);
        return;
    }
    snprintf(buf, n, "%s, %s %s%s%s%s, lr %.4g, %ld steps", t.preset, c->numerics == NUMERICS_GOLDEN ? "golden" : "fast",
             dtype_name(c->precision), c->precision == DT_F16 && strcmp(c->loss_scale, "off") ? " (dynamic loss scaling)" : "",
             c->numerics == NUMERICS_FAST && c->precision == DT_F32 ? (c->allow_tf32 ? ", TF32 allowed" : ", strict fp32")
                                                                     : "",
             c->gemm_reduction && strncmp(c->device, "cpu", 3)
                 ? (!strcmp(c->gemm_reduction, "none") ? ", no split-K" : ", split-K allowed")
                 : "",
             t.lr, t.steps);
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

/* The workload's facts plumb compare reads from the records (report/seeds.h):
 * the deciding metric, each eval metric's direction, the margin. */
static void add_record_facts(const struct workload *wl, const struct eval_metrics *m, json_t *rec)
{
    const struct workload_accept *a = wl->accept;
    json_t *better = json_object();
    for (int i = 0; i < m->n; i++)
        json_object_set_new(better, m->name[i], json_string(accept_metric_higher(wl, m->name[i]) ? "higher" : "lower"));
    json_object_set_new(rec, "primary", json_string(a->metric));
    json_object_set_new(rec, "better", better);
    json_object_set_new(rec, "margin", json_string(a->margin));
}

static int run_one(const struct seed_run_cfg *c, uint64_t seed, const char *scratch, struct comm *comm, json_t **rec,
                   plumb_err *e)
{
    *rec = NULL;
    const struct workload *wl = seed_run_workload(c);
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
    if (rc) return err_wrap(e, "training %s seed %llu on %s", wl->name, (unsigned long long)seed, c->device);
    if (!tr.has_eval) return err_set(e, PLUMB_EFAIL, "seed %llu on %s: the run ended without an evaluation",
                                     (unsigned long long)seed, c->device);
    json_t *curve = read_curve(mpath, e);
    unlink(mpath);
    rmdir(scratch);
    if (!curve) return e->code;
    char desc[256];
    seed_run_describe(c, desc, sizeof desc);
    json_t *info = json_pack("{s:s, s:o, s:o, s:I, s:I, s:o, s:s, s:s, s:s, s:s, s:s}", "param_digest", tr.param_digest,
                             "samples_per_s", jnum(tr.samples_per_s), "train_wall_s", jnum(tr.wall_s), "steps",
                             (json_int_t)tr.steps_done, "skipped_steps", (json_int_t)tr.skipped_steps, "final_scale",
                             jnum(tr.final_scale), "device", c->device, "setting", desc, "model", tr.model_desc,
                             "workload", wl->name, "preset", t.preset);
    /* the data's own model (ctr: the teacher's AUC): shown, not tested */
    for (int i = 0; i < tr.reference.n; i++) json_object_set_new(info, tr.reference.name[i], jnum(tr.reference.value[i]));
    *rec = json_pack("{s:I}", "seed", (json_int_t)seed);
    char bad[256] = "";
    int primary_seen = 0;
    for (int i = 0; i < tr.eval.n; i++) {
        double v = tr.eval.value[i];
        json_object_set_new(*rec, tr.eval.name[i], jnum(v));
        primary_seen |= !strcmp(tr.eval.name[i], wl->accept->metric);
        if (!isfinite(v))
            snprintf(bad + strlen(bad), sizeof bad - strlen(bad), "%s%s %g", bad[0] ? ", " : "", tr.eval.name[i], v);
    }
    add_record_facts(wl, &tr.eval, *rec);
    json_object_set_new(*rec, "curve", curve);
    json_object_set_new(*rec, "info", info);
    if (!primary_seen) {
        json_decref(*rec);
        *rec = NULL;
        return err_set(e, PLUMB_EFAIL, "seed %llu on %s: the %s eval reports no metric '%s' (the accept descriptor's)",
                       (unsigned long long)seed, c->device, wl->name, wl->accept->metric);
    }
    if (bad[0]) {
        json_decref(*rec);
        *rec = NULL;
        return err_set(e, PLUMB_EFAIL, "seed %llu on %s: eval metrics are not finite (%s): the run diverged",
                       (unsigned long long)seed, c->device, bad);
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
        if (log) {
            char ms[256] = "";
            const char *key;
            json_t *v;
            json_object_foreach(rec, key, v) if (strcmp(key, "seed") && json_is_number(v))
                snprintf(ms + strlen(ms), sizeof ms - strlen(ms), " %s %.6f", key, json_number_value(v));
            fprintf(log, "  seed %llu (%d/%d) on %s:%s in %.1f s\n", (unsigned long long)seed, i + 1, k, c->device, ms,
                    jsonx_num(json_object_get(rec, "info"), "train_wall_s"));
        }
        if (recs) json_array_append(*recs, rec);
        json_decref(rec);
    }
    comm_finalize(comm);
    if (fclose(f) && !rc) rc = err_set(e, PLUMB_EIO, "%s: %s", out_path, strerror(errno));
    return rc;
}
