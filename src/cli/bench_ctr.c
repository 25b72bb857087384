/* plumb bench ctr: DLRM (WORKLOADS.md ctr) training throughput per precision
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
#include "comm/comm_nccl.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "core/philox.h"
#include "core/timer.h"
#include "dev/dev.h"
#include "dev/train_ops.h"
#include "models/ctr.h"
#include "train/data.h"
#include "train/devfeed.h"
#include "train/evalm.h"
#include "train/sampler.h"
#include "train/synth.h"
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
    int vs_pytorch, no_throughput;
    const char *fuse;
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

/* In-memory synthetic pool: n samples of split `split` generated in parallel. */
static int pool_fill(struct synth *syn, int split, long n, struct criteo_sample **out, plumb_err *e)
{
    struct criteo_sample *p = malloc((size_t)n * sizeof *p);
    if (!p) return err_set(e, PLUMB_ENOMEM, "bench ctr: cannot hold %ld samples in memory", n);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) synth_sample(syn, split, (uint64_t)i, &p[i], NULL);
    *out = p;
    return PLUMB_OK;
}

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
            data_fill(ds, 0, idx, (int)batch, rows, *dense + i * B * CTR_N_DENSE, *sparse + i * B * CTR_N_TABLES,
                      *labels + i * B);
    }
    free(idx);
    sampler_free(&s);
    return rc;
}

struct devb {
    float *dense, *labels;
    uint32_t *sparse;
};

static int run_opt(struct ctr_model *m, long step, float lr, plumb_err *e)
{
    int64_t *rows;
    float *g;
    size_t n;
    ctr_sparse_grads(m, &rows, &g, &n);
    struct ctr_opt o = {CTR_OPT_SGD, lr, 0.0f, 0.9f, 0.999f, 1e-8f};
    return ctr_opt_step(m, &o, step, ctr_grads(m), rows, g, n, e);
}

/* One training step on device batch b: forward + backward (with the
 * sparse SGD fused into the embedding backward when fuse), the dense
 * all-reduce (nc), the optimizer. */
static int bench_step(struct ctr_model *m, const struct ctr_dev_batch *b, float gs, struct nccl_comm *nc, long step,
                      float lr, int fuse, plumb_err *e)
{
    int rc = fuse ? ctr_fuse_sparse_sgd(m, lr, e) : PLUMB_OK;
    if (!rc) rc = ctr_forward_backward_dev(m, b, gs, NULL, e);
    if (!rc && nc) rc = nccl_allreduce_buckets(nc, ctr_grads(m), ctr_n_dense(m), NULL, "bench grads", e);
    if (!rc) rc = run_opt(m, step, lr, e);
    return rc;
}

/* ctr_init's definition evaluated on the host (core/philox.h), for devices
 * without Philox ops (the cpu backend until it has them). */
static int host_init(struct ctr_model *m, uint64_t seed, plumb_err *e)
{
    size_t n = ctr_n_params(m);
    float *p = calloc(n, sizeof(float));
    if (!p) return err_set(e, PLUMB_ENOMEM, "bench ctr: out of host memory for %zu params", n);
    for (int i = 0; i < ctr_n_tensors(m); i++) {
        const struct ctr_tensor *t = ctr_tensor(m, i);
        float *q = p + t->offset;
        if (t->is_table) {
            float bound = (float)sqrt(1.0 / (double)t->rows);
#pragma omp parallel for schedule(static)
            for (size_t k = 0; k < t->numel; k++)
                q[k] = fmaf(2.0f * bound, philox_uniform_at(seed, RNG_INIT, (uint32_t)i, 0, k), -bound);
        } else {
            double sd = strstr(t->name, ".weight") ? sqrt(2.0 / (double)(t->rows + t->cols)) : sqrt(1.0 / (double)t->cols);
            for (size_t k = 0; k < t->numel; k++)
                q[k] = fmaf((float)sd, philox_normal_at(seed, RNG_INIT, (uint32_t)i, 0, k), 0.0f);
        }
    }
    int rc = dev_upload(ctr_dev(m), ctr_params(m), p, n * sizeof(float), e);
    free(p);
    return rc;
}

/* A model on d initialised from host params `init` (n floats), or with
 * ctr_init(seed) when init is NULL; *init_out (optional) gets a malloc'ed
 * copy of the initial params, so another device can start from the same bits
 * (the cpu backend may have no Philox ops). */
static int model_make(struct dev *d, const struct ctr_config *c, long B, dtype_t prec, const float *init,
                      uint64_t seed, float **init_out, struct ctr_model **out, plumb_err *e)
{
    struct ctr_model *m = NULL;
    int rc = ctr_create(d, c, (int)B, prec, &m, e);
    if (rc) return rc;
    size_t n = ctr_n_params(m);
    if (init) rc = dev_upload(d, ctr_params(m), init, n * sizeof(float), e);
    else rc = d->ops->rng_normal ? ctr_init(m, seed, e) : host_init(m, seed, e);
    if (!rc && init_out) {
        *init_out = malloc(n * sizeof(float));
        if (!*init_out) rc = err_set(e, PLUMB_ENOMEM, "bench ctr: out of host memory for %zu params", n);
        else rc = dev_download(d, *init_out, ctr_params(m), n * sizeof(float), e);
    }
    if (rc) {
        ctr_free(m);
        return rc;
    }
    *out = m;
    return PLUMB_OK;
}

static float lr_at(double lr, long step, long warm) { return (float)(step < warm ? lr * (double)(step + 1) / warm : lr); }

/* One throughput configuration. */
static int bench_config(const struct opts *o, struct dev *d, struct nccl_comm *nc, const struct dataset *ds,
                        dtype_t prec, long batch, struct timing *t, plumb_err *e)
{
    memset(t, 0, sizeof *t);
    struct ctr_config c;
    int rc = ctr_config_preset(o->preset, o->rows, &c, e);
    if (rc) return rc;
    struct ctr_model *m = NULL;
    if ((rc = model_make(d, &c, batch, prec, NULL, 1, NULL, &m, e))) return rc;
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
    const float gs = 1.0f / (float)batch;
    long step = 0;
    float *grads = ctr_grads(m);
    size_t nd = ctr_n_dense(m);
    /* the sparse update fused into the backward: one rank (the bench
     * exchanges only dense gradients), plain SGD, nothing reads the list */
    const int fuse = strcmp(o->fuse, "no") && d->ops->train && d->ops->train->embedding_bwd_sgd &&
                     !nc;
    t->fused = fuse;
#define DB(i) (struct ctr_dev_batch){(int)batch, (int)batch, db[(i) % NB_DEV].dense, db[(i) % NB_DEV].sparse, db[(i) % NB_DEV].labels}
    /* warm-up */
    for (long i = 0; i < o->warmup && !rc; i++, step++) {
        struct ctr_dev_batch b = DB(step);
        rc = bench_step(m, &b, gs, nc, step + 1, (float)o->lr, fuse, e);
    }
    struct dev_mem_stats ms;
    /* device-resident timing: whole steps */
    double t0 = now();
    for (long i = 0; i < o->steps && !rc; i++, step++) {
        struct ctr_dev_batch b = DB(step);
        rc = bench_step(m, &b, gs, nc, step + 1, (float)o->lr, fuse, e);
    }
    /* steps are queued back to back (nothing in a step waits for the host,
     * as in the PyTorch reference, which times with events over all steps) */
    double enq = now() - t0; /* the host's time to queue the steps */
    if (!rc) rc = dev_sync(d, e);
    double whole = now() - t0;
    t->enqueue_ms = 1e3 * enq / (double)o->steps;
    t->step_dev_ms = 1e3 * whole / (double)o->steps;
    t->samples_s = (double)batch * (double)o->steps / whole;
    /* split: forward-only, forward+backward, comm, optimizer timed apart */
    double tf = 0, tfb = 0, tc = 0, to = 0, tq = 0;
    for (long i = 0; i < o->steps && !rc; i++, step++) {
        struct ctr_dev_batch b = DB(step);
        double a = now();
        rc = ctr_forward_dev(m, &b, e);
        double b1 = now();
        if (!rc && fuse) rc = ctr_fuse_sparse_sgd(m, (float)o->lr, e);
        if (!rc) rc = ctr_forward_backward_dev(m, &b, gs, NULL, e);
        tq += now() - b1; /* queued from an empty queue: the host's own cost */
        if (!rc && fuse) rc = dev_sync(d, e); /* a fused backward returns unsynchronised */
        double c1 = now();
        if (!rc && nc) rc = nccl_allreduce_buckets(nc, grads, nd, NULL, "bench grads", e);
        double d1 = now();
        if (!rc) rc = run_opt(m, step + 1, (float)o->lr, e);
        if (!rc) rc = dev_sync(d, e);
        double e1 = now();
        tf += b1 - a, tfb += c1 - b1, tc += d1 - c1, to += e1 - d1;
    }
    double ns = (double)o->steps;
    t->fwd_ms = 1e3 * tf / ns;
    t->bwd_ms = 1e3 * (tfb - tf) / ns;
    t->comm_ms = 1e3 * tc / ns;
    t->opt_ms = 1e3 * to / ns;
    t->host_fb_ms = 1e3 * tq / ns;
    /* loader timing: the GPU data plane */
    if (!rc) {
        struct sampler *s = calloc(1, sizeof *s);
        struct devfeed *f = NULL;
        rc = s ? sampler_init(s, ds->n[0], batch, (int)batch, 11, 1, e) : err_set(e, PLUMB_ENOMEM, "out of memory");
        if (!rc) rc = devfeed_start(d, ds, 0, s, c.rows, 0, 1, 0, o->steps + o->warmup, 4, (int)o->threads, &f, e);
        double wait_tot = 0, tl = 0;
        for (long i = 0; i < o->steps + o->warmup && !rc; i++, step++) {
            if (i == o->warmup) {
                tl = now();
                wait_tot = 0;
            }
            struct ctr_dev_batch b;
            double w;
            rc = devfeed_next(f, &b, NULL, &w, e);
            if (!rc) rc = bench_step(m, &b, gs, nc, step + 1, (float)o->lr, fuse, e);
            devfeed_release(f);
            wait_tot += w;
        }
        if (!rc) rc = dev_sync(d, e);
        if (!rc) {
            double el = now() - tl;
            t->step_loader_ms = 1e3 * el / ns;
            t->samples_s_loader = (double)batch * ns / el;
            t->data_ms = 1e3 * wait_tot / ns;
            double bs = 0, cs = 0;
            devfeed_times(f, &bs, &cs);
            t->loader_build_ms = 1e3 * bs / (ns + (double)o->warmup);
        }
        if (f) devfeed_stop(f);
        else if (s) sampler_free(s);
        if (f) sampler_free(s);
        free(s);
    }
    /* leak check: everything above has run at least once, so the cache is warm */
    dev_mem_stats(d, &ms);
    t->reserved_warm = ms.reserved;
    t->alloc_warm = ms.allocated;
    for (long i = 0; i < o->leak_steps && !rc; i++, step++) {
        struct ctr_dev_batch b = DB(step);
        rc = bench_step(m, &b, gs, nc, step + 1, (float)o->lr, fuse, e);
    }
#undef DB
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
    ctr_free(m);
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
    if (!rc && split == 0) {
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
    if (!rc) {
        data_fill(ds, split, idx, (int)n, rows, dense, sp, lab);
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

/* Golden digest: --golden-steps steps of golden training on cpu and device. */
static int golden_check(const struct opts *o, struct dev *d, const struct dataset *ds, json_t *out, plumb_err *e)
{
    struct ctr_config c;
    int rc = ctr_config_preset(o->preset, o->golden_rows, &c, e);
    if (rc) return rc;
    char hex[2][65];
    double secs[2];
    struct dev *devs[2] = {d, NULL};
    if ((rc = dev_open("cpu", &devs[1], e))) return rc;
    long B = o->golden_batch;
    float *hd = NULL, *hl = NULL, *init = NULL;
    uint32_t *hs = NULL;
    int nb = 16;
    rc = host_batches(ds, c.rows, B, nb, 3, &hd, &hs, &hl, e);
    int fused[2] = {strcmp(o->fuse, "no") && devs[0]->ops->train && devs[0]->ops->train->embedding_bwd_sgd, 0};
    for (int k = 0; k < 2 && !rc; k++) {
        struct dev *dd = devs[k];
        if ((rc = dev_set_numerics(dd, NUMERICS_GOLDEN, 0, e))) break;
        struct ctr_model *m = NULL;
        if ((rc = model_make(dd, &c, B, DT_F32, init, 5, init ? NULL : &init, &m, e))) break;
        double t0 = now();
        for (long s = 0; s < o->golden_steps && !rc; s++) {
            int i = (int)(s % nb);
            struct ctr_batch b = {(int)B, (int)B, hd + (size_t)i * B * CTR_N_DENSE, hs + (size_t)i * B * CTR_N_TABLES,
                                  hl + (size_t)i * B};
            /* the device side with the fused sparse SGD where it has one:
             * its digest must still equal the cpu's unfused one */
            const float lr = lr_at(o->lr, s, 10);
            if (fused[k]) rc = ctr_fuse_sparse_sgd(m, lr, e);
            if (!rc) rc = ctr_forward_backward(m, &b, 1.0f / (float)B, NULL, e);
            if (!rc) rc = run_opt(m, s + 1, lr, e);
        }
        secs[k] = now() - t0;
        if (!rc) rc = ctr_param_digest(m, hex[k], e);
        ctr_free(m);
        if (!rc) rc = dev_set_numerics(dd, NUMERICS_FAST, 0, e);
    }
    free(init);
    free(hd), free(hs), free(hl);
    dev_close(devs[1]);
    if (rc) return rc;
    int same = !strcmp(hex[0], hex[1]);
    printf("\ngolden %s rows=%ld batch=%ld steps=%ld fp32 SGD (same initial params):\n  %-8s %s (%.1f s)%s\n"
           "  %-8s %s (%.1f s)  %s\n",
           o->preset, o->golden_rows, B, o->golden_steps, d->label, hex[0], secs[0],
           fused[0] ? " sparse SGD fused" : "", "cpu", hex[1], secs[1], same ? "EQUAL" : "DIFFERENT");
    json_t *j = json_object();
    json_object_set_new(j, "preset", json_string(o->preset));
    json_object_set_new(j, "rows", json_integer(o->golden_rows));
    json_object_set_new(j, "batch", json_integer(B));
    json_object_set_new(j, "steps", json_integer(o->golden_steps));
    json_object_set_new(j, "digest_device", json_string(hex[0]));
    json_object_set_new(j, "digest_cpu", json_string(hex[1]));
    json_object_set_new(j, "equal", json_boolean(same));
    json_object_set_new(j, "device_sparse_sgd_fused", json_boolean(fused[0]));
    json_object_set_new(out, "golden", j);
    return same ? PLUMB_OK : PLUMB_EFAIL;
}

/* Fast-mode AUC after --auc-steps steps at --auc-batch on the eval pool. */
/* The initial parameters in tensor order (each tensor's floats, no padding),
 * for the PyTorch reference to start from the same point. */
static int write_params(const char *path, struct ctr_model *m, const float *p, plumb_err *e)
{
    FILE *f = fopen(path, "wb");
    if (!f) return err_set(e, PLUMB_EIO, "bench ctr: cannot write %s", path);
    int rc = PLUMB_OK;
    for (int i = 0; i < ctr_n_tensors(m) && !rc; i++) {
        const struct ctr_tensor *t = ctr_tensor(m, i);
        if (fwrite(p + t->offset, sizeof(float), t->numel, f) != t->numel)
            rc = err_set(e, PLUMB_EIO, "bench ctr: short write to %s", path);
    }
    if (fclose(f) && !rc) rc = err_set(e, PLUMB_EIO, "bench ctr: cannot close %s", path);
    return rc;
}

static int auc_on(struct dev *d, const struct opts *o, const struct ctr_config *c, const struct dataset *ds,
                  const float *init, float **init_out, const char *params_path, double *auc, plumb_err *e)
{
    long B = o->auc_batch;
    struct ctr_model *m = NULL;
    int rc = dev_set_numerics(d, NUMERICS_FAST, 0, e);
    const dtype_t prec = strcmp(o->auc_precision, "bf16") ? DT_F32 : DT_BF16;
    if (!rc) rc = model_make(d, c, B, prec, init, 21, init_out, &m, e);
    if (!rc && params_path && init_out) rc = write_params(params_path, m, *init_out, e);
    struct sampler s;
    if (!rc) rc = sampler_init(&s, ds->n[0], B, (int)B, 13, 1, e);
    uint32_t *idx = malloc((size_t)B * 4);
    float *dense = malloc((size_t)B * CTR_N_DENSE * 4), *lab = malloc((size_t)B * 4), *sc = malloc((size_t)B * 4);
    uint32_t *sp = malloc((size_t)B * CTR_N_TABLES * 4);
    int shv[4];
    for (long st = 0; st < o->auc_steps && !rc; st++) {
        struct sampler_step ss;
        rc = sampler_get(&s, st, 0, 1, &ss, idx, shv, e);
        if (rc) break;
        data_fill(ds, 0, idx, (int)B, c->rows, dense, sp, lab);
        struct ctr_batch b = {(int)B, (int)B, dense, sp, lab};
        rc = ctr_forward_backward(m, &b, 1.0f / (float)B, NULL, e);
        if (!rc) rc = run_opt(m, st + 1, lr_at(o->lr, st, 100), e);
    }
    long ne = ds->n[1];
    float *scores = malloc((size_t)ne * 4), *labels = malloc((size_t)ne * 4);
    for (long i0 = 0; i0 < ne && !rc; i0 += B) {
        long k = ne - i0 < B ? ne - i0 : B;
        for (long i = 0; i < k; i++) idx[i] = (uint32_t)(i0 + i);
        data_fill(ds, 1, idx, (int)k, c->rows, dense, sp, lab);
        struct ctr_batch b = {(int)k, (int)k, dense, sp, lab};
        rc = ctr_predict(m, &b, sc, NULL, NULL, e);
        memcpy(scores + i0, sc, (size_t)k * 4);
        memcpy(labels + i0, lab, (size_t)k * 4);
    }
    if (!rc) *auc = eval_auc(scores, labels, (size_t)ne);
    free(idx), free(dense), free(lab), free(sc), free(sp), free(scores), free(labels);
    if (m) ctr_free(m);
    sampler_free(&s);
    return rc;
}

static int auc_check(const struct opts *o, struct dev *d, const struct dataset *ds, json_t *out, plumb_err *e)
{
    struct ctr_config c;
    int rc = ctr_config_preset(o->preset, o->rows, &c, e);
    if (rc) return rc;
    double a_dev = NAN, a_cpu = NAN, a_torch = NAN;
    double t0 = now();
    float *init = NULL;
    char pp[512];
    snprintf(pp, sizeof pp, "%s/ctr_auc_init.bin", o->workdir);
    if ((rc = auc_on(d, o, &c, ds, NULL, &init, o->vs_pytorch ? pp : NULL, &a_dev, e))) return rc;
    double t1 = now();
    struct dev *cpu = NULL;
    if (!strcmp(d->label, "cpu")) a_cpu = a_dev;
    else {
        rc = dev_open("cpu", &cpu, e);
        if (!rc) rc = auc_on(cpu, o, &c, ds, init, NULL, NULL, &a_cpu, e);
        if (cpu) dev_close(cpu);
        if (rc) {
            free(init);
            return rc;
        }
    }
    double t2 = now();
    free(init);
    char why[256] = "";
    if (o->vs_pytorch) {
        char tr[512], ev[512], args[1600];
        snprintf(tr, sizeof tr, "%s/ctr_auc_train.bin", o->workdir);
        snprintf(ev, sizeof ev, "%s/ctr_auc_eval.bin", o->workdir);
        rc = write_batches(tr, ds, 0, c.rows, o->auc_steps * o->auc_batch, 13, o->auc_batch, e);
        if (!rc) rc = write_batches(ev, ds, 1, c.rows, ds->n[1], 0, o->auc_batch, e);
        if (rc) return rc;
        snprintf(args, sizeof args, "--auc --train-file %s --eval-file %s --init-file %s --batch %ld --rows %ld --lr %g "
                 "--warmup-lr-steps 100 --precision %s", tr, ev, pp, o->auc_batch, o->rows, o->lr, o->auc_precision);
        if (run_torch(o, args, "auc", &a_torch, why, sizeof why)) log_warn("bench ctr: pytorch auc: %s", why);
    }
    printf("\nfast %s AUC after %ld steps of batch %ld (lr %g, 100 warm-up steps), %ld eval samples:\n"
           "  %-8s %.5f (%.1f s)\n  %-8s %.5f (%.1f s)   |diff| %.5f\n  (all from the same initial parameters)\n",
           o->auc_precision, o->auc_steps, o->auc_batch, o->lr, ds->n[1],
           d->label, a_dev, t1 - t0, "cpu", a_cpu, t2 - t1, fabs(a_dev - a_cpu));
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
        if (*end || bs[i] < 1 || bs[i] > 4000000) {
            err_set(&e, PLUMB_EUSAGE, "--batch: '%s' is not a batch size in 1..4000000", blist[i]);
            return cli_fail("bench ctr", &e);
        }
        if (bs[i] > o.pool && !o.no_throughput) {
            err_set(&e, PLUMB_EUSAGE, "--batch %ld is larger than --pool %ld", bs[i], o.pool);
            return cli_fail("bench ctr", &e);
        }
    }
    int fail = 0;
    struct dev *d = NULL;
    if ((rc = dev_open_or_cpu(o.device, &d, &e))) return cli_fail("bench ctr", &e);
    if ((rc = dev_set_numerics(d, NUMERICS_FAST, 0, &e))) {
        dev_close(d);
        return cli_fail("bench ctr", &e);
    }
    struct comm *hc = NULL;
    struct nccl_comm *nc = NULL;
    if (!strcmp(o.comm, "nccl")) {
        rc = comm_init("auto", &hc, &e);
        if (!rc) rc = nccl_comm_init(hc, d, 300.0, &nc, &e);
        if (rc) {
            if (hc) comm_finalize(hc);
            dev_close(d);
            return cli_fail("bench ctr", &e);
        }
        printf("comm     %s\n", nccl_describe(nc));
    }
    /* the data pool */
    struct synth *syn = NULL;
    struct dataset ds;
    memset(&ds, 0, sizeof ds);
    double tp = now();
    rc = synth_create(1, &syn, &e);
    long neval = o.auc_steps ? o.auc_eval : 1024;
    if (!rc) rc = pool_fill(syn, SYNTH_TRAIN, o.pool, &ds.mem[0], &e);
    if (!rc) rc = pool_fill(syn, SYNTH_EVAL, neval, &ds.mem[1], &e);
    ds.n[0] = o.pool;
    ds.n[1] = neval;
    snprintf(ds.desc, sizeof ds.desc, "synthetic teacher, %ld train + %ld eval samples in memory", o.pool, neval);
    if (rc) goto done;
    char det[2048];
    d->be->describe_determinism(d, det, sizeof det);
    printf("device   %s (%s, %s)\ndriver   %s\nlibs     %s\ndata     %s (generated in %.1f s)\n", d->label, d->info.name,
           d->info.arch, d->info.driver, d->info.libs, ds.desc, now() - tp);
    json_t *root = json_object(), *res = json_array();
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
                        json_string("whole steps: --steps steps queued back to back, host time to the final "
                                    "synchronisation (as the PyTorch reference times with events over all steps); "
                                    "device: batches already on the device; loader: sampler -> pinned -> H2D copy "
                                    "stream; split: host timers around calls each followed by a synchronisation, "
                                    "backward = forward_backward - forward-only pass; memory from the caching "
                                    "allocator"));
    if (o.golden_steps > 0) {
        rc = golden_check(&o, d, &ds, root, &e);
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
            rc = bench_config(&o, d, nc, &ds, precs[pi], bs[bi], &t, &e);
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
    if (!rc && o.auc_steps > 0) rc = auc_check(&o, d, &ds, root, &e);
out:
    if (!rc && o.json) rc = jsonx_write_file(o.json, root, &e);
    json_decref(res);
    json_decref(root);
done:
    free(ds.mem[0]);
    free(ds.mem[1]);
    if (syn) synth_free(syn);
    if (nc) nccl_comm_free(nc);
    if (hc) comm_finalize(hc);
    dev_close(d);
    if (rc) return cli_fail("bench ctr", &e);
    return fail ? 1 : 0;
}
