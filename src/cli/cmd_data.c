/* plumb data: dataset utilities.
 *   plumb data synth-criteo --rows N --out FILE   writes synthetic Criteo TSV
 *     (the teacher generator of --data synthetic; .gz output when FILE ends
 *     in .gz) and reports the teacher's own AUC on the rows written.
 *   plumb data synth-cifar --out DIR   writes the synthetic class-conditional
 *     images of resnet's --data synthetic as a CIFAR-10 binary directory
 *     (models/resnet/imgsynth.h describes the generator).
 *   plumb data synth-tokens --tokens N --out FILE   writes gpt's synthetic
 *     token chain (models/gpt/data.h) as an llm.c token file, so llm.c and
 *     PyTorch train on the tokens plumb train gpt --data synthetic reads.
 *   plumb data cache FILE   parses a Criteo file into the binary cache the
 *     loader maps (models/ctr/cache.h). */
#include "cli/args.h"
#include "cli/commands.h"
#include "core/file.h"
#include "core/hostinfo.h"
#include "core/timer.h"
#include "models/ctr/cache.h"
#include "models/ctr/eval.h"
#include "models/ctr/synth.h"
#include "models/gpt/data.h"
#include "models/resnet/cifar.h"
#include "models/resnet/imgsynth.h"
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

/* The generators hold what they write in memory: a count whose buffers
 * need more than this host has available is the user's to change (exit 2
 * saying what it needs), not an allocation failure halfway (src/train/
 * trainer.c's check_fits says the same for a model). */
static int fits(const char *cmd, const char *counts, const char *verb, double need, const char *hint, plumb_err *e)
{
    const double have = hostinfo_mem_available();
    if (have <= 0 || need <= have) return PLUMB_OK;
    return err_set(e, PLUMB_EUSAGE, "%s: %s %s %.1f GB of memory; this host has %.1f GB available: %s", cmd, counts, verb,
                   need / 1e9, have / 1e9, hint);
}

/* SIGINT / SIGTERM during synth-criteo's write: the loop stops, the
 * temporary file is removed (a killed run left F.tmp.<pid> behind), then the
 * signal is raised again with its former handler, so the caller sees the
 * process end by that signal as it asked */
static volatile sig_atomic_t g_synth_sig;
static void synth_on_signal(int sig) { g_synth_sig = sig; }

static int synth_criteo(int argc, char **argv)
{
    long rows = 100000, seed = 1234, first = 0;
    const char *out = NULL, *split = "train";
    const struct opt opts[] = {
        {"--rows", OPT_INT, &rows, "100000", "samples (lines) to write", "1..4000000000", "N"},
        {"--out", OPT_STR, &out, NULL, "output file (required); gzip'ed when it ends in .gz", NULL, "FILE"},
        {"--data-seed", OPT_INT, &seed, "1234", "dataset seed (plumb train --data-seed)", "0..", "N"},
        {"--split", OPT_CHOICE, &split, "train", "which split of the synthetic dataset", "train|eval", NULL},
        {"--first", OPT_INT, &first, "0", "index of the first sample written", "0..", "N"},
        {0},
    };
    plumb_err e = {0};
    int rc = args_parse("plumb data synth-criteo --rows N --out FILE [options]",
                        "Write samples of the synthetic teacher dataset (the one `plumb train ctr --data synthetic` "
                        "draws) as Criteo TSV: label, I1..I13, C1..C26. Prints the positive rate and the teacher's "
                        "AUC on the rows written: the ceiling a model trained on this data approaches.",
                        opts, argc, argv, NULL, 0, NULL, &e);
    if (rc == ARGS_HELP) return 0;
    if (rc) return cli_fail("data", &e);
    if (!out) {
        err_set(&e, PLUMB_EUSAGE, "synth-criteo: --out FILE is required");
        return cli_fail("data", &e);
    }
    if (file_check_output("--out", out, &e)) return cli_fail("data", &e);
    if (first > LONG_MAX - rows) {
        err_set(&e, PLUMB_EUSAGE, "--first %ld and --rows %ld: the last sample index passes %ld", first, rows, LONG_MAX);
        return cli_fail("data", &e);
    }
    char what[64];
    snprintf(what, sizeof what, "--rows %ld", rows);
    /* the scores and labels, then eval_auc's (score, label) pairs */
    if (fits("synth-criteo", what, "needs", (double)rows * 4 * sizeof(float), "write fewer, or in parts with --first", &e))
        return cli_fail("data", &e);
    float *p = malloc((size_t)rows * sizeof *p), *y = malloc((size_t)rows * sizeof *y);
    if (!p || !y) {
        free(p), free(y);
        err_set(&e, PLUMB_ENOMEM, "synth-criteo: cannot hold %ld scores", rows);
        return cli_fail("data", &e);
    }
    struct synth *s;
    if (synth_create((uint64_t)seed, &s, &e)) {
        free(p), free(y);
        return cli_fail("data", &e);
    }
    size_t n = strlen(out);
    int gz = n > 3 && !strcmp(out + n - 3, ".gz");
    /* this process's own temporary name (core/file.c's <path>.tmp.<pid>): with one name for every
     * writer, two synth-criteo --out F at once wrote into one file, the first rename moved it while
     * the other still wrote, and the run that said "wrote 300000 rows" left 400000 mixed ones */
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", out, (long)getpid());
    FILE *f = NULL;
    gzFile g = NULL;
    if (gz) g = gzopen(tmp, "wb6");
    else f = fopen(tmp, "w");
    if (!f && !g) {
        synth_free(s);
        free(p), free(y);
        err_set(&e, PLUMB_EUSAGE, "synth-criteo: cannot write %s", tmp);
        return cli_fail("data", &e);
    }
    int sp = !strcmp(split, "eval") ? SYNTH_EVAL : SYNTH_TRAIN;
    double pos = 0;
    int werr = 0, err = 0;
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = synth_on_signal;
    sigemptyset(&sa.sa_mask);
    g_synth_sig = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    for (long i = 0; i < rows && !werr && !g_synth_sig; i++) {
        struct synth_raw r;
        synth_raw_sample(s, sp, (uint64_t)(first + i), &r);
        const char *tk[CRITEO_CAT];
        for (int t = 0; t < CRITEO_CAT; t++) tk[t] = r.token[t];
        char line[1024];
        int len = criteo_format_line(line, sizeof line, r.label, r.dense, r.missing, tk);
        if (len < 0) werr = 1;
        else if (gz) werr = gzwrite(g, line, (unsigned)len) != len;
        else werr = fwrite(line, 1, (size_t)len, f) != (size_t)len;
        if (werr) err = errno;
        p[i] = r.p;
        y[i] = (float)r.label;
        pos += r.label;
    }
    errno = 0;
    if (gz ? gzclose(g) != Z_OK : fclose(f) != 0) {
        if (!werr) err = errno;
        werr = 1;
    }
    synth_free(s);
    if (g_synth_sig) {
        const int sig = (int)g_synth_sig;
        remove(tmp);
        free(p), free(y);
        fprintf(stderr, "plumb data: synth-criteo: %s: stopped, %s not written\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
                out);
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGTERM, &old_term, NULL);
        raise(sig);
        return 128 + sig; /* a handler that returned */
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (!werr && rename(tmp, out) != 0) werr = 1, err = errno;
    if (werr) {
        /* the reason (a full disk: "No space left on device"); it read "writing F failed" alone */
        remove(tmp);
        free(p), free(y);
        err_set(&e, PLUMB_EIO, "synth-criteo: writing %s failed: %s", out, strerror(err ? err : EIO));
        return cli_fail("data", &e);
    }
    double auc = eval_auc(p, y, (size_t)rows);
    printf("wrote %ld rows (%s split, samples %ld..%ld, data seed %ld) to %s\n", rows, split, first, first + rows - 1,
           seed, out);
    printf("positive rate %.4f, teacher auc %.6f\n", pos / (double)rows, auc);
    free(p), free(y);
    return 0;
}

static int synth_cifar(int argc, char **argv)
{
    long train = 50000, test = 10000, seed = 1234;
    const char *out = NULL;
    const struct opt opts[] = {
        {"--out", OPT_STR, &out, NULL, "output directory (required; created if missing)", NULL, "DIR"},
        {"--train", OPT_INT, &train, "50000", "training images, split over data_batch_1..5.bin", "5..5000000", "N"},
        {"--test", OPT_INT, &test, "10000", "test images (test_batch.bin)", "1..5000000", "N"},
        {"--data-seed", OPT_INT, &seed, "1234", "dataset seed (plumb train resnet --data-seed)", "0..", "N"},
        {0},
    };
    plumb_err e = {0};
    int rc = args_parse("plumb data synth-cifar --out DIR [options]",
                        "Write the synthetic class-conditional images that `plumb train resnet --data synthetic` "
                        "generates, as a CIFAR-10 binary directory: data_batch_1.bin .. data_batch_5.bin (the training "
                        "images in five parts), test_batch.bin and batches.meta.txt. Each record is a label byte and "
                        "3072 pixel bytes (CHW). Ten classes, each a grating of its own orientation, frequency and "
                        "colours with a blob at its own place, under per-image phase, contrast, shift, a distractor "
                        "grating and noise: learnable by a small convolutional net, not by a lookup.",
                        opts, argc, argv, NULL, 0, NULL, &e);
    if (rc == ARGS_HELP) return 0;
    if (rc) return cli_fail("data", &e);
    if (!out) {
        err_set(&e, PLUMB_EUSAGE, "synth-cifar: --out DIR is required");
        return cli_fail("data", &e);
    }
    char what[96];
    snprintf(what, sizeof what, "--train %ld and --test %ld", train, test);
    /* both sets, and one file's records while it is written */
    const double imgs = (double)train + (double)test + (double)(train / CIFAR_TRAIN_FILES + 1 > test ? train / CIFAR_TRAIN_FILES + 1 : test);
    if (fits("synth-cifar", what, "need", imgs * CIFAR_RECORD, "write fewer images", &e)) return cli_fail("data", &e);
    if (file_check_output_dir("--out", out, &e)) return cli_fail("data", &e);
    struct cifar_set tr, te;
    if (imgsynth_cifar_set((uint64_t)seed, IMG_SPLIT_TRAIN, 0, (size_t)train, &tr, &e)) return cli_fail("data", &e);
    if (imgsynth_cifar_set((uint64_t)seed, IMG_SPLIT_TEST, 0, (size_t)test, &te, &e)) {
        cifar_set_free(&tr);
        return cli_fail("data", &e);
    }
    char path[4200];
    rc = PLUMB_OK;
    long counts[CIFAR_CLASSES] = {0};
    for (size_t i = 0; i < tr.n; i++) counts[tr.labels[i]]++;
    for (int b = 0; b < CIFAR_TRAIN_FILES && !rc; b++) {
        size_t first = tr.n * (size_t)b / CIFAR_TRAIN_FILES, last = tr.n * (size_t)(b + 1) / CIFAR_TRAIN_FILES;
        char name[32];
        snprintf(name, sizeof name, "data_batch_%d.bin", b + 1);
        rc = file_join(path, sizeof path, out, name, &e);
        if (!rc) rc = cifar_write_file(path, &tr, first, last - first, &e);
    }
    if (!rc) rc = file_join(path, sizeof path, out, "test_batch.bin", &e);
    if (!rc) rc = cifar_write_file(path, &te, 0, te.n, &e);
    static const char *const names[CIFAR_CLASSES] = {"grating0", "grating1", "grating2", "grating3", "grating4",
                                                     "grating5", "grating6", "grating7", "grating8", "grating9"};
    if (!rc) rc = cifar_write_meta(out, names, &e);
    cifar_set_free(&tr);
    cifar_set_free(&te);
    if (rc) return cli_fail("data", &e);
    printf("wrote %ld training images (data_batch_1..5.bin) and %ld test images (test_batch.bin) to %s, data seed %ld\n",
           train, test, out, seed);
    printf("training labels per class:");
    for (int k = 0; k < CIFAR_CLASSES; k++) printf(" %ld", counts[k]);
    printf("\n");
    return 0;
}

static int synth_tokens(int argc, char **argv)
{
    long tokens = 1048576, vocab = 50257, seed = 1234, first = 0;
    const char *out = NULL, *split = "train";
    const struct opt opts[] = {
        {"--tokens", OPT_INT, &tokens, "1048576", "tokens to write", "1..2147483647", "N"},
        {"--out", OPT_STR, &out, NULL, "output llm.c token file (required)", NULL, "FILE"},
        {"--vocab", OPT_INT, &vocab, "50257", "vocabulary of the chain (gpt2-124m: 50257; gpt-tiny: 256)", "2..65536", "V"},
        {"--data-seed", OPT_INT, &seed, "1234", "dataset seed (plumb train gpt --data-seed)", "0..", "N"},
        {"--split", OPT_CHOICE, &split, "train", "which split of the synthetic stream", "train|val", NULL},
        {"--first", OPT_INT, &first, "0", "position of the first token written in the split", "0..", "N"},
        {0},
    };
    plumb_err e = {0};
    int rc = args_parse("plumb data synth-tokens --out FILE [options]",
                        "Write the synthetic token stream that `plumb train gpt --data synthetic` draws (a first-order "
                        "Markov chain with a random successor table, restarted every 1024 tokens; models/gpt/data.h) "
                        "as an llm.c token file: 256 int32 header (magic 20240520, version 1, count), then uint16 "
                        "tokens. llm.c's train_gpt2cu and bench/gpt_pytorch.py --tokens read it as they are.",
                        opts, argc, argv, NULL, 0, NULL, &e);
    if (rc == ARGS_HELP) return 0;
    if (rc) return cli_fail("data", &e);
    if (!out) {
        err_set(&e, PLUMB_EUSAGE, "synth-tokens: --out FILE is required");
        return cli_fail("data", &e);
    }
    if (file_check_output("--out", out, &e)) return cli_fail("data", &e);
    /* the chain has 2^32 blocks of GPT_SYNTH_BLOCK positions (models/gpt/data.h);
     * a later position would repeat an earlier one */
    const uint64_t last = (uint64_t)GPT_SYNTH_BLOCK << 32;
    if ((uint64_t)first > last || (uint64_t)tokens > last - (uint64_t)first) {
        err_set(&e, PLUMB_EUSAGE, "--first %ld and --tokens %ld: past the synthetic chain's %llu positions (2^42; expected "
                "--first + --tokens <= 2^42)", first, tokens, (unsigned long long)last);
        return cli_fail("data", &e);
    }
    char what[64];
    snprintf(what, sizeof what, "--tokens %ld", tokens);
    if (fits("synth-tokens", what, "needs", (double)tokens * (sizeof(int32_t) + sizeof(uint16_t)),
             "write fewer, or in parts with --first", &e))
        return cli_fail("data", &e);
    const int k = strcmp(split, "val") ? GPT_TRAIN : GPT_VAL;
    const uint64_t end = (uint64_t)first + (uint64_t)tokens;
    struct gpt_data_opts o = {.seed = (uint64_t)seed, .vocab = (int)vocab, .val_fraction = 0.1};
    if (k == GPT_TRAIN) o.synth_train = end;
    else o.synth_val = end;
    struct gpt_data *d = NULL;
    if (gpt_data_open("synthetic", NULL, &o, &d, &e)) return cli_fail("data", &e);
    int32_t *t32 = malloc((size_t)tokens * sizeof *t32);
    uint16_t *t16 = malloc((size_t)tokens * sizeof *t16);
    if (!t32 || !t16) rc = err_set(&e, PLUMB_ENOMEM, "synth-tokens: cannot hold %ld tokens", tokens);
    if (!rc) rc = gpt_data_read(d, k, (uint64_t)first, (size_t)tokens, t32, &e); /* synthetic: cannot fail */
    if (!rc) {
        for (long i = 0; i < tokens; i++) t16[i] = (uint16_t)t32[i];
        rc = gpt_token_file_write(out, t16, (size_t)tokens, &e);
    }
    free(t32);
    free(t16);
    gpt_data_free(d);
    if (rc) return cli_fail("data", &e);
    printf("wrote %ld synthetic tokens (%s split from %ld, vocabulary %ld, data seed %ld) to %s\n", tokens, split,
           first, vocab, seed, out);
    return 0;
}

/* plumb data cache FILE: the parsed samples of a Criteo file written once
 * as a binary cache the loader maps (models/ctr/cache.h). */
static int data_cache(int argc, char **argv)
{
    const char *out = NULL, *bad = "error";
    long threads = 0;
    const struct opt opts[] = {
        {"--out", OPT_STR, &out, NULL, "the cache file, a name ending in .plumbcache (default: FILE.plumbcache, "
         "which plumb train --data FILE then maps)", NULL, "PATH"},
        {"--bad-lines", OPT_CHOICE, &bad, "error", "a malformed line: an error, or skipped and counted", "error|skip", NULL},
        {"--threads", OPT_INT, &threads, "0", "parse threads (0: all cores)", "0..1024", "N"},
        {0},
    };
    plumb_err e = {0};
    char *pos[2];
    int npos = 0;
    int rc = args_parse("plumb data cache FILE [options]",
                        "Parse a Criteo TSV file (plain or gzip) on all cores and write its samples as a binary cache "
                        "(header: format version, the source's size and mtime, the row count, checksums). plumb "
                        "train --data FILE maps FILE.plumbcache when it exists and refuses a stale (the source "
                        "changed) or corrupt one, naming it; --data CACHE uses a cache directly.",
                        opts, argc, argv, pos, 2, &npos, &e);
    if (rc == ARGS_HELP) return 0;
    if (rc) return cli_fail("data", &e);
    if (npos != 1) {
        err_set(&e, PLUMB_EUSAGE, "cache: expected one FILE (got %d argument%s)", npos, npos == 1 ? "" : "s");
        return cli_fail("data", &e);
    }
    if (criteo_cache_is(pos[0])) {
        err_set(&e, PLUMB_EUSAGE, "cache %s: a plumb cache already (expected a Criteo TSV file, plain or gzip)", pos[0]);
        return cli_fail("data", &e);
    }
    char def[4200];
    if (!out) {
        snprintf(def, sizeof def, "%s%s", pos[0], CRITEO_CACHE_SUFFIX);
        out = def;
    }
    /* plumb train --data knows a cache by its name only */
    if (!criteo_cache_is(out)) {
        err_set(&e, PLUMB_EUSAGE, "--out %s: expected a name ending in %s (plumb train --data maps a cache by that "
                "name and reads any other file as Criteo TSV)", out, CRITEO_CACHE_SUFFIX);
        return cli_fail("data", &e);
    }
    if (file_check_output("--out", out, &e)) return cli_fail("data", &e);
    struct criteo_cache info;
    double t0 = timer_now();
    if (criteo_cache_write(pos[0], out, !strcmp(bad, "skip") ? CRITEO_BAD_SKIP : CRITEO_BAD_ERROR, (int)threads, &info,
                           &e))
        return cli_fail("data", &e);
    printf("wrote %s: %ld samples of %s (%ld malformed lines skipped, %ld truncated) in %.2f s\n", out, info.rows,
           pos[0], info.skipped, info.truncated, timer_now() - t0);
    return 0;
}

int cmd_data(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "cache")) return data_cache(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "synth-tokens")) return synth_tokens(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "synth-criteo")) return synth_criteo(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "synth-cifar")) return synth_cifar(argc - 1, argv + 1);
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: plumb data SUBCOMMAND [options]\n\nDataset utilities.\n\nsubcommands:\n"
               "  synth-criteo   write synthetic Criteo TSV from the teacher model and report the teacher's AUC\n"
               "  synth-cifar    write synthetic class-conditional images as a CIFAR-10 binary directory\n"
               "  cache          parse a Criteo file once into a binary cache that plumb train maps\n"
               "  synth-tokens   write gpt's synthetic token chain as an llm.c token file\n"
               "\nRun 'plumb data SUBCOMMAND --help' for its options.\n");
        return 0;
    }
    plumb_err e = {0};
    if (argc >= 2 && argv[1][0] == '-')
        err_set(&e, PLUMB_EUSAGE, "unknown option '%s' (expected a subcommand: cache, synth-criteo, synth-cifar or synth-tokens)", argv[1]);
    else
        err_set(&e, PLUMB_EUSAGE, "%s%s%s (expected cache, synth-criteo, synth-cifar or synth-tokens)", argc >= 2 ? "unknown subcommand '" : "no subcommand",
                argc >= 2 ? argv[1] : "", argc >= 2 ? "'" : "");
    return cli_fail("data", &e);
}
