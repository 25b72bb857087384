/* libFuzzer target: gpt's llm.c token-file reader (models/gpt/data.h,
 * gpt_data_open on "tokens:FILE") on the bytes as a file, opened twice: as
 * the train stream with the held-out validation tail, and as both --data and
 * --eval-data. Checked against the format (a header of 256 little-endian
 * int32: magic 20240520, version 1, token count n > 0; then exactly n uint16
 * tokens): the reader accepts exactly the files that follow it, and a
 * rejection names the file in its message; an accepted file's splits add up
 * to n, their tokens (gpt_data_read) are the file's, the vocabulary is the
 * largest token + 1, and every train and validation window (gpt_data_sample,
 * a few sequence lengths and epochs) is the stream's tokens at its offset. */
#include "fuzz_util.h"
#include "models/gpt/data.h"
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_quiet();
    return 0;
}

static int32_t le32(const uint8_t *p) { return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24); }

/* token i of the file, from its bytes (little-endian) */
static int32_t file_token(const uint8_t *data, uint64_t i) { return data[1024 + 2 * i] | data[1024 + 2 * i + 1] << 8; }

/* every window of both splits against the stream: split k's token p is
 * file token base[k] + p */
static void check_windows(const struct gpt_data *d, const uint8_t *data, const uint64_t base[2])
{
    static const int Ts[] = {1, 2, 7, 64};
    int32_t tok[64], tgt[64];
    for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
        const int T = Ts[ti];
        for (int k = 0; k < 2; k++) {
            const uint64_t n = gpt_data_tokens(d, k);
            const long ns = gpt_data_samples(d, k, T);
            if (ns < 0) abort();
            for (long epoch = 0; epoch < (k == GPT_TRAIN ? 2 : 1); epoch++)
                for (long i = 0; i < ns && i < 256; i++) {
                    gpt_data_sample(d, k, T, 1, epoch, i, tok, tgt, NULL);
                    const uint64_t o = (k == GPT_TRAIN ? (uint64_t)gpt_data_shift(1, epoch, T) : 0) + (uint64_t)i * T;
                    for (int t = 0; t < T; t++) {
                        if (k == GPT_TRAIN) {
                            /* a train window lies inside the split, its targets one further */
                            if (o + (uint64_t)t + 1 >= n) abort();
                            if (tok[t] != file_token(data, base[k] + o + t)) abort();
                            if (tgt[t] != file_token(data, base[k] + o + t + 1)) abort();
                        } else {
                            /* validation: past the end, token 0 and target -1 (unscored) */
                            const int32_t wt = o + t < n ? file_token(data, base[k] + o + t) : 0;
                            const int32_t wg = o + t + 1 < n ? file_token(data, base[k] + o + t + 1) : -1;
                            if (tok[t] != wt || tgt[t] != wg) abort();
                        }
                    }
                }
        }
    }
}

static void check_open(const char *spec, const char *val, const uint8_t *data, uint64_t n)
{
    struct gpt_data_opts o = {.seed = 1, .vocab = 50257, .val_fraction = 0.1};
    struct gpt_data *d = NULL;
    plumb_err e = {0};
    if (gpt_data_open(spec, val, &o, &d, &e) != PLUMB_OK || !d) abort();
    const uint64_t ntr = gpt_data_tokens(d, GPT_TRAIN), nva = gpt_data_tokens(d, GPT_VAL);
    /* with --eval-data the same file is each split; else a split of it */
    if (val ? (ntr != n || nva != n) : ntr + nva != n) abort();
    const uint64_t base[2] = {0, val ? 0 : ntr};
    int32_t mx = 0;
    for (uint64_t i = 0; i < n; i++) mx = file_token(data, i) > mx ? file_token(data, i) : mx;
    if (gpt_data_vocab(d) != mx + 1) abort();
    if (gpt_data_val_vocab(d) != (val ? mx + 1 : 0)) abort();
    int32_t *all = malloc((n ? n : 1) * sizeof *all);
    if (!all) abort();
    for (int k = 0; k < 2; k++) {
        const uint64_t nk = gpt_data_tokens(d, k);
        gpt_data_read(d, k, 0, (size_t)nk, all, NULL);
        for (uint64_t i = 0; i < nk; i++)
            if (all[i] != file_token(data, base[k] + i)) abort();
    }
    free(all);
    check_windows(d, data, base);
    gpt_data_free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64], spec[80];
    fuzz_memfile("gpt_tokens", data, size, path, sizeof path);
    snprintf(spec, sizeof spec, "tokens:%s", path);
    /* the format, read here from the bytes */
    const int32_t count = size >= 1024 ? le32(data + 8) : 0;
    const int valid = size >= 1024 && le32(data) == GPT_TOKEN_MAGIC && le32(data + 4) == GPT_TOKEN_VERSION &&
                      count > 0 && (uint64_t)size == 1024 + 2 * (uint64_t)count;
    struct gpt_data_opts o = {.seed = 1, .vocab = 50257, .val_fraction = 0.1};
    struct gpt_data *d = NULL;
    plumb_err e = {0};
    const int rc = gpt_data_open(spec, NULL, &o, &d, &e);
    if (!valid) {
        /* rejected, with a message naming the file */
        if (rc == PLUMB_OK || d || !e.msg[0] || !strstr(e.msg, path)) abort();
        return 0;
    }
    if (rc != PLUMB_OK) abort();
    gpt_data_free(d);
    check_open(spec, NULL, data, (uint64_t)count);
    check_open(spec, spec, data, (uint64_t)count);
    return 0;
}
