/* The ladder check (accept/check_parity.h): the workload's accept preset
 * trained with K seeds at each rung of increasing numerical freedom on
 * ctx->device, each rung a real training run with that setting:
 *   1 golden       one fixed evaluation order, bit-identical on every device
 *   2 fast-strict  fast kernels, fp32 GEMMs strict IEEE (no TF32, no split-K:
 *                  PLUMB_GEMM_REDUCTION=none)
 *   3 fast-vendor  the vendor library's defaults: split-K reductions
 *                  (PLUMB_GEMM_REDUCTION=sequential) and TF32 where the device
 *                  has it
 *   4 bf16-amp     rung 3 + bf16 autocast (fp32 master weights)
 *   5 fp16-amp     rung 3 + fp16 autocast, dynamic loss scaling
 * On the cpu rungs 2 and 3 are one setting (OpenBLAS has no TF32 and the cpu
 * GEMM no split-K choice): rung 3 is recorded as the same runs as rung 2,
 * and says so. A rung whose precision the workload does not train in
 * (workload_accept.precisions; toy: fp32 only) is recorded as not run, with
 * the reason. Each rung's seeds go to
 * checks/<name>[-dev]/rungN-NAME.seeds.jsonl (name: ladder for ctr,
 * ladder-W for another workload W); report/compare_ladder.c analyses one
 * ladder or two, on the descriptor's deciding metric. */
#include "accept/check_parity.h"
#include "accept/workload_accept.h"
#include "core/jsonx.h"
#include "dev/dev.h"
#include "report/compare.h"
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

const char *const ladder_rung_names[5] = {"golden", "fast-strict", "fast-vendor", "bf16-amp", "fp16-amp"};

static const char *const turns_on[5] = {
    "the reference: one fixed evaluation order, bit-identical on every device",
    "fast kernels and the vendor BLAS in strict IEEE fp32 (no TF32, no split-K)",
    "the vendor library's defaults: split-K reductions, TF32 where the device has it",
    "bf16 autocast (fp32 master weights)",
    "fp16 autocast with dynamic loss scaling",
};

static void rung_cfg(const struct workload *wl, int rung, const char *device, int threads, long steps, int has_tf32,
                     struct seed_run_cfg *c)
{
    seed_run_cfg_defaults(c, device, threads);
    c->wl = wl;
    c->steps = steps;
    switch (rung) {
    case 1: c->numerics = NUMERICS_GOLDEN; break;
    case 2: c->gemm_reduction = "none"; break;
    default:
        c->gemm_reduction = "sequential";
        c->allow_tf32 = has_tf32;
        if (rung == 4) c->precision = DT_BF16;
        if (rung == 5) c->precision = DT_F16, c->loss_scale = "dynamic";
        break;
    }
}

static int rung_selected(const char *list, const char *name)
{
    if (!list || !*list || !strcmp(list, "all")) return 1;
    size_t L = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += L)
        if ((p == list || p[-1] == ',') && (p[L] == '\0' || p[L] == ',')) return 1;
    return 0;
}

int ladder_check_rungs(const char *rungs, plumb_err *e)
{
    if (!rungs || !strcmp(rungs, "all")) return PLUMB_OK;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", rungs);
    int any = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int known = 0;
        for (int i = 0; i < 5; i++) known |= !strcmp(t, ladder_rung_names[i]);
        if (!known)
            return err_set(e, PLUMB_EUSAGE, "--rungs: unknown rung '%s' (expected some of golden, fast-strict, "
                           "fast-vendor, bf16-amp, fp16-amp)", t);
        any = 1;
    }
    /* '' (or ',') named no rung: it ran all five */
    if (!any)
        return err_set(e, PLUMB_EUSAGE, "--rungs '%s': names no rung (expected all, or some of golden, fast-strict, "
                       "fast-vendor, bf16-amp, fp16-amp)", rungs);
    return PLUMB_OK;
}

int check_ladder_run(const struct check_ctx *ctx, const struct ladder_opts *o, struct check_result *r, plumb_err *e)
{
    const char *device = ctx->device ? ctx->device : "cpu";
    struct seed_run_cfg wc;
    seed_run_cfg_defaults(&wc, device, ctx->threads);
    wc.wl = o->wl;
    const struct workload *wl = seed_run_workload(&wc);
    if (!wl || !wl->accept) return err_set(e, PLUMB_EINTERNAL, "ladder: the workload has no accept descriptor");
    const struct workload_accept *wa = wl->accept;
    char cname[64];
    accept_check_name("ladder", wl, cname, sizeof cname);
    int rc = check_begin(r, cname, device);
    if (rc) return err_set(e, rc, "%s: cannot start the check", cname);
    /* the rung list must name rungs */
    if ((rc = ladder_check_rungs(o->rungs, e))) {
        check_free(r);
        return rc;
    }
    int k = o->seeds > 0 ? o->seeds : parity_seeds_for_level(ctx->level);
    char dir[PATH_MAX] = "";
    if ((rc = check_artifact_dir(ctx, r, dir, sizeof dir, e))) {
        check_free(r);
        return rc;
    }
    int on_cpu = !strncmp(device, "cpu", 3);
    int has_tf32 = 0;
    if (!on_cpu) {
        struct dev *d = NULL;
        plumb_err de = {0};
        if (dev_open(device, &d, &de) == PLUMB_OK) {
            has_tf32 = d->info.peak_tflops_tf32 > 0;
            dev_close(d);
        } else {
            check_set_status(r, CHECK_FAIL, "cannot open %s: %s", device, de.msg);
            return PLUMB_OK;
        }
    }
    check_threshold(r, "seeds_per_rung", k);
    json_t *rungs = json_array();
    int prev_run = 0; /* the rung number whose runs a same-setting rung reuses */
    for (int rung = 1; rung <= 5; rung++) {
        const char *name = ladder_rung_names[rung - 1];
        if (!rung_selected(o->rungs, name)) continue;
        struct seed_run_cfg c;
        rung_cfg(wl, rung, device, ctx->threads, o->steps, has_tf32, &c);
        plant_apply(o->plant, rung, &c);
        if (!accept_precision_ok(wl, c.precision)) {
            char why[160];
            snprintf(why, sizeof why, "not run: %s trains in %s only", wl->name, wa->precisions);
            json_array_append_new(rungs, json_pack("{s:i, s:s, s:s, s:s, s:b}", "rung", rung, "name", name,
                                                   "turns_on", turns_on[rung - 1], "skipped", why, "run", 0));
            if (o->log) fprintf(o->log, "ladder on %s, rung %d %s: %s\n", device, rung, name, why);
            continue;
        }
        char desc[256];
        seed_run_describe(&c, desc, sizeof desc);
        json_t *row = json_pack("{s:i, s:s, s:s, s:s}", "rung", rung, "name", name, "turns_on", turns_on[rung - 1],
                                "setting", desc);
        if (o->plant && o->plant->active && rung >= o->plant->from_rung)
            json_object_set_new(row, "planted", json_string(o->plant->text));
        int planted_here = o->plant && o->plant->active && rung >= o->plant->from_rung;
        int planted_prev = o->plant && o->plant->active && rung - 1 >= o->plant->from_rung;
        if (rung == 3 && on_cpu && prev_run == 2 && planted_here == planted_prev) {
            json_object_set_new(row, "same_as", json_integer(2));
            json_object_set_new(row, "note", json_string(
                "on the cpu rungs 2 and 3 are the same setting (OpenBLAS has no TF32 and plumb's cpu GEMM has no "
                "split-K choice): rung 2's runs stand for both, nothing was trained twice"));
            json_array_append_new(rungs, row);
            continue;
        }
        if (rung == 3 && !on_cpu && !has_tf32)
            json_object_set_new(row, "note", json_string("this device reports no TF32: the rung turns on split-K alone"));
        char path[PATH_MAX + 64], scratch[PATH_MAX + 32], rel[PATH_MAX + 64];
        snprintf(path, sizeof path, "%s/rung%d-%s.seeds.jsonl", dir, rung, name);
        snprintf(scratch, sizeof scratch, "%s/.run", dir);
        const char *p = strstr(dir, "/checks/");
        if (p) snprintf(rel, sizeof rel, "%s/rung%d-%s.seeds.jsonl", p + 1, rung, name);
        else snprintf(rel, sizeof rel, "checks/%s/rung%d-%s.seeds.jsonl", cname, rung, name);
        if (o->log) fprintf(o->log, "ladder on %s, rung %d %s: %s, %d seeds\n", device, rung, name, desc, k);
        json_t *recs = NULL;
        rc = seed_runs(&c, o->seed_base, k, path, scratch, o->log, &recs, e);
        json_decref(recs);
        check_artifact(r, rel);
        if (rc) {
            check_set_status(r, CHECK_FAIL, "rung %d (%s): %s", rung, name, e->msg);
            err_clear(e);
            json_decref(row);
            break;
        }
        json_object_set_new(row, "seeds", json_string(rel));
        json_array_append_new(rungs, row);
        prev_run = rung;
    }
    json_t *det = json_pack("{s:s, s:s, s:s, s:i, s:I, s:o}", "workload", wl->name, "metric", wa->metric, "better",
                            wa->higher_is_better ? "higher" : "lower", "seeds_per_rung", k, "seed_base",
                            (json_int_t)o->seed_base, "rungs", rungs);
    if (o->plant && o->plant->active) json_object_set_new(det, "planted", json_string(o->plant->text));
    json_object_update(json_object_get(r->obj, "details"), det);
    json_decref(det);
    if (r->status == CHECK_FAIL) return PLUMB_OK;
    /* the rung-to-rung shifts on this side */
    struct compare_opts co;
    compare_opts_defaults(&co);
    json_t *lad = NULL;
    plumb_err le = {0};
    if (compare_ladder(r->obj, ctx->run_dir, NULL, NULL, &co, &lad, &le) == PLUMB_OK) {
        size_t i;
        json_t *row;
        json_array_foreach(json_object_get(lad, "rungs"), i, row)
        {
            char n[96];
            snprintf(n, sizeof n, "rung%d_%s_%s_mean", (int)jsonx_num(row, "rung"), jsonx_str(row, "name"), wa->metric);
            double m = jsonx_num(json_object_get(row, "a"), "mean");
            if (isfinite(m)) check_metric(r, n, m, "");
            snprintf(n, sizeof n, "rung%d_%s_%s_std", (int)jsonx_num(row, "rung"), jsonx_str(row, "name"), wa->metric);
            double s = jsonx_num(json_object_get(row, "a"), "std");
            if (isfinite(s)) check_metric(r, n, s, "");
        }
        check_set_status(r, CHECK_PASS, "%s", jsonx_str(lad, "text"));
        json_decref(lad);
    } else {
        check_set_status(r, CHECK_WARN, "ladder analysis failed: %s", le.msg);
    }
    return PLUMB_OK;
}
