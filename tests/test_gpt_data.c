/* gpt data (models/gpt/data.h) and eval (models/gpt/eval.h): llm.c token
 * files across shards (and past 2^32 tokens, on sparse files), every format
 * error named, text and synthetic sources, the sample windows (pure
 * functions of seed, epoch and index; every validation token a target
 * exactly once), N-rank batches that are the 1-rank sample set, and the
 * exact eval sums. */
#include "test.h"
#include "core/hash.h"
#include "core/file.h"
#include "models/gpt/data.h"
#include "models/gpt/eval.h"
#include "train/sampler.h"
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void path_in_tmp(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", test_tmpdir(), name); }

static void write_raw(const char *path, const int32_t *h, int nh, const uint16_t *tok, size_t n)
{
    FILE *f = fopen(path, "wb");
    int32_t head[256] = {0};
    memcpy(head, h, (size_t)nh * 4);
    fwrite(head, 4, 256, f);
    if (n) fwrite(tok, 2, n, f);
    fclose(f);
}

TEST(gpt_data_token_files_across_shards)
{
    char dir[512], p[600];
    snprintf(dir, sizeof dir, "%s/shards", test_tmpdir());
    plumb_err e = {0};
    REQUIRE(file_mkdirs(dir, &e) == 0);
    /* 3 train shards of 1000, 37, 2000 tokens: token at global position g is g mod 50000 */
    const size_t ns[3] = {1000, 37, 2000};
    size_t g = 0;
    for (int s = 0; s < 3; s++) {
        uint16_t *t = malloc(ns[s] * 2);
        for (size_t i = 0; i < ns[s]; i++) t[i] = (uint16_t)((g + i) % 50000);
        snprintf(p, sizeof p, "%s/fineweb_train_%06d.bin", dir, s);
        REQUIRE(gpt_token_file_write(p, t, ns[s], &e) == 0);
        g += ns[s];
        free(t);
    }
    uint16_t vt[300];
    for (int i = 0; i < 300; i++) vt[i] = (uint16_t)(7 * i);
    snprintf(p, sizeof p, "%s/fineweb_val_000000.bin", dir);
    REQUIRE(gpt_token_file_write(p, vt, 300, &e) == 0);
    char spec[600], vspec[600];
    snprintf(spec, sizeof spec, "tokens:%s/fineweb_train_*.bin", dir);
    snprintf(vspec, sizeof vspec, "%s/fineweb_val_*.bin", dir);
    struct gpt_data_opts o = {1, 50257, 0, 0, 0, 0};
    struct gpt_data *d = NULL;
    REQUIRE(gpt_data_open(spec, vspec, &o, &d, &e) == 0);
    CHECK_EQ_INT(gpt_data_tokens(d, GPT_TRAIN), 3037);
    CHECK_EQ_INT(gpt_data_tokens(d, GPT_VAL), 300);
    CHECK_EQ_INT(gpt_data_vocab(d), 3037); /* the largest id (train: 3036; val: 2093), + 1 */
    CHECK(strstr(gpt_data_describe(d), "3 token files") != NULL);
    /* a read across both shard boundaries is the concatenation */
    int32_t buf[1100];
    gpt_data_read(d, GPT_TRAIN, 990, 1100, buf, NULL);
    int bad = 0;
    for (int i = 0; i < 1100; i++) bad += buf[i] != (990 + i) % 50000;
    CHECK_EQ_INT(bad, 0);
    /* train windows: T = 64 -> floor(3037/64) - 1 = 46 samples, each the stream at shift + 64 i */
    const int T = 64;
    CHECK_EQ_INT(gpt_data_samples(d, GPT_TRAIN, T), 46);
    int32_t tok[64], tgt[64];
    for (long ep = 0; ep < 4; ep++) {
        const int sh = gpt_data_shift(1, ep, T);
        CHECK(sh >= 0 && sh < T);
        for (long i = 0; i < 46; i += 45) {
            gpt_data_sample(d, GPT_TRAIN, T, 1, ep, i, tok, tgt, NULL);
            for (int t = 0; t < T; t++) {
                bad += tok[t] != (int32_t)((sh + 64 * i + t) % 50000);
                bad += tgt[t] != (int32_t)((sh + 64 * i + t + 1) % 50000);
            }
        }
    }
    CHECK_EQ_INT(bad, 0);
    int shifts_differ = 0;
    for (long ep = 1; ep < 8; ep++) shifts_differ |= gpt_data_shift(1, ep, T) != gpt_data_shift(1, 0, T);
    CHECK(shifts_differ);
    gpt_data_free(d);
    /* fixed windows: sample i at i*T in every epoch */
    o.fixed_windows = 1;
    REQUIRE(gpt_data_open(spec, vspec, &o, &d, &e) == 0);
    for (long ep = 0; ep < 3; ep++) {
        gpt_data_sample(d, GPT_TRAIN, T, 1, ep, 7, tok, tgt, NULL);
        for (int t = 0; t < T; t++) bad += tok[t] != 64 * 7 + t || tgt[t] != 64 * 7 + t + 1;
    }
    CHECK_EQ_INT(bad, 0);
    gpt_data_free(d);
    o.fixed_windows = 0;
    /* no match */
    snprintf(spec, sizeof spec, "%s/nothing_*.bin", dir);
    CHECK(gpt_data_open(spec, NULL, &o, &d, &e) == PLUMB_EUSAGE);
    CHECK(strstr(e.msg, "no token files match") != NULL);
    /* a directory in the pattern that does not exist: named, with the reason */
    snprintf(spec, sizeof spec, "%s/no_such_dir/*.bin", dir);
    CHECK(gpt_data_open(spec, NULL, &o, &d, &e) == PLUMB_EUSAGE);
    CHECK(strstr(e.msg, "no token files match") != NULL);
    CHECK(strstr(e.msg, "no_such_dir") != NULL && strstr(e.msg, "No such file") != NULL);
}

TEST(gpt_data_token_file_errors_are_named)
{
    char p[600];
    plumb_err e = {0};
    struct gpt_data *d = NULL;
    struct gpt_data_opts o = {1, 50257, 0, 0, 0, 0};
    uint16_t tok[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    struct {
        const char *name;
        int32_t h[3];
        size_t n;
        const char *want;
    } cases[] = {
        {"magic.bin", {20240521, 1, 10}, 10, "magic 20240521 (expected 20240520"},
        {"version.bin", {20240520, 2, 10}, 10, "version 2 (expected 1"},
        {"count.bin", {20240520, 1, 0}, 10, "token count 0 (expected > 0)"},
        {"short.bin", {20240520, 1, 10}, 9, "truncated: 1042 bytes for 10 tokens (expected 1044"},
        {"long.bin", {20240520, 1, 9}, 10, "needs 1042 (expected the count to match"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        path_in_tmp(p, sizeof p, cases[i].name);
        write_raw(p, cases[i].h, 3, tok, cases[i].n);
        CHECK(gpt_data_open(p, NULL, &o, &d, &e) == PLUMB_EUSAGE);
        CHECK_MSG(strstr(e.msg, cases[i].name) && strstr(e.msg, cases[i].want), "%s: %s", cases[i].name, e.msg);
    }
    path_in_tmp(p, sizeof p, "header_only.bin");
    FILE *f = fopen(p, "wb");
    fwrite("abc", 1, 3, f);
    fclose(f);
    CHECK(gpt_data_open(p, NULL, &o, &d, &e) == PLUMB_EUSAGE);
    CHECK(strstr(e.msg, "truncated token file: 3 bytes") != NULL);
}

/* A token file that is a directory or a FIFO (or a pipe: tokens:<(cat f))
 * cannot be memory-mapped: exit 2 naming it, at once. Before, a directory
 * was exit 3 ("mmap ... failed: No such device") and a FIFO without a
 * writer blocked in open() forever; the FIFO case runs in a child that is
 * killed after 20 s, so a regression fails instead of hanging the suite. */
TEST(gpt_data_token_file_not_regular_is_named)
{
    char dir[600], fifo[600];
    plumb_err e = {0};
    struct gpt_data *d = NULL;
    struct gpt_data_opts o = {1, 50257, 0, 0, 0, 0};
    path_in_tmp(dir, sizeof dir, "tokdir.bin");
    REQUIRE(file_mkdirs(dir, &e) == 0);
    CHECK(gpt_data_open(dir, NULL, &o, &d, &e) == PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, dir) && strstr(e.msg, "not a regular file"), "%s", e.msg);
    path_in_tmp(fifo, sizeof fifo, "tokfifo.bin");
    REQUIRE(mkfifo(fifo, 0644) == 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        plumb_err ce = {0};
        struct gpt_data *cd = NULL;
        int rc = gpt_data_open(fifo, NULL, &o, &cd, &ce);
        _exit(rc == PLUMB_EUSAGE && strstr(ce.msg, fifo) && strstr(ce.msg, "not a regular file") ? 0 : 1);
    }
    int status = -1, waited = 0;
    for (int i = 0; i < 200 && !waited; i++) {
        waited = waitpid(pid, &status, WNOHANG) == pid;
        if (!waited) usleep(100000);
    }
    if (!waited) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    CHECK_MSG(waited, "gpt_data_open on a FIFO did not return in 20 s");
    CHECK(waited && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* the same for the validation files */
    char good[600];
    path_in_tmp(good, sizeof good, "tok_ok.bin");
    uint16_t tok[300];
    for (int i = 0; i < 300; i++) tok[i] = (uint16_t)i;
    REQUIRE(gpt_token_file_write(good, tok, 300, &e) == 0);
    CHECK(gpt_data_open(good, dir, &o, &d, &e) == PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, dir) && strstr(e.msg, "not a regular file"), "%s", e.msg);
}

/* Two sparse shards of 2^31 - 1 tokens and a small third: positions past
 * 2^32 are read right (64-bit offsets; llm.c's int offsets break past 2 GB). */
TEST(gpt_data_token_offsets_past_4g)
{
    char p[3][600];
    const int32_t n = 2147483647;
    for (int s = 0; s < 3; s++) {
        char nm[32];
        snprintf(nm, sizeof nm, "big_%d.bin", s);
        path_in_tmp(p[s], sizeof p[s], nm);
        const int32_t cnt = s < 2 ? n : 100;
        int fd = open(p[s], O_CREAT | O_TRUNC | O_WRONLY, 0644);
        REQUIRE(fd >= 0);
        int32_t h[256] = {20240520, 1, cnt};
        REQUIRE(write(fd, h, sizeof h) == (ssize_t)sizeof h);
        if (ftruncate(fd, 1024 + 2 * (off_t)cnt)) {
            close(fd);
            TEST_SKIP("no 4 GiB sparse files in %s", test_tmpdir());
        }
        /* marks: the last token of shard 0; shard 2 (from 2^32 - 2) tokens 2..4 = positions 2^32.. */
        uint16_t v[3] = {11, 22, 33};
        if (s == 0) REQUIRE(pwrite(fd, v, 2, 1024 + 2 * (off_t)(n - 1)) == 2);
        if (s == 2) REQUIRE(pwrite(fd, v, 6, 1024 + 2 * 2) == 6);
        /* one large id amid shard 1's holes: the id scan skips holes, not data */
        const uint16_t big = 50000;
        if (s == 1) REQUIRE(pwrite(fd, &big, 2, 1024 + 2 * (off_t)1000000007) == 2);
        close(fd);
    }
    char spec[700], vspec[700];
    snprintf(spec, sizeof spec, "%s/big_*.bin", test_tmpdir());
    snprintf(vspec, sizeof vspec, "%s", p[2]);
    struct gpt_data_opts o = {1, 50257, 0, 0, 0, 0};
    struct gpt_data *d = NULL;
    plumb_err e = {0};
    REQUIRE(gpt_data_open(spec, vspec, &o, &d, &e) == 0);
    CHECK_EQ_INT(gpt_data_tokens(d, GPT_TRAIN), 2 * (uint64_t)n + 100);
    CHECK_EQ_INT(gpt_data_vocab(d), 50001);
    int32_t got[4];
    gpt_data_read(d, GPT_TRAIN, (uint64_t)n - 1, 2, got, NULL);
    CHECK(got[0] == 11 && got[1] == 0);
    gpt_data_read(d, GPT_TRAIN, 4294967296ull, 3, got, NULL);
    CHECK(got[0] == 11 && got[1] == 22 && got[2] == 33);
    /* a window across the 2^32 boundary */
    const int T = 8;
    long last = gpt_data_samples(d, GPT_TRAIN, T) - 1;
    int32_t tok[8], tgt[8];
    gpt_data_sample(d, GPT_TRAIN, T, 1, 0, last, tok, tgt, NULL);
    CHECK(last * T + gpt_data_shift(1, 0, T) + T < (long long)gpt_data_tokens(d, GPT_TRAIN));
    gpt_data_free(d);
    for (int s = 0; s < 3; s++) unlink(p[s]);
}

TEST(gpt_data_text_and_val_coverage)
{
    char p[600];
    path_in_tmp(p, sizeof p, "text.txt");
    FILE *f = fopen(p, "wb");
    const int N = 5000;
    for (int i = 0; i < N; i++) fputc("abcdefghij\n"[i % 11] + (i % 97 == 0), f);
    fclose(f);
    char spec[700];
    snprintf(spec, sizeof spec, "text:%s", p);
    struct gpt_data_opts o = {3, 0, 0, 0, 0.1, 0};
    struct gpt_data *d = NULL;
    plumb_err e = {0};
    REQUIRE(gpt_data_open(spec, NULL, &o, &d, &e) == 0);
    CHECK_EQ_INT(gpt_data_vocab(d), 256);
    CHECK_EQ_INT(gpt_data_tokens(d, GPT_VAL), 500);
    CHECK_EQ_INT(gpt_data_tokens(d, GPT_TRAIN), 4500);
    /* val: ceil(499 / 32) = 16 windows; targets are tokens 1..499 of the split, once each */
    const int T = 32;
    const long nv = gpt_data_samples(d, GPT_VAL, T);
    CHECK_EQ_INT(nv, 16);
    int32_t all[600], tok[32], tgt[32];
    gpt_data_read(d, GPT_VAL, 0, 500, all, NULL);
    CHECK(all[0] == (int32_t)(unsigned char)"abcdefghij\n"[4500 % 11] + (4500 % 97 == 0));
    long scored = 0, bad = 0;
    for (long i = 0; i < nv; i++) {
        gpt_data_sample(d, GPT_VAL, T, 3, 0, i, tok, tgt, NULL);
        for (int t = 0; t < T; t++) {
            const long pos = i * T + t;
            if (tgt[t] >= 0) {
                scored++;
                bad += tgt[t] != all[pos + 1] || tok[t] != all[pos];
            } else {
                bad += pos + 1 < 500; /* unscored only past the end */
            }
        }
    }
    CHECK_EQ_INT(scored, 499);
    CHECK_EQ_INT(bad, 0);
    gpt_data_free(d);
    snprintf(spec, sizeof spec, "text:%s/missing.txt", test_tmpdir());
    CHECK(gpt_data_open(spec, NULL, &o, &d, &e) != 0);
    CHECK(strstr(e.msg, "missing.txt") != NULL);
}

/* Spec errors name the option: "text:" without a file said "open : No such
 * file or directory"; a validation fraction of 0.5 or more said "validation
 * fraction 0.6", not the option --eval-fraction that set it. */
TEST(gpt_data_spec_errors_name_the_option)
{
    struct gpt_data_opts o = {3, 0, 0, 0, 0.1, 0};
    struct gpt_data *d = NULL;
    plumb_err e = {0};
    CHECK_EQ_INT(gpt_data_open("text:", NULL, &o, &d, &e), PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "--data text:") && strstr(e.msg, "expected text:FILE"), "%s", e.msg);
    o.val_fraction = 0.6;
    CHECK_EQ_INT(gpt_data_open("synthetic", NULL, &o, &d, &e), PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "--eval-fraction 0.6") && strstr(e.msg, "below 0.5"), "%s", e.msg);
}

TEST(gpt_data_synthetic_chain_is_pure)
{
    struct gpt_data_opts o = {9, 1000, 1 << 16, 1 << 12, 0, 0};
    struct gpt_data *d = NULL, *d2 = NULL;
    plumb_err e = {0};
    REQUIRE(gpt_data_open("synthetic", NULL, &o, &d, &e) == 0);
    REQUIRE(gpt_data_open("synthetic", NULL, &o, &d2, &e) == 0);
    int32_t a[4096], b[4096];
    gpt_data_read(d, GPT_TRAIN, 3000, 4096, a, NULL);
    gpt_data_read(d2, GPT_TRAIN, 3000, 4096, b, NULL);
    CHECK(!memcmp(a, b, sizeof a));
    /* random access: a read from inside equals the long read's slice */
    gpt_data_read(d, GPT_TRAIN, 3000 + 1500, 700, b, NULL);
    CHECK(!memcmp(a + 1500, b, 700 * 4));
    /* the chain: the most frequent successor of each token follows it about
     * 80% of the time (205/256 plus the uniform draws that hit it) */
    int bad = 0;
    for (int i = 0; i < 4096; i++) bad += a[i] < 0 || a[i] >= 1000;
    CHECK_EQ_INT(bad, 0);
    int32_t *big = malloc(sizeof(int32_t) * 200000);
    gpt_data_read(d, GPT_TRAIN, 0, 200000, big, NULL);
    /* count[p][q]: how often q follows p; the chain's successor is the mode */
    int *count = calloc((size_t)1000 * 1000, sizeof(int));
    long follow = 0, pairs = 0;
    for (int i = 1; i < 200000; i++)
        if (i % 1024) count[(size_t)big[i - 1] * 1000 + big[i]]++; /* blocks restart at multiples of 1024 */
    for (int p = 0; p < 1000; p++) {
        int mx = 0;
        long tot = 0;
        for (int q = 0; q < 1000; q++) {
            tot += count[(size_t)p * 1000 + q];
            mx = count[(size_t)p * 1000 + q] > mx ? count[(size_t)p * 1000 + q] : mx;
        }
        follow += mx;
        pairs += tot;
    }
    free(count);
    const double frac = (double)follow / (double)pairs;
    CHECK_MSG(frac > 0.7 && frac < 0.9, "successor followed %.3f of the time (expected about 0.8)", frac);
    free(big);
    /* the val split is another stream with the same successor table */
    gpt_data_read(d, GPT_VAL, 0, 64, b, NULL);
    CHECK(memcmp(a, b, 64 * 4) != 0);
    gpt_data_free(d);
    gpt_data_free(d2);
}

/* The batches of N ranks are the 1-rank batch split up: the same sample
 * windows, whatever the rank count. */
TEST(gpt_data_ranks_see_the_one_rank_samples)
{
    struct gpt_data_opts o = {4, 300, 1 << 15, 1 << 11, 0, 0};
    struct gpt_data *d = NULL;
    plumb_err e = {0};
    REQUIRE(gpt_data_open("synthetic", NULL, &o, &d, &e) == 0);
    const int T = 16, Bg = 12, M = 4;
    const long n = gpt_data_samples(d, GPT_TRAIN, T);
    int32_t one_tok[12 * 16], one_tgt[12 * 16];
    for (long step = 0; step < 3; step++) {
        struct sampler s;
        REQUIRE(sampler_init(&s, n, Bg, M, 4, 1, &e) == 0);
        uint32_t idx[12];
        int sv[12];
        struct sampler_step st;
        REQUIRE(sampler_get(&s, step, 0, 1, &st, idx, sv, &e) == 0);
        gpt_data_fill(d, GPT_TRAIN, T, 4, st.epoch, idx, (int)st.local_valid, Bg, one_tok, one_tgt, NULL);
        sampler_free(&s);
        for (int W = 2; W <= 3; W++) {
            int32_t cat_tok[12 * 16], cat_tgt[12 * 16];
            int rows = 0;
            for (int r = 0; r < W; r++) {
                REQUIRE(sampler_init(&s, n, Bg, M, 4, 1, &e) == 0);
                REQUIRE(sampler_get(&s, step, r, W, &st, idx, sv, &e) == 0);
                gpt_data_fill(d, GPT_TRAIN, T, 4, st.epoch, idx, (int)st.local_valid, (int)st.local_valid,
                              cat_tok + rows * T, cat_tgt + rows * T, NULL);
                rows += (int)st.local_valid;
                sampler_free(&s);
            }
            CHECK_EQ_INT(rows, Bg);
            CHECK(!memcmp(cat_tok, one_tok, sizeof one_tok) && !memcmp(cat_tgt, one_tgt, sizeof one_tgt));
        }
    }
    gpt_data_free(d);
}

/* A position whose loss is NaN, infinite or huge makes val_loss NaN: its floor
 * cast to int64 was undefined (INT64_MIN here), and 16384 of them summed to 0:
 * val_loss 0, perplexity 1 for a diverged model (plumb train gpt --lr 1e30 passed). */
TEST(gpt_eval_nonfinite_loss_is_nan)
{
    float loss[4] = {2.0f, NAN, 3.0f, INFINITY};
    int32_t tgt[4] = {1, 1, 1, 1};
    struct gpt_eval_acc a = {0};
    gpt_eval_add(&a, loss, tgt, 4);
    CHECK_EQ_INT(a.count, 4);
    CHECK_EQ_INT(a.bad, 2);
    CHECK(isnan(gpt_eval_loss(&a)));
    CHECK(isnan(gpt_eval_perplexity(&a)));
    float big[1] = {1e30f};
    struct gpt_eval_acc b = {0};
    gpt_eval_add(&b, big, tgt, 1);
    CHECK(isnan(gpt_eval_loss(&b)));
    /* a target of -1 is not scored, whatever its loss */
    int32_t none[2] = {-1, 1};
    float l2[2] = {NAN, 2.5f};
    struct gpt_eval_acc c = {0};
    gpt_eval_add(&c, l2, none, 2);
    CHECK_NEAR(gpt_eval_loss(&c), 2.5, 1e-9);
}

TEST(gpt_eval_exact_across_partitions)
{
    enum { N = 1000 };
    float loss[N];
    int32_t tgt[N];
    double ref = 0;
    long cnt = 0;
    for (int i = 0; i < N; i++) {
        loss[i] = (float)(0.5 + 7.0 * ((i * 2654435761u) % 1000) / 1000.0);
        tgt[i] = i % 13 == 0 ? -1 : 1;
        if (tgt[i] >= 0) ref += loss[i], cnt++;
    }
    struct gpt_eval_acc one = {0};
    gpt_eval_add(&one, loss, tgt, N);
    CHECK_EQ_INT(one.count, cnt);
    CHECK_NEAR(gpt_eval_loss(&one), ref / cnt, 1e-7);
    CHECK_NEAR(gpt_eval_perplexity(&one), exp(ref / cnt), 1e-6 * exp(ref / cnt));
    for (int parts = 2; parts <= 5; parts++) {
        struct gpt_eval_acc tot = {0};
        for (int p = 0; p < parts; p++) {
            struct gpt_eval_acc a = {0};
            const int i0 = N * p / parts, i1 = N * (p + 1) / parts;
            gpt_eval_add(&a, loss + i0, tgt + i0, (size_t)(i1 - i0));
            tot.whole += a.whole, tot.frac += a.frac, tot.count += a.count;
        }
        CHECK(tot.whole == one.whole && tot.frac == one.frac && tot.count == one.count);
    }
}

/* The synthetic token stream is data the recorded figures are computed from
 * (gpt's golden digests and losses, BENCHMARKS.md), as ctr's stream is
 * (tests/test_data.c data_synth_stream_pinned): its bits are pinned here.
 * SHA-256 over the int32 tokens [0, 4096) and [10^9, 10^9 + 1100) of both
 * splits at vocabularies 256 and 50257 (seed 1234). Re-record only with a
 * change that redefines the generator, and say so in that commit. */
TEST(gpt_synthetic_stream_pinned)
{
    hash_sha256 h;
    REQUIRE(hash_sha256_init(&h) == 0);
    int32_t *buf = malloc(4096 * sizeof(int32_t));
    REQUIRE(buf);
    const int vocab[2] = {256, 50257};
    for (int v = 0; v < 2; v++) {
        struct gpt_data_opts o = {.seed = 1234, .vocab = vocab[v], .synth_train = 2000000000ull,
                                  .synth_val = 2000000000ull, .val_fraction = 0.1};
        struct gpt_data *d = NULL;
        plumb_err e = {0};
        REQUIRE_MSG(gpt_data_open("synthetic", NULL, &o, &d, &e) == 0, "%s", e.msg);
        for (int split = 0; split < 2; split++) {
            gpt_data_read(d, split, 0, 4096, buf, NULL);
            hash_sha256_update(&h, buf, 4096 * sizeof(int32_t));
            gpt_data_read(d, split, 1000000000ull, 1100, buf, NULL);
            hash_sha256_update(&h, buf, 1100 * sizeof(int32_t));
        }
        gpt_data_free(d);
    }
    uint8_t dg[32];
    char hex[65];
    hash_sha256_final(&h, dg);
    hash_to_hex(dg, 32, hex);
    CHECK_STREQ(hex, "04eb7f25181ebbd8fdc98fbe3577ecbef592985076ad56621b80664405fca040");
    free(buf);
}

/* A token file truncated while it is mapped (core/mapguard.h): a window read
 * past its new end is PLUMB_EIO naming the file, from gpt_data_read and from
 * a batch (gpt_data_fill, on OpenMP threads); the windows still inside the
 * file read as before. (Unguarded, the read raised SIGBUS.) */
TEST(gpt_data_token_file_truncated_while_mapped)
{
    char p[600], spec[700];
    path_in_tmp(p, sizeof p, "shrink_train.bin");
    plumb_err e = {0};
    enum { N = 200000, T = 64, B = 512 };
    uint16_t *t = malloc(N * sizeof *t);
    REQUIRE(t);
    for (int i = 0; i < N; i++) t[i] = (uint16_t)(i % 251);
    REQUIRE(gpt_token_file_write(p, t, N, &e) == 0);
    free(t);
    snprintf(spec, sizeof spec, "tokens:%s", p);
    struct gpt_data_opts o = {1, 256, 0, 0, 0, 1};
    struct gpt_data *d = NULL;
    REQUIRE(gpt_data_open(spec, NULL, &o, &d, &e) == 0);
    REQUIRE(truncate(p, 1024 + 2 * 4096) == 0); /* 4096 tokens left */
    int32_t buf[T + 1];
    CHECK_EQ_INT(gpt_data_read(d, GPT_TRAIN, 100, T + 1, buf, &e), PLUMB_OK);
    CHECK(buf[0] == 100 && buf[T] == 100 + T);
    CHECK_EQ_INT(gpt_data_read(d, GPT_TRAIN, 150000, T + 1, buf, &e), PLUMB_EIO);
    CHECK_MSG(strstr(e.msg, p) && strstr(e.msg, "token file shrank while being read"), "%s", e.msg);
    int32_t *tok = malloc((size_t)B * T * sizeof *tok), *tgt = malloc((size_t)B * T * sizeof *tgt);
    uint32_t idx[B];
    for (int i = 0; i < B; i++) idx[i] = (uint32_t)(i * 5); /* windows up to 2555 * 64 tokens */
    err_clear(&e);
    REQUIRE(tok && tgt);
    CHECK_EQ_INT(gpt_data_fill(d, GPT_TRAIN, T, 1, 0, idx, B, B, tok, tgt, &e), PLUMB_EIO);
    CHECK_MSG(strstr(e.msg, p) && strstr(e.msg, "shrank"), "%s", e.msg);
    CHECK_EQ_INT(gpt_data_fill(d, GPT_TRAIN, T, 1, 0, idx, 8, 8, tok, tgt, &e), PLUMB_OK); /* the first 8: inside */
    CHECK(tok[T] == (5 * T) % 251 && tgt[T - 1] == T); /* row 1 is window 5; tokens are i mod 251 */
    free(tok);
    free(tgt);
    gpt_data_free(d);
}
