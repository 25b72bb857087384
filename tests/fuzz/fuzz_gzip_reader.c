/* libFuzzer target: the Criteo file reader (models/ctr/criteo.h) over zlib's
 * gzread, which takes gzip streams and plain text alike, and the dataset
 * that is built from it (models/ctr/data.h: all lines parsed, the last
 * quarter held out for eval). The input is the whole file, handed over as
 * an in-memory file; the seeds are gzip'ed and plain Criteo TSV.
 *
 * Checked: every sample read back has a 0/1 label; the dataset's two splits
 * add up to the samples the streaming reader returned when no line is bad. */
#include "fuzz_util.h"
#include "models/ctr/criteo.h"
#include "models/ctr/data.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_quiet();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    fuzz_memfile("criteo", data, size, path, sizeof path);

    /* the streaming reader, skipping bad lines */
    struct criteo_reader *r;
    plumb_err e = {0};
    if (criteo_open(path, CRITEO_BAD_SKIP, &r, &e)) return 0;
    long n = 0;
    int rc = PLUMB_OK;
    for (;;) {
        struct criteo_sample s;
        int got = 0;
        if ((rc = criteo_next(r, &s, &got, &e)) || !got) break;
        if (s.label != 0.0f && s.label != 1.0f) abort();
        n++;
    }
    long skipped = criteo_skipped(r);
    criteo_close(r);

    /* the dataset over the same file, bad lines an error */
    struct data_opts o = {.eval_fraction = 0.25, .bad = CRITEO_BAD_ERROR};
    struct dataset *d = NULL;
    plumb_err de = {0};
    if (dataset_open(path, &o, &d, &de) == PLUMB_OK) {
        if (rc == PLUMB_OK && skipped == 0 && d->n[0] + d->n[1] != n) abort();
        for (int sp = 0; sp < 2; sp++)
            if (d->n[sp] > 0) {
                struct criteo_sample s;
                dataset_get(d, sp, (uint64_t)(d->n[sp] - 1), &s);
            }
        dataset_free(d);
    }
    return 0;
}
