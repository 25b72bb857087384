/* plumb bench ctr: DLRM (models/ctr/ctr.h) training throughput per precision
 * and batch, on any device, with the step time split into data / forward /
 * backward / communication / optimizer, device memory and a leak check; with
 * --vs-pytorch the PyTorch reference (bench/ctr_pytorch_gpu.py, one fused
 * sparse table, SGD, eager and torch.compile) runs on the same device in the
 * same run on the same batches and the ratios are printed. Optional checks
 * that need a GPU and a CPU side by side: --golden-steps (parameter digest of
 * golden training on the device equals the cpu's) and --auc-steps (fast-mode
 * AUC after a fixed budget on the device, the cpu and PyTorch).
 *
 * Method. Data: a pool of synthetic samples (the teacher of train/synth.h)
 * generated into memory first, so generation cost is not part of the step.
 * "device" timing: --steps steps cycling through 8 batches already on the
 * device; "loader" timing: the same steps fed by the GPU data plane
 * (train/devfeed.h: sampler -> pinned buffers on host threads -> H2D on a
 * copy stream). Split: forward = a forward-only pass on the same batches,
 * backward = forward_backward - forward, optimizer = ctr_opt_step,
 * communication = the dense-gradient all-reduce (--comm nccl: NCCL, bucketed,
 * world size of the launch; none: 0), data = the host's wait for the loader.
 * The whole-step figures time --steps steps queued back to back (one
 * synchronisation at the end, like the PyTorch reference's events); each
 * part of the split is timed on the host around calls followed by a
 * synchronisation, over --steps steps after --warmup. Memory: the caching allocator's counters
 * (plugin workspaces for GEMM/sort are outside it and listed separately by
 * the plugin); leak check: reserved bytes after warm-up equal reserved bytes
 * after --leak-steps more steps. */
#include "cli/bench.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "comm/comm.h"
#include "core/file.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "core/philox.h"
#include "core/timer.h"
#include "dev/dev.h"
#include "dev/train_ops.h"
#include "models/ctr/ctr.h"
#include "models/ctr/data.h"
#include "train/devfeed.h"
#include "models/workloads.h"
#include "train/options.h"
#include "train/trainer.h"
#include "models/ctr/eval.h"
#include "train/sampler.h"
#include "models/ctr/synth.h"
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NB_DEV 8 /* batches kept on the device for the "device" timing */

struct opts {
    const char *device, *preset, *precisions, *batches, *json, *python, *script, *workdir, *comm, *torch_modes,
        *auc_precision;
    long rows, steps, warmup, pool, threads, leak_steps, golden_steps, golden_batch, golden_rows, auc_steps,
        auc_batch, auc_eval;
    double lr;
    double to_auc;                     /* --to-auc: target eval AUC (0: not run) */
    long ta_batch, ta_every, ta_max, ta_warmup, ta_workers;
    double ta_lr;
    const char *ta_precision, *ta_script, *ta_modes;
    int vs_pytorch, no_throughput;
    const char *fuse;
    int nccl;                          /* --comm nccl */
};

struct devb {
    float *dense, *labels;
    uint32_t *sparse;
};

struct timing {
    double step_dev_ms, step_loader_ms, fwd_ms, bwd_ms, opt_ms, comm_ms, data_ms, loader_build_ms;
    double samples_s, samples_s_loader;
    size_t peak_alloc, peak_reserved, reserved_warm, reserved_end, alloc_warm, alloc_end;
    long leak_steps;
    double torch_eager, torch_compile; /* samples/s, 0 = not run */
    int fused;                         /* sparse SGD fused into the backward */
    double enqueue_ms;                 /* host time to queue one step (device timing) */
    double host_fb_ms;                 /* host time to queue forward+backward into an empty queue */
    char torch_err[256];
};

static double now(void) { return timer_now(); }

/* Host batch i of a fixed list (sampler order of epoch 0, step i). */
static int host_batches(const struct dataset *ds, const int64_t *rows, long batch, int count, uint64_t seed,
                        float **dense, uint32_t **sparse, float **labels, plumb_err *e)
{
    struct sampler s;
    int rc = sampler_init(&s, ds->n[0], batch, (int)batch, seed, 1, e);
    if (rc) return rc;
    size_t B = (size_t)batch;
    *dense = malloc(B * count * CTR_N_DENSE * sizeof(float));
    *sparse = malloc(B * count * CTR_N_TABLES * sizeof(uint32_t));
    *labels = malloc(B * count * sizeof(float));
    uint32_t *idx = malloc(B * sizeof(uint32_t));
    int shv[4];
    if (!*dense || !*sparse || !*labels || !idx) rc = err_set(e, PLUMB_ENOMEM, "bench ctr: out of host memory");
    for (int i = 0; i < count && !rc; i++) {
        struct sampler_step st;
        rc = sampler_get(&s, i, 0, 1, &st, idx, shv, e);
        if (!rc)
            rc = data_fill(ds, 0, idx, (int)batch, rows, *dense + i * B * CTR_N_DENSE, *sparse + i * B * CTR_N_TABLES,
                           *labels + i * B, e);
    }
    free(idx);
    sampler_free(&s);
    return rc;
}

/* A plumb train ctr configuration built through the option table
 * (train/options.h): the same defaults and checks as the command line. The
 * words are "--name value" pairs (value NULL: a flag), ended by NULL. */
static int bench_train_config(const char *const *words, struct train_config *c, plumb_err *e)
{
    train_config_defaults(c, workload_find("ctr"));
    for (int i = 0; words[i]; i += 2) {
        int rc = train_option_set(c, words[i], words[i + 1], e);
        if (rc) return rc;
    }
    return train_config_finish(c, e);
}

/* One throughput configuration, timed through the trainer's step (the one
 * training loop, train/trainer.h). */
static int bench_config(const struct opts *o, struct comm *hc, const struct dataset *ds, dtype_t prec, long batch,
                        struct timing *t, plumb_err *e)
{
    memset(t, 0, sizeof *t);
    struct ctr_config c;
    int rc = ctr_config_preset(o->preset, o->rows, &c, e);
    if (rc) return rc;
    const long total = o->warmup + 2 * o->steps + (o->steps + o->warmup) + o->leak_steps + 1;
    char rows[32], bs[32], steps[32], lr[32], pool[32], th[32];
    snprintf(rows, sizeof rows, "%ld", o->rows);
    snprintf(bs, sizeof bs, "%ld", batch);
    snprintf(steps, sizeof steps, "%ld", total);
    snprintf(lr, sizeof lr, "%.17g", o->lr);
    snprintf(pool, sizeof pool, "%ld", o->pool);
    snprintf(th, sizeof th, "%ld", o->threads);
    /* the throughput runs at a constant lr (no warmup); the data are the
     * synthetic pool of data seed 1, generated into memory by the trainer */
    const char *words[] = {"--preset", o->preset, "--rows", rows, "--device", o->device, "--precision",
                           dtype_name(prec) , "--batch", bs, "--steps", steps, "--optimizer", "sgd", "--lr", lr,
                           "--warmup", "0", "--train-samples", pool, "--eval-samples", "1024", "--data-seed", "1",
                           "--micro-shard", bs, "--comm", o->nccl ? "nccl" : "self", "--fuse-sparse-sgd",
                           strcmp(o->fuse, "no") ? "auto" : "no", "--threads", th, "--watchdog-timeout", "0",
                           "--quiet", NULL, NULL};
    struct train_config cfg;
    if ((rc = bench_train_config(words, &cfg, e))) return rc;
    struct trainer *tr = NULL;
    if ((rc = trainer_open(&cfg, hc, &tr, e))) return rc;
    struct dev *d = trainer_dev(tr);
    struct model *m;
    const struct model_ops *mo = trainer_model(tr, &m);
    /* NB_DEV batches on the device */
    float *hd = NULL, *hl = NULL;
    uint32_t *hs = NULL;
    struct devb db[NB_DEV];
    memset(db, 0, sizeof db);
    size_t B = (size_t)batch;
    rc = host_batches(ds, c.rows, batch, NB_DEV, 7, &hd, &hs, &hl, e);
    for (int i = 0; i < NB_DEV && !rc; i++) {
        rc = dev_alloc(d, B * CTR_N_DENSE * 4, (void **)&db[i].dense, e);
        if (!rc) rc = dev_alloc(d, B * CTR_N_TABLES * 4, (void **)&db[i].sparse, e);
        if (!rc) rc = dev_alloc(d, B * 4, (void **)&db[i].labels, e);
        if (!rc) rc = dev_upload(d, db[i].dense, hd + i * B * CTR_N_DENSE, B * CTR_N_DENSE * 4, e);
        if (!rc) rc = dev_upload(d, db[i].sparse, hs + i * B * CTR_N_TABLES, B * CTR_N_TABLES * 4, e);
        if (!rc) rc = dev_upload(d, db[i].labels, hl + i * B, B * 4, e);
    }
    free(hd), free(hs), free(hl);
    long step = 0;
#define DB(i) (struct batch){.B = (int)batch, .n_valid = (int)batch, .on_device = 1, \
                             .field = {db[(i) % NB_DEV].dense, db[(i) % NB_DEV].sparse, db[(i) % NB_DEV].labels}}
    struct trainer_step_stats ss;
    /* warm-up */
    for (long i = 0; i < o->warmup && !rc; i++, step++) {
        struct batch b = DB(step);
        rc = trainer_step_on(tr, &b, step, batch, NULL, e);
    }
    struct dev_mem_stats ms;
    /* device-resident timing: whole steps, one synchronisation at the end
     * (each trainer step reads its small status block back: the decision
     * to apply or skip the update is the host's) */
    double t0 = now();
    for (long i = 0; i < o->steps && !rc; i++, step++) {
        struct batch b = DB(step);
        rc = trainer_step_on(tr, &b, step, batch, NULL, e); /* queued: read one step behind */
    }
    double enq = now() - t0; /* the host's time in the steps */
    long fused_n = 0;
    trainer_step_kinds(tr, &fused_n, NULL);
    t->fused = fused_n > 0; /* what the trainer did, not what the options allow */
    if (!rc) rc = dev_sync(d, e);
    double whole = now() - t0;
    t->enqueue_ms = 1e3 * enq / (double)o->steps;
    t->step_dev_ms = 1e3 * whole / (double)o->steps;
    t->samples_s = (double)batch * (double)o->steps / whole;
    /* split, each part timed to a synchronisation: a forward-only pass, a
     * forward + backward pass (the model's own, outside the trainer: it
     * writes only the gradients, which the step then rewrites), then the
     * trainer's step; backward = (forward + backward) - forward, optimizer =
     * step - (forward + backward) - communication. The host times of the
     * step's phases (ss) are enqueue times for a queued step, not device times.
     * Forward and forward + backward are the fastest of the steps, not the
     * mean: a difference of two means on a loaded host (one preempted forward)
     * once made backward negative, and the minimum is the least disturbed
     * figure of a fixed amount of work. */
    double tf = HUGE_VAL, tfb = HUGE_VAL, tc = 0, to = 0, tq = 0;
    for (long i = 0; i < o->steps && !rc; i++, step++) {
        struct batch b = DB(step);
        struct model_loss fl;
        double a = now();
        rc = mo->forward ? mo->forward(m, &b, e) : PLUMB_OK;
        if (!rc) rc = dev_sync(d, e);
        double b1 = now();
        if (!rc) rc = mo->forward_backward(m, &b, 1.0f / (float)batch, NULL, &fl, e);
        if (!rc) rc = dev_sync(d, e);
        double c1 = now();
        if (!rc) rc = trainer_step_on(tr, &b, step, batch, &ss, e);
        if (!rc) rc = dev_sync(d, e);
        double e1 = now();
        if (b1 - a < tf) tf = b1 - a;
        if (c1 - b1 < tfb) tfb = c1 - b1;
        tc += ss.comm_s;
        tq += ss.compute_s;
        to += (e1 - c1) - (c1 - b1) - ss.comm_s;
    }
    double ns = (double)o->steps;
    t->fwd_ms = rc ? 0 : 1e3 * tf;
    t->bwd_ms = rc ? 0 : 1e3 * (tfb - tf);
    t->comm_ms = 1e3 * tc / ns;
    t->opt_ms = 1e3 * to / ns;
    t->host_fb_ms = 1e3 * tq / ns;
    /* loader timing: the trainer's own data path (the device feed on a GPU) */
    if (!rc) {
        struct trainer_steps_time tm;
        rc = trainer_steps(tr, step, o->warmup, o->steps, &tm, e);
        step += o->warmup + o->steps;
        if (!rc) {
            t->step_loader_ms = 1e3 * tm.elapsed_s / ns;
            t->samples_s_loader = (double)batch * ns / tm.elapsed_s;
            t->data_ms = 1e3 * tm.wait_s / ns;
            t->loader_build_ms = 1e3 * tm.build_s / ns;
        }
    }
    /* leak check: everything above has run at least once, so the cache is warm */
    dev_mem_stats(d, &ms);
    t->reserved_warm = ms.reserved;
    t->alloc_warm = ms.allocated;
    for (long i = 0; i < o->leak_steps && !rc; i++, step++) {
        struct batch b = DB(step);
        rc = trainer_step_on(tr, &b, step, batch, &ss, e);
    }
#undef DB
    if (!rc) rc = dev_sync(d, e);
    dev_mem_stats(d, &ms);
    t->reserved_end = ms.reserved;
    t->alloc_end = ms.allocated;
    t->peak_alloc = ms.peak_allocated;
    t->peak_reserved = ms.peak_reserved;
    t->leak_steps = o->leak_steps;
    for (int i = 0; i < NB_DEV; i++) {
        if (db[i].dense) dev_free(d, db[i].dense);
        if (db[i].sparse) dev_free(d, db[i].sparse);
        if (db[i].labels) dev_free(d, db[i].labels);
    }
    trainer_close(tr);
    return rc;
}

/* Writes `count` batches (or a contiguous eval range) as the binary file the
 * PyTorch script reads: header "PLCTR1\0\0", int64 n, then float dense[n,13],
 * int32 rows[n,26] (row within table), float labels[n]. */
static int write_batches(const char *path, const struct dataset *ds, int split, const int64_t *rows, long n,
                         uint64_t seed, long batch, plumb_err *e)
{
    FILE *f = fopen(path, "wb");
    if (!f) return err_set(e, PLUMB_EIO, "bench ctr: cannot write %s", path);
    float *dense = malloc((size_t)n * CTR_N_DENSE * 4), *lab = malloc((size_t)n * 4);
    uint32_t *sp = malloc((size_t)n * CTR_N_TABLES * 4), *idx = malloc((size_t)n * 4);
    int rc = (!dense || !lab || !sp || !idx) ? err_set(e, PLUMB_ENOMEM, "bench ctr: out of memory") : 0;
    if (!rc && split == 0 && seed != 0) { /* the trainer's order (seed 0: index order) */
        struct sampler s;
        rc = sampler_init(&s, ds->n[0], batch, (int)batch, seed, 1, e);
        int shv[4];
        for (long i = 0; !rc && i < n / batch; i++) {
            struct sampler_step st;
            rc = sampler_get(&s, i, 0, 1, &st, idx + i * batch, shv, e);
        }
        if (!rc) sampler_free(&s);
    } else if (!rc) {
        for (long i = 0; i < n; i++) idx[i] = (uint32_t)i;
    }
    if (!rc) rc = data_fill(ds, split, idx, (int)n, rows, dense, sp, lab, e);
    if (!rc) {
        int64_t nn = n;
        if (fwrite("PLCTR1\0\0", 1, 8, f) != 8 || fwrite(&nn, 8, 1, f) != 1 ||
            fwrite(dense, 4, (size_t)n * CTR_N_DENSE, f) != (size_t)n * CTR_N_DENSE ||
            fwrite(sp, 4, (size_t)n * CTR_N_TABLES, f) != (size_t)n * CTR_N_TABLES || fwrite(lab, 4, (size_t)n, f) != (size_t)n)
            rc = err_set(e, PLUMB_EIO, "bench ctr: short write to %s", path);
    }
    if (fclose(f) && !rc) rc = err_set(e, PLUMB_EIO, "bench ctr: cannot close %s", path);
    free(dense), free(lab), free(sp), free(idx);
    return rc;
}

/* Runs the PyTorch script; returns the value of "key" from its last JSON line. */
static int run_torch(const struct opts *o, const char *args, const char *key, double *val, char *why, size_t wn)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s %s 2>&1", o->python, o->script, args);
    FILE *p = popen(cmd, "r");
    *val = 0;
    if (!p) {
        snprintf(why, wn, "cannot run %s", o->python);
        return -1;
    }
    char line[4096], last[4096] = "";
    while (fgets(line, sizeof line, p)) {
        if (line[0] == '{') snprintf(last, sizeof last, "%s", line);
        else fprintf(stderr, "  [pytorch] %s", line);
    }
    int st = pclose(p);
    json_error_t je;
    json_t *j = last[0] ? json_loads(last, 0, &je) : NULL;
    json_t *v = j ? json_object_get(j, key) : NULL;
    if (st != 0 || !v || !json_is_number(v)) {
        snprintf(why, wn, "%s exited %d without a JSON line holding \"%s\"", o->script, st, key);
        if (j) json_decref(j);
        return -1;
    }
    *val = json_number_value(v);
    json_decref(j);
    return 0;
}

/* Golden digest: --golden-steps steps of golden training, the same
 * configuration through the trainer on the device and on the cpu. */
static int golden_check(const struct opts *o, struct comm *hc, const char *label, json_t *out, plumb_err *e)
{
    char hex[2][65];
    double secs[2];
    char rows[32], bs[32], steps[32], lr[32], pool[32];
    snprintf(rows, sizeof rows, "%ld", o->golden_rows);
    snprintf(bs, sizeof bs, "%ld", o->golden_batch);
    snprintf(steps, sizeof steps, "%ld", o->golden_steps);
    snprintf(lr, sizeof lr, "%.17g", o->lr);
    snprintf(pool, sizeof pool, "%ld", o->pool);
    const char *devs[2] = {o->device, "cpu"};
    int rc = PLUMB_OK;
    for (int k = 0; k < 2 && !rc; k++) {
        const char *words[] = {"--preset", o->preset, "--rows", rows, "--device", devs[k], "--batch", bs, "--steps",
                               steps, "--optimizer", "sgd", "--lr", lr, "--warmup", "10", "--numerics", "golden",
                               "--train-samples", pool, "--eval-samples", "1024", "--data-seed", "1", "--seed", "5",
                               "--comm", "self", "--watchdog-timeout", "0", "--quiet", NULL, NULL};
        struct train_config cfg;
        struct train_result tr;
        if ((rc = bench_train_config(words, &cfg, e))) break;
        double t0 = now();
        rc = trainer_run(&cfg, hc, &tr, e);
        secs[k] = now() - t0;
        if (!rc) snprintf(hex[k], sizeof hex[k], "%s", tr.param_digest);
    }
    if (rc) return rc;
    int same = !strcmp(hex[0], hex[1]);
    printf("\ngolden %s rows=%ld batch=%ld steps=%ld fp32 SGD (the trainer, same seed):\n  %-8s %s (%.1f s)\n"
           "  %-8s %s (%.1f s)  %s\n",
           o->preset, o->golden_rows, o->golden_batch, o->golden_steps, label, hex[0], secs[0], "cpu", hex[1], secs[1],
           same ? "EQUAL" : "DIFFERENT");
    json_t *j = json_object();
    json_object_set_new(j, "preset", json_string(o->preset));
    json_object_set_new(j, "rows", json_integer(o->golden_rows));
    json_object_set_new(j, "batch", json_integer(o->golden_batch));
    json_object_set_new(j, "steps", json_integer(o->golden_steps));
    json_object_set_new(j, "digest_device", json_string(hex[0]));
    json_object_set_new(j, "digest_cpu", json_string(hex[1]));
    json_object_set_new(j, "equal", json_boolean(same));
    json_object_set_new(out, "golden", j);
    return same ? PLUMB_OK : PLUMB_EFAIL;
}

/* The initial parameters in tensor order (each tensor's floats, no padding),
 * for the PyTorch reference to start from the same point: the model the
 * trainer initialises from `seed` (the same bits on every device). */
static int write_params(const char *path, const struct ctr_config *c, uint64_t seed, plumb_err *e)
{
    struct dev *cpu = NULL;
    struct ctr_model *m = NULL;
    int rc = dev_open("cpu", &cpu, e);
    if (!rc) rc = ctr_create(cpu, c, 1, DT_F32, &m, e);
    if (!rc) rc = ctr_init(m, seed, e);
    FILE *f = rc ? NULL : fopen(path, "wb");
    if (!rc && !f) rc = err_set(e, PLUMB_EIO, "bench ctr: cannot write %s", path);
    const float *p = m ? ctr_params(m) : NULL; /* the cpu device's memory is host memory */
    for (int i = 0; !rc && i < ctr_n_tensors(m); i++) {
        const struct model_tensor *t = ctr_tensor(m, i);
        if (fwrite(p + t->offset, sizeof(float), t->numel, f) != t->numel)
            rc = err_set(e, PLUMB_EIO, "bench ctr: short write to %s", path);
    }
    if (f && fclose(f) && !rc) rc = err_set(e, PLUMB_EIO, "bench ctr: cannot close %s", path);
    if (m) ctr_free(m);
    if (cpu) dev_close(cpu);
    return rc;
}

/* Fast-mode AUC after --auc-steps steps at --auc-batch, through the trainer
 * on `device` (lr warmup 100 steps, the trainer's schedule). */
static int auc_on(const char *device, const struct opts *o, struct comm *hc, double *auc, plumb_err *e)
{
    char rows[32], bs[32], steps[32], lr[32], pool[32], ev[32];
    snprintf(rows, sizeof rows, "%ld", o->rows);
    snprintf(bs, sizeof bs, "%ld", o->auc_batch);
    snprintf(steps, sizeof steps, "%ld", o->auc_steps);
    snprintf(lr, sizeof lr, "%.17g", o->lr);
    snprintf(pool, sizeof pool, "%ld", o->pool);
    snprintf(ev, sizeof ev, "%ld", o->auc_eval);
    const char *words[] = {"--preset", o->preset, "--rows", rows, "--device", device, "--batch", bs, "--steps", steps,
                           "--optimizer", "sgd", "--lr", lr, "--warmup", "100", "--precision", o->auc_precision,
                           "--train-samples", pool, "--eval-samples", ev, "--eval-batch", ev, "--data-seed", "1",
                           "--seed", "21", "--micro-shard", bs, "--comm", "self", "--watchdog-timeout", "0", "--quiet",
                           NULL, NULL};
    struct train_config cfg;
    struct train_result tr;
    int rc = bench_train_config(words, &cfg, e);
    if (!rc) rc = trainer_run(&cfg, hc, &tr, e);
    if (!rc) *auc = eval_metric(&tr.eval, "auc");
    return rc;
}

static int auc_check(const struct opts *o, struct comm *hc, const char *label, const struct dataset *ds, json_t *out,
                     plumb_err *e)
{
    struct ctr_config c;
    int rc = ctr_config_preset(o->preset, o->rows, &c, e);
    if (rc) return rc;
    double a_dev = NAN, a_cpu = NAN, a_torch = NAN;
    double t0 = now();
    if ((rc = auc_on(o->device, o, hc, &a_dev, e))) return rc;
    double t1 = now();
    if (!strcmp(label, "cpu")) a_cpu = a_dev;
    else if ((rc = auc_on("cpu", o, hc, &a_cpu, e))) return rc;
    double t2 = now();
    char why[256] = "";
    if (o->vs_pytorch) {
        char tr[512], ev[512], pp[512], args[1600];
        snprintf(pp, sizeof pp, "%s/ctr_auc_init.bin", o->workdir);
        snprintf(tr, sizeof tr, "%s/ctr_auc_train.bin", o->workdir);
        snprintf(ev, sizeof ev, "%s/ctr_auc_eval.bin", o->workdir);
        /* the trainer's batches: its sampler (seed 21) over the pool, the eval split in index order */
        rc = write_params(pp, &c, 21, e);
        if (!rc) rc = write_batches(tr, ds, 0, c.rows, o->auc_steps * o->auc_batch, 21, o->auc_batch, e);
        if (!rc) rc = write_batches(ev, ds, 1, c.rows, ds->n[1], 0, o->auc_batch, e);
        if (rc) return rc;
        snprintf(args, sizeof args, "--auc --train-file %s --eval-file %s --init-file %s --batch %ld --rows %ld --lr %g "
                 "--warmup-lr-steps 100 --precision %s", tr, ev, pp, o->auc_batch, o->rows, o->lr, o->auc_precision);
        if (run_torch(o, args, "auc", &a_torch, why, sizeof why)) log_warn("bench ctr: pytorch auc: %s", why);
    }
    printf("\nfast %s AUC after %ld steps of batch %ld (lr %g, 100 warm-up steps), %ld eval samples:\n"
           "  %-8s %.5f (%.1f s)\n  %-8s %.5f (%.1f s)   |diff| %.5f\n  (all from the same initial parameters)\n",
           o->auc_precision, o->auc_steps, o->auc_batch, o->lr, ds->n[1], label, a_dev, t1 - t0, "cpu", a_cpu,
           t2 - t1, fabs(a_dev - a_cpu));
    if (o->vs_pytorch) printf("  %-8s %.5f   |diff| %.5f %s\n", "pytorch", a_torch, fabs(a_dev - a_torch), why);
    json_t *j = json_object();
    json_object_set_new(j, "steps", json_integer(o->auc_steps));
    json_object_set_new(j, "batch", json_integer(o->auc_batch));
    json_object_set_new(j, "precision", json_string(o->auc_precision));
    json_object_set_new(j, "eval_samples", json_integer(ds->n[1]));
    json_object_set_new(j, "auc_device", json_real(a_dev));
    json_object_set_new(j, "auc_cpu", json_real(a_cpu));
    if (o->vs_pytorch) json_object_set_new(j, "auc_pytorch", json_real(a_torch));
    json_object_set_new(out, "auc", j);
    return PLUMB_OK;
}

/* Runs a script; its last JSON line (NULL with *why on failure). */
static json_t *run_script_json(const struct opts *o, const char *script, const char *args, char *why, size_t wn)
{
    char cmd[2600];
    snprintf(cmd, sizeof cmd, "%s %s %s 2>&1", o->python, script, args);
    FILE *p = popen(cmd, "r");
    if (!p) {
        snprintf(why, wn, "cannot run %s", o->python);
        return NULL;
    }
    char line[4096], last[4096] = "";
    while (fgets(line, sizeof line, p)) {
        if (line[0] == '{') snprintf(last, sizeof last, "%s", line);
        else fprintf(stderr, "  [pytorch] %s", line);
    }
    int st = pclose(p);
    json_error_t je;
    json_t *j = last[0] ? json_loads(last, 0, &je) : NULL;
    if (st != 0 || !j) {
        snprintf(why, wn, "%s exited %d without a JSON line", script, st);
        if (j) json_decref(j);
        return NULL;
    }
    return j;
}

/* Time to quality (--to-auc X): the trainer (plumb train --stop-at X
 * --eval-every N: dlrm-kaggle on the synthetic teacher, SGD with linear
 * warm-up) until the eval AUC reaches X; with --vs-pytorch PyTorch's own
 * training loop (bench/ctr_to_auc_pytorch.py: DataLoader over the same
 * train samples, pinned memory) from the same initial parameters, with the
 * same batch, lr, warm-up, eval set and eval interval. */
static int to_auc_check(const struct opts *o, struct comm *hc, const char *label, const struct dataset *ds, json_t *out,
                        plumb_err *e)
{
    if (strcmp(o->ta_precision, "fp32") && strcmp(o->ta_precision, "bf16"))
        return err_set(e, PLUMB_EUSAGE, "--to-auc-precision: '%s' (expected fp32 or bf16)", o->ta_precision);
    char rows[32], bs[32], steps[32], lr[32], pool[32], ev[32], every[32], warm[32], target[32];
    snprintf(rows, sizeof rows, "%ld", o->rows);
    snprintf(bs, sizeof bs, "%ld", o->ta_batch);
    snprintf(steps, sizeof steps, "%ld", o->ta_max);
    snprintf(lr, sizeof lr, "%.17g", o->ta_lr);
    snprintf(pool, sizeof pool, "%ld", o->pool);
    snprintf(ev, sizeof ev, "%ld", ds->n[1]);
    snprintf(every, sizeof every, "%ld", o->ta_every);
    snprintf(warm, sizeof warm, "%ld", o->ta_warmup);
    snprintf(target, sizeof target, "%.17g", o->to_auc);
    const char *words[] = {"--preset", o->preset, "--rows", rows, "--device", o->device, "--batch", bs, "--steps", steps,
                           "--optimizer", "sgd", "--lr", lr, "--warmup", warm, "--precision", o->ta_precision,
                           "--train-samples", pool, "--eval-samples", ev, "--eval-every", every, "--stop-at", target,
                           "--data-seed", "1", "--seed", "21", "--comm", "self", "--watchdog-timeout", "0", "--quiet",
                           NULL, NULL};
    struct train_config cfg;
    struct train_result tr;
    int rc = bench_train_config(words, &cfg, e);
    double t0 = now();
    if (!rc) rc = trainer_run(&cfg, hc, &tr, e);
    double wall = now() - t0;
    if (rc) return rc;
    double auc = eval_metric(&tr.eval, "auc");
    printf("\ntime to AUC %.4f: %s %s, batch %ld, SGD lr %g (linear warm-up %ld steps), eval every %ld steps on %ld "
           "samples, teacher AUC %.4f\n",
           o->to_auc, o->preset, o->ta_precision, o->ta_batch, o->ta_lr, o->ta_warmup, o->ta_every, ds->n[1],
           tr.reference.n ? tr.reference.value[0] : NAN);
    printf("  %-16s %s at step %ld (%ld samples): %.2f s (evals %.2f s; set-up %.2f s apart; %.0f samples/s in the "
           "steps), AUC %.5f\n",
           label, tr.reached ? "reached" : "NOT reached", tr.reached ? tr.reached_step : tr.steps_done,
           (tr.reached ? tr.reached_step : tr.steps_done) * o->ta_batch, tr.reached ? tr.reached_s : wall - tr.setup_s,
           tr.eval_s, tr.setup_s, tr.samples_per_s, auc);
    json_t *j = json_object();
    json_object_set_new(j, "target", json_real(o->to_auc));
    json_object_set_new(j, "batch", json_integer(o->ta_batch));
    json_object_set_new(j, "lr", json_real(o->ta_lr));
    json_object_set_new(j, "warmup", json_integer(o->ta_warmup));
    json_object_set_new(j, "eval_every", json_integer(o->ta_every));
    json_object_set_new(j, "eval_samples", json_integer(ds->n[1]));
    json_object_set_new(j, "precision", json_string(o->ta_precision));
    if (tr.reference.n) json_object_set_new(j, "teacher_auc", json_real(tr.reference.value[0]));
    json_t *pj = json_object();
    long st = tr.reached ? tr.reached_step : tr.steps_done;
    json_object_set_new(pj, "reached", json_boolean(tr.reached));
    if (tr.reached) json_object_set_new(pj, "reached_s", json_real(tr.reached_s));
    json_object_set_new(pj, "steps", json_integer(st));
    json_object_set_new(pj, "samples", json_integer((json_int_t)st * o->ta_batch));
    json_object_set_new(pj, "eval_s", json_real(tr.eval_s));
    json_object_set_new(pj, "setup_s", json_real(tr.setup_s));
    if (isfinite(auc)) json_object_set_new(pj, "auc", json_real(auc));
    json_object_set_new(pj, "samples_per_s", json_real(tr.samples_per_s));
    json_object_set_new(j, "plumb", pj);
    if (o->vs_pytorch) {
        struct ctr_config c;
        if ((rc = ctr_config_preset(o->preset, o->rows, &c, e))) {
            json_decref(j);
            return rc;
        }
        char trf[512], evf[512], pp[512], args[2000], why[256] = "";
        snprintf(pp, sizeof pp, "%s/ctr_ta_init.bin", o->workdir);
        snprintf(trf, sizeof trf, "%s/ctr_ta_train.bin", o->workdir);
        snprintf(evf, sizeof evf, "%s/ctr_ta_eval.bin", o->workdir);
        /* the same samples: the whole train pool and the eval split, in index order */
        rc = write_params(pp, &c, 21, e);
        if (!rc) rc = write_batches(trf, ds, 0, c.rows, ds->n[0], 0, o->ta_batch, e);
        if (!rc) rc = write_batches(evf, ds, 1, c.rows, ds->n[1], 0, o->ta_batch, e);
        if (rc) {
            json_decref(j);
            return rc;
        }
        json_t *tj = json_array();
        char mbuf[64], *modes[2];
        int nm = args_split_list(o->ta_modes, mbuf, sizeof mbuf, modes, 2);
        for (int k = 0; k < nm; k++) {
            snprintf(args, sizeof args, "--train-file %s --eval-file %s --init-file %s --rows %ld --batch %ld --lr %g "
                     "--warmup %ld --target %.17g --eval-every %ld --max-steps %ld --precision %s --mode %s --workers %ld",
                     trf, evf, pp, o->rows, o->ta_batch, o->ta_lr, o->ta_warmup, o->to_auc, o->ta_every, o->ta_max,
                     o->ta_precision, modes[k], o->ta_workers);
            json_t *r = run_script_json(o, o->ta_script, args, why, sizeof why);
            if (!r) {
                log_warn("bench ctr: pytorch to-auc (%s): %s", modes[k], why);
                continue;
            }
            int reached = json_is_true(json_object_get(r, "reached"));
            double rs = jsonx_num(r, "reached_s");
            printf("  %-16s %s at step %.0f (%.0f samples): %.2f s (evals %.2f s; set-up %.2f s apart), AUC %.5f%s\n",
                   modes[k][0] == 'c' ? "pytorch compile" : "pytorch eager", reached ? "reached" : "NOT reached",
                   jsonx_num(r, "steps"), jsonx_num(r, "samples"), rs, jsonx_num(r, "eval_s"), jsonx_num(r, "setup_s"),
                   jsonx_num(r, "auc"), "");
            if (reached && tr.reached && tr.reached_s > 0)
                printf("  %-16s plumb is %.2fx faster to AUC %.4f\n", "", rs / tr.reached_s, o->to_auc);
            if (reached && tr.reached) json_object_set_new(r, "plumb_speedup", json_real(rs / tr.reached_s));
            json_array_append_new(tj, r);
        }
        json_object_set_new(j, "pytorch", tj);
    }
    json_object_set_new(out, "to_auc", j);
    return PLUMB_OK;
}

int bench_ctr(int argc, char **argv)
{
    struct opts o;
    memset(&o, 0, sizeof o);
    const struct opt opts[] = {
        {"--device", OPT_STR, &o.device, "cuda", "device: cpu, cuda[:N], hip[:N]", NULL, "DEV"},
        {"--preset", OPT_CHOICE, &o.preset, "dlrm-kaggle", "model preset", "dlrm-kaggle|ctr-tiny", NULL},
        {"--rows", OPT_INT, &o.rows, "1000000", "rows of every embedding table", "1..100000000", "N"},
        {"--precision", OPT_STR, &o.precisions, "fp32,bf16", "precisions to measure (fp32, bf16, fp16)", NULL, "LIST"},
        {"--batch", OPT_STR, &o.batches, "2048,32768", "batch sizes to measure", NULL, "LIST"},
        {"--steps", OPT_INT, &o.steps, "200", "timed steps per measurement", "1..1000000", "N"},
        {"--warmup", OPT_INT, &o.warmup, "30", "untimed steps first", "0..100000", "N"},
        {"--leak-steps", OPT_INT, &o.leak_steps, "1000", "steps after warm-up for the leak check (0: skip)", "0..10000000", "N"},
        {"--pool", OPT_INT, &o.pool, "1048576", "synthetic training samples generated into memory first", "1024..100000000", "N"},
        {"--threads", OPT_INT, &o.threads, "8", "host threads building batches in the data plane", "1..256", "N"},
        {"--lr", OPT_DOUBLE, &o.lr, "0.1", "SGD learning rate", NULL, NULL},
        {"--comm", OPT_CHOICE, &o.comm, "none", "dense-gradient all-reduce in the step: none or nccl (world of the launch)",
         "none|nccl", NULL},
        {"--fuse-sgd", OPT_CHOICE, &o.fuse, "auto",
         "sparse SGD fused into the embedding backward (auto: where the device has it and the world is 1)", "auto|no", NULL},
        {"--vs-pytorch", OPT_FLAG, &o.vs_pytorch, NULL, "also run the PyTorch reference on the same batches", NULL, NULL},
        {"--torch-modes", OPT_STR, &o.torch_modes, "eager,compile", "PyTorch modes to run with --vs-pytorch", NULL, "LIST"},
        {"--no-throughput", OPT_FLAG, &o.no_throughput, NULL, "skip the throughput table (only the golden/AUC checks)", NULL, NULL},
        {"--python", OPT_STR, &o.python, "python3", "python with torch for --vs-pytorch", NULL, "EXE"},
        {"--pytorch-script", OPT_STR, &o.script, "bench/ctr_pytorch_gpu.py", "the PyTorch reference script", NULL, "FILE"},
        {"--workdir", OPT_STR, &o.workdir, "/tmp", "where batch files for the PyTorch script are written", NULL, "DIR"},
        {"--golden-steps", OPT_INT, &o.golden_steps, "0", "golden digest check: steps on cpu and device (0: skip)", "0..100000", "N"},
        {"--golden-batch", OPT_INT, &o.golden_batch, "2048", "batch of the golden digest check", "1..1000000", "N"},
        {"--golden-rows", OPT_INT, &o.golden_rows, "1000", "table rows of the golden digest check", "1..100000000", "N"},
        {"--auc-steps", OPT_INT, &o.auc_steps, "0", "fast-mode AUC check: training steps (0: skip)", "0..10000000", "N"},
        {"--auc-batch", OPT_INT, &o.auc_batch, "2048", "batch of the AUC check", "1..1000000", "N"},
        {"--auc-precision", OPT_STR, &o.auc_precision, "fp32", "precision of the AUC check (fp32 or bf16; PyTorch: bf16 autocast)", NULL, "P"},
        {"--auc-eval", OPT_INT, &o.auc_eval, "131072", "eval samples of the AUC check", "1024..100000000", "N"},
        {"--to-auc", OPT_DOUBLE, &o.to_auc, "0", "time to quality: train until the eval AUC reaches X, in (0, 1) (0: skip), "
         "plumb and (with --vs-pytorch) PyTorch's own loop", NULL, "X"},
        {"--to-auc-batch", OPT_INT, &o.ta_batch, "2048", "--to-auc: batch", "1..1000000", "N"},
        {"--to-auc-lr", OPT_DOUBLE, &o.ta_lr, "0.1", "--to-auc: SGD learning rate (after the warm-up)", NULL, "X"},
        {"--to-auc-warmup", OPT_INT, &o.ta_warmup, "100", "--to-auc: linear lr warm-up steps", "0..1000000", "N"},
        {"--to-auc-every", OPT_INT, &o.ta_every, "250", "--to-auc: steps between evals (on --auc-eval samples)",
         "1..1000000", "N"},
        {"--to-auc-max-steps", OPT_INT, &o.ta_max, "20000", "--to-auc: give up after N steps", "1..100000000", "N"},
        {"--to-auc-precision", OPT_STR, &o.ta_precision, "fp32", "--to-auc: fp32 or bf16", NULL, "P"},
        {"--to-auc-torch-modes", OPT_STR, &o.ta_modes, "eager", "--to-auc: PyTorch modes (eager, compile)", NULL, "LIST"},
        {"--to-auc-workers", OPT_INT, &o.ta_workers, "4", "--to-auc: PyTorch DataLoader workers", "0..64", "N"},
        {"--to-auc-script", OPT_STR, &o.ta_script, "bench/ctr_to_auc_pytorch.py", "--to-auc: the PyTorch loop", NULL,
         "FILE"},
        {"--json", OPT_STR, &o.json, NULL, "write the figures as JSON to this file", NULL, "FILE"},
        {0},
    };
    plumb_err e = {0};
    int rc = args_parse("plumb bench ctr [options]",
                        "DLRM training throughput (samples/s) per precision and batch with the step split into\n"
                        "data / forward / backward / communication / optimizer, device memory and a leak check;\n"
                        "--vs-pytorch runs the PyTorch reference on the same device and batches; --golden-steps\n"
                        "and --auc-steps add the golden digest and fast-AUC comparisons with the cpu.",
                        opts, argc, argv, NULL, 0, NULL, &e);
    if (rc == ARGS_HELP) return 0;
    if (rc) return cli_fail("bench ctr", &e);
    if (o.json && file_check_output("--json", o.json, &e)) return cli_fail("bench ctr", &e);
    /* an AUC lies in [0, 1] and no model ranks the teacher's Bernoulli labels
     * perfectly: 1 and above (and any negative value) can only be a mistake */
    if (o.to_auc < 0 || o.to_auc >= 1) {
        err_set(&e, PLUMB_EUSAGE, "--to-auc: %g (expected 0 to skip, or a target AUC between 0 and 1; the synthetic "
                "teacher's own AUC is about 0.78)", o.to_auc);
        return cli_fail("bench ctr", &e);
    }
    /* --lr through the trainer's option table (its range, its name) before anything runs */
    {
        char lr[32];
        snprintf(lr, sizeof lr, "%.17g", o.lr);
        const char *w[] = {"--preset", o.preset, "--lr", lr, NULL, NULL};
        struct train_config c;
        if (bench_train_config(w, &c, &e)) return cli_fail("bench ctr", &e);
    }
    if (o.to_auc > 0 && !(o.ta_lr > 0)) {
        err_set(&e, PLUMB_EUSAGE, "--to-auc-lr: %g (expected > 0)", o.ta_lr);
        return cli_fail("bench ctr", &e);
    }
    /* the PyTorch side's batch files go to --workdir: made or refused now, not
     * after plumb's half of a --to-auc run ("cannot write DIR/ctr_ta_init.bin") */
    if (o.vs_pytorch && file_check_output_dir("--workdir", o.workdir, &e)) return cli_fail("bench ctr", &e);
    char pbuf[128], bbuf[256], *plist[4], *blist[16];
    int np = args_split_list(o.precisions, pbuf, sizeof pbuf, plist, 4);
    int nbt = args_split_list(o.batches, bbuf, sizeof bbuf, blist, 16);
    if (np < 1 || nbt < 1) {
        err_set(&e, PLUMB_EUSAGE, "--precision/--batch: empty or too long a list (at most 4 and 16 entries)");
        return cli_fail("bench ctr", &e);
    }
    if (strcmp(o.auc_precision, "fp32") && strcmp(o.auc_precision, "bf16")) {
        err_set(&e, PLUMB_EUSAGE, "--auc-precision: '%s' (expected fp32 or bf16)", o.auc_precision);
        return cli_fail("bench ctr", &e);
    }
    dtype_t precs[4];
    long bs[16];
    for (int i = 0; i < np; i++) {
        if (!strcmp(plist[i], "fp32")) precs[i] = DT_F32;
        else if (!strcmp(plist[i], "bf16")) precs[i] = DT_BF16;
        else if (!strcmp(plist[i], "fp16")) precs[i] = DT_F16;
        else {
            err_set(&e, PLUMB_EUSAGE, "--precision: '%s' is not fp32, bf16 or fp16", plist[i]);
            return cli_fail("bench ctr", &e);
        }
    }
    for (int i = 0; i < nbt; i++) {
        char *end;
        bs[i] = strtol(blist[i], &end, 10);
        /* at most the trainer's --micro-shard range: a step runs its batch as one micro-shard */
        if (*end || bs[i] < 1 || bs[i] > 1000000) {
            err_set(&e, PLUMB_EUSAGE, "--batch: '%s' is not a batch size in 1..1000000", blist[i]);
            return cli_fail("bench ctr", &e);
        }
        if (bs[i] > o.pool && !o.no_throughput) {
            err_set(&e, PLUMB_EUSAGE, "--batch %ld is larger than --pool %ld", bs[i], o.pool);
            return cli_fail("bench ctr", &e);
        }
    }
    int fail = 0;
    o.nccl = !strcmp(o.comm, "nccl");
    struct dev *d = NULL;
    if ((rc = dev_open_or_cpu(o.device, &d, &e))) return cli_fail("bench ctr", &e);
    struct comm *hc = NULL;
    /* the trainer's comm: the launch's world for --comm nccl (the trainer
     * then reduces the gradients over NCCL/RCCL), else this process alone */
    if ((rc = comm_init(o.nccl ? "auto" : "self", &hc, &e))) {
        dev_close(d);
        return cli_fail("bench ctr", &e);
    }
    /* the data: the synthetic teacher of data seed 1 (the trainer generates
     * its pool into memory; this copy builds the fixed device batches and
     * the PyTorch files, the same samples) */
    struct dataset *dsp = NULL;
    double tp = now();
    long neval = o.auc_steps || o.to_auc > 0 ? o.auc_eval : 1024;
    struct data_opts dop = {.seed = 1, .train_samples = o.pool, .eval_samples = neval};
    rc = dataset_open("synthetic", &dop, &dsp, &e);
    if (rc) {
        comm_finalize(hc);
        dev_close(d);
        return cli_fail("bench ctr", &e);
    }
    struct dataset ds = *dsp;
    snprintf(ds.desc, sizeof ds.desc, "synthetic teacher, %ld train + %ld eval samples (generated into memory by the trainer)",
             o.pool, neval);
    char det[2048];
    d->be->describe_determinism(d, det, sizeof det);
    printf("device   %s (%s, %s)\ndriver   %s\nlibs     %s\ndata     %s (opened in %.1f s)\n", d->label, d->info.name,
           d->info.arch, d->info.driver, d->info.libs, ds.desc, now() - tp);
    if (o.nccl) printf("comm     %d ranks, the trainer's --comm nccl\n", hc->world);
    json_t *root = json_object(), *res = json_array();
    json_object_set_new(root, "env", bench_env(stdout));
    json_object_set_new(root, "schema", json_string("plumb.bench.ctr/1"));
    json_object_set_new(root, "device", json_string(d->label));
    json_object_set_new(root, "name", json_string(d->info.name));
    json_object_set_new(root, "driver", json_string(d->info.driver));
    json_object_set_new(root, "libs", json_string(d->info.libs));
    json_object_set_new(root, "determinism", json_string(det));
    json_object_set_new(root, "preset", json_string(o.preset));
    json_object_set_new(root, "rows", json_integer(o.rows));
    json_object_set_new(root, "steps", json_integer(o.steps));
    json_object_set_new(root, "method",
                        json_string("whole steps: --steps steps of the trainer's step (train/trainer.h, the "
                                    "one training loop: forward+backward, the status all-reduce, gradient checks, "
                                    "optimizer) back to back, host time to the final synchronisation (as the PyTorch "
                                    "reference times with events over all steps; a queued step's outcome is read "
                                    "one step behind, graphs replayed where the device has them); device: batches already on the device; loader: the trainer's own "
                                    "data path (sampler -> pinned -> H2D copy stream); split: a forward-only pass "
                                    "then the step, each followed by a synchronisation, backward = the step's "
                                    "forward+backward phase - forward-only pass, optimizer = the rest of the step "
                                    "to the synchronisation; memory from the caching allocator"));
    if (o.golden_steps > 0) {
        rc = golden_check(&o, hc, d->label, root, &e);
        if (rc == PLUMB_EFAIL) fail = 1, rc = 0;
        if (rc) goto out;
    }
    if (!o.no_throughput)
        printf("\n%-5s %6s | %10s %8s | %7s %7s %7s %7s %7s | %10s %6s | %8s %8s %5s | %9s %9s %6s %6s\n", "prec", "batch",
           "samples/s", "step ms", "data", "fwd", "bwd", "comm", "opt", "loader s/s", "ratio", "peak MiB", "rsv MiB",
           "leak", "torch eag", "torch cmp", "x eag", "x cmp");
    int want_eager = strstr(o.torch_modes, "eager") != NULL, want_compile = strstr(o.torch_modes, "compile") != NULL;
    for (int pi = 0; pi < np && !rc && !o.no_throughput; pi++)
        for (int bi = 0; bi < nbt && !rc; bi++) {
            struct timing t;
            rc = bench_config(&o, hc, &ds, precs[pi], bs[bi], &t, &e);
            if (rc) break;
            if (o.vs_pytorch) {
                char bf[512], args[1024];
                snprintf(bf, sizeof bf, "%s/ctr_bench_b%ld.bin", o.workdir, bs[bi]);
                struct ctr_config cc;
                ctr_config_preset(o.preset, o.rows, &cc, &e);
                rc = write_batches(bf, &ds, 0, cc.rows, (long)NB_DEV * bs[bi], 7, bs[bi], &e);
                if (rc) break;
                for (int mode = 0; mode < 2; mode++) {
                    if ((mode == 0 && !want_eager) || (mode == 1 && !want_compile)) continue;
                    snprintf(args, sizeof args, "--batch %ld --precision %s --mode %s --steps %ld --warmup %ld "
                             "--rows %ld --data-file %s --lr %g", bs[bi], plist[pi], mode ? "compile" : "eager",
                             o.steps, o.warmup, o.rows, bf, o.lr);
                    double v = 0;
                    if (run_torch(&o, args, "samples_per_s", &v, t.torch_err, sizeof t.torch_err))
                        log_warn("bench ctr: pytorch %s: %s", mode ? "compile" : "eager", t.torch_err);
                    if (mode) t.torch_compile = v;
                    else t.torch_eager = v;
                }
            }
            int leak = t.leak_steps > 0 && t.reserved_end != t.reserved_warm;
            printf("%-5s %6ld | %10.0f %8.3f | %7.3f %7.3f %7.3f %7.3f %7.3f | %10.0f %6.3f | %8.1f %8.1f %5s | %9.0f "
                   "%9.0f %6.2f %6.2f\n",
                   plist[pi], bs[bi], t.samples_s, t.step_dev_ms, t.data_ms, t.fwd_ms, t.bwd_ms, t.comm_ms, t.opt_ms,
                   t.samples_s_loader, t.step_loader_ms / t.step_dev_ms, t.peak_alloc / 1048576.0,
                   t.peak_reserved / 1048576.0, t.leak_steps ? (leak ? "LEAK" : "flat") : "-", t.torch_eager,
                   t.torch_compile, t.torch_eager > 0 ? t.samples_s / t.torch_eager : 0,
                   t.torch_compile > 0 ? t.samples_s / t.torch_compile : 0);
            fflush(stdout);
            fail |= leak;
            json_t *r = json_object();
            json_object_set_new(r, "precision", json_string(plist[pi]));
            json_object_set_new(r, "batch", json_integer(bs[bi]));
            json_object_set_new(r, "samples_per_s", json_real(t.samples_s));
            json_object_set_new(r, "sparse_sgd_fused", json_boolean(t.fused));
            json_object_set_new(r, "host_enqueue_ms", json_real(t.enqueue_ms));
            json_object_set_new(r, "host_queue_fwd_bwd_ms", json_real(t.host_fb_ms));
            json_object_set_new(r, "step_ms", json_real(t.step_dev_ms));
            json_object_set_new(r, "data_wait_ms", json_real(t.data_ms));
            json_object_set_new(r, "forward_ms", json_real(t.fwd_ms));
            json_object_set_new(r, "backward_ms", json_real(t.bwd_ms));
            json_object_set_new(r, "comm_ms", json_real(t.comm_ms));
            json_object_set_new(r, "optimizer_ms", json_real(t.opt_ms));
            json_object_set_new(r, "loader_samples_per_s", json_real(t.samples_s_loader));
            json_object_set_new(r, "loader_step_ms", json_real(t.step_loader_ms));
            json_object_set_new(r, "loader_over_device", json_real(t.step_loader_ms / t.step_dev_ms));
            json_object_set_new(r, "loader_build_ms_per_batch", json_real(t.loader_build_ms));
            json_object_set_new(r, "peak_allocated_bytes", json_integer((json_int_t)t.peak_alloc));
            json_object_set_new(r, "peak_reserved_bytes", json_integer((json_int_t)t.peak_reserved));
            json_object_set_new(r, "reserved_after_warmup", json_integer((json_int_t)t.reserved_warm));
            json_object_set_new(r, "reserved_after_leak_steps", json_integer((json_int_t)t.reserved_end));
            json_object_set_new(r, "allocated_after_warmup", json_integer((json_int_t)t.alloc_warm));
            json_object_set_new(r, "allocated_after_leak_steps", json_integer((json_int_t)t.alloc_end));
            json_object_set_new(r, "leak_steps", json_integer(t.leak_steps));
            json_object_set_new(r, "leak", json_boolean(leak));
            if (o.vs_pytorch) {
                json_object_set_new(r, "torch_eager_samples_per_s", json_real(t.torch_eager));
                json_object_set_new(r, "torch_compile_samples_per_s", json_real(t.torch_compile));
                json_object_set_new(r, "ratio_vs_eager", json_real(t.torch_eager > 0 ? t.samples_s / t.torch_eager : 0));
                json_object_set_new(r, "ratio_vs_compile",
                                    json_real(t.torch_compile > 0 ? t.samples_s / t.torch_compile : 0));
                if (t.torch_err[0]) json_object_set_new(r, "torch_error", json_string(t.torch_err));
            }
            json_array_append_new(res, r);
        }
    json_object_set(root, "results", res);
    if (!rc && o.auc_steps > 0) rc = auc_check(&o, hc, d->label, &ds, root, &e);
    if (!rc && o.to_auc > 0) rc = to_auc_check(&o, hc, d->label, &ds, root, &e);
out:
    if (!rc && o.json) rc = jsonx_write_file(o.json, root, &e);
    json_decref(res);
    json_decref(root);
    dataset_free(dsp);
    comm_finalize(hc);
    dev_close(d);
    if (rc) return cli_fail("bench ctr", &e);
    return fail ? 1 : 0;
}
