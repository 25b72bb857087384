/* bench/ctr_cpu.c: training throughput of models/ctr on the cpu device.
 * One optimizer step = ctr_forward_backward over the batch + ctr_opt_step
 * (SGD: dense update and touched-rows-only embedding update), the same work
 * as bench/ctr_pytorch.py does per step. Inputs: Philox (purpose RNG_DATA)
 * dense features in [0, 3), uniform rows, 25% positive labels; 4 distinct
 * batches cycled. Prints a per-phase table on stderr and one JSON line on
 * stdout; samples_per_s is batch / median step time (robust when the machine
 * is shared), samples_per_s_mean is steps * batch / total time. Built by `make bench`; run by bench/ctr_cpu. */
#include "cli/args.h"
#include "core/philox.h"
#include "core/timer.h"
#include "dev/dev.h"
#include "models/ctr.h"
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
    struct ctr_config c;
    struct dev *d = NULL;
    struct ctr_model *m = NULL;
    dtype_t prec = !strcmp(precision, "bf16") ? DT_BF16 : !strcmp(precision, "fp16") ? DT_F16 : DT_F32;
    if ((rc = ctr_config_preset(preset, rows, &c, &e)) || (rc = dev_open("cpu", &d, &e)) ||
        (rc = dev_set_numerics(d, !strcmp(numerics, "golden") ? NUMERICS_GOLDEN : NUMERICS_FAST, 0, &e))) {
        fprintf(stderr, "ctr_cpu: %s\n", e.msg);
        return err_exit_code(rc);
    }
    d->threads = (int)threads;
    double t0 = now_s();
    if ((rc = ctr_create(d, &c, (int)batch, prec, &m, &e)) || (rc = ctr_init(m, 1, &e))) {
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
    struct ctr_opt o = {!strcmp(optim, "adamw") ? CTR_OPT_ADAMW : CTR_OPT_SGD, (float)lr, 0.0f, 0.9f, 0.999f, 1e-8f};
    double t_fb = 0, t_opt = 0, t_total = 0, last_loss = 0;
    double *st = malloc((size_t)steps * sizeof(double));
    if (!st) return 3;
    for (long s = 0; s < warmup + steps; s++) {
        size_t k = (size_t)s % NB;
        struct ctr_batch b = {(int)B, (int)B, dense + k * B * 13, sp + k * B * 26, lab + k * B};
        struct ctr_loss l;
        double a = now_s();
        rc = ctr_forward_backward(m, &b, 1.0f / (float)B, &l, &e);
        double mid = now_s();
        int64_t *rws;
        float *rg;
        size_t nr;
        ctr_sparse_grads(m, &rws, &rg, &nr);
        if (!rc) rc = ctr_opt_step(m, &o, s + 1, ctr_grads(m), rws, rg, nr, &e);
        double end = now_s();
        if (rc) {
            fprintf(stderr, "ctr_cpu: step %ld: %s\n", s, e.msg);
            return err_exit_code(rc);
        }
        if (s >= warmup) {
            t_fb += mid - a;
            t_opt += end - mid;
            t_total += end - a;
            st[s - warmup] = end - a;
        }
        last_loss = l.sum / (double)l.count;
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
    ctr_free(m);
    dev_close(d);
    return 0;
}
