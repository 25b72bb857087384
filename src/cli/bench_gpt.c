/* plumb bench gpt: GPT-2 (models/gpt) training throughput through the
 * trainer's own step, per precision: tokens/s, ms per step, model TFLOP/s and
 * MFU, the step split (forward / backward / optimizer / communication /
 * data), peak device memory; --vs-pytorch runs bench/gpt_pytorch.py (flash
 * SDPA, fused AdamW, bf16 autocast; eager and torch.compile) on the same
 * device in the same run and prints the ratios.
 *
 * Model FLOPs per token (training, forward + backward) = 6 N + 12 L T C,
 * N the parameters outside the embeddings (PaLM, appendix B; llm.c reports
 * MFU with it too); MFU = tokens/s x that / the device's dense peak for the
 * precision (the device table's, or --peak-tflops; 989 TFLOP/s bf16 on an
 * H100/H200 SXM).
 *
 * Method: synthetic tokens (Philox) for NB_DEV batches on the device;
 * --warmup untimed steps, then --steps steps queued back to back and timed
 * to one synchronisation (the whole-step figure); the split times another
 * --steps steps one at a time (bench_split.c): forward and backward = the
 * device time between the trainer's marks (the forward through ln_f; the
 * fused classifier, logits to logit gradients, counts with the backward:
 * models/gpt/gpt.h), graph replays included; communication = the trainer's
 * comm phase, optimizer = the rest of the step; data = the host's wait for
 * the trainer's own data path over --steps more steps (trainer_steps). */
#include "cli/bench.h"
#include "cli/args.h"
#include "comm/comm.h"
#include "core/file.h"
#include "core/jsonx.h"
#include "core/philox.h"
#include "core/timer.h"
#include "dev/dev.h"
#include "models/gpt/gpt.h"
#include "models/workloads.h"
#include "train/options.h"
#include "train/trainer.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NB_DEV 4

struct opts {
    const char *device, *preset, *precisions, *json, *python, *script, *torch_modes, *graph;
    long batch, seq, steps, warmup, threads;
    double peak;
    int vs_pytorch;
};

struct timing {
    double tokens_s, step_ms, data_ms;
    struct bench_split split; /* forward, backward, communication, optimizer (bench.h) */
    size_t peak_alloc, peak_reserved;
    long graphed; /* trainer steps replayed as a graph (warm-up included) */
};

/* The numbers of config_for's words as text. The config keeps pointers to
 * the text of its options (a workload option such as --seq-len is stored as
 * that text, train/options.h), so this lives as long as the config. */
struct config_text {
    char bs[32], sl[32], st[32], th[32];
};

static int config_for(const struct opts *o, const char *prec, long total_steps, struct config_text *txt,
                      struct train_config *c, plumb_err *e)
{
    char *bs = txt->bs, *sl = txt->sl, *st = txt->st, *th = txt->th;
    snprintf(bs, sizeof txt->bs, "%ld", o->batch);
    snprintf(sl, sizeof txt->sl, "%ld", o->seq);
    snprintf(st, sizeof txt->st, "%ld", total_steps);
    snprintf(th, sizeof txt->th, "%ld", o->threads);
    /* the preset's optimizer (AdamW, clipping) at a constant lr: throughput only */
    const char *words[] = {"--preset", o->preset, "--device", o->device, "--precision", prec, "--batch", bs,
                           "--seq-len", sl, "--steps", st, "--warmup", "0", "--schedule", "constant",
                           "--train-samples", "4096", "--eval-samples", "16", "--micro-shard", bs, "--threads", th,
                           "--comm", "self", "--watchdog-timeout", "0", "--health-interval", "0", "--graph", o->graph,
                           "--quiet", NULL, NULL};
    train_config_defaults(c, workload_find("gpt"));
    for (int i = 0; words[i]; i += 2)
        if (train_option_set(c, words[i], words[i + 1], e)) return e->code;
    return train_config_finish(c, e);
}

/* NB_DEV device batches of tokens and targets, taken in turn */
struct dev_tokens {
    int32_t *(*dt)[2]; /* [NB_DEV][tokens, targets] */
    int B;
};
static struct batch dev_tokens_batch(void *ctx, long step)
{
    const struct dev_tokens *k = ctx;
    return (struct batch){.B = k->B, .n_valid = k->B, .on_device = 1,
                          .field = {k->dt[step % NB_DEV][0], k->dt[step % NB_DEV][1]}};
}

static int bench_precision(const struct opts *o, struct comm *hc, const char *prec, int V, struct timing *t, plumb_err *e)
{
    memset(t, 0, sizeof *t);
    /* warm-up, the timed steps, the split's (and its re-capture), the data path's */
    const long total = o->warmup + 4 * NB_DEV + 3 * o->steps + 8;
    struct train_config cfg;
    struct config_text txt;
    int rc = config_for(o, prec, total, &txt, &cfg, e);
    if (rc) return rc;
    struct trainer *tr = NULL;
    if ((rc = trainer_open(&cfg, hc, &tr, e))) return rc;
    struct dev *d = trainer_dev(tr);
    const size_t n = (size_t)o->batch * o->seq;
    int32_t *h = malloc(n * 2 * sizeof(int32_t));
    int32_t *dt[NB_DEV][2];
    memset(dt, 0, sizeof dt);
    if (!h) rc = err_set(e, PLUMB_ENOMEM, "bench gpt: out of host memory");
    for (int i = 0; i < NB_DEV && !rc; i++) {
        /* random tokens; targets the next token of the same stream */
        for (size_t k = 0; k <= n; k++) {
            const int32_t v = (int32_t)(philox_u32_at(3, RNG_DATA, 17, (uint32_t)i, k) % (uint32_t)V);
            if (k < n) h[k] = v;
            if (k > 0) h[n + k - 1] = v;
        }
        for (int f = 0; f < 2 && !rc; f++) {
            rc = dev_alloc(d, n * sizeof(int32_t), (void **)&dt[i][f], e);
            if (!rc) rc = dev_upload(d, dt[i][f], h + f * n, n * sizeof(int32_t), e);
        }
    }
    free(h);
    long step = 0;
    struct trainer_step_stats ss;
    struct dev_tokens dtk = {dt, (int)o->batch};
    const long warm = bench_warm_steps(d, o->warmup, NB_DEV);
    for (long i = 0; i < warm && !rc; i++, step++) {
        struct batch b = dev_tokens_batch(&dtk, step);
        rc = trainer_step_on(tr, &b, step, o->batch, &ss, e);
    }
    if (!rc) rc = dev_sync(d, e);
    const double t0 = timer_now();
    for (long i = 0; i < o->steps && !rc; i++, step++) {
        struct batch b = dev_tokens_batch(&dtk, step);
        rc = trainer_step_on(tr, &b, step, o->batch, &ss, e);
    }
    if (!rc) rc = dev_sync(d, e);
    const double whole = timer_now() - t0;
    t->step_ms = 1e3 * whole / (double)o->steps;
    t->tokens_s = (double)n * (double)o->steps / whole;
    const double ns = (double)o->steps;
    if (!rc) rc = bench_split_run(tr, &step, o->steps, o->batch, NB_DEV, dev_tokens_batch, &dtk, &t->split, e);
    if (!rc) {
        struct trainer_steps_time tm;
        rc = trainer_steps(tr, step, 0, o->steps, &tm, e);
        if (!rc) t->data_ms = 1e3 * tm.wait_s / ns;
    }
    struct dev_mem_stats ms;
    dev_mem_stats(d, &ms);
    t->peak_alloc = ms.peak_allocated;
    t->peak_reserved = ms.peak_reserved;
    for (int i = 0; i < NB_DEV; i++)
        for (int f = 0; f < 2; f++)
            if (dt[i][f]) dev_free(d, dt[i][f]);
    trainer_step_kinds(tr, NULL, &t->graphed);
    trainer_close(tr);
    return rc;
}

/* the PyTorch script's tokens_per_s for one mode; 0 and why on failure */
static double run_torch(const struct opts *o, const char *prec, const char *mode, const char *tdev, char *why, size_t wn)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s --preset %s --batch %ld --seq %ld --steps %ld --warmup %ld --device %s "
                              "--precision %s --mode %s 2>&1",
             o->python, o->script, o->preset, o->batch, o->seq, o->steps, o->warmup, tdev, prec, mode);
    FILE *p = popen(cmd, "r");
    if (!p) {
        snprintf(why, wn, "cannot run %s", o->python);
        return 0;
    }
    char line[4096], last[4096] = "";
    while (fgets(line, sizeof line, p)) {
        if (line[0] == '{') snprintf(last, sizeof last, "%s", line);
        else {
            line[strcspn(line, "\r\n")] = 0; /* the script's last message line, without its newline */
            if (line[0]) snprintf(why, wn, "%.200s", line);
        }
    }
    const int st = pclose(p);
    json_t *j = last[0] ? json_loads(last, 0, NULL) : NULL;
    const json_t *v = j ? json_object_get(j, "tokens_per_s") : NULL;
    double r = v && json_is_number(v) && st == 0 ? json_number_value(v) : 0;
    if (!r && !why[0]) snprintf(why, wn, "%s exited %d without tokens_per_s", o->script, st);
    if (j) json_decref(j);
    return r;
}

static double peak_for(const struct opts *o, const struct dev_info *info, const char *prec)
{
    if (o->peak > 0) return o->peak;
    if (!strcmp(prec, "bf16")) return info->peak_tflops_bf16;
    if (!strcmp(prec, "fp16")) return info->peak_tflops_fp16;
    return info->peak_tflops_fp32;
}

int bench_gpt(int argc, char **argv)
{
    struct opts o;
    memset(&o, 0, sizeof o);
    const struct opt opts[] = {
        {"--device", OPT_STR, &o.device, "cpu", "device: cpu, cuda[:N], hip[:N]", NULL, "DEV"},
        {"--preset", OPT_CHOICE, &o.preset, "gpt-tiny", "model preset", "gpt-tiny|gpt2-124m", NULL},
        {"--precision", OPT_STR, &o.precisions, "fp32", "precisions to measure (fp32, bf16, fp16)", NULL, "LIST"},
        {"--batch", OPT_INT, &o.batch, "16", "sequences per step", "1..65536", "B"},
        {"--seq-len", OPT_INT, &o.seq, "0", "tokens per sequence (0 = the preset's context)", "0..1048576", "T"},
        {"--steps", OPT_INT, &o.steps, "20", "timed steps per measurement", "1..1000000", "N"},
        {"--warmup", OPT_INT, &o.warmup, "5",
         "untimed steps first (on a device with graphs at least 8: each of the 4 device batches' step graph captured)",
         "0..100000", "N"},
        {"--threads", OPT_INT, &o.threads, "0", "cpu threads (0 = all cores)", "0..4096", "N"},
        {"--graph", OPT_CHOICE, &o.graph, "on",
         "the trainer's --graph: the step's forward/backward captured and replayed on a device with graphs, or op by op",
         "on|off", NULL},
        {"--peak-tflops", OPT_DOUBLE, &o.peak, "0", "dense peak for MFU (0 = the device table's for the precision)", NULL, "X"},
        {"--vs-pytorch", OPT_FLAG, &o.vs_pytorch, NULL, "also run PyTorch GPT-2 (bench/gpt_pytorch.py) on the same device", NULL, NULL},
        {"--torch-modes", OPT_STR, &o.torch_modes, "eager,compile", "PyTorch modes with --vs-pytorch", NULL, "LIST"},
        {"--python", OPT_STR, &o.python, "python3", "python with torch for --vs-pytorch", NULL, "EXE"},
        {"--pytorch-script", OPT_STR, &o.script, "bench/gpt_pytorch.py", "the PyTorch script", NULL, "FILE"},
        {"--json", OPT_STR, &o.json, NULL, "write the figures as JSON to this file", NULL, "FILE"},
        {0},
    };
    plumb_err e = {0};
    int rc = args_parse("plumb bench gpt [options]",
                        "GPT-2 training throughput through the trainer's step: tokens/s, ms/step, model TFLOP/s and MFU "
                        "(6N + 12 L T C FLOPs per token), the step split and peak memory; --vs-pytorch: PyTorch on the "
                        "same device, eager and torch.compile.",
                        opts, argc, argv, NULL, 0, NULL, &e);
    if (rc == ARGS_HELP) return 0;
    if (rc || (o.json && file_check_output("--json", o.json, &e))) {
        fprintf(stderr, "plumb bench gpt: %s\n", e.msg);
        return 2;
    }
    struct gpt_config c;
    if (gpt_config_preset(o.preset, &c, &e)) {
        fprintf(stderr, "plumb bench gpt: %s\n", e.msg);
        return 2;
    }
    if (o.seq == 0) o.seq = c.block_size;
    if (o.seq > c.block_size) {
        fprintf(stderr, "plumb bench gpt: --seq-len: %ld (expected at most %s's context %d)\n", o.seq, o.preset, c.block_size);
        return 2;
    }
    static struct gpt_tensor ts[2 + 12 * GPT_MAX_LAYERS + 2];
    int nt = 0;
    size_t np = 0, nonemb = 0;
    gpt_layout(&c, ts, (int)(sizeof ts / sizeof ts[0]), &nt, &np, &e);
    for (int i = 2; i < nt; i++) nonemb += ts[i].numel;
    const double fpt = 6.0 * (double)nonemb + 12.0 * c.n_layer * (double)o.seq * c.n_embd;
    char pbuf[128], *plist[4], mbuf[64], *mlist[4];
    const int npr = args_split_list(o.precisions, pbuf, sizeof pbuf, plist, 4);
    const int nm = args_split_list(o.torch_modes, mbuf, sizeof mbuf, mlist, 4);
    if (npr < 1 || nm < 0) {
        fprintf(stderr, "plumb bench gpt: --precision '%s' (expected a list of fp32, bf16, fp16)\n", o.precisions);
        return 2;
    }
    /* every entry before anything runs (not after the entries before it) */
    for (int p = 0; p < npr; p++)
        if (strcmp(plist[p], "fp32") && strcmp(plist[p], "bf16") && strcmp(plist[p], "fp16")) {
            fprintf(stderr, "plumb bench gpt: --precision: '%s' is not one of fp32|bf16|fp16\n", plist[p]);
            return 2;
        }
    if (o.peak < 0) {
        fprintf(stderr, "plumb bench gpt: --peak-tflops: %g (expected 0 for the device table's, or a positive peak)\n", o.peak);
        return 2;
    }
    struct comm *hc = NULL;
    if (comm_init("self", &hc, &e)) {
        fprintf(stderr, "plumb bench gpt: %s\n", e.msg);
        return 3;
    }
    struct dev *probe = NULL;
    struct dev_info info;
    memset(&info, 0, sizeof info);
    if (dev_open(o.device, &probe, &e) == 0) {
        info = probe->info;
        dev_close(probe);
    } else {
        fprintf(stderr, "plumb bench gpt: %s\n", e.msg);
        comm_finalize(hc);
        return 2;
    }
    char desc[96];
    gpt_config_describe(&c, desc, sizeof desc);
    printf("plumb bench gpt: %s [%s] on %s (%s), B=%ld T=%ld (%ld tokens a step), fast numerics, AdamW\n", o.preset, desc,
           o.device, info.name, o.batch, o.seq, o.batch * o.seq);
    printf("model FLOPs per token = 6N + 12 L T C (PaLM appendix B; N = %zu parameters outside the embeddings, L %d, "
           "T %ld, C %d) = %.1f MFLOP\n\n",
           nonemb, c.n_layer, o.seq, c.n_embd, fpt / 1e6);
    json_t *envj = bench_env(stdout);
    printf("%-6s %12s %9s %9s %7s %8s %8s %8s %8s %8s %10s  %s\n", "prec", "tokens/s", "ms/step", "TFLOP/s", "MFU",
           "fwd ms", "bwd ms", "opt ms", "comm ms", "data ms", "peak MiB", "activations");
    json_t *out = json_object(), *rows = json_array();
    json_object_set_new(out, "env", envj);
    json_object_set_new(out, "preset", json_string(o.preset));
    json_object_set_new(out, "device", json_string(o.device));
    json_object_set_new(out, "device_name", json_string(info.name));
    json_object_set_new(out, "batch", json_integer(o.batch));
    json_object_set_new(out, "seq_len", json_integer(o.seq));
    json_object_set_new(out, "flops_per_token", json_real(fpt));
    json_object_set_new(out, "flops_formula", json_string("6N + 12 L T C per token, N = non-embedding parameters"));
    int status = 0, any_unsplit = 0;
    for (int p = 0; p < npr; p++) {
        struct timing t;
        const long f16 = gpt16_forward_count;
        rc = bench_precision(&o, hc, plist[p], c.vocab, &t, &e);
        const int act16 = gpt16_forward_count > f16;
        if (rc) {
            fprintf(stderr, "plumb bench gpt: %s: %s\n", plist[p], e.msg);
            status = rc == PLUMB_EUSAGE ? 2 : 3;
            break;
        }
        const double tfl = t.tokens_s * fpt / 1e12, pk = peak_for(&o, &info, plist[p]);
        char mfu[16] = "n/a";
        if (pk > 0) snprintf(mfu, sizeof mfu, "%.1f%%", 100.0 * tfl / pk);
        char fc[24], bc[24];
        any_unsplit |= !isfinite(t.split.fwd_ms);
        printf("%-6s %12.0f %9.2f %9.3f %7s %s %s %8.2f %8.2f %8.2f %10.1f  %s\n", plist[p], t.tokens_s, t.step_ms,
               tfl, mfu, bench_ms_cell(fc, sizeof fc, 8, t.split.fwd_ms), bench_ms_cell(bc, sizeof bc, 8, t.split.bwd_ms),
               t.split.opt_ms, t.split.comm_ms, t.data_ms, (double)t.peak_alloc / 1048576.0,
               act16 ? "16-bit" : "fp32");
        json_t *r = json_object();
        json_object_set_new(r, "precision", json_string(plist[p]));
        json_object_set_new(r, "graphed_steps", json_integer(t.graphed));
        /* which activation storage ran (models/gpt/gpt16.c; PLUMB_GPT_ACT16=0 forces fp32) */
        json_object_set_new(r, "activations", json_string(act16 ? "16-bit" : "fp32"));
        json_object_set_new(r, "tokens_per_s", json_real(t.tokens_s));
        json_object_set_new(r, "step_ms", json_real(t.step_ms));
        json_object_set_new(r, "model_tflops", json_real(tfl));
        json_object_set_new(r, "peak_tflops", pk > 0 ? json_real(pk) : json_null());
        json_object_set_new(r, "mfu", pk > 0 ? json_real(tfl / pk) : json_null());
        json_object_set_new(r, "split_ms", json_pack("{s:o, s:o, s:f, s:f, s:f, s:f}", "forward",
                                                     bench_ms_json(t.split.fwd_ms), "backward",
                                                     bench_ms_json(t.split.bwd_ms), "forward_backward", t.split.fb_ms,
                                                     "optimizer", t.split.opt_ms, "comm", t.split.comm_ms, "data",
                                                     t.data_ms));
        json_object_set_new(r, "split_from", json_string(bench_split_from(&t.split)));
        json_object_set_new(r, "peak_allocated_bytes", json_integer((json_int_t)t.peak_alloc));
        json_object_set_new(r, "peak_reserved_bytes", json_integer((json_int_t)t.peak_reserved));
        if (o.vs_pytorch) {
            const char *tdev = strncmp(o.device, "cpu", 3) ? "cuda" : "cpu"; /* ROCm's torch calls its GPUs cuda too */
            json_t *tj = json_object();
            for (int k = 0; k < nm; k++) {
                char why[256] = "";
                const double ts = run_torch(&o, plist[p], mlist[k], tdev, why, sizeof why);
                if (ts > 0) {
                    printf("       pytorch %-7s %12.0f tokens/s: plumb / pytorch = %.3f\n", mlist[k], ts, t.tokens_s / ts);
                    json_object_set_new(tj, mlist[k], json_pack("{s:f, s:f}", "tokens_per_s", ts, "ratio", t.tokens_s / ts));
                } else {
                    printf("       pytorch %-7s not measured: %s\n", mlist[k], why);
                    json_object_set_new(tj, mlist[k], json_pack("{s:s}", "error", why));
                }
            }
            json_object_set_new(r, "pytorch", tj);
        }
        json_array_append_new(rows, r);
    }
    bench_split_note(any_unsplit);
    json_object_set_new(out, "rows", rows);
    if (o.json && jsonx_write_file(o.json, out, &e)) {
        fprintf(stderr, "plumb bench gpt: %s\n", e.msg);
        status = status ? status : 3;
    }
    json_decref(out);
    comm_finalize(hc);
    return status;
}
