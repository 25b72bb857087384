/* train/criteo.c, train/synth.c, train/data.c: the real format with its
 * awkward lines, gzip, the teacher's calibration, TSV round trip. */
#include "test.h"
#include "core/file.h"
#include "core/hash.h"
#include "models/ctr/criteo.h"
#include "models/ctr/data.h"
#include "models/ctr/eval.h"
#include "models/ctr/synth.h"
#include "dev/dev.h"
#include "train/devfeed.h"
#include <stdlib.h>
#include <zlib.h>

static const char *toks26 = "\t68fd1e64\t80e26c9b\tfb936136\t7b4723c4\t25c83c98\t7e0ccccf\tde7995b8\t1f89b562\t"
                            "a73ee510\ta8cd5504\tb2cb9c98\t37c9c164\t2824a5f6\t1adce6ef\t8ba8b39a\t891b62e7\t"
                            "e5ba7672\tf54016b9\t21ddcdc9\tb1252a9d\t07b5194c\t\t3a171ecb\tc5c50484\te8b83407\t9727dd16";

static void write_text(const char *path, const char *s)
{
    plumb_err e = {0};
    if (file_write_atomic(path, s, strlen(s), &e)) fprintf(stderr, "%s\n", e.msg);
}

static int read_file_samples(const char *path, enum criteo_bad bad, struct criteo_sample *out, int max,
                             int *n, long *skipped, long *trunc, plumb_err *e)
{
    struct criteo_reader *r;
    int rc = criteo_open(path, bad, &r, e);
    if (rc) return rc;
    *n = 0;
    for (;;) {
        int got;
        struct criteo_sample s;
        if ((rc = criteo_next(r, &s, &got, e))) break;
        if (!got) break;
        if (*n < max) out[*n] = s;
        (*n)++;
    }
    if (skipped) *skipped = criteo_skipped(r);
    if (trunc) *trunc = criteo_truncated(r);
    criteo_close(r);
    return rc;
}

TEST(data_criteo_fields_empty_crlf_truncated)
{
    char path[512], text[4096];
    plumb_err e = {0};
    REQUIRE(!file_join(path, sizeof path, test_tmpdir(), "crit.tsv", &e));
    /* line 1: all integers present; line 2: empty integers and an empty token,
     * CRLF; line 3: negative integer; line 4: truncated (no newline, 5 fields) */
    snprintf(text, sizeof text,
             "0\t1\t1\t5\t0\t1382\t4\t15\t2\t181\t1\t2\t\t2%s\n"
             "1\t\t0\t\t\t\t\t\t\t\t\t\t\t%s\r\n"
             "0\t-1\t7\t1\t1\t1\t1\t1\t1\t1\t1\t1\t1\t1%s\n"
             "1\t2\t3\t4\t5",
             toks26, toks26, toks26);
    write_text(path, text);
    struct criteo_sample s[8];
    int n;
    long skipped, trunc;
    REQUIRE(read_file_samples(path, CRITEO_BAD_ERROR, s, 8, &n, &skipped, &trunc, &e) == 0);
    CHECK_EQ_INT(n, 3);
    CHECK_EQ_INT(trunc, 1);
    CHECK_EQ_INT(skipped, 0);
    CHECK(s[0].label == 0.0f && s[1].label == 1.0f);
    CHECK_NEAR(s[0].dense[0], log(2.0), 1e-6);
    CHECK_NEAR(s[0].dense[4], log(1383.0), 1e-6);
    CHECK(s[0].dense[3] == 0.0f); /* x = 0 */
    CHECK(s[0].dense[11] == 0.0f); /* empty */
    CHECK_NEAR(s[0].dense[12], log(3.0), 1e-6);
    for (int i = 0; i < 13; i++)
        if (i != 1) CHECK(s[1].dense[i] == 0.0f);
    CHECK(s[2].dense[0] == 0.0f); /* -1 -> max(x,0) = 0 */
    /* CRLF does not change the last token's hash */
    CHECK_EQ_INT(s[1].cat[25], criteo_hash(25, "9727dd16", 8));
    CHECK_EQ_INT(s[0].cat[25], s[1].cat[25]);
    /* the empty token (C22) hashes to the field's missing row */
    CHECK_EQ_INT(s[0].cat[21], criteo_hash(21, "", 0));
    /* the field index is part of the hash */
    CHECK(criteo_hash(0, "68fd1e64", 8) != criteo_hash(1, "68fd1e64", 8));
}

TEST(data_criteo_bad_field_names_line_and_field)
{
    char path[512], text[4096];
    plumb_err e = {0};
    REQUIRE(!file_join(path, sizeof path, test_tmpdir(), "bad.tsv", &e));
    snprintf(text, sizeof text, "0\t1\t1\t5\t0\t1382\t4\t15\t2\t181\t1\t2\t\t2%s\n"
                                "1\t3\t1\tx7\t0\t1\t4\t15\t2\t181\t1\t2\t\t2%s\n"
                                "1\t3\t1%s\n"
                                "0\t1\t1\t5\t0\t1382\t4\t15\t2\t181\t1\t2\t\t2%s\n",
             toks26, toks26, toks26, toks26);
    write_text(path, text);
    struct criteo_sample s[8];
    int n;
    int rc = read_file_samples(path, CRITEO_BAD_ERROR, s, 8, &n, NULL, NULL, &e);
    CHECK_EQ_INT(rc, PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "bad.tsv") && strstr(e.msg, "line 2") && strstr(e.msg, "I3") && strstr(e.msg, "'x7'"),
              "%s", e.msg);
    long skipped;
    err_clear(&e);
    REQUIRE(read_file_samples(path, CRITEO_BAD_SKIP, s, 8, &n, &skipped, NULL, &e) == 0);
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(skipped, 2);
    /* a bad label */
    write_text(path, "2\t1\n");
    rc = read_file_samples(path, CRITEO_BAD_ERROR, s, 8, &n, NULL, NULL, &e);
    CHECK_MSG(rc == PLUMB_EUSAGE && strstr(e.msg, "line 1") && strstr(e.msg, "label"), "%s", e.msg);
    /* a missing file */
    rc = read_file_samples("/nonexistent/x.tsv", CRITEO_BAD_ERROR, s, 8, &n, NULL, NULL, &e);
    CHECK_MSG(rc == PLUMB_EUSAGE && strstr(e.msg, "/nonexistent/x.tsv"), "%s", e.msg);
}

TEST(data_criteo_gzip_equals_plain)
{
    char plain[512], gzp[512];
    plumb_err e = {0};
    REQUIRE(!file_join(plain, sizeof plain, test_tmpdir(), "p.tsv", &e));
    REQUIRE(!file_join(gzp, sizeof gzp, test_tmpdir(), "p.tsv.gz", &e));
    /* enough lines to cross the reader's 1 MiB buffer */
    FILE *f = fopen(plain, "w");
    gzFile g = gzopen(gzp, "wb");
    REQUIRE(f && g);
    struct synth *sy;
    REQUIRE(synth_create(7, &sy, &e) == 0);
    char line[1024];
    const int N = 9000;
    for (int i = 0; i < N; i++) {
        struct synth_raw r;
        synth_raw_sample(sy, 0, (uint64_t)i, &r);
        const char *tk[26];
        for (int t = 0; t < 26; t++) tk[t] = r.token[t];
        int len = criteo_format_line(line, sizeof line, r.label, r.dense, r.missing, tk);
        REQUIRE(len > 0);
        fwrite(line, 1, (size_t)len, f);
        gzwrite(g, line, (unsigned)len);
    }
    fclose(f);
    gzclose(g);
    static struct criteo_sample a[9000], b[9000];
    int na, nb;
    REQUIRE(read_file_samples(plain, CRITEO_BAD_ERROR, a, N, &na, NULL, NULL, &e) == 0);
    REQUIRE(read_file_samples(gzp, CRITEO_BAD_ERROR, b, N, &nb, NULL, NULL, &e) == 0);
    CHECK_EQ_INT(na, N);
    CHECK_EQ_INT(nb, N);
    CHECK(!memcmp(a, b, sizeof a));
    /* the file holds exactly what the generator produces in memory */
    int same = 1;
    for (int i = 0; i < N; i++) {
        struct criteo_sample s;
        synth_sample(sy, 0, (uint64_t)i, &s, NULL);
        same &= !memcmp(&s, &a[i], sizeof s);
    }
    CHECK(same);
    synth_free(sy);
}

/* The bounds of a line: a 41st field is refused before it is stored (the
 * struct is followed by a canary here: nothing may be written past cat[25]),
 * and so is a line of 40 fields with a trailing tab. */
TEST(data_criteo_41_fields_refused_in_bounds)
{
    char line[2048];
    snprintf(line, sizeof line, "1\t1\t2\t3\t4\t5\t6\t7\t8\t9\t10\t11\t12\t13%s\textra", toks26);
    struct {
        struct criteo_sample s;
        uint32_t canary[8];
    } g;
    memset(&g, 0xab, sizeof g);
    plumb_err e = {0};
    CHECK_EQ_INT(criteo_parse_line(line, strlen(line), &g.s, &e), PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "more than 40 tab-separated fields") != NULL, "%s", e.msg);
    int intact = 1;
    for (int i = 0; i < 8; i++) intact &= g.canary[i] == 0xabababab;
    CHECK_MSG(intact, "a 41-field line wrote past the sample");
    /* 40 fields and a trailing tab: a 41st (empty) field */
    snprintf(line, sizeof line, "1\t1\t2\t3\t4\t5\t6\t7\t8\t9\t10\t11\t12\t13%s\t", toks26);
    memset(&g, 0xab, sizeof g);
    err_clear(&e);
    CHECK_EQ_INT(criteo_parse_line(line, strlen(line), &g.s, &e), PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "more than 40") != NULL, "%s", e.msg);
    intact = 1;
    for (int i = 0; i < 8; i++) intact &= g.canary[i] == 0xabababab;
    CHECK(intact);
    /* exactly 40 parse, and fill cat[25] */
    snprintf(line, sizeof line, "1\t1\t2\t3\t4\t5\t6\t7\t8\t9\t10\t11\t12\t13%s", toks26);
    err_clear(&e);
    REQUIRE(criteo_parse_line(line, strlen(line), &g.s, &e) == PLUMB_OK);
    CHECK_EQ_INT(g.s.cat[25], criteo_hash(25, "9727dd16", 8));
}

/* Integer fields: the whole long long range, nothing beyond (no silent
 * wrap-around), signs, and junk. */
TEST(data_criteo_int_overflow)
{
    struct {
        const char *tok;
        int ok;
        double dense0; /* log(1 + max(x, 0)) */
    } cs[] = {
        {"9223372036854775807", 1, log(9223372036854775807.0 + 1.0)}, /* LLONG_MAX */
        {"9223372036854775808", 0, 0},                                 /* LLONG_MAX + 1 */
        {"9223372036854775810", 0, 0},
        {"99999999999999999999", 0, 0},
        {"18446744073709551617", 0, 0}, /* 2^64 + 1: wraps to 1 in 64 bits */
        {"-9223372036854775808", 1, 0}, /* LLONG_MIN */
        {"-9223372036854775809", 0, 0},
        {"+5", 1, log(6.0)},
        {"0000000000000000000000000012", 1, log(13.0)}, /* leading zeros are not an overflow */
        {"-", 0, 0},
        {"1e3", 0, 0},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        char line[2048];
        snprintf(line, sizeof line, "0\t%s\t1\t1\t1\t1\t1\t1\t1\t1\t1\t1\t1\t1%s", cs[i].tok, toks26);
        struct criteo_sample s;
        plumb_err e = {0};
        int rc = criteo_parse_line(line, strlen(line), &s, &e);
        CHECK_MSG(rc == (cs[i].ok ? PLUMB_OK : PLUMB_EUSAGE), "I1 = '%s': rc %d (%s)", cs[i].tok, rc, e.msg);
        if (cs[i].ok && !rc)
            CHECK_MSG(fabs(s.dense[0] - cs[i].dense0) <= 1e-6 * (1 + cs[i].dense0), "I1 = '%s': %.9g, want %.9g",
                      cs[i].tok, (double)s.dense[0], cs[i].dense0);
        if (!cs[i].ok) CHECK_MSG(strstr(e.msg, "I1") && strstr(e.msg, "not an integer"), "I1 = '%s': %s", cs[i].tok, e.msg);
    }
}

/* A damaged gzip file is an error naming the file and the line reached,
 * never a silent short read: a flipped byte inside the compressed data
 * (the inflate stream or its CRC fails) and a file cut short. */
TEST(data_criteo_gzip_read_errors)
{
    char gzp[512], bad[512];
    plumb_err e = {0};
    REQUIRE(!file_join(gzp, sizeof gzp, test_tmpdir(), "damaged.tsv.gz", &e));
    REQUIRE(!file_join(bad, sizeof bad, test_tmpdir(), "damaged2.tsv.gz", &e));
    gzFile g = gzopen(gzp, "wb");
    REQUIRE(g);
    struct synth *sy;
    REQUIRE(synth_create(11, &sy, &e) == 0);
    char line[1024];
    const int N = 6000;
    for (int i = 0; i < N; i++) {
        struct synth_raw r;
        synth_raw_sample(sy, 0, (uint64_t)i, &r);
        const char *tk[26];
        for (int t = 0; t < 26; t++) tk[t] = r.token[t];
        int len = criteo_format_line(line, sizeof line, r.label, r.dense, r.missing, tk);
        REQUIRE(len > 0);
        gzwrite(g, line, (unsigned)len);
    }
    gzclose(g);
    synth_free(sy);
    char *buf = NULL;
    size_t len = 0;
    REQUIRE(file_read_all(gzp, &buf, &len, &e) == 0);
    REQUIRE(len > 4096);
    struct criteo_sample s[4];
    int n = 0;
    /* intact: every line */
    REQUIRE(read_file_samples(gzp, CRITEO_BAD_ERROR, s, 4, &n, NULL, NULL, &e) == 0);
    CHECK_EQ_INT(n, N);
    /* one byte flipped two thirds of the way in */
    buf[len * 2 / 3] ^= 0x55;
    REQUIRE(file_write_atomic(bad, buf, len, &e) == 0);
    err_clear(&e);
    int rc = read_file_samples(bad, CRITEO_BAD_SKIP, s, 4, &n, NULL, NULL, &e);
    CHECK_MSG(rc != PLUMB_OK, "a corrupted gzip file read as %d lines without an error", n);
    CHECK_MSG(strstr(e.msg, "damaged2.tsv.gz") && strstr(e.msg, "line "), "message: %s", e.msg);
    CHECK_MSG(n < N, "%d lines from a corrupted file", n);
    /* cut short: the last third missing */
    buf[len * 2 / 3] ^= 0x55;
    REQUIRE(file_write_atomic(bad, buf, len * 2 / 3, &e) == 0);
    err_clear(&e);
    rc = read_file_samples(bad, CRITEO_BAD_SKIP, s, 4, &n, NULL, NULL, &e);
    CHECK_MSG(rc != PLUMB_OK, "a truncated gzip file read as %d lines without an error", n);
    CHECK_MSG(strstr(e.msg, "damaged2.tsv.gz") && strstr(e.msg, "read error"), "message: %s", e.msg);
    free(buf);
}

TEST(data_synth_teacher_calibration)
{
    plumb_err e = {0};
    struct synth *sy;
    REQUIRE(synth_create(1234, &sy, &e) == 0);
    const int N = 40000;
    float *p = malloc(N * sizeof *p), *y = malloc(N * sizeof *y);
    double pos = 0;
    for (int i = 0; i < N; i++) {
        struct criteo_sample s;
        synth_sample(sy, SYNTH_EVAL, (uint64_t)i, &s, &p[i]);
        y[i] = s.label;
        pos += s.label;
    }
    double auc = eval_auc(p, y, N);
    fprintf(stderr, "  teacher: positive rate %.4f, AUC %.4f on %d eval samples\n", pos / N, auc, N);
    CHECK(pos / N > 0.20 && pos / N < 0.30);
    CHECK(auc > 0.77 && auc < 0.83);
    /* independent of order: sample 123 drawn alone equals sample 123 in the loop */
    struct criteo_sample s1, s2;
    synth_sample(sy, SYNTH_EVAL, 123, &s1, NULL);
    synth_sample(sy, SYNTH_EVAL, 124, &s2, NULL);
    synth_sample(sy, SYNTH_EVAL, 123, &s2, NULL);
    CHECK(!memcmp(&s1, &s2, sizeof s1));
    /* splits differ */
    synth_sample(sy, SYNTH_TRAIN, 123, &s2, NULL);
    CHECK(memcmp(&s1, &s2, sizeof s1) != 0);
    free(p), free(y);
    synth_free(sy);
}

/* The synthetic stream is data every recorded digest is computed from
 * (golden parameter digests, BENCHMARKS.md): its bits are pinned here. The
 * SHA-256 of the raw samples 0..1999 of both splits (each sample's label,
 * dense values, missing flags, tokens and the teacher's p, field by field)
 * must be the recorded one. Re-record it only with a change that redefines
 * the generator, and say so in that commit. */
TEST(data_synth_stream_pinned)
{
    plumb_err e = {0};
    struct synth *sy;
    REQUIRE(synth_create(1234, &sy, &e) == 0);
    hash_sha256 h;
    REQUIRE(hash_sha256_init(&h) == 0);
    for (int split = 0; split < 2; split++)
        for (uint64_t i = 0; i < 2000; i++) {
            struct synth_raw r;
            synth_raw_sample(sy, split ? SYNTH_EVAL : SYNTH_TRAIN, i, &r);
            hash_sha256_update(&h, &r.label, sizeof r.label);
            hash_sha256_update(&h, r.dense, sizeof r.dense);
            hash_sha256_update(&h, r.missing, sizeof r.missing);
            for (int t = 0; t < CRITEO_CAT; t++) hash_sha256_update(&h, r.token[t], strlen(r.token[t]) + 1);
            hash_sha256_update(&h, &r.p, sizeof r.p);
        }
    uint8_t d[32];
    char hex[65];
    hash_sha256_final(&h, d);
    hash_to_hex(d, 32, hex);
    CHECK_STREQ(hex, "4e19878b74b6f6dfe3bb996800c6ea22706c09e9572bfc78d45c3080846f725b");
    synth_free(sy);
}

TEST(data_loader_matches_sampler)
{
    plumb_err e = {0};
    struct data_opts o = {.seed = 5, .train_samples = 1000, .eval_samples = 100};
    struct dataset *d;
    REQUIRE(dataset_open("synthetic", &o, &d, &e) == 0);
    int64_t rows[26];
    for (int t = 0; t < 26; t++) rows[t] = 97 + t;
    struct sampler s, ref;
    REQUIRE(sampler_init(&s, 1000, 96, 16, 3, 1, &e) == 0);
    REQUIRE(sampler_init(&ref, 1000, 96, 16, 3, 1, &e) == 0);
    struct loader *l;
    struct data_source src;
    struct feed_source fs;
    ctr_source_wrap(&src, d, rows);
    ctr_feed_source(&src, &fs);
    REQUIRE(loader_start(&fs, &s, 1, 3, 5, 30, 3, &l, &e) == 0);
    int ok = 1;
    for (long step = 5; step < 30; step++) {
        struct host_batch *b;
        double w;
        REQUIRE(loader_next(l, &b, &w, &e) == 0);
        uint32_t idx[96];
        int sv[8];
        struct sampler_step st;
        sampler_get(&ref, step, 1, 3, &st, idx, sv, &e);
        ok &= b->st.step == step && b->n == st.local_valid;
        for (int i = 0; i < b->n; i++) {
            struct criteo_sample cs;
            dataset_get(d, 0, idx[i], &cs);
            const float *labels = b->field[CTR_F_LABEL];
            const uint32_t *sparse = b->field[CTR_F_SPARSE];
            ok &= labels[i] == cs.label && sparse[i * 26 + 3] == cs.cat[3] % 100;
        }
        loader_release(l, b);
    }
    CHECK(ok);
    loader_stop(l);
    sampler_free(&s);
    sampler_free(&ref);
    dataset_free(d);
}

/* data_fill's table rows (a division-free remainder) equal hash % rows for
 * every edge: rows 1, 2, powers of two, primes, 2^32 - 1; hashes 0, 1,
 * rows - 1, rows, 2^32 - 1 and random ones; from an in-memory dataset. */
TEST(data_fill_rows_equal_hash_mod_rows)
{
    enum { N = 4096 };
    struct criteo_sample *mem = calloc(N, sizeof *mem);
    REQUIRE(mem != NULL);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    const uint32_t edge[] = {0u, 1u, 2u, 3u, 0x7fffffffu, 0x80000000u, 0xfffffffeu, 0xffffffffu};
    for (int i = 0; i < N; i++)
        for (int t = 0; t < CRITEO_CAT; t++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            mem[i].cat[t] = i < 8 ? edge[i] : (uint32_t)(s >> 32);
        }
    const int64_t choices[] = {1, 2, 3, 7, 1000, 1 << 20, 1000003, 10000000, 0x7fffffffLL, 0x80000000LL,
                               0xfffffffeLL, 0xffffffffLL, 26, 65536, 999999937};
    int64_t rows[CRITEO_CAT];
    for (int t = 0; t < CRITEO_CAT; t++) rows[t] = choices[t % (sizeof choices / sizeof choices[0])];
    /* hashes at each table's own edges: rows - 1, rows, rows + 1 */
    for (int t = 0; t < CRITEO_CAT; t++) {
        mem[8].cat[t] = (uint32_t)(rows[t] - 1);
        mem[9].cat[t] = (uint32_t)rows[t];
        mem[10].cat[t] = (uint32_t)(rows[t] + 1);
    }
    struct dataset ds;
    memset(&ds, 0, sizeof ds);
    ds.mem[0] = mem;
    ds.n[0] = N;
    uint32_t *idx = malloc(N * sizeof *idx), *sparse = malloc((size_t)N * CRITEO_CAT * sizeof *sparse);
    float *dense = malloc((size_t)N * CRITEO_DENSE * sizeof *dense), *lab = malloc(N * sizeof *lab);
    REQUIRE(idx && sparse && dense && lab);
    for (int i = 0; i < N; i++) idx[i] = (uint32_t)((i * 2654435761u) % N); /* a permutation: N is a power of 2 */
    REQUIRE(data_fill(&ds, 0, idx, N, rows, dense, sparse, lab, NULL) == 0);
    long bad = 0;
    for (int i = 0; i < N; i++)
        for (int t = 0; t < CRITEO_CAT; t++)
            bad += sparse[(size_t)i * CRITEO_CAT + t] != mem[idx[i]].cat[t] % (uint32_t)rows[t];
    CHECK_MSG(bad == 0, "%ld of %d rows differ from hash %% rows", bad, N * CRITEO_CAT);
    free(idx), free(sparse), free(dense), free(lab), free(mem);
}

/* data_fill gathers in blocks and takes the remainders after each block:
 * every field of every sample equals the sample's own, for counts that are
 * not a multiple of the block, one sample and none. */
TEST(data_fill_blocks_equal_samples)
{
    enum { N = 1500 };
    struct criteo_sample *mem = calloc(N, sizeof *mem);
    REQUIRE(mem != NULL);
    uint64_t s = 12345;
    for (int i = 0; i < N; i++) {
        uint32_t *w = (uint32_t *)&mem[i];
        for (size_t k = 0; k < sizeof mem[i] / 4; k++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            w[k] = (uint32_t)(s >> 40); /* < 2^24: dense words stay finite floats */
        }
        mem[i].label = (float)(i % 3 == 0);
    }
    int64_t rows[CRITEO_CAT];
    for (int t = 0; t < CRITEO_CAT; t++) rows[t] = 1000 + 37 * t;
    struct dataset ds;
    memset(&ds, 0, sizeof ds);
    ds.mem[0] = mem;
    ds.n[0] = N;
    uint32_t *idx = malloc(N * sizeof *idx), *sparse = malloc((size_t)N * CRITEO_CAT * sizeof *sparse);
    float *dense = malloc((size_t)N * CRITEO_DENSE * sizeof *dense), *lab = malloc(N * sizeof *lab);
    REQUIRE(idx && sparse && dense && lab);
    for (int i = 0; i < N; i++) idx[i] = (uint32_t)((i * 7919u + 13u) % N);
    const int counts[] = {N, 1, 0, 255, 256, 257, 1000};
    long bad = 0;
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        int n = counts[c];
        REQUIRE(data_fill(&ds, 0, idx, n, rows, dense, sparse, lab, NULL) == 0);
        for (int i = 0; i < n; i++) {
            const struct criteo_sample *m = &mem[idx[i]];
            bad += lab[i] != m->label || memcmp(dense + (size_t)i * CRITEO_DENSE, m->dense, sizeof m->dense) != 0;
            for (int t = 0; t < CRITEO_CAT; t++) bad += sparse[(size_t)i * CRITEO_CAT + t] != m->cat[t] % (uint32_t)rows[t];
        }
    }
    CHECK_MSG(bad == 0, "%ld fields differ from the samples'", bad);
    free(idx), free(sparse), free(dense), free(lab), free(mem);
}

/* The device feed on the cpu device with a pool of build threads: batches
 * cut into chunks that the threads claim (the last one partial), across
 * epoch boundaries (the sampler's look-ahead) and a partial last batch of an
 * epoch: every batch equals data_fill of the sampler's indices. */
TEST(data_devfeed_pool_batches_equal_sampler_fill)
{
    enum { N = 7001, B = 3000, STEPS = 10, THREADS = 3 };
    plumb_err e = {0};
    struct criteo_sample *mem = calloc(N, sizeof *mem);
    REQUIRE(mem != NULL);
    uint64_t x = 777;
    for (int i = 0; i < N; i++) {
        uint32_t *w = (uint32_t *)&mem[i];
        for (size_t k = 0; k < sizeof mem[i] / 4; k++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            w[k] = (uint32_t)(x >> 40);
        }
    }
    struct dataset ds;
    memset(&ds, 0, sizeof ds);
    ds.mem[0] = ds.mem[1] = mem;
    ds.n[0] = N;
    ds.n[1] = 1;
    int64_t rows[CRITEO_CAT];
    for (int t = 0; t < CRITEO_CAT; t++) rows[t] = 5000 + t;
    struct dev *d = NULL;
    REQUIRE(dev_open("cpu", &d, &e) == 0);
    struct data_source src;
    struct feed_source fs;
    ctr_source_wrap(&src, &ds, rows);
    ctr_feed_source(&src, &fs);
    struct sampler s, ref;
    REQUIRE(sampler_init(&s, N, B, B, 21, 1, &e) == 0);
    REQUIRE(sampler_init(&ref, N, B, B, 21, 1, &e) == 0);
    struct devfeed *f = NULL;
    REQUIRE(devfeed_start(d, &fs, SPLIT_TRAIN, &s, 0, 1, 0, STEPS, 3, THREADS, &f, &e) == 0);
    uint32_t *idx = malloc(B * sizeof *idx), *sparse = malloc((size_t)B * CRITEO_CAT * 4);
    float *dense = malloc((size_t)B * CRITEO_DENSE * 4), *lab = malloc(B * 4);
    REQUIRE(idx && sparse && dense && lab);
    long bad = 0;
    for (long step = 0; step < STEPS; step++) {
        struct batch b;
        long sn;
        double w;
        REQUIRE(devfeed_next(f, &b, &sn, &w, &e) == 0);
        struct sampler_step st;
        int sv[1];
        REQUIRE(sampler_get(&ref, step, 0, 1, &st, idx, sv, &e) == 0);
        REQUIRE(data_fill(&ds, 0, idx, (int)st.local_valid, rows, dense, sparse, lab, NULL) == 0);
        bad += sn != step || b.n_valid != st.local_valid;
        bad += memcmp(b.field[CTR_F_DENSE], dense, (size_t)st.local_valid * CRITEO_DENSE * 4) != 0;
        bad += memcmp(b.field[CTR_F_SPARSE], sparse, (size_t)st.local_valid * CRITEO_CAT * 4) != 0;
        bad += memcmp(b.field[CTR_F_LABEL], lab, (size_t)st.local_valid * 4) != 0;
        devfeed_release(f);
    }
    CHECK_MSG(bad == 0, "%ld mismatches between the feed's batches and the sampler's", bad);
    devfeed_stop(f);
    sampler_free(&s);
    sampler_free(&ref);
    dev_close(d);
    free(idx), free(sparse), free(dense), free(lab), free(mem);
}

/* A gzip file cut short: at a line boundary of the uncompressed text (a
 * sync-flushed stream without its trailer) and in the middle of the
 * compressed bytes. Both are errors naming the file and "truncated gzip
 * stream", never a shorter dataset. */
TEST(data_criteo_truncated_gzip_is_an_error)
{
    char full[512], cut[512], mid[512];
    plumb_err e = {0};
    REQUIRE(!file_join(full, sizeof full, test_tmpdir(), "tg-full.tsv.gz", &e));
    REQUIRE(!file_join(cut, sizeof cut, test_tmpdir(), "tg-cut.tsv.gz", &e));
    REQUIRE(!file_join(mid, sizeof mid, test_tmpdir(), "tg-mid.tsv.gz", &e));
    char line[1024];
    snprintf(line, sizeof line, "1\t2\t3\t4\t5\t6\t7\t8\t9\t10\t11\t12\t13\t14%s\n", toks26);
    /* the whole stream, and the same stream flushed after 500 lines with no trailer */
    static unsigned char out[1 << 20];
    z_stream z;
    memset(&z, 0, sizeof z);
    REQUIRE(deflateInit2(&z, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    z.next_out = out;
    z.avail_out = sizeof out;
    for (int i = 0; i < 2000; i++) {
        z.next_in = (unsigned char *)line;
        z.avail_in = (unsigned)strlen(line);
        REQUIRE(deflate(&z, i == 499 ? Z_SYNC_FLUSH : Z_NO_FLUSH) == Z_OK);
        if (i == 499) {
            FILE *f = fopen(cut, "wb");
            REQUIRE(f);
            fwrite(out, 1, sizeof out - z.avail_out, f);
            fclose(f);
        }
    }
    REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
    size_t total = sizeof out - z.avail_out;
    deflateEnd(&z);
    FILE *f = fopen(full, "wb");
    REQUIRE(f);
    fwrite(out, 1, total, f);
    fclose(f);
    f = fopen(mid, "wb");
    REQUIRE(f);
    fwrite(out, 1, total / 2, f);
    fclose(f);
    int n;
    long skipped, trunc;
    static struct criteo_sample s[4];
    REQUIRE(read_file_samples(full, CRITEO_BAD_ERROR, s, 4, &n, &skipped, &trunc, &e) == 0);
    CHECK_EQ_INT(n, 2000);
    const char *bad[2] = {cut, mid};
    for (int k = 0; k < 2; k++) {
        err_clear(&e);
        int rc = read_file_samples(bad[k], CRITEO_BAD_ERROR, s, 4, &n, &skipped, &trunc, &e);
        CHECK_EQ_INT(rc, PLUMB_EUSAGE);
        CHECK_MSG(strstr(e.msg, "truncated gzip stream") && strstr(e.msg, bad[k]), "%s", e.msg);
        /* skipping bad lines does not skip a cut file */
        err_clear(&e);
        CHECK_EQ_INT(read_file_samples(bad[k], CRITEO_BAD_SKIP, s, 4, &n, &skipped, &trunc, &e), PLUMB_EUSAGE);
    }
}

/* A line longer than CRITEO_MAX_LINE (a binary file, /dev/zero) is an error
 * naming the file and the line, read with bounded memory. */
TEST(data_criteo_line_length_is_capped)
{
    char path[512];
    plumb_err e = {0};
    REQUIRE(!file_join(path, sizeof path, test_tmpdir(), "long.tsv", &e));
    char line[1024];
    snprintf(line, sizeof line, "0\t1\t2\t3\t4\t5\t6\t7\t8\t9\t10\t11\t12\t13%s\n", toks26);
    FILE *f = fopen(path, "wb");
    REQUIRE(f);
    fputs(line, f);
    for (long i = 0; i < CRITEO_MAX_LINE + 10; i++) fputc('7', f);
    fputc('\n', f);
    fclose(f);
    struct criteo_sample s[4];
    int n;
    long skipped, trunc;
    CHECK_EQ_INT(read_file_samples(path, CRITEO_BAD_SKIP, s, 4, &n, &skipped, &trunc, &e), PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "line 2 is longer than") && strstr(e.msg, path), "%s", e.msg);
    /* /dev/zero: one endless line */
    err_clear(&e);
    CHECK_EQ_INT(read_file_samples("/dev/zero", CRITEO_BAD_ERROR, s, 4, &n, &skipped, &trunc, &e), PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "/dev/zero: line 1 is longer than"), "%s", e.msg);
}

/* A file split that holds no sample is named by its option and file:
 * an empty --eval-data file said "<the --data file>: N train and 0 eval
 * samples", an empty --data file with --eval-data "<it>: 0 train and N". */
TEST(data_empty_split_names_its_file)
{
    char tr[512], ev[512], empty[512], line[1024];
    snprintf(tr, sizeof tr, "%s/split_train.tsv", test_tmpdir());
    snprintf(ev, sizeof ev, "%s/split_eval.tsv", test_tmpdir());
    snprintf(empty, sizeof empty, "%s/split_empty.tsv", test_tmpdir());
    snprintf(line, sizeof line, "1\t1\t2\t3\t4\t5\t6\t7\t8\t9\t10\t11\t12\t13%s\n", toks26);
    write_text(tr, line);
    write_text(ev, line);
    write_text(empty, "");
    plumb_err e = {0};
    struct dataset *d = NULL;
    struct data_opts o = {.seed = 1, .eval_file = empty, .eval_fraction = 0.1};
    CHECK_EQ_INT(dataset_open(tr, &o, &d, &e), PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "--eval-data") && strstr(e.msg, empty) && !strstr(e.msg, tr), "%s", e.msg);
    o.eval_file = ev;
    CHECK_EQ_INT(dataset_open(empty, &o, &d, &e), PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "--data") && strstr(e.msg, empty) && !strstr(e.msg, "--eval-data"), "%s", e.msg);
    REQUIRE(dataset_open(tr, &o, &d, &e) == 0);
    CHECK(d->n[0] == 1 && d->n[1] == 1);
    dataset_free(d);
}
