/* bench/feed_host.c: the host side of the ctr data plane, timed without a
 * GPU. Three figures, each the median of --repeat runs:
 *   perm: one epoch's sampler permutation (train/sampler.h) of --pool
 *         samples on the calling thread (ns per sample);
 *   fill: the ctr batch builder (models/ctr/data.h, data_fill) on one
 *         thread: --batch samples of a materialised synthetic pool of --pool
 *         samples in the sampler's order (ns per sample, samples/s);
 *   feed: the device feed (train/devfeed.h) on the cpu device with
 *         --threads build threads for --steps steps (crossing epoch
 *         boundaries when --pool / --batch is small): samples/s through
 *         devfeed_next/release, the build time per batch and the build rate
 *         per thread (samples / (build seconds x threads)). The cpu device's
 *         "H2D" is a memcpy on the producer thread, which a GPU's copy
 *         stream does not cost; the build figures leave it out.
 * One JSON line on stdout. Built by `make bench`. */
#include "cli/args.h"
#include "core/hugemem.h"
#include "core/philox.h"
#include "core/timer.h"
#include "dev/dev.h"
#include "models/ctr/ctr.h"
#include "models/ctr/data.h"
#include "train/devfeed.h"
#include "train/sampler.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* this process's anonymous memory backed by huge pages, MiB (-1: unknown),
 * from /proc/self/smaps_rollup: whether the pool's advice took */
static double anon_huge_mib(void)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    double kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %lf kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb < 0 ? -1 : kb / 1024;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv)
{
    long pool = 1048576, batch = 32768, threads = 1, steps = 64, rows = 1000000, repeat = 5, depth = 4;
    const char *huge = "on";
    const struct opt opts[] = {
        {"--pool", OPT_INT, &pool, "1048576", "synthetic training samples generated into memory", "1024..100000000", "N"},
        {"--batch", OPT_INT, &batch, "32768", "samples per batch", "1..1048576", "N"},
        {"--threads", OPT_INT, &threads, "1", "build threads of the device feed", "1..256", "N"},
        {"--steps", OPT_INT, &steps, "64", "feed steps per repeat", "1..1000000", "N"},
        {"--rows", OPT_INT, &rows, "1000000", "rows of each embedding table (the sparse modulus)", "1..2000000000", "N"},
        {"--depth", OPT_INT, &depth, "4", "device feed slots", "2..64", "N"},
        {"--repeat", OPT_INT, &repeat, "5", "repeats of each measurement (medians reported)", "1..100", "N"},
        {"--huge", OPT_CHOICE, &huge, "on", "the pool in memory advised for 2 MiB pages (core/hugemem.h), as the trainer's pools are; off: plain malloc", "on|off", NULL},
        {0},
    };
    plumb_err e = {0};
    int npos = 0;
    int rc = args_parse("feed_host [options]", "Host-side timing of the ctr data plane (sampler, batch builder, device feed).",
                        opts, argc, argv, NULL, 0, &npos, &e);
    if (rc == ARGS_HELP) return 0;
    if (rc) {
        fprintf(stderr, "feed_host: %s\n", e.msg);
        return 2;
    }
    /* the pool: Philox words in every field (the build's work does not
     * depend on the values; the teacher would take a minute on 2 cores) */
    struct dataset *ds = calloc(1, sizeof *ds);
    const int use_huge = !strcmp(huge, "on");
    struct criteo_sample *pm_ = !ds ? NULL : use_huge ? huge_alloc((size_t)pool * sizeof *pm_) : malloc((size_t)pool * sizeof *pm_);
    if (!pm_) {
        fprintf(stderr, "feed_host: out of memory for %ld samples\n", pool);
        return 1;
    }
    double t0 = timer_now();
#pragma omp parallel for schedule(static)
    for (long i = 0; i < pool; i++) {
        uint32_t w[40];
        for (int k = 0; k < 10; k++) philox_block(1, RNG_DATA, 99, 0, (uint64_t)i * 10 + (uint64_t)k, w + 4 * k);
        memcpy(&pm_[i], w, sizeof pm_[i]);
        pm_[i].label = (float)(w[0] & 1);
    }
    ds->n[0] = pool;
    ds->n[1] = 1;
    ds->mem[0] = ds->mem[1] = pm_;
    ds->own[0] = pm_;
    snprintf(ds->desc, sizeof ds->desc, "%ld random samples in memory", pool);
    const double huge_mib = anon_huge_mib();
    fprintf(stderr, "pool: %s (%.2f s), %.0f MiB of %.0f on huge pages (--huge %s)\n", ds->desc, timer_now() - t0,
            huge_mib, (double)pool * sizeof *pm_ / 1048576.0, huge);
    int64_t R[CTR_N_TABLES];
    for (int t = 0; t < CTR_N_TABLES; t++) R[t] = rows;
    int nrep = (int)repeat;
    double *perm_ns = calloc((size_t)nrep, sizeof(double)), *fill_ns = calloc((size_t)nrep, sizeof(double));
    double *feed_sps = calloc((size_t)nrep, sizeof(double)), *build_ms = calloc((size_t)nrep, sizeof(double));
    double *build_pt = calloc((size_t)nrep, sizeof(double));
    uint32_t *perm = malloc((size_t)pool * sizeof *perm);
    size_t B = (size_t)batch;
    float *dense = malloc(B * CTR_N_DENSE * sizeof(float)), *labels = malloc(B * sizeof(float));
    uint32_t *sparse = malloc(B * CTR_N_TABLES * sizeof(uint32_t)), *idx = malloc(B * sizeof(uint32_t));
    if (!perm_ns || !fill_ns || !feed_sps || !build_ms || !build_pt || !perm || !dense || !labels || !sparse || !idx) {
        fprintf(stderr, "feed_host: out of memory\n");
        return 1;
    }
    /* perm */
    for (int r = 0; r < nrep; r++) {
        double a = timer_now();
        sampler_permutation(7, r, pool, perm);
        perm_ns[r] = 1e9 * (timer_now() - a) / (double)pool;
    }
    /* fill: batches of epoch 0 in the sampler's order, one thread */
    struct sampler s;
    if ((rc = sampler_init(&s, pool, batch, (int)batch, 7, 1, &e))) {
        fprintf(stderr, "feed_host: %s\n", e.msg);
        return 1;
    }
    long spe = sampler_steps_per_epoch(&s);
    int shv[2];
    for (int r = 0; r < nrep; r++) {
        struct sampler_step st;
        (void)sampler_get(&s, r % spe, 0, 1, &st, idx, shv, &e);
        double a = timer_now();
        (void)data_fill(ds, 0, idx, (int)st.local_valid, R, dense, sparse, labels, NULL); /* synthetic: cannot fail */
        fill_ns[r] = 1e9 * (timer_now() - a) / (double)st.local_valid;
    }
    sampler_free(&s);
    /* feed: the device feed on the cpu device */
    struct dev *d = NULL;
    if ((rc = dev_open("cpu", &d, &e))) {
        fprintf(stderr, "feed_host: %s\n", e.msg);
        return 1;
    }
    struct data_source src;
    struct feed_source fs;
    ctr_source_wrap(&src, ds, R);
    ctr_feed_source(&src, &fs);
    for (int r = 0; r < nrep && !rc; r++) {
        struct sampler fsmp;
        if ((rc = sampler_init(&fsmp, pool, batch, (int)batch, 7, 1, &e))) break;
        struct devfeed *f = NULL;
        /* the first step's permutation is the feed's start-up, not its rate */
        (void)sampler_get(&fsmp, 0, 0, 1, &(struct sampler_step){0}, idx, shv, &e);
        if ((rc = devfeed_start(d, &fs, SPLIT_TRAIN, &fsmp, 0, 1, 0, steps + 1, (int)depth, (int)threads, &f, &e))) break;
        struct batch b;
        long sn;
        double w, a = 0, bs0 = 0;
        for (long i = 0; i <= steps && !rc; i++) {
            rc = devfeed_next(f, &b, &sn, &w, &e);
            if (!rc && i == 0) {
                a = timer_now(); /* timed from the first batch's arrival */
                devfeed_times(f, &bs0, NULL);
            }
            if (!rc) devfeed_release(f);
        }
        double el = timer_now() - a, bs = 0;
        devfeed_times(f, &bs, NULL);
        devfeed_stop(f);
        sampler_free(&fsmp);
        if (rc) break;
        feed_sps[r] = (double)batch * (double)steps / el;
        /* the feed builds steps+1 batches; the first was built before a */
        build_ms[r] = 1e3 * bs / (double)(steps + 1);
        build_pt[r] = (double)batch / (bs / (double)(steps + 1) * (double)threads);
        (void)bs0;
    }
    if (rc) {
        fprintf(stderr, "feed_host: %s\n", e.msg);
        return 1;
    }
    double pm = median(perm_ns, nrep), fm = median(fill_ns, nrep), sm = median(feed_sps, nrep),
           bm = median(build_ms, nrep), pt = median(build_pt, nrep);
    fprintf(stderr, "perm  %ld samples: %.2f ns/sample (%.2f ms an epoch)\n", pool, pm, pm * (double)pool * 1e-6);
    fprintf(stderr, "fill  1 thread: %.1f ns/sample, %.2f M samples/s\n", fm, 1e3 / fm);
    fprintf(stderr, "feed  %ld threads, batch %ld, %ld steps (%ld per epoch): %.2f M samples/s; build %.3f ms a batch, "
                    "%.2f M samples/s per thread\n",
            threads, batch, steps, (pool + batch - 1) / batch, sm * 1e-6, bm, pt * 1e-6);
    printf("{\"pool\":%ld,\"huge\":\"%s\",\"huge_mib\":%.0f,\"batch\":%ld,\"threads\":%ld,\"steps\":%ld,\"repeat\":%ld,\"perm_ns_per_sample\":%.3f,"
           "\"fill_ns_per_sample\":%.3f,\"feed_samples_per_s\":%.1f,\"build_ms_per_batch\":%.4f,"
           "\"build_samples_per_s_per_thread\":%.1f}\n",
           pool, huge, huge_mib, batch, threads, steps, repeat, pm, fm, sm, bm, pt);
    dev_close(d);
    dataset_free(ds);
    free(perm), free(dense), free(labels), free(sparse), free(idx);
    free(perm_ns), free(fill_ns), free(feed_sps), free(build_ms), free(build_pt);
    return 0;
}
