/* plumb bench resnet: ResNet training throughput (images/s) per precision
 * and batch on any device, through the trainer's own step (train/trainer.h:
 * trainer_open, trainer_step_on, trainer_steps: the one training loop), with
 * the step split into data / forward / backward / communication / optimizer,
 * device memory and a leak check; --vs-pytorch runs bench/resnet_torch.py
 * (the same ResNets defined in the script, channels_last, bf16/fp16
 * autocast, eager and torch.compile) on the same device in the same run and
 * prints the ratios; --golden-steps adds the golden digest of a short run on
 * the device against the cpu's.
 *
 * Method (as plumb bench ctr, src/cli/bench_ctr.c). Data: the workload's own
 * source (models/resnet: synthetic CIFAR for the 32x32 presets, the
 * synthetic 224x224 source for the ImageNet-stem ones); NB_DEV batches of
 * it in sampler order are uploaded first. "device" timing: --steps trainer
 * steps cycling through those batches back to back, one synchronisation at
 * the end (as the PyTorch script times its loop); "loader": the same number
 * of steps fed by the trainer's data path (the device feed on a GPU). Split
 * (bench_split.c): forward and backward = device time between the trainer's
 * marks (the forward to the logits; the loss counts with the backward),
 * graph replays included; where the device cannot mark, forward = the
 * model's training forward alone (model_ops.forward: batch statistics, no
 * backward, running statistics untouched) and backward = the step's
 * forward+backward phase - forward; communication = the step's gradient
 * exchange (none on one rank), optimizer = the rest of the step to a
 * synchronisation, timed on the host around calls followed by a
 * synchronisation. Memory: the caching allocator's counters; leak check:
 * reserved bytes after warm-up equal reserved bytes after --leak-steps more
 * steps. The PyTorch side trains on random inputs already on the device
 * (the same shapes), SGD momentum 0.9, weight decay 5e-4, as the trainer. */
#include "cli/bench.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "comm/comm.h"
#include "core/file.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "core/timer.h"
#include "dev/dev.h"
#include "models/resnet/resnet.h"
#include "models/workloads.h"
#include "train/options.h"
#include "train/sampler.h"
#include "train/trainer.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define NB_DEV 4 /* batches kept on the device for the "device" timing */

struct opts {
    const char *device, *preset, *precisions, *batches, *json, *python, *script, *torch_modes, *golden_preset, *data,
        *graph;
    long steps, warmup, pool, threads, leak_steps, golden_steps, golden_batch, torch_timeout;
    double lr;
    int vs_pytorch;
};

struct timing {
    double step_ms, loader_ms, data_ms, build_ms, enqueue_ms;
    struct bench_split split; /* forward, backward, communication, optimizer (bench.h) */
    double images_s, images_s_loader;
    size_t peak_alloc, peak_reserved, reserved_warm, reserved_end;
    long graphed;           /* trainer steps replayed as a graph (warm-up included) */
    double torch[2];        /* images/s eager, compile; 0: not run */
    double torch_mem[2];    /* their peak MiB */
    char torch_err[2][256];
};

static double now(void) { return timer_now(); }

/* A plumb train resnet configuration through the option table
 * (train/options.h): "--name value" pairs (value NULL: a flag), ended by NULL. */
static int bench_train_config(const char *const *words, struct train_config *c, plumb_err *e)
{
    train_config_defaults(c, workload_find("resnet"));
    for (int i = 0; words[i]; i += 2) {
        int rc = train_option_set(c, words[i], words[i + 1], e);
        if (rc) return rc;
    }
    return train_config_finish(c, e);
}

/* NB_DEV batches of the workload's data in sampler order (epoch 0, steps
 * 0..NB_DEV-1), each field on the device: fields[i][k]. */
struct dev_batches {
    int nf;
    void *f[NB_DEV][MODEL_MAX_FIELDS];
};

static int make_batches(const struct train_config *cfg, struct dev *d, long batch, struct dev_batches *db, plumb_err *e)
{
    const struct workload *wl = cfg->wl;
    void *spec = NULL;
    struct data_source *ds = NULL;
    memset(db, 0, sizeof *db);
    int rc = wl->configure(cfg, &spec, NULL, 0, e);
    if (!rc) rc = wl->data->open(cfg, spec, 0, &ds, e);
    const struct batch_field *fl = rc ? NULL : wl->data->fields(ds, &db->nf);
    struct sampler s;
    int have_s = 0;
    if (!rc) rc = sampler_init(&s, wl->data->count(ds, SPLIT_TRAIN), batch, (int)batch, cfg->seed, 1, e);
    have_s = !rc;
    uint32_t *idx = malloc((size_t)batch * sizeof(uint32_t));
    void *host[MODEL_MAX_FIELDS] = {0};
    for (int k = 0; !rc && k < db->nf; k++)
        if (!(host[k] = malloc((size_t)batch * fl[k].width * dtype_size(fl[k].dtype))))
            rc = err_set(e, PLUMB_ENOMEM, "bench resnet: out of host memory");
    if (!idx && !rc) rc = err_set(e, PLUMB_ENOMEM, "bench resnet: out of host memory");
    for (int i = 0; i < NB_DEV && !rc; i++) {
        struct sampler_step st;
        int shv[4];
        rc = sampler_get(&s, i, 0, 1, &st, idx, shv, e);
        if (!rc) rc = wl->data->fill(ds, SPLIT_TRAIN, st.epoch, idx, (int)batch, host, e);
        for (int k = 0; k < db->nf && !rc; k++) {
            size_t bytes = (size_t)batch * fl[k].width * dtype_size(fl[k].dtype);
            rc = dev_alloc(d, bytes, &db->f[i][k], e);
            if (!rc) rc = dev_upload(d, db->f[i][k], host[k], bytes, e);
        }
    }
    for (int k = 0; k < MODEL_MAX_FIELDS; k++) free(host[k]);
    free(idx);
    if (have_s) sampler_free(&s);
    if (ds) wl->data->free(ds);
    if (spec) wl->spec_free(spec);
    return rc;
}

static void free_batches(struct dev *d, struct dev_batches *db)
{
    for (int i = 0; i < NB_DEV; i++)
        for (int k = 0; k < db->nf; k++)
            if (db->f[i][k]) dev_free(d, db->f[i][k]);
}

static struct batch dbatch(const struct dev_batches *db, long step, long batch)
{
    struct batch b = {.B = (int)batch, .n_valid = (int)batch, .on_device = 1, .global_valid = batch};
    for (int k = 0; k < db->nf; k++) b.field[k] = db->f[step % NB_DEV][k];
    return b;
}

struct split_batches {
    const struct dev_batches *db;
    long batch;
};
static struct batch split_batch(void *ctx, long step)
{
    const struct split_batches *k = ctx;
    return dbatch(k->db, step, k->batch);
}

static int bench_config(const struct opts *o, struct comm *hc, dtype_t prec, long batch, struct timing *t, plumb_err *e)
{
    memset(t, 0, sizeof *t);
    t->torch_mem[0] = t->torch_mem[1] = NAN;
    /* warm-up, timed, the split's steps and re-capture, the loader's, the leak check's */
    const long total = o->warmup + 4 * NB_DEV + 2 * o->steps + (o->steps + o->warmup) + o->leak_steps + 1;
    char bs[32], steps[32], lr[32], pool[32], th[32];
    snprintf(bs, sizeof bs, "%ld", batch);
    snprintf(steps, sizeof steps, "%ld", total);
    snprintf(lr, sizeof lr, "%.17g", o->lr);
    snprintf(pool, sizeof pool, "%ld", o->pool > batch * NB_DEV ? o->pool : batch * NB_DEV);
    snprintf(th, sizeof th, "%ld", o->threads);
    /* a constant lr, no warmup; the eval split tiny and its chunk the batch
     * (the model is created for max(batch, eval chunk) samples) */
    const char *words[] = {"--preset", o->preset, "--device", o->device, "--precision", dtype_name(prec), "--data",
                           o->data, "--batch", bs, "--steps", steps, "--lr", lr, "--warmup", "0", "--schedule",
                           "constant", "--train-samples", pool, "--eval-samples", "8", "--eval-batch", bs,
                           "--micro-shard", bs, "--comm", "self", "--threads", th, "--watchdog-timeout", "0",
                           "--health-interval", "0", "--graph", o->graph, "--quiet", NULL, NULL};
    struct train_config cfg;
    int rc = bench_train_config(words, &cfg, e);
    if (rc) return rc;
    struct trainer *tr = NULL;
    if ((rc = trainer_open(&cfg, hc, &tr, e))) return rc;
    struct dev *d = trainer_dev(tr);
    struct dev_batches db;
    rc = make_batches(&cfg, d, batch, &db, e);
    long step = 0;
    struct trainer_step_stats ss;
    const long warm = bench_warm_steps(d, o->warmup, NB_DEV);
    for (long i = 0; i < warm && !rc; i++, step++) {
        struct batch b = dbatch(&db, step, batch);
        rc = trainer_step_on(tr, &b, step, batch, &ss, e);
    }
    if (!rc) rc = dev_sync(d, e);
    /* device-resident: whole steps back to back, one synchronisation */
    double t0 = now();
    for (long i = 0; i < o->steps && !rc; i++, step++) {
        struct batch b = dbatch(&db, step, batch);
        rc = trainer_step_on(tr, &b, step, batch, &ss, e);
    }
    double enq = now() - t0;
    if (!rc) rc = dev_sync(d, e);
    double whole = now() - t0;
    const double ns = (double)o->steps;
    t->enqueue_ms = 1e3 * enq / ns;
    t->step_ms = 1e3 * whole / ns;
    t->images_s = (double)batch * ns / whole;
    /* the split: each step timed apart (bench_split.c) */
    struct split_batches sb = {&db, batch};
    if (!rc) rc = bench_split_run(tr, &step, o->steps, batch, NB_DEV, split_batch, &sb, &t->split, e);
    /* the trainer's own data path */
    if (!rc) {
        struct trainer_steps_time tm;
        rc = trainer_steps(tr, step, o->warmup, o->steps, &tm, e);
        step += o->warmup + o->steps;
        if (!rc) {
            t->loader_ms = 1e3 * tm.elapsed_s / ns;
            t->images_s_loader = (double)batch * ns / tm.elapsed_s;
            t->data_ms = 1e3 * tm.wait_s / ns;
            t->build_ms = 1e3 * tm.build_s / ns;
        }
    }
    struct dev_mem_stats ms;
    dev_mem_stats(d, &ms);
    t->reserved_warm = ms.reserved;
    for (long i = 0; i < o->leak_steps && !rc; i++, step++) {
        struct batch b = dbatch(&db, step, batch);
        rc = trainer_step_on(tr, &b, step, batch, &ss, e);
    }
    if (!rc) rc = dev_sync(d, e);
    dev_mem_stats(d, &ms);
    t->reserved_end = ms.reserved;
    t->peak_alloc = ms.peak_allocated;
    t->peak_reserved = ms.peak_reserved;
    free_batches(d, &db);
    trainer_step_kinds(tr, NULL, &t->graphed);
    trainer_close(tr);
    return rc;
}

/* Runs the PyTorch script for one (precision, mode); its last JSON line's
 * images_per_s and peak_mem_mb, or why not. */
static int run_torch(const struct opts *o, const char *dev, const char *prec, const char *mode, long batch,
                     double *ips, double *mem, char *why, size_t wn)
{
    char cmd[2048], lim[48] = "";
    /* coreutils timeout: a torch.compile that outlasts --torch-timeout costs
     * the PyTorch figure only, not plumb's (exit 124 is reported below) */
    if (o->torch_timeout > 0) snprintf(lim, sizeof lim, "timeout %ld ", o->torch_timeout);
    snprintf(cmd, sizeof cmd, "%s%s %s --model %s --batch %ld --precision %s --modes %s --steps %ld --warmup %ld "
             "--device %s 2>&1", lim, o->python, o->script, o->preset, batch, prec, mode, o->steps, o->warmup, dev);
    *ips = 0, *mem = NAN;
    FILE *p = popen(cmd, "r");
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
    json_t *v = j ? json_object_get(j, "images_per_s") : NULL, *sk = j ? json_object_get(j, "skipped") : NULL;
    int rc = 0;
    if (st == 0 && v && json_is_number(v)) {
        *ips = json_number_value(v);
        json_t *pm = json_object_get(j, "peak_mem_mb");
        if (pm && json_is_number(pm)) *mem = json_number_value(pm);
    } else {
        if (o->torch_timeout > 0 && st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 124)
            snprintf(why, wn, "stopped by --torch-timeout after %ld s", o->torch_timeout);
        else
            snprintf(why, wn, "%s", sk && json_is_string(sk) ? json_string_value(sk)
                                    : st != 0             ? "the script failed (its output is above)"
                                                          : "no JSON line with images_per_s");
        rc = -1;
    }
    if (j) json_decref(j);
    return rc;
}

/* Golden digest of --golden-steps steps of --golden-preset, the same
 * configuration through the trainer on the device and on the cpu. */
static int golden_check(const struct opts *o, struct comm *hc, const char *label, json_t *out, plumb_err *e)
{
    char hex[2][65], bs[32], steps[32], pool[32];
    double secs[2] = {0, 0};
    snprintf(bs, sizeof bs, "%ld", o->golden_batch);
    snprintf(steps, sizeof steps, "%ld", o->golden_steps);
    snprintf(pool, sizeof pool, "%ld", o->golden_batch * o->golden_steps);
    const char *devs[2] = {o->device, "cpu"};
    int rc = PLUMB_OK;
    for (int k = 0; k < 2 && !rc; k++) {
        const char *words[] = {"--preset", o->golden_preset, "--device", devs[k], "--batch", bs, "--steps", steps,
                               "--numerics", "golden", "--train-samples", pool, "--eval-samples", "64",
                               "--eval-batch", "64", "--seed", "5", "--comm", "self", "--watchdog-timeout", "0",
                               "--health-interval", "0", "--quiet", NULL, NULL};
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
    printf("\ngolden %s batch=%ld steps=%ld fp32 (the trainer, the preset's SGD, same seed):\n  %-8s %s (%.1f s)\n"
           "  %-8s %s (%.1f s)  %s\n", o->golden_preset, o->golden_batch, o->golden_steps, label, hex[0], secs[0], "cpu",
           hex[1], secs[1], same ? "EQUAL" : "DIFFERENT");
    json_t *j = json_object();
    json_object_set_new(j, "preset", json_string(o->golden_preset));
    json_object_set_new(j, "batch", json_integer(o->golden_batch));
    json_object_set_new(j, "steps", json_integer(o->golden_steps));
    json_object_set_new(j, "digest_device", json_string(hex[0]));
    json_object_set_new(j, "digest_cpu", json_string(hex[1]));
    json_object_set_new(j, "equal", json_boolean(same));
    json_object_set_new(out, "golden", j);
    return same ? PLUMB_OK : PLUMB_EFAIL;
}

/* the PyTorch device for plumb's: cuda and hip (ROCm PyTorch) are "cuda[:N]" */
static void torch_device(const struct dev *d, const char *spec, char *out, size_t n)
{
    const char *colon = strchr(spec, ':');
    if (!strcmp(d->be->name, "cpu")) snprintf(out, n, "cpu");
    else snprintf(out, n, "cuda%s", colon ? colon : "");
}

static void put_row(json_t *res, const char *prec, long batch, const struct timing *t, int vs, int leak, int act16)
{
    json_t *r = json_object();
    json_object_set_new(r, "precision", json_string(prec));
    /* which activation storage ran (models/resnet/resnet16.c; PLUMB_RESNET_ACT16=0 forces fp32) */
    json_object_set_new(r, "activations", json_string(act16 ? "16-bit" : "fp32"));
    json_object_set_new(r, "batch", json_integer(batch));
    json_object_set_new(r, "images_per_s", json_real(t->images_s));
    json_object_set_new(r, "step_ms", json_real(t->step_ms));
    json_object_set_new(r, "host_enqueue_ms", json_real(t->enqueue_ms));
    json_object_set_new(r, "graphed_steps", json_integer(t->graphed));
    json_object_set_new(r, "data_wait_ms", json_real(t->data_ms));
    json_object_set_new(r, "forward_ms", bench_ms_json(t->split.fwd_ms));
    json_object_set_new(r, "backward_ms", bench_ms_json(t->split.bwd_ms));
    json_object_set_new(r, "forward_backward_ms", json_real(t->split.fb_ms));
    json_object_set_new(r, "split_from", json_string(bench_split_from(&t->split)));
    json_object_set_new(r, "comm_ms", json_real(t->split.comm_ms));
    json_object_set_new(r, "optimizer_ms", json_real(t->split.opt_ms));
    json_object_set_new(r, "loader_images_per_s", json_real(t->images_s_loader));
    json_object_set_new(r, "loader_step_ms", json_real(t->loader_ms));
    json_object_set_new(r, "loader_build_ms_per_batch", json_real(t->build_ms));
    json_object_set_new(r, "peak_allocated_bytes", json_integer((json_int_t)t->peak_alloc));
    json_object_set_new(r, "peak_reserved_bytes", json_integer((json_int_t)t->peak_reserved));
    json_object_set_new(r, "reserved_after_warmup", json_integer((json_int_t)t->reserved_warm));
    json_object_set_new(r, "reserved_after_leak_steps", json_integer((json_int_t)t->reserved_end));
    json_object_set_new(r, "leak", json_boolean(leak));
    if (vs) {
        const char *mk[2] = {"eager", "compile"};
        for (int k = 0; k < 2; k++) {
            char key[64];
            snprintf(key, sizeof key, "torch_%s_images_per_s", mk[k]);
            json_object_set_new(r, key, t->torch[k] > 0 ? json_real(t->torch[k]) : json_null());
            snprintf(key, sizeof key, "torch_%s_peak_mem_mb", mk[k]);
            json_object_set_new(r, key, isfinite(t->torch_mem[k]) ? json_real(t->torch_mem[k]) : json_null());
            snprintf(key, sizeof key, "ratio_vs_%s", mk[k]);
            json_object_set_new(r, key, t->torch[k] > 0 ? json_real(t->images_s / t->torch[k]) : json_null());
            if (t->torch_err[k][0]) {
                snprintf(key, sizeof key, "torch_%s_error", mk[k]);
                json_object_set_new(r, key, json_string(t->torch_err[k]));
            }
        }
    }
    json_array_append_new(res, r);
}

int bench_resnet(int argc, char **argv)
{
    struct opts o;
    memset(&o, 0, sizeof o);
    const struct opt opts[] = {
        {"--device", OPT_STR, &o.device, "cpu", "cpu, cuda, hip (cuda:N, hip:N)", NULL, "D"},
        {"--preset", OPT_STR, &o.preset, "resnet50", "resnet preset (plumb train resnet --preset)", NULL, "NAME"},
        {"--data", OPT_STR, &o.data, "synthetic", "the preset's data: synthetic (its generator) or a CIFAR-10 directory",
         NULL, "SRC"},
        {"--precision", OPT_STR, &o.precisions, "fp32,bf16", "precisions to measure (fp32, bf16, fp16)", NULL, "LIST"},
        {"--batch", OPT_STR, &o.batches, "256", "batch sizes to measure", NULL, "LIST"},
        {"--steps", OPT_INT, &o.steps, "20", "timed steps per measurement", "1..1000000", "N"},
        {"--warmup", OPT_INT, &o.warmup, "5",
         "untimed steps first (cuDNN/MIOpen algorithm search happens here; on a device with graphs at least 8: each of "
         "the 4 device batches' step graph captured)",
         "0..100000", "N"},
        {"--leak-steps", OPT_INT, &o.leak_steps, "20", "steps after warm-up for the leak check (0: skip)", "0..10000000",
         "N"},
        {"--pool", OPT_INT, &o.pool, "4096", "training samples of the data source (at least 4 batches)", "1..100000000",
         "N"},
        {"--threads", OPT_INT, &o.threads, "0", "cpu threads (0: the cores)", "0..4096", "N"},
        {"--graph", OPT_CHOICE, &o.graph, "on",
         "the trainer's --graph: the step's forward/backward captured and replayed on a device with graphs, or op by op",
         "on|off", NULL},
        {"--lr", OPT_DOUBLE, &o.lr, "0.1", "SGD learning rate (the preset's momentum and weight decay)", NULL, NULL},
        {"--vs-pytorch", OPT_FLAG, &o.vs_pytorch, NULL, "also run the PyTorch reference on the same device", NULL, NULL},
        {"--torch-modes", OPT_STR, &o.torch_modes, "eager,compile", "PyTorch modes to run with --vs-pytorch", NULL,
         "LIST"},
        {"--torch-timeout", OPT_INT, &o.torch_timeout, "0",
         "seconds each PyTorch run may take (coreutils timeout; 0: no limit)", "0..86400", "S"},
        {"--python", OPT_STR, &o.python, "python3", "python with torch for --vs-pytorch", NULL, "EXE"},
        {"--pytorch-script", OPT_STR, &o.script, "bench/resnet_torch.py", "the PyTorch reference script", NULL, "FILE"},
        {"--golden-steps", OPT_INT, &o.golden_steps, "0", "golden digest check: steps on the device and the cpu (0: skip)",
         "0..100000", "N"},
        {"--golden-preset", OPT_STR, &o.golden_preset, "resnet-tiny", "preset of the golden digest check", NULL, "NAME"},
        {"--golden-batch", OPT_INT, &o.golden_batch, "64", "batch of the golden digest check", "2..100000", "N"},
        {"--json", OPT_STR, &o.json, NULL, "write the figures as JSON to this file", NULL, "FILE"},
        {0},
    };
    plumb_err e = {0};
    int rc = args_parse("plumb bench resnet [options]",
                        "ResNet training throughput (images/s) per precision and batch through the trainer's step,\n"
                        "the step split into data / forward / backward / communication / optimizer, device memory\n"
                        "and a leak check; --vs-pytorch runs bench/resnet_torch.py (eager and torch.compile) on the\n"
                        "same device and prints the ratios; --golden-steps compares the golden digest with the cpu's.",
                        opts, argc, argv, NULL, 0, NULL, &e);
    if (rc == ARGS_HELP) return 0;
    if (rc) return cli_fail("bench resnet", &e);
    if (o.json && file_check_output("--json", o.json, &e)) return cli_fail("bench resnet", &e);
    char pbuf[128], bbuf[256], *plist[4], *blist[16];
    int np = args_split_list(o.precisions, pbuf, sizeof pbuf, plist, 4);
    int nbt = args_split_list(o.batches, bbuf, sizeof bbuf, blist, 16);
    if (np < 1 || nbt < 1) {
        err_set(&e, PLUMB_EUSAGE, "--precision/--batch: empty or too long a list (at most 4 and 16 entries)");
        return cli_fail("bench resnet", &e);
    }
    dtype_t precs[4];
    long bs[16];
    for (int i = 0; i < np; i++) {
        if (!strcmp(plist[i], "fp32")) precs[i] = DT_F32;
        else if (!strcmp(plist[i], "bf16")) precs[i] = DT_BF16;
        else if (!strcmp(plist[i], "fp16")) precs[i] = DT_F16;
        else {
            err_set(&e, PLUMB_EUSAGE, "--precision: '%s' is not fp32, bf16 or fp16", plist[i]);
            return cli_fail("bench resnet", &e);
        }
    }
    for (int i = 0; i < nbt; i++) {
        char *end;
        bs[i] = strtol(blist[i], &end, 10);
        if (*end || bs[i] < 2 || bs[i] > 65536) {
            err_set(&e, PLUMB_EUSAGE, "--batch: '%s' is not a batch size in 2..65536 (BatchNorm needs 2)", blist[i]);
            return cli_fail("bench resnet", &e);
        }
    }
    /* the preset and data through the option table: a bad one fails here, named */
    {
        char lr[32];
        snprintf(lr, sizeof lr, "%.17g", o.lr);
        const char *w[] = {"--preset", o.preset, "--data", o.data, "--lr", lr, NULL, NULL};
        struct train_config c;
        void *spec = NULL;
        if ((rc = bench_train_config(w, &c, &e)) || (rc = c.wl->configure(&c, &spec, NULL, 0, &e)))
            return cli_fail("bench resnet", &e);
        c.wl->spec_free(spec);
        struct resnet_config gc;
        if (o.golden_steps > 0 && resnet_config_preset(o.golden_preset, &gc, &e)) {
            err_wrap(&e, "--golden-preset");
            return cli_fail("bench resnet", &e);
        }
    }
    int want[2] = {strstr(o.torch_modes, "eager") != NULL, strstr(o.torch_modes, "compile") != NULL};
    struct dev *d = NULL;
    if ((rc = dev_open_or_cpu(o.device, &d, &e))) return cli_fail("bench resnet", &e);
    struct comm *hc = NULL;
    if ((rc = comm_init("self", &hc, &e))) {
        dev_close(d);
        return cli_fail("bench resnet", &e);
    }
    char det[2048], tdev[64];
    d->be->describe_determinism(d, det, sizeof det);
    torch_device(d, o.device, tdev, sizeof tdev);
    printf("device   %s (%s, %s)\ndriver   %s\nlibs     %s\nmodel    %s, data %s\n", d->label, d->info.name,
           d->info.arch, d->info.driver, d->info.libs, o.preset, o.data);
    json_t *root = json_object(), *res = json_array();
    json_object_set_new(root, "env", bench_env(stdout));
    json_object_set_new(root, "schema", json_string("plumb.bench.resnet/1"));
    json_object_set_new(root, "device", json_string(d->label));
    json_object_set_new(root, "name", json_string(d->info.name));
    json_object_set_new(root, "driver", json_string(d->info.driver));
    json_object_set_new(root, "libs", json_string(d->info.libs));
    json_object_set_new(root, "determinism", json_string(det));
    json_object_set_new(root, "preset", json_string(o.preset));
    json_object_set_new(root, "steps", json_integer(o.steps));
    json_object_set_new(root, "graph", json_string(o.graph));
    json_object_set_new(root, "method",
                        json_string("whole steps: --steps steps of the trainer's step (train/trainer.h, the one "
                                    "training loop: forward+backward with BatchNorm, the status all-reduce, gradient "
                                    "checks, SGD momentum) back to back on batches already on the device, host time "
                                    "to the final synchronisation; loader: the trainer's own data path; split: each "
                                    "step followed by a synchronisation, forward and backward the device time "
                                    "between the trainer's marks (split_from 'device marks'; graph replays "
                                    "included), else the model's training forward alone and backward = "
                                    "forward+backward phase - forward; optimizer = the rest of the step; memory from the caching allocator; PyTorch: "
                                    "bench/resnet_torch.py on the same device, same shapes, random inputs"));
    int fail = 0;
    dev_close(d); /* the trainer opens its own; this one only described the device */
    d = NULL;
    if (o.golden_steps > 0) {
        rc = golden_check(&o, hc, o.device, root, &e);
        if (rc == PLUMB_EFAIL) fail = 1, rc = 0;
    }
    if (!rc)
        printf("\n%-5s %6s | %9s %9s | %7s %8s %8s %7s %7s | %9s %6s | %9s %9s %5s | %9s %9s %6s %6s  %s\n", "prec", "batch",
               "images/s", "step ms", "data", "fwd", "bwd", "comm", "opt", "loader/s", "ratio", "peak MiB", "rsv MiB",
               "leak", "torch eag", "torch cmp", "x eag", "x cmp", "activations");
    int any_unsplit = 0;
    for (int pi = 0; pi < np && !rc; pi++)
        for (int bi = 0; bi < nbt && !rc; bi++) {
            struct timing t;
            const long f16 = resnet16_forward_count;
            rc = bench_config(&o, hc, precs[pi], bs[bi], &t, &e);
            const int act16 = resnet16_forward_count > f16;
            if (rc) break;
            if (o.vs_pytorch)
                for (int k = 0; k < 2; k++) {
                    if (!want[k]) continue;
                    if (run_torch(&o, tdev, plist[pi], k ? "compile" : "eager", bs[bi], &t.torch[k], &t.torch_mem[k],
                                  t.torch_err[k], sizeof t.torch_err[k]))
                        log_warn("bench resnet: pytorch %s %s: %s", plist[pi], k ? "compile" : "eager", t.torch_err[k]);
                }
            int leak = o.leak_steps > 0 && t.reserved_end != t.reserved_warm;
            char te[2][16], tx[2][16];
            for (int k = 0; k < 2; k++) {
                if (t.torch[k] > 0) {
                    snprintf(te[k], sizeof te[k], "%.1f", t.torch[k]);
                    snprintf(tx[k], sizeof tx[k], "%.2f", t.images_s / t.torch[k]);
                } else {
                    snprintf(te[k], sizeof te[k], "-");
                    snprintf(tx[k], sizeof tx[k], "-");
                }
            }
            char fc[24], bc[24];
            any_unsplit |= !isfinite(t.split.fwd_ms);
            printf("%-5s %6ld | %9.1f %9.2f | %7.2f %s %s %7.2f %7.2f | %9.1f %6.2f | %9.1f %9.1f %5s | %9s %9s "
                   "%6s %6s  %s\n",
                   plist[pi], bs[bi], t.images_s, t.step_ms, t.data_ms, bench_ms_cell(fc, sizeof fc, 8, t.split.fwd_ms),
                   bench_ms_cell(bc, sizeof bc, 8, t.split.bwd_ms), t.split.comm_ms, t.split.opt_ms,
                   t.images_s_loader, t.loader_ms / t.step_ms, t.peak_alloc / 1048576.0, t.peak_reserved / 1048576.0,
                   o.leak_steps ? (leak ? "LEAK" : "flat") : "-", te[0], te[1], tx[0], tx[1], act16 ? "16-bit" : "fp32");
            for (int k = 0; k < 2; k++)
                if (o.vs_pytorch && want[k] && !(t.torch[k] > 0))
                    printf("      pytorch %s: %s\n", k ? "compile" : "eager", t.torch_err[k]);
            fflush(stdout);
            fail |= leak;
            put_row(res, plist[pi], bs[bi], &t, o.vs_pytorch, leak, act16);
        }
    bench_split_note(any_unsplit);
    json_object_set(root, "results", res);
    if (!rc && o.json) rc = jsonx_write_file(o.json, root, &e);
    json_decref(res);
    json_decref(root);
    comm_finalize(hc);
    if (rc) return cli_fail("bench resnet", &e);
    return fail ? 1 : 0;
}
