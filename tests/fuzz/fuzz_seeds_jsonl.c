/* libFuzzer target: per-seed metric files (report/seeds.h, seeds.jsonl),
 * the evidence `plumb compare A.jsonl B.jsonl` tests: seeds_read on the
 * bytes as a file, then compare_metric_files of the file against itself
 * (parity statistics, curve bands) and its text rendering. Checked: an
 * accepted file has at least one record, and each metric's values are
 * finite (seeds.h: a non-finite metric is an error). */
#include "fuzz_util.h"
#include "report/compare.h"
#include "report/seeds.h"
#include <math.h>

static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_quiet();
    if (!(devnull = fopen("/dev/null", "w"))) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    fuzz_memfile("seeds", data, size, path, sizeof path);
    struct seed_set s = {0};
    plumb_err e = {0};
    if (seeds_read(path, &s, &e) != PLUMB_OK) {
        if (!e.msg[0]) abort();
        seeds_free(&s);
        return 0;
    }
    if (s.n == 0) abort();
    double *v = malloc(s.n * sizeof *v);
    if (!v) abort();
    for (size_t m = 0; m < s.nmetric; m++) {
        size_t k = seeds_values(&s, s.metric[m], v);
        if (k > s.n) abort();
        for (size_t i = 0; i < k; i++)
            if (!isfinite(v[i])) abort();
    }
    free(v);
    seeds_free(&s);

    struct compare_opts o;
    compare_opts_defaults(&o);
    json_t *cmp = NULL;
    plumb_err ec = {0};
    if (compare_metric_files(path, path, &o, &cmp, &ec) == PLUMB_OK) {
        compare_print(devnull, cmp);
        json_decref(cmp);
    }
    return 0;
}
