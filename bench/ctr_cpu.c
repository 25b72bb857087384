/* bench/ctr_cpu.c: training throughput of models/ctr on the cpu device,
 * timed through the trainer's step (train/trainer.h): forward+backward over
 * the batch, the gradient checks and the optimizer (SGD: dense update and
 * touched-rows-only embedding update), the work bench/ctr_pytorch.py does
 * per step. Inputs: Philox (purpose RNG_DATA)
 * dense features in [0, 3), uniform rows, 25% positive labels; 4 distinct
 * batches cycled. Prints a per-phase table on stderr and one JSON line on
 * stdout; samples_per_s is batch / median step time (robust when the machine
 * is shared), samples_per_s_mean is steps * batch / total time. Built by `make bench`; run by bench/ctr_cpu. */
#include "cli/args.h"
#include "core/philox.h"
#include "core/timer.h"
#include "dev/dev.h"
#include "models/ctr/ctr.h"
#include "comm/comm.h"
#include "models/workloads.h"
#include "train/options.h"
#include "train/trainer.h"
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    const char *preset = "dlrm-kaggle", *numerics = "fast", *precision = "fp32", *optim = "sgd";
    long rows = 0, batch = 2048, steps = 20, warmup = 3, threads = 0;
    double lr = 0.1;
    const struct opt opts[] = {
        {"--preset", OPT_CHOICE, &preset, "dlrm-kaggle", "model preset", "dlrm-kaggle|ctr-tiny", NULL},
        {"--rows", OPT_INT, &rows, "0", "rows per table (0: the preset's, 1000000 for dlrm-kaggle)", "0..4294967295", "N"},
        {"--batch", OPT_INT, &batch, "2048", "samples per step", "1..1048576", "N"},
        {"--steps", OPT_INT, &steps, "20", "timed steps", "1..1000000", "N"},
        {"--warmup", OPT_INT, &warmup, "3", "untimed steps first", "0..1000", "N"},
        {"--threads", OPT_INT, &threads, "0", "OpenMP/BLAS threads (0: all cores)", "0..1024", "N"},
        {"--numerics", OPT_CHOICE, &numerics, "fast", "op numerics", "fast|golden", NULL},
        {"--precision", OPT_CHOICE, &precision, "fp32", "activation storage", "fp32|bf16|fp16", NULL},
        {"--optimizer", OPT_CHOICE, &optim, "sgd", "optimizer", "sgd|adamw", NULL},
        {"--lr", OPT_DOUBLE, &lr, "0.1", "learning rate", NULL, "X"},
        {0},
    };
    plumb_err e = {0};
    int npos = 0;
    int rc = args_parse("ctr_cpu [options]", "Training samples/s of the ctr model on the cpu device.", opts,
                        argc, argv, NULL, 0, &npos, &e);
    if (rc == ARGS_HELP) return 0;
    if (rc) {
        fprintf(stderr, "ctr_cpu: %s\n", e.msg);
        return 2;
    }
    if (threads > 0) omp_set_num_threads((int)threads);
    /* the trainer's step (train/trainer.h, the one training loop) on host
     * batches; the config through the option table (train/options.h), the
     * whole batch one micro-shard (one forward_backward a step) */
    struct ctr_config c;
    if ((rc = ctr_config_preset(preset, rows, &c, &e))) {
        fprintf(stderr, "ctr_cpu: %s\n", e.msg);
        return err_exit_code(rc);
    }
    char w_rows[32], w_batch[32], w_steps[32], w_lr[32], w_th[32];
    snprintf(w_rows, sizeof w_rows, "%ld", rows);
    snprintf(w_batch, sizeof w_batch, "%ld", batch);
    snprintf(w_steps, sizeof w_steps, "%ld", warmup + steps);
    snprintf(w_lr, sizeof w_lr, "%.17g", lr);
    snprintf(w_th, sizeof w_th, "%ld", threads);
    const char *words[] = {"--preset", preset, "--rows", w_rows, "--device", "cpu", "--batch", w_batch, "--steps",
                           w_steps, "--micro-shard", w_batch, "--numerics", numerics, "--precision", precision,
                           "--optimizer", optim, "--lr", w_lr, "--warmup", "0", "--threads", w_th, "--eval-samples", "64",
                           "--comm", "self", "--watchdog-timeout", "0", "--quiet", NULL, NULL};
    struct train_config cfg;
    train_config_defaults(&cfg, workload_find("ctr"));
    for (int i = 0; words[i] && !rc; i += 2) rc = train_option_set(&cfg, words[i], words[i + 1], &e);
    if (!rc) rc = train_config_finish(&cfg, &e);
    struct comm *cm = NULL;
    struct trainer *tr = NULL;
    double t0 = now_s();
    if (!rc) rc = comm_init("self", &cm, &e);
    if (!rc) rc = trainer_open(&cfg, cm, &tr, &e);
    if (rc) {
        fprintf(stderr, "ctr_cpu: %s\n", e.msg);
        return err_exit_code(rc);
    }
    double t_init = now_s() - t0;
    const int NB = 4;
    size_t B = (size_t)batch;
    float *dense = malloc(NB * B * 13 * sizeof(float)), *lab = malloc(NB * B * sizeof(float));
    uint32_t *sp = malloc(NB * B * 26 * sizeof(uint32_t));
    if (!dense || !lab || !sp) {
        fprintf(stderr, "ctr_cpu: out of memory for %ld-sample batches\n", batch);
        return 3;
    }
    for (size_t i = 0; i < NB * B; i++) {
        for (int k = 0; k < 13; k++) dense[i * 13 + k] = 3.0f * philox_uniform_at(7, RNG_DATA, 100, 0, i * 13 + k);
        for (int t = 0; t < 26; t++)
            sp[i * 26 + t] = (uint32_t)(((uint64_t)philox_u32_at(7, RNG_DATA, 101, 0, i * 26 + t) * (uint64_t)c.rows[t]) >> 32);
        lab[i] = philox_uniform_at(7, RNG_DATA, 102, 0, i) < 0.25f ? 1.0f : 0.0f;
    }
    double t_fb = 0, t_opt = 0, t_total = 0, last_loss = 0;
    double *st = malloc((size_t)steps * sizeof(double));
    if (!st) return 3;
    for (long s = 0; s < warmup + steps; s++) {
        size_t k = (size_t)s % NB;
        struct batch b = {.B = (int)B, .n_valid = (int)B, .field = {dense + k * B * 13, sp + k * B * 26, lab + k * B}};
        struct trainer_step_stats ss;
        double a = now_s();
        rc = trainer_step_on(tr, &b, s, (long)B, &ss, &e);
        double end = now_s();
        if (rc) {
            fprintf(stderr, "ctr_cpu: step %ld: %s\n", s, e.msg);
            return err_exit_code(rc);
        }
        if (s >= warmup) {
            t_fb += ss.compute_s;
            t_opt += (end - a) - ss.compute_s - ss.comm_s;
            t_total += end - a;
            st[s - warmup] = end - a;
        }
        last_loss = ss.loss;
    }
    /* throughput from the median step time: robust on a shared machine */
    for (long i = 1; i < steps; i++)
        for (long j = i; j > 0 && st[j - 1] > st[j]; j--) {
            double t = st[j];
            st[j] = st[j - 1];
            st[j - 1] = t;
        }
    double med = steps % 2 ? st[steps / 2] : 0.5 * (st[steps / 2 - 1] + st[steps / 2]);
    double sps = (double)B / med, sps_mean = (double)B * steps / t_total;
    free(st);
    char desc[256];
    ctr_config_describe(&c, desc, sizeof desc);
    fprintf(stderr, "plumb ctr %s (%s), batch %ld, %s %s, threads %d, init %.1f s\n", preset, desc, batch, numerics,
            precision, threads > 0 ? (int)threads : omp_get_max_threads(), t_init);
    fprintf(stderr, "  forward+backward %8.2f ms/step\n  optimizer        %8.2f ms/step\n  total            %8.2f ms/step\n",
            1e3 * t_fb / steps, 1e3 * t_opt / steps, 1e3 * t_total / steps);
    printf("{\"impl\": \"plumb\", \"preset\": \"%s\", \"threads\": %d, \"batch\": %ld, \"rows\": %lld, \"steps\": %ld, "
           "\"seconds\": %.6f, \"median_step_s\": %.6f, \"samples_per_s\": %.3f, \"samples_per_s_mean\": %.3f, "
           "\"fwd_bwd_ms\": %.3f, \"opt_ms\": %.3f, \"last_loss\": %.6f}\n",
           preset, threads > 0 ? (int)threads : omp_get_max_threads(), batch, (long long)c.rows[0], steps, t_total, med,
           sps, sps_mean, 1e3 * t_fb / steps, 1e3 * t_opt / steps, last_loss);
    free(dense);
    free(lab);
    free(sp);
    trainer_close(tr);
    comm_finalize(cm);
    return 0;
}
